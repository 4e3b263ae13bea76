//! Ports for brickroute: N receive/transmit queue pairs behind the [`Port`] trait.
//!
//! Queue i of every port belongs to worker i: only that worker calls
//! [`Port::rx_burst`] and [`Port::tx_burst`] on it (a `ToDevice` with an explicit QUEUE
//! aside), so the locks the Linux ports take once per burst are uncontended.
//! Per-queue counters are atomics, each on its own cache lines, readable from any
//! thread.
//!
//! [`MemPort`] is an in-memory port: its receive side replays a traffic template spread
//! over the queues by the RSS hash and indirection table, as a multi-queue NIC would;
//! its transmit side counts and drops.
//!
//! [`AfPacketPort`] is a Linux interface through AF_PACKET sockets: a TPACKET_V3
//! receive ring per queue, `PACKET_FANOUT` spreading the interface over the queues,
//! `sendmmsg` transmit.
//!
//! [`XdpPort`] is a Linux interface through AF_XDP sockets, one per queue, fed by
//! brickroute's own XDP program; the UMEM is the packet pool, one per worker shared by
//! its sockets across ports ([`UmemSet`]).

#[cfg(target_os = "linux")]
mod afpacket;
mod bpf;
mod error;
mod mem;
mod port;
#[cfg(target_os = "linux")]
pub mod rtnl;
#[cfg(target_os = "linux")]
mod tun;
mod xdp;

#[cfg(target_os = "linux")]
pub use afpacket::{rss_program_build_time, rss_program_cost, AfPacketConfig, AfPacketPort, ProgramCost};
pub use error::DeviceError;
pub use mem::MemPort;
pub use port::{CachePadded, Port, QueueStats};
#[cfg(target_os = "linux")]
pub use tun::{TunDevice, TunKind, TunSettings};
pub use xdp::{
    attached_xdp_program, parse_link_reply, xdp_vlan_tags_restorable, AttachRequest, Attached,
    AttachedProgram, FrameCounts, KernelStats, LinkState, ReplyError, UmemSet, XdpAttach, XdpConfig, XdpMode,
    XdpPort, XdpQueueStats, PROGRAM_NAME,
};
