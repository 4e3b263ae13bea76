//! Receive-side scaling: the Toeplitz hash and the indirection table (RETA).
//!
//! A multi-queue NIC hashes each received frame's IP addresses (and, for TCP and UDP,
//! ports) with the Toeplitz function under a secret key, takes the low 7 bits of the
//! hash as an index into a 128-entry indirection table, and delivers the frame to the
//! queue that entry names. Every frame of a flow lands on the same queue, so one core
//! sees the whole flow and no packet is handed between cores.
//!
//! The hash input is, in network byte order: source address, destination address, then
//! (4-tuple) source port and destination port, as Microsoft's RSS specification fixes
//! it. [`Toeplitz`] precomputes, from the key, one 256-entry table per input byte, so a
//! hash costs one lookup and one XOR per input byte (12 for an IPv4 4-tuple) instead of
//! eight conditional XORs per byte (one per input bit).

mod rules;
mod settings;

pub use rules::{format_rules, parse_rules, rule_queue, Family, FlowRule, Prefix, MAX_RULES};
pub use settings::{format_key, parse_key, RssSettings, KEY_LEN};

use std::net::{Ipv4Addr, Ipv6Addr};
use std::sync::OnceLock;

/// The 40-byte key of Microsoft's RSS specification, the default of most NIC drivers.
pub const MS_RSS_KEY: [u8; 40] = [
    0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3, 0x8f, 0xb0, 0xd0,
    0xca, 0x2b, 0xcb, 0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3, 0x80, 0x30, 0xf2, 0x0c, 0x6a, 0x42,
    0xb7, 0x3b, 0xbe, 0xac, 0x01, 0xfa,
];

/// Longest hash input: an IPv6 4-tuple (16 + 16 + 2 + 2 bytes). A 40-byte key covers
/// exactly this many input bytes (each input bit needs the 32 key bits that follow it).
pub const MAX_INPUT: usize = 36;

/// Entries of the indirection table, as on Intel 82599/X710 class NICs.
pub const RETA_SIZE: usize = 128;

/// A Toeplitz hash function for one key, with its per-byte lookup tables.
#[derive(Clone)]
pub struct Toeplitz {
    key: Vec<u8>,
    /// `tables[i][v]`: the hash contribution of byte value `v` at input offset `i`.
    tables: Box<[[u32; 256]]>,
}

impl std::fmt::Debug for Toeplitz {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Toeplitz").field("key", &self.key).finish()
    }
}

impl Toeplitz {
    /// The hash for `key`. Key bits past the end of a short key count as zero; a key
    /// longer than 40 bytes only matters for its first 40 bytes (inputs are at most
    /// [`MAX_INPUT`] bytes).
    pub fn new(key: &[u8]) -> Toeplitz {
        // The key, zero-padded so that every 8-byte window below is in bounds.
        let mut k = [0u8; MAX_INPUT + 8];
        let n = key.len().min(k.len());
        k[..n].copy_from_slice(&key[..n]);
        let mut tables = vec![[0u32; 256]; MAX_INPUT].into_boxed_slice();
        for (i, table) in tables.iter_mut().enumerate() {
            // Key bits starting at bit 8*i, as a 64-bit big-endian window.
            let mut w = [0u8; 8];
            w.copy_from_slice(&k[i..i + 8]);
            let window = u64::from_be_bytes(w);
            // The 32-bit key slice that input bit b (0 = most significant) selects.
            let mut slice = [0u32; 8];
            for (b, s) in slice.iter_mut().enumerate() {
                *s = (window >> (32 - b)) as u32;
            }
            for (v, entry) in table.iter_mut().enumerate() {
                let mut h = 0u32;
                for (b, s) in slice.iter().enumerate() {
                    if v & (0x80 >> b) != 0 {
                        h ^= s;
                    }
                }
                *entry = h;
            }
        }
        Toeplitz {
            key: key.to_vec(),
            tables,
        }
    }

