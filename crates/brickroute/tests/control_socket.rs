//! `ControlSocket` in a running router: routes changed through it take the traffic at
//! once, `WRITE stop` ends the run, READONLY refuses writes, the socket file goes
//! when the router ends, and bad sockets fail the configuration with the element's
//! name.

mod common;
#[path = "common/control_client.rs"]
mod control_client;
#[path = "common/router_process.rs"]
mod router_process;

use common::root;
use control_client::{connect_unix, Client};
use router_process::RouterProcess;
use std::net::TcpStream;
use std::os::unix::net::UnixListener;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Endless UDP-like IPv4 packets to 192.0.2.1, counted on the way in and by the output
/// the route lookup sends them to: output 0 by the default route until a more
/// specific route says otherwise.
fn traffic(control: &str) -> String {
    format!(
        "{control};
         InfiniteSource(DATA \\<45000014 00000000 40110000 0a000001 c0000201>, LIMIT -1, BURST 32)
           -> GetIPAddress(16) -> rt :: RadixIPLookup(0.0.0.0/0 0);
         rt[0] -> c0 :: Counter -> Discard;
         rt[1] -> c1 :: Counter -> Discard;"
    )
}

fn start(config: &str, handlers: &[&str]) -> RouterProcess {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_brickroute"));
    cmd.args(["run", "-e", config]);
    for h in handlers {
        cmd.args(["-h", h]);
    }
    RouterProcess(
        cmd.current_dir(root())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start brickroute"),
    )
}

#[test]
fn routes_written_to_the_socket_take_the_traffic_at_once_and_stop_ends_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("br.sock");
    let config = traffic(&format!("ControlSocket(unix, {})", sock.display()));
    let mut p = start(&config, &["c0.count", "c1.count"]);
    let mut c = connect_unix(&sock, &mut p);

    // Traffic flows through output 0 and none through 1.
    let before = c.count("c0");
    let deadline = Instant::now() + Duration::from_secs(10);
    while c.count("c0") == before {
        assert!(Instant::now() < deadline, "no traffic");
    }
    assert_eq!(c.count("c1"), 0);

    assert_eq!(
        c.status("WRITE rt.add 192.0.2.0/24 1\n"),
        "200 Write handler 'rt.add' OK\r\n"
    );
    assert_eq!(c.read("rt.lookup 192.0.2.1"), "1");
    // From here every packet takes output 1: c0 stands still while c1 grows. (A batch
    // a worker looked up before the write may still reach c0 if the host held that
    // worker between the lookup and the counter: c0 is read once it has settled.)
    let settle = Instant::now() + Duration::from_secs(10);
    let mut c0 = c.count("c0");
    loop {
        std::thread::sleep(Duration::from_millis(20));
        let now = c.count("c0");
        if now == c0 {
            break;
        }
        assert!(Instant::now() < settle, "c0 keeps counting: {now}");
        c0 = now;
    }
    let c1 = c.count("c1");
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(c.count("c0"), c0);
    assert!(c.count("c1") > c1);

    // A bad route is refused with the handler's reason, and the table keeps its routes.
    assert_eq!(
        c.status("WRITE rt.add 192.0.2.0/33 0\n"),
        "520-Write handler 'rt.add' error:\r\n"
    );
    assert!(c.line().starts_with("520 "));
    assert_eq!(c.read("rt.lookup 192.0.2.1"), "1");

    assert_eq!(c.status("WRITE stop\n"), "200 Write handler 'stop' OK\r\n");
    let status = p.wait_exit(Duration::from_secs(20));
    let (out, err) = p.output();
    assert!(status.success(), "{status}: {err}");
    // The handlers printed after the run: both counters saw packets.
    let counts: Vec<u64> = out.lines().filter_map(|l| l.parse().ok()).collect();
    assert_eq!(counts.len(), 2, "{out}");
    assert!(counts[0] >= c0 && counts[1] > c1, "{out}");
    assert!(!sock.exists(), "socket file left behind");
}

#[test]
fn a_read_only_tcp_socket_answers_reads_and_refuses_writes() {
    // A port free a moment ago.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let config = traffic(&format!("cs :: ControlSocket(TCP, {}, READONLY true)", port));
    let mut p = start(&config, &[]);
    let deadline = Instant::now() + Duration::from_secs(20);
    let stream = loop {
        if let Ok(s) = TcpStream::connect(("127.0.0.1", port)) {
            break s;
        }
        if let Some(s) = p.exited() {
            panic!("router exited ({}): {:?}", s, p.output());
        }
        assert!(Instant::now() < deadline, "socket never served");
        std::thread::sleep(Duration::from_millis(20));
    };
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut c = Client::new(stream);
    assert_eq!(c.read("cs.port"), port.to_string());
    assert_eq!(
        c.status("WRITE rt.add 192.0.2.0/24 1\n"),
        "530 Permission denied for 'rt.add'\r\n"
    );
    assert_eq!(c.status("WRITE stop\n"), "530 Permission denied for 'stop'\r\n");
    assert_eq!(c.read("rt.lookup 192.0.2.1"), "0");
    assert_eq!(c.status("QUIT\n"), "200 Goodbye!\r\n");
    assert_eq!(c.line(), "", "connection not closed after QUIT");
    assert!(p.exited().is_none(), "router stopped");
    // SAFETY: kill(2) on our own child, which has not been reaped.
    assert_eq!(unsafe { libc::kill(p.pid(), libc::SIGTERM) }, 0);
    let status = p.wait_exit(Duration::from_secs(20));
    assert!(status.success(), "{status}: {:?}", p.output());
}

