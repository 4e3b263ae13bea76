//! `StoreIPAddress(OFFSET)` and `StoreIPAddress(ADDR, OFFSET)`: write an IPv4 address
//! into the packet, as Click's element of the same name.
//!
//! The address is ADDR, or without it the destination IP annotation. A numeric OFFSET
//! counts from the data start: the 4 bytes there are overwritten when they lie inside
//! the packet and there is an address to store (ADDR, or a non-zero annotation).
//! OFFSET `src` or `dst` names the source or destination field of the IPv4 header at
//! the network header annotation: the field is overwritten and the IP header checksum
//! updated incrementally (RFC 1624), and so is the TCP or UDP checksum of a first
//! fragment whose transport header is whole (a UDP checksum of 0, none, stays 0).
//! Packets that cannot take the address go to output 1, or are dropped if it is not
//! connected.

use crate::args::{Args, FromArg};
use crate::element::*;
use crate::error::ConfigError;
use packet::checksum::update32;
use packet::{Packet, PacketBatch};
use std::net::Ipv4Addr;
use std::sync::Arc;

const PROTO_TCP: u8 = 6;
const PROTO_UDP: u8 = 17;

pub struct StoreIPAddressClass;

/// Where the address goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Target {
    /// This many bytes from the data start.
    Data(usize),
    /// The IPv4 header field at this offset (12, source; 16, destination).
    Field(usize),
}

impl ElementClass for StoreIPAddressClass {
    fn name(&self) -> &'static str {
        "StoreIPAddress"
    }
    fn port_count(&self) -> PortCount {
        PortCount::parse("1/1-2")
    }
    fn build(&self, args: &mut Args, cx: &BuildContext) -> Result<Arc<dyn ElementSpec>, ConfigError> {
        let e = |m: String| cx.error(m);
        // As Click: two arguments (positional or not) are ADDR and OFFSET, one is OFFSET.
        let addr = if args.len() > 1 {
            Some(args.required::<Ipv4Addr>("ADDR").map_err(e)?.octets())
        } else {
            None
        };
        let offset = args.required::<String>("OFFSET").map_err(e)?;
        args.finish().map_err(e)?;
        let target = match offset.to_ascii_lowercase().as_str() {
            "src" => Target::Field(12),
            "dst" => Target::Field(16),
            word => match i32::from_arg(word) {
                Some(n) if n >= 0 => Target::Data(n as usize),
                _ => return Err(cx.error("type mismatch: OFFSET requires integer")),
            },
        };
        Ok(Arc::new(StoreIPAddress { addr, target }))
    }
}

#[derive(Clone, Copy)]
struct StoreIPAddress {
    addr: Option<[u8; 4]>,
    target: Target,
}

impl ElementSpec for StoreIPAddress {
    fn instantiate(&self, _w: WorkerInfo) -> Box<dyn Element> {
        Box::new(*self)
    }
}

/// Stores `addr` at byte `field` of the IPv4 header at `p`'s network header and
/// updates the checksums; false if there is no whole 20-byte header there.
fn store_in_header(p: &mut Packet, field: usize, addr: [u8; 4]) -> bool {
    let (Some(net), Some(trans)) = (p.network_header_offset(), p.transport_header_offset()) else {
        return false;
    };
    let Ok(hl) = usize::try_from(trans - net) else {
        return false;
    };
    let Some(h) = p.network_header_mut() else {
        return false;
    };
    if hl < 20 || h.len() < 20 {
        return false;
    }
    let old = u32::from_be_bytes([h[field], h[field + 1], h[field + 2], h[field + 3]]);
    let new = u32::from_be_bytes(addr);
    h[field..field + 4].copy_from_slice(&addr);
    let update = |h: &mut [u8], at: usize| {
        let c = update32(u16::from_be_bytes([h[at], h[at + 1]]), old, new);
        h[at..at + 2].copy_from_slice(&c.to_be_bytes());
        c
    };
    update(h, 10);
    let first_fragment = u16::from_be_bytes([h[6], h[7]]) & 0x1fff == 0;
    let transport_len = h.len().saturating_sub(hl);
    match h[9] {
        PROTO_TCP if first_fragment && transport_len >= 20 => {
            update(h, hl + 16);
        }
        PROTO_UDP if first_fragment && transport_len >= 8 && h[hl + 6..hl + 8] != [0, 0] => {
            // 0 means no checksum: a computed 0 is sent as 0xFFFF (RFC 768).
            let c = match update(h, hl + 6) {
                0 => 0xffff,
                c => c,
            };
            h[hl + 6..hl + 8].copy_from_slice(&u16::to_be_bytes(c));
        }
        _ => {}
    }
    true
}

