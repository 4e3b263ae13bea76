//! The traffic sink: receives frames on one interface and keeps [`SinkStats`].

use crate::net::{now_ns, MsgScratch, PacketSocket};
use crate::stamp::parse_frame;
use crate::stats::{SinkReport, SinkStats};
use crate::units::deadline_ns;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Frames per `recvmmsg` call.
pub const BATCH: usize = 256;
/// Largest frame kept whole (longer ones are cut, which a stamp survives).
const BUF_LEN: usize = 2048;

/// When the sink stops (besides `stop`).
#[derive(Clone, Copy, Debug, Default)]
pub struct SinkLimits {
    /// Stop after this long.
    pub duration: Option<Duration>,
    /// The generator's count: used for loss, and the sink stops once that many
    /// distinct packets have arrived.
    pub expect: Option<u64>,
    /// Stop once this long has passed without a stamped frame, after the first one.
    pub idle: Option<Duration>,
    /// UDP destination port of the stamped frames.
    pub port: u16,
}

/// Receives on `sock` until a limit is reached or `stop` is set. Each second `tick`
/// gets the statistics so far and the time since the start. The clock starts at the
/// first stamped frame, so rates are over the traffic, not over the waiting.
pub fn run(
    sock: &PacketSocket,
    limits: &SinkLimits,
    stop: &AtomicBool,
    tick: &mut dyn FnMut(&SinkStats, Duration),
) -> Result<SinkReport, String> {
    let mut stats = SinkStats::new();
    let mut bufs: Vec<Vec<u8>> = (0..BATCH).map(|_| vec![0u8; BUF_LEN]).collect();
    let mut lens = Vec::with_capacity(BATCH);
    let mut scratch = MsgScratch::default();
    let start = now_ns();
    let end = limits.duration.map(|d| deadline_ns(start, d));
    let mut first: Option<u64> = None;
    let mut last = start;
    let mut next_tick = start + 1_000_000_000;
    let _ = sock.drops(); // reading resets the kernel's counter
    let mut socket_drops = 0;
    loop {
        let n = sock.recv_batch(&mut bufs, &mut lens, &mut scratch)?;
        let now = now_ns();
        for (buf, &len) in bufs.iter().zip(&lens).take(n) {
            match parse_frame(&buf[..len.min(BUF_LEN)], limits.port) {
                Some(s) => {
                    stats.record(s.flow, s.seq, s.sent_ns, now, len);
                    first.get_or_insert(now);
                    last = now;
                }
                None => stats.unstamped += 1,
            }
        }
        if now >= next_tick {
            socket_drops += sock.drops();
            tick(&stats, Duration::from_nanos(now - start));
            next_tick += 1_000_000_000;
        }
        if stop.load(Ordering::Relaxed)
            || end.is_some_and(|e| now >= e)
            || limits.expect.is_some_and(|x| stats.delivered >= x)
            || (first.is_some() && limits.idle.is_some_and(|i| now >= deadline_ns(last, i)))
        {
            break;
        }
    }
    socket_drops += sock.drops();
    let now = now_ns();
    tick(&stats, Duration::from_nanos(now - start));
    // Rates over the traffic: from the first stamped frame to the last.
    let seconds = match first {
        Some(f) if last > f => (last - f) as f64 / 1e9,
        _ => 0.0,
    };
    let mut report = stats.report(seconds, limits.expect);
    report.socket_drops = socket_drops;
    Ok(report)
}
