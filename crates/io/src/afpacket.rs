//! `AfPacketPort`: a Linux interface through AF_PACKET sockets.
//!
//! Queue q is one AF_PACKET socket bound to the interface:
//! - receive through a TPACKET_V3 ring mapped into the process. The kernel fills blocks
//!   of frames and hands a block over when it is full or when its retire timeout passes
//!   (1 ms by default, so a light load is not held back); [`Port::rx_burst`] walks the
//!   handed-over blocks without a system call, copies up to the burst into frames of the
//!   calling thread's pool (annotated with the kernel's packet type, receive time and
//!   the queue) and gives each block back once it has been read through. The socket
//!   asks for a virtio-net header before each frame (`PACKET_VNET_HDR`): a frame the
//!   kernel merged from several TCP segments or UDP datagrams (a NIC's GRO, a veth
//!   peer's TSO or USO) is cut back into them ([`packet::gso`]; a tunnel's, whose
//!   offload is about its inner packet, passes whole) and a partial checksum (a veth
//!   peer's checksum offload) completed where the header says it starts, so the
//!   configuration sees the packets as their sender meant them;
//! - with N queues, the N sockets join one `PACKET_FANOUT` group whose BPF program
//!   spreads the interface's traffic over them as a multi-queue NIC's RSS does: the
//!   Toeplitz hash of a frame's addresses and ports picks an entry of a 128-entry
//!   indirection table, which names the queue (a flow stays on one queue); flow rules
//!   ahead of the hash send the frames they match to queues of their own. The key, the
//!   table and the rules change while the port runs ([`Port::update_rss`], see
//!   [`rss`]). Where the
//!   kernel refuses the program, the group runs in hash mode instead: the kernel's own
//!   flow hash, with no settings. The group's id is allocated by the kernel
//!   (`PACKET_FANOUT_FLAG_UNIQUEID`), so two ports never share a group;
//! - transmit with one `sendmmsg` per burst on a socket with `PACKET_QDISC_BYPASS` (the
//!   frame goes to the driver without the queueing discipline), each frame after a
//!   virtio-net header that asks for no offload;
//! - `PACKET_IGNORE_OUTGOING`: the ring never sees frames sent out of the interface, by
//!   this port or anyone else;
//! - VLAN tags the kernel moved out of a frame (into the ring header) are put back after
//!   the MAC addresses, as libpcap does, so a frame arrives as it was on the wire.
//!
//! The interface is put in promiscuous mode (a router forwards frames addressed to other
//! MACs) through a `PACKET_MR_PROMISC` membership of queue 0's socket: the kernel counts
//! it and withdraws it when the socket closes, so the interface's previous state comes
//! back when the port is dropped, or if the process dies.

mod rss;

pub use rss::{rss_program_build_time, rss_program_cost, ProgramCost};

use crate::error::DeviceError;
use crate::port::{CachePadded, Port, QueueCounters, QueueStats};
use classify::RssSettings;
use packet::anno::PacketType;
use packet::gso::GsoKind;
use packet::{Packet, PacketBatch, Timestamp, MAX_BATCH};
use std::collections::VecDeque;
use std::ffi::CString;
use std::mem::size_of;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::ptr::NonNull;
use std::sync::atomic::{fence, AtomicU64, Ordering};
use std::sync::Mutex;

/// Sizes of an [`AfPacketPort`]'s receive rings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AfPacketConfig {
    /// Bytes per ring block: a power of two, a multiple of the page size, and large
    /// enough for the largest frame (with its ~80-byte ring header).
    pub block_size: usize,
    /// Blocks per queue.
    pub block_count: usize,
    /// Milliseconds after which the kernel hands over a block that is not full.
    pub block_timeout_ms: u32,
    /// Put the interface in promiscuous mode while the port is open.
    pub promiscuous: bool,
}

impl Default for AfPacketConfig {
    /// 64 blocks of 128 KiB per queue (8 MiB: about 58 000 minimum-size frames, 0.2 s
    /// of a veth's 0.3 Mpps, to ride out a worker's scheduling hiccups), 1 ms retire
    /// timeout, promiscuous.
    fn default() -> Self {
        AfPacketConfig {
            block_size: 128 * 1024,
            block_count: 64,
            block_timeout_ms: 1,
            promiscuous: true,
        }
    }
}

/// A Linux network interface as a port with N queues (one AF_PACKET socket each).
///
/// Each queue's receive state and transmit scratch sit behind their own mutex. The
/// `Port` contract has one worker drive a queue at a time, so the lock is never
/// contended on the fast path and costs one atomic exchange per burst (measured: about
/// 7 ns lock + unlock on this machine, against microseconds per burst for the copies
/// and the `sendmmsg` call); it keeps the port sound when a configuration does share a
/// queue (a `ToDevice` with an explicit QUEUE transmits from every worker).
pub struct AfPacketPort {
    name: String,
    ifindex: i32,
    queues: Vec<Queue>,
    counters: Vec<CachePadded<QueueCounters>>,
    fanout_group: Option<u16>,
    rss: Mutex<Steering>,
}

/// How the port spreads received frames over its queues.
struct Steering {
    /// The settings in force (with one queue, kept but steering nothing).
    settings: RssSettings,
    /// Why the port spreads frames by the kernel's flow hash instead: the RSS program
    /// was refused when the port opened.
    refused: Option<String>,
}

