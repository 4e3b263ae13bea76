//! `brickroute run` with AF_PACKET interfaces in a namespace whose kernel forwards IPv4
//! (root needed): brickroute turns the kernel's forwarding off on the interfaces it
//! opens with METHOD PACKET while it runs, so each frame leaves once (routed by
//! brickroute, not also by the kernel), and restores the flag on exit — after SIGTERM,
//! after a configuration error, and, from the record under /run/brickroute, in the run
//! after one killed with SIGKILL or by a second signal. SIGHUP (a closed terminal) stops
//! the router and restores the flag as SIGTERM does. `--keep-kernel-forwarding` leaves
//! the flag on, warns, and every frame leaves twice. With `run -R`, a configuration
//! that takes over holds the flags of the interfaces it names and gives back the others'.
//!
//! gen g0 -- d0 [dut 198.18.0.1 | 198.19.0.1, ip_forward=1] d1 -- s0 sink

mod common;
#[path = "common/control_client.rs"]
mod control_client;
#[path = "common/netns.rs"]
mod netns;
#[path = "common/router_process.rs"]
mod router_process;

use common::{inet_checksum, worker_running};
use netns::{veth, Netns, RawSocket};
use router_process::RouterProcess;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

const GEN_MAC: &str = "02:00:00:00:01:02";
const DUT0_MAC: [u8; 6] = [0x02, 0, 0, 0, 0x01, 0x01];
const DUT1_MAC: &str = "02:00:00:00:02:01";
const SINK_MAC: &str = "02:00:00:00:02:02";
const GEN_MAC_BYTES: [u8; 6] = [0x02, 0, 0, 0, 0x01, 0x02];

/// Routes what arrives on d0 to the sink; counts what it routed.
const CONFIG: &str = "FromDevice(d0, METHOD PACKET) -> c :: Classifier(12/0800, -);
c[0] -> Strip(14) -> CheckIPHeader -> dt :: DecIPTTL
  -> EtherEncap(0x0800, 02:00:00:00:02:01, 02:00:00:00:02:02)
  -> routed :: Counter -> ToDevice(d1, METHOD PACKET, BURST 1);
c[1] -> Discard;
dt[1] -> Discard;";

/// Frames sent per test.
const FRAMES: u8 = 20;

/// The router in dut (see [`RouterProcess`]).
struct Router(RouterProcess);

impl Router {
    /// `brickroute run EXTRA -e CONFIG -h routed.count` in dut, keeping its records in
    /// the testbed's run directory.
    fn start(t: &Testbed, extra: &[&str], config: &str) -> Router {
        Router(RouterProcess(
            Command::new("ip")
                .args([
                    "netns",
                    "exec",
                    &t.dut.name,
                    env!("CARGO_BIN_EXE_brickroute"),
                    "run",
                ])
                .env("BRICKROUTE_RUN_DIR", t.run_dir.path())
                .args(extra)
                .args(["-e", config, "-h", "routed.count"])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("start brickroute"),
        ))
    }

    fn pid(&self) -> i32 {
        self.0.pid()
    }

    fn signal(&self, sig: libc::c_int) {
        // SAFETY: kill(2) on our own child's pid.
        assert_eq!(unsafe { libc::kill(self.pid(), sig) }, 0);
    }

