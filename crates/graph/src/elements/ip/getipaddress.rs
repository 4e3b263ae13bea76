//! `GetIPAddress(OFFSET [, ANNO] [, IP src|dst])`: copies 4 bytes of the packet into an
//! IP address annotation (the destination IP annotation by default), as Click 2.x.

use super::Anno4;
use crate::args::Args;
use crate::element::*;
use crate::error::ConfigError;
use packet::views::Ipv4Header;
use packet::{Packet, PacketBatch};
use std::sync::Arc;

pub struct GetIPAddressClass;

#[derive(Clone, Copy)]
enum Source {
    /// Bytes at this offset from the start of the data.
    Offset(usize),
    /// The network header's source address.
    IpSrc,
    /// The network header's destination address.
    IpDst,
}

impl ElementClass for GetIPAddressClass {
    fn name(&self) -> &'static str {
        "GetIPAddress"
    }
    fn port_count(&self) -> PortCount {
        PortCount::parse("1/1")
    }
    fn build(&self, args: &mut Args, cx: &BuildContext) -> Result<Arc<dyn ElementSpec>, ConfigError> {
        let e = |m: String| cx.error(m);
        let offset = args.positional::<i32>("OFFSET").map_err(e)?.unwrap_or(-1);
        let anno = args.positional::<Anno4>("ANNO").map_err(e)?;
        let ip = args.keyword::<String>("IP").map_err(e)?;
        args.finish().map_err(e)?;
        let source = match (offset >= 0, ip.as_deref()) {
            (true, None) => Source::Offset(offset as usize),
            (false, Some("src")) => Source::IpSrc,
            (false, Some("dst")) => Source::IpDst,
            (false, Some(_)) => return Err(cx.error("bad IP")),
            _ => return Err(cx.error("set one of OFFSET, IP")),
        };
        Ok(Arc::new(GetIPAddressSpec {
            source,
            anno: anno.map_or(packet::anno::DST_IP_ANNO_OFFSET, |a| a.0),
        }))
    }
}

#[derive(Clone, Copy)]
struct GetIPAddressSpec {
    source: Source,
    anno: usize,
}

impl ElementSpec for GetIPAddressSpec {
    fn instantiate(&self, _w: WorkerInfo) -> Box<dyn Element> {
        Box::new(*self)
    }
}

impl GetIPAddressSpec {
    fn address(&self, p: &Packet) -> Option<[u8; 4]> {
        match self.source {
            Source::Offset(o) => p
                .data()
                .get(o..o.checked_add(4)?)
                .map(|b| [b[0], b[1], b[2], b[3]]),
            Source::IpSrc => Ipv4Header::new_checked(p.network_header()?).map(|h| h.src()),
            Source::IpDst => Ipv4Header::new_checked(p.network_header()?).map(|h| h.dst()),
        }
    }
}

impl Element for GetIPAddressSpec {
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, out: &mut Outputs<'_>, _cx: &mut Context<'_>) {
        for p in batch.iter_mut() {
            // Too-short packets keep their annotation (Click would read past the data).
            if let Some(a) = self.address(p) {
                p.set_user_anno(self.anno, &a);
            }
        }
        out.push_batch(0, batch);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{build_error, Harness};

    fn frame() -> Packet {
        // 14 bytes of Ethernet, then an IPv4 header from 10.0.0.1 to 192.168.1.2.
        let mut b = vec![0u8; 14];
        b.extend_from_slice(&super::super::testutil::ip_header(
            0,
            20,
            0,
            0,
            64,
            17,
            [10, 0, 0, 1],
            [192, 168, 1, 2],
        ));
        let mut p = Packet::from_slice(&b);
        p.set_network_header(14, 20);
        p
    }

    #[test]
    fn offset_into_dst_ip_anno() {
        let mut h = Harness::new(&GetIPAddressClass, "30", 1, 1);
        let out = h.push(0, vec![frame()]);
        assert_eq!(out[0][0].anno().dst_ip(), [192, 168, 1, 2]);
    }

    #[test]
    fn other_annotation_and_ip_keyword() {
        let mut h = Harness::new(&GetIPAddressClass, "26, 28", 1, 1);
        let out = h.push(0, vec![frame()]);
        assert_eq!(&out[0][0].anno().user[28..32], &[10, 0, 0, 1]);
        assert_eq!(out[0][0].anno().dst_ip(), [0, 0, 0, 0]);
        let mut h = Harness::new(&GetIPAddressClass, "IP src", 1, 1);
        assert_eq!(h.push(0, vec![frame()])[0][0].anno().dst_ip(), [10, 0, 0, 1]);
        let mut h = Harness::new(&GetIPAddressClass, "IP dst, ANNO 24", 1, 1);
        assert_eq!(
            &h.push(0, vec![frame()])[0][0].anno().user[24..28],
            &[192, 168, 1, 2]
        );
    }

    #[test]
    fn short_packet_passes_unchanged() {
        let mut h = Harness::new(&GetIPAddressClass, "30", 1, 1);
        let out = h.push_bytes(0, &[1, 2, 3]);
        assert_eq!(out[0][0].data(), &[1, 2, 3]);
        assert_eq!(out[0][0].anno().dst_ip(), [0, 0, 0, 0]);
        // IP src with no network header: unchanged too.
        let mut h = Harness::new(&GetIPAddressClass, "IP src", 1, 1);
        assert_eq!(h.push_bytes(0, &[0; 20])[0].len(), 1);
    }

    #[test]
    fn config_errors() {
        assert_eq!(
            build_error(&GetIPAddressClass, "", 1, 1),
            "e :: GetIPAddress: set one of OFFSET, IP"
        );
        assert_eq!(
            build_error(&GetIPAddressClass, "16, IP src", 1, 1),
            "e :: GetIPAddress: set one of OFFSET, IP"
        );
        assert_eq!(
            build_error(&GetIPAddressClass, "IP foo", 1, 1),
            "e :: GetIPAddress: bad IP"
        );
        assert_eq!(
            build_error(&GetIPAddressClass, "16, 46", 1, 1),
            "e :: GetIPAddress: ANNO expects annotation"
        );
    }
}
