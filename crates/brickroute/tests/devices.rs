//! `brickroute run` over real interfaces (root needed): namespaces gen -- dut -- sink
//! joined by veth pairs, the router in dut reading and writing with FromDevice and
//! ToDevice (METHOD PACKET and METHOD XDP, two workers), frames hand-built at gen and
//! checked byte for byte at sink.

mod common;
#[path = "common/netns.rs"]
mod netns;
#[path = "common/router_process.rs"]
mod router_process;

use common::inet_checksum;
use netns::{veth, Netns, RawSocket};
use router_process::RouterProcess;
use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const GEN_MAC: [u8; 6] = [0x02, 0, 0, 0, 0x01, 0x02];
const DUT0_MAC: [u8; 6] = [0x02, 0, 0, 0, 0x01, 0x01];
const DUT1_MAC: [u8; 6] = [0x02, 0, 0, 0, 0x02, 0x01];
const SINK_MAC: [u8; 6] = [0x02, 0, 0, 0, 0x02, 0x02];
const GEN_IP: [u8; 4] = [198, 18, 0, 2];
const SINK_IP: [u8; 4] = [198, 19, 0, 2];

/// gen 198.18.0.2 -- [d0 198.18.0.1 | router | d1 198.19.0.1] -- sink 198.19.0.2.
/// `$METHOD` is PACKET or XDP.
const CONFIG: &str = r#"
fromgen :: FromDevice(d0, METHOD $METHOD);
fromsink :: FromDevice(d1, METHOD $METHOD);
c0 :: Classifier(12/0800, -);
c1 :: Classifier(12/0800, -);
chk :: CheckIPHeader;
rt :: RadixIPLookup(198.18.0.1/32 0, 198.19.0.1/32 0, 198.18.0.0/16 1, 198.19.0.0/16 2);
fromgen -> c0;
fromsink -> c1;
c0[0] -> Strip(14) -> chk;
c1[0] -> Strip(14) -> chk;
c0[1] -> nonip :: Counter -> Discard;
c1[1] -> nonip;
chk -> GetIPAddress(16) -> rt;
rt[0] -> tohost :: Counter -> Discard;
rt[1] -> dt1 :: DecIPTTL -> EtherEncap(0x0800, 02:00:00:00:01:01, 02:00:00:00:01:02) -> togen :: ToDevice(d0);
rt[2] -> dt2 :: DecIPTTL -> EtherEncap(0x0800, 02:00:00:00:02:01, 02:00:00:00:02:02) -> tosink :: ToDevice(d1, BURST 8, FLUSH_US 50);
dt1[1] -> ICMPError(198.18.0.1, timeexceeded) -> rt;
dt2[1] -> ICMPError(198.19.0.1, timeexceeded) -> rt;
"#;

/// IPv4 header (20 bytes, checksum filled in) for `payload_len` bytes of `proto`.
fn ipv4_header(src: [u8; 4], dst: [u8; 4], ttl: u8, proto: u8, id: u16, payload_len: usize) -> Vec<u8> {
    let mut h = vec![0x45, 0];
    h.extend_from_slice(&((20 + payload_len) as u16).to_be_bytes());
    h.extend_from_slice(&id.to_be_bytes());
    h.extend_from_slice(&[0, 0, ttl, proto, 0, 0]);
    h.extend_from_slice(&src);
    h.extend_from_slice(&dst);
    let c = inet_checksum(&h);
    h[10..12].copy_from_slice(&c.to_be_bytes());
    h
}

/// UDP gen:`sport` -> sink:9 with 18 payload bytes (a 60-byte frame), checksum 0.
fn udp_packet(sport: u16, ttl: u8, seq: u8) -> Vec<u8> {
    let mut udp = sport.to_be_bytes().to_vec();
    udp.extend_from_slice(&[0, 9, 0, 26, 0, 0]);
    udp.extend((0..18).map(|i| seq.wrapping_add(i)));
    let mut p = ipv4_header(GEN_IP, SINK_IP, ttl, 17, 0x1000 + seq as u16, udp.len());
    p.extend_from_slice(&udp);
    p
}

