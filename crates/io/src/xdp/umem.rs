//! The UMEM shared by a worker's AF_XDP sockets, one socket with its four rings (fill,
//! completion, receive, transmit), and the bookkeeping that keeps every UMEM frame in
//! exactly one place.
//!
//! A UMEM ([`Umem`]) is a region cut into frames (chunks) that is the packet pool of
//! the sockets using it: a [`ChunkPool`] of the `packet` crate. The first socket
//! registers it with the kernel; later sockets (the same queue of other interfaces)
//! bind with `XDP_SHARED_UMEM`, each with its own fill and completion rings. A frame is
//! then in one of these places: the UMEM's free list; a socket's fill or receive ring
//! (its receive side); a packet in the graph; a socket's transmit or completion ring
//! (its transmit side).
//!
//! Receive hands the graph packets whose data is the frame the kernel wrote (no copy).
//! Transmit posts a packet of the same UMEM from where it lies (no copy) and copies any
//! other packet into a free frame. Dropped packets return their frame to the free
//! list, from which the fill rings are topped up.

use packet::{ChunkPool, Chunks, PacketBatch};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

/// Sizes of one socket's rings and its share of the UMEM.
#[derive(Clone, Copy, Debug)]
pub struct Geometry {
    /// UMEM frames per queue (`XdpConfig::frames_per_queue`): the socket's receive side
    /// is topped up to at most min(ring_size, frames / 2), and to no more than its
    /// share of the UMEM it uses ([`Umem::receive_share`]).
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
    /// The longest frame the interface sends untagged: its MTU plus the 14-byte
    /// Ethernet header (a frame with an 802.1Q or 802.1ad tag may be 4 bytes longer).
    pub max_frame: u32,
}

/// A memory-mapped ring shared with the kernel.
///
/// On a producer ring (fill, transmit) `local` is our producer index and `cached` the
/// last consumer index read from the kernel; on a consumer ring (receive, completion)
/// `local` is our consumer index and `cached` the last producer index read.
struct Ring<T> {
    producer: *const AtomicU32,
    consumer: *const AtomicU32,
    flags: *const AtomicU32,
    descs: *mut T,
    size: u32,
    local: u32,
    cached: u32,
}

impl<T: Copy> Ring<T> {
    /// Maps the ring; the mapping is returned apart, to be kept in the socket's
    /// [`RingSet`] for as long as the ring is used.
    fn map(
        fd: &OwnedFd,
        off: &libc::xdp_ring_offset,
        size: u32,
        pgoff: libc::off_t,
    ) -> io::Result<(Ring<T>, Mapping)> {
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
        let ring = Ring {
            producer: at(off.producer) as *const AtomicU32,
            consumer: at(off.consumer) as *const AtomicU32,
            flags: at(off.flags) as *const AtomicU32,
            descs: at(off.desc) as *mut T,
            size,
            local: 0,
            cached: 0,
        };
        Ok((ring, Mapping { area, len: area_len }))
    }

    /// The shared producer and consumer indices, for counting entries from elsewhere.
    fn indices(&self) -> RingIndices {
        RingIndices {
            producer: self.producer,
            consumer: self.consumer,
        }
    }

    fn producer(&self) -> &AtomicU32 {
        // SAFETY: `producer` points at the ring's aligned u32 producer index inside its
        // mapping, which the socket's RingSet keeps mapped while the ring is used; the
        // kernel accesses it atomically too.
        unsafe { &*self.producer }
    }

    fn consumer(&self) -> &AtomicU32 {
        // SAFETY: as for `producer`.
        unsafe { &*self.consumer }
    }

    fn needs_wakeup(&self) -> bool {
        // SAFETY: as for `producer`: the flags word lies inside the mapping.
        let flags = unsafe { &*self.flags };
        flags.load(Ordering::Relaxed) & libc::XDP_RING_NEED_WAKEUP != 0
    }

