//! `--threads` of `run` and `bench pipeline` outside 1..1024 (runtime::MAX_WORKERS):
//! refused with an error naming the option, where a huge count panicked or aborted on
//! allocation and 0 ran one worker.

mod common;
use common::*;

#[test]
fn run_refuses_worker_counts_outside_1_to_1024() {
    for n in ["0", "1025", "4000000000", "18446744073709551615"] {
        for flag in ["-j", "--threads"] {
            let o = brickroute(&[
                "run",
                flag,
                n,
                "-e",
                "InfiniteSource(LIMIT 1, STOP true) -> Discard",
            ]);
            assert_eq!(
                (o.status.code(), stderr(&o), stdout(&o)),
                (
                    Some(2),
                    "brickroute run: --threads must be 1..1024\n".to_string(),
                    String::new()
                ),
                "{} {}",
                flag,
                n
            );
        }
    }
    // The bound itself is configured (-q: no workers are started).
    let o = brickroute(&[
        "run",
        "-q",
        "-j",
        "1024",
        "-e",
        "InfiniteSource(LIMIT 1, STOP true) -> c :: Counter -> Discard",
        "-h",
        "c.count",
    ]);
    assert_eq!(
        (o.status.code(), stdout(&o)),
        (Some(0), "0\n".to_string()),
        "{}",
        stderr(&o)
    );
}

#[test]
fn bench_pipeline_refuses_more_than_1024_workers() {
    for n in ["18446744073709551615", "1025"] {
        let o = brickroute(&[
            "bench",
            "pipeline",
            "--no-pin",
            "--threads",
            n,
            "--packets",
            "1000",
        ]);
        assert_eq!(
            (o.status.code(), stderr(&o)),
            (
                Some(2),
                "brickroute bench pipeline: --threads must be at most 1024\n".to_string()
            ),
            "--threads {}",
            n
        );
    }
}
