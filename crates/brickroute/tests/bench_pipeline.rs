//! `brickroute bench pipeline` from the command line: the table, and `--profile`.

mod common;
use common::*;

#[test]
fn profile_lists_every_element_that_ran_with_its_calls_and_packets() {
    let out = pipeline_out(&["--app", "route", "--packets", "3200", "--kp", "32", "--profile"]);
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
    let out = pipeline_out(&["--app", "forward", "--packets", "1000"]);
    assert!(out.contains("cycles/packet"), "{}", out);
    assert!(!out.contains("cycles/call"), "{}", out);
}

#[test]
fn route6_routes_every_ipv6_frame_through_the_added_routes() {
    let out = pipeline_out(&[
        "--app",
        "route6",
        "--packets",
        "6400",
        "--routes",
        "5000",
        "--profile",
    ]);
    // 64 bytes asked for, 66 run: the smallest UDP/IPv6 frame.
    assert!(
        out.starts_with("app route6  size 66 B  threads 1  routes 5000"),
        "{}",
        out
    );
    assert!(out.contains("transmitted 6400 packets"), "{}", out);
    let calls = |name: &str| profile_row(&out, name);
    // conf/router6.click: every frame is IPv6, passes the check and the lookup, and
    // leaves on one of the two interfaces (the added routes are on both).
    assert_eq!(calls("chk"), ("CheckIP6Header".to_string(), "6400".to_string()));
    assert_eq!(calls("rt"), ("LookupIP6Route".to_string(), "6400".to_string()));
    let if1: u64 = calls("if1/cnt").1.parse().unwrap();
    let if2: u64 = calls("if2/cnt").1.parse().unwrap();
    assert_eq!(if1 + if2, 6400);
    assert!(if1 > 0 && if2 > 0, "{}", out);
}

#[test]
fn ipsec_encrypts_every_frame_into_the_tunnel() {
    let out = pipeline_out(&[
        "--app",
        "ipsec",
        "--packets",
        "6400",
        "--routes",
        "1000",
        "--size",
        "128",
        "--profile",
    ]);
    assert!(
        out.starts_with("app ipsec  size 128 B  threads 1  routes 1000"),
        "{}",
        out
    );
    // conf/ipsec.click: every frame is for the remote site (the added routes lead into
    // the tunnel), so each is encrypted and leaves as one frame (182 bytes with its
    // FCS, under the tunnel's MTU, so not fragmented).
    assert!(out.contains("transmitted 6400 packets"), "{}", out);
    let calls = |name: &str| profile_row(&out, name);
    assert_eq!(calls("esp"), ("ESPEncap".to_string(), "6400".to_string()));
    assert_eq!(calls("tunnel"), ("Counter".to_string(), "6400".to_string()));
    assert!(out.contains("ipsec takes "), "{}", out);
}

#[test]
fn nat_translates_every_frame() {
    let out = pipeline_out(&[
        "--app",
        "nat",
        "--packets",
        "6400",
        "--flows",
        "256",
        "--routes",
        "1000",
        "--profile",
    ]);
    assert!(
        out.starts_with("app nat  size 64 B  threads 1  routes 1000"),
        "{}",
        out
    );
    // conf/natpath.click: every frame is UDP for elsewhere, so each passes the
    // rewriter (one mapping a flow, made by its first frame) and leaves translated.
    assert!(out.contains("transmitted 6400 packets"), "{}", out);
    let calls = |name: &str| profile_row(&out, name);
    assert_eq!(calls("rw"), ("IPRewriter".to_string(), "6400".to_string()));
    assert_eq!(calls("translated"), ("Counter".to_string(), "6400".to_string()));
    assert!(out.contains("nat takes "), "{}", out);
}

