use super::decap::{ESPDecap, ESPDecapClass};
use super::encap::{ESPEncapClass, Outer, Shared as EncapShared};
use super::replay::{Replay, Stale};
use super::*;
use crate::elements::ip::encap::IpIds;
use crate::testing::{build_error, Harness};
use packet::Packet;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

// Packets from `scripts/esp-vectors.py`: sealed by Python's `cryptography` (not the
// `ring` code under test) from fields laid out by hand there.
// INNER4: UDP 10.0.0.1:1234 -> 10.1.0.1:5678 "hello", TOS 0x28, DF, TTL 63.
const INNER4: &str = "452800211c4640003f110b5c0a0000010a01000104d2162e000d000068656c6c6f";
// ESP4: INNER4 in SPI 0x1000, sequence number 1, AES-128 key 00..0f, salt deadbeef;
// outer 192.0.2.1 -> 192.0.2.2, TOS 0x28 and DF copied, ID 0, TTL 64; one pad byte.
const ESP4: &str = "45280058000040004032b648c0000201c0000202000010000000000100000000000000019b35377c73ce5f099bc2e1a0211b681019555a6eef1def893ecc84199c964170e3d9b89779cff07467b95b91ec0a28eca72e29b2";
// INNER6: UDP 2001:db8::1 -> 2001:db8:1::1, traffic class 0xb8, hop limit 64.
const INNER6: &str = "6b800000000c114020010db800000000000000000000000120010db800010000000000000000000100070009000c000001020304";
// ESP6_ESN: INNER6 in SPI 0x2000, extended sequence number 2^32 + 7, AES-256 key
// 20..3f, salt cafebabe; outer TOS 0xb8 (the traffic class), ID 5, no DF.
const ESP6_ESN: &str = "45b8006c000500004032f59fc0000201c0000202000020000000000700000001000000078f51cd47e9fb3a4756df891a93b386665d60b9562b2e8d653df3c141c3cb7bb3a7e91f6ef6b323ce19975ca1c846f25dba885b836d547f855aa4c483cc4be88ada9133e2c5e3d7a2";

const KEY128: &str = "0x000102030405060708090a0b0c0d0e0fdeadbeef";
const KEY256: &str = "0x202122232425262728292a2b2c2d2e2f303132333435363738393a3b3c3d3e3fcafebabe";

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn encap4() -> Harness {
    Harness::new(
        &ESPEncapClass,
        &format!("SPI 0x1000, KEY {KEY128}, SRC 192.0.2.1, DST 192.0.2.2"),
        1,
        1,
    )
}

fn decap4(noutputs: usize) -> Harness {
    Harness::new(&ESPDecapClass, &format!("0x1000, {KEY128}"), 1, noutputs)
}

fn key(s: &str) -> KeyArg {
    KeyArg::from_arg(s).unwrap()
}

#[test]
fn encapsulates_as_the_independent_implementation_does() {
    // (The vector's IV is the sequence number itself: no mask.)
    let shared = encap_shared(Sa::new(0x1000, &key(KEY128), false).unwrap());
    let mut p = Packet::from_slice(&hex(INNER4));
    assert!(shared.encapsulate(&mut p, 1, 0));
    assert_eq!(p.data(), &hex(ESP4)[..]);
    assert_eq!(p.anno().dst_ip(), [192, 0, 2, 2]);
    assert_eq!(p.network_header_offset(), Some(0));
    assert_eq!(p.network_header_length(), 20);
}

