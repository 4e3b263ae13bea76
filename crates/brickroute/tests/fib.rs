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

/// `fib lookup --table PATH` with `input` on standard input.
fn lookup_at(path: &std::path::Path, input: impl AsRef<[u8]>) -> std::process::Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_brickroute"))
        .args(["fib", "lookup", "--table"])
        .arg(path)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run brickroute");
    // (It may exit before reading a bad table's input: a closed pipe is no failure.)
    let _ = child.stdin.take().expect("stdin").write_all(input.as_ref());
    child.wait_with_output().expect("wait")
}

fn lookup(table: &str, input: impl AsRef<[u8]>) -> std::process::Output {
    let (_dir, path) = table_file(table);
    lookup_at(&path, input)
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
    let out = lookup(&text, format!("{}\n", addr));
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

#[test]
fn lookup_keeps_the_families_apart_and_answers_in_input_order() {
    // Routes and queries of both families interleaved. 8000::/1 covers every IPv6
    // address whose first bit is set: an IPv4 query must not be answered from it.
    let out = lookup(
        "2001:db8::/32 6\n10.0.0.0/8 4\n8000::/1 9\n2001:db8:0:1::/64 66\n10.1.0.0/16 44\n",
        "2001:db8::1\n10.2.3.4\n2001:db9::1\n10.1.0.1\n200.0.0.1\nc000::1\n\
         2001:db8:0:1::5\n::\n0.0.0.0\n",
    );
    assert!(out.status.success(), "{}", common::stderr(&out));
    assert_eq!(common::stderr(&out), "");
    assert_eq!(
        common::stdout(&out),
        "2001:db8::1 6\n10.2.3.4 4\n2001:db9::1 -\n10.1.0.1 44\n200.0.0.1 -\nc000::1 9\n\
         2001:db8:0:1::5 66\n:: -\n0.0.0.0 -\n"
    );
}

#[test]
fn one_bad_address_on_stdin_fails_the_run_in_the_singular() {
    // An address followed by another word is not an address either.
    let out = lookup(TABLE, "10.1.2.3\n2001:db8::1 10\n2001:db8::1\n");
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        common::stderr(&out),
        "brickroute fib lookup: stdin:2: \"2001:db8::1 10\" is not an IPv4 or IPv6 address\n\
         brickroute fib lookup: 1 line of standard input was not an address\n"
    );
    assert_eq!(common::stdout(&out), "10.1.2.3 3\n2001:db8::1 10\n");
}

#[test]
fn table_errors_name_the_file_and_line_and_print_no_answers() {
    // An IPv6 line past blank and comment lines.
    let (_dir, path) = table_file("10.0.0.0/8 1\n\n# six\n2001:db8::/32 2\n2001:db8::/129 3\n");
    let out = lookup_at(&path, "10.0.0.1\n");
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        common::stderr(&out),
        format!(
            "brickroute fib lookup: {}:5: prefix length \"129\" is not a number from 0 to 128\n",
            path.display()
        )
    );
    assert_eq!(common::stdout(&out), "");
    // A table that is not there: no line to name.
    let missing = path.with_file_name("missing.txt");
    let out = lookup_at(&missing, "10.0.0.1\n");
    assert_eq!(out.status.code(), Some(1));
    let err = common::stderr(&out);
    assert!(
        err.starts_with(&format!(
            "brickroute fib lookup: {}: cannot read: ",
            missing.display()
        )) && err.ends_with('\n')
            && err.lines().count() == 1,
        "{err}"
    );
    assert_eq!(common::stdout(&out), "");
}

