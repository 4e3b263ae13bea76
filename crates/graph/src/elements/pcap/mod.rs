//! Trace files: `FromDump` and `ToDump` (Click's tcpdump-file elements) and the pure
//! pcap parser they share ([`format`]).

pub mod format;
pub(crate) mod fromdump;
pub(crate) mod todump;

use crate::args::FromArg;

/// An I/O error worded as C's `strerror` (Rust adds " (os error N)").
pub(crate) fn strerror(e: &std::io::Error) -> String {
    let s = e.to_string();
    match s.find(" (os error ") {
        Some(i) => s[..i].to_string(),
        None => s,
    }
}

/// A time in nanoseconds: `SEC[.FRAC]` with an optional unit (`s`, `ms`, `us`, `ns`,
/// `min`, `h`, `d`), parsed exactly (no floating point), as Click's time arguments.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct TimeArg(pub i128);

impl FromArg for TimeArg {
    const WHAT: &'static str = "time";
    fn from_arg(s: &str) -> Option<Self> {
        let s = s.trim();
        let (neg, s) = match s.strip_prefix('-') {
            Some(r) => (true, r),
            None => (false, s.strip_prefix('+').unwrap_or(s)),
        };
        let split = s
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(s.len());
        let (num, unit) = s.split_at(split);
        let (int, frac) = num.split_once('.').unwrap_or((num, ""));
        if int.is_empty() && frac.is_empty() {
            return None;
        }
        if !int.bytes().all(|c| c.is_ascii_digit()) || !frac.bytes().all(|c| c.is_ascii_digit()) {
            return None;
        }
        let unit_ns: i128 = match unit.trim() {
            "" | "s" | "sec" | "secs" => 1_000_000_000,
            "ms" | "msec" | "msecs" => 1_000_000,
            "us" | "usec" | "usecs" => 1_000,
            "ns" | "nsec" | "nsecs" => 1,
            "m" | "min" | "mins" => 60_000_000_000,
            "h" | "hr" | "hrs" => 3_600_000_000_000,
            "d" | "day" | "days" => 86_400_000_000_000,
            _ => return None,
        };
        if int.len() > 20 {
            return None;
        }
        let ip: i128 = if int.is_empty() { 0 } else { int.parse().ok()? };
        let mut v = ip.checked_mul(unit_ns)?;
        // Fraction digits beyond nanosecond resolution are dropped.
        let mut scale = unit_ns;
        for c in frac.bytes() {
            scale /= 10;
            if scale == 0 {
                break;
            }
            v += (c - b'0') as i128 * scale;
        }
        Some(TimeArg(if neg { -v } else { v }))
    }
}

/// A probability as Click's `FixedPointArg(28)`: a non-negative real number stored
/// with 28 fraction bits (rounded to nearest).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fixed28(pub u64);

impl FromArg for Fixed28 {
    const WHAT: &'static str = "real number";
    fn from_arg(s: &str) -> Option<Self> {
        let s = s.trim();
        let (int, frac) = s.split_once('.').unwrap_or((s, ""));
        if (int.is_empty() && frac.is_empty())
            || !int.bytes().all(|c| c.is_ascii_digit())
            || !frac.bytes().all(|c| c.is_ascii_digit())
            || int.len() > 9
        {
            return None;
        }
        let ip: u64 = if int.is_empty() { 0 } else { int.parse().ok()? };
        // value = ip + frac / 10^k, scaled by 2^28, rounded; exact in u128.
        let frac = &frac[..frac.len().min(30)];
        let mut num: u128 = 0;
        let mut den: u128 = 1;
        for c in frac.bytes() {
            num = num * 10 + (c - b'0') as u128;
            den *= 10;
        }
        let scaled = ((num << 28) + den / 2) / den;
        Some(Fixed28((ip << 28) + scaled as u64))
    }
}

#[cfg(test)]
mod tests;
