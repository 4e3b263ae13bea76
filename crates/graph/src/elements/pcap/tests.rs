//! Tests of FromDump, ToDump and the pcap parser. Files are written out byte by byte.

use super::format::{self, CaptureEnd};
use super::fromdump::FromDumpClass;
use super::todump::ToDumpClass;
use super::Fixed28;
use crate::args::FromArg;
use crate::element::{Context, Outputs, StopFlag, TaskStatus, WorkerInfo};
use crate::testing::{build, build_error, Harness};
use packet::{Packet, PacketBatch, Timestamp};
use std::path::{Path, PathBuf};

/// Little-endian file header: magic, version 2.4 (or `minor`), zone 0, sigfigs 0,
/// snaplen 65535, link type.
fn le_header(magic: u32, minor: u16, linktype: u32) -> Vec<u8> {
    let mut v = Vec::new();
    v.extend_from_slice(&magic.to_le_bytes());
    v.extend_from_slice(&2u16.to_le_bytes());
    v.extend_from_slice(&minor.to_le_bytes());
    v.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 0]);
    v.extend_from_slice(&65535u32.to_le_bytes());
    v.extend_from_slice(&linktype.to_le_bytes());
    v
}

fn le_record(v: &mut Vec<u8>, sec: u32, sub: u32, caplen: u32, len: u32, data: &[u8]) {
    for x in [sec, sub, caplen, len] {
        v.extend_from_slice(&x.to_le_bytes());
    }
    v.extend_from_slice(data);
}

