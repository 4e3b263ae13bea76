//! Capture files are untrusted bytes: the pcap parser and the FORCE_IP header finder
//! must never panic, whatever the file holds.
#![no_main]

use graph::elements::pcap::format::{force_ip, parse_capture};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(cap) = parse_capture(data) {
        let _ = format!("{:?}", cap.header);
    }
    for linktype in [0u32, 1, 12, 101, 105, 113, 228] {
        let _ = force_ip(data, linktype);
    }
});
