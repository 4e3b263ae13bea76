//! Skipping the tests whose outcome a packet's path has already decided.
//!
//! The plain program is walked from its start, each step with the *knowledge* of the
//! paths to it: the outcomes of the tests taken on the way (see [`decide`] for what
//! they imply). From each emitted step, each outcome goes straight past the steps
//! whose test the knowledge along it decides, to the first one it does not (or to an
//! output); that step is emitted for that knowledge in turn.
//!
//! Knowledge is narrowed, per step, to what the tests still reachable from it can
//! use: outcomes of tests on bytes none of them reads are dropped, keeping only the
//! region length they prove, and a path remembers at most [`MAX_FACTS`] outcomes. A
//! step reached with different knowledge is copied at most [`COPIES`] times for the
//! knowledge of some of its paths; any other path shares the step's copy for what
//! *all* paths to it know (the outcomes common to them, worked out beforehand over
//! the plain program). So the program has at most `COPIES + 1` copies of each plain
//! step, and identical steps are shared as in the plain compile. Deciding is bounded
//! too ([`WORK_PER_STEP`]): if the copies would take longer, the program is made
//! again with shared copies only, and if that would too, the plain program is kept.
//!
//! Each step of the result stands for a step of the plain program, on the same
//! paths, with decided steps left out: no packet takes more tests than in the plain
//! program, and every packet gets the same answer.

use super::{Base, Builder, Insn, Program, Target, Test};
use std::collections::HashMap;

/// Outcomes a path remembers; older "no" outcomes are forgotten first beyond this.
const MAX_FACTS: usize = 16;
/// Copies of a plain step made for the knowledge of some of the paths to it, besides
/// the one for what all of them know.
const COPIES: usize = 1;
/// Deciding tests may look at this many facts per plain step, plus [`WORK_FLOOR`],
/// and never more than [`WORK_MAX`] (5-25 ns each), in the attempt with copies; the
/// attempt without them, if needed, may look at half as many again. Past that,
/// the plain program is kept.
const WORK_PER_STEP: usize = 4096;
const WORK_FLOOR: usize = 1 << 22;
const WORK_MAX: usize = 1 << 25;
/// The most 64-bit words the table of the bytes each step's reachable tests read may
/// take (32 MiB): a larger program (a Classifier pattern of a hundred thousand
/// words, each on bytes of its own) is kept plain.
const MAX_REACH_WORDS: usize = 1 << 22;

fn base_index(b: Base) -> usize {
    match b {
        Base::Data => 0,
        Base::Net => 1,
        Base::Transp => 2,
    }
}

/// The region length from which `t` reads the packet: shorter regions miss a byte its
/// mask selects, and `t` answers `short_match` (as `read_word` decides).
fn threshold(t: &Test) -> u64 {
    let need = if t.mask == 0 {
        return 0;
    } else if t.mask & 0xFF != 0 {
        4
    } else if t.mask & 0xFF00 != 0 {
        3
    } else if t.mask & 0xFF_0000 != 0 {
        2
    } else {
        1
    };
    t.offset as u64 + need
}

/// A byte condition: the byte at this position of the region, ANDed with the mask,
/// equals the value.
type Lit = (u64, u8, u8);

/// The byte conditions whose conjunction is a test's match, for a region long enough.
#[derive(Clone, Copy, Debug)]
struct Pattern {
    lits: [Lit; 4],
    len: usize,
}

impl Pattern {
    fn of(t: &Test) -> Pattern {
        let mut p = Pattern {
            lits: [(0, 0, 0); 4],
            len: 0,
        };
        for k in 0..4u32 {
            let shift = 24 - 8 * k;
            let m = (t.mask >> shift) as u8;
            if m != 0 {
                p.lits[p.len] = (t.offset as u64 + k as u64, m, (t.value >> shift) as u8);
                p.len += 1;
            }
        }
        p
    }

    fn lits(&self) -> &[Lit] {
        &self.lits[..self.len]
    }

    fn shares_a_byte(&self, o: &Pattern) -> bool {
        self.lits().iter().any(|a| o.lits().iter().any(|b| a.0 == b.0))
    }
}

/// A test prepared for [`decide`]: its threshold and byte conditions.
#[derive(Clone, Copy, Debug)]
struct Prepared {
    test: Test,
    threshold: u64,
    pattern: Pattern,
}

impl Prepared {
    fn of(t: &Test) -> Prepared {
        Prepared {
            test: *t,
            threshold: threshold(t),
            pattern: Pattern::of(t),
        }
    }
}

