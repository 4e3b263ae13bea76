//! `brickroute gen`: how many frames a paced run sends, and the messages for bad
//! arguments. The paced runs need root (a veth pair between two namespaces to send
//! over); the namespaces go with their guards, also when a test fails.

#[path = "common/netns.rs"]
mod netns;

use netns::{veth, Netns};
use std::process::Command;
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_brickroute");

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Runs `brickroute gen ARGS` (with a 60 s limit); returns its exit code, stdout and
/// stderr.
fn gen(args: &[&str]) -> (Option<i32>, String, String) {
    let o = Command::new("timeout")
        .arg("60")
        .arg(BIN)
        .arg("gen")
        .args(args)
        .output()
        .expect("run brickroute gen");
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// A paced run sends rate × duration frames, the first at once: frame i goes out at
/// i / rate, so the last of a one-second run at 10 frames a second at 0.9 s.
#[test]
fn a_paced_run_sends_rate_times_duration_frames() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let (ns, peer) = (Netns::new("r"), Netns::new("p"));
    veth(&ns, "gd", "02:00:00:00:00:6a", &peer, "pd", "02:00:00:00:00:6b");
    for (rate, duration, want) in [("10", "1", 10), ("1", "0.9", 1), ("2", "1", 2), ("50", "0.5", 25)] {
        let started = std::time::Instant::now();
        let (code, out, err) = gen(&[
            "--netns",
            &ns.name,
            "-i",
            "gd",
            "-q",
            "--rate",
            rate,
            "--duration",
            duration,
        ]);
        assert_eq!(
            code,
            Some(0),
            "gen --rate {} --duration {}: {}",
            rate,
            duration,
            err
        );
        let report: serde_json::Value = serde_json::from_str(out.trim()).expect("one JSON line");
        assert_eq!(
            report["packets"], want,
            "gen --rate {} --duration {}: {}",
            rate, duration, out
        );
        // It keeps to its duration: the frame that would be due at its end is not waited for.
        let d: f64 = duration.parse().unwrap();
        assert!(
            started.elapsed() < Duration::from_secs_f64(d + 5.0),
            "gen --duration {} took {:?}",
            duration,
            started.elapsed()
        );
    }
}

#[test]
fn bad_arguments_are_refused_naming_the_option_before_anything_is_opened() {
    // The interface does not exist: each argument is checked before it is looked up.
    let refused = |args: &[&str], want: &str| {
        let mut all = vec!["-i", "brt-no-such-if"];
        all.extend_from_slice(args);
        let (code, out, err) = gen(&all);
        assert_eq!(code, Some(1), "gen {:?}: {}", args, err);
        assert_eq!(out, "", "gen {:?}", args);
        assert_eq!(err, format!("brickroute gen: {}\n", want), "gen {:?}", args);
    };
    refused(
        &["--size", "10"],
        "--size: frame size 10 out of range: sizes are 64..1518 bytes (FCS included)",
    );
    refused(
        &["--size", "1519"],
        "--size: frame size 1519 out of range: sizes are 64..1518 bytes (FCS included)",
    );
    refused(
        &["--src-mac", "zz"],
        "--src-mac: 'zz' is not a MAC address (expected aa:bb:cc:dd:ee:ff)",
    );
    refused(
        &["--dst-mac", "02:00:00:00:00"],
        "--dst-mac: '02:00:00:00:00' is not a MAC address (expected aa:bb:cc:dd:ee:ff)",
    );
    refused(&["--flows", "0"], "--flows must be 1..65536, not 0");
    refused(&["--flows", "70000"], "--flows must be 1..65536, not 70000");
}
