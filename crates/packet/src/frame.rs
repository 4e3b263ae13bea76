//! The packet handle: a frame (from the per-core pool, or a chunk of a device's region)
//! plus Click's header pointers and annotations.

use crate::anno::Anno;
use crate::chunk::ChunkPool;
use crate::pool;
use crate::PacketBatch;
use std::mem::ManuallyDrop;
use std::ptr::NonNull;
use std::sync::Arc;

/// Bytes reserved in front of the data of a fresh packet, for encapsulation.
pub const DEFAULT_HEADROOM: usize = 128;
// Whole lines: a packet at the default headroom starts a line of a heap buffer.
const _: () = assert!(DEFAULT_HEADROOM.is_multiple_of(64));
/// Data room of a standard frame: a full Ethernet frame with VLAN tags fits.
pub const FRAME_DATA: usize = 2048;
/// Size of a standard frame buffer.
pub const FRAME_SIZE: usize = DEFAULT_HEADROOM + FRAME_DATA;

/// The largest buffer a packet grows into (by [`Packet::push`] or [`Packet::put`]
/// beyond its room): header positions are kept as `i32`, so every byte of such a
/// buffer has one.
pub const MAX_BUFFER: usize = i32::MAX as usize;

const NO_HEADER: i32 = -1;

/// What `push`/`put` do when even the largest buffer is too small.
#[cold]
#[inline(never)]
fn cannot_grow(len: usize, n: usize) -> ! {
    panic!("a packet of {len} bytes cannot grow by {n}: packet buffers hold at most {MAX_BUFFER} bytes")
}

/// Bytes of the user annotation area that lie in a frame's first cache line, with the
/// buffer pointer and the offsets (Click's destination address, paint, ICMP parameter,
/// fix-source and VLAN annotations among them).
pub const HOT_ANNO_BYTES: usize = 24;

// The first line holds the offsets and the first HOT_ANNO_BYTES of the user area.
const _: () = assert!(std::mem::offset_of!(Frame, anno) + HOT_ANNO_BYTES == 64);
const _: () = assert!(std::mem::offset_of!(Anno, user) == 0);
// And the whole header is two lines.
const _: () = assert!(std::mem::size_of::<Frame>() == 128);

/// The storage behind a [`Packet`]: a buffer and the packet's offsets in it.
///
/// The buffer is either a heap allocation the frame owns (`home` is `None`; such
/// frames are recycled through [`crate::pool`]) or a chunk of a [`ChunkPool`]'s
/// region, e.g. an AF_XDP UMEM (`home` is that pool, which the frame returns to and
/// which is never given to the global allocator).
#[repr(C, align(64))]
pub struct Frame {
    buf: NonNull<u8>,
    cap: u32,
    head: u32,
    len: u32,
    mac: i32,
    net: i32,
    trans: i32,
    /// Annotations past the first [`HOT_ANNO_BYTES`] user bytes may differ from their
    /// defaults. Only [`Packet::anno_mut`] (and copies of whole annotations) can change
    /// them; while this is false, a reset leaves the frame's second cache line
    /// untouched, which on the forwarding and route paths saves a line per packet that
    /// the next receive would otherwise fetch only to clear it.
    cold_anno: bool,
    pub(crate) anno: Anno,
    /// The chunk pool whose region holds the buffer; `None` for a heap buffer.
    pub(crate) home: Option<Arc<ChunkPool>>,
}

// SAFETY: a frame is the only holder of its buffer: a heap buffer it owns, or a chunk
// its pool lent to it alone (the pool and the device touch the chunk only after the
// frame went back). Shared references give read access only. So moving a frame to
// another thread, or sharing `&Frame`, is as safe as for a `Box<[u8]>`.
unsafe impl Send for Frame {}
// SAFETY: see `Send`.
unsafe impl Sync for Frame {}

/// A heap buffer's layout: line-aligned, so that a packet at the default headroom
/// (itself a whole number of lines) starts a line, and a minimum-size frame and the
/// headers every element reads lie in one line instead of straddling two in three
/// buffers of four (the allocator's own alignment is 16 bytes). Measured in one
/// process, runs in turns with the 16-byte-aligned buffers: `bench pipeline --app
/// forward` took a median 3 % fewer cycles a packet (faster in 34 of 40 rounds).
fn heap_layout(cap: usize) -> std::alloc::Layout {
    std::alloc::Layout::from_size_align(cap, 64).expect("a frame capacity fits a layout")
}

impl Drop for Frame {
    fn drop(&mut self) {
        if self.home.is_none() && self.cap > 0 {
            // SAFETY: a frame without a home owns its buffer, allocated by
            // `with_capacity` with `heap_layout(cap)` (a frame of capacity 0 has none),
            // and released only here.
            unsafe { std::alloc::dealloc(self.buf.as_ptr(), heap_layout(self.capacity())) };
        }
    }
}

impl Frame {
    pub(crate) fn new_standard() -> Box<Frame> {
        Frame::with_capacity(FRAME_SIZE)
    }

    pub(crate) fn with_capacity(cap: usize) -> Box<Frame> {
        // A frame shorter than asked for would let `head + len` run past its buffer.
        let cap = u32::try_from(cap).expect("a frame's capacity fits 32 bits") as usize;
        if cap == 0 {
            return Frame::empty(NonNull::dangling(), 0, None);
        }
        let layout = heap_layout(cap);
        // SAFETY: the layout's size is not zero.
        let raw = unsafe { std::alloc::alloc_zeroed(layout) };
        let Some(buf) = NonNull::new(raw) else {
            std::alloc::handle_alloc_error(layout)
        };
        Frame::empty(buf, cap as u32, None)
    }

