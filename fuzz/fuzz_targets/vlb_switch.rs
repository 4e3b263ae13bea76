//! VLBSwitch takes any bytes as a packet, with or without a network header annotation
//! anywhere, without panicking, and sends each to an output of the mesh: the flow hash
//! reads IPv4 and IPv6 headers (options, fragments, truncated transport headers) from
//! untrusted frames. On the heartbeat input it takes any bytes too, and sends nothing
//! on.
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
    let mut config = format!("{}, SCHEME vlb", usize::from(control >> 4) % servers);
    let heartbeats = control & 4 != 0;
    if heartbeats {
        config += ", HEARTBEAT 10ms";
    }
    let inputs = servers + usize::from(heartbeats);
    let mut h = Harness::new(&VlbSwitchClass, &config, inputs, servers);
    let mut p = Packet::from_slice(frame);
    if control & 8 != 0 && !frame.is_empty() {
        let at = usize::from(control) % frame.len();
        p.set_network_header(at as isize, frame.len() - at);
    }
    let input = usize::from(control) % inputs;
    let out = h.push(input, vec![p]);
    let sent_on = if input == servers { 0 } else { 1 };
    assert_eq!(out.iter().map(Vec::len).sum::<usize>(), sent_on);
    assert_eq!(
        cluster::flow::flow_hash(frame, None),
        cluster::flow::flow_hash(frame, None)
    );
});
