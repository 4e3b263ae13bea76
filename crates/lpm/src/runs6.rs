//! The IPv6 lookup structure: a directly indexed first level of `2^16` entries (one per
//! /16) over a leaf-pushed multibit trie whose levels start at bits 16, 24, 32, 48, 64,
//! 80, 96 and 112 (strides 8, 8, then 16). A node holds its slots as *runs* of equal
//! values (the leaf-pushed next hop, or a link to the child node of one slot): a sorted
//! array of the slots where runs start, compared 8 at a time with SSE2, then one 64-bit
//! value per run. A /48 query walks the /16 entry, two small stride-8 nodes (few, so
//! they stay cached) and one stride-16 node for bits 32..48 (most BGP /32s hold a
//! handful of runs there, so the node is one or two lines): one cold access instead of
//! the trie's three or four. A node of more runs than one key line holds is stored
//! direct (stride 8) or *split* (stride 16: a direct node over the slot's high byte
//! whose values link stride-8 sub-nodes), so every read of a lookup is one line
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
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
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

#[inline(always)]
const fn leaf(v: u32) -> u64 {
    ((v as u64) << 32) | LEAF
}

/// The level index of the node whose stride holds prefix length `len` (> 16).
fn owner_level(len: u8) -> usize {
    let len = u32::from(len);
    DEPTHS
        .iter()
        .zip(STRIDES)
        .position(|(&d, s)| d < len && len <= d + s)
        .unwrap_or(DEPTHS.len() - 1)
}

/// The `stride` bits of `key` after its first `depth` bits.
#[inline(always)]
fn slot_of(key: u128, depth: u32, stride: u32) -> u32 {
    ((key << depth) >> (128 - stride)) as u32
}

/// A key as stored: `slot - 1` with the top bit flipped, so that a signed 16-bit
/// comparison `query > stored` means `slot <= query` for unsigned slots.
fn stored_key(slot: u32) -> u16 {
    ((slot - 1) as u16) ^ 0x8000
}

/// Byte offset of the values of a keyed node with `n` (at most [`FLAT`]) runs.
#[inline(always)]
fn values_at(n: usize) -> usize {
    // `(n - 1).div_ceil(8) * 16`, from the `2 * (n - 1)` a lookup has for its BZHI.
    (2 * (n - 1) + 14) & !15
}

/// Bytes allocated for a node with `n` runs: whole lines, at least one (a search reads
/// a whole line of keys).
fn node_bytes(n: usize) -> usize {
    (values_at(n) + 8 * n).next_multiple_of(64)
}

/// Whether a node of `n` runs over `stride` bits is stored direct (one value per slot):
/// stride-8 nodes too large for one key line. (Stride-16 ones are split, see
/// [`SPLIT`].)
fn is_direct(n: usize, stride: u32) -> bool {
    stride == 8 && n > FLAT
}

/// Slots of a direct node.
const DIRECT_SLOTS: usize = 256;

/// Number of stored keys of the key line at `p` that are at most `slot`, among the
/// first `valid` lanes (32 for a full line). `AVX2`: compiled into a function with the
/// `avx2`, `bmi2` and `popcnt` target features (two 32-byte compares instead of four).
///
/// # Safety
/// `p` is 64-byte aligned and 64 bytes are readable there; with `AVX2`, the CPU has
/// AVX2, BMI2 and POPCNT.
#[inline(always)]
unsafe fn count_le<const AVX2: bool>(p: *const u8, slot: u32, valid: usize) -> usize {
    #[cfg(target_arch = "x86_64")]
    if AVX2 {
        use std::arch::x86_64::*;
        let x = _mm256_set1_epi16((slot ^ 0x8000) as u16 as i16);
        let q = p as *const __m256i;
        let m0 = _mm256_movemask_epi8(_mm256_cmpgt_epi16(x, _mm256_load_si256(q))) as u32 as u64;
        let m1 = _mm256_movemask_epi8(_mm256_cmpgt_epi16(x, _mm256_load_si256(q.add(1)))) as u32 as u64;
        // Two mask bits per lane; lanes at and past `valid` hold values, not keys (BZHI
        // keeps all 64 bits for an index of 64).
        return _bzhi_u64(m0 | (m1 << 32), 2 * valid as u32).count_ones() as usize / 2;
    }
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::*;
        let x = _mm_set1_epi16((slot ^ 0x8000) as u16 as i16);
        let q = p as *const __m128i;
        let m0 = _mm_movemask_epi8(_mm_cmpgt_epi16(x, _mm_load_si128(q))) as u32 as u64;
        let m1 = _mm_movemask_epi8(_mm_cmpgt_epi16(x, _mm_load_si128(q.add(1)))) as u32 as u64;
        let m2 = _mm_movemask_epi8(_mm_cmpgt_epi16(x, _mm_load_si128(q.add(2)))) as u32 as u64;
        let m3 = _mm_movemask_epi8(_mm_cmpgt_epi16(x, _mm_load_si128(q.add(3)))) as u32 as u64;
        let bits = m0 | (m1 << 16) | (m2 << 32) | (m3 << 48);
        // Two mask bits per lane; lanes at and past `valid` hold values, not keys.
        let mask = if valid >= 32 {
            u64::MAX
        } else {
            !(u64::MAX << (2 * valid))
        };
        (bits & mask).count_ones() as usize / 2
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let x = (slot ^ 0x8000) as u16 as i16;
        let keys = p as *const i16;
        (0..valid.min(32)).filter(|&i| x > *keys.add(i)).count()
    }
}

/// The value word of the run holding `slot` in the node `link` names.
///
/// # Safety
/// `link` names a live node and `slot` is below `2^stride` of its level.
#[inline(always)]
unsafe fn value_word<const AVX2: bool>(link: u64, slot: u32) -> *const AtomicU64 {
    if link & DIRECT != 0 {
        direct_word::<true>(link, slot)
    } else {
        keyed_word::<AVX2>(link, slot)
    }
}

