//! The kernel's IPv4 routes over route netlink: a dump of a routing table, and the
//! notifications of its changes (RTM_NEWROUTE, RTM_DELROUTE) and of the links and
//! addresses whose changes move routes without a notification of their own (Linux
//! drops the routes through an interface that goes down, or whose address goes,
//! silently). `parse` reads any bytes without panicking (fuzzed).

use crate::xdp::ReplyError;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::Duration;

const NLMSG_HDR: usize = 16;
const RTMSG: usize = 12;
const RTNEXTHOP: usize = 8;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const RTM_NEWLINK: u16 = 16;
const RTM_DELLINK: u16 = 17;
const RTM_NEWADDR: u16 = 20;
const RTM_DELADDR: u16 = 21;
const RTM_NEWROUTE: u16 = 24;
const RTM_DELROUTE: u16 = 25;
const RTM_GETROUTE: u16 = 26;
const NLM_F_REQUEST: u16 = 0x1;
const NLM_F_DUMP_INTR: u16 = 0x10;
const NLM_F_DUMP: u16 = 0x300;
const NLA_TYPE_MASK: u16 = 0x3fff;

const RTA_DST: u16 = 1;
const RTA_OIF: u16 = 4;
const RTA_GATEWAY: u16 = 5;
const RTA_PRIORITY: u16 = 6;
const RTA_MULTIPATH: u16 = 9;
const RTA_TABLE: u16 = 15;

/// `RTM_F_CLONED`: a route cache entry, not a route.
const RTM_F_CLONED: u32 = 0x200;

/// Multicast groups (`RTMGRP_*`): links, IPv4 addresses, IPv4 routes.
const GROUPS: u32 = 0x1 | 0x10 | 0x40;

/// `RTN_UNICAST`: a route to a gateway or a directly connected network.
pub const RTN_UNICAST: u8 = 1;

/// One IPv4 route as the kernel describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Route {
    pub dst: u32,
    pub len: u8,
    pub tos: u8,
    pub table: u32,
    /// `RTN_*`: unicast, local, broadcast, blackhole, unreachable, ...
    pub kind: u8,
    /// The metric (`RTA_PRIORITY`): of the routes to one prefix the kernel uses the
    /// lowest.
    pub priority: u32,
    /// The output interface and gateway, or those of a multipath route's first hop.
    pub oif: Option<u32>,
    pub gateway: Option<u32>,
}

/// What one netlink message says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Message {
    /// A route added or replaced, or one of a dump.
    NewRoute(Route),
    DelRoute(Route),
    /// A link or an IPv4 address changed: routes may have moved without a message.
    LinkOrAddress,
    /// The end of a dump.
    Done,
    /// A dump the kernel says was interrupted by a change: to be taken again.
    Interrupted,
    /// An error the kernel returned (errno).
    Error(i32),
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

/// An IPv4 address attribute (network byte order).
fn addr_at(b: &[u8]) -> Option<u32> {
    Some(u32::from_be_bytes(b.get(..4)?.try_into().ok()?))
}

fn align4(n: usize) -> usize {
    (n + 3) & !3
}

/// The attributes of `b`: (type without flags, payload); an error for one whose
/// length does not fit.
fn attributes(mut b: &[u8]) -> impl Iterator<Item = Result<(u16, &[u8]), ReplyError>> {
    std::iter::from_fn(move || {
        if b.len() < 4 {
            return None;
        }
        let (len, ty) = (u16_at(b, 0)? as usize, u16_at(b, 2)?);
        if len < 4 || len > b.len() {
            b = &[];
            return Some(Err(ReplyError::Malformed("attribute length out of bounds")));
        }
        let payload = &b[4..len];
        b = &b[align4(len).min(b.len())..];
        Some(Ok((ty & NLA_TYPE_MASK, payload)))
    })
}

