use super::*;

/// A netlink message: header (type, flags) and body.
fn msg(ty: u16, flags: u16, body: &[u8]) -> Vec<u8> {
    let len = NLMSG_HDR + body.len();
    let mut m = Vec::new();
    m.extend_from_slice(&(len as u32).to_ne_bytes());
    m.extend_from_slice(&ty.to_ne_bytes());
    m.extend_from_slice(&flags.to_ne_bytes());
    m.extend_from_slice(&[0; 8]);
    m.extend_from_slice(body);
    m.resize(align4(m.len()), 0);
    m
}

fn attr(ty: u16, payload: &[u8]) -> Vec<u8> {
    let mut a = Vec::new();
    a.extend_from_slice(&((4 + payload.len()) as u16).to_ne_bytes());
    a.extend_from_slice(&ty.to_ne_bytes());
    a.extend_from_slice(payload);
    a.resize(align4(a.len()), 0);
    a
}

/// rtmsg: family, dst_len, src_len, tos, table, protocol, scope, type; flags.
fn rtmsg(family: u8, len: u8, table: u8, kind: u8, flags: u32, attrs: &[Vec<u8>]) -> Vec<u8> {
    let mut b = vec![family, len, 0, 0, table, 4, 0, kind];
    b.extend_from_slice(&flags.to_ne_bytes());
    for a in attrs {
        b.extend_from_slice(a);
    }
    b
}

const INET: u8 = libc::AF_INET as u8;

#[test]
fn a_route_with_gateway_interface_and_metric() {
    let body = rtmsg(
        INET,
        24,
        254,
        RTN_UNICAST,
        0,
        &[
            attr(RTA_TABLE, &254u32.to_ne_bytes()),
            attr(RTA_DST, &[192, 0, 2, 0]),
            attr(RTA_GATEWAY, &[198, 18, 0, 2]),
            attr(RTA_OIF, &3u32.to_ne_bytes()),
            attr(RTA_PRIORITY, &100u32.to_ne_bytes()),
        ],
    );
    let want = Route {
        family: Family::V4,
        dst: 0xc000_0200,
        len: 24,
        tos: 0,
        table: 254,
        kind: RTN_UNICAST,
        priority: 100,
        oif: Some(3),
        gateway: Some(0xc612_0002),
        place: Place::First,
        dead: false,
        hops: vec![NextHop {
            oif: Some(3),
            gateway: Some(0xc612_0002),
            dead: false,
            via_other_family: false,
            weight: 1,
        }],
        nh_id: None,
        src_len: 0,
        // rtm_protocol 4 (static), as rtmsg() writes it.
        identity: (4, None, Vec::new()),
    };
    let mut buf = msg(RTM_NEWROUTE, 0, &body);
    buf.extend(msg(RTM_NEWROUTE, NLM_F_REPLACE, &body));
    buf.extend(msg(RTM_NEWROUTE, NLM_F_APPEND, &body));
    buf.extend(msg(RTM_NEWROUTE, NLM_F_MULTI, &body));
    buf.extend(msg(RTM_DELROUTE, 0, &body));
    buf.extend(msg(NLMSG_DONE, 0, &[0; 4]));
    let at = |place| Route {
        place,
        ..want.clone()
    };
    assert_eq!(
        parse(&buf).unwrap(),
        vec![
            Message::NewRoute(want.clone()),
            Message::NewRoute(at(Place::Replace)),
            Message::NewRoute(at(Place::Last)),
            Message::NewRoute(at(Place::Last)),
            Message::DelRoute(at(Place::Last)),
            Message::Done
        ]
    );
}

#[test]
fn a_connected_route_and_the_default_route() {
    // No RTA_DST: the default route. Host bits beyond the length are cleared.
    let default = rtmsg(
        INET,
        0,
        254,
        RTN_UNICAST,
        0,
        &[
            attr(RTA_GATEWAY, &[10, 0, 0, 1]),
            attr(RTA_OIF, &2u32.to_ne_bytes()),
        ],
    );
    let connected = rtmsg(
        INET,
        8,
        254,
        RTN_UNICAST,
        0,
        &[attr(RTA_DST, &[10, 1, 2, 3]), attr(RTA_OIF, &2u32.to_ne_bytes())],
    );
    let mut buf = msg(RTM_NEWROUTE, 0, &default);
    buf.extend(msg(RTM_NEWROUTE, 0, &connected));
    let got = parse(&buf).unwrap();
    let Message::NewRoute(d) = &got[0] else {
        panic!("{got:?}")
    };
    assert_eq!(
        (d.dst, d.len, d.gateway, d.oif),
        (0, 0, Some(0x0a00_0001), Some(2))
    );
    let Message::NewRoute(c) = &got[1] else {
        panic!("{got:?}")
    };
    assert_eq!((c.dst, c.len, c.gateway, c.oif), (0x0a00_0000, 8, None, Some(2)));
}

