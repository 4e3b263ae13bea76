//! The shipped `conf/iprouter.click` (Click's IP router, with its own ARP) routing
//! between two hosts in network namespaces (root needed): the hosts' kernels and
//! iputils' `ping` are the independent judges. The router's interfaces have no
//! addresses in its kernel, so every ARP answer, echo reply and ICMP error the hosts
//! see comes from brickroute.
//!
//! h0: e0 10.0.1.2/24 -- r0 [router: 10.0.1.1 | 10.0.2.1] r1 -- e1 10.0.2.2/24 :h1

mod common;
#[path = "common/netns.rs"]
mod netns;
#[path = "common/router_process.rs"]
mod router_process;

use netns::{veth, Netns};
use router_process::RouterProcess;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const R0_MAC: &str = "02:00:00:00:01:01";
const E0_MAC: &str = "02:00:00:00:01:02";
const R1_MAC: &str = "02:00:00:00:02:01";
const E1_MAC: &str = "02:00:00:00:02:02";

/// `ping ARGS` in `ns`: its exit success and standard output.
fn ping(ns: &Netns, args: &[&str]) -> (bool, String) {
    let o = Command::new("ip")
        .args(["netns", "exec", &ns.name, "ping", "-n"])
        .args(args)
        .output()
        .expect("run ping (iputils-ping, installed by scripts/install-deps.sh)");
    (
        o.status.success(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
    )
}

/// The hosts' side of the testbed and the router running the shipped configuration.
struct Testbed {
    h0: Netns,
    h1: Netns,
    /// The router's namespace, kept until the test ends.
    _r: Netns,
    router: RouterProcess,
}

impl Testbed {
    fn up() -> Testbed {
        let h0 = Netns::new("h0");
        let r = Netns::new("r");
        let h1 = Netns::new("h1");
        veth(&h0, "e0", E0_MAC, &r, "r0", R0_MAC);
        veth(&r, "r1", R1_MAC, &h1, "e1", E1_MAC);
        h0.ip(&["addr", "add", "10.0.1.2/24", "dev", "e0"]);
        h0.ip(&["route", "add", "default", "via", "10.0.1.1"]);
        h1.ip(&["addr", "add", "10.0.2.2/24", "dev", "e1"]);
        h1.ip(&["route", "add", "default", "via", "10.0.2.1"]);
        let conf = common::root().join("conf/iprouter.click");
        let router = RouterProcess(
            r.brickroute_run(&[
                conf.to_str().unwrap(),
                "DEV0=r0",
                &format!("MAC0={R0_MAC}"),
                "IP0=10.0.1.1",
                "NET0=10.0.1.0/24",
                "BCAST0=10.0.1.255",
                "DEV1=r1",
                &format!("MAC1={R1_MAC}"),
                "IP1=10.0.2.1",
                "NET1=10.0.2.0/24",
                "BCAST1=10.0.2.255",
                "-h",
                "arpq0.table",
                "-h",
                "arpq1.table",
                "-h",
                "tohost.count",
                "-h",
                "bcast.count",
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start brickroute"),
        );
        let mut t = Testbed {
            h0,
            h1,
            _r: r,
            router,
        };
        // Ready once the router answers a ping to its near address (its sockets may
        // open after the first ARP request; the host asks again).
        let deadline = Instant::now() + Duration::from_secs(20);
        while !ping(&t.h0, &["-c", "1", "-W", "1", "10.0.1.1"]).0 {
            if let Some(s) = t.router.exited() {
                let (_, err) = t.router.output();
                panic!("router exited ({s}): {err}");
            }
            assert!(Instant::now() < deadline, "the router never answered a ping");
        }
        t
    }

    /// Stops the router and returns what it printed (the handlers asked for).
    fn stop(&mut self) -> (String, String) {
        // SAFETY: kill(2) on our child's pid.
        unsafe { libc::kill(self.router.pid(), libc::SIGTERM) };
        self.router.wait_exit(Duration::from_secs(10));
        self.router.output()
    }
}

#[test]
fn click_ip_router_forwards_answers_and_resolves() {
    let mut t = Testbed::up();

    // Pings to both of the router's addresses, and through it: 3 of 3 each, the
    // replies from h1 one hop shorter (Linux's TTL 64, less the router's 1).
    let (ok, out) = ping(&t.h0, &["-c", "3", "-i", "0.2", "-W", "2", "10.0.1.1"]);
    assert!(ok && out.contains("3 received"), "{out}");
    let (ok, out) = ping(&t.h0, &["-c", "3", "-i", "0.2", "-W", "2", "10.0.2.1"]);
    assert!(ok && out.contains("3 received"), "{out}");
    let (ok, out) = ping(&t.h0, &["-c", "3", "-i", "0.2", "-W", "2", "10.0.2.2"]);
    assert!(ok && out.contains("3 received"), "{out}");
    assert!(out.contains("ttl=63"), "{out}");
    let (ok, out) = ping(&t.h1, &["-c", "3", "-i", "0.2", "-W", "2", "10.0.1.2"]);
    assert!(ok && out.contains("3 received"), "{out}");

    // TTL 1: time exceeded, from the address of the interface it goes back by (FixIPSrc
    // replaces the address ICMPError gave it, that of the interface toward h1).
    let (_, out) = ping(&t.h0, &["-c", "1", "-W", "2", "-t", "1", "10.0.2.2"]);
    assert!(
        out.contains("From 10.0.1.1 icmp_seq=1 Time to live exceeded"),
        "{out}"
    );

    // Record route: each router records the address of the interface a packet leaves
    // by (RFC 791), so, as a Linux router gives it: h0, the router toward h1, h1 (as
    // the reply's sender and then again), the router toward h0, h0.
    let (ok, out) = ping(&t.h0, &["-c", "1", "-W", "2", "-R", "10.0.2.2"]);
    assert!(ok, "{out}");
    let rr: Vec<&str> = out
        .split("RR:")
        .nth(1)
        .unwrap_or_else(|| panic!("no route recorded: {out}"))
        .split_whitespace()
        .take_while(|w| w.starts_with("10."))
        .collect();
    assert_eq!(
        rr,
        ["10.0.1.2", "10.0.2.1", "10.0.2.2", "10.0.2.2", "10.0.1.1", "10.0.1.2"],
        "{out}"
    );

    // A directed broadcast to h1's network: neither forwarded nor answered (a reply
    // would come from the broadcast address).
    let (ok, out) = ping(&t.h0, &["-c", "1", "-W", "1", "10.0.2.255"]);
    assert!(!ok && out.contains("0 received"), "{out}");

    // A host on a network the router has no route to: nothing comes back.
    let (ok, out) = ping(&t.h0, &["-c", "1", "-W", "1", "192.0.2.1"]);
    assert!(!ok && out.contains("0 received"), "{out}");

    let (out, err) = t.stop();
    assert!(out.contains("bcast.count:\n1\n"), "{out}\n{err}");
    // Each ARPQuerier learnt its host's address from the ARP reply to its request.
    assert!(
        out.contains("10.0.1.2") && out.to_ascii_lowercase().contains(E0_MAC),
        "{out}\n{err}"
    );
    assert!(
        out.contains("10.0.2.2") && out.to_ascii_lowercase().contains(E1_MAC),
        "{out}\n{err}"
    );
    drop(t);
}
