//! `brickroute ctl` against a running router: handlers read and written through its
//! ControlSocket (UNIX and TCP), values with lines and hyphens passed whole, the
//! router's refusals and missing sockets reported with exit status 1, `stop` ending
//! the run.

mod common;
#[path = "common/router_process.rs"]
mod router_process;

use common::{root, stderr, stdout};
use router_process::RouterProcess;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// A router with a UNIX control socket at `sock`, a counter `c` that has seen 3
/// packets and a route table `rt`, running until stopped.
fn start(sock: &Path, extra: &str) -> RouterProcess {
    let config = format!(
        "ControlSocket(unix, {}); {extra}
         InfiniteSource(DATA \\<45000014 00000000 40110000 0a000001 c0000201>, LIMIT 3)
           -> c :: Counter -> GetIPAddress(16) -> rt :: RadixIPLookup(10.0.0.0/8 0);
         rt[0] -> Discard; rt[1] -> Discard;",
        sock.display()
    );
    let mut p = RouterProcess(
        Command::new(env!("CARGO_BIN_EXE_brickroute"))
            .args(["run", "--no-summary", "-e", &config])
            .current_dir(root())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start brickroute"),
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::os::unix::net::UnixStream::connect(sock).is_err() {
        if let Some(s) = p.exited() {
            panic!("router exited ({s}): {:?}", p.output());
        }
        assert!(Instant::now() < deadline, "socket never served");
        std::thread::sleep(Duration::from_millis(20));
    }
    p
}

/// `brickroute ctl ARGS`, with `input` on its standard input.
fn ctl(args: &[&str], input: &str) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_brickroute"))
        .arg("ctl")
        .args(["--timeout", "10"])
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run brickroute ctl");
    child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    child.wait_with_output().unwrap()
}

/// Standard output of a `ctl` that succeeded.
fn ok(args: &[&str]) -> String {
    let o = ctl(args, "");
    assert!(o.status.success(), "{args:?}: {}", stderr(&o));
    assert_eq!(stderr(&o), "");
    stdout(&o)
}

/// Standard error of a `ctl` that failed with status 1 and printed nothing else.
fn refused(args: &[&str]) -> String {
    let o = ctl(args, "");
    assert_eq!(o.status.code(), Some(1), "{args:?}: {}", stdout(&o));
    assert_eq!(stdout(&o), "");
    stderr(&o)
}