/// An RTA_MULTIPATH payload: (flags, ifindex, gateway) per hop.
fn hops(list: &[(u8, u32, [u8; 4])]) -> Vec<u8> {
    let mut hops = Vec::new();
    for (flags, ifindex, gw) in list {
        let g = attr(RTA_GATEWAY, gw);
        hops.extend_from_slice(&((RTNEXTHOP + g.len()) as u16).to_ne_bytes());
        hops.extend_from_slice(&[*flags, 0]);
        hops.extend_from_slice(&ifindex.to_ne_bytes());
        hops.extend_from_slice(&g);
    }
    hops
}

fn multipath(list: &[(u8, u32, [u8; 4])]) -> Route {
    let body = rtmsg(
        INET,
        16,
        254,
        RTN_UNICAST,
        0,
        &[attr(RTA_DST, &[203, 0, 0, 0]), attr(RTA_MULTIPATH, &hops(list))],
    );
    let got = parse(&msg(RTM_NEWROUTE, 0, &body)).unwrap();
    let Message::NewRoute(r) = &got[0] else {
        panic!("{got:?}")
    };
    r.clone()
}

#[test]
fn a_multipath_route_takes_its_first_live_hop() {
    let a = (0, 5, [198, 18, 0, 2]);
    let b = (0, 6, [198, 19, 0, 2]);
    let r = multipath(&[a, b]);
    assert_eq!((r.oif, r.gateway, r.dead), (Some(5), Some(0xc612_0002), false));
    // RTNH_F_DEAD on the first: the second.
    let r = multipath(&[(1, 5, [198, 18, 0, 2]), b]);
    assert_eq!((r.oif, r.gateway, r.dead), (Some(6), Some(0xc613_0002), false));
    // All dead: the first, marked dead.
    let r = multipath(&[(1, 5, [198, 18, 0, 2]), (1, 6, [198, 19, 0, 2])]);
    assert_eq!((r.oif, r.dead), (Some(5), true));
    // Every hop, in order, with its own state.
    assert_eq!(
        r.hops,
        vec![
            NextHop {
                oif: Some(5),
                gateway: Some(0xc612_0002),
                dead: true,
                via_other_family: false,
                weight: 1,
            },
            NextHop {
                oif: Some(6),
                gateway: Some(0xc613_0002),
                dead: true,
                via_other_family: false,
                weight: 1,
            }
        ]
    );
}

#[test]
fn a_route_with_a_dead_next_hop_is_marked_dead() {
    let body = rtmsg(
        INET,
        24,
        254,
        RTN_UNICAST,
        RTNH_F_DEAD,
        &[attr(RTA_DST, &[192, 0, 2, 0]), attr(RTA_OIF, &3u32.to_ne_bytes())],
    );
    let got = parse(&msg(RTM_NEWROUTE, 0, &body)).unwrap();
    let Message::NewRoute(r) = &got[0] else {
        panic!("{got:?}")
    };
    assert!(r.dead);
}

#[test]
fn nexthop_objects_changing_ask_for_a_new_dump() {
    let mut buf = msg(RTM_NEWNEXTHOP, 0, &[0; 8]);
    buf.extend(msg(RTM_DELNEXTHOP, 0, &[0; 8]));
    assert_eq!(parse(&buf).unwrap(), vec![Message::LinkAddressOrNexthop; 2]);
}

