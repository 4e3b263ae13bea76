//! `ICMP6Error(SRC, TYPE, CODE [, keywords MTU, PMTU])`: answers each input IPv6 packet
//! with an ICMPv6 error message addressed to its source, as Click's ICMP6Error, with the
//! rules of RFC 4443.
//!
//! TYPE is an ICMPv6 error type: 1 (destination unreachable), 2 (packet too big), 3
//! (time exceeded) or 4 (parameter problem). No error is sent, and the input is dropped,
//! for (RFC 4443 2.4 (e)): a packet without a network header; an ICMPv6 error message
//! or redirect (an ICMPv6 message whose type is below 128 or 137, or too short to tell,
//! found after the extension headers Hop-by-Hop, Routing, Destination Options,
//! Fragment (of a first fragment) and Authentication); a packet to a multicast address, or one that came as a link-level
//! broadcast or multicast (packet type annotation), except for packet too big and for
//! parameter problem code 2; a packet whose source is the unspecified address,
//! multicast, or the loopback address.
//!
//! The error is an IPv6 packet starting at its header: traffic class and flow label 0,
//! next header 58, hop limit 255, source SRC, destination the offending packet's
//! source. The ICMPv6 message carries for packet too big the MTU PMTU (1500 unless
//! set), for parameter problem the pointer from the ICMP_PARAMPROB annotation, and
//! quotes the offending packet from its network header on, as much as keeps the whole
//! error within MTU bytes (1280, the minimum IPv6 MTU, unless set). It gets its
//! checksum over the IPv6 pseudo-header, the destination IPv6 annotation set to its
//! destination, the FIX_IP_SRC annotation set, a fresh timestamp, and its network
//! header set.
//!
//! RFC 4443 2.4 (f) requires the errors a node sends to be rate-limited: as in Click,
//! that is a `RatedSplitter` after this element (conf/router6.click has one).

use crate::args::Args;
use crate::element::*;
use crate::error::ConfigError;
use packet::anno::{PacketType, DST_IP6_ANNO_OFFSET, FIX_IP_SRC_ANNO_OFFSET, ICMP_PARAMPROB_ANNO_OFFSET};
use packet::{Packet, PacketBatch, Timestamp};
use std::net::Ipv6Addr;
use std::sync::Arc;

const NEXT_ICMP6: u8 = 58;
const PACKET_TOO_BIG: u8 = 2;
const PARAM_PROBLEM: u8 = 4;
const REDIRECT: u8 = 137;
/// The largest error: its payload length field has 16 bits.
const MAX_MTU: usize = 40 + u16::MAX as usize;
/// IPv6 header and ICMPv6 header.
const HEADERS: usize = 48;

pub struct ICMP6ErrorClass;

impl ElementClass for ICMP6ErrorClass {
    fn name(&self) -> &'static str {
        "ICMP6Error"
    }
    fn port_count(&self) -> PortCount {
        PortCount::parse("1/1")
    }
    fn build(&self, args: &mut Args, cx: &BuildContext) -> Result<Arc<dyn ElementSpec>, ConfigError> {
        let e = |m: String| cx.error(m);
        let src = args.required::<Ipv6Addr>("SRC").map_err(e)?;
        let icmp_type = args.required::<u8>("TYPE").map_err(e)?;
        let code = args.required::<u8>("CODE").map_err(e)?;
        let mtu = args.keyword::<usize>("MTU").map_err(e)?.unwrap_or(1280);
        let pmtu = args.keyword::<u32>("PMTU").map_err(e)?.unwrap_or(1500);
        args.finish().map_err(e)?;
        if src.is_unspecified() {
            return Err(cx.error("SRC must not be ::"));
        }
        if !(1..=4).contains(&icmp_type) {
            return Err(cx.error(format!("ICMP6 type {} is not an error type", icmp_type)));
        }
        if !(HEADERS..=MAX_MTU).contains(&mtu) {
            return Err(cx.error(format!("MTU must be from {} to {}", HEADERS, MAX_MTU)));
        }
        Ok(Arc::new(ICMP6Error {
            src: src.octets(),
            icmp_type,
            code,
            mtu,
            pmtu,
        }))
    }
}

#[derive(Clone, Copy)]
struct ICMP6Error {
    src: [u8; 16],
    icmp_type: u8,
    code: u8,
    /// The largest error packet, bytes.
    mtu: usize,
    /// The MTU a packet-too-big message reports.
    pmtu: u32,
}

