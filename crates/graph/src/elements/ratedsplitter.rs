//! `RatedSplitter(RATE [, keywords BURST_DURATION, BURST_SIZE])`: up to RATE packets a
//! second leave on output 0, the rest on output 1 (dropped when there is no output 1),
//! as Click's element of the same name. The usual use is rate-limiting the ICMP errors
//! a router sends (RFC 4443 2.4 (f), RFC 1812 4.3.2.8).
//!
//! `BandwidthRatedSplitter(RATE [, keywords BURST_DURATION, BURST_BYTES])` is the same
//! with RATE a bandwidth (bytes a second): as in Click, a packet passes while the
//! bucket holds a threshold of 128 KiB more than its burst and takes its length in
//! tokens, so a packet of any size can pass however small the burst.
//!
//! One token bucket serves every worker, so RATE holds for the router as a whole; a
//! worker takes the bucket's lock once a batch.

use super::tokenbucket::{jiffies, TokenCounter, TokenRate};
use crate::args::{uncomment, Args, Bandwidth, FromArg, Interval};
use crate::element::*;
use crate::error::ConfigError;
use packet::PacketBatch;
use std::sync::{Arc, Mutex, MutexGuard};

/// The bucket's capacity when neither keyword is given: 20 ms of tokens, as Click.
const DEFAULT_BURST_MS: u64 = 20;

/// The bytes a bandwidth bucket must hold for a packet to pass (Click's
/// `RatedUnqueue::tb_bandwidth_thresh`), added to its capacity: the packet then takes
/// its length, so no packet is too large for the bucket.
const BANDWIDTH_THRESH: u32 = 131_072;

/// A bandwidth argument in whole bytes a second (Click's `BandwidthArg`, 32 bits).
struct ByteRate(u32);

impl FromArg for ByteRate {
    const WHAT: &'static str = "bandwidth";
    fn from_arg(s: &str) -> Option<Self> {
        Bandwidth::from_arg(s)
            .map(|b| b.0.round())
            .filter(|v| (0.0..=f64::from(u32::MAX)).contains(v))
            .map(|v| ByteRate(v as u32))
    }
}

/// Click's `BandwidthArg::unparse`: the rate in the largest unit that keeps it exact
/// in 32 bits.
fn unparse_bandwidth(x: u32) -> String {
    let x = u64::from(x);
    if x >= 0x2000_0000 {
        unparse_real10(x, 6) + "MBps"
    } else if x >= 125_000_000 {
        unparse_real10(x * 8, 9) + "Gbps"
    } else if x >= 125_000 {
        unparse_real10(x * 8, 6) + "Mbps"
    } else {
        unparse_real10(x * 8, 3) + "kbps"
    }
}

/// Click's `cp_unparse_real10`: `value` / 10^`digits` in decimal, no trailing zeros.
fn unparse_real10(value: u64, digits: u32) -> String {
    let one = 10u64.pow(digits);
    let (int, frac) = (value / one, value % one);
    if frac == 0 {
        return int.to_string();
    }
    let frac = format!("{:0width$}", frac, width = digits as usize);
    format!("{}.{}", int, frac.trim_end_matches('0'))
}

/// How the bucket's capacity follows from the rate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Burst {
    /// RATE * this many milliseconds of tokens.
    Millis(u64),
    /// This many tokens.
    Tokens(u32),
}

impl Burst {
    /// Click's `RatedUnqueue::configure_helper`: a bandwidth bucket holds its
    /// threshold more; at least one token.
    fn capacity(self, rate: u32, bandwidth: bool) -> u32 {
        let tokens = match self {
            Burst::Millis(ms) => u32::try_from(u64::from(rate) * ms / 1000).unwrap_or(u32::MAX),
            Burst::Tokens(t) => t,
        };
        let tokens = if bandwidth {
            tokens.saturating_add(BANDWIDTH_THRESH)
        } else {
            tokens
        };
        tokens.max(1)
    }
}

struct Bucket {
    rate: TokenRate,
    counter: TokenCounter,
    burst: Burst,
    /// Tokens are bytes (BandwidthRatedSplitter), not packets.
    bandwidth: bool,
}

