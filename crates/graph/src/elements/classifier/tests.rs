use super::ipexpr::{parse_filter_pattern, Action};
use super::program::{Expr, Program, Target, View};
use super::*;
use crate::testing::{build_error, Harness};
use packet::Packet;
use proptest::prelude::*;

// ---- hand-built packets ----

fn ether(ethertype: u16, payload: &[u8]) -> Vec<u8> {
    let mut v = vec![
        0x00, 0x11, 0x22, 0x33, 0x44, 0x55, // dst
        0x00, 0x66, 0x77, 0x88, 0x99, 0xaa, // src
    ];
    v.extend_from_slice(&ethertype.to_be_bytes());
    v.extend_from_slice(payload);
    v
}

/// ARP over Ethernet with the given opcode.
fn arp(op: u16) -> Vec<u8> {
    let mut a = vec![0x00, 0x01, 0x08, 0x00, 6, 4];
    a.extend_from_slice(&op.to_be_bytes());
    a.extend_from_slice(&[0u8; 20]);
    ether(0x0806, &a)
}

struct Ip {
    tos: u8,
    id: u16,
    frag: u16,
    ttl: u8,
    proto: u8,
    src: [u8; 4],
    dst: [u8; 4],
    options: Vec<u8>,
}

fn ip() -> Ip {
    Ip {
        tos: 0,
        id: 0x1234,
        frag: 0,
        ttl: 64,
        proto: 6,
        src: [10, 0, 0, 1],
        dst: [192, 168, 1, 2],
        options: Vec::new(),
    }
}

impl Ip {
    fn bytes(&self, payload: &[u8]) -> Vec<u8> {
        let hl = 20 + self.options.len();
        let total = (hl + payload.len()) as u16;
        let mut v = vec![0x40 | (hl / 4) as u8, self.tos];
        v.extend_from_slice(&total.to_be_bytes());
        v.extend_from_slice(&self.id.to_be_bytes());
        v.extend_from_slice(&self.frag.to_be_bytes());
        v.extend_from_slice(&[self.ttl, self.proto, 0, 0]);
        v.extend_from_slice(&self.src);
        v.extend_from_slice(&self.dst);
        v.extend_from_slice(&self.options);
        v.extend_from_slice(payload);
        v
    }
}

fn tcp(sport: u16, dport: u16, flags: u8, win: u16) -> Vec<u8> {
    let mut v = Vec::new();
    v.extend_from_slice(&sport.to_be_bytes());
    v.extend_from_slice(&dport.to_be_bytes());
    v.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 0, 0x50, flags]);
    v.extend_from_slice(&win.to_be_bytes());
    v.extend_from_slice(&[0, 0, 0, 0]);
    v
}

fn udp(sport: u16, dport: u16) -> Vec<u8> {
    let mut v = Vec::new();
    v.extend_from_slice(&sport.to_be_bytes());
    v.extend_from_slice(&dport.to_be_bytes());
    v.extend_from_slice(&[0, 8, 0, 0]);
    v
}

fn icmp(ty: u8, code: u8) -> Vec<u8> {
    vec![ty, code, 0, 0, 0, 1, 0, 1]
}

/// A packet whose data starts with the IP header, annotated as CheckIPHeader would.
fn ip_packet(bytes: &[u8]) -> Packet {
    let mut p = Packet::from_slice(bytes);
    let hl = bytes.first().map_or(20, |b| (b & 0xF) as usize * 4);
    p.set_network_header(0, hl);
    p
}

/// An Ethernet frame carrying `ipbytes`, annotated at offset 14.
fn ether_ip_packet(ipbytes: &[u8]) -> Packet {
    let mut p = Packet::from_slice(&ether(0x0800, ipbytes));
    p.set_network_header(14, (ipbytes[0] & 0xF) as usize * 4);
    p
}

/// The output each packet came out of (None: dropped).
fn classify(h: &mut Harness, pkts: Vec<Packet>) -> Vec<Option<usize>> {
    let n = pkts.len();
    // Tag packets by their position using a copy of their bytes.
    let tags: Vec<Vec<u8>> = pkts.iter().map(|p| p.data().to_vec()).collect();
    let outs = h.push(0, pkts);
    let mut res = vec![None; n];
    let mut used = vec![false; n];
    for (port, ps) in outs.iter().enumerate() {
        for p in ps {
            let i = (0..n)
                .find(|&i| !used[i] && tags[i] == p.data())
                .expect("unknown packet came out");
            used[i] = true;
            res[i] = Some(port);
        }
    }
    res
}

fn one(h: &mut Harness, p: Packet) -> Option<usize> {
    classify(h, vec![p])[0]
}

fn ipc(patterns: &str, nout: usize) -> Harness {
    Harness::new(&IPClassifierClass, patterns, 1, nout)
}

/// Does the single IPClassifier pattern match this IP packet?
fn matches(pattern: &str, p: Packet) -> bool {
    let mut h = ipc(pattern, 1);
    one(&mut h, p) == Some(0)
}

fn tcp_pkt(sport: u16, dport: u16, flags: u8) -> Packet {
    ip_packet(&ip().bytes(&tcp(sport, dport, flags, 512)))
}

fn udp_pkt(sport: u16, dport: u16) -> Packet {
    let mut h = ip();
    h.proto = 17;
    ip_packet(&h.bytes(&udp(sport, dport)))
}

fn icmp_pkt(ty: u8) -> Packet {
    let mut h = ip();
    h.proto = 1;
    ip_packet(&h.bytes(&icmp(ty, 0)))
}

// ---- Classifier ----

#[test]
fn classifier_click_doc_example() {
    let mut h = Harness::new(
        &ClassifierClass,
        "12/0806 20/0001, 12/0806 20/0002, 12/0800, -",
        1,
        4,
    );
    let pkts = vec![
        Packet::from_slice(&arp(1)),
        Packet::from_slice(&arp(2)),
        Packet::from_slice(&ether(0x0800, &ip().bytes(&tcp(1, 2, 0, 0)))),
        Packet::from_slice(&ether(0x86dd, &[0u8; 40])),
        Packet::from_slice(&arp(3)),
        // ARP type but cut before the opcode: too short for 20/0001.
        Packet::from_slice(&arp(1)[..20]),
        Packet::from_slice(&[]),
    ];
    assert_eq!(
        classify(&mut h, pkts),
        vec![Some(0), Some(1), Some(2), Some(3), Some(3), Some(3), Some(3)]
    );
}

#[test]
fn classifier_masks_wildcards_negation() {
    let mut h = Harness::new(&ClassifierClass, "0/4?, 0/80%f0, !0/00%01 1/aa, 1/0102??04", 1, 4);
    assert_eq!(one(&mut h, Packet::from_slice(&[0x45])), Some(0));
    assert_eq!(one(&mut h, Packet::from_slice(&[0x8f])), Some(1));
    // low bit of byte 0 set (so `!0/00%01` holds) and byte 1 == aa
    assert_eq!(one(&mut h, Packet::from_slice(&[0x01, 0xaa])), Some(2));
    assert_eq!(one(&mut h, Packet::from_slice(&[0x02, 0xaa])), None);
    // a 4-byte value spanning two words, with a wildcard byte
    assert_eq!(one(&mut h, Packet::from_slice(&[0x00, 1, 2, 0x77, 4])), Some(3));
    assert_eq!(one(&mut h, Packet::from_slice(&[0x00, 1, 2, 0x77, 5])), None);
    assert_eq!(one(&mut h, Packet::from_slice(&[0x00, 1, 2, 0x77])), None);
}

#[test]
fn classifier_negated_clause_matches_short_packets() {
    // Click: a clause on bytes past the end fails, so its negation succeeds.
    let mut h = Harness::new(&ClassifierClass, "!12/0800, -", 1, 2);
    assert_eq!(one(&mut h, Packet::from_slice(&[0u8; 10])), Some(0));
    assert_eq!(one(&mut h, Packet::from_slice(&ether(0x0800, &[]))), Some(1));
    assert_eq!(one(&mut h, Packet::from_slice(&ether(0x0806, &[]))), Some(0));
}

#[test]
fn classifier_offsets_relative_to_data_start() {
    let mut h = Harness::new(&ClassifierClass, "0/45", 1, 1);
    let mut p = Packet::from_slice(&ether(0x0800, &ip().bytes(&[])));
    assert_eq!(one(&mut h, p.clone()), None);
    p.pull(14);
    assert_eq!(one(&mut h, p), Some(0));
}

