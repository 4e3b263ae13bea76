//! `brickroute run -R`: a configuration written to the global `hotconfig` handler
//! replaces the running one while the process, its control sockets and their
//! connections stay; one that fails to build is refused with its error and changes
//! nothing. The last test swaps Click's IP router on AF_XDP interfaces in and out
//! between two hosts in network namespaces (root needed), with `ping` as the judge.
//!
//! h0: e0 10.0.1.2/24 -- r0 [router: 10.0.1.1 | 10.0.2.1] r1 -- e1 10.0.2.2/24 :h1

mod common;
#[path = "common/control_client.rs"]
mod control_client;
#[path = "common/netns.rs"]
mod netns;
#[path = "common/router_process.rs"]
mod router_process;
#[path = "common/two_hosts.rs"]
mod two_hosts;

use common::root;
use control_client::{connect_unix, write_data, Client};
use router_process::RouterProcess;
use std::io::Read;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Endless IPv4 packets to 192.0.2.1 through a route lookup whose output 0 (the
/// default route) and output 1 each end in a counter named `PREFIX0` and `PREFIX1`.
fn traffic(socket: &Path, prefix: &str) -> String {
    format!(
        "ControlSocket(unix, {socket});
         InfiniteSource(DATA \\<45000014 00000000 40110000 0a000001 c0000201>, LIMIT -1, BURST 32)
           -> GetIPAddress(16) -> rt :: RadixIPLookup(0.0.0.0/0 0);
         rt[0] -> {prefix}0 :: Counter -> Discard;
         rt[1] -> {prefix}1 :: Counter -> Discard;",
        socket = socket.display()
    )
}

fn start(args: &[&str], config: &str) -> RouterProcess {
    start_reading(args, config, Stdio::null())
}

/// [`start`] with `stdin` as the router's standard input.
fn start_reading(args: &[&str], config: &str, stdin: Stdio) -> RouterProcess {
    RouterProcess(
        Command::new(env!("CARGO_BIN_EXE_brickroute"))
            .arg("run")
            .args(args)
            .args(["-e", config])
            .current_dir(root())
            .stdin(stdin)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start brickroute"),
    )
}

/// Waits (10 s at most) until counter `name` counts more than `than`.
fn grows(c: &mut Client<UnixStream>, name: &str, than: u64) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let n = c.count(name);
        if n > than {
            return n;
        }
        assert!(Instant::now() < deadline, "{name} stays at {n}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn a_written_configuration_takes_over_and_a_bad_one_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("br.sock");
    let first = traffic(&sock, "a");
    let mut p = start(&["-R", "-h", "b0.count", "-h", "rt.table"], &first);
    let mut c = connect_unix(&sock, &mut p);
    grows(&mut c, "a0", 0);
    assert_eq!(c.read("config"), first);
    // State of the running configuration: a route added through the socket.
    assert_eq!(
        c.status("WRITE rt.add 192.0.2.0/24 1\n"),
        "200 Write handler 'rt.add' OK\r\n"
    );
    let a1 = grows(&mut c, "a1", 0);

    // A configuration that does not build: refused with its error, the running one
    // untouched (its route, its traffic, its configuration text).
    let broken = traffic(&sock, "b").replace("-> Discard;", "-> Discar;");
    let answer = c.hotconfig(&broken);
    assert_eq!(
        answer[0], "520-Write handler 'hotconfig' error:\r\n",
        "{answer:?}"
    );
    assert!(
        answer[1].starts_with("520-<hotconfig>:4:36: error: undeclared element 'Discar'"),
        "{answer:?}"
    );
    assert!(answer.last().unwrap().starts_with("520 "), "{answer:?}");
    grows(&mut c, "a1", a1);
    assert_eq!(c.read("rt.lookup 192.0.2.1"), "1");
    assert_eq!(c.read("config"), first);

    // One that builds takes over: the same connection calls its handlers from the
    // next command on, the old elements are gone, and its state is its own (the route
    // written to the old table is not in the new one).
    let second = traffic(&sock, "b");
    assert_eq!(c.hotconfig(&second), ["200 Write handler 'hotconfig' OK\r\n"]);
    assert_eq!(c.status("READ a0.count\n"), "510 No element named 'a0'\r\n");
    grows(&mut c, "b0", 0);
    assert_eq!(c.read("rt.lookup 192.0.2.1"), "0");
    assert_eq!(c.count("b1"), 0);
    assert_eq!(c.read("config"), second);

    // `stop` stops the new configuration, and the handlers printed are its own.
    assert_eq!(c.status("WRITE stop\n"), "200 Write handler 'stop' OK\r\n");
    assert!(p.wait_exit(Duration::from_secs(10)).success());
    let (out, err) = p.output();
    assert!(out.starts_with("b0.count:\n"), "{out}");
    assert!(out.contains("rt.table:\n0.0.0.0/0"), "{out}");
    assert!(!out.contains("192.0.2.0/24"), "{out}");
    assert!(err.contains("over 2 configurations"), "{err}");
    assert!(!sock.exists());
}

#[test]
fn sockets_the_new_configuration_does_not_name_close_and_its_own_open() {
    let dir = tempfile::tempdir().unwrap();
    let (old, new) = (dir.path().join("old.sock"), dir.path().join("new.sock"));
    let mut p = start(&["-R"], &traffic(&old, "a"));
    let mut c = connect_unix(&old, &mut p);
    let mut idle = connect_unix(&old, &mut p);
    grows(&mut c, "a0", 0);

    // The answer still reaches the writer, then both connections of the socket the new
    // configuration does not name close, and its file goes.
    assert_eq!(
        c.hotconfig(&traffic(&new, "b")),
        ["200 Write handler 'hotconfig' OK\r\n"]
    );
    let mut rest = Vec::new();
    c.stream()
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let n = c.read_to_end_raw(&mut rest);
    assert_eq!(n, 0, "{:?}", String::from_utf8_lossy(&rest));
    assert_eq!(idle.read_to_end_raw(&mut rest), 0);
    let deadline = Instant::now() + Duration::from_secs(10);
    while old.exists() {
        assert!(Instant::now() < deadline, "old socket file stays");
        std::thread::sleep(Duration::from_millis(10));
    }
    let mut c = connect_unix(&new, &mut p);
    grows(&mut c, "b0", 0);
    assert_eq!(c.status("WRITE stop\n"), "200 Write handler 'stop' OK\r\n");
    assert!(p.wait_exit(Duration::from_secs(10)).success());
}

#[test]
fn without_allow_reconfigure_there_is_no_hotconfig_handler() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("br.sock");
    let mut p = start(&[], &traffic(&sock, "a"));
    let mut c = connect_unix(&sock, &mut p);
    assert_eq!(
        c.status("CHECKWRITE hotconfig\n"),
        "511 No handler named 'hotconfig'\r\n"
    );
    assert_eq!(
        c.status("WRITE hotconfig Idle\n"),
        "511 No handler named 'hotconfig'\r\n"
    );
    assert_eq!(c.status("WRITE stop\n"), "200 Write handler 'stop' OK\r\n");
    assert!(p.wait_exit(Duration::from_secs(10)).success());
}