fn ether(dst: [u8; 6], src: [u8; 6], ip: &[u8]) -> Vec<u8> {
    let mut f = dst.to_vec();
    f.extend_from_slice(&src);
    f.extend_from_slice(&[0x08, 0x00]);
    f.extend_from_slice(ip);
    f
}

fn is_ipv4(f: &[u8]) -> bool {
    f.len() >= 34 && f[12..14] == [0x08, 0x00]
}

/// Value of handler `name` in `brickroute run -h` output ("name:\nvalue\n\n" blocks).
fn handler(out: &str, name: &str) -> String {
    let mut lines = out.lines();
    while let Some(l) = lines.next() {
        if l == format!("{}:", name) {
            return lines.next().unwrap_or("").to_string();
        }
    }
    panic!("no handler {} in output:\n{}", name, out)
}

#[test]
fn routes_frames_between_namespaces_over_af_packet_with_two_workers() {
    routes_frames_between_namespaces("PACKET");
}

#[test]
fn routes_frames_between_namespaces_over_af_xdp_with_two_workers() {
    routes_frames_between_namespaces("XDP");
}

/// The interface is open and receiving: AF_PACKET ports turn promiscuous mode on last,
/// AF_XDP ports attach their XDP program last.
fn port_is_open(details: &str, method: &str) -> bool {
    match method {
        "PACKET" => details.contains("promiscuity 1"),
        _ => details.contains("prog/xdp"),
    }
}

