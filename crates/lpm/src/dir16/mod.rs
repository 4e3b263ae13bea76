//! The IPv4 lookup structure: a directly indexed first level of `2^16` entries (one per
//! /16, 512 KiB, an L2 or L3 hit) over *chunks*: the 256 /24 slots of a
//! /16, leaf-pushed (each slot holds the next hop of the longest prefix of at most 24
//! bits covering it) and stored as runs of equal values, found with one POPCNT. A slot
//! with prefixes longer than /24 under it links a *kid*: the 256 /32 slots of that /24
//! in the same run format. See `docs/LPM.md` for the measurements behind the choice.
//!
//! A chunk is rebuilt whole from the writer's sorted list of the routes under its /16
//! (about 18 on a BGP table) and published with one `Release` store into the first
//! level; the replaced chunk is freed through the epoch collector.

use crate::first::{FirstLevel, Level};
use crate::key::NONE;
use crate::key::{per_length_routes, Key, PrefixHasher, PrefixMap, ShortChange};
use crate::mem::{prefetch, HugeSlice};
use crossbeam_epoch::{self as epoch, Guard};
use std::alloc::{alloc, dealloc, handle_alloc_error, Layout};
use std::collections::HashMap;
use std::hash::BuildHasherDefault;
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// A hash map with the writer's fast hasher (the std default, SipHash, made the
/// per-run dictionary probes the largest cost of a chunk rebuild).
type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<PrefixHasher>>;

fn fast_map<K, V>() -> FastMap<K, V> {
    FastMap::default()
}

/// Address bits of the first level.
const TOP_BITS: u32 = 16;
/// First-level entries.
const TOP: usize = 1 << TOP_BITS;
/// Slots of a chunk or kid.
const SLOTS: usize = 256;
/// The byte of a `u32` key in memory holding its bits 8..15 (the /24 slot).
const SLOT_BYTE: usize = if cfg!(target_endian = "little") { 1 } else { 2 };
/// A link with this bit set names a chunk or kid behind a [`FRONT`]: its values are
/// wider than the table's narrow ones (see [`ChunkPtr`]).
const FRONTED: u64 = 1;
/// A link with this bit set names a chunk that has kids.
const KIDS: u64 = 2;
/// Entries of the next-hop dictionary. Index 0 stands for NONE and holds the default
/// route's next hop (NONE without one), so the batch path needs no extra step for it.
const DICT: usize = 1 << 16;
/// Dictionary indices handed out are below this; the 16-bit value `KID_MARK` (the one
/// value above them) marks a slot that has a kid, so the batch path finds the keys to
/// redo from the value it read, and the keys of a chunk with kids that land in a slot
/// without one (most of them) take the fast path. The dictionary keeps all `2^16`
/// entries so that any 16-bit value indexes it.
const INDICES: usize = KID_MARK as usize;
const KID_MARK: u16 = u16::MAX;
/// The kid mark of 8-bit values. Index 255 is never handed out, so an 8-bit chunk can
/// hold indices 0..=254.
const BYTE_MARK: u8 = 0xff;
/// The kid mark of a table of 32-bit next hops ([`Dir16::narrow`] 2). It is also a
/// valid next hop: a slot holding that hop sends its keys to the slow path too, which
/// answers them right (it finds no kid there).
const WORD_MARK: u32 = u32::MAX - 1;
/// Bits of a link above the address: how many cache lines the chunk's header and
/// values span beyond the first (0..=3), for prefetching.
const LINES_SHIFT: u32 = 56;
/// Bits 58..=59 of a link: log2 of the bytes of one of its values (0: u8 dictionary
/// indices, 1: u16 indices, 2: u32 next hops).
const WIDTH_SHIFT: u32 = 58;
/// The address bits of a link.
const PTR: u64 = ((1u64 << LINES_SHIFT) - 1) & !7;
/// Byte offset of a chunk's first value: four bitmap words, then one `u32` of rank
/// bytes.
const VALS_AT: usize = 36;
/// Words in front of a chunk with kids: the kid bitmap (4 words) and one word holding
/// the kid rank bytes (low half) and the number of kids (high half). The kid links sit
/// in front of those, kid `r` at word `-(KID_HDR + 1 + r)`.
const KID_HDR: usize = 5;

mod chunk;
mod encode;
mod writer;

use chunk::*;
use encode::*;
use writer::*;

/// Calls `f(i)` for each `i` in `0..len`; for a whole group of 32, four calls per loop
/// step (the loop overhead was a fifth of the batch's second pass).
#[inline(always)]
fn for_each_key(len: usize, mut f: impl FnMut(usize)) {
    if len == 32 {
        for i in (0..32).step_by(4) {
            f(i);
            f(i + 1);
            f(i + 2);
            f(i + 3);
        }
    } else {
        for i in 0..len {
            f(i);
        }
    }
}

