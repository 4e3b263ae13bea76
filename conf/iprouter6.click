// iprouter6.click -- Click's IP router (Kohler et al., "The Click modular router",
// ACM TOCS 2000, figure 8) for IPv6, between two Ethernet interfaces, with the
// router's own neighbour discovery (RFC 4861): it answers Neighbor Solicitations for
// its addresses (IP6NDAdvertiser) and resolves its next hops (IP6NDSolicitor), so the
// interfaces need no addresses in the kernel.
//
//   interface  network    router address
//   $DEV0      $NET0      $IP0 ($MAC0)
//   $DEV1      $NET1      $IP1 ($MAC1)
//
// Hosts use the router's address on their network as their gateway. The router sends
// no Router Advertisements, so hosts do not learn its link-local address and only
// ever solicit $IP0 and $IP1; those are the addresses it answers for.
//
// Each packet forwarded: header checked (CheckIP6Header), routed by destination
// (LookupIP6Route), hop limit decremented (DecIP6HLIM; at expiry an ICMPv6 time
// exceeded, RFC 4443, from the address of the interface the packet came in on, at most
// 1,000 a second as RFC 4443 2.4 (f) requires), and sent to its next hop's Ethernet
// address (IP6NDSolicitor). The router answers pings to its addresses
// (ICMP6PingResponder, brickroute's own); other packets for it are counted and dropped.
//
// Packets from link-local, multicast, loopback or unspecified sources are not
// forwarded (RFC 4291). Each solicitor keeps at most 1,024 neighbours (Linux's
// gc_thresh3): packets to many addresses of a connected network (a scan, RFC 6583)
// evict the entries answered or solicited longest ago instead of growing the table.
//
// The interfaces are opened with the default METHOD, XDP: with neighbour discovery
// elements in the configuration, brickroute's XDP program hands the router the
// solicitations for, and advertisements to, addresses other than the interfaces' own
// in the kernel (their link-local ones), and with no other IPv6 addresses of the
// kernel's on $DEV0 and $DEV1 every frame for $IP0 and $IP1 is the router's.
// (METHOD PACKET works as well.)
//
// Run it (root, two interfaces without IPv6 addresses but their link-local ones):
//   brickroute run conf/iprouter6.click DEV0=eth1 MAC0=... IP0=... NET0=... \
//       DEV1=eth2 MAC1=... IP1=... NET1=...
// Handlers worth reading: nds0.table, nds1.table, nda0.drops, rt.table, tohost.count,
// badsrc.count, chk.drops.

define($DEV0 r0, $MAC0 02:00:00:00:01:01, $IP0 2001:db8:1::1, $NET0 2001:db8:1::/64,
       $DEV1 r1, $MAC1 02:00:00:00:02:01, $IP1 2001:db8:2::1, $NET1 2001:db8:2::/64);

// The shared IPv6 input path and routing table. Output 0: the router itself; output
// N: interface N-1.
ip :: Strip(14)
   -> chk :: CheckIP6Header
   -> GetIP6Address(24)
   -> rt :: LookupIP6Route($IP0/128 0, $IP1/128 0, $NET0 1, $NET1 2);

// Sources a router must not forward from (RFC 4291): link-local fe80::/10, multicast
// ff00::/8, loopback ::1 and unspecified ::; counted and dropped.
src6 :: Classifier(22/fe80%ffc0, 22/ff, 22/00000000000000000000000000000001,
                   22/00000000000000000000000000000000, -);
badsrc :: Counter -> Discard;
src6[0] -> badsrc;
src6[1] -> badsrc;
src6[2] -> badsrc;
src6[3] -> badsrc;
src6[4] -> ip;

// Neighbor Solicitations (next header 58, hop limit 255, ICMPv6 type 135), Neighbor
// Advertisements (type 136), other IPv6, the rest.
c0 :: Classifier(12/86dd 20/3aff 54/87, 12/86dd 20/3aff 54/88, 12/86dd, -);
FromDevice($DEV0) -> c0;
out0 :: Queue(200) -> ToDevice($DEV0);
c0[0] -> nda0 :: IP6NDAdvertiser($IP0 $MAC0) -> out0;
nds0 :: IP6NDSolicitor($IP0, $MAC0, ENTRY_CAPACITY 1024) -> out0;
c0[1] -> [1]nds0;
c0[2] -> Paint(0) -> src6;
c0[3] -> other0 :: Counter -> Discard;

c1 :: Classifier(12/86dd 20/3aff 54/87, 12/86dd 20/3aff 54/88, 12/86dd, -);
FromDevice($DEV1) -> c1;
out1 :: Queue(200) -> ToDevice($DEV1);
c1[0] -> nda1 :: IP6NDAdvertiser($IP1 $MAC1) -> out1;
nds1 :: IP6NDSolicitor($IP1, $MAC1, ENTRY_CAPACITY 1024) -> out1;
c1[1] -> [1]nds1;
c1[2] -> Paint(1) -> src6;
c1[3] -> other1 :: Counter -> Discard;

// Local delivery: echo requests answered (the reply routed like any other packet),
// the rest counted and dropped.
rt[0] -> ping :: ICMP6PingResponder -> rt;
ping[1] -> tohost :: Counter -> Discard;

// Forwarding: hop limit, then the next hop's Ethernet address.
rt[1] -> dh0 :: DecIP6HLIM -> [0]nds0;
rt[2] -> dh1 :: DecIP6HLIM -> [0]nds1;

// Hop limit exceeded: the error comes from the address of the interface the packet
// arrived by (its paint), and is routed like any other packet.
expired :: PaintSwitch;
dh0[1] -> expired;
dh1[1] -> expired;
expired[0] -> ICMP6Error($IP0, 3, 0) -> RatedSplitter(1000) -> rt;
expired[1] -> ICMP6Error($IP1, 3, 0) -> RatedSplitter(1000) -> rt;