fn write_file(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

fn fromdump(path: &Path, extra: &str, nout: usize) -> Harness {
    Harness::new(&FromDumpClass, &format!("{}{}", path.display(), extra), 0, nout)
}

/// Runs a source until it reports Done (or a bound of runs), collecting output 0 and 1.
fn drain(h: &mut Harness) -> (Vec<Packet>, Vec<Packet>) {
    let (mut o0, mut o1) = (Vec::new(), Vec::new());
    for _ in 0..10_000 {
        let (st, mut outs) = h.run();
        if outs.len() > 1 {
            o1.append(&mut outs[1]);
        }
        if !outs.is_empty() {
            o0.append(&mut outs[0]);
        }
        if st != TaskStatus::Busy {
            break;
        }
    }
    (o0, o1)
}

const IPV4_UDP: [u8; 28] = [
    0x45, 0, 0, 28, 0, 1, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1, 192, 168, 7, 9, 0x04, 0x00, 0x00, 0x35, 0, 8, 0, 0,
];

#[test]
fn reads_little_endian_microsecond_ethernet() {
    let dir = tempfile::tempdir().unwrap();
    let mut f = le_header(0xA1B2C3D4, 4, 1);
    le_record(&mut f, 1000, 500, 4, 10, &[0xde, 0xad, 0xbe, 0xef]);
    le_record(&mut f, 1001, 999_999, 2, 2, &[1, 2]);
    let path = write_file(dir.path(), "a.pcap", &f);
    let mut h = fromdump(&path, "", 1);
    assert_eq!(h.read("encap"), "ETHER");
    assert_eq!(h.read("filesize"), f.len().to_string());
    // One packet per run.
    let (st, out) = h.run();
    assert_eq!(st, TaskStatus::Busy);
    assert_eq!(out[0].len(), 1);
    let p = &out[0][0];
    assert_eq!(p.data(), &[0xde, 0xad, 0xbe, 0xef]);
    assert_eq!(p.anno().timestamp, Timestamp::new(1000, 500_000));
    assert_eq!(p.anno().extra_length(), 6);
    assert_eq!(p.mac_header_offset(), Some(0));
    assert_eq!(p.network_header_offset(), None);
    assert_eq!(h.read("count"), "1");
    assert_eq!(h.read("filepos"), (24 + 16 + 4).to_string());
    let (st, out) = h.run();
    assert_eq!(st, TaskStatus::Busy);
    assert_eq!(out[0][0].data(), &[1, 2]);
    assert_eq!(out[0][0].anno().timestamp, Timestamp::new(1001, 999_999_000));
    assert_eq!(out[0][0].anno().extra_length(), 0);
    assert_eq!(h.run().0, TaskStatus::Done);
    assert!(!h.stop_requested());
    assert_eq!(h.read("count"), "2");
    assert_eq!(h.read("packet_filepos"), f.len().to_string());
}

#[test]
fn reads_big_endian_nanosecond_raw_ip() {
    let dir = tempfile::tempdir().unwrap();
    let mut f = vec![
        0xA1, 0xB2, 0x3C, 0x4D, 0, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 0, 0, 0, 101,
    ];
    // ts 7.000000123, caplen 28, len 28
    f.extend_from_slice(&[0, 0, 0, 7, 0, 0, 0, 123, 0, 0, 0, 28, 0, 0, 0, 28]);
    f.extend_from_slice(&IPV4_UDP);
    let path = write_file(dir.path(), "b.pcap", &f);
    let mut h = fromdump(&path, "", 1);
    assert_eq!(h.read("encap"), "IP");
    let (o, _) = drain(&mut h);
    assert_eq!(o.len(), 1);
    assert_eq!(o[0].data(), &IPV4_UDP);
    assert_eq!(o[0].anno().timestamp, Timestamp::new(7, 123));
    // Raw IP forces FORCE_IP: IP header annotation and destination address set.
    assert_eq!(o[0].network_header_offset(), Some(0));
    assert_eq!(o[0].transport_header_offset(), Some(20));
    assert_eq!(o[0].anno().dst_ip(), [192, 168, 7, 9]);
}

#[test]
fn host_raw_linktype_12_is_ip_and_228_is_unknown() {
    let dir = tempfile::tempdir().unwrap();
    for (lt, encap, net) in [(12u32, "IP", Some(0isize)), (228, "#228", None)] {
        let mut f = le_header(0xA1B2C3D4, 4, lt);
        le_record(&mut f, 1, 0, 28, 28, &IPV4_UDP);
        let path = write_file(dir.path(), &format!("l{}.pcap", lt), &f);
        let mut h = fromdump(&path, "", 1);
        assert_eq!(h.read("encap"), encap);
        let (o, _) = drain(&mut h);
        assert_eq!(o.len(), 1);
        assert_eq!(o[0].network_header_offset(), net);
    }
    assert_eq!(format::unparse_dlt(105), "802_11");
    assert_eq!(format::parse_dlt("#228"), Some(228));
    assert_eq!(format::parse_dlt("BOGUS"), None);
}

#[test]
fn modified_magic_old_versions_and_long_caplen() {
    // Modified Linux magic: 8 bytes after each record header.
    let mut f = le_header(0xA1B2CD34, 4, 1);
    le_record(&mut f, 1, 0, 2, 2, &[9, 9, 9, 9, 9, 9, 9, 9, 0xAA, 0xBB]);
    let c = format::parse_capture(&f).unwrap();
    assert_eq!(c.records.len(), 1);
    assert_eq!(c.records[0].data, &[0xAA, 0xBB]);
    assert_eq!(c.end, CaptureEnd::Clean);

    // Version 2.2: the length fields are swapped (len first).
    let mut f = le_header(0xA1B2C3D4, 2, 1);
    le_record(&mut f, 1, 0, 60, 3, &[1, 2, 3]);
    let c = format::parse_capture(&f).unwrap();
    assert_eq!((c.records[0].header.caplen, c.records[0].header.len), (3, 60));

    // caplen above len: keep len bytes, skip the rest.
    let mut f = le_header(0xA1B2C3D4, 4, 1);
    le_record(&mut f, 1, 0, 3, 2, &[1, 2, 3]);
    le_record(&mut f, 2, 0, 1, 1, &[4]);
    let c = format::parse_capture(&f).unwrap();
    assert_eq!(c.records.len(), 2);
    assert_eq!(c.records[0].data, &[1, 2]);
    assert_eq!(c.records[1].data, &[4]);
}

#[test]
fn truncated_and_bad_records_end_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let mut f = le_header(0xA1B2C3D4, 4, 1);
    le_record(&mut f, 1, 0, 2, 2, &[1, 2]);
    le_record(&mut f, 2, 0, 10, 10, &[1, 2, 3]); // data cut short
    assert_eq!(format::parse_capture(&f).unwrap().end, CaptureEnd::Truncated);
    let path = write_file(dir.path(), "t.pcap", &f);
    let mut h = fromdump(&path, ", STOP true", 1);
    let (o, _) = drain(&mut h);
    assert_eq!(o.len(), 1);
    assert!(h.stop_requested());
    assert_eq!(h.read("active"), "false");

    let mut f = le_header(0xA1B2C3D4, 4, 1);
    le_record(&mut f, 1, 0, 70000, 70000, &[]);
    assert_eq!(format::parse_capture(&f).unwrap().end, CaptureEnd::BadRecord);
    let path = write_file(dir.path(), "bad.pcap", &f);
    let mut h = fromdump(&path, "", 1);
    assert_eq!(drain(&mut h).0.len(), 0);
}

