use super::*;
use graph::testing::{build_error, Harness};
use packet::Packet;

/// An Ethernet frame carrying a UDP/IPv4 packet from 10.0.0.1 port `sport` to
/// 10.9.9.9 port 53, `len` bytes in all.
fn frame(sport: u16, len: usize) -> Packet {
    let mut f = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00];
    let ip_len = (len - 14) as u16;
    f.extend_from_slice(&[
        0x45,
        0,
        (ip_len >> 8) as u8,
        ip_len as u8,
        0,
        0,
        0,
        0,
        64,
        17,
        0,
        0,
    ]);
    f.extend_from_slice(&[10, 0, 0, 1, 10, 9, 9, 9]);
    f.extend_from_slice(&sport.to_be_bytes());
    f.extend_from_slice(&[0, 53, ((ip_len - 20) >> 8) as u8, (ip_len - 20) as u8, 0, 0]);
    f.resize(len, 0);
    Packet::from_slice(&f)
}

fn flows(n: u16) -> Vec<Packet> {
    (0..n).map(|i| frame(1000 + i, 100)).collect()
}

fn counts(outs: &[Vec<Packet>]) -> Vec<usize> {
    outs.iter().map(Vec::len).collect()
}

#[test]
fn vlb_spreads_a_destination_over_the_mesh() {
    let mut h = Harness::new(&VlbSwitchClass, "0, SCHEME vlb, FLOWLET 0", 4, 4);
    let mut out = vec![0; 4];
    for _ in 0..10 {
        for (k, n) in counts(&h.push(2, flows(400))).into_iter().enumerate() {
            out[k] += n;
        }
    }
    // Server 0 never relays to itself; drawing 0 or 2 sends straight to 2.
    assert_eq!(out[0], 0, "{:?}", out);
    assert!((1800..2200).contains(&out[2]), "{:?}", out);
    assert!(
        (850..1150).contains(&out[1]) && (850..1150).contains(&out[3]),
        "{:?}",
        out
    );
    assert_eq!(h.read("direct"), out[2].to_string());
    assert_eq!(h.read("balanced"), (out[1] + out[3]).to_string());
    assert_eq!(h.read("local"), "0");
}

#[test]
fn traffic_for_this_server_leaves_on_its_own_output() {
    let mut h = Harness::new(&VlbSwitchClass, "1, SCHEME vlb", 3, 3);
    assert_eq!(counts(&h.push(1, flows(50))), vec![0, 50, 0]);
    assert_eq!(h.read("local"), "50");
}

#[test]
fn direct_vlb_within_its_share_sends_straight() {
    // 1 Tbps: a test cannot push past a 333 Gbps share.
    let mut h = Harness::new(&VlbSwitchClass, "2, RATE 1000Gbps, FLOWLET 0", 3, 3);
    assert_eq!(counts(&h.push(0, flows(200))), vec![200, 0, 0]);
    assert_eq!(h.read("direct"), "200");
}

#[test]
fn direct_vlb_balances_what_exceeds_the_share() {
    // A share of a byte a second and a burst floored at one 1,518-byte frame: of 100-byte packets
    // pushed at once, 15 fit the burst, the rest go through server 1.
    let mut h = Harness::new(&VlbSwitchClass, "0, RATE 24bps, FLOWLET 0", 3, 3);
    assert_eq!(counts(&h.push(2, flows(100))), vec![0, 85, 15]);
    assert_eq!((h.read("direct"), h.read("balanced")), ("15".into(), "85".into()));
}

#[test]
fn a_flow_stays_on_one_path_within_its_flowlet() {
    let mut h = Harness::new(&VlbSwitchClass, "0, SCHEME vlb", 8, 8);
    let same_flow: Vec<Packet> = (0..64).map(|_| frame(4242, 200)).collect();
    let c = counts(&h.push(5, same_flow));
    assert_eq!(c.iter().filter(|&&n| n > 0).count(), 1, "{:?}", c);
    assert_eq!(c.iter().sum::<usize>(), 64);
    assert_eq!(h.read("flowlet_hits"), "63");
}

#[test]
fn the_least_rate_gives_every_worker_a_share() {
    // 8 bps over 256 servers and 1,024 workers: a tiny share, but a share, with a burst
    // of a full-size frame, so a worker's first frames go direct.
    let mut h = Harness::new(&VlbSwitchClass, "0, RATE 8bps, FLOWLET 0", 256, 256);
    for index in [1, 511, 1023] {
        h.element = h.spec.instantiate(WorkerInfo { index, count: 1024 });
        let out = h.push(7, flows(10));
        assert_eq!(out[7].len(), 10, "worker {}", index);
    }
}

