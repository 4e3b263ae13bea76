//! The chunk format and its reading: a chunk's runs, its kids, the front of a chunk
//! whose values are wider than its table's.

use super::*;

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
pub(super) type ChunkPtr = *const u64;

#[inline(always)]
pub(super) fn ptr_of(link: u64) -> ChunkPtr {
    (link & PTR) as ChunkPtr
}

/// The run holding slot `j` (0..=255) of the chunk or kid at `p`, counted from the
/// chunk's last run (the values are stored last run first).
///
/// # Safety
/// `p` is a live chunk and `j < 256`.
#[inline(always)]
pub(super) unsafe fn slot_rank(p: ChunkPtr, j: usize) -> usize {
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
pub(super) unsafe fn slot_index(p: ChunkPtr, j: usize) -> usize {
    usize::from(*((p as *const u8).add(VALS_AT) as *const u16).add(slot_rank(p, j)))
}

/// The 8-bit dictionary index of slot `j` of the chunk or kid at `p`.
///
/// # Safety
/// `p` is a live chunk (or a front) with 8-bit values and `j < 256`.
#[inline(always)]
pub(super) unsafe fn slot_byte(p: ChunkPtr, j: usize) -> usize {
    usize::from(*(p as *const u8).add(VALS_AT + slot_rank(p, j)))
}

/// The 32-bit value (a next hop, or NONE) of slot `j` of the chunk or kid at `p`.
///
/// # Safety
/// `p` is a live chunk with 32-bit values and `j < 256`.
#[inline(always)]
pub(super) unsafe fn slot_word(p: ChunkPtr, j: usize) -> u32 {
    *((p as *const u8).add(VALS_AT) as *const u32).add(slot_rank(p, j))
}

/// log2 of the bytes of a value of the chunk `link` names.
#[inline(always)]
pub(super) fn width_of(link: u64) -> u32 {
    ((link >> WIDTH_SHIFT) & 3) as u32
}

/// The chunk proper of `link` (past its front, if it has one).
#[inline(always)]
pub(super) fn chunk_of(link: u64) -> ChunkPtr {
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
pub(super) unsafe fn link_value(link: u64, j: usize, dict: &[AtomicU32]) -> u32 {
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
pub(super) unsafe fn chunk_lookup(link: u64, key: u32, dict: &[AtomicU32]) -> u32 {
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
pub(super) unsafe fn kid_link(p: ChunkPtr, j: usize) -> u64 {
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
pub(super) fn prefetch_kid_area(link: u64) {
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
pub(super) const FRONT: [u64; FRONT_WORDS] = [
    0,
    0,
    0,
    1 << 63,
    0x0001_0101 | (BYTE_MARK as u64) << 32 | (KID_MARK as u64) << 32,
];
pub(super) const FRONT_WORDS: usize = 5;
