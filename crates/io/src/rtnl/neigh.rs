//! The kernel's neighbour tables (ARP for IPv4, Neighbour Discovery for IPv6) over
//! route netlink: a dump, the notifications of changes (RTM_NEWNEIGH, RTM_DELNEIGH)
//! and of links (whose link-layer address may change), and the request that makes the
//! kernel resolve an address (`NTF_USE`, as `ip neigh replace ADDR dev DEV use`).
//! brickroute's XDP program hands ARP and ND to the kernel, so the kernel's table is
//! the one that is kept up to date. `parse` reads any bytes without panicking (fuzzed).

use super::{addr_at, dump, dump_status, messages, DumpStep, Family, RouteSocket};
use super::{NLMSG_HDR, NLM_F_DUMP, NLM_F_DUMP_INTR, NLM_F_REPLACE, NLM_F_REQUEST, RTM_DELLINK, RTM_NEWLINK};
use crate::xdp::netlink::{attributes, u16_at, u32_at};
use crate::xdp::ReplyError;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd};

const RTM_NEWNEIGH: u16 = 28;
const RTM_DELNEIGH: u16 = 29;
const RTM_GETNEIGH: u16 = 30;
const NLM_F_CREATE: u16 = 0x400;
/// struct ndmsg: family, 3 bytes of padding, ifindex, state, flags, type.
const NDMSG: usize = 12;
const NDA_DST: u16 = 1;
const NDA_LLADDR: u16 = 2;
/// `NTF_USE`: "use" the entry as a packet to it would, so the kernel resolves it.
const NTF_USE: u8 = 0x1;
/// Multicast groups: links and neighbours (`RTMGRP_LINK | RTMGRP_NEIGH`).
const GROUPS: u32 = 0x1 | 0x4;

/// `NUD_*` states.
pub const NUD_INCOMPLETE: u16 = 0x01;
pub const NUD_REACHABLE: u16 = 0x02;
pub const NUD_STALE: u16 = 0x04;
pub const NUD_DELAY: u16 = 0x08;
pub const NUD_PROBE: u16 = 0x10;
pub const NUD_FAILED: u16 = 0x20;
pub const NUD_NOARP: u16 = 0x40;
pub const NUD_PERMANENT: u16 = 0x80;

/// One neighbour entry. The address is a number, most significant bit first (an IPv4
/// one in the low 32 bits).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Neighbor {
    pub family: Family,
    pub ifindex: u32,
    pub addr: u128,
    /// The link-layer address, when it is an Ethernet one (6 bytes).
    pub lladdr: Option<[u8; 6]>,
    /// `NUD_*` bits.
    pub state: u16,
}

impl Neighbor {
    /// Whether the kernel would send to this neighbour's link-layer address now: it
    /// has one, and the entry is resolved (reachable, or stale and being or to be
    /// checked again) or static.
    pub fn usable(&self) -> bool {
        self.lladdr.is_some()
            && self.state & (NUD_REACHABLE | NUD_STALE | NUD_DELAY | NUD_PROBE | NUD_PERMANENT | NUD_NOARP)
                != 0
    }
}

/// What one netlink message says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NeighMessage {
    /// An entry added or changed, or one of a dump.
    New(Neighbor),
    Deleted(Neighbor),
    /// A link changed (its link-layer address, or its state).
    Link,
    /// The end of a dump.
    Done,
    /// A dump the kernel says was interrupted by a change: to be taken again.
    Interrupted,
    /// An error the kernel returned (errno).
    Error(i32),
}

/// Every message of a datagram the kernel sent. Entries of other families and
/// messages of other types are left out.
pub fn parse(buf: &[u8]) -> Result<Vec<NeighMessage>, ReplyError> {
    let mut out = Vec::new();
    for (ty, flags, body) in messages(buf)? {
        if flags & NLM_F_DUMP_INTR != 0 {
            out.push(NeighMessage::Interrupted);
        }
        match dump_status(ty, body)? {
            Some(Ok(())) => out.push(NeighMessage::Done),
            Some(Err(e)) => out.push(NeighMessage::Error(e)),
            None => {}
        }
        match ty {
            RTM_NEWLINK | RTM_DELLINK => out.push(NeighMessage::Link),
            RTM_NEWNEIGH | RTM_DELNEIGH => {
                if let Some(n) = parse_neighbor(body)? {
                    out.push(if ty == RTM_NEWNEIGH {
                        NeighMessage::New(n)
                    } else {
                        NeighMessage::Deleted(n)
                    });
                }
            }
            _ => {}
        }
    }
    Ok(out)
}

/// An `ndmsg` and its attributes; `None` for an entry that is not IPv4 or IPv6, or
/// has no address.
fn parse_neighbor(body: &[u8]) -> Result<Option<Neighbor>, ReplyError> {
    let Some(hdr) = body.get(..NDMSG) else {
        return Err(ReplyError::Malformed("truncated ndmsg"));
    };
    let family = match hdr[0] {
        f if f == libc::AF_INET as u8 => Family::V4,
        f if f == libc::AF_INET6 as u8 => Family::V6,
        _ => return Ok(None),
    };
    let mut addr = None;
    let mut lladdr = None;
    for a in attributes(&body[NDMSG..]) {
        let (ty, p) = a?;
        match ty {
            NDA_DST => addr = addr_at(family, p),
            NDA_LLADDR if p.len() == 6 => lladdr = p.try_into().ok(),
            _ => {}
        }
    }
    Ok(addr.map(|addr| Neighbor {
        family,
        ifindex: u32_at(hdr, 4).unwrap_or(0),
        addr,
        lladdr,
        state: u16_at(hdr, 8).unwrap_or(0),
    }))
}