    /// A frame whose buffer is the `cap` bytes at `buf`, a chunk of `home`'s region.
    ///
    /// # Safety
    /// `buf` must be valid for reads and writes of `cap` bytes for as long as `home`
    /// lives, and no other frame may use the same bytes.
    pub(crate) unsafe fn in_chunk(buf: NonNull<u8>, cap: u32, home: Arc<ChunkPool>) -> Box<Frame> {
        Frame::empty(buf, cap, Some(home))
    }

    /// A frame over `buf` holding no packet yet.
    fn empty(buf: NonNull<u8>, cap: u32, home: Option<Arc<ChunkPool>>) -> Box<Frame> {
        Box::new(Frame {
            buf,
            cap,
            head: 0,
            len: 0,
            mac: NO_HEADER,
            net: NO_HEADER,
            trans: NO_HEADER,
            cold_anno: false,
            anno: Anno::default(),
            home,
        })
    }

    /// The whole buffer.
    #[inline(always)]
    pub(crate) fn buf(&self) -> &[u8] {
        // SAFETY: `buf` is valid for `cap` bytes while the frame lives (an owned heap
        // buffer, or a chunk lent to this frame alone; see `in_chunk`).
        unsafe { std::slice::from_raw_parts(self.buf.as_ptr(), self.capacity()) }
    }

    /// The whole buffer, writable.
    #[inline(always)]
    pub(crate) fn buf_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `buf`; `&mut self` makes the access exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.buf.as_ptr(), self.capacity()) }
    }

    /// Start of the buffer.
    #[inline]
    pub(crate) fn buf_ptr(&self) -> *mut u8 {
        self.buf.as_ptr()
    }

    /// Where the data lies in the buffer: (offset, length).
    #[inline]
    pub(crate) fn data_range(&self) -> (u32, u32) {
        (self.head, self.len)
    }

    /// Makes the frame a fresh packet of `len` bytes after `headroom`, annotations
    /// cleared; `mac_at_start` marks the MAC header at the data start, as a port's
    /// receive path does.
    pub(crate) fn reset(&mut self, headroom: usize, len: usize, mac_at_start: bool) {
        self.head = headroom as u32;
        self.len = len as u32;
        self.mac = if mac_at_start { headroom as i32 } else { NO_HEADER };
        self.net = NO_HEADER;
        self.trans = NO_HEADER;
        if self.cold_anno {
            self.anno = Anno::default();
            self.cold_anno = false;
        } else {
            self.anno.user[..HOT_ANNO_BYTES].fill(0);
        }
    }

    /// The buffer's size in bytes.
    #[inline(always)]
    pub(crate) fn capacity(&self) -> usize {
        self.cap as usize
    }

    /// Gives this frame `src`'s annotations.
    fn copy_anno_from(&mut self, src: &Frame) {
        self.anno = src.anno;
        self.cold_anno = src.cold_anno;
    }

    /// A heap frame of the standard size, the kind the per-thread pools keep. Chunk
    /// frames never have this capacity ([`ChunkPool`] refuses that chunk size), so
    /// the fast path needs no look at `home`.
    #[inline]
    pub(crate) fn is_standard(&self) -> bool {
        self.capacity() == FRAME_SIZE
    }
}

/// A packet: owns one frame. Dropping it recycles the frame into the current thread's
/// pool (a chunk frame into its [`ChunkPool`]), so the fast path never frees memory.
// (`repr(transparent)`: the pool moves packets' frames in bulk, `pool::recycle_all`.)
#[repr(transparent)]
pub struct Packet {
    frame: ManuallyDrop<Box<Frame>>,
}

impl Drop for Packet {
    fn drop(&mut self) {
        // SAFETY: `frame` is never used again after this point; ManuallyDrop::take is
        // called exactly once, here.
        let f = unsafe { ManuallyDrop::take(&mut self.frame) };
        pool::recycle(f);
    }
}

impl Packet {
    pub(crate) fn from_frame(frame: Box<Frame>) -> Packet {
        Packet {
            frame: ManuallyDrop::new(frame),
        }
    }

    /// Gives up the frame without recycling it (the caller recycles it in bulk, or
    /// lends its chunk to the device).
    pub(crate) fn into_frame(self) -> Box<Frame> {
        let mut me = ManuallyDrop::new(self);
        // SAFETY: `me` is never dropped (ManuallyDrop), so the frame is taken exactly once.
        unsafe { ManuallyDrop::take(&mut me.frame) }
    }

    /// Appends `n` packets of `len` bytes (with the default headroom) to `batch`,
    /// taking their frames from the pool in one go. Contents are unspecified: the
    /// caller writes them (a port's receive path does, as a NIC's DMA would).
    pub fn alloc_into(batch: &mut PacketBatch, n: usize, len: usize) {
        pool::take_into(batch.vec_mut(), n, DEFAULT_HEADROOM, len, false);
    }

