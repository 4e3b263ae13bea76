//! `XdpPort`: an interface's queues through AF_XDP sockets, steered by brickroute's own
//! XDP program.
//!
//! Opening a port:
//! 1. finds the interface and its receive queues (netlink), and the XDP program
//!    attached to it: a leftover of an earlier brickroute run (same program name,
//!    attached through netlink) is detached; a foreign program is an error;
//! 2. creates the socket map (XSKMAP) and the map of the interface's IPv4 addresses,
//!    and loads the program ([`program`]);
//! 3. opens one AF_XDP socket per queue, zero-copy if the driver grants it, copy mode
//!    otherwise, and enters it in the socket map. Queue q's socket uses UMEM q of the
//!    port's [`UmemSet`]: the first socket registers it, later ones (other ports' queue
//!    q, opened with the same set) share it with `XDP_SHARED_UMEM`;
//! 4. attaches the program with a bpf_link, in the driver if it can, generic (SKB)
//!    mode otherwise. Closing the link (dropping the port, or the process ending in
//!    any way) detaches the program.

pub(crate) mod netlink;
mod program;
mod umem;

pub use netlink::{parse_link_reply, Attached, LinkState, ReplyError};
pub use program::PROGRAM_NAME;
pub use umem::{FrameCounts, KernelStats, UmemSet};

use crate::bpf;
use crate::error::DeviceError;
use crate::port::{CachePadded, Port, QueueCounters, QueueStats};
use packet::{Packet, PacketBatch};
use std::ffi::CString;
use std::fmt;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::{Arc, Mutex, MutexGuard};
use umem::{Geometry, Umem, Xsk};

/// How the AF_XDP sockets move frames, as the kernel granted it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum XdpMode {
    /// The driver receives into and sends from the UMEM directly.
    ZeroCopy,
    /// The kernel copies frames between its buffers and the UMEM.
    Copy,
}

/// Where the XDP program runs, as attached.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum XdpAttach {
    /// In the driver, before any socket buffer is made.
    Native,
    /// In the generic path (SKB mode), after a socket buffer is made.
    Generic,
}

/// The BTF type id of `bpf_xdp_metadata_rx_vlan_tag`, through which brickroute's XDP
/// program reads the outer VLAN tag a driver took out of a received frame and puts it
/// back; `None` where the running kernel has no such kfunc (before 6.8) or no BTF. A
/// port attached in native mode uses it where it can.
pub fn xdp_vlan_tags_restorable() -> Option<u32> {
    bpf::btf::function_id(bpf::btf::VMLINUX, program::VLAN_TAG_KFUNC)
}

/// Which attach mode to ask for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum AttachRequest {
    /// Native if the driver supports it, generic otherwise.
    #[default]
    Auto,
    Native,
    Generic,
}

/// Settings of an [`XdpPort`].
#[derive(Clone, Debug)]
pub struct XdpConfig {
    /// UMEM frames per queue. A port opened on its own ([`XdpPort::open`]) gets UMEMs of
    /// this many frames; each socket's receive side holds at most half of it (and at
    /// most a ring's worth), also in a shared UMEM, where it holds no more than its
    /// share: half the UMEM split among the sockets sharing it.
    pub frames_per_queue: u32,
    /// Bytes per UMEM frame: 2048 or 4096.
    pub frame_size: u32,
    /// Entries of each of the four rings of a socket (a power of two).
    pub ring_size: u32,
    /// Receive batch k_p: the fill ring is topped up once this many frames can go.
    pub rx_batch: u32,
    /// Transmit batch k_n: finished transmissions are reclaimed once this many are
    /// there (or when a burst needs their frames).
    pub tx_batch: u32,
    /// Try zero-copy first (falls back to copy mode when the driver refuses).
    pub zero_copy: bool,
    /// Where to attach the XDP program.
    pub attach: AttachRequest,
}

impl Default for XdpConfig {
    fn default() -> XdpConfig {
        XdpConfig {
            frames_per_queue: 4096,
            frame_size: 2048,
            ring_size: 2048,
            rx_batch: 32,
            tx_batch: 16,
            zero_copy: true,
            attach: AttachRequest::Auto,
        }
    }
}

/// Counters of one queue beyond [`QueueStats`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct XdpQueueStats {
    /// Where the queue's UMEM frames are.
    pub frames: FrameCounts,
    /// Packets dropped on transmit because they were longer than the interface's MTU
    /// allows (MTU + 14 bytes, + 4 with an 802.1Q or 802.1ad tag; the MTU read at open)
    /// or than a UMEM frame.
    pub tx_too_long: u64,
    /// Packets dropped on transmit because the interface was down (or gone): not sent
    /// later when it comes back up.
    pub tx_link_down: u64,
    /// Packets dropped on transmit because no frame or ring entry was free.
    pub tx_no_room: u64,
    /// Packets sent from the UMEM frame they were received into (no copy).
    pub tx_in_place: u64,
    /// Packets copied into a UMEM frame to be sent (their buffer was not a frame of
    /// this queue's UMEM: made by an element, or received on another worker's UMEM or
    /// another kind of port).
    pub tx_copied: u64,
    /// Whether the queue's socket shares a UMEM another socket registered.
    pub shared_umem: bool,
    /// The kernel's counters of the queue's socket (zero if it could not be read).
    pub kernel: KernelStats,
}

