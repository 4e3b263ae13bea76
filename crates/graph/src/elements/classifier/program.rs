//! The compiled matcher shared by `Classifier`, `IPClassifier` and `IPFilter`.
//!
//! Patterns are first parsed into boolean [`Expr`] trees whose leaves are word tests:
//! "the 4 bytes at OFFSET (from the data start, the network header or the transport
//! header), ANDed with MASK, equal VALUE". A configuration's patterns are then compiled
//! once into a [`Program`]: a list of such tests, each with a jump target for "yes" and
//! one for "no", ending in an output port or a drop. Per packet only the program runs.
//!
//! Short packets follow Click's rule: a test whose masked bytes lie (partly) past the
//! end of the region it examines does not read them; it takes its `short_match` result
//! instead (normally "no"). `not` negates a subtree's result, short leaves included, as
//! Click's `negate_subtree` does; operators such as `!=` negate while keeping short
//! packets failing ([`Expr::negate_keep_short`]).
//!
//! # Optimisation
//!
//! The patterns are first compiled plainly ([`Program::compile_unoptimised`]): each
//! pattern's tests in order, a failed pattern continuing at the next one, where only a
//! step repeating the very test just taken is skipped. [`Program::compile`] then
//! rewrites that program, in the manner of Click's Classifier, so that a packet skips
//! the tests whose outcome the tests already taken on its path decide. In
//! `IPClassifier(tcp dst port 80, udp dst port 53, -)` a TCP packet to port 22 does
//! not test "udp?": "tcp?" was yes on its path, and the same byte cannot also be 17.
//!
//! What an outcome tells is worked out per region (data, network or transport
//! header), byte by byte, so that words at different offsets that share bytes inform
//! each other. A test reads its bytes only when the region is at least its
//! *threshold* long (the end of the last byte its mask selects); otherwise it answers
//! `short_match`. So an outcome says either "the region is shorter than the
//! threshold, and `short_match` is the outcome", or "it is at least that long, and the
//! masked bytes equal the value" (yes) or "do not all equal it" (no). A later test is
//! decided when, for every range of region lengths between thresholds that the path
//! allows, its outcome is fixed: by its own `short_match` where the range is too short
//! for it, else because its match, or its mismatch, contradicts the known bits. For
//! example a yes on `12/0800` (short->no) proves bytes 12 and 13 present and equal to
//! 08 00: `12/0806` is then no, whatever the length; `12/080045` is undecided (byte 14
//! may be missing, or anything). A no on `12/08` decides `12/0800` (no); a no on
//! `12/0800` does not decide `12/08` (byte 12 may be 08 with byte 13 another value, or
//! the frame 13 bytes long). Outcomes on
//! other regions tell nothing; outcomes on bytes that no chain of shared bytes links
//! to the test tell only the region length they prove (a yes on `20/0001`, short->no:
//! at least 22 bytes).
//!
//! From each step, each outcome goes straight past the steps its path decides. A step
//! reached along paths that know different things gets one copy for the knowledge of
//! the first such path the compiler follows, and one, shared by all the others, for
//! what *all* paths to it know: at most two copies of each step of the plain program.
//! Identical steps are shared, and steps no path reaches are dropped. The work is
//! bounded (5-25 ns per fact looked at, at most 4,096 facts per plain step plus about
//! 4 million, and 2^25 in all, then half as much again without copies; a program
//! whose table of reachable bytes would pass 32 MiB is not tried): past it the
//! copies are given up, and past that again the plain program is kept. No packet takes more tests than in the plain program, every
//! packet gets the same answer, and steps still only jump forward from step 0. Running
//! the program costs the same per step as before: all the work is done at compile
//! time. See `optimise.rs` for the details.
//!
//! # Switch steps
//!
//! Last, chains of tests of one word against one value each, a failed test going on
//! to the next (an access list's rules on one field), become *switch steps*: the
//! word is read once and looked up in a hash table of the chain's values, which
//! gives the "yes" of the first member from the entered one on that the word
//! matches, else the chain's default. A step of a chain is replaced by a switch when
//! at least 4 members remain from it, wherever it is entered from: 100 `deny src
//! net` rules become one step instead of 100 tests. Programs without switches run
//! as before. See `switch.rs`.

mod optimise;
mod switch;

#[cfg(test)]
pub(crate) use switch::MIN_MEMBERS;

use std::collections::HashMap;
use std::fmt::Write;

/// Where a test's offset counts from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Base {
    /// The packet data start (`Classifier`).
    Data,
    /// The network (IP) header.
    Net,
    /// The transport header.
    Transp,
}

