//! Frames whose buffers are the chunks of a device's memory region (an AF_XDP UMEM),
//! so a device can hand the graph the very bytes it wrote and send a packet from
//! where it lies, with no copy.
//!
//! A [`ChunkPool`] cuts a region into equal chunks and keeps one frame per chunk. A
//! chunk is always in exactly one of three places:
//! - **free**: on the pool's free list;
//! - **lent**: given to the device (in one of its rings), by [`Chunks::lend`],
//!   [`Chunks::lend_packet`] or [`Chunks::lend_copy`];
//! - **in a packet**: handed to the graph by [`Chunks::receive`].
//!
//! A packet holding a chunk goes back to the pool's free list when it is dropped, on
//! whatever thread that happens; its buffer is never given to the global allocator.
//! Every frame holds its pool (an `Arc`), so the region outlives every packet in it;
//! the device's owner calls [`ChunkPool::close`] when it goes, which forgets the
//! free and lent chunks and lets the region go once the last packet is dropped.

use crate::frame::{Frame, FRAME_SIZE};
use crate::Packet;
use std::fmt;
use std::ptr::NonNull;
use std::sync::{Arc, Mutex, MutexGuard};

/// The chunks of one memory region, and the frames that use them.
pub struct ChunkPool {
    base: NonNull<u8>,
    chunk_size: u32,
    chunks: u32,
    state: Mutex<ChunkState>,
    /// Owns the region (e.g. unmaps it when dropped): dropped with the pool, which
    /// lives as long as any frame of it.
    _region: Box<dyn Send + Sync>,
}

// SAFETY: `base` points into the region `_region` owns (which is Send + Sync); the
// pool's own mutable state is behind the mutex, and a chunk's bytes are touched only by
// the one frame that holds the chunk (or by the device while the chunk is lent).
unsafe impl Send for ChunkPool {}
// SAFETY: see `Send`.
unsafe impl Sync for ChunkPool {}

// Boxed frames on purpose: a frame moves between the pool and packets as one pointer.
#[allow(clippy::vec_box)]
struct ChunkState {
    /// Frames of free chunks (most recently freed last: reused first, cache-warm).
    free: Vec<Box<Frame>>,
    /// Frames of lent chunks, by chunk index.
    lent: Vec<Option<Box<Frame>>>,
    lent_count: u32,
    /// Set by [`ChunkPool::close`]: chunks coming back are forgotten.
    closed: bool,
}

/// Where a pool's chunks are (a snapshot).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ChunkCounts {
    pub total: u32,
    pub free: u32,
    /// Given to the device.
    pub lent: u32,
    /// Held by packets.
    pub packets: u32,
}

/// Why a region cannot be made a [`ChunkPool`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChunkPoolError {
    /// Chunks must hold at least a minimum frame and must not have the standard heap
    /// frame size (which marks heap frames on the fast path).
    ChunkSize(u32),
    /// No chunks, or more bytes than the address space holds.
    RegionSize { chunks: u32, chunk_size: u32 },
}

impl fmt::Display for ChunkPoolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ChunkPoolError::ChunkSize(s) => write!(
                f,
                "chunk size {} is not usable (at least 256 bytes, and not {})",
                s, FRAME_SIZE
            ),
            ChunkPoolError::RegionSize { chunks, chunk_size } => {
                write!(
                    f,
                    "a region of {} chunks of {} bytes is not usable",
                    chunks, chunk_size
                )
            }
        }
    }
}

impl std::error::Error for ChunkPoolError {}