#[test]
fn an_ipv6_route() {
    let dst = [0x20, 0x01, 0x0d, 0xb8, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff];
    let gw = [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
    let body = rtmsg(
        libc::AF_INET6 as u8,
        48,
        254,
        RTN_UNICAST,
        0,
        &[
            attr(RTA_DST, &dst),
            attr(RTA_GATEWAY, &gw),
            attr(RTA_OIF, &7u32.to_ne_bytes()),
            attr(RTA_PRIORITY, &1024u32.to_ne_bytes()),
        ],
    );
    let got = parse(&msg(RTM_NEWROUTE, 0, &body)).unwrap();
    let Message::NewRoute(r) = &got[0] else {
        panic!("{got:?}")
    };
    // The bits past /48 are cleared.
    assert_eq!(r.family, Family::V6);
    assert_eq!(r.dst, 0x2001_0db8_0001_0000_0000_0000_0000_0000);
    assert_eq!((r.len, r.priority, r.oif), (48, 1024, Some(7)));
    assert_eq!(r.gateway, Some(0xfe80_0000_0000_0000_0000_0000_0000_0001));
    // A length past 128 is no route.
    let long = rtmsg(libc::AF_INET6 as u8, 129, 254, RTN_UNICAST, 0, &[]);
    assert_eq!(parse(&msg(RTM_NEWROUTE, 0, &long)).unwrap(), vec![]);
}

#[test]
fn other_families_cache_entries_and_other_messages_are_left_out() {
    let other = rtmsg(libc::AF_BRIDGE as u8, 0, 254, RTN_UNICAST, 0, &[]);
    let cloned = rtmsg(
        INET,
        32,
        254,
        RTN_UNICAST,
        RTM_F_CLONED,
        &[attr(RTA_DST, &[1, 2, 3, 4])],
    );
    let mut buf = msg(RTM_NEWROUTE, 0, &other);
    buf.extend(msg(RTM_NEWROUTE, 0, &cloned));
    buf.extend(msg(RTM_NEWLINK, 0, &[0; 16]));
    buf.extend(msg(RTM_DELADDR, 0, &[0; 8]));
    buf.extend(msg(99, 0, &[]));
    assert_eq!(
        parse(&buf).unwrap(),
        vec![Message::LinkAddressOrNexthop, Message::LinkAddressOrNexthop]
    );
}

#[test]
fn errors_interruptions_and_bad_lengths() {
    let mut buf = msg(NLMSG_ERROR, 0, &(-(libc::EPERM)).to_ne_bytes());
    buf.extend(msg(NLMSG_DONE, NLM_F_DUMP_INTR, &[0; 4]));
    assert_eq!(
        parse(&buf).unwrap(),
        vec![Message::Error(libc::EPERM), Message::Interrupted, Message::Done]
    );
    let mut bad = msg(RTM_NEWROUTE, 0, &rtmsg(INET, 24, 254, 1, 0, &[]));
    bad[0] = 200; // longer than the datagram
    assert!(parse(&bad).is_err());
    let short = msg(RTM_NEWROUTE, 0, &[INET, 24]);
    assert!(parse(&short).is_err());
    let bad_attr = msg(
        RTM_NEWROUTE,
        0,
        &rtmsg(INET, 24, 254, 1, 0, &[vec![40, 0, 1, 0, 192, 0, 2, 0]]),
    );
    assert!(parse(&bad_attr).is_err());
}

proptest::proptest! {
    #[test]
    fn arbitrary_bytes_never_panic(data in proptest::collection::vec(proptest::num::u8::ANY, 0..512)) {
        let _ = parse(&data);
    }
}

#[test]
fn source_length_protocol_preferred_source_and_metrics_are_kept() {
    // rtmsg with src_len 64 (an IPv6 source-specific route).
    let mut body = vec![libc::AF_INET6 as u8, 48, 64, 0, 254, 3, 0, RTN_UNICAST];
    body.extend_from_slice(&0u32.to_ne_bytes());
    body.extend(attr(
        RTA_PREFSRC,
        &[0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
    ));
    body.extend(attr(RTA_METRICS, &[8, 0, 2, 0, 0xdc, 5, 0, 0]));
    let got = parse(&msg(RTM_NEWROUTE, 0, &body)).unwrap();
    let Message::NewRoute(r) = &got[0] else {
        panic!("{got:?}")
    };
    assert_eq!(r.src_len, 64);
    assert_eq!(r.identity.0, 3);
    assert_eq!(r.identity.1, Some(0x2001_0db8_0000_0000_0000_0000_0000_0001));
    assert_eq!(r.identity.2, vec![8, 0, 2, 0, 0xdc, 5, 0, 0]);
}

#[test]
fn a_dump_the_kernel_keeps_interrupting_fails_instead_of_returning_part_of_the_table() {
    // Every datagram of a real dump is read as "interrupted by a change": the dump is
    // taken again, and fails once its patience is spent, never returning what it read.
    let attempts = std::cell::Cell::new(0u32);
    // A dump request that counts the attempts.
    let request = |s: &RouteSocket, seq| {
        attempts.set(attempts.get() + 1);
        s.request_dump(Family::V4, seq)
    };
    let r = dump_within(
        "route dump",
        request,
        |_| {
            Ok(vec![
                DumpStep::<Route>::Item(route_for_test()),
                DumpStep::Interrupted,
            ])
        },
        Duration::ZERO,
    );
    let e = r.expect_err("an interrupted dump was returned");
    assert_eq!(e.kind(), io::ErrorKind::Interrupted);
    assert_eq!(
        e.to_string(),
        "route dump: interrupted by changes 10 times in a row"
    );
    assert_eq!(attempts.get(), DUMP_QUICK_ATTEMPTS);

    // Interrupted twice, then whole: the whole one is returned.
    attempts.set(0);
    let r = dump_within(
        "route dump",
        request,
        |_| {
            Ok(if attempts.get() < 3 {
                vec![DumpStep::Interrupted]
            } else {
                vec![DumpStep::Item(route_for_test()), DumpStep::Done]
            })
        },
        Duration::ZERO,
    );
    assert_eq!(r.unwrap(), vec![route_for_test()]);
    assert_eq!(attempts.get(), 3);
}

fn route_for_test() -> Route {
    multipath(&[(0, 2, [10, 0, 0, 1])])
}

#[test]
fn a_nexthop_object_and_a_gateway_of_the_other_family_are_noted() {
    // `ip route add 192.0.2.0/24 nhid 7` as the kernel describes it (compat mode: the
    // object's hop too), and `ip route add 192.0.3.0/24 via inet6 fe80::1 dev eth0`.
    let mut via = (libc::AF_INET6 as u16).to_ne_bytes().to_vec();
    via.extend_from_slice(&[0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
    let route = |attrs: &[Vec<u8>]| msg(RTM_NEWROUTE, 0, &rtmsg(INET, 24, 254, RTN_UNICAST, 0, attrs));
    let mut buf = route(&[
        attr(RTA_DST, &[192, 0, 2, 0]),
        attr(RTA_NH_ID, &7u32.to_ne_bytes()),
        attr(RTA_GATEWAY, &[198, 18, 0, 2]),
        attr(RTA_OIF, &3u32.to_ne_bytes()),
    ]);
    buf.extend(route(&[
        attr(RTA_DST, &[192, 0, 3, 0]),
        attr(RTA_VIA, &via),
        attr(RTA_OIF, &3u32.to_ne_bytes()),
    ]));
    let got = parse(&buf).unwrap();
    let [Message::NewRoute(a), Message::NewRoute(b)] = &got[..] else {
        panic!("{got:?}")
    };
    assert_eq!(
        (a.nh_id, a.gateway, a.hops[0].via_other_family),
        (Some(7), Some(0xc612_0002), false)
    );
    assert_eq!(
        (b.nh_id, b.gateway, b.hops[0].via_other_family),
        (None, None, true)
    );
}

#[test]
fn a_multipath_hops_weight_is_its_rtnh_hops_and_one() {
    // `nexthop via 198.18.0.2 weight 3 nexthop via 198.19.0.2`.
    let mut payload = hops(&[(0, 5, [198, 18, 0, 2]), (0, 6, [198, 19, 0, 2])]);
    payload[3] = 2;
    let body = rtmsg(
        INET,
        16,
        254,
        RTN_UNICAST,
        0,
        &[attr(RTA_DST, &[203, 0, 0, 0]), attr(RTA_MULTIPATH, &payload)],
    );
    let got = parse(&msg(RTM_NEWROUTE, 0, &body)).unwrap();
    let Message::NewRoute(r) = &got[0] else {
        panic!("{got:?}")
    };
    assert_eq!(r.hops.iter().map(|h| h.weight).collect::<Vec<_>>(), vec![3, 1]);
}

#[test]
fn the_default_route_request_is_route_adds() {
    let m = default_route_request(std::net::Ipv4Addr::new(192, 0, 2, 254), 7);
    // nlmsghdr: length 36, RTM_NEWROUTE (24), REQUEST|ACK|EXCL|CREATE, seq 7, pid 0.
    let mut want = Vec::new();
    want.extend_from_slice(&36u32.to_ne_bytes());
    want.extend_from_slice(&24u16.to_ne_bytes());
    want.extend_from_slice(&(0x1u16 | 0x4 | 0x200 | 0x400).to_ne_bytes());
    want.extend_from_slice(&7u32.to_ne_bytes());
    want.extend_from_slice(&0u32.to_ne_bytes());
    // rtmsg: AF_INET, /0, table main (254), protocol boot (3), scope universe,
    // unicast; no flags. Then RTA_GATEWAY (5), 8 bytes.
    want.extend_from_slice(&[2, 0, 0, 0, 254, 3, 0, 1, 0, 0, 0, 0]);
    want.extend_from_slice(&8u16.to_ne_bytes());
    want.extend_from_slice(&5u16.to_ne_bytes());
    want.extend_from_slice(&[192, 0, 2, 254]);
    assert_eq!(m, want);
}
