//! A packet's flow, as a 32-bit hash: what keeps a flow's packets on one flowlet path.

use graph::elements::multipath::fmix64 as mix;

/// The hash of the flow `packet` belongs to: its IP source and destination, protocol
/// and (for an unfragmented TCP, UDP, SCTP or DCCP packet) ports. The IP header is at
/// `network` (the packet's network header annotation) when given, else after an
/// Ethernet header of type 0x0800 or 0x86DD when an IP header of that version and a
/// length that fits is there, else at the start of the packet when one is there. A
/// packet in which no IP header is found hashes to 0: all such packets are one flow.
pub fn flow_hash(packet: &[u8], network: Option<usize>) -> u32 {
    // A frame's first byte is its destination address's, which may look like an IP
    // version, and an IP packet's bytes 12-14 may spell an Ethernet type: the header's
    // own lengths tell them apart.
    let at = network.or_else(|| {
        let ethernet = match packet.get(12..14) {
            Some([0x08, 0x00]) => Some(4),
            Some([0x86, 0xdd]) => Some(6),
            _ => None,
        };
        match ethernet {
            Some(v) if packet.get(14..).is_some_and(|ip| plausible_ip(ip, v)) => Some(14),
            _ => [4, 6].into_iter().any(|v| plausible_ip(packet, v)).then_some(0),
        }
    });
    let Some(ip) = at.and_then(|at| packet.get(at..)) else {
        return 0;
    };
    match ip.first().map(|b| b >> 4) {
        Some(4) => {
            let Some(h) = ip.first_chunk::<20>() else {
                return 0;
            };
            let ihl = usize::from(h[0] & 0x0f) * 4;
            let proto = h[9];
            // Fragments after the first carry no ports; hashing ports only when the
            // packet is unfragmented keeps a fragmented flow's pieces together.
            let fragmented = u16::from_be_bytes([h[6], h[7]]) & 0x3fff != 0;
            let ports = if fragmented {
                0
            } else {
                ports(ip.get(ihl..), proto)
            };
            let addrs = u64::from_be_bytes([h[12], h[13], h[14], h[15], h[16], h[17], h[18], h[19]]);
            mix(addrs ^ (u64::from(ports) << 8 | u64::from(proto)).rotate_left(29))
        }
        Some(6) if ip.len() >= 40 => {
            // The upper-layer header when it follows the fixed header directly.
            let proto = ip[6];
            let ports = ports(ip.get(40..), proto);
            let word = |i: usize| u64::from_be_bytes(ip[i..i + 8].try_into().expect("8 bytes"));
            let addrs = mix(word(8) ^ word(16).rotate_left(17)) as u64;
            mix(addrs << 32
                ^ word(24)
                ^ word(32).rotate_left(43)
                ^ (u64::from(ports) << 8 | u64::from(proto)))
        }
        _ => 0,
    }
}

/// Whether `ip` starts with an IP header of version `version` whose lengths fit in it.
fn plausible_ip(ip: &[u8], version: u8) -> bool {
    match (version, ip.first().map(|b| b >> 4)) {
        (4, Some(4)) if ip.len() >= 20 => {
            let header = usize::from(ip[0] & 0x0f) * 4;
            let total = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
            header >= 20 && header <= total && total <= ip.len()
        }
        (6, Some(6)) if ip.len() >= 40 => 40 + usize::from(u16::from_be_bytes([ip[4], ip[5]])) <= ip.len(),
        _ => false,
    }
}

