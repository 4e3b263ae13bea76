// ipsec.click -- the encrypting side of an IPsec VPN gateway: the RouteBricks IPsec
// application (every forwarded packet encrypted).
//
// Reads Ethernet frames from $IN (by default the shipped sample capture) arriving from
// the gateway's LAN, and sends the IPv4 packets for the remote site through an ESP
// tunnel (ESPEncap: tunnel mode, AES-128-GCM, RFC 4106) to the peer gateway, whose
// frames go to $OUT:
//
//   side    network                          gateway address  next hop
//   LAN     10.0.0.0/8                       10.0.0.1         (arriving only)
//   tunnel  198.18.0.0/15 (the remote site)  198.51.100.1     peer 198.51.100.2
//
// Every IPv4 packet is checked (CheckIPHeader) and looked up by destination; packets
// for the remote site have their TTL decremented (TTL expiry answered with ICMP time
// exceeded, routed back), are encapsulated with the next sequence number of the
// association (SPI 0x1001, key $KEY: an AES-128 key and its 4-byte salt, as `ip xfrm
// state ... aead 'rfc4106(gcm(aes))' $KEY 128` takes it), fragmented to the WAN MTU,
// and leave in an Ethernet frame to the peer. Packets for the gateway itself and
// packets for elsewhere (a full router would route them in the clear) are counted
// and dropped. The peer opens the tunnel with
// ESPDecap(0x1001, $KEY) (docs/ELEMENTS.md, "IPsec"). Handlers worth reading after a
// run: chk.drops, tohost.count, clear.count, esp.seq, esp.drops, tunnel.count.
//
// Run it:    brickroute run conf/ipsec.click -h esp.seq -h tunnel.count
// Measure:   brickroute bench pipeline --app ipsec --size 64
//
// The key below is an example: a real tunnel needs a secret key of its own,
// `KEY=0x$(openssl rand -hex 20)` on the command line, shared with the peer.

define($IN conf/samples/router-sample.pcap, $OUT ipsec-out.pcap,
       $KEY 0x000102030405060708090a0b0c0d0e0fdeadbeef);

src :: FromDump($IN, STOP true);
c :: Classifier(12/0800, -);
chk :: CheckIPHeader;
rt :: RadixIPLookup(10.0.0.1/32 0, 198.51.100.1/32 0,
                    198.18.0.0/15 1,
                    0.0.0.0/0 2);

src -> c;
c[0] -> Strip(14) -> chk -> rt;
c[1] -> nonip :: Counter -> Discard;

rt[0] -> tohost :: Counter -> Discard;
rt[2] -> clear :: Counter -> Discard;

rt[1] -> dt :: DecIPTTL
      -> esp :: ESPEncap(0x1001, $KEY, 198.51.100.1, 198.51.100.2)
      -> fr :: IPFragmenter(1500)
      -> EtherEncap(0x0800, 02:00:00:00:03:01, 02:00:00:00:03:02)
      -> tunnel :: Counter
      -> Queue(1000)
      -> ToDump($OUT);
dt[1] -> ICMPError(10.0.0.1, timeexceeded) -> limit :: RatedSplitter(1000) -> rt;
fr[1] -> toobig :: Counter -> Discard;
