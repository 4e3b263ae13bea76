//! `NeighborEncap` in a running router, in network namespaces (root needed), for IPv4
//! and IPv6: packets routed to two gateways on one link leave addressed to each
//! gateway's own Ethernet address, which the router's kernel resolved (ARP, or
//! Neighbour Discovery) when the element asked; packets for a gateway that does not
//! answer are counted and dropped, then go to output 1 once the kernel has given up,
//! with the kernel asked again at most once a second; a neighbour entry the kernel
//! changes takes the traffic at once. A multipath route the router takes from the
//! kernel (`KernelRoutes`) spreads flows over both gateways, each flow to one.
//!
//! r: d1 198.19.0.1 -- b1 [sw: bridge br0] b2 -- h1 198.19.0.3 (ns h1)
//!                                          b3 -- h2 198.19.0.4 (ns h2)
//! (IPv6: 2001:db8:1::1, ::3, ::4.)

mod common;
#[path = "common/control_client.rs"]
mod control_client;
#[path = "common/netns.rs"]
mod netns;
#[path = "common/router_process.rs"]
mod router_process;

use control_client::{connect_unix, Client};
use netns::{veth, Netns, RawSocket};
use router_process::RouterProcess;
use std::collections::HashMap;
use std::os::unix::net::UnixStream;
use std::process::Stdio;
use std::time::{Duration, Instant};

const D1_MAC: [u8; 6] = [0x02, 0, 0, 0, 0x02, 0x01];
const H1_MAC: [u8; 6] = [0x02, 0, 0, 0, 0x02, 0x03];
const H2_MAC: [u8; 6] = [0x02, 0, 0, 0, 0x02, 0x04];
const MOVED_MAC: [u8; 6] = [0x02, 0, 0, 0, 0x02, 0x33];

fn mac(m: &[u8; 6]) -> String {
    m.iter()
        .map(|b| format!("{:02x}", b))
        .collect::<Vec<_>>()
        .join(":")
}

/// The namespaces, kept until the test ends.
struct Link {
    r: Netns,
    _sw: Netns,
    h1: Netns,
    h2: Netns,
}

/// One address family's side of the test.
#[derive(Clone, Copy)]
struct Family {
    v6: bool,
}

impl Family {
    /// The router's d1, h1, h2, and a gateway nobody answers for.
    fn addrs(self) -> [&'static str; 4] {
        if self.v6 {
            ["2001:db8:1::1", "2001:db8:1::3", "2001:db8:1::4", "2001:db8:1::9"]
        } else {
            ["198.19.0.1", "198.19.0.3", "198.19.0.4", "198.19.0.9"]
        }
    }

    fn plen(self) -> &'static str {
        if self.v6 {
            "/64"
        } else {
            "/24"
        }
    }

    /// Packet destinations routed via h1, h2 and the silent gateway.
    fn destinations(self) -> [Vec<u8>; 3] {
        if self.v6 {
            [0x100u16, 0x200, 0x300].map(|n| {
                let a: std::net::Ipv6Addr = format!("2001:db8:{n:x}::7").parse().unwrap();
                a.octets().to_vec()
            })
        } else {
            [[192, 0, 2, 7], [203, 0, 113, 9], [100, 64, 0, 1]].map(|a| a.to_vec())
        }
    }

    /// One packet to `dst` as a RatedSource's hex DATA: a valid header (a bridge with
    /// netfilter drops IPv4 with a bad checksum).
    fn packet(self, dst: &[u8]) -> String {
        self.packet_from(1, dst)
    }

    /// [`Family::packet`] from source 10.0.0.`src` (IPv6: 2001:db8::`src`).
    fn packet_from(self, src: u8, dst: &[u8]) -> String {
        let h: Vec<u8> = if self.v6 {
            // Version 6, no payload, no next header (59), hop limit 64.
            let mut h = vec![0x60, 0, 0, 0, 0, 0, 59, 64, 0x20, 0x01, 0x0d, 0xb8];
            h.extend_from_slice(&[0; 11]);
            h.push(src);
            h.extend_from_slice(dst);
            h
        } else {
            let mut h = vec![0x45, 0, 0, 20, 0, 0, 0, 0, 64, 17, 0, 0, 10, 0, 0, src];
            h.extend_from_slice(dst);
            let sum = common::inet_checksum(&h);
            h[10..12].copy_from_slice(&sum.to_be_bytes());
            h
        };
        h.iter().map(|b| format!("{:02x}", b)).collect()
    }

    /// The family's route lookup element, the annotation element before it, and
    /// NeighborEncap's ETHERTYPE.
    fn elements(self) -> (&'static str, &'static str, &'static str) {
        if self.v6 {
            ("LookupIP6Route", "GetIP6Address(24)", "0x86DD")
        } else {
            ("RadixIPLookup", "GetIPAddress(16)", "0x0800")
        }
    }

    /// 200 packets a second to each destination, routed to h1, h2 and the silent
    /// gateway, through `ne :: NeighborEncap(d1)`.
    fn config(self, sock: &std::path::Path) -> String {
        let [_, g1, g2, g3] = self.addrs();
        let (lookup, anno, ethertype) = self.elements();
        let prefixes = if self.v6 {
            ["2001:db8:100::/48", "2001:db8:200::/48", "2001:db8:300::/48"]
        } else {
            ["192.0.2.0/24", "203.0.113.0/24", "100.64.0.0/10"]
        };
        let sources: String = self
            .destinations()
            .iter()
            .map(|d| {
                format!(
                    "RatedSource(DATA \\<{}>, RATE 200) -> {anno} -> rt;\n",
                    self.packet(d)
                )
            })
            .collect();
        format!(
            "ControlSocket(unix, {});
             rt :: {lookup}({} {g1} 0, {} {g2} 0, {} {g3} 0);
             {sources}
             rt -> ne :: NeighborEncap(d1, {ethertype}) -> ToDevice(d1, METHOD PACKET);
             ne[1] -> unresolved :: Counter -> Discard;",
            sock.display(),
            prefixes[0],
            prefixes[1],
            prefixes[2],
        )
    }
}