#[test]
fn bench_json_lines_parse_as_objects_with_consistent_figures() {
    let (_dir, path) = table_file("10.0.0.0/8 1\n2001:db8::/32 2\n10.1.0.0/16 3\n");
    let table = path.to_str().expect("utf-8");
    let args = ["fib", "bench", "--table", table, "--json", "--batch", "8"];
    let out = common::brickroute(&[&args[..], QUICK_BENCH].concat());
    assert!(out.status.success(), "{}", common::stderr(&out));
    let text = common::stdout(&out);
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    assert_eq!(lines.len(), 2, "{text}");
    for (v, family, prefixes) in [(&lines[0], "ipv4", 2), (&lines[1], "ipv6", 1)] {
        let num = |k: &str| {
            v[k].as_f64()
                .unwrap_or_else(|| panic!("{k} is not a number in {v}"))
        };
        assert_eq!(v["family"], family, "{v}");
        assert_eq!(v["queries"], "random", "{v}");
        assert_eq!(v["prefixes"], prefixes, "{v}");
        assert_eq!(v["batch"], 8, "{v}");
        let lps = num("lookups_per_sec");
        assert!(
            0.0 < num("lookups_per_sec_min")
                && num("lookups_per_sec_min") <= lps
                && lps <= num("lookups_per_sec_max"),
            "{v}"
        );
        // ns per lookup is the rate's inverse (both rounded as printed).
        let ns = num("ns_per_lookup");
        assert!((ns - 1e9 / lps).abs() <= 1e-3 + ns * 1e-6, "{v}");
        assert!(v["memory_bytes"].as_u64().is_some_and(|m| m > 0), "{v}");
        assert!(v["control_bytes"].as_u64().is_some(), "{v}");
        assert!(num("build_seconds") >= 0.0, "{v}");
        // 20 updates were timed.
        assert!(
            0.0 < num("update_median_us") && num("update_median_us") <= num("update_p99_us"),
            "{v}"
        );
    }
}

