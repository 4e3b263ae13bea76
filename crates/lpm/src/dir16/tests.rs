use super::*;

fn ip(a: u8, b: u8, c: u8, d: u8) -> u32 {
    u32::from_be_bytes([a, b, c, d])
}

/// A reader holding a guard across an update sees the new answer at once, and the
/// chunk the update replaced is freed only once that reader has repinned.
#[test]
fn replaced_chunks_are_freed_only_after_a_held_guard_repins() {
    let t = Dir16::new();
    t.insert(ip(10, 1, 2, 0), 24, 1);
    let mut guard = crate::pin();
    let mut out = [0u32; 3];
    let keys = [ip(10, 1, 2, 9), ip(10, 1, 3, 9), ip(10, 1, 4, 9)];
    t.lookup_batch_in(&guard.0, &keys, &mut out);
    assert_eq!(out, [1, NONE, NONE]);
    // Replaces the chunk of 10.1/16 (three runs: slots 0..=1, 2, 3..=255; a 36-byte
    // header and three byte values, 40 bytes in whole words).
    t.insert(ip(10, 1, 3, 0), 24, 2);
    assert_eq!(t.pending_free.load(Ordering::Relaxed), 40);
    t.lookup_batch_in(&guard.0, &keys, &mut out);
    assert_eq!(out, [1, 2, NONE]);
    assert_eq!(t.lookup_in(&guard.0, ip(10, 1, 3, 200)), 2);
    // However often the collector runs, the held guard keeps the old chunk.
    for _ in 0..1000 {
        epoch::pin().flush();
    }
    assert_eq!(t.pending_free.load(Ordering::Relaxed), 40);
    // A reader that repins lets it go (other tests' threads pin too, so the epoch
    // may need a few rounds to advance).
    let mut rounds = 0;
    while t.pending_free.load(Ordering::Relaxed) != 0 {
        rounds += 1;
        assert!(rounds < 1_000_000, "the replaced chunk was never freed");
        guard.repin();
        epoch::pin().flush();
        std::thread::yield_now();
    }
    t.lookup_batch_in(&guard.0, &keys, &mut out);
    assert_eq!(out, [1, 2, NONE]);
}

/// A first level replaced by a changed copy (a /12 spans sixteen /16s) is written
/// over by a later copy only after the readers that may hold it have unpinned.
#[test]
fn a_replaced_first_level_is_not_reused_while_a_guard_holds_it() {
    let t = Dir16::new();
    t.insert(ip(10, 0, 0, 0), 12, 1);
    let guard = epoch::pin();
    let held = t.top.load(&guard);
    let before: Vec<u64> = held.links.iter().map(|e| e.load(Ordering::Relaxed)).collect();
    for nh in 2..100 {
        t.insert(ip(10, 0, 0, 0), 12, nh);
        // (The collector runs, as other threads' pins make it.)
        epoch::pin().flush();
    }
    assert!(held.links.iter().map(|e| e.load(Ordering::Relaxed)).eq(before));
    assert_eq!(t.lookup_in(&guard, ip(10, 15, 1, 1)), 99);
    // The answers through the held copy are those from when it was loaded.
    assert_eq!(t.lookup_pinned(held, ip(10, 15, 1, 1)), 1);
}

/// Each `(address, next hop)` probe answers the same through a batch lookup of all
/// of them and through a single lookup.
fn assert_probes(t: &Dir16, probes: &[(u32, u32)]) {
    let keys: Vec<u32> = probes.iter().map(|p| p.0).collect();
    let mut out = vec![0u32; keys.len()];
    t.lookup_batch(&keys, &mut out);
    for (&(a, want), &got) in probes.iter().zip(&out) {
        assert_eq!(got, want, "batch {:08x}", a);
        assert_eq!(t.lookup(a), want, "single {:08x}", a);
    }
}

