// natpath.click -- the translating side of a NAT gateway (NAPT, "masquerading"):
// every TCP and UDP flow and every ping from the inside leaves with the gateway's
// public address, as conf/nat.click does between two interfaces, here on a capture so
// that it runs anywhere and measures as `bench pipeline --app nat`.
//
// Reads Ethernet frames from $IN (by default the shipped sample capture) arriving from
// the inside network, and sends the IPv4 packets for elsewhere to the ISP's router,
// their frames to $OUT:
//
//   side     network     gateway address  next hop
//   inside   10.0.0.0/8  10.0.0.1         (arriving only)
//   outside  any         $PUBLIC          02:00:00:00:03:02
//
// Every IPv4 packet is checked (CheckIPHeader) and looked up by destination; packets
// for elsewhere have their TTL decremented, then TCP and UDP go through IPRewriter
// (source address $PUBLIC, source port kept where it is free, else one of
// 1024-65535) and pings through ICMPPingRewriter (the echo identifier likewise);
// other protocols are counted (untranslated) and dropped rather than leave with an
// inside address. Packets for the gateway itself, and packets whose TTL runs out,
// are counted and dropped. Handlers worth reading after a run: rw.tcp_table,
// rw.udp_table, pr.table, translated.count, untranslated.count, chk.drops.
//
// Run it:    brickroute run conf/natpath.click -h rw.udp_table -h translated.count
// Measure:   brickroute bench pipeline --app nat --size 64

define($IN conf/samples/router-sample.pcap, $OUT natpath-out.pcap, $PUBLIC 192.0.2.1);

src :: FromDump($IN, STOP true);
c :: Classifier(12/0800, -);
chk :: CheckIPHeader;
rt :: RadixIPLookup(10.0.0.1/32 0, $PUBLIC/32 0,
                    0.0.0.0/0 1);

src -> c;
c[0] -> Strip(14) -> chk -> rt;
c[1] -> nonip :: Counter -> Discard;

rt[0] -> tohost :: Counter -> Discard;

rt[1] -> dt :: DecIPTTL
      -> proto :: IPClassifier(tcp or udp, icmp type echo, -);
dt[1] -> expired :: Counter -> Discard;

// Output 0: translated, to the outside; output 1 would carry replies back in (this
// path sees none).
proto[0] -> rw :: IPRewriter(pattern $PUBLIC 1024-65535 - - 0 1);
proto[1] -> pr :: ICMPPingRewriter(pattern $PUBLIC 0-65535 - - 0 1);
proto[2] -> untranslated :: Counter -> Discard;
rw[1] -> replies :: Counter -> Discard;
pr[1] -> replies;

out :: EtherEncap(0x0800, 02:00:00:00:03:01, 02:00:00:00:03:02)
    -> translated :: Counter
    -> Queue(1000)
    -> ToDump($OUT);
rw[0] -> out;
pr[0] -> out;