/// What one class of region lengths allows: bits whose value is known, and byte
/// patterns known not to all hold.
#[derive(Clone, Default)]
struct Cube {
    /// (position, mask of known bits, their values).
    known: Vec<Lit>,
    excluded: Vec<Pattern>,
}

impl Cube {
    fn get(&self, pos: u64) -> (u8, u8) {
        self.known
            .iter()
            .find(|k| k.0 == pos)
            .map_or((0, 0), |k| (k.1, k.2))
    }

    /// Adds known bits; false when they contradict bits already known.
    fn set(&mut self, (pos, m, v): Lit) -> bool {
        match self.known.iter_mut().find(|k| k.0 == pos) {
            Some(k) => {
                if (k.2 ^ v) & k.1 & m != 0 {
                    return false;
                }
                k.1 |= m;
                k.2 |= v & m;
                true
            }
            None => {
                self.known.push((pos, m, v & m));
                true
            }
        }
    }

    /// Adds a pattern's bits; false when they contradict bits already known.
    fn set_all(&mut self, p: &Pattern) -> bool {
        p.lits().iter().all(|&l| self.set(l))
    }

    /// Draws what the excluded patterns imply: one whose bits are all known to hold
    /// is a contradiction, one with a single bit left open fixes that bit to the
    /// other value. False when the facts cannot all hold.
    fn settle(&mut self) -> bool {
        loop {
            let mut learnt = None;
            let mut i = 0;
            while i < self.excluded.len() {
                let mut open = 0;
                let mut last = None;
                let mut broken = false;
                for &(pos, m, v) in self.excluded[i].lits() {
                    let (km, kv) = self.get(pos);
                    if (v ^ kv) & m & km != 0 {
                        broken = true;
                        break;
                    }
                    let o = m & !km;
                    if o != 0 {
                        open += o.count_ones();
                        last = Some((pos, o, !v & o));
                    }
                }
                if broken {
                    // A known bit already differs: the exclusion holds, and says no more.
                    self.excluded.swap_remove(i);
                    continue;
                }
                match open {
                    0 => return false,
                    1 => {
                        learnt = last;
                        self.excluded.swap_remove(i);
                        break;
                    }
                    _ => i += 1,
                }
            }
            match learnt {
                Some(l) => {
                    if !self.set(l) {
                        return false;
                    }
                }
                None => return true,
            }
        }
    }
}

/// What a class of region lengths says about a test.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Class {
    /// No packet in the class agrees with the facts.
    Impossible,
    Is(bool),
    Open,
}

/// The outcome of `b` for regions of length in the class starting at `len` (no
/// threshold of `facts` or `b` lies inside the class), given the outcomes `facts` of
/// tests on the same region.
fn class_value(facts: &[(&Prepared, bool)], len: u64, b: &Prepared) -> Class {
    let mut cube = Cube {
        known: Vec::with_capacity(8),
        excluded: Vec::with_capacity(facts.len() + 1),
    };
    for (a, outcome) in facts {
        if a.threshold > len {
            // Too short for `a`, which answered `short_match`.
            if a.test.short_match != *outcome {
                return Class::Impossible;
            }
        } else if *outcome {
            if !cube.set_all(&a.pattern) {
                return Class::Impossible;
            }
        } else {
            cube.excluded.push(a.pattern);
        }
    }
    if !cube.settle() {
        return Class::Impossible;
    }
    if b.threshold > len {
        return Class::Is(b.test.short_match);
    }
    let can_match = {
        let mut c = cube.clone();
        c.set_all(&b.pattern) && c.settle()
    };
    let can_fail = {
        let mut c = cube;
        c.excluded.push(b.pattern);
        c.settle()
    };
    match (can_match, can_fail) {
        (true, true) => Class::Open,
        (true, false) => Class::Is(true),
        (false, true) => Class::Is(false),
        (false, false) => Class::Impossible,
    }
}