/// A dictionary of a table with 16-bit values knowing `hops` (next hop, index);
/// other hops have no index.
fn dict_with(hops: &[(u32, u16)]) -> Dict {
    let mut d = Dict::new(1);
    for &(nh, i) in hops {
        d.add(nh, Some(i));
    }
    d
}

#[test]
fn small_hops_get_the_index_the_map_holds_through_their_lives() {
    let mut d = Dict::new(1);
    let last_small = SMALL_HOPS as u32 - 1;
    for (nh, i) in [
        (7, 3),
        (0, 9),
        (last_small, 4),
        (SMALL_HOPS as u32, 5),
        (1_000_000, 6),
    ] {
        d.add(nh, Some(i));
        assert_eq!(d.index(nh), Some(i), "hop {}", nh);
    }
    assert_eq!(d.index(8), None);
    // Forgotten, then back without an index (none was free): not the old one,
    // which another hop may hold by then.
    assert_eq!(d.forget(7), Some(Some(3)));
    assert_eq!(d.index(7), None);
    d.add(7, None);
    assert_eq!(d.index(7), None);
    d.add(last_small, None);
    assert_eq!(d.index(last_small), None);
    assert_eq!(d.index(NONE), Some(0));
}

#[test]
fn find_agrees_with_a_binary_search_on_even_and_uneven_lists() {
    // Lists of every shape the guess can miss by: empty, one route, routes packed
    // at either end of the /16 or spread over it, each prefix with several lengths.
    let mut rng = crate::tests::Rng(0x9e37_79b9_7f4a_7c15);
    let mut rand = move || u64::from(rng.next());
    for case in 0..400 {
        let n = [0, 1, 2, 3, 17, 256, 1000][case % 7];
        let span = [1u64, 16, 256, 4096, 65536][case / 7 % 5];
        let base = [0u64, 65536 - span][case / 35 % 2];
        let mut keys: Vec<(u16, u8)> = (0..n)
            .map(|_| ((base + rand() % span) as u16, 17 + (rand() % 16) as u8))
            .collect();
        keys.sort_unstable();
        keys.dedup();
        let list: Vec<Sub> = keys.iter().map(|&(low, len)| Sub { low, len, nh: 7 }).collect();
        let mut probes = keys.clone();
        probes.extend((0..64).map(|_| (rand() as u16, 17 + (rand() % 16) as u8)));
        probes.extend([(0, 17), (0, 32), (u16::MAX, 17), (u16::MAX, 32)]);
        for (low, len) in probes {
            assert_eq!(
                find(&list, low, len),
                keys.binary_search(&(low, len)),
                "list of {} routes over {span} addresses from {base}, probe {low}/{len}",
                keys.len()
            );
        }
    }
}

#[test]
fn kid_slots_get_runs_of_their_own_holding_the_mark() {
    // Slots 0..=99 hold 7 (index 1), 100..=255 hold 8 (index 2); kids under slots
    // 0, 1, 100 and 255. Runs: [0, 1] mark, [2, 99] 7, [100] mark, [101, 254] 8,
    // [255] mark.
    let dict = dict_with(&[(7, 1), (8, 2)]);
    let mut vals = [8u32; SLOTS];
    vals[..100].fill(7);
    let kids = [0b11, 1 << 36, 0, 1 << 63];
    let e = encode_runs(&vals, &kids, &dict);
    assert_eq!((e.fronted, e.width), (false, 1));
    let words = e.words;
    let m = u64::from(KID_MARK);
    assert_eq!(
        words,
        [
            // Runs end at slots 1, 99, 100, 254 and 255.
            0b10,
            (1 << 35) | (1 << 36),
            0,
            (1 << 62) | (1 << 63),
            // Rank bytes (ends after each word) 4, 2, 2, 0, then the values, last run
            // first: mark, 2,
            0x0002_0204 | (m << 32) | (2 << 48),
            // mark, 1, mark (and padding).
            m | (1 << 16) | (m << 32),
        ]
    );
    let want = |j: usize| match j {
        0 | 1 | 100 | 255 => usize::from(KID_MARK),
        2..=99 => 1,
        _ => 2,
    };
    for j in 0..SLOTS {
        // SAFETY: `words` is the chunk just encoded, and `j < 256`.
        assert_eq!(unsafe { slot_index(words.as_ptr(), j) }, want(j), "slot {}", j);
    }
}

