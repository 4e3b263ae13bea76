use super::*;

fn server1_of_3() -> ServerConfig {
    ServerConfig {
        node: 1,
        external: "x1".into(),
        external_mac: [2, 0, 0, 0, 1, 1],
        next_hop_mac: [2, 0, 0, 0, 1, 2],
        links: vec![Some("m10".into()), None, Some("m12".into())],
        routes: vec![
            ("10.0.0.0/24".into(), 0),
            ("10.0.1.0/24".into(), 1),
            ("10.0.2.0/24".into(), 2),
        ],
        balancing: "RATE 10Gbps".into(),
        heartbeat: String::new(),
        device: String::new(),
        extra: String::new(),
    }
}

#[test]
fn a_server_looks_up_once_and_balances_by_output_server() {
    let c = server1_of_3().click().unwrap();
    for line in [
        "vlb :: VLBSwitch(1, RATE 10Gbps);",
        "rt :: RadixIPLookup(10.0.0.0/24 0, 10.0.1.0/24 1, 10.0.2.0/24 2);",
        "FromDevice(x1) -> ec :: Classifier(12/0800, 12/86dd, -);",
        "ec[0] -> Strip(14) -> CheckIPHeader -> DecIPTTL -> rt;",
        // No IPv6 routes: IPv6 frames are dropped and counted.
        "ec[1] -> dropped;",
        "ec[2] -> dropped;",
        // Output server 0 is named in the destination address; its own external
        // traffic goes to the next hop.
        "rt[0] -> EtherEncap(0x0800, 02:b5:00:00:00:01, 02:b5:00:00:00:00) -> [0]vlb;",
        "rt[1] -> EtherEncap(0x0800, 02:00:00:00:01:01, 02:00:00:00:01:02) -> [1]vlb;",
        "rt[2] -> EtherEncap(0x0800, 02:b5:00:00:00:01, 02:b5:00:00:00:02) -> [2]vlb;",
        "vlb[0] -> link0;",
        "vlb[1] -> ext;",
        "vlb[2] -> link2;",
        "link0 :: ToDevice(m10);",
        "link2 :: ToDevice(m12);",
    ] {
        assert!(c.lines().any(|l| l == line), "no line {:?} in\n{}", line, c);
    }
}

#[test]
fn ipv6_routes_get_a_lookup_of_their_own() {
    let mut s = server1_of_3();
    s.routes.push(("2001:db8:2::/48".into(), 2));
    let c = s.click().unwrap();
    for line in [
        "rt6 :: LookupIP6Route(2001:db8:2::/48 2);",
        "ec[1] -> Strip(14) -> CheckIP6Header -> GetIP6Address(24) -> DecIP6HLIM -> rt6;",
        "rt6[2] -> EtherEncap(0x86dd, 02:b5:00:00:00:01, 02:b5:00:00:00:02) -> [2]vlb;",
        "rt6[1] -> EtherEncap(0x86dd, 02:00:00:00:01:01, 02:00:00:00:01:02) -> [1]vlb;",
        "rt :: RadixIPLookup(10.0.0.0/24 0, 10.0.1.0/24 1, 10.0.2.0/24 2);",
    ] {
        assert!(c.lines().any(|l| l == line), "no line {:?} in\n{}", line, c);
    }
    assert!(!c.contains("ec[1] -> dropped;"), "{}", c);
}

#[test]
fn frames_from_the_mesh_are_delivered_or_relayed_by_address() {
    let c = server1_of_3().click().unwrap();
    for line in [
        "FromDevice(m10) -> mc0 :: Classifier(0/02b500000001, 0/02b500000000, 0/02b500000002, -);",
        "mc0[0] -> delivered;",
        "mc0[1] -> Paint(0) -> relayed;",
        "mc0[2] -> Paint(2) -> relayed;",
        "mc0[3] -> dropped;",
        "FromDevice(m12) -> mc2 :: Classifier(0/02b500000001, 0/02b500000000, 0/02b500000002, -);",
        "relay[0] -> link0;",
        "relay[2] -> link2;",
        "delivered :: Counter -> EtherRewrite(02:00:00:00:01:01, 02:00:00:00:01:02) -> ext;",
    ] {
        assert!(c.lines().any(|l| l == line), "no line {:?} in\n{}", line, c);
    }
}

#[test]
fn layouts_that_are_not_a_mesh_are_refused() {
    let err = |f: &dyn Fn(&mut ServerConfig)| {
        let mut s = server1_of_3();
        f(&mut s);
        s.click().unwrap_err()
    };
    assert_eq!(err(&|s| s.node = 3), "server 3 is not in a mesh of 3");
    assert_eq!(
        err(&|s| s.links[1] = Some("m11".into())),
        "server 1 has a link to itself (m11)"
    );
    assert_eq!(err(&|s| s.links[2] = None), "no link from server 1 to server 2");
    assert_eq!(
        err(&|s| s.links.truncate(1)),
        "a mesh has 2 to 256 servers, not 1"
    );
    assert_eq!(
        err(&|s| s.routes.push(("0.0.0.0/0".into(), 5))),
        "route 0.0.0.0/0 leaves by server 5, not in a mesh of 3"
    );
}

#[test]
fn device_arguments_reach_every_device() {
    let c = ServerConfig {
        device: "METHOD PACKET".into(),
        ..server1_of_3()
    }
    .click()
    .unwrap();
    assert_eq!(c.matches("Device(").count(), 6, "{}", c);
    assert_eq!(c.matches(", METHOD PACKET)").count(), 6, "{}", c);
}

#[test]
fn server_addresses_carry_the_index() {
    assert_eq!(server_mac(0), [2, 0xb5, 0, 0, 0, 0]);
    assert_eq!(server_mac(255), [2, 0xb5, 0, 0, 0, 255]);
}

#[test]
fn heartbeats_are_sent_and_taken_from_every_link() {
    let c = ServerConfig {
        heartbeat: "HEARTBEAT 20ms, TIMEOUT 100ms".into(),
        ..server1_of_3()
    }
    .click()
    .unwrap();
    for line in [
        "vlb :: VLBSwitch(1, RATE 10Gbps, HEARTBEAT 20ms, TIMEOUT 100ms);",
        "FromDevice(m10) -> mc0 :: Classifier(12/88b5, 0/02b500000001, 0/02b500000000, 0/02b500000002, -);",
        "mc0[0] -> [3]vlb;",
        "mc0[1] -> delivered;",
        "mc0[2] -> Paint(0) -> relayed;",
        "mc0[3] -> Paint(2) -> relayed;",
        "mc0[4] -> dropped;",
        "mc2[0] -> [3]vlb;",
        // Heartbeats leave by the outputs every packet for that server takes.
        "vlb[0] -> link0;",
        "vlb[2] -> link2;",
    ] {
        assert!(c.lines().any(|l| l == line), "no line {:?} in\n{}", line, c);
    }
}
