//! The lookup structure shared by both families: a directly indexed first level of
//! `2^K::TOP` atomic entries over a tree of immutable, bitmap-compressed multibit nodes
//! (stride 6), published by path copying. See the crate documentation for the design.

use crate::key::{Key, PrefixMap, ShortChange};
use crate::mem::HugeSlice;
use crossbeam_epoch::{self as epoch, Guard};
use std::marker::PhantomData;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};

/// Next hop meaning "no route": also the "nothing in this stride" mark inside nodes.
pub const NONE: u32 = u32::MAX;
/// Bits consumed per node below the first level.
const STRIDE: u32 = 6;
/// Slots of a full node.
const SLOTS: usize = 1 << STRIDE;
/// Words of a node's header: internal-slot bitmap, leaf-run bitmap, inherited value.
const HEADER: usize = 3;
/// A first-level entry with this bit set is a leaf (value in the high 32 bits);
/// otherwise it is a pointer to a node (nodes are 8-byte aligned).
const LEAF: u64 = 1;

#[inline(always)]
const fn leaf_entry(v: u32) -> u64 {
    ((v as u64) << 32) | LEAF
}

#[inline(always)]
fn stride_at<K: Key>(depth: u32) -> u32 {
    (K::BITS - depth).min(STRIDE)
}

/// A node is one allocation of `u64` words:
///
/// ```text
/// [0] vector   bit j set: slot j holds a child node
/// [1] leafvec  bit j set: a run of equal leaf values starts at leaf slot j
/// [2] def      (low 32 bits) value of the parent's slot: the longest prefix ending in
///              the parent's stride that covers this whole node, or NONE
/// [3 ..]       child pointers, in slot order (popcount(vector) words)
/// [..]         leaf values, u32, one per run (popcount(leafvec)), two per word
/// ```
///
/// A leaf value is the longest prefix ending in this node's stride covering the slot,
/// or NONE when none does (the lookup then keeps the best value seen higher up).
type NodePtr = *const u64;

#[inline(always)]
fn node_words(vector: u64, leafvec: u64) -> usize {
    HEADER + vector.count_ones() as usize + (leafvec.count_ones() as usize).div_ceil(2)
}

/// Frees a node's allocation.
///
/// # Safety
/// `p` came from [`encode`] and is not reachable by any reader any more (unlinked and,
/// for shared tables, a grace period has passed) and is freed once.
unsafe fn free_node(p: NodePtr) {
    // SAFETY (of the reads): the caller guarantees `p` is a live node allocation whose
    // header is initialised.
    let len = node_words(*p, *p.add(1));
    drop(Box::from_raw(std::ptr::slice_from_raw_parts_mut(
        p as *mut u64,
        len,
    )));
}

/// A raw pointer handed to the epoch collector (nodes are plain memory, safe to free
/// from any thread).
struct SendPtr(NodePtr);
// SAFETY: a node is immutable plain memory; freeing it on another thread is sound.
unsafe impl Send for SendPtr {}

/// The writer's decoded, mutable view of a node.
struct Image {
    stride: u32,
    def: u32,
    vals: [u32; SLOTS],
    /// Child links (tagged as in the node, 0 = none): kept tagged so that re-encoding a
    /// node never reads its children.
    kids: [u64; SLOTS],
}

impl Image {
    fn empty(stride: u32, def: u32) -> Image {
        Image {
            stride,
            def,
            vals: [NONE; SLOTS],
            kids: [0; SLOTS],
        }
    }

    fn slots(&self) -> usize {
        1 << self.stride
    }

    /// Nothing here a lookup could not get from above.
    fn is_empty(&self) -> bool {
        let n = self.slots();
        self.kids[..n].iter().all(|&k| k == 0) && self.vals[..n].iter().all(|&v| v == NONE)
    }
}

/// Reads a node the writer owns. The values of internal slots are left NONE: they live
/// in the children's `def`, and reading every child's header would cost a cache miss
/// per child on the update path.
///
/// # Safety
/// `p` is a live node of stride `stride` (the writer never frees nodes still linked).
unsafe fn decode(p: NodePtr, stride: u32) -> Image {
    let vector = *p;
    let leafvec = *p.add(1);
    let mut img = Image::empty(stride, *p.add(2) as u32);
    let kids = p.add(HEADER);
    let nk = vector.count_ones() as usize;
    let leaves = kids.add(nk) as *const u32;
    let (mut ki, mut li) = (0usize, 0usize);
    for j in 0..img.slots() {
        if vector >> j & 1 == 1 {
            img.kids[j] = *kids.add(ki);
            ki += 1;
        } else {
            if leafvec >> j & 1 == 1 {
                li += 1;
            }
            img.vals[j] = *leaves.add(li - 1);
        }
    }
    img
}

