//! `brickroute fib`: lookups from a table file, its error messages, and the benchmark's
//! JSON keys.

mod common;

use std::io::Write;
use std::process::{Command, Stdio};

/// The options of a `fib bench` small enough for a test: few queries, one timed run,
/// few updates.
const QUICK_BENCH: &[&str] = &["--count", "4096", "--runs", "1", "--updates", "20"];

/// `text` as a route table file in a fresh directory (removed when the guard drops).
fn table_file(text: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("routes.txt");
    std::fs::write(&path, text).expect("write table");
    (dir, path)
}

fn lookup(table: &str, input: &str) -> std::process::Output {
    let (_dir, path) = table_file(table);
    let mut child = Command::new(env!("CARGO_BIN_EXE_brickroute"))
        .args(["fib", "lookup", "--table"])
        .arg(&path)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run brickroute");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input.as_bytes())
        .expect("write stdin");
    child.wait_with_output().expect("wait")
}

const TABLE: &str = "\
# hand-written table: nesting in both families
10.0.0.0/8 1
10.1.0.0/16 2
10.1.2.0/24 3
10.1.2.128/25 4
10.1.2.200/32 5
192.0.2.0/24 70000

2001:db8::/32 10   # documentation prefix
2001:db8:1:2::/64 11
2001:db8:1:2:8000::/65 12
2001:db8:1:2:8000::1/128 13
";

#[test]
fn lookup_prints_the_next_hop_of_each_address_in_order() {
    let out = lookup(
        TABLE,
        "10.9.9.9\n10.1.7.7\n10.1.2.3\n10.1.2.129\n10.1.2.200\n11.0.0.1\n192.0.2.255\n\
         2001:db8:ffff::1\n2001:db8:1:2::1\n2001:db8:1:2:8000::2\n2001:db8:1:2:8000::1\n2002::1\n",
    );
    assert!(out.status.success(), "{}", common::stderr(&out));
    assert_eq!(
        common::stdout(&out),
        "10.9.9.9 1\n10.1.7.7 2\n10.1.2.3 3\n10.1.2.129 4\n10.1.2.200 5\n11.0.0.1 -\n\
         192.0.2.255 70000\n2001:db8:ffff::1 10\n2001:db8:1:2::1 11\n\
         2001:db8:1:2:8000::2 12\n2001:db8:1:2:8000::1 13\n2002::1 -\n"
    );
}

#[test]
fn default_routes_catch_everything_else() {
    let out = lookup("0.0.0.0/0 7\n::/0 8\n10.0.0.0/8 1\n", "11.1.1.1\n10.0.0.1\n::1\n");
    assert!(out.status.success(), "{}", common::stderr(&out));
    assert_eq!(common::stdout(&out), "11.1.1.1 7\n10.0.0.1 1\n::1 8\n");
}

#[test]
fn a_bad_table_line_is_reported_with_file_and_line() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("bad.txt");
    std::fs::write(&path, "10.0.0.0/8 1\n# fine\n10.0.0.0/33 2\n").expect("write table");
    let out = common::brickroute(&["fib", "lookup", "--table", path.to_str().expect("utf-8")]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        common::stderr(&out),
        format!(
            "brickroute fib lookup: {}:3: prefix length \"33\" is not a number from 0 to 32\n",
            path.display()
        )
    );
    assert_eq!(common::stdout(&out), "");
}

#[test]
fn prefixes_with_host_bits_route_as_their_network_with_a_warning() {
    let out = lookup(
        "10.1.2.3/8 1\n10.1.0.0/16 2\n2001:db8::1/32 3\n",
        "10.200.0.1\n10.1.9.9\n2001:db8:ffff::1\n",
    );
    assert!(out.status.success(), "{}", common::stderr(&out));
    assert_eq!(
        common::stdout(&out),
        "10.200.0.1 1\n10.1.9.9 2\n2001:db8:ffff::1 3\n"
    );
    let err = common::stderr(&out);
    assert!(
        err.starts_with("brickroute fib lookup: warning: ")
            && err.ends_with(
                "routes.txt:1: 10.1.2.3/8 has host bits set after the prefix length; \
                 loaded as 10.0.0.0/8 (and 1 more line like it)\n"
            ),
        "{}",
        err
    );
}

#[test]
fn a_bad_address_on_stdin_names_its_line_and_the_others_are_answered() {
    let out = lookup(
        TABLE,
        "10.1.2.3\nnot-an-address\n# a comment\n\n10.1.2.3 # the same\n10.1.2.\n",
    );
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        common::stderr(&out),
        "brickroute fib lookup: stdin:2: \"not-an-address\" is not an IPv4 or IPv6 address\n\
         brickroute fib lookup: stdin:6: \"10.1.2.\" is not an IPv4 or IPv6 address\n\
         brickroute fib lookup: 2 lines of standard input were not addresses\n"
    );
    // (10.1.2.3 is in 10.1.2.0/24, next hop 3.)
    assert_eq!(
        String::from_utf8(out.stdout).expect("utf-8"),
        "10.1.2.3 3\n10.1.2.3 3\n"
    );
}