#[test]
fn single_test_batches_keep_order_per_output() {
    // The router's `Classifier(12/0800, -)` with IP and ARP frames interleaved: IP
    // first, ARP first, ARP last, and all IP; each output keeps arrival order.
    let v4 = |tag: u8| ether(0x0800, &[0x45, tag]);
    let arp_tagged = |tag: u8| ether(0x0806, &[0, 1, tag]);
    let firsts = |v: &Vec<Packet>| v.iter().map(|p| p.data().to_vec()).collect::<Vec<_>>();
    for (input, want0, want1) in [
        (
            vec![v4(1), arp_tagged(2), v4(3), v4(4), arp_tagged(5)],
            vec![v4(1), v4(3), v4(4)],
            vec![arp_tagged(2), arp_tagged(5)],
        ),
        (
            vec![arp_tagged(1), v4(2), v4(3)],
            vec![v4(2), v4(3)],
            vec![arp_tagged(1)],
        ),
        (
            vec![v4(1), v4(2), arp_tagged(3)],
            vec![v4(1), v4(2)],
            vec![arp_tagged(3)],
        ),
        (vec![v4(1), v4(2), v4(3)], vec![v4(1), v4(2), v4(3)], vec![]),
    ] {
        let mut h = Harness::new(&ClassifierClass, "12/0800, -", 1, 2);
        let out = h.push(0, input.iter().map(|b| Packet::from_slice(b)).collect());
        assert_eq!(firsts(&out[0]), want0);
        assert_eq!(firsts(&out[1]), want1);
    }
    // The match going to output 1 and the rest to output 0.
    let mut h = Harness::new(&ClassifierClass, "!12/0800, -", 1, 2);
    let input = [arp_tagged(1), v4(2), arp_tagged(3), Vec::new(), v4(4)];
    let out = h.push(0, input.iter().map(|b| Packet::from_slice(b)).collect());
    assert_eq!(firsts(&out[0]), vec![arp_tagged(1), arp_tagged(3), Vec::new()]);
    assert_eq!(firsts(&out[1]), vec![v4(2), v4(4)]);
    // One pattern, one output: the packets that do not match are dropped, the rest
    // keep their order; a frame too short for the test does not match.
    let mut h = Harness::new(&ClassifierClass, "12/0800", 1, 1);
    let out = h.push(
        0,
        vec![
            Packet::from_slice(&v4(1)),
            Packet::from_slice(&arp_tagged(2)),
            Packet::from_slice(&[0u8; 13]),
            Packet::from_slice(&v4(3)),
        ],
    );
    assert_eq!(firsts(&out[0]), vec![v4(1), v4(3)]);
    // IP mode, single test: the same with IPClassifier on the network header.
    let mut h = Harness::new(&IPClassifierClass, "udp, -", 1, 2);
    let (u, t) = (udp_pkt(1, 2), tcp_pkt(1, 2, 0x02));
    let out = h.push(0, vec![u.clone(), t.clone(), u.clone()]);
    assert_eq!(firsts(&out[0]), vec![u.data().to_vec(), u.data().to_vec()]);
    assert_eq!(firsts(&out[1]), vec![t.data().to_vec()]);
}

#[test]
fn classifier_errors() {
    let c = &ClassifierClass;
    assert_eq!(
        build_error(c, "12/0800, -", 1, 3),
        "e :: Classifier: need 3 arguments, one per output port"
    );
    assert_eq!(
        build_error(c, "x/08", 1, 1),
        "e :: Classifier: pattern 0: expected a digit"
    );
    assert_eq!(
        build_error(c, "-, 12 0800", 1, 2),
        "e :: Classifier: pattern 1: expected '/'"
    );
    assert_eq!(
        build_error(c, "12/0", 1, 1),
        "e :: Classifier: pattern 0: value has less than 2 hex digits"
    );
    assert_eq!(
        build_error(c, "12/080", 1, 1),
        "e :: Classifier: pattern 0: value has odd number of hex digits"
    );
    assert_eq!(
        build_error(c, "12/0800%fff", 1, 1),
        "e :: Classifier: pattern 0: mask has too few hex digits"
    );
    assert_eq!(
        build_error(c, "12/08%ffff", 1, 1),
        "e :: Classifier: pattern 0: mask has too many hex digits"
    );
    assert_eq!(
        build_error(c, "!", 1, 1),
        "e :: Classifier: pattern 0: expected a digit"
    );
}

#[test]
fn expressions_nested_past_the_limit_are_refused_not_a_crash() {
    let c = &IPClassifierClass;
    let deep = "e :: IPClassifier: pattern 0: expression nested too deeply";
    // 30,000 ternaries, nested in their else branches: once a stack overflow.
    let chain = format!("{}icmp, -", "tcp ? udp : ".repeat(30_000));
    assert_eq!(build_error(c, &chain, 1, 2), deep);
    let parens = format!("{}tcp{}, -", "(".repeat(1_000), ")".repeat(1_000));
    assert_eq!(build_error(c, &parens, 1, 2), deep);
    assert_eq!(
        build_error(c, &format!("{}tcp, -", "not ".repeat(100_000)), 1, 2),
        deep
    );
    // A chain of 150 is within the limit and means what it says: TCP takes the first
    // branch (false), UDP reaches the last test (true), ICMP falls through (false).
    let ok = format!("{}udp ? true : false, -", "tcp ? false : ".repeat(150));
    let mut h = Harness::new(c, &ok, 1, 2);
    assert_eq!(one(&mut h, udp_pkt(1, 2)), Some(0));
    assert_eq!(one(&mut h, tcp_pkt(1, 2, 0)), Some(1));
    assert_eq!(one(&mut h, icmp_pkt(8)), Some(1));
}

#[test]
fn classifier_program_handler() {
    // An ARP frame that is not a request goes straight to [2]: its bytes 12-13 are
    // 08 06, so 12/0800 cannot match (the plain program tested it: "no->step 2").
    let h = Harness::new(&ClassifierClass, "12/0806 20/0001, 12/0800, -", 1, 3);
    assert_eq!(
        h.read("program"),
        "  0 12/08060000%ffff0000  yes->step 1  no->step 2\n\
        \x20 1 20/00010000%ffff0000  yes->[0]  no->[2]\n\
        \x20 2 12/08000000%ffff0000  yes->[1]  no->[2]\n"
    );
    let h = Harness::new(&ClassifierClass, "-, 12/0800", 1, 2);
    assert_eq!(h.read("program"), "all->[0]\n");
}

// ---- IPClassifier: the Click documentation's examples ----

#[test]
fn ipclassifier_doc_example_syn_fin() {
    let mut h = ipc(
        "10.0.0.0/24 and syn, 10.0.0.0/24 and fin ack, 10.0.0.0/24 and tcp, -",
        4,
    );
    let mut other = ip();
    other.src = [10, 0, 1, 1];
    other.dst = [10, 0, 2, 2];
    let mut udp_h = ip();
    udp_h.proto = 17;
    let pkts = vec![
        tcp_pkt(1000, 80, 0x02),
        tcp_pkt(1000, 80, 0x11),
        tcp_pkt(1000, 80, 0x01),
        ip_packet(&other.bytes(&tcp(1000, 80, 0x02, 0))),
        ip_packet(&udp_h.bytes(&udp(1, 2))),
    ];
    assert_eq!(
        classify(&mut h, pkts),
        vec![Some(0), Some(1), Some(2), Some(3), Some(3)]
    );
}

#[test]
fn ipclassifier_doc_example_ports() {
    let mut h = ipc("dst tcp port 8000 or 8080, dst tcp port > 1023, tcp", 3);
    let pkts = vec![
        tcp_pkt(5, 8080, 0),
        tcp_pkt(5, 8000, 0),
        tcp_pkt(5, 2000, 0),
        tcp_pkt(5, 1023, 0),
        tcp_pkt(5, 1024, 0),
        udp_pkt(5, 8080),
    ];
    assert_eq!(
        classify(&mut h, pkts),
        vec![Some(0), Some(0), Some(1), Some(2), Some(1), None]
    );
}

// ---- primitives ----

#[test]
fn hosts_and_nets() {
    let p = || tcp_pkt(1, 2, 0); // 10.0.0.1 -> 192.168.1.2
    assert!(matches("src host 10.0.0.1", p()));
    assert!(!matches("dst host 10.0.0.1", p()));
    assert!(matches("host 192.168.1.2", p()));
    assert!(matches("src 10.0.0.1", p()));
    assert!(matches("10.0.0.1", p()));
    assert!(matches("dst net 192.168.0.0/16", p()));
    assert!(!matches("src net 192.168.0.0/16", p()));
    assert!(matches("net 192.168.1.0 mask 255.255.255.0", p()));
    assert!(matches("192.168/16", p()));
    assert!(matches("src or dst net 10.0.0.0/8", p()));
    assert!(!matches("src and dst net 10.0.0.0/8", p()));
    assert!(matches("src and dst net 0.0.0.0/0", p()));
    assert!(matches("src host != 10.0.0.2", p()));
    assert!(!matches("host != 10.0.0.1", p()));
    assert!(matches("src host & 255.0.0.0 10.9.9.9", p()));
    // implicit carry-over of "src": second address is also a source test
    assert!(matches("src 1.1.1.1 or 10.0.0.1", p()));
    assert!(!matches("src 1.1.1.1 or 192.168.1.2", p()));
}

#[test]
fn ports_names_ranges_and_comparisons() {
    assert!(matches("port 80", tcp_pkt(1, 80, 0)));
    assert!(matches("port 80", udp_pkt(80, 1)));
    assert!(matches("www", tcp_pkt(1, 80, 0)));
    assert!(matches("dst port http", tcp_pkt(1, 80, 0)));
    assert!(matches("src port ssh", tcp_pkt(22, 80, 0)));
    assert!(matches("udp port domain", udp_pkt(5353, 53)));
    assert!(!matches("tcp port domain", udp_pkt(5353, 53)));
    assert!(matches("tcp port 80", tcp_pkt(80, 1, 0)));
    assert!(!matches("udp port 80", tcp_pkt(80, 1, 0)));
    assert!(matches("src port 80 or 81", tcp_pkt(81, 1, 0)));
    assert!(!matches("src port 80 or 81", tcp_pkt(1, 81, 0)));
    assert!(matches("dst port > 1023", tcp_pkt(1, 1024, 0)));
    assert!(!matches("dst port > 1023", tcp_pkt(1, 1023, 0)));
    assert!(matches("dst port >= 1023", tcp_pkt(1, 1023, 0)));
    assert!(matches("dst port < 1024", tcp_pkt(1, 1023, 0)));
    assert!(!matches("dst port < 1024", tcp_pkt(1, 1024, 0)));
    assert!(matches("dst port <= 1024", tcp_pkt(1, 1024, 0)));
    assert!(matches(
        "dst port >= 1000 and dst port <= 2000",
        tcp_pkt(1, 1500, 0)
    ));
    assert!(!matches(
        "dst port >= 1000 and dst port <= 2000",
        tcp_pkt(1, 2001, 0)
    ));
    assert!(matches("dst port == 7", tcp_pkt(1, 7, 0)));
    assert!(matches("src tcp port & 10 == 8", tcp_pkt(12, 1, 0)));
    assert!(!matches("src tcp port & 10 == 8", tcp_pkt(10, 1, 0)));
    // != keeps the protocol test; not() does not
    assert!(matches("src tcp port != 5", tcp_pkt(6, 1, 0)));
    assert!(!matches("src tcp port != 5", udp_pkt(6, 1)));
    assert!(matches("not src tcp port 5", udp_pkt(6, 1)));
    assert!(!matches("icmp type != 4", tcp_pkt(1, 1, 0)));
}

