use super::*;

/// RFC 1071 over 16-bit words, written out plainly (independent of `checksum::sum`).
fn rfc1071(parts: &[&[u8]]) -> u16 {
    let bytes: Vec<u8> = parts.concat();
    let mut s: u32 = 0;
    for pair in bytes.chunks(2) {
        let hi = u32::from(pair[0]) << 8;
        let lo = pair.get(1).map_or(0, |&b| u32::from(b));
        s += hi | lo;
    }
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    !(s as u16)
}

const SRC4: [u8; 4] = [10, 0, 1, 2];
const DST4: [u8; 4] = [10, 0, 2, 2];
const SRC6: [u8; 16] = [0x20, 0x01, 0x0d, 0xb8, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2];
const DST6: [u8; 16] = [0x20, 0x01, 0x0d, 0xb8, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2];

const ACK: u8 = 0x10;

/// One TCP segment's fields, with everything else fixed.
#[derive(Clone, Copy)]
struct Seg<'a> {
    /// VLAN tags (TPID, TCI) after the MAC addresses.
    tags: &'a [(u16, u16)],
    v6: bool,
    id: u16,
    seq: u32,
    flags: u8,
    options: &'a [u8],
    payload: &'a [u8],
}

/// The Ethernet frame of `s`, every length and checksum correct.
fn frame(s: Seg<'_>) -> Vec<u8> {
    let mut tcp = Vec::new();
    tcp.extend_from_slice(&0x1234u16.to_be_bytes());
    tcp.extend_from_slice(&80u16.to_be_bytes());
    tcp.extend_from_slice(&s.seq.to_be_bytes());
    tcp.extend_from_slice(&0x0102_0304u32.to_be_bytes());
    tcp.push((((20 + s.options.len()) / 4) as u8) << 4);
    tcp.push(s.flags);
    tcp.extend_from_slice(&0xfaf0u16.to_be_bytes());
    tcp.extend_from_slice(&[0, 0, 0, 0]);
    tcp.extend_from_slice(s.options);
    tcp.extend_from_slice(s.payload);
    let tlen = tcp.len() as u16;
    let mut f = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2];
    for &(tpid, tci) in s.tags {
        f.extend_from_slice(&tpid.to_be_bytes());
        f.extend_from_slice(&tci.to_be_bytes());
    }
    if s.v6 {
        let c = rfc1071(&[&SRC6, &DST6, &u32::from(tlen).to_be_bytes(), &[0, 0, 0, 6], &tcp]);
        tcp[16..18].copy_from_slice(&c.to_be_bytes());
        f.extend_from_slice(&0x86ddu16.to_be_bytes());
        f.extend_from_slice(&[0x60, 0, 0, 0]);
        f.extend_from_slice(&tlen.to_be_bytes());
        f.extend_from_slice(&[6, 64]);
        f.extend_from_slice(&SRC6);
        f.extend_from_slice(&DST6);
    } else {
        let c = rfc1071(&[&SRC4, &DST4, &[0, 6], &tlen.to_be_bytes(), &tcp]);
        tcp[16..18].copy_from_slice(&c.to_be_bytes());
        f.extend_from_slice(&0x0800u16.to_be_bytes());
        let mut ip = vec![0x45, 0];
        ip.extend_from_slice(&(20 + tlen).to_be_bytes());
        ip.extend_from_slice(&s.id.to_be_bytes());
        ip.extend_from_slice(&[0x40, 0, 64, 6, 0, 0]);
        ip.extend_from_slice(&SRC4);
        ip.extend_from_slice(&DST4);
        let c = rfc1071(&[&ip]);
        ip[10..12].copy_from_slice(&c.to_be_bytes());
        f.extend_from_slice(&ip);
    }
    f.extend_from_slice(&tcp);
    f
}

/// The frame as a sender with checksum offload leaves it: the TCP checksum holds
/// something else (here the bytes 0xdead), which segmentation must not trust.
fn super_frame(s: Seg<'_>) -> Vec<u8> {
    let mut f = frame(s);
    let l4 = 14 + 4 * s.tags.len() + if s.v6 { 40 } else { 20 };
    f[l4 + 16..l4 + 18].copy_from_slice(&[0xde, 0xad]);
    f
}

