//! `brickroute cluster plan`: the table's rows, the JSON lines' keys and values, and
//! the options it refuses.

mod common;

use common::{brickroute, stderr, stdout};

fn plan(args: &[&str]) -> std::process::Output {
    let mut all = vec!["cluster", "plan"];
    all.extend_from_slice(args);
    brickroute(&all)
}

/// The JSON lines of a successful `cluster plan --json` with `args`.
fn json_lines(args: &[&str]) -> Vec<serde_json::Value> {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    let out = plan(&all);
    assert!(out.status.success(), "{}", stderr(&out));
    stdout(&out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{}: {}", l, e)))
        .collect()
}

/// The rows of the table: the lines that start with a value of N.
fn table_rows(text: &str) -> Vec<&str> {
    let rows: Vec<&str> = text
        .lines()
        .take_while(|l| !l.starts_with("servers against ports"))
        .filter(|l| {
            l.split_whitespace()
                .next()
                .is_some_and(|w| w.parse::<u32>().is_ok())
        })
        .collect();
    rows
}

#[test]
fn the_default_sweep_has_a_row_and_a_bar_for_each_power_of_two_from_4_to_1024() {
    let out = plan(&[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.starts_with(
            "external ports of R = 10 Gbps; servers of C = 40 Gbps of processing, P = 8 NIC ports of L = 10 Gbps\n\
             scheme vlb: a server processes 3R = 30 Gbps"
        ),
        "{}",
        text
    );
    let ns: Vec<&str> = table_rows(&text)
        .iter()
        .map(|r| r.split_whitespace().next().unwrap())
        .collect();
    assert_eq!(ns, ["4", "8", "16", "32", "64", "128", "256", "512", "1024"]);
    let rows = table_rows(&text);
    assert_eq!(
        rows[0].split_whitespace().collect::<Vec<_>>(),
        ["4", "full", "mesh", "4", "1", "4/-", "6", "n-fly", "8"]
    );
    assert_eq!(
        rows[2].split_whitespace().collect::<Vec<_>>(),
        ["16", "2-ary", "4-fly", "48", "1", "3/8", "128", "mesh", "-"]
    );
    let bars: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("servers against ports"))
        .skip(1)
        .take_while(|l| !l.is_empty())
        .collect();
    assert_eq!(bars.len(), 9, "{}", text);
    assert!(bars[0].trim_start().starts_with("4 │█"), "{}", bars[0]);
    // The largest plan, 6144 servers, has the full 40 cells.
    assert_eq!(bars[8], format!("   1024 │{} 6144", "█".repeat(40)));
}

#[test]
fn plans_the_simulator_can_model_come_with_its_command_and_hold_under_vlb() {
    let out = plan(&["--ports", "8,16,2048"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let commands: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("check a plan under traffic"))
        .skip(1)
        .collect();
    // 2048 ports need 2048 edge servers, past the simulator's 256.
    assert_eq!(
        commands,
        [
            "      8  brickroute cluster simulate --servers 8 --rate 10 --link-rate 10 --server-capacity 40",
            "     16  brickroute cluster simulate --topology n-fly --servers 16 --radix 2 --rate 10 \
             --link-rate 20 --server-capacity 40 --switch-capacity 40",
        ],
        "{}",
        text
    );
    // Servers of 100 Gbps hold 3 ports each: the simulator has one a server.
    let lines = json_lines(&["--ports", "16,64", "--server-capacity", "100"]);
    assert_eq!(lines[0]["simulate"], serde_json::Value::Null);
    assert_eq!(
        lines[1]["simulate"],
        "--topology n-fly --servers 64 --radix 2 --rate 10 --link-rate 20 --server-capacity 100 --switch-capacity 100"
    );
    // The 16-port plan, simulated: classic VLB drops nothing inside the cluster.
    let args = commands[1].split_whitespace().skip(4);
    let mut all = vec![
        "cluster",
        "simulate",
        "--scheme",
        "vlb",
        "--duration",
        "2ms",
        "--json",
    ];
    all.extend(args);
    let out = brickroute(&all);
    assert!(out.status.success(), "{}", stderr(&out));
    let r: serde_json::Value = serde_json::from_str(stdout(&out).trim()).unwrap();
    assert!(r["delivered"].as_u64().unwrap() > 10_000, "{}", r);
    for key in ["dropped_server", "dropped_switch", "dropped_link"] {
        assert_eq!(r[key].as_u64(), Some(0), "{}: {}", key, r);
    }
}

#[test]
fn json_lines_carry_the_hand_computed_plans() {
    let lines = json_lines(&["--ports", "4,16"]);
    assert_eq!(lines.len(), 2);
    let mesh = &lines[0];
    for (key, want) in [
        ("ports", serde_json::json!(4)),
        ("rate_gbps", serde_json::json!(10.0)),
        ("topology", serde_json::json!("mesh")),
        ("servers", serde_json::json!(4)),
        ("ports_per_server", serde_json::json!(1)),
        ("nic_ports_edge", serde_json::json!(4)),
        ("nic_ports_switch", serde_json::Value::Null),
        ("stages", serde_json::json!(0)),
        ("k", serde_json::Value::Null),
        ("links", serde_json::json!(6)),
        ("mesh_servers", serde_json::json!(4)),
        ("nfly_servers", serde_json::json!(8)),
        ("reason", serde_json::Value::Null),
    ] {
        assert_eq!(mesh.get(key), Some(&want), "{}: {}", key, mesh);
    }
    let fly = &lines[1];
    for (key, want) in [
        ("ports", serde_json::json!(16)),
        ("topology", serde_json::json!("n-fly")),
        ("servers", serde_json::json!(48)),
        ("nic_ports_edge", serde_json::json!(3)),
        ("nic_ports_switch", serde_json::json!(8)),
        ("stages", serde_json::json!(4)),
        ("k", serde_json::json!(2)),
        ("switch_servers", serde_json::json!(32)),
        ("mesh_servers", serde_json::Value::Null),
        ("nfly_servers", serde_json::json!(48)),
    ] {
        assert_eq!(fly.get(key), Some(&want), "{}: {}", key, fly);
    }
}

#[test]
fn direct_vlb_fits_where_classic_vlb_cannot_and_says_it_needs_uniform_traffic() {
    let out = plan(&["--ports", "4", "--server-capacity", "20"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        table_rows(&stdout(&out)),
        ["      4  no plan: a server cannot process one external port (needs 30 Gbps, has 20)"]
    );

    let out = plan(&["--ports", "4", "--server-capacity", "20", "--scheme", "direct"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("holds only for uniform traffic matrices"),
        "{}",
        text
    );
    assert_eq!(
        table_rows(&text)[0].split_whitespace().nth(3),
        Some("4"),
        "{}",
        text
    );

    let line = &json_lines(&["--ports", "4", "--server-capacity", "20"])[0];
    assert_eq!(line["topology"], serde_json::Value::Null);
    assert_eq!(
        line["reason"],
        "a server cannot process one external port (needs 30 Gbps, has 20)"
    );
}

#[test]
fn port_lists_mix_numbers_and_ranges_in_the_order_given() {
    let ports: Vec<u64> = json_lines(&["--ports", "3, 16..64,1"])
        .iter()
        .map(|l| l["ports"].as_u64().unwrap())
        .collect();
    assert_eq!(ports, [3, 16, 32, 64, 1]);
}

#[test]
fn bad_options_exit_2_with_the_reason() {
    for (args, message) in [
        (
            &["--ports", "3..8"][..],
            "--ports: 'A..B' needs powers of two, A <= B, not '3..8'",
        ),
        (
            &["--ports", "64..16"],
            "--ports: 'A..B' needs powers of two, A <= B, not '64..16'",
        ),
        (
            &["--ports", "4,lots"],
            "--ports: 'lots' is not a number of ports or a range A..B of powers of two",
        ),
        (
            &["--ports", "0"],
            "--ports: a router has 1 to 1048576 external ports, not 0",
        ),
        (
            &["--rate", "40"],
            "R is faster than a NIC port: an external port of 40 Gbps needs a NIC port of its own, \
             and NIC ports run at 10 Gbps",
        ),
        (
            &["--rate=-10"],
            "the external port rate must be more than 0 Gbps, not -10",
        ),
        (
            &["--link-rate", "0"],
            "the NIC port speed must be more than 0 Gbps, not 0",
        ),
        (
            &["--nic-ports", "1"],
            "a server needs at least 2 NIC ports (one external, one to the other servers), not 1",
        ),
        (&["--scheme", "ecmp"], "'ecmp' is not a scheme: use vlb or direct"),
    ] {
        let out = plan(args);
        assert_eq!(out.status.code(), Some(2), "{:?}: {}", args, stderr(&out));
        assert!(stderr(&out).contains(message), "{:?}: {}", args, stderr(&out));
        assert_eq!(stdout(&out), "", "{:?}", args);
    }
}
