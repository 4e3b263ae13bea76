//! IP and TCP options as text, both ways (Click's `unparse_ip_opt`, `ip_opt_ina`,
//! `unparse_tcp_opt` and `tcp_opt_ina`): `rr{1.0.0.1,2.0.0.2}+5`, `ssrr{...^...}`,
//! `ts{1,!45}+2++3`, `mss1400`, `wscale10`, `sackok`, `sack95-98`, `ts669:387`,
//! `98`, `99=0:5:10`, separated by `;` (or `,` on input).

use std::io::Write as _;

pub(crate) const TCP_PADDING: u32 = 1;
const TCP_MSS: u32 = 2;
const TCP_WSCALE: u32 = 4;
pub(crate) const TCP_SACK: u32 = 8;
const TCP_TIMESTAMP: u32 = 16;
const TCP_UNKNOWN: u32 = 32;
pub(crate) const TCP_ALL: u32 = 0xffff_ffff;
pub(crate) const TCP_ALL_NOPAD: u32 = 0xffff_fffe;
pub(crate) const TCP_NTALL: u32 = 0xffff_ffee;

const IPOPT_EOL: u8 = 0;
const IPOPT_NOP: u8 = 1;
const IPOPT_RR: u8 = 7;
const IPOPT_TS: u8 = 68;
const IPOPT_LSRR: u8 = 131;
const IPOPT_SSRR: u8 = 137;

/// Options longer than this (the most an IP or TCP header holds) are refused.
const MAX_OPTIONS: usize = 40;

fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

/// IP options without padding, as ToIPSummaryDump's `ip_opt` writes them: `.` for none,
/// `?` when one is malformed.
pub(crate) fn unparse_ip(opt: &[u8], out: &mut Vec<u8>) {
    let start = out.len();
    let mut i = 0;
    let mut sep: &[u8] = b"";
    while i < opt.len() {
        let o = &opt[i..];
        match o[0] {
            IPOPT_EOL => break,
            IPOPT_NOP => i += 1,
            kind @ (IPOPT_RR | IPOPT_LSRR | IPOPT_SSRR) => {
                if o.len() < 3 || usize::from(o[1]) > o.len() || o[1] < 3 || o[2] < 4 {
                    return bad_option(out, start);
                }
                out.extend_from_slice(sep);
                out.extend_from_slice(match kind {
                    IPOPT_RR => b"rr",
                    IPOPT_LSRR => b"lsrr",
                    _ => b"ssrr",
                });
                let ol = usize::from(o[1]);
                let op = usize::from(o[2]) - 1;
                let mut at = 3;
                let mut s: &[u8] = b"";
                out.push(b'{');
                while at + 4 <= ol {
                    if at == op {
                        if kind == IPOPT_RR {
                            break;
                        }
                        s = b"^";
                    }
                    out.extend_from_slice(s);
                    let _ = write!(out, "{}.{}.{}.{}", o[at], o[at + 1], o[at + 2], o[at + 3]);
                    s = b",";
                    at += 4;
                }
                if at == ol && at == op && kind != IPOPT_RR {
                    out.push(b'^');
                }
                out.push(b'}');
                if at + 4 <= ol && at == op && kind == IPOPT_RR {
                    let _ = write!(out, "+{}", (ol - at) / 4);
                }
                i += ol;
                sep = b";";
            }
            IPOPT_TS => {
                if o.len() < 4 || usize::from(o[1]) > o.len() || o[1] < 4 || o[2] < 5 {
                    return bad_option(out, start);
                }
                let ol = usize::from(o[1]);
                let op = usize::from(o[2]) - 1;
                let flag = o[3] & 0xf;
                let size = if (1..=3).contains(&flag) { 8 } else { 4 };
                out.extend_from_slice(sep);
                out.extend_from_slice(b"ts");
                match flag {
                    0 => {}
                    1 => out.extend_from_slice(b".ip"),
                    3 => out.extend_from_slice(b".preip"),
                    f => {
                        let _ = write!(out, ".{}", f);
                    }
                }
                out.push(b'{');
                let mut s: &[u8] = b"";
                let mut at = 4;
                while at + size <= ol {
                    if at == op {
                        if flag != 3 {
                            break;
                        }
                        s = b"^";
                    }
                    out.extend_from_slice(s);
                    if flag != 0 {
                        let _ = write!(out, "{}.{}.{}.{}=", o[at], o[at + 1], o[at + 2], o[at + 3]);
                        at += 4;
                    }
                    if flag == 3 && at > op {
                        out.pop();
                    } else {
                        let v = be32(&o[at..at + 4]);
                        if v & 0x8000_0000 != 0 {
                            out.push(b'!');
                        }
                        let _ = write!(out, "{}", v & 0x7fff_ffff);
                    }
                    s = b",";
                    at += 4;
                }
                if at == ol && at == op {
                    out.push(b'^');
                }
                out.push(b'}');
                if at + size <= ol && at == op {
                    let _ = write!(out, "+{}", (ol - at) / size);
                }
                if o[3] & 0xf0 != 0 {
                    let _ = write!(out, "++{}", o[3] >> 4);
                }
                i += ol;
                sep = b";";
            }
            kind => {
                if o.len() < 2 || usize::from(o[1]) > o.len() || o[1] < 2 {
                    return bad_option(out, start);
                }
                out.extend_from_slice(sep);
                let _ = write!(out, "{}", kind);
                let mut s = b'=';
                for &b in &o[2..usize::from(o[1])] {
                    let _ = write!(out, "{}{}", s as char, b);
                    s = b':';
                }
                i += usize::from(o[1]);
                sep = b";";
            }
        }
    }
    if out.len() == start {
        out.push(b'.');
    }
}