/// One word test: `(bytes[offset..offset+4] as big-endian u32) & mask == value`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Test {
    pub base: Base,
    pub offset: u32,
    pub mask: u32,
    /// Always a subset of `mask`.
    pub value: u32,
    /// The result when the region is too short for the masked bytes.
    pub short_match: bool,
}

/// The regions a program examines in one packet.
#[derive(Clone, Copy, Debug)]
pub struct View<'a> {
    pub data: &'a [u8],
    pub net: &'a [u8],
    pub transp: &'a [u8],
}

impl<'a> View<'a> {
    /// The region offsets from `base` count in.
    #[inline(always)]
    pub fn region(&self, base: Base) -> &'a [u8] {
        match base {
            Base::Data => self.data,
            Base::Net => self.net,
            Base::Transp => self.transp,
        }
    }
}

/// Reads the word at `off` in `s`, if every byte `mask` selects is present. Missing
/// bytes that the mask ignores read as zero.
#[inline(always)]
fn read_word(s: &[u8], off: u32, mask: u32) -> Option<u32> {
    let off = off as usize;
    // A wrapped end makes an empty-or-reversed range, which `get` refuses.
    if let Some(b) = s.get(off..off.wrapping_add(4)) {
        return Some(u32::from_be_bytes([b[0], b[1], b[2], b[3]]));
    }
    read_short_word(s, off, mask)
}

/// The rare case of [`read_word`]: the word runs past the end of `s`. Kept out of line
/// so that the per-packet matcher stays small enough to inline.
#[cold]
#[inline(never)]
fn read_short_word(s: &[u8], off: usize, mask: u32) -> Option<u32> {
    let need = if mask == 0 {
        0
    } else if mask & 0xFF != 0 {
        4
    } else if mask & 0xFF00 != 0 {
        3
    } else if mask & 0xFF_0000 != 0 {
        2
    } else {
        1
    };
    let avail = s.len().saturating_sub(off);
    if avail < need {
        return None;
    }
    let mut w = [0u8; 4];
    if avail > 0 {
        w[..avail].copy_from_slice(&s[off..]);
    }
    Some(u32::from_be_bytes(w))
}

impl Test {
    pub fn new(base: Base, offset: u32, value: u32, mask: u32) -> Test {
        Test {
            base,
            offset,
            mask,
            value: value & mask,
            short_match: false,
        }
    }

    #[inline(always)]
    pub fn eval(&self, v: &View<'_>) -> bool {
        self.eval_on(v.region(self.base))
    }

    /// The test on `region` with the mask and value in the bytes' own order, for a loop
    /// that runs one test on every packet: no byte swap per packet, and the copy's
    /// fields stay in registers.
    #[inline(always)]
    pub fn native(&self) -> NativeTest {
        NativeTest {
            offset: self.offset,
            mask_ne: u32::from_ne_bytes(self.mask.to_be_bytes()),
            value_ne: u32::from_ne_bytes(self.value.to_be_bytes()),
            test: *self,
        }
    }

    /// The test on `region`, the bytes its base names.
    #[inline(always)]
    pub fn eval_on(&self, region: &[u8]) -> bool {
        match read_word(region, self.offset, self.mask) {
            Some(w) => w & self.mask == self.value,
            None => self.short_match,
        }
    }
}

/// A [`Test`] that compares the word as it lies in memory (see [`Test::native`]).
#[derive(Clone, Copy, Debug)]
pub struct NativeTest {
    /// Kept as 32 bits: the word's end, `offset + 4` in `usize`, cannot wrap, so the
    /// per-packet range check is one compare.
    offset: u32,
    mask_ne: u32,
    value_ne: u32,
    test: Test,
}

impl NativeTest {
    /// The same answer as [`Test::eval_on`].
    #[inline(always)]
    pub fn eval_on(&self, region: &[u8]) -> bool {
        let off = self.offset as usize;
        match region.get(off..off + 4) {
            Some(b) => u32::from_ne_bytes([b[0], b[1], b[2], b[3]]) & self.mask_ne == self.value_ne,
            None => eval_short(self.test, region),
        }
    }
}

/// [`NativeTest::eval_on`] for a region too short for the whole word: out of line, so
/// a loop over packets keeps only the compare. The test comes by value: a reference
/// would let the call change it, and a loop could no longer keep it in registers.
#[cold]
#[inline(never)]
fn eval_short(test: Test, region: &[u8]) -> bool {
    test.eval_on(region)
}

