//! Per-core frame pools.
//!
//! Every thread has its own free list of standard-size frames. [`crate::Packet`] takes
//! from the pool of the thread that allocates and gives back to the pool of the thread
//! that drops, so a worker that receives, processes and transmits on one core touches
//! only its own pool, without locks or atomics. Frames are created only while a pool
//! warms up (or for oversize packets) and are never freed on the fast path.
//!
//! Frames whose buffer is a chunk of a device's region ([`crate::chunk`]) never enter
//! these pools: dropping their packets returns them to their [`crate::chunk::ChunkPool`].

use crate::frame::{Frame, FRAME_SIZE};
use crate::Packet;
use std::cell::RefCell;

/// Frames a thread keeps at most on its free list; beyond this, dropped frames are
/// released to the allocator so a burst cannot pin memory for ever.
pub const MAX_FREE_FRAMES: usize = 65_536;

// Boxed frames on purpose: a frame moves between the pool and packets as one pointer.
#[allow(clippy::vec_box)]
#[derive(Default)]
struct FramePool {
    free: Vec<Box<Frame>>,
    stats: PoolStats,
}

/// Counters of the current thread's pool.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PoolStats {
    /// Standard frames created from the allocator by this thread.
    pub created: u64,
    /// Frames handed out to packets.
    pub taken: u64,
    /// Frames returned by dropped packets.
    pub recycled: u64,
    /// Frames now on the free list.
    pub free: u64,
}

thread_local! {
    static POOL: RefCell<FramePool> = const {
        RefCell::new(FramePool { free: Vec::new(), stats: PoolStats { created: 0, taken: 0, recycled: 0, free: 0 } })
    };
}

/// Takes a frame able to hold `cap` bytes.
#[inline]
pub(crate) fn take(cap: usize) -> Box<Frame> {
    if cap > FRAME_SIZE {
        return Frame::with_capacity(cap);
    }
    POOL.try_with(|p| {
        let mut p = p.borrow_mut();
        p.stats.taken += 1;
        match p.free.pop() {
            Some(f) => f,
            None => {
                p.stats.created += 1;
                Frame::new_standard()
            }
        }
    })
    .unwrap_or_else(|_| Frame::new_standard())
}

/// Appends `n` packets of `len` bytes after `headroom` to `out`, borrowing the pool
/// once and moving frames in one loop over raw pointers (no per-packet capacity checks).
#[inline]
pub(crate) fn take_into(out: &mut Vec<Packet>, n: usize, headroom: usize, len: usize, mac_at_start: bool) {
    let cap = headroom + len;
    // A `move` closure over plain values: captured by reference, each would be
    // reloaded from memory for every frame.
    let fresh = move |mut f: Box<Frame>| {
        f.reset(headroom, len, mac_at_start);
        Packet::from_frame(f)
    };
    if cap > FRAME_SIZE {
        out.extend((0..n).map(|_| fresh(Frame::with_capacity(cap))));
        return;
    }
    let done = POOL.try_with(|p| {
        let Ok(mut p) = p.try_borrow_mut() else {
            return false;
        };
        let have = p.free.len();
        if have < n {
            p.stats.created += (n - have) as u64;
            p.free.extend((have..n).map(|_| Frame::new_standard()));
        }
        p.stats.taken += n as u64;
        move_fresh(&mut p.free, out, n, fresh);
        true
    });
    if done != Ok(true) {
        out.extend((0..n).map(|_| fresh(Frame::new_standard())));
    }
}

/// Moves the last `n` frames of `free` (which holds at least `n`) to the end of `out`
/// as packets made by `fresh`, in one loop over raw pointers. (`extend` over a `drain`
/// spent about twice the instructions on the iterators' bookkeeping: the forwarding
/// path ran 8 % faster without it, see docs/PERFORMANCE.md, session 30.)
#[inline(always)]
#[allow(clippy::vec_box)]
fn move_fresh(
    free: &mut Vec<Box<Frame>>,
    out: &mut Vec<Packet>,
    n: usize,
    fresh: impl Fn(Box<Frame>) -> Packet,
) {
    let start = free.len() - n;
    out.reserve(n);
    // SAFETY: `free[start..]` holds `n` initialized frames; each is read out once and
    // `free` is shortened past them before anything else can see it, so each frame
    // ends up owned by exactly one packet. `out` has room for `n` more packets
    // (reserved above), written in order before its length covers them. `fresh` does
    // not panic (it writes a frame's offsets and hot annotations).
    unsafe {
        let src = free.as_ptr().add(start);
        let dst = out.as_mut_ptr().add(out.len());
        free.set_len(start);
        for i in 0..n {
            std::ptr::write(dst.add(i), fresh(std::ptr::read(src.add(i))));
        }
        out.set_len(out.len() + n);
    }
}