struct Queue {
    rx: Mutex<RxRing>,
    tx: Mutex<TxScratch>,
    /// Frames the kernel refused on transmit (dropped).
    tx_dropped: CachePadded<AtomicU64>,
    /// Frames the kernel could not put in the ring (full), summed over the readings of
    /// `PACKET_STATISTICS` (each reading resets the kernel's counters).
    rx_dropped: AtomicU64,
    fd: OwnedFd,
}

/// A TPACKET_V3 receive ring and the reader's place in it.
struct RxRing {
    map: Mmap,
    block_size: usize,
    block_count: usize,
    /// The block being read (or to be read next).
    block: usize,
    /// Frames of `block` not read yet; 0 when no block is open.
    left: u32,
    /// Offset in `block` of the next frame to read.
    next: usize,
    /// Segments of a super-frame already read, handed out before the ring's next
    /// frames.
    pending: VecDeque<Packet>,
    /// A super-frame with its VLAN tag put back, to be cut.
    scratch: Vec<u8>,
}

/// Reused `sendmmsg` arguments (no allocation per burst once grown).
struct TxScratch {
    iov: Vec<libc::iovec>,
    msgs: Vec<libc::mmsghdr>,
}

// SAFETY: the raw pointers in `TxScratch` are only written and read inside one
// `tx_burst` call (while the packets they point to are borrowed), never dereferenced
// outside it.
unsafe impl Send for TxScratch {}
// SAFETY: `RxRing`'s mapping is owned by the ring and read under its mutex.
unsafe impl Send for RxRing {}

/// A memory mapping, unmapped on drop.
struct Mmap {
    ptr: NonNull<u8>,
    len: usize,
}

