use super::{arp_frame, ip_bytes, ip_packet};
use crate::element::{IdleWait, TaskStatus};
use crate::elements::arp::ARPQuerierClass;
use crate::testing::{build_error, Harness};
use packet::Packet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

const ME: [u8; 6] = [0x00, 0x00, 0xc0, 0xae, 0x67, 0xef];
const ME_IP: [u8; 4] = [10, 0, 0, 1];
const HOP: [u8; 4] = [10, 0, 0, 2];
const HOP_ETH: [u8; 6] = [0x02, 0, 0, 0, 0, 0x02];
const BCAST: [u8; 6] = [0xff; 6];

const CONFIG: &str = "10.0.0.1/24, 00:00:c0:ae:67:ef";

/// A querier with `outputs` outputs and a clock the test sets, at 1 s.
fn querier(config: &str, outputs: usize) -> (Harness, Arc<AtomicU64>) {
    let ms = Arc::new(AtomicU64::new(1000));
    let class = ARPQuerierClass::with_clock(ms.clone());
    (Harness::new(&class, config, 2, outputs), ms)
}

/// The query the element sends for `target`, written out.
fn query_for(target: [u8; 4]) -> Vec<u8> {
    arp_frame(BCAST, ME, 1, ME, ME_IP, [0; 6], target)
}

/// A reply from `ip` at `eth` to this host.
fn reply(ip: [u8; 4], eth: [u8; 6]) -> Vec<u8> {
    arp_frame(ME, eth, 2, eth, ip, ME, ME_IP)
}

/// `ip_bytes(dst, tag)` behind an Ethernet header to `eth` from this host.
fn encapsulated(eth: [u8; 6], dst: [u8; 4], tag: u8) -> Vec<u8> {
    let mut f = eth.to_vec();
    f.extend_from_slice(&ME);
    f.extend_from_slice(&[0x08, 0x00]);
    f.extend_from_slice(&ip_bytes(dst, tag));
    f
}

fn data(ps: &[Packet]) -> Vec<Vec<u8>> {
    ps.iter().map(|p| p.data().to_vec()).collect()
}

#[test]
fn an_unknown_next_hop_is_queried_and_its_packets_leave_after_the_reply() {
    let (mut h, _) = querier(CONFIG, 2);
    let out = h.push(0, vec![ip_packet(HOP, 1), ip_packet(HOP, 2)]);
    assert!(out[0].is_empty());
    #[rustfmt::skip]
    let want_query: [u8; 42] = [
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff,  0x00, 0x00, 0xc0, 0xae, 0x67, 0xef,  0x08, 0x06,
        0x00, 0x01, 0x08, 0x00, 0x06, 0x04,  0x00, 0x01,
        0x00, 0x00, 0xc0, 0xae, 0x67, 0xef,  10, 0, 0, 1,
        0, 0, 0, 0, 0, 0,                    10, 0, 0, 2,
    ];
    assert_eq!(data(&out[1]), vec![want_query.to_vec()]);
    assert_eq!((h.read("queries"), h.read("length")), ("1".into(), "2".into()));
    assert_eq!(h.read("table"), "10.0.0.2 0 00:00:00:00:00:00 0.000000\n");

    // The reply: recorded, and the saved packets leave in order behind their header.
    let out = h.push_bytes(1, &reply(HOP, HOP_ETH));
    #[rustfmt::skip]
    let want_first: Vec<u8> = [
        &[0x02, 0, 0, 0, 0, 0x02,  0x00, 0x00, 0xc0, 0xae, 0x67, 0xef,  0x08, 0x00][..],
        &[0x45, 0, 0, 24, 0, 1, 0, 0, 64, 17, 0x66, 0xd2, 10, 0, 0, 1, 10, 0, 0, 2],
        &[0xde, 0xad, 0xbe, 1],
    ].concat();
    assert_eq!(data(&out[0]), vec![want_first, encapsulated(HOP_ETH, HOP, 2)]);
    assert!(out[1].is_empty());
    assert_eq!(out[0][0].mac_header_offset(), Some(0));
    assert_eq!(h.read("responses"), "1");
    assert_eq!(h.read("length"), "0");
    assert_eq!(h.read("table"), "10.0.0.2 1 02:00:00:00:00:02 0.000000\n");

    // Known now: straight through, no query.
    let out = h.push(0, vec![ip_packet(HOP, 3)]);
    assert_eq!(data(&out[0]), vec![encapsulated(HOP_ETH, HOP, 3)]);
    assert!(out[1].is_empty());
    assert_eq!(h.read("drops"), "0");
    assert_eq!(h.read("stats"), "0 packets killed\n1 ARP queries sent\n");
}

#[test]
fn with_one_output_queries_leave_on_output_0() {
    let (mut h, _) = querier(CONFIG, 1);
    let out = h.push(0, vec![ip_packet(HOP, 1)]);
    assert_eq!(data(&out[0]), vec![query_for(HOP)]);
    let out = h.push_bytes(1, &reply(HOP, HOP_ETH));
    assert_eq!(data(&out[0]), vec![encapsulated(HOP_ETH, HOP, 1)]);
}