fn link(f: Family) -> Link {
    let (r, sw, h1, h2) = (
        Netns::new("nr"),
        Netns::new("ns"),
        Netns::new("n1"),
        Netns::new("n2"),
    );
    if f.v6 {
        // Netns turns IPv6 off; this test wants it, on the interfaces made after this.
        for ns in [&r, &h1, &h2] {
            ns.run(|| {
                for k in ["all", "default"] {
                    std::fs::write(format!("/proc/sys/net/ipv6/conf/{}/disable_ipv6", k), "0").unwrap();
                }
            });
        }
    }
    // A plain switch: multicast snooping would send neighbour solicitations only to
    // the ports whose MLD reports it has seen, which a loaded machine may send late.
    sw.ip(&["link", "add", "br0", "type", "bridge", "mcast_snooping", "0"]);
    sw.ip(&["link", "set", "br0", "up"]);
    veth(&r, "d1", &mac(&D1_MAC), &sw, "b1", "02:00:00:00:03:01");
    veth(&h1, "h1", &mac(&H1_MAC), &sw, "b2", "02:00:00:00:03:02");
    veth(&h2, "h2", &mac(&H2_MAC), &sw, "b3", "02:00:00:00:03:03");
    for b in ["b1", "b2", "b3"] {
        sw.ip(&["link", "set", b, "master", "br0"]);
    }
    let [ra, a1, a2, _] = f.addrs();
    for (ns, dev, a) in [(&r, "d1", ra), (&h1, "h1", a1), (&h2, "h2", a2)] {
        let a = format!("{a}{}", f.plen());
        let mut args = vec!["addr", "add", &a, "dev", dev];
        if f.v6 {
            args.push("nodad");
        }
        ns.ip(&args);
    }
    Link { r, _sw: sw, h1, h2 }
}

/// What the hosts saw from the router, by IPv4 destination: how many frames carried
/// each destination MAC.
type Seen = HashMap<Vec<u8>, HashMap<[u8; 6], usize>>;

/// Frames the hosts' sockets see for `for_how_long`, taken from each socket in turn.
fn collect(f: Family, sockets: &[&RawSocket], for_how_long: Duration) -> Seen {
    collect_by(f, sockets, for_how_long, |fr| {
        from_router(f, fr).map(|(ip, _)| ip)
    })
}

/// [`collect`], the router's frames counted by destination MAC under the key `key`
/// gives them (none: not counted).
fn collect_by<K: std::hash::Hash + Eq>(
    f: Family,
    sockets: &[&RawSocket],
    for_how_long: Duration,
    key: impl Fn(&[u8]) -> Option<K>,
) -> HashMap<K, HashMap<[u8; 6], usize>> {
    let mut seen = HashMap::new();
    let deadline = Instant::now() + for_how_long;
    while Instant::now() < deadline {
        for s in sockets {
            let Some(fr) = s.recv(Duration::from_millis(1)) else {
                continue;
            };
            if let (Some((_, mac)), Some(k)) = (from_router(f, &fr), key(&fr)) {
                *seen.entry(k).or_insert_with(HashMap::new).entry(mac).or_default() += 1;
            }
        }
    }
    seen
}

