use super::*;
use crate::testing::{build_error, Harness};
use packet::Packet;

/// A 20-byte IPv4 header (UDP, 10.0.0.99 -> `dst`) with the destination annotation set
/// to `anno`.
fn pkt(dst: [u8; 4], anno: [u8; 4]) -> Packet {
    let mut p = Packet::from_slice(&[
        0x45, 0x00, 0x00, 0x14, 0x00, 0x01, 0x00, 0x00, 0x40, 0x11, 0x00, 0x00, 10, 0, 0, 99, dst[0], dst[1],
        dst[2], dst[3],
    ]);
    p.anno_mut().set_dst_ip(anno);
    p
}

fn annos(out: &[Packet]) -> Vec<[u8; 4]> {
    out.iter().map(|p| p.anno().dst_ip()).collect()
}

const CONFIG: &str = "10.0.0.0/8 1, 10.1.0.0/16 10.1.0.1 2, 10.1.2.128/25 3, 0.0.0.0/0 18.26.4.1 0, \
                      10.1.2.200/32 1";

#[test]
fn routes_by_longest_prefix_and_sets_gateway() {
    for class in [
        &IpLookupClass::RADIX,
        &IpLookupClass::DIRECT,
        &IpLookupClass::STATIC,
        &IpLookupClass::LINEAR,
    ] {
        let mut h = Harness::new(class, CONFIG, 1, 4);
        let out = h.push(
            0,
            vec![
                pkt([10, 9, 9, 9], [10, 9, 9, 9]),
                pkt([10, 1, 7, 7], [10, 1, 7, 7]),
                pkt([10, 1, 2, 130], [10, 1, 2, 130]),
                pkt([8, 8, 8, 8], [8, 8, 8, 8]),
                pkt([10, 1, 2, 200], [10, 1, 2, 200]),
                // The annotation, not the header, is the key.
                pkt([10, 9, 9, 9], [10, 1, 2, 129]),
            ],
        );
        assert_eq!(annos(&out[0]), vec![[18, 26, 4, 1]], "{}", class.name());
        assert_eq!(annos(&out[1]), vec![[10, 9, 9, 9], [10, 1, 2, 200]]);
        assert_eq!(annos(&out[2]), vec![[10, 1, 0, 1]]);
        assert_eq!(annos(&out[3]), vec![[10, 1, 2, 130], [10, 1, 2, 129]]);
        // Packet bytes are untouched.
        assert_eq!(
            out[2][0].data(),
            &[
                0x45, 0x00, 0x00, 0x14, 0x00, 0x01, 0x00, 0x00, 0x40, 0x11, 0x00, 0x00, 10, 0, 0, 99, 10, 1,
                7, 7
            ]
        );
    }
}

#[test]
fn packets_without_route_are_dropped() {
    let mut h = Harness::new(&IpLookupClass::RADIX, "10.0.0.0/8 0, 192.168.0.0/16 1", 1, 2);
    let out = h.push(
        0,
        vec![
            pkt([11, 0, 0, 1], [11, 0, 0, 1]),
            pkt([10, 0, 0, 1], [10, 0, 0, 1]),
            pkt([0, 0, 0, 0], [0, 0, 0, 0]),
        ],
    );
    assert_eq!(annos(&out[0]), vec![[10, 0, 0, 1]]);
    assert!(out[1].is_empty());
    let mut h = Harness::new(&IpLookupClass::DIRECT, "", 1, 1);
    let out = h.push(0, vec![pkt([1, 2, 3, 4], [1, 2, 3, 4])]);
    assert!(out[0].is_empty());
}

#[test]
fn configuration_errors() {
    assert_eq!(
        build_error(&IpLookupClass::RADIX, "10.0.0.0/8 0, 10.0.0.0/8 5", 1, 2),
        "e :: RadixIPLookup: argument 2 bad OUTPUT"
    );
    assert_eq!(
        build_error(&IpLookupClass::LINEAR, "10.0.0.0/8", 1, 2),
        "e :: LinearIPLookup: argument 1 should be 'ADDR/MASK [GATEWAY] OUTPUT'"
    );
    assert_eq!(
        build_error(&IpLookupClass::DIRECT, "10.0.0.0/8 1.2.3.4 0 extra", 1, 2),
        "e :: DirectIPLookup: argument 1 should be 'ADDR/MASK [GATEWAY] OUTPUT'"
    );
    assert_eq!(
        build_error(&IpLookupClass::STATIC, "10.0.0.0/255.0.255.0 0", 1, 2),
        "e :: StaticIPLookup: argument 1 should be 'ADDR/MASK [GATEWAY] OUTPUT'"
    );
    assert_eq!(
        build_error(&IpLookupClass::RADIX, "10.0.0.0/8 -1", 1, 2),
        "e :: RadixIPLookup: argument 1 bad OUTPUT"
    );
    assert_eq!(
        build_error(&IpLookupClass::RADIX, "10.0.0.0/8 1.2.3.4", 1, 2),
        "e :: RadixIPLookup: argument 1 should be 'ADDR/MASK [GATEWAY] OUTPUT'"
    );
    // Mask forms, `-` gateway, host bits, and a duplicate prefix (the first one wins).
    let h = Harness::new(
        &IpLookupClass::LINEAR,
        "10.1.2.3/255.255.0.0 - 1, 10/8 0, 1.2.3.4 0.0.0.0 1, 10.1.0.0/16 0",
        1,
        2,
    );
    assert_eq!(
        h.read("table"),
        "10.1.0.0/16 - 1\n10.0.0.0/8 - 0\n1.2.3.4/32 - 1\n"
    );
}