#[test]
fn queries_for_an_address_leave_at_most_every_100_ms() {
    let (mut h, ms) = querier(CONFIG, 2);
    let other = [10, 0, 0, 3];
    let out = h.push(
        0,
        vec![
            ip_packet(HOP, 1),
            ip_packet(HOP, 2),
            ip_packet(other, 3),
            ip_packet(HOP, 4),
        ],
    );
    assert_eq!(data(&out[1]), vec![query_for(HOP), query_for(other)]);
    ms.store(1099, Ordering::Relaxed);
    let out = h.push(0, vec![ip_packet(HOP, 5)]);
    assert!(out[1].is_empty(), "a second query within 100 ms");
    ms.store(1100, Ordering::Relaxed);
    let out = h.push(0, vec![ip_packet(HOP, 6), ip_packet(HOP, 7)]);
    assert_eq!(data(&out[1]), vec![query_for(HOP)]);
    assert_eq!(h.read("queries"), "3");
    // All seven wait; the reply releases HOP's six in order.
    assert_eq!(h.read("length"), "7");
    let out = h.push_bytes(1, &reply(HOP, HOP_ETH));
    let tags: Vec<u8> = out[0].iter().map(|p| p.data()[14 + 23]).collect();
    assert_eq!(tags, vec![1, 2, 4, 5, 6, 7]);
    assert_eq!(h.read("length"), "1");
}

#[test]
fn saved_packets_beyond_the_capacities_are_dropped_and_counted() {
    let (mut h, _) = querier(&format!("{}, CAPACITY 2", CONFIG), 2);
    h.push(
        0,
        vec![ip_packet(HOP, 1), ip_packet([10, 0, 0, 3], 2), ip_packet(HOP, 3)],
    );
    assert_eq!((h.read("length"), h.read("drops")), ("2".into(), "1".into()));
    // Released packets free their places.
    let out = h.push_bytes(1, &reply(HOP, HOP_ETH));
    assert_eq!(data(&out[0]), vec![encapsulated(HOP_ETH, HOP, 1)]);
    h.push(0, vec![ip_packet([10, 0, 0, 4], 4)]);
    assert_eq!((h.read("length"), h.read("drops")), ("2".into(), "1".into()));

    let (mut h, _) = querier(&format!("{}, ENTRY_PACKET_CAPACITY 1", CONFIG), 2);
    h.push(
        0,
        vec![ip_packet(HOP, 1), ip_packet(HOP, 2), ip_packet([10, 0, 0, 3], 3)],
    );
    assert_eq!((h.read("length"), h.read("drops")), ("2".into(), "1".into()));

    // One entry, holding packets: no room for a second address.
    let (mut h, _) = querier(&format!("{}, ENTRY_CAPACITY 1", CONFIG), 2);
    let out = h.push(0, vec![ip_packet(HOP, 1), ip_packet([10, 0, 0, 3], 2)]);
    assert_eq!(data(&out[1]), vec![query_for(HOP)]);
    assert_eq!((h.read("count"), h.read("drops")), ("1".into(), "1".into()));
    // Once its packets left, the resolved entry gives way to a new address.
    h.push_bytes(1, &reply(HOP, HOP_ETH));
    let out = h.push(0, vec![ip_packet([10, 0, 0, 3], 3)]);
    assert_eq!(data(&out[1]), vec![query_for([10, 0, 0, 3])]);
    assert_eq!(h.read("table"), "10.0.0.3 0 00:00:00:00:00:00 0.000000\n");
}

#[test]
fn broadcast_multicast_and_zero_destinations() {
    let (mut h, _) = querier(&format!("{}, BROADCAST 10.0.0.127", CONFIG), 2);
    let dsts = [
        [255, 255, 255, 255],
        [10, 0, 0, 127],
        [224, 1, 2, 3],
        [239, 129, 2, 3],
        [0, 0, 0, 0],
    ];
    let out = h.push(
        0,
        dsts.iter()
            .enumerate()
            .map(|(i, d)| ip_packet(*d, i as u8))
            .collect(),
    );
    let mcast = [0x01, 0x00, 0x5e, 0x01, 0x02, 0x03];
    assert_eq!(
        data(&out[0]),
        vec![
            encapsulated(BCAST, dsts[0], 0),
            encapsulated(BCAST, dsts[1], 1),
            encapsulated(mcast, dsts[2], 2),
            // The 24th bit from the end is not copied.
            encapsulated(mcast, dsts[3], 3),
        ]
    );
    assert!(out[1].is_empty());
    assert_eq!((h.read("drops"), h.read("queries")), ("1".into(), "0".into()));
    assert_eq!(h.read("broadcast"), "10.0.0.127");

    // Without BROADCAST, the IP argument's prefix gives it; a bare address has none.
    let (mut h, _) = querier(CONFIG, 2);
    assert_eq!(h.read("broadcast"), "10.0.0.255");
    let out = h.push(0, vec![ip_packet([10, 0, 0, 255], 1)]);
    assert_eq!(data(&out[0]), vec![encapsulated(BCAST, [10, 0, 0, 255], 1)]);
    let (h, _) = querier("10.0.0.1, 00:00:c0:ae:67:ef", 2);
    assert_eq!(h.read("broadcast"), "255.255.255.255");
}

