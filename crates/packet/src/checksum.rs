//! Internet checksums (RFC 1071) and incremental updates (RFC 1624).

/// Adds `data` to a running one's-complement sum (not folded to 16 bits).
///
/// Sums 32-bit big-endian words into a 64-bit accumulator: 2^16 = 1 (mod 2^16 - 1), so
/// the folded result equals the RFC 1071 sum of 16-bit words, with half the
/// additions and no carry handling inside the loop.
#[inline]
pub fn sum(data: &[u8], acc: u32) -> u32 {
    let mut s: u64 = acc as u64;
    let mut words = data.chunks_exact(4);
    for w in &mut words {
        s += u32::from_be_bytes([w[0], w[1], w[2], w[3]]) as u64;
    }
    // The last 0-3 bytes, padded with zeros on the right (no copy, no call).
    s += match *words.remainder() {
        [] => 0,
        [a] => (a as u64) << 24,
        [a, b] => ((a as u64) << 24) | ((b as u64) << 16),
        [a, b, c, ..] => ((a as u64) << 24) | ((b as u64) << 16) | ((c as u64) << 8),
    };
    // Fold 64 -> 32 bits (twice: the first fold can carry).
    s = (s & 0xffff_ffff) + (s >> 32);
    s = (s & 0xffff_ffff) + (s >> 32);
    s as u32
}