#[test]
fn table_formats_and_orders() {
    let cfg = "10.0.0.0/8 1, 10.1.0.0/16 10.1.0.1 2, 192.168.100.100/32 172.16.0.1 0";
    let h = Harness::new(&IpLookupClass::RADIX, cfg, 1, 3);
    assert_eq!(
        h.read("table"),
        "10.0.0.0/8\t\t-\t\t1\n10.1.0.0/16\t\t10.1.0.1\t2\n192.168.100.100/32\t172.16.0.1\t0\n"
    );
    let h = Harness::new(&IpLookupClass::LINEAR, cfg, 1, 3);
    assert_eq!(
        h.read("table"),
        "10.0.0.0/8 - 1\n10.1.0.0/16 10.1.0.1 2\n192.168.100.100/32 172.16.0.1 0\n"
    );
    let h = Harness::new(&IpLookupClass::STATIC, cfg, 1, 3);
    assert_eq!(
        h.read("table"),
        "10.0.0.0/8 - 1\n10.1.0.0/16 10.1.0.1 2\n192.168.100.100/32 172.16.0.1 0\n"
    );
    // DirectIPLookup: Click's hash-bucket order (buckets 0, 7443, 8316, 17066, 24727,
    // 40488 for these prefixes), gateway 0.0.0.0 when there is none.
    let h = Harness::new(
        &IpLookupClass::DIRECT,
        "10.1.0.0/16 2, 192.168.1.0/24 1, 10.0.0.0/8 1.1.1.1 1, 192.168.1.7/32 0, \
         172.16.0.0/12 0, 0.0.0.0/0 9.9.9.9 2",
        1,
        3,
    );
    assert_eq!(
        h.read("table"),
        "0.0.0.0/0\t\t9.9.9.9\t\t2\n\
         172.16.0.0/12\t\t0.0.0.0\t\t0\n\
         192.168.1.7/32\t\t0.0.0.0\t\t0\n\
         10.0.0.0/8\t\t1.1.1.1\t\t1\n\
         192.168.1.0/24\t\t0.0.0.0\t\t1\n\
         10.1.0.0/16\t\t0.0.0.0\t\t2\n"
    );
}

#[test]
fn radix_and_linear_reuse_slots_as_click_does() {
    let h = Harness::new(
        &IpLookupClass::RADIX,
        "1.0.0.0/8 0, 2.0.0.0/8 0, 3.0.0.0/8 0",
        1,
        2,
    );
    h.write("remove", "2.0.0.0/8").unwrap();
    h.write("add", "4.0.0.0/8 1").unwrap();
    assert_eq!(
        h.read("table"),
        "1.0.0.0/8\t\t-\t\t0\n4.0.0.0/8\t\t-\t\t1\n3.0.0.0/8\t\t-\t\t0\n"
    );
    // `set` stores the new route in a fresh slot and frees the old one.
    h.write("set", "1.0.0.0/8 1").unwrap();
    assert_eq!(
        h.read("table"),
        "4.0.0.0/8\t\t-\t\t1\n3.0.0.0/8\t\t-\t\t0\n1.0.0.0/8\t\t-\t\t1\n"
    );
    h.write("add", "5.0.0.0/8 0").unwrap();
    assert_eq!(
        h.read("table"),
        "5.0.0.0/8\t\t-\t\t0\n4.0.0.0/8\t\t-\t\t1\n3.0.0.0/8\t\t-\t\t0\n1.0.0.0/8\t\t-\t\t1\n"
    );

    let h = Harness::new(
        &IpLookupClass::LINEAR,
        "1.0.0.0/8 0, 2.0.0.0/8 0, 3.0.0.0/8 0",
        1,
        2,
    );
    h.write("remove", "2.0.0.0/8").unwrap();
    h.write("add", "4.0.0.0/8 1").unwrap();
    h.write("set", "1.0.0.0/8 1").unwrap();
    assert_eq!(h.read("table"), "1.0.0.0/8 - 1\n4.0.0.0/8 - 1\n3.0.0.0/8 - 0\n");
}

#[test]
fn handler_updates_reach_every_worker() {
    let h = Harness::new(&IpLookupClass::RADIX, "10.0.0.0/8 0", 1, 3);
    let mut w1 = h.spec.instantiate(WorkerInfo { index: 1, count: 2 });
    let mut w0 = Harness::new(&IpLookupClass::RADIX, "", 1, 3);
    w0.spec = h.spec.clone();
    w0.element = h.spec.instantiate(WorkerInfo { index: 0, count: 2 });

    h.write("add", "10.1.0.0/16 10.1.0.254 2").unwrap();
    let out = w0.push(0, vec![pkt([10, 1, 1, 1], [10, 1, 1, 1])]);
    assert_eq!(annos(&out[2]), vec![[10, 1, 0, 254]]);

    let mut outs: Vec<PacketBatch> = (0..3).map(|_| PacketBatch::new()).collect();
    let stop = StopFlag::new();
    let mut cx = Context::new(WorkerInfo { index: 1, count: 2 }, &stop);
    let mut b: PacketBatch = vec![
        pkt([10, 1, 1, 1], [10, 1, 1, 1]),
        pkt([10, 2, 0, 0], [10, 2, 0, 0]),
    ]
    .into_iter()
    .collect();
    w1.push(0, &mut b, &mut Outputs::new(&mut outs), &mut cx);
    assert_eq!(outs[2].len(), 1);
    assert_eq!(outs[0].len(), 1);

    h.write("remove", "10.1.0.0/16").unwrap();
    let out = w0.push(0, vec![pkt([10, 1, 1, 1], [10, 1, 1, 1])]);
    assert_eq!(annos(&out[0]), vec![[10, 1, 1, 1]]);
}

