//! `TimedSource([INTERVAL, DATA], keywords LIMIT, HEADROOM, STOP, ACTIVE)`: emits a
//! copy of DATA every INTERVAL, as Click's TimedSource.
//!
//! Click runs the element off a timer that each packet reschedules INTERVAL after its
//! previous expiry; the source here keeps that timer itself, in time-stamp counter
//! ticks, and tells the worker when it is next due ([`TaskStatus::IdleUntil`]). Like
//! the other sources with a LIMIT it runs on worker 0 only; handler state lives in the
//! spec.

use super::shared::lock;
use super::sources::{DataArg, IdleSource, DEFAULT_DATA};
use crate::args::{uncomment, Args, FromArg, Interval};
use crate::element::*;
use crate::error::ConfigError;
use crate::tsc;
use packet::{Packet, PacketBatch, Timestamp};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Click's default INTERVAL, half a second.
const DEFAULT_INTERVAL_NS: u64 = 500_000_000;
/// The largest HEADROOM taken: every packet is allocated with it.
const MAX_HEADROOM: u32 = 65535;
/// How close the next packet must be for the source to keep an idle worker polling
/// rather than let it sleep (the worker's idle sleeps last at most 10 ms).
const POLL_WITHIN_NS: u64 = 10_000_000;

/// Nanoseconds in TSC ticks.
fn ticks(ns: u64) -> u64 {
    (ns as f64 * tsc::tsc_hz() / 1e9) as u64
}

/// Click's `Timestamp::unparse_interval` (nanosecond timestamps): under a second,
/// whole milliseconds, microseconds or nanoseconds (`500ms`, `250us`, `7ns`); from a
/// second, seconds with six decimals, or nine when the nanoseconds need them
/// (`1.500000s`, `2.000000001s`).
fn unparse_interval(ns: u64) -> String {
    let (sec, sub) = (ns / 1_000_000_000, ns % 1_000_000_000);
    if sec == 0 {
        if sub % 1_000_000 == 0 {
            format!("{}ms", sub / 1_000_000)
        } else if sub % 1000 == 0 {
            format!("{}us", sub / 1000)
        } else {
            format!("{}ns", sub)
        }
    } else if sub % 1000 == 0 {
        format!("{}.{:06}s", sec, sub / 1000)
    } else {
        format!("{}.{:09}s", sec, sub)
    }
}

/// The packet every emission copies.
struct Template {
    data: Arc<Vec<u8>>,
    headroom: u32,
}

struct Shared {
    interval_ns: AtomicU64,
    /// -1: no limit.
    limit: AtomicI64,
    count: AtomicU64,
    active: AtomicBool,
    /// Bumped by an `active` or `reset` write: the instance starts its timer now if it
    /// was not running (Click's `schedule_now` when the timer is not scheduled).
    kicks: AtomicU64,
    /// Bumped whenever the template changes.
    generation: AtomicU64,
    template: Mutex<Template>,
}

pub struct TimedSourceClass;

impl ElementClass for TimedSourceClass {
    fn name(&self) -> &'static str {
        "TimedSource"
    }
    fn port_count(&self) -> PortCount {
        PortCount::parse("0/1")
    }
    fn build(&self, args: &mut Args, cx: &BuildContext) -> Result<Arc<dyn ElementSpec>, ConfigError> {
        let e = |m: String| cx.error(m);
        let interval = args.positional::<Interval>("INTERVAL").map_err(e)?;
        let data = args.positional::<DataArg>("DATA").map_err(e)?;
        let limit = args.keyword::<i32>("LIMIT").map_err(e)?.unwrap_or(-1);
        let active = args.keyword::<bool>("ACTIVE").map_err(e)?.unwrap_or(true);
        let stop = args.keyword::<bool>("STOP").map_err(e)?.unwrap_or(false);
        let headroom = args.keyword::<u32>("HEADROOM").map_err(e)?;
        args.finish().map_err(e)?;
        let headroom = headroom.unwrap_or(packet::DEFAULT_HEADROOM as u32);
        if headroom > MAX_HEADROOM {
            return Err(cx.error(format!("HEADROOM must be at most {}", MAX_HEADROOM)));
        }
        Ok(Arc::new(TimedSourceSpec {
            shared: Arc::new(Shared {
                interval_ns: AtomicU64::new(interval.map_or(DEFAULT_INTERVAL_NS, |i| i.0)),
                limit: AtomicI64::new(i64::from(limit)),
                count: AtomicU64::new(0),
                active: AtomicBool::new(active),
                kicks: AtomicU64::new(0),
                generation: AtomicU64::new(0),
                template: Mutex::new(Template {
                    data: Arc::new(data.map_or_else(|| DEFAULT_DATA.to_vec(), |d| d.0)),
                    headroom,
                }),
            }),
            stop,
            taken: AtomicBool::new(false),
        }))
    }
}

