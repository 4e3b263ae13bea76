//! `CheckUDPHeader`, `CheckTCPHeader` and `CheckICMPHeader`: validate the transport
//! header of IPv4 packets whose network header annotation is set (by CheckIPHeader or
//! MarkIPHeader), as Click's elements of the same names. One implementation: the three
//! differ only in the protocol they expect and in their length rules.
//!
//! Click's checks, in its order:
//! - the network header annotation is set and the IP protocol is the element's
//!   ("not UDP", "not TCP", "not ICMP");
//! - lengths ("bad packet length"). UDP: the UDP length is at least 8 and its bytes lie
//!   in the packet. TCP: the data offset is at least 5 words and within the segment the
//!   IP length gives, whose bytes lie in the packet. ICMP: the rest of the packet (from
//!   the transport header to its end) holds an 8-byte ICMP header, plus a quoted IP
//!   header and 8 bytes for the error types (unreachable, source quench, redirect, time
//!   exceeded, parameter problem), exactly 12 more bytes for timestamp request and reply,
//!   nothing more for information request and reply;
//! - the checksum ("bad UDP checksum", ...): UDP and TCP over the pseudo-header and the
//!   UDP length's or segment's bytes, UDP's only when its checksum field is not 0 (RFC
//!   768's "no checksum"), ICMP over the rest of the packet.
//!
//! Click has no keyword to turn the checksum off, and it does not look at the fragment
//! fields: a fragment is checked as any packet (a first fragment's UDP length or TCP
//! segment is longer than its bytes, a later fragment's data is read as a header), so
//! fragments usually fail. The transport header is read IHL words past the network
//! header, where CheckIPHeader and MarkIPHeader put the transport annotation.
//!
//! Where Click would read past the packet (an IP header shorter than 20 bytes or than
//! its IHL, a UDP or TCP header cut short, an IP length below the header length, which
//! Click's unsigned arithmetic lets through to a checksum over gigabytes) the packet
//! fails with "bad packet length".
//!
//! Bad packets go to output 1 if it is connected, else they are dropped; either way
//! they count in `drops` (and in `drop_details` with DETAILS true). The first failure is
//! reported on standard error, or every one with VERBOSE true.

use super::checkdrops::CheckDrops;
use crate::args::Args;
use crate::element::*;
use crate::error::ConfigError;
use packet::checksum::{fold, pseudo_header_v4, sum};
use packet::{Packet, PacketBatch};
use std::sync::Arc;

const NREASONS: usize = 3;

/// Why a packet failed, an index into the class's reason texts (Click's order).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Reason {
    NotProto = 0,
    BadLength = 1,
    BadChecksum = 2,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Proto {
    Udp,
    Tcp,
    Icmp,
}

impl Proto {
    fn number(self) -> u8 {
        match self {
            Proto::Udp => 17,
            Proto::Tcp => 6,
            Proto::Icmp => 1,
        }
    }
    fn label(self) -> &'static str {
        match self {
            Proto::Udp => "UDP",
            Proto::Tcp => "TCP",
            Proto::Icmp => "ICMP",
        }
    }
    fn reason_texts(self) -> &'static [&'static str; NREASONS] {
        match self {
            Proto::Udp => &["not UDP", "bad packet length", "bad UDP checksum"],
            Proto::Tcp => &["not TCP", "bad packet length", "bad TCP checksum"],
            Proto::Icmp => &["not ICMP", "bad packet length", "bad ICMP checksum"],
        }
    }
}

/// The class of `CheckUDPHeader`, `CheckTCPHeader` or `CheckICMPHeader`.
pub struct CheckTransportClass {
    name: &'static str,
    proto: Proto,
}

pub const CHECK_UDP_HEADER: CheckTransportClass = CheckTransportClass {
    name: "CheckUDPHeader",
    proto: Proto::Udp,
};
pub const CHECK_TCP_HEADER: CheckTransportClass = CheckTransportClass {
    name: "CheckTCPHeader",
    proto: Proto::Tcp,
};
pub const CHECK_ICMP_HEADER: CheckTransportClass = CheckTransportClass {
    name: "CheckICMPHeader",
    proto: Proto::Icmp,
};