/// `run -R` with [`traffic`] (counters `a0`, `a1`) and its socket in `dir`, once
/// traffic flows: the socket, the process and a connection.
fn running_with_traffic(dir: &Path) -> (std::path::PathBuf, RouterProcess, Client<UnixStream>) {
    let sock = dir.join("br.sock");
    let mut p = start(&["-R"], &traffic(&sock, "a"));
    let mut c = connect_unix(&sock, &mut p);
    grows(&mut c, "a0", 0);
    (sock, p, c)
}

#[test]
fn a_stop_wins_over_a_configuration_written_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let (sock, mut p, mut c) = running_with_traffic(dir.path());
    let next = traffic(&sock, "b");
    c.send(&format!("WRITE stop\n{}", write_data("hotconfig", &next)));
    assert_eq!(c.line(), "200 Write handler 'stop' OK\r\n");
    assert_eq!(
        [c.line(), c.line()],
        [
            "520-Write handler 'hotconfig' error:\r\n",
            "520 the router is stopping\r\n"
        ]
    );
    assert!(p.wait_exit(Duration::from_secs(10)).success());
    let (_, err) = p.output();
    assert!(!err.contains("configurations"), "{err}");
}

/// LIMIT packets through an IPsec tunnel (ESPEncap `encap` into ESPDecap `dec`,
/// counters `ok` and `refused` behind) and a neighbour table `q`, served on `socket`.
fn tunnel(socket: &Path, limit: u32, encap: &str) -> String {
    let key = "0x000102030405060708090a0b0c0d0e0fdeadbeef";
    format!(
        "ControlSocket(unix, {socket});
         InfiniteSource(DATA \\<45000014 00000000 40110000 0a000001 c0000201>, LIMIT {limit}, STOP false)
           -> {encap} :: ESPEncap(SPI 0x1000, KEY {key}, SRC 192.0.2.1, DST 192.0.2.2)
           -> dec :: ESPDecap(0x1000, {key}) -> ok :: Counter -> Discard;
         dec[1] -> refused :: Counter -> Discard;
         Idle -> q :: ARPQuerier(10.0.0.1/24, 02:00:00:00:00:01) -> Discard; Idle -> [1]q;",
        socket = socket.display()
    )
}

