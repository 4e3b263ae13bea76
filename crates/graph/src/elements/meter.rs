//! `Meter(RATE1, ..., RATEn)` and `BandwidthMeter(RATE1, ..., RATEn)`: send each
//! packet to the output of the band its stream's measured rate is in, as Click's elements
//! of the same names: output 0 while the rate is below RATE1, output i while it is at
//! least RATEi and below RATEi+1, output n from RATEn on. Meter measures packets a
//! second, BandwidthMeter bytes a second (its rates are bandwidths: `20kBps`, `1Mbps`; a
//! plain number is bytes a second, with Click's warning).
//!
//! The rate is Click's `RateEWMA`, the estimator Counter's `rate` handler uses
//! ([`super::counter::Ewma`]): a moving average over 1 ms epochs (Click's jiffies),
//! alpha 1/16, 10 bits of fraction, updated with the epoch's count when the next epoch
//! begins. The average therefore stays the same within an epoch, so every packet of a
//! batch (all taken at one reading of the clock) goes to the same output, as they would
//! one by one in Click. One estimator serves every worker, so the rate is the router's;
//! a worker takes its lock once a batch.

use super::counter::{unparse_real2, Ewma, PACKET_SCALE};
use super::shared::lock;
use super::tokenbucket::jiffies;
use crate::args::{Args, Bandwidth, FromArg};
use crate::element::*;
use crate::error::ConfigError;
use packet::PacketBatch;
use std::sync::{Arc, Mutex};

/// Bits of fraction of Click's `RateEWMA`, for packets and bytes alike.
const SCALE: u32 = PACKET_SCALE;
/// Epochs a second (Click's user-level jiffies are milliseconds).
const EPOCH_FREQUENCY: u64 = 1000;
/// The largest rate Click's 32-bit fixed point takes: `0xFFFFFFFF >> scale`.
const MAX_RATE: u64 = 0xffff_ffff >> SCALE;

/// The class of `Meter` (packets a second) or `BandwidthMeter` (bytes a second).
pub struct MeterClass {
    bandwidth: bool,
}

pub const METER: MeterClass = MeterClass { bandwidth: false };
pub const BANDWIDTH_METER: MeterClass = MeterClass { bandwidth: true };

impl MeterClass {
    /// One rate argument, `index` counting from 1 as Click's messages do.
    fn rate(&self, text: &str, index: usize, name: &str) -> Result<u64, String> {
        let text = text.trim();
        if !self.bandwidth {
            return u32::from_arg(text)
                .map(u64::from)
                .ok_or_else(|| format!("argument {} expects rate (packets per second)", index));
        }
        let v = Bandwidth::from_arg(text)
            .map(|b| b.0.round())
            .filter(|v| (0.0..=u32::MAX as f64).contains(v))
            .ok_or_else(|| format!("argument {} syntax error", index))?;
        if text.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
            crate::warn!(
                "{}: no units for bandwidth argument {}, assuming Bps",
                name,
                index
            );
        }
        Ok(v as u64)
    }
}

impl ElementClass for MeterClass {
    fn name(&self) -> &'static str {
        if self.bandwidth {
            "BandwidthMeter"
        } else {
            "Meter"
        }
    }
    fn port_count(&self) -> PortCount {
        PortCount::parse("1/2-")
    }
    fn build(&self, args: &mut Args, cx: &BuildContext) -> Result<Arc<dyn ElementSpec>, ConfigError> {
        let texts = args.rest();
        if texts.is_empty() {
            return Err(cx.error(if self.bandwidth {
                "too few arguments to BandwidthMeter(bandwidth, ...)"
            } else {
                "too few arguments to Meter(rate, ...)"
            }));
        }
        let mut rates: Vec<u64> = Vec::with_capacity(texts.len());
        for (i, t) in texts.iter().enumerate() {
            let r = self.rate(t, i + 1, cx.name).map_err(|m| cx.error(m))?;
            if rates.last().is_some_and(|&prev| r <= prev) {
                return Err(cx.error(format!("rate {} must be > rate {}", i + 1, i)));
            }
            if r > MAX_RATE {
                return Err(cx.error(format!("rate {} too large (max {})", i + 1, MAX_RATE)));
            }
            rates.push(r);
        }
        if rates.len() + 1 != cx.noutputs {
            return Err(cx.error(format!(
                "need {} arguments, one less than the number of output ports",
                cx.noutputs.saturating_sub(1)
            )));
        }
        // Thresholds as Click compares them: the rate per epoch, in the average's fixed
        // point, rounded down.
        let thresholds = rates.iter().map(|r| (r << SCALE) / EPOCH_FREQUENCY).collect();
        Ok(Arc::new(MeterSpec {
            shared: Arc::new(Shared {
                bandwidth: self.bandwidth,
                thresholds,
                rate: Mutex::new(Estimator::new(jiffies())),
            }),
        }))
    }
}