    /// Like [`Packet::alloc_into`] for a port's receive path: empty packets whose MAC
    /// header is marked at the data start (where the frame will be written).
    pub fn alloc_rx_into(batch: &mut PacketBatch, n: usize) {
        pool::take_into(batch.vec_mut(), n, DEFAULT_HEADROOM, 0, true);
    }

    /// The frame behind the packet.
    #[inline]
    pub(crate) fn frame(&self) -> &Frame {
        &self.frame
    }

    pub(crate) fn has_standard_frame(&self) -> bool {
        self.frame.is_standard()
    }

    /// A packet of `len` bytes with [`DEFAULT_HEADROOM`] in front. The contents are
    /// whatever the recycled frame held: callers write every byte they use.
    #[inline]
    pub fn alloc(len: usize) -> Packet {
        Packet::alloc_with_headroom(DEFAULT_HEADROOM, len)
    }

    /// A packet of `len` bytes with `headroom` bytes in front.
    #[inline]
    pub fn alloc_with_headroom(headroom: usize, len: usize) -> Packet {
        let mut f = pool::take(headroom + len);
        f.reset(headroom, len, false);
        Packet::from_frame(f)
    }

    /// A packet holding a copy of `data`.
    pub fn from_slice(data: &[u8]) -> Packet {
        let mut p = Packet::alloc(data.len());
        p.data_mut().copy_from_slice(data);
        p
    }

    /// Replaces the packet's data with a copy of `src`, keeping the headroom (a
    /// receive path's write into a fresh frame: one bounds check, one copy).
    #[inline]
    pub fn write_from(&mut self, src: &[u8]) {
        let h = self.frame.head as usize;
        match self.frame.buf_mut().get_mut(h..h + src.len()) {
            Some(dst) => {
                dst.copy_from_slice(src);
                self.frame.len = src.len() as u32;
            }
            None => {
                self.frame.len = 0;
                self.put(src.len());
                self.data_mut().copy_from_slice(src);
            }
        }
    }

    /// Like [`Packet::write_from`] for a packet of `len` <= N bytes whose source is
    /// readable for N bytes: copies a fixed N bytes (inlined moves, no call) and keeps
    /// `len`. The bytes past `len` land in tailroom, whose contents are unspecified.
    #[inline]
    pub fn write_from_fixed<const N: usize>(&mut self, src: &[u8; N], len: usize) {
        let f: &mut Frame = &mut self.frame;
        let h = f.head as usize;
        match f.buf_mut().get_mut(h..h + N) {
            Some(dst) if len <= N => {
                dst.copy_from_slice(src);
                f.len = len as u32;
            }
            _ => self.write_from(&src[..len.min(N)]),
        }
    }

    /// A zero-filled packet of `len` bytes.
    pub fn zeroed(len: usize) -> Packet {
        let mut p = Packet::alloc(len);
        p.data_mut().fill(0);
        p
    }

    #[inline]
    pub fn len(&self) -> usize {
        self.frame.len as usize
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.frame.len == 0
    }

    #[inline]
    pub fn data(&self) -> &[u8] {
        let h = self.frame.head as usize;
        let l = self.frame.len as usize;
        debug_assert!(h + l <= self.frame.capacity());
        // SAFETY: every method that moves `head` or `len` keeps head + len within the
        // buffer (push/put grow it first, pull/take clamp), so the range is in bounds.
        // This accessor runs several times per packet per element: no bounds check.
        unsafe { self.frame.buf().get_unchecked(h..h + l) }
    }

    #[inline]
    pub fn data_mut(&mut self) -> &mut [u8] {
        let h = self.frame.head as usize;
        let l = self.frame.len as usize;
        debug_assert!(h + l <= self.frame.capacity());
        // SAFETY: as in `data`: head + len never exceeds the buffer.
        unsafe { self.frame.buf_mut().get_unchecked_mut(h..h + l) }
    }

    /// Whole buffer, headroom and tailroom included.
    pub fn buffer(&self) -> &[u8] {
        self.frame.buf()
    }

    #[inline]
    pub fn headroom(&self) -> usize {
        self.frame.head as usize
    }

    #[inline]
    pub fn tailroom(&self) -> usize {
        self.frame.capacity() - self.frame.head as usize - self.frame.len as usize
    }

    #[inline]
    pub fn anno(&self) -> &Anno {
        &self.frame.anno
    }

    /// The annotations, writable. Marks all of them as possibly changed, so the next
    /// receive into this frame clears them all: a writer of the first
    /// [`HOT_ANNO_BYTES`] user bytes on a per-packet path uses
    /// [`Packet::set_user_anno`] instead.
    #[inline]
    pub fn anno_mut(&mut self) -> &mut Anno {
        self.frame.cold_anno = true;
        &mut self.frame.anno
    }

    /// Writes `bytes` into the user annotation area at `offset` (panics past its end,
    /// as indexing `anno_mut().user` does).
    #[inline]
    pub fn set_user_anno(&mut self, offset: usize, bytes: &[u8]) {
        let end = offset + bytes.len();
        if end > HOT_ANNO_BYTES {
            self.frame.cold_anno = true;
        }
        self.frame.anno.user[offset..end].copy_from_slice(bytes);
    }

    /// Sets Click's destination IP address annotation.
    #[inline]
    pub fn set_dst_ip_anno(&mut self, addr: [u8; 4]) {
        self.set_user_anno(crate::anno::DST_IP_ANNO_OFFSET, &addr);
    }

