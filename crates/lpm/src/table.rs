//! Route table files: one `PREFIX/LEN NEXTHOP` per line, IPv4 and IPv6 mixed; `#` starts
//! a comment (whole line or after the route); blank lines are skipped. Errors name the
//! file and line: `FILE:LINE: reason`. An MRT routing table dump is read as well
//! ([`crate::mrt`]), and either kind of file gzip- or bzip2-compressed ([`load`]). A prefix with host bits set after its length is
//! loaded as its network and reported in [`RouteTable::host_bits`].

use std::fmt;
use std::net::IpAddr;
use std::path::Path;

/// The routes of a table file, per family, in file order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RouteTable {
    pub v4: Vec<(u32, u8, u32)>,
    pub v6: Vec<(u128, u8, u32)>,
    /// Lines whose prefix had host bits set after its length (`10.1.2.3/8`); each was
    /// loaded as its network (`10.0.0.0/8`), as DPDK's `rte_fib_add` takes it. See
    /// [`RouteTable::host_bits_warning`].
    pub host_bits: Vec<HostBits>,
}

/// A prefix written with host bits set after its length, and the network it was
/// loaded as.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostBits {
    /// 1-based line number.
    pub line: usize,
    /// The prefix as written.
    pub written: String,
    /// The network loaded in its place.
    pub network: Prefix,
}

impl RouteTable {
    /// One line telling the user which prefixes were loaded as their network
    /// (`FILE:LINE: ...`, naming the first and counting the others), or `None` when
    /// every prefix was written as a network.
    pub fn host_bits_warning(&self, origin: &str) -> Option<String> {
        let first = self.host_bits.first()?;
        let more = match self.host_bits.len() - 1 {
            0 => String::new(),
            1 => " (and 1 more line like it)".to_string(),
            n => format!(" (and {} more lines like it)", n),
        };
        Some(format!(
            "{}:{}: {} has host bits set after the prefix length; loaded as {}{}",
            origin, first.line, first.written, first.network, more
        ))
    }
}

/// Why a table could not be loaded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoadError {
    /// The file name (or other origin) as given.
    pub origin: String,
    /// 1-based line number; `None` when the file itself could not be read.
    pub line: Option<usize>,
    pub reason: String,
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(l) => write!(f, "{}:{}: {}", self.origin, l, self.reason),
            None => write!(f, "{}: {}", self.origin, self.reason),
        }
    }
}

impl std::error::Error for LoadError {}

/// Largest next hop a table line may give (the tables' own limit).
pub const MAX_NEXT_HOP: u32 = u32::MAX - 1;

/// A parsed prefix of either family.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Prefix {
    V4(u32, u8),
    V6(u128, u8),
}

impl fmt::Display for Prefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Prefix::V4(a, l) => write!(f, "{}/{}", std::net::Ipv4Addr::from(a), l),
            Prefix::V6(a, l) => write!(f, "{}/{}", std::net::Ipv6Addr::from(a), l),
        }
    }
}

/// `s` as a decimal number: ASCII digits only (`str::parse` also takes a leading `+`).
fn decimal(s: &str) -> Option<u32> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// At most the first 64 bytes of a field an error quotes, then "…": a line of a bad
/// (or decompressed) file can be any length.
fn clip(s: &str) -> std::borrow::Cow<'_, str> {
    const MAX: usize = 64;
    if s.len() <= MAX {
        return s.into();
    }
    let mut end = MAX;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end]).into()
}

/// Parses `ADDR/LEN` into its network, and whether `ADDR` had host bits set after the
/// length (they are cleared: `10.1.2.3/8` is `10.0.0.0/8`).
pub fn parse_prefix(s: &str) -> Result<(Prefix, bool), String> {
    let (addr, len) = s
        .split_once('/')
        .ok_or_else(|| format!("expected PREFIX/LEN, found {:?}", clip(s)))?;
    let ip: IpAddr = addr
        .parse()
        .map_err(|_| format!("{:?} is not an IPv4 or IPv6 address", clip(addr)))?;
    let max = if ip.is_ipv4() { 32 } else { 128 };
    let len: u8 = match decimal(len) {
        Some(l) if l <= max => l as u8,
        _ => {
            return Err(format!(
                "prefix length {:?} is not a number from 0 to {}",
                clip(len),
                max
            ))
        }
    };
    Ok(match ip {
        IpAddr::V4(a) => {
            let v = u32::from(a);
            let m = crate::Key::masked(v, len);
            (Prefix::V4(m, len), m != v)
        }
        IpAddr::V6(a) => {
            let v = u128::from(a);
            let m = crate::Key::masked(v, len);
            (Prefix::V6(m, len), m != v)
        }
    })
}

