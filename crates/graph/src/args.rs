//! Click's configuration-argument conventions.
//!
//! A configuration string is split at top-level commas (not inside quotes, parentheses,
//! brackets or braces; comments removed). An argument whose first word is an upper-case
//! keyword followed by white space (`LIMIT 10`) is a keyword argument; the others are
//! positional. Positional parameters may also be given by keyword, as in Click. Values
//! are parsed as Click parses them (`cp_bool`, `cp_integer`, `cp_ip_address`, ...).

use std::net::{Ipv4Addr, Ipv6Addr};

/// Splits a configuration string into arguments (Click's `cp_argvec`). Leading and
/// trailing white space of each argument and comments are removed; an empty
/// configuration has no arguments; a trailing empty argument after a comma is dropped.
pub fn split_args(config: &str) -> Vec<String> {
    let s = uncomment(config);
    let mut args = Vec::new();
    let mut cur = String::new();
    let mut depth = 0i32;
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' | '\'' => {
                cur.push(c);
                while let Some(d) = chars.next() {
                    cur.push(d);
                    if d == '\\' && c == '"' {
                        if let Some(e) = chars.next() {
                            cur.push(e);
                        }
                    } else if d == c {
                        break;
                    }
                }
            }
            '(' | '[' | '{' => {
                depth += 1;
                cur.push(c);
            }
            ')' | ']' | '}' => {
                depth -= 1;
                cur.push(c);
            }
            ',' if depth <= 0 => {
                args.push(cur.trim().to_string());
                cur.clear();
            }
            _ => cur.push(c),
        }
    }
    let last = cur.trim().to_string();
    if !last.is_empty() || !args.is_empty() && !last.is_empty() {
        args.push(last);
    }
    if args.len() == 1 && args[0].is_empty() {
        args.clear();
    }
    args
}

/// Removes `//` and `/* */` comments outside quotes (Click's `cp_uncomment`).
pub fn uncomment(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    let mut start = 0;
    while i < b.len() {
        match b[i] {
            q @ (b'"' | b'\'') => {
                i += 1;
                while i < b.len() && b[i] != q {
                    if b[i] == b'\\' && q == b'"' {
                        i += 1;
                    }
                    i += 1;
                }
                i += 1;
            }
            b'/' if i + 1 < b.len() && b[i + 1] == b'/' => {
                out.push_str(&s[start..i]);
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
                start = i;
            }
            b'/' if i + 1 < b.len() && b[i + 1] == b'*' => {
                out.push_str(&s[start..i]);
                out.push(' ');
                i += 2;
                while i + 1 < b.len() && !(b[i] == b'*' && b[i + 1] == b'/') {
                    i += 1;
                }
                i = (i + 2).min(b.len());
                start = i;
            }
            _ => i += 1,
        }
    }
    if start < b.len() {
        out.push_str(&s[start.min(s.len())..]);
    }
    out
}

/// Splits an argument into space-separated words, keeping quoted strings whole
/// (Click's `cp_spacevec`).
pub fn split_words(s: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        match c {
            '"' | '\'' => {
                cur.push(c);
                for d in chars.by_ref() {
                    cur.push(d);
                    if d == c {
                        break;
                    }
                }
            }
            c if c.is_whitespace() => {
                if !cur.is_empty() {
                    words.push(std::mem::take(&mut cur));
                }
            }
            _ => cur.push(c),
        }
    }
    if !cur.is_empty() {
        words.push(cur);
    }
    words
}

/// Removes one level of quoting: `"a\nb"` becomes `a`, newline, `b`; `'x'` is literal.
/// Unquoted text is returned unchanged. (Click's `cp_unquote`.)
pub fn unquote(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                for d in chars.by_ref() {
                    if d == '\'' {
                        break;
                    }
                    out.push(d);
                }
            }
            '"' => {
                while let Some(d) = chars.next() {
                    match d {
                        '"' => break,
                        '\\' => match chars.next() {
                            Some('n') => out.push('\n'),
                            Some('t') => out.push('\t'),
                            Some('r') => out.push('\r'),
                            Some('a') => out.push('\x07'),
                            Some('b') => out.push('\x08'),
                            Some('f') => out.push('\x0c'),
                            Some('v') => out.push('\x0b'),
                            Some('0') => out.push('\0'),
                            Some('\n') => {}
                            Some(e) => out.push(e),
                            None => {}
                        },
                        _ => out.push(d),
                    }
                }
            }
            _ => out.push(c),
        }
    }
    out
}

