use super::net::Simulation;
use super::*;

const MS: u64 = 1_000_000;

/// A small mesh with servers too fast to overload, for runs that test one effect.
fn small(servers: usize, scheme: Scheme) -> SimConfig {
    SimConfig {
        server_gbps: 1000.0,
        duration_ns: 5 * MS,
        scheme,
        ..SimConfig::new(servers)
    }
}

fn run_ok(cfg: &SimConfig) -> Results {
    run(cfg).unwrap_or_else(|e| panic!("{}", e))
}

/// The load the traffic actually offered, as a fraction of R: the heavy-tailed flow
/// sizes make it vary by a few percent around the configured load.
fn offered_load(cfg: &SimConfig, r: &Results) -> f64 {
    r.offered_bytes as f64 * 8.0 / (cfg.servers as f64 * cfg.port_gbps * cfg.duration_ns as f64)
}

fn assert_near(what: &str, got: f64, want: f64, tolerance: f64) {
    assert!(
        (got - want).abs() <= tolerance * want,
        "{}: {} is not within {} % of {}",
        what,
        got,
        tolerance * 100.0,
        want
    );
}

#[test]
fn every_offered_packet_is_delivered_or_dropped() {
    let matrices = [Matrix::Uniform, Matrix::Permutation, Matrix::Hotspot { hot: 0.3 }];
    let mut drops = [0; 3];
    for scheme in Scheme::ALL {
        for matrix in matrices {
            // Overloaded everywhere, so every kind of resource drops.
            let cfg = SimConfig {
                load: 1.2,
                link_gbps: 3.0,
                server_gbps: 15.0,
                buffer_bytes: 16 * 1024,
                matrix,
                packet_size: PacketSize::Imix,
                duration_ns: 2 * MS,
                scheme,
                ..SimConfig::new(6)
            };
            let r = run_ok(&cfg);
            assert!(r.offered_packets > 10_000, "{:?}", r);
            assert_eq!(
                r.offered_packets,
                r.delivered_packets + r.dropped_server + r.dropped_link + r.dropped_port,
                "{} {:?}",
                scheme.name(),
                matrix
            );
            let c = r.counts;
            assert_eq!(c.local + c.direct + c.balanced, r.offered_packets);
            drops[0] += r.dropped_server;
            drops[1] += r.dropped_link;
            drops[2] += r.dropped_port;
        }
    }
    assert!(drops.iter().all(|&d| d > 0), "drops by kind: {:?}", drops);
}

#[test]
fn the_same_seed_gives_the_same_results_and_another_seed_others() {
    let cfg = SimConfig {
        duration_ns: 2 * MS,
        ..small(8, Scheme::DirectFlowlets)
    };
    let a = run_ok(&cfg);
    assert_eq!(a, run_ok(&cfg));
    let b = run_ok(&SimConfig { seed: 2, ..cfg });
    assert_ne!(a.offered_packets, b.offered_packets);
    assert_ne!(a, b);
}

#[test]
fn every_scheme_sees_the_same_traffic() {
    let offered: Vec<(u64, u64, u64)> = Scheme::ALL
        .iter()
        .map(|&s| {
            let r = run_ok(&SimConfig {
                duration_ns: 2 * MS,
                ..small(8, s)
            });
            (r.offered_packets, r.offered_bytes, r.flows)
        })
        .collect();
    assert!(offered.iter().all(|o| *o == offered[0]), "{:?}", offered);
}