#[test]
fn byte_values_hold_indices_below_255_and_mark_kid_slots_with_ff() {
    // As above in a table with byte values: runs [0, 1] mark, [2, 99] 7 (index 1),
    // [100] mark, [101, 254] 8 (index 254), [255] mark.
    let mut dict = dict_with(&[(7, 1), (8, 254)]);
    dict.narrow = 0;
    let mut vals = [8u32; SLOTS];
    vals[..100].fill(7);
    let kids = [0b11, 1 << 36, 0, 1 << 63];
    let e = encode_runs(&vals, &kids, &dict);
    assert_eq!((e.fronted, e.width), (false, 0));
    assert_eq!(
        e.words,
        [
            0b10,
            (1 << 35) | (1 << 36),
            0,
            (1 << 62) | (1 << 63),
            // Rank bytes 4, 2, 2, 0, then the values, last run first: ff, 254 (0xfe),
            // ff, 1,
            0x0002_0204 | (0x01_ff_fe_ff << 32),
            // ff (and padding).
            0xff,
        ]
    );
    let want = |j: usize| match j {
        0 | 1 | 100 | 255 => 0xff,
        2..=99 => 1,
        _ => 254,
    };
    for j in 0..SLOTS {
        // SAFETY: `e.words` is the chunk just encoded, and `j < 256`.
        assert_eq!(unsafe { slot_byte(e.words.as_ptr(), j) }, want(j), "slot {}", j);
    }
    // An index of 255 or more: 16-bit values behind a front.
    let mut dict = dict_with(&[(7, 1), (8, 256)]);
    dict.narrow = 0;
    let e = encode_runs(&vals, &[0; 4], &dict);
    assert_eq!((e.fronted, e.width), (true, 1));
    assert_eq!(e.words[..FRONT_WORDS], FRONT);
    // Runs [0, 99] 7, [100, 255] 8 (rank bytes 2, 1, 1, 0): two u16 values after the
    // header, the last run first.
    assert_eq!(e.words[FRONT_WORDS + 4], 0x0001_0102 | (256 << 32) | (1 << 48));
    let link = tag(e.words.as_ptr() as u64, &e, false);
    // SAFETY: `link` names the chunk in `e.words`, which outlives these reads.
    assert_eq!(unsafe { runs_words(link) }, e.words.len());
    for j in 0..SLOTS {
        // SAFETY: as above, and `j < 256`.
        let (b, x, i) = unsafe {
            (
                slot_byte(ptr_of(link), j),
                slot_index(ptr_of(link), j),
                slot_index(chunk_of(link), j),
            )
        };
        // The front reads as a mark in both widths.
        assert_eq!((b, x >> 15), (0xff, 1), "slot {}", j);
        assert_eq!(i, if j < 100 { 1 } else { 256 }, "slot {}", j);
    }
}