#[test]
fn protocols() {
    assert!(matches("tcp", tcp_pkt(1, 2, 0)));
    assert!(!matches("tcp", udp_pkt(1, 2)));
    assert!(matches("udp", udp_pkt(1, 2)));
    assert!(matches("icmp", icmp_pkt(8)));
    assert!(matches("ip proto tcp", tcp_pkt(1, 2, 0)));
    assert!(matches("proto 17", udp_pkt(1, 2)));
    assert!(matches("proto != 6", udp_pkt(1, 2)));
    assert!(!matches("proto != tcp", tcp_pkt(1, 2, 0)));
    assert!(matches("ip proto tcpudp", udp_pkt(1, 2)));
    assert!(!matches("ip proto tcpudp", icmp_pkt(8)));
    let mut gre = ip();
    gre.proto = 47;
    assert!(matches("proto 47", ip_packet(&gre.bytes(&[0; 4]))));
    assert!(matches("proto > 40", ip_packet(&gre.bytes(&[0; 4]))));
    assert!(matches("tcp or udp", udp_pkt(1, 2)));
    assert!(matches("tcp or 17", udp_pkt(1, 2)));
}

#[test]
fn ip_header_fields() {
    let mut h = ip();
    h.tos = 0xb9; // dscp 46, ecn 01
    h.ttl = 5;
    h.id = 777;
    let p = || ip_packet(&h.bytes(&tcp(1, 2, 0, 0)));
    assert!(matches("ip vers 4", p()));
    assert!(matches("ip hl 5", p()));
    assert!(matches("ip tos 0xb9", p()));
    assert!(matches("ip dscp 46", p()));
    assert!(matches("ip ect", p()));
    assert!(matches("ip ect 1", p()));
    assert!(!matches("ip ce", p()));
    assert!(matches("ip ttl 5", p()));
    assert!(matches("ttl < 6", p()));
    assert!(!matches("ttl > 5", p()));
    assert!(matches("ip ttl 4 or 5", p()));
    assert!(matches("ip id 777", p()));
    assert!(matches("ip len 40", p()));
    assert!(matches("ip unfrag", p()));
    assert!(!matches("ip frag", p()));
    h.tos = 0x03;
    let ce = ip_packet(&h.bytes(&[]));
    assert!(matches("ip ce", ce));
    h.tos = 0;
    assert!(!matches("ip ect", ip_packet(&h.bytes(&[]))));
}

#[test]
fn tcp_flags_window_and_icmp_types() {
    for (name, bit) in [
        ("syn", 2),
        ("ack", 0x10),
        ("fin", 1),
        ("rst", 4),
        ("psh", 8),
        ("urg", 0x20),
    ] {
        assert!(
            matches(&format!("tcp opt {}", name), tcp_pkt(1, 2, bit)),
            "{}",
            name
        );
        assert!(matches(name, tcp_pkt(1, 2, bit | 0x40)), "{}", name);
        assert!(!matches(name, tcp_pkt(1, 2, !bit)), "{}", name);
    }
    assert!(matches("syn && ack", tcp_pkt(1, 2, 0x12)));
    assert!(!matches("syn ack", tcp_pkt(1, 2, 0x02)));
    assert!(matches("tcp win 512", tcp_pkt(1, 2, 0)));
    assert!(matches("tcp win > 500", tcp_pkt(1, 2, 0)));
    assert!(matches("icmp type echo", icmp_pkt(8)));
    assert!(matches("icmp type echo-reply", icmp_pkt(0)));
    assert!(matches("echo-reply", icmp_pkt(0)));
    assert!(matches("icmp type 3", icmp_pkt(3)));
    assert!(matches("icmp type unreachable", icmp_pkt(3)));
    assert!(!matches("icmp type echo", icmp_pkt(0)));
}

#[test]
fn bracket_fields() {
    let p = || tcp_pkt(0x0102, 0x0304, 0x12);
    assert!(matches("ip[9] == 6", p()));
    assert!(matches("ip[12:4] == 0x0a000001", p()));
    assert!(matches("ip[8:2] == 0x4006", p()));
    assert!(matches("transp[0:2] == 0x0102", p()));
    assert!(matches("tcp[13] & 2 != 0", p()));
    assert!(!matches("tcp[13] & 1 != 0", p()));
    assert!(matches("udp[2:2] = 0x0304", udp_pkt(9, 0x0304)));
    assert!(!matches("udp[2:2] = 0x0304", p()));
    assert!(matches("ip[0,1] == 0x4500", p()));
}

#[test]
fn connectives() {
    let t = || tcp_pkt(1, 80, 0x02);
    assert!(matches("tcp and dst port 80", t()));
    assert!(matches("tcp && dst port 80", t()));
    assert!(matches("tcp dst port 80", t()));
    assert!(matches("udp or dst port 80", t()));
    assert!(matches("udp || dst port 80", t()));
    assert!(matches("not udp", t()));
    assert!(matches("! udp", t()));
    assert!(matches("!udp", t()));
    assert!(matches("not not tcp", t()));
    assert!(matches("(udp or tcp) and (dst port 80)", t()));
    assert!(!matches("not (udp or tcp)", t()));
    assert!(matches("true", t()));
    assert!(!matches("false", t()));
    assert!(matches("-", t()));
    assert!(matches("any", t()));
    assert!(matches("all", t()));
    assert!(matches("tcp ? dst port 80 : false", t()));
    assert!(!matches("udp ? true : dst port 81", t()));
    assert!(matches("udp ? false : icmp ? false : syn", t()));
    // "and" binds tighter than "or"
    assert!(matches("udp and false or tcp", t()));
    assert!(!matches("udp and (false or tcp)", t()));
}

#[test]
fn fragments_only_first_fragment_has_transport_fields() {
    let mut h = ip();
    h.frag = 0x2000; // MF, offset 0: first fragment
    let first = || ip_packet(&h.bytes(&tcp(1, 80, 2, 0)));
    assert!(matches("dst port 80", first()));
    assert!(matches("ip frag", first()));
    assert!(matches("syn", first()));
    let mut later = ip();
    later.frag = 0x0003; // offset 24 bytes; payload bytes look like a TCP header
    let l = || ip_packet(&later.bytes(&tcp(1, 80, 2, 0)));
    assert!(!matches("dst port 80", l()));
    assert!(!matches("syn", l()));
    assert!(!matches("tcp win 0", l()));
    assert!(!matches("transp[0:2] == 1", l()));
    assert!(matches("tcp", l()));
    assert!(matches("ip frag", l()));
    assert!(!matches("ip unfrag", l()));
    assert!(matches("src host 10.0.0.1", l()));
    // a negated port test on a later fragment: not(port test) holds
    assert!(matches("not dst port 80", l()));
    assert!(!matches("dst port != 80", l()));
}

#[test]
fn short_and_truncated_packets() {
    let full = ip().bytes(&tcp(1, 80, 2, 0));
    // IP header cut after 14 bytes: addresses are missing.
    let mut p = Packet::from_slice(&full[..14]);
    p.set_network_header(0, 20);
    assert!(!matches("src host 10.0.0.1", p.clone()));
    assert!(matches("not src host 10.0.0.1", p.clone()));
    assert!(!matches("src host != 10.0.0.1", p.clone()));
    assert!(matches("ip ttl 64", p.clone()));
    assert!(matches("tcp", p.clone()));
    assert!(!matches("dst port 80", p.clone()));
    // Transport header with only its first two bytes: the source port is readable.
    let mut p = Packet::from_slice(&full[..22]);
    p.set_network_header(0, 20);
    assert!(matches("src port 1", p.clone()));
    assert!(!matches("dst port 80", p.clone()));
    assert!(!matches("dst port != 80", p.clone()));
    assert!(!matches("syn", p.clone()));
    assert!(matches("not syn", p.clone()));
    // Nothing at all.
    let mut p = Packet::from_slice(&[]);
    p.set_network_header(0, 20);
    assert!(!matches("ip vers 4", p.clone()));
    assert!(!matches("ttl > 3", p.clone()));
    assert!(!matches("ttl <= 3", p.clone()));
    assert!(matches("true", p.clone()));
    assert!(matches("ip ttl 4 or not ip ttl 4", p));
}

