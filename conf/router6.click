// router6.click -- an IPv6 router core, the counterpart of router.click.
//
// Reads Ethernet frames from $IN (by default the shipped sample capture), routes the
// IPv6 ones and writes each output interface's frames to its own capture file:
//
//   interface  network           router address  writes
//   if1        2001:db8:1::/48   2001:db8:1::1   $OUT1
//   if2        2001:db8:2::/48   2001:db8:2::1   $OUT2
//
// and 2001:db8:3::/48 is reached through the gateway 2001:db8:2::3 on if2. Every IPv6
// packet is checked (CheckIP6Header: a bad version, a short header or a payload length
// past the frame are dropped and counted; Ethernet padding is trimmed), looked up by
// destination, has its hop limit decremented (expiry answered with an ICMPv6 time
// exceeded, RFC 4443, routed like any other packet) and gets a new Ethernet header.
// Packets for the router itself and non-IPv6 frames are counted and dropped. Handlers
// worth reading after a run: chk.drops, tohost.count, nonip.count, if1/cnt.count,
// if2/cnt.count, rt.table.
//
// Run it:   brickroute run conf/router6.click
// Another capture:  brickroute run conf/router6.click IN=trace.pcap OUT2=/tmp/b.pcap

define($IN conf/samples/router6-sample.pcap,
       $OUT1 router6-if1.pcap, $OUT2 router6-if2.pcap);

// One output interface: hop limit, Ethernet header, capture file. Output 0 carries
// the ICMPv6 errors it generates, to be routed, at most 1,000 a second (bursts of 20;
// RFC 4443 2.4 (f) requires a limit), the rest dropped.
elementclass OutInterface6 { $myip, $mymac, $nexthop, $file |
    input -> dh :: DecIP6HLIM
          -> EtherEncap(0x86dd, $mymac, $nexthop)
          -> cnt :: Counter
          -> Queue(1000)
          -> ToDump($file);
    dh[1] -> ICMP6Error($myip, 3, 0) -> RatedSplitter(1000) -> output;
}

src :: FromDump($IN, STOP true);
c :: Classifier(12/86dd, -);
chk :: CheckIP6Header;
rt :: LookupIP6Route(2001:db8:1::1 0, 2001:db8:2::1 0,
                     2001:db8:1::/48 1, 2001:db8:2::/48 2,
                     2001:db8:3::/48 2001:db8:2::3 2);

src -> c;
c[0] -> Strip(14) -> chk -> GetIP6Address(24) -> rt;
c[1] -> nonip :: Counter -> Discard;

rt[0] -> tohost :: Counter -> Discard;
rt[1] -> if1 :: OutInterface6(2001:db8:1::1, 02:00:00:00:00:01, 02:00:00:00:00:02, $OUT1) -> rt;
rt[2] -> if2 :: OutInterface6(2001:db8:2::1, 02:00:00:00:01:01, 02:00:00:00:01:02, $OUT2) -> rt;