/// The outcome of `b` for every packet whose tests in `facts` (on `b`'s region) had
/// the outcomes given there and whose region is at least `min_len` long; `None` if
/// that does not decide it.
///
/// Each outcome is a fact about the region: "too short for the test's bytes, and the
/// test's `short_match` is the outcome", or "long enough, and its bytes match (for a
/// yes) or do not all match (for a no)". The region lengths are split at every test's
/// threshold; within one class each fact is then a plain condition on bits (some bits
/// known, some patterns excluded), and `b` is decided when in every class that the
/// facts allow it is fixed: by `short_match` if the class is too short for it, else
/// because its match, or its mismatch, contradicts the facts.
fn decide(facts: &[(&Prepared, bool)], min_len: u64, b: &Prepared, work: &mut usize) -> Option<bool> {
    if let Some(r) = facts
        .iter()
        .find_map(|(a, outcome)| decide_by_one(a, *outcome, b))
    {
        return Some(r);
    }
    // Facts on bytes that reach `b`'s only through other facts' bytes count too;
    // unrelated ones tell only the region length they prove.
    let mut related: Vec<(&Prepared, bool)> = Vec::with_capacity(facts.len());
    let mut rest: Vec<(&Prepared, bool)> = Vec::new();
    for f in facts {
        if f.0.pattern.shares_a_byte(&b.pattern) {
            related.push(*f);
        } else {
            rest.push(*f);
        }
    }
    if related.is_empty() && b.pattern.len > 0 {
        // Nothing tells its bytes: it can match, and fail, in long enough regions.
        return None;
    }
    let mut i = 0;
    while i < rest.len() {
        if related
            .iter()
            .any(|r| r.0.pattern.shares_a_byte(&rest[i].0.pattern))
        {
            related.push(rest.swap_remove(i));
            i = 0;
        } else {
            i += 1;
        }
    }
    let min_len = rest
        .iter()
        .filter(|(a, outcome)| a.test.short_match != *outcome)
        .map(|(a, _)| a.threshold)
        .fold(min_len, u64::max);
    let mut cuts: Vec<u64> = Vec::with_capacity(8);
    for c in related
        .iter()
        .map(|f| f.0.threshold)
        .chain([0, min_len, b.threshold])
    {
        if !cuts.contains(&c) {
            cuts.push(c);
        }
    }
    cuts.sort_unstable();
    let mut answer = None;
    for &len in cuts.iter().filter(|&&c| c >= min_len) {
        *work += related.len();
        match class_value(&related, len, b) {
            Class::Impossible => {}
            Class::Open => return None,
            Class::Is(r) => {
                if answer.is_some_and(|a| a != r) {
                    return None;
                }
                answer = Some(r);
            }
        }
    }
    answer
}

/// The common cases, decided by one fact alone: the same test again, or a test that
/// reads its bytes whenever it says no (short->no) after a yes from one that reads
/// them whenever it says yes, contradicting it on some bit.
fn decide_by_one(a: &Prepared, outcome: bool, b: &Prepared) -> Option<bool> {
    if a.test == b.test {
        return Some(outcome);
    }
    let contradicts = || {
        a.pattern.lits().iter().any(|x| {
            b.pattern
                .lits()
                .iter()
                .any(|y| x.0 == y.0 && (x.2 ^ y.2) & x.1 & y.1 != 0)
        })
    };
    (outcome && !a.test.short_match && !b.test.short_match && contradicts()).then_some(false)
}

/// What a path knows: outcomes of tests (test number << 1 | outcome, oldest first) and
/// a least length per region.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
struct Knowledge {
    facts: Vec<u32>,
    min_len: [u64; 3],
}

/// The plain program's tests and, per step, the bytes its reachable tests read.
struct Tables<'a> {
    plain: &'a Program,
    /// The distinct tests, by number.
    prepared: Vec<Prepared>,
    /// The test number of each step.
    step_test: Vec<u32>,
    /// The numbers (in `reach`) of the bytes each test reads.
    test_bytes: Vec<Vec<usize>>,
    /// Per step, a bit set of the bytes read by the tests reachable from it.
    reach: Vec<u64>,
    words: usize,
    /// Per step, which bases the reachable tests read (bit `base_index`).
    reach_bases: Vec<u8>,
    /// Per base, the thresholds of the program's tests, sorted.
    thresholds: [Vec<u64>; 3],
    /// Facts looked at by [`Tables::decide`] so far: the optimiser's work.
    work: std::cell::Cell<usize>,
}

