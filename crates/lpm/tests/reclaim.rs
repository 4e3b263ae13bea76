//! `lpm::reclaim`, alone in its test binary so that no other test's pins hold the
//! collector back or run the deferred work for it.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

#[test]
fn reclaim_runs_the_deferred_work_that_is_due_on_the_calling_thread() {
    let ran = Arc::new(AtomicUsize::new(0));
    // More deferrals than one collection step takes (eight batches of 64).
    for _ in 0..2_000 {
        let r = ran.clone();
        lpm::defer(move || {
            r.fetch_add(1, Ordering::Relaxed);
        });
    }
    // Queued, but not yet past their grace period.
    assert!(ran.load(Ordering::Relaxed) < 2_000);
    lpm::reclaim();
    assert_eq!(ran.load(Ordering::Relaxed), 2_000);

    // A table's replaced chunks: inserting routes one by one replaces one each.
    let t = lpm::Ipv4Lpm::new();
    for i in 0..1_000u32 {
        t.insert((10 << 24) | (i << 8), 24, i + 1);
    }
    let marker = deferred_flag();
    lpm::reclaim();
    // Work queued after the table's frees ran, so theirs did too.
    assert_eq!(marker.load(Ordering::Relaxed), 1);

    // A reader's pin holds back what is replaced while it is held, reclaim or not.
    let held = lpm::pin();
    let late = deferred_flag();
    lpm::reclaim();
    assert_eq!(late.load(Ordering::Relaxed), 0);
    drop(held);
    lpm::reclaim();
    assert_eq!(late.load(Ordering::Relaxed), 1);
}

/// A flag that deferred work sets to 1 when it runs.
fn deferred_flag() -> Arc<AtomicUsize> {
    let flag = Arc::new(AtomicUsize::new(0));
    let f = flag.clone();
    lpm::defer(move || f.store(1, Ordering::Relaxed));
    flag
}
