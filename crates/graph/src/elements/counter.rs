//! `Counter([COUNT_CALL, BYTE_COUNT_CALL])`: counts packets and bytes and measures their
//! rates, as Click's `Counter`.
//!
//! Counts are router-wide: every worker's instance adds its packets and bytes into a
//! cache line of its own, registered with the spec, once per batch, with a plain load
//! and store (no locked instruction: only that instance writes the line), and the read
//! handlers report the sum. A reset never writes a worker's line: it records the totals it
//! clears, which readers subtract, so a worker's store cannot undo it. Epochs are read from the
//! TSC, not the system clock, and from the pass's one reading (`Context::now_tsc`), not one
//! per batch. Rates use Click's rate estimator (an exponentially weighted moving average
//! over 1 ms epochs, alpha 1/16, 10 bits of fraction for packets and 4 for bytes) fed with
//! the router-wide counts, so `rate`, `byte_rate` and `bit_rate` print the same text Click
//! prints for the same traffic.
//!
//! `COUNT_CALL N stop` and `BYTE_COUNT_CALL N stop` are supported for Click's global
//! `stop` handler (the common "stop after N packets" idiom); calls to other handlers
//! are refused at configuration time.

use crate::args::{split_words, Args};
use crate::element::*;
use crate::error::ConfigError;
use crate::tsc;
use packet::PacketBatch;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

pub struct CounterClass;

/// Click's `RateEWMA` stability shift: alpha = 1/16.
const STABILITY_SHIFT: u32 = 4;
/// Click's compensation term, `1 << (stability_shift - 1)`.
const COMPENSATION: u64 = 1 << (STABILITY_SHIFT - 1);
/// Epochs per second (Click's user-level jiffies are milliseconds).
const EPOCH_FREQUENCY: u64 = 1000;
/// Bits of fraction of the packet-rate average.
pub(crate) const PACKET_SCALE: u32 = 10;
/// Bits of fraction of the byte-rate average (fewer, to avoid overflow, as Click).
const BYTE_SCALE: u32 = 4;

/// An exponentially weighted moving average with `scale` bits of fraction, using
/// Click's integer arithmetic (arithmetic right shift of the signed difference).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Ewma {
    pub(crate) scaled: u64,
}

impl Ewma {
    pub(crate) fn update(&mut self, x: u64, scale: u32) {
        let target = (x << scale).wrapping_add(COMPENSATION);
        let step = (target.wrapping_sub(self.scaled) as i64) >> STABILITY_SHIFT;
        self.scaled = self.scaled.wrapping_add(step as u64);
    }

    /// `n` observations of zero (idle epochs). Like Click, 100 or more clear it.
    pub(crate) fn update_idle(&mut self, n: u64, scale: u32) {
        if n >= 100 {
            self.scaled = 0;
        } else {
            for _ in 0..n {
                self.update(0, scale);
            }
        }
    }
}

/// Click's `cp_unparse_real2` for a signed fixed-point value with `frac_bits` bits of
/// fraction: the shortest decimal that reads back as the same fixed-point value.
pub(crate) fn unparse_real2(value: i64, frac_bits: u32) -> String {
    if value < 0 {
        return format!("-{}", unparse_real2_unsigned(value.unsigned_abs(), frac_bits));
    }
    unparse_real2_unsigned(value as u64, frac_bits)
}

fn unparse_real2_unsigned(value: u64, frac_bits: u32) -> String {
    let mut s = (value >> frac_bits).to_string();
    let one: u64 = 1 << frac_bits;
    let mut frac = value & (one - 1);
    if frac == 0 {
        return s;
    }
    s.push('.');
    // Knuth's print_scaled: emit digits until the remaining fraction is below the
    // precision the fixed-point value can carry.
    frac = 10 * frac + 5;
    let mut allowable: u64 = 10;
    let mut rounder: u64 = 5;
    while rounder < (one >> 1) {
        rounder *= 10;
    }
    loop {
        if allowable > one {
            frac = (frac + (one >> 1)).wrapping_sub(rounder);
        }
        s.push(char::from(b'0' + (frac >> frac_bits) as u8));
        frac = 10 * (frac & (one - 1));
        allowable *= 10;
        if frac <= allowable {
            break;
        }
    }
    s
}

