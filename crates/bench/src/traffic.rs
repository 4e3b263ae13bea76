//! The traffic model: frame sizes, flows, and frames built from per-flow templates.
//!
//! Frame sizes follow RFC 2544: a size counts the 4-byte Ethernet FCS, which the
//! interface adds, so size 64 puts 60 bytes on a veth and 1518 puts 1514.

use crate::stamp::{Stamp, HEADERS_LEN, STAMP_LEN, STAMP_OFFSET};
use graph::elements::pcap::format as pcap;
use std::net::Ipv4Addr;
use std::path::Path;

/// Smallest and largest frame size (FCS included).
pub const MIN_SIZE: usize = 64;
pub const MAX_SIZE: usize = 1518;
/// Bytes of the FCS, counted in a size but not written.
pub const FCS_LEN: usize = 4;
/// Most flows a stamp can name.
pub const MAX_FLOWS: usize = 1 << 16;

/// The sizes of successive frames: a cycle that the generator walks through.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SizeCycle {
    sizes: Vec<u16>,
}

impl SizeCycle {
    /// Every frame of `size` bytes.
    pub fn fixed(size: usize) -> Result<SizeCycle, String> {
        check_size(size)?;
        Ok(SizeCycle {
            sizes: vec![size as u16],
        })
    }

    /// Simple IMIX: 64, 594 and 1518 byte frames in the ratio 7:4:1 (IP packets of 46,
    /// 576 and 1500 bytes), interleaved so that no size comes in a long run.
    pub fn imix() -> SizeCycle {
        SizeCycle {
            sizes: vec![64, 594, 64, 64, 594, 64, 1518, 64, 594, 64, 64, 594],
        }
    }

    /// The sizes of the frames of a capture file, in file order: each record's original
    /// length plus the FCS, clamped to 64..1518.
    pub fn from_pcap(path: &Path) -> Result<SizeCycle, String> {
        let bytes = std::fs::read(path).map_err(|e| format!("{}: {}", path.display(), e))?;
        let cap = pcap::parse_capture(&bytes).map_err(|e| format!("{}: {}", path.display(), e))?;
        let sizes: Vec<u16> = cap
            .records
            .iter()
            .map(|r| (r.header.len as usize + FCS_LEN).clamp(MIN_SIZE, MAX_SIZE) as u16)
            .collect();
        if sizes.is_empty() {
            return Err(format!("{}: the capture holds no packets", path.display()));
        }
        Ok(SizeCycle { sizes })
    }

    pub fn sizes(&self) -> &[u16] {
        &self.sizes
    }

    /// The size (FCS included) of frame number `i`.
    #[inline]
    pub fn size(&self, i: u64) -> usize {
        self.sizes[(i % self.sizes.len() as u64) as usize] as usize
    }

    /// Mean size, FCS included.
    pub fn mean(&self) -> f64 {
        self.sizes.iter().map(|&s| s as f64).sum::<f64>() / self.sizes.len() as f64
    }
}

fn check_size(size: usize) -> Result<(), String> {
    if !(MIN_SIZE..=MAX_SIZE).contains(&size) {
        return Err(format!(
            "frame size {} out of range: sizes are {}..{} bytes (FCS included)",
            size, MIN_SIZE, MAX_SIZE
        ));
    }
    Ok(())
}

/// An IPv4 network `a.b.c.d/len`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ipv4Net {
    pub addr: Ipv4Addr,
    pub len: u8,
}

impl std::str::FromStr for Ipv4Net {
    type Err = String;
    fn from_str(s: &str) -> Result<Ipv4Net, String> {
        let (a, l) = s.split_once('/').unwrap_or((s, "32"));
        let addr: Ipv4Addr = a
            .parse()
            .map_err(|_| format!("'{}' is not an IPv4 address (expected a.b.c.d[/len])", s))?;
        let len: u8 = l
            .parse()
            .ok()
            .filter(|&l| l <= 32)
            .ok_or_else(|| format!("'{}': prefix length must be 0..32", s))?;
        Ok(Ipv4Net { addr, len })
    }
}

impl Ipv4Net {
    /// Host number `i` of the network, cycling through its usable addresses: all of
    /// them for /31 and /32, otherwise all but the network and broadcast addresses.
    pub fn host(&self, i: u64) -> Ipv4Addr {
        let mask = if self.len == 0 {
            0
        } else {
            u32::MAX << (32 - self.len)
        };
        let base = u32::from(self.addr) & mask;
        let size = 1u64 << (32 - self.len);
        let h = if self.len >= 31 {
            i % size
        } else {
            1 + i % (size - 2)
        };
        Ipv4Addr::from(base.wrapping_add(h as u32))
    }
}

