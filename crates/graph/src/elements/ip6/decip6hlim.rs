//! `DecIP6HLIM`: decrements the IPv6 hop limit, as Click 2.x; packets whose hop limit
//! is 0 or 1 go to output 1 unchanged (dropped if output 1 is not connected) and are
//! counted in `drops`. IPv6 has no header checksum to update.

use crate::args::Args;
use crate::element::*;
use crate::error::ConfigError;
use packet::PacketBatch;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

pub struct DecIP6HLIMClass;

impl ElementClass for DecIP6HLIMClass {
    fn name(&self) -> &'static str {
        "DecIP6HLIM"
    }
    fn port_count(&self) -> PortCount {
        PortCount::parse("1/1-2")
    }
    fn build(&self, args: &mut Args, cx: &BuildContext) -> Result<Arc<dyn ElementSpec>, ConfigError> {
        args.finish().map_err(|m| cx.error(m))?;
        Ok(Arc::new(DecIP6HLIMSpec {
            drops: Arc::new(AtomicU64::new(0)),
        }))
    }
}

struct DecIP6HLIMSpec {
    drops: Arc<AtomicU64>,
}

impl ElementSpec for DecIP6HLIMSpec {
    fn instantiate(&self, _w: WorkerInfo) -> Box<dyn Element> {
        Box::new(DecIP6HLIM {
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

struct DecIP6HLIM {
    drops: Arc<AtomicU64>,
}

impl Element for DecIP6HLIM {
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, out: &mut Outputs<'_>, _cx: &mut Context<'_>) {
        let mut drops = 0;
        out.route_each(batch, |p| {
            // The hop limit is byte 7 of the header. Click asserts a network header;
            // a packet without one (or too short for byte 7) is dropped here.
            let Some(h) = p.network_header_chunk_mut::<8>() else {
                return DROP;
            };
            if h[7] <= 1 {
                drops += 1;
                return 1;
            }
            h[7] -= 1;
            0
        });
        if drops > 0 {
            self.drops.fetch_add(drops, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::ip6_packet;
    use super::*;
    use crate::testing::{build_error, Harness};
    use packet::Packet;

    fn marked(bytes: &[u8]) -> Packet {
        let mut p = Packet::from_slice(bytes);
        p.set_network_header(0, 40);
        p
    }

    #[test]
    fn decrements_the_hop_limit() {
        let pkt = ip6_packet("2001:db8::1", "2001:db8::2", 64, b"abc");
        let want = ip6_packet("2001:db8::1", "2001:db8::2", 63, b"abc");
        let mut e = Harness::new(&DecIP6HLIMClass, "", 1, 2);
        let out = e.push(0, vec![marked(&pkt)]);
        assert_eq!(out[0][0].data(), &want[..]);
        assert!(out[1].is_empty());
        assert_eq!(e.read("drops"), "0");
        // The hop limit of a header behind an Ethernet header.
        let mut framed = vec![0u8; 14];
        framed.extend_from_slice(&pkt);
        let mut p = Packet::from_slice(&framed);
        p.set_network_header(14, 40);
        let out = e.push(0, vec![p]);
        assert_eq!(&out[0][0].data()[14..], &want[..]);
    }

    #[test]
    fn expired_packets_go_to_output_1_unchanged() {
        let one = ip6_packet("2001:db8::1", "2001:db8::2", 1, b"");
        let zero = ip6_packet("2001:db8::1", "2001:db8::2", 0, b"");
        let mut e = Harness::new(&DecIP6HLIMClass, "", 1, 2);
        let out = e.push(0, vec![marked(&one), marked(&zero)]);
        assert!(out[0].is_empty());
        assert_eq!(out[1][0].data(), &one[..]);
        assert_eq!(out[1][1].data(), &zero[..]);
        assert_eq!(e.read("drops"), "2");
        // Without output 1 they are dropped, still counted.
        let mut e = Harness::new(&DecIP6HLIMClass, "", 1, 1);
        assert!(e.push(0, vec![marked(&one)])[0].is_empty());
        assert_eq!(e.read("drops"), "1");
    }

    #[test]
    fn a_packet_without_a_network_header_is_dropped() {
        let pkt = ip6_packet("2001:db8::1", "2001:db8::2", 64, b"");
        let mut e = Harness::new(&DecIP6HLIMClass, "", 1, 2);
        let out = e.push(0, vec![Packet::from_slice(&pkt)]);
        assert!(out[0].is_empty() && out[1].is_empty());
        assert_eq!(e.read("drops"), "0");
        assert_eq!(
            build_error(&DecIP6HLIMClass, "5", 1, 1),
            "e :: DecIP6HLIM: too many arguments"
        );
    }
}