fn payload(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i * 7 % 251) as u8).collect()
}

fn run(f: &[u8], mss: usize) -> Result<Vec<Vec<u8>>, GsoError> {
    let mut got = Vec::new();
    let n = segment(f, GsoKind::Tcp, mss, |p| {
        assert_eq!(p.mac_header_offset(), Some(0), "the MAC header is marked");
        got.push(p.data().to_vec());
    })?;
    assert_eq!(n, got.len());
    Ok(got)
}

const BASE: Seg<'static> = Seg {
    tags: &[],
    v6: false,
    id: 0x1c46,
    seq: 1_000_000,
    flags: ACK | TCP_PSH | TCP_FIN | TCP_CWR,
    options: &[],
    payload: &[],
};

#[test]
fn ipv4_super_frame_becomes_the_senders_segments() {
    let data = payload(3000);
    let f = super_frame(Seg {
        payload: &data,
        ..BASE
    });
    let want = [
        frame(Seg {
            payload: &data[..1000],
            flags: ACK | TCP_CWR,
            ..BASE
        }),
        frame(Seg {
            payload: &data[1000..2000],
            id: 0x1c47,
            seq: 1_001_000,
            flags: ACK,
            ..BASE
        }),
        frame(Seg {
            payload: &data[2000..],
            id: 0x1c48,
            seq: 1_002_000,
            flags: ACK | TCP_PSH | TCP_FIN,
            ..BASE
        }),
    ];
    assert_eq!(run(&f, 1000).unwrap(), want);
}

#[test]
fn last_segment_takes_the_remainder() {
    let data = payload(2500);
    let f = super_frame(Seg {
        payload: &data,
        flags: ACK,
        ..BASE
    });
    let got = run(&f, 1000).unwrap();
    let lens: Vec<usize> = got.iter().map(|g| g.len() - 54).collect();
    assert_eq!(lens, [1000, 1000, 500]);
    assert_eq!(
        got[2],
        frame(Seg {
            payload: &data[2000..],
            id: 0x1c48,
            seq: 1_002_000,
            flags: ACK,
            ..BASE
        })
    );
}

#[test]
fn options_are_copied_into_every_segment() {
    // NOP, NOP, timestamps (TSval 1, TSecr 2): the same in each segment, as Linux's GSO.
    let ts = [1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2];
    let data = payload(2896);
    let s = Seg {
        options: &ts,
        payload: &data,
        flags: ACK,
        ..BASE
    };
    let got = run(&super_frame(s), 1448).unwrap();
    assert_eq!(
        got,
        [
            frame(Seg {
                payload: &data[..1448],
                ..s
            }),
            frame(Seg {
                payload: &data[1448..],
                id: 0x1c47,
                seq: 1_001_448,
                ..s
            }),
        ]
    );
}

#[test]
fn ipv6_super_frame_is_segmented() {
    let data = payload(2000);
    let s = Seg {
        v6: true,
        payload: &data,
        ..BASE
    };
    let got = run(&super_frame(s), 1220).unwrap();
    assert_eq!(
        got,
        [
            frame(Seg {
                payload: &data[..1220],
                flags: ACK | TCP_CWR,
                ..s
            }),
            frame(Seg {
                payload: &data[1220..],
                seq: 1_001_220,
                flags: ACK | TCP_PSH | TCP_FIN,
                ..s
            }),
        ]
    );
}

#[test]
fn vlan_tagged_frames_keep_their_tags() {
    let data = payload(1500);
    for tags in [&[(0x8100u16, 7u16)][..], &[(0x88a8, 100), (0x8100, 7)][..]] {
        let s = Seg {
            tags,
            payload: &data,
            flags: ACK,
            ..BASE
        };
        let got = run(&super_frame(s), 1000).unwrap();
        assert_eq!(
            got,
            [
                frame(Seg {
                    payload: &data[..1000],
                    ..s
                }),
                frame(Seg {
                    payload: &data[1000..],
                    id: 0x1c47,
                    seq: 1_001_000,
                    ..s
                }),
            ],
            "tags {tags:?}"
        );
    }
}

