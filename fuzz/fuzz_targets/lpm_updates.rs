//! Sequences of route changes (`insert`, replacing a next hop, `remove`, `clear`) decoded
//! from arbitrary bytes, applied to an IPv4 and an IPv6 table at once: after every
//! change the changed prefix's edges (first and last address, one before, one past)
//! answer as a per-length hash reference does, `get` and `len` agree, and at the end
//! every address probed so far agrees through one batch lookup, `routes` lists the
//! reference's routes, and a table built from them answers the same.
//!
//! The addresses are drawn around a few bases with a chosen number of random low bits,
//! so prefixes nest and share the tables' chunks and nodes, and the next hops sometimes
//! come from a wide range: the paths this exercises are the writers' (chunk and node
//! rebuilds, prefixes shorter than the first level, kids, IPv6 split nodes, tables of
//! IPv4 byte values outgrowing 254 next hops), which `lpm_table` reaches only through
//! text that parses.

#![no_main]

use libfuzzer_sys::fuzz_target;
use lpm::{Ipv4Lpm, Ipv6Lpm, Key, Lpm};
use std::collections::HashMap;

/// Reads the input a byte or a word at a time (zeros once it runs out).
struct Bytes<'a>(&'a [u8]);

impl Bytes<'_> {
    fn byte(&mut self) -> u8 {
        match self.0.split_first() {
            Some((&b, rest)) => {
                self.0 = rest;
                b
            }
            None => 0,
        }
    }

    fn word(&mut self) -> u64 {
        (0..8).fold(0, |w, _| w << 8 | u64::from(self.byte()))
    }
}

/// Per prefix length, masked prefix to next hop.
struct Reference<K>(Vec<HashMap<K, u32>>);

impl<K: Key> Reference<K> {
    fn new(bits: usize) -> Self {
        Reference(vec![HashMap::new(); bits + 1])
    }

    fn best(&self, a: K) -> Option<u32> {
        (0..self.0.len())
            .rev()
            .find_map(|l| self.0[l].get(&a.masked(l as u8)).copied())
    }

    fn len(&self) -> usize {
        self.0.iter().map(HashMap::len).sum()
    }

    fn routes(&self) -> Vec<(K, u8, u32)> {
        let mut v: Vec<(K, u8, u32)> = (0..self.0.len())
            .flat_map(|l| self.0[l].iter().map(move |(&a, &nh)| (a, l as u8, nh)))
            .collect();
        v.sort_unstable();
        v
    }
}

/// An IPv4 address near one of a few bases: `low` supplies the random bits, `spread`
/// how many of them are used.
fn address4(base: u8, low: u64, spread: u8) -> u32 {
    const BASES: [u32; 4] = [0x0a01_0000, 0x0a01_8000, 0xc0a8_0000, 0x0000_0000];
    let random_bits = u32::from(spread) % 33;
    BASES[usize::from(base & 3)] ^ (low as u32 & u32::MAX.checked_shr(32 - random_bits).unwrap_or(0))
}

/// An IPv6 address near one of a few bases, as [`address4`].
fn address6(base: u8, low: u64, spread: u8) -> u128 {
    const BASES: [u128; 4] = [
        0x2001_0db8_0000_0000_0000_0000_0000_0000,
        0x2001_0db8_00aa_0000_0000_0000_0000_0000,
        0x2a00_1450_0000_0000_0000_0000_0000_0000,
        0x0000_0000_0000_0000_0000_0000_0000_0000,
    ];
    // The random bits land anywhere from bit 16 (just under the first level) to bit
    // 127: prefixes of every length share nodes.
    let at = 16 + u32::from(spread) % 112;
    BASES[usize::from(base & 3)] ^ (u128::from(low) << 64 >> at)
}

/// The first and last address of `a/l`, and the addresses just outside it.
fn edges<K: Key>(a: K, l: u8) -> [K; 4] {
    let first = a.masked(l).to_u128();
    let last = first
        | (u128::MAX >> (128 - K::BITS))
            .checked_shr(u32::from(l))
            .unwrap_or(0);
    [first, last, first.wrapping_sub(1), last.wrapping_add(1)].map(K::from_u128)
}

