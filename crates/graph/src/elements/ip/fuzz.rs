//! Property: no IP element panics on any bytes, wherever the network header points.

use super::checkipheader::{CHECK_IP_HEADER, CHECK_IP_HEADER2};
use super::decipttl::DecIPTTLClass;
use super::dropbroadcasts::DropBroadcastsClass;
use super::fixipsrc::FixIPSrcClass;
use super::getipaddress::GetIPAddressClass;
use super::icmperror::ICMPErrorClass;
use super::ipfragmenter::IPFragmenterClass;
use super::ipgwoptions::IPGW_OPTIONS;
use super::setipaddress::SetIPAddressClass;
use crate::element::ElementClass;
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
        proto in prop_oneof![Just(1u8), Just(17u8)],
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