#[test]
fn bench_prints_one_json_line_per_family() {
    let (_dir, path) = table_file(TABLE);
    let table = path.to_str().expect("utf-8");
    let args = ["fib", "bench", "--table", table, "--queries", "table", "--json"];
    let out = common::brickroute(&[&args[..], QUICK_BENCH].concat());
    assert!(out.status.success(), "{}", common::stderr(&out));
    let text = common::stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{}", text);
    assert!(lines[0].starts_with("{\"family\":\"ipv4\",\"prefixes\":6,\"queries\":\"table\","));
    assert!(lines[1].starts_with("{\"family\":\"ipv6\",\"prefixes\":4,\"queries\":\"table\","));
    for l in &lines {
        for key in [
            "\"lookups_per_sec\":",
            "\"lookups_per_sec_min\":",
            "\"lookups_per_sec_max\":",
            "\"ns_per_lookup\":",
            "\"memory_bytes\":",
            "\"build_seconds\":",
            "\"update_median_us\":",
        ] {
            assert!(l.contains(key), "{} lacks {}", l, key);
        }
    }
    // IPv4 is also measured through the DIR-24-8 yardstick (64 MiB of tbl24 and one
    // tbl8 group for 10.1.2.0/24's longer prefixes); IPv6 has none.
    assert!(
        lines[0].contains(",\"baseline\":\"dir24_8\",\"baseline_lookups_per_sec\":")
            && lines[0].contains(&format!(",\"baseline_memory_bytes\":{},", (64 << 20) + 256 * 4))
            && lines[0].contains(",\"ratio_to_baseline\":"),
        "{}",
        lines[0]
    );
    assert!(!lines[1].contains("baseline"), "{}", lines[1]);
}

#[test]
fn bench_reports_the_yardstick_in_text_and_can_skip_it() {
    let (_dir, path) = table_file("10.0.0.0/8 1\n10.1.2.128/25 2\n");
    let table = path.to_str().expect("utf-8");
    let args = [
        "fib",
        "bench",
        "--table",
        table,
        "--count",
        "2048",
        "--runs",
        "1",
        "--updates",
        "10",
    ];
    let out = common::brickroute(&args);
    assert!(out.status.success(), "{}", common::stderr(&out));
    let text = common::stdout(&out);
    let line = text
        .lines()
        .find(|l| l.starts_with("  the same queries through DIR-24-8 (64.0 MiB, built in "))
        .unwrap_or_else(|| panic!("no yardstick line in {}", text));
    assert!(
        line.contains(" s, same answers): ") && line.contains(" Mlookups/s; ours "),
        "{}",
        line
    );
    assert!(
        text.contains("\n  10 updates while lookups run: median "),
        "{}",
        text
    );
    let mut none = args;
    none[9] = "0";
    let text = common::stdout(&common::brickroute(&none));
    assert!(
        text.contains("\n  updates while lookups run: not measured (--updates 0)\n"),
        "{}",
        text
    );
    let mut three = args;
    three[7] = "3";
    let out = common::brickroute(&[&three[..], &["--no-baseline", "--json"]].concat());
    assert!(out.status.success(), "{}", common::stderr(&out));
    let json = common::stdout(&out);
    assert!(!json.contains("baseline"), "{}", json);
    // The median pass between the slowest and the fastest of the three.
    let number = |key: &str| -> f64 {
        let at = json
            .find(&format!("\"{key}\":"))
            .unwrap_or_else(|| panic!("no {key} in {json}"));
        let rest = &json[at + key.len() + 3..];
        rest[..rest.find([',', '}']).expect("a number ends")]
            .parse()
            .expect("a number")
    };
    let (min, med, max) = (
        number("lookups_per_sec_min"),
        number("lookups_per_sec"),
        number("lookups_per_sec_max"),
    );
    assert!(0.0 < min && min <= med && med <= max, "{json}");
    // Next hops past 31 bits do not fit its entries: measured without it, and said so.
    std::fs::write(&path, "10.0.0.0/8 3000000000\n").expect("write table");
    let out = common::brickroute(&[&args[..], &["--json"]].concat());
    assert!(out.status.success(), "{}", common::stderr(&out));
    assert!(
        !common::stdout(&out).contains("baseline"),
        "{}",
        common::stdout(&out)
    );
    assert_eq!(
        common::stderr(&out),
        "brickroute fib bench: no DIR-24-8 yardstick: its entries hold next hops up to 2147483646\n"
    );
}

#[test]
fn gen_writes_a_table_lookup_can_load() {
    let out = common::brickroute(&["fib", "gen", "--family", "6", "--count", "2000"]);
    assert!(out.status.success(), "{}", common::stderr(&out));
    let text = common::stdout(&out);
    assert!(text.lines().count() >= 1900, "{} lines", text.lines().count());
    let first = text.lines().next().expect("a line");
    let prefix = first.split_whitespace().next().expect("prefix");
    let addr = prefix.split('/').next().expect("address");
    let out = lookup(&text, &format!("{}\n", addr));
    assert!(out.status.success(), "{}", common::stderr(&out));
    assert!(common::stdout(&out).starts_with(addr));
    assert!(!common::stdout(&out).ends_with(" -\n"));
}

#[test]
fn a_reader_that_goes_away_ends_fib_commands_quietly() {
    // As `| head` does: the reader closes the pipe before the command has written.
    use std::os::unix::process::ExitStatusExt;
    let (_dir, path) = table_file(TABLE);
    let table = path.to_str().expect("utf-8");
    let bench = [&["fib", "bench", "--table", table][..], QUICK_BENCH].concat();
    let commands: [&[&str]; 2] = [&["fib", "gen", "--count", "200000"], &bench];
    for args in commands {
        let mut child = Command::new(env!("CARGO_BIN_EXE_brickroute"))
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run brickroute");
        drop(child.stdout.take());
        let out = child.wait_with_output().expect("wait");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            out.status.signal(),
            Some(libc::SIGPIPE),
            "{args:?}: {:?}, {err}",
            out.status
        );
        assert!(err.is_empty(), "{args:?} wrote to standard error: {err}");
    }
}