impl ElementSpec for ICMP6Error {
    fn instantiate(&self, _w: WorkerInfo) -> Box<dyn Element> {
        Box::new(*self)
    }
}

impl ICMP6Error {
    /// Whether errors about packets to multicast addresses (or that came as link-level
    /// broadcasts) may be sent: RFC 4443 2.4 (e.3), (e.4).
    fn multicast_answered(&self) -> bool {
        self.icmp_type == PACKET_TOO_BIG || (self.icmp_type == PARAM_PROBLEM && self.code == 2)
    }

    /// Builds the error for `p`, or None when none may be sent.
    fn make_error(&self, p: &Packet, now: Timestamp) -> Option<Packet> {
        let nh = p.network_header()?;
        let h = nh.first_chunk::<40>()?;
        let src: [u8; 16] = h[8..24].try_into().ok()?;
        let dst: [u8; 16] = h[24..40].try_into().ok()?;
        if !answerable_payload(h[6], &nh[40..]) {
            return None;
        }
        let pt = p.anno().packet_type;
        let multicast = dst[0] == 0xff || pt == PacketType::Broadcast || pt == PacketType::Multicast;
        if multicast && !self.multicast_answered() {
            return None;
        }
        let s = Ipv6Addr::from(src);
        if s.is_unspecified() || s.is_multicast() || s.is_loopback() {
            return None;
        }
        let xlen = (self.mtu - HEADERS).min(nh.len());
        let plen = 8 + xlen;
        let mut q = Packet::alloc(40 + plen);
        {
            let d = q.data_mut();
            d[..4].copy_from_slice(&[0x60, 0, 0, 0]);
            d[4..6].copy_from_slice(&(plen as u16).to_be_bytes());
            d[6] = NEXT_ICMP6;
            d[7] = 255;
            d[8..24].copy_from_slice(&self.src);
            d[24..40].copy_from_slice(&src);
            let rest = match self.icmp_type {
                PACKET_TOO_BIG => self.pmtu,
                PARAM_PROBLEM => u32::from(p.anno().u8_at(ICMP_PARAMPROB_ANNO_OFFSET)),
                _ => 0,
            };
            d[40] = self.icmp_type;
            d[41] = self.code;
            d[42..44].copy_from_slice(&[0, 0]);
            d[44..48].copy_from_slice(&rest.to_be_bytes());
            d[48..].copy_from_slice(&nh[..xlen]);
            let c = super::icmp6_checksum(&self.src, &src, &d[40..]);
            d[42..44].copy_from_slice(&c.to_be_bytes());
        }
        q.set_user_anno(DST_IP6_ANNO_OFFSET, &src);
        let a = q.anno_mut();
        a.set_u8_at(FIX_IP_SRC_ANNO_OFFSET, 1);
        a.timestamp = now;
        q.set_network_header(0, 40);
        Some(q)
    }
}

/// Whether the payload after the fixed header (first header `next`) may be answered:
/// not an ICMPv6 error or redirect, nor an ICMPv6 message too short to show its type,
/// after any extension headers RFC 8200 lists before an upper layer (Hop-by-Hop 0,
/// Routing 43, Destination Options 60, Fragment 44, Authentication 51). A non-first
/// fragment does not show its upper-layer header and is answered, as is a chain that
/// runs past the packet's end or reaches No Next Header (as Linux's `is_ineligible`).
fn answerable_payload(mut next: u8, payload: &[u8]) -> bool {
    let mut at = 0usize;
    loop {
        let len = match next {
            0 | 43 | 60 => payload.get(at + 1).map(|&l| (usize::from(l) + 1) * 8),
            51 => payload.get(at + 1).map(|&l| (usize::from(l) + 2) * 4),
            44 => match payload.get(at + 2..at + 4) {
                // A non-first fragment (offset bits set): no upper-layer header here.
                Some(o) if u16::from_be_bytes([o[0], o[1]]) & 0xfff8 != 0 => return true,
                Some(_) => Some(8),
                None => None,
            },
            NEXT_ICMP6 => {
                return payload.get(at).is_some_and(|&t| t >= 128 && t != REDIRECT);
            }
            _ => return true,
        };
        let Some(len) = len else {
            return true;
        };
        next = payload[at];
        at += len;
    }
}

