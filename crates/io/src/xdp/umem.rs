//! One AF_XDP socket with its own UMEM and its four rings (fill, completion, receive,
//! transmit), and the bookkeeping that keeps every UMEM frame in exactly one place.
//!
//! Where a frame can be: on the free list (ours), in the fill ring or the receive ring
//! (the receive side), in the transmit ring or the completion ring (the transmit side).
//! The receive side is kept at most `fill_target` frames, so the transmit side always
//! has the rest: neither direction can starve the other.

use packet::{Packet, PacketBatch};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::ptr;
use std::sync::atomic::{AtomicU32, Ordering};

/// Received frames up to this size are copied with fixed-size moves.
const SHORT_FRAME: usize = 64;

/// Sizes of one socket's UMEM and rings.
#[derive(Clone, Copy, Debug)]
pub struct Geometry {
    /// UMEM frames (chunks).
    pub frames: u32,
    /// Bytes per frame: 2048 or 4096.
    pub frame_size: u32,
    /// Entries of each ring (a power of two).
    pub ring_size: u32,
    /// Fill-ring top-ups wait until this many frames can be added (k_p).
    pub rx_batch: u32,
    /// Completions are reclaimed once this many are there (k_n), or when a transmit
    /// burst needs the frames.
    pub tx_batch: u32,
}

/// A memory-mapped ring shared with the kernel.
///
/// On a producer ring (fill, transmit) `local` is our producer index and `cached` the
/// last consumer index read from the kernel; on a consumer ring (receive, completion)
/// `local` is our consumer index and `cached` the last producer index read.
struct Ring<T> {
    area: *mut libc::c_void,
    area_len: usize,
    producer: *const AtomicU32,
    consumer: *const AtomicU32,
    flags: *const AtomicU32,
    descs: *mut T,
    size: u32,
    local: u32,
    cached: u32,
}

impl<T: Copy> Ring<T> {
    fn map(fd: &OwnedFd, off: &libc::xdp_ring_offset, size: u32, pgoff: libc::off_t) -> io::Result<Ring<T>> {
        let area_len = off.desc as usize + size as usize * std::mem::size_of::<T>();
        // SAFETY: mapping a region the kernel created for this socket (ring sizes were
        // set before); the result is checked before use.
        let area = unsafe {
            libc::mmap(
                ptr::null_mut(),
                area_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd.as_raw_fd(),
                pgoff,
            )
        };
        if area == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let at = |o: u64| (area as usize + o as usize) as *mut u8;
        Ok(Ring {
            area,
            area_len,
            producer: at(off.producer) as *const AtomicU32,
            consumer: at(off.consumer) as *const AtomicU32,
            flags: at(off.flags) as *const AtomicU32,
            descs: at(off.desc) as *mut T,
            size,
            local: 0,
            cached: 0,
        })
    }

    fn producer(&self) -> &AtomicU32 {
        // SAFETY: `producer` points at the ring's aligned u32 producer index inside
        // `area`, which stays mapped for the ring's lifetime; the kernel accesses it
        // atomically too.
        unsafe { &*self.producer }
    }

    fn consumer(&self) -> &AtomicU32 {
        // SAFETY: as for `producer`.
        unsafe { &*self.consumer }
    }

    fn needs_wakeup(&self) -> bool {
        // SAFETY: as for `producer`: the flags word lies inside `area`.
        let flags = unsafe { &*self.flags };
        flags.load(Ordering::Relaxed) & libc::XDP_RING_NEED_WAKEUP != 0
    }

    fn slot(&self, index: u32) -> *mut T {
        // SAFETY (of the pointer arithmetic): `index & (size - 1)` < size, and `descs`
        // is followed by `size` entries inside `area`.
        unsafe { self.descs.add((index & (self.size - 1)) as usize) }
    }

    // Producer side.

    /// Entries we may write now, reading the kernel's consumer index only when the
    /// cached one does not show `want` free entries.
    fn free_entries(&mut self, want: u32) -> u32 {
        let mut free = self.size - self.local.wrapping_sub(self.cached);
        if free < want {
            self.cached = self.consumer().load(Ordering::Acquire);
            free = self.size - self.local.wrapping_sub(self.cached);
        }
        free
    }

