//! Route netlink, for what bpf(2) does not tell: an interface's number of receive queues
//! and the XDP program attached to it (RTM_GETLINK, IFLA_XDP), and detaching a program
//! that was attached through netlink rather than a bpf_link (RTM_SETLINK).

use std::io;
use std::os::fd::AsRawFd;

const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const RTM_NEWLINK: u16 = 16;
const RTM_GETLINK: u16 = 18;
const RTM_SETLINK: u16 = 19;
const NLM_F_REQUEST: u16 = 0x1;
const NLM_F_ACK: u16 = 0x4;
const NLA_F_NESTED: u16 = 0x8000;
const NLA_TYPE_MASK: u16 = 0x3fff;

const IFLA_MTU: u16 = 4;
const IFLA_NUM_RX_QUEUES: u16 = 32;
const IFLA_XDP: u16 = 43;
const IFLA_XDP_FD: u16 = 1;
const IFLA_XDP_ATTACHED: u16 = 2;
const IFLA_XDP_FLAGS: u16 = 3;
const IFLA_XDP_PROG_ID: u16 = 4;

const NLMSG_HDR: usize = 16;
const IFINFOMSG: usize = 16;

/// How an XDP program is attached (`XDP_ATTACHED_*` of linux/if_link.h).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Attached {
    #[default]
    None,
    Driver,
    Generic,
    Hardware,
    /// Programs in more than one mode.
    Multi,
}

/// What RTM_GETLINK says about an interface.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct LinkState {
    /// Receive queues the interface has (`IFLA_NUM_RX_QUEUES`), if reported.
    pub rx_queues: Option<u32>,
    /// The interface's MTU (`IFLA_MTU`), if reported.
    pub mtu: Option<u32>,
    /// Mode of the attached XDP program(s).
    pub xdp_attached: Attached,
    /// Id of the attached program (0: none, or several in different modes).
    pub xdp_prog_id: u32,
}

