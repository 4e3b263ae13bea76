//! `GetIP6Address(OFFSET)`: copies 16 bytes of the packet into the destination IPv6
//! address annotation, as Click 2.x (OFFSET is usually 24: an IPv6 header's destination,
//! with no Ethernet header in front).

use crate::args::Args;
use crate::element::*;
use crate::error::ConfigError;
use packet::anno::DST_IP6_ANNO_OFFSET;
use packet::PacketBatch;
use std::sync::Arc;

pub struct GetIP6AddressClass;

impl ElementClass for GetIP6AddressClass {
    fn name(&self) -> &'static str {
        "GetIP6Address"
    }
    fn port_count(&self) -> PortCount {
        PortCount::parse("1/1")
    }
    fn build(&self, args: &mut Args, cx: &BuildContext) -> Result<Arc<dyn ElementSpec>, ConfigError> {
        let e = |m: String| cx.error(m);
        let offset = args.required::<usize>("OFFSET").map_err(e)?;
        args.finish().map_err(e)?;
        Ok(Arc::new(GetIP6Address { offset }))
    }
}

#[derive(Clone, Copy)]
struct GetIP6Address {
    offset: usize,
}

impl ElementSpec for GetIP6Address {
    fn instantiate(&self, _w: WorkerInfo) -> Box<dyn Element> {
        Box::new(*self)
    }
}

impl Element for GetIP6Address {
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, out: &mut Outputs<'_>, _cx: &mut Context<'_>) {
        let o = self.offset;
        for p in batch.iter_mut() {
            // A packet too short for the 16 bytes keeps its annotation (Click would read
            // past the data).
            let a: Option<[u8; 16]> = p
                .data()
                .get(o..o.saturating_add(16))
                .and_then(|b| b.try_into().ok());
            if let Some(a) = a {
                p.set_user_anno(DST_IP6_ANNO_OFFSET, &a);
            }
        }
        out.push_batch(0, batch);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{build_error, Harness};
    use packet::Packet;

    /// A 40-byte IPv6 header (UDP, hop limit 64) from 2001:db8::1 to 2001:db8:5::7.
    fn ip6_header() -> Vec<u8> {
        let mut b = vec![0x60, 0, 0, 0, 0, 0, 17, 64];
        b.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
        b.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0, 5, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7]);
        b
    }

    const DST: [u8; 16] = [0x20, 0x01, 0x0d, 0xb8, 0, 5, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7];

    #[test]
    fn destination_into_the_annotation() {
        let mut h = Harness::new(&GetIP6AddressClass, "24", 1, 1);
        let out = h.push_bytes(0, &ip6_header());
        assert_eq!(out[0][0].anno().dst_ip6(), DST);
        // The bytes are untouched.
        assert_eq!(out[0][0].data(), &ip6_header()[..]);
        // Behind an Ethernet header: offset 38. The keyword form works too.
        let mut framed = vec![0u8; 14];
        framed.extend_from_slice(&ip6_header());
        let mut h = Harness::new(&GetIP6AddressClass, "OFFSET 38", 1, 1);
        assert_eq!(h.push_bytes(0, &framed)[0][0].anno().dst_ip6(), DST);
    }

    #[test]
    fn short_packet_keeps_its_annotation() {
        let mut h = Harness::new(&GetIP6AddressClass, "24", 1, 1);
        let mut p = Packet::from_slice(&ip6_header()[..39]);
        p.anno_mut().set_dst_ip6([9; 16]);
        let out = h.push(0, vec![p]);
        assert_eq!(out[0].len(), 1);
        assert_eq!(out[0][0].anno().dst_ip6(), [9; 16]);
    }

    #[test]
    fn config_errors() {
        assert_eq!(
            build_error(&GetIP6AddressClass, "", 1, 1),
            "e :: GetIP6Address: missing mandatory OFFSET argument"
        );
        assert_eq!(
            build_error(&GetIP6AddressClass, "-1", 1, 1),
            "e :: GetIP6Address: OFFSET expects unsigned integer"
        );
        assert_eq!(
            build_error(&GetIP6AddressClass, "24, 2", 1, 1),
            "e :: GetIP6Address: too many arguments"
        );
    }
}
