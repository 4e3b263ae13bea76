//! Switch steps: one lookup for a chain of equality tests on the same word.
//!
//! An access list of rules on one field compiles to a chain of steps that test the
//! same word (same region, offset, mask and short result) against one value each, a
//! failed test going on to the next: 100 `deny src net 11.X.Y.0/24` rules are 100
//! tests a packet that matches none. This pass, run on the optimised program, gives
//! such chains one hash table each, and the steps of a chain a *switch step* that
//! reads the word once and looks up where the first member from it on that the word
//! matches sends the packet.
//!
//! # Chains
//!
//! A member's *next* is the step its "no" leads to, when that step tests the same word.
//! Steps jump forward, so following next ends, at the chain's last member, whose "no"
//! is the chain's *default*. Several steps may have the same next (the optimiser's
//! copies of a step, both failing into the same later step), so the members form
//! in-trees rather than lines; they are cut into disjoint *segments*, the longest
//! first: from each member that no member fails into (a leaf), along next, up to a
//! member already in a segment. A segment's members are numbered by position from 0;
//! its *exit* is the last one's "no" (the default, or a member of another segment).
//!
//! Entering at the member at position `j` of a segment, the tests taken one by one
//! would answer: a region too short for the mask makes every member answer its
//! `short_match` (the same for all), so "no" goes all the way to the default of the
//! whole tree and "yes" to the entered member's "yes"; otherwise the first member at
//! or after `j` whose value equals the masked word sends the packet to its "yes", and
//! if none does, the exit. A switch step does exactly that: the table maps a value to
//! its members' positions and "yes" targets, and the lookup takes the first position
//! at or after `j`. An exit into another segment lands on that member's own step (a
//! switch again when the rest of its segment is long enough).
//!
//! A member gets a switch step when at least [`MIN_MEMBERS`] members of its segment
//! remain from it on; every jump to it, from anywhere (the start, other tests, other
//! switches, tables), goes to the switch instead, so its test, and those of the
//! members after it that only the chain reached, are dropped. Members nearer the end
//! of the segment stay tests. A chain of 100 members becomes one switch (and, if
//! other steps jump into it, switches for the members they jump to); those entries
//! share the segment's one table.
//!
//! # Tables
//!
//! Open addressing with linear probing: slots of (value, position, target), 16
//! bytes, at least four times as many as the segment has members, a power of two; a
//! value that occurs at several positions takes a slot for each, inserted in position
//! order, so that probing meets them in that order. A lookup hashes the masked word
//! (a multiply, the top bits), then probes until a slot with the value and a position
//! at or after the entry's, or an empty slot. The multiplier is the first of four
//! fixed ones whose longest run of full slots is at most 8, else the one with the
//! shortest: that run bounds the probes a packet can cause, whatever its word.
//!
//! Measured against a binary search of (value, position) pairs sorted (the standard
//! library's `partition_point`), in a loop of lookups of 11.X.Y.0 keys on this
//! machine (2.1 GHz, shared), a lookup costs in ns, for words in no entry / in one:
//! 8 entries 5-9 / 5-8 against 7-13 / 8-13; 100 entries 5-9 / 3-9 against 13-21 /
//! 12-23; 10,000 entries 9-10 / 15-17 against 26-45 / 29-55. Half as many slots (a
//! load up to 1/2) cost about 1.5 times as much for words in no entry; a first
//! entry per value in its slot and the others in a list of their own, no less.
//!
//! # Bounds
//!
//! Each step of the optimised program is in at most one segment, so the tables hold
//! at most one entry per step in all, in fewer than 8 slots each (the next power of
//! two of 4 per entry): under 128 bytes a step, against 32 for the step itself (the
//! 100-rule filter: 512 slots, 8 KiB). There is at most one switch step per step.
//! A lookup probes at most one slot more than the table's longest run of full slots
//! (that run: 2 slots for 100 or 1,000 `src net` rules, 5 for 10,000). The pass takes time
//! linear in the program's steps, plus sorting the leaves. Measured: 5-10 us for
//! 100 `deny src net` rules (about 2 % of their compile), 40-70 us for 1,000,
//! 0.7-0.9 ms for 10,000 (2-3 %); 0.1-0.2 ms for 1,000 `src net && tcp dst port`
//! rules (0.1-0.2 % of theirs).

