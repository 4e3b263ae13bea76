use super::*;
use proptest::prelude::*;

/// RouteBricks-like defaults: 10 Gbps ports, servers of 40 Gbps with 8 NIC ports of
/// 10 Gbps, classic VLB.
fn request(ports: u32) -> Request {
    Request {
        ports,
        rate_gbps: 10.0,
        server: Server {
            capacity_gbps: 40.0,
            nic_ports: 8,
            link_gbps: 10.0,
        },
        scheme: Scheme::Vlb,
    }
}

fn with_server(ports: u32, capacity_gbps: f64, nic_ports: u32, link_gbps: f64) -> Request {
    Request {
        server: Server {
            capacity_gbps,
            nic_ports,
            link_gbps,
        },
        ..request(ports)
    }
}

fn planned(r: &Request) -> Plan {
    plan(r).unwrap_or_else(|e| panic!("{:?}: {}", r, e))
}

#[test]
fn four_ports_make_a_full_mesh_of_four_servers() {
    // 3 × 10 ≤ 40: one port a server; 2·1·10/4 = 5 Gbps a pair: 1 NIC port to each of
    // 3 neighbours, 1 + 3 = 4 NIC ports; 4·3/2 = 6 links.
    let p = planned(&request(4));
    let mesh = Mesh {
        servers: 4,
        ports_per_server: 1,
        ports_per_neighbour: 1,
        nic_ports: 4,
        links: 6,
    };
    assert_eq!(p.mesh, Ok(mesh));
    // The n-fly: 4 edge servers with a 20 Gbps bundle (2 NIC ports); switches take
    // min(8 / (2·2), 40 / 20) = 2 bundles; log2 4 = 2 stages of 2.
    let fly = Fly {
        edge_servers: 4,
        ports_per_server: 1,
        bundle_ports: 2,
        k: 2,
        stages: 2,
        switch_servers: 4,
        nic_ports_edge: 3,
        nic_ports_switch: 8,
        links: 2 * (4 + 2 * 2),
    };
    assert_eq!(p.fly, Ok(fly));
    assert_eq!(p.best(), Ok(Topology::Mesh(&mesh)));
}

#[test]
fn eight_ports_fill_a_server_with_a_full_mesh() {
    let p = planned(&request(8));
    let mesh = p.mesh.clone().unwrap();
    assert_eq!((mesh.servers, mesh.nic_ports, mesh.links), (8, 1 + 7, 28));
    let fly = p.fly.clone().unwrap();
    assert_eq!((fly.stages, fly.switch_servers, fly.servers()), (3, 12, 20));
    assert_eq!(p.best().unwrap().servers(), 8);
}

#[test]
fn sixteen_ports_outgrow_the_mesh_and_take_a_binary_sixteen_fly() {
    let p = planned(&request(16));
    assert_eq!(
        p.mesh,
        Err(
            "a full mesh needs at least 16 NIC ports a server (16 servers of 1 external port), \
             more than the 8 a server has"
                .into()
        )
    );
    // 16 edge servers, k = 2, log2 16 = 4 stages of 8: 16 + 32 = 48 servers.
    let fly = Fly {
        edge_servers: 16,
        ports_per_server: 1,
        bundle_ports: 2,
        k: 2,
        stages: 4,
        switch_servers: 32,
        nic_ports_edge: 3,
        nic_ports_switch: 8,
        links: 2 * (16 + 3 * 2 * 8),
    };
    assert_eq!(p.fly, Ok(fly));
    assert_eq!(p.best(), Ok(Topology::Fly(&fly)));
}

#[test]
fn the_default_sweep_needs_n_times_one_plus_half_log2_n_servers_beyond_eight_ports() {
    let servers: Vec<u64> = (2..=10)
        .map(|b| planned(&request(1 << b)).best().unwrap().servers())
        .collect();
    assert_eq!(servers, [4, 8, 48, 112, 256, 576, 1280, 2816, 6144]);
    assert!(servers.windows(2).all(|w| w[0] <= w[1]), "{:?}", servers);
}

#[test]
fn the_mesh_takes_more_servers_with_fewer_ports_when_neighbours_cost_too_much() {
    // C = 100 allows 3 ports a server: 4 servers would need 3 + 3·ceil(60/40) = 9 NIC
    // ports, 5 servers 3 + 4·ceil(60/50) = 11, 6 servers of 2 ports 2 + 5·1 = 7.
    let p = planned(&with_server(12, 100.0, 8, 10.0));
    assert_eq!(
        p.mesh,
        Ok(Mesh {
            servers: 6,
            ports_per_server: 2,
            ports_per_neighbour: 1,
            nic_ports: 7,
            links: 15,
        })
    );
    // Only e = 1 fits an n-fly (e = 2 needs 4-port bundles: a switch of 2 + 2 needs 16):
    // 12 edge servers, k = 2, 4 stages of 6.
    assert_eq!(p.fly.clone().map(|f| f.servers()), Ok(36));
}

