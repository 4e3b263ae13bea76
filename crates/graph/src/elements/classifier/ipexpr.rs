//! The tcpdump-like pattern language of `IPClassifier` and `IPFilter`: lexer, name
//! tables, parser and the translation of each primitive into word tests.
//!
//! Grammar (Click's):
//! ```text
//! expr   ::= orexpr | orexpr ? expr : expr
//! orexpr ::= term | orexpr (or | ||) term
//! term   ::= factor | term (and | &&) factor | term factor
//! factor ::= (not | !) factor | ( expr ) | test
//! test   ::= true | false | QUALIFIERS [[POS:LEN]] [& MASK] [RELOP] [DATA]
//! ```
//! Qualifiers are `src`, `dst`, `src and dst`, `src or dst`, `ip`, protocol names and
//! type words (`host`, `net`, `port`, `proto`, `vers`, `hl`, `tos`, `dscp`, `ect`, `ce`,
//! `ttl`, `id`, `len`, `frag`, `unfrag`, `opt`, `win`, `type`). Missing qualifiers are
//! implied by the data (`80` after `port`, `www`, `syn`, `10.0.0.0/8`) or carried over
//! from the previous test (`src port 80 or 81`).

use super::program::{Base, Expr};
use crate::args::{parse_ipv4, unquote, FromArg, Ipv4Prefix};

const UNKNOWN: i32 = -1000;
const PROTO_ICMP: i32 = 1;
const PROTO_TCP: i32 = 6;
const PROTO_UDP: i32 = 17;
const PROTO_DCCP: i32 = 33;
const PROTO_TCP_OR_UDP: i32 = 0x101;
const PROTO_TRANSP: i32 = 0x102;

const SD_SRC: u8 = 1;
const SD_DST: u8 = 2;
const SD_AND: u8 = 3;
const SD_OR: u8 = 4;

/// Nesting limit for parentheses and negations, so hostile patterns cannot exhaust
/// the stack.
const MAX_DEPTH: usize = 200;

/// A header field: `bits` bits at bit offset `bit_off` of the IP header, or of the
/// transport header when `proto` is set (then only `proto` packets match).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Field {
    proto: i32,
    bit_off: u32,
    bits: u32,
}

const fn field(proto: i32, bit_off: u32, bits: u32) -> Field {
    Field { proto, bit_off, bits }
}

const F_VERSION: Field = field(0, 0, 4);
const F_HL: Field = field(0, 4, 4);
const F_TOS: Field = field(0, 8, 8);
const F_DSCP: Field = field(0, 8, 6);
const F_IPLEN: Field = field(0, 16, 16);
const F_ID: Field = field(0, 32, 16);
const F_TTL: Field = field(0, 64, 8);
const F_TCP_WIN: Field = field(PROTO_TCP, 112, 16);
const F_ICMP_TYPE: Field = field(PROTO_ICMP, 0, 8);

/// What a primitive tests (its type) or what its data word is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    None,
    Int,
    Host,
    Net,
    Proto,
    IpFrag,
    IpUnfrag,
    Port,
    TcpOpt,
    IpEct,
    IpCe,
    Field(Field),
}

/// Type words; `Some(None)` for syntax words handled by the parser itself.
fn type_word(w: &str) -> Option<Option<Kind>> {
    Some(Some(match w {
        "ce" => Kind::IpCe,
        "dscp" => Kind::Field(F_DSCP),
        "ect" => Kind::IpEct,
        "frag" => Kind::IpFrag,
        "hl" => Kind::Field(F_HL),
        "host" => Kind::Host,
        "id" => Kind::Field(F_ID),
        "len" => Kind::Field(F_IPLEN),
        "net" => Kind::Net,
        "opt" => Kind::TcpOpt,
        "port" => Kind::Port,
        "proto" => Kind::Proto,
        "tos" => Kind::Field(F_TOS),
        "ttl" => Kind::Field(F_TTL),
        "type" => Kind::Field(F_ICMP_TYPE),
        "unfrag" => Kind::IpUnfrag,
        "vers" => Kind::Field(F_VERSION),
        "win" => Kind::Field(F_TCP_WIN),
        "dest" | "dst" | "ether" | "ip" | "not" | "src" => return Some(None),
        _ => return None,
    }))
}

fn ip_proto(w: &str) -> Option<i32> {
    Some(match w {
        "icmp" => PROTO_ICMP,
        "igmp" => 2,
        "ipip" => 4,
        "tcp" => PROTO_TCP,
        "tcpudp" => PROTO_TCP_OR_UDP,
        "transp" => PROTO_TRANSP,
        "udp" => PROTO_UDP,
        _ => return None,
    })
}

