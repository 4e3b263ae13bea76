use super::*;

/// The SSE2 path (CPUs without AVX2) answers like the reference too, over nodes of
/// every kind (those of [`crate::tests::every_size_routes6`]); the shared tests run the
/// AVX2 path where the CPU has it.
#[test]
fn the_portable_path_matches_the_reference() {
    let mut routes: Vec<(u128, u8, u32)> = Vec::new();
    let base = 0x2001_0db8u128 << 96;
    for i in 0..400u128 {
        // /48s in one /32 (a split node), /40s, and a stride-8 node of many runs.
        routes.push((base | (i * 3) << 80, 48, i as u32));
        routes.push((base | (i % 50) << 88, 40, 1000 + i as u32));
        routes.push((0x2a00u128 << 112 | (i % 200) << 104, 24, 2000 + (i % 2) as u32));
    }
    routes.push((base | 5 << 80 | 7 << 60, 68, 77));
    routes.push((base | 5 << 80 | 7 << 60 | 9, 128, 78));
    // And nodes of every kind and size (asserted by the test below).
    routes.extend(crate::tests::every_size_routes6());
    let t = Runs6::build(&routes);
    let reference = crate::reference::NaiveLpm6::new();
    let mut reference = reference;
    for &(a, l, nh) in &routes {
        reference.insert(a, l, nh);
    }
    let mut probes: Vec<u128> = Vec::new();
    for &(a, l, _) in &routes {
        let last = a | u128::MAX.checked_shr(u32::from(l)).unwrap_or(0);
        probes.extend([a, a.wrapping_sub(1), last, last.wrapping_add(1)]);
    }
    let mut out = vec![0u32; probes.len()];
    let guard = epoch::pin();
    let view = t.view(&guard);
    t.lookup_batch_pinned::<false>(&view, &probes, &mut out);
    for (&a, &o) in probes.iter().zip(&out) {
        let want = reference.lookup(a).unwrap_or(NONE);
        assert_eq!(o, want, "batch {:x}", a);
        assert_eq!(t.lookup_pinned::<false>(view.first, a).0, want, "single {:x}", a);
    }
}