#[test]
fn sequence_numbers_and_ids_count_on_and_ivs_differ_between_runs() {
    let mut h = encap4();
    let one = h.push(0, vec![Packet::from_slice(&hex(INNER4))]);
    let two = h.push(0, vec![Packet::from_slice(&hex(INNER4))]);
    let (a, b) = (one[0][0].data(), two[0][0].data());
    // ESP header sequence numbers 1 and 2, outer IDs 0 and 1.
    assert_eq!((&a[24..28], &b[24..28]), (&[0, 0, 0, 1][..], &[0, 0, 0, 2][..]));
    assert_eq!((&a[4..6], &b[4..6]), (&[0, 0][..], &[0, 1][..]));
    // IVs: the sequence numbers under one mask, so they differ as 1 and 2 do.
    let iv = |d: &[u8]| u64::from_be_bytes(d[28..36].try_into().unwrap());
    assert_eq!(iv(a) ^ iv(b), 1 ^ 2);
    assert_eq!(h.read("seq"), "2");
    assert_eq!(h.read("spi"), "4096");
    assert_eq!(h.read("drops"), "0");
    // The same configuration built again (a restarted router) starts again at
    // sequence number 1, with other IVs, so no nonce repeats under the key. (Equal
    // masks: a chance of 1 in 2^64.)
    let again = encap4().push(0, vec![Packet::from_slice(&hex(INNER4))]);
    let c = again[0][0].data();
    assert_eq!(&c[24..28], &[0, 0, 0, 1]);
    assert_ne!(iv(c), iv(a));
    // Both open at the other end all the same (the IV travels in the packet).
    let mut d = decap4(2);
    assert_eq!(d.push(0, vec![Packet::from_slice(c)])[0].len(), 1);
    assert_eq!(d.push(0, vec![Packet::from_slice(b)])[0].len(), 1);
}

/// ESPEncap's shared state from 192.0.2.1 to 192.0.2.2, TTL 64, for calls of
/// `encapsulate` with chosen sequence numbers.
fn encap_shared(sa: Sa) -> EncapShared {
    EncapShared {
        sa,
        outer: Outer::V4 {
            src: [192, 0, 2, 1],
            dst: [192, 0, 2, 2],
        },
        ttl: 64,
        next_seq: AtomicU64::new(1),
        iv_mask: AtomicU64::new(0),
        next_id: IpIds::default(),
        drops: AtomicU64::new(0),
    }
}

#[test]
fn encapsulates_ipv6_with_an_extended_sequence_number() {
    let shared = encap_shared(Sa::new(0x2000, &key(KEY256), true).unwrap());
    let mut p = Packet::from_slice(&hex(INNER6));
    assert!(shared.encapsulate(&mut p, (1 << 32) + 7, 5));
    assert_eq!(p.data(), &hex(ESP6_ESN)[..]);
}

