//! The kernel's IPv4 and IPv6 routes over route netlink: a dump of the routing tables,
//! and the notifications of their changes (RTM_NEWROUTE, RTM_DELROUTE) and of the
//! links and addresses whose changes move routes without a notification of their own
//! (Linux drops the IPv4 routes through an interface that goes down, or whose address
//! goes, silently). `parse` reads any bytes without panicking (fuzzed).

use crate::xdp::netlink::{align4, attributes, u16_at, u32_at};
use crate::xdp::ReplyError;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

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
const RTM_NEWNEXTHOP: u16 = 104;
const RTM_DELNEXTHOP: u16 = 105;
const NLM_F_REQUEST: u16 = 0x1;
const NLM_F_DUMP_INTR: u16 = 0x10;
const NLM_F_DUMP: u16 = 0x300;
const NLM_F_MULTI: u16 = 0x2;
const NLM_F_REPLACE: u16 = 0x100;
const NLM_F_APPEND: u16 = 0x800;

const RTA_DST: u16 = 1;
const RTA_OIF: u16 = 4;
const RTA_GATEWAY: u16 = 5;
const RTA_PRIORITY: u16 = 6;
const RTA_MULTIPATH: u16 = 9;
const RTA_TABLE: u16 = 15;
const RTA_PREFSRC: u16 = 7;
const RTA_METRICS: u16 = 8;
const RTA_VIA: u16 = 18;
const RTA_NH_ID: u16 = 30;

/// `RTM_F_CLONED`: a route cache entry, not a route.
const RTM_F_CLONED: u32 = 0x200;
/// `RTNH_F_DEAD`: a next hop the kernel does not use (its link is down).
const RTNH_F_DEAD: u32 = 0x1;
/// `RTNLGRP_NEXTHOP`: nexthop objects (`ip nexthop`), joined by setsockopt: its number
/// is past the 32 bits of `nl_groups`.
const RTNLGRP_NEXTHOP: libc::c_int = 32;

/// Multicast groups (`RTMGRP_*`): links, IPv4 addresses and routes, IPv6 addresses
/// and routes.
const GROUPS: u32 = 0x1 | 0x10 | 0x40 | 0x100 | 0x400;
/// Multicast groups of IPv4 and IPv6 address changes only.
const ADDRESS_GROUPS: u32 = 0x10 | 0x100;

/// `RTN_UNICAST`: a route to a gateway or a directly connected network.
pub const RTN_UNICAST: u8 = 1;

/// An address family of routes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Family {
    V4,
    V6,
}

impl Family {
    /// The longest prefix: 32 or 128.
    pub fn bits(self) -> u8 {
        match self {
            Family::V4 => 32,
            Family::V6 => 128,
        }
    }
    fn af(self) -> u8 {
        match self {
            Family::V4 => libc::AF_INET as u8,
            Family::V6 => libc::AF_INET6 as u8,
        }
    }
}

/// One route as the kernel describes it. Addresses are numbers, most significant bit
/// first: an IPv4 one in the low 32 bits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Route {
    pub family: Family,
    pub dst: u128,
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
    pub gateway: Option<u128>,
    /// Where a new route goes among the routes of its prefix and metric.
    pub place: Place,
    /// Every next hop is dead (`RTNH_F_DEAD`: its link is down): the kernel passes the
    /// route over. Of a multipath route's hops, `oif` and `gateway` are the first live one's.
    pub dead: bool,
    /// Every next hop, in order (one for a route that is not multipath).
    pub hops: Vec<NextHop>,
    /// The nexthop object the route uses (`RTA_NH_ID`, `ip route add ... nhid N`), whose
    /// hops the kernel describes in `hops` too (unless `nexthop_compat_mode` is 0).
    pub nh_id: Option<u32>,
    /// The source prefix's length: a route for packets from that prefix only (IPv6
    /// source-specific routing) when not 0.
    pub src_len: u8,
    /// What else tells two routes of one prefix, metric and next hop apart to the
    /// kernel (`rtm_protocol`, `RTA_PREFSRC`, the `RTA_METRICS` bytes), so that a
    /// removal takes the route it names.
    pub identity: (u8, Option<u128>, Vec<u8>),
}

/// One next hop of a route.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NextHop {
    pub oif: Option<u32>,
    pub gateway: Option<u128>,
    /// `RTNH_F_DEAD`: its link is down.
    pub dead: bool,
    /// Its gateway is of the other family (`RTA_VIA`: an IPv6 gateway for an IPv4
    /// route, RFC 5549), which `gateway` cannot hold (it is `None`).
    pub via_other_family: bool,
    /// Its weight in a multipath route (`rtnh_hops` + 1, 1-256; 1 for a route's only
    /// hop): its share of the flows is its weight over the sum.
    pub weight: u16,
}