/// `v`, or the default route's next hop when `v` is NONE.
#[inline(always)]
fn or_default(v: u32, dflt: u32) -> u32 {
    if v != NONE {
        v
    } else {
        dflt
    }
}

/// The first level: one link per /16, and the next-hop dictionary.
struct Top {
    links: HugeSlice<AtomicU64>,
    /// Next hops by dictionary index (see [`Dict`]); entry 0 is the default route's.
    /// The default route changes only with a new first level: a reader combines the
    /// chunks and the default of the one first level it loaded, so no answer mixes a
    /// chunk from before a change of a covered prefix with a default from after a
    /// later change (or the other way round), as a default stored in place let readers
    /// do. Indices are handed out and freed in the current first level's dictionary;
    /// a copy takes the whole dictionary with it.
    dict: HugeSlice<AtomicU32>,
}

impl Top {
    /// Links `links`, with no next hop known but the default route `default`.
    fn new(links: HugeSlice<AtomicU64>, default: u32) -> Top {
        // (The entries of the marks are read by the batch path for keys it redoes,
        // and never answered.)
        Top {
            links,
            dict: HugeSlice::new(DICT, |i| AtomicU32::new(if i == 0 { default } else { NONE })),
        }
    }
}

impl Level for Top {
    fn duplicate(&self) -> Top {
        Top {
            links: self.links.duplicate(),
            dict: self.dict.duplicate(),
        }
    }

    fn copy_from(&mut self, from: &Top) {
        self.links.copy_from(&from.links);
        self.dict.copy_from(&from.dict);
    }

    fn bytes(&self) -> usize {
        self.links.bytes() + self.dict.bytes()
    }
}

/// The IPv4 table.
pub struct Dir16 {
    /// One link per /16 and the default route, behind one pointer (see `first.rs`): a
    /// change of a prefix shorter than /16 that changes several /16s, several /16s
    /// changed at once, or a change of the default route publishes a changed copy.
    top: FirstLevel<Top>,
    /// The chunks of a bulk build, packed in one huge-page block. Chunks in it are never
    /// freed one by one: when an update replaces one, its words stay (counted in
    /// `memory_bytes`) until the table is dropped.
    arena: Option<HugeSlice<u64>>,
    writer: Mutex<Writer>,
    /// Bytes of live heap chunks (outside the arena).
    heap_bytes: AtomicUsize,
    /// Bytes of retired heap chunks whose deferred free has not run yet (readers pinned
    /// before they were unlinked may still read them).
    pending_free: Arc<AtomicUsize>,
    /// log2 of the bytes of the chunks' narrow values, fixed when the table is made (so
    /// the batch path picks its loop once per call): 0, 8-bit dictionary indices (a
    /// table built with at most 254 next hops, or made empty); 1, 16-bit indices (at
    /// most 65,533); 2, the 32-bit next hops themselves (more), kid slots holding
    /// [`WORD_MARK`].
    narrow: u32,
}

// SAFETY: the chunk pointers inside `top` are owned by the table; chunks are immutable
// once published and freed only through the epoch collector after being unlinked (or in
// `Drop`, with exclusive access), as is a replaced first level, so sharing the table
// between threads is sound.
unsafe impl Send for Dir16 {}
// SAFETY: see `Send`; all shared mutation goes through atomics or the writer mutex.
unsafe impl Sync for Dir16 {}

/// What recorded changes leave to publish: the /16s whose chunks need rebuilding, the
/// default route's new next hop (NONE: removed), and the next hops they replaced.
#[derive(Default)]
struct Pending {
    changed: Vec<usize>,
    default: Option<u32>,
    released: Vec<u32>,
}

impl Pending {
    /// Notes that `key/len` (masked), recorded as `prev`, is now `nh` (`None`: removed).
    /// A short prefix's per-/16 covers are updated in the writer here.
    fn note(&mut self, w: &mut Writer, key: u32, len: u8, nh: Option<u32>, prev: Option<u32>) {
        if prev == nh {
            return;
        }
        self.released.extend(prev);
        if len == 0 {
            self.default = Some(nh.unwrap_or(NONE));
        } else if u32::from(len) <= TOP_BITS {
            let span = 1usize << (TOP_BITS - u32::from(len));
            let start = (key >> TOP_BITS) as usize;
            let change = ShortChange::new(&w.short, key, len, nh, NONE, 0);
            for i in start..start + span {
                if change.owns(w.top_len[i]) {
                    w.top_len[i] = change.set_len;
                    if w.top_val[i] != change.set_val {
                        w.top_val[i] = change.set_val;
                        self.changed.push(i);
                    }
                }
            }
        } else {
            self.changed.push((key >> TOP_BITS) as usize);
        }
    }
}

