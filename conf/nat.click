// nat.click -- a NAT gateway: conf/iprouter.click (Click's IP router, with its own ARP)
// whose interface 1 faces the outside, where every connection from the inside network
// leaves with the router's outside address ($IP1) and a port of its choosing, and
// where nothing from the outside reaches the inside except the replies of those
// connections (and ICMP errors about them).
//
//   interface  network        router address
//   $DEV0      $NET0          $IP0 ($MAC0)   inside
//   $DEV1      $NET1          $IP1 ($MAC1)   outside
//
// The translation (source NAT, "masquerading"):
// - TCP and UDP from the inside: IPRewriter gives each flow $IP1 and a port from
//   1024-65535; the flow's replies, addressed to $IP1 and that port, are given back the
//   inside host's address and port. Mappings end after Click's timeouts (a day for an
//   established TCP connection, 4 minutes after its FINs, 5 minutes for UDP).
// - Pings from the inside: ICMPPingRewriter does the same with the echo identifier
//   (kept where it is free, so two hosts pinging one destination with the same
//   identifier, as Windows does, get two).
// - ICMP errors about translated flows, either way (a port unreachable from the
//   outside, an inside host's port unreachable, the router's own time exceeded):
//   ICMPRewriter rewrites the packet they quote and their destination to match, and
//   an inside host's error leaves with the router's address.
// - From the outside, only packets matching a mapping pass to the inside; the rest
//   addressed to the inside networks are counted (blocked) and dropped. The router
//   answers pings to both of its addresses.
// Translation happens on the way out after the TTL is decremented, so errors the router
// sends about the inside hosts' packets (time exceeded) quote the packets as sent.
//
// Paint marks where a packet comes from: 1 the inside, 2 the outside, 3 translated by
// the NAT (0: made by the router).
//
// Run it (root, two interfaces without IP addresses):
//   brickroute run conf/nat.click DEV0=eth1 MAC0=... IP0=... NET0=... BCAST0=... \
//       DEV1=eth2 MAC1=... IP1=... NET1=... BCAST1=...
// Handlers worth reading: rw.udp_table, rw.mapping_failures, pr.table, blocked.count,
// untranslated.count, arpq0.table, arpq1.table.

define($DEV0 r0, $MAC0 02:00:00:00:01:01, $IP0 10.0.1.1, $NET0 10.0.1.0/24,
       $BCAST0 10.0.1.255,
       $DEV1 r1, $MAC1 02:00:00:00:02:01, $IP1 10.0.2.1, $NET1 10.0.2.0/24,
       $BCAST1 10.0.2.255);

// The translators. Input 0: packets leaving by the outside interface (a new flow gets
// a mapping); input 1: packets for $IP1 from the outside (only replies pass). Output 0
// goes out; output 1 carries replies, addressed to the inside again.
rw :: IPRewriter(pattern $IP1 1024-65535 - - 0 1, drop);
pr :: ICMPPingRewriter(pattern $IP1 0-65535 - - 0 1, drop);

// The shared IP input path and routing table, as in iprouter.click. Output 0: the
// router's addresses; output 1: interface 0; output 2: interface 1; output 3: the
// networks' broadcast addresses.
ip :: Strip(14)
   -> chk :: CheckIPHeader(BADSRC $BCAST0 $BCAST1 0.0.0.0 255.255.255.255,
                           GOODDST $IP0 $IP1)
   -> rt :: StaticIPLookup($IP0/32 0, $IP1/32 0, $NET0 1, $NET1 2,
                           $BCAST0/32 3, $BCAST1/32 3);

arpt :: Tee(2);

// Interface 0, inside.
c0 :: Classifier(12/0806 20/0001, 12/0806 20/0002, 12/0800, -);
FromDevice($DEV0) -> c0;
out0 :: Queue(200) -> ToDevice($DEV0);
c0[0] -> ar0 :: ARPResponder($IP0 $MAC0) -> out0;
arpq0 :: ARPQuerier($IP0, $MAC0, ENTRY_CAPACITY 1024) -> out0;
c0[1] -> arpt;
arpt[0] -> [1]arpq0;
c0[2] -> Paint(1) -> ip;
c0[3] -> other0 :: Counter -> Discard;