/// Source and destination ports of the transport header `l4` of protocol `proto`.
fn ports(l4: Option<&[u8]>, proto: u8) -> u32 {
    const TCP: u8 = 6;
    const UDP: u8 = 17;
    const DCCP: u8 = 33;
    const SCTP: u8 = 132;
    match (l4.and_then(|l4| l4.first_chunk::<4>()), proto) {
        (Some(p), TCP | UDP | DCCP | SCTP) => u32::from_be_bytes(*p),
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An IPv4 header (20 bytes) from SRC to DST of protocol `proto`, then `l4`.
    fn ipv4(src: [u8; 4], dst: [u8; 4], proto: u8, frag: u16, l4: &[u8]) -> Vec<u8> {
        let mut p = vec![
            0x45,
            0,
            0,
            0,
            0,
            0,
            (frag >> 8) as u8,
            frag as u8,
            64,
            proto,
            0,
            0,
        ];
        p.extend_from_slice(&src);
        p.extend_from_slice(&dst);
        p.extend_from_slice(l4);
        let total = p.len() as u16;
        p[2..4].copy_from_slice(&total.to_be_bytes());
        p
    }

    fn udp(sport: u16, dport: u16) -> Vec<u8> {
        let mut l4 = sport.to_be_bytes().to_vec();
        l4.extend_from_slice(&dport.to_be_bytes());
        l4.extend_from_slice(&[0, 8, 0, 0]);
        l4
    }

    #[test]
    fn a_flow_is_its_addresses_protocol_and_ports() {
        let a = ipv4([10, 0, 0, 1], [10, 0, 1, 1], 17, 0, &udp(1000, 53));
        let mut same = a.clone();
        same[20 + 6] = 0x55; // another UDP checksum: the same flow
        assert_eq!(flow_hash(&a, None), flow_hash(&same, None));
        for other in [
            ipv4([10, 0, 0, 2], [10, 0, 1, 1], 17, 0, &udp(1000, 53)),
            ipv4([10, 0, 0, 1], [10, 0, 1, 2], 17, 0, &udp(1000, 53)),
            ipv4([10, 0, 0, 1], [10, 0, 1, 1], 6, 0, &udp(1000, 53)),
            ipv4([10, 0, 0, 1], [10, 0, 1, 1], 17, 0, &udp(1001, 53)),
            ipv4([10, 0, 0, 1], [10, 0, 1, 1], 17, 0, &udp(1000, 54)),
        ] {
            assert_ne!(flow_hash(&a, None), flow_hash(&other, None));
        }
    }

    #[test]
    fn fragments_of_a_flow_hash_alike() {
        // The first fragment (MF set) carries the ports, a later one does not.
        let first = ipv4([10, 0, 0, 1], [10, 0, 1, 1], 17, 0x2000, &udp(1000, 53));
        let later = ipv4([10, 0, 0, 1], [10, 0, 1, 1], 17, 0x0003, &[1, 2, 3, 4]);
        assert_eq!(flow_hash(&first, None), flow_hash(&later, None));
    }

    #[test]
    fn the_header_is_found_by_annotation_at_the_start_or_after_ethernet() {
        let ip = ipv4([10, 0, 0, 1], [10, 0, 1, 1], 17, 0, &udp(1000, 53));
        let mut frame = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2, 0x08, 0x00];
        frame.extend_from_slice(&ip);
        let h = flow_hash(&ip, None);
        assert_ne!(h, 0);
        assert_eq!(flow_hash(&frame, None), h);
        assert_eq!(flow_hash(&frame, Some(14)), h);
    }

    #[test]
    fn ipv6_flows() {
        let v6 = |src_last: u8, sport: u16| {
            let mut p = vec![0x60, 0, 0, 0, 0, 8, 17, 64];
            p.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, src_last]);
            p.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
            p.extend_from_slice(&udp(sport, 53));
            p
        };
        assert_eq!(flow_hash(&v6(1, 1000), None), flow_hash(&v6(1, 1000), None));
        assert_ne!(flow_hash(&v6(1, 1000), None), flow_hash(&v6(2, 1000), None));
        assert_ne!(flow_hash(&v6(1, 1000), None), flow_hash(&v6(1, 1001), None));
    }

    #[test]
    fn a_frame_whose_address_looks_like_an_ip_version_is_still_a_frame() {
        let ip = ipv4([10, 0, 0, 1], [10, 0, 1, 1], 17, 0, &udp(1000, 53));
        let mut frame = vec![0x42, 0, 0, 0, 0, 1, 0x66, 0, 0, 0, 0, 2, 0x08, 0x00];
        frame.extend_from_slice(&ip);
        assert_eq!(flow_hash(&frame, None), flow_hash(&ip, None));
        // Another frame of the flow (another IP ID) is the same flow.
        let mut again = frame.clone();
        again[14 + 4] = 0x12;
        assert_eq!(flow_hash(&again, None), flow_hash(&frame, None));
    }

    #[test]
    fn a_packet_whose_source_spells_an_ethernet_type_is_still_a_packet() {
        // From 8.0.64.1: bytes 12-14 read 08 00 40, an Ethernet type and an IPv4 version.
        let a = ipv4([8, 0, 64, 1], [10, 0, 1, 1], 17, 0, &udp(1000, 53));
        let mut b = a.clone();
        b[4] = 0x77; // another IP ID: the same flow
        assert_eq!(flow_hash(&a, None), flow_hash(&b, None));
        assert_eq!(flow_hash(&a, None), flow_hash(&a, Some(0)));
    }

    #[test]
    fn packets_without_ip_are_one_flow() {
        assert_eq!(flow_hash(&[], None), 0);
        assert_eq!(flow_hash(&[0x45, 0, 0], None), 0);
        let arp = [
            0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 2, 0, 0, 0, 0, 1, 0x08, 0x06, 0, 1,
        ];
        assert_eq!(flow_hash(&arp, None), 0);
        assert_eq!(flow_hash(&[0x45; 30], Some(40)), 0);
    }
}