    /// Writes entry `i` past our producer index (not yet visible to the kernel).
    fn write(&mut self, i: u32, v: T) {
        // SAFETY: the slot lies inside the mapped ring (see `slot`); the caller writes
        // only entries it reserved with `free_entries`, which the kernel does not read
        // until `submit` publishes them.
        unsafe { self.slot(self.local.wrapping_add(i)).write_volatile(v) }
    }

    /// Publishes `n` written entries to the kernel.
    fn submit(&mut self, n: u32) {
        self.local = self.local.wrapping_add(n);
        self.producer().store(self.local, Ordering::Release);
    }

    /// Entries written and not yet consumed by the kernel.
    fn queued_for_kernel(&self) -> u32 {
        self.local.wrapping_sub(self.consumer().load(Ordering::Acquire))
    }

    // Consumer side.

    /// Entries the kernel has produced that we have not consumed.
    fn available(&mut self) -> u32 {
        self.cached = self.producer().load(Ordering::Acquire);
        self.cached.wrapping_sub(self.local)
    }

    /// Reads entry `i` past our consumer index.
    fn read(&self, i: u32) -> T {
        // SAFETY: the slot lies inside the mapped ring; the caller reads only entries
        // `available` reported, which the kernel published with a release store and
        // does not rewrite until `release` hands them back.
        unsafe { self.slot(self.local.wrapping_add(i)).read_volatile() }
    }

    /// Hands `n` consumed entries back to the kernel.
    fn release(&mut self, n: u32) {
        self.local = self.local.wrapping_add(n);
        self.consumer().store(self.local, Ordering::Release);
    }
}

impl<T> Drop for Ring<T> {
    fn drop(&mut self) {
        // SAFETY: `area` was mapped with `area_len` bytes by `Ring::map` and nothing
        // refers to it after the ring is dropped.
        unsafe { libc::munmap(self.area, self.area_len) };
    }
}

/// Where one socket's frames are (a snapshot).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FrameCounts {
    /// Frames of the UMEM.
    pub total: u32,
    /// On the free list.
    pub free: u32,
    /// In the fill ring (given to the kernel for receiving).
    pub fill: u32,
    /// In the receive ring (received, not yet read).
    pub rx: u32,
    /// In the transmit ring (not yet taken by the kernel).
    pub tx: u32,
    /// In the completion ring (sent, not yet reclaimed).
    pub completion: u32,
}

impl FrameCounts {
    /// Frames in none of the five places: being transmitted by the kernel right now.
    /// Once transmission is over, this is zero unless a frame leaked.
    pub fn in_kernel(&self) -> i64 {
        i64::from(self.total)
            - i64::from(self.free)
            - i64::from(self.fill)
            - i64::from(self.rx)
            - i64::from(self.tx)
            - i64::from(self.completion)
    }

    pub fn add(&self, o: &FrameCounts) -> FrameCounts {
        FrameCounts {
            total: self.total + o.total,
            free: self.free + o.free,
            fill: self.fill + o.fill,
            rx: self.rx + o.rx,
            tx: self.tx + o.tx,
            completion: self.completion + o.completion,
        }
    }
}

/// The kernel's counters of one AF_XDP socket (`struct xdp_statistics`): where frames
/// were lost before the port saw them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KernelStats {
    /// Frames dropped for other reasons than a full ring (e.g. longer than a frame).
    pub rx_dropped: u64,
    pub rx_invalid_descs: u64,
    pub tx_invalid_descs: u64,
    /// Frames dropped because the receive ring was full (the port polled too slowly).
    pub rx_ring_full: u64,
    /// Times the kernel found the fill ring empty.
    pub rx_fill_ring_empty: u64,
    /// Times the kernel found the transmit ring empty when woken.
    pub tx_ring_empty: u64,
}