/// Allocates the node an image describes (`vals` of internal slots are not stored: the
/// children's `def` holds them).
fn encode(img: &Image, bytes: &AtomicUsize) -> NodePtr {
    let v = encode_words(img);
    bytes.fetch_add(v.len() * 8, Ordering::Relaxed);
    Box::into_raw(v.into_boxed_slice()) as *const u64
}

/// The words of the node an image describes.
fn encode_words(img: &Image) -> Vec<u64> {
    let n = img.slots();
    // First the bitmaps (they give the size), then one allocation filled in order:
    // updates encode a node per level, so this path is on the update latency.
    let mut vector = 0u64;
    let mut leafvec = 0u64;
    let mut prev: Option<u32> = None;
    for j in 0..n {
        if img.kids[j] != 0 {
            vector |= 1 << j;
        } else {
            if prev != Some(img.vals[j]) {
                leafvec |= 1 << j;
            }
            prev = Some(img.vals[j]);
        }
    }
    let words = node_words(vector, leafvec);
    let mut v: Vec<u64> = Vec::with_capacity(words);
    v.push(vector);
    v.push(leafvec);
    v.push(u64::from(img.def));
    for j in 0..n {
        if vector >> j & 1 == 1 {
            v.push(img.kids[j]);
        }
    }
    let mut half: Option<u32> = None;
    for j in 0..n {
        if leafvec >> j & 1 == 1 {
            match half.take() {
                None => half = Some(img.vals[j]),
                Some(lo) => v.push(u64::from(lo) | (u64::from(img.vals[j]) << 32)),
            }
        }
    }
    if let Some(lo) = half {
        v.push(u64::from(lo) | (u64::from(NONE) << 32));
    }
    debug_assert_eq!(v.len(), words);
    v
}

/// A copy of node `p` (stride `stride`) with another inherited value; children shared.
///
/// # Safety
/// `p` is a live node.
unsafe fn with_def(p: NodePtr, stride: u32, def: u32, bytes: &AtomicUsize) -> NodePtr {
    let mut img = decode(p, stride);
    img.def = def;
    encode(&img, bytes)
}

/// Walks the nodes below the first level.
///
/// # Safety
/// `node` is a node reachable from the table under an epoch guard the caller holds.
#[inline(always)]
unsafe fn walk<K: Key>(mut node: NodePtr, key: K) -> u32 {
    let mut depth = K::TOP;
    let mut best = NONE;
    loop {
        let (next, b, done) = step::<K>(node, key, depth, best);
        best = b;
        if done {
            return best;
        }
        node = untag(next);
        depth += STRIDE;
    }
}

/// One node of a lookup: returns (child, best so far, finished).
///
/// # Safety
/// As for [`walk`]; `depth` is the node's depth.
#[inline(always)]
unsafe fn step<K: Key>(node: NodePtr, key: K, depth: u32, best: u32) -> (u64, u32, bool) {
    let vector = *node;
    let def = *node.add(2) as u32;
    let mut best = if def != NONE { def } else { best };
    let j = key.bits(depth, stride_at::<K>(depth)) as u32;
    let below = vector & ((1u64 << j) - 1);
    if vector >> j & 1 == 1 {
        let child = *node.add(HEADER + below.count_ones() as usize);
        (child, best, false)
    } else {
        let leafvec = *node.add(1);
        let rank = (leafvec & (u64::MAX >> (63 - j))).count_ones() as usize - 1;
        let leaves = node.add(HEADER + vector.count_ones() as usize) as *const u32;
        let v = *leaves.add(rank);
        if v != NONE {
            best = v;
        }
        (0, best, true)
    }
}

/// Bits of a link (first-level entry or child pointer) above the address: how many
/// cache lines the node spans, minus one (user-space addresses fit in 56 bits).
const LINES_SHIFT: u32 = 56;
/// At most this many lines are prefetched per node.
const MAX_PREFETCH_LINES: usize = 2;