impl ElementClass for CheckTransportClass {
    fn name(&self) -> &'static str {
        self.name
    }
    fn port_count(&self) -> PortCount {
        PortCount::parse("1/1-2")
    }
    fn build(&self, args: &mut Args, cx: &BuildContext) -> Result<Arc<dyn ElementSpec>, ConfigError> {
        let e = |m: String| cx.error(m);
        let verbose = args.keyword::<bool>("VERBOSE").map_err(e)?.unwrap_or(false);
        let details = args.keyword::<bool>("DETAILS").map_err(e)?.unwrap_or(false);
        args.finish().map_err(e)?;
        Ok(Arc::new(Spec {
            shared: Arc::new(Shared {
                proto: self.proto,
                drops: CheckDrops::new(
                    format!("{}: {} header check failed", cx.name, self.proto.label()),
                    self.proto.reason_texts(),
                    details,
                    verbose,
                ),
            }),
        }))
    }
}

/// What every worker's instance shares: settings and counters.
struct Shared {
    proto: Proto,
    drops: CheckDrops,
}

struct Spec {
    shared: Arc<Shared>,
}

impl ElementSpec for Spec {
    fn instantiate(&self, _w: WorkerInfo) -> Box<dyn Element> {
        Box::new(CheckTransport {
            shared: self.shared.clone(),
        })
    }
    fn handlers(&self) -> Vec<HandlerInfo> {
        self.shared.drops.handlers()
    }
    fn read_handler(&self, name: &str) -> Option<String> {
        self.shared.drops.read_handler(name)
    }
}

struct CheckTransport {
    shared: Arc<Shared>,
}

/// The one's-complement sum of `bytes` with `acc` verifies (a stored checksum makes
/// the whole sum 0xFFFF, so its complement is 0).
#[inline(always)]
fn verifies(bytes: &[u8], acc: u32) -> bool {
    !fold(sum(bytes, acc)) == 0
}

/// ICMP types whose message quotes an IP header and 8 bytes of the datagram.
const ICMP_QUOTING: [u8; 5] = [3, 4, 5, 11, 12];
const ICMP_TSTAMP: u8 = 13;
const ICMP_TSTAMPREPLY: u8 = 14;
const ICMP_IREQ: u8 = 15;
const ICMP_IREQREPLY: u8 = 16;

/// Checks one packet's transport header for protocol `proto`.
#[inline(always)]
fn check(p: &Packet, proto: Proto) -> Result<(), Reason> {
    let Some(ip) = p.network_header() else {
        return Err(Reason::NotProto);
    };
    // The protocol first, as Click: a short header's protocol byte may still be there.
    if ip.get(9).is_some_and(|&b| b != proto.number()) {
        return Err(Reason::NotProto);
    }
    let Some(h) = ip.first_chunk::<20>() else {
        return Err(Reason::BadLength);
    };
    if h[9] != proto.number() {
        return Err(Reason::NotProto);
    }
    let hl = usize::from(h[0] & 0x0f) * 4;
    if hl < 20 || hl > ip.len() {
        return Err(Reason::BadLength);
    }
    let src = [h[12], h[13], h[14], h[15]];
    let dst = [h[16], h[17], h[18], h[19]];
    // From the transport header to the end of the packet.
    let t = &ip[hl..];
    match proto {
        Proto::Udp => {
            let Some(u) = t.first_chunk::<8>() else {
                return Err(Reason::BadLength);
            };
            let ulen = usize::from(u16::from_be_bytes([u[4], u[5]]));
            if ulen < 8 || ulen > t.len() {
                return Err(Reason::BadLength);
            }
            if u[6..8] != [0, 0] && !verifies(&t[..ulen], pseudo_header_v4(src, dst, 17, ulen as u16)) {
                return Err(Reason::BadChecksum);
            }
        }
        Proto::Tcp => {
            let ip_len = usize::from(u16::from_be_bytes([h[2], h[3]]));
            let Some(len) = ip_len.checked_sub(hl) else {
                return Err(Reason::BadLength);
            };
            // A segment shorter than 20 bytes cannot hold a data offset of 5 words or more.
            if len < 20 || len > t.len() {
                return Err(Reason::BadLength);
            }
            let off = usize::from(t[12] >> 4) * 4;
            if off < 20 || off > len {
                return Err(Reason::BadLength);
            }
            if !verifies(&t[..len], pseudo_header_v4(src, dst, 6, len as u16)) {
                return Err(Reason::BadChecksum);
            }
        }
        Proto::Icmp => {
            let len = t.len();
            if len < 8 {
                return Err(Reason::BadLength);
            }
            let ok = match t[0] {
                ty if ICMP_QUOTING.contains(&ty) => len >= 8 + 28,
                ICMP_TSTAMP | ICMP_TSTAMPREPLY => len == 20,
                ICMP_IREQ | ICMP_IREQREPLY => len == 8,
                _ => true,
            };
            if !ok {
                return Err(Reason::BadLength);
            }
            if !verifies(t, 0) {
                return Err(Reason::BadChecksum);
            }
        }
    }
    Ok(())
}

