//! `ICMPError(SRC, TYPE [, CODE, BADADDRS, I<keywords> MTU, PMTU, SET_FIX_ANNO])`:
//! answers each input IP packet with an ICMP error addressed to its source, as Click's
//! ICMPError does.
//!
//! No error is generated (the input is dropped) for: packets without a network header;
//! ICMP error messages (or ICMP packets too short to tell); destinations that are
//! 255.255.255.255, multicast, or in BADADDRS; link-level broadcasts or multicasts
//! (packet type annotation); sources that are not valid unicast (broadcast, multicast,
//! BADADDRS, net 0, net 127, class E); fragments other than the first; redirects
//! about source-routed packets.
//!
//! The error is an IPv4 packet starting at its IP header: TOS 0, ID from a counter
//! shared by every ICMPError (starting at 1), no fragment bits, TTL 200, protocol 1,
//! source SRC, destination the offending source, plus a reversed copy of a recorded
//! source route (RFC 1812 4.3.2.6). The ICMP part quotes the offending packet from its
//! network header on, as much as fits in MTU bytes (default 576). Parameter-problem
//! code 0 carries the pointer from the ICMP_PARAMPROB annotation; redirects carry the
//! gateway from the destination IP annotation; needfrag carries PMTU as next-hop MTU.
//! The result has the destination IP annotation set to its destination, the
//! FIX_IP_SRC annotation set (unless SET_FIX_ANNO is false), a fresh timestamp, and
//! its network header annotation set. Handlers `src`, `mtu` and `pmtu` read and write
//! those settings. Checked against Click 2.x `elements/ip/icmperror.cc` (Args-based
//! version with MTU/PMTU/SET_FIX_ANNO and reversed source routes).

use super::IpList;
use crate::args::{Args, FromArg};
use crate::element::*;
use crate::error::ConfigError;
use packet::anno::{PacketType, FIX_IP_SRC_ANNO_OFFSET, ICMP_PARAMPROB_ANNO_OFFSET};
use packet::views::icmp::{is_error_type, ICMP_PARAMPROB, ICMP_REDIRECT, ICMP_UNREACH};
use packet::views::{IcmpHeader, Ipv4Header};
use packet::{Packet, PacketBatch, Timestamp};
use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

/// Click's ICMPError keeps one `static` ID counter for all ICMPError elements.
static NEXT_ID: AtomicU32 = AtomicU32::new(1);

const IPOPT_EOL: u8 = 0;
const IPOPT_NOP: u8 = 1;
const IPOPT_LSRR: u8 = 0x83;
const IPOPT_SSRR: u8 = 0x89;
const UNREACH_NEEDFRAG: u8 = 4;
const PARAMPROB_ERRATPTR: u8 = 0;

/// Click's ICMP type names (`NameInfo`'s `T_ICMP_TYPE` table).
pub(crate) const TYPE_NAMES: [(&str, u8); 15] = [
    ("echo-reply", 0),
    ("unreachable", 3),
    ("sourcequench", 4),
    ("redirect", 5),
    ("echo", 8),
    ("routeradvert", 9),
    ("routersolicit", 10),
    ("timeexceeded", 11),
    ("parameterproblem", 12),
    ("timestamp", 13),
    ("timestamp-reply", 14),
    ("inforeq", 15),
    ("inforeq-reply", 16),
    ("maskreq", 17),
    ("maskreq-reply", 18),
];

/// Code names per type (Click's `IPNameInfo` tables).
fn code_by_name(icmp_type: u8, name: &str) -> Option<u8> {
    let table: &[(&str, u8)] = match icmp_type {
        3 => &[
            ("net", 0),
            ("host", 1),
            ("protocol", 2),
            ("port", 3),
            ("needfrag", 4),
            ("srcroutefail", 5),
            ("netunknown", 6),
            ("hostunknown", 7),
            ("isolated", 8),
            ("netprohibited", 9),
            ("hostprohibited", 10),
            ("tosnet", 11),
            ("toshost", 12),
            ("filterprohibited", 13),
            ("hostprecedence", 14),
            ("precedencecutoff", 15),
        ],
        5 => &[("net", 0), ("host", 1), ("tosnet", 2), ("toshost", 3)],
        11 => &[("transit", 0), ("reassembly", 1)],
        12 => &[("erroratptr", 0), ("missingopt", 1), ("length", 2)],
        _ => &[],
    };
    table.iter().find(|(n, _)| *n == name).map(|&(_, c)| c)
}