#[test]
fn ip_options_and_header_annotation() {
    let mut h = ip();
    h.options = vec![1, 1, 1, 0]; // NOP NOP NOP EOL: header length 24
    let bytes = h.bytes(&tcp(1, 80, 2, 0));
    assert!(matches("dst port 80 and ip hl 6", ip_packet(&bytes)));
    assert!(matches("syn", ip_packet(&bytes)));
    // Behind an Ethernet header, with the annotation pointing at the IP header.
    assert!(matches(
        "dst port 80 and src host 10.0.0.1",
        ether_ip_packet(&bytes)
    ));
    // Without the annotation the data start is taken as the IP header.
    assert!(matches(
        "dst port 80 and src host 10.0.0.1",
        Packet::from_slice(&bytes)
    ));
    assert!(!matches(
        "src host 10.0.0.1",
        Packet::from_slice(&ether(0x0800, &bytes))
    ));
}

#[test]
fn ipfilter_actions() {
    let mut h = Harness::new(
        &IPFilterClass,
        "deny src 10.0.0.99, allow tcp dst port 80, 2 udp, drop icmp, 1 all",
        1,
        3,
    );
    let mut bad = ip();
    bad.src = [10, 0, 0, 99];
    let mut gre = ip();
    gre.proto = 47;
    let pkts = vec![
        ip_packet(&bad.bytes(&tcp(1, 80, 0, 0))),
        tcp_pkt(1, 80, 0),
        udp_pkt(1, 2),
        icmp_pkt(8),
        ip_packet(&gre.bytes(&[0; 4])),
        tcp_pkt(1, 81, 0),
    ];
    assert_eq!(
        classify(&mut h, pkts),
        vec![None, Some(0), Some(2), None, Some(1), Some(1)]
    );
    let mut h = Harness::new(&IPFilterClass, "allow", 1, 1);
    assert_eq!(one(&mut h, udp_pkt(1, 2)), Some(0));
    let mut h = Harness::new(&IPFilterClass, "deny all", 1, 1);
    assert_eq!(one(&mut h, udp_pkt(1, 2)), None);
}

fn ipc_err(pattern: &str) -> String {
    build_error(&IPClassifierClass, pattern, 1, 1)
}

#[test]
fn ip_pattern_errors() {
    let pre = "e :: IPClassifier: pattern 0: ";
    let err = |p: &str| {
        ipc_err(p)
            .strip_prefix(pre)
            .map(str::to_string)
            .unwrap_or_else(|| ipc_err(p))
    };
    assert_eq!(err("frobnicate"), "empty term near 'frobnicate'");
    assert_eq!(err("tcp port"), "'port': value missing");
    assert_eq!(err("src port"), "'src port': value missing");
    assert_eq!(err("ip"), "partial directive");
    assert_eq!(err("5"), "specify header field or 'port'");
    assert_eq!(err("tcp and"), "missing expression");
    assert_eq!(err("(tcp"), "missing ')'");
    assert_eq!(err("tcp )"), "garbage after expression at ')'");
    assert_eq!(err("not"), "missing expression after 'not'");
    assert_eq!(
        err("echo"),
        "'echo' is ambiguous; try 'port echo', 'icmp type echo'"
    );
    assert_eq!(err("udp syn"), "'udp syn' is meaningless; try 'tcp opt syn'");
    assert_eq!(err("ip ttl 256"), "'ip ttl': out of range, bound 255");
    assert_eq!(err("port 70000"), "'port': out of range, bound 65535");
    assert_eq!(err("ip ttl & 0x100 1"), "'ip ttl': mask out of range, bound 0xFF");
    assert_eq!(err("ttl > foo"), "dangling operator near 'foo'");
    assert_eq!(err("ip ttl tos 5"), "type specified twice");
    assert_eq!(err("src dst host 1.2.3.4"), "'src' or 'dst' specified twice");
    assert_eq!(err("tcp udp"), "transport protocol specified twice");
    assert_eq!(err("host 1.2.3.0/24"), "'ip host': address missing");
    assert_eq!(err("net 1.2.3.4"), "'ip net': address missing");
    assert_eq!(err("host > 1.2.3.4"), "'ip host': operator not supported");
    assert_eq!(err("ip frag 1"), "'ip frag': value not supported");
    assert_eq!(err("tcp opt != syn"), "'tcp opt': operator or mask not supported");
    assert_eq!(
        err("udp opt syn"),
        "'tcp opt udp syn' is meaningless; try 'tcp opt syn'"
    );
    assert_eq!(err("ip[2:4] == 1"), "field [2:4] does not fit in a single word");
    assert_eq!(
        err("ip[0:5] == 1"),
        "LEN in '[POS:LEN]' out of range, should be between 1 and 4"
    );
    assert_eq!(
        err("ip[x] == 1"),
        "syntax error after '[', expected '[POS]' or '[POS:LEN]'"
    );
    assert_eq!(err("ip[0 == 1"), "missing ']'");
    assert_eq!(err("ttl & 0 == 1"), "zero mask ignored");
    assert_eq!(err("tcp ? syn"), "missing ':' in ternary expression");
    assert_eq!(
        build_error(&IPClassifierClass, "tcp", 1, 2),
        "e :: IPClassifier: need 2 arguments, one per output port"
    );
    let f = |c: &str, n: usize| build_error(&IPFilterClass, c, 1, n);
    assert_eq!(f("3 tcp", 2), "e :: IPFilter: pattern 0: slot '3' out of range");
    assert_eq!(
        f("allow tcp, maybe udp", 1),
        "e :: IPFilter: pattern 1: unknown slot ID 'maybe'"
    );
    assert_eq!(
        f("allow tcp", 0),
        "e :: IPFilter: pattern 0: 'allow' is meaningless, element has zero outputs"
    );
    assert_eq!(f("allow tcp, \"\"", 1), "e :: IPFilter: empty pattern 1");
}

#[test]
fn ip_program_handler() {
    let h = ipc("tcp, -", 2);
    assert_eq!(
        h.read("program"),
        "  0 ip+8/00060000%00ff0000  yes->[0]  no->[1]\n"
    );
    let h = Harness::new(&IPFilterClass, "drop all", 1, 1);
    assert_eq!(h.read("program"), "all->[X]\n");
}

// ---- properties ----

const TOKENS: &[&str] = &[
    "ip",
    "src",
    "dst",
    "host",
    "net",
    "port",
    "proto",
    "tcp",
    "udp",
    "icmp",
    "and",
    "or",
    "not",
    "!",
    "&&",
    "||",
    "(",
    ")",
    "[",
    "]",
    "?",
    ":",
    "==",
    "!=",
    "<",
    ">",
    "<=",
    ">=",
    "&",
    "0",
    "1",
    "80",
    "255",
    "65536",
    "0x1F",
    "10.0.0.1",
    "10.0.0.0/8",
    "mask",
    "255.0.0.0",
    "ttl",
    "tos",
    "dscp",
    "ect",
    "ce",
    "frag",
    "unfrag",
    "vers",
    "hl",
    "id",
    "len",
    "opt",
    "win",
    "type",
    "syn",
    "ack",
    "www",
    "echo",
    "true",
    "false",
    "-",
    "any",
    "transp",
    "tcpudp",
    "0:2",
    "2",
    ",",
    "12:4",
    "3",
    "foo",
];

fn pattern_strategy() -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(TOKENS), 0..12).prop_map(|v| v.join(" "))
}

fn view_of(p: &Packet) -> View<'_> {
    super::ip_view(p)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    /// Random IP patterns never panic the parser, and when accepted, the compiled
    /// program agrees with direct evaluation of the expression on random packets
    /// (short ones included), never reading past the packet.
    #[test]
    fn ip_patterns_compile_faithfully(
        pat in pattern_strategy(),
        pkts in prop::collection::vec((prop::collection::vec(any::<u8>(), 0..64), 0usize..30, any::<bool>()), 1..6),
    ) {
        if let Ok((action, e)) = parse_filter_pattern(0, &format!("0 {}", pat), 1) {
            prop_assert_eq!(action, Action::Output(0));
            let prog = Program::compile(&[(e.clone(), Target::Out(0))]);
            for (bytes, hl, annotate) in &pkts {
                let mut p = Packet::from_slice(bytes);
                if *annotate {
                    p.set_network_header(0, (*hl).min(bytes.len()));
                }
                let v = view_of(&p);
                prop_assert_eq!(prog.run(&v) == Some(0), e.eval(&v));
            }
        }
    }

    /// Random text never panics any of the three elements' configuration.
    #[test]
    fn arbitrary_text_never_panics(s in "[ -~]{0,40}") {
        let _ = super::bytes::parse_pattern(0, &s);
        let _ = parse_filter_pattern(0, &s, 3);
        let _ = crate::testing::build(&ClassifierClass, &s, 1, 1);
        let _ = crate::testing::build(&IPFilterClass, &s, 1, 2);
    }

    /// Classifier patterns: compiled program equals direct evaluation on any bytes.
    #[test]
    fn byte_patterns_compile_faithfully(
        clauses in prop::collection::vec((any::<bool>(), 0u32..40, prop::collection::vec(any::<(u8, u8)>(), 1..6)), 0..4),
        data in prop::collection::vec(any::<u8>(), 0..48),
    ) {
        let pat: Vec<String> = clauses.iter().map(|(neg, off, bytes)| {
            let v: String = bytes.iter().map(|(b, _)| format!("{:02x}", b)).collect();
            let m: String = bytes.iter().map(|(_, m)| format!("{:02x}", m)).collect();
            format!("{}{}/{}%{}", if *neg { "!" } else { "" }, off, v, m)
        }).collect();
        let e: Expr = super::bytes::parse_pattern(0, &pat.join(" ")).unwrap();
        let prog = Program::compile(&[(e.clone(), Target::Out(0))]);
        let v = View { data: &data, net: &[], transp: &[] };
        prop_assert_eq!(prog.run(&v) == Some(0), e.eval(&v));
    }
}

