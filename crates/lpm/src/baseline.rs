//! DIR-24-8 (Gupta, Lin and McKeown, INFOCOM 1998), the layout of DPDK's `rte_lpm` and
//! `rte_fib`, built once from a route list: a yardstick, not a routing table (64 MiB,
//! no updates). `brickroute fib bench` looks the same queries up in it right after
//! [`crate::Ipv4Lpm`], checks that every answer is the same, and reports the ratio; on a
//! shared machine a ratio taken in one run holds up better than two absolute figures
//! taken minutes apart.
//!
//! `tbl24` has an entry per /24: a next hop, or (top bit set) the index of a group of
//! 256 `tbl8` entries, one per address of that /24, for a /24 with longer prefixes.
//! A lookup reads one `tbl24` entry, and a `tbl8` entry when the first says so; the
//! batch prefetches the `tbl24` entry of the key 15 ahead, as DPDK 22.11's scalar bulk
//! lookup for 4-byte entries does.

use crate::key::{Key, NONE};
use crate::mem::{prefetch, HugeSlice};

/// A `tbl24` entry with this bit names a `tbl8` group.
const GROUP: u32 = 1 << 31;
/// No route (next hops must be below it, as with `rte_fib`'s 4-byte entries).
const EMPTY: u32 = GROUP - 1;
/// Keys between a `tbl24` prefetch and the lookup that reads the entry.
const AHEAD: usize = 15;

/// DIR-24-8 over a fixed route list (see the [module documentation](self)).
pub struct Dir24_8 {
    tbl24: HugeSlice<u32>,
    tbl8: Vec<u32>,
}

impl Dir24_8 {
    /// Largest next hop the structure holds.
    pub const MAX_NEXT_HOP: u32 = EMPTY - 1;

    /// Builds the table of `routes` (host bits are ignored; of equal prefixes the last
    /// counts), or `None` when a next hop is above [`Self::MAX_NEXT_HOP`].
    pub fn build(routes: &[(u32, u8, u32)]) -> Option<Dir24_8> {
        if routes.iter().any(|r| r.2 > Self::MAX_NEXT_HOP) {
            return None;
        }
        let mut v: Vec<(u8, u32, u32)> = routes
            .iter()
            .map(|&(a, l, nh)| (l.min(32), a.masked(l.min(32)), nh))
            .collect();
        // Shorter prefixes first, so longer ones overwrite them; a stable sort keeps
        // equal prefixes in list order, so the last one written counts.
        v.sort_by_key(|r| r.0);
        let mut tbl24 = HugeSlice::new(1 << 24, |_| EMPTY);
        let t24 = tbl24.as_mut_slice();
        let mut tbl8: Vec<u32> = Vec::new();
        for &(len, addr, nh) in &v {
            let slot = (addr >> 8) as usize;
            if len <= 24 {
                t24[slot..slot + (1 << (24 - len))].fill(nh);
                continue;
            }
            if t24[slot] & GROUP == 0 {
                // The /24's covering value fills the new group.
                let group = (tbl8.len() >> 8) as u32;
                tbl8.extend(std::iter::repeat_n(t24[slot], 256));
                t24[slot] = GROUP | group;
            }
            let base = ((t24[slot] & !GROUP) as usize) << 8;
            let first = base + (addr & 0xff) as usize;
            tbl8[first..first + (1 << (32 - len))].fill(nh);
        }
        Some(Dir24_8 { tbl24, tbl8 })
    }

    /// Bytes of the two tables.
    pub fn memory_bytes(&self) -> usize {
        self.tbl24.bytes() + self.tbl8.len() * 4
    }

    /// The next hop of `key`, or `None`.
    pub fn lookup(&self, key: u32) -> Option<u32> {
        let v = self.entry(key);
        (v != EMPTY).then_some(v)
    }

    #[inline(always)]
    fn entry(&self, key: u32) -> u32 {
        let e = self.tbl24[(key >> 8) as usize];
        if e & GROUP == 0 {
            e
        } else {
            self.tbl8[((e & !GROUP) as usize) << 8 | (key & 0xff) as usize]
        }
    }

    /// Looks up each of `keys` into `out` (NONE where no prefix matches).
    ///
    /// # Panics
    /// If `out` is shorter than `keys`.
    pub fn lookup_batch(&self, keys: &[u32], out: &mut [u32]) {
        assert!(out.len() >= keys.len(), "lookup_batch: output shorter than input");
        for &k in keys.iter().take(AHEAD) {
            prefetch(&self.tbl24[(k >> 8) as usize] as *const u32 as usize);
        }
        for (i, (&k, o)) in keys.iter().zip(out.iter_mut()).enumerate() {
            if let Some(&next) = keys.get(i + AHEAD) {
                prefetch(&self.tbl24[(next >> 8) as usize] as *const u32 as usize);
            }
            let v = self.entry(k);
            *o = if v == EMPTY { NONE } else { v };
        }
    }
}
