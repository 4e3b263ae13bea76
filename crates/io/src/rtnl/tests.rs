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
        dst: 0xc000_0200,
        len: 24,
        tos: 0,
        table: 254,
        kind: RTN_UNICAST,
        priority: 100,
        oif: Some(3),
        gateway: Some(0xc612_0002),
    };
    let mut buf = msg(RTM_NEWROUTE, 0, &body);
    buf.extend(msg(RTM_DELROUTE, 0, &body));
    buf.extend(msg(NLMSG_DONE, 0, &[0; 4]));
    assert_eq!(
        parse(&buf).unwrap(),
        vec![
            Message::NewRoute(want.clone()),
            Message::DelRoute(want),
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

#[test]
fn a_multipath_route_takes_its_first_hop() {
    let mut hops = Vec::new();
    for (ifindex, gw) in [(5u32, [198, 18, 0, 2]), (6, [198, 19, 0, 2])] {
        let g = attr(RTA_GATEWAY, &gw);
        hops.extend_from_slice(&((RTNEXTHOP + g.len()) as u16).to_ne_bytes());
        hops.extend_from_slice(&[0, 0]);
        hops.extend_from_slice(&ifindex.to_ne_bytes());
        hops.extend_from_slice(&g);
    }
    let body = rtmsg(
        INET,
        16,
        254,
        RTN_UNICAST,
        0,
        &[attr(RTA_DST, &[203, 0, 0, 0]), attr(RTA_MULTIPATH, &hops)],
    );
    let got = parse(&msg(RTM_NEWROUTE, 0, &body)).unwrap();
    let Message::NewRoute(r) = &got[0] else {
        panic!("{got:?}")
    };
    assert_eq!((r.oif, r.gateway), (Some(5), Some(0xc612_0002)));
}

#[test]
fn ipv6_routes_cache_entries_and_other_messages_are_left_out() {
    let v6 = rtmsg(libc::AF_INET6 as u8, 64, 254, RTN_UNICAST, 0, &[]);
    let cloned = rtmsg(
        INET,
        32,
        254,
        RTN_UNICAST,
        RTM_F_CLONED,
        &[attr(RTA_DST, &[1, 2, 3, 4])],
    );
    let mut buf = msg(RTM_NEWROUTE, 0, &v6);
    buf.extend(msg(RTM_NEWROUTE, 0, &cloned));
    buf.extend(msg(RTM_NEWLINK, 0, &[0; 16]));
    buf.extend(msg(RTM_DELADDR, 0, &[0; 8]));
    buf.extend(msg(99, 0, &[]));
    assert_eq!(
        parse(&buf).unwrap(),
        vec![Message::LinkOrAddress, Message::LinkOrAddress]
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