#[test]
fn add_set_remove_texts() {
    let h = Harness::new(&IpLookupClass::RADIX, "10.0.0.0/8 1.2.3.4 1", 1, 2);
    assert_eq!(
        h.write("add", "10.0.0.0/8 0"),
        Err("conflict with existing route '10.0.0.0/8 1.2.3.4 1'".to_string())
    );
    assert_eq!(
        h.write("add", "10.0.0.0/8"),
        Err("expected 'ADDR/MASK [GATEWAY] OUTPUT'".to_string())
    );
    assert_eq!(h.write("add", "10.0.0.0/8 2"), Err("bad OUTPUT".to_string()));
    assert_eq!(h.write("set", "10.0.0.0/8 -1"), Err("bad OUTPUT".to_string()));
    assert_eq!(
        h.write("set", "bogus 1"),
        Err("expected 'ADDR/MASK [GATEWAY] OUTPUT'".to_string())
    );
    assert_eq!(h.write("remove", "10.0.0.0/8 2"), Err("bad OUTPUT".to_string()));
    assert_eq!(
        h.write("remove", "10.0.0.0/8 1.2.3.4 0 x"),
        Err("expected 'ADDR/MASK [GATEWAY OUTPUT]'".to_string())
    );
    assert_eq!(
        h.write("remove", "10.0.0.0/8 0"),
        Err("route '10.0.0.0/8 - 0' not found".to_string())
    );
    assert_eq!(
        h.write("remove", "11.0.0.0/8"),
        Err("route '11.0.0.0/8 - -1' not found".to_string())
    );
    h.write("set", "10.0.0.0/8 0\n").unwrap();
    assert_eq!(h.read("table"), "10.0.0.0/8\t\t-\t\t0\n");
    h.write("remove", "10.0.0.0/8 - 0").unwrap();
    assert_eq!(h.read("table"), "");
    h.write("add", "0/0 1").unwrap();
    h.write("remove", "0.0.0.0/0 1.1.1.1").unwrap();
    assert_eq!(h.read("table"), "");

    // DirectIPLookup: `set` replaces (as in Click since its table honours the
    // replace flag), removal by prefix alone, Click's own not-found text.
    let h = Harness::new(&IpLookupClass::DIRECT, "10.0.0.0/8 1.2.3.4 1", 1, 2);
    h.write("set", "10.0.0.0/8 0").unwrap();
    assert_eq!(h.read("table"), "10.0.0.0/8\t\t0.0.0.0\t\t0\n");
    assert_eq!(
        h.write("remove", "11.0.0.0/8"),
        Err("Entry not found".to_string())
    );
    h.write("remove", "10.0.0.0/8 0").unwrap();
    assert_eq!(h.read("table"), "");
    h.write("add", "10.0.0.0/8 1").unwrap();
    h.write("flush", "").unwrap();
    assert_eq!(h.read("table"), "");
    let mut h = h;
    assert!(h.push(0, vec![pkt([10, 0, 0, 1], [10, 0, 0, 1])])[1].is_empty());

    // StaticIPLookup refuses updates: it has no write handlers.
    let h = Harness::new(&IpLookupClass::STATIC, "10.0.0.0/8 0", 1, 1);
    for name in ["add", "set", "remove", "ctrl", "flush"] {
        assert!(h.spec.write_handler(name, "10.0.0.0/8 0").is_none());
    }
    assert_eq!(
        h.spec.handlers(),
        vec![HandlerInfo::read("table"), HandlerInfo::read("lookup")]
    );
}

#[test]
fn ctrl_is_all_or_nothing() {
    let h = Harness::new(&IpLookupClass::RADIX, "10.0.0.0/8 0, 20.0.0.0/8 0", 1, 2);
    h.write(
        "ctrl",
        "add 30.0.0.0/8 1\n// a comment\n\nset 10.0.0.0/8 1.1.1.1 1\nremove 20.0.0.0/8\n",
    )
    .unwrap();
    assert_eq!(
        h.read("table"),
        "30.0.0.0/8\t\t-\t\t1\n10.0.0.0/8\t\t1.1.1.1\t\t1\n"
    );
    assert_eq!(h.spec.read_handler("table").unwrap(), h.read("table"));
    let before = h.read("table");
    assert_eq!(
        h.write(
            "ctrl",
            "remove 30.0.0.0/8\nset 10.0.0.0/8 0\nadd 40.0.0.0/8 0\nadd 10.0.0.0/8 1"
        ),
        Err("conflict with existing route '10.0.0.0/8 - 0'".to_string())
    );
    assert_eq!(h.read("table"), before);
    assert_eq!(
        h.write("ctrl", "add 50.0.0.0/8 0\nfrob 1.0.0.0/8 0"),
        Err("bad command 'frob'".to_string())
    );
    assert_eq!(h.read("table"), before);
    let mut h = h;
    let out = h.push(
        0,
        vec![
            pkt([10, 0, 0, 1], [10, 0, 0, 1]),
            pkt([50, 0, 0, 1], [50, 0, 0, 1]),
        ],
    );
    assert_eq!(annos(&out[1]), vec![[1, 1, 1, 1]]);
    assert!(out[0].is_empty());
}

#[test]
fn lookup_text_reports_port_and_gateway() {
    let spec = build_typed(&IpLookupClass::RADIX, "10.0.0.0/8 1", 2);
    assert_eq!(spec.lookup_text("1.2.3.4"), Ok("-1".to_string()));
    assert_eq!(spec.lookup_text(" 10.2.3.4\n"), Ok("1".to_string()));
    let spec = build_typed(&IpLookupClass::LINEAR, CONFIG, 4);
    assert_eq!(spec.lookup_text("10.1.2.130"), Ok("3".to_string()));
    assert_eq!(spec.lookup_text("10.1.7.7"), Ok("2 10.1.0.1".to_string()));
    assert_eq!(spec.lookup_text("99.1.1.1"), Ok("0 18.26.4.1".to_string()));
    assert_eq!(
        spec.lookup_text("10.1"),
        Err("expected IP address, not '10.1'".to_string())
    );
}

/// A typed spec (the harness holds a trait object), configured as `build` would.
fn build_typed(class: &IpLookupClass, config: &str, noutputs: usize) -> IpLookupSpec {
    let spec = IpLookupSpec::new(class.flavor, noutputs);
    {
        let mut ctl = spec.lock();
        for a in crate::args::split_args(config) {
            let r = parse_route(&a, false).expect("route");
            assert!(spec.add_route(&mut ctl, r, false).is_ok());
        }
    }
    spec
}