#[test]
fn wide_chunks_start_with_a_front_that_marks_every_slot() {
    // 5 has an index, 1_000_000 has none: the chunk is wide.
    let dict = dict_with(&[(5, 3)]);
    let mut vals = [5u32; SLOTS];
    vals[64..=130].fill(1_000_000);
    vals[255] = NONE;
    let e = encode_runs(&vals, &[0; 4], &dict);
    assert_eq!((e.fronted, e.width), (true, 2));
    assert_eq!(e.words[..FRONT_WORDS], FRONT);
    // The 36-byte header, then the four u32 values 5, 1_000_000, 5, NONE: 52 bytes.
    assert_eq!(e.words.len(), FRONT_WORDS + 7);
    let link = tag(e.words.as_ptr() as u64, &e, false);
    // SAFETY: `link` names the chunk in `e.words`, which outlives these reads.
    assert_eq!(unsafe { runs_words(link) }, e.words.len());
    let dict_entries: Vec<AtomicU32> = (0..DICT).map(|_| AtomicU32::new(NONE)).collect();
    for j in 0..SLOTS {
        // SAFETY: as above, and `j < 256`.
        let (x, v) = unsafe {
            (
                slot_index(e.words.as_ptr(), j),
                link_value(link, j, &dict_entries),
            )
        };
        assert_eq!(x >> 15, 1, "slot {}", j);
        let want = match j {
            64..=130 => 1_000_000,
            255 => NONE,
            _ => 5,
        };
        assert_eq!(v, want, "slot {}", j);
    }
}

#[test]
fn tables_with_more_than_254_next_hops_answer_through_fronted_chunks() {
    // 300 /24s under 30.0.0.0/15 with distinct next hops (30.1 holds the last 44), and
    // 30.2.0.0/16 with ten /20s of hops seen first (indices 1..=10).
    let mut routes: Vec<(u32, u8, u32)> = (0..10).map(|i| (0x1e02_0000 + (i << 12), 20, 100 + i)).collect();
    routes.extend((0..300).map(|i| (0x1e00_0000 + (i << 8), 24, 1000 + i)));
    routes.push((0x1e00_0105, 32, 7));
    let grown = Dir16::new();
    for &(a, l, nh) in &routes {
        grown.insert(a, l, nh);
    }
    let built = Dir16::build(&routes);
    assert_eq!(grown.narrow, 0);
    assert_eq!(built.narrow, 1);
    let link = |t: &Dir16, c: usize| {
        let e = t.link(c);
        (e & FRONTED != 0, width_of(e))
    };
    // 8-bit values where every index is below 255, 16-bit behind a front elsewhere.
    assert_eq!(link(&grown, 0x1e02), (false, 0));
    assert_eq!(link(&grown, 0x1e00), (true, 1));
    assert_eq!(link(&grown, 0x1e01), (true, 1));
    assert_eq!(link(&built, 0x1e00), (false, 1));
    let mut probes: Vec<(u32, u32)> = (0..300).map(|i| (0x1e00_0000 + (i << 8) + 9, 1000 + i)).collect();
    probes.extend((0..10).map(|i| (0x1e02_0000 + (i << 12) + 0x0fff, 100 + i)));
    probes.extend([
        (0x1e00_0105, 7),
        (0x1e00_0106, 1001),
        (0x1e02_a000, NONE),
        (0x1e01_2c00, NONE),
    ]);
    for t in [&grown, &built] {
        assert_probes(t, &probes);
    }
}

#[test]
fn a_table_is_outgrown_while_a_live_hop_has_no_index_of_its_width() {
    let t = Dir16::new();
    // Hops 500..=753 take the byte indices 1..=254.
    for i in 0..254u32 {
        t.insert(0x3200_0000 + (i << 8), 24, 500 + i);
    }
    assert!(!t.outgrown());
    // The 255th (index 256), on two routes: outgrown until both are gone.
    t.insert(0x3300_0000, 24, 9_000);
    t.insert(0x3300_0100, 24, 9_000);
    assert!(t.outgrown());
    t.remove(0x3300_0000, 24);
    assert!(t.outgrown());
    t.remove(0x3300_0100, 24);
    assert!(!t.outgrown());
    // Replacing a hop that fits by one that does not (hop 500's index is free again
    // only after a grace period), then that one by a hop with a byte index.
    t.insert(0x3200_0000, 24, 9_001);
    assert!(t.outgrown());
    t.insert(0x3200_0000, 24, 501);
    assert!(!t.outgrown());
    t.insert(0x3300_0000, 24, 9_002);
    t.clear();
    assert!(!t.outgrown());
    // Tables of 32-bit next hops are never outgrown.
    let wide = Dir16::build_at_least(&[(0x3200_0000, 24, 1)], 2);
    assert_eq!(wide.value_log2(), 2);
    for i in 0..70_000u32 {
        wide.insert(0x4000_0000 + (i << 8), 24, 10_000 + i);
    }
    assert!(!wide.outgrown());
    assert_eq!(wide.lookup(0x4000_0000 + (69_999 << 8)), 79_999);
}

