use super::*;
use crate::testing::{build_error, Harness};
use packet::Packet;

fn a(s: &str) -> [u8; 16] {
    s.parse::<Ipv6Addr>().unwrap().octets()
}

/// A 40-byte IPv6 header (UDP, hop limit 64, from 2001:db8::99) whose destination
/// annotation is `anno`; its destination field holds `fe80::1`, which no route matches,
/// so a test that routes by it would fail.
fn pkt(anno: &str) -> Packet {
    let mut b = vec![0x60, 0, 0, 0, 0, 0, 17, 64];
    b.extend_from_slice(&a("2001:db8::99"));
    b.extend_from_slice(&a("fe80::1"));
    let mut p = Packet::from_slice(&b);
    p.anno_mut().set_dst_ip6(a(anno));
    p
}

fn annos(out: &[Packet]) -> Vec<String> {
    out.iter()
        .map(|p| Ipv6Addr::from(p.anno().dst_ip6()).to_string())
        .collect()
}

const CONFIG: &str = "2001:db8::/32 1, 2001:db8:1::/48 2001:db8:1::1 2, 2001:db8:1:2::/64 3, \
                      ::/0 2001:db8::fe 0, 2001:db8:1:2:3::7/128 1, 2001:db8:1:2:3::/80 0";

#[test]
fn routes_by_longest_prefix_and_sets_gateway() {
    let mut h = Harness::new(&LookupIP6RouteClass, CONFIG, 1, 4);
    let out = h.push(
        0,
        vec![
            pkt("2001:db8:9::1"),
            pkt("2001:db8:1:7::7"),
            pkt("2001:db8:1:2::9"),
            pkt("2600::1"),
            pkt("2001:db8:1:2:3::7"),
            // Longer than /64: the /80 holds it, the /128 beside it does not.
            pkt("2001:db8:1:2:3::8"),
        ],
    );
    assert_eq!(annos(&out[0]), vec!["2001:db8::fe", "2001:db8:1:2:3::8"]);
    assert_eq!(annos(&out[1]), vec!["2001:db8:9::1", "2001:db8:1:2:3::7"]);
    assert_eq!(annos(&out[2]), vec!["2001:db8:1::1"]);
    assert_eq!(annos(&out[3]), vec!["2001:db8:1:2::9"]);
    // The packet's bytes are untouched: the IPv6 header as built.
    let mut header = vec![0x60, 0, 0, 0, 0, 0, 17, 64];
    header.extend_from_slice(&a("2001:db8::99"));
    header.extend_from_slice(&a("fe80::1"));
    assert_eq!(out[2][0].data(), &header[..]);
}

#[test]
fn packets_without_route_are_dropped() {
    let mut h = Harness::new(&LookupIP6RouteClass, "2001:db8::/32 0, 2001:db9::/32 1", 1, 2);
    let out = h.push(0, vec![pkt("2001:dba::1"), pkt("2001:db8::1"), pkt("::")]);
    assert_eq!(annos(&out[0]), vec!["2001:db8::1"]);
    assert!(out[1].is_empty());
    let mut h = Harness::new(&LookupIP6RouteClass, "", 1, 0);
    let out = h.push(0, vec![pkt("2001:db8::1")]);
    assert!(out.is_empty());
}

#[test]
fn a_later_route_for_a_prefix_replaces_the_earlier() {
    // As Click's IP6Table: the second 2001:db8::/32 (written with host bits and a mask)
    // replaces the first, in its slot.
    let mut h = Harness::new(
        &LookupIP6RouteClass,
        "2001:db8::/32 0, 2001:db9::/32 0, 2001:db8::5/ffff:ffff:: 2001:db8::2 1",
        1,
        2,
    );
    let out = h.push(0, vec![pkt("2001:db8::1")]);
    assert!(out[0].is_empty());
    assert_eq!(annos(&out[1]), vec!["2001:db8::2"]);
    assert_eq!(
        h.read("table"),
        "# Active routes\n2001:db8::/32\t2001:db8::2\t1\n2001:db9::/32\t::\t0\n"
    );
}

