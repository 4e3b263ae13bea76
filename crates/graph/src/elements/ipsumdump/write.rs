//! One packet's summary line, as Click's ToIPSummaryDump writes it (`ip_prepare` and
//! the fields' `extract`/`outa` functions in `elements/analysis/ipsumdump_*.cc`).
//!
//! Lengths follow Click's integer types: a payload length computed from a header that
//! claims less than its own size wraps as Click's `uint32_t` does.

use super::fields::{icmp_type_name, Field};
use super::options;
use packet::anno::{AGGREGATE_ANNO_OFFSET, EXTRA_PACKETS_ANNO_OFFSET};
use packet::Packet;
use std::io::Write as _;

const TCP: u8 = 6;
const UDP: u8 = 17;
const ICMP: u8 = 1;
const DCCP: u8 = 33;
const UDPLITE: u8 = 136;

/// What ToIPSummaryDump's settings change in a line.
#[derive(Clone, Copy, Debug)]
pub(crate) struct LineOptions {
    /// `!bad` lines (BAD_PACKETS).
    pub bad_packets: bool,
    /// `!bad truncated IP missing N` for packets shorter than their IP length.
    pub careful_trunc: bool,
    /// Lengths include the extra length annotation (EXTRA_LENGTH).
    pub extra_length: bool,
}

/// A packet looked at once for all fields (Click's `PacketDesc` after `ip_prepare`).
pub(crate) struct Desc<'a> {
    p: &'a Packet,
    /// From the network header to the end of the data, if the packet has a valid one.
    ip: Option<&'a [u8]>,
    /// From the transport header to the end of the data, for each protocol whose
    /// header is there (the first fragment of that protocol).
    tcp: Option<&'a [u8]>,
    udp: bool,
    icmp: Option<&'a [u8]>,
    /// The transport header's offset from the network header.
    trans_off: i64,
    /// Bytes past the IP length at the end of the packet.
    tailpad: i64,
    /// The extra length annotation, as adjusted for lengths taken from the IP header.
    extra: u32,
    /// Lengths include the extra length annotation (EXTRA_LENGTH).
    extra_length: bool,
    /// The first problem found, for a `!bad` line.
    pub bad: Option<Bad>,
}

