//! Two hosts, each in a namespace of its own on a veth link to a router namespace
//! that runs a shipped configuration with `brickroute run` (the Click IP routers,
//! `conf/iprouter.click` and `conf/iprouter6.click`), and iputils' `ping` run in the
//! hosts as the judge. Include with `#[path]` beside `netns.rs` and
//! `router_process.rs` (as `netns` and `router_process`).
//!
//! h0: e0 -- r0 [router] r1 -- e1 :h1

#![allow(dead_code)]

use crate::netns::{veth, Netns};
use crate::router_process::RouterProcess;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

pub const R0_MAC: &str = "02:00:00:00:01:01";
pub const E0_MAC: &str = "02:00:00:00:01:02";
pub const R1_MAC: &str = "02:00:00:00:02:01";
pub const E1_MAC: &str = "02:00:00:00:02:02";

/// `ping FLAGS -n ARGS` in `ns` (FLAGS: `-4` or `-6`): its exit success and standard
/// output.
pub fn ping(ns: &Netns, family: &str, args: &[&str]) -> (bool, String) {
    let o = Command::new("ip")
        .args(["netns", "exec", &ns.name, "ping", family, "-n"])
        .args(args)
        .output()
        .expect("run ping (iputils-ping, installed by scripts/install-deps.sh)");
    (
        o.status.success(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
    )
}

/// An IPv4 host of the routers' tests: `e0` is 10.0.1.2/24 and `e1` 10.0.2.2/24, each
/// with its default route through the router's address on its network (`.1`).
pub fn ipv4_host(ns: &Netns, dev: &str) {
    let (addr, gateway) = if dev == "e0" {
        ("10.0.1.2/24", "10.0.1.1")
    } else {
        ("10.0.2.2/24", "10.0.2.1")
    };
    ns.ip(&["addr", "add", addr, "dev", dev]);
    ns.ip(&["route", "add", "default", "via", gateway]);
}

/// An IPv6 host of the routers' tests: IPv6 on for `dev` only (Netns::new turns it
/// off), no duplicate address detection and no router solicitations; `e0` is
/// 2001:db8:1::2/64 and `e1` 2001:db8:2::2/64, each with its default route through the
/// router's address on its network (`::1`).
pub fn ipv6_host(ns: &Netns, dev: &str) {
    let (addr, gateway) = if dev == "e0" {
        ("2001:db8:1::2/64", "2001:db8:1::1")
    } else {
        ("2001:db8:2::2/64", "2001:db8:2::1")
    };
    for (key, value) in [
        ("accept_dad", "0"),
        ("router_solicitations", "0"),
        ("accept_ra", "0"),
        ("disable_ipv6", "0"),
    ] {
        ns.set_proc_sys(&format!("net/ipv6/conf/{dev}/{key}"), value);
    }
    ns.ip(&["-6", "addr", "add", addr, "dev", dev, "nodad"]);
    ns.ip(&["-6", "route", "add", "default", "via", gateway, "dev", dev]);
}

/// The `NAME=value` arguments that give an IPv4 router configuration of Click's shape
/// (conf/iprouter.click, conf/nat.click) the testbed: interfaces r0 and r1 with their
/// MACs, the router's addresses 10.0.1.1 and 10.0.2.1 on 10.0.1.0/24 and 10.0.2.0/24.
pub fn ipv4_router_defines() -> Vec<String> {
    [
        "DEV0=r0".to_string(),
        format!("MAC0={R0_MAC}"),
        "IP0=10.0.1.1".into(),
        "NET0=10.0.1.0/24".into(),
        "BCAST0=10.0.1.255".into(),
        "DEV1=r1".into(),
        format!("MAC1={R1_MAC}"),
        "IP1=10.0.2.1".into(),
        "NET1=10.0.2.0/24".into(),
        "BCAST1=10.0.2.255".into(),
    ]
    .to_vec()
}

/// The `NAME=value` arguments that give an IPv6 router configuration of Click's shape
/// (conf/iprouter6.click) the testbed: interfaces r0 and r1 with their MACs, the
/// router's addresses 2001:db8:1::1 and 2001:db8:2::1 on their /64s.
pub fn ipv6_router_defines() -> Vec<String> {
    [
        "DEV0=r0".to_string(),
        format!("MAC0={R0_MAC}"),
        "IP0=2001:db8:1::1".into(),
        "NET0=2001:db8:1::/64".into(),
        "DEV1=r1".into(),
        format!("MAC1={R1_MAC}"),
        "IP1=2001:db8:2::1".into(),
        "NET1=2001:db8:2::/64".into(),
    ]
    .to_vec()
}

/// The hosts and the router.
pub struct TwoHosts {
    pub h0: Netns,
    pub h1: Netns,
    /// The router's namespace.
    pub r: Netns,
    router: RouterProcess,
}

impl TwoHosts {
    /// Builds the namespaces and links, gives each host its addresses and routes with
    /// `host(ns, dev)` (`h0` with `e0`, `h1` with `e1`), starts `brickroute run
    /// CONF ARGS` in the router's namespace (the configuration's path from the
    /// checkout's root), and waits (20 s at most) until `ready(h0)` says traffic passes.
    pub fn up(
        conf: &str,
        args: &[&str],
        host: impl Fn(&Netns, &str),
        ready: impl Fn(&Netns) -> bool,
    ) -> TwoHosts {
        let h0 = Netns::new("h0");
        let r = Netns::new("r");
        let h1 = Netns::new("h1");
        veth(&h0, "e0", E0_MAC, &r, "r0", R0_MAC);
        veth(&r, "r1", R1_MAC, &h1, "e1", E1_MAC);
        host(&h0, "e0");
        host(&h1, "e1");
        let conf = crate::common::root().join(conf);
        let mut all = vec![conf.to_str().unwrap()];
        all.extend_from_slice(args);
        let router = RouterProcess(
            r.brickroute_run(&all)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("start brickroute"),
        );
        let mut t = TwoHosts { h0, h1, r, router };
        // The router's sockets may open after the hosts' first ARP requests or
        // solicitations; the hosts ask again.
        let deadline = Instant::now() + Duration::from_secs(20);
        while !ready(&t.h0) {
            if let Some(s) = t.router.exited() {
                let (_, err) = t.router.output();
                panic!("router exited ({s}): {err}");
            }
            assert!(Instant::now() < deadline, "no traffic ever passed the router");
        }
        t
    }

    /// Stops the router and returns what it printed (the handlers asked for).
    pub fn stop(&mut self) -> (String, String) {
        // SAFETY: kill(2) on our child's pid.
        unsafe { libc::kill(self.router.pid(), libc::SIGTERM) };
        self.router.wait_exit(Duration::from_secs(10));
        self.router.output()
    }
}