fn keyword_of(arg: &str) -> Option<(&str, &str)> {
    let b = arg.as_bytes();
    if b.is_empty() || !(b[0].is_ascii_uppercase() || b[0] == b'_') {
        return None;
    }
    let mut i = 0;
    while i < b.len() && (b[i].is_ascii_uppercase() || b[i].is_ascii_digit() || b[i] == b'_' || b[i] == b':')
    {
        i += 1;
    }
    if i < b.len() && b[i].is_ascii_whitespace() {
        Some((&arg[..i], arg[i..].trim()))
    } else {
        None
    }
}

#[derive(Debug)]
struct Item {
    keyword: Option<String>,
    value: String,
    raw: String,
    used: bool,
}

/// The arguments of one element, consumed by its class's `build`.
#[derive(Debug)]
pub struct Args {
    items: Vec<Item>,
}

/// Parses one argument value of type `Self`.
pub trait FromArg: Sized {
    /// What the value should be, for errors ("N expects integer").
    const WHAT: &'static str;
    fn from_arg(s: &str) -> Option<Self>;
}

impl Args {
    /// Splits `config` into arguments, recognising keyword arguments.
    pub fn new(config: &str) -> Args {
        let items = split_args(config)
            .into_iter()
            .map(|raw| match keyword_of(&raw) {
                Some((k, v)) => Item {
                    keyword: Some(k.to_string()),
                    value: v.to_string(),
                    raw: raw.clone(),
                    used: false,
                },
                None => Item {
                    keyword: None,
                    value: raw.clone(),
                    raw,
                    used: false,
                },
            })
            .collect();
        Args { items }
    }

    /// Number of arguments, positional and keyword.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    fn take_keyword(&mut self, kw: &str) -> Option<String> {
        // Click: the last occurrence of a keyword wins.
        let mut found = None;
        for it in self.items.iter_mut() {
            if it.keyword.as_deref() == Some(kw) {
                it.used = true;
                found = Some(it.value.clone());
            }
        }
        found
    }

    fn take_positional(&mut self) -> Option<String> {
        self.items
            .iter_mut()
            .find(|it| !it.used && it.keyword.is_none())
            .map(|it| {
                it.used = true;
                it.value.clone()
            })
    }

    fn convert<T: FromArg>(kw: &str, s: &str) -> Result<T, String> {
        T::from_arg(s).ok_or_else(|| format!("{} expects {}", kw, T::WHAT))
    }

    /// A mandatory parameter given by position or as `KW value`.
    pub fn required<T: FromArg>(&mut self, kw: &str) -> Result<T, String> {
        match self.take_keyword(kw).or_else(|| self.take_positional()) {
            Some(s) => Self::convert(kw, &s),
            None => Err(format!("missing mandatory {} argument", kw)),
        }
    }

    /// An optional parameter given by position or as `KW value`.
    pub fn positional<T: FromArg>(&mut self, kw: &str) -> Result<Option<T>, String> {
        match self.take_keyword(kw).or_else(|| self.take_positional()) {
            Some(s) => Self::convert(kw, &s).map(Some),
            None => Ok(None),
        }
    }

    /// An optional keyword-only parameter `KW value`.
    pub fn keyword<T: FromArg>(&mut self, kw: &str) -> Result<Option<T>, String> {
        match self.take_keyword(kw) {
            Some(s) => Self::convert(kw, &s).map(Some),
            None => Ok(None),
        }
    }

    /// Every argument not consumed yet (keyword-like ones too), raw, in order
    /// (Classifier patterns).
    pub fn rest(&mut self) -> Vec<String> {
        self.items
            .iter_mut()
            .filter(|it| !it.used)
            .map(|it| {
                it.used = true;
                it.raw.clone()
            })
            .collect()
    }

    /// Fails if any argument was not consumed, with Click's wording.
    pub fn finish(&self) -> Result<(), String> {
        let unused: Vec<&Item> = self.items.iter().filter(|it| !it.used).collect();
        if unused.is_empty() {
            return Ok(());
        }
        let kws: Vec<&str> = unused.iter().filter_map(|it| it.keyword.as_deref()).collect();
        if kws.len() == unused.len() {
            Err(format!(
                "bad keyword{} {}",
                if kws.len() > 1 { "s" } else { "" },
                kws.iter()
                    .map(|k| format!("'{}'", k))
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        } else {
            Err("too many arguments".to_string())
        }
    }
}

impl FromArg for String {
    const WHAT: &'static str = "string";
    fn from_arg(s: &str) -> Option<Self> {
        Some(unquote(s))
    }
}

/// Click booleans: `true`/`false`, `yes`/`no`, `1`/`0`, `t`/`f`, `y`/`n`, `on`/`off`.
impl FromArg for bool {
    const WHAT: &'static str = "bool";
    fn from_arg(s: &str) -> Option<Self> {
        match unquote(s).as_str() {
            "1" | "true" | "yes" | "t" | "y" | "on" => Some(true),
            "0" | "false" | "no" | "f" | "n" | "off" => Some(false),
            _ => None,
        }
    }
}

fn parse_u64(s: &str) -> Option<u64> {
    let s = s.trim();
    let s = s.strip_prefix('+').unwrap_or(s);
    if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        u64::from_str_radix(&h.replace('_', ""), 16).ok()
    } else if let Some(b) = s.strip_prefix("0b").or_else(|| s.strip_prefix("0B")) {
        u64::from_str_radix(b, 2).ok()
    } else if s.len() > 1 && s.starts_with('0') && s.bytes().all(|c| c.is_ascii_digit()) {
        u64::from_str_radix(&s[1..], 8).ok()
    } else {
        s.parse().ok()
    }
}

