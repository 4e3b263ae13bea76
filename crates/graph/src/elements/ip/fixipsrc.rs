//! `FixIPSrc(IPADDR)`: a packet whose FIX_IP_SRC annotation is set (ICMPError sets it
//! on the errors it makes) gets IPADDR, the outgoing interface's address, as its IP
//! source, a recomputed header checksum and the annotation cleared, as Click's
//! FixIPSrc. Other packets pass untouched. A packet with the annotation set but no
//! IPv4 header at its network header annotation (fewer than 20 bytes there, a header
//! length below 20 or past the data) is dropped and counted (`drops`): Click asserts
//! there is one.

use crate::args::Args;
use crate::element::*;
use crate::error::ConfigError;
use packet::anno::FIX_IP_SRC_ANNO_OFFSET;
use packet::{Packet, PacketBatch};
use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

pub struct FixIPSrcClass;

impl ElementClass for FixIPSrcClass {
    fn name(&self) -> &'static str {
        "FixIPSrc"
    }
    fn port_count(&self) -> PortCount {
        PortCount::parse("1/1")
    }
    fn build(&self, args: &mut Args, cx: &BuildContext) -> Result<Arc<dyn ElementSpec>, ConfigError> {
        let addr = args.required::<Ipv4Addr>("IPADDR").map_err(|e| cx.error(e))?;
        args.finish().map_err(|e| cx.error(e))?;
        Ok(Arc::new(FixIPSrcSpec {
            addr: addr.octets(),
            drops: Arc::new(AtomicU64::new(0)),
        }))
    }
}

struct FixIPSrcSpec {
    addr: [u8; 4],
    drops: Arc<AtomicU64>,
}