#[test]
fn file_errors_name_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope.pcap");
    assert_eq!(
        build_error(&FromDumpClass, &missing.display().to_string(), 0, 1),
        format!("e :: FromDump: {}: No such file or directory", missing.display())
    );
    let cases: [(&str, Vec<u8>, &str); 4] = [
        ("empty", vec![], "empty file"),
        (
            "short",
            vec![0xD4, 0xC3, 0xB2, 0xA1, 2, 0],
            "not a tcpdump file (too short)",
        ),
        ("magic", vec![0x11; 24], "not a tcpdump file (bad magic number)"),
        (
            "version",
            le_header(0xA1B2C3D4, 4, 1)
                .iter()
                .enumerate()
                .map(|(i, &b)| if i == 4 { 3 } else { b })
                .collect(),
            "unknown major version 3",
        ),
    ];
    for (name, bytes, msg) in cases {
        let p = write_file(dir.path(), name, &bytes);
        assert_eq!(
            build_error(&FromDumpClass, &p.display().to_string(), 0, 1),
            format!("e :: FromDump: {}: {}", p.display(), msg)
        );
    }
    let p = write_file(dir.path(), "l228", &le_header(0xA1B2C3D4, 4, 228));
    assert_eq!(
        build_error(&FromDumpClass, &format!("{}, FORCE_IP true", p.display()), 0, 1),
        format!(
            "e :: FromDump: {}: unknown linktype 228; can't force IP packets",
            p.display()
        )
    );
    assert_eq!(
        build_error(
            &FromDumpClass,
            &format!("{}, END 5, INTERVAL 1", p.display()),
            0,
            1
        ),
        "e :: FromDump: END, END_AFTER, and INTERVAL are mutually exclusive"
    );
}

#[test]
fn force_ip_splits_ip_from_other_frames() {
    let dir = tempfile::tempdir().unwrap();
    let mut ip_frame = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2, 0x08, 0x00];
    ip_frame.extend_from_slice(&IPV4_UDP);
    let mut vlan_frame = vec![
        2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2, 0x81, 0x00, 0x00, 0x05, 0x08, 0x00,
    ];
    vlan_frame.extend_from_slice(&IPV4_UDP);
    let arp_frame = [2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2, 0x08, 0x06, 0, 1];
    let mut f = le_header(0xA1B2C3D4, 4, 1);
    le_record(
        &mut f,
        1,
        0,
        ip_frame.len() as u32,
        ip_frame.len() as u32,
        &ip_frame,
    );
    le_record(&mut f, 2, 0, 16, 16, &arp_frame);
    le_record(
        &mut f,
        3,
        0,
        vlan_frame.len() as u32,
        vlan_frame.len() as u32,
        &vlan_frame,
    );
    let path = write_file(dir.path(), "e.pcap", &f);
    let mut h = fromdump(&path, ", FORCE_IP true", 2);
    let (o0, o1) = drain(&mut h);
    assert_eq!(o0.len(), 2);
    assert_eq!(o0[0].network_header_offset(), Some(14));
    assert_eq!(o0[0].anno().dst_ip(), [192, 168, 7, 9]);
    assert_eq!(o0[1].network_header_offset(), Some(18));
    assert_eq!(o1.len(), 1);
    assert_eq!(o1[0].data(), &arp_frame);
    assert_eq!(h.read("count"), "2");
}

