//! `conf/router.click` end to end on the shipped sample capture
//! (`conf/samples/router-sample.pcap`, documented frame by frame in
//! `scripts/make-sample-pcap.py`). Every expected frame is written out here field by
//! field, with checksums from the test's own `inet_checksum`, following what Click 2.x's
//! elements do: CheckIPHeader (no BADSRC list: 255.255.255.255 passes; trims the
//! Ethernet padding), DecIPTTL (TTL <= 1 to output 1), IPFragmenter (first fragment keeps
//! the header, later ones copy only copied-flag options), ICMPError (TTL 200, IP ID from
//! one counter shared by every ICMPError, quotes the packet from its IP header up to a
//! 576-byte error, next-hop MTU from PMTU: the link MTU, 576).

mod common;
use common::*;

use std::path::Path;

const SAMPLE: &str = "conf/samples/router-sample.pcap";

const HOST: [u8; 4] = [10, 0, 0, 2];
const NET_A_HOST: [u8; 4] = [198, 18, 1, 10];
const NET_B_HOST: [u8; 4] = [198, 19, 2, 20];
const IF2_ADDR: [u8; 4] = [198, 18, 0, 1];
const IF3_ADDR: [u8; 4] = [198, 19, 0, 1];

/// (router's MAC, next hop's MAC) of each interface, as router.click configures them.
const IF1_MACS: ([u8; 6], [u8; 6]) = ([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2]);
const IF2_MACS: ([u8; 6], [u8; 6]) = ([2, 0, 0, 0, 1, 1], [2, 0, 0, 0, 1, 2]);
const IF3_MACS: ([u8; 6], [u8; 6]) = ([2, 0, 0, 0, 2, 1], [2, 0, 0, 0, 2, 2]);

const UDP: u8 = 17;
const TCP: u8 = 6;
const ICMP: u8 = 1;

/// Fills in bytes 10..12 of an IPv4 header (any length) with its checksum.
fn with_ip_checksum(mut h: Vec<u8>) -> Vec<u8> {
    h[10] = 0;
    h[11] = 0;
    let c = inet_checksum(&h);
    h[10..12].copy_from_slice(&c.to_be_bytes());
    h
}

/// An option-less IPv4 header, TOS 0: the fields as given, checksum computed here.
fn ip_header(
    total_len: u16,
    id: u16,
    flags_frag: u16,
    ttl: u8,
    proto: u8,
    src: [u8; 4],
    dst: [u8; 4],
) -> Vec<u8> {
    let mut h = vec![0x45, 0x00];
    h.extend_from_slice(&total_len.to_be_bytes());
    h.extend_from_slice(&id.to_be_bytes());
    h.extend_from_slice(&flags_frag.to_be_bytes());
    h.extend_from_slice(&[ttl, proto, 0, 0]);
    h.extend_from_slice(&src);
    h.extend_from_slice(&dst);
    with_ip_checksum(h)
}

/// A UDP datagram with its checksum over the pseudo-header (0 is sent as 0xffff).
fn udp(src: [u8; 4], dst: [u8; 4], sport: u16, dport: u16, data: &[u8]) -> Vec<u8> {
    let len = (8 + data.len()) as u16;
    let mut u = Vec::new();
    u.extend_from_slice(&sport.to_be_bytes());
    u.extend_from_slice(&dport.to_be_bytes());
    u.extend_from_slice(&len.to_be_bytes());
    u.extend_from_slice(&[0, 0]);
    u.extend_from_slice(data);
    let mut pseudo = Vec::new();
    pseudo.extend_from_slice(&src);
    pseudo.extend_from_slice(&dst);
    pseudo.extend_from_slice(&[0, UDP]);
    pseudo.extend_from_slice(&len.to_be_bytes());
    pseudo.extend_from_slice(&u);
    let c = match inet_checksum(&pseudo) {
        0 => 0xffff,
        c => c,
    };
    u[6..8].copy_from_slice(&c.to_be_bytes());
    u
}

/// An ICMP message: type, code, checksum, the 4-byte "rest of header", body.
fn icmp(ty: u8, code: u8, rest: [u8; 4], body: &[u8]) -> Vec<u8> {
    let mut m = vec![ty, code, 0, 0];
    m.extend_from_slice(&rest);
    m.extend_from_slice(body);
    let c = inet_checksum(&m);
    m[2..4].copy_from_slice(&c.to_be_bytes());
    m
}

fn cat(parts: &[&[u8]]) -> Vec<u8> {
    parts.concat()
}

