//! `IPEncap(PROTO, SRC, DST, keywords TTL, TOS, DSCP, ECT, CE, DF)`: prepends a 20-byte
//! IPv4 header to each packet, as Click's `IPEncap`.
//!
//! The header carries protocol PROTO, source SRC, destination DST (or, for `DST_ANNO`,
//! the packet's destination IP annotation), the packet's new length, an ID from a
//! counter of this element's (from 0, consecutive over all workers), and its checksum.
//! The packet's destination IP annotation is set to the destination and its network
//! header to the new header. A packet that would exceed 65535 bytes is dropped and
//! counted in `drops`. Handlers `src` and `dst` read and write SRC and DST.

use super::encap::{parse_value, Dst, EncapState, FixedFields, MAX_IP_LEN};
use crate::args::{Args, FromArg};
use crate::element::*;
use crate::error::ConfigError;
use packet::PacketBatch;
use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

pub struct IPEncapClass;

/// An IP protocol, by number or by one of Click's names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct IpProto(pub u8);

impl FromArg for IpProto {
    const WHAT: &'static str = "IP protocol";
    fn from_arg(s: &str) -> Option<Self> {
        let named = match s.trim() {
            "icmp" => Some(1),
            "igmp" => Some(2),
            "ipip" => Some(4),
            "tcp" => Some(6),
            "udp" => Some(17),
            _ => None,
        };
        named.or_else(|| u8::from_arg(s)).map(IpProto)
    }
}

/// ECT's value: a boolean (ECN bits 1) or `2` (ECN bits 2).
struct Ect(u8);

impl FromArg for Ect {
    const WHAT: &'static str = "boolean or '2'";
    fn from_arg(s: &str) -> Option<Self> {
        if s.trim() == "2" {
            return Some(Ect(2));
        }
        bool::from_arg(s).map(|b| Ect(u8::from(b)))
    }
}

/// Don't Fragment, in the flags and fragment offset word.
const DF_BIT: u16 = 0x4000;

#[derive(Clone, Copy)]
struct Settings {
    fixed: FixedFields,
    dst: Dst,
}

impl ElementClass for IPEncapClass {
    fn name(&self) -> &'static str {
        "IPEncap"
    }
    fn port_count(&self) -> PortCount {
        PortCount::parse("1/1")
    }
    fn build(&self, args: &mut Args, cx: &BuildContext) -> Result<Arc<dyn ElementSpec>, ConfigError> {
        let e = |m: String| cx.error(m);
        let proto = args.required::<IpProto>("PROTO").map_err(e)?;
        let src = args.required::<Ipv4Addr>("SRC").map_err(e)?;
        let dst = args.required::<Dst>("DST").map_err(e)?;
        let ttl = args.keyword::<u8>("TTL").map_err(e)?.unwrap_or(250);
        let tos = args.keyword::<u8>("TOS").map_err(e)?;
        let dscp = args.keyword::<u8>("DSCP").map_err(e)?;
        let ect = args.keyword::<Ect>("ECT").map_err(e)?;
        let ce = args.keyword::<bool>("CE").map_err(e)?;
        let df = args.keyword::<bool>("DF").map_err(e)?.unwrap_or(false);
        args.finish().map_err(e)?;
        let tos = match tos {
            Some(_) if dscp.is_some() || ect.is_some() || ce.is_some() => {
                return Err(cx.error("TOS cannot be combined with DSCP, ECT or CE"));
            }
            Some(t) => t,
            None => {
                let dscp = dscp.unwrap_or(0);
                if dscp > 63 {
                    return Err(cx.error("DSCP must be between 0 and 63"));
                }
                // CE (3) includes both ECT bits.
                let ecn = if ce == Some(true) {
                    3
                } else {
                    ect.map_or(0, |e| e.0)
                };
                dscp << 2 | ecn
            }
        };
        let fixed = FixedFields {
            tos,
            frag: if df { DF_BIT } else { 0 },
            ttl,
            proto: proto.0,
            src: src.octets(),
        };
        Ok(Arc::new(IPEncapSpec {
            shared: Arc::new(EncapState::new(Settings { fixed, dst })),
            drops: Arc::new(AtomicU64::new(0)),
        }))
    }
}

struct IPEncapSpec {
    shared: Arc<EncapState<Settings>>,
    drops: Arc<AtomicU64>,
}