#[test]
fn force_ip_other_link_types() {
    let mut sll = vec![0, 0, 0, 1, 0, 6, 1, 2, 3, 4, 5, 6, 0, 0, 0x08, 0x00];
    sll.extend_from_slice(&IPV4_UDP);
    assert_eq!(format::force_ip(&sll, 113).map(|p| p.offset), Some(16));
    let mut null = vec![2, 0, 0, 0];
    null.extend_from_slice(&IPV4_UDP);
    assert_eq!(format::force_ip(&null, 0).map(|p| p.offset), Some(4));
    let mut ppp = vec![0xFF, 0x03, 0x00, 0x21];
    ppp.extend_from_slice(&IPV4_UDP);
    assert_eq!(format::force_ip(&ppp, 9).map(|p| p.offset), Some(4));
    let mut atm = vec![0xAA, 0xAA, 0x03, 0, 0, 0, 0x08, 0x00];
    atm.extend_from_slice(&IPV4_UDP);
    assert_eq!(format::force_ip(&atm, 100).map(|p| p.offset), Some(8));
    let mut hdlc = vec![0x0F, 0x00, 0x08, 0x00];
    hdlc.extend_from_slice(&IPV4_UDP);
    assert_eq!(format::force_ip(&hdlc, 104).map(|p| p.offset), Some(4));
    // An IPv6 header needs 40 bytes; IHL below 5 is not IP.
    let v6 = [0x60u8; 40];
    assert_eq!(format::force_ip(&v6, 101).map(|p| p.header_len), Some(40));
    assert_eq!(format::force_ip(&v6[..39], 101), None);
    assert_eq!(format::force_ip(&[0x44; 20], 101), None);
}

#[test]
fn other_workers_get_an_idle_instance() {
    let dir = tempfile::tempdir().unwrap();
    let mut f = le_header(0xA1B2C3D4, 4, 1);
    le_record(&mut f, 1, 0, 1, 1, &[1]);
    let path = write_file(dir.path(), "w.pcap", &f);
    let spec = build(&FromDumpClass, &path.display().to_string(), 0, 1).unwrap();
    let mut other = spec.instantiate(WorkerInfo { index: 1, count: 2 });
    let mut outs = vec![PacketBatch::new()];
    let stop = StopFlag::new();
    let mut cx = Context::new(WorkerInfo { index: 1, count: 2 }, &stop);
    assert!(other.is_source());
    assert_eq!(other.run(&mut Outputs::new(&mut outs), &mut cx), TaskStatus::Done);
    assert!(outs[0].is_empty());
    let mut first = spec.instantiate(WorkerInfo { index: 0, count: 2 });
    assert_eq!(first.run(&mut Outputs::new(&mut outs), &mut cx), TaskStatus::Busy);
    assert_eq!(outs[0].len(), 1);
}

#[test]
fn handlers_active_stop_sample_and_times() {
    let dir = tempfile::tempdir().unwrap();
    let mut f = le_header(0xA1B2C3D4, 4, 1);
    for s in 0..5u32 {
        le_record(&mut f, 100 + s, 0, 1, 1, &[s as u8]);
    }
    let path = write_file(dir.path(), "h.pcap", &f);

    let mut h = fromdump(&path, ", ACTIVE false", 1);
    assert_eq!(h.run().0, TaskStatus::Idle);
    assert_eq!(h.write("active", "maybe"), Err("type mismatch".to_string()));
    h.write("active", "true").unwrap();
    assert_eq!(h.run().1[0].len(), 1);
    h.write("stop", "").unwrap();
    assert_eq!(h.run().0, TaskStatus::Idle);
    assert!(h.stop_requested());

    // START_AFTER 1 skips the first second; END_AFTER 3 stops before 103.
    let mut h = fromdump(&path, ", START_AFTER 1, END_AFTER 3", 1);
    let (o, _) = drain(&mut h);
    assert_eq!(o.iter().map(|p| p.data()[0]).collect::<Vec<_>>(), vec![1, 2]);
    assert_eq!(h.read("active"), "false");

    let mut h = fromdump(&path, ", SAMPLE 0", 1);
    assert_eq!(h.read("sampling_prob"), "0");
    assert_eq!(drain(&mut h).0.len(), 0);
    let h = fromdump(&path, ", SAMPLE 0.5", 1);
    assert_eq!(h.read("sampling_prob"), "0.5");
    assert_eq!(h.read("filename"), path.display().to_string());

    // BURST raises the packets per run.
    let mut h = fromdump(&path, ", BURST 3", 1);
    assert_eq!(h.run().1[0].len(), 3);
}

