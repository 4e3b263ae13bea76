use super::*;
use crate::rtnl::NLMSG_DONE;
use crate::xdp::netlink::align4;

/// A netlink message: header (type, flags) and body.
fn msg(ty: u16, flags: u16, body: &[u8]) -> Vec<u8> {
    let mut m = request(ty, flags, 0, body);
    m.resize(align4(m.len()), 0);
    m
}

fn attr(ty: u16, payload: &[u8]) -> Vec<u8> {
    let mut a = ((4 + payload.len()) as u16).to_ne_bytes().to_vec();
    a.extend_from_slice(&ty.to_ne_bytes());
    a.extend_from_slice(payload);
    a.resize(align4(a.len()), 0);
    a
}

fn entry(family: Family, ifindex: u32, state: u16, attrs: &[Vec<u8>]) -> Vec<u8> {
    let mut b = ndmsg(family, ifindex, state, 0);
    for a in attrs {
        b.extend_from_slice(a);
    }
    b
}

const MAC: [u8; 6] = [0x02, 0, 0, 0, 0x01, 0x02];

#[test]
fn entries_with_their_address_link_layer_address_and_state() {
    let mut buf = msg(
        RTM_NEWNEIGH,
        0,
        &entry(
            Family::V4,
            7,
            NUD_REACHABLE,
            &[attr(NDA_DST, &[198, 19, 0, 3]), attr(NDA_LLADDR, &MAC)],
        ),
    );
    let v6 = 0x2001_0db8_0000_0000_0000_0000_0000_0003u128;
    buf.extend(msg(
        RTM_DELNEIGH,
        0,
        &entry(Family::V6, 8, NUD_FAILED, &[attr(NDA_DST, &v6.to_be_bytes())]),
    ));
    buf.extend(msg(RTM_NEWLINK, 0, &[0; 16]));
    buf.extend(msg(NLMSG_DONE, NLM_F_DUMP_INTR, &[0; 4]));
    let reachable = Neighbor {
        family: Family::V4,
        ifindex: 7,
        addr: 0xc613_0003,
        lladdr: Some(MAC),
        state: NUD_REACHABLE,
    };
    let failed = Neighbor {
        family: Family::V6,
        ifindex: 8,
        addr: v6,
        lladdr: None,
        state: NUD_FAILED,
    };
    assert_eq!(
        parse(&buf).unwrap(),
        [
            NeighMessage::New(reachable),
            NeighMessage::Deleted(failed),
            NeighMessage::Link,
            NeighMessage::Interrupted,
            NeighMessage::Done,
        ]
    );
    assert!(reachable.usable());
    assert!(!failed.usable());
}

#[test]
fn which_states_are_usable() {
    let mut n = Neighbor {
        family: Family::V4,
        ifindex: 1,
        addr: 1,
        lladdr: Some(MAC),
        state: 0,
    };
    for (state, usable) in [
        (NUD_INCOMPLETE, false),
        (NUD_REACHABLE, true),
        (NUD_STALE, true),
        (NUD_DELAY, true),
        (NUD_PROBE, true),
        (NUD_FAILED, false),
        (NUD_NOARP, true),
        (NUD_PERMANENT, true),
        (0, false),
    ] {
        n.state = state;
        assert_eq!(n.usable(), usable, "state {state:#x}");
    }
    // Resolved states without an Ethernet address (a 4-byte one of a tunnel, or none).
    n.state = NUD_REACHABLE;
    n.lladdr = None;
    assert!(!n.usable());
}

#[test]
fn other_families_and_link_layer_addresses_are_left_out() {
    // AF_BRIDGE (a bridge's forwarding entries share the message type).
    let bridge = msg(RTM_NEWNEIGH, 0, &{
        let mut b = vec![7, 0, 0, 0];
        b.extend_from_slice(&[0; 8]);
        b.extend(attr(NDA_LLADDR, &MAC));
        b
    });
    assert_eq!(parse(&bridge).unwrap(), []);
    // A 4-byte link-layer address (an IPIP tunnel's): no Ethernet address.
    let tunnel = msg(
        RTM_NEWNEIGH,
        0,
        &entry(
            Family::V4,
            3,
            NUD_NOARP,
            &[attr(NDA_DST, &[10, 0, 0, 1]), attr(NDA_LLADDR, &[1, 2, 3, 4])],
        ),
    );
    let [NeighMessage::New(n)] = parse(&tunnel).unwrap()[..] else {
        panic!("one entry");
    };
    assert_eq!(n.lladdr, None);
    assert!(!n.usable());
}

#[test]
fn broken_messages_are_refused_not_a_panic() {
    let good = msg(
        RTM_NEWNEIGH,
        0,
        &entry(Family::V4, 7, NUD_REACHABLE, &[attr(NDA_DST, &[198, 19, 0, 3])]),
    );
    for cut in 1..good.len() {
        let _ = parse(&good[..cut]);
    }
    assert!(parse(&msg(RTM_NEWNEIGH, 0, &[2, 0, 0])).is_err());
    let mut long = good.clone();
    long[0] = 200;
    assert!(parse(&long).is_err());
}

#[test]
fn the_resolve_request_is_ip_neigh_use_with_no_state() {
    // nlmsghdr: length 36, RTM_NEWNEIGH, REQUEST|CREATE|REPLACE; ndmsg: AF_INET,
    // ifindex 5, state NUD_NONE (0: not iproute2's NUD_PERMANENT, which would exempt
    // the entry from the kernel's limit on entries), NTF_USE; NDA_DST 198.19.0.3.
    let mut want = 36u32.to_ne_bytes().to_vec();
    want.extend_from_slice(&28u16.to_ne_bytes());
    want.extend_from_slice(&0x501u16.to_ne_bytes());
    want.extend_from_slice(&[0; 8]);
    want.extend_from_slice(&[2, 0, 0, 0]);
    want.extend_from_slice(&5u32.to_ne_bytes());
    want.extend_from_slice(&0u16.to_ne_bytes());
    want.extend_from_slice(&[1, 0]);
    want.extend_from_slice(&8u16.to_ne_bytes());
    want.extend_from_slice(&1u16.to_ne_bytes());
    want.extend_from_slice(&[198, 19, 0, 3]);
    assert_eq!(resolve_request(Family::V4, 5, 0xc613_0003, 0), want);
}