#[test]
fn route_syntax() {
    let r = |s: &str| parse_route(s, false).ok();
    assert_eq!(
        r("10.1.2.3/16 1.2.3.4 2"),
        Some(Route {
            addr: 0x0a01_0000,
            len: 16,
            hops: vec![((0x0102_0304, 2), 1)],
        })
    );
    assert_eq!(r("10.1.2.3/16 - 2").map(|r| r.hops), Some(vec![((0, 2), 1)]));
    assert_eq!(
        r("1.2.3.4 0x3").map(|r| (r.len, r.hops)),
        Some((32, vec![((0, 3), 1)]))
    );
    assert_eq!(r("10/8"), None);
    assert_eq!(r("10/8 1.2.3.4"), None);
    assert_eq!(r(""), None);
    // brickroute's multipath routes: members with or without a gateway.
    assert_eq!(
        r("10/8 1 2").map(|r| r.hops),
        Some(vec![((0, 1), 1), ((0, 2), 1)])
    );
    assert_eq!(
        r("10/8 1.2.3.4 0 - 1 1.2.3.5 1").map(|r| r.hops),
        Some(vec![((0x0102_0304, 0), 1), ((0, 1), 1), ((0x0102_0305, 1), 1)])
    );
    assert_eq!(r("10/8 1.2.3.4 0 1.2.3.5"), None);
    assert_eq!(r("10/8 0 x"), None);
    // Weights: one member is a plain route, whatever its weight.
    assert_eq!(
        r("10/8 1.2.3.4 0 weight 3 - 1").map(|r| r.hops),
        Some(vec![((0x0102_0304, 0), 3), ((0, 1), 1)])
    );
    assert_eq!(
        r("10/8 1 weight 2 2 weight 1").map(|r| r.hops),
        Some(vec![((0, 1), 2), ((0, 2), 1)])
    );
    assert_eq!(
        r("10/8 1.2.3.4 0 weight 9").map(|r| r.hops),
        Some(vec![((0x0102_0304, 0), 1)])
    );
    for bad in [
        "10/8 weight 2 1",
        "10/8 1 weight 0",
        "10/8 1 weight 257",
        "10/8 1 weight",
        "10/8 1 weight 2 weight 2",
    ] {
        assert_eq!(r(bad), None, "{bad}");
    }
    // Members given twice (with or without weights in between), or too many: refused
    // with the reason.
    let twice = "a multipath route's members must differ (one is given twice)";
    for s in ["10/8 1.2.3.4 0 1.2.3.4 0", "10/8 1 2 1", "10/8 1 weight 2 1"] {
        assert_eq!(
            parse_route(s, false),
            Err(RouteError::Members(twice.to_string())),
            "{s}"
        );
    }
    let many: String = (0..=multipath::MAX_MEMBERS)
        .map(|i| format!(" 10.0.{}.{} 0", i / 256, i % 256))
        .collect();
    let most = r(&format!("10/8{}", &many[..many.rfind(" 10.").unwrap()])).unwrap();
    assert_eq!(most.hops.len(), multipath::MAX_MEMBERS);
    assert_eq!(
        parse_route(&format!("10/8{}", many), false),
        Err(RouteError::Members(
            "a multipath route has at most 256 members".to_string()
        ))
    );
    // A removal names its members, or none ("any"; so does a lone gateway, as in Click).
    assert_eq!(parse_route("10/8", true).map(|r| r.hops), Ok(vec![]));
    assert_eq!(parse_route("10/8 1.2.3.4", true).map(|r| r.hops), Ok(vec![]));
    assert_eq!(
        parse_route("10/8 1.2.3.4 1 2", true).map(|r| r.hops),
        Ok(vec![((0x0102_0304, 1), 1), ((0, 2), 1)])
    );
}

#[test]
fn a_route_keeps_routing_right_as_its_gateway_comes_and_goes() {
    // Routes without a gateway take their output port as next-hop index, the others
    // an index of their own: a route moved between the two kinds, and another route
    // sharing the pair, must keep sending packets to the right port and annotation.
    let mut h = Harness::new(&IpLookupClass::RADIX, "10.0.0.0/8 1, 11.0.0.0/8 10.9.9.9 1", 1, 3);
    let send = |h: &mut Harness| {
        h.push(
            0,
            vec![
                pkt([10, 1, 1, 1], [10, 1, 1, 1]),
                pkt([11, 1, 1, 1], [11, 1, 1, 1]),
            ],
        )
    };
    let out = send(&mut h);
    assert_eq!(annos(&out[1]), vec![[10, 1, 1, 1], [10, 9, 9, 9]]);
    h.write("set", "10.0.0.0/8 10.9.9.9 2").unwrap();
    let out = send(&mut h);
    assert_eq!(annos(&out[2]), vec![[10, 9, 9, 9]]);
    assert_eq!(annos(&out[1]), vec![[10, 9, 9, 9]]);
    h.write("remove", "11.0.0.0/8").unwrap();
    h.write("set", "10.0.0.0/8 0").unwrap();
    let out = send(&mut h);
    assert_eq!(annos(&out[0]), vec![[10, 1, 1, 1]]);
    assert!(out[1].is_empty() && out[2].is_empty());
    // The freed gateway index now serves a new pair.
    h.write("add", "11.0.0.0/8 10.7.7.7 2").unwrap();
    let out = send(&mut h);
    assert_eq!(annos(&out[0]), vec![[10, 1, 1, 1]]);
    assert_eq!(annos(&out[2]), vec![[10, 7, 7, 7]]);
}

