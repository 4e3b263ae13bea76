//! `MarkIPHeader([OFFSET])`: sets the network header annotation to the IPv4 header at
//! OFFSET, as long as its header length field says, with no check, as Click's element
//! of the same name.

use crate::args::Args;
use crate::element::*;
use crate::error::ConfigError;
use packet::{Packet, PacketBatch};
use std::sync::Arc;

pub struct MarkIPHeaderClass;

impl ElementClass for MarkIPHeaderClass {
    fn name(&self) -> &'static str {
        "MarkIPHeader"
    }
    fn port_count(&self) -> PortCount {
        PortCount::parse("1/1")
    }
    fn build(&self, args: &mut Args, cx: &BuildContext) -> Result<Arc<dyn ElementSpec>, ConfigError> {
        let e = |m: String| cx.error(m);
        let offset = args.positional::<u32>("OFFSET").map_err(e)?.unwrap_or(0);
        args.finish().map_err(e)?;
        Ok(Arc::new(MarkIPHeader {
            offset: offset as usize,
        }))
    }
}

#[derive(Clone, Copy)]
struct MarkIPHeader {
    offset: usize,
}

impl ElementSpec for MarkIPHeader {
    fn instantiate(&self, _w: WorkerInfo) -> Box<dyn Element> {
        Box::new(*self)
    }
}

/// Marks the header at `off`: its length is the header length field (IHL) times 4.
/// A packet without a byte at `off` gets a header of length 0 there (Click reads the
/// byte past the data).
#[inline(always)]
fn mark(off: usize, p: &mut Packet) {
    let hlen = p.data().get(off).map_or(0, |b| usize::from(b & 0x0f) * 4);
    // (Offsets past the data are clamped to the buffer: header views read them as
    // empty.)
    p.set_network_header(off as isize, hlen);
}

impl Element for MarkIPHeader {
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, out: &mut Outputs<'_>, _cx: &mut Context<'_>) {
        let off = self.offset;
        for p in batch.iter_mut() {
            mark(off, p);
        }
        out.push_batch(0, batch);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{build_error, Harness};

    #[test]
    fn marks_the_header_at_offset_with_its_length() {
        // A 20-byte header (IHL 5) and 4 bytes of payload.
        let mut ip = vec![0x45, 0, 0, 24, 0, 0, 0, 0, 64, 17, 0, 0];
        ip.extend_from_slice(&[10, 0, 0, 1, 10, 0, 0, 2]);
        ip.extend_from_slice(&[0xde, 0xad, 0xbe, 0xef]);
        let mut h = Harness::new(&MarkIPHeaderClass, "", 1, 1);
        let out = h.push_bytes(0, &ip);
        let p = &out[0][0];
        assert_eq!(p.data(), &ip[..]);
        assert_eq!(p.network_header_offset(), Some(0));
        assert_eq!(p.network_header_length(), 20);
        assert_eq!(p.transport_header(), Some(&[0xde, 0xad, 0xbe, 0xef][..]));

        // Behind a 14-byte Ethernet header, with a 24-byte header (IHL 6).
        let mut framed = vec![0xee; 14];
        framed.extend_from_slice(&[0x46, 0, 0, 28]);
        framed.extend_from_slice(&[0; 20]);
        framed.extend_from_slice(&[1, 2, 3, 4]);
        let mut h = Harness::new(&MarkIPHeaderClass, "OFFSET 14", 1, 1);
        let p = h.push_bytes(0, &framed).remove(0).remove(0);
        assert_eq!(p.network_header_offset(), Some(14));
        assert_eq!(p.network_header_length(), 24);
        assert_eq!(p.transport_header(), Some(&[1, 2, 3, 4][..]));
        assert_eq!(p.data(), &framed[..]);
    }

    #[test]
    fn no_checks_and_short_packets() {
        // Not IPv4 and IHL 2: marked as the field says, 8 bytes.
        let mut h = Harness::new(&MarkIPHeaderClass, "1", 1, 1);
        let p = h
            .push_bytes(0, &[0xff, 0x62, 9, 9, 9, 9, 9, 9, 9, 7])
            .remove(0)
            .remove(0);
        assert_eq!(p.network_header_offset(), Some(1));
        assert_eq!(p.network_header_length(), 8);
        assert_eq!(p.transport_header(), Some(&[7][..]));
        // A header longer than the packet: the transport header reads as empty.
        let p = h.push_bytes(0, &[0, 0x4f, 1, 2]).remove(0).remove(0);
        assert_eq!(p.network_header(), Some(&[0x4f, 1, 2][..]));
        assert_eq!(p.transport_header(), Some(&[][..]));
        // No byte at OFFSET: a header of length 0 there, no panic.
        let mut h = Harness::new(&MarkIPHeaderClass, "40", 1, 1);
        let out = h.push(0, vec![Packet::from_slice(&[0x45; 10]), Packet::from_slice(&[])]);
        for p in &out[0] {
            assert_eq!(p.network_header_length(), 0);
            assert_eq!(p.network_header(), Some(&[][..]));
        }
    }

    #[test]
    fn config_errors() {
        assert_eq!(
            build_error(&MarkIPHeaderClass, "-1", 1, 1),
            "e :: MarkIPHeader: OFFSET expects unsigned integer"
        );
        assert_eq!(
            build_error(&MarkIPHeaderClass, "14, 2", 1, 1),
            "e :: MarkIPHeader: too many arguments"
        );
        assert_eq!(
            build_error(&MarkIPHeaderClass, "CHECKSUM true", 1, 1),
            "e :: MarkIPHeader: bad keyword 'CHECKSUM'"
        );
    }
}
