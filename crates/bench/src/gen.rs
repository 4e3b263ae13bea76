//! The traffic generator: stamped UDP/IPv4 frames out of one interface, in batches.
//!
//! Frames are built from per-flow templates into a ring of [`BATCH`] buffers that
//! stay zero past the stamp; per frame only the lengths, checksums and stamp are
//! written. Flows take turns (frame i belongs to flow i mod flows), so every flow
//! sends at the same rate and consecutive frames hash to different queues.

use crate::net::{now_ns, MsgScratch, PacketSocket};
use crate::stamp::Stamp;
use crate::traffic::{FlowSet, TrafficSpec, MAX_SIZE};
use crate::units::deadline_ns;
use serde::Serialize;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

/// Frames per `sendmmsg` call at line rate.
pub const BATCH: usize = 256;

/// When the generator stops.
#[derive(Clone, Copy, Debug, Default)]
pub struct Limits {
    /// Stop after this long.
    pub duration: Option<Duration>,
    /// Stop after this many frames.
    pub count: Option<u64>,
    /// Packets per second; `None` is as fast as the interface takes them.
    pub rate: Option<u64>,
}

/// When frames are due at a set rate: frame i at i / rate seconds after the start (the
/// first at once), so a run of D seconds sends the frames with i / rate < D, rate × D
/// of them (rounded up), and every second of a run sends `rate`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pacing {
    /// Frames per second, at least 1.
    rate: u64,
    /// Frames due before the run's duration is up (all of them without a duration).
    within: u64,
}

impl Pacing {
    /// `None` for a rate of 0, which has no schedule.
    pub fn new(rate: u64, duration: Option<Duration>) -> Option<Pacing> {
        if rate == 0 {
            return None;
        }
        let within = duration.map_or(u64::MAX, |d| {
            // i / rate < d, that is i < d × rate.
            u64::try_from((d.as_nanos() * rate as u128).div_ceil(1_000_000_000)).unwrap_or(u64::MAX)
        });
        Some(Pacing { rate, within })
    }

    /// How many frames are due `elapsed_ns` after the start: those with
    /// i / rate <= elapsed (and within the duration).
    pub fn due(&self, elapsed_ns: u64) -> u64 {
        let last = elapsed_ns as u128 * self.rate as u128 / 1_000_000_000;
        u64::try_from(last + 1).unwrap_or(u64::MAX).min(self.within)
    }

    /// Nanoseconds after the start at which frame `i` is due: the first at which
    /// [`Pacing::due`] counts it.
    pub fn due_at_ns(&self, i: u64) -> u64 {
        u64::try_from((i as u128 * 1_000_000_000).div_ceil(self.rate as u128)).unwrap_or(u64::MAX)
    }
}

/// Counters readable while the generator runs (for a live view).
#[derive(Debug, Default)]
pub struct GenProgress {
    pub packets: AtomicU64,
    pub bytes: AtomicU64,
}

/// The generator's final report (its JSON line).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct GenReport {
    pub interface: String,
    /// Frames the kernel accepted.
    pub packets: u64,
    /// Their bytes (as on the wire, FCS not counted).
    pub bytes: u64,
    /// Frames the kernel refused (transmit queue full).
    pub dropped: u64,
    pub seconds: f64,
    pub pps: f64,
    pub bps: f64,
    pub flows: usize,
}