/// The XDP program attached to an interface, as netlink and bpf(2) describe it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AttachedProgram {
    pub id: u32,
    /// The name it was loaded under (brickroute's is [`PROGRAM_NAME`]).
    pub name: String,
    pub attached: Attached,
}

/// A port whose queues are AF_XDP sockets of one interface.
///
/// Queue q is socket q, bound to the interface's receive/transmit queue q, using UMEM q
/// of the port's [`UmemSet`] (shared with the other ports opened with the same set).
/// Only the worker that owns queue q should call [`Port::rx_burst`] and
/// [`Port::tx_burst`] for it; each socket sits behind an uncontended mutex taken once
/// per burst (and the UMEM's free list behind another), so the port is safe to share
/// all the same.
///
/// Receive hands out packets whose buffer is the UMEM frame the kernel wrote: no copy.
/// Transmit sends a packet whose buffer is a frame of the queue's UMEM from where it
/// lies, and copies any other packet into a free frame. Dropped packets give their
/// frame back to the UMEM, whatever thread drops them.
pub struct XdpPort {
    // Dropped first: closing the link detaches the program before the sockets go.
    _link: OwnedFd,
    ifname: String,
    ifindex: u32,
    queues: Vec<CachePadded<Mutex<Xsk>>>,
    counters: Vec<CachePadded<QueueCounters>>,
    /// The program puts stripped VLAN tags back.
    vlan_tags: bool,
    /// What the operator should hear when the port opens.
    warning: Option<String>,
    mode: XdpMode,
    attach: XdpAttach,
    /// The interface's IPv4 and IPv6 addresses, in the program's address maps.
    local_v4: AddressMap<4>,
    local_v6: AddressMap<16>,
    /// Entry 0: the [`program::FLAG_ROUTER_ARP`] and [`program::FLAG_ROUTER_ND`] bits,
    /// kept in `flags` too.
    flags_map: OwnedFd,
    flags: Mutex<u32>,
    _prog: OwnedFd,
    _xsk_map: OwnedFd,
    /// Why the port would miss frames the interface receives (its other queues'), if
    /// it would: [`Port::receive_problem`].
    unread_queues: Option<String>,
}

/// Entries of the address map: IPv4 addresses of the interface the program lets
/// through to the kernel.
const MAX_LOCAL_ADDRS: u32 = 256;

fn os_hint(e: &io::Error) -> &'static str {
    match e.raw_os_error() {
        Some(libc::EPERM) | Some(libc::EACCES) => {
            " (AF_XDP needs root, or CAP_NET_ADMIN, CAP_NET_RAW and CAP_BPF)"
        }
        _ => "",
    }
}

fn dev_err(ifname: &str, step: impl Into<String>, e: io::Error) -> DeviceError {
    let step = format!("{}{}", step.into(), os_hint(&e));
    DeviceError::io(ifname, step, e)
}

/// The interface index of `ifname`.
fn ifindex_of(ifname: &str) -> Result<u32, DeviceError> {
    if ifname.is_empty() || ifname.len() > 15 {
        return Err(DeviceError::new(ifname, "not an interface name (1 to 15 bytes)"));
    }
    let c =
        CString::new(ifname).map_err(|_| DeviceError::new(ifname, "not an interface name (contains NUL)"))?;
    // SAFETY: `c` is a NUL-terminated string that outlives the call.
    let index = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if index == 0 {
        return Err(DeviceError::last_os(ifname, "find the interface"));
    }
    Ok(index)
}

/// An interface's IPv4 and IPv6 addresses, in network byte order.
type Addresses = (Vec<[u8; 4]>, Vec<[u8; 16]>);

/// The IPv4 and IPv6 addresses of the interface of index `ifindex` (by index: an IPv4
/// address's label, which `getifaddrs` gives as its interface's name, may be anything).
fn interface_addresses(ifindex: u32) -> io::Result<Addresses> {
    let (mut v4, mut v6) = (Vec::new(), Vec::new());
    for a in crate::rtnl::addr::dump_addresses()?
        .into_iter()
        .filter(|a| a.ifindex == ifindex)
    {
        match a.family {
            crate::rtnl::Family::V4 => v4.push((a.addr as u32).to_be_bytes()),
            crate::rtnl::Family::V6 => v6.push(a.addr.to_be_bytes()),
        }
    }
    Ok((v4, v6))
}