/// A link to node `p`, carrying the number of cache lines the node spans so that a
/// batch lookup can prefetch all of it (header and values) at once.
fn tag(p: NodePtr) -> u64 {
    // SAFETY: `p` is a live node the writer just built or still links.
    let bytes = unsafe { node_words(*p, *p.add(1)) } * 8;
    let first = p as usize % 64;
    let lines = (first + bytes - 1) / 64 + 1;
    debug_assert!((p as u64) >> LINES_SHIFT == 0, "node address above 2^56");
    (p as u64) | (((lines.min(MAX_PREFETCH_LINES) - 1) as u64) << LINES_SHIFT)
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

#[inline(always)]
fn untag(e: u64) -> NodePtr {
    (e & ((1u64 << LINES_SHIFT) - 1)) as NodePtr
}

/// Prefetches the lines of the node a link names (up to [`MAX_PREFETCH_LINES`]), or
/// the always-cached line `hot` for a leaf entry, without branching on the link.
#[inline(always)]
fn prefetch_link(e: u64, hot: usize) {
    // All ones for a link, zero for a leaf: selects with masks, so the compiler does not
    // turn the choice into a branch on a value that may still be in flight.
    let link = ((e & LEAF) as usize).wrapping_sub(1);
    let p = (e as usize & LINE_ADDR & link) | (hot & !link);
    prefetch(p as NodePtr);
    prefetch((p + (second_line_offset(e) & link)) as NodePtr);
}

/// Lines a link's node spans beyond its first, as a byte offset: 64 when the node
/// reaches into a second line, else 0 (the line-count field is one bit while at most
/// two lines are prefetched).
#[inline(always)]
fn second_line_offset(e: u64) -> usize {
    const _: () = assert!(MAX_PREFETCH_LINES == 2);
    (e >> (LINES_SHIFT - 6)) as usize & 64
}

/// The address bits of a link, rounded down to its cache line.
const LINE_ADDR: usize = ((1usize << LINES_SHIFT) - 1) & !63;

/// Prefetches the lines of the node a child link names (never a leaf).
#[inline(always)]
fn prefetch_child(e: u64) {
    let p = e as usize & LINE_ADDR;
    prefetch(p as NodePtr);
    prefetch((p + second_line_offset(e)) as NodePtr);
}

#[inline(always)]
fn prefetch(p: NodePtr) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint; it never faults, whatever the address.
    unsafe {
        std::arch::x86_64::_mm_prefetch(p as *const i8, std::arch::x86_64::_MM_HINT_T0);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// Writer-side state.
struct Writer<K: Key> {
    /// `routes[len]`: masked prefix to next hop.
    routes: Vec<PrefixMap<K>>,
    /// Per first-level slot: length (1..=TOP) of the longest prefix of at most TOP bits
    /// covering it, 0 if none.
    top_len: Vec<u8>,
    /// Per first-level slot: that prefix's next hop, NONE if none.
    top_val: Vec<u32>,
    count: usize,
}

/// The table. `K` is `u32` (IPv4) or `u128` (IPv6).
pub struct Trie<K: Key> {
    top: HugeSlice<AtomicU64>,
    /// The nodes of a bulk build, packed in one huge-page block in depth-first order.
    /// Nodes in it are never freed one by one: when an update replaces one, its words
    /// stay (counted in `memory_bytes`) until the table is dropped.
    arena: Option<HugeSlice<u64>>,
    /// The default route (`/0`), kept out of the first level so changing it is one store.
    default: AtomicU32,
    writer: Mutex<Writer<K>>,
    /// Bytes of live nodes outside the arena.
    node_bytes: AtomicUsize,
    _key: PhantomData<K>,
}

// SAFETY: the raw node pointers inside `top` are owned by the table; nodes are immutable
// once published, freed only through the epoch collector after being unlinked (or in
// `Drop`, with exclusive access), so sharing the table between threads is sound.
unsafe impl<K: Key> Send for Trie<K> {}
// SAFETY: see `Send`; all shared mutation goes through atomics or the writer mutex.
unsafe impl<K: Key> Sync for Trie<K> {}

impl<K: Key> Drop for Trie<K> {
    fn drop(&mut self) {
        for e in self.top.iter() {
            let e = e.load(Ordering::Relaxed);
            if e & LEAF == 0 {
                // SAFETY: `&mut self`: no reader holds a reference into the table, and
                // each linked node is owned by exactly one parent.
                unsafe { free_subtree::<K>(untag(e), K::TOP, self.arena.as_ref()) };
            }
        }
    }
}

/// Frees a node and everything below it.
///
/// # Safety
/// The subtree is unreachable by readers and linked nowhere else.
unsafe fn free_subtree<K: Key>(p: NodePtr, depth: u32, arena: Option<&HugeSlice<u64>>) {
    // Arena nodes link only arena nodes and are freed with the arena.
    if arena.is_some_and(|a| a.contains(p)) {
        return;
    }
    let img = decode(p, stride_at::<K>(depth));
    for &k in &img.kids[..img.slots()] {
        if k != 0 {
            free_subtree::<K>(untag(k), depth + img.stride, arena);
        }
    }
    free_node(p);
}

impl<K: Key> Default for Trie<K> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K: Key> Trie<K> {
    pub fn new() -> Trie<K> {
        let n = 1usize << K::TOP;
        Trie {
            top: HugeSlice::new(n, |_| AtomicU64::new(leaf_entry(NONE))),
            arena: None,
            default: AtomicU32::new(NONE),
            writer: Mutex::new(Writer {
                routes: (0..=K::BITS).map(|_| PrefixMap::default()).collect(),
                top_len: vec![0; n],
                top_val: vec![NONE; n],
                count: 0,
            }),
            node_bytes: AtomicUsize::new(0),
            _key: PhantomData,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Writer<K>> {
        // Every published state is complete, so a panic in a writer leaves nothing a
        // later writer could not continue from.
        self.writer.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Next hop for `key`, or NONE.
    #[inline]
    pub fn lookup(&self, key: K) -> u32 {
        let guard = epoch::pin();
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("popcnt") {
            // SAFETY: the CPU supports POPCNT (checked just above).
            return unsafe { self.lookup_popcnt(key, &guard) };
        }
        self.lookup_pinned(key, &guard)
    }

    /// [`Self::lookup_pinned`] compiled with the POPCNT instruction (the x86-64 baseline
    /// lacks it, and the software popcount costs more than the rest of a node step).
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "popcnt")]
    unsafe fn lookup_popcnt(&self, key: K, guard: &Guard) -> u32 {
        self.lookup_pinned(key, guard)
    }

    #[inline(always)]
    fn lookup_pinned(&self, key: K, _guard: &Guard) -> u32 {
        let e = self.top[key.bits(0, K::TOP)].load(Ordering::Acquire);
        let r = if e & LEAF != 0 {
            (e >> 32) as u32
        } else {
            // SAFETY: a non-leaf first-level entry points to a published node, which
            // stays allocated while `_guard` is pinned (it is freed only through the
            // epoch collector after being unlinked).
            unsafe { walk(untag(e), key) }
        };
        if r != NONE {
            r
        } else {
            self.default.load(Ordering::Acquire)
        }
    }

    /// Looks up `keys` level by level, prefetching the next level of every key before
    /// reading any of them, so that cache misses of a batch overlap.
    pub fn lookup_batch(&self, keys: &[K], out: &mut [u32]) {
        assert!(out.len() >= keys.len(), "lookup_batch: output shorter than input");
        let guard = epoch::pin();
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("popcnt") {
            // SAFETY: the CPU supports POPCNT (checked just above).
            unsafe { self.lookup_batch_popcnt(keys, out, &guard) };
            return;
        }
        self.lookup_batch_pinned(keys, out, &guard);
    }

    /// [`Self::lookup_batch_pinned`] compiled with the POPCNT instruction.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "popcnt")]
    unsafe fn lookup_batch_popcnt(&self, keys: &[K], out: &mut [u32], guard: &Guard) {
        self.lookup_batch_pinned(keys, out, guard)
    }

    #[inline(always)]
    fn lookup_batch_pinned(&self, keys: &[K], out: &mut [u32], guard: &Guard) {
        const CHUNK: usize = 32;
        let dflt = self.default.load(Ordering::Acquire);
        for (ks, os) in keys.chunks(CHUNK).zip(out.chunks_mut(CHUNK)) {
            self.lookup_chunk(ks, os, dflt, guard);
        }
    }

    #[inline(always)]
    fn lookup_chunk(&self, keys: &[K], out: &mut [u32], dflt: u32, _guard: &Guard) {
        let len = keys.len().min(32);
        let keys = &keys[..len];
        let out = &mut out[..len];
        // Links still to follow: first-level entries, then child links.
        let mut link = [0u64; 32];
        // A line that is always cached, prefetched in place of leaves (no branch).
        let hot = self.top.as_ptr() as usize;
        // No branch depends on a loaded entry in these two passes: a mispredicted branch
        // on an entry still in flight would squash the loads issued after it, and the
        // misses of the batch would no longer overlap.
        // (A local slice: the `Acquire` loads would otherwise make the compiler reload
        // the first level's address for every key.)
        let top: &[AtomicU64] = &self.top;
        let mut all_leaves = LEAF;
        for (l, k) in link.iter_mut().zip(keys) {
            // SAFETY: `bits(0, TOP)` is below `2^TOP`, the first level's length.
            let e = unsafe { top.get_unchecked(k.bits(0, K::TOP)) }.load(Ordering::Acquire);
            *l = e;
            all_leaves &= e;
        }
        // Fast path: the whole batch resolved at the first level (every load above is
        // already issued, so this branch cannot hold any of them back).
        if all_leaves != 0 {
            for (o, &e) in out.iter_mut().zip(&link) {
                *o = or_default((e >> 32) as u32, dflt);
            }
            return;
        }
        for &e in &link[..len] {
            prefetch_link(e, hot);
        }
        let mut best = [NONE; 32];
        let mut active = [0u8; 32];
        let mut n = 0usize;
        // The first node level, at a constant depth (its stride and shifts fold away):
        // most IPv4 lookups end here.
        for i in 0..len {
            let e = link[i];
            if e & LEAF != 0 {
                out[i] = or_default((e >> 32) as u32, dflt);
                continue;
            }
            // SAFETY: a non-leaf first-level entry links a published node that stays
            // allocated while the epoch guard is pinned (see `lookup_pinned`).
            let (next, b, done) = unsafe { step::<K>(untag(e), keys[i], K::TOP, NONE) };
            if done {
                out[i] = or_default(b, dflt);
            } else {
                link[i] = next;
                best[i] = b;
                active[n & 31] = i as u8;
                n += 1;
            }
        }
        if n == 0 {
            return;
        }
        for &i in &active[..n] {
            prefetch_child(link[usize::from(i) & 31]);
        }
        // The second node level, also at a constant depth (IPv4: /25 - /30), then the
        // deeper ones.
        let mut depth = K::TOP + STRIDE;
        n = Self::step_level(keys, out, dflt, &mut link, &mut best, &mut active, n, depth);
        while n > 0 {
            depth += STRIDE;
            n = Self::step_level(keys, out, dflt, &mut link, &mut best, &mut active, n, depth);
        }
    }

    /// Steps every active lookup of a batch through its node at `depth`, finishing those
    /// that end there and prefetching the next nodes of the others; returns how many
    /// are still active (compacted at the front of `active`).
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn step_level(
        keys: &[K],
        out: &mut [u32],
        dflt: u32,
        link: &mut [u64; 32],
        best: &mut [u32; 32],
        active: &mut [u8; 32],
        n: usize,
        depth: u32,
    ) -> usize {
        let mut m = 0usize;
        for a in 0..n {
            // (`& 31` only tells the compiler the index fits the arrays.)
            let i = usize::from(active[a]) & 31;
            // SAFETY: `active` holds indices of this batch, below `keys.len()`.
            let key = unsafe { *keys.get_unchecked(i) };
            // SAFETY: `link[i]` is a child link read from a published node, under the
            // batch's pinned guard.
            let (next, b, done) = unsafe { step::<K>(untag(link[i]), key, depth, best[i]) };
            best[i] = b;
            if done {
                // SAFETY: as for `keys`; `out` has the batch's length.
                unsafe { *out.get_unchecked_mut(i) = or_default(b, dflt) };
            } else {
                link[i] = next;
                active[m & 31] = i as u8;
                m += 1;
            }
        }
        for &i in &active[..m] {
            prefetch_child(link[usize::from(i) & 31]);
        }
        m
    }

    /// Installs `key/len -> nh`; returns the previous next hop of that prefix.
    pub fn insert(&self, key: K, len: u8, nh: u32) -> Option<u32> {
        let key = key.masked(len);
        let mut w = self.lock();
        let prev = w.routes[len as usize].insert(key, nh);
        if prev.is_none() {
            w.count += 1;
        }
        if prev != Some(nh) {
            self.apply(&mut w, key, len, Some(nh));
        }
        prev
    }

    /// Removes `key/len`; returns its next hop.
    pub fn remove(&self, key: K, len: u8) -> Option<u32> {
        let key = key.masked(len);
        let mut w = self.lock();
        let old = w.routes[len as usize].remove(&key)?;
        w.count -= 1;
        self.apply(&mut w, key, len, None);
        Some(old)
    }

    /// Brings the lookup structure in line with the writer's maps after `key/len` was
    /// set to `nh` (`None`: removed).
    fn apply(&self, w: &mut Writer<K>, key: K, len: u8, nh: Option<u32>) {
        let guard = epoch::pin();
        let mut retired: Vec<NodePtr> = Vec::new();
        if len == 0 {
            self.default.store(nh.unwrap_or(NONE), Ordering::Release);
        } else if u32::from(len) <= K::TOP {
            let span = 1usize << (K::TOP - u32::from(len));
            let start = key.bits(0, K::TOP);
            let change = ShortChange::new(&w.routes, key, len, nh, NONE);
            let (set_len, set_val) = (change.set_len, change.set_val);
            for i in start..start + span {
                if change.owns(w.top_len[i]) {
                    w.top_len[i] = set_len;
                    w.top_val[i] = set_val;
                    self.set_top_value(i, set_val, &mut retired);
                }
            }
        } else {
            let i = key.bits(0, K::TOP);
            let e = self.top[i].load(Ordering::Relaxed);
            let old = if e & LEAF != 0 { std::ptr::null() } else { untag(e) };
            let new = self.update(w, old, K::TOP, w.top_val[i], key, len, &mut retired);
            let entry = if new.is_null() {
                leaf_entry(w.top_val[i])
            } else {
                tag(new)
            };
            self.top[i].store(entry, Ordering::Release);
        }
        self.retire(retired, &guard);
    }

    /// Sets the value a first-level slot inherits from prefixes of at most TOP bits.
    fn set_top_value(&self, i: usize, v: u32, retired: &mut Vec<NodePtr>) {
        let e = self.top[i].load(Ordering::Relaxed);
        if e & LEAF != 0 {
            self.top[i].store(leaf_entry(v), Ordering::Release);
        } else {
            let p = untag(e);
            // SAFETY: linked nodes are live; only this (locked) writer frees them.
            unsafe {
                if *p.add(2) as u32 != v {
                    let c = with_def(p, stride_at::<K>(K::TOP), v, &self.node_bytes);
                    self.top[i].store(tag(c), Ordering::Release);
                    retired.push(p);
                }
            }
        }
    }

    /// Hands unlinked nodes to the epoch collector: they are freed once every reader
    /// that could have loaded a pointer to them has unpinned.
    fn retire(&self, retired: Vec<NodePtr>, guard: &Guard) {
        for p in retired {
            if self.in_arena(p) {
                continue;
            }
            // SAFETY: `p` is live (read before freeing is deferred).
            let words = unsafe { node_words(*p, *p.add(1)) };
            self.node_bytes.fetch_sub(words * 8, Ordering::Relaxed);
            let p = SendPtr(p);
            // SAFETY: `p` was unlinked (the store that replaced it happened before this
            // call), so only readers pinned before now can hold it; the collector runs
            // the closure after all of them unpinned. Each node is retired once.
            unsafe {
                guard.defer_unchecked(move || {
                    let p = p;
                    free_node(p.0)
                });
            }
        }
    }

    fn in_arena(&self, p: NodePtr) -> bool {
        self.arena.as_ref().is_some_and(|a| a.contains(p))
    }

    /// Rebuilds the path to the node whose stride holds `len`, returning the new subtree
    /// root (null when nothing is left). Replaced nodes go to `retired`.
    #[allow(clippy::too_many_arguments)]
    fn update(
        &self,
        w: &Writer<K>,
        node: NodePtr,
        depth: u32,
        def: u32,
        key: K,
        len: u8,
        retired: &mut Vec<NodePtr>,
    ) -> NodePtr {
        let stride = stride_at::<K>(depth);
        let mut img = if node.is_null() {
            Image::empty(stride, def)
        } else {
            // SAFETY: linked nodes are live; only this (locked) writer frees them.
            unsafe { decode(node, stride) }
        };
        img.def = def;
        if u32::from(len) <= depth + stride {
            let (first, run) = self.stride_values(w, depth, stride, key, len, &mut img.vals);
            for j in first..first + run {
                let c = untag(img.kids[j]);
                // SAFETY: as above.
                if !c.is_null() && unsafe { *c.add(2) } as u32 != img.vals[j] {
                    let stride = stride_at::<K>(depth + stride);
                    // SAFETY: as above.
                    let copy = unsafe { with_def(c, stride, img.vals[j], &self.node_bytes) };
                    img.kids[j] = tag(copy);
                    retired.push(c);
                }
            }
        } else {
            let j = key.bits(depth, stride);
            let kid = untag(img.kids[j]);
            // The slot's value: the child's inherited one, or the leaf value.
            let slot = if kid.is_null() {
                img.vals[j]
            } else {
                // SAFETY: as above.
                unsafe { *kid.add(2) as u32 }
            };
            let new = self.update(w, kid, depth + stride, slot, key, len, retired);
            img.kids[j] = if new.is_null() { 0 } else { tag(new) };
            // A child that went away leaves its slot a leaf with that value.
            img.vals[j] = slot;
        }
        if !node.is_null() {
            retired.push(node);
        }
        if img.is_empty() {
            std::ptr::null()
        } else {
            encode(&img, &self.node_bytes)
        }
    }

    /// Recomputes the values of the slots the prefix `key/len` spans in the node at
    /// `depth` on its path (the other slots cannot change): for each, the longest
    /// prefix of length `depth+1 ..= depth+stride` covering it, or NONE. Probes only
    /// the prefixes covering `key/len` and those inside it. Returns the slot range.
    fn stride_values(
        &self,
        w: &Writer<K>,
        depth: u32,
        stride: u32,
        key: K,
        len: u8,
        vals: &mut [u32; SLOTS],
    ) -> (usize, usize) {
        let own = u32::from(len) - depth;
        let run = 1usize << (stride - own);
        let first = key.bits(depth, stride);
        // The longest prefix in this stride that covers all of `key/len`.
        let cover = (1..own)
            .rev()
            .find_map(|l| w.routes[(depth + l) as usize].get(&key.masked((depth + l) as u8)))
            .copied()
            .unwrap_or(NONE);
        vals[first..first + run].fill(cover);
        let base = key.to_u128();
        for l in own..=stride {
            let map = &w.routes[(depth + l) as usize];
            if map.is_empty() {
                continue;
            }
            let sub = 1usize << (stride - l);
            for m in 0..(1u128 << (l - own)) {
                let p = K::from_u128(base | (m << (K::BITS - depth - l)));
                if let Some(&v) = map.get(&p) {
                    let s = first + (m as usize) * sub;
                    vals[s..s + sub].fill(v);
                }
            }
        }
        (first, run)
    }

    /// A table built from `routes` in one pass (sorted and deduplicated here; the last
    /// of equal prefixes wins).
    pub fn build(routes: &[(K, u8, u32)]) -> Trie<K> {
        let mut v: Vec<(K, u8, u32)> = routes.iter().map(|&(k, l, nh)| (k.masked(l), l, nh)).collect();
        // Stable: equal prefixes keep input order, and the last one is kept below.
        v.sort_by_key(|r| (r.0, r.1));
        let mut dedup: Vec<(K, u8, u32)> = Vec::with_capacity(v.len());
        for r in v {
            match dedup.last_mut() {
                Some(last) if last.0 == r.0 && last.1 == r.1 => *last = r,
                _ => dedup.push(r),
            }
        }
        let mut t = Trie::new();
        {
            let mut w = t.lock();
            for &(k, l, nh) in &dedup {
                w.routes[l as usize].insert(k, nh);
            }
            w.count = dedup.len();
            // First level: in address order a prefix comes after every prefix that
            // contains it, so later writes are the more specific ones.
            for &(k, l, nh) in &dedup {
                if l == 0 {
                    t.default.store(nh, Ordering::Relaxed);
                } else if u32::from(l) <= K::TOP {
                    let start = k.bits(0, K::TOP);
                    for i in start..start + (1usize << (K::TOP - u32::from(l))) {
                        w.top_len[i] = l;
                        w.top_val[i] = nh;
                    }
                }
            }
            for (i, &v) in w.top_val.iter().enumerate() {
                t.top[i].store(leaf_entry(v), Ordering::Relaxed);
            }
            let deep: Vec<(K, u8, u32)> = dedup.into_iter().filter(|r| u32::from(r.1) > K::TOP).collect();
            let mut s = 0;
            while s < deep.len() {
                let i = deep[s].0.bits(0, K::TOP);
                let mut e = s + 1;
                while e < deep.len() && deep[e].0.bits(0, K::TOP) == i {
                    e += 1;
                }
                let n = t.build_node(K::TOP, w.top_val[i], &deep[s..e]);
                if !n.is_null() {
                    t.top[i].store(tag(n), Ordering::Release);
                }
                s = e;
            }
        }
        t.pack();
        t
    }

    /// Moves every node into one huge-page arena, children before parents (right after
    /// a bulk build, before the table is shared).
    fn pack(&mut self) {
        let words = self.node_bytes.load(Ordering::Relaxed) / 8;
        if words == 0 {
            return;
        }
        let mut arena = HugeSlice::new(words, |_| 0u64);
        let mut used = 0usize;
        for i in 0..self.top.len() {
            let e = self.top[i].load(Ordering::Relaxed);
            if e & LEAF == 0 {
                let n = pack_subtree::<K>(untag(e), K::TOP, arena.as_mut_slice(), &mut used);
                self.top[i].store(tag(n), Ordering::Relaxed);
            }
        }
        debug_assert_eq!(used, words);
        self.node_bytes.store(0, Ordering::Relaxed);
        self.arena = Some(arena);
    }

    /// Builds the subtree at `depth` from the routes under it (sorted, all longer than
    /// `depth`).
    fn build_node(&self, depth: u32, def: u32, routes: &[(K, u8, u32)]) -> NodePtr {
        let stride = stride_at::<K>(depth);
        let mut img = Image::empty(stride, def);
        let end = depth + stride;
        for &(k, l, nh) in routes {
            let l = u32::from(l);
            if l <= end {
                let s = k.bits(depth, stride);
                img.vals[s..s + (1usize << (end - l))].fill(nh);
            }
        }
        let mut s = 0;
        while s < routes.len() {
            if u32::from(routes[s].1) <= end {
                s += 1;
                continue;
            }
            let j = routes[s].0.bits(depth, stride);
            let mut e = s + 1;
            let mut group: Vec<(K, u8, u32)> = vec![routes[s]];
            while e < routes.len() && routes[e].0.bits(depth, stride) == j {
                if u32::from(routes[e].1) > end {
                    group.push(routes[e]);
                }
                e += 1;
            }
            let c = self.build_node(end, img.vals[j], &group);
            img.kids[j] = if c.is_null() { 0 } else { tag(c) };
            s = e;
        }
        if img.is_empty() {
            std::ptr::null()
        } else {
            encode(&img, &self.node_bytes)
        }
    }

    /// The next hop installed for exactly `key/len`.
    pub fn get(&self, key: K, len: u8) -> Option<u32> {
        if u32::from(len) > K::BITS {
            return None;
        }
        self.lock().routes[len as usize].get(&key.masked(len)).copied()
    }

    /// Every route, sorted by address then length.
    pub fn routes(&self) -> Vec<(K, u8, u32)> {
        let w = self.lock();
        let mut v: Vec<(K, u8, u32)> = w
            .routes
            .iter()
            .enumerate()
            .flat_map(|(l, m)| m.iter().map(move |(&k, &nh)| (k, l as u8, nh)))
            .collect();
        v.sort_unstable();
        v
    }

    pub fn len(&self) -> usize {
        self.lock().count
    }

    /// Removes every route: each first-level slot is reset with one store, the nodes
    /// below it retired.
    pub fn clear(&self) {
        let mut w = self.lock();
        let guard = epoch::pin();
        self.default.store(NONE, Ordering::Release);
        let mut retired = Vec::new();
        for (i, slot) in self.top.iter().enumerate() {
            let e = slot.swap(leaf_entry(NONE), Ordering::AcqRel);
            if e & LEAF == 0 {
                collect_subtree::<K>(untag(e), K::TOP, &mut retired);
            }
            w.top_len[i] = 0;
            w.top_val[i] = NONE;
        }
        for m in w.routes.iter_mut() {
            *m = PrefixMap::default();
        }
        w.count = 0;
        self.retire(retired, &guard);
    }

    /// Bytes the readers touch: the first level plus the live nodes.
    pub fn lookup_bytes(&self) -> usize {
        self.top.bytes()
            + self.arena.as_ref().map_or(0, |a| a.bytes())
            + self.node_bytes.load(Ordering::Relaxed)
    }

    /// Estimated bytes of the writer's route record (maps and first-level shadow).
    pub fn control_bytes(&self) -> usize {
        let w = self.lock();
        let entry = std::mem::size_of::<K>() + 4 + 1;
        w.routes.iter().map(|m| m.capacity() * entry).sum::<usize>() + w.top_len.len() + w.top_val.len() * 4
    }
}

/// Every node of a subtree (for retirement).
fn collect_subtree<K: Key>(p: NodePtr, depth: u32, out: &mut Vec<NodePtr>) {
    // (Arena nodes among them are skipped by `retire`.)
    // SAFETY: called by the writer on a subtree it just unlinked and has not retired yet.
    let img = unsafe { decode(p, stride_at::<K>(depth)) };
    for &k in &img.kids[..img.slots()] {
        if k != 0 {
            collect_subtree::<K>(untag(k), depth + img.stride, out);
        }
    }
    out.push(p);
}

/// Copies a freshly built subtree (heap nodes) into `arena` from `*used` on, children
/// first, freeing the heap nodes; returns the new root.
fn pack_subtree<K: Key>(p: NodePtr, depth: u32, arena: &mut [u64], used: &mut usize) -> NodePtr {
    // SAFETY: called on nodes just built by `build`, not yet visible to any reader.
    let mut img = unsafe { decode(p, stride_at::<K>(depth)) };
    for j in 0..img.slots() {
        if img.kids[j] != 0 {
            let c = pack_subtree::<K>(untag(img.kids[j]), depth + img.stride, arena, used);
            img.kids[j] = tag(c);
        }
    }
    let words = encode_words(&img);
    let at = *used;
    arena[at..at + words.len()].copy_from_slice(&words);
    *used += words.len();
    // SAFETY: `p` was built by `encode`, is linked nowhere any more and freed once.
    unsafe { free_node(p) };
    arena[at..].as_ptr()
}