/// The lines a lookup prefetches for a node hold what it reads there: the value word
/// of a direct node's slot, the top value of a split node's high byte, the keys and
/// first values of a keyed node, and the same in a split node's direct or keyed
/// sub-nodes, which their `SUB` links name.
#[test]
fn prefetched_lines_hold_the_words_a_lookup_reads() {
    let base = 0x2001_0db8u128 << 96;
    // A split node (bits 32..48: 400 /48s), a direct one (bits 16..24 of 2a00::/16:
    // 100 /24s), a keyed one of one line (bits 32..48 of 2a00:1450::/32: three
    // adjacent /48s to one next hop, three runs) and one of two lines (2a00:1451::/32:
    // five /48s apart, eleven runs).
    let mut routes: Vec<(u128, u8, u32)> = (0..400u128)
        .map(|i| (base | (i * 3) << 80, 48, i as u32))
        .collect();
    routes.extend((0..100u128).map(|i| (0x2a00u128 << 112 | (i * 2) << 104, 24, i as u32 % 7)));
    let keyed = 0x2a00_1450u128 << 96;
    routes.extend((1..4u128).map(|i| (keyed | i << 80, 48, 9)));
    let keyed2 = 0x2a00_1451u128 << 96;
    routes.extend((1..6u128).map(|i| (keyed2 | (i * 1000) << 80, 48, 10 + i as u32)));
    // A split node whose sub-nodes are keyed: 40 /48s one high byte apart (81 runs),
    // each high byte's 256 slots holding three runs.
    let sparse = 0x2a00_1452u128 << 96;
    routes.extend((0..40u128).map(|i| (sparse | (i * 256 + 7) << 80, 48, 20 + i as u32)));
    let t = Runs6::build(&routes);
    let w = t.lock();
    let line = |a: usize| a & !63;
    let split = w.nodes[&(2, base)].link;
    assert_eq!(split & (DIRECT | SPLIT), DIRECT | SPLIT);
    let direct = w.nodes[&(0, 0x2a00u128 << 112)].link;
    assert_eq!(direct & (DIRECT | SPLIT), DIRECT);
    let flat = w.nodes[&(2, keyed)].link;
    assert_eq!((flat & DIRECT, flat >> RUNS_SHIFT), (0, 2));
    let split2 = w.nodes[&(2, sparse)].link;
    assert_eq!(split2 & (DIRECT | SPLIT), DIRECT | SPLIT);
    let flat2 = w.nodes[&(2, keyed2)].link;
    assert_eq!((flat2 & DIRECT, flat2 >> RUNS_SHIFT), (0, 10));
    let mut subs_seen = [0; 2];
    for slot in [0u32, 1, 7, 8, 255, 256, 1000, 4095, 65535] {
        if slot < 256 {
            // SAFETY: the table is live and the slot within the node's stride.
            let word = unsafe { value_word::<false>(direct, slot) } as usize;
            assert_eq!(
                node_lines(direct, slot),
                (line(word), line(word)),
                "direct slot {slot}"
            );
        }
        // SAFETY: as above.
        let top = unsafe { value_word::<false>(split, slot) } as usize;
        assert_eq!(
            node_lines(split, slot),
            (line(top), line(top)),
            "split slot {slot}"
        );
        // A sub-node of a split node, reached through a `SUB` link in its top: direct
        // (the first split node's) or keyed (the second's).
        for (node, kind) in [(split, DIRECT | SUB), (split2, SUB)] {
            // SAFETY: as above.
            let sub = unsafe { (*value_word::<false>(node, slot)).load(Ordering::Relaxed) };
            if sub & LEAF != 0 {
                // (A high byte without routes under it.)
                continue;
            }
            subs_seen[(kind & DIRECT != 0) as usize] += 1;
            assert_eq!(sub & (DIRECT | SPLIT | SUB), kind, "split slot {slot}");
            let low = slot & 0xff;
            // SAFETY: as above, for the sub-node's stride-8 slot.
            let word = unsafe { value_word::<false>(sub, low) } as usize;
            let (first, second) = node_lines(sub, low);
            if kind & DIRECT != 0 {
                assert_eq!(
                    (first, second),
                    (line(word), line(word)),
                    "direct sub-node slot {low}"
                );
            } else {
                assert_eq!(first, (sub & PTR) as usize, "keyed sub-node slot {low}");
                assert!(
                    line(word) == first || line(word) == second,
                    "keyed sub-node slot {low}"
                );
            }
        }
        // A keyed node: its key line, and its second line only if it has one; the
        // value word read is in one of them.
        for (link, second) in [(flat, 0), (flat2, 64)] {
            let p = (link & PTR) as usize;
            assert_eq!(node_lines(link, slot), (p, p + second), "keyed slot {slot}");
            // SAFETY: as above.
            let word = unsafe { value_word::<false>(link, slot) } as usize;
            assert!(line(word) == p || line(word) == p + second, "keyed slot {slot}");
        }
    }
    // Keyed sub-nodes under every slot but 65,535 (high bytes 0..=39 have routes),
    // direct ones under slots 0 to 1,000 (high bytes 0..=4).
    assert_eq!(subs_seen, [8, 7]);
}

