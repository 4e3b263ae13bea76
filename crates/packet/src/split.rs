//! The split of a batch over output batches ([`crate::PacketBatch::distribute`]), by
//! bit masks.
//!
//! The obvious loop (read the packet's port, append to that port's batch) loads and
//! stores the port batch's length for every packet. Consecutive packets may go to the
//! same port, so the CPU orders each length load after the previous packet's store:
//! the loop runs at the store-to-load forwarding latency, several cycles a packet
//! (about 250 cycles for 32 packets over three ports, measured in `bench pipeline
//! --app route`). Here each port's packets are found as a bit mask of up to 64
//! packets (sixteen port numbers compared and packed into one byte mask at a time),
//! and the port's length stays in a register while its packets are copied.

use crate::{Packet, PacketBatch};

/// Packets split at once: the bits of a mask.
pub(crate) const CHUNK: usize = 64;

/// Moves packets `0..ports.len()` of `src` to `outs[ports[i]]`, in order, dropping the
/// packets whose port is not an index of `outs`.
///
/// # Safety
/// `src` points at `ports.len()` (at most [`CHUNK`]) initialized packets that the
/// caller owns and gives up: each is moved out (or dropped) exactly once, so the
/// caller must not read or drop them afterwards.
pub(crate) unsafe fn split_chunk(src: *const Packet, ports: &[u32], outs: &mut [PacketBatch]) {
    let n = ports.len();
    debug_assert!(n <= CHUNK);
    let all = if n == CHUNK { u64::MAX } else { (1u64 << n) - 1 };
    let mut left = all;
    for (q, out) in outs.iter_mut().enumerate() {
        if left == 0 {
            break;
        }
        // (Each packet has one port: its bit is in one mask only.)
        let mut m = mask_eq(ports, q as u32);
        if m == 0 {
            continue;
        }
        left &= !m;
        let v = out.vec_mut();
        if m == all {
            // The whole chunk to one port: one copy.
            v.reserve(n);
            // SAFETY: `src` holds `n` packets this call owns (see the contract), moved
            // once into the room just reserved past the destination's length.
            unsafe {
                std::ptr::copy_nonoverlapping(src, v.as_mut_ptr().add(v.len()), n);
                v.set_len(v.len() + n);
            }
            return;
        }
        // (Room for the whole chunk: a bound without counting the mask's bits, which
        // is a dozen instructions without POPCNT in the baseline instruction set.)
        v.reserve(n);
        let dst = v.as_mut_ptr();
        let mut k = v.len();
        while m != 0 {
            let i = m.trailing_zeros() as usize;
            // SAFETY: packet i has one port, so bit i is in no other port's mask and
            // packet i is moved once; slot k is inside the room reserved above.
            unsafe { std::ptr::copy_nonoverlapping(src.add(i), dst.add(k), 1) };
            k += 1;
            m &= m - 1;
        }
        // SAFETY: slots up to k were written above.
        unsafe { v.set_len(k) };
    }
    while left != 0 {
        let i = left.trailing_zeros() as usize;
        // SAFETY: packet i went to no port above and is read out once, to be dropped.
        drop(unsafe { std::ptr::read(src.add(i)) });
        left &= left - 1;
    }
}

/// Bit i set where `ports[i] == q` (`ports.len() <= 64`).
#[inline]
fn mask_eq(ports: &[u32], q: u32) -> u64 {
    let groups = ports.chunks_exact(16);
    let rest = groups.remainder();
    let mut m = mask_eq_sixteens(groups, q);
    let base = ports.len() - rest.len();
    for (j, &p) in rest.iter().enumerate() {
        m |= u64::from(p == q) << (base + j);
    }
    m
}

/// The mask of whole groups of sixteen ports: four compares of four ports each, packed
/// to sixteen bytes and read with one byte mask (SSE2 is part of x86-64, so no
/// feature test is needed).
#[cfg(target_arch = "x86_64")]
#[inline]
fn mask_eq_sixteens(groups: std::slice::ChunksExact<'_, u32>, q: u32) -> u64 {
    use std::arch::x86_64::{
        __m128i, _mm_cmpeq_epi32, _mm_loadu_si128, _mm_movemask_epi8, _mm_packs_epi16, _mm_packs_epi32,
        _mm_set1_epi32,
    };
    let mut m = 0u64;
    // SAFETY: SSE2 is part of every x86-64 CPU (the target's baseline), and each load
    // reads 16 of the group's 64 bytes, at any alignment.
    unsafe {
        let qv = _mm_set1_epi32(q as i32);
        for (j, g) in groups.enumerate() {
            let at = |k: usize| _mm_cmpeq_epi32(_mm_loadu_si128(g.as_ptr().add(k).cast::<__m128i>()), qv);
            // Each compare gives 0 or -1 per port, which the saturating packs keep.
            let lo = _mm_packs_epi32(at(0), at(4));
            let hi = _mm_packs_epi32(at(8), at(12));
            let bytes = _mm_packs_epi16(lo, hi);
            m |= u64::from(_mm_movemask_epi8(bytes) as u16) << (16 * j);
        }
    }
    m
}

#[cfg(not(target_arch = "x86_64"))]
#[inline]
fn mask_eq_sixteens(groups: std::slice::ChunksExact<'_, u32>, q: u32) -> u64 {
    let mut m = 0u64;
    for (j, g) in groups.enumerate() {
        for (k, &p) in g.iter().enumerate() {
            m |= u64::from(p == q) << (16 * j + k);
        }
    }
    m
}