#[test]
fn sequence_numbers_and_identifications_wrap() {
    let data = payload(300);
    let s = Seg {
        id: 0xffff,
        seq: u32::MAX - 99,
        payload: &data,
        flags: ACK,
        ..BASE
    };
    let got = run(&super_frame(s), 200).unwrap();
    assert_eq!(
        got[1],
        frame(Seg {
            id: 0,
            seq: 100,
            payload: &data[200..],
            ..s
        })
    );
}

#[test]
fn a_frame_that_fits_one_segment_comes_out_whole_with_its_checksum_completed() {
    let data = payload(500);
    let s = Seg {
        payload: &data,
        ..BASE
    };
    assert_eq!(run(&super_frame(s), 1448).unwrap(), [frame(s)]);
    // A bare ACK (no payload) too.
    let ack = Seg { flags: ACK, ..BASE };
    assert_eq!(run(&super_frame(ack), 1448).unwrap(), [frame(ack)]);
}

#[test]
fn ethernet_padding_is_not_carried_into_the_segments() {
    let data = payload(10);
    let s = Seg {
        payload: &data,
        flags: ACK,
        ..BASE
    };
    let mut f = super_frame(s);
    f.extend_from_slice(&[0xee; 6]);
    assert_eq!(run(&f, 1448).unwrap(), [frame(s)]);
}

#[test]
fn frames_that_cannot_be_segmented_are_refused_and_nothing_is_emitted() {
    let data = payload(3000);
    let good = super_frame(Seg {
        payload: &data,
        ..BASE
    });
    let v6 = super_frame(Seg {
        v6: true,
        payload: &data,
        ..BASE
    });
    let with = |f: &[u8], at: usize, b: &[u8]| {
        let mut f = f.to_vec();
        f[at..at + b.len()].copy_from_slice(b);
        f
    };
    let cases: Vec<(Vec<u8>, usize, GsoError)> = vec![
        (good.clone(), 0, GsoError::ZeroSegmentSize),
        // ARP.
        (with(&good, 12, &[0x08, 0x06]), 1000, GsoError::NotIp),
        (good[..13].to_vec(), 1000, GsoError::NotIp),
        // IPv4: a fragment (more fragments set), UDP, a length past the frame, a
        // version that is not 4, a header length under 20.
        (with(&good, 14 + 6, &[0x20, 0]), 1000, GsoError::BadIpHeader),
        (with(&good, 14 + 9, &[17]), 1000, GsoError::WrongProtocol),
        (with(&good, 14 + 2, &[0xff, 0xff]), 1000, GsoError::BadIpHeader),
        (with(&good, 14, &[0x65]), 1000, GsoError::BadIpHeader),
        (with(&good, 14, &[0x44]), 1000, GsoError::BadIpHeader),
        (good[..14 + 19].to_vec(), 1000, GsoError::BadIpHeader),
        // TCP: data offset under 5 words, or past the packet.
        (with(&good, 34 + 12, &[0x40]), 1000, GsoError::BadTransportHeader),
        (with(&good, 14 + 2, &[0, 30]), 1000, GsoError::BadTransportHeader),
        (
            with(&with(&good, 14 + 2, &[0, 60]), 34 + 12, &[0xf0]),
            1000,
            GsoError::BadTransportHeader,
        ),
        // IPv6: a hop-by-hop header first (a jumbogram's place), a payload length past
        // the frame.
        (with(&v6, 14 + 6, &[0]), 1000, GsoError::WrongProtocol),
        (with(&v6, 14 + 4, &[0xff, 0xff]), 1000, GsoError::BadIpHeader),
    ];
    for (i, (f, mss, want)) in cases.iter().enumerate() {
        let mut emitted = 0;
        assert_eq!(
            segment(f, GsoKind::Tcp, *mss, |_| emitted += 1),
            Err(*want),
            "case {i}"
        );
        assert_eq!(emitted, 0, "case {i}");
    }
}