#[test]
fn the_n_fly_search_weighs_ports_a_server_against_k() {
    // R = 10, C = 200, P = 32, L = 40: e = 1 gives k = 10 (78 servers), e = 2 k = 5
    // (53), e = 3 k = 3 (46), e = 4 k = 2 (48), e = 5 (13 edge servers of 5 ports,
    // 3-port bundles, k = min(32/6, 200/100) = 2, 4 stages of 7) 41; e = 6 cannot
    // process 2 bundles of 120 Gbps.
    let p = planned(&with_server(64, 200.0, 32, 40.0));
    assert_eq!(
        p.fly,
        Ok(Fly {
            edge_servers: 13,
            ports_per_server: 5,
            bundle_ports: 3,
            k: 2,
            stages: 4,
            switch_servers: 28,
            nic_ports_edge: 8,
            nic_ports_switch: 12,
            links: 3 * (13 + 3 * 2 * 7),
        })
    );
    // But 11 servers of 6 ports fit a full mesh: 6 + 10 = 16 NIC ports.
    let mesh = p.mesh.clone().unwrap();
    assert_eq!((mesh.servers, mesh.ports_per_server, mesh.nic_ports), (11, 6, 16));
    assert_eq!(p.best().unwrap().servers(), 11);
}

#[test]
fn ports_that_fit_one_server_need_no_interconnect() {
    let p = planned(&with_server(4, 400.0, 8, 10.0));
    assert_eq!(
        p.mesh,
        Ok(Mesh {
            servers: 1,
            ports_per_server: 4,
            ports_per_neighbour: 0,
            nic_ports: 4,
            links: 0,
        })
    );
    let one = planned(&request(1));
    assert_eq!(one.mesh.map(|m| (m.servers, m.links)), Ok((1, 0)));
    assert_eq!(one.fly, Err("one external port needs no interconnect".into()));
}

#[test]
fn direct_vlb_plans_for_two_r_where_classic_vlb_refuses() {
    let vlb = with_server(4, 20.0, 8, 10.0);
    let reason = "a server cannot process one external port (needs 30 Gbps, has 20)";
    let p = planned(&vlb);
    assert_eq!(p.mesh, Err(reason.into()));
    assert_eq!(p.fly, Err(reason.into()));
    assert_eq!(p.best(), Err(reason.into()));

    let p = planned(&Request {
        scheme: Scheme::Direct,
        ..vlb
    });
    assert_eq!(
        p.mesh.clone().map(|m| (m.servers, m.ports_per_server)),
        Ok((4, 1))
    );
    // A switching server would process 2 bundles of 20 Gbps.
    assert_eq!(
        p.fly,
        Err("a switching server of 2 bundles cannot process them (needs 40 Gbps, has 20)".into())
    );
    assert_eq!(p.best().unwrap().servers(), 4);
}

#[test]
fn too_few_nic_ports_name_the_bound_each_topology_breaks() {
    let p = planned(&with_server(4, 40.0, 2, 10.0));
    assert_eq!(
        p.best(),
        Err(
            "full mesh: a full mesh needs at least 4 NIC ports a server (4 servers of 1 external \
             port), more than the 2 a server has; n-fly: an edge server needs 3 NIC ports \
             (1 external, 2 for its 20 Gbps bundle), more than the 2 a server has"
                .into()
        )
    );
    let p = planned(&with_server(16, 40.0, 4, 10.0));
    assert_eq!(
        p.fly,
        Err(
            "a switching server of 2 bundles in and 2 out needs 8 NIC ports, more than the 4 a server has"
                .into()
        )
    );
}

#[test]
fn a_tie_goes_to_the_mesh() {
    let mesh = Mesh {
        servers: 6,
        ports_per_server: 1,
        ports_per_neighbour: 1,
        nic_ports: 6,
        links: 15,
    };
    let fly = Fly {
        edge_servers: 4,
        ports_per_server: 1,
        bundle_ports: 1,
        k: 2,
        stages: 1,
        switch_servers: 2,
        nic_ports_edge: 2,
        nic_ports_switch: 4,
        links: 4,
    };
    let p = Plan {
        request: request(6),
        mesh: Ok(mesh),
        fly: Ok(fly),
    };
    assert_eq!(p.best(), Ok(Topology::Mesh(&mesh)));
}

#[test]
fn bad_requests_are_refused_with_the_reason() {
    let refused = |r: Request| plan(&r).expect_err("refused");
    assert_eq!(
        refused(request(0)),
        "a router has 1 to 1048576 external ports, not 0"
    );
    assert_eq!(
        refused(Request {
            rate_gbps: -1.0,
            ..request(4)
        }),
        "the external port rate must be more than 0 Gbps, not -1"
    );
    assert_eq!(
        refused(with_server(4, 0.0, 8, 10.0)),
        "a server's processing capacity must be more than 0 Gbps, not 0"
    );
    assert_eq!(
        refused(with_server(4, 40.0, 8, f64::NAN)),
        "the NIC port speed must be more than 0 Gbps, not NaN"
    );
    assert_eq!(
        refused(with_server(4, 40.0, 1, 10.0)),
        "a server needs at least 2 NIC ports (one external, one to the other servers), not 1"
    );
    assert_eq!(
        refused(with_server(4, 400.0, 8, 5.0)),
        "R is faster than a NIC port: an external port of 10 Gbps needs a NIC port of its own, \
         and NIC ports run at 5 Gbps"
    );
}

