//! Frames an AF_PACKET port flags as carrying a partial checksum are untrusted bytes,
//! and so are the checksum start and field offsets of their virtio-net headers:
//! completing (`complete_at`) or recomputing (`complete_transport`) a checksum must
//! never panic, must change nothing but the checksum field, and must leave a checksum
//! that verifies (for `complete_at`, given that the field held the pseudo-header's
//! sum, as a sender leaves it).
#![no_main]

use libfuzzer_sys::fuzz_target;
use packet::checksum::{complete_at, complete_transport};

#[path = "shared/rfc1071.rs"]
mod rfc1071;
use rfc1071::ones;

/// `complete_at` on `data` with the start and field offsets `head` gives.
fn at_offsets(head: [u8; 4], data: &[u8]) {
    let start = usize::from(u16::from_le_bytes([head[0], head[1]]));
    let field = usize::from(u16::from_le_bytes([head[2], head[3]])) % 20;
    let mut frame = data.to_vec();
    if !complete_at(&mut frame, start, field) {
        assert_eq!(frame, data, "a frame left alone was changed");
        return;
    }
    let at = start + field;
    let changed: Vec<usize> = (0..frame.len()).filter(|&i| frame[i] != data[i]).collect();
    assert!(
        changed.iter().all(|&i| i == at || i == at + 1),
        "more than the field changed: {changed:?}"
    );
    // The old field (the pseudo-header's sum, for a sender's frame) and the segment as
    // completed sum to all ones (RFC 1071).
    let old = u16::from_be_bytes([data[at], data[at + 1]]);
    assert_eq!(
        ones(&frame[start..], u64::from(old)),
        0xffff,
        "the completed checksum does not verify"
    );
}

fuzz_target!(|data: &[u8]| {
    if let Some((&[0xc5, a, b, c, d], rest)) = data.split_first_chunk::<5>() {
        return at_offsets([a, b, c, d], rest);
    }
    let mut frame = data.to_vec();
    if !complete_transport(&mut frame) {
        assert_eq!(frame, data, "a frame left alone was changed");
        return;
    }
    let changed: Vec<usize> = (0..frame.len()).filter(|&i| frame[i] != data[i]).collect();
    assert!(changed.len() <= 2, "more than the checksum changed: {changed:?}");
    // Completing again is a no-op.
    let mut again = frame.clone();
    assert!(complete_transport(&mut again));
    assert_eq!(again, frame);
    // The segment and its pseudo-header sum to all ones (RFC 1071), unless UDP's
    // zero was sent as all ones.
    let l3 = if frame[12..14] == [0x81, 0x00] || frame[12..14] == [0x88, 0xa8] {
        18
    } else {
        14
    };
    let ip = &frame[l3..];
    let (pseudo, seg) = if ip[0] >> 4 == 4 {
        let hlen = usize::from(ip[0] & 0x0f) * 4;
        let total = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
        let p = u64::from(ones(&ip[12..20], 0)) + u64::from(ip[9]) + (total - hlen) as u64;
        (p, &ip[hlen..total])
    } else {
        let payload = usize::from(u16::from_be_bytes([ip[4], ip[5]]));
        let p = u64::from(ones(&ip[8..40], 0)) + u64::from(ip[6]) + payload as u64;
        (p, &ip[40..40 + payload])
    };
    assert_eq!(
        ones(seg, pseudo),
        0xffff,
        "the completed checksum does not verify"
    );
});