impl Drop for Mmap {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` are exactly what mmap returned, and nothing refers to the
        // mapping once its owner (the ring) is dropped.
        unsafe {
            libc::munmap(self.ptr.as_ptr() as *mut libc::c_void, self.len);
        }
    }
}

fn check(dev: &str, step: &str, rc: libc::c_int) -> Result<(), DeviceError> {
    if rc < 0 {
        Err(DeviceError::last_os(dev, step))
    } else {
        Ok(())
    }
}

fn setsockopt<T>(fd: &OwnedFd, level: libc::c_int, opt: libc::c_int, val: &T) -> libc::c_int {
    // SAFETY: `val` points to a live `T` of `size_of::<T>()` bytes, which is the option
    // value the kernel reads; `fd` is an open socket.
    unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            opt,
            val as *const T as *const libc::c_void,
            size_of::<T>() as libc::socklen_t,
        )
    }
}

/// The interface index of `name` in the calling thread's network namespace.
fn ifindex(name: &str) -> Result<i32, DeviceError> {
    if name.is_empty() || name.len() >= libc::IF_NAMESIZE {
        return Err(DeviceError::new(
            name,
            format!(
                "not a valid interface name (1 to {} bytes)",
                libc::IF_NAMESIZE - 1
            ),
        ));
    }
    let c = CString::new(name).map_err(|_| DeviceError::new(name, "interface name contains a NUL byte"))?;
    // SAFETY: `c` is a NUL-terminated string that outlives the call.
    let idx = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if idx == 0 {
        return Err(DeviceError::last_os(name, "find the interface"));
    }
    Ok(idx as i32)
}

const ETH_P_ALL_BE: u16 = (libc::ETH_P_ALL as u16).to_be();

/// `PACKET_FANOUT_FLAG_IGNORE_OUTGOING` (Linux 4.20): the group's sockets receive no
/// frame sent out of the interface.
const FANOUT_IGNORE_OUTGOING: u32 = 0x4000;

/// Where a ring frame's `sockaddr_ll` sits after its `tpacket3_hdr` (TPACKET_ALIGN of the
/// header's size, as the kernel places it).
const SLL_OFFSET: usize =
    (size_of::<libc::tpacket3_hdr>() + libc::TPACKET_ALIGNMENT - 1) & !(libc::TPACKET_ALIGNMENT - 1);

/// Bytes of an Ethernet frame in front of a VLAN tag: the two MAC addresses.
const VLAN_TAG_OFFSET: usize = 12;

/// The 802.1Q/802.1ad tag the kernel took out of a ring frame (TPID then TCI, in network
/// byte order), from the header's status and `hv1` fields; None if it took none. A TCI
/// of 0 is still a tag (a priority-tagged frame with no priority): the status says.
fn vlan_tag(status: u32, tci: u32, tpid: u16) -> Option<[u8; 4]> {
    if status & libc::TP_STATUS_VLAN_VALID == 0 {
        return None;
    }
    let tpid = if status & libc::TP_STATUS_VLAN_TPID_VALID != 0 {
        tpid
    } else {
        // A kernel that reports no TPID (older than 802.1ad offload) took an 802.1Q tag.
        0x8100
    };
    let [a, b] = tpid.to_be_bytes();
    let [c, d] = (tci as u16).to_be_bytes();
    Some([a, b, c, d])
}

/// Writes `frame` into `p` with `tag` between its MAC addresses and the rest, as the
/// frame was on the wire. A frame with the tag larger than the packet's buffer grows it,
/// as [`Packet::write_from`] does a frame that is too large untagged (both are rare: a
/// standard buffer holds 2048 bytes). A frame too short to have had a tag is written as
/// it is (the kernel never hands over one).
fn write_tagged(p: &mut Packet, frame: &[u8], tag: [u8; 4]) {
    if frame.len() < VLAN_TAG_OFFSET {
        p.write_from(frame);
        return;
    }
    p.take(p.len());
    if !p.try_put(frame.len() + tag.len()) {
        // Past the largest packet buffer (2 GiB), which no ring block (at most 1 GiB)
        // holds: unreachable, but no reason to panic.
        p.write_from(frame);
        return;
    }
    let (macs, rest) = frame.split_at(VLAN_TAG_OFFSET);
    let (d_macs, d) = p.data_mut().split_at_mut(VLAN_TAG_OFFSET);
    let (d_tag, d_rest) = d.split_at_mut(tag.len());
    d_macs.copy_from_slice(macs);
    d_tag.copy_from_slice(&tag);
    d_rest.copy_from_slice(rest);
}

/// Click's packet type for the kernel's `sll_pkttype`.
fn packet_type(pkttype: u8) -> PacketType {
    match pkttype {
        libc::PACKET_BROADCAST => PacketType::Broadcast,
        libc::PACKET_MULTICAST => PacketType::Multicast,
        libc::PACKET_OTHERHOST => PacketType::OtherHost,
        libc::PACKET_OUTGOING => PacketType::Outgoing,
        libc::PACKET_LOOPBACK => PacketType::Loopback,
        _ => PacketType::Host,
    }
}

impl AfPacketPort {
    /// Opens interface `ifname` of the calling thread's network namespace with `queues`
    /// queues (at least 1).
    pub fn open(ifname: &str, queues: usize, cfg: &AfPacketConfig) -> Result<AfPacketPort, DeviceError> {
        let page = 4096usize;
        if queues == 0 {
            return Err(DeviceError::new(ifname, "open with 0 queues (need at least 1)"));
        }
        if !cfg.block_size.is_power_of_two() || cfg.block_size < page || cfg.block_size > (1 << 30) {
            return Err(DeviceError::new(
                ifname,
                format!(
                    "ring block size {} is not a power of two between 4096 and 2^30",
                    cfg.block_size
                ),
            ));
        }
        if cfg.block_count == 0 || cfg.block_count > 65_536 {
            return Err(DeviceError::new(
                ifname,
                format!("ring block count {} is not between 1 and 65536", cfg.block_count),
            ));
        }
        let ifindex = ifindex(ifname)?;
        let mut port = AfPacketPort {
            name: ifname.to_string(),
            ifindex,
            queues: Vec::with_capacity(queues),
            counters: (0..queues).map(|_| CachePadded::default()).collect(),
            fanout_group: None,
            rss: Mutex::new(Steering {
                settings: RssSettings::new(queues),
                refused: None,
            }),
        };
        // The program is loaded before the sockets join the group, whose mode it
        // decides: BPF with it, the kernel's hash without it.
        let program = if queues > 1 {
            match rss::load_program(&RssSettings::new(queues)) {
                Ok(p) => Some(p),
                Err(e) => {
                    port.steering().refused = Some(e);
                    None
                }
            }
        } else {
            None
        };
        let mode = if program.is_some() {
            libc::PACKET_FANOUT_EBPF
        } else {
            libc::PACKET_FANOUT_HASH
        };
        for q in 0..queues {
            let queue = port.open_queue(q, queues, mode, cfg)?;
            port.queues.push(queue);
        }
        if let Some(p) = program {
            // Until now every frame went to queue 0 (a group in BPF mode without a
            // program); the program's own table starts from here.
            port.attach_program(&p)
                .map_err(|e| DeviceError::new(ifname, format!("attach the RSS program: {}", e)))?;
        }
        if cfg.promiscuous {
            let mreq = libc::packet_mreq {
                mr_ifindex: ifindex,
                mr_type: libc::PACKET_MR_PROMISC as u16,
                mr_alen: 0,
                mr_address: [0; 8],
            };
            check(
                ifname,
                "enter promiscuous mode",
                setsockopt(
                    &port.queues[0].fd,
                    libc::SOL_PACKET,
                    libc::PACKET_ADD_MEMBERSHIP,
                    &mreq,
                ),
            )?;
        }
        Ok(port)
    }

    /// One socket, its ring, bound to the interface, in the fanout group if `n` > 1.
    fn open_queue(
        &mut self,
        q: usize,
        n: usize,
        mode: u32,
        cfg: &AfPacketConfig,
    ) -> Result<Queue, DeviceError> {
        let dev = self.name.as_str();
        let step = |s: &str| {
            if n > 1 {
                format!("{} (queue {})", s, q)
            } else {
                s.to_string()
            }
        };
        // Protocol 0: the socket receives nothing until it is bound below, after its
        // ring exists, so no frame of another interface slips in.
        // SAFETY: plain system call with constant arguments.
        let raw = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
        if raw < 0 {
            return Err(DeviceError::last_os(dev, step("create AF_PACKET socket")));
        }
        // SAFETY: `raw` is a socket just created and owned by nothing else.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let v3 = libc::tpacket_versions::TPACKET_V3 as libc::c_int;
        check(
            dev,
            &step("select TPACKET_V3"),
            setsockopt(&fd, libc::SOL_PACKET, libc::PACKET_VERSION, &v3),
        )?;
        // Each frame comes with a virtio-net header: whether the kernel merged segments
        // into it (GRO, or a local sender's TSO) and their size, so the receive path
        // cuts it back into them. Set before the ring, as the kernel requires.
        let one: libc::c_int = 1;
        check(
            dev,
            &step("ask for virtio-net headers"),
            setsockopt(&fd, libc::SOL_PACKET, libc::PACKET_VNET_HDR, &one),
        )?;
        let frame_size = 2048u32;
        let req = libc::tpacket_req3 {
            tp_block_size: cfg.block_size as u32,
            tp_block_nr: cfg.block_count as u32,
            tp_frame_size: frame_size,
            tp_frame_nr: (cfg.block_size / frame_size as usize * cfg.block_count) as u32,
            tp_retire_blk_tov: cfg.block_timeout_ms,
            tp_sizeof_priv: 0,
            tp_feature_req_word: 0,
        };
        check(
            dev,
            &step("set up the receive ring"),
            setsockopt(&fd, libc::SOL_PACKET, libc::PACKET_RX_RING, &req),
        )?;
        let len = cfg.block_size * cfg.block_count;
        // SAFETY: maps the ring the kernel just allocated for this socket; the length is
        // the ring's size, as the kernel requires.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(DeviceError::last_os(dev, step("map the receive ring")));
        }
        let map = Mmap {
            ptr: NonNull::new(ptr as *mut u8).expect("mmap returned null"),
            len,
        };
        check(
            dev,
            &step("bypass the queueing discipline"),
            setsockopt(&fd, libc::SOL_PACKET, libc::PACKET_QDISC_BYPASS, &one),
        )?;
        check(
            dev,
            &step("ignore outgoing frames"),
            setsockopt(&fd, libc::SOL_PACKET, libc::PACKET_IGNORE_OUTGOING, &one),
        )?;
        // SAFETY: sockaddr_ll is plain data; all-zero is a valid value.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = ETH_P_ALL_BE;
        sll.sll_ifindex = self.ifindex;
        // SAFETY: `sll` is a valid sockaddr_ll of the size given.
        let rc = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                &sll as *const libc::sockaddr_ll as *const libc::sockaddr,
                size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        check(dev, &step("bind to the interface"), rc)?;
        if n > 1 {
            self.join_fanout(&fd, mode, &step("join the fanout group"))?;
        }
        Ok(Queue {
            rx: Mutex::new(RxRing {
                map,
                block_size: cfg.block_size,
                block_count: cfg.block_count,
                block: 0,
                left: 0,
                next: 0,
                pending: VecDeque::new(),
                scratch: Vec::new(),
            }),
            tx: Mutex::new(TxScratch {
                iov: Vec::new(),
                msgs: Vec::new(),
            }),
            tx_dropped: CachePadded::default(),
            rx_dropped: AtomicU64::new(0),
            fd,
        })
    }

    /// Joins the port's fanout group (`mode`: `PACKET_FANOUT_EBPF` or `_HASH`), creating
    /// it with a kernel-chosen id for the first socket. The group ignores outgoing
    /// frames: a socket in a group no longer heeds its own `PACKET_IGNORE_OUTGOING`.
    fn join_fanout(&mut self, fd: &OwnedFd, mode: u32, step: &str) -> Result<(), DeviceError> {
        let dev = self.name.as_str();
        match self.fanout_group {
            Some(id) => {
                let arg: u32 = id as u32 | ((mode | FANOUT_IGNORE_OUTGOING) << 16);
                check(
                    dev,
                    step,
                    setsockopt(fd, libc::SOL_PACKET, libc::PACKET_FANOUT, &arg),
                )
            }
            None => {
                let arg: u32 = (mode | FANOUT_IGNORE_OUTGOING | libc::PACKET_FANOUT_FLAG_UNIQUEID) << 16;
                check(
                    dev,
                    step,
                    setsockopt(fd, libc::SOL_PACKET, libc::PACKET_FANOUT, &arg),
                )?;
                let mut val: u32 = 0;
                let mut len = size_of::<u32>() as libc::socklen_t;
                // SAFETY: `val` and `len` are live and describe a 4-byte buffer, the size
                // of the PACKET_FANOUT option.
                let rc = unsafe {
                    libc::getsockopt(
                        fd.as_raw_fd(),
                        libc::SOL_PACKET,
                        libc::PACKET_FANOUT,
                        &mut val as *mut u32 as *mut libc::c_void,
                        &mut len,
                    )
                };
                check(dev, "read the fanout group id", rc)?;
                self.fanout_group = Some(val as u16);
                Ok(())
            }
        }
    }

    fn steering(&self) -> std::sync::MutexGuard<'_, Steering> {
        self.rss.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Hands `program` to the fanout group, which runs it for every frame from then on;
    /// the kernel drops the previous program after a grace period.
    fn attach_program(&self, program: &OwnedFd) -> std::io::Result<()> {
        let fd = program.as_raw_fd() as u32;
        if setsockopt(
            &self.queues[0].fd,
            libc::SOL_PACKET,
            libc::PACKET_FANOUT_DATA,
            &fd,
        ) < 0
        {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    }

    /// The interface's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The interface's index in its network namespace.
    pub fn ifindex(&self) -> i32 {
        self.ifindex
    }

    /// The kernel-allocated `PACKET_FANOUT` group id (`None` with one queue, which needs
    /// no group).
    pub fn fanout_group(&self) -> Option<u16> {
        self.fanout_group
    }
}

/// Why a port whose RSS program was refused has no settings to read or change.
fn refused(why: &str) -> String {
    format!(
        "the kernel refused brickroute's RSS program when the port opened ({}); the kernel's own flow hash spreads its frames over the queues, and has no key, table or rules to change",
        why
    )
}

impl RxRing {
    /// Address of block `b`'s descriptor.
    fn block_desc(&self, b: usize) -> *mut libc::tpacket_block_desc {
        // SAFETY: `b` < block_count, so the offset stays inside the mapping.
        unsafe { self.map.ptr.as_ptr().add(b * self.block_size) as *mut libc::tpacket_block_desc }
    }

    /// Opens the current block if the kernel has handed it over; false if not.
    fn open_block(&mut self) -> bool {
        let d = self.block_desc(self.block);
        // SAFETY: `d` points to the block's descriptor in the live ring mapping; the
        // kernel writes `block_status` last (after the frames, with a barrier), so a
        // volatile read followed by an acquire fence sees the whole block.
        unsafe {
            let h = std::ptr::addr_of!((*d).hdr.bh1);
            let status = std::ptr::read_volatile(std::ptr::addr_of!((*h).block_status));
            if status & libc::TP_STATUS_USER == 0 {
                return false;
            }
            fence(Ordering::Acquire);
            self.left = std::ptr::read_volatile(std::ptr::addr_of!((*h).num_pkts));
            self.next = std::ptr::read_volatile(std::ptr::addr_of!((*h).offset_to_first_pkt)) as usize;
        }
        true
    }

    /// Gives the current block back to the kernel and moves to the next.
    fn release_block(&mut self) {
        let d = self.block_desc(self.block);
        // SAFETY: the block is ours (TP_STATUS_USER) until this store; the release
        // fence orders our reads of its frames before the kernel may reuse it.
        unsafe {
            fence(Ordering::Release);
            let h = std::ptr::addr_of_mut!((*d).hdr.bh1);
            std::ptr::write_volatile(std::ptr::addr_of_mut!((*h).block_status), libc::TP_STATUS_KERNEL);
        }
        self.left = 0;
        self.next = 0;
        self.block += 1;
        if self.block == self.block_count {
            self.block = 0;
        }
    }

    /// Appends up to `max` frames to `batch`; returns (frames, bytes). Each packet's
    /// annotations get the kernel's packet type, the receive time and `queue`. A TCP or
    /// UDP super-frame (see [`packet::gso`]) is cut into its segments, which come next,
    /// ahead of any frame the ring holds after it (so a flow keeps its order), over as
    /// many calls as `max` asks; one that cannot be cut (a tunnel's, whose offload is
    /// about its inner packet) comes whole, as the kernel hands it over.
    fn read(&mut self, queue: usize, batch: &mut PacketBatch, max: usize) -> (usize, u64) {
        let start = batch.len();
        let mut bytes = self.take_pending(batch, max);
        let mut got = batch.len() - start;
        while got < max && self.pending.is_empty() {
            if self.left == 0 && !self.open_block() {
                break;
            }
            if self.left == 0 {
                // A block retired by its timeout with no frame in it.
                self.release_block();
                continue;
            }
            let n = (self.left as usize).min(max - got);
            let first = batch.len();
            Packet::alloc_rx_into(batch, n);
            let base = self.block_desc(self.block) as *const u8;
            let mut read = 0;
            let mut cut = false;
            for p in &mut batch.as_mut_slice()[first..] {
                // SAFETY: the kernel laid out `left` frames in this block starting at
                // `next`, each header's `tp_next_offset` leading to the next, all inside
                // the block, and the block stays ours until `release_block`. Each header
                // is followed (at TPACKET_ALIGN of its size) by the frame's sockaddr_ll;
                // the frame's data is `tp_snaplen` bytes at `tp_mac` from its header,
                // and the virtio-net header the socket asked for (PACKET_VNET_HDR) lies
                // just before it, in room the kernel reserved between the two.
                let (data, pkttype, sec, nsec, tag, vnet) = unsafe {
                    let h = base.add(self.next) as *const libc::tpacket3_hdr;
                    let snap = std::ptr::read(std::ptr::addr_of!((*h).tp_snaplen)) as usize;
                    let mac = std::ptr::read(std::ptr::addr_of!((*h).tp_mac)) as usize;
                    let step = std::ptr::read(std::ptr::addr_of!((*h).tp_next_offset)) as usize;
                    let sec = std::ptr::read(std::ptr::addr_of!((*h).tp_sec));
                    let nsec = std::ptr::read(std::ptr::addr_of!((*h).tp_nsec));
                    let status = std::ptr::read(std::ptr::addr_of!((*h).tp_status));
                    let tci = std::ptr::read(std::ptr::addr_of!((*h).hv1.tp_vlan_tci));
                    let tpid = std::ptr::read(std::ptr::addr_of!((*h).hv1.tp_vlan_tpid));
                    let sll = (h as *const u8).add(SLL_OFFSET) as *const libc::sockaddr_ll;
                    let pkttype = std::ptr::read(std::ptr::addr_of!((*sll).sll_pkttype));
                    let vnet = (h as *const u8).add(mac - VNET_HDR_LEN) as *const [u8; VNET_HDR_LEN];
                    let vnet = std::ptr::read_unaligned(vnet);
                    let d = std::slice::from_raw_parts((h as *const u8).add(mac), snap);
                    self.next += step;
                    (d, pkttype, sec, nsec, vlan_tag(status, tci, tpid), vnet)
                };
                read += 1;
                let a = p.anno_mut();
                a.packet_type = packet_type(pkttype);
                a.input_queue = queue as u16;
                a.timestamp = Timestamp::new(i64::from(sec), nsec);
                // (A tag the kernel took out goes back 12 bytes in: offsets past it move.)
                let shift = |at: usize| {
                    if tag.is_some() && at >= VLAN_TAG_OFFSET {
                        at + 4
                    } else {
                        at
                    }
                };
                let partial = needs_checksum(&vnet).map(|(start, field)| (shift(start), field));
                let mut whole = false;
                if let Some((kind, size)) = offload(&vnet) {
                    // Rare (a sender's or a NIC's merged segments): its segments go to
                    // `pending`, and this call reads no further into the ring.
                    let anno = *p.anno();
                    if self.cut(data, tag, kind, size, partial.map(|(start, _)| start), anno) {
                        cut = true;
                        break;
                    }
                    whole = true;
                }
                match tag {
                    None => p.write_from(data),
                    Some(tag) => write_tagged(p, data, tag),
                }
                if let Some((start, field)) = partial {
                    // A local sender's checksum offload (a veth or TAP peer): finish the
                    // checksum the kernel would have completed on delivery.
                    packet::checksum::complete_at(p.data_mut(), start, field);
                }
                if whole {
                    finish_tunnel_checksum(p.data_mut());
                }
                bytes += p.len() as u64;
            }
            if cut {
                // The super-frame's packet and those after it were never written.
                batch.truncate(first + read - 1);
            }
            got = batch.len() - start;
            self.left -= read as u32;
            if self.left == 0 {
                self.release_block();
            }
            if cut {
                bytes += self.take_pending(batch, max - got);
                got = batch.len() - start;
            }
        }
        (got, bytes)
    }

    /// Moves up to `max` packets from `pending` to `batch`; returns their bytes.
    fn take_pending(&mut self, batch: &mut PacketBatch, max: usize) -> u64 {
        let mut bytes = 0u64;
        for _ in 0..max {
            let Some(p) = self.pending.pop_front() else {
                break;
            };
            bytes += p.len() as u64;
            batch.push(p);
        }
        bytes
    }

    /// Cuts the super-frame `data` of `kind` (its VLAN tag, if the kernel took one out,
    /// put back first) into packets of at most `size` payload bytes, each annotated
    /// with `anno`, onto `pending`; false if it cannot be cut (nothing is added). The
    /// offload's checksum starts at `transport` (in the tagged frame), as the kernel
    /// says: a frame whose own TCP or UDP header is not there is a tunnel's (VXLAN,
    /// GRE), whose offload is about the packet inside, and is not cut.
    fn cut(
        &mut self,
        data: &[u8],
        tag: Option<[u8; 4]>,
        kind: GsoKind,
        size: usize,
        transport: Option<usize>,
        anno: packet::Anno,
    ) -> bool {
        let frame = match tag {
            Some(tag) if data.len() >= VLAN_TAG_OFFSET => {
                self.scratch.clear();
                self.scratch.extend_from_slice(&data[..VLAN_TAG_OFFSET]);
                self.scratch.extend_from_slice(&tag);
                self.scratch.extend_from_slice(&data[VLAN_TAG_OFFSET..]);
                &self.scratch[..]
            }
            _ => data,
        };
        // (Linux marks every merged frame's checksum partial, so the start is known; one
        // without it is passed on whole rather than cut at a header that may not be the
        // offload's.)
        if transport.is_none_or(|at| packet::gso::transport_header(frame, kind) != Ok(at)) {
            return false;
        }
        let pending = &mut self.pending;
        packet::gso::segment(frame, kind, size, |mut seg| {
            *seg.anno_mut() = anno;
            pending.push_back(seg);
        })
        .is_ok()
    }
}

/// Bytes of the virtio-net header the kernel puts before each frame of a socket with
/// `PACKET_VNET_HDR` (and that the socket expects before each frame it sends).
const VNET_HDR_LEN: usize = 10;

/// The header before every frame this port sends: no offload asked for.
static VNET_HDR_NONE: [u8; VNET_HDR_LEN] = [0; VNET_HDR_LEN];

/// A tunnel's merged frame, passed on whole: its outer UDP checksum, if it has one,
/// was left for the sender's kernel to compute as it cut the frame, segment by segment
/// (the inner checksum is the one its virtio-net header names); computed here over the
/// whole frame, once the inner one is finished.
fn finish_tunnel_checksum(frame: &mut [u8]) {
    if let Ok(udp) = packet::gso::transport_header(frame, GsoKind::Udp) {
        if frame[udp + 6..udp + 8] != [0, 0] {
            packet::checksum::complete_transport(frame);
        }
    }
}

/// Where the checksum a sender left partial starts and where its field lies from
/// there (`csum_start`, `csum_offset`), from a frame's virtio-net header when it says
/// so (`VIRTIO_NET_HDR_F_NEEDS_CSUM`: a veth or TAP peer's checksum offload); offsets
/// in the frame as the ring holds it (without a VLAN tag the kernel took out).
fn needs_checksum(vnet: &[u8; VNET_HDR_LEN]) -> Option<(usize, usize)> {
    const NEEDS_CSUM: u8 = 1;
    (vnet[0] & NEEDS_CSUM != 0).then(|| {
        (
            usize::from(u16::from_le_bytes([vnet[6], vnet[7]])),
            usize::from(u16::from_le_bytes([vnet[8], vnet[9]])),
        )
    })
}

/// The transport and segment size of a super-frame, from its virtio-net header
/// (`gso_type` TCPv4 or TCPv6, with or without the ECN bit, or UDP L4; `gso_size`,
/// little-endian on the little-endian machines brickroute runs on, as the kernel
/// writes it for a packet socket); `None` for any other frame.
fn offload(vnet: &[u8; VNET_HDR_LEN]) -> Option<(GsoKind, usize)> {
    const GSO_TCPV4: u8 = 1;
    const GSO_TCPV6: u8 = 4;
    const GSO_UDP_L4: u8 = 5;
    const GSO_ECN: u8 = 0x80;
    let size = usize::from(u16::from_le_bytes([vnet[4], vnet[5]]));
    match vnet[1] & !GSO_ECN {
        GSO_TCPV4 | GSO_TCPV6 => Some((GsoKind::Tcp, size)),
        GSO_UDP_L4 => Some((GsoKind::Udp, size)),
        _ => None,
    }
}

impl Port for AfPacketPort {
    fn queues(&self) -> usize {
        self.queues.len()
    }

    fn rx_burst(&self, queue: usize, batch: &mut PacketBatch, max: usize) -> usize {
        let Some(q) = self.queues.get(queue) else {
            return 0;
        };
        let (n, bytes) =
            q.rx.lock()
                .unwrap_or_else(|e| e.into_inner())
                .read(queue, batch, max);
        self.counters[queue].count_rx(n, bytes);
        n
    }

    fn rx_finished(&self, _queue: usize) -> bool {
        // An interface never runs out of traffic.
        false
    }

    fn wait_fd(&self, queue: usize) -> Option<libc::c_int> {
        // A TPACKET_V3 socket polls readable when a ring block is ready for the reader.
        self.queues.get(queue).map(|q| q.fd.as_raw_fd())
    }

    fn mode(&self) -> Option<String> {
        self.steering()
            .refused
            .as_ref()
            .map(|_| "kernel flow hash".to_string())
    }

    fn warning(&self) -> Option<String> {
        self.steering().refused.as_deref().map(refused)
    }

    fn rss(&self) -> Result<RssSettings, String> {
        let s = self.steering();
        match &s.refused {
            Some(why) => Err(refused(why)),
            None => Ok(s.settings.clone()),
        }
    }

    fn update_rss(
        &self,
        change: &mut dyn FnMut(&mut RssSettings) -> Result<(), String>,
    ) -> Result<(), String> {
        let mut s = self.steering();
        if let Some(why) = &s.refused {
            return Err(refused(why));
        }
        let mut settings = s.settings.clone();
        change(&mut settings)?;
        let n = self.queues.len();
        let names = |what: String, q: u16| {
            format!(
                "{} names queue {}, and {} has {} queue{}",
                what,
                q,
                self.name,
                n,
                if n == 1 { "" } else { "s" }
            )
        };
        if let Some(&q) = settings.reta.entries().iter().find(|&&q| usize::from(q) >= n) {
            return Err(names("the indirection table".into(), q));
        }
        if let Some((i, r)) = settings
            .rules
            .iter()
            .enumerate()
            .find(|(_, r)| usize::from(r.queue) >= n)
        {
            return Err(names(format!("rule {} ({})", i + 1, r), r.queue));
        }
        if n > 1 {
            let program = rss::load_program(&settings)?;
            self.attach_program(&program)
                .map_err(|e| format!("attach the RSS program: {}", e))?;
        }
        s.settings = settings;
        Ok(())
    }

    fn tx_burst(&self, queue: usize, batch: &mut PacketBatch) -> usize {
        let Some(q) = self.queues.get(queue) else {
            batch.clear();
            return 0;
        };
        let mut sent = 0usize;
        let mut bytes = 0u64;
        let mut dropped = 0u64;
        {
            let mut s = q.tx.lock().unwrap_or_else(|e| e.into_inner());
            let TxScratch { iov, msgs } = &mut *s;
            for chunk in batch.as_slice().chunks(MAX_BATCH) {
                let (ok, b, d) = send_chunk(q.fd.as_raw_fd(), chunk, iov, msgs);
                sent += ok;
                bytes += b;
                dropped += d;
            }
        }
        batch.clear();
        self.counters[queue].count_tx(sent, bytes);
        if dropped > 0 {
            q.tx_dropped.fetch_add(dropped, Ordering::Relaxed);
        }
        sent
    }

    fn stats(&self, queue: usize) -> QueueStats {
        self.counters
            .get(queue)
            .map_or(QueueStats::default(), |c| c.snapshot())
    }

    /// Reads (and so resets) the socket's `PACKET_STATISTICS`: a system call, meant for
    /// reports, not for the fast path.
    fn rx_dropped(&self, queue: usize) -> u64 {
        let Some(q) = self.queues.get(queue) else {
            return 0;
        };
        let mut st = libc::tpacket_stats_v3 {
            tp_packets: 0,
            tp_drops: 0,
            tp_freeze_q_cnt: 0,
        };
        let mut len = size_of::<libc::tpacket_stats_v3>() as libc::socklen_t;
        // SAFETY: `st` and `len` are live and describe a buffer of the option's size
        // (TPACKET_V3 sockets report a tpacket_stats_v3).
        let rc = unsafe {
            libc::getsockopt(
                q.fd.as_raw_fd(),
                libc::SOL_PACKET,
                libc::PACKET_STATISTICS,
                &mut st as *mut libc::tpacket_stats_v3 as *mut libc::c_void,
                &mut len,
            )
        };
        let new = if rc == 0 { u64::from(st.tp_drops) } else { 0 };
        q.rx_dropped.fetch_add(new, Ordering::Relaxed) + new
    }

    fn tx_dropped(&self, queue: usize) -> u64 {
        self.queues
            .get(queue)
            .map_or(0, |q| q.tx_dropped.load(Ordering::Relaxed))
    }
}

/// How many times a burst waits for room in the socket's send buffer before the rest of
/// it is dropped.
const TX_FULL_RETRIES: u32 = 4;

/// Sends `pkts` with `sendmmsg` (one call when the kernel takes them all); returns
/// (sent, bytes sent, dropped).
fn send_chunk(
    fd: libc::c_int,
    pkts: &[Packet],
    iov: &mut Vec<libc::iovec>,
    msgs: &mut Vec<libc::mmsghdr>,
) -> (usize, u64, u64) {
    iov.clear();
    // Each frame after the virtio-net header the socket expects (PACKET_VNET_HDR).
    iov.extend(pkts.iter().flat_map(|p| {
        [
            libc::iovec {
                iov_base: VNET_HDR_NONE.as_ptr() as *mut libc::c_void,
                iov_len: VNET_HDR_LEN,
            },
            libc::iovec {
                iov_base: p.data().as_ptr() as *mut libc::c_void,
                iov_len: p.len(),
            },
        ]
    }));
    msgs.clear();
    for v in iov.chunks_exact_mut(2) {
        // SAFETY: msghdr is plain data; all-zero is a valid value (no address, no
        // control data).
        let mut h: libc::msghdr = unsafe { std::mem::zeroed() };
        h.msg_iov = v.as_mut_ptr();
        h.msg_iovlen = 2;
        msgs.push(libc::mmsghdr {
            msg_hdr: h,
            msg_len: 0,
        });
    }
    let n = pkts.len();
    let (mut i, mut sent, mut bytes, mut dropped, mut waits) = (0usize, 0usize, 0u64, 0u64, 0u32);
    while i < n {
        // SAFETY: `msgs[i..]` are valid mmsghdrs whose iovecs point into `pkts`, which
        // are borrowed (alive and unchanged) for the whole call; the kernel only reads
        // them.
        let r = unsafe {
            libc::sendmmsg(
                fd,
                msgs.as_mut_ptr().add(i),
                (n - i) as libc::c_uint,
                libc::MSG_DONTWAIT,
            )
        };
        if r > 0 {
            let r = r as usize;
            bytes += pkts[i..i + r].iter().map(|p| p.len() as u64).sum::<u64>();
            i += r;
            sent += r;
            continue;
        }
        let err = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
        match err {
            libc::EINTR => continue,
            libc::EAGAIN if waits < TX_FULL_RETRIES => {
                // The send buffer is full of frames the device has not taken yet: wait
                // for room briefly rather than drop at once.
                waits += 1;
                let mut pfd = libc::pollfd {
                    fd,
                    events: libc::POLLOUT,
                    revents: 0,
                };
                // SAFETY: `pfd` is one valid pollfd.
                unsafe { libc::poll(&mut pfd, 1, 1) };
            }
            libc::EAGAIN => {
                dropped += (n - i) as u64;
                break;
            }
            libc::EMSGSIZE | libc::EINVAL => {
                // This frame is wrong for the device (larger than the MTU, shorter than
                // a link header): drop it, go on with the rest.
                dropped += 1;
                i += 1;
            }
            _ => {
                // The device cannot take frames now (queue full: ENOBUFS; down:
                // ENETDOWN, ENXIO): the rest of the burst would fail the same way, one
                // system call each, so drop it as a full NIC ring would.
                dropped += (n - i) as u64;
                break;
            }
        }
    }
    (sent, bytes, dropped)
}

#[cfg(test)]
mod tests;
