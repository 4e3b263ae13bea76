//! IPv6 traffic and routes for the pipeline benchmark, used when the configuration
//! routes with `LookupIP6Route` (`conf/router6.click`, `bench pipeline --app route6`):
//! the same scheme as IPv4's, with UDP/IPv6 frames and IPv6 prefixes.

use super::Rng;
use std::collections::HashSet;
use std::fmt;
use std::net::Ipv6Addr;

/// An IPv6 route: prefix, length, output port.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Route6 {
    pub addr: u128,
    pub len: u8,
    pub port: usize,
}

fn mask(len: u8) -> u128 {
    if len == 0 {
        0
    } else {
        u128::MAX << (128 - u32::from(len))
    }
}

impl Route6 {
    fn contains(&self, a: u128) -> bool {
        a & mask(self.len) == self.addr
    }
}

impl fmt::Display for Route6 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{} {}", Ipv6Addr::from(self.addr), self.len, self.port)
    }
}

/// The routes `LookupIP6Route`'s configuration arguments give (`DADDR/LEN [GW] OUT`, or
/// a bare address for a /128); arguments of another form are skipped.
pub fn config_routes(args: &[String]) -> Vec<Route6> {
    args.iter()
        .filter_map(|a| {
            let w = graph::args::split_words(a);
            if !(2..=3).contains(&w.len()) {
                return None;
            }
            let (addr, len) = match w[0].split_once('/') {
                Some((a, l)) => (a, l.parse::<u8>().ok().filter(|&l| l <= 128)?),
                None => (w[0].as_str(), 128),
            };
            let addr = u128::from(addr.parse::<Ipv6Addr>().ok()?) & mask(len);
            let port = w.last()?.parse().ok()?;
            Some(Route6 { addr, len, port })
        })
        .collect()
}

/// `n` distinct random prefixes in 2000::/3 outside 2001:db8::/32 (where configurations
/// put their own networks), lengths shaped like an IPv6 BGP table (45 % /48, 20 % /32,
/// 25 % /33 to /47, 10 % /20 to /31), spread round-robin over `ports`.
pub fn random_routes(n: usize, ports: &[usize], rng: &mut Rng) -> Vec<Route6> {
    let doc = 0x2001_0db8u128 << 96;
    let mut seen = HashSet::with_capacity(n);
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        let r = rng.next();
        let len = match r % 100 {
            0..=44 => 48,
            45..=64 => 32,
            65..=89 => 33 + ((r >> 8) % 15) as u8,
            _ => 20 + ((r >> 8) % 12) as u8,
        };
        let bits = (u128::from(rng.next()) << 64) | u128::from(rng.next());
        let addr = ((bits >> 3) | (1u128 << 125)) & mask(len);
        if addr & mask(32) == doc {
            continue;
        }
        if seen.insert((addr, len)) {
            out.push(Route6 {
                addr,
                len,
                port: ports[out.len() % ports.len()],
            });
        }
    }
    out
}

/// A destination inside one of `targets` that no more specific route of `blocked`
/// (routes on non-forwarding outputs) takes away.
pub fn pick_destination(targets: &[Route6], blocked: &[Route6], rng: &mut Rng) -> Option<u128> {
    for _ in 0..64 {
        let t = targets[(rng.next() % targets.len() as u64) as usize];
        let host = (u128::from(rng.next()) << 64) | u128::from(rng.next());
        let a = t.addr | (host & !mask(t.len));
        if !blocked.iter().any(|b| b.len >= t.len && b.contains(a)) {
            return Some(a);
        }
    }
    None
}

/// Bytes of the smallest UDP/IPv6 frame (Ethernet, IPv6 and UDP headers): 66 on the
/// wire with the FCS, so `size` below that gives frames of this length.
pub const MIN_FRAME: usize = 62;

