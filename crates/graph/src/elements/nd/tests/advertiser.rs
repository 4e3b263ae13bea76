use super::{icmp6_checksum, ll_option, v6, Nd};
use crate::elements::nd::IP6NDAdvertiserClass;
use crate::testing::{build_error, Harness};
use packet::Packet;

const ME: [u8; 6] = [0x02, 0, 0, 0, 0x01, 0x01];
const HOST: [u8; 6] = [0x02, 0, 0, 0, 0x01, 0x02];
const CONFIG: &str = "2001:db8:1::1 02:00:00:00:01:01";

/// A solicitation from 2001:db8:1::2 (at HOST) for `target`, to its solicited-node
/// address, with a source link-layer address option.
fn solicitation(target: &str) -> Nd {
    let t = v6(target);
    let mut group = v6("ff02::1:ff00:0");
    group[13..].copy_from_slice(&t[13..]);
    Nd {
        eth_dst: [0x33, 0x33, 0xff, t[13], t[14], t[15]],
        eth_src: HOST,
        src: v6("2001:db8:1::2"),
        dst: group,
        hlim: 255,
        kind: 135,
        code: 0,
        flags: 0,
        target: t,
        options: ll_option(1, HOST),
        checksum: None,
    }
}

/// The advertisement's ICMPv6 part, checksum field zero: type 136, code 0, `flags`,
/// target, target link-layer address option `eth`.
fn na_message(flags: u8, target: &str, eth: [u8; 6]) -> Vec<u8> {
    let mut m = vec![136, 0, 0, 0, flags, 0, 0, 0];
    m.extend_from_slice(&v6(target));
    m.extend_from_slice(&[2, 1]);
    m.extend_from_slice(&eth);
    m
}

/// The whole advertisement frame expected, its checksum computed here.
fn na_frame(eth_dst: [u8; 6], eth_src: [u8; 6], src: &str, dst: &str, mut message: Vec<u8>) -> Vec<u8> {
    let c = icmp6_checksum(v6(src), v6(dst), &message);
    message[2..4].copy_from_slice(&c.to_be_bytes());
    let mut f = eth_dst.to_vec();
    f.extend_from_slice(&eth_src);
    f.extend_from_slice(&[0x86, 0xdd, 0x60, 0, 0, 0, 0, 32, 58, 255]);
    f.extend_from_slice(&v6(src));
    f.extend_from_slice(&v6(dst));
    f.extend_from_slice(&message);
    f
}

fn data(ps: &[Packet]) -> Vec<Vec<u8>> {
    ps.iter().map(|p| p.data().to_vec()).collect()
}

#[test]
fn a_solicitation_for_its_address_gets_the_exact_advertisement() {
    let mut h = Harness::new(&IP6NDAdvertiserClass, CONFIG, 1, 2);
    let mut p = Packet::from_slice(&solicitation("2001:db8:1::1").frame());
    p.anno_mut().set_paint(7);
    let out = h.push(0, vec![p]);
    #[rustfmt::skip]
    let mut want: Vec<u8> = vec![
        0x02, 0, 0, 0, 0x01, 0x02,  0x02, 0, 0, 0, 0x01, 0x01,  0x86, 0xdd,
        0x60, 0, 0, 0,  0, 32,  58,  255,
        0x20, 0x01, 0x0d, 0xb8, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1,
        0x20, 0x01, 0x0d, 0xb8, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2,
        // Neighbor Advertisement, code 0, checksum, flags Router|Solicited|Override.
        136, 0, 0, 0,  0xe0, 0, 0, 0,
        0x20, 0x01, 0x0d, 0xb8, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1,
        // Target link-layer address option.
        2, 1,  0x02, 0, 0, 0, 0x01, 0x01,
    ];
    let c = icmp6_checksum(v6("2001:db8:1::1"), v6("2001:db8:1::2"), &want[54..]);
    want[56..58].copy_from_slice(&c.to_be_bytes());
    assert_eq!(data(&out[0]), vec![want]);
    assert!(out[1].is_empty());
    // The solicitation's annotations stay; the headers are marked.
    let na = &out[0][0];
    assert_eq!(na.anno().paint(), 7);
    assert_eq!(na.mac_header_offset(), Some(0));
    assert_eq!(na.network_header_offset(), Some(14));
    assert_eq!(h.read("drops"), "0");
}

