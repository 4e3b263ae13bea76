use super::reference::NaiveLpm;
use super::*;
use proptest::prelude::*;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering;
use std::sync::Arc;

fn ip(a: u8, b: u8, c: u8, d: u8) -> u32 {
    u32::from_be_bytes([a, b, c, d])
}

#[test]
fn empty_table_has_no_routes() {
    let t = Ipv4Lpm::new();
    assert_eq!(t.lookup(ip(1, 2, 3, 4)), None);
    assert_eq!(t.len(), 0);
    assert!(t.routes().is_empty());
    let mut out = [0u32; 3];
    t.lookup_batch(&[0, u32::MAX, ip(10, 0, 0, 1)], &mut out);
    assert_eq!(out, [Ipv4Lpm::NO_ROUTE; 3]);
}

#[test]
fn nesting_default_and_host_routes() {
    let t = Ipv4Lpm::new();
    assert_eq!(t.insert(0, 0, 100), None);
    assert_eq!(t.insert(ip(10, 0, 0, 0), 8, 1), None);
    assert_eq!(t.insert(ip(10, 1, 0, 0), 16, 2), None);
    assert_eq!(t.insert(ip(10, 1, 2, 0), 24, 3), None);
    assert_eq!(t.insert(ip(10, 1, 2, 128), 25, 4), None);
    assert_eq!(t.insert(ip(10, 1, 2, 200), 32, 5), None);
    // Host bits are ignored.
    assert_eq!(t.insert(ip(10, 2, 255, 255), 16, 6), None);

    assert_eq!(t.lookup(ip(9, 9, 9, 9)), Some(100));
    assert_eq!(t.lookup(ip(10, 200, 0, 1)), Some(1));
    assert_eq!(t.lookup(ip(10, 1, 9, 9)), Some(2));
    assert_eq!(t.lookup(ip(10, 1, 2, 1)), Some(3));
    assert_eq!(t.lookup(ip(10, 1, 2, 127)), Some(3));
    assert_eq!(t.lookup(ip(10, 1, 2, 128)), Some(4));
    assert_eq!(t.lookup(ip(10, 1, 2, 199)), Some(4));
    assert_eq!(t.lookup(ip(10, 1, 2, 200)), Some(5));
    assert_eq!(t.lookup(ip(10, 1, 2, 201)), Some(4));
    assert_eq!(t.lookup(ip(10, 2, 0, 0)), Some(6));
    assert_eq!(t.len(), 7);
    assert_eq!(
        t.routes(),
        vec![
            (0, 0, 100),
            (ip(10, 0, 0, 0), 8, 1),
            (ip(10, 1, 0, 0), 16, 2),
            (ip(10, 1, 2, 0), 24, 3),
            (ip(10, 1, 2, 128), 25, 4),
            (ip(10, 1, 2, 200), 32, 5),
            (ip(10, 2, 0, 0), 16, 6),
        ]
    );

    // A shorter prefix inserted after the longer ones does not override them.
    assert_eq!(t.insert(ip(10, 1, 0, 0), 15, 7), None);
    assert_eq!(t.lookup(ip(10, 1, 2, 200)), Some(5));
    assert_eq!(t.lookup(ip(10, 0, 0, 1)), Some(7));
    assert_eq!(t.lookup(ip(10, 1, 9, 9)), Some(2));

    // Replacing returns the old next hop.
    assert_eq!(t.insert(ip(10, 1, 2, 128), 25, 40), Some(4));
    assert_eq!(t.lookup(ip(10, 1, 2, 130)), Some(40));
    assert_eq!(t.lookup(ip(10, 1, 2, 200)), Some(5));
    assert_eq!(t.len(), 8);
}

