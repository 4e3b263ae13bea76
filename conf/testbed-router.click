// testbed-router.click -- the IPv4 router of conf/router.click over the testbed's two
// interfaces (`brickroute testbed up`; `brickroute demo` runs it in the dut namespace).
//
//   interface  network          router address  neighbour
//   d0         198.18.0.0/24    198.18.0.2      198.18.0.1 g0
//   d1         198.18.1.0/24    198.18.1.2      198.18.1.1 s0
//   traffic to 198.19.0.0/16 goes out of d1 to the sink, 198.18.0.0/24 back out of d0.
//
// Every IPv4 packet is checked (CheckIPHeader), looked up by destination
// (RadixIPLookup, holding the router's own addresses and, kept there by
// KernelRoutes, the dut namespace's kernel routing table: the two connected networks
// and 198.19.0.0/16 via the sink, as `ip route` in dut shows them; a route added
// there, by hand or by a routing daemon, takes the traffic while the router runs),
// has its TTL decremented (expiry answered with ICMP time exceeded,
// routed like any packet) and gets an Ethernet header addressed to its next hop
// (NeighborEncap: the gateway's, or on a connected network the destination's, address
// from the kernel's neighbour table; the testbed's neighbours are permanent entries
// there, so no ARP is needed on the data path, and a next hop the kernel has no entry
// for is resolved by the kernel when its first packet asks). Packets for the router
// itself and non-IP frames are counted and dropped here: the kernel, which sees the
// same frames, answers ARP and ping. Handlers worth reading after a run: chk.drops,
// tohost.count, nonip.count, out0/cnt.count, out1/cnt.count, out0/dt.drops,
// out1/dt.drops, out0/ne.unresolved, out1/ne.unresolved, out1/ne.table.
//
// Run it in the testbed (one worker per queue; the interfaces need that many queues):
//   ip netns exec br-dut brickroute run --threads 1 conf/testbed-router.click METHOD=XDP

define($METHOD XDP);

// One output interface: TTL, Ethernet header for the next hop, counter, device.
// Output 0 carries the packets whose TTL ran out, output 1 those whose next hop the
// kernel failed to resolve by ARP: each gets its ICMP error below.
elementclass OutInterface { $dev |
    input -> dt :: DecIPTTL
          -> ne :: NeighborEncap($dev)
          -> cnt :: Counter
          -> ToDevice($dev, METHOD $METHOD);
    dt[1] -> [0]output;
    ne[1] -> [1]output;
}

chk :: CheckIPHeader;
rt :: RadixIPLookup(198.18.0.2/32 0, 198.18.1.2/32 0);
KernelRoutes(rt, d0 1, d1 2);
nonip :: Counter;

// Each packet is painted with the interface it came in on (1: d0, 2: d1), so that its
// ICMP error goes out from that interface's address (RFC 1812 4.3.2.4: an ICMP
// message's source is an address of the interface it leaves by, which is the one the
// packet came in on), as Linux answers.
FromDevice(d0, METHOD $METHOD) -> c0 :: Classifier(12/0800, -);
FromDevice(d1, METHOD $METHOD) -> c1 :: Classifier(12/0800, -);
c0[0] -> Strip(14) -> Paint(1) -> chk;
c1[0] -> Strip(14) -> Paint(2) -> chk;
c0[1] -> nonip;
c1[1] -> nonip;
nonip -> Discard;
// CheckIPHeader sets the destination address annotation the lookup reads.
chk -> rt;

rt[0] -> tohost :: Counter -> Discard;
rt[1] -> out0 :: OutInterface(d0);
rt[2] -> out1 :: OutInterface(d1);

// ICMP time exceeded and host unreachable (as Linux answers a next hop that does not
// answer ARP), routed like any packet, at most 1,000 a second (bursts of 20; RFC 1812
// 4.3.2.8 asks for a limit), the rest dropped.
out0[0], out1[0] -> expired :: PaintSwitch;
out0[1], out1[1] -> unresolved :: PaintSwitch;
expired[0] -> Discard;
unresolved[0] -> Discard;
expired[1] -> ICMPError(198.18.0.2, timeexceeded) -> limit :: RatedSplitter(1000) -> rt;
expired[2] -> ICMPError(198.18.1.2, timeexceeded) -> limit;
unresolved[1] -> ICMPError(198.18.0.2, unreachable, host) -> limit;
unresolved[2] -> ICMPError(198.18.1.2, unreachable, host) -> limit;