/// Waits until the router at UNIX socket `s` has counted its source's 3 packets.
fn wait_for_the_source(s: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while ok(&["--unix", s, "read", "c.count"]) != "3\n" {
        assert!(Instant::now() < deadline, "the counter never reached 3");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn handlers_are_read_and_written_and_stop_ends_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("br.sock");
    let s = sock.to_str().unwrap();
    let mut router = start(&sock, "");

    // The source's 3 packets are counted; a value gets the newline it lacks.
    wait_for_the_source(s);
    assert_eq!(
        ok(&["--unix", s, "list"]),
        "ControlSocket@1\nInfiniteSource@2\nc\nGetIPAddress@4\nrt\nDiscard@6\nDiscard@7\n"
    );
    assert!(ok(&["--unix", s, "handlers", "c"]).contains("\ncount\tr\n"));

    // A write's words reach the handler, a read's parameter too.
    assert_eq!(
        ok(&["--unix", s, "write", "rt.add", "192.0.2.0/24", "198.18.0.2", "1"]),
        ""
    );
    assert_eq!(
        ok(&["--unix", s, "read", "rt.lookup", "192.0.2.77"]),
        "1 198.18.0.2\n"
    );

    // Several lines at once from standard input, through the table's ctrl handler.
    let o = ctl(
        &["--unix", s, "write", "--file", "-", "rt.ctrl"],
        "add 198.51.100.0/24 1\nremove 10.0.0.0/8\n",
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let table = ok(&["--unix", s, "read", "rt.table"]);
    let mut routes: Vec<String> = table
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect();
    routes.sort();
    assert_eq!(routes, ["192.0.2.0/24 198.18.0.2 1", "198.51.100.0/24 - 1"]);

    // Words that begin with a hyphen are values, not options: "-1" is any output.
    assert_eq!(
        ok(&["--unix", s, "write", "rt.remove", "198.51.100.0/24", "-", "-1"]),
        ""
    );
    assert_eq!(ok(&["--unix", s, "read", "rt.lookup", "198.51.100.1"]), "-1\n");

    assert_eq!(ok(&["--unix", s, "stop"]), "");
    assert!(router.wait_exit(Duration::from_secs(10)).success());
    assert!(!sock.exists(), "the router left its socket file");
}

#[test]
fn refusals_say_why_with_the_routers_codes() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("br.sock");
    let s = sock.to_str().unwrap();
    let _router = start(&sock, "");

    assert_eq!(
        refused(&["--unix", s, "read", "c.nosuch"]),
        "brickroute ctl: 511 No handler named 'c.nosuch'\n"
    );
    assert_eq!(
        refused(&["--unix", s, "read", "nosuch.count"]),
        "brickroute ctl: 510 No element named 'nosuch'\n"
    );
    assert_eq!(
        refused(&["--unix", s, "write", "rt.add", "bogus"]),
        "brickroute ctl: 520 Write handler 'rt.add' error:\n\
         brickroute ctl: 520 expected 'ADDR/MASK [GATEWAY] OUTPUT'\n"
    );
    assert_eq!(
        refused(&["--unix", s, "write", "c.count", "0"]),
        "brickroute ctl: 530 Handler 'c.count' read-only\n"
    );
    let file = dir.path().join("routes.txt");
    assert_eq!(
        refused(&["--unix", s, "write", "--file", file.to_str().unwrap(), "rt.ctrl"]),
        format!("brickroute ctl: {}: No such file or directory\n", file.display())
    );
    std::fs::write(&file, "add 10.1.0.0/16 1\n").unwrap();
    // A request refused before connecting: exit status 2.
    let o = ctl(
        &[
            "--unix",
            s,
            "write",
            "--file",
            file.to_str().unwrap(),
            "rt.ctrl",
            "x",
        ],
        "",
    );
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(
        stderr(&o),
        format!(
            "brickroute ctl: write rt.ctrl: a value on the command line and --file {} both; \
             give one\n",
            file.display()
        )
    );
    // `-h` in a value is the value (the handler refuses it), not a request for help.
    assert_eq!(
        refused(&["--unix", s, "write", "rt.add", "-h"]),
        "brickroute ctl: 520 Write handler 'rt.add' error:\n\
         brickroute ctl: 520 expected 'ADDR/MASK [GATEWAY] OUTPUT'\n"
    );
    // Nothing refused was applied.
    assert_eq!(ok(&["--unix", s, "read", "rt.lookup", "10.1.2.3"]), "0\n");
}

#[test]
fn a_tcp_socket_is_reached_by_its_port() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("br.sock");
    let s = sock.to_str().unwrap();
    let _router = start(&sock, "tcp :: ControlSocket(TCP, 41950+, READONLY true);");
    wait_for_the_source(s);
    let port = ok(&["--unix", s, "read", "tcp.port"]);
    let port = port.trim();
    assert_eq!(ok(&["--tcp", port, "read", "rt.lookup", "10.9.9.9"]), "0\n");
    let local = format!("127.0.0.1:{port}");
    assert_eq!(ok(&["--tcp", &local, "read", "c.count"]), "3\n");
    assert_eq!(
        refused(&["--tcp", port, "write", "rt.add", "192.0.2.0/24", "1"]),
        "brickroute ctl: 530 Permission denied for 'rt.add'\n"
    );
}

#[test]
fn a_silent_peer_is_given_up_after_the_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("silent.sock");
    // Takes connections and says nothing: no greeting comes.
    let listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    let keep = std::thread::spawn(move || listener.accept().map(|(c, _)| c));
    let o = Command::new(env!("CARGO_BIN_EXE_brickroute"))
        .args([
            "ctl",
            "--timeout",
            "0.5",
            "--unix",
            sock.to_str().unwrap(),
            "read",
            "c.count",
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        stderr(&o),
        format!(
            "brickroute ctl: {}: no answer from the router within 0.5 s (--timeout)\n",
            sock.display()
        )
    );
    drop(keep.join());
}