#[test]
fn entries_are_polled_after_poll_timeout_and_expire_after_timeout() {
    let config = format!("{}, TIMEOUT 10s, POLL_TIMEOUT 5s", CONFIG);
    let (mut h, ms) = querier(&config, 2);
    h.write("insert", "10.0.0.2 2:0:0:0:0:2").unwrap();
    let out = h.push(0, vec![ip_packet(HOP, 1)]);
    assert_eq!(data(&out[0]), vec![encapsulated(HOP_ETH, HOP, 1)]);
    assert!(out[1].is_empty());

    // Past POLL_TIMEOUT: still used, and polled unicast (once per 100 ms).
    ms.store(6000, Ordering::Relaxed);
    let out = h.push(0, vec![ip_packet(HOP, 2), ip_packet(HOP, 3)]);
    assert_eq!(
        data(&out[0]),
        vec![encapsulated(HOP_ETH, HOP, 2), encapsulated(HOP_ETH, HOP, 3)]
    );
    let poll = arp_frame(HOP_ETH, ME, 1, ME, ME_IP, [0; 6], HOP);
    assert_eq!(data(&out[1]), vec![poll.clone()]);
    ms.store(6050, Ordering::Relaxed);
    assert!(h.push(0, vec![ip_packet(HOP, 4)])[1].is_empty());
    ms.store(6100, Ordering::Relaxed);
    assert_eq!(data(&h.push(0, vec![ip_packet(HOP, 5)])[1]), vec![poll]);

    // The answer renews the entry: no poll until 5 s after it.
    h.push_bytes(1, &reply(HOP, HOP_ETH));
    ms.store(11_000, Ordering::Relaxed);
    let out = h.push(0, vec![ip_packet(HOP, 6)]);
    assert_eq!(data(&out[0]), vec![encapsulated(HOP_ETH, HOP, 6)]);
    assert!(out[1].is_empty());
    assert_eq!(h.read("table"), "10.0.0.2 1 02:00:00:00:00:02 4.900000\n");

    // Expired (10 s after the answer at 6.1 s): saved again and queried by broadcast.
    ms.store(16_100, Ordering::Relaxed);
    let out = h.push(0, vec![ip_packet(HOP, 7)]);
    assert!(out[0].is_empty());
    assert_eq!(data(&out[1]), vec![query_for(HOP)]);
    assert_eq!(h.read("table"), "10.0.0.2 0 00:00:00:00:00:00 0.000000\n");
}

#[test]
fn zero_timeouts_mean_entries_never_expire_and_are_never_polled() {
    let (mut h, ms) = querier(&format!("{}, TIMEOUT 0, POLL_TIMEOUT 0", CONFIG), 2);
    h.push(0, vec![ip_packet(HOP, 0)]);
    let out = h.push_bytes(1, &reply(HOP, HOP_ETH));
    assert_eq!(data(&out[0]), vec![encapsulated(HOP_ETH, HOP, 0)]);
    ms.store(10_000_000_000, Ordering::Relaxed);
    let out = h.push(0, vec![ip_packet(HOP, 1)]);
    assert_eq!(data(&out[0]), vec![encapsulated(HOP_ETH, HOP, 1)]);
    assert!(out[1].is_empty());
    assert_eq!(h.read("count"), "1");
}

#[test]
fn broadcast_poll_sends_polls_to_everyone() {
    let (mut h, ms) = querier(&format!("{}, POLL_TIMEOUT 1s, BROADCAST_POLL true", CONFIG), 2);
    h.write("insert", "10.0.0.2 2:0:0:0:0:2").unwrap();
    ms.store(2000, Ordering::Relaxed);
    let out = h.push(0, vec![ip_packet(HOP, 1)]);
    assert_eq!(data(&out[0]), vec![encapsulated(HOP_ETH, HOP, 1)]);
    assert_eq!(data(&out[1]), vec![query_for(HOP)]);
}

#[test]
fn saved_packets_are_dropped_3_s_after_the_first_was_saved() {
    let (mut h, ms) = querier(CONFIG, 2);
    h.push(0, vec![ip_packet(HOP, 1)]);
    ms.store(2500, Ordering::Relaxed);
    h.push(0, vec![ip_packet(HOP, 2)]);
    ms.store(3999, Ordering::Relaxed);
    assert_eq!(h.run().0, TaskStatus::Idle);
    assert_eq!(h.read("length"), "2");
    ms.store(4000, Ordering::Relaxed);
    let (st, out) = h.run();
    assert!(out.iter().all(|o| o.is_empty()));
    assert_eq!(st, TaskStatus::Idle);
    assert_eq!((h.read("length"), h.read("drops")), ("0".into(), "2".into()));
    // A late reply has nothing to release.
    let out = h.push_bytes(1, &reply(HOP, HOP_ETH));
    assert!(out[0].is_empty());
}