impl StoreIPAddress {
    /// Stores the address in `p`: output 0, or 1 if it cannot be stored.
    #[inline(always)]
    fn store(&self, p: &mut Packet) -> u8 {
        let addr = self.addr.unwrap_or_else(|| p.anno().dst_ip());
        let stored = match self.target {
            Target::Data(off) => {
                let have = self.addr.is_some() || addr != [0; 4];
                match p.data_mut().get_mut(off..).and_then(|d| d.first_chunk_mut::<4>()) {
                    Some(dst) if have => {
                        *dst = addr;
                        true
                    }
                    _ => false,
                }
            }
            Target::Field(field) => store_in_header(p, field, addr),
        };
        u8::from(!stored)
    }
}

impl Element for StoreIPAddress {
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, out: &mut Outputs<'_>, _cx: &mut Context<'_>) {
        let me = *self;
        out.route_each(batch, |p| me.store(p));
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::{cksum, ip_header};
    use super::*;
    use crate::testing::{build_error, Harness};

    /// An IPv4 packet (20-byte header, correct checksum) carrying `transport`, whose
    /// checksum at `sum_at` (if any) is computed over the pseudo-header.
    fn datagram(proto: u8, src: [u8; 4], dst: [u8; 4], transport: &[u8], sum_at: Option<usize>) -> Vec<u8> {
        let mut seg = transport.to_vec();
        if let Some(at) = sum_at {
            let mut pseudo = Vec::new();
            pseudo.extend_from_slice(&src);
            pseudo.extend_from_slice(&dst);
            pseudo.extend_from_slice(&[0, proto]);
            pseudo.extend_from_slice(&(seg.len() as u16).to_be_bytes());
            pseudo.extend_from_slice(&seg);
            let c = cksum(&pseudo);
            seg[at..at + 2].copy_from_slice(&c.to_be_bytes());
        }
        let mut d = ip_header(0, 20 + seg.len() as u16, 7, 0, 64, proto, src, dst);
        d.extend_from_slice(&seg);
        d
    }

    fn tcp(src: [u8; 4], dst: [u8; 4]) -> Vec<u8> {
        let mut seg = vec![
            0x04, 0xd2, 0x00, 0x50, 0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x02, 0x20, 0x00,
        ];
        seg.extend_from_slice(&[0, 0, 0, 0]); // checksum, urgent pointer
        seg.extend_from_slice(b"hello");
        datagram(PROTO_TCP, src, dst, &seg, Some(16))
    }

    fn udp(src: [u8; 4], dst: [u8; 4], checksummed: bool) -> Vec<u8> {
        let seg = [0x00, 0x35, 0x30, 0x39, 0x00, 0x0b, 0, 0, b'a', b'b', b'c'];
        datagram(PROTO_UDP, src, dst, &seg, checksummed.then_some(6))
    }

    /// `bytes` with the network header marked at the start (20 bytes).
    fn marked(bytes: &[u8]) -> Packet {
        let mut p = Packet::from_slice(bytes);
        p.set_network_header(0, 20);
        p
    }

    const A: [u8; 4] = [10, 0, 0, 1];
    const B: [u8; 4] = [192, 168, 1, 2];
    const N: [u8; 4] = [172, 16, 254, 3];

    #[test]
    fn stores_at_an_offset_from_the_annotation_or_addr() {
        let mut h = Harness::new(&StoreIPAddressClass, "2", 1, 2);
        let mut p = Packet::from_slice(&[0; 8]);
        p.anno_mut().set_dst_ip([1, 2, 3, 4]);
        let out = h.push(0, vec![p]);
        assert_eq!(out[0][0].data(), &[0, 0, 1, 2, 3, 4, 0, 0]);
        // No annotation (0.0.0.0): output 1, unchanged.
        let out = h.push_bytes(0, &[9; 8]);
        assert!(out[0].is_empty());
        assert_eq!(out[1][0].data(), &[9; 8]);

        // With ADDR, 0.0.0.0 is stored too; the 4 bytes must fit in the packet.
        let mut h = Harness::new(&StoreIPAddressClass, "0.0.0.0, OFFSET 4", 1, 2);
        let out = h.push(0, vec![Packet::from_slice(&[9; 8]), Packet::from_slice(&[9; 7])]);
        assert_eq!(out[0][0].data(), &[9, 9, 9, 9, 0, 0, 0, 0]);
        assert_eq!(out[1][0].data(), &[9; 7]);
        // Output 1 not connected: dropped.
        let mut h = Harness::new(&StoreIPAddressClass, "1.2.3.4, 100", 1, 1);
        assert!(h.push_bytes(0, &[0; 50])[0].is_empty());
    }

    #[test]
    fn src_and_dst_update_the_ip_and_tcp_checksums() {
        let mut h = Harness::new(&StoreIPAddressClass, &format!("{}, src", Ipv4Addr::from(N)), 1, 2);
        let out = h.push(0, vec![marked(&tcp(A, B))]);
        assert_eq!(out[0][0].data(), &tcp(N, B)[..]);

        // The destination, from the annotation, with OFFSET in capitals.
        let mut h = Harness::new(&StoreIPAddressClass, "DST", 1, 2);
        let mut p = marked(&tcp(A, B));
        p.anno_mut().set_dst_ip(N);
        let out = h.push(0, vec![p]);
        assert_eq!(out[0][0].data(), &tcp(A, N)[..]);
    }

    #[test]
    fn udp_checksums_are_updated_unless_absent() {
        let mut h = Harness::new(&StoreIPAddressClass, "172.16.254.3, dst", 1, 2);
        let out = h.push(0, vec![marked(&udp(A, B, true)), marked(&udp(A, B, false))]);
        assert_eq!(out[0][0].data(), &udp(A, N, true)[..]);
        let no_sum = udp(A, N, false);
        assert_eq!(&no_sum[26..28], &[0, 0]);
        assert_eq!(out[0][1].data(), &no_sum[..]);
    }

    #[test]
    fn later_fragments_and_short_transport_headers_keep_their_bytes() {
        let mut h = Harness::new(&StoreIPAddressClass, "172.16.254.3, src", 1, 2);
        // A later fragment (offset 8 words): only the IP header changes.
        let mut frag = tcp(A, B);
        frag[6..8].copy_from_slice(&[0, 8]);
        super::super::testutil::fix_ip_cksum(&mut frag);
        let mut want = frag.clone();
        want[12..16].copy_from_slice(&N);
        super::super::testutil::fix_ip_cksum(&mut want);
        // A TCP packet cut to 10 bytes of transport header.
        let cut = tcp(A, B)[..30].to_vec();
        let mut want_cut = cut.clone();
        want_cut[12..16].copy_from_slice(&N);
        super::super::testutil::fix_ip_cksum(&mut want_cut);
        let out = h.push(0, vec![marked(&frag), marked(&cut)]);
        assert_eq!(out[0][0].data(), &want[..]);
        assert_eq!(out[0][1].data(), &want_cut[..]);
    }

    #[test]
    fn packets_without_a_whole_ip_header_go_to_output_1() {
        let mut h = Harness::new(&StoreIPAddressClass, "1.2.3.4, src", 1, 2);
        let unmarked = Packet::from_slice(&tcp(A, B));
        let mut short_anno = Packet::from_slice(&tcp(A, B));
        short_anno.set_network_header(0, 16);
        let mut short_data = Packet::from_slice(&tcp(A, B)[..19]);
        short_data.set_network_header(0, 20);
        let out = h.push(0, vec![unmarked, short_anno, short_data]);
        assert!(out[0].is_empty());
        assert_eq!(out[1].len(), 3);
        assert_eq!(out[1][0].data(), &tcp(A, B)[..]);
        assert_eq!(out[1][2].data(), &tcp(A, B)[..19]);
    }

    proptest::proptest! {
        /// Whatever the addresses and payload, the incremental update gives the packet
        /// built from scratch with the new address (a UDP checksum of 0 as 0xFFFF).
        #[test]
        fn incremental_checksums_match_a_full_computation(
            src in proptest::prelude::any::<[u8; 4]>(),
            dst in proptest::prelude::any::<[u8; 4]>(),
            new in proptest::prelude::any::<[u8; 4]>(),
            payload in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..40),
            is_dst in proptest::prelude::any::<bool>(),
            is_udp in proptest::prelude::any::<bool>(),
        ) {
            let build = |s: [u8; 4], d: [u8; 4]| {
                let mut seg = if is_udp {
                    let mut u = vec![0x12, 0x34, 0x56, 0x78];
                    u.extend_from_slice(&(8 + payload.len() as u16).to_be_bytes());
                    u.extend_from_slice(&[0, 0]);
                    u
                } else {
                    vec![0x04, 0xd2, 0, 80, 0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x10, 0x20, 0, 0, 0, 0, 0]
                };
                seg.extend_from_slice(&payload);
                let (proto, at) = if is_udp { (PROTO_UDP, 6) } else { (PROTO_TCP, 16) };
                let mut d = datagram(proto, s, d, &seg, Some(at));
                if is_udp && d[26..28] == [0, 0] {
                    d[26..28].copy_from_slice(&[0xff, 0xff]);
                }
                d
            };
            let (field, want) = if is_dst { ("dst", build(src, new)) } else { ("src", build(new, dst)) };
            let cfg = format!("{}, {}", Ipv4Addr::from(new), field);
            let mut h = Harness::new(&StoreIPAddressClass, &cfg, 1, 2);
            let out = h.push(0, vec![marked(&build(src, dst))]);
            let got = out[0][0].data();
            // Checksums that differ only as 0x0000 against 0xFFFF are the same
            // one's-complement value; compare everything else exactly.
            proptest::prop_assert_eq!(got.len(), want.len());
            proptest::prop_assert_eq!(cksum(&got[..20]), 0);
            proptest::prop_assert_eq!(&got[12..], &want[12..]);
            proptest::prop_assert_eq!(&got[..10], &want[..10]);
        }
    }

    #[test]
    fn config_errors() {
        assert_eq!(
            build_error(&StoreIPAddressClass, "", 1, 1),
            "e :: StoreIPAddress: missing mandatory OFFSET argument"
        );
        for bad in ["-4", "source", "1.2.3.4, 2.5"] {
            assert_eq!(
                build_error(&StoreIPAddressClass, bad, 1, 1),
                "e :: StoreIPAddress: type mismatch: OFFSET requires integer",
                "{}",
                bad
            );
        }
        assert_eq!(
            build_error(&StoreIPAddressClass, "1.2.3, 4", 1, 1),
            "e :: StoreIPAddress: ADDR expects IP address"
        );
        assert_eq!(
            build_error(&StoreIPAddressClass, "1.2.3.4, 4, 5", 1, 1),
            "e :: StoreIPAddress: too many arguments"
        );
    }
}
