//! `conf/natpath.click` end to end on the shipped sample capture
//! (`conf/samples/router-sample.pcap`, documented frame by frame in
//! `scripts/make-sample-pcap.py`): which frames leave translated, and each one's
//! fields against the sample frame it came from, written out here: the public source
//! address, the source port (or echo identifier) kept where it was free, the TTL one
//! less, everything else as it was, and checksums that verify by the test's own
//! `inet_checksum`.

mod common;
use common::*;

const SAMPLE: &str = "conf/samples/router-sample.pcap";
const PUBLIC: [u8; 4] = [192, 0, 2, 1];

/// The sample frames that leave translated, in order: UDP, TCP SYN, ping, IP options,
/// 1024 bytes, 1024 bytes with DF, a broadcast source, no route (the default route
/// leads out here), the reply to the host.
const TRANSLATED: [usize; 9] = [0, 1, 2, 9, 10, 11, 13, 14, 15];

/// The source port (identifier, for the ping) each translated frame should leave with:
/// its own where the public address has it free towards that destination, `None`
/// where a port of 1024-65535 is drawn at random (the broadcast source's 1024 is taken
/// towards 198.18.1.10:9 by frame 0's flow; the reply's source port 9 is outside the
/// range).
const PORTS: [Option<u16>; 9] = [
    Some(1024),
    Some(40000),
    Some(7),
    Some(1024),
    Some(1024),
    Some(1024),
    None,
    Some(1024),
    None,
];

/// The checksum over `ip`'s transport segment and its pseudo-header (0 when valid).
fn transport_checksum(ip: &[u8]) -> u16 {
    let hlen = usize::from(ip[0] & 0x0f) * 4;
    let total = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
    let seg = &ip[hlen..total];
    let mut pseudo = Vec::new();
    pseudo.extend_from_slice(&ip[12..20]);
    pseudo.extend_from_slice(&[0, ip[9]]);
    pseudo.extend_from_slice(&(seg.len() as u16).to_be_bytes());
    pseudo.extend_from_slice(seg);
    inet_checksum(&pseudo)
}

#[test]
fn the_inside_hosts_flows_leave_with_the_public_address() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("nat.pcap");
    let o = brickroute(&[
        "run",
        "--no-summary",
        "conf/natpath.click",
        &format!("OUT={}", out.display()),
        "-h",
        "translated.count",
        "-h",
        "untranslated.count",
        "-h",
        "expired.count",
        "-h",
        "tohost.count",
        "-h",
        "chk.drops",
        "-h",
        "nonip.count",
        "-h",
        "rw.nmappings",
        "-h",
        "pr.nmappings",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    // TTL 1 and 0 expire; the ping of 10.0.0.1 is for the gateway; bad checksum,
    // version and length are dropped by the check; ARP is not IP. Six flows through
    // the rewriter (UDP: frame 0's, 9-11's, 13's, 14's, 15's; TCP: frame 1's) and
    // one ping.
    assert_eq!(
        stdout(&o),
        "translated.count:\n9\n\nuntranslated.count:\n0\n\nexpired.count:\n2\n\n\
         tohost.count:\n1\n\nchk.drops:\n3\n\nnonip.count:\n1\n\n\
         rw.nmappings:\n6\n\npr.nmappings:\n1\n\n"
    );

    let (_, sample) = read_pcap(&root().join(SAMPLE));
    let (_, sent) = read_pcap(&out);
    assert_eq!(sent.len(), TRANSLATED.len());
    let mut drawn = Vec::new();
    for ((rec, &f), want_port) in sent.iter().zip(TRANSLATED.iter()).zip(PORTS) {
        let (d, s) = (&rec.data, &sample[f].data);
        // The IP packet whole, the sample's Ethernet padding gone (CheckIPHeader trims
        // it).
        let total = usize::from(u16::from_be_bytes([s[16], s[17]]));
        assert_eq!(d.len(), 14 + total, "frame {f}");
        let s = &s[..14 + total];
        // Ethernet to the ISP's router.
        assert_eq!(&d[..14], &[2, 0, 0, 0, 3, 2, 2, 0, 0, 0, 3, 1, 8, 0], "frame {f}");
        let (ip, orig) = (&d[14..], &s[14..]);
        let hlen = usize::from(ip[0] & 0x0f) * 4;
        // The header as sent but for the TTL, the checksum and the source address.
        assert_eq!(ip[..8], orig[..8], "frame {f}");
        assert_eq!(ip[8], orig[8] - 1, "frame {f}: TTL");
        assert_eq!(ip[9], orig[9], "frame {f}");
        assert_eq!(ip[12..16], PUBLIC, "frame {f}: source");
        assert_eq!(ip[16..hlen], orig[16..hlen], "frame {f}: destination, options");
        assert_eq!(inet_checksum(&ip[..hlen]), 0, "frame {f}: IP checksum");
        let (l4, orig4) = (&ip[hlen..], &orig[hlen..]);
        let port = match ip[9] {
            // UDP and TCP: the source port, the rest as sent but the checksum.
            17 | 6 => {
                let at = if ip[9] == 17 { 6 } else { 16 };
                assert_eq!(l4[2..at], orig4[2..at], "frame {f}");
                assert_eq!(l4[at + 2..], orig4[at + 2..], "frame {f}");
                assert_eq!(transport_checksum(ip), 0, "frame {f}: transport checksum");
                u16::from_be_bytes([l4[0], l4[1]])
            }
            // The echo request: the identifier; its checksum over the message.
            1 => {
                assert_eq!(l4[..2], [8, 0], "frame {f}");
                assert_eq!(l4[6..], orig4[6..], "frame {f}");
                assert_eq!(inet_checksum(l4), 0, "frame {f}: ICMP checksum");
                u16::from_be_bytes([l4[4], l4[5]])
            }
            p => panic!("frame {f}: protocol {p}"),
        };
        match want_port {
            Some(p) => assert_eq!(port, p, "frame {f}"),
            None => {
                assert!(port >= 1024, "frame {f}: port {port}");
                drawn.push(port);
            }
        }
    }
    // The broadcast source could not keep 1024 towards 198.18.1.10:9.
    assert_ne!(drawn[0], 1024);
}
