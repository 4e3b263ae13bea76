//! `conf/router6.click` end to end on its shipped sample capture
//! (`conf/samples/router6-sample.pcap`, documented frame by frame in
//! `scripts/make-sample6-pcap.py`). Every expected frame is written out here field by
//! field, with checksums from the test's own `inet_checksum`, following Click 2.x's IPv6
//! elements and RFC 4443: CheckIP6Header (version, length, payload length; trims the
//! Ethernet padding), LookupIP6Route (a gateway changes only the annotation),
//! DecIP6HLIM (hop limit <= 1 to output 1), ICMP6Error (hop limit 255, the quote from
//! the IPv6 header, no error about an ICMPv6 error).

mod common;
use common::*;

use std::path::Path;

const SAMPLE: &str = "conf/samples/router6-sample.pcap";

const HOST: &str = "2001:db8:1::2";
const NET_B_HOST: &str = "2001:db8:2::10";
const IF2_ADDR: &str = "2001:db8:2::1";

/// (next hop's MAC, router's MAC) of each interface, as router6.click configures them:
/// destination first, as in the Ethernet header.
const IF1_MACS: ([u8; 6], [u8; 6]) = ([2, 0, 0, 0, 0, 2], [2, 0, 0, 0, 0, 1]);
const IF2_MACS: ([u8; 6], [u8; 6]) = ([2, 0, 0, 0, 1, 2], [2, 0, 0, 0, 1, 1]);

fn addr(a: &str) -> [u8; 16] {
    a.parse::<std::net::Ipv6Addr>().unwrap().octets()
}

/// The IPv6 pseudo-header (RFC 8200 8.1) for an upper-layer message of `len` bytes.
fn pseudo(src: &str, dst: &str, next: u8, len: usize) -> Vec<u8> {
    let mut v = addr(src).to_vec();
    v.extend_from_slice(&addr(dst));
    v.extend_from_slice(&(len as u32).to_be_bytes());
    v.extend_from_slice(&[0, 0, 0, next]);
    v
}

fn ipv6(src: &str, dst: &str, next: u8, hlim: u8, payload: &[u8]) -> Vec<u8> {
    let mut v = vec![0x60, 0, 0, 0];
    v.extend_from_slice(&(payload.len() as u16).to_be_bytes());
    v.extend_from_slice(&[next, hlim]);
    v.extend_from_slice(&addr(src));
    v.extend_from_slice(&addr(dst));
    v.extend_from_slice(payload);
    v
}

fn udp(src: &str, dst: &str, sport: u16, dport: u16, data: &[u8]) -> Vec<u8> {
    let len = 8 + data.len();
    let mut u = sport.to_be_bytes().to_vec();
    u.extend_from_slice(&dport.to_be_bytes());
    u.extend_from_slice(&(len as u16).to_be_bytes());
    u.extend_from_slice(&[0, 0]);
    u.extend_from_slice(data);
    let mut all = pseudo(src, dst, 17, len);
    all.extend_from_slice(&u);
    let c = match inet_checksum(&all) {
        0 => 0xffff,
        c => c,
    };
    u[6..8].copy_from_slice(&c.to_be_bytes());
    u
}

/// An ICMPv6 message: type, code, checksum over the pseudo-header, four bytes of
/// `rest`, the body.
fn icmp6(src: &str, dst: &str, ty: u8, code: u8, rest: u32, body: &[u8]) -> Vec<u8> {
    let mut m = vec![ty, code, 0, 0];
    m.extend_from_slice(&rest.to_be_bytes());
    m.extend_from_slice(body);
    let mut all = pseudo(src, dst, 58, m.len());
    all.extend_from_slice(&m);
    let c = inet_checksum(&all);
    m[2..4].copy_from_slice(&c.to_be_bytes());
    m
}

fn ether(macs: ([u8; 6], [u8; 6]), ip: &[u8]) -> Vec<u8> {
    let mut v = macs.0.to_vec();
    v.extend_from_slice(&macs.1);
    v.extend_from_slice(&[0x86, 0xdd]);
    v.extend_from_slice(ip);
    v
}

/// The UDP packet from the host to net B's host with hop limit `hlim` and `data`.
fn to_net_b(hlim: u8, data: &[u8]) -> Vec<u8> {
    ipv6(HOST, NET_B_HOST, 17, hlim, &udp(HOST, NET_B_HOST, 1024, 9, data))
}

struct Run {
    stdout: String,
    if1: Vec<Record>,
    if2: Vec<Record>,
}

fn run_router(dir: &Path, handlers: &[&str]) -> Run {
    let (o1, o2) = (dir.join("if1.pcap"), dir.join("if2.pcap"));
    let (d1, d2) = (format!("OUT1={}", o1.display()), format!("OUT2={}", o2.display()));
    let mut args = vec!["run", "conf/router6.click", &d1, &d2];
    for h in handlers {
        args.push("-h");
        args.push(h);
    }
    let o = brickroute(&args);
    assert!(o.status.success(), "stderr: {}", stderr(&o));
    Run {
        stdout: stdout(&o),
        if1: read_pcap(&o1).1,
        if2: read_pcap(&o2).1,
    }
}

