//! `StripToNetworkHeader`: moves the data start to the network header annotation, as
//! Click's element of the same name: the bytes before a header inside the data are
//! removed; a header in front of the data (after a Strip past it) is brought back. A
//! packet without the annotation passes unchanged.

use crate::args::Args;
use crate::element::*;
use crate::error::ConfigError;
use packet::{Packet, PacketBatch};
use std::sync::Arc;

pub struct StripToNetworkHeaderClass;

impl ElementClass for StripToNetworkHeaderClass {
    fn name(&self) -> &'static str {
        "StripToNetworkHeader"
    }
    fn port_count(&self) -> PortCount {
        PortCount::parse("1/1")
    }
    fn build(&self, args: &mut Args, cx: &BuildContext) -> Result<Arc<dyn ElementSpec>, ConfigError> {
        args.finish().map_err(|e| cx.error(e))?;
        Ok(Arc::new(StripToNetworkHeader))
    }
}

#[derive(Clone, Copy)]
struct StripToNetworkHeader;

impl ElementSpec for StripToNetworkHeader {
    fn instantiate(&self, _w: WorkerInfo) -> Box<dyn Element> {
        Box::new(*self)
    }
}

#[inline(always)]
fn to_network_header(p: &mut Packet) {
    match p.network_header_offset() {
        // (`pull` clamps: a header past the data empties the packet, as Click's does.)
        Some(off) if off >= 0 => p.pull(off as usize),
        Some(off) => {
            // The header lies in the headroom: no new buffer, so this cannot fail (a
            // packet whose push failed would keep its data as it was).
            let grown = p.try_push(off.unsigned_abs());
            debug_assert!(grown);
        }
        None => {}
    }
}

impl Element for StripToNetworkHeader {
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, out: &mut Outputs<'_>, _cx: &mut Context<'_>) {
        batch.iter_mut().for_each(to_network_header);
        out.push_batch(0, batch);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::elements::strip::StripClass;
    use crate::testing::{build_error, Harness};

    #[test]
    fn strips_to_the_network_header_either_way() {
        // 14 bytes of Ethernet, then 4 bytes standing for the network header.
        let mut f = vec![0x11; 14];
        f.extend_from_slice(&[0x45, 0, 0, 20]);
        let mut p = Packet::from_slice(&f);
        p.set_network_header(14, 4);
        let mut h = Harness::new(&StripToNetworkHeaderClass, "", 1, 1);
        let p = h.push(0, vec![p]).remove(0).remove(0);
        assert_eq!(p.data(), &[0x45, 0, 0, 20]);
        assert_eq!(p.network_header_offset(), Some(0));

        // Marked, then stripped 16 bytes (2 past the header): 2 bytes come back.
        let mut p = Packet::from_slice(&f);
        p.set_network_header(14, 4);
        let p = Harness::new(&StripClass, "16", 1, 1)
            .push(0, vec![p])
            .remove(0)
            .remove(0);
        assert_eq!(p.data(), &[0, 20]);
        let p = h.push(0, vec![p]).remove(0).remove(0);
        assert_eq!(p.data(), &[0x45, 0, 0, 20]);
        assert_eq!(p.network_header_offset(), Some(0));
    }

    #[test]
    fn unmarked_and_short_packets() {
        let mut h = Harness::new(&StripToNetworkHeaderClass, "", 1, 1);
        assert_eq!(h.push_bytes(0, &[1, 2, 3])[0][0].data(), &[1, 2, 3]);
        // A header past the data: the packet is emptied, still emitted.
        let mut p = Packet::from_slice(&[1, 2, 3]);
        p.set_network_header(10, 20);
        let out = h.push(0, vec![p]);
        assert_eq!(out[0].len(), 1);
        assert_eq!(out[0][0].len(), 0);
    }

    #[test]
    fn config_errors() {
        assert_eq!(
            build_error(&StripToNetworkHeaderClass, "14", 1, 1),
            "e :: StripToNetworkHeader: too many arguments"
        );
    }
}
