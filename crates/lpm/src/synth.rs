//! Deterministic, realistic-shaped route tables and query streams for benchmarks.
//!
//! Prefix-length shares follow the global BGP table of 2024 as summarised by Geoff
//! Huston's "BGP in 2024" (APNIC blog / potaroo.net), the same targets as DPDK anchor's
//! `gen_table.py`: IPv4 about 60 % /24, then /22 (12 %), /23 (9.5 %), /20-/21 (4.5 %
//! each), /16-/19, a thin tail of shorter and longer prefixes; IPv6 with /48 the most
//! common length (40 %), then /32 (13 %), /44 (8 %), /29 and /40 (5 % each), /47, /46,
//! /36, and a tail from /19 to /128 (host routes included). About 55 % of the prefixes
//! of /12 and longer (IPv4) and /20 and longer (IPv6) are more-specifics of a shorter
//! prefix already in the table (potaroo's "more specifics" share, 50-57 %), nested up
//! to 12 bits below their covering prefix; the rest are placed at random in the unicast
//! space (IPv4 1.0.0.0-223.255.255.255, IPv6 inside the RIRs' /12../16 blocks). 30 % of
//! more-specifics keep their parent's next hop; next hops are 1..=250.

use std::collections::HashSet;

/// xorshift64: small, fast, and the same sequence everywhere for a seed.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        // (xorshift's state must not be 0: seed 0 gets a state no other seed has.)
        Rng(if seed == 0 { 0x9e37_79b9_7f4a_7c15 } else { seed })
    }
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
    /// Uniform in `0..n` (n > 0), close enough for table shapes.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
}

/// IPv4 shares by prefix length (normalised when used).
pub const V4_SHARES: &[(u8, f64)] = &[
    (8, 0.00002),
    (9, 0.00002),
    (10, 0.00004),
    (11, 0.0001),
    (12, 0.0003),
    (13, 0.0006),
    (14, 0.0012),
    (15, 0.0024),
    (16, 0.0140),
    (17, 0.0090),
    (18, 0.0150),
    (19, 0.0250),
    (20, 0.0450),
    (21, 0.0450),
    (22, 0.1200),
    (23, 0.0950),
    (24, 0.6000),
    (25, 0.0008),
    (26, 0.0008),
    (27, 0.0006),
    (28, 0.0004),
    (29, 0.0004),
    (30, 0.0003),
    (31, 0.0001),
    (32, 0.0005),
];

/// IPv6 shares by prefix length (normalised when used).
pub const V6_SHARES: &[(u8, f64)] = &[
    (19, 0.001),
    (20, 0.002),
    (22, 0.002),
    (23, 0.002),
    (24, 0.004),
    (26, 0.002),
    (27, 0.002),
    (28, 0.006),
    (29, 0.050),
    (30, 0.008),
    (31, 0.004),
    (32, 0.130),
    (33, 0.010),
    (34, 0.010),
    (35, 0.006),
    (36, 0.020),
    (37, 0.005),
    (38, 0.008),
    (39, 0.005),
    (40, 0.050),
    (41, 0.004),
    (42, 0.010),
    (43, 0.004),
    (44, 0.080),
    (45, 0.010),
    (46, 0.030),
    (47, 0.040),
    (48, 0.400),
    (52, 0.004),
    (56, 0.010),
    (60, 0.002),
    (64, 0.012),
    (96, 0.001),
    (112, 0.001),
    (126, 0.001),
    (128, 0.003),
];

/// The RIRs' large IPv6 unicast blocks (first 16 bits, and how many /16s follow).
const V6_POOLS: &[(u16, u16)] = &[
    (0x2001, 1),
    (0x2400, 16),
    (0x2600, 16),
    (0x2800, 8),
    (0x2a00, 32),
    (0x2c00, 16),
];

/// A BGP-shaped IPv4 table of `n` prefixes (sorted, unique).
pub fn ipv4_table(n: usize, seed: u64) -> Vec<(u32, u8, u32)> {
    let mut rng = Rng::new(seed);
    generate(n, V4_SHARES, 32, 12, &mut rng, |rng| {
        // First octet 1..=223 except 10 and 127.
        loop {
            let a = rng.next_u64() as u32;
            let o = a >> 24;
            if (1..=223).contains(&o) && o != 10 && o != 127 {
                return u128::from(a);
            }
        }
    })
    .into_iter()
    .map(|(a, l, nh)| (a as u32, l, nh))
    .collect()
}

/// A BGP-shaped IPv6 table of `n` prefixes (sorted, unique).
pub fn ipv6_table(n: usize, seed: u64) -> Vec<(u128, u8, u32)> {
    let mut rng = Rng::new(seed);
    generate(n, V6_SHARES, 128, 20, &mut rng, |rng| {
        let (base, count) = V6_POOLS[rng.below(V6_POOLS.len() as u64) as usize];
        let top = u128::from(base + rng.below(u64::from(count)) as u16);
        let low = (u128::from(rng.next_u64()) << 64 | u128::from(rng.next_u64())) >> 16;
        top << 112 | low
    })
}