impl Element for CheckTransport {
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, out: &mut Outputs<'_>, _cx: &mut Context<'_>) {
        let proto = self.shared.proto;
        let mut failures = 0;
        // Output 1 for a bad packet: `Outputs` drops it when that port is not connected.
        out.route_each(batch, |p| match check(p, proto) {
            Ok(()) => 0,
            Err(r) => {
                self.shared.drops.failed(r as usize, &mut failures);
                1
            }
        });
        self.shared.drops.add(failures);
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::{cksum, fix_ip_cksum, ip_header};
    use super::*;
    use crate::testing::{build_error, Harness};

    const SRC: [u8; 4] = [10, 0, 0, 1];
    const DST: [u8; 4] = [10, 0, 0, 2];

    /// The pseudo-header's bytes, for the checksums the tests compute on their own.
    fn pseudo(proto: u8, len: usize) -> Vec<u8> {
        [&SRC[..], &DST[..], &[0, proto], &(len as u16).to_be_bytes()[..]].concat()
    }

    /// An IPv4 packet of protocol `proto` carrying `payload`, with a correct header.
    fn ip(proto: u8, payload: &[u8]) -> Vec<u8> {
        let mut b = ip_header(0, (20 + payload.len()) as u16, 1, 0, 64, proto, SRC, DST);
        b.extend_from_slice(payload);
        b
    }

    /// UDP 1234 -> 53 with payload "abc" and a correct checksum.
    fn udp() -> Vec<u8> {
        let mut u = vec![0x04, 0xd2, 0x00, 0x35, 0x00, 0x0b, 0x00, 0x00, b'a', b'b', b'c'];
        let c = cksum(&[pseudo(17, u.len()), u.clone()].concat());
        u[6..8].copy_from_slice(&c.to_be_bytes());
        ip(17, &u)
    }

    /// A TCP SYN 1234 -> 80 (data offset 5) with payload "hi" and a correct checksum.
    fn tcp() -> Vec<u8> {
        let mut t = vec![
            0x04, 0xd2, 0x00, 0x50, 0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x02, 0x20, 0x00, 0, 0, 0, 0, b'h', b'i',
        ];
        let c = cksum(&[pseudo(6, t.len()), t.clone()].concat());
        t[16..18].copy_from_slice(&c.to_be_bytes());
        ip(6, &t)
    }

    /// An ICMP message of type `ty` with `body` after the 8-byte header, checksummed.
    fn icmp(ty: u8, body: &[u8]) -> Vec<u8> {
        let mut m = [&[ty, 0, 0, 0, 0, 7, 0, 1][..], body].concat();
        let c = cksum(&m);
        m[2..4].copy_from_slice(&c.to_be_bytes());
        ip(1, &m)
    }

    /// A packet of `bytes` with its network header marked at 0 (IHL words long).
    fn marked(bytes: &[u8]) -> Packet {
        let mut p = Packet::from_slice(bytes);
        let hl = bytes.first().map_or(20, |b| usize::from(b & 0x0f) * 4);
        p.set_network_header(0, hl.min(bytes.len()));
        p
    }

    /// Pushes one marked packet; returns (good, bad) as the bytes that came out.
    fn one(h: &mut Harness, bytes: &[u8]) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
        let out = h.push(0, vec![marked(bytes)]);
        let v = |o: &Vec<Packet>| o.iter().map(|p| p.data().to_vec()).collect();
        (v(&out[0]), out.get(1).map(v).unwrap_or_default())
    }

    fn passes(h: &mut Harness, bytes: &[u8]) -> bool {
        let (good, bad) = one(h, bytes);
        assert_eq!(good.len() + bad.len(), 1, "one packet in, one out");
        if let Some(g) = good.first() {
            assert_eq!(g, bytes, "a good packet leaves unchanged");
        }
        if let Some(b) = bad.first() {
            assert_eq!(b, bytes, "a bad packet leaves unchanged");
        }
        !good.is_empty()
    }

    #[test]
    fn good_udp_passes_unchanged_and_zero_checksum_is_not_checked() {
        let mut h = Harness::new(&CHECK_UDP_HEADER, "", 1, 2);
        assert!(passes(&mut h, &udp()));
        // Checksum 0: "no checksum" (RFC 768), accepted whatever the data.
        let mut v = udp();
        v[26..28].copy_from_slice(&[0, 0]);
        v[30] ^= 0xff;
        assert!(passes(&mut h, &v));
        // A computed 0 is sent as 0xFFFF, which verifies.
        let mut u = vec![0, 0, 0, 0, 0, 8, 0, 0];
        let s = cksum(&[pseudo(17, 8), u.clone()].concat());
        // Choose the source port so the datagram's checksum comes out as 0.
        u[0..2].copy_from_slice(&s.to_be_bytes());
        assert_eq!(cksum(&[pseudo(17, 8), u.clone()].concat()), 0);
        u[6..8].copy_from_slice(&[0xff, 0xff]);
        assert!(passes(&mut h, &ip(17, &u)));
        // Bytes past the UDP length (Ethernet padding the IP check did not trim) are
        // not the UDP element's.
        let mut v = udp();
        v.extend_from_slice(&[0xee; 6]);
        assert!(passes(&mut h, &v));
        assert_eq!(h.read("drops"), "0");
    }

    #[test]
    fn bad_udp_packets_go_to_output_1_with_details() {
        let mut h = Harness::new(&CHECK_UDP_HEADER, "DETAILS true", 1, 2);
        let mut cases: Vec<Vec<u8>> = Vec::new();
        cases.push(tcp()); // not UDP
        let mut v = udp();
        v[25] = 7; // UDP length below 8
        cases.push(v);
        let mut v = udp();
        v[25] = 12; // UDP length beyond the packet
        cases.push(v);
        cases.push(udp()[..26].to_vec()); // UDP header cut short
        let mut v = udp();
        v[30] ^= 1; // payload changed: checksum
        cases.push(v);
        for c in &cases {
            assert!(!passes(&mut h, c), "{:x?} accepted", c);
        }
        // No network header: not UDP.
        let out = h.push(0, vec![Packet::from_slice(&udp())]);
        assert_eq!(out[1].len(), 1);
        assert_eq!(h.read("drops"), "6");
        assert_eq!(
            h.read("drop_details"),
            "2\tnot UDP\n3\tbad packet length\n1\tbad UDP checksum\n"
        );
        let names: Vec<_> = h.spec.handlers().into_iter().map(|h| h.name).collect();
        assert_eq!(names, ["drops", "drop_details"]);
    }

    #[test]
    fn without_output_1_bad_packets_are_dropped_and_counted() {
        let mut h = Harness::new(&CHECK_UDP_HEADER, "VERBOSE true", 1, 1);
        let mut bad = udp();
        bad[30] ^= 1;
        let out = h.push(0, vec![marked(&bad), marked(&udp()), marked(&bad)]);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].len(), 1);
        assert_eq!(out[0][0].data(), &udp()[..]);
        assert_eq!(h.read("drops"), "2");
        assert!(h.spec.read_handler("drop_details").is_none());
        assert_eq!(h.spec.handlers(), vec![HandlerInfo::read("drops")]);
    }

    #[test]
    fn tcp_checks() {
        let mut h = Harness::new(&CHECK_TCP_HEADER, "DETAILS true", 1, 2);
        assert!(passes(&mut h, &tcp()));
        // Options: data offset 6 words, NOP NOP NOP EOL.
        let mut t = tcp()[20..].to_vec();
        t[12] = 0x60;
        t[16..18].copy_from_slice(&[0, 0]);
        t.splice(20..20, [1, 1, 1, 0]);
        let c = cksum(&[pseudo(6, t.len()), t.clone()].concat());
        t[16..18].copy_from_slice(&c.to_be_bytes());
        assert!(passes(&mut h, &ip(6, &t)));
        // Ethernet padding past the IP length is not part of the segment.
        let mut v = tcp();
        v.extend_from_slice(&[0; 4]);
        assert!(passes(&mut h, &v));

        let mut bad: Vec<Vec<u8>> = vec![udp()]; // not TCP
        let mut v = tcp();
        v[32] = 0x40; // data offset 4 words
        bad.push(v);
        let mut v = tcp();
        v[32] = 0x60; // data offset 6 words: past the 22-byte segment
        bad.push(v);
        let mut v = tcp();
        v[3] += 1; // IP length one past the packet
        fix_ip_cksum(&mut v);
        bad.push(v);
        let mut v = tcp();
        v[3] = 19; // IP length below the header length
        fix_ip_cksum(&mut v);
        bad.push(v);
        let mut v = tcp();
        v[3] = 38; // a segment of 18 bytes: no room for a TCP header
        fix_ip_cksum(&mut v);
        v.truncate(38);
        bad.push(v);
        let mut v = tcp();
        v[41] ^= 0x20; // payload: checksum
        bad.push(v);
        for c in &bad {
            assert!(!passes(&mut h, c), "{:x?} accepted", c);
        }
        assert_eq!(
            h.read("drop_details"),
            "1\tnot TCP\n5\tbad packet length\n1\tbad TCP checksum\n"
        );
    }

    #[test]
    fn icmp_checks() {
        let mut h = Harness::new(&CHECK_ICMP_HEADER, "DETAILS true", 1, 2);
        let quote = ip(17, &[0; 8]); // an IP header and 8 bytes: 28 bytes
        let good = [
            icmp(8, b"ping"), // echo: no length rule
            icmp(0, b""),     // echo reply
            icmp(3, &quote),  // unreachable quoting 28 bytes
            icmp(11, &[quote.clone(), vec![1; 9]].concat()),
            icmp(13, &[0; 12]), // timestamp: exactly 12 more
            icmp(14, &[0; 12]),
            icmp(15, b""), // information request: nothing more
            icmp(16, b""),
            icmp(9, &[0; 100]), // router advertisement
        ];
        for g in &good {
            assert!(passes(&mut h, g), "{:x?} refused", g);
        }
        let mut bad: Vec<Vec<u8>> = vec![udp()]; // not ICMP
        bad.push(icmp(8, b"")[..27].to_vec()); // 7 bytes of ICMP
        for ty in ICMP_QUOTING {
            bad.push(icmp(ty, &quote[..27]));
        }
        bad.push(icmp(13, &[0; 11]));
        bad.push(icmp(14, &[0; 13]));
        bad.push(icmp(15, &[0; 2]));
        bad.push(icmp(16, &[0; 2]));
        let mut v = icmp(8, b"ping");
        v[30] ^= 1; // checksum
        bad.push(v);
        // Trailing bytes are part of the message for ICMP: its checksum covers them.
        let mut v = icmp(8, b"ping");
        v.push(1);
        bad.push(v);
        for c in &bad {
            assert!(!passes(&mut h, c), "{:x?} accepted", c);
        }
        assert_eq!(
            h.read("drop_details"),
            "1\tnot ICMP\n10\tbad packet length\n2\tbad ICMP checksum\n"
        );
    }

    #[test]
    fn fragments_are_checked_as_any_packet() {
        let mut h = Harness::new(&CHECK_UDP_HEADER, "DETAILS true", 1, 2);
        // A first fragment (MF): its UDP length covers bytes it does not hold.
        let whole = udp();
        let mut first = whole[..28].to_vec();
        first[3] = 28;
        first[6] = 0x20;
        fix_ip_cksum(&mut first);
        assert!(!passes(&mut h, &first));
        // A later fragment whose data happens to read as a good UDP header passes,
        // as in Click, which does not look at the fragment fields.
        let mut later = udp();
        later[6..8].copy_from_slice(&[0x00, 0x03]);
        fix_ip_cksum(&mut later);
        assert!(passes(&mut h, &later));
        assert_eq!(
            h.read("drop_details"),
            "0\tnot UDP\n1\tbad packet length\n0\tbad UDP checksum\n"
        );
    }

    #[test]
    fn ip_options_and_short_or_odd_ip_headers() {
        let mut h = Harness::new(&CHECK_UDP_HEADER, "DETAILS true", 1, 2);
        // A 24-byte IP header: the UDP header starts after the options.
        let mut v = udp();
        v[0] = 0x46;
        v[3] += 4;
        v.splice(20..20, [1, 1, 1, 0]);
        fix_ip_cksum(&mut v);
        assert!(passes(&mut h, &v));
        // Fewer than 20 bytes at the network header, and an IHL below 5 or past the
        // packet: never read past the data.
        assert!(!passes(&mut h, &udp()[..19]));
        assert!(!passes(&mut h, &udp()[..9]));
        let mut v = udp();
        v[0] = 0x44;
        assert!(!passes(&mut h, &v));
        let mut v = udp()[..30].to_vec();
        v[0] = 0x4f;
        assert!(!passes(&mut h, &v));
        assert_eq!(
            h.read("drop_details"),
            "0\tnot UDP\n4\tbad packet length\n0\tbad UDP checksum\n"
        );
        // The network header after a link header, and one pulled off already (the
        // header lies before the data): the same checks from where it is.
        let mut frame = vec![0u8; 14];
        frame.extend_from_slice(&udp());
        let mut p = Packet::from_slice(&frame);
        p.set_network_header(14, 20);
        assert_eq!(h.push(0, vec![p])[0].len(), 1);
        let mut p = Packet::from_slice(&udp());
        p.set_network_header(0, 20);
        p.pull(20);
        assert_eq!(h.push(0, vec![p])[0].len(), 1);
    }

    #[test]
    fn click_icmppingencap_testie_packets_pass() {
        // test/icmp/ICMPPingEncap-01.testie runs ICMPPingEncap's packets through
        // CheckICMPHeader and CheckIPHeader: an echo request of 1.0.0.1 -> 2.0.0.2,
        // identifier 3, sequence and IP ID 1, no payload, as written here by hand.
        let mut m = vec![8, 0, 0, 0, 0, 3, 0, 1];
        let c = cksum(&m);
        m[2..4].copy_from_slice(&c.to_be_bytes());
        let mut b = ip_header(0, 28, 1, 0, 255, 1, [1, 0, 0, 1], [2, 0, 0, 2]);
        b.extend_from_slice(&m);
        let mut h = Harness::new(&CHECK_ICMP_HEADER, "", 1, 1);
        assert!(passes(&mut h, &b));
    }

    #[test]
    fn config_errors() {
        assert_eq!(
            build_error(&CHECK_UDP_HEADER, "VERBOSE maybe", 1, 1),
            "e :: CheckUDPHeader: VERBOSE expects bool"
        );
        assert_eq!(
            build_error(&CHECK_TCP_HEADER, "DETAILS 2", 1, 1),
            "e :: CheckTCPHeader: DETAILS expects bool"
        );
        assert_eq!(
            build_error(&CHECK_ICMP_HEADER, "CHECKSUM false", 1, 1),
            "e :: CheckICMPHeader: bad keyword 'CHECKSUM'"
        );
        assert_eq!(
            build_error(&CHECK_UDP_HEADER, "true", 1, 1),
            "e :: CheckUDPHeader: too many arguments"
        );
    }
}