/// Parses `aa:bb:cc:dd:ee:ff`.
pub fn parse_mac(s: &str) -> Result<[u8; 6], String> {
    let parts: Vec<&str> = s.split(':').collect();
    let bad = || format!("'{}' is not a MAC address (expected aa:bb:cc:dd:ee:ff)", s);
    if parts.len() != 6 {
        return Err(bad());
    }
    let mut m = [0u8; 6];
    for (o, p) in m.iter_mut().zip(&parts) {
        if p.is_empty() || p.len() > 2 {
            return Err(bad());
        }
        *o = u8::from_str_radix(p, 16).map_err(|_| bad())?;
    }
    Ok(m)
}

/// What the generator sends: addresses, ports, flows and sizes.
#[derive(Clone, Debug)]
pub struct TrafficSpec {
    pub src_mac: [u8; 6],
    pub dst_mac: [u8; 6],
    pub src: Ipv4Net,
    pub dst: Ipv4Net,
    /// Flow i has UDP source port `src_port + i` (`src_port` from 1024 up), wrapping
    /// from 65535 to 1024 (the
    /// generator's 1024 gives `1024 + i mod 64512`); with source and destination
    /// networks whose host counts both divide 64512 (/32s, for one), flow i + 64512
    /// repeats flow i's 5-tuple.
    pub src_port: u16,
    pub dst_port: u16,
    pub flows: usize,
    pub ttl: u8,
    pub sizes: SizeCycle,
}

/// The headers of one flow, written once; per frame only the lengths, the checksums
/// and the stamp change.
#[derive(Clone, Debug)]
pub struct FlowTemplate {
    headers: [u8; HEADERS_LEN],
    /// Unfolded sum of the IPv4 header words other than total length and checksum.
    ip_sum: u32,
    /// Unfolded sum of the UDP pseudo-header and header words other than the two
    /// lengths and the checksum.
    udp_sum: u32,
}

/// Checks a number of flows (`--flows`): 1 to [`MAX_FLOWS`], the flow ids a stamp holds.
pub fn check_flows(flows: usize) -> Result<(), String> {
    if flows == 0 || flows > MAX_FLOWS {
        return Err(format!("--flows must be 1..{}, not {}", MAX_FLOWS, flows));
    }
    Ok(())
}

/// Every flow's template.
#[derive(Clone, Debug)]
pub struct FlowSet {
    pub flows: Vec<FlowTemplate>,
}

impl FlowSet {
    pub fn new(spec: &TrafficSpec) -> Result<FlowSet, String> {
        check_flows(spec.flows)?;
        if spec.src_port < 1024 {
            return Err(format!(
                "the first UDP source port must be from 1024 up, not {}",
                spec.src_port
            ));
        }
        let flows = (0..spec.flows).map(|i| FlowTemplate::new(spec, i)).collect();
        Ok(FlowSet { flows })
    }
}

impl FlowTemplate {
    fn new(spec: &TrafficSpec, i: usize) -> FlowTemplate {
        let src = spec.src.host(i as u64).octets();
        let dst = spec.dst.host(i as u64).octets();
        let sport = (1024 + (spec.src_port as u64 - 1024 + i as u64) % 64512) as u16;
        let mut h = [0u8; HEADERS_LEN];
        h[0..6].copy_from_slice(&spec.dst_mac);
        h[6..12].copy_from_slice(&spec.src_mac);
        h[12..14].copy_from_slice(&[0x08, 0x00]);
        let ip = &mut h[14..34];
        ip[0] = 0x45;
        // Total length [2..4], identification 0, no fragmentation flags.
        ip[8] = spec.ttl;
        ip[9] = 17;
        ip[12..16].copy_from_slice(&src);
        ip[16..20].copy_from_slice(&dst);
        let udp = &mut h[34..42];
        udp[0..2].copy_from_slice(&sport.to_be_bytes());
        udp[2..4].copy_from_slice(&spec.dst_port.to_be_bytes());
        let ip_sum = packet::checksum::sum(&h[14..34], 0);
        let udp_sum =
            packet::checksum::pseudo_header_v4(src, dst, 17, 0) + sport as u32 + spec.dst_port as u32;
        FlowTemplate {
            headers: h,
            ip_sum,
            udp_sum,
        }
    }