#[test]
fn servers_marked_down_relay_nothing_from_the_next_batch() {
    let mut a = Harness::new(&VlbSwitchClass, "0, SCHEME vlb, FLOWLET 0", 4, 4);
    let mut b = a.another_worker();
    assert!(counts(&a.push(2, flows(400)))[1] > 0);
    assert_eq!(a.read("down"), "");
    a.write("down", "3, 1").unwrap();
    assert_eq!(a.read("down"), "1 3");
    // Both workers take it: only the direct path is left.
    assert_eq!(counts(&a.push(2, flows(400))), vec![0, 0, 400, 0]);
    assert_eq!(counts(&b.push(2, flows(400))), vec![0, 0, 400, 0]);
    a.write("down", "").unwrap();
    assert!(counts(&b.push(2, flows(400)))[1] > 0);
}

#[test]
fn servers_can_start_down() {
    let mut h = Harness::new(&VlbSwitchClass, "0, SCHEME vlb, FLOWLET 0, DOWN 1 3", 4, 4);
    assert_eq!(h.read("down"), "1 3");
    assert_eq!(counts(&h.push(2, flows(100))), vec![0, 0, 100, 0]);
    assert_eq!(
        build_error(&VlbSwitchClass, "0, SCHEME vlb, DOWN 0", 4, 4),
        "e :: VLBSwitch: DOWN: server 0 is this server"
    );
}

#[test]
fn bad_down_servers_are_refused_and_change_nothing() {
    let h = Harness::new(&VlbSwitchClass, "1, SCHEME vlb", 4, 4);
    h.write("down", "2").unwrap();
    for (value, message) in [
        ("4", "server 4 is not in a mesh of 4"),
        ("1", "server 1 is this server"),
        (
            "two",
            "'two' is not a server number (down takes server numbers, 0 to 3)",
        ),
    ] {
        assert_eq!(h.write("down", value).unwrap_err(), message);
        assert_eq!(h.read("down"), "2");
    }
}

#[test]
fn workers_share_the_counts() {
    let mut a = Harness::new(&VlbSwitchClass, "0, SCHEME vlb, FLOWLET 0", 2, 2);
    let mut b = a.another_worker();
    a.push(1, flows(10));
    b.push(1, flows(7));
    // Two servers: nothing to balance over.
    assert_eq!(a.read("direct"), "17");
    assert_eq!(b.read("balanced"), "0");
}

#[test]
fn configurations_that_cannot_run_are_refused() {
    let c = &VlbSwitchClass;
    let build_error = |c: &VlbSwitchClass, config: &str, i: usize, o: usize| {
        let m = build_error(c, config, i, o);
        m.strip_prefix("e :: VLBSwitch: ").map(String::from).unwrap_or(m)
    };
    assert_eq!(
        build_error(c, "0", 3, 3),
        "SCHEME direct needs RATE, the rate of this server's external ports (such as 10Gbps)"
    );
    assert_eq!(
        build_error(c, "0, SCHEME ecmp", 3, 3),
        "SCHEME is 'direct' or 'vlb', not 'ecmp'"
    );
    assert_eq!(
        build_error(c, "0, SCHEME vlb, RATE 10Gbps", 3, 3),
        "RATE is for SCHEME direct; vlb balances everything"
    );
    assert_eq!(
        build_error(c, "0, RATE 0Gbps", 3, 3),
        "RATE must be at least 8bps"
    );
    assert_eq!(build_error(c, "0, RATE 7bps", 3, 3), "RATE must be at least 8bps");
    assert_eq!(
        build_error(c, "3, SCHEME vlb", 3, 3),
        "server 3 is not in a mesh of 3 (servers are numbered from 0)"
    );
    assert_eq!(
        build_error(c, "0, SCHEME vlb", 1, 1),
        "a mesh has at least 2 servers: connect an input and an output for each (this has 1)"
    );
    assert_eq!(
        build_error(c, "0, SCHEME vlb, FLOWLETS 1000", 3, 3),
        "FLOWLETS is a power of two up to 16777216, not 1000"
    );
    assert!(build_error(c, "SCHEME vlb", 3, 3).contains("NODE"));
}

#[test]
fn heartbeats_leave_for_every_other_server_from_worker_0_only() {
    let mut h = Harness::new(&VlbSwitchClass, "1, SCHEME vlb, HEARTBEAT 50ms", 3, 3);
    let (st, out) = h.run();
    assert_eq!(st, TaskStatus::Busy);
    let datas: Vec<Vec<Vec<u8>>> = out
        .iter()
        .map(|o| o.iter().map(|p| p.data().to_vec()).collect())
        .collect();
    // From server 1 (02:b5:00:00:00:01) to servers 0 and 2, sequence 0.
    let mut to0 = vec![2, 0xb5, 0, 0, 0, 0, 2, 0xb5, 0, 0, 0, 1, 0x88, 0xb5];
    to0.extend_from_slice(b"BRVH\x00\x03\x00\x01\x00\x00\x00\x00");
    to0.resize(60, 0);
    let mut to2 = to0.clone();
    to2[5] = 2;
    assert_eq!(datas, vec![vec![to0], vec![], vec![to2]]);
    // The next round is 50 ms away.
    let (st, out) = h.run();
    assert!(matches!(st, TaskStatus::IdleUntil(_)), "{:?}", st);
    assert_eq!(counts(&out), vec![0, 0, 0]);
    assert!(h.element.is_source());
    assert!(!h.element.keeps_router_running());
    assert!(!h.another_worker().element.is_source());
    // Without HEARTBEAT, no source.
    assert!(!Harness::new(&VlbSwitchClass, "1, SCHEME vlb", 3, 3)
        .element
        .is_source());
}