use super::{read_word, Base, Insn, Program, Target, Test, View};

/// Members left in a segment from a step on for that step to get a switch. Measured
/// on a chain of `deny src net` rules and packets matching none: a test in the chain
/// costs about 4 ns, a switch about 12 (reading the word included), so a switch for
/// 2 members loses (15.7 against 14.7 ns a packet, with one more test after), for 3
/// breaks even (16.6 against 18.5 ns, or the same), for 4 gains (16.4 against 22.6).
pub(crate) const MIN_MEMBERS: usize = 4;

/// An empty slot's position.
const EMPTY: u32 = u32::MAX;

/// Hash multipliers tried for a table (odd, well spread bits).
const MULTIPLIERS: [u32; 4] = [0x9E37_79B1, 0x85EB_CA77, 0xC2B2_AE3D, 0x27D4_EB2F];

/// A switch step: the entered member's test, read once, and its segment's table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Switch {
    /// The entered member's test: the word's region, offset, mask and short result
    /// (the value is that member's; the others' are in the table).
    pub(super) test: Test,
    pub(super) table: u32,
    /// The entered member's position in its segment: earlier members are not tried.
    pub(super) from: u32,
    /// Where a region too short for the mask goes.
    pub(super) short: Target,
    /// Where a word that no member from `from` on matches goes: the segment's exit.
    pub(super) default: Target,
    /// For [`Program::unparse`]: shown just before test step `at` (after the last
    /// one if `at` is their number), where its member was.
    pub(super) at: u32,
}

