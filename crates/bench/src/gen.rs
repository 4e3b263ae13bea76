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
    let (mut packets, mut bytes, mut dropped, mut index) = (0u64, 0u64, 0u64, 0u64);
    let mut next_tick = start + 1_000_000_000;
    loop {
        let now = now_ns();
        if stop.load(Ordering::Relaxed) || end.is_some_and(|e| now >= e) {
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
        if let Some(rate) = limits.rate {
            let due = ((now - start) as u128 * rate as u128 / 1_000_000_000) as u64;
            let owed = due.saturating_sub(index);
            if owed == 0 {
                // Sleep until the next packet is due (at most 1 ms, to keep ticking).
                let next = (index as u128 + 1) * 1_000_000_000 / rate as u128;
                let wait = (start as u128 + next).saturating_sub(now as u128) as u64;
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
        if limits.count.is_some_and(|c| index >= c) {
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