#[test]
fn bench_refuses_bad_arguments_and_empty_tables_with_a_reason() {
    let (_dir, path) = table_file("# nothing but comments\n\n");
    let table = path.to_str().expect("utf-8");
    let out = common::brickroute(&["fib", "bench", "--table", table, "--runs", "1"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        common::stderr(&out),
        "brickroute fib bench: the table has no routes\n"
    );
    assert_eq!(common::stdout(&out), "");
    std::fs::write(&path, "10.0.0.0/8 1\n").expect("write table");
    for zero in ["--batch", "--runs"] {
        let out = common::brickroute(&["fib", "bench", "--table", table, zero, "0"]);
        assert_eq!(out.status.code(), Some(1), "{zero}");
        assert_eq!(
            common::stderr(&out),
            "brickroute fib bench: --batch, --runs and --count must be at least 1\n",
            "{zero}"
        );
        assert_eq!(common::stdout(&out), "", "{zero}");
    }
}

#[test]
fn gen_is_reproducible_by_seed_and_keeps_to_its_family() {
    let gen = |family: &str, seed: &str| {
        let out = common::brickroute(&["fib", "gen", "--family", family, "--count", "300", "--seed", seed]);
        assert!(out.status.success(), "{}", common::stderr(&out));
        common::stdout(&out)
    };
    let v4 = gen("4", "5");
    assert_eq!(gen("4", "5"), v4, "the same seed gave another table");
    assert_ne!(gen("4", "6"), v4, "another seed gave the same table");
    let v6 = gen("6", "5");
    for (text, ipv4) in [(&v4, true), (&v6, false)] {
        assert!(text.lines().count() >= 250, "{text}");
        for line in text.lines() {
            let (prefix, hop) = line.split_once(' ').unwrap_or_else(|| panic!("{line}"));
            hop.parse::<u32>().unwrap_or_else(|_| panic!("{line}"));
            let (addr, len) = prefix.split_once('/').unwrap_or_else(|| panic!("{line}"));
            let addr: std::net::IpAddr = addr.parse().unwrap_or_else(|_| panic!("{line}"));
            let len: u32 = len.parse().unwrap_or_else(|_| panic!("{line}"));
            assert_eq!(addr.is_ipv4(), ipv4, "{line}");
            // A network: no bits set past the length.
            let host = match addr {
                std::net::IpAddr::V4(a) => u128::from(u32::from(a)) << 96,
                std::net::IpAddr::V6(a) => u128::from(a),
            };
            assert!(len <= if ipv4 { 32 } else { 128 }, "{line}");
            assert_eq!(host.checked_shl(len).unwrap_or(0), 0, "{line}");
        }
    }
    // Both families together are the two tables, as `lookup` loads them without a
    // warning.
    let both = gen("both", "5");
    assert!(both.starts_with(&v4) && both.ends_with(&v6) && both.len() == v4.len() + v6.len());
    let out = lookup(&both, "");
    assert!(out.status.success(), "{}", common::stderr(&out));
    assert_eq!(common::stderr(&out), "");
    assert_eq!(common::stdout(&out), "");
}

#[test]
fn bench_counts_out_of_range_are_refused_and_one_query_still_gives_finite_json() {
    let (_dir, path) = table_file("10.0.0.0/8 1\n2001:db8::/32 7\n0.0.0.0/0 9\n");
    let table = path.to_str().expect("utf-8");
    for (count, want) in [
        ("0", "0 is not in 1..=67108864"),
        ("1099511627776", "is not in 1..=67108864"),
    ] {
        let out = common::brickroute(&["fib", "bench", "--table", table, "--count", count]);
        assert_eq!(out.status.code(), Some(2), "{count}");
        assert!(common::stderr(&out).contains(want), "{}", common::stderr(&out));
    }
    let out = common::brickroute(&["fib", "gen", "--count", "18446744073709551615"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        common::stderr(&out).contains("is not in 0..=16777216"),
        "{}",
        common::stderr(&out)
    );
    // One query: IPv4 gets it, and IPv6 (half the count, rounded up) one too, where it
    // got none and printed `inf`.
    let out = common::brickroute(&[
        "fib",
        "bench",
        "--table",
        table,
        "--count",
        "1",
        "--runs",
        "1",
        "--updates",
        "4",
        "--json",
        "--no-baseline",
    ]);
    assert!(out.status.success(), "{}", common::stderr(&out));
    let text = common::stdout(&out);
    assert_eq!(text.lines().count(), 2, "{text}");
    for line in text.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        for key in ["lookups_per_sec", "ns_per_lookup"] {
            let x = v[key].as_f64().unwrap_or_else(|| panic!("{key}: {line}"));
            assert!(x > 0.0 && x.is_finite(), "{key}: {line}");
        }
    }
}

#[test]
fn gen_seeds_zero_and_one_give_different_tables() {
    let gen = |seed: &str| {
        let out = common::brickroute(&["fib", "gen", "--family", "4", "--count", "50", "--seed", seed]);
        assert!(out.status.success(), "{}", common::stderr(&out));
        common::stdout(&out)
    };
    assert_ne!(gen("0"), gen("1"));
}

#[test]
fn a_line_of_stdin_that_is_not_utf8_is_reported_and_the_others_answered() {
    let out = lookup(TABLE, b"10.1.2.3\n\xff\xfe\n10.0.0.1\n".as_slice());
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(common::stdout(&out), "10.1.2.3 3\n10.0.0.1 1\n");
    assert_eq!(
        common::stderr(&out),
        "brickroute fib lookup: stdin:2: not UTF-8 text\n\
         brickroute fib lookup: 1 line of standard input was not an address\n"
    );
}

#[test]
fn lookup_answers_each_address_before_the_next_arrives() {
    use std::io::BufRead;
    let (_dir, path) = table_file(TABLE);
    let mut child = Command::new(env!("CARGO_BIN_EXE_brickroute"))
        .args(["fib", "lookup", "--table"])
        .arg(&path)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run brickroute");
    let mut stdin = child.stdin.take().expect("stdin");
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines() {
            if tx.send(line.expect("read stdout")).is_err() {
                break;
            }
        }
    });
    // Standard input stays open: each answer must come while the next address is
    // still to be written.
    for (query, want) in [("10.1.2.3", "10.1.2.3 3"), ("2001:db8::1", "2001:db8::1 10")] {
        writeln!(stdin, "{query}").expect("write stdin");
        stdin.flush().expect("flush stdin");
        let got = rx.recv_timeout(std::time::Duration::from_secs(30));
        if got.is_err() {
            let _ = child.kill();
        }
        assert_eq!(got.as_deref(), Ok(want));
    }
    drop(stdin);
    assert!(child.wait().expect("wait").success());
    reader.join().expect("reader");
}

