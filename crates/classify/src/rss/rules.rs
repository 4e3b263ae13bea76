//! Flow rules: frames that match a rule go to its queue, ahead of the RSS hash, as a
//! NIC's flow steering rules (`ethtool -N ... action Q`) send them.
//!
//! A rule is written `[ip|ip6] [tcp|udp|proto N] [src PREFIX] [dst PREFIX] [sport N]
//! [dport N] queue Q`: every condition given must hold. An address prefix decides the
//! family; `ip` or `ip6` alone names one; a rule with neither matches both. Ports are
//! those of unfragmented TCP and UDP packets whose ports are in the frame (the fields
//! the 4-tuple hash reads); a rule with a port matches nothing else. The first rule a
//! frame matches decides its queue; a frame no rule matches is hashed.

use super::{ip_fields, IpFields};
use std::fmt;
use std::net::IpAddr;

/// The most rules a port takes.
pub const MAX_RULES: usize = 64;

/// An address prefix: the address with the bits past `len` cleared.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Prefix {
    pub addr: IpAddr,
    pub len: u8,
}

impl Prefix {
    fn parse(text: &str) -> Result<Prefix, String> {
        let (a, l) = match text.split_once('/') {
            Some((a, l)) => (a, Some(l)),
            None => (text, None),
        };
        let addr: IpAddr = a
            .parse()
            .map_err(|_| format!("'{}' is not an IPv4 or IPv6 address", a))?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let len = match l {
            None => max,
            Some(l) => l
                .parse::<u8>()
                .ok()
                .filter(|&n| n <= max)
                .ok_or_else(|| format!("prefix length '{}' is not 0 to {}", l, max))?,
        };
        Ok(Prefix {
            addr: mask(addr, len),
            len,
        })
    }

    /// The address's bytes, and the mask's.
    pub fn bytes(&self) -> (Vec<u8>, Vec<u8>) {
        let a = match self.addr {
            IpAddr::V4(a) => a.octets().to_vec(),
            IpAddr::V6(a) => a.octets().to_vec(),
        };
        let m: Vec<u8> = (0..a.len())
            .map(|i| {
                let bits = (usize::from(self.len)).saturating_sub(8 * i).min(8);
                (0xff00u16 >> bits) as u8
            })
            .collect();
        (a, m)
    }

    fn contains(&self, addr: &[u8]) -> bool {
        let (a, m) = self.bytes();
        a.len() == addr.len() && a.iter().zip(&m).zip(addr).all(|((a, m), x)| x & m == *a)
    }
}

fn mask(addr: IpAddr, len: u8) -> IpAddr {
    match addr {
        IpAddr::V4(a) => {
            let m = u32::MAX.checked_shl(32 - u32::from(len)).unwrap_or(0);
            IpAddr::V4((u32::from(a) & m).into())
        }
        IpAddr::V6(a) => {
            let m = u128::MAX.checked_shl(128 - u32::from(len)).unwrap_or(0);
            IpAddr::V6((u128::from(a) & m).into())
        }
    }
}

impl fmt::Display for Prefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.len)
    }
}

/// IP version 4 or 6.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    V4,
    V6,
}

/// One rule: conditions, all of which must hold, and the queue.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlowRule {
    /// `None`: both families.
    pub family: Option<Family>,
    pub proto: Option<u8>,
    pub src: Option<Prefix>,
    pub dst: Option<Prefix>,
    pub sport: Option<u16>,
    pub dport: Option<u16>,
    pub queue: u16,
}

