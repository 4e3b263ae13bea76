//! Tests of both elements: every field on hand-built packets, the header, reading,
//! refused text, round trips, and Click's own testies.

use super::fields::{parse_list, Field};
use super::from::FromIPSummaryDumpClass;
use super::to::ToIPSummaryDumpClass;
use super::write::{summary, LineOptions};
use crate::element::{TaskStatus, WorkerInfo};
use crate::testing::{build_error, Harness};
use packet::anno::{AGGREGATE_ANNO_OFFSET, EXTRA_PACKETS_ANNO_OFFSET};
use packet::{Packet, Timestamp};
use proptest::prelude::*;

const PLAIN: LineOptions = LineOptions {
    bad_packets: false,
    careful_trunc: true,
    extra_length: true,
};

const BAD: LineOptions = LineOptions {
    bad_packets: true,
    careful_trunc: true,
    extra_length: true,
};

/// A packet of `bytes` whose network header is at the start, `hl` bytes long.
fn ip_packet(bytes: &[u8], hl: usize) -> Packet {
    let mut p = Packet::from_slice(bytes);
    p.set_network_header(0, hl);
    p
}

/// The line `fields` make of `p` (and the `!bad` line before it, if any).
fn line(p: &Packet, fields: &str, opts: &LineOptions) -> String {
    let fields = parse_list(fields).unwrap();
    let (mut text, mut bad) = (Vec::new(), Vec::new());
    summary(p, &fields, opts, &mut text, &mut bad);
    bad.extend_from_slice(&text);
    String::from_utf8(bad).unwrap()
}

/// TCP from 10.0.0.1:1234 to 10.0.0.2:80, DF, TOS 0x2d, TTL 64, ID 0x1234, checksum
/// field 0xbeef, seq 1000, ack 2000, SYN+ACK, window 8192, payload "abcd".
const TCP: [u8; 44] = [
    0x45, 0x2d, 0, 44, 0x12, 0x34, 0x40, 0, 64, 6, 0xbe, 0xef, 10, 0, 0, 1, 10, 0, 0, 2, //
    0x04, 0xd2, 0, 80, 0, 0, 0x03, 0xe8, 0, 0, 0x07, 0xd0, 0x50, 0x12, 0x20, 0, 0, 0, 0, 0, //
    b'a', b'b', b'c', b'd',
];

const ALL_FIELDS: &str = "timestamp ts_sec ts_usec ip_src ip_dst ip_len ip_proto ip_id ip_frag \
    ip_fragoff ip_tos ip_ttl ip_hl ip_dscp ip_ecn ip_sum sport dport tcp_seq tcp_ack tcp_off \
    tcp_flags tcp_window tcp_urp tcp_opt udp_len icmp_type icmp_code icmp_type_name payload_len \
    count paint direction aggregate ip_opt ip_capture_len wire_len payload";

#[test]
fn every_field_of_a_tcp_packet() {
    let mut p = ip_packet(&TCP, 20);
    p.anno_mut().timestamp = Timestamp::new(1, 500_000_000);
    p.anno_mut().set_paint(7);
    p.anno_mut().set_u32_at(AGGREGATE_ANNO_OFFSET, 99);
    assert_eq!(
        line(&p, ALL_FIELDS, &PLAIN),
        "1.500000 1 500000 10.0.0.1 10.0.0.2 44 T 4660 ! 0! 45 64 20 11 ect1 48879 1234 80 \
         1000 2000 20 SA 8192 0 . - - - - 4 1 7 7 99 . 44 44 \"abcd\"\n"
    );
}

#[test]
fn every_field_of_a_udp_first_fragment() {
    // MF set at offset 0; payload "x\ny" with a quote-worthy newline; ECN CE.
    let udp = [
        0x45, 0x03, 0, 31, 0, 7, 0x20, 0, 1, 17, 0, 0, 192, 168, 1, 1, 224, 0, 0, 251, //
        0, 53, 0x14, 0xe9, 0, 11, 0, 0, b'x', b'\n', b'y',
    ];
    let mut p = ip_packet(&udp, 20);
    p.anno_mut().set_paint(1);
    p.anno_mut().set_u32_at(EXTRA_PACKETS_ANNO_OFFSET, 2);
    assert_eq!(
        line(&p, ALL_FIELDS, &PLAIN),
        "0.000000 0 0 192.168.1.1 224.0.0.251 31 U 7 F 0+ 3 1 20 0 ce 0 53 5353 - - - - - - - \
         11 - - - 3 3 1 < 0 . 31 31 \"x\\ny\"\n"
    );
}

