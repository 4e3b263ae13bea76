//! `SetIPChecksum`: recomputes the IPv4 header checksum of each packet, as Click's
//! `SetIPChecksum`. The header is the one at the network header annotation, IHL words
//! long. A packet without that annotation, or whose header is shorter than 20 bytes or
//! runs past the data, is dropped and counted in `drops`.

use crate::args::Args;
use crate::element::*;
use crate::error::ConfigError;
use packet::{Packet, PacketBatch};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

pub struct SetIPChecksumClass;

impl ElementClass for SetIPChecksumClass {
    fn name(&self) -> &'static str {
        "SetIPChecksum"
    }
    fn port_count(&self) -> PortCount {
        PortCount::parse("1/1")
    }
    fn build(&self, args: &mut Args, cx: &BuildContext) -> Result<Arc<dyn ElementSpec>, ConfigError> {
        args.finish().map_err(|e| cx.error(e))?;
        Ok(Arc::new(SetIPChecksumSpec {
            drops: Arc::new(AtomicU64::new(0)),
        }))
    }
}

struct SetIPChecksumSpec {
    drops: Arc<AtomicU64>,
}

impl ElementSpec for SetIPChecksumSpec {
    fn instantiate(&self, _w: WorkerInfo) -> Box<dyn Element> {
        Box::new(SetIPChecksum {
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

struct SetIPChecksum {
    drops: Arc<AtomicU64>,
}

/// Writes the header checksum of `p`; false if it has no usable IPv4 header.
#[inline]
fn set_checksum(p: &mut Packet) -> bool {
    let Some(h) = super::ipv4_header_mut(p) else {
        return false;
    };
    super::set_header_checksum(h);
    true
}

impl Element for SetIPChecksum {
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, out: &mut Outputs<'_>, _cx: &mut Context<'_>) {
        let mut drops = 0;
        out.route_each(batch, |p| {
            if set_checksum(p) {
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
    use super::super::testutil::cksum;
    use super::*;
    use crate::testing::{build_error, Harness};

    fn at_offset(bytes: &[u8], off: usize, hlen: usize) -> Packet {
        let mut p = Packet::from_slice(bytes);
        p.set_network_header(off as isize, hlen);
        p
    }

    #[test]
    fn writes_the_header_checksum() {
        // RFC 1071-style worked example: a UDP header from 192.168.0.1 to 192.168.0.199
        // whose checksum is 0xb861 (computed by hand from its ten words).
        let mut bad = vec![
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0x12, 0x34, 0xc0, 0xa8, 0x00, 0x01,
            0xc0, 0xa8, 0x00, 0xc7,
        ];
        bad.extend_from_slice(&[0xaa; 6]);
        let mut want = bad.clone();
        want[10] = 0xb8;
        want[11] = 0x61;
        // Behind a 14-byte link header: only the IP header changes.
        let mut frame = vec![0x11; 14];
        frame.extend_from_slice(&bad);
        let mut want_frame = vec![0x11; 14];
        want_frame.extend_from_slice(&want);
        let mut h = Harness::new(&SetIPChecksumClass, "", 1, 1);
        let out = h.push(0, vec![at_offset(&bad, 0, 20), at_offset(&frame, 14, 20)]);
        assert_eq!(out[0][0].data(), &want[..]);
        assert_eq!(out[0][1].data(), &want_frame[..]);
        assert_eq!(h.read("drops"), "0");
    }

    #[test]
    fn options_are_covered() {
        // IHL 6: the option word 0x0101 0x0101 (four NOPs) is part of the sum.
        let mut b = vec![
            0x46, 0, 0, 24, 0, 1, 0, 0, 64, 6, 0xff, 0xff, 10, 0, 0, 1, 10, 0, 0, 2, 1, 1, 1, 1,
        ];
        let mut h = Harness::new(&SetIPChecksumClass, "", 1, 1);
        let out = h.push(0, vec![at_offset(&b, 0, 24)]);
        b[10] = 0;
        b[11] = 0;
        let c = cksum(&b);
        b[10..12].copy_from_slice(&c.to_be_bytes());
        assert_eq!(out[0][0].data(), &b[..]);
    }

    #[test]
    fn unusable_headers_are_dropped_and_counted() {
        let ok = super::super::testutil::ip_header(0, 20, 1, 0, 64, 17, [1, 1, 1, 1], [2, 2, 2, 2]);
        let mut short_ihl = ok.clone();
        short_ihl[0] = 0x44;
        let mut long_ihl = ok.clone();
        long_ihl[0] = 0x46;
        let mut h = Harness::new(&SetIPChecksumClass, "", 1, 1);
        let out = h.push(
            0,
            vec![
                Packet::from_slice(&ok),
                at_offset(&ok[..19], 0, 20),
                at_offset(&short_ihl, 0, 20),
                at_offset(&long_ihl, 0, 20),
                at_offset(&ok, 0, 20),
            ],
        );
        assert_eq!(out[0].len(), 1);
        assert_eq!(out[0][0].data(), &ok[..]);
        assert_eq!(h.read("drops"), "4");
        assert_eq!(
            build_error(&SetIPChecksumClass, "1", 1, 1),
            "e :: SetIPChecksum: too many arguments"
        );
    }
}