impl<'a> Tables<'a> {
    /// The tables of `plain`, or `None` when they would take more than
    /// [`MAX_REACH_WORDS`].
    fn new(plain: &'a Program) -> Option<Tables<'a>> {
        let mut test_id: HashMap<Test, u32> = HashMap::new();
        let mut tests = Vec::new();
        let mut byte_id: HashMap<(Base, u64), usize> = HashMap::new();
        let mut test_bytes = Vec::new();
        let mut thresholds: [Vec<u64>; 3] = Default::default();
        let step_test: Vec<u32> = plain
            .insns
            .iter()
            .map(|i| {
                *test_id.entry(i.test).or_insert_with(|| {
                    let t = i.test;
                    tests.push(t);
                    thresholds[base_index(t.base)].push(threshold(&t));
                    test_bytes.push(
                        Pattern::of(&t)
                            .lits()
                            .iter()
                            .map(|l| {
                                let n = byte_id.len();
                                *byte_id.entry((t.base, l.0)).or_insert(n)
                            })
                            .collect(),
                    );
                    (tests.len() - 1) as u32
                })
            })
            .collect();
        for t in thresholds.iter_mut() {
            t.sort_unstable();
            t.dedup();
        }
        let words = byte_id.len().div_ceil(64).max(1);
        let n = plain.insns.len();
        if n.saturating_mul(words) > MAX_REACH_WORDS {
            return None;
        }
        let mut reach = vec![0u64; n * words];
        let mut reach_bases = vec![0u8; n];
        for i in (0..n).rev() {
            let insn = plain.insns[i];
            for &b in &test_bytes[step_test[i] as usize] {
                reach[i * words + b / 64] |= 1u64 << (b % 64);
            }
            reach_bases[i] |= 1 << base_index(insn.test.base);
            for t in [insn.yes, insn.no] {
                if let Target::Step(j) = t {
                    let j = j as usize;
                    // Steps jump forward: `j` is already done.
                    for w in 0..words {
                        reach[i * words + w] |= reach[j * words + w];
                    }
                    reach_bases[i] |= reach_bases[j];
                }
            }
        }
        Some(Tables {
            plain,
            prepared: tests.iter().map(Prepared::of).collect(),
            step_test,
            test_bytes,
            reach,
            words,
            reach_bases,
            thresholds,
            work: std::cell::Cell::new(0),
        })
    }

    fn reaches(&self, step: usize, byte: usize) -> bool {
        self.reach[step * self.words + byte / 64] & (1u64 << (byte % 64)) != 0
    }

    /// `k` narrowed to what the tests reachable from `step` can use.
    fn narrow(&self, k: &Knowledge, step: usize) -> Knowledge {
        let mut out = Knowledge {
            facts: Vec::with_capacity(k.facts.len()),
            min_len: k.min_len,
        };
        for &f in &k.facts {
            let id = (f >> 1) as usize;
            if self.test_bytes[id].iter().any(|&b| self.reaches(step, b)) {
                out.facts.push(f);
            } else {
                let t = &self.prepared[id];
                if t.test.short_match != (f & 1 == 1) {
                    // The outcome proves the region long enough for the test's bytes.
                    let m = &mut out.min_len[base_index(t.test.base)];
                    *m = (*m).max(t.threshold);
                }
            }
        }
        for (b, m) in out.min_len.iter_mut().enumerate() {
            *m = if self.reach_bases[step] & (1 << b) == 0 {
                0
            } else {
                // Only the thresholds of tests tell lengths apart.
                let th = &self.thresholds[b];
                th[..th.partition_point(|&t| t <= *m)]
                    .last()
                    .copied()
                    .unwrap_or(0)
            };
        }
        out
    }

    /// The outcome of step `step`'s test that `k` implies, if it does.
    fn decide(&self, k: &Knowledge, step: usize) -> Option<bool> {
        let id = self.step_test[step] as usize;
        let b = &self.prepared[id];
        self.work.set(self.work.get() + k.facts.len() + 1);
        // The common cases first, without gathering the facts.
        let one = k.facts.iter().find_map(|&f| {
            let a = &self.prepared[(f >> 1) as usize];
            (a.test.base == b.test.base)
                .then(|| decide_by_one(a, f & 1 == 1, b))
                .flatten()
        });
        if one.is_some() {
            return one;
        }
        let facts: Vec<(&Prepared, bool)> = k
            .facts
            .iter()
            .map(|&f| (&self.prepared[(f >> 1) as usize], f & 1 == 1))
            .filter(|(a, _)| a.test.base == b.test.base)
            .collect();
        let mut work = self.work.get();
        let r = decide(&facts, k.min_len[base_index(b.test.base)], b, &mut work);
        self.work.set(work);
        r
    }

    /// `k` and the outcome of step `step`'s test.
    fn learn(&self, k: &Knowledge, step: usize, outcome: bool) -> Knowledge {
        let f = (self.step_test[step] << 1) | outcome as u32;
        let mut k = k.clone();
        if !k.facts.contains(&f) {
            k.facts.push(f);
            if k.facts.len() > MAX_FACTS {
                // A "no" says the least: forget the oldest one, else the oldest "yes".
                let i = k.facts.iter().position(|f| f & 1 == 0).unwrap_or(0);
                k.facts.remove(i);
            }
        }
        k
    }

    /// Per step, what every path to it knows: the outcomes common to all of them.
    fn common(&self) -> Vec<Knowledge> {
        let n = self.plain.insns.len();
        let mut known: Vec<Option<Knowledge>> = vec![None; n];
        if let Target::Step(s) = self.plain.start {
            known[s as usize] = Some(Knowledge::default());
        }
        for i in 0..n {
            // Steps jump forward: every path to `i` is known by now.
            let Some(k) = known[i].take() else {
                continue;
            };
            let insn = self.plain.insns[i];
            for (t, outcome) in [(insn.yes, true), (insn.no, false)] {
                let Target::Step(j) = t else {
                    continue;
                };
                let j = j as usize;
                let e = self.narrow(&self.learn(&k, i, outcome), j);
                known[j] = Some(match known[j].take() {
                    None => e,
                    Some(mut x) => {
                        x.facts.retain(|f| e.facts.contains(f));
                        for (m, o) in x.min_len.iter_mut().zip(e.min_len) {
                            *m = (*m).min(o);
                        }
                        x
                    }
                });
            }
            known[i] = Some(k);
        }
        known.into_iter().map(Option::unwrap_or_default).collect()
    }

    /// Where a packet at `step` knowing `k` goes, past the steps whose test `k`
    /// decides: a final target, or an undecided step.
    fn skip(&self, mut step: u32, k: &Knowledge) -> Target {
        while let Some(r) = self.decide(k, step as usize) {
            let insn = self.plain.insns[step as usize];
            match if r { insn.yes } else { insn.no } {
                Target::Step(j) => step = j,
                t => return t,
            }
        }
        Target::Step(step)
    }
}

type State = (u32, Knowledge);

enum Task {
    Visit(State),
    /// The state's code is that of another state.
    Same(State, State),
    /// The state's code is its step's test, then the code for each outcome.
    Emit(State, Test, Next, Next),
}

/// Where an outcome leads: a final target, or a state.
#[derive(Clone)]
enum Next {
    Done(Target),
    State(State),
}

/// `plain` with the tests its paths have decided skipped (see the module doc).
pub(super) fn optimise(plain: &Program) -> Program {
    if !matches!(plain.start, Target::Step(_)) {
        return plain.clone();
    }
    let n = plain.insns.len();
    let Some(tables) = Tables::new(plain) else {
        return plain.clone().compact();
    };
    let common = tables.common();
    let work_cap = n
        .saturating_mul(WORK_PER_STEP)
        .saturating_add(WORK_FLOOR)
        .min(WORK_MAX);
    // Copies for the knowledge of some paths; failing that (out of time), one copy of
    // each step for what all paths to it know; failing that, the plain program. The
    // work is counted over both attempts.
    for (copies, cap) in [(COPIES, work_cap), (0, work_cap + work_cap / 2)] {
        if let Some(p) = specialise(&tables, &common, copies, cap) {
            return p;
        }
    }
    plain.clone().compact()
}

/// `plain` optimised with 0, 1 and 3 copies per step for some paths, with no limit
/// on work: the variants [`optimise`] may choose from, and one more.
#[cfg(test)]
pub(super) fn variants(plain: &Program) -> Vec<Program> {
    let tables = Tables::new(plain).expect("a test program's tables fit");
    let common = tables.common();
    [0, 1, 3]
        .into_iter()
        .filter_map(|copies| specialise(&tables, &common, copies, usize::MAX))
        .collect()
}

/// The program for the plain one's paths from its start, each step emitted for the
/// knowledge of the paths to it and skipped where that decides it: at most `copies`
/// copies of a plain step for the knowledge of some paths, and one for what all
/// paths to it know (`common`). `None` if deciding looks at more than `work_cap`
/// facts.
fn specialise(tables: &Tables<'_>, common: &[Knowledge], copies: usize, work_cap: usize) -> Option<Program> {
    let plain = tables.plain;
    let Target::Step(start) = plain.start else {
        return Some(plain.clone());
    };
    let mut made = vec![0usize; plain.insns.len()];
    let mut b = Builder {
        insns: Vec::new(),
        seen: HashMap::new(),
    };
    let mut done: HashMap<State, Target> = HashMap::new();
    let root: State = (start, Knowledge::default());
    let mut stack = vec![Task::Visit(root.clone())];
    // The state for an outcome leading to `t` with knowledge `k`.
    let next = |k: &Knowledge, t: Target| match t {
        Target::Step(j) => Next::State((j, tables.narrow(k, j as usize))),
        t => Next::Done(t),
    };
    while let Some(task) = stack.pop() {
        match task {
            Task::Visit(s) => {
                if done.contains_key(&s) {
                    continue;
                }
                if tables.work.get() > work_cap {
                    return None;
                }
                let step = match tables.skip(s.0, &s.1) {
                    Target::Step(j) if j == s.0 => j as usize,
                    t => {
                        match next(&s.1, t) {
                            Next::Done(t) => {
                                done.insert(s, t);
                            }
                            Next::State(c) => {
                                stack.push(Task::Same(s, c.clone()));
                                stack.push(Task::Visit(c));
                            }
                        }
                        continue;
                    }
                };
                if s.1 != common[step] {
                    if made[step] >= copies {
                        // The step's copy for every path.
                        let shared = (s.0, common[step].clone());
                        stack.push(Task::Same(s, shared.clone()));
                        stack.push(Task::Visit(shared));
                        continue;
                    }
                    made[step] += 1;
                }
                let insn = plain.insns[step];
                let yes = next(&tables.learn(&s.1, step, true), insn.yes);
                let no = next(&tables.learn(&s.1, step, false), insn.no);
                stack.push(Task::Emit(s, insn.test, yes.clone(), no.clone()));
                for c in [yes, no] {
                    if let Next::State(c) = c {
                        stack.push(Task::Visit(c));
                    }
                }
            }
            Task::Same(s, c) => {
                let t = done[&c];
                done.insert(s, t);
            }
            Task::Emit(s, test, yes, no) => {
                let target = |x: Next| match x {
                    Next::Done(t) => t,
                    Next::State(c) => done[&c],
                };
                let insn = Insn {
                    test,
                    yes: target(yes),
                    no: target(no),
                };
                let t = b.emit(insn);
                done.insert(s, t);
            }
        }
    }
    let start = done[&root];
    Some(b.finish(start).compact())
}

#[cfg(test)]
mod tests {
    use super::super::{Expr, View};
    use super::*;