/// A malformed option makes the whole field `?`.
fn bad_option(out: &mut Vec<u8>, start: usize) {
    out.truncate(start);
    out.push(b'?');
}

/// TCP options of the kinds in `mask`, as ToIPSummaryDump writes them.
pub(crate) fn unparse_tcp(opt: &[u8], mask: u32, out: &mut Vec<u8>) {
    let start = out.len();
    let mut i = 0;
    let mut sep: &[u8] = b"";
    while i < opt.len() {
        let o = &opt[i..];
        let kind = o[0];
        if kind == 0 {
            if mask & TCP_PADDING != 0 {
                out.extend_from_slice(sep);
                out.extend_from_slice(b"eol");
            }
            break;
        }
        if kind == 1 {
            if mask & TCP_PADDING != 0 {
                out.extend_from_slice(sep);
                out.extend_from_slice(b"nop");
                sep = b";";
            }
            i += 1;
            continue;
        }
        let len = o.get(1).copied().map_or(usize::MAX, usize::from);
        let (want, valid) = match kind {
            2 => (TCP_MSS, len == 4),
            3 => (TCP_WSCALE, len == 3),
            4 => (TCP_SACK, len == 2),
            5 => (TCP_SACK, len % 8 == 2),
            8 => (TCP_TIMESTAMP, len == 10),
            _ => (TCP_UNKNOWN, len >= 2),
        };
        if len > o.len() || !valid {
            return bad_option(out, start);
        }
        if mask & want == 0 {
            // Click skips an option it does not print by its length.
            i += len;
            continue;
        }
        if kind == 5 {
            // One entry a block (none for an empty option, and no separator then).
            for block in o[2..len].chunks_exact(8) {
                out.extend_from_slice(sep);
                let _ = write!(out, "sack{}-{}", be32(&block[..4]), be32(&block[4..]));
                sep = b";";
            }
            i += len;
            continue;
        }
        out.extend_from_slice(sep);
        sep = b";";
        match kind {
            2 => {
                let _ = write!(out, "mss{}", u16::from_be_bytes([o[2], o[3]]));
            }
            3 => {
                let _ = write!(out, "wscale{}", o[2]);
            }
            4 => out.extend_from_slice(b"sackok"),
            8 => {
                let _ = write!(out, "ts{}:{}", be32(&o[2..6]), be32(&o[6..10]));
            }
            _ => {
                let _ = write!(out, "{}", kind);
                let mut s = b'=';
                for &b in &o[2..len] {
                    let _ = write!(out, "{}{}", s as char, b);
                    s = b':';
                }
            }
        }
        i += len;
    }
    if out.len() == start {
        out.push(b'.');
    }
}