const ATOMS: &[&str] = &[
    "tcp",
    "udp",
    "icmp",
    "src host 10.0.0.1",
    "dst net 192.168.0.0/16",
    "port 80",
    "src port > 1023",
    "dst port <= 53",
    "syn",
    "ack",
    "ip ttl < 64",
    "ip tos & 0xfc == 0",
    "ip ect",
    "ip ce",
    "ip frag",
    "ip unfrag",
    "ip hl > 5",
    "ip id != 0",
    "ip len >= 40",
    "tcp win > 100",
    "icmp type echo",
    "ip[9] == 17",
    "transp[2:2] > 1000",
    "tcp[13] & 18 == 18",
    "proto != 6",
    "true",
    "false",
    "src or dst port www",
    "src and dst host 10.0.0.1",
    "ip dscp 46",
    "ip vers 4",
];

fn valid_expr() -> impl Strategy<Value = String> {
    let leaf = prop::sample::select(ATOMS).prop_map(str::to_string);
    leaf.prop_recursive(4, 24, 3, |inner| {
        prop_oneof![
            (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("({} and {})", a, b)),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("({} || {})", a, b)),
            inner.clone().prop_map(|a| format!("not {}", a)),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("({}) ({})", a, b)),
            (inner.clone(), inner.clone(), inner).prop_map(|(a, b, c)| format!("({} ? {} : {})", a, b, c)),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    /// Well-formed compound patterns are accepted, and the compiled program agrees
    /// with direct evaluation on random and truncated packets.
    #[test]
    fn compound_patterns_compile_faithfully(
        pat in valid_expr(),
        payload in prop::collection::vec(any::<u8>(), 0..40),
        cut in 0usize..80,
        frag in prop::sample::select(vec![0u16, 0x2000, 0x0001, 0x4000]),
        proto in prop::sample::select(vec![1u8, 6, 17, 47]),
    ) {
        let (_, e) = parse_filter_pattern(0, &format!("0 {}", pat), 1).unwrap();
        let prog = Program::compile(&[(e.clone(), Target::Out(0))]);
        let mut h = ip();
        h.frag = frag;
        h.proto = proto;
        let bytes = h.bytes(&payload);
        let bytes = &bytes[..cut.min(bytes.len())];
        let p = ip_packet(bytes);
        let v = view_of(&p);
        prop_assert_eq!(prog.run(&v) == Some(0), e.eval(&v));
    }
}

#[test]
fn classifier_with_more_than_255_outputs_routes_every_packet() {
    // 299 patterns that never match a zero first byte, then "-": output 299.
    let mut pats: Vec<String> = (0..299).map(|_| "0/ff".to_string()).collect();
    pats.push("-".into());
    let mut h = crate::testing::Harness::new(&super::ClassifierClass, &pats.join(", "), 1, 300);
    let out = h.push_bytes(0, &[0u8; 20]);
    assert_eq!(out[299].len(), 1);
    assert_eq!(out.iter().map(|o| o.len()).sum::<usize>(), 1);
}

// ---- live rule changes through `config` ----

/// A TCP packet from `src` (to 192.168.1.2).
fn tcp_from(src: [u8; 4]) -> Packet {
    let mut h = ip();
    h.src = src;
    ip_packet(&h.bytes(&tcp(1000, 80, 0x02, 512)))
}

#[test]
fn a_config_write_replaces_the_rules_at_every_workers_next_batch() {
    let mut a = Harness::new(&IPFilterClass, "allow src host 10.0.0.1, deny all", 1, 1);
    let mut b = a.another_worker();
    let (h1, h2) = ([10, 0, 0, 1], [10, 0, 0, 2]);
    assert_eq!(
        classify(&mut a, vec![tcp_from(h1), tcp_from(h2)]),
        [Some(0), None]
    );
    assert_eq!(
        classify(&mut b, vec![tcp_from(h1), tcp_from(h2)]),
        [Some(0), None]
    );
    a.write("config", "allow src host 10.0.0.2, deny all").unwrap();
    // Both workers: the new rules from their next batch.
    assert_eq!(
        classify(&mut a, vec![tcp_from(h1), tcp_from(h2)]),
        [None, Some(0)]
    );
    assert_eq!(
        classify(&mut b, vec![tcp_from(h1), tcp_from(h2)]),
        [None, Some(0)]
    );
    assert!(a.read("program").contains("10.0.0.2") || a.read("program").contains("0a000002"));
    // A single test (the fast path of `12/0800, -`) is replaced as well.
    let mut c = Harness::new(&ClassifierClass, "12/0800, -", 1, 2);
    let arp_frame = || Packet::from_slice(&arp(1));
    assert_eq!(one(&mut c, arp_frame()), Some(1));
    c.write("config", "12/0806, -").unwrap();
    assert_eq!(one(&mut c, arp_frame()), Some(0));
}

#[test]
fn a_refused_config_write_leaves_the_rules_as_they_were() {
    let mut f = Harness::new(&IPFilterClass, "allow tcp, deny all", 1, 1);
    let e = f.write("config", "allow tcp port, deny all").unwrap_err();
    assert!(e.contains("port"), "{e}");
    assert_eq!(
        f.write("config", "2 tcp, deny all").unwrap_err(),
        build_error(&IPFilterClass, "2 tcp, deny all", 1, 1)
            .trim_start_matches("e :: IPFilter: ")
            .to_string()
    );
    assert_eq!(one(&mut f, tcp_pkt(1, 2, 0x02)), Some(0));
    // Classifier and IPClassifier keep one pattern per output.
    let mut c = Harness::new(&IPClassifierClass, "tcp, -", 1, 2);
    assert_eq!(
        c.write("config", "tcp, udp, -").unwrap_err(),
        "need 2 arguments, one per output port"
    );
    assert_eq!(one(&mut c, udp_pkt(1, 2)), Some(1));
}

// ---- the optimised program against the plain one ----

use super::program::{Base, Test};
use crate::args::Args;

/// A configuration compiled optimised and plain.
fn both(kind: Kind, config: &str, noutputs: usize) -> (Program, Program) {
    let pats = kind.parse(&Args::new(config).rest(), noutputs).unwrap();
    (Program::compile(&pats), Program::compile_unoptimised(&pats))
}

/// The regions a `Classifier` sees in `data`.
fn data_view(data: &[u8]) -> View<'_> {
    View {
        data,
        net: &[],
        transp: &[],
    }
}

/// The tests `prog` takes for the packet, in order (`ip`: as IPClassifier sees it).
fn taken(prog: &Program, p: &Packet, ip: bool) -> Vec<Test> {
    let v = if ip { view_of(p) } else { data_view(p.data()) };
    prog.trace(&v).1
}

#[test]
fn a_known_protocol_skips_the_other_protocols_tests() {
    let (opt, plain) = both(
        Kind::IPClassifier,
        "tcp dst port 80, tcp dst port 443, udp dst port 53, -",
        4,
    );
    // The tests, written out: IP protocol byte (network header byte 9), fragment
    // offset (bytes 6-7, low 13 bits), destination port (transport bytes 2-3).
    let is_tcp = Test::new(Base::Net, 8, 0x0006_0000, 0x00ff_0000);
    let is_udp = Test::new(Base::Net, 8, 0x0011_0000, 0x00ff_0000);
    let first_frag = Test::new(Base::Net, 4, 0, 0x0000_1fff);
    let port = |p: u32| Test::new(Base::Transp, 0, p, 0x0000_ffff);
    // TCP 10.0.0.1:1000 -> 192.168.1.2:22, written out byte by byte.
    let to_22: [u8; 40] = [
        0x45, 0x00, 0x00, 0x28, 0x12, 0x34, 0x00, 0x00, 0x40, 0x06, 0x00, 0x00, 10, 0, 0, 1, 192, 168, 1,
        2, // IP
        0x03, 0xe8, 0x00, 0x16, 0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x02, 0x02, 0x00, 0, 0, 0, 0, // TCP
    ];
    let p = ip_packet(&to_22);
    // Once "tcp?" is yes, "udp?" (the same byte) is no: never tested, nor are "tcp?"
    // and the fragment test again.
    assert_eq!(
        taken(&opt, &p, true),
        vec![is_tcp, first_frag, port(80), port(443)]
    );
    assert_eq!(
        taken(&plain, &p, true),
        vec![
            is_tcp,
            first_frag,
            port(80),
            is_tcp,
            first_frag,
            port(443),
            is_udp
        ]
    );
    assert_eq!(opt.run(&view_of(&p)), Some(3));
    // To port 443: output 1 after 4 tests (the plain program: 6).
    let mut to_443 = to_22;
    to_443[22..24].copy_from_slice(&[0x01, 0xbb]);
    let p = ip_packet(&to_443);
    assert_eq!(
        taken(&opt, &p, true),
        vec![is_tcp, first_frag, port(80), port(443)]
    );
    assert_eq!(taken(&plain, &p, true).len(), 6);
    assert_eq!(opt.run(&view_of(&p)), Some(1));
    // A later fragment of a TCP packet: no port test can match; 2 tests, not 5.
    let mut later = to_443;
    later[7] = 0x10;
    let p = ip_packet(&later);
    assert_eq!(taken(&opt, &p, true), vec![is_tcp, first_frag]);
    assert_eq!(taken(&plain, &p, true).len(), 5);
    assert_eq!(opt.run(&view_of(&p)), Some(3));
    // UDP: "tcp?" no, then the UDP pattern alone.
    let mut dns = to_22;
    dns[9] = 17;
    dns[22..24].copy_from_slice(&[0x00, 0x35]);
    let p = ip_packet(&dns);
    assert_eq!(taken(&opt, &p, true), vec![is_tcp, is_udp, first_frag, port(53)]);
    assert_eq!(opt.run(&view_of(&p)), Some(2));
}