    fn slot(&self, index: u32) -> *mut T {
        // SAFETY: pointer arithmetic only: `index & (size - 1)` < size, and `descs` is
        // followed by `size` entries inside the mapping.
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

    /// Takes back the published entries the kernel has not consumed: moves our
    /// producer index back to the kernel's consumer index. Returns the index of the
    /// first entry taken back and how many; the caller reads them with `entry` before
    /// writing again. Only sound while the kernel does not read the ring (see the
    /// caller).
    fn unpublish(&mut self) -> (u32, u32) {
        let consumer = self.consumer().load(Ordering::Acquire);
        let n = self.local.wrapping_sub(consumer);
        self.local = consumer;
        self.cached = consumer;
        self.producer().store(consumer, Ordering::Release);
        (consumer, n)
    }

    /// Reads the entry at ring index `index` (a producer ring's own entry).
    fn entry(&self, index: u32) -> T {
        // SAFETY: the slot lies inside the mapped ring (see `slot`); the caller reads
        // entries it wrote itself and took back from the kernel with `unpublish`.
        unsafe { self.slot(index).read_volatile() }
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

/// One ring's mapping; unmapped when dropped.
struct Mapping {
    area: *mut libc::c_void,
    len: usize,
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: `area` was mapped with `len` bytes by `Ring::map`; the RingSet that
        // owns this mapping goes only after every ring view of it.
        unsafe { libc::munmap(self.area, self.len) };
    }
}

/// Where a ring's shared producer and consumer indices are.
#[derive(Clone, Copy)]
struct RingIndices {
    producer: *const AtomicU32,
    consumer: *const AtomicU32,
}

/// The four ring mappings of one socket. The socket's ring views point into them, and
/// its UMEM holds a weak reference to count the chunks in them.
pub(crate) struct RingSet {
    _maps: [Mapping; 4],
    /// Fill, receive, transmit, completion.
    indices: [RingIndices; 4],
}

// SAFETY: the set only owns mappings (freed on drop from any thread) and reads the
// shared indices atomically; the kernel writes them concurrently anyway.
unsafe impl Send for RingSet {}
// SAFETY: see `Send`: shared access is atomic loads only.
unsafe impl Sync for RingSet {}

impl RingSet {
    /// Entries in each ring: (fill, receive, transmit, completion).
    fn occupancy(&self) -> [u32; 4] {
        self.indices.map(|r| {
            // SAFETY: the indices lie inside the mappings this set owns.
            let (p, c) = unsafe { (&*r.producer, &*r.consumer) };
            p.load(Ordering::Acquire).wrapping_sub(c.load(Ordering::Acquire))
        })
    }
}

/// Where the frames (chunks) of one UMEM are (a snapshot). The ring counts are summed
/// over every socket that uses the UMEM.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FrameCounts {
    /// Frames of the UMEM.
    pub total: u32,
    /// On the free list.
    pub free: u32,
    /// Held by packets (handed to the graph by a receive, not yet sent or dropped).
    pub packets: u32,
    /// In fill rings (given to the kernel for receiving).
    pub fill: u32,
    /// In receive rings (received, not yet read).
    pub rx: u32,
    /// In transmit rings (not yet taken by the kernel).
    pub tx: u32,
    /// In completion rings (sent, not yet reclaimed).
    pub completion: u32,
}

impl FrameCounts {
    /// Frames in none of the places: being transmitted by the kernel right now.
    /// Once transmission is over, this is zero unless a frame leaked.
    pub fn in_kernel(&self) -> i64 {
        i64::from(self.total)
            - i64::from(self.free)
            - i64::from(self.packets)
            - i64::from(self.fill)
            - i64::from(self.rx)
            - i64::from(self.tx)
            - i64::from(self.completion)
    }

