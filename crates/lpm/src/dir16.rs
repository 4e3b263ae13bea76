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

use crate::first::FirstLevel;
use crate::key::NONE;
use crate::key::{per_length_routes, Key, PrefixHasher, PrefixMap, ShortChange};
use crate::mem::{prefetch, HugeSlice};
use crossbeam_epoch::{self as epoch, Guard};
use std::alloc::{alloc, dealloc, handle_alloc_error, Layout};
use std::collections::HashMap;
use std::hash::BuildHasherDefault;
use std::mem::MaybeUninit;

/// A hash map with the writer's fast hasher (the std default, SipHash, made the
/// per-run dictionary probes the largest cost of a chunk rebuild).
type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<PrefixHasher>>;

fn fast_map<K, V>() -> FastMap<K, V> {
    FastMap::default()
}
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

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
/// A chunk (or kid) is `u64` words, addressed by its header `p`:
///
/// ```text
/// p[0..4]        bitmap: bit j set: a run of equal values ends at slot j (bit 255 set)
/// u32 at p+32    rank bytes: byte w = runs ending in bitmap words after w
///                (so slot j's run is number `byte[j/64] + popcnt(p[j/64] >> j%64) - 1`
///                counted from the last run)
/// p+36..         one value per run, the last run first: an index into the next-hop
///                dictionary, u8 in a
///                table with *byte values*, else u16 ([`BYTE_MARK`] or [`KID_MARK`] on
///                a slot with a kid); or a u32 next hop (or NONE)
/// ```
///
/// A table has byte values when it was built (or created empty) with at most 254
/// distinct next hops (the 1M table has 250): its 8-bit values take 1.4 MiB less than
/// 16-bit ones, and on this machine the size of the chunks decides lookup speed. A
/// chunk whose values are wider than the table's (a next hop whose index is past 254 in
/// a table with byte values, or one without an index when more than 65,533 are live)
/// starts with [`FRONT`], a one-run chunk the batch path reads as a kid mark in either
/// width, so it sends its keys to the slow path; the chunk proper follows at
/// `p + FRONT_WORDS` words (the link has [`FRONTED`] and the width of its values).
///
/// A chunk with kids (its link has [`KIDS`]) has, in front of `p`, a second bitmap
/// (slot j has a kid), the kids' rank bytes and count, and the kid links.
type ChunkPtr = *const u64;

#[inline(always)]
fn ptr_of(link: u64) -> ChunkPtr {
    (link & PTR) as ChunkPtr
}

/// The run holding slot `j` (0..=255) of the chunk or kid at `p`, counted from the
/// chunk's last run (the values are stored last run first).
///
/// # Safety
/// `p` is a live chunk and `j < 256`.
#[inline(always)]
unsafe fn slot_rank(p: ChunkPtr, j: usize) -> usize {
    let w = (j >> 6) & 3;
    // The run ends at slots j..=63 of the word: a right shift by j, which SHRX takes
    // modulo 64 as it is, where counting the slots up to j took a `63 - j` first.
    let from = (*p.add(w)).wrapping_shr(j as u32);
    // (The rank bytes are little-endian: byte w of the u32 is at p+32+w.)
    let after = *(p as *const u8).add(32 + w);
    // Bit 255 (the last run's end) is always set, so the count is at least 1.
    after as usize + from.count_ones() as usize - 1
}

/// The 16-bit dictionary index of slot `j` of the chunk or kid at `p`.
///
/// # Safety
/// `p` is a live chunk (or a front) with 16-bit values and `j < 256`.
#[inline(always)]
unsafe fn slot_index(p: ChunkPtr, j: usize) -> usize {
    usize::from(*((p as *const u8).add(VALS_AT) as *const u16).add(slot_rank(p, j)))
}

/// The 8-bit dictionary index of slot `j` of the chunk or kid at `p`.
///
/// # Safety
/// `p` is a live chunk (or a front) with 8-bit values and `j < 256`.
#[inline(always)]
unsafe fn slot_byte(p: ChunkPtr, j: usize) -> usize {
    usize::from(*(p as *const u8).add(VALS_AT + slot_rank(p, j)))
}

/// The 32-bit value (a next hop, or NONE) of slot `j` of the chunk or kid at `p`.
///
/// # Safety
/// `p` is a live chunk with 32-bit values and `j < 256`.
#[inline(always)]
unsafe fn slot_word(p: ChunkPtr, j: usize) -> u32 {
    *((p as *const u8).add(VALS_AT) as *const u32).add(slot_rank(p, j))
}

/// log2 of the bytes of a value of the chunk `link` names.
#[inline(always)]
fn width_of(link: u64) -> u32 {
    ((link >> WIDTH_SHIFT) & 3) as u32
}

/// The chunk proper of `link` (past its front, if it has one).
#[inline(always)]
fn chunk_of(link: u64) -> ChunkPtr {
    let p = ptr_of(link);
    if link & FRONTED != 0 {
        p.wrapping_add(FRONT_WORDS)
    } else {
        p
    }
}

/// The next hop (or NONE) of slot `j` of the chunk or kid `link` names.
///
/// # Safety
/// `link` names a live chunk, `j < 256`, and `dict` is the table's dictionary.
#[inline(always)]
unsafe fn link_value(link: u64, j: usize, dict: &[AtomicU32]) -> u32 {
    let p = chunk_of(link);
    let index = match width_of(link) {
        0 => slot_byte(p, j),
        1 => slot_index(p, j),
        _ => return slot_word(p, j),
    };
    dict.get_unchecked(index).load(Ordering::Relaxed)
}

/// The next hop (or NONE) of address `key` under the chunk `link` names, kids included.
///
/// # Safety
/// As for [`link_value`].
#[inline(always)]
unsafe fn chunk_lookup(link: u64, key: u32, dict: &[AtomicU32]) -> u32 {
    let j = ((key >> 8) & 0xff) as usize;
    if link & KIDS != 0 {
        let kid = kid_link(ptr_of(link), j);
        if kid != 0 {
            return link_value(kid, (key & 0xff) as usize, dict);
        }
    }
    link_value(link, j, dict)
}

/// The kid link of slot `j` of a chunk with kids, or 0 when the slot has none.
///
/// # Safety
/// `p` is a live chunk whose link carries [`KIDS`], and `j < 256`.
#[inline(always)]
unsafe fn kid_link(p: ChunkPtr, j: usize) -> u64 {
    let w = (j >> 6) & 3;
    let kw = *p.sub(KID_HDR).add(w);
    if (kw >> (j & 63)) & 1 == 0 {
        return 0;
    }
    let base = (*p.sub(1) as u32 >> (w * 8)) & 0xff;
    let rank = base as usize + (kw & ((1u64 << (j & 63)) - 1)).count_ones() as usize;
    *p.sub(KID_HDR + 1 + rank)
}

/// Prefetches the kid area of the chunk `link` names, if it has kids: the line of its
/// kid bitmap and the line of its kid rank word (the words in front of the header,
/// which pass 1 did not prefetch), so the slow path's read of the kid link waits for
/// one miss less.
///
/// (Loading the kid link here and prefetching the kid as well ran no faster: those
/// loads stall this pass as the slow path would.)
#[inline(always)]
fn prefetch_kid_area(link: u64) {
    if link & KIDS != 0 {
        let p = ptr_of(link) as usize;
        prefetch(p.wrapping_sub(8 * KID_HDR));
        prefetch(p.wrapping_sub(8));
    }
}

/// The words in front of a chunk whose values are wider than the table's: a one-run
/// chunk (bitmap: slot 255 ends the only run; rank bytes 1, 1, 1, 0) whose value, read
/// as a byte, is [`BYTE_MARK`] and, read as a u16, is [`KID_MARK`], so
/// its keys are marked for the slow path like keys on a kid slot, with no check of
/// their own in the batch path.
const FRONT: [u64; FRONT_WORDS] = [
    0,
    0,
    0,
    1 << 63,
    0x0001_0101 | (BYTE_MARK as u64) << 32 | (KID_MARK as u64) << 32,
];
const FRONT_WORDS: usize = 5;

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

/// The values of one chunk's slots, and its kids (slot, values of the /32s of that /24).
struct Image {
    vals: [u32; SLOTS],
    kids: Vec<(usize, Box<[u32; SLOTS]>)>,
}

