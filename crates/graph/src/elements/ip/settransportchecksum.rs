//! `SetUDPChecksum` and `SetTCPChecksum([FIXOFF])`: recompute the UDP or TCP checksum
//! of IPv4 packets over the pseudo-header, as Click's elements of the same names.
//!
//! The IPv4 header is the one at the network header annotation; the transport header
//! follows it (IHL words on), and the segment ends where the IP total length says. The
//! protocol field is not checked: the input is meant to be UDP (or TCP) already.
//!
//! SetUDPChecksum checksums the UDP length's bytes; a computed 0 is sent as 0xFFFF (RFC
//! 768). Fragments, packets whose UDP length is below 8 or longer than the segment, and
//! packets without a usable IPv4 header go to output 1 unchanged (dropped when output 1
//! is not connected), counted in `drops`.
//!
//! SetTCPChecksum checksums the whole segment. With FIXOFF true it first repairs the
//! data offset: below 5 words it becomes 5, past the segment it becomes the segment's
//! length in words. Fragments, segments shorter than a TCP header and packets without a
//! usable IPv4 header are dropped and counted in `drops`.

use crate::args::Args;
use crate::element::*;
use crate::error::ConfigError;
use packet::checksum::{fold, pseudo_header_v4, sum};
use packet::{Packet, PacketBatch};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

const PROTO_TCP: u8 = 6;
const PROTO_UDP: u8 = 17;

/// The class of `SetUDPChecksum` (UDP) or `SetTCPChecksum` (TCP).
pub struct SetTransportChecksumClass {
    proto: u8,
}

pub const SET_UDP_CHECKSUM: SetTransportChecksumClass = SetTransportChecksumClass { proto: PROTO_UDP };
pub const SET_TCP_CHECKSUM: SetTransportChecksumClass = SetTransportChecksumClass { proto: PROTO_TCP };

impl ElementClass for SetTransportChecksumClass {
    fn name(&self) -> &'static str {
        if self.proto == PROTO_UDP {
            "SetUDPChecksum"
        } else {
            "SetTCPChecksum"
        }
    }
    fn port_count(&self) -> PortCount {
        if self.proto == PROTO_UDP {
            PortCount::parse("1/1-2")
        } else {
            PortCount::parse("1/1")
        }
    }
    fn build(&self, args: &mut Args, cx: &BuildContext) -> Result<Arc<dyn ElementSpec>, ConfigError> {
        let fixoff = if self.proto == PROTO_TCP {
            args.positional::<bool>("FIXOFF")
                .map_err(|e| cx.error(e))?
                .unwrap_or(false)
        } else {
            false
        };
        args.finish().map_err(|e| cx.error(e))?;
        Ok(Arc::new(Spec {
            proto: self.proto,
            fixoff,
            drops: Arc::new(AtomicU64::new(0)),
        }))
    }
}

struct Spec {
    proto: u8,
    fixoff: bool,
    drops: Arc<AtomicU64>,
}

impl ElementSpec for Spec {
    fn instantiate(&self, _w: WorkerInfo) -> Box<dyn Element> {
        Box::new(SetTransportChecksum {
            proto: self.proto,
            fixoff: self.fixoff,
            drops: self.drops.clone(),
        })
    }
    fn handlers(&self) -> Vec<HandlerInfo> {
        vec![HandlerInfo::read("drops")]
    }
    fn read_handler(&self, name: &str) -> Option<String> {
        (name == "drops").then(|| self.drops.load(Ordering::Relaxed).to_string())
    }
}

struct SetTransportChecksum {
    proto: u8,
    fixoff: bool,
    drops: Arc<AtomicU64>,
}

/// The IPv4 header length and the total length of the packet whose network header is
/// `ip`, if the header is whole and the datagram lies within the data and is not a
/// fragment.
fn unfragmented_datagram(ip: &[u8]) -> Option<(usize, usize)> {
    if ip.len() < 20 {
        return None;
    }
    let hl = usize::from(ip[0] & 0x0f) * 4;
    let total = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
    let fragment = u16::from_be_bytes([ip[6], ip[7]]) & 0x3fff != 0;
    (hl >= 20 && hl <= total && total <= ip.len() && !fragment).then_some((hl, total))
}

fn addresses(ip: &[u8]) -> ([u8; 4], [u8; 4]) {
    let a = |i: usize| [ip[i], ip[i + 1], ip[i + 2], ip[i + 3]];
    (a(12), a(16))
}

/// Sets the UDP checksum; false if the packet is not a whole unfragmented UDP datagram.
fn set_udp(p: &mut Packet) -> bool {
    let Some(ip) = p.network_header_mut() else {
        return false;
    };
    let Some((hl, total)) = unfragmented_datagram(ip) else {
        return false;
    };
    let (src, dst) = addresses(ip);
    let seg = &mut ip[hl..total];
    if seg.len() < 8 {
        return false;
    }
    let ulen = usize::from(u16::from_be_bytes([seg[4], seg[5]]));
    if ulen < 8 || ulen > seg.len() {
        return false;
    }
    let udp = &mut seg[..ulen];
    udp[6] = 0;
    udp[7] = 0;
    let c = match !fold(sum(udp, pseudo_header_v4(src, dst, PROTO_UDP, ulen as u16))) {
        0 => 0xffff,
        c => c,
    };
    udp[6..8].copy_from_slice(&c.to_be_bytes());
    true
}