    fn t(offset: u32, value: u32, mask: u32, short_match: bool) -> Prepared {
        Prepared::of(&Test {
            short_match,
            ..Test::new(Base::Data, offset, value, mask)
        })
    }

    /// A pattern of 20,000 words, each on bytes of its own, would need a table of
    /// 20,000 steps by 80,000 bytes (200 MB): it is kept plain, at once.
    #[test]
    fn a_program_too_large_to_tabulate_is_kept_plain() {
        let words: Vec<Expr> = (0..20_000u32)
            .map(|i| Expr::Test(Test::new(Base::Data, 4 * i, i | 0x8000_0000, !0)))
            .collect();
        let plain = Program::compile_unoptimised(&[(Expr::And(words), Target::Out(0))]);
        assert_eq!(plain.insns.len(), 20_000);
        assert!(Tables::new(&plain).is_none());
        assert_eq!(optimise(&plain), plain.clone().compact());
    }

    #[test]
    fn a_match_decides_tests_on_the_same_bytes() {
        let ip = t(12, 0x0800_0000, 0xffff_0000, false);
        let arp = t(12, 0x0806_0000, 0xffff_0000, false);
        let high = t(12, 0x0800_0000, 0xff00_0000, false);
        // 12/0800 yes: 12/0806 no, 12/08 yes.
        assert_eq!(decide(&[(&ip, true)], 0, &arp, &mut 0), Some(false));
        assert_eq!(decide(&[(&ip, true)], 0, &high, &mut 0), Some(true));
        // 12/08 yes does not decide 12/0800 (byte 13 is open).
        assert_eq!(decide(&[(&high, true)], 0, &ip, &mut 0), None);
        // 12/0800 no: 12/0806 open; 12/08 no: 12/0800 no.
        assert_eq!(decide(&[(&ip, false)], 0, &arp, &mut 0), None);
        assert_eq!(decide(&[(&high, false)], 0, &ip, &mut 0), Some(false));
        // The same test again.
        assert_eq!(decide(&[(&ip, false)], 0, &ip, &mut 0), Some(false));
        assert_eq!(decide(&[(&ip, true)], 0, &ip, &mut 0), Some(true));
    }