/// Waits (10 s at most) until handler `name` reads `want`.
fn reads(c: &mut Client<UnixStream>, name: &str, want: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let v = c.read(name);
        if v.trim() == want {
            return;
        }
        assert!(Instant::now() < deadline, "{name} stays at {v:?}, not {want}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Click's hotswap: the new configuration's elements take the state of the old one's
/// of the same name: the tunnel's sequence numbers go on (its next packet is 101, not
/// 1, so a peer's anti-replay window would take it), the receiving end's window goes
/// on (an encapsulation of another name, starting again at 1, is refused), and the
/// neighbour table keeps its entries; counters without state start again.
#[test]
fn elements_of_the_same_name_take_over_their_predecessors_state() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("br.sock");
    let mut p = start(&["-R"], &tunnel(&sock, 100, "enc"));
    let mut c = connect_unix(&sock, &mut p);
    reads(&mut c, "ok.count", "100");
    assert_eq!(
        c.status("WRITE q.insert 10.0.0.2 02:00:00:00:00:02\n"),
        "200 Write handler 'q.insert' OK\r\n"
    );
    assert_eq!(
        c.hotconfig(&tunnel(&sock, 50, "enc")),
        ["200 Write handler 'hotconfig' OK\r\n"]
    );
    reads(&mut c, "enc.seq", "150");
    reads(&mut c, "ok.count", "50");
    assert_eq!(c.read("dec.seq").trim(), "150");
    assert_eq!(c.count("refused"), 0);
    assert!(c.read("q.table").starts_with("10.0.0.2 1 02:00:00:00:00:02 "));
    // A new encapsulation sends 1 to 50 again: the window taken over has seen them
    // (or left them behind).
    assert_eq!(
        c.hotconfig(&tunnel(&sock, 50, "enc2")),
        ["200 Write handler 'hotconfig' OK\r\n"]
    );
    reads(&mut c, "refused.count", "50");
    assert_eq!(c.count("ok"), 0);
    assert_eq!(c.read("dec.seq").trim(), "150");
    assert_eq!(c.status("WRITE stop\n"), "200 Write handler 'stop' OK\r\n");
    assert!(p.wait_exit(Duration::from_secs(10)).success());
}

/// A pcap record of one byte, `tag`, at second `tag` (little-endian, microseconds).
fn one_byte_record(tag: u8) -> Vec<u8> {
    let mut v = Vec::new();
    for w in [u32::from(tag), 0, 1, 1] {
        v.extend_from_slice(&w.to_le_bytes());
    }
    v.push(tag);
    v
}

/// A FromDump of standard input replaced by one of the same name reads on from where
/// it was (Click's FromDump takes its predecessor's file); a FromDump built while
/// another reads standard input would otherwise read nothing.
#[test]
fn a_fromdump_of_standard_input_reads_on_across_configurations() {
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("br.sock");
    let config = |counter: &str| {
        format!(
            "ControlSocket(unix, {}); fd :: FromDump(-) -> {counter} :: Counter -> Discard;",
            sock.display()
        )
    };
    let mut p = start_reading(&["-R"], &config("a"), Stdio::piped());
    let mut input = p.0.stdin.take().unwrap();
    // Header: magic, 2.4, zone, sigfigs, snaplen 65535, Ethernet.
    let mut bytes = 0xA1B2_C3D4u32.to_le_bytes().to_vec();
    bytes.extend_from_slice(&[2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0, 1, 0, 0, 0]);
    for tag in 1..=5 {
        bytes.extend(one_byte_record(tag));
    }
    input.write_all(&bytes).unwrap();
    let mut c = connect_unix(&sock, &mut p);
    reads(&mut c, "a.count", "5");
    assert_eq!(
        c.hotconfig(&config("b")),
        ["200 Write handler 'hotconfig' OK\r\n"]
    );
    // The old reader waits in its read: records end its pass (it may take a few
    // first), and the new configuration reads on from where it stopped.
    let mut tag = 5;
    let deadline = Instant::now() + Duration::from_secs(10);
    while c.count("b") == 0 {
        assert!(Instant::now() < deadline, "the new configuration read nothing");
        tag += 1;
        input.write_all(&one_byte_record(tag)).unwrap();
        input.flush().unwrap();
        std::thread::sleep(Duration::from_millis(50));
    }
    // Every record written was read, once, by one configuration or the other.
    reads(&mut c, "fd.filepos", &(24 + 17 * u64::from(tag)).to_string());
    drop(input);
    assert_eq!(c.status("WRITE stop\n"), "200 Write handler 'stop' OK\r\n");
    assert!(p.wait_exit(Duration::from_secs(10)).success());
    let (_, err) = p.output();
    assert!(
        !err.contains("standard input is read by another FromDump"),
        "{err}"
    );
}

/// A configuration that closes the socket its write came through, while more writes
/// wait on that connection: the router takes it over and goes on (it once waited for
/// that connection's next build while holding what the build needed).
#[test]
fn a_configuration_closing_the_writers_socket_takes_over_and_the_router_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a.sock"), dir.path().join("b.sock"));
    let both = format!("ControlSocket(unix, {});\n{}", b.display(), traffic(&a, "a"));
    let mut p = start(&["-R"], &both);
    let mut on_b = connect_unix(&b, &mut p);
    let (only_a, again) = (traffic(&a, "b"), traffic(&a, "c"));
    on_b.send(&(write_data("hotconfig", &only_a) + &write_data("hotconfig", &again)));
    assert_eq!(on_b.line(), "200 Write handler 'hotconfig' OK\r\n");
    // Whichever of the two took over, the router serves it through a.
    let mut on_a = connect_unix(&a, &mut p);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let b0 = on_a.status("CHECKREAD b0.count\n").starts_with("200");
        let c0 = on_a.status("CHECKREAD c0.count\n").starts_with("200");
        if c0 || b0 && !on_b_open(&b) {
            grows(&mut on_a, if c0 { "c0" } else { "b0" }, 0);
            break;
        }
        assert!(Instant::now() < deadline, "no configuration took over");
        std::thread::sleep(Duration::from_millis(20));
    }
    // SAFETY: kill(2) on our child's pid.
    unsafe { libc::kill(p.pid(), libc::SIGTERM) };
    assert!(p.wait_exit(Duration::from_secs(10)).success());
}