fn tcp_opt(w: &str) -> Option<u32> {
    Some(match w {
        "ack" => 0x10,
        "fin" => 0x01,
        "psh" => 0x08,
        "rst" => 0x04,
        "syn" => 0x02,
        "urg" => 0x20,
        _ => return None,
    })
}

fn icmp_type(w: &str) -> Option<u32> {
    Some(match w {
        "echo" => 8,
        "echo-reply" => 0,
        "inforeq" => 15,
        "inforeq-reply" => 16,
        "maskreq" => 17,
        "maskreq-reply" => 18,
        "parameterproblem" => 12,
        "redirect" => 5,
        "routeradvert" => 9,
        "routersolicit" => 10,
        "sourcequench" => 4,
        "timeexceeded" => 11,
        "timestamp" => 13,
        "timestamp-reply" => 14,
        "unreachable" => 3,
        _ => return None,
    })
}

fn unparse_proto(p: i32) -> String {
    match p {
        UNKNOWN => String::new(),
        PROTO_ICMP => "icmp".into(),
        2 => "igmp".into(),
        4 => "ipip".into(),
        PROTO_TCP => "tcp".into(),
        PROTO_UDP => "udp".into(),
        PROTO_TCP_OR_UDP => "tcpudp".into(),
        PROTO_TRANSP => "transp".into(),
        p => format!("ip proto {}", p),
    }
}

fn unparse_type(srcdst: u8, k: Kind) -> String {
    let sd = match srcdst {
        SD_SRC => "src ",
        SD_DST => "dst ",
        SD_OR => "src or dst ",
        SD_AND => "src and dst ",
        _ => "",
    };
    let t = match k {
        Kind::None => "<none>".to_string(),
        Kind::Host => "ip host".into(),
        Kind::Net => "ip net".into(),
        Kind::Proto => "proto".into(),
        Kind::IpFrag => "ip frag".into(),
        Kind::IpUnfrag => "ip unfrag".into(),
        Kind::Port => "port".into(),
        Kind::TcpOpt => "tcp opt".into(),
        Kind::IpEct => "ip ect".into(),
        Kind::IpCe => "ip ce".into(),
        Kind::Int => "<unknown type>".into(),
        Kind::Field(f) => match f {
            F_IPLEN => "ip len".into(),
            F_ID => "ip id".into(),
            F_VERSION => "ip vers".into(),
            F_HL => "ip hl".into(),
            F_TOS => "ip tos".into(),
            F_DSCP => "ip dscp".into(),
            F_TTL => "ip ttl".into(),
            F_TCP_WIN => "tcp win".into(),
            F_ICMP_TYPE => "icmp type".into(),
            f if f.proto != 0 => format!("{}[...]", unparse_proto(f.proto)),
            _ => "ip[...]".into(),
        },
    };
    format!("{}{}", sd, t)
}

/// What a word means in the name tables.
enum Lookup {
    NotFound,
    /// A type word (`port`, `ttl`).
    Type(Kind),
    /// A value of the given kind (`tcp` is a protocol, `www` a port, `syn` a TCP
    /// option, `echo-reply` an ICMP type).
    Value(Kind, u32),
    /// Ambiguous or meaningless here; the message says which.
    Error(String),
}

/// Looks `word` up for a test of type `ty` (`Kind::None` if not known yet) and
/// transport protocol `proto`, as Click's `IPFilter::lookup` does.
fn lookup(word: &str, ty: Kind, proto: i32) -> Lookup {
    if ty == Kind::None {
        match type_word(word) {
            Some(Some(k)) => return Lookup::Type(k),
            Some(None) => return Lookup::NotFound,
            None => {}
        }
    }
    let found: [Option<(Kind, u32)>; 5] = [
        ip_proto(word).map(|p| (Kind::Proto, p as u32)),
        crate::args::port_name(word).map(|p| (Kind::Port, u32::from(p))),
        crate::args::port_name(word).map(|p| (Kind::Port, u32::from(p))),
        tcp_opt(word).map(|v| (Kind::TcpOpt, v)),
        icmp_type(word).map(|v| (Kind::Field(F_ICMP_TYPE), v)),
    ];
    if found.iter().all(Option::is_none) {
        return Lookup::NotFound;
    }
    let any = ty == Kind::None;
    let tcp_ok = proto == UNKNOWN || proto == PROTO_TCP || proto == PROTO_TCP_OR_UDP;
    let udp_ok = proto == UNKNOWN || proto == PROTO_UDP || proto == PROTO_TCP_OR_UDP;
    let fits = [
        any || ty == Kind::Proto,
        (any || ty == Kind::Port) && tcp_ok,
        (any || ty == Kind::Port) && udp_ok,
        (any || ty == Kind::TcpOpt) && tcp_ok,
        (any || ty == Kind::Field(F_ICMP_TYPE)) && (proto == UNKNOWN || proto == PROTO_ICMP),
    ];
    let mut usable: Vec<(Kind, u32)> = Vec::new();
    for (f, ok) in found.iter().zip(fits) {
        if let (Some(v), true) = (f, ok) {
            // The TCP and UDP port tables agree, so one answer stands for both.
            if !usable.contains(v) {
                usable.push(*v);
            }
        }
    }
    if usable.len() == 1 {
        let (k, v) = usable[0];
        return Lookup::Value(k, v);
    }
    let mut tries: Vec<String> = Vec::new();
    for (k, _) in found.iter().flatten() {
        let t = format!("'{} {}'", unparse_type(0, *k), word);
        if !tries.contains(&t) {
            tries.push(t);
        }
    }
    let mut what = Vec::new();
    if ty != Kind::None {
        what.push(unparse_type(0, ty));
    }
    let p = unparse_proto(proto);
    if !p.is_empty() {
        what.push(p);
    }
    what.push(word.to_string());
    Lookup::Error(format!(
        "'{}' is {}; try {}",
        what.join(" "),
        if usable.len() > 1 {
            "ambiguous"
        } else {
            "meaningless"
        },
        tries.join(", ")
    ))
}