#[test]
fn a_large_ctrl_write_loads_a_whole_table() {
    // 5,000 routes in one write (built into the table at once), with a removal and a
    // replacement of configured routes among them.
    let mut h = Harness::new(&IpLookupClass::RADIX, "10.0.0.0/8 1, 11.0.0.0/8 10.9.9.9 1", 1, 3);
    let mut text = String::from("remove 10.0.0.0/8\nset 11.0.0.0/8 2\n");
    for i in 0..5000u32 {
        let (gw, port) = if i % 2 == 0 { ("", 1) } else { ("10.8.8.8 ", 2) };
        text.push_str(&format!("add 20.{}.{}.0/24 {}{}\n", i >> 8, i & 0xff, gw, port));
    }
    h.write("ctrl", &text).unwrap();
    assert_eq!(h.read("table").lines().count(), 5001);
    let out = h.push(
        0,
        vec![
            pkt([10, 1, 1, 1], [10, 1, 1, 1]),
            pkt([11, 1, 1, 1], [11, 1, 1, 1]),
            pkt([20, 0, 0, 9], [20, 0, 0, 9]),
            pkt([20, 19, 135, 9], [20, 19, 135, 9]),
            pkt([20, 19, 136, 9], [20, 19, 136, 9]),
        ],
    );
    // 10/8 is gone; 11/8 lost its gateway; route 4,999 (20.19.135/24) has one.
    assert!(out[0].is_empty());
    assert_eq!(annos(&out[1]), vec![[20, 0, 0, 9]]);
    assert_eq!(annos(&out[2]), vec![[11, 1, 1, 1], [10, 8, 8, 8]]);
    let out = h.push(0, vec![pkt([20, 19, 136, 9], [20, 19, 136, 9])]);
    assert!(out.iter().all(|o| o.is_empty()), "20.19.136/24 was never added");
}

#[test]
fn a_failed_ctrl_write_leaves_routes_on_their_gateways() {
    // The write removes 10.9.9.9's last route and gives a new pair an index before it
    // fails; the route it removed comes back on its own gateway, also once more pairs
    // take indices.
    let mut h = Harness::new(&IpLookupClass::RADIX, "11.0.0.0/8 10.9.9.9 1", 1, 3);
    assert_eq!(
        h.write("ctrl", "remove 11.0.0.0/8\nadd 12.0.0.0/8 10.7.7.7 2\nfrob"),
        Err("bad command 'frob'".to_string())
    );
    h.write("add", "13.0.0.0/8 10.5.5.5 2").unwrap();
    h.write("add", "14.0.0.0/8 10.6.6.6 2").unwrap();
    let out = h.push(
        0,
        vec![
            pkt([11, 1, 1, 1], [11, 1, 1, 1]),
            pkt([12, 1, 1, 1], [12, 1, 1, 1]),
            pkt([13, 1, 1, 1], [13, 1, 1, 1]),
            pkt([14, 1, 1, 1], [14, 1, 1, 1]),
        ],
    );
    assert_eq!(annos(&out[1]), vec![[10, 9, 9, 9]]);
    assert_eq!(annos(&out[2]), vec![[10, 5, 5, 5], [10, 6, 6, 6]]);
    assert!(out[0].is_empty());
}

#[test]
fn workers_never_see_a_route_on_another_pairs_gateway_during_ctrl_writes() {
    // Each write removes 11/8 (freeing 10.9.9.9's next-hop index), gives a new pair an
    // index, then puts 11/8 back. Its table changes come at the end of the write, so
    // the freed index must not serve the new pair before then.
    use std::sync::atomic::AtomicBool;
    let h = Harness::new(&IpLookupClass::RADIX, "11.0.0.0/8 10.9.9.9 1", 1, 3);
    let done = Arc::new(AtomicBool::new(false));
    let worker = route_until(&h, &done, |outs| {
        assert!(outs[2].is_empty(), "11.1.1.1 left on the new pair's port");
        let routed = outs[1].iter().next().map(|p| p.anno().dst_ip());
        if let Some(gw) = routed {
            assert_eq!(gw, [10, 9, 9, 9]);
        }
        routed.is_some()
    });
    let others: String = (0..500)
        .map(|i| format!("add 30.{}.{}.0/24 1\n", i >> 8, i & 0xff))
        .collect();
    let undo: String = (0..500)
        .map(|i| format!("remove 30.{}.{}.0/24\n", i >> 8, i & 0xff))
        .collect();
    for round in 0..50 {
        let gw = format!("10.7.7.{}", round + 1);
        h.write(
            "ctrl",
            &format!("remove 11.0.0.0/8\nadd 12.0.0.0/8 {gw} 2\n{others}add 11.0.0.0/8 10.9.9.9 1\n"),
        )
        .unwrap();
        h.write("ctrl", &format!("remove 12.0.0.0/8\n{undo}")).unwrap();
    }
    done.store(true, Ordering::Relaxed);
    assert!(worker.join().expect("worker") > 0);
}