fn parse_i64(s: &str) -> Option<i64> {
    let s = s.trim();
    if let Some(r) = s.strip_prefix('-') {
        parse_u64(r).and_then(|v| {
            if v <= i64::MAX as u64 + 1 {
                Some((v as i64).wrapping_neg())
            } else {
                None
            }
        })
    } else {
        parse_u64(s).and_then(|v| i64::try_from(v).ok())
    }
}

macro_rules! unsigned_arg {
    ($($t:ty),*) => {$(
        impl FromArg for $t {
            const WHAT: &'static str = "unsigned integer";
            fn from_arg(s: &str) -> Option<Self> {
                parse_u64(s).and_then(|v| <$t>::try_from(v).ok())
            }
        }
    )*};
}
unsigned_arg!(u8, u16, u32, u64, usize);

macro_rules! signed_arg {
    ($($t:ty),*) => {$(
        impl FromArg for $t {
            const WHAT: &'static str = "integer";
            fn from_arg(s: &str) -> Option<Self> {
                parse_i64(s).and_then(|v| <$t>::try_from(v).ok())
            }
        }
    )*};
}
signed_arg!(i32, i64);

impl FromArg for f64 {
    const WHAT: &'static str = "real number";
    fn from_arg(s: &str) -> Option<Self> {
        s.trim().parse().ok().filter(|v: &f64| v.is_finite())
    }
}

impl FromArg for Ipv4Addr {
    const WHAT: &'static str = "IP address";
    fn from_arg(s: &str) -> Option<Self> {
        parse_ipv4(s.trim())
    }
}

/// Click accepts dotted quads with fewer than four parts only as prefixes; addresses are
/// full dotted quads.
fn parse_ipv4(s: &str) -> Option<Ipv4Addr> {
    s.parse().ok()
}

impl FromArg for Ipv6Addr {
    const WHAT: &'static str = "IPv6 address";
    fn from_arg(s: &str) -> Option<Self> {
        s.trim().parse().ok()
    }
}

/// An IPv4 address with a prefix: `ADDR/LEN`, `ADDR/MASK`, or a bare `ADDR` (a /32).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ipv4Prefix {
    pub addr: Ipv4Addr,
    pub mask: Ipv4Addr,
}

impl Ipv4Prefix {
    /// The prefix length, if the mask is contiguous.
    #[allow(clippy::len_without_is_empty)]
    pub fn len(&self) -> Option<u8> {
        let m = u32::from(self.mask);
        (m.leading_ones() + m.trailing_zeros() == 32).then(|| m.leading_ones() as u8)
    }
}