/// Splits a pattern into words as Click's IPFilter does: operators and brackets are
/// words of their own; words are runs of letters, digits and `-./@_:`.
pub fn separate_text(text: &str) -> Vec<String> {
    let s = text.as_bytes();
    let len = s.len();
    let mut words = Vec::new();
    let mut pos = 0;
    while pos < len {
        while pos < len && s[pos].is_ascii_whitespace() {
            pos += 1;
        }
        if pos >= len {
            break;
        }
        let c = s[pos];
        let n = match c {
            b'&' | b'|' if pos + 1 < len && s[pos + 1] == c => 2,
            b'<' | b'>' | b'!' | b'=' if pos + 1 < len && s[pos + 1] == b'=' => 2,
            b'&' | b'|' | b'<' | b'>' | b'!' | b'=' => 1,
            b'(' | b')' | b'[' | b']' | b',' | b';' | b'?' => 1,
            _ => {
                let word = |b: u8| b.is_ascii_alphanumeric() || b"-./@_:".contains(&b);
                let mut e = pos;
                while e < len && word(s[e]) {
                    e += 1;
                }
                if e == pos {
                    // One character of its own (possibly multi-byte UTF-8).
                    let ch = text[pos..].chars().next().map_or(1, char::len_utf8);
                    ch
                } else {
                    e - pos
                }
            }
        };
        words.push(text[pos..pos + n].to_string());
        pos += n;
    }
    words
}

fn parse_int(s: &str) -> Option<i32> {
    i32::from_arg(s)
}

fn parse_uint(s: &str) -> Option<u32> {
    u32::from_arg(s)
}

fn parse_addr(s: &str) -> Option<u32> {
    parse_ipv4(s).map(u32::from)
}

fn parse_prefix(s: &str) -> Option<(u32, u32)> {
    if !s.contains('/') {
        return None;
    }
    Ipv4Prefix::from_arg(s).map(|p| (u32::from(p.addr), u32::from(p.mask)))
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Eq,
    Gt,
    Lt,
}

/// A user-supplied `& MASK`: an integer or an IP address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mask {
    Int(u32),
    Addr(u32),
}

impl Mask {
    fn value(self) -> u32 {
        match self {
            Mask::Int(v) | Mask::Addr(v) => v,
        }
    }
}

/// One test under construction (Click's `IPFilter::Primitive`).
#[derive(Clone, Copy, Debug)]
struct Prim {
    ty: Kind,
    data: Kind,
    op: Op,
    negated: bool,
    srcdst: u8,
    transp: i32,
    u: u32,
    mask: u32,
    /// Set when the comparison is always true or false whatever the packet.
    constant: Option<bool>,
}

impl Prim {
    fn new() -> Prim {
        Prim {
            ty: Kind::None,
            data: Kind::None,
            op: Op::Eq,
            negated: false,
            srcdst: 0,
            transp: UNKNOWN,
            u: 0,
            mask: 0,
            constant: None,
        }
    }

    fn set_type(&mut self, k: Kind) -> Result<(), String> {
        if self.ty != Kind::None {
            return Err("type specified twice".into());
        }
        self.ty = k;
        Ok(())
    }

    fn set_srcdst(&mut self, sd: u8) -> Result<(), String> {
        if self.srcdst != 0 {
            return Err("'src' or 'dst' specified twice".into());
        }
        self.srcdst = sd;
        Ok(())
    }

    fn set_transp(&mut self, p: i32) -> Result<(), String> {
        if self.transp != UNKNOWN && self.transp != p {
            return Err("transport protocol specified twice".into());
        }
        self.transp = p;
        Ok(())
    }

    fn type_err(&self, msg: &str) -> String {
        format!("'{}': {}", unparse_type(self.srcdst, self.ty), msg)
    }

