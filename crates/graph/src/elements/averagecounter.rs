//! `AverageCounter([IGNORE])`: counts packets and bytes and reports their strict
//! average rates, as Click's `AverageCounter`.
//!
//! The rate is the count divided by the time from the first packet since the last reset
//! (plus IGNORE seconds, during which packets are not counted) to the most recent
//! counted packet. Times are the pass's TSC reading (`Context::now_tsc`).
//!
//! Counts are router-wide without a shared write per batch: every worker's instance adds
//! into a cache line of its own, which only it writes, and the read handlers sum the
//! lines. The only shared writes are the first packet's time (once per reset) and the
//! reset itself, which bumps a generation: a worker that sees a new generation clears
//! its own line before counting again, and readers skip lines of an older generation.

use crate::args::{Args, Interval};
use crate::element::*;
use crate::error::ConfigError;
use crate::tsc;
use packet::PacketBatch;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

pub struct AverageCounterClass;

impl ElementClass for AverageCounterClass {
    fn name(&self) -> &'static str {
        "AverageCounter"
    }
    fn port_count(&self) -> PortCount {
        PortCount::parse("1/1")
    }
    fn build(&self, args: &mut Args, cx: &BuildContext) -> Result<Arc<dyn ElementSpec>, ConfigError> {
        let ignore = args.positional::<Interval>("IGNORE").map_err(|e| cx.error(e))?;
        args.finish().map_err(|e| cx.error(e))?;
        let ignore_secs = ignore.map_or(0.0, |i| i.0 as f64 / 1e9);
        Ok(Arc::new(AverageCounterSpec {
            shared: Arc::new(Shared::new(ignore_secs, tsc::tsc_hz())),
        }))
    }
}

/// One worker's counts, on a line of its own (128 bytes: adjacent-line prefetch pairs
/// lines).
#[repr(align(128))]
#[derive(Default)]
struct Slot {
    /// The reset generation these counts belong to.
    generation: AtomicU64,
    packets: AtomicU64,
    bytes: AtomicU64,
    /// TSC reading of the most recent counted batch (0: none).
    last: AtomicU64,
}

impl Slot {
    /// Adds to a slot only its worker writes: plain loads and stores.
    #[inline]
    fn add_own(&self, packets: u64, bytes: u64, now: u64) {
        let p = &self.packets;
        p.store(p.load(Ordering::Relaxed).wrapping_add(packets), Ordering::Relaxed);
        let b = &self.bytes;
        b.store(b.load(Ordering::Relaxed).wrapping_add(bytes), Ordering::Relaxed);
        self.last.store(now, Ordering::Relaxed);
    }

    /// Empties the slot for `generation` (its worker only).
    fn restart(&self, generation: u64) {
        self.packets.store(0, Ordering::Relaxed);
        self.bytes.store(0, Ordering::Relaxed);
        self.last.store(0, Ordering::Relaxed);
        self.generation.store(generation, Ordering::Release);
    }
}

struct Shared {
    slots: Mutex<Vec<Arc<Slot>>>,
    /// Bumped by every reset.
    generation: AtomicU64,
    /// TSC reading of the first packet since the last reset (0: none yet).
    start: AtomicU64,
    /// IGNORE in TSC ticks.
    ignore_ticks: u64,
    ticks_per_sec: f64,
}

/// What the read handlers report.
#[derive(Debug, PartialEq, Eq)]
struct Totals {
    packets: u64,
    bytes: u64,
    /// Ticks from the start of counting to the most recent counted packet.
    elapsed: u64,
}

impl Shared {
    fn new(ignore_secs: f64, ticks_per_sec: f64) -> Shared {
        Shared {
            slots: Mutex::new(Vec::new()),
            generation: AtomicU64::new(0),
            start: AtomicU64::new(0),
            ignore_ticks: (ignore_secs * ticks_per_sec).round() as u64,
            ticks_per_sec,
        }
    }

