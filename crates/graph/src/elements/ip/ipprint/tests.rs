use super::*;
use crate::elements::ip::testutil::ip_header;
use crate::error::Landmark;
use crate::testing::{build_error, Harness};
use packet::{Packet, Timestamp};
use std::path::Path;

fn spec(config: &str) -> IPPrintSpec {
    let lm = Landmark::unknown();
    let cx = BuildContext {
        name: "e",
        class: "IPPrint",
        landmark: &lm,
        ninputs: 1,
        noutputs: 1,
        base_dir: Path::new("."),
        workers: 1,
        peers: Default::default(),
    };
    configure(&mut Args::new(config), &cx).unwrap_or_else(|e| panic!("{}", e))
}

/// The line IPPrint writes for `p` with `config`.
fn line(config: &str, p: &Packet) -> String {
    let mut s = String::new();
    spec(config).format.line(&mut s, p);
    s
}

/// `config` without the timestamp (on by default, as in Click).
fn plain(config: &str, p: &Packet) -> String {
    line(&format!("{}, TIMESTAMP false", config), p)
}

fn ip_packet(bytes: &[u8]) -> Packet {
    let mut p = Packet::from_slice(bytes);
    p.set_network_header(0, 20);
    p
}

const A: [u8; 4] = [10, 0, 0, 1];
const B: [u8; 4] = [10, 0, 0, 2];

/// A TCP segment from A:1234 to B:80 with the given fields and payload.
fn tcp(seq: u32, ack: u32, off_words: u8, flags: u8, win: u16, urg: u16, payload: &[u8]) -> Packet {
    let hl = usize::from(off_words) * 4;
    let mut t = vec![0x04, 0xd2, 0x00, 0x50];
    t.extend_from_slice(&seq.to_be_bytes());
    t.extend_from_slice(&ack.to_be_bytes());
    t.extend_from_slice(&[off_words << 4, flags]);
    t.extend_from_slice(&win.to_be_bytes());
    t.extend_from_slice(&[0, 0]);
    t.extend_from_slice(&urg.to_be_bytes());
    t.resize(hl.max(20), 0);
    t.extend_from_slice(payload);
    let mut b = ip_header(0, 20 + t.len() as u16, 0x1234, 0x4000, 64, 6, A, B);
    b.extend_from_slice(&t);
    ip_packet(&b)
}

fn udp(ulen: u16, payload: &[u8], frag: u16) -> Vec<u8> {
    let mut b = ip_header(0, 28 + payload.len() as u16, 0x1234, frag, 64, 17, A, B);
    b.extend_from_slice(&[0, 53, 0x04, 0x00]);
    b.extend_from_slice(&ulen.to_be_bytes());
    b.extend_from_slice(&[0, 0]);
    b.extend_from_slice(payload);
    b
}

fn icmp(ty: u8, code: u8, rest: [u8; 4]) -> Packet {
    let mut b = ip_header(0, 28, 1, 0, 64, 1, A, B);
    b.extend_from_slice(&[ty, code, 0, 0]);
    b.extend_from_slice(&rest);
    ip_packet(&b)
}

#[test]
fn tcp_lines() {
    let mut syn = tcp(1000, 0, 6, 0x02, 65535, 0, b"");
    syn.anno_mut().timestamp = Timestamp::new(1000, 5_000);
    assert_eq!(
        line("in", &syn),
        "in: 1000.000005: 10.0.0.1.1234 > 10.0.0.2.80: S 1000:1000(0) win 65535"
    );
    assert_eq!(
        plain("", &tcp(1000, 77, 5, 0x18, 512, 0, b"hello")),
        "10.0.0.1.1234 > 10.0.0.2.80: P 1000:1005(5) ack 77 win 512"
    );
    assert_eq!(
        plain("", &tcp(5, 9, 5, 0x10, 100, 0, b"")),
        "10.0.0.1.1234 > 10.0.0.2.80: . ack 9 win 100"
    );
    assert_eq!(
        plain("", &tcp(7, 1, 5, 0x31, 0, 3, b"")),
        "10.0.0.1.1234 > 10.0.0.2.80: FU 7:7(0) ack 1 win 0 urg 3"
    );
    assert_eq!(
        plain("", &tcp(u32::MAX, 0, 5, 0xc4, 1, 0, b"ab")),
        "10.0.0.1.1234 > 10.0.0.2.80: RWE 4294967295:1(2) win 1"
    );
}

