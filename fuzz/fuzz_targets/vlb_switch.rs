//! VLBSwitch takes any bytes as a packet, with or without a network header annotation
//! anywhere, without panicking, and sends each to an output of the mesh: the flow hash
//! reads IPv4 and IPv6 headers (options, fragments, truncated transport headers) from
//! untrusted frames.
#![no_main]

use cluster::element::VlbSwitchClass;
use graph::testing::Harness;
use libfuzzer_sys::fuzz_target;
use packet::Packet;

fuzz_target!(|data: &[u8]| {
    let Some((&control, frame)) = data.split_first() else {
        return;
    };
    let servers = 2 + usize::from(control % 6);
    let config = format!("{}, SCHEME vlb", usize::from(control >> 4) % servers);
    let mut h = Harness::new(&VlbSwitchClass, &config, servers, servers);
    let mut p = Packet::from_slice(frame);
    if control & 8 != 0 && !frame.is_empty() {
        let at = usize::from(control) % frame.len();
        p.set_network_header(at as isize, frame.len() - at);
    }
    let input = usize::from(control) % servers;
    let out = h.push(input, vec![p]);
    assert_eq!(out.iter().map(Vec::len).sum::<usize>(), 1);
    assert_eq!(cluster::flow::flow_hash(frame, None), cluster::flow::flow_hash(frame, None));
});
