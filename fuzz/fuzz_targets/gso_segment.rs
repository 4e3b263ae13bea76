//! TCP and UDP super-frames an AF_PACKET port cuts into segments are untrusted bytes
//! (their segment size too): cutting must never panic, must emit nothing for a frame it
//! refuses, and the segments of one it takes must carry its payload in order, each at
//! most the segment size (all but the last exactly), with TCP sequence numbers
//! following on, UDP lengths right, and checksums that verify.
#![no_main]

use libfuzzer_sys::fuzz_target;
use packet::gso::{segment, GsoKind};

#[path = "shared/rfc1071.rs"]
mod rfc1071;
use rfc1071::ones;

/// (offset of the IP header, IPv4?) of a segment the cutter made (so well formed).
fn l3(seg: &[u8]) -> (usize, bool) {
    let mut at = 12;
    while seg[at..at + 2] == [0x81, 0x00] || seg[at..at + 2] == [0x88, 0xa8] {
        at += 4;
    }
    (at + 2, seg[at..at + 2] == [0x08, 0x00])
}

fuzz_target!(|data: &[u8]| {
    let Some((head, frame)) = data.split_first_chunk::<3>() else {
        return;
    };
    let kind = if head[0] & 1 == 0 {
        GsoKind::Tcp
    } else {
        GsoKind::Udp
    };
    let mss = usize::from(u16::from_le_bytes([head[1], head[2]]));
    let mut segs: Vec<Vec<u8>> = Vec::new();
    match segment(frame, kind, mss, |p| segs.push(p.data().to_vec())) {
        Err(_) => {
            assert!(segs.is_empty(), "a refused frame emitted segments");
            return;
        }
        Ok(n) => assert_eq!(n, segs.len()),
    }
    assert!(!segs.is_empty());
    let mut payload = Vec::new();
    let mut next_seq = None;
    let proto = match kind {
        GsoKind::Tcp => 6,
        GsoKind::Udp => 17,
    };
    for (k, seg) in segs.iter().enumerate() {
        let (ip, v4) = l3(seg);
        let (l4, pseudo) = if v4 {
            let hlen = usize::from(seg[ip] & 0x0f) * 4;
            assert_eq!(ones(&seg[ip..ip + hlen], 0), 0xffff, "segment {k}: IPv4 checksum");
            let total = usize::from(u16::from_be_bytes([seg[ip + 2], seg[ip + 3]]));
            assert_eq!(ip + total, seg.len(), "segment {k}: IPv4 length");
            let p = u64::from(ones(&seg[ip + 12..ip + 20], 0)) + proto + (total - hlen) as u64;
            (ip + hlen, p)
        } else {
            let plen = usize::from(u16::from_be_bytes([seg[ip + 4], seg[ip + 5]]));
            assert_eq!(ip + 40 + plen, seg.len(), "segment {k}: IPv6 length");
            (
                ip + 40,
                u64::from(ones(&seg[ip + 8..ip + 40], 0)) + proto + plen as u64,
            )
        };
        assert_eq!(
            ones(&seg[l4..], pseudo),
            0xffff,
            "segment {k}: transport checksum"
        );
        let data_at = match kind {
            GsoKind::Tcp => l4 + usize::from(seg[l4 + 12] >> 4) * 4,
            GsoKind::Udp => {
                let len = usize::from(u16::from_be_bytes([seg[l4 + 4], seg[l4 + 5]]));
                assert_eq!(l4 + len, seg.len(), "segment {k}: UDP length");
                l4 + 8
            }
        };
        // Every segment's headers before the changed fields are the frame's.
        assert_eq!(seg[..ip], frame[..ip], "segment {k}: link header");
        let part = &seg[data_at..];
        assert!(
            part.len() <= mss,
            "segment {k}: {} bytes past the size {mss}",
            part.len()
        );
        if kind == GsoKind::Tcp {
            let seq = u32::from_be_bytes(seg[l4 + 4..l4 + 8].try_into().unwrap());
            if let Some(want) = next_seq {
                assert_eq!(seq, want, "segment {k}: sequence number");
            }
            next_seq = Some(seq.wrapping_add(part.len() as u32));
        }
        if k + 1 < segs.len() {
            assert_eq!(part.len(), mss, "segment {k} is short of the size but not last");
        }
        payload.extend_from_slice(part);
    }
    // The payload is the frame's, in order: it ends where the frame's IP packet ends.
    let (ip, v4) = l3(&segs[0]);
    let end = if v4 {
        ip + usize::from(u16::from_be_bytes([frame[ip + 2], frame[ip + 3]]))
    } else {
        ip + 40 + usize::from(u16::from_be_bytes([frame[ip + 4], frame[ip + 5]]))
    };
    assert_eq!(payload[..], frame[end - payload.len()..end], "the payload moved");
});