#[test]
fn duplicate_address_detection_is_answered_to_all_nodes_unsolicited() {
    let mut h = Harness::new(&IP6NDAdvertiserClass, CONFIG, 1, 1);
    let mut ns = solicitation("2001:db8:1::1");
    ns.src = [0; 16];
    ns.options.clear();
    let out = h.push_bytes(0, &ns.frame());
    let want = na_frame(
        [0x33, 0x33, 0, 0, 0, 1],
        ME,
        "2001:db8:1::1",
        "ff02::1",
        na_message(0xa0, "2001:db8:1::1", ME),
    );
    assert_eq!(data(&out[0]), vec![want]);
}

#[test]
fn a_unicast_probe_without_source_option_is_answered_to_the_frames_source() {
    let mut h = Harness::new(&IP6NDAdvertiserClass, CONFIG, 1, 1);
    let mut ns = solicitation("2001:db8:1::1");
    ns.eth_dst = ME;
    ns.dst = v6("2001:db8:1::1");
    ns.options.clear();
    // Ethernet padding after the message is not part of it.
    let mut f = ns.frame();
    f.extend_from_slice(&[0xee; 6]);
    let out = h.push_bytes(0, &f);
    let want = na_frame(
        HOST,
        ME,
        "2001:db8:1::1",
        "2001:db8:1::2",
        na_message(0xe0, "2001:db8:1::1", ME),
    );
    assert_eq!(data(&out[0]), vec![want]);
}

#[test]
fn a_proxied_prefix_is_answered_without_override_and_the_longest_prefix_wins() {
    let other: [u8; 6] = [0x02, 0, 0, 0, 0x05, 0x05];
    let mut h = Harness::new(
        &IP6NDAdvertiserClass,
        "2001:db8:1::/64 02:00:00:00:05:05, 2001:db8:1::1 02:00:00:00:01:01",
        1,
        1,
    );
    let out = h.push_bytes(0, &solicitation("2001:db8:1::77").frame());
    let want = na_frame(
        HOST,
        other,
        "2001:db8:1::77",
        "2001:db8:1::2",
        na_message(0xc0, "2001:db8:1::77", other),
    );
    assert_eq!(data(&out[0]), vec![want]);
    let out = h.push_bytes(0, &solicitation("2001:db8:1::1").frame());
    assert_eq!(out[0][0].data()[6..12], ME);
    assert_eq!(
        h.read("table"),
        "2001:db8:1::1/128 02-00-00-00-01-01\n2001:db8:1::/64 02-00-00-00-05-05\n"
    );
}

#[test]
fn invalid_and_unanswered_frames_leave_on_output_1_unchanged() {
    let mut h = Harness::new(&IP6NDAdvertiserClass, CONFIG, 1, 2);
    let ours = "2001:db8:1::1";
    let mut cases: Vec<(&str, Vec<u8>)> = Vec::new();
    let mut add = |why: &'static str, f: &dyn Fn(&mut Nd)| {
        let mut ns = solicitation(ours);
        f(&mut ns);
        cases.push((why, ns.frame()));
    };
    add("hop limit 254", &|n| n.hlim = 254);
    add("code 1", &|n| n.code = 1);
    add("bad checksum", &|n| n.checksum = Some(0x1234));
    add("multicast target", &|n| n.target = v6("ff02::1"));
    add("option of length 0", &|n| {
        n.options = vec![1, 0, 0, 0, 0, 0, 0, 0]
    });
    add("option past the end", &|n| {
        n.options = vec![1, 2, 0, 0, 0, 0, 0, 0]
    });
    add("source option of 16 bytes", &|n| {
        n.options = vec![1, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]
    });
    add("unspecified source to a unicast address", &|n| {
        n.src = [0; 16];
        n.dst = v6(ours);
        n.options.clear();
    });
    add("unspecified source with a source option", &|n| n.src = [0; 16]);
    add("another target", &|n| n.target = v6("2001:db8:1::3"));
    add("multicast source", &|n| n.src = v6("ff02::1"));
    add("broadcast Ethernet address in the source option", &|n| {
        n.options = vec![1, 1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]
    });
    add("an advertisement", &|n| n.kind = 136);
    let good = solicitation(ours).frame();
    // ICMPv6 length 16 (short of the 24 a solicitation needs), checksum right.
    let mut short = solicitation(ours);
    short.options.clear();
    let mut f = short.frame();
    f.truncate(14 + 40 + 16);
    f[19] = 16;
    let c = icmp6_checksum(short.src, short.dst, &[&[135, 0, 0, 0][..], &f[58..70]].concat());
    f[56..58].copy_from_slice(&c.to_be_bytes());
    cases.push(("ICMPv6 length 16", f));
    cases.push(("payload length past the frame", good[..good.len() - 1].to_vec()));
    let mut not_ip6 = good.clone();
    not_ip6[12..14].copy_from_slice(&[0x08, 0x00]);
    cases.push(("Ethernet type IPv4", not_ip6));
    cases.push(("empty", Vec::new()));
    for (why, f) in &cases {
        let out = h.push_bytes(0, f);
        assert!(out[0].is_empty(), "{why}: answered");
        assert_eq!(data(&out[1]), vec![f.clone()], "{why}");
    }
    assert_eq!(h.read("drops"), "0");
    // With one output they are dropped and counted.
    let mut h = Harness::new(&IP6NDAdvertiserClass, CONFIG, 1, 1);
    for (_, f) in &cases {
        assert!(h.push_bytes(0, f)[0].is_empty());
    }
    assert_eq!(h.read("drops"), cases.len().to_string());
}