/// A next hop: mostly one of a few, sometimes one of thousands (so a table of byte
/// values outgrows them), and the largest ones.
fn next_hop(b: &mut Bytes) -> u32 {
    match b.byte() {
        0..=199 => u32::from(b.byte() % 16),
        200..=247 => u32::from(b.byte()) << 8 | u32::from(b.byte()),
        248..=251 => Ipv4Lpm::MAX_NEXT_HOP,
        _ => Ipv4Lpm::MAX_NEXT_HOP - u32::from(b.byte()),
    }
}

struct Run<T: Lpm> {
    table: T,
    reference: Reference<T::Key>,
    probes: Vec<T::Key>,
    address: fn(u8, u64, u8) -> T::Key,
}

impl<T: Lpm> Run<T> {
    fn new(address: fn(u8, u64, u8) -> T::Key) -> Self {
        Run {
            table: T::new(),
            reference: Reference::new(<T::Key as Key>::BITS as usize),
            probes: Vec::new(),
            address,
        }
    }

    fn step(&mut self, op: u8, b: &mut Bytes) {
        let (t, r) = (&self.table, &mut self.reference);
        let (a, l) = match op % 16 {
            // Removes a route the table holds, if any (picked from the sorted list, so a
            // run does not depend on the hash maps' order).
            12..=14 => {
                let routes = r.routes();
                let k = usize::from(b.byte()) << 8 | usize::from(b.byte());
                let Some(&(a, l, nh)) = routes.get(k % routes.len().max(1)) else {
                    return;
                };
                assert_eq!(t.remove(a, l), Some(nh));
                r.0[usize::from(l)].remove(&a);
                (a, l)
            }
            15 if b.byte() < 8 => {
                t.clear();
                r.0.iter_mut().for_each(HashMap::clear);
                assert_eq!((t.len(), t.routes()), (0, Vec::new()));
                return;
            }
            _ => {
                let l = (b.byte() as u32 % (<T::Key as Key>::BITS + 1)) as u8;
                let a = (self.address)(op >> 4, b.word(), b.byte()).masked(l);
                if op % 16 >= 10 {
                    // Removing what may not be there.
                    assert_eq!(t.remove(a, l), r.0[usize::from(l)].remove(&a));
                } else {
                    let nh = next_hop(b);
                    assert_eq!(t.insert(a, l, nh), r.0[usize::from(l)].insert(a, nh));
                }
                (a, l)
            }
        };
        assert_eq!(t.get(a, l), r.0[usize::from(l)].get(&a).copied());
        assert_eq!(t.len(), r.len());
        for x in edges(a, l) {
            assert_eq!(
                t.lookup_in(&lpm::pin(), x),
                r.best(x),
                "{:?} after a change of {:?}/{}",
                x,
                a,
                l
            );
            self.probes.push(x);
        }
    }

    fn finish(&self) {
        let mut out = vec![0u32; self.probes.len()];
        let want: Vec<u32> = self
            .probes
            .iter()
            .map(|&x| self.reference.best(x).unwrap_or(Ipv4Lpm::NO_ROUTE))
            .collect();
        self.table.lookup_batch(&self.probes, &mut out);
        assert_eq!(out, want);
        let routes = self.reference.routes();
        assert_eq!(self.table.routes(), routes);
        let built = T::build(&routes);
        built.lookup_batch(&self.probes, &mut out);
        assert_eq!(out, want);
    }
}

fuzz_target!(|data: &[u8]| {
    let mut b = Bytes(data);
    let mut v4: Run<Ipv4Lpm> = Run::new(address4);
    let mut v6: Run<Ipv6Lpm> = Run::new(address6);
    while !b.0.is_empty() {
        let op = b.byte();
        if b.byte() & 1 == 0 {
            v4.step(op, &mut b);
        } else {
            v6.step(op, &mut b);
        }
    }
    v4.finish();
    v6.finish();
    drop((v4, v6));
    // Replaced chunks and nodes are freed by the epoch collector once no reader can
    // hold them. Let it run those frees now: the leak check after an input would take
    // the ones still waiting for leaks (their links carry flag bits, so the waiting
    // frees hold no plain pointer to them).
    for _ in 0..64 {
        crossbeam_epoch::pin().flush();
    }
});