#[test]
fn table_lists_routes_in_slot_order() {
    let h = Harness::new(&LookupIP6RouteClass, "", 1, 2);
    assert_eq!(h.read("table"), "");
    let h = Harness::new(
        &LookupIP6RouteClass,
        "2001:db8::/32 1, ::/0 fe80::1 0, 2001:db8::1 0",
        1,
        2,
    );
    assert_eq!(
        h.read("table"),
        "# Active routes\n2001:db8::/32\t::\t1\n::/0\tfe80::1\t0\n2001:db8::1/128\t::\t0\n"
    );
    // A removed route frees its slot; the next route takes the first free one.
    h.write("remove", "2001:db8::/32").unwrap();
    assert_eq!(
        h.read("table"),
        "# Active routes\n::/0\tfe80::1\t0\n2001:db8::1/128\t::\t0\n"
    );
    h.write("add", "2001:db8:5::/48 1").unwrap();
    assert_eq!(
        h.read("table"),
        "# Active routes\n2001:db8:5::/48\t::\t1\n::/0\tfe80::1\t0\n2001:db8::1/128\t::\t0\n"
    );
    // With every route gone, the heading stays (Click keeps its emptied slots).
    for p in ["2001:db8:5::/48", "::/0", "2001:db8::1"] {
        h.write("remove", p).unwrap();
    }
    assert_eq!(h.read("table"), "# Active routes\n");
}

#[test]
fn handlers_change_the_routes_packets_take() {
    let mut h = Harness::new(&LookupIP6RouteClass, "2001:db8::/32 0", 1, 3);
    h.write("add", "2001:db8:1::/48 2001:db8::aa 1").unwrap();
    h.write("ctrl", "add 2001:db8:1:2::/64 2").unwrap();
    let out = h.push(
        0,
        vec![pkt("2001:db8:1::1"), pkt("2001:db8:1:2::1"), pkt("2001:db8::1")],
    );
    assert_eq!(annos(&out[0]), vec!["2001:db8::1"]);
    assert_eq!(annos(&out[1]), vec!["2001:db8::aa"]);
    assert_eq!(annos(&out[2]), vec!["2001:db8:1:2::1"]);
    h.write("ctrl", "remove 2001:db8:1:2::/64").unwrap();
    // Removing a route that is not there is no error, as in Click.
    h.write("remove", "2001:db8:7::/48").unwrap();
    let out = h.push(0, vec![pkt("2001:db8:1:2::1")]);
    assert_eq!(annos(&out[1]), vec!["2001:db8::aa"]);
    // The gateway pair's index, freed with its last route, is not given to another
    // pair while a worker may still read it; new pairs route right meanwhile.
    h.write("remove", "2001:db8:1::/48").unwrap();
    h.write("add", "2001:db8:1::/48 2001:db8::bb 2").unwrap();
    h.write("add", "2001:db8:2::/48 2001:db8::cc 1").unwrap();
    let out = h.push(0, vec![pkt("2001:db8:1::1"), pkt("2001:db8:2::1")]);
    assert_eq!(annos(&out[1]), vec!["2001:db8::cc"]);
    assert_eq!(annos(&out[2]), vec!["2001:db8::bb"]);
}

#[test]
fn bad_requests_are_refused_with_a_reason() {
    let h = Harness::new(&LookupIP6RouteClass, "2001:db8::/32 0", 1, 2);
    let refused = [
        ("add", "2001:db8:1::/48 2", "output port out of range"),
        ("add", "2001:db8:1::/48 -1", "output port out of range"),
        ("add", "2001:db8:1::/48", "expected 'DADDR/MASK [GW] OUTPUT'"),
        ("add", "10.0.0.0/8 0", "expected 'DADDR/MASK [GW] OUTPUT'"),
        (
            "add",
            "2001:db8::/ffff:0:ffff:: 0",
            "expected 'DADDR/MASK [GW] OUTPUT'",
        ),
        ("remove", "2001:db8::/32 0", "expected 'DADDR/MASK'"),
        ("remove", "", "expected 'DADDR/MASK'"),
        (
            "ctrl",
            "set 2001:db8::/32 1",
            "bad command, should be 'add' or 'remove'",
        ),
        ("ctrl", "add 2001:db8::/32 7", "output port out of range"),
    ];
    for (handler, value, why) in refused {
        assert_eq!(
            h.write(handler, value),
            Err(why.to_string()),
            "{} {:?}",
            handler,
            value
        );
    }
    // Nothing changed.
    assert_eq!(h.read("table"), "# Active routes\n2001:db8::/32\t::\t0\n");
}

