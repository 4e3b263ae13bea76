//! IPv4 traffic and routes for the pipeline benchmark: the routes a configuration's
//! lookup element holds, random BGP-like routes to add, destinations inside them and
//! UDP/IPv4 frames (`route6.rs` is the same for IPv6).

use super::Rng;
use graph::args::{split_args, split_words, FromArg, Ipv4Prefix};
use std::collections::HashSet;
use std::fmt;
use std::net::Ipv4Addr;

/// An IPv4 route: prefix, length, output port.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Route {
    pub addr: u32,
    pub len: u8,
    pub port: usize,
}

impl Route {
    pub(super) fn mask(&self) -> u32 {
        if self.len == 0 {
            0
        } else {
            u32::MAX << (32 - u32::from(self.len))
        }
    }
    fn contains(&self, a: u32) -> bool {
        a & self.mask() == self.addr & self.mask()
    }
}

impl fmt::Display for Route {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{} {}", Ipv4Addr::from(self.addr), self.len, self.port)
    }
}

/// The routes a lookup element's configuration arguments give (`ADDR/MASK [GW] OUT`);
/// arguments of another form are skipped.
pub(super) fn config_routes(config: &str) -> Vec<Route> {
    split_args(config)
        .iter()
        .filter_map(|a| {
            let w = split_words(a);
            if !(2..=3).contains(&w.len()) {
                return None;
            }
            let p = Ipv4Prefix::from_arg(&w[0])?;
            let port = w.last()?.parse().ok()?;
            Some(Route {
                addr: u32::from(p.addr) & u32::from(p.mask),
                len: p.len()?,
                port,
            })
        })
        .collect()
}

/// First octets random prefixes avoid: private, loopback, link-local, shared and
/// benchmarking space, where configurations put their own networks.
pub(super) const RESERVED_FIRST_OCTETS: [u32; 7] = [10, 100, 127, 169, 172, 192, 198];

/// `n` distinct random prefixes in unicast space, lengths shaped like a BGP table
/// (55 % /24, 35 % /17 to /23, 10 % /8 to /16), spread round-robin over `ports`.
pub(super) fn random_routes(n: usize, ports: &[usize], rng: &mut Rng) -> Vec<Route> {
    let mut seen = HashSet::with_capacity(n);
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        let r = rng.next();
        let len = match r % 100 {
            0..=54 => 24,
            55..=89 => 17 + ((r >> 8) % 7) as u8,
            _ => 8 + ((r >> 8) % 9) as u8,
        };
        let first = 1 + ((r >> 16) % 223) as u32;
        if RESERVED_FIRST_OCTETS.contains(&first) {
            continue;
        }
        let mut route = Route {
            addr: (first << 24) | ((r >> 32) as u32 & 0x00ff_ffff),
            len,
            port: ports[out.len() % ports.len()],
        };
        route.addr &= route.mask();
        if seen.insert((route.addr, route.len)) {
            out.push(route);
        }
    }
    out
}

/// A destination inside one of `targets` that no more specific route of `blocked`
/// (routes on non-forwarding outputs) takes away.
pub(super) fn pick_destination(targets: &[Route], blocked: &[Route], rng: &mut Rng) -> Option<u32> {
    for _ in 0..64 {
        let t = targets[(rng.next() % targets.len() as u64) as usize];
        let a = t.addr | (rng.next() as u32 & !t.mask());
        if !blocked.iter().any(|b| b.len >= t.len && b.contains(a)) {
            return Some(a);
        }
    }
    None
}

/// A UDP/IPv4 frame of `size - 4` bytes (the NIC adds the FCS), header checksum set,
/// UDP checksum 0 (none), payload zero.
pub fn udp_frame(size: usize, src: u32, dst: u32, sport: u16, dport: u16, id: u16) -> Vec<u8> {
    let len = size.saturating_sub(4).max(42);
    let mut f = vec![0u8; len];
    f[..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x01]);
    f[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0xff, 0x01]);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    let ip_len = (len - 14) as u16;
    {
        let ip = &mut f[14..34];
        ip[0] = 0x45;
        ip[2..4].copy_from_slice(&ip_len.to_be_bytes());
        ip[4..6].copy_from_slice(&id.to_be_bytes());
        ip[8] = 64;
        ip[9] = 17;
        ip[12..16].copy_from_slice(&src.to_be_bytes());
        ip[16..20].copy_from_slice(&dst.to_be_bytes());
        let c = packet::checksum::checksum(ip);
        ip[10..12].copy_from_slice(&c.to_be_bytes());
    }
    f[34..36].copy_from_slice(&sport.to_be_bytes());
    f[36..38].copy_from_slice(&dport.to_be_bytes());
    f[38..40].copy_from_slice(&(ip_len - 20).to_be_bytes());
    f
}
