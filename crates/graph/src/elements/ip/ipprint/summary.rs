//! IPPrint's line: a tcpdump-like summary of one IPv4 packet.

use crate::args::EtherAddr;
use packet::anno::{AGGREGATE_ANNO_OFFSET, PAINT_ANNO_OFFSET};
use packet::Packet;
use std::fmt::Write as _;
use std::net::Ipv4Addr;

/// How packet bytes are dumped after the summary.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Contents {
    None,
    Hex,
    Ascii,
}

/// What a line shows, from IPPrint's keywords.
#[derive(Clone, Debug)]
pub(crate) struct Format {
    pub label: String,
    pub contents: Contents,
    /// Dump the transport payload instead of the whole IP packet.
    pub payload: bool,
    /// Bytes to dump at most; negative for all.
    pub maxlength: i32,
    pub ether: bool,
    pub id: bool,
    pub ttl: bool,
    pub tos: bool,
    pub length: bool,
    pub timestamp: bool,
    pub aggregate: bool,
    pub paint: bool,
    pub swap: bool,
}

const TCP: u8 = 6;
const UDP: u8 = 17;
const ICMP: u8 = 1;

fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn addr(b: &[u8], at: usize) -> Ipv4Addr {
    Ipv4Addr::new(b[at], b[at + 1], b[at + 2], b[at + 3])
}

fn icmp_name(t: u8) -> Option<&'static str> {
    Some(match t {
        0 => "echo-reply",
        3 => "unreachable",
        4 => "sourcequench",
        5 => "redirect",
        8 => "echo",
        9 => "routeradvert",
        10 => "routersolicit",
        11 => "timeexceeded",
        12 => "parameterproblem",
        13 => "timestamp",
        14 => "timestamp-reply",
        15 => "inforeq",
        16 => "inforeq-reply",
        17 => "maskreq",
        18 => "maskreq-reply",
        _ => return None,
    })
}

fn proto_name(p: u8) -> String {
    match p {
        TCP => "tcp".to_string(),
        UDP => "udp".to_string(),
        ICMP => "icmp".to_string(),
        p => format!("ip-proto-{}", p),
    }
}

/// TCP flags in tcpdump's order; `.` when none of them is set (ACK shows as `ack N`).
fn tcp_flags(sa: &mut String, f: u8) {
    let start = sa.len();
    for (bit, c) in [
        (0x02, 'S'),
        (0x01, 'F'),
        (0x04, 'R'),
        (0x08, 'P'),
        (0x20, 'U'),
        (0x80, 'W'),
        (0x40, 'E'),
    ] {
        if f & bit != 0 {
            sa.push(c);
        }
    }
    if sa.len() == start {
        sa.push('.');
    }
}

/// An IPv4 packet's parts, clamped to the bytes present.
struct Ip<'a> {
    /// From the IP header to the end of the data.
    bytes: &'a [u8],
    hl: usize,
    /// The IP total length field.
    total: usize,
}

impl<'a> Ip<'a> {
    /// The transport part: after the header, up to the total length or the data's end.
    fn transport(&self) -> &'a [u8] {
        let end = self.total.min(self.bytes.len());
        self.bytes.get(self.hl..end).unwrap_or(&[])
    }
}

impl Format {
    /// Appends the line for `p` (without the newline) to `sa`.
    pub(crate) fn line(&self, sa: &mut String, p: &Packet) {
        if !self.label.is_empty() {
            let _ = write!(sa, "{}: ", self.label);
        }
        if self.timestamp {
            let _ = write!(sa, "{}: ", p.anno().timestamp);
        }
        if self.ether {
            if let Some(m) = p.mac_header().filter(|m| m.len() >= 14) {
                let a = |at: usize| EtherAddr(m[at..at + 6].try_into().expect("6 bytes"));
                let _ = write!(sa, "{} > {}: ", a(6), a(0));
            }
        }
        if self.aggregate {
            let _ = write!(sa, "#{} ", p.anno().u32_at(AGGREGATE_ANNO_OFFSET));
        }
        if self.paint {
            let _ = write!(sa, "paint {} ", p.anno().u8_at(PAINT_ANNO_OFFSET));
        }
        let ip = match p.network_header() {
            Some(b) if b.len() >= 20 => b,
            _ => {
                sa.push_str("[|ip]");
                self.dump(sa, p.network_header().unwrap_or(p.data()));
                return;
            }
        };
        if ip[0] >> 4 != 4 {
            let _ = write!(sa, "bad IP version {}", ip[0] >> 4);
            self.dump(sa, ip);
            return;
        }
        let hl = usize::from(ip[0] & 0x0f) * 4;
        if hl < 20 {
            let _ = write!(sa, "bad IP header length {}", hl);
            self.dump(sa, ip);
            return;
        }
        let ip = Ip {
            bytes: ip,
            hl,
            total: usize::from(be16(ip, 2)),
        };
        self.header_fields(sa, &ip);
        let payload = self.summary(sa, &ip);
        match (self.payload, payload) {
            (true, Some(pl)) => self.dump(sa, pl),
            (true, None) => {}
            (false, _) => self.dump(sa, ip.bytes.get(..ip.total.min(ip.bytes.len())).unwrap_or(&[])),
        }
    }

