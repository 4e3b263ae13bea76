//! Frames reaching the sink are untrusted bytes: the stamp parser and the statistics
//! it feeds must never panic, whatever arrives.
#![no_main]

use bench::stamp::parse_frame;
use bench::stats::SinkStats;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut stats = SinkStats::new();
    // The same bytes as a frame, and cut into pieces so a flow sees several stamps.
    for (i, chunk) in std::iter::once(data).chain(data.chunks(64)).enumerate() {
        if let Some(s) = parse_frame(chunk, 9) {
            stats.record(s.flow, s.seq, s.sent_ns, i as u64 * 1000, chunk.len());
        }
    }
    let _ = stats.report(1.0, Some(data.len() as u64));
});