/// Permutation traffic at 0.9 R over links of R/2: straight paths carry 0.9 R on a
/// link of 0.5 R and lose the excess; VLB spreads each server's traffic so that every
/// link carries 2 × 0.9 R / N. (Link i→i+1 carries the share of i's traffic that drew i
/// or i+1, 2/N of it; any other link i→j carries 1/N of i's traffic on its first hop
/// and 1/N of (j−1)'s on its second.)
#[test]
fn vlb_evens_out_a_permutation_that_overloads_straight_paths() {
    let base = SimConfig {
        link_gbps: 5.0,
        matrix: Matrix::Permutation,
        duration_ns: 10 * MS,
        ..small(8, Scheme::DirectOnly)
    };
    let direct = run_ok(&base);
    let load = offered_load(&base, &direct);
    let lost = direct.dropped_link as f64 / direct.offered_packets as f64;
    // Every link i→i+1 is overloaded throughout, so it carries its rate for the
    // duration and then the buffer it drains; the rest of what its server offered is
    // lost (1 − 0.5/0.9 = 44 % without the buffer).
    let offered_bits = direct.offered_bytes as f64 * 8.0;
    let carried_bits =
        base.servers as f64 * (base.link_gbps * base.duration_ns as f64 + 8.0 * base.buffer_bytes as f64);
    let expected = 1.0 - carried_bits / offered_bits;
    assert!(
        (lost - expected).abs() < 0.005,
        "direct-only lost {} at links, expected {} at load {}",
        lost,
        expected,
        load
    );
    assert_eq!(direct.dropped_server, 0);

    let vlb = run_ok(&SimConfig {
        scheme: Scheme::Vlb,
        ..base.clone()
    });
    assert_eq!((vlb.dropped_link, vlb.dropped_server), (0, 0), "{:?}", vlb);
    let even = 2.0 * load * base.port_gbps / (8.0 * base.link_gbps);
    assert_near(
        "vlb's mean link utilisation",
        vlb.mean_link_utilisation(),
        even,
        0.02,
    );
    let max = vlb.max_link_utilisation();
    // The servers' loads vary with their elephant flows, and the links' with them.
    assert!(max >= even && max < 1.3 * even, "max {} for {}", max, even);
    assert!(direct.max_link_utilisation() > 0.99);
}

/// Uniform traffic, servers too fast to overload. Classic VLB: a local packet (1/N of
/// them) passes one server; another goes direct when the draw falls on its input or
/// output server (2/N: two servers) and else through an intermediate (three), so a
/// server handles load × (1/N + (N−1)/N × (2·2/N + 3(N−2)/N)) = load × (3 − 4/N + 2/N²)
/// of R. Direct VLB sends everything within the share straight: load × (2 − 1/N), plus
/// one more pass for what it balances when a destination's flows burst above R/N.
#[test]
fn direct_vlb_costs_servers_2r_where_classic_vlb_costs_3r() {
    let n = 16.0;
    let base = SimConfig {
        load: 0.5,
        duration_ns: 10 * MS,
        ..small(16, Scheme::Vlb)
    };
    let vlb = run_ok(&base);
    let load = offered_load(&base, &vlb);
    assert_near(
        "vlb's mean server load",
        vlb.mean_server_load(),
        load * (3.0 - 4.0 / n + 2.0 / (n * n)),
        0.02,
    );
    let direct = run_ok(&SimConfig {
        scheme: Scheme::Direct,
        ..base.clone()
    });
    let c = direct.counts;
    let balanced = c.balanced as f64 / direct.offered_packets as f64;
    assert!(balanced < 0.1, "direct balanced {}", balanced);
    let all_direct = load * (2.0 - 1.0 / n);
    let got = direct.mean_server_load();
    assert!(
        got >= all_direct * 0.99 && got <= all_direct * (1.0 + balanced) * 1.01,
        "direct's mean server load {} against {} with {} balanced",
        got,
        all_direct,
        balanced
    );
    assert!(got < 0.8 * vlb.mean_server_load());
}

#[test]
fn flowlets_cut_reordering() {
    let vlb = run_ok(&small(8, Scheme::Vlb));
    let per_packet = vlb.reordered_fraction();
    // Packets of a flow often come closer together than the extra hop of a balanced
    // path (a link's 0.8 us and 2 us of propagation): per packet, some overtake.
    assert!(per_packet > 0.01, "vlb reordered {}", per_packet);
    let flowlets = run_ok(&small(8, Scheme::DirectFlowlets));
    assert!(flowlets.counts.flowlet_hits > flowlets.offered_packets / 2);
    assert!(
        flowlets.reordered_fraction() <= per_packet / 5.0,
        "direct+flowlets reordered {} against vlb's {}",
        flowlets.reordered_fraction(),
        per_packet
    );
    let direct = run_ok(&small(8, Scheme::DirectOnly));
    assert_eq!(direct.reordered, 0, "one path a flow cannot reorder");
}