impl Bucket {
    fn new(rate: u32, burst: Burst, bandwidth: bool) -> Bucket {
        Bucket {
            rate: TokenRate::new(rate, burst.capacity(rate, bandwidth)),
            // Empty with its time point at 0: the first refill fills it.
            counter: TokenCounter::new(),
            burst,
            bandwidth,
        }
    }

    /// A new rate; the capacity follows it, the tokens held are kept (scaled).
    fn set_rate(&mut self, rate: u32) {
        let new = TokenRate::new(rate, self.burst.capacity(rate, self.bandwidth));
        self.counter.adjust(&self.rate, &new);
        self.rate = new;
    }
}

fn lock(b: &Mutex<Bucket>) -> MutexGuard<'_, Bucket> {
    // A worker that panicked holding it left a consistent bucket: a refill or a
    // token taken is one store each.
    b.lock().unwrap_or_else(|p| p.into_inner())
}

pub struct RatedSplitterClass;
pub struct BandwidthRatedSplitterClass;

impl ElementClass for RatedSplitterClass {
    fn name(&self) -> &'static str {
        "RatedSplitter"
    }
    fn port_count(&self) -> PortCount {
        PortCount::parse("1/1-2")
    }
    fn build(&self, args: &mut Args, cx: &BuildContext) -> Result<Arc<dyn ElementSpec>, ConfigError> {
        build(args, cx, false)
    }
}

impl ElementClass for BandwidthRatedSplitterClass {
    fn name(&self) -> &'static str {
        "BandwidthRatedSplitter"
    }
    fn port_count(&self) -> PortCount {
        PortCount::parse("1/1-2")
    }
    fn build(&self, args: &mut Args, cx: &BuildContext) -> Result<Arc<dyn ElementSpec>, ConfigError> {
        build(args, cx, true)
    }
}

/// Both classes' configuration (Click's `RatedUnqueue::configure_helper`).
fn build(args: &mut Args, cx: &BuildContext, bandwidth: bool) -> Result<Arc<dyn ElementSpec>, ConfigError> {
    let e = |m: String| cx.error(m);
    let rate = if bandwidth {
        args.required::<ByteRate>("RATE").map_err(e)?.0
    } else {
        args.required::<u32>("RATE").map_err(e)?
    };
    let duration = args.keyword::<Interval>("BURST_DURATION").map_err(e)?;
    let size = args
        .keyword::<u32>(if bandwidth { "BURST_BYTES" } else { "BURST_SIZE" })
        .map_err(e)?;
    args.finish().map_err(e)?;
    let burst = match (duration, size) {
        // (Click's words for BURST_BYTES too.)
        (Some(_), Some(_)) => {
            return Err(cx.error("cannot specify both BURST_DURATION and BURST_SIZE"));
        }
        // Click reads the duration in milliseconds.
        (Some(d), None) => Burst::Millis((d.0 + 500_000) / 1_000_000),
        (None, Some(t)) => Burst::Tokens(t),
        (None, None) => Burst::Millis(DEFAULT_BURST_MS),
    };
    Ok(Arc::new(RatedSplitterSpec {
        bucket: Arc::new(Mutex::new(Bucket::new(rate, burst, bandwidth))),
    }))
}

struct RatedSplitterSpec {
    bucket: Arc<Mutex<Bucket>>,
}

impl ElementSpec for RatedSplitterSpec {
    fn instantiate(&self, _w: WorkerInfo) -> Box<dyn Element> {
        Box::new(RatedSplitter {
            bucket: self.bucket.clone(),
        })
    }
    fn handlers(&self) -> Vec<HandlerInfo> {
        vec![HandlerInfo::read_write("rate")]
    }
    fn read_handler(&self, name: &str) -> Option<String> {
        // `config` as Click's: the current rate, as `rate` reads it.
        matches!(name, "rate" | "config").then(|| {
            let b = lock(&self.bucket);
            if b.bandwidth {
                unparse_bandwidth(b.rate.rate())
            } else {
                b.rate.rate().to_string()
            }
        })
    }
    fn write_handler(&self, name: &str, value: &str) -> Option<Result<(), String>> {
        if name != "rate" {
            return None;
        }
        let mut b = lock(&self.bucket);
        let value = uncomment(value);
        let rate = if b.bandwidth {
            ByteRate::from_arg(value.trim())
                .map(|r| r.0)
                .ok_or(ByteRate::WHAT)
        } else {
            u32::from_arg(value.trim()).ok_or(u32::WHAT)
        };
        Some(match rate {
            Ok(r) => {
                b.set_rate(r);
                Ok(())
            }
            Err(what) => Err(format!("RATE expects {}", what)),
        })
    }
}