impl FlowRule {
    /// Reads one rule (see the module's documentation).
    pub fn parse(text: &str) -> Result<FlowRule, String> {
        let mut r = FlowRule {
            family: None,
            proto: None,
            src: None,
            dst: None,
            sport: None,
            dport: None,
            queue: u16::MAX,
        };
        let mut words = text.split_whitespace();
        let mut queue = None;
        let port = |w: &str, what: &str| {
            w.parse::<u16>()
                .map_err(|_| format!("{} '{}' is not a port (0 to 65535)", what, w))
        };
        while let Some(w) = words.next() {
            let family = |r: &mut FlowRule, f: Family| -> Result<(), String> {
                match r.family {
                    Some(g) if g != f => Err("a rule is for IPv4 or IPv6, not both".into()),
                    _ => {
                        r.family = Some(f);
                        Ok(())
                    }
                }
            };
            match w {
                "ip" => family(&mut r, Family::V4)?,
                "ip6" => family(&mut r, Family::V6)?,
                "tcp" => set(&mut r.proto, 6, "protocol")?,
                "udp" => set(&mut r.proto, 17, "protocol")?,
                "proto" => {
                    let v = value(words.next(), w)?;
                    let p = v
                        .parse::<u8>()
                        .map_err(|_| format!("proto '{}' is not a protocol number (0 to 255)", v))?;
                    set(&mut r.proto, p, "protocol")?;
                }
                "src" | "dst" => {
                    let p = Prefix::parse(value(words.next(), w)?)?;
                    family(&mut r, if p.addr.is_ipv4() { Family::V4 } else { Family::V6 })?;
                    let slot = if w == "src" { &mut r.src } else { &mut r.dst };
                    set(slot, p, w)?;
                }
                "sport" | "dport" => {
                    let p = port(value(words.next(), w)?, w)?;
                    let slot = if w == "sport" { &mut r.sport } else { &mut r.dport };
                    set(slot, p, w)?;
                }
                "queue" => {
                    let v = value(words.next(), w)?;
                    let q = v
                        .parse::<u16>()
                        .map_err(|_| format!("queue '{}' is not a queue number", v))?;
                    set(&mut queue, q, "queue")?;
                }
                _ => {
                    return Err(format!(
                        "'{}' is not part of a rule ([ip|ip6] [tcp|udp|proto N] [src PREFIX] [dst PREFIX] [sport N] [dport N] queue Q)",
                        w
                    ))
                }
            }
        }
        r.queue = queue.ok_or("a rule ends with 'queue Q', the queue its frames go to")?;
        if (r.sport.is_some() || r.dport.is_some()) && !matches!(r.proto, None | Some(6) | Some(17)) {
            return Err("ports are for tcp and udp".into());
        }
        Ok(r)
    }

    /// Whether the frame's fields (`None`: not IP) satisfy the rule.
    fn matches(&self, f: &IpFields) -> bool {
        let family = if f.src().len() == 4 {
            Family::V4
        } else {
            Family::V6
        };
        self.family.is_none_or(|x| x == family)
            && self.proto.is_none_or(|p| p == f.proto)
            && self.src.is_none_or(|p| p.contains(f.src()))
            && self.dst.is_none_or(|p| p.contains(f.dst()))
            && self.sport.is_none_or(|p| f.ports.is_some_and(|(s, _)| s == p))
            && self.dport.is_none_or(|p| f.ports.is_some_and(|(_, d)| d == p))
    }
}

/// The word after keyword `what`.
fn value<'a>(w: Option<&'a str>, what: &str) -> Result<&'a str, String> {
    w.ok_or_else(|| format!("'{}' needs a value", what))
}

fn set<T>(slot: &mut Option<T>, v: T, what: &str) -> Result<(), String> {
    if slot.is_some() {
        return Err(format!("{} given twice", what));
    }
    *slot = Some(v);
    Ok(())
}

impl fmt::Display for FlowRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut w: Vec<String> = Vec::new();
        // The family is written only where no address implies it.
        if self.src.is_none() && self.dst.is_none() {
            match self.family {
                Some(Family::V4) => w.push("ip".into()),
                Some(Family::V6) => w.push("ip6".into()),
                None => {}
            }
        }
        match self.proto {
            Some(6) => w.push("tcp".into()),
            Some(17) => w.push("udp".into()),
            Some(p) => w.push(format!("proto {}", p)),
            None => {}
        }
        for (name, p) in [("src", self.src), ("dst", self.dst)] {
            if let Some(p) = p {
                w.push(format!("{} {}", name, p));
            }
        }
        for (name, p) in [("sport", self.sport), ("dport", self.dport)] {
            if let Some(p) = p {
                w.push(format!("{} {}", name, p));
            }
        }
        w.push(format!("queue {}", self.queue));
        write!(f, "{}", w.join(" "))
    }
}

/// Reads a list of rules, one a line or separated by `;` (empty: none).
pub fn parse_rules(text: &str) -> Result<Vec<FlowRule>, String> {
    let rules = text
        .split(['\n', ';'])
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .enumerate()
        .map(|(i, l)| FlowRule::parse(l).map_err(|e| format!("rule {}: {}", i + 1, e)))
        .collect::<Result<Vec<_>, _>>()?;
    if rules.len() > MAX_RULES {
        return Err(format!(
            "{} rules; a port takes at most {}",
            rules.len(),
            MAX_RULES
        ));
    }
    Ok(rules)
}

/// The rules as [`parse_rules`] reads them back, one a line.
pub fn format_rules(rules: &[FlowRule]) -> String {
    rules.iter().map(|r| format!("{}\n", r)).collect()
}

/// The queue the first rule `frame` matches names, if one does.
pub fn rule_queue(rules: &[FlowRule], frame: &[u8]) -> Option<usize> {
    if rules.is_empty() {
        return None;
    }
    let f = ip_fields(frame)?;
    rules.iter().find(|r| r.matches(&f)).map(|r| usize::from(r.queue))
}

#[cfg(test)]
mod tests;