#[test]
fn a_hot_server_gets_no_more_than_its_port_rate() {
    let cfg = SimConfig {
        load: 0.5,
        matrix: Matrix::Hotspot { hot: 1.0 },
        ..small(4, Scheme::Vlb)
    };
    let r = run_ok(&cfg);
    // Four servers at 0.5 R offer 2 R to server 0's port of R, which sends R for the
    // duration, then what its buffer and the links still hold (5 % more here at most).
    let port_bits = cfg.port_gbps * cfg.duration_ns as f64;
    let delivered_bits = r.delivered_bytes as f64 * 8.0;
    assert!(
        (0.97 * port_bits..1.05 * port_bits).contains(&delivered_bits),
        "{} bits out of a port that sends {} in the duration",
        delivered_bits,
        port_bits
    );
    assert!(r.offered_bytes as f64 * 8.0 > 1.8 * port_bits);
    assert_eq!(r.dropped_port, r.dropped());
}

#[test]
fn a_mesh_of_256_servers_runs() {
    let cfg = SimConfig {
        duration_ns: 50_000,
        ..small(256, Scheme::DirectFlowlets)
    };
    let r = run_ok(&cfg);
    assert_eq!(r.link_utilisation.len(), 256 * 255);
    assert!(r.offered_packets > 10_000);
    assert_eq!(r.offered_packets, r.delivered_packets + r.dropped());
}

/// A mesh with no traffic but what a test injects, with service times easy to add up:
/// 1,000 bytes take 800 ns at R = L = 10 Gbps and 320 ns at C = 25 Gbps.
fn empty_mesh() -> Simulation {
    let cfg = SimConfig {
        server_gbps: 25.0,
        ..SimConfig::new(4)
    };
    Simulation::new(&cfg).unwrap()
}

#[test]
fn one_packet_takes_the_sum_of_its_service_times_and_propagation() {
    // 0 -> 1 -> 2: three processors, two links, each 2 us long, one port.
    let mut sim = empty_mesh();
    sim.inject(0, 0, 1, 2, 1000, 0, 0);
    sim.run();
    let r = sim.results();
    assert_eq!(r.delivered_packets, 1);
    assert_eq!(
        r.latency_mean_us,
        (3 * 320 + 2 * (800 + 2000) + 800) as f64 / 1000.0
    );
    assert!((r.latency_p99_us - 7.36).abs() < 0.0736);

    // Straight: two processors, one link, the port.
    let mut sim = empty_mesh();
    sim.inject(5_000, 0, 2, 2, 1000, 0, 0);
    sim.run();
    assert_eq!(sim.results().latency_mean_us, 4.24);
}

#[test]
fn packets_queue_behind_each_other_and_overflow_the_buffer() {
    let cfg = SimConfig {
        server_gbps: 25.0,
        buffer_bytes: 2000,
        ..SimConfig::new(4)
    };
    let mut sim = Simulation::new(&cfg).unwrap();
    // Three local packets at once: the first leaves the processor at 320 ns and the
    // port at 1,120; the second waits for both (640, then 1,120 + 800 = 1,920); the
    // third finds the processor's 2,000 bytes full.
    for seq in 0..3 {
        sim.inject(0, 3, 3, 3, 1000, 0, seq);
    }
    sim.run();
    let r = sim.results();
    assert_eq!((r.delivered_packets, r.dropped_server), (2, 1));
    assert_eq!(r.latency_mean_us, 1.52);
    // Once the first has left the port, at 1,120 ns, there is room again everywhere.
    let mut sim = Simulation::new(&cfg).unwrap();
    for (at, seq) in [(0, 0), (0, 1), (1_120_000, 2)] {
        sim.inject(at, 3, 3, 3, 1000, 0, seq);
    }
    sim.run();
    assert_eq!(sim.results().dropped(), 0);
}

#[test]
fn a_packet_that_overtakes_an_earlier_one_counts_it_as_reordered() {
    let mut sim = empty_mesh();
    // Packet 0 goes through server 1 (7.36 us); packet 1, 1 us later, goes straight
    // (4.24 us) and arrives first.
    sim.inject(0, 0, 1, 2, 1000, 7, 0);
    sim.inject(1_000_000, 0, 2, 2, 1000, 7, 1);
    // Another flow's packets in order.
    sim.inject(0, 1, 3, 3, 1000, 8, 0);
    sim.inject(1_000_000, 1, 3, 3, 1000, 8, 1);
    sim.run();
    let r = sim.results();
    assert_eq!((r.delivered_packets, r.reordered), (4, 1));
}

