//! `ICMPPingEncap(SRC, DST [, keyword IDENTIFIER])`: makes each packet the data of an
//! ICMP echo request from SRC to DST, as Click's element of the same name.
//!
//! The IPv4 header: TOS 0, no fragment bits, TTL 255, protocol ICMP, the IP ID a
//! sequence number. The ICMP header: type 8 (echo), code 0, identifier IDENTIFIER (0
//! unless given), the same sequence number, and the checksum over the ICMP header and
//! data. The sequence number starts at 1 and goes up by one a packet, skipping 0 (after
//! 65535 comes 1), as Click's; the numbers are consecutive over all workers (a batch
//! takes as many as it has packets). The destination IP annotation is set to DST and
//! the network header to the IPv4 header. A packet that would exceed 65535 bytes is
//! dropped and counted in `drops`. Handlers `src` and `dst` read and write the
//! addresses.

use super::encap::{parse_value, FixedFields, MAX_IP_LEN};
use crate::args::Args;
use crate::element::*;
use crate::elements::shared::SharedSettings;
use crate::error::ConfigError;
use packet::checksum::checksum;
use packet::PacketBatch;
use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

pub struct ICMPPingEncapClass;

const PROTO_ICMP: u8 = 1;
const ICMP_ECHO: u8 = 8;
/// An IPv4 header and an ICMP echo header.
const HEADERS: usize = 28;
/// Sequence numbers run 1..=65535: Click's counter steps from 0xFFFF over 0 to 1.
const SEQUENCES: u64 = 0xffff;

#[derive(Clone, Copy)]
struct Settings {
    src: [u8; 4],
    dst: [u8; 4],
}

impl ElementClass for ICMPPingEncapClass {
    fn name(&self) -> &'static str {
        "ICMPPingEncap"
    }
    fn port_count(&self) -> PortCount {
        PortCount::parse("1/1")
    }
    fn build(&self, args: &mut Args, cx: &BuildContext) -> Result<Arc<dyn ElementSpec>, ConfigError> {
        let e = |m: String| cx.error(m);
        let src = args.required::<Ipv4Addr>("SRC").map_err(e)?;
        let dst = args.required::<Ipv4Addr>("DST").map_err(e)?;
        let identifier = args.keyword::<u16>("IDENTIFIER").map_err(e)?.unwrap_or(0);
        args.finish().map_err(e)?;
        Ok(Arc::new(Spec {
            shared: Arc::new(Shared {
                settings: SharedSettings::new(Settings {
                    src: src.octets(),
                    dst: dst.octets(),
                }),
                sent: AtomicU64::new(0),
                drops: AtomicU64::new(0),
            }),
            identifier,
        }))
    }
}

struct Shared {
    settings: SharedSettings<Settings>,
    /// Sequence numbers given out so far (the next packet's is this mod 65535, plus 1).
    sent: AtomicU64,
    drops: AtomicU64,
}

struct Spec {
    shared: Arc<Shared>,
    identifier: u16,
}

impl ElementSpec for Spec {
    fn instantiate(&self, _w: WorkerInfo) -> Box<dyn Element> {
        let (generation, settings) = self.shared.settings.snapshot();
        Box::new(ICMPPingEncap {
            shared: self.shared.clone(),
            identifier: self.identifier,
            generation,
            settings,
        })
    }
    fn handlers(&self) -> Vec<HandlerInfo> {
        vec![
            HandlerInfo::read_write("src"),
            HandlerInfo::read_write("dst"),
            HandlerInfo::read("drops"),
        ]
    }
    fn read_handler(&self, name: &str) -> Option<String> {
        let s = self.shared.settings.read();
        match name {
            "src" => Some(Ipv4Addr::from(s.src).to_string()),
            "dst" => Some(Ipv4Addr::from(s.dst).to_string()),
            "drops" => Some(self.shared.drops.load(Ordering::Relaxed).to_string()),
            _ => None,
        }
    }
    fn write_handler(&self, name: &str, value: &str) -> Option<Result<(), String>> {
        let s = &self.shared.settings;
        match name {
            "src" => Some(parse_value::<Ipv4Addr>("SRC", value).map(|a| s.write(|st| st.src = a.octets()))),
            "dst" => Some(parse_value::<Ipv4Addr>("DST", value).map(|a| s.write(|st| st.dst = a.octets()))),
            _ => None,
        }
    }
}