impl FromArg for Ipv4Prefix {
    const WHAT: &'static str = "IP address prefix";
    fn from_arg(s: &str) -> Option<Self> {
        let s = s.trim();
        match s.split_once('/') {
            None => Some(Ipv4Prefix {
                addr: parse_ipv4(s)?,
                mask: Ipv4Addr::BROADCAST,
            }),
            Some((a, m)) => {
                let addr = parse_prefix_addr(a)?;
                let mask = if m.contains('.') {
                    parse_ipv4(m)?
                } else {
                    let len: u32 = m.parse().ok()?;
                    if len > 32 {
                        return None;
                    }
                    Ipv4Addr::from(if len == 0 { 0 } else { u32::MAX << (32 - len) })
                };
                Some(Ipv4Prefix { addr, mask })
            }
        }
    }
}

/// A prefix's address part may have fewer than four parts (`10/8`, `192.168/16`).
fn parse_prefix_addr(s: &str) -> Option<Ipv4Addr> {
    let parts: Vec<&str> = s.split('.').collect();
    if parts.is_empty() || parts.len() > 4 {
        return None;
    }
    let mut o = [0u8; 4];
    for (i, p) in parts.iter().enumerate() {
        if p.is_empty() || !p.bytes().all(|c| c.is_ascii_digit()) {
            return None;
        }
        o[i] = p.parse().ok()?;
    }
    Some(Ipv4Addr::from(o))
}

/// An Ethernet address: `00:11:22:33:44:55` (one or two hex digits per part) or
/// `00-11-22-33-44-55`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct EtherAddr(pub [u8; 6]);

impl FromArg for EtherAddr {
    const WHAT: &'static str = "Ethernet address";
    fn from_arg(s: &str) -> Option<Self> {
        let s = s.trim();
        let sep = if s.contains(':') { ':' } else { '-' };
        let parts: Vec<&str> = s.split(sep).collect();
        if parts.len() != 6 {
            return None;
        }
        let mut a = [0u8; 6];
        for (i, p) in parts.iter().enumerate() {
            if p.is_empty() || p.len() > 2 || (sep == '-' && p.len() != 2) {
                return None;
            }
            a[i] = u8::from_str_radix(p, 16).ok()?;
        }
        Some(EtherAddr(a))
    }
}

impl std::fmt::Display for EtherAddr {
    /// Click's format: upper-case hex separated by dashes.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let a = self.0;
        write!(
            f,
            "{:02X}-{:02X}-{:02X}-{:02X}-{:02X}-{:02X}",
            a[0], a[1], a[2], a[3], a[4], a[5]
        )
    }
}

/// A time interval (`1s`, `250ms`, `10us`, `1.5`, `2min`, `1h`), in nanoseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Interval(pub u64);

impl FromArg for Interval {
    const WHAT: &'static str = "time interval";
    fn from_arg(s: &str) -> Option<Self> {
        let s = s.trim();
        let split = s
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(s.len());
        let (num, unit) = s.split_at(split);
        let v: f64 = num.parse().ok()?;
        let mult = match unit.trim() {
            "" | "s" | "sec" | "secs" => 1e9,
            "ms" | "msec" => 1e6,
            "us" | "usec" => 1e3,
            "ns" | "nsec" => 1.0,
            "m" | "min" | "mins" => 60e9,
            "h" | "hr" | "hrs" => 3600e9,
            _ => return None,
        };
        Some(Interval((v * mult).round() as u64))
    }
}

/// A bandwidth in bytes per second: `1Gbps`, `100Mbps`, `10kBps`, `1000` (bytes/s).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Bandwidth(pub f64);

