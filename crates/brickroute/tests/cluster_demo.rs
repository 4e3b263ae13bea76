//! `brickroute cluster demo` (root needed): the mesh it builds delivers every frame to
//! the host its route names, the servers' counts agree with each other, and nothing
//! it made is left behind.

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_brickroute");

/// The meshes run one at a time: each is several routers, sinks and a generator on a
/// machine that may have two cores, and a frame late past the sinks' idle time is lost.
static ONE_MESH: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_mesh() -> std::sync::MutexGuard<'static, ()> {
    ONE_MESH.lock().unwrap_or_else(|e| e.into_inner())
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

fn namespaces() -> String {
    String::from_utf8_lossy(
        &Command::new("ip")
            .args(["netns", "list"])
            .output()
            .unwrap()
            .stdout,
    )
    .into_owned()
}

/// `cluster demo ARGS --json`, which must succeed: its process id and report.
fn demo_json(args: &[&str]) -> (u32, serde_json::Value) {
    let child = Command::new(BIN)
        .args(["cluster", "demo"])
        .args(args)
        .arg("--json")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    (pid, serde_json::from_slice(&out.stdout).unwrap())
}

#[test]
fn the_demo_mesh_delivers_everything_and_cleans_up() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let _mesh = one_mesh();
    let (pid, r) = demo_json(&["--servers", "4", "--seconds", "1", "--pps", "8000", "--down", "3"]);
    let sent = r["sent"].as_u64().unwrap();
    assert!(sent >= 7000, "{r}");
    let hosts = r["hosts"].as_array().unwrap();
    assert_eq!(hosts.len(), 4);
    let mut expected = 0;
    for h in hosts {
        // 1,020 flows over 198.19.0.0/22: every host gets about a quarter.
        assert!(h["expected"].as_u64().unwrap() > sent / 5, "{r}");
        assert_eq!(h["delivered"], h["expected"], "{r}");
        expected += h["expected"].as_u64().unwrap();
    }
    assert_eq!(expected, sent);
    let s = r["server_counts"].as_array().unwrap();
    let n = |i: usize, k: &str| s[i][k].as_u64().unwrap();
    assert_eq!(n(0, "local"), hosts[0]["expected"].as_u64().unwrap());
    assert_eq!(n(0, "direct") + n(0, "balanced") + n(0, "local"), sent);
    assert!(
        n(0, "balanced") > 0,
        "the default rate leaves traffic to balance: {r}"
    );
    assert_eq!((1..4).map(|i| n(i, "relayed")).sum::<u64>(), n(0, "balanced"));
    // Server 3, marked down, relays nothing and still delivers its host's traffic.
    assert_eq!(n(3, "relayed"), 0, "{r}");
    assert!(n(1, "relayed") > 0 && n(2, "relayed") > 0, "{r}");
    assert_eq!(
        (1..4).map(|i| n(i, "delivered")).sum::<u64>(),
        sent - n(0, "local")
    );
    assert!(!namespaces().contains(&format!("brc{pid}-")), "{}", namespaces());
}

#[test]
fn a_server_killed_mid_run_loses_its_hosts_traffic_and_is_reported() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let _mesh = one_mesh();
    let (pid, r) = demo_json(&["--seconds", "1.5", "--pps", "8000", "--fail", "2@0.5"]);
    assert_eq!(r["failed"]["server"], 2, "{r}");
    assert_eq!(r["heartbeat"], "50ms", "{r}");
    let hosts = r["hosts"].as_array().unwrap();
    // Server 0's own host loses nothing; server 2's loses what came after its end.
    assert_eq!(hosts[0]["delivered"], hosts[0]["expected"], "{r}");
    assert!(
        hosts[2]["delivered"].as_u64().unwrap() < hosts[2]["expected"].as_u64().unwrap() * 3 / 4,
        "{r}"
    );
    let s = r["server_counts"].as_array().unwrap();
    assert!(s[2].is_null(), "{r}");
    assert!(s[1]["delivered"].as_u64().unwrap() > 0, "{r}");
    assert!(!namespaces().contains(&format!("brc{pid}-")), "{}", namespaces());
}

#[test]
fn bad_arguments_are_refused_before_anything_is_built() {
    for (args, message) in [
        (&["--servers", "3"][..], "--servers is 2, 4 or 8, not 3"),
        (&["--scheme", "ecmp"][..], "--scheme is direct or vlb, not 'ecmp'"),
        (&["--flows", "0"][..], "--flows is 1 to 65536, not 0"),
        (&["--down", "1,4"][..], "--down 4: servers are 0 to 3"),
        (
            &["--heartbeat", "5x"][..],
            "--heartbeat is a time such as 50ms or 0 for none, not '5x'",
        ),
        (
            &["--fail", "2"][..],
            "--fail is K@SECONDS (server K killed SECONDS into the traffic), not '2'",
        ),
        (&["--fail", "4@1"][..], "--fail 4@1: servers are 0 to 3"),
        (
            &["--fail", "0@1"][..],
            "--fail 0: server 0 takes the traffic in; fail another",
        ),
        (
            &["--fail", "2@3"][..],
            "--fail at 3 s: the traffic lasts 3 s (--seconds)",
        ),
    ] {
        let o = Command::new(BIN)
            .args(["cluster", "demo"])
            .args(args)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(1));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(message), "{args:?}: {err}");
    }
}

#[test]
fn a_server_that_cannot_start_is_reported_with_its_error() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let _mesh = one_mesh();
    let o = Command::new(BIN)
        .args([
            "cluster",
            "demo",
            "--servers",
            "2",
            "--seconds",
            "1",
            "--rate",
            "fast",
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains(" exited at start (exit status: 1): "), "{err}");
    assert!(err.contains("VLBSwitch: RATE expects bandwidth"), "{err}");
}

#[test]
fn a_stop_signal_ends_the_demo_and_removes_the_mesh() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let _mesh = one_mesh();
    let mut child = Command::new(BIN)
        .args(["cluster", "demo", "--servers", "2", "--seconds", "60"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let prefix = format!("brc{}-", child.id());
    // Signalled once the servers run (their namespaces exist and hold packet sockets).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let sockets = |ns: &str| {
        let o = Command::new("ip")
            .args(["netns", "exec", ns, "cat", "/proc/net/packet"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stdout)
            .lines()
            .count()
            .saturating_sub(1)
    };
    while !(namespaces().contains(&format!("{prefix}s1")) && sockets(&format!("{prefix}s1")) >= 2) {
        assert!(std::time::Instant::now() < deadline, "the mesh never came up");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    std::thread::sleep(std::time::Duration::from_secs(1));
    // SAFETY: kill(2) on our own child's process id, which we have not reaped yet.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("the demo did not end within 20 s of SIGTERM");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert_eq!(status.code(), Some(130));
    assert!(!namespaces().contains(&prefix), "{}", namespaces());
}
