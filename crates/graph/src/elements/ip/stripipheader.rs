//! `StripIPHeader` and `UnstripIPHeader`, as Click's elements of the same names.
//!
//! StripIPHeader removes the bytes before the transport header annotation (which the
//! network header annotation's length puts after the IP header), leaving every
//! annotation as it was. UnstripIPHeader moves the data start back to the network
//! header annotation when it lies in front of the data. A packet without the
//! annotation passes unchanged.

use crate::args::Args;
use crate::element::*;
use crate::error::ConfigError;
use packet::{Packet, PacketBatch};
use std::sync::Arc;

pub struct StripIPHeaderClass;
pub struct UnstripIPHeaderClass;

fn no_arguments(args: &mut Args, cx: &BuildContext) -> Result<(), ConfigError> {
    args.finish().map_err(|e| cx.error(e))
}

impl ElementClass for StripIPHeaderClass {
    fn name(&self) -> &'static str {
        "StripIPHeader"
    }
    fn port_count(&self) -> PortCount {
        PortCount::parse("1/1")
    }
    fn build(&self, args: &mut Args, cx: &BuildContext) -> Result<Arc<dyn ElementSpec>, ConfigError> {
        no_arguments(args, cx)?;
        Ok(Arc::new(StripIPHeader))
    }
}

impl ElementClass for UnstripIPHeaderClass {
    fn name(&self) -> &'static str {
        "UnstripIPHeader"
    }
    fn port_count(&self) -> PortCount {
        PortCount::parse("1/1")
    }
    fn build(&self, args: &mut Args, cx: &BuildContext) -> Result<Arc<dyn ElementSpec>, ConfigError> {
        no_arguments(args, cx)?;
        Ok(Arc::new(UnstripIPHeader))
    }
}

#[derive(Clone, Copy)]
struct StripIPHeader;

impl ElementSpec for StripIPHeader {
    fn instantiate(&self, _w: WorkerInfo) -> Box<dyn Element> {
        Box::new(*self)
    }
}

/// Click's `pull(transport_header_offset())`: an offset past the data empties the
/// packet; so does one before the data start, which Click's unsigned `pull` length
/// reads as larger than any packet.
#[inline(always)]
fn strip_to_transport(p: &mut Packet) {
    if let Some(off) = p.transport_header_offset() {
        p.pull(usize::try_from(off).unwrap_or(usize::MAX));
    }
}

impl Element for StripIPHeader {
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, out: &mut Outputs<'_>, _cx: &mut Context<'_>) {
        batch.iter_mut().for_each(strip_to_transport);
        out.push_batch(0, batch);
    }
}

#[derive(Clone, Copy)]
struct UnstripIPHeader;

impl ElementSpec for UnstripIPHeader {
    fn instantiate(&self, _w: WorkerInfo) -> Box<dyn Element> {
        Box::new(*self)
    }
}

/// Moves the data start back to a network header that lies in front of it. The header
/// lies in the headroom, so the push needs no new buffer and cannot fail; a packet
/// whose push failed would keep its data as it was.
#[inline(always)]
fn unstrip_to_network(p: &mut Packet) {
    if let Some(off) = p.network_header_offset().filter(|&o| o < 0) {
        let grown = p.try_push(off.unsigned_abs());
        debug_assert!(grown);
    }
}

impl Element for UnstripIPHeader {
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, out: &mut Outputs<'_>, _cx: &mut Context<'_>) {
        batch.iter_mut().for_each(unstrip_to_network);
        out.push_batch(0, batch);
    }
}

#[cfg(test)]
mod tests {
    use super::super::markipheader::MarkIPHeaderClass;
    use super::*;
    use crate::testing::{build_error, Harness};