struct RatedSplitter {
    bucket: Arc<Mutex<Bucket>>,
}

impl Element for RatedSplitter {
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, out: &mut Outputs<'_>, _cx: &mut Context<'_>) {
        let over = if out.len() > 1 { 1 } else { DROP };
        let mut b = lock(&self.bucket);
        let Bucket {
            rate,
            counter,
            bandwidth,
            ..
        } = &mut *b;
        counter.refill(rate, jiffies());
        if *bandwidth {
            out.route_each(batch, |p| {
                if counter.contains(rate, BANDWIDTH_THRESH) {
                    counter.remove(rate, u32::try_from(p.len()).unwrap_or(u32::MAX));
                    0
                } else {
                    over
                }
            });
        } else {
            out.route_each(batch, |_| if counter.remove_if(rate, 1) { 0 } else { over });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{build_error, Harness};
    use packet::Packet;

    fn numbered(n: usize) -> Vec<Packet> {
        (0..n).map(|i| Packet::from_slice(&[i as u8])).collect()
    }

    fn firsts(ps: &[Packet]) -> Vec<u8> {
        ps.iter().map(|p| p.data()[0]).collect()
    }

    #[test]
    fn a_burst_passes_then_the_rest_goes_to_output_1_in_order() {
        // 1,000 a second: a bucket of 20 ms, 20 tokens, full at the start.
        let mut h = Harness::new(&RatedSplitterClass, "1000", 1, 2);
        let out = h.push(0, numbered(50));
        assert_eq!(firsts(&out[0]), (0..20).collect::<Vec<u8>>());
        assert_eq!(firsts(&out[1]), (20..50).collect::<Vec<u8>>());
        // BURST_SIZE sets the tokens; with one output the rest is dropped.
        let mut h = Harness::new(&RatedSplitterClass, "RATE 1000, BURST_SIZE 3", 1, 1);
        let out = h.push(0, numbered(10));
        assert_eq!(firsts(&out[0]), vec![0, 1, 2]);
        // BURST_DURATION: 1,000 a second for 50 ms.
        let mut h = Harness::new(&RatedSplitterClass, "1000, BURST_DURATION 50ms", 1, 2);
        let out = h.push(0, numbered(60));
        assert_eq!((out[0].len(), out[1].len()), (50, 10));
        // A low rate still has one token.
        let mut h = Harness::new(&RatedSplitterClass, "10", 1, 2);
        let out = h.push(0, numbered(4));
        assert_eq!((out[0].len(), out[1].len()), (1, 3));
        // Rate 0 lets nothing through, as in Click (an idle bucket never fills).
        let mut h = Harness::new(&RatedSplitterClass, "0", 1, 2);
        let out = h.push(0, numbered(4));
        assert_eq!((out[0].len(), out[1].len()), (0, 4));
    }

    #[test]
    fn every_worker_draws_from_one_bucket() {
        // One token a second refills the bucket: at 1,000 a second, a host that stalled
        // the test a millisecond between the two pushes gave a sixth.
        let mut h = Harness::new(&RatedSplitterClass, "1, BURST_SIZE 5", 1, 2);
        let mut other = h.another_worker();
        let a = h.push(0, numbered(3));
        let b = other.push(0, numbered(3));
        assert_eq!(a[0].len() + b[0].len(), 5);
        assert_eq!(a[1].len() + b[1].len(), 1);
    }

    #[test]
    fn tokens_come_back_at_the_rate() {
        // The bucket, driven by hand: 100 a second, 2 tokens (20 ms).
        let mut b = Bucket::new(100, Burst::Millis(20), false);
        let t0 = 1 << 32;
        b.counter.refill(&b.rate, t0);
        assert!(b.counter.remove_if(&b.rate, 1));
        assert!(b.counter.remove_if(&b.rate, 1));
        assert!(!b.counter.remove_if(&b.rate, 1));
        // One token every 10 ms (a hair more, in Click's fixed point).
        b.counter.refill(&b.rate, t0 + 11);
        assert!(b.counter.remove_if(&b.rate, 1));
        assert!(!b.counter.remove_if(&b.rate, 1));
        // A long pause refills only up to the capacity.
        b.counter.refill(&b.rate, t0 + 10_000);
        assert!(b.counter.remove_if(&b.rate, 1));
        assert!(b.counter.remove_if(&b.rate, 1));
        assert!(!b.counter.remove_if(&b.rate, 1));
    }

    #[test]
    fn the_rate_handler_reads_and_changes_the_rate() {
        let h = Harness::new(&RatedSplitterClass, "1000", 1, 2);
        assert_eq!(h.read("rate"), "1000");
        h.write("rate", "5000").unwrap();
        // Click reads the rate back from its fixed point: 100 tokens make the scale
        // 2^32 / 100 = 42,949,672 and 214,748,360 scaled tokens a jiffy, and
        // (214,748,360 / 2 + 214,748,360 * 1000) / 42,949,672 = 5002.
        assert_eq!(h.read("rate"), "5002");
        assert_eq!(
            h.write("rate", "fast"),
            Err("RATE expects unsigned integer".to_string())
        );
        assert_eq!(h.read("rate"), "5002");
    }

    #[test]
    fn config_reads_the_current_rate_as_click_does() {
        let flat = crate::lang::parse(
            "InfiniteSource(LIMIT 1) -> r :: RatedSplitter(RATE 1000) -> Discard; r[1] -> Discard",
            "t.click",
            &Default::default(),
        )
        .unwrap();
        let reg = crate::registry::Registry::with_library();
        let router = crate::router::RouterSpec::build(&flat, &reg, std::path::Path::new("."), 1).unwrap();
        assert_eq!(router.read_handler("r.config").unwrap(), "1000");
        router.write_handler("r.rate", "5000").unwrap();
        // (5002: the fixed-point read-back, as in the test above.)
        assert_eq!(router.read_handler("r.config").unwrap(), "5002");
    }

    /// 100-byte packets leaving a `BandwidthRatedUnqueue(UNQUEUE)` (Click's, the same
    /// bandwidth bucket: it sends a packet whenever it holds the threshold) into a
    /// splitter bucket, jiffy by jiffy for 10 simulated seconds; the packets the
    /// splitter passes.
    fn testie_run(unqueue: u32, mut splitter: Bucket) -> usize {
        let mut unq = Bucket::new(unqueue, Burst::Millis(DEFAULT_BURST_MS), true);
        let t0 = 1u64 << 32;
        let mut passed = 0;
        for t in t0..t0 + 10_000 {
            unq.counter.refill(&unq.rate, t);
            while unq.counter.contains(&unq.rate, BANDWIDTH_THRESH) {
                unq.counter.remove(&unq.rate, 100);
                splitter.counter.refill(&splitter.rate, t);
                if splitter.counter.contains(&splitter.rate, BANDWIDTH_THRESH) {
                    splitter.counter.remove(&splitter.rate, 100);
                    passed += 1;
                }
            }
        }
        passed
    }

    #[test]
    fn click_bandwidthratedsplitter_testie() {
        // test/standard/BandwidthRatedSplitter-01.testie expects 20, 70, 70 and 1001.
        let b = |rate, burst| Bucket::new(rate, burst, true);
        assert_eq!(testie_run(2000, b(200, Burst::Millis(20))), 20);
        assert_eq!(testie_run(2000, b(200, Burst::Tokens(5000))), 70);
        assert_eq!(testie_run(2000, b(200, Burst::Millis(25_000))), 70);
        assert_eq!(testie_run(20_000, b(10_000, Burst::Tokens(100))), 1001);
    }

    #[test]
    fn bandwidth_splitter_passes_packets_while_it_holds_the_threshold() {
        // BURST_BYTES 250: the bucket holds 131,072 + 250 bytes, full at the start.
        // 100-byte packets pass at 131,322, 131,222 and 131,122 bytes held; the fourth
        // finds 131,022, below the threshold.
        let sized = |n: usize, len: usize| (0..n).map(|i| Packet::from_slice(&vec![i as u8; len])).collect();
        let mut h = Harness::new(&BandwidthRatedSplitterClass, "1kBps, BURST_BYTES 250", 1, 2);
        let out = h.push(0, sized(6, 100));
        assert_eq!(firsts(&out[0]), vec![0, 1, 2]);
        assert_eq!(firsts(&out[1]), vec![3, 4, 5]);
        // A packet larger than the burst passes when the threshold is held, and takes
        // its length: the next one does not pass.
        let mut h = Harness::new(&BandwidthRatedSplitterClass, "RATE 8kbps, BURST_BYTES 10", 1, 1);
        let out = h.push(0, sized(2, 1500));
        assert_eq!(firsts(&out[0]), vec![0]);
        // The default burst: 20 ms at 200 B/s is 4 bytes: one 100-byte packet passes.
        let mut h = Harness::new(&BandwidthRatedSplitterClass, "200Bps", 1, 2);
        let out = h.push(0, sized(3, 100));
        assert_eq!((out[0].len(), out[1].len()), (1, 2));
        // BURST_DURATION: 1,000 B/s for 1 s, 1,000 bytes more: eleven 100-byte
        // packets pass, at 132,072 down to 131,072 bytes held.
        let mut h = Harness::new(&BandwidthRatedSplitterClass, "1kBps, BURST_DURATION 1s", 1, 2);
        let out = h.push(0, sized(12, 100));
        assert_eq!((out[0].len(), out[1].len()), (11, 1));
    }

    #[test]
    fn bandwidth_splitter_rate_handler_speaks_bandwidth() {
        // 2,000 B/s with the default burst: 40 + 131,072 bytes make the scale
        // 4,294,967,295 / 131,112 = 32,757 and 65,514 scaled bytes a jiffy, read back as
        // (32,757 + 65,514,000) / 32,757 = 2001 B/s, 16,008 bits a second.
        let h = Harness::new(&BandwidthRatedSplitterClass, "2000Bps", 1, 2);
        assert_eq!(h.read("rate"), "16.008kbps");
        assert_eq!(h.read("config"), "16.008kbps");
        h.write("rate", "1Gbps").unwrap();
        // 125,000,000 B/s: 2,500,000 + 131,072 bytes, scale 1,632, 204,000,000 a
        // jiffy, read back as (102,000,000 + 204,000,000,000) / 1,632 = 125,062,500.
        assert_eq!(h.read("rate"), "1.0005Gbps");
        assert_eq!(h.write("rate", "fast"), Err("RATE expects bandwidth".to_string()));
        assert_eq!(unparse_bandwidth(0x2000_0000), "536.870912MBps");
        assert_eq!(unparse_bandwidth(125_000), "1Mbps");
        assert_eq!(unparse_bandwidth(0), "0kbps");
    }

    #[test]
    fn bandwidth_splitter_config_errors() {
        let err = |c| build_error(&BandwidthRatedSplitterClass, c, 1, 2);
        assert_eq!(
            err(""),
            "e :: BandwidthRatedSplitter: missing mandatory RATE argument"
        );
        assert_eq!(err("fast"), "e :: BandwidthRatedSplitter: RATE expects bandwidth");
        assert_eq!(
            err("1kBps, BURST_SIZE 4"),
            "e :: BandwidthRatedSplitter: bad keyword 'BURST_SIZE'"
        );
        assert_eq!(
            err("1kBps, BURST_BYTES 4, BURST_DURATION 1s"),
            "e :: BandwidthRatedSplitter: cannot specify both BURST_DURATION and BURST_SIZE"
        );
    }

    #[test]
    fn config_errors() {
        let err = |c| build_error(&RatedSplitterClass, c, 1, 2);
        assert_eq!(err(""), "e :: RatedSplitter: missing mandatory RATE argument");
        assert_eq!(err("-5"), "e :: RatedSplitter: RATE expects unsigned integer");
        assert_eq!(
            err("10, BURST_SIZE 4, BURST_DURATION 1s"),
            "e :: RatedSplitter: cannot specify both BURST_DURATION and BURST_SIZE"
        );
        assert_eq!(
            err("10, BURST_DURATION soon"),
            "e :: RatedSplitter: BURST_DURATION expects time interval"
        );
    }
}