/// An Ethernet II frame carrying IPv4, as EtherEncap(0x0800, SRC, DST) builds it.
fn ether(macs: ([u8; 6], [u8; 6]), ip: &[u8]) -> Vec<u8> {
    let (src, dst) = macs;
    cat(&[&dst, &src, &[0x08, 0x00], ip])
}

/// The UDP payload of the sample's two big datagrams: bytes 0..=255, four times.
fn big_data() -> Vec<u8> {
    (0..1024).map(|i| (i % 256) as u8).collect()
}

// ---- The sample's IP packets as the router receives them (before any TTL change) ----

/// Record 4: UDP "ttl one", TTL 1, ID 5.
fn orig_ttl_one() -> Vec<u8> {
    let u = udp(HOST, NET_A_HOST, 1024, 9, b"ttl one");
    cat(&[&ip_header(20 + 15, 5, 0, 1, UDP, HOST, NET_A_HOST), &u])
}

/// Record 5: UDP "ttl zero", TTL 0, ID 6.
fn orig_ttl_zero() -> Vec<u8> {
    let u = udp(HOST, NET_A_HOST, 1024, 9, b"ttl zero");
    cat(&[&ip_header(20 + 16, 6, 0, 0, UDP, HOST, NET_A_HOST), &u])
}

// ---- Running the router ----

struct Run {
    stdout: String,
    files: [Vec<u8>; 3],
    if1: Vec<Record>,
    if2: Vec<Record>,
    if3: Vec<Record>,
}

fn run_router(dir: &Path, threads: &str, handlers: &[&str]) -> Run {
    let outs: Vec<String> = (1..=3)
        .map(|i| {
            dir.join(format!("if{}-t{}.pcap", i, threads))
                .display()
                .to_string()
        })
        .collect();
    let defs: Vec<String> = outs
        .iter()
        .enumerate()
        .map(|(i, p)| format!("OUT{}={}", i + 1, p))
        .collect();
    let mut args = vec!["run", "--threads", threads, "conf/router.click"];
    args.extend(defs.iter().map(|s| s.as_str()));
    for h in handlers {
        args.push("-h");
        args.push(h);
    }
    let o = brickroute(&args);
    assert!(o.status.success(), "stderr: {}", stderr(&o));
    let mut recs = Vec::new();
    for p in &outs {
        let (linktype, r) = read_pcap(Path::new(p));
        assert_eq!(linktype, 1, "Ethernet captures");
        recs.push(r);
    }
    let if3 = recs.pop().unwrap();
    let if2 = recs.pop().unwrap();
    let if1 = recs.pop().unwrap();
    Run {
        stdout: stdout(&o),
        files: [
            std::fs::read(&outs[0]).unwrap(),
            std::fs::read(&outs[1]).unwrap(),
            std::fs::read(&outs[2]).unwrap(),
        ],
        if1,
        if2,
        if3,
    }
}

/// The input capture's timestamp for record `i` (the sample writes 1700000000 + i s,
/// 1000 * i us); forwarded packets keep it.
fn input_time(i: u32) -> (u32, u32) {
    (1_700_000_000 + i, 1000 * i)
}

fn time(r: &Record) -> (u32, u32) {
    (r.sec, r.usec)
}

fn assert_frame(got: &Record, want: &[u8], what: &str) {
    assert_eq!(got.orig_len as usize, want.len(), "{}: length", what);
    assert_eq!(got.data, want, "{}", what);
}

#[test]
fn hand_built_originals_are_the_sample_records() {
    // The quoted packets below are built from the sample script's description; check
    // them against the capture itself (input, not router output).
    let (_, recs) = read_pcap(&root().join(SAMPLE));
    assert_eq!(recs.len(), 16);
    assert_eq!(&recs[4].data[14..14 + 35], &orig_ttl_one()[..]);
    assert_eq!(&recs[5].data[14..14 + 36], &orig_ttl_zero()[..]);
    // Both are padded to the 60-byte Ethernet minimum in the capture.
    assert_eq!(recs[4].data.len(), 60);
    assert_eq!(recs[5].data.len(), 60);
}

