use super::*;
use proptest::prelude::*;

const MS: u64 = 1_000_000;

fn histogram(b: &mut Balancer, dest: usize, packets: u32, spacing: u64, bytes: u32) -> Vec<u32> {
    let mut h = vec![0; b.config().nodes];
    for i in 0..packets {
        // A new flow every packet: no flowlet applies.
        h[b.choose(u64::from(i) * spacing, dest, i.wrapping_mul(2_654_435_761), bytes)] += 1;
    }
    h
}

#[test]
fn traffic_for_this_server_stays_local() {
    let mut b = Balancer::new(Config::vlb(2, 4)).unwrap();
    assert_eq!(b.choose(0, 2, 7, 64), 2);
    assert_eq!(
        b.counts(),
        Counts {
            local: 1,
            ..Counts::default()
        }
    );
}

#[test]
fn classic_vlb_draws_the_intermediate_from_all_servers() {
    let mut b = Balancer::new(Config::vlb(0, 4)).unwrap();
    let h = histogram(&mut b, 2, 40_000, 1, 64);
    // Drawing server 0 (itself) or 2 (the output) means the direct path: half.
    assert_eq!(h[0], 0, "{:?}", h);
    assert!((19_000..21_000).contains(&h[2]), "{:?}", h);
    assert!((9_400..10_600).contains(&h[1]), "{:?}", h);
    assert!((9_400..10_600).contains(&h[3]), "{:?}", h);
    let c = b.counts();
    assert_eq!(
        (c.direct, c.balanced, c.local),
        (u64::from(h[2]), u64::from(h[1] + h[3]), 0)
    );
}

#[test]
fn direct_vlb_sends_the_fair_share_straight_and_balances_the_rest() {
    // 1 MB/s direct share; 1,000-byte packets every 0.5 ms offer 2 MB/s for 2 s.
    let cfg = Config {
        direct_rate: 1e6,
        direct_burst: 1000.0,
        ..Config::direct(1, 5, 5e6)
    };
    let mut b = Balancer::new(cfg).unwrap();
    let h = histogram(&mut b, 3, 4000, MS / 2, 1000);
    assert_eq!(h[1], 0, "never through itself: {:?}", h);
    assert_eq!(h[3], 2000, "exactly the share goes direct: {:?}", h);
    for k in [0, 2, 4] {
        assert!(
            (560..780).contains(&h[k]),
            "the rest evenly over 0, 2 and 4: {:?}",
            h
        );
    }
}

#[test]
fn direct_vlb_within_the_share_sends_everything_direct() {
    let mut b = Balancer::new(Config::direct(0, 4, 4e6)).unwrap();
    // 1 MB/s share, 500 kB/s offered.
    let h = histogram(&mut b, 3, 1000, MS, 500);
    assert_eq!(h, vec![0, 0, 0, 1000]);
}

#[test]
fn a_share_smaller_than_a_frame_still_sends_frames_direct() {
    // 1 Gbit/s ports and 256 servers: a share of 488 kB/s, so 1 ms of it is 488 bytes.
    let mut b = Balancer::new(Config::direct(0, 256, 1.25e8)).unwrap();
    for i in 0..10u64 {
        // 1,000-byte frames, one a second: well within the share.
        assert_eq!(b.choose(i * 1_000_000_000, 1, i as u32, 1000), 1, "frame {}", i);
    }
}

#[test]
fn two_servers_have_no_intermediate() {
    let cfg = Config {
        direct_rate: 1.0,
        ..Config::direct(0, 2, 2.0)
    };
    let mut b = Balancer::new(cfg).unwrap();
    assert_eq!(histogram(&mut b, 1, 100, 1, 1500), vec![0, 100]);
}

#[test]
fn a_flowlet_keeps_its_path_and_the_next_one_draws_again() {
    let cfg = Config {
        flowlet_gap: Some(100 * MS),
        ..Config::vlb(0, 8)
    };
    let mut b = Balancer::new(cfg).unwrap();
    let flow = 0xdead_beef;
    let mut paths = std::collections::BTreeSet::new();
    let mut t = 0;
    for _flowlet in 0..64 {
        let first = b.choose(t, 5, flow, 64);
        for _ in 0..20 {
            t += 10 * MS;
            assert_eq!(
                b.choose(t, 5, flow, 64),
                first,
                "packets 10 ms apart stay on the path"
            );
        }
        paths.insert(first);
        t += 100 * MS; // a gap as long as the flowlet gap: a new flowlet
    }
    assert!(paths.len() >= 5, "new flowlets draw again: {:?}", paths);
    let c = b.counts();
    assert_eq!(c.flowlet_hits, 64 * 20);
    assert_eq!(c.direct + c.balanced, 64 * 21);
}