    /// Ethernet header (14 bytes of 0xee), a 24-byte IPv4 header (IHL 6), 3 bytes of
    /// UDP-ish payload.
    fn frame() -> Vec<u8> {
        let mut f = vec![0xee; 14];
        f.extend_from_slice(&[0x46, 0, 0, 27, 0, 0, 0, 0, 64, 17, 0, 0]);
        f.extend_from_slice(&[10, 0, 0, 1, 10, 0, 0, 2, 1, 1, 0, 0]);
        f.extend_from_slice(&[0xaa, 0xbb, 0xcc]);
        f
    }

    fn marked(bytes: &[u8], offset: &str) -> Packet {
        Harness::new(&MarkIPHeaderClass, offset, 1, 1)
            .push_bytes(0, bytes)
            .remove(0)
            .remove(0)
    }

    #[test]
    fn strip_removes_everything_up_to_the_transport_header() {
        let f = frame();
        let mut s = Harness::new(&StripIPHeaderClass, "", 1, 1);
        let p = s.push(0, vec![marked(&f, "14")]).remove(0).remove(0);
        assert_eq!(p.data(), &[0xaa, 0xbb, 0xcc]);
        // Annotations unchanged: the network header is now 24 bytes before the data.
        assert_eq!(p.network_header_offset(), Some(-24));
        assert_eq!(p.network_header_length(), 24);
        assert_eq!(p.transport_header_offset(), Some(0));

        // UnstripIPHeader puts the IP header back (not the Ethernet header).
        let mut u = Harness::new(&UnstripIPHeaderClass, "", 1, 1);
        let p = u.push(0, vec![p]).remove(0).remove(0);
        assert_eq!(p.data(), &f[14..]);
        assert_eq!(p.network_header_offset(), Some(0));
        // Already on: unchanged.
        let p = u.push(0, vec![p]).remove(0).remove(0);
        assert_eq!(p.data(), &f[14..]);
    }

    #[test]
    fn unstrip_leaves_a_header_inside_the_data() {
        let f = frame();
        let mut u = Harness::new(&UnstripIPHeaderClass, "", 1, 1);
        let p = u.push(0, vec![marked(&f, "14")]).remove(0).remove(0);
        assert_eq!(p.data(), &f[..]);
        assert_eq!(p.network_header_offset(), Some(14));
    }

    #[test]
    fn packets_without_annotations_pass_unchanged() {
        let mut s = Harness::new(&StripIPHeaderClass, "", 1, 1);
        let mut u = Harness::new(&UnstripIPHeaderClass, "", 1, 1);
        assert_eq!(s.push_bytes(0, &[1, 2, 3])[0][0].data(), &[1, 2, 3]);
        assert_eq!(u.push_bytes(0, &[1, 2, 3])[0][0].data(), &[1, 2, 3]);
    }

    #[test]
    fn strip_past_the_data_or_twice_empties_the_packet() {
        let mut s = Harness::new(&StripIPHeaderClass, "", 1, 1);
        // IHL 15 on a 6-byte packet: the transport header lies past the data.
        let p = s
            .push(0, vec![marked(&[0x4f, 0, 0, 0, 0, 0], "")])
            .remove(0)
            .remove(0);
        assert_eq!(p.len(), 0);
        // Stripped a second time: the transport header is before the data.
        let f = frame();
        let p = s.push(0, vec![marked(&f, "14")]).remove(0).remove(0);
        let mut p = s.push(0, vec![p]).remove(0).remove(0);
        assert_eq!(p.data(), &[0xaa, 0xbb, 0xcc]);
        p.pull(1);
        let p = s.push(0, vec![p]).remove(0).remove(0);
        assert_eq!(p.len(), 0);
    }

    #[test]
    fn config_errors() {
        assert_eq!(
            build_error(&StripIPHeaderClass, "14", 1, 1),
            "e :: StripIPHeader: too many arguments"
        );
        assert_eq!(
            build_error(&UnstripIPHeaderClass, "X 1", 1, 1),
            "e :: UnstripIPHeader: bad keyword 'X'"
        );
    }
}