#[test]
fn workers_see_a_ctrl_write_whole_or_not_at_all() {
    // Each successful write moves 11/8 between output 1 (no gateway) and output 2 (via
    // 10.2.2.2) by removing it, adding 600 other routes, adding it back and removing
    // the others: 1,202 changes, enough to be built into a new table (`Ipv4Lpm::apply`;
    // smaller writes are published together in place). Each failed write removes
    // it and adds a few others before a bad command; each small one removes it and
    // adds it back on the same route. A worker routing 11.1.1.1
    // meanwhile must find one of the two routes every time: never no route, never the
    // gateway of one with the output of the other.
    use std::sync::atomic::AtomicBool;
    for class in [
        &IpLookupClass::RADIX,
        &IpLookupClass::LINEAR,
        &IpLookupClass::DIRECT,
    ] {
        let mut h = Harness::new(class, "11.0.0.0/8 1", 1, 3);
        let done = Arc::new(AtomicBool::new(false));
        let worker = route_until(&h, &done, |outs| {
            let seen: Vec<(usize, [u8; 4])> = (0..3)
                .flat_map(|o| outs[o].iter().map(move |p| (o, p.anno().dst_ip())))
                .collect();
            assert!(
                seen == [(1, [11, 1, 1, 1])] || seen == [(2, [10, 2, 2, 2])],
                "11.1.1.1 came out as {:?}",
                seen
            );
            true
        });
        let routes = |word: &str, n: u32, tail: &str| -> String {
            (0..n)
                .map(|i| format!("{word} 30.{}.{}.0/24{tail}\n", i >> 8, i & 0xff))
                .collect()
        };
        let (others, undo) = (routes("add", 600, " 1"), routes("remove", 600, ""));
        let few = routes("add", 3, " 10.3.3.3 2");
        for round in 0..30 {
            let route = if round % 2 == 0 { "10.2.2.2 2" } else { "1" };
            h.write(
                "ctrl",
                &format!("remove 11.0.0.0/8\n{others}add 11.0.0.0/8 {route}\n{undo}"),
            )
            .unwrap();
            assert_eq!(
                h.write("ctrl", &format!("remove 11.0.0.0/8\n{few}frob 11.0.0.0/8 0\n")),
                Err("bad command 'frob'".to_string()),
                "{}",
                class.name()
            );
            // A small write, published whole as well: 11/8 is never missing in between.
            for _ in 0..20 {
                h.write("ctrl", &format!("remove 11.0.0.0/8\nadd 11.0.0.0/8 {route}\n"))
                    .unwrap();
            }
        }
        done.store(true, Ordering::Relaxed);
        assert!(worker.join().expect("worker") > 0);
        // The last write (round 29) left 11/8 on output 1, and none of the others.
        let out = h.push(
            0,
            vec![
                pkt([11, 1, 1, 1], [11, 1, 1, 1]),
                pkt([30, 0, 1, 1], [30, 0, 1, 1]),
                pkt([30, 2, 5, 1], [30, 2, 5, 1]),
            ],
        );
        assert_eq!(annos(&out[1]), vec![[11, 1, 1, 1]], "{}", class.name());
        assert!(out[0].is_empty() && out[2].is_empty(), "{}", class.name());
    }
}

#[test]
fn direct_set_replaces_in_ctrl_as_alone() {
    // As Click's DirectIPLookup: `set` adds a new prefix and replaces an existing one
    // (its gateway and output), and a refused `ctrl` write is undone whole.
    let mut h = Harness::new(&IpLookupClass::DIRECT, "10.0.0.0/8 1", 1, 3);
    assert_eq!(
        h.write("ctrl", "set 12.0.0.0/8 2\nset 10.0.0.0/8 10.2.2.2 2\nfrob"),
        Err("bad command 'frob'".to_string())
    );
    assert_eq!(h.read("table"), "10.0.0.0/8\t\t0.0.0.0\t\t1\n");
    h.write("ctrl", "set 12.0.0.0/8 10.3.3.3 2\nset 10.0.0.0/8 10.2.2.2 2")
        .unwrap();
    let out = h.push(
        0,
        vec![
            pkt([10, 1, 1, 1], [10, 1, 1, 1]),
            pkt([12, 1, 1, 1], [12, 1, 1, 1]),
        ],
    );
    assert!(out[1].is_empty());
    assert_eq!(annos(&out[2]), vec![[10, 2, 2, 2], [10, 3, 3, 3]]);
    h.write("set", "10.0.0.0/8 1").unwrap();
    let out = h.push(0, vec![pkt([10, 1, 1, 1], [10, 1, 1, 1])]);
    assert_eq!(annos(&out[1]), vec![[10, 1, 1, 1]]);

    // A route replaced keeps its place in Click's hash order (10.0.0.8/32 and
    // 10.0.0.9/32 share a bucket, newest first), also when the write is undone.
    let h = Harness::new(&IpLookupClass::DIRECT, "10.0.0.8/32 1, 10.0.0.9/32 2", 1, 3);
    let before = h.read("table");
    assert_eq!(
        before,
        "10.0.0.9/32\t\t0.0.0.0\t\t2\n10.0.0.8/32\t\t0.0.0.0\t\t1\n"
    );
    assert!(h.write("ctrl", "set 10.0.0.8/32 2\nfrob").is_err());
    assert_eq!(h.read("table"), before);
    h.write("set", "10.0.0.8/32 0").unwrap();
    assert_eq!(
        h.read("table"),
        "10.0.0.9/32\t\t0.0.0.0\t\t2\n10.0.0.8/32\t\t0.0.0.0\t\t0\n"
    );
}

/// A second worker instance of `h`'s element, on its own thread, routing one packet to
/// 11.1.1.1 after another until `done`: `check` sees each push's three outputs and says
/// whether the packet was routed. The thread returns how many were.
fn route_until(
    h: &Harness,
    done: &Arc<std::sync::atomic::AtomicBool>,
    check: impl Fn(&[PacketBatch]) -> bool + Send + 'static,
) -> std::thread::JoinHandle<u64> {
    let (spec, done) = (h.spec.clone(), done.clone());
    std::thread::spawn(move || {
        let info = WorkerInfo { index: 1, count: 2 };
        let mut w = spec.instantiate(info);
        let stop = StopFlag::new();
        let mut cx = Context::new(info, &stop);
        let mut routed = 0u64;
        // At least one push after `done` (read before the push, so that push comes
        // after the caller's last change), however soon `done` comes.
        loop {
            let last = done.load(std::sync::atomic::Ordering::Relaxed);
            let mut outs: Vec<PacketBatch> = (0..3).map(|_| PacketBatch::new()).collect();
            let mut b: PacketBatch = vec![pkt([11, 1, 1, 1], [11, 1, 1, 1])].into_iter().collect();
            w.push(0, &mut b, &mut Outputs::new(&mut outs), &mut cx);
            routed += u64::from(check(&outs));
            if last {
                return routed;
            }
        }
    })
}

