//! `RandomSwitch` and `RandomSample([P, keywords SAMPLE, DROP, ACTIVE])`: elements
//! that decide at random, as Click's elements of the same names.
//!
//! Each worker's instance draws from its own generator (xorshift64*, seeded from the
//! clock and the worker's index), so workers never share a cache line per packet.

use super::pcap::format::unparse_fixed;
use super::pcap::Fixed28;
use crate::args::{uncomment, Args, FromArg};
use crate::element::*;
use crate::error::ConfigError;
use packet::PacketBatch;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

/// A per-worker xorshift64* generator.
pub(crate) struct Rng(u64);

impl Rng {
    /// A generator seeded from the clock and `index`, so workers draw apart.
    pub(crate) fn new(index: usize) -> Rng {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        Rng((t ^ (index as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15)) | 1)
    }

    /// 32 random bits.
    #[inline]
    pub(crate) fn next_u32(&mut self) -> u32 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        (x.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 32) as u32
    }

    /// A number in `0..n` (n >= 1), each equally likely to within 2^-32.
    #[inline]
    pub(crate) fn below(&mut self, n: usize) -> usize {
        ((u64::from(self.next_u32()) * n as u64) >> 32) as usize
    }
}

// ---------------------------------------------------------------------------------
// RandomSwitch

pub struct RandomSwitchClass;

impl ElementClass for RandomSwitchClass {
    fn name(&self) -> &'static str {
        "RandomSwitch"
    }
    fn port_count(&self) -> PortCount {
        PortCount::parse("1/1-")
    }
    fn build(&self, args: &mut Args, cx: &BuildContext) -> Result<Arc<dyn ElementSpec>, ConfigError> {
        args.finish().map_err(|e| cx.error(e))?;
        Ok(Arc::new(RandomSwitchSpec))
    }
}

struct RandomSwitchSpec;

impl ElementSpec for RandomSwitchSpec {
    fn instantiate(&self, w: WorkerInfo) -> Box<dyn Element> {
        Box::new(RandomSwitch(Rng::new(w.index)))
    }
}

struct RandomSwitch(Rng);

impl Element for RandomSwitch {
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, out: &mut Outputs<'_>, _cx: &mut Context<'_>) {
        // Packet by packet, as HashSwitch: any number of outputs.
        let n = out.len().max(1);
        for p in batch.drain() {
            out.push(self.0.below(n), p);
        }
    }
}

// ---------------------------------------------------------------------------------
// RandomSample

/// Click's `SAMPLING_SHIFT`: probabilities are fixed-point with 28 fraction bits.
const SHIFT: u32 = 28;
const ONE: u32 = 1 << SHIFT;
const MASK: u32 = ONE - 1;

pub struct RandomSampleClass;

impl ElementClass for RandomSampleClass {
    fn name(&self) -> &'static str {
        "RandomSample"
    }
    fn port_count(&self) -> PortCount {
        PortCount::parse("1/1-2")
    }
    fn build(&self, args: &mut Args, cx: &BuildContext) -> Result<Arc<dyn ElementSpec>, ConfigError> {
        let e = |m: String| cx.error(m);
        let p = args.positional::<Fixed28>("P").map_err(e)?;
        let sample = args.keyword::<Fixed28>("SAMPLE").map_err(e)?;
        let drop = args.keyword::<Fixed28>("DROP").map_err(e)?;
        let active = args.keyword::<bool>("ACTIVE").map_err(e)?.unwrap_or(true);
        args.finish().map_err(e)?;
        // As Click's (its Args version): SAMPLE and DROP exclude each other, and
        // either wins over P.
        let sampling = match (sample, drop) {
            (Some(_), Some(_)) => return Err(cx.error("give at most one of SAMPLE and DROP")),
            // Above 1, the drop probability leaves no sampling probability in range.
            (None, Some(d)) => u64::from(ONE).checked_sub(d.0),
            (Some(s), None) => Some(s.0),
            (None, None) => p.map(|p| p.0),
        };
        let sampling = sampling
            .filter(|&s| s <= u64::from(ONE))
            .ok_or_else(|| cx.error("sampling probability must be between 0 and 1"))?;
        Ok(Arc::new(RandomSampleSpec {
            shared: Arc::new(SampleShared {
                sampling: AtomicU32::new(sampling as u32),
                active: AtomicBool::new(active),
                drops: AtomicU64::new(0),
            }),
        }))
    }
}

struct SampleShared {
    /// Out of [`ONE`].
    sampling: AtomicU32,
    active: AtomicBool,
    drops: AtomicU64,
}

struct RandomSampleSpec {
    shared: Arc<SampleShared>,
}

