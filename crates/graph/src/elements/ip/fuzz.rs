//! Property: no IP element panics on any bytes, wherever the network header points.

use super::checkipheader::{CHECK_IP_HEADER, CHECK_IP_HEADER2};
use super::checktransport::{CHECK_ICMP_HEADER, CHECK_TCP_HEADER, CHECK_UDP_HEADER};
use super::decipttl::DecIPTTLClass;
use super::dropbroadcasts::DropBroadcastsClass;
use super::fixipsrc::FixIPSrcClass;
use super::getipaddress::GetIPAddressClass;
use super::icmperror::ICMPErrorClass;
use super::icmppingencap::ICMPPingEncapClass;
use super::ipencap::IPEncapClass;
use super::ipfragmenter::IPFragmenterClass;
use super::ipgwoptions::IPGW_OPTIONS;
use super::ipprint::IPPrintClass;
use super::markipheader::MarkIPHeaderClass;
use super::setipaddress::SetIPAddressClass;
use super::setipchecksum::SetIPChecksumClass;
use super::setipdscp::{SetIPDSCPClass, SetIPECNClass};
use super::settransportchecksum::{SET_TCP_CHECKSUM, SET_UDP_CHECKSUM};
use super::storeipaddress::StoreIPAddressClass;
use super::stripipheader::{StripIPHeaderClass, UnstripIPHeaderClass};
use super::testutil::cksum;
use super::udpipencap::UDPIPEncapClass;
use crate::element::ElementClass;
use crate::elements::checklength::CheckLengthClass;
use crate::elements::meter::{BANDWIDTH_METER, METER};
use crate::elements::pad::PadClass;
use crate::elements::ratedsplitter::BandwidthRatedSplitterClass;
use crate::elements::rewriter::napt::{
    ICMP_PING_REWRITER, IP_ADDR_PAIR_REWRITER, IP_ADDR_REWRITER, IP_REWRITER, TCP_REWRITER, UDP_REWRITER,
};
use crate::elements::striptonet::StripToNetworkHeaderClass;
use crate::elements::truncate::TruncateClass;
use crate::elements::vlan::{VLANDecapClass, VLANEncapClass, ETHER_VLAN_ENCAP, SET_VLAN_ANNO};
use crate::testing::Harness;
use packet::anno::PacketType;
use packet::Packet;
use proptest::prelude::*;

fn configs() -> Vec<(&'static dyn ElementClass, &'static str, usize)> {
    vec![
        (&CHECK_IP_HEADER, "", 2),
        (&CHECK_IP_HEADER, "OFFSET 14, INTERFACES 10.0.0.1/8", 2),
        (&CHECK_IP_HEADER2, "", 1),
        (&GetIPAddressClass, "16", 1),
        (&GetIPAddressClass, "IP src", 1),
        (&SetIPAddressClass, "1.2.3.4", 1),
        (&DecIPTTLClass, "", 2),
        (&ICMPErrorClass, "1.2.3.4, parameterproblem", 1),
        (&ICMPErrorClass, "1.2.3.4, timeexceeded, MTU 20", 1),
        (&IPFragmenterClass, "8", 2),
        (&IPFragmenterClass, "28, false", 2),
        (&IPFragmenterClass, "68", 2),
        (&DropBroadcastsClass, "", 2),
        (&IPGW_OPTIONS, "1.2.3.4", 2),
        (&IPGW_OPTIONS, "1.2.3.4, 10.0.0.1 10.0.0.2", 1),
        (&FixIPSrcClass, "1.2.3.4", 1),
        (&IPEncapClass, "4, 1.2.3.4, DST_ANNO, DF true", 1),
        (&UDPIPEncapClass, "1.2.3.4, 1, 5.6.7.8, 2", 1),
        (&SetIPChecksumClass, "", 1),
        (&SET_UDP_CHECKSUM, "", 2),
        (&SET_TCP_CHECKSUM, "", 1),
        (&SET_TCP_CHECKSUM, "FIXOFF true", 1),
        // Every field and both dumps, into /dev/null rather than the test's stderr.
        (
            &IPPrintClass,
            "x, CONTENTS hex, ETHER true, ID true, TTL true, TOS true, LENGTH true, AGGREGATE true, PAINT true, SWAP true, OUTFILE /dev/null",
            1,
        ),
        (&IPPrintClass, "PAYLOAD ascii, MAXLENGTH -1, OUTFILE /dev/null", 1),
        (&MarkIPHeaderClass, "", 1),
        (&MarkIPHeaderClass, "14", 1),
        (&MarkIPHeaderClass, "300", 1),
        (&StripIPHeaderClass, "", 1),
        (&UnstripIPHeaderClass, "", 1),
        (&StripToNetworkHeaderClass, "", 1),
        (&StoreIPAddressClass, "src", 2),
        (&StoreIPAddressClass, "1.2.3.4, dst", 1),
        (&StoreIPAddressClass, "4", 2),
        (&StoreIPAddressClass, "1.2.3.4, 60", 1),
        (&SetIPDSCPClass, "46", 1),
        (&SetIPECNClass, "CE", 1),
        (&VLANEncapClass, "VLAN_TCI 5, VLAN_PCP 3", 1),
        (&VLANEncapClass, "ANNO", 1),
        (&VLANDecapClass, "ANNO true", 1),
        (&TruncateClass, "10", 1),
        (&PadClass, "", 1),
        (&CheckLengthClass, "30", 2),
        (&CHECK_UDP_HEADER, "DETAILS true", 2),
        (&CHECK_TCP_HEADER, "", 1),
        (&CHECK_ICMP_HEADER, "DETAILS true", 2),
        (&METER, "1000", 2),
        (&BANDWIDTH_METER, "8kbps, 1MBps", 3),
        (&BandwidthRatedSplitterClass, "1kBps, BURST_BYTES 100", 2),
        (&ICMPPingEncapClass, "1.0.0.1, 2.0.0.2, IDENTIFIER 3", 1),
        (&SET_VLAN_ANNO, "5, 3", 1),
        (&ETHER_VLAN_ENCAP, "0x0800, 0:1:2:3:4:5, 6:7:8:9:a:b, ANNO, NATIVE_VLAN 1", 1),
        (&IP_REWRITER, "pattern 1.0.0.1 1024-1027# - - 0 0, MAPPING_CAPACITY 2", 1),
        (&TCP_REWRITER, "keep 0 0", 1),
        (&UDP_REWRITER, "pattern - 5000-5001? 1.0.0.2 53 0 0", 1),
        (&IP_ADDR_REWRITER, "pattern 3.0.0.1-3.0.0.2 - 0 0, GUARANTEE 0", 1),
        (&IP_ADDR_PAIR_REWRITER, "pattern 3.0.0.0/30 - 0 0", 1),
        (&ICMP_PING_REWRITER, "pattern 2.0.0.2 - 0-3# 0 0", 1),
    ]
}