impl ElementSpec for IPEncapSpec {
    fn instantiate(&self, _w: WorkerInfo) -> Box<dyn Element> {
        let (generation, settings) = self.shared.snapshot();
        Box::new(IPEncap {
            shared: self.shared.clone(),
            drops: self.drops.clone(),
            generation,
            settings,
        })
    }
    fn handlers(&self) -> Vec<HandlerInfo> {
        vec![
            HandlerInfo::read_write("src").reconfiguring(1, "SRC"),
            HandlerInfo::read_write("dst").reconfiguring(2, "DST"),
            HandlerInfo::read("drops"),
        ]
    }
    fn read_handler(&self, name: &str) -> Option<String> {
        match name {
            "src" => Some(Ipv4Addr::from(self.shared.read().fixed.src).to_string()),
            "dst" => Some(self.shared.read().dst.to_string()),
            "drops" => Some(self.drops.load(Ordering::Relaxed).to_string()),
            _ => None,
        }
    }
    fn write_handler(&self, name: &str, value: &str) -> Option<Result<(), String>> {
        let s = &self.shared;
        match name {
            "src" => {
                Some(parse_value::<Ipv4Addr>("SRC", value).map(|a| s.write(|st| st.fixed.src = a.octets())))
            }
            "dst" => Some(parse_value::<Dst>("DST", value).map(|d| s.write(|st| st.dst = d))),
            _ => None,
        }
    }
}

struct IPEncap {
    shared: Arc<EncapState<Settings>>,
    drops: Arc<AtomicU64>,
    /// This worker's copy of the settings, as of `generation`.
    generation: u64,
    settings: Settings,
}

