//! `brickroute gen` keeps each flow on one queue (root needed): a veth pair with two
//! queues each way, the generator on one end, and the other end's per-receive-queue
//! counters. A flow split over queues reaches different router workers, and the sink
//! sees reordering that the router did not cause.

#[path = "common/netns.rs"]
mod netns;

use netns::{veth, Netns};
use std::process::Command;
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_brickroute");
const SINK_MAC: &str = "02:00:00:00:00:5b";

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// The CPUs this process may run on.
fn allowed_cpus() -> Vec<usize> {
    // SAFETY: cpu_set_t is plain data; sched_getaffinity writes at most its size.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        assert_eq!(
            libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set),
            0
        );
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &set))
            .collect()
    }
}

/// Frames that arrived on each of `dev`'s two receive queues, from the veth's own
/// counters (`ethtool -S`: `rx_queue_N_xdp_packets`, counted per queue by the
/// receiving end's NAPI).
fn rx_queue_packets(ns: &Netns, dev: &str) -> [u64; 2] {
    let o = Command::new("ip")
        .args(["netns", "exec", &ns.name, "ethtool", "-S", dev])
        .output()
        .expect("run ethtool");
    assert!(
        o.status.success(),
        "ethtool -S {}: {}",
        dev,
        String::from_utf8_lossy(&o.stderr)
    );
    let text = String::from_utf8_lossy(&o.stdout);
    let count = |q: usize| {
        let key = format!("rx_queue_{}_xdp_packets:", q);
        text.lines()
            .find_map(|l| l.trim().strip_prefix(key.as_str()))
            .unwrap_or_else(|| panic!("no {} in:\n{}", key, text))
            .trim()
            .parse::<u64>()
            .unwrap()
    };
    [count(0), count(1)]
}

/// Waits (up to 10 s) until `dev`'s queues have counted `total` frames in all; returns
/// the counts.
fn wait_for_total(ns: &Netns, dev: &str, total: u64) -> [u64; 2] {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let c = rx_queue_packets(ns, dev);
        if c[0] + c[1] >= total || Instant::now() > deadline {
            return c;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Sends `count` frames of `flows` flows out of `ga` with the generator pinned to `cpu`.
fn gen_on_cpu(ns: &Netns, cpu: usize, flows: u32, count: u32) {
    let o = Command::new("taskset")
        .args([
            "-c",
            &cpu.to_string(),
            BIN,
            "gen",
            "--netns",
            &ns.name,
            "-i",
            "ga",
        ])
        .args(["--dst-mac", SINK_MAC, "-q", "--rate", "20000"])
        .args(["--flows", &flows.to_string(), "--count", &count.to_string()])
        .output()
        .expect("run taskset");
    assert!(o.status.success(), "gen: {}", String::from_utf8_lossy(&o.stderr));
    let report = String::from_utf8_lossy(&o.stdout);
    assert!(
        report.contains(&format!("\"packets\":{},", count)),
        "gen sent other than {}: {}",
        count,
        report
    );
}

#[test]
fn a_flow_stays_on_one_receive_queue_whichever_cpu_sends_it_and_flows_use_both() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let (g, s) = (Netns::new("qg"), Netns::new("qs"));
    veth(&g, "ga", "02:00:00:00:00:5a", &s, "sa", SINK_MAC);
    // The receiving veth end counts frames per receive queue only on its NAPI path,
    // which it takes with GRO on, for frames from a sender without TSO.
    for (ns, dev, feature, state) in [(&s, "sa", "gro", "on"), (&g, "ga", "tso", "off")] {
        let o = Command::new("ip")
            .args(["netns", "exec", &ns.name, "ethtool", "-K", dev, feature, state])
            .output()
            .expect("run ethtool");
        assert!(
            o.status.success(),
            "ethtool -K {} {} {}: {}",
            dev,
            feature,
            state,
            String::from_utf8_lossy(&o.stderr)
        );
    }
    let cpus = allowed_cpus();
    assert!(!cpus.is_empty());

    // One flow, sent once from each of two CPUs: every frame on the same queue. (The
    // generator used to pick the transmit queue, and so the peer's receive queue, by
    // the CPU it ran on.)
    let before = rx_queue_packets(&s, "sa");
    let senders: Vec<usize> = cpus.iter().copied().take(2).collect();
    for &cpu in &senders {
        gen_on_cpu(&g, cpu, 1, 500);
    }
    let want = 500 * senders.len() as u64;
    let after = wait_for_total(&s, "sa", before[0] + before[1] + want);
    let got = [after[0] - before[0], after[1] - before[1]];
    assert_eq!(got[0] + got[1], want, "frames per receive queue: {:?}", got);
    assert!(
        got == [want, 0] || got == [0, want],
        "one flow split over the receive queues: {:?} (senders on CPUs {:?})",
        got,
        senders
    );

    // 64 flows from one CPU: both queues get frames.
    let before = after;
    gen_on_cpu(&g, cpus[0], 64, 1000);
    let after = wait_for_total(&s, "sa", before[0] + before[1] + 1000);
    let got = [after[0] - before[0], after[1] - before[1]];
    assert_eq!(got[0] + got[1], 1000, "frames per receive queue: {:?}", got);
    assert!(
        got[0] > 0 && got[1] > 0,
        "64 flows from one CPU all on one receive queue: {:?}",
        got
    );
}