/// The value word of `slot` in the direct (or, with `MAY_SPLIT`, split) node `link`
/// names. (Only stride-16 nodes are split; a caller reading stride-8 nodes saves the
/// shift.)
///
/// # Safety
/// As for [`value_word`], and the node is direct, or split and `MAY_SPLIT`.
#[inline(always)]
unsafe fn direct_word<const MAY_SPLIT: bool>(link: u64, slot: u32) -> *const AtomicU64 {
    let base = (link & PTR) as *const AtomicU64;
    if MAY_SPLIT {
        // (A split node's top is indexed by the slot's high byte: `SPLIT << 1` is 8.)
        base.add((slot >> ((link & SPLIT) << 1)) as usize)
    } else {
        base.add(slot as usize)
    }
}

/// The value word of the run holding `slot` in the keyed node `link` names.
///
/// # Safety
/// As for [`value_word`], and the node is keyed.
#[inline(always)]
unsafe fn keyed_word<const AVX2: bool>(link: u64, slot: u32) -> *const AtomicU64 {
    let p = (link & PTR) as *const u8;
    let n = (link >> RUNS_SHIFT) as usize + 1;
    let rank = count_le::<AVX2>(p, slot, n - 1);
    (p.add(values_at(n)) as *const AtomicU64).add(rank)
}

