//! Shared helpers for the command-line tests: run the real binary from the workspace
//! root, and read pcap files with a reader written here (independent of the router's).

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

/// Whether process `pid` runs a router: its first worker thread exists, so its
/// configuration is done.
pub fn worker_running(pid: i32) -> bool {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{}/task", pid)) else {
        return false;
    };
    tasks
        .flatten()
        .any(|t| std::fs::read_to_string(t.path().join("comm")).is_ok_and(|c| c.trim() == "worker0"))
}

pub fn brickroute(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_brickroute"))
        .args(args)
        .current_dir(root())
        .output()
        .expect("run brickroute")
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// One record of a little-endian microsecond pcap file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub sec: u32,
    pub usec: u32,
    pub orig_len: u32,
    pub data: Vec<u8>,
}

/// Writes `frames` as a microsecond pcap file of Ethernet frames, record i stamped
/// 1700000000 + i seconds.
pub fn write_pcap(path: &Path, frames: &[Vec<u8>]) {
    let mut b = Vec::new();
    for v in [0xa1b2c3d4u32, 0x0004_0002, 0, 0, 65535, 1] {
        b.extend_from_slice(&v.to_le_bytes());
    }
    for (i, f) in frames.iter().enumerate() {
        for v in [1_700_000_000 + i as u32, 0, f.len() as u32, f.len() as u32] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        b.extend_from_slice(f);
    }
    std::fs::write(path, b).unwrap_or_else(|e| panic!("{}: {}", path.display(), e));
}

/// Checks that the Python script `script` (a path from the checkout's root) writes
/// the file `shipped` byte for byte when given a path to write.
pub fn assert_script_writes(script: &str, shipped: &str) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("written");
    let o = Command::new("python3")
        .arg(root().join(script))
        .arg(&out)
        .output()
        .expect("python3");
    assert!(o.status.success(), "{}: {}", script, stderr(&o));
    let written = std::fs::read(&out).unwrap();
    let want = std::fs::read(root().join(shipped)).unwrap();
    assert!(written == want, "{} differs from what {} writes", shipped, script);
}

/// Reads a pcap file written on this (little-endian) machine: global header, records.
pub fn read_pcap(path: &Path) -> (u32, Vec<Record>) {
    let b = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {}", path.display(), e));
    assert!(b.len() >= 24, "pcap too short");
    let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().unwrap());
    assert_eq!(u32_at(0), 0xa1b2c3d4, "microsecond magic");
    let linktype = u32_at(20);
    let mut recs = Vec::new();
    let mut i = 24;
    while i + 16 <= b.len() {
        let caplen = u32_at(i + 8) as usize;
        recs.push(Record {
            sec: u32_at(i),
            usec: u32_at(i + 4),
            orig_len: u32_at(i + 12),
            data: b[i + 16..i + 16 + caplen].to_vec(),
        });
        i += 16 + caplen;
    }
    assert_eq!(i, b.len(), "trailing bytes");
    (linktype, recs)
}

/// RFC 1071 checksum, written independently of the router's.
pub fn inet_checksum(data: &[u8]) -> u16 {
    let mut s: u32 = 0;
    for c in data.chunks(2) {
        let w = if c.len() == 2 {
            u16::from_be_bytes([c[0], c[1]])
        } else {
            u16::from_be_bytes([c[0], 0])
        };
        s += w as u32;
    }
    while s >> 16 != 0 {
        s = (s & 0xffff) + (s >> 16);
    }
    !(s as u16)
}
