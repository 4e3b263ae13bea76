//! Next-hop indices for the route-lookup elements (`iplookup.rs`, `ip6/lookupip6route.rs`).
//!
//! A route's next hop in the `lpm` table is an index. The first indices are the output
//! ports themselves (routes without a gateway, so a worker needs no table read for
//! them); each other (gateway, port) pair, and each multipath group of them
//! (`multipath.rs`), gets an index of its own while routes use it. An index whose last route is gone is given to another pair only after every worker
//! that may have read it has finished its batch (`lpm::defer`): a worker holds an `lpm`
//! pin from its lookup until it has read the index's pair, and an index reused sooner
//! would send its packet to the new pair's gateway and port.

use std::collections::{HashMap, VecDeque};
use std::hash::Hash;
use std::sync::{Arc, Mutex};

/// The control side's record of which pair holds which index, behind the element's
/// mutex. The element keeps the pairs themselves where its workers read them.
pub(crate) struct HopIndex<K> {
    /// Indices below this are output ports.
    direct: usize,
    /// Indices there can be at once.
    max: usize,
    ids: HashMap<K, u32>,
    refs: Vec<u32>,
    /// Indices free to reuse, oldest first.
    free: VecDeque<u32>,
    /// Indices whose grace period has passed, waiting to join `free`.
    returned: Arc<Mutex<Vec<u32>>>,
}

impl<K: Clone + Eq + Hash> HopIndex<K> {
    pub(crate) fn new(direct: usize, max: usize) -> HopIndex<K> {
        HopIndex {
            direct,
            max,
            ids: HashMap::new(),
            refs: vec![0; direct],
            free: VecDeque::new(),
            returned: Arc::new(Mutex::new(Vec::new())),
        }
    }

    /// A reference to output `port`'s own index (counted, never freed).
    pub(crate) fn port(&mut self, port: u32) -> u32 {
        self.refs[port as usize] += 1;
        port
    }

    /// A reference to the index of `pair`, and whether the index is new to it (the
    /// caller then stores the pair where workers read it, before any route uses the
    /// index). `None` when every index is taken.
    pub(crate) fn acquire(&mut self, pair: &K) -> Option<(u32, bool)> {
        if let Some(&h) = self.ids.get(pair) {
            self.refs[h as usize] += 1;
            return Some((h, false));
        }
        self.free
            .extend(self.returned.lock().unwrap_or_else(|p| p.into_inner()).drain(..));
        let h = match self.free.pop_front() {
            Some(h) => h,
            None if self.refs.len() < self.max => {
                self.refs.push(0);
                (self.refs.len() - 1) as u32
            }
            None => return None,
        };
        self.refs[h as usize] = 1;
        self.ids.insert(pair.clone(), h);
        Some((h, true))
    }

    /// Drops a reference to index `h` (a pair's or a port's). True when that was the
    /// last one of a pair's index: the pair keeps the index, and gets it back if
    /// acquired again, until the caller retires it with [`Self::retire`] once no route
    /// in the table can still name it.
    pub(crate) fn release(&mut self, h: u32) -> bool {
        let refs = &mut self.refs[h as usize];
        *refs -= 1;
        *refs == 0 && h as usize >= self.direct
    }

    /// Takes each index of `released` (with the pair it held) that is still unused
    /// from its pair, and makes it reusable after the grace period described above. An
    /// index its pair acquired again since is kept; one listed twice is freed once.
    /// (A `ctrl` write retires its released indices when it ends, so that undoing a
    /// failed write gives each route back the index the table still has for it.)
    pub(crate) fn retire(&mut self, released: impl IntoIterator<Item = (u32, K)>) {
        let mut freed = Vec::new();
        for (h, pair) in released {
            if self.refs[h as usize] == 0 && self.ids.get(&pair) == Some(&h) {
                self.ids.remove(&pair);
                freed.push(h);
            }
        }
        if freed.is_empty() {
            return;
        }
        let returned = self.returned.clone();
        lpm::defer(move || returned.lock().unwrap_or_else(|p| p.into_inner()).extend(freed));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_are_their_own_index_and_pairs_share_one() {
        let mut ix = HopIndex::<(u32, u32)>::new(2, 4);
        assert_eq!(ix.port(1), 1);
        assert_eq!(ix.acquire(&(7, 0)), Some((2, true)));
        assert_eq!(ix.acquire(&(7, 0)), Some((2, false)));
        assert_eq!(ix.acquire(&(8, 1)), Some((3, true)));
        // Four indices: two ports, two pairs.
        assert_eq!(ix.acquire(&(9, 1)), None);
        assert!(!ix.release(1));
        assert!(!ix.release(2));
        assert!(ix.release(2));
        // Released but not retired: still full, and the pair gets its index back.
        assert_eq!(ix.acquire(&(9, 1)), None);
        assert_eq!(ix.acquire(&(7, 0)), Some((2, false)));
        assert!(ix.release(2));
        // Retired while this thread holds a pin, as a worker does from its lookup until
        // it has read the pair: however often the collector runs, not reusable yet.
        let held = lpm::pin();
        ix.retire([(2, (7, 0)), (2, (7, 0))]);
        for _ in 0..10_000 {
            drop(lpm::pin());
        }
        assert_eq!(ix.acquire(&(9, 1)), None);
        drop(held);
        // Other threads pin too, so the epoch may take a few rounds to advance.
        let mut rounds = 0;
        let got = loop {
            let g = lpm::pin();
            drop(g);
            if let Some(x) = ix.acquire(&(9, 1)) {
                break x;
            }
            rounds += 1;
            assert!(rounds < 1_000_000, "the freed index never came back");
            std::thread::yield_now();
        };
        assert_eq!(got, (2, true));
        // Listed twice, freed once: two pairs never share it.
        assert_eq!(ix.acquire(&(10, 1)), None);
        // An index its pair acquired again before the retire stays the pair's.
        assert!(ix.release(3));
        assert_eq!(ix.acquire(&(8, 1)), Some((3, false)));
        ix.retire([(3, (8, 1))]);
        assert_eq!(ix.acquire(&(8, 1)), Some((3, false)));
    }
}