#[test]
fn every_field_of_an_icmp_echo() {
    let icmp = [
        0x45, 0, 0, 28, 0, 0, 0, 0, 255, 1, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, //
        8, 0, 0xf7, 0xff, 0, 0, 0, 0,
    ];
    let p = ip_packet(&icmp, 20);
    assert_eq!(
        line(
            &p,
            "ip_proto sport dport tcp_flags udp_len icmp_type icmp_code icmp_type_name payload_len ip_ecn",
            &PLAIN
        ),
        "I - - - - 8 0 echo 8 no\n"
    );
    // An unnamed type is written as its number.
    let mut other = icmp;
    other[20] = 200;
    assert_eq!(line(&ip_packet(&other, 20), "icmp_type_name", &PLAIN), "200\n");
    // Another protocol is a number.
    let mut gre = icmp;
    gre[9] = 47;
    assert_eq!(line(&ip_packet(&gre, 20), "ip_proto icmp_type", &PLAIN), "47 -\n");
}

#[test]
fn a_later_fragment_has_no_transport_fields() {
    // Offset 185 (1480 bytes), no MF: the last fragment of a TCP datagram.
    let mut frag = TCP;
    frag[6] = 0;
    frag[7] = 185;
    let p = ip_packet(&frag, 20);
    assert_eq!(
        line(&p, "ip_frag ip_fragoff sport dport tcp_seq tcp_flags payload_len payload", &PLAIN),
        "f 1480 - - - - 24 \"\\004\\322\\000P\\000\\000\\003\\350\\000\\000\\007\\320P\\022 \\000\\000\\000\\000\\000abcd\"\n"
    );
    // A plain packet: '.', offset 0.
    let mut plain = TCP;
    plain[6] = 0;
    assert_eq!(
        line(&ip_packet(&plain, 20), "ip_frag ip_fragoff", &PLAIN),
        ". 0\n"
    );
}

#[test]
fn a_truncated_packet_writes_dashes_for_what_is_cut_and_says_why() {
    // The IP length says 60; the capture holds 30 bytes (10 of the TCP header).
    let mut cut = TCP[..30].to_vec();
    cut[3] = 60;
    let p = ip_packet(&cut, 20);
    let fields = "ip_len ip_capture_len sport dport tcp_seq tcp_ack tcp_flags payload_len payload";
    assert_eq!(line(&p, fields, &PLAIN), "60 30 1234 80 1000 - - 20 -\n");
    assert_eq!(
        line(&p, fields, &BAD),
        "!bad truncated IP missing 30\n60 30 1234 80 1000 - - 20 -\n"
    );
    // With the rest given as extra length, the IP length is no longer missing; the
    // TCP header still is (Click compares with the extra length that is left once
    // the IP length accounts for it: none).
    let mut q = ip_packet(&cut, 20);
    q.anno_mut().set_extra_length(30);
    assert_eq!(
        line(&q, "ip_len tcp_ack", &BAD),
        "!bad truncated TCP header\n60 -\n"
    );
    // Cut inside the IP header: the IP length's check comes first.
    let p = ip_packet(&TCP[..14], 20);
    assert_eq!(
        line(&p, "ip_src ip_ttl", &BAD),
        "!bad truncated IP missing 30\n- 64\n"
    );
    let mut p = ip_packet(&TCP[..14], 20);
    p.anno_mut().set_extra_length(30);
    assert_eq!(
        line(&p, "ip_src ip_ttl", &BAD),
        "!bad truncated IP header capture\n- 64\n"
    );
    // A bad version makes the packet one without IP.
    let mut v6 = TCP;
    v6[0] = 0x65;
    assert_eq!(
        line(&ip_packet(&v6, 20), "ip_src ip_len", &BAD),
        "!bad IP version 6\n- 44\n"
    );
}

#[test]
fn a_packet_without_network_header_has_only_lengths_and_annotations() {
    let mut p = Packet::from_slice(b"hello");
    p.anno_mut().set_extra_length(5);
    assert_eq!(
        line(&p, "ip_src ip_len payload_len wire_len payload count", &BAD),
        "!bad no IP header\n- 10 10 5 \"hello\" 1\n"
    );
}

#[test]
fn padding_past_the_ip_length_is_left_out() {
    // 44 bytes of IP in a 50-byte packet (an Ethernet minimum, say).
    let mut padded = TCP.to_vec();
    padded.extend_from_slice(&[0xee; 6]);
    let p = ip_packet(&padded, 20);
    assert_eq!(
        line(&p, "ip_len ip_capture_len payload_len payload wire_len", &PLAIN),
        "44 44 4 \"abcd\" 50\n"
    );
}