    /// Writes a whole frame of `size` bytes (FCS included, so `size - 4` are written)
    /// into `buf`, which must hold them. Bytes after the stamp are left as they are:
    /// the generator keeps them zero, which the UDP checksum assumes.
    #[inline]
    pub fn write(&self, buf: &mut [u8], size: usize, stamp: &Stamp) -> usize {
        let len = size - FCS_LEN;
        let ip_len = (len - 14) as u16;
        let udp_len = ip_len - 20;
        buf[..HEADERS_LEN].copy_from_slice(&self.headers);
        buf[16..18].copy_from_slice(&ip_len.to_be_bytes());
        let ip_csum = !packet::checksum::fold(self.ip_sum + ip_len as u32);
        buf[24..26].copy_from_slice(&ip_csum.to_be_bytes());
        buf[38..40].copy_from_slice(&udp_len.to_be_bytes());
        // The UDP length is counted twice: in the pseudo-header and in the header.
        let sum = self.udp_sum + 2 * udp_len as u32 + stamp.checksum_sum();
        let mut udp_csum = !packet::checksum::fold(sum);
        if udp_csum == 0 {
            udp_csum = 0xffff; // RFC 768: zero means "no checksum"
        }
        buf[40..42].copy_from_slice(&udp_csum.to_be_bytes());
        let s: &mut [u8; STAMP_LEN] = (&mut buf[STAMP_OFFSET..STAMP_OFFSET + STAMP_LEN])
            .try_into()
            .expect("stamp slice has STAMP_LEN bytes");
        stamp.write(s);
        len
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(flows: usize) -> TrafficSpec {
        TrafficSpec {
            src_mac: [2, 0, 0, 0, 0, 1],
            dst_mac: [2, 0, 0, 0, 0, 2],
            src: "198.18.0.1/32".parse().unwrap(),
            dst: "198.19.0.0/16".parse().unwrap(),
            src_port: 1024,
            dst_port: 9,
            flows,
            ttl: 64,
            sizes: SizeCycle::fixed(64).unwrap(),
        }
    }

    #[test]
    fn sixty_four_byte_frame_is_written_in_full() {
        let set = FlowSet::new(&spec(3)).unwrap();
        let mut buf = [0u8; 60];
        let st = Stamp {
            flow: 2,
            seq: 7,
            sent_ns: 1000,
        };
        assert_eq!(set.flows[2].write(&mut buf, 64, &st), 60);
        let mut want = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 8, 0];
        // IPv4: total length 46, TTL 64, UDP, 198.18.0.1 -> 198.19.0.3 (flow 2: host 3)
        want.extend_from_slice(&[0x45, 0, 0, 46, 0, 0, 0, 0, 64, 17, 0, 0]);
        want.extend_from_slice(&[198, 18, 0, 1, 198, 19, 0, 3]);
        // UDP 1026 -> 9, length 26
        want.extend_from_slice(&[0x04, 0x02, 0, 9, 0, 26, 0, 0]);
        want.extend_from_slice(&[0xB7, 0xAC, 0, 2, 0, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0x03, 0xE8]);
        want.extend_from_slice(&[0, 0]);
        // Checksums are checked below by recomputing them over the frame.
        let mut got = buf.to_vec();
        got[24] = 0;
        got[25] = 0;
        got[40] = 0;
        got[41] = 0;
        assert_eq!(got, want);
        assert_eq!(
            packet::checksum::checksum(&buf[14..34]),
            0,
            "IPv4 header checksum"
        );
        let pseudo = packet::checksum::pseudo_header_v4([198, 18, 0, 1], [198, 19, 0, 3], 17, 26);
        assert_eq!(
            packet::checksum::fold(packet::checksum::sum(&buf[34..60], pseudo)),
            0xffff,
            "UDP checksum"
        );
    }