/// An AF_XDP socket bound to one queue of one interface, with its UMEM.
pub struct Xsk {
    // Rings and UMEM are unmapped before the socket is closed (field order).
    fill: Ring<u64>,
    completion: Ring<u64>,
    rx: Ring<libc::xdp_desc>,
    tx: Ring<libc::xdp_desc>,
    umem: *mut u8,
    umem_len: usize,
    fd: OwnedFd,
    geometry: Geometry,
    /// Frame addresses (chunk starts) we hold.
    free: Vec<u64>,
    /// Frames in the fill or receive ring.
    rx_side: u32,
    /// Frames in the transmit or completion ring, or being sent.
    tx_side: u32,
    /// The receive side is topped up to this many frames.
    fill_target: u32,
    /// Packets given to `transmit` that did not fit a frame (longer than a frame).
    pub tx_too_long: u64,
    /// Packets given to `transmit` when no frame or ring entry was free.
    pub tx_no_room: u64,
}

// SAFETY: the raw pointers point into mappings owned by this value (rings, UMEM) that
// stay valid wherever it moves; the kernel side is shared through atomics. An Xsk is
// used by one thread at a time (the port keeps it behind a mutex).
unsafe impl Send for Xsk {}

/// A failed step while setting up a socket.
pub struct SetupError {
    pub step: &'static str,
    pub error: io::Error,
}

fn step<T>(step: &'static str, r: io::Result<T>) -> Result<T, SetupError> {
    r.map_err(|error| SetupError { step, error })
}

fn check(r: libc::c_int) -> io::Result<()> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

fn set_opt<T>(fd: &OwnedFd, opt: libc::c_int, v: &T) -> io::Result<()> {
    // SAFETY: `v` is a live value of size_of::<T>() bytes, the size passed.
    check(unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_XDP,
            opt,
            v as *const T as *const libc::c_void,
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    })
}

