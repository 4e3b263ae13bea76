//! Rewriting patterns, `SADDR SPORT DADDR DPORT` (or `SADDR DADDR` for the address
//! rewriters), as Click's `IPRewriterPattern`: each field `-` (unchanged) or a value;
//! the source port (NAPT) or the source address (address rewriters) may be a range,
//! `L-H`, an address prefix `A/N` (its addresses but the first and last, as Click
//! counts them), from which a value no live mapping uses is chosen: the packet's own
//! if it is in the range and free, else a random one, or the next one in order with
//! a `#` suffix (a `?` suffix: random, without preferring the packet's own).

use super::flow::FlowId;
use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// Click's pattern error messages.
pub(crate) const BAD_SADDR: &str = "bad source address";
pub(crate) const BAD_SPORT: &str = "bad source port";
pub(crate) const BAD_DADDR: &str = "bad destination address";
pub(crate) const BAD_DPORT: &str = "bad destination port";
pub(crate) const SYNTAX: &str = "syntax error";

#[derive(Debug)]
pub(crate) struct Pattern {
    saddr: u32,
    sport: u16,
    daddr: u32,
    dport: u16,
    /// True for a four-field pattern (ports), false for an address-only one.
    napt: bool,
    /// A four-field pattern that names a port (an address rewriter takes it, as
    /// Click does, and refuses the mappings it would make).
    ports: bool,
    sequential: bool,
    same_first: bool,
    /// Values in the range beyond the first (0: no range).
    variation: u32,
    next: AtomicU32,
    rng: AtomicU64,
}

fn parse_addr(s: &str) -> Option<u32> {
    crate::args::parse_ipv4(s)
        .or_else(|| crate::addressinfo::lookup_ipv4(s))
        .map(u32::from)
}

/// Strips a `#` (sequential) or `?` (random) suffix: (rest, sequential, same_first).
fn suffix(s: &str) -> (&str, bool, bool) {
    if let Some(r) = s.strip_suffix('#') {
        (r, true, false)
    } else if let Some(r) = s.strip_suffix('?') {
        (r, false, false)
    } else {
        (s, false, true)
    }
}

/// An address range `A-B` or prefix `A/N`: (first, variation).
fn addr_variation(s: &str) -> Option<(u32, u32)> {
    if let Some((a, b)) = s.split_once('-') {
        let (a, b) = (parse_addr(a)?, parse_addr(b)?);
        return (b >= a).then(|| (a, b - a));
    }
    let p: crate::args::Ipv4Prefix = crate::args::FromArg::from_arg(s)?;
    let (addr, mask) = (u32::from(p.addr), u32::from(p.mask));
    p.len()?;
    if addr == 0 || mask == 0 {
        return None;
    }
    Some(match mask {
        0xffff_ffff => (addr, 0),
        0xffff_fffe => (addr & mask, 1),
        _ => ((addr & mask) | 1, (!mask).wrapping_sub(2)),
    })
}

/// A port range `L-H`: (first, variation).
fn port_variation(s: &str) -> Option<(u16, u32)> {
    let (a, b) = s.split_once('-')?;
    let a: i64 = a.trim().parse().ok()?;
    let b: i64 = b.trim().parse().ok()?;
    (a >= 0 && b >= a && b < 65536).then(|| (a as u16, (b - a) as u32))
}

fn port(s: &str) -> Option<u16> {
    s.parse::<u32>()
        .ok()
        .filter(|&p| p > 0 && p < 65536)
        .map(|p| p as u16)
}