#[test]
fn if2_gets_forwarded_udp_echo_and_broadcast_source() {
    let dir = tempfile::tempdir().unwrap();
    let run = run_router(dir.path(), "1", &[]);
    assert_eq!(run.if2.len(), 3, "if2 records: {:?}", run.if2);

    // Record 0: UDP "hello net A", TTL 64 -> 63 with the checksum updated, new MACs,
    // and the Ethernet padding (the input frame is 60 bytes) gone: 14 + 39 bytes.
    let u = udp(HOST, NET_A_HOST, 1024, 9, b"hello net A");
    let ip = cat(&[&ip_header(20 + 19, 1, 0, 63, UDP, HOST, NET_A_HOST), &u]);
    let want = ether(IF2_MACS, &ip);
    assert_eq!(want.len(), 53);
    assert_eq!(
        &want[..26],
        &[
            0x02, 0, 0, 0, 1, 2, 0x02, 0, 0, 0, 1, 1, 0x08, 0x00, // Ethernet
            0x45, 0x00, 0x00, 0x27, 0x00, 0x01, 0x00, 0x00, 63, 17, want[24], want[25],
        ][..],
        "hand-built header layout"
    );
    assert_frame(&run.if2[0], &want, "if2 record 0: UDP hello net A");
    assert_eq!(time(&run.if2[0]), input_time(0));

    // Record 2: ICMP echo "ping", ID 3.
    let echo = icmp(8, 0, [0, 7, 0, 1], b"ping");
    let ip = cat(&[&ip_header(20 + 12, 3, 0, 63, ICMP, HOST, NET_A_HOST), &echo]);
    assert_frame(&run.if2[1], &ether(IF2_MACS, &ip), "if2 record 1: ICMP echo");
    assert_eq!(time(&run.if2[1]), input_time(2));

    // Record 13: source 255.255.255.255. Click 2.x's CheckIPHeader has no bad source
    // addresses unless BADSRC/INTERFACES is given, so it is forwarded.
    let bcast = [255, 255, 255, 255];
    let u = udp(bcast, NET_A_HOST, 1024, 9, b"bcast src");
    let ip = cat(&[&ip_header(20 + 17, 13, 0, 63, UDP, bcast, NET_A_HOST), &u]);
    assert_frame(&run.if2[2], &ether(IF2_MACS, &ip), "if2 record 2: bcast src");
    assert_eq!(time(&run.if2[2]), input_time(13));
}

#[test]
fn if3_gets_tcp_options_and_two_fragments() {
    let dir = tempfile::tempdir().unwrap();
    let run = run_router(dir.path(), "1", &[]);
    assert_eq!(run.if3.len(), 4, "if3 records: {:?}", run.if3);

    // Record 1: TCP SYN 40000 -> 80, seq 1000, window 65535, ID 2.
    let mut tcp = vec![
        0x9c, 0x40, 0x00, 0x50, // ports 40000 -> 80
        0x00, 0x00, 0x03, 0xe8, // seq 1000
        0x00, 0x00, 0x00, 0x00, // ack 0
        0x50, 0x02, 0xff, 0xff, // data offset 5, SYN, window 65535
        0x00, 0x00, 0x00, 0x00, // checksum (below), urgent pointer
    ];
    let mut pseudo = cat(&[&HOST, &NET_B_HOST, &[0, TCP, 0, 20]]);
    pseudo.extend_from_slice(&tcp);
    let c = inet_checksum(&pseudo);
    tcp[16..18].copy_from_slice(&c.to_be_bytes());
    let ip = cat(&[&ip_header(40, 2, 0, 63, TCP, HOST, NET_B_HOST), &tcp]);
    assert_frame(&run.if3[0], &ether(IF3_MACS, &ip), "if3 record 0: TCP SYN");
    assert_eq!(time(&run.if3[0]), input_time(1));

    // Record 9: record-route option (7, 7, 4, 0 0 0 0) + end-of-options, IHL 7, kept as
    // is (no element of router.click processes options; it is small: not fragmented).
    let u = udp(HOST, NET_B_HOST, 1024, 9, b"options");
    let hdr = with_ip_checksum(vec![
        0x47, 0x00, 0x00, 0x2b, // IHL 7, total length 28 + 15 = 43
        0x00, 0x0a, 0x00, 0x00, // ID 10
        63, UDP, 0, 0, // TTL 63 (was 64)
        10, 0, 0, 2, // source
        198, 19, 2, 20, // destination
        7, 7, 4, 0, 0, 0, 0, 0, // record route, empty; end of options
    ]);
    let ip = cat(&[&hdr, &u]);
    assert_frame(&run.if3[1], &ether(IF3_MACS, &ip), "if3 record 1: options");
    assert_eq!(time(&run.if3[1]), input_time(9));

    // Record 10: 20 + 8 + 1024 = 1052 bytes, ID 11, fragmented for MTU 576: each
    // fragment carries (576 - 20) & ~7 = 552 bytes at most. Fragment 1: UDP header +
    // data[0..544], MF; fragment 2: data[544..1024] at offset 552 / 8 = 69, no MF. No
    // options, so both headers are 20 bytes. Both keep the input's timestamp (Click's
    // copy_annotations).
    let data = big_data();
    let whole = udp(HOST, NET_B_HOST, 1024, 9, &data);
    assert_eq!(whole.len(), 1032);
    let f1 = cat(&[
        &ip_header(20 + 552, 11, 0x2000, 63, UDP, HOST, NET_B_HOST),
        &whole[..552],
    ]);
    let f2 = cat(&[
        &ip_header(20 + 480, 11, 69, 63, UDP, HOST, NET_B_HOST),
        &data[544..],
    ]);
    assert_eq!(f1.len(), 572);
    assert_eq!(f2.len(), 500);
    assert_frame(&run.if3[2], &ether(IF3_MACS, &f1), "if3 record 2: fragment 1");
    assert_frame(&run.if3[3], &ether(IF3_MACS, &f2), "if3 record 3: fragment 2");
    assert_eq!(time(&run.if3[2]), input_time(10));
    assert_eq!(time(&run.if3[3]), input_time(10));
}

