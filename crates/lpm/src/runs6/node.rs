//! The node format and its reading: leaves and links, keyed nodes searched with AVX2
//! or SSE2 compares, direct and split nodes.

use super::*;

#[inline(always)]
pub(super) const fn leaf(v: u32) -> u64 {
    ((v as u64) << 32) | LEAF
}

/// The level index of the node whose stride holds prefix length `len` (> 16).
pub(super) fn owner_level(len: u8) -> usize {
    let len = u32::from(len);
    DEPTHS
        .iter()
        .zip(STRIDES)
        .position(|(&d, s)| d < len && len <= d + s)
        .unwrap_or(DEPTHS.len() - 1)
}

/// The `stride` bits of `key` after its first `depth` bits.
#[inline(always)]
pub(super) fn slot_of(key: u128, depth: u32, stride: u32) -> u32 {
    ((key << depth) >> (128 - stride)) as u32
}

/// A key as stored: `slot - 1` with the top bit flipped, so that a signed 16-bit
/// comparison `query > stored` means `slot <= query` for unsigned slots.
pub(super) fn stored_key(slot: u32) -> u16 {
    ((slot - 1) as u16) ^ 0x8000
}

/// Byte offset of the values of a keyed node with `n` (at most [`FLAT`]) runs.
#[inline(always)]
pub(super) fn values_at(n: usize) -> usize {
    // `(n - 1).div_ceil(8) * 16`, from the `2 * (n - 1)` a lookup has for its BZHI.
    (2 * (n - 1) + 14) & !15
}

/// Bytes allocated for a node with `n` runs: whole lines, at least one (a search reads
/// a whole line of keys).
pub(super) fn node_bytes(n: usize) -> usize {
    (values_at(n) + 8 * n).next_multiple_of(64)
}

/// Whether a node of `n` runs over `stride` bits is stored direct (one value per slot):
/// stride-8 nodes too large for one key line. (Stride-16 ones are split, see
/// [`SPLIT`].)
pub(super) fn is_direct(n: usize, stride: u32) -> bool {
    stride == 8 && n > FLAT
}

/// Slots of a direct node.
pub(super) const DIRECT_SLOTS: usize = 256;

/// Number of stored keys of the key line at `p` that are at most `slot`, among the
/// first `valid` lanes (32 for a full line). `AVX2`: compiled into a function with the
/// `avx2`, `bmi2` and `popcnt` target features (two 32-byte compares instead of four).
///
/// # Safety
/// `p` is 64-byte aligned and 64 bytes are readable there; with `AVX2`, the CPU has
/// AVX2, BMI2 and POPCNT.
#[inline(always)]
pub(super) unsafe fn count_le<const AVX2: bool>(p: *const u8, slot: u32, valid: usize) -> usize {
    #[cfg(target_arch = "x86_64")]
    if AVX2 {
        use std::arch::x86_64::*;
        let x = _mm256_set1_epi16((slot ^ 0x8000) as u16 as i16);
        let q = p as *const __m256i;
        let c0 = _mm256_cmpgt_epi16(x, _mm256_load_si256(q));
        let c1 = _mm256_cmpgt_epi16(x, _mm256_load_si256(q.add(1)));
        // One byte per lane: PACKSSWB interleaves the halves (c0 0-7, c1 0-7, c0 8-15,
        // c1 8-15), VPERMQ puts them back in lane order.
        let lanes = _mm256_permute4x64_epi64::<0b11_01_10_00>(_mm256_packs_epi16(c0, c1));
        let m = _mm256_movemask_epi8(lanes) as u32;
        // Lanes at and past `valid` hold values, not keys (BZHI keeps all 32 bits for
        // an index of 32).
        return _bzhi_u32(m, valid as u32).count_ones() as usize;
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
pub(super) unsafe fn value_word<const AVX2: bool>(link: u64, slot: u32) -> *const AtomicU64 {
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
pub(super) unsafe fn direct_word<const MAY_SPLIT: bool>(link: u64, slot: u32) -> *const AtomicU64 {
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
pub(super) unsafe fn keyed_word<const AVX2: bool>(link: u64, slot: u32) -> *const AtomicU64 {
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
pub(super) unsafe fn final_word<const AVX2: bool>(link: u64, slot: u32) -> (*const AtomicU64, u64) {
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
pub(super) fn or_default(v: u32, dflt: u32) -> u32 {
    if v != NONE {
        v
    } else {
        dflt
    }
}