struct ICMPPingEncap {
    shared: Arc<Shared>,
    identifier: u16,
    /// This worker's copy of the settings, as of `generation`.
    generation: u64,
    settings: Settings,
}

impl Element for ICMPPingEncap {
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, out: &mut Outputs<'_>, _cx: &mut Context<'_>) {
        if self.shared.settings.generation() != self.generation {
            (self.generation, self.settings) = self.shared.settings.snapshot();
        }
        let Settings { src, dst } = self.settings;
        let fixed = FixedFields {
            tos: 0,
            frag: 0,
            ttl: 255,
            proto: PROTO_ICMP,
            src,
        };
        let [i0, i1] = self.identifier.to_be_bytes();
        let mut n = self.shared.sent.fetch_add(batch.len() as u64, Ordering::Relaxed);
        let mut drops = 0;
        out.route_each(batch, |p| {
            let len = p.len() + HEADERS;
            if len > MAX_IP_LEN || !p.try_push(HEADERS) {
                drops += 1;
                return DROP;
            }
            let seq = (n % SEQUENCES + 1) as u16;
            n += 1;
            let [s0, s1] = seq.to_be_bytes();
            let d = p.data_mut();
            d[..20].copy_from_slice(&fixed.header(len as u16, seq, dst));
            d[20..28].copy_from_slice(&[ICMP_ECHO, 0, 0, 0, i0, i1, s0, s1]);
            let c = checksum(&d[20..]);
            d[22..24].copy_from_slice(&c.to_be_bytes());
            p.set_network_header(0, 20);
            p.set_dst_ip_anno(dst);
            0
        });
        if drops > 0 {
            self.shared.drops.fetch_add(drops, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::checkipheader::CHECK_IP_HEADER;
    use super::super::checktransport::CHECK_ICMP_HEADER;
    use super::super::testutil::{cksum, ip_header};
    use super::*;
    use crate::elements::icmpping::ICMP_PING_RESPONDER;
    use crate::testing::{build_error, Harness};
    use packet::Packet;

    /// The echo request ICMPPingEncap should make of `data`, built by hand.
    fn request(src: [u8; 4], dst: [u8; 4], ident: u16, seq: u16, data: &[u8]) -> Vec<u8> {
        let mut m = vec![8, 0, 0, 0];
        m.extend_from_slice(&ident.to_be_bytes());
        m.extend_from_slice(&seq.to_be_bytes());
        m.extend_from_slice(data);
        let c = cksum(&m);
        m[2..4].copy_from_slice(&c.to_be_bytes());
        let mut b = ip_header(0, (20 + m.len()) as u16, seq, 0, 255, 1, src, dst);
        b.extend_from_slice(&m);
        b
    }

    #[test]
    fn encapsulates_in_an_echo_request_with_rising_sequence_numbers() {
        let mut h = Harness::new(&ICMPPingEncapClass, "1.0.0.1, 2.0.0.2, IDENTIFIER 0x1234", 1, 1);
        let out = h.push(
            0,
            vec![
                Packet::from_slice(b"hello"),
                Packet::from_slice(b""),
                Packet::from_slice(b"odd"),
            ],
        );
        let (a, b) = ([1, 0, 0, 1], [2, 0, 0, 2]);
        let want = [
            request(a, b, 0x1234, 1, b"hello"),
            request(a, b, 0x1234, 2, b""),
            request(a, b, 0x1234, 3, b"odd"),
        ];
        assert_eq!(out[0].len(), 3);
        for (p, w) in out[0].iter().zip(&want) {
            assert_eq!(p.data(), &w[..]);
            assert_eq!(p.network_header_offset(), Some(0));
            assert_eq!(p.network_header_length(), 20);
            assert_eq!(p.anno().dst_ip(), b);
        }
        // The next batch goes on from 4; another worker's batch takes the next ones.
        let out = h.push(0, vec![Packet::from_slice(b"x")]);
        assert_eq!(out[0][0].data(), &request(a, b, 0x1234, 4, b"x")[..]);
        let mut other = h.another_worker();
        let out = other.push(0, vec![Packet::from_slice(b"x")]);
        assert_eq!(out[0][0].data(), &request(a, b, 0x1234, 5, b"x")[..]);
    }

    #[test]
    fn the_sequence_number_skips_zero() {
        let mut h = Harness::new(&ICMPPingEncapClass, "1.0.0.1, 2.0.0.2", 1, 1);
        let seqs = |h: &mut Harness, n: usize| -> Vec<u16> {
            let out = h.push(0, (0..n).map(|_| Packet::from_slice(b"")).collect());
            out[0]
                .iter()
                .map(|p| u16::from_be_bytes([p.data()[26], p.data()[27]]))
                .collect()
        };
        // 65,533 packets: sequence numbers 1 to 65,533.
        for _ in 0..65_533 / 1_000 {
            seqs(&mut h, 1_000);
        }
        seqs(&mut h, 533);
        assert_eq!(seqs(&mut h, 4), vec![0xfffe, 0xffff, 1, 2]);
    }

    #[test]
    fn handlers_change_the_addresses_and_oversize_packets_are_dropped() {
        let mut h = Harness::new(&ICMPPingEncapClass, "1.0.0.1, 2.0.0.2", 1, 1);
        assert_eq!(h.read("src"), "1.0.0.1");
        assert_eq!(h.read("dst"), "2.0.0.2");
        h.write("src", "10.0.0.1").unwrap();
        h.write("dst", "10.0.0.2\n").unwrap();
        assert_eq!(
            h.write("dst", "10.0.0"),
            Err("DST expects IP address".to_string())
        );
        let out = h.push(0, vec![Packet::from_slice(b"p")]);
        assert_eq!(
            out[0][0].data(),
            &request([10, 0, 0, 1], [10, 0, 0, 2], 0, 1, b"p")[..]
        );
        // 65,507 bytes of data make a 65,535-byte packet; one more is too long.
        let out = h.push(0, vec![Packet::zeroed(65_508), Packet::zeroed(65_507)]);
        assert_eq!(out[0].len(), 1);
        assert_eq!(out[0][0].len(), 65_535);
        assert_eq!(h.read("drops"), "1");
        // The dropped packet took no sequence number: the big one is number 2.
        assert_eq!(&out[0][0].data()[26..28], &[0, 2]);
    }

    #[test]
    fn click_icmppingencap_testie() {
        // test/icmp/ICMPPingEncap-01.testie: two empty packets through
        // ICMPPingEncap(1.0.0.1, 2.0.0.2, IDENTIFIER 3) -> CheckICMPHeader ->
        // CheckIPHeader -> ICMPPingResponder come out as echo replies 2.0.0.2 > 1.0.0.1.
        let mut encap = Harness::new(&ICMPPingEncapClass, "1.0.0.1, 2.0.0.2, IDENTIFIER 3", 1, 1);
        let mut check_icmp = Harness::new(&CHECK_ICMP_HEADER, "", 1, 1);
        let mut check_ip = Harness::new(&CHECK_IP_HEADER, "", 1, 1);
        let mut responder = Harness::new(&ICMP_PING_RESPONDER, "", 1, 1);
        for seq in 1..=2u16 {
            let mut pkts = encap.push(0, vec![Packet::from_slice(b"")]).remove(0);
            for h in [&mut check_icmp, &mut check_ip, &mut responder] {
                pkts = h.push(0, pkts).remove(0);
            }
            assert_eq!(pkts.len(), 1, "packet {} lost", seq);
            let d = pkts[0].data();
            assert_eq!(
                &d[12..20],
                &[2, 0, 0, 2, 1, 0, 0, 1],
                "echo reply 2.0.0.2 > 1.0.0.1"
            );
            assert_eq!(d[9], 1);
            assert_eq!(&d[20..22], &[0, 0], "ICMP echo reply");
            assert_eq!(&d[24..28], &[0, 3, 0, seq as u8], "identifier and sequence kept");
            assert_eq!(cksum(&d[20..]), 0);
            assert_eq!(cksum(&d[..20]), 0);
        }
        assert_eq!(check_icmp.read("drops"), "0");
    }

    #[test]
    fn config_errors() {
        let err = |c| build_error(&ICMPPingEncapClass, c, 1, 1);
        assert_eq!(err(""), "e :: ICMPPingEncap: missing mandatory SRC argument");
        assert_eq!(
            err("1.0.0.1"),
            "e :: ICMPPingEncap: missing mandatory DST argument"
        );
        assert_eq!(
            err("1.0.0.1, 2.0.0"),
            "e :: ICMPPingEncap: DST expects IP address"
        );
        assert_eq!(
            err("1.0.0.1, 2.0.0.2, IDENTIFIER 65536"),
            "e :: ICMPPingEncap: IDENTIFIER expects unsigned integer"
        );
        assert_eq!(
            err("1.0.0.1, 2.0.0.2, 3"),
            "e :: ICMPPingEncap: too many arguments"
        );
    }
}
