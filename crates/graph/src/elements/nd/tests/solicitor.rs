use super::{icmp6_checksum, ll_option, v6, Nd};
use crate::elements::ip6::testutil::ip6_packet;
use crate::elements::nd::IP6NDSolicitorClass;
use crate::testing::{build_error, Harness};
use packet::Packet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

const ME: [u8; 6] = [0x02, 0, 0, 0, 0x02, 0x01];
const HOP_ETH: [u8; 6] = [0x02, 0, 0, 0, 0x02, 0x02];
const CONFIG: &str = "2001:db8:2::1, 02:00:00:00:02:01";

/// A solicitor with `outputs` outputs and a clock the test sets, at 1 s.
fn solicitor(config: &str, outputs: usize) -> (Harness, Arc<AtomicU64>) {
    let ms = Arc::new(AtomicU64::new(1000));
    let class = IP6NDSolicitorClass::with_clock(ms.clone());
    (Harness::new(&class, config, 2, outputs), ms)
}

/// A UDP packet from 2001:db8:1::2 to `dst` whose next hop annotation is `hop`, 4
/// payload bytes ending in `tag`.
fn packet_to(dst: &str, hop: &str, tag: u8) -> Packet {
    let mut p = Packet::from_slice(&ip6_bytes(dst, tag));
    p.set_network_header(0, 40);
    p.set_dst_ip6_anno(v6(hop));
    p
}

fn ip6_bytes(dst: &str, tag: u8) -> Vec<u8> {
    ip6_packet("2001:db8:1::2", dst, 63, &[0xde, 0xad, 0xbe, tag])
}

/// `ip6_bytes(dst, tag)` behind an Ethernet header to `eth` from this host.
fn encapsulated(eth: [u8; 6], dst: &str, tag: u8) -> Vec<u8> {
    let mut f = eth.to_vec();
    f.extend_from_slice(&ME);
    f.extend_from_slice(&[0x86, 0xdd]);
    f.extend_from_slice(&ip6_bytes(dst, tag));
    f
}

/// An advertisement from `target` at `eth` to this host, solicited and overriding.
fn advertisement(target: &str, eth: [u8; 6]) -> Nd {
    Nd {
        eth_dst: ME,
        eth_src: eth,
        src: v6(target),
        dst: v6("2001:db8:2::1"),
        hlim: 255,
        kind: 136,
        code: 0,
        flags: 0x60,
        target: v6(target),
        options: ll_option(2, eth),
        checksum: None,
    }
}

fn data(ps: &[Packet]) -> Vec<Vec<u8>> {
    ps.iter().map(|p| p.data().to_vec()).collect()
}

/// The solicitation this host sends for 2001:db8:2::2: to `ip_dst` at `eth_dst`.
fn solicitation_for_hop(eth_dst: [u8; 6], ip_dst: &str) -> Vec<u8> {
    #[rustfmt::skip]
    let mut f: Vec<u8> = [
        &eth_dst[..], &ME, &[0x86, 0xdd],
        &[0x60, 0, 0, 0,  0, 32,  58,  255],
        &v6("2001:db8:2::1"),
        &v6(ip_dst),
        // Neighbor Solicitation, code 0, checksum, reserved, target.
        &[135, 0, 0, 0,  0, 0, 0, 0],
        &v6("2001:db8:2::2"),
        // Source link-layer address option.
        &[1, 1], &ME,
    ]
    .concat();
    let c = icmp6_checksum(v6("2001:db8:2::1"), v6(ip_dst), &f[54..]);
    f[56..58].copy_from_slice(&c.to_be_bytes());
    f
}