/// One of the program's address maps (`HASH`, keys: `N`-byte addresses in network
/// order, values: one byte) and the addresses it holds.
struct AddressMap<const N: usize> {
    map: OwnedFd,
    addrs: Mutex<Vec<[u8; N]>>,
}

impl<const N: usize> AddressMap<N> {
    fn new(name: &str) -> io::Result<AddressMap<N>> {
        Ok(AddressMap {
            map: bpf::map_create(bpf::BPF_MAP_TYPE_HASH, N as u32, 1, MAX_LOCAL_ADDRS, name)?,
            addrs: Mutex::new(Vec::new()),
        })
    }

    /// Makes the map hold the first [`MAX_LOCAL_ADDRS`] of `now` and nothing else (an
    /// address listed twice, with two prefix lengths, is held once).
    fn set(&self, now: Vec<[u8; N]>) -> io::Result<()> {
        let mut unique: Vec<[u8; N]> = Vec::with_capacity(now.len());
        for a in now {
            if !unique.contains(&a) {
                unique.push(a);
            }
        }
        let mut now = unique;
        now.truncate(MAX_LOCAL_ADDRS as usize);
        let mut cur = lock(&self.addrs);
        for a in cur.iter().filter(|a| !now.contains(a)) {
            // SAFETY: the map has N-byte keys ([u8; N]).
            unsafe { bpf::map_delete(&self.map, a) }?;
        }
        for a in &now {
            // SAFETY: the map has N-byte keys ([u8; N]) and 1-byte values (u8).
            unsafe { bpf::map_update(&self.map, a, &1u8) }?;
        }
        *cur = now;
        Ok(())
    }

    fn get(&self) -> Vec<[u8; N]> {
        lock(&self.addrs).clone()
    }
}

/// The receive queues interface `ifname` uses now (ethtool's channels: receive-only plus
/// combined), and the kind of channel that sets them (`combined`, or `rx` for a
/// driver with no combined channels, such as veth), or `None` when the driver does not
/// say (no `get_channels`, or the query failed: the caller then takes netlink's count,
/// as a port did before). Netlink's `IFLA_NUM_RX_QUEUES` is the most it could use: a
/// veth made without `numrxqueues` has one queue per possible CPU there but receives
/// on one.
fn rx_channels(ifname: &str) -> Option<(u32, &'static str)> {
    const ETHTOOL_GCHANNELS: u32 = 0x3c;
    #[repr(C)]
    #[derive(Default)]
    struct EthtoolChannels {
        cmd: u32,
        max_rx: u32,
        max_tx: u32,
        max_other: u32,
        max_combined: u32,
        rx_count: u32,
        tx_count: u32,
        other_count: u32,
        combined_count: u32,
    }
    /// `struct ifreq` with its `ifr_data` member (40 bytes on 64-bit Linux).
    #[repr(C)]
    struct IfreqData {
        name: [u8; libc::IFNAMSIZ],
        data: *mut libc::c_void,
        _pad: [u8; 16],
    }
    let mut ch = EthtoolChannels {
        cmd: ETHTOOL_GCHANNELS,
        ..EthtoolChannels::default()
    };
    let mut req = IfreqData {
        name: [0; libc::IFNAMSIZ],
        data: &mut ch as *mut EthtoolChannels as *mut libc::c_void,
        _pad: [0; 16],
    };
    // ifindex_of checked the name: 1 to 15 bytes, so a NUL follows it.
    req.name[..ifname.len()].copy_from_slice(ifname.as_bytes());
    // SAFETY: plain socket(2) call; the result is checked and owned below.
    let raw = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if raw < 0 {
        return None;
    }
    // SAFETY: `raw` is a new descriptor owned by nobody else.
    let sock = unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(raw) };
    // SAFETY: SIOCETHTOOL with an ifreq whose data points at an ethtool_channels of
    // the size ETHTOOL_GCHANNELS writes; both outlive the call.
    let r = unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCETHTOOL, &mut req as *mut IfreqData) };
    let n = ch.rx_count.saturating_add(ch.combined_count);
    let kind = if ch.max_combined > 0 { "combined" } else { "rx" };
    (r == 0 && n > 0).then_some((n, kind))
}

/// The XDP program attached to `ifname`, if any.
pub fn attached_xdp_program(ifname: &str) -> Result<Option<AttachedProgram>, DeviceError> {
    let ifindex = ifindex_of(ifname)?;
    let state = netlink::link_state(ifindex)
        .map_err(|e| dev_err(ifname, "query the interface (netlink RTM_GETLINK)", e))?;
    attached_program(ifname, &state)
}

fn attached_program(ifname: &str, state: &LinkState) -> Result<Option<AttachedProgram>, DeviceError> {
    if state.xdp_attached == Attached::None {
        return Ok(None);
    }
    let name = if state.xdp_prog_id == 0 {
        String::new()
    } else {
        bpf::prog_name_by_id(state.xdp_prog_id).map_err(|e| {
            dev_err(
                ifname,
                format!("read the name of the attached XDP program {}", state.xdp_prog_id),
                e,
            )
        })?
    };
    Ok(Some(AttachedProgram {
        id: state.xdp_prog_id,
        name,
        attached: state.xdp_attached,
    }))
}

