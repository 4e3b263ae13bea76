//! Longest-prefix match.
//!
//! [`Ipv4Lpm`] maps IPv4 prefixes to next-hop indices (`u32`, up to
//! [`Ipv4Lpm::MAX_NEXT_HOP`]) with a DIR-24-8 table: a first level of 2^24 entries indexed
//! by the top 24 bits of the address, each either a leaf (next hop and prefix length) or
//! a pointer to a 256-entry second-level group indexed by the low 8 bits. Lookups cost
//! one memory access, two for addresses under prefixes longer than /24. The default route
//! (`0.0.0.0/0`) lives in its own slot so that the first level stays untouched (and its
//! zero pages unallocated) until real routes arrive.
//!
//! # Concurrency
//!
//! The table is shared as `Arc<Ipv4Lpm>`. Any number of readers call [`Ipv4Lpm::lookup`]
//! and [`Ipv4Lpm::lookup_batch`] without locks while one writer at a time (serialised by
//! an internal `Mutex` that readers never touch) updates the table **in place**. Every
//! entry is an `AtomicU32`; the read path uses relaxed loads (plain loads on x86-64 and
//! AArch64) plus acquire fences only when it follows a second-level pointer.
//!
//! An update changes entries one by one, and every intermediate state answers correctly
//! for every address outside the prefix being changed; addresses inside it get either the
//! old or the new answer. In particular:
//!
//! * A new second-level group is filled completely (all 256 entries) before its pointer
//!   is published in the first level with a `Release` store.
//! * When the last prefix longer than /24 under a /24 is removed, the group's entries are
//!   all equal to the covering leaf; the first-level entry is replaced by that leaf and
//!   the group is *retired*.
//!
//! # Reclamation of second-level groups
//!
//! Group memory is never returned to the allocator while the table lives (it is
//! allocated in chunks of [`GROUPS_PER_CHUNK`] groups that only grow), so a reader can
//! never touch freed memory. Retired groups are recycled, oldest first (FIFO), by later
//! inserts. A reader that loaded a group pointer just before the group was retired and
//! recycled could read an entry written for another /24, so readers *validate*: after
//! reading the second-level entry they issue an acquire fence and reload the first-level
//! entry; if it changed, they start that address again. The writer issues a release fence
//! before refilling a recycled group, so a reader that saw any refilled entry is
//! guaranteed to see the first-level entry changed (the retirement happened earlier in
//! the writer's order). Each pointer also carries a 7-bit generation, bumped on every
//! reuse, so the reload cannot be fooled by the same group coming back under the same
//! /24: that would take 128 retire-and-reuse cycles of that one group (which the FIFO free
//! list makes as rare as possible) while a reader is stalled between two adjacent loads.
//!
//! No epoch registration, quiescent-state reporting or grace period is needed: readers
//! hold nothing, and the writer never waits.
//!
//! # Data indexed by next hop
//!
//! [`Ipv4Lpm::insert`] issues a release fence before it writes any entry, and
//! [`Ipv4Lpm::lookup`] / [`Ipv4Lpm::lookup_batch`] an acquire fence after their loads.
//! So anything the writer stored (even with relaxed atomics) before calling `insert` —
//! typically the slot of a next-hop table that the new next-hop index names — is visible
//! to a reader once a lookup returned that next hop.

pub mod reference;

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{fence, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};

/// First-level entries: one per /24.
const L1_ENTRIES: usize = 1 << 24;
/// Second-level groups per allocation chunk (a chunk is 1 MiB).
pub const GROUPS_PER_CHUNK: usize = 1024;
const CHUNK_SHIFT: u32 = 10;
/// At most one group per /24.
const MAX_GROUPS: usize = L1_ENTRIES;
const CHUNKS: usize = MAX_GROUPS / GROUPS_PER_CHUNK;

// Entry encoding. 0 is "no route".
// Leaf:  bit 31 = 0, bit 30 = 1 (valid), bits 24..29 = prefix length, bits 0..23 = next hop.
// Group: bit 31 = 1, bits 24..30 = generation, bits 0..23 = group index.
const GROUP: u32 = 1 << 31;
const VALID: u32 = 1 << 30;
const LOW24: u32 = (1 << 24) - 1;
const GEN_MASK: u32 = 0x7f;