#[test]
fn a_missing_router_is_named_with_what_to_check() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("none.sock");
    assert_eq!(
        refused(&["--unix", sock.to_str().unwrap(), "read", "c.count"]),
        format!(
            "brickroute ctl: {0}: No such file or directory (is a router running with \
             ControlSocket(unix, {0})?)\n",
            sock.display()
        )
    );
    // A port nothing listens on: one just closed.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port().to_string()
    };
    assert_eq!(
        refused(&["--tcp", &port, "stop"]),
        format!(
            "brickroute ctl: 127.0.0.1:{port}: Connection refused (is a router running with a \
             ControlSocket(TCP, ...) on that port?)\n"
        )
    );
    // Neither socket given: a usage error (status 2) naming both options.
    let o = ctl(&["read", "c.count"], "");
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("--unix <PATH>|--tcp <[HOST:]PORT>"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn a_filters_rules_change_while_traffic_flows() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("br.sock");
    let s = sock.to_str().unwrap();
    // Endless packets from 10.0.0.1 through a filter that lets them pass.
    let config = format!(
        "ControlSocket(unix, {s});
         InfiniteSource(DATA \\<45000014 00000000 40110000 0a000001 c0000201>, LIMIT -1, BURST 32)
           -> f :: IPFilter(allow src host 10.0.0.1, deny all) -> c :: Counter -> Discard;"
    );
    let _router = RouterProcess(
        Command::new(env!("CARGO_BIN_EXE_brickroute"))
            .args(["run", "--no-summary", "-e", &config])
            .current_dir(root())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start brickroute"),
    );
    let count = || -> u64 {
        let o = ctl(&["--unix", s, "read", "c.count"], "");
        stdout(&o).trim().parse().unwrap_or(0)
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    while count() == 0 {
        assert!(Instant::now() < deadline, "no traffic");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(ok(&["--unix", s, "handlers", "f"]).contains("\nconfig\trw\n"));
    assert_eq!(ok(&["--unix", s, "write", "f.config", "deny", "all"]), "");
    assert_eq!(ok(&["--unix", s, "read", "f.config"]), "deny all\n");
    // From the workers' next batch nothing passes: the count settles and stays.
    std::thread::sleep(Duration::from_millis(100));
    let settled = count();
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(count(), settled);
    // A refused change says why and leaves the rules alone.
    let e = refused(&["--unix", s, "write", "f.config", "allow", "src", "host"]);
    assert!(e.starts_with("brickroute ctl: 520 "), "{e}");
    assert_eq!(ok(&["--unix", s, "read", "f.config"]), "deny all\n");
    // And back: traffic passes again.
    assert_eq!(ok(&["--unix", s, "write", "f.config", "allow all"]), "");
    let deadline = Instant::now() + Duration::from_secs(10);
    while count() == settled {
        assert!(Instant::now() < deadline, "traffic never passed again");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn the_timeout_bounds_a_whole_answer_that_trickles_in() {
    use std::io::{Read, Write};
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("slow.sock");
    // Greets, takes the request, then sends its 40-byte value a byte every 100 ms:
    // each read comes well within the timeout, the whole answer does not.
    let listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    let peer = std::thread::spawn(move || {
        let (mut c, _) = listener.accept().unwrap();
        c.write_all(b"Click::ControlSocket/1.3\r\n").unwrap();
        let mut request = [0u8; 64];
        let _ = c.read(&mut request);
        let _ = c.write_all(b"200 Read handler 'c.count' OK\r\nDATA 40\r\n");
        for _ in 0..40 {
            std::thread::sleep(std::time::Duration::from_millis(100));
            if c.write_all(b"1").is_err() {
                break;
            }
        }
    });
    let started = std::time::Instant::now();
    let o = Command::new(env!("CARGO_BIN_EXE_brickroute"))
        .args([
            "ctl",
            "--timeout",
            "1",
            "--unix",
            sock.to_str().unwrap(),
            "read",
            "c.count",
        ])
        .output()
        .unwrap();
    let took = started.elapsed();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert_eq!(
        stderr(&o),
        format!(
            "brickroute ctl: {}: no answer from the router within 1 s (--timeout)\n",
            sock.display()
        )
    );
    // The value would have taken 4 s.
    assert!(took < std::time::Duration::from_secs(3), "{took:?}");
    let _ = peer.join();
}
