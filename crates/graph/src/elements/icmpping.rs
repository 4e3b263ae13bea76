//! `ICMPPingResponder()`: answers ICMP echo requests, as Click's element of that name.
//!
//! The request becomes its reply in place: source and destination swapped, TTL 255,
//! the fragment field cleared (DF too, as Click does), ICMP type 0 and code 0 (echo
//! reply, RFC 792), both checksums fixed; the destination IP annotation is set
//! to the new destination (so a route lookup can send the reply back), the paint
//! annotation cleared and the timestamp set to now. IP options travel back as they came
//! (a record-route or timestamp option is then filled further by the routers on the way
//! back, as RFC 1122 3.2.2.6 asks of echo replies). Anything else (not IPv4, not ICMP, a
//! fragment, truncated, another ICMP type) goes to output 1, or is dropped without
//! one. Requests to a multicast address or to 255.255.255.255 are not answered
//! (RFC 1122 3.2.2.6 allows that, and a reply would carry that address as its source).

use crate::args::Args;
use crate::element::*;
use crate::error::ConfigError;
use packet::anno::PAINT_ANNO_OFFSET;
use packet::checksum::update16;
use packet::{Packet, PacketBatch, Timestamp};
use std::sync::Arc;

const ICMP: u8 = 1;
const ECHO_REQUEST: u8 = 8;
const ECHO_REPLY: u8 = 0;
/// The TTL of a reply: the largest, as Click's element gives (the reply may have far to go).
const REPLY_TTL: u8 = 255;

/// A class of element that answers echo requests: `ICMPPingResponder` here, and
/// `ICMP6PingResponder` (`ip6/icmp6ping.rs`) with its own `answer`.
pub struct PingResponderClass {
    pub(crate) name: &'static str,
    /// Turns a packet into the reply to the echo request it holds; false (and the
    /// packet unchanged) if it holds none to answer.
    pub(crate) answer: fn(&mut Packet) -> bool,
}

pub const ICMP_PING_RESPONDER: PingResponderClass = PingResponderClass {
    name: "ICMPPingResponder",
    answer,
};

impl ElementClass for PingResponderClass {
    fn name(&self) -> &'static str {
        self.name
    }
    fn port_count(&self) -> PortCount {
        PortCount::parse("1/1-2")
    }
    fn build(&self, args: &mut Args, cx: &BuildContext) -> Result<Arc<dyn ElementSpec>, ConfigError> {
        args.finish().map_err(|e| cx.error(e))?;
        Ok(Arc::new(PingResponderSpec(self.answer)))
    }
}

struct PingResponderSpec(fn(&mut Packet) -> bool);

impl ElementSpec for PingResponderSpec {
    fn instantiate(&self, _w: WorkerInfo) -> Box<dyn Element> {
        Box::new(PingResponder(self.0))
    }
}

struct PingResponder(fn(&mut Packet) -> bool);

impl Element for PingResponder {
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, out: &mut Outputs<'_>, _cx: &mut Context<'_>) {
        for mut p in batch.drain() {
            if (self.0)(&mut p) {
                out.push(0, p);
            } else if out.len() > 1 {
                out.push(1, p);
            }
        }
    }
}

/// Turns the echo request message `icmp` (ICMP or ICMPv6: type, code, checksum first)
/// into its reply of type `reply`, code 0, the checksum updated for the two bytes
/// changed (the ICMPv6 pseudo-header sums the same with the addresses swapped).
pub(crate) fn make_reply(icmp: &mut [u8], reply: u8) {
    let old = u16::from_be_bytes([icmp[0], icmp[1]]);
    icmp[0] = reply;
    icmp[1] = 0;
    let sum = update16(
        u16::from_be_bytes([icmp[2], icmp[3]]),
        old,
        u16::from_be_bytes([icmp[0], icmp[1]]),
    );
    icmp[2..4].copy_from_slice(&sum.to_be_bytes());
}

/// A reply's annotations besides its destination: paint cleared, timestamp now.
pub(crate) fn reply_annotations(p: &mut Packet) {
    p.set_user_anno(PAINT_ANNO_OFFSET, &[0]);
    p.anno_mut().timestamp = Timestamp::now();
}