impl ChunkPool {
    /// A pool of `chunks` chunks of `chunk_size` bytes starting at `base`, all free.
    /// `region` owns the memory and is dropped once the pool and every packet in it
    /// are gone.
    ///
    /// # Safety
    /// `base` must be valid for reads and writes of `chunks * chunk_size` bytes for as
    /// long as `region` is alive, and nothing but this pool's frames and the device the
    /// chunks are lent to may touch those bytes.
    pub unsafe fn new(
        base: NonNull<u8>,
        chunk_size: u32,
        chunks: u32,
        region: Box<dyn Send + Sync>,
    ) -> Result<Arc<ChunkPool>, ChunkPoolError> {
        if chunk_size < 256 || chunk_size as usize == FRAME_SIZE {
            return Err(ChunkPoolError::ChunkSize(chunk_size));
        }
        let fits = (chunks as usize)
            .checked_mul(chunk_size as usize)
            .is_some_and(|n| n <= isize::MAX as usize);
        if chunks == 0 || !fits {
            return Err(ChunkPoolError::RegionSize { chunks, chunk_size });
        }
        let pool = Arc::new(ChunkPool {
            base,
            chunk_size,
            chunks,
            state: Mutex::new(ChunkState {
                free: Vec::with_capacity(chunks as usize),
                lent: (0..chunks).map(|_| None).collect(),
                lent_count: 0,
                closed: false,
            }),
            _region: region,
        });
        {
            let mut st = pool.state();
            // Highest chunk first on the list, so chunk 0 is handed out first.
            for i in (0..chunks).rev() {
                // SAFETY: i < chunks, so the offset lies inside the region (its size
                // fits isize, checked above).
                let at = unsafe { base.add(i as usize * chunk_size as usize) };
                // SAFETY: chunk i is valid for chunk_size bytes while the region lives
                // (the caller's promise), the region lives as long as the pool, which
                // the frame holds; each chunk gets exactly one frame.
                let f = unsafe { Frame::in_chunk(at, chunk_size, pool.clone()) };
                st.free.push(f);
            }
        }
        Ok(pool)
    }

    pub fn chunk_size(&self) -> u32 {
        self.chunk_size
    }

    pub fn chunks(&self) -> u32 {
        self.chunks
    }

    /// Start of the region.
    pub fn base(&self) -> *const u8 {
        self.base.as_ptr()
    }

    /// Whether `p` points into the region.
    pub fn contains(&self, p: *const u8) -> bool {
        let start = self.base.as_ptr() as usize;
        let end = start + self.chunks as usize * self.chunk_size as usize;
        (start..end).contains(&(p as usize))
    }

    /// Whether packet `p`'s buffer is a chunk of this pool.
    pub fn holds(&self, p: &Packet) -> bool {
        p.frame()
            .home
            .as_ref()
            .is_some_and(|h| std::ptr::eq(Arc::as_ptr(h), self))
    }

    fn state(&self) -> MutexGuard<'_, ChunkState> {
        // The state is consistent between statements (a panic cannot leave a chunk in
        // two places), so a poisoned lock is still usable.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Locks the pool for a burst of operations. Do not drop a packet of this pool
    /// while holding the lock (its chunk would wait for the same lock).
    pub fn lock(&self) -> Chunks<'_> {
        Chunks {
            pool: self,
            st: self.state(),
        }
    }

    /// Where the chunks are now.
    pub fn counts(&self) -> ChunkCounts {
        self.lock().counts()
    }

    /// Forgets the free and lent chunks (the device is gone) and lets chunks held by
    /// packets be forgotten when those are dropped; the region is released with the
    /// last of them. Breaks the reference cycle between the pool and its frames.
    pub fn close(&self) {
        let (free, lent) = {
            let mut st = self.state();
            st.closed = true;
            st.lent_count = 0;
            (std::mem::take(&mut st.free), std::mem::take(&mut st.lent))
        };
        // Dropped outside the lock: the last frame may hold the last reference.
        drop(free);
        drop(lent);
    }

    /// Takes back the frame of a dropped packet; returns it when the pool is closed.
    fn put_back(&self, f: Box<Frame>) -> Option<Box<Frame>> {
        let mut st = self.state();
        if st.closed {
            return Some(f);
        }
        st.free.push(f);
        None
    }

    /// Takes back the frames of dropped packets (all of this pool) under one lock.
    fn put_back_all(&self, frames: impl Iterator<Item = Box<Frame>>) {
        let mut st = self.state();
        if !st.closed {
            st.free.extend(frames);
            return;
        }
        // Closed: the frames are dropped, outside the lock (one may hold the last
        // reference to this pool).
        drop(st);
        frames.for_each(drop);
    }

    fn index_of(&self, f: &Frame) -> usize {
        (f.buf_ptr() as usize - self.base.as_ptr() as usize) / self.chunk_size as usize
    }
}

impl fmt::Debug for ChunkPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "ChunkPool({} chunks of {} bytes, {:?})",
            self.chunks,
            self.chunk_size,
            self.counts()
        )
    }
}