impl Image {
    /// The slots with a kid, as a bitmap.
    fn kid_slots(&self) -> [u64; 4] {
        let mut kbm = [0u64; 4];
        for &(j, _) in &self.kids {
            kbm[j >> 6] |= 1 << (j & 63);
        }
        kbm
    }
}

/// The slot values of the chunk for routes `routes` (all longer than /16, in one /16,
/// sorted by address then length) over `cover` (the longest prefix of at most 16 bits
/// covering the /16, or NONE).
fn image(cover: u32, routes: &[Sub]) -> Image {
    let mut vals = [cover; SLOTS];
    // In address order a prefix comes after every prefix containing it, so later
    // writes are the more specific ones.
    for &Sub { low: a, len: l, nh } in routes.iter().filter(|r| r.len <= 24) {
        let s = usize::from(a >> 8);
        vals[s..s + (1usize << (24 - l))].fill(nh);
    }
    let mut kids: Vec<(usize, Box<[u32; SLOTS]>)> = Vec::new();
    for &Sub { low: a, len: l, nh } in routes.iter().filter(|r| r.len > 24) {
        let j = usize::from(a >> 8);
        if kids.last().map(|k| k.0) != Some(j) {
            kids.push((j, Box::new([vals[j]; SLOTS])));
        }
        if let Some((_, kv)) = kids.last_mut() {
            let s = (a & 0xff) as usize;
            kv[s..s + (1usize << (32 - l))].fill(nh);
        }
    }
    Image { vals, kids }
}

/// An encoded chunk (or kid): its words from its header on (from its front on, if it
/// has one), whether it has a [`FRONT`], and log2 of the bytes of a value.
struct Encoded {
    words: Vec<u64>,
    fronted: bool,
    width: u32,
}

/// The chunk (or kid) holding `vals`. Its values are dictionary indices of the table's
/// narrow width (8 bits in a table with byte values, else 16) if they fit, else 16-bit
/// indices or 32-bit next hops behind a [`FRONT`]. Slots set in the bitmap `kids` have a
/// kid: with indices they hold the width's mark ([`BYTE_MARK`], [`KID_MARK`]; a run of
/// their own, adjacent kid slots share one), with next hops their pushed value.
fn encode_runs(vals: &[u32; SLOTS], kids: &[u64; 4], dict: &Dict) -> Encoded {
    let is_kid = |s: usize| kids[s >> 6] >> (s & 63) & 1 != 0;
    let mut bm = [0u64; 4];
    let mut runs = [0u32; SLOTS];
    let mut run_kid = [false; SLOTS];
    let mut n = 0;
    // The run starts as a bitmap first, with no branch on the values, then one step per
    // run: a branch per slot on values as good as random was mispredicted at most of the
    // run starts. A slot starts a run where its value, or whether it has a kid, differs
    // from the slot before (slot 0 compares with itself, and starts one anyway).
    for (w, word) in bm.iter_mut().enumerate() {
        let mut m = 0u64;
        for i in 0..64 {
            let s = 64 * w + i;
            m |= u64::from(vals[s] != vals[s.saturating_sub(1)]) << i;
        }
        let kids_before = kids[w] << 1 | if w == 0 { kids[0] & 1 } else { kids[w - 1] >> 63 };
        *word = m | (kids[w] ^ kids_before);
    }
    bm[0] |= 1;
    for (w, &word) in bm.iter().enumerate() {
        let mut m = word;
        while m != 0 {
            let s = 64 * w + m.trailing_zeros() as usize;
            runs[n] = vals[s];
            run_kid[n] = is_kid(s);
            n += 1;
            m &= m - 1;
        }
    }
    // (Chunks of next hops need no kid runs: every key under them takes the slow path.
    // Splitting the runs anyway keeps the encodings of one image alike.)
    let runs = &runs[..n];
    let mut index = [0u16; SLOTS];
    let mut largest = 0;
    let mut hops = false;
    for (r, (&v, &kid)) in runs.iter().zip(&run_kid).enumerate() {
        if kid {
            continue;
        }
        match dict.index(v) {
            Some(i) => {
                index[r] = i;
                largest = largest.max(i);
            }
            None => {
                hops = true;
                break;
            }
        }
    }
    let narrow = dict.narrow;
    let width = match (hops, largest) {
        _ if narrow == 2 => 2,
        (true, _) => 2,
        (false, 0..=254) => narrow,
        _ => 1,
    };
    // Slot s ends a run where s + 1 starts one, and slot 255 ends the last.
    let ends = [
        bm[0] >> 1 | bm[1] << 63,
        bm[1] >> 1 | bm[2] << 63,
        bm[2] >> 1 | bm[3] << 63,
        bm[3] >> 1 | 1 << 63,
    ];
    // Header and values as bytes on the stack, then packed into words.
    // (Rounded up to whole words: the packing below reads whole words.)
    let mut bytes = [0u8; (VALS_AT + 4 * SLOTS).next_multiple_of(8)];
    for (w, b) in ends.iter().zip(bytes.chunks_exact_mut(8)) {
        b.copy_from_slice(&w.to_le_bytes());
    }
    bytes[32..36].copy_from_slice(&end_rank_bytes(&ends).to_le_bytes());
    let size = 1 << width;
    for (r, (&v, &kid)) in runs.iter().zip(&run_kid).enumerate() {
        // The last run first.
        let at = VALS_AT + (n - 1 - r) * size;
        match (width, kid) {
            (0, true) => bytes[at] = BYTE_MARK,
            (0, false) => bytes[at] = index[r] as u8,
            (1, true) => bytes[at..at + 2].copy_from_slice(&KID_MARK.to_le_bytes()),
            (1, false) => bytes[at..at + 2].copy_from_slice(&index[r].to_le_bytes()),
            (_, true) if narrow == 2 => bytes[at..at + 4].copy_from_slice(&WORD_MARK.to_le_bytes()),
            _ => bytes[at..at + 4].copy_from_slice(&v.to_le_bytes()),
        }
    }
    let end = VALS_AT + n * size;
    let fronted = width != narrow;
    let mut words = if fronted { FRONT.to_vec() } else { Vec::new() };
    words.extend(
        bytes[..end.next_multiple_of(8)]
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]])),
    );
    Encoded {
        words,
        fronted,
        width,
    }
}

/// Byte w: the bits set in the bitmap words after w (at most 192, so a byte holds it).
fn end_rank_bytes(bm: &[u64; 4]) -> u32 {
    let c2 = bm[3].count_ones();
    let c1 = c2 + bm[2].count_ones();
    let c0 = c1 + bm[1].count_ones();
    c0 | (c1 << 8) | (c2 << 16)
}

/// Byte w: the bits set in the bitmap words before w (at most 192, so a byte holds it).
fn rank_bytes(bm: &[u64; 4]) -> u32 {
    let c1 = bm[0].count_ones();
    let c2 = c1 + bm[1].count_ones();
    let c3 = c2 + bm[2].count_ones();
    (c1 << 8) | (c2 << 16) | (c3 << 24)
}

/// Words of the chunk or kid `link` names (its front, header and values).
///
/// # Safety
/// `link` names a live chunk.
unsafe fn runs_words(link: u64) -> usize {
    let p = chunk_of(link);
    let front = if link & FRONTED != 0 { FRONT_WORDS } else { 0 };
    let runs: u32 = (0..4).map(|w| (*p.add(w)).count_ones()).sum();
    front + (VALS_AT + ((runs as usize) << width_of(link))).div_ceil(8)
}

/// Number of kids of a chunk with kids.
///
/// # Safety
/// `p` is a live chunk whose link carries [`KIDS`].
unsafe fn kid_count(p: ChunkPtr) -> usize {
    (*p.sub(1) >> 32) as usize
}

/// Words in front of a heap chunk with `kids` kids (a multiple of a line, so the header
/// starts a line).
fn heap_front(kids: usize) -> usize {
    (KID_HDR + kids).next_multiple_of(8)
}

/// The words in front of a chunk's header for its kids (`links` in slot order).
fn kid_front(kids: &[(usize, Box<[u32; SLOTS]>)], links: &[u64]) -> Vec<u64> {
    let mut kbm = [0u64; 4];
    for &(j, _) in kids {
        kbm[j >> 6] |= 1 << (j & 63);
    }
    let mut v: Vec<u64> = links.iter().rev().copied().collect();
    v.extend_from_slice(&kbm);
    v.push(u64::from(rank_bytes(&kbm)) | ((kids.len() as u64) << 32));
    v
}

