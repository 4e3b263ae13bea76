//! Frames an AF_PACKET port flags as carrying a partial checksum are untrusted bytes:
//! completing the checksum must never panic, must change nothing but the checksum
//! field of a frame it takes, and must leave a checksum that verifies.
#![no_main]

use libfuzzer_sys::fuzz_target;
use packet::checksum::complete_transport;

#[path = "shared/rfc1071.rs"]
mod rfc1071;
use rfc1071::ones;

fuzz_target!(|data: &[u8]| {
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