    /// Sets Click's destination IPv6 address annotation (over the IPv4 one).
    #[inline]
    pub fn set_dst_ip6_anno(&mut self, addr: [u8; 16]) {
        self.set_user_anno(crate::anno::DST_IP6_ANNO_OFFSET, &addr);
    }

    /// Prepends `n` bytes (Click's `push`); their contents are unspecified. Moves the
    /// packet into a larger buffer when the headroom is too small (rare: not on the fast
    /// path), headroom included, so bytes a `pull` left there stay in front of the data.
    ///
    /// # Panics
    /// If that buffer would exceed [`MAX_BUFFER`] bytes. Where `n` comes from a
    /// configuration or from packet contents, use [`Packet::try_push`].
    #[inline]
    pub fn push(&mut self, n: usize) {
        if !self.try_push(n) {
            cannot_grow(self.len(), n);
        }
    }

    /// [`Packet::push`] that refuses instead of panicking: false, with the packet
    /// unchanged, when the packet would need a buffer of more than [`MAX_BUFFER`] bytes.
    /// (Click's `push` kills the packet when it cannot reallocate; a caller drops it.)
    #[inline]
    #[must_use]
    pub fn try_push(&mut self, n: usize) -> bool {
        if n > self.headroom() && !self.regrow_front(n) {
            return false;
        }
        // `n <= head` now, so neither field can wrap.
        let f: &mut Frame = &mut self.frame;
        f.head -= n as u32;
        f.len += n as u32;
        true
    }

    /// Prepends the `N` bytes of `hdr` and marks them as the MAC header (Click's
    /// `push_mac_header`): one headroom check, one copy, no per-byte bounds checks.
    /// Panics as [`Packet::push`] does.
    #[inline]
    pub fn push_mac_header_bytes<const N: usize>(&mut self, hdr: &[u8; N]) {
        if N > self.headroom() && !self.regrow_front(N) {
            cannot_grow(self.len(), N);
        }
        // One load of the frame pointer: through `self.frame`, every field access after
        // a store reloads it (the compiler cannot tell the frame from the packet slot).
        let f: &mut Frame = &mut self.frame;
        let h = f.head as usize - N;
        debug_assert!(f.head as usize <= f.capacity());
        // SAFETY: `N <= head` (made so above) and `head <= cap` (a frame's invariant), so
        // bytes h..h + N lie inside the buffer; `&mut self` makes the access exclusive.
        // (Through `get_mut` the compiler kept a range check that cannot fail: 3
        // instructions in EtherEncap's per-packet loop.)
        let dst = unsafe { &mut *(f.buf_ptr().add(h) as *mut [u8; N]) };
        // A fixed-size array store (an inlined move), not a `memcpy` call.
        match (hdr.first_chunk::<8>(), hdr.last_chunk::<8>()) {
            // An Ethernet header (8 < N <= 16) as two overlapping 8-byte stores,
            // where the compiler splits an array move into one store per field.
            (Some(lo), Some(hi)) if N <= 16 => {
                dst[..8].copy_from_slice(lo);
                dst[N - 8..].copy_from_slice(hi);
            }
            _ => *dst = *hdr,
        }
        f.head = h as u32;
        f.len += N as u32;
        f.mac = h as i32;
    }

    /// Removes `n` bytes from the front (Click's `pull`); clamps at the length.
    #[inline]
    pub fn pull(&mut self, n: usize) {
        // One frame pointer load (see `push_mac_header_bytes`).
        let f: &mut Frame = &mut self.frame;
        // What is left, saturating at 0; the compiler then needs no clamp for `head`.
        let keep = (f.len as usize).saturating_sub(n) as u32;
        f.head += f.len - keep;
        f.len = keep;
    }

    /// Appends `n` bytes at the end (Click's `put`); their contents are unspecified.
    ///
    /// # Panics
    /// If the packet would need a buffer of more than [`MAX_BUFFER`] bytes. Where `n`
    /// comes from a configuration or from packet contents, use [`Packet::try_put`].
    #[inline]
    pub fn put(&mut self, n: usize) {
        if !self.try_put(n) {
            cannot_grow(self.len(), n);
        }
    }

    /// [`Packet::put`] that refuses instead of panicking: false, with the packet
    /// unchanged, when the packet would need a buffer of more than [`MAX_BUFFER`] bytes.
    #[inline]
    #[must_use]
    pub fn try_put(&mut self, n: usize) -> bool {
        if n > self.tailroom() && !self.regrow(0, n.saturating_add(DEFAULT_HEADROOM)) {
            return false;
        }
        // `n <= tailroom` now, so the length stays within the buffer.
        self.frame.len += n as u32;
        true
    }

    /// Removes `n` bytes from the end (Click's `take`); clamps at the length.
    #[inline]
    pub fn take(&mut self, n: usize) {
        let n = n.min(self.len()) as u32;
        self.frame.len -= n;
    }

    /// Sets the length to `len`, growing with unspecified bytes or trimming the tail.
    pub fn set_len(&mut self, len: usize) {
        if len >= self.len() {
            self.put(len - self.len());
        } else {
            self.take(self.len() - len);
        }
    }

