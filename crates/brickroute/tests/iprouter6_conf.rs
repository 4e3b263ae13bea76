//! The shipped `conf/iprouter6.click` (Click's IP router for IPv6, with its own
//! neighbour discovery) routing between two hosts in network namespaces (root
//! needed): the hosts' kernels and iputils' `ping -6` are the independent judges. The
//! router's namespace keeps IPv6 off, so every Neighbor Advertisement, Neighbor
//! Solicitation and ICMPv6 error the hosts see comes from brickroute.
//!
//! h0: e0 2001:db8:1::2/64 -- r0 [router: 2001:db8:1::1 | 2001:db8:2::1] r1 -- e1 2001:db8:2::2/64 :h1

mod common;
#[path = "common/netns.rs"]
mod netns;
#[path = "common/router_process.rs"]
mod router_process;
#[path = "common/two_hosts.rs"]
mod two_hosts;

use netns::Netns;
use std::process::Command;
use std::time::{Duration, Instant};
use two_hosts::{TwoHosts, E0_MAC, E1_MAC, R0_MAC, R1_MAC};

/// `ping -6 ARGS` in `ns`: its exit success and standard output.
fn ping6(ns: &Netns, args: &[&str]) -> (bool, String) {
    two_hosts::ping(ns, "-6", args)
}

/// The hosts and the router running the shipped configuration, ready once a ping
/// crosses it.
fn testbed() -> TwoHosts {
    let defines = two_hosts::ipv6_router_defines();
    TwoHosts::up(
        "conf/iprouter6.click",
        &defines
            .iter()
            .map(String::as_str)
            .chain([
                // A worker for each of the veths' two receive queues, so the interfaces
                // open with the default METHOD, XDP (with one worker it falls back to
                // AF_PACKET).
                "--threads",
                "2",
                "-h",
                "nds0.table",
                "-h",
                "nds1.table",
            ])
            .collect::<Vec<_>>(),
        two_hosts::ipv6_host,
        |h0| ping6(h0, &["-c", "1", "-W", "1", "2001:db8:2::2"]).0,
    )
}

/// A ping's replies came with this hop limit (iputils prints it as `ttl=`).
fn hop_limit_seen(out: &str, hlim: u8) -> bool {
    out.contains(&format!("ttl={hlim} ")) || out.contains(&format!("hlim={hlim} "))
}

#[test]
fn click_ip_router_for_ipv6_forwards_and_resolves_neighbours() {
    let mut t = testbed();

    // 3 of 3 each: through the router both ways, the replies one hop shorter (Linux's
    // hop limit 64, less the router's 1); and to both of the router's addresses, from
    // h0, answered by the router (ICMP6PingResponder) with hop limit 255, less the
    // router's own decrement on the way out (the reply is routed like any other packet).
    for (from, to, hlim) in [
        (&t.h0, "2001:db8:2::2", 63),
        (&t.h1, "2001:db8:1::2", 63),
        (&t.h0, "2001:db8:1::1", 254),
        (&t.h0, "2001:db8:2::1", 254),
    ] {
        let (ok, out) = ping6(from, &["-c", "3", "-i", "0.2", "-W", "2", to]);
        assert!(ok && out.contains("3 received"), "{out}");
        assert!(hop_limit_seen(&out, hlim), "{out}");
    }

    // Hop limit 1: time exceeded, from the router's address on the side the packet
    // came in by.
    let (ok, out) = ping6(&t.h0, &["-c", "1", "-W", "2", "-t", "1", "2001:db8:2::2"]);
    assert!(!ok, "{out}");
    assert!(
        out.contains("From 2001:db8:1::1 icmp_seq=1 Time exceeded: Hop limit"),
        "{out}"
    );
    let (_, out) = ping6(&t.h1, &["-c", "1", "-W", "2", "-t", "1", "2001:db8:1::2"]);
    assert!(
        out.contains("From 2001:db8:2::1 icmp_seq=1 Time exceeded: Hop limit"),
        "{out}"
    );

    // A network the router has no route to: nothing comes back.
    let (ok, out) = ping6(&t.h0, &["-c", "1", "-W", "1", "2001:db8:9::1"]);
    assert!(!ok && out.contains("0 received"), "{out}");

    // The hosts learnt the router's Ethernet addresses from its advertisements.
    let neigh = |ns: &Netns, dev: &str| {
        let o = Command::new("ip")
            .args(["-n", &ns.name, "-6", "neigh", "show", "dev", dev])
            .output()
            .expect("ip neigh");
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let n0 = neigh(&t.h0, "e0");
    assert!(
        n0.contains(&format!("2001:db8:1::1 lladdr {R0_MAC} router")),
        "{n0}"
    );
    let n1 = neigh(&t.h1, "e1");
    assert!(n1.contains(&format!("2001:db8:2::1 lladdr {R1_MAC}")), "{n1}");

    // Sources a router must not forward from (RFC 4291): link-local, multicast,
    // loopback, unspecified; each in an IPv6 header with no payload (next header 59)
    // to h1, sent to the router's Ethernet address, then one from h0's own address,
    // which must be the only one to reach h1.
    let mac = |m: &str| -> Vec<u8> { m.split(':').map(|b| u8::from_str_radix(b, 16).unwrap()).collect() };
    let to: std::net::Ipv6Addr = "2001:db8:2::2".parse().unwrap();
    let frame = |from: &str| {
        let from: std::net::Ipv6Addr = from.parse().unwrap();
        let mut f = [&mac(R0_MAC)[..], &mac(E0_MAC)[..], &[0x86, 0xdd]].concat();
        f.extend_from_slice(&[0x60, 0, 0, 0, 0, 0, 59, 64]);
        f.extend_from_slice(&from.octets());
        f.extend_from_slice(&to.octets());
        f
    };
    let at_h1 = t.h1.run(|| netns::RawSocket::open("e1"));
    t.h0.run(|| {
        let sock = netns::RawSocket::open("e0");
        for from in ["fe80::1", "ff02::1", "::1", "::", "2001:db8:1::2"] {
            sock.send(&frame(from));
        }
    });
    let mut arrived = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(2);
    while Instant::now() < deadline && arrived.len() < 5 {
        let Some(f) = at_h1.recv(Duration::from_millis(200)) else {
            continue;
        };
        // IPv6 with no next header (59) to h1: one of ours, its source at 22..38.
        if f.len() >= 54 && f[12..14] == [0x86, 0xdd] && f[20] == 59 && f[38..54] == to.octets() {
            arrived.push(std::net::Ipv6Addr::from(
                <[u8; 16]>::try_from(&f[22..38]).unwrap(),
            ));
        }
    }
    assert_eq!(arrived, ["2001:db8:1::2".parse::<std::net::Ipv6Addr>().unwrap()]);

    let (out, err) = t.stop();
    // Through AF_XDP: its program handed the router its neighbour discovery.
    assert!(err.contains("r0 (XDP") && err.contains("r1 (XDP"), "{err}");
    // Each solicitor learnt its host's address from the advertisement answering its
    // solicitation: `ADDR 1 MAC AGE`.
    assert!(
        out.contains(&format!("2001:db8:1::2 1 {E0_MAC} ")),
        "{out}\n{err}"
    );
    assert!(
        out.contains(&format!("2001:db8:2::2 1 {E1_MAC} ")),
        "{out}\n{err}"
    );
    drop(t);
}