impl Drop for Dir16 {
    fn drop(&mut self) {
        let w = self.writer.get_mut().unwrap_or_else(|p| p.into_inner());
        for e in self.top.get_mut().links.iter() {
            let e = e.load(Ordering::Relaxed);
            let arena = self.arena.as_ref().is_some_and(|a| a.contains(ptr_of(e)));
            if !arena && !w.uniform_refs.contains_key(&e) {
                // SAFETY: `&mut self`: no reader holds a reference into the table, and
                // each non-uniform heap chunk is linked from exactly one entry.
                unsafe { free_heap(e) };
            }
        }
        for (&e, _) in w.uniform_refs.iter() {
            // SAFETY: as above; each uniform chunk is in the map once.
            unsafe { free_heap(e) };
        }
    }
}

impl Default for Dir16 {
    fn default() -> Self {
        Self::new()
    }
}

/// A [`Dir16`] with its first level loaded: a reader that looks up many batches under one
/// pin loads the table's pointers once instead of once per batch (see `lpm::Ipv4View`).
#[derive(Clone, Copy)]
pub struct Dir16View<'g> {
    table: &'g Dir16,
    top: &'g Top,
}

impl Dir16View<'_> {
    /// [`Dir16::lookup_batch_in`] through this view's first level.
    #[inline(always)]
    pub fn lookup_batch(&self, keys: &[u32], out: &mut [u32]) {
        assert!(out.len() >= keys.len(), "lookup_batch: output shorter than input");
        let (table, top) = (self.table, self.top);
        // A build for a CPU with POPCNT and BMI2 (the workspace's x86-64-v3 target, see
        // `.cargo/config.toml`) inlines the loop into its caller: no feature test and no
        // call per batch, which in a loop over batches of 32 was on the path from one
        // group's last loads to the next group's first (see `docs/LPM-LOG.md`, session 24).
        #[cfg(all(target_arch = "x86_64", target_feature = "popcnt", target_feature = "bmi2"))]
        table.lookup_batch_pinned(top, keys, out);
        #[cfg(not(all(target_arch = "x86_64", target_feature = "popcnt", target_feature = "bmi2")))]
        {
            #[cfg(target_arch = "x86_64")]
            if std::arch::is_x86_feature_detected!("popcnt") && std::arch::is_x86_feature_detected!("bmi2") {
                // SAFETY: the CPU supports POPCNT and BMI2 (checked just above).
                unsafe { table.lookup_batch_popcnt(top, keys, out) };
                return;
            }
            table.lookup_batch_pinned(top, keys, out);
        }
    }
}

impl Dir16 {
    pub fn new() -> Dir16 {
        Dir16::with_values(0)
    }