#[test]
fn wide_chunks_with_narrow_and_wide_kids_answer_batches() {
    // 66,000 /24s from 20.0.0.0 with distinct next hops use up the 65,533 dictionary
    // indices (1..=65,534 but 255), so the /16s holding the later ones (20.255, 21.0)
    // are wide (20.255.253.0/24 is the 65,534th). Under 20.255.0.0/24 (whose hop has
    // an index) a /32 to a hop with an index: a narrow kid; under 21.0.9.0/24 a /25
    // to a new hop: a wide kid.
    let hop = |i: u32| 1_000_000 + i;
    let mut routes: Vec<(u32, u8, u32)> = (0..66_000)
        .map(|i| (0x1400_0000 + (i << 8), 24, hop(i)))
        .collect();
    routes.push((0x14ff_0007, 32, hop(0)));
    routes.push((0x1500_0900, 25, 2));
    let grown = Dir16::new();
    for &(a, l, nh) in &routes {
        grown.insert(a, l, nh);
    }
    let built = Dir16::build(&routes);
    let at = |i: u32, host: u32| 0x1400_0000 + (i << 8) + host;
    let probes = [
        (at(3, 3), hop(3)),
        (at(65_532, 1), hop(65_532)),
        (at(65_533, 1), hop(65_533)),
        (0x14ff_0007, hop(0)),
        (0x14ff_0008, hop(65_280)),
        (0x1500_0507, hop(65_541)),
        (0x1500_0901, 2),
        (0x1500_09c8, hop(65_545)),
        (at(65_999, 255), hop(65_999)),
        (at(66_000, 0), NONE),
    ];
    // The same routes inserted into a table with 16-bit values.
    let grown16 = Dir16::with_values(1);
    for &(a, l, nh) in &routes {
        grown16.insert(a, l, nh);
    }
    let link = |t: &Dir16, c: usize| t.link(c);
    for t in [&grown, &grown16] {
        let (e127, e128) = (link(t, 0x14ff), link(t, 0x1500));
        assert_eq!(
            (e127 & (FRONTED | KIDS), e128 & (FRONTED | KIDS)),
            (FRONTED | KIDS, FRONTED | KIDS)
        );
        assert_eq!((width_of(e127), width_of(e128)), (2, 2));
        // Hops past the 32,768th still have 16-bit indices: 20.128's chunk holds
        // 16-bit values (behind a front only in the table with byte values).
        assert_eq!(width_of(link(t, 0x1480)), 1);
        // SAFETY: both link live chunks with kids; slots 0 and 9 are below 256.
        let (narrow_kid, wide_kid) = unsafe { (kid_link(ptr_of(e127), 0), kid_link(ptr_of(e128), 9)) };
        assert_eq!((width_of(narrow_kid), width_of(wide_kid)), (1, 2));
    }
    assert_eq!(link(&grown16, 0x1480) & FRONTED, 0);
    // Built with 66,001 next hops, the table holds the next hops themselves: no
    // fronts, 32-bit values everywhere, kids included.
    assert_eq!(built.narrow, 2);
    for c in [0x1400, 0x1480, 0x14ff, 0x1500] {
        assert_eq!(
            (link(&built, c) & FRONTED, width_of(link(&built, c))),
            (0, 2),
            "{:#x}",
            c
        );
    }
    // SAFETY: 20.255's chunk has a kid at slot 0.
    assert_eq!(width_of(unsafe { kid_link(ptr_of(link(&built, 0x14ff)), 0) }), 2);
    for t in [&grown, &grown16, &built] {
        assert_probes(t, &probes);
    }
}