impl Switch {
    /// Where the packet seen as `v` goes.
    #[inline(always)]
    pub(super) fn next(&self, tables: &[Table], v: &View<'_>) -> Target {
        match read_word(v.region(self.test.base), self.test.offset, self.test.mask) {
            None => self.short,
            Some(w) => match tables.get(self.table as usize) {
                Some(t) => t.find(w & self.test.mask, self.from).unwrap_or(self.default),
                None => self.default,
            },
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Slot {
    value: u32,
    /// The member's position in its segment; [`EMPTY`] for an empty slot.
    pos: u32,
    /// The member's "yes".
    target: Target,
}

/// A segment's members by value (see the module doc).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Table {
    /// A power of two of them, at least 4 and at least four times the entries.
    slots: Box<[Slot]>,
    mul: u32,
    /// 32 minus log2 of the slots: the hash is the product's top bits.
    shift: u32,
}

impl Table {
    /// The table of `members` (value, position, target), positions increasing.
    fn new(members: &[(u32, u32, Target)]) -> Table {
        let size = (4 * members.len()).next_power_of_two().max(4);
        let build = |mul: u32| {
            let mut t = Table {
                slots: vec![
                    Slot {
                        value: 0,
                        pos: EMPTY,
                        target: Target::Drop,
                    };
                    size
                ]
                .into_boxed_slice(),
                mul,
                shift: 32 - size.trailing_zeros(),
            };
            for &(value, pos, target) in members {
                let mut h = t.home(value);
                while t.slots[h].pos != EMPTY {
                    h = (h + 1) & (size - 1);
                }
                t.slots[h] = Slot { value, pos, target };
            }
            t
        };
        let mut best = build(MULTIPLIERS[0]);
        let mut run = best.longest_run();
        for mul in &MULTIPLIERS[1..] {
            if run <= 8 {
                break;
            }
            let t = build(*mul);
            let r = t.longest_run();
            if r < run {
                (best, run) = (t, r);
            }
        }
        best
    }

    #[inline(always)]
    fn home(&self, value: u32) -> usize {
        (value.wrapping_mul(self.mul) >> self.shift) as usize
    }

    /// The longest run of full slots (around the end too): a lookup probes at most
    /// one more.
    pub(super) fn longest_run(&self) -> usize {
        let n = self.slots.len();
        let (mut longest, mut run) = (0, 0);
        for k in 0..2 * n {
            if self.slots[k % n].pos == EMPTY {
                run = 0;
            } else {
                run += 1;
                longest = longest.max(run);
            }
        }
        longest.min(n)
    }

    /// The target of the first member at or after position `from` whose value is
    /// `w`.
    #[inline(always)]
    fn find(&self, w: u32, from: u32) -> Option<Target> {
        let mask = self.slots.len() - 1;
        let mut h = self.home(w);
        // At most a quarter of the slots are full: an empty one ends the probe.
        loop {
            let s = self.slots.get(h)?;
            if s.pos == EMPTY {
                return None;
            }
            if s.value == w && s.pos >= from {
                return Some(s.target);
            }
            h = (h + 1) & mask;
        }
    }

    /// The number of members at or after position `from`, and the first position.
    pub(super) fn count_from(&self, from: u32) -> (usize, u32) {
        let full = self.slots.iter().filter(|s| s.pos != EMPTY);
        (
            full.clone().filter(|s| s.pos >= from).count(),
            full.map(|s| s.pos).min().unwrap_or(0),
        )
    }

    /// The members (position, value, target) in position order, from position
    /// `from` on.
    pub(super) fn members_from(&self, from: u32) -> Vec<(u32, u32, Target)> {
        let mut m: Vec<(u32, u32, Target)> = self
            .slots
            .iter()
            .filter(|s| s.pos != EMPTY && s.pos >= from)
            .map(|s| (s.pos, s.value, s.target))
            .collect();
        m.sort_unstable_by_key(|e| e.0);
        m
    }
}

/// What a chain member's test reads: region, offset, mask, short result.
fn key(t: &Test) -> (Base, u32, u32, bool) {
    (t.base, t.offset, t.mask, t.short_match)
}

/// A step of the result, by the plain step it stands for.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Node {
    Test(usize),
    Switch(usize),
}

/// `p` with switch steps for its chains of tests on one word, where at least `min`
/// members of a segment remain (see the module doc). `p` must have none yet.
pub(super) fn add_switches(p: Program, min: usize) -> Program {
    let n = p.insns.len();
    if !p.switches.is_empty() || !matches!(p.start, Target::Step(_)) || n < min.max(2) {
        return p;
    }
    let insns = &p.insns;
    // Each step's next member, if its "no" tests the same word.
    let next: Vec<Option<usize>> = insns
        .iter()
        .map(|i| match i.no {
            Target::Step(j) if i.test.mask != 0 => {
                let j = j as usize;
                (j < n && key(&insns[j].test) == key(&i.test)).then_some(j)
            }
            _ => None,
        })
        .collect();
    let mut has_pred = vec![false; n];
    for &j in next.iter().flatten() {
        has_pred[j] = true;
    }
    // Members left on the path from each step to its tree's root, and where that
    // path's last "no" goes. Steps jump forward: `next` is done first.
    let mut rem = vec![1usize; n];
    let mut root_no: Vec<Target> = insns.iter().map(|i| i.no).collect();
    for i in (0..n).rev() {
        if let Some(j) = next[i] {
            rem[i] = 1 + rem[j];
            root_no[i] = root_no[j];
        }
    }
    // Segments, from the leaves of the longest paths first.
    let mut leaves: Vec<usize> = (0..n)
        .filter(|&i| !has_pred[i] && next[i].is_some() && rem[i] >= min)
        .collect();
    leaves.sort_by_key(|&i| (std::cmp::Reverse(rem[i]), i));
    // Per step: (segment, position) once in one.
    let mut place: Vec<Option<(usize, u32)>> = vec![None; n];
    let mut segments: Vec<Vec<usize>> = Vec::new();
    for leaf in leaves {
        let mut seg = Vec::new();
        let mut at = Some(leaf);
        while let Some(i) = at {
            if place[i].is_some() {
                break;
            }
            place[i] = Some((segments.len(), seg.len() as u32));
            seg.push(i);
            at = next[i];
        }
        segments.push(seg);
    }
    // Which steps get a switch.
    let switch_at: Vec<bool> = (0..n)
        .map(|i| place[i].is_some_and(|(s, pos)| segments[s].len() - pos as usize >= min))
        .collect();
    if !switch_at.iter().any(|&b| b) {
        return p;
    }
    // What a jump to step `i` now reaches.
    let node = |t: Target| match t {
        Target::Step(i) if switch_at[i as usize] => Some(Node::Switch(i as usize)),
        Target::Step(i) => Some(Node::Test(i as usize)),
        _ => None,
    };
    // The targets of a switch at step `i` other than its table's.
    let switch_exits = |i: usize| {
        let (s, _) = place[i].unwrap_or((0, 0));
        let last = segments[s][segments[s].len() - 1];
        let short = if insns[i].test.short_match {
            insns[i].yes
        } else {
            root_no[i]
        };
        (short, insns[last].no)
    };
    // Live steps, in order: every edge goes forward in the plain numbering (a switch's
    // targets are its members' "yes", its exit and the tree's default, all after it).
    let mut live_test = vec![false; n];
    let mut live_switch = vec![false; n];
    // Per segment, the first position a live switch enters at: the table starts there.
    let mut table_from: Vec<Option<u32>> = vec![None; segments.len()];
    let mark = |t: Target, live_test: &mut [bool], live_switch: &mut [bool]| match node(t) {
        Some(Node::Test(i)) => live_test[i] = true,
        Some(Node::Switch(i)) => live_switch[i] = true,
        None => {}
    };
    mark(p.start, &mut live_test, &mut live_switch);
    for i in 0..n {
        if live_test[i] {
            mark(insns[i].yes, &mut live_test, &mut live_switch);
            mark(insns[i].no, &mut live_test, &mut live_switch);
        }
        if live_switch[i] {
            let (short, exit) = switch_exits(i);
            mark(short, &mut live_test, &mut live_switch);
            mark(exit, &mut live_test, &mut live_switch);
            let Some((s, pos)) = place[i] else { continue };
            if table_from[s].is_none() {
                // The first live switch of its segment: its entries from here on.
                table_from[s] = Some(pos);
                for &m in &segments[s][pos as usize..] {
                    mark(insns[m].yes, &mut live_test, &mut live_switch);
                }
            }
        }
    }
    // Numbers: live tests in order, then live switches in order.
    let mut test_no = vec![0u32; n];
    let mut switch_no = vec![0u32; n];
    let mut at = vec![0u32; n];
    let (mut tests, mut switches) = (0u32, 0u32);
    for i in 0..n {
        at[i] = tests;
        if live_test[i] {
            test_no[i] = tests;
            tests += 1;
        }
        if live_switch[i] {
            switch_no[i] = switches;
            switches += 1;
        }
    }
    let remap = |t: Target| match node(t) {
        Some(Node::Test(i)) => Target::Step(test_no[i]),
        Some(Node::Switch(i)) => Target::Step(tests + switch_no[i]),
        None => t,
    };
    // Tables of the segments with live switches.
    let mut table_no: Vec<Option<u32>> = vec![None; segments.len()];
    let mut tables = Vec::new();
    for (s, seg) in segments.iter().enumerate() {
        let Some(from) = table_from[s] else { continue };
        let members: Vec<(u32, u32, Target)> = seg[from as usize..]
            .iter()
            .enumerate()
            .map(|(k, &m)| (insns[m].test.value, from + k as u32, remap(insns[m].yes)))
            .collect();
        table_no[s] = Some(tables.len() as u32);
        tables.push(Table::new(&members));
    }
    let out_insns: Vec<Insn> = (0..n)
        .filter(|&i| live_test[i])
        .map(|i| Insn {
            test: insns[i].test,
            yes: remap(insns[i].yes),
            no: remap(insns[i].no),
        })
        .collect();
    let out_switches: Vec<Switch> = (0..n)
        .filter(|&i| live_switch[i])
        .map(|i| {
            let (s, pos) = place[i].unwrap_or((0, 0));
            let (short, exit) = switch_exits(i);
            Switch {
                test: insns[i].test,
                table: table_no[s].unwrap_or(u32::MAX),
                from: pos,
                short: remap(short),
                default: remap(exit),
                at: at[i],
            }
        })
        .collect();
    Program {
        insns: out_insns,
        start: remap(p.start),
        switches: out_switches,
        tables,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A test of the words this module's tests use: key 0 and 1 share offset 2 (mask
    /// 0xffff0000 and 0xff000000), key 2 is another offset; `short` its short result.
    fn word(key: usize, value: u32, short: bool) -> Test {
        let (base, offset, mask) = [
            (Base::Data, 2, 0xffff_0000),
            (Base::Data, 2, 0xff00_0000),
            (Base::Net, 1, 0x00ff_ff00),
        ][key % 3];
        Test {
            short_match: short,
            ..Test::new(base, offset, value, mask)
        }
    }

    /// Values over the bytes the packets below are made of.
    fn value_of(a: u8, b: u8) -> u32 {
        const B: [u8; 3] = [0x00, 0x01, 0x08];
        let (a, b) = (B[a as usize % 3] as u32, B[b as usize % 3] as u32);
        a << 24 | b << 16 | a << 8 | b
    }

    /// A program built directly: steps with forward jumps, mostly failing into the
    /// next step (chains), sometimes into a later one (several steps failing into the
    /// same one: in-trees), "yes" anywhere ahead (mid-chain entries).
    fn program() -> impl Strategy<Value = Program> {
        let step = (
            prop::sample::select(vec![0usize, 0, 0, 0, 1, 2]),
            (0u8..3, 0u8..3),
            prop::sample::select(vec![false, false, false, true]),
            (0u32..8, 0u32..40),
            (0u32..8, 0u32..40),
        );
        prop::collection::vec(step, 1..40).prop_map(|steps| {
            let n = steps.len() as u32;
            // 0-3: an output or drop; 4-5: the next step; 6-7: a step ahead.
            let target = |i: u32, kind: u32, far: u32| match kind {
                0..=2 => Target::Out(kind),
                3 => Target::Drop,
                4 | 5 if i + 1 < n => Target::Step(i + 1),
                _ if i + 1 < n => Target::Step(i + 1 + far % (n - i - 1)),
                _ => Target::Drop,
            };
            let insns = steps
                .iter()
                .enumerate()
                .map(|(i, &(key, (a, b), short, (yk, yf), (nk, nf)))| {
                    let i = i as u32;
                    Insn {
                        test: word(key, value_of(a, b), short),
                        yes: target(i, yk, yf),
                        // Mostly chains.
                        no: target(i, if nk < 4 { nk } else { 4 + (nk & 1) * 2 }, nf),
                    }
                })
                .collect();
            Program {
                insns,
                start: Target::Step(0),
                switches: Vec::new(),
                tables: Vec::new(),
            }
        })
    }

    /// Packets of the bytes the values are made of, of every length up to 8.
    fn packet() -> impl Strategy<Value = Vec<u8>> {
        prop::collection::vec(prop::sample::select(vec![0x00u8, 0x01, 0x08]), 0..9)
    }

    fn view<'a>(data: &'a [u8], net: &'a [u8]) -> View<'a> {
        View {
            data,
            net,
            transp: &[],
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 1000, ..ProptestConfig::default() })]

        /// Switch steps answer every packet as the tests one by one do, in fewer
        /// steps, entered anywhere, on chains broken by other words and short
        /// results, in-trees included.
        #[test]
        fn switches_answer_as_the_tests_they_replace(
            p in program(),
            pkts in prop::collection::vec((packet(), packet()), 32),
        ) {
            for min in [1, 2, 4] {
                let s = p.clone().with_switches(min);
                for (d, n) in &pkts {
                    let v = view(d, n);
                    let (a, ta) = s.trace(&v);
                    let (b, tb) = p.trace(&v);
                    prop_assert_eq!(a, b, "min {}\n{}\nvs\n{}\n{:?}", min, s.unparse(), p.unparse(), v);
                    prop_assert_eq!(s.run(&v), a);
                    prop_assert!(ta.len() <= tb.len());
                }
                prop_assert!(s.steps() <= p.steps());
                let entries: usize = s.tables.iter().map(|t| t.members_from(0).len()).sum();
                prop_assert!(entries <= p.steps());
            }
        }
    }

