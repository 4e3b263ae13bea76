//! `UDPIPEncap(SRC, SPORT, DST, DPORT [, CHECKSUM])`: prepends an IPv4 and a UDP header
//! to each packet, as Click's `UDPIPEncap`.
//!
//! The IPv4 header: TOS 0, an ID from this element's counter (from 0, consecutive over
//! all workers), no fragment bits, TTL 250, protocol UDP, source SRC, destination DST
//! (or, for `DST_ANNO`, the packet's destination IP annotation). The UDP header: ports
//! SPORT and DPORT, length of the UDP header and payload, and, when CHECKSUM is true
//! (the default), the checksum over the pseudo-header, header and payload, with a
//! computed 0 sent as 0xFFFF (RFC 768); otherwise 0 (no checksum). The destination IP
//! annotation is set to the destination; the network header is the IPv4 header and the
//! transport header the UDP header. A packet that would exceed 65535 bytes is dropped
//! and counted in `drops`. Handlers `src`, `sport`, `dst` and `dport` read and write
//! the addresses and ports.

use super::encap::{parse_value, Dst, EncapState, FixedFields, MAX_IP_LEN};
use crate::args::{Args, PortArg};
use crate::element::*;
use crate::error::ConfigError;
use packet::checksum::{fold, pseudo_header_v4, sum};
use packet::PacketBatch;
use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

pub struct UDPIPEncapClass;

const PROTO_UDP: u8 = 17;
const HEADERS: usize = 28;

#[derive(Clone, Copy)]
struct Settings {
    fixed: FixedFields,
    dst: Dst,
    sport: u16,
    dport: u16,
}

impl ElementClass for UDPIPEncapClass {
    fn name(&self) -> &'static str {
        "UDPIPEncap"
    }
    fn port_count(&self) -> PortCount {
        PortCount::parse("1/1")
    }
    fn build(&self, args: &mut Args, cx: &BuildContext) -> Result<Arc<dyn ElementSpec>, ConfigError> {
        let e = |m: String| cx.error(m);
        let src = args.required::<Ipv4Addr>("SRC").map_err(e)?;
        let sport = args.required::<PortArg>("SPORT").map_err(e)?.0;
        let dst = args.required::<Dst>("DST").map_err(e)?;
        let dport = args.required::<PortArg>("DPORT").map_err(e)?.0;
        let checksum = args.positional::<bool>("CHECKSUM").map_err(e)?.unwrap_or(true);
        args.finish().map_err(e)?;
        let fixed = FixedFields {
            tos: 0,
            frag: 0,
            ttl: 250,
            proto: PROTO_UDP,
            src: src.octets(),
        };
        Ok(Arc::new(UDPIPEncapSpec {
            shared: Arc::new(EncapState::new(Settings {
                fixed,
                dst,
                sport,
                dport,
            })),
            checksum,
            drops: Arc::new(AtomicU64::new(0)),
        }))
    }
}

struct UDPIPEncapSpec {
    shared: Arc<EncapState<Settings>>,
    checksum: bool,
    drops: Arc<AtomicU64>,
}

impl ElementSpec for UDPIPEncapSpec {
    fn instantiate(&self, _w: WorkerInfo) -> Box<dyn Element> {
        let (generation, settings) = self.shared.snapshot();
        Box::new(UDPIPEncap {
            shared: self.shared.clone(),
            drops: self.drops.clone(),
            checksum: self.checksum,
            generation,
            settings,
        })
    }
    fn handlers(&self) -> Vec<HandlerInfo> {
        vec![
            HandlerInfo::read_write("src").reconfiguring(0, "SRC"),
            HandlerInfo::read_write("sport").reconfiguring(1, "SPORT"),
            HandlerInfo::read_write("dst").reconfiguring(2, "DST"),
            HandlerInfo::read_write("dport").reconfiguring(3, "DPORT"),
            HandlerInfo::read("drops"),
        ]
    }
    fn read_handler(&self, name: &str) -> Option<String> {
        let s = || self.shared.read();
        match name {
            "src" => Some(Ipv4Addr::from(s().fixed.src).to_string()),
            "sport" => Some(s().sport.to_string()),
            "dst" => Some(s().dst.to_string()),
            "dport" => Some(s().dport.to_string()),
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
            "sport" => Some(parse_value::<PortArg>("SPORT", value).map(|p| s.write(|st| st.sport = p.0))),
            "dst" => Some(parse_value::<Dst>("DST", value).map(|d| s.write(|st| st.dst = d))),
            "dport" => Some(parse_value::<PortArg>("DPORT", value).map(|p| s.write(|st| st.dport = p.0))),
            _ => None,
        }
    }
}

