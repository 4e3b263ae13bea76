//! `RatedSplitter(RATE [, keywords BURST_DURATION, BURST_SIZE])`: up to RATE packets a
//! second leave on output 0, the rest on output 1 (dropped when there is no output 1),
//! as Click's element of the same name. The usual use is rate-limiting the ICMP errors
//! a router sends (RFC 4443 2.4 (f), RFC 1812 4.3.2.8).
//!
//! One token bucket serves every worker, so RATE holds for the router as a whole; a
//! worker takes the bucket's lock once a batch.

use super::tokenbucket::{jiffies, TokenCounter, TokenRate};
use crate::args::{uncomment, Args, FromArg, Interval};
use crate::element::*;
use crate::error::ConfigError;
use packet::PacketBatch;
use std::sync::{Arc, Mutex, MutexGuard};

/// The bucket's capacity when neither keyword is given: 20 ms of tokens, as Click.
const DEFAULT_BURST_MS: u64 = 20;

/// How the bucket's capacity follows from the rate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Burst {
    /// RATE * this many milliseconds of tokens.
    Millis(u64),
    /// This many tokens.
    Tokens(u32),
}

impl Burst {
    /// Click's `RatedUnqueue::configure_helper`: at least one token.
    fn capacity(self, rate: u32) -> u32 {
        let tokens = match self {
            Burst::Millis(ms) => u32::try_from(u64::from(rate) * ms / 1000).unwrap_or(u32::MAX),
            Burst::Tokens(t) => t,
        };
        tokens.max(1)
    }
}

struct Bucket {
    rate: TokenRate,
    counter: TokenCounter,
    burst: Burst,
}

impl Bucket {
    fn new(rate: u32, burst: Burst) -> Bucket {
        Bucket {
            rate: TokenRate::new(rate, burst.capacity(rate)),
            // Empty with its time point at 0: the first refill fills it.
            counter: TokenCounter::new(),
            burst,
        }
    }

    /// A new rate; the capacity follows it, the tokens held are kept (scaled).
    fn set_rate(&mut self, rate: u32) {
        let new = TokenRate::new(rate, self.burst.capacity(rate));
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

impl ElementClass for RatedSplitterClass {
    fn name(&self) -> &'static str {
        "RatedSplitter"
    }
    fn port_count(&self) -> PortCount {
        PortCount::parse("1/1-2")
    }
    fn build(&self, args: &mut Args, cx: &BuildContext) -> Result<Arc<dyn ElementSpec>, ConfigError> {
        let e = |m: String| cx.error(m);
        let rate = args.required::<u32>("RATE").map_err(e)?;
        let duration = args.keyword::<Interval>("BURST_DURATION").map_err(e)?;
        let size = args.keyword::<u32>("BURST_SIZE").map_err(e)?;
        args.finish().map_err(e)?;
        let burst = match (duration, size) {
            (Some(_), Some(_)) => {
                return Err(cx.error("cannot specify both BURST_DURATION and BURST_SIZE"));
            }
            // Click reads the duration in milliseconds.
            (Some(d), None) => Burst::Millis((d.0 + 500_000) / 1_000_000),
            (None, Some(t)) => Burst::Tokens(t),
            (None, None) => Burst::Millis(DEFAULT_BURST_MS),
        };
        Ok(Arc::new(RatedSplitterSpec {
            bucket: Arc::new(Mutex::new(Bucket::new(rate, burst))),
        }))
    }
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
        matches!(name, "rate" | "config").then(|| lock(&self.bucket).rate.rate().to_string())
    }
    fn write_handler(&self, name: &str, value: &str) -> Option<Result<(), String>> {
        (name == "rate").then(|| match u32::from_arg(uncomment(value).trim()) {
            Some(r) => {
                lock(&self.bucket).set_rate(r);
                Ok(())
            }
            None => Err(format!("RATE expects {}", u32::WHAT)),
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
        let Bucket { rate, counter, .. } = &mut *b;
        counter.refill(rate, jiffies());
        out.route_each(batch, |_| if counter.remove_if(rate, 1) { 0 } else { over });
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
        let mut b = Bucket::new(100, Burst::Millis(20));
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