#[test]
fn an_unknown_next_hop_is_solicited_and_its_packets_leave_after_the_advertisement() {
    let (mut h, _) = solicitor(CONFIG, 2);
    let hop = "2001:db8:2::2";
    let out = h.push(
        0,
        vec![packet_to(hop, hop, 1), packet_to("2001:db8:9::1", hop, 2)],
    );
    assert!(out[0].is_empty());
    // To the solicited-node address ff02::1:ff00:2, at 33:33:ff:00:00:02.
    let want = solicitation_for_hop([0x33, 0x33, 0xff, 0, 0, 2], "ff02::1:ff00:2");
    assert_eq!(data(&out[1]), vec![want]);
    assert_eq!(out[1][0].mac_header_offset(), Some(0));
    assert_eq!(out[1][0].network_header_offset(), Some(14));
    assert_eq!((h.read("queries"), h.read("length")), ("1".into(), "2".into()));
    assert_eq!(h.read("table"), "2001:db8:2::2 0 00:00:00:00:00:00 0.000000\n");

    let out = h.push_bytes(1, &advertisement(hop, HOP_ETH).frame());
    #[rustfmt::skip]
    let want_first: Vec<u8> = [
        &[0x02, 0, 0, 0, 0x02, 0x02,  0x02, 0, 0, 0, 0x02, 0x01,  0x86, 0xdd][..],
        &[0x60, 0, 0, 0,  0, 4,  17,  63],
        &v6("2001:db8:1::2"), &v6(hop),
        &[0xde, 0xad, 0xbe, 1],
    ]
    .concat();
    assert_eq!(
        data(&out[0]),
        vec![want_first, encapsulated(HOP_ETH, "2001:db8:9::1", 2)]
    );
    assert_eq!(out[0][0].mac_header_offset(), Some(0));
    assert_eq!(h.read("responses"), "1");
    assert_eq!(h.read("length"), "0");
    assert_eq!(h.read("table"), "2001:db8:2::2 1 02:00:00:00:02:02 0.000000\n");

    // Known now: straight through, no solicitation.
    let out = h.push(0, vec![packet_to(hop, hop, 3)]);
    assert_eq!(data(&out[0]), vec![encapsulated(HOP_ETH, hop, 3)]);
    assert!(out[1].is_empty());
    assert_eq!(
        h.read("stats"),
        "0 packets killed\n1 neighbor solicitations sent\n"
    );
}

#[test]
fn multicast_goes_to_its_ethernet_group_and_the_unspecified_address_is_dropped() {
    let (mut h, _) = solicitor(CONFIG, 1);
    let out = h.push(
        0,
        vec![packet_to("ff02::1:2", "ff02::1:2", 1), packet_to("::", "::", 2)],
    );
    // RFC 2464: 33:33 and the address's low 32 bits.
    assert_eq!(
        data(&out[0]),
        vec![encapsulated([0x33, 0x33, 0, 1, 0, 2], "ff02::1:2", 1)]
    );
    assert_eq!((h.read("drops"), h.read("queries")), ("1".into(), "0".into()));
}

#[test]
fn with_one_output_solicitations_leave_on_output_0_and_polls_are_unicast() {
    let (mut h, ms) = solicitor(&format!("{CONFIG}, POLL_TIMEOUT 10s, TIMEOUT 60s"), 1);
    let hop = "2001:db8:2::2";
    let out = h.push(0, vec![packet_to(hop, hop, 1)]);
    assert_eq!(
        data(&out[0]),
        vec![solicitation_for_hop(
            [0x33, 0x33, 0xff, 0, 0, 2],
            "ff02::1:ff00:2"
        )]
    );
    let out = h.push_bytes(1, &advertisement(hop, HOP_ETH).frame());
    assert_eq!(data(&out[0]), vec![encapsulated(HOP_ETH, hop, 1)]);
    // From POLL_TIMEOUT on, a packet still goes out and sends a probe to the
    // neighbour's own addresses (RFC 4861 7.3.3).
    ms.store(11_000, Ordering::Relaxed);
    let out = h.push(0, vec![packet_to(hop, hop, 2)]);
    assert_eq!(
        data(&out[0]),
        vec![solicitation_for_hop(HOP_ETH, hop), encapsulated(HOP_ETH, hop, 2)]
    );
    // The answer to a unicast probe may leave out the target option: it confirms the
    // address recorded.
    ms.store(11_500, Ordering::Relaxed);
    let mut confirm = advertisement(hop, HOP_ETH);
    confirm.options.clear();
    h.push_bytes(1, &confirm.frame());
    assert_eq!(h.read("table"), "2001:db8:2::2 1 02:00:00:00:02:02 0.000000\n");
    assert_eq!(h.read("responses"), "2");
}