#[test]
fn tcp_flags_are_clicks_letters() {
    let flags = |byte12: u8, byte13: u8| {
        let mut t = TCP;
        t[32] = byte12;
        t[33] = byte13;
        line(&ip_packet(&t, 20), "tcp_flags", &PLAIN)
    };
    assert_eq!(flags(0x50, 0), ".\n");
    assert_eq!(flags(0x50, 0x18), "PA\n");
    assert_eq!(flags(0x50, 0x10), "A\n");
    assert_eq!(flags(0x50, 0xff), "FSRPAUEC\n");
    assert_eq!(flags(0x51, 0x01), "FN\n");
}

fn temp_path(dir: &tempfile::TempDir, name: &str) -> String {
    dir.path().join(name).to_str().unwrap().to_string()
}

fn read(path: &str) -> String {
    String::from_utf8(std::fs::read(path).unwrap()).unwrap()
}

/// Builds `text` as a router of one worker, runs it until its sources are done, and
/// cleans up (files flushed).
fn run_router(text: &str) -> crate::router::RouterSpec {
    let spec = crate::testing::router(text).unwrap_or_else(|e| panic!("{}", e));
    let mut g = spec.instantiate(WorkerInfo { index: 0, count: 1 });
    while !g.run_sources().all_done {}
    drop(g);
    spec.cleanup();
    spec
}

#[test]
fn the_header_names_the_fields_and_the_banner() {
    let dir = tempfile::tempdir().unwrap();
    let out = temp_path(&dir, "out");
    let mut h = Harness::new(
        &ToIPSummaryDumpClass,
        &format!(
            "{}, CONTENTS src dst 'tcp seq' \"payload len\", BANNER \"a \\\"dump\\\"\"",
            out
        ),
        1,
        1,
    );
    let passed = h.push(0, vec![ip_packet(&TCP, 20)]);
    assert_eq!(passed[0].len(), 1, "the packet goes on");
    h.spec.cleanup();
    assert_eq!(
        read(&out),
        "!IPSummaryDump 1.3\n!creator \"a \\\"dump\\\"\"\n!data ip_src ip_dst tcp_seq payload_len\n\
         10.0.0.1 10.0.0.2 1000 4\n"
    );
    assert_eq!(h.read("count"), "1");

    // The default fields; VERBOSE adds the host and the time; HEADER false drops all.
    let out2 = temp_path(&dir, "out2");
    let h = Harness::new(&ToIPSummaryDumpClass, &format!("{}, VERBOSE true", out2), 1, 0);
    h.spec.cleanup();
    let text = read(&out2);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "!IPSummaryDump 1.3");
    assert!(lines[1].starts_with("!host "), "{}", text);
    assert!(
        lines[2].starts_with("!runtime ") && lines[2].ends_with(')'),
        "{}",
        text
    );
    assert_eq!(lines[3], "!data timestamp ip_src");
    let out3 = temp_path(&dir, "out3");
    let mut h = Harness::new(
        &ToIPSummaryDumpClass,
        &format!("{}, HEADER false, FIELDS ip_id", out3),
        1,
        0,
    );
    h.push(0, vec![ip_packet(&TCP, 20)]);
    h.spec.cleanup();
    assert_eq!(read(&out3), "4660\n");
}

#[test]
fn multipacket_writes_a_line_per_packet_sharing_the_length() {
    let dir = tempfile::tempdir().unwrap();
    let run = |fields: &str| {
        let out = temp_path(&dir, "out");
        let mut h = Harness::new(
            &ToIPSummaryDumpClass,
            &format!("{}, FIELDS {}, MULTIPACKET true, HEADER false", out, fields),
            1,
            0,
        );
        // Three packets of 44 bytes and 104 more.
        let mut p = ip_packet(&TCP, 20);
        p.anno_mut().set_u32_at(EXTRA_PACKETS_ANNO_OFFSET, 2);
        p.anno_mut().set_extra_length(104);
        h.push(0, vec![p]);
        h.spec.cleanup();
        (read(&out), h.read("count"))
    };
    // Each line's share of the extra length goes: lengths come from the IP header,
    // and Click keeps extra length only past an IP length of 65535.
    assert_eq!(
        run("wire_len ip_len"),
        ("44 44\n44 44\n44 44\n".to_string(), "3".to_string())
    );
    // With the count among the fields, one line says how many.
    assert_eq!(run("wire_len count"), ("44 3\n".to_string(), "1".to_string()));
}