#[test]
fn bad_configurations_are_refused_with_reasons() {
    let err = |c: SimConfig| run(&c).err().unwrap();
    let ok = SimConfig::new(8);
    assert_eq!(err(SimConfig::new(1)), "a mesh has 2 to 256 servers, not 1");
    assert_eq!(err(SimConfig::new(257)), "a mesh has 2 to 256 servers, not 257");
    assert_eq!(
        err(SimConfig {
            load: 0.0,
            ..ok.clone()
        }),
        "the load is a fraction of each port's rate above 0 and at most 10 (0.9 for 90 %), not 0"
    );
    assert_eq!(
        err(SimConfig {
            link_gbps: -1.0,
            ..ok.clone()
        }),
        "the link rate must be at least 0.001 Gbps, not -1"
    );
    assert_eq!(
        err(SimConfig {
            matrix: Matrix::Hotspot { hot: 0.0 },
            ..ok.clone()
        }),
        "the hot fraction is above 0 and at most 1, not 0"
    );
    assert_eq!(
        err(SimConfig {
            buffer_bytes: 1499,
            packet_size: PacketSize::Imix,
            ..ok.clone()
        }),
        "a buffer of 1499 bytes cannot hold one 1500-byte packet"
    );
    assert_eq!(
        err(SimConfig {
            packet_size: PacketSize::Fixed(10),
            ..ok.clone()
        }),
        "a packet has 64 to 9000 bytes, not 10"
    );
    assert!(err(SimConfig {
        flowlet_gap_ns: Some(0),
        ..ok.clone()
    })
    .starts_with("a flowlet gap of 0"));
    assert!(err(SimConfig { duration_ns: 0, ..ok }).starts_with("the duration is above 0"));
}

#[test]
fn flow_sizes_have_the_documented_mean() {
    let mean = mean_flow_packets();
    assert!((4.5..4.8).contains(&mean), "{}", mean);
}

#[test]
fn schemes_by_name() {
    for s in Scheme::ALL {
        assert_eq!(Scheme::parse(s.name()), Some(s));
    }
    assert_eq!(Scheme::parse("Direct+Flowlets"), Some(Scheme::DirectFlowlets));
    assert_eq!(Scheme::parse("ecmp"), None);
}

#[test]
fn flows_that_send_nothing_in_the_run_are_not_counted() {
    // 1 ns of traffic: the flows in progress at time 0 send their next packet later.
    let r = run_ok(&SimConfig {
        duration_ns: 1,
        ..small(8, Scheme::Vlb)
    });
    assert_eq!((r.offered_packets, r.flows), (0, 0));
    let r = run_ok(&small(8, Scheme::Vlb));
    assert!(
        r.flows > 0 && r.flows <= r.offered_packets,
        "{} flows, {} packets",
        r.flows,
        r.offered_packets
    );
}

#[test]
fn a_failed_server_loses_what_is_balanced_through_it_until_it_is_marked_down() {
    let fail = |detected_after_ns| Failure {
        server: 3,
        at_ns: 2 * MS,
        detected_after_ns,
    };
    let runs = |scheme, failure| {
        run_ok(&SimConfig {
            failure,
            ..small(6, scheme)
        })
    };
    let never = runs(Scheme::Vlb, Some(fail(None)));
    let at_once = runs(Scheme::Vlb, Some(fail(Some(0))));
    let later = runs(Scheme::Vlb, Some(fail(Some(MS / 2))));
    let healthy = runs(Scheme::Vlb, None);
    for r in [&never, &at_once, &later, &healthy] {
        assert_eq!(r.offered_packets, r.delivered_packets + r.dropped(), "{:?}", r);
    }
    assert_eq!((healthy.dropped_failed, healthy.lost_in_transit), (0, 0));
    // Traffic from and to the failed server is lost however soon it is marked down.
    assert!(
        at_once.dropped_failed > at_once.lost_in_transit && at_once.lost_in_transit < 100,
        "{:?}",
        at_once
    );
    // Without detection, about a third of what the others balance (1/6 of draws
    // land on server 3 for each of them) dies there for the remaining 3 ms.
    assert!(
        never.lost_in_transit > 20 * at_once.lost_in_transit.max(1),
        "{:?} {:?}",
        never,
        at_once
    );
    assert!(
        later.lost_in_transit > at_once.lost_in_transit && later.lost_in_transit < never.lost_in_transit / 3
    );
    // Sending straight relays nothing: nothing else is lost there.
    let direct = runs(Scheme::DirectOnly, Some(fail(None)));
    assert_eq!(direct.lost_in_transit, 0);
    assert!(direct.dropped_failed > 0);
}