fn packet_type(i: u8) -> PacketType {
    use PacketType::*;
    [
        Host, Broadcast, Multicast, OtherHost, Outgoing, Loopback, FastRoute,
    ][usize::from(i % 7)]
}

proptest! {
    #[test]
    fn arbitrary_bytes_never_panic(
        bytes in proptest::collection::vec(any::<u8>(), 0..200),
        net in proptest::option::of(0usize..40),
        hlen in 0usize..64,
        pp in any::<u8>(),
        fix in any::<u8>(),
        ptype in 0u8..7,
    ) {
        // ICMPError advances the process-wide IP ID counter other tests predict.
        let _g = super::icmperror::tests::lock();
        for (class, cfg, nout) in configs() {
            let mut h = Harness::new(class, cfg, 1, nout);
            let mut p = Packet::from_slice(&bytes);
            if let Some(n) = net {
                p.set_network_header(n as isize, hlen);
            }
            p.anno_mut().set_u8_at(packet::anno::ICMP_PARAMPROB_ANNO_OFFSET, pp);
            p.anno_mut().set_u8_at(packet::anno::FIX_IP_SRC_ANNO_OFFSET, fix);
            p.anno_mut().packet_type = packet_type(ptype);
            let _ = h.push(0, vec![p]);
        }
    }

    #[test]
    fn plausible_headers_never_panic(
        ihl in 5u8..16,
        len in 0u16..400,
        frag in any::<u16>(),
        opts in proptest::collection::vec(any::<u8>(), 40),
        tail in 0usize..400,
        proto in prop_oneof![Just(1u8), Just(6u8), Just(17u8)],
    ) {
        let hl = ihl as usize * 4;
        let mut b = vec![0x40 | ihl, 0, (len >> 8) as u8, len as u8, 0, 1, (frag >> 8) as u8, frag as u8, 64, proto, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2];
        b.extend_from_slice(&opts[..hl - 20]);
        b.extend((0..tail).map(|i| i as u8));
        let _g = super::icmperror::tests::lock();
        for (class, cfg, nout) in configs() {
            let mut h = Harness::new(class, cfg, 1, nout);
            let mut p = Packet::from_slice(&b);
            p.set_network_header(0, hl);
            p.anno_mut().set_u8_at(packet::anno::FIX_IP_SRC_ANNO_OFFSET, 1);
            let _ = h.push(0, vec![p]);
        }
    }
}

proptest! {
    #[test]
    fn ipgw_options_change_only_options_and_checksum(
        ihl in 6u8..16,
        opts in proptest::collection::vec(any::<u8>(), 40),
        lead in proptest::collection::vec(prop_oneof![Just(1u8), Just(7u8), Just(68u8)], 0..3),
    ) {
        let hl = ihl as usize * 4;
        let mut b = vec![0x40 | ihl, 0, 0, 0, 0, 1, 0, 0, 64, 17, 0x12, 0x34, 10, 0, 0, 1, 10, 0, 0, 2];
        // Options that start like real ones often enough to get past the first byte.
        let mut o = lead.clone();
        o.extend_from_slice(&opts);
        b.extend_from_slice(&o[..hl - 20]);
        b.extend_from_slice(&[0xaa; 8]);
        let mut h = Harness::new(&IPGW_OPTIONS, "1.2.3.4, 5.6.7.8", 1, 2);
        let mut p = Packet::from_slice(&b);
        p.set_network_header(0, hl);
        let out = h.push(0, vec![p]);
        if let Some(q) = out[0].first() {
            let d = q.data();
            prop_assert_eq!(d.len(), b.len());
            prop_assert_eq!(&d[..10], &b[..10]);
            prop_assert_eq!(&d[12..20], &b[12..20]);
            prop_assert_eq!(&d[hl..], &b[hl..]);
            if d != &b[..] {
                prop_assert_eq!(super::testutil::cksum(&d[..hl]), 0);
            }
        } else {
            let q = &out[1][0];
            prop_assert_eq!(q.data(), &b[..]);
            let at = usize::from(q.anno().u8_at(packet::anno::ICMP_PARAMPROB_ANNO_OFFSET));
            prop_assert!((20..hl).contains(&at), "pointer {} outside the options", at);
        }
    }
}