#[test]
fn configuration_errors_name_the_problem() {
    let e = build_error(&ToIPSummaryDumpClass, "/tmp/x, FIELDS src frob", 1, 0);
    assert_eq!(e, "e :: ToIPSummaryDump: unknown content type 'frob'");
    let e = build_error(&ToIPSummaryDumpClass, "/tmp/x, BINARY true", 1, 0);
    assert!(e.contains("BINARY"), "{}", e);
    let e = build_error(&FromIPSummaryDumpClass, "CONTENTS 'ip src' frob", 0, 1);
    assert_eq!(e, "e :: FromIPSummaryDump: unknown content type 'frob'");
    let e = build_error(&FromIPSummaryDumpClass, "STOP true", 0, 1);
    assert_eq!(e, "e :: FromIPSummaryDump: FILENAME: required argument missing");
    let e = build_error(&FromIPSummaryDumpClass, "/nonexistent/dump", 0, 1);
    assert_eq!(
        e,
        "e :: FromIPSummaryDump: /nonexistent/dump: No such file or directory"
    );
    let e = build_error(&FromIPSummaryDumpClass, "x, DATA \"!data src\"", 0, 1);
    assert_eq!(e, "e :: FromIPSummaryDump: FILENAME and DATA conflict");
}

/// Runs a FromIPSummaryDump on `data` (DATA) with `keywords` until it is done.
fn packets_of(data: &str, keywords: &str) -> (Harness, Vec<Packet>) {
    let config = format!("DATA \"{}\"{}", data.replace('"', "\\\""), keywords);
    let mut h = Harness::new(&FromIPSummaryDumpClass, &config, 0, 1);
    let mut got = Vec::new();
    loop {
        let (st, mut outs) = h.run();
        // One packet a run; a batch at most of a MULTIPACKET line's.
        let most = if keywords.contains("MULTIPACKET") {
            packet::MAX_BATCH
        } else {
            1
        };
        assert!(outs[0].len() <= most, "{} packets in a run", outs[0].len());
        got.append(&mut outs[0]);
        if st == TaskStatus::Done {
            break;
        }
    }
    (h, got)
}

#[test]
fn reading_builds_headers_with_clicks_defaults() {
    let (h, pkts) = packets_of(
        "!IPSummaryDump 1.3\n!data timestamp ip_src ip_dst sport dport ip_len tcp_flags\n\
         # a comment\n\n1.000002 1.0.0.1 2.0.0.2 10 20 60 SA\n",
        "",
    );
    assert_eq!(pkts.len(), 1);
    let p = &pkts[0];
    assert_eq!(p.anno().timestamp, Timestamp::new(1, 2000));
    // IP: version 4, length 60, TTL 100, TCP (the default), no checksum (CHECKSUM false).
    // TCP: ports 10 and 20, offset 5, SYN+ACK; the other 20 bytes are extra length.
    assert_eq!(
        p.data(),
        &[
            0x45, 0, 0, 60, 0, 0, 0, 0, 100, 6, 0, 0, 1, 0, 0, 1, 2, 0, 0, 2, //
            0, 10, 0, 20, 0, 0, 0, 0, 0, 0, 0, 0, 0x50, 0x12, 0, 0, 0, 0, 0, 0,
        ][..]
    );
    assert_eq!(p.anno().extra_length(), 20);
    assert_eq!(p.network_header_offset(), Some(0));
    assert_eq!(p.transport_header_offset(), Some(20));
    assert_eq!(p.anno().dst_ip(), [2, 0, 0, 2]);
    assert_eq!(h.read("count"), "1");
    assert_eq!(h.read("bad_lines"), "0");
}

#[test]
fn checksum_fills_the_packet_and_sets_checksums() {
    let (_, pkts) = packets_of(
        "!data src dst proto ip_len payload_len\n!proto U\n1.0.0.1 2.0.0.2 U 36 8\n\
         1.0.0.1 2.0.0.2 I - -\n",
        ", CHECKSUM true",
    );
    let udp = pkts[0].data();
    assert_eq!(udp.len(), 36, "zero-filled to the IP length");
    // IP checksum over the header: 0x45 00 0024 0000 0000 6411 .... sum.
    assert!(packet::checksum::verify20(udp[..20].try_into().unwrap()));
    assert_eq!(&udp[24..26], &[0, 16], "UDP length from the IP length");
    let pseudo = packet::checksum::pseudo_header_v4([1, 0, 0, 1], [2, 0, 0, 2], 17, 16);
    assert_eq!(
        packet::checksum::fold(packet::checksum::sum(&udp[20..], pseudo)),
        0xffff
    );
    // ICMP: an 8-byte header, its checksum over it.
    let icmp = pkts[1].data();
    assert_eq!(icmp.len(), 28);
    assert_eq!(icmp[9], 1);
    assert_eq!(packet::checksum::checksum(&icmp[20..]), 0);
}