#[test]
fn udp_icmp_and_other_protocols() {
    assert_eq!(
        plain("", &ip_packet(&udp(13, b"hello", 0))),
        "10.0.0.1.53 > 10.0.0.2.1024: udp 5"
    );
    assert_eq!(
        plain("", &icmp(8, 0, [0x01, 0x02, 0x00, 0x03])),
        "10.0.0.1 > 10.0.0.2: icmp echo (258, 3)"
    );
    assert_eq!(
        plain("SWAP true", &icmp(0, 0, [0x01, 0x02, 0x00, 0x03])),
        "10.0.0.1 > 10.0.0.2: icmp echo-reply (513, 768)"
    );
    assert_eq!(
        plain("", &icmp(3, 3, [0; 4])),
        "10.0.0.1 > 10.0.0.2: icmp unreachable code 3"
    );
    assert_eq!(
        plain("", &icmp(42, 0, [0; 4])),
        "10.0.0.1 > 10.0.0.2: icmp type 42"
    );
    let mut gre = ip_header(0, 30, 1, 0, 64, 47, A, B);
    gre.extend_from_slice(&[0; 10]);
    assert_eq!(plain("", &ip_packet(&gre)), "10.0.0.1 > 10.0.0.2: ip-proto-47 10");
}

#[test]
fn fragments_and_truncated_headers() {
    // First fragment: 16 bytes of a 108-byte UDP datagram.
    let first = udp(108, &[0; 8], 0x2000);
    assert_eq!(
        plain("", &ip_packet(&first)),
        "10.0.0.1.53 > 10.0.0.2.1024: udp 100 (frag 4660:16@0+)"
    );
    // A later fragment at 1480 bytes (185 units of 8), the last one.
    let later = udp(108, &[0; 8], 185);
    assert_eq!(
        plain("", &ip_packet(&later)),
        "10.0.0.1 > 10.0.0.2: udp frag 4660:16@1480"
    );
    let mut short_tcp = ip_header(0, 30, 1, 0, 64, 6, A, B);
    short_tcp.extend_from_slice(&[0; 10]);
    assert_eq!(plain("", &ip_packet(&short_tcp)), "10.0.0.1 > 10.0.0.2: [|tcp]");
    // The IP length cuts the transport part short, whatever follows.
    let mut cut = udp(13, b"hello", 0);
    cut[3] = 27;
    crate::elements::ip::testutil::fix_ip_cksum(&mut cut);
    assert_eq!(plain("", &ip_packet(&cut)), "10.0.0.1 > 10.0.0.2: [|udp]");
    assert_eq!(plain("x", &Packet::from_slice(&udp(13, b"hello", 0))), "x: [|ip]");
    assert_eq!(plain("", &ip_packet(&[0x45; 19])), "[|ip]");
    let mut v6 = udp(13, b"hello", 0);
    v6[0] = 0x65;
    assert_eq!(plain("", &ip_packet(&v6)), "bad IP version 6");
    v6[0] = 0x44;
    assert_eq!(plain("", &ip_packet(&v6)), "bad IP header length 16");
}

#[test]
fn header_fields_annotations_and_ether() {
    let b = udp(8, b"", 0);
    let mut with_udp = ip_header(0x10, 28, 0x1234, 0, 33, 17, A, B);
    with_udp.extend_from_slice(&b[20..]);
    let mut p = ip_packet(&with_udp);
    p.anno_mut().set_paint(3);
    p.anno_mut().set_u32_at(packet::anno::AGGREGATE_ANNO_OFFSET, 7);
    assert_eq!(
        plain(
            "ID true, TTL true, TOS true, LENGTH true, AGGREGATE true, PAINT true",
            &p
        ),
        "#7 paint 3 id 4660 ttl 33 tos 16 length 28 10.0.0.1.53 > 10.0.0.2.1024: udp 0"
    );
    let mut frame = vec![0, 1, 2, 3, 4, 5, 0xa, 0xb, 0xc, 0xd, 0xe, 0xf, 0x08, 0x00];
    frame.extend_from_slice(&b);
    let mut p = Packet::from_slice(&frame);
    p.set_mac_header(0);
    p.set_network_header(14, 20);
    assert_eq!(
        plain("e, ETHER true", &p),
        "e: 0A-0B-0C-0D-0E-0F > 00-01-02-03-04-05: 10.0.0.1.53 > 10.0.0.2.1024: udp 0"
    );
}