/// A link to the chunk or kid `e` placed at byte address `addr`.
fn tag(addr: u64, e: &Encoded, kids: bool) -> u64 {
    debug_assert!(addr >> LINES_SHIFT == 0 && addr & 7 == 0);
    let lines = ((addr as usize % 64) + e.words.len() * 8).div_ceil(64);
    let extra = (lines.min(4) - 1) as u64;
    addr | (extra << LINES_SHIFT)
        | u64::from(e.width) << WIDTH_SHIFT
        | if kids { KIDS } else { 0 }
        | if e.fronted { FRONTED } else { 0 }
}

/// Allocates `words` words aligned to a cache line.
fn alloc_words(words: usize, bytes: &AtomicUsize) -> *mut u64 {
    let layout = words_layout(words);
    // SAFETY: the layout has a non-zero size.
    let p = unsafe { alloc(layout) } as *mut u64;
    if p.is_null() {
        handle_alloc_error(layout);
    }
    bytes.fetch_add(layout.size(), Ordering::Relaxed);
    p
}

fn words_layout(words: usize) -> Layout {
    match Layout::from_size_align(words.max(1) * 8, 64) {
        Ok(l) => l,
        Err(_) => panic!("chunk of {} words is too large", words),
    }
}

/// Copies `words` into a new line-aligned heap block.
fn heap_words(words: &[u64], bytes: &AtomicUsize) -> *mut u64 {
    let p = alloc_words(words.len(), bytes);
    // SAFETY: `p` holds `words.len()` words, freshly allocated, not overlapping `words`.
    unsafe { std::ptr::copy_nonoverlapping(words.as_ptr(), p, words.len()) };
    p
}

/// Places the chunk an image describes on the heap; returns its link.
fn place_heap(img: &Image, dict: &Dict, bytes: &AtomicUsize) -> u64 {
    let main = encode_runs(&img.vals, &img.kid_slots(), dict);
    if img.kids.is_empty() {
        let p = heap_words(&main.words, bytes);
        return tag(p as u64, &main, false);
    }
    let links: Vec<u64> = img
        .kids
        .iter()
        .map(|(_, kv)| {
            let e = encode_runs(kv, &[0; 4], dict);
            tag(heap_words(&e.words, bytes) as u64, &e, false)
        })
        .collect();
    let front = kid_front(&img.kids, &links);
    let pad = heap_front(img.kids.len()) - front.len();
    let mut all = vec![0u64; pad];
    all.extend_from_slice(&front);
    all.extend_from_slice(&main.words);
    let base = heap_words(&all, bytes);
    // SAFETY: the chunk starts `pad + front.len()` words into the block just filled.
    let p = unsafe { base.add(pad + front.len()) };
    tag(p as u64, &main, true)
}

/// Frees a heap chunk (and its kids) that no reader can reach any more. (The byte count
/// is taken off when the chunk is retired, see [`heap_bytes`].)
///
/// # Safety
/// `link` names a chunk placed by [`place_heap`], unlinked, past its grace period (or
/// never shared), and freed once.
unsafe fn free_heap(link: u64) {
    let p = ptr_of(link);
    let words = runs_words(link);
    if link & KIDS == 0 {
        dealloc(p as *mut u8, words_layout(words));
        return;
    }
    let k = kid_count(p);
    for r in 0..k {
        let kid = *p.sub(KID_HDR + 1 + r);
        dealloc(ptr_of(kid) as *mut u8, words_layout(runs_words(kid)));
    }
    let front = heap_front(k);
    dealloc(p.sub(front) as *mut u8, words_layout(front + words));
}

/// Bytes a heap chunk occupies (as [`free_heap`] will release them).
///
/// # Safety
/// As for [`free_heap`]'s `link`, but the chunk may still be linked.
unsafe fn heap_bytes(link: u64) -> usize {
    let p = ptr_of(link);
    let size = |w: usize| words_layout(w).size();
    let words = runs_words(link);
    if link & KIDS == 0 {
        return size(words);
    }
    let k = kid_count(p);
    (0..k)
        .map(|r| size(runs_words(*p.sub(KID_HDR + 1 + r))))
        .sum::<usize>()
        + size(heap_front(k) + words)
}

/// Bulk-build staging: chunks packed one after another as the arena will hold them,
/// with links as offsets from the arena's start (fixed up once it is allocated).
///
/// No padding between chunks: a header may straddle two lines. Padding every header into
/// one line (chunks starting in the first 24 bytes of a line) took 0.6 MiB more of the
/// 1M table's 5.8 MiB arena and ran 8-14 % slower: on this machine the arena's size
/// decides lookup speed more than lines per lookup (see `docs/LPM.md`).
struct Staging {
    words: Vec<u64>,
    /// Word indices holding kid links (offsets to rebase).
    fixups: Vec<usize>,
}

impl Staging {
    fn runs(&mut self, vals: &[u32; SLOTS], dict: &Dict) -> u64 {
        let e = encode_runs(vals, &[0; 4], dict);
        let at = self.words.len();
        self.words.extend_from_slice(&e.words);
        tag(at as u64 * 8, &e, false)
    }

    /// Places a chunk; returns its link relative to the arena's start.
    fn place(&mut self, img: &Image, dict: &Dict) -> u64 {
        if img.kids.is_empty() {
            return self.runs(&img.vals, dict);
        }
        let links: Vec<u64> = img.kids.iter().map(|(_, kv)| self.runs(kv, dict)).collect();
        let front = kid_front(&img.kids, &links);
        let at = self.words.len();
        self.fixups.extend(at..at + links.len());
        self.words.extend_from_slice(&front);
        let main = encode_runs(&img.vals, &img.kid_slots(), dict);
        let p = self.words.len();
        self.words.extend_from_slice(&main.words);
        tag(p as u64 * 8, &main, true)
    }
}

/// A route longer than /16 in its /16's list: the address bits below the /16, the
/// length and the next hop, in 8 bytes (12 as a full `(u32, u8, u32)`). Each update of a
/// /16 searches its list and reads all of it to paint the chunk again, and with readers
/// streaming their queries those lines are cold.
#[derive(Clone, Copy, Debug)]
struct Sub {
    low: u16,
    len: u8,
    nh: u32,
}

const _: () = assert!(std::mem::size_of::<Sub>() == 8);

impl Sub {
    /// The entry of route `key/len -> nh` (`key` a full address in the list's /16).
    fn new(key: u32, len: u8, nh: u32) -> Sub {
        Sub {
            low: key as u16,
            len,
            nh,
        }
    }

    fn key(&self) -> (u16, u8) {
        (self.low, self.len)
    }
}

/// The position of the route `low`/`len` in a /16's list sorted by [`Sub::key`] (`Err`:
/// where it would go). The routes of a /16 spread over its addresses roughly evenly, so
/// the search starts where `low` would sit in an even spread and widens from there by
/// doubling steps: a couple of lines read where a binary search reads about log2(n),
/// each a cache miss when the list is cold. An uneven list costs no more probes than a
/// binary search.
fn find(list: &[Sub], low: u16, len: u8) -> Result<usize, usize> {
    let key = (low, len);
    let below = |s: &Sub| s.key() < key;
    let n = list.len();
    let guess = (usize::from(low) * n) >> 16;
    // `lo <= p <= hi` for `p`, the first route not below `key`.
    let (mut lo, mut hi) = (0, n);
    if guess < n {
        let mut step = 1;
        if below(&list[guess]) {
            lo = guess + 1;
            let mut i = guess + step;
            while i < n && below(&list[i]) {
                lo = i + 1;
                step *= 2;
                i = guess + step;
            }
            hi = i.min(n);
        } else {
            hi = guess;
            while step <= guess && !below(&list[guess - step]) {
                hi = guess - step;
                step *= 2;
            }
            lo = guess.saturating_sub(step);
        }
    }
    let p = lo + list[lo..hi].partition_point(below);
    match list.get(p) {
        Some(s) if s.key() == key => Ok(p),
        _ => Err(p),
    }
}