fn heartbeat_from(k: usize, to: usize, nodes: usize) -> Packet {
    Packet::from_slice(&crate::heartbeat::frame(k, to, nodes, 0))
}

#[test]
fn a_silent_server_relays_nothing_until_it_is_heard_again() {
    // Input 4 takes heartbeats; a server is silent after 200 ms without one.
    let config = "0, SCHEME vlb, FLOWLET 0, HEARTBEAT 50ms, TIMEOUT 200ms";
    let mut h = Harness::new(&VlbSwitchClass, config, 5, 4);
    let mut other = h.another_worker();
    // Every server has the timeout to speak up when the mesh starts.
    assert_eq!(h.read("silent"), "");
    assert!(counts(&h.push(2, flows(400)))[3] > 0);
    std::thread::sleep(std::time::Duration::from_millis(250));
    // Servers 1 and 2 speak up; 3 does not. Frames that are no heartbeat for this
    // server are dropped uncounted.
    let out = h.push(
        4,
        vec![
            heartbeat_from(1, 0, 4),
            heartbeat_from(2, 0, 4),
            heartbeat_from(3, 1, 4),
            frame(1, 60),
        ],
    );
    assert_eq!(counts(&out), vec![0, 0, 0, 0]);
    assert_eq!(h.read("heartbeats"), "2");
    assert_eq!(h.read("silent"), "3");
    assert_eq!(h.read("down"), "");
    let ages: Vec<u64> = h
        .read("heard_ms")
        .split(' ')
        .map(|a| a.parse().unwrap())
        .collect();
    assert_eq!(ages[0], 0);
    assert!(ages[1] < 200 && ages[2] < 200 && ages[3] >= 200, "{:?}", ages);
    // Both workers leave server 3 out from their next batch.
    for w in [&mut h, &mut other] {
        let c = counts(&w.push(2, flows(400)));
        assert!(c[3] == 0 && c[1] > 0 && c[2] > 0, "{:?}", c);
    }
    // A server written down stays down whatever is heard.
    h.write("down", "1").unwrap();
    other.push(4, vec![heartbeat_from(3, 0, 4), heartbeat_from(1, 0, 4)]);
    assert_eq!(h.read("silent"), "");
    std::thread::sleep(std::time::Duration::from_millis(2));
    let c = counts(&h.push(2, flows(400)));
    assert!(c[1] == 0 && c[3] > 0, "{:?}", c);
}

#[test]
fn heartbeat_settings_that_cannot_work_are_refused() {
    let c = &VlbSwitchClass;
    let err = |config: &str, i: usize, o: usize| {
        let m = build_error(c, config, i, o);
        m.strip_prefix("e :: VLBSwitch: ").map(String::from).unwrap_or(m)
    };
    assert_eq!(
        err("0, SCHEME vlb", 4, 3),
        "input 3 takes heartbeats: give HEARTBEAT, the interval they come at"
    );
    assert_eq!(
        err("0, SCHEME vlb, TIMEOUT 1s", 3, 3),
        "TIMEOUT is for HEARTBEAT: give the interval heartbeats come at"
    );
    assert_eq!(
        err("0, SCHEME vlb, HEARTBEAT 100ms, TIMEOUT 110ms", 4, 3),
        "TIMEOUT must be longer than HEARTBEAT plus 10ms (a server is silent for a whole interval between heartbeats, and a quiet worker sends up to 10ms late)"
    );
    assert_eq!(
        err("0, SCHEME vlb, HEARTBEAT 100ms, TIMEOUT 1s", 3, 3),
        "TIMEOUT is for watching heartbeats, which come into input 3: connect it"
    );
    assert_eq!(
        err("0, SCHEME vlb, HEARTBEAT 0s", 3, 3),
        "HEARTBEAT must be longer than 0"
    );
    assert_eq!(
        err("0, SCHEME vlb", 5, 3),
        "3 outputs (servers) take 3 inputs, or 4 with the heartbeat input; this has 5"
    );
    // Without the heartbeat input, heartbeats are sent but nothing is watched.
    let h = Harness::new(c, "0, SCHEME vlb, HEARTBEAT 10ms", 3, 3);
    assert!(!h.spec.handlers().iter().any(|x| x.name == "silent"));
}
