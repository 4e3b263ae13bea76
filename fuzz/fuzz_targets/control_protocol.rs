//! Any bytes a control-socket client sends must be answered or refused, never panic,
//! and the answers must not depend on how the bytes were split into reads: the same
//! input fed whole and in the pieces the fuzzer chose gives the same answers (each
//! against its own router, built alike, since writes change routes and counters).
#![no_main]

use graph::control::Session;
use graph::registry::Registry;
use graph::router::RouterSpec;
use libfuzzer_sys::fuzz_target;
use std::path::Path;

/// Handlers of every kind (read-only, write-only, read-write, reconfiguring), in
/// elements cheap to build: a route lookup's table takes milliseconds, which would
/// cut the runs a second a hundredfold.
const CONFIG: &str = "src :: InfiniteSource(LIMIT 1) -> c :: Counter -> p :: Paint(1) \
    -> q :: Queue(8) -> Discard;";

fn router() -> RouterSpec {
    let flat = graph::lang::parse(CONFIG, "fuzz.click", &Default::default()).unwrap();
    RouterSpec::build(&flat, &Registry::with_library(), Path::new("/nonexistent"), 1).unwrap()
}

fuzz_target!(|data: &[u8]| {
    // The first byte picks the read size of the split feed (1..=64 bytes).
    let Some((&size, input)) = data.split_first() else {
        return;
    };
    let size = usize::from(size % 64) + 1;
    let (r1, r2) = (router(), router());

    let mut whole = Vec::new();
    let mut s = Session::new(&r1, false);
    s.feed(input, false, &mut whole);
    s.feed(&[], true, &mut whole);

    let mut split = Vec::new();
    let mut s = Session::new(&r2, false);
    for piece in input.chunks(size) {
        s.feed(piece, false, &mut split);
    }
    s.feed(&[], true, &mut split);

    assert_eq!(whole, split, "answers depend on the read size {}", size);
});