/// Whether anything still listens on UNIX socket `path`.
fn on_b_open(path: &Path) -> bool {
    UnixStream::connect(path).is_ok()
}

#[test]
fn two_sockets_of_one_port_range_are_taken_over_one_each() {
    let config = |both: bool| {
        format!(
            "c1 :: ControlSocket(TCP, 46200+); {} Idle -> Discard;",
            if both {
                "c2 :: ControlSocket(TCP, 46200+);"
            } else {
                ""
            }
        )
    };
    let mut p = start(&["-R"], &config(true));
    let connect = |port: &str, p: &mut RouterProcess| {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Ok(s) = std::net::TcpStream::connect(("127.0.0.1", port.parse::<u16>().unwrap())) {
                s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
                return Client::new(s);
            }
            assert!(p.exited().is_none() && Instant::now() < deadline, "not served");
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    // The first port of the range is 46200 or a later free one, once served.
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut c = loop {
        let found = (46200..46264).find_map(|port| {
            let s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
            s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            let mut c = Client::new(s);
            (c.status("CHECKREAD c1.port\n").starts_with("200")).then_some(c)
        });
        if let Some(c) = found {
            break c;
        }
        assert!(p.exited().is_none() && Instant::now() < deadline, "not served");
        std::thread::sleep(Duration::from_millis(20));
    };
    let ports = |c: &mut Client<std::net::TcpStream>| [c.read("c1.port"), c.read("c2.port")];
    let before = ports(&mut c);
    for _ in 0..3 {
        let text = config(true);
        c.send(&write_data("hotconfig", &text));
        assert_eq!(c.line(), "200 Write handler 'hotconfig' OK\r\n");
        assert_eq!(ports(&mut c), before);
    }
    // The configuration with c1 alone closes the other one.
    let text = config(false);
    c.send(&write_data("hotconfig", &text));
    assert_eq!(c.line(), "200 Write handler 'hotconfig' OK\r\n");
    let other: u16 = before[1].parse().unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", other)).is_ok() {
        assert!(Instant::now() < deadline, "port {other} still open");
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut c = connect(&before[0], &mut p);
    assert_eq!(c.status("WRITE stop\n"), "200 Write handler 'stop' OK\r\n");
    assert!(p.wait_exit(Duration::from_secs(10)).success());
}

#[test]
fn a_stop_written_right_after_a_configuration_keeps_it_from_taking_over() {
    let dir = tempfile::tempdir().unwrap();
    let (sock, mut p, mut c) = running_with_traffic(dir.path());
    let next = traffic(&sock, "b");
    c.send(&(write_data("hotconfig", &next) + "WRITE stop\n"));
    assert_eq!(c.line(), "200 Write handler 'hotconfig' OK\r\n");
    assert_eq!(c.line(), "200 Write handler 'stop' OK\r\n");
    assert!(p.wait_exit(Duration::from_secs(10)).success());
    let (_, err) = p.output();
    assert!(!err.contains("configurations"), "{err}");
}

/// A socket the next configuration drops is closed as that one takes over, so the
/// configuration written right after it may name it again.
#[test]
fn a_socket_dropped_by_one_configuration_may_be_named_by_the_next() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a.sock"), dir.path().join("b.sock"));
    let with_b = |prefix: &str| format!("ControlSocket(unix, {});\n{}", b.display(), traffic(&a, prefix));
    let mut p = start(&["-R"], &with_b("a"));
    let mut on_a = connect_unix(&a, &mut p);
    let _on_b = connect_unix(&b, &mut p);
    let (without_b, again) = (traffic(&a, "b"), with_b("c"));
    on_a.send(&(write_data("hotconfig", &without_b) + &write_data("hotconfig", &again)));
    assert_eq!(on_a.line(), "200 Write handler 'hotconfig' OK\r\n");
    assert_eq!(on_a.line(), "200 Write handler 'hotconfig' OK\r\n");
    let mut on_b = connect_unix(&b, &mut p);
    grows(&mut on_b, "c0", 0);
    assert_eq!(on_b.status("WRITE stop\n"), "200 Write handler 'stop' OK\r\n");
    assert!(p.wait_exit(Duration::from_secs(10)).success());
}