/// The word holding the value of `slot` in the node `link` names, through the sub-node
/// when the node is split and the slot's high byte has one, and the value read there.
///
/// # Safety
/// As for [`value_word`].
#[inline(always)]
unsafe fn final_word<const AVX2: bool>(link: u64, slot: u32) -> (*const AtomicU64, u64) {
    let w = value_word::<AVX2>(link, slot);
    let e = (*w).load(Ordering::Acquire);
    if e & SUB != 0 {
        let w = value_word::<AVX2>(e, slot & 0xff);
        return (w, (*w).load(Ordering::Acquire));
    }
    (w, e)
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

/// The words of a node over `stride` bits holding `runs` (`(first slot, value)`, first
/// slot 0, ascending), into `words`, and the positions of its values that are links
/// into `links` (both cleared first). [`SUB`] links in a split node hold the sub-node's
/// byte offset from the node's start: whoever places the node adds its address.
/// Returns the number its link carries (its runs, or for a split node its lines) and
/// its link flags ([`DIRECT`], [`DIRECT`] | [`SPLIT`], or 0).
fn encode(runs: &[(u32, u64)], stride: u32, words: &mut Vec<u64>, links: &mut Vec<usize>) -> (usize, u64) {
    words.clear();
    links.clear();
    if stride == 8 || runs.len() <= FLAT {
        let flags = encode_plain(runs, stride, words, links);
        return (runs.len(), flags);
    }
    words.resize(DIRECT_SLOTS, 0);
    let mut sub: Vec<(u32, u64)> = Vec::with_capacity(DIRECT_SLOTS);
    // `r`: the run holding the high byte's first slot.
    let mut r = 0;
    for h in 0..DIRECT_SLOTS as u32 {
        let lo = h << 8;
        while runs.get(r + 1).is_some_and(|x| x.0 <= lo) {
            r += 1;
        }
        sub.clear();
        sub.push((0, runs[r].1));
        sub.extend(
            runs[r + 1..]
                .iter()
                .take_while(|x| x.0 < lo + 256)
                .map(|x| (x.0 - lo, x.1)),
        );
        let v = if let [(_, v)] = sub[..] {
            v
        } else {
            let at = words.len();
            let flags = encode_plain(&sub, 8, words, links);
            tag(at as u64 * 8, sub.len(), flags) | SUB
        };
        words[h as usize] = v;
        if v & LEAF == 0 {
            links.push(h as usize);
        }
    }
    (words.len() / 8, DIRECT | SPLIT)
}

/// Appends to `words` (a whole number of lines long) a direct node, or a keyed node of
/// at most [`FLAT`] runs, holding `runs`; notes the positions of its link values in
/// `links`; returns its link flags.
fn encode_plain(runs: &[(u32, u64)], stride: u32, words: &mut Vec<u64>, links: &mut Vec<usize>) -> u64 {
    let at = words.len();
    let n = runs.len();
    let mut note = |words: &[u64], from: usize, count: usize| {
        links.extend((from..from + count).filter(|&i| words[i] & LEAF == 0));
    };
    if is_direct(n, stride) {
        words.resize(at + DIRECT_SLOTS, 0);
        for (i, r) in runs.iter().enumerate() {
            let end = runs.get(i + 1).map_or(DIRECT_SLOTS, |x| x.0 as usize);
            words[at + r.0 as usize..at + end].fill(r.1);
        }
        note(words, at, DIRECT_SLOTS);
        return DIRECT;
    }
    debug_assert!(n <= FLAT);
    words.resize(at + node_bytes(n) / 8, 0);
    // Keys are little-endian 16-bit lanes at even byte offsets, so a key never
    // straddles two words.
    let node = &mut words[at..];
    for i in 0..(n - 1).div_ceil(8) * 8 {
        let key = if i + 1 < n { stored_key(runs[i + 1].0) } else { PAD };
        node[i / 4] |= u64::from(key) << (16 * (i % 4));
    }
    let v = values_at(n) / 8;
    for (w, r) in node[v..v + n].iter_mut().zip(runs) {
        *w = r.1;
    }
    note(words, at + v, n);
    0
}

/// A link to a node of `n` runs at byte address `addr`, with flags `flags`.
fn tag(addr: u64, n: usize, flags: u64) -> u64 {
    debug_assert!(addr & !PTR == 0, "node address not line-aligned or above 2^48");
    let two = if flags & DIRECT == 0 && node_bytes(n) > 64 {
        TWO_LINES
    } else {
        0
    };
    addr | (((n - 1) as u64) << RUNS_SHIFT) | flags | two
}

fn layout(bytes: usize) -> Layout {
    match Layout::from_size_align(bytes, 64) {
        Ok(l) => l,
        Err(_) => panic!("node of {} bytes is too large", bytes),
    }
}

/// Copies a node's words into a new line-aligned heap block; returns its link.
/// (`links`: the positions of its link values, as [`encode`] gives them; its [`SUB`]
/// links get the block's address added.)
fn place_heap(words: &[u64], links: &[usize], n: usize, flags: u64, bytes: &AtomicUsize) -> u64 {
    let l = layout(words.len() * 8);
    // SAFETY: the layout has a non-zero size (a node is at least one line).
    let p = unsafe { alloc(l) } as *mut u64;
    if p.is_null() {
        handle_alloc_error(l);
    }
    // SAFETY: `p` holds `words.len()` words, freshly allocated, not overlapping `words`.
    unsafe { std::ptr::copy_nonoverlapping(words.as_ptr(), p, words.len()) };
    for &i in links {
        if words[i] & SUB != 0 {
            // SAFETY: `i < words.len()`; the block is not shared yet.
            unsafe { *p.add(i) += p as u64 };
        }
    }
    bytes.fetch_add(l.size(), Ordering::Relaxed);
    tag(p as u64, n, flags)
}

/// Heap bytes of the node a link names.
fn link_bytes(link: u64) -> usize {
    if link & SPLIT != 0 {
        ((link >> RUNS_SHIFT) as usize + 1) * 64
    } else if link & DIRECT != 0 {
        DIRECT_SLOTS * 8
    } else {
        node_bytes((link >> RUNS_SHIFT) as usize + 1)
    }
}

/// Frees a heap node.
///
/// # Safety
/// `link` names a node made by [`place_heap`], unreachable by readers (unlinked, past
/// its grace period, or never shared), freed once.
unsafe fn free_node(link: u64) {
    dealloc((link & PTR) as *mut u8, layout(link_bytes(link)));
}

/// The runs of a node's slots, leaf-pushed, into `runs` (cleared first): `cover`
/// everywhere, painted over by `own` (routes ending in the node's stride, sorted by
/// address then length), with each kid slot (`kids`, ascending) holding its child's
/// link. `stack` is scratch space.
///
/// Within a node a route's address is its base plus its slot, so `own` is sorted by
/// (slot, length) too; merging it with the kids (a kid after every route starting at
/// its slot) visits every interval after each interval containing it, with no sort.
fn runs_of(
    depth: u32,
    stride: u32,
    cover: u32,
    own: impl Iterator<Item = (u32, u32, u32)>,
    kids: impl Iterator<Item = (u32, u64)>,
    runs: &mut Vec<(u32, u64)>,
    stack: &mut Vec<(u32, u64)>,
) {
    runs.clear();
    stack.clear();
    let push = |runs: &mut Vec<(u32, u64)>, start: u32, v: u64| {
        if runs.last().map(|r| r.1) != Some(v) {
            runs.push((start, v));
        }
    };
    let end = 1u32 << stride;
    stack.push((end, leaf(cover)));
    let mut cur = 0;
    let mut own = own.map(|(s, l, nh)| (s, s + (1 << (depth + stride - l)), leaf(nh)));
    let mut kids = kids.map(|(s, link)| (s, s + 1, link));
    let (mut next_own, mut next_kid) = (own.next(), kids.next());
    loop {
        let (s, e, v) = match (next_own, next_kid) {
            (Some(o), Some(k)) if o.0 <= k.0 => {
                next_own = own.next();
                o
            }
            (_, Some(k)) => {
                next_kid = kids.next();
                k
            }
            (Some(o), None) => {
                next_own = own.next();
                o
            }
            (None, None) => break,
        };
        while let Some(&(top_end, top_v)) = stack.last() {
            if top_end > s {
                break;
            }
            if cur < top_end {
                push(runs, cur, top_v);
                cur = top_end;
            }
            stack.pop();
        }
        let top_v = stack.last().map_or(leaf(cover), |t| t.1);
        if cur < s {
            push(runs, cur, top_v);
            cur = s;
        }
        stack.push((e, v));
    }
    while let Some((top_end, top_v)) = stack.pop() {
        if cur < top_end {
            push(runs, cur, top_v);
            cur = top_end;
        }
    }
}

/// Buffers the writer reuses from node to node (an update of a short prefix rebuilds
/// hundreds of nodes).
#[derive(Default)]
struct Scratch {
    runs: Vec<(u32, u64)>,
    stack: Vec<(u32, u64)>,
    words: Vec<u64>,
    /// Positions in `words` of the values that are links.
    links: Vec<usize>,
}

/// A route ending in a node's stride, as the node's record keeps it: `key` is the
/// route's bits in the stride (the slot of its first address) shifted left by 8, ORed
/// with its length, so that ordering by `key` is ordering by address then length
/// within the node.
///
/// (8 bytes, where the route as `(u128, u8, u32)` took 32: inserting into or removing
/// from the sorted list of a /32 holding thousands of /48s moves a quarter of the
/// bytes, and the binary searches compare one `u32`.)
#[derive(Clone, Copy)]
struct Own {
    key: u32,
    nh: u32,
}

impl Own {
    /// The key of the route `a/len` (masked) in the node of level `level`.
    #[inline]
    fn key(a: u128, len: u8, level: usize) -> u32 {
        (slot_of(a, DEPTHS[level], STRIDES[level]) << 8) | u32::from(len)
    }

    /// The route's first slot in its node's stride.
    #[inline]
    fn slot(self) -> u32 {
        self.key >> 8
    }

    /// The route's (slot, length, next hop), as [`runs_of`] takes them.
    #[inline]
    fn parts(self) -> (u32, u32, u32) {
        (self.slot(), self.key & 0xff, self.nh)
    }
}

/// The writer's record of one node.
struct NodeRec {
    /// Routes ending in this node's stride, sorted by address then length.
    own: Vec<Own>,
    /// Slots holding a child node, ascending, each with the child's current link (0
    /// until the child is first encoded), so that encoding this node looks no child up.
    kids: Vec<(u32, u64)>,
    /// Routes longer than this node's depth inside its range (own and below); the node
    /// exists while this is positive.
    deep: usize,
    /// Length and next hop of the longest prefix of at most the node's depth covering
    /// its range (0 and NONE if none; the default route is applied separately).
    cover_len: u8,
    cover: u32,
    /// The published node (0 before the first build).
    link: u64,
    /// Sub-nodes of a split node placed on their own by [`Runs6::patch_sub`] (the others
    /// live in the node's block), freed with the node or when replaced in turn.
    subs: Vec<u64>,
}

impl NodeRec {
    fn new() -> NodeRec {
        NodeRec {
            own: Vec::new(),
            kids: Vec::new(),
            deep: 0,
            cover_len: 0,
            cover: NONE,
            link: 0,
            subs: Vec::new(),
        }
    }
}

/// The longest route of `own` (a node's routes at level `level`) covering `key`.
fn own_cover(own: &[Own], level: usize, key: u128) -> Option<(u8, u32)> {
    let (d, s) = (DEPTHS[level], STRIDES[level]);
    (d + 1..=d + s).rev().find_map(|l| {
        let k = Own::key(key.masked(l as u8), l as u8, level);
        own.binary_search_by_key(&k, |r| r.key)
            .ok()
            .map(|i| (l as u8, own[i].nh))
    })
}

/// Writer-side state.
struct Writer {
    /// `routes[len]`: masked prefix to next hop, every length.
    routes: Vec<PrefixMap<u128>>,
    /// Per /16: length (1..=16) and next hop of the longest prefix of at most 16 bits
    /// covering it (0 and NONE if none).
    top_len: Vec<u8>,
    top_val: Vec<u32>,
    /// Nodes by (level, base address).
    nodes: FastMap<(u8, u128), NodeRec>,
    count: usize,
    scratch: Scratch,
}

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
}

