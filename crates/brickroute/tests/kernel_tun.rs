//! `KernelTun`, `KernelTap`, `FromHost` and `ToHost` in a running router, inside a network namespace (root
//! needed): the element makes a TUN or TAP device with the kernel's side at ADDR/MASK,
//! so the namespace's own `ping` (iputils) reaches the router through the kernel's
//! routes, and the kernel answers for ADDR itself.

mod common;
#[path = "common/control_client.rs"]
mod control_client;
#[path = "common/netns.rs"]
mod netns;
#[path = "common/router_process.rs"]
mod router_process;

use netns::Netns;
use router_process::RouterProcess;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// A namespace with its loopback up (the kernel answers for its own addresses
/// through it).
fn namespace() -> Netns {
    let ns = Netns::new("t");
    ns.ip(&["link", "set", "lo", "up"]);
    ns
}

/// `brickroute run -e CONFIG -h H...` started inside `ns`.
fn start(ns: &Netns, config: &str, handlers: &[&str]) -> RouterProcess {
    start_with(ns, &[], config, handlers)
}

/// [`start`] with more options for `run`.
fn start_with(ns: &Netns, options: &[&str], config: &str, handlers: &[&str]) -> RouterProcess {
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", &ns.name, env!("CARGO_BIN_EXE_brickroute"), "run"])
        .args(options)
        .args(["-e", config]);
    for h in handlers {
        cmd.args(["-h", h]);
    }
    RouterProcess(
        cmd.stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start brickroute"),
    )
}