    /// Fits value and operator to a field of `full` bits-mask, with an optional user
    /// mask (Click's `Primitive::set_mask`).
    fn set_mask(&mut self, full: u32, provided: Option<u32>) -> Result<(), String> {
        let data = self.u;
        let this_mask = provided.unwrap_or(full);
        if this_mask & full != this_mask {
            return Err(format!(
                "'{}': mask out of range, bound 0x{:X}",
                unparse_type(self.srcdst, self.ty),
                full
            ));
        }
        if self.op != Op::Eq {
            if (self.op == Op::Lt && (data == 0 || data > this_mask))
                || (self.op == Op::Gt && data >= this_mask)
            {
                let will_be = if self.op == Op::Lt && data > this_mask {
                    !self.negated
                } else {
                    self.negated
                };
                self.constant = Some(will_be);
                self.op = Op::Eq;
                self.negated = false;
                self.u = 0;
                self.mask = 0;
                return Ok(());
            }
            // value < X  is  !(value > X-1)
            if self.op == Op::Lt {
                self.u -= 1;
                self.negated = !self.negated;
                self.op = Op::Gt;
            }
            self.mask = this_mask;
            // Against a partial mask, "x > u" is "x > the largest maskable value <= u".
            let missing = self.u & !this_mask;
            if missing != 0 {
                let below = (1u32 << (31 - missing.leading_zeros())) - 1;
                self.u = (self.u | below) & this_mask;
            }
            return Ok(());
        }
        if data > full {
            return Err(format!(
                "'{}': out of range, bound {}",
                unparse_type(self.srcdst, self.ty),
                full
            ));
        }
        self.u = data;
        self.mask = this_mask;
        Ok(())
    }