#[test]
fn timing_holds_packets_until_due() {
    let dir = tempfile::tempdir().unwrap();
    let mut f = le_header(0xA1B2C3D4, 4, 1);
    le_record(&mut f, 100, 0, 1, 1, &[1]);
    le_record(&mut f, 100_000, 0, 1, 1, &[2]);
    let path = write_file(dir.path(), "timing.pcap", &f);
    let mut h = fromdump(&path, ", TIMING true", 1);
    assert_eq!(h.run().1[0].len(), 1);
    // The second packet is due in about 28 hours.
    assert_eq!(h.run().0, TaskStatus::Idle);
    assert_eq!(h.read("count"), "1");
}

#[test]
fn fixed_point_unparse_matches_click() {
    assert_eq!(format::unparse_fixed(1 << 28, 28), "1");
    assert_eq!(format::unparse_fixed(1 << 27, 28), "0.5");
    assert_eq!(format::unparse_fixed(0, 28), "0");
    let tenth = Fixed28::from_arg("0.1").unwrap().0 as u32;
    assert_eq!(tenth, 26843546);
    assert_eq!(format::unparse_fixed(tenth, 28), "0.1");
}

fn stamped(bytes: &[u8], sec: i64, nsec: u32, extra: u32) -> Packet {
    let mut p = Packet::from_slice(bytes);
    p.anno_mut().timestamp = Timestamp::new(sec, nsec);
    p.anno_mut().set_extra_length(extra);
    p
}

fn ne(v: &mut Vec<u8>, xs: &[u32]) {
    for x in xs {
        v.extend_from_slice(&x.to_ne_bytes());
    }
}

#[test]
fn todump_writes_clicks_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("out.pcap");
    let mut h = Harness::new(&ToDumpClass, &format!("{}, SNAPLEN 4", path.display()), 1, 0);
    h.push(
        0,
        vec![
            stamped(&[1, 2, 3, 4, 5, 6], 1_700_000_000, 123_456_789, 10),
            stamped(&[7, 8], 5, 999, 0),
        ],
    );
    assert_eq!(h.read("count"), "2");
    assert_eq!(h.read("filename"), path.display().to_string());
    h.spec.cleanup();
    let mut want = Vec::new();
    ne(&mut want, &[0xA1B2C3D4]);
    want.extend_from_slice(&2u16.to_ne_bytes());
    want.extend_from_slice(&4u16.to_ne_bytes());
    ne(&mut want, &[0, 0, 4, 1]);
    ne(&mut want, &[1_700_000_000, 123_456, 4, 16]);
    want.extend_from_slice(&[1, 2, 3, 4]);
    ne(&mut want, &[5, 0, 2, 2]);
    want.extend_from_slice(&[7, 8]);
    assert_eq!(std::fs::read(&path).unwrap(), want);
}