/// Click's `cp_integer` on bytes: digits in `base` (0: C's prefixes) from `s[at]`;
/// returns where the digits end and the value (saturated), or `at` if there are none.
fn integer(s: &[u8], at: usize, base: u32) -> (usize, u32) {
    let mut i = at;
    let mut base = base;
    if base == 0 {
        if s.get(i) == Some(&b'0')
            && matches!(s.get(i + 1), Some(b'x' | b'X'))
            && s.get(i + 2).is_some_and(u8::is_ascii_hexdigit)
        {
            i += 2;
            base = 16;
        } else if s.get(i) == Some(&b'0') {
            base = 8;
        } else {
            base = 10;
        }
    }
    let digits_start = i;
    let mut v: u64 = 0;
    while let Some(d) = s.get(i).and_then(|&c| (c as char).to_digit(base)) {
        v = (v * u64::from(base) + u64::from(d)).min(u64::from(u32::MAX) + 1);
        i += 1;
    }
    if i == digits_start {
        return (at, 0);
    }
    (i, v.min(u64::from(u32::MAX)) as u32)
}

fn push_be32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_be_bytes());
}

/// `ip_opt` text back to option bytes: `None` when it does not parse; `.` or nothing
/// is no options.
pub(crate) fn parse_ip(text: &[u8]) -> Option<Vec<u8>> {
    if text.is_empty() || text == b"." {
        return Some(Vec::new());
    }
    let s = text;
    let end = s.len();
    let mut out: Vec<u8> = Vec::new();
    let mut i = 0;
    loop {
        let rest = &s[i..];
        if let Some(kind) = [
            (b"rr{".as_slice(), IPOPT_RR),
            (b"ssrr{", IPOPT_SSRR),
            (b"lsrr{", IPOPT_LSRR),
        ]
        .iter()
        .find(|(p, _)| rest.len() > p.len() && rest.starts_with(p))
        .map(|(p, k)| {
            i += p.len();
            *k
        }) {
            out.push(kind);
            let pos = out.len() - 1;
            let mut pointer: Option<usize> = None;
            out.extend_from_slice(&[0, 0]);
            loop {
                if s.get(i) == Some(&b'^') && pointer.is_none() {
                    pointer = Some(out.len() - pos + 1);
                    i += 1;
                }
                if !s.get(i).is_some_and(u8::is_ascii_digit) {
                    break;
                }
                i = parse_quad(s, i, &mut out)?;
                if s.get(i) == Some(&b',') {
                    i += 1;
                }
            }
            if s.get(i) != Some(&b'}') {
                return None;
            }
            out[pos + 2] = pointer.unwrap_or(out.len() - pos + 1) as u8;
            if i + 2 < end && s[i + 1] == b'+' && s[i + 2].is_ascii_digit() {
                let (j, n) = integer(s, i + 2, 10);
                i = j;
                if n < 64 {
                    out.resize(out.len() + n as usize * 4, 0);
                }
            } else {
                i += 1;
            }
            if out.len() - pos > 255 {
                return None;
            }
            out[pos + 1] = (out.len() - pos) as u8;
        } else if rest.len() > 3 && (rest.starts_with(b"ts{") || rest.starts_with(b"ts.")) {
            i = parse_ip_timestamp(s, i, &mut out)?;
        } else if rest.first().is_some_and(u8::is_ascii_digit) {
            i = parse_unknown(s, i, &mut out)?;
        } else if rest.starts_with(b"nop") {
            out.push(IPOPT_NOP);
            i += 3;
        } else if rest.starts_with(b"eol") && rest.get(3) != Some(&b',') {
            out.push(IPOPT_EOL);
            i += 3;
        } else {
            return None;
        }
        if i >= end {
            return finish_options(out);
        }
        if s[i] != b',' && s[i] != b';' {
            return None;
        }
        i += 1;
    }
}

/// Leading NOPs beyond the room go; options that still do not fit are refused.
fn finish_options(mut out: Vec<u8>) -> Option<Vec<u8>> {
    let nops = out.iter().take_while(|&&b| b == IPOPT_NOP).count();
    let drop = nops.min(out.len().saturating_sub(MAX_OPTIONS));
    out.drain(..drop);
    (out.len() <= MAX_OPTIONS).then_some(out)
}

/// `A.B.C.D` at `s[i]`, appended as four bytes; returns the position after it.
fn parse_quad(s: &[u8], mut i: usize, out: &mut Vec<u8>) -> Option<usize> {
    for part in 0..4 {
        let (j, v) = integer(s, i, 10);
        if j == i || v > 255 {
            return None;
        }
        out.push(v as u8);
        i = j;
        if part < 3 {
            if s.get(i) != Some(&b'.') {
                return None;
            }
            i += 1;
        }
    }
    Some(i)
}

