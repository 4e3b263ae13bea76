//! A packet from one data line, as Click's FromIPSummaryDump builds it (`read_packet`,
//! `PacketOdesc` and the fields' `ina`/`inject` functions).
//!
//! The packet is an IP header at the start of the data (made when the first IP or
//! transport field needs it: version 4, header length 20, TTL 100, the default
//! protocol), then the transport header its protocol has, then any payload. The IP
//! length goes into the header; the bytes it counts beyond what the fields made are
//! the extra length annotation, unless CHECKSUM asks for whole packets.
//!
//! Click writes into the buffer past the packet's end at times (a port of a header cut
//! short by `ip_len`) and later `put`s may bring those bytes into the packet. The
//! builder keeps the bytes past its length for the same reason: `buf` is the buffer,
//! zero-filled as Click's is with ZERO, and `len` the packet's length.

use super::fields::{icmp_type_by_name, Field};
use super::options;
use packet::anno::{AGGREGATE_ANNO_OFFSET, EXTRA_PACKETS_ANNO_OFFSET};
use packet::{Packet, Timestamp};
use std::net::Ipv4Addr;

const TCP: u8 = 6;
const UDP: u8 = 17;
const ICMP: u8 = 1;
const DCCP: u8 = 33;
const UDPLITE: u8 = 136;

/// Addresses and ports for packets that do not give them (`!flowid`, FLOWID).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct FlowId {
    pub src: [u8; 4],
    pub sport: u16,
    pub dst: [u8; 4],
    pub dport: u16,
}

/// Settings of the reading element that shape each packet.
#[derive(Clone, Copy, Debug)]
pub(crate) struct BuildSettings {
    pub default_proto: u8,
    pub flowid: Option<FlowId>,
    /// Version 1.0 dumps gave fragment offsets in 8-byte units.
    pub minor_version: u32,
    pub checksum: bool,
}

/// One field's parsed value.
enum Value {
    Num(u32),
    Wide(u64),
    Addr([u8; 4]),
    Time(Timestamp),
    Bytes(Vec<u8>),
}

/// The packet under construction (Click's `PacketOdesc`).
struct Odesc {
    buf: Vec<u8>,
    len: usize,
    /// The network header is at offset 0 once set.
    ip: bool,
    /// The transport header's offset.
    trans: usize,
    have_ip_hl: bool,
    have_tcp_hl: bool,
    want_len: u32,
    timestamp: Timestamp,
    extra_packets: u32,
    paint: u8,
    aggregate: u32,
    settings: BuildSettings,
}

/// The most bytes a line can make the builder hold: headers, options and a payload as
/// long as a line; an offset beyond it is not written (Click would write past its
/// buffer).
const MAX_BUFFER: usize = 1 << 20;

impl Odesc {
    fn new(settings: BuildSettings) -> Odesc {
        Odesc {
            buf: Vec::with_capacity(128),
            len: 0,
            ip: false,
            trans: 0,
            have_ip_hl: false,
            have_tcp_hl: false,
            want_len: 0,
            timestamp: Timestamp::ZERO,
            extra_packets: 0,
            paint: 0,
            aggregate: 0,
            settings,
        }
    }

    fn get(&self, at: usize) -> u8 {
        self.buf.get(at).copied().unwrap_or(0)
    }

    fn get16(&self, at: usize) -> u16 {
        u16::from(self.get(at)) << 8 | u16::from(self.get(at + 1))
    }

    fn set(&mut self, at: usize, v: u8) {
        if at >= MAX_BUFFER {
            return;
        }
        if at >= self.buf.len() {
            self.buf.resize(at + 1, 0);
        }
        self.buf[at] = v;
    }

    fn set16(&mut self, at: usize, v: u16) {
        self.set(at, (v >> 8) as u8);
        self.set(at + 1, v as u8);
    }

    fn set_bytes(&mut self, at: usize, bytes: &[u8]) {
        for (i, &b) in bytes.iter().enumerate() {
            self.set(at + i, b);
        }
    }