#[test]
fn vlb_sends_every_frame_across_the_mesh_or_out_of_its_own_port() {
    let out = pipeline_out(&[
        "--app",
        "vlb",
        "--packets",
        "6400",
        "--routes",
        "1000",
        "--profile",
    ]);
    assert!(
        out.starts_with("app vlb  size 64 B  threads 1  routes 1000"),
        "{}",
        out
    );
    // conf/vlb.click: the added routes spread the frames over the four servers; every
    // frame leaves by one of the four ports, after VLBSwitch.
    assert!(out.contains("transmitted 6400 packets"), "{}", out);
    assert_eq!(
        profile_row(&out, "vlb"),
        ("VLBSwitch".to_string(), "6400".to_string())
    );
    let sent: u64 = (0..4)
        .map(|k| {
            profile_row(&out, &format!("out{}/cnt", k))
                .1
                .parse::<u64>()
                .unwrap()
        })
        .sum();
    assert_eq!(sent, 6400, "{}", out);
    assert!(out.contains("vlb takes "), "{}", out);
}

/// The class and the packets of element `name` in a `--profile` table.
fn profile_row(out: &str, name: &str) -> (String, String) {
    out.lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|r| r.first() == Some(&name))
        .map(|r| (r[1].to_string(), r[3].to_string()))
        .unwrap_or_else(|| panic!("no row for {}:\n{}", name, out))
}

/// The standard output of `bench pipeline --no-pin ARGS`, which must succeed.
fn pipeline_out(args: &[&str]) -> String {
    let mut all = vec!["bench", "pipeline", "--no-pin"];
    all.extend_from_slice(args);
    let o = brickroute(&all);
    assert!(o.status.success(), "{:?}: {}", args, stderr(&o));
    stdout(&o)
}

/// `bench pipeline --no-pin ARGS --json`, parsed.
fn pipeline_json(args: &[&str]) -> serde_json::Value {
    let out = pipeline_out(&[args, &["--json"]].concat());
    serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("{}: {}", e, out))
}

#[test]
fn route_apps_are_compared_with_forwarding_run_right_after() {
    let j = pipeline_json(&["--app", "route", "--packets", "6400"]);
    assert_eq!(j["baseline"], "forward", "{}", j);
    let (cycles, base) = (
        j["cycles_per_packet"].as_f64().unwrap(),
        j["baseline_cycles_per_packet"].as_f64().unwrap(),
    );
    assert!(base > 0.0 && j["baseline_mpps"].as_f64().unwrap() > 0.0, "{}", j);
    // The ratio is of the two figures printed (each rounded to 0.1 cycle).
    let ratio = j["ratio_to_baseline"].as_f64().unwrap();
    assert!((ratio - cycles / base).abs() <= 0.01 * ratio + 0.01, "{}", j);

    // The table says the same in words.
    let out = pipeline_out(&["--app", "route6", "--packets", "6400", "--baseline", "route"]);
    let line = out
        .lines()
        .find(|l| l.starts_with("baseline route (right after, same frame size, flows and workers): "))
        .unwrap_or_else(|| panic!("no baseline line:\n{}", out));
    assert!(
        line.contains(" cycles/packet; route6 takes ") && line.ends_with("x its cycles a packet"),
        "{}",
        line
    );
}

#[test]
fn forwarding_and_none_have_no_baseline_and_an_unknown_one_is_refused() {
    for args in [
        &["--app", "forward", "--packets", "1000"][..],
        &["--app", "route", "--packets", "1000", "--baseline", "none"][..],
    ] {
        let j = pipeline_json(args);
        assert!(
            j.get("baseline").is_none() && j.get("ratio_to_baseline").is_none(),
            "{:?}: {}",
            args,
            j
        );
    }
    let o = brickroute(&["bench", "pipeline", "--app", "route", "--baseline", "bridge"]);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(
        stderr(&o).trim(),
        "brickroute bench pipeline: --baseline: unknown app 'bridge' (known: forward, route, route6, ipsec, filter, vlb, nat) or none"
    );
    assert!(stdout(&o).is_empty());
}