#[test]
fn failures_that_cannot_happen_are_refused() {
    let with = |failure| SimConfig {
        failure: Some(failure),
        ..small(4, Scheme::Vlb)
    };
    let f = Failure {
        server: 4,
        at_ns: MS,
        detected_after_ns: None,
    };
    assert_eq!(
        with(f).check().unwrap_err(),
        "server 4 cannot fail: the mesh has servers 0 to 3"
    );
    assert_eq!(
        with(Failure {
            server: 1,
            at_ns: 5 * MS,
            ..f
        })
        .check()
        .unwrap_err(),
        "a failure at 5000000 ns comes after the 5000000 ns of traffic"
    );
}

/// An n-fly of `servers` edge servers, with links of 2R (the planner's bundle for one
/// external port) and switching servers of twice what their k links bring, so that
/// they never queue for long.
fn fly(radix: usize, servers: usize, scheme: Scheme) -> SimConfig {
    SimConfig {
        topology: Topology::NFly {
            radix,
            switch_gbps: 2.0 * 20.0 * radix as f64,
        },
        link_gbps: 20.0,
        ..small(servers, scheme)
    }
}

#[test]
fn a_packet_crosses_every_stage_of_the_n_fly_twice_when_balanced() {
    // A 2-ary 2-fly: 4 servers, two stages of two switching servers. 1,000 bytes take
    // 320 ns at a server (25 Gbps), 200 at a switching server (40 Gbps), 400 on a link
    // (20 Gbps) and 800 at the port; each link adds 2 us.
    let cfg = SimConfig {
        server_gbps: 25.0,
        topology: Topology::NFly {
            radix: 2,
            switch_gbps: 40.0,
        },
        link_gbps: 20.0,
        ..SimConfig::new(4)
    };
    let transit = 400 + 2000 + 2 * (200 + 400 + 2000);
    // 0 -> 1 -> 2: three servers, two crossings, the port.
    let mut sim = Simulation::new(&cfg).unwrap();
    sim.inject(0, 0, 1, 2, 1000, 0, 0);
    sim.run();
    let r = sim.results();
    assert_eq!(r.delivered_packets, 1);
    assert_eq!(r.latency_mean_us, (3 * 320 + 2 * transit + 800) as f64 / 1000.0);
    // Straight 0 -> 2: two servers, one crossing.
    let mut sim = Simulation::new(&cfg).unwrap();
    sim.inject(0, 0, 2, 2, 1000, 0, 0);
    sim.run();
    let r = sim.results();
    assert_eq!(r.latency_mean_us, (2 * 320 + transit + 800) as f64 / 1000.0);
    // The straight packet crossed 3 of the 12 links (its uplink, a link between the
    // stages and the downlink) and 2 of the 4 switching servers: 1,000 bytes in 20 ms
    // of a 20 Gbps link.
    let busy: Vec<f64> = r.link_utilisation.iter().copied().filter(|&u| u > 0.0).collect();
    assert_eq!(r.link_utilisation.len(), 4 + 2 * 4);
    assert_eq!(busy.len(), 3);
    assert!(
        busy.iter()
            .all(|&u| (u - 1000.0 * 8.0 / (20.0 * 20e6)).abs() < 1e-12),
        "{:?}",
        busy
    );
    assert_eq!(r.switch_utilisation.len(), 4);
    assert_eq!(r.switch_utilisation.iter().filter(|&&u| u > 0.0).count(), 2);
}