/// A configuration that fails after its elements are built (here KernelRoutes naming
/// no lookup element) leaves an existing output file as it was.
#[test]
fn a_configuration_that_fails_leaves_an_existing_capture_alone() {
    let dir = tempfile::tempdir().unwrap();
    let dump = dir.path().join("out.pcap");
    std::fs::write(&dump, b"earlier").unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_brickroute"))
        .args([
            "run",
            "-e",
            &format!(
                "InfiniteSource(LIMIT 1) -> ToDump({}); KernelRoutes(nosuch, lo 0);",
                dump.display()
            ),
        ])
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("nosuch"), "{o:?}");
    assert_eq!(std::fs::read(&dump).unwrap(), b"earlier");
    assert_eq!(files(dir.path()), ["out.pcap"]);
}

/// The files in `dir`, sorted.
fn files(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn a_refused_configuration_leaves_the_running_ones_capture_alone() {
    capture_across_configurations(false);
}

/// The same with a capture under a second name (a hard link, as an operator's
/// rotation makes), which is written where it is: not emptied by the refused
/// configuration, emptied for the one that takes over.
#[test]
fn a_refused_configuration_leaves_a_capture_written_in_place_alone() {
    capture_across_configurations(true);
}

fn capture_across_configurations(linked: bool) {
    use std::os::unix::fs::MetadataExt;
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("br.sock");
    let dump = dir.path().join("out.pcap");
    let capture = |counter: &str, todump: &str, extra: &str| {
        format!(
            "ControlSocket(unix, {}); RatedSource(RATE 1000) -> {counter} :: Counter \
             -> td :: ToDump({}, UNBUFFERED true{todump}); {extra}",
            sock.display(),
            dump.display()
        )
    };
    let mut p = start(&["-R"], &capture("a", "", ""));
    let mut c = connect_unix(&sock, &mut p);
    grows(&mut c, "a", 10);
    let other = dir.path().join("other.pcap");
    let names: &[&str] = if linked {
        std::fs::hard_link(&dump, &other).unwrap();
        &["br.sock", "other.pcap", "out.pcap"]
    } else {
        &["br.sock", "out.pcap"]
    };
    let inode = std::fs::metadata(&dump).unwrap().ino();
    let before = std::fs::read(&dump).unwrap();
    let size = before.len() as u64;
    assert!(size > 24);

    // Refused after its ToDump was built: the running capture is neither emptied nor
    // replaced, and no file of the refused one is left.
    let answer = c.hotconfig(&capture("b", "", "Idle -> Counter(NOSUCH 1) -> Discard;"));
    assert_eq!(
        answer[0], "520-Write handler 'hotconfig' error:\r\n",
        "{answer:?}"
    );
    let a = c.count("a");
    grows(&mut c, "a", a);
    let m = std::fs::metadata(&dump).unwrap();
    assert_eq!(m.ino(), inode);
    assert!(m.len() > size, "{} then {}", size, m.len());
    assert!(std::fs::read(&dump).unwrap().starts_with(&before));
    assert_eq!(files(dir.path()), names);

    // Taken over by a ToDump of the same name, file and encapsulation: as in Click,
    // it writes on into the running capture.
    assert_eq!(
        c.hotconfig(&capture("b", "", "")),
        ["200 Write handler 'hotconfig' OK\r\n"]
    );
    grows(&mut c, "b", 5);
    assert_eq!(std::fs::metadata(&dump).unwrap().ino(), inode);
    // Every record b counted is written (UNBUFFERED), after a's (more than 10).
    let b = c.count("b");
    let (header, records) = walk(&std::fs::read(&dump).unwrap());
    assert_eq!(header, before[..24]);
    assert!(records >= b + 11, "{records} records, b counted {b}");
    assert_eq!(files(dir.path()), names);

    // Taken over by one of another encapsulation: the file is replaced, from the new
    // header on (the same file when it is written in place).
    assert_eq!(
        c.hotconfig(&capture("c", ", ENCAP IP", "")),
        ["200 Write handler 'hotconfig' OK\r\n"]
    );
    grows(&mut c, "c", 5);
    assert_eq!(std::fs::metadata(&dump).unwrap().ino() == inode, linked);
    assert_eq!(files(dir.path()), names);
    assert_eq!(c.status("WRITE stop\n"), "200 Write handler 'stop' OK\r\n");
    assert!(p.wait_exit(Duration::from_secs(10)).success());
    let bytes = std::fs::read(&dump).unwrap();
    let (header, records) = walk(&bytes);
    // Raw IP (101) in the header's last word.
    assert_eq!(&header[..4], &[0xd4, 0xc3, 0xb2, 0xa1]);
    assert_eq!(&header[20..24], &101u32.to_le_bytes());
    assert!(records >= 5, "{records}");
    if linked {
        assert_eq!(std::fs::read(&other).unwrap(), bytes);
    }
}

/// A capture's file header and its number of records, checked by walking them
/// (16-byte record headers, then the captured bytes) to the file's end.
fn walk(bytes: &[u8]) -> (Vec<u8>, u64) {
    let mut at = 24;
    let mut records = 0;
    while at < bytes.len() {
        let caplen = u32::from_le_bytes(bytes[at + 8..at + 12].try_into().unwrap()) as usize;
        at += 16 + caplen;
        records += 1;
    }
    assert_eq!(at, bytes.len());
    (bytes[..24].to_vec(), records)
}

/// `ping ARGS` (IPv4) in `ns`: whether it succeeded, and its output.
fn ping(ns: &netns::Netns, args: &[&str]) -> (bool, String) {
    two_hosts::ping(ns, "-4", args)
}

#[test]
fn interfaces_stay_open_across_configurations_that_take_them_over() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("br.sock");
    // Click's IP router with a control socket; the other configuration takes every
    // frame from both interfaces and drops it. Both use the command line's $DEV0 and
    // $DEV1.
    let router = format!(
        "{}\nControlSocket(unix, {});\n",
        std::fs::read_to_string(root().join("conf/iprouter.click")).unwrap(),
        sock.display()
    );
    let swallow = format!(
        "ControlSocket(unix, {});
         FromDevice($DEV0) -> c :: Counter -> Discard;
         FromDevice($DEV1) -> Discard;",
        sock.display()
    );
    let conf = dir.path().join("router.click");
    std::fs::write(&conf, &router).unwrap();
    let mut t = two_hosts::TwoHosts::up(
        conf.to_str().unwrap(),
        &[
            "DEV0=r0",
            &format!("MAC0={}", two_hosts::R0_MAC),
            "DEV1=r1",
            &format!("MAC1={}", two_hosts::R1_MAC),
            // Two workers for the veths' two queues: the interfaces open with AF_XDP.
            "--threads",
            "2",
            "-R",
        ],
        two_hosts::ipv4_host,
        |h0| ping(h0, &["-c", "1", "-W", "1", "10.0.1.1"]).0,
    );
    let mut c = Client::new(UnixStream::connect(&sock).unwrap());
    c.stream()
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let through = |t: &two_hosts::TwoHosts| ping(&t.h0, &["-c", "3", "-i", "0.2", "-W", "2", "10.0.2.2"]);
    let (ok, out) = through(&t);
    assert!(ok && out.contains("3 received"), "{out}");
    for round in 0..3 {
        assert_eq!(c.hotconfig(&swallow), ["200 Write handler 'hotconfig' OK\r\n"]);
        let (ok, out) = ping(&t.h0, &["-c", "2", "-i", "0.2", "-W", "1", "10.0.2.2"]);
        assert!(!ok && out.contains("0 received"), "round {round}: {out}");
        assert!(c.count("c") >= 2, "round {round}");
        assert_eq!(c.status("READ arpq0.table\n"), "510 No element named 'arpq0'\r\n");

        assert_eq!(c.hotconfig(&router), ["200 Write handler 'hotconfig' OK\r\n"]);
        // The router's ARP starts empty: the hosts' next pings resolve it again.
        let deadline = Instant::now() + Duration::from_secs(20);
        while !ping(&t.h0, &["-c", "1", "-W", "1", "10.0.1.1"]).0 {
            assert!(
                Instant::now() < deadline,
                "round {round}: the router never answered again"
            );
        }
        let (ok, out) = through(&t);
        assert!(ok && out.contains("3 received"), "round {round}: {out}");
        assert!(c.read("arpq1.table").contains("10.0.2.2"), "round {round}");
    }
    let (_, err) = t.stop();
    assert!(err.contains("over 7 configurations"), "{err}");
    assert!(err.contains("r0 (XDP"), "{err}");
}

/// Reads a connection to its end (0 bytes once the router closed it).
trait ReadToEnd {
    fn read_to_end_raw(&mut self, buf: &mut Vec<u8>) -> usize;
}

impl ReadToEnd for Client<UnixStream> {
    fn read_to_end_raw(&mut self, buf: &mut Vec<u8>) -> usize {
        let mut s = self.stream();
        let mut chunk = [0u8; 256];
        let mut total = 0;
        loop {
            match s.read(&mut chunk) {
                Ok(0) => return total,
                Ok(n) => {
                    buf.extend_from_slice(&chunk[..n]);
                    total += n;
                }
                Err(e) => panic!("connection not closed: {e}"),
            }
        }
    }
}
