//! Four brickroute servers in a full mesh acting as one router (root needed): traffic
//! from one external port to all four is looked up once at its input server, sent by
//! Direct VLB straight to its output server or through an intermediate, and every
//! packet reaches its host, each flow in order (flowlets), and a server marked down
//! relays nothing; IPv6 frames too. (The layout: tests/common/mesh.rs.)

mod common;
#[path = "common/control_client.rs"]
mod control_client;
#[path = "common/mesh.rs"]
mod mesh;
#[path = "common/netns.rs"]
mod netns;
#[path = "common/router_process.rs"]
mod router_process;

use mesh::{generate, host_mac, is_root, report, server_mac, sink, Mesh};
use std::time::Duration;

const SERVERS: usize = 4;
const FLOWS: u64 = 1020;
const PER_FLOW: u64 = 20;

/// Packets the generator sends to host j's network: flow f goes to host f of
/// 198.19.0.0/22, that is 198.19.0.0 + 1 + f, so 198.19.0.0/24 gets flows 0-254,
/// the next two 256 flows each and 198.19.3.0/24 the last 253.
fn packets_to(j: usize) -> u64 {
    let flows = (0..FLOWS).filter(|f| ((1 + f) / 256) as usize == j).count() as u64;
    flows * PER_FLOW
}

/// A UDP/IPv6 frame from 2001:db8:0::2 port `sport` to 2001:db8:2::1 port 9 with hop
/// limit `hops`, from `src` to `dst` on Ethernet.
fn udp6(dst: [u8; 6], src: [u8; 6], hops: u8, sport: u16) -> Vec<u8> {
    let payload = b"brickroute mesh";
    let udp_len = (8 + payload.len()) as u16;
    let mut f = dst.to_vec();
    f.extend_from_slice(&src);
    f.extend_from_slice(&[0x86, 0xdd, 0x60, 0, 0, 0]);
    f.extend_from_slice(&udp_len.to_be_bytes());
    f.extend_from_slice(&[17, hops]);
    f.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
    f.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
    f.extend_from_slice(&sport.to_be_bytes());
    f.extend_from_slice(&9u16.to_be_bytes());
    f.extend_from_slice(&udp_len.to_be_bytes());
    f.extend_from_slice(&[0, 0]);
    f.extend_from_slice(payload);
    f
}

#[test]
fn a_mesh_of_four_servers_delivers_every_packet_once_and_in_order() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    // A direct share of 1 Mbit/s for each output server: the generator's 5,000 packets
    // a second to each (2.4 Mbit/s) need balancing. Flowlets of 100 ms (the default)
    // hold each flow, which sends every 51 ms, on one path.
    let mut m = Mesh::new(SERVERS, "RATE 4Mbps", "");

    // Server 3 is marked down at server 0: it relays nothing (traffic for its own
    // host still goes to it).
    let status = m.clients[0].status("WRITE vlb.down 3\n");
    assert!(status.starts_with("200"), "{status}");

    let sinks: Vec<_> = (0..SERVERS)
        .map(|j| sink(&m.hosts[j], &format!("e{j}"), packets_to(j)))
        .collect();
    generate(&m, "198.19.0.0/22", FLOWS, FLOWS * PER_FLOW);

    for (j, (s, _)) in sinks.into_iter().enumerate() {
        let r = report(s, &format!("sink {j}"));
        assert_eq!(r["delivered"], packets_to(j), "host {j}: {r}");
        assert_eq!(r["duplicates"], 0, "host {j}: {r}");
        assert_eq!(
            r["reordered"], 0,
            "host {j}: flowlets keep each flow on one path: {r}"
        );
    }

    // IPv6, once the IPv4 run is over: frames of 16 flows from h0 to h2's network,
    // each looked up at s0 and delivered by s2 with its hop limit one less.
    let before = m.count(0, "vlb.direct") + m.count(0, "vlb.balanced");
    let out = m.hosts[0].run(|| netns::RawSocket::open("e0"));
    let inbox = m.hosts[2].run(|| netns::RawSocket::open("e2"));
    for flow in 0..16u16 {
        out.send(&udp6(server_mac(0), host_mac(0), 64, 5000 + flow));
    }
    let mut arrived = Vec::new();
    while let Some(f) = inbox.recv(Duration::from_secs(3)) {
        if f.get(12..14) == Some(&[0x86, 0xdd][..]) {
            arrived.push(f);
        }
        if arrived.len() == 16 {
            break;
        }
    }
    arrived.sort();
    let mut expected: Vec<Vec<u8>> = (0..16u16)
        .map(|flow| udp6(host_mac(2), server_mac(2), 63, 5000 + flow))
        .collect();
    expected.sort();
    assert_eq!(arrived, expected);
    let after = m.count(0, "vlb.direct") + m.count(0, "vlb.balanced");
    assert_eq!(after - before, 16);
    let local = m.count(0, "vlb.local");
    let direct = m.count(0, "vlb.direct");
    let balanced = m.count(0, "vlb.balanced");
    assert_eq!(local, packets_to(0));
    assert_eq!(direct + balanced, FLOWS * PER_FLOW - packets_to(0) + 16);
    assert!(direct > 0 && balanced > 0, "direct {direct}, balanced {balanced}");
    // Every balanced packet was relayed once, by a server other than the input server,
    // and every packet that crossed the mesh was delivered by its output server.
    let relayed: Vec<u64> = (0..SERVERS).map(|i| m.count(i, "relayed.count")).collect();
    assert_eq!((relayed[0], relayed[3]), (0, 0), "{relayed:?}");
    assert!(relayed[1] > 0 && relayed[2] > 0, "{relayed:?}");
    assert_eq!(relayed.iter().sum::<u64>(), balanced, "{relayed:?}");
    let delivered: u64 = (0..SERVERS).map(|i| m.count(i, "delivered.count")).sum();
    assert_eq!(delivered, direct + balanced);
    for i in 0..SERVERS {
        assert_eq!(m.count(i, "dropped.count"), 0, "server {i}");
    }
}
