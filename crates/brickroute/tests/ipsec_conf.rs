//! `conf/ipsec.click` end to end on the shipped sample capture
//! (`conf/samples/router-sample.pcap`, documented frame by frame in
//! `scripts/make-sample-pcap.py`): which frames enter the tunnel, each ESP frame's
//! clear fields written out here by hand, and the tunnel opened again by a second run
//! with `ESPDecap`, whose inner packets must be the sample's with the TTL decremented
//! (checksums from the test's own `inet_checksum`). The ciphertext itself is checked
//! against an independent AES-GCM implementation in the element's unit tests.

mod common;
use common::*;

const SAMPLE: &str = "conf/samples/router-sample.pcap";
const KEY: &str = "0x000102030405060708090a0b0c0d0e0fdeadbeef";

/// The sample frames conf/ipsec.click sends into the tunnel, in order: those to
/// 198.18.0.0/15 that pass the header check and have TTL to spare (UDP, TCP SYN, ping,
/// IP options, 1024 bytes, 1024 bytes with DF, a broadcast source).
const TUNNELLED: [usize; 7] = [0, 1, 2, 9, 10, 11, 13];

/// `brickroute run --no-summary ARGS -h HANDLER...`, which must succeed: what it
/// printed (the handlers).
fn run_ok(args: &[&str], handlers: &[&str]) -> String {
    let mut all = vec!["run", "--no-summary"];
    all.extend_from_slice(args);
    for h in handlers {
        all.extend_from_slice(&["-h", h]);
    }
    let o = brickroute(&all);
    assert!(o.status.success(), "{}", stderr(&o));
    stdout(&o)
}

#[test]
fn the_gateway_encrypts_the_remote_sites_packets_and_the_peer_gets_them_back() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("tunnel.pcap");
    let out_def = format!("OUT={}", out.display());
    let printed = run_ok(
        &["conf/ipsec.click", &out_def],
        &[
            "esp.seq",
            "tunnel.count",
            "clear.count",
            "tohost.count",
            "chk.drops",
            "nonip.count",
        ],
    );
    // Clear: TTL 1 and TTL 0 (their time-exceeded errors to 10.0.0.2), no route, the
    // reply to the LAN host; to the gateway: the ping of 10.0.0.1; bad checksum,
    // version and length dropped by the check; ARP not IP.
    assert_eq!(
        printed,
        "esp.seq:\n7\n\ntunnel.count:\n7\n\nclear.count:\n4\n\ntohost.count:\n1\n\n\
         chk.drops:\n3\n\nnonip.count:\n1\n\n"
    );

    let (_, sample) = read_pcap(&root().join(SAMPLE));
    let (_, esp) = read_pcap(&out);
    assert_eq!(esp.len(), TUNNELLED.len());
    for (i, (rec, &f)) in esp.iter().zip(TUNNELLED.iter()).enumerate() {
        let inner = &sample[f].data[14..];
        let inner_len = usize::from(u16::from_be_bytes([inner[2], inner[3]]));
        let pad = (4 - (inner_len + 2) % 4) % 4;
        let d = &rec.data;
        assert_eq!(d.len(), 14 + 20 + 8 + 8 + inner_len + pad + 2 + 16, "frame {f}");
        // Ethernet to the peer gateway.
        assert_eq!(&d[..14], &[2, 0, 0, 0, 3, 2, 2, 0, 0, 0, 3, 1, 8, 0]);
        // Outer header: TOS 0 as the inner's, the ESP packet's length, DF as the
        // inner's, TTL 64, ESP, 198.51.100.1 -> 198.51.100.2, a valid checksum.
        let h = &d[14..34];
        assert_eq!(h[0..2], [0x45, inner[1]]);
        assert_eq!(usize::from(u16::from_be_bytes([h[2], h[3]])), d.len() - 14);
        assert_eq!(h[6] & 0x40, inner[6] & 0x40, "frame {f}: DF");
        assert_eq!(h[8..10], [64, 50]);
        assert_eq!(h[12..20], [198, 51, 100, 1, 198, 51, 100, 2]);
        assert_eq!(inet_checksum(h), 0);
        // SPI 0x1001, sequence number i + 1, IV the 64-bit sequence number under the
        // run's mask (the first frame's IV is sequence number 1 under it).
        let seq = i as u64 + 1;
        assert_eq!(d[34..38], 0x1001u32.to_be_bytes());
        assert_eq!(d[38..42], (seq as u32).to_be_bytes());
        let iv = |d: &[u8]| u64::from_be_bytes(d[42..50].try_into().unwrap());
        assert_eq!(iv(d) ^ iv(&esp[0].data), seq ^ 1);
        // Encrypted: the inner header is nowhere in the clear.
        assert!(!d.windows(20).any(|w| w == &inner[..20]), "frame {f}");
    }
    assert_eq!(esp[5].data[14 + 6] & 0x40, 0x40, "the DF frame's DF is copied");

    // The peer: ESPDecap with the same association, inner packets to a capture.
    let back = dir.path().join("back.pcap");
    let config = format!(
        "FromDump({}, STOP true) -> Strip(14) -> CheckIPHeader
           -> d :: ESPDecap(0x1001, {KEY}) -> EtherEncap(0x0800, 0:0:0:0:0:1, 0:0:0:0:0:2)
           -> ToDump({});
         d[1] -> refused :: Counter -> Discard;",
        out.display(),
        back.display()
    );
    let printed = run_ok(&["-e", &config], &["d.seq", "refused.count", "d.auth_failures"]);
    assert_eq!(
        printed,
        "d.seq:\n7\n\nrefused.count:\n0\n\nd.auth_failures:\n0\n\n"
    );
    let (_, inner) = read_pcap(&back);
    assert_eq!(inner.len(), TUNNELLED.len());
    for (rec, &f) in inner.iter().zip(TUNNELLED.iter()) {
        // The sample's packet (without its Ethernet padding) with TTL one less.
        let ip = &sample[f].data[14..];
        let len = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
        let mut want = ip[..len].to_vec();
        let ihl = usize::from(want[0] & 15) * 4;
        want[8] -= 1;
        want[10..12].copy_from_slice(&[0, 0]);
        let c = inet_checksum(&want[..ihl]);
        want[10..12].copy_from_slice(&c.to_be_bytes());
        assert_eq!(&rec.data[14..], &want[..], "frame {f}");
    }

    // A peer with another key refuses every packet (and says so in its counters).
    let config = config.replace(KEY, "0x100102030405060708090a0b0c0d0e0fdeadbeef");
    let printed = run_ok(&["-e", &config], &["d.auth_failures", "d.seq"]);
    assert_eq!(printed, "d.auth_failures:\n7\n\nd.seq:\n0\n\n");
}