/// Sends `spec`'s traffic on `sock` until a limit is reached or `stop` is set. Each
/// second (and at the end) `tick` gets the counters so far and the time since start.
pub fn run(
    sock: &PacketSocket,
    spec: &TrafficSpec,
    limits: &Limits,
    stop: &AtomicBool,
    progress: &GenProgress,
    tick: &mut dyn FnMut(u64, u64, Duration),
) -> Result<GenReport, String> {
    let flows = FlowSet::new(spec)?;
    let nflows = flows.flows.len();
    let mut seqs = vec![0u32; nflows];
    let mut frames: Vec<Vec<u8>> = (0..BATCH).map(|_| vec![0u8; MAX_SIZE]).collect();
    let mut lens = Vec::with_capacity(BATCH);
    let mut scratch = MsgScratch::default();
    // At a set rate, send in batches of about a millisecond's worth of packets, so
    // the traffic is smooth at low rates and still batched at high ones.
    let batch_max = match limits.rate {
        Some(r) => (r / 1000).clamp(1, BATCH as u64) as usize,
        None => BATCH,
    };
    let start = now_ns();
    let end = limits.duration.map(|d| deadline_ns(start, d));
    let pacing = match limits.rate {
        Some(rate) => {
            Some(Pacing::new(rate, limits.duration).ok_or("--rate must be at least 1 packet per second")?)
        }
        None => None,
    };
    let (mut packets, mut bytes, mut dropped, mut index) = (0u64, 0u64, 0u64, 0u64);
    let mut next_tick = start + 1_000_000_000;
    loop {
        let now = now_ns();
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let past_end = end.is_some_and(|e| now >= e);
        if past_end && pacing.is_none() {
            break;
        }
        if now >= next_tick {
            tick(packets, bytes, Duration::from_nanos(now - start));
            next_tick += 1_000_000_000;
        }
        let mut n = batch_max as u64;
        if let Some(c) = limits.count {
            n = n.min(c - index);
        }
        if let Some(p) = pacing {
            // Past the end, the frames due before it that the last sleep overran still
            // go out (at most one batch: a generator that fell further behind than that
            // does not go on sending after its time is up).
            let due = p.due(end.map_or(now, |e| now.min(e)) - start);
            let owed = due.saturating_sub(index);
            if owed == 0 {
                if past_end {
                    break;
                }
                // Sleep until the next frame is due (at most 1 ms, to keep ticking).
                let wait = start.saturating_add(p.due_at_ns(index)).saturating_sub(now);
                std::thread::sleep(Duration::from_nanos(wait.clamp(1_000, 1_000_000)));
                continue;
            }
            n = n.min(owed);
        }
        if n == 0 {
            break;
        }
        lens.clear();
        for (i, buf) in frames.iter_mut().take(n as usize).enumerate() {
            let fi = ((index + i as u64) % nflows as u64) as usize;
            let size = spec.sizes.size(index + i as u64);
            let stamp = Stamp {
                flow: fi as u16,
                seq: seqs[fi],
                sent_ns: now,
            };
            seqs[fi] = seqs[fi].wrapping_add(1);
            lens.push(flows.flows[fi].write(buf, size, &stamp));
        }
        // Refused frames keep their sequence numbers: to the sink they are lost.
        let sent = sock.send_batch(&mut frames, &lens, &mut scratch)?;
        packets += sent.packets as u64;
        bytes += sent.bytes as u64;
        dropped += sent.dropped as u64;
        index += n;
        progress.packets.store(packets, Ordering::Relaxed);
        progress.bytes.store(bytes, Ordering::Relaxed);
        if past_end || limits.count.is_some_and(|c| index >= c) {
            break;
        }
    }
    let elapsed = Duration::from_nanos(now_ns() - start);
    tick(packets, bytes, elapsed);
    let s = elapsed.as_secs_f64();
    Ok(GenReport {
        interface: sock.ifname.clone(),
        packets,
        bytes,
        dropped,
        seconds: s,
        pps: if s > 0.0 { packets as f64 / s } else { 0.0 },
        bps: if s > 0.0 { bytes as f64 * 8.0 / s } else { 0.0 },
        flows: nflows,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn frame_i_is_due_at_i_over_rate_the_first_at_once() {
        let p = Pacing::new(10, None).unwrap();
        assert_eq!(p.due(0), 1);
        assert_eq!(p.due(100 * MS - 1), 1);
        assert_eq!(p.due(100 * MS), 2);
        assert_eq!(p.due(950 * MS), 10);
        assert_eq!(p.due(1_000 * MS), 11);
        assert_eq!(
            (p.due_at_ns(0), p.due_at_ns(1), p.due_at_ns(9)),
            (0, 100 * MS, 900 * MS)
        );
        // 1/3 s is not a whole number of nanoseconds: frame 1 is due at the first one past it.
        let p = Pacing::new(3, None).unwrap();
        assert_eq!(p.due_at_ns(1), 333_333_334);
        assert_eq!((p.due(333_333_333), p.due(333_333_334)), (1, 2));
        assert_eq!(Pacing::new(0, None), None);
    }

    /// The generator's loop at `rate` for `secs`, on a clock that moves 1 ms between
    /// looks (the last look at or past the end): when each frame goes out.
    fn send_times(rate: u64, secs: f64) -> Vec<u64> {
        let d = Duration::from_secs_f64(secs);
        let p = Pacing::new(rate, Some(d)).unwrap();
        let end = d.as_nanos() as u64;
        let mut sent_at = Vec::new();
        let mut now = 0;
        loop {
            let owed = p.due(now.min(end)) - sent_at.len() as u64;
            sent_at.extend(std::iter::repeat_n(now, owed as usize));
            if now >= end {
                return sent_at;
            }
            now += MS;
        }
    }

    #[test]
    fn a_run_sends_rate_times_duration_frames_frame_i_at_i_over_rate() {
        // At 0, 0.1, ..., 0.9 s; the one at 1 s would be past the end.
        let want: Vec<u64> = (0..10).map(|i| i * 100 * MS).collect();
        assert_eq!(send_times(10, 1.0), want);
        // The frame at 0 s.
        assert_eq!(send_times(1, 0.9), vec![0]);
        // At 0 and 0.5 s.
        assert_eq!(send_times(2, 1.0), vec![0, 500 * MS]);
        // 7 × 0.5 = 3.5: frames at 0, 1/7, 2/7 and 3/7 s, each at the first look past
        // its time.
        assert_eq!(send_times(7, 0.5), vec![0, 143 * MS, 286 * MS, 429 * MS]);
        assert_eq!(send_times(100_000, 2.5).len(), 250_000);
    }
}
