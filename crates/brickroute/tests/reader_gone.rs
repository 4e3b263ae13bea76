//! `gen` and `sink` end quietly by SIGPIPE when the reader of their report has gone (as
//! `brickroute sink | head` expects), where the ignored signal made `println!` panic.
//! Root needed: each runs in a namespace of its own, on its loopback interface.

mod common;
#[path = "common/netns.rs"]
mod netns;

use netns::Netns;
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Stdio};

/// A pipe whose reading end is already closed.
fn reader_gone() -> Stdio {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    Stdio::from(writer)
}

fn assert_ended_by_sigpipe(args: &[&str]) {
    let o = Command::new(env!("CARGO_BIN_EXE_brickroute"))
        .args(args)
        .stdout(reader_gone())
        .stderr(Stdio::piped())
        .output()
        .expect("run brickroute");
    let err = common::stderr(&o);
    assert_eq!(
        o.status.signal(),
        Some(libc::SIGPIPE),
        "{:?}: {:?}: {}",
        args,
        o.status,
        err
    );
    assert!(!err.contains("panicked"), "{:?}: {}", args, err);
}

#[test]
fn gen_and_sink_end_by_sigpipe_when_their_reader_has_gone() {
    let ns = Netns::new("rg");
    ns.ip(&["link", "set", "lo", "up"]);
    assert_ended_by_sigpipe(&["gen", "--netns", &ns.name, "-i", "lo", "--count", "10", "--quiet"]);
    assert_ended_by_sigpipe(&[
        "sink",
        "--netns",
        &ns.name,
        "-i",
        "lo",
        "--duration",
        "0.2",
        "--quiet",
    ]);
}
