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
            b'/' if i + 1 < b.len() && matches!(b[i + 1], b'/' | b'*') => {
                out.push_str(&s[start..i]);
                if b[i + 1] == b'*' {
                    out.push(' ');
                }
                i = skip_comment(b, i);
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

fn hex_digit(c: u8) -> Option<u32> {
    (c as char).to_digit(16)
}

/// Position after the comment starting at `b[i]` (`//` to the end of the line, or
/// `/* ... */`).
pub(crate) fn skip_comment(b: &[u8], i: usize) -> usize {
    let mut j = i + 2;
    if b[i + 1] == b'/' {
        while j < b.len() && b[j] != b'\n' && b[j] != b'\r' {
            j += 1;
        }
        j
    } else {
        while j + 1 < b.len() && !(b[j] == b'*' && b[j + 1] == b'/') {
            j += 1;
        }
        (j + 2).min(b.len())
    }
}

/// Click's `cp_process_backslash`: `b[i]` is a backslash. Appends what the escape
/// stands for to `out` and returns the position after it. `\[newline]` is nothing;
/// `\a \b \f \n \r \t \v` are C's; `\` and one to three octal digits is that byte;
/// `\x` and hex digits is a byte (the last two digits count, as in Click, whose
/// accumulator is truncated to a char); `\<hex digits>` is one byte per pair of digits,
/// spaces and comments ignored; any other escaped character is itself.
fn process_backslash(b: &[u8], i: usize, out: &mut Vec<u8>) -> usize {
    let Some(&e) = b.get(i + 1) else {
        out.push(b'\\');
        return b.len();
    };
    match e {
        b'\r' if b.get(i + 2) == Some(&b'\n') => i + 3,
        b'\r' | b'\n' => i + 2,
        b'0'..=b'7' => {
            let mut j = i + 1;
            let mut v = 0u32;
            while j < b.len() && j < i + 4 && (b'0'..=b'7').contains(&b[j]) {
                v = v * 8 + u32::from(b[j] - b'0');
                j += 1;
            }
            out.push(v as u8);
            j
        }
        b'x' => {
            let mut j = i + 2;
            let mut v = 0u32;
            while let Some(d) = b.get(j).and_then(|&c| hex_digit(c)) {
                v = (v << 4 | d) & 0xff;
                j += 1;
            }
            out.push(v as u8);
            j
        }
        b'<' => {
            let mut j = i + 2;
            let mut high: Option<u32> = None;
            while j < b.len() {
                match b[j] {
                    b'>' => return j + 1,
                    b'/' if j + 1 < b.len() && matches!(b[j + 1], b'/' | b'*') => {
                        j = skip_comment(b, j);
                        continue;
                    }
                    c => {
                        if let Some(d) = hex_digit(c) {
                            match high.take() {
                                Some(h) => out.push((h << 4 | d) as u8),
                                None => high = Some(d),
                            }
                        }
                    }
                }
                j += 1;
            }
            b.len()
        }
        c => {
            out.push(match c {
                b'a' => 7,
                b'b' => 8,
                b'f' => 12,
                b'n' => b'\n',
                b'r' => b'\r',
                b't' => b'\t',
                b'v' => 11,
                other => other,
            });
            i + 2
        }
    }
}

/// Removes one level of quoting, as bytes (Click's `cp_unquote`): `'...'` is literal;
/// inside `"..."` backslash escapes are processed (see [`process_backslash`]); outside
/// quotes only `\<hex>` is. `"a\012b"` is `a`, newline, `b`.
pub fn unquote_bytes(s: &str) -> Vec<u8> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut quote = 0u8;
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        match c {
            b'"' | b'\'' if quote == 0 => quote = c,
            b'"' | b'\'' if quote == c => quote = 0,
            b'\\' if i + 1 < b.len() && (quote == b'"' || quote == 0 && b[i + 1] == b'<') => {
                i = process_backslash(b, i, &mut out);
                continue;
            }
            _ => out.push(c),
        }
        i += 1;
    }
    out
}