#[test]
fn unparsable_fields_are_skipped_and_lines_without_any_are_counted() {
    let (h, pkts) = packets_of(
        "!data src dst ip_ttl\n1.0.0.1 nonsense 300\nfoo bar baz\n1.0.0.3 2.0.0.3 7\n",
        "",
    );
    assert_eq!(pkts.len(), 2);
    // The first line kept its source; the destination and TTL were refused.
    assert_eq!(&pkts[0].data()[8..20], &[100, 6, 0, 0, 1, 0, 0, 1, 0, 0, 0, 0]);
    assert_eq!(pkts[1].data()[8], 7);
    assert_eq!(h.read("bad_lines"), "1");
    assert_eq!(h.read("bad_fields"), "5");
    // No !data: every line is refused.
    let (h, pkts) = packets_of("1.0.0.1 2.0.0.2\n", "");
    assert!(pkts.is_empty());
    assert_eq!(h.read("bad_lines"), "1");
    // An unknown field in the file's !data is ignored (Click warns).
    let (_, pkts) = packets_of("!data src frob ttl\n1.0.0.1 x 9\n", "");
    assert_eq!(pkts[0].data()[8], 9);
}

#[test]
fn contents_without_a_data_line_and_stop() {
    let dir = tempfile::tempdir().unwrap();
    let input = temp_path(&dir, "in");
    std::fs::write(&input, "1.0.0.1 5\n1.0.0.2 6\n").unwrap();
    let mut h = Harness::new(
        &FromIPSummaryDumpClass,
        &format!("{}, CONTENTS src ttl, STOP true", input),
        0,
        1,
    );
    assert_eq!(h.read("filesize"), "20");
    assert_eq!(h.run().1[0].len(), 1);
    assert_eq!(h.run().1[0].len(), 1);
    assert!(!h.stop_requested());
    assert_eq!(h.run().0, TaskStatus::Done);
    assert!(h.stop_requested());
    assert_eq!(h.read("filepos"), "20");
    assert_eq!(h.read("active"), "true");
}

#[test]
fn active_false_holds_the_packets_until_written_true() {
    let mut h = Harness::new(
        &FromIPSummaryDumpClass,
        "DATA \"!data src\n1.0.0.1\", ACTIVE false",
        0,
        1,
    );
    assert_eq!(h.run().0, TaskStatus::Idle);
    h.write("active", "true").unwrap();
    assert_eq!(h.run().1[0].len(), 1);
    assert_eq!(h.write("active", "maybe").unwrap_err(), "type mismatch");
    h.write("stop", "").unwrap();
    h.run();
    assert!(h.stop_requested());
}

#[test]
fn flowid_gives_addresses_ports_and_protocol_and_binary_ends_the_reading() {
    let (h, pkts) = packets_of(
        "!flowid 1.0.0.1 10 2.0.0.2 20 U\n!data ip_ttl\n9\n!binary\n\0\0\0\x08abcd\n",
        "",
    );
    assert_eq!(pkts.len(), 1);
    assert_eq!(
        pkts[0].data(),
        &[
            0x45, 0, 0, 28, 0, 0, 0, 0, 9, 17, 0, 0, 1, 0, 0, 1, 2, 0, 0, 2, //
            0, 10, 0, 20, 0, 8, 0, 0,
        ][..]
    );
    assert_eq!(h.read("bad_lines"), "0");
    // The keyword does the same for lines without a !flowid; '-' leaves a part 0.
    let (_, pkts) = packets_of("!data ip_ttl\n9\n", ", FLOWID 1.0.0.1 - 2.0.0.2 20 T");
    assert_eq!(
        &pkts[0].data()[9..24],
        &[6, 0, 0, 1, 0, 0, 1, 2, 0, 0, 2, 0, 0, 0, 20]
    );
    assert_eq!(
        build_error(&FromIPSummaryDumpClass, "DATA x, FLOWID 1.0.0.1 10", 0, 1),
        "e :: FromIPSummaryDump: bad !flowid specification"
    );
}