    pub fn add(&self, o: &FrameCounts) -> FrameCounts {
        FrameCounts {
            total: self.total + o.total,
            free: self.free + o.free,
            packets: self.packets + o.packets,
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

/// The anonymous mapping behind a UMEM; unmapped when the last packet in it is gone.
struct Region {
    addr: *mut libc::c_void,
    len: usize,
}

// SAFETY: the region is plain memory; who may touch which bytes is the ChunkPool's
// business. Only its address moves between threads.
unsafe impl Send for Region {}
// SAFETY: see `Send`: the region itself is never accessed through `&Region`.
unsafe impl Sync for Region {}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `Umem::new`; the ChunkPool owning this region
        // (and every frame in it) is gone, and the kernel keeps its own reference to
        // the pages of sockets still closing.
        unsafe { libc::munmap(self.addr, self.len) };
    }
}

/// A UMEM: the frames one worker's AF_XDP sockets receive into and transmit from.
pub(crate) struct Umem {
    pool: Arc<ChunkPool>,
    /// Live sockets using the UMEM.
    members: AtomicU32,
    /// Frames each socket's receive side may hold: half the UMEM split among the
    /// members, so that the other half stays for transmit copies and packets in the
    /// graph however many interfaces share the UMEM.
    rx_share: AtomicU32,
    /// A socket the UMEM is registered with: later sockets bind to share it.
    owner: Mutex<Weak<OwnedFd>>,
    /// The rings of every socket using the UMEM, to count the frames in them.
    sockets: Mutex<Vec<Weak<RingSet>>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Umem {
    fn new(frames: u32, frame_size: u32) -> io::Result<Arc<Umem>> {
        let len = frames as usize * frame_size as usize;
        // SAFETY: anonymous private mapping; the result is checked.
        let addr = unsafe {
            libc::mmap(
                ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
                -1,
                0,
            )
        };
        if addr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let region = Region { addr, len };
        let base = NonNull::new(addr as *mut u8).ok_or_else(|| io::Error::other("mmap returned null"))?;
        // SAFETY: the mapping is `len` = frames * frame_size bytes, owned by `region`,
        // which the pool keeps until its last frame is gone; only the pool's frames and
        // the kernel (through the sockets, for frames lent to it) touch it.
        let pool = unsafe { ChunkPool::new(base, frame_size, frames, Box::new(region)) }
            .map_err(io::Error::other)?;
        Ok(Arc::new(Umem {
            pool,
            members: AtomicU32::new(0),
            rx_share: AtomicU32::new(frames / 2),
            owner: Mutex::new(Weak::new()),
            sockets: Mutex::new(Vec::new()),
        }))
    }

    pub(crate) fn pool(&self) -> &Arc<ChunkPool> {
        &self.pool
    }

    /// Frames in the UMEM.
    pub(crate) fn frames(&self) -> u32 {
        self.pool.chunks()
    }

    /// Live sockets using the UMEM.
    pub(crate) fn members(&self) -> u32 {
        self.members.load(Ordering::Relaxed)
    }

    /// The receive side each of `sockets` sockets sharing the UMEM may hold.
    pub(crate) fn receive_share(&self, sockets: u32) -> u32 {
        self.frames() / 2 / sockets.max(1)
    }

    fn join(&self) {
        let n = self.members.fetch_add(1, Ordering::Relaxed) + 1;
        self.rx_share.store(self.receive_share(n), Ordering::Relaxed);
    }

    fn leave(&self) {
        let n = self.members.fetch_sub(1, Ordering::Relaxed) - 1;
        self.rx_share.store(self.receive_share(n), Ordering::Relaxed);
    }

    /// Where the frames are now.
    pub(crate) fn frame_counts(&self) -> FrameCounts {
        let c = self.pool.counts();
        let mut f = FrameCounts {
            total: c.total,
            free: c.free,
            packets: c.packets,
            ..FrameCounts::default()
        };
        let mut sockets = lock(&self.sockets);
        sockets.retain(|w| w.strong_count() > 0);
        for rings in sockets.iter().filter_map(Weak::upgrade) {
            let [fill, rx, tx, completion] = rings.occupancy();
            f.fill += fill;
            f.rx += rx;
            f.tx += tx;
            f.completion += completion;
        }
        f
    }
}

impl Drop for Umem {
    fn drop(&mut self) {
        // Every socket is gone: forget the free and lent frames. The region goes when
        // the last packet in it does.
        self.pool.close();
    }
}

/// One UMEM per worker (queue index), shared by all of that worker's AF_XDP sockets
/// across the ports opened with the set ([`crate::XdpPort::open_shared`]), so a packet
/// received on one interface is sent on another without a copy.
///
/// The set holds its UMEMs weakly: a UMEM lives while a socket uses it.
pub struct UmemSet {
    frames: u32,
    frame_size: u32,
    umems: Mutex<Vec<Weak<Umem>>>,
}

impl UmemSet {
    /// Frames per UMEM of `brickroute run`: half of them are split among the receive
    /// sides of the interfaces sharing the UMEM (2,048 each, a ring's worth, for up to
    /// two interfaces; 819 each for five), the other half is left for transmit copies
    /// and packets in the graph.
    pub const DEFAULT_FRAMES: u32 = 8192;

    /// A set whose UMEMs have `frames` frames of `frame_size` bytes (2048 or 4096).
    pub fn new(frames: u32, frame_size: u32) -> Arc<UmemSet> {
        Arc::new(UmemSet {
            frames,
            frame_size,
            umems: Mutex::new(Vec::new()),
        })
    }

    pub fn frames(&self) -> u32 {
        self.frames
    }

    pub fn frame_size(&self) -> u32 {
        self.frame_size
    }

    /// The UMEM of worker (queue) `q`, made now if no socket uses it.
    pub(crate) fn umem(&self, q: usize) -> io::Result<Arc<Umem>> {
        let mut v = lock(&self.umems);
        if v.len() <= q {
            v.resize_with(q + 1, Weak::new);
        }
        if let Some(u) = v[q].upgrade() {
            return Ok(u);
        }
        let u = Umem::new(self.frames, self.frame_size)?;
        v[q] = Arc::downgrade(&u);
        Ok(u)
    }
}

impl std::fmt::Debug for UmemSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "UmemSet({} frames of {} bytes per worker)",
            self.frames, self.frame_size
        )
    }
}