#[test]
fn configuration_errors() {
    assert_eq!(
        build_error(&LookupIP6RouteClass, "2001:db8::/32 0, 2001:db8::/32", 1, 2),
        "e :: LookupIP6Route: argument 2 should be DADDR/MASK [GW] OUTPUT"
    );
    assert_eq!(
        build_error(&LookupIP6RouteClass, "2001:db8::/32 -1", 1, 2),
        "e :: LookupIP6Route: argument 1 should be DADDR/MASK [GW] OUTPUT"
    );
    assert_eq!(
        build_error(&LookupIP6RouteClass, "2001:db8::/32 x 0", 1, 2),
        "e :: LookupIP6Route: argument 1 should be DADDR/MASK [GW] OUTPUT"
    );
    assert_eq!(
        build_error(
            &LookupIP6RouteClass,
            "2001:db8::/32 0, ::/0 2, 2001:db9::/32 1",
            1,
            2
        ),
        "e :: LookupIP6Route: need 3 or more output ports"
    );
}

#[test]
fn workers_never_see_a_route_on_another_pairs_gateway_while_routes_change() {
    // Each round removes 2001:db8:11::/48 (freeing its gateway pair's next-hop index),
    // gives a new pair an index, and puts the route back, while a worker routes a
    // packet to it over and over: the packet is dropped or leaves on its own route,
    // never on the new pair's. (The window in which a worker holds an index it has not
    // read yet is a few instructions wide, so this rarely catches an index reused too
    // soon; `hopindex.rs`'s test checks that reuse waits for a held pin.)
    use std::sync::atomic::AtomicBool;
    let h = Harness::new(&LookupIP6RouteClass, "2001:db8:11::/48 2001:db8::a 1", 1, 3);
    let done = Arc::new(AtomicBool::new(false));
    let worker = {
        let (spec, done) = (h.spec.clone(), done.clone());
        std::thread::spawn(move || {
            let info = WorkerInfo { index: 1, count: 2 };
            let mut w = spec.instantiate(info);
            let stop = StopFlag::new();
            let mut cx = Context::new(info, &stop);
            let mut routed = 0u64;
            // At least one push after the last round (the route is in place then),
            // however soon `done` comes: a fast host may finish every round before this
            // thread first runs.
            loop {
                let last = done.load(Ordering::Relaxed);
                let mut outs: Vec<PacketBatch> = (0..3).map(|_| PacketBatch::new()).collect();
                let mut b: PacketBatch = vec![pkt("2001:db8:11::1")].into_iter().collect();
                w.push(0, &mut b, &mut Outputs::new(&mut outs), &mut cx);
                assert!(outs[2].is_empty(), "2001:db8:11::1 left on the new pair's port");
                if let Some(p) = outs[1].iter().next() {
                    assert_eq!(annos(std::slice::from_ref(p)), vec!["2001:db8::a"]);
                    routed += 1;
                }
                if last {
                    return routed;
                }
            }
        })
    };
    for round in 0..2000 {
        h.write("remove", "2001:db8:11::/48").unwrap();
        h.write("add", &format!("2001:db8:12::/48 2001:db8::b:{:x} 2", round))
            .unwrap();
        h.write("add", "2001:db8:11::/48 2001:db8::a 1").unwrap();
        h.write("remove", "2001:db8:12::/48").unwrap();
    }
    done.store(true, Ordering::Relaxed);
    assert!(worker.join().expect("worker") > 0);
}