fn routes_frames_between_namespaces(method: &str) {
    let gen = Netns::new("gen");
    let dut = Netns::new("dut");
    let sink = Netns::new("sink");
    let mac = |m: [u8; 6]| {
        m.iter()
            .map(|b| format!("{:02x}", b))
            .collect::<Vec<_>>()
            .join(":")
    };
    veth(&gen, "g0", &mac(GEN_MAC), &dut, "d0", &mac(DUT0_MAC));
    veth(&dut, "d1", &mac(DUT1_MAC), &sink, "s0", &mac(SINK_MAC));
    // The router's own address on d0, held by the kernel: it answers ARP for it.
    dut.ip(&["addr", "add", "198.18.0.1/24", "dev", "d0"]);
    let gen_sock = gen.run(|| RawSocket::open("g0"));
    let sink_sock = sink.run(|| RawSocket::open("s0"));

    let mut router = RouterProcess(
        Command::new("ip")
            .args([
                "netns",
                "exec",
                &dut.name,
                env!("CARGO_BIN_EXE_brickroute"),
                "run",
                "--threads",
                "2",
            ])
            .args(["-e", CONFIG, &format!("METHOD={}", method)])
            .args([
                "-h",
                "fromgen.count",
                "-h",
                "fromsink.count",
                "-h",
                "tosink.count",
            ])
            .args(["-h", "togen.count", "-h", "nonip.count", "-h", "tohost.count"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start brickroute"),
    );
    // The router is receiving once both ports are open.
    let deadline = Instant::now() + Duration::from_secs(20);
    while !(port_is_open(&dut.link_details("d0"), method) && port_is_open(&dut.link_details("d1"), method)) {
        if let Some(s) = router.0.try_wait().unwrap() {
            let (_, err) = router.output();
            panic!("router exited early ({}): {}", s, err);
        }
        assert!(Instant::now() < deadline, "router did not open d0 and d1");
        std::thread::sleep(Duration::from_millis(20));
    }

    // ARP for the router's address reaches the kernel, which answers: over AF_PACKET
    // the router sees the request too (and counts it as non-IP); brickroute's XDP
    // program hands it to the kernel alone.
    let mut arp = vec![0xff; 6];
    arp.extend_from_slice(&GEN_MAC);
    arp.extend_from_slice(&[0x08, 0x06, 0, 1, 0x08, 0x00, 6, 4, 0, 1]);
    arp.extend_from_slice(&GEN_MAC);
    arp.extend_from_slice(&GEN_IP);
    arp.extend_from_slice(&[0; 6]);
    arp.extend_from_slice(&[198, 18, 0, 1]);
    arp.extend_from_slice(&[0; 18]);
    gen_sock.send(&arp);
    let mut want_reply = GEN_MAC.to_vec();
    want_reply.extend_from_slice(&DUT0_MAC);
    want_reply.extend_from_slice(&[0x08, 0x06, 0, 1, 0x08, 0x00, 6, 4, 0, 2]);
    want_reply.extend_from_slice(&DUT0_MAC);
    want_reply.extend_from_slice(&[198, 18, 0, 1]);
    want_reply.extend_from_slice(&GEN_MAC);
    want_reply.extend_from_slice(&GEN_IP);
    let mut reply = None;
    let deadline = Instant::now() + Duration::from_secs(10);
    while reply.is_none() && Instant::now() < deadline {
        if let Some(f) = gen_sock.recv(Duration::from_millis(200)) {
            if f.len() >= 42 && f[12..14] == [0x08, 0x06] && f[20..22] == [0, 2] {
                reply = Some(f[..42].to_vec());
            }
        }
    }
    assert_eq!(reply, Some(want_reply), "ARP reply from the kernel at gen");

    // 32 flows (source ports), 2 frames each, TTL 64; then one frame with TTL 1.
    let mut sent = Vec::new();
    for round in 0..2u8 {
        for flow in 0..32u16 {
            sent.push((4000 + flow, udp_packet(4000 + flow, 64, round * 32 + flow as u8)));
        }
    }
    for (_, ip) in &sent {
        gen_sock.send(&ether(DUT0_MAC, GEN_MAC, ip));
    }
    let expired = udp_packet(5000, 1, 200);
    gen_sock.send(&ether(DUT0_MAC, GEN_MAC, &expired));

    // At the sink: each frame routed (new MACs, TTL 63, header checksum updated), each
    // flow's frames in order.
    let mut got: Vec<Vec<u8>> = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(15);
    while got.len() < sent.len() && Instant::now() < deadline {
        if let Some(f) = sink_sock.recv(Duration::from_millis(200)) {
            if is_ipv4(&f) {
                got.push(f);
            }
        }
    }
    let expect_frame = |ip: &[u8]| {
        let mut routed = ip.to_vec();
        routed[8] -= 1;
        routed[10..12].fill(0);
        let c = inet_checksum(&routed[..20]);
        routed[10..12].copy_from_slice(&c.to_be_bytes());
        ether(SINK_MAC, DUT1_MAC, &routed)
    };
    let mut want_by_flow: BTreeMap<u16, Vec<Vec<u8>>> = BTreeMap::new();
    for (flow, ip) in &sent {
        want_by_flow.entry(*flow).or_default().push(expect_frame(ip));
    }
    let mut got_by_flow: BTreeMap<u16, Vec<Vec<u8>>> = BTreeMap::new();
    for f in &got {
        got_by_flow
            .entry(u16::from_be_bytes([f[34], f[35]]))
            .or_default()
            .push(f.clone());
    }
    assert_eq!(got_by_flow, want_by_flow, "frames at the sink");
    // Spot check of the hand-made expectation itself: TTL 64 -> 63 changes the header
    // checksum by +0x0100 (RFC 1624).
    let (a, b) = (&sent[0].1, &want_by_flow[&4000][0][14..]);
    assert_eq!(
        u16::from_be_bytes([b[10], b[11]]),
        u16::from_be_bytes([a[10], a[11]]).wrapping_add(0x0100)
    );

    // Back at gen: ICMP time exceeded from 198.19.0.1 (the address dt2's ICMPError
    // names: the expired packet was headed out of d1), quoting the expired packet.
    let mut icmp = None;
    let deadline = Instant::now() + Duration::from_secs(10);
    while icmp.is_none() && Instant::now() < deadline {
        if let Some(f) = gen_sock.recv(Duration::from_millis(200)) {
            if is_ipv4(&f) && f[23] == 1 {
                icmp = Some(f);
            }
        }
    }
    let mut body = vec![11, 0, 0, 0, 0, 0, 0, 0];
    body.extend_from_slice(&expired);
    let c = inet_checksum(&body);
    body[2..4].copy_from_slice(&c.to_be_bytes());
    // ICMPError: TTL 200, ID 1 (first error of the process); DecIPTTL on the way out
    // to gen takes the TTL to 199.
    let mut want_icmp = ipv4_header([198, 19, 0, 1], GEN_IP, 199, 1, 1, body.len());
    want_icmp.extend_from_slice(&body);
    assert_eq!(icmp, Some(ether(GEN_MAC, DUT0_MAC, &want_icmp)), "ICMP at gen");

    // SIGINT stops the router; the handlers count every frame once.
    // SAFETY: kill(2) on our own child's pid.
    assert_eq!(unsafe { libc::kill(router.0.id() as i32, libc::SIGINT) }, 0);
    let status = router.wait_exit(Duration::from_secs(10));
    let (out, err) = router.output();
    assert!(status.success(), "exit {}: {}", status, err);
    // Non-IP frames from gen: the ARP request over AF_PACKET (and whatever else gen's
    // kernel sent, such as its own ARP); none over AF_XDP, whose program gives them to
    // the kernel.
    let nonip: u64 = handler(&out, "nonip.count").parse().unwrap();
    if method == "PACKET" {
        assert!(nonip >= 1, "{}", out);
    } else {
        assert_eq!(nonip, 0, "{}", out);
    }
    let from_gen = 65 + nonip;
    assert_eq!(handler(&out, "fromgen.count"), from_gen.to_string(), "{}", out);
    assert_eq!(handler(&out, "fromsink.count"), "0");
    assert_eq!(handler(&out, "tosink.count"), "64");
    assert_eq!(handler(&out, "togen.count"), "1");
    assert_eq!(handler(&out, "tohost.count"), "0");
    let kind = match method {
        "PACKET" => "PACKET".to_string(),
        // veth offers native XDP and copy mode (no zero-copy driver).
        _ => "XDP: copy mode, native XDP".to_string(),
    };
    let summary = format!(
        "; devices d0 ({k}, 2 queues: {n} in, 1 out), d1 ({k}, 2 queues: 0 in, 64 out) (interrupted)",
        k = kind,
        n = from_gen
    );
    assert!(err.contains(&summary), "summary: {}", err);
    // The ports are closed: promiscuous mode withdrawn, XDP programs detached.
    for dev in ["d0", "d1"] {
        let d = dut.link_details(dev);
        assert!(
            d.contains("promiscuity 0") && !d.contains("prog/xdp"),
            "{}: {}",
            dev,
            d
        );
    }
}

#[test]
fn unknown_interface_is_a_configuration_error_naming_it() {
    let ns = Netns::new("cfg");
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("bad.click");
    std::fs::write(
        &conf,
        "// no such interface\n  FromDevice(brtnosuch0) -> Discard;\n",
    )
    .unwrap();
    let o = Command::new("ip")
        .args(["netns", "exec", &ns.name, env!("CARGO_BIN_EXE_brickroute"), "run"])
        .arg(&conf)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{}", err);
    let want = format!(
        "{}:2:3: error: FromDevice@1 :: FromDevice: cannot open device 'brtnosuch0' (METHOD XDP): brtnosuch0: find the interface: No such device",
        conf.display()
    );
    assert!(err.starts_with(&want), "stderr: {}", err);
    assert!(
        err.ends_with("Router could not be initialized!\n"),
        "stderr: {}",
        err
    );

    let o = Command::new("ip")
        .args([
            "netns",
            "exec",
            &ns.name,
            env!("CARGO_BIN_EXE_brickroute"),
            "run",
            "-e",
        ])
        .arg("FromDevice(brtnosuch1, METHOD XDP) -> Discard;")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{}", err);
    assert!(
        err.starts_with("<expr>:1:1: error: FromDevice@1 :: FromDevice: cannot open device 'brtnosuch1' (METHOD XDP): brtnosuch1: find the interface: No such device"),
        "stderr: {}",
        err
    );
}