    /// The hash under Microsoft's standard key, built once per process.
    pub fn microsoft() -> &'static Toeplitz {
        static MS: OnceLock<Toeplitz> = OnceLock::new();
        MS.get_or_init(|| Toeplitz::new(&MS_RSS_KEY))
    }

    pub fn key(&self) -> &[u8] {
        &self.key
    }

    /// The per-byte tables: `tables()[i][v]` is the hash contribution of byte value `v`
    /// at input offset `i` (a hash is the XOR of its bytes' contributions). For
    /// implementations of the same hash elsewhere, such as a BPF program.
    pub fn tables(&self) -> &[[u32; 256]] {
        &self.tables
    }

    /// The Toeplitz hash of `input`; bytes past [`MAX_INPUT`] are ignored.
    #[inline]
    pub fn hash(&self, input: &[u8]) -> u32 {
        let mut h = 0u32;
        for (table, &b) in self.tables.iter().zip(input) {
            h ^= table[b as usize];
        }
        h
    }

    /// Hash of an IPv4 source and destination address (the "2-tuple").
    #[inline]
    pub fn ipv4_2tuple(&self, src: Ipv4Addr, dst: Ipv4Addr) -> u32 {
        let mut d = [0u8; 8];
        d[..4].copy_from_slice(&src.octets());
        d[4..].copy_from_slice(&dst.octets());
        self.hash(&d)
    }

    /// Hash of an IPv4 source and destination address and TCP/UDP ports (the "4-tuple").
    #[inline]
    pub fn ipv4_4tuple(&self, src: Ipv4Addr, dst: Ipv4Addr, sport: u16, dport: u16) -> u32 {
        let mut d = [0u8; 12];
        d[..4].copy_from_slice(&src.octets());
        d[4..8].copy_from_slice(&dst.octets());
        d[8..10].copy_from_slice(&sport.to_be_bytes());
        d[10..].copy_from_slice(&dport.to_be_bytes());
        self.hash(&d)
    }

    /// Hash of an IPv6 source and destination address.
    #[inline]
    pub fn ipv6_2tuple(&self, src: Ipv6Addr, dst: Ipv6Addr) -> u32 {
        let mut d = [0u8; 32];
        d[..16].copy_from_slice(&src.octets());
        d[16..].copy_from_slice(&dst.octets());
        self.hash(&d)
    }

    /// Hash of an IPv6 source and destination address and TCP/UDP ports.
    #[inline]
    pub fn ipv6_4tuple(&self, src: Ipv6Addr, dst: Ipv6Addr, sport: u16, dport: u16) -> u32 {
        let mut d = [0u8; 36];
        d[..16].copy_from_slice(&src.octets());
        d[16..32].copy_from_slice(&dst.octets());
        d[32..34].copy_from_slice(&sport.to_be_bytes());
        d[34..].copy_from_slice(&dport.to_be_bytes());
        self.hash(&d)
    }

    /// The RSS hash a NIC computes for an Ethernet frame:
    /// - IPv4/IPv6 carrying TCP or UDP whose ports are in the frame: the 4-tuple;
    /// - other IP packets, and every fragment of a fragmented datagram (first one
    ///   included, as Intel NICs do, so all fragments of a datagram reach one queue):
    ///   the 2-tuple;
    /// - anything else (ARP, truncated or malformed IP headers): 0.
    ///
    /// Up to two VLAN tags (802.1Q, 802.1ad) are skipped; so are IPv6 hop-by-hop,
    /// routing, destination-options and AH extension headers. Never panics: every
    /// field is read only if the frame holds it.
    pub fn hash_frame(&self, frame: &[u8]) -> u32 {
        ip_fields(frame).map_or(0, |f| self.hash(f.input()))
    }

    /// RSS hash of an IPv4 packet starting at its IP header (see [`Toeplitz::hash_frame`]).
    pub fn hash_ipv4_packet(&self, ip: &[u8]) -> u32 {
        ipv4_fields(ip).map_or(0, |f| self.hash(f.input()))
    }

    /// RSS hash of an IPv6 packet starting at its IP header (see [`Toeplitz::hash_frame`]).
    pub fn hash_ipv6_packet(&self, ip: &[u8]) -> u32 {
        ipv6_fields(ip).map_or(0, |f| self.hash(f.input()))
    }
}

/// What RSS reads from an IP packet: the hash input (source address, destination
/// address, and for unfragmented TCP and UDP with ports in the frame the two ports),
/// and the protocol: IPv4's, or for IPv6 the next-header value where the walk over
/// extension headers stopped.
pub(crate) struct IpFields {
    input: [u8; MAX_INPUT],
    /// Bytes of one address: 4 or 16.
    alen: usize,
    pub proto: u8,
    pub ports: Option<(u16, u16)>,
}

impl IpFields {
    fn new(alen: usize, addrs: &[u8], proto: u8) -> IpFields {
        let mut input = [0u8; MAX_INPUT];
        input[..2 * alen].copy_from_slice(addrs);
        IpFields {
            input,
            alen,
            proto,
            ports: None,
        }
    }

