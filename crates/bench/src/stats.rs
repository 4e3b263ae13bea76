//! The sink's statistics: delivered packets and bytes, loss, duplicates, reordering
//! and latency, from the stamps of the frames that arrive.
//!
//! Definitions (each flow counted on its own, sequence numbers start at 0):
//! - **delivered**: distinct stamped packets received (duplicates not counted).
//! - **duplicate**: a packet whose (flow, sequence) was already received. Detected for
//!   sequence numbers within [`WINDOW`] of the highest one seen in the flow; an older
//!   packet cannot be checked and is counted as delivered (and reordered).
//! - **lost (gaps)**: per flow, `highest sequence + 1 - delivered`, summed over flows:
//!   the holes below the highest sequence number seen. Packets lost after a flow's last
//!   delivered one are not visible this way; `--expect N` compares with the
//!   generator's count instead (`lost = N - delivered`).
//! - **reordered**: a delivered packet whose sequence number is lower than one already
//!   received in its flow (RouteBricks' measure: the packet arrived after a later packet
//!   of the same flow). **Reordering** is reordered / delivered.
//! - **latency**: receive time minus the stamp's send time (both CLOCK_MONOTONIC), in
//!   nanoseconds, over delivered packets. Percentiles are nearest-rank (the smallest
//!   recorded value with at least p % of the samples at or below it), kept by an HDR
//!   histogram with 3 significant digits (values are exact below 2048 ns and within
//!   0.1 % above).

use hdrhistogram::Histogram;
use serde::Serialize;

/// Sequence numbers below a flow's highest that are still checked for duplicates.
pub const WINDOW: u64 = 1024;
const WINDOW_WORDS: usize = (WINDOW / 64) as usize;

#[derive(Clone)]
struct FlowState {
    /// Highest sequence number received, extended beyond 32 bits.
    max: u64,
    delivered: u64,
    /// Bit `q % WINDOW` is set when sequence `q` (max - WINDOW < q <= max) was received.
    window: [u64; WINDOW_WORDS],
}

impl FlowState {
    fn new(seq: u64) -> FlowState {
        let mut f = FlowState {
            max: seq,
            delivered: 1,
            window: [0; WINDOW_WORDS],
        };
        f.set(seq);
        f
    }
    fn bit(q: u64) -> (usize, u64) {
        let i = q % WINDOW;
        ((i / 64) as usize, 1u64 << (i % 64))
    }
    fn set(&mut self, q: u64) {
        let (w, b) = Self::bit(q);
        self.window[w] |= b;
    }
    fn test(&self, q: u64) -> bool {
        let (w, b) = Self::bit(q);
        self.window[w] & b != 0
    }
    fn clear(&mut self, q: u64) {
        let (w, b) = Self::bit(q);
        self.window[w] &= !b;
    }
    /// The 32-bit sequence number `s` extended to the 64-bit value nearest the highest
    /// seen (serial number arithmetic, RFC 1982), so a wrap is not taken for a jump back.
    fn extend(&self, s: u32) -> u64 {
        let base = self.max & !0xffff_ffff;
        let c = base | s as u64;
        if c + (1 << 31) < self.max {
            c + (1 << 32)
        } else if c > self.max + (1 << 31) && c >= (1 << 32) {
            c - (1 << 32)
        } else {
            c
        }
    }
}

/// What one received stamped packet turned out to be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arrival {
    InOrder,
    Reordered,
    Duplicate,
}

/// Running statistics of a sink.
pub struct SinkStats {
    flows: Vec<Option<FlowState>>,
    pub delivered: u64,
    pub bytes: u64,
    pub duplicates: u64,
    pub reordered: u64,
    /// Reordered packets too old for the duplicate window (counted as delivered).
    pub beyond_window: u64,
    /// Frames that carried no stamp (ARP, other traffic).
    pub unstamped: u64,
    latency: Histogram<u64>,
    /// Latencies that came out negative (clock read before the stamp): counted as 0.
    pub negative_latency: u64,
}

impl Default for SinkStats {
    fn default() -> Self {
        Self::new()
    }
}