impl FromArg for Bandwidth {
    const WHAT: &'static str = "bandwidth";
    fn from_arg(s: &str) -> Option<Self> {
        let s = s.trim();
        let split = s
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(s.len());
        let (num, unit) = s.split_at(split);
        let v: f64 = num.parse().ok()?;
        let (prefix, rest) = match unit.chars().next() {
            Some('k') | Some('K') => (1e3, &unit[1..]),
            Some('M') => (1e6, &unit[1..]),
            Some('G') => (1e9, &unit[1..]),
            _ => (1.0, unit),
        };
        let per = match rest {
            "" | "Bps" | "B/s" => 1.0,
            "bps" | "b/s" | "baud" => 1.0 / 8.0,
            _ => return None,
        };
        Some(Bandwidth(v * prefix * per))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitting_respects_quotes_parens_and_comments() {
        assert_eq!(split_args(""), Vec::<String>::new());
        assert_eq!(split_args("  "), Vec::<String>::new());
        assert_eq!(split_args("a, b ,c"), vec!["a", "b", "c"]);
        assert_eq!(split_args("\"a,b\", c"), vec!["\"a,b\"", "c"]);
        assert_eq!(split_args("f(a,b), c"), vec!["f(a,b)", "c"]);
        assert_eq!(split_args("a, // comment, x\n b"), vec!["a", "b"]);
        assert_eq!(split_args("a /* x, y */, b"), vec!["a", "b"]);
        assert_eq!(split_args("a,"), vec!["a"]);
        assert_eq!(split_args("a,,b"), vec!["a", "", "b"]);
    }

    #[test]
    fn keywords_and_positionals() {
        let mut a = Args::new("trace.pcap, STOP true, TIMING false");
        assert_eq!(a.required::<String>("FILENAME").unwrap(), "trace.pcap");
        assert_eq!(a.keyword::<bool>("STOP").unwrap(), Some(true));
        assert_eq!(a.keyword::<bool>("TIMING").unwrap(), Some(false));
        assert!(a.finish().is_ok());

        let mut a = Args::new("FILENAME x.pcap");
        assert_eq!(a.required::<String>("FILENAME").unwrap(), "x.pcap");

        let mut a = Args::new("1, BOGUS 2");
        assert_eq!(a.required::<u32>("N").unwrap(), 1);
        assert_eq!(a.finish().unwrap_err(), "bad keyword 'BOGUS'");

        let mut a = Args::new("1, 2");
        a.required::<u32>("N").unwrap();
        assert_eq!(a.finish().unwrap_err(), "too many arguments");

        let mut a = Args::new("");
        assert_eq!(
            a.required::<u32>("N").unwrap_err(),
            "missing mandatory N argument"
        );

        let mut a = Args::new("x");
        assert_eq!(a.required::<u32>("N").unwrap_err(), "N expects unsigned integer");
    }

    #[test]
    fn value_syntaxes() {
        assert_eq!(u32::from_arg("0x10"), Some(16));
        assert_eq!(u32::from_arg("010"), Some(8));
        assert_eq!(u8::from_arg("256"), None);
        assert_eq!(i32::from_arg("-5"), Some(-5));
        assert_eq!(bool::from_arg("yes"), Some(true));
        assert_eq!(bool::from_arg("maybe"), None);
        assert_eq!(
            Ipv4Prefix::from_arg("10/8"),
            Some(Ipv4Prefix {
                addr: Ipv4Addr::new(10, 0, 0, 0),
                mask: Ipv4Addr::new(255, 0, 0, 0)
            })
        );
        assert_eq!(
            Ipv4Prefix::from_arg("1.2.3.0/255.255.255.0").unwrap().len(),
            Some(24)
        );
        assert_eq!(Ipv4Prefix::from_arg("1.2.3.4").unwrap().len(), Some(32));
        assert_eq!(
            EtherAddr::from_arg("0:1:2:3:4:ff"),
            Some(EtherAddr([0, 1, 2, 3, 4, 255]))
        );
        assert_eq!(
            EtherAddr::from_arg("00-01-02-03-04-FF"),
            Some(EtherAddr([0, 1, 2, 3, 4, 255]))
        );
        assert_eq!(EtherAddr([0, 1, 2, 3, 4, 255]).to_string(), "00-01-02-03-04-FF");
        assert_eq!(Interval::from_arg("250ms"), Some(Interval(250_000_000)));
        assert_eq!(Interval::from_arg("1.5"), Some(Interval(1_500_000_000)));
        assert_eq!(Bandwidth::from_arg("8kbps"), Some(Bandwidth(1000.0)));
        assert_eq!(unquote("\"a\\tb\""), "a\tb");
        assert_eq!(split_words("a \"b c\" d"), vec!["a", "\"b c\"", "d"]);
    }
}
