//! Which interfaces' ARP the XDP program hands the router (root needed): only those
//! whose received frames reach an ARPResponder (or ARPQuerier's reply input), so on an
//! interface the kernel serves the kernel still sees its link's ARP. Checked with a
//! gratuitous ARP the router namespace's kernel must learn (arp_accept), and an ARP
//! request the router itself must answer on the other interface.
//!
//! h0: e0 -- r0 [router: ARPResponder for 10.0.1.1] | r1 10.0.2.1/24 (kernel) -- e1 :h1

mod common;
#[path = "common/netns.rs"]
mod netns;
#[path = "common/router_process.rs"]
mod router_process;

use common::worker_running;
use netns::{veth, Netns, RawSocket};
use router_process::RouterProcess;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const R0_MAC: [u8; 6] = [2, 0, 0, 0, 1, 1];
const E0_MAC: [u8; 6] = [2, 0, 0, 0, 1, 2];
const E1_MAC: [u8; 6] = [2, 0, 0, 0, 2, 2];
/// The MAC h1's gratuitous ARP announces for 10.0.2.2.
const MOVED_MAC: [u8; 6] = [2, 0, 0, 0, 2, 0x99];

fn mac(m: [u8; 6]) -> String {
    m.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(":")
}

/// An ARP frame: `op` (1 request, 2 reply) from `sha`/`spa` about `tha`/`tpa`, to `dst`.
fn arp(dst: [u8; 6], op: u16, sha: [u8; 6], spa: [u8; 4], tha: [u8; 6], tpa: [u8; 4]) -> Vec<u8> {
    let mut f = dst.to_vec();
    f.extend_from_slice(&sha);
    f.extend_from_slice(&[0x08, 0x06, 0, 1, 0x08, 0, 6, 4]);
    f.extend_from_slice(&op.to_be_bytes());
    f.extend_from_slice(&sha);
    f.extend_from_slice(&spa);
    f.extend_from_slice(&tha);
    f.extend_from_slice(&tpa);
    f
}

#[test]
fn only_interfaces_that_feed_arp_elements_hand_the_router_their_arp() {
    let h0 = Netns::new("h0");
    let r = Netns::new("r");
    let h1 = Netns::new("h1");
    veth(&h0, "e0", &mac(E0_MAC), &r, "r0", &mac(R0_MAC));
    veth(&r, "r1", "02:00:00:00:02:01", &h1, "e1", &mac(E1_MAC));
    r.ip(&["addr", "add", "10.0.2.1/24", "dev", "r1"]);
    // The kernel creates neighbour entries from gratuitous ARP.
    r.set_proc_sys("net/ipv4/conf/r1/arp_accept", "1");
    let config = format!(
        "FromDevice(r0) -> c :: Classifier(12/0806 20/0001, -);
         c[0] -> ARPResponder(10.0.1.1 {}) -> ToDevice(r0);
         c[1] -> Discard;
         FromDevice(r1) -> other :: Counter -> Discard;
         ",
        mac(R0_MAC)
    );
    let mut router = RouterProcess(
        // Two workers: one for each of the veths' two receive queues, so the ports are
        // AF_XDP ones (with fewer workers than queues they would fall back to
        // AF_PACKET, where the kernel sees every frame anyway).
        r.brickroute_run(&["--no-summary", "--threads", "2", "-e", &config])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start brickroute"),
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    while !worker_running(router.pid()) {
        if let Some(s) = router.exited() {
            panic!("router exited ({s}): {:?}", router.output());
        }
        assert!(Instant::now() < deadline, "the router never started");
        std::thread::sleep(Duration::from_millis(20));
    }

    // On r0 the router answers ARP for 10.0.1.1, an address the kernel does not have.
    let s0 = h0.run(|| RawSocket::open("e0"));
    let ask = arp([0xff; 6], 1, E0_MAC, [10, 0, 1, 2], [0; 6], [10, 0, 1, 1]);
    let want = arp(E0_MAC, 2, R0_MAC, [10, 0, 1, 1], E0_MAC, [10, 0, 1, 2]);
    let deadline = Instant::now() + Duration::from_secs(10);
    'answered: loop {
        assert!(Instant::now() < deadline, "no ARP reply from the router on r0");
        s0.send(&ask);
        while let Some(f) = s0.recv(Duration::from_millis(200)) {
            if f.len() >= want.len() && f[..want.len()] == want[..] {
                break 'answered;
            }
        }
    }

    // On r1 the kernel learns h1's new MAC from its gratuitous ARP: the XDP program
    // hands r1's ARP to the kernel, as no ARP element reads from r1.
    let s1 = h1.run(|| RawSocket::open("e1"));
    let announce = arp([0xff; 6], 1, MOVED_MAC, [10, 0, 2, 2], [0; 6], [10, 0, 2, 2]);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        s1.send(&announce);
        let o = Command::new("ip")
            .args(["-n", &r.name, "neigh", "show", "10.0.2.2", "dev", "r1"])
            .output()
            .unwrap();
        if String::from_utf8_lossy(&o.stdout).contains(&mac(MOVED_MAC)) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the kernel never learned 10.0.2.2 from r1's gratuitous ARP"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}