impl ElementSpec for RandomSampleSpec {
    fn instantiate(&self, w: WorkerInfo) -> Box<dyn Element> {
        Box::new(RandomSample {
            shared: self.shared.clone(),
            rng: Rng::new(w.index),
        })
    }
    fn handlers(&self) -> Vec<HandlerInfo> {
        vec![
            HandlerInfo::read_write("sampling_prob"),
            HandlerInfo::read_write("drop_prob"),
            HandlerInfo::read_write("active"),
            HandlerInfo::read("drops"),
        ]
    }
    fn read_handler(&self, name: &str) -> Option<String> {
        let s = &self.shared;
        let sampling = s.sampling.load(Ordering::Relaxed);
        Some(match name {
            "sampling_prob" => unparse_fixed(sampling, SHIFT),
            "drop_prob" => unparse_fixed(ONE - sampling, SHIFT),
            "active" => s.active.load(Ordering::Relaxed).to_string(),
            "drops" => s.drops.load(Ordering::Relaxed).to_string(),
            // Click's RandomSample answers `config` with its current settings.
            "config" => format!(
                "SAMPLE {}, ACTIVE {}",
                unparse_fixed(sampling, SHIFT),
                s.active.load(Ordering::Relaxed)
            ),
            _ => return None,
        })
    }
    fn write_handler(&self, name: &str, value: &str) -> Option<Result<(), String>> {
        let s = &self.shared;
        let prob = || {
            Fixed28::from_arg(uncomment(value).trim())
                .map(|p| p.0)
                .filter(|&p| p <= u64::from(ONE))
                .map(|p| p as u32)
                .ok_or_else(|| "Must be given a number between 0.0 and 1.0".to_string())
        };
        Some(match name {
            "sampling_prob" => prob().map(|p| s.sampling.store(p, Ordering::Relaxed)),
            "drop_prob" => prob().map(|p| s.sampling.store(ONE - p, Ordering::Relaxed)),
            "active" => match bool::from_arg(uncomment(value).trim()) {
                Some(a) => {
                    s.active.store(a, Ordering::Relaxed);
                    Ok(())
                }
                None => Err("expected boolean".to_string()),
            },
            _ => return None,
        })
    }
}

struct RandomSample {
    shared: Arc<SampleShared>,
    rng: Rng,
}

