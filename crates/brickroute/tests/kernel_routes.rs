//! `KernelRoutes` in a running router, inside a network namespace (root needed): the
//! kernel's IPv4 or IPv6 table is in the lookup element when the router starts, and
//! every change `ip route` makes (added, replaced, removed, a better metric, one next
//! hop of several removed, routes the kernel drops silently when an address goes)
//! reaches it while the router runs.

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
    router_in_with(ns, &[], config, handlers)
}

/// [`router_in`] with more options (`-R`).
fn router_in_with(ns: &Netns, extra: &[&str], config: &str, handlers: &[&str]) -> RouterProcess {
    RouterProcess(
        command_in(ns, config, handlers, false)
            .args(extra)
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

/// A router following `ns`'s table with `KernelRoutes(rt, d0 1, d1 2 EXTRA)` into the
/// RadixIPLookup of [`LOOKUP`], and a control socket; the directory holds the socket.
fn follow(
    ns: &Netns,
    extra: &str,
    handlers: &[&str],
) -> (tempfile::TempDir, RouterProcess, Client<UnixStream>) {
    follow_into(ns, LOOKUP, extra, handlers)
}

/// [`follow`] with the lookup element of `lookup` (`rt`).
fn follow_into(
    ns: &Netns,
    lookup: &str,
    extra: &str,
    handlers: &[&str],
) -> (tempfile::TempDir, RouterProcess, Client<UnixStream>) {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("s");
    let config = format!(
        "ControlSocket(unix, {}); k :: KernelRoutes(rt, d0 1, d1 2{}); {}",
        sock.display(),
        extra,
        lookup
    );
    let mut p = router_in(ns, &config, handlers);
    let c = connect_unix(&sock, &mut p);
    (dir, p, c)
}

/// The route table's lines, sorted.
fn table(c: &mut Client<UnixStream>) -> Vec<String> {
    c.routes("rt.table")
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
    let (_dir, mut p, mut c) = follow(&ns, "", &["k.routes"]);

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
            "k :: KernelRoutes: 'c' is a Counter, not a route table that takes routes",
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

/// A namespace with IPv6: d0 on 2001:db8::1/64, d1 on 2001:db8:1::1/64.
fn namespace6() -> Netns {
    let ns = Netns::new("k6");
    // Netns turns IPv6 off; these tests want it, on the interfaces made after this.
    ns.run(|| {
        for f in ["all", "default"] {
            std::fs::write(format!("/proc/sys/net/ipv6/conf/{}/disable_ipv6", f), "0").unwrap();
        }
    });
    for (d, p, a) in [("d0", "p0", "2001:db8::1/64"), ("d1", "p1", "2001:db8:1::1/64")] {
        ns.ip(&["link", "add", d, "type", "veth", "peer", "name", p]);
        ns.ip(&["link", "set", d, "up"]);
        ns.ip(&["link", "set", p, "up"]);
        ns.ip(&["-6", "addr", "add", a, "dev", d, "nodad"]);
    }
    ns
}

const LOOKUP6: &str =
    "InfiniteSource(LIMIT 0) -> rt :: LookupIP6Route; rt[0] -> Discard; rt[1] -> Discard; rt[2] -> Discard;";

/// Waits (bounded) until the router answers `rt.lookup ADDR` with `want`.
fn wait_lookup(c: &mut Client<UnixStream>, addr: &str, want: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let got = c.read(&format!("rt.lookup {}", addr));
        if got == want {
            return;
        }
        assert!(Instant::now() < deadline, "{addr}: {got:?}, expected {want:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn ipv6_siblings_appended_prepended_and_source_routes_as_the_kernel_has_them() {
    let ns = namespace6();
    // In the dump: a multipath route (two sibling routes to the kernel), and a route
    // for packets from one source prefix only.
    ns.ip(&[
        "-6",
        "route",
        "add",
        "2001:db8:300::/48",
        "nexthop",
        "via",
        "2001:db8::2",
        "dev",
        "d0",
        "nexthop",
        "via",
        "2001:db8:1::2",
        "dev",
        "d1",
    ]);
    ns.ip(&[
        "-6",
        "route",
        "add",
        "2001:db8:b00::/48",
        "from",
        "2001:db8:99::/64",
        "via",
        "2001:db8:1::2",
    ]);
    let (_dir, mut p, mut c) = follow_into(&ns, LOOKUP6, "", &[]);
    // The siblings are one multipath route: flows spread over both.
    wait_lookup(&mut c, "2001:db8:300::1", "1 2001:db8::2\n2 2001:db8:1::2");
    // One sibling removed: the other still routes the prefix.
    ns.ip(&[
        "-6",
        "route",
        "del",
        "2001:db8:300::/48",
        "via",
        "2001:db8::2",
        "dev",
        "d0",
    ]);
    wait_lookup(&mut c, "2001:db8:300::1", "2 2001:db8:1::2");
    // The source-specific route is not the router's to take.
    assert_eq!(c.read("rt.lookup 2001:db8:b00::1"), "-1");
    // Siblings made by append (one multipath route, as to the kernel), then the prefix
    // removed: nothing is left.
    ns.ip(&["-6", "route", "add", "2001:db8:400::/48", "via", "2001:db8::2"]);
    ns.ip(&[
        "-6",
        "route",
        "append",
        "2001:db8:400::/48",
        "via",
        "2001:db8:1::2",
    ]);
    wait_lookup(&mut c, "2001:db8:400::1", "1 2001:db8::2\n2 2001:db8:1::2");
    ns.ip(&["-6", "route", "del", "2001:db8:400::/48"]);
    wait_lookup(&mut c, "2001:db8:400::1", "-1");
    // IPv6 puts a prepended route after the others of its metric, and uses the first
    // (routes without a gateway are not siblings).
    ns.ip(&["-6", "route", "add", "2001:db8:700::/48", "dev", "d0"]);
    ns.ip(&["-6", "route", "prepend", "2001:db8:700::/48", "dev", "d1"]);
    ns.ip(&["-6", "route", "add", "2001:db8:701::/48", "dev", "d0"]);
    wait_lookup(&mut c, "2001:db8:701::1", "1");
    assert_eq!(c.read("rt.lookup 2001:db8:700::1"), "1");
    c.send("WRITE stop\n");
    assert!(p.wait_exit(Duration::from_secs(20)).success());
}

#[test]
fn the_kernels_ipv6_table_is_followed_into_lookupip6route() {
    let ns = namespace6();
    ns.ip(&["-6", "route", "add", "2001:db8:100::/48", "via", "2001:db8::2"]);
    ns.ip(&["-6", "route", "add", "default", "via", "2001:db8:1::2"]);
    let (_dir, mut p, mut c) = follow_into(&ns, LOOKUP6, "", &[]);
    wait_table(
        &mut c,
        &[
            "2001:db8:100::/48 2001:db8::2 1",
            "2001:db8:1::/64 :: 2",
            "2001:db8::/64 :: 1",
            "::/0 2001:db8:1::2 2",
        ],
    );
    ns.ip(&[
        "-6",
        "route",
        "replace",
        "2001:db8:100::/48",
        "via",
        "2001:db8:1::2",
    ]);
    wait_table(
        &mut c,
        &[
            "2001:db8:100::/48 2001:db8:1::2 2",
            "2001:db8:1::/64 :: 2",
            "2001:db8::/64 :: 1",
            "::/0 2001:db8:1::2 2",
        ],
    );
    ns.ip(&["-6", "route", "del", "2001:db8:100::/48"]);
    // Two next hops for one prefix: both are installed, as one multipath route; when
    // one goes, the other is left.
    ns.ip(&[
        "-6",
        "route",
        "add",
        "2001:db8:200::/48",
        "nexthop",
        "via",
        "2001:db8::2",
        "nexthop",
        "via",
        "2001:db8:1::2",
    ]);
    let others = [
        "2001:db8:1::/64 :: 2",
        "2001:db8::/64 :: 1",
        "::/0 2001:db8:1::2 2",
    ];
    wait_table(
        &mut c,
        &[&others[..], &["2001:db8:200::/48 2001:db8::2 1 2001:db8:1::2 2"]].concat(),
    );
    ns.ip(&["-6", "route", "del", "2001:db8:200::/48", "via", "2001:db8::2"]);
    wait_table(
        &mut c,
        &[&others[..], &["2001:db8:200::/48 2001:db8:1::2 2"]].concat(),
    );
    c.send("WRITE stop\n");
    assert!(p.wait_exit(Duration::from_secs(20)).success());
}

/// Sends a router advertisement (router lifetime 1800 s, no prefixes) from link-local
/// address `from` out of interface `dev` of `ns`, as a router on that link would.
fn advertise_router(ns: &Netns, dev: &str, from: &str) {
    const SCRIPT: &str = "import socket, struct, sys
dev, src = sys.argv[1], sys.argv[2]
i = socket.if_nametoindex(dev)
s = socket.socket(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_ICMPV6)
s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_MULTICAST_HOPS, 255)
s.bind((src, 0, 0, i))
s.sendto(struct.pack('!BBHBBHII', 134, 0, 0, 64, 0, 1800, 0, 0), ('ff02::1', 0, 0, i))
";
    let o = Command::new("ip")
        .args(["netns", "exec", &ns.name, "python3", "-c", SCRIPT, dev, from])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

#[test]
fn ipv6_routes_the_kernel_does_not_join_stay_single() {
    // Two routers advertise themselves on d0's link: the kernel has a default route
    // through each (`proto ra`), and uses one of them, never both. Two routes of one
    // prefix through nexthop objects are not joined either. The router takes the first
    // of each, as the kernel does, where plain routes with gateways would be one
    // multipath route.
    let ns = namespace6();
    ns.set_proc_sys("net/ipv6/conf/d0/accept_ra", "2");
    for a in ["fe80::a/64", "fe80::b/64"] {
        ns.ip(&["-6", "addr", "add", a, "dev", "p0", "nodad"]);
    }
    advertise_router(&ns, "p0", "fe80::a");
    advertise_router(&ns, "p0", "fe80::b");
    ns.ip(&["nexthop", "add", "id", "1", "via", "2001:db8::2", "dev", "d0"]);
    ns.ip(&["nexthop", "add", "id", "2", "via", "2001:db8:1::2", "dev", "d1"]);
    ns.ip(&["-6", "route", "add", "2001:db8:600::/48", "nhid", "1"]);
    ns.ip(&["-6", "route", "append", "2001:db8:600::/48", "nhid", "2"]);
    let deadline = Instant::now() + Duration::from_secs(10);
    let kernel = loop {
        let o = Command::new("ip")
            .args(["-n", &ns.name, "-6", "route", "show", "default"])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&o.stdout).to_string();
        if text.contains("fe80::a") && text.contains("fe80::b") {
            break text;
        }
        assert!(
            Instant::now() < deadline,
            "the kernel took no routes from the advertisements: {text:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(
        kernel.contains("proto ra") && !kernel.contains("nexthop"),
        "{kernel}"
    );
    let (_dir, mut p, mut c) = follow_into(&ns, LOOKUP6, "", &[]);
    wait_lookup(&mut c, "2600::1", "1 fe80::a");
    wait_lookup(&mut c, "2001:db8:600::1", "1 2001:db8::2");
    // The same two gateways as plain routes: one multipath route.
    ns.ip(&["-6", "route", "add", "2001:db8:700::/48", "via", "2001:db8::2"]);
    ns.ip(&[
        "-6",
        "route",
        "append",
        "2001:db8:700::/48",
        "via",
        "2001:db8:1::2",
    ]);
    wait_lookup(&mut c, "2001:db8:700::1", "1 2001:db8::2\n2 2001:db8:1::2");
    c.send("WRITE stop\n");
    assert!(p.wait_exit(Duration::from_secs(20)).success());
}

/// What the kernel does with a packet to `addr` (`ip route get`), as the router's
/// `rt.lookup` says it (`PORT [GATEWAY]`, `-1` for no route or a dropping one), with
/// d0 as output 1, d1 as 2, and any other interface as `other`.
fn kernel_says(ns: &Netns, addr: &str, other: &str) -> String {
    let o = Command::new("ip")
        .args(["-n", &ns.name, "route", "get", addr])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout).to_string();
    let words: Vec<&str> = text.split_whitespace().collect();
    // (No route, or a dropping one, for which `ip route get` fails.)
    if !o.status.success() {
        return "-1".to_string();
    }
    let after = |k: &str| {
        words
            .iter()
            .position(|w| *w == k)
            .and_then(|i| words.get(i + 1))
            .copied()
    };
    let port = match after("dev") {
        Some("d0") => "1",
        Some("d1") => "2",
        _ => other,
    };
    match after("via") {
        Some(gw) => format!("{} {}", port, gw),
        None => port.to_string(),
    }
}

/// Waits (bounded) until the router answers each address as the kernel does.
fn wait_as_kernel(ns: &Netns, c: &mut Client<UnixStream>, addrs: &[&str], other: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let diff: Vec<(String, String, String)> = addrs
            .iter()
            .map(|a| {
                (
                    a.to_string(),
                    kernel_says(ns, a, other),
                    c.read(&format!("rt.lookup {}", a)),
                )
            })
            .filter(|(_, k, r)| k != r)
            .collect();
        if diff.is_empty() {
            return;
        }
        assert!(Instant::now() < deadline, "(address, kernel, router): {:?}", diff);
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn the_router_chooses_among_routes_as_the_kernel_does() {
    let ns = namespace();
    ns.ip(&["route", "add", "default", "via", "198.19.0.2"]);
    // p0 is not listed: its routes go to BLACKHOLE output 3, as the kernel's dropping ones.
    let (_dir, mut p, mut c) = follow(&ns, ", BLACKHOLE 3", &[]);
    // (Not 172.17.1.1: its route is multipath, and the kernel picks the next hop of a
    // flow by a hash with a seed drawn at boot; the router spreads flows over the same
    // live hops by a hash of its own. It is checked against that below.)
    let probes = ["172.16.1.1", "172.18.1.1", "172.20.1.1", "10.51.1.1"];
    let multipath = "172.17.1.1";

    // Routes of one prefix and metric: the kernel uses the first; append puts one at
    // the end, prepend (and add) in front; deleting one leaves the others.
    ns.ip(&["route", "append", "172.16.0.0/16", "via", "198.18.0.2"]);
    ns.ip(&["route", "append", "172.16.0.0/16", "via", "198.19.0.2"]);
    ns.ip(&["route", "add", "172.18.0.0/16", "via", "198.18.0.2"]);
    ns.ip(&["route", "prepend", "172.18.0.0/16", "via", "198.19.0.2"]);
    ns.ip(&["route", "add", "blackhole", "192.0.2.0/24"]);
    ns.ip(&["route", "add", "10.51.0.0/16", "dev", "p0"]);
    // A multipath route, and a route through a nexthop object.
    ns.ip(&[
        "route",
        "add",
        "172.17.0.0/16",
        "nexthop",
        "via",
        "198.18.0.2",
        "nexthop",
        "via",
        "198.19.0.2",
    ]);
    ns.ip(&["nexthop", "add", "id", "7", "via", "198.18.0.2", "dev", "d0"]);
    ns.ip(&["route", "add", "172.20.0.0/16", "nhid", "7"]);
    wait_as_kernel(&ns, &mut c, &probes, "3");
    assert_eq!(
        c.read(&format!("rt.lookup {}", multipath)),
        "1 198.18.0.2\n2 198.19.0.2"
    );
    assert_eq!(c.read("rt.lookup 172.16.1.1"), "1 198.18.0.2");
    assert_eq!(c.read("rt.lookup 172.18.1.1"), "2 198.19.0.2");
    assert_eq!(c.read("rt.lookup 10.51.1.1"), "3");
    assert_eq!(c.read("rt.lookup 192.0.2.1"), "3");

    // Routes that differ in their protocol only are two routes to the kernel: removing
    // one leaves the other.
    ns.ip(&["route", "add", "10.1.0.0/24", "via", "198.18.0.2", "dev", "d0"]);
    ns.ip(&[
        "route",
        "append",
        "10.1.0.0/24",
        "via",
        "198.18.0.2",
        "dev",
        "d0",
        "proto",
        "static",
    ]);
    ns.ip(&["route", "append", "10.1.0.0/24", "via", "198.19.0.2", "dev", "d1"]);
    ns.ip(&[
        "route",
        "del",
        "10.1.0.0/24",
        "via",
        "198.18.0.2",
        "dev",
        "d0",
        "proto",
        "boot",
    ]);
    wait_as_kernel(&ns, &mut c, &["10.1.0.1"], "3");
    assert_eq!(c.read("rt.lookup 10.1.0.1"), "1 198.18.0.2");

    ns.ip(&["route", "del", "172.16.0.0/16", "via", "198.18.0.2"]);
    ns.ip(&["route", "del", "172.18.0.0/16", "via", "198.19.0.2"]);
    wait_as_kernel(&ns, &mut c, &probes, "3");
    assert_eq!(c.read("rt.lookup 172.16.1.1"), "2 198.19.0.2");

    // Deleting a nexthop object removes its routes without a route notification.
    ns.ip(&["nexthop", "del", "id", "7"]);
    wait_as_kernel(&ns, &mut c, &probes, "3");
    assert_eq!(c.read("rt.lookup 172.20.1.1"), "2 198.19.0.2");

    // d0 down: its next hops are dead; the multipath route goes through d1 alone, the
    // rest through d0 is gone (the default route takes it).
    // With one live next hop left, the kernel's choice is the router's.
    ns.ip(&["link", "set", "d0", "down"]);
    wait_as_kernel(&ns, &mut c, &[&probes[..], &[multipath]].concat(), "3");
    assert_eq!(c.read(&format!("rt.lookup {}", multipath)), "2 198.19.0.2");
    ns.ip(&["link", "set", "d0", "up"]);
    wait_as_kernel(&ns, &mut c, &probes, "3");
    wait_lookup(&mut c, multipath, "1 198.18.0.2\n2 198.19.0.2");

    c.send("WRITE stop\n");
    assert!(p.wait_exit(Duration::from_secs(20)).success());
}

#[test]
fn changes_lost_while_the_router_was_not_reading_are_recovered() {
    let ns = namespace();
    let (dir, mut p, mut c) = follow(&ns, "", &[]);
    // Stopped, the router reads no notification: its socket's buffer overflows and
    // the kernel drops the last ones (ENOBUFS), among them the removal of 10.200/16.
    // SAFETY: kill(2) on our own child, which has not been reaped.
    assert_eq!(unsafe { libc::kill(p.pid(), libc::SIGSTOP) }, 0);
    let batch = dir.path().join("batch");
    // N /24s of FIRST.0.0.0/8 via GW, as `ip -batch` lines.
    let adds = |first: u32, n: u32, gw: &str| -> String {
        (0..n)
            .map(|i| format!("route add {first}.{}.{}.0/24 via {gw}\n", i >> 8, i & 255))
            .collect()
    };
    let mut text = adds(11, 30_000, "198.18.0.2");
    text.push_str("route add 10.200.0.0/16 via 198.18.0.2\n");
    text.push_str(&adds(12, 2_000, "198.19.0.2"));
    text.push_str("route del 10.200.0.0/16\n");
    std::fs::write(&batch, text).unwrap();
    ns.ip(&["-batch", batch.to_str().unwrap()]);
    // SAFETY: as above.
    assert_eq!(unsafe { libc::kill(p.pid(), libc::SIGCONT) }, 0);
    let deadline = Instant::now() + Duration::from_secs(30);
    while c.read("k.routes") != "32002" {
        assert!(Instant::now() < deadline, "routes {}", c.read("k.routes"));
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(c.read("rt.lookup 10.200.0.1"), "-1");
    assert!(
        c.read("k.resyncs").parse::<u64>().unwrap() >= 2,
        "no resynchronisation: the test lost nothing"
    );
    c.send("WRITE stop\n");
    assert!(p.wait_exit(Duration::from_secs(20)).success());
}

#[test]
fn a_route_the_lookup_element_has_already_is_replaced_and_one_removed_by_hand_is_no_obstacle() {
    let ns = namespace();
    // DirectIPLookup does not replace a route with `set`: its configured route for
    // d0's network gives way to the kernel's all the same.
    let config = "k :: KernelRoutes(rt, d0 1, d1 2); \
        InfiniteSource(LIMIT 0) -> rt :: DirectIPLookup(198.18.0.0/24 0); rt[0] -> Discard; rt[1] -> Discard; rt[2] -> Discard;";
    let out = configure_in(&ns, config, &["rt.table"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        "198.18.0.0/24\t\t0.0.0.0\t\t1\n198.19.0.0/24\t\t0.0.0.0\t\t2\n"
    );

    // A route removed by hand, then by the kernel: the removal that fails does not
    // hold up the changes after it.
    ns.ip(&["route", "add", "172.17.0.0/16", "via", "198.18.0.2"]);
    let (_dir, mut p, mut c) = follow(&ns, "", &[]);
    assert_eq!(
        c.status("WRITE rt.remove 172.17.0.0/16\n"),
        "200 Write handler 'rt.remove' OK\r\n"
    );
    ns.ip(&["route", "del", "172.17.0.0/16"]);
    ns.ip(&["route", "add", "192.168.6.0/24", "dev", "d1"]);
    wait_table(
        &mut c,
        &["192.168.6.0/24 - 2", "198.18.0.0/24 - 1", "198.19.0.0/24 - 2"],
    );
    // (The count is stored after the table's write: waited for too.)
    let deadline = Instant::now() + Duration::from_secs(10);
    while c.read("k.routes") != "3" {
        assert!(Instant::now() < deadline, "k.routes {}", c.read("k.routes"));
        std::thread::sleep(Duration::from_millis(20));
    }
    c.send("WRITE stop\n");
    assert!(p.wait_exit(Duration::from_secs(20)).success());
}

#[test]
fn multipath_weights_are_followed() {
    let ns = namespace();
    let (_dir, mut p, mut c) = follow(&ns, "", &[]);
    let hop = |gw: &str, dev: &str, weight: &str| {
        ["nexthop", "via", gw, "dev", dev, "weight", weight]
            .map(String::from)
            .to_vec()
    };
    let add = |prefix: &str, hops: Vec<Vec<String>>| {
        let mut args = vec!["route".to_string(), "add".to_string(), prefix.to_string()];
        args.extend(hops.into_iter().flatten());
        ns.ip(&args.iter().map(String::as_str).collect::<Vec<_>>());
    };
    add(
        "172.21.0.0/16",
        vec![hop("198.18.0.2", "d0", "3"), hop("198.19.0.2", "d1", "1")],
    );
    // Equal weights are no weights; others in lowest terms.
    add(
        "172.22.0.0/16",
        vec![hop("198.18.0.2", "d0", "2"), hop("198.19.0.2", "d1", "2")],
    );
    add(
        "172.23.0.0/16",
        vec![hop("198.18.0.2", "d0", "4"), hop("198.19.0.2", "d1", "6")],
    );
    wait_lookup(&mut c, "172.21.1.1", "1 198.18.0.2 weight 3\n2 198.19.0.2");
    wait_lookup(&mut c, "172.22.1.1", "1 198.18.0.2\n2 198.19.0.2");
    wait_lookup(
        &mut c,
        "172.23.1.1",
        "1 198.18.0.2 weight 2\n2 198.19.0.2 weight 3",
    );
    // A hop listed twice: its weights add up (400:200, so 2:1), as the kernel's shares.
    add(
        "172.25.0.0/16",
        vec![
            hop("198.18.0.2", "d0", "200"),
            hop("198.18.0.2", "d0", "200"),
            hop("198.19.0.2", "d1", "200"),
        ],
    );
    wait_lookup(&mut c, "172.25.1.1", "1 198.18.0.2 weight 2\n2 198.19.0.2");
    // Two routes that differ in their weights alone are two routes to the kernel: the
    // first is used; when it goes, the second.
    add(
        "172.24.0.0/16",
        vec![hop("198.18.0.2", "d0", "1"), hop("198.19.0.2", "d1", "1")],
    );
    let mut append = vec!["route", "append", "172.24.0.0/16"];
    let second = [hop("198.18.0.2", "d0", "3"), hop("198.19.0.2", "d1", "1")].concat();
    append.extend(second.iter().map(String::as_str));
    ns.ip(&append);
    ns.ip(&["route", "add", "172.26.0.0/16", "via", "198.18.0.2"]);
    wait_lookup(&mut c, "172.26.1.1", "1 198.18.0.2");
    assert_eq!(c.read("rt.lookup 172.24.1.1"), "1 198.18.0.2\n2 198.19.0.2");
    let mut del = vec!["route", "del", "172.24.0.0/16"];
    let first = [hop("198.18.0.2", "d0", "1"), hop("198.19.0.2", "d1", "1")].concat();
    del.extend(first.iter().map(String::as_str));
    ns.ip(&del);
    wait_lookup(&mut c, "172.24.1.1", "1 198.18.0.2 weight 3\n2 198.19.0.2");
    c.send("WRITE stop\n");
    assert!(p.wait_exit(Duration::from_secs(20)).success());
}

#[test]
fn ipv6_multipath_weights_are_followed() {
    let ns = namespace6();
    ns.ip(&[
        "-6",
        "route",
        "add",
        "2001:db8:800::/48",
        "nexthop",
        "via",
        "2001:db8::2",
        "dev",
        "d0",
        "weight",
        "5",
        "nexthop",
        "via",
        "2001:db8:1::2",
        "dev",
        "d1",
    ]);
    let (_dir, mut p, mut c) = follow_into(&ns, LOOKUP6, "", &[]);
    wait_lookup(
        &mut c,
        "2001:db8:800::1",
        "1 2001:db8::2 weight 5\n2 2001:db8:1::2",
    );
    // A lone weighted route: its message says no weight (one hop); when a sibling
    // comes, the kernel's message gives it: one route still, with its weight, and
    // nothing else on the way (the weight had been counted twice, 4:1, for a second);
    // and a removal leaves nothing.
    let route = |verb: &str, gw: &str, dev: &str, weight: &str| {
        ns.ip(&[
            "-6",
            "route",
            verb,
            "2001:db8:900::/48",
            "nexthop",
            "via",
            gw,
            "dev",
            dev,
            "weight",
            weight,
        ]);
    };
    route("add", "2001:db8::2", "d0", "3");
    wait_lookup(&mut c, "2001:db8:900::1", "1 2001:db8::2");
    route("append", "2001:db8:1::2", "d1", "1");
    let want = "1 2001:db8::2 weight 3\n2 2001:db8:1::2";
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let got = c.read("rt.lookup 2001:db8:900::1");
        assert!(got == want || got == "1 2001:db8::2", "{got:?}");
        if got == want {
            break;
        }
        assert!(Instant::now() < deadline, "{got:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
    // (A wrong count would show by now, as it had.)
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(c.read("rt.lookup 2001:db8:900::1"), want);
    ns.ip(&["-6", "route", "del", "2001:db8:900::/48"]);
    wait_lookup(&mut c, "2001:db8:900::1", "-1");
    c.send("WRITE stop\n");
    assert!(p.wait_exit(Duration::from_secs(20)).success());
}

/// With `run -R`, a configuration written to `hotconfig` gets the kernel's table before
/// the write is answered, and its KernelRoutes follows the kernel from then on.
#[test]
fn a_configuration_that_takes_over_starts_with_the_kernels_table_and_follows_it() {
    let ns = namespace();
    ns.ip(&["route", "add", "192.0.2.0/24", "via", "198.18.0.2"]);
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("s");
    let config = |lookup: &str, outputs: &str| {
        format!(
            "ControlSocket(unix, {}); k :: KernelRoutes({lookup}, {outputs}); \
             InfiniteSource(LIMIT 0) -> {lookup} :: RadixIPLookup; \
             {lookup}[0] -> Discard; {lookup}[1] -> Discard; {lookup}[2] -> Discard;",
            sock.display()
        )
    };
    let mut p = router_in_with(&ns, &["-R"], &config("rt", "d0 1, d1 2"), &[]);
    let mut c = connect_unix(&sock, &mut p);
    assert_eq!(
        c.routes("rt.table"),
        [
            "192.0.2.0/24 198.18.0.2 1",
            "198.18.0.0/24 - 1",
            "198.19.0.0/24 - 2"
        ]
    );

    // The interfaces' outputs swapped, in a lookup element of another name.
    let swapped = config("other", "d0 2, d1 1");
    assert_eq!(c.hotconfig(&swapped), ["200 Write handler 'hotconfig' OK\r\n"]);
    assert_eq!(
        c.routes("other.table"),
        [
            "192.0.2.0/24 198.18.0.2 2",
            "198.18.0.0/24 - 2",
            "198.19.0.0/24 - 1"
        ]
    );
    ns.ip(&["route", "add", "203.0.113.0/24", "via", "198.19.0.2"]);
    let deadline = Instant::now() + Duration::from_secs(10);
    while !c
        .routes("other.table")
        .contains(&"203.0.113.0/24 198.19.0.2 1".to_string())
    {
        assert!(Instant::now() < deadline, "{:?}", c.routes("other.table"));
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(c.status("WRITE stop\n"), "200 Write handler 'stop' OK\r\n");
    assert!(p.wait_exit(Duration::from_secs(10)).success());
}
