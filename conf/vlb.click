// vlb.click -- the input side of server 0 of a four-server mesh that acts as one router
// (RouteBricks' RB4): every packet is looked up once, here, and sent across the mesh by
// Direct VLB (VLBSwitch) to the server whose external port its route leaves by, straight
// or through another server.
//
// Reads Ethernet frames from $IN (by default the shipped sample capture) arriving on
// this server's external port, and writes what it sends on each of its ports to
// $OUT0 (its own external port, for traffic that leaves by this server) and $OUT1 to
// $OUT3 (its internal links to servers 1 to 3):
//
//   routes            leave by   frames written to
//   10.0.0.0/8        server 0   $OUT0, to the external next hop 02:00:00:00:00:02
//   198.18.0.0/16     server 1   the link chosen for them, addressed to 02:b5:00:00:00:01
//   198.19.0.0/16     server 2   ...                                     02:b5:00:00:00:02
//   0.0.0.0/0         server 3   ...                                     02:b5:00:00:00:03
//
// Each IPv4 packet is checked (CheckIPHeader) and its TTL decremented (expired ones
// are counted and dropped). The destination Ethernet address names the output
// server, so the intermediate and output servers switch the frame by it without a
// second lookup (crates/cluster/src/mesh.rs writes a whole server's configuration,
// internal links included). $RATE is this server's external rate R: up to R/4 a
// second goes straight to each server; the rest is balanced over the other two, a
// flow's packets keeping one path while they come within 100 ms of each other.
// Handlers worth reading after a run: vlb.local, vlb.direct, vlb.balanced,
// vlb.flowlet_hits, and out0/cnt.count to out3/cnt.count.
//
// Run it:    brickroute run conf/vlb.click -h vlb.direct -h vlb.balanced
// Measure:   brickroute bench pipeline --app vlb --size 64
// A whole mesh in namespaces: brickroute cluster demo

define($IN conf/samples/router-sample.pcap, $OUT0 vlb-out0.pcap, $OUT1 vlb-out1.pcap,
       $OUT2 vlb-out2.pcap, $OUT3 vlb-out3.pcap, $RATE 10Gbps);

elementclass ToServer { $src, $dst |
    input -> EtherEncap(0x0800, $src, $dst) -> output;
}

elementclass Port { $file |
    input -> cnt :: Counter -> Queue(1000) -> ToDump($file);
}

src :: FromDump($IN, STOP true);
c :: Classifier(12/0800, -);
rt :: RadixIPLookup(10.0.0.0/8 0, 198.18.0.0/16 1, 198.19.0.0/16 2, 0.0.0.0/0 3);
vlb :: VLBSwitch(0, RATE $RATE);

src -> c;
c[0] -> Strip(14) -> chk :: CheckIPHeader -> dt :: DecIPTTL -> rt;
c[1] -> nonip :: Counter -> Discard;
dt[1] -> expired :: Counter -> Discard;

rt[0] -> ToServer(02:00:00:00:00:01, 02:00:00:00:00:02) -> [0]vlb;
rt[1] -> ToServer(02:b5:00:00:00:00, 02:b5:00:00:00:01) -> [1]vlb;
rt[2] -> ToServer(02:b5:00:00:00:00, 02:b5:00:00:00:02) -> [2]vlb;
rt[3] -> ToServer(02:b5:00:00:00:00, 02:b5:00:00:00:03) -> [3]vlb;

vlb[0] -> out0 :: Port($OUT0);
vlb[1] -> out1 :: Port($OUT1);
vlb[2] -> out2 :: Port($OUT2);
vlb[3] -> out3 :: Port($OUT3);
