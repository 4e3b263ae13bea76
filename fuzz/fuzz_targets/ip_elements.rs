//! Packets are untrusted bytes: every IP, IPv6, ARP and neighbour discovery element, the
//! header and VLAN elements, the NAT rewriters, the classifiers and the route lookups
//! (multipath routes too) take any frame without panicking.
#![no_main]

use graph::registry::Registry;
use graph::testing::Harness;
use libfuzzer_sys::fuzz_target;
use packet::Packet;

const CHAIN: &[(&str, &str, usize)] = &[
    ("Classifier", "12/0800, 12/0806 20/0001, -", 3),
    (
        "IPClassifier",
        "tcp port 80 or icmp type echo, src net 10/8 and ip ttl < 5, -",
        3,
    ),
    ("CheckIPHeader", "", 2),
    ("GetIPAddress", "16", 1),
    ("DecIPTTL", "", 2),
    ("ICMPError", "10.0.0.1, timeexceeded", 1),
    ("ICMPError", "10.0.0.1, parameterproblem", 1),
    ("IPFragmenter", "68", 2),
    ("DropBroadcasts", "", 2),
    ("PaintTee", "0", 2),
    ("CheckPaint", "0", 2),
    ("IPGWOptions", "10.0.0.1, 10.0.0.2 10.0.0.3", 2),
    ("FixIPSrc", "10.0.0.1", 1),
    ("IPEncap", "4, 10.0.0.1, DST_ANNO, DF true", 1),
    ("UDPIPEncap", "10.0.0.1, 1234, 10.0.0.2, 53", 1),
    ("SetIPChecksum", "", 1),
    ("SetUDPChecksum", "", 2),
    ("SetTCPChecksum", "FIXOFF true", 1),
    (
        "IPPrint",
        "f, CONTENTS hex, ETHER true, ID true, TTL true, TOS true, LENGTH true, SWAP true, OUTFILE /dev/null",
        1,
    ),
    ("IPPrint", "PAYLOAD ascii, MAXLENGTH -1, OUTFILE /dev/null", 1),
    ("EtherEncap", "0x0800, 0:1:2:3:4:5, 6:7:8:9:a:b", 1),
    ("EtherRewrite", "0:1:2:3:4:5, 6:7:8:9:a:b", 1),
    ("CheckIP6Header", "::1, 14", 2),
    ("CheckIP6Header", "", 2),
    ("MarkIP6Header", "14", 1),
    ("DecIP6HLIM", "", 2),
    ("ICMP6Error", "2001:db8::fe, 3, 0", 1),
    ("ICMP6Error", "2001:db8::fe, 4, 0, MTU 60", 1),
    ("GetIP6Address", "24", 1),
    ("LookupIP6Route", "2001:db8::/32 0, ::/0 fe80::1 1", 2),
    // Multipath routes (the default route's members picked by the packet's addresses).
    ("LookupIP6Route", "2001:db8::/32 0, ::/0 fe80::1 1 fe80::2 0 1", 2),
    (
        "RadixIPLookup",
        "10.0.0.0/8 1, 0.0.0.0/0 10.0.0.1 0 weight 3 - 1 10.0.0.2 1",
        2,
    ),
    ("ICMPPingResponder", "", 2),
    ("ICMP6PingResponder", "", 2),
    ("ARPResponder", "10.0.0.0/8 0:1:2:3:4:5", 2),
    ("ARPQuerier", "10.0.0.1/24, 0:0:c0:ae:67:ef, CAPACITY 4", 2),
    (
        "IP6NDAdvertiser",
        "2001:db8::/32 0:1:2:3:4:5, fe80::1 0:1:2:3:4:6",
        2,
    ),
    ("IP6NDSolicitor", "2001:db8::1, 0:0:c0:ae:67:ef, CAPACITY 4", 2),
    ("MarkIPHeader", "14", 1),
    ("StripIPHeader", "", 1),
    ("UnstripIPHeader", "", 1),
    ("StripToNetworkHeader", "", 1),
    ("StoreIPAddress", "src", 2),
    ("StoreIPAddress", "10.0.0.1, dst", 2),
    ("Truncate", "30", 1),
    ("Pad", "", 1),
    ("CheckLength", "60", 2),
    ("SetIPDSCP", "46", 1),
    ("SetIPECN", "CE", 1),
    ("VLANEncap", "5, 3", 1),
    ("VLANDecap", "ANNO true", 1),
    ("CheckUDPHeader", "DETAILS true", 2),
    ("CheckTCPHeader", "", 1),
    ("CheckICMPHeader", "DETAILS true", 2),
    ("Meter", "1000", 2),
    ("BandwidthMeter", "8kbps, 1MBps", 3),
    ("BandwidthRatedSplitter", "1kBps, BURST_BYTES 100", 2),
    ("ICMPPingEncap", "10.0.0.1, 10.0.0.2, IDENTIFIER 3", 1),
    ("SetVLANAnno", "5, 3", 1),
    (
        "EtherVLANEncap",
        "0x0800, 0:1:2:3:4:5, 6:7:8:9:a:b, ANNO, NATIVE_VLAN 1",
        1,
    ),
    (
        "IPRewriter",
        "pattern 1.0.0.1 1024-1027# - - 0 0, MAPPING_CAPACITY 2",
        1,
    ),
    ("TCPRewriter", "keep 0 0", 1),
    ("UDPRewriter", "pattern - 5000-5001? 1.0.0.2 53 0 0", 1),
    ("IPAddrRewriter", "pattern 3.0.0.1-3.0.0.2 - 0 0, GUARANTEE 0", 1),
    ("IPAddrPairRewriter", "pattern 3.0.0.0/30 - 0 0", 1),
    ("ICMPPingRewriter", "pattern 2.0.0.2 - 0-3# 0 0", 1),
];

fuzz_target!(|data: &[u8]| {
    let reg = Registry::with_library();
    for &(class, config, nout) in CHAIN {
        let mut h = Harness::new(reg.get(class).unwrap().as_ref(), config, 1, nout);
        // As received (Ethernet in front), and as an IP packet with its header marked.
        let _ = h.push_bytes(0, data);
        let mut p = Packet::from_slice(data);
        p.set_network_header(
            0,
            data.first()
                .map_or(20, |b| ((b & 0xf) as usize * 4).min(data.len())),
        );
        let _ = h.push(0, vec![p]);
    }
    // ARP replies (untrusted bytes too) into ARPQuerier's input 1, then a poll.
    let mut q = Harness::new(
        reg.get("ARPQuerier").unwrap().as_ref(),
        "10.0.0.1/24, 0:0:c0:ae:67:ef",
        2,
        2,
    );
    let _ = q.push_bytes(1, data);
    let _ = q.run();
    // Neighbor Advertisements likewise into IP6NDSolicitor's input 1.
    let mut nds = Harness::new(
        reg.get("IP6NDSolicitor").unwrap().as_ref(),
        "2001:db8::1, 0:0:c0:ae:67:ef",
        2,
        2,
    );
    let _ = nds.push_bytes(1, data);
    let _ = nds.run();
});