#[test]
fn lookup_handler_names_the_output_and_gateway() {
    let h = Harness::new(&LookupIP6RouteClass, CONFIG, 1, 4);
    let lookup = |a: &str| h.spec.read_handler_with("lookup", a).expect("a lookup handler");
    assert_eq!(lookup("2001:db8:9::1"), Ok("1".to_string()));
    assert_eq!(lookup("2001:db8:1:7::7"), Ok("2 2001:db8:1::1".to_string()));
    assert_eq!(lookup("2600::1"), Ok("0 2001:db8::fe".to_string()));
    assert_eq!(lookup(" 2001:db8:1:2:3::8 "), Ok("0".to_string()));
    assert_eq!(
        lookup("10.0.0.1"),
        Err("expected IPv6 address, not '10.0.0.1'".to_string())
    );
    let h = Harness::new(&LookupIP6RouteClass, "2001:db8::/32 0", 1, 1);
    assert_eq!(
        h.spec.read_handler_with("lookup", "2001:db9::1"),
        Some(Ok("-1".to_string()))
    );
}

#[test]
fn handlers_add_and_remove_routes_longer_than_64_bits() {
    // Nested under a /64: a /65 (the 65th bit decides), a /120, a /127 and a /128 with a
    // gateway, each added and removed by handler.
    let mut h = Harness::new(&LookupIP6RouteClass, "2001:db8:1:2::/64 0", 1, 5);
    h.write("add", "2001:db8:1:2:8000::/65 1").unwrap();
    h.write("ctrl", "add 2001:db8:1:2:ffff:ffff:ffff:fffe/127 2")
        .unwrap();
    h.write("add", "2001:db8:1:2:ffff:ffff:ffff:ffff fe80::9 3")
        .unwrap();
    h.write("add", "2001:db8:1:2::100/120 4").unwrap();
    let probes = || {
        vec![
            pkt("2001:db8:1:2:7fff:ffff:ffff:ffff"),
            pkt("2001:db8:1:2:8000::"),
            pkt("2001:db8:1:2:ffff:ffff:ffff:fffd"),
            pkt("2001:db8:1:2:ffff:ffff:ffff:fffe"),
            pkt("2001:db8:1:2:ffff:ffff:ffff:ffff"),
            pkt("2001:db8:1:2::1ff"),
            pkt("2001:db8:1:2::200"),
            pkt("2001:db8:1:3::"),
        ]
    };
    let out = h.push(0, probes());
    assert_eq!(
        annos(&out[0]),
        vec!["2001:db8:1:2:7fff:ffff:ffff:ffff", "2001:db8:1:2::200"]
    );
    assert_eq!(
        annos(&out[1]),
        vec!["2001:db8:1:2:8000::", "2001:db8:1:2:ffff:ffff:ffff:fffd"]
    );
    assert_eq!(annos(&out[2]), vec!["2001:db8:1:2:ffff:ffff:ffff:fffe"]);
    assert_eq!(annos(&out[3]), vec!["fe80::9"]);
    assert_eq!(annos(&out[4]), vec!["2001:db8:1:2::1ff"]);
    assert_eq!(
        h.spec
            .read_handler_with("lookup", "2001:db8:1:2:ffff:ffff:ffff:ffff"),
        Some(Ok("3 fe80::9".to_string()))
    );
    // Without the /65 and the /127, their addresses fall back to the /64; the /128
    // stays.
    h.write("ctrl", "remove 2001:db8:1:2:ffff:ffff:ffff:fffe/127")
        .unwrap();
    h.write("remove", "2001:db8:1:2:8000::/65").unwrap();
    let out = h.push(0, probes());
    assert_eq!(
        annos(&out[0]),
        vec![
            "2001:db8:1:2:7fff:ffff:ffff:ffff",
            "2001:db8:1:2:8000::",
            "2001:db8:1:2:ffff:ffff:ffff:fffd",
            "2001:db8:1:2:ffff:ffff:ffff:fffe",
            "2001:db8:1:2::200"
        ]
    );
    assert!(out[1].is_empty() && out[2].is_empty());
    assert_eq!(annos(&out[3]), vec!["fe80::9"]);
    assert_eq!(annos(&out[4]), vec!["2001:db8:1:2::1ff"]);
}