#[test]
fn multipacket_lines_make_count_packets() {
    let (_, pkts) = packets_of("!data src ip_len count\n1.0.0.1 200 3\n", ", MULTIPACKET true");
    assert_eq!(pkts.len(), 3);
    // 40 bytes made, 200 in all: 66 and 66 (IP length; the bytes past 40 are extra
    // length), the last what is left, 68.
    let lens: Vec<(u16, u32)> = pkts
        .iter()
        .map(|p| {
            (
                u16::from_be_bytes([p.data()[2], p.data()[3]]),
                p.anno().extra_length(),
            )
        })
        .collect();
    assert_eq!(lens, vec![(66, 26), (66, 26), (68, 28)]);
    // A share below the bytes made: each packet is as long as the line's.
    let (_, pkts) = packets_of("!data src ip_len count\n1.0.0.1 100 3\n", ", MULTIPACKET true");
    assert!(pkts
        .iter()
        .all(|p| p.data()[3] == 40 && p.anno().extra_length() == 0));
}

/// A line standing for billions of packets is read a batch a run, holding one packet
/// (not a copy per packet), and the `stop` handler ends it between two batches.
#[test]
fn a_huge_multipacket_line_goes_a_batch_a_run_and_stops() {
    let mut h = Harness::new(
        &FromIPSummaryDumpClass,
        "DATA \"!data ip_src count\n1.2.3.4 4000000000\n1.2.3.5 1\n\", MULTIPACKET true",
        0,
        1,
    );
    let mut made = 0;
    for _ in 0..5 {
        let (st, outs) = h.run();
        assert_eq!(st, TaskStatus::Busy);
        assert!(!outs[0].is_empty() && outs[0].len() <= packet::MAX_BATCH);
        for p in &outs[0] {
            // 40 bytes each (IP and TCP headers; the line gives no length), standing
            // for one packet.
            assert_eq!(
                p.data(),
                &[
                    0x45, 0, 0, 40, 0, 0, 0, 0, 100, 6, 0, 0, 1, 2, 3, 4, 0, 0, 0, 0, //
                    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x50, 0, 0, 0, 0, 0, 0, 0,
                ][..]
            );
            assert_eq!(p.anno().u32_at(EXTRA_PACKETS_ANNO_OFFSET), 0);
            assert_eq!(p.anno().extra_length(), 0);
        }
        made += outs[0].len();
    }
    assert_eq!(h.read("count"), made.to_string());
    h.write("stop", "").unwrap();
    let (st, outs) = h.run();
    assert!(h.stop_requested());
    assert_eq!(st, TaskStatus::Idle);
    assert!(outs[0].is_empty());
}

#[test]
fn a_dump_reads_back_into_the_same_lines() {
    let dir = tempfile::tempdir().unwrap();
    let input = temp_path(&dir, "in");
    let output = temp_path(&dir, "out");
    let fields = "timestamp ip_src ip_dst ip_len ip_proto ip_id ip_frag ip_fragoff ip_tos ip_ttl \
                  sport dport tcp_seq tcp_ack tcp_flags tcp_window udp_len icmp_type icmp_code \
                  payload_len paint aggregate";
    let lines = "1.000001 10.0.0.1 10.0.0.2 1500 T 7 ! 0! 16 64 1234 80 1 2 SA 512 - - - 1460 3 9\n\
                 2.000000 10.0.0.3 10.0.0.4 36 U 8 . 0 0 1 53 53 - - - - 16 - - 8 0 0\n\
                 3.500000 10.0.0.5 10.0.0.6 28 I 9 . 0 0 255 - - - - - - - 8 0 8 1 0\n\
                 4.000000 10.0.0.7 10.0.0.8 100 T 10 f 800 0 2 - - - - - - - - - 80 0 0\n\
                 5.000000 10.0.0.9 10.0.0.10 40 47 11 . 0 0 3 - - - - - - - - - 20 0 0\n";
    std::fs::write(&input, format!("!IPSummaryDump 1.3\n!data {}\n{}", fields, lines)).unwrap();
    run_router(&format!(
        "FromIPSummaryDump({}, STOP true) -> ToIPSummaryDump({}, FIELDS {})",
        input, output, fields
    ));
    let want_fields: Vec<&str> = fields.split_whitespace().collect();
    assert_eq!(
        read(&output),
        format!("!IPSummaryDump 1.3\n!data {}\n{}", want_fields.join(" "), lines)
    );
}