    /// Click's `put`: the packet grows by `n` bytes (what the buffer holds there).
    fn put(&mut self, n: usize) {
        let len = (self.len + n).min(MAX_BUFFER);
        if len > self.buf.len() {
            self.buf.resize(len, 0);
        }
        self.len = len;
    }

    fn transport_length(&self) -> i64 {
        self.len as i64 - self.trans as i64
    }

    fn proto(&self) -> u8 {
        self.get(9)
    }

    /// Click's `make_ip`: an IP header exists; true if its protocol is `proto` (or
    /// either is 0).
    fn make_ip(&mut self, proto: u8) -> bool {
        if !self.ip || self.len < 20 {
            if !self.ip {
                self.ip = true;
                self.trans = 0;
            }
            if self.len < 20 {
                self.put(20 - self.len);
                self.trans = 20;
                self.set(0, 0x45);
                self.set(9, self.settings.default_proto);
                self.set16(2, 0);
                self.set16(6, 0);
                self.set(8, 100);
                if let Some(f) = self.settings.flowid {
                    self.set_bytes(12, &f.src);
                    self.set_bytes(16, &f.dst);
                }
            }
        }
        proto == 0 || self.proto() == 0 || self.proto() == proto
    }

    fn first_frag(&self) -> bool {
        self.get16(6) & 0x1fff == 0
    }

    /// Click's `make_transp`: the transport header of the protocol exists (up to the
    /// IP length given); false for a later fragment.
    fn make_transp(&mut self) -> bool {
        if !self.first_frag() {
            return false;
        }
        if self.transport_length() >= 8 {
            return true;
        }
        let mut len: i64 = match self.proto() {
            TCP => 20,
            UDP | UDPLITE => 8,
            DCCP => 12,
            ICMP => 8,
            _ => return true,
        };
        let want = i64::from(self.want_len);
        if want > 0 && want < self.trans as i64 + len {
            len = want - self.trans as i64;
        }
        let tl = self.transport_length();
        if tl < len {
            let xlen = len.max(4);
            self.put((xlen - tl) as usize);
            if self.proto() == TCP && len >= 13 {
                self.set(self.trans + 12, 0x50 | (self.get(self.trans + 12) & 0xf));
            }
            if let Some(f) = self.settings.flowid {
                self.set16(self.trans, f.sport);
                self.set16(self.trans + 2, f.dport);
            }
            if xlen > len {
                self.len -= (xlen - len) as usize;
            }
        }
        true
    }

