//! The IPv6 lookup structure: a directly indexed first level of `2^16` entries (one per
//! /16) over a leaf-pushed multibit trie whose levels start at bits 16, 24, 32, 48, 64,
//! 80, 96 and 112 (strides 8, 8, then 16). A node holds its slots as *runs* of equal
//! values (the leaf-pushed next hop, or a link to the child node of one slot): a sorted
//! array of the slots where runs start, compared 16 at a time with AVX2 (8 with SSE2),
//! then one 64-bit value per run. A /48 query walks the /16 entry, two small stride-8
//! nodes (few, so they stay cached) and one stride-16 node for bits 32..48 (most BGP
//! /32s hold a handful of runs there, so the node is one or two lines): one cold access
//! instead of the trie's three or four. A node of more runs than one key line holds is
//! stored direct (stride 8) or *split* (stride 16: a direct node over the slot's high
//! byte whose values link stride-8 sub-nodes), so every read of a lookup is one line
//! fetched a pass ahead. See `docs/LPM.md` for the measurements.
//!
//! Updates rebuild the node whose stride holds the prefix length from the writer's
//! record (and, because leaves are pushed, each node below it whose inherited value
//! changes) and publish each with one `Release` store: into the parent node's value word
//! for that slot, or into the first level; a change under one high byte of a split node
//! rebuilds that sub-node alone and stores its link into the node's top. Replaced nodes
//! go through the epoch collector.

use crate::first::{FirstLevel, Level};
use crate::key::NONE;
use crate::key::{per_length_routes, Key, PrefixHasher, PrefixMap, ShortChange};
use crate::mem::{prefetch, HugeSlice};
use crossbeam_epoch::{self as epoch, Guard};
use std::alloc::{alloc, dealloc, handle_alloc_error, Layout};
use std::collections::HashMap;
use std::hash::BuildHasherDefault;
use std::sync::atomic::{fence, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};

/// Address bits of the first level.
const TOP_BITS: u32 = 16;
const TOP: usize = 1 << TOP_BITS;
/// The depth (address bits above it) of each node level, and its stride.
const DEPTHS: [u32; 8] = [16, 24, 32, 48, 64, 80, 96, 112];
const STRIDES: [u32; 8] = [8, 8, 16, 16, 16, 16, 16, 16];
/// A value with this bit set is a leaf: the next hop (or NONE) in its high 32 bits.
/// Otherwise it is a link: a line-aligned node address (bits 6..48) and the node's
/// number of runs minus one (bits 48..64).
const LEAF: u64 = 1;
/// A link with this bit set names a *direct* node: one value per slot, no keys (stride-8
/// nodes of more than [`FLAT`] runs, 2 KiB).
const DIRECT: u64 = 2;
/// A link with this bit set (and [`DIRECT`]) names a *split* node: a stride-16 node of
/// more than [`FLAT`] runs stored as a direct node over its slots' high byte (the
/// *top*, 2 KiB) whose values are [`SUB`] links to stride-8 sub-nodes over the low byte
/// where the 256 slots of that high byte hold more than one run, and the value itself
/// where they hold one. The sub-nodes follow the top in the node's block; the link's
/// run field holds the block's lines minus one. A lookup reads the top's value, then
/// (in a pass of its own, after a prefetch) the sub-node's: every read has its line
/// fetched a pass ahead, where a key tree over the node's runs read two to four lines
/// one after another (a BGP /32 with thousands of /48s under it).
const SPLIT: u64 = 4;
/// A value with this bit set is a link to a sub-node of a split node (see [`SPLIT`]).
const SUB: u64 = 8;
/// A link with this bit set names a keyed node of more than one line (more than six
/// runs): a lookup prefetches its second line too. (Most keyed nodes are one line, and
/// a second prefetch there would fetch the next node's first line for nothing.)
const TWO_LINES: u64 = 16;
const PTR: u64 = ((1u64 << 48) - 1) & !63;
const RUNS_SHIFT: u32 = 48;
/// Runs of a node whose keys fit one 64-byte line (32 stored keys: the first run
/// always starts at slot 0 and is not stored).
const FLAT: usize = 33;
/// Stored key of a padding lane: never below a query slot.
const PAD: u16 = 0x7fff;

type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<PrefixHasher>>;

mod batch;
mod encode;
mod node;
mod writer;

use batch::*;
use encode::*;
use node::*;
use writer::*;

/// The first level: one entry per /16, and beside it the /16's short-prefix value.
struct First {
    top: HugeSlice<AtomicU64>,
    /// Per /16: the next hop of the longest prefix of 1 to 16 bits covering it, or NONE.
    /// Nodes do not hold these (their slots covered by nothing longer are NONE), so that
    /// a change of such a prefix is a store per /16 it spans (into a copy of the first
    /// level when it spans more than one), not a rebuild of every node below it; a
    /// lookup that ends at NONE in a node reads this entry (a /16 without nodes has the
    /// value in its first-level leaf).
    short: HugeSlice<AtomicU32>,
    /// The default route's next hop (NONE without one).
    ///
    /// `short` and `default` change only with a new first level: a reader takes them
    /// from the first level it loaded, which no later change of them alters, so a
    /// lookup no longer reads a node from before a more-specific route came and a
    /// fallback from after a later change (stored in place, they let it). Nodes are
    /// shared with later first levels, though: a reader whose call or view outlives a
    /// change of a fallback still reads them as they change, so a lookup that ended at
    /// NONE in a node checks [`Runs6::changes`] and looks the key up again if a change
    /// began in between.
    default: AtomicU32,
}