/// Sets the TCP checksum (repairing the data offset first with `fixoff`); false if the
/// packet is not a whole unfragmented TCP segment.
fn set_tcp(p: &mut Packet, fixoff: bool) -> bool {
    let Some(ip) = p.network_header_mut() else {
        return false;
    };
    let Some((hl, total)) = unfragmented_datagram(ip) else {
        return false;
    };
    let (src, dst) = addresses(ip);
    let tcp = &mut ip[hl..total];
    if tcp.len() < 20 {
        return false;
    }
    if fixoff {
        let off = usize::from(tcp[12] >> 4) * 4;
        let words = if off < 20 {
            5
        } else if off > tcp.len() {
            (tcp.len() / 4) as u8
        } else {
            tcp[12] >> 4
        };
        tcp[12] = words << 4 | (tcp[12] & 0x0f);
    }
    tcp[16] = 0;
    tcp[17] = 0;
    let c = !fold(sum(tcp, pseudo_header_v4(src, dst, PROTO_TCP, tcp.len() as u16)));
    tcp[16..18].copy_from_slice(&c.to_be_bytes());
    true
}

impl Element for SetTransportChecksum {
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, out: &mut Outputs<'_>, _cx: &mut Context<'_>) {
        let mut drops = 0;
        if self.proto == PROTO_UDP {
            out.route_each(batch, |p| {
                if set_udp(p) {
                    0
                } else {
                    drops += 1;
                    1
                }
            });
        } else {
            let fixoff = self.fixoff;
            out.route_each(batch, |p| {
                if set_tcp(p, fixoff) {
                    0
                } else {
                    drops += 1;
                    DROP
                }
            });
        }
        if drops > 0 {
            self.drops.fetch_add(drops, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::{cksum, ip_header};
    use super::*;
    use crate::testing::{build_error, Harness};

    fn ip_packet(bytes: &[u8]) -> Packet {
        let mut p = Packet::from_slice(bytes);
        p.set_network_header(0, 20);
        p
    }

    /// The transport checksum the test computes itself over its own pseudo-header.
    fn transport_cksum(src: [u8; 4], dst: [u8; 4], proto: u8, seg: &[u8]) -> u16 {
        let mut v = src.to_vec();
        v.extend_from_slice(&dst);
        v.extend_from_slice(&[0, proto]);
        v.extend_from_slice(&(seg.len() as u16).to_be_bytes());
        v.extend_from_slice(seg);
        cksum(&v)
    }

    fn udp_datagram(payload: &[u8], cksum_field: [u8; 2]) -> Vec<u8> {
        let ulen = 8 + payload.len() as u16;
        let mut b = ip_header(0, 20 + ulen, 7, 0, 64, 17, [10, 0, 0, 1], [10, 0, 0, 2]);
        b.extend_from_slice(&[0x30, 0x39, 0x00, 0x35]);
        b.extend_from_slice(&ulen.to_be_bytes());
        b.extend_from_slice(&cksum_field);
        b.extend_from_slice(payload);
        b
    }

    #[test]
    fn udp_checksum_is_written() {
        let b = udp_datagram(b"abcde", [0xde, 0xad]);
        let mut udp = b[20..].to_vec();
        udp[6] = 0;
        udp[7] = 0;
        let c = transport_cksum([10, 0, 0, 1], [10, 0, 0, 2], 17, &udp);
        let mut want = b.clone();
        want[26..28].copy_from_slice(&c.to_be_bytes());
        let mut h = Harness::new(&SET_UDP_CHECKSUM, "", 1, 2);
        let out = h.push(0, vec![ip_packet(&b)]);
        assert_eq!(out[0][0].data(), &want[..]);
        assert!(out[1].is_empty());
        assert_eq!(h.read("drops"), "0");
    }

    #[test]
    fn udp_zero_becomes_ffff_and_trailing_bytes_are_left_out() {
        // Pseudo-header 0.0.0.1 > 0.0.0.0, length 10: 0x0001 + 0x0011 + 0x000a; UDP
        // ports 0, length 0x000a; payload word 0xffd9 brings the sum to 0xffff.
        let mut b = ip_header(0, 30, 0, 0, 64, 17, [0, 0, 0, 1], [0, 0, 0, 0]);
        b.extend_from_slice(&[0, 0, 0, 0, 0, 0x0a, 0x12, 0x34, 0xff, 0xd9]);
        // Link-layer padding after the IP datagram is not checksummed.
        b.extend_from_slice(&[0x55; 6]);
        let mut want = b.clone();
        want[26] = 0xff;
        want[27] = 0xff;
        let mut h = Harness::new(&SET_UDP_CHECKSUM, "", 1, 2);
        assert_eq!(h.push(0, vec![ip_packet(&b)])[0][0].data(), &want[..]);
    }

    #[test]
    fn bad_udp_goes_to_output_1_unchanged() {
        let good = udp_datagram(b"xy", [0, 0]);
        let mut fragment = good.clone();
        fragment[6] = 0x20; // More Fragments
        let mut long = good.clone();
        long[25] = 11; // UDP length 11 > 10 bytes of segment
        let mut short = good.clone();
        short[25] = 7;
        let mut truncated = good.clone();
        truncated[3] = 40; // IP length past the data
        let bad = [fragment, long, short, truncated, good[..24].to_vec()];
        let mut h = Harness::new(&SET_UDP_CHECKSUM, "", 1, 2);
        let mut input: Vec<Packet> = bad.iter().map(|b| ip_packet(b)).collect();
        input.push(Packet::from_slice(&good)); // no network header
        let out = h.push(0, input);
        assert!(out[0].is_empty());
        let got: Vec<&[u8]> = out[1].iter().map(|p| p.data()).collect();
        let mut want: Vec<&[u8]> = bad.iter().map(|b| &b[..]).collect();
        want.push(&good);
        assert_eq!(got, want);
        assert_eq!(h.read("drops"), "6");
        // Without output 1 they are dropped.
        let mut h = Harness::new(&SET_UDP_CHECKSUM, "", 1, 1);
        assert!(h.push(0, vec![ip_packet(&bad[0])])[0].is_empty());
        assert_eq!(h.read("drops"), "1");
    }

    fn tcp_segment(offset_byte: u8, payload: &[u8]) -> Vec<u8> {
        let mut b = ip_header(
            0,
            40 + payload.len() as u16,
            9,
            0x4000,
            64,
            6,
            [192, 168, 0, 1],
            [192, 168, 0, 2],
        );
        b.extend_from_slice(&[
            0x04,
            0xd2,
            0x00,
            0x50,
            0,
            0,
            0,
            1,
            0,
            0,
            0,
            0,
            offset_byte,
            0x02,
            0xff,
            0xff,
            0xbe,
            0xef,
            0,
            0,
        ]);
        b.extend_from_slice(payload);
        b
    }

    fn with_tcp_cksum(mut b: Vec<u8>) -> Vec<u8> {
        b[36] = 0;
        b[37] = 0;
        let c = transport_cksum([192, 168, 0, 1], [192, 168, 0, 2], 6, &b[20..]);
        b[36..38].copy_from_slice(&c.to_be_bytes());
        b
    }

    #[test]
    fn tcp_checksum_covers_the_whole_segment() {
        let b = tcp_segment(0x50, b"GET /");
        let mut h = Harness::new(&SET_TCP_CHECKSUM, "", 1, 1);
        let out = h.push(0, vec![ip_packet(&b)]);
        assert_eq!(out[0][0].data(), &with_tcp_cksum(b)[..]);
        // A bad data offset is left alone without FIXOFF.
        let b = tcp_segment(0x20, b"");
        let out = h.push(0, vec![ip_packet(&b)]);
        assert_eq!(out[0][0].data(), &with_tcp_cksum(b)[..]);
    }

    #[test]
    fn fixoff_repairs_the_data_offset() {
        let mut h = Harness::new(&SET_TCP_CHECKSUM, "true", 1, 1);
        for (off, payload, fixed) in [
            (0x20u8, &b""[..], 0x50u8),
            (0xf0, &b"abcdefgh"[..], 0x70), // 28 bytes of segment: 7 words
            (0x60, &b"abcd"[..], 0x60),
            (0x01, &b""[..], 0x51), // the reserved bits stay
        ] {
            let b = tcp_segment(off, payload);
            let mut want = b.clone();
            want[32] = fixed;
            let out = h.push(0, vec![ip_packet(&b)]);
            assert_eq!(out[0][0].data(), &with_tcp_cksum(want)[..], "offset {:#x}", off);
        }
    }

    #[test]
    fn bad_tcp_is_dropped_and_counted() {
        let good = tcp_segment(0x50, b"");
        let mut fragment = good.clone();
        fragment[7] = 1; // offset 8
        let mut short = ip_header(0, 39, 9, 0, 64, 6, [1, 1, 1, 1], [2, 2, 2, 2]);
        short.extend_from_slice(&[0; 19]);
        let mut h = Harness::new(&SET_TCP_CHECKSUM, "FIXOFF true", 1, 1);
        let out = h.push(
            0,
            vec![
                ip_packet(&fragment),
                ip_packet(&short),
                Packet::from_slice(&good),
                ip_packet(&good),
            ],
        );
        assert_eq!(out[0].len(), 1);
        assert_eq!(h.read("drops"), "3");
        assert_eq!(
            build_error(&SET_TCP_CHECKSUM, "maybe", 1, 1),
            "e :: SetTCPChecksum: FIXOFF expects bool"
        );
        assert_eq!(
            build_error(&SET_UDP_CHECKSUM, "true", 1, 1),
            "e :: SetUDPChecksum: too many arguments"
        );
    }
}