/// The transpose matrix sends the traffic of the four servers with the same low
/// digits (in a 2-ary 4-fly) over one link from the second stage to the third: 3 ×
/// 0.9R (the fourth is its own destination) on a link of 2R. Sending straight loses about a quarter of
/// it there; VLB spreads every pair's traffic over all the paths and loses nothing.
#[test]
fn vlb_evens_out_what_the_butterfly_would_send_down_one_link() {
    let straight = run_ok(&SimConfig {
        matrix: Matrix::Transpose,
        ..fly(2, 16, Scheme::DirectOnly)
    });
    let vlb = run_ok(&SimConfig {
        matrix: Matrix::Transpose,
        ..fly(2, 16, Scheme::Vlb)
    });
    for r in [&straight, &vlb] {
        assert_eq!(r.offered_packets, r.delivered_packets + r.dropped(), "{:?}", r);
        assert_eq!((r.dropped_server, r.dropped_switch), (0, 0));
    }
    let lost = straight.dropped_link as f64 / straight.offered_packets as f64;
    // 1 − 2/2.7 of 12/16 of the traffic, less what the buffers absorb.
    assert!((0.12..0.22).contains(&lost), "{}", lost);
    assert!(straight.max_link_utilisation() > 0.99);
    assert_eq!(vlb.dropped_link, 0, "{:?}", vlb);
    assert!(
        vlb.max_link_utilisation() < 0.95,
        "{}",
        vlb.max_link_utilisation()
    );
    // Under VLB a packet of the 12 servers that send crosses the butterfly 1 + 14/16
    // times on average (once when the draw is its input or output server), and each
    // crossing passes one of a stage's 8 switching servers: 12 × 0.9R × 1.875 / 8 =
    // 2.53R each, of their 8R (at the load the traffic actually offered).
    let load = offered_load(&fly(2, 16, Scheme::Vlb), &vlb);
    assert_near(
        "switch load",
        vlb.mean_switch_utilisation(),
        12.0 * load * 1.875 / 8.0 / 8.0,
        0.05,
    );
}

#[test]
fn an_n_fly_of_256_servers_runs() {
    let cfg = SimConfig {
        duration_ns: 50_000,
        ..fly(2, 256, Scheme::DirectFlowlets)
    };
    let r = run_ok(&cfg);
    assert_eq!(r.link_utilisation.len(), 256 + 8 * 256);
    assert_eq!(r.switch_utilisation.len(), 8 * 128);
    assert!(r.offered_packets > 10_000);
    assert_eq!(r.offered_packets, r.delivered_packets + r.dropped());
}

#[test]
fn a_failed_edge_server_of_an_n_fly_is_balanced_around_once_marked_down() {
    let runs = |detected_after_ns| {
        run_ok(&SimConfig {
            failure: Some(Failure {
                server: 5,
                at_ns: 2 * MS,
                detected_after_ns,
            }),
            ..fly(2, 8, Scheme::Vlb)
        })
    };
    let (never, at_once) = (runs(None), runs(Some(0)));
    assert!(at_once.lost_in_transit < 100, "{:?}", at_once);
    assert!(
        never.lost_in_transit > 20 * at_once.lost_in_transit.max(1),
        "{:?}",
        never
    );
}

#[test]
fn n_flies_that_cannot_be_built_are_refused() {
    let err = |c: SimConfig| run(&c).err().unwrap();
    assert_eq!(
        err(fly(2, 12, Scheme::Vlb)),
        "an n-fly of radix 2 joins a power of 2 servers (2, 4, 8 ...), not 12"
    );
    assert_eq!(
        err(fly(4, 32, Scheme::Vlb)),
        "an n-fly of radix 4 joins a power of 4 servers (4, 16, 64 ...), not 32"
    );
    assert_eq!(
        err(fly(1, 8, Scheme::Vlb)),
        "an n-fly's radix is at least 2, not 1"
    );
    assert_eq!(
        err(SimConfig {
            topology: Topology::NFly {
                radix: 2,
                switch_gbps: 0.0
            },
            ..SimConfig::new(8)
        }),
        "the switching servers' capacity must be at least 0.001 Gbps, not 0"
    );
    assert_eq!(
        err(SimConfig {
            matrix: Matrix::Transpose,
            ..SimConfig::new(8)
        }),
        "the transpose matrix needs a square number of servers (4, 9, 16, 64, 256 ...), not 8"
    );
    assert_eq!(Topology::stages(2, 256), Some(8));
    assert_eq!(Topology::stages(16, 256), Some(2));
    assert_eq!(Topology::stages(256, 256), Some(1));
    assert_eq!(Topology::stages(3, 2), None);
}

#[test]
fn the_transpose_matrix_swaps_the_halves_of_a_server_number() {
    // 9 servers, m = 3: 1 = 0·3 + 1 sends to 1·3 + 0 = 3; 4 = 1·3 + 1 to itself.
    let r = run_ok(&SimConfig {
        matrix: Matrix::Transpose,
        ..small(9, Scheme::DirectOnly)
    });
    // The three servers x·3 + x send only to themselves: a third of the traffic.
    assert_near(
        "local share",
        r.counts.local as f64 / r.offered_packets as f64,
        1.0 / 3.0,
        0.1,
    );
    let busy = r.link_utilisation.iter().filter(|&&u| u > 0.0).count();
    assert_eq!(busy, 6);
}