pub struct ICMPErrorClass;

impl ElementClass for ICMPErrorClass {
    fn name(&self) -> &'static str {
        "ICMPError"
    }
    fn port_count(&self) -> PortCount {
        PortCount::parse("1/1")
    }
    fn build(&self, args: &mut Args, cx: &BuildContext) -> Result<Arc<dyn ElementSpec>, ConfigError> {
        let e = |m: String| cx.error(m);
        let src = args.required::<Ipv4Addr>("SRC").map_err(e)?;
        let type_s = args.required::<String>("TYPE").map_err(e)?;
        let code_s = args.positional::<String>("CODE").map_err(e)?;
        let bad = args.positional::<IpList>("BADADDRS").map_err(e)?;
        let mtu = args.keyword::<u32>("MTU").map_err(e)?.unwrap_or(576);
        let pmtu = args.keyword::<u32>("PMTU").map_err(e)?.unwrap_or(0);
        let set_fix = args.keyword::<bool>("SET_FIX_ANNO").map_err(e)?.unwrap_or(true);
        args.finish().map_err(e)?;

        let t = match TYPE_NAMES.iter().find(|(n, _)| *n == type_s.trim()) {
            Some(&(_, v)) => v as i64,
            None => i64::from_arg(&type_s).ok_or_else(|| cx.error("TYPE expects ICMP type"))?,
        };
        if !(0..=255).contains(&t) {
            return Err(cx.error("ICMP type must be between 0 and 255"));
        }
        let t = t as u8;
        if !is_error_type(t) {
            return Err(cx.error(format!("ICMP type {} is not an error type", t)));
        }
        let code = match code_s {
            None => Some(0),
            Some(s) => match code_by_name(t, s.trim()) {
                Some(c) => Some(c as i64),
                None => i64::from_arg(&s),
            },
        };
        let Some(code) = code.filter(|c| (0..=255).contains(c)) else {
            return Err(cx.error("argument 2 takes ICMP code (integer between 0 and 255)"));
        };
        Ok(Arc::new(ICMPErrorSpec(Arc::new(Config {
            src: AtomicU32::new(u32::from_ne_bytes(src.octets())),
            icmp_type: t,
            code: code as u8,
            bad_addrs: bad.map(|b| b.0).unwrap_or_default(),
            mtu: AtomicU32::new(mtu),
            pmtu: AtomicU32::new(pmtu),
            set_fix_anno: set_fix,
        }))))
    }
}

/// Configuration shared by every worker; `src`, `mtu` and `pmtu` are also handlers
/// (read and write, as in Click), so they are atomics read once per batch.
struct Config {
    /// The source address bytes in network order, packed native-endian.
    src: AtomicU32,
    icmp_type: u8,
    code: u8,
    bad_addrs: Vec<[u8; 4]>,
    mtu: AtomicU32,
    pmtu: AtomicU32,
    set_fix_anno: bool,
}

/// The handler-settable values, loaded once per batch.
#[derive(Clone, Copy)]
struct Params {
    src: [u8; 4],
    mtu: usize,
    /// Click stores PMTU as an unsigned int and writes its low 16 bits.
    pmtu: u16,
}

impl Config {
    fn params(&self) -> Params {
        Params {
            src: self.src.load(Ordering::Relaxed).to_ne_bytes(),
            mtu: self.mtu.load(Ordering::Relaxed) as usize,
            pmtu: self.pmtu.load(Ordering::Relaxed) as u16,
        }
    }
}

struct ICMPErrorSpec(Arc<Config>);