#[test]
fn a_reply_on_one_worker_releases_the_packets_another_saved_when_it_is_polled() {
    let (mut w0, ms) = querier(CONFIG, 2);
    let mut w1 = w0.another_worker();
    assert_eq!(w0.run().0, TaskStatus::Idle);
    assert_eq!(w0.element.idle_wait(), IdleWait::Nothing);
    w0.push(0, vec![ip_packet(HOP, 1), ip_packet(HOP, 2)]);
    // Holding packets: the worker must keep polling it.
    assert_eq!(w0.element.idle_wait(), IdleWait::Poll);
    // Not resolved yet: polling changes nothing.
    let (st, out) = w0.run();
    assert_eq!(st, TaskStatus::Idle);
    assert!(out.iter().all(|o| o.is_empty()));
    ms.store(1010, Ordering::Relaxed);
    let out = w1.push_bytes(1, &reply(HOP, HOP_ETH));
    assert!(out.iter().all(|o| o.is_empty()));
    let (st, out) = w0.run();
    assert_eq!(st, TaskStatus::Idle);
    assert_eq!(
        data(&out[0]),
        vec![encapsulated(HOP_ETH, HOP, 1), encapsulated(HOP_ETH, HOP, 2)]
    );
    assert_eq!(w0.read("length"), "0");
    // Worker 1 uses the entry worker 0 asked for, without a query.
    let out = w1.push(0, vec![ip_packet(HOP, 3)]);
    assert_eq!(data(&out[0]), vec![encapsulated(HOP_ETH, HOP, 3)]);
    assert_eq!(w1.read("queries"), "1");
}

#[test]
fn saved_packets_leave_before_newer_ones_once_resolved_elsewhere() {
    let (mut w0, _) = querier(CONFIG, 2);
    let mut w1 = w0.another_worker();
    w0.push(0, vec![ip_packet(HOP, 1)]);
    w1.push_bytes(1, &reply(HOP, HOP_ETH));
    let out = w0.push(0, vec![ip_packet(HOP, 2)]);
    assert_eq!(
        data(&out[0]),
        vec![encapsulated(HOP_ETH, HOP, 1), encapsulated(HOP_ETH, HOP, 2)]
    );
}

#[test]
fn frames_on_input_1_that_are_not_usable_replies_are_counted_and_ignored() {
    let (mut h, _) = querier(CONFIG, 2);
    h.push(0, vec![ip_packet(HOP, 1)]);
    let good = reply(HOP, HOP_ETH);
    let mut wrong_ptype = good.clone();
    wrong_ptype[16] = 0x86;
    let mut wrong_type = good.clone();
    wrong_type[13] = 0x00;
    let bad = vec![
        good[..41].to_vec(),
        vec![],
        wrong_ptype,
        wrong_type,
        // A request is not a reply.
        arp_frame(BCAST, HOP_ETH, 1, HOP_ETH, HOP, [0; 6], ME_IP),
        // Group Ethernet addresses and unusable IP addresses are not recorded.
        reply(HOP, BCAST),
        reply(HOP, [0x01, 0, 0x5e, 0, 0, 1]),
        reply([0, 0, 0, 0], HOP_ETH),
        reply([255, 255, 255, 255], HOP_ETH),
        reply([10, 0, 0, 255], HOP_ETH),
        reply([224, 0, 0, 1], HOP_ETH),
    ];
    let n = bad.len();
    let out = h.push(1, bad.iter().map(|b| Packet::from_slice(b)).collect());
    assert!(out.iter().all(|o| o.is_empty()));
    assert_eq!(h.read("drops"), n.to_string());
    assert_eq!((h.read("responses"), h.read("count")), ("0".into(), "1".into()));
    assert_eq!(h.read("length"), "1");
    // A padded reply is fine.
    let mut padded = good;
    padded.resize(60, 0);
    let out = h.push_bytes(1, &padded);
    assert_eq!(data(&out[0]), vec![encapsulated(HOP_ETH, HOP, 1)]);
}

#[test]
fn table_handlers_insert_delete_clear_and_ipaddr() {
    let (mut h, ms) = querier(CONFIG, 2);
    h.write("insert", "10.0.0.9 0:1:2:3:4:5").unwrap();
    h.write("insert", "10.0.0.2 2-0-0-0-0-2").unwrap();
    ms.store(2500, Ordering::Relaxed);
    assert_eq!(
        h.read("table"),
        "10.0.0.2 1 02:00:00:00:00:02 1.500000\n10.0.0.9 1 00:01:02:03:04:05 1.500000\n"
    );
    assert_eq!(h.read("count"), "2");
    let out = h.push(0, vec![ip_packet([10, 0, 0, 9], 1)]);
    assert_eq!(
        data(&out[0]),
        vec![encapsulated([0, 1, 2, 3, 4, 5], [10, 0, 0, 9], 1)]
    );

    // A deleted entry is asked for again.
    h.write("delete", "10.0.0.9").unwrap();
    let out = h.push(0, vec![ip_packet([10, 0, 0, 9], 2)]);
    assert!(out[0].is_empty());
    assert_eq!(data(&out[1]), vec![query_for([10, 0, 0, 9])]);
    assert_eq!(
        h.write("delete", "10.0.0.77"),
        Err("no entry for 10.0.0.77".to_string())
    );

    // Clearing keeps the address packets wait for, unresolved.
    h.write("clear", "").unwrap();
    assert_eq!(h.read("table"), "10.0.0.9 0 00:00:00:00:00:00 0.000000\n");
    let out = h.push(0, vec![ip_packet(HOP, 3)]);
    assert!(out[0].is_empty());

    // Queries name the written source address.
    h.write("ipaddr", "10.0.0.254").unwrap();
    assert_eq!(h.read("ipaddr"), "10.0.0.254");
    let out = h.push(0, vec![ip_packet([10, 0, 0, 5], 4)]);
    let want = arp_frame(BCAST, ME, 1, ME, [10, 0, 0, 254], [0; 6], [10, 0, 0, 5]);
    assert_eq!(data(&out[1]), vec![want]);

    assert_eq!(
        h.write("insert", "10.0.0.2"),
        Err("expected 'IP ETH'".to_string())
    );
    assert_eq!(
        h.write("insert", "10.0.0.2 x"),
        Err("'x' is not an Ethernet address".to_string())
    );
    assert_eq!(
        h.write("insert", "ten 0:0:0:0:0:1"),
        Err("'ten' is not an IP address".to_string())
    );
    assert_eq!(
        h.write("ipaddr", "nope"),
        Err("IP expects IP address".to_string())
    );
    assert_eq!(
        h.write("delete", "nope"),
        Err("'nope' is not an IP address".to_string())
    );
}

