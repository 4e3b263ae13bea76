//! Segmentation of super-frames back into the packets their sender meant.
//!
//! Linux hands a packet socket TCP frames far larger than the link's MTU: a NIC's
//! receive path merges a flow's consecutive segments into one (GRO, on by default), and
//! a local sender on a veth or TAP device leaves segmentation to a device that never
//! does it (TSO; for UDP, a sender's `UDP_SEGMENT` datagrams, USO). The kernel would
//! split such a frame again on its way out (GSO); a router in user space gets the whole
//! of it, up to 64 KiB. With `PACKET_VNET_HDR` the socket says which frames these are
//! and their segment size (the virtio-net header's `gso_type` and `gso_size`);
//! [`segment`] cuts such a frame into the packets the sender meant, as Linux's GSO
//! does: the same headers in each (TCP options included), the IPv4 identification
//! counting up from the frame's, and every length and checksum computed afresh; TCP
//! sequence numbers advance by each segment's payload, with FIN and PSH on the last
//! segment only and CWR on the first only; each UDP piece is a datagram of its own.

use crate::checksum::{fold, pseudo_header_v4, pseudo_header_v6, sum};
use crate::Packet;

/// The transport a super-frame's segments are of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GsoKind {
    Tcp,
    Udp,
}

impl GsoKind {
    fn protocol(self) -> u8 {
        match self {
            GsoKind::Tcp => 6,
            GsoKind::Udp => 17,
        }
    }
}

/// Why a frame could not be segmented.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GsoError {
    /// The segment size is 0.
    ZeroSegmentSize,
    /// Not Ethernet (at most two VLAN tags) over IPv4 or IPv6.
    NotIp,
    /// The IP header is short, its lengths disagree with the frame, or (IPv4) it is a
    /// fragment.
    BadIpHeader,
    /// The IP packet does not carry the kind's transport directly (an IPv6 extension
    /// header comes first, or another protocol).
    WrongProtocol,
    /// The TCP or UDP header is short or runs past the packet.
    BadTransportHeader,
}

impl std::fmt::Display for GsoError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            GsoError::ZeroSegmentSize => "segment size 0",
            GsoError::NotIp => "not an IPv4 or IPv6 frame",
            GsoError::BadIpHeader => "bad IP header",
            GsoError::WrongProtocol => "another transport protocol, or IPv6 extension headers",
            GsoError::BadTransportHeader => "bad TCP or UDP header",
        })
    }
}

impl std::error::Error for GsoError {}

const TCP_FIN: u8 = 0x01;
const TCP_PSH: u8 = 0x08;
const TCP_CWR: u8 = 0x80;

/// Where a frame's headers lie.
struct Layout {
    /// Offset of the IP header.
    l3: usize,
    /// Offset of the TCP or UDP header.
    l4: usize,
    /// Offset of the payload (past the TCP or UDP header, TCP options included).
    data: usize,
    /// End of the IP packet (the frame's Ethernet padding, if any, lies past it).
    end: usize,
    v4: bool,
}

fn be16(b: &[u8], at: usize) -> usize {
    usize::from(crate::views::be16(b, at))
}

/// Finds the headers of an Ethernet frame carrying `kind` over IPv4 or IPv6.
fn layout(frame: &[u8], kind: GsoKind) -> Result<Layout, GsoError> {
    let mut l3 = 14;
    let mut ethertype = frame
        .get(12..14)
        .map(|_| be16(frame, 12))
        .ok_or(GsoError::NotIp)?;
    // Up to two VLAN tags (802.1ad outer, 802.1Q inner).
    for _ in 0..2 {
        if ethertype != 0x8100 && ethertype != 0x88a8 {
            break;
        }
        ethertype = frame
            .get(l3 + 2..l3 + 4)
            .map(|_| be16(frame, l3 + 2))
            .ok_or(GsoError::NotIp)?;
        l3 += 4;
    }
    let ip = &frame[l3.min(frame.len())..];
    let (l4, end, v4) = match ethertype {
        0x0800 => {
            if ip.len() < 20 || ip[0] >> 4 != 4 {
                return Err(GsoError::BadIpHeader);
            }
            let hlen = usize::from(ip[0] & 0x0f) * 4;
            let total = be16(ip, 2);
            let fragment = be16(ip, 6) & 0x3fff != 0;
            if hlen < 20 || total < hlen || total > ip.len() || fragment {
                return Err(GsoError::BadIpHeader);
            }
            if ip[9] != kind.protocol() {
                return Err(GsoError::WrongProtocol);
            }
            (l3 + hlen, l3 + total, true)
        }
        0x86dd => {
            if ip.len() < 40 || ip[0] >> 4 != 6 {
                return Err(GsoError::BadIpHeader);
            }
            // (A payload length of 0 is a jumbogram's, whose length is in an extension
            // header: refused below as a packet that does not carry TCP or UDP directly.)
            let payload = be16(ip, 4);
            if 40 + payload > ip.len() {
                return Err(GsoError::BadIpHeader);
            }
            if ip[6] != kind.protocol() {
                return Err(GsoError::WrongProtocol);
            }
            (l3 + 40, l3 + 40 + payload, false)
        }
        _ => return Err(GsoError::NotIp),
    };
    let hlen = match kind {
        GsoKind::Udp => 8,
        GsoKind::Tcp => {
            if end < l4 + 20 {
                return Err(GsoError::BadTransportHeader);
            }
            let doff = usize::from(frame[l4 + 12] >> 4) * 4;
            if doff < 20 {
                return Err(GsoError::BadTransportHeader);
            }
            doff
        }
    };
    if l4 + hlen > end {
        return Err(GsoError::BadTransportHeader);
    }
    Ok(Layout {
        l3,
        l4,
        data: l4 + hlen,
        end,
        v4,
    })
}