/// A failed step while setting up a socket.
pub struct SetupError {
    pub step: &'static str,
    pub error: io::Error,
}

/// Whether a wakeup's error says the interface cannot send: it is down (ENETDOWN) or
/// the socket lost it (ENXIO: unbound, the interface went away).
fn link_gone(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::ENETDOWN) | Some(libc::ENXIO))
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

/// An AF_XDP socket bound to one queue of one interface, using a (shared) UMEM.
///
/// Dropping it leaves the UMEM's sockets (the others' receive share grows back). In
/// copy mode the frames it lent for receiving go back to the UMEM's free list once the
/// socket is closed (the kernel copies into them only while the socket is bound; the
/// socket keeps a bit a frame of which it lent). In zero-copy mode, and for frames on
/// its transmit side, they stay lent until the UMEM goes, since nothing tells when the
/// device is done with them.
pub struct Xsk {
    fill: Ring<u64>,
    completion: Ring<u64>,
    rx: Ring<libc::xdp_desc>,
    tx: Ring<libc::xdp_desc>,
    // The ring views above point into these mappings; the UMEM counts through them.
    /// `None` only while the socket is dropped (as `fd`).
    rings: Option<Arc<RingSet>>,
    /// `None` only while the socket is dropped.
    fd: Option<Arc<OwnedFd>>,
    /// The frames lent to the receive side (fill and receive rings, the kernel), a bit
    /// a UMEM chunk.
    rx_lent: Vec<u64>,
    /// log2 of the UMEM's chunk size (AF_XDP's aligned chunks are powers of two).
    chunk_shift: u32,
    umem: Arc<Umem>,
    geometry: Geometry,
    /// Frames in the fill or receive ring.
    rx_side: u32,
    /// Frames in the transmit or completion ring, or being sent.
    tx_side: u32,
    /// The receive side is topped up to this many frames at most (ring size and the
    /// port's frames per queue); less when the UMEM's share is smaller.
    rx_cap: u32,
    /// The last wakeup found the interface down (or gone): transmit refuses packets
    /// until a wakeup succeeds again.
    link_down: bool,
    /// Whether the socket shares a UMEM another socket registered.
    shared: bool,
    /// Packets of a transmit burst that are dropped once the UMEM is unlocked.
    spill: PacketBatch,
    /// Packets given to `transmit` longer than the interface's MTU allows or than a
    /// UMEM frame.
    pub tx_too_long: u64,
    /// Packets given to `transmit` while the interface was down (or gone).
    pub tx_link_down: u64,
    /// Packets given to `transmit` when no frame or ring entry was free.
    pub tx_no_room: u64,
    /// Packets sent from where they lay in the UMEM (no copy).
    pub tx_in_place: u64,
    /// Packets copied into a UMEM frame to be sent (their buffer was not of this UMEM).
    pub tx_copied: u64,
    /// Receive or completion descriptors naming no frame the kernel held (never
    /// expected; such descriptors are skipped).
    pub bad_descs: u64,
}

// SAFETY: the raw ring pointers point into mappings the Xsk keeps alive (`rings`) that
// stay valid wherever it moves; the kernel side is shared through atomics. An Xsk is
// used by one thread at a time (the port keeps it behind a mutex).
unsafe impl Send for Xsk {}

impl Drop for Xsk {
    fn drop(&mut self) {
        self.umem.leave();
        let copy_mode = matches!(self.zero_copy(), Ok(false));
        // The ring mappings hold the socket's file too: unmapped first (unless a
        // count of the UMEM's frames holds them this moment), then the descriptor
        // closed. When both were the last references the kernel has unbound the
        // socket, and waited for receives in progress, before the last of these calls
        // returns. (A child forked at this moment would hold the descriptor until its
        // exec closes it; `brickroute run` forks none.)
        let unmapped = {
            let _counting = lock(&self.umem.sockets);
            self.rings.take().is_some_and(|r| Arc::into_inner(r).is_some())
        };
        let closed = self.fd.take().is_some_and(|fd| Arc::into_inner(fd).is_some());
        if !(copy_mode && unmapped && closed) {
            return;
        }
        let umem = self.umem.clone();
        let mut chunks = umem.pool().lock();
        for (w, &word) in self.rx_lent.iter().enumerate() {
            let mut bits = word;
            while bits != 0 {
                let idx = w as u64 * 64 + u64::from(bits.trailing_zeros());
                bits &= bits - 1;
                chunks.reclaim(idx << self.chunk_shift);
            }
        }
    }
}