    #[test]
    fn tables_of_address_rules_have_short_probes() {
        // The members of `deny src net 11.X.Y.0/24` rules.
        for (n, want) in [(8, 1), (100, 2), (1000, 2), (10_000, 5)] {
            let members: Vec<(u32, u32, Target)> = (0..n)
                .map(|k| (0x0b00_0000 | k << 8, k, Target::Out(k)))
                .collect();
            let t = Table::new(&members);
            assert_eq!(t.slots.len(), (4 * n as usize).next_power_of_two());
            assert!(t.longest_run() <= want, "{n}: {}", t.longest_run());
            for &(value, pos, target) in &members {
                assert_eq!(t.find(value, 0), Some(target));
                assert_eq!(t.find(value, pos), Some(target));
                assert_eq!(t.find(value, pos + 1), None);
            }
            assert_eq!(t.find(0x6440_0000, 0), None);
        }
    }

    #[test]
    fn an_in_tree_gets_one_table_per_segment() {
        // Steps 0-5 and 6-7 both fail into step 8, then 8-11 on: two leaves, the
        // longer path (0-11) one segment, 6-7 another, exiting into step 8.
        let t = |v: u32| word(0, v << 16, false);
        let mut insns: Vec<Insn> = (0..12)
            .map(|i| Insn {
                test: t(i),
                yes: Target::Out(i),
                no: Target::Step(i + 1),
            })
            .collect();
        insns[5].no = Target::Step(8);
        insns[11].no = Target::Drop;
        // Step 6 reached from step 0's "yes" only; step 7 repeats value 2.
        insns[0].yes = Target::Step(6);
        insns[7].test = t(2);
        let p = Program {
            insns,
            start: Target::Step(0),
            switches: Vec::new(),
            tables: Vec::new(),
        };
        let s = p.clone().with_switches(2);
        // Switches at the heads 0 and 6, and at 8, which 7 fails into (4 members of
        // its segment left); not at 10 or 11 (fewer than 2 left), nor between.
        assert_eq!(s.switches.len(), 3, "{}", s.unparse());
        assert_eq!(s.tables.len(), 2);
        assert_eq!(s.tables[0].members_from(0).len(), 10);
        assert_eq!(s.tables[1].members_from(0).len(), 2);
        for w in 0..14u8 {
            for len in [0, 3, 4] {
                let d = [0, 0, 0, w][..len].to_vec();
                let v = view(&d, &[]);
                assert_eq!(s.run(&v), p.run(&v), "{w} {len}\n{}", s.unparse());
            }
        }
        let steps = |w: u8| s.trace(&view(&[0, 0, 0, w], &[])).1.len();
        // Value 9: found at once, output 9. Value 0: step 0 says yes, into the
        // branch's switch (no 0 there), which exits into the switch at step 8.
        assert_eq!(s.run(&view(&[0, 0, 0, 9], &[])), Some(9));
        assert_eq!((steps(9), steps(0)), (1, 3));
        assert_eq!(p.trace(&view(&[0, 0, 0, 0], &[])).1.len(), 7);
        // Too short: every member says no, to the default of the whole tree.
        assert_eq!(s.trace(&view(&[0, 0, 0], &[])), (None, vec![t(0)]));
    }
}