    /// Moves the packet into a buffer with room for `n` bytes in front of the data and
    /// [`DEFAULT_HEADROOM`] more (as a fresh packet has after an encapsulation), or
    /// returns false. The caller has found `n` larger than the headroom.
    #[cold]
    #[inline(never)]
    fn regrow_front(&mut self, n: usize) -> bool {
        let front = (n - self.headroom()).saturating_add(DEFAULT_HEADROOM);
        self.regrow(front, DEFAULT_HEADROOM)
    }

    /// Moves the packet into a new buffer with `front` more bytes of headroom and `back`
    /// bytes of tailroom, or returns false, leaving it as it is, if that buffer would
    /// exceed [`MAX_BUFFER`].
    ///
    /// The old buffer up to the end of the data moves whole, as in Click's
    /// `expensive_uniqueify`: bytes a `pull` left in the headroom (a stripped Ethernet
    /// header that an `Unstrip` brings back) and the header positions that point at them
    /// stay where they were relative to the data.
    #[cold]
    #[inline(never)]
    fn regrow(&mut self, front: usize, back: usize) -> bool {
        let end = self.headroom() + self.len();
        let Some(cap) = front
            .checked_add(end)
            .and_then(|c| c.checked_add(back))
            .filter(|&c| c <= MAX_BUFFER)
        else {
            return false;
        };
        let mut nf = pool::take(cap);
        nf.buf_mut()[front..front + end].copy_from_slice(&self.frame.buf()[..end]);
        // Header positions move with the bytes. One past the data (at most the old
        // buffer's end, where `abs` clamps it) names no byte either way: it is clamped
        // to the new buffer, which keeps every position within `MAX_BUFFER`, an i32.
        let new_cap = nf.capacity() as i32;
        let moved = |o: i32| {
            if o == NO_HEADER {
                o
            } else {
                o.saturating_add(front as i32).min(new_cap)
            }
        };
        nf.head = (front + self.headroom()) as u32;
        nf.len = self.frame.len;
        nf.mac = moved(self.frame.mac);
        nf.net = moved(self.frame.net);
        nf.trans = moved(self.frame.trans);
        nf.copy_anno_from(&self.frame);
        // SAFETY: the old frame is taken out exactly once and replaced immediately.
        let old = unsafe { ManuallyDrop::take(&mut self.frame) };
        self.frame = ManuallyDrop::new(nf);
        pool::recycle(old);
        true
    }

    #[inline]
    fn rel(&self, abs: i32) -> Option<isize> {
        (abs != NO_HEADER).then(|| abs as isize - self.frame.head as isize)
    }

    #[inline(always)]
    fn abs(&self, rel: isize) -> i32 {
        let a = self.frame.head as isize + rel;
        // `max`/`min` rather than `clamp`, which is not always inlined (it can panic).
        a.max(0).min(self.frame.capacity() as isize) as i32
    }

    /// Offset of the MAC header from the start of the data (negative if it lies before).
    #[inline]
    pub fn mac_header_offset(&self) -> Option<isize> {
        self.rel(self.frame.mac)
    }

    /// Offset of the network header from the start of the data (negative if before).
    #[inline]
    pub fn network_header_offset(&self) -> Option<isize> {
        self.rel(self.frame.net)
    }

    /// Offset of the transport header from the start of the data (negative if before).
    #[inline]
    pub fn transport_header_offset(&self) -> Option<isize> {
        self.rel(self.frame.trans)
    }

    /// Network header length (transport offset minus network offset), 0 if unset.
    #[inline]
    pub fn network_header_length(&self) -> usize {
        if self.frame.net == NO_HEADER || self.frame.trans == NO_HEADER {
            0
        } else {
            (self.frame.trans - self.frame.net).max(0) as usize
        }
    }

    #[inline]
    pub fn set_mac_header(&mut self, rel: isize) {
        self.frame.mac = self.abs(rel);
    }

    /// Sets the network header at `rel` bytes from the data start with length `hlen`
    /// (so the transport header follows it), as Click's `set_network_header`.
    #[inline(always)]
    pub fn set_network_header(&mut self, rel: isize, hlen: usize) {
        self.frame.net = self.abs(rel);
        self.frame.trans = self.abs(rel + hlen as isize);
    }

    /// [`Packet::set_network_header`] for a header that lies inside the data
    /// (`off + hlen <= len()`, which the caller has checked, as a header check does):
    /// no clamping. Offsets past the data are still harmless (header views clamp them).
    #[inline]
    pub fn set_network_header_within(&mut self, off: usize, hlen: usize) {
        debug_assert!(off + hlen <= self.len());
        let net = self.frame.head + off as u32;
        self.frame.net = net as i32;
        self.frame.trans = (net + hlen as u32) as i32;
    }

    #[inline]
    pub fn set_transport_header(&mut self, rel: isize) {
        self.frame.trans = self.abs(rel);
    }

    pub fn clear_headers(&mut self) {
        self.frame.mac = NO_HEADER;
        self.frame.net = NO_HEADER;
        self.frame.trans = NO_HEADER;
    }

    #[inline(always)]
    fn slice_from(&self, abs: i32) -> Option<&[u8]> {
        if abs == NO_HEADER {
            return None;
        }
        let end = (self.frame.head + self.frame.len) as usize;
        let a = (abs as usize).min(end);
        debug_assert!(end <= self.frame.capacity());
        // SAFETY: head + len never exceeds the buffer (see `data`), and a <= end. Header
        // accessors run in every element's per-packet loop: no bounds check.
        Some(unsafe { self.frame.buf().get_unchecked(a..end) })
    }

