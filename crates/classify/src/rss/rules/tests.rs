use super::*;

/// Ethernet + IPv4 (`proto`, flags+offset `frag`) + 8 bytes of transport header with
/// ports `sport` and `dport`.
fn v4(proto: u8, frag: u16, src: [u8; 4], dst: [u8; 4], sport: u16, dport: u16) -> Vec<u8> {
    let mut f = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2, 0x08, 0x00];
    f.extend_from_slice(&[0x45, 0, 0, 28, 0, 0]);
    f.extend_from_slice(&frag.to_be_bytes());
    f.extend_from_slice(&[64, proto, 0, 0]);
    f.extend_from_slice(&src);
    f.extend_from_slice(&dst);
    f.extend_from_slice(&sport.to_be_bytes());
    f.extend_from_slice(&dport.to_be_bytes());
    f.extend_from_slice(&[0, 8, 0, 0]);
    f
}

/// Ethernet + IPv6 from 2001:db8::`s` to 2001:db8:1::`d` carrying `next`, then `rest`.
fn v6(next: u8, s: u8, d: u8, rest: &[u8]) -> Vec<u8> {
    let mut f = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2, 0x86, 0xdd, 0x60, 0, 0, 0];
    f.extend_from_slice(&(rest.len() as u16).to_be_bytes());
    f.extend_from_slice(&[next, 64]);
    f.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, s]);
    f.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, d]);
    f.extend_from_slice(rest);
    f
}

#[test]
fn rules_read_back_as_written() {
    for text in [
        "tcp dport 179 queue 0",
        "src 10.0.0.0/8 queue 2",
        "ip6 udp sport 53 queue 1",
        "proto 47 dst 2001:db8::/32 queue 3",
        "ip queue 1",
        "queue 0",
    ] {
        let r = FlowRule::parse(text).unwrap();
        assert_eq!(r.to_string(), text);
    }
    // Host bits are cleared; a bare address is a host prefix.
    assert_eq!(
        FlowRule::parse("dst 10.1.2.3/16 src 192.0.2.1 queue 1")
            .unwrap()
            .to_string(),
        "src 192.0.2.1/32 dst 10.1.0.0/16 queue 1"
    );
    let list = parse_rules("tcp dport 22 queue 1; udp queue 2\n\n ip6 queue 3 ").unwrap();
    assert_eq!(
        format_rules(&list),
        "tcp dport 22 queue 1\nudp queue 2\nip6 queue 3\n"
    );
    assert_eq!(parse_rules(&format_rules(&list)).unwrap(), list);
    assert_eq!(parse_rules(" ").unwrap(), vec![]);
}

#[test]
fn bad_rules_say_why() {
    for (text, why) in [
        ("tcp dport 179", "a rule ends with 'queue Q', the queue its frames go to"),
        ("src 10.0.0.0/33 queue 1", "prefix length '33' is not 0 to 32"),
        ("src ten queue 1", "'ten' is not an IPv4 or IPv6 address"),
        ("src 10.0.0.0/8 dst 2001:db8::/32 queue 1", "a rule is for IPv4 or IPv6, not both"),
        ("ip6 src 10.0.0.0/8 queue 1", "a rule is for IPv4 or IPv6, not both"),
        ("tcp udp queue 1", "protocol given twice"),
        ("proto 47 dport 80 queue 1", "ports are for tcp and udp"),
        ("dport 70000 queue 1", "dport '70000' is not a port (0 to 65535)"),
        ("queue", "'queue' needs a value"),
        ("queue 1 queue 2", "queue given twice"),
        (
            "tos 4 queue 1",
            "'tos' is not part of a rule ([ip|ip6] [tcp|udp|proto N] [src PREFIX] [dst PREFIX] [sport N] [dport N] queue Q)",
        ),
    ] {
        assert_eq!(FlowRule::parse(text).unwrap_err(), why, "{}", text);
    }
    assert_eq!(
        parse_rules("udp queue 1; tcp dport x queue 2").unwrap_err(),
        "rule 2: dport 'x' is not a port (0 to 65535)"
    );
    let many = vec!["queue 0"; 65].join(";");
    assert_eq!(
        parse_rules(&many).unwrap_err(),
        "65 rules; a port takes at most 64"
    );
}

#[test]
fn the_first_matching_rule_decides() {
    let rules = parse_rules(
        "tcp dport 179 queue 3
         dst 198.19.1.0/24 queue 1
         ip6 udp queue 2
         src 2001:db8::/32 queue 0",
    )
    .unwrap();
    let q = |f: &[u8]| rule_queue(&rules, f);
    // BGP to anywhere: rule 1, ahead of rule 2.
    assert_eq!(q(&v4(6, 0, [10, 0, 0, 1], [198, 19, 1, 9], 40000, 179)), Some(3));
    assert_eq!(q(&v4(17, 0, [10, 0, 0, 1], [198, 19, 1, 9], 40000, 179)), Some(1));
    assert_eq!(q(&v4(17, 0, [10, 0, 0, 1], [198, 19, 2, 9], 40000, 179)), None);
    // A fragment has no ports: no port rule matches it, its address still does.
    assert_eq!(
        q(&v4(6, 0x2000, [10, 0, 0, 1], [198, 19, 2, 9], 40000, 179)),
        None
    );
    assert_eq!(
        q(&v4(6, 0x2000, [10, 0, 0, 1], [198, 19, 1, 9], 40000, 179)),
        Some(1)
    );
    // IPv6 UDP, then any IPv6 from 2001:db8::/32 (ICMPv6 here).
    assert_eq!(q(&v6(17, 1, 2, &[0, 53, 0, 53, 0, 8, 0, 0])), Some(2));
    assert_eq!(q(&v6(58, 1, 2, &[128, 0, 0, 0])), Some(0));
    // Not IP.
    let mut arp = vec![0xff; 12];
    arp.extend_from_slice(&[0x08, 0x06, 0, 1]);
    assert_eq!(q(&arp), None);
    assert_eq!(rule_queue(&[], &v6(58, 1, 2, &[])), None);
}

#[test]
fn prefixes_of_every_length_match_their_addresses_only() {
    for len in 0..=32u8 {
        let r = FlowRule::parse(&format!("dst 198.19.255.255/{} queue 1", len)).unwrap();
        let inside = v4(1, 0, [1, 1, 1, 1], [198, 19, 255, 255], 0, 0);
        assert_eq!(rule_queue(std::slice::from_ref(&r), &inside), Some(1), "/{}", len);
        if len > 0 {
            // Flip the last bit the prefix covers.
            let mut d = u32::from_be_bytes([198, 19, 255, 255]);
            d ^= 1 << (32 - u32::from(len));
            let outside = v4(1, 0, [1, 1, 1, 1], d.to_be_bytes(), 0, 0);
            assert_eq!(rule_queue(std::slice::from_ref(&r), &outside), None, "/{}", len);
        }
    }
}