/// Returns a frame that is not a standard heap frame to where it belongs: its chunk
/// pool, or the allocator for an oversize heap frame.
#[cold]
#[inline(never)]
pub(crate) fn release(f: Box<Frame>) {
    let Some(home) = f.home.clone() else {
        return;
    };
    // A frame the closed pool gives back is dropped here, outside the pool's lock.
    drop(home.put_back(f));
}

/// [`release`] for a sequence of frames: a run of frames of one chunk pool (a burst
/// received together and dropped together) takes that pool's lock once.
#[cold]
#[inline(never)]
pub(crate) fn release_all(frames: impl Iterator<Item = Box<Frame>>) {
    let mut frames = frames.peekable();
    while let Some(f) = frames.next() {
        let Some(home) = f.home.clone() else {
            continue;
        };
        // (`next_if` hands the closure a `&Box<Frame>`.)
        #[allow(clippy::borrowed_box)]
        let same = |n: &Box<Frame>| n.home.as_ref().is_some_and(|h| Arc::ptr_eq(h, &home));
        let run = std::iter::once(f).chain(std::iter::from_fn(|| frames.next_if(same)));
        home.put_back_all(run);
    }
}

/// A locked [`ChunkPool`]: the device side's operations, one lock per burst.
///
/// Addresses are byte offsets from the start of the region (a UMEM address).
pub struct Chunks<'a> {
    pool: &'a ChunkPool,
    st: MutexGuard<'a, ChunkState>,
}