#[test]
fn deletes_restore_covering_prefixes() {
    let t = Ipv4Lpm::new();
    t.insert(ip(10, 0, 0, 0), 8, 1);
    t.insert(ip(10, 1, 0, 0), 16, 2);
    t.insert(ip(10, 1, 2, 0), 24, 3);
    t.insert(ip(10, 1, 2, 128), 25, 4);
    t.insert(ip(10, 1, 2, 200), 32, 5);

    assert_eq!(t.remove(ip(10, 1, 2, 128), 25), Some(4));
    assert_eq!(t.lookup(ip(10, 1, 2, 129)), Some(3));
    assert_eq!(t.lookup(ip(10, 1, 2, 200)), Some(5));
    assert_eq!(t.remove(ip(10, 1, 2, 128), 25), None);

    assert_eq!(t.remove(ip(10, 1, 2, 0), 24), Some(3));
    assert_eq!(t.lookup(ip(10, 1, 2, 129)), Some(2));
    assert_eq!(t.lookup(ip(10, 1, 2, 200)), Some(5));

    assert_eq!(t.remove(ip(10, 1, 2, 200), 32), Some(5));
    assert_eq!(t.lookup(ip(10, 1, 2, 200)), Some(2));
    // The last prefix longer than /18 under 10.1.0.0/18 is gone: its nodes are freed.
    assert_eq!(t.memory_bytes(), Ipv4Lpm::new().memory_bytes());

    assert_eq!(t.remove(ip(10, 1, 0, 0), 16), Some(2));
    assert_eq!(t.lookup(ip(10, 1, 2, 200)), Some(1));
    assert_eq!(t.remove(ip(10, 0, 0, 0), 8), Some(1));
    assert_eq!(t.lookup(ip(10, 1, 2, 200)), None);
    assert!(t.is_empty());

    // The default route sits below everything and survives removals above it.
    t.insert(0, 0, 9);
    t.insert(ip(192, 168, 0, 0), 16, 8);
    assert_eq!(t.lookup(ip(192, 168, 3, 3)), Some(8));
    t.remove(ip(192, 168, 0, 0), 16);
    assert_eq!(t.lookup(ip(192, 168, 3, 3)), Some(9));
    assert_eq!(t.remove(0, 0), Some(9));
    assert_eq!(t.lookup(ip(192, 168, 3, 3)), None);
}

#[test]
fn removing_a_short_prefix_keeps_longer_ones_and_skips_siblings() {
    let t = Ipv4Lpm::new();
    t.insert(ip(20, 0, 0, 0), 8, 1);
    t.insert(ip(20, 16, 0, 0), 12, 2);
    t.insert(ip(20, 16, 4, 0), 22, 3);
    t.insert(ip(20, 16, 5, 7), 32, 4);
    assert_eq!(t.remove(ip(20, 16, 0, 0), 12), Some(2));
    assert_eq!(t.lookup(ip(20, 17, 0, 0)), Some(1));
    assert_eq!(t.lookup(ip(20, 16, 6, 1)), Some(3));
    assert_eq!(t.lookup(ip(20, 16, 5, 7)), Some(4));
    assert_eq!(t.lookup(ip(20, 16, 5, 8)), Some(3));
    // Re-inserting the /12 fills only what the /22 and /32 do not own.
    t.insert(ip(20, 16, 0, 0), 12, 5);
    assert_eq!(t.lookup(ip(20, 17, 0, 0)), Some(5));
    assert_eq!(t.lookup(ip(20, 16, 5, 8)), Some(3));
    assert_eq!(t.lookup(ip(20, 16, 5, 7)), Some(4));
}

#[test]
fn nodes_are_freed_when_their_last_prefix_goes() {
    let t = Ipv4Lpm::new();
    let empty = t.memory_bytes();
    t.insert(ip(1, 1, 1, 1), 32, 1);
    t.insert(ip(1, 1, 2, 1), 32, 2);
    let two = t.memory_bytes();
    assert!(two > empty);
    t.remove(ip(1, 1, 1, 1), 32);
    assert!(t.memory_bytes() < two);
    t.insert(ip(7, 7, 7, 7), 30, 3);
    assert_eq!(t.lookup(ip(7, 7, 7, 5)), Some(3));
    assert_eq!(t.lookup(ip(7, 7, 7, 8)), None);
    assert_eq!(t.lookup(ip(1, 1, 1, 1)), None);
    assert_eq!(t.lookup(ip(1, 1, 2, 1)), Some(2));
    t.remove(ip(1, 1, 2, 1), 32);
    t.remove(ip(7, 7, 7, 7), 30);
    assert_eq!(t.memory_bytes(), empty);
}