/// An MRT record (RFC 6396): header and body.
fn mrt_record(kind: u16, sub: u16, body: &[u8]) -> Vec<u8> {
    let mut r = 1_700_000_000u32.to_be_bytes().to_vec();
    r.extend_from_slice(&kind.to_be_bytes());
    r.extend_from_slice(&sub.to_be_bytes());
    r.extend_from_slice(&(body.len() as u32).to_be_bytes());
    r.extend_from_slice(body);
    r
}

/// A TABLE_DUMP_V2 RIB_IPV4_UNICAST record whose entries have ORIGIN and NEXT_HOP.
fn mrt_rib4(len: u8, prefix: &[u8], next_hops: &[[u8; 4]]) -> Vec<u8> {
    let mut b = 1u32.to_be_bytes().to_vec();
    b.push(len);
    b.extend_from_slice(prefix);
    b.extend_from_slice(&(next_hops.len() as u16).to_be_bytes());
    for (peer, nh) in next_hops.iter().enumerate() {
        let mut attrs = vec![0x40, 1, 1, 0, 0x40, 3, 4];
        attrs.extend_from_slice(nh);
        b.extend_from_slice(&(peer as u16).to_be_bytes());
        b.extend_from_slice(&0u32.to_be_bytes());
        b.extend_from_slice(&(attrs.len() as u16).to_be_bytes());
        b.extend_from_slice(&attrs);
    }
    mrt_record(13, 2, &b)
}

#[test]
fn lookup_reads_an_mrt_rib_dump() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rib.mrt");
    let mut f = mrt_record(13, 1, &[0; 8]); // the peer table, skipped
    f.extend(mrt_rib4(24, &[192, 0, 2], &[[198, 18, 0, 2], [198, 19, 0, 2]]));
    f.extend(mrt_rib4(8, &[10], &[[198, 19, 0, 2]]));
    std::fs::write(&path, &f).unwrap();
    let out = lookup_at(&path, "192.0.2.7\n10.1.1.1\n11.1.1.1\n");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    // Next hops are numbered by distinct next-hop address, in file order.
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        "192.0.2.7 0\n10.1.1.1 1\n11.1.1.1 -\n"
    );

    // A record cut short is reported with its number and offset.
    let good = mrt_rib4(24, &[192, 0, 2], &[[198, 18, 0, 2]]);
    let mut bad = good.clone();
    bad.extend_from_slice(&good[..good.len() - 3]);
    std::fs::write(&path, &bad).unwrap();
    let out = lookup_at(&path, "");
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(&format!(
            "rib.mrt: MRT record 2 (byte {}): body truncated",
            good.len()
        )),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn lookup_reads_gzip_compressed_tables_and_dumps() {
    let dir = tempfile::tempdir().unwrap();
    let mut dump = mrt_record(13, 1, &[0; 8]);
    dump.extend(mrt_rib4(24, &[192, 0, 2], &[[198, 18, 0, 2]]));
    for (name, bytes) in [
        ("rib", dump.as_slice()),
        ("routes.txt", b"10.0.0.0/8 4\n192.0.2.0/24 0\n".as_slice()),
    ] {
        let path = dir.path().join(name);
        std::fs::write(&path, bytes).unwrap();
        // Debian's gzip, as the files are published.
        let st = Command::new("gzip").arg(&path).status().expect("run gzip");
        assert!(st.success());
        let out = lookup_at(&dir.path().join(format!("{name}.gz")), "192.0.2.7\n11.1.1.1\n");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(
            String::from_utf8(out.stdout).unwrap(),
            "192.0.2.7 0\n11.1.1.1 -\n"
        );
    }

    // Cut short: the reason, and no answers.
    let gz = std::fs::read(dir.path().join("rib.gz")).unwrap();
    let cut = dir.path().join("cut.gz");
    std::fs::write(&cut, &gz[..gz.len() - 4]).unwrap();
    let out = lookup_at(&cut, "192.0.2.7\n");
    assert!(!out.status.success());
    assert!(out.stdout.is_empty());
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("cut.gz: gzip-compressed, but cannot decompress: the data ends early"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
