//! The interfaces' IPv4 and IPv6 addresses over route netlink (`RTM_GETADDR`), by
//! interface index: `getifaddrs` names an IPv4 address by its label, which may be any
//! name (`ip addr add ... dev r0 label r01:1`), so only the index says whose it is.

use super::neigh::request;
use super::{addr_at, dump, dump_status, messages, DumpStep, Family, RouteSocket};
use super::{NLM_F_DUMP, NLM_F_DUMP_INTR, NLM_F_REQUEST, RTM_NEWADDR};
use crate::xdp::netlink::{attributes, u32_at};
use crate::xdp::ReplyError;
use std::io;

const RTM_GETADDR: u16 = 22;
/// `ifa_address`: the address, or on a point-to-point link the peer's.
const IFA_ADDRESS: u16 = 1;
/// `ifa_local`: the local address, where it differs from `IFA_ADDRESS`.
const IFA_LOCAL: u16 = 2;
/// `struct ifaddrmsg`: family, prefix length, flags, scope, interface index.
const IFADDRMSG: usize = 8;

/// One address of an interface.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Address {
    pub ifindex: u32,
    pub family: Family,
    /// The address (an IPv4 one in the low 32 bits).
    pub addr: u128,
}

impl RouteSocket {
    /// Asks for every address of every interface (the answers come as `RTM_NEWADDR`,
    /// then the end of the dump).
    pub fn request_address_dump(&self, seq: u32) -> io::Result<()> {
        self.send(&request(
            RTM_GETADDR,
            NLM_F_REQUEST | NLM_F_DUMP,
            seq,
            &[libc::AF_UNSPEC as u8, 0, 0, 0, 0, 0, 0, 0],
        ))
    }
}

/// What a datagram of an address dump holds: its addresses, the end of the dump, and
/// whether a change interrupted it; malformed messages are refused.
pub fn parse(buf: &[u8]) -> Result<Vec<AddressMessage>, ReplyError> {
    let mut out = Vec::new();
    for (ty, flags, body) in messages(buf)? {
        if flags & NLM_F_DUMP_INTR != 0 {
            out.push(AddressMessage::Interrupted);
        }
        match dump_status(ty, body)? {
            Some(Ok(())) => out.push(AddressMessage::Done),
            Some(Err(e)) => out.push(AddressMessage::Error(e)),
            None => {}
        }
        if ty == RTM_NEWADDR {
            if let Some(a) = parse_address(body)? {
                out.push(AddressMessage::New(a));
            }
        }
    }
    Ok(out)
}

/// One message of an address dump.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AddressMessage {
    New(Address),
    Done,
    Interrupted,
    Error(i32),
}

/// An `ifaddrmsg` and its attributes; `None` for another family or no address.
fn parse_address(body: &[u8]) -> Result<Option<Address>, ReplyError> {
    let Some(hdr) = body.get(..IFADDRMSG) else {
        return Err(ReplyError::Malformed("truncated ifaddrmsg"));
    };
    let family = match hdr[0] {
        f if f == libc::AF_INET as u8 => Family::V4,
        f if f == libc::AF_INET6 as u8 => Family::V6,
        _ => return Ok(None),
    };
    let ifindex = u32_at(hdr, 4).ok_or(ReplyError::Malformed("truncated ifaddrmsg"))?;
    let (mut address, mut local) = (None, None);
    for a in attributes(&body[IFADDRMSG..]) {
        let (ty, p) = a?;
        match ty {
            IFA_ADDRESS => address = addr_at(family, p),
            IFA_LOCAL => local = addr_at(family, p),
            _ => {}
        }
    }
    Ok(local.or(address).map(|addr| Address {
        ifindex,
        family,
        addr,
    }))
}

/// Every address of every interface, taken again while the kernel reports the dump
/// interrupted by a change.
pub fn dump_addresses() -> io::Result<Vec<Address>> {
    dump(
        "address dump",
        |s, seq| s.request_address_dump(seq),
        |buf| {
            Ok(parse(buf)?
                .into_iter()
                .map(|m| match m {
                    AddressMessage::New(a) => DumpStep::Item(a),
                    AddressMessage::Done => DumpStep::Done,
                    AddressMessage::Interrupted => DumpStep::Interrupted,
                    AddressMessage::Error(e) => DumpStep::Error(e),
                })
                .collect())
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An `RTM_NEWADDR` message: `family`, `ifindex`, then (type, payload) attributes.
    fn newaddr(family: u8, ifindex: u32, attrs: &[(u16, &[u8])]) -> Vec<u8> {
        let mut body = vec![family, 24, 0, 0];
        body.extend_from_slice(&ifindex.to_ne_bytes());
        for (ty, p) in attrs {
            let len = 4 + p.len();
            body.extend_from_slice(&(len as u16).to_ne_bytes());
            body.extend_from_slice(&ty.to_ne_bytes());
            body.extend_from_slice(p);
            body.resize(body.len().next_multiple_of(4), 0);
        }
        request(RTM_NEWADDR, 0x2, 1, &body)
    }

    #[test]
    fn an_address_is_its_local_one_on_its_interface() {
        // IPv4 on a point-to-point link: IFA_ADDRESS is the peer, IFA_LOCAL ours.
        let m = newaddr(
            libc::AF_INET as u8,
            7,
            &[(IFA_ADDRESS, &[10, 0, 0, 2]), (IFA_LOCAL, &[10, 0, 0, 1])],
        );
        assert_eq!(
            parse(&m).unwrap(),
            vec![AddressMessage::New(Address {
                ifindex: 7,
                family: Family::V4,
                addr: 0x0a00_0001
            })]
        );
        // IPv6: IFA_ADDRESS alone.
        let v6: [u8; 16] = "2001:db8::a".parse::<std::net::Ipv6Addr>().unwrap().octets();
        let m = newaddr(libc::AF_INET6 as u8, 3, &[(IFA_ADDRESS, &v6)]);
        assert_eq!(
            parse(&m).unwrap(),
            vec![AddressMessage::New(Address {
                ifindex: 3,
                family: Family::V6,
                addr: u128::from_be_bytes(v6)
            })]
        );
    }

    #[test]
    fn truncated_messages_are_refused_and_other_families_left_out() {
        let mut m = request(RTM_NEWADDR, 0x2, 1, &[libc::AF_INET as u8, 24, 0]);
        assert!(parse(&m).is_err());
        m = newaddr(libc::AF_PACKET as u8, 2, &[(IFA_ADDRESS, &[1, 2, 3, 4, 5, 6])]);
        assert_eq!(parse(&m).unwrap(), vec![]);
    }

    #[test]
    fn the_dump_lists_loopback() {
        // Every network namespace has 127.0.0.1 on `lo`.
        // SAFETY: a NUL-terminated name that outlives the call.
        let lo = unsafe { libc::if_nametoindex(c"lo".as_ptr()) };
        assert!(lo > 0);
        let all = dump_addresses().unwrap();
        assert!(
            all.contains(&Address {
                ifindex: lo,
                family: Family::V4,
                addr: 0x7f00_0001
            }),
            "{all:?}"
        );
    }
}