#[test]
fn rounding_does_not_cost_a_port() {
    // 3 × 0.1 Gbps is 0.30000000000000004 in floating point: it still fits 0.3.
    let r = Request {
        rate_gbps: 0.1,
        server: Server {
            capacity_gbps: 0.3,
            nic_ports: 8,
            link_gbps: 0.1,
        },
        ..request(2)
    };
    let mesh = planned(&r).mesh.unwrap();
    // 2·1·0.1 / (2·0.1) is 1 NIC port to the neighbour, not 2.
    assert_eq!(
        (mesh.servers, mesh.ports_per_neighbour, mesh.nic_ports),
        (2, 1, 2)
    );
}

/// Checks `t` against every bound of the model, computed here afresh.
fn check_bounds(r: &Request, t: Topology<'_>) -> Result<(), TestCaseError> {
    let (n, p) = (u64::from(r.ports), u64::from(r.server.nic_ports));
    let (rate, c, l) = (
        r.rate_gbps,
        r.server.capacity_gbps * (1.0 + 1e-9),
        r.server.link_gbps,
    );
    let factor = f64::from(r.processing_factor());
    match t {
        Topology::Mesh(m) => {
            let (s, e) = (m.servers, m.ports_per_server);
            prop_assert!(s * e >= n && e == n.div_ceil(s));
            prop_assert!(factor * e as f64 * rate <= c);
            if s > 1 {
                prop_assert!(
                    m.ports_per_neighbour as f64 * l >= 2.0 * e as f64 * rate / s as f64 * (1.0 - 1e-9)
                );
            }
            prop_assert!(m.nic_ports == e + (s - 1) * m.ports_per_neighbour && m.nic_ports <= p);
        }
        Topology::Fly(f) => {
            let (s, e, k) = (f.edge_servers, f.ports_per_server, f.k);
            prop_assert!(s >= 2 && s * e >= n && e == n.div_ceil(s));
            prop_assert!(factor * e as f64 * rate <= c);
            prop_assert!(f.bundle_ports as f64 * l >= 2.0 * e as f64 * rate * (1.0 - 1e-9));
            prop_assert!(f.nic_ports_edge <= p && f.nic_ports_switch <= p);
            prop_assert!(k >= 2 && k as f64 * 2.0 * e as f64 * rate <= c);
            prop_assert!(k.pow(f.stages as u32) >= s && k.pow(f.stages as u32 - 1) < s);
            prop_assert_eq!(f.switch_servers, f.stages * s.div_ceil(k));
        }
    }
    Ok(())
}

proptest! {
    #[test]
    fn plans_keep_every_bound_and_more_ports_never_take_fewer_servers(
        small in 1u32..3000,
        more in 0u32..3000,
        rate in prop::sample::select(vec![1.0, 2.5, 10.0, 25.0, 40.0, 100.0]),
        link_over_rate in prop::sample::select(vec![1.0, 1.5, 2.0, 4.0, 10.0]),
        capacity_over_rate in 1.0f64..60.0,
        nic_ports in 2u32..64,
        direct in any::<bool>(),
    ) {
        let at = |ports| Request {
            ports,
            rate_gbps: rate,
            server: Server {
                capacity_gbps: rate * capacity_over_rate,
                nic_ports,
                link_gbps: rate * link_over_rate,
            },
            scheme: if direct { Scheme::Direct } else { Scheme::Vlb },
        };
        let (r1, r2) = (at(small), at(small + more));
        let (p1, p2) = (plan(&r1).unwrap(), plan(&r2).unwrap());
        for (r, p) in [(&r1, &p1), (&r2, &p2)] {
            for t in [p.mesh.as_ref().ok().map(Topology::Mesh), p.fly.as_ref().ok().map(Topology::Fly)]
                .into_iter()
                .flatten()
            {
                check_bounds(r, t)?;
            }
        }
        if let Ok(larger) = p2.best() {
            let smaller = p1.best();
            prop_assert!(smaller.is_ok(), "{} ports fit but {} do not: {:?}", small + more, small, smaller);
            prop_assert!(smaller.unwrap().servers() <= larger.servers());
        }
    }
}

#[test]
fn the_reason_no_mesh_fits_names_the_mesh_that_comes_closest() {
    // 100 ports, servers that process anything but hold 4 NIC ports. 5 servers of 20
    // ports need 20 + 4 x ceil(400 / 50) = 52; 15 servers of 7 ports need
    // 7 + 14 x ceil(140 / 150) = 21, the fewest of any mesh.
    let r = Request {
        ports: 100,
        rate_gbps: 10.0,
        server: Server {
            capacity_gbps: 100_000.0,
            nic_ports: 4,
            link_gbps: 10.0,
        },
        scheme: Scheme::Vlb,
    };
    let p = plan(&r).unwrap();
    let reason = p.mesh.unwrap_err();
    assert!(
        reason
            .starts_with("a full mesh needs at least 21 NIC ports a server (15 servers of 7 external ports)"),
        "{}",
        reason
    );
}