#[test]
fn the_router_classifier_tests_the_ethertype_once() {
    let (opt, plain) = both(
        Kind::Classifier,
        "12/0806 20/0001, 12/0806 20/0002, 12/0800, -",
        4,
    );
    let arp_type = Test::new(Base::Data, 12, 0x0806_0000, 0xffff_0000);
    let ip_type = Test::new(Base::Data, 12, 0x0800_0000, 0xffff_0000);
    let op = |o: u32| Test::new(Base::Data, 20, o << 16, 0xffff_0000);
    let mut frame = [0u8; 42];
    frame[..12].copy_from_slice(&[
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0x11, 0x22, 0x33, 0x44, 0x55,
    ]);
    // An IPv4 frame: 08 00, then the start of an IP header.
    let mut v4 = frame;
    v4[12..16].copy_from_slice(&[0x08, 0x00, 0x45, 0x00]);
    let p = Packet::from_slice(&v4);
    assert_eq!(taken(&opt, &p, false), vec![arp_type, ip_type]);
    assert_eq!(taken(&plain, &p, false), vec![arp_type, ip_type]);
    // An ARP reply: 08 06, hardware 0001, protocol 0800, sizes 6 and 4, opcode 0002.
    let mut reply = frame;
    reply[12..22].copy_from_slice(&[0x08, 0x06, 0x00, 0x01, 0x08, 0x00, 6, 4, 0x00, 0x02]);
    let p = Packet::from_slice(&reply);
    assert_eq!(taken(&opt, &p, false), vec![arp_type, op(1), op(2)]);
    assert_eq!(taken(&plain, &p, false), vec![arp_type, op(1), arp_type, op(2)]);
    assert_eq!(opt.run(&data_view(&reply)), Some(1));
    // Any other ARP opcode: then straight to output 3, never testing 12/0800.
    reply[21] = 0x03;
    let p = Packet::from_slice(&reply);
    assert_eq!(taken(&opt, &p, false), vec![arp_type, op(1), op(2)]);
    assert_eq!(
        taken(&plain, &p, false),
        vec![arp_type, op(1), arp_type, op(2), ip_type]
    );
    assert_eq!(opt.run(&data_view(&reply)), Some(3));
    // An ARP frame cut before the opcode: same path, output 3.
    let cut = &reply[..20];
    let p = Packet::from_slice(cut);
    assert_eq!(taken(&opt, &p, false), vec![arp_type, op(1), op(2)]);
    assert_eq!(opt.run(&data_view(cut)), Some(3));
}

#[test]
fn a_match_decides_only_the_bytes_it_read() {
    let (opt, plain) = both(Kind::Classifier, "12/0800 !12/080045, !12/080645, -", 3);
    let ip_type = Test::new(Base::Data, 12, 0x0800_0000, 0xffff_0000);
    let ip_45 = Test::new(Base::Data, 12, 0x0800_4500, 0xffff_ff00);
    let arp_45 = Test::new(Base::Data, 12, 0x0806_4500, 0xffff_ff00);
    let frame = |tail: &[u8]| {
        let mut f = vec![0u8; 12];
        f.extend_from_slice(tail);
        f
    };
    let run = |prog: &Program, f: &[u8]| prog.trace(&data_view(f));
    // 08 00 and no byte 14: 12/0800 yes does not decide 12/080045 (byte 14 might be
    // there), which is no (too short): output 0.
    let f = frame(&[0x08, 0x00]);
    assert_eq!(run(&opt, &f), (Some(0), vec![ip_type, ip_45]));
    // 08 00 45: pattern 0 fails on its second test, which read bytes 12-14; then
    // 12/080645 is no without a test (byte 13 is 00): output 1 after 2 tests, not 3.
    let f = frame(&[0x08, 0x00, 0x45]);
    assert_eq!(run(&opt, &f), (Some(1), vec![ip_type, ip_45]));
    assert_eq!(run(&plain, &f), (Some(1), vec![ip_type, ip_45, arp_45]));
    // 08 06 45: pattern 1 fails, output 2; 08 06 alone: pattern 1 (too short for
    // 12/080645, so its negation holds), output 1.
    let f = frame(&[0x08, 0x06, 0x45]);
    assert_eq!(run(&opt, &f), (Some(2), vec![ip_type, arp_45]));
    let f = frame(&[0x08, 0x06]);
    assert_eq!(run(&opt, &f), (Some(1), vec![ip_type, arp_45]));
    for f in [frame(&[0x08, 0x00, 0x46]), frame(&[0x08]), frame(&[])] {
        assert_eq!(run(&opt, &f).0, run(&plain, &f).0, "{:02x?}", f);
    }
}

// ---- differential tests: optimised and plain programs answer alike ----

/// The first pattern whose expression holds, by direct evaluation.
fn reference(pats: &[(Expr, Target)], v: &View<'_>) -> Option<u32> {
    match pats.iter().find(|(e, _)| e.eval(v)).map(|p| p.1) {
        Some(Target::Out(p)) => Some(p),
        _ => None,
    }
}

/// Checks `pats` optimised (as compiled, and with other numbers of copies) against
/// plain on every view; an optimised program never takes more steps. The optimised
/// programs and the plain one are checked with switch steps too, wherever 2 members
/// of a chain remain (fewer than `compile` asks for, so that there are more of them).
fn check_views(pats: &[(Expr, Target)], views: &[View<'_>]) -> Result<(), TestCaseError> {
    let plain = Program::compile_unoptimised(pats);
    let mut opts = Program::compile_variants(pats);
    prop_assert_eq!(opts.len(), 3);
    let switched: Vec<Program> = opts
        .iter()
        .chain([&plain])
        .map(|p| p.clone().with_switches(2))
        .collect();
    opts.extend(switched);
    opts.push(Program::compile(pats));
    for opt in &opts {
        for v in views {
            let (a, ta) = opt.trace(v);
            let (b, tb) = plain.trace(v);
            prop_assert_eq!(a, b, "{}\nvs\n{}\n{:?}", opt.unparse(), plain.unparse(), v);
            prop_assert_eq!(opt.run(v), a);
            prop_assert_eq!(a, reference(pats, v));
            prop_assert!(ta.len() <= tb.len());
        }
    }
    Ok(())
}

/// Bytes that patterns below use often, so that tests match often.
const ALPHABET: &[u8] = &[0x00, 0x01, 0x06, 0x08, 0x11, 0x45, 0xff];

fn short_bytes(max: usize) -> impl Strategy<Value = Vec<u8>> {
    let len = prop_oneof![0usize..24, 0usize..max];
    len.prop_flat_map(|n| prop::collection::vec(prop::sample::select(ALPHABET), n))
}

fn byte_clause() -> impl Strategy<Value = String> {
    (
        any::<bool>(),
        prop::sample::select(vec![0u32, 2, 3, 4, 12, 13, 14, 16, 20, 21, 22]),
        prop::collection::vec(
            (
                prop::sample::select(ALPHABET),
                prop::sample::select(vec![0xffu8, 0xff, 0xf0, 0x0f, 0x01, 0x00]),
            ),
            1..5,
        ),
    )
        .prop_map(|(neg, off, bytes)| {
            let v: String = bytes.iter().map(|(b, _)| format!("{:02x}", b)).collect();
            let m: String = bytes.iter().map(|(_, m)| format!("{:02x}", m)).collect();
            format!("{}{}/{}%{}", if neg { "!" } else { "" }, off, v, m)
        })
}

fn byte_pattern() -> impl Strategy<Value = String> {
    prop_oneof![
        1 => Just("-".to_string()),
        8 => prop::collection::vec(byte_clause(), 1..4).prop_map(|v| v.join(" ")),
    ]
}

const HOSTS: &[&str] = &["10.0.0.1", "10.0.0.2", "10.1.0.1", "192.168.1.2"];
const NETS: &[&str] = &[
    "10.0.0.0/8",
    "10.0.0.0/16",
    "10.1.0.0/16",
    "192.168.0.0/16",
    "10.0.0.0/24",
];
const PORTS: &[&str] = &["22", "53", "80", "443"];

fn ip_atom() -> impl Strategy<Value = String> {
    let h = || prop::sample::select(HOSTS);
    let n = || prop::sample::select(NETS);
    let p = || prop::sample::select(PORTS);
    prop_oneof![
        prop::sample::select(vec!["tcp", "udp", "icmp", "ip frag", "ip unfrag", "syn"])
            .prop_map(str::to_string),
        h().prop_map(|h| format!("src host {}", h)),
        h().prop_map(|h| format!("dst host {}", h)),
        h().prop_map(|h| format!("src host != {}", h)),
        n().prop_map(|n| format!("src net {}", n)),
        n().prop_map(|n| format!("dst net {}", n)),
        p().prop_map(|p| format!("dst port {}", p)),
        p().prop_map(|p| format!("tcp dst port {}", p)),
        p().prop_map(|p| format!("udp dst port {}", p)),
        p().prop_map(|p| format!("dst port != {}", p)),
        prop::sample::select(vec!["0", "16", "184"]).prop_map(|t| format!("ip tos {}", t)),
    ]
}

fn ip_expr() -> impl Strategy<Value = String> {
    ip_atom().prop_recursive(3, 12, 2, |inner| {
        prop_oneof![
            (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("({} and {})", a, b)),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("({} or {})", a, b)),
            inner.prop_map(|a| format!("not {}", a)),
        ]
    })
}