/// Detaches a leftover brickroute program from the interface; refuses a foreign one.
fn clear_leftover(ifname: &str, ifindex: u32, state: &LinkState) -> Result<(), DeviceError> {
    let Some(prog) = attached_program(ifname, state)? else {
        return Ok(());
    };
    if prog.attached == Attached::Multi {
        return Err(DeviceError::new(
            ifname,
            "XDP programs are attached in several modes; detach them first \
             (ip link set dev IF xdp off; ip link set dev IF xdpgeneric off)",
        ));
    }
    if prog.name != PROGRAM_NAME {
        return Err(DeviceError::new(
            ifname,
            format!(
                "another XDP program ('{}', id {}) is attached; brickroute will not replace \
                 it: detach it first (ip link set dev {} xdp off; if that fails, a bpf_link \
                 holds it: end the process that holds the link, which `bpftool link` lists)",
                prog.name, prog.id, ifname
            ),
        ));
    }
    let flags = match prog.attached {
        Attached::Driver => bpf::XDP_FLAGS_DRV_MODE,
        Attached::Generic => bpf::XDP_FLAGS_SKB_MODE,
        _ => 0,
    };
    // A bpf_link holds it while a port is open; one closed a moment ago (a port
    // reopened at once, `run -R` giving an interface back and taking it again) lets
    // go of it in the kernel's deferred work, which then detaches the program: look
    // again for up to a second before calling it another port's.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(1);
    let mut detached = netlink::detach_xdp(ifindex, flags);
    while detached
        .as_ref()
        .is_err_and(|e| e.raw_os_error() == Some(libc::EBUSY))
        && std::time::Instant::now() < deadline
    {
        std::thread::sleep(std::time::Duration::from_millis(20));
        let gone = netlink::link_state(ifindex).is_ok_and(|s| s.xdp_attached == Attached::None);
        detached = if gone {
            Ok(())
        } else {
            netlink::detach_xdp(ifindex, flags)
        };
    }
    detached.map_err(|e| {
        if e.raw_os_error() == Some(libc::EBUSY) {
            DeviceError::io(
                ifname,
                format!(
                    "brickroute's XDP program (id {}) is held by a bpf_link: another \
                     brickroute port (in this process or another) is open on this interface",
                    prog.id
                ),
                e,
            )
        } else {
            dev_err(
                ifname,
                format!("detach the XDP program left by an earlier run (id {})", prog.id),
                e,
            )
        }
    })
}