/// An IP frame from the router (not ARP or ND, nor the hosts' own): its destination
/// address and destination MAC.
fn from_router(f: Family, frame: &[u8]) -> Option<(Vec<u8>, [u8; 6])> {
    let (ethertype, dst) = if f.v6 {
        ([0x86, 0xdd], 38..54)
    } else {
        ([0x08, 0x00], 30..34)
    };
    (frame.len() >= dst.end && frame[6..12] == D1_MAC && frame[12..14] == ethertype)
        .then(|| (frame[dst].to_vec(), frame[..6].try_into().unwrap()))
}

/// The destination MACs of the frames for `ip` the router sends that `socket` sees
/// within `for_how_long`, in order of arrival.
fn arrivals(f: Family, socket: &RawSocket, ip: &[u8], for_how_long: Duration) -> Vec<[u8; 6]> {
    let mut macs = Vec::new();
    let deadline = Instant::now() + for_how_long;
    while Instant::now() < deadline {
        if let Some((to, mac)) = socket
            .recv(Duration::from_millis(1))
            .and_then(|fr| from_router(f, &fr))
        {
            if to == ip {
                macs.push(mac);
            }
        }
    }
    macs
}

/// How many frames for `ip` the hosts saw, if all went to `mac` (else a panic).
fn only_to(seen: &Seen, ip: &[u8], mac: [u8; 6]) -> usize {
    let Some(by_mac) = seen.get(ip) else {
        return 0;
    };
    assert_eq!(by_mac.keys().collect::<Vec<_>>(), [&mac], "{ip:?}: {seen:?}");
    by_mac[&mac]
}