/// Why a packet gets a `!bad` line (Click's messages).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Bad {
    TruncatedIpHeader,
    IpVersion(u8),
    IpHeaderLength(u8),
    IpLength(u32),
    TruncatedIpMissing(i64),
    TcpHeaderLength(u8),
    NoIpHeader,
    TruncatedIpHeaderCapture,
    Fragmented(&'static str),
    TruncatedCapture(&'static str),
    Truncated(&'static str),
}

impl Bad {
    fn write(self, out: &mut Vec<u8>) {
        let _ = match self {
            Bad::TruncatedIpHeader => writeln!(out, "!bad truncated IP header"),
            Bad::IpVersion(v) => writeln!(out, "!bad IP version {}", v),
            Bad::IpHeaderLength(v) => writeln!(out, "!bad IP header length {}", v),
            Bad::IpLength(v) => writeln!(out, "!bad IP length {}", v),
            Bad::TruncatedIpMissing(n) => writeln!(out, "!bad truncated IP missing {}", n),
            Bad::TcpHeaderLength(v) => writeln!(out, "!bad TCP header length {}", v),
            Bad::NoIpHeader => writeln!(out, "!bad no IP header"),
            Bad::TruncatedIpHeaderCapture => writeln!(out, "!bad truncated IP header capture"),
            Bad::Fragmented(p) => writeln!(out, "!bad fragmented {} header", p),
            Bad::TruncatedCapture(p) => writeln!(out, "!bad truncated {} header capture", p),
            Bad::Truncated(p) => writeln!(out, "!bad truncated {} header", p),
        };
    }
}

/// Which header a missing field needed (Click's `field_missing` arguments).
#[derive(Clone, Copy)]
enum Needs {
    Ip,
    Transport(Proto),
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Proto {
    Tcp,
    Udp,
    Icmp,
    TcpOrUdp,
}

impl Proto {
    fn name(self) -> &'static str {
        match self {
            Proto::Tcp => "TCP",
            Proto::Udp => "UDP",
            Proto::Icmp => "ICMP",
            Proto::TcpOrUdp => "TCP/UDP",
        }
    }
}

/// Byte `at` of a header, 0 past the data (where Click would read whatever the
/// buffer holds).
fn byte(b: &[u8], at: usize) -> u8 {
    b.get(at).copied().unwrap_or(0)
}

fn be16(b: &[u8], at: usize) -> u32 {
    u32::from(byte(b, at)) << 8 | u32::from(byte(b, at + 1))
}

fn be32(b: &[u8], at: usize) -> u32 {
    be16(b, at) << 16 | be16(b, at + 2)
}

/// IP_FIRSTFRAG: no fragment offset.
pub(crate) fn first_frag(ip: &[u8]) -> bool {
    be16(ip, 6) & 0x1fff == 0
}

impl<'a> Desc<'a> {
    /// Click's `ip_prepare`: checks the IP header and finds the transport headers.
    pub(crate) fn new(p: &'a Packet, opts: &LineOptions) -> Desc<'a> {
        let mut d = Desc {
            p,
            ip: None,
            tcp: None,
            udp: false,
            icmp: None,
            trans_off: 0,
            tailpad: 0,
            extra: p.anno().extra_length(),
            extra_length: opts.extra_length,
            bad: None,
        };
        let bad = |d: &mut Desc, msg: Bad| {
            if opts.bad_packets && d.bad.is_none() {
                d.bad = Some(msg);
            }
        };
        let Some(ip) = p.network_header() else {
            return d;
        };
        let nl = ip.len() as i64;
        if nl < 4 {
            bad(&mut d, Bad::TruncatedIpHeader);
            return d;
        }
        let hl = i64::from(ip[0] & 0xf) * 4;
        let ip_len = i64::from(be16(ip, 2));
        if ip[0] >> 4 != 4 {
            bad(&mut d, Bad::IpVersion(ip[0] >> 4));
            return d;
        }
        if hl < 20 {
            bad(&mut d, Bad::IpHeaderLength(ip[0] & 0xf));
            return d;
        }
        if ip_len < hl {
            bad(&mut d, Bad::IpLength(ip_len as u32));
            return d;
        }
        if nl > ip_len {
            d.extra = d.extra.wrapping_add((nl - ip_len) as u32);
            d.tailpad = nl - ip_len;
        } else if opts.careful_trunc && nl + i64::from(d.extra) < ip_len {
            let missing = ip_len - nl - i64::from(d.extra);
            bad(&mut d, Bad::TruncatedIpMissing(missing));
        }
        d.ip = Some(ip);
        let net_off = p.network_header_offset().unwrap_or(0) as i64;
        d.trans_off = p.transport_header_offset().map_or(hl, |t| t as i64 - net_off);
        let trans = p.transport_header();
        let network_length = nl - d.tailpad;
        let proto = if nl > 9 { ip[9] } else { 0 };
        let first = nl < 8 || first_frag(ip);
        // (Click reads the protocol and offset without looking at the length: a
        // header cut before them reads as protocol 0, not a fragment.)
        if let (Some(t), true) = (trans, network_length > hl && proto == TCP && first) {
            let tl = t.len() as i64 - d.tailpad;
            if tl > 12 && t[12] >> 4 < 5 {
                bad(&mut d, Bad::TcpHeaderLength(t[12] >> 4));
            } else {
                d.tcp = Some(t);
            }
        }
        // (Click subtracts the padding twice here, in unsigned arithmetic.)
        let twice = network_length - d.tailpad;
        d.udp = trans.is_some() && !(0..=hl).contains(&twice) && proto == UDP && first;
        if let (Some(t), true) = (trans, network_length > hl && proto == ICMP && first) {
            d.icmp = Some(t);
        }
        if d.extra > 0 {
            let full = (network_length as u32).wrapping_add(d.extra);
            d.extra = if ip_len != 0xffff || full <= 0xffff {
                0
            } else {
                full - 0xffff
            };
        }
        d
    }

    /// Network length without the padding (`d.network_length()`).
    fn network_length(&self) -> i64 {
        self.ip.map_or(0, |ip| ip.len() as i64) - self.tailpad
    }

    fn transport_length(&self, t: &[u8]) -> i64 {
        t.len() as i64 - self.tailpad
    }

    /// The packet's length without the padding (`d.length()`).
    fn length(&self) -> i64 {
        self.p.len() as i64 - self.tailpad
    }

    /// The IP header if at least `l` bytes of it are there.
    fn ip_at_least(&self, l: i64) -> Option<&'a [u8]> {
        self.ip.filter(|_| self.network_length() >= l)
    }

    fn tcp_at_least(&self, l: i64) -> Option<&'a [u8]> {
        self.tcp.filter(|t| self.transport_length(t) >= l)
    }

    /// Where the payload starts (from the network header, or the data start without
    /// IP) and how long the IP length says it is (Click's `payload_info`).
    fn payload_info(&self) -> (i64, u32) {
        match self.ip {
            Some(ip) => {
                let ip_len = be16(ip, 2);
                let mut off = self.trans_off;
                if first_frag(ip) {
                    match byte(ip, 9) {
                        TCP => {
                            let t = self.p.transport_header().unwrap_or(&[]);
                            off += if self.transport_length(t) >= 13 && t[12] >> 4 >= 5 {
                                i64::from(t[12] >> 4) * 4
                            } else {
                                20
                            };
                        }
                        UDP | UDPLITE => off += 8,
                        _ => {}
                    }
                }
                (off, ip_len.wrapping_sub(off as u32))
            }
            None => (0, self.length() as u32),
        }
    }

    /// The payload bytes the packet holds.
    fn payload(&self) -> Option<&'a [u8]> {
        let (off, len) = self.payload_info();
        let base: &[u8] = match self.ip {
            Some(ip) => ip,
            None => self.p.data(),
        };
        let end = base.len() as i64 - self.tailpad;
        // Click: the field is there if it is empty or starts inside the packet.
        if off < 0 || (len != 0 && off >= base.len() as i64) {
            return None;
        }
        let stop = (off + i64::from(len)).min(end).max(off);
        base.get(off as usize..stop as usize).or(Some(&[]))
    }

    fn write_value(&self, f: Field, out: &mut Vec<u8>) -> bool {
        use Field::*;
        let a = self.p.anno();
        // Writes into a Vec cannot fail.
        macro_rules! put {
            ($($arg:tt)*) => {{
                let _ = write!(out, $($arg)*);
                true
            }};
        }
        macro_rules! ip {
            ($l:expr) => {
                match self.ip_at_least($l) {
                    Some(ip) => ip,
                    None => return false,
                }
            };
        }
        macro_rules! tcp {
            ($l:expr) => {
                match self.tcp_at_least($l) {
                    Some(t) => t,
                    None => return false,
                }
            };
        }
        match f {
            Timestamp => put!("{}", a.timestamp),
            TsSec => put!("{}", a.timestamp.sec as u32),
            TsUsec => put!("{}", a.timestamp.usec()),
            TsUsec1 => put!(
                "{}",
                (a.timestamp.sec as u64)
                    .wrapping_mul(1_000_000)
                    .wrapping_add(u64::from(a.timestamp.usec()))
            ),
            Count => put!("{}", a.u32_at(EXTRA_PACKETS_ANNO_OFFSET).wrapping_add(1)),
            Paint | Link => put!("{}", a.paint()),
            Direction => match a.paint() {
                0 => put!(">"),
                1 => put!("<"),
                c => put!("{}", c),
            },
            Aggregate => put!("{}", a.u32_at(AGGREGATE_ANNO_OFFSET)),
            WireLen => put!("{}", self.p.len()),
            IpSrc => {
                let ip = ip!(16);
                put!("{}.{}.{}.{}", ip[12], ip[13], ip[14], ip[15])
            }
            IpDst => {
                let ip = ip!(20);
                put!("{}.{}.{}.{}", ip[16], ip[17], ip[18], ip[19])
            }
            IpTos => put!("{}", ip!(2)[1]),
            IpDscp => put!("{}", ip!(2)[1] >> 2),
            IpEcn => put!("{}", ["no", "ect1", "ect2", "ce"][usize::from(ip!(2)[1] & 3)]),
            IpTtl => put!("{}", ip!(9)[8]),
            IpFrag => {
                let ip = ip!(8);
                let off = be16(ip, 6);
                put!(
                    "{}",
                    if off & 0x3fff != 0 {
                        if first_frag(ip) {
                            'F'
                        } else {
                            'f'
                        }
                    } else if off & 0x4000 != 0 {
                        '!'
                    } else {
                        '.'
                    }
                )
            }
            IpFragoff => {
                let off = be16(ip!(8), 6);
                let _ = write!(out, "{}", (off & 0x1fff) << 3);
                if off & 0x2000 != 0 {
                    out.push(b'+');
                }
                if off & 0x4000 != 0 {
                    out.push(b'!');
                }
                true
            }
            IpId => put!("{}", be16(ip!(6), 4)),
            IpSum => put!("{}", be16(ip!(12), 10)),
            IpProto => match ip!(10)[9] {
                TCP => put!("T"),
                UDP => put!("U"),
                ICMP => put!("I"),
                p => put!("{}", p),
            },
            IpHl => put!("{}", (ip!(1)[0] & 0xf) * 4),
            IpLen => {
                let len = match self.ip {
                    Some(ip) => be16(ip, 2),
                    None => self.length() as u32,
                };
                let extra = if self.extra_length { self.extra } else { 0 };
                put!("{}", len.wrapping_add(extra))
            }
            IpCaptureLen => {
                let allow = match self.ip {
                    Some(_) => self.network_length(),
                    None => self.length(),
                } as u32;
                let len = self.ip.map_or(allow, |ip| be16(ip, 2));
                put!("{}", len.min(allow))
            }
            IpOpt => {
                let Some(ip) = self.ip else {
                    return false;
                };
                let hl = usize::from(ip[0] & 0xf) * 4;
                if hl > 20 && self.network_length() < hl as i64 {
                    return false;
                }
                if hl <= 20 {
                    out.push(b'.');
                } else {
                    options::unparse_ip(&ip[20..hl], out);
                }
                true
            }
            Sport | Dport => {
                let need = if f == Dport { 4 } else { 2 };
                let Some(ip) = self.ip else {
                    return false;
                };
                let hl = i64::from(ip[0] & 0xf) * 4;
                let t = self.p.transport_header().unwrap_or(&[]);
                if self.network_length() > hl
                    && first_frag(ip)
                    && matches!(byte(ip, 9), TCP | UDP | DCCP | UDPLITE)
                    && self.transport_length(t) >= need
                {
                    put!("{}", be16(t, need as usize - 2))
                } else {
                    false
                }
            }
            TcpSeq => put!("{}", be32(tcp!(8), 4)),
            TcpAck => put!("{}", be32(tcp!(12), 8)),
            TcpOff => put!("{}", (tcp!(13)[12] >> 4) * 4),
            TcpFlags => {
                let t = tcp!(14);
                let flags = u32::from(t[13]) | (u32::from(t[12] & 0xf) << 8);
                write_tcp_flags(flags, out);
                true
            }
            TcpWindow => put!("{}", be16(tcp!(16), 14)),
            TcpUrp => put!("{}", be16(tcp!(20), 18)),
            TcpOpt | TcpNtopt | TcpSack => self.write_tcp_options(f, out),
            UdpLen => {
                let Some(t) = self.p.transport_header().filter(|_| self.udp) else {
                    return false;
                };
                if self.transport_length(t) < 6 {
                    return false;
                }
                put!("{}", be16(t, 4))
            }
            IcmpType | IcmpTypeName => {
                let Some(t) = self.icmp.filter(|t| self.transport_length(t) >= 1) else {
                    return false;
                };
                match (f, icmp_type_name(t[0])) {
                    (IcmpTypeName, Some(name)) => put!("{}", name),
                    _ => put!("{}", t[0]),
                }
            }
            IcmpCode => match self.icmp.filter(|t| self.transport_length(t) >= 2) {
                Some(t) => put!("{}", t[1]),
                None => false,
            },
            PayloadLen => {
                let (_, len) = self.payload_info();
                let extra = if self.ip.is_none() || self.extra_length {
                    self.extra
                } else {
                    0
                };
                put!("{}", len.wrapping_add(extra))
            }
            Payload => match self.payload() {
                Some(bytes) => {
                    quote(bytes, out);
                    true
                }
                None => false,
            },
        }
    }

    /// `tcp_opt`, `tcp_ntopt` and `tcp_sack` (Click's `tcp_extract` and `tcp_outa`).
    fn write_tcp_options(&self, f: Field, out: &mut Vec<u8>) -> bool {
        let Some(t) = self.tcp else {
            return false;
        };
        let tl = self.transport_length(t);
        if tl < 13 {
            return false;
        }
        let off = usize::from(t[12] >> 4) * 4;
        let none = match f {
            Field::TcpOpt => {
                if off > 20 && tl < off as i64 {
                    return false;
                }
                off <= 20
            }
            // A timestamp option alone (NOP NOP TIMESTAMP) counts as none.
            _ => {
                let ts_only = off == 32 && tl >= 24 && t[20..24] == [1, 1, 8, 10];
                if !(off <= 20 || ts_only) && tl < off as i64 {
                    return false;
                }
                off <= 20 || ts_only
            }
        };
        if none {
            out.push(b'.');
        } else {
            let mask = match f {
                Field::TcpOpt => options::TCP_ALL_NOPAD,
                Field::TcpNtopt => options::TCP_NTALL,
                _ => options::TCP_SACK,
            };
            options::unparse_tcp(&t[20..off], mask, out);
        }
        true
    }
}