#[test]
fn a_flow_that_finds_its_slot_taken_does_not_inherit_the_path() {
    let cfg = Config {
        flowlet_gap: Some(100 * MS),
        flowlet_slots: 1,
        ..Config::vlb(0, 64)
    };
    let mut b = Balancer::new(cfg).unwrap();
    // Flows 1 and 2 share the only slot; alternating, each packet is a new decision.
    let mut hits_for_2 = 0;
    for i in 0..200 {
        b.choose(i, 9, 1, 64);
        let before = b.counts().flowlet_hits;
        b.choose(i, 9, 2, 64);
        hits_for_2 += b.counts().flowlet_hits - before;
    }
    assert_eq!(hits_for_2, 0);
}

#[test]
fn a_new_output_server_for_a_flow_starts_a_new_flowlet() {
    let cfg = Config {
        flowlet_gap: Some(100 * MS),
        ..Config::direct(0, 4, 4e9)
    };
    let mut b = Balancer::new(cfg).unwrap();
    assert_eq!(b.choose(0, 1, 42, 64), 1);
    // The route changed: the flow now leaves by server 3.
    assert_eq!(b.choose(1, 3, 42, 64), 3);
    assert_eq!(b.counts().flowlet_hits, 0);
}

#[test]
fn a_direct_flowlet_is_balanced_once_its_share_runs_out() {
    // Share 1 MB/s with a 2,000-byte burst; one flow of 1,000-byte packets every
    // 0.1 ms (10 MB/s, ten times the share) for 1 s.
    let cfg = Config {
        direct_rate: 1e6,
        direct_burst: 2000.0,
        flowlet_gap: Some(100 * MS),
        ..Config::direct(0, 4, 4e6)
    };
    let mut b = Balancer::new(cfg).unwrap();
    let mut direct_bytes = 0u64;
    let mut paths = Vec::new();
    for i in 0..10_000u64 {
        let next = b.choose(i * MS / 10, 2, 7, 1000);
        if next == 2 {
            direct_bytes += 1000;
        }
        paths.push(next);
    }
    // The burst, then the flow leaves the direct path and keeps its new one.
    assert_eq!(&paths[..2], &[2, 2]);
    assert_ne!(paths[2], 2);
    assert!(
        paths[2..].iter().all(|&p| p == paths[2]),
        "one flowlet on the intermediate"
    );
    // Never more than the share over the second, plus the burst.
    assert!(direct_bytes <= 1_000_000 + 2000, "{}", direct_bytes);
    let c = b.counts();
    assert_eq!((c.direct, c.balanced), (2, 9998));
}

#[test]
fn direct_flowlets_within_their_share_stay_direct() {
    let cfg = Config {
        flowlet_gap: Some(100 * MS),
        ..Config::direct(0, 4, 4e6)
    };
    let mut b = Balancer::new(cfg).unwrap();
    // 1,000-byte packets every 2 ms: 500 kB/s of a 1 MB/s share.
    for i in 0..1000u64 {
        assert_eq!(b.choose(i * 2 * MS, 3, 9, 1000), 3);
    }
    assert_eq!(b.counts().flowlet_hits, 999);
}

#[test]
fn a_down_server_relays_nothing() {
    let mut b = Balancer::new(Config::vlb(0, 4)).unwrap();
    b.set_down(&[1]);
    assert_eq!(b.down(), vec![1]);
    let h = histogram(&mut b, 2, 30_000, 1, 64);
    // As in a mesh of 0, 2 and 3: server 3 for a third, the direct path for the rest.
    assert_eq!((h[0], h[1]), (0, 0), "{:?}", h);
    assert!((9_400..10_600).contains(&h[3]), "{:?}", h);
    b.set_down(&[]);
    assert_eq!(b.down(), Vec::<usize>::new());
    assert!(histogram(&mut b, 2, 1000, 1, 64)[1] > 0, "up again");
}

#[test]
fn direct_vlb_balances_over_the_servers_up_only() {
    let cfg = Config {
        direct_rate: 1.0,
        direct_burst: 0.0,
        ..Config::direct(0, 6, 6.0)
    };
    let mut b = Balancer::new(cfg).unwrap();
    // This server and a server outside the mesh are ignored.
    b.set_down(&[0, 2, 4, 9]);
    assert_eq!(b.down(), vec![2, 4]);
    let h = histogram(&mut b, 3, 6000, 1, 100);
    assert_eq!((h[0], h[2], h[3], h[4]), (0, 0, 0, 0), "{:?}", h);
    assert!(
        (2700..3300).contains(&h[1]) && (2700..3300).contains(&h[5]),
        "{:?}",
        h
    );
    // With every other server down there is only the direct path.
    b.set_down(&[1, 2, 4, 5]);
    assert_eq!(histogram(&mut b, 3, 100, 1, 100)[3], 100);
}

