// iprouter.click -- Click's IP router (Kohler et al., "The Click modular router",
// ACM TOCS 2000, figure 8, as Click's make-ip-conf.pl writes it) between two
// Ethernet interfaces, with the router's own ARP: it answers ARP for its addresses
// (ARPResponder) and resolves its next hops (ARPQuerier), so the interfaces need no
// addresses in the kernel.
//
//   interface  network        router address
//   $DEV0      $NET0          $IP0 ($MAC0)
//   $DEV1      $NET1          $IP1 ($MAC1)
//
// Each packet forwarded: header checked (CheckIPHeader), routed (StaticIPLookup),
// link-level broadcasts dropped (DropBroadcasts), a packet leaving by the interface it
// came in on answered with an ICMP redirect (PaintTee), record-route and timestamp
// options filled in (IPGWOptions; bad options answered with ICMP parameter problem),
// ICMP errors given the output interface's address (FixIPSrc), TTL decremented (ICMP
// time exceeded), fragmented to 1500 bytes (DF set: ICMP fragmentation needed), and
// sent to its next hop's Ethernet address (ARPQuerier). The router answers pings to
// its addresses (ICMPPingResponder); other packets for it are counted and dropped.
//
// Each ARPQuerier keeps at most 1,024 neighbours (Linux's gc_thresh3): packets to many
// addresses of a connected network evict the entries answered or queried longest ago
// instead of growing the table.
//
// The interfaces are opened with the default METHOD, XDP: with ARP elements in the
// configuration, brickroute's XDP program hands the router the ARP for addresses
// other than the interfaces' own in the kernel, and with no kernel addresses on $DEV0
// and $DEV1 every frame is the router's. (METHOD PACKET works as well.)
//
// Run it (root, two interfaces without IP addresses):
//   brickroute run conf/iprouter.click DEV0=eth1 MAC0=... IP0=... NET0=... BCAST0=... \
//       DEV1=eth2 MAC1=... IP1=... NET1=... BCAST1=...
// Handlers worth reading: arpq0.table, arpq1.table, rt.table, tohost.count,
// bcast.count, gio0.drops, chk.drops.

define($DEV0 r0, $MAC0 02:00:00:00:01:01, $IP0 10.0.1.1, $NET0 10.0.1.0/24,
       $BCAST0 10.0.1.255,
       $DEV1 r1, $MAC1 02:00:00:00:02:01, $IP1 10.0.2.1, $NET1 10.0.2.0/24,
       $BCAST1 10.0.2.255);

// The shared IP input path and routing table. Output 0: the router's addresses;
// output 1: interface 0; output 2: interface 1; output 3: the networks' broadcast
// addresses (directed broadcasts are not forwarded, RFC 1812 5.3.5.2, nor answered).
ip :: Strip(14)
   -> chk :: CheckIPHeader(BADSRC $BCAST0 $BCAST1 0.0.0.0 255.255.255.255,
                           GOODDST $IP0 $IP1)
   -> rt :: StaticIPLookup($IP0/32 0, $IP1/32 0, $NET0 1, $NET1 2,
                           $BCAST0/32 3, $BCAST1/32 3);

// ARP replies are copied to each interface's ARPQuerier.
arpt :: Tee(2);

// Interface 0.
c0 :: Classifier(12/0806 20/0001, 12/0806 20/0002, 12/0800, -);
FromDevice($DEV0) -> c0;
out0 :: Queue(200) -> ToDevice($DEV0);
c0[0] -> ar0 :: ARPResponder($IP0 $MAC0) -> out0;
arpq0 :: ARPQuerier($IP0, $MAC0, ENTRY_CAPACITY 1024) -> out0;
c0[1] -> arpt;
arpt[0] -> [1]arpq0;
c0[2] -> Paint(1) -> ip;
c0[3] -> other0 :: Counter -> Discard;

// Interface 1.
c1 :: Classifier(12/0806 20/0001, 12/0806 20/0002, 12/0800, -);
FromDevice($DEV1) -> c1;
out1 :: Queue(200) -> ToDevice($DEV1);
c1[0] -> ar1 :: ARPResponder($IP1 $MAC1) -> out1;
arpq1 :: ARPQuerier($IP1, $MAC1, ENTRY_CAPACITY 1024) -> out1;
c1[1] -> arpt;
arpt[1] -> [1]arpq1;
c1[2] -> Paint(2) -> ip;
c1[3] -> other1 :: Counter -> Discard;

// Local delivery: pings are answered and routed back; the rest is counted.
rt[0] -> ping :: ICMPPingResponder -> rt;
ping[1] -> tohost :: Counter -> Discard;
rt[3] -> bcast :: Counter -> Discard;

// Forwarding path for interface 0.
rt[1] -> DropBroadcasts
       -> cp0 :: PaintTee(1)
       -> gio0 :: IPGWOptions($IP0)
       -> FixIPSrc($IP0)
       -> dt0 :: DecIPTTL
       -> fr0 :: IPFragmenter(1500)
       -> [0]arpq0;
dt0[1] -> ICMPError($IP0, timeexceeded) -> rt;
fr0[1] -> ICMPError($IP0, unreachable, needfrag) -> rt;
gio0[1] -> ICMPError($IP0, parameterproblem) -> rt;
cp0[1] -> ICMPError($IP0, redirect, host) -> rt;

// Forwarding path for interface 1.
rt[2] -> DropBroadcasts
       -> cp1 :: PaintTee(2)
       -> gio1 :: IPGWOptions($IP1)
       -> FixIPSrc($IP1)
       -> dt1 :: DecIPTTL
       -> fr1 :: IPFragmenter(1500)
       -> [0]arpq1;
dt1[1] -> ICMPError($IP1, timeexceeded) -> rt;
fr1[1] -> ICMPError($IP1, unreachable, needfrag) -> rt;
gio1[1] -> ICMPError($IP1, parameterproblem) -> rt;
cp1[1] -> ICMPError($IP1, redirect, host) -> rt;
