//! `ICMP6PingResponder()`: answers ICMPv6 echo requests (RFC 4443 4.1-4.2), the IPv6
//! counterpart of `ICMPPingResponder` (brickroute's own; Click has none).
//!
//! The request becomes its reply in place: source and destination swapped, hop limit
//! 255, ICMPv6 type 129 and code 0, the checksum fixed (swapping the addresses leaves the
//! pseudo-header's sum as it was); the destination IPv6 annotation is set to the new
//! destination (so a route lookup can send the reply back), the paint annotation cleared
//! and the timestamp set to now. Anything else (not IPv6, an extension header before the
//! ICMPv6 one, truncated, another ICMPv6 type) goes to output 1, or is dropped without
//! one. Requests to a multicast address are not answered: RFC 4443 4.2 wants their
//! reply to come from a unicast address of the interface, which the element does not
//! know; nor requests from a multicast or the unspecified address.

use crate::elements::icmpping::{make_reply, reply_annotations, PingResponderClass};
use packet::Packet;

const ICMP6: u8 = 58;
const ECHO_REQUEST: u8 = 128;
const ECHO_REPLY: u8 = 129;
/// The hop limit of a reply: the largest, as `ICMPPingResponder` gives its TTL.
const REPLY_HOP_LIMIT: u8 = 255;
/// An IPv6 header, and an echo message's type, code, checksum, identifier and
/// sequence number.
const HEADER: usize = 40;
const ECHO_HEADER: usize = 8;

pub const ICMP6_PING_RESPONDER: PingResponderClass = PingResponderClass {
    name: "ICMP6PingResponder",
    answer,
};

/// Turns `p` into the reply to the echo request it holds; false (and `p` unchanged) if it
/// holds none to answer.
fn answer(p: &mut Packet) -> bool {
    let Some(ip) = p.network_header_mut() else {
        return false;
    };
    if ip.len() < HEADER + ECHO_HEADER || ip[0] >> 4 != 6 || ip[6] != ICMP6 {
        return false;
    }
    let payload = usize::from(u16::from_be_bytes([ip[4], ip[5]]));
    if payload < ECHO_HEADER || HEADER + payload > ip.len() || ip[HEADER] != ECHO_REQUEST {
        return false;
    }
    let mut dst = [0u8; 16];
    dst.copy_from_slice(&ip[24..40]);
    let mut src = [0u8; 16];
    src.copy_from_slice(&ip[8..24]);
    // Not to a multicast address (see above), nor from one or from the unspecified
    // address, which a reply cannot go to.
    if dst[0] == 0xff || src[0] == 0xff || src == [0; 16] {
        return false;
    }
    ip[8..24].copy_from_slice(&dst);
    ip[24..40].copy_from_slice(&src);
    ip[7] = REPLY_HOP_LIMIT;
    make_reply(&mut ip[HEADER..], ECHO_REPLY);
    p.set_dst_ip6_anno(src);
    reply_annotations(p);
    true
}

#[cfg(test)]
mod tests {
    use super::super::icmp6_checksum;
    use super::*;
    use crate::testing::Harness;
    use packet::anno::{DST_IP6_ANNO_OFFSET, PAINT_ANNO_OFFSET};
    use std::net::Ipv6Addr;

    const HOST: &str = "2001:db8:1::2";
    const ROUTER: &str = "2001:db8:1::1";

    fn octets(a: &str) -> [u8; 16] {
        a.parse::<Ipv6Addr>().unwrap().octets()
    }

    /// An ICMPv6 message of `kind` and `code` from `src` to `dst`, identifier 0x0102,
    /// sequence 7, data "ping!", its checksum computed from scratch.
    fn echo(kind: u8, code: u8, src: &str, dst: &str) -> Vec<u8> {
        let mut m = vec![
            kind, code, 0, 0, 0x01, 0x02, 0x00, 0x07, b'p', b'i', b'n', b'g', b'!',
        ];
        let c = icmp6_checksum(&octets(src), &octets(dst), &m);
        m[2..4].copy_from_slice(&c.to_be_bytes());
        m
    }

    /// An IPv6 header from `src` to `dst` with next header `next` and hop limit 64, then
    /// `payload`.
    fn ip6(next: u8, src: &str, dst: &str, payload: &[u8]) -> Vec<u8> {
        let mut b = vec![0x60, 0, 0, 0];
        b.extend_from_slice(&(payload.len() as u16).to_be_bytes());
        b.extend_from_slice(&[next, 64]);
        b.extend_from_slice(&octets(src));
        b.extend_from_slice(&octets(dst));
        b.extend_from_slice(payload);
        b
    }

    fn with_header(bytes: &[u8]) -> Packet {
        let mut p = Packet::from_slice(bytes);
        p.set_network_header(0, 40);
        p.set_user_anno(PAINT_ANNO_OFFSET, &[3]);
        p
    }

    fn run(packets: Vec<Packet>) -> Vec<Vec<Packet>> {
        let mut h = Harness::new(&ICMP6_PING_RESPONDER, "", 1, 2);
        h.push(0, packets)
    }