/// Where `frame`'s own TCP or UDP header (`kind`) starts, as [`segment`] finds it: a
/// caller that knows where the offload's transport header is (the kernel's checksum
/// start) tells a tunnel's super-frame, whose offload is about the packet inside, from
/// one it can cut.
pub fn transport_header(frame: &[u8], kind: GsoKind) -> Result<usize, GsoError> {
    layout(frame, kind).map(|at| at.l4)
}

/// Splits `frame`, an Ethernet frame (with up to two VLAN tags) carrying `kind` over
/// IPv4 or IPv6 (no IPv6 extension headers), into packets of at most `mss` payload
/// bytes, handing each to `emit` as a new packet, in order; returns how many. A frame
/// whose payload fits one packet comes out as one, with its lengths and checksums made
/// whole. The frame is checked before anything is emitted: on an error nothing is.
/// Bytes past the IP packet's length (Ethernet padding) are not carried over.
pub fn segment(
    frame: &[u8],
    kind: GsoKind,
    mss: usize,
    mut emit: impl FnMut(Packet),
) -> Result<usize, GsoError> {
    if mss == 0 {
        return Err(GsoError::ZeroSegmentSize);
    }
    let at = layout(frame, kind)?;
    let headers = &frame[..at.data];
    let payload = &frame[at.data..at.end];
    let count = payload.len().div_ceil(mss).max(1);
    // (TCP's; a UDP header's bytes there are not read.)
    let (seq, flags) = match kind {
        GsoKind::Tcp => (
            u32::from_be_bytes(frame[at.l4 + 4..at.l4 + 8].try_into().expect("4 bytes")),
            frame[at.l4 + 13],
        ),
        GsoKind::Udp => (0, 0),
    };
    let id = u16::from_be_bytes([frame[at.l3 + 4], frame[at.l3 + 5]]);
    let l4_hlen = at.data - at.l4;
    for k in 0..count {
        let off = k * mss;
        let part = &payload[off.min(payload.len())..(off + mss).min(payload.len())];
        let mut p = Packet::alloc(headers.len() + part.len());
        let d = p.data_mut();
        d[..headers.len()].copy_from_slice(headers);
        d[headers.len()..].copy_from_slice(part);
        let (ip, l4) = d[at.l3..].split_at_mut(at.l4 - at.l3);
        let l4_len = l4_hlen + part.len();
        let proto = kind.protocol();
        let pseudo = if at.v4 {
            let total = (ip.len() + l4_len) as u16;
            ip[2..4].copy_from_slice(&total.to_be_bytes());
            // (Counting up, as for a sender's TSO. A NIC's GRO also merges segments of
            // one fixed ID with DF set, which Linux's GSO would keep; the virtio-net
            // header cannot tell, and with DF the ID means nothing.)
            ip[4..6].copy_from_slice(&id.wrapping_add(k as u16).to_be_bytes());
            ip[10..12].fill(0);
            let c = !fold(sum(ip, 0));
            ip[10..12].copy_from_slice(&c.to_be_bytes());
            let src = [ip[12], ip[13], ip[14], ip[15]];
            let dst = [ip[16], ip[17], ip[18], ip[19]];
            pseudo_header_v4(src, dst, proto, l4_len as u16)
        } else {
            ip[4..6].copy_from_slice(&(l4_len as u16).to_be_bytes());
            let src: [u8; 16] = ip[8..24].try_into().expect("16 bytes");
            let dst: [u8; 16] = ip[24..40].try_into().expect("16 bytes");
            pseudo_header_v6(&src, &dst, proto, l4_len as u32)
        };
        let at_sum = match kind {
            GsoKind::Tcp => {
                l4[4..8].copy_from_slice(&seq.wrapping_add(off as u32).to_be_bytes());
                let mut f = flags;
                if k + 1 < count {
                    f &= !(TCP_FIN | TCP_PSH);
                }
                if k > 0 {
                    // (Classic ECN's congestion-window-reduced signal goes once, as
                    // Linux's GSO sends it; AccECN frames, which keep it, are not told
                    // apart by the virtio-net header.)
                    f &= !TCP_CWR;
                }
                l4[13] = f;
                16
            }
            GsoKind::Udp => {
                l4[4..6].copy_from_slice(&(l4_len as u16).to_be_bytes());
                6
            }
        };
        l4[at_sum..at_sum + 2].fill(0);
        let mut c = !fold(sum(l4, pseudo));
        if kind == GsoKind::Udp && c == 0 {
            // UDP sends a computed zero as all ones (zero means "no checksum").
            c = 0xffff;
        }
        l4[at_sum..at_sum + 2].copy_from_slice(&c.to_be_bytes());
        p.set_mac_header(0);
        emit(p);
    }
    Ok(count)
}

#[cfg(test)]
mod tests;