impl SinkStats {
    pub fn new() -> SinkStats {
        SinkStats {
            flows: Vec::new(),
            delivered: 0,
            bytes: 0,
            duplicates: 0,
            reordered: 0,
            beyond_window: 0,
            unstamped: 0,
            // 1 ns to 1 hour, 3 significant digits; longer latencies count as 1 hour.
            latency: Histogram::new_with_bounds(1, 3_600_000_000_000, 3)
                .expect("bounds and precision are valid"),
            negative_latency: 0,
        }
    }

    /// Records a stamped packet of `bytes` bytes received at `now_ns`.
    pub fn record(&mut self, flow: u16, seq: u32, sent_ns: u64, now_ns: u64, bytes: usize) -> Arrival {
        let fi = flow as usize;
        if fi >= self.flows.len() {
            self.flows.resize(fi + 1, None);
        }
        let arrival = match &mut self.flows[fi] {
            slot @ None => {
                *slot = Some(FlowState::new(seq as u64));
                Arrival::InOrder
            }
            Some(f) => {
                let q = f.extend(seq);
                if q > f.max {
                    if q - f.max >= WINDOW {
                        f.window = [0; WINDOW_WORDS];
                    } else {
                        for r in f.max + 1..q {
                            f.clear(r);
                        }
                    }
                    f.set(q);
                    f.max = q;
                    f.delivered += 1;
                    Arrival::InOrder
                } else if f.max - q < WINDOW {
                    if f.test(q) {
                        Arrival::Duplicate
                    } else {
                        f.set(q);
                        f.delivered += 1;
                        Arrival::Reordered
                    }
                } else {
                    f.delivered += 1;
                    self.beyond_window += 1;
                    Arrival::Reordered
                }
            }
        };
        match arrival {
            Arrival::Duplicate => self.duplicates += 1,
            a => {
                if a == Arrival::Reordered {
                    self.reordered += 1;
                }
                self.delivered += 1;
                self.bytes += bytes as u64;
                let lat = match now_ns.checked_sub(sent_ns) {
                    Some(l) => l,
                    None => {
                        self.negative_latency += 1;
                        0
                    }
                };
                self.latency.saturating_record(lat);
            }
        }
        arrival
    }

    /// Holes below each flow's highest sequence number, summed.
    pub fn lost_gaps(&self) -> u64 {
        self.flows
            .iter()
            .flatten()
            .map(|f| (f.max + 1).saturating_sub(f.delivered))
            .sum()
    }

    pub fn flows_seen(&self) -> usize {
        self.flows.iter().flatten().count()
    }

    /// Reordered / delivered (0 when nothing was delivered).
    pub fn reordering(&self) -> f64 {
        ratio(self.reordered, self.delivered)
    }

    pub fn latency(&self) -> Option<Latency> {
        if self.latency.is_empty() {
            return None;
        }
        let h = &self.latency;
        Some(Latency {
            min_ns: h.min(),
            p50_ns: h.value_at_quantile(0.50),
            p90_ns: h.value_at_quantile(0.90),
            p99_ns: h.value_at_quantile(0.99),
            max_ns: h.max(),
            mean_ns: h.mean(),
        })
    }

    /// The report, given the run's length and, if known, how many packets were sent.
    pub fn report(&self, seconds: f64, expect: Option<u64>) -> SinkReport {
        let lost_vs_expected = expect.map(|n| n as i64 - self.delivered as i64);
        SinkReport {
            delivered: self.delivered,
            bytes: self.bytes,
            seconds,
            pps: per_second(self.delivered as f64, seconds),
            bps: per_second(self.bytes as f64 * 8.0, seconds),
            expected: expect,
            lost: lost_vs_expected,
            loss: expect.map(|n| ratio(n.saturating_sub(self.delivered), n)),
            lost_gaps: self.lost_gaps(),
            duplicates: self.duplicates,
            reordered: self.reordered,
            reordering: self.reordering(),
            beyond_window: self.beyond_window,
            flows: self.flows_seen(),
            unstamped: self.unstamped,
            negative_latency: self.negative_latency,
            latency: self.latency(),
            socket_drops: 0,
        }
    }
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

fn per_second(x: f64, seconds: f64) -> f64 {
    if seconds > 0.0 {
        x / seconds
    } else {
        0.0
    }
}

/// Latency percentiles, nanoseconds.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Latency {
    pub min_ns: u64,
    pub p50_ns: u64,
    pub p90_ns: u64,
    pub p99_ns: u64,
    pub max_ns: u64,
    pub mean_ns: f64,
}