struct UDPIPEncap {
    shared: Arc<EncapState<Settings>>,
    drops: Arc<AtomicU64>,
    checksum: bool,
    /// This worker's copy of the settings, as of `generation`.
    generation: u64,
    settings: Settings,
}

impl Element for UDPIPEncap {
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, out: &mut Outputs<'_>, _cx: &mut Context<'_>) {
        if self.shared.generation() != self.generation {
            (self.generation, self.settings) = self.shared.snapshot();
        }
        let Settings {
            fixed,
            dst,
            sport,
            dport,
        } = self.settings;
        let checksum = self.checksum;
        let mut id = self.shared.take_ids(batch.len());
        let mut drops = 0;
        out.route_each(batch, |p| {
            let len = p.len() + HEADERS;
            if len > MAX_IP_LEN || !p.try_push(HEADERS) {
                drops += 1;
                return DROP;
            }
            let to = dst.resolve(p.anno().dst_ip());
            let ulen = (len - 20) as u16;
            let ip = fixed.header(len as u16, id, to);
            id = id.wrapping_add(1);
            let d = p.data_mut();
            d[..20].copy_from_slice(&ip);
            d[20..22].copy_from_slice(&sport.to_be_bytes());
            d[22..24].copy_from_slice(&dport.to_be_bytes());
            d[24..26].copy_from_slice(&ulen.to_be_bytes());
            d[26..28].fill(0);
            if checksum {
                let acc = sum(&d[20..], pseudo_header_v4(fixed.src, to, PROTO_UDP, ulen));
                let c = match !fold(acc) {
                    0 => 0xffff,
                    c => c,
                };
                d[26..28].copy_from_slice(&c.to_be_bytes());
            }
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
    use super::super::testutil::{cksum, ip_header};
    use super::*;
    use crate::testing::{build_error, Harness};
    use packet::Packet;

    /// The UDP checksum the test computes itself: pseudo-header, then the UDP bytes.
    fn udp_cksum(src: [u8; 4], dst: [u8; 4], udp: &[u8]) -> u16 {
        let mut v = src.to_vec();
        v.extend_from_slice(&dst);
        v.extend_from_slice(&[0, 17]);
        v.extend_from_slice(&(udp.len() as u16).to_be_bytes());
        v.extend_from_slice(udp);
        cksum(&v)
    }

    #[test]
    fn prepends_ip_and_udp_headers_with_the_checksum() {
        let mut h = Harness::new(&UDPIPEncapClass, "1.0.0.1, 1234, 2.0.0.2, 5678", 1, 1);
        let payload = b"hello";
        let out = h.push(0, vec![Packet::from_slice(payload), Packet::from_slice(payload)]);
        let mut want = ip_header(0, 33, 0, 0, 250, 17, [1, 0, 0, 1], [2, 0, 0, 2]);
        // Ports 1234 = 0x04d2, 5678 = 0x162e; length 13.
        let mut udp = vec![0x04, 0xd2, 0x16, 0x2e, 0x00, 0x0d, 0, 0];
        udp.extend_from_slice(payload);
        let c = udp_cksum([1, 0, 0, 1], [2, 0, 0, 2], &udp);
        udp[6..8].copy_from_slice(&c.to_be_bytes());
        want.extend_from_slice(&udp);
        let p = &out[0][0];
        assert_eq!(p.data(), &want[..]);
        assert_eq!(p.anno().dst_ip(), [2, 0, 0, 2]);
        assert_eq!(p.network_header_offset(), Some(0));
        assert_eq!(p.transport_header_offset(), Some(20));
        // The second packet differs in its IP ID and IP checksum only.
        let mut second = ip_header(0, 33, 1, 0, 250, 17, [1, 0, 0, 1], [2, 0, 0, 2]);
        second.extend_from_slice(&udp);
        assert_eq!(out[0][1].data(), &second[..]);
    }

    #[test]
    fn a_zero_checksum_is_sent_as_ffff() {
        // Pseudo-header words 0x0000 0x0001 0x0000 0x0000 0x0011 0x000a, UDP header
        // words with ports 0 and the length 0x000a, and a payload word W: the sum is
        // 0x0001 + 0x0011 + 0x000a + 0x000a + W; W = 0xffff - 0x0026 = 0xffd9 makes it
        // 0xffff, whose complement is 0.
        let mut h = Harness::new(&UDPIPEncapClass, "0.0.0.1, 0, 0.0.0.0, 0", 1, 1);
        let out = h.push_bytes(0, &[0xff, 0xd9]);
        let d = out[0][0].data();
        assert_eq!(&d[20..], &[0, 0, 0, 0, 0, 0x0a, 0xff, 0xff, 0xff, 0xd9]);
    }

    #[test]
    fn no_checksum_dst_anno_and_empty_payload() {
        let mut h = Harness::new(&UDPIPEncapClass, "10.0.0.1, 53, DST_ANNO, 1024, false", 1, 1);
        let mut p = Packet::from_slice(&[]);
        p.set_dst_ip_anno([10, 0, 0, 9]);
        let out = h.push(0, vec![p]);
        let mut want = ip_header(0, 28, 0, 0, 250, 17, [10, 0, 0, 1], [10, 0, 0, 9]);
        want.extend_from_slice(&[0, 53, 0x04, 0x00, 0, 8, 0, 0]);
        assert_eq!(out[0][0].data(), &want[..]);
    }

    #[test]
    fn handlers_change_addresses_and_ports() {
        let mut h = Harness::new(&UDPIPEncapClass, "1.0.0.1, 1, 2.0.0.2, 2", 1, 1);
        for (name, value) in [
            ("src", "9.9.9.9"),
            ("sport", "7"),
            ("dst", "8.8.8.8"),
            ("dport", "6"),
        ] {
            h.write(name, value).unwrap();
            assert_eq!(h.read(name), value);
        }
        let out = h.push_bytes(0, &[]);
        let mut want = ip_header(0, 28, 0, 0, 250, 17, [9, 9, 9, 9], [8, 8, 8, 8]);
        let mut udp = vec![0, 7, 0, 6, 0, 8, 0, 0];
        let c = udp_cksum([9, 9, 9, 9], [8, 8, 8, 8], &udp);
        udp[6..8].copy_from_slice(&c.to_be_bytes());
        want.extend_from_slice(&udp);
        assert_eq!(out[0][0].data(), &want[..]);
        assert_eq!(
            h.write("sport", "65536").unwrap_err(),
            "SPORT expects port number or service name"
        );
        // Service names, as Click's IPPortArg takes them.
        h.write("dport", "domain").unwrap();
        assert_eq!(h.read("dport"), "53");
        assert_eq!(h.read("drops"), "0");
    }

    #[test]
    fn too_long_is_dropped_and_bad_arguments() {
        let mut h = Harness::new(&UDPIPEncapClass, "1.0.0.1, 1, 2.0.0.2, 2", 1, 1);
        let out = h.push(0, vec![Packet::zeroed(65508), Packet::zeroed(65507)]);
        assert_eq!(out[0].len(), 1);
        assert_eq!(out[0][0].len(), 65535);
        assert_eq!(&out[0][0].data()[24..26], &[0xff, 0xeb]);
        assert_eq!(h.read("drops"), "1");
        let err = |c: &str| build_error(&UDPIPEncapClass, c, 1, 1);
        assert_eq!(
            err("1.0.0.1, 1, 2.0.0.2"),
            "e :: UDPIPEncap: missing mandatory DPORT argument"
        );
        assert_eq!(
            err("1.0.0.1, x, 2.0.0.2, 2"),
            "e :: UDPIPEncap: SPORT expects port number or service name"
        );
        let h = Harness::new(&UDPIPEncapClass, "1.0.0.1, 79, 1.0.0.1, ssh", 1, 1);
        assert_eq!(h.read("dport"), "22");
        assert_eq!(
            err("1.0.0.1, 1, 2.0.0.2, 2, maybe"),
            "e :: UDPIPEncap: CHECKSUM expects bool"
        );
    }
}