/// Where a new route goes among the kernel's routes of the same prefix and metric, of
/// which the kernel uses the first live one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Place {
    /// In front (`ip route add`, `prepend`).
    First,
    /// At the end (`ip route append`; a dump lists routes in the kernel's order).
    Last,
    /// In place of the first (`NLM_F_REPLACE`: `ip route replace`, `change`).
    Replace,
}

/// What one netlink message says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Message {
    /// A route added or replaced, or one of a dump.
    NewRoute(Route),
    DelRoute(Route),
    /// A link, an address or a nexthop object changed: routes may have moved without
    /// a message.
    LinkAddressOrNexthop,
    /// The end of a dump.
    Done,
    /// A dump the kernel says was interrupted by a change: to be taken again.
    Interrupted,
    /// An error the kernel returned (errno).
    Error(i32),
}

/// An address attribute of `family` (network byte order).
fn addr_at(family: Family, b: &[u8]) -> Option<u128> {
    match family {
        Family::V4 => Some(u128::from(u32::from_be_bytes(b.get(..4)?.try_into().ok()?))),
        Family::V6 => Some(u128::from_be_bytes(b.get(..16)?.try_into().ok()?)),
    }
}

/// One netlink message: type, flags, body.
type RawMessage<'a> = (u16, u16, &'a [u8]);

/// The messages of a datagram, or why not.
fn messages(buf: &[u8]) -> Result<Vec<RawMessage<'_>>, ReplyError> {
    let mut out = Vec::new();
    let mut rest = buf;
    while rest.len() >= NLMSG_HDR {
        let len = u32_at(rest, 0).unwrap_or(0) as usize;
        if len < NLMSG_HDR || len > rest.len() {
            return Err(ReplyError::Malformed("message length out of bounds"));
        }
        out.push((
            u16_at(rest, 4).unwrap_or(0),
            u16_at(rest, 6).unwrap_or(0),
            &rest[NLMSG_HDR..len],
        ));
        rest = &rest[align4(len).min(rest.len())..];
    }
    Ok(out)
}

/// What a message says about the dump or request it answers, if it is of a kind every
/// dump shares: `Some(Ok(()))` for the end of a dump, `Some(Err(errno))` for an error
/// the kernel returned; `None` for an acknowledgement or another message.
fn dump_status(ty: u16, body: &[u8]) -> Result<Option<Result<(), i32>>, ReplyError> {
    Ok(match ty {
        NLMSG_ERROR => match u32_at(body, 0).ok_or(ReplyError::Malformed("truncated error"))? as i32 {
            0 => None,
            errno => Some(Err(-errno)),
        },
        NLMSG_DONE => Some(Ok(())),
        _ => None,
    })
}

/// Every message of a datagram the kernel sent. Routes of other families, route cache
/// entries and messages of other types are left out.
pub fn parse(buf: &[u8]) -> Result<Vec<Message>, ReplyError> {
    let mut out = Vec::new();
    for (ty, flags, body) in messages(buf)? {
        if flags & NLM_F_DUMP_INTR != 0 {
            out.push(Message::Interrupted);
        }
        match dump_status(ty, body)? {
            Some(Ok(())) => out.push(Message::Done),
            Some(Err(e)) => out.push(Message::Error(e)),
            None => {}
        }
        match ty {
            RTM_NEWLINK | RTM_DELLINK | RTM_NEWADDR | RTM_DELADDR | RTM_NEWNEXTHOP | RTM_DELNEXTHOP => {
                out.push(Message::LinkAddressOrNexthop)
            }
            RTM_NEWROUTE | RTM_DELROUTE => {
                if let Some(mut r) = parse_route(body)? {
                    r.place = if flags & NLM_F_REPLACE != 0 {
                        Place::Replace
                    } else if flags & (NLM_F_APPEND | NLM_F_MULTI) != 0 || ty == RTM_DELROUTE {
                        Place::Last
                    } else {
                        Place::First
                    };
                    out.push(if ty == RTM_NEWROUTE {
                        Message::NewRoute(r)
                    } else {
                        Message::DelRoute(r)
                    });
                }
            }
            _ => {}
        }
    }
    Ok(out)
}