#[test]
fn an_inserted_entry_releases_saved_packets() {
    let (mut h, _) = querier(CONFIG, 2);
    h.push(0, vec![ip_packet(HOP, 1)]);
    h.write("insert", "10.0.0.2 2:0:0:0:0:2").unwrap();
    let (_, out) = h.run();
    assert_eq!(data(&out[0]), vec![encapsulated(HOP_ETH, HOP, 1)]);
}

#[test]
fn configuration_errors() {
    let class = ARPQuerierClass::default();
    let err = |c: &str| build_error(&class, c, 2, 1);
    assert_eq!(err("10.0.0.1"), "e :: ARPQuerier: missing mandatory ETH argument");
    assert_eq!(err(""), "e :: ARPQuerier: missing mandatory IP argument");
    assert_eq!(
        err("10.0.0.300, 0:1:2:3:4:5"),
        "e :: ARPQuerier: IP expects IP address"
    );
    assert_eq!(
        err("10.0.0.1, 0:1:2:3:4"),
        "e :: ARPQuerier: ETH expects Ethernet address"
    );
    assert_eq!(
        err("eth0"),
        "e :: ARPQuerier: expected ARPQuerier(IP, ETH) or ARPQuerier(NAME) with an AddressInfo NAME of both, not 'eth0'"
    );
    assert_eq!(
        err("10.0.0.1, 0:1:2:3:4:5, TABLE t"),
        "e :: ARPQuerier: TABLE is not supported: brickroute has no ARPTable element; each ARPQuerier keeps its own table"
    );
    assert_eq!(
        err("10.0.0.1, 0:1:2:3:4:5, TIMEOUT soon"),
        "e :: ARPQuerier: TIMEOUT expects time interval"
    );
    assert_eq!(
        err("10.0.0.1, 0:1:2:3:4:5, CAPACITY -1"),
        "e :: ARPQuerier: CAPACITY expects unsigned integer"
    );
    assert_eq!(
        err("10.0.0.1, 0:1:2:3:4:5, LIMIT 3"),
        "e :: ARPQuerier: bad keyword 'LIMIT'"
    );
}

