use super::*;

/// An MRT record: header (time, type, subtype, length) and body.
fn record(kind: u16, sub: u16, body: &[u8]) -> Vec<u8> {
    let mut r = Vec::new();
    r.extend_from_slice(&1_700_000_000u32.to_be_bytes());
    r.extend_from_slice(&kind.to_be_bytes());
    r.extend_from_slice(&sub.to_be_bytes());
    r.extend_from_slice(&(body.len() as u32).to_be_bytes());
    r.extend_from_slice(body);
    r
}

/// A BGP path attribute (well-known transitive flags).
fn attr(kind: u8, value: &[u8]) -> Vec<u8> {
    let mut a = vec![0x40, kind, value.len() as u8];
    a.extend_from_slice(value);
    a
}

/// ORIGIN IGP and an AS_PATH, then `more`.
fn attrs(more: &[Vec<u8>]) -> Vec<u8> {
    let mut a = attr(1, &[0]);
    a.extend(attr(2, &[2, 1, 0, 0, 0xfd, 0xe8]));
    for m in more {
        a.extend_from_slice(m);
    }
    a
}

/// A TABLE_DUMP_V2 RIB record: sequence, prefix, entries (peer, time, attributes).
fn rib_record(sub: u16, len: u8, prefix: &[u8], entries: &[Vec<u8>]) -> Vec<u8> {
    let mut b = 7u32.to_be_bytes().to_vec();
    b.push(len);
    b.extend_from_slice(prefix);
    b.extend_from_slice(&(entries.len() as u16).to_be_bytes());
    for (i, a) in entries.iter().enumerate() {
        b.extend_from_slice(&(i as u16).to_be_bytes());
        b.extend_from_slice(&1_600_000_000u32.to_be_bytes());
        if sub == RIB_IPV4_UNICAST_ADDPATH || sub == RIB_IPV6_UNICAST_ADDPATH {
            b.extend_from_slice(&(i as u32 + 1).to_be_bytes());
        }
        b.extend_from_slice(&(a.len() as u16).to_be_bytes());
        b.extend_from_slice(a);
    }
    record(TABLE_DUMP_V2, sub, &b)
}

fn nh4(a: [u8; 4]) -> Vec<u8> {
    attrs(&[attr(ATTR_NEXT_HOP, &a)])
}

/// A RouteViews-like dump: a peer table, IPv4 and IPv6 RIB records.
fn dump() -> Vec<u8> {
    let mut f = record(TABLE_DUMP_V2, 1, &[0; 8]); // a peer index table, skipped
                                                   // 192.0.2.0/24 from two peers: the first entry's next hop counts.
    f.extend(rib_record(
        RIB_IPV4_UNICAST,
        24,
        &[192, 0, 2],
        &[nh4([198, 18, 0, 2]), nh4([198, 19, 0, 2])],
    ));
    // 10.0.0.0/8 (one byte of prefix), next hop already seen.
    f.extend(rib_record(RIB_IPV4_UNICAST, 8, &[10], &[nh4([198, 19, 0, 2])]));
    // The default route.
    f.extend(rib_record(RIB_IPV4_UNICAST, 0, &[], &[nh4([198, 18, 0, 2])]));
    // 2001:db8::/32 with an abbreviated MP_REACH_NLRI (global and link-local).
    let mut mp = vec![32];
    mp.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
    mp.extend_from_slice(&[0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
    f.extend(rib_record(
        RIB_IPV6_UNICAST,
        32,
        &[0x20, 0x01, 0x0d, 0xb8],
        &[attrs(&[attr(ATTR_MP_REACH_NLRI, &mp)])],
    ));
    f
}

#[test]
fn a_table_dump_v2_gives_each_prefix_its_first_entrys_next_hop() {
    let t = parse(&dump(), "rib").unwrap();
    assert_eq!(t.v4, vec![(0xc000_0200, 24, 0), (0x0a00_0000, 8, 1), (0, 0, 0)]);
    assert_eq!(t.v6, vec![(0x2001_0db8u128 << 96, 32, 2)]);
    // The table loader takes it for an MRT file by its first record.
    assert!(looks_like_mrt(&dump()));
    assert_eq!(crate::table::parse(&dump(), "rib").unwrap(), t);
}

#[test]
fn add_path_records_and_the_older_table_dump() {
    let mut f = rib_record(RIB_IPV4_UNICAST_ADDPATH, 16, &[172, 16], &[nh4([10, 0, 0, 1])]);
    // TABLE_DUMP, AFI 1: view, sequence, prefix, length, status, time, peer, AS, attrs.
    let mut b = vec![0, 0, 0, 1, 203, 0, 113, 0, 24, 1];
    b.extend_from_slice(&0u32.to_be_bytes());
    b.extend_from_slice(&[10, 0, 0, 9, 0xfd, 0xe8]);
    let a = nh4([10, 0, 0, 2]);
    b.extend_from_slice(&(a.len() as u16).to_be_bytes());
    b.extend_from_slice(&a);
    f.extend(record(TABLE_DUMP, 1, &b));
    // The same prefix again: the first record stands.
    f.extend(rib_record(
        RIB_IPV4_UNICAST,
        16,
        &[172, 16],
        &[nh4([10, 0, 0, 3])],
    ));
    // A message stream record (BGP4MP) is skipped.
    f.extend(record(16, 4, &[0; 20]));
    let t = parse(&f, "x").unwrap();
    assert_eq!(t.v4, vec![(0xac10_0000, 16, 0), (0xcb00_7100, 24, 1)]);
}

#[test]
fn bits_past_the_prefix_length_are_cleared() {
    let f = rib_record(RIB_IPV4_UNICAST, 20, &[10, 1, 0xff], &[nh4([1, 1, 1, 1])]);
    assert_eq!(parse(&f, "x").unwrap().v4, vec![(0x0a01_f000, 20, 0)]);
}

#[test]
fn broken_records_are_reported_with_their_number_and_offset() {
    let good = rib_record(RIB_IPV4_UNICAST, 24, &[192, 0, 2], &[nh4([198, 18, 0, 2])]);
    let mut f = good.clone();
    let mut bad = good.clone();
    bad.truncate(bad.len() - 3);
    f.extend(&bad);
    let e = parse(&f, "rib.mrt").unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "rib.mrt: MRT record 2 (byte {}): body truncated: {} bytes wanted, {} left",
            good.len(),
            good.len() - 12,
            good.len() - 15
        )
    );
    // A record whose own length is right but whose contents run short.
    let mut short = rib_record(RIB_IPV4_UNICAST, 24, &[192, 0, 2], &[nh4([198, 18, 0, 2])]);
    let body_len = short.len() - 12 - 4;
    short.truncate(short.len() - 4);
    short[8..12].copy_from_slice(&(body_len as u32).to_be_bytes());
    assert!(parse(&short, "x")
        .unwrap_err()
        .to_string()
        .contains("MRT record 1 (byte 0): truncated"));
    let long = rib_record(RIB_IPV4_UNICAST, 33, &[1, 2, 3, 4, 5], &[]);
    assert_eq!(
        parse(&long, "x").unwrap_err().to_string(),
        "x: MRT record 1 (byte 0): prefix length 33 past 32"
    );
    let only_streams = record(16, 4, &[0; 4]);
    assert!(parse(&only_streams, "x")
        .unwrap_err()
        .to_string()
        .contains("not an MRT routing table dump"));
}