impl Chunks<'_> {
    /// Free chunks.
    pub fn free(&self) -> u32 {
        self.st.free.len() as u32
    }

    pub fn counts(&self) -> ChunkCounts {
        let free = self.st.free.len() as u32;
        let lent = self.st.lent_count;
        ChunkCounts {
            total: self.pool.chunks,
            free,
            lent,
            packets: if self.st.closed {
                0
            } else {
                self.pool.chunks - free - lent
            },
        }
    }

    fn chunk_addr(&self, idx: usize) -> u64 {
        idx as u64 * u64::from(self.pool.chunk_size)
    }

    fn park(&mut self, f: Box<Frame>) -> usize {
        let idx = self.pool.index_of(&f);
        debug_assert!(self.st.lent[idx].is_none(), "chunk {} lent twice", idx);
        self.st.lent[idx] = Some(f);
        self.st.lent_count += 1;
        idx
    }

    /// Lends a free chunk to the device (for receiving into); returns its start
    /// address, or `None` when no chunk is free.
    pub fn lend(&mut self) -> Option<u64> {
        let f = self.st.free.pop()?;
        let idx = self.park(f);
        Some(self.chunk_addr(idx))
    }

    /// The lent chunk holding `addr` comes back from the device with `len` bytes
    /// written at `addr`: a packet whose data they are, the bytes before `addr` in the
    /// chunk its headroom, the MAC header marked at the data start. `None` (and the
    /// chunk stays lent) when `addr..addr + len` is not inside one lent chunk.
    pub fn receive(&mut self, addr: u64, len: u32) -> Option<Packet> {
        let cs = u64::from(self.pool.chunk_size);
        let idx = usize::try_from(addr / cs).ok()?;
        let off = (addr % cs) as u32;
        if off as u64 + u64::from(len) > cs {
            return None;
        }
        let mut f = self.st.lent.get_mut(idx)?.take()?;
        self.st.lent_count -= 1;
        f.reset(off as usize, len as usize, true);
        Some(Packet::from_frame(f))
    }

    /// The lent chunk holding `addr` comes back from the device unused (e.g. sent):
    /// it is free again. False if no lent chunk holds `addr`.
    pub fn reclaim(&mut self, addr: u64) -> bool {
        let idx = (addr / u64::from(self.pool.chunk_size)) as usize;
        match self.st.lent.get_mut(idx).and_then(Option::take) {
            Some(f) => {
                self.st.lent_count -= 1;
                self.st.free.push(f);
                true
            }
            None => false,
        }
    }

    /// Lends the chunk of packet `p` to the device as it is (no copy): returns the
    /// address and length of its data. A packet whose buffer is not a chunk of this
    /// pool comes back as the error.
    pub fn lend_packet(&mut self, p: Packet) -> Result<(u64, u32), Packet> {
        if !self.pool.holds(&p) {
            return Err(p);
        }
        let f = p.into_frame();
        let (head, len) = f.data_range();
        let idx = self.park(f);
        Ok((self.chunk_addr(idx) + u64::from(head), len))
    }

    /// Copies `data` to the start of a free chunk and lends it to the device; returns
    /// its address, or `None` when no chunk is free or `data` is longer than a chunk.
    pub fn lend_copy(&mut self, data: &[u8]) -> Option<u64> {
        if data.len() > self.pool.chunk_size as usize {
            return None;
        }
        let mut f = self.st.free.pop()?;
        f.buf_mut()[..data.len()].copy_from_slice(data);
        let idx = self.park(f);
        Some(self.chunk_addr(idx))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{PacketBatch, DEFAULT_HEADROOM};

    /// A pool over a heap region of `chunks` chunks of 2,048 bytes.
    fn heap_pool(chunks: u32) -> Arc<ChunkPool> {
        let region = vec![0u64; chunks as usize * 2048 / 8].into_boxed_slice();
        let base = NonNull::new(region.as_ptr() as *mut u8).unwrap();
        // SAFETY: the boxed slice holds chunks * 2048 bytes, lives as long as the pool
        // (moved into it) and is touched only through the pool's frames.
        unsafe { ChunkPool::new(base, 2048, chunks, Box::new(region)) }.unwrap()
    }

    #[test]
    fn received_chunks_are_packets_in_place_and_come_back_when_dropped() {
        let pool = heap_pool(4);
        let addr = pool.lock().lend().unwrap();
        assert_eq!(addr, 0, "chunk 0 is handed out first");
        // The device writes a frame 256 bytes into the chunk.
        // SAFETY: chunk 0 is lent (nobody else uses it); 256 + 3 < 2048.
        unsafe { std::ptr::copy_nonoverlapping([1u8, 2, 3].as_ptr(), pool.base().cast_mut().add(256), 3) };
        let p = pool.lock().receive(addr + 256, 3).unwrap();
        assert_eq!(p.data(), &[1, 2, 3]);
        assert_eq!(p.data().as_ptr(), pool.base().wrapping_add(256));
        assert_eq!(p.headroom(), 256);
        assert_eq!(p.tailroom(), 2048 - 256 - 3);
        assert_eq!(p.mac_header_offset(), Some(0));
        assert!(pool.holds(&p));
        assert_eq!(
            pool.counts(),
            ChunkCounts {
                total: 4,
                free: 3,
                lent: 0,
                packets: 1
            }
        );
        drop(p);
        assert_eq!(pool.counts().free, 4);
        assert_eq!(pool.counts().packets, 0);
    }

    #[test]
    fn a_packet_of_the_pool_is_lent_where_it_lies_others_are_copied() {
        let pool = heap_pool(2);
        let addr = pool.lock().lend().unwrap();
        let mut p = pool.lock().receive(addr + 256, 60).unwrap();
        // Encapsulation uses the chunk's headroom: the data moves back 4 bytes.
        p.push(4);
        assert_eq!(pool.lock().lend_packet(p).unwrap(), (addr + 252, 64));
        let heap = Packet::from_slice(&[9; 10]);
        let heap = pool.lock().lend_packet(heap).unwrap_err();
        assert!(!pool.holds(&heap));
        let copied = pool.lock().lend_copy(heap.data()).unwrap();
        assert_eq!(copied, 2048);
        assert_eq!(pool.counts().lent, 2);
        // No chunk left: neither lending nor copying succeeds.
        assert_eq!(pool.lock().lend(), None);
        assert_eq!(pool.lock().lend_copy(&[1]), None);
        assert!(pool.lock().reclaim(addr + 252));
        assert!(pool.lock().reclaim(copied + 64));
        assert!(!pool.lock().reclaim(copied), "already free");
        assert_eq!(pool.counts().free, 2);
    }

    #[test]
    fn batches_of_chunk_packets_and_heap_packets_recycle_to_their_homes() {
        let pool = heap_pool(8);
        crate::pool::prefill(8);
        let heap_before = crate::pool::stats();
        let mut b = PacketBatch::new();
        for _ in 0..5 {
            let a = pool.lock().lend().unwrap();
            b.push(pool.lock().receive(a + 256, 64).unwrap());
        }
        Packet::alloc_into(&mut b, 3, 64);
        b.clear();
        assert_eq!(pool.counts().free, 8, "every chunk is back");
        let heap_after = crate::pool::stats();
        assert_eq!(heap_after.free, heap_before.free, "heap frames are back");
        assert_eq!(heap_after.created, heap_before.created);
    }

    #[test]
    fn a_batch_interleaving_two_pools_returns_each_chunk_to_its_own_pool() {
        let (a, b) = (heap_pool(4), heap_pool(4));
        let mut batch = PacketBatch::new();
        for pool in [&a, &a, &b, &a, &b, &b] {
            let addr = pool.lock().lend().unwrap();
            batch.push(pool.lock().receive(addr + 256, 64).unwrap());
        }
        Packet::alloc_into(&mut batch, 1, 64);
        let addr = a.lock().lend().unwrap();
        batch.push(a.lock().receive(addr + 256, 64).unwrap());
        batch.clear();
        assert_eq!((a.counts().free, a.counts().packets), (4, 0));
        assert_eq!((b.counts().free, b.counts().packets), (4, 0));
    }

    #[test]
    fn packets_dropped_on_another_thread_return_their_chunks() {
        let pool = heap_pool(64);
        let mut b = PacketBatch::new();
        for _ in 0..64 {
            let a = pool.lock().lend().unwrap();
            b.push(pool.lock().receive(a + 256, 64).unwrap());
        }
        assert_eq!(pool.counts().packets, 64);
        let clone = b.as_slice()[0].clone();
        assert!(!pool.holds(&clone), "a clone is a heap copy");
        std::thread::spawn(move || {
            let one = b.pop().unwrap();
            drop(one);
            b.clear();
        })
        .join()
        .unwrap();
        assert_eq!(
            pool.counts(),
            ChunkCounts {
                total: 64,
                free: 64,
                lent: 0,
                packets: 0
            }
        );
        drop(clone);
    }

    #[test]
    fn a_packet_outlives_its_closed_pool_and_growing_leaves_the_chunk() {
        let pool = heap_pool(2);
        let a = pool.lock().lend().unwrap();
        let mut p = pool.lock().receive(a + DEFAULT_HEADROOM as u64, 10).unwrap();
        p.data_mut().fill(7);
        // Growing past the chunk moves the data into a heap frame; the chunk is free.
        p.put(4000);
        assert!(!pool.holds(&p));
        assert_eq!(&p.data()[..10], &[7; 10]);
        assert_eq!(pool.counts().free, 2);
        let a = pool.lock().lend().unwrap();
        let q = pool.lock().receive(a + 300, 20).unwrap();
        let weak = Arc::downgrade(&pool);
        pool.close();
        drop(pool);
        assert!(weak.upgrade().is_some(), "the packet keeps the region");
        assert_eq!(q.len(), 20);
        drop(q);
        assert!(weak.upgrade().is_none(), "the region goes with the last packet");
    }

    #[test]
    fn bad_geometry_and_foreign_addresses_are_refused() {
        let region = vec![0u8; 4096].into_boxed_slice();
        let base = NonNull::new(region.as_ptr() as *mut u8).unwrap();
        // SAFETY: as in `heap_pool` (and no pool is made).
        let e = unsafe { ChunkPool::new(base, FRAME_SIZE as u32, 1, Box::new(())) }.unwrap_err();
        assert_eq!(e, ChunkPoolError::ChunkSize(FRAME_SIZE as u32));
        // SAFETY: as above.
        let e = unsafe { ChunkPool::new(base, 2048, 0, Box::new(())) }.unwrap_err();
        assert_eq!(e.to_string(), "a region of 0 chunks of 2048 bytes is not usable");
        let pool = heap_pool(2);
        assert!(pool.lock().receive(0, 10).is_none(), "chunk 0 is not lent");
        let a = pool.lock().lend().unwrap();
        assert!(
            pool.lock().receive(a + 2000, 100).is_none(),
            "crosses the chunk end"
        );
        assert!(pool.lock().receive(1 << 40, 10).is_none(), "outside the region");
        assert_eq!(pool.counts().lent, 1);
    }
}