#[test]
fn a_flowlet_through_a_server_that_goes_down_is_balanced_anew() {
    let cfg = Config {
        flowlet_gap: Some(100 * MS),
        ..Config::vlb(0, 8)
    };
    let mut b = Balancer::new(cfg).unwrap();
    // A flow whose flowlet goes through an intermediate.
    let flow = (0..1000u32).find(|&f| b.choose(0, 5, f, 64) != 5).unwrap();
    let relay = b.choose(1, 5, flow, 64);
    assert_ne!(relay, 5);
    b.set_down(&[relay]);
    let hits = b.counts().flowlet_hits;
    let next = b.choose(2, 5, flow, 64);
    assert_ne!(next, relay);
    assert_eq!(
        b.counts().flowlet_hits,
        hits,
        "a new decision, not the flowlet's path"
    );
    // The new path holds for the rest of the flowlet.
    assert_eq!(b.choose(3, 5, flow, 64), next);
}

#[test]
fn configurations_that_cannot_run_are_refused() {
    let err = |c: Config| Balancer::new(c).err().unwrap();
    assert_eq!(err(Config::vlb(0, 1)), "a mesh has 2 to 256 servers, not 1");
    assert_eq!(err(Config::vlb(0, 257)), "a mesh has 2 to 256 servers, not 257");
    assert_eq!(
        err(Config::vlb(4, 4)),
        "server 4 is not in a mesh of 4 (servers are numbered from 0)"
    );
    assert_eq!(
        err(Config::direct(0, 4, 0.0)),
        "the direct rate must be positive, not 0"
    );
    let c = Config {
        flowlet_slots: 1000,
        ..Config::vlb(0, 4)
    };
    assert_eq!(
        err(c),
        "the flowlet table has a power of two slots, up to 16777216, not 1000"
    );
    let c = Config {
        flowlet_gap: Some(0),
        ..Config::vlb(0, 4)
    };
    assert!(err(c).starts_with("a flowlet gap of 0"));
}

#[test]
fn schemes_by_name() {
    assert_eq!(Scheme::parse("Direct"), Some(Scheme::Direct));
    assert_eq!(Scheme::parse("vlb"), Some(Scheme::Vlb));
    assert_eq!(Scheme::parse("ecmp"), None);
}

proptest! {
    #[test]
    fn the_next_server_is_in_the_mesh_and_never_this_one_for_others(
        nodes in 2usize..40,
        node_seed in any::<usize>(),
        direct in any::<bool>(),
        gap in prop::option::of(1u64..1_000_000),
        packets in prop::collection::vec((any::<usize>(), 0u32..64, 1u32..1600, 0u64..100_000), 1..200),
    ) {
        let node = node_seed % nodes;
        let base = if direct { Config::direct(node, nodes, 1e9) } else { Config::vlb(node, nodes) };
        let mut b = Balancer::new(Config { flowlet_gap: gap, flowlet_slots: 16, ..base }).unwrap();
        let mut t = 0;
        for (d, flow, bytes, dt) in packets {
            t += dt;
            let dest = d % nodes;
            let next = b.choose(t, dest, flow, bytes);
            prop_assert!(next < nodes);
            prop_assert!(next != node || dest == node);
        }
    }
}

proptest! {
    #[test]
    fn no_packet_goes_through_a_down_server(
        nodes in 3usize..20,
        direct in any::<bool>(),
        down_seed in any::<u64>(),
        packets in prop::collection::vec((any::<usize>(), 0u32..8, 0u64..10_000), 1..200),
    ) {
        let base = if direct { Config::direct(0, nodes, 1e6) } else { Config::vlb(0, nodes) };
        let mut b = Balancer::new(Config { flowlet_gap: Some(5_000), flowlet_slots: 8, ..base }).unwrap();
        let down: Vec<usize> = (1..nodes).filter(|k| down_seed >> (k % 64) & 1 == 1).collect();
        let mut t = 0;
        for (i, (d, flow, dt)) in packets.into_iter().enumerate() {
            if i == 50 {
                b.set_down(&down);
            }
            t += dt;
            let dest = d % nodes;
            let next = b.choose(t, dest, flow, 1000);
            prop_assert!(i < 50 || next == dest || !down.contains(&next));
        }
    }
}