impl ElementSpec for ICMPErrorSpec {
    fn instantiate(&self, _w: WorkerInfo) -> Box<dyn Element> {
        Box::new(ICMPError(self.0.clone()))
    }
    fn handlers(&self) -> Vec<HandlerInfo> {
        vec![
            HandlerInfo::read_write("src"),
            HandlerInfo::read_write("mtu"),
            HandlerInfo::read_write("pmtu"),
        ]
    }
    fn read_handler(&self, name: &str) -> Option<String> {
        let c = &self.0;
        match name {
            "src" => Some(super::ip_text(c.src.load(Ordering::Relaxed).to_ne_bytes())),
            "mtu" => Some(c.mtu.load(Ordering::Relaxed).to_string()),
            "pmtu" => Some(c.pmtu.load(Ordering::Relaxed).to_string()),
            _ => None,
        }
    }
    fn write_handler(&self, name: &str, value: &str) -> Option<Result<(), String>> {
        let c = &self.0;
        match name {
            "src" => Some(match Ipv4Addr::from_arg(value) {
                Some(a) => {
                    c.src.store(u32::from_ne_bytes(a.octets()), Ordering::Relaxed);
                    Ok(())
                }
                None => Err(format!("expected {}", Ipv4Addr::WHAT)),
            }),
            "mtu" | "pmtu" => Some(match u32::from_arg(value) {
                Some(v) => {
                    let slot = if name == "mtu" { &c.mtu } else { &c.pmtu };
                    slot.store(v, Ordering::Relaxed);
                    Ok(())
                }
                None => Err(format!("expected {}", u32::WHAT)),
            }),
            _ => None,
        }
    }
}

struct ICMPError(Arc<Config>);

impl Config {
    /// Not limited broadcast, not class D, not a configured bad address.
    fn unicast(&self, a: [u8; 4]) -> bool {
        a != [255; 4] && a[0] & 0xf0 != 0xe0 && !self.bad_addrs.contains(&a)
    }

    /// RFC 1812 5.3.7 / 4.2.2.11 / 4.2.3.1 source validity.
    fn valid_source(&self, a: [u8; 4]) -> bool {
        self.unicast(a) && a[0] != 0 && a[0] != 127 && a[0] & 0xf0 != 0xf0
    }

    /// Builds the error for `p`, or None when no error may be sent.
    fn make_error(&self, p: &Packet, prm: Params, now: Timestamp) -> Option<Packet> {
        let nh = p.network_header()?;
        let ip = Ipv4Header::new_checked(nh)?;
        let hlen = ip.header_len();

        // Don't reply to ICMP error messages (RFC 1812 4.3.2.7).
        if ip.protocol() == 1 {
            if hlen + 4 > p.len() {
                return None;
            }
            match nh.get(hlen) {
                Some(&t) if !is_error_type(t) => {}
                _ => return None,
            }
        }
        if !self.unicast(ip.dst()) {
            return None;
        }
        let pt = p.anno().packet_type;
        if pt == PacketType::Broadcast || pt == PacketType::Multicast {
            return None;
        }
        if !self.valid_source(ip.src()) {
            return None;
        }
        if !ip.is_first_fragment() {
            return None;
        }
        let mut route = source_route(nh, hlen);
        if let Some(r) = &route {
            if self.icmp_type == ICMP_REDIRECT {
                return None;
            }
            // A parameter problem about the source route itself: leave the route out.
            let ptr = p.anno().u8_at(ICMP_PARAMPROB_ANNO_OFFSET) as usize;
            if self.icmp_type == ICMP_PARAMPROB
                && self.code == PARAMPROB_ERRATPTR
                && r.start <= ptr
                && ptr < r.start + r.len
            {
                route = None;
            }
        }

        // Reversed source route option (RFC 1812 4.3.2.6).
        let mut opts = [0u8; 40];
        let mut opts_len = 0;
        if let Some(r) = &route {
            let o = &nh[r.start..r.start + r.len];
            let olen = o[2] as usize - 1;
            opts[0] = o[0];
            opts[1] = olen as u8;
            opts[2] = 4;
            opts[olen] = IPOPT_EOL;
            // Recorded addresses (before the pointer), last first.
            let mut w = 3;
            let mut rd = o[2] as isize - 5;
            while rd >= 3 {
                let r = rd as usize;
                opts[w..w + 4].copy_from_slice(&o[r..r + 4]);
                w += 4;
                rd -= 4;
            }
            opts_len = (olen + 3) & !3;
        }
        let ip_hl = 20 + opts_len;
        let hdrs = ip_hl + 8;
        let xlen = prm.mtu.saturating_sub(hdrs).min(nh.len());
        let total = hdrs + xlen;

        let mut q = Packet::alloc(total);
        {
            let d = q.data_mut();
            let mut h = Ipv4Header::new_checked(&mut d[..ip_hl])?;
            h.set_version_ihl(4, (ip_hl / 4) as u8);
            h.set_tos(0);
            h.set_total_len(total as u16);
            h.set_ident(NEXT_ID.fetch_add(1, Ordering::Relaxed) as u16);
            h.set_frag_field(0);
            h.set_ttl(200);
            h.set_protocol(1);
            h.set_checksum(0);
            h.set_src(prm.src);
            h.set_dst(ip.src());
            h.options_mut().copy_from_slice(&opts[..opts_len]);
            h.fill_checksum();

            let mut icmp = IcmpHeader::new_checked(&mut d[ip_hl..])?;
            icmp.set_icmp_type(self.icmp_type);
            icmp.set_code(self.code);
            icmp.set_rest(0);
            if self.icmp_type == ICMP_PARAMPROB && self.code == PARAMPROB_ERRATPTR {
                icmp.set_pointer(p.anno().u8_at(ICMP_PARAMPROB_ANNO_OFFSET));
            }
            if self.icmp_type == ICMP_REDIRECT {
                icmp.set_gateway(p.anno().dst_ip());
            }
            if self.icmp_type == ICMP_UNREACH && self.code == UNREACH_NEEDFRAG {
                icmp.set_next_mtu(prm.pmtu);
            }
            icmp.payload_mut().copy_from_slice(&nh[..xlen]);
            icmp.fill_checksum();
        }
        let a = q.anno_mut();
        a.set_dst_ip(ip.src());
        a.set_u8_at(FIX_IP_SRC_ANNO_OFFSET, self.set_fix_anno as u8);
        a.timestamp = now;
        q.set_network_header(0, ip_hl);
        Some(q)
    }
}

