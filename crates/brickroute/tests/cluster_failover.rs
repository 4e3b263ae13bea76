//! A server of a four-server mesh dies (root needed): the others miss its heartbeats,
//! stop balancing through it, and every packet between the live servers' hosts is
//! still delivered; when it comes back and is heard again, it relays once more.
//! (The layout: tests/common/mesh.rs.)

mod common;
#[path = "common/control_client.rs"]
mod control_client;
#[path = "common/mesh.rs"]
mod mesh;
#[path = "common/netns.rs"]
mod netns;
#[path = "common/router_process.rs"]
mod router_process;

use mesh::{generate, is_root, report, sink, Mesh};
use std::time::Duration;

const SERVERS: usize = 4;

#[test]
fn a_dead_server_is_found_silent_and_relays_nothing_until_it_returns() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    // Classic VLB: a packet for another server goes through a server drawn at random
    // (straight there when the draw is the input or the output server), server 3 too
    // while it is heard.
    let mut m = Mesh::new(SERVERS, "SCHEME vlb", "HEARTBEAT 20ms, TIMEOUT 100ms");
    // Past the timeout every server has been heard: none is silent.
    std::thread::sleep(Duration::from_millis(300));
    for i in 0..SERVERS {
        m.wait_for(i, "vlb.silent", "", Duration::from_secs(10));
        assert!(m.count(i, "vlb.heartbeats") > 0);
    }

    m.kill(3);
    for i in 0..3 {
        m.wait_for(i, "vlb.silent", "3", Duration::from_secs(5));
    }
    assert_eq!(m.read(0, "vlb.down"), "", "written down: nothing");

    // 2,000 frames over 200 flows to h1's network: none is lost through server 3.
    let (s1, _) = sink(&m.hosts[1], "e1", 2000);
    generate(&m, "198.19.1.0/24", 200, 2000);
    let r = report(s1, "sink 1");
    assert_eq!(r["delivered"], 2000, "{r}");
    assert_eq!(r["duplicates"], 0, "{r}");
    // Every balanced packet went through server 2, the one live intermediate.
    let balanced = m.count(0, "vlb.balanced");
    assert!(balanced > 0, "nothing balanced");
    assert_eq!(m.count(2, "relayed.count"), balanced);

    // Server 3 comes back: heard again, it relays again.
    m.restart(3);
    for i in 0..3 {
        m.wait_for(i, "vlb.silent", "", Duration::from_secs(10));
    }
    let (s1, _) = sink(&m.hosts[1], "e1", 2000);
    generate(&m, "198.19.1.0/24", 200, 2000);
    let r = report(s1, "sink 1");
    assert_eq!(r["delivered"], 2000, "{r}");
    assert!(m.count(3, "relayed.count") > 0, "server 3 relays again");
}
