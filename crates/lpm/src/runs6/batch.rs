//! Batch lookups, level by level over a group of 32 keys: the passes that read each
//! level's values and prefetch the next level's nodes.

use super::*;

/// The `S` bits of `key` after its first `D`, from the one 64-bit half holding them
/// when there is one.
#[inline(always)]
pub(super) fn slot_at<const D: u32, const S: u32>(key: u128) -> u32 {
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
pub(super) struct Links {
    pub(super) direct: u32,
    pub(super) keyed: u32,
}

/// One level of a batch lookup: for each key `i` of `links`, reads the value of slot
/// `slots[i]` in the node `v[i]` links, stores it in `v[i]`, and computes and
/// prefetches the key's slot (bits `ND..ND + NS`) in the node the value links, for the
/// next level. Returns the keys whose new value is again a link.
#[inline(always)]
pub(super) fn step_level<const AVX2: bool, const ND: u32, const NS: u32>(
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
pub(super) fn read_pass<
    const AVX2: bool,
    const ND: u32,
    const NS: u32,
    const TOPS: bool,
    const FIRST: bool,
>(
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
pub(super) unsafe fn link_masks_avx2(v: &[u64; 32]) -> (u32, u32) {
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
pub(super) unsafe fn answers_avx2(v: &[u64; 32], out: &mut [u32], dflt: u32) -> u32 {
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
/// to twelve runs).
#[inline(always)]
pub(super) fn prefetch_node(e: u64, slot: u32) {
    let (first, second) = node_lines(e, slot);
    prefetch(first);
    prefetch(second);
}

/// The two lines [`prefetch_node`] fetches: the line of the slot's value word in a
/// direct node (twice) or of its top value in a split one (twice); a keyed node's key
/// line, and its second line if it has one ([`TWO_LINES`]; else the key line twice).
#[inline(always)]
pub(super) fn node_lines(e: u64, slot: u32) -> (usize, usize) {
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
pub(super) fn has_avx2() -> bool {
    std::arch::is_x86_feature_detected!("avx2")
        && std::arch::is_x86_feature_detected!("bmi1")
        && std::arch::is_x86_feature_detected!("bmi2")
        && std::arch::is_x86_feature_detected!("popcnt")
}