/// A pattern as a boolean expression over word tests.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Expr {
    True,
    False,
    Test(Test),
    Not(Box<Expr>),
    And(Vec<Expr>),
    Or(Vec<Expr>),
    /// `c ? a : b`
    Cond(Box<Expr>, Box<Expr>, Box<Expr>),
}

impl Expr {
    pub fn test(base: Base, offset: u32, value: u32, mask: u32) -> Expr {
        Expr::Test(Test::new(base, offset, value, mask))
    }

    #[allow(clippy::should_implement_trait)]
    pub fn not(self) -> Expr {
        match self {
            Expr::True => Expr::False,
            Expr::False => Expr::True,
            Expr::Not(e) => *e,
            e => Expr::Not(Box::new(e)),
        }
    }

    /// Negation that leaves short packets failing (Click's `negate_subtree(tree,
    /// true)`): every leaf's short result is flipped, then the whole is negated.
    pub fn negate_keep_short(self) -> Expr {
        self.flip_short().not()
    }

    fn flip_short(self) -> Expr {
        match self {
            Expr::Test(mut t) => {
                t.short_match = !t.short_match;
                Expr::Test(t)
            }
            Expr::Not(e) => Expr::Not(Box::new(e.flip_short())),
            Expr::And(v) => Expr::And(v.into_iter().map(Expr::flip_short).collect()),
            Expr::Or(v) => Expr::Or(v.into_iter().map(Expr::flip_short).collect()),
            Expr::Cond(c, a, b) => Expr::Cond(
                Box::new(c.flip_short()),
                Box::new(a.flip_short()),
                Box::new(b.flip_short()),
            ),
            e => e,
        }
    }

    /// Conjunction; a single part stands for itself, none means `true`.
    pub fn and(mut parts: Vec<Expr>) -> Expr {
        match parts.len() {
            0 => Expr::True,
            1 => parts.pop().unwrap_or(Expr::True),
            _ => Expr::And(parts),
        }
    }

    /// Disjunction; a single part stands for itself, none means `false`.
    pub fn or(mut parts: Vec<Expr>) -> Expr {
        match parts.len() {
            0 => Expr::False,
            1 => parts.pop().unwrap_or(Expr::False),
            _ => Expr::Or(parts),
        }
    }

    /// Direct evaluation, the reference the compiled program is checked against.
    #[cfg(test)]
    pub fn eval(&self, v: &View<'_>) -> bool {
        match self {
            Expr::True => true,
            Expr::False => false,
            Expr::Test(t) => t.eval(v),
            Expr::Not(e) => !e.eval(v),
            Expr::And(es) => es.iter().all(|e| e.eval(v)),
            Expr::Or(es) => es.iter().any(|e| e.eval(v)),
            Expr::Cond(c, a, b) => {
                if c.eval(v) {
                    a.eval(v)
                } else {
                    b.eval(v)
                }
            }
        }
    }
}

/// Where a program step leads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Target {
    Step(u32),
    Out(u32),
    Drop,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Insn {
    pub test: Test,
    pub yes: Target,
    pub no: Target,
}

/// A compiled decision program: steps only jump forward.
///
/// Step `i` is test `insns[i]` for `i` below `insns.len()`, else switch step
/// `switches[i - insns.len()]` (see `switch.rs`): kept apart so that the per-packet
/// loop tells them apart by the bounds check it makes anyway. Each switch has its
/// place among the tests (`Switch::at`), and jumps go forward in that order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Program {
    insns: Vec<Insn>,
    start: Target,
    switches: Vec<switch::Switch>,
    /// The switches' tables, shared by the switches into one chain.
    tables: Vec<switch::Table>,
}

struct Builder {
    insns: Vec<Insn>,
    seen: HashMap<Insn, u32>,
}

impl Builder {
    /// Where `t` leads for a packet whose result for `test` is already `result`:
    /// steps repeating the same test are skipped.
    fn thread(&self, mut t: Target, test: &Test, result: bool) -> Target {
        while let Target::Step(j) = t {
            match self.insns.get(j as usize) {
                Some(i) if i.test == *test => t = if result { i.yes } else { i.no },
                _ => break,
            }
        }
        t
    }

    fn emit(&mut self, mut insn: Insn) -> Target {
        insn.yes = self.thread(insn.yes, &insn.test, true);
        insn.no = self.thread(insn.no, &insn.test, false);
        if insn.yes == insn.no {
            return insn.yes;
        }
        if insn.test.mask == 0 {
            // Reads nothing, so never short, and always equal.
            return insn.yes;
        }
        if let Some(&i) = self.seen.get(&insn) {
            return Target::Step(i);
        }
        let i = self.insns.len() as u32;
        self.insns.push(insn);
        self.seen.insert(insn, i);
        Target::Step(i)
    }