/// Waits (at most `secs` seconds) until `ready`; a timeout shows what the element knows
/// and what its output 1 got.
fn wait_until(c: &mut Client<UnixStream>, secs: u64, mut ready: impl FnMut(&mut Client<UnixStream>) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !ready(c) {
        let output1 = c.count("unresolved");
        assert!(
            Instant::now() < deadline,
            "ne.table:\n{}output 1: {output1}",
            c.read("ne.table")
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `brickroute run -e CONFIG` in the router's namespace, and a client of its control
/// socket at `sock` (which CONFIG opens).
fn start(l: &Link, config: &str, sock: &std::path::Path) -> (RouterProcess, Client<UnixStream>) {
    let mut p = RouterProcess(
        l.r.brickroute_run(&["-e", config])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start brickroute"),
    );
    let c = connect_unix(sock, &mut p);
    (p, c)
}

fn table_has(c: &mut Client<UnixStream>, prefix: &str) -> bool {
    c.read("ne.table").lines().any(|l| l.starts_with(prefix))
}

#[test]
fn each_gateway_gets_its_own_address_from_the_kernels_neighbour_table() {
    each_gateway_gets_its_own_address(Family { v6: false });
}

#[test]
fn each_ipv6_gateway_gets_its_own_address_from_the_kernels_neighbour_table() {
    each_gateway_gets_its_own_address(Family { v6: true });
}

fn each_gateway_gets_its_own_address(f: Family) {
    let l = link(f);
    let [_, g1, g2, g3] = f.addrs();
    let [d1, d2, d3] = f.destinations();
    let s1 = l.h1.run(|| RawSocket::open("h1"));
    let s2 = l.h2.run(|| RawSocket::open("h2"));
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("s");
    let started = Instant::now();
    let (mut p, mut c) = start(&l, &f.config(&sock), &sock);
    assert_eq!(c.read("ne.src"), mac(&D1_MAC));

    // The kernel resolves both gateways when asked.
    wait_until(&mut c, 10, |c| {
        table_has(c, &format!("{g1} {} ", mac(&H1_MAC))) && table_has(c, &format!("{g2} {} ", mac(&H2_MAC)))
    });
    let seen = collect(f, &[&s1, &s2], Duration::from_millis(1500));
    assert!(only_to(&seen, &d1, H1_MAC) >= 100, "{seen:?}");
    assert!(only_to(&seen, &d2, H2_MAC) >= 100, "{seen:?}");
    assert!(!seen.contains_key(&d3), "{seen:?}");

    // Packets for the gateway nobody answers for are counted; the kernel is asked again
    // at most once a second for each of the three gateways (the two that answer were
    // unresolved at first too), not for every packet. (Waited for: a loaded host may
    // run the sources late.)
    let unresolved_of = |c: &mut Client<UnixStream>| -> u64 { c.read("ne.unresolved").parse().unwrap() };
    wait_until(&mut c, 10, |c| unresolved_of(c) >= 200);
    let unresolved = unresolved_of(&mut c);
    let requests: u64 = c.read("ne.requests").parse().unwrap();
    let seconds = started.elapsed().as_secs();
    assert!(
        (3..=3 * (seconds + 1)).contains(&requests),
        "{requests} requests for {unresolved} packets in {seconds} s"
    );
    // The kernel gives up on it after its probes (about 3 s), and says so; from then
    // on its packets leave on output 1 (for an ICMP host unreachable), where until
    // then they were dropped while the kernel tried.
    wait_until(&mut c, 15, |c| table_has(c, &format!("{g3} - FAILED")));
    wait_until(&mut c, 5, |c| c.count("unresolved") >= 100);
    let counted = c.count("unresolved");
    let unresolved_now: u64 = c.read("ne.unresolved").parse().unwrap();
    assert!(
        counted + 300 <= unresolved_now,
        "{counted} on output 1 of {unresolved_now} unresolved: the ones before FAILED too"
    );

    // The kernel's entry changes (a static one): the traffic follows at once.
    l.r.ip(&[
        "neigh",
        "replace",
        g1,
        "lladdr",
        &mac(&MOVED_MAC),
        "dev",
        "d1",
        "nud",
        "permanent",
    ]);
    wait_until(&mut c, 10, |c| {
        table_has(c, &format!("{g1} {} PERMANENT", mac(&MOVED_MAC)))
    });
    // From the first frame with the new address on (the bridge floods frames to an
    // address it has not learned, so h1 sees them), none goes to the old one. (Frames
    // sent before the change may still wait in the socket, or leave a worker that
    // the host kept from running: they come first.)
    let macs = arrivals(f, &s1, &d1, Duration::from_millis(1000));
    let first = macs.iter().position(|m| *m == MOVED_MAC);
    let Some(first) = first else {
        panic!("no frame to the new address: {macs:?}");
    };
    assert!(macs[first..].iter().all(|m| *m == MOVED_MAC), "{macs:?}");
    assert!(macs.len() - first >= 50, "{macs:?}");
    assert!(p.exited().is_none());
}

#[test]
fn the_first_packets_to_a_gateway_wait_for_its_address() {
    first_packets_wait(Family { v6: false });
}

#[test]
fn the_first_ipv6_packets_to_a_gateway_wait_for_its_address() {
    first_packets_wait(Family { v6: true });
}

/// Three packets to each of two destinations, one via h1 (which answers the kernel)
/// and one via the silent gateway, sent once with no entry in the kernel's table for
/// either: h1 gets its three when the kernel has resolved h1 (held meanwhile, as the
/// kernel holds its own packets), and the silent gateway's three leave on output 1 once
/// the kernel has given up.
fn first_packets_wait(f: Family) {
    let l = link(f);
    let [_, g1, _, g3] = f.addrs();
    let [d1, _, d3] = f.destinations();
    let s1 = l.h1.run(|| RawSocket::open("h1"));
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("s");
    let (lookup, anno, ethertype) = f.elements();
    let prefix = |d: &[u8]| {
        if f.v6 {
            format!(
                "{}/64",
                std::net::Ipv6Addr::from(<[u8; 16]>::try_from(d).unwrap())
            )
        } else {
            format!("{}/32", std::net::Ipv4Addr::from(<[u8; 4]>::try_from(d).unwrap()))
        }
    };
    let config = format!(
        "ControlSocket(unix, {});
         rt :: {lookup}({} {g1} 0, {} {g3} 0);
         InfiniteSource(DATA \\<{}>, LIMIT 3, BURST 3) -> {anno} -> rt;
         InfiniteSource(DATA \\<{}>, LIMIT 3, BURST 3) -> {anno} -> rt;
         rt -> ne :: NeighborEncap(d1, {ethertype}) -> ToDevice(d1, METHOD PACKET);
         ne[1] -> unresolved :: Counter -> Discard;",
        sock.display(),
        prefix(&d1),
        prefix(&d3),
        f.packet(&d1),
        f.packet(&d3),
    );
    let (mut p, mut c) = start(&l, &config, &sock);
    let macs = arrivals(f, &s1, &d1, Duration::from_secs(5));
    assert_eq!(macs, vec![H1_MAC; 3], "{}", c.read("ne.table"));
    // Six packets found no entry; none was dropped: the silent gateway's wait until
    // the kernel says FAILED (after its probes, about 3 s), then leave on output 1.
    assert_eq!(c.read("ne.unresolved"), "6");
    wait_until(&mut c, 15, |c| c.count("unresolved") == 3);
    assert_eq!(c.read("ne.drops"), "0");
    assert!(
        table_has(&mut c, &format!("{g3} - FAILED")),
        "{}",
        c.read("ne.table")
    );
    assert!(p.exited().is_none());
}

#[test]
fn a_multipath_route_from_the_kernel_spreads_flows_over_its_gateways() {
    multipath_spreads(Family { v6: false });
}

#[test]
fn an_ipv6_multipath_route_from_the_kernel_spreads_flows_over_its_gateways() {
    multipath_spreads(Family { v6: true });
}

/// The router's kernel routes the first destination through h1 and h2 at once (a
/// multipath route); 32 flows (sources) to it, through the router's table kept by
/// `KernelRoutes`: each flow's frames all go to one gateway, and both gateways get
/// flows.
fn multipath_spreads(f: Family) {
    let l = link(f);
    let [_, g1, g2, _] = f.addrs();
    let [dst, _, _] = f.destinations();
    let (prefix, ip) = if f.v6 {
        ("2001:db8:100::/48", "-6")
    } else {
        ("192.0.2.0/24", "-4")
    };
    l.r.ip(&[
        ip, "route", "add", prefix, "nexthop", "via", g1, "dev", "d1", "nexthop", "via", g2, "dev", "d1",
    ]);
    let s1 = l.h1.run(|| RawSocket::open("h1"));
    let s2 = l.h2.run(|| RawSocket::open("h2"));
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("s");
    let (lookup, anno, ethertype) = f.elements();
    // (The header check marks the network header, where the lookup finds the source.)
    let check = if f.v6 { "CheckIP6Header" } else { "CheckIPHeader" };
    let sources: String = (1..=32u8)
        .map(|i| {
            format!(
                "RatedSource(DATA \\<{}>, RATE 50) -> {check} -> {anno} -> rt;\n",
                f.packet_from(i, &dst)
            )
        })
        .collect();
    let config = format!(
        "ControlSocket(unix, {});
         rt :: {lookup};
         KernelRoutes(rt, d1 0);
         {sources}
         rt -> ne :: NeighborEncap(d1, {ethertype}) -> ToDevice(d1, METHOD PACKET);
         ne[1] -> unresolved :: Counter -> Discard;",
        sock.display(),
    );
    let (mut p, mut c) = start(&l, &config, &sock);
    let probe = if f.v6 { "2001:db8:100::7" } else { "192.0.2.7" };
    wait_until(&mut c, 10, |c| {
        c.read(&format!("rt.lookup {probe}")) == format!("0 {g1}\n0 {g2}")
    });
    wait_until(&mut c, 10, |c| {
        table_has(c, &format!("{g1} {} ", mac(&H1_MAC))) && table_has(c, &format!("{g2} {} ", mac(&H2_MAC)))
    });
    // Each source's frames, by destination MAC.
    let src = if f.v6 { 37 } else { 29 };
    let flows = collect_by(f, &[&s1, &s2], Duration::from_millis(2000), |fr| {
        from_router(f, fr)
            .is_some_and(|(to, _)| to == dst)
            .then(|| fr[src])
    });
    assert!(flows.len() >= 28, "{} of 32 flows seen: {flows:?}", flows.len());
    for (s, macs) in &flows {
        assert_eq!(
            macs.len(),
            1,
            "flow from source {s} went to more than one gateway: {flows:?}"
        );
    }
    let to = |m: [u8; 6]| flows.values().filter(|macs| macs.contains_key(&m)).count();
    assert!(
        to(H1_MAC) >= 4 && to(H2_MAC) >= 4,
        "flows to h1 {}, to h2 {}",
        to(H1_MAC),
        to(H2_MAC)
    );
    assert!(p.exited().is_none());
}

#[test]
fn bad_configurations_are_refused_with_the_reason() {
    let l = link(Family { v6: false });
    for (config, want) in [
        (
            "InfiniteSource(LIMIT 0) -> NeighborEncap(nosuch) -> Discard;",
            "no interface 'nosuch'",
        ),
        (
            "InfiniteSource(LIMIT 0) -> NeighborEncap(d1, 0x0806) -> Discard;",
            "ETHERTYPE 0x0806: neighbours are resolved for IPv4 (0x0800) or IPv6 (0x86DD) only",
        ),
        (
            "InfiniteSource(LIMIT 0) -> NeighborEncap -> Discard;",
            "missing mandatory DEVNAME argument",
        ),
        (
            "InfiniteSource(LIMIT 0) -> NeighborEncap(lo) -> Discard;",
            "'lo's Ethernet address: not an Ethernet interface (link type 772)",
        ),
    ] {
        let o = l.r.brickroute_run(&["-q", "-e", config]).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{config}");
        assert!(err.contains(want), "{config}: {err}");
    }
}