/// A UDP datagram 1234 -> 53 in an Ethernet frame, every length and checksum correct.
fn udp_frame(v6: bool, id: u16, payload: &[u8]) -> Vec<u8> {
    let len = (8 + payload.len()) as u16;
    let mut udp = Vec::new();
    udp.extend_from_slice(&1234u16.to_be_bytes());
    udp.extend_from_slice(&53u16.to_be_bytes());
    udp.extend_from_slice(&len.to_be_bytes());
    udp.extend_from_slice(&[0, 0]);
    udp.extend_from_slice(payload);
    let mut f = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2];
    let c = if v6 {
        rfc1071(&[&SRC6, &DST6, &u32::from(len).to_be_bytes(), &[0, 0, 0, 17], &udp])
    } else {
        rfc1071(&[&SRC4, &DST4, &[0, 17], &len.to_be_bytes(), &udp])
    };
    udp[6..8].copy_from_slice(&(if c == 0 { 0xffff } else { c }).to_be_bytes());
    if v6 {
        f.extend_from_slice(&0x86ddu16.to_be_bytes());
        f.extend_from_slice(&[0x60, 0, 0, 0]);
        f.extend_from_slice(&len.to_be_bytes());
        f.extend_from_slice(&[17, 64]);
        f.extend_from_slice(&SRC6);
        f.extend_from_slice(&DST6);
    } else {
        f.extend_from_slice(&0x0800u16.to_be_bytes());
        let mut ip = vec![0x45, 0];
        ip.extend_from_slice(&(20 + len).to_be_bytes());
        ip.extend_from_slice(&id.to_be_bytes());
        ip.extend_from_slice(&[0, 0, 64, 17, 0, 0]);
        ip.extend_from_slice(&SRC4);
        ip.extend_from_slice(&DST4);
        let c = rfc1071(&[&ip]);
        ip[10..12].copy_from_slice(&c.to_be_bytes());
        f.extend_from_slice(&ip);
    }
    f.extend_from_slice(&udp);
    f
}

#[test]
fn udp_super_frame_becomes_one_datagram_a_segment() {
    let data = payload(3500);
    for v6 in [false, true] {
        // The sender's UDP_SEGMENT datagram as its veth hands it over: one UDP header
        // for the whole, its checksum partial (here 0xdead).
        let mut f = udp_frame(v6, 0x0100, &data);
        let l4 = if v6 { 54 } else { 34 };
        f[l4 + 6..l4 + 8].copy_from_slice(&[0xde, 0xad]);
        let mut got = Vec::new();
        let n = segment(&f, GsoKind::Udp, 1000, |p| got.push(p.data().to_vec())).unwrap();
        assert_eq!(n, 4);
        let want: Vec<Vec<u8>> = data
            .chunks(1000)
            .enumerate()
            .map(|(k, part)| udp_frame(v6, 0x0100 + k as u16, part))
            .collect();
        assert_eq!(got, want, "v6 {v6}");
    }
}

#[test]
fn each_kind_refuses_the_other_transport() {
    let tcp = super_frame(Seg {
        payload: &payload(3000),
        ..BASE
    });
    let udp = udp_frame(false, 1, &payload(3000));
    let refused = |f: &[u8], kind| segment(f, kind, 1000, |_| panic!("emitted")).unwrap_err();
    assert_eq!(refused(&tcp, GsoKind::Udp), GsoError::WrongProtocol);
    assert_eq!(refused(&udp, GsoKind::Tcp), GsoError::WrongProtocol);
    // A UDP header cut short by the IP length.
    let mut short = udp.clone();
    short[16..18].copy_from_slice(&26u16.to_be_bytes());
    assert_eq!(refused(&short, GsoKind::Udp), GsoError::BadTransportHeader);
}

#[test]
fn the_transport_header_is_found_past_tags_and_either_ip() {
    let data = payload(10);
    let plain = frame(Seg {
        payload: &data,
        ..BASE
    });
    assert_eq!(transport_header(&plain, GsoKind::Tcp), Ok(34));
    assert_eq!(
        transport_header(&plain, GsoKind::Udp),
        Err(GsoError::WrongProtocol)
    );
    let tagged = frame(Seg {
        tags: &[(0x8100, 7)],
        payload: &data,
        ..BASE
    });
    assert_eq!(transport_header(&tagged, GsoKind::Tcp), Ok(38));
    let v6 = frame(Seg {
        v6: true,
        payload: &data,
        ..BASE
    });
    assert_eq!(transport_header(&v6, GsoKind::Tcp), Ok(54));
    assert_eq!(
        transport_header(&udp_frame(false, 1, &data), GsoKind::Udp),
        Ok(34)
    );
}