/// `seg`'s transport checksum verified the textbook way: pseudo-header and segment sum
/// to 0xffff.
fn transport_sums_to_ffff(ip: &[u8], proto: u8, seg: &[u8]) -> bool {
    let mut v = ip[12..20].to_vec();
    v.extend_from_slice(&[0, proto]);
    v.extend_from_slice(&(seg.len() as u16).to_be_bytes());
    v.extend_from_slice(seg);
    cksum(&v) == 0
}

proptest! {
    #[test]
    fn set_checksums_make_checksums_that_verify(
        payload in proptest::collection::vec(any::<u8>(), 0..300),
        ihl in 5u8..8,
        garbage in any::<[u8; 2]>(),
        tcp in any::<bool>(),
    ) {
        let hl = usize::from(ihl) * 4;
        let proto = if tcp { 6 } else { 17 };
        let thl = if tcp { 20 } else { 8 };
        let total = (hl + thl + payload.len()) as u16;
        let mut b = vec![0x40 | ihl, 0, (total >> 8) as u8, total as u8, 0, 1, 0, 0, 64, proto, garbage[0], garbage[1], 10, 0, 0, 1, 10, 0, 0, 2];
        b.resize(hl, 1);
        let mut t = vec![0u8; thl];
        t[..4].copy_from_slice(&[0x12, 0x34, 0x00, 0x50]);
        if tcp {
            t[12] = 0x50;
            t[16..18].copy_from_slice(&garbage);
        } else {
            t[4..6].copy_from_slice(&((thl + payload.len()) as u16).to_be_bytes());
            t[6..8].copy_from_slice(&garbage);
        }
        b.extend_from_slice(&t);
        b.extend_from_slice(&payload);
        let mut p = Packet::from_slice(&b);
        p.set_network_header(0, hl);
        let mut h = Harness::new(&SetIPChecksumClass, "", 1, 1);
        let p = h.push(0, vec![p]).remove(0).remove(0);
        prop_assert_eq!(cksum(&p.data()[..hl]), 0);
        let class = if tcp { &SET_TCP_CHECKSUM } else { &SET_UDP_CHECKSUM };
        let mut h = Harness::new(class, "", 1, 1);
        let q = h.push(0, vec![p]).remove(0).remove(0);
        let d = q.data();
        // Apart from the checksums, nothing changed.
        prop_assert_eq!(&d[..10], &b[..10]);
        let at = hl + if tcp { 16 } else { 6 };
        prop_assert_eq!(&d[12..at], &b[12..at]);
        prop_assert_eq!(&d[at + 2..], &b[at + 2..]);
        prop_assert!(transport_sums_to_ffff(d, proto, &d[hl..]));
        if !tcp {
            prop_assert_ne!(&d[at..at + 2], &[0, 0]);
        }
    }

    #[test]
    fn encapsulated_packets_are_valid_ipv4_and_udp(
        payload in proptest::collection::vec(any::<u8>(), 0..300),
        sport in any::<u16>(),
        dport in any::<u16>(),
    ) {
        let mut h = Harness::new(&IPEncapClass, "tcp, 192.168.0.1, 192.168.0.2, TTL 9", 1, 1);
        let p = h.push_bytes(0, &payload).remove(0).remove(0);
        let d = p.data();
        prop_assert_eq!(usize::from(u16::from_be_bytes([d[2], d[3]])), payload.len() + 20);
        prop_assert_eq!(cksum(&d[..20]), 0);
        prop_assert_eq!(&d[20..], &payload[..]);
        let config = format!("192.168.0.1, {}, 192.168.0.2, {}", sport, dport);
        let mut h = Harness::new(&UDPIPEncapClass, &config, 1, 1);
        let p = h.push_bytes(0, &payload).remove(0).remove(0);
        let d = p.data();
        prop_assert_eq!(cksum(&d[..20]), 0);
        prop_assert_eq!(&d[20..24], &[(sport >> 8) as u8, sport as u8, (dport >> 8) as u8, dport as u8]);
        prop_assert_eq!(usize::from(u16::from_be_bytes([d[24], d[25]])), payload.len() + 8);
        prop_assert!(transport_sums_to_ffff(d, 17, &d[20..]));
        prop_assert_eq!(&d[28..], &payload[..]);
    }
}