impl Element for ICMP6Error {
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, out: &mut Outputs<'_>, cx: &mut Context<'_>) {
        let now = cx.now();
        for p in batch.drain() {
            if let Some(q) = self.make_error(&p, now) {
                out.push(0, q);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::ip6_packet;
    use super::*;
    use crate::testing::{build_error, Harness};

    /// RFC 1071's sum, written out for the tests: 16-bit big-endian words, odd byte
    /// padded, end-around carries.
    fn ones_sum(b: &[u8]) -> u32 {
        let mut s: u32 = 0;
        for c in b.chunks(2) {
            s += (u32::from(c[0]) << 8) | u32::from(*c.get(1).unwrap_or(&0));
        }
        while s > 0xffff {
            s = (s & 0xffff) + (s >> 16);
        }
        s
    }

    /// The error the tests expect: IPv6 header from 2001:db8::fe to `to`, then type,
    /// code, checksum (over the pseudo-header: source, destination, length as 32
    /// bits, three zero bytes and 58), `rest`, and `quote`.
    fn expected(to: &str, t: u8, code: u8, rest: u32, quote: &[u8]) -> Vec<u8> {
        let src = "2001:db8::fe".parse::<Ipv6Addr>().unwrap().octets();
        let dst = to.parse::<Ipv6Addr>().unwrap().octets();
        let plen = 8 + quote.len();
        let mut icmp = vec![t, code, 0, 0];
        icmp.extend_from_slice(&rest.to_be_bytes());
        icmp.extend_from_slice(quote);
        let mut pseudo = Vec::new();
        pseudo.extend_from_slice(&src);
        pseudo.extend_from_slice(&dst);
        pseudo.extend_from_slice(&(plen as u32).to_be_bytes());
        pseudo.extend_from_slice(&[0, 0, 0, 58]);
        pseudo.extend_from_slice(&icmp);
        let c = !(ones_sum(&pseudo) as u16);
        icmp[2..4].copy_from_slice(&c.to_be_bytes());
        let mut v = vec![0x60, 0, 0, 0];
        v.extend_from_slice(&(plen as u16).to_be_bytes());
        v.extend_from_slice(&[58, 255]);
        v.extend_from_slice(&src);
        v.extend_from_slice(&dst);
        v.extend_from_slice(&icmp);
        v
    }

    fn marked(bytes: &[u8]) -> Packet {
        let mut p = Packet::from_slice(bytes);
        p.set_network_header(0, 40);
        p
    }

    #[test]
    fn time_exceeded_quotes_the_packet() {
        let pkt = ip6_packet("2001:db8:5::9", "2001:db8:7::1", 1, b"some udp");
        let mut e = Harness::new(&ICMP6ErrorClass, "2001:db8::fe, 3, 0", 1, 1);
        let out = e.push(0, vec![marked(&pkt)]);
        assert_eq!(out[0].len(), 1);
        let q = &out[0][0];
        assert_eq!(q.data(), &expected("2001:db8:5::9", 3, 0, 0, &pkt)[..]);
        assert_eq!(
            q.anno().dst_ip6(),
            "2001:db8:5::9".parse::<Ipv6Addr>().unwrap().octets()
        );
        assert_eq!(q.anno().u8_at(FIX_IP_SRC_ANNO_OFFSET), 1);
        assert_eq!(q.network_header_length(), 40);
        // The checksum verifies: the whole message with the pseudo-header sums to 0xffff.
        let d = q.data();
        let mut all = d[8..40].to_vec();
        all.extend_from_slice(&((d.len() - 40) as u32).to_be_bytes());
        all.extend_from_slice(&[0, 0, 0, 58]);
        all.extend_from_slice(&d[40..]);
        assert_eq!(ones_sum(&all), 0xffff);
    }

    #[test]
    fn the_quote_is_cut_to_the_mtu_and_fields_filled_by_type() {
        let big = ip6_packet("2001:db8:5::9", "2001:db8:7::1", 64, &[7u8; 1400]);
        let mut e = Harness::new(&ICMP6ErrorClass, "2001:db8::fe, 2, 0, PMTU 1400", 1, 1);
        let out = e.push(0, vec![marked(&big)]);
        // 1280 bytes in all: the quote is the packet's first 1232.
        assert_eq!(out[0][0].len(), 1280);
        assert_eq!(
            out[0][0].data(),
            &expected("2001:db8:5::9", 2, 0, 1400, &big[..1232])[..]
        );
        // Parameter problem: the pointer from the annotation; a smaller MTU.
        let pkt = ip6_packet("2001:db8:5::9", "2001:db8:7::1", 64, b"x");
        let mut p = marked(&pkt);
        p.anno_mut().set_u8_at(ICMP_PARAMPROB_ANNO_OFFSET, 6);
        let mut e = Harness::new(&ICMP6ErrorClass, "2001:db8::fe, 4, 0, MTU 60", 1, 1);
        let out = e.push(0, vec![p]);
        assert_eq!(
            out[0][0].data(),
            &expected("2001:db8:5::9", 4, 0, 6, &pkt[..12])[..]
        );
    }

    #[test]
    fn no_error_where_rfc_4443_forbids_one() {
        let to_multicast = ip6_packet("2001:db8:5::9", "ff02::1", 1, b"");
        let from_unspecified = ip6_packet("::", "2001:db8:7::1", 1, b"");
        let from_multicast = ip6_packet("ff02::2", "2001:db8:7::1", 1, b"");
        let from_loopback = ip6_packet("::1", "2001:db8:7::1", 1, b"");
        // An ICMPv6 error (type 1) and one too short to tell.
        let icmp_error = {
            let mut b = ip6_packet("2001:db8:5::9", "2001:db8:7::1", 1, &[1, 0, 0, 0]);
            b[6] = 58;
            b
        };
        let icmp_short = {
            let mut b = ip6_packet("2001:db8:5::9", "2001:db8:7::1", 1, &[]);
            b[6] = 58;
            b
        };
        let mut link_broadcast = marked(&ip6_packet("2001:db8:5::9", "2001:db8:7::1", 1, b""));
        link_broadcast.anno_mut().packet_type = PacketType::Broadcast;
        let mut e = Harness::new(&ICMP6ErrorClass, "2001:db8::fe, 3, 0", 1, 1);
        let mut pkts: Vec<Packet> = [
            to_multicast.clone(),
            from_unspecified,
            from_multicast,
            from_loopback,
        ]
        .iter()
        .chain([icmp_error, icmp_short].iter())
        .map(|b| marked(b))
        .collect();
        pkts.push(link_broadcast);
        // And no network header at all.
        pkts.push(Packet::from_slice(&ip6_packet(
            "2001:db8:5::9",
            "2001:db8:7::1",
            1,
            b"",
        )));
        assert!(e.push(0, pkts)[0].is_empty());
        // An ICMPv6 informational message (echo request, 128) does get one.
        let mut echo = ip6_packet("2001:db8:5::9", "2001:db8:7::1", 1, &[128, 0, 0, 0]);
        echo[6] = 58;
        assert_eq!(e.push(0, vec![marked(&echo)])[0].len(), 1);
        // Packet too big is sent for a multicast destination too.
        let mut e = Harness::new(&ICMP6ErrorClass, "2001:db8::fe, 2, 0", 1, 1);
        let out = e.push(0, vec![marked(&to_multicast)]);
        assert_eq!(
            out[0][0].data(),
            &expected("2001:db8:5::9", 2, 0, 1500, &to_multicast)[..]
        );
    }

    /// A packet whose payload is `chain` (extension headers, then what follows), with
    /// `first` as the fixed header's next header.
    fn with_chain(first: u8, chain: &[u8]) -> Packet {
        let mut b = ip6_packet("2001:db8:5::9", "2001:db8:7::1", 1, chain);
        b[6] = first;
        marked(&b)
    }

    #[test]
    fn icmp_errors_and_redirects_behind_extension_headers_are_not_answered() {
        let mut e = Harness::new(&ICMP6ErrorClass, "2001:db8::fe, 3, 0", 1, 1);
        // Hop-by-Hop (8 bytes: next 58, length 0, PadN) then destination unreachable.
        let hbh_error = with_chain(0, &[58, 0, 1, 4, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0]);
        // Destination Options of 16 bytes (length 1), Routing (8), then time exceeded.
        let mut two = vec![43, 1, 1, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
        two.extend_from_slice(&[58, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0]);
        let dst_routing_error = with_chain(60, &two);
        // A first fragment (offset 0, more fragments) of a parameter problem.
        let first_fragment = with_chain(44, &[58, 0, 0, 1, 0, 0, 0, 7, 4, 0, 0, 0, 0, 0, 0, 0]);
        // Authentication header (length 1: (1 + 2) * 4 = 12 bytes), then an error.
        let mut ah = vec![58, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1];
        ah.extend_from_slice(&[2, 0, 0, 0, 0, 0, 5, 0xdc]);
        let ah_error = with_chain(51, &ah);
        // A redirect (137), after no extension header and after Hop-by-Hop.
        let redirect = with_chain(58, &[137, 0, 0, 0, 0, 0, 0, 0]);
        let hbh_redirect = with_chain(0, &[58, 0, 1, 4, 0, 0, 0, 0, 137, 0, 0, 0, 0, 0, 0, 0]);
        // An ICMPv6 header cut off after a Hop-by-Hop header.
        let hbh_short = with_chain(0, &[58, 0, 1, 4, 0, 0, 0, 0]);
        let pkts = vec![
            hbh_error,
            dst_routing_error,
            first_fragment,
            ah_error,
            redirect,
            hbh_redirect,
            hbh_short,
        ];
        assert!(e.push(0, pkts)[0].is_empty());

        // Answered: an echo request behind Hop-by-Hop; a non-first fragment (offset 8,
        // whose bytes after the fragment header are data, not a type); a chain cut off
        // inside a header; No Next Header (59); UDP behind Destination Options.
        let hbh_echo = with_chain(0, &[58, 0, 1, 4, 0, 0, 0, 0, 128, 0, 0, 0, 0, 0, 0, 0]);
        let later_fragment = with_chain(44, &[58, 0, 0, 0x40, 0, 0, 0, 7, 1, 0, 0, 0]);
        let cut_chain = with_chain(0, &[58]);
        let no_next = with_chain(59, &[]);
        let dst_udp = with_chain(60, &[17, 0, 1, 4, 0, 0, 0, 0, 0, 53, 0, 53, 0, 8, 0, 0]);
        let out = e.push(0, vec![hbh_echo, later_fragment, cut_chain, no_next, dst_udp]);
        assert_eq!(out[0].len(), 5);
        assert!(out[0].iter().all(|q| q.data()[40] == 3));
    }

    #[test]
    fn the_largest_mtu_fills_the_payload_length_field_exactly() {
        // A 65,575-byte packet (the largest payload length) answered with MTU 65575:
        // the quote is 65,527 bytes and the payload length field says 65,535.
        let big = ip6_packet("2001:db8:5::9", "2001:db8:7::1", 1, &vec![9u8; 65_535]);
        let mut e = Harness::new(&ICMP6ErrorClass, "2001:db8::fe, 3, 0, MTU 65575", 1, 1);
        let out = e.push(0, vec![marked(&big)]);
        let q = &out[0][0];
        assert_eq!(q.len(), 65_575);
        assert_eq!(&q.data()[4..6], &[0xff, 0xff]);
        assert_eq!(q.data(), &expected("2001:db8:5::9", 3, 0, 0, &big[..65_527])[..]);
    }

    #[test]
    fn config_errors() {
        let err = |c| build_error(&ICMP6ErrorClass, c, 1, 1);
        assert_eq!(
            err("2001:db8::fe, 3"),
            "e :: ICMP6Error: missing mandatory CODE argument"
        );
        assert_eq!(err("::, 3, 0"), "e :: ICMP6Error: SRC must not be ::");
        assert_eq!(err("10.0.0.1, 3, 0"), "e :: ICMP6Error: SRC expects IPv6 address");
        assert_eq!(
            err("2001:db8::fe, 128, 0"),
            "e :: ICMP6Error: ICMP6 type 128 is not an error type"
        );
        assert_eq!(
            err("2001:db8::fe, 3, 256"),
            "e :: ICMP6Error: CODE expects unsigned integer"
        );
        assert_eq!(
            err("2001:db8::fe, 3, 0, MTU 40"),
            "e :: ICMP6Error: MTU must be from 48 to 65575"
        );
        // The error's payload length field has 16 bits.
        assert_eq!(
            err("2001:db8::fe, 3, 0, MTU 65576"),
            "e :: ICMP6Error: MTU must be from 48 to 65575"
        );
    }
}