/// The IPv6 tunnel ends of the tests: 2001:db8:ffff::1 -> 2001:db8:ffff::2.
const END6_SRC: [u8; 16] = [0x20, 0x01, 0x0d, 0xb8, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
const END6_DST: [u8; 16] = [0x20, 0x01, 0x0d, 0xb8, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2];

/// ESP4's packet under an IPv6 header instead of its IPv4 one, written out by hand:
/// the ESP part is the same bytes (its AAD is the SPI and sequence number, not the
/// outer header), the header version 6 with the inner TOS 0x28 as traffic class, flow
/// label 0, the payload length, next header 50 and hop limit 64.
fn esp4_over_ipv6() -> Vec<u8> {
    let esp = &hex(ESP4)[20..];
    let mut p = vec![0x62, 0x80, 0x00, 0x00];
    p.extend_from_slice(&(esp.len() as u16).to_be_bytes());
    p.extend_from_slice(&[50, 64]);
    p.extend_from_slice(&END6_SRC);
    p.extend_from_slice(&END6_DST);
    p.extend_from_slice(esp);
    p
}

#[test]
fn encapsulates_under_an_ipv6_header() {
    let shared = EncapShared {
        outer: Outer::V6 {
            src: END6_SRC,
            dst: END6_DST,
        },
        ..encap_shared(Sa::new(0x1000, &key(KEY128), false).unwrap())
    };
    let mut p = Packet::from_slice(&hex(INNER4));
    assert!(shared.encapsulate(&mut p, 1, 0));
    assert_eq!(p.data(), &esp4_over_ipv6()[..]);
    assert_eq!(p.anno().dst_ip6(), END6_DST);
    assert_eq!(p.network_header_offset(), Some(0));
    assert_eq!(p.network_header_length(), 40);
    // Through the element: SRC and DST of one family.
    let mut h = Harness::new(
        &ESPEncapClass,
        &format!("SPI 0x1000, KEY {KEY128}, SRC 2001:db8:ffff::1, DST 2001:db8:ffff::2, TTL 9"),
        1,
        1,
    );
    let out = h.push(0, vec![Packet::from_slice(&hex(INNER6))]);
    let d = out[0][0].data();
    // Traffic class 0xb8 from the inner packet, next header ESP, hop limit 9.
    assert_eq!(&d[..2], &[0x6b, 0x80]);
    assert_eq!((d[6], d[7]), (50, 9));
    assert_eq!(usize::from(u16::from_be_bytes([d[4], d[5]])), d.len() - 40);
    assert_eq!(
        build_error(
            &ESPEncapClass,
            &format!("256, {KEY128}, 192.0.2.1, 2001:db8::2"),
            1,
            1
        ),
        "e :: ESPEncap: SRC and DST must both be IPv4 or both IPv6 addresses"
    );
}

#[test]
fn decapsulates_under_an_ipv6_header() {
    let mut h = decap4(2);
    let out = h.push(0, vec![Packet::from_slice(&esp4_over_ipv6())]);
    assert!(out[1].is_empty(), "refused");
    let p = &out[0][0];
    assert_eq!(p.data(), &hex(INNER4)[..]);
    assert_eq!(p.anno().dst_ip(), [10, 1, 0, 1]);
    // Cut short (the payload length says more than there is), or an extension header
    // before ESP: refused, unchanged, to output 1.
    let mut short = esp4_over_ipv6();
    short.pop();
    let mut hop_by_hop = esp4_over_ipv6();
    hop_by_hop[6] = 0;
    let out = h.push(
        0,
        vec![Packet::from_slice(&short), Packet::from_slice(&hop_by_hop)],
    );
    assert!(out[0].is_empty());
    assert_eq!(out[1].len(), 2);
    assert_eq!(h.read("bad"), "2");
}

#[test]
fn decapsulates_the_independent_implementations_packet_once() {
    let mut h = decap4(2);
    let out = h.push(0, vec![Packet::from_slice(&hex(ESP4))]);
    assert!(out[1].is_empty());
    let p = &out[0][0];
    assert_eq!(p.data(), &hex(INNER4)[..]);
    assert_eq!(p.anno().dst_ip(), [10, 1, 0, 1]);
    assert_eq!(p.network_header_offset(), Some(0));
    assert_eq!(p.network_header_length(), 20);
    assert_eq!(h.read("seq"), "1");
    // The same packet again is a replay: output 1, unchanged.
    let out = h.push(0, vec![Packet::from_slice(&hex(ESP4))]);
    assert!(out[0].is_empty());
    assert_eq!(out[1][0].data(), &hex(ESP4)[..]);
    assert_eq!(h.read("replays"), "1");
    assert_eq!(h.read("bad"), "0");
    assert_eq!(h.read("auth_failures"), "0");
}

#[test]
fn decapsulates_an_extended_sequence_number_past_the_first_subspace() {
    let sa = Sa::new(0x2000, &key(KEY256), true).unwrap();
    let shared = Arc::new(decap::Shared::new(sa, Replay::new(128, true)));
    // The window's top just past 2^32: the packet's low half 7 is then 2^32 + 7.
    shared.window().accept((1 << 32) + 3).unwrap();
    let mut h = Harness::new(&ESPDecapClass, &format!("0x2000, {KEY256}, ESN true"), 1, 2);
    h.element = Box::new(ESPDecap::new(shared.clone()));
    let out = h.push(0, vec![Packet::from_slice(&hex(ESP6_ESN))]);
    let p = &out[0][0];
    assert_eq!(p.data(), &hex(INNER6)[..]);
    assert_eq!(p.network_header_length(), 40);
    assert_eq!(p.anno().dst_ip6(), hex("20010db8000100000000000000000001")[..]);
    assert_eq!(shared.window().top(), (1 << 32) + 7);
    // Without the high half, the same packet does not authenticate.
    let mut h = Harness::new(&ESPDecapClass, &format!("0x2000, {KEY256}, ESN true"), 1, 2);
    let out = h.push(0, vec![Packet::from_slice(&hex(ESP6_ESN))]);
    assert!(out[0].is_empty() && out[1].is_empty());
    assert_eq!(h.read("auth_failures"), "1");
}

#[test]
fn a_forged_packet_is_dropped_and_does_not_use_up_its_sequence_number() {
    let mut h = decap4(2);
    for at in [40, 60, 87, 30] {
        // A byte of the ciphertext, of the tag, the last, and of the IV.
        let mut forged = hex(ESP4);
        forged[at] ^= 0x01;
        let out = h.push(0, vec![Packet::from_slice(&forged)]);
        assert!(out[0].is_empty() && out[1].is_empty(), "byte {at}");
    }
    assert_eq!(h.read("auth_failures"), "4");
    assert_eq!(h.read("seq"), "0");
    let out = h.push(0, vec![Packet::from_slice(&hex(ESP4))]);
    assert_eq!(out[0][0].data(), &hex(INNER4)[..]);
}

#[test]
fn packets_not_of_the_association_go_to_output_1_unchanged() {
    let esp = hex(ESP4);
    let mut other_spi = esp.clone();
    other_spi[23] = 1;
    let mut fragment = esp.clone();
    fragment[6] = 0x20; // MF
    let mut not_esp = esp.clone();
    not_esp[9] = 17;
    let mut short = esp[..20 + 8 + 8 + 2 + 15].to_vec();
    short[3] = short.len() as u8;
    let mut longer_than_given = esp.clone();
    longer_than_given[3] += 1;
    let cases = [other_spi, fragment, not_esp, short, longer_than_given, vec![0x45]];
    let mut h = decap4(2);
    for (i, c) in cases.iter().enumerate() {
        let out = h.push(0, vec![Packet::from_slice(c)]);
        assert!(out[0].is_empty(), "case {i}");
        assert_eq!(out[1][0].data(), &c[..], "case {i}");
    }
    assert_eq!(h.read("bad"), "6");
    // Without output 1 they are dropped, and counted the same.
    let mut h = decap4(1);
    let out = h.push(0, cases.iter().map(|c| Packet::from_slice(c)).collect());
    assert!(out[0].is_empty());
    assert_eq!(h.read("bad"), "6");
    // Ethernet padding after the datagram is no part of it.
    let mut padded = esp.clone();
    padded.extend_from_slice(&[0; 6]);
    let out = decap4(2).push(0, vec![Packet::from_slice(&padded)]);
    assert_eq!(out[0][0].data(), &hex(INNER4)[..]);
}

/// `n` packets through `ESPEncap`, each `INNER4`, sequence numbers 1 to n.
fn sealed(n: usize) -> Vec<Vec<u8>> {
    let mut h = encap4();
    let out = h.push(0, (0..n).map(|_| Packet::from_slice(&hex(INNER4))).collect());
    out[0].iter().map(|p| p.data().to_vec()).collect()
}

#[test]
fn the_window_takes_late_packets_once_and_refuses_older_ones() {
    let pkts = sealed(300);
    let mut h = decap4(2);
    let pass = |h: &mut Harness, seqs: &[usize]| -> (usize, usize) {
        let out = h.push(
            0,
            seqs.iter().map(|&s| Packet::from_slice(&pkts[s - 1])).collect(),
        );
        for p in &out[0] {
            assert_eq!(p.data(), &hex(INNER4)[..]);
        }
        (out[0].len(), out[1].len())
    };
    assert_eq!(pass(&mut h, &[200, 150, 73]), (3, 0));
    // 72 is 128 behind 200: outside the default window of 128; 73 was seen.
    assert_eq!(pass(&mut h, &[72, 73, 1]), (0, 3));
    // 172 is inside the window the batch starts with, so it is opened, and then, 128
    // behind 300, dropped.
    assert_eq!(pass(&mut h, &[199, 201, 300, 173, 172]), (4, 0));
    assert_eq!(h.read("seq"), "300");
    assert_eq!(h.read("replays"), "4");
    // One packet twice in a batch: the first copy goes through, the second (already
    // opened when the window sees it again) is dropped.
    assert_eq!(pass(&mut h, &[250, 250]), (1, 0));
    assert_eq!(h.read("replays"), "5");
}

#[test]
fn a_zero_window_accepts_what_authenticates() {
    let pkts = sealed(3);
    let mut h = Harness::new(&ESPDecapClass, &format!("0x1000, {KEY128}, REPLAY 0"), 1, 2);
    let out = h.push(
        0,
        [3, 1, 1, 2]
            .iter()
            .map(|&s| Packet::from_slice(&pkts[s - 1]))
            .collect(),
    );
    assert_eq!(out[0].len(), 4);
    assert_eq!(h.read("seq"), "3");
}

#[test]
fn workers_share_the_association() {
    let mut a = encap4();
    let mut b = a.another_worker();
    let one = a.push(0, vec![Packet::from_slice(&hex(INNER4))]);
    let two = b.push(0, vec![Packet::from_slice(&hex(INNER4))]);
    assert_eq!(&one[0][0].data()[24..28], &[0, 0, 0, 1]);
    assert_eq!(&two[0][0].data()[24..28], &[0, 0, 0, 2]);
    let mut d = decap4(2);
    let mut e = d.another_worker();
    assert_eq!(d.push(0, vec![Packet::from_slice(two[0][0].data())])[0].len(), 1);
    assert_eq!(e.push(0, vec![Packet::from_slice(two[0][0].data())])[1].len(), 1);
    assert_eq!(e.push(0, vec![Packet::from_slice(one[0][0].data())])[0].len(), 1);
    assert_eq!(d.read("replays"), "1");
}

#[test]
fn encapsulation_refuses_what_it_cannot_carry() {
    let mut h = encap4();
    // 36 bytes in front, 16 behind; with 65479 bytes the trailer's 2 bytes and 3 of
    // padding make 65536.
    let mut too_long = hex(INNER4);
    too_long.resize(65479, 0);
    let cases = vec![
        Packet::from_slice(&[0x00; 40]),
        Packet::from_slice(&hex(INNER4)[..19]),
        Packet::from_slice(&hex(INNER6)[..39]),
        Packet::from_slice(&[]),
        Packet::from_slice(&too_long),
    ];
    let out = h.push(0, cases);
    assert!(out[0].is_empty());
    assert_eq!(h.read("drops"), "5");
    // One byte less needs no padding: 36 + 65478 + 2 + 16.
    too_long.truncate(65478);
    let out = h.push(0, vec![Packet::from_slice(&too_long)]);
    assert_eq!(out[0][0].len(), 65532);
    assert_eq!(&out[0][0].data()[2..4], &65532u16.to_be_bytes());
    // Without ESN the association ends at sequence number 2^32 - 1.
    let shared = encap_shared(Sa::new(0x1000, &key(KEY128), false).unwrap());
    let mut p = Packet::from_slice(&hex(INNER4));
    assert!(!shared.encapsulate(&mut p, 1 << 32, 0));
    assert_eq!(p.data(), &hex(INNER4)[..]);
    assert!(shared.encapsulate(&mut p, u64::from(u32::MAX), 0));
}

/// An ESP packet of SPI 0x1000 and sequence number `seq` whose sealed part is
/// `plain` (inner packet and trailer as given), sealed by the association itself.
fn sealed_raw(plain: &[u8], seq: u64) -> Vec<u8> {
    let sa = Sa::new(0x1000, &key(KEY128), false).unwrap();
    let mut sealed = plain.to_vec();
    let tag = sa.seal(seq, seq.to_be_bytes(), &mut sealed).unwrap();
    let total = (20 + 16 + sealed.len() + 16) as u16;
    let mut p = vec![0x45, 0, (total >> 8) as u8, total as u8, 0, 0, 0, 0, 64, 50, 0, 0];
    p.extend_from_slice(&[192, 0, 2, 1, 192, 0, 2, 2, 0, 0, 0x10, 0]);
    p.extend_from_slice(&(seq as u32).to_be_bytes());
    p.extend_from_slice(&seq.to_be_bytes());
    p.extend_from_slice(&sealed);
    p.extend_from_slice(&tag);
    p
}

#[test]
fn dummy_packets_are_discarded_and_bad_trailers_dropped() {
    let inner = hex(INNER4);
    let mut dummy = inner.clone();
    dummy.extend_from_slice(&[1, 59]);
    let mut too_much_pad = inner.clone();
    too_much_pad.extend_from_slice(&[200, 4]);
    let mut wrong_next = inner.clone();
    wrong_next.extend_from_slice(&[1, 41]);
    let mut unknown_next = inner.clone();
    unknown_next.extend_from_slice(&[1, 6]);
    let mut h = decap4(2);
    let pkts = [dummy, too_much_pad, wrong_next, unknown_next]
        .iter()
        .enumerate()
        .map(|(i, plain)| Packet::from_slice(&sealed_raw(plain, i as u64 + 1)))
        .collect();
    let out = h.push(0, pkts);
    assert!(out[0].is_empty() && out[1].is_empty());
    assert_eq!(h.read("dummies"), "1");
    assert_eq!(h.read("bad"), "3");
    // They were authentic: their sequence numbers are used up.
    assert_eq!(h.read("seq"), "4");
    // A dummy twice in one batch is one dummy and one replay, as in two batches.
    let mut dummy = inner.clone();
    dummy.extend_from_slice(&[1, 59]);
    let twice = sealed_raw(&dummy, 5);
    h.push(0, vec![Packet::from_slice(&twice), Packet::from_slice(&twice)]);
    assert_eq!((h.read("dummies"), h.read("replays")), ("2".into(), "1".into()));
    h.push(0, vec![Packet::from_slice(&twice)]);
    assert_eq!((h.read("dummies"), h.read("replays")), ("2".into(), "2".into()));
}

#[test]
fn congestion_marked_on_the_tunnel_reaches_ecn_capable_inner_packets() {
    use crate::elements::ip::testutil::cksum;
    // INNER4 with ECN ECT(0) (TOS 0x2a) and its checksum; INNER6 with traffic class
    // 0xb9 (ECT(1)); INNER4 as it is (TOS 0x28: not ECN-capable).
    let mut ect4 = hex(INNER4);
    ect4[1] = 0x2a;
    ect4[10..12].copy_from_slice(&[0, 0]);
    let c = cksum(&ect4[..20]);
    ect4[10..12].copy_from_slice(&c.to_be_bytes());
    let mut ect6 = hex(INNER6);
    ect6[1] |= 0x10;
    let not_ect = hex(INNER4);
    let mut h = decap4(2);
    for (seq, (inner, next)) in [(&ect4, 4), (&ect6, 41), (&not_ect, 4)].into_iter().enumerate() {
        let mut plain = inner.clone();
        let pad = (4 - (plain.len() + 2) % 4) % 4;
        plain.extend((1..=pad as u8).chain([pad as u8, next]));
        let mut esp = sealed_raw(&plain, seq as u64 + 1);
        // Outer ECN: Congestion Experienced (the ICV does not cover the outer header).
        esp[1] = 0x03;
        let out = h.push(0, vec![Packet::from_slice(&esp)]);
        let got = out[0][0].data();
        let mut want = inner.clone();
        if next == 4 && inner[1] & 3 != 0 {
            want[1] |= 3;
            want[10..12].copy_from_slice(&[0, 0]);
            let c = cksum(&want[..20]);
            want[10..12].copy_from_slice(&c.to_be_bytes());
        } else if next == 41 {
            want[1] |= 0x30;
        }
        assert_eq!(got, &want[..], "packet {seq}");
    }
}

#[test]
fn extended_sequence_numbers_are_placed_around_the_window() {
    let at = |top: u64| {
        let mut r = Replay::new(64, true);
        if top > 0 {
            r.accept(top).unwrap();
        }
        r
    };
    // Window within one subspace: below it is the next subspace.
    let r = at((5 << 32) + 1000);
    assert_eq!(r.full(1000 - 63), (5 << 32) + 937);
    assert_eq!(r.full(1000 - 64), (6 << 32) + 936);
    assert_eq!(r.full(2000), (5 << 32) + 2000);
    // Window across a subspace boundary: just below 2^32 is the previous one.
    let r = at((5 << 32) + 10);
    assert_eq!(r.full(u32::MAX), (4 << 32) + u64::from(u32::MAX));
    assert_eq!(r.full(u32::MAX - 52), (4 << 32) + u64::from(u32::MAX - 52));
    assert_eq!(r.full(u32::MAX - 53), (5 << 32) + u64::from(u32::MAX - 53));
    assert_eq!(r.full(11), (5 << 32) + 11);
    // Before anything: nothing below 0.
    assert_eq!(at(0).full(u32::MAX), 0);
    assert_eq!(at(0).full(1), 1);
    assert_eq!(Replay::new(64, false).full(u32::MAX), u64::from(u32::MAX));
}

#[test]
fn the_window_forgets_numbers_it_moves_past() {
    let mut r = Replay::new(1024, false);
    r.accept(5).unwrap();
    assert_eq!(r.accept(5), Err(Stale::Replayed));
    // A jump of more than the ring: everything before is behind the window.
    r.accept(5 + 10_000).unwrap();
    assert_eq!(r.check(5), Err(Stale::TooOld));
    assert_eq!(r.check(10_005 - 1023), Ok(()));
    assert_eq!(r.check(10_005 - 1024), Err(Stale::TooOld));
    // Moving by one word at a time keeps what is still inside.
    for s in (10_006..12_000).step_by(7) {
        r.accept(s).unwrap();
    }
    let top = r.top();
    for s in (10_006..12_000).step_by(7).filter(|s| top - s < 1024) {
        assert_eq!(r.check(s), Err(Stale::Replayed), "{s}");
        assert_eq!(r.check(s + 1), Ok(()), "{}", s + 1);
    }
    assert_eq!(r.check(0), Err(Stale::TooOld));
}

#[test]
fn configuration_errors_say_what_is_wrong() {
    let e = |class: &dyn crate::element::ElementClass, c: &str| {
        let m = build_error(class, c, 1, 1);
        let prefix = format!("e :: {}: ", class.name());
        m.strip_prefix(&prefix)
            .unwrap_or_else(|| panic!("{m}"))
            .to_string()
    };
    assert_eq!(
        e(&ESPDecapClass, "0x1000, 0x0011"),
        "KEY expects AES-GCM key and salt in hexadecimal (20 or 36 bytes): 2 bytes, where an \
         AES-128 key and salt are 20 and an AES-256 key and salt 36"
    );
    assert_eq!(
        e(&ESPDecapClass, "0x1000, 0xabc"),
        "KEY expects AES-GCM key and salt in hexadecimal (20 or 36 bytes): an odd number of \
         hexadecimal digits"
    );
    assert_eq!(
        e(
            &ESPDecapClass,
            "0x1000, 0x000102030405060708090a0b0c0d0e0fdeadbeez"
        ),
        "KEY expects AES-GCM key and salt in hexadecimal (20 or 36 bytes): 'z' is not a \
         hexadecimal digit"
    );
    assert_eq!(
        e(&ESPDecapClass, &format!("255, {KEY128}")),
        "SPI 255 is reserved (RFC 4303 2.1): use 256 or more"
    );
    assert_eq!(
        e(&ESPDecapClass, &format!("256, {KEY128}, REPLAY 1025")),
        "REPLAY must be at most 1024"
    );
    assert_eq!(
        e(&ESPDecapClass, &format!("256, {KEY128}, ESN true, REPLAY 0")),
        "ESN needs a REPLAY window (the high half of each sequence number is found from it)"
    );
    assert_eq!(
        e(
            &ESPEncapClass,
            &format!("256, {KEY128}, 192.0.2.1, 192.0.2.2, TTL 0")
        ),
        "TTL must be at least 1"
    );
    assert_eq!(
        e(&ESPEncapClass, &format!("256, {KEY128}, 192.0.2.1")),
        "missing mandatory DST argument"
    );
    // A 24-byte AES-192 key and salt is not one of the two.
    assert!(e(
        &ESPEncapClass,
        &format!("256, 0x{}, 192.0.2.1, 192.0.2.2", "ab".repeat(28))
    )
    .contains("28 bytes"));
}

#[test]
fn a_replacing_encap_of_the_same_association_goes_on_with_its_numbers() {
    let mut old = encap4();
    let before = old.push(0, (0..3).map(|_| Packet::from_slice(&hex(INNER4))).collect());
    let mut new = encap4();
    assert!(new.spec.take_state(&*old.spec));
    let after = new.push(0, vec![Packet::from_slice(&hex(INNER4))]);
    let (first, next) = (before[0][0].data(), after[0][0].data());
    // Sequence number 4 and outer ID 3, after the old element's 1 to 3 and 0 to 2.
    assert_eq!(&next[24..28], &[0, 0, 0, 4]);
    assert_eq!(&next[4..6], &[0, 3]);
    // The old element's IV mask: the IVs differ as the sequence numbers do, so no
    // nonce repeats under the key.
    let iv = |d: &[u8]| u64::from_be_bytes(d[28..36].try_into().unwrap());
    assert_eq!(iv(first) ^ iv(next), 1 ^ 4);
    assert_eq!(new.read("seq"), "4");
    // A receiver that took the old element's packets takes the new one's.
    let mut d = decap4(2);
    for p in before[0].iter().chain(&after[0]) {
        assert_eq!(d.push(0, vec![Packet::from_slice(p.data())])[0].len(), 1);
    }
}

#[test]
fn another_association_starts_afresh() {
    let mut old = encap4();
    old.push(0, vec![Packet::from_slice(&hex(INNER4))]);
    // Another key (its salt differs), another SPI, ESN: not the same association.
    for config in [
        format!(
            "SPI 0x1000, KEY {}, SRC 192.0.2.1, DST 192.0.2.2",
            KEY128.replace("beef", "beee")
        ),
        format!("SPI 0x1001, KEY {KEY128}, SRC 192.0.2.1, DST 192.0.2.2"),
        format!("SPI 0x1000, KEY {KEY128}, SRC 192.0.2.1, DST 192.0.2.2, ESN true"),
    ] {
        let mut new = Harness::new(&ESPEncapClass, &config, 1, 1);
        assert!(!new.spec.take_state(&*old.spec), "{config}");
        let out = new.push(0, vec![Packet::from_slice(&hex(INNER4))]);
        assert_eq!(&out[0][0].data()[24..28], &[0, 0, 0, 1], "{config}");
    }
    // Nor does a decapsulation take an encapsulation's state, or the other way round.
    assert!(!decap4(2).spec.take_state(&*old.spec));
    assert!(!encap4().spec.take_state(&*decap4(2).spec));
}

#[test]
fn a_replacing_decap_of_the_same_association_refuses_what_the_old_one_took() {
    let pkts = sealed(5);
    let mut old = decap4(2);
    let out = old.push(
        0,
        [1, 2, 4]
            .iter()
            .map(|&s| Packet::from_slice(&pkts[s - 1]))
            .collect(),
    );
    assert_eq!(out[0].len(), 3);
    old.push(0, vec![Packet::from_slice(&pkts[3])]);
    assert_eq!(old.read("replays"), "1");
    // Its own window size: 2, so 1 is too old (4 is the top) and 3 inside.
    let mut new = Harness::new(&ESPDecapClass, &format!("0x1000, {KEY128}, REPLAY 2"), 1, 2);
    assert!(new.spec.take_state(&*old.spec));
    assert_eq!(new.read("seq"), "4");
    assert_eq!(new.read("replays"), "1");
    let pass = |h: &mut Harness, s: usize| {
        let out = h.push(0, vec![Packet::from_slice(&pkts[s - 1])]);
        (out[0].len(), out[1].len())
    };
    // 4 was taken (a replay), 3 was not (within the window), 2 is behind it now.
    assert_eq!(pass(&mut new, 4), (0, 1));
    assert_eq!(pass(&mut new, 3), (1, 0));
    assert_eq!(pass(&mut new, 2), (0, 1));
    assert_eq!(pass(&mut new, 5), (1, 0));
    // (The count takes numbers behind the window too.)
    assert_eq!(new.read("replays"), "3");
    // A decapsulation that took nothing would have let the replay through.
    assert_eq!(pass(&mut decap4(2), 4), (1, 0));
}

#[test]
fn a_window_taken_from_one_without_a_window_refuses_only_what_was_taken() {
    let mut none = Replay::new(0, false);
    none.accept(2000).unwrap();
    // Far behind: accepted without a window, but not recorded in place of 1988 (the
    // ring spans 1,088 numbers).
    none.accept(900).unwrap();
    none.accept(1990).unwrap();
    let mut w = Replay::new(128, false);
    w.go_on_from(&none);
    assert_eq!(w.check(1988), Ok(()));
    assert_eq!(w.check(1990), Err(Stale::Replayed));
    assert_eq!(w.check(2000), Err(Stale::Replayed));
    assert_eq!(w.check(900), Err(Stale::TooOld));
}