    /// The program starting at `start`. Steps were emitted continuation-first; they
    /// are reversed so that execution starts at step 0 and every jump goes forward.
    fn finish(self, start: Target) -> Program {
        let n = self.insns.len() as u32;
        let remap = |t: Target| match t {
            Target::Step(i) => Target::Step(n - 1 - i),
            t => t,
        };
        let mut insns = self.insns;
        insns.reverse();
        for i in insns.iter_mut() {
            i.yes = remap(i.yes);
            i.no = remap(i.no);
        }
        Program {
            insns,
            start: remap(start),
            switches: Vec::new(),
            tables: Vec::new(),
        }
    }

    /// Compiles `e` so that matching packets continue at `t`, others at `f`.
    /// Continuations are built before the code that jumps to them.
    fn compile(&mut self, e: &Expr, t: Target, f: Target) -> Target {
        match e {
            Expr::True => t,
            Expr::False => f,
            Expr::Test(test) => self.emit(Insn {
                test: *test,
                yes: t,
                no: f,
            }),
            Expr::Not(e) => self.compile(e, f, t),
            Expr::And(es) => es.iter().rev().fold(t, |next, e| self.compile(e, next, f)),
            Expr::Or(es) => es.iter().rev().fold(f, |next, e| self.compile(e, t, next)),
            Expr::Cond(c, a, b) => {
                let ta = self.compile(a, t, f);
                let tb = self.compile(b, t, f);
                self.compile(c, ta, tb)
            }
        }
    }
}

impl Program {
    /// Compiles patterns tried in order: the first whose expression matches sends the
    /// packet to its target; a packet matching none is dropped.
    ///
    /// The program skips tests whose outcome the tests already taken on the packet's
    /// path decide (see the module doc).
    ///
    /// Chains of tests of one word against different values, an access list's rules
    /// on one field, become switch steps: one hash lookup each (see `switch.rs`).
    pub fn compile(patterns: &[(Expr, Target)]) -> Program {
        let optimised = optimise::optimise(&Program::compile_unoptimised(patterns));
        switch::add_switches(optimised, switch::MIN_MEMBERS)
    }

    /// [`Program::compile`] without skipping decided tests: each pattern's tests in
    /// order, where only a step repeating the test just taken is skipped. The
    /// reference the optimised program is checked against.
    pub fn compile_unoptimised(patterns: &[(Expr, Target)]) -> Program {
        let mut b = Builder {
            insns: Vec::new(),
            seen: HashMap::new(),
        };
        let mut next = Target::Drop;
        for (e, t) in patterns.iter().rev() {
            next = b.compile(e, *t, next);
        }
        b.finish(next)
    }

    /// The optimised programs [`Program::compile`] may choose from, and one more: with
    /// 0, 1 and 3 copies of a step for the knowledge of some paths.
    #[cfg(test)]
    pub fn compile_variants(patterns: &[(Expr, Target)]) -> Vec<Program> {
        optimise::variants(&Program::compile_unoptimised(patterns))
    }

    /// `self` with switch steps wherever at least `min` members of a chain remain:
    /// for tests, with `min` below [`Program::compile`]'s.
    #[cfg(test)]
    pub fn with_switches(self, min: usize) -> Program {
        switch::add_switches(self, min)
    }

    /// The program without the steps no path reaches, renumbered in order: the start
    /// becomes step 0 and jumps still go forward. For programs without switches.
    fn compact(self) -> Program {
        debug_assert!(self.switches.is_empty());
        let Target::Step(s) = self.start else {
            return Program {
                insns: Vec::new(),
                start: self.start,
                switches: Vec::new(),
                tables: Vec::new(),
            };
        };
        let n = self.insns.len();
        let mut live = vec![false; n];
        live[s as usize] = true;
        for i in s as usize..n {
            if live[i] {
                for t in [self.insns[i].yes, self.insns[i].no] {
                    if let Target::Step(j) = t {
                        live[j as usize] = true;
                    }
                }
            }
        }
        let mut index = vec![0u32; n];
        let mut k = 0;
        for i in 0..n {
            index[i] = k;
            k += live[i] as u32;
        }
        let remap = |t: Target| match t {
            Target::Step(i) => Target::Step(index[i as usize]),
            t => t,
        };
        Program {
            insns: (0..n)
                .filter(|&i| live[i])
                .map(|i| Insn {
                    yes: remap(self.insns[i].yes),
                    no: remap(self.insns[i].no),
                    ..self.insns[i]
                })
                .collect(),
            start: remap(self.start),
            switches: Vec::new(),
            tables: Vec::new(),
        }
    }