#[test]
fn large_next_hops_and_batch_lookup() {
    let t = Ipv4Lpm::new();
    t.insert(ip(10, 0, 0, 0), 8, Ipv4Lpm::MAX_NEXT_HOP);
    t.insert(ip(10, 0, 0, 64), 26, 70_000);
    let addrs: Vec<u32> = (0..100u32)
        .map(|i| ip(10, 0, 0, i as u8))
        .chain([ip(11, 0, 0, 0)])
        .collect();
    let mut out = vec![0u32; addrs.len()];
    t.lookup_batch(&addrs, &mut out);
    for (i, &o) in out.iter().enumerate() {
        let want = if i == 100 {
            Ipv4Lpm::NO_ROUTE
        } else if (64..100).contains(&i) {
            70_000
        } else {
            Ipv4Lpm::MAX_NEXT_HOP
        };
        assert_eq!(o, want, "address index {}", i);
    }
}

#[test]
fn clear_removes_everything() {
    let t = Ipv4Lpm::new();
    t.insert(0, 0, 1);
    t.insert(ip(10, 0, 0, 0), 8, 2);
    t.insert(ip(10, 0, 0, 1), 32, 3);
    t.clear();
    assert!(t.is_empty());
    assert_eq!(t.lookup(ip(10, 0, 0, 1)), None);
    assert_eq!(t.lookup(ip(99, 0, 0, 1)), None);
    assert_eq!(t.memory_bytes(), Ipv4Lpm::new().memory_bytes());
}

#[derive(Clone, Debug)]
enum Op {
    Insert(u32, u8, u32),
    Remove(u32, u8),
    Lookup(u32),
}

/// Addresses from a small set of bases so that prefixes nest and collide often.
fn addr_strategy() -> impl Strategy<Value = u32> {
    prop_oneof![
        any::<u32>(),
        (0usize..4, any::<u8>(), any::<u8>()).prop_map(|(b, x, y)| {
            let bases = [
                ip(10, 0, 0, 0),
                ip(10, 1, 2, 0),
                ip(192, 168, 0, 0),
                ip(10, 1, 3, 0),
            ];
            bases[b] | (u32::from(x) & 0x3) << 8 | u32::from(y)
        }),
    ]
}

fn len_strategy() -> impl Strategy<Value = u8> {
    prop_oneof![0u8..=32, 20u8..=32, Just(24), Just(8)]
}

fn op_strategy() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (addr_strategy(), len_strategy(), 0u32..1000).prop_map(|(a, l, n)| Op::Insert(a, l, n)),
        2 => (addr_strategy(), len_strategy()).prop_map(|(a, l)| Op::Remove(a, l)),
        3 => addr_strategy().prop_map(Op::Lookup),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn matches_reference(ops in proptest::collection::vec(op_strategy(), 1..200),
                         probes in proptest::collection::vec(addr_strategy(), 64)) {
        let t = Ipv4Lpm::new();
        let mut r = NaiveLpm::new();
        let mut installed = Vec::new();
        for op in &ops {
            match *op {
                Op::Insert(a, l, n) => {
                    prop_assert_eq!(t.insert(a, l, n), r.insert(a, l, n));
                    installed.push(a);
                }
                Op::Remove(a, l) => prop_assert_eq!(t.remove(a, l), r.remove(a, l)),
                Op::Lookup(a) => prop_assert_eq!(t.lookup(a), r.lookup(a)),
            }
        }
        prop_assert_eq!(t.routes(), r.routes());
        prop_assert_eq!(t.len(), r.len());
        // Probe around every prefix ever installed and at random addresses, singly and
        // in a batch.
        let mut addrs: Vec<u32> = probes.clone();
        for &a in &installed {
            addrs.extend([a, a.wrapping_sub(1), a.wrapping_add(1), a | 0xff, a ^ 0x80]);
        }
        let mut out = vec![0u32; addrs.len()];
        t.lookup_batch(&addrs, &mut out);
        for (&a, &o) in addrs.iter().zip(&out) {
            let want = r.lookup(a);
            prop_assert_eq!(t.lookup(a), want);
            prop_assert_eq!(o, want.unwrap_or(Ipv4Lpm::NO_ROUTE));
        }
        // Removing everything leaves an empty table and no nodes.
        for (a, l, _) in r.routes() {
            prop_assert!(t.remove(a, l).is_some());
        }
        prop_assert!(t.is_empty());
        prop_assert_eq!(t.memory_bytes(), Ipv4Lpm::new().memory_bytes());
        for &a in &addrs {
            prop_assert_eq!(t.lookup(a), None);
        }
    }
}