    fn with_ports(mut self, ports: &[u8]) -> IpFields {
        let at = 2 * self.alen;
        self.input[at..at + 4].copy_from_slice(ports);
        self.ports = Some((
            u16::from_be_bytes([ports[0], ports[1]]),
            u16::from_be_bytes([ports[2], ports[3]]),
        ));
        self
    }

    pub fn src(&self) -> &[u8] {
        &self.input[..self.alen]
    }

    pub fn dst(&self) -> &[u8] {
        &self.input[self.alen..2 * self.alen]
    }

    /// The hash input: the 2-tuple, or the 4-tuple with ports.
    fn input(&self) -> &[u8] {
        &self.input[..2 * self.alen + if self.ports.is_some() { 4 } else { 0 }]
    }
}

/// The fields of an Ethernet frame's IP packet (see [`Toeplitz::hash_frame`]); `None`
/// for anything else.
pub(crate) fn ip_fields(frame: &[u8]) -> Option<IpFields> {
    let mut off = 12;
    let mut ethertype = be16(frame, off)?;
    let mut tags = 0;
    while (ethertype == 0x8100 || ethertype == 0x88a8) && tags < 2 {
        off += 4;
        ethertype = be16(frame, off)?;
        tags += 1;
    }
    let l3 = frame.get(off + 2..).unwrap_or(&[]);
    match ethertype {
        0x0800 => ipv4_fields(l3),
        0x86dd => ipv6_fields(l3),
        _ => None,
    }
}

fn ipv4_fields(ip: &[u8]) -> Option<IpFields> {
    if ip.len() < 20 || ip[0] >> 4 != 4 {
        return None;
    }
    let ihl = usize::from(ip[0] & 0x0f) * 4;
    if ihl < 20 {
        return None;
    }
    let frag = u16::from_be_bytes([ip[6], ip[7]]) & 0x3fff; // MF flag | offset
    let proto = ip[9];
    let f = IpFields::new(4, &ip[12..20], proto);
    if frag == 0 && (proto == 6 || proto == 17) {
        if let Some(ports) = ip.get(ihl..ihl + 4) {
            return Some(f.with_ports(ports));
        }
    }
    Some(f)
}

fn ipv6_fields(ip: &[u8]) -> Option<IpFields> {
    if ip.len() < 40 || ip[0] >> 4 != 6 {
        return None;
    }
    let mut next = ip[6];
    let mut off = 40;
    // A bounded walk over extension headers.
    for _ in 0..8 {
        match next {
            // Hop-by-hop, routing, destination options: length in 8-byte units.
            0 | 43 | 60 => match ip.get(off..off + 2) {
                Some(h) => {
                    next = h[0];
                    off += (usize::from(h[1]) + 1) * 8;
                }
                None => break,
            },
            // Authentication header: length in 4-byte units, minus 2.
            51 => match ip.get(off..off + 2) {
                Some(h) => {
                    next = h[0];
                    off += (usize::from(h[1]) + 2) * 4;
                }
                None => break,
            },
            6 | 17 => {
                let f = IpFields::new(16, &ip[8..40], next);
                return Some(match ip.get(off..off + 4) {
                    Some(ports) => f.with_ports(ports),
                    None => f,
                });
            }
            // Fragment header (44) and every other protocol: 2-tuple.
            _ => break,
        }
    }
    Some(IpFields::new(16, &ip[8..40], next))
}

#[inline]
fn be16(b: &[u8], off: usize) -> Option<u16> {
    let s = b.get(off..off + 2)?;
    Some(u16::from_be_bytes([s[0], s[1]]))
}

/// The RSS hash of an Ethernet frame under Microsoft's standard key: the value whose low
/// 7 bits index the indirection table ([`Reta::queue_for`]) to pick the frame's queue.
/// See [`Toeplitz::hash_frame`] for which fields are hashed.
#[inline]
pub fn rss_queue_for_frame(frame: &[u8]) -> u32 {
    Toeplitz::microsoft().hash_frame(frame)
}

/// A 128-entry RSS indirection table: hash → queue.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reta {
    entries: [u16; RETA_SIZE],
    queues: usize,
}

impl Reta {
    /// A table spreading hashes round-robin over `queues` queues (entry i names queue
    /// i mod queues), as drivers fill it by default. Zero queues counts as one.
    pub fn new(queues: usize) -> Reta {
        let queues = queues.clamp(1, usize::from(u16::MAX) + 1);
        let mut entries = [0u16; RETA_SIZE];
        for (i, e) in entries.iter_mut().enumerate() {
            *e = (i % queues) as u16;
        }
        Reta { entries, queues }
    }