#[test]
fn full_groups_with_many_kid_and_fronted_keys_answer_each_key() {
    // 10.1/16: /24 runs with kids at slots 2 (a /25), 7 (a /30 over the cover) and
    // 255 (a /32); 10.21/16: /24s whose next hops have indices past 254, so in a
    // table with byte values that chunk is behind a front.
    let routes: Vec<(u32, u8, u32)> = [
        (ip(10, 1, 0, 0), 16, 1),
        (ip(10, 1, 2, 0), 24, 2),
        (ip(10, 1, 2, 128), 25, 3),
        (ip(10, 1, 7, 0), 30, 4),
        (ip(10, 1, 255, 255), 32, 5),
    ]
    .into_iter()
    .chain((0..300u32).map(|x| (ip(10, 20 + (x / 256) as u8, (x % 256) as u8, 0), 24, 1000 + x)))
    .collect();
    let probes: [(u32, u32); 10] = [
        (ip(10, 1, 2, 200), 3),
        (ip(10, 1, 2, 5), 2),
        (ip(10, 1, 7, 2), 4),
        (ip(10, 1, 7, 9), 1),
        (ip(10, 1, 255, 255), 5),
        (ip(10, 1, 255, 254), 1),
        (ip(10, 21, 0, 9), 1256),
        (ip(10, 21, 43, 1), 1299),
        (ip(10, 20, 17, 3), 1017),
        (ip(11, 0, 0, 1), NONE),
    ];
    // Runs of kid and fronted keys, at both ends of the group.
    let order = [
        0, 2, 4, 6, 1, 3, 5, 7, 8, 9, 0, 0, 2, 2, 4, 4, 6, 7, 6, 7, 1, 9, 8, 3, 5, 0, 2, 4, 6, 7, 2, 4,
    ];
    let keys: Vec<u32> = order.iter().map(|&o| probes[o].0).collect();
    let want: Vec<u32> = order.iter().map(|&o| probes[o].1).collect();
    let byte_table = Dir16::new();
    let wide_table = Dir16::with_values(1);
    for t in [&byte_table, &wide_table] {
        for &(a, l, nh) in &routes {
            t.insert(a, l, nh);
        }
    }
    for t in [&byte_table, &wide_table, &Dir16::build(&routes)] {
        let mut out = vec![0u32; 32];
        t.lookup_batch(&keys, &mut out);
        assert_eq!(out, want);
        // And in a shorter group.
        t.lookup_batch(&keys[..7], &mut out[..7]);
        assert_eq!(out[..7], want[..7]);
    }
    // The byte table's 10.21/16 is fronted; the bulk-built one has 16-bit values.
    let fronted = byte_table.link(ip(10, 21, 0, 0) as usize >> 16);
    assert_ne!(fronted & FRONTED, 0);
    assert_eq!(Dir16::build(&routes).narrow, 1);
}

#[test]
fn keys_whose_next_hop_is_the_largest_get_it() {
    // The largest next hop (`u32::MAX - 1`, which earlier versions used as the
    // batch's redo marker, and tables of 32-bit next hops use as their kid mark) as an
    // ordinary next hop, as the default route and under a kid.
    const SENTINEL: u32 = u32::MAX - 1;
    let t = Dir16::new();
    t.insert(0x0a01_0100, 24, SENTINEL);
    t.insert(0x0a01_0204, 30, SENTINEL);
    t.insert(0x0a01_0200, 24, 3);
    let keys = [0x0a01_0101, 0x0a01_0205, 0x0a01_0209, 0x0a01_0001, 0x0b00_0000];
    let mut out = [0u32; 5];
    t.lookup_batch(&keys, &mut out);
    assert_eq!(out, [SENTINEL, SENTINEL, 3, NONE, NONE]);
    t.insert(0, 0, SENTINEL);
    t.lookup_batch(&keys, &mut out);
    assert_eq!(out, [SENTINEL, SENTINEL, 3, SENTINEL, SENTINEL]);
}