/// Click's `RateEWMAX` with one average: the count of the epoch in progress, and the
/// average of the epochs before it.
#[derive(Debug)]
struct Estimator {
    epoch: u64,
    current: u64,
    avg: Ewma,
}

impl Estimator {
    fn new(now: u64) -> Estimator {
        Estimator {
            epoch: now,
            current: 0,
            avg: Ewma::default(),
        }
    }

    /// Closes the epochs before `now` (Click's `update_time`): the one in progress adds
    /// its count to the average, each later one a zero.
    fn update_time(&mut self, now: u64) {
        if now <= self.epoch {
            return;
        }
        self.avg.update(self.current, SCALE);
        let idle = now - self.epoch - 1;
        if idle > 0 {
            self.avg.update_idle(idle, SCALE);
        }
        self.current = 0;
        self.epoch = now;
    }
}

struct Shared {
    bandwidth: bool,
    /// Each rate per epoch, with SCALE bits of fraction, ascending.
    thresholds: Vec<u64>,
    rate: Mutex<Estimator>,
}

impl Shared {
    /// Counts `amount` (packets or bytes) at epoch `now`; returns the output for them:
    /// the first band whose threshold the average is below, else the last.
    fn route(&self, now: u64, amount: u64) -> usize {
        let r = {
            let mut est = lock(&self.rate);
            est.update_time(now);
            est.current = est.current.wrapping_add(amount);
            est.avg.scaled
        };
        self.thresholds
            .iter()
            .position(|&m| r < m)
            .unwrap_or(self.thresholds.len())
    }

    /// The `rate` handler's text at epoch `now`: the average in units a second.
    fn rate_text(&self, now: u64) -> String {
        let mut est = lock(&self.rate);
        est.update_time(now);
        unparse_real2((est.avg.scaled * EPOCH_FREQUENCY) as i64, SCALE)
    }
}

struct MeterSpec {
    shared: Arc<Shared>,
}

impl ElementSpec for MeterSpec {
    fn instantiate(&self, _w: WorkerInfo) -> Box<dyn Element> {
        Box::new(Meter {
            shared: self.shared.clone(),
        })
    }
    fn handlers(&self) -> Vec<HandlerInfo> {
        vec![HandlerInfo::read("rate"), HandlerInfo::read("meters")]
    }
    fn read_handler(&self, name: &str) -> Option<String> {
        match name {
            "rate" => Some(self.shared.rate_text(jiffies())),
            // The thresholds as compared, read back from the fixed point, a line each.
            "meters" => Some(
                self.shared
                    .thresholds
                    .iter()
                    .map(|m| unparse_real2((m * EPOCH_FREQUENCY) as i64, SCALE))
                    .collect::<Vec<_>>()
                    .join("\n"),
            ),
            _ => None,
        }
    }
}

struct Meter {
    shared: Arc<Shared>,
}