fn ip_rule() -> impl Strategy<Value = String> {
    (
        prop::sample::select(vec!["allow", "deny", "1", "2"]),
        prop_oneof![1 => Just("-".to_string()), 8 => ip_expr()],
    )
        .prop_map(|(a, e)| format!("{} {}", a, e))
}

/// An IPv4 packet from a few likely field values, then perhaps damaged and cut.
#[allow(clippy::type_complexity)]
fn ip_bytes() -> impl Strategy<Value = (Vec<u8>, bool)> {
    (
        (
            prop::sample::select(vec![5u8, 5, 6]),
            prop::sample::select(vec![1u8, 6, 6, 17, 47]),
            prop::sample::select(vec![0u8, 16, 184]),
            prop::sample::select(vec![[0u8, 0], [0x20, 0], [0, 1], [0x40, 0]]),
            prop::sample::select(HOSTS),
            prop::sample::select(HOSTS),
        ),
        (
            prop::sample::select(vec![22u16, 53, 80, 443, 1024]),
            prop::sample::select(vec![22u16, 53, 80, 443, 1024]),
            prop::collection::vec((0usize..48, prop::sample::select(ALPHABET)), 0..3),
            prop_oneof![0usize..30, 0usize..80],
            any::<bool>(),
        ),
    )
        .prop_map(
            |((ihl, proto, tos, frag, src, dst), (sport, dport, damage, cut, annotate))| {
                let addr = |s: &str| -> Vec<u8> { s.split('.').map(|x| x.parse::<u8>().unwrap()).collect() };
                let mut v = vec![0x40 | ihl, tos, 0, 60, 0, 1, frag[0], frag[1], 64, proto, 0, 0];
                v.extend(addr(src));
                v.extend(addr(dst));
                v.resize(ihl as usize * 4, 1);
                v.extend(sport.to_be_bytes());
                v.extend(dport.to_be_bytes());
                v.extend([0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x12, 2, 0, 0, 0, 0, 0]);
                v.resize(80, 0);
                for (i, b) in damage {
                    v[i] = b;
                }
                v.truncate(cut);
                (v, annotate)
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 500, ..ProptestConfig::default() })]

    /// Random Classifier configurations on shared offsets: the optimised program
    /// sends every packet, short ones included, where the plain one does.
    #[test]
    fn optimised_byte_patterns_answer_as_plain_ones(
        pats in prop::collection::vec(byte_pattern(), 1..7),
        pkts in prop::collection::vec(short_bytes(80), 24),
    ) {
        let n = pats.len();
        let pats = Kind::Classifier.parse(&pats, n).unwrap();
        let views: Vec<View<'_>> = pkts
            .iter()
            .map(|d| data_view(d))
            .collect();
        check_views(&pats, &views)?;
    }

    /// Random IPFilter configurations from a small vocabulary, on IP packets built
    /// from likely field values, damaged and cut at random.
    #[test]
    fn optimised_ip_patterns_answer_as_plain_ones(
        rules in prop::collection::vec(ip_rule(), 1..7),
        pkts in prop::collection::vec(ip_bytes(), 24),
    ) {
        let pats = Kind::IPFilter.parse(&rules, 3).unwrap();
        let pkts: Vec<Packet> = pkts
            .iter()
            .map(|(b, annotate)| if *annotate { ip_packet(b) } else { Packet::from_slice(b) })
            .collect();
        let views: Vec<View<'_>> = pkts.iter().map(view_of).collect();
        check_views(&pats, &views)?;
    }

    /// Access lists of up to 40 rules on a few words, with repeated values, broken
    /// chains, both short results and mid-chain entries, on short regions: switch
    /// steps (in `check_views`) answer as the plain program.
    #[test]
    fn switched_chains_answer_as_plain_ones(
        rules in prop::collection::vec(chain_rule(), 1..40),
        pkts in prop::collection::vec(short_bytes(12), 32),
    ) {
        let pats: Vec<(Expr, Target)> = rules
            .into_iter()
            .enumerate()
            .map(|(i, e)| (e, if i % 4 == 3 { Target::Drop } else { Target::Out(i as u32 % 5) }))
            .collect();
        let views: Vec<View<'_>> = pkts.iter().map(|d| data_view(d)).collect();
        check_views(&pats, &views)?;
    }

    /// Expressions built directly, on words at any offset (overlapping ones share
    /// bytes) with either short result, on short regions.
    #[test]
    fn optimised_unaligned_words_answer_as_plain_ones(
        pats in prop::collection::vec(unaligned_expr(), 1..6),
        pkts in prop::collection::vec(short_bytes(12), 32),
    ) {
        let pats: Vec<(Expr, Target)> = pats
            .into_iter()
            .enumerate()
            .map(|(i, e)| (e, if i % 3 == 2 { Target::Drop } else { Target::Out(i as u32) }))
            .collect();
        let views: Vec<View<'_>> = pkts
            .iter()
            .map(|d| data_view(d))
            .collect();
        check_views(&pats, &views)?;
    }
}

fn unaligned_test() -> impl Strategy<Value = Expr> {
    (
        0u32..9,
        prop::sample::select(vec![
            0xffff_ffffu32,
            0xffff_0000,
            0xff00_0000,
            0x00ff_0000,
            0x0000_ff00,
            0x0f00_f000,
            0x0100_0000,
            0x0001_0000,
        ]),
        prop::collection::vec(prop::sample::select(ALPHABET), 4),
        any::<bool>(),
    )
        .prop_map(|(off, mask, v, short_match)| {
            let t = Test {
                short_match,
                ..Test::new(
                    Base::Data,
                    off,
                    u32::from_be_bytes([v[0], v[1], v[2], v[3]]),
                    mask,
                )
            };
            Expr::Test(t)
        })
}

fn unaligned_expr() -> impl Strategy<Value = Expr> {
    unaligned_test().prop_recursive(3, 10, 3, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 1..4).prop_map(Expr::and),
            prop::collection::vec(inner.clone(), 1..4).prop_map(Expr::or),
            inner.prop_map(Expr::not),
        ]
    })
}

/// A test of one of a few words, most often the first: chains of them are what
/// switch steps replace, broken where another word, or the other short result,
/// comes between. Values of one or two bytes of [`ALPHABET`], so that they repeat and
/// packets match them.
fn chain_test() -> impl Strategy<Value = Expr> {
    (
        prop::sample::select(vec![0usize, 0, 0, 0, 1, 2, 3]),
        prop::sample::select(ALPHABET),
        prop::sample::select(ALPHABET),
        prop::sample::select(vec![false, false, false, true]),
    )
        .prop_map(|(word, a, b, short_match)| {
            let (offset, mask) = [
                (0, 0xffff_0000),
                (0, 0xff00_0000),
                (1, 0x00ff_ff00),
                (4, 0xffff_0000),
            ][word];
            let v = u32::from_be_bytes([a, b, a, b]);
            Expr::Test(Test {
                short_match,
                ..Test::new(Base::Data, offset, v, mask)
            })
        })
}

/// A rule of an access list on the words of [`chain_test`]: mostly one test; else
/// one and another test (failing the second enters the next rules' chain in its
/// middle), either of two, or the negation of one.
fn chain_rule() -> impl Strategy<Value = Expr> {
    prop_oneof![
        6 => chain_test(),
        2 => (chain_test(), prop_oneof![chain_test(), unaligned_test()])
            .prop_map(|(a, b)| Expr::and(vec![a, b])),
        1 => (chain_test(), chain_test()).prop_map(|(a, b)| Expr::or(vec![a, b])),
        1 => chain_test().prop_map(Expr::not),
    ]
}

// ---- what the optimisation saves ----

/// A small deterministic generator (64-bit LCG, high bits).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u32 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) as u32
    }
    /// True with probability `pct`%.
    fn pct(&mut self, pct: u32) -> bool {
        self.next() % 100 < pct
    }
}

/// An IP packet of a mix seen at a network edge: TCP 80% (to 443, 80, 22 or a high
/// port), UDP 15% (DNS, NTP or other), ICMP 5%; 1% later fragments; sources from
/// `nets` (10.N.x.y) 60% of the time.
fn mixed_ip_packet(r: &mut Lcg, nets: u32) -> Packet {
    let mut h = ip();
    let (proto, dport) = match r.next() % 100 {
        0..=79 => (
            6,
            match r.next() % 100 {
                0..=44 => 443,
                45..=69 => 80,
                70..=79 => 22,
                _ => 1024 + (r.next() % 60000) as u16,
            },
        ),
        80..=94 => (
            17,
            match r.next() % 10 {
                0..=5 => 53,
                6..=7 => 123,
                _ => 1024 + (r.next() % 60000) as u16,
            },
        ),
        _ => (1, 0),
    };
    h.proto = proto;
    if r.pct(1) {
        h.frag = 0x00b9;
    }
    h.src = if nets > 0 && r.pct(60) {
        [10, (r.next() % nets) as u8, r.next() as u8, r.next() as u8]
    } else {
        [172, 16, r.next() as u8, r.next() as u8]
    };
    let payload = match proto {
        6 => tcp(40000, dport, 0x10, 512),
        17 => udp(40000, dport),
        _ => icmp(8, 0),
    };
    ip_packet(&h.bytes(&payload))
}

/// A frame at a router's Ethernet input: IPv4 94%, ARP requests 3%, replies 2%,
/// IPv6 1%.
fn mixed_frame(r: &mut Lcg) -> Packet {
    match r.next() % 100 {
        0..=93 => Packet::from_slice(&ether(0x0800, &ip().bytes(&tcp(1, 443, 0x10, 512)))),
        94..=96 => Packet::from_slice(&arp(1)),
        97..=98 => Packet::from_slice(&arp(2)),
        _ => Packet::from_slice(&ether(0x86dd, &[0x60; 40])),
    }
}