/// The rate estimator's state, advanced when the epoch changes.
#[derive(Debug, Default)]
struct RateState {
    epoch: u64,
    /// Router-wide counts when the current epoch began.
    count_mark: u64,
    bytes_mark: u64,
    packets: Ewma,
    bytes: Ewma,
}

/// A `COUNT_CALL`/`BYTE_COUNT_CALL` trigger: Click's global `stop` handler.
#[derive(Debug)]
struct Trigger {
    at: u64,
    fired: AtomicBool,
}

/// One worker's packets and bytes since the element was built, on a line of its own
/// (128 bytes: adjacent-line prefetch pairs lines).
#[repr(align(128))]
#[derive(Default)]
struct Slot {
    packets: AtomicU64,
    bytes: AtomicU64,
}

impl Slot {
    /// Adds to a slot only one thread writes: a plain load and store.
    #[inline(always)]
    fn add_own(&self, packets: u64, bytes: u64) {
        let p = &self.packets;
        p.store(p.load(Ordering::Relaxed).wrapping_add(packets), Ordering::Relaxed);
        let b = &self.bytes;
        b.store(b.load(Ordering::Relaxed).wrapping_add(bytes), Ordering::Relaxed);
    }
}

struct Shared {
    /// Every instance's slot, for the readers: each instance (one per worker) has its
    /// own and is the only one to write it.
    slots: Mutex<Vec<Arc<Slot>>>,
    /// Packets and bytes at the last reset: the handlers report the totals minus these.
    reset_base: [AtomicU64; 2],
    /// Router-wide running totals, kept only for COUNT_CALL / BYTE_COUNT_CALL: a
    /// trigger needs the exact count at which a batch crosses N.
    trigger_totals: Option<[AtomicU64; 2]>,
    /// Epoch of the last rate update, for a cheap check on the fast path.
    epoch: AtomicU64,
    rate: Mutex<RateState>,
    /// TSC reading at epoch 0, and 2^64 / (TSC ticks per 1 ms epoch): an epoch number
    /// is a multiplication, not a division, per batch.
    start_tsc: u64,
    epochs_per_tick: u64,
    count_call: Option<Trigger>,
    byte_count_call: Option<Trigger>,
}

impl Shared {
    fn new(workers: usize, count_call: Option<Trigger>, byte_count_call: Option<Trigger>) -> Shared {
        let triggered = count_call.is_some() || byte_count_call.is_some();
        Shared {
            slots: Mutex::new(Vec::with_capacity(workers)),
            reset_base: [AtomicU64::new(0), AtomicU64::new(0)],
            trigger_totals: triggered.then(|| [AtomicU64::new(0), AtomicU64::new(0)]),
            epoch: AtomicU64::new(0),
            rate: Mutex::new(RateState::default()),
            start_tsc: tsc::rdtsc(),
            epochs_per_tick: {
                let ticks_per_epoch = ((tsc::tsc_hz() / EPOCH_FREQUENCY as f64) as u64).max(2);
                u64::MAX / ticks_per_epoch
            },
            count_call,
            byte_count_call,
        }
    }

    fn now_epoch(&self) -> u64 {
        self.epoch_at(tsc::rdtsc())
    }

    /// The rate epoch at TSC reading `now` (the pass's: `Context::now_tsc`).
    fn epoch_at(&self, now: u64) -> u64 {
        // Saturating: a core whose TSC lags the one that took `start_tsc` reads epoch 0.
        let ticks = now.saturating_sub(self.start_tsc);
        ((ticks as u128 * self.epochs_per_tick as u128) >> 64) as u64
    }

    /// A slot for a new instance, counted by the readers from now on.
    fn new_slot(&self) -> Arc<Slot> {
        let slot = Arc::new(Slot::default());
        let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        slots.push(slot.clone());
        slot
    }

    /// Packets and bytes counted since the element was built (not since a reset).
    fn raw_totals(&self) -> (u64, u64) {
        self.slots
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .fold((0u64, 0u64), |(c, b), s| {
                (
                    c.wrapping_add(s.packets.load(Ordering::Relaxed)),
                    b.wrapping_add(s.bytes.load(Ordering::Relaxed)),
                )
            })
    }

