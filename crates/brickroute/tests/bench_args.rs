//! The measurement commands' numeric options out of range: `bench pipeline`, `gen` and
//! `sink` refuse them with an error naming the option (no panic, no silent clamping,
//! no error blamed on a configuration line), before opening anything.

mod common;
use common::*;

/// Runs brickroute with `args` and returns its exit code and standard error.
fn refused(args: &[&str]) -> (Option<i32>, String) {
    let o = brickroute(args);
    (o.status.code(), stderr(&o))
}

fn pipeline_refused(args: &[&str]) -> (Option<i32>, String) {
    let mut all = vec!["bench", "pipeline", "--no-pin"];
    all.extend_from_slice(args);
    refused(&all)
}

#[test]
fn pipeline_seconds_beyond_a_duration_are_refused_not_a_panic() {
    for rounds in ["1", "2"] {
        assert_eq!(
            pipeline_refused(&["--seconds", "1e20", "--rounds", rounds]),
            (
                Some(2),
                "brickroute bench pipeline: --seconds must be at most 18446744073709551615 seconds\n"
                    .to_string()
            ),
            "--rounds {}",
            rounds
        );
    }
    assert_eq!(
        pipeline_refused(&["--seconds", "0"]),
        (
            Some(2),
            "brickroute bench pipeline: --seconds must be a positive number of seconds\n".to_string()
        )
    );
}

#[test]
fn pipeline_batches_outside_the_burst_limit_name_the_flag() {
    for (args, flag) in [
        (&["--kp", "0"][..], "--kp"),
        (&["--kp", "300"][..], "--kp"),
        (&["--app", "route", "--kn", "257"][..], "--kn"),
        (&["--kn", "0"][..], "--kn"),
    ] {
        assert_eq!(
            pipeline_refused(&[args, &["--packets", "1000"]].concat()),
            (
                Some(2),
                format!("brickroute bench pipeline: {} must be from 1 to 256\n", flag)
            ),
            "{:?}",
            args
        );
    }
}

#[test]
fn pipeline_threads_and_flows_out_of_range_are_refused_not_run_as_one() {
    assert_eq!(
        pipeline_refused(&["--threads", "0", "--packets", "1000"]),
        (
            Some(2),
            "brickroute bench pipeline: --threads must be at least 1\n".to_string()
        )
    );
    for flows in ["0", "65537", "100000000"] {
        assert_eq!(
            pipeline_refused(&["--flows", flows, "--packets", "1000"]),
            (
                Some(2),
                "brickroute bench pipeline: --flows must be from 1 to 65536\n".to_string()
            ),
            "--flows {}",
            flows
        );
    }
    // The bounds themselves run: 65536 flows, the largest and least batches.
    let o = brickroute(&[
        "bench",
        "pipeline",
        "--no-pin",
        "--flows",
        "65536",
        "--kp",
        "256",
        "--kn",
        "1",
        "--packets",
        "3000",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let j: serde_json::Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    assert_eq!(j["packets"], 3000, "{}", j);
}

#[test]
fn gen_and_sink_durations_follow_one_rule() {
    let positive = "--duration must be a positive number of seconds\n";
    let too_long = "--duration must be at most 18446744073709551615 seconds\n";
    for (cmd, value, rule) in [
        ("gen", "0", positive),
        ("gen", "-2", positive),
        ("gen", "1e30", too_long),
        ("sink", "0", positive),
        ("sink", "1e30", too_long),
    ] {
        assert_eq!(
            refused(&[cmd, "-i", "nosuchif0", &format!("--duration={}", value)]),
            (Some(1), format!("brickroute {}: {}", cmd, rule)),
            "{} --duration {}",
            cmd,
            value
        );
    }
    assert_eq!(
        refused(&["sink", "-i", "nosuchif0", "--idle", "0"]),
        (
            Some(1),
            "brickroute sink: --idle must be a positive number of seconds\n".to_string()
        )
    );
    assert_eq!(
        refused(&["gen", "-i", "nosuchif0", "--duration", "1e-12"]),
        (
            Some(1),
            "brickroute gen: --duration must be at least a nanosecond (1e-9 seconds)\n".to_string()
        )
    );
}

#[test]
fn bench_rss_reports_every_frame_and_rule_count_and_refuses_bad_options() {
    assert_eq!(
        refused(&["bench", "rss", "--queues", "1"]),
        (
            Some(1),
            "brickroute bench rss: --queues is 2 to 128, not 1\n".to_string()
        )
    );
    assert_eq!(
        refused(&["bench", "rss", "--repeat", "0"]),
        (
            Some(1),
            "brickroute bench rss: --repeat must be at least 1\n".to_string()
        )
    );
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return;
    }
    let o = brickroute(&["bench", "rss", "--repeat", "1000", "--rounds", "1", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let r: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let rows = r["results"].as_array().unwrap();
    let shape: Vec<(String, u64)> = rows
        .iter()
        .map(|x| {
            (
                x["frame"].as_str().unwrap().to_string(),
                x["rules"].as_u64().unwrap(),
            )
        })
        .collect();
    let mut want = Vec::new();
    for frame in ["IPv4 UDP", "IPv6 TCP", "IPv6 TCP, 3 extension headers"] {
        for rules in [0, 16, 64] {
            want.push((frame.to_string(), rules));
        }
    }
    assert_eq!(shape, want);
    for x in rows {
        assert!(x["ns_per_frame"].as_f64().unwrap() > 0.0, "{x}");
    }
    let changes: Vec<u64> = r["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            assert!(c["build_us"].as_f64().unwrap() > 0.0, "{c}");
            c["rules"].as_u64().unwrap()
        })
        .collect();
    assert_eq!(changes, vec![0, 16, 64]);
}