/// Where a usable loose or strict source route option sits in the header.
struct Route {
    start: usize,
    len: usize,
}

/// Finds a loose/strict source route option whose pointer is a multiple of 4, at least
/// 4 and within the option (Click's `valid_source_route`).
fn source_route(nh: &[u8], hlen: usize) -> Option<Route> {
    let hlen = hlen.min(nh.len());
    let mut i = 20;
    while i < hlen {
        let t = nh[i];
        if t == IPOPT_NOP {
            i += 1;
            continue;
        }
        if t == IPOPT_EOL || i + 1 >= hlen {
            return None;
        }
        let xlen = nh[i + 1] as usize;
        if xlen < 2 || i + xlen > hlen {
            return None;
        }
        if (t == IPOPT_LSRR || t == IPOPT_SSRR) && xlen >= 3 {
            let ptr = nh[i + 2] as usize;
            if ptr >= 4 && ptr & 3 == 0 && ptr <= xlen + 1 {
                return Some(Route { start: i, len: xlen });
            }
        }
        i += xlen;
    }
    None
}

impl Element for ICMPError {
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, out: &mut Outputs<'_>, cx: &mut Context<'_>) {
        let now = cx.now();
        let prm = self.0.params();
        for p in batch.drain() {
            if let Some(q) = self.0.make_error(&p, prm, now) {
                out.push(0, q);
            }
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::super::testutil::{cksum, fix_ip_cksum, ip_header};
    use super::*;
    use crate::testing::{build_error, Harness};
    use std::sync::{Mutex, MutexGuard};

    /// The ID counter is process-wide (as in Click): tests that predict IDs hold this.
    static ID_LOCK: Mutex<()> = Mutex::new(());

    pub(crate) fn lock() -> MutexGuard<'static, ()> {
        ID_LOCK.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn next_id() -> u16 {
        NEXT_ID.load(Ordering::Relaxed) as u16
    }

    /// UDP 10.0.0.1:1234 -> 10.0.0.2:53 with `payload` bytes of data.
    fn udp(payload: usize) -> Vec<u8> {
        let len = 28 + payload;
        let mut b = ip_header(0, len as u16, 0xbeef, 0, 1, 17, [10, 0, 0, 1], [10, 0, 0, 2]);
        b.extend_from_slice(&[
            0x04,
            0xd2,
            0x00,
            0x35,
            ((len - 20) >> 8) as u8,
            (len - 20) as u8,
            0,
            0,
        ]);
        b.extend((0..payload).map(|i| i as u8));
        b
    }

    fn ip_packet(b: &[u8]) -> Packet {
        let mut p = Packet::from_slice(b);
        let hl = ((b[0] & 0xf) as usize) * 4;
        p.set_network_header(0, hl);
        p
    }

    /// The expected error, built field by field: IP header (TOS 0, TTL 200, ICMP) from
    /// `src` to `dst` with `opts`, then ICMP `ty`/`code`/`rest`, then `quote`.
    #[allow(clippy::too_many_arguments)]
    fn expected(
        id: u16,
        src: [u8; 4],
        dst: [u8; 4],
        opts: &[u8],
        ty: u8,
        code: u8,
        rest: [u8; 4],
        quote: &[u8],
    ) -> Vec<u8> {
        let hl = 20 + opts.len();
        let total = hl + 8 + quote.len();
        let mut v = vec![
            0x40 | (hl / 4) as u8,
            0,
            (total >> 8) as u8,
            total as u8,
            (id >> 8) as u8,
            id as u8,
            0,
            0,
            200,
            1,
            0,
            0,
        ];
        v.extend_from_slice(&src);
        v.extend_from_slice(&dst);
        v.extend_from_slice(opts);
        fix_ip_cksum(&mut v);
        let mut icmp = vec![ty, code, 0, 0];
        icmp.extend_from_slice(&rest);
        icmp.extend_from_slice(quote);
        let c = cksum(&icmp);
        icmp[2] = (c >> 8) as u8;
        icmp[3] = c as u8;
        v.extend_from_slice(&icmp);
        v
    }

    #[test]
    fn time_exceeded_quotes_the_whole_small_packet() {
        let _g = lock();
        let inp = udp(4);
        let mut h = Harness::new(&ICMPErrorClass, "192.168.0.1, timeexceeded", 1, 1);
        let id = next_id();
        let out = h.push(0, vec![ip_packet(&inp)]);
        let q = &out[0][0];
        let want = expected(id, [192, 168, 0, 1], [10, 0, 0, 1], &[], 11, 0, [0; 4], &inp);
        assert_eq!(q.data(), &want[..]);
        assert_eq!(q.len(), 60);
        assert_eq!(q.anno().dst_ip(), [10, 0, 0, 1]);
        assert_eq!(q.anno().u8_at(FIX_IP_SRC_ANNO_OFFSET), 1);
        assert!(!q.anno().timestamp.is_zero());
        assert_eq!(q.network_header_offset(), Some(0));
        assert_eq!(q.network_header_length(), 20);
        // The next error takes the next ID.
        let out = h.push(0, vec![ip_packet(&inp)]);
        assert_eq!(&out[0][0].data()[4..6], &id.wrapping_add(1).to_be_bytes());
    }

    #[test]
    fn quote_is_limited_by_mtu() {
        let _g = lock();
        let inp = udp(600 - 28);
        let mut h = Harness::new(&ICMPErrorClass, "192.168.0.1, unreachable, host", 1, 1);
        let id = next_id();
        let q = h.push(0, vec![ip_packet(&inp)]).remove(0).remove(0);
        assert_eq!(q.len(), 576);
        let want = expected(
            id,
            [192, 168, 0, 1],
            [10, 0, 0, 1],
            &[],
            3,
            1,
            [0; 4],
            &inp[..548],
        );
        assert_eq!(q.data(), &want[..]);

        let mut h = Harness::new(&ICMPErrorClass, "192.168.0.1, 3, 3, MTU 40", 1, 1);
        let id = next_id();
        let q = h.push(0, vec![ip_packet(&inp)]).remove(0).remove(0);
        let want = expected(id, [192, 168, 0, 1], [10, 0, 0, 1], &[], 3, 3, [0; 4], &inp[..12]);
        assert_eq!(q.data(), &want[..]);
    }

    #[test]
    fn needfrag_paramprob_redirect_particulars() {
        let _g = lock();
        let inp = udp(0);
        let mut h = Harness::new(
            &ICMPErrorClass,
            "192.168.0.1, unreachable, needfrag, PMTU 1500",
            1,
            1,
        );
        let id = next_id();
        let q = h.push(0, vec![ip_packet(&inp)]).remove(0).remove(0);
        let want = expected(
            id,
            [192, 168, 0, 1],
            [10, 0, 0, 1],
            &[],
            3,
            4,
            [0, 0, 0x05, 0xdc],
            &inp,
        );
        assert_eq!(q.data(), &want[..]);

        let mut p = ip_packet(&inp);
        p.anno_mut().set_u8_at(ICMP_PARAMPROB_ANNO_OFFSET, 9);
        let mut h = Harness::new(&ICMPErrorClass, "192.168.0.1, parameterproblem", 1, 1);
        let id = next_id();
        let q = h.push(0, vec![p]).remove(0).remove(0);
        let want = expected(
            id,
            [192, 168, 0, 1],
            [10, 0, 0, 1],
            &[],
            12,
            0,
            [9, 0, 0, 0],
            &inp,
        );
        assert_eq!(q.data(), &want[..]);

        // Code 1 (missingopt) carries no pointer.
        let mut p = ip_packet(&inp);
        p.anno_mut().set_u8_at(ICMP_PARAMPROB_ANNO_OFFSET, 9);
        let mut h = Harness::new(&ICMPErrorClass, "192.168.0.1, parameterproblem, missingopt", 1, 1);
        let id = next_id();
        let q = h.push(0, vec![p]).remove(0).remove(0);
        let want = expected(id, [192, 168, 0, 1], [10, 0, 0, 1], &[], 12, 1, [0; 4], &inp);
        assert_eq!(q.data(), &want[..]);

        let mut p = ip_packet(&inp);
        p.anno_mut().set_dst_ip([10, 0, 0, 254]);
        let mut h = Harness::new(
            &ICMPErrorClass,
            "192.168.0.1, redirect, host, SET_FIX_ANNO false",
            1,
            1,
        );
        let id = next_id();
        let q = h.push(0, vec![p]).remove(0).remove(0);
        let want = expected(
            id,
            [192, 168, 0, 1],
            [10, 0, 0, 1],
            &[],
            5,
            1,
            [10, 0, 0, 254],
            &inp,
        );
        assert_eq!(q.data(), &want[..]);
        assert_eq!(q.anno().u8_at(FIX_IP_SRC_ANNO_OFFSET), 0);
        assert_eq!(q.anno().dst_ip(), [10, 0, 0, 1]);
    }

    /// A UDP packet with a loose source route: pointer 12, recorded 1.1.1.1 and
    /// 2.2.2.2, then EOL (header 32 bytes).
    fn source_routed() -> Vec<u8> {
        let mut b = udp(0);
        b[0] = 0x48;
        b[3] = 40;
        b.splice(20..20, [0x83, 11, 12, 1, 1, 1, 1, 2, 2, 2, 2, 0]);
        fix_ip_cksum(&mut b);
        b
    }

    #[test]
    fn source_route_is_reversed_into_the_error() {
        let _g = lock();
        let inp = source_routed();
        let mut h = Harness::new(&ICMPErrorClass, "192.168.0.1, timeexceeded, transit", 1, 1);
        let id = next_id();
        let q = h.push(0, vec![ip_packet(&inp)]).remove(0).remove(0);
        let opts = [0x83, 11, 4, 2, 2, 2, 2, 1, 1, 1, 1, 0];
        let want = expected(id, [192, 168, 0, 1], [10, 0, 0, 1], &opts, 11, 0, [0; 4], &inp);
        assert_eq!(q.data(), &want[..]);
        assert_eq!(q.network_header_length(), 32);

        // A parameter problem pointing into the route leaves the route out.
        let mut p = ip_packet(&inp);
        p.anno_mut().set_u8_at(ICMP_PARAMPROB_ANNO_OFFSET, 22);
        let mut h = Harness::new(&ICMPErrorClass, "192.168.0.1, parameterproblem, erroratptr", 1, 1);
        let id = next_id();
        let q = h.push(0, vec![p]).remove(0).remove(0);
        let want = expected(
            id,
            [192, 168, 0, 1],
            [10, 0, 0, 1],
            &[],
            12,
            0,
            [22, 0, 0, 0],
            &inp,
        );
        assert_eq!(q.data(), &want[..]);

        // No redirect about a source-routed packet.
        let mut h = Harness::new(&ICMPErrorClass, "192.168.0.1, redirect", 1, 1);
        assert!(h.push(0, vec![ip_packet(&inp)])[0].is_empty());
    }

    #[test]
    fn no_error_cases() {
        let _g = lock();
        let mut h = Harness::new(
            &ICMPErrorClass,
            "192.168.0.1, unreachable, BADADDRS 10.0.0.255 10.9.9.9",
            1,
            1,
        );
        let with = |src: [u8; 4], dst: [u8; 4]| {
            let mut b = udp(0);
            b[12..16].copy_from_slice(&src);
            b[16..20].copy_from_slice(&dst);
            fix_ip_cksum(&mut b);
            b
        };
        let mut cases: Vec<Packet> = vec![
            ip_packet(&with([10, 0, 0, 1], [255, 255, 255, 255])),
            ip_packet(&with([10, 0, 0, 1], [224, 0, 0, 5])),
            ip_packet(&with([10, 0, 0, 1], [10, 0, 0, 255])),
            ip_packet(&with([0, 1, 2, 3], [10, 0, 0, 2])),
            ip_packet(&with([127, 0, 0, 1], [10, 0, 0, 2])),
            ip_packet(&with([240, 0, 0, 1], [10, 0, 0, 2])),
            ip_packet(&with([255, 255, 255, 255], [10, 0, 0, 2])),
            ip_packet(&with([239, 1, 1, 1], [10, 0, 0, 2])),
            ip_packet(&with([10, 9, 9, 9], [10, 0, 0, 2])),
            Packet::from_slice(&udp(0)), // no network header
        ];
        // A fragment other than the first.
        let mut f = udp(0);
        f[6] = 0x00;
        f[7] = 0x10;
        fix_ip_cksum(&mut f);
        cases.push(ip_packet(&f));
        // An ICMP error (destination unreachable) and a truncated ICMP packet.
        let mut ie = ip_header(0, 28, 1, 0, 64, 1, [10, 0, 0, 1], [10, 0, 0, 2]);
        ie.extend_from_slice(&[3, 1, 0, 0, 0, 0, 0, 0]);
        cases.push(ip_packet(&ie));
        cases.push(ip_packet(&ie[..23]));
        // Link-level broadcast and multicast.
        for t in [PacketType::Broadcast, PacketType::Multicast] {
            let mut p = ip_packet(&udp(0));
            p.anno_mut().packet_type = t;
            cases.push(p);
        }
        let n = cases.len();
        let id = next_id();
        let out = h.push(0, cases);
        assert!(out[0].is_empty(), "{} of {} answered", out[0].len(), n);
        assert_eq!(next_id(), id);

        // Errors are generated for: ICMP echo, first fragments with MF, other hosts.
        let mut echo = ip_header(0, 28, 1, 0, 64, 1, [10, 0, 0, 1], [10, 0, 0, 2]);
        echo.extend_from_slice(&[8, 0, 0, 0, 0, 0, 0, 0]);
        let mut mf = udp(0);
        mf[6] = 0x20;
        fix_ip_cksum(&mut mf);
        let mut oh = ip_packet(&udp(0));
        oh.anno_mut().packet_type = PacketType::OtherHost;
        let out = h.push(0, vec![ip_packet(&echo), ip_packet(&mf), oh]);
        assert_eq!(out[0].len(), 3);
    }

    #[test]
    fn quote_starts_at_the_network_header_and_includes_untrimmed_trailer() {
        let _g = lock();
        // Ethernet header in front (as after CheckIPHeader(14)), 4 trailing bytes after
        // the 28-byte IP packet: Click quotes network_length() bytes, trailer included.
        let inp = udp(0);
        let mut frame = vec![0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 0x08, 0x00];
        frame.extend_from_slice(&inp);
        frame.extend_from_slice(&[0xaa; 4]);
        let mut p = Packet::from_slice(&frame);
        p.set_network_header(14, 20);
        let mut h = Harness::new(&ICMPErrorClass, "192.168.0.1, timeexceeded", 1, 1);
        let id = next_id();
        let q = h.push(0, vec![p]).remove(0).remove(0);
        let mut quote = inp.clone();
        quote.extend_from_slice(&[0xaa; 4]);
        let want = expected(id, [192, 168, 0, 1], [10, 0, 0, 1], &[], 11, 0, [0; 4], &quote);
        assert_eq!(q.data(), &want[..]);
        assert_eq!(q.len(), 20 + 8 + 32);
    }

    #[test]
    fn all_named_codes_and_pmtu_low_16_bits() {
        let _g = lock();
        let inp = udp(0);
        for (cfg, ty, code) in [
            ("unreachable, srcroutefail", 3, 5),
            ("unreachable, netunknown", 3, 6),
            ("unreachable, hostunknown", 3, 7),
            ("unreachable, isolated", 3, 8),
            ("unreachable, netprohibited", 3, 9),
            ("unreachable, hostprohibited", 3, 10),
            ("unreachable, tosnet", 3, 11),
            ("unreachable, toshost", 3, 12),
            ("unreachable, filterprohibited", 3, 13),
            ("unreachable, hostprecedence", 3, 14),
            ("unreachable, precedencecutoff", 3, 15),
            ("redirect, tosnet", 5, 2),
            ("redirect, toshost", 5, 3),
            ("timeexceeded, reassembly", 11, 1),
            ("parameterproblem, length", 12, 2),
            ("sourcequench", 4, 0),
        ] {
            let mut h = Harness::new(&ICMPErrorClass, &format!("192.168.0.1, {}", cfg), 1, 1);
            let q = h.push(0, vec![ip_packet(&inp)]).remove(0).remove(0);
            assert_eq!(&q.data()[20..22], &[ty, code], "{}", cfg);
        }
        // PMTU 66036 = 0x101f4: Click writes htons(66036), i.e. 0x01f4.
        let mut h = Harness::new(&ICMPErrorClass, "192.168.0.1, 3, 4, PMTU 66036", 1, 1);
        let id = next_id();
        let q = h.push(0, vec![ip_packet(&inp)]).remove(0).remove(0);
        let want = expected(
            id,
            [192, 168, 0, 1],
            [10, 0, 0, 1],
            &[],
            3,
            4,
            [0, 0, 0x01, 0xf4],
            &inp,
        );
        assert_eq!(q.data(), &want[..]);
    }

    #[test]
    fn src_mtu_pmtu_handlers() {
        let _g = lock();
        let inp = udp(20);
        let mut h = Harness::new(&ICMPErrorClass, "192.168.0.1, unreachable, needfrag", 1, 1);
        assert_eq!(h.read("src"), "192.168.0.1");
        assert_eq!(h.read("mtu"), "576");
        assert_eq!(h.read("pmtu"), "0");
        h.write("src", "10.9.9.9").unwrap();
        h.write("mtu", "40").unwrap();
        h.write("pmtu", "1400").unwrap();
        assert_eq!(h.read("src"), "10.9.9.9");
        assert_eq!(h.read("mtu"), "40");
        assert_eq!(h.read("pmtu"), "1400");
        assert!(h.write("mtu", "big").is_err());
        assert!(h.write("src", "1.2.3").is_err());
        let id = next_id();
        let q = h.push(0, vec![ip_packet(&inp)]).remove(0).remove(0);
        // 40 bytes: IP header, ICMP header, 12 bytes of the offending packet.
        let want = expected(
            id,
            [10, 9, 9, 9],
            [10, 0, 0, 1],
            &[],
            3,
            4,
            [0, 0, 0x05, 0x78],
            &inp[..12],
        );
        assert_eq!(q.data(), &want[..]);
    }

    #[test]
    fn config_errors() {
        let e = |c: &str| build_error(&ICMPErrorClass, c, 1, 1);
        assert_eq!(
            e("1.2.3.4, echo"),
            "e :: ICMPError: ICMP type 8 is not an error type"
        );
        assert_eq!(
            e("1.2.3.4, 0"),
            "e :: ICMPError: ICMP type 0 is not an error type"
        );
        assert_eq!(
            e("1.2.3.4, 300"),
            "e :: ICMPError: ICMP type must be between 0 and 255"
        );
        // Click's wording for any bad CODE.
        let bad_code = "e :: ICMPError: argument 2 takes ICMP code (integer between 0 and 255)";
        assert_eq!(e("1.2.3.4, unreachable, bogus"), bad_code);
        assert_eq!(e("1.2.3.4, unreachable, 256"), bad_code);
        assert_eq!(e("1.2.3.4, unreachable, -1"), bad_code);
        assert_eq!(e("1.2.3.4, bogus"), "e :: ICMPError: TYPE expects ICMP type");
        assert_eq!(e("1.2.3.4"), "e :: ICMPError: missing mandatory TYPE argument");
        assert_eq!(
            e("1.2.3.4, 11, 0, 1.1.1.1, 9"),
            "e :: ICMPError: too many arguments"
        );
        // The transit code name belongs to timeexceeded only.
        assert_eq!(e("1.2.3.4, unreachable, transit"), bad_code);
        assert_eq!(e("1.2.3.4, timeexceeded, host"), bad_code);
        // Click's ICMPError has no USE_FIX_ANNO keyword (its documentation names one,
        // its code reads SET_FIX_ANNO).
        assert_eq!(
            e("1.2.3.4, timeexceeded, USE_FIX_ANNO false"),
            "e :: ICMPError: bad keyword 'USE_FIX_ANNO'"
        );
    }
}
