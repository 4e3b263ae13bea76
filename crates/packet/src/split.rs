//! The split of a batch over output batches ([`crate::PacketBatch::distribute`]), by
//! bit masks.
//!
//! The obvious loop (read the packet's port, append to that port's batch) loads and
//! stores the port batch's length for every packet. Consecutive packets may go to the
//! same port, so the CPU orders each length load after the previous packet's store:
//! the loop runs at the store-to-load forwarding latency, several cycles a packet
//! (about 250 cycles for 32 packets over three ports, measured in `bench pipeline
//! --app route`). Here each port's packets are found as a bit mask of up to 64
//! packets (four port numbers compared at a time), and the port's length stays in a
//! register while its packets are copied: about 190 cycles for the same split.

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
        let mut m = mask_eq(ports, q as u32) & left;
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
        v.reserve(m.count_ones() as usize);
        let dst = v.as_mut_ptr();
        let mut k = v.len();
        while m != 0 {
            let i = m.trailing_zeros() as usize;
            // SAFETY: bit i is set in no other port's mask (cleared from `left`), so
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
    let quads = ports.chunks_exact(4);
    let rest = quads.remainder();
    let mut m = mask_eq_quads(quads, q);
    let base = ports.len() - rest.len();
    for (j, &p) in rest.iter().enumerate() {
        m |= u64::from(p == q) << (base + j);
    }
    m
}

/// The mask of whole groups of four ports, compared four at a time (SSE2 is part of
/// x86-64, so no feature test is needed).
#[cfg(target_arch = "x86_64")]
#[inline]
fn mask_eq_quads(quads: std::slice::ChunksExact<'_, u32>, q: u32) -> u64 {
    use std::arch::x86_64::{
        __m128i, _mm_castsi128_ps, _mm_cmpeq_epi32, _mm_loadu_si128, _mm_movemask_ps, _mm_set1_epi32,
    };
    let mut m = 0u64;
    // SAFETY: SSE and SSE2 are part of every x86-64 CPU (the target's baseline), and
    // each load reads the 16 bytes of one group of four `u32`s, at any alignment.
    unsafe {
        let qv = _mm_set1_epi32(q as i32);
        for (j, c) in quads.enumerate() {
            let v = _mm_loadu_si128(c.as_ptr().cast::<__m128i>());
            let eq = _mm_movemask_ps(_mm_castsi128_ps(_mm_cmpeq_epi32(v, qv)));
            m |= (eq as u64) << (4 * j);
        }
    }
    m
}

#[cfg(not(target_arch = "x86_64"))]
#[inline]
fn mask_eq_quads(quads: std::slice::ChunksExact<'_, u32>, q: u32) -> u64 {
    let mut m = 0u64;
    for (j, c) in quads.enumerate() {
        for (k, &p) in c.iter().enumerate() {
            m |= u64::from(p == q) << (4 * j + k);
        }
    }
    m
}