proptest::proptest! {
    #[test]
    fn arbitrary_bytes_never_panic(data in proptest::collection::vec(proptest::num::u8::ANY, 0..600)) {
        let _ = parse(&data, "x");
        // With a table dump header in front, the record parsers see the bytes.
        let mut f = record(TABLE_DUMP_V2, RIB_IPV4_UNICAST, &data);
        f.extend(record(TABLE_DUMP_V2, RIB_IPV6_UNICAST_ADDPATH, &data));
        f.extend(record(TABLE_DUMP, 2, &data));
        let _ = parse(&f, "x");
    }
}

#[test]
fn an_ipv6_prefix_takes_the_mp_reach_next_hop_even_beside_a_next_hop_attribute() {
    let mut mp = vec![16];
    mp.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
    let both = attrs(&[
        attr(ATTR_NEXT_HOP, &[192, 0, 2, 1]),
        attr(ATTR_MP_REACH_NLRI, &mp),
    ]);
    let mut f = rib_record(RIB_IPV6_UNICAST, 32, &[0x20, 0x01, 0x0d, 0xb8], &[both]);
    f.extend(rib_record(
        RIB_IPV4_UNICAST,
        24,
        &[192, 0, 2],
        &[nh4([192, 0, 2, 1])],
    ));
    let t = parse(&f, "x").unwrap();
    // Two different next-hop addresses: two numbers.
    assert_eq!(t.v6, vec![(0x2001_0db8u128 << 96, 32, 0)]);
    assert_eq!(t.v4, vec![(0xc000_0200, 24, 1)]);
}

#[test]
fn a_file_that_starts_with_another_mrt_record_is_still_read_as_mrt() {
    // A BGP4MP_ET record first, then a table dump.
    let mut f = record(17, 4, &[0; 24]);
    f.extend(rib_record(
        RIB_IPV4_UNICAST,
        24,
        &[192, 0, 2],
        &[nh4([198, 18, 0, 2])],
    ));
    assert!(looks_like_mrt(&f));
    assert_eq!(
        crate::table::parse(&f, "x").unwrap().v4,
        vec![(0xc000_0200, 24, 0)]
    );
    // Only message records: refused as no table dump, not as text.
    let streams = record(16, 4, &[0; 24]);
    assert!(crate::table::parse(&streams, "x")
        .unwrap_err()
        .to_string()
        .contains("not an MRT routing table dump"));
}