/// Every message of a datagram the kernel sent. IPv6 routes, route cache entries and
/// messages of other types are left out.
pub fn parse(buf: &[u8]) -> Result<Vec<Message>, ReplyError> {
    let mut out = Vec::new();
    let mut rest = buf;
    while rest.len() >= NLMSG_HDR {
        let len = u32_at(rest, 0).unwrap_or(0) as usize;
        let ty = u16_at(rest, 4).unwrap_or(0);
        let flags = u16_at(rest, 6).unwrap_or(0);
        if len < NLMSG_HDR || len > rest.len() {
            return Err(ReplyError::Malformed("message length out of bounds"));
        }
        let body = &rest[NLMSG_HDR..len];
        if flags & NLM_F_DUMP_INTR != 0 {
            out.push(Message::Interrupted);
        }
        match ty {
            NLMSG_ERROR => {
                let errno = u32_at(body, 0).ok_or(ReplyError::Malformed("truncated error"))? as i32;
                if errno != 0 {
                    out.push(Message::Error(-errno));
                }
            }
            NLMSG_DONE => out.push(Message::Done),
            RTM_NEWLINK | RTM_DELLINK | RTM_NEWADDR | RTM_DELADDR => out.push(Message::LinkOrAddress),
            RTM_NEWROUTE | RTM_DELROUTE => {
                if let Some(r) = parse_route(body)? {
                    out.push(if ty == RTM_NEWROUTE {
                        Message::NewRoute(r)
                    } else {
                        Message::DelRoute(r)
                    });
                }
            }
            _ => {}
        }
        rest = &rest[align4(len).min(rest.len())..];
    }
    Ok(out)
}

/// An `rtmsg` and its attributes; `None` for what is not an IPv4 route.
fn parse_route(body: &[u8]) -> Result<Option<Route>, ReplyError> {
    let Some(hdr) = body.get(..RTMSG) else {
        return Err(ReplyError::Malformed("truncated rtmsg"));
    };
    let flags = u32_at(hdr, 8).unwrap_or(0);
    if hdr[0] != libc::AF_INET as u8 || flags & RTM_F_CLONED != 0 || hdr[1] > 32 {
        return Ok(None);
    }
    let mut r = Route {
        dst: 0,
        len: hdr[1],
        tos: hdr[3],
        table: u32::from(hdr[4]),
        kind: hdr[7],
        priority: 0,
        oif: None,
        gateway: None,
    };
    for a in attributes(&body[RTMSG..]) {
        let (ty, p) = a?;
        match ty {
            RTA_DST => r.dst = addr_at(p).ok_or(ReplyError::Malformed("short RTA_DST"))?,
            RTA_OIF => r.oif = u32_at(p, 0),
            RTA_GATEWAY => r.gateway = addr_at(p),
            RTA_PRIORITY => r.priority = u32_at(p, 0).unwrap_or(0),
            RTA_TABLE => r.table = u32_at(p, 0).unwrap_or(r.table),
            RTA_MULTIPATH if r.oif.is_none() => {
                // struct rtnexthop: len, flags, hops, ifindex; then its attributes.
                let len = u16_at(p, 0).unwrap_or(0) as usize;
                if len >= RTNEXTHOP && len <= p.len() {
                    r.oif = u32_at(p, 4);
                    for na in attributes(&p[RTNEXTHOP..len]) {
                        let (nty, np) = na?;
                        if nty == RTA_GATEWAY {
                            r.gateway = addr_at(np);
                        }
                    }
                }
            }
            _ => {}
        }
    }
    // Bits beyond the prefix length are not part of the route.
    r.dst &= if r.len == 0 { 0 } else { u32::MAX << (32 - r.len) };
    Ok(Some(r))
}

/// A route netlink socket. `subscribe` joins the groups of route, link and address
/// changes; `dump` asks for every IPv4 route.
pub struct RouteSocket {
    fd: OwnedFd,
}