fn assert_frame(got: &Record, want: &[u8], what: &str) {
    assert_eq!(got.orig_len as usize, want.len(), "{}: length", what);
    assert_eq!(got.data, want, "{}", what);
}

#[test]
fn hand_built_originals_are_the_sample_records() {
    let (linktype, recs) = read_pcap(&root().join(SAMPLE));
    assert_eq!(linktype, 1);
    assert_eq!(recs.len(), 13);
    let host_macs = ([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2]);
    assert_eq!(recs[0].data, ether(host_macs, &to_net_b(64, b"hello net B")));
    assert_eq!(recs[3].data, ether(host_macs, &to_net_b(1, b"hlim one")));
    // 54 bytes of no-next-header packet, padded to the 60-byte Ethernet minimum.
    let mut padded = ether(host_macs, &ipv6(HOST, NET_B_HOST, 59, 64, &[]));
    padded.extend_from_slice(&[0; 6]);
    assert_eq!(recs[9].data, padded);
}

#[test]
fn if2_gets_the_forwarded_packets_with_the_hop_limit_one_lower() {
    let dir = tempfile::tempdir().unwrap();
    let run = run_router(dir.path(), &[]);
    assert_eq!(run.if2.len(), 3, "if2 records: {:?}", run.if2);
    // Record 0, and record 1 through the gateway 2001:db8:2::3 (the route's gateway
    // changes the annotation, not the packet); both keep their input timestamps.
    assert_frame(
        &run.if2[0],
        &ether(IF2_MACS, &to_net_b(63, b"hello net B")),
        "record 0",
    );
    assert_eq!((run.if2[0].sec, run.if2[0].usec), (1_700_000_000, 0));
    let via = "2001:db8:3::7";
    let ip = ipv6(HOST, via, 17, 63, &udp(HOST, via, 1024, 9, b"via gateway"));
    assert_frame(&run.if2[1], &ether(IF2_MACS, &ip), "record 1");
    assert_eq!((run.if2[1].sec, run.if2[1].usec), (1_700_000_001, 1000));
    // Record 9: its Ethernet padding trimmed by CheckIP6Header.
    let ip = ipv6(HOST, NET_B_HOST, 59, 63, &[]);
    assert_frame(&run.if2[2], &ether(IF2_MACS, &ip), "record 9");
}

#[test]
fn if1_gets_time_exceeded_errors_and_the_reply() {
    let dir = tempfile::tempdir().unwrap();
    let run = run_router(dir.path(), &[]);
    assert_eq!(run.if1.len(), 3, "if1 records: {:?}", run.if1);
    // Records 3 and 4, hop limits 1 and 0: time exceeded (3/0) from if2's address,
    // made with hop limit 255 and routed to the host through if1's DecIP6HLIM (254),
    // quoting the packet as DecIP6HLIM got it. Their timestamps are the time
    // ICMP6Error made them, so they are not compared.
    for (rec, hlim, data) in [(0, 1, &b"hlim one"[..]), (1, 0, &b"hlim zero"[..])] {
        let msg = icmp6(IF2_ADDR, HOST, 3, 0, 0, &to_net_b(hlim, data));
        let ip = ipv6(IF2_ADDR, HOST, 58, 254, &msg);
        assert_frame(&run.if1[rec], &ether(IF1_MACS, &ip), "time exceeded");
    }
    // Record 11: the reply to the host.
    let ip = ipv6(
        NET_B_HOST,
        HOST,
        17,
        63,
        &udp(NET_B_HOST, HOST, 9, 1024, b"reply to host"),
    );
    assert_frame(&run.if1[2], &ether(IF1_MACS, &ip), "record 11");
    assert_eq!((run.if1[2].sec, run.if1[2].usec), (1_700_000_011, 11000));
}

#[test]
fn handlers_count_what_was_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let run = run_router(
        dir.path(),
        &[
            "chk.drops",
            "tohost.count",
            "nonip.count",
            "if1/cnt.count",
            "if2/cnt.count",
        ],
    );
    // Three bad headers (version 4, truncated, payload length past the frame); one
    // packet for the router; one IPv4 frame. Not counted anywhere: the ICMPv6 error
    // whose hop limit ran out (no error about an error) and the packet with no route.
    assert_eq!(
        run.stdout,
        "chk.drops:\n3\n\ntohost.count:\n1\n\nnonip.count:\n1\n\nif1/cnt.count:\n3\n\nif2/cnt.count:\n3\n\n"
    );
}

#[test]
fn the_shipped_sample_is_what_its_script_writes() {
    assert_script_writes("scripts/make-sample6-pcap.py", SAMPLE);
}