#[test]
fn a_failed_ctrl_write_in_a_full_hop_table_gives_routes_back_their_own_gateways() {
    // Every next-hop index taken: one output (index 0) and 65,535 routes, each on a
    // gateway of its own. Undoing a failed write needs the indices its removals
    // released, so they stay their pairs' until the write ends: given to another pair,
    // the restored route would leave on that pair's gateway.
    let mut h = Harness::new(&IpLookupClass::RADIX, "", 1, 1);
    let gw_of = |i: u32| format!("11.0.{}.{}", i >> 8, i & 0xff);
    let full: String = (0..(MAX_HOPS as u32 - 1))
        .map(|i| format!("add 10.{}.{}.0/24 {} 0\n", i >> 8, i & 0xff, gw_of(i)))
        .collect();
    h.write("ctrl", &full).unwrap();
    let too_many = Err("Virtual port table size limit exceeded".to_string());
    assert_eq!(h.write("add", "99.0.0.0/8 12.1.1.1 0"), too_many);
    assert_eq!(
        h.write("ctrl", "remove 10.0.5.0/24\nfrob"),
        Err("bad command 'frob'".to_string())
    );
    for _ in 0..100 {
        lpm::reclaim();
    }
    // Nothing was freed: the table is as full as before, and 10.0.5/24 still routes
    // through its own gateway.
    assert_eq!(h.write("add", "99.0.0.0/8 12.1.1.1 0"), too_many);
    assert_eq!(h.read("table").lines().count(), MAX_HOPS - 1);
    let out = h.push(0, vec![pkt([10, 0, 5, 1], [10, 0, 5, 1])]);
    assert_eq!(annos(&out[0]), vec![[11, 0, 0, 5]]);
    // A write that removes a route and puts it back needs no new index either.
    h.write("ctrl", "remove 10.0.5.0/24\nadd 10.0.5.0/24 11.0.0.5 0")
        .unwrap();
    // Removed for good, the route's index serves a new pair once the grace period is
    // over.
    h.write("remove", "10.0.5.0/24").unwrap();
    let mut rounds = 0;
    while h.write("add", "99.0.0.0/8 12.1.1.1 0").is_err() {
        rounds += 1;
        assert!(rounds < 100_000, "the removed route's index never came back");
        lpm::reclaim();
        std::thread::yield_now();
    }
    let out = h.push(
        0,
        vec![
            pkt([99, 1, 1, 1], [99, 1, 1, 1]),
            pkt([10, 0, 5, 1], [10, 0, 5, 1]),
            pkt([10, 0, 6, 1], [10, 0, 6, 1]),
        ],
    );
    assert_eq!(annos(&out[0]), vec![[12, 1, 1, 1], [11, 0, 0, 6]]);
}

/// A packet from `src` to `dst` whose network header is set, as `CheckIPHeader` leaves
/// it, with its destination annotation.
fn flow(src: [u8; 4], dst: [u8; 4]) -> Packet {
    let mut p = pkt(dst, dst);
    p.data_mut()[12..16].copy_from_slice(&src);
    p.set_network_header(0, 20);
    p
}

#[test]
fn a_multipath_route_spreads_flows_and_keeps_each_on_its_member() {
    for class in [
        &IpLookupClass::RADIX,
        &IpLookupClass::DIRECT,
        &IpLookupClass::STATIC,
        &IpLookupClass::LINEAR,
    ] {
        let mut h = Harness::new(class, "10.0.0.0/8 10.0.0.1 1 10.0.0.2 2 3, 11.0.0.0/8 0", 1, 4);
        let sources: Vec<[u8; 4]> = (0..300u32).map(|i| [192, 168, (i >> 8) as u8, i as u8]).collect();
        let send = |h: &mut Harness| h.push(0, sources.iter().map(|&s| flow(s, [10, 5, 5, 5])).collect());
        let first = send(&mut h);
        assert!(first[0].is_empty());
        for (port, gw) in [(1, [10, 0, 0, 1]), (2, [10, 0, 0, 2]), (3, [10, 5, 5, 5])] {
            let n = first[port].len();
            assert!(
                (60..=140).contains(&n),
                "{}: port {} got {} of 300",
                class.name(),
                port,
                n
            );
            assert!(
                annos(&first[port]).iter().all(|&a| a == gw),
                "{}: port {}",
                class.name(),
                port
            );
        }
        // Each source again: the same member, so a flow's packets keep their order.
        let again = send(&mut h);
        for port in 1..4 {
            let src = |out: &[Packet]| out.iter().map(|p| p.data()[12..16].to_vec()).collect::<Vec<_>>();
            assert_eq!(src(&first[port]), src(&again[port]), "{}", class.name());
        }
        // A packet without a network header is routed too (its source counts as 0).
        let out = h.push(
            0,
            vec![
                pkt([10, 5, 5, 5], [10, 5, 5, 5]),
                pkt([10, 5, 5, 5], [10, 5, 5, 5]),
            ],
        );
        assert_eq!(out.iter().map(Vec::len).sum::<usize>(), 2);
        assert_eq!(out.iter().filter(|o| o.len() == 2).count(), 1);
    }
}