    #[test]
    fn echo_request_becomes_its_reply() {
        // Code 3 (RFC 4443 says 0; the reply says 0 whatever came).
        let req = ip6(ICMP6, HOST, ROUTER, &echo(ECHO_REQUEST, 3, HOST, ROUTER));
        // Built by hand: addresses swapped, hop limit 255, and the reply message with
        // the checksum computed for it from scratch.
        let want = {
            let mut w = ip6(ICMP6, ROUTER, HOST, &echo(ECHO_REPLY, 0, ROUTER, HOST));
            w[7] = 255;
            w
        };
        let out = run(vec![with_header(&req)]);
        assert_eq!(out[0].len(), 1);
        assert!(out[1].is_empty());
        let r = &out[0][0];
        assert_eq!(r.data(), &want[..]);
        assert_eq!(
            r.anno().user[DST_IP6_ANNO_OFFSET..DST_IP6_ANNO_OFFSET + 16],
            octets(HOST)
        );
        assert_eq!(r.anno().u8_at(PAINT_ANNO_OFFSET), 0);
        assert!(!r.anno().timestamp.is_zero());
    }

    #[test]
    fn a_link_layer_header_in_front_stays_and_the_reply_is_right_behind_it() {
        let mut frame = vec![0xaa; 14];
        frame.extend_from_slice(&ip6(ICMP6, HOST, ROUTER, &echo(ECHO_REQUEST, 0, HOST, ROUTER)));
        let mut p = Packet::from_slice(&frame);
        p.set_network_header(14, 40);
        let out = run(vec![p]);
        assert_eq!(out[0].len(), 1);
        let r = out[0][0].data();
        assert_eq!(&r[..14], &[0xaa; 14]);
        let mut want = ip6(ICMP6, ROUTER, HOST, &echo(ECHO_REPLY, 0, ROUTER, HOST));
        want[7] = 255;
        assert_eq!(&r[14..], &want[..]);
    }

    #[test]
    fn what_is_not_a_request_to_answer_goes_to_output_1_unchanged() {
        let cases: Vec<(&str, Vec<u8>)> = vec![
            (
                "echo reply",
                ip6(ICMP6, HOST, ROUTER, &echo(ECHO_REPLY, 0, HOST, ROUTER)),
            ),
            ("UDP", ip6(17, HOST, ROUTER, &[0; 16])),
            // A hop-by-hop options header in front of the ICMPv6 one.
            ("extension header", {
                let mut ext = vec![ICMP6, 0, 0, 0, 0, 0, 0, 0];
                ext.extend_from_slice(&echo(ECHO_REQUEST, 0, HOST, ROUTER));
                ip6(0, HOST, ROUTER, &ext)
            }),
            ("to a multicast address", {
                ip6(ICMP6, HOST, "ff02::1", &echo(ECHO_REQUEST, 0, HOST, "ff02::1"))
            }),
            ("from a multicast address", {
                ip6(
                    ICMP6,
                    "ff02::1",
                    ROUTER,
                    &echo(ECHO_REQUEST, 0, "ff02::1", ROUTER),
                )
            }),
            ("from the unspecified address", {
                ip6(ICMP6, "::", ROUTER, &echo(ECHO_REQUEST, 0, "::", ROUTER))
            }),
            ("payload length past the packet", {
                let mut b = ip6(ICMP6, HOST, ROUTER, &echo(ECHO_REQUEST, 0, HOST, ROUTER));
                b[5] += 1;
                b
            }),
            (
                "shorter than an echo header",
                ip6(ICMP6, HOST, ROUTER, &[ECHO_REQUEST, 0, 0, 0]),
            ),
            ("IPv4", {
                let mut b = ip6(ICMP6, HOST, ROUTER, &echo(ECHO_REQUEST, 0, HOST, ROUTER));
                b[0] = 0x45;
                b
            }),
        ];
        for (what, bytes) in cases {
            let out = run(vec![with_header(&bytes)]);
            assert!(out[0].is_empty(), "{what}: answered");
            assert_eq!(out[1].len(), 1, "{what}");
            assert_eq!(out[1][0].data(), &bytes[..], "{what}: changed");
            assert_eq!(out[1][0].anno().u8_at(PAINT_ANNO_OFFSET), 3, "{what}");
        }
    }

    #[test]
    fn without_output_1_the_others_are_dropped() {
        let mut h = Harness::new(&ICMP6_PING_RESPONDER, "", 1, 1);
        let out = h.push(
            0,
            vec![
                with_header(&ip6(17, HOST, ROUTER, &[0; 16])),
                with_header(&ip6(ICMP6, HOST, ROUTER, &echo(ECHO_REQUEST, 0, HOST, ROUTER))),
            ],
        );
        assert_eq!(out[0].len(), 1);
        assert_eq!(out[0][0].data()[40], ECHO_REPLY);
    }

    #[test]
    fn takes_no_arguments() {
        let e = crate::testing::build_error(&ICMP6_PING_RESPONDER, "2001:db8::1", 1, 1);
        assert!(e.contains("too many arguments"), "{}", e);
    }

    #[test]
    fn a_packet_without_a_network_header_goes_to_output_1() {
        let out = run(vec![Packet::from_slice(&[0x60; 60])]);
        assert_eq!(out[1].len(), 1);
    }
}
