//! RSS of an AF_PACKET interface changed while the router runs (root needed): a router
//! with two workers reads d0 (METHOD PACKET); frames come from a peer namespace; the
//! key and the indirection table are read and written through `brickroute ctl`, and
//! `queue_counts` shows which queue each frame took.

mod common;
#[path = "common/netns.rs"]
mod netns;
#[path = "common/router_process.rs"]
mod router_process;

use common::{stderr, stdout};
use netns::{veth, Netns, RawSocket};
use router_process::RouterProcess;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Microsoft's RSS key, as ethtool prints keys.
const MS_KEY: &str = "6d:5a:56:da:25:5b:0e:c2:41:67:25:3d:43:a3:8f:b0:d0:ca:2b:cb:\
                      ae:7b:30:b4:77:cb:2d:a3:80:30:f2:0c:6a:42:b7:3b:be:ac:01:fa";

fn ctl(sock: &str, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_brickroute"))
        .args(["ctl", "--timeout", "10", "--unix", sock])
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run brickroute ctl")
}

fn read(sock: &str, handler: &str) -> String {
    let o = ctl(sock, &["read", handler]);
    assert!(o.status.success(), "read {}: {}", handler, stderr(&o));
    stdout(&o).trim_end().to_string()
}

fn write(sock: &str, handler: &str, value: &str) {
    let o = ctl(sock, &["write", handler, value]);
    assert!(o.status.success(), "write {} {}: {}", handler, value, stderr(&o));
}

fn queue_counts(sock: &str) -> Vec<u64> {
    read(sock, "fd.queue_counts")
        .split(' ')
        .map(|n| n.parse().unwrap())
        .collect()
}