/// A new route netlink socket, not bound yet (the kernel binds it at the first send).
pub(crate) fn route_netlink_socket() -> io::Result<OwnedFd> {
    // SAFETY: plain socket(2); the result is checked before use.
    let fd = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC,
            libc::NETLINK_ROUTE,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is a new descriptor owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

impl RouteSocket {
    fn open(groups: u32) -> io::Result<RouteSocket> {
        let fd = route_netlink_socket()?;
        // SAFETY: a zeroed sockaddr_nl is valid; the kernel picks the port id.
        let mut sa: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
        sa.nl_family = libc::AF_NETLINK as u16;
        sa.nl_groups = groups;
        // SAFETY: `sa` is a sockaddr_nl of the size passed.
        let r = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                &sa as *const libc::sockaddr_nl as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_nl>() as u32,
            )
        };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        let s = RouteSocket { fd };
        // Room for a burst of changes (a routing daemon installing a full table); a
        // smaller buffer only means more resynchronisations (ENOBUFS).
        let size: libc::c_int = 8 << 20;
        // SAFETY: setsockopt with a c_int of the size passed; failure is harmless.
        unsafe {
            libc::setsockopt(
                s.fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVBUFFORCE,
                &size as *const libc::c_int as *const libc::c_void,
                std::mem::size_of::<libc::c_int>() as u32,
            );
        }
        Ok(s)
    }

    /// A socket that receives the changes of routes, links and IPv4 addresses.
    pub fn subscribe() -> io::Result<RouteSocket> {
        RouteSocket::open(GROUPS)
    }

    /// A socket for a dump.
    pub fn unsubscribed() -> io::Result<RouteSocket> {
        RouteSocket::open(0)
    }

    /// Asks for every IPv4 route (the answers come as `NewRoute`, then `Done`).
    pub fn request_dump(&self, seq: u32) -> io::Result<()> {
        let len = NLMSG_HDR + RTMSG;
        let mut m = Vec::with_capacity(len);
        m.extend_from_slice(&(len as u32).to_ne_bytes());
        m.extend_from_slice(&RTM_GETROUTE.to_ne_bytes());
        m.extend_from_slice(&(NLM_F_REQUEST | NLM_F_DUMP).to_ne_bytes());
        m.extend_from_slice(&seq.to_ne_bytes());
        m.extend_from_slice(&0u32.to_ne_bytes());
        m.extend_from_slice(&[libc::AF_INET as u8, 0, 0, 0, 0, 0, 0, 0]);
        m.extend_from_slice(&0u32.to_ne_bytes());
        // SAFETY: `m` is readable for m.len() bytes; the kernel is the default peer.
        let sent = unsafe { libc::send(self.fd.as_raw_fd(), m.as_ptr() as *const libc::c_void, m.len(), 0) };
        if sent < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Receives one datagram into `buf`, waiting at most `wait`: `Ok(None)` when none
    /// came. An error with `raw_os_error() == Some(libc::ENOBUFS)` says changes were
    /// lost (the socket's buffer overflowed): the caller must dump again.
    pub fn recv(&self, buf: &mut [u8], wait: Duration) -> io::Result<Option<usize>> {
        let mut pfd = libc::pollfd {
            fd: self.fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = wait.as_millis().min(i32::MAX as u128) as i32;
        // SAFETY: one valid pollfd.
        let r = unsafe { libc::poll(&mut pfd, 1, ms) };
        if r < 0 {
            let e = io::Error::last_os_error();
            return if e.kind() == io::ErrorKind::Interrupted {
                Ok(None)
            } else {
                Err(e)
            };
        }
        if r == 0 {
            return Ok(None);
        }
        // SAFETY: `buf` is writable for buf.len() bytes.
        let n = unsafe {
            libc::recv(
                self.fd.as_raw_fd(),
                buf.as_mut_ptr() as *mut libc::c_void,
                buf.len(),
                libc::MSG_DONTWAIT,
            )
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            return match e.kind() {
                io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(None),
                _ => Err(e),
            };
        }
        Ok(Some(n as usize))
    }
}

/// Every IPv4 route of every table, taken again while the kernel reports the dump
/// interrupted by a change.
pub fn dump_routes() -> io::Result<Vec<Route>> {
    let mut buf = vec![0u8; 1 << 20];
    let mut attempt = 0u32;
    'again: loop {
        attempt += 1;
        let s = RouteSocket::unsubscribed()?;
        s.request_dump(attempt)?;
        let mut routes = Vec::new();
        loop {
            let Some(n) = s.recv(&mut buf, Duration::from_secs(10))? else {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "route dump: no answer from the kernel",
                ));
            };
            for m in parse(&buf[..n]).map_err(io::Error::from)? {
                match m {
                    Message::NewRoute(r) => routes.push(r),
                    Message::Done => return Ok(routes),
                    Message::Interrupted if attempt < 10 => continue 'again,
                    Message::Error(e) => return Err(io::Error::from_raw_os_error(e)),
                    _ => {}
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