impl First {
    fn empty() -> First {
        First {
            top: HugeSlice::new(TOP, |_| AtomicU64::new(leaf(NONE))),
            short: HugeSlice::new(TOP, |_| AtomicU32::new(NONE)),
            default: AtomicU32::new(NONE),
        }
    }
}

impl Level for First {
    fn duplicate(&self) -> First {
        First {
            top: self.top.duplicate(),
            short: self.short.duplicate(),
            default: AtomicU32::new(self.default.load(Ordering::Relaxed)),
        }
    }

    fn bytes(&self) -> usize {
        self.top.bytes() + self.short.bytes()
    }

    fn copy_from(&mut self, from: &First) {
        self.top.copy_from(&from.top);
        self.short.copy_from(&from.short);
        *self.default.get_mut() = from.default.load(Ordering::Relaxed);
    }
}

/// The IPv6 table.
pub struct Runs6 {
    /// Behind one pointer (see `first.rs`): a change of a prefix of at most 16 bits
    /// publishes a changed copy.
    first: FirstLevel<First>,
    /// Nodes of a bulk build, packed in one huge-page block; never freed one by one
    /// (replaced ones stay until the table is dropped, counted in `lookup_bytes`).
    /// (Atomic words: a kid slot's value word is replaced in place when the kid is, and a
    /// split node's top value when the sub-node under it is.)
    arena: Option<HugeSlice<AtomicU64>>,
    /// Changes begun and ended, counted twice each (odd while one is under way): a
    /// lookup that took a fallback (a node's NONE answered from `short` or the default
    /// route) is redone if this moved since its first level was loaded, so it never
    /// combines a node changed after a fallback changed with the old fallback. A
    /// sequence lock on the rare path only: other answers come from one path of nodes.
    changes: AtomicU64,
    writer: Mutex<Writer>,
    /// Bytes of live heap nodes.
    heap_bytes: AtomicUsize,
}

// SAFETY: the node pointers inside the first level and the nodes are owned by the table;
// nodes are immutable once published except for the atomic value words of kid slots and
// of split nodes' tops, and freed only through the epoch collector after being unlinked
// (or in `Drop`, with exclusive access); so is a replaced first level.
unsafe impl Send for Runs6 {}
// SAFETY: see `Send`; all shared mutation goes through atomics or the writer mutex.
unsafe impl Sync for Runs6 {}

impl Drop for Runs6 {
    fn drop(&mut self) {
        let w = self.writer.get_mut().unwrap_or_else(|p| p.into_inner());
        for rec in w.nodes.values() {
            let arena = self
                .arena
                .as_ref()
                .is_some_and(|a| a.contains((rec.link & PTR) as *const AtomicU64));
            if rec.link != 0 && !arena {
                // SAFETY: `&mut self`: no reader holds a reference into the table; each
                // heap node is the current link of exactly one record.
                unsafe { free_node(rec.link) };
            }
            for &sub in &rec.subs {
                // SAFETY: as above; a sub-node placed on its own belongs to one record.
                unsafe { free_node(sub) };
            }
        }
    }
}

impl Default for Runs6 {
    fn default() -> Self {
        Self::new()
    }
}

/// A node to rebuild, `(level, base, (first slot, last slot))`: the slots its change
/// touches ([`WHOLE`] for all), so a split node whose change lies under one high byte
/// rebuilds one sub-node.
type Dirty = (usize, u128, (u32, u32));
const WHOLE: (u32, u32) = (0, u32::MAX);

/// The parent of node `(level, base)`: none for level 0 (the first level links it).
fn parent(level: usize, base: u128) -> Option<(usize, u128)> {
    level.checked_sub(1).map(|p| (p, base.masked(DEPTHS[p] as u8)))
}

/// A [`Runs6`] with its first level loaded: a reader that looks up many batches under one
/// pin loads the table's pointers once instead of once per batch (see `lpm::Ipv6View`).
#[derive(Clone, Copy)]
pub struct Runs6View<'g> {
    table: &'g Runs6,
    first: &'g First,
    guard: &'g Guard,
    /// [`Runs6::changes`] when `first` was loaded.
    changes: u64,
}

impl Runs6View<'_> {
    /// [`Runs6::lookup_batch_in`] through this view's first level.
    #[inline]
    pub fn lookup_batch(&self, keys: &[u128], out: &mut [u32]) {
        assert!(out.len() >= keys.len(), "lookup_batch: output shorter than input");
        #[cfg(target_arch = "x86_64")]
        if has_avx2() {
            // SAFETY: the CPU supports AVX2, BMI1, BMI2 and POPCNT (checked just above).
            unsafe { self.table.lookup_batch_avx2(self, keys, out) };
            return;
        }
        self.table.lookup_batch_pinned::<false>(self, keys, out);
    }
}