    #[test]
    fn short_regions_are_taken_into_account() {
        // 12/0800 yes proves bytes 12-13 present, not byte 14.
        let ip = t(12, 0x0800_0000, 0xffff_0000, false);
        let wide = t(12, 0x0800_0000, 0xffff_ff00, false);
        assert_eq!(decide(&[(&ip, true)], 0, &wide, &mut 0), None);
        // But a mismatch on the common bytes decides even when 14 may be missing.
        let wide_arp = t(12, 0x0806_4500, 0xffff_ff00, false);
        assert_eq!(decide(&[(&ip, true)], 0, &wide_arp, &mut 0), Some(false));
        // ... unless a short region answers yes.
        let wide_arp_short = t(12, 0x0806_4500, 0xffff_ff00, true);
        assert_eq!(decide(&[(&ip, true)], 0, &wide_arp_short, &mut 0), None);
        // Known long enough: then it is decided again.
        assert_eq!(decide(&[(&ip, true)], 15, &wide_arp_short, &mut 0), Some(false));
        // A test with short->yes that answered no proves the bytes present.
        let ip_short = t(12, 0x0800_0000, 0xffff_0000, true);
        let arp_short = t(12, 0x0806_0000, 0xffff_0000, true);
        assert_eq!(decide(&[(&ip_short, false)], 0, &ip, &mut 0), Some(false));
        // A test with short->yes that answered yes does not prove them present. Then
        // 12/0806 is no either way (short: its own short->no; long: the bytes are
        // 0800), but 12/0806 short->yes is yes if short and no if long: open.
        let arp = t(12, 0x0806_0000, 0xffff_0000, false);
        assert_eq!(decide(&[(&ip_short, true)], 0, &arp, &mut 0), Some(false));
        assert_eq!(decide(&[(&ip_short, true)], 0, &arp_short, &mut 0), None);
        // A no with short->no on 12/0800, then 12/0800 short->yes: open (short: yes).
        assert_eq!(decide(&[(&ip, false)], 0, &ip_short, &mut 0), None);
        // Bytes past the end are never read: a yes on an earlier word says nothing of
        // a later one's presence.
        let later = t(20, 0x0001_0000, 0xffff_0000, true);
        assert_eq!(decide(&[(&ip, true)], 0, &later, &mut 0), None);
        // ... but a yes on a later word proves earlier bytes present.
        let opcode = t(20, 0x0001_0000, 0xffff_0000, false);
        assert_eq!(
            decide(&[(&opcode, true), (&ip, true)], 0, &arp_short, &mut 0),
            Some(false)
        );
    }

