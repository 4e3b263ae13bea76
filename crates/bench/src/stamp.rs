//! The stamp the generator writes at the start of every frame's UDP payload, and the
//! sink's parser that finds it again.
//!
//! Layout (16 bytes, network byte order), chosen to fit the 18-byte payload of the
//! smallest frame (60 bytes on the wire + 4-byte FCS = 64 B):
//!
//! | offset | size | field |
//! | --- | --- | --- |
//! | 0 | 2 | magic `0xB7AC` |
//! | 2 | 2 | flow id (0 .. 65535) |
//! | 4 | 4 | per-flow sequence number, from 0, wrapping at 2^32 |
//! | 8 | 8 | send time, CLOCK_MONOTONIC nanoseconds |

/// The magic that marks a stamped payload.
pub const MAGIC: u16 = 0xB7AC;
/// Bytes of the stamp.
pub const STAMP_LEN: usize = 16;
/// Ethernet + IPv4 (no options) + UDP header bytes before the stamp.
pub const HEADERS_LEN: usize = 14 + 20 + 8;
/// Offset of the stamp in a generated frame.
pub const STAMP_OFFSET: usize = HEADERS_LEN;

/// What a stamp says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stamp {
    pub flow: u16,
    pub seq: u32,
    pub sent_ns: u64,
}

impl Stamp {
    /// Writes the stamp into the first [`STAMP_LEN`] bytes of `out`.
    pub fn write(&self, out: &mut [u8; STAMP_LEN]) {
        out[0..2].copy_from_slice(&MAGIC.to_be_bytes());
        out[2..4].copy_from_slice(&self.flow.to_be_bytes());
        out[4..8].copy_from_slice(&self.seq.to_be_bytes());
        out[8..16].copy_from_slice(&self.sent_ns.to_be_bytes());
    }

    /// The stamp's contribution to a ones'-complement checksum (sum of its 16-bit words,
    /// unfolded).
    pub fn checksum_sum(&self) -> u32 {
        let t = self.sent_ns;
        MAGIC as u32
            + self.flow as u32
            + (self.seq >> 16)
            + (self.seq & 0xffff)
            + ((t >> 48) as u32 & 0xffff)
            + ((t >> 32) as u32 & 0xffff)
            + ((t >> 16) as u32 & 0xffff)
            + (t as u32 & 0xffff)
    }
}

/// Finds the stamp of a generated frame: Ethernet II (no VLAN tag), IPv4 carrying UDP,
/// not a fragment, to UDP port `dst_port`, with a payload that starts with the magic.
/// Anything else (ARP, IPv6, other traffic) gives `None`. Never panics.
pub fn parse_frame(frame: &[u8], dst_port: u16) -> Option<Stamp> {
    if frame.len() < 14 + 20 || frame[12..14] != [0x08, 0x00] {
        return None;
    }
    let ip = &frame[14..];
    let ihl = (ip[0] & 0x0f) as usize * 4;
    if ip[0] >> 4 != 4 || ihl < 20 || ip[9] != 17 {
        return None;
    }
    // More-fragments set or a non-zero offset: not a whole datagram.
    if u16::from_be_bytes([ip[6], ip[7]]) & 0x3fff != 0 {
        return None;
    }
    let udp = ip.get(ihl..)?;
    if udp.len() < 8 + STAMP_LEN || u16::from_be_bytes([udp[2], udp[3]]) != dst_port {
        return None;
    }
    let s = &udp[8..8 + STAMP_LEN];
    if u16::from_be_bytes([s[0], s[1]]) != MAGIC {
        return None;
    }
    Some(Stamp {
        flow: u16::from_be_bytes([s[2], s[3]]),
        seq: u32::from_be_bytes([s[4], s[5], s[6], s[7]]),
        sent_ns: u64::from_be_bytes([s[8], s[9], s[10], s[11], s[12], s[13], s[14], s[15]]),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamp_bytes_are_big_endian_in_documented_order() {
        let mut b = [0u8; STAMP_LEN];
        Stamp {
            flow: 0x0102,
            seq: 0x0304_0506,
            sent_ns: 0x0708_090a_0b0c_0d0e,
        }
        .write(&mut b);
        assert_eq!(b, [0xB7, 0xAC, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14]);
    }

    #[test]
    fn stamp_checksum_sum_is_sum_of_words() {
        let s = Stamp {
            flow: 1,
            seq: 0x0002_0003,
            sent_ns: 0x0004_0005_0006_0007,
        };
        assert_eq!(s.checksum_sum(), 0xB7AC + 1 + 2 + 3 + 4 + 5 + 6 + 7);
    }

    fn udp_frame(port: u16, payload: &[u8]) -> Vec<u8> {
        let mut f = vec![0u8; 14];
        f[12] = 0x08;
        let mut ip = vec![0x45, 0, 0, 0, 0, 0, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2];
        let total = (20 + 8 + payload.len()) as u16;
        ip[2..4].copy_from_slice(&total.to_be_bytes());
        f.extend_from_slice(&ip);
        f.extend_from_slice(&[0x04, 0x00]);
        f.extend_from_slice(&port.to_be_bytes());
        f.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
        f.extend_from_slice(&[0, 0]);
        f.extend_from_slice(payload);
        f
    }

    #[test]
    fn parses_stamp_from_udp_frame_to_port() {
        let mut p = [0xB7, 0xAC, 0, 5, 0, 0, 0, 9, 0, 0, 0, 0, 0, 0, 1, 0].to_vec();
        p.extend_from_slice(&[0, 0]);
        let f = udp_frame(9, &p);
        assert_eq!(
            parse_frame(&f, 9),
            Some(Stamp {
                flow: 5,
                seq: 9,
                sent_ns: 256
            })
        );
        assert_eq!(parse_frame(&f, 10), None, "other port");
    }

    #[test]
    fn rejects_other_frames() {
        let stamp = [0xB7, 0xAC, 0, 5, 0, 0, 0, 9, 0, 0, 0, 0, 0, 0, 1, 0];
        let mut bad_magic = stamp;
        bad_magic[1] = 0xAD;
        assert_eq!(parse_frame(&udp_frame(9, &bad_magic), 9), None);
        assert_eq!(parse_frame(&udp_frame(9, &stamp[..15]), 9), None, "short payload");
        let mut arp = udp_frame(9, &stamp);
        arp[13] = 0x06;
        assert_eq!(parse_frame(&arp, 9), None);
        let mut frag = udp_frame(9, &stamp);
        frag[14 + 6] = 0x20; // more fragments
        assert_eq!(parse_frame(&frag, 9), None);
        let mut tcp = udp_frame(9, &stamp);
        tcp[14 + 9] = 6;
        assert_eq!(parse_frame(&tcp, 9), None);
        let mut long_ihl = udp_frame(9, &stamp);
        long_ihl[14] = 0x4f; // 60-byte header: runs past the frame's end
        assert_eq!(parse_frame(&long_ihl, 9), None);
        assert_eq!(parse_frame(&[], 9), None);
    }
}