/// Click's test/standard/Pad-01.testie, as it is: FromIPSummaryDump reads a payload
/// (with `.` for no IP and TCP options, so no option padding), Tee, Paint, Truncate
/// and Pad change copies, and ToIPSummaryDump writes them.
#[test]
fn clicks_pad_01_testie() {
    let dir = tempfile::tempdir().unwrap();
    let packets = temp_path(&dir, "packets");
    let out = temp_path(&dir, "out");
    std::fs::write(
        &packets,
        "!IPSummaryDump 1.3\n!data ip_src ip_opt tcp_opt ip_len payload\n\
         1.0.0.1 . . 50 \"HiFart\"\n1.0.0.2 . . - \"HiFart\"\n",
    )
    .unwrap();
    run_router(&format!(
        "FromIPSummaryDump({packets}, STOP true)
         -> t :: Tee
         -> Paint(0)
         -> to :: ToIPSummaryDump({out}, DATA paint ip_src ip_len ip_capture_len payload);
         t[1] -> Paint(1) -> Pad -> to;
         t[2] -> Paint(2) -> Truncate(44) -> to;
         t[3] -> Paint(3) -> Truncate(44) -> Pad -> to;
         t[4] -> Paint(4) -> Pad(44) -> to;
         t[5] -> Paint(5) -> Truncate(42) -> Pad(44) -> to;"
    ));
    let text = read(&out);
    let lines: Vec<&str> = text.lines().filter(|l| !l.starts_with('!')).collect();
    assert_eq!(
        lines,
        [
            "0 1.0.0.1 50 46 \"HiFart\"",
            "1 1.0.0.1 50 50 \"HiFart\\000\\000\\000\\000\"",
            "2 1.0.0.1 50 44 \"HiFa\"",
            "3 1.0.0.1 50 50 \"HiFa\\000\\000\\000\\000\\000\\000\"",
            "4 1.0.0.1 50 46 \"HiFart\"",
            "5 1.0.0.1 50 44 \"Hi\\000\\000\"",
            "0 1.0.0.2 46 46 \"HiFart\"",
            "1 1.0.0.2 46 46 \"HiFart\"",
            "2 1.0.0.2 46 44 \"HiFa\"",
            "3 1.0.0.2 46 46 \"HiFa\\000\\000\"",
            "4 1.0.0.2 46 46 \"HiFart\"",
            "5 1.0.0.2 46 44 \"Hi\\000\\000\"",
        ]
    );
}

/// Click's test/analysis/IPSummaryDump-01.testie, as it is: TCP options and the urgent
/// pointer read back, and what truncation leaves of them (`!bad` lines ignored, as the
/// testie ignores them).
#[test]
fn clicks_ipsummarydump_01_testie() {
    let dir = tempfile::tempdir().unwrap();
    let in1 = temp_path(&dir, "IN1");
    let out1 = temp_path(&dir, "OUT1");
    std::fs::write(
        &in1,
        "!data sport dport tcp_urp tcp_opt\n1 2 3 wscale10\n2 3 4 wscale10\n3 4 5 wscale10\n\
         4 5 6 wscale10\n5 6 7 wscale10\n",
    )
    .unwrap();
    run_router(&format!(
        "FromIPSummaryDump({in1}, STOP true, ZERO true)
         -> s :: RoundRobinSwitch
         -> t :: ToIPSummaryDump({out1}, BAD_PACKETS true, DATA sport dport tcp_urp tcp_opt)
         s[1] -> Truncate(41) -> t
         s[2] -> Truncate(38) -> t
         s[3] -> Truncate(23) -> t
         s[4] -> Truncate(20) -> t"
    ));
    let text = read(&out1);
    let lines: Vec<&str> = text.lines().filter(|l| !l.starts_with('!')).collect();
    assert_eq!(
        lines,
        ["1 2 3 wscale10", "2 3 4 -", "3 4 - -", "4 - - -", "- - - -"]
    );
}

/// Click's test/analysis/FromIPSummaryDump-02.clicktest, as it is: the data names
/// ICMP types, the packets are checksummed (CheckICMPHeader passes them), and the types
/// are written back by name.
#[test]
fn clicks_fromipsummarydump_02_clicktest() {
    let dir = tempfile::tempdir().unwrap();
    let out = temp_path(&dir, "stdout");
    run_router(&format!(
        "FromIPSummaryDump(STOP true, CHECKSUM true, DATA \"!data src dst icmp_type
!proto I
18.26.4.44 10.0.0.4 echo
10.0.0.4 18.26.4.44 echo-reply\")
	-> CheckICMPHeader
	-> ToIPSummaryDump({out}, FIELDS src dst icmp_type_name)"
    ));
    let text = read(&out);
    let lines: Vec<&str> = text.lines().filter(|l| !l.starts_with('!')).collect();
    assert_eq!(
        lines,
        ["18.26.4.44 10.0.0.4 echo", "10.0.0.4 18.26.4.44 echo-reply"]
    );
}