    /// Completes the primitive from the previous one and checks that its parts agree
    /// (Click's `Primitive::check`).
    fn check(&mut self, prev: &Prim, mask: Option<Mask>) -> Result<(), String> {
        if self.ty == Kind::None {
            let mut d = self.data;
            loop {
                match d {
                    Kind::Host | Kind::Net | Kind::TcpOpt => {
                        self.ty = d;
                        if self.srcdst == 0 {
                            self.srcdst = prev.srcdst;
                        }
                    }
                    Kind::Proto => self.ty = Kind::Proto,
                    Kind::Port => {
                        self.ty = Kind::Port;
                        if self.srcdst == 0 {
                            self.srcdst = prev.srcdst;
                        }
                        if self.transp == UNKNOWN {
                            self.transp = prev.transp;
                        }
                    }
                    Kind::Int => {
                        if !matches!(prev.ty, Kind::Field(_) | Kind::Proto | Kind::Port) {
                            return Err("specify header field or 'port'".into());
                        }
                        self.data = prev.ty;
                        d = prev.ty;
                        continue;
                    }
                    Kind::None => {
                        if self.transp != UNKNOWN {
                            self.ty = Kind::Proto;
                        } else {
                            return Err("partial directive".into());
                        }
                    }
                    Kind::Field(f) => {
                        self.ty = d;
                        if f.proto != 0 && self.transp == UNKNOWN {
                            self.transp = f.proto;
                        }
                    }
                    other => {
                        return Err(format!("unknown type '{}'", unparse_type(0, other)));
                    }
                }
                break;
            }
        }

        let int_mask = |m: Option<Mask>| -> Result<Option<u32>, ()> {
            match m {
                None => Ok(None),
                Some(Mask::Int(v)) => Ok(Some(v)),
                Some(Mask::Addr(_)) => Err(()),
            }
        };

        match self.ty {
            Kind::Host | Kind::Net => {
                if self.data != self.ty {
                    return Err(self.type_err("address missing"));
                }
                if self.op != Op::Eq {
                    return Err(self.type_err("operator not supported"));
                }
                if self.ty == Kind::Host {
                    self.mask = u32::MAX;
                }
                self.ty = Kind::Host;
                if let Some(m) = mask {
                    self.mask = m.value();
                }
            }
            Kind::Proto => {
                let mut known = true;
                let named = self.data != Kind::Int;
                if self.data == Kind::Int || self.data == Kind::Proto {
                    if self.transp != UNKNOWN && self.transp as u32 != self.u {
                        return Err(self.type_err("specified twice"));
                    }
                    self.data = Kind::None;
                } else if self.transp == UNKNOWN {
                    known = false;
                } else {
                    self.u = self.transp as u32;
                }
                self.transp = UNKNOWN;
                if self.data != Kind::None || !known {
                    return Err(self.type_err("value missing"));
                }
                let u = self.u as i32;
                if named && (u == PROTO_TCP_OR_UDP || u == PROTO_TRANSP) {
                    if self.op != Op::Eq || mask.is_some() {
                        return Err(format!("'{}': operator or mask not supported", unparse_proto(u)));
                    }
                    self.mask = 0xFF;
                } else {
                    let m = int_mask(mask).map_err(|_| self.type_err("bad mask"))?;
                    self.set_mask(0xFF, m)?;
                }
                if self.op == Op::Eq && self.mask == 0xFF && !self.negated && self.constant.is_none() {
                    self.transp = self.u as i32;
                }
            }
            Kind::Port => {
                if self.data == Kind::Int {
                    self.data = Kind::Port;
                }
                if self.data != Kind::Port {
                    return Err(self.type_err("value missing"));
                }
                if self.transp == UNKNOWN {
                    self.transp = PROTO_TCP_OR_UDP;
                } else if ![PROTO_TCP, PROTO_UDP, PROTO_TCP_OR_UDP, PROTO_DCCP].contains(&self.transp) {
                    return Err(format!("'port': bad protocol {}", self.transp));
                }
                let m = int_mask(mask).map_err(|_| self.type_err("bad mask"))?;
                self.set_mask(0xFFFF, m)?;
            }
            Kind::TcpOpt => {
                if self.data == Kind::Int {
                    self.data = Kind::TcpOpt;
                }
                if self.data != Kind::TcpOpt {
                    return Err(self.type_err("value missing"));
                }
                if self.transp == UNKNOWN {
                    self.transp = PROTO_TCP;
                } else if self.transp != PROTO_TCP {
                    return Err(format!("'tcp opt': bad protocol {}", self.transp));
                }
                if self.op != Op::Eq || self.negated || mask.is_some() {
                    return Err(self.type_err("operator or mask not supported"));
                }
                if self.u > 255 {
                    return Err(format!("'tcp opt': value {} out of range", self.u as i32));
                }
                self.mask = self.u;
            }
            Kind::IpEct => {
                if self.data != Kind::None && self.data != Kind::Int {
                    return Err(self.type_err("value missing"));
                }
                let m = if self.data == Kind::None {
                    self.u = 0;
                    self.negated = true;
                    mask.map(Mask::value)
                } else {
                    int_mask(mask).map_err(|_| self.type_err("bad mask"))?
                };
                self.set_mask(0x3, m)?;
                self.ty = Kind::Field(F_TOS);
            }
            Kind::IpCe => {
                if self.data != Kind::None || mask.is_some() {
                    return Err(self.type_err("value not supported"));
                }
                self.mask = 0x3;
                self.u = 0x3;
                self.ty = Kind::Field(F_TOS);
            }
            Kind::IpFrag | Kind::IpUnfrag => {
                if self.data != Kind::None || mask.is_some() {
                    return Err(self.type_err("value not supported"));
                }
                if self.ty == Kind::IpUnfrag {
                    self.negated = true;
                    self.ty = Kind::IpFrag;
                }
            }
            Kind::Field(f) => {
                if self.data != Kind::Int && self.data != self.ty {
                    return Err(self.type_err("value missing"));
                }
                let m = int_mask(mask).map_err(|_| self.type_err("bad mask"))?;
                let full = if f.bits >= 32 {
                    u32::MAX
                } else {
                    (1u32 << f.bits) - 1
                };
                self.set_mask(full, m)?;
            }
            _ => {}
        }

        if matches!(self.ty, Kind::Host | Kind::Port) && self.srcdst == 0 {
            self.srcdst = SD_OR;
        }
        Ok(())
    }

    /// `field & mask OP value` on the word at `base+offset`, the field `shift` bits up.
    fn comparison(&self, base: Base, offset: u32, shift: u32, apply_negation: bool) -> Expr {
        if let Some(c) = self.constant {
            return if c { Expr::True } else { Expr::False };
        }
        let e = match self.op {
            Op::Eq | Op::Lt => Expr::test(base, offset, (self.u & self.mask) << shift, self.mask << shift),
            Op::Gt => {
                // x > u  iff  at some bit b where u has 0, x has 1 and x agrees with u
                // on every (masked) bit above b.
                let (u, m) = (self.u & self.mask, self.mask);
                let mut alts = Vec::new();
                for b in (0..32).rev() {
                    let bit = 1u32 << b;
                    if m & bit == 0 || u & bit != 0 {
                        continue;
                    }
                    let above = if b == 31 { 0 } else { u32::MAX << (b + 1) };
                    let tm = (m & above) | bit;
                    let tv = (u & above) | bit;
                    alts.push(Expr::test(base, offset, tv << shift, tm << shift));
                }
                Expr::or(alts)
            }
        };
        if self.negated && apply_negation {
            e.negate_keep_short()
        } else {
            e
        }
    }