/// Writer-side state.
struct Writer {
    /// `short[len]` for len 0..=16: masked prefix to next hop.
    short: Vec<PrefixMap<u32>>,
    /// Per /16: the routes longer than /16 under it, sorted by address then length.
    chunks: Vec<Vec<Sub>>,
    /// Per /16: length (1..=16) of the longest prefix of at most 16 bits covering it, 0
    /// if none.
    top_len: Vec<u8>,
    /// Per /16: that prefix's next hop, NONE if none.
    top_val: Vec<u32>,
    count: usize,
    /// The shared one-run chunk of each value that some /16 without longer prefixes
    /// links (so every first-level entry is a chunk and a lookup never branches on the
    /// entry's kind).
    uniform: FastMap<u32, u64>,
    /// Uniform chunk link to (value, first-level entries linking it).
    uniform_refs: FastMap<u64, (u32, usize)>,
    dict: Dict,
    /// Live next hops whose dictionary index does not fit the table's narrow values (see
    /// [`Dir16::outgrown`]).
    misfits: usize,
}

/// The writer's side of the next-hop dictionary: chunks store 16-bit indices into
/// `Dir16::dict` instead of 32-bit next hops, which nearly halves the lines a chunk
/// spans. An index is handed out when a next hop gets its first route and taken back,
/// after an epoch grace period, when it loses its last one.
struct Dict {
    /// Next hop to (its index, if it got one; routes using it).
    map: FastMap<u32, (Option<u16>, usize)>,
    /// The indices of next hops below [`SMALL_HOPS`] again, 0 for none (index 0 is
    /// NONE's, never a hop's): the encoder asks for an index once a run, and this is
    /// one load where the map took a hash probe. The lookup elements' next hops are
    /// small numbers (ports and gateway slots), as are most tables' in practice.
    small: Box<[u16; SMALL_HOPS]>,
    /// Indices from here on were never handed out.
    next: usize,
    /// Indices free for reuse: readers that might still read the old next hop through
    /// them have unpinned.
    free: Arc<Mutex<Vec<u16>>>,
    /// log2 of the bytes of the table's narrow values (fixed when the table is made):
    /// see [`Dir16::narrow`].
    narrow: u32,
}

/// Next hops with their index in [`Dict::small`].
const SMALL_HOPS: usize = 4096;

impl Dict {
    fn new(narrow: u32) -> Dict {
        Dict {
            map: fast_map(),
            small: Box::new([0; SMALL_HOPS]),
            next: 1,
            free: Arc::new(Mutex::new(Vec::new())),
            narrow,
        }
    }

    /// The index of next hop `v` (NONE is always 0).
    fn index(&self, v: u32) -> Option<u16> {
        if v == NONE {
            return Some(0);
        }
        if let Some(&i) = self.small.get(v as usize) {
            return (i != 0).then_some(i);
        }
        self.map.get(&v).and_then(|e| e.0)
    }

    /// Records next hop `nh` with `index` and one route.
    fn add(&mut self, nh: u32, index: Option<u16>) {
        if let Some(slot) = self.small.get_mut(nh as usize) {
            *slot = index.unwrap_or(0);
        }
        self.map.insert(nh, (index, 1));
    }

    /// Forgets next hop `nh`; returns its index, if it had one.
    fn forget(&mut self, nh: u32) -> Option<Option<u16>> {
        if let Some(slot) = self.small.get_mut(nh as usize) {
            *slot = 0;
        }
        self.map.remove(&nh).map(|e| e.0)
    }

    /// Whether chunks holding a next hop with dictionary index `index` store it in the
    /// table's narrow values (else they are wider, behind a front).
    fn fits(&self, index: Option<u16>) -> bool {
        match (self.narrow, index) {
            (2, _) => true,
            (_, None) => false,
            (0, Some(i)) => i < u16::from(BYTE_MARK),
            _ => true,
        }
    }
}

impl Writer {
    /// A link to the uniform chunk of `v` (made if missing), counted as one more user.
    fn uniform_link(&mut self, v: u32, bytes: &AtomicUsize) -> u64 {
        if let Some(&link) = self.uniform.get(&v) {
            if let Some(r) = self.uniform_refs.get_mut(&link) {
                r.1 += 1;
            }
            return link;
        }
        let link = uniform_chunk(v, &self.dict, bytes);
        self.uniform.insert(v, link);
        self.uniform_refs.insert(link, (v, 1));
        link
    }

    /// Drops one first-level entry's use of the chunk `link`: a replaced chunk is
    /// retired, a uniform chunk once its last user goes.
    fn release(&mut self, link: u64, retired: &mut Vec<u64>) {
        match self.uniform_refs.get_mut(&link) {
            Some(r) => {
                r.1 -= 1;
                if r.1 == 0 {
                    let v = r.0;
                    self.uniform_refs.remove(&link);
                    self.uniform.remove(&v);
                    retired.push(link);
                }
            }
            None => retired.push(link),
        }
    }

    /// Counts one more route using next hop `nh`, giving it a dictionary index (stored
    /// before any chunk that uses it is published) if it has none and one is free.
    fn acquire_hop(&mut self, nh: u32, dict: &[AtomicU32]) {
        if let Some(e) = self.dict.map.get_mut(&nh) {
            e.1 += 1;
            return;
        }
        let recycled = self.dict.free.lock().unwrap_or_else(|p| p.into_inner()).pop();
        if self.dict.next == usize::from(BYTE_MARK) {
            // (Never handed out: it is the 8-bit kid mark.)
            self.dict.next += 1;
        }
        let index = recycled.or_else(|| {
            (self.dict.next < INDICES).then(|| {
                self.dict.next += 1;
                (self.dict.next - 1) as u16
            })
        });
        if let Some(i) = index {
            dict[usize::from(i)].store(nh, Ordering::Release);
        }
        if !self.dict.fits(index) {
            self.misfits += 1;
        }
        self.dict.add(nh, index);
    }

    /// Counts one route less using next hop `nh`; the last one's index is freed for
    /// reuse once every reader that could still read it through a replaced chunk has
    /// unpinned. (By then no published chunk holds it: the chunks that did were those
    /// the route covered, rebuilt before this call.)
    fn release_hop(&mut self, nh: u32) {
        let Some(e) = self.dict.map.get_mut(&nh) else {
            return;
        };
        e.1 -= 1;
        if e.1 > 0 {
            return;
        }
        let Some(index) = self.dict.forget(nh) else {
            return;
        };
        if !self.dict.fits(index) {
            self.misfits -= 1;
        }
        if let Some(i) = index {
            let free = self.dict.free.clone();
            epoch::pin().defer(move || free.lock().unwrap_or_else(|p| p.into_inner()).push(i));
        }
    }
}

/// A new heap chunk whose every slot is `v`.
fn uniform_chunk(v: u32, dict: &Dict, bytes: &AtomicUsize) -> u64 {
    let e = encode_runs(&[v; SLOTS], &[0; 4], dict);
    tag(heap_words(&e.words, bytes) as u64, &e, false)
}

