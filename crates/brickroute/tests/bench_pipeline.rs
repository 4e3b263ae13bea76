//! `brickroute bench pipeline` from the command line: the table, and `--profile`.

mod common;
use common::*;

#[test]
fn profile_lists_every_element_that_ran_with_its_calls_and_packets() {
    let o = brickroute(&[
        "bench",
        "pipeline",
        "--app",
        "route",
        "--packets",
        "3200",
        "--kp",
        "32",
        "--no-pin",
        "--profile",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    let header = out
        .lines()
        .position(|l| l.starts_with("element ") && l.contains("cycles/call") && l.ends_with("cycles/packet"))
        .unwrap_or_else(|| panic!("no profile table:\n{}", out));
    let rows: Vec<Vec<&str>> = out
        .lines()
        .skip(header + 1)
        .take_while(|l| !l.starts_with("elements' own calls"))
        .map(|l| l.split_whitespace().collect())
        .collect();
    let row = |name: &str| {
        rows.iter()
            .find(|r| r[0] == name)
            .unwrap_or_else(|| panic!("no row for {}:\n{}", name, out))
    };
    // conf/router.click: every packet passes the classifier, the header check and the
    // lookup, 100 batches of 32.
    for (name, class) in [
        ("c", "Classifier"),
        ("chk", "CheckIPHeader"),
        ("rt", "RadixIPLookup"),
    ] {
        assert_eq!(&row(name)[1..4], &[class, "100", "3200"], "{}", out);
    }
    assert_eq!(row("src")[1], "FromDevice");
    // The interfaces share the packets between them.
    let per_if: u64 = ["if1/cnt", "if2/cnt", "if3/cnt"]
        .iter()
        .map(|n| row(n)[3].parse::<u64>().unwrap())
        .sum();
    assert_eq!(per_if, 3200);
    let summary = out.lines().last().unwrap_or("");
    assert!(
        summary.starts_with("elements' own calls: ") && summary.contains("cycles of timing"),
        "{}",
        out
    );
}

#[test]
fn without_profile_there_is_no_element_table() {
    let o = brickroute(&[
        "bench",
        "pipeline",
        "--app",
        "forward",
        "--packets",
        "1000",
        "--no-pin",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("cycles/packet"), "{}", out);
    assert!(!out.contains("cycles/call"), "{}", out);
}