#[inline]
const fn leaf(len: u8, nh: u32) -> u32 {
    VALID | ((len as u32) << 24) | nh
}

/// Prefix length of a leaf entry; -1 for the empty entry (so every real prefix beats it).
#[inline]
fn leaf_len(e: u32) -> i32 {
    if e & VALID == 0 {
        -1
    } else {
        ((e >> 24) & 0x3f) as i32
    }
}

#[inline]
const fn mask_of(len: u8) -> u32 {
    if len == 0 {
        0
    } else {
        u32::MAX << (32 - len as u32)
    }
}

/// Allocates `n` zeroed atomics with `calloc`-style zeroed memory: the pages stay
/// unallocated by the kernel until written.
fn zeroed_atomics(n: usize) -> Box<[AtomicU32]> {
    const _: () = assert!(std::mem::size_of::<AtomicU32>() == std::mem::size_of::<u32>());
    const _: () = assert!(std::mem::align_of::<AtomicU32>() == std::mem::align_of::<u32>());
    let v = vec![0u32; n].into_boxed_slice();
    let len = v.len();
    let ptr = Box::into_raw(v) as *mut u32;
    // SAFETY: `AtomicU32` has the same size, alignment (asserted above) and bit validity
    // as `u32`, so the allocation made for `n` zeroed `u32`s is a valid `[AtomicU32; n]`
    // and is later freed with the very same layout. The raw pointer comes from
    // `Box::into_raw` and is consumed exactly once here.
    unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(ptr as *mut AtomicU32, len)) }
}

/// Writer-side state: the installed prefixes and the second-level allocator.
struct Writer {
    /// `routes[len]`: prefix address (masked) to next hop.
    routes: Vec<HashMap<u32, u32>>,
    /// Groups handed out so far (indices `0..allocated`).
    allocated: usize,
    /// Retired groups, reused oldest first.
    free: VecDeque<u32>,
    /// Current generation of each allocated group.
    gens: Vec<u8>,
    count: usize,
}

/// An IPv4 longest-prefix-match table (DIR-24-8) with lock-free readers.
/// See the [crate documentation](crate) for the concurrency rules.
pub struct Ipv4Lpm {
    /// Fixed size, so that indexing by `addr >> 8` needs no bounds check.
    l1: Box<[AtomicU32; L1_ENTRIES]>,
    default: AtomicU32,
    chunks: Box<[OnceLock<Box<[AtomicU32]>>]>,
    writer: Mutex<Writer>,
    chunk_count: AtomicUsize,
}

impl Default for Ipv4Lpm {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for Ipv4Lpm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ipv4Lpm").field("len", &self.len()).finish()
    }
}

impl Ipv4Lpm {
    /// Largest next-hop value the table stores.
    pub const MAX_NEXT_HOP: u32 = LOW24;
    /// What [`Ipv4Lpm::lookup_batch`] writes for an address without a route.
    pub const NO_ROUTE: u32 = u32::MAX;

