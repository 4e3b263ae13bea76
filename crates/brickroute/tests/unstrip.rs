//! `brickroute run` with `Unstrip`: a length past any packet is refused at
//! configuration, and a packet grown past its headroom keeps the bytes a Strip left.

mod common;
use common::*;

#[test]
fn an_unstrip_of_four_gigabytes_is_a_configuration_error() {
    // A worker used to panic on the first packet, and the run then hung.
    let o = brickroute(&[
        "run",
        "--no-summary",
        "-e",
        "InfiniteSource(LIMIT 1, STOP true) -> Unstrip(4294967295) -> Discard",
    ]);
    assert_eq!(o.status.code(), Some(1), "stderr: {}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains("Unstrip: LENGTH must be at most 65535"),
        "stderr: {}",
        err
    );
    assert!(!err.contains("panicked"), "stderr: {}", err);
}

#[test]
fn an_unstrip_past_the_headroom_brings_back_the_stripped_ethernet_header() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.pcap");
    // 14 bytes of Ethernet header and the first 4 of an IPv4 header; Strip(14) leaves
    // 128 + 14 bytes of headroom, so Unstrip(143) moves the packet to a new buffer.
    let o = brickroute(&[
        "run",
        "--no-summary",
        "-e",
        &format!(
            "InfiniteSource(DATA \\<00112233445566778899aabb0800 45000014>, LIMIT 1, STOP true) \
             -> Strip(14) -> u :: Unstrip(143) -> ToDump({})",
            out.display()
        ),
        "-h",
        "u.drops",
    ]);
    assert_eq!(o.status.code(), Some(0), "stderr: {}", stderr(&o));
    assert_eq!(stdout(&o), "0\n");
    let (_, records) = read_pcap(&out);
    assert_eq!(records.len(), 1);
    let data = &records[0].data;
    assert_eq!(data.len(), 147);
    assert_eq!(
        &data[129..],
        &[
            0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0x08, 0x00, 0x45, 0x00,
            0x00, 0x14
        ]
    );
}