#[test]
fn in_a_router_the_worker_polls_the_querier_to_release_saved_packets() {
    // Three 60-byte frames in a capture: the router's only source ends after them.
    let dir = std::env::temp_dir().join(format!("brickroute-arpq-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let pcap = dir.join("three.pcap");
    let mut bytes = vec![0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0];
    bytes.extend_from_slice(&[0; 8]);
    bytes.extend_from_slice(&65535u32.to_le_bytes());
    bytes.extend_from_slice(&1u32.to_le_bytes());
    for i in 0..3u32 {
        bytes.extend_from_slice(&i.to_le_bytes());
        bytes.extend_from_slice(&0u32.to_le_bytes());
        bytes.extend_from_slice(&60u32.to_le_bytes());
        bytes.extend_from_slice(&60u32.to_le_bytes());
        bytes.extend_from_slice(&[0x45; 60]);
    }
    // No ARP reply comes: input 1 reads a capture with no frames.
    let empty = dir.join("empty.pcap");
    std::fs::write(&empty, &bytes[..24]).unwrap();
    std::fs::write(&pcap, bytes).unwrap();
    let config = format!(
        "FromDump({}) -> SetIPAddress(10.0.0.2)
        -> q :: ARPQuerier(10.0.0.1/24, 00:00:c0:ae:67:ef);
        FromDump({}) -> [1]q;
        q[0] -> c0 :: Counter -> Discard;
        q[1] -> c1 :: Counter -> Discard;",
        pcap.display(),
        empty.display()
    );
    let flat = crate::lang::parse(&config, "t.click", &Default::default()).unwrap();
    let reg = crate::registry::Registry::with_library();
    let router = crate::router::RouterSpec::build(&flat, &reg, std::path::Path::new("."), 1).unwrap();
    let mut g = router.instantiate(crate::element::WorkerInfo { index: 0, count: 1 });
    let mut passes = 0;
    while !g.run_sources().all_done {
        passes += 1;
        assert!(passes < 10, "the router did not finish");
    }
    // The sources are done, and the querier, which holds three packets, does not
    // keep the router running.
    assert_eq!(router.read_handler("q.length").unwrap(), "3");
    assert_eq!(router.read_handler("c1.count").unwrap(), "1");
    assert_eq!(router.read_handler("c0.count").unwrap(), "0");
    router.write_handler("q.insert", "10.0.0.2 2:0:0:0:0:2").unwrap();
    // No packet arrives: the worker's pass polls the querier, which sends them. They
    // are not new packets from a source: the pass reports none (the worker's count of
    // packets from sources counted them when the source emitted them).
    let pass = g.run_sources();
    assert_eq!(router.read_handler("c0.count").unwrap(), "3");
    assert_eq!(pass.packets, 0);
    assert_eq!(router.read_handler("q.length").unwrap(), "0");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_querier_finishes_when_the_router_is_asked_to_stop() {
    use crate::element::{Context, Outputs, StopFlag, WorkerInfo};
    let (mut h, _) = querier(CONFIG, 2);
    h.push(0, vec![ip_packet(HOP, 1)]);
    let stop = StopFlag::new();
    let mut outs = vec![packet::PacketBatch::new(), packet::PacketBatch::new()];
    let w = WorkerInfo { index: 0, count: 1 };
    let mut cx = Context::new(w, &stop);
    assert_eq!(
        h.element.run(&mut Outputs::new(&mut outs), &mut cx),
        TaskStatus::Idle
    );
    stop.request();
    let mut cx = Context::new(w, &stop);
    assert_eq!(
        h.element.run(&mut Outputs::new(&mut outs), &mut cx),
        TaskStatus::Done
    );
}

#[test]
fn replies_nobody_asked_for_are_not_recorded() {
    let (mut h, _) = querier(CONFIG, 2);
    // Unsolicited: no entry, nothing counted as a response, and the address is still
    // queried for when a packet wants it.
    let out = h.push_bytes(1, &reply(HOP, HOP_ETH));
    assert!(out[0].is_empty() && out[1].is_empty());
    assert_eq!(h.read("table"), "");
    assert_eq!(h.read("responses"), "0");
    let out = h.push(0, vec![ip_packet(HOP, 1)]);
    assert!(out[0].is_empty());
    assert_eq!(data(&out[1]), vec![query_for(HOP)]);
    // The answer to that query is recorded, and a later reply refreshes the entry.
    let out = h.push_bytes(1, &reply(HOP, HOP_ETH));
    assert_eq!(data(&out[0]), vec![encapsulated(HOP_ETH, HOP, 1)]);
    h.push_bytes(1, &reply(HOP, HOP_ETH));
    assert_eq!(h.read("responses"), "2");
}

#[test]
fn a_full_capacity_still_queries_for_new_addresses_and_retries() {
    // A silent host holds CAPACITY; a packet for another next hop is dropped but its
    // address is still queried, and its answer is recorded and used.
    let (mut h, ms) = querier(&format!("{}, CAPACITY 2", CONFIG), 2);
    let silent = [10, 0, 0, 9];
    let out = h.push(0, vec![ip_packet(silent, 1), ip_packet(silent, 2)]);
    assert_eq!(data(&out[1]), vec![query_for(silent)]);
    let out = h.push(0, vec![ip_packet(HOP, 3)]);
    assert!(out[0].is_empty());
    assert_eq!(data(&out[1]), vec![query_for(HOP)]);
    assert_eq!((h.read("length"), h.read("drops")), ("2".into(), "1".into()));
    h.push_bytes(1, &reply(HOP, HOP_ETH));
    let out = h.push(0, vec![ip_packet(HOP, 4)]);
    assert_eq!(data(&out[0]), vec![encapsulated(HOP_ETH, HOP, 4)]);

    // Past ENTRY_PACKET_CAPACITY, packets still send the retries due every 100 ms.
    let (mut h, ms2) = querier(&format!("{}, ENTRY_PACKET_CAPACITY 1", CONFIG), 2);
    let out = h.push(0, vec![ip_packet(HOP, 1)]);
    assert_eq!(data(&out[1]), vec![query_for(HOP)]);
    ms2.store(1050, Ordering::Relaxed);
    assert!(h.push(0, vec![ip_packet(HOP, 2)])[1].is_empty());
    ms2.store(1120, Ordering::Relaxed);
    let out = h.push(0, vec![ip_packet(HOP, 3)]);
    assert_eq!(data(&out[1]), vec![query_for(HOP)]);
    assert_eq!((h.read("length"), h.read("drops")), ("1".into(), "2".into()));
    drop(ms);
}

#[test]
fn a_busy_worker_still_polls_the_querier_for_packets_it_saved() {
    // `busy` moves packets in every pass, before the querier's turn; the querier's
    // one saved packet must leave once its address is known, with no further packet
    // arriving at the querier.
    let config = "busy :: InfiniteSource(BURST 8) -> Discard;
        one :: InfiniteSource(LIMIT 1, ACTIVE false) -> SetIPAddress(10.0.0.2)
        -> q :: ARPQuerier(10.0.0.1/24, 00:00:c0:ae:67:ef);
        busy2 :: InfiniteSource(LIMIT 0) -> [1]q;
        q[0] -> c0 :: Counter -> Discard;
        q[1] -> c1 :: Counter -> Discard;";
    let flat = crate::lang::parse(config, "t.click", &Default::default()).unwrap();
    let reg = crate::registry::Registry::with_library();
    let router = crate::router::RouterSpec::build(&flat, &reg, std::path::Path::new("."), 1).unwrap();
    let mut g = router.instantiate(crate::element::WorkerInfo { index: 0, count: 1 });
    for _ in 0..3 {
        g.run_sources_at(crate::tsc::rdtsc());
    }
    router.write_handler("one.active", "true").unwrap();
    for _ in 0..3 {
        g.run_sources_at(crate::tsc::rdtsc());
    }
    assert_eq!(router.read_handler("q.length").unwrap(), "1");
    router.write_handler("q.insert", "10.0.0.2 2:0:0:0:0:2").unwrap();
    for _ in 0..3 {
        g.run_sources_at(crate::tsc::rdtsc());
    }
    assert_eq!(router.read_handler("c0.count").unwrap(), "1");
    assert_eq!(router.read_handler("q.length").unwrap(), "0");
}

#[test]
fn at_entry_capacity_the_entry_answered_longest_ago_gives_way() {
    let (mut h, ms) = querier(&format!("{}, ENTRY_CAPACITY 3", CONFIG), 2);
    for (t, last) in [(1000, 2), (1001, 3), (1002, 4)] {
        ms.store(t, Ordering::Relaxed);
        h.write("insert", &format!("10.0.0.{last} 2:0:0:0:0:{last}"))
            .unwrap();
    }
    // 10.0.0.2 answers again: 10.0.0.3 is now the oldest.
    ms.store(1003, Ordering::Relaxed);
    h.write("insert", "10.0.0.2 2:0:0:0:0:2").unwrap();
    ms.store(1004, Ordering::Relaxed);
    let out = h.push(0, vec![ip_packet([10, 0, 0, 5], 1)]);
    assert_eq!(data(&out[1]), vec![query_for([10, 0, 0, 5])]);
    let ips: Vec<String> = h
        .read("table")
        .lines()
        .map(|l| l.split(' ').next().unwrap().to_string())
        .collect();
    assert_eq!(ips, ["10.0.0.2", "10.0.0.4", "10.0.0.5"]);
    // The next new address takes the place of 10.0.0.4, not of 10.0.0.5, which holds
    // a packet.
    ms.store(1005, Ordering::Relaxed);
    h.push(0, vec![ip_packet([10, 0, 0, 6], 2)]);
    let ips: Vec<String> = h
        .read("table")
        .lines()
        .map(|l| l.split(' ').next().unwrap().to_string())
        .collect();
    assert_eq!(ips, ["10.0.0.2", "10.0.0.5", "10.0.0.6"]);
}

/// A querier configured with `config` on the clock `ms`, as a replacing configuration
/// builds it.
fn querier_on(ms: &Arc<AtomicU64>, config: &str) -> Harness {
    Harness::new(&ARPQuerierClass::with_clock(ms.clone()), config, 2, 2)
}

#[test]
fn a_replacing_querier_for_the_same_host_takes_the_resolved_entries_and_counts() {
    const OTHER: [u8; 4] = [10, 0, 0, 3];
    let config = format!("{}, TIMEOUT 10s, POLL_TIMEOUT 0", CONFIG);
    let (mut old, ms) = querier(&config, 2);
    old.push(0, vec![ip_packet(HOP, 1)]);
    old.push(1, vec![Packet::from_slice(&reply(HOP, HOP_ETH))]);
    // 10.0.0.3 is still being queried, with a packet waiting.
    old.push(0, vec![ip_packet(OTHER, 2)]);
    assert_eq!(
        (old.read("queries"), old.read("responses")),
        ("2".into(), "1".into())
    );

    ms.store(5000, Ordering::Relaxed);
    let mut new = querier_on(&ms, &config);
    assert!(new.spec.take_state(&*old.spec));
    // The answer from 1 s, not one from now: 4.000 s old.
    assert_eq!(new.read("table"), "10.0.0.2 1 02:00:00:00:00:02 4.000000\n");
    assert_eq!(
        (new.read("queries"), new.read("responses")),
        ("2".into(), "1".into())
    );
    let out = new.push(0, vec![ip_packet(HOP, 3)]);
    assert_eq!(data(&out[0]), vec![encapsulated(HOP_ETH, HOP, 3)]);
    assert!(out[1].is_empty());
    // It expires 10 s after the old querier's answer, not 10 s after the takeover.
    ms.store(11_000, Ordering::Relaxed);
    let out = new.push(0, vec![ip_packet(HOP, 4)]);
    assert!(out[0].is_empty());
    assert_eq!(data(&out[1]), vec![query_for(HOP)]);
}

#[test]
fn an_entry_written_before_the_takeover_stays() {
    let (mut old, ms) = querier(CONFIG, 2);
    old.push(0, vec![ip_packet(HOP, 1)]);
    old.push(1, vec![Packet::from_slice(&reply(HOP, HOP_ETH))]);
    let new = querier_on(&ms, CONFIG);
    new.write("insert", "10.0.0.2 02:00:00:00:00:09").unwrap();
    assert!(new.spec.take_state(&*old.spec));
    assert_eq!(new.read("table"), "10.0.0.2 1 02:00:00:00:00:09 0.000000\n");
}

#[test]
fn a_querier_for_another_host_starts_afresh() {
    let (mut old, ms) = querier(CONFIG, 2);
    old.push(0, vec![ip_packet(HOP, 1)]);
    old.push(1, vec![Packet::from_slice(&reply(HOP, HOP_ETH))]);
    for config in [
        "10.0.0.9/24, 00:00:c0:ae:67:ef",
        "10.0.0.1/24, 00:00:c0:ae:67:e0",
        "10.0.0.1/25, 00:00:c0:ae:67:ef",
    ] {
        let new = querier_on(&ms, config);
        assert!(!new.spec.take_state(&*old.spec), "{config}");
        assert_eq!(new.read("table"), "", "{config}");
        assert_eq!(new.read("queries"), "0", "{config}");
    }
    // The same addresses once the old one's `ipaddr` said so.
    old.write("ipaddr", "10.0.0.9").unwrap();
    let new = querier_on(&ms, "10.0.0.9/24, 00:00:c0:ae:67:ef");
    assert!(new.spec.take_state(&*old.spec));
    assert_eq!(new.read("count"), "1");
}

#[test]
fn under_an_entry_capacity_the_most_recently_answered_are_taken() {
    let (old, ms) = querier(CONFIG, 2);
    for (i, t) in [(2u8, 1000u64), (3, 2000), (4, 3000)] {
        ms.store(t, Ordering::Relaxed);
        old.write("insert", &format!("10.0.0.{i} 02:00:00:00:00:0{i}"))
            .unwrap();
    }
    let new = querier_on(&ms, &format!("{}, ENTRY_CAPACITY 2", CONFIG));
    assert!(new.spec.take_state(&*old.spec));
    assert_eq!(
        new.read("table"),
        "10.0.0.3 1 02:00:00:00:00:03 1.000000\n10.0.0.4 1 02:00:00:00:00:04 0.000000\n"
    );
    // The oldest taken goes first when a new address needs room.
    new.write("insert", "10.0.0.5 02:00:00:00:00:05").unwrap();
    assert!(!new.read("table").contains("10.0.0.3 "));
}

#[test]
fn after_ten_unanswered_queries_one_leaves_every_two_seconds() {
    let (mut h, ms) = querier(CONFIG, 2);
    let mut sent = Vec::new();
    // A packet every 50 ms for 4 s to a host that never answers.
    for t in (1000..5000).step_by(50) {
        ms.store(t, Ordering::Relaxed);
        if !h.push(0, vec![ip_packet(HOP, 1)])[1].is_empty() {
            sent.push(t);
        }
    }
    // Ten at 100 ms, then one 2 s after the tenth.
    let want: Vec<u64> = (0..10).map(|i| 1000 + 100 * i).chain([3900]).collect();
    assert_eq!(sent, want);
    assert_eq!(h.read("queries"), "11");
}

#[test]
fn an_answer_allows_a_poll_at_once() {
    // POLL_TIMEOUT 50 ms: the entry answered at 1.01 s is polled at 1.06 s, although
    // the query before the answer left at 1.0 s (Click's table lets a poll leave as
    // soon as an answer came).
    let (mut h, ms) = querier(&format!("{}, POLL_TIMEOUT 0.05s", CONFIG), 2);
    let out = h.push(0, vec![ip_packet(HOP, 1)]);
    assert_eq!(data(&out[1]), vec![query_for(HOP)]);
    ms.store(1010, Ordering::Relaxed);
    h.push_bytes(1, &reply(HOP, HOP_ETH));
    ms.store(1060, Ordering::Relaxed);
    let out = h.push(0, vec![ip_packet(HOP, 2)]);
    assert_eq!(data(&out[0]), vec![encapsulated(HOP_ETH, HOP, 2)]);
    let poll = arp_frame(HOP_ETH, ME, 1, ME, ME_IP, [0; 6], HOP);
    assert_eq!(data(&out[1]), vec![poll]);
}

#[test]
fn the_table_writes_ethernet_addresses_in_capitals_and_queries_carry_the_time() {
    let (mut h, _) = querier(CONFIG, 2);
    h.write("insert", "10.0.0.2 0a:bb:cc:dd:ee:ff").unwrap();
    assert_eq!(h.read("table"), "10.0.0.2 1 0A:BB:CC:DD:EE:FF 0.000000\n");
    // A query is stamped with the time of the packet that caused it, as Click's.
    let mut p = ip_packet([10, 0, 0, 3], 1);
    p.anno_mut().timestamp = packet::Timestamp::new(59, 250_000_000);
    let out = h.push(0, vec![p]);
    assert_eq!(data(&out[1]), vec![query_for([10, 0, 0, 3])]);
    assert_eq!(
        out[1][0].anno().timestamp,
        packet::Timestamp::new(59, 250_000_000)
    );
}