/// Opens a socket on queue `q`, retrying for up to a second while the queue is busy:
/// the kernel releases a closed socket's hold on its queue in deferred work, so a port
/// reopened right after another closed (or a router restarted at once) finds the
/// queue busy for a moment.
fn open_socket(
    ifindex: u32,
    q: u32,
    g: Geometry,
    zero_copy: bool,
    umem: &Arc<Umem>,
    fill_now: bool,
) -> Result<Xsk, umem::SetupError> {
    let mut tries = 0;
    loop {
        match Xsk::open(ifindex, q, g, zero_copy, umem, fill_now) {
            Err(e) if e.error.raw_os_error() == Some(libc::EBUSY) && tries < 50 => {
                tries += 1;
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            r => return r,
        }
    }
}

impl XdpPort {
    /// Opens `queues` queues (0..queues) of interface `ifname` with UMEMs of its own
    /// (`cfg.frames_per_queue` frames each); see the module text.
    /// Each socket's receive side is filled at once, so frames that arrive before the
    /// first receive call wait in the ring.
    pub fn open(ifname: &str, queues: usize, cfg: &XdpConfig) -> Result<XdpPort, DeviceError> {
        let umems = UmemSet::new(cfg.frames_per_queue, cfg.frame_size);
        let port = XdpPort::open_with(ifname, queues, cfg, &umems, true)?;
        // A port of its own is opened to receive: refused when it would miss queues.
        match port.unread_queues.clone() {
            Some(why) => Err(DeviceError::new(ifname, why)),
            None => Ok(port),
        }
    }

    /// Opens `queues` queues (0..queues) of interface `ifname`; queue q uses UMEM q of
    /// `umems`, shared with every other port opened with that set, so packets move
    /// between them without copies. See the module text.
    ///
    /// Half of a UMEM's frames are split among the receive sides of the sockets sharing
    /// it, so each socket's share depends on how many ports share the set: a socket's
    /// receive side gets a few receive batches ([`umem::FIRST_FILL_BATCHES`]) when it
    /// opens and the rest of its share from the first receive call on its queue (once
    /// the ports that share the set are open). Refused when a share would be smaller
    /// than those first batches. A port with fewer queues than the interface receives
    /// on is opened (it can transmit) and says so in [`Port::receive_problem`].
    pub fn open_shared(
        ifname: &str,
        queues: usize,
        cfg: &XdpConfig,
        umems: &Arc<UmemSet>,
    ) -> Result<XdpPort, DeviceError> {
        XdpPort::open_with(ifname, queues, cfg, umems, false)
    }

    fn open_with(
        ifname: &str,
        queues: usize,
        cfg: &XdpConfig,
        umems: &Arc<UmemSet>,
        fill_now: bool,
    ) -> Result<XdpPort, DeviceError> {
        if queues == 0 {
            return Err(DeviceError::new(
                ifname,
                "an AF_XDP port needs at least one queue",
            ));
        }
        if !cfg.ring_size.is_power_of_two() || cfg.ring_size < 64 {
            return Err(DeviceError::new(
                ifname,
                format!("ring size {} is not a power of two of at least 64", cfg.ring_size),
            ));
        }
        if cfg.frame_size != 2048 && cfg.frame_size != 4096 {
            return Err(DeviceError::new(
                ifname,
                format!("UMEM frame size {} is not 2048 or 4096", cfg.frame_size),
            ));
        }
        if umems.frame_size() != cfg.frame_size {
            return Err(DeviceError::new(
                ifname,
                format!(
                    "UMEM frame size {} differs from the shared UMEMs' {}",
                    cfg.frame_size,
                    umems.frame_size()
                ),
            ));
        }
        if cfg.frames_per_queue < 2 * cfg.rx_batch.max(1) {
            return Err(DeviceError::new(
                ifname,
                format!(
                    "{} UMEM frames per queue are too few for a receive batch of {}",
                    cfg.frames_per_queue, cfg.rx_batch
                ),
            ));
        }
        let ifindex = ifindex_of(ifname)?;
        let state = netlink::link_state(ifindex)
            .map_err(|e| dev_err(ifname, "query the interface (netlink RTM_GETLINK)", e))?;
        let most_queues = state.rx_queues.unwrap_or(1).max(1);
        let (rx_queues, channel) = rx_channels(ifname).unwrap_or((most_queues, "combined"));
        if queues > rx_queues as usize {
            return Err(DeviceError::new(
                ifname,
                format!(
                    "{} queues asked, the interface has {} receive queue{}",
                    queues,
                    rx_queues,
                    if rx_queues == 1 { "" } else { "s" }
                ),
            ));
        }
        // The program redirects a frame to its receive queue's socket; a queue
        // without one would hand its frames to the kernel, unseen by the router.
        let unread_queues = (queues < rx_queues as usize).then(|| {
            let unread = rx_queues as usize - queues;
            format!(
                "the interface has {} receive queues and {} worker{} to read them (AF_XDP \
                     reads one queue per worker; frames arriving on the other {} queue{} would \
                     go to the kernel instead of the router): run {} workers (--threads {}) or \
                     give the interface {} queue{} (ethtool -L {} {} {})",
                rx_queues,
                queues,
                if queues == 1 { "" } else { "s" },
                unread,
                if unread == 1 { "" } else { "s" },
                rx_queues,
                rx_queues,
                queues,
                if queues == 1 { "" } else { "s" },
                ifname,
                channel,
                queues
            )
        });
        let mut queue_umems = Vec::with_capacity(queues);
        for q in 0..queues {
            let umem = umems
                .umem(q)
                .map_err(|e| dev_err(ifname, format!("queue {}: allocate the UMEM", q), e))?;
            // Half the UMEM is split among the receive sides of the sockets sharing
            // it; each gets its first few batches when it opens, before the share is
            // known, so a share must hold them.
            let sockets = umem.members() + 1;
            let share = umem.receive_share(sockets);
            let least = umem::FIRST_FILL_BATCHES * cfg.rx_batch.max(1);
            if share < least {
                return Err(DeviceError::new(
                    ifname,
                    format!(
                        "queue {}: a UMEM of {} frames is too small for {} AF_XDP sockets: half \
                         of it is split among their receive sides, {} frames each, fewer than \
                         {} receive batches ({}); open fewer interfaces with METHOD XDP",
                        q,
                        umem.frames(),
                        sockets,
                        share,
                        umem::FIRST_FILL_BATCHES,
                        least
                    ),
                ));
            }
            queue_umems.push(umem);
        }
        clear_leftover(ifname, ifindex, &state)?;

        let xsk_map = bpf::map_create(
            bpf::BPF_MAP_TYPE_XSKMAP,
            4,
            4,
            most_queues.max(rx_queues),
            "brt_xsks",
        )
        .map_err(|e| dev_err(ifname, "create the XSKMAP", e))?;
        let local_v4 =
            AddressMap::new("brt_local_v4").map_err(|e| dev_err(ifname, "create the IPv4 address map", e))?;
        let local_v6 =
            AddressMap::new("brt_local_v6").map_err(|e| dev_err(ifname, "create the IPv6 address map", e))?;
        let flags_map = bpf::map_create(bpf::BPF_MAP_TYPE_ARRAY, 4, 4, 1, "brt_flags")
            .map_err(|e| dev_err(ifname, "create the flags map", e))?;
        let maps = program::Maps {
            xsks: xsk_map.as_raw_fd(),
            v4: local_v4.map.as_raw_fd(),
            v6: local_v6.map.as_raw_fd(),
            flags: flags_map.as_raw_fd(),
        };
        let load_plain = || {
            bpf::prog_load_xdp(&program::instructions(maps, None), PROGRAM_NAME).map_err(|e| {
                let step = if e.log.is_empty() {
                    "load the XDP program".to_string()
                } else {
                    format!("load the XDP program (verifier: {})", e.log)
                };
                dev_err(ifname, step, e.error)
            })
        };
        // In native mode, the variant that puts stripped VLAN tags back, where the
        // kernel has the kfunc (6.8 on) and takes the program; else the plain one.
        // A kernel that has the kfunc and still refuses the program is worth a warning:
        // the frames' stripped tags are then lost.
        let mut vlan_refused = None;
        let with_tags = (cfg.attach != AttachRequest::Generic)
            .then(xdp_vlan_tags_restorable)
            .flatten()
            .and_then(|id| {
                let insns = program::instructions(maps, Some(id));
                bpf::prog_load_xdp_bound(&insns, PROGRAM_NAME, ifindex)
                    .map_err(|e| {
                        vlan_refused = Some(if e.log.is_empty() {
                            e.error.to_string()
                        } else {
                            format!("{}; verifier: {}", e.error, e.log)
                        })
                    })
                    .ok()
            });

        let geometry = Geometry {
            frames: cfg.frames_per_queue,
            frame_size: cfg.frame_size,
            ring_size: cfg.ring_size,
            rx_batch: cfg.rx_batch.max(1),
            tx_batch: cfg.tx_batch.max(1),
            max_frame: state.mtu.map_or(u32::MAX, |m| m.saturating_add(14)),
        };
        let mut sockets = Vec::with_capacity(queues);
        // Once one queue falls back to copy mode the others are opened in copy mode
        // too (earlier ones stay zero-copy); the port then reports copy mode.
        let mut mode = XdpMode::ZeroCopy;
        for (q, umem) in (0..queues as u32).zip(&queue_umems) {
            let zc = if cfg.zero_copy && mode == XdpMode::ZeroCopy {
                open_socket(ifindex, q, geometry, true, umem, fill_now).ok()
            } else {
                None
            };
            let xsk = match zc {
                Some(x) => x,
                None => open_socket(ifindex, q, geometry, false, umem, fill_now)
                    .map_err(|e| dev_err(ifname, format!("queue {}: {}", q, e.step), e.error))?,
            };
            // A socket sharing a UMEM takes the mode of the socket that registered it:
            // ask the kernel what this one got.
            if !xsk
                .zero_copy()
                .map_err(|e| dev_err(ifname, format!("queue {}: read the socket's mode", q), e))?
            {
                mode = XdpMode::Copy;
            }
            let fd = xsk.fd().as_raw_fd() as u32;
            // SAFETY: the XSKMAP has 4-byte keys (u32 queue) and 4-byte values (u32 fd).
            unsafe { bpf::map_update(&xsk_map, &q, &fd) }
                .map_err(|e| dev_err(ifname, format!("queue {}: enter the socket in the XSKMAP", q), e))?;
            sockets.push(xsk);
        }
        let (v4, v6) =
            interface_addresses(ifindex).map_err(|e| dev_err(ifname, "read the interface's addresses", e))?;
        local_v4
            .set(v4)
            .map_err(|e| dev_err(ifname, "enter an address in the IPv4 address map", e))?;
        local_v6
            .set(v6)
            .map_err(|e| dev_err(ifname, "enter an address in the IPv6 address map", e))?;

        let tagging = with_tags.is_some();
        let (prog, link, attach) = match cfg.attach {
            AttachRequest::Native => {
                let prog = match with_tags {
                    Some(p) => p,
                    None => load_plain()?,
                };
                let link = bpf::link_create_xdp(&prog, ifindex, bpf::XDP_FLAGS_DRV_MODE)
                    .map_err(|e| dev_err(ifname, "attach the XDP program in native mode", e))?;
                (prog, link, XdpAttach::Native)
            }
            AttachRequest::Generic => {
                let prog = load_plain()?;
                let link = bpf::link_create_xdp(&prog, ifindex, bpf::XDP_FLAGS_SKB_MODE)
                    .map_err(|e| dev_err(ifname, "attach the XDP program in generic mode", e))?;
                (prog, link, XdpAttach::Generic)
            }
            AttachRequest::Auto => {
                let first = match with_tags {
                    Some(p) => p,
                    None => load_plain()?,
                };
                match bpf::link_create_xdp(&first, ifindex, bpf::XDP_FLAGS_DRV_MODE) {
                    Ok(l) => (first, l, XdpAttach::Native),
                    Err(native) => {
                        // A bound program runs in native mode only: generic mode takes
                        // the plain one.
                        drop(first);
                        let prog = load_plain()?;
                        match bpf::link_create_xdp(&prog, ifindex, bpf::XDP_FLAGS_SKB_MODE) {
                            Ok(l) => (prog, l, XdpAttach::Generic),
                            Err(e) => {
                                return Err(dev_err(
                                    ifname,
                                    format!("attach the XDP program (native mode: {}; generic mode)", native),
                                    e,
                                ))
                            }
                        }
                    }
                }
            }
        };

        Ok(XdpPort {
            vlan_tags: tagging && attach == XdpAttach::Native,
            // (Generic mode cannot restore tags at all: nothing was lost by the refusal.)
            warning: vlan_refused.filter(|_| attach == XdpAttach::Native).map(|why| {
                format!(
                    "VLAN tags the driver strips from received frames are not put back (the kernel refused the program that reads them: {})",
                    why
                )
            }),
            _link: link,
            ifname: ifname.to_string(),
            ifindex,
            counters: (0..queues).map(|_| CachePadded::default()).collect(),
            queues: sockets.into_iter().map(|x| CachePadded(Mutex::new(x))).collect(),
            mode,
            attach,
            local_v4,
            local_v6,
            flags_map,
            flags: Mutex::new(0),
            _prog: prog,
            _xsk_map: xsk_map,
            unread_queues,
        })
    }

    /// True when the attached program puts back the VLAN tags the driver strips (see
    /// [`xdp_vlan_tags_restorable`]): native mode on a kernel with the kfunc.
    pub fn restores_vlan_tags(&self) -> bool {
        self.vlan_tags
    }

    /// Zero-copy or copy mode, as the kernel granted it.
    pub fn mode(&self) -> XdpMode {
        self.mode
    }

    /// Where the program runs (native or generic XDP).
    pub fn attach_mode(&self) -> XdpAttach {
        self.attach
    }

    pub fn ifname(&self) -> &str {
        &self.ifname
    }

    pub fn ifindex(&self) -> u32 {
        self.ifindex
    }

    /// The IPv4 addresses whose frames the program passes to the kernel (the first
    /// 256 of the interface's).
    pub fn local_addresses(&self) -> Vec<[u8; 4]> {
        self.local_v4.get()
    }

    /// The IPv6 addresses (the first 256 of the interface's) whose neighbour
    /// discovery the program passes to the kernel when the router does its own.
    pub fn local_addresses_v6(&self) -> Vec<[u8; 16]> {
        self.local_v6.get()
    }

    /// Re-reads the interface's IPv4 and IPv6 addresses into the program's address maps
    /// (after addresses were added or removed); returns how many IPv4 addresses there
    /// are now.
    pub fn refresh_local_addresses(&self) -> Result<usize, DeviceError> {
        let (v4, v6) = interface_addresses(self.ifindex)
            .map_err(|e| dev_err(&self.ifname, "read the interface's addresses", e))?;
        let n = v4.len().min(MAX_LOCAL_ADDRS as usize);
        self.local_v4
            .set(v4)
            .map_err(|e| dev_err(&self.ifname, "update the IPv4 address map", e))?;
        self.local_v6
            .set(v6)
            .map_err(|e| dev_err(&self.ifname, "update the IPv6 address map", e))?;
        Ok(n)
    }

    /// Whether ARP for addresses other than the interface's own comes to the sockets
    /// (`true`: the router answers and sends ARP itself) or goes to the kernel with
    /// all other ARP (`false`, as the port opens). ARP for the interface's own
    /// addresses always goes to the kernel.
    pub fn set_router_arp(&self, on: bool) -> Result<(), DeviceError> {
        self.set_flag(program::FLAG_ROUTER_ARP, on)
    }

    /// Whether neighbour solicitations for, and advertisements to, addresses other
    /// than the interface's own come to the sockets (`true`: the router does its own
    /// neighbour discovery) or go to the kernel with all other neighbour discovery
    /// (`false`, as the port opens).
    pub fn set_router_nd(&self, on: bool) -> Result<(), DeviceError> {
        self.set_flag(program::FLAG_ROUTER_ND, on)
    }

    fn set_flag(&self, flag: u32, on: bool) -> Result<(), DeviceError> {
        let mut flags = lock(&self.flags);
        let new = if on { *flags | flag } else { *flags & !flag };
        // SAFETY: the flags map has 4-byte keys (u32 index) and 4-byte values (u32).
        unsafe { bpf::map_update(&self.flags_map, &0u32, &new) }
            .map_err(|e| dev_err(&self.ifname, "set the XDP program's flags", e))?;
        *flags = new;
        Ok(())
    }

    /// UMEM frame whereabouts and transmit drops of queue `q` (default for a queue
    /// that does not exist).
    pub fn xdp_stats(&self, q: usize) -> XdpQueueStats {
        self.queues.get(q).map_or(XdpQueueStats::default(), |x| {
            let x = lock(x);
            XdpQueueStats {
                frames: x.frame_counts(),
                tx_too_long: x.tx_too_long,
                tx_link_down: x.tx_link_down,
                tx_no_room: x.tx_no_room,
                tx_in_place: x.tx_in_place,
                tx_copied: x.tx_copied,
                shared_umem: x.shares_umem(),
                kernel: x.kernel_stats().unwrap_or_default(),
            }
        })
    }

    /// Reclaims finished transmissions of every queue, then tells whether every frame
    /// of the queues' UMEMs is back in one of its resting places (free list, fill,
    /// receive or completion ring; no packet holds one). True once nothing is being
    /// transmitted and every packet is dropped; false after that means a leak.
    pub fn frames_accounted(&self) -> bool {
        self.queues.iter().all(|x| {
            let mut x = lock(x);
            x.reclaim_completions();
            let f = x.frame_counts();
            f.in_kernel() == 0 && f.packets == 0 && x.frames_in_flight() == 0
        })
    }

    /// Whether packet `p`'s buffer is a frame of queue `q`'s UMEM (it was received on
    /// a queue of that UMEM and can be sent on one without a copy).
    pub fn holds(&self, q: usize, p: &Packet) -> bool {
        self.queues.get(q).is_some_and(|x| lock(x).pool().holds(p))
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding the lock leaves the rings consistent (indices are published
    // only after entries are written), so a poisoned lock is still usable.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl XdpPort {
    /// "copy mode, native XDP": what the kernel granted.
    fn mode_text(&self) -> String {
        format!(
            "{}, {} XDP",
            match self.mode {
                XdpMode::ZeroCopy => "zero-copy mode",
                XdpMode::Copy => "copy mode",
            },
            match self.attach {
                XdpAttach::Native => "native",
                XdpAttach::Generic => "generic",
            }
        )
    }
}

impl fmt::Display for XdpPort {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: AF_XDP, {}, {} queue{}",
            self.ifname,
            self.mode_text(),
            self.queues.len(),
            if self.queues.len() == 1 { "" } else { "s" }
        )
    }
}

impl fmt::Debug for XdpPort {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "XdpPort({})", self)
    }
}

