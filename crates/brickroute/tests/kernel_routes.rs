//! `KernelRoutes` in a running router, inside a network namespace (root needed): the
//! kernel's IPv4 table is in the lookup element when the router starts, and every
//! change `ip route` makes (added, replaced, removed, a better metric, routes the
//! kernel drops silently when an address goes) reaches it while the router runs.

mod common;
#[path = "common/control_client.rs"]
mod control_client;
#[path = "common/netns.rs"]
mod netns;
#[path = "common/router_process.rs"]
mod router_process;

use control_client::{connect_unix, Client};
use netns::Netns;
use router_process::RouterProcess;
use std::os::unix::net::UnixStream;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// A namespace with two interfaces: d0 on 198.18.0.1/24, d1 on 198.19.0.1/24 (each a
/// veth whose peer stays in the namespace, so both are up with their routes).
fn namespace() -> Netns {
    let ns = Netns::new("k");
    for (d, p, a) in [("d0", "p0", "198.18.0.1/24"), ("d1", "p1", "198.19.0.1/24")] {
        ns.ip(&["link", "add", d, "type", "veth", "peer", "name", p]);
        ns.ip(&["link", "set", d, "up"]);
        ns.ip(&["link", "set", p, "up"]);
        ns.ip(&["addr", "add", a, "dev", d]);
    }
    ns
}

/// `brickroute run -e CONFIG [-h H ...]` (and `-q` when `quit`) inside `ns`.
fn command_in(ns: &Netns, config: &str, handlers: &[&str], quit: bool) -> Command {
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", &ns.name, env!("CARGO_BIN_EXE_brickroute"), "run"]);
    if quit {
        cmd.arg("-q");
    }
    cmd.args(["-e", config]);
    for h in handlers {
        cmd.args(["-h", h]);
    }
    cmd
}

fn router_in(ns: &Netns, config: &str, handlers: &[&str]) -> RouterProcess {
    RouterProcess(
        command_in(ns, config, handlers, false)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start brickroute"),
    )
}

/// Configures the router inside `ns` without running it (`-q`).
fn configure_in(ns: &Netns, config: &str, handlers: &[&str]) -> Output {
    command_in(ns, config, handlers, true)
        .output()
        .expect("run brickroute")
}

const LOOKUP: &str = "InfiniteSource(LIMIT 0) -> rt :: RadixIPLookup; \
    rt[0] -> Discard; rt[1] -> Discard; rt[2] -> Discard; rt[3] -> Discard;";

/// The route table's lines, sorted.
fn table(c: &mut Client<UnixStream>) -> Vec<String> {
    let mut v: Vec<String> = c
        .read("rt.table")
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect();
    v.sort();
    v
}