    #[test]
    fn checksums_stay_right_across_sizes_and_stamps() {
        let set = FlowSet::new(&spec(1000)).unwrap();
        for (flow, size, seq, t) in [
            (0, 64, 0, 0),
            (999, 1518, u32::MAX, u64::MAX),
            (500, 594, 12345, 987654321),
        ] {
            let mut buf = vec![0u8; size - 4];
            let st = Stamp {
                flow: flow as u16,
                seq,
                sent_ns: t,
            };
            let n = set.flows[flow].write(&mut buf, size, &st);
            assert_eq!(n, size - 4);
            assert_eq!(packet::checksum::checksum(&buf[14..34]), 0);
            let ip = &buf[14..34];
            let pseudo = packet::checksum::pseudo_header_v4(
                ip[12..16].try_into().unwrap(),
                ip[16..20].try_into().unwrap(),
                17,
                (n - 34) as u16,
            );
            assert_eq!(
                packet::checksum::fold(packet::checksum::sum(&buf[34..], pseudo)),
                0xffff
            );
            assert_eq!(crate::stamp::parse_frame(&buf, 9), Some(st));
        }
    }

    #[test]
    fn flows_are_distinct_five_tuples() {
        let set = FlowSet::new(&spec(70000.min(MAX_FLOWS))).unwrap();
        let mut seen = std::collections::HashSet::new();
        for f in &set.flows {
            // src ip, dst ip, ports
            let key = (f.headers[26..34].to_vec(), f.headers[34..38].to_vec());
            assert!(seen.insert(key));
        }
        assert!(FlowSet::new(&spec(0)).is_err());
        assert!(FlowSet::new(&spec(MAX_FLOWS + 1)).is_err());
    }

    #[test]
    fn source_ports_wrap_within_1024_to_65535() {
        let spec = TrafficSpec {
            src_port: 65534,
            ..spec(3)
        };
        let ports: Vec<u16> = FlowSet::new(&spec)
            .unwrap()
            .flows
            .iter()
            .map(|f| u16::from_be_bytes([f.headers[34], f.headers[35]]))
            .collect();
        assert_eq!(ports, [65534, 65535, 1024]);
        let low = TrafficSpec {
            src_port: 1023,
            ..spec
        };
        assert_eq!(
            FlowSet::new(&low).unwrap_err(),
            "the first UDP source port must be from 1024 up, not 1023"
        );
    }

    #[test]
    fn network_hosts_skip_network_and_broadcast() {
        let n: Ipv4Net = "198.19.0.0/30".parse().unwrap();
        let hosts: Vec<_> = (0..3).map(|i| n.host(i).to_string()).collect();
        assert_eq!(hosts, ["198.19.0.1", "198.19.0.2", "198.19.0.1"]);
        let one: Ipv4Net = "198.18.0.1".parse().unwrap();
        assert_eq!(one.host(5).to_string(), "198.18.0.1");
        assert!("198.18.0.1/33".parse::<Ipv4Net>().is_err());
        assert!("198.18.0/24".parse::<Ipv4Net>().is_err());
    }

    #[test]
    fn sizes_and_macs() {
        assert!(SizeCycle::fixed(63).is_err());
        assert!(SizeCycle::fixed(1519).is_err());
        let imix = SizeCycle::imix();
        let count = |s| imix.sizes().iter().filter(|&&x| x == s).count();
        assert_eq!((count(64), count(594), count(1518)), (7, 4, 1));
        assert_eq!(imix.size(12), 64);
        assert_eq!(parse_mac("02:b7:00:00:0a:FF").unwrap(), [2, 0xb7, 0, 0, 10, 255]);
        assert!(parse_mac("02:b7:00:00:0a").is_err());
        assert!(parse_mac("02:b7:00:00:0a:1ff").is_err());
    }

    #[test]
    fn sizes_from_pcap_are_record_lengths_plus_fcs_clamped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.pcap");
        let mut f = pcap::encode_file_header(false, 65535, 1).to_vec();
        for len in [60u32, 100, 20, 3000] {
            let cap = len.min(64);
            let ts = packet::Timestamp::new(0, 0);
            f.extend_from_slice(&pcap::encode_record_header(ts, false, cap, len));
            f.extend(std::iter::repeat_n(0u8, cap as usize));
        }
        std::fs::write(&path, &f).unwrap();
        let c = SizeCycle::from_pcap(&path).unwrap();
        assert_eq!(c.sizes(), &[64, 104, 64, 1518]);
        std::fs::write(&path, &f[..24]).unwrap();
        assert!(SizeCycle::from_pcap(&path).unwrap_err().contains("no packets"));
        std::fs::write(&path, b"nope").unwrap();
        assert!(SizeCycle::from_pcap(&path).is_err());
    }
}