impl Port for XdpPort {
    fn queues(&self) -> usize {
        self.queues.len()
    }

    fn deliver_router_arp(&self, on: bool) -> Result<(), DeviceError> {
        self.set_router_arp(on)
    }

    fn deliver_router_nd(&self, on: bool) -> Result<(), DeviceError> {
        self.set_router_nd(on)
    }

    fn refresh_addresses(&self) -> Result<(), DeviceError> {
        self.refresh_local_addresses().map(|_| ())
    }

    fn rx_burst(&self, queue: usize, batch: &mut PacketBatch, max: usize) -> usize {
        let Some(x) = self.queues.get(queue) else {
            return 0;
        };
        let (n, bytes) = lock(x).receive(batch, max);
        self.counters[queue].count_rx(n, bytes);
        n
    }

    fn rx_finished(&self, _queue: usize) -> bool {
        false
    }

    fn receive_problem(&self) -> Option<String> {
        self.unread_queues.clone()
    }

    fn warning(&self) -> Option<String> {
        self.warning.clone()
    }

    fn wait_fd(&self, queue: usize) -> Option<std::os::fd::RawFd> {
        // The socket polls readable when its receive ring has descriptors.
        self.queues.get(queue).map(|x| lock(x).fd().as_raw_fd())
    }

    fn tx_burst(&self, queue: usize, batch: &mut PacketBatch) -> usize {
        let Some(x) = self.queues.get(queue) else {
            batch.clear();
            return 0;
        };
        let (n, bytes) = lock(x).transmit(batch);
        self.counters[queue].count_tx(n, bytes);
        n
    }

    fn stats(&self, queue: usize) -> QueueStats {
        self.counters
            .get(queue)
            .map_or(QueueStats::default(), |c| c.snapshot())
    }

    fn rx_dropped(&self, queue: usize) -> u64 {
        if queue >= self.queues.len() {
            return 0;
        }
        let k = self.xdp_stats(queue).kernel;
        k.rx_dropped + k.rx_ring_full
    }

    fn tx_dropped(&self, queue: usize) -> u64 {
        if queue >= self.queues.len() {
            return 0;
        }
        let s = self.xdp_stats(queue);
        s.tx_too_long + s.tx_no_room + s.tx_link_down
    }

    fn mode(&self) -> Option<String> {
        Some(self.mode_text())
    }
}