/// Receive batches a socket sharing a UMEM gets at once when it opens, before its
/// share is known ([`Xsk::open`]); a port refuses a share smaller than this.
pub(crate) const FIRST_FILL_BATCHES: u32 = 4;

impl Xsk {
    /// Creates a socket on queue `queue` of interface `ifindex` using `umem`: if a
    /// live socket already registered the UMEM, binds with `XDP_SHARED_UMEM` (the mode,
    /// zero-copy or copy, and need_wakeup follow that socket); otherwise registers it
    /// and binds in zero-copy mode (`zero_copy`) or copy mode, with
    /// `XDP_USE_NEED_WAKEUP`. With `fill_now`, gives the kernel its receive share of
    /// frames; otherwise [`FIRST_FILL_BATCHES`] receive batches, and the first
    /// [`Xsk::receive`] the rest, once every socket that is to share the UMEM has joined
    /// and the share is known.
    pub(crate) fn open(
        ifindex: u32,
        queue: u32,
        g: Geometry,
        zero_copy: bool,
        umem: &Arc<Umem>,
        fill_now: bool,
    ) -> Result<Xsk, SetupError> {
        // SAFETY: plain socket(2) call; the result is checked.
        let raw = unsafe { libc::socket(libc::AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
        step("open an AF_XDP socket", check(raw))?;
        // SAFETY: `raw` is a new descriptor owned by nobody else.
        let fd = Arc::new(unsafe { OwnedFd::from_raw_fd(raw) });

        // Held until bound, so two sockets cannot both register the UMEM.
        let mut owner = lock(&umem.owner);
        let share_with = owner.upgrade();
        if share_with.is_none() {
            let pool = umem.pool();
            let reg = libc::xdp_umem_reg {
                addr: pool.base() as u64,
                len: u64::from(pool.chunks()) * u64::from(pool.chunk_size()),
                chunk_size: pool.chunk_size(),
                headroom: 0,
                flags: 0,
                tx_metadata_len: 0,
            };
            step("register the UMEM", set_opt(&fd, libc::XDP_UMEM_REG, &reg))?;
        }
        // Every socket has its own fill and completion rings, also when sharing.
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
        step(
            "read the ring offsets",
            // SAFETY: `off` is writable for `len` bytes; the kernel writes at most that.
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
        let (fill, fill_map) = step(
            "map the fill ring",
            Ring::map(
                &fd,
                &off.fr,
                g.ring_size,
                libc::XDP_UMEM_PGOFF_FILL_RING as libc::off_t,
            ),
        )?;
        let (completion, completion_map) = step(
            "map the completion ring",
            Ring::map(
                &fd,
                &off.cr,
                g.ring_size,
                libc::XDP_UMEM_PGOFF_COMPLETION_RING as libc::off_t,
            ),
        )?;
        let (rx, rx_map) = step(
            "map the receive ring",
            Ring::map(&fd, &off.rx, g.ring_size, libc::XDP_PGOFF_RX_RING),
        )?;
        let (tx, tx_map) = step(
            "map the transmit ring",
            Ring::map(&fd, &off.tx, g.ring_size, libc::XDP_PGOFF_TX_RING),
        )?;
        let rings = Arc::new(RingSet {
            indices: [fill.indices(), rx.indices(), tx.indices(), completion.indices()],
            _maps: [fill_map, rx_map, tx_map, completion_map],
        });

        let (flags, shared_fd, what) = match &share_with {
            // The kernel refuses mode flags on a shared bind: they follow the owner.
            Some(o) => (
                libc::XDP_SHARED_UMEM,
                o.as_raw_fd() as u32,
                "bind the AF_XDP socket to the shared UMEM",
            ),
            None if zero_copy => (
                libc::XDP_USE_NEED_WAKEUP | libc::XDP_ZEROCOPY,
                0,
                "bind the AF_XDP socket in zero-copy mode",
            ),
            None => (
                libc::XDP_USE_NEED_WAKEUP | libc::XDP_COPY,
                0,
                "bind the AF_XDP socket in copy mode",
            ),
        };
        let addr = libc::sockaddr_xdp {
            sxdp_family: libc::AF_XDP as u16,
            sxdp_flags: flags,
            sxdp_ifindex: ifindex,
            sxdp_queue_id: queue,
            sxdp_shared_umem_fd: shared_fd,
        };
        step(
            what,
            // SAFETY: `addr` is a valid sockaddr_xdp of the size passed.
            check(unsafe {
                libc::bind(
                    fd.as_raw_fd(),
                    &addr as *const libc::sockaddr_xdp as *const libc::sockaddr,
                    std::mem::size_of::<libc::sockaddr_xdp>() as libc::socklen_t,
                )
            }),
        )?;
        if share_with.is_none() {
            *owner = Arc::downgrade(&fd);
        }
        drop(owner);
        lock(&umem.sockets).push(Arc::downgrade(&rings));
        umem.join();

        let mut xsk = Xsk {
            fill,
            completion,
            rx,
            tx,
            rings: Some(rings),
            fd: Some(fd),
            rx_lent: vec![0; umem.frames().div_ceil(64) as usize],
            chunk_shift: umem.pool().chunk_size().trailing_zeros(),
            umem: umem.clone(),
            geometry: g,
            rx_side: 0,
            tx_side: 0,
            rx_cap: g.ring_size.min(g.frames / 2),
            link_down: false,
            shared: share_with.is_some(),
            spill: PacketBatch::new(),
            tx_too_long: 0,
            tx_link_down: 0,
            tx_no_room: 0,
            tx_in_place: 0,
            tx_copied: 0,
            bad_descs: 0,
        };
        let umem = xsk.umem.clone();
        let mut chunks = umem.pool().lock();
        if fill_now {
            xsk.top_up_fill(&mut chunks, true);
        } else {
            // A few batches now, so that frames arriving between the program's attach
            // and the worker's first poll are received, not dropped; the rest of the
            // share once every socket has joined. The port refuses a share smaller than
            // this, so these first fills never take more than half the UMEM.
            let first = (FIRST_FILL_BATCHES * g.rx_batch).min(xsk.fill_target());
            xsk.fill_toward(&mut chunks, first, true);
        }
        drop(chunks);
        Ok(xsk)
    }

    /// Records that the chunk holding `addr` is lent to the receive side (`lent`) or
    /// came back from it.
    fn mark_rx(&mut self, addr: u64, lent: bool) {
        let idx = (addr >> self.chunk_shift) as usize;
        if let Some(word) = self.rx_lent.get_mut(idx / 64) {
            let bit = 1u64 << (idx % 64);
            if lent {
                *word |= bit;
            } else {
                *word &= !bit;
            }
        }
    }

    /// Frames the receive side is topped up to: the socket's cap, or its share of the
    /// UMEM when more sockets share it than the cap allows for.
    fn fill_target(&self) -> u32 {
        self.rx_cap.min(self.umem.rx_share.load(Ordering::Relaxed))
    }

    pub fn fd(&self) -> &OwnedFd {
        self.fd.as_ref().expect("the socket is open until dropped")
    }

    /// Whether the socket joined a UMEM another socket registered.
    pub fn shares_umem(&self) -> bool {
        self.shared
    }

    /// Whether the kernel moves this socket's frames in zero-copy mode.
    pub fn zero_copy(&self) -> io::Result<bool> {
        // SAFETY: all-zero is a valid xdp_options (one integer).
        let mut o: libc::xdp_options = unsafe { std::mem::zeroed() };
        let mut len = std::mem::size_of::<libc::xdp_options>() as libc::socklen_t;
        // SAFETY: `o` is writable for `len` bytes; the kernel writes at most that.
        check(unsafe {
            libc::getsockopt(
                self.fd().as_raw_fd(),
                libc::SOL_XDP,
                libc::XDP_OPTIONS,
                &mut o as *mut _ as *mut libc::c_void,
                &mut len,
            )
        })?;
        Ok(o.flags & libc::XDP_OPTIONS_ZEROCOPY != 0)
    }

    /// The socket's UMEM, as a packet pool.
    pub fn pool(&self) -> &Arc<ChunkPool> {
        self.umem.pool()
    }

    /// Gives the kernel free frames for receiving, up to `fill_target` on the receive
    /// side; unless `force`, only once at least `rx_batch` (k_p) can be given at once.
    fn top_up_fill(&mut self, chunks: &mut Chunks<'_>, force: bool) {
        self.fill_toward(chunks, self.fill_target(), force);
    }

    /// [`Xsk::top_up_fill`] up to `target` frames on the receive side.
    fn fill_toward(&mut self, chunks: &mut Chunks<'_>, target: u32, force: bool) {
        let want = target.saturating_sub(self.rx_side);
        // A batch larger than the receive side would never be reached: cap it.
        let batch = self.geometry.rx_batch.min(target);
        if want == 0 || (!force && want < batch) {
            return;
        }
        if chunks.free() < want {
            self.reclaim_locked(chunks);
        }
        let n = want.min(chunks.free()).min(self.fill.free_entries(want));
        let mut given = 0;
        while given < n {
            let Some(addr) = chunks.lend() else { break };
            self.mark_rx(addr, true);
            self.fill.write(given, addr);
            given += 1;
        }
        self.fill.submit(given);
        self.rx_side += given;
    }

    /// Appends up to `max` received packets to `batch`: each is the UMEM frame the
    /// kernel wrote (no copy). Tops up the fill ring from the UMEM's free list, and
    /// kicks the kernel if it asks for it. Returns (packets, bytes).
    pub fn receive(&mut self, batch: &mut PacketBatch, max: usize) -> (usize, u64) {
        let n = self.rx.available().min(max as u32);
        let target = self.fill_target();
        if n == 0 && target.saturating_sub(self.rx_side) < self.geometry.rx_batch.min(target) {
            // An idle poll: nothing to read and no fill batch due; the UMEM stays
            // unlocked (a polling worker spins here).
            if self.fill.needs_wakeup() {
                self.kick_receive();
            }
            return (0, 0);
        }
        let mut bytes = 0u64;
        let umem = self.umem.clone();
        let mut chunks = umem.pool().lock();
        if n > 0 {
            for i in 0..n {
                let d = self.rx.read(i);
                match chunks.receive(d.addr, d.len) {
                    Some(p) => {
                        self.mark_rx(d.addr, false);
                        bytes += u64::from(d.len);
                        batch.push(p);
                    }
                    None => self.bad_descs += 1,
                }
            }
            self.rx.release(n);
            self.rx_side -= n;
        }
        self.top_up_fill(&mut chunks, false);
        drop(chunks);
        if self.fill.needs_wakeup() {
            self.kick_receive();
        }
        (n as usize, bytes)
    }

    /// Queues the packets of `batch` on the transmit ring and kicks the kernel if it
    /// asks for it; the batch is empty on return. A packet whose buffer is a frame of
    /// this socket's UMEM is sent from where it lies; any other is copied into a free
    /// frame. Packets that find no free frame or ring entry, or are longer than the
    /// interface's MTU allows, are dropped and counted; so is the whole burst while the
    /// interface is down (the kernel's wakeup says ENETDOWN or ENXIO), including what
    /// was queued and not yet read. Returns (packets, bytes) accepted.
    pub fn transmit(&mut self, batch: &mut PacketBatch) -> (usize, u64) {
        if self.link_down {
            // A wakeup with nothing new in the ring tells whether the interface is back.
            match self.wake_transmit() {
                Err(e) if link_gone(&e) => {
                    self.tx_link_down += batch.len() as u64;
                    batch.clear();
                    return (0, 0);
                }
                _ => self.link_down = false,
            }
        }
        let umem = self.umem.clone();
        let mut chunks = umem.pool().lock();
        let want = batch.len() as u32;
        if chunks.free() < want || self.completion.available() >= self.geometry.tx_batch {
            self.reclaim_locked(&mut chunks);
        }
        let room = want.min(self.tx.free_entries(want));
        let frame_size = self.geometry.frame_size as usize;
        let mut queued = 0u32;
        let mut bytes = 0u64;
        for (i, p) in batch.drain().enumerate() {
            if i as u32 >= room {
                self.tx_no_room += 1;
                self.spill.push(p);
                continue;
            }
            if p.len() > frame_size || !self.fits_mtu(p.data()) {
                self.tx_too_long += 1;
                self.spill.push(p);
                continue;
            }
            let (addr, len) = match chunks.lend_packet(p) {
                Ok(sent) => {
                    self.tx_in_place += 1;
                    sent
                }
                Err(p) => match chunks.lend_copy(p.data()) {
                    Some(addr) => {
                        self.tx_copied += 1;
                        let len = p.len() as u32;
                        self.spill.push(p);
                        (addr, len)
                    }
                    None => {
                        self.tx_no_room += 1;
                        self.spill.push(p);
                        continue;
                    }
                },
            };
            self.tx.write(
                queued,
                libc::xdp_desc {
                    addr,
                    len,
                    options: 0,
                },
            );
            queued += 1;
            bytes += u64::from(len);
        }
        drop(chunks);
        // Dropped outside the UMEM's lock: a packet of this UMEM returns to it.
        self.spill.clear();
        if queued > 0 {
            self.tx.submit(queued);
            self.tx_side += queued;
        }
        if self.tx.needs_wakeup() && self.tx.queued_for_kernel() > 0 {
            if let Err(e) = self.kick_transmit() {
                if link_gone(&e) {
                    self.link_down = true;
                    let (n, b) = self.withdraw_unsent(queued);
                    queued -= n;
                    bytes -= b;
                }
            }
        }
        (queued as usize, bytes)
    }

    /// Whether a frame fits the interface's MTU: at most MTU + 14 bytes, or 4 more when
    /// it carries an 802.1Q or 802.1ad tag. Copy-mode AF_XDP does not check it, and a
    /// veth or a driver would send (or the peer take) what AF_PACKET refuses.
    fn fits_mtu(&self, data: &[u8]) -> bool {
        let len = data.len() as u64;
        let max = u64::from(self.geometry.max_frame);
        len <= max || (len <= max + 4 && matches!(data.get(12..14), Some([0x81, 0x00]) | Some([0x88, 0xa8])))
    }

    /// After a wakeup found the interface down: takes back every transmit descriptor
    /// the kernel has not read, returns its frame to the free list and counts it as
    /// refused, so that nothing is sent late when the interface comes back up (as
    /// AF_PACKET refuses what it is given while the interface is down). Returns how
    /// many of the burst just queued (its last `this_burst` entries) were taken back,
    /// and their bytes.
    ///
    /// The kernel reads the transmit ring only in a wakeup (sendmsg, poll) or a
    /// zero-copy driver's pass, and each of those first checks that the interface is
    /// up and the socket bound (`xsk_check_common`, failing with ENETDOWN or ENXIO as
    /// our wakeup just did): while it is down nothing reads the entries taken back.
    /// Only an interface brought back up in the few instructions between that wakeup
    /// and this, with another thread polling the socket right then, could have the
    /// kernel read them as they are taken back.
    fn withdraw_unsent(&mut self, this_burst: u32) -> (u32, u64) {
        let (first, n) = self.tx.unpublish();
        let mine = this_burst.min(n);
        let mut bytes = 0u64;
        let umem = self.umem.clone();
        let mut chunks = umem.pool().lock();
        for i in 0..n {
            let d = self.tx.entry(first.wrapping_add(i));
            if i >= n - mine {
                bytes += u64::from(d.len);
            }
            if !chunks.reclaim(d.addr) {
                self.bad_descs += 1;
            }
        }
        drop(chunks);
        self.tx_side -= n;
        self.tx_link_down += u64::from(n);
        (mine, bytes)
    }

    /// Takes the frames the kernel has finished sending back onto the free list.
    pub fn reclaim_completions(&mut self) {
        let umem = self.umem.clone();
        let mut chunks = umem.pool().lock();
        self.reclaim_locked(&mut chunks);
    }

    fn reclaim_locked(&mut self, chunks: &mut Chunks<'_>) {
        let n = self.completion.available();
        for i in 0..n {
            let addr = self.completion.read(i);
            if !chunks.reclaim(addr) {
                self.bad_descs += 1;
            }
        }
        if n > 0 {
            self.completion.release(n);
            self.tx_side -= n;
        }
    }
    /// Asks the kernel to process the transmit ring. In copy mode each call sends a
    /// bounded number of frames (and answers EAGAIN when more are left), so it repeats
    /// while the ring still has entries.
    /// Returns the last call's error other than EAGAIN.
    fn kick_transmit(&mut self) -> io::Result<()> {
        let max_calls = self.geometry.ring_size / 16 + 2;
        for _ in 0..max_calls {
            match self.wake_transmit() {
                Err(e) if e.raw_os_error() == Some(libc::EAGAIN) => {
                    if self.tx.queued_for_kernel() == 0 {
                        break;
                    }
                }
                r => return r,
            }
        }
        Ok(())
    }

    /// One transmit wakeup.
    fn wake_transmit(&self) -> io::Result<()> {
        // SAFETY: a zero-length sendto with no buffer and no address is the
        // documented AF_XDP transmit wakeup.
        let r = unsafe {
            libc::sendto(
                self.fd().as_raw_fd(),
                ptr::null(),
                0,
                libc::MSG_DONTWAIT,
                ptr::null(),
                0,
            )
        };
        if r < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(())
        }
    }

    fn kick_receive(&mut self) {
        // SAFETY: a zero-length non-blocking recvfrom with no buffer is the documented
        // AF_XDP receive wakeup; nothing is written.
        unsafe {
            libc::recvfrom(
                self.fd().as_raw_fd(),
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
                self.fd().as_raw_fd(),
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

    /// Where the frames of the socket's UMEM are now (over all its sockets).
    pub fn frame_counts(&self) -> FrameCounts {
        self.umem.frame_counts()
    }

    /// Frames this socket gave the kernel that are in none of its rings: being sent
    /// right now, or leaked once nothing is being sent.
    pub fn frames_in_flight(&self) -> i64 {
        let [fill, rx, tx, completion] = self.rings.as_ref().map_or([0; 4], |r| r.occupancy());
        i64::from(self.rx_side) + i64::from(self.tx_side)
            - i64::from(fill)
            - i64::from(rx)
            - i64::from(tx)
            - i64::from(completion)
    }
}