    /// An empty table. Reserves 64 MiB of zeroed address space for the first level; the
    /// kernel backs it with memory only where routes are written.
    pub fn new() -> Ipv4Lpm {
        Ipv4Lpm {
            l1: match zeroed_atomics(L1_ENTRIES).try_into() {
                Ok(a) => a,
                Err(_) => unreachable!("zeroed_atomics returns exactly L1_ENTRIES entries"),
            },
            default: AtomicU32::new(0),
            chunks: (0..CHUNKS).map(|_| OnceLock::new()).collect(),
            writer: Mutex::new(Writer {
                routes: (0..=32).map(|_| HashMap::new()).collect(),
                allocated: 0,
                free: VecDeque::new(),
                gens: Vec::new(),
                count: 0,
            }),
            chunk_count: AtomicUsize::new(0),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Writer> {
        // A panic while holding the lock cannot leave the lookup structure unreadable
        // (every store is a complete entry), so a poisoned lock is still usable.
        self.writer.lock().unwrap_or_else(|p| p.into_inner())
    }

    #[inline]
    fn group_entry(&self, g: u32, low: u32) -> Option<&AtomicU32> {
        let chunk = self.chunks.get((g >> CHUNK_SHIFT) as usize)?.get()?;
        chunk.get((((g as usize) & (GROUPS_PER_CHUNK - 1)) << 8) | low as usize)
    }

    /// The leaf (or 0) for `addr`, ignoring the default route.
    #[inline]
    fn resolve(&self, addr: u32) -> u32 {
        let slot = &self.l1[(addr >> 8) as usize];
        let mut e = slot.load(Ordering::Relaxed);
        while e & GROUP != 0 {
            // Pairs with the Release store that published the group.
            fence(Ordering::Acquire);
            let v = match self.group_entry(e & LOW24, addr & 0xff) {
                Some(x) => x.load(Ordering::Relaxed),
                None => 0,
            };
            // Order the group read before the validating reload (see crate docs).
            fence(Ordering::Acquire);
            let again = slot.load(Ordering::Relaxed);
            if again == e {
                return v;
            }
            e = again;
        }
        e
    }

    #[inline]
    fn finish(&self, e: u32) -> u32 {
        if e & VALID != 0 {
            return e & LOW24;
        }
        let d = self.default.load(Ordering::Relaxed);
        if d & VALID != 0 {
            d & LOW24
        } else {
            Self::NO_ROUTE
        }
    }

    /// The next hop of the longest prefix containing `addr`.
    #[inline]
    pub fn lookup(&self, addr: u32) -> Option<u32> {
        let r = self.finish(self.resolve(addr));
        fence(Ordering::Acquire);
        (r != Self::NO_ROUTE).then_some(r)
    }

    /// Looks up every address of `addrs`, writing the next hop (or [`Self::NO_ROUTE`]) to
    /// the same index of `out`. Works in passes so that cache misses overlap: first every
    /// first-level entry is loaded, then the second-level entries of those that point to
    /// a group, then the results are finished.
    ///
    /// # Panics
    /// If `out` is shorter than `addrs`.
    pub fn lookup_batch(&self, addrs: &[u32], out: &mut [u32]) {
        assert!(
            out.len() >= addrs.len(),
            "lookup_batch: output shorter than input"
        );
        let out = &mut out[..addrs.len()];
        let mut any = 0u32;
        for (o, &a) in out.iter_mut().zip(addrs) {
            let e = self.l1[(a >> 8) as usize].load(Ordering::Relaxed);
            any |= e;
            *o = e;
        }
        if any & GROUP != 0 {
            fence(Ordering::Acquire);
            for (o, &a) in out.iter_mut().zip(addrs) {
                let e = *o;
                if e & GROUP != 0 {
                    let v = match self.group_entry(e & LOW24, a & 0xff) {
                        Some(x) => x.load(Ordering::Relaxed),
                        None => 0,
                    };
                    fence(Ordering::Acquire);
                    *o = if self.l1[(a >> 8) as usize].load(Ordering::Relaxed) == e {
                        v
                    } else {
                        self.resolve(a)
                    };
                }
            }
        }
        let d = self.default.load(Ordering::Relaxed);
        let dflt = if d & VALID != 0 { d & LOW24 } else { Self::NO_ROUTE };
        for o in out.iter_mut() {
            *o = if *o & VALID != 0 { *o & LOW24 } else { dflt };
        }
        fence(Ordering::Acquire);
    }

    /// Installs `addr/len -> nh` (host bits of `addr` are ignored); returns the next hop
    /// the same prefix had before, if any.
    ///
    /// # Panics
    /// If `len > 32` or `nh > MAX_NEXT_HOP`.
    pub fn insert(&self, addr: u32, len: u8, nh: u32) -> Option<u32> {
        assert!(len <= 32, "prefix length {} > 32", len);
        assert!(nh <= Self::MAX_NEXT_HOP, "next hop {} too large", nh);
        let addr = addr & mask_of(len);
        let mut w = self.lock();
        let prev = w.routes[len as usize].insert(addr, nh);
        if prev.is_none() {
            w.count += 1;
        }
        let new = leaf(len, nh);
        // Publishes what the caller wrote before this insert (see "Data indexed by next
        // hop" in the crate docs).
        fence(Ordering::Release);
        if len == 0 {
            self.default.store(new, Ordering::Relaxed);
        } else if len <= 24 {
            let start = (addr >> 8) as usize;
            let end = start + (1usize << (24 - len));
            let mut i = start;
            while i < end {
                let e = self.l1[i].load(Ordering::Relaxed);
                if e & GROUP != 0 {
                    self.group_overwrite(e & LOW24, 0, 256, len, new);
                    i += 1;
                } else {
                    let l = leaf_len(e);
                    if l <= len as i32 {
                        self.l1[i].store(new, Ordering::Relaxed);
                        i += 1;
                    } else {
                        // A more specific /l (l <= 24) owns an aligned block: skip it.
                        i = (i | ((1usize << (24 - l)) - 1)) + 1;
                    }
                }
            }
        } else {
            let i = (addr >> 8) as usize;
            let lo = (addr & 0xff) as usize;
            let hi = lo + (1usize << (32 - len));
            let e = self.l1[i].load(Ordering::Relaxed);
            if e & GROUP != 0 {
                self.group_overwrite(e & LOW24, lo, hi, len, new);
            } else {
                let (g, gen) = self.alloc_group(&mut w);
                // Fill completely before publishing; orders any earlier retirement
                // before these stores (see the crate docs on reclamation).
                fence(Ordering::Release);
                for k in 0..256 {
                    if let Some(x) = self.group_entry(g, k as u32) {
                        x.store(if (lo..hi).contains(&k) { new } else { e }, Ordering::Relaxed);
                    }
                }
                self.l1[i].store(GROUP | ((gen as u32) << 24) | g, Ordering::Release);
            }
        }
        prev
    }

    /// Overwrites group entries `lo..hi` whose prefix is not longer than `len`.
    fn group_overwrite(&self, g: u32, lo: usize, hi: usize, len: u8, new: u32) {
        for k in lo..hi {
            if let Some(x) = self.group_entry(g, k as u32) {
                if leaf_len(x.load(Ordering::Relaxed)) <= len as i32 {
                    x.store(new, Ordering::Relaxed);
                }
            }
        }
    }

    fn alloc_group(&self, w: &mut Writer) -> (u32, u8) {
        if let Some(g) = w.free.pop_front() {
            let gen = (w.gens[g as usize] + 1) & GEN_MASK as u8;
            w.gens[g as usize] = gen;
            return (g, gen);
        }
        let g = w.allocated;
        assert!(g < MAX_GROUPS, "second-level pool exhausted");
        let c = g / GROUPS_PER_CHUNK;
        if self.chunks[c].get().is_none() {
            let _ = self.chunks[c].set(zeroed_atomics(GROUPS_PER_CHUNK * 256));
            self.chunk_count.fetch_add(1, Ordering::Relaxed);
        }
        w.allocated += 1;
        w.gens.push(0);
        (g as u32, 0)
    }

    /// Removes the route for exactly `addr/len`; returns its next hop. Addresses it
    /// covered fall back to the longest remaining prefix that covers them.
    ///
    /// # Panics
    /// If `len > 32`.
    pub fn remove(&self, addr: u32, len: u8) -> Option<u32> {
        assert!(len <= 32, "prefix length {} > 32", len);
        let addr = addr & mask_of(len);
        let mut w = self.lock();
        let old = w.routes[len as usize].remove(&addr)?;
        w.count -= 1;
        if len == 0 {
            self.default.store(0, Ordering::Relaxed);
            return Some(old);
        }
        // The covering prefix (the default route is handled by the separate slot).
        let repl = (1..len)
            .rev()
            .find_map(|l| {
                w.routes[l as usize]
                    .get(&(addr & mask_of(l)))
                    .map(|&nh| leaf(l, nh))
            })
            .unwrap_or(0);
        let len_i = len as i32;
        if len <= 24 {
            let start = (addr >> 8) as usize;
            let end = start + (1usize << (24 - len));
            let mut i = start;
            while i < end {
                let e = self.l1[i].load(Ordering::Relaxed);
                if e & GROUP != 0 {
                    self.group_replace(e & LOW24, 0, 256, len_i, repl);
                    i += 1;
                } else {
                    let l = leaf_len(e);
                    if l == len_i {
                        self.l1[i].store(repl, Ordering::Relaxed);
                        i += 1;
                    } else if l > len_i {
                        i = (i | ((1usize << (24 - l)) - 1)) + 1;
                    } else {
                        i += 1;
                    }
                }
            }
        } else {
            let i = (addr >> 8) as usize;
            let lo = (addr & 0xff) as usize;
            let hi = lo + (1usize << (32 - len));
            let e = self.l1[i].load(Ordering::Relaxed);
            if e & GROUP != 0 {
                let g = e & LOW24;
                self.group_replace(g, lo, hi, len_i, repl);
                let still_needed = (0..256u32).any(|k| {
                    self.group_entry(g, k)
                        .is_some_and(|x| leaf_len(x.load(Ordering::Relaxed)) > 24)
                });
                if !still_needed {
                    // Every entry now equals the covering leaf of this /24.
                    let v = self.group_entry(g, 0).map_or(0, |x| x.load(Ordering::Relaxed));
                    self.l1[i].store(v, Ordering::Release);
                    w.free.push_back(g);
                }
            }
        }
        Some(old)
    }

    /// Replaces group entries `lo..hi` owned by a prefix of length `len` with `repl`.
    fn group_replace(&self, g: u32, lo: usize, hi: usize, len: i32, repl: u32) {
        for k in lo..hi {
            if let Some(x) = self.group_entry(g, k as u32) {
                if leaf_len(x.load(Ordering::Relaxed)) == len {
                    x.store(repl, Ordering::Relaxed);
                }
            }
        }
    }

    /// The next hop installed for exactly `addr/len`, if any.
    pub fn get(&self, addr: u32, len: u8) -> Option<u32> {
        if len > 32 {
            return None;
        }
        self.lock().routes[len as usize]
            .get(&(addr & mask_of(len)))
            .copied()
    }

    /// Every installed route as `(addr, len, next_hop)`, sorted by address then length.
    pub fn routes(&self) -> Vec<(u32, u8, u32)> {
        let w = self.lock();
        let mut v: Vec<(u32, u8, u32)> = w
            .routes
            .iter()
            .enumerate()
            .flat_map(|(l, m)| m.iter().map(move |(&a, &nh)| (a, l as u8, nh)))
            .collect();
        v.sort_unstable();
        v
    }

    /// Number of installed routes.
    pub fn len(&self) -> usize {
        self.lock().count
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Removes every route. Groups are retired, not freed (see the crate docs).
    pub fn clear(&self) {
        let mut routes = self.routes();
        // Longest first: each removal then finds its covering prefix still installed.
        routes.sort_by_key(|r| std::cmp::Reverse(r.1));
        for (a, l, _) in routes {
            self.remove(a, l);
        }
    }

    /// Bytes used by the lookup structure (the first level, allocated second-level chunks
    /// and their directory) plus an estimate of the control-side route record. The first
    /// level is counted whole although the kernel only backs the pages written.
    pub fn memory_bytes(&self) -> usize {
        let w = self.lock();
        let control: usize = w
            .routes
            .iter()
            .map(|m| m.capacity() * (2 * std::mem::size_of::<u32>() + 1))
            .sum::<usize>()
            + w.free.capacity() * 4
            + w.gens.capacity();
        L1_ENTRIES * 4
            + self.chunk_count.load(Ordering::Relaxed) * GROUPS_PER_CHUNK * 256 * 4
            + CHUNKS * std::mem::size_of::<OnceLock<Box<[AtomicU32]>>>()
            + control
    }

    /// Second-level groups ever allocated (in use or retired and awaiting reuse).
    pub fn groups_allocated(&self) -> usize {
        self.lock().allocated
    }

    /// Second-level groups in use (allocated and not retired).
    pub fn groups_in_use(&self) -> usize {
        let w = self.lock();
        w.allocated - w.free.len()
    }
}

#[cfg(test)]
mod tests;