    /// Packets and bytes since the last reset. The bases are read first: a reset
    /// stores them after reading totals that the later reads here cannot be below.
    fn totals(&self) -> (u64, u64) {
        let base_c = self.reset_base[0].load(Ordering::Acquire);
        let base_b = self.reset_base[1].load(Ordering::Acquire);
        let (c, b) = self.raw_totals();
        (c.saturating_sub(base_c), b.saturating_sub(base_b))
    }

    /// Closes the epochs that ended before `now` (Click's `RateEWMAX::update_time`).
    fn roll(&self, st: &mut RateState, now: u64) {
        if now <= st.epoch {
            return;
        }
        let (c, b) = self.raw_totals();
        st.packets.update(c.saturating_sub(st.count_mark), PACKET_SCALE);
        st.bytes.update(b.saturating_sub(st.bytes_mark), BYTE_SCALE);
        let idle = now - st.epoch - 1;
        if idle > 0 {
            st.packets.update_idle(idle, PACKET_SCALE);
            st.bytes.update_idle(idle, BYTE_SCALE);
        }
        st.count_mark = c;
        st.bytes_mark = b;
        st.epoch = now;
        self.epoch.store(now, Ordering::Relaxed);
    }

    /// Called once per batch before the batch is counted.
    #[inline(always)]
    fn tick(&self, now: u64) {
        if now != self.epoch.load(Ordering::Relaxed) {
            self.new_epoch(now);
        }
    }

    /// The first batch of an epoch: closes the epochs before it (once a millisecond,
    /// out of line so the per-batch path keeps a small frame).
    #[cold]
    #[inline(never)]
    fn new_epoch(&self, now: u64) {
        // Another thread holding the lock (a worker, or a rate or reset handler) is
        // rolling or resetting the epoch already.
        if let Ok(mut st) = self.rate.try_lock() {
            self.roll(&mut st, now);
        }
    }

    /// Counts a batch; true when a COUNT_CALL or BYTE_COUNT_CALL fires.
    #[inline(always)]
    fn add(&self, now: u64, slot: &Slot, packets: u64, bytes: u64) -> bool {
        self.tick(now);
        slot.add_own(packets, bytes);
        self.trigger_totals.is_some() && self.add_triggered(packets, bytes)
    }

    /// The router-wide totals a trigger needs, only kept when one is configured.
    #[inline(never)]
    fn add_triggered(&self, packets: u64, bytes: u64) -> bool {
        let Some([total_c, total_b]) = &self.trigger_totals else {
            return false;
        };
        let old_c = total_c.fetch_add(packets, Ordering::Relaxed);
        let old_b = total_b.fetch_add(bytes, Ordering::Relaxed);
        let mut stop = false;
        if let Some(t) = &self.count_call {
            // Click fires when the count equals N, which a batch may step over.
            if old_c < t.at && t.at <= old_c.saturating_add(packets) && !t.fired.swap(true, Ordering::Relaxed)
            {
                stop = true;
            }
        }
        if let Some(t) = &self.byte_count_call {
            if old_b.saturating_add(bytes) >= t.at && !t.fired.swap(true, Ordering::Relaxed) {
                stop = true;
            }
        }
        stop
    }

    fn read_rate(&self, which: &str, now: u64) -> String {
        let mut st = self.rate.lock().unwrap_or_else(|e| e.into_inner());
        self.roll(&mut st, now);
        match which {
            "rate" => unparse_real2(
                (st.packets.scaled as i64).wrapping_mul(EPOCH_FREQUENCY as i64),
                PACKET_SCALE,
            ),
            "byte_rate" => unparse_real2(
                (st.bytes.scaled as i64).wrapping_mul(EPOCH_FREQUENCY as i64),
                BYTE_SCALE,
            ),
            // bits = bytes * 8: Click takes three bits off the scale instead of
            // multiplying, to avoid overflow.
            _ => unparse_real2(
                (st.bytes.scaled as i64).wrapping_mul(EPOCH_FREQUENCY as i64),
                BYTE_SCALE - 3,
            ),
        }
    }