    #[inline(always)]
    fn slice_from_mut(&mut self, abs: i32) -> Option<&mut [u8]> {
        if abs == NO_HEADER {
            return None;
        }
        let end = (self.frame.head + self.frame.len) as usize;
        let a = (abs as usize).min(end);
        debug_assert!(end <= self.frame.capacity());
        // SAFETY: as in `slice_from`.
        Some(unsafe { self.frame.buf_mut().get_unchecked_mut(a..end) })
    }

    /// Bytes from the MAC header to the end of the data (may start before `data()`).
    #[inline]
    pub fn mac_header(&self) -> Option<&[u8]> {
        self.slice_from(self.frame.mac)
    }

    /// Bytes from the network header to the end of the data.
    #[inline]
    pub fn network_header(&self) -> Option<&[u8]> {
        self.slice_from(self.frame.net)
    }

    #[inline]
    pub fn network_header_mut(&mut self) -> Option<&mut [u8]> {
        self.slice_from_mut(self.frame.net)
    }

    /// The first `N` bytes of the network header, if it is set and that many bytes of
    /// data follow its start: one comparison (an unset header, stored as a negative
    /// offset, reads as an offset past any buffer), where `network_header_mut` and a
    /// `first_chunk_mut` take three. For per-packet loops that edit a fixed header.
    #[inline(always)]
    pub fn network_header_chunk_mut<const N: usize>(&mut self) -> Option<&mut [u8; N]> {
        let f: &mut Frame = &mut self.frame;
        // `NO_HEADER` (and any offset before the buffer) is negative: as u32 it is at
        // least 2^31, past `head + len`, which stays below the buffer's u32 capacity.
        let start = f.net as u32 as u64;
        let end = u64::from(f.head) + u64::from(f.len);
        if start + N as u64 > end {
            return None;
        }
        // SAFETY: start + N <= head + len <= cap, so the N bytes lie inside the buffer;
        // `&mut self` makes the access exclusive.
        Some(unsafe { &mut *(f.buf_ptr().add(start as usize) as *mut [u8; N]) })
    }

    /// Bytes from the transport header to the end of the data.
    #[inline]
    pub fn transport_header(&self) -> Option<&[u8]> {
        self.slice_from(self.frame.trans)
    }

    #[inline]
    pub fn transport_header_mut(&mut self) -> Option<&mut [u8]> {
        self.slice_from_mut(self.frame.trans)
    }

    #[inline]
    pub fn mac_header_mut(&mut self) -> Option<&mut [u8]> {
        self.slice_from_mut(self.frame.mac)
    }
}

impl Clone for Packet {
    /// A deep copy into a fresh frame from the pool: headroom, data, header pointers and
    /// annotations are all preserved.
    fn clone(&self) -> Packet {
        let mut f = pool::take(self.frame.capacity());
        let end = (self.frame.head + self.frame.len) as usize;
        f.buf_mut()[..end].copy_from_slice(&self.frame.buf()[..end]);
        f.head = self.frame.head;
        f.len = self.frame.len;
        f.mac = self.frame.mac;
        f.net = self.frame.net;
        f.trans = self.frame.trans;
        f.copy_anno_from(&self.frame);
        Packet::from_frame(f)
    }
}