    /// The number of steps, switches included.
    #[cfg(test)]
    pub fn steps(&self) -> usize {
        self.insns.len() + self.switches.len()
    }

    /// The number of switch steps.
    #[cfg(test)]
    pub fn switch_steps(&self) -> usize {
        self.switches.len()
    }

    /// [`Program::run`], also returning the steps taken, in order: a test's test, or
    /// a switch's entered member's test (a switch counts as one step).
    #[cfg(test)]
    pub fn trace(&self, v: &View<'_>) -> (Option<u32>, Vec<Test>) {
        let mut t = self.start;
        let mut taken = Vec::new();
        loop {
            match t {
                Target::Step(i) => match self.insns.get(i as usize) {
                    Some(insn) => {
                        taken.push(insn.test);
                        t = if insn.test.eval(v) { insn.yes } else { insn.no };
                    }
                    None => {
                        let sw = &self.switches[i as usize - self.insns.len()];
                        taken.push(sw.test);
                        t = sw.next(&self.tables, v);
                    }
                },
                Target::Out(p) => return (Some(p), taken),
                Target::Drop => return (None, taken),
            }
        }
    }

    /// The program's only step, when it is one test leading straight to outputs or
    /// drops (the everyday `Classifier(12/0800, -)`): elements run it without the
    /// step loop.
    pub fn single_test(&self) -> Option<(Test, Target, Target)> {
        match (self.start, self.insns.as_slice()) {
            (Target::Step(0), [i])
                if self.switches.is_empty()
                    && !matches!(i.yes, Target::Step(_))
                    && !matches!(i.no, Target::Step(_)) =>
            {
                Some((i.test, i.yes, i.no))
            }
            _ => None,
        }
    }

    /// The output port for the packet seen as `v`, or `None` to drop it.
    #[inline(always)]
    pub fn run(&self, v: &View<'_>) -> Option<u32> {
        let mut t = self.start;
        loop {
            match t {
                Target::Step(i) => {
                    // Past the tests are the switches: the bounds check tells them
                    // apart, so programs without any run as they would without them.
                    let Some(insn) = self.insns.get(i as usize) else {
                        std::hint::cold_path();
                        t = self.switch(i, v)?;
                        continue;
                    };
                    // A branch, not a select: a select makes each step wait for the
                    // last one's loads (about 13 cycles a step), where a predicted
                    // branch lets the next step's loads start at once. (The hint only
                    // keeps the branch; the predictor learns either way.)
                    if insn.test.eval(v) {
                        std::hint::cold_path();
                        t = insn.yes;
                    } else {
                        t = insn.no;
                    }
                }
                Target::Out(p) => return Some(p),
                Target::Drop => return None,
            }
        }
    }

    /// Where switch step `i` (past the tests) sends the packet seen as `v`; `None`
    /// if there is no such step. Inlined: a call would cost a few nanoseconds a
    /// switch, and the loop without switches measured the same either way.
    #[inline(always)]
    fn switch(&self, i: u32, v: &View<'_>) -> Option<Target> {
        let k = (i as usize).checked_sub(self.insns.len())?;
        Some(self.switches.get(k)?.next(&self.tables, v))
    }