/// The mean number of tests per packet.
fn mean_tests(prog: &Program, pkts: &[Packet], ip: bool) -> f64 {
    let total: usize = pkts.iter().map(|p| taken(prog, p, ip).len()).sum();
    total as f64 / pkts.len() as f64
}

/// Program sizes and mean tests per packet, plain and optimised, for configurations
/// like those routers run, on a realistic packet mix (run with `--nocapture` to see
/// them): the optimised program must take fewer tests per packet on each.
#[test]
fn the_optimisation_saves_tests_on_realistic_configurations() {
    // An ACL of 20 rules on 10.N.0.0/16, allowing or denying one TCP port each.
    let acl: Vec<String> = (0..20)
        .map(|i| {
            format!(
                "{} src net 10.{}.0.0/16 && tcp dst port {}",
                if i % 3 == 2 { "deny" } else { "allow" },
                i,
                [80, 443, 22, 25, 8080][i % 5]
            )
        })
        .chain(["deny all".to_string()])
        .collect();
    let acl = acl.join(", ");
    // A host's firewall.
    let host = [
        "allow tcp dst port 22",
        "allow tcp dst port 80",
        "allow tcp dst port 443",
        "allow udp dst port 53",
        "allow icmp type echo",
        "allow icmp type echo-reply",
        "deny all",
    ]
    .join(", ");
    // Rules on sources and ports interleaved: here copies of steps for some paths pay.
    let mixed = [
        "deny src net 10.0.0.0/8 && tcp dst port 23",
        "allow tcp dst port 22 && src net 10.1.0.0/16",
        "allow udp dst port 53",
        "deny src net 10.2.0.0/16",
        "allow tcp dst port 80",
        "allow tcp dst port 443",
        "allow icmp && src net 10.0.0.0/8",
        "deny all",
    ]
    .join(", ");
    // (kind, configuration, outputs, source nets 10.N of the packets).
    let configs: [(Kind, &str, usize, u32); 5] = [
        (
            Kind::IPClassifier,
            "tcp dst port 80, tcp dst port 443, udp dst port 53, -",
            4,
            0,
        ),
        (
            Kind::Classifier,
            "12/0806 20/0001, 12/0806 20/0002, 12/0800, -",
            4,
            0,
        ),
        (Kind::IPFilter, &acl, 1, 24),
        (Kind::IPFilter, &host, 1, 0),
        (Kind::IPFilter, &mixed, 1, 4),
    ];
    for (kind, config, n, nets) in configs {
        let (opt, plain) = both(kind, config, n);
        let mut r = Lcg(1);
        let ip = kind != Kind::Classifier;
        let pkts: Vec<Packet> = (0..10_000)
            .map(|_| {
                if ip {
                    mixed_ip_packet(&mut r, nets)
                } else {
                    mixed_frame(&mut r)
                }
            })
            .collect();
        for p in &pkts {
            let v = if ip { view_of(p) } else { data_view(p.data()) };
            assert_eq!(opt.run(&v), plain.run(&v));
        }
        let (mo, mp) = (mean_tests(&opt, &pkts, ip), mean_tests(&plain, &pkts, ip));
        println!(
            "{:?}({:.50}...): steps {} -> {}, tests per packet {:.2} -> {:.2}",
            kind,
            config,
            plain.steps(),
            opt.steps(),
            mp,
            mo
        );
        assert!(mo < mp, "{config}: {mo} vs {mp}");
    }
}

#[test]
fn a_large_acl_stays_within_its_bounds() {
    // 1,000 rules on /24s of 10.0-3.x.x: copies of steps for some paths would take
    // more work than allowed, so the program has one copy of each step at most, and
    // still skips what all paths to a step know.
    let mut r = Lcg(7);
    let rules: Vec<String> = (0..1000)
        .map(|i| {
            format!(
                "{} src net 10.{}.{}.0/24 && tcp dst port {}",
                if i % 3 == 2 { "deny" } else { "allow" },
                r.next() % 4,
                r.next() % 256,
                [80, 443, 22, 25, 8080][i % 5]
            )
        })
        .chain(["deny all".to_string()])
        .collect();
    let (opt, plain) = both(Kind::IPFilter, &rules.join(", "), 1);
    assert!(
        opt.steps() <= plain.steps(),
        "{} > {}",
        opt.steps(),
        plain.steps()
    );
    let pkts: Vec<Packet> = (0..2000).map(|_| mixed_ip_packet(&mut r, 4)).collect();
    for p in &pkts {
        let v = view_of(p);
        let (a, ta) = opt.trace(&v);
        let (b, tb) = plain.trace(&v);
        assert_eq!(a, b);
        assert!(ta.len() <= tb.len());
    }
    assert!(mean_tests(&opt, &pkts, true) < mean_tests(&plain, &pkts, true));
}

// ---- switch steps ----

#[test]
fn a_long_deny_list_is_one_switch_step() {
    let rules: Vec<String> = (0..100)
        .map(|k| format!("deny src net 11.{}.{}.0/24", k >> 8, k & 255))
        .chain(["allow all".to_string()])
        .collect();
    let config = rules.join(", ");
    let (opt, plain) = both(Kind::IPFilter, &config, 1);
    let text = opt.unparse();
    assert!(
        text.starts_with("  0 ip+12/%ffffff00  switch 100 values, table 0  default->[0]\ntable 0:\n"),
        "{text}"
    );
    assert_eq!(opt.switch_steps(), 1);
    assert_eq!(opt.steps(), 1);
    // The first member's test stands for the switch in a trace.
    let first = Test::new(Base::Net, 12, 0x0b00_0000, 0xffff_ff00);
    let from = |src: [u8; 4]| {
        let mut h = ip();
        h.src = src;
        h.proto = 17;
        h.bytes(&udp(1000, 53))
    };
    let denied = ip_packet(&from([11, 0, 57, 9]));
    // Cut to 10 bytes of network header: too short for the source address.
    let cut = ip_packet(&from([11, 0, 57, 9])[..10]);
    let passed = ip_packet(&from([100, 64, 0, 1]));
    assert_eq!(view_of(&cut).net.len(), 10);
    for (p, want, plain_steps) in [(&denied, None, 58), (&cut, Some(0), 100), (&passed, Some(0), 100)] {
        let v = view_of(p);
        assert_eq!(plain.trace(&v).0, want);
        assert_eq!(plain.trace(&v).1.len(), plain_steps);
        assert_eq!(opt.trace(&v), (want, vec![first]));
        assert_eq!(opt.run(&v), want);
    }
    // And through the element.
    let mut h = Harness::new(&IPFilterClass, &config, 1, 1);
    assert_eq!(
        classify(&mut h, vec![denied.clone(), cut.clone(), passed.clone()]),
        vec![None, Some(0), Some(0)]
    );
}

#[test]
fn rules_entered_mid_chain_still_match_later_rules() {
    // Rule k: its own output, for TCP from 10.0.N.0/24, N = k % 7 + 1, to one port:
    // rules k, k + 7 and k + 14 share a net, with different ports.
    const PORTS: [u16; 5] = [80, 443, 22, 25, 8080];
    let net = |k: usize| k % 7 + 1;
    let port = |k: usize| PORTS[k % 5];
    let rules: Vec<String> = (0..20)
        .map(|k| format!("{} src net 10.0.{}.0/24 && tcp dst port {}", k, net(k), port(k)))
        .chain(["deny all".to_string()])
        .collect();
    let (opt, plain) = both(Kind::IPFilter, &rules.join(", "), 20);
    // In the plain program a failed port test goes on to the next rule's address
    // test, in the middle of the chain of address tests: those get switches too.
    let plain_switched = plain.clone().with_switches(super::program::MIN_MEMBERS);
    assert!(plain_switched.switch_steps() > 1, "{}", plain_switched.unparse());
    assert!(opt.switch_steps() >= 1, "{}", opt.unparse());
    let packet = |n: u8, proto: u8, dport: u16| {
        let mut h = ip();
        h.src = [10, 0, n, 9];
        h.proto = proto;
        let payload = if proto == 6 {
            tcp(40000, dport, 0x10, 512)
        } else {
            udp(40000, dport)
        };
        ip_packet(&h.bytes(&payload))
    };
    for n in 0..=8u8 {
        for proto in [6u8, 17] {
            for dport in PORTS.into_iter().chain([9999]) {
                let p = packet(n, proto, dport);
                let v = view_of(&p);
                let want = (0..20)
                    .find(|&k| proto == 6 && net(k) == n as usize && port(k) == dport)
                    .map(|k| k as u32);
                for prog in [&opt, &plain, &plain_switched] {
                    assert_eq!(
                        prog.run(&v),
                        want,
                        "net {n} proto {proto} port {dport}\n{}",
                        prog.unparse()
                    );
                }
                assert!(plain_switched.trace(&v).1.len() <= plain.trace(&v).1.len());
                assert!(opt.trace(&v).1.len() <= plain.trace(&v).1.len());
            }
        }
    }
    // From 10.0.1.0/24 (rules 0, 7, 14: ports 80, 22, 8080) to port 8080: past rule
    // 0's and rule 7's port tests, matched by rule 14.
    let p = packet(1, 6, 8080);
    assert_eq!(opt.run(&view_of(&p)), Some(14));
    assert_eq!(plain_switched.run(&view_of(&p)), Some(14));
}