impl Element for IPEncap {
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, out: &mut Outputs<'_>, _cx: &mut Context<'_>) {
        if self.shared.generation() != self.generation {
            (self.generation, self.settings) = self.shared.snapshot();
        }
        let Settings { fixed, dst } = self.settings;
        let mut id = self.shared.take_ids(batch.len());
        let mut drops = 0;
        out.route_each(batch, |p| {
            let len = p.len() + 20;
            if len > MAX_IP_LEN || !p.try_push(20) {
                drops += 1;
                return DROP;
            }
            let to = dst.resolve(p.anno().dst_ip());
            let h = fixed.header(len as u16, id, to);
            id = id.wrapping_add(1);
            p.data_mut()[..20].copy_from_slice(&h);
            p.set_network_header(0, 20);
            p.set_dst_ip_anno(to);
            0
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
    use packet::Packet;

    /// The header IPEncap should write, built field by field with its checksum computed
    /// by the test's own word sum.
    #[allow(clippy::too_many_arguments)]
    fn want_header(
        tos: u8,
        len: u16,
        id: u16,
        frag: u16,
        ttl: u8,
        proto: u8,
        src: [u8; 4],
        dst: [u8; 4],
    ) -> Vec<u8> {
        let mut h = vec![0x45, tos];
        h.extend_from_slice(&len.to_be_bytes());
        h.extend_from_slice(&id.to_be_bytes());
        h.extend_from_slice(&frag.to_be_bytes());
        h.extend_from_slice(&[ttl, proto, 0, 0]);
        h.extend_from_slice(&src);
        h.extend_from_slice(&dst);
        let c = cksum(&h);
        h[10..12].copy_from_slice(&c.to_be_bytes());
        h
    }

    #[test]
    fn prepends_the_documented_header_and_sets_annotations() {
        let mut h = Harness::new(&IPEncapClass, "4, 18.26.4.24, 140.247.60.147", 1, 1);
        let inner = [0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4];
        let out = h.push(
            0,
            vec![Packet::from_slice(&inner), Packet::from_slice(&inner[..3])],
        );
        let (a, b) = (&out[0][0], &out[0][1]);
        let mut want = want_header(0, 28, 0, 0, 250, 4, [18, 26, 4, 24], [140, 247, 60, 147]);
        // Checked by hand once: the header sums to 0xffff with this checksum.
        assert_eq!(cksum(&want), 0);
        want.extend_from_slice(&inner);
        assert_eq!(a.data(), &want[..]);
        let mut want = want_header(0, 23, 1, 0, 250, 4, [18, 26, 4, 24], [140, 247, 60, 147]);
        want.extend_from_slice(&inner[..3]);
        assert_eq!(b.data(), &want[..]);
        for p in [a, b] {
            assert_eq!(p.anno().dst_ip(), [140, 247, 60, 147]);
            assert_eq!(p.network_header_offset(), Some(0));
            assert_eq!(p.network_header_length(), 20);
        }
        // The counter carries on in the next batch.
        let out = h.push_bytes(0, &[]);
        assert_eq!(&out[0][0].data()[4..6], &[0, 2]);
        assert_eq!(h.read("drops"), "0");
    }

    #[test]
    fn keywords_protocol_names_and_dst_anno() {
        let mut h = Harness::new(
            &IPEncapClass,
            "udp, 10.0.0.1, DST_ANNO, TTL 64, DSCP 46, ECT 2, DF true",
            1,
            1,
        );
        let mut p = Packet::from_slice(&[7; 4]);
        p.set_dst_ip_anno([192, 168, 1, 9]);
        let out = h.push(0, vec![p]);
        let mut want = want_header(0xba, 24, 0, 0x4000, 64, 17, [10, 0, 0, 1], [192, 168, 1, 9]);
        want.extend_from_slice(&[7; 4]);
        assert_eq!(out[0][0].data(), &want[..]);
        assert_eq!(out[0][0].anno().dst_ip(), [192, 168, 1, 9]);
        assert_eq!(h.read("dst"), "DST_ANNO");

        for (config, tos, proto) in [
            ("tcp, 1.1.1.1, 2.2.2.2, TOS 0x10", 0x10, 6),
            ("icmp, 1.1.1.1, 2.2.2.2, ECT true", 0x01, 1),
            ("ipip, 1.1.1.1, 2.2.2.2, DSCP 8, CE true", 0x23, 4),
            ("igmp, 1.1.1.1, 2.2.2.2, ECT 2, CE true", 0x03, 2),
            ("255, 1.1.1.1, 2.2.2.2, ECT false", 0, 255),
        ] {
            let mut h = Harness::new(&IPEncapClass, config, 1, 1);
            let d = h.push_bytes(0, &[])[0][0].data().to_vec();
            assert_eq!((d[1], d[9]), (tos, proto), "{}", config);
            assert_eq!(cksum(&d), 0, "{}", config);
        }
    }

    #[test]
    fn src_and_dst_handlers_change_the_header_for_every_worker() {
        let mut h = Harness::new(&IPEncapClass, "4, 1.1.1.1, 2.2.2.2", 1, 1);
        let mut other = h.another_worker();
        assert_eq!(h.read("src"), "1.1.1.1");
        h.write("src", "3.3.3.3").unwrap();
        h.write("dst", " 4.4.4.4\n").unwrap();
        assert_eq!(h.read("src"), "3.3.3.3");
        assert_eq!(h.read("dst"), "4.4.4.4");
        let d = other.push_bytes(0, &[])[0][0].data().to_vec();
        assert_eq!(d, want_header(0, 20, 0, 0, 250, 4, [3, 3, 3, 3], [4, 4, 4, 4]));
        // Both workers draw from one ID counter.
        let d = h.push_bytes(0, &[])[0][0].data().to_vec();
        assert_eq!(&d[4..6], &[0, 1]);
        assert_eq!(h.write("src", "DST_ANNO").unwrap_err(), "SRC expects IP address");
        assert_eq!(
            h.write("dst", "x").unwrap_err(),
            "DST expects IP address or 'DST_ANNO'"
        );
        let handlers = h.spec.handlers();
        assert_eq!(handlers[0].reconfigures.unwrap().position, 1);
        assert_eq!(handlers[1].reconfigures.unwrap().keyword, "DST");
    }

    #[test]
    fn a_packet_too_long_for_ipv4_is_dropped_and_counted() {
        let mut h = Harness::new(&IPEncapClass, "4, 1.1.1.1, 2.2.2.2", 1, 1);
        let out = h.push(0, vec![Packet::zeroed(65516), Packet::zeroed(65515)]);
        assert_eq!(out[0].len(), 1);
        assert_eq!(&out[0][0].data()[2..4], &[0xff, 0xff]);
        assert_eq!(out[0][0].len(), 65535);
        assert_eq!(h.read("drops"), "1");
    }

    #[test]
    fn bad_arguments() {
        let err = |c: &str| build_error(&IPEncapClass, c, 1, 1);
        assert_eq!(
            err("sctp, 1.1.1.1, 2.2.2.2"),
            "e :: IPEncap: PROTO expects IP protocol"
        );
        assert_eq!(
            err("256, 1.1.1.1, 2.2.2.2"),
            "e :: IPEncap: PROTO expects IP protocol"
        );
        assert_eq!(err("4, 1.1.1.1"), "e :: IPEncap: missing mandatory DST argument");
        assert_eq!(
            err("4, DST_ANNO, 1.1.1.1"),
            "e :: IPEncap: SRC expects IP address"
        );
        assert_eq!(
            err("4, 1.1.1.1, 2.2.2.2, TOS 1, DSCP 2"),
            "e :: IPEncap: TOS cannot be combined with DSCP, ECT or CE"
        );
        assert_eq!(
            err("4, 1.1.1.1, 2.2.2.2, DSCP 64"),
            "e :: IPEncap: DSCP must be between 0 and 63"
        );
        assert_eq!(
            err("4, 1.1.1.1, 2.2.2.2, ECT 3"),
            "e :: IPEncap: ECT expects boolean or '2'"
        );
        assert_eq!(
            err("4, 1.1.1.1, 2.2.2.2, TTL 256"),
            "e :: IPEncap: TTL expects unsigned integer"
        );
    }
}