/// Returns every packet of `pkts` to the current thread's pool, borrowing it once;
/// returns their total length in bytes (counted in the pass that checks their frames,
/// for a port's transmit counters; callers that ignore it get no sum).
#[inline]
pub(crate) fn recycle_all(pkts: &mut Vec<Packet>) -> u64 {
    let mut bytes = 0u64;
    let mut standard = true;
    for p in pkts.iter() {
        bytes += p.len() as u64;
        standard &= p.has_standard_frame();
    }
    let done = POOL.try_with(|p| {
        let Ok(mut p) = p.try_borrow_mut() else {
            return false;
        };
        p.stats.recycled += pkts.len() as u64;
        if standard && p.free.len() + pkts.len() <= MAX_FREE_FRAMES {
            let n = pkts.len();
            p.free.reserve(n);
            // SAFETY: `Packet` is `repr(transparent)` over `ManuallyDrop<Box<Frame>>`,
            // itself `repr(transparent)` over `Box<Frame>`, so the `n` packets are `n`
            // frame boxes bit for bit. They are copied into the room reserved past
            // `free`'s length, and `pkts` is emptied without dropping them (their drop
            // would recycle them a second time): each frame moves to the pool once.
            // One copy of pointers where a drain and extend took a loop of
            // iterator steps (see `move_fresh`).
            unsafe {
                let l = p.free.len();
                std::ptr::copy_nonoverlapping(
                    pkts.as_ptr().cast::<Box<Frame>>(),
                    p.free.as_mut_ptr().add(l),
                    n,
                );
                pkts.set_len(0);
                p.free.set_len(l + n);
            }
        } else {
            recycle_mixed(&mut p.free, pkts);
        }
        true
    });
    if done != Ok(true) {
        // Dropping each packet returns chunk frames to their pools.
        pkts.clear();
    }
    bytes
}

/// [`recycle_all`] for a batch that holds frames other than standard heap frames, or
/// would overfill the free list: out of line, so the common case stays small.
#[cold]
#[inline(never)]
#[allow(clippy::vec_box)]
fn recycle_mixed(free: &mut Vec<Box<Frame>>, pkts: &mut Vec<Packet>) {
    let mut frames = pkts.drain(..).map(Packet::into_frame).peekable();
    while let Some(f) = frames.next() {
        if f.is_standard() {
            if free.len() < MAX_FREE_FRAMES {
                free.push(f);
            }
            continue;
        }
        // This frame and the non-standard ones right after it: chunk frames go back to
        // their pools a run at a time.
        let others = std::iter::from_fn(|| frames.next_if(|n| !n.is_standard()));
        crate::chunk::release_all(std::iter::once(f).chain(others));
    }
}

/// Returns a frame to the current thread's pool.
#[inline]
pub(crate) fn recycle(f: Box<Frame>) {
    if !f.is_standard() {
        // A chunk of a device's region goes back to its pool; an oversize heap frame
        // to the allocator.
        return crate::chunk::release(f);
    }
    let _ = POOL.try_with(|p| {
        if let Ok(mut p) = p.try_borrow_mut() {
            p.stats.recycled += 1;
            if p.free.len() < MAX_FREE_FRAMES {
                p.free.push(f);
            }
        }
    });
}

/// Fills the current thread's pool with `n` frames so the fast path starts warm.
pub fn prefill(n: usize) {
    POOL.with(|p| {
        let mut p = p.borrow_mut();
        let want = n.min(MAX_FREE_FRAMES);
        let have = p.free.len();
        p.free.reserve(want.saturating_sub(have));
        while p.free.len() < want {
            p.free.push(Frame::new_standard());
            p.stats.created += 1;
        }
    });
}

/// The current thread's pool counters.
pub fn stats() -> PoolStats {
    POOL.with(|p| {
        let p = p.borrow();
        PoolStats {
            free: p.free.len() as u64,
            ..p.stats
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Packet;

    #[test]
    fn frames_are_recycled_not_created() {
        prefill(8);
        let before = stats();
        for _ in 0..1000 {
            let p = Packet::alloc(64);
            drop(p);
        }
        let after = stats();
        assert_eq!(after.created, before.created, "no new frames once warm");
        assert_eq!(after.taken - before.taken, 1000);
        assert_eq!(after.recycled - before.recycled, 1000);
        assert_eq!(after.free, before.free);
    }

    #[test]
    fn oversize_frames_do_not_enter_the_pool() {
        let before = stats();
        drop(Packet::alloc(10_000));
        assert_eq!(stats().free, before.free);
    }
}