#[test]
fn if1_gets_icmp_errors_and_the_reply() {
    let dir = tempfile::tempdir().unwrap();
    let run = run_router(dir.path(), "1", &[]);
    assert_eq!(run.if1.len(), 4, "if1 records: {:?}", run.if1);

    // ICMP errors: made by ICMPError with TTL 200, routed to 10.0.0.2 and through if1's
    // DecIPTTL (199). IP IDs 1, 2, 3 from ICMPError's one counter. The quoted part is the
    // packet as ICMPError got it, from its IP header to its end (Ethernet padding already
    // trimmed by CheckIPHeader), up to 576 - 28 bytes. Their timestamps are the time
    // ICMPError made them, so they are not compared.

    // Record 4, TTL 1: time exceeded (11/0) from if2's address.
    let quoted = orig_ttl_one();
    let msg = icmp(11, 0, [0; 4], &quoted);
    let ip = cat(&[&ip_header(20 + 8 + 35, 1, 0, 199, ICMP, IF2_ADDR, HOST), &msg]);
    assert_frame(&run.if1[0], &ether(IF1_MACS, &ip), "if1 record 0: TTL 1 error");

    // Record 5, TTL 0: the same, IP ID 2.
    let quoted = orig_ttl_zero();
    let msg = icmp(11, 0, [0; 4], &quoted);
    let ip = cat(&[&ip_header(20 + 8 + 36, 2, 0, 199, ICMP, IF2_ADDR, HOST), &msg]);
    assert_frame(&run.if1[1], &ether(IF1_MACS, &ip), "if1 record 1: TTL 0 error");

    // Record 11, DF and 1052 bytes for MTU 576: IPFragmenter's output 1 -> ICMPError
    // (unreachable, needfrag) from if3's address. The packet reached IPFragmenter after
    // if3's DecIPTTL, so the quoted header has TTL 63 and its updated checksum. The
    // error is capped at 576 bytes: 548 quoted bytes. router.click gives PMTU $mtu, so
    // the next-hop MTU field (RFC 1191) is the link's 576.
    let r = &run.if1[2];
    assert_eq!(r.data.len(), 14 + 576);
    let e = &r.data[14..];
    assert_eq!(&r.data[..14], &ether(IF1_MACS, &[])[..], "Ethernet header");
    assert_eq!(e[0], 0x45, "version 4, IHL 5");
    assert_eq!(e[1], 0, "TOS");
    assert_eq!(u16::from_be_bytes([e[2], e[3]]), 576, "total length");
    assert_eq!(u16::from_be_bytes([e[4], e[5]]), 3, "IP ID");
    assert_eq!(u16::from_be_bytes([e[6], e[7]]), 0, "flags/offset");
    assert_eq!(e[8], 199, "TTL");
    assert_eq!(e[9], ICMP, "protocol");
    assert_eq!(inet_checksum(&e[..20]), 0, "IP header checksum");
    assert_eq!(&e[12..16], &IF3_ADDR, "source");
    assert_eq!(&e[16..20], &HOST, "destination");
    assert_eq!((e[20], e[21]), (3, 4), "unreachable, needfrag");
    assert_eq!(inet_checksum(&e[20..]), 0, "ICMP checksum");
    assert_eq!(&e[24..26], &[0, 0], "unused");
    assert_eq!(&e[26..28], &576u16.to_be_bytes(), "next-hop MTU: PMTU");
    let data = big_data();
    let df_udp = udp(HOST, NET_B_HOST, 1024, 9, &data);
    let df_hdr = ip_header(1052, 12, 0x4000, 63, UDP, HOST, NET_B_HOST);
    assert_eq!(&e[28..48], &df_hdr[..], "quoted IP header");
    let quoted = cat(&[&df_hdr, &df_udp]);
    let msg = icmp(3, 4, [0, 0, 0x02, 0x40], &quoted[..548]);
    let ip = cat(&[&ip_header(576, 3, 0, 199, ICMP, IF3_ADDR, HOST), &msg]);
    assert_frame(r, &ether(IF1_MACS, &ip), "if1 record 2: needfrag error");

    // Record 15: the reply to 10.0.0.2, forwarded with TTL 63 and its input timestamp.
    let u = udp(NET_B_HOST, HOST, 9, 1024, b"reply to host");
    let ip = cat(&[&ip_header(20 + 21, 15, 0, 63, UDP, NET_B_HOST, HOST), &u]);
    assert_frame(&run.if1[3], &ether(IF1_MACS, &ip), "if1 record 3: reply");
    assert_eq!(time(&run.if1[3]), input_time(15));
}