/// A packet from `src` (in its network header, which is set) with destination
/// annotation `dst`.
fn flow(src: u16, dst: &str) -> Packet {
    let mut p = pkt(dst);
    p.data_mut()[8..24].copy_from_slice(&a(&format!("2001:db8:99::{:x}", src)));
    p.set_network_header(0, 40);
    p
}

#[test]
fn a_multipath_route_spreads_flows_and_keeps_each_on_its_member() {
    let mut h = Harness::new(
        &LookupIP6RouteClass,
        "2001:db8::/32 fe80::1 1 fe80::2 2 3, ::/0 0",
        1,
        4,
    );
    let send = |h: &mut Harness| h.push(0, (0..300u16).map(|i| flow(i, "2001:db8::5")).collect());
    let first = send(&mut h);
    assert!(first[0].is_empty());
    for (port, gw) in [(1, "fe80::1"), (2, "fe80::2"), (3, "2001:db8::5")] {
        let n = first[port].len();
        assert!((60..=140).contains(&n), "port {} got {} of 300", port, n);
        assert!(annos(&first[port]).iter().all(|a| a == gw), "port {}", port);
    }
    let again = send(&mut h);
    let src = |out: &[Packet]| out.iter().map(|p| p.data()[8..24].to_vec()).collect::<Vec<_>>();
    for port in 1..4 {
        assert_eq!(src(&first[port]), src(&again[port]));
    }
    assert_eq!(
        h.read("table"),
        "# Active routes\n2001:db8::/32\tfe80::1\t1\tfe80::2\t2\t::\t3\n::/0\t::\t0\n"
    );
    assert_eq!(
        h.read_with("lookup", "2001:db8::7"),
        Ok("1 fe80::1\n2 fe80::2\n3".to_string())
    );
    // Replaced by a single hop, then by another group; a group shared by two routes.
    h.write("add", "2001:db8::/32 fe80::9 2").unwrap();
    let out = send(&mut h);
    assert_eq!(out[2].len(), 300);
    assert!(annos(&out[2]).iter().all(|a| a == "fe80::9"));
    h.write("ctrl", "add 2001:db8::/32 fe80::1 1 fe80::2 2").unwrap();
    h.write("add", "2001:db9::/32 fe80::1 1 fe80::2 2").unwrap();
    h.write("remove", "2001:db9::/32").unwrap();
    let out = send(&mut h);
    assert!(out[0].is_empty() && out[3].is_empty());
    assert!(
        out[1].len() > 90 && out[2].len() > 90,
        "{} {}",
        out[1].len(),
        out[2].len()
    );
    assert_eq!(
        h.write("add", "2001:db8::/32 fe80::1 1 fe80::1 1"),
        Err("a multipath route's members must differ (one is given twice)".to_string())
    );
    assert_eq!(
        h.write("add", "2001:db8::/32 fe80::1 1 fe80::2 4"),
        Err("output port out of range".to_string())
    );
}

#[test]
fn multipath_configuration_errors() {
    assert!(
        build_error(&LookupIP6RouteClass, "::/0 fe80::1 0 fe80::1 0", 1, 1)
            .contains("argument 1: a multipath route's members must differ (one is given twice)")
    );
    assert!(build_error(&LookupIP6RouteClass, "::/0 0 1", 1, 1).contains("need 2 or more output ports"));
}

#[test]
fn a_weighted_member_takes_its_share_of_the_flows() {
    let mut h = Harness::new(&LookupIP6RouteClass, "::/0 fe80::1 0 fe80::2 1 weight 3", 1, 2);
    assert_eq!(
        h.read("table"),
        "# Active routes\n::/0\tfe80::1\t0\tfe80::2\t1\tweight\t3\n"
    );
    assert_eq!(
        h.read_with("lookup", "2001:db8::1"),
        Ok("0 fe80::1\n1 fe80::2 weight 3".to_string())
    );
    let out = h.push(0, (0..800u16).map(|i| flow(i, "2001:db8::5")).collect());
    assert!(
        (520..=680).contains(&out[1].len()),
        "{} and {}",
        out[0].len(),
        out[1].len()
    );
    assert_eq!(out[0].len() + out[1].len(), 800);
}