    /// Waits (bounded) until `ready` holds, failing with the router's stderr if it
    /// exits first.
    fn wait_until(&mut self, what: &str, ready: impl Fn() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while !ready() {
            if let Some(s) = self.0.exited() {
                let (_, err) = self.0.output();
                panic!("router exited early ({}) waiting for {}: {}", s, what, err);
            }
            assert!(Instant::now() < deadline, "timed out waiting for {}", what);
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn wait_exit(&mut self) -> ExitStatus {
        self.0.wait_exit(Duration::from_secs(20))
    }

    /// Waits (bounded) until `up` holds and the router runs (its configuration is done:
    /// a signal before that, with no flag held, would end it at once), stops the process
    /// with SIGTERM, and waits for it to exit.
    fn wait_exit_after(&mut self, up: impl Fn() -> bool) -> ExitStatus {
        self.wait_until("the router to come up", up);
        let pid = self.pid();
        self.wait_until("the router's first worker", || worker_running(pid));
        self.signal(libc::SIGTERM);
        self.wait_exit()
    }

    /// Stops the process with SIGTERM, checks that it exited cleanly and returns its
    /// standard output and error.
    fn terminate(&mut self) -> (String, String) {
        self.signal(libc::SIGTERM);
        let status = self.wait_exit();
        let (out, err) = self.output();
        assert!(status.success(), "exit {}: {}", status, err);
        (out, err)
    }

    fn output(&mut self) -> (String, String) {
        self.0.output()
    }
}

struct Testbed {
    gen: Netns,
    dut: Netns,
    sink: Netns,
    /// `$BRICKROUTE_RUN_DIR` of the router runs: their records go under it.
    run_dir: tempfile::TempDir,
}

impl Testbed {
    /// The three namespaces; dut holds addresses on both sides, a permanent neighbour
    /// entry for the sink and IPv4 forwarding on: its kernel can forward gen's frames
    /// to the sink on its own.
    fn new() -> Testbed {
        let gen = Netns::new("gen");
        let dut = Netns::new("dut");
        let sink = Netns::new("sink");
        veth(&gen, "g0", GEN_MAC, &dut, "d0", "02:00:00:00:01:01");
        veth(&dut, "d1", DUT1_MAC, &sink, "s0", SINK_MAC);
        dut.ip(&["addr", "add", "198.18.0.1/24", "dev", "d0"]);
        dut.ip(&["addr", "add", "198.19.0.1/24", "dev", "d1"]);
        dut.ip(&[
            "neigh",
            "add",
            "198.19.0.2",
            "lladdr",
            SINK_MAC,
            "dev",
            "d1",
            "nud",
            "permanent",
        ]);
        // ip_forward sets every interface's flag, as on a host configured as a router.
        dut.set_proc_sys("net/ipv4/ip_forward", "1");
        let run_dir = tempfile::tempdir().expect("temporary directory");
        let t = Testbed {
            gen,
            dut,
            sink,
            run_dir,
        };
        assert_eq!(t.flag("d0"), "1");
        assert_eq!(t.flag("d1"), "1");
        t
    }

    /// `net.ipv4.conf.DEV.forwarding` in dut.
    fn flag(&self, dev: &str) -> String {
        self.dut.proc_sys(&format!("net/ipv4/conf/{}/forwarding", dev))
    }

    /// The record brickroute keeps for `dev` of dut while it holds the flag off.
    fn record(&self, dev: &str) -> PathBuf {
        self.run_dir.path().join(format!(
            "kernel-forwarding/netns-cookie-{}.{}.ipv4",
            self.dut.cookie(),
            dev
        ))
    }

    /// Both AF_PACKET ports are open (they turn promiscuous mode on last).
    fn ports_open(&self) -> bool {
        self.dut.link_details("d0").contains("promiscuity 1")
            && self.dut.link_details("d1").contains("promiscuity 1")
    }

    /// Both ports are open and the kernel's forwarding is off on both.
    fn open_with_forwarding_off(&self) -> bool {
        self.ports_open() && self.flag("d0") == "0" && self.flag("d1") == "0"
    }

    /// Sends FRAMES UDP frames gen -> 198.19.0.2 (sequence number in the IP ID and the
    /// payload) and returns how many copies of each sequence number reached the sink.
    fn send_and_count(&self) -> BTreeMap<u8, usize> {
        let gen_sock = self.gen.run(|| RawSocket::open("g0"));
        let sink_sock = self.sink.run(|| RawSocket::open("s0"));
        for seq in 0..FRAMES {
            gen_sock.send(&udp_frame(seq));
            std::thread::sleep(Duration::from_millis(2));
        }
        let mut copies = BTreeMap::new();
        // Everything has arrived once nothing more comes for a second.
        while let Some(f) = sink_sock.recv(Duration::from_secs(1)) {
            if f.len() >= 60 && f[12..14] == [0x08, 0x00] && f[23] == 17 && f[42..46] == *b"pktf" {
                // Routed: TTL 64 -> 63 and new MACs, whichever forwarder did it.
                assert_eq!(f[22], 63, "TTL of {:02x?}", f);
                assert_eq!(&f[..6], &[0x02, 0, 0, 0, 0x02, 0x02], "destination MAC");
                *copies.entry(f[46]).or_insert(0) += 1;
            }
        }
        copies
    }
}

/// UDP 198.18.0.2:4000 -> 198.19.0.2:9, payload "pktf" + `seq`, to dut's d0.
fn udp_frame(seq: u8) -> Vec<u8> {
    let payload = [b'p', b'k', b't', b'f', seq, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    let mut ip = vec![0x45, 0];
    ip.extend_from_slice(&((20 + 8 + payload.len()) as u16).to_be_bytes());
    ip.extend_from_slice(&[0, seq, 0, 0, 64, 17, 0, 0, 198, 18, 0, 2, 198, 19, 0, 2]);
    let c = inet_checksum(&ip);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    ip.extend_from_slice(&[0x0f, 0xa0, 0, 9]);
    ip.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
    ip.extend_from_slice(&[0, 0]);
    ip.extend_from_slice(&payload);
    let mut f = DUT0_MAC.to_vec();
    f.extend_from_slice(&GEN_MAC_BYTES);
    f.extend_from_slice(&[0x08, 0x00]);
    f.extend_from_slice(&ip);
    f
}

fn each_once(n: usize) -> BTreeMap<u8, usize> {
    (0..FRAMES).map(|s| (s, n)).collect()
}

#[test]
fn af_packet_turns_kernel_forwarding_off_while_running_and_restores_it_on_sigterm() {
    let t = Testbed::new();
    let mut router = Router::start(&t, &[], CONFIG);
    router.wait_until("d0 and d1 open, forwarding off", || t.open_with_forwarding_off());
    let record = std::fs::read_to_string(t.record("d0")).expect("record of d0 while running");
    assert!(record.contains("\noriginal 1\nset 0\n"), "{}", record);
    assert!(
        record.contains(&format!("\npid {}\n", router.pid())),
        "{}",
        record
    );

    // Each frame leaves once, routed by brickroute.
    assert_eq!(t.send_and_count(), each_once(1));

    let (out, err) = router.terminate();
    // One handler: Click prints its value alone.
    assert_eq!(out, format!("{}\n", FRAMES));
    assert!(
        err.contains(
            "brickroute: d0: turned the kernel's IPv4 forwarding off while brickroute runs \
             (net.ipv4.conf.d0.forwarding: 1 -> 0; AF_PACKET leaves every frame to the kernel too); \
             restored on exit (--keep-kernel-forwarding keeps it)\n"
        ),
        "{}",
        err
    );
    assert!(!err.contains("warning"), "{}", err);
    assert_eq!(t.flag("d0"), "1");
    assert_eq!(t.flag("d1"), "1");
    assert!(!t.record("d0").exists() && !t.record("d1").exists());
    // The kernel forwards again on its own.
    assert_eq!(t.send_and_count(), each_once(1));
}

#[test]
fn after_sigkill_the_next_run_restores_the_recorded_original() {
    let t = Testbed::new();
    let mut killed = Router::start(&t, &[], CONFIG);
    killed.wait_until("forwarding off", || t.open_with_forwarding_off());
    killed.signal(libc::SIGKILL);
    killed.wait_exit();
    // Nothing restored the flags; the records remember the original.
    assert_eq!(t.flag("d0"), "0");
    assert_eq!(t.flag("d1"), "0");
    let record = std::fs::read_to_string(t.record("d0")).expect("record left by the killed run");
    assert!(record.contains("\noriginal 1\n"), "{}", record);

    let mut next = Router::start(&t, &[], CONFIG);
    let pid_line = format!("\npid {}\n", next.pid());
    next.wait_until("the next run to take the records", || {
        [t.record("d0"), t.record("d1")]
            .iter()
            .all(|r| std::fs::read_to_string(r).is_ok_and(|s| s.contains(&pid_line)))
    });
    assert_eq!(t.flag("d0"), "0");
    assert_eq!(t.send_and_count(), each_once(1));
    let (_, err) = next.terminate();
    assert!(
        err.contains(&format!(
            "brickroute: d0: the kernel's IPv4 forwarding is still off from a brickroute run \
             that did not exit cleanly (pid {}); kept off while brickroute runs, \
             net.ipv4.conf.d0.forwarding restored to 1 on exit\n",
            killed.pid()
        )),
        "{}",
        err
    );
    assert_eq!(t.flag("d0"), "1");
    assert_eq!(t.flag("d1"), "1");
    assert!(!t.record("d0").exists() && !t.record("d1").exists());
}

#[test]
fn sighup_restores_the_flag_as_sigterm_does() {
    let t = Testbed::new();
    let mut router = Router::start(&t, &[], CONFIG);
    router.wait_until("d0 and d1 open, forwarding off", || t.open_with_forwarding_off());
    let pid = router.pid();
    router.wait_until("the router's first worker", || worker_running(pid));
    assert_eq!(t.send_and_count(), each_once(1));
    // A closed terminal: the router stops in order and gives the flags back.
    router.signal(libc::SIGHUP);
    let status = router.wait_exit();
    let (out, err) = router.output();
    assert!(status.success(), "exit {}: {}", status, err);
    assert_eq!(out, format!("{}\n", FRAMES));
    assert!(err.contains(" (interrupted)\n"), "{}", err);
    assert_eq!(t.flag("d0"), "1");
    assert_eq!(t.flag("d1"), "1");
    assert!(!t.record("d0").exists() && !t.record("d1").exists());
}

#[test]
fn a_second_signal_ends_a_blocked_configuration_and_the_next_run_restores_the_flag() {
    let t = Testbed::new();
    let fifo = t.run_dir.path().join("never-written");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: `c` is a NUL-terminated path that outlives the call.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
    // d0 is opened (its flag turned off), then the configuration blocks opening the
    // FIFO, which nobody writes.
    let config = format!(
        "FromDevice(d0, METHOD PACKET) -> routed :: Counter -> Discard; FromDump({}) -> Discard;",
        fifo.display()
    );
    let mut blocked = Router::start(&t, &[], &config);
    blocked.wait_until("d0's flag off", || t.flag("d0") == "0" && t.record("d0").exists());
    // With a flag held, the first signal asks for the orderly stop, which has to wait
    // for the configuration.
    blocked.signal(libc::SIGTERM);
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        blocked.0.exited().is_none(),
        "the first signal should wait for the open"
    );
    blocked.signal(libc::SIGTERM);
    let status = blocked.wait_exit();
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(status.signal(), Some(libc::SIGTERM), "{:?}", status);
    // Nothing restored the flag; the record remembers it.
    assert_eq!(t.flag("d0"), "0");
    let record = std::fs::read_to_string(t.record("d0")).expect("record left behind");
    assert!(
        record.contains(&format!("\npid {}\n", blocked.pid())),
        "{}",
        record
    );

    let mut next = Router::start(&t, &[], CONFIG);
    let status = next.wait_exit_after(|| t.open_with_forwarding_off());
    let (_, err) = next.output();
    assert!(status.success(), "exit {}: {}", status, err);
    assert!(
        err.contains(&format!(
            "brickroute: d0: the kernel's IPv4 forwarding is still off from a brickroute run \
             that did not exit cleanly (pid {}); kept off while brickroute runs, \
             net.ipv4.conf.d0.forwarding restored to 1 on exit\n",
            blocked.pid()
        )),
        "{}",
        err
    );
    assert_eq!(t.flag("d0"), "1");
    assert!(!t.record("d0").exists());
}

#[test]
fn keep_kernel_forwarding_leaves_the_flag_on_and_warns() {
    let t = Testbed::new();
    let mut router = Router::start(&t, &["--keep-kernel-forwarding"], CONFIG);
    router.wait_until("d0 and d1 open", || t.ports_open());
    assert_eq!(t.flag("d0"), "1");
    assert!(!t.record("d0").exists());
    // The kernel forwards each frame and so does brickroute: two copies of each.
    assert_eq!(t.send_and_count(), each_once(2));
    let (out, err) = router.terminate();
    // One handler: Click prints its value alone.
    assert_eq!(out, format!("{}\n", FRAMES));
    for dev in ["d0", "d1"] {
        assert!(
            err.contains(&format!(
                "brickroute: warning: the kernel forwards IPv4 arriving on {0} too \
                 (net.ipv4.conf.{0}.forwarding = 1), and AF_PACKET leaves every frame to it",
                dev
            )),
            "{}",
            err
        );
    }
    assert!(
        !err.contains("turned the kernel's IPv4 forwarding off"),
        "{}",
        err
    );
    assert_eq!(t.flag("d0"), "1");
}

#[test]
fn a_configuration_error_after_the_change_restores_the_flag() {
    let t = Testbed::new();
    let mut router = Router::start(
        &t,
        &[],
        "FromDevice(d0, METHOD PACKET) -> Discard; FromDevice(brtnosuch7, METHOD PACKET) -> Discard;",
    );
    let status = router.wait_exit();
    let (_, err) = router.output();
    assert_eq!(status.code(), Some(1), "{}", err);
    assert!(
        err.contains("brickroute: d0: turned the kernel's IPv4 forwarding off"),
        "{}",
        err
    );
    assert!(
        err.contains("cannot open device 'brtnosuch7' (METHOD PACKET)"),
        "{}",
        err
    );
    assert!(err.ends_with("Router could not be initialized!\n"), "{}", err);
    assert_eq!(t.flag("d0"), "1");
    assert!(!t.record("d0").exists());
}

#[test]
fn keep_kernel_forwarding_takes_no_value() {
    let o = common::brickroute(&["run", "--keep-kernel-forwarding=yes", "-q", "-e", "Idle"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        common::stderr(&o).starts_with(
            "error: unexpected value 'yes' for '--keep-kernel-forwarding' found; no more were expected"
        ),
        "{}",
        common::stderr(&o)
    );
}

#[test]
fn a_second_router_on_the_interface_leaves_the_flag_to_the_first() {
    let t = Testbed::new();
    let mut first = Router::start(&t, &[], CONFIG);
    first.wait_until("forwarding off", || t.ports_open() && t.flag("d0") == "0");
    let mut second = Router::start(
        &t,
        &[],
        "FromDevice(d0, METHOD PACKET) -> routed :: Counter -> Discard;",
    );
    let second_status = second.wait_exit_after(|| {
        // The second is up once d0 has two promiscuous sockets.
        t.dut.link_details("d0").contains("promiscuity 2")
    });
    let (_, err) = second.output();
    assert!(second_status.success(), "{}", err);
    assert!(
        err.contains(&format!(
            "brickroute: d0: the kernel's IPv4 forwarding is held off by another brickroute (pid {}), \
             which turns it back on when it exits: from then on, while this router still reads d0, \
             the kernel forwards each frame arriving there too (each leaves twice)\n",
            first.pid()
        )),
        "{}",
        err
    );
    // The second run's exit leaves the flag, and the record, to the first.
    assert_eq!(t.flag("d0"), "0");
    assert!(t.record("d0").exists());
    first.signal(libc::SIGTERM);
    assert!(first.wait_exit().success());
    assert_eq!(t.flag("d0"), "1");
    assert!(!t.record("d0").exists());
}

#[test]
fn ipv6_forwarding_is_warned_about_and_left_alone() {
    let t = Testbed::new();
    for f in ["all", "default", "d0"] {
        t.dut
            .set_proc_sys(&format!("net/ipv6/conf/{}/disable_ipv6", f), "0");
    }
    t.dut.set_proc_sys("net/ipv6/conf/all/forwarding", "1");
    // -q: configure (open the interfaces), then exit.
    let mut router = Router::start(
        &t,
        &["-q"],
        "FromDevice(d0, METHOD PACKET) -> routed :: Counter -> Discard;",
    );
    let status = router.wait_exit();
    let (_, err) = router.output();
    assert!(status.success(), "{}", err);
    assert!(
        err.contains(
            "brickroute: warning: the kernel forwards IPv6 arriving on d0 too \
             (net.ipv6.conf.all.forwarding = 1), and AF_PACKET leaves every frame to it: \
             each IPv6 frame is forwarded twice; Linux has no per-interface switch for IPv6 \
             forwarding"
        ),
        "{}",
        err
    );
    assert!(
        err.contains("brickroute: d0: turned the kernel's IPv4 forwarding off"),
        "{}",
        err
    );
    assert_eq!(t.dut.proc_sys("net/ipv6/conf/all/forwarding"), "1");
    assert_eq!(t.dut.proc_sys("net/ipv6/conf/d0/disable_ipv6"), "0");
    assert_eq!(t.flag("d0"), "1");
}

/// Whether `dev` of dut is open by an AF_PACKET port (which turns promiscuous mode on).
fn open(t: &Testbed, dev: &str) -> bool {
    t.dut.link_details(dev).contains("promiscuity 1")
}

#[test]
fn configurations_written_to_hotconfig_hold_the_flags_of_the_interfaces_they_name() {
    let t = Testbed::new();
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("s");
    let control = format!("ControlSocket(unix, {});\n", sock.display());
    let routing = format!("{control}{CONFIG}");
    let mut router = Router::start(&t, &["-R"], &routing);
    router.wait_until("d0 and d1 open, forwarding off", || t.open_with_forwarding_off());
    let mut c = control_client::connect_unix(&sock, &mut router.0);

    // A configuration naming d0 only: d1 is closed and its flag given back.
    let d0_only = format!("{control}FromDevice(d0, METHOD PACKET) -> routed :: Counter -> Discard;");
    assert_eq!(c.hotconfig(&d0_only), ["200 Write handler 'hotconfig' OK\r\n"]);
    let deadline = Instant::now() + Duration::from_secs(10);
    while open(&t, "d1") || t.flag("d1") != "1" {
        assert!(Instant::now() < deadline, "d1 still open, or its flag still off");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(open(&t, "d0"));
    assert_eq!(t.flag("d0"), "0");
    assert!(!t.record("d1").exists());
    // The kernel forwards d0's frames no more, brickroute drops them.
    assert!(t.send_and_count().is_empty());

    // One that opens d1 and then fails: refused, and d1 is closed again.
    let failing = format!(
        "{control}FromDevice(d0, METHOD PACKET) -> Discard;\n\
         td :: ToDevice(d1, METHOD PACKET); Idle -> Counter(NOSUCH 1) -> td;"
    );
    let answer = c.hotconfig(&failing);
    assert_eq!(
        answer[0], "520-Write handler 'hotconfig' error:\r\n",
        "{answer:?}"
    );
    // (ToDevice opened d1 before Counter, built after it, failed.)
    assert_eq!(
        answer[1],
        "520-<hotconfig>:3:44: error: Counter@6 :: Counter: bad keyword 'NOSUCH'\r\n"
    );
    assert!(!open(&t, "d1"));
    assert_eq!(t.flag("d1"), "1");
    assert!(!t.record("d1").exists());

    // Routing again: both held, each frame leaves once.
    assert_eq!(c.hotconfig(&routing), ["200 Write handler 'hotconfig' OK\r\n"]);
    router.wait_until("d0 and d1 open, forwarding off", || t.open_with_forwarding_off());
    assert_eq!(t.send_and_count(), each_once(1));
    let (out, err) = router.terminate();
    assert_eq!(out, format!("{}\n", FRAMES));
    assert!(err.contains("over 3 configurations"), "{err}");
    assert_eq!(t.flag("d0"), "1");
    assert_eq!(t.flag("d1"), "1");
}