#[test]
fn advertisements_are_checked_and_only_those_asked_for_are_recorded() {
    let (mut h, _) = solicitor(CONFIG, 2);
    let hop = "2001:db8:2::2";
    h.push(0, vec![packet_to(hop, hop, 1)]);
    let mut bad: Vec<(&str, Vec<u8>)> = Vec::new();
    let mut add = |why: &'static str, f: &dyn Fn(&mut Nd)| {
        let mut na = advertisement(hop, HOP_ETH);
        f(&mut na);
        bad.push((why, na.frame()));
    };
    add("hop limit 64", &|n| n.hlim = 64);
    add("code 1", &|n| n.code = 1);
    add("bad checksum", &|n| n.checksum = Some(0xbeef));
    add("solicited to a multicast address", &|n| n.dst = v6("ff02::1"));
    add("a group Ethernet address", &|n| {
        n.options = ll_option(2, [0x33, 0x33, 0, 0, 0, 1])
    });
    add("option of length 0", &|n| {
        n.options = vec![2, 0, 0, 0, 0, 0, 0, 0]
    });
    add("no target option while being solicited", &|n| n.options.clear());
    add("a solicitation", &|n| n.kind = 135);
    for (why, f) in &bad {
        let out = h.push_bytes(1, f);
        assert!(out[0].is_empty(), "{why}");
        assert_eq!(h.read("length"), "1", "{why}");
    }
    assert_eq!(h.read("drops"), bad.len().to_string());
    assert_eq!(h.read("responses"), "0");

    // An advertisement for an address not in the table makes no entry; it is counted
    // with the frames not recorded.
    h.push_bytes(
        1,
        &advertisement("2001:db8:2::7", [0x02, 0, 0, 0, 0x02, 0x07]).frame(),
    );
    assert_eq!(h.read("table"), "2001:db8:2::2 0 00:00:00:00:00:00 0.000000\n");
    assert_eq!(h.read("drops"), (bad.len() + 1).to_string());

    // Unsolicited, to all nodes, with the override flag: recorded (it is in the table).
    let mut unsolicited = advertisement(hop, HOP_ETH);
    unsolicited.dst = v6("ff02::1");
    unsolicited.eth_dst = [0x33, 0x33, 0, 0, 0, 1];
    unsolicited.flags = 0x20;
    let out = h.push_bytes(1, &unsolicited.frame());
    assert_eq!(data(&out[0]), vec![encapsulated(HOP_ETH, hop, 1)]);
}

#[test]
fn another_workers_advertisement_releases_this_workers_packets_when_polled() {
    let (mut h, _) = solicitor(CONFIG, 2);
    let mut w1 = h.another_worker();
    let hop = "2001:db8:2::2";
    h.push(0, vec![packet_to(hop, hop, 1)]);
    w1.push_bytes(1, &advertisement(hop, HOP_ETH).frame());
    let (_, out) = h.run();
    assert_eq!(data(&out[0]), vec![encapsulated(HOP_ETH, hop, 1)]);
}

#[test]
fn saved_packets_are_dropped_after_3_s_without_an_answer() {
    let (mut h, ms) = solicitor(CONFIG, 2);
    let hop = "2001:db8:2::2";
    h.push(0, vec![packet_to(hop, hop, 1)]);
    ms.store(3999, Ordering::Relaxed);
    assert!(h.run().1[0].is_empty());
    assert_eq!(h.read("length"), "1");
    ms.store(4000, Ordering::Relaxed);
    assert!(h.run().1[0].is_empty());
    assert_eq!((h.read("length"), h.read("drops")), ("0".into(), "1".into()));
}