/// `brickroute run --threads 2 -e CONFIG` in `dut`, once it serves its control socket
/// `sock` and has d0 open.
fn start(dut: &Netns, sock: &std::path::Path, config: &str) -> RouterProcess {
    let mut router = RouterProcess(
        dut.brickroute_run(&["--threads", "2", "--no-summary", "-e", config])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start brickroute"),
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    while !(sock.exists() && dut.link_details("d0").contains("promiscuity 1")) {
        if let Some(st) = router.exited() {
            panic!("router exited ({}): {:?}", st, router.output());
        }
        assert!(Instant::now() < deadline, "router did not open d0");
        std::thread::sleep(Duration::from_millis(20));
    }
    router
}

/// Ethernet + IPv4 + TCP (header only as far as the ports matter), hand-written.
fn tcp_frame(src: [u8; 4], dst: [u8; 4], sport: u16, dport: u16) -> Vec<u8> {
    let mut f = vec![0x02, 0, 0, 0, 0, 0x01, 0x02, 0, 0, 0, 0, 0x02, 0x08, 0x00];
    f.extend_from_slice(&[0x45, 0, 0, 40, 0, 1, 0x40, 0, 64, 6, 0, 0]);
    f.extend_from_slice(&src);
    f.extend_from_slice(&dst);
    f.extend_from_slice(&sport.to_be_bytes());
    f.extend_from_slice(&dport.to_be_bytes());
    f.resize(14 + 40, 0);
    f.resize(60, 0);
    f
}

/// Sends `frames` and waits until the router counted them; returns what each queue
/// received meanwhile.
fn deltas(sock: &str, peer: &RawSocket, frames: &[Vec<u8>]) -> Vec<u64> {
    let before = queue_counts(sock);
    let seen = read(sock, "c.count").parse::<u64>().unwrap();
    for f in frames {
        peer.send(f);
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while read(sock, "c.count").parse::<u64>().unwrap() < seen + frames.len() as u64 {
        assert!(Instant::now() < deadline, "the router did not count the frames");
        std::thread::sleep(Duration::from_millis(20));
    }
    queue_counts(sock)
        .iter()
        .zip(&before)
        .map(|(a, b)| a - b)
        .collect()
}

#[test]
fn key_and_table_are_read_and_changed_through_ctl() {
    let gen = Netns::new("gen");
    let dut = Netns::new("dut");
    veth(&gen, "g0", "02:00:00:00:00:02", &dut, "d0", "02:00:00:00:00:01");
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("br.sock");
    let s = sock.to_str().unwrap();
    let config =
        format!("ControlSocket(unix, {s}); fd :: FromDevice(d0, METHOD PACKET) -> c :: Counter -> Discard;");
    let mut router = start(&dut, &sock, &config);
    let peer = gen.run(|| RawSocket::open("g0"));

    // The defaults NIC drivers start with.
    assert_eq!(read(s, "fd.rss_key"), MS_KEY);
    assert_eq!(read(s, "fd.rss_table"), "0 1 ".repeat(64).trim_end());

    // 66.9.149.187:2794 -> 161.142.100.80:1766 hashes to 0x51ccc178 under Microsoft's
    // key (its RSS specification's first vector): entry 120. Only that entry names
    // queue 1, so that frame alone goes there.
    let mut table = vec!["0"; 128];
    table[120] = "1";
    write(s, "fd.rss_table", &table.join(" "));
    assert_eq!(read(s, "fd.rss_table"), table.join(" "));
    let vector = tcp_frame([66, 9, 149, 187], [161, 142, 100, 80], 2794, 1766);
    let others: Vec<Vec<u8>> = (0..20)
        .map(|i| tcp_frame([66, 9, 149, 187], [161, 142, 100, 80], 2794, 1767 + i))
        .collect();
    assert_eq!(deltas(s, &peer, std::slice::from_ref(&vector)), vec![0, 1]);

    // An all-zero key hashes every frame to 0: entry 0, queue 0.
    write(s, "fd.rss_key", &vec!["00"; 40].join(":"));
    assert_eq!(deltas(s, &peer, std::slice::from_ref(&vector)), vec![1, 0]);

    // A flow rule ahead of the hash: TCP to port 1766 goes to queue 1 whatever the key
    // and table say (all entries name queue 0 here).
    write(s, "fd.rss_rules", "tcp dport 1766 queue 1");
    assert_eq!(read(s, "fd.rss_rules"), "tcp dport 1766 queue 1");
    assert_eq!(deltas(s, &peer, std::slice::from_ref(&vector)), vec![0, 1]);
    assert_eq!(deltas(s, &peer, &others[..5]), vec![5, 0]);
    write(s, "fd.rss_rules", "");

    // ethtool's forms: everything to queue 1, then back to the defaults.
    write(s, "fd.rss_table", "weight 0 1");
    assert_eq!(deltas(s, &peer, &others), vec![0, 20]);
    write(s, "fd.rss_key", "default");
    write(s, "fd.rss_table", "default");
    assert_eq!(read(s, "fd.rss_key"), MS_KEY);
    let spread = deltas(s, &peer, &others);
    assert_eq!(spread.iter().sum::<u64>(), 20);

    // Refusals say why and change nothing.
    let o = ctl(s, &["write", "fd.rss_table", "equal 3"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        stderr(&o),
        "brickroute ctl: 520 Write handler 'fd.rss_table' error:\n\
         brickroute ctl: 520 equal 3: the port has 2 queues\n"
    );
    let o = ctl(s, &["write", "fd.rss_key", "6d:5a"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("an RSS key is 40 bytes in hex"),
        "{}",
        stderr(&o)
    );
    assert_eq!(read(s, "fd.rss_table"), "0 1 ".repeat(64).trim_end());

    let o = ctl(s, &["stop"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(router.wait_exit(Duration::from_secs(20)).success());
}

/// `brickroute run -q` (configure only) of `config` in `ns` with two workers: its
/// standard error, and whether it succeeded.
fn configure(ns: &Netns, config: &str) -> (bool, String) {
    let o = ns
        .brickroute_run(&["--threads", "2", "-q", "-e", config])
        .output()
        .expect("run brickroute");
    (o.status.success(), stderr(&o))
}

#[test]
fn the_configuration_sets_them_from_the_start() {
    let gen = Netns::new("gen");
    let dut = Netns::new("dut");
    veth(&gen, "g0", "02:00:00:00:00:02", &dut, "d0", "02:00:00:00:00:01");
    // Refusals name the element's line and column, the keyword and the reason.
    let (ok, err) = configure(
        &dut,
        "FromDevice(d0, METHOD PACKET, RSS_TABLE equal 5) -> Discard;",
    );
    assert!(!ok);
    assert!(
        err.contains(":1:1: error: FromDevice@1 :: FromDevice: RSS_TABLE: equal 5: the port has 2 queues"),
        "{}",
        err
    );
    let (ok, err) = configure(
        &dut,
        "FromDevice(d0, METHOD PACKET, RSS_TABLE weight 0 1) -> Discard;
         Idle -> ToDevice(d0, METHOD PACKET, RSS_TABLE weight 1 0);",
    );
    assert!(!ok);
    assert!(
        err.contains(
            "RSS_TABLE of device 'd0' differs from the one FromDevice@1 gave (give it once, or the same)"
        ),
        "{}",
        err
    );
    // The same value from two elements of the interface is one setting.
    let (ok, err) = configure(
        &dut,
        "FromDevice(d0, METHOD PACKET, RSS_TABLE weight 0 1) -> Discard;
         Idle -> ToDevice(d0, METHOD PACKET, RSS_TABLE weight 0 1);",
    );
    assert!(ok, "{}", err);
    let (ok, err) = configure(&dut, "FromDevice(d0, METHOD XDP, RSS_KEY default) -> Discard;");
    assert!(!ok);
    assert!(
        err.contains("RSS_KEY is for interfaces opened with METHOD PACKET"),
        "{}",
        err
    );

    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("br.sock");
    let s = sock.to_str().unwrap();
    let config = format!(
        "ControlSocket(unix, {s});
         fd :: FromDevice(d0, METHOD PACKET, RSS_TABLE \"weight 0 1\", RSS_RULES \"tcp dport 1766 queue 0\")
           -> c :: Counter -> Discard;"
    );
    let mut router = start(&dut, &sock, &config);
    assert_eq!(read(s, "fd.rss_table"), "1 ".repeat(128).trim_end());
    assert_eq!(read(s, "fd.rss_rules"), "tcp dport 1766 queue 0");
    let peer = gen.run(|| RawSocket::open("g0"));
    let vector = tcp_frame([66, 9, 149, 187], [161, 142, 100, 80], 2794, 1766);
    let others: Vec<Vec<u8>> = (0..10)
        .map(|i| tcp_frame([66, 9, 149, 187], [161, 142, 100, 80], 2794, 1767 + i))
        .collect();
    assert_eq!(deltas(s, &peer, std::slice::from_ref(&vector)), vec![1, 0]);
    assert_eq!(deltas(s, &peer, &others), vec![0, 10]);
    let o = ctl(s, &["stop"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(router.wait_exit(Duration::from_secs(20)).success());
}