/// Why a netlink reply could not be used.
#[derive(Debug, PartialEq, Eq)]
pub enum ReplyError {
    /// The kernel answered with an error (errno).
    Os(i32),
    /// The reply does not parse; says where.
    Malformed(&'static str),
}

impl From<ReplyError> for io::Error {
    fn from(e: ReplyError) -> io::Error {
        match e {
            ReplyError::Os(errno) => io::Error::from_raw_os_error(errno),
            ReplyError::Malformed(what) => {
                io::Error::new(io::ErrorKind::InvalidData, format!("netlink reply: {}", what))
            }
        }
    }
}

pub(crate) fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

pub(crate) fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

pub(crate) fn align4(n: usize) -> usize {
    (n + 3) & !3
}

/// Netlink attributes of `b`: (type without flags, payload). Stops at the first
/// attribute whose length does not fit.
pub(crate) fn attributes(mut b: &[u8]) -> impl Iterator<Item = Result<(u16, &[u8]), ReplyError>> {
    std::iter::from_fn(move || {
        if b.is_empty() {
            return None;
        }
        let (Some(len), Some(ty)) = (u16_at(b, 0), u16_at(b, 2)) else {
            b = &[];
            return Some(Err(ReplyError::Malformed("truncated attribute header")));
        };
        let len = len as usize;
        if len < 4 || len > b.len() {
            b = &[];
            return Some(Err(ReplyError::Malformed("attribute length out of bounds")));
        }
        let payload = &b[4..len];
        b = &b[align4(len).min(b.len())..];
        Some(Ok((ty & NLA_TYPE_MASK, payload)))
    })
}

/// Parses the kernel's reply to RTM_GETLINK (one or more netlink messages).
pub fn parse_link_reply(buf: &[u8]) -> Result<LinkState, ReplyError> {
    let mut rest = buf;
    while !rest.is_empty() {
        let len = u32_at(rest, 0).ok_or(ReplyError::Malformed("truncated message header"))? as usize;
        let ty = u16_at(rest, 4).ok_or(ReplyError::Malformed("truncated message header"))?;
        if len < NLMSG_HDR || len > rest.len() {
            return Err(ReplyError::Malformed("message length out of bounds"));
        }
        let body = &rest[NLMSG_HDR..len];
        match ty {
            NLMSG_ERROR => {
                let errno = u32_at(body, 0).ok_or(ReplyError::Malformed("truncated error"))? as i32;
                return Err(ReplyError::Os(-errno));
            }
            NLMSG_DONE => break,
            RTM_NEWLINK => {
                let attrs = body
                    .get(IFINFOMSG..)
                    .ok_or(ReplyError::Malformed("truncated ifinfomsg"))?;
                let mut state = LinkState::default();
                for a in attributes(attrs) {
                    let (ty, payload) = a?;
                    match ty {
                        IFLA_NUM_RX_QUEUES => state.rx_queues = u32_at(payload, 0),
                        IFLA_MTU => state.mtu = u32_at(payload, 0),
                        IFLA_XDP => {
                            for x in attributes(payload) {
                                let (xty, xp) = x?;
                                match xty {
                                    IFLA_XDP_ATTACHED => {
                                        state.xdp_attached = match xp.first() {
                                            Some(1) => Attached::Driver,
                                            Some(2) => Attached::Generic,
                                            Some(3) => Attached::Hardware,
                                            Some(4) => Attached::Multi,
                                            _ => Attached::None,
                                        }
                                    }
                                    IFLA_XDP_PROG_ID => state.xdp_prog_id = u32_at(xp, 0).unwrap_or(0),
                                    _ => {}
                                }
                            }
                        }
                        _ => {}
                    }
                }
                return Ok(state);
            }
            _ => {}
        }
        rest = &rest[align4(len).min(rest.len())..];
    }
    Err(ReplyError::Malformed("no link message in the reply"))
}

/// Parses an acknowledgement (NLMSG_ERROR with error 0 on success).
fn parse_ack(buf: &[u8]) -> Result<(), ReplyError> {
    let ty = u16_at(buf, 4).ok_or(ReplyError::Malformed("truncated message header"))?;
    if ty != NLMSG_ERROR {
        return Err(ReplyError::Malformed("expected an acknowledgement"));
    }
    match u32_at(buf, NLMSG_HDR).ok_or(ReplyError::Malformed("truncated error"))? as i32 {
        0 => Ok(()),
        e => Err(ReplyError::Os(-e)),
    }
}

/// A request: netlink header, ifinfomsg for `ifindex`, then `attrs` (already encoded).
fn request(ty: u16, flags: u16, ifindex: u32, attrs: &[u8]) -> Vec<u8> {
    let len = NLMSG_HDR + IFINFOMSG + attrs.len();
    let mut m = Vec::with_capacity(len);
    m.extend_from_slice(&(len as u32).to_ne_bytes());
    m.extend_from_slice(&ty.to_ne_bytes());
    m.extend_from_slice(&(NLM_F_REQUEST | flags).to_ne_bytes());
    m.extend_from_slice(&1u32.to_ne_bytes()); // sequence
    m.extend_from_slice(&0u32.to_ne_bytes()); // port id: the kernel's
    m.extend_from_slice(&[libc::AF_UNSPEC as u8, 0, 0, 0]); // family, pad, type
    m.extend_from_slice(&(ifindex as i32).to_ne_bytes());
    m.extend_from_slice(&[0u8; 8]); // flags, change
    m.extend_from_slice(attrs);
    m
}

fn attr(ty: u16, payload: &[u8]) -> Vec<u8> {
    let mut a = Vec::with_capacity(align4(4 + payload.len()));
    a.extend_from_slice(&((4 + payload.len()) as u16).to_ne_bytes());
    a.extend_from_slice(&ty.to_ne_bytes());
    a.extend_from_slice(payload);
    a.resize(align4(a.len()), 0);
    a
}

/// Sends `msg` on a fresh route netlink socket and returns the first reply datagram.
fn transact(msg: &[u8]) -> io::Result<Vec<u8>> {
    let sock = crate::rtnl::route_netlink_socket()?;
    // SAFETY: `msg` is a readable buffer of msg.len() bytes; a null address sends to
    // the kernel, the socket's default peer for netlink.
    let sent = unsafe {
        libc::send(
            sock.as_raw_fd(),
            msg.as_ptr() as *const libc::c_void,
            msg.len(),
            0,
        )
    };
    if sent < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut buf = vec![0u8; 1 << 16];
    // SAFETY: `buf` is writable for buf.len() bytes.
    let n = unsafe {
        libc::recv(
            sock.as_raw_fd(),
            buf.as_mut_ptr() as *mut libc::c_void,
            buf.len(),
            0,
        )
    };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    buf.truncate(n as usize);
    Ok(buf)
}

/// Queries interface `ifindex`.
pub fn link_state(ifindex: u32) -> io::Result<LinkState> {
    let reply = transact(&request(RTM_GETLINK, 0, ifindex, &[]))?;
    Ok(parse_link_reply(&reply)?)
}

/// Detaches the XDP program attached in mode `mode_flags` through netlink.
pub fn detach_xdp(ifindex: u32, mode_flags: u32) -> io::Result<()> {
    let mut nested = attr(IFLA_XDP_FD, &(-1i32).to_ne_bytes());
    nested.extend(attr(IFLA_XDP_FLAGS, &mode_flags.to_ne_bytes()));
    let reply = transact(&request(
        RTM_SETLINK,
        NLM_F_ACK,
        ifindex,
        &attr(IFLA_XDP | NLA_F_NESTED, &nested),
    ))?;
    Ok(parse_ack(&reply)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An RTM_NEWLINK reply written out by hand: ifinfomsg, IFLA_NUM_RX_QUEUES = 2,
    /// IFLA_MTU = 1400, an unrelated attribute, IFLA_XDP { ATTACHED = 2 (generic),
    /// PROG_ID = 77 }.
    fn reply() -> Vec<u8> {
        let mut body = vec![0u8; 16]; // ifinfomsg
        body.extend_from_slice(&[8, 0, 32, 0, 2, 0, 0, 0]); // NUM_RX_QUEUES
        body.extend_from_slice(&[8, 0, 4, 0, 0x78, 0x05, 0, 0]); // MTU = 1400
        body.extend_from_slice(&[7, 0, 3, 0, b'd', b'0', 0, 0]); // IFNAME "d0\0", padded
        body.extend_from_slice(&[20, 0, 43, 0x80]); // IFLA_XDP, nested, 16 bytes inside
        body.extend_from_slice(&[5, 0, 2, 0, 2, 0, 0, 0]); // ATTACHED = 2
        body.extend_from_slice(&[8, 0, 4, 0, 77, 0, 0, 0]); // PROG_ID = 77
        let mut m = Vec::new();
        m.extend_from_slice(&((16 + body.len()) as u32).to_le_bytes());
        m.extend_from_slice(&[16, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0]);
        m.extend_from_slice(&body);
        m
    }

    #[test]
    #[cfg(target_endian = "little")]
    fn parses_queues_and_attached_program() {
        assert_eq!(
            parse_link_reply(&reply()),
            Ok(LinkState {
                rx_queues: Some(2),
                mtu: Some(1400),
                xdp_attached: Attached::Generic,
                xdp_prog_id: 77
            })
        );
    }

    #[test]
    #[cfg(target_endian = "little")]
    fn kernel_errors_and_bad_lengths_are_reported() {
        // NLMSG_ERROR carrying -19 (ENODEV).
        let mut e = vec![36, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0];
        e.extend_from_slice(&(-19i32).to_le_bytes());
        e.extend_from_slice(&[0u8; 16]);
        assert_eq!(parse_link_reply(&e), Err(ReplyError::Os(19)));
        let mut r = reply();
        r[16 + 16] = 200; // first attribute claims 200 bytes
        assert_eq!(
            parse_link_reply(&r),
            Err(ReplyError::Malformed("attribute length out of bounds"))
        );
        assert!(parse_link_reply(&r[..10]).is_err());
        assert_eq!(
            parse_link_reply(&[]),
            Err(ReplyError::Malformed("no link message in the reply"))
        );
    }

    proptest::proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(data in proptest::collection::vec(proptest::num::u8::ANY, 0..256)) {
            let _ = parse_link_reply(&data);
        }

        #[test]
        fn truncated_replies_are_errors(cut in 0usize..68) {
            // Cut before the last attribute ends: the message length no longer fits.
            let r = reply();
            proptest::prop_assert!(parse_link_reply(&r[..cut]).is_err());
        }
    }
}