/// A route line: the prefix's network, its next hop, and whether the prefix as written
/// had host bits set (see [`parse_prefix`]).
pub type RouteLine = (Prefix, u32, bool);

/// Parses one line; `Ok(None)` for blank and comment lines.
pub fn parse_line(line: &str) -> Result<Option<RouteLine>, String> {
    let text = line.split('#').next().unwrap_or("");
    let mut fields = text.split_whitespace();
    let Some(prefix) = fields.next() else {
        return Ok(None);
    };
    let nh = fields
        .next()
        .ok_or_else(|| format!("missing next hop after {}", clip(prefix)))?;
    if let Some(extra) = fields.next() {
        return Err(format!(
            "unexpected {:?} after the next hop (expected PREFIX/LEN NEXTHOP)",
            clip(extra)
        ));
    }
    let (p, host_bits) = parse_prefix(prefix)?;
    let nh = match decimal(nh) {
        Some(v) if v <= MAX_NEXT_HOP => v,
        _ => {
            return Err(format!(
                "next hop {:?} is not a number from 0 to {}",
                clip(nh),
                MAX_NEXT_HOP
            ))
        }
    };
    Ok(Some((p, nh, host_bits)))
}

/// Parses a whole table, or an MRT dump ([`crate::mrt`]) if the bytes are one;
/// `origin` names it in errors.
pub fn parse(bytes: &[u8], origin: &str) -> Result<RouteTable, LoadError> {
    if crate::mrt::looks_like_mrt(bytes) {
        return crate::mrt::parse(bytes, origin);
    }
    let mut t = RouteTable::default();
    for (i, raw) in bytes.split(|&b| b == b'\n').enumerate() {
        let err = |reason: String| LoadError {
            origin: origin.to_string(),
            line: Some(i + 1),
            reason,
        };
        let line = std::str::from_utf8(raw).map_err(|_| err("not UTF-8 text".into()))?;
        let Some((p, nh, host_bits)) = parse_line(line.strip_suffix('\r').unwrap_or(line)).map_err(err)?
        else {
            continue;
        };
        match p {
            Prefix::V4(a, l) => t.v4.push((a, l, nh)),
            Prefix::V6(a, l) => t.v6.push((a, l, nh)),
        }
        if host_bits {
            t.host_bits.push(HostBits {
                line: i + 1,
                written: line.split_whitespace().next().unwrap_or_default().to_string(),
                network: p,
            });
        }
    }
    Ok(t)
}

/// Reads and parses a table file, decompressing it first if it is gzip or bzip2 data
/// (errors' line numbers are then the decompressed text's).
pub fn load(path: &Path) -> Result<RouteTable, LoadError> {
    let origin = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|e| LoadError {
        origin: origin.clone(),
        line: None,
        reason: format!("cannot read: {}", e),
    })?;
    let bytes = crate::compressed::decompress(bytes).map_err(|reason| LoadError {
        origin: origin.clone(),
        line: None,
        reason,
    })?;
    parse(&bytes, &origin)
}

/// Writes routes in the table format (IPv4 first, then IPv6).
pub fn write(t: &RouteTable, out: &mut impl std::io::Write) -> std::io::Result<()> {
    for &(a, l, nh) in &t.v4 {
        writeln!(out, "{}/{} {}", std::net::Ipv4Addr::from(a), l, nh)?;
    }
    for &(a, l, nh) in &t.v6 {
        writeln!(out, "{}/{} {}", std::net::Ipv6Addr::from(a), l, nh)?;
    }
    Ok(())
}
