//! Any bytes as a route netlink datagram must parse or be refused, never panic, as
//! route messages, neighbour messages and address messages; every route read has a length its
//! family allows and no address bits beyond it, every IPv4 address fits 32 bits.
#![no_main]

use io::rtnl::neigh::NeighMessage;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(messages) = io::rtnl::parse(data) {
        for m in messages {
            if let io::rtnl::Message::NewRoute(r) | io::rtnl::Message::DelRoute(r) = m {
                let bits = r.family.bits();
                assert!(r.len <= bits);
                let host_bits = u32::from(bits - r.len);
                let host = if host_bits == 0 {
                    0
                } else {
                    u128::MAX >> (128 - host_bits)
                };
                assert_eq!(r.dst & host, 0, "{:?}", r);
                if r.family == io::rtnl::Family::V4 {
                    assert!(r.dst <= u128::from(u32::MAX) && r.gateway.unwrap_or(0) <= u128::from(u32::MAX));
                }
            }
        }
    }
    if let Ok(messages) = io::rtnl::neigh::parse(data) {
        for m in messages {
            if let NeighMessage::New(n) | NeighMessage::Deleted(n) = m {
                if n.family == io::rtnl::Family::V4 {
                    assert!(n.addr <= u128::from(u32::MAX), "{:?}", n);
                }
                assert!(!n.usable() || n.lladdr.is_some());
            }
        }
    }
    if let Ok(messages) = io::rtnl::addr::parse(data) {
        for m in messages {
            if let io::rtnl::addr::AddressMessage::New(a) = m {
                if a.family == io::rtnl::Family::V4 {
                    assert!(a.addr <= u128::from(u32::MAX), "{:?}", a);
                }
            }
        }
    }
});