#[test]
fn batch_answers_follow_default_route_changes_in_chunks_and_kids() {
    // 10.1.0.0/16 is a chunk with routes, NONE slots and a kid (10.1.2.0/24 has a
    // /30 under it); 10.2.0.0/16 is uniform NONE.
    let t = Dir16::new();
    t.insert(0x0a01_0100, 24, 4);
    t.insert(0x0a01_0204, 30, 5);
    let keys = [0x0a01_0101, 0x0a01_0001, 0x0a01_0205, 0x0a01_0209, 0x0a02_0000];
    let batch = |t: &Dir16| {
        let mut out = [0u32; 5];
        t.lookup_batch(&keys, &mut out);
        out
    };
    assert_eq!(batch(&t), [4, NONE, 5, NONE, NONE]);
    t.insert(0, 0, 9);
    assert_eq!(batch(&t), [4, 9, 5, 9, 9]);
    t.insert(0, 0, 11);
    assert_eq!(batch(&t), [4, 11, 5, 11, 11]);
    let built = Dir16::build(&t.routes());
    assert_eq!(batch(&built), [4, 11, 5, 11, 11]);
    t.remove(0, 0);
    assert_eq!(batch(&t), [4, NONE, 5, NONE, NONE]);
    built.clear();
    assert_eq!(batch(&built), [NONE; 5]);
}

/// A next hop's dictionary index, freed when its last route goes, is handed to a new
/// next hop only once every reader that could still read it through a replaced chunk
/// has unpinned; until then such a reader keeps getting the old next hop.
#[test]
fn a_freed_dictionary_index_is_reused_only_after_held_guards_unpin() {
    let index_of = |t: &Dir16, nh: u32| t.writer.lock().unwrap().dict.index(nh);
    let t = Dir16::new();
    t.insert(ip(10, 1, 2, 0), 24, 7);
    assert_eq!(index_of(&t, 7), Some(1));
    let guard = epoch::pin();
    // The first level as this reader loaded it: its entries link chunks that stay
    // allocated while the guard is pinned.
    let held = t.top.load(&guard).duplicate();
    assert_eq!(t.remove(ip(10, 1, 2, 0), 24), Some(7));
    assert_eq!(index_of(&t, 7), None);
    t.insert(ip(11, 1, 2, 0), 24, 9);
    for _ in 0..1000 {
        epoch::pin().flush();
    }
    t.insert(ip(12, 1, 2, 0), 24, 5);
    // Index 1 is not reused while the guard is held, however often the collector runs.
    assert_eq!(index_of(&t, 9), Some(2));
    assert_eq!(index_of(&t, 5), Some(3));
    assert_eq!(t.lookup_pinned(&held, ip(10, 1, 2, 9)), 7);
    assert_eq!(t.lookup(ip(10, 1, 2, 9)), NONE);
    drop(guard);
    // (Other tests' threads pin too, so the epoch may need a few rounds to advance.)
    let mut rounds = 0;
    while t.writer.lock().unwrap().dict.free.lock().unwrap().is_empty() {
        rounds += 1;
        assert!(rounds < 1_000_000, "the freed index never came back");
        epoch::pin().flush();
        std::thread::yield_now();
    }
    t.insert(ip(13, 1, 2, 0), 24, 6);
    assert_eq!(index_of(&t, 6), Some(1));
    assert_eq!(
        t.writer.lock().unwrap().dict.next,
        4,
        "no new index was handed out"
    );
    assert_probes(
        &t,
        &[
            (ip(10, 1, 2, 9), NONE),
            (ip(11, 1, 2, 9), 9),
            (ip(12, 1, 2, 9), 5),
            (ip(13, 1, 2, 9), 6),
        ],
    );
}