/// Waits (bounded) until the table is `want`.
fn wait_table(c: &mut Client<UnixStream>, want: &[&str]) {
    let mut want: Vec<String> = want.iter().map(|s| s.to_string()).collect();
    want.sort();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let got = table(c);
        if got == want {
            return;
        }
        assert!(Instant::now() < deadline, "table {:?}, expected {:?}", got, want);
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn the_kernels_table_is_followed_while_the_router_runs() {
    let ns = namespace();
    ns.ip(&["route", "add", "192.0.2.0/24", "via", "198.18.0.2"]);
    ns.ip(&["route", "add", "default", "via", "198.19.0.2"]);
    ns.ip(&["route", "add", "blackhole", "10.9.0.0/16"]);
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("s");
    let config = format!(
        "ControlSocket(unix, {}); k :: KernelRoutes(rt, d0 1, d1 2); {}",
        sock.display(),
        LOOKUP
    );
    let mut p = router_in(&ns, &config, &["k.routes"]);
    let mut c = connect_unix(&sock, &mut p);

    // Installed before the first packet: the connected networks, the route via a
    // gateway, the default route; the blackhole route has no output to go to.
    assert_eq!(
        table(&mut c),
        [
            "0.0.0.0/0 198.19.0.2 2",
            "192.0.2.0/24 198.18.0.2 1",
            "198.18.0.0/24 - 1",
            "198.19.0.0/24 - 2"
        ]
    );
    assert_eq!(c.read("k.skipped"), "1");

    // A replaced route moves to the other interface.
    ns.ip(&["route", "replace", "192.0.2.0/24", "via", "198.19.0.2"]);
    wait_table(
        &mut c,
        &[
            "0.0.0.0/0 198.19.0.2 2",
            "192.0.2.0/24 198.19.0.2 2",
            "198.18.0.0/24 - 1",
            "198.19.0.0/24 - 2",
        ],
    );

    // Of two routes to a prefix the kernel uses the lower metric, and so does the
    // router; when that one goes, the other takes over.
    ns.ip(&[
        "route",
        "add",
        "203.0.113.0/24",
        "via",
        "198.18.0.2",
        "metric",
        "100",
    ]);
    ns.ip(&[
        "route",
        "add",
        "203.0.113.0/24",
        "via",
        "198.19.0.2",
        "metric",
        "50",
    ]);
    let with = [
        "0.0.0.0/0 198.19.0.2 2",
        "192.0.2.0/24 198.19.0.2 2",
        "198.18.0.0/24 - 1",
        "198.19.0.0/24 - 2",
        "203.0.113.0/24 198.19.0.2 2",
    ];
    wait_table(&mut c, &with);
    ns.ip(&[
        "route",
        "del",
        "203.0.113.0/24",
        "via",
        "198.19.0.2",
        "metric",
        "50",
    ]);
    let mut moved = with;
    moved[4] = "203.0.113.0/24 198.18.0.2 1";
    wait_table(&mut c, &moved);

    // A removed route is gone.
    ns.ip(&["route", "del", "192.0.2.0/24"]);
    wait_table(
        &mut c,
        &[
            "0.0.0.0/0 198.19.0.2 2",
            "198.18.0.0/24 - 1",
            "198.19.0.0/24 - 2",
            "203.0.113.0/24 198.18.0.2 1",
        ],
    );

    // Removing d1's address makes the kernel drop every route through it without a
    // route notification (the default route too): the router takes the table again.
    ns.ip(&["addr", "del", "198.19.0.1/24", "dev", "d1"]);
    wait_table(&mut c, &["198.18.0.0/24 - 1", "203.0.113.0/24 198.18.0.2 1"]);
    assert!(c.read("k.resyncs").parse::<u64>().unwrap() >= 2);

    c.send("WRITE stop\n");
    let status = p.wait_exit(Duration::from_secs(20));
    let (out, err) = p.output();
    assert!(status.success(), "{status}: {err}");
    assert_eq!(out, "2\n");
}

#[test]
fn dropping_routes_go_to_the_blackhole_output_and_other_tables_are_followed_by_number() {
    let ns = namespace();
    ns.ip(&["route", "add", "blackhole", "10.9.0.0/16"]);
    ns.ip(&["route", "add", "unreachable", "10.8.0.0/16"]);
    ns.ip(&[
        "route",
        "add",
        "192.0.2.0/24",
        "via",
        "198.18.0.2",
        "table",
        "100",
    ]);
    let config = format!("k :: KernelRoutes(rt, d0 1, d1 2, BLACKHOLE 3); {}", LOOKUP);
    let out = configure_in(&ns, &config, &["rt.table", "k.skipped"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("10.9.0.0/16\t\t-\t\t3\n"), "{text}");
    assert!(text.contains("10.8.0.0/16\t\t-\t\t3\n"), "{text}");
    assert!(!text.contains("192.0.2.0/24"), "{text}");
    assert!(text.ends_with("k.skipped:\n0\n\n"), "{text}");

    let config = format!("k :: KernelRoutes(rt, d0 1, TABLE 100); {}", LOOKUP);
    let out = configure_in(&ns, &config, &["rt.table"]);
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        "192.0.2.0/24\t\t198.18.0.2\t1\n"
    );
}

#[test]
fn bad_configurations_are_refused_with_the_reason() {
    let ns = namespace();
    let cases = [
        (
            "k :: KernelRoutes(rt, nosuch 1)",
            "k :: KernelRoutes: no interface 'nosuch'",
        ),
        (
            "k :: KernelRoutes(rt)",
            "k :: KernelRoutes: no interfaces: give 'DEVNAME OUTPUT' for each",
        ),
        (
            "k :: KernelRoutes(rt, d0 x)",
            "k :: KernelRoutes: OUTPUT expects an output number, not 'x'",
        ),
        (
            "k :: KernelRoutes(rt, d0 1, d0 2)",
            "k :: KernelRoutes: interface 'd0' given twice",
        ),
        (
            "k :: KernelRoutes(rt, d0 7)",
            "k :: KernelRoutes: 'rt' has no output 7 (4 outputs)",
        ),
        (
            "k :: KernelRoutes(nort, d0 1)",
            "k :: KernelRoutes: no element 'nort'",
        ),
        (
            "k :: KernelRoutes(c, d0 1); InfiniteSource(LIMIT 0) -> c :: Counter -> Discard",
            "k :: KernelRoutes: 'c' is not a route table with a 'ctrl' handler",
        ),
    ];
    for (k, want) in cases {
        let config = format!("{}; {}", k, LOOKUP);
        let out = configure_in(&ns, &config, &[]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{k}");
        assert!(err.contains(want), "{k}: {err}");
    }
}