struct TimedSourceSpec {
    shared: Arc<Shared>,
    stop: bool,
    taken: AtomicBool,
}

impl ElementSpec for TimedSourceSpec {
    fn instantiate(&self, worker: WorkerInfo) -> Box<dyn Element> {
        if worker.index != 0 || self.taken.swap(true, Ordering::AcqRel) {
            return Box::new(IdleSource);
        }
        let s = &self.shared;
        let (generation, data, headroom) = {
            let t = lock(&s.template);
            (s.generation.load(Ordering::Acquire), t.data.clone(), t.headroom)
        };
        // Measured now rather than at the first packet.
        let _ = tsc::tsc_hz();
        Box::new(TimedSource {
            shared: s.clone(),
            stop: self.stop,
            started: false,
            next: None,
            kicks: s.kicks.load(Ordering::Acquire),
            generation,
            data,
            headroom,
        })
    }

    fn handlers(&self) -> Vec<HandlerInfo> {
        vec![
            HandlerInfo::read_write("data"),
            HandlerInfo::read_write("limit"),
            HandlerInfo::read_write("interval"),
            HandlerInfo::read_write("active"),
            HandlerInfo::read("count"),
            HandlerInfo::read_write("headroom"),
            HandlerInfo::write("reset"),
        ]
    }

    fn read_handler(&self, name: &str) -> Option<String> {
        let s = &self.shared;
        Some(match name {
            "data" => String::from_utf8_lossy(&lock(&s.template).data).into_owned(),
            "limit" => s.limit.load(Ordering::Relaxed).to_string(),
            "interval" => unparse_interval(s.interval_ns.load(Ordering::Relaxed)),
            "active" => s.active.load(Ordering::Relaxed).to_string(),
            "count" => s.count.load(Ordering::Relaxed).to_string(),
            "headroom" => lock(&s.template).headroom.to_string(),
            _ => return None,
        })
    }

    fn write_handler(&self, name: &str, value: &str) -> Option<Result<(), String>> {
        let s = &self.shared;
        let text = uncomment(value);
        let text = text.trim();
        let kick = || {
            s.kicks.fetch_add(1, Ordering::Release);
        };
        Some(match name {
            // A raw handler, as Click's: the text is the data, unquoted by nobody.
            "data" => {
                lock(&s.template).data = Arc::new(value.as_bytes().to_vec());
                s.generation.fetch_add(1, Ordering::Release);
                Ok(())
            }
            "headroom" => match u32::from_arg(text).filter(|&h| h <= MAX_HEADROOM) {
                Some(h) => {
                    lock(&s.template).headroom = h;
                    s.generation.fetch_add(1, Ordering::Release);
                    Ok(())
                }
                None => Err("bad headroom".to_string()),
            },
            "limit" => match i32::from_arg(text) {
                Some(l) => {
                    s.limit.store(i64::from(l), Ordering::Relaxed);
                    Ok(())
                }
                None => Err("expected integer".to_string()),
            },
            "interval" => match Interval::from_arg(text).filter(|i| i.0 > 0) {
                Some(i) => {
                    s.interval_ns.store(i.0, Ordering::Relaxed);
                    Ok(())
                }
                None => Err("bad interval".to_string()),
            },
            "active" => match bool::from_arg(text) {
                Some(a) => {
                    s.active.store(a, Ordering::Relaxed);
                    if a {
                        kick();
                    }
                    Ok(())
                }
                None => Err("bad active".to_string()),
            },
            "reset" => {
                s.count.store(0, Ordering::Relaxed);
                kick();
                Ok(())
            }
            _ => return None,
        })
    }
}