impl First {
    fn empty() -> First {
        First {
            top: HugeSlice::new(TOP, |_| AtomicU64::new(leaf(NONE))),
            short: HugeSlice::new(TOP, |_| AtomicU32::new(NONE)),
        }
    }
}

impl Level for First {
    fn duplicate(&self) -> First {
        First {
            top: self.top.duplicate(),
            short: self.short.duplicate(),
        }
    }

    fn bytes(&self) -> usize {
        self.top.bytes() + self.short.bytes()
    }

    fn copy_from(&mut self, from: &First) {
        self.top.copy_from(&from.top);
        self.short.copy_from(&from.short);
    }
}

/// The IPv6 table.
pub struct Runs6 {
    /// Behind one pointer (see `first.rs`): a change of a prefix shorter than /16
    /// publishes a changed copy.
    first: FirstLevel<First>,
    /// Nodes of a bulk build, packed in one huge-page block; never freed one by one
    /// (replaced ones stay until the table is dropped, counted in `lookup_bytes`).
    /// (Atomic words: a kid slot's value word is replaced in place when the kid is.)
    arena: Option<HugeSlice<AtomicU64>>,
    /// The default route (`/0`).
    default: AtomicU32,
    writer: Mutex<Writer>,
    /// Bytes of live heap nodes.
    heap_bytes: AtomicUsize,
}

// SAFETY: the node pointers inside the first level and the nodes are owned by the table;
// nodes are immutable once published except for the atomic value words of kid slots, and
// freed only through the epoch collector after being unlinked (or in `Drop`, with
// exclusive access); so is a replaced first level.
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
}

impl Runs6View<'_> {
    /// [`Runs6::lookup_batch_in`] through this view's first level.
    #[inline]
    pub fn lookup_batch(&self, keys: &[u128], out: &mut [u32]) {
        assert!(out.len() >= keys.len(), "lookup_batch: output shorter than input");
        let (table, first) = (self.table, self.first);
        #[cfg(target_arch = "x86_64")]
        if has_avx2() {
            // SAFETY: the CPU supports AVX2, BMI2 and POPCNT (checked just above).
            unsafe { table.lookup_batch_avx2(first, keys, out) };
            return;
        }
        table.lookup_batch_pinned::<false>(first, keys, out);
    }
}

