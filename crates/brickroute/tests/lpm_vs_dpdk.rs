//! `scripts/lpm-vs-dpdk.sh`: the summary it prints of a run's rounds, and its refusals
//! of bad arguments (which come before it installs or builds anything, so these tests
//! need neither DPDK nor a build).

mod common;

use common::{stderr, stdout};
use std::path::PathBuf;
use std::process::{Command, Output};

fn script() -> PathBuf {
    common::root().join("scripts/lpm-vs-dpdk.sh")
}

fn run(args: &[&str]) -> Output {
    Command::new("bash")
        .arg(script())
        .args(args)
        .output()
        .expect("run lpm-vs-dpdk.sh")
}

/// A CSV with the columns the script writes, in a fresh directory.
fn csv(text: &str) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("rounds.csv");
    std::fs::write(&path, text).expect("write csv");
    let path = path.to_str().expect("utf-8 path").to_owned();
    (dir, path)
}

#[test]
fn summary_gives_medians_ranges_and_rounds_at_two_x() {
    // Three rounds of IPv4 table queries (ratios 2.00, 2.30, 1.90: the median is not the
    // mean, and 2.00 counts as 2x) and one of IPv6 random ones; the two other kinds are
    // absent and get no line.
    let (_dir, path) = csv("round,utc,family,queries,ours,dpdk,ratio\n\
         1,10:00:00,4,table,200.0,100.0,2.00\n\
         1,10:00:00,6,random,300.0,50.0,6.00\n\
         2,10:00:20,4,table,230.0,100.0,2.30\n\
         3,10:00:40,4,table,190.0,100.0,1.90\n");
    let o = run(&["--summary", &path]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "medians over 3 rounds (range), Mlookups/s:");
    assert!(lines[1].starts_with("queries "), "{out}");
    let words = |l: &str| {
        l.split_whitespace()
            .map(str::to_owned)
            .collect::<Vec<_>>()
            .join(" ")
    };
    assert_eq!(
        words(lines[2]),
        "IPv4 table 200.0 (190.0-230.0) 100.0 (100.0-100.0) 2.00 (1.90-2.30) 2 of 3"
    );
    assert_eq!(
        words(lines[3]),
        "IPv6 random 300.0 (300.0-300.0) 50.0 (50.0-50.0) 6.00 (6.00-6.00) 1 of 1"
    );
    assert_eq!(lines.len(), 4, "{out}");
}

#[test]
fn summary_refuses_a_file_that_is_not_its_csv() {
    let (_dir, path) = csv("round,utc,family,queries,ours,dpdk,ratio\n1,t,4,table,fast,100,2\n");
    let o = run(&["--summary", &path]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("is not a CSV of rounds from this script (ValueError"),
        "{}",
        stderr(&o)
    );
    let (_dir, path) = csv("round,utc,family,queries,ours,dpdk,ratio\n");
    let o = run(&["--summary", &path]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("holds no rounds"), "{}", stderr(&o));
}

#[test]
fn bad_arguments_are_refused_with_a_reason() {
    let refused = |args: &[&str], why: &str| {
        let o = run(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert_eq!(stderr(&o).trim_end(), format!("lpm-vs-dpdk: {why}"), "{args:?}");
    };
    refused(
        &["--rounds", "0"],
        "--rounds must be a whole number of at least 1, not '0'",
    );
    refused(&["--cpu", "x"], "--cpu must be a CPU number, not 'x'");
    refused(&["--fast"], "unknown option '--fast' (see --help)");
    refused(&["only-v4.txt"], "give both tables (IPv4, then IPv6) or neither");
    let empty = tempfile::tempdir().expect("temp dir");
    let dir = empty.path().to_str().expect("utf-8 path");
    refused(
        &["--anchor", dir],
        &format!("no dpdk_bench.c in '{dir}': pass --anchor with the anchors' lpm directory"),
    );
    refused(
        &["--summary", "/nonexistent/rounds.csv"],
        "cannot read '/nonexistent/rounds.csv'",
    );
}