/// The sink's final report (its JSON line).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SinkReport {
    pub delivered: u64,
    pub bytes: u64,
    pub seconds: f64,
    pub pps: f64,
    /// Bits per second of the frames as received (FCS not counted).
    pub bps: f64,
    pub expected: Option<u64>,
    /// expected - delivered (negative if more arrived than expected).
    pub lost: Option<i64>,
    /// lost / expected.
    pub loss: Option<f64>,
    pub lost_gaps: u64,
    pub duplicates: u64,
    pub reordered: u64,
    pub reordering: f64,
    pub beyond_window: u64,
    pub flows: usize,
    pub unstamped: u64,
    pub negative_latency: u64,
    pub latency: Option<Latency>,
    /// Frames the kernel dropped because the sink's socket buffer was full.
    pub socket_drops: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds (flow, seq) pairs, all 100 bytes, latency 1000 ns.
    fn feed(s: &mut SinkStats, pkts: &[(u16, u32)]) -> Vec<Arrival> {
        pkts.iter()
            .map(|&(f, q)| s.record(f, q, 5_000, 6_000, 100))
            .collect()
    }

    #[test]
    fn in_order_flows_have_no_loss_or_reordering() {
        let mut s = SinkStats::new();
        feed(&mut s, &[(0, 0), (1, 0), (0, 1), (1, 1), (0, 2)]);
        let r = s.report(2.0, Some(5));
        assert_eq!((r.delivered, r.bytes, r.lost, r.lost_gaps), (5, 500, Some(0), 0));
        assert_eq!((r.reordered, r.duplicates, r.flows), (0, 0, 2));
        assert_eq!(r.pps, 2.5);
        assert_eq!(r.bps, 2000.0);
        assert_eq!(r.loss, Some(0.0));
    }

    #[test]
    fn gaps_count_as_loss_and_expect_catches_tail_loss() {
        let mut s = SinkStats::new();
        // Flow 0 misses 1 and 2; flow 3 misses 0 (the sink started late for it).
        feed(&mut s, &[(0, 0), (0, 3), (0, 4), (3, 1)]);
        assert_eq!(s.lost_gaps(), 3);
        // The generator sent 10: 6 missing in all, 3 of them after the last delivered.
        let r = s.report(1.0, Some(10));
        assert_eq!(r.lost, Some(6));
        assert_eq!(r.loss, Some(0.6));
        assert_eq!(r.reordered, 0);
    }

    #[test]
    fn late_packet_is_reordered_and_fills_its_gap() {
        let mut s = SinkStats::new();
        let a = feed(&mut s, &[(0, 0), (0, 1), (0, 3), (0, 2), (0, 4), (0, 5)]);
        assert_eq!(a[3], Arrival::Reordered);
        assert_eq!((s.delivered, s.reordered, s.lost_gaps()), (6, 1, 0));
        assert_eq!(s.reordering(), 1.0 / 6.0);
        // 1, 2, 3 arriving after 4: each is lower than one already seen.
        let mut s = SinkStats::new();
        feed(&mut s, &[(0, 0), (0, 4), (0, 1), (0, 2), (0, 3)]);
        assert_eq!((s.reordered, s.lost_gaps()), (3, 0));
    }

    #[test]
    fn duplicates_are_counted_once_and_not_delivered() {
        let mut s = SinkStats::new();
        let a = feed(&mut s, &[(0, 0), (0, 0), (0, 1), (0, 0), (0, 2), (0, 2)]);
        assert_eq!(
            a,
            [
                Arrival::InOrder,
                Arrival::Duplicate,
                Arrival::InOrder,
                Arrival::Duplicate,
                Arrival::InOrder,
                Arrival::Duplicate
            ]
        );
        let r = s.report(1.0, Some(3));
        assert_eq!(
            (r.delivered, r.duplicates, r.reordered, r.lost, r.bytes),
            (3, 3, 0, Some(0), 300)
        );
    }

    #[test]
    fn window_slides_and_old_packets_are_beyond_it() {
        let mut s = SinkStats::new();
        feed(&mut s, &[(0, 0), (0, 2)]);
        // Jump far ahead: seq 1 is then more than WINDOW behind.
        feed(&mut s, &[(0, 2 + WINDOW as u32)]);
        assert_eq!(s.record(0, 1, 0, 0, 1), Arrival::Reordered);
        assert_eq!(s.beyond_window, 1);
        // Seq 1 + WINDOW is one below the highest: inside the window, and new.
        assert_eq!(s.record(0, 1 + WINDOW as u32, 0, 0, 1), Arrival::Reordered);
        assert_eq!(s.record(0, 1 + WINDOW as u32, 0, 0, 1), Arrival::Duplicate);
        // Sequence numbers skipped while sliding by less than the window are cleared
        // too: 2 + WINDOW + 5 then 2 + WINDOW + 3 is new.
        s.record(0, 2 + WINDOW as u32 + 5, 0, 0, 1);
        assert_eq!(s.record(0, 2 + WINDOW as u32 + 3, 0, 0, 1), Arrival::Reordered);
    }

    #[test]
    fn sequence_wrap_is_not_reordering() {
        let mut s = SinkStats::new();
        let a = feed(&mut s, &[(7, u32::MAX - 1), (7, u32::MAX), (7, 0), (7, 1)]);
        assert!(a.iter().all(|&x| x == Arrival::InOrder), "{:?}", a);
        assert_eq!(
            s.lost_gaps(),
            u32::MAX as u64 - 1,
            "the holes below the first packet seen"
        );
        assert_eq!(s.record(7, u32::MAX, 0, 0, 1), Arrival::Duplicate);
    }

    #[test]
    fn latency_percentiles_are_nearest_rank() {
        let mut s = SinkStats::new();
        // Latencies 1..=100 microseconds, one packet each, shuffled order of arrival.
        for i in 0..100u32 {
            let us = (i * 37) % 100 + 1;
            s.record(0, i, 1_000_000, 1_000_000 + us as u64 * 1000, 64);
        }
        let l = s.latency().unwrap();
        // 3 significant digits: each value within 0.1 %, reported as the highest value
        // of its bucket.
        let close = |got: u64, want: u64| got >= want && got <= want + want / 1000;
        assert_eq!(l.min_ns, 1000);
        assert!(close(l.p50_ns, 50_000), "{}", l.p50_ns);
        assert!(close(l.p90_ns, 90_000), "{}", l.p90_ns);
        assert!(close(l.p99_ns, 99_000), "{}", l.p99_ns);
        assert!(close(l.max_ns, 100_000), "{}", l.max_ns);
        assert!((l.mean_ns - 50_500.0).abs() < 60.0, "{}", l.mean_ns);
        // Small values are exact.
        let mut s = SinkStats::new();
        for (i, lat) in [10u64, 20, 30, 40].iter().enumerate() {
            s.record(0, i as u32, 100, 100 + lat, 64);
        }
        let l = s.latency().unwrap();
        assert_eq!((l.p50_ns, l.p90_ns, l.max_ns), (20, 40, 40));
        assert_eq!(SinkStats::new().latency(), None);
    }

    #[test]
    fn duplicate_latency_not_recorded_and_clock_skew_counted() {
        let mut s = SinkStats::new();
        s.record(0, 0, 100, 150, 64);
        s.record(0, 0, 100, 900, 64);
        s.record(0, 1, 500, 400, 64);
        let l = s.latency().unwrap();
        assert_eq!((l.min_ns, l.max_ns), (0, 50));
        assert_eq!(s.negative_latency, 1);
    }
}