    /// An empty table whose narrow values are `1 << narrow` bytes (see [`Self::narrow`]).
    fn with_values(narrow: u32) -> Dir16 {
        let heap_bytes = AtomicUsize::new(0);
        let dict = Dict::new(narrow);
        let none = uniform_chunk(NONE, &dict, &heap_bytes);
        Dir16 {
            top: FirstLevel::new(Top::new(HugeSlice::new(TOP, |_| AtomicU64::new(none)), NONE)),
            arena: None,
            writer: Mutex::new(Writer {
                short: (0..=TOP_BITS).map(|_| PrefixMap::default()).collect(),
                chunks: vec![Vec::new(); TOP],
                top_len: vec![0; TOP],
                top_val: vec![NONE; TOP],
                count: 0,
                uniform: FastMap::from_iter([(NONE, none)]),
                uniform_refs: FastMap::from_iter([(none, (NONE, TOP))]),
                dict,
                misfits: 0,
            }),
            heap_bytes,
            pending_free: Arc::new(AtomicUsize::new(0)),
            narrow,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Writer> {
        // Every published state is complete, so a panic in a writer leaves nothing a
        // later writer could not continue from.
        self.writer.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn in_arena(&self, link: u64) -> bool {
        self.arena.as_ref().is_some_and(|a| a.contains(ptr_of(link)))
    }

    /// [`Self::lookup_in`] pinning for the call.
    #[cfg(test)]
    pub fn lookup(&self, key: u32) -> u32 {
        self.lookup_in(&epoch::pin(), key)
    }

    /// Next hop for `key`, or NONE, under the caller's pin of the default collector
    /// (`guard` keeps the first level and the chunks loaded from it allocated).
    #[inline]
    pub fn lookup_in(&self, guard: &Guard, key: u32) -> u32 {
        let top = self.top.load(guard);
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("popcnt") && std::arch::is_x86_feature_detected!("bmi2") {
            // SAFETY: the CPU supports POPCNT and BMI2 (checked just above).
            return unsafe { self.lookup_popcnt(top, key) };
        }
        self.lookup_pinned(top, key)
    }

    /// [`Self::lookup_pinned`] compiled with POPCNT and BMI2 (the x86-64 baseline lacks
    /// them; the software popcount costs more than the rest of the lookup, and BMI2's
    /// shifts need no count register).
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "popcnt,bmi2")]
    unsafe fn lookup_popcnt(&self, top: &Top, key: u32) -> u32 {
        self.lookup_pinned(top, key)
    }

    /// Callers hold an epoch guard, under which they loaded `top`.
    #[inline(always)]
    fn lookup_pinned(&self, top: &Top, key: u32) -> u32 {
        let e = top.links[(key >> TOP_BITS) as usize].load(Ordering::Acquire);
        // SAFETY: every first-level entry links a published chunk, which stays allocated
        // while the caller's guard is pinned (it is freed only through the epoch
        // collector after being unlinked); its kids live as long as it does.
        let r = unsafe { chunk_lookup(e, key, &top.dict) };
        or_default(r, top.dict[0].load(Ordering::Relaxed))
    }

    /// [`Self::lookup_batch_in`] pinning for the call.
    #[cfg(test)]
    pub fn lookup_batch(&self, keys: &[u32], out: &mut [u32]) {
        self.lookup_batch_in(&epoch::pin(), keys, out)
    }

    /// Looks up `keys` 32 at a time under the caller's pin of the default collector (see
    /// [`Self::lookup_in`]): first every first-level entry of a group is loaded and its
    /// chunk prefetched, then every chunk is read, so cache misses overlap.
    #[inline]
    pub fn lookup_batch_in(&self, guard: &Guard, keys: &[u32], out: &mut [u32]) {
        // (One first level for the whole call: a change that replaces it shows in all
        // of the call's answers or in none. A change stored into a chunk's link may
        // show in some answers only, each address answering from before or after it.)
        self.view(guard).lookup_batch(keys, out)
    }

    /// The table with its current first level loaded, for batch lookups under `guard`.
    #[inline]
    pub fn view<'g>(&'g self, guard: &'g Guard) -> Dir16View<'g> {
        Dir16View {
            table: self,
            top: self.top.load(guard),
        }
    }

    /// [`Self::lookup_batch_pinned`] compiled with POPCNT and BMI2, for a build whose
    /// target lacks them.
    #[cfg(all(
        target_arch = "x86_64",
        not(all(target_feature = "popcnt", target_feature = "bmi2"))
    ))]
    #[target_feature(enable = "popcnt,bmi2")]
    unsafe fn lookup_batch_popcnt(&self, top: &Top, keys: &[u32], out: &mut [u32]) {
        self.lookup_batch_pinned(top, keys, out)
    }

    /// Callers hold an epoch guard. Byte values (tables of at most 254 next hops) take a
    /// loop inlined here; wider ones a call, so that a caller into which this is
    /// inlined holds one width's loop, not three.
    #[inline(always)]
    fn lookup_batch_pinned(&self, top: &Top, keys: &[u32], out: &mut [u32]) {
        if self.narrow == 0 {
            self.lookup_groups::<0>(top, keys, out);
        } else {
            self.lookup_batch_wide(top, keys, out);
        }
    }

    /// [`Self::lookup_batch_pinned`] for tables of 16- and 32-bit values.
    #[inline(never)]
    fn lookup_batch_wide(&self, top: &Top, keys: &[u32], out: &mut [u32]) {
        if self.narrow == 1 {
            self.lookup_groups::<1>(top, keys, out);
        } else {
            self.lookup_groups::<2>(top, keys, out);
        }
    }

    /// The groups of `keys` in a table whose narrow values are `1 << W` bytes.
    #[inline(always)]
    fn lookup_groups<const W: u32>(&self, top: &Top, keys: &[u32], out: &mut [u32]) {
        const CHUNK: usize = 32;
        let dflt = top.dict[0].load(Ordering::Relaxed);
        let (top, dict): (&[AtomicU64], &[AtomicU32]) = (&top.links, &top.dict);
        let out = &mut out[..keys.len()];
        let mut ks = keys.chunks_exact(CHUNK);
        let mut os = out.chunks_exact_mut(CHUNK);
        // Whole groups have a length the compiler knows, so it unrolls their loops.
        for (k, o) in (&mut ks).zip(&mut os) {
            self.lookup_group::<W>(top, dict, k, o, dflt);
        }
        if !ks.remainder().is_empty() {
            self.lookup_group::<W>(top, dict, ks.remainder(), os.into_remainder(), dflt);
        }
    }

    /// One group of up to 32 keys, in a table whose narrow values are `1 << W` bytes.
    #[inline(always)]
    fn lookup_group<const W: u32>(
        &self,
        top: &[AtomicU64],
        dict: &[AtomicU32],
        keys: &[u32],
        out: &mut [u32],
        dflt: u32,
    ) {
        let len = keys.len().min(32);
        let keys = &keys[..len];
        let out = &mut out[..len];
        // The chunk pointer of each key (entries `..len` are written by the first pass
        // before the second reads them).
        let mut ptrs = [const { MaybeUninit::<ChunkPtr>::uninit() }; 32];
        // No branch depends on a loaded entry in the first pass, and only the rare mark
        // test in the second: a mispredicted branch on an entry still in flight would
        // squash the loads issued after it.
        for_each_key(len, |i| {
            // SAFETY: `i < len`, the length of `keys`.
            let k = unsafe { *keys.get_unchecked(i) };
            // SAFETY: `k >> 16` is below `2^16`, the first level's length.
            let e = unsafe { top.get_unchecked((k >> TOP_BITS) as usize) }.load(Ordering::Acquire);
            let chunk = ptr_of(e);
            // The header's first line and the chunk's last (the fourth for a chunk of
            // more than four lines). A header that straddles two lines has its second
            // one fetched only if that is the last; a third prefetch for it ran slower
            // (docs/LPM-LOG.md, session 27): pass 2's misses on it overlap.
            prefetch(chunk as usize);
            prefetch(chunk as usize + ((e >> (LINES_SHIFT - 6)) & 0xc0) as usize);
            // (`& 31` only tells the compiler the index fits the array.)
            ptrs[i & 31].write(chunk);
        });
        let mut slow = 0u32;
        for_each_key(len, |i| {
            // SAFETY: the first pass wrote `ptrs[..len]`.
            let p = unsafe { ptrs[i & 31].assume_init() };
            // The key's bits 8..15, read as a byte: from `(k >> 8) & 0xff` the compiler
            // derived the bitmap word as `(k >> 14) & 3` and the shift as `k >> 8`, one
            // instruction more than a byte load and one shift.
            // SAFETY: `i < len`, the length of both slices; the byte is inside key i.
            let j = usize::from(unsafe { *(keys.as_ptr().add(i) as *const u8).add(SLOT_BYTE) });
            // SAFETY: `p` is a published chunk (alive while the caller's guard is pinned;
            // one with wider values starts with a front that reads as a mark in either
            // width), and the slot index is below 256.
            let x = unsafe {
                match W {
                    0 => slot_byte(p, j),
                    1 => slot_index(p, j),
                    _ => slot_word(p, j) as usize,
                }
            };
            let v = if W == 2 {
                // (No dictionary entry 0 to hold the default route here.)
                or_default(x as u32, dflt)
            } else {
                // SAFETY: an 8- or 16-bit value is below 2^16, the dictionary's length
                // (for a mark the entry read is meaningless, and the answer is redone
                // below).
                unsafe { dict.get_unchecked(x) }.load(Ordering::Relaxed)
            };
            // A mark (a kid slot, about 0.6 % of table queries, or a fronted chunk): the
            // key is redone below. Start fetching the kid area now, so its misses overlap
            // the other keys' work instead of coming first in the slow loop, and note the
            // key in a mask that this branch alone sets, so the loop's own branch does
            // not wait for the group's last load. (This branch is mispredicted for those
            // keys; that cost less than what it saves, see `docs/LPM-LOG.md`, the lpm7 round.)
            let marked = match W {
                0 => x == usize::from(BYTE_MARK),
                1 => x == usize::from(KID_MARK),
                _ => x as u32 == WORD_MARK,
            };
            if marked {
                // SAFETY: `i < len`, the length of `keys`.
                let k = unsafe { *keys.get_unchecked(i) };
                // SAFETY: `k >> 16` is below `2^16`, the first level's length.
                let e = unsafe { top.get_unchecked((k >> TOP_BITS) as usize) }.load(Ordering::Acquire);
                prefetch_kid_area(e);
                slow |= 1 << i;
            }
            // (Index 0, NONE, holds the default route: no extra step for it here.)
            // SAFETY: as for `keys`.
            unsafe { *out.get_unchecked_mut(i) = v };
        });
        // Keys on a kid slot or a chunk with wider values (rare), redone from the first
        // level.
        while slow != 0 {
            let i = slow.trailing_zeros() as usize;
            slow &= slow - 1;
            // (Loaded again: this entry or a newer one gives an answer the table held
            // during the call.)
            let e = top[(keys[i] >> TOP_BITS) as usize].load(Ordering::Acquire);
            // SAFETY: as above.
            out[i] = or_default(unsafe { chunk_lookup(e, keys[i], dict) }, dflt);
        }
    }

    /// Installs `key/len -> nh`; returns the previous next hop of that prefix.
    pub fn insert(&self, key: u32, len: u8, nh: u32) -> Option<u32> {
        let key = key.masked(len);
        let mut w = self.lock();
        let prev = self.record(&mut w, key, len, Some(nh));
        let mut pending = Pending::default();
        pending.note(&mut w, key, len, Some(nh), prev);
        self.commit(&mut w, pending);
        prev
    }

    /// Removes `key/len`; returns its next hop.
    pub fn remove(&self, key: u32, len: u8) -> Option<u32> {
        let key = key.masked(len);
        let mut w = self.lock();
        let old = self.record(&mut w, key, len, None)?;
        let mut pending = Pending::default();
        pending.note(&mut w, key, len, None, Some(old));
        self.commit(&mut w, pending);
        Some(old)
    }

    /// Applies `changes` in order (`Some`: install, `None`: remove) to the writer's
    /// record, then publishes every /16 they changed together: with one store into the
    /// first level when they changed one, else in a copy of the first level that one
    /// store publishes (with a change of the default route, always a copy). So each
    /// lookup sees all of the changes or none.
    pub fn apply_all(&self, changes: &[(u32, u8, Option<u32>)]) {
        let mut w = self.lock();
        let mut pending = Pending::default();
        for &(key, len, nh) in changes {
            let key = key.masked(len);
            let prev = self.record(&mut w, key, len, nh);
            pending.note(&mut w, key, len, nh, prev);
        }
        self.commit(&mut w, pending);
    }

    /// Sets `key/len` (masked) to `nh` in the writer's record, or removes it (`None`),
    /// counting routes and giving a new next hop its dictionary index; returns the
    /// prefix's previous next hop. The caller notes the change in a [`Pending`] and
    /// commits it.
    fn record(&self, w: &mut Writer, key: u32, len: u8, nh: Option<u32>) -> Option<u32> {
        let prev = if u32::from(len) <= TOP_BITS {
            match nh {
                Some(nh) => w.short[len as usize].insert(key, nh),
                None => w.short[len as usize].remove(&key),
            }
        } else {
            let list = &mut w.chunks[(key >> TOP_BITS) as usize];
            match (find(list, key as u16, len), nh) {
                (Ok(i), Some(nh)) => Some(std::mem::replace(&mut list[i].nh, nh)),
                (Ok(i), None) => Some(list.remove(i).nh),
                (Err(i), Some(nh)) => {
                    list.insert(i, Sub::new(key, len, nh));
                    None
                }
                (Err(_), None) => None,
            }
        };
        match (prev, nh) {
            (None, Some(_)) => w.count += 1,
            (Some(_), None) => w.count -= 1,
            _ => {}
        }
        if let Some(nh) = nh.filter(|&nh| prev != Some(nh)) {
            w.acquire_hop(nh, &self.top.load(&epoch::pin()).dict);
        }
        prev
    }

    /// Brings the lookup structure in line with the writer's record after the changes
    /// `pending` noted: publishes their /16s and the default route together, and
    /// releases the replaced next hops (their indices stay valid until readers are done
    /// with the replaced chunks).
    fn commit(&self, w: &mut Writer, mut pending: Pending) {
        pending.changed.sort_unstable();
        pending.changed.dedup();
        let guard = epoch::pin();
        let mut retired: Vec<u64> = Vec::new();
        self.publish(w, &pending.changed, pending.default, &mut retired, &guard);
        self.retire(retired, &guard);
        for old in pending.released {
            w.release_hop(old);
        }
    }

    /// Rebuilds the chunks of the /16s `changed` (distinct) and publishes them, with the
    /// default route's new next hop if `default` has one, with one store: into the
    /// first level for one /16, else a copy of it, so readers see all of them or none.
    fn publish(
        &self,
        w: &mut Writer,
        changed: &[usize],
        default: Option<u32>,
        retired: &mut Vec<u64>,
        guard: &Guard,
    ) {
        match (changed, default) {
            ([], None) => {}
            (&[c], None) => self.rebuild(w, &self.top.load(guard).links, c, retired),
            _ => {
                let copy = self.top.copy(guard);
                for &c in changed {
                    self.rebuild(w, &copy.links, c, retired);
                }
                if let Some(v) = default {
                    // (Not yet shared.)
                    copy.dict[0].store(v, Ordering::Relaxed);
                }
                self.top.replace(copy, guard);
            }
        }
    }

    /// Rebuilds the chunk of /16 `c` from the writer's record and links it with one
    /// store into `top` (the published first level, or a copy to publish); the replaced
    /// chunk goes to `retired`.
    fn rebuild(&self, w: &mut Writer, top: &[AtomicU64], c: usize, retired: &mut Vec<u64>) {
        let new = if w.chunks[c].is_empty() {
            let v = w.top_val[c];
            w.uniform_link(v, &self.heap_bytes)
        } else {
            place_heap(&image(w.top_val[c], &w.chunks[c]), &w.dict, &self.heap_bytes)
        };
        let old = top[c].swap(new, Ordering::AcqRel);
        w.release(old, retired);
    }

    /// Hands unlinked chunks to the epoch collector: they are freed once every reader
    /// that could have loaded a link to them has unpinned.
    fn retire(&self, retired: Vec<u64>, guard: &Guard) {
        for link in retired {
            if self.in_arena(link) {
                continue;
            }
            // SAFETY: the chunk is still allocated (its free is deferred below).
            let size = unsafe { heap_bytes(link) };
            // Counted as gone now (the free follows after the grace period).
            self.heap_bytes.fetch_sub(size, Ordering::Relaxed);
            self.pending_free.fetch_add(size, Ordering::Relaxed);
            let pending = self.pending_free.clone();
            // SAFETY: the chunk was unlinked (the store that replaced it happened before
            // this call), so only readers pinned before now can hold it; the collector
            // runs the closure after all of them unpinned (or repinned). Each chunk is
            // retired once.
            unsafe {
                guard.defer_unchecked(move || {
                    free_heap(link);
                    pending.fetch_sub(size, Ordering::Relaxed);
                })
            };
        }
    }

    /// A table built from `routes` in one pass (sorted and deduplicated here; the last
    /// of equal prefixes wins).
    pub fn build(routes: &[(u32, u8, u32)]) -> Dir16 {
        Dir16::build_at_least(routes, 0)
    }

    /// [`Self::build`], with narrow values of at least `1 << narrow` bytes.
    pub fn build_at_least(routes: &[(u32, u8, u32)], narrow: u32) -> Dir16 {
        let mut v: Vec<(u32, u8, u32)> = routes.iter().map(|&(k, l, nh)| (k.masked(l), l, nh)).collect();
        // Stable: equal prefixes keep input order, and the last one is kept below.
        v.sort_by_key(|r| (r.0, r.1));
        // 8-bit values when every next hop gets an index below 255, 16-bit ones when
        // every one gets an index, else the next hops themselves.
        let mut hops: FastMap<u32, ()> = fast_map();
        for r in &v {
            hops.insert(r.2, ());
        }
        let narrow = narrow.max(match hops.len() {
            n if n < usize::from(BYTE_MARK) => 0,
            n if n <= INDICES - 2 => 1,
            _ => 2,
        });
        let mut t = Dir16::with_values(narrow);
        let mut default = NONE;
        // (Field by field: the writer record is borrowed while the others are set.)
        let w = t.writer.get_mut().unwrap_or_else(|p| p.into_inner());
        let Top { links: top, dict } = t.top.get_mut();
        for (i, &(k, l, nh)) in v.iter().enumerate() {
            // Of equal prefixes (adjacent after the sort) only the last counts.
            if v.get(i + 1).is_some_and(|n| (n.0, n.1) == (k, l)) {
                continue;
            }
            w.count += 1;
            w.acquire_hop(nh, dict);
            if u32::from(l) > TOP_BITS {
                w.chunks[(k >> TOP_BITS) as usize].push(Sub::new(k, l, nh));
                continue;
            }
            w.short[l as usize].insert(k, nh);
            if l == 0 {
                default = nh;
                continue;
            }
            // In address order a prefix comes after every prefix containing it.
            let start = (k >> TOP_BITS) as usize;
            for i in start..start + (1usize << (TOP_BITS - u32::from(l))) {
                w.top_len[i] = l;
                w.top_val[i] = nh;
            }
        }
        let mut st = Staging {
            words: Vec::with_capacity(v.len() * 3),
            fixups: Vec::new(),
        };
        let mut links: Vec<(usize, u64)> = Vec::new();
        // (Replaced uniform chunks go through the collector like any other, though
        // nothing is shared yet.)
        let mut retired = Vec::new();
        for c in 0..TOP {
            if w.chunks[c].is_empty() {
                let v = w.top_val[c];
                let link = w.uniform_link(v, &t.heap_bytes);
                let old = top[c].swap(link, Ordering::Relaxed);
                w.release(old, &mut retired);
            } else {
                links.push((c, st.place(&image(w.top_val[c], &w.chunks[c]), &w.dict)));
            }
        }
        if !st.words.is_empty() {
            let mut arena = HugeSlice::new(st.words.len(), |i| st.words[i]);
            let base = arena.as_ptr() as u64;
            let a = arena.as_mut_slice();
            for &f in &st.fixups {
                a[f] += base;
            }
            t.arena = Some(arena);
            for (c, link) in links {
                let old = top[c].swap(link + base, Ordering::Relaxed);
                w.release(old, &mut retired);
            }
        }
        t.retire(retired, &epoch::pin());
        t.top.get_mut().dict[0].store(default, Ordering::Relaxed);
        t
    }

    /// log2 of the bytes of the chunks' narrow values (see [`Self::narrow`]).
    pub fn value_log2(&self) -> u32 {
        self.narrow
    }

    /// Whether some live next hop has no dictionary index that fits the narrow values,
    /// so the chunks holding it are wider ones behind a front, whose keys take the slow
    /// path: a table built again from its routes at the next width answers them all at
    /// full speed (which `growing.rs` does).
    pub fn outgrown(&self) -> bool {
        self.lock().misfits > 0
    }

    /// The first-level entry of /16 `c`.
    #[cfg(test)]
    fn link(&self, c: usize) -> u64 {
        self.top.load(&epoch::pin()).links[c].load(Ordering::Relaxed)
    }

    /// How many first-level entries link a chunk behind a front.
    #[cfg(test)]
    pub fn fronted_chunks(&self) -> usize {
        self.top
            .load(&epoch::pin())
            .links
            .iter()
            .filter(|e| e.load(Ordering::Relaxed) & FRONTED != 0)
            .count()
    }

    /// The next hop installed for exactly `key/len`.
    pub fn get(&self, key: u32, len: u8) -> Option<u32> {
        if len > 32 {
            return None;
        }
        let key = key.masked(len);
        let w = self.lock();
        if u32::from(len) <= TOP_BITS {
            return w.short[len as usize].get(&key).copied();
        }
        let list = &w.chunks[(key >> TOP_BITS) as usize];
        let i = find(list, key as u16, len).ok()?;
        Some(list[i].nh)
    }

    /// Every route, sorted by address then length.
    pub fn routes(&self) -> Vec<(u32, u8, u32)> {
        let w = self.lock();
        let mut v: Vec<(u32, u8, u32)> = per_length_routes(&w.short)
            .chain(w.chunks.iter().enumerate().flat_map(|(c, list)| {
                let high = (c as u32) << TOP_BITS;
                list.iter().map(move |s| (high | u32::from(s.low), s.len, s.nh))
            }))
            .collect();
        v.sort_unstable();
        v
    }

    pub fn len(&self) -> usize {
        self.lock().count
    }

    /// Removes every route with one store of a first level whose every entry links the
    /// no-route chunk and that has no default route; the chunks are retired.
    pub fn clear(&self) {
        let mut w = self.lock();
        let guard = epoch::pin();
        let mut retired = Vec::new();
        let links = HugeSlice::new(TOP, |_| AtomicU64::new(w.uniform_link(NONE, &self.heap_bytes)));
        let old = self.top.load(&guard);
        self.top.replace(Box::new(Top::new(links, NONE)), &guard);
        for (i, e) in old.links.iter().enumerate() {
            w.release(e.load(Ordering::Relaxed), &mut retired);
            w.top_len[i] = 0;
            w.top_val[i] = NONE;
            w.chunks[i] = Vec::new();
        }
        for m in w.short.iter_mut() {
            *m = PrefixMap::default();
        }
        w.count = 0;
        // Every index is free once the readers of the old chunks have unpinned.
        let freed: Vec<u16> = w.dict.map.drain().filter_map(|(_, (i, _))| i).collect();
        w.dict.small.fill(0);
        w.misfits = 0;
        let free = w.dict.free.clone();
        guard.defer(move || free.lock().unwrap_or_else(|p| p.into_inner()).extend(freed));
        self.retire(retired, &guard);
    }

    /// Bytes the readers touch: the first level, the dictionary, the arena and the live
    /// heap chunks.
    pub fn lookup_bytes(&self) -> usize {
        self.top.load(&epoch::pin()).bytes()
            + self.arena.as_ref().map_or(0, |a| a.bytes())
            + self.heap_bytes.load(Ordering::Relaxed)
    }

    /// Estimated bytes of the writer's route record, and of the replaced first level it
    /// keeps for the next change of a prefix shorter than /16.
    pub fn control_bytes(&self) -> usize {
        let w = self.lock();
        let lists: usize = w
            .chunks
            .iter()
            .map(|c| c.capacity() * std::mem::size_of::<Sub>())
            .sum();
        let maps: usize = w.short.iter().map(|m| m.capacity() * 9).sum();
        lists + maps + TOP * (std::mem::size_of::<Vec<Sub>>() + 5) + self.top.spare_bytes()
    }
}

#[cfg(test)]
mod tests;