/// Turns `p` into the reply to the echo request it holds; false (and `p` unchanged) if it
/// holds none to answer.
fn answer(p: &mut Packet) -> bool {
    let Some(ip) = p.network_header_mut() else {
        return false;
    };
    if ip.len() < 20 || ip[0] >> 4 != 4 || ip[9] != ICMP {
        return false;
    }
    let hlen = usize::from(ip[0] & 0x0f) * 4;
    let total = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
    // A fragment (offset or more-fragments set) holds part of a request at most.
    let fragment = u16::from_be_bytes([ip[6], ip[7]]) & 0x3fff != 0;
    if hlen < 20 || total < hlen + 8 || total > ip.len() || fragment || ip[hlen] != ECHO_REQUEST {
        return false;
    }
    let dst = [ip[16], ip[17], ip[18], ip[19]];
    if dst[0] >> 4 == 0xe || dst == [255; 4] {
        return false;
    }
    let src = [ip[12], ip[13], ip[14], ip[15]];
    ip[12..16].copy_from_slice(&dst);
    ip[16..20].copy_from_slice(&src);
    ip[6..8].fill(0);
    ip[8] = REPLY_TTL;
    super::ip::set_header_checksum(&mut ip[..hlen]);
    make_reply(&mut ip[hlen..], ECHO_REPLY);
    p.set_dst_ip_anno(src);
    reply_annotations(p);
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::Harness;
    use packet::anno::DST_IP_ANNO_OFFSET;

    /// The Internet checksum of `data`, summed here word by word.
    fn inet_sum(data: &[u8]) -> u16 {
        let mut s: u32 = data
            .chunks(2)
            .map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)])))
            .sum();
        while s > 0xffff {
            s = (s & 0xffff) + (s >> 16);
        }
        !(s as u16)
    }

    /// An IPv4 header of `hlen` bytes (options zero-filled as NOPs would not be: the
    /// tests use all-zero option bytes, which the element does not read) with a correct
    /// checksum, then `payload`.
    fn ip_packet(hlen: usize, frag: u16, proto: u8, src: [u8; 4], dst: [u8; 4], payload: &[u8]) -> Vec<u8> {
        let mut h = vec![0u8; hlen];
        h[0] = 0x40 | (hlen / 4) as u8;
        h[2..4].copy_from_slice(&((hlen + payload.len()) as u16).to_be_bytes());
        h[4..6].copy_from_slice(&0x1234u16.to_be_bytes());
        h[6..8].copy_from_slice(&frag.to_be_bytes());
        h[8] = 64;
        h[9] = proto;
        h[12..16].copy_from_slice(&src);
        h[16..20].copy_from_slice(&dst);
        let c = inet_sum(&h);
        h[10..12].copy_from_slice(&c.to_be_bytes());
        h.extend_from_slice(payload);
        h
    }

    /// An ICMP message of `kind` with identifier 0x0102, sequence 7, data "ping!",
    /// its checksum right.
    fn icmp(kind: u8) -> Vec<u8> {
        let mut m = vec![
            kind, 0, 0, 0, 0x01, 0x02, 0x00, 0x07, b'p', b'i', b'n', b'g', b'!',
        ];
        let c = inet_sum(&m);
        m[2..4].copy_from_slice(&c.to_be_bytes());
        m
    }

    fn with_header(bytes: &[u8], hlen: usize) -> Packet {
        let mut p = Packet::from_slice(bytes);
        p.set_network_header(0, hlen);
        p.set_user_anno(PAINT_ANNO_OFFSET, &[3]);
        p
    }

    const HOST: [u8; 4] = [10, 0, 1, 2];
    const ROUTER: [u8; 4] = [10, 0, 1, 1];

    #[test]
    fn echo_request_becomes_its_reply() {
        // DF set, and code 5 (RFC 792 says 0; the reply says 0 whatever came).
        let mut request = icmp(ECHO_REQUEST);
        request[1] = 5;
        request[2..4].fill(0);
        let c = inet_sum(&request);
        request[2..4].copy_from_slice(&c.to_be_bytes());
        let req = ip_packet(20, 0x4000, ICMP, HOST, ROUTER, &request);
        // Built by hand: addresses swapped, fragment field 0, TTL 255, the header
        // checksum of that header, type 0, code 0 and the ICMP checksum of the reply.
        let mut want = req.clone();
        want[6..8].fill(0);
        want[8] = 255;
        want[12..16].copy_from_slice(&ROUTER);
        want[16..20].copy_from_slice(&HOST);
        want[10..12].fill(0);
        let c = inet_sum(&want[..20]);
        want[10..12].copy_from_slice(&c.to_be_bytes());
        want[20..].copy_from_slice(&icmp(ECHO_REPLY));

        let mut h = Harness::new(&ICMP_PING_RESPONDER, "", 1, 2);
        let out = h.push(0, vec![with_header(&req, 20)]);
        assert_eq!(out[0].len(), 1);
        assert!(out[1].is_empty());
        let r = &out[0][0];
        assert_eq!(r.data(), &want[..]);
        assert_eq!(inet_sum(&r.data()[..20]), 0);
        assert_eq!(inet_sum(&r.data()[20..]), 0);
        assert_eq!(r.anno().user[DST_IP_ANNO_OFFSET..DST_IP_ANNO_OFFSET + 4], HOST);
        assert_eq!(r.anno().u8_at(PAINT_ANNO_OFFSET), 0);
        assert!(!r.anno().timestamp.is_zero());
    }

    #[test]
    fn options_travel_back_in_the_reply() {
        // A record-route option (7, length 7, pointer 4, one empty slot) and an end.
        let mut req = ip_packet(28, 0, ICMP, HOST, ROUTER, &icmp(ECHO_REQUEST));
        req[20..28].copy_from_slice(&[7, 7, 4, 0, 0, 0, 0, 0]);
        req[10..12].fill(0);
        let c = inet_sum(&req[..28]);
        req[10..12].copy_from_slice(&c.to_be_bytes());
        let mut h = Harness::new(&ICMP_PING_RESPONDER, "", 1, 1);
        let out = h.push(0, vec![with_header(&req, 28)]);
        let r = out[0][0].data();
        assert_eq!(&r[20..28], &[7, 7, 4, 0, 0, 0, 0, 0]);
        assert_eq!((&r[12..16], &r[16..20]), (&ROUTER[..], &HOST[..]));
        assert_eq!(inet_sum(&r[..28]), 0);
        assert_eq!(r[28], ECHO_REPLY);
        assert_eq!(inet_sum(&r[28..]), 0);
    }

    #[test]
    fn everything_else_goes_to_output_1_unchanged_or_is_dropped() {
        let udp = [0u8; 16];
        let mut too_short = ip_packet(20, 0, ICMP, HOST, ROUTER, &icmp(ECHO_REQUEST));
        too_short.truncate(26);
        let cases: Vec<(&str, Vec<u8>)> = vec![
            (
                "echo reply",
                ip_packet(20, 0, ICMP, HOST, ROUTER, &icmp(ECHO_REPLY)),
            ),
            ("UDP", ip_packet(20, 0, 17, HOST, ROUTER, &udp)),
            (
                "first fragment",
                ip_packet(20, 0x2000, ICMP, HOST, ROUTER, &icmp(ECHO_REQUEST)),
            ),
            (
                "later fragment",
                ip_packet(20, 0x0001, ICMP, HOST, ROUTER, &icmp(ECHO_REQUEST)),
            ),
            (
                "to a multicast group",
                ip_packet(20, 0, ICMP, HOST, [224, 0, 0, 1], &icmp(ECHO_REQUEST)),
            ),
            (
                "to the broadcast address",
                ip_packet(20, 0, ICMP, HOST, [255; 4], &icmp(ECHO_REQUEST)),
            ),
            ("truncated", too_short),
        ];
        for (what, bytes) in &cases {
            let mut h = Harness::new(&ICMP_PING_RESPONDER, "", 1, 2);
            let out = h.push(0, vec![with_header(bytes, 20)]);
            assert!(out[0].is_empty(), "{}", what);
            assert_eq!(out[1].len(), 1, "{}", what);
            assert_eq!(out[1][0].data(), &bytes[..], "{}", what);
            let mut h = Harness::new(&ICMP_PING_RESPONDER, "", 1, 1);
            assert!(h.push(0, vec![with_header(bytes, 20)])[0].is_empty(), "{}", what);
        }
        // No network header, or one that is not IPv4.
        let mut h = Harness::new(&ICMP_PING_RESPONDER, "", 1, 2);
        let out = h.push(0, vec![Packet::from_slice(&[0x45; 40])]);
        assert_eq!(out[1].len(), 1);
        let mut v6 = ip_packet(20, 0, ICMP, HOST, ROUTER, &icmp(ECHO_REQUEST));
        v6[0] = 0x65;
        let out = h.push(0, vec![with_header(&v6, 20)]);
        assert_eq!(out[1].len(), 1);
    }

    #[test]
    fn takes_no_arguments() {
        let e = crate::testing::build_error(&ICMP_PING_RESPONDER, "10.0.0.1", 1, 1);
        assert!(e.contains("too many arguments"), "{}", e);
    }
}
