// router.click -- an IPv4 router core in the style of Click's fake-iprouter.
//
// Reads Ethernet frames from $IN (by default the shipped sample capture), routes the
// IPv4 ones and writes each output interface's frames to its own capture file:
//
//   interface  network          router address  link MTU  writes
//   if1        10.0.0.0/8       10.0.0.1        1500      $OUT1
//   if2        198.18.0.0/16    198.18.0.1      1500      $OUT2
//   if3        198.19.0.0/16    198.19.0.1      576       $OUT3
//
// Every IPv4 packet is checked (CheckIPHeader: bad version, length, checksum or
// source address are dropped and counted; it also sets the destination address
// annotation, so no GetIPAddress(16) follows it), looked up by destination, has its TTL
// decremented (TTL expiry answered with ICMP time exceeded), is fragmented to the
// link MTU (DF set: ICMP fragmentation needed, carrying the link MTU for path-MTU
// discovery, RFC 1191), and gets a new Ethernet header.
// ICMP errors are routed like any other packet. Packets for the router itself and
// non-IP frames (ARP) are counted and dropped: neighbour handling comes with real
// ports. Handlers worth reading after a run: chk.drops, tohost.count, nonip.count,
// if1/cnt.count, if2/cnt.count, if3/cnt.count, rt.table.
//
// Run it:   brickroute run conf/router.click
// Another capture:  brickroute run conf/router.click IN=trace.pcap OUT2=/tmp/b.pcap

define($IN conf/samples/router-sample.pcap,
       $OUT1 router-if1.pcap, $OUT2 router-if2.pcap, $OUT3 router-if3.pcap);

// One output interface: TTL, fragmentation, Ethernet header, capture file.
// Output 0 carries the ICMP errors it generates, to be routed, at most 1,000 a second
// (bursts of 20; RFC 1812 4.3.2.8 asks for a limit), the rest dropped.
elementclass OutInterface { $myip, $mtu, $mymac, $nexthop, $file |
    input -> dt :: DecIPTTL
          -> fr :: IPFragmenter($mtu)
          -> EtherEncap(0x0800, $mymac, $nexthop)
          -> cnt :: Counter
          -> Queue(1000)
          -> ToDump($file);
    dt[1] -> ICMPError($myip, timeexceeded) -> limit :: RatedSplitter(1000) -> output;
    fr[1] -> ICMPError($myip, unreachable, needfrag, PMTU $mtu) -> limit;
}

src :: FromDump($IN, STOP true);
c :: Classifier(12/0800, -);
chk :: CheckIPHeader;
rt :: RadixIPLookup(10.0.0.1/32 0, 198.18.0.1/32 0, 198.19.0.1/32 0,
                    10.0.0.0/8 1, 198.18.0.0/16 2, 198.19.0.0/16 3);

src -> c;
c[0] -> Strip(14) -> chk -> rt;
c[1] -> nonip :: Counter -> Discard;

rt[0] -> tohost :: Counter -> Discard;
rt[1] -> if1 :: OutInterface(10.0.0.1, 1500, 02:00:00:00:00:01, 02:00:00:00:00:02, $OUT1) -> rt;
rt[2] -> if2 :: OutInterface(198.18.0.1, 1500, 02:00:00:00:01:01, 02:00:00:00:01:02, $OUT2) -> rt;
rt[3] -> if3 :: OutInterface(198.19.0.1, 576, 02:00:00:00:02:01, 02:00:00:00:02:02, $OUT3) -> rt;
