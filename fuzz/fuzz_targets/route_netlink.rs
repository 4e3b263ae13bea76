//! Any bytes as a route netlink datagram must parse or be refused, never panic; every
//! route read has a length of at most 32 and no address bits beyond it.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(messages) = io::rtnl::parse(data) {
        for m in messages {
            if let io::rtnl::Message::NewRoute(r) | io::rtnl::Message::DelRoute(r) = m {
                assert!(r.len <= 32);
                let host = if r.len == 0 { u32::MAX } else { u32::MAX.checked_shr(u32::from(r.len)).unwrap_or(0) };
                assert_eq!(r.dst & host, 0, "{:?}", r);
            }
        }
    }
});