    fn reset(&self, now: u64) {
        let mut st = self.rate.lock().unwrap_or_else(|e| e.into_inner());
        let (c, b) = self.raw_totals();
        self.reset_base[0].store(c, Ordering::Release);
        self.reset_base[1].store(b, Ordering::Release);
        for t in self.trigger_totals.iter().flatten() {
            t.store(0, Ordering::Relaxed);
        }
        *st = RateState {
            epoch: now,
            count_mark: c,
            bytes_mark: b,
            ..RateState::default()
        };
        self.epoch.store(now, Ordering::Relaxed);
        for t in [&self.count_call, &self.byte_count_call].into_iter().flatten() {
            t.fired.store(false, Ordering::Relaxed);
        }
    }
}

/// Parses `N stop [VALUE]`.
fn parse_call(kw: &str, value: &str, cx: &BuildContext) -> Result<Trigger, ConfigError> {
    let words = split_words(value);
    let n = words.first().map(|w| w.trim_start_matches('+')).and_then(|w| {
        if !w.is_empty() && w.bytes().all(|c| c.is_ascii_digit()) {
            // Click saturates a too-large count (after a warning).
            Some(w.parse::<u64>().unwrap_or(u64::MAX))
        } else {
            None
        }
    });
    let Some(at) = n else {
        return Err(cx.error(format!("{} type mismatch", kw)));
    };
    match words.get(1).map(String::as_str) {
        // A name without an element is the router's global handler (Counter has no
        // `stop` handler of its own); `.stop` names the global one explicitly.
        Some("stop" | ".stop") => Ok(Trigger {
            at,
            fired: AtomicBool::new(false),
        }),
        Some(h) => Err(cx.error(format!(
            "{}: handler '{}' is not supported (only the global 'stop' handler)",
            kw, h
        ))),
        None => Err(cx.error(format!("{}: missing handler name", kw))),
    }
}

impl ElementClass for CounterClass {
    fn name(&self) -> &'static str {
        "Counter"
    }
    fn port_count(&self) -> PortCount {
        PortCount::parse("1/1")
    }
    fn build(&self, args: &mut Args, cx: &BuildContext) -> Result<Arc<dyn ElementSpec>, ConfigError> {
        let count_call = args.keyword::<String>("COUNT_CALL").map_err(|e| cx.error(e))?;
        let byte_call = args
            .keyword::<String>("BYTE_COUNT_CALL")
            .map_err(|e| cx.error(e))?;
        args.finish().map_err(|e| cx.error(e))?;
        let count_call = count_call.map(|v| parse_call("COUNT_CALL", &v, cx)).transpose()?;
        let byte_count_call = byte_call
            .map(|v| parse_call("BYTE_COUNT_CALL", &v, cx))
            .transpose()?;
        Ok(Arc::new(CounterSpec {
            shared: Arc::new(Shared::new(cx.workers, count_call, byte_count_call)),
        }))
    }
}

struct CounterSpec {
    shared: Arc<Shared>,
}

impl ElementSpec for CounterSpec {
    fn instantiate(&self, _w: WorkerInfo) -> Box<dyn Element> {
        Box::new(Counter {
            shared: self.shared.clone(),
            slot: self.shared.new_slot(),
        })
    }

    fn handlers(&self) -> Vec<HandlerInfo> {
        vec![
            HandlerInfo::read("count"),
            HandlerInfo::read("byte_count"),
            HandlerInfo::read("rate"),
            HandlerInfo::read("bit_rate"),
            HandlerInfo::read("byte_rate"),
            HandlerInfo::write("reset"),
            HandlerInfo::write("reset_counts"),
            HandlerInfo::read("count_call"),
        ]
    }

    fn read_handler(&self, name: &str) -> Option<String> {
        let s = &self.shared;
        match name {
            "count" => Some(s.totals().0.to_string()),
            "byte_count" => Some(s.totals().1.to_string()),
            "rate" | "bit_rate" | "byte_rate" => Some(s.read_rate(name, s.now_epoch())),
            // Click prints the trigger only when a handler is set.
            "count_call" => Some(
                s.count_call
                    .as_ref()
                    .map(|t| t.at.to_string())
                    .unwrap_or_default(),
            ),
            _ => None,
        }
    }