    fn src_dst(&self, src: Expr, dst: Expr) -> Expr {
        let e = match self.srcdst {
            SD_SRC => src,
            SD_DST => dst,
            SD_AND => Expr::and(vec![src, dst]),
            _ => Expr::or(vec![src, dst]),
        };
        if self.negated {
            e.negate_keep_short()
        } else {
            e
        }
    }

    /// The primitive as word tests (Click's `Primitive::compile`).
    fn compile(&self) -> Expr {
        let mut parts = Vec::new();
        if self.transp != UNKNOWN {
            parts.push(proto_test(self.transp));
        }
        let transport = match self.ty {
            Kind::Port | Kind::TcpOpt => true,
            Kind::Field(f) => f.proto != 0,
            _ => false,
        };
        if transport {
            // Only first fragments carry transport headers: fragment offset == 0.
            parts.push(Expr::test(Base::Net, 4, 0, 0x0000_1FFF));
        }
        match self.ty {
            Kind::Host => {
                let src = self.comparison(Base::Net, 12, 0, false);
                let dst = self.comparison(Base::Net, 16, 0, false);
                parts.push(self.src_dst(src, dst));
            }
            Kind::Proto => {
                let u = self.u as i32;
                if u == PROTO_TCP_OR_UDP || u == PROTO_TRANSP {
                    if self.negated {
                        parts.push(proto_test(u).negate_keep_short());
                    }
                } else {
                    parts.push(self.comparison(Base::Net, 8, 16, true));
                }
            }
            Kind::IpFrag => {
                let t = Expr::test(Base::Net, 4, 0, 0x0000_3FFF);
                parts.push(if self.negated { t } else { t.negate_keep_short() });
            }
            Kind::Port => {
                let src = self.comparison(Base::Transp, 0, 16, false);
                let dst = self.comparison(Base::Transp, 0, 0, false);
                parts.push(self.src_dst(src, dst));
            }
            Kind::TcpOpt => {
                parts.push(Expr::test(Base::Transp, 12, self.u << 16, self.mask << 16));
            }
            Kind::Field(f) => {
                let word = (f.bit_off >> 3) & !3;
                let bit = f.bit_off & 31;
                let base = if f.proto != 0 { Base::Transp } else { Base::Net };
                parts.push(self.comparison(base, word, 32 - (bit + f.bits), true));
            }
            _ => {}
        }
        Expr::and(parts)
    }
}

/// The IP protocol byte equals `p` (`tcpudp`: TCP or UDP; `transp`: anything).
fn proto_test(p: i32) -> Expr {
    let one = |p: i32| Expr::test(Base::Net, 8, (p as u32 & 0xFF) << 16, 0x00FF_0000);
    match p {
        PROTO_TCP_OR_UDP => Expr::or(vec![one(PROTO_TCP), one(PROTO_UDP)]),
        PROTO_TRANSP => Expr::True,
        p => one(p),
    }
}

struct Parser<'a> {
    words: &'a [String],
    pos: usize,
    prev: Prim,
    depth: usize,
}