#[test]
fn contents_and_payload_dumps() {
    let p = ip_packet(&udp(13, b"hello", 0));
    assert_eq!(
        plain("CONTENTS hex, MAXLENGTH 10", &p),
        "10.0.0.1.53 > 10.0.0.2.1024: udp 5 | 45000021 12340000 4011"
    );
    assert_eq!(
        plain("PAYLOAD ascii", &p),
        "10.0.0.1.53 > 10.0.0.2.1024: udp 5 | hello"
    );
    assert_eq!(
        plain("PAYLOAD true, NBYTES 2", &p),
        "10.0.0.1.53 > 10.0.0.2.1024: udp 5 | 6865"
    );
    let t = tcp(1, 0, 6, 0x08, 1, 0, b"0123456789\x00");
    assert_eq!(
        plain("PAYLOAD ASCII, MAXLENGTH -1", &t),
        "10.0.0.1.1234 > 10.0.0.2.80: P 1:12(11) win 1 | 01234567 89."
    );
    // The dump stops at the IP length: link padding is not shown.
    let mut padded = udp(9, b"z", 0);
    padded.extend_from_slice(&[0xee; 4]);
    let dump = plain("CONTENTS true", &ip_packet(&padded));
    assert!(dump.ends_with(" 00090000 7a") && !dump.contains("ee"), "{}", dump);
    assert_eq!(plain("CONTENTS false", &p), "10.0.0.1.53 > 10.0.0.2.1024: udp 5");
}

#[test]
fn passes_packets_unchanged_writes_outfile_and_active_handler() {
    let dir = std::env::temp_dir().join(format!("ipprint-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("out.txt");
    let config = format!("\"lbl\", TIMESTAMP false, OUTFILE {}", file.display());
    let mut h = Harness::new(&IPPrintClass, &config, 1, 1);
    let bytes = udp(13, b"hello", 0);
    let out = h.push(0, vec![ip_packet(&bytes), icmp(8, 0, [0, 1, 0, 2])]);
    assert_eq!(out[0][0].data(), &bytes[..]);
    assert_eq!(out[0].len(), 2);
    h.write("active", "false").unwrap();
    assert_eq!(h.read("active"), "false");
    assert_eq!(h.push(0, vec![ip_packet(&bytes)])[0].len(), 1);
    assert_eq!(h.write("active", "sometimes").unwrap_err(), "expected boolean");
    let text = std::fs::read_to_string(&file).unwrap();
    assert_eq!(
        text,
        "lbl: 10.0.0.1.53 > 10.0.0.2.1024: udp 5\nlbl: 10.0.0.1 > 10.0.0.2: icmp echo (1, 2)\n"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bad_arguments() {
    let err = |c: &str| build_error(&IPPrintClass, c, 1, 1);
    assert_eq!(
        err("CONTENTS hex, PAYLOAD hex"),
        "e :: IPPrint: specify at most one of CONTENTS and PAYLOAD"
    );
    // Both given, one of them off: accepted, as Click accepts it.
    for ok in [
        "CONTENTS hex, PAYLOAD false",
        "CONTENTS false, PAYLOAD ascii",
        "CONTENTS none, PAYLOAD none",
    ] {
        crate::testing::build(&IPPrintClass, ok, 1, 1).unwrap_or_else(|e| panic!("{ok}: {e}"));
    }
    assert_eq!(
        err("PAYLOAD binary"),
        "e :: IPPrint: bad PAYLOAD value 'BINARY'; should be 'NONE', 'HEX', or 'ASCII'"
    );
    assert_eq!(err("x, y"), "e :: IPPrint: too many arguments");
    assert_eq!(err("TTL 64"), "e :: IPPrint: TTL expects bool");
    assert!(err("OUTFILE /nonexistent-dir/x").starts_with("e :: IPPrint: OUTFILE: /nonexistent-dir/x: "));
}
