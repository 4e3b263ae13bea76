//! `scripts/fib-check.py`: `brickroute fib lookup` against the script's own reference on
//! a table of edge cases (default routes, host routes, every length nested along one
//! chain in each family, IPv6 past /64, more next hops than fit a byte, duplicate lines,
//! host bits), and the script's report when an answer is wrong.

mod common;

use common::{stderr, stdout};
use lpm::synth::Rng;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn script() -> PathBuf {
    common::root().join("scripts/fib-check.py")
}

fn check(brickroute: &Path, table: &Path, count: usize) -> Output {
    Command::new("python3")
        .arg(script())
        .arg("--brickroute")
        .arg(brickroute)
        .arg("--count")
        .arg(count.to_string())
        .arg(table)
        .output()
        .expect("run fib-check.py")
}

fn v4(a: u32, len: u32) -> String {
    let masked = if len == 0 { 0 } else { a & (u32::MAX << (32 - len)) };
    format!("{}/{len}", std::net::Ipv4Addr::from(masked))
}

fn v6(a: u128, len: u32) -> String {
    let masked = if len == 0 {
        0
    } else {
        a & (u128::MAX << (128 - len))
    };
    format!("{}/{len}", std::net::Ipv6Addr::from(masked))
}

/// The edge-case table. With `many_hops`, its IPv4 routes use 351 distinct next hops, so
/// the table holds 16-bit dictionary indices; without, 251, so it holds byte values (the
/// realistic tables' case).
fn edge_table(many_hops: bool) -> String {
    // (The same seed gives the same table on every run.)
    let mut rng = Rng::new(0x9e37_79b9_7f4a_7c15);
    let (spread, chain, hosts) = if many_hops {
        (300, 1000, 5000)
    } else {
        (200, 201, 233)
    };
    let mut t = String::from("# edge cases for fib-check\n0.0.0.0/0 7\n::/0 9\n");
    // Every length along one address in each family, each with its own next hop.
    for len in 1..=32 {
        t += &format!("{} {}\n", v4(0x0a01_0203, len), chain + len - 1);
    }
    for len in 1..=128 {
        t += &format!(
            "{} {}\n",
            v6(0x2001_0db8_0000_0000_8000_0000_0000_0001, len),
            2000 + len
        );
    }
    // Prefixes of random lengths, the largest valid next hop among them; IPv6 ones in
    // 2000::/3, many past /64.
    for i in 0..3000u64 {
        let hop = if i == 0 {
            u64::from(u32::MAX - 1)
        } else {
            1 + i % spread
        };
        let len = 8 + rng.below(25) as u32;
        t += &format!("{} {hop}\n", v4(rng.next_u64() as u32, len));
        let len = 16 + rng.below(113) as u32;
        let a = (1u128 << 125)
            | ((u128::from(rng.next_u64()) << 61 | u128::from(rng.next_u64())) & (u128::MAX >> 3));
        t += &format!("{} {hop}\n", v6(a, len));
    }
    // Host routes.
    for i in 0..200 {
        t += &format!("{} {}\n", v4(rng.next_u64() as u32, 32), hosts + i % 18);
    }
    // A prefix given twice (the later line wins) and one with host bits set (it counts as
    // its network).
    t += "198.51.100.0/24 11\n198.51.100.0/24 12\n203.0.113.77/24 13\n2001:db8:ffff::1/48 14\n";
    t
}

fn check_edge_table(many_hops: bool) {
    let dir = tempfile::tempdir().expect("temp dir");
    let table = dir.path().join("edge.txt");
    std::fs::write(&table, edge_table(many_hops)).expect("write table");
    let o = check(Path::new(env!("CARGO_BIN_EXE_brickroute")), &table, 60_000);
    let out = stdout(&o);
    let err = stderr(&o);
    assert_eq!(
        out.trim_end(),
        "fib-check: 60000 queries, 0 mismatches",
        "stderr: {err}"
    );
    assert_eq!(o.status.code(), Some(0));
}

#[test]
fn fib_lookup_matches_the_independent_reference_on_edge_cases_with_byte_values() {
    check_edge_table(false);
}

#[test]
fn fib_lookup_matches_the_independent_reference_on_edge_cases_with_many_next_hops() {
    check_edge_table(true);
}

#[test]
fn a_wrong_answer_is_reported_with_the_reference_answer() {
    let dir = tempfile::tempdir().expect("temp dir");
    let table = dir.path().join("t.txt");
    std::fs::write(&table, "10.0.0.0/8 1\n0.0.0.0/0 2\n").expect("write table");
    // A brickroute that answers every third address with next hop 77.
    let fake = dir.path().join("brickroute");
    std::fs::write(
        &fake,
        format!(
            "#!/bin/sh\n'{}' \"$@\" | sed '3~3s/ [0-9-]*$/ 77/'\n",
            env!("CARGO_BIN_EXE_brickroute")
        ),
    )
    .expect("write fake");
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let o = check(&fake, &table, 30);
    let out = stdout(&o);
    let mut lines = out.lines();
    assert_eq!(
        lines.next(),
        Some("fib-check: 30 queries, 10 mismatches"),
        "{out}"
    );
    let first = lines.next().expect("a mismatch line");
    assert!(
        first.ends_with(" 77', the reference says 1") || first.ends_with(" 77', the reference says 2"),
        "{first}"
    );
    assert_eq!(o.status.code(), Some(1));
}

#[test]
fn bad_arguments_are_refused_with_a_reason() {
    let dir = tempfile::tempdir().expect("temp dir");
    let table = dir.path().join("bad.txt");
    std::fs::write(&table, "10.0.0.0/8 1\n10.0.0.0/33 2\n").expect("write table");
    let bin = Path::new(env!("CARGO_BIN_EXE_brickroute"));
    let o = check(bin, &table, 10);
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    assert!(
        err.starts_with(&format!("fib-check: {}:2: ", table.display())),
        "{err}"
    );
    let o = check(bin, &dir.path().join("missing.txt"), 10);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("cannot read"));
    let o = check(&dir.path().join("no-such-binary"), &table, 10);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("is not an executable"));
}