    #[test]
    fn overlapping_words_at_different_offsets() {
        // Bytes 12-15 = 08 00 45 00, then the word at 14: 45 00.
        let w12 = t(12, 0x0800_4500, 0xffff_ffff, false);
        let w14 = t(14, 0x4500_0000, 0xffff_0000, false);
        let w14x = t(14, 0x4600_0000, 0xff00_0000, false);
        let w13 = t(13, 0x0045_0000, 0xffff_0000, false);
        let w13x = t(13, 0x0046_0000, 0xffff_0000, false);
        assert_eq!(decide(&[(&w12, true)], 0, &w14, &mut 0), Some(true));
        assert_eq!(decide(&[(&w12, true)], 0, &w14x, &mut 0), Some(false));
        assert_eq!(decide(&[(&w12, true)], 0, &w13, &mut 0), Some(true));
        assert_eq!(decide(&[(&w12, true)], 0, &w13x, &mut 0), Some(false));
        assert_eq!(decide(&[(&w14, false)], 0, &w12, &mut 0), Some(false));
        // 14/4500 yes: 12/08004500 open (bytes 12-13).
        assert_eq!(decide(&[(&w14, true)], 0, &w12, &mut 0), None);
        // With 12/0800 known as well: decided.
        let ip = t(12, 0x0800_0000, 0xffff_0000, false);
        assert_eq!(decide(&[(&w14, true), (&ip, true)], 0, &w12, &mut 0), Some(true));
    }

    #[test]
    fn single_open_bits_are_drawn_from_exclusions() {
        // "Bit 0x02 of byte 13 is set", short->yes, answered no: the byte is present
        // and the bit clear, so "bit 0x02 of byte 13 is clear" is yes.
        let set = t(12, 0x0002_0000, 0x0002_0000, true);
        let clear = t(12, 0x0000_0000, 0x0002_0000, true);
        assert_eq!(decide(&[(&set, false)], 0, &clear, &mut 0), Some(true));
        // "Bits 0x03 both set" no, "bit 0x01 set" yes: bit 0x02 is clear.
        let both = t(12, 0x0003_0000, 0x0003_0000, false);
        let low = t(12, 0x0001_0000, 0x0001_0000, false);
        let two = t(12, 0x0002_0000, 0x0002_0000, false);
        assert_eq!(
            decide(&[(&both, false), (&low, true)], 0, &two, &mut 0),
            Some(false)
        );
    }