/// `n` shared out by `shares` (their weights normalised), rounded so the parts add up to
/// `n`: each gets the floor of its exact part, and the largest remainders one more.
fn apportion(n: usize, shares: &[(u8, f64)]) -> Vec<usize> {
    let total: f64 = shares.iter().map(|s| s.1).sum();
    let exact: Vec<f64> = shares.iter().map(|s| s.1 / total * n as f64).collect();
    let mut parts: Vec<usize> = exact.iter().map(|e| e.floor() as usize).collect();
    let short = n.saturating_sub(parts.iter().sum());
    let mut order: Vec<usize> = (0..shares.len()).collect();
    order.sort_by(|&a, &b| (exact[b] - exact[b].floor()).total_cmp(&(exact[a] - exact[a].floor())));
    for &i in order.iter().take(short) {
        parts[i] += 1;
    }
    parts
}

fn mask(width: u32, len: u8) -> u128 {
    if len == 0 {
        0
    } else {
        (u128::MAX >> (128 - width)) & !((1u128 << (width - u32::from(len))) - 1)
    }
}

fn generate(
    n: usize,
    shares: &[(u8, f64)],
    width: u32,
    nest_from: u8,
    rng: &mut Rng,
    mut random_addr: impl FnMut(&mut Rng) -> u128,
) -> Vec<(u128, u8, u32)> {
    let mut by_len: Vec<Vec<(u128, u32)>> = vec![Vec::new(); width as usize + 1];
    let mut seen: HashSet<(u128, u8)> = HashSet::with_capacity(n * 2);
    // Adds up to `want` new prefixes of length `len`, giving up after a number of
    // draws that only a length whose space is (nearly) used up reaches; returns how
    // many it added.
    let mut fill = |len: u8, want: usize, rng: &mut Rng| -> usize {
        let mut made = 0;
        let mut tries = 0;
        while made < want && tries < want * 20 + 100 {
            tries += 1;
            let (addr, nh) = if len >= nest_from && rng.below(100) < 55 {
                // A more-specific of a prefix 1..=12 bits shorter.
                let lo = len.saturating_sub(12).max(1);
                let total: usize = (lo..len).map(|l| by_len[l as usize].len()).sum();
                if total == 0 {
                    (random_addr(rng), 1 + rng.below(250) as u32)
                } else {
                    let mut k = rng.below(total as u64) as usize;
                    let mut l = lo;
                    while k >= by_len[l as usize].len() {
                        k -= by_len[l as usize].len();
                        l += 1;
                    }
                    let (pa, pnh) = by_len[l as usize][k];
                    let host =
                        (u128::from(rng.next_u64()) << 64 | u128::from(rng.next_u64())) & !mask(width, l);
                    let nh = if rng.below(10) < 3 {
                        pnh
                    } else {
                        1 + rng.below(250) as u32
                    };
                    (pa | host, nh)
                }
            } else {
                (random_addr(rng), 1 + rng.below(250) as u32)
            };
            let addr = addr & mask(width, len);
            if seen.insert((addr, len)) {
                by_len[len as usize].push((addr, nh));
                made += 1;
            }
        }
        made
    };
    let mut made = 0;
    for (&(len, _), want) in shares.iter().zip(apportion(n, shares)) {
        made += fill(len, want, rng);
    }
    // Lengths with too few prefixes to give their share (the /8s, in a large table)
    // leave the rest to the most common lengths, so the table has exactly `n`.
    let mut by_share: Vec<&(u8, f64)> = shares.iter().collect();
    by_share.sort_by(|a, b| b.1.total_cmp(&a.1));
    for &&(len, _) in &by_share {
        if made == n {
            break;
        }
        made += fill(len, n - made, rng);
    }
    let mut out: Vec<(u128, u8, u32)> = by_len
        .iter()
        .enumerate()
        .flat_map(|(l, v)| v.iter().map(move |&(a, nh)| (a, l as u8, nh)))
        .collect();
    out.sort_unstable();
    out
}

/// Query kinds, as in the DPDK anchor: uniform random addresses (IPv6: uniform inside
/// 2000::/3), or a random host inside a random table prefix.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Queries {
    Random,
    Table,
}

/// `n` IPv4 query addresses.
pub fn ipv4_queries(table: &[(u32, u8, u32)], n: usize, kind: Queries, seed: u64) -> Vec<u32> {
    let mut rng = Rng::new(seed);
    (0..n)
        .map(|_| {
            let r = rng.next_u64() as u32;
            if kind == Queries::Random || table.is_empty() {
                return r;
            }
            let (a, l, _) = table[rng.below(table.len() as u64) as usize];
            let m = mask(32, l) as u32;
            (a & m) | (r & !m)
        })
        .collect()
}

/// `n` IPv6 query addresses.
pub fn ipv6_queries(table: &[(u128, u8, u32)], n: usize, kind: Queries, seed: u64) -> Vec<u128> {
    let mut rng = Rng::new(seed);
    (0..n)
        .map(|_| {
            let r = u128::from(rng.next_u64()) << 64 | u128::from(rng.next_u64());
            if kind == Queries::Random || table.is_empty() {
                return (r >> 3) | (1u128 << 125);
            }
            let (a, l, _) = table[rng.below(table.len() as u64) as usize];
            let m = mask(128, l);
            (a & m) | (r & !m)
        })
        .collect()
}