/// A stride-16 node of 36,000 runs (18,000 /48s, every third, in one /32) is split,
/// and answers right before and after half of them are removed again.
#[test]
fn a_node_of_many_runs_is_split() {
    let base = 0x2001_0db8u128 << 96;
    let routes: Vec<(u128, u8, u32)> = (0..18_000u128)
        .map(|i| (base | (i * 3) << 80, 48, i as u32))
        .collect();
    let t = Runs6::build(&routes);
    let link = |t: &Runs6| t.lock().nodes[&(2, base)].link;
    // The /48s sit at every third slot of 0..54,000, under high bytes 0..=210, 80
    // to 86 of them each: a top of 256 values, then 211 sub-nodes of over 33 runs
    // (direct, 2 KiB each).
    assert_eq!(link(&t) & (DIRECT | SPLIT), DIRECT | SPLIT);
    assert_eq!(link_bytes(link(&t)), 2048 + 211 * 2048);
    let check = |t: &Runs6, live: &dyn Fn(usize) -> bool| {
        let mut probes = Vec::new();
        let mut want = Vec::new();
        for (i, &(a, _, nh)) in routes.iter().enumerate() {
            let hop = if live(i) { nh } else { NONE };
            probes.extend([a, a | ((1 << 80) - 1), a + (1 << 80)]);
            want.extend([hop, hop, NONE]);
        }
        let mut out = vec![0u32; probes.len()];
        t.lookup_batch(&probes, &mut out);
        for ((&a, &o), &w) in probes.iter().zip(&out).zip(&want) {
            assert_eq!(o, w, "{:x}", a);
        }
        let guard = epoch::pin();
        t.lookup_batch_pinned::<false>(&t.view(&guard), &probes, &mut out);
        assert_eq!(out, want);
    };
    check(&t, &|_| true);
    for &(a, l, _) in routes.iter().step_by(2) {
        assert!(t.remove(a, l).is_some());
    }
    check(&t, &|i| i % 2 == 1);
    assert_eq!(link(&t) & (DIRECT | SPLIT), DIRECT | SPLIT);
}

/// The routes of `ipv6_nodes_of_every_size_match_a_reference_through_updates` make the
/// nodes it names, built in bulk or by inserts: a direct stride-8 node, keyed nodes of
/// one, two and four lines, and split nodes.
#[test]
fn the_every_size_routes_make_nodes_of_every_kind() {
    let routes = crate::tests::every_size_routes6();
    let built = Runs6::build(&routes);
    let inserted = Runs6::new();
    for &(a, l, nh) in &routes {
        inserted.insert(a, l, nh);
    }
    let ip6 = crate::tests::ip6;
    for (t, bulk) in [(&built, true), (&inserted, false)] {
        let w = t.lock();
        let node = |level: u8, base: &str| {
            let link = w.nodes[&(level, ip6(base))].link;
            (
                link & (DIRECT | SPLIT | TWO_LINES),
                (link >> RUNS_SHIFT) as usize + 1,
            )
        };
        // 2001::/16, bits 16..24: slot 0 links the /40's nodes, then 119 /24s each
        // followed by a slot of no route, and no route from slot 239 on: 240 runs.
        assert_eq!(node(0, "2001::"), (DIRECT, 240), "bulk {bulk}");
        // Two, five and twelve /48s under no route, each a run between two: 5, 11 and
        // 25 runs, in one line, two and four (keys, padded to eight, then values).
        assert_eq!(node(2, "2a00:1460::"), (0, 5), "bulk {bulk}");
        assert_eq!(node(2, "2a00:1461::"), (TWO_LINES, 11), "bulk {bulk}");
        assert_eq!(node(2, "2a00:1462::"), (TWO_LINES, 25), "bulk {bulk}");
        assert_eq!([5, 11, 25].map(|n| node_bytes(n) / 64), [1, 2, 4], "bulk {bulk}");
        // Split: 20 /48s under a /32 (40 runs), 300 /48s (600) and 1,000 /80s (2,000).
        let split = [
            node(2, "2a00:1450::"),
            node(2, "2a00:1451::"),
            node(4, "2c0f:f000:1:2::"),
        ];
        if bulk {
            // The 32-line top, then a direct sub-node (32 lines) per high byte of more
            // than 33 runs: high byte 0 (slots 0 to 133), 0 to 3 (0 to 897), and 0 to
            // 19 (0 to 4,995); the other high bytes hold one run, in the top.
            assert_eq!(
                split,
                [
                    (DIRECT | SPLIT, 32 + 32),
                    (DIRECT | SPLIT, 32 + 4 * 32),
                    (DIRECT | SPLIT, 32 + 20 * 32)
                ]
            );
        } else {
            // (Sub-nodes rebuilt one by one are placed on their own: the lines of the
            // node's block are those of its last whole build.)
            assert_eq!(split.map(|s| s.0), [DIRECT | SPLIT; 3]);
        }
    }
}