#[test]
fn the_router_serves_on_after_its_sources_are_done() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("s");
    let config = format!(
        "ControlSocket(unix, {}); InfiniteSource(LIMIT 5) -> c :: Counter -> Discard;",
        sock.display()
    );
    let mut p = start(&config, &["c.count"]);
    let mut c = connect_unix(&sock, &mut p);
    let deadline = Instant::now() + Duration::from_secs(10);
    while c.count("c") < 5 {
        assert!(Instant::now() < deadline, "source never finished");
    }
    std::thread::sleep(Duration::from_millis(200));
    assert!(
        p.exited().is_none(),
        "router ended with its sources while serving"
    );
    assert_eq!(c.count("c"), 5);
    c.send("WRITE stop\n");
    let status = p.wait_exit(Duration::from_secs(20));
    let (out, err) = p.output();
    assert!(status.success(), "{status}: {err}");
    assert_eq!(out, "5\n");
}

fn configure(config: &str) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_brickroute"))
        .args(["run", "-q", "-e", config])
        .current_dir(root())
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn sockets_that_cannot_be_opened_fail_the_configuration_with_the_element_name() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("plain");
    std::fs::write(&file, "x").unwrap();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let cases = [
        (
            format!("cs :: ControlSocket(unix, {})", file.display()),
            format!(
                "cs :: ControlSocket: {}: file exists and is not a socket",
                file.display()
            ),
        ),
        (
            format!("cs :: ControlSocket(TCP, {})", port),
            format!("cs :: ControlSocket: 127.0.0.1:{}: Address already in use", port),
        ),
        (
            "cs :: ControlSocket(udp, 5)".to_string(),
            "cs :: ControlSocket: unknown socket type 'udp' (expected TCP or UNIX)".to_string(),
        ),
        (
            "cs :: ControlSocket(TCP, 70000)".to_string(),
            "cs :: ControlSocket: PORTNUMBER expects a port number (0 to 65535), not '70000'".to_string(),
        ),
        (
            "cs :: ControlSocket(TCP)".to_string(),
            "cs :: ControlSocket: missing mandatory PORTNUMBER argument".to_string(),
        ),
    ];
    for (config, want) in cases {
        let (ok, err) = configure(&config);
        assert!(!ok, "{config}");
        assert!(err.contains(&want), "{config}: {err}");
    }
    // The plain file is left alone.
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "x");
}

#[test]
fn a_socket_file_left_by_a_dead_router_is_replaced_and_removed_at_exit() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("stale");
    drop(UnixListener::bind(&sock).unwrap());
    assert!(sock.exists());
    let (ok, err) = configure(&format!("ControlSocket(unix, {})", sock.display()));
    assert!(ok, "{err}");
    assert!(!sock.exists());
}

#[test]
fn a_client_may_send_all_its_commands_before_reading_any_answer() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("s");
    let config = traffic(&format!("ControlSocket(unix, {})", sock.display()));
    let mut p = start(&config, &[]);
    let mut c = connect_unix(&sock, &mut p);
    // 50,000 routes (about 1.5 MB of commands) sent in one go by one thread while
    // this one reads: the server must keep reading while its answers wait.
    let n = 50_000;
    let mut writer = c.stream().try_clone().unwrap();
    let sending = std::thread::spawn(move || {
        let mut text = String::new();
        for i in 0..n {
            text.push_str(&format!("WRITE rt.add 10.{}.{}.0/24 1\n", i / 256, i % 256));
        }
        use std::io::Write as _;
        writer.write_all(text.as_bytes())
    });
    for i in 0..n {
        assert_eq!(c.line(), "200 Write handler 'rt.add' OK\r\n", "answer {i}");
    }
    sending.join().unwrap().unwrap();
    assert_eq!(c.read("rt.table").lines().count(), n + 1);
    c.send("WRITE stop\n");
    assert!(p.wait_exit(Duration::from_secs(20)).success());
}

#[test]
fn a_client_that_never_reads_does_not_keep_the_router_from_stopping() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("s");
    let config = traffic(&format!("ControlSocket(unix, {})", sock.display()));
    let mut p = start(&config, &[]);
    let mut c = connect_unix(&sock, &mut p);
    let mut routes = String::new();
    for i in 0..20_000 {
        routes.push_str(&format!("add 10.{}.{}.0/24 1\n", i / 256, i % 256));
    }
    c.send(&format!("WRITEDATA rt.ctrl {}\n{}", routes.len(), routes));
    assert_eq!(c.line(), "200 Write handler 'rt.ctrl' OK\r\n");
    // Far more answer bytes than the socket buffers hold, none of them read.
    c.send(&"READ rt.table\n".repeat(50));
    std::thread::sleep(Duration::from_millis(300));
    // SAFETY: kill(2) on our own child, which has not been reaped.
    assert_eq!(unsafe { libc::kill(p.pid(), libc::SIGTERM) }, 0);
    let status = p.wait_exit(Duration::from_secs(20));
    assert!(status.success(), "{status}");
    assert!(!sock.exists());
}