/// A UDP/IPv6 frame of `size - 4` bytes (the NIC adds the FCS), at least
/// [`MIN_FRAME`], hop limit 64, payload zero. The UDP checksum, which IPv6 makes
/// mandatory, is filled in (no element on the route path reads it).
pub fn udp6_frame(size: usize, src: u128, dst: u128, sport: u16, dport: u16) -> Vec<u8> {
    let len = size.saturating_sub(4).max(MIN_FRAME);
    let mut f = vec![0u8; len];
    f[..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x01]);
    f[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0xff, 0x01]);
    f[12..14].copy_from_slice(&[0x86, 0xdd]);
    let plen = (len - 54) as u16;
    f[14] = 0x60;
    f[18..20].copy_from_slice(&plen.to_be_bytes());
    f[20] = 17;
    f[21] = 64;
    f[22..38].copy_from_slice(&src.to_be_bytes());
    f[38..54].copy_from_slice(&dst.to_be_bytes());
    f[54..56].copy_from_slice(&sport.to_be_bytes());
    f[56..58].copy_from_slice(&dport.to_be_bytes());
    f[58..60].copy_from_slice(&plen.to_be_bytes());
    let pseudo =
        packet::checksum::pseudo_header_v6(&src.to_be_bytes(), &dst.to_be_bytes(), 17, u32::from(plen));
    let c = !packet::checksum::fold(packet::checksum::sum(&f[54..], pseudo));
    f[60..62].copy_from_slice(&(if c == 0 { 0xffff } else { c }).to_be_bytes());
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_from_the_configuration() {
        let args: Vec<String> = [
            "2001:db8:1::1 0",
            "2001:db8:2::/48 2001:db8::3 2",
            "2001:db8:1::/48 1",
            "junk",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let r = config_routes(&args);
        let a = |s: &str| u128::from(s.parse::<Ipv6Addr>().unwrap());
        assert_eq!(
            r,
            vec![
                Route6 {
                    addr: a("2001:db8:1::1"),
                    len: 128,
                    port: 0
                },
                Route6 {
                    addr: a("2001:db8:2::"),
                    len: 48,
                    port: 2
                },
                Route6 {
                    addr: a("2001:db8:1::"),
                    len: 48,
                    port: 1
                },
            ]
        );
        assert_eq!(r[1].to_string(), "2001:db8:2::/48 2");
    }

    #[test]
    fn random_routes_are_distinct_global_and_outside_the_documentation_prefix() {
        let mut rng = Rng::new(3);
        let r = random_routes(20_000, &[1, 2], &mut rng);
        let distinct: HashSet<(u128, u8)> = r.iter().map(|x| (x.addr, x.len)).collect();
        assert_eq!(distinct.len(), r.len());
        for x in &r {
            assert_eq!(x.addr >> 125, 1, "in 2000::/3: {}", x);
            assert_eq!(x.addr & !mask(x.len), 0, "no host bits: {}", x);
            assert_ne!(x.addr & mask(32), 0x2001_0db8u128 << 96, "{}", x);
        }
        assert_eq!(r.iter().filter(|x| x.port == 1).count(), 10_000);
        let p48 = r.iter().filter(|x| x.len == 48).count();
        assert!((8_000..10_000).contains(&p48), "{} /48s", p48);
    }

    #[test]
    fn frames_are_udp_over_ipv6_with_a_valid_checksum() {
        let src = u128::from("2001:db8:1::2".parse::<Ipv6Addr>().unwrap());
        let dst = u128::from("2001:db8:2::10".parse::<Ipv6Addr>().unwrap());
        let f = udp6_frame(64, src, dst, 1024, 9);
        assert_eq!(f.len(), 62);
        assert_eq!(&f[12..14], &[0x86, 0xdd]);
        assert_eq!((f[14] >> 4, f[20], f[21]), (6, 17, 64));
        assert_eq!(u16::from_be_bytes([f[18], f[19]]), 8);
        // The UDP checksum: the pseudo-header and the datagram sum to 0xffff, word by
        // word (RFC 1071, written out here).
        let mut all = f[22..54].to_vec();
        all.extend_from_slice(&[0, 0, 0, 8, 0, 0, 0, 17]);
        all.extend_from_slice(&f[54..]);
        let mut s: u32 = all
            .chunks(2)
            .map(|c| (u32::from(c[0]) << 8) | u32::from(c[1]))
            .sum();
        while s > 0xffff {
            s = (s & 0xffff) + (s >> 16);
        }
        assert_eq!(s, 0xffff);
        assert_eq!(udp6_frame(128, src, dst, 1, 2).len(), 124);
    }
}