    /// Number of queues the table spreads over.
    pub fn queues(&self) -> usize {
        self.queues
    }

    /// The queue for a frame whose RSS hash is `hash`.
    #[inline]
    pub fn queue_for(&self, hash: u32) -> usize {
        usize::from(self.entries[hash as usize & (RETA_SIZE - 1)])
    }

    pub fn entries(&self) -> &[u16; RETA_SIZE] {
        &self.entries
    }

    /// Points entry `index` at `queue`.
    pub fn set(&mut self, index: usize, queue: usize) -> Result<(), String> {
        if index >= RETA_SIZE {
            return Err(format!("RETA index {} out of range (0-{})", index, RETA_SIZE - 1));
        }
        if queue >= self.queues {
            return Err(format!("queue {} out of range ({} queues)", queue, self.queues));
        }
        self.entries[index] = queue as u16;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v4(s: &str) -> Ipv4Addr {
        s.parse().unwrap()
    }
    fn v6(s: &str) -> Ipv6Addr {
        s.parse().unwrap()
    }

    /// Microsoft, "Verifying the RSS Hash Calculation", IPv4 table:
    /// (destination, destination port, source, source port, IPv4 only, IPv4 with TCP).
    const V4_VECTORS: [(&str, u16, &str, u16, u32, u32); 5] = [
        (
            "161.142.100.80",
            1766,
            "66.9.149.187",
            2794,
            0x323e8fc2,
            0x51ccc178,
        ),
        (
            "65.69.140.83",
            4739,
            "199.92.111.2",
            14230,
            0xd718262a,
            0xc626b0ea,
        ),
        (
            "12.22.207.184",
            38024,
            "24.19.198.95",
            12898,
            0xd2d0a5de,
            0x5c2b394a,
        ),
        (
            "209.142.163.6",
            2217,
            "38.27.205.30",
            48228,
            0x82989176,
            0xafc7327f,
        ),
        (
            "202.188.127.2",
            1303,
            "153.39.163.191",
            44251,
            0x5d1809c5,
            0x10e828a2,
        ),
    ];

    /// The same document's IPv6 table.
    const V6_VECTORS: [(&str, u16, &str, u16, u32, u32); 3] = [
        (
            "3ffe:2501:200:3::1",
            1766,
            "3ffe:2501:200:1fff::7",
            2794,
            0x2cc18cd5,
            0x40207d3d,
        ),
        (
            "ff02::1",
            4739,
            "3ffe:501:8::260:97ff:fe40:efab",
            14230,
            0x0f0c461c,
            0xdde51bbf,
        ),
        (
            "fe80::200:f8ff:fe21:67cf",
            38024,
            "3ffe:1900:4545:3:200:f8ff:fe21:67cf",
            44251,
            0x4b61e985,
            0x02d1feef,
        ),
    ];

    #[test]
    fn microsoft_ipv4_vectors() {
        let t = Toeplitz::microsoft();
        for (dst, dport, src, sport, h2, h4) in V4_VECTORS {
            assert_eq!(t.ipv4_2tuple(v4(src), v4(dst)), h2, "2-tuple {} -> {}", src, dst);
            assert_eq!(
                t.ipv4_4tuple(v4(src), v4(dst), sport, dport),
                h4,
                "4-tuple {} -> {}",
                src,
                dst
            );
        }
    }

    #[test]
    fn microsoft_ipv6_vectors() {
        let t = Toeplitz::new(&MS_RSS_KEY);
        for (dst, dport, src, sport, h2, h4) in V6_VECTORS {
            assert_eq!(t.ipv6_2tuple(v6(src), v6(dst)), h2, "2-tuple {} -> {}", src, dst);
            assert_eq!(
                t.ipv6_4tuple(v6(src), v6(dst), sport, dport),
                h4,
                "4-tuple {} -> {}",
                src,
                dst
            );
        }
    }

    /// The definition, one input bit at a time, to check the tables against.
    fn reference(key: &[u8], input: &[u8]) -> u32 {
        let bit = |i: usize| -> u32 { key.get(i / 8).map_or(0, |b| u32::from((b >> (7 - i % 8)) & 1)) };
        let mut window: u32 = (0..32).fold(0, |w, i| (w << 1) | bit(i));
        let mut h = 0;
        for (n, byte) in input.iter().enumerate() {
            for b in 0..8 {
                if byte & (0x80 >> b) != 0 {
                    h ^= window;
                }
                window = (window << 1) | bit(n * 8 + b + 32);
            }
        }
        h
    }

    #[test]
    fn tables_agree_with_bitwise_definition() {
        let mut x: u64 = 0x9e3779b97f4a7c15;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let key: Vec<u8> = (0..40).map(|_| next() as u8).collect();
        let t = Toeplitz::new(&key);
        for len in 0..=MAX_INPUT {
            for _ in 0..20 {
                let input: Vec<u8> = (0..len).map(|_| next() as u8).collect();
                assert_eq!(t.hash(&input), reference(&key, &input));
                assert_eq!(Toeplitz::microsoft().hash(&input), reference(&MS_RSS_KEY, &input));
            }
        }
    }

    /// Ethernet + IPv4 header + 8 bytes of transport header, written out by hand.
    fn ipv4_frame(proto: u8, frag: u16, src: [u8; 4], dst: [u8; 4], sport: u16, dport: u16) -> Vec<u8> {
        let mut f = vec![
            0x00, 0x1b, 0x21, 0x00, 0x00, 0x01, // dst MAC
            0x00, 0x1b, 0x21, 0x00, 0x00, 0x02, // src MAC
            0x08, 0x00, // IPv4
            0x45, 0x00, 0x00, 0x1c, // version/IHL, TOS, total length 28
            0x12, 0x34, // id
        ];
        f.extend_from_slice(&frag.to_be_bytes());
        f.extend_from_slice(&[64, proto, 0x00, 0x00]);
        f.extend_from_slice(&src);
        f.extend_from_slice(&dst);
        f.extend_from_slice(&sport.to_be_bytes());
        f.extend_from_slice(&dport.to_be_bytes());
        f.extend_from_slice(&[0x00, 0x08, 0x00, 0x00]);
        f
    }

    const SRC: [u8; 4] = [66, 9, 149, 187];
    const DST: [u8; 4] = [161, 142, 100, 80];

    #[test]
    fn frame_hash_ipv4() {
        // TCP and UDP: 4-tuple.
        assert_eq!(
            rss_queue_for_frame(&ipv4_frame(6, 0, SRC, DST, 2794, 1766)),
            0x51ccc178
        );
        assert_eq!(
            rss_queue_for_frame(&ipv4_frame(17, 0, SRC, DST, 2794, 1766)),
            0x51ccc178
        );
        // ICMP: 2-tuple.
        assert_eq!(
            rss_queue_for_frame(&ipv4_frame(1, 0, SRC, DST, 2794, 1766)),
            0x323e8fc2
        );
        // Non-first fragment (offset 185) and first fragment (MF): 2-tuple.
        assert_eq!(
            rss_queue_for_frame(&ipv4_frame(17, 0x00b9, SRC, DST, 2794, 1766)),
            0x323e8fc2
        );
        assert_eq!(
            rss_queue_for_frame(&ipv4_frame(17, 0x2000, SRC, DST, 2794, 1766)),
            0x323e8fc2
        );
        // DF alone is not a fragment.
        assert_eq!(
            rss_queue_for_frame(&ipv4_frame(6, 0x4000, SRC, DST, 2794, 1766)),
            0x51ccc178
        );
        // A VLAN tag is skipped.
        let mut tagged = ipv4_frame(6, 0, SRC, DST, 2794, 1766);
        tagged.splice(12..12, [0x81, 0x00, 0x00, 0x05]);
        assert_eq!(rss_queue_for_frame(&tagged), 0x51ccc178);
        // IP options move the ports: IHL 6 with one 4-byte option.
        let mut opts = ipv4_frame(6, 0, SRC, DST, 2794, 1766);
        opts[14] = 0x46;
        opts.splice(34..34, [0x01, 0x01, 0x01, 0x00]);
        assert_eq!(rss_queue_for_frame(&opts), 0x51ccc178);
        // Ports cut off: 2-tuple.
        let short = ipv4_frame(6, 0, SRC, DST, 2794, 1766);
        assert_eq!(rss_queue_for_frame(&short[..36]), 0x323e8fc2);
    }

    #[test]
    fn frame_hash_non_ip_is_zero() {
        let mut arp = vec![0xff; 12];
        arp.extend_from_slice(&[0x08, 0x06]);
        arp.extend_from_slice(&[0u8; 28]);
        assert_eq!(rss_queue_for_frame(&arp), 0);
        // Ethertype IPv4 but version 6 in the header.
        let mut bad = ipv4_frame(6, 0, SRC, DST, 2794, 1766);
        bad[14] = 0x65;
        assert_eq!(rss_queue_for_frame(&bad), 0);
    }

    #[test]
    fn truncated_frames_never_panic() {
        let f4 = ipv4_frame(6, 0, SRC, DST, 2794, 1766);
        let f6 = ipv6_frame(&[], 6);
        for f in [&f4, &f6] {
            for n in 0..=f.len() {
                let _ = rss_queue_for_frame(&f[..n]);
            }
        }
        // Extension header lengths pointing past the end.
        let mut odd = ipv6_frame(&[6, 0xff, 0, 0, 0, 0, 0, 0], 0);
        let _ = rss_queue_for_frame(&odd);
        odd.truncate(56);
        let _ = rss_queue_for_frame(&odd);
    }

    /// Ethernet + IPv6 header (first row of the IPv6 table) + `ext` + ports.
    fn ipv6_frame(ext: &[u8], next: u8) -> Vec<u8> {
        let mut f = vec![0x33, 0x33, 0, 0, 0, 1, 0x00, 0x1b, 0x21, 0, 0, 2, 0x86, 0xdd];
        f.extend_from_slice(&[0x60, 0, 0, 0]);
        f.extend_from_slice(&((ext.len() + 8) as u16).to_be_bytes());
        f.extend_from_slice(&[next, 64]);
        f.extend_from_slice(&v6("3ffe:2501:200:1fff::7").octets());
        f.extend_from_slice(&v6("3ffe:2501:200:3::1").octets());
        f.extend_from_slice(ext);
        f.extend_from_slice(&2794u16.to_be_bytes());
        f.extend_from_slice(&1766u16.to_be_bytes());
        f.extend_from_slice(&[0, 8, 0, 0]);
        f
    }

    #[test]
    fn frame_hash_ipv6() {
        assert_eq!(rss_queue_for_frame(&ipv6_frame(&[], 6)), 0x40207d3d);
        assert_eq!(rss_queue_for_frame(&ipv6_frame(&[], 17)), 0x40207d3d);
        // Hop-by-hop options (8 bytes) then UDP: ports still found.
        let hbh = [17, 0, 1, 4, 0, 0, 0, 0];
        assert_eq!(rss_queue_for_frame(&ipv6_frame(&hbh, 0)), 0x40207d3d);
        // Fragment header: 2-tuple.
        let frag = [17, 0, 0, 0, 0, 0, 0, 1];
        assert_eq!(rss_queue_for_frame(&ipv6_frame(&frag, 44)), 0x2cc18cd5);
        // ICMPv6: 2-tuple.
        assert_eq!(rss_queue_for_frame(&ipv6_frame(&[], 58)), 0x2cc18cd5);
    }

    #[test]
    fn reta_round_robin_and_set() {
        let r = Reta::new(4);
        assert_eq!(r.queues(), 4);
        for q in 0..4 {
            assert_eq!(r.entries().iter().filter(|&&e| usize::from(e) == q).count(), 32);
        }
        // Only the low 7 bits index the table.
        assert_eq!(r.queue_for(0x51ccc178), (0x78 % 4) as usize);
        assert_eq!(r.queue_for(0xffff_ff85), 0x05 % 4);
        let r3 = Reta::new(3);
        let counts: Vec<usize> = (0..3)
            .map(|q| r3.entries().iter().filter(|&&e| usize::from(e) == q).count())
            .collect();
        assert_eq!(counts, vec![43, 43, 42]);
        let mut r = Reta::new(2);
        r.set(0x78, 1).unwrap();
        assert_eq!(r.queue_for(0x51ccc178), 1);
        assert_eq!(r.set(128, 0).unwrap_err(), "RETA index 128 out of range (0-127)");
        assert_eq!(r.set(3, 2).unwrap_err(), "queue 2 out of range (2 queues)");
        assert_eq!(Reta::new(0).queue_for(12345), 0);
    }

    #[test]
    fn many_flows_spread_evenly() {
        let reta = Reta::new(4);
        let t = Toeplitz::microsoft();
        let mut counts = [0usize; 4];
        for i in 0..4096u32 {
            let src = Ipv4Addr::from(0xc612_0000 | (i & 0xff));
            let dst = Ipv4Addr::from(0x0a00_0000 | (i >> 8));
            counts[reta.queue_for(t.ipv4_4tuple(src, dst, 1024 + i as u16, 9))] += 1;
        }
        for c in counts {
            assert!((820..=1228).contains(&c), "uneven spread {:?}", counts);
        }
    }
}