/// Waits (10 s at most) until `dev` is up in `ns`, the router having made it.
fn wait_for_device(ns: &Netns, router: &mut RouterProcess, dev: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !common::worker_running(router.pid()) || !link(ns, dev).contains("UP") {
        if let Some(s) = router.exited() {
            let (out, err) = router.output();
            panic!("router exited ({s}): {out}{err}");
        }
        assert!(Instant::now() < deadline, "{dev} never came up");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn link(ns: &Netns, dev: &str) -> String {
    let o = Command::new("ip")
        .args(["-n", &ns.name, "addr", "show", "dev", dev])
        .output()
        .unwrap();
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn in_ns(ns: &Netns, args: &[&str]) -> Output {
    Command::new("ip")
        .args(["netns", "exec", &ns.name])
        .args(args)
        .output()
        .unwrap()
}

fn ping(ns: &Netns, args: &[&str]) -> (bool, String) {
    let mut a = vec!["ping", "-4", "-n"];
    a.extend_from_slice(args);
    let o = in_ns(ns, &a);
    (
        o.status.success(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
    )
}

/// Stops the router (SIGTERM) and returns what it printed.
fn stop(router: &mut RouterProcess) -> (String, String) {
    // SAFETY: kill(2) on our child's pid.
    unsafe { libc::kill(router.pid(), libc::SIGTERM) };
    router.wait_exit(Duration::from_secs(10));
    router.output()
}

#[test]
fn pings_to_a_kerneltun_network_are_answered_by_the_router() {
    let ns = namespace();
    // Click's own example (KernelTun's documentation): pings to 192.0.2.1 are the
    // kernel's, pings to the rest of 192.0.2.0/24 go into the device and the router
    // answers them.
    let mut r = start(
        &ns,
        "tun :: KernelTun(192.0.2.1/24, DEVNAME brtun0)
           -> c :: IPClassifier(icmp type echo, -)
           -> ICMPPingResponder -> tun;
         c[1] -> other :: Counter -> Discard;",
        &["tun.dev_name", "tun.packets", "tun.drops", "other.count"],
    );
    wait_for_device(&ns, &mut r, "brtun0");
    assert!(
        link(&ns, "brtun0").contains("inet 192.0.2.1/24"),
        "{}",
        link(&ns, "brtun0")
    );

    let (ok, out) = ping(&ns, &["-c", "3", "-i", "0.2", "-W", "2", "192.0.2.77"]);
    assert!(ok && out.contains("3 received"), "{out}");
    // The router's reply: ICMPPingResponder's TTL 255.
    assert!(out.contains("ttl=255"), "{out}");
    // The kernel's own address: its reply (TTL 64), nothing through the device.
    let (ok, out) = ping(&ns, &["-c", "1", "-W", "2", "192.0.2.1"]);
    assert!(ok && out.contains("ttl=64"), "{out}");

    let (out, err) = stop(&mut r);
    assert!(out.contains("tun.dev_name:\nbrtun0\n"), "{out}\n{err}");
    assert!(out.contains("tun.drops:\n0\n"), "{out}\n{err}");
    // Three echoes, and whatever else the kernel sent the device (counted by `other`).
    let count = |h: &str| -> u64 {
        out.split(&format!("{h}:\n"))
            .nth(1)
            .and_then(|s| s.lines().next())
            .unwrap()
            .parse()
            .unwrap()
    };
    assert_eq!(count("tun.packets"), 3 + count("other.count"), "{out}");
    // The device goes with the router.
    assert!(!link(&ns, "brtun0").contains("brtun0"));
}

#[test]
fn a_kerneltap_takes_ethernet_frames_and_its_gateway_becomes_the_default_route() {
    let ns = namespace();
    // Click's idiom for a TAP device (KernelTap's documentation): answer the kernel's
    // ARP for any address with one Ethernet address; echo requests to any address are
    // answered, sent back to the device's Ethernet address (ETHER).
    let mut r = start(
        &ns,
        "tap :: KernelTap(192.0.2.1/24, 192.0.2.254, ETHER 02:00:00:00:00:aa, DEVNAME brtap0)
           -> c :: Classifier(12/0806 20/0001, 12/0800, -);
         c[0] -> arp :: ARPResponder(0.0.0.0/0 02:00:00:00:00:bb) -> tap;
         c[1] -> Strip(14) -> CheckIPHeader -> i :: IPClassifier(icmp type echo, -)
           -> ICMPPingResponder
           -> EtherEncap(0x0800, 02:00:00:00:00:bb, 02:00:00:00:00:aa) -> tap;
         c[2] -> Discard;
         i[1] -> Discard;",
        &["tap.dev_name", "tap.drops"],
    );
    wait_for_device(&ns, &mut r, "brtap0");
    let shown = link(&ns, "brtap0");
    assert!(shown.contains("link/ether 02:00:00:00:00:aa"), "{shown}");
    assert!(shown.contains("inet 192.0.2.1/24"), "{shown}");
    // GATEWAY: the default route through the device.
    let routes = String::from_utf8_lossy(&in_ns(&ns, &["ip", "-4", "route"]).stdout).into_owned();
    assert!(routes.contains("default via 192.0.2.254 dev brtap0"), "{routes}");

    // A host on the device's network, and one beyond it through the gateway: the
    // kernel resolves the next hop with ARP (answered by the router) and sends the
    // frames into the device.
    for dst in ["192.0.2.9", "198.51.100.7"] {
        let (ok, out) = ping(&ns, &["-c", "2", "-i", "0.2", "-W", "2", dst]);
        assert!(ok && out.contains("2 received"), "{dst}: {out}");
    }
    let neigh =
        String::from_utf8_lossy(&in_ns(&ns, &["ip", "neigh", "show", "dev", "brtap0"]).stdout).into_owned();
    assert!(neigh.contains("192.0.2.254 lladdr 02:00:00:00:00:bb"), "{neigh}");

    let (out, err) = stop(&mut r);
    assert!(out.contains("tap.dev_name:\nbrtap0\n"), "{out}\n{err}");
    assert!(out.contains("tap.drops:\n0\n"), "{out}\n{err}");
}

#[test]
fn fromhost_and_tohost_share_one_tap_device() {
    let ns = namespace();
    // Click's idiom for FromHost (its documentation), with the frames to the kernel
    // written by ToHost(DEVNAME), declared before the FromHost it uses.
    let mut r = start(
        &ns,
        "c :: Classifier(12/0806, 12/0800);
         out :: ToHost(brfh0);
         FromHost(brfh0, 192.0.2.1/24, ETHER 02:00:00:00:00:cc) -> c;
         c[0] -> ARPResponder(0.0.0.0/0 1:1:1:1:1:1) -> out;
         c[1] -> Strip(14) -> CheckIPHeader -> i :: IPClassifier(icmp type echo, -)
           -> ICMPPingResponder
           -> EtherEncap(0x0800, 1:1:1:1:1:1, 02:00:00:00:00:cc) -> out;
         i[1] -> Discard;",
        &["out.dev_name", "out.drops"],
    );
    wait_for_device(&ns, &mut r, "brfh0");
    let (ok, out) = ping(&ns, &["-c", "2", "-i", "0.2", "-W", "2", "192.0.2.50"]);
    assert!(ok && out.contains("2 received"), "{out}");
    let (out, err) = stop(&mut r);
    assert!(out.contains("out.dev_name:\nbrfh0\n"), "{out}\n{err}");
    assert!(out.contains("out.drops:\n0\n"), "{out}\n{err}");
}

/// The interface index of `dev` in `ns`.
fn ifindex(ns: &Netns, dev: &str) -> String {
    link(ns, dev).split(':').next().unwrap().trim().to_string()
}

/// A ping responder on KernelTun `tun` (DEVNAME brtun1) at `prefix`, with a control
/// socket at `socket`; the counter `seen` counts the echoes.
fn responder(socket: &std::path::Path, prefix: &str) -> String {
    format!(
        "ControlSocket(unix, {socket});
         tun :: KernelTun({prefix}, DEVNAME brtun1)
           -> c :: IPClassifier(icmp type echo, -)
           -> seen :: Counter -> ICMPPingResponder -> tun;
         c[1] -> Discard;",
        socket = socket.display()
    )
}

#[test]
fn a_named_device_stays_across_configurations_that_keep_its_element() {
    let ns = namespace();
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("br.sock");
    let first = responder(&sock, "192.0.2.1/24");
    let mut r = start_with(&ns, &["-R"], &first, &[]);
    wait_for_device(&ns, &mut r, "brtun1");
    let mut c = control_client::connect_unix(&sock, &mut r);
    let index = ifindex(&ns, "brtun1");
    let (ok, out) = ping(&ns, &["-c", "1", "-W", "2", "192.0.2.5"]);
    assert!(ok, "{out}");

    // The same configuration again: the element keeps its device (same interface, so
    // the kernel's routes through it stay), and the new configuration answers.
    assert_eq!(c.hotconfig(&first), ["200 Write handler 'hotconfig' OK\r\n"]);
    // (The old configuration's workers answer until the new one takes over.)
    let deadline = Instant::now() + Duration::from_secs(10);
    while c.count("seen") == 0 {
        let (ok, out) = ping(&ns, &["-c", "1", "-W", "2", "192.0.2.5"]);
        assert!(ok, "{out}");
        assert!(Instant::now() < deadline, "the new configuration never answered");
    }
    assert_eq!(ifindex(&ns, "brtun1"), index);

    // Another address: the same device, readdressed.
    let second = responder(&sock, "198.51.100.1/24");
    assert_eq!(c.hotconfig(&second), ["200 Write handler 'hotconfig' OK\r\n"]);
    assert_eq!(ifindex(&ns, "brtun1"), index);
    assert!(
        link(&ns, "brtun1").contains("inet 198.51.100.1/24"),
        "{}",
        link(&ns, "brtun1")
    );
    let (ok, out) = ping(&ns, &["-c", "1", "-W", "2", "198.51.100.5"]);
    assert!(ok, "{out}");

    // Another element naming the device while this one holds it: refused, and the
    // running configuration goes on.
    let renamed = second.replace("tun ::", "tun2 ::").replace("-> tun;", "-> tun2;");
    let answer = c.hotconfig(&renamed);
    assert!(
        answer
            .iter()
            .any(|l| l.contains("device brtun1 is in use by 'tun'")),
        "{answer:?}"
    );
    let (ok, out) = ping(&ns, &["-c", "1", "-W", "2", "198.51.100.5"]);
    assert!(ok, "{out}");
    stop(&mut r);
}

#[test]
fn kerneltun_arguments_are_checked_before_any_device_is_made() {
    let cases = [
        ("KernelTun(10.0.0.1/8, 11.0.0.1)", "bad GATEWAY"),
        ("KernelTun(10.0.0.1/8, BURST 0)", "BURST must be >= 1"),
        ("KernelTun(10.0.0.1/8, MTU 20)", "MTU must be greater than 20"),
        ("KernelTap(10.0.0.1/8, HEADROOM 9000)", "HEADROOM too big"),
        (
            "KernelTun(10.0.0.1/8, DEVNAME 'way-too-long-name')",
            "not an interface name",
        ),
        ("FromHost(fake0, 10.0.0.1/8, HEADROOM 9000)", "HEADROOM too large"),
        ("FromHost(fake0, 10.0.0.1/8, GATEWAY 11.0.0.1)", "bad GATEWAY"),
    ];
    for (element, want) in cases {
        let config = format!("t :: {element} -> Discard;");
        let o = common::brickroute(&["run", "-q", "-e", &config]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{element}: {err}");
        assert!(err.contains(want), "{element}: {err}");
    }
    // ToHost needs a FromHost of its device (checked without making any device).
    let o = common::brickroute(&["run", "-q", "-e", "Idle -> ToHost(fake0);"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{err}");
    assert!(
        err.contains("ToHost(fake0) requires an initialized FromHost with the same dev_name"),
        "{err}"
    );
}