/// The IPv4 table.
pub struct Dir16 {
    /// One link per /16, behind one pointer (see `first.rs`): a change of a prefix
    /// shorter than /16 publishes a changed copy.
    top: FirstLevel<HugeSlice<AtomicU64>>,
    /// The chunks of a bulk build, packed in one huge-page block. Chunks in it are never
    /// freed one by one: when an update replaces one, its words stay (counted in
    /// `memory_bytes`) until the table is dropped.
    arena: Option<HugeSlice<u64>>,
    /// The default route (`/0`), kept out of the chunks so changing it is one store.
    default: AtomicU32,
    /// Next hops by dictionary index (see [`Dict`]).
    dict: HugeSlice<AtomicU32>,
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

impl Drop for Dir16 {
    fn drop(&mut self) {
        let w = self.writer.get_mut().unwrap_or_else(|p| p.into_inner());
        for e in self.top.get_mut().iter() {
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
    top: &'g [AtomicU64],
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
            top: FirstLevel::new(HugeSlice::new(TOP, |_| AtomicU64::new(none))),
            arena: None,
            default: AtomicU32::new(NONE),
            // (The entries of the marks are read by the batch path for keys it redoes,
            // and never answered.)
            dict: HugeSlice::new(DICT, |_| AtomicU32::new(NONE)),
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
    unsafe fn lookup_popcnt(&self, top: &[AtomicU64], key: u32) -> u32 {
        self.lookup_pinned(top, key)
    }

    /// Callers hold an epoch guard, under which they loaded `top`.
    #[inline(always)]
    fn lookup_pinned(&self, top: &[AtomicU64], key: u32) -> u32 {
        let e = top[(key >> TOP_BITS) as usize].load(Ordering::Acquire);
        // SAFETY: every first-level entry links a published chunk, which stays allocated
        // while the caller's guard is pinned (it is freed only through the epoch
        // collector after being unlinked); its kids live as long as it does.
        let r = unsafe { chunk_lookup(e, key, &self.dict) };
        or_default(r, self.default.load(Ordering::Acquire))
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
        // (One first level for the whole call: a change published meanwhile shows in
        // all of its answers or in none.)
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
    unsafe fn lookup_batch_popcnt(&self, top: &[AtomicU64], keys: &[u32], out: &mut [u32]) {
        self.lookup_batch_pinned(top, keys, out)
    }

    /// Callers hold an epoch guard. Byte values (tables of at most 254 next hops) take a
    /// loop inlined here; wider ones a call, so that a caller into which this is
    /// inlined holds one width's loop, not three.
    #[inline(always)]
    fn lookup_batch_pinned(&self, top: &[AtomicU64], keys: &[u32], out: &mut [u32]) {
        if self.narrow == 0 {
            self.lookup_groups::<0>(top, keys, out);
        } else {
            self.lookup_batch_wide(top, keys, out);
        }
    }

    /// [`Self::lookup_batch_pinned`] for tables of 16- and 32-bit values.
    #[inline(never)]
    fn lookup_batch_wide(&self, top: &[AtomicU64], keys: &[u32], out: &mut [u32]) {
        if self.narrow == 1 {
            self.lookup_groups::<1>(top, keys, out);
        } else {
            self.lookup_groups::<2>(top, keys, out);
        }
    }

    /// The groups of `keys` in a table whose narrow values are `1 << W` bytes.
    #[inline(always)]
    fn lookup_groups<const W: u32>(&self, top: &[AtomicU64], keys: &[u32], out: &mut [u32]) {
        const CHUNK: usize = 32;
        let dflt = self.default.load(Ordering::Acquire);
        let out = &mut out[..keys.len()];
        let mut ks = keys.chunks_exact(CHUNK);
        let mut os = out.chunks_exact_mut(CHUNK);
        // Whole groups have a length the compiler knows, so it unrolls their loops.
        for (k, o) in (&mut ks).zip(&mut os) {
            self.lookup_group::<W>(top, k, o, dflt);
        }
        if !ks.remainder().is_empty() {
            self.lookup_group::<W>(top, ks.remainder(), os.into_remainder(), dflt);
        }
    }

    /// One group of up to 32 keys, in a table whose narrow values are `1 << W` bytes.
    #[inline(always)]
    fn lookup_group<const W: u32>(&self, top: &[AtomicU64], keys: &[u32], out: &mut [u32], dflt: u32) {
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
            // The header's line and the chunk's last line (the header is within its
            // line, so `chunk + 64 * extra` is in the last one).
            prefetch(chunk as usize);
            prefetch(chunk as usize + ((e >> (LINES_SHIFT - 6)) & 0xc0) as usize);
            // (`& 31` only tells the compiler the index fits the array.)
            ptrs[i & 31].write(chunk);
        });
        let dict: &[AtomicU32] = &self.dict;
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
            // SAFETY: a 16-bit value is below 2^16, the dictionary's length (for a mark
            // the entry read is meaningless, and the answer is redone below).
            let v = if W == 2 {
                // (No dictionary entry 0 to hold the default route here.)
                or_default(x as u32, dflt)
            } else {
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
        let prev = if u32::from(len) <= TOP_BITS {
            w.short[len as usize].insert(key, nh)
        } else {
            let list = &mut w.chunks[(key >> TOP_BITS) as usize];
            match find(list, key as u16, len) {
                Ok(i) => Some(std::mem::replace(&mut list[i].nh, nh)),
                Err(i) => {
                    list.insert(i, Sub::new(key, len, nh));
                    None
                }
            }
        };
        if prev.is_none() {
            w.count += 1;
        }
        if prev != Some(nh) {
            w.acquire_hop(nh, &self.dict);
            self.apply(&mut w, key, len, Some(nh));
            if let Some(old) = prev {
                w.release_hop(old);
            }
        }
        prev
    }

    /// Removes `key/len`; returns its next hop.
    pub fn remove(&self, key: u32, len: u8) -> Option<u32> {
        let key = key.masked(len);
        let mut w = self.lock();
        let old = if u32::from(len) <= TOP_BITS {
            w.short[len as usize].remove(&key)?
        } else {
            let list = &mut w.chunks[(key >> TOP_BITS) as usize];
            let i = find(list, key as u16, len).ok()?;
            list.remove(i).nh
        };
        w.count -= 1;
        self.apply(&mut w, key, len, None);
        w.release_hop(old);
        Some(old)
    }

    /// Brings the lookup structure in line with the writer's record after `key/len` was
    /// set to `nh` (`None`: removed).
    fn apply(&self, w: &mut Writer, key: u32, len: u8, nh: Option<u32>) {
        let guard = epoch::pin();
        let mut retired: Vec<u64> = Vec::new();
        if len == 0 {
            let v = nh.unwrap_or(NONE);
            self.default.store(v, Ordering::Release);
            self.dict[0].store(v, Ordering::Release);
        } else if u32::from(len) <= TOP_BITS {
            let span = 1usize << (TOP_BITS - u32::from(len));
            let start = (key >> TOP_BITS) as usize;
            let change = ShortChange::new(&w.short, key, len, nh, NONE, 0);
            let (set_len, set_val) = (change.set_len, change.set_val);
            let mut changed = Vec::new();
            for i in start..start + span {
                if change.owns(w.top_len[i]) {
                    w.top_len[i] = set_len;
                    if w.top_val[i] != set_val {
                        w.top_val[i] = set_val;
                        changed.push(i);
                    }
                }
            }
            let top = self.top.load(&guard);
            if let [c] = changed[..] {
                self.rebuild(w, top, c, &mut retired);
            } else if !changed.is_empty() {
                // Many /16s change: their chunks go into a copy of the first level,
                // which one store publishes, so readers see all of them or none.
                let copy = self.top.copy(&guard);
                for c in changed {
                    self.rebuild(w, &copy, c, &mut retired);
                }
                self.top.replace(copy, &guard);
            }
        } else {
            self.rebuild(w, self.top.load(&guard), (key >> TOP_BITS) as usize, &mut retired);
        }
        self.retire(retired, &guard);
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
        // (Field by field: the writer record is borrowed while the others are set.)
        let w = t.writer.get_mut().unwrap_or_else(|p| p.into_inner());
        let top = t.top.get_mut();
        for (i, &(k, l, nh)) in v.iter().enumerate() {
            // Of equal prefixes (adjacent after the sort) only the last counts.
            if v.get(i + 1).is_some_and(|n| (n.0, n.1) == (k, l)) {
                continue;
            }
            w.count += 1;
            w.acquire_hop(nh, &t.dict);
            if u32::from(l) > TOP_BITS {
                w.chunks[(k >> TOP_BITS) as usize].push(Sub::new(k, l, nh));
                continue;
            }
            w.short[l as usize].insert(k, nh);
            if l == 0 {
                *t.default.get_mut() = nh;
                t.dict[0].store(nh, Ordering::Relaxed);
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
        // (Nothing is shared yet, so replaced uniform chunks are freed at once.)
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
        self.top.load(&epoch::pin())[c].load(Ordering::Relaxed)
    }

    /// How many first-level entries link a chunk behind a front.
    #[cfg(test)]
    pub fn fronted_chunks(&self) -> usize {
        self.top
            .load(&epoch::pin())
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

    /// Removes every route: the default route with one store, then the others with one
    /// store of a first level whose every entry links the no-route chunk; the chunks
    /// are retired.
    pub fn clear(&self) {
        let mut w = self.lock();
        let guard = epoch::pin();
        self.default.store(NONE, Ordering::Release);
        self.dict[0].store(NONE, Ordering::Release);
        let mut retired = Vec::new();
        let empty = Box::new(HugeSlice::new(TOP, |_| {
            AtomicU64::new(w.uniform_link(NONE, &self.heap_bytes))
        }));
        let old = self.top.load(&guard);
        self.top.replace(empty, &guard);
        for (i, e) in old.iter().enumerate() {
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
            + self.dict.bytes()
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
mod tests {
    use super::*;

    fn ip(a: u8, b: u8, c: u8, d: u8) -> u32 {
        u32::from_be_bytes([a, b, c, d])
    }

    /// A reader holding a guard across an update sees the new answer at once, and the
    /// chunk the update replaced is freed only once that reader has repinned.
    #[test]
    fn replaced_chunks_are_freed_only_after_a_held_guard_repins() {
        let t = Dir16::new();
        t.insert(ip(10, 1, 2, 0), 24, 1);
        let mut guard = crate::pin();
        let mut out = [0u32; 3];
        let keys = [ip(10, 1, 2, 9), ip(10, 1, 3, 9), ip(10, 1, 4, 9)];
        t.lookup_batch_in(&guard.0, &keys, &mut out);
        assert_eq!(out, [1, NONE, NONE]);
        // Replaces the chunk of 10.1/16 (three runs: slots 0..=1, 2, 3..=255; a 36-byte
        // header and three byte values, 40 bytes in whole words).
        t.insert(ip(10, 1, 3, 0), 24, 2);
        assert_eq!(t.pending_free.load(Ordering::Relaxed), 40);
        t.lookup_batch_in(&guard.0, &keys, &mut out);
        assert_eq!(out, [1, 2, NONE]);
        assert_eq!(t.lookup_in(&guard.0, ip(10, 1, 3, 200)), 2);
        // However often the collector runs, the held guard keeps the old chunk.
        for _ in 0..1000 {
            epoch::pin().flush();
        }
        assert_eq!(t.pending_free.load(Ordering::Relaxed), 40);
        // A reader that repins lets it go (other tests' threads pin too, so the epoch
        // may need a few rounds to advance).
        let mut rounds = 0;
        while t.pending_free.load(Ordering::Relaxed) != 0 {
            rounds += 1;
            assert!(rounds < 1_000_000, "the replaced chunk was never freed");
            guard.repin();
            epoch::pin().flush();
            std::thread::yield_now();
        }
        t.lookup_batch_in(&guard.0, &keys, &mut out);
        assert_eq!(out, [1, 2, NONE]);
    }

    /// A first level replaced by a changed copy (a /12 spans sixteen /16s) is written
    /// over by a later copy only after the readers that may hold it have unpinned.
    #[test]
    fn a_replaced_first_level_is_not_reused_while_a_guard_holds_it() {
        let t = Dir16::new();
        t.insert(ip(10, 0, 0, 0), 12, 1);
        let guard = epoch::pin();
        let held = t.top.load(&guard);
        let before: Vec<u64> = held.iter().map(|e| e.load(Ordering::Relaxed)).collect();
        for nh in 2..100 {
            t.insert(ip(10, 0, 0, 0), 12, nh);
            // (The collector runs, as other threads' pins make it.)
            epoch::pin().flush();
        }
        assert!(held.iter().map(|e| e.load(Ordering::Relaxed)).eq(before));
        assert_eq!(t.lookup_in(&guard, ip(10, 15, 1, 1)), 99);
        // The answers through the held copy are those from when it was loaded.
        assert_eq!(t.lookup_pinned(held, ip(10, 15, 1, 1)), 1);
    }

    /// Each `(address, next hop)` probe answers the same through a batch lookup of all
    /// of them and through a single lookup.
    fn assert_probes(t: &Dir16, probes: &[(u32, u32)]) {
        let keys: Vec<u32> = probes.iter().map(|p| p.0).collect();
        let mut out = vec![0u32; keys.len()];
        t.lookup_batch(&keys, &mut out);
        for (&(a, want), &got) in probes.iter().zip(&out) {
            assert_eq!(got, want, "batch {:08x}", a);
            assert_eq!(t.lookup(a), want, "single {:08x}", a);
        }
    }

    /// A dictionary of a table with 16-bit values knowing `hops` (next hop, index);
    /// other hops have no index.
    fn dict_with(hops: &[(u32, u16)]) -> Dict {
        let mut d = Dict::new(1);
        for &(nh, i) in hops {
            d.add(nh, Some(i));
        }
        d
    }

    #[test]
    fn small_hops_get_the_index_the_map_holds_through_their_lives() {
        let mut d = Dict::new(1);
        let last_small = SMALL_HOPS as u32 - 1;
        for (nh, i) in [
            (7, 3),
            (0, 9),
            (last_small, 4),
            (SMALL_HOPS as u32, 5),
            (1_000_000, 6),
        ] {
            d.add(nh, Some(i));
            assert_eq!(d.index(nh), Some(i), "hop {}", nh);
        }
        assert_eq!(d.index(8), None);
        // Forgotten, then back without an index (none was free): not the old one,
        // which another hop may hold by then.
        assert_eq!(d.forget(7), Some(Some(3)));
        assert_eq!(d.index(7), None);
        d.add(7, None);
        assert_eq!(d.index(7), None);
        d.add(last_small, None);
        assert_eq!(d.index(last_small), None);
        assert_eq!(d.index(NONE), Some(0));
    }

    #[test]
    fn find_agrees_with_a_binary_search_on_even_and_uneven_lists() {
        // Lists of every shape the guess can miss by: empty, one route, routes packed
        // at either end of the /16 or spread over it, each prefix with several lengths.
        let mut rng = crate::tests::Rng(0x9e37_79b9_7f4a_7c15);
        let mut rand = move || u64::from(rng.next());
        for case in 0..400 {
            let n = [0, 1, 2, 3, 17, 256, 1000][case % 7];
            let span = [1u64, 16, 256, 4096, 65536][case / 7 % 5];
            let base = [0u64, 65536 - span][case / 35 % 2];
            let mut keys: Vec<(u16, u8)> = (0..n)
                .map(|_| ((base + rand() % span) as u16, 17 + (rand() % 16) as u8))
                .collect();
            keys.sort_unstable();
            keys.dedup();
            let list: Vec<Sub> = keys.iter().map(|&(low, len)| Sub { low, len, nh: 7 }).collect();
            let mut probes = keys.clone();
            probes.extend((0..64).map(|_| (rand() as u16, 17 + (rand() % 16) as u8)));
            probes.extend([(0, 17), (0, 32), (u16::MAX, 17), (u16::MAX, 32)]);
            for (low, len) in probes {
                assert_eq!(
                    find(&list, low, len),
                    keys.binary_search(&(low, len)),
                    "list of {} routes over {span} addresses from {base}, probe {low}/{len}",
                    keys.len()
                );
            }
        }
    }

    #[test]
    fn kid_slots_get_runs_of_their_own_holding_the_mark() {
        // Slots 0..=99 hold 7 (index 1), 100..=255 hold 8 (index 2); kids under slots
        // 0, 1, 100 and 255. Runs: [0, 1] mark, [2, 99] 7, [100] mark, [101, 254] 8,
        // [255] mark.
        let dict = dict_with(&[(7, 1), (8, 2)]);
        let mut vals = [8u32; SLOTS];
        vals[..100].fill(7);
        let kids = [0b11, 1 << 36, 0, 1 << 63];
        let e = encode_runs(&vals, &kids, &dict);
        assert_eq!((e.fronted, e.width), (false, 1));
        let words = e.words;
        let m = u64::from(KID_MARK);
        assert_eq!(
            words,
            [
                // Runs end at slots 1, 99, 100, 254 and 255.
                0b10,
                (1 << 35) | (1 << 36),
                0,
                (1 << 62) | (1 << 63),
                // Rank bytes (ends after each word) 4, 2, 2, 0, then the values, last run
                // first: mark, 2,
                0x0002_0204 | (m << 32) | (2 << 48),
                // mark, 1, mark (and padding).
                m | (1 << 16) | (m << 32),
            ]
        );
        let want = |j: usize| match j {
            0 | 1 | 100 | 255 => usize::from(KID_MARK),
            2..=99 => 1,
            _ => 2,
        };
        for j in 0..SLOTS {
            // SAFETY: `words` is the chunk just encoded, and `j < 256`.
            assert_eq!(unsafe { slot_index(words.as_ptr(), j) }, want(j), "slot {}", j);
        }
    }

    #[test]
    fn byte_values_hold_indices_below_255_and_mark_kid_slots_with_ff() {
        // As above in a table with byte values: runs [0, 1] mark, [2, 99] 7 (index 1),
        // [100] mark, [101, 254] 8 (index 254), [255] mark.
        let mut dict = dict_with(&[(7, 1), (8, 254)]);
        dict.narrow = 0;
        let mut vals = [8u32; SLOTS];
        vals[..100].fill(7);
        let kids = [0b11, 1 << 36, 0, 1 << 63];
        let e = encode_runs(&vals, &kids, &dict);
        assert_eq!((e.fronted, e.width), (false, 0));
        assert_eq!(
            e.words,
            [
                0b10,
                (1 << 35) | (1 << 36),
                0,
                (1 << 62) | (1 << 63),
                // Rank bytes 4, 2, 2, 0, then the values, last run first: ff, 254 (0xfe),
                // ff, 1,
                0x0002_0204 | (0x01_ff_fe_ff << 32),
                // ff (and padding).
                0xff,
            ]
        );
        let want = |j: usize| match j {
            0 | 1 | 100 | 255 => 0xff,
            2..=99 => 1,
            _ => 254,
        };
        for j in 0..SLOTS {
            // SAFETY: `e.words` is the chunk just encoded, and `j < 256`.
            assert_eq!(unsafe { slot_byte(e.words.as_ptr(), j) }, want(j), "slot {}", j);
        }
        // An index of 255 or more: 16-bit values behind a front.
        let mut dict = dict_with(&[(7, 1), (8, 256)]);
        dict.narrow = 0;
        let e = encode_runs(&vals, &[0; 4], &dict);
        assert_eq!((e.fronted, e.width), (true, 1));
        assert_eq!(e.words[..FRONT_WORDS], FRONT);
        // Runs [0, 99] 7, [100, 255] 8 (rank bytes 2, 1, 1, 0): two u16 values after the
        // header, the last run first.
        assert_eq!(e.words[FRONT_WORDS + 4], 0x0001_0102 | (256 << 32) | (1 << 48));
        let link = tag(e.words.as_ptr() as u64, &e, false);
        // SAFETY: `link` names the chunk in `e.words`, which outlives these reads.
        assert_eq!(unsafe { runs_words(link) }, e.words.len());
        for j in 0..SLOTS {
            // SAFETY: as above, and `j < 256`.
            let (b, x, i) = unsafe {
                (
                    slot_byte(ptr_of(link), j),
                    slot_index(ptr_of(link), j),
                    slot_index(chunk_of(link), j),
                )
            };
            // The front reads as a mark in both widths.
            assert_eq!((b, x >> 15), (0xff, 1), "slot {}", j);
            assert_eq!(i, if j < 100 { 1 } else { 256 }, "slot {}", j);
        }
    }

    #[test]
    fn wide_chunks_start_with_a_front_that_marks_every_slot() {
        // 5 has an index, 1_000_000 has none: the chunk is wide.
        let dict = dict_with(&[(5, 3)]);
        let mut vals = [5u32; SLOTS];
        vals[64..=130].fill(1_000_000);
        vals[255] = NONE;
        let e = encode_runs(&vals, &[0; 4], &dict);
        assert_eq!((e.fronted, e.width), (true, 2));
        assert_eq!(e.words[..FRONT_WORDS], FRONT);
        // Header (5 words), then the four u32 values 5, 1_000_000, 5, NONE.
        assert_eq!(e.words.len(), FRONT_WORDS + 7);
        let link = tag(e.words.as_ptr() as u64, &e, false);
        // SAFETY: `link` names the chunk in `e.words`, which outlives these reads.
        assert_eq!(unsafe { runs_words(link) }, e.words.len());
        let dict_entries: Vec<AtomicU32> = (0..DICT).map(|_| AtomicU32::new(NONE)).collect();
        for j in 0..SLOTS {
            // SAFETY: as above, and `j < 256`.
            let (x, v) = unsafe {
                (
                    slot_index(e.words.as_ptr(), j),
                    link_value(link, j, &dict_entries),
                )
            };
            assert_eq!(x >> 15, 1, "slot {}", j);
            let want = match j {
                64..=130 => 1_000_000,
                255 => NONE,
                _ => 5,
            };
            assert_eq!(v, want, "slot {}", j);
        }
    }

    #[test]
    fn tables_with_more_than_254_next_hops_answer_through_fronted_chunks() {
        // 300 /24s under 30.0.0.0/15 with distinct next hops (30.1 holds the last 44), and
        // 30.2.0.0/16 with ten /20s of hops seen first (indices 1..=10).
        let mut routes: Vec<(u32, u8, u32)> =
            (0..10).map(|i| (0x1e02_0000 + (i << 12), 20, 100 + i)).collect();
        routes.extend((0..300).map(|i| (0x1e00_0000 + (i << 8), 24, 1000 + i)));
        routes.push((0x1e00_0105, 32, 7));
        let grown = Dir16::new();
        for &(a, l, nh) in &routes {
            grown.insert(a, l, nh);
        }
        let built = Dir16::build(&routes);
        assert_eq!(grown.narrow, 0);
        assert_eq!(built.narrow, 1);
        let link = |t: &Dir16, c: usize| {
            let e = t.link(c);
            (e & FRONTED != 0, width_of(e))
        };
        // 8-bit values where every index is below 255, 16-bit behind a front elsewhere.
        assert_eq!(link(&grown, 0x1e02), (false, 0));
        assert_eq!(link(&grown, 0x1e00), (true, 1));
        assert_eq!(link(&grown, 0x1e01), (true, 1));
        assert_eq!(link(&built, 0x1e00), (false, 1));
        let mut probes: Vec<(u32, u32)> = (0..300).map(|i| (0x1e00_0000 + (i << 8) + 9, 1000 + i)).collect();
        probes.extend((0..10).map(|i| (0x1e02_0000 + (i << 12) + 0x0fff, 100 + i)));
        probes.extend([
            (0x1e00_0105, 7),
            (0x1e00_0106, 1001),
            (0x1e02_a000, NONE),
            (0x1e01_2c00, NONE),
        ]);
        for t in [&grown, &built] {
            assert_probes(t, &probes);
        }
    }

    #[test]
    fn a_table_is_outgrown_while_a_live_hop_has_no_index_of_its_width() {
        let t = Dir16::new();
        // Hops 1..=254 take the byte indices 1..=254.
        for i in 0..254u32 {
            t.insert(0x3200_0000 + (i << 8), 24, 500 + i);
        }
        assert!(!t.outgrown());
        // The 255th (index 256), on two routes: outgrown until both are gone.
        t.insert(0x3300_0000, 24, 9_000);
        t.insert(0x3300_0100, 24, 9_000);
        assert!(t.outgrown());
        t.remove(0x3300_0000, 24);
        assert!(t.outgrown());
        t.remove(0x3300_0100, 24);
        assert!(!t.outgrown());
        // Replacing a hop that fits by one that does not (hop 500's index is free again
        // only after a grace period), then that one by a hop with a byte index.
        t.insert(0x3200_0000, 24, 9_001);
        assert!(t.outgrown());
        t.insert(0x3200_0000, 24, 501);
        assert!(!t.outgrown());
        t.insert(0x3300_0000, 24, 9_002);
        t.clear();
        assert!(!t.outgrown());
        // Tables of 32-bit next hops are never outgrown.
        let wide = Dir16::build_at_least(&[(0x3200_0000, 24, 1)], 2);
        assert_eq!(wide.value_log2(), 2);
        for i in 0..70_000u32 {
            wide.insert(0x4000_0000 + (i << 8), 24, 10_000 + i);
        }
        assert!(!wide.outgrown());
        assert_eq!(wide.lookup(0x4000_0000 + (69_999 << 8)), 79_999);
    }

    #[test]
    fn wide_chunks_with_narrow_and_wide_kids_answer_batches() {
        // 66,000 /24s from 20.0.0.0 with distinct next hops use up the 65,533 dictionary
        // indices (1..=65,534 but 255), so the /16s holding the later ones (20.255, 21.0)
        // are wide (20.255.253.0/24 is the 65,534th). Under 20.255.0.0/24 (whose hop has
        // an index) a /32 to a hop with an index: a narrow kid; under 21.0.9.0/24 a /25
        // to a new hop: a wide kid.
        let hop = |i: u32| 1_000_000 + i;
        let mut routes: Vec<(u32, u8, u32)> = (0..66_000)
            .map(|i| (0x1400_0000 + (i << 8), 24, hop(i)))
            .collect();
        routes.push((0x14ff_0007, 32, hop(0)));
        routes.push((0x1500_0900, 25, 2));
        let grown = Dir16::new();
        for &(a, l, nh) in &routes {
            grown.insert(a, l, nh);
        }
        let built = Dir16::build(&routes);
        let at = |i: u32, host: u32| 0x1400_0000 + (i << 8) + host;
        let probes = [
            (at(3, 3), hop(3)),
            (at(65_532, 1), hop(65_532)),
            (at(65_533, 1), hop(65_533)),
            (0x14ff_0007, hop(0)),
            (0x14ff_0008, hop(65_280)),
            (0x1500_0507, hop(65_541)),
            (0x1500_0901, 2),
            (0x1500_09c8, hop(65_545)),
            (at(65_999, 255), hop(65_999)),
            (at(66_000, 0), NONE),
        ];
        // The same routes inserted into a table with 16-bit values.
        let grown16 = Dir16::with_values(1);
        for &(a, l, nh) in &routes {
            grown16.insert(a, l, nh);
        }
        let link = |t: &Dir16, c: usize| t.link(c);
        for t in [&grown, &grown16] {
            let (e127, e128) = (link(t, 0x14ff), link(t, 0x1500));
            assert_eq!(
                (e127 & (FRONTED | KIDS), e128 & (FRONTED | KIDS)),
                (FRONTED | KIDS, FRONTED | KIDS)
            );
            assert_eq!((width_of(e127), width_of(e128)), (2, 2));
            // Hops past the 32,768th still have 16-bit indices: 20.128's chunk holds
            // 16-bit values (behind a front only in the table with byte values).
            assert_eq!(width_of(link(t, 0x1480)), 1);
            // SAFETY: both link live chunks with kids; slots 0 and 9 are below 256.
            let (narrow_kid, wide_kid) = unsafe { (kid_link(ptr_of(e127), 0), kid_link(ptr_of(e128), 9)) };
            assert_eq!((width_of(narrow_kid), width_of(wide_kid)), (1, 2));
        }
        assert_eq!(link(&grown16, 0x1480) & FRONTED, 0);
        // Built with 66,002 next hops, the table holds the next hops themselves: no
        // fronts, 32-bit values everywhere, kids included.
        assert_eq!(built.narrow, 2);
        for c in [0x1400, 0x1480, 0x14ff, 0x1500] {
            assert_eq!(
                (link(&built, c) & FRONTED, width_of(link(&built, c))),
                (0, 2),
                "{:#x}",
                c
            );
        }
        // SAFETY: 20.255's chunk has a kid at slot 0.
        assert_eq!(width_of(unsafe { kid_link(ptr_of(link(&built, 0x14ff)), 0) }), 2);
        for t in [&grown, &grown16, &built] {
            assert_probes(t, &probes);
        }
    }

    #[test]
    fn full_groups_with_many_kid_and_fronted_keys_answer_each_key() {
        // 10.1/16: /24 runs with kids at slots 2 (a /25), 7 (a /30 over the cover) and
        // 255 (a /32); 10.21/16: /24s whose next hops have indices past 254, so in a
        // table with byte values that chunk is behind a front.
        let routes: Vec<(u32, u8, u32)> = [
            (ip(10, 1, 0, 0), 16, 1),
            (ip(10, 1, 2, 0), 24, 2),
            (ip(10, 1, 2, 128), 25, 3),
            (ip(10, 1, 7, 0), 30, 4),
            (ip(10, 1, 255, 255), 32, 5),
        ]
        .into_iter()
        .chain((0..300u32).map(|x| (ip(10, 20 + (x / 256) as u8, (x % 256) as u8, 0), 24, 1000 + x)))
        .collect();
        let probes: [(u32, u32); 10] = [
            (ip(10, 1, 2, 200), 3),
            (ip(10, 1, 2, 5), 2),
            (ip(10, 1, 7, 2), 4),
            (ip(10, 1, 7, 9), 1),
            (ip(10, 1, 255, 255), 5),
            (ip(10, 1, 255, 254), 1),
            (ip(10, 21, 0, 9), 1256),
            (ip(10, 21, 43, 1), 1299),
            (ip(10, 20, 17, 3), 1017),
            (ip(11, 0, 0, 1), NONE),
        ];
        // Runs of kid and fronted keys, at both ends of the group.
        let order = [
            0, 2, 4, 6, 1, 3, 5, 7, 8, 9, 0, 0, 2, 2, 4, 4, 6, 7, 6, 7, 1, 9, 8, 3, 5, 0, 2, 4, 6, 7, 2, 4,
        ];
        let keys: Vec<u32> = order.iter().map(|&o| probes[o].0).collect();
        let want: Vec<u32> = order.iter().map(|&o| probes[o].1).collect();
        let byte_table = Dir16::new();
        let wide_table = Dir16::with_values(1);
        for t in [&byte_table, &wide_table] {
            for &(a, l, nh) in &routes {
                t.insert(a, l, nh);
            }
        }
        for t in [&byte_table, &wide_table, &Dir16::build(&routes)] {
            let mut out = vec![0u32; 32];
            t.lookup_batch(&keys, &mut out);
            assert_eq!(out, want);
            // And in a shorter group.
            t.lookup_batch(&keys[..7], &mut out[..7]);
            assert_eq!(out[..7], want[..7]);
        }
        // The byte table's 10.21/16 is fronted; the bulk-built one has 16-bit values.
        let fronted = byte_table.link(ip(10, 21, 0, 0) as usize >> 16);
        assert_ne!(fronted & FRONTED, 0);
        assert_eq!(Dir16::build(&routes).narrow, 1);
    }

    #[test]
    fn keys_whose_next_hop_is_the_largest_get_it() {
        // The largest next hop (`u32::MAX - 1`, which earlier versions used as the
        // batch's redo marker) as an ordinary next hop, as the default route and under
        // a kid.
        const SENTINEL: u32 = u32::MAX - 1;
        let t = Dir16::new();
        t.insert(0x0a01_0100, 24, SENTINEL);
        t.insert(0x0a01_0204, 30, SENTINEL);
        t.insert(0x0a01_0200, 24, 3);
        let keys = [0x0a01_0101, 0x0a01_0205, 0x0a01_0209, 0x0a01_0001, 0x0b00_0000];
        let mut out = [0u32; 5];
        t.lookup_batch(&keys, &mut out);
        assert_eq!(out, [SENTINEL, SENTINEL, 3, NONE, NONE]);
        t.insert(0, 0, SENTINEL);
        t.lookup_batch(&keys, &mut out);
        assert_eq!(out, [SENTINEL, SENTINEL, 3, SENTINEL, SENTINEL]);
    }

    #[test]
    fn batch_answers_follow_default_route_changes_in_chunks_and_kids() {
        // 10.1.0.0/16 is a chunk with routes, NONE slots and a kid (10.1.2.0/24 has a
        // /30 under it); 10.2.0.0/16 is uniform NONE.
        let t = Dir16::new();
        t.insert(0x0a01_0100, 24, 4);
        t.insert(0x0a01_0204, 30, 5);
        let keys = [0x0a01_0101, 0x0a01_0001, 0x0a01_0205, 0x0a01_0209, 0x0a02_0000];
        let batch = |t: &Dir16| {
            let mut out = [0u32; 5];
            t.lookup_batch(&keys, &mut out);
            out
        };
        assert_eq!(batch(&t), [4, NONE, 5, NONE, NONE]);
        t.insert(0, 0, 9);
        assert_eq!(batch(&t), [4, 9, 5, 9, 9]);
        t.insert(0, 0, 11);
        assert_eq!(batch(&t), [4, 11, 5, 11, 11]);
        let built = Dir16::build(&t.routes());
        assert_eq!(batch(&built), [4, 11, 5, 11, 11]);
        t.remove(0, 0);
        assert_eq!(batch(&t), [4, NONE, 5, NONE, NONE]);
        built.clear();
        assert_eq!(batch(&built), [NONE; 5]);
    }
}