    fn write_handler(&self, name: &str, _value: &str) -> Option<Result<(), String>> {
        match name {
            "reset" | "reset_counts" => {
                self.shared.reset(self.shared.now_epoch());
                Some(Ok(()))
            }
            _ => None,
        }
    }
}

struct Counter {
    shared: Arc<Shared>,
    /// This instance's slot in the shared counters.
    slot: Arc<Slot>,
}

impl Element for Counter {
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, out: &mut Outputs<'_>, cx: &mut Context<'_>) {
        if batch.is_empty() {
            return;
        }
        let bytes: u64 = batch.iter().map(|p| p.len() as u64).sum();
        let s = &self.shared;
        if s.add(s.epoch_at(cx.now_tsc()), &self.slot, batch.len() as u64, bytes) {
            cx.request_stop();
        }
        out.push_batch(0, batch);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{build, build_error, Harness};
    use packet::Packet;

    fn pkts(n: usize, len: usize) -> Vec<Packet> {
        (0..n).map(|_| Packet::zeroed(len)).collect()
    }

    #[test]
    fn counts_and_passes_packets_unchanged() {
        let mut h = Harness::new(&CounterClass, "", 1, 1);
        let out = h.push(
            0,
            vec![Packet::from_slice(&[1, 2, 3]), Packet::from_slice(&[4; 60])],
        );
        assert_eq!(out[0].len(), 2);
        assert_eq!(out[0][0].data(), &[1, 2, 3]);
        assert_eq!(out[0][1].data(), &[4u8; 60][..]);
        assert_eq!(h.read("count"), "2");
        assert_eq!(h.read("byte_count"), "63");
        assert_eq!(h.read("count_call"), "");
        h.write("reset", "").unwrap();
        assert_eq!(h.read("count"), "0");
        assert_eq!(h.read("byte_count"), "0");
        assert_eq!(h.read("rate"), "0");
        h.push(0, pkts(1, 10));
        h.write("reset_counts", "").unwrap();
        assert_eq!(h.read("count"), "0");
    }

    #[test]
    fn counts_are_summed_over_worker_instances() {
        let spec = build(&CounterClass, "", 1, 1).unwrap();
        let stop = StopFlag::new();
        let mut outs = vec![PacketBatch::new()];
        for w in 0..2 {
            let info = WorkerInfo { index: w, count: 2 };
            let mut e = spec.instantiate(info);
            let mut cx = Context::new(info, &stop);
            let mut b: PacketBatch = pkts(3 + w, 100).into_iter().collect();
            e.push(0, &mut b, &mut Outputs::new(&mut outs), &mut cx);
        }
        assert_eq!(outs[0].len(), 7);
        assert_eq!(spec.read_handler("count").unwrap(), "7");
        assert_eq!(spec.read_handler("byte_count").unwrap(), "700");
    }

    #[test]
    fn workers_counting_at_once_lose_nothing() {
        let spec = build(&CounterClass, "", 1, 1).unwrap();
        let stop = StopFlag::new();
        std::thread::scope(|scope| {
            for w in 0..2 {
                let spec = &spec;
                let stop = &stop;
                scope.spawn(move || {
                    let info = WorkerInfo { index: w, count: 2 };
                    let mut e = spec.instantiate(info);
                    let mut cx = Context::new(info, stop);
                    let mut outs = vec![PacketBatch::new()];
                    for _ in 0..1000 {
                        let mut b: PacketBatch = pkts(3, 10 + w).into_iter().collect();
                        e.push(0, &mut b, &mut Outputs::new(&mut outs), &mut cx);
                        outs[0].clear();
                    }
                });
            }
        });
        // 2 x 1000 batches of 3 packets, of 10 and 11 bytes.
        assert_eq!(spec.read_handler("count").unwrap(), "6000");
        assert_eq!(spec.read_handler("byte_count").unwrap(), "63000");
    }

    #[test]
    fn reset_clears_what_every_worker_counted_and_later_counts_add_up() {
        // Three worker instances (one more than the configuration was built for).
        let s = Shared::new(2, None, None);
        let (w0, w1, w2) = (s.new_slot(), s.new_slot(), s.new_slot());
        s.add(0, &w0, 5, 500);
        s.add(0, &w1, 2, 120);
        s.add(0, &w2, 1, 60);
        assert_eq!(s.totals(), (8, 680));
        s.reset(0);
        assert_eq!(s.totals(), (0, 0));
        s.add(0, &w1, 3, 192);
        s.add(0, &w2, 2, 128);
        assert_eq!(s.totals(), (5, 320));
        // The rate after the reset sees only the 5 packets counted since: closing
        // epoch 0 gives avg = (5 << 10 + 8) >> 4 = 320, i.e. 320/1024 packets per ms,
        // printed per second as 312.5.
        assert_eq!(s.read_rate("rate", 1), "312.5");
        // 320 bytes: (320 << 4 + 8) >> 4 = 320, 20 bytes per ms.
        assert_eq!(s.read_rate("byte_rate", 1), "20000");
    }

    #[test]
    fn rate_estimator_matches_click_arithmetic() {
        let spec = CounterSpec {
            shared: Arc::new(Shared::new(1, None, None)),
        };
        let s = &spec.shared;
        // 16 packets of 64 bytes in epoch 0 (1 ms).
        s.add(0, &s.new_slot(), 16, 1024);
        // Closing epoch 0: avg = (16 << 10 + 8) >> 4 = 1024 (1.0 packet/ms).
        assert_eq!(s.read_rate("rate", 1), "1000");
        assert_eq!(s.read_rate("byte_rate", 1), "64000");
        assert_eq!(s.read_rate("bit_rate", 1), "512000");
        // One idle epoch: avg += (8 - 1024) >> 4 = -64, so 960/1024 packets per ms.
        assert_eq!(s.read_rate("rate", 2), "937.5");
        assert_eq!(s.read_rate("byte_rate", 2), "60000");
        assert_eq!(s.read_rate("bit_rate", 2), "480000");
        // 100 or more idle epochs clear the average.
        assert_eq!(s.read_rate("rate", 200), "0");
    }

    #[test]
    fn unparse_real2_is_clicks() {
        // Values from Click's own unparse table (0.418, 0.414, 0.42 at 8 bits).
        assert_eq!(unparse_real2(107, 8), "0.418");
        assert_eq!(unparse_real2(106, 8), "0.414");
        assert_eq!(unparse_real2(108, 8), "0.42");
        assert_eq!(unparse_real2(3 << 10, 10), "3");
        assert_eq!(unparse_real2((5 << 10) + 256, 10), "5.25");
        assert_eq!(unparse_real2(-(1 << 9), 10), "-0.5");
    }

    #[test]
    fn count_call_stop() {
        let mut h = Harness::new(&CounterClass, "COUNT_CALL 3 stop", 1, 1);
        assert_eq!(h.read("count_call"), "3");
        h.push(0, pkts(2, 1));
        assert!(!h.stop_requested());
        let out = h.push(0, pkts(2, 1));
        assert_eq!(out[0].len(), 2);
        assert!(h.stop_requested());

        let mut h = Harness::new(&CounterClass, "BYTE_COUNT_CALL 100 .stop", 1, 1);
        h.push(0, pkts(1, 99));
        assert!(!h.stop_requested());
        h.push(0, pkts(1, 1));
        assert!(h.stop_requested());
    }

    #[test]
    fn bad_arguments() {
        assert_eq!(
            build_error(&CounterClass, "COUNT_CALL x stop", 1, 1),
            "e :: Counter: COUNT_CALL type mismatch"
        );
        assert_eq!(
            build_error(&CounterClass, "BYTE_COUNT_CALL 5 q.reset", 1, 1),
            "e :: Counter: BYTE_COUNT_CALL: handler 'q.reset' is not supported (only the global 'stop' handler)"
        );
        assert_eq!(
            build_error(&CounterClass, "5", 1, 1),
            "e :: Counter: too many arguments"
        );
    }
}