impl std::fmt::Debug for Packet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Packet({} bytes)", self.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::anno::PacketType;
    use crate::Timestamp;

    /// A packet whose frame is the one `p` had: the thread's pool hands back the frame
    /// it got last.
    fn reuse(p: Packet) -> Packet {
        let frame: *const Frame = p.frame();
        drop(p);
        let q = Packet::alloc(60);
        assert!(
            std::ptr::eq(q.frame(), frame),
            "the pool reuses the frame just freed"
        );
        q
    }

    #[test]
    fn heap_packets_start_a_cache_line_at_the_default_headroom() {
        // Minimum-size frames and jumbo ones, fresh and recycled through the pool.
        for round in 0..2 {
            let ps: Vec<Packet> = [60usize, 1514, 9000].iter().map(|&n| Packet::zeroed(n)).collect();
            for p in &ps {
                assert_eq!(
                    p.data().as_ptr() as usize % 64,
                    0,
                    "round {round}, {} bytes",
                    p.len()
                );
            }
        }
        // Bytes pushed in front of such a packet end where its line begins.
        let mut p = Packet::zeroed(46);
        p.push(14);
        assert_eq!((p.data().as_ptr() as usize + 14) % 64, 0);
    }

    #[test]
    fn a_reused_frame_has_every_annotation_cleared() {
        // Written through the per-packet accessors: the first line only.
        let mut p = Packet::alloc(60);
        p.set_dst_ip_anno([10, 0, 0, 1]);
        p.set_user_anno(HOT_ANNO_BYTES - 4, &[1, 2, 3, 4]);
        let q = reuse(p);
        assert_eq!(q.anno().user, [0; crate::anno::ANNO_SIZE]);

        // A user byte past the first line, through the same accessor.
        let mut p = q;
        p.set_user_anno(HOT_ANNO_BYTES, &[7]);
        p.set_user_anno(44, &[1, 2, 3, 4]);
        let q = reuse(p);
        assert_eq!(q.anno().user, [0; crate::anno::ANNO_SIZE]);

        // Everything else, through anno_mut.
        let mut p = q;
        let a = p.anno_mut();
        a.timestamp = Timestamp::new(5, 6);
        a.packet_type = PacketType::OtherHost;
        a.input_port = 3;
        a.input_queue = 2;
        a.rss_hash = 0xdead_beef;
        a.user[47] = 9;
        let q = reuse(p);
        let a = q.anno();
        assert_eq!(a.timestamp, Timestamp::ZERO);
        assert_eq!(a.packet_type, PacketType::Host);
        assert_eq!((a.input_port, a.input_queue, a.rss_hash), (0, 0, 0));
        assert_eq!(a.user, [0; crate::anno::ANNO_SIZE]);
    }

    #[test]
    fn copies_keep_annotations_past_the_first_line() {
        let mut p = Packet::from_slice(&[1, 2, 3]);
        p.anno_mut().timestamp = Timestamp::new(7, 8);
        p.set_user_anno(40, &[5]);
        let c = p.clone();
        assert_eq!(c.anno().timestamp, Timestamp::new(7, 8));
        assert_eq!(c.anno().user[40], 5);
        // A copy's cold annotations are cleared when its frame is reused, too.
        let q = reuse(c);
        assert_eq!(q.anno().timestamp, Timestamp::ZERO);
        assert_eq!(q.anno().user[40], 0);
    }

    #[test]
    fn push_pull_put_take() {
        let mut p = Packet::from_slice(&[1, 2, 3, 4]);
        assert_eq!(p.headroom(), DEFAULT_HEADROOM);
        p.push(2);
        p.data_mut()[..2].copy_from_slice(&[9, 9]);
        assert_eq!(p.data(), &[9, 9, 1, 2, 3, 4]);
        p.pull(3);
        assert_eq!(p.data(), &[2, 3, 4]);
        p.put(1);
        p.data_mut()[3] = 5;
        p.take(2);
        assert_eq!(p.data(), &[2, 3]);
        p.pull(10);
        assert!(p.is_empty());
    }

    #[test]
    fn push_beyond_headroom_keeps_data_and_headers() {
        let mut p = Packet::from_slice(&[7; 20]);
        p.set_network_header(0, 20);
        p.push(DEFAULT_HEADROOM + 10);
        assert_eq!(p.len(), 20 + DEFAULT_HEADROOM + 10);
        assert_eq!(&p.data()[DEFAULT_HEADROOM + 10..], &[7; 20]);
        assert_eq!(p.network_header_offset(), Some((DEFAULT_HEADROOM + 10) as isize));
        assert_eq!(p.network_header_length(), 20);
    }

    /// An Ethernet header (dst 00:11:22:33:44:55, src 66:77:88:99:aa:bb, IPv4) and the
    /// first 4 bytes of an IPv4 header, MAC header marked, stripped to the IP header with
    /// the network header marked there and the paint annotation set.
    fn stripped_frame() -> (Packet, [u8; 18]) {
        let bytes = [
            0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0x08, 0x00, 0x45, 0x00,
            0x00, 0x14,
        ];
        let mut p = Packet::from_slice(&bytes);
        p.set_mac_header(0);
        p.pull(14);
        p.set_network_header(0, 4);
        p.anno_mut().set_paint(9);
        (p, bytes)
    }

    #[test]
    fn a_push_that_moves_the_packet_keeps_the_bytes_before_the_data() {
        let (mut p, bytes) = stripped_frame();
        assert_eq!(p.headroom(), DEFAULT_HEADROOM + 14);
        // One byte more than the headroom: a new buffer.
        p.push(DEFAULT_HEADROOM + 15);
        assert_eq!(p.len(), DEFAULT_HEADROOM + 15 + 4);
        assert_eq!(&p.data()[DEFAULT_HEADROOM + 1..], &bytes[..]);
        // The headers still name the same bytes, and the annotations came along.
        assert_eq!(p.mac_header_offset(), Some(DEFAULT_HEADROOM as isize + 1));
        assert_eq!(p.mac_header(), Some(&bytes[..]));
        assert_eq!(p.network_header(), Some(&bytes[14..]));
        assert_eq!(p.network_header_length(), 4);
        assert_eq!(p.anno().paint(), 9);
        assert_eq!(p.headroom(), DEFAULT_HEADROOM);
    }

    #[test]
    fn a_put_that_moves_the_packet_keeps_the_bytes_before_the_data() {
        let (mut p, bytes) = stripped_frame();
        p.put(FRAME_DATA);
        assert_eq!(p.len(), 4 + FRAME_DATA);
        assert_eq!(&p.data()[..4], &bytes[14..]);
        assert_eq!(p.headroom(), DEFAULT_HEADROOM + 14);
        assert_eq!(&p.mac_header().unwrap()[..18], &bytes[..]);
        // Within the headroom now: the stripped header is back.
        p.push(14);
        assert_eq!(&p.data()[..18], &bytes[..]);
        assert_eq!(p.mac_header_offset(), Some(0));
        assert_eq!(p.network_header_offset(), Some(14));
        assert_eq!(p.anno().paint(), 9);
    }

    #[test]
    fn growth_past_the_largest_buffer_is_refused() {
        let mut p = Packet::from_slice(&[1, 2, 3]);
        p.set_network_header(1, 2);
        // Grown by n either way, the packet needs n + 259 bytes: its 3, the 128 of
        // headroom it has (a put) or gets anew (a push), and 128 spare at the end.
        for n in [MAX_BUFFER - 258, MAX_BUFFER, u32::MAX as usize, usize::MAX] {
            assert!(!p.try_push(n), "push {n}");
            assert!(!p.try_put(n), "put {n}");
        }
        // Refused means untouched.
        assert_eq!(p.data(), &[1, 2, 3]);
        assert_eq!(p.headroom(), DEFAULT_HEADROOM);
        assert_eq!(p.network_header_offset(), Some(1));
        // The largest growth fits exactly (one buffer of MAX_BUFFER bytes, zeroed).
        assert!(p.try_push(MAX_BUFFER - 259));
        assert_eq!(p.buffer().len(), MAX_BUFFER);
        assert_eq!(&p.data()[MAX_BUFFER - 259..], &[1, 2, 3]);
        assert_eq!(p.network_header_offset(), Some(MAX_BUFFER as isize - 258));
    }

    #[test]
    #[should_panic(
        expected = "a packet of 3 bytes cannot grow by 4294967296: packet buffers hold at most 2147483647 bytes"
    )]
    fn push_past_the_largest_buffer_panics_with_a_message() {
        Packet::from_slice(&[1, 2, 3]).push(1 << 32);
    }

    #[test]
    fn network_header_chunk_needs_a_set_header_with_enough_data_after_it() {
        let mut p = Packet::from_slice(&[0, 1, 2, 3, 4, 5, 6, 7]);
        assert!(p.network_header_chunk_mut::<1>().is_none(), "no header set");
        p.set_network_header(2, 4);
        let h = p.network_header_chunk_mut::<6>().expect("6 bytes from offset 2");
        assert_eq!(h, &[2, 3, 4, 5, 6, 7]);
        h[0] = 0xee;
        assert_eq!(p.data()[2], 0xee);
        assert!(p.network_header_chunk_mut::<7>().is_none(), "one byte short");
        // The header may start before the data (after a pull): still by position.
        p.pull(4);
        assert_eq!(p.network_header_chunk_mut::<6>().map(|h| h[1]), Some(3));
        // A take that leaves fewer bytes after the header start.
        p.take(2);
        assert!(p.network_header_chunk_mut::<6>().is_none());
        assert_eq!(p.network_header_chunk_mut::<4>().map(|h| h[3]), Some(5));
    }

    #[test]
    fn push_mac_header_bytes_prepends_and_marks_the_header() {
        let mut p = Packet::from_slice(&[1, 2, 3]);
        p.set_network_header(0, 3);
        p.push_mac_header_bytes(&[0xaa, 0xbb]);
        assert_eq!(p.data(), &[0xaa, 0xbb, 1, 2, 3]);
        assert_eq!(p.mac_header_offset(), Some(0));
        assert_eq!(p.network_header_offset(), Some(2));
        // Without headroom the data moves to a larger buffer first.
        let mut q = Packet::from_slice(&[5; 4]);
        q.pull(0);
        q.push(DEFAULT_HEADROOM);
        q.push_mac_header_bytes(&[9; 14]);
        assert_eq!(q.len(), 14 + DEFAULT_HEADROOM + 4);
        assert_eq!(&q.data()[..14], &[9; 14]);
        assert_eq!(&q.data()[14 + DEFAULT_HEADROOM..], &[5; 4]);
        assert_eq!(q.mac_header_offset(), Some(0));
    }

    #[test]
    fn put_beyond_tailroom_grows() {
        let mut p = Packet::from_slice(&[1]);
        p.put(FRAME_DATA + 100);
        assert_eq!(p.len(), FRAME_DATA + 101);
        assert_eq!(p.data()[0], 1);
    }

    #[test]
    fn headers_survive_strip() {
        let mut p = Packet::from_slice(&[0u8; 34]);
        p.set_mac_header(0);
        p.pull(14);
        p.set_network_header(0, 20);
        assert_eq!(p.mac_header_offset(), Some(-14));
        assert_eq!(p.mac_header().unwrap().len(), 34);
        assert_eq!(p.transport_header_offset(), Some(20));
    }

    #[test]
    fn write_from_replaces_data_and_grows_when_needed() {
        let mut p = Packet::from_slice(&[1, 2, 3, 4]);
        p.write_from(&[9, 8]);
        assert_eq!(p.data(), &[9, 8]);
        assert_eq!(p.headroom(), DEFAULT_HEADROOM);
        let big = vec![7u8; FRAME_DATA + 10];
        p.write_from(&big);
        assert_eq!(p.data(), &big[..]);
    }

    #[test]
    fn write_from_fixed_keeps_the_length() {
        let mut p = Packet::from_slice(&[1]);
        let mut src = [0u8; 64];
        src[..3].copy_from_slice(&[5, 6, 7]);
        p.write_from_fixed(&src, 3);
        assert_eq!(p.data(), &[5, 6, 7]);
        p.write_from_fixed(&src, 64);
        assert_eq!(p.len(), 64);
    }

    #[test]
    fn clone_is_deep() {
        let mut p = Packet::from_slice(&[1, 2, 3]);
        p.anno_mut().set_paint(7);
        let mut q = p.clone();
        q.data_mut()[0] = 42;
        assert_eq!(p.data(), &[1, 2, 3]);
        assert_eq!(q.data(), &[42, 2, 3]);
        assert_eq!(q.anno().paint(), 7);
    }
}