#[test]
fn todump_options() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("n.pcap");
    let mut h = Harness::new(
        &ToDumpClass,
        &format!(
            "{}, 0, IP, NANO true, EXTRA_LENGTH false, UNBUFFERED true",
            path.display()
        ),
        1,
        1,
    );
    let out = h.push(0, vec![stamped(&[0x45, 0], 3, 7, 100)]);
    // Packets pass through to the output.
    assert_eq!(out[0].len(), 1);
    let mut want = Vec::new();
    ne(&mut want, &[0xA1B23C4D]);
    want.extend_from_slice(&2u16.to_ne_bytes());
    want.extend_from_slice(&4u16.to_ne_bytes());
    ne(&mut want, &[0, 0, 0xFFFF_FFFF, 101, 3, 7, 2, 2]);
    want.extend_from_slice(&[0x45, 0]);
    assert_eq!(std::fs::read(&path).unwrap(), want);

    // A zero timestamp is replaced by the current time.
    let before = Timestamp::now();
    h.push(0, vec![Packet::from_slice(&[1])]);
    let after = Timestamp::now();
    let c = format::parse_capture(&std::fs::read(&path).unwrap())
        .unwrap()
        .records[1]
        .header
        .ts;
    assert!(c >= Timestamp::new(before.sec, 0) && c <= after);

    assert_eq!(
        build_error(&ToDumpClass, &format!("{}, ENCAP BOGUS", path.display()), 1, 0),
        "e :: ToDump: bad encapsulation type"
    );
    let bad = dir.path().join("no/such/dir.pcap");
    assert_eq!(
        build_error(&ToDumpClass, &bad.display().to_string(), 1, 0),
        format!("e :: ToDump: {}: No such file or directory", bad.display())
    );
}

#[test]
fn round_trip_todump_then_fromdump() {
    let dir = tempfile::tempdir().unwrap();
    for nano in [false, true] {
        let path = dir.path().join(format!("rt{}.pcap", nano));
        let mut w = Harness::new(&ToDumpClass, &format!("{}, NANO {}", path.display(), nano), 1, 0);
        let pkts = [
            stamped(&[0xAA; 60], 10, 1_000, 4),
            stamped(&[0xBB; 1514], 11, 999_999_000, 0),
            stamped(&[], 12, 5_000, 0),
        ];
        w.push(0, pkts.to_vec());
        drop(w);
        let mut r = fromdump(&path, "", 1);
        let (got, _) = drain(&mut r);
        assert_eq!(got.len(), 3);
        for (a, b) in pkts.iter().zip(&got) {
            assert_eq!(a.data(), b.data());
            assert_eq!(a.anno().timestamp, b.anno().timestamp);
            assert_eq!(a.anno().extra_length(), b.anno().extra_length());
        }
    }
}

proptest::proptest! {
    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..400), magic in 0usize..4) {
        let _ = format::parse_capture(&bytes);
        // With a valid header prefix, the records are random.
        let mut f = match magic {
            0 => le_header(0xA1B2C3D4, 4, 1),
            1 => le_header(0xA1B2CD34, 2, 101),
            2 => le_header(0xA1B23C4D, 3, 113),
            _ => Vec::new(),
        };
        f.extend_from_slice(&bytes);
        let _ = format::parse_capture(&f);
        let dir = tempfile::tempdir().unwrap();
        let path = write_file(dir.path(), "r.pcap", &f);
        if let Ok(spec) = build(&FromDumpClass, &format!("{}, FORCE_IP true", path.display()), 0, 2)
            .or_else(|_| build(&FromDumpClass, &path.display().to_string(), 0, 2))
        {
            let mut e = spec.instantiate(WorkerInfo { index: 0, count: 1 });
            let mut outs = vec![PacketBatch::new(), PacketBatch::new()];
            let stop = StopFlag::new();
            let mut cx = Context::new(WorkerInfo { index: 0, count: 1 }, &stop);
            for _ in 0..500 {
                if e.run(&mut Outputs::new(&mut outs), &mut cx) != TaskStatus::Busy {
                    break;
                }
            }
        }
    }
}

/// A pcap file header as ToDump writes it: microsecond magic, version 2.4, `snaplen`,
/// `linktype`.
fn file_header(snaplen: u32, linktype: u32) -> Vec<u8> {
    let mut v = Vec::new();
    ne(&mut v, &[0xA1B2C3D4]);
    v.extend_from_slice(&2u16.to_ne_bytes());
    v.extend_from_slice(&4u16.to_ne_bytes());
    ne(&mut v, &[0, 0, snaplen, linktype]);
    v
}