/// A netlink request: header, then `body`.
pub(super) fn request(ty: u16, flags: u16, seq: u32, body: &[u8]) -> Vec<u8> {
    let len = NLMSG_HDR + body.len();
    let mut m = Vec::with_capacity(len);
    m.extend_from_slice(&(len as u32).to_ne_bytes());
    m.extend_from_slice(&ty.to_ne_bytes());
    m.extend_from_slice(&flags.to_ne_bytes());
    m.extend_from_slice(&seq.to_ne_bytes());
    m.extend_from_slice(&0u32.to_ne_bytes());
    m.extend_from_slice(body);
    m
}

/// An ndmsg for `family` on `ifindex` with `state` and `flags`.
fn ndmsg(family: Family, ifindex: u32, state: u16, flags: u8) -> Vec<u8> {
    let mut b = vec![family.af(), 0, 0, 0];
    b.extend_from_slice(&ifindex.to_ne_bytes());
    b.extend_from_slice(&state.to_ne_bytes());
    b.extend_from_slice(&[flags, 0]);
    b
}

/// The request that makes the kernel resolve `addr` on `ifindex` (an ARP request or a
/// neighbour solicitation, unless the entry is resolved already): `RTM_NEWNEIGH` with
/// `NTF_USE`, which creates the entry if need be (counted against the kernel's limit on
/// entries) and leaves its state to the kernel.
pub fn resolve_request(family: Family, ifindex: u32, addr: u128, seq: u32) -> Vec<u8> {
    // State NUD_NONE, not iproute2's default NUD_PERMANENT: an entry the request
    // creates with NUD_PERMANENT in its state is exempt from the kernel's garbage
    // collection and from its cap on entries (gc_thresh3), so senders choosing
    // addresses on a connected network could grow the table without bound. With
    // NUD_NONE a full table refuses the request (ENOBUFS) as it refuses the kernel's
    // own resolutions.
    let mut body = ndmsg(family, ifindex, 0, NTF_USE);
    let dst = match family {
        Family::V4 => (addr as u32).to_be_bytes().to_vec(),
        Family::V6 => addr.to_be_bytes().to_vec(),
    };
    body.extend_from_slice(&((4 + dst.len()) as u16).to_ne_bytes());
    body.extend_from_slice(&NDA_DST.to_ne_bytes());
    body.extend_from_slice(&dst);
    request(
        RTM_NEWNEIGH,
        NLM_F_REQUEST | NLM_F_CREATE | NLM_F_REPLACE,
        seq,
        &body,
    )
}

impl RouteSocket {
    /// A socket that receives the changes of neighbour entries and links.
    pub fn subscribe_neighbors() -> io::Result<RouteSocket> {
        RouteSocket::open(GROUPS)
    }

    /// Asks for every neighbour entry of `family` (the answers come as `New`, then
    /// `Done`).
    pub fn request_neighbor_dump(&self, family: Family, seq: u32) -> io::Result<()> {
        self.send(&request(
            RTM_GETNEIGH,
            NLM_F_REQUEST | NLM_F_DUMP,
            seq,
            &ndmsg(family, 0, 0, 0),
        ))
    }

    /// Asks the kernel to resolve `addr` on `ifindex` ([`resolve_request`]); the entry's
    /// changes come as notifications. The kernel acknowledges nothing (no `NLM_F_ACK`).
    pub fn resolve(&self, family: Family, ifindex: u32, addr: u128) -> io::Result<()> {
        self.send(&resolve_request(family, ifindex, addr, 0))
    }
}

/// Every neighbour entry of `family`, taken again while the kernel reports the dump
/// interrupted by a change.
pub fn dump_neighbors(family: Family) -> io::Result<Vec<Neighbor>> {
    dump(
        "neighbour dump",
        |s, seq| s.request_neighbor_dump(family, seq),
        |buf| {
            Ok(parse(buf)?
                .into_iter()
                .map(|m| match m {
                    NeighMessage::New(n) => DumpStep::Item(n),
                    NeighMessage::Done => DumpStep::Done,
                    NeighMessage::Interrupted => DumpStep::Interrupted,
                    NeighMessage::Error(e) => DumpStep::Error(e),
                    _ => DumpStep::Other,
                })
                .collect())
        },
    )
}

/// The Ethernet address of interface `name` (SIOCGIFHWADDR); an error for an interface
/// of another link type (a tun device, loopback, a tunnel).
pub fn link_address(name: &str) -> io::Result<[u8; 6]> {
    let bytes = name.as_bytes();
    if bytes.len() >= libc::IFNAMSIZ || bytes.contains(&0) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not an interface name",
        ));
    }
    // SAFETY: plain socket(2); the result is checked and owned at once.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is a new descriptor owned by nobody else.
    let fd = unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) };
    // SAFETY: a zeroed ifreq is valid; the name is copied in below, NUL-terminated.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (d, &b) in req.ifr_name.iter_mut().zip(bytes) {
        *d = b as libc::c_char;
    }
    // SAFETY: SIOCGIFHWADDR reads the name and writes ifr_hwaddr inside `req`.
    if unsafe { libc::ioctl(fd.as_raw_fd(), libc::SIOCGIFHWADDR, &mut req) } < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: after a successful SIOCGIFHWADDR the union holds ifr_hwaddr.
    let sa = unsafe { req.ifr_ifru.ifru_hwaddr };
    if sa.sa_family != libc::ARPHRD_ETHER {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("not an Ethernet interface (link type {})", sa.sa_family),
        ));
    }
    let mut mac = [0u8; 6];
    for (m, &b) in mac.iter_mut().zip(&sa.sa_data[..6]) {
        *m = b as u8;
    }
    Ok(mac)
}

#[cfg(test)]
mod tests;