    /// Where the payload starts and how long the IP length says it is.
    fn payload_info(&self) -> (usize, u32) {
        let ip_len = u32::from(self.get16(2));
        let mut off = self.trans;
        if self.first_frag() {
            match self.proto() {
                TCP => {
                    let th = usize::from(self.get(self.trans + 12) >> 4) * 4;
                    off += if self.transport_length() >= 13 && th >= 20 {
                        th
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

    /// Click's `account_payload_len`: a payload shorter than the IP length leaves room
    /// that Click fills with TCP options, then IP options (EOL bytes), unless the line
    /// gave those headers' lengths.
    fn account_payload_len(&mut self, off: usize, plen: u32) {
        let ip_len_field = u32::from(self.get16(2));
        if ip_len_field == 0 && self.want_len == 0 {
            self.want_len = (off as u32).wrapping_add(plen);
            return;
        }
        let ip_len = if ip_len_field != 0 {
            ip_len_field
        } else {
            self.want_len
        };
        let mut delta = i64::from(ip_len) - (off as i64 + i64::from(plen));
        let th_off = self.get(self.trans + 12) >> 4;
        if delta > 0 && self.first_frag() && self.proto() == TCP && !self.have_tcp_hl && th_off == 5 {
            let th_delta = (delta - (delta & 3)).min(40) as usize;
            self.shift_right(self.trans + 20, th_delta);
            self.set(
                self.trans + 12,
                (((20 + th_delta) >> 2) as u8) << 4 | (self.get(self.trans + 12) & 0xf),
            );
            delta -= th_delta as i64;
        }
        if delta > 0 && !self.have_ip_hl && self.get(0) & 0xf == 5 {
            let ip_delta = (delta - (delta & 3)).min(40) as usize;
            self.shift_right(20, ip_delta);
            self.set(0, (self.get(0) & 0xf0) | ((20 + ip_delta) >> 2) as u8);
            self.trans = 20 + ip_delta;
        }
    }

    /// Grows the packet by `n` bytes, moving the bytes from `at` on `n` bytes later
    /// and zeroing (EOL) the `n` bytes at `at`.
    fn shift_right(&mut self, at: usize, n: usize) {
        let old_len = self.len;
        self.put(n);
        if at <= old_len && self.len == old_len + n {
            self.buf.copy_within(at..old_len, at + n);
        }
        for i in at..at + n {
            self.set(i, 0);
        }
    }

    fn inject(&mut self, f: Field, v: Value) {
        use Field::*;
        let num = match &v {
            Value::Num(n) => *n,
            _ => 0,
        };
        match f {
            Timestamp => {
                if let Value::Time(t) = v {
                    self.timestamp = t;
                }
            }
            TsSec => self.timestamp.sec = i64::from(num),
            TsUsec => self.timestamp.nsec = num.wrapping_mul(1000),
            TsUsec1 => {
                if let Value::Wide(w) = v {
                    self.timestamp =
                        packet::Timestamp::new((w / 1_000_000) as i64, (w % 1_000_000) as u32 * 1000);
                }
            }
            Count => self.extra_packets = num.saturating_sub(1),
            Paint | Link | Direction => self.paint = num as u8,
            Aggregate => self.aggregate = num,
            WireLen => self.want_len = num,
            IpSrc | IpDst | IpTos | IpDscp | IpEcn | IpTtl | IpFrag | IpFragoff | IpId | IpSum | IpProto
            | IpOpt | IpHl | IpLen | IpCaptureLen => self.inject_ip(f, v),
            Sport | Dport => {
                if !self.make_ip(0) || !self.make_transp() {
                    return;
                }
                let p = self.proto();
                if p != 0 && !matches!(p, TCP | UDP | DCCP | UDPLITE) {
                    return;
                }
                let at = self.trans + if f == Dport { 2 } else { 0 };
                self.set16(at, num as u16);
            }
            TcpSeq | TcpAck | TcpOff | TcpFlags | TcpWindow | TcpUrp | TcpOpt | TcpNtopt | TcpSack => {
                self.inject_tcp(f, v)
            }
            UdpLen => {
                if !self.make_ip(0) || !self.make_transp() {
                    return;
                }
                let p = self.proto();
                if p != 0 && p != UDP && p != UDPLITE {
                    return;
                }
                if self.transport_length() < 8 {
                    self.put((8 - self.transport_length()) as usize);
                }
                self.set16(self.trans + 4, num as u16);
            }
            IcmpType | IcmpTypeName | IcmpCode => self.inject_icmp(f, num),
            Payload | PayloadLen => self.inject_payload(f, v),
        }
    }

    fn inject_ip(&mut self, f: Field, v: Value) {
        use Field::*;
        if !self.make_ip(0) {
            return;
        }
        let num = match &v {
            Value::Num(n) => *n,
            _ => 0,
        };
        match (f, v) {
            (IpSrc, Value::Addr(a)) => self.set_bytes(12, &a),
            (IpDst, Value::Addr(a)) => self.set_bytes(16, &a),
            (IpTos, _) => self.set(1, num as u8),
            (IpDscp, _) => self.set(1, (self.get(1) & 3) | ((num << 2) as u8 & 0xfc)),
            (IpEcn, _) => self.set(1, (self.get(1) & 0xfc) | (num as u8 & 3)),
            (IpTtl, _) => self.set(8, num as u8),
            (IpFrag | IpFragoff, _) => self.set16(6, num as u16),
            (IpId, _) => self.set16(4, num as u16),
            (IpSum, _) => self.set16(10, num as u16),
            (IpProto, _) => self.set(9, num as u8),
            (IpOpt, Value::Bytes(opts)) => {
                self.have_ip_hl = true;
                if opts.is_empty() {
                    return;
                }
                let olen = opts.len();
                let ip_hl = (20 + olen + 3) & !3;
                if self.len < ip_hl {
                    self.put(ip_hl - self.len);
                }
                if ip_hl > usize::from(self.get(0) & 0xf) * 4 {
                    self.trans = ip_hl;
                    self.set(0, (self.get(0) & 0xf0) | (ip_hl >> 2) as u8);
                }
                self.set_bytes(20, &opts);
                // (Click clears as many bytes as the header is long, from the end
                // of the options: the first bytes after the header too.)
                for i in 20 + olen..ip_hl + 20 {
                    self.set(i, 0);
                }
            }
            (IpHl, _) => {
                self.have_ip_hl = true;
                let v = (num as usize + 3) & !3;
                let cur = usize::from(self.get(0) & 0xf) * 4;
                if v > cur {
                    let more = v - cur;
                    self.put(more);
                    self.trans = v;
                    for i in v - more..v {
                        self.set(i, 0);
                    }
                }
                self.set(0, (self.get(0) & 0xf0) | ((v >> 2) & 0xf) as u8);
            }
            (IpLen, _) => self.want_len = num,
            _ => {}
        }
    }

    fn inject_tcp(&mut self, f: Field, v: Value) {
        use Field::*;
        if !self.make_ip(TCP) || !self.make_transp() {
            return;
        }
        let t = self.trans;
        let num = match &v {
            Value::Num(n) => *n,
            _ => 0,
        };
        match (f, v) {
            (TcpSeq, _) => self.set_bytes(t + 4, &num.to_be_bytes()),
            (TcpAck, _) => self.set_bytes(t + 8, &num.to_be_bytes()),
            (TcpFlags, _) => {
                self.set(t + 13, num as u8);
                self.set(t + 12, (self.get(t + 12) & 0xf0) | ((num >> 8) as u8 & 0xf));
            }
            (TcpOff, _) => {
                let v = (num as usize + 3) & !3;
                let cur = usize::from(self.get(t + 12) >> 4) * 4;
                if v > cur {
                    let more = v - cur;
                    self.put(more);
                    for i in t + v - more..t + v {
                        self.set(i, 0);
                    }
                }
                self.set(t + 12, ((v >> 2) as u8) << 4 | (self.get(t + 12) & 0xf));
            }
            (TcpWindow, _) => self.set16(t + 14, num as u16),
            (TcpUrp, _) => self.set16(t + 18, num as u16),
            (TcpOpt | TcpNtopt | TcpSack, Value::Bytes(opts)) => {
                self.have_tcp_hl = true;
                if opts.is_empty() {
                    return;
                }
                let olen = opts.len();
                let th_off = (20 + olen + 3) & !3;
                if self.transport_length() < th_off as i64 {
                    self.put((th_off as i64 - self.transport_length()) as usize);
                }
                if th_off > usize::from(self.get(t + 12) >> 4) * 4 {
                    self.set(t + 12, ((th_off >> 2) as u8) << 4 | (self.get(t + 12) & 0xf));
                }
                self.set_bytes(t + 20, &opts);
                for i in t + 20 + olen..t + th_off + 20 {
                    self.set(i, 0);
                }
            }
            _ => {}
        }
    }

    fn inject_icmp(&mut self, f: Field, num: u32) {
        if !self.make_ip(ICMP) || !self.make_transp() {
            return;
        }
        if self.transport_length() < 8 {
            self.put((8 - self.transport_length()) as usize);
        }
        let t = self.trans;
        if f == Field::IcmpCode {
            self.set(t + 1, num as u8);
            return;
        }
        self.set(t, num as u8);
        // Timestamp and address mask messages have longer headers.
        let hl: i64 = match num {
            13 | 14 => 20,
            17 | 18 => 12,
            _ => 8,
        };
        if self.transport_length() < hl {
            self.put((hl - self.transport_length()) as usize);
        }
    }

    fn inject_payload(&mut self, f: Field, v: Value) {
        if self.make_ip(0) {
            self.make_transp();
        }
        let (off, _) = self.payload_info();
        match v {
            Value::Bytes(bytes) => {
                if bytes.is_empty() {
                    return;
                }
                let plen = bytes.len();
                self.account_payload_len(off, plen as u32);
                if off <= self.len && self.len - off < plen {
                    self.put(plen - (self.len - off));
                }
                self.set_bytes(off, &bytes);
            }
            Value::Num(n) if f == Field::PayloadLen => self.account_payload_len(off, n),
            _ => {}
        }
    }

    /// What `read_packet` does after the fields: the transport header, the IP and UDP
    /// lengths, checksums, the annotations.
    fn finish(mut self) -> Packet {
        if self.settings.flowid.is_some() {
            self.make_ip(0);
        }
        let mut dst = None;
        if self.ip {
            self.make_transp();
            let mut ip_len = u32::from(self.get16(2));
            if ip_len == 0 {
                ip_len = self.want_len;
                if ip_len > 0xffff {
                    ip_len = 0xffff;
                } else if ip_len == 0 {
                    ip_len = self.len as u32;
                }
                self.set16(2, ip_len as u16);
            }
            if self.proto() == UDP && self.first_frag() && self.get16(self.trans + 4) == 0 {
                self.set16(self.trans + 4, ip_len.wrapping_sub(self.trans as u32) as u16);
            }
            dst = Some([self.get(16), self.get(17), self.get(18), self.get(19)]);
            if self.settings.checksum {
                if ip_len as usize > self.len {
                    let old = self.len;
                    self.put(ip_len as usize - old);
                    for i in old..self.len {
                        self.buf[i] = 0;
                    }
                }
                self.set_checksums();
            }
        }
        let mut p = Packet::from_slice(&self.buf[..self.len]);
        if self.ip {
            p.set_network_header(0, self.trans);
        }
        let a = p.anno_mut();
        a.timestamp = self.timestamp;
        a.set_paint(self.paint);
        a.set_u32_at(AGGREGATE_ANNO_OFFSET, self.aggregate);
        a.set_u32_at(EXTRA_PACKETS_ANNO_OFFSET, self.extra_packets);
        if self.want_len as usize > self.len {
            a.set_extra_length(self.want_len - self.len as u32);
        }
        if let Some(d) = dst {
            p.set_dst_ip_anno(d);
        }
        p
    }

    fn set_checksums(&mut self) {
        use packet::checksum::{fold, pseudo_header_v4, sum};
        let hl = usize::from(self.get(0) & 0xf) * 4;
        self.set16(10, 0);
        let header: Vec<u8> = (0..hl).map(|i| self.get(i)).collect();
        self.set16(10, !fold(sum(&header, 0)));
        if self.get16(6) & 0x3fff != 0 {
            return;
        }
        let t = self.trans;
        let tl = self.len.saturating_sub(t);
        let at = match self.proto() {
            TCP => t + 16,
            UDP => t + 6,
            ICMP => t + 2,
            _ => return,
        };
        self.set16(at, 0);
        let segment: Vec<u8> = (t..t + tl).map(|i| self.get(i)).collect();
        let acc = sum(&segment, 0);
        let acc = if self.proto() == ICMP {
            acc
        } else {
            let src = [self.get(12), self.get(13), self.get(14), self.get(15)];
            let dst = [self.get(16), self.get(17), self.get(18), self.get(19)];
            fold(acc) as u32 + pseudo_header_v4(src, dst, self.proto(), tl as u16)
        };
        self.set16(at, !fold(acc));
    }
}

/// Why a field's text was refused.
pub(crate) struct BadValue;

/// Parses one field's text (Click's `ina` functions).
fn parse_value(f: Field, s: &str, minor_version: u32) -> Result<Value, BadValue> {
    use Field::*;
    let num = |max: u64| -> Result<Value, BadValue> {
        crate::args::FromArg::from_arg(s)
            .filter(|&v: &u64| v <= max)
            .map(|v| Value::Num(v as u32))
            .ok_or(BadValue)
    };
    match f {
        Timestamp => parse_time(s).map(Value::Time).ok_or(BadValue),
        TsUsec1 => <u64 as crate::args::FromArg>::from_arg(s)
            .map(Value::Wide)
            .ok_or(BadValue),
        Paint | Link | Direction => match s {
            ">" => Ok(Value::Num(0)),
            "<" => Ok(Value::Num(1)),
            _ => num(u64::from(u32::MAX)),
        },
        IpSrc | IpDst => crate::args::parse_ipv4(s)
            .map(|a: Ipv4Addr| Value::Addr(a.octets()))
            .ok_or(BadValue),
        IpFrag | IpFragoff => parse_fragoff(s, minor_version).map(Value::Num).ok_or(BadValue),
        IpProto => match s {
            "T" => Ok(Value::Num(u32::from(TCP))),
            "U" => Ok(Value::Num(u32::from(UDP))),
            "I" => Ok(Value::Num(u32::from(ICMP))),
            _ => num(255),
        },
        IpEcn => match s {
            "0" | "1" | "2" | "3" => Ok(Value::Num(u32::from(s.as_bytes()[0] - b'0'))),
            "no" | "-" => Ok(Value::Num(0)),
            "ect1" | "ECT(1)" => Ok(Value::Num(1)),
            "ect2" | "ECT(0)" => Ok(Value::Num(2)),
            "ce" | "CE" => Ok(Value::Num(3)),
            _ => Err(BadValue),
        },
        IpTos | IpDscp | IpTtl | IpHl | TcpOff => num(255),
        IpId | IpSum | Sport | Dport | TcpWindow | TcpUrp => num(0xffff),
        TsSec | TsUsec | Count | Aggregate | WireLen | IpLen | IpCaptureLen | TcpSeq | TcpAck | UdpLen
        | PayloadLen => num(u64::from(u32::MAX)),
        TcpFlags => parse_tcp_flags(s).map(Value::Num).ok_or(BadValue),
        IpOpt => opts(options::parse_ip(s.as_bytes())),
        TcpOpt => opts(options::parse_tcp(s.as_bytes(), options::TCP_ALL)),
        TcpNtopt => opts(options::parse_tcp(s.as_bytes(), options::TCP_NTALL)),
        TcpSack => opts(options::parse_tcp(s.as_bytes(), options::TCP_SACK)),
        IcmpType | IcmpTypeName => icmp_type_by_name(s)
            .map(|t| Value::Num(u32::from(t)))
            .map_or_else(|| num(255), Ok),
        // (Click also takes code names of the type the line gave; numbers only here.)
        IcmpCode => num(255),
        Payload => parse_payload(s).map(Value::Bytes).ok_or(BadValue),
    }
}

fn opts(parsed: Option<Vec<u8>>) -> Result<Value, BadValue> {
    parsed.map(Value::Bytes).ok_or(BadValue)
}

/// A quoted string (or a bare word), unquoted as Click's `cp_string`.
fn parse_payload(s: &str) -> Option<Vec<u8>> {
    if s.is_empty() {
        return None;
    }
    Some(crate::args::unquote_bytes(s))
}

/// `SEC[.FRAC]`, as Click's `cp_time`: fraction digits past nanoseconds round.
pub(crate) fn parse_time(s: &str) -> Option<Timestamp> {
    let (int, frac) = s.split_once('.').unwrap_or((s, ""));
    if (int.is_empty() && frac.is_empty())
        || !int.bytes().all(|c| c.is_ascii_digit())
        || !frac.bytes().all(|c| c.is_ascii_digit())
        || int.len() > 18
    {
        return None;
    }
    let mut sec: i64 = if int.is_empty() { 0 } else { int.parse().ok()? };
    let mut nsec: u32 = 0;
    for (i, c) in frac.bytes().enumerate() {
        let d = u32::from(c - b'0');
        if i < 9 {
            nsec = nsec * 10 + d;
        } else {
            if i == 9 && d >= 5 {
                nsec += 1;
            }
            if i >= 9 {
                break;
            }
        }
    }
    for _ in frac.len()..9 {
        nsec *= 10;
    }
    if nsec >= 1_000_000_000 {
        sec += 1;
        nsec -= 1_000_000_000;
    }
    Some(Timestamp::new(sec, nsec))
}

/// `ip_frag` and `ip_fragoff`: `.`, `!`, `F`, `f`, or an offset with `+` (MF) and `!`
/// (DF) after it, in bytes (8-byte units in version 1.0 dumps).
fn parse_fragoff(s: &str, minor_version: u32) -> Option<u32> {
    match s {
        "." => return Some(0),
        "!" => return Some(0x4000),
        "F" => return Some(0x2000),
        // An arbitrary non-zero offset.
        "f" => return Some(100),
        "" => return None,
        _ => {}
    }
    let digits = s.find(['+', '!']).unwrap_or(s.len());
    let mut v: u32 = if digits == 0 {
        0
    } else {
        crate::args::FromArg::from_arg(&s[..digits])?
    };
    if minor_version > 0 {
        v >>= 3;
    }
    for c in s[digits..].bytes() {
        match c {
            b'!' => v |= 0x4000,
            b'+' => v |= 0x2000,
            _ => return None,
        }
    }
    Some(v)
}

/// TCP flags: `.`, a number below 0x1000, or letters (`FSRPAUECN`, and `W`, `X`, `Y`
/// of old dumps).
fn parse_tcp_flags(s: &str) -> Option<u32> {
    if s == "." {
        return Some(0);
    }
    let first = *s.as_bytes().first()?;
    if first.is_ascii_digit() {
        return crate::args::FromArg::from_arg(s).filter(|&v: &u32| v < 0x1000);
    }
    let mut v = 0;
    for c in s.bytes() {
        let bit = match c {
            b'F' => 0,
            b'S' => 1,
            b'R' => 2,
            b'P' => 3,
            b'A' => 4,
            b'U' => 5,
            b'E' | b'X' => 6,
            b'C' | b'W' | b'Y' => 7,
            b'N' => 8,
            _ => return None,
        };
        v |= 1 << bit;
    }
    Some(v)
}

/// Splits a data line into `n` field texts: words separated by spaces, a double-quoted
/// string (with backslash escapes) kept whole; missing fields are empty.
pub(crate) fn split_line(line: &str, n: usize, out: &mut Vec<std::ops::Range<usize>>) {
    out.clear();
    let b = line.as_bytes();
    let mut i = 0;
    while i < b.len() && b[i].is_ascii_whitespace() {
        i += 1;
    }
    while out.len() < n {
        let start = i;
        while i < b.len() && !b[i].is_ascii_whitespace() {
            if b[i] == b'"' {
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
            }
            i = (i + 1).min(b.len());
        }
        out.push(start..i);
        while i < b.len() && b[i].is_ascii_whitespace() {
            i += 1;
        }
    }
}

/// What one data line gave.
pub(crate) struct Built {
    /// The packet, unless no field parsed.
    pub packet: Option<Packet>,
    /// Fields whose text was refused (and skipped).
    pub bad_fields: u32,
}

/// Builds the packet of one data line. `fields` are the `!data` columns (`None` for
/// ignored ones), `order` their indices in the order they apply.
pub(crate) fn build_packet(
    line: &str,
    fields: &[Option<Field>],
    order: &[usize],
    settings: BuildSettings,
    ranges: &mut Vec<std::ops::Range<usize>>,
) -> Built {
    split_line(line, fields.len(), ranges);
    let mut d = Odesc::new(settings);
    let mut parsed = 0;
    let mut bad_fields = 0;
    for &i in order {
        let Some(f) = fields[i] else {
            continue;
        };
        let text = line.get(ranges[i].clone()).unwrap_or("");
        if text.is_empty() || text == "-" {
            continue;
        }
        match parse_value(f, text, settings.minor_version) {
            Ok(v) => {
                d.inject(f, v);
                parsed += 1;
            }
            Err(BadValue) => bad_fields += 1,
        }
    }
    Built {
        packet: (parsed > 0).then(|| d.finish()),
        bad_fields,
    }
}