#[test]
fn a_replacing_todump_of_the_same_file_writes_on_into_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("out.pcap");
    let config = format!("{}, SNAPLEN 4", path.display());
    let mut old = Harness::new(&ToDumpClass, &config, 1, 0);
    old.push(0, vec![stamped(&[1, 2], 5, 1000, 0)]);
    old.spec.cleanup();
    // The replacing configuration is built (its file staged), takes the old one's
    // file, and its commit then leaves the file alone.
    let mut new = Harness::staged(&ToDumpClass, &format!("{}, UNBUFFERED true", config), 1, 0);
    assert!(new.spec.take_state(&*old.spec));
    new.spec.commit().unwrap();
    new.push(0, vec![stamped(&[3, 4, 5, 6, 7], 6, 2000, 0)]);
    // UNBUFFERED over the old buffered writer: on disk after the batch.
    let mut want = file_header(4, 1);
    ne(&mut want, &[5, 1, 2, 2]);
    want.extend_from_slice(&[1, 2]);
    ne(&mut want, &[6, 2, 4, 5]);
    want.extend_from_slice(&[3, 4, 5, 6]);
    assert_eq!(std::fs::read(&path).unwrap(), want);
    assert_eq!((old.read("count"), new.read("count")), ("1".into(), "1".into()));
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["out.pcap"]);
}

#[test]
fn a_todump_of_another_file_or_encapsulation_starts_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("out.pcap");
    let mut old = Harness::new(&ToDumpClass, &format!("{}", path.display()), 1, 0);
    old.push(0, vec![stamped(&[1, 2], 5, 1000, 0)]);
    old.spec.cleanup();
    for config in [
        format!("{}, ENCAP IP", path.display()),
        format!("{}, NANO true", path.display()),
        format!("{}", dir.path().join("other.pcap").display()),
    ] {
        let new = Harness::staged(&ToDumpClass, &config, 1, 0);
        assert!(!new.spec.take_state(&*old.spec), "{config}");
    }
    // The one with another encapsulation replaces the file with its own once
    // committed.
    let new = Harness::staged(&ToDumpClass, &format!("{}, ENCAP IP", path.display()), 1, 0);
    assert!(!new.spec.take_state(&*old.spec));
    new.spec.commit().unwrap();
    new.spec.cleanup();
    assert_eq!(std::fs::read(&path).unwrap(), file_header(2000, 101));
}

#[test]
fn a_replacing_fromdump_of_the_same_file_reads_on() {
    let dir = tempfile::tempdir().unwrap();
    let mut bytes = le_header(0xA1B2_C3D4, 4, 1);
    for tag in 1..=3u8 {
        le_record(&mut bytes, u32::from(tag), 0, 1, 1, &[tag]);
    }
    let path = write_file(dir.path(), "in.pcap", &bytes);
    let mut old = fromdump(&path, "", 1);
    let (_, outs) = old.run();
    assert_eq!(outs[0][0].data(), &[1]);
    // The old configuration's workers stop: the reader goes back to the spec.
    let old_spec = old.spec.clone();
    drop(old);
    let config = format!("{}, STOP true", path.display());
    let spec = crate::testing::build_staged(&FromDumpClass, &config, 0, 1).unwrap();
    assert!(spec.take_state(&*old_spec));
    let mut new = Harness::of(spec, 1);
    assert_eq!(new.read("filepos"), (24 + 17).to_string());
    let (got, _) = drain(&mut new);
    let tags: Vec<u8> = got.iter().map(|p| p.data()[0]).collect();
    assert_eq!(tags, [2, 3]);
    // Its own STOP.
    assert!(new.stop_requested());
    assert_eq!(new.read("count"), "2");

    // Another file: nothing taken, it reads its own from the start.
    let other = write_file(dir.path(), "other.pcap", &bytes);
    let mut old = fromdump(&path, "", 1);
    old.run();
    let old_spec = old.spec.clone();
    drop(old);
    let spec = crate::testing::build_staged(&FromDumpClass, &other.display().to_string(), 0, 1).unwrap();
    assert!(!spec.take_state(&*old_spec));
    let (got, _) = drain(&mut Harness::of(spec, 1));
    assert_eq!(got.len(), 3);
}

