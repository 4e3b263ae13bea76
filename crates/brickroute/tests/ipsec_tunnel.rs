//! Two brickroute gateways joined by an ESP tunnel (ESPEncap one way, ESPDecap the
//! other, two associations), each between its LAN host and the WAN link, in network
//! namespaces (root needed): iputils' `ping` from one host to the other is the judge,
//! and the gateways' counters say the traffic went through the tunnel. The gateways'
//! interfaces have no addresses in their kernels: every frame between the two sites is
//! the gateways' own.
//!
//! ha: ea 10.1.0.2/24 -- la [gateway A] wa -- wb [gateway B] lb -- eb 10.2.0.2/24 :hb
//!                      WAN 192.0.2.1        192.0.2.2
//!                   or WAN 2001:db8:ffff::1 2001:db8:ffff::2 (an IPv6 tunnel)

mod common;
#[path = "common/netns.rs"]
mod netns;
#[path = "common/router_process.rs"]
mod router_process;
#[path = "common/two_hosts.rs"]
mod two_hosts;

use netns::{veth, Netns};
use router_process::RouterProcess;
use std::process::Stdio;
use std::time::{Duration, Instant};

const KEY_AB: &str = "0x000102030405060708090a0b0c0d0e0fdeadbeef";
const KEY_BA: &str = "0x101112131415161718191a1b1c1d1e1f202122232425262728292a2b2c2d2e2fcafebabe";