#[test]
fn handlers_show_and_change_the_table_for_every_worker() {
    let mut h = Harness::new(&IP6NDAdvertiserClass, CONFIG, 1, 1);
    let mut w1 = h.another_worker();
    assert_eq!(h.read("table"), "2001:db8:1::1/128 02-00-00-00-01-01\n");
    let lookup = |h: &Harness, a: &str| h.spec.read_handler_with("lookup", a).unwrap();
    assert_eq!(lookup(&h, "2001:db8:1::1"), Ok("02-00-00-00-01-01".to_string()));
    assert_eq!(
        lookup(&h, "2001:db8:1::2"),
        Err("no entry for 2001:db8:1::2".to_string())
    );
    assert_eq!(lookup(&h, "x"), Err("lookup expects IPv6 address".to_string()));

    h.write("add", "2001:db8:1::9 2001:db8:1::8 02:00:00:00:09:09")
        .unwrap();
    let out = w1.push_bytes(0, &solicitation("2001:db8:1::9").frame());
    assert_eq!(out[0].len(), 1, "the other worker answers for the new address");
    h.write("remove", "2001:db8:1::1").unwrap();
    assert!(h.push_bytes(0, &solicitation("2001:db8:1::1").frame())[0].is_empty());
    // Equally specific entries stay in the order given.
    assert_eq!(
        h.read("table"),
        "2001:db8:1::9/128 02-00-00-00-09-09\n2001:db8:1::8/128 02-00-00-00-09-09\n"
    );
    assert_eq!(
        h.write("remove", "2001:db8:1::1"),
        Err("no entry for 2001:db8:1::1/128".to_string())
    );
    assert_eq!(
        h.write("add", "2001:db8::5 zz"),
        Err("'zz' is not an Ethernet address".to_string())
    );
    assert_eq!(
        h.write("add", ""),
        Err("expected 'IP6/MASK [IP6/MASK...] ETH'".to_string())
    );
}

#[test]
fn configuration_errors_name_the_bad_word() {
    let e = |c: &str| build_error(&IP6NDAdvertiserClass, c, 1, 1);
    assert_eq!(
        e("2001:db8::1 zz"),
        "e :: IP6NDAdvertiser: 'zz' is not an Ethernet address"
    );
    assert_eq!(
        e("10.0.0.1 02:00:00:00:00:01"),
        "e :: IP6NDAdvertiser: '10.0.0.1' is not an IPv6 address or prefix"
    );
    assert_eq!(
        e("02:00:00:00:00:01"),
        "e :: IP6NDAdvertiser: '02:00:00:00:00:01' has no IPv6 address or prefix before it"
    );
    assert_eq!(
        e("router"),
        "e :: IP6NDAdvertiser: expected 'IP6/MASK [IP6/MASK...] ETH', not 'router' (or an AddressInfo name of both)"
    );
}