    fn new_slot(&self) -> Arc<Slot> {
        let slot = Arc::new(Slot::default());
        slot.generation
            .store(self.generation.load(Ordering::Acquire), Ordering::Relaxed);
        self.slots
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(slot.clone());
        slot
    }

    /// The time of the first packet since the reset: `now` if no worker has set it yet.
    fn start_at(&self, now: u64) -> u64 {
        let now = now.max(1);
        match self
            .start
            .compare_exchange(0, now, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => now,
            Err(first) => first,
        }
    }

    fn totals(&self) -> Totals {
        let generation = self.generation.load(Ordering::Acquire);
        let start = self.start.load(Ordering::Acquire);
        let (mut packets, mut bytes, mut last) = (0u64, 0u64, 0u64);
        for s in self.slots.lock().unwrap_or_else(|e| e.into_inner()).iter() {
            if s.generation.load(Ordering::Acquire) != generation {
                continue;
            }
            packets = packets.wrapping_add(s.packets.load(Ordering::Relaxed));
            bytes = bytes.wrapping_add(s.bytes.load(Ordering::Relaxed));
            last = last.max(s.last.load(Ordering::Relaxed));
        }
        let elapsed = if start == 0 {
            0
        } else {
            last.saturating_sub(start.saturating_add(self.ignore_ticks))
        };
        Totals {
            packets,
            bytes,
            elapsed,
        }
    }

    fn reset(&self) {
        self.start.store(0, Ordering::Release);
        self.generation.fetch_add(1, Ordering::AcqRel);
    }