impl Element for RandomSample {
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, out: &mut Outputs<'_>, _cx: &mut Context<'_>) {
        let s = &*self.shared;
        if !s.active.load(Ordering::Relaxed) {
            out.push_batch(0, batch);
            return;
        }
        let sampling = s.sampling.load(Ordering::Relaxed);
        let rng = &mut self.rng;
        let mut drops = 0;
        out.route_each(batch, |_| {
            if rng.next_u32() & MASK < sampling {
                0
            } else {
                drops += 1;
                // Output 1, or dropped where there is none.
                1
            }
        });
        if drops > 0 {
            s.drops.fetch_add(drops, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{build_error, Harness};
    use packet::Packet;

    /// Packets numbered `from..from + n` in their first two bytes.
    fn numbered(from: u16, n: u16) -> Vec<Packet> {
        (from..from + n)
            .map(|i| Packet::from_slice(&i.to_be_bytes()))
            .collect()
    }

    fn numbers(v: &[Packet]) -> Vec<u16> {
        v.iter()
            .map(|p| u16::from_be_bytes([p.data()[0], p.data()[1]]))
            .collect()
    }

    /// Pushes 40 batches of 250 packets; returns the numbers each output got.
    fn push_10000(h: &mut Harness, outputs: usize) -> Vec<Vec<u16>> {
        let mut got = vec![Vec::new(); outputs];
        for b in 0..40 {
            let out = h.push(0, numbered(b * 250, 250));
            for (g, o) in got.iter_mut().zip(&out) {
                g.extend(numbers(o));
            }
        }
        got
    }

    #[test]
    fn random_switch_spreads_evenly_and_keeps_order() {
        let mut h = Harness::new(&RandomSwitchClass, "", 1, 4);
        let got = push_10000(&mut h, 4);
        let total: usize = got.iter().map(|g| g.len()).sum();
        assert_eq!(total, 10000, "every packet leaves by one output");
        for g in &got {
            // 2500 expected, standard deviation about 43.
            assert!((2000..3000).contains(&g.len()), "{}", g.len());
            assert!(g.windows(2).all(|w| w[0] < w[1]), "order kept per output");
        }
        let mut one = Harness::new(&RandomSwitchClass, "", 1, 1);
        assert_eq!(numbers(&one.push(0, numbered(0, 5))[0]), vec![0, 1, 2, 3, 4]);
        assert_eq!(
            crate::testing::build_error(&RandomSwitchClass, "2", 1, 2),
            "e :: RandomSwitch: too many arguments"
        );
    }

    #[test]
    fn random_switch_reaches_every_one_of_many_outputs() {
        // 300 outputs: more than a one-byte verdict can name.
        let mut h = Harness::new(&RandomSwitchClass, "", 1, 300);
        let mut seen = vec![0usize; 300];
        for _ in 0..100 {
            let out = h.push(0, numbered(0, 300));
            for (i, o) in out.iter().enumerate() {
                seen[i] += o.len();
            }
        }
        assert_eq!(seen.iter().sum::<usize>(), 30_000, "every packet leaves");
        // 100 expected each, standard deviation about 10.
        assert!(seen.iter().all(|&n| (50..160).contains(&n)), "{seen:?}");
    }

    #[test]
    fn random_sample_extremes_are_exact() {
        let mut h = Harness::new(&RandomSampleClass, "1", 1, 2);
        let got = push_10000(&mut h, 2);
        assert_eq!(got[0], (0..10000).collect::<Vec<u16>>());
        assert!(got[1].is_empty());
        assert_eq!(h.read("drops"), "0");

        let mut h = Harness::new(&RandomSampleClass, "0", 1, 2);
        let got = push_10000(&mut h, 2);
        assert!(got[0].is_empty());
        assert_eq!(got[1], (0..10000).collect::<Vec<u16>>());
        assert_eq!(h.read("drops"), "10000");

        // DROP 1 is SAMPLE 0; without output 1 the unsampled packets are dropped.
        let mut h = Harness::new(&RandomSampleClass, "DROP 1", 1, 1);
        let out = h.push(0, numbered(0, 10));
        assert!(out[0].is_empty());
        assert_eq!(h.read("drops"), "10");
        assert_eq!(h.read("sampling_prob"), "0");
        assert_eq!(h.read("drop_prob"), "1");

        // Inactive: everything to output 0, nothing counted.
        let mut h = Harness::new(&RandomSampleClass, "SAMPLE 0, ACTIVE false", 1, 2);
        let out = h.push(0, numbered(0, 10));
        assert_eq!(numbers(&out[0]), (0..10).collect::<Vec<u16>>());
        assert_eq!(h.read("drops"), "0");
    }

    #[test]
    fn random_sample_samples_about_p() {
        let mut h = Harness::new(&RandomSampleClass, "0.25", 1, 2);
        let got = push_10000(&mut h, 2);
        // 2500 expected, standard deviation about 43.
        assert!((2000..3000).contains(&got[0].len()), "{}", got[0].len());
        assert_eq!(got[0].len() + got[1].len(), 10000);
        assert_eq!(h.read("drops"), got[1].len().to_string());
        assert!(got[0].windows(2).all(|w| w[0] < w[1]));
        assert!(got[1].windows(2).all(|w| w[0] < w[1]));

        // DROP 0.75 is the same probability.
        let mut h = Harness::new(&RandomSampleClass, "DROP 0.75", 1, 2);
        assert_eq!(h.read("sampling_prob"), "0.25");
        let got = push_10000(&mut h, 2);
        assert!((2000..3000).contains(&got[0].len()), "{}", got[0].len());
    }

    #[test]
    fn random_sample_handlers() {
        let h = Harness::new(&RandomSampleClass, "P 0.5", 1, 2);
        assert_eq!(h.read("sampling_prob"), "0.5");
        assert_eq!(h.read("drop_prob"), "0.5");
        assert_eq!(h.read("active"), "true");
        assert_eq!(h.read("config"), "SAMPLE 0.5, ACTIVE true");
        h.write("drop_prob", "0.1").unwrap();
        assert_eq!(h.read("drop_prob"), "0.1");
        assert_eq!(h.read("sampling_prob"), "0.9");
        h.write("sampling_prob", "1").unwrap();
        h.write("active", "false").unwrap();
        assert_eq!(h.read("config"), "SAMPLE 1, ACTIVE false");
        for (handler, bad) in [
            ("sampling_prob", "1.5"),
            ("drop_prob", "x"),
            ("sampling_prob", "-0.1"),
        ] {
            assert_eq!(
                h.write(handler, bad),
                Err("Must be given a number between 0.0 and 1.0".to_string())
            );
        }
        assert_eq!(h.write("active", "maybe"), Err("expected boolean".to_string()));
        assert_eq!(h.read("sampling_prob"), "1");
    }

    #[test]
    fn random_sample_configuration_errors() {
        let err = |c: &str| build_error(&RandomSampleClass, c, 1, 2);
        assert_eq!(
            err(""),
            "e :: RandomSample: sampling probability must be between 0 and 1"
        );
        assert_eq!(
            err("1.5"),
            "e :: RandomSample: sampling probability must be between 0 and 1"
        );
        assert_eq!(
            err("DROP 2"),
            "e :: RandomSample: sampling probability must be between 0 and 1"
        );
        assert_eq!(
            err("SAMPLE 0.5, DROP 0.5"),
            "e :: RandomSample: give at most one of SAMPLE and DROP"
        );
        // DROP (or SAMPLE) wins over P, as in Click.
        let h = Harness::new(&RandomSampleClass, "0.5, DROP 0.25", 1, 2);
        assert_eq!(h.read("config"), "SAMPLE 0.75, ACTIVE true");
        assert_eq!(err("x"), "e :: RandomSample: P expects real number");
        assert_eq!(err("0.5, ACTIVE 3"), "e :: RandomSample: ACTIVE expects bool");
    }
}