#[test]
fn multipath_routes_in_the_handlers() {
    let mut h = Harness::new(&IpLookupClass::RADIX, "10.0.0.0/8 10.0.0.1 1 - 2", 1, 3);
    assert_eq!(h.read("table"), "10.0.0.0/8\t\t10.0.0.1\t1\t-\t\t2\n");
    assert_eq!(h.read_with("lookup", "10.9.9.9"), Ok("1 10.0.0.1\n2".to_string()));
    // A removal names the route's members, all of them, in order, or none.
    assert_eq!(
        h.write("remove", "10.0.0.0/8 10.0.0.1 1"),
        Err("route '10.0.0.0/8 10.0.0.1 1' not found".to_string())
    );
    assert_eq!(
        h.write("remove", "10.0.0.0/8 - 2 10.0.0.1 1"),
        Err("route '10.0.0.0/8 - 2 10.0.0.1 1' not found".to_string())
    );
    h.write("remove", "10.0.0.0/8 10.0.0.1 1 - 2").unwrap();
    assert_eq!(h.read("table"), "");
    assert_eq!(
        h.write("add", "10.0.0.0/8 1 1"),
        Err("a multipath route's members must differ (one is given twice)".to_string())
    );
    assert_eq!(h.write("add", "10.0.0.0/8 1 7"), Err("bad OUTPUT".to_string()));
    // A route moved from a group to a single hop and back; two routes share a group.
    h.write("add", "10.0.0.0/8 10.0.0.1 1 10.0.0.2 2").unwrap();
    h.write("add", "11.0.0.0/8 10.0.0.1 1 10.0.0.2 2").unwrap();
    h.write("set", "10.0.0.0/8 10.0.0.3 0").unwrap();
    let spread = |h: &mut Harness, dst: [u8; 4]| {
        let out = h.push(0, (0..64u8).map(|i| flow([172, 16, 0, i], dst)).collect());
        out.iter()
            .map(|o| annos(o).into_iter().collect::<std::collections::BTreeSet<_>>())
            .collect::<Vec<_>>()
    };
    let out = spread(&mut h, [10, 1, 1, 1]);
    assert_eq!(out[0].iter().copied().collect::<Vec<_>>(), vec![[10, 0, 0, 3]]);
    assert!(out[1].is_empty() && out[2].is_empty());
    let out = spread(&mut h, [11, 1, 1, 1]);
    assert_eq!(out[1].iter().copied().collect::<Vec<_>>(), vec![[10, 0, 0, 1]]);
    assert_eq!(out[2].iter().copied().collect::<Vec<_>>(), vec![[10, 0, 0, 2]]);
    h.write("set", "10.0.0.0/8 10.0.0.2 2 10.0.0.1 1").unwrap();
    h.write("remove", "11.0.0.0/8").unwrap();
    let out = spread(&mut h, [10, 1, 1, 1]);
    assert!(out[0].is_empty());
    assert_eq!(out[1].iter().copied().collect::<Vec<_>>(), vec![[10, 0, 0, 1]]);
    assert_eq!(out[2].iter().copied().collect::<Vec<_>>(), vec![[10, 0, 0, 2]]);
    // A failed ctrl write that replaced the group puts it back.
    assert!(h.write("ctrl", "set 10.0.0.0/8 0\nfrob").is_err());
    assert_eq!(h.read("table"), "10.0.0.0/8\t\t10.0.0.2\t2\t10.0.0.1\t1\n");
    let out = spread(&mut h, [10, 1, 1, 1]);
    assert!(out[0].is_empty() && !out[1].is_empty() && !out[2].is_empty());
}

#[test]
fn multipath_configuration_errors() {
    assert!(
        build_error(&IpLookupClass::RADIX, "10.0.0.0/8 1.1.1.1 0 1.1.1.1 0", 1, 1)
            .contains("argument 1: a multipath route's members must differ (one is given twice)"),
    );
    assert!(build_error(&IpLookupClass::RADIX, "10.0.0.0/8 0 1", 1, 1).contains("argument 1 bad OUTPUT"));
}

#[test]
fn a_removal_with_a_negative_output_takes_any_route_of_the_prefix() {
    // Click's "any": output -1, with or without a gateway; and the text a not-found
    // error gives for such a request, written back.
    for req in ["10.0.0.0/8 -1", "10.0.0.0/8 - -1", "10.0.0.0/8 10.0.0.9 -1"] {
        let h = Harness::new(&IpLookupClass::RADIX, "10.0.0.0/8 10.0.0.1 1 - 2", 1, 3);
        h.write("remove", req).unwrap();
        assert_eq!(h.read("table"), "", "{req}");
        assert_eq!(
            h.write("remove", req),
            Err("route '10.0.0.0/8 - -1' not found".to_string()),
            "{req}"
        );
    }
    let h = Harness::new(&IpLookupClass::RADIX, "10.0.0.0/8 1", 1, 2);
    h.write("remove", "10.0.0.0/8 - -1").unwrap();
    // A route to add still needs real outputs.
    assert_eq!(h.write("add", "10.0.0.0/8 -1"), Err("bad OUTPUT".to_string()));
    assert_eq!(
        h.write("remove", "10.0.0.0/8 1 -1"),
        Err("bad OUTPUT".to_string())
    );
}

#[test]
fn a_weighted_member_takes_its_share_of_the_flows() {
    let mut h = Harness::new(
        &IpLookupClass::RADIX,
        "10.0.0.0/8 10.0.0.1 1 weight 3 10.0.0.2 2",
        1,
        3,
    );
    assert_eq!(
        h.read("table"),
        "10.0.0.0/8\t\t10.0.0.1\t1\tweight\t3\t10.0.0.2\t2\n"
    );
    assert_eq!(
        h.read_with("lookup", "10.9.9.9"),
        Ok("1 10.0.0.1 weight 3\n2 10.0.0.2".to_string())
    );
    let sources: Vec<[u8; 4]> = (0..800u32).map(|i| [192, 168, (i >> 8) as u8, i as u8]).collect();
    let out = h.push(0, sources.iter().map(|&s| flow(s, [10, 5, 5, 5])).collect());
    // Three quarters and a quarter of 800.
    assert!(
        (520..=680).contains(&out[1].len()),
        "{} and {}",
        out[1].len(),
        out[2].len()
    );
    assert_eq!(out[1].len() + out[2].len(), 800);
    // Another weight is another route (its own group): set replaces it.
    h.write("set", "10.0.0.0/8 10.0.0.1 1 10.0.0.2 2 weight 3")
        .unwrap();
    let out = h.push(0, sources.iter().map(|&s| flow(s, [10, 5, 5, 5])).collect());
    assert!(
        (520..=680).contains(&out[2].len()),
        "{} and {}",
        out[1].len(),
        out[2].len()
    );
    // The untabbed tables write the weight as a word too.
    let h = Harness::new(&IpLookupClass::LINEAR, "10.0.0.0/8 1 weight 2 2", 1, 3);
    assert_eq!(h.read("table"), "10.0.0.0/8 - 1 weight 2 - 2\n");
}