/// A number option, `N` or `N=B:B:...`.
fn parse_unknown(s: &[u8], i: usize, out: &mut Vec<u8>) -> Option<usize> {
    let (mut i, kind) = integer(s, i, 0);
    if kind >= 256 {
        return None;
    }
    out.push(kind as u8);
    if i + 1 < s.len() && s[i] == b'=' && s[i + 1].is_ascii_digit() {
        let pos = out.len();
        out.push(0);
        loop {
            let (j, v) = integer(s, i + 1, 0);
            if v >= 256 {
                return None;
            }
            out.push(v as u8);
            i = j;
            if !(i + 1 < s.len() && s[i] == b':' && s[i + 1].is_ascii_digit()) {
                break;
            }
        }
        if out.len() > pos + 254 {
            return None;
        }
        out[pos] = (out.len() - pos + 1) as u8;
    }
    Some(i)
}

/// `ts{...}`, `ts.ip{...}`, `ts.preip{...}` or `ts.N{...}` at `s[i]`.
fn parse_ip_timestamp(s: &[u8], mut i: usize, out: &mut Vec<u8>) -> Option<usize> {
    let end = s.len();
    let pos = out.len();
    out.extend_from_slice(&[IPOPT_TS, 0, 0, 0]);
    // -1: not known yet; -2: addresses seen, type 1 or 3.
    let mut flag: i32 = -1;
    if s[i + 2] == b'.' {
        if i + 6 < end && &s[i + 3..i + 6] == b"ip{" {
            flag = 1;
            i += 6;
        } else if i + 9 < end && &s[i + 3..i + 9] == b"preip{" {
            flag = 3;
            i += 9;
        } else if s[i + 3].is_ascii_digit() {
            let (t, f) = integer(s, i + 3, 0);
            if f > 15 || t >= end || s[t] != b'{' {
                return None;
            }
            flag = f as i32;
            i = t + 1;
        } else {
            return None;
        }
    } else {
        i += 3;
    }
    let mut pointer: Option<usize> = None;
    loop {
        if s.get(i) == Some(&b'^') && pointer.is_none() {
            pointer = Some(out.len() - pos + 1);
            i += 1;
        }
        if !s.get(i).is_some_and(|c| c.is_ascii_digit() || *c == b'!') {
            break;
        }
        let entry = i;
        let entry_len = out.len();
        'retry: loop {
            if flag == 1 || flag == 3 || flag == -2 {
                i = parse_quad(s, i, out)?;
                if pointer.is_some() && flag == -2 {
                    flag = 3;
                }
                if i + 1 < end && s[i] == b'=' {
                    if s[i + 1].is_ascii_digit() || s[i + 1] == b'!' {
                        i += 1;
                    } else if s[i + 1] == b'?' && pointer.is_some() {
                        out.extend_from_slice(&[0; 4]);
                        i += 2;
                        break 'retry;
                    } else {
                        return None;
                    }
                } else if pointer.is_some() {
                    out.extend_from_slice(&[0; 4]);
                    break 'retry;
                } else {
                    return None;
                }
            }
            let mut top = 0u32;
            if s.get(i) == Some(&b'!') {
                top = 0x8000_0000;
                i += 1;
            }
            if !s.get(i).is_some_and(u8::is_ascii_digit) {
                return None;
            }
            let (j, v) = integer(s, i, 0);
            i = j;
            if s.get(i) == Some(&b'.') && flag == -1 {
                flag = -2;
                i = entry;
                out.truncate(entry_len);
                continue 'retry;
            } else if flag == -1 {
                flag = 0;
            }
            push_be32(out, v | top);
            break 'retry;
        }
        if s.get(i) == Some(&b',') {
            i += 1;
        }
    }
    if i < end {
        if s[i] != b'}' {
            return None;
        }
        i += 1;
    }
    if flag == -2 {
        flag = 1;
    }
    out[pos + 2] = pointer.unwrap_or(out.len() - pos + 1) as u8;
    if i + 1 < end && s[i] == b'+' && s[i + 1].is_ascii_digit() {
        let (j, n) = integer(s, i + 1, 0);
        i = j;
        if n < 64 {
            let each = if flag == 1 || flag == 3 { 8 } else { 4 };
            out.resize(out.len() + n as usize * each, 0);
        }
    }
    let mut overflow = 0;
    if i + 2 < end && s[i] == b'+' && s[i + 1] == b'+' && s[i + 2].is_ascii_digit() {
        let (j, n) = integer(s, i + 2, 0);
        i = j;
        if n < 16 {
            overflow = n as u8;
        }
    }
    // (A `ts{}` without entries keeps Click's -1 for its type: all bits set.)
    out[pos + 3] = ((i32::from(overflow) << 4) | flag) as u8;
    if out.len() - pos > 255 {
        return None;
    }
    out[pos + 1] = (out.len() - pos) as u8;
    Some(i)
}