struct TimedSource {
    shared: Arc<Shared>,
    stop: bool,
    /// The timer was set up (on the first run: Click schedules it at initialization,
    /// INTERVAL ahead, when the element is active).
    started: bool,
    /// When the timer fires next (TSC ticks), if it is scheduled.
    next: Option<u64>,
    kicks: u64,
    generation: u64,
    data: Arc<Vec<u8>>,
    headroom: u32,
}

impl TimedSource {
    fn packet(&mut self) -> Packet {
        let s = &*self.shared;
        let g = s.generation.load(Ordering::Acquire);
        if g != self.generation {
            let t = lock(&s.template);
            (self.data, self.headroom) = (t.data.clone(), t.headroom);
            self.generation = g;
        }
        let mut p = Packet::alloc_with_headroom(self.headroom as usize, self.data.len());
        p.data_mut().copy_from_slice(&self.data);
        p.anno_mut().timestamp = Timestamp::now();
        p
    }
}

impl Element for TimedSource {
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, _out: &mut Outputs<'_>, _cx: &mut Context<'_>) {
        batch.clear();
    }

    fn is_source(&self) -> bool {
        true
    }

    fn run(&mut self, out: &mut Outputs<'_>, cx: &mut Context<'_>) -> TaskStatus {
        let shared = self.shared.clone();
        let s = &*shared;
        let now = cx.now_tsc();
        // The kicks before `active`: a handler stores `active` then kicks, so a kick
        // seen here comes with the `active` written before it.
        let kicks = s.kicks.load(Ordering::Acquire);
        let active = s.active.load(Ordering::Relaxed);
        if !self.started {
            self.started = true;
            if active {
                self.next = Some(now.saturating_add(ticks(s.interval_ns.load(Ordering::Relaxed))));
            }
        }
        if kicks != self.kicks {
            self.kicks = kicks;
            if self.next.is_none() && active {
                self.next = Some(now);
            }
        }
        let due = match self.next {
            None => return TaskStatus::Idle,
            Some(t) if now < t => return TaskStatus::IdleUntil(t),
            Some(t) => t,
        };
        // The timer fires: it runs again only if this firing reschedules it.
        self.next = None;
        if !active {
            return TaskStatus::Idle;
        }
        let limit = s.limit.load(Ordering::Relaxed);
        if limit < 0 || s.count.load(Ordering::Relaxed) < limit as u64 {
            let p = self.packet();
            out.push(0, p);
            s.count.fetch_add(1, Ordering::Relaxed);
            // Click's reschedule_after: INTERVAL after this expiry, not after now.
            self.next = Some(due.saturating_add(ticks(s.interval_ns.load(Ordering::Relaxed))));
            TaskStatus::Busy
        } else if self.stop {
            cx.request_stop();
            TaskStatus::Done
        } else {
            TaskStatus::Idle
        }
    }

    fn idle_wait(&mut self) -> IdleWait {
        match self.next {
            Some(t) if t.saturating_sub(tsc::rdtsc()) < ticks(POLL_WITHIN_NS) => IdleWait::Poll,
            // Nothing due soon: the worker may sleep; it looks again within 10 ms.
            _ => IdleWait::Nothing,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{build, build_error, Harness};
    use std::time::{Duration, Instant};

    /// Runs the source until it has emitted `n` packets or finished, or 5 s passed;
    /// returns the packets and the last status.
    fn run_for(h: &mut Harness, n: usize) -> (Vec<Packet>, TaskStatus) {
        let start = Instant::now();
        let mut got = Vec::new();
        loop {
            let (st, mut out) = h.run();
            got.append(&mut out[0]);
            if got.len() >= n || st == TaskStatus::Done || start.elapsed() > Duration::from_secs(5) {
                return (got, st);
            }
            if st != TaskStatus::Busy {
                std::thread::sleep(Duration::from_micros(200));
            }
        }
    }

    #[test]
    fn emits_data_every_interval_up_to_the_limit_then_stops() {
        let mut h = Harness::new(&TimedSourceClass, "2ms, \\<0a 0b 0c>, LIMIT 3, STOP true", 0, 1);
        let start = Instant::now();
        // The first packet waits one interval.
        let (st, out) = h.run();
        assert!(matches!(st, TaskStatus::IdleUntil(_)), "{:?}", st);
        assert!(out[0].is_empty());
        let (got, st) = run_for(&mut h, 100);
        assert_eq!(st, TaskStatus::Done);
        assert!(h.stop_requested());
        assert_eq!(got.len(), 3);
        for p in &got {
            assert_eq!(p.data(), &[0x0a, 0x0b, 0x0c]);
            assert!(!p.anno().timestamp.is_zero());
        }
        // Three intervals for the packets, a fourth before the stop.
        assert!(
            start.elapsed() >= Duration::from_millis(8),
            "{:?}",
            start.elapsed()
        );
        assert_eq!(h.read("count"), "3");
    }

    #[test]
    fn without_stop_it_idles_at_the_limit_until_reset() {
        let mut h = Harness::new(&TimedSourceClass, "INTERVAL 1ms, LIMIT 2", 0, 1);
        let (got, _) = run_for(&mut h, 2);
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].data(), DEFAULT_DATA);
        std::thread::sleep(Duration::from_millis(5));
        // The firing after the limit leaves the timer off.
        for _ in 0..3 {
            let (st, out) = h.run();
            assert_eq!(st, TaskStatus::Idle);
            assert!(out[0].is_empty());
        }
        assert!(!h.stop_requested());
        assert_eq!(h.read("count"), "2");
        // reset starts the timer at once.
        h.write("reset", "").unwrap();
        assert_eq!(h.read("count"), "0");
        let (st, out) = h.run();
        assert_eq!(st, TaskStatus::Busy);
        assert_eq!(out[0].len(), 1);
    }

    #[test]
    fn inactive_until_the_active_handler_says_so() {
        let mut h = Harness::new(&TimedSourceClass, "1ms, ACTIVE false", 0, 1);
        std::thread::sleep(Duration::from_millis(3));
        assert_eq!(h.run().0, TaskStatus::Idle);
        assert_eq!(h.element.idle_wait(), IdleWait::Nothing);
        assert_eq!(h.read("active"), "false");
        h.write("active", "true").unwrap();
        let (st, out) = h.run();
        assert_eq!(st, TaskStatus::Busy);
        assert_eq!(out[0].len(), 1);
        // Deactivated: the next firing stops the timer.
        h.write("active", "false").unwrap();
        std::thread::sleep(Duration::from_millis(3));
        assert_eq!(h.run().0, TaskStatus::Idle);
        assert_eq!(h.write("active", "2"), Err("bad active".to_string()));
    }

    #[test]
    fn an_interval_of_centuries_sends_nothing() {
        // Beyond what the time-stamp counter counts to: the timer saturates instead of
        // wrapping round to "due now".
        let mut h = Harness::new(&TimedSourceClass, "180000d, \\<01>", 0, 1);
        for _ in 0..3 {
            let (st, out) = h.run();
            assert!(out[0].is_empty());
            assert!(matches!(st, TaskStatus::IdleUntil(_)), "{st:?}");
        }
    }

    #[test]
    fn a_distant_packet_lets_the_worker_sleep() {
        let mut h = Harness::new(&TimedSourceClass, "", 0, 1);
        assert!(matches!(h.run().0, TaskStatus::IdleUntil(_)));
        assert_eq!(h.element.idle_wait(), IdleWait::Nothing);
        let mut h = Harness::new(&TimedSourceClass, "1ms", 0, 1);
        assert!(matches!(h.run().0, TaskStatus::IdleUntil(_)));
        assert_eq!(h.element.idle_wait(), IdleWait::Poll);
    }

    #[test]
    fn handlers() {
        let h = Harness::new(&TimedSourceClass, "", 0, 1);
        assert_eq!(h.read("interval"), "500ms");
        assert_eq!(h.read("limit"), "-1");
        assert_eq!(h.read("active"), "true");
        assert_eq!(h.read("count"), "0");
        assert_eq!(
            h.read("data"),
            "Random bullshit in a packet, at least 64 bytes long. Well, now it is."
        );
        assert_eq!(h.read("headroom"), packet::DEFAULT_HEADROOM.to_string());
        for (value, read) in [
            ("1.5", "1.500000s"),
            ("250us", "250us"),
            ("7ns", "7ns"),
            ("2.000000001", "2.000000001s"),
            ("1", "1.000000s"),
        ] {
            h.write("interval", value).unwrap();
            assert_eq!(h.read("interval"), read);
        }
        assert_eq!(h.write("interval", "0"), Err("bad interval".to_string()));
        assert_eq!(h.write("interval", "soon"), Err("bad interval".to_string()));
        h.write("limit", "5").unwrap();
        assert_eq!(h.read("limit"), "5");
        assert_eq!(h.write("limit", "x"), Err("expected integer".to_string()));
        assert_eq!(h.write("headroom", "70000"), Err("bad headroom".to_string()));
        h.write("data", "\\<41>").unwrap();
        assert_eq!(h.read("data"), "\\<41>");
    }

    #[test]
    fn data_and_headroom_writes_reach_the_packets() {
        let mut h = Harness::new(&TimedSourceClass, "1ms, abc, HEADROOM 16", 0, 1);
        let (got, _) = run_for(&mut h, 1);
        assert_eq!(got[0].data(), b"abc");
        assert_eq!(got[0].headroom(), 16);
        h.write("data", "xy").unwrap();
        h.write("headroom", "40").unwrap();
        let (got, _) = run_for(&mut h, 1);
        assert_eq!(got[0].data(), b"xy");
        assert_eq!(got[0].headroom(), 40);
    }

    #[test]
    fn runs_on_worker_zero_only() {
        let spec = build(&TimedSourceClass, "1ms", 0, 1).unwrap();
        let stop = StopFlag::new();
        let mut outs = vec![PacketBatch::new()];
        let mut cx = Context::new(WorkerInfo { index: 1, count: 2 }, &stop);
        let mut other = spec.instantiate(WorkerInfo { index: 1, count: 2 });
        assert_eq!(other.run(&mut Outputs::new(&mut outs), &mut cx), TaskStatus::Done);
        assert!(outs[0].is_empty());
    }

    #[test]
    fn configuration_errors() {
        let err = |c: &str| build_error(&TimedSourceClass, c, 0, 1);
        assert_eq!(err("soon"), "e :: TimedSource: INTERVAL expects time interval");
        assert_eq!(err("1, x, LIMIT y"), "e :: TimedSource: LIMIT expects integer");
        assert_eq!(err("1, x, STOP maybe"), "e :: TimedSource: STOP expects bool");
        assert_eq!(
            err("HEADROOM 65536"),
            "e :: TimedSource: HEADROOM must be at most 65535"
        );
        assert_eq!(err("1, x, 3"), "e :: TimedSource: too many arguments");
        assert_eq!(err("BURST 2"), "e :: TimedSource: bad keyword 'BURST'");
    }
}