impl Pattern {
    /// Parses the words of a pattern: four (NAPT) or two (addresses only).
    /// Three fields are Click's `SADDR DADDR SPORT` (ICMPPingRewriter's identifier
    /// range is the third).
    pub fn parse(words: &[&str]) -> Result<Pattern, &'static str> {
        if words.len() == 3 {
            return Pattern::parse(&[words[0], words[2], words[1], "-"]);
        }
        if !(words.len() == 2 || words.len() == 4) {
            return Err(SYNTAX);
        }
        let napt = words.len() == 4;
        let (mut sequential, mut same_first, mut variation) = (false, true, 0);
        let mut saddr = 0;
        let w = words[0];
        if w != "-" {
            if let Some(a) = parse_addr(w) {
                saddr = a;
            } else {
                let (rest, seq, same) = suffix(w);
                let (a, v) = addr_variation(rest).ok_or(BAD_SADDR)?;
                (saddr, variation, sequential, same_first) = (a, v, seq, same);
            }
        }
        let mut sport = 0;
        let mut rest = &words[1..];
        if napt {
            let w = words[1];
            if w != "-" {
                if let Some(p) = port(w) {
                    sport = p;
                } else {
                    let (r, seq, same) = suffix(w);
                    let (p, v) = port_variation(r).ok_or(BAD_SPORT)?;
                    (sport, variation, sequential, same_first) = (p, v, seq, same);
                }
            }
            rest = &words[2..];
        }
        let daddr = match rest[0] {
            "-" => 0,
            w => parse_addr(w).ok_or(BAD_DADDR)?,
        };
        let dport = if napt {
            match rest[1] {
                "-" => 0,
                w => port(w).ok_or(BAD_DPORT)?,
            }
        } else {
            0
        };
        Ok(Pattern {
            saddr,
            sport,
            daddr,
            dport,
            napt,
            ports: napt && (words[1] != "-" || words[3] != "-"),
            sequential,
            same_first,
            variation,
            next: AtomicU32::new(0),
            rng: AtomicU64::new(0x9e37_79b9_7f4a_7c15),
        })
    }

    /// Parses an address rewriter's pattern: `SADDR DADDR`, or four fields whose ports
    /// are `-`.
    pub fn parse_addresses(words: &[&str]) -> Result<Pattern, &'static str> {
        match words.len() {
            2 => Pattern::parse(words),
            4 if words[1] == "-" && words[3] == "-" => Pattern::parse(&[words[0], words[2]]),
            // Ports: refused if they do not parse; if they do, the pattern is taken
            // and the mappings it would make are refused (Click's add_flow).
            4 => Pattern::parse(words),
            _ => Err(SYNTAX),
        }
    }

    /// Whether the pattern names a port (see `ports`).
    pub fn names_ports(&self) -> bool {
        self.ports
    }

    /// Whether the pattern rewrites the destination address.
    pub fn names_destination(&self) -> bool {
        self.daddr != 0
    }

    fn random(&self, bound: u32) -> u32 {
        // xorshift64*, good enough to spread ports; one atomic per new flow.
        let mut x = self.rng.load(Ordering::Relaxed);
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.rng.store(x, Ordering::Relaxed);
        let r = x.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 32;
        (r % (u64::from(bound) + 1)) as u32
    }

    /// The flow `flow` becomes, or `None` when every value of the range is taken:
    /// `taken(reply)` says whether the reply flow of a candidate is mapped already.
    pub fn rewrite(&self, flow: FlowId, taken: &dyn Fn(FlowId) -> bool) -> Option<FlowId> {
        let mut out = flow;
        if self.saddr != 0 {
            out.saddr = self.saddr;
        }
        if self.sport != 0 {
            out.sport = self.sport;
        }
        if self.daddr != 0 {
            out.daddr = self.daddr;
        }
        if self.dport != 0 {
            out.dport = self.dport;
        }
        if self.variation == 0 {
            return Some(out);
        }
        let top = self.variation;
        let base = if self.napt {
            u32::from(self.sport)
        } else {
            self.saddr
        };
        let candidate = |val: u32| -> FlowId {
            let mut c = out;
            if self.napt {
                c.sport = (base + val) as u16;
            } else {
                c.saddr = base.wrapping_add(val);
            }
            c
        };
        let own = if self.napt {
            u32::from(flow.sport)
        } else {
            flow.saddr
        };
        if self.same_first && own.wrapping_sub(base) <= top {
            let c = candidate(own - base);
            if !taken(c.reverse()) {
                self.next.store(own - base + 1, Ordering::Relaxed);
                return Some(c);
            }
        }
        let mut val = if self.sequential {
            let n = self.next.load(Ordering::Relaxed);
            if n > top {
                0
            } else {
                n
            }
        } else {
            self.random(top)
        };
        for _ in 0..=u64::from(top) {
            let c = candidate(val);
            if !taken(c.reverse()) {
                self.next.store(val.wrapping_add(1), Ordering::Relaxed);
                return Some(c);
            }
            val = if val == top { 0 } else { val + 1 };
        }
        None
    }

    /// Click's text of the pattern (the `patterns` handler).
    pub fn unparse(&self) -> String {
        let addr = |a: u32| Ipv4Addr::from(a).to_string();
        let mut s = if !self.napt && self.variation > 0 {
            format!(
                "{}-{}",
                addr(self.saddr),
                addr(self.saddr.wrapping_add(self.variation))
            )
        } else if self.saddr != 0 {
            addr(self.saddr)
        } else {
            "-".to_string()
        };
        if self.napt {
            if self.variation > 0 {
                s.push_str(&format!(
                    " {}-{}",
                    self.sport,
                    u32::from(self.sport) + self.variation
                ));
            } else if self.sport == 0 {
                s.push_str(" -");
            } else {
                s.push_str(&format!(" {}", self.sport));
            }
        }
        if self.daddr != 0 {
            s.push_str(&format!(" {}", addr(self.daddr)));
        } else {
            s.push_str(" -");
        }
        if self.napt {
            if self.dport == 0 {
                s.push_str(" -");
            } else {
                s.push_str(&format!(" {}", self.dport));
            }
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> u32 {
        u32::from(s.parse::<Ipv4Addr>().unwrap())
    }

    #[test]
    fn parses_and_unparses_as_click() {
        for (text, back) in [
            ("1.0.0.1 1 - -", "1.0.0.1 1 - -"),
            ("1.0.0.1 1-65535 - -", "1.0.0.1 1-65535 - -"),
            ("1.0.0.1 - - -", "1.0.0.1 - - -"),
            ("- 1024-2048# 2.0.0.2 80", "- 1024-2048 2.0.0.2 80"),
            ("1.0.0.0/24 -", "1.0.0.1-1.0.0.254 -"),
            ("1.0.0.5-1.0.0.9? 2.0.0.1", "1.0.0.5-1.0.0.9 2.0.0.1"),
            ("2.0.0.2 - 0-65535#", "2.0.0.2 0-65535 - -"),
        ] {
            let w: Vec<&str> = text.split_whitespace().collect();
            assert_eq!(Pattern::parse(&w).unwrap().unparse(), back, "{}", text);
        }
        for (text, err) in [
            ("1.0.0.1 1x - -", BAD_SPORT),
            ("1.0.0.0 456-19 - -", BAD_SPORT),
            ("1.0.0.0 456-65536 - -", BAD_SPORT),
            ("1.0.0.x 1 - -", BAD_SADDR),
            ("- 1 x -", BAD_DADDR),
            ("- 1 - 0", BAD_DPORT),
            ("- 1 - - -", SYNTAX),
        ] {
            let w: Vec<&str> = text.split_whitespace().collect();
            assert_eq!(Pattern::parse(&w).unwrap_err(), err, "{}", text);
        }
    }

    #[test]
    fn address_patterns_take_no_ports() {
        // Ports that do not parse are refused (Click's IPRewriter-02.clicktest);
        // ports that do are taken, and the mappings refused.
        for text in ["1.0.0.1 1x - -", "1.0.0.0 456-19 - -", "1.0.0.0 456-65536 - -"] {
            let w: Vec<&str> = text.split_whitespace().collect();
            assert_eq!(Pattern::parse_addresses(&w).unwrap_err(), BAD_SPORT, "{}", text);
        }
        let p = Pattern::parse_addresses(&["1.0.0.0", "0-255", "-", "-"]).unwrap();
        assert!(p.names_ports());
        let p = Pattern::parse_addresses(&["1.0.0.1", "-", "-", "-"]).unwrap();
        assert_eq!(p.unparse(), "1.0.0.1 -");
    }

    #[test]
    fn sequential_ports_skip_those_in_use_and_wrap() {
        let p = Pattern::parse(&["1.0.0.1", "1024-1026#", "-", "-"]).unwrap();
        let used = std::cell::RefCell::new(Vec::<FlowId>::new());
        let take = |f: FlowId| {
            let r = p.rewrite(f, &|rev| used.borrow().contains(&rev));
            if let Some(r) = r {
                used.borrow_mut().push(r.reverse());
            }
            r.map(|r| r.sport)
        };
        let f = |sp, d: &str, dp| FlowId::new(ip("18.26.4.44"), sp, ip(d), dp);
        assert_eq!(take(f(1, "10.0.0.4", 1)), Some(1024));
        assert_eq!(take(f(2, "10.0.0.8", 2)), Some(1025));
        assert_eq!(take(f(3, "10.0.0.4", 3)), Some(1026));
        assert_eq!(take(f(4, "10.0.0.8", 2)), Some(1024));
        assert_eq!(take(f(5, "10.0.0.8", 2)), Some(1026));
        assert_eq!(take(f(6, "10.0.0.8", 2)), None);
    }

    #[test]
    fn the_packets_own_port_is_preferred_without_a_suffix() {
        let p = Pattern::parse(&["1.0.0.1", "1000-2000", "-", "-"]).unwrap();
        let r = p.rewrite(FlowId::new(1, 1500, 2, 80), &|_| false).unwrap();
        assert_eq!((r.saddr, r.sport, r.daddr, r.dport), (ip("1.0.0.1"), 1500, 2, 80));
        let r = p
            .rewrite(FlowId::new(1, 1500, 2, 80), &|f| f.dport == 1500)
            .unwrap();
        assert!((1000..=2000).contains(&r.sport) && r.sport != 1500);
    }
}