impl Xsk {
    /// Creates a socket with a UMEM of `g.frames` frames, binds it to queue `queue` of
    /// interface `ifindex` in zero-copy mode (`zero_copy`) or copy mode, with
    /// `XDP_USE_NEED_WAKEUP`, and gives the kernel its first receive frames.
    pub fn open(ifindex: u32, queue: u32, g: Geometry, zero_copy: bool) -> Result<Xsk, SetupError> {
        // SAFETY: plain socket(2) call; the result is checked.
        let raw = unsafe { libc::socket(libc::AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
        step("open an AF_XDP socket", check(raw))?;
        // SAFETY: `raw` is a new descriptor owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };

        let umem_len = g.frames as usize * g.frame_size as usize;
        // SAFETY: anonymous private mapping; the result is checked.
        let umem = unsafe {
            libc::mmap(
                ptr::null_mut(),
                umem_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
                -1,
                0,
            )
        };
        if umem == libc::MAP_FAILED {
            return Err(SetupError {
                step: "allocate the UMEM",
                error: io::Error::last_os_error(),
            });
        }
        // From here the UMEM is unmapped by this guard unless ownership moves to the Xsk.
        struct Unmap(*mut libc::c_void, usize);
        impl Drop for Unmap {
            fn drop(&mut self) {
                // SAFETY: the mapping made above, not referenced after this.
                unsafe { libc::munmap(self.0, self.1) };
            }
        }
        let guard = Unmap(umem, umem_len);

        let reg = libc::xdp_umem_reg {
            addr: umem as u64,
            len: umem_len as u64,
            chunk_size: g.frame_size,
            headroom: 0,
            flags: 0,
            tx_metadata_len: 0,
        };
        step("register the UMEM", set_opt(&fd, libc::XDP_UMEM_REG, &reg))?;
        step(
            "size the fill ring",
            set_opt(&fd, libc::XDP_UMEM_FILL_RING, &g.ring_size),
        )?;
        step(
            "size the completion ring",
            set_opt(&fd, libc::XDP_UMEM_COMPLETION_RING, &g.ring_size),
        )?;
        step(
            "size the receive ring",
            set_opt(&fd, libc::XDP_RX_RING, &g.ring_size),
        )?;
        step(
            "size the transmit ring",
            set_opt(&fd, libc::XDP_TX_RING, &g.ring_size),
        )?;

        // SAFETY: all-zero is a valid xdp_mmap_offsets (plain integers).
        let mut off: libc::xdp_mmap_offsets = unsafe { std::mem::zeroed() };
        let mut len = std::mem::size_of::<libc::xdp_mmap_offsets>() as libc::socklen_t;
        // SAFETY: `off` is writable for `len` bytes; the kernel writes at most that.
        step(
            "read the ring offsets",
            check(unsafe {
                libc::getsockopt(
                    fd.as_raw_fd(),
                    libc::SOL_XDP,
                    libc::XDP_MMAP_OFFSETS,
                    &mut off as *mut _ as *mut libc::c_void,
                    &mut len,
                )
            }),
        )?;
        if len as usize != std::mem::size_of::<libc::xdp_mmap_offsets>() {
            return Err(SetupError {
                step: "read the ring offsets",
                error: io::Error::other("kernel without ring flags (Linux 5.4 or later is needed)"),
            });
        }
        let fill = step(
            "map the fill ring",
            Ring::map(
                &fd,
                &off.fr,
                g.ring_size,
                libc::XDP_UMEM_PGOFF_FILL_RING as libc::off_t,
            ),
        )?;
        let completion = step(
            "map the completion ring",
            Ring::map(
                &fd,
                &off.cr,
                g.ring_size,
                libc::XDP_UMEM_PGOFF_COMPLETION_RING as libc::off_t,
            ),
        )?;
        let rx = step(
            "map the receive ring",
            Ring::map(&fd, &off.rx, g.ring_size, libc::XDP_PGOFF_RX_RING),
        )?;
        let tx = step(
            "map the transmit ring",
            Ring::map(&fd, &off.tx, g.ring_size, libc::XDP_PGOFF_TX_RING),
        )?;

        let mode = if zero_copy {
            libc::XDP_ZEROCOPY
        } else {
            libc::XDP_COPY
        };
        let addr = libc::sockaddr_xdp {
            sxdp_family: libc::AF_XDP as u16,
            sxdp_flags: libc::XDP_USE_NEED_WAKEUP | mode,
            sxdp_ifindex: ifindex,
            sxdp_queue_id: queue,
            sxdp_shared_umem_fd: 0,
        };
        // SAFETY: `addr` is a valid sockaddr_xdp of the size passed.
        step(
            if zero_copy {
                "bind the AF_XDP socket in zero-copy mode"
            } else {
                "bind the AF_XDP socket in copy mode"
            },
            check(unsafe {
                libc::bind(
                    fd.as_raw_fd(),
                    &addr as *const libc::sockaddr_xdp as *const libc::sockaddr,
                    std::mem::size_of::<libc::sockaddr_xdp>() as libc::socklen_t,
                )
            }),
        )?;

        std::mem::forget(guard);
        let free = (0..g.frames)
            .rev()
            .map(|i| u64::from(i) * u64::from(g.frame_size))
            .collect();
        let mut xsk = Xsk {
            fill,
            completion,
            rx,
            tx,
            umem: umem as *mut u8,
            umem_len,
            fd,
            geometry: g,
            free,
            rx_side: 0,
            tx_side: 0,
            fill_target: g.ring_size.min(g.frames / 2),
            tx_too_long: 0,
            tx_no_room: 0,
        };
        xsk.top_up_fill(true);
        Ok(xsk)
    }

    pub fn fd(&self) -> &OwnedFd {
        &self.fd
    }

    /// Gives the kernel free frames for receiving, up to `fill_target` on the receive
    /// side; unless `force`, only once at least `rx_batch` (k_p) can be given at once.
    fn top_up_fill(&mut self, force: bool) {
        let want = self.fill_target - self.rx_side;
        // A batch larger than the receive side would never be reached: cap it.
        let batch = self.geometry.rx_batch.min(self.fill_target);
        if want == 0 || (!force && want < batch) {
            return;
        }
        let n = want.min(self.free.len() as u32).min(self.fill.free_entries(want));
        for i in 0..n {
            let addr = self
                .free
                .pop()
                .expect("the free list holds the receive side's share");
            self.fill.write(i, addr);
        }
        self.fill.submit(n);
        self.rx_side += n;
    }

    /// The chunk start of a frame address.
    fn chunk(&self, addr: u64) -> u64 {
        addr & !(u64::from(self.geometry.frame_size) - 1)
    }

    /// Moves up to `max` received frames into pool packets appended to `batch` (one copy
    /// each), recycles their UMEM frames into the fill ring, and kicks the kernel if it
    /// asks for it. Returns (packets, bytes).
    pub fn receive(&mut self, batch: &mut PacketBatch, max: usize) -> (usize, u64) {
        let n = self.rx.available().min(max as u32);
        let mut bytes = 0u64;
        if n > 0 {
            let first = batch.len();
            Packet::alloc_rx_into(batch, n as usize);
            let frame_size = self.geometry.frame_size as usize;
            for (i, p) in batch.as_mut_slice()[first..].iter_mut().enumerate() {
                let d = self.rx.read(i as u32);
                let off = d.addr as usize;
                let len = d.len as usize;
                let chunk_end = (off & !(frame_size - 1)) + frame_size;
                if off + len > chunk_end || chunk_end > self.umem_len {
                    // Not a frame of ours: the kernel never does this; keep the packet
                    // empty rather than read outside the UMEM.
                    p.write_from(&[]);
                } else if len <= SHORT_FRAME && off + SHORT_FRAME <= chunk_end {
                    // SAFETY: [off, off + SHORT_FRAME) lies inside this frame's chunk,
                    // which lies inside the UMEM (checked above); the kernel wrote the
                    // frame before publishing the descriptor and does not touch the
                    // chunk until we put it back in the fill ring.
                    let src = unsafe { &*(self.umem.add(off) as *const [u8; SHORT_FRAME]) };
                    p.write_from_fixed(src, len);
                } else {
                    // SAFETY: as above, for [off, off + len).
                    let src = unsafe { std::slice::from_raw_parts(self.umem.add(off), len) };
                    p.write_from(src);
                }
                bytes += len as u64;
                let chunk = self.chunk(d.addr);
                self.free.push(chunk);
            }
            self.rx.release(n);
            self.rx_side -= n;
        }
        self.top_up_fill(false);
        if self.fill.needs_wakeup() {
            self.kick_receive();
        }
        (n as usize, bytes)
    }

    /// Copies the packets of `batch` into UMEM frames (one copy each), queues them on the
    /// transmit ring and kicks the kernel if it asks for it; the batch is empty on
    /// return. Packets that find no free frame or ring entry are dropped and counted.
    /// Returns (packets, bytes) accepted.
    pub fn transmit(&mut self, batch: &mut PacketBatch) -> (usize, u64) {
        let tx_cap = self.geometry.frames - self.fill_target;
        let want = batch.len() as u32;
        let frames_for_burst = (self.free.len() as u32).min(tx_cap - self.tx_side);
        if frames_for_burst < want || self.completion.available() >= self.geometry.tx_batch {
            self.reclaim_completions();
        }
        let room = want
            .min(tx_cap - self.tx_side)
            .min(self.free.len() as u32)
            .min(self.tx.free_entries(want));
        let frame_size = self.geometry.frame_size as usize;
        let mut queued = 0u32;
        let mut bytes = 0u64;
        for p in batch.iter().take(room as usize) {
            let data = p.data();
            if data.len() > frame_size {
                self.tx_too_long += 1;
                continue;
            }
            let addr = self.free.pop().expect("room counts free frames");
            // SAFETY: `addr` is a chunk start of the UMEM (from the free list) and
            // data.len() <= frame_size, so the copy stays inside that chunk; frames on
            // the free list are not used by the kernel.
            unsafe { ptr::copy_nonoverlapping(data.as_ptr(), self.umem.add(addr as usize), data.len()) };
            self.tx.write(
                queued,
                libc::xdp_desc {
                    addr,
                    len: data.len() as u32,
                    options: 0,
                },
            );
            queued += 1;
            bytes += data.len() as u64;
        }
        self.tx_no_room += u64::from(want - room);
        batch.clear();
        if queued > 0 {
            self.tx.submit(queued);
            self.tx_side += queued;
        }
        if self.tx.needs_wakeup() && self.tx.queued_for_kernel() > 0 {
            self.kick_transmit();
        }
        (queued as usize, bytes)
    }

    /// Takes the frames the kernel has finished sending back onto the free list.
    pub fn reclaim_completions(&mut self) {
        let n = self.completion.available();
        for i in 0..n {
            let addr = self.completion.read(i);
            let chunk = self.chunk(addr);
            self.free.push(chunk);
        }
        if n > 0 {
            self.completion.release(n);
            self.tx_side -= n;
        }
    }

    /// Asks the kernel to process the transmit ring. In copy mode each call sends a
    /// bounded number of frames (and answers EAGAIN when more are left), so it repeats
    /// while the ring still has entries.
    fn kick_transmit(&mut self) {
        let max_calls = self.geometry.ring_size / 16 + 2;
        for _ in 0..max_calls {
            // SAFETY: a zero-length sendto with no buffer and no address is the
            // documented AF_XDP transmit wakeup.
            let r = unsafe {
                libc::sendto(
                    self.fd.as_raw_fd(),
                    ptr::null(),
                    0,
                    libc::MSG_DONTWAIT,
                    ptr::null(),
                    0,
                )
            };
            let again = r < 0 && io::Error::last_os_error().raw_os_error() == Some(libc::EAGAIN);
            if !again || self.tx.queued_for_kernel() == 0 {
                break;
            }
        }
    }

    fn kick_receive(&mut self) {
        // SAFETY: a zero-length non-blocking recvfrom with no buffer is the documented
        // AF_XDP receive wakeup; nothing is written.
        unsafe {
            libc::recvfrom(
                self.fd.as_raw_fd(),
                ptr::null_mut(),
                0,
                libc::MSG_DONTWAIT,
                ptr::null_mut(),
                ptr::null_mut(),
            )
        };
    }

    /// The kernel's counters of this socket (`XDP_STATISTICS`).
    pub fn kernel_stats(&self) -> io::Result<KernelStats> {
        // SAFETY: all-zero is a valid xdp_statistics (plain integers).
        let mut st: libc::xdp_statistics = unsafe { std::mem::zeroed() };
        let mut len = std::mem::size_of::<libc::xdp_statistics>() as libc::socklen_t;
        // SAFETY: `st` is writable for `len` bytes; the kernel writes at most that.
        check(unsafe {
            libc::getsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_XDP,
                libc::XDP_STATISTICS,
                &mut st as *mut _ as *mut libc::c_void,
                &mut len,
            )
        })?;
        Ok(KernelStats {
            rx_dropped: st.rx_dropped,
            rx_invalid_descs: st.rx_invalid_descs,
            tx_invalid_descs: st.tx_invalid_descs,
            rx_ring_full: st.rx_ring_full,
            rx_fill_ring_empty: st.rx_fill_ring_empty_descs,
            tx_ring_empty: st.tx_ring_empty_descs,
        })
    }

    /// Where the frames are now.
    pub fn frame_counts(&self) -> FrameCounts {
        FrameCounts {
            total: self.geometry.frames,
            free: self.free.len() as u32,
            fill: self.fill.queued_for_kernel(),
            rx: self
                .rx
                .producer()
                .load(Ordering::Acquire)
                .wrapping_sub(self.rx.local),
            tx: self.tx.queued_for_kernel(),
            completion: self
                .completion
                .producer()
                .load(Ordering::Acquire)
                .wrapping_sub(self.completion.local),
        }
    }
}

impl Drop for Xsk {
    fn drop(&mut self) {
        // SAFETY: the UMEM mapping made in `open` (umem_len bytes); the rings are
        // unmapped and the socket closed by their own drops. The kernel keeps its own
        // reference to the registered pages until the socket is gone.
        unsafe { libc::munmap(self.umem as *mut libc::c_void, self.umem_len) };
    }
}