#[test]
fn rounds_alternate_the_app_and_its_baseline_and_report_medians() {
    // 64,001 packets over 5 rounds: shares of 12,800 and one of 12,801.
    let j = pipeline_json(&["--app", "route", "--packets", "64001", "--rounds", "5"]);
    assert_eq!(j["rounds"], 5, "{}", j);
    let list = |k: &str| -> Vec<f64> {
        j[k].as_array()
            .unwrap_or_else(|| panic!("no {}: {}", k, j))
            .iter()
            .map(|x| x.as_f64().unwrap())
            .collect()
    };
    let (app, base) = (
        list("round_cycles_per_packet"),
        list("baseline_round_cycles_per_packet"),
    );
    assert_eq!((app.len(), base.len()), (5, 5), "{}", j);
    // Every round moved packets (a round that found the router stopped would not).
    assert!(app.iter().chain(&base).all(|&c| c > 0.0), "{}", j);
    let median = |v: &[f64]| {
        let mut v = v.to_vec();
        v.sort_by(f64::total_cmp);
        v[2]
    };
    assert_eq!(j["cycles_per_packet"].as_f64().unwrap(), median(&app), "{}", j);
    assert_eq!(
        j["baseline_cycles_per_packet"].as_f64().unwrap(),
        median(&base),
        "{}",
        j
    );
    // The ratio is the median of the rounds' own ratios (from the printed figures,
    // each rounded to 0.1 cycle).
    let ratios: Vec<f64> = app.iter().zip(&base).map(|(a, b)| a / b).collect();
    let ratio = j["ratio_to_baseline"].as_f64().unwrap();
    assert!((ratio - median(&ratios)).abs() <= 0.01 * ratio + 0.01, "{}", j);
    // Exactly the packets asked for, shared over the rounds, came through and left.
    let (rx, tx) = (j["packets"].as_u64().unwrap(), j["tx_packets"].as_u64().unwrap());
    assert_eq!((rx, tx), (64_001, 64_001), "{}", j);

    // The table names the rounds and the turns.
    let out = pipeline_out(&["--app", "route", "--packets", "6400", "--rounds", "2"]);
    assert!(
        out.lines()
            .any(|l| l.starts_with("2 rounds, cycles/packet: ") && l.contains("; median ")),
        "{}",
        out
    );
    assert!(
        out.contains("baseline forward (in turns, same frame size, flows and workers): "),
        "{}",
        out
    );
}

#[test]
fn rounds_refuse_a_profile_and_too_few_packets() {
    for (args, want) in [
        (
            &["--profile", "--rounds", "2"][..],
            "brickroute bench pipeline: a profile times one run: give rounds or a profile, not both",
        ),
        (
            &["--packets", "3", "--rounds", "4"][..],
            "brickroute bench pipeline: 3 packets cannot be shared over 4 rounds",
        ),
    ] {
        let o = brickroute(&[&["bench", "pipeline", "--no-pin", "--app", "route"], args].concat());
        assert_eq!(o.status.code(), Some(1), "{:?}", args);
        assert_eq!(stderr(&o).trim(), want);
        assert!(stdout(&o).is_empty());
    }
}

#[test]
fn a_missing_baseline_configuration_is_named_as_the_baselines() {
    // The route app's configuration is there, forwarding's is not.
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(root().join("conf/router.click"), dir.path().join("router.click")).unwrap();
    let conf_dir = dir.path().to_str().unwrap();
    for rounds in ["1", "2"] {
        let o = brickroute(&[
            "bench",
            "pipeline",
            "--no-pin",
            "--app",
            "route",
            "--packets",
            "640",
            "--rounds",
            rounds,
            "--conf-dir",
            conf_dir,
        ]);
        assert_eq!(o.status.code(), Some(1), "rounds {rounds}");
        let want = format!(
            "brickroute bench pipeline: baseline forward: {}/forward.click: No such file or directory",
            conf_dir
        );
        assert!(stderr(&o).starts_with(&want), "rounds {rounds}: {}", stderr(&o));
        assert!(stdout(&o).is_empty());
    }
}