/// Folds a 32-bit sum to 16 bits.
#[inline]
pub fn fold(mut acc: u32) -> u16 {
    while acc >> 16 != 0 {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    acc as u16
}

/// The Internet checksum of `data` (the value to store in a header, big-endian).
#[inline]
pub fn checksum(data: &[u8]) -> u16 {
    // Option-less IPv4 headers are by far the most common input.
    match <&[u8; 20]>::try_from(data) {
        Ok(h) => checksum20(h),
        Err(_) => checksum_any(data),
    }
}

/// The Internet checksum of a 20-byte block (an IPv4 header without options): five
/// 32-bit words, unrolled, small enough to inline into per-packet loops.
#[inline(always)]
pub fn checksum20(h: &[u8; 20]) -> u16 {
    let w = |i: usize| u32::from_be_bytes([h[i], h[i + 1], h[i + 2], h[i + 3]]) as u64;
    let s = w(0) + w(4) + w(8) + w(12) + w(16);
    let s = (s & 0xffff_ffff) + (s >> 32);
    !fold(s as u32)
}

/// True if a 20-byte block verifies as an IPv4 header: its RFC 1071 sum folds to 0xFFFF
/// (so [`checksum20`] would give 0). For the receive path, which only verifies.
///
/// 2^16 = 1 (mod 0xFFFF), so any sum of the block's bytes taken as wider words in either
/// byte order, and any end-around-carry (ones' complement) sum of 64-bit words, is
/// congruent mod 0xFFFF to the 16-bit sum times 1 (big-endian) or 256 (little-endian),
/// and 256 is invertible mod 0xFFFF (2^64 - 1 is a multiple of 0xFFFF too). A nonzero
/// sum folds to 0xFFFF exactly when it is a multiple of 0xFFFF; an all-zero block folds
/// to 0 and does not verify. So: two 64-bit adds with end-around carry, one 32-bit add,
/// and a divisibility test by multiplying with the inverse of 0xFFFF mod 2^64 (x is a
/// multiple of an odd d iff x * d^-1 mod 2^64 <= (2^64 - 1) / d). No byte swaps, no fold
/// loop, no division.
#[inline(always)]
pub fn verify20(h: &[u8; 20]) -> bool {
    let (a, rest) = h.split_first_chunk::<8>().expect("20 bytes");
    let (b, c) = rest.split_first_chunk::<8>().expect("12 bytes");
    let c = u32::from_ne_bytes(*c.first_chunk::<4>().expect("4 bytes"));
    // An overflowing add wraps to a + b - 2^64, so adding the carry back gives a + b mod
    // 2^64 - 1, and cannot overflow again.
    let (s, o) = u64::from_ne_bytes(*a).overflowing_add(u64::from_ne_bytes(*b));
    let s = s + o as u64;
    let (s, o) = s.overflowing_add(c as u64);
    let s = s + o as u64;
    s != 0 && s.wrapping_mul(INV_FFFF) <= u64::MAX / 0xffff
}

/// The inverse of 0xFFFF mod 2^64 (Newton's iteration: each step doubles the correct
/// low bits, starting from 3 since d * d = 1 mod 8 for odd d).
const INV_FFFF: u64 = {
    let d: u64 = 0xffff;
    let mut x = d;
    let mut i = 0;
    while i < 5 {
        x = x.wrapping_mul(2u64.wrapping_sub(d.wrapping_mul(x)));
        i += 1;
    }
    assert!(d.wrapping_mul(x) == 1);
    x
};

#[inline(never)]
fn checksum_any(data: &[u8]) -> u16 {
    !fold(sum(data, 0))
}

/// Incrementally updates checksum `hc` when a 16-bit field changes from `old` to `new`
/// (RFC 1624, equation 3: HC' = ~(~HC + ~m + m')).
#[inline]
pub fn update16(hc: u16, old: u16, new: u16) -> u16 {
    let s = (!hc as u32) + (!old as u32) + new as u32;
    !fold(s)
}

/// Incrementally updates checksum `hc` when a 32-bit field changes.
#[inline]
pub fn update32(hc: u16, old: u32, new: u32) -> u16 {
    let hc = update16(hc, (old >> 16) as u16, (new >> 16) as u16);
    update16(hc, old as u16, new as u16)
}

/// Sum of the IPv4 pseudo-header for TCP/UDP checksums, folded to 16 bits (so a caller
/// may add a few more 16-bit words to it before [`sum`] or [`fold`]).
pub fn pseudo_header_v4(src: [u8; 4], dst: [u8; 4], proto: u8, len: u16) -> u32 {
    let acc = u64::from(sum(&src, 0)) + u64::from(sum(&dst, 0)) + u64::from(proto) + u64::from(len);
    u32::from(fold(fold64(acc)))
}

/// Sum of the IPv6 pseudo-header for upper-layer checksums, folded to 16 bits.
pub fn pseudo_header_v6(src: &[u8; 16], dst: &[u8; 16], next: u8, len: u32) -> u32 {
    // (A 32-bit word adds as its two halves: 2^16 = 1 modulo 2^16 - 1.)
    let acc = u64::from(sum(src, 0)) + u64::from(sum(dst, 0)) + u64::from(len) + u64::from(next);
    u32::from(fold(fold64(acc)))
}

/// Finishes a checksum its sender left partial, as the device would have (Linux's
/// `skb_checksum_help`): with transmit checksum offload, a Linux sender stores only the
/// pseudo-header's sum in the TCP or UDP checksum field and leaves the rest to the
/// device, which a veth or TAP device never does (the kernel completes it on the
/// receiving side, from metadata an `AF_PACKET` socket hands over in the frame's
/// virtio-net header: where the sum starts, `start`, and where the field is from
/// there, `field`). The field becomes the complement of the sum of `data[start..]`, a
/// zero sent as all ones. Only a TCP (`field` 16) or UDP (6) field is finished (SCTP's
/// is a CRC); returns false, changing nothing, for another or one past the data.
pub fn complete_at(data: &mut [u8], start: usize, field: usize) -> bool {
    if field != 6 && field != 16 {
        return false;
    }
    let Some(end) = start.checked_add(field + 2).filter(|&end| end <= data.len()) else {
        return false;
    };
    let at = end - 2;
    let c = !fold(sum(&data[start..], 0));
    let c = if c == 0 { 0xffff } else { c };
    data[at..at + 2].copy_from_slice(&c.to_be_bytes());
    true
}

/// Recomputes the TCP or UDP checksum of an Ethernet `frame` (one VLAN tag at most)
/// from its headers and payload, whatever its field holds: for a checksum [`complete_at`]
/// cannot finish, such as the outer UDP checksum of a tunnel's merged frame (VXLAN with
/// checksums), which the sender's kernel would have computed segment by segment as it
/// cut them. Returns false, changing nothing, for a frame that is not an unfragmented
/// IPv4 or IPv6 (no extension headers) TCP or UDP packet.
pub fn complete_transport(frame: &mut [u8]) -> bool {
    let mut l3 = 14;
    let mut ethertype = match frame.get(12..14) {
        Some(t) => u16::from_be_bytes([t[0], t[1]]),
        None => return false,
    };
    if ethertype == 0x8100 || ethertype == 0x88a8 {
        let Some(t) = frame.get(16..18) else { return false };
        ethertype = u16::from_be_bytes([t[0], t[1]]);
        l3 = 18;
    }
    let Some(ip) = frame.get_mut(l3..) else {
        return false;
    };
    let (pseudo, proto, l4) = match ethertype {
        0x0800 if ip.len() >= 20 && ip[0] >> 4 == 4 => {
            let hlen = usize::from(ip[0] & 0x0f) * 4;
            let total = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
            let fragmented = u16::from_be_bytes([ip[6], ip[7]]) & 0x3fff != 0;
            if hlen < 20 || total < hlen || total > ip.len() || fragmented {
                return false;
            }
            let len = (total - hlen) as u16;
            let src = [ip[12], ip[13], ip[14], ip[15]];
            let dst = [ip[16], ip[17], ip[18], ip[19]];
            (pseudo_header_v4(src, dst, ip[9], len), ip[9], hlen..total)
        }
        0x86dd if ip.len() >= 40 && ip[0] >> 4 == 6 => {
            let payload = usize::from(u16::from_be_bytes([ip[4], ip[5]]));
            if 40 + payload > ip.len() {
                return false;
            }
            let src: [u8; 16] = ip[8..24].try_into().expect("16 bytes");
            let dst: [u8; 16] = ip[24..40].try_into().expect("16 bytes");
            (
                pseudo_header_v6(&src, &dst, ip[6], payload as u32),
                ip[6],
                40..40 + payload,
            )
        }
        _ => return false,
    };
    let at = match proto {
        6 => 16,
        17 => 6,
        _ => return false,
    };
    let seg = &mut ip[l4];
    if seg.len() < at + 2 {
        return false;
    }
    seg[at..at + 2].fill(0);
    let mut c = !fold(sum(seg, pseudo));
    if proto == 17 && c == 0 {
        // UDP sends a computed zero as all ones (zero means "no checksum").
        c = 0xffff;
    }
    seg[at..at + 2].copy_from_slice(&c.to_be_bytes());
    true
}

/// Folds a 64-bit one's-complement sum to 32 bits, keeping the end-around carries.
fn fold64(mut s: u64) -> u32 {
    s = (s & 0xffff_ffff) + (s >> 32);
    s = (s & 0xffff_ffff) + (s >> 32);
    s as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    /// 2001:db8::1 port 50000 -> 2001:db8::2 port 443, "abc", behind an 802.1Q tag, its
    /// TCP checksum field `field` (four hex digits).
    fn tcp_over_ipv6_tagged(field: &str) -> Vec<u8> {
        hex(&format!(
            "{}{}{}{}{}{}{}{}",
            "020000000002020000000001",
            "8100000a86dd",
            "6000000000170640",
            "20010db8000000000000000000000001",
            "20010db8000000000000000000000002",
            "c35001bb000000010000000050022000",
            field,
            "0000616263"
        ))
    }

    #[test]
    fn a_partial_udp_checksum_is_completed() {
        // A frame as a veth peer sends it with checksum offload (10.0.2.1:5555 ->
        // 10.0.2.2:7000, "hello"): its checksum field holds the pseudo-header's sum,
        // 0x1821 (by hand: 0x0a00 + 0x0201 + 0x0a00 + 0x0202, protocol 0x11, length
        // 0x000d), the checksum starts at the UDP header (34) and its field is 6 bytes
        // in. The full checksum, by an independent computation over the pseudo-header
        // and the segment: 0x72f4.
        let mut f = hex(
            "020000000202020000000201080045000021a6be40003f117d0b0a0002010a00020215b31b58000d182168656c6c6f",
        );
        let before = f.clone();
        assert!(complete_at(&mut f, 34, 6));
        assert_eq!(&f[40..42], &[0x72, 0xf4]);
        assert_eq!(f[..40], before[..40]);
        assert_eq!(f[42..], before[42..]);
    }

    #[test]
    fn a_partial_tcp_checksum_over_ipv6_behind_a_vlan_tag_is_completed() {
        // The field holds the pseudo-header's sum as a sender leaves it, 0x5b92 (by hand:
        // the addresses' words 0x2dba + 0x2dbb, the length 0x0017 and the next header
        // 0x0006); the full checksum by an independent computation: 0xaafb.
        let mut f = tcp_over_ipv6_tagged("5b92");
        let at = 18 + 40;
        assert!(complete_at(&mut f, at, 16));
        assert_eq!(&f[at + 16..at + 18], &[0xaa, 0xfb]);
    }

    #[test]
    fn other_fields_and_fields_past_the_data_are_left_alone() {
        let udp = hex(
            "020000000202020000000201080045000021a6be40003f117d0b0a0002010a00020215b31b58000d162368656c6c6f",
        );
        // SCTP's CRC field (8), an ICMP-like offset, a field past the end, a start past
        // the end.
        for (start, field) in [(34, 8), (34, 2), (40, 16), (100, 6), (usize::MAX - 20, 16)] {
            let mut f = udp.clone();
            assert!(!complete_at(&mut f, start, field), "{start} {field}");
            assert_eq!(f, udp);
        }
    }

    #[test]
    fn a_whole_frames_udp_checksum_is_recomputed() {
        // 10.0.2.1:5555 -> 10.0.2.2:7000, "hello", other bytes (0x1623) in its checksum
        // field. The full checksum, by an independent computation over the
        // pseudo-header and the segment: 0x72f4.
        let mut f = hex(
            "020000000202020000000201080045000021a6be40003f117d0b0a0002010a00020215b31b58000d162368656c6c6f",
        );
        assert!(complete_transport(&mut f));
        assert_eq!(&f[40..42], &[0x72, 0xf4]);
        // Completing it again changes nothing.
        assert!(complete_transport(&mut f));
        assert_eq!(&f[40..42], &[0x72, 0xf4]);
    }

    #[test]
    fn a_whole_frames_tcp_checksum_over_ipv6_behind_a_vlan_tag_is_recomputed() {
        // 2001:db8::1 port 50000 -> 2001:db8::2 port 443, "abc", junk in the checksum
        // field; expected 0xaafb by an independent computation.
        let mut f = tcp_over_ipv6_tagged("1234");
        assert!(complete_transport(&mut f));
        let at = 18 + 40 + 16;
        assert_eq!(&f[at..at + 2], &[0xaa, 0xfb]);
    }

    #[test]
    fn frames_that_are_no_whole_tcp_or_udp_packet_are_not_recomputed() {
        let udp =
            "020000000202020000000201080045000021a6be40003f117d0b0a0002010a00020215b31b58000d162368656c6c6f";
        for bad in [
            udp.replace("a6be4000", "a6be2000"),     // more fragments
            udp.replace("3f117d0b", "3f017d0b"),     // ICMP
            udp.replace("0800450000", "0806450000"), // not IP
            udp[..60].to_string(),                   // truncated
        ] {
            assert_ne!(bad, udp);
            let mut f = hex(&bad);
            let before = f.clone();
            assert!(!complete_transport(&mut f), "{bad}");
            assert_eq!(f, before);
        }
    }

    /// RFC 1071's sum of 16-bit big-endian words, folded, written out for the tests.
    fn word_sum(b: &[u8]) -> u16 {
        let mut s: u64 = b
            .chunks(2)
            .map(|c| (u64::from(c[0]) << 8) | u64::from(*c.get(1).unwrap_or(&0)))
            .sum();
        while s > 0xffff {
            s = (s & 0xffff) + (s >> 16);
        }
        s as u16
    }

    #[test]
    fn pseudo_header_sums_keep_every_carry() {
        // All-ones addresses push the running sums to their top, where adding the
        // length and protocol used to overflow 32 bits.
        for (a, b) in [
            ([0xffu8; 16], [0xffu8; 16]),
            ([0xfe; 16], [0xff; 16]),
            ([0; 16], [1; 16]),
        ] {
            for (next, len) in [(58u8, 0xffff_ffffu32), (17, 8), (6, 0x1_0000)] {
                let mut v = a.to_vec();
                v.extend_from_slice(&b);
                v.extend_from_slice(&len.to_be_bytes());
                v.extend_from_slice(&[0, 0, 0, next]);
                assert_eq!(fold(pseudo_header_v6(&a, &b, next, len)), word_sum(&v));
                let (a4, b4) = ([a[0], a[1], a[2], a[3]], [b[0], b[1], b[2], b[3]]);
                let mut v = a4.to_vec();
                v.extend_from_slice(&b4);
                v.extend_from_slice(&[0, next]);
                v.extend_from_slice(&(len as u16).to_be_bytes());
                assert_eq!(fold(pseudo_header_v4(a4, b4, next, len as u16)), word_sum(&v));
            }
        }
    }

    #[test]
    fn rfc1071_example() {
        // RFC 1071 section 3: the bytes 00 01 f2 03 f4 f5 f6 f7 sum to 0xddf2.
        let d = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(fold(sum(&d, 0)), 0xddf2);
        assert_eq!(checksum(&d), !0xddf2);
    }

    #[test]
    fn ipv4_header_checksum() {
        // A well-known header: 4500 0073 0000 4000 4011 b861 c0a8 0001 c0a8 00c7.
        let mut h = [
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0x00, 0x00, 0xc0, 0xa8, 0x00, 0x01,
            0xc0, 0xa8, 0x00, 0xc7,
        ];
        assert_eq!(checksum(&h), 0xb861);
        h[10] = 0xb8;
        h[11] = 0x61;
        assert_eq!(checksum(&h), 0);
    }

    /// The textbook 16-bit-word sum, to check the word-at-a-time one against.
    fn reference(data: &[u8]) -> u16 {
        let mut acc: u32 = 0;
        for c in data.chunks(2) {
            let w = if c.len() == 2 {
                u16::from_be_bytes([c[0], c[1]])
            } else {
                u16::from_be_bytes([c[0], 0])
            };
            acc += w as u32;
            acc = (acc & 0xffff) + (acc >> 16);
        }
        acc as u16
    }

    #[test]
    fn word_sum_matches_reference_on_all_lengths() {
        let data: Vec<u8> = (0..300u32).map(|i| (i * 7919 % 251) as u8 | 0x80).collect();
        for len in 0..data.len() {
            assert_eq!(fold(sum(&data[..len], 0)), reference(&data[..len]), "len {}", len);
        }
        // A running sum carries over: sum(d, acc) folds to acc + sum(d).
        let ff = vec![0xffu8; 1501];
        for acc in [0u32, 1, 0xffff, 0x1_0000, 0xffff_ffff] {
            let want = fold(fold(acc) as u32 + reference(&ff) as u32);
            assert_eq!(fold(sum(&ff, acc)), want, "acc {:#x}", acc);
        }
    }

    #[test]
    fn twenty_byte_fast_path_matches_the_general_sum() {
        let mut h = [0u8; 20];
        for seed in 0..200u32 {
            for (i, b) in h.iter_mut().enumerate() {
                *b = (seed.wrapping_mul(2654435761).rotate_left(i as u32) >> 7) as u8;
            }
            assert_eq!(checksum(&h), !reference(&h), "seed {}", seed);
        }
        assert_eq!(checksum(&[0xff; 20]), !reference(&[0xff; 20]));
    }

    #[test]
    fn verify20_agrees_with_the_textbook_sum() {
        // Random blocks (almost never valid), the same blocks with their checksum filled
        // in (valid), and the extremes.
        let mut h = [0u8; 20];
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..20_000 {
            for b in h.iter_mut() {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                *b = x as u8;
            }
            assert_eq!(verify20(&h), reference(&h) == 0xffff, "{:02x?}", h);
            h[10] = 0;
            h[11] = 0;
            let c = !reference(&h);
            h[10..12].copy_from_slice(&c.to_be_bytes());
            assert!(verify20(&h), "{:02x?}", h);
            h[3] ^= 1;
            assert!(!verify20(&h), "{:02x?}", h);
        }
        assert!(verify20(&[0xff; 20]));
        assert!(!verify20(&[0; 20]));
        // Blocks of mostly 0xff bytes carry out of both 64-bit adds.
        for i in 0..20 {
            for v in [0u8, 1, 0x7f, 0xfe] {
                let mut h = [0xffu8; 20];
                h[i] = v;
                assert_eq!(verify20(&h), reference(&h) == 0xffff, "{:02x?}", h);
                if i != 10 && i != 11 {
                    h[10] = 0;
                    h[11] = 0;
                    let c = !reference(&h);
                    h[10..12].copy_from_slice(&c.to_be_bytes());
                    assert!(verify20(&h), "{:02x?}", h);
                }
            }
        }
        let mut one = [0u8; 20];
        one[19] = 1;
        assert!(!verify20(&one));
    }

    #[test]
    fn odd_length() {
        assert_eq!(fold(sum(&[0x12, 0x34, 0x56], 0)), 0x1234 + 0x5600);
    }

    #[test]
    fn incremental_matches_full_recompute_on_ttl_decrement() {
        let mut h = [
            0x45u8, 0x00, 0x00, 0x54, 0x1c, 0x46, 0x40, 0x00, 0x40, 0x01, 0x00, 0x00, 0x0a, 0x00, 0x00, 0x01,
            0x0a, 0x00, 0x00, 0x02,
        ];
        let c = checksum(&h);
        h[10..12].copy_from_slice(&c.to_be_bytes());
        let old = u16::from_be_bytes([h[8], h[9]]);
        h[8] -= 1;
        let new = u16::from_be_bytes([h[8], h[9]]);
        let inc = update16(c, old, new);
        h[10] = 0;
        h[11] = 0;
        assert_eq!(inc, checksum(&h));
    }
}