impl ElementSpec for FixIPSrcSpec {
    fn instantiate(&self, _w: WorkerInfo) -> Box<dyn Element> {
        Box::new(FixIPSrc {
            addr: self.addr,
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

struct FixIPSrc {
    addr: [u8; 4],
    drops: Arc<AtomicU64>,
}

/// Writes `addr` as the source of the IPv4 header at `p`'s network header and
/// recomputes its checksum; false (packet untouched) if there is no such header.
fn set_source(p: &mut Packet, addr: [u8; 4]) -> bool {
    let Some(h) = super::ipv4_header_mut(p) else {
        return false;
    };
    h[12..16].copy_from_slice(&addr);
    super::set_header_checksum(h);
    true
}

impl Element for FixIPSrc {
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, out: &mut Outputs<'_>, _cx: &mut Context<'_>) {
        let addr = self.addr;
        let mut drops = 0;
        out.route_each(batch, |p| {
            if p.anno().u8_at(FIX_IP_SRC_ANNO_OFFSET) == 0 {
                return 0;
            }
            if set_source(p, addr) {
                p.anno_mut().set_u8_at(FIX_IP_SRC_ANNO_OFFSET, 0);
                0
            } else {
                drops += 1;
                DROP
            }
        });
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

    fn ip_packet(bytes: &[u8], fix: u8) -> Packet {
        let mut p = Packet::from_slice(bytes);
        p.set_network_header(0, 20);
        p.anno_mut().set_u8_at(FIX_IP_SRC_ANNO_OFFSET, fix);
        p
    }

    /// An ICMP error as ICMPError builds them: source 10.0.0.1, TTL 200.
    fn icmp_error() -> Vec<u8> {
        let mut b = ip_header(0, 28, 1, 0, 200, 1, [10, 0, 0, 1], [192, 168, 5, 6]);
        b.extend_from_slice(&[11, 0, 0xf4, 0xff, 0, 0, 0, 0]);
        b
    }

    #[test]
    fn annotated_packet_gets_new_source_and_checksum() {
        let mut h = Harness::new(&FixIPSrcClass, "18.26.4.1", 1, 1);
        let out = h.push(0, vec![ip_packet(&icmp_error(), 1)]);
        #[rustfmt::skip]
        let mut want = vec![
            0x45, 0x00, 0x00, 0x1c, // version, IHL, TOS, length 28
            0x00, 0x01, 0x00, 0x00, // ID 1, no fragment bits
            0xc8, 0x01, 0x00, 0x00, // TTL 200, ICMP, checksum (below)
            18, 26, 4, 1,           // the new source
            192, 168, 5, 6,         // destination
        ];
        let c = cksum(&want);
        want[10..12].copy_from_slice(&c.to_be_bytes());
        want.extend_from_slice(&[11, 0, 0xf4, 0xff, 0, 0, 0, 0]);
        let p = &out[0][0];
        assert_eq!(p.data(), &want[..]);
        assert_eq!(cksum(&p.data()[..20]), 0);
        assert_eq!(p.anno().u8_at(FIX_IP_SRC_ANNO_OFFSET), 0);
        assert_eq!(h.read("drops"), "0");
    }

    #[test]
    fn any_nonzero_annotation_counts_and_options_are_summed() {
        // A 24-byte header (one NOP option word): the checksum covers all of it.
        let mut b = vec![
            0x46, 0, 0, 24, 0, 7, 0, 0, 64, 17, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 1, 1, 1, 0,
        ];
        let mut want = b.clone();
        want[12..16].copy_from_slice(&[9, 8, 7, 6]);
        let c = cksum(&want);
        want[10..12].copy_from_slice(&c.to_be_bytes());
        // A stale checksum on input is replaced, not updated.
        b[10] = 0x12;
        let mut p = Packet::from_slice(&b);
        p.set_network_header(0, 24);
        p.anno_mut().set_u8_at(FIX_IP_SRC_ANNO_OFFSET, 0x80);
        let mut h = Harness::new(&FixIPSrcClass, "IPADDR 9.8.7.6", 1, 1);
        let out = h.push(0, vec![p]);
        assert_eq!(out[0][0].data(), &want[..]);
        assert_eq!(out[0][0].anno().u8_at(FIX_IP_SRC_ANNO_OFFSET), 0);
    }

    #[test]
    fn packets_without_the_annotation_pass_unchanged() {
        let b = icmp_error();
        let mut h = Harness::new(&FixIPSrcClass, "18.26.4.1", 1, 1);
        let mut wrong_checksum = b.clone();
        wrong_checksum[10] ^= 0xff;
        let out = h.push(
            0,
            vec![
                ip_packet(&b, 0),
                ip_packet(&wrong_checksum, 0),
                // Not IP at all, no network header: never looked at.
                Packet::from_slice(&[1, 2, 3]),
            ],
        );
        assert_eq!(out[0].len(), 3);
        assert_eq!(out[0][0].data(), &b[..]);
        assert_eq!(out[0][1].data(), &wrong_checksum[..]);
        assert_eq!(out[0][2].data(), &[1, 2, 3]);
    }

    #[test]
    fn annotated_packets_without_a_header_are_dropped_and_counted() {
        let mut h = Harness::new(&FixIPSrcClass, "18.26.4.1", 1, 1);
        let mut no_header = Packet::from_slice(&icmp_error());
        no_header.anno_mut().set_u8_at(FIX_IP_SRC_ANNO_OFFSET, 1);
        let short = ip_packet(&icmp_error()[..19], 1);
        let mut small_ihl = icmp_error();
        small_ihl[0] = 0x44;
        let mut long_ihl = icmp_error();
        long_ihl[0] = 0x48; // 32 bytes of header, 28 of data
        let good = icmp_error();
        let out = h.push(
            0,
            vec![
                no_header,
                short,
                ip_packet(&small_ihl, 1),
                ip_packet(&long_ihl, 1),
                ip_packet(&good, 0),
            ],
        );
        assert_eq!(out[0].len(), 1);
        assert_eq!(out[0][0].data(), &good[..]);
        assert_eq!(h.read("drops"), "4");
    }

    #[test]
    fn configuration_errors() {
        assert_eq!(
            build_error(&FixIPSrcClass, "", 1, 1),
            "e :: FixIPSrc: missing mandatory IPADDR argument"
        );
        assert_eq!(
            build_error(&FixIPSrcClass, "18.26.4", 1, 1),
            "e :: FixIPSrc: IPADDR expects IP address"
        );
        assert_eq!(
            build_error(&FixIPSrcClass, "1.2.3.4, 5.6.7.8", 1, 1),
            "e :: FixIPSrc: too many arguments"
        );
    }
}