// Interface 1, outside.
c1 :: Classifier(12/0806 20/0001, 12/0806 20/0002, 12/0800, -);
FromDevice($DEV1) -> c1;
out1 :: Queue(200) -> ToDevice($DEV1);
c1[0] -> ar1 :: ARPResponder($IP1 $MAC1) -> out1;
arpq1 :: ARPQuerier($IP1, $MAC1, ENTRY_CAPACITY 1024) -> out1;
c1[1] -> arpt;
arpt[1] -> [1]arpq1;
c1[2] -> Paint(2) -> ip;
c1[3] -> other1 :: Counter -> Discard;

// Local delivery. Replies to translated flows are addressed to $IP1: the translators
// look them up (input 1), and what they rewrite is routed again, painted 3.
rt[0] -> local :: IPClassifier(dst host $IP1 and (tcp or udp),
                               dst host $IP1 and icmp type echo-reply,
                               icmp type echo,
                               dst host $IP1 and icmp,
                               -);
local[0] -> [1]rw;
local[1] -> [1]pr;
local[2] -> ping :: ICMPPingResponder -> rt;
ping[1] -> tohost :: Counter -> Discard;
local[3] -> icmpin :: ICMPRewriter(rw pr) -> translated :: Paint(3) -> rt;
icmpin[1] -> tohost;
local[4] -> tohost;
rw[1] -> translated;
pr[1] -> translated;
rt[3] -> bcast :: Counter -> Discard;

// Forwarding path for interface 0 (inside): from the outside, only what the NAT
// translated passes.
rt[1] -> in0 :: PaintSwitch;
in0[0] -> fwd0 :: DropBroadcasts;
in0[1] -> fwd0;
in0[2] -> blocked :: Counter -> Discard;
in0[3] -> fwd0;
fwd0 -> cp0 :: PaintTee(1)
     -> gio0 :: IPGWOptions($IP0)
     -> FixIPSrc($IP0)
     -> dt0 :: DecIPTTL
     -> fr0 :: IPFragmenter(1500)
     -> [0]arpq0;
dt0[1] -> ICMPError($IP0, timeexceeded) -> rt;
fr0[1] -> ICMPError($IP0, unreachable, needfrag) -> rt;
gio0[1] -> ICMPError($IP0, parameterproblem) -> rt;
cp0[1] -> ICMPError($IP0, redirect, host) -> rt;

// Forwarding path for interface 1 (outside): packets from the inside are translated
// once their TTL is decremented; protocols the NAT cannot translate are dropped rather
// than leaving with an inside address.
rt[2] -> DropBroadcasts
      -> cp1 :: PaintTee(2)
      -> gio1 :: IPGWOptions($IP1)
      -> FixIPSrc($IP1)
      -> dt1 :: DecIPTTL
      -> out :: PaintSwitch;
// The router's own packets: its ICMP errors about translated replies (time exceeded
// on the way in) quote them as translated, so their quotes are turned back to what
// the outside sent.
out[0] -> own :: ICMPRewriter(rw pr) -> fr1 :: IPFragmenter(1500) -> [0]arpq1;
own[1] -> fr1;
out[1] -> nat :: IPClassifier(tcp or udp, icmp type echo, icmp, -);
out[2] -> fr1;
out[3] -> fr1;
nat[0] -> [0]rw;
nat[1] -> [0]pr;
// Inside hosts' ICMP errors about translated flows: the quote turned back, and the
// error's own source made the router's (ICMPRewriter leaves it, as Click's does).
nat[2] -> icmpout :: ICMPRewriter(rw pr) -> StoreIPAddress($IP1, src) -> fr1;
icmpout[1] -> untranslated :: Counter -> Discard;
nat[3] -> untranslated;
rw[0] -> fr1;
pr[0] -> fr1;
dt1[1] -> ICMPError($IP1, timeexceeded) -> rt;
fr1[1] -> ICMPError($IP1, unreachable, needfrag) -> rt;
gio1[1] -> ICMPError($IP1, parameterproblem) -> rt;
cp1[1] -> ICMPError($IP1, redirect, host) -> rt;