/// Deterministic pseudo-random numbers for the concurrency test (xorshift).
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 16) as u32
    }
}

#[test]
fn readers_never_see_wrong_answers_for_unchanged_prefixes() {
    let t = Arc::new(Ipv4Lpm::new());
    // Stable routes the readers check.
    t.insert(0, 0, 9);
    t.insert(ip(10, 0, 0, 0), 8, 1);
    t.insert(ip(10, 1, 2, 128), 25, 3);
    t.insert(ip(10, 1, 3, 7), 32, 4);
    // (address, expected) pairs. 10.2.x.y with y >= 128 is only under 10/8, while the
    // writer churns long prefixes in the lower halves of the same /24s, creating,
    // retiring and reusing their groups; 10.1.2.200 shares a group with churned entries.
    let mut probes = vec![
        (ip(10, 1, 2, 200), 3),
        (ip(10, 1, 3, 7), 4),
        (ip(11, 0, 0, 1), 9),
        (ip(10, 9, 9, 9), 1),
    ];
    for x in 0..16u8 {
        probes.push((ip(10, 2, x, 128 + x), 1));
        probes.push((ip(10, 2, x, 255), 1));
    }
    let probes = Arc::new(probes);
    let done = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let (t, probes, done) = (t.clone(), probes.clone(), done.clone());
            std::thread::spawn(move || {
                let addrs: Vec<u32> = probes.iter().map(|p| p.0).collect();
                let mut out = vec![0u32; addrs.len()];
                let mut rounds = 0u64;
                while !done.load(Ordering::Acquire) || rounds < 100 {
                    for &(a, want) in probes.iter() {
                        assert_eq!(t.lookup(a), Some(want), "lookup {:08x}", a);
                    }
                    t.lookup_batch(&addrs, &mut out);
                    for (&o, &(a, want)) in out.iter().zip(probes.iter()) {
                        assert_eq!(o, want, "batch lookup {:08x}", a);
                    }
                    rounds += 1;
                }
                rounds
            })
        })
        .collect();

    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut live: Vec<(u32, u8)> = Vec::new();
    for step in 0..20_000u32 {
        if live.len() > 40 || (step % 3 == 2 && !live.is_empty()) {
            let i = rng.next() as usize % live.len();
            let (a, l) = live.swap_remove(i);
            assert!(t.remove(a, l).is_some());
        } else {
            let r = rng.next();
            let (a, l) = if r & 3 == 0 {
                // Short prefixes elsewhere: 30.0.0.0/8 space, lengths 9..=24.
                (
                    ip(30, 0, 0, 0) | (rng.next() & 0x00ff_ffff),
                    9 + (r >> 8) as u8 % 16,
                )
            } else if r & 3 == 1 {
                // Inside 10.1.2.0/25, next to the stable /25.
                (ip(10, 1, 2, 0) | (rng.next() & 0x7f), 26 + (r >> 8) as u8 % 7)
            } else {
                (
                    ip(10, 2, (rng.next() % 16) as u8, 0) | (rng.next() & 0x7f),
                    25 + (r >> 8) as u8 % 8,
                )
            };
            if t.insert(a, l, 1000 + step).is_none() {
                live.push((a.masked(l), l));
            }
        }
    }
    done.store(true, Ordering::Release);
    for r in readers {
        assert!(r.join().expect("reader panicked") >= 100);
    }
    for (a, l) in live {
        t.remove(a, l);
    }
    assert_eq!(t.len(), 4);
}