/// An `rtmsg` and its attributes; `None` for what is not an IPv4 or IPv6 route.
fn parse_route(body: &[u8]) -> Result<Option<Route>, ReplyError> {
    let Some(hdr) = body.get(..RTMSG) else {
        return Err(ReplyError::Malformed("truncated rtmsg"));
    };
    let flags = u32_at(hdr, 8).unwrap_or(0);
    let family = match hdr[0] {
        f if f == libc::AF_INET as u8 => Family::V4,
        f if f == libc::AF_INET6 as u8 => Family::V6,
        _ => return Ok(None),
    };
    if flags & RTM_F_CLONED != 0 || hdr[1] > family.bits() {
        return Ok(None);
    }
    let mut r = Route {
        family,
        dst: 0,
        len: hdr[1],
        tos: hdr[3],
        table: u32::from(hdr[4]),
        kind: hdr[7],
        priority: 0,
        oif: None,
        gateway: None,
        place: Place::Last,
        dead: flags & RTNH_F_DEAD != 0,
        hops: Vec::new(),
        nh_id: None,
        src_len: hdr[2],
        identity: (hdr[5], None, Vec::new()),
    };
    let mut multipath = Vec::new();
    let mut via_other_family = false;
    for a in attributes(&body[RTMSG..]) {
        let (ty, p) = a?;
        match ty {
            RTA_DST => r.dst = addr_at(family, p).ok_or(ReplyError::Malformed("short RTA_DST"))?,
            RTA_OIF => r.oif = u32_at(p, 0),
            RTA_GATEWAY => r.gateway = addr_at(family, p),
            RTA_PRIORITY => r.priority = u32_at(p, 0).unwrap_or(0),
            RTA_TABLE => r.table = u32_at(p, 0).unwrap_or(r.table),
            RTA_PREFSRC => r.identity.1 = addr_at(family, p),
            RTA_METRICS => r.identity.2 = p.to_vec(),
            RTA_VIA => via_other_family = true,
            RTA_NH_ID => r.nh_id = u32_at(p, 0),
            RTA_MULTIPATH => {
                // struct rtnexthop: len, flags, hops, ifindex; then its attributes.
                let mut rest = p;
                while rest.len() >= RTNEXTHOP {
                    let len = u16_at(rest, 0).unwrap_or(0) as usize;
                    if len < RTNEXTHOP || len > rest.len() {
                        return Err(ReplyError::Malformed("rtnexthop length out of bounds"));
                    }
                    let (mut gateway, mut via_other_family) = (None, false);
                    for na in attributes(&rest[RTNEXTHOP..len]) {
                        let (nty, np) = na?;
                        match nty {
                            RTA_GATEWAY => gateway = addr_at(family, np),
                            RTA_VIA => via_other_family = true,
                            _ => {}
                        }
                    }
                    multipath.push(NextHop {
                        oif: u32_at(rest, 4),
                        gateway,
                        dead: u32::from(rest[2]) & RTNH_F_DEAD != 0,
                        via_other_family,
                        weight: u16::from(rest[3]) + 1,
                    });
                    rest = &rest[align4(len).min(rest.len())..];
                }
            }
            _ => {}
        }
    }
    r.hops = if multipath.is_empty() {
        vec![NextHop {
            oif: r.oif,
            gateway: r.gateway,
            dead: r.dead,
            via_other_family,
            weight: 1,
        }]
    } else {
        multipath
    };
    // The first live hop, or the first if all are dead.
    let first = r.hops.iter().find(|h| !h.dead).unwrap_or(&r.hops[0]);
    (r.oif, r.gateway, r.dead) = (first.oif, first.gateway, first.dead);
    // Bits beyond the prefix length are not part of the route.
    let host_bits = u32::from(family.bits() - r.len);
    r.dst = if host_bits >= 128 {
        0
    } else {
        r.dst >> host_bits << host_bits
    };
    Ok(Some(r))
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

/// A route netlink socket. `subscribe` joins the groups of route, link and address
/// changes; `request_dump` asks for every route of a family.
pub struct RouteSocket {
    fd: OwnedFd,
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
        // smaller buffer only means more resynchronisations (ENOBUFS), so a refusal is
        // harmless.
        s.set_option(libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, 8 << 20);
        Ok(s)
    }

    /// setsockopt of an int; whether it took.
    fn set_option(&self, level: libc::c_int, name: libc::c_int, value: libc::c_int) -> bool {
        // SAFETY: setsockopt with a c_int of the size passed, on our own descriptor.
        unsafe {
            libc::setsockopt(
                self.fd.as_raw_fd(),
                level,
                name,
                &value as *const libc::c_int as *const libc::c_void,
                std::mem::size_of::<libc::c_int>() as u32,
            ) == 0
        }
    }

    /// A socket that receives the changes of routes, links, addresses and nexthop
    /// objects.
    pub fn subscribe() -> io::Result<RouteSocket> {
        let s = RouteSocket::open(GROUPS)?;
        // A kernel without nexthop objects refuses it, and then has none to change.
        s.set_option(libc::SOL_NETLINK, libc::NETLINK_ADD_MEMBERSHIP, RTNLGRP_NEXTHOP);
        Ok(s)
    }

    /// A socket that receives the changes of IPv4 and IPv6 addresses only (each
    /// message it gets parses as [`Message::LinkAddressOrNexthop`]).
    pub fn subscribe_addresses() -> io::Result<RouteSocket> {
        RouteSocket::open(ADDRESS_GROUPS)
    }

    /// recv(2) without waiting: the datagram's length, or -1 with errno set.
    fn recv_now(&self, buf: &mut [u8]) -> isize {
        // SAFETY: `buf` is writable for buf.len() bytes.
        unsafe {
            libc::recv(
                self.fd.as_raw_fd(),
                buf.as_mut_ptr() as *mut libc::c_void,
                buf.len(),
                libc::MSG_DONTWAIT,
            )
        }
    }

    /// Drops every datagram waiting, up to the moment of the call: before a dump, so
    /// that changes the dump already shows are not applied again after it (some of
    /// them older than changes whose messages were lost).
    pub fn discard_queued(&self, buf: &mut [u8]) {
        loop {
            let n = self.recv_now(buf);
            if n < 0 && io::Error::last_os_error().raw_os_error() != Some(libc::ENOBUFS) {
                return;
            }
        }
    }

    /// A socket for a dump.
    pub fn unsubscribed() -> io::Result<RouteSocket> {
        RouteSocket::open(0)
    }

    /// Asks for every route of `family` (the answers come as `NewRoute`, then `Done`).
    pub fn request_dump(&self, family: Family, seq: u32) -> io::Result<()> {
        let len = NLMSG_HDR + RTMSG;
        let mut m = Vec::with_capacity(len);
        m.extend_from_slice(&(len as u32).to_ne_bytes());
        m.extend_from_slice(&RTM_GETROUTE.to_ne_bytes());
        m.extend_from_slice(&(NLM_F_REQUEST | NLM_F_DUMP).to_ne_bytes());
        m.extend_from_slice(&seq.to_ne_bytes());
        m.extend_from_slice(&0u32.to_ne_bytes());
        m.extend_from_slice(&[family.af(), 0, 0, 0, 0, 0, 0, 0]);
        m.extend_from_slice(&0u32.to_ne_bytes());
        self.send(&m)
    }

    /// Sends one request to the kernel.
    fn send(&self, m: &[u8]) -> io::Result<()> {
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
        let n = self.recv_now(buf);
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

/// `NLM_F_ACK`, `NLM_F_EXCL` and `NLM_F_CREATE`: a new route, refused if one to the
/// same destination exists, acknowledged either way.
const NLM_F_ACK: u16 = 0x4;
const NLM_F_EXCL: u16 = 0x200;
const NLM_F_CREATE: u16 = 0x400;

/// The request adding an IPv4 default route via `gateway` to the main table, as
/// `route add default gw GATEWAY` does (refused if the table has a default route).
fn default_route_request(gateway: std::net::Ipv4Addr, seq: u32) -> Vec<u8> {
    // rtmsg: family, dst_len 0, src_len, tos, table main, protocol boot, scope
    // universe, type unicast; flags.
    let mut body = vec![
        libc::AF_INET as u8,
        0,
        0,
        0,
        libc::RT_TABLE_MAIN,
        libc::RTPROT_BOOT,
        0,
        RTN_UNICAST,
    ];
    body.extend_from_slice(&0u32.to_ne_bytes());
    body.extend_from_slice(&8u16.to_ne_bytes());
    body.extend_from_slice(&RTA_GATEWAY.to_ne_bytes());
    body.extend_from_slice(&gateway.octets());
    neigh::request(
        RTM_NEWROUTE,
        NLM_F_REQUEST | NLM_F_ACK | NLM_F_EXCL | NLM_F_CREATE,
        seq,
        &body,
    )
}

/// Adds an IPv4 default route via `gateway` (see [`default_route_request`]) and waits
/// (a second at most) for the kernel's answer: its refusal is the error.
pub fn add_default_route(gateway: std::net::Ipv4Addr) -> io::Result<()> {
    let s = RouteSocket::unsubscribed()?;
    s.send(&default_route_request(gateway, 1))?;
    let mut buf = vec![0u8; 8192];
    let deadline = Instant::now() + Duration::from_secs(1);
    while let Some(left) = deadline.checked_duration_since(Instant::now()) {
        let Some(n) = s.recv(&mut buf, left)? else {
            continue;
        };
        let replies = messages(&buf[..n])?;
        for (ty, _, body) in replies {
            if ty == NLMSG_ERROR {
                return match dump_status(ty, body) {
                    Ok(Some(Err(errno))) => Err(io::Error::from_raw_os_error(errno)),
                    Ok(_) => Ok(()),
                    Err(e) => Err(e.into()),
                };
            }
        }
    }
    Err(io::Error::new(
        io::ErrorKind::TimedOut,
        "the kernel did not answer",
    ))
}

/// Every route of `family` in every table, taken again while the kernel reports the
/// dump interrupted by a change.
pub fn dump_routes(family: Family) -> io::Result<Vec<Route>> {
    dump(
        "route dump",
        |s, seq| s.request_dump(family, seq),
        |buf| {
            Ok(parse(buf)?
                .into_iter()
                .map(|m| match m {
                    Message::NewRoute(r) => DumpStep::Item(r),
                    Message::Done => DumpStep::Done,
                    Message::Interrupted => DumpStep::Interrupted,
                    Message::Error(e) => DumpStep::Error(e),
                    _ => DumpStep::Other,
                })
                .collect())
        },
    )
}

/// What a message of a dump's answer is to [`dump`].
enum DumpStep<T> {
    Item(T),
    Done,
    Interrupted,
    Error(i32),
    Other,
}

/// Dumps taken again at once while the kernel reports them interrupted; past these,
/// a pause before each further attempt.
const DUMP_QUICK_ATTEMPTS: u32 = 10;
/// How long a dump is taken again while every attempt is interrupted, before it fails.
const DUMP_PATIENCE: Duration = Duration::from_secs(5);

/// A dump on a fresh socket: `request` asks with a sequence number, `steps` reads a
/// datagram. Taken again while the kernel reports it interrupted by a change: ten
/// times at once, then every 20 ms for up to [`DUMP_PATIENCE`], then it fails
/// (`ErrorKind::Interrupted`). An interrupted dump is never returned: it may lack
/// routes that did not change at all (the kernel's walk skips parts of a table that
/// changed under it), and no notification would bring them later. `what` names the
/// dump in errors.
fn dump<T>(
    what: &str,
    request: impl Fn(&RouteSocket, u32) -> io::Result<()>,
    steps: impl Fn(&[u8]) -> Result<Vec<DumpStep<T>>, ReplyError>,
) -> io::Result<Vec<T>> {
    dump_within(what, request, steps, DUMP_PATIENCE)
}

fn dump_within<T>(
    what: &str,
    request: impl Fn(&RouteSocket, u32) -> io::Result<()>,
    steps: impl Fn(&[u8]) -> Result<Vec<DumpStep<T>>, ReplyError>,
    patience: Duration,
) -> io::Result<Vec<T>> {
    let mut buf = vec![0u8; 1 << 20];
    let mut attempt = 0u32;
    let started = Instant::now();
    'again: loop {
        attempt += 1;
        let s = RouteSocket::unsubscribed()?;
        request(&s, attempt)?;
        let mut items = Vec::new();
        loop {
            let Some(n) = s.recv(&mut buf, Duration::from_secs(10))? else {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("{what}: no answer from the kernel"),
                ));
            };
            for m in steps(&buf[..n]).map_err(io::Error::from)? {
                match m {
                    DumpStep::Item(r) => items.push(r),
                    DumpStep::Done => return Ok(items),
                    DumpStep::Interrupted => {
                        if attempt >= DUMP_QUICK_ATTEMPTS {
                            if started.elapsed() >= patience {
                                return Err(io::Error::new(
                                    io::ErrorKind::Interrupted,
                                    format!("{what}: interrupted by changes {attempt} times in a row"),
                                ));
                            }
                            std::thread::sleep(Duration::from_millis(20));
                        }
                        continue 'again;
                    }
                    DumpStep::Error(e) => return Err(io::Error::from_raw_os_error(e)),
                    _ => {}
                }
            }
        }
    }
}

pub mod addr;
pub mod neigh;

#[cfg(test)]
mod tests;