impl Runs6 {
    pub fn new() -> Runs6 {
        Runs6 {
            first: FirstLevel::new(First::empty()),
            arena: None,
            default: AtomicU32::new(NONE),
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
        let first = self.first.load(guard);
        #[cfg(target_arch = "x86_64")]
        if has_avx2() {
            // SAFETY: the CPU supports AVX2, BMI2 and POPCNT (checked just above).
            return unsafe { self.lookup_avx2(first, key) };
        }
        self.lookup_pinned::<false>(first, key)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,bmi1,bmi2,popcnt")]
    unsafe fn lookup_avx2(&self, first: &First, key: u128) -> u32 {
        self.lookup_pinned::<true>(first, key)
    }

    /// Callers hold an epoch guard, under which they loaded `first` (and, with `AVX2`,
    /// run on a CPU with AVX2, BMI2 and POPCNT).
    #[inline(always)]
    fn lookup_pinned<const AVX2: bool>(&self, first: &First, key: u128) -> u32 {
        let i = slot_of(key, 0, TOP_BITS) as usize;
        let mut v = first.top[i].load(Ordering::Acquire);
        let mut level = 0;
        while v & LEAF == 0 {
            // SAFETY: a link names a published node, alive while the caller's guard is
            // pinned; the slot has the node level's stride.
            v = unsafe { final_word::<AVX2>(v, slot_of(key, DEPTHS[level], STRIDES[level])) }.1;
            level += 1;
        }
        let v = or_default((v >> 32) as u32, first.short[i].load(Ordering::Acquire));
        or_default(v, self.default.load(Ordering::Acquire))
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
        // (One first level for the whole call: a change published meanwhile shows in
        // all of its answers or in none.)
        self.view(guard).lookup_batch(keys, out)
    }

    /// The table with its current first level loaded, for batch lookups under `guard`.
    #[inline]
    pub fn view<'g>(&'g self, guard: &'g Guard) -> Runs6View<'g> {
        Runs6View {
            table: self,
            first: self.first.load(guard),
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,bmi1,bmi2,popcnt")]
    unsafe fn lookup_batch_avx2(&self, first: &First, keys: &[u128], out: &mut [u32]) {
        self.lookup_batch_pinned::<true>(first, keys, out)
    }

    #[inline(always)]
    fn lookup_batch_pinned<const AVX2: bool>(&self, first: &First, keys: &[u128], out: &mut [u32]) {
        let dflt = self.default.load(Ordering::Acquire);
        for (ks, os) in keys.chunks(32).zip(out.chunks_mut(32)) {
            self.lookup_group::<AVX2>(first, ks, os, dflt);
        }
    }

    #[inline(always)]
    fn lookup_group<const AVX2: bool>(&self, first: &First, keys: &[u128], out: &mut [u32], dflt: u32) {
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
        // nodes (and, for a partial group, the answers of the others).
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
        while rest != 0 {
            let i = rest.trailing_zeros() as usize;
            rest &= rest - 1;
            let mut nh = (v[i & 31] >> 32) as u32;
            if nh == NONE {
                // SAFETY: `i < len` (only those bits are set); a 16-bit slot is below
                // the length of `short`, 2^16.
                let k = unsafe { *keys.get_unchecked(i) };
                nh = unsafe { first.short.get_unchecked(slot_at::<0, 16>(k) as usize) }
                    .load(Ordering::Acquire);
            }
            out[i] = or_default(nh, dflt);
        }
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
            self.apply(&mut w, key, len, Some(nh), prev.is_none());
        }
        prev
    }

    /// Removes `key/len`; returns its next hop.
    pub fn remove(&self, key: u128, len: u8) -> Option<u32> {
        let key = key.masked(len);
        let mut w = self.lock();
        let old = w.routes[len as usize].remove(&key)?;
        w.count -= 1;
        self.apply(&mut w, key, len, None, true);
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
            self.default.store(nh.unwrap_or(NONE), Ordering::Release);
            return;
        }
        if u32::from(len) <= TOP_BITS {
            let span = 1usize << (TOP_BITS - u32::from(len));
            let start = slot_of(key, 0, TOP_BITS) as usize;
            let change = ShortChange::new(&w.routes, key, len, nh, NONE, 0);
            let owned: Vec<usize> = (start..start + span)
                .filter(|&i| change.owns(w.top_len[i]))
                .collect();
            let current = self.first.load(&guard);
            // One /16 changes in place; more change in a copy published whole, so that
            // readers see all of them or none.
            let copy = (owned.len() > 1).then(|| self.first.copy(&guard));
            let first = copy.as_deref().unwrap_or(current);
            for i in owned {
                w.top_len[i] = change.set_len;
                w.top_val[i] = change.set_val;
                // Nodes leave the slots only short prefixes cover at NONE, and lookups
                // ending there read `short`: one store per /16 either way.
                if w.nodes.contains_key(&(0, (i as u128) << 112)) {
                    first.short[i].store(change.set_val, Ordering::Release);
                } else {
                    first.top[i].store(leaf(change.set_val), Ordering::Release);
                    first.short[i].store(change.set_val, Ordering::Release);
                }
            }
            if let Some(copy) = copy {
                self.first.replace(copy, &guard);
            }
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
                *t.default.get_mut() = nh;
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

    /// Removes every route: the default route with one store, then the others with one
    /// store of an empty first level; the nodes are retired.
    pub fn clear(&self) {
        let mut w = self.lock();
        let guard = epoch::pin();
        self.default.store(NONE, Ordering::Release);
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

/// The `S` bits of `key` after its first `D`, from the one 64-bit half holding them
/// when there is one.
#[inline(always)]
fn slot_at<const D: u32, const S: u32>(key: u128) -> u32 {
    if D + S <= 64 {
        ((((key >> 64) as u64) << D) >> (64 - S)) as u32
    } else if D >= 64 {
        (((key as u64) << (D & 63)) >> (64 - S)) as u32
    } else {
        slot_of(key, D, S)
    }
}

/// The keys of a group whose value is a link, by the kind of node it names: the
/// passes read direct (and split) nodes in one loop and keyed ones in another, so no
/// branch depends on a node's kind (in the realistic table's table queries, every
/// node level mixes the two kinds).
#[derive(Clone, Copy, Default)]
struct Links {
    direct: u32,
    keyed: u32,
}

/// One level of a batch lookup: for each key `i` of `links`, reads the value of slot
/// `slots[i]` in the node `v[i]` links, stores it in `v[i]`, and computes and
/// prefetches the key's slot (bits `ND..ND + NS`) in the node the value links, for the
/// next level. Returns the keys whose new value is again a link.
#[inline(always)]
fn step_level<const AVX2: bool, const ND: u32, const NS: u32>(
    keys: &[u128],
    v: &mut [u64; 32],
    slots: &mut [u32; 32],
    links: Links,
) -> Links {
    const { assert!(ND + NS <= 128) };
    // The first node level (bits 16..24) takes its slots from the keys: its nodes, one
    // per /16 in use, stay cached, so they are read without a pass to prefetch them.
    if ND == 24 {
        return read_pass::<AVX2, ND, NS, false, true>(keys, v, slots, links).0;
    }
    // Only stride-16 nodes are split: those at depth 32 and below, read by the passes
    // that compute slots at 48 and below.
    if ND < 48 {
        return read_pass::<AVX2, ND, NS, false, false>(keys, v, slots, links).0;
    }
    let (next, subs) = read_pass::<AVX2, ND, NS, true, false>(keys, v, slots, links);
    // Keys whose value was a sub-node link of a split node: read again, from the
    // sub-node, at the low byte of the same slot (prefetched by the pass above).
    let (below, _) = read_pass::<AVX2, ND, NS, false, false>(keys, v, slots, subs);
    Links {
        direct: next.direct | below.direct,
        keyed: next.keyed | below.keyed,
    }
}

/// One pass of [`step_level`] over the keys of `links`: returns the keys whose value is
/// a link to a next-level node and, with `TOPS` (nodes that may be split), those whose
/// value is a sub-node link, with their slot in the sub-node. With `FIRST`, the nodes
/// are the first level's, and each key's slot in them is taken from the key (bits
/// 16..24) instead of `slots`.
#[inline(always)]
fn read_pass<const AVX2: bool, const ND: u32, const NS: u32, const TOPS: bool, const FIRST: bool>(
    keys: &[u128],
    v: &mut [u64; 32],
    slots: &mut [u32; 32],
    links: Links,
) -> (Links, Links) {
    // The keys whose value is a link, those of them whose link names a direct node,
    // and (with `TOPS`) those whose link is a sub-node's.
    // (`direct` and `sub` gather each key's flag bit where it stands in the value,
    // shifted by the key's index, and are shifted down once after the pass: one
    // instruction a key less than moving the bit down first.)
    let (mut all, mut direct, mut sub) = (0u32, 0u64, 0u64);
    let mut settle = |i: usize, e: u64, v: &mut [u64; 32], slots: &mut [u32; 32]| {
        v[i & 31] = e;
        if e & LEAF != 0 {
            return;
        }
        all |= 1 << i;
        direct |= (e & DIRECT) << i;
        // SAFETY: only bits below `keys.len()` (at most 32) are ever set in the masks.
        let below = slot_at::<ND, NS>(unsafe { *keys.get_unchecked(i) });
        let slot = if TOPS {
            sub |= (e & SUB) << i;
            if e & SUB != 0 {
                slots[i & 31] & 0xff
            } else {
                below
            }
        } else {
            below
        };
        slots[i & 31] = slot;
        prefetch_node(e, slot);
    };
    let here = |i: usize, slots: &[u32; 32]| {
        if FIRST {
            // SAFETY: as above.
            slot_at::<16, 8>(unsafe { *keys.get_unchecked(i) })
        } else {
            slots[i & 31]
        }
    };
    let mut rest = links.direct;
    while rest != 0 {
        let i = rest.trailing_zeros() as usize;
        rest &= rest - 1;
        // SAFETY: `v[i]` links a published direct node (its bit is set), alive while
        // the caller's guard is pinned, and the slot is the key's at that node's level.
        // (Only a pass with `TOPS` reads stride-16 nodes, the only ones that can be
        // split.)
        let e = unsafe { &*direct_word::<TOPS>(v[i & 31], here(i, slots)) }.load(Ordering::Acquire);
        settle(i, e, v, slots);
    }
    let mut rest = links.keyed;
    while rest != 0 {
        let i = rest.trailing_zeros() as usize;
        rest &= rest - 1;
        // SAFETY: as above, for a keyed node (with `AVX2`, the caller runs with AVX2,
        // BMI2 and POPCNT).
        let e = unsafe { &*keyed_word::<AVX2>(v[i & 31], here(i, slots)) }.load(Ordering::Acquire);
        settle(i, e, v, slots);
    }
    let (direct, sub) = ((direct >> 1) as u32, (sub >> 3) as u32);
    let next = all & !sub;
    (
        Links {
            direct: next & direct,
            keyed: next & !direct,
        },
        Links {
            direct: sub & direct,
            keyed: sub & !direct,
        },
    )
}

/// For 32 first-level entries `v`: the masks of those that are links, and of those
/// that link direct nodes, four entries per step.
///
/// # Safety
/// The CPU has AVX2.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn link_masks_avx2(v: &[u64; 32]) -> (u32, u32) {
    use std::arch::x86_64::*;
    let (mut links, mut direct) = (0u32, 0u32);
    for j in 0..8 {
        let x = _mm256_loadu_si256(v.as_ptr().add(4 * j) as *const __m256i);
        // Bit 0 (LEAF) of each entry to its sign bit: a set mask bit is a leaf.
        let leaf = _mm256_movemask_pd(_mm256_castsi256_pd(_mm256_slli_epi64(x, 63))) as u32;
        links |= (!leaf & 15) << (4 * j);
        // Bit 1 (DIRECT) likewise.
        direct |= (_mm256_movemask_pd(_mm256_castsi256_pd(_mm256_slli_epi64(x, 62))) as u32) << (4 * j);
    }
    (links, direct)
}

/// For 32 leaves `v`: writes each one's answer to `out` (its next hop, or `dflt` for
/// NONE), four per step, and returns the mask of the NONEs.
///
/// # Safety
/// The CPU has AVX2; `out` holds at least 32 answers.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn answers_avx2(v: &[u64; 32], out: &mut [u32], dflt: u32) -> u32 {
    use std::arch::x86_64::*;
    debug_assert!(out.len() >= 32);
    // The high halves of four entries into the low four 32-bit lanes.
    let odd = _mm256_setr_epi32(1, 3, 5, 7, 1, 3, 5, 7);
    let none = _mm_set1_epi32(NONE as i32);
    let dflt = _mm_set1_epi32(dflt as i32);
    let mut nones = 0u32;
    for j in 0..8 {
        let x = _mm256_loadu_si256(v.as_ptr().add(4 * j) as *const __m256i);
        let hops = _mm256_castsi256_si128(_mm256_permutevar8x32_epi32(x, odd));
        let is_none = _mm_cmpeq_epi32(hops, none);
        nones |= (_mm_movemask_ps(_mm_castsi128_ps(is_none)) as u32) << (4 * j);
        _mm_storeu_si128(
            out.as_mut_ptr().add(4 * j) as *mut __m128i,
            _mm_blendv_epi8(hops, dflt, is_none),
        );
    }
    nones
}

/// Prefetches the node link `e` names for the lookup of `slot` in it: the value line of
/// `slot` in a direct node, of its high byte in a split node's top, else the key line
/// and, for a keyed node of more than six runs, the second line (all of a node of up
/// to nine runs).
#[inline(always)]
fn prefetch_node(e: u64, slot: u32) {
    let (first, second) = node_lines(e, slot);
    prefetch(first);
    prefetch(second);
}

/// The two lines [`prefetch_node`] fetches: the line of the slot's value word in a
/// direct node (twice) or of its top value in a split one (twice); a keyed node's key
/// line, and its second line if it has one ([`TWO_LINES`]; else the key line twice).
#[inline(always)]
fn node_lines(e: u64, slot: u32) -> (usize, usize) {
    // The value word of a direct node's slot is word `slot >> shift`: shift 0 in a
    // direct node, 8 in a split one (its top is indexed by the high byte), and 32 (past
    // any slot, so line 0) in a keyed one; read from a constant by the kind bits
    // (`e & 6` is 0, 2 or 6).
    const SHIFTS: u64 = 32 | 8 << 24;
    let shift = SHIFTS >> ((e & (DIRECT | SPLIT)) << 2);
    let first = (e & PTR) as usize + (((u64::from(slot) >> (shift & 63)) << 3) as usize & !63);
    // A keyed node's second line, if it has one (`TWO_LINES << 2` is 64).
    (first, first + ((e & TWO_LINES) << 2) as usize)
}

/// Whether the CPU has what the fast lookup paths use: AVX2, BMI1, BMI2 and POPCNT.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn has_avx2() -> bool {
    std::arch::is_x86_feature_detected!("avx2")
        && std::arch::is_x86_feature_detected!("bmi1")
        && std::arch::is_x86_feature_detected!("bmi2")
        && std::arch::is_x86_feature_detected!("popcnt")
}

/// Length and next hop of the longest prefix of at most the node's depth covering the
/// node `(level, base)`, from its parent's record (the parent's covering route or
/// cover) or, at level 0, the first-level record.
fn cover_for(w: &Writer, level: usize, base: u128) -> (u8, u32) {
    match parent(level, base) {
        // Prefixes of at most 16 bits are not pushed into nodes (see `Runs6::short`).
        None => (0, NONE),
        Some((pl, pb)) => {
            let p = &w.nodes[&(pl as u8, pb)];
            own_cover(&p.own, pl, base).unwrap_or((p.cover_len, p.cover))
        }
    }
}

/// Applies a change of the prefix covering node `(level, base)` to the node's cover
/// when the node's cover is that prefix's (see [`ShortChange::owns`]), marking it dirty,
/// and then to its children.
fn push_cover(w: &mut Writer, level: usize, base: u128, change: &ShortChange, dirty: &mut Vec<Dirty>) {
    let Some(rec) = w.nodes.get_mut(&(level as u8, base)) else {
        return;
    };
    if !change.owns(rec.cover_len) {
        return;
    }
    rec.cover_len = change.set_len;
    rec.cover = change.set_val;
    dirty.push((level, base, WHOLE));
    let (d, s) = (DEPTHS[level], STRIDES[level]);
    let kids: Vec<u32> = rec.kids.iter().map(|k| k.0).collect();
    for slot in kids {
        let kb = base | (u128::from(slot) << (128 - d - s));
        // A kid under one of this node's own routes has that route as its cover, which
        // the change never owns (it is longer than the changed prefix).
        push_cover(w, level + 1, kb, change, dirty);
    }
}

/// Records `link` as the current link of node `(level, base)` (level > 0) in its
/// parent's record; returns the parent's link.
fn set_kid_link(nodes: &mut FastMap<(u8, u128), NodeRec>, level: usize, base: u128, link: u64) -> u64 {
    let pl = level - 1;
    let slot = slot_of(base, DEPTHS[pl], STRIDES[pl]);
    let p = nodes
        .get_mut(&(pl as u8, base.masked(DEPTHS[pl] as u8)))
        .expect("parent of a node");
    let at = p
        .kids
        .binary_search_by_key(&slot, |k| k.0)
        .expect("a node is its parent's kid");
    p.kids[at].1 = link;
    p.link
}

/// Encodes node `(level, base)` from its record and its children's current links into
/// `scratch.words` (its link values' positions into `scratch.links`); returns the number
/// its link carries (see [`encode`]) and its link flags.
fn encode_node(
    nodes: &FastMap<(u8, u128), NodeRec>,
    level: usize,
    base: u128,
    rec: &NodeRec,
    scratch: &mut Scratch,
) -> (usize, u64) {
    let (d, s) = (DEPTHS[level], STRIDES[level]);
    debug_assert!(rec.kids.iter().all(|&(slot, link)| {
        let kb = base | (u128::from(slot) << (128 - d - s));
        nodes[&(level as u8 + 1, kb)].link == link
    }));
    runs_of(
        d,
        s,
        rec.cover,
        rec.own.iter().map(|o| o.parts()),
        rec.kids.iter().copied(),
        &mut scratch.runs,
        &mut scratch.stack,
    );
    encode(&scratch.runs, s, &mut scratch.words, &mut scratch.links)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The SSE2 path (CPUs without AVX2) answers like the reference too; the shared
    /// tests run the AVX2 path where the CPU has it.
    #[test]
    fn the_portable_path_matches_the_reference() {
        let mut routes: Vec<(u128, u8, u32)> = Vec::new();
        let base = 0x2001_0db8u128 << 96;
        for i in 0..400u128 {
            // /48s in one /32 (a key tree), /40s, and a stride-8 node of many runs.
            routes.push((base | (i * 3) << 80, 48, i as u32));
            routes.push((base | (i % 50) << 88, 40, 1000 + i as u32));
            routes.push((0x2a00u128 << 112 | (i % 200) << 104, 24, 2000 + (i % 2) as u32));
        }
        routes.push((base | 5 << 80 | 7 << 60, 68, 77));
        routes.push((base | 5 << 80 | 7 << 60 | 9, 128, 78));
        let t = Runs6::build(&routes);
        let reference = crate::reference::NaiveLpm6::new();
        let mut reference = reference;
        for &(a, l, nh) in &routes {
            reference.insert(a, l, nh);
        }
        let mut probes: Vec<u128> = Vec::new();
        for &(a, l, _) in &routes {
            let last = a | u128::MAX.checked_shr(u32::from(l)).unwrap_or(0);
            probes.extend([a, a.wrapping_sub(1), last, last.wrapping_add(1)]);
        }
        let mut out = vec![0u32; probes.len()];
        let guard = epoch::pin();
        let first = t.first.load(&guard);
        t.lookup_batch_pinned::<false>(first, &probes, &mut out);
        for (&a, &o) in probes.iter().zip(&out) {
            let want = reference.lookup(a).unwrap_or(NONE);
            assert_eq!(o, want, "batch {:x}", a);
            assert_eq!(t.lookup_pinned::<false>(first, a), want, "single {:x}", a);
        }
    }

    /// The lines a lookup prefetches for a node hold what it reads there: the value word
    /// of a direct node's slot, the top value of a split node's high byte, the keys and
    /// first values of a keyed node.
    #[test]
    fn prefetched_lines_hold_the_words_a_lookup_reads() {
        let base = 0x2001_0db8u128 << 96;
        // A split node (bits 32..48: 400 /48s), a direct one (bits 16..24 of 2a00::/16:
        // 100 /24s), a keyed one of one line (bits 32..48 of 2a00:1450::/32: three
        // adjacent /48s to one next hop, three runs) and one of two lines (2a00:1451::/32:
        // five /48s apart, eleven runs).
        let mut routes: Vec<(u128, u8, u32)> = (0..400u128)
            .map(|i| (base | (i * 3) << 80, 48, i as u32))
            .collect();
        routes.extend((0..100u128).map(|i| (0x2a00u128 << 112 | (i * 2) << 104, 24, i as u32 % 7)));
        let keyed = 0x2a00_1450u128 << 96;
        routes.extend((1..4u128).map(|i| (keyed | i << 80, 48, 9)));
        let keyed2 = 0x2a00_1451u128 << 96;
        routes.extend((1..6u128).map(|i| (keyed2 | (i * 1000) << 80, 48, 10 + i as u32)));
        let t = Runs6::build(&routes);
        let w = t.lock();
        let line = |a: usize| a & !63;
        let split = w.nodes[&(2, base)].link;
        assert_eq!(split & (DIRECT | SPLIT), DIRECT | SPLIT);
        let direct = w.nodes[&(0, 0x2a00u128 << 112)].link;
        assert_eq!(direct & (DIRECT | SPLIT), DIRECT);
        let flat = w.nodes[&(2, keyed)].link;
        assert_eq!((flat & DIRECT, flat >> RUNS_SHIFT), (0, 2));
        let flat2 = w.nodes[&(2, keyed2)].link;
        assert_eq!((flat2 & DIRECT, flat2 >> RUNS_SHIFT), (0, 10));
        for slot in [0u32, 1, 7, 8, 255, 256, 1000, 4095, 65535] {
            if slot < 256 {
                // SAFETY: the table is live and the slot within the node's stride.
                let word = unsafe { value_word::<false>(direct, slot) } as usize;
                assert_eq!(
                    node_lines(direct, slot),
                    (line(word), line(word)),
                    "direct slot {slot}"
                );
            }
            // SAFETY: as above.
            let top = unsafe { value_word::<false>(split, slot) } as usize;
            assert_eq!(
                node_lines(split, slot),
                (line(top), line(top)),
                "split slot {slot}"
            );
            // A keyed node: its key line, and its second line only if it has one; the
            // value word read is in one of them.
            for (link, second) in [(flat, 0), (flat2, 64)] {
                let p = (link & PTR) as usize;
                assert_eq!(node_lines(link, slot), (p, p + second), "keyed slot {slot}");
                // SAFETY: as above.
                let word = unsafe { value_word::<false>(link, slot) } as usize;
                assert!(line(word) == p || line(word) == p + second, "keyed slot {slot}");
            }
        }
    }

    /// A stride-16 node of 36,000 runs (18,000 /48s, every third, in one /32) is split,
    /// and answers right before and after half of them are removed again.
    #[test]
    fn a_node_of_many_runs_is_split() {
        let base = 0x2001_0db8u128 << 96;
        let routes: Vec<(u128, u8, u32)> = (0..18_000u128)
            .map(|i| (base | (i * 3) << 80, 48, i as u32))
            .collect();
        let t = Runs6::build(&routes);
        let link = |t: &Runs6| t.lock().nodes[&(2, base)].link;
        // The /48s sit at every third slot of 0..54,000, under high bytes 0..=210, 80
        // to 86 of them each: a top of 256 values, then 211 sub-nodes of over 33 runs
        // (direct, 2 KiB each).
        assert_eq!(link(&t) & (DIRECT | SPLIT), DIRECT | SPLIT);
        assert_eq!(link_bytes(link(&t)), 2048 + 211 * 2048);
        let check = |t: &Runs6, live: &dyn Fn(usize) -> bool| {
            let mut probes = Vec::new();
            let mut want = Vec::new();
            for (i, &(a, _, nh)) in routes.iter().enumerate() {
                let hop = if live(i) { nh } else { NONE };
                probes.extend([a, a | ((1 << 80) - 1), a + (1 << 80)]);
                want.extend([hop, hop, NONE]);
            }
            let mut out = vec![0u32; probes.len()];
            t.lookup_batch(&probes, &mut out);
            for ((&a, &o), &w) in probes.iter().zip(&out).zip(&want) {
                assert_eq!(o, w, "{:x}", a);
            }
            let guard = epoch::pin();
            t.lookup_batch_pinned::<false>(t.first.load(&guard), &probes, &mut out);
            assert_eq!(out, want);
        };
        check(&t, &|_| true);
        for &(a, l, _) in routes.iter().step_by(2) {
            assert!(t.remove(a, l).is_some());
        }
        check(&t, &|i| i % 2 == 1);
        assert_eq!(link(&t) & (DIRECT | SPLIT), DIRECT | SPLIT);
    }
}