impl<'a> Parser<'a> {
    fn peek(&self) -> Option<&'a str> {
        self.words.get(self.pos).map(String::as_str)
    }

    /// The word at `p` if another word follows it (Click looks at brackets, masks and
    /// operators only then).
    fn lookahead(&self, p: usize) -> Option<&'a str> {
        if p + 1 < self.words.len() {
            Some(self.words[p].as_str())
        } else {
            None
        }
    }

    fn expr(&mut self) -> Result<Expr, String> {
        let c = self.orexpr()?;
        if self.peek() != Some("?") {
            return Ok(c);
        }
        self.pos += 1;
        // Each `?:` nests its branches one level deeper, like a parenthesis: a long
        // chain of them must end in an error, not exhaust the stack.
        if self.depth >= MAX_DEPTH {
            return Err("expression nested too deeply".into());
        }
        self.depth += 1;
        let r = self.branches();
        self.depth -= 1;
        let (a, b) = r?;
        Ok(Expr::Cond(Box::new(c), Box::new(a), Box::new(b)))
    }

    /// The two branches of a `?:` after its `?`.
    fn branches(&mut self) -> Result<(Expr, Expr), String> {
        let a = self.expr()?;
        if self.peek() != Some(":") {
            return Err("missing ':' in ternary expression".into());
        }
        self.pos += 1;
        Ok((a, self.expr()?))
    }

    fn orexpr(&mut self) -> Result<Expr, String> {
        let mut parts = vec![self.term()?];
        while matches!(self.peek(), Some("or") | Some("||")) {
            self.pos += 1;
            parts.push(self.term()?);
        }
        Ok(Expr::or(parts))
    }

    fn term(&mut self) -> Result<Expr, String> {
        let mut parts = Vec::new();
        let mut required = true;
        loop {
            let start = self.pos;
            if let Some(e) = self.factor()? {
                parts.push(e);
            }
            if self.pos == start {
                if required {
                    return Err("missing expression".into());
                }
                break;
            }
            if matches!(self.peek(), Some("and") | Some("&&")) {
                self.pos += 1;
                required = true;
            } else {
                required = false;
            }
        }
        Ok(Expr::and(parts))
    }

    fn factor(&mut self) -> Result<Option<Expr>, String> {
        if self.depth >= MAX_DEPTH {
            return Err("expression nested too deeply".into());
        }
        self.depth += 1;
        let r = self.factor_inner();
        self.depth -= 1;
        r
    }

    fn factor_inner(&mut self) -> Result<Option<Expr>, String> {
        match self.peek() {
            Some(w @ ("not" | "!")) => {
                self.pos += 1;
                let start = self.pos;
                let f = self.factor()?;
                match f {
                    Some(f) if self.pos != start => Ok(Some(f.not())),
                    _ => Err(format!("missing expression after '{}'", w)),
                }
            }
            Some("(") => {
                self.pos += 1;
                let e = self.expr()?;
                if self.peek() == Some(")") {
                    self.pos += 1;
                } else {
                    return Err("missing ')'".into());
                }
                Ok(Some(e))
            }
            _ => self.test(),
        }
    }

    fn brackets(&self, prim: &mut Prim, pos: usize) -> Result<usize, String> {
        let mut p = pos + 1;
        let mut comb = String::new();
        while p < self.words.len() && self.words[p] != "]" {
            comb.push_str(&self.words[p]);
            p += 1;
        }
        if p >= self.words.len() {
            return Err("missing ']'".into());
        }
        p += 1;
        let syntax = || "syntax error after '[', expected '[POS]' or '[POS:LEN]'".to_string();
        let num = |s: &str| parse_int(s).filter(|v| (0..=8191).contains(v));
        let (fpos, len) = if let Some((a, b)) = comb.split_once(':').filter(|(_, b)| !b.is_empty()) {
            (num(a).ok_or_else(syntax)?, parse_int(b).ok_or_else(syntax)?)
        } else if let Some((a, b)) = comb.split_once(',').filter(|(_, b)| !b.is_empty()) {
            let a = num(a).ok_or_else(syntax)?;
            let b = parse_int(b).ok_or_else(syntax)?;
            (a, b.saturating_sub(a).saturating_add(1))
        } else {
            (num(&comb).ok_or_else(syntax)?, 1)
        };
        if !(1..=4).contains(&len) {
            return Err("LEN in '[POS:LEN]' out of range, should be between 1 and 4".into());
        }
        let (bit_off, bits) = (fpos as u32 * 8, len as u32 * 8);
        if bit_off & !31 != (bit_off + bits - 1) & !31 {
            return Err(format!("field [{}:{}] does not fit in a single word", fpos, len));
        }
        let proto = if prim.transp == UNKNOWN { 0 } else { prim.transp };
        prim.set_type(Kind::Field(Field { proto, bit_off, bits }))?;
        Ok(p)
    }

    fn test(&mut self) -> Result<Option<Expr>, String> {
        let words = self.words;
        let Some(first) = self.peek() else {
            return Ok(None);
        };
        match first {
            ")" | "||" | "or" | "?" | ":" => return Ok(None),
            "true" => {
                self.pos += 1;
                return Ok(Some(Expr::True));
            }
            "false" => {
                self.pos += 1;
                return Ok(Some(Expr::False));
            }
            _ => {}
        }

        let first_pos = self.pos;
        let mut pos = self.pos;
        let mut prim = Prim::new();
        let mut header = false;
        let mut negated = false;

        // qualifiers
        while pos < words.len() {
            let wd = words[pos].as_str();
            match lookup(wd, Kind::None, UNKNOWN) {
                Lookup::Type(k) => {
                    prim.set_type(k)?;
                    if let Kind::Field(f) = k {
                        if f.proto != 0 {
                            prim.set_transp(f.proto)?;
                        }
                    }
                }
                Lookup::Value(Kind::Proto, p) => prim.set_transp(p as i32)?,
                Lookup::NotFound => match wd {
                    "src" => {
                        let next2 = words.get(pos + 2).map(String::as_str);
                        let next1 = words.get(pos + 1).map(String::as_str);
                        if matches!(next2, Some("dst") | Some("dest"))
                            && matches!(next1, Some("and") | Some("&&"))
                        {
                            prim.set_srcdst(SD_AND)?;
                            pos += 2;
                        } else if matches!(next2, Some("dst") | Some("dest"))
                            && matches!(next1, Some("or") | Some("||"))
                        {
                            prim.set_srcdst(SD_OR)?;
                            pos += 2;
                        } else {
                            prim.set_srcdst(SD_SRC)?;
                        }
                    }
                    "dst" | "dest" => prim.set_srcdst(SD_DST)?,
                    "ip" => {
                        if header {
                            break;
                        }
                        header = true;
                    }
                    "ether" => return Err("'ether host' is not supported".into()),
                    "not" | "!" => negated = !negated,
                    _ => break,
                },
                _ => break,
            }
            pos += 1;
        }
        if pos != first_pos {
            self.prev = Prim::new();
        }

        // optional [POS:LEN]
        let mut wd = self.lookahead(pos);
        if wd == Some("[") && pos > first_pos && prim.ty == Kind::None {
            pos = self.brackets(&mut prim, pos)?;
            wd = self.lookahead(pos);
        }

        // optional & MASK
        let mut mask = None;
        if wd == Some("&") {
            let m = words[pos + 1].as_str();
            if let Some(v) = parse_uint(m) {
                mask = Some(Mask::Int(v));
                pos += 2;
            } else if let Some(a) = parse_addr(m) {
                mask = Some(Mask::Addr(a));
                pos += 2;
            }
            if mask.is_some_and(|m| m.value() == 0) {
                return Err("zero mask ignored".into());
            }
            wd = self.lookahead(pos);
        }

        // optional relational operator
        pos += 1;
        match wd {
            Some("=") | Some("==") => {}
            Some("!=") => prim.negated = true,
            Some(">") => prim.op = Op::Gt,
            Some("<") => prim.op = Op::Lt,
            Some(">=") => {
                prim.op = Op::Lt;
                prim.negated = true;
            }
            Some("<=") => {
                prim.op = Op::Gt;
                prim.negated = true;
            }
            _ => pos -= 1,
        }

        // data
        if pos < words.len() {
            let wd = words[pos].as_str();
            pos += 1;
            match lookup(wd, prim.ty, prim.transp) {
                Lookup::Error(msg) => return Err(msg),
                Lookup::Value(k, v) => {
                    prim.data = k;
                    prim.u = v;
                }
                Lookup::NotFound | Lookup::Type(_) => {
                    if let Some(i) = parse_int(wd) {
                        prim.data = Kind::Int;
                        prim.u = i as u32;
                    } else if let Some(a) = parse_addr(wd) {
                        prim.u = a;
                        let masked =
                            words.get(pos).map(String::as_str) == Some("mask") && pos + 1 < words.len();
                        match masked.then(|| parse_addr(&words[pos + 1])).flatten() {
                            Some(m) => {
                                pos += 2;
                                prim.data = Kind::Net;
                                prim.mask = m;
                            }
                            None => prim.data = Kind::Host,
                        }
                    } else if let Some((a, m)) = parse_prefix(wd) {
                        prim.data = Kind::Net;
                        prim.u = a;
                        prim.mask = m;
                    } else {
                        if prim.op != Op::Eq || prim.negated {
                            return Err(format!("dangling operator near '{}'", wd));
                        }
                        pos -= 1;
                    }
                }
            }
        }

        if pos == first_pos {
            return Err(format!("empty term near '{}'", words[first_pos]));
        }
        self.pos = pos;

        prim.check(&self.prev, mask)?;
        let e = prim.compile();
        self.prev = prim;
        Ok(Some(if negated { e.not() } else { e }))
    }
}