    fn header_fields(&self, sa: &mut String, ip: &Ip) {
        let b = ip.bytes;
        if self.id {
            let _ = write!(sa, "id {} ", be16(b, 4));
        }
        if self.ttl {
            let _ = write!(sa, "ttl {} ", b[8]);
        }
        if self.tos {
            let _ = write!(sa, "tos {} ", b[1]);
        }
        if self.length {
            let _ = write!(sa, "length {} ", ip.total);
        }
    }

    /// Appends the protocol summary; returns the transport payload, if it could be
    /// located.
    fn summary<'a>(&self, sa: &mut String, ip: &Ip<'a>) -> Option<&'a [u8]> {
        let b = ip.bytes;
        let (src, dst, proto) = (addr(b, 12), addr(b, 16), b[9]);
        let frag = be16(b, 6);
        let (more, offset) = (frag & 0x2000 != 0, usize::from(frag & 0x1fff) * 8);
        let t = ip.transport();
        let frag_text = || {
            format!(
                "frag {}:{}@{}{}",
                be16(b, 4),
                ip.total.saturating_sub(ip.hl),
                offset,
                if more { "+" } else { "" }
            )
        };
        if offset != 0 {
            let _ = write!(sa, "{} > {}: {} {}", src, dst, proto_name(proto), frag_text());
            return None;
        }
        let payload = match proto {
            TCP if t.len() >= 20 => {
                let off = usize::from(t[12] >> 4) * 4;
                let len = t.len().saturating_sub(off);
                let flags = t[13];
                let _ = write!(sa, "{}.{} > {}.{}: ", src, be16(t, 0), dst, be16(t, 2));
                tcp_flags(sa, flags);
                let seq = be32(t, 4);
                if len > 0 || flags & 0x07 != 0 {
                    let _ = write!(sa, " {}:{}({})", seq, seq.wrapping_add(len as u32), len);
                }
                if flags & 0x10 != 0 {
                    let _ = write!(sa, " ack {}", be32(t, 8));
                }
                let _ = write!(sa, " win {}", be16(t, 14));
                if flags & 0x20 != 0 {
                    let _ = write!(sa, " urg {}", be16(t, 18));
                }
                t.get(off.max(20)..)
            }
            UDP if t.len() >= 8 => {
                let _ = write!(
                    sa,
                    "{}.{} > {}.{}: udp {}",
                    src,
                    be16(t, 0),
                    dst,
                    be16(t, 2),
                    be16(t, 4).saturating_sub(8)
                );
                t.get(8..)
            }
            ICMP if t.len() >= 4 => {
                let (ty, code) = (t[0], t[1]);
                let _ = write!(sa, "{} > {}: icmp ", src, dst);
                match icmp_name(ty) {
                    Some(name) => sa.push_str(name),
                    None => {
                        let _ = write!(sa, "type {}", ty);
                    }
                }
                if code != 0 {
                    let _ = write!(sa, " code {}", code);
                }
                if matches!(ty, 0 | 8) && t.len() >= 8 {
                    let (mut id, mut seq) = (be16(t, 4), be16(t, 6));
                    if self.swap {
                        (id, seq) = (id.swap_bytes(), seq.swap_bytes());
                    }
                    let _ = write!(sa, " ({}, {})", id, seq);
                }
                t.get(8..)
            }
            TCP | UDP | ICMP => {
                let _ = write!(sa, "{} > {}: [|{}]", src, dst, proto_name(proto));
                None
            }
            p => {
                let _ = write!(
                    sa,
                    "{} > {}: {} {}",
                    src,
                    dst,
                    proto_name(p),
                    ip.total.saturating_sub(ip.hl)
                );
                Some(t)
            }
        };
        if more {
            let _ = write!(sa, " ({})", frag_text());
        }
        payload
    }

    /// Appends ` | ` and up to MAXLENGTH bytes of `data` in the CONTENTS format.
    fn dump(&self, sa: &mut String, data: &[u8]) {
        if self.contents == Contents::None {
            return;
        }
        let n = match usize::try_from(self.maxlength) {
            Ok(m) => m.min(data.len()),
            Err(_) => data.len(),
        };
        if n == 0 {
            return;
        }
        sa.push_str(" | ");
        for (i, &b) in data[..n].iter().enumerate() {
            match self.contents {
                Contents::Hex => {
                    if i > 0 && i % 4 == 0 {
                        sa.push(' ');
                    }
                    let _ = write!(sa, "{:02x}", b);
                }
                _ => {
                    if i > 0 && i % 8 == 0 {
                        sa.push(' ');
                    }
                    sa.push(if (32..=126).contains(&b) { b as char } else { '.' });
                }
            }
        }
    }
}