impl Runs6 {
    pub fn new() -> Runs6 {
        Runs6 {
            first: FirstLevel::new(First::empty()),
            arena: None,
            changes: AtomicU64::new(0),
            writer: Mutex::new(Writer {
                routes: (0..=128).map(|_| PrefixMap::default()).collect(),
                top_len: vec![0; TOP],
                top_val: vec![NONE; TOP],
                nodes: FastMap::default(),
                count: 0,
                scratch: Scratch::default(),
            }),
            heap_bytes: AtomicUsize::new(0),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Writer> {
        // Every published state is complete, so a panic in a writer leaves nothing a
        // later writer could not continue from.
        self.writer.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn in_arena(&self, link: u64) -> bool {
        self.arena
            .as_ref()
            .is_some_and(|a| a.contains((link & PTR) as *const AtomicU64))
    }

    /// Next hop for `key`, or NONE.
    #[inline]
    pub fn lookup(&self, key: u128) -> u32 {
        self.lookup_in(&epoch::pin(), key)
    }

    /// [`Self::lookup`] under the caller's pin of the default collector (`guard` keeps the
    /// first level and the nodes loaded from it allocated).
    #[inline]
    pub fn lookup_in(&self, guard: &Guard, key: u128) -> u32 {
        loop {
            let changes = self.changes.load(Ordering::Acquire);
            let first = self.first.load(guard);
            #[cfg(target_arch = "x86_64")]
            let (r, fell) = if has_avx2() {
                // SAFETY: the CPU supports AVX2, BMI1, BMI2 and POPCNT (checked just above).
                unsafe { self.lookup_avx2(first, key) }
            } else {
                self.lookup_pinned::<false>(first, key)
            };
            #[cfg(not(target_arch = "x86_64"))]
            let (r, fell) = self.lookup_pinned::<false>(first, key);
            if !fell || self.unchanged_since(changes) {
                return r;
            }
            std::hint::spin_loop();
        }
    }

    /// Whether no change began since [`Self::changes`] read `changes` (odd: one was
    /// under way then). The reads before the call are ordered before its load of the
    /// count, so any store of a change they saw shows here as a moved count.
    #[inline]
    fn unchanged_since(&self, changes: u64) -> bool {
        fence(Ordering::Acquire);
        changes & 1 == 0 && self.changes.load(Ordering::Relaxed) == changes
    }

    /// Runs the writer's `change` between two steps of [`Self::changes`] (the second
    /// also if it panics: an odd count left behind would keep readers that took a
    /// fallback looking up again for ever).
    fn counted<R>(&self, change: impl FnOnce() -> R) -> R {
        struct End<'a>(&'a AtomicU64, u64);
        impl Drop for End<'_> {
            fn drop(&mut self) {
                self.0.store(self.1, Ordering::Release);
            }
        }
        let n = self.changes.load(Ordering::Relaxed);
        self.changes.store(n + 1, Ordering::Relaxed);
        // Orders the odd count before every store of the change (a reader that sees
        // one of them and then fences sees the count moved).
        fence(Ordering::Release);
        let _end = End(&self.changes, n + 2);
        change()
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,bmi1,bmi2,popcnt")]
    unsafe fn lookup_avx2(&self, first: &First, key: u128) -> (u32, bool) {
        self.lookup_pinned::<true>(first, key)
    }

    /// The answer, and whether it took a fallback after a node's NONE. Callers hold an
    /// epoch guard, under which they loaded `first` (and, with `AVX2`, run on a CPU with
    /// AVX2, BMI2 and POPCNT).
    #[inline(always)]
    fn lookup_pinned<const AVX2: bool>(&self, first: &First, key: u128) -> (u32, bool) {
        let i = slot_of(key, 0, TOP_BITS) as usize;
        let mut v = first.top[i].load(Ordering::Acquire);
        let mut level = 0;
        while v & LEAF == 0 {
            // SAFETY: a link names a published node, alive while the caller's guard is
            // pinned; the slot has the node level's stride.
            v = unsafe { final_word::<AVX2>(v, slot_of(key, DEPTHS[level], STRIDES[level])) }.1;
            level += 1;
        }
        let nh = (v >> 32) as u32;
        let v = or_default(nh, first.short[i].load(Ordering::Relaxed));
        (
            or_default(v, first.default.load(Ordering::Relaxed)),
            level > 0 && nh == NONE,
        )
    }

    /// Looks up `keys` 32 at a time, level by level over the group, prefetching each
    /// level's nodes for the whole group before reading them.
    pub fn lookup_batch(&self, keys: &[u128], out: &mut [u32]) {
        self.lookup_batch_in(&epoch::pin(), keys, out)
    }

    /// [`Self::lookup_batch`] under the caller's pin of the default collector (see
    /// [`Self::lookup_in`]).
    #[inline]
    pub fn lookup_batch_in(&self, guard: &Guard, keys: &[u128], out: &mut [u32]) {
        // (One first level for the whole call: a change that replaces it shows in all
        // of the call's answers or in none. A change stored into a node's link may
        // show in some answers only, each address answering from before or after it.)
        self.view(guard).lookup_batch(keys, out)
    }

    /// The table with its current first level loaded, for batch lookups under `guard`.
    #[inline]
    pub fn view<'g>(&'g self, guard: &'g Guard) -> Runs6View<'g> {
        let changes = self.changes.load(Ordering::Acquire);
        Runs6View {
            table: self,
            first: self.first.load(guard),
            guard,
            changes,
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,bmi1,bmi2,popcnt")]
    unsafe fn lookup_batch_avx2(&self, view: &Runs6View<'_>, keys: &[u128], out: &mut [u32]) {
        self.lookup_batch_pinned::<true>(view, keys, out)
    }

    /// Through `view`, a view of this table.
    #[inline(always)]
    fn lookup_batch_pinned<const AVX2: bool>(&self, view: &Runs6View<'_>, keys: &[u128], out: &mut [u32]) {
        let dflt = view.first.default.load(Ordering::Relaxed);
        for (ks, os) in keys.chunks(32).zip(out.chunks_mut(32)) {
            let fell = self.lookup_group::<AVX2>(view.first, ks, os, dflt);
            if fell != 0 {
                self.recheck_fallbacks(view, ks, os, fell);
            }
        }
    }

    /// Looks the keys of `fell` (answered by a fallback after a node's NONE) up again,
    /// each on its own, if a change began since the caller loaded its first level.
    #[cold]
    #[inline(never)]
    fn recheck_fallbacks(&self, view: &Runs6View<'_>, keys: &[u128], out: &mut [u32], mut fell: u32) {
        if self.unchanged_since(view.changes) {
            return;
        }
        while fell != 0 {
            let i = fell.trailing_zeros() as usize;
            fell &= fell - 1;
            out[i] = self.lookup_in(view.guard, keys[i]);
        }
    }

    #[inline(always)]
    /// Returns the keys whose answer took a fallback after a node's NONE.
    fn lookup_group<const AVX2: bool>(
        &self,
        first: &First,
        keys: &[u128],
        out: &mut [u32],
        dflt: u32,
    ) -> u32 {
        let len = keys.len().min(32);
        let mut v = [0u64; 32];
        // Each linked key's slot in the node `v[i]` links (computed with its prefetch;
        // for the first node level, read without one, taken from the key).
        let mut slots = [0u32; 32];
        let top: &[AtomicU64] = &first.top;
        let mut links = 0u32;
        let mut direct = 0u32;
        for i in 0..len {
            // SAFETY: `i < len <= keys.len()`; a 16-bit slot is below the first level's
            // length, 2^16.
            v[i & 31] = unsafe { top.get_unchecked(slot_at::<0, 16>(*keys.get_unchecked(i)) as usize) }
                .load(Ordering::Acquire);
        }
        // The masks of the keys whose entry is a link, and of those that link direct
        // nodes (and, without AVX2 or for a partial group, the answers of the others).
        #[cfg(target_arch = "x86_64")]
        let done = AVX2 && len == 32 && {
            // SAFETY: `AVX2`: the caller runs on a CPU with AVX2; `out` holds at least
            // `len` = 32 answers.
            (links, direct) = unsafe { link_masks_avx2(&v) };
            true
        };
        #[cfg(not(target_arch = "x86_64"))]
        let done = false;
        if !done {
            for i in 0..len {
                let e = v[i & 31];
                // SAFETY: `i < len <= out.len()` (the caller passes matching chunks).
                unsafe { *out.get_unchecked_mut(i) = or_default((e >> 32) as u32, dflt) };
                links |= (!e as u32 & 1) << i;
                direct |= ((e & DIRECT) as u32 >> 1) << i;
            }
        }
        let linked = links;
        let mut next = Links {
            direct: links & direct,
            keyed: links & !direct,
        };
        // One pass per level, each with its depths as constants (shifts of a `u128` by
        // a constant are a few instructions, by a variable many).
        let mut level = 0;
        while next.direct | next.keyed != 0 {
            let (v, s) = (&mut v, &mut slots);
            next = match level {
                0 => step_level::<AVX2, 24, 8>(keys, v, s, next),
                1 => step_level::<AVX2, 32, 16>(keys, v, s, next),
                2 => step_level::<AVX2, 48, 16>(keys, v, s, next),
                3 => step_level::<AVX2, 64, 16>(keys, v, s, next),
                4 => step_level::<AVX2, 80, 16>(keys, v, s, next),
                5 => step_level::<AVX2, 96, 16>(keys, v, s, next),
                6 => step_level::<AVX2, 112, 16>(keys, v, s, next),
                // (Nodes at bit 112 end the address: their values are leaves.)
                _ => step_level::<AVX2, 112, 16>(keys, v, s, next),
            };
            level += 1;
        }
        // Every key's value is now a leaf. A first-level leaf holds the /16's
        // short-prefix value already; a node's NONE falls back to it, then to the
        // default route.
        let mut rest = linked;
        #[cfg(target_arch = "x86_64")]
        if done {
            // SAFETY: `AVX2`, and `out` holds 32 answers (as above).
            rest = unsafe { answers_avx2(&v, out, dflt) } & linked;
        }
        let mut fell = 0;
        while rest != 0 {
            let i = rest.trailing_zeros() as usize;
            rest &= rest - 1;
            let mut nh = (v[i & 31] >> 32) as u32;
            if nh == NONE {
                fell |= 1 << i;
                // SAFETY: `i < len` (only those bits are set).
                let k = unsafe { *keys.get_unchecked(i) };
                // SAFETY: a 16-bit slot is below the length of `short`, 2^16.
                nh = unsafe { first.short.get_unchecked(slot_at::<0, 16>(k) as usize) }
                    .load(Ordering::Acquire);
            }
            out[i] = or_default(nh, dflt);
        }
        fell
    }

    /// Installs `key/len -> nh`; returns the previous next hop of that prefix.
    pub fn insert(&self, key: u128, len: u8, nh: u32) -> Option<u32> {
        let key = key.masked(len);
        let mut w = self.lock();
        let prev = w.routes[len as usize].insert(key, nh);
        if prev.is_none() {
            w.count += 1;
        }
        if prev != Some(nh) {
            self.counted(|| self.apply(&mut w, key, len, Some(nh), prev.is_none()));
        }
        prev
    }

    /// Removes `key/len`; returns its next hop.
    pub fn remove(&self, key: u128, len: u8) -> Option<u32> {
        let key = key.masked(len);
        let mut w = self.lock();
        let old = w.routes[len as usize].remove(&key)?;
        w.count -= 1;
        self.counted(|| self.apply(&mut w, key, len, None, true));
        Some(old)
    }

    /// Brings the lookup structure in line with the writer's maps after `key/len` was
    /// set to `nh` (`None`: removed); `structural`: the route was added or removed (not
    /// just given a new next hop).
    fn apply(&self, w: &mut Writer, key: u128, len: u8, nh: Option<u32>, structural: bool) {
        let guard = epoch::pin();
        let mut retired: Vec<u64> = Vec::new();
        let mut dirty: Vec<Dirty> = Vec::new();
        if len == 0 {
            let copy = self.first.copy(&guard);
            // (Not yet shared.)
            copy.default.store(nh.unwrap_or(NONE), Ordering::Relaxed);
            self.first.replace(copy, &guard);
            return;
        }
        if u32::from(len) <= TOP_BITS {
            let span = 1usize << (TOP_BITS - u32::from(len));
            let start = slot_of(key, 0, TOP_BITS) as usize;
            let change = ShortChange::new(&w.routes, key, len, nh, NONE, 0);
            let owned: Vec<usize> = (start..start + span)
                .filter(|&i| change.owns(w.top_len[i]))
                .collect();
            // In a copy published whole, so that readers see all of the /16s or none,
            // and take `short` from one first level (see `First::default`).
            if owned.is_empty() {
                return;
            }
            let first = self.first.copy(&guard);
            for i in owned {
                w.top_len[i] = change.set_len;
                w.top_val[i] = change.set_val;
                // Nodes leave the slots only short prefixes cover at NONE, and lookups
                // ending there read `short`: no node is rebuilt either way, only `short`
                // (and a /16 without nodes its leaf) is stored into.
                if w.nodes.contains_key(&(0, (i as u128) << 112)) {
                    first.short[i].store(change.set_val, Ordering::Release);
                } else {
                    first.top[i].store(leaf(change.set_val), Ordering::Release);
                    first.short[i].store(change.set_val, Ordering::Release);
                }
            }
            self.first.replace(first, &guard);
        } else {
            let owner = owner_level(len);
            let mut deleted: Vec<(usize, u128)> = Vec::new();
            if structural {
                let adding = nh.is_some();
                for (level, &depth) in DEPTHS.iter().enumerate().take(owner + 1) {
                    let base = key.masked(depth as u8);
                    let created = !w.nodes.contains_key(&(level as u8, base));
                    if created {
                        let rec = NodeRec::new();
                        w.nodes.insert((level as u8, base), rec);
                        let (cl, cv) = cover_for(w, level, base);
                        let rec = w.nodes.get_mut(&(level as u8, base)).expect("node just made");
                        rec.cover_len = cl;
                        rec.cover = cv;
                        dirty.push((level, base, WHOLE));
                        if let Some((pl, pb)) = parent(level, base) {
                            let slot = slot_of(base, DEPTHS[pl], STRIDES[pl]);
                            let p = w.nodes.get_mut(&(pl as u8, pb)).expect("parent made first");
                            if let Err(at) = p.kids.binary_search_by_key(&slot, |k| k.0) {
                                p.kids.insert(at, (slot, 0));
                            }
                            dirty.push((pl, pb, (slot, slot)));
                        }
                    }
                    let rec = w.nodes.get_mut(&(level as u8, base)).expect("node on the path");
                    if adding {
                        rec.deep += 1;
                    } else {
                        rec.deep -= 1;
                        if rec.deep == 0 {
                            deleted.push((level, base));
                        }
                    }
                }
            }
            let base = key.masked(DEPTHS[owner] as u8);
            let rec = w.nodes.get_mut(&(owner as u8, base)).expect("owner node");
            let k = Own::key(key, len, owner);
            let at = rec.own.binary_search_by_key(&k, |r| r.key);
            match (at, nh) {
                (Ok(i), Some(v)) => rec.own[i].nh = v,
                (Err(i), Some(v)) => rec.own.insert(i, Own { key: k, nh: v }),
                (Ok(i), None) => {
                    rec.own.remove(i);
                }
                (Err(_), None) => {}
            }
            // Leaves are pushed: children in the prefix's span may inherit it.
            let (d, s) = (DEPTHS[owner], STRIDES[owner]);
            let first = slot_of(key, d, s);
            let last = first + (1 << (d + s - u32::from(len))) - 1;
            dirty.push((owner, base, (first, last)));
            let kids: Vec<u32> = {
                let k = &rec.kids;
                let lo = k.partition_point(|x| x.0 < first);
                let hi = k.partition_point(|x| x.0 <= last);
                k[lo..hi].iter().map(|k| k.0).collect()
            };
            if !kids.is_empty() {
                // (Prefixes of at most 16 bits are not pushed into nodes.)
                let change = ShortChange::new(&w.routes, key, len, nh, NONE, TOP_BITS as u8);
                for slot in kids {
                    let kb = base | (u128::from(slot) << (128 - d - s));
                    push_cover(w, owner + 1, kb, &change, &mut dirty);
                }
            }
            // Deleted nodes leave their parents (deepest first, so a parent whose
            // last kid goes is deleted too, as its `deep` says).
            for &(level, base) in deleted.iter().rev() {
                if let Some(rec) = w.nodes.remove(&(level as u8, base)) {
                    if rec.link != 0 {
                        retired.push(rec.link);
                    }
                    retired.extend(rec.subs);
                }
                match parent(level, base) {
                    Some((pl, pb)) => {
                        if let Some(p) = w.nodes.get_mut(&(pl as u8, pb)) {
                            let slot = slot_of(base, DEPTHS[pl], STRIDES[pl]);
                            if let Ok(at) = p.kids.binary_search_by_key(&slot, |k| k.0) {
                                p.kids.remove(at);
                            }
                            dirty.push((pl, pb, (slot, slot)));
                        }
                    }
                    None => {
                        let i = slot_of(base, 0, TOP_BITS) as usize;
                        self.first.load(&guard).top[i].store(leaf(w.top_val[i]), Ordering::Release);
                    }
                }
            }
        }
        self.rebuild(w, dirty, &mut retired, &guard);
        self.retire(retired, &guard);
    }

    /// Rebuilds the `dirty` nodes (children before parents) and publishes each whose
    /// parent is not rebuilt too (a rebuilt parent links its children's new nodes).
    fn rebuild(&self, w: &mut Writer, mut dirty: Vec<Dirty>, retired: &mut Vec<u64>, guard: &Guard) {
        // Children before parents; one entry per node, its slot ranges merged.
        dirty.sort_unstable_by_key(|d| std::cmp::Reverse((d.0, d.1)));
        dirty.dedup_by(|next, kept| {
            let same = (next.0, next.1) == (kept.0, kept.1);
            if same {
                kept.2 = (kept.2 .0.min(next.2 .0), kept.2 .1.max(next.2 .1));
            }
            same
        });
        for &(level, base, (lo, hi)) in &dirty {
            let Some(rec) = w.nodes.get(&(level as u8, base)) else {
                continue; // deleted
            };
            if rec.link & SPLIT != 0 && lo >> 8 == hi >> 8 {
                // The change lies under one high byte of a split node: one sub-node.
                self.patch_sub(w, level, base, lo >> 8, retired);
                continue;
            }
            let (n, flags) = encode_node(&w.nodes, level, base, rec, &mut w.scratch);
            let link = place_heap(&w.scratch.words, &w.scratch.links, n, flags, &self.heap_bytes);
            let rec = w.nodes.get_mut(&(level as u8, base)).expect("node present");
            let old = std::mem::replace(&mut rec.link, link);
            if old != 0 {
                retired.push(old);
            }
            retired.append(&mut rec.subs);
            match parent(level, base) {
                None => self.first.load(guard).top[slot_of(base, 0, TOP_BITS) as usize]
                    .store(link, Ordering::Release),
                Some((pl, pb)) => {
                    let plink = set_kid_link(&mut w.nodes, level, base, link);
                    // (`dirty` is sorted and deduplicated: a binary search, where a hash
                    // set of it cost an allocation and a hash per node.)
                    let parent_dirty = dirty
                        .binary_search_by_key(&std::cmp::Reverse((pl, pb)), |d| std::cmp::Reverse((d.0, d.1)))
                        .is_ok();
                    if parent_dirty {
                        continue; // linked when the parent is encoded, later in the loop
                    }
                    // SAFETY: the parent is live (this writer holds the lock and only it
                    // retires nodes) and links this node at this slot: a kid slot is a
                    // run of its own, so the run's value word is the link to replace.
                    let (word, was) =
                        unsafe { final_word::<false>(plink, slot_of(base, DEPTHS[pl], STRIDES[pl])) };
                    debug_assert_eq!(was, old);
                    // SAFETY: as above.
                    unsafe { &*word }.store(link, Ordering::Release);
                }
            }
        }
    }

    /// Rebuilds the sub-node of high byte `h` of the split node `(level, base)` from the
    /// record and publishes it with one store into the node's top; the rest of the node
    /// stays. A /48 change under a /32 holding thousands of routes then encodes a few
    /// hundred slots, not the whole node.
    fn patch_sub(&self, w: &mut Writer, level: usize, base: u128, h: u32, retired: &mut Vec<u64>) {
        let rec = w.nodes.get_mut(&(level as u8, base)).expect("dirty node present");
        let depth = DEPTHS[level] + 8;
        let sub_base = base | (u128::from(h) << (128 - depth));
        // The longest own route of at most `depth` bits covering the high byte's slots
        // (own routes are sorted by address then length), else the node's cover.
        let cover = (DEPTHS[level] + 1..=depth)
            .rev()
            .find_map(|l| {
                let k = Own::key(sub_base.masked(l as u8), l as u8, level);
                rec.own
                    .binary_search_by_key(&k, |r| r.key)
                    .ok()
                    .map(|i| rec.own[i].nh)
            })
            .unwrap_or(rec.cover);
        // The own routes longer than `depth` under the high byte (their slots' high
        // byte is `h`), and the kid slots there; both lists are sorted by slot.
        let from = rec
            .own
            .partition_point(|r| r.key <= Own::key(sub_base, depth as u8, level));
        let to = rec.own.partition_point(|r| r.slot() >> 8 <= h);
        let kids_from = rec.kids.partition_point(|k| k.0 >> 8 < h);
        let kids_to = rec.kids.partition_point(|k| k.0 >> 8 <= h);
        let kids = rec.kids[kids_from..kids_to].iter().map(|&(s, l)| (s & 0xff, l));
        let own = rec.own[from..to].iter().map(|o| {
            let (s, l, nh) = o.parts();
            (s & 0xff, l, nh)
        });
        let sc = &mut w.scratch;
        runs_of(depth, 8, cover, own, kids, &mut sc.runs, &mut sc.stack);
        let new = if let [(_, v)] = sc.runs[..] {
            v
        } else {
            sc.words.clear();
            sc.links.clear();
            let flags = encode_plain(&sc.runs, 8, &mut sc.words, &mut sc.links);
            let sub = place_heap(&sc.words, &sc.links, sc.runs.len(), flags, &self.heap_bytes);
            rec.subs.push(sub);
            sub | SUB
        };
        // SAFETY: the node is live (this writer holds the lock and only it retires
        // nodes) and split: its top holds 256 value words.
        let word = unsafe { &*((rec.link & PTR) as *const AtomicU64).add(h as usize) };
        let old = word.swap(new, Ordering::AcqRel);
        if old & SUB != 0 {
            // (A sub-node in the node's block stays until the block goes.)
            if let Some(i) = rec.subs.iter().position(|&x| x == old & !SUB) {
                retired.push(rec.subs.swap_remove(i));
            }
        }
    }

    /// Hands unlinked nodes to the epoch collector.
    fn retire(&self, retired: Vec<u64>, guard: &Guard) {
        for link in retired {
            if self.in_arena(link) {
                continue;
            }
            self.heap_bytes.fetch_sub(link_bytes(link), Ordering::Relaxed);
            // SAFETY: the node was unlinked (the store that replaced it happened before
            // this call), so only readers pinned before now can hold it; the collector
            // runs the closure after all of them unpinned. Each node is retired once.
            unsafe { guard.defer_unchecked(move || free_node(link)) };
        }
    }

    /// A table built from `routes` in one pass (the last of equal prefixes wins).
    pub fn build(routes: &[(u128, u8, u32)]) -> Runs6 {
        let mut v: Vec<(u128, u8, u32)> = routes.iter().map(|&(k, l, nh)| (k.masked(l), l, nh)).collect();
        v.sort_by_key(|r| (r.0, r.1));
        let mut t = Runs6::new();
        let w = t.writer.get_mut().unwrap_or_else(|p| p.into_inner());
        for (i, &(k, l, nh)) in v.iter().enumerate() {
            if v.get(i + 1).is_some_and(|n| (n.0, n.1) == (k, l)) {
                continue;
            }
            w.count += 1;
            w.routes[l as usize].insert(k, nh);
            if l == 0 {
                *t.first.get_mut().default.get_mut() = nh;
                continue;
            }
            if u32::from(l) <= TOP_BITS {
                // In address order a prefix comes after every prefix containing it.
                let start = slot_of(k, 0, TOP_BITS) as usize;
                for i in start..start + (1usize << (TOP_BITS - u32::from(l))) {
                    w.top_len[i] = l;
                    w.top_val[i] = nh;
                }
                continue;
            }
            let owner = owner_level(l);
            for level in 0..=owner {
                let base = k.masked(DEPTHS[level] as u8);
                let rec = w.nodes.entry((level as u8, base)).or_insert_with(NodeRec::new);
                rec.deep += 1;
                if level == owner {
                    rec.own.push(Own {
                        key: Own::key(k, l, level),
                        nh,
                    });
                } else {
                    let slot = slot_of(k, DEPTHS[level], STRIDES[level]);
                    if rec.kids.last().map(|k| k.0) != Some(slot) {
                        rec.kids.push((slot, 0));
                    }
                }
            }
        }
        let mut keys: Vec<(usize, u128)> = w.nodes.keys().map(|&(l, b)| (l as usize, b)).collect();
        keys.sort_unstable();
        // Covers top down.
        for &(level, base) in &keys {
            let c = cover_for(w, level, base);
            let rec = w.nodes.get_mut(&(level as u8, base)).expect("listed node");
            (rec.cover_len, rec.cover) = c;
        }
        // Nodes bottom up into one staging block (links relative to its start).
        let mut words: Vec<u64> = Vec::new();
        let mut fixups: Vec<usize> = Vec::new();
        for &(level, base) in keys.iter().rev() {
            let rec = &w.nodes[&(level as u8, base)];
            let (n, flags) = encode_node(&w.nodes, level, base, rec, &mut w.scratch);
            let at = words.len();
            words.extend_from_slice(&w.scratch.words);
            for &i in &w.scratch.links {
                // (Sub-node links are offsets from the node's start; the others, and
                // these after this, from the staging block's.)
                if words[at + i] & SUB != 0 {
                    words[at + i] += at as u64 * 8;
                }
                fixups.push(at + i);
            }
            let link = tag(at as u64 * 8, n, flags);
            w.nodes.get_mut(&(level as u8, base)).expect("listed node").link = link;
            if level > 0 {
                set_kid_link(&mut w.nodes, level, base, link);
            }
        }
        if !words.is_empty() {
            let mut arena = HugeSlice::new(words.len(), |i| AtomicU64::new(words[i]));
            let base = arena.as_ptr() as u64;
            debug_assert!(base.is_multiple_of(64));
            let a = arena.as_mut_slice();
            for &f in &fixups {
                *a[f].get_mut() += base;
            }
            t.arena = Some(arena);
            for rec in w.nodes.values_mut() {
                rec.link += base;
                for kid in &mut rec.kids {
                    kid.1 += base;
                }
            }
        }
        let first = t.first.get_mut();
        for i in 0..TOP {
            first.short[i].store(w.top_val[i], Ordering::Relaxed);
            let e = match w.nodes.get(&(0, (i as u128) << 112)) {
                Some(rec) => rec.link,
                None => leaf(w.top_val[i]),
            };
            first.top[i].store(e, Ordering::Relaxed);
        }
        t
    }

    /// The next hop installed for exactly `key/len`.
    pub fn get(&self, key: u128, len: u8) -> Option<u32> {
        if len > 128 {
            return None;
        }
        self.lock().routes[len as usize].get(&key.masked(len)).copied()
    }

    /// Every route, sorted by address then length.
    pub fn routes(&self) -> Vec<(u128, u8, u32)> {
        let w = self.lock();
        let mut v: Vec<(u128, u8, u32)> = per_length_routes(&w.routes).collect();
        v.sort_unstable();
        v
    }

    pub fn len(&self) -> usize {
        self.lock().count
    }

    /// Removes every route with one store of an empty first level; the nodes are
    /// retired.
    pub fn clear(&self) {
        let mut w = self.lock();
        let guard = epoch::pin();
        self.first.replace(Box::new(First::empty()), &guard);
        let retired: Vec<u64> = w
            .nodes
            .drain()
            .flat_map(|(_, r)| std::iter::once(r.link).chain(r.subs))
            .filter(|&l| l != 0)
            .collect();
        w.top_len.fill(0);
        w.top_val.fill(NONE);
        for m in w.routes.iter_mut() {
            *m = PrefixMap::default();
        }
        w.count = 0;
        self.retire(retired, &guard);
    }

    /// Bytes the readers touch: the first level, the arena and the live heap nodes.
    pub fn lookup_bytes(&self) -> usize {
        let guard = epoch::pin();
        let first = self.first.load(&guard);
        first.top.bytes()
            + first.short.bytes()
            + self.arena.as_ref().map_or(0, |a| a.bytes())
            + self.heap_bytes.load(Ordering::Relaxed)
    }

    /// Estimated bytes of the writer's route record, and of the replaced first level it
    /// keeps for the next change of a prefix shorter than /16.
    pub fn control_bytes(&self) -> usize {
        let w = self.lock();
        let maps: usize = w.routes.iter().map(|m| m.capacity() * 21).sum();
        let nodes: usize = w
            .nodes
            .values()
            .map(|r| 96 + r.own.capacity() * std::mem::size_of::<Own>() + r.kids.capacity() * 16)
            .sum::<usize>()
            + w.nodes.capacity() * 24;
        maps + nodes + TOP * 5 + self.first.spare_bytes()
    }
}

#[cfg(test)]
mod tests;
