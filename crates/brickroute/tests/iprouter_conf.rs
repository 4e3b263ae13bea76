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
#[path = "common/two_hosts.rs"]
mod two_hosts;

use netns::Netns;
use std::time::{Duration, Instant};
use two_hosts::{TwoHosts, E0_MAC, E1_MAC, R0_MAC};

/// `ping ARGS` (IPv4) in `ns`: its exit success and standard output.
fn ping(ns: &Netns, args: &[&str]) -> (bool, String) {
    two_hosts::ping(ns, "-4", args)
}

/// The hosts (addresses, default routes through the router) and the router running
/// the shipped configuration, ready once it answers a ping to its near address.
fn testbed() -> TwoHosts {
    TwoHosts::up(
        "conf/iprouter.click",
        &two_hosts::ipv4_router_defines()
            .iter()
            .map(String::as_str)
            .chain([
                // A worker for each of the veths' two receive queues: AF_XDP reads one queue
                // a worker, so the interfaces open with the default METHOD, XDP (and with
                // one worker would fall back to AF_PACKET).
                "--threads",
                "2",
                "-h",
                "arpq0.table",
                "-h",
                "arpq1.table",
                "-h",
                "tohost.count",
                "-h",
                "bcast.count",
            ])
            .collect::<Vec<_>>(),
        two_hosts::ipv4_host,
        |h0| ping(h0, &["-c", "1", "-W", "1", "10.0.1.1"]).0,
    )
}

#[test]
fn click_ip_router_forwards_answers_and_resolves() {
    let mut t = testbed();

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
    // Through AF_XDP: its program handed the router the ARP it answers and asks.
    assert!(err.contains("r0 (XDP") && err.contains("r1 (XDP"), "{err}");
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

#[test]
fn an_address_given_to_an_interface_while_the_router_runs_reaches_the_kernel() {
    let mut t = testbed();
    // 10.0.1.100 is not the router's (its ARPResponder answers for 10.0.1.1 only):
    // nothing answers a ping to it.
    let (ok, out) = ping(&t.h0, &["-c", "1", "-W", "1", "10.0.1.100"]);
    assert!(!ok && out.contains("0 received"), "{out}");

    // Given to r0 in the router's kernel while the router runs, it is the kernel's:
    // the XDP program hands the kernel the ARP for it and the ping, once the router
    // has re-read r0's addresses.
    t.r.ip(&["addr", "add", "10.0.1.100/24", "dev", "r0"]);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (ok, out) = ping(&t.h0, &["-c", "1", "-W", "1", "10.0.1.100"]);
        if ok {
            assert!(out.contains("1 received"), "{out}");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the kernel never answered for 10.0.1.100: {out}"
        );
    }

    // Taken away again, frames to it are the router's: h0, told that 10.0.1.100 is at
    // the router's Ethernet address, sends it a ping, which the router would send back
    // out the interface it came in by, so it tells h0 so (an ICMP redirect from
    // 10.0.1.1; the kernel, were the frame still handed to it, would say nothing).
    t.r.ip(&["addr", "del", "10.0.1.100/24", "dev", "r0"]);
    t.h0.ip(&[
        "neigh",
        "replace",
        "10.0.1.100",
        "lladdr",
        R0_MAC,
        "dev",
        "e0",
        "nud",
        "permanent",
    ]);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (_, out) = ping(&t.h0, &["-c", "1", "-W", "1", "10.0.1.100"]);
        if out.contains("From 10.0.1.1: icmp_seq=1 Redirect Host(New nexthop: 10.0.1.100)") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no redirect from the router for 10.0.1.100: {out}"
        );
    }
    // The router's own address still answers.
    let (ok, out) = ping(&t.h0, &["-c", "1", "-W", "2", "10.0.1.1"]);
    assert!(ok, "{out}");
    t.stop();
}