impl Element for Meter {
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, out: &mut Outputs<'_>, _cx: &mut Context<'_>) {
        let amount = if self.shared.bandwidth {
            batch.iter().map(|p| p.len() as u64).sum()
        } else {
            batch.len() as u64
        };
        let port = self.shared.route(jiffies(), amount);
        out.push_batch(port, batch);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{build, build_error, Harness};
    use packet::Packet;

    /// The shared state of `class` configured with `config` and `nout` outputs, its
    /// clock at epoch 0, to drive with epochs by hand.
    fn shared(class: &MeterClass, config: &str, nout: usize) -> Arc<Shared> {
        let rates: Vec<u64> = crate::args::split_args(config)
            .iter()
            .enumerate()
            .map(|(i, t)| class.rate(t, i + 1, "m").unwrap())
            .collect();
        assert_eq!(rates.len() + 1, nout);
        Arc::new(Shared {
            bandwidth: class.bandwidth,
            thresholds: rates.iter().map(|r| (r << SCALE) / EPOCH_FREQUENCY).collect(),
            rate: Mutex::new(Estimator::new(0)),
        })
    }

    #[test]
    fn a_steady_stream_climbs_through_the_bands() {
        // Meter(1000, 2000) fed 5 packets every millisecond (5,000 a second). The
        // thresholds are 1000 * 1024 / 1000 = 1024 and 2048 in the average's fixed
        // point. Each epoch the average x moves by (5 * 1024 + 8 - x) >> 4, by hand:
        // 0, 320, 620, 901, 1165, 1412, 1644, 1861, 2065.
        let s = shared(&METER, "1000, 2000", 3);
        let outs: Vec<usize> = (0..9).map(|epoch| s.route(epoch, 5)).collect();
        assert_eq!(outs, [0, 0, 0, 0, 1, 1, 1, 1, 2]);
        // 2065 * 1000 / 1024 = 2016.6015625 packets a second, printed as Click's
        // shortest decimal that reads back as the same fixed point (616/1024: 0.602).
        assert_eq!(s.rate_text(8), "2016.602");
        // Within an epoch the average does not move: a second batch goes the same way.
        assert_eq!(s.route(8, 1000), 2);
    }

    #[test]
    fn idle_epochs_bring_the_rate_down() {
        let s = shared(&METER, "1000", 2);
        for epoch in 0..50 {
            s.route(epoch, 10);
        }
        assert_eq!(s.route(50, 10), 1);
        // 100 idle epochs or more clear the average, as in Click.
        assert_eq!(s.route(151, 1), 0);
        assert_eq!(s.rate_text(151), "0");
        // One epoch of 3 packets then one idle one: 3 * 1024 + 8 = 3080, >> 4 = 192;
        // then (8 - 192) >> 4 (arithmetic) = -12: 180, 180 * 1000 / 1024 = 175.78125,
        // whose shortest decimal reading back as 800/1024 is 0.781.
        let s = shared(&METER, "1000", 2);
        s.route(0, 3);
        assert_eq!(s.rate_text(1), "187.5");
        assert_eq!(s.rate_text(2), "175.781");
    }

    #[test]
    fn bandwidth_meter_counts_bytes() {
        // BandwidthMeter(100kBps): 100 bytes a millisecond, 102,400 in fixed point.
        // Packets of 1,000 bytes, one a millisecond (1 MB/s): after one epoch the
        // average is (1000 * 1024 + 8) >> 4 = 64000, after two 64000 + 60000 = 124000.
        let s = shared(&BANDWIDTH_METER, "100kBps", 2);
        assert_eq!(s.route(0, 1000), 0);
        assert_eq!(s.route(1, 1000), 0);
        assert_eq!(s.route(2, 1000), 1);
        assert_eq!(s.rate_text(2), "121093.75");
    }

    #[test]
    fn the_element_sends_a_batch_to_one_output_and_reads_its_handlers() {
        // A fresh meter measures 0: below the first rate.
        let mut h = Harness::new(&BANDWIDTH_METER, "8kbps, 1MBps", 1, 3);
        let out = h.push(0, (0..4).map(|_| Packet::from_slice(&[0; 60])).collect());
        assert_eq!(out[0].len(), 4);
        assert!(out[1].is_empty() && out[2].is_empty());
        // 1000 B/s: 1000 * 1024 / 1000 = 1024 read back exactly; 10^6 B/s likewise.
        assert_eq!(h.read("meters"), "1000\n1000000");
        // Meter's 3 a second: 3 * 1024 / 1000 = 3 in fixed point, 3000 / 1024 back.
        let h = Harness::new(&METER, "3", 1, 2);
        assert_eq!(h.read("meters"), "2.93");
        let names: Vec<_> = h.spec.handlers().into_iter().map(|h| h.name).collect();
        assert_eq!(names, ["rate", "meters"]);
        assert!(build(&METER, "1, 2, 3", 1, 4).is_ok());
    }

    #[test]
    fn a_router_counts_the_connected_outputs() {
        let r = crate::testing::router(
            "InfiniteSource(LIMIT 1) -> m :: Meter(1000, 2000) -> Discard; m[1] -> Discard; m[2] -> Discard",
        )
        .unwrap();
        assert_eq!(r.read_handler("m.meters").unwrap(), "1000\n2000");
        let e = crate::testing::router(
            "InfiniteSource(LIMIT 1) -> m :: Meter(1000, 2000) -> Discard; m[1] -> Discard",
        )
        .err()
        .unwrap();
        assert!(
            e.message
                .contains("m :: Meter: need 1 arguments, one less than the number of output ports"),
            "{}",
            e.message
        );
    }

    #[test]
    fn config_errors() {
        let err = |c: &MeterClass, conf: &str, nout| build_error(c, conf, 1, nout);
        assert_eq!(
            err(&METER, "", 2),
            "e :: Meter: too few arguments to Meter(rate, ...)"
        );
        assert_eq!(
            err(&BANDWIDTH_METER, "", 2),
            "e :: BandwidthMeter: too few arguments to BandwidthMeter(bandwidth, ...)"
        );
        assert_eq!(
            err(&METER, "10, fast", 3),
            "e :: Meter: argument 2 expects rate (packets per second)"
        );
        assert_eq!(
            err(&BANDWIDTH_METER, "10kBps, 5 parsecs", 3),
            "e :: BandwidthMeter: argument 2 syntax error"
        );
        assert_eq!(err(&METER, "10, 10", 3), "e :: Meter: rate 2 must be > rate 1");
        assert_eq!(
            err(&BANDWIDTH_METER, "2kBps, 1kBps", 3),
            "e :: BandwidthMeter: rate 2 must be > rate 1"
        );
        assert_eq!(
            err(&METER, "4194304", 2),
            "e :: Meter: rate 1 too large (max 4194303)"
        );
        assert_eq!(
            err(&BANDWIDTH_METER, "1Gbps", 2),
            "e :: BandwidthMeter: rate 1 too large (max 4194303)"
        );
        assert_eq!(
            err(&METER, "10, 20", 2),
            "e :: Meter: need 1 arguments, one less than the number of output ports"
        );
    }
}
