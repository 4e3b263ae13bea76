//! `brickroute cluster simulate`: the comparison table, its JSON lines, one scheme, and
//! the refusal of bad values.

mod common;

use common::{brickroute, stderr, stdout};

/// `cluster simulate` with `args`.
fn simulate(args: &[&str]) -> std::process::Output {
    let mut all = vec!["cluster", "simulate"];
    all.extend_from_slice(args);
    brickroute(&all)
}

const SCHEMES: [&str; 4] = ["direct-only", "vlb", "direct", "direct+flowlets"];

/// The rows of the table that start with a scheme's name, by name.
fn rows(out: &str) -> Vec<Vec<String>> {
    out.lines()
        .map(|l| l.split_whitespace().map(String::from).collect::<Vec<_>>())
        .filter(|w| {
            w.first()
                .is_some_and(|s| SCHEMES.contains(&s.as_str()) || s == "vlb+flowlets")
        })
        .collect()
}

fn json_lines(out: &str) -> Vec<serde_json::Value> {
    out.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{}: {:?}", e, l)))
        .collect()
}

#[test]
fn the_default_compares_four_schemes_on_the_same_traffic() {
    let out = simulate(&[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.starts_with("8 servers: ports R = 10 Gbps, links L = 10 Gbps"),
        "{}",
        text
    );
    assert!(text.contains("servers C = 22 Gbps (2.2R)"), "{}", text);
    assert!(text.contains("uniform matrix, load 0.9, 1000-byte packets, 20 ms of traffic"));
    let rows = rows(&text);
    // Each scheme once in the table and once against vlb.
    let names: Vec<&str> = rows.iter().map(|r| r[0].as_str()).collect();
    assert_eq!(names, [SCHEMES, SCHEMES].concat(), "{}", text);
    assert!(text.contains("against vlb"));
    // vlb against itself.
    assert_eq!(rows[5][1..], ["1.00x"; 5], "{}", text);
    // At 2.2R classic VLB overloads the servers, Direct VLB does not.
    let server_drops = |row: &[String]| -> u64 { row[2].split('/').next().unwrap().parse().unwrap() };
    assert!(server_drops(&rows[1]) > 10 * server_drops(&rows[2]), "{}", text);
}

#[test]
fn json_lines_carry_every_measurement() {
    let out = simulate(&["--duration", "2ms", "--json", "--matrix", "permutation"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let runs = json_lines(&stdout(&out));
    let names: Vec<&str> = runs.iter().map(|r| r["scheme"].as_str().unwrap()).collect();
    assert_eq!(names, SCHEMES);
    for r in &runs {
        for key in [
            "scheme",
            "servers",
            "matrix",
            "load",
            "offered",
            "delivered",
            "dropped_server",
            "dropped_link",
            "dropped_port",
            "reordered_fraction",
            "latency_mean_us",
            "latency_p99_us",
            "max_server_load",
            "mean_server_load",
            "max_link_utilisation",
            "mean_link_utilisation",
            "direct",
            "balanced",
            "local",
            "flowlet_hits",
        ] {
            assert!(r.get(key).is_some(), "no {} in {}", key, r);
        }
        let n = |k: &str| r[k].as_u64().unwrap();
        assert_eq!(
            n("offered"),
            n("delivered") + n("dropped_server") + n("dropped_link") + n("dropped_port")
        );
        assert_eq!(n("offered"), runs[0]["offered"].as_u64().unwrap());
        assert_eq!(
            (r["servers"].as_u64(), r["matrix"].as_str()),
            (Some(8), Some("permutation"))
        );
        assert_eq!(n("local"), 0, "a permutation sends nothing to the input server");
    }
    assert_eq!(runs[0]["balanced"].as_u64(), Some(0));
    assert!(runs[1]["balanced"].as_u64().unwrap() > 0);
}

#[test]
fn one_scheme_prints_one_row() {
    let out = simulate(&["--scheme", "vlb", "--duration", "2ms", "--packet-size", "imix"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let rows = rows(&text);
    assert_eq!(rows.len(), 1, "{}", text);
    assert_eq!(rows[0][0], "vlb");
    assert!(!text.contains("against vlb"));
    assert!(text.contains("IMIX packets"));
}

#[test]
fn the_same_arguments_print_the_same_and_another_seed_does_not() {
    let args = [
        "--duration",
        "1ms",
        "--servers",
        "5",
        "--matrix",
        "hotspot",
        "--hot",
        "0.5",
    ];
    let a = simulate(&args);
    assert!(a.status.success(), "{}", stderr(&a));
    assert_eq!(stdout(&a), stdout(&simulate(&args)));
    let other = simulate(&[&args[..], &["--seed", "7"]].concat());
    assert_ne!(stdout(&a), stdout(&other));
}

#[test]
fn a_failure_costs_what_is_relayed_through_it_until_it_is_detected() {
    let base = ["--servers", "6", "--duration", "4ms", "--fail", "2@1ms", "--json"];
    let lost = |extra: &[&str]| -> Vec<(u64, u64)> {
        let out = simulate(&[&base[..], extra].concat());
        assert!(out.status.success(), "{}", stderr(&out));
        json_lines(&stdout(&out))
            .iter()
            .map(|r| {
                assert_eq!(r["failed_server"], 2);
                (
                    r["dropped_failed"].as_u64().unwrap(),
                    r["lost_in_transit"].as_u64().unwrap(),
                )
            })
            .collect()
    };
    let never = lost(&[]);
    let soon = lost(&["--detect", "100us"]);
    // direct-only relays nothing; VLB (row 1) loses far more relayed traffic when the
    // failure is never detected.
    assert_eq!((never[0].1, soon[0].1), (0, 0));
    assert!(never[1].1 > 5 * soon[1].1, "{:?} {:?}", never, soon);
    assert!(never
        .iter()
        .chain(&soon)
        .all(|&(dropped, relayed)| dropped >= relayed));
    let text = stdout(&simulate(&[
        "--fail",
        "3@10ms",
        "--detect",
        "1ms",
        "--duration",
        "12ms",
    ]));
    assert!(
        text.contains("server 3 fails at 10 ms; the others mark it down 1 ms later"),
        "{}",
        text
    );
}

#[test]
fn a_mesh_of_256_servers_runs_briefly() {
    let out = simulate(&["--servers", "256", "--duration", "100us", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let runs = json_lines(&stdout(&out));
    assert_eq!(runs.len(), 4);
    assert!(runs[0]["offered"].as_u64().unwrap() > 10_000);
}

#[test]
fn bad_values_are_refused_with_a_reason() {
    for (args, message) in [
        (&["--servers", "1"][..], "a mesh has 2 to 256 servers, not 1"),
        (&["--servers", "300"], "a mesh has 2 to 256 servers, not 300"),
        (
            &["--load", "0"],
            "the load is a fraction of each port's rate above 0",
        ),
        (
            &["--load", "-1"],
            "the load is a fraction of each port's rate above 0",
        ),
        (
            &["--rate", "0"],
            "the port rate must be at least 0.001 Gbps, not 0",
        ),
        (
            &["--link-rate", "0"],
            "the link rate must be at least 0.001 Gbps, not 0",
        ),
        (
            &["--server-capacity", "-5"],
            "the server capacity must be at least 0.001 Gbps, not -5",
        ),
        (
            &["--matrix", "hotspot", "--hot", "1.5"],
            "the hot fraction is above 0 and at most 1, not 1.5",
        ),
        (
            &["--matrix", "hotspot", "--hot", "0"],
            "the hot fraction is above 0 and at most 1, not 0",
        ),
        (&["--hot", "0.5"], "--hot is for --matrix hotspot"),
        (
            &["--matrix", "ring"],
            "invalid value 'ring' for '--matrix <MATRIX>'",
        ),
        (
            &["--scheme", "ecmp"],
            "the schemes are direct-only, vlb, direct, direct+flowlets, vlb+flowlets",
        ),
        (&["--packet-size", "10"], "a packet has 64 to 9000 bytes"),
        (
            &["--packet-size", "big"],
            "a packet size is a number of bytes or imix",
        ),
        (&["--duration", "20"], "a time needs a unit: ns, us, ms or s"),
        (
            &["--duration", "20h"],
            "the time units are ns, us, ms and s, not 'h'",
        ),
        (&["--duration", "0ms"], "the duration is above 0"),
        (&["--detect", "1ms"], "--detect is for --fail"),
        (
            &["--fail", "8@1ms"],
            "server 8 cannot fail: the mesh has servers 0 to 7",
        ),
        (
            &["--fail", "3"],
            "--fail is K@TIME (server K fails TIME into the traffic, such as 3@10ms), not '3'",
        ),
        (
            &["--fail", "3@30ms"],
            "a failure at 30000000 ns comes after the 20000000 ns of traffic",
        ),
        (
            &["--flowlet-gap", "0us"],
            "a flowlet gap of 0 keeps no packet on its flowlet's path",
        ),
        (
            &["--buffer", "100"],
            "a buffer of 100 bytes cannot hold one 1000-byte packet",
        ),
        (
            &["--topology", "n-fly", "--servers", "12"],
            "an n-fly of radix 2 joins a power of 2 servers (2, 4, 8 ...), not 12",
        ),
        (
            &["--topology", "n-fly", "--radix", "4"],
            "an n-fly of radix 4 joins a power of 4 servers (4, 16, 64 ...), not 8",
        ),
        (
            &["--topology", "n-fly", "--radix", "1"],
            "an n-fly's radix is at least 2, not 1",
        ),
        (
            &["--topology", "n-fly", "--switch-capacity", "0"],
            "the switching servers' capacity must be at least 0.001 Gbps, not 0",
        ),
        (
            &["--radix", "2"],
            "--radix and --switch-capacity are for --topology n-fly",
        ),
        (
            &["--switch-capacity", "80"],
            "--radix and --switch-capacity are for --topology n-fly",
        ),
        (
            &["--matrix", "transpose"],
            "the transpose matrix needs a square number of servers (4, 9, 16, 64, 256 ...), not 8",
        ),
        (
            &["--topology", "torus"],
            "invalid value 'torus' for '--topology <TOPOLOGY>'",
        ),
    ] {
        let out = simulate(args);
        assert_eq!(out.status.code(), Some(2), "{:?}: {}", args, stderr(&out));
        assert!(stderr(&out).contains(message), "{:?}: {}", args, stderr(&out));
        assert!(out.stdout.is_empty(), "{:?}", args);
    }
}

#[test]
fn no_flowlet_gap_balances_each_packet() {
    let out = simulate(&[
        "--duration",
        "2ms",
        "--flowlet-gap",
        "none",
        "--scheme",
        "direct+flowlets",
        "--json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let runs = json_lines(&stdout(&out));
    assert_eq!(runs[0]["flowlet_hits"].as_u64(), Some(0));
    assert_eq!(runs[0]["flowlet_gap_ns"], serde_json::Value::Null);
}

#[test]
fn an_n_fly_shows_what_vlb_does_for_a_permutation_the_butterfly_cannot_carry() {
    let base = [
        "--topology",
        "n-fly",
        "--servers",
        "16",
        "--matrix",
        "transpose",
        "--duration",
        "4ms",
    ];
    let out = simulate(&base);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("links L = 20 Gbps"), "{}", text);
    assert!(
        text.contains("joined by a 2-ary 4-fly: 4 stages of 8 switching servers of 40 Gbps"),
        "{}",
        text
    );
    assert!(text.contains("dropped server/switch/link/port"), "{}", text);
    let rows = rows(&text);
    let link_drops = |row: &[String]| -> u64 { row[2].split('/').nth(2).unwrap().parse().unwrap() };
    // Straight paths overload a middle stage's links; VLB spreads them.
    assert!(link_drops(&rows[0]) > 1000, "{}", text);
    assert_eq!(link_drops(&rows[1]), 0, "{}", text);

    let out = simulate(&[&base[..], &["--json", "--radix", "4", "--scheme", "vlb"]].concat());
    assert!(out.status.success(), "{}", stderr(&out));
    let runs = json_lines(&stdout(&out));
    assert_eq!(runs.len(), 1);
    let r = &runs[0];
    assert_eq!(r["topology"], "n-fly");
    assert_eq!((r["radix"].as_u64(), r["stages"].as_u64()), (Some(4), Some(2)));
    assert_eq!(r["switch_capacity_gbps"].as_f64(), Some(80.0));
    let n = |k: &str| r[k].as_u64().unwrap();
    assert_eq!(
        n("offered"),
        n("delivered") + n("dropped_server") + n("dropped_switch") + n("dropped_link") + n("dropped_port")
    );
    assert!(r["max_switch_utilisation"].as_f64().unwrap() > 0.0);

    // A full mesh has no switching servers.
    let out = simulate(&["--duration", "1ms", "--json", "--scheme", "vlb"]);
    let r = &json_lines(&stdout(&out))[0];
    assert_eq!(r["topology"], "full-mesh");
    assert_eq!(r["radix"], serde_json::Value::Null);
    assert_eq!(r["dropped_switch"].as_u64(), Some(0));
    assert_eq!(r["max_switch_utilisation"], serde_json::Value::Null);
}

#[test]
fn an_n_fly_of_256_servers_runs_briefly() {
    let out = simulate(&[
        "--topology",
        "n-fly",
        "--servers",
        "256",
        "--duration",
        "100us",
        "--json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let runs = json_lines(&stdout(&out));
    assert_eq!(runs.len(), 4);
    assert_eq!(runs[0]["stages"].as_u64(), Some(8));
    assert!(runs[0]["offered"].as_u64().unwrap() > 10_000);
}
