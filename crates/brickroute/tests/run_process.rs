//! `brickroute run` as a process: the stop signals (SIGINT, SIGTERM, SIGHUP, SIGQUIT:
//! the first stops the router in order, a second ends it at once, and so does the first
//! while the configuration is being set up with no kernel flag to restore), and closed
//! output streams (reported, never a panic, the handlers still read and printed).

mod common;
#[path = "common/router_process.rs"]
mod router_process;

use common::{root, worker_running};
use router_process::RouterProcess;
use std::io::Write;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A pcap file's global header alone (little-endian, microseconds, Ethernet), written
/// here from the format's definition.
fn pcap_global_header() -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(&0xa1b2c3d4u32.to_le_bytes());
    b.extend_from_slice(&2u16.to_le_bytes());
    b.extend_from_slice(&4u16.to_le_bytes());
    for v in [0u32, 0, 65535, 1] {
        b.extend_from_slice(&v.to_le_bytes());
    }
    b
}

/// `brickroute run ARGS` from the workspace root, standard output and error piped.
fn start(args: &[&str], stdin: Stdio) -> RouterProcess {
    RouterProcess(
        Command::new(env!("CARGO_BIN_EXE_brickroute"))
            .arg("run")
            .args(args)
            .current_dir(root())
            .stdin(stdin)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start brickroute"),
    )
}

fn signal(p: &RouterProcess, sig: libc::c_int) {
    // SAFETY: kill(2) on our own child, which has not been reaped.
    assert_eq!(unsafe { libc::kill(p.pid(), sig) }, 0);
}

/// Waits (bounded) until `ready(pid)` holds, failing with the process's standard error
/// if it exits first.
fn wait_until(p: &mut RouterProcess, what: &str, ready: impl Fn(i32) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !ready(p.pid()) {
        if let Some(s) = p.exited() {
            let (_, err) = p.output();
            panic!("brickroute exited ({}) before {}: {}", s, what, err);
        }
        assert!(Instant::now() < deadline, "timed out waiting for {}", what);
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Whether the process (single-threaded while it configures) is in openat(2), where
/// opening a FIFO nobody writes blocks.
fn blocked_in_open(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{}/syscall", pid))
        .is_ok_and(|s| s.split_whitespace().next() == Some(&libc::SYS_openat.to_string()))
}

fn mkfifo(path: &Path) {
    let c = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    // SAFETY: `c` is a NUL-terminated path that outlives the call.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
}

#[test]
fn a_second_signal_ends_a_router_whose_worker_is_blocked_reading_its_input() {
    // The header arrives, the packets never do: worker 0 waits in read(2) on standard
    // input, where it cannot see a stop request.
    let mut r = start(
        &["-e", "FromDump(-) -> c :: Counter -> Discard", "-h", "c.count"],
        Stdio::piped(),
    );
    let mut input = r.0.stdin.take().unwrap();
    input.write_all(&pcap_global_header()).unwrap();
    input.flush().unwrap();
    wait_until(&mut r, "the router to run", worker_running);
    signal(&r, libc::SIGINT);
    // The orderly stop waits for the read, which waits for input.
    std::thread::sleep(Duration::from_millis(300));
    assert!(r.exited().is_none(), "the read should still hold the router");
    signal(&r, libc::SIGINT);
    let status = r.wait_exit(Duration::from_secs(10));
    assert_eq!(status.signal(), Some(libc::SIGINT), "{:?}", status);
    drop(input);
}

#[test]
fn a_signal_while_configuring_ends_the_run_at_once() {
    // FromDump opens the FIFO while the configuration is set up, and nobody writes it:
    // as in Click, a signal then ends the process (there is nothing to restore).
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("never-written");
    mkfifo(&fifo);
    let config = format!("FromDump({}) -> Discard", fifo.display());
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        let mut r = start(&["-e", &config], Stdio::null());
        wait_until(&mut r, "the FIFO's open", blocked_in_open);
        signal(&r, sig);
        let status = r.wait_exit(Duration::from_secs(10));
        assert_eq!(status.signal(), Some(sig), "{:?}", status);
    }
}

#[test]
fn sighup_and_sigquit_stop_the_router_in_order_as_sigint_does() {
    for sig in [libc::SIGHUP, libc::SIGQUIT, libc::SIGTERM] {
        let mut r = start(
            &[
                "-e",
                "InfiniteSource(BURST 32) -> c :: Counter -> Discard",
                "-h",
                "c.count",
            ],
            Stdio::null(),
        );
        wait_until(&mut r, "the router to run", worker_running);
        signal(&r, sig);
        let status = r.wait_exit(Duration::from_secs(10));
        let (out, err) = r.output();
        assert!(status.success(), "signal {}: {:?}: {}", sig, status, err);
        let count: u64 = out.trim().parse().expect("c.count printed");
        assert!(count > 0, "signal {}: {}", sig, out);
        assert!(err.contains(" (interrupted)\n"), "signal {}: {}", sig, err);
    }
}

/// A pipe whose reading end is already closed, as `| true` leaves it once `true` has
/// exited.
fn reader_gone() -> Stdio {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    Stdio::from(writer)
}

#[test]
fn a_closed_standard_output_is_reported_after_the_run_not_a_panic() {
    let o = Command::new(env!("CARGO_BIN_EXE_brickroute"))
        .args([
            "run",
            "--no-summary",
            "-e",
            "InfiniteSource(LIMIT 5, STOP true) -> c :: Counter -> Discard",
            "-h",
            "c.count",
        ])
        .current_dir(root())
        .stdout(reader_gone())
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    assert_eq!(
        (o.status.code(), common::stderr(&o)),
        (Some(1), "brickroute: standard output: Broken pipe\n".to_string())
    );
}

#[test]
fn a_closed_standard_error_still_prints_the_handlers() {
    // `run -e CONFIG -h HANDLER` with standard error's reader gone: (status, stdout).
    let run = |config: &str, handler: &str| {
        let o = Command::new(env!("CARGO_BIN_EXE_brickroute"))
            .args(["run", "-e", config, "-h", handler])
            .current_dir(root())
            .stdout(Stdio::piped())
            .stderr(reader_gone())
            .output()
            .unwrap();
        (o.status.code(), common::stdout(&o))
    };
    assert_eq!(
        run(
            "InfiniteSource(LIMIT 5, STOP true) -> c :: Counter -> Discard",
            "c.count"
        ),
        (Some(0), "5\n".to_string())
    );
    // Nor do the elements' warnings stop it: CheckIPHeader's VERBOSE report of the
    // sample's three bad headers.
    assert_eq!(
        run(
            "FromDump(conf/samples/router-sample.pcap, STOP true) -> Classifier(12/0800) -> Strip(14) -> chk :: CheckIPHeader(VERBOSE true) -> Discard",
            "chk.drops"
        ),
        (Some(0), "3\n".to_string())
    );
}