/// One gateway's side of the tunnel.
struct Site {
    /// Its LAN, as `10.X.0.0/24`, and the other site's.
    lan: &'static str,
    remote: &'static str,
    /// Its own WAN address and the peer's.
    wan: &'static str,
    peer: &'static str,
    /// MACs: its LAN interface, its host, its WAN interface, the peer's WAN interface.
    lan_mac: &'static str,
    host_mac: &'static str,
    wan_mac: &'static str,
    peer_mac: &'static str,
    /// Outgoing association (SPI, key), incoming association.
    out: (u32, &'static str),
    inc: (u32, &'static str),
}

const A: Site = Site {
    lan: "10.1.0.0/24",
    remote: "10.2.0.0/24",
    wan: "192.0.2.1",
    peer: "192.0.2.2",
    lan_mac: "02:00:00:0a:00:01",
    host_mac: "02:00:00:0a:00:02",
    wan_mac: "02:00:00:0a:01:01",
    peer_mac: "02:00:00:0b:01:01",
    out: (0x1001, KEY_AB),
    inc: (0x2002, KEY_BA),
};

const B: Site = Site {
    lan: "10.2.0.0/24",
    remote: "10.1.0.0/24",
    wan: "192.0.2.2",
    peer: "192.0.2.1",
    lan_mac: "02:00:00:0b:00:01",
    host_mac: "02:00:00:0b:00:02",
    wan_mac: "02:00:00:0b:01:01",
    peer_mac: "02:00:00:0a:01:01",
    out: (0x2002, KEY_BA),
    inc: (0x1001, KEY_AB),
};

/// The gateway's configuration: LAN packets for the remote site into the tunnel, ESP
/// from the peer out of it, and both routed by one table. With IPv6 WAN addresses the
/// tunnel's packets are IPv6 (next header 50, right after the fixed header).
fn gateway(s: &Site, lan_dev: &str, wan_dev: &str) -> String {
    let (wan_in, ethertype) = if s.wan.contains(':') {
        (
            "Classifier(12/86dd 20/32) -> Strip(14) -> CheckIP6Header".to_string(),
            "0x86dd",
        )
    } else {
        (
            format!(
                "Classifier(12/0800) -> Strip(14) -> CheckIPHeader -> IPClassifier(ip proto 50 and dst host {})",
                s.wan
            ),
            "0x0800",
        )
    };
    format!(
        "rt :: RadixIPLookup({remote} 0, {lan} 1);
         FromDevice({lan_dev}) -> Classifier(12/0800) -> Strip(14) -> CheckIPHeader -> rt;
         FromDevice({wan_dev}) -> {wan_in}
           -> dec :: ESPDecap({in_spi}, {in_key}) -> CheckIPHeader -> rt;
         rt[0] -> DecIPTTL -> enc :: ESPEncap({out_spi}, {out_key}, {wan}, {peer})
           -> EtherEncap({ethertype}, {wan_mac}, {peer_mac}) -> ToDevice({wan_dev});
         rt[1] -> DecIPTTL -> EtherEncap(0x0800, {lan_mac}, {host_mac}) -> ToDevice({lan_dev});",
        remote = s.remote,
        lan = s.lan,
        wan = s.wan,
        peer = s.peer,
        in_spi = s.inc.0,
        in_key = s.inc.1,
        out_spi = s.out.0,
        out_key = s.out.1,
        wan_mac = s.wan_mac,
        peer_mac = s.peer_mac,
        lan_mac = s.lan_mac,
        host_mac = s.host_mac,
    )
}

fn start(ns: &Netns, config: &str) -> RouterProcess {
    RouterProcess(
        ns.brickroute_run(&[
            "--no-summary",
            "-e",
            config,
            "-h",
            "enc.seq",
            "-h",
            "dec.seq",
            "-h",
            "dec.auth_failures",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start brickroute"),
    )
}

/// Stops a gateway; its handlers' values (`enc.seq`, `dec.seq`, `dec.auth_failures`).
fn stop(g: &mut RouterProcess) -> Vec<u64> {
    // SAFETY: kill(2) on our child's pid.
    unsafe { libc::kill(g.pid(), libc::SIGTERM) };
    assert!(g.wait_exit(Duration::from_secs(10)).success());
    let (out, err) = g.output();
    let v: Vec<u64> = out
        .split("\n\n")
        .filter_map(|block| block.lines().nth(1)?.parse().ok())
        .collect();
    assert_eq!(v.len(), 3, "{out}\n{err}");
    v
}

#[test]
fn hosts_on_two_sites_ping_each_other_through_the_tunnel() {
    through_the_tunnel(&A, &B);
}

#[test]
fn the_tunnel_runs_over_ipv6_too() {
    let a6 = Site {
        wan: "2001:db8:ffff::1",
        peer: "2001:db8:ffff::2",
        ..A
    };
    let b6 = Site {
        wan: "2001:db8:ffff::2",
        peer: "2001:db8:ffff::1",
        ..B
    };
    through_the_tunnel(&a6, &b6);
}

fn through_the_tunnel(sa: &Site, sb: &Site) {
    let ha = Netns::new("ha");
    let ga = Netns::new("ga");
    let gb = Netns::new("gb");
    let hb = Netns::new("hb");
    veth(&ha, "ea", sa.host_mac, &ga, "la", sa.lan_mac);
    veth(&ga, "wa", sa.wan_mac, &gb, "wb", sb.wan_mac);
    veth(&gb, "lb", sb.lan_mac, &hb, "eb", sb.host_mac);
    // The hosts: an address, the gateway as default route, and its MAC (the gateways
    // answer no ARP in this configuration).
    for (h, dev, addr, gw, mac) in [
        (&ha, "ea", "10.1.0.2/24", "10.1.0.1", sa.lan_mac),
        (&hb, "eb", "10.2.0.2/24", "10.2.0.1", sb.lan_mac),
    ] {
        h.ip(&["addr", "add", addr, "dev", dev]);
        h.ip(&["route", "add", "default", "via", gw]);
        h.ip(&["neigh", "add", gw, "lladdr", mac, "dev", dev]);
    }
    let mut a = start(&ga, &gateway(sa, "la", "wa"));
    let mut b = start(&gb, &gateway(sb, "lb", "wb"));

    // The gateways' sockets may open after the first pings: ping until one returns.
    let deadline = Instant::now() + Duration::from_secs(20);
    while !two_hosts::ping(&ha, "-4", &["-c", "1", "-W", "1", "10.2.0.2"]).0 {
        for g in [&mut a, &mut b] {
            if let Some(s) = g.exited() {
                panic!("a gateway exited ({s}): {:?}", g.output());
            }
        }
        assert!(Instant::now() < deadline, "no ping ever crossed the tunnel");
    }
    let (ok, out) = two_hosts::ping(&hb, "-4", &["-c", "5", "-i", "0.2", "-W", "2", "10.1.0.2"]);
    assert!(ok, "{out}");
    assert!(out.contains("5 packets transmitted, 5 received"), "{out}");
    // The replies crossed the tunnel with TTL 64 less one for each gateway.
    assert!(out.contains("ttl=62"), "{out}");

    // Each request and each reply went through the tunnel once: A sealed what B
    // opened and the other way round, nothing failed authentication.
    let (va, vb) = (stop(&mut a), stop(&mut b));
    let (a_sent, a_opened, b_sent, b_opened) = (va[0], va[1], vb[0], vb[1]);
    assert!(a_sent >= 6 && b_sent >= 6, "{va:?} {vb:?}");
    assert_eq!((va[2], vb[2]), (0, 0));
    // (A packet may be lost on a link while a gateway starts: at most what was sent.)
    assert!(b_opened <= a_sent && a_opened <= b_sent, "{va:?} {vb:?}");
    assert!(b_opened >= 6 && a_opened >= 6, "{va:?} {vb:?}");
}