#[test]
fn a_replacing_todump_of_a_fifo_writes_no_second_header() {
    use std::io::Read;
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo");
    let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a NUL-terminated path; mkfifo creates the FIFO and touches nothing else.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let reading = {
        let fifo = fifo.clone();
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            std::fs::File::open(fifo)
                .unwrap()
                .read_to_end(&mut bytes)
                .unwrap();
            bytes
        })
    };
    let config = format!("{}, SNAPLEN 4", fifo.display());
    let mut old = Harness::new(&ToDumpClass, &config, 1, 0);
    old.push(0, vec![stamped(&[1, 2], 5, 1000, 0)]);
    old.spec.cleanup();
    // Built beside the running one: it writes nothing into the FIFO until it takes
    // over, and then no header of its own.
    let mut new = Harness::staged(&ToDumpClass, &config, 1, 0);
    assert!(new.spec.take_state(&*old.spec));
    new.spec.commit().unwrap();
    new.push(0, vec![stamped(&[3], 6, 2000, 0)]);
    new.spec.cleanup();
    drop((old, new));
    let mut want = file_header(4, 1);
    ne(&mut want, &[5, 1, 2, 2]);
    want.extend_from_slice(&[1, 2]);
    ne(&mut want, &[6, 2, 1, 1]);
    want.push(3);
    assert_eq!(reading.join().unwrap(), want);
}

#[test]
fn a_writer_stopped_by_an_error_is_not_taken_over() {
    // Buffered: the header and the record wait in the buffer, whose flush fails.
    let mut old = Harness::new(&ToDumpClass, "/dev/full", 1, 0);
    old.push(0, vec![stamped(&[1], 5, 0, 0)]);
    old.spec.cleanup();
    let new = Harness::staged(&ToDumpClass, "/dev/full", 1, 0);
    assert!(!new.spec.take_state(&*old.spec));
}

#[test]
fn unbuffered_holds_over_successive_takeovers_of_a_buffered_writer() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("out.pcap");
    let a = Harness::new(&ToDumpClass, &path.display().to_string(), 1, 0);
    a.spec.cleanup();
    let unbuffered = format!("{}, UNBUFFERED true", path.display());
    let b = Harness::staged(&ToDumpClass, &unbuffered, 1, 0);
    assert!(b.spec.take_state(&*a.spec));
    let mut c = Harness::staged(&ToDumpClass, &unbuffered, 1, 0);
    assert!(c.spec.take_state(&*b.spec));
    c.push(0, vec![stamped(&[7], 9, 0, 0)]);
    // On disk after the batch, though the writer is the first one's buffered one.
    assert_eq!(std::fs::metadata(&path).unwrap().len(), 24 + 16 + 1);
}

#[test]
fn a_fromdump_that_takes_a_reader_takes_its_link_type() {
    let dir = tempfile::tempdir().unwrap();
    let raw = {
        let mut b = le_header(0xA1B2_C3D4, 4, 101);
        le_record(&mut b, 1, 0, 28, 28, &IPV4_UDP);
        b
    };
    let path = write_file(dir.path(), "in.pcap", &raw);
    let old = fromdump(&path, "", 1);
    let old_spec = old.spec.clone();
    drop(old);
    // The name now holds an Ethernet capture: the replacing element built over it
    // takes the old reader, raw IP, and says so.
    write_file(dir.path(), "in.pcap", &le_header(0xA1B2_C3D4, 4, 1));
    let spec = crate::testing::build_staged(&FromDumpClass, &path.display().to_string(), 0, 1).unwrap();
    assert_eq!(spec.read_handler("encap").unwrap(), "ETHER");
    assert!(spec.take_state(&*old_spec));
    assert_eq!(spec.read_handler("encap").unwrap(), "IP");
    let (got, _) = drain(&mut Harness::of(spec, 1));
    assert_eq!(got.len(), 1);

    // FORCE_IP over a link type it cannot find IP in: not taken.
    let path = write_file(dir.path(), "other.pcap", &le_header(0xA1B2_C3D4, 4, 228));
    let old = fromdump(&path, "", 1);
    let old_spec = old.spec.clone();
    drop(old);
    write_file(dir.path(), "other.pcap", &le_header(0xA1B2_C3D4, 4, 1));
    let config = format!("{}, FORCE_IP true", path.display());
    let spec = crate::testing::build_staged(&FromDumpClass, &config, 0, 1).unwrap();
    assert!(!spec.take_state(&*old_spec));
}