#[test]
fn handlers_after_the_run_match_click() {
    let dir = tempfile::tempdir().unwrap();
    let run = run_router(
        dir.path(),
        "1",
        &[
            "src.count",
            "chk.drops",
            "nonip.count",
            "tohost.count",
            "if1/cnt.count",
            "if2/cnt.count",
            "if3/cnt.count",
            "rt.table",
        ],
    );
    // Click's IPRoute::unparse with tabs: the prefix and a tab, one more tab if that
    // was under 17 characters; the gateway ("-": none) and a tab, one more if under 9;
    // the port. Routes in configuration order.
    let table = "10.0.0.1/32\t\t-\t\t0\n\
                 198.18.0.1/32\t\t-\t\t0\n\
                 198.19.0.1/32\t\t-\t\t0\n\
                 10.0.0.0/8\t\t-\t\t1\n\
                 198.18.0.0/16\t\t-\t\t2\n\
                 198.19.0.0/16\t\t-\t\t3\n";
    let want = format!(
        "src.count:\n16\n\n\
         chk.drops:\n3\n\n\
         nonip.count:\n1\n\n\
         tohost.count:\n1\n\n\
         if1/cnt.count:\n4\n\n\
         if2/cnt.count:\n3\n\n\
         if3/cnt.count:\n4\n\n\
         rt.table:\n{}\n",
        table
    );
    assert_eq!(run.stdout, want);
}

/// Whether a frame is an ICMP error the router made (its timestamp is its creation time).
fn is_router_icmp_error(f: &[u8]) -> bool {
    f.len() >= 14 + 21 && f[14 + 9] == ICMP && matches!(f[14 + 20], 3 | 11)
}

#[test]
fn two_workers_write_the_same_captures_as_one() {
    let dir = tempfile::tempdir().unwrap();
    let one = run_router(dir.path(), "1", &["src.count"]);
    let two = run_router(dir.path(), "2", &["src.count"]);
    assert_eq!(one.stdout, "16\n");
    assert_eq!(two.stdout, "16\n");
    // Forwarded packets keep their input timestamps: whole files identical.
    assert_eq!(one.files[1], two.files[1], "if2 capture");
    assert_eq!(one.files[2], two.files[2], "if3 capture");
    // if1 holds ICMP errors stamped when they were made: same records, same order,
    // same bytes; only those records' timestamps may differ.
    let strip = |recs: &[Record]| -> Vec<Record> {
        recs.iter()
            .map(|r| {
                let mut r = r.clone();
                if is_router_icmp_error(&r.data) {
                    r.sec = 0;
                    r.usec = 0;
                }
                r
            })
            .collect()
    };
    assert_eq!(one.if1.len(), 4);
    assert_eq!(
        one.if1.iter().filter(|r| is_router_icmp_error(&r.data)).count(),
        3
    );
    assert_eq!(strip(&one.if1), strip(&two.if1));
    assert_eq!(one.if2, two.if2);
    assert_eq!(one.if3, two.if3);
}

#[test]
fn the_shipped_sample_is_what_its_script_writes() {
    assert_script_writes("scripts/make-sample-pcap.py", SAMPLE);
}
