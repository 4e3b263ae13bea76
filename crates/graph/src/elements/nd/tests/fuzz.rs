//! Property: no bytes on any input make a neighbour discovery element panic.

use crate::elements::nd::{IP6NDAdvertiserClass, IP6NDSolicitorClass};
use crate::testing::Harness;
use packet::Packet;
use proptest::prelude::*;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

proptest! {
    #[test]
    fn arbitrary_bytes_never_panic(
        frames in proptest::collection::vec(
            (proptest::collection::vec(any::<u8>(), 0..120), any::<[u8; 16]>(), 0usize..2),
            1..12,
        ),
        ms in 0u64..20_000,
    ) {
        let mut advertiser = Harness::new(&IP6NDAdvertiserClass, "2001:db8::/32 0:1:2:3:4:5", 1, 2);
        let clock = Arc::new(AtomicU64::new(0));
        let class = IP6NDSolicitorClass::with_clock(clock.clone());
        let mut solicitor = Harness::new(&class, "2001:db8::1, 0:0:c0:ae:67:ef, CAPACITY 4, TIMEOUT 5s, POLL_TIMEOUT 1s", 2, 2);
        for (i, (bytes, dst, port)) in frames.iter().enumerate() {
            clock.store(ms * i as u64 / 4, Ordering::Relaxed);
            let _ = advertiser.push_bytes(0, bytes);
            let mut p = Packet::from_slice(bytes);
            p.set_dst_ip6_anno(*dst);
            let _ = solicitor.push(*port, vec![p]);
            let _ = solicitor.run();
        }
        // The saved packets stay within CAPACITY.
        prop_assert!(solicitor.read("length").parse::<usize>().unwrap() <= 4);
    }
}