    /// The program in the style of Click's `program` handler: one step a line,
    /// `OFFSET/VALUE%MASK  yes->...  no->...`, outputs as `[N]`, drop as `[X]`. A
    /// switch step reads `OFFSET/%MASK  switch N values, table T  default->...`
    /// (`from P` when entered past its table's first member; `short->...` where a
    /// region too short for the mask goes when that is not the default); the tables
    /// follow the steps, each member as `P VALUE->...`, in the order they are tried.
    pub fn unparse(&self) -> String {
        let mut s = String::new();
        if !matches!(self.start, Target::Step(_)) {
            let _ = writeln!(s, "all->{}", show(self.start, &[]));
            return s;
        }
        let nt = self.insns.len();
        // The steps in the order shown: each switch where its member was.
        let mut order: Vec<usize> = Vec::with_capacity(nt + self.switches.len());
        let mut k = 0;
        for t in 0..=nt {
            while k < self.switches.len() && self.switches[k].at as usize <= t {
                order.push(nt + k);
                k += 1;
            }
            if t < nt {
                order.push(t);
            }
        }
        order.extend(nt + k..nt + self.switches.len());
        let mut shown = vec![0u32; order.len()];
        for (d, &i) in order.iter().enumerate() {
            shown[i] = d as u32;
        }
        let t = |t: Target| show(t, &shown);
        for (d, &i) in order.iter().enumerate() {
            match self.insns.get(i) {
                Some(insn) => {
                    let test = insn.test;
                    let _ = write!(
                        s,
                        "{:>3} {}{}/{:08x}%{:08x}  yes->{}  no->{}",
                        d,
                        base_prefix(test.base),
                        test.offset,
                        test.value,
                        test.mask,
                        t(insn.yes),
                        t(insn.no)
                    );
                    if test.short_match {
                        s.push_str("  short->yes");
                    }
                }
                None => {
                    let sw = &self.switches[i - nt];
                    let test = sw.test;
                    let (count, first) = self
                        .tables
                        .get(sw.table as usize)
                        .map_or((0, 0), |tb| tb.count_from(sw.from));
                    let _ = write!(
                        s,
                        "{:>3} {}{}/%{:08x}  switch {} values, table {}",
                        d,
                        base_prefix(test.base),
                        test.offset,
                        test.mask,
                        count,
                        sw.table
                    );
                    if sw.from != first {
                        let _ = write!(s, " from {}", sw.from);
                    }
                    let _ = write!(s, "  default->{}", t(sw.default));
                    if sw.short != sw.default {
                        let _ = write!(s, "  short->{}", t(sw.short));
                    }
                }
            }
            s.push('\n');
        }
        for (k, tb) in self.tables.iter().enumerate() {
            let _ = writeln!(s, "table {}:", k);
            for row in tb.members_from(0).chunks(6) {
                s.push_str("   ");
                for (pos, value, target) in row {
                    let _ = write!(s, " {:>3} {:08x}->{}", pos, value, t(*target));
                }
                s.push('\n');
            }
        }
        s
    }
}

/// A step's region, as [`Program::unparse`] prefixes its offset.
fn base_prefix(b: Base) -> &'static str {
    match b {
        Base::Data => "",
        Base::Net => "ip+",
        Base::Transp => "transp+",
    }
}

/// A target as [`Program::unparse`] shows it, steps by their numbers in `shown` (by
/// their own where it has none).
fn show(t: Target, shown: &[u32]) -> String {
    match t {
        Target::Step(i) => format!("step {}", shown.get(i as usize).copied().unwrap_or(i)),
        Target::Out(p) => format!("[{}]", p),
        Target::Drop => "[X]".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn native_test_answers_as_the_big_endian_test() {
        // Offsets at, inside and past the end of the region; masks of every width.
        let region: Vec<u8> = (0..10u8).map(|i| i.wrapping_mul(37) ^ 0x5a).collect();
        for off in 0..12u32 {
            for mask in [
                0xffff_ffffu32,
                0xffff_0000,
                0x0000_ff00,
                0xff00_0000,
                0,
                0x0f0f_f0f0,
            ] {
                let word = region
                    .get(off as usize..off as usize + 4)
                    .map_or(0x1234_5678, |b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]));
                for value in [word, word ^ 0x0100, !word] {
                    for short_match in [false, true] {
                        let mut t = Test::new(Base::Data, off, value, mask);
                        t.short_match = short_match;
                        for len in [region.len(), 5, 0] {
                            let r = &region[..len];
                            assert_eq!(
                                t.native().eval_on(r),
                                t.eval_on(r),
                                "off {off} mask {mask:#x} value {value:#x} len {len}"
                            );
                        }
                    }
                }
            }
        }
        // A hand-checked case: 12/0800 on an IPv4 Ethernet header.
        let mut frame = [0u8; 14];
        frame[12] = 0x08;
        let t = Test::new(Base::Data, 12, 0x0800_0000, 0xffff_0000);
        assert!(t.native().eval_on(&frame));
        frame[13] = 0x06; // ARP
        assert!(!t.native().eval_on(&frame));
        frame[12] = 0x86;
        frame[13] = 0xdd; // IPv6
        assert!(!t.native().eval_on(&frame));
        // Longer than the word: the same bytes decide.
        let mut long = [0u8; 60];
        long[12] = 0x08;
        assert!(t.native().eval_on(&long));
        long[13] = 0x01;
        assert!(!t.native().eval_on(&long));
    }
}