/// `tcp_opt` (`tcp_ntopt`, `tcp_sack`: kinds in `mask`) text back to option bytes.
pub(crate) fn parse_tcp(text: &[u8], mask: u32) -> Option<Vec<u8>> {
    if text.is_empty() || text == b"." {
        return Some(Vec::new());
    }
    let s = text;
    let end = s.len();
    let mut out: Vec<u8> = Vec::new();
    let mut i = 0;
    loop {
        let rest = &s[i..];
        if rest.len() > 3 && rest.starts_with(b"mss") && mask & TCP_MSS != 0 {
            let (j, v) = integer(s, i + 3, 0);
            if j == i + 3 || v > 0xffff {
                return None;
            }
            out.extend_from_slice(&[2, 4, (v >> 8) as u8, v as u8]);
            i = j;
        } else if rest.len() > 6 && rest.starts_with(b"wscale") && mask & TCP_WSCALE != 0 {
            let (j, v) = integer(s, i + 6, 0);
            if j == i + 6 || v > 255 {
                return None;
            }
            out.extend_from_slice(&[3, 3, v as u8]);
            i = j;
        } else if rest.starts_with(b"sackok") && mask & TCP_SACK != 0 {
            out.extend_from_slice(&[4, 2]);
            i += 6;
        } else if rest.len() > 4 && rest.starts_with(b"sack") && mask & TCP_SACK != 0 {
            // Adjacent blocks make one option.
            let pos = out.len();
            out.extend_from_slice(&[5, 0]);
            i += 4;
            loop {
                let (t, a) = integer(s, i, 0);
                if t == i || t >= end || (s[t] != b':' && s[t] != b'-') {
                    return None;
                }
                let (u, b) = integer(s, t + 1, 0);
                if u == t + 1 {
                    return None;
                }
                push_be32(&mut out, a);
                push_be32(&mut out, b);
                i = u;
                if !(i + 5 < end && &s[i..i + 5] == b",sack") {
                    break;
                }
                i += 5;
            }
            if out.len() - pos > 255 {
                return None;
            }
            out[pos + 1] = (out.len() - pos) as u8;
        } else if rest.len() > 2 && rest.starts_with(b"ts") && mask & TCP_TIMESTAMP != 0 {
            let (t, a) = integer(s, i + 2, 0);
            if t == i + 2 || t >= end || s[t] != b':' {
                return None;
            }
            let (u, b) = integer(s, t + 1, 0);
            if u == t + 1 {
                return None;
            }
            if out.is_empty() {
                out.extend_from_slice(&[1, 1]);
            }
            out.extend_from_slice(&[8, 10]);
            push_be32(&mut out, a);
            push_be32(&mut out, b);
            i = u;
        } else if rest.first().is_some_and(u8::is_ascii_digit) && mask & TCP_UNKNOWN != 0 {
            i = parse_unknown(s, i, &mut out)?;
        } else if rest.starts_with(b"nop") && mask & TCP_PADDING != 0 {
            out.push(1);
            i += 3;
        } else if rest.starts_with(b"eol") && mask & TCP_PADDING != 0 && rest.get(3) != Some(&b',') {
            out.push(0);
            i += 3;
        } else {
            return None;
        }
        if i >= end || s[i].is_ascii_whitespace() {
            return finish_options(out);
        }
        if s[i] != b',' && s[i] != b';' {
            return None;
        }
        i += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(opt: &[u8]) -> String {
        let mut out = Vec::new();
        unparse_ip(opt, &mut out);
        String::from_utf8(out).unwrap()
    }

    fn tcp(opt: &[u8], mask: u32) -> String {
        let mut out = Vec::new();
        unparse_tcp(opt, mask, &mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn ip_options_as_click_writes_them() {
        assert_eq!(ip(&[1, 1, 0, 0]), ".");
        // Record route, pointer after the first address, room for one more.
        assert_eq!(ip(&[7, 11, 8, 10, 0, 0, 1, 0, 0, 0, 0]), "rr{10.0.0.1}+1");
        // Strict source route with the pointer on the second address.
        assert_eq!(
            ip(&[137, 11, 8, 1, 0, 0, 1, 1, 0, 0, 2, 0]),
            "ssrr{1.0.0.1^1.0.0.2}"
        );
        // Timestamps only, pointer past both, overflow 3.
        // (Click marks a pointer at the end of a timestamp option too.)
        assert_eq!(
            ip(&[68, 12, 13, 0x30, 0, 0, 0, 1, 0x80, 0, 0, 45]),
            "ts{1,!45^}++3"
        );
        assert_eq!(
            ip(&[68, 16, 13, 0x00, 0, 0, 0, 1, 0x80, 0, 0, 45, 0, 0, 0, 0]),
            "ts{1,!45}+1"
        );
        assert_eq!(ip(&[98, 2, 99, 5, 0, 5, 10]), "98;99=0:5:10");
        // A length past the end makes the field '?'.
        assert_eq!(ip(&[98, 9, 0]), "?");
    }

    #[test]
    fn tcp_options_as_click_writes_them() {
        let opts = [
            2, 4, 5, 0x78, 1, 3, 3, 10, 4, 2, 1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2,
        ];
        assert_eq!(tcp(&opts, TCP_ALL_NOPAD), "mss1400;wscale10;sackok;ts1:2");
        assert_eq!(tcp(&opts, TCP_NTALL), "mss1400;wscale10;sackok");
        assert_eq!(tcp(&opts, TCP_SACK), "sackok");
        assert_eq!(tcp(&opts, TCP_ALL), "mss1400;nop;wscale10;sackok;nop;nop;ts1:2");
        let sack = [5, 18, 0, 0, 0, 95, 0, 0, 0, 98, 0, 0, 0, 100, 0, 0, 0, 120];
        assert_eq!(tcp(&sack, TCP_ALL_NOPAD), "sack95-98;sack100-120");
        assert_eq!(tcp(&[3, 3, 10, 0], TCP_ALL_NOPAD), "wscale10");
        assert_eq!(tcp(&[2, 5, 0, 0, 0], TCP_ALL_NOPAD), "?");
    }

    #[test]
    fn option_text_parses_back_to_the_same_bytes() {
        assert_eq!(parse_tcp(b"wscale10", TCP_ALL).unwrap(), vec![3, 3, 10]);
        assert_eq!(
            parse_tcp(b"mss1400;sackok,ts1:2", TCP_ALL).unwrap(),
            vec![2, 4, 5, 0x78, 4, 2, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2]
        );
        assert_eq!(
            parse_tcp(b"ts1:2", TCP_ALL).unwrap(),
            vec![1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2]
        );
        assert_eq!(
            parse_tcp(b"sack95-98,sack100-120", TCP_ALL).unwrap(),
            vec![5, 18, 0, 0, 0, 95, 0, 0, 0, 98, 0, 0, 0, 100, 0, 0, 0, 120]
        );
        assert_eq!(parse_tcp(b".", TCP_ALL).unwrap(), Vec::<u8>::new());
        assert_eq!(parse_tcp(b"mss", TCP_ALL), None);
        assert_eq!(parse_tcp(b"wscale300", TCP_ALL), None);
        assert_eq!(parse_ip(b"nop,nop,eol").unwrap(), vec![1, 1, 0]);
        assert_eq!(
            parse_ip(b"ssrr{1.0.0.1^1.0.0.2}").unwrap(),
            vec![137, 11, 8, 1, 0, 0, 1, 1, 0, 0, 2]
        );
        assert_eq!(
            parse_ip(b"rr{10.0.0.1}+1").unwrap(),
            vec![7, 11, 8, 10, 0, 0, 1, 0, 0, 0, 0]
        );
        let ts = vec![68, 12, 13, 0x30, 0, 0, 0, 1, 0x80, 0, 0, 45];
        assert_eq!(parse_ip(b"ts{1,!45}++3").unwrap(), ts);
        assert_eq!(parse_ip(b"ts{1,!45^}++3").unwrap(), ts);
        assert_eq!(
            parse_ip(b"ts{1,!45}+1").unwrap(),
            vec![68, 16, 13, 0, 0, 0, 0, 1, 0x80, 0, 0, 45, 0, 0, 0, 0]
        );
        assert_eq!(parse_ip(b"98;99=0:5:10").unwrap(), vec![98, 99, 5, 0, 5, 10]);
        assert_eq!(parse_ip(b"rr{1.2.3}"), None);
        assert_eq!(parse_ip(b"bogus"), None);
    }
}