/// [`unquote_bytes`] as text, for words the configuration language itself reads
/// (requirement names, classifier patterns, file names in line directives). Escapes
/// that make bytes that are not UTF-8 become U+FFFD, which no such word contains, so
/// the word is then refused where it is used. Element arguments of type `String`
/// refuse such bytes with their own error instead.
pub fn unquote(s: &str) -> String {
    match String::from_utf8(unquote_bytes(s)) {
        Ok(text) => text,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    }
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
    /// Why `s` is not a value of this type, when there is more to say than [`WHAT`].
    ///
    /// [`WHAT`]: FromArg::WHAT
    fn why_not(_s: &str) -> Option<String> {
        None
    }
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
        T::from_arg(s).ok_or_else(|| match T::why_not(s) {
            Some(why) => format!("{} expects {}: {}", kw, T::WHAT, why),
            None => format!("{} expects {}", kw, T::WHAT),
        })
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

/// A string argument is text: escapes that make bytes that are not UTF-8 (`"\377"`)
/// are refused rather than changed.
impl FromArg for String {
    const WHAT: &'static str = "string";
    fn from_arg(s: &str) -> Option<Self> {
        String::from_utf8(unquote_bytes(s)).ok()
    }
    fn why_not(s: &str) -> Option<String> {
        let e = String::from_utf8(unquote_bytes(s)).err()?;
        let at = e.utf8_error().valid_up_to();
        Some(format!(
            "its escapes make byte 0x{:02X} (byte {} of the value), which is not UTF-8 text",
            e.as_bytes()[at],
            at + 1
        ))
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

/// The digits of `s` in base `radix` with the underscores Click's `IntArg` allows
/// (single ones between digits, `1_000`) removed; None if `s` is not such a run.
fn digits_without_underscores(s: &str, radix: u32) -> Option<String> {
    let mut out = String::with_capacity(s.len());
    let mut after_digit = false;
    for c in s.chars() {
        if c == '_' && after_digit {
            after_digit = false;
        } else if c.is_digit(radix) {
            out.push(c);
            after_digit = true;
        } else {
            return None;
        }
    }
    after_digit.then_some(out)
}

fn parse_u64(s: &str) -> Option<u64> {
    let s = s.trim();
    let s = s.strip_prefix('+').unwrap_or(s);
    let (digits, radix) = if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        (h, 16)
    } else if let Some(b) = s.strip_prefix("0b").or_else(|| s.strip_prefix("0B")) {
        (b, 2)
    } else if s.len() > 1 && s.starts_with('0') {
        (s, 8)
    } else {
        (s, 10)
    };
    u64::from_str_radix(&digits_without_underscores(digits, radix)?, radix).ok()
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

/// Well-known TCP and UDP port names (Click's built-in table).
pub(crate) fn port_name(w: &str) -> Option<u16> {
    Some(match w {
        "auth" => 113,
        "bootpc" => 68,
        "bootps" => 67,
        "chargen" => 19,
        "daytime" => 13,
        "discard" => 9,
        "dns" | "domain" => 53,
        "echo" => 7,
        "finger" => 79,
        "ftp" => 21,
        "ftp-data" => 20,
        "http" | "www" => 80,
        "https" => 443,
        "imap3" => 220,
        "imaps" => 993,
        "irc" => 194,
        "netbios-dgm" => 138,
        "netbios-ns" => 137,
        "netbios-ssn" => 139,
        "nntp" => 119,
        "ntp" => 123,
        "pop3" => 110,
        "pop3s" => 995,
        "rip" | "route" => 520,
        "smtp" => 25,
        "snmp" => 161,
        "snmp-trap" => 162,
        "ssh" => 22,
        "sunrpc" => 111,
        "telnet" => 23,
        "tftp" => 69,
        _ => return None,
    })
}

/// A TCP or UDP port: a number, or a service name from [`port_name`]'s table (as
/// Click's `IPPortArg` takes `ssh` or `domain`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PortArg(pub u16);

impl FromArg for PortArg {
    const WHAT: &'static str = "port number or service name";
    fn from_arg(s: &str) -> Option<Self> {
        u16::from_arg(s).or_else(|| port_name(s.trim())).map(PortArg)
    }
}

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
        parse_ipv4(s.trim()).or_else(|| crate::addressinfo::lookup_ipv4(s))
    }
}

/// Click's `IPAddressArg::basic_parse`: one to four decimal parts of at most 255
/// separated by dots, leading zeros allowed (`010.000.000.001` is 10.0.0.1, not
/// octal). Returns the address, missing parts zero, and the number of parts.
fn parse_dotted(s: &str) -> Option<(Ipv4Addr, usize)> {
    let mut octets = [0u8; 4];
    let mut n = 0;
    for part in s.split('.') {
        if n == 4 || part.is_empty() || !part.bytes().all(|c| c.is_ascii_digit()) {
            return None;
        }
        let digits = part.trim_start_matches('0');
        octets[n] = if digits.is_empty() {
            0
        } else {
            digits.parse().ok()?
        };
        n += 1;
    }
    Some((Ipv4Addr::from(octets), n))
}

/// An IPv4 address: a full dotted quad. Click accepts fewer than four parts only as
/// the address of a prefix (`10/8`).
pub fn parse_ipv4(s: &str) -> Option<Ipv4Addr> {
    parse_dotted(s).and_then(|(a, n)| (n == 4).then_some(a))
}

impl FromArg for Ipv6Addr {
    const WHAT: &'static str = "IPv6 address";
    fn from_arg(s: &str) -> Option<Self> {
        s.trim()
            .parse()
            .ok()
            .or_else(|| crate::addressinfo::lookup_ipv6(s))
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
        Self::written(s).or_else(|| crate::addressinfo::lookup_ipv4_prefix(s))
    }
}

impl Ipv4Prefix {
    /// A prefix written out (not an AddressInfo name).
    fn written(s: &str) -> Option<Self> {
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
    parse_dotted(s).map(|(a, _)| a)
}

/// An Ethernet address: six parts of one or two hex digits separated by `:` or by `-`
/// (`00:11:22:33:44:55`, `0-1-2-3-4-5`), as Click's `EtherAddressArg`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct EtherAddr(pub [u8; 6]);

impl FromArg for EtherAddr {
    const WHAT: &'static str = "Ethernet address";
    fn from_arg(s: &str) -> Option<Self> {
        let s = s.trim();
        Self::written(s).or_else(|| crate::addressinfo::lookup_ether(s).map(EtherAddr))
    }
}

impl EtherAddr {
    /// An Ethernet address written out (not an AddressInfo name).
    fn written(s: &str) -> Option<Self> {
        let sep = if s.contains(':') { ':' } else { '-' };
        let parts: Vec<&str> = s.split(sep).collect();
        if parts.len() != 6 {
            return None;
        }
        let mut a = [0u8; 6];
        for (i, p) in parts.iter().enumerate() {
            if p.is_empty() || p.len() > 2 || !p.bytes().all(|c| c.is_ascii_hexdigit()) {
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

/// A time interval, in nanoseconds, as Click's `SecondsArg` reads it: a decimal
/// number (`1.5`, `1_000`, `1e-3`) and an optional unit, `s`/`sec` (the default),
/// `m`/`min`, `h`/`hr` or `d`/`day`, which may carry a prefix `m`, `u` or `n` (`250ms`,
/// `10usec`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Interval(pub u64);

/// Click's `seconds_units`, in Click's order (the first whose name ends the text is
/// the unit): name, seconds.
const SECONDS_UNITS: [(&str, f64); 8] = [
    ("s", 1.0),
    ("sec", 1.0),
    ("m", 60.0),
    ("min", 60.0),
    ("h", 3600.0),
    ("hr", 3600.0),
    ("d", 86400.0),
    ("day", 86400.0),
];

/// Click's `preparse_fraction`: an optional `+`, decimal digits with single
/// underscores between them and at most one `.`, then an optional exponent. Returns
/// the number in a form `f64::from_str` reads, or None.
pub(crate) fn decimal_number(s: &str) -> Option<String> {
    let s = s.strip_prefix('+').unwrap_or(s);
    let (mantissa, exponent) = match s.find(['e', 'E']) {
        Some(i) => (&s[..i], Some(&s[i + 1..])),
        None => (s, None),
    };
    let mut out = String::with_capacity(s.len());
    let (mut after_digit, mut any_digit, mut point) = (false, false, false);
    for c in mantissa.chars() {
        match c {
            '_' if after_digit => after_digit = false,
            '.' if !point && (after_digit || out.is_empty()) => {
                point = true;
                after_digit = false;
                out.push('.');
            }
            '0'..='9' => {
                out.push(c);
                after_digit = true;
                any_digit = true;
            }
            _ => return None,
        }
    }
    if !any_digit || mantissa.ends_with('_') {
        return None;
    }
    if let Some(e) = exponent {
        let digits = e.strip_prefix(['+', '-']).unwrap_or(e);
        if digits.is_empty() || !digits.bytes().all(|c| c.is_ascii_digit()) {
            return None;
        }
        out.push('e');
        out.push_str(e);
    }
    Some(out)
}

impl FromArg for Interval {
    const WHAT: &'static str = "time interval";
    fn from_arg(s: &str) -> Option<Self> {
        let s = s.trim();
        let (mut num, mut seconds) = (s, 1.0);
        if let Some(&(name, unit)) = SECONDS_UNITS.iter().find(|(name, _)| s.ends_with(name)) {
            num = &s[..s.len() - name.len()];
            seconds = unit;
            let prefix = match num.as_bytes().last() {
                Some(b'm') => Some(1e-3),
                Some(b'u') => Some(1e-6),
                Some(b'n') => Some(1e-9),
                _ => None,
            };
            if let Some(p) = prefix {
                num = &num[..num.len() - 1];
                seconds *= p;
            }
            num = num.trim_end();
        }
        let v: f64 = decimal_number(num)?.parse().ok()?;
        let ns = (v * seconds * 1e9).round();
        (ns.is_finite() && ns < u64::MAX as f64).then_some(Interval(ns as u64))
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

    #[test]
    fn backslash_escapes_decode_as_clicks_cp_unquote() {
        // One to three octal digits.
        assert_eq!(String::from_arg(r#""a\012b""#).unwrap(), "a\nb");
        assert_eq!(String::from_arg(r#""\1010""#).unwrap(), "A0");
        assert_eq!(String::from_arg(r#""\0x""#).unwrap(), "\0x");
        // \x takes every hex digit that follows; the byte is the last two.
        assert_eq!(String::from_arg(r#""c\x41-d""#).unwrap(), "cA-d");
        assert_eq!(String::from_arg(r#""c\x41d""#).unwrap(), "c\x1d");
        // \<hex> inside and outside double quotes, spaces and comments ignored; not
        // inside single quotes.
        assert_eq!(String::from_arg(r"\<41 42>").unwrap(), "AB");
        assert_eq!(String::from_arg(r#"x"\<43/* c */44>"y"#).unwrap(), "xCDy");
        assert_eq!(String::from_arg(r"'\<41>'").unwrap(), r"\<41>");
        // Other escapes, and escapes outside quotes are literal.
        assert_eq!(String::from_arg(r#""\$\,\"\\q""#).unwrap(), "$,\"\\q");
        assert_eq!(String::from_arg(r"a\nb").unwrap(), r"a\nb");
        assert_eq!(String::from_arg("\"a\\\nb\"").unwrap(), "ab");
        assert_eq!(unquote_bytes(r#""\377\<fe>""#), vec![0xff, 0xfe]);
    }

    #[test]
    fn a_string_argument_whose_escapes_are_not_utf8_is_refused() {
        let mut a = Args::new(r#""ok\377""#);
        assert_eq!(
            a.required::<String>("LABEL").unwrap_err(),
            "LABEL expects string: its escapes make byte 0xFF (byte 3 of the value), which is not UTF-8 text"
        );
        // Bytes that make UTF-8 together are text.
        assert_eq!(String::from_arg(r#""\303\251""#).unwrap(), "\u{e9}");
    }

    #[test]
    fn ipv4_parts_are_decimal_with_leading_zeros() {
        assert_eq!(
            Ipv4Addr::from_arg("010.000.000.001"),
            Some(Ipv4Addr::new(10, 0, 0, 1))
        );
        assert_eq!(Ipv4Addr::from_arg("10.0.0.01"), Some(Ipv4Addr::new(10, 0, 0, 1)));
        assert_eq!(
            Ipv4Addr::from_arg("0255.0.0.00000007"),
            Some(Ipv4Addr::new(255, 0, 0, 7))
        );
        assert_eq!(Ipv4Addr::from_arg("10.0.0.256"), None);
        assert_eq!(Ipv4Addr::from_arg("10.0.0"), None);
        assert_eq!(Ipv4Addr::from_arg("10.0.0.1.2"), None);
        assert_eq!(Ipv4Addr::from_arg("10..0.1"), None);
        assert_eq!(Ipv4Addr::from_arg("+10.0.0.1"), None);
        assert_eq!(
            Ipv4Prefix::from_arg("010.0.0.01/32"),
            Some(Ipv4Prefix {
                addr: Ipv4Addr::new(10, 0, 0, 1),
                mask: Ipv4Addr::BROADCAST
            })
        );
        assert_eq!(
            Ipv4Prefix::from_arg("10.0.0.01"),
            Ipv4Prefix::from_arg("10.0.0.01/32")
        );
    }

    #[test]
    fn integers_take_underscores_between_digits() {
        assert_eq!(u32::from_arg("1_000"), Some(1000));
        assert_eq!(u64::from_arg("1_000_000"), Some(1_000_000));
        assert_eq!(i32::from_arg("-2_5"), Some(-25));
        assert_eq!(u32::from_arg("0x1_0"), Some(16));
        assert_eq!(u32::from_arg("0b1_0"), Some(2));
        assert_eq!(u32::from_arg("01_0"), Some(8));
        for bad in ["_1", "1_", "1__0", "0x_1", "0x1_", "1_x"] {
            assert_eq!(u32::from_arg(bad), None, "{}", bad);
        }
    }

    #[test]
    fn ethernet_parts_have_one_or_two_digits_with_either_separator() {
        assert_eq!(
            EtherAddr::from_arg("0-1-2-3-4-5"),
            Some(EtherAddr([0, 1, 2, 3, 4, 5]))
        );
        assert_eq!(
            EtherAddr::from_arg("a-0b-c-d-e-FF"),
            Some(EtherAddr([0xa, 0xb, 0xc, 0xd, 0xe, 0xff]))
        );
        assert_eq!(EtherAddr::from_arg("0-1-2-3-4-100"), None);
        assert_eq!(EtherAddr::from_arg("0-1:2-3-4-5"), None);
        assert_eq!(EtherAddr::from_arg("0-1-2-3-4"), None);
        assert_eq!(EtherAddr::from_arg("+1-1-2-3-4-5"), None);
    }

    #[test]
    fn intervals_take_clicks_units_prefixes_and_exponents() {
        assert_eq!(Interval::from_arg("1d"), Some(Interval(86_400_000_000_000)));
        assert_eq!(Interval::from_arg("1day"), Some(Interval(86_400_000_000_000)));
        assert_eq!(Interval::from_arg("1e-3"), Some(Interval(1_000_000)));
        assert_eq!(Interval::from_arg("2E+1ms"), Some(Interval(20_000_000)));
        assert_eq!(Interval::from_arg("1_500us"), Some(Interval(1_500_000)));
        assert_eq!(Interval::from_arg("3 msec"), Some(Interval(3_000_000)));
        assert_eq!(Interval::from_arg("2min"), Some(Interval(120_000_000_000)));
        assert_eq!(Interval::from_arg("1m"), Some(Interval(60_000_000_000)));
        assert_eq!(Interval::from_arg("1hr"), Some(Interval(3_600_000_000_000)));
        assert_eq!(Interval::from_arg(".5"), Some(Interval(500_000_000)));
        assert_eq!(Interval::from_arg("7ns"), Some(Interval(7)));
        for bad in ["1e", "1e-", "1x", "-1s", "1__0", "s", "1.2.3", "1secs"] {
            assert_eq!(Interval::from_arg(bad), None, "{}", bad);
        }
    }
}