#[test]
fn batching_runs_every_pair_against_the_unbatched_one() {
    let o = brickroute(&[
        "bench",
        "batching",
        "--no-pin",
        "--kp",
        "32,1",
        "--kn",
        "1,16",
        "--packets",
        "20000",
        "--rounds",
        "2",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let j: serde_json::Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    assert_eq!(
        (j["app"].as_str(), j["packets"].as_u64(), j["rounds"].as_u64()),
        (Some("forward"), Some(20000), Some(2))
    );
    let cells = j["cells"].as_array().unwrap();
    let pairs: Vec<(u64, u64)> = cells
        .iter()
        .map(|c| (c["kp"].as_u64().unwrap(), c["kn"].as_u64().unwrap()))
        .collect();
    // The unbatched pair first, then the asked ones in the order given.
    assert_eq!(pairs, [(1, 1), (32, 1), (32, 16), (1, 16)]);
    assert_eq!(cells[0]["speedup"].as_f64(), Some(1.0));
    for c in cells {
        assert!(c["cycles_per_packet"].as_f64().unwrap() > 0.0, "{c}");
        assert!(c["mpps"].as_f64().unwrap() > 0.0, "{c}");
    }
    // The table: a heading, a row per pair with its ratio and a bar.
    let o = brickroute(&[
        "bench",
        "batching",
        "--no-pin",
        "--kp",
        "4",
        "--kn",
        "2",
        "--packets",
        "2000",
        "--rounds",
        "1",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines[0],
        "app forward  size 64 B  threads 1  flows 1024  2000 packets a run, 1 round (medians)"
    );
    assert_eq!(lines.len(), 4, "{out}");
    assert!(
        lines[2].trim_start().starts_with("1     1 ") && lines[2].contains("   1.00x  "),
        "{out}"
    );
    assert!(lines[3].trim_start().starts_with("4     2 "), "{out}");
    // Bars in eighths of a character, the largest ratio's 40 characters long.
    let bars: Vec<&str> = lines[2..]
        .iter()
        .map(|l| l.rsplit("x  ").next().unwrap())
        .collect();
    assert!(
        bars.iter()
            .all(|b| !b.is_empty() && b.chars().all(|c| "█▏▎▍▌▋▊▉".contains(c))),
        "{out}"
    );
    assert!(bars.iter().any(|b| *b == "█".repeat(40)), "{out}");
}

#[test]
fn batching_refuses_batches_out_of_range_and_unknown_apps() {
    for (args, err) in [
        (
            &["--kp", "0"][..],
            "brickroute bench batching: --kp 0: each batch must be from 1 to 256\n",
        ),
        (
            &["--kn", "1,300"][..],
            "brickroute bench batching: --kn 300: each batch must be from 1 to 256\n",
        ),
        (
            &["--app", "bridge"][..],
            "brickroute bench batching: unknown app 'bridge' (known: forward, route, route6, ipsec, filter, vlb, nat)\n",
        ),
    ] {
        let mut all = vec!["bench", "batching"];
        all.extend_from_slice(args);
        let o = brickroute(&all);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert_eq!(stderr(&o), err);
    }
}

#[test]
fn filter_rules_are_rewritten_while_the_app_runs() {
    // 50 deny rules none of the traffic matches: every packet passes the filter, also
    // while its rules are rewritten 200 times a second.
    let j = pipeline_json(&[
        "--app",
        "filter",
        "--rules",
        "50",
        "--rule-updates",
        "200",
        "--seconds",
        "0.3",
    ]);
    assert_eq!(j["rules"].as_u64(), Some(50), "{j}");
    let packets = j["packets"].as_u64().unwrap();
    assert!(packets > 0, "{j}");
    assert_eq!(j["tx_packets"].as_u64(), Some(packets), "{j}");
    assert!(j["rule_writes"].as_u64().unwrap() >= 1, "{j}");
    assert!(j["rule_write_median_us"].as_f64().unwrap() > 0.0, "{j}");
    // Without updates: the rules, no writes; the table says so.
    let out = pipeline_out(&[
        "--app",
        "filter",
        "--rules",
        "10",
        "--packets",
        "5000",
        "--baseline",
        "none",
    ]);
    assert!(
        out.contains("filter: 10 rules added; 0 rule writes while it ran"),
        "{out}"
    );
    assert!(out.contains("transmitted 5000 packets"), "{out}");
    // Rules need a filter.
    let o = brickroute(&[
        "bench",
        "pipeline",
        "--app",
        "forward",
        "--rules",
        "5",
        "--packets",
        "100",
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        stderr(&o),
        "brickroute bench pipeline: rules need an IPFilter in the configuration (app filter)\n"
    );
}

#[test]
fn rule_updates_are_checked_and_stop_with_the_run() {
    for (args, err) in [
        (
            &["--rules", "10", "--rule-updates", "1e-30"][..],
            "brickroute bench pipeline: --rule-updates must be 0, or from 0.01 to 100000 a second\n",
        ),
        (
            &["--rule-updates", "10"][..],
            "brickroute bench pipeline: --rule-updates needs --rules: the rules it rewrites\n",
        ),
    ] {
        let mut all = vec!["bench", "pipeline", "--app", "filter", "--packets", "1000"];
        all.extend_from_slice(args);
        let o = brickroute(&all);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert_eq!(stderr(&o), err);
    }
    // One write every 5 s, a run far shorter: it ends without waiting for the writer's
    // next turn, and no write is counted for it.
    let j = pipeline_json(&[
        "--app",
        "filter",
        "--rules",
        "10",
        "--rule-updates",
        "0.2",
        "--packets",
        "1000",
        "--baseline",
        "none",
    ]);
    assert_eq!(j["rule_writes"].as_u64(), Some(0), "{j}");
    // bench batching reports the frame size the runs took (route6's least is 66).
    let o = brickroute(&[
        "bench",
        "batching",
        "--no-pin",
        "--app",
        "route6",
        "--kp",
        "4",
        "--kn",
        "1",
        "--packets",
        "2000",
        "--rounds",
        "1",
        "--json",
    ]);
    let j: serde_json::Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    assert_eq!(j["size"].as_u64(), Some(66), "{j}");
}

#[test]
fn scaling_runs_each_worker_count_against_one_worker() {
    let o = brickroute(&[
        "bench",
        "scaling",
        "--no-pin",
        "--app",
        "forward",
        "--workers",
        "2,1,2",
        "--packets",
        "20000",
        "--rounds",
        "2",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let r: serde_json::Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    assert_eq!(
        (r["app"].as_str(), r["rounds"].as_u64()),
        (Some("forward"), Some(2))
    );
    let cells = r["cells"].as_array().unwrap();
    // One worker first, as the baseline; each count once.
    let workers: Vec<u64> = cells.iter().map(|c| c["workers"].as_u64().unwrap()).collect();
    assert_eq!(workers, vec![1, 2]);
    assert_eq!(cells[0]["speedup"].as_f64(), Some(1.0));
    assert_eq!(cells[0]["efficiency"].as_f64(), Some(1.0));
    for c in cells {
        assert!(
            c["mpps"].as_f64().unwrap() > 0.0 && c["cycles_per_packet"].as_f64().unwrap() > 0.0,
            "{c}"
        );
        let (s, e, w) = (
            c["speedup"].as_f64().unwrap(),
            c["efficiency"].as_f64().unwrap(),
            c["workers"].as_f64().unwrap(),
        );
        assert!((s / w - e).abs() < 1e-9, "{c}");
    }
}

#[test]
fn scaling_refuses_bad_counts() {
    for (args, message) in [
        (
            &["--workers", "0"][..],
            "--workers 0: each count must be from 1 to 1024",
        ),
        (
            &["--threads", "2"][..],
            "bench scaling takes its worker counts from --workers, not --threads",
        ),
        (&["--packets", "0"][..], "--packets must be at least 1"),
        (&["--app", "bridge"][..], "unknown app 'bridge'"),
    ] {
        let o = brickroute(&[&["bench", "scaling"][..], args].concat());
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(stderr(&o).contains(message), "{args:?}: {}", stderr(&o));
    }
}