    /// `n` per second over `elapsed` ticks, with at most three decimals.
    fn per_second(&self, n: u64, elapsed: u64) -> String {
        if n == 0 || elapsed == 0 {
            return "0".to_string();
        }
        let rate = n as f64 * self.ticks_per_sec / elapsed as f64;
        let text = format!("{:.3}", rate);
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

struct AverageCounterSpec {
    shared: Arc<Shared>,
}

impl ElementSpec for AverageCounterSpec {
    fn instantiate(&self, _w: WorkerInfo) -> Box<dyn Element> {
        let slot = self.shared.new_slot();
        Box::new(AverageCounter {
            shared: self.shared.clone(),
            generation: slot.generation.load(Ordering::Relaxed),
            slot,
            start: 0,
        })
    }

    fn handlers(&self) -> Vec<HandlerInfo> {
        vec![
            HandlerInfo::read("count"),
            HandlerInfo::read("byte_count"),
            HandlerInfo::read("rate"),
            HandlerInfo::read("byte_rate"),
            HandlerInfo::write("reset"),
        ]
    }

    fn read_handler(&self, name: &str) -> Option<String> {
        let s = &self.shared;
        let t = || s.totals();
        match name {
            "count" => Some(t().packets.to_string()),
            "byte_count" => Some(t().bytes.to_string()),
            "rate" => {
                let t = t();
                Some(s.per_second(t.packets, t.elapsed))
            }
            "byte_rate" => {
                let t = t();
                Some(s.per_second(t.bytes, t.elapsed))
            }
            _ => None,
        }
    }

    fn write_handler(&self, name: &str, _value: &str) -> Option<Result<(), String>> {
        (name == "reset").then(|| {
            self.shared.reset();
            Ok(())
        })
    }
}

struct AverageCounter {
    shared: Arc<Shared>,
    slot: Arc<Slot>,
    /// The reset generation this worker's slot counts for.
    generation: u64,
    /// The first packet's time in this generation, once this worker has seen it.
    start: u64,
}

impl Element for AverageCounter {
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, out: &mut Outputs<'_>, cx: &mut Context<'_>) {
        if batch.is_empty() {
            return;
        }
        let now = cx.now_tsc();
        let generation = self.shared.generation.load(Ordering::Acquire);
        if generation != self.generation {
            self.generation = generation;
            self.start = 0;
            self.slot.restart(generation);
        }
        if self.start == 0 {
            self.start = self.shared.start_at(now);
        }
        // (A pass that began before another worker set the start is taken as at the
        // start: its packets came no earlier than the first.)
        if now.max(self.start) >= self.start.saturating_add(self.shared.ignore_ticks) {
            let bytes: u64 = batch.iter().map(|p| p.len() as u64).sum();
            self.slot.add_own(batch.len() as u64, bytes, now);
        }
        out.push_batch(0, batch);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{build_error, Harness};
    use packet::Packet;

    /// A spec whose clock ticks 1000 times a second (a tick is a millisecond).
    fn ms_spec(ignore_secs: f64) -> AverageCounterSpec {
        AverageCounterSpec {
            shared: Arc::new(Shared::new(ignore_secs, 1000.0)),
        }
    }

    /// Pushes `n` packets of `len` bytes into `e` at tick `now`; returns how many came out.
    fn push_at(e: &mut Box<dyn Element>, now: u64, n: usize, len: usize) -> usize {
        let stop = StopFlag::new();
        let w = WorkerInfo { index: 0, count: 1 };
        let mut cx = Context::at(w, &stop, now);
        let mut outs = vec![PacketBatch::new()];
        let mut b: PacketBatch = (0..n).map(|_| Packet::zeroed(len)).collect();
        let mut o = Outputs::for_input(&mut outs, &b);
        e.push(0, &mut b, &mut o, &mut cx);
        o.settle(&mut b);
        outs[0].len()
    }

    fn read(spec: &AverageCounterSpec, h: &str) -> String {
        spec.read_handler(h).unwrap()
    }

    #[test]
    fn a_worker_whose_pass_began_before_the_start_another_set_counts_its_packets() {
        // Worker 0 sets the start at tick 1001; worker 1's pass began at tick 1000 and
        // reaches the counter after it. With IGNORE 0 every packet counts.
        let spec = ms_spec(0.0);
        let mut a = spec.instantiate(WorkerInfo { index: 0, count: 2 });
        let mut b = spec.instantiate(WorkerInfo { index: 1, count: 2 });
        push_at(&mut a, 1001, 10, 100);
        push_at(&mut b, 1000, 10, 100);
        push_at(&mut a, 2001, 10, 100);
        assert_eq!(read(&spec, "count"), "30");
        assert_eq!(read(&spec, "byte_count"), "3000");
    }

    #[test]
    fn passes_packets_unchanged_and_counts_them() {
        let mut h = Harness::new(&AverageCounterClass, "", 1, 1);
        let out = h.push(
            0,
            vec![Packet::from_slice(&[1, 2, 3]), Packet::from_slice(&[9; 60])],
        );
        assert_eq!(out[0][0].data(), &[1, 2, 3]);
        assert_eq!(out[0][1].data(), &[9u8; 60][..]);
        assert_eq!(h.read("count"), "2");
        assert_eq!(h.read("byte_count"), "63");
        // One instant so far: no time to average over.
        assert_eq!(h.read("rate"), "0");
        assert_eq!(h.read("byte_rate"), "0");
    }

    #[test]
    fn rate_is_the_strict_average_from_the_first_to_the_last_packet() {
        let spec = ms_spec(0.0);
        let mut e = spec.instantiate(WorkerInfo { index: 0, count: 1 });
        // 10 packets of 100 bytes at 5 s, 20 more at 6 s, 10 more at 9 s: 40 packets,
        // 4000 bytes over 4 s.
        assert_eq!(push_at(&mut e, 5_000, 10, 100), 10);
        push_at(&mut e, 6_000, 20, 100);
        push_at(&mut e, 9_000, 10, 100);
        assert_eq!(read(&spec, "count"), "40");
        assert_eq!(read(&spec, "byte_count"), "4000");
        assert_eq!(read(&spec, "rate"), "10");
        assert_eq!(read(&spec, "byte_rate"), "1000");
        // 41 packets over 4.5 s: 9.111 a second.
        push_at(&mut e, 9_500, 1, 100);
        assert_eq!(read(&spec, "rate"), "9.111");
        assert_eq!(read(&spec, "byte_rate"), "911.111");
    }

    #[test]
    fn counts_and_rates_are_summed_over_workers() {
        let spec = ms_spec(0.0);
        let mut w0 = spec.instantiate(WorkerInfo { index: 0, count: 2 });
        let mut w1 = spec.instantiate(WorkerInfo { index: 1, count: 2 });
        // The first packet anywhere starts the clock; the last one anywhere ends it.
        push_at(&mut w1, 1_000, 3, 64);
        push_at(&mut w0, 1_500, 2, 64);
        push_at(&mut w1, 2_000, 5, 64);
        push_at(&mut w0, 3_000, 10, 64);
        assert_eq!(read(&spec, "count"), "20");
        assert_eq!(read(&spec, "byte_count"), "1280");
        // 20 packets over 2 s.
        assert_eq!(read(&spec, "rate"), "10");
        assert_eq!(read(&spec, "byte_rate"), "640");
    }

    #[test]
    fn ignore_leaves_out_the_first_seconds() {
        let spec = ms_spec(2.0);
        let mut e = spec.instantiate(WorkerInfo { index: 0, count: 1 });
        // First packet at 1 s: counting starts at 3 s.
        push_at(&mut e, 1_000, 50, 10);
        push_at(&mut e, 2_999, 50, 10);
        assert_eq!(read(&spec, "count"), "0");
        assert_eq!(read(&spec, "rate"), "0");
        push_at(&mut e, 3_000, 4, 10);
        push_at(&mut e, 7_000, 4, 10);
        assert_eq!(read(&spec, "count"), "8");
        assert_eq!(read(&spec, "byte_count"), "80");
        // 8 packets from 3 s to 7 s.
        assert_eq!(read(&spec, "rate"), "2");
        assert_eq!(read(&spec, "byte_rate"), "20");
        // Ignored packets still pass.
        assert_eq!(push_at(&mut e, 7_500, 3, 10), 3);
    }

    #[test]
    fn reset_clears_every_worker_and_restarts_the_clock() {
        let spec = ms_spec(0.0);
        let mut w0 = spec.instantiate(WorkerInfo { index: 0, count: 2 });
        let mut w1 = spec.instantiate(WorkerInfo { index: 1, count: 2 });
        push_at(&mut w0, 1_000, 7, 10);
        push_at(&mut w1, 2_000, 7, 10);
        spec.write_handler("reset", "").unwrap().unwrap();
        assert_eq!(read(&spec, "count"), "0");
        assert_eq!(read(&spec, "byte_count"), "0");
        assert_eq!(read(&spec, "rate"), "0");
        // Only worker 1 counts after the reset; worker 0's old counts stay out.
        push_at(&mut w1, 10_000, 1, 30);
        push_at(&mut w1, 10_250, 1, 30);
        assert_eq!(read(&spec, "count"), "2");
        assert_eq!(read(&spec, "byte_count"), "60");
        // 2 packets over 0.25 s, from the first packet after the reset.
        assert_eq!(read(&spec, "rate"), "8");
        push_at(&mut w0, 10_500, 1, 30);
        assert_eq!(read(&spec, "count"), "3");
        assert_eq!(read(&spec, "rate"), "6");
    }

    #[test]
    fn handlers_and_bad_arguments() {
        let h = Harness::new(&AverageCounterClass, "IGNORE 1.5", 1, 1);
        let names: Vec<_> = h.spec.handlers().iter().map(|h| h.name).collect();
        assert_eq!(names, ["count", "byte_count", "rate", "byte_rate", "reset"]);
        Harness::new(&AverageCounterClass, "250ms", 1, 1);
        assert_eq!(
            build_error(&AverageCounterClass, "soon", 1, 1),
            "e :: AverageCounter: IGNORE expects time interval"
        );
        assert_eq!(
            build_error(&AverageCounterClass, "1, 2", 1, 1),
            "e :: AverageCounter: too many arguments"
        );
    }
}