    /// Byte patterns over overlapping words, several outputs and drops.
    fn patterns() -> Vec<(Expr, Target)> {
        let w = |off: u32, v: u32, m: u32| Expr::test(Base::Data, off, v, m);
        let short = |off: u32, v: u32, m: u32| {
            Expr::Test(Test {
                short_match: true,
                ..Test::new(Base::Data, off, v, m)
            })
        };
        vec![
            (
                Expr::and(vec![
                    w(12, 0x0806_0000, 0xffff_0000),
                    w(20, 0x0001_0000, 0xffff_0000),
                ]),
                Target::Out(0),
            ),
            (
                Expr::and(vec![
                    w(12, 0x0806_0000, 0xffff_0000),
                    w(20, 0x0002_0000, 0xffff_0000),
                ]),
                Target::Out(1),
            ),
            (
                Expr::and(vec![
                    w(12, 0x0800_0000, 0xffff_0000),
                    short(14, 0x4500_0000, 0xff00_0000).not(),
                ]),
                Target::Drop,
            ),
            (
                Expr::and(vec![w(13, 0x0045_0000, 0x00ff_ff00), w(16, 0, 0xff00_0000)]),
                Target::Out(2),
            ),
            (
                Expr::or(vec![
                    w(12, 0x0800_0000, 0xffff_0000),
                    short(20, 0x0003_0000, 0x00ff_0000),
                ]),
                Target::Out(3),
            ),
            (w(14, 0x0600_0000, 0x0f00_0000), Target::Out(0)),
        ]
    }

    fn packets() -> Vec<Vec<u8>> {
        let alphabet = [0x00u8, 0x01, 0x02, 0x03, 0x06, 0x08, 0x45];
        let mut state = 7u64;
        let mut next = move || {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (state >> 33) as usize
        };
        (0..4000)
            .map(|_| {
                let len = next() % 26;
                (0..len).map(|_| alphabet[next() % alphabet.len()]).collect()
            })
            .collect()
    }

    fn answers(p: &Program, pkts: &[Vec<u8>]) -> Vec<Option<u32>> {
        pkts.iter()
            .map(|d| {
                p.run(&View {
                    data: d,
                    net: &[],
                    transp: &[],
                })
            })
            .collect()
    }

    #[test]
    fn every_budget_gives_the_same_answers() {
        let plain = Program::compile_unoptimised(&patterns());
        let pkts = packets();
        let want = answers(&plain, &pkts);
        let tables = Tables::new(&plain).unwrap();
        let common = tables.common();
        let n = plain.insns.len();
        for copies in [0, 1, 2, 8] {
            tables.work.set(0);
            let p = specialise(&tables, &common, copies, usize::MAX).unwrap();
            assert_eq!(answers(&p, &pkts), want, "copies {copies}\n{}", p.unparse());
            assert!(
                p.insns.len() <= (copies + 1) * n,
                "copies {copies}\n{}",
                p.unparse()
            );
            // Never more tests than the plain program.
            for d in &pkts {
                let v = View {
                    data: d,
                    net: &[],
                    transp: &[],
                };
                assert!(p.trace(&v).1.len() <= plain.trace(&v).1.len());
            }
        }
        // Out of time: the attempt is abandoned.
        tables.work.set(0);
        assert!(specialise(&tables, &common, 1, 3).is_none());
        // And the whole, with its budget.
        assert_eq!(answers(&optimise(&plain), &pkts), want);
    }

    #[test]
    fn what_all_paths_know_is_what_every_path_knows() {
        // 12/0806 20/0001, 12/0806 20/0002, 12/0800, -: step 12/0800 is reached with
        // "12/0806 no" and with "12/0806 yes, 20/0001 no, 20/0002 no" (the latter
        // after the plain repeat of 12/0806): nothing in common on bytes 12-13.
        let w = |off: u32, v: u32| Expr::test(Base::Data, off, v, 0xffff_0000);
        let plain = Program::compile_unoptimised(&[
            (
                Expr::and(vec![w(12, 0x0806_0000), w(20, 0x0001_0000)]),
                Target::Out(0),
            ),
            (
                Expr::and(vec![w(12, 0x0806_0000), w(20, 0x0002_0000)]),
                Target::Out(1),
            ),
            (w(12, 0x0800_0000), Target::Out(2)),
            (Expr::True, Target::Out(3)),
        ]);
        let tables = Tables::new(&plain).unwrap();
        let common = tables.common();
        let step_of = |t: Test| plain.insns.iter().position(|i| i.test == t).unwrap();
        let ip = step_of(Test::new(Base::Data, 12, 0x0800_0000, 0xffff_0000));
        assert_eq!(common[ip], Knowledge::default());
        // The second 20/... test is reached only after 12/0806 yes, 20/0001 no (and
        // the repeated 12/0806 yes): all of it known there.
        let reply = step_of(Test::new(Base::Data, 20, 0x0002_0000, 0xffff_0000));
        let arp = step_of(Test::new(Base::Data, 12, 0x0806_0000, 0xffff_0000)) as u32;
        assert!(common[reply]
            .facts
            .contains(&(tables.step_test[arp as usize] << 1 | 1)));
        assert_eq!(common[reply].facts.len(), 2);
    }
}