/// In the table of `ipv6_a_change_in_a_split_node_appears_at_once`, 2001:db8::/32 is a
/// split node, and a change of the /44 under its high byte 0x12 rebuilds that high
/// byte's sub-node alone (and the /48's node below it): the node's top block stays, and
/// answers follow.
#[test]
fn a_change_under_one_high_byte_of_a_split_node_rebuilds_its_sub_node() {
    let t = crate::tests::split_node_table6();
    let ip6 = crate::tests::ip6;
    let base = ip6("2001:db8::");
    // The value word of high byte 0x12 in the top of the split node `link`.
    let top_of = |link: u64| {
        assert_eq!(link & (DIRECT | SPLIT), DIRECT | SPLIT);
        // SAFETY: the caller holds the writer lock, so the node is live; it is split,
        // so its top holds a value per high byte.
        unsafe { (*direct_word::<true>(link, 0x1234)).load(Ordering::Relaxed) }
    };
    let (link, subs, old_top) = {
        let w = t.inner.lock();
        let rec = &w.nodes[&(2, base)];
        (rec.link, rec.subs.clone(), top_of(rec.link))
    };
    let below = ip6("2001:db8:1234:200::1");
    let probes = [ip6("2001:db8:1235::1"), below, ip6("2001:db8:1234:100::1")];
    let answers = |t: &crate::Ipv6Lpm| probes.map(|a| t.lookup(a));
    assert_eq!(answers(&t), [Some(1), Some(1), Some(500_000)]);
    assert_eq!(t.insert(ip6("2001:db8:1230::"), 44, 2), Some(1));
    let w = t.inner.lock();
    let rec = &w.nodes[&(2, base)];
    assert_eq!(rec.link, link, "the split node's top block was replaced");
    let top = top_of(link);
    // High byte 0x12's sub-node (placed on its own when the /44 came) is replaced by a
    // new one, which the top links; the other sub-nodes stay.
    assert_eq!((old_top & SUB, top & SUB), (SUB, SUB));
    let gone: Vec<u64> = subs.iter().filter(|s| !rec.subs.contains(s)).copied().collect();
    let new: Vec<u64> = rec.subs.iter().filter(|s| !subs.contains(s)).copied().collect();
    assert_eq!((gone, new), (vec![old_top & !SUB], vec![top & !SUB]));
    drop(w);
    assert_eq!(answers(&t), [Some(2), Some(2), Some(500_000)]);
}

/// The portable batch path redoes a key that fell back to a default route changed since
/// its first level was loaded, as the AVX2 path does (lpm's tests, through a view).
#[test]
fn the_portable_batch_rechecks_fallbacks_after_a_change() {
    let t = Runs6::new();
    t.insert(0, 0, 1);
    t.insert(0x2001_0db8_0001u128 << 80, 48, 2);
    t.insert(0x2001_0db8_0002u128 << 80, 48, 5);
    let guard = epoch::pin();
    let view = t.view(&guard);
    t.insert(0, 0, 3);
    t.remove(0x2001_0db8_0001u128 << 80, 48);
    let mut out = [0u32; 2];
    let keys = [(0x2001_0db8_0001u128 << 80) | 1, (0x2001_0db8_0002u128 << 80) | 1];
    t.lookup_batch_pinned::<false>(&view, &keys, &mut out);
    assert_eq!(out, [3, 5]);
    // Without a change since, the first level's own answers stand.
    t.lookup_batch_pinned::<false>(&t.view(&guard), &keys, &mut out);
    assert_eq!(out, [3, 5]);
}