#[test]
fn handlers_insert_delete_clear_and_ipaddr() {
    let (mut h, _) = solicitor(CONFIG, 2);
    let hop = "2001:db8:2::2";
    h.write("insert", "2001:db8:2::2 02:00:00:00:02:02").unwrap();
    let out = h.push(0, vec![packet_to(hop, hop, 1)]);
    assert_eq!(data(&out[0]), vec![encapsulated(HOP_ETH, hop, 1)]);
    assert_eq!(h.read("count"), "1");
    h.write("delete", "2001:db8:2::2").unwrap();
    assert_eq!(h.read("count"), "0");
    assert_eq!(
        h.write("delete", "2001:db8:2::2"),
        Err("no entry for 2001:db8:2::2".into())
    );
    assert_eq!(
        h.write("insert", "2001:db8:2::2"),
        Err("expected 'IP6 ETH'".into())
    );
    assert_eq!(
        h.write("insert", "10.0.0.1 02:00:00:00:02:02"),
        Err("'10.0.0.1' is not an IPv6 address".into())
    );
    assert_eq!(
        h.write("insert", "::2 x"),
        Err("'x' is not an Ethernet address".into())
    );
    h.write("insert", "2001:db8:2::3 02:00:00:00:02:03").unwrap();
    h.write("clear", "").unwrap();
    assert_eq!(h.read("table"), "");

    assert_eq!(h.read("ipaddr"), "2001:db8:2::1");
    h.write("ipaddr", "2001:db8:2::fe").unwrap();
    assert_eq!(h.read("ipaddr"), "2001:db8:2::fe");
    assert_eq!(
        h.write("ipaddr", "ff02::1"),
        Err("IP expects unicast IPv6 address".into())
    );
    let out = h.push(0, vec![packet_to(hop, hop, 2)]);
    assert_eq!(out[1][0].data()[22..38], v6("2001:db8:2::fe"));
}

#[test]
fn configuration_errors() {
    let e = |c: &str| build_error(&IP6NDSolicitorClass::default(), c, 2, 1);
    assert_eq!(
        e("2001:db8::1"),
        "e :: IP6NDSolicitor: missing mandatory ETH argument"
    );
    assert_eq!(
        e("10.0.0.1, 02:00:00:00:00:01"),
        "e :: IP6NDSolicitor: IP expects IPv6 address"
    );
    assert_eq!(
        e("2001:db8::1, 1.2.3.4"),
        "e :: IP6NDSolicitor: ETH expects Ethernet address"
    );
    assert_eq!(
        e("ff02::1, 02:00:00:00:00:01"),
        "e :: IP6NDSolicitor: IP must be a unicast address, not ff02::1 (it is the source of solicitations)"
    );
    assert_eq!(
        e("2001:db8::1, 33:33:00:00:00:01"),
        "e :: IP6NDSolicitor: ETH must be a unicast Ethernet address, not 33-33-00-00-00-01"
    );
    assert_eq!(
        e("2001:db8::1, 02:00:00:00:00:01, CAPACITY x"),
        "e :: IP6NDSolicitor: CAPACITY expects unsigned integer"
    );
}

#[test]
fn a_replacing_solicitor_for_the_same_host_takes_the_resolved_entries() {
    let (old, ms) = solicitor(CONFIG, 2);
    old.write("insert", "2001:db8:2::2 02:00:00:00:02:02").unwrap();
    let class = IP6NDSolicitorClass::with_clock(ms.clone());
    let mut new = Harness::new(&class, CONFIG, 2, 2);
    assert!(new.spec.take_state(&*old.spec));
    let out = new.push(0, vec![packet_to("2001:db8:9::1", "2001:db8:2::2", 7)]);
    assert_eq!(out[0].len(), 1);
    assert_eq!(out[0][0].data(), &encapsulated(HOP_ETH, "2001:db8:9::1", 7)[..]);
    assert!(out[1].is_empty());
    // Another address of its own: nothing taken.
    let other = Harness::new(&class, "2001:db8:2::9, 02:00:00:00:02:01", 2, 2);
    assert!(!other.spec.take_state(&*old.spec));
    assert_eq!(other.read("count"), "0");
}