/// TCP flags as letters (`FSRPAUECN`), `.` for none (Click's `tcp_outa`).
pub(crate) fn write_tcp_flags(flags: u32, out: &mut Vec<u8>) {
    if flags == 0 {
        out.push(b'.');
        return;
    }
    for (bit, c) in b"FSRPAUECN".iter().enumerate() {
        if flags & (1 << bit) != 0 {
            out.push(*c);
        }
    }
}

/// Click's `cp_quote`: a double-quoted string, with `\`, `"` and `$` escaped, tab,
/// carriage return and newline as `\t` `\r` `\n`, and other bytes outside printable
/// ASCII as three octal digits.
pub(crate) fn quote(bytes: &[u8], out: &mut Vec<u8>) {
    out.push(b'"');
    for &b in bytes {
        match b {
            b'\\' | b'"' | b'$' => out.extend_from_slice(&[b'\\', b]),
            b'\t' => out.extend_from_slice(b"\\t"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\n' => out.extend_from_slice(b"\\n"),
            32..=126 => out.push(b),
            _ => out.extend_from_slice(&[b'\\', b'0' + (b >> 6), b'0' + ((b >> 3) & 7), b'0' + (b & 7)]),
        }
    }
    out.push(b'"');
}

impl Desc<'_> {
    /// What a field needed, if its absence is worth a `!bad` line, and how many bytes
    /// of that header it needed.
    fn needs(&self, f: Field) -> Option<(Needs, i64)> {
        use Field::*;
        let transport = |p, l| Some((Needs::Transport(p), l));
        match f {
            IpSrc => Some((Needs::Ip, 16)),
            IpDst => Some((Needs::Ip, 20)),
            IpTos | IpDscp | IpEcn => Some((Needs::Ip, 2)),
            IpTtl => Some((Needs::Ip, 9)),
            IpFrag | IpFragoff => Some((Needs::Ip, 8)),
            IpId => Some((Needs::Ip, 6)),
            IpSum => Some((Needs::Ip, 12)),
            IpProto => Some((Needs::Ip, 10)),
            IpHl => Some((Needs::Ip, 1)),
            IpOpt => Some((Needs::Ip, self.ip.map_or(20, |ip| i64::from(ip[0] & 0xf) * 4))),
            Sport => transport(Proto::TcpOrUdp, 2),
            Dport => transport(Proto::TcpOrUdp, 4),
            TcpSeq => transport(Proto::Tcp, 8),
            TcpAck => transport(Proto::Tcp, 12),
            TcpOff => transport(Proto::Tcp, 13),
            TcpFlags => transport(Proto::Tcp, 14),
            TcpWindow => transport(Proto::Tcp, 16),
            TcpUrp => transport(Proto::Tcp, 20),
            TcpOpt | TcpNtopt | TcpSack => {
                let tl = self.p.transport_header().map_or(0, |t| self.transport_length(t));
                transport(Proto::Tcp, tl + 1)
            }
            UdpLen => transport(Proto::Udp, 6),
            IcmpType | IcmpTypeName => transport(Proto::Icmp, 1),
            IcmpCode => transport(Proto::Icmp, 2),
            _ => None,
        }
    }

    /// The `!bad` line for a missing field (Click's `hard_field_missing`); `None` for
    /// a field of another protocol, which is no error.
    fn missing(&self, f: Field) -> Option<Bad> {
        let (needs, l) = self.needs(f)?;
        let Some(ip) = self.ip else {
            return Some(Bad::NoIpHeader);
        };
        let Needs::Transport(proto) = needs else {
            return Some(Bad::TruncatedIpHeaderCapture);
        };
        let p = byte(ip, 9);
        let other = match proto {
            Proto::Tcp => p != TCP,
            Proto::Udp => p != UDP,
            Proto::Icmp => p != ICMP,
            Proto::TcpOrUdp => p != TCP && p != UDP,
        };
        if self.network_length() > 9 && other {
            return None;
        }
        if ip.len() >= 8 && !first_frag(ip) {
            return Some(Bad::Fragmented(proto.name()));
        }
        let tl = self.p.transport_header().map_or(0, |t| self.transport_length(t));
        Some(if tl + i64::from(self.extra) >= l {
            Bad::TruncatedCapture(proto.name())
        } else {
            Bad::Truncated(proto.name())
        })
    }
}

/// One packet's line, appended to `line`, and with BAD_PACKETS the `!bad` line that
/// goes before it, appended to `bad`.
pub(crate) fn summary(
    p: &Packet,
    fields: &[Field],
    opts: &LineOptions,
    line: &mut Vec<u8>,
    bad: &mut Vec<u8>,
) {
    let d = Desc::new(p, opts);
    let mut problem = d.bad;
    for (i, &f) in fields.iter().enumerate() {
        if i > 0 {
            line.push(b' ');
        }
        if !d.write_value(f, line) {
            line.push(b'-');
            if opts.bad_packets && problem.is_none() {
                problem = d.missing(f);
            }
        }
    }
    line.push(b'\n');
    if let Some(b) = problem {
        b.write(bad);
    }
}