/// Click's test/analysis/FromIPSummaryDump-01.testie: the same from a file, the
/// fields given with the deprecated DATA keyword.
#[test]
fn clicks_fromipsummarydump_01_testie() {
    let dir = tempfile::tempdir().unwrap();
    let in1 = temp_path(&dir, "IN1");
    let out = temp_path(&dir, "stdout");
    std::fs::write(
        &in1,
        "!data src dst icmp_type\n!proto I\n18.26.4.44 10.0.0.4 echo\n10.0.0.4 18.26.4.44 echo-reply\n",
    )
    .unwrap();
    run_router(&format!(
        "FromIPSummaryDump({in1}, STOP true, CHECKSUM true)
         -> CheckICMPHeader
         -> ToIPSummaryDump({out}, DATA src dst icmp_type_name)"
    ));
    let text = read(&out);
    let lines: Vec<&str> = text.lines().filter(|l| !l.starts_with('!')).collect();
    assert_eq!(
        lines,
        ["18.26.4.44 10.0.0.4 echo", "10.0.0.4 18.26.4.44 echo-reply"]
    );
}

#[test]
fn field_names_of_old_dumps_read() {
    let (_, pkts) = packets_of(
        "!data 'ip src' 'ip dst' 'ts sec' 'ts usec' len proto\n1.0.0.1 2.0.0.2 5 7 20 U\n",
        "",
    );
    let p = &pkts[0];
    assert_eq!(p.anno().timestamp, Timestamp::new(5, 7000));
    assert_eq!(&p.data()[12..20], &[1, 0, 0, 1, 2, 0, 0, 2]);
    assert_eq!(p.data()[9], 17);
    assert!(Field::find("ip src").is_some());
    // Version 1.0 dumps gave fragment offsets in 8-byte units.
    let (_, pkts) = packets_of("!IPSummaryDump 1.0\n!data fragoff\n100+\n", "");
    assert_eq!(&pkts[0].data()[6..8], &[0x20, 100]);
    let (_, pkts) = packets_of("!data fragoff\n800+\n", "");
    assert_eq!(&pkts[0].data()[6..8], &[0x20, 100]);
}

fn fields_strategy() -> impl Strategy<Value = String> {
    let names = [
        "timestamp",
        "ts_sec",
        "ts_usec1",
        "ip_src",
        "ip_dst",
        "ip_len",
        "ip_proto",
        "ip_id",
        "ip_frag",
        "ip_fragoff",
        "ip_hl",
        "ip_opt",
        "ip_sum",
        "sport",
        "dport",
        "tcp_seq",
        "tcp_off",
        "tcp_flags",
        "tcp_opt",
        "tcp_sack",
        "udp_len",
        "icmp_type",
        "icmp_code",
        "payload",
        "payload_len",
        "count",
        "wire_len",
        "ip_capture_len",
        "direction",
    ];
    proptest::collection::vec(proptest::sample::select(names.to_vec()), 1..8).prop_map(|v| v.join(" "))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Any line, under any fields, makes a packet or nothing, and the packet formats.
    #[test]
    fn arbitrary_lines_never_panic(fields in fields_strategy(), line in "[ -~\\t]{0,120}") {
        super::parse_dump_for_fuzzing(format!("!data {}\n{}\n", fields, line).as_bytes());
    }

    /// Lines of plausible field texts, which reach deeper into the builder.
    #[test]
    fn plausible_lines_never_panic(
        fields in fields_strategy(),
        words in proptest::collection::vec(
            "[0-9]{1,6}|[TUI.!+fF]|[0-9]{1,3}\\.[0-9]{1,3}\\.[0-9]{1,3}\\.[0-9]{1,3}|\"[a-z\\\\0-7]{0,40}\"|(mss|wscale|sack|ts|rr\\{|ssrr\\{|nop|eol)[0-9.,:;{}^+-]{0,20}",
            0..8,
        ),
    ) {
        super::parse_dump_for_fuzzing(format!("!data {}\n{}\n", fields, words.join(" ")).as_bytes());
    }

    /// Arbitrary bytes as a packet, with arbitrary headers, format under every field.
    #[test]
    fn arbitrary_packets_format(bytes in proptest::collection::vec(any::<u8>(), 0..80), net in 0usize..30, hl in 0usize..70) {
        let mut p = Packet::from_slice(&bytes);
        if net < bytes.len() {
            p.set_network_header(net as isize, hl);
        }
        let _ = line(&p, ALL_FIELDS, &BAD);
    }
}
