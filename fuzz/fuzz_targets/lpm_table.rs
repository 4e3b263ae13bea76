//! Route table files (`lpm::table::parse`) from arbitrary bytes: parsing never panics,
//! and a table that parses builds into lookup structures that agree with a per-length
//! hash reference at every route's first and last address, also when the routes are
//! inserted one by one and after every other one is removed again, through single and
//! batch lookups.

#![no_main]

use libfuzzer_sys::fuzz_target;
use lpm::{Ipv4Lpm, Ipv6Lpm, Key, Lpm};
use std::collections::HashMap;

fn reference<K: Key>(routes: &[(K, u8, u32)], bits: u32) -> Vec<HashMap<K, u32>> {
    let mut maps = vec![HashMap::new(); bits as usize + 1];
    for &(a, l, nh) in routes {
        maps[l as usize].insert(a.masked(l), nh);
    }
    maps
}

fn best<K: Key>(maps: &[HashMap<K, u32>], a: K) -> Option<u32> {
    (0..maps.len())
        .rev()
        .find_map(|l| maps[l].get(&a.masked(l as u8)).copied())
}

/// Looks `probes` up in one batch call and checks every answer against the reference
/// (`NO_ROUTE` is `u32::MAX` in both families).
fn batch_agrees<T: Lpm>(table: &T, probes: &[T::Key], maps: &[HashMap<T::Key, u32>]) {
    let mut out = vec![0u32; probes.len()];
    table.lookup_batch(probes, &mut out);
    for (&x, &o) in probes.iter().zip(&out) {
        assert_eq!(o, best(maps, x).unwrap_or(Ipv4Lpm::NO_ROUTE));
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(t) = lpm::table::parse(data, "fuzz") else {
        return;
    };
    let v4 = Ipv4Lpm::build(&t.v4);
    // The same routes inserted one by one (the update path) must agree too.
    let grown4 = Ipv4Lpm::new();
    for &(a, l, nh) in &t.v4 {
        grown4.insert(a, l, nh);
    }
    let mut r4 = reference(&t.v4, 32);
    let mut probes = Vec::new();
    for &(a, l, _) in &t.v4 {
        let last = a | !u32::MAX.checked_shl(32 - u32::from(l)).unwrap_or(0);
        for x in [a, last] {
            assert_eq!(v4.lookup(x), best(&r4, x));
            assert_eq!(grown4.lookup(x), best(&r4, x));
            probes.push(x);
        }
    }
    batch_agrees(&v4, &probes, &r4);
    batch_agrees(&grown4, &probes, &r4);
    let v6 = Ipv6Lpm::build(&t.v6);
    let grown6 = Ipv6Lpm::new();
    for &(a, l, nh) in &t.v6 {
        grown6.insert(a, l, nh);
    }
    let mut r6 = reference(&t.v6, 128);
    let mut probes6 = Vec::new();
    for &(a, l, _) in &t.v6 {
        let last = a | !u128::MAX.checked_shl(128 - u32::from(l)).unwrap_or(0);
        for x in [a, last] {
            assert_eq!(v6.lookup(x), best(&r6, x));
            assert_eq!(grown6.lookup(x), best(&r6, x));
            probes6.push(x);
        }
    }
    batch_agrees(&v6, &probes6, &r6);
    batch_agrees(&grown6, &probes6, &r6);
    // Every other route removed again (the delete path, which for IPv6 rebuilds the
    // nodes below a prefix that inherited it): the rest still answer as the reference.
    for &(a, l, _) in t.v4.iter().step_by(2) {
        grown4.remove(a, l);
        r4[l as usize].remove(&a.masked(l));
    }
    for &(a, l, _) in t.v6.iter().step_by(2) {
        grown6.remove(a, l);
        r6[l as usize].remove(&a.masked(l));
    }
    for &x in &probes {
        assert_eq!(grown4.lookup(x), best(&r4, x));
    }
    for &x in &probes6 {
        assert_eq!(grown6.lookup(x), best(&r6, x));
    }
    batch_agrees(&grown6, &probes6, &r6);
});