/// What an `IPFilter` pattern does with matching packets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    Output(u32),
    Drop,
}

/// Parses one `IPFilter` pattern `ACTION [EXPRESSION]` (number `argno`). An
/// `IPClassifier` pattern N is the `IPFilter` pattern `N PATTERN`.
pub fn parse_filter_pattern(argno: usize, pattern: &str, noutputs: usize) -> Result<(Action, Expr), String> {
    let words = separate_text(&unquote(pattern));
    if words.is_empty() {
        return Err(format!("empty pattern {}", argno));
    }
    let prefix = |m: String| format!("pattern {}: {}", argno, m);
    let action = match words[0].as_str() {
        "allow" => {
            if noutputs == 0 {
                return Err(prefix("'allow' is meaningless, element has zero outputs".into()));
            }
            Action::Output(0)
        }
        "deny" | "drop" => Action::Drop,
        w => match parse_int(w) {
            Some(n) if n >= 0 && (n as usize) < noutputs => Action::Output(n as u32),
            Some(n) => return Err(prefix(format!("slot '{}' out of range", n))),
            None => return Err(prefix(format!("unknown slot ID '{}'", w))),
        },
    };
    if words.len() == 1 || (words.len() == 2 && matches!(words[1].as_str(), "-" | "any" | "all")) {
        return Ok((action, Expr::True));
    }
    let mut p = Parser {
        words: &words,
        pos: 1,
        prev: Prim::new(),
        depth: 0,
    };
    let e = p.expr().map_err(prefix)?;
    if p.pos < words.len() {
        return Err(prefix(format!("garbage after expression at '{}'", words[p.pos])));
    }
    Ok((action, e))
}
