//! The mapping table: flows, each with its forward and reply entry in a hash map,
//! their timeouts, and the capacity that several rewriters may share.
//!
//! Time is in milliseconds (Click's jiffies). Each flow is either *guaranteed* (a
//! packet was processed less than its guarantee ago; it may not be evicted) or
//! *best effort* (it expires a timeout after its last packet, and a new flow finding
//! the table full evicts the best-effort flow that expires first). Two binary heaps
//! keyed by expiry, one per kind, as Click's `IPRewriterHeap`: a flow knows its place
//! in its heap, so a packet refreshing it moves it in O(log n) without allocating.

use super::flow::{FlowId, TCP};
use std::collections::HashMap;

/// A map key: the owning rewriter (its index among the rewriters sharing this
/// table), the map (a protocol number, or 0 for the address rewriters), and the flow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Key {
    pub owner: u32,
    pub map: u8,
    pub flow: FlowId,
}

/// Two words to the keyed hash, not six fields: with SipHash each field written was a
/// call into its buffering, which had cost more than the hashing itself (a fifth of
/// the NAT path's instructions). Equal keys write equal words; the owner's bits past
/// 24 only go unhashed (rewriters sharing a table are few).
impl std::hash::Hash for Key {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        let f = &self.flow;
        state.write_u64(u64::from(f.saddr) << 32 | u64::from(f.daddr));
        state.write_u64(
            u64::from(self.owner) << 40
                | u64::from(self.map) << 32
                | u64::from(f.sport) << 16
                | u64::from(f.dport),
        );
    }
}

/// A flow's timeouts, in milliseconds, chosen by its rewriter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Timeouts {
    pub kind: TimeoutKind,
    /// The timeout (TCP: of flows with data both ways; others: the only one).
    pub main: u64,
    /// TCP: flows closed both ways (FIN each way, or RST).
    pub done: u64,
    /// TCP: flows without data one way yet. UDP: streaming flows.
    pub other: u64,
    /// Time a flow is kept after each packet whatever the capacity (0: none).
    pub guarantee: u64,
}

impl Timeouts {
    /// UDP flows' timeouts: `main`, `streaming` for flows seen both ways, `guarantee`.
    pub fn udp(main: u64, streaming: u64, guarantee: u64) -> Timeouts {
        Timeouts {
            kind: TimeoutKind::Udp,
            main,
            done: 0,
            other: streaming,
            guarantee,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TimeoutKind {
    Tcp,
    Udp,
    Plain,
}

/// State bits of a flow (Click's `IPRewriterFlow` states).
pub(crate) const FORWARD_DONE: u8 = 1;
pub(crate) const REPLY_DONE: u8 = 2;
pub(crate) const FORWARD_DATA: u8 = 4;
pub(crate) const REPLY_DATA: u8 = 8;

/// One mapping: the forward entry `keys[0]` and the reply entry `keys[1]`.
#[derive(Clone, Debug)]
pub(crate) struct Flow {
    pub keys: [Key; 2],
    /// Output of the forward and of the reply direction.
    pub outputs: [u16; 2],
    pub proto: u8,
    /// The input whose spec created the flow.
    pub input: u16,
    pub timeouts: Timeouts,
    pub expiry: u64,
    /// The expiry its heap orders it by: at most `expiry`. A packet moves `expiry`
    /// later without moving the flow in its heap; whoever looks at a heap's top first
    /// sinks a top whose expiry moved on ([`Table::top`]), so a refresh costs O(1)
    /// where it had cost a sift through the heap each packet.
    heap_expiry: u64,
    pub guaranteed: bool,
    place: u32,
    pub state: u8,
    pub packets: u32,
    pub reply_anno: u8,
}

impl Flow {
    pub fn new(
        owner: u32,
        map: u8,
        flow: FlowId,
        rewritten: FlowId,
        outputs: [u16; 2],
        input: u16,
        timeouts: Timeouts,
    ) -> Flow {
        Flow {
            keys: [
                Key { owner, map, flow },
                Key {
                    owner,
                    map,
                    flow: rewritten.reverse(),
                },
            ],
            outputs,
            proto: map,
            input,
            timeouts,
            expiry: 0,
            guaranteed: false,
            heap_expiry: 0,
            place: 0,
            state: 0,
            packets: 0,
            reply_anno: 0,
        }
    }

    /// The flow a packet of direction `dir` (0 forward, 1 reply) becomes.
    pub fn rewritten(&self, dir: usize) -> FlowId {
        self.keys[1 - dir].flow.reverse()
    }

    /// The best-effort timeout the flow's state calls for (Click's
    /// `tcp_flow_timeout` / `udp_flow_timeout`).
    pub fn timeout(&self) -> u64 {
        let t = &self.timeouts;
        match t.kind {
            TimeoutKind::Tcp => {
                if self.state & (FORWARD_DONE | REPLY_DONE) == FORWARD_DONE | REPLY_DONE {
                    t.done
                } else if self.state & (FORWARD_DATA | REPLY_DATA) == FORWARD_DATA | REPLY_DATA {
                    t.main
                } else {
                    t.other
                }
            }
            TimeoutKind::Udp => {
                if self.packets >= 3 && self.state & (FORWARD_DATA | REPLY_DATA) == FORWARD_DATA | REPLY_DATA
                {
                    t.other
                } else {
                    t.main
                }
            }
            TimeoutKind::Plain => t.main,
        }
    }

    /// When the flow, guaranteed or not, stops being valid: a guaranteed flow lives
    /// out its guarantee even when its timeout is shorter (Click moves a flow to best
    /// effort only once its guarantee is over).
    fn dead_at(&self) -> u64 {
        if self.guaranteed {
            self.expiry
                .max((self.expiry - self.timeouts.guarantee) + self.timeout())
        } else {
            self.expiry
        }
    }

    /// Notes a packet of direction `dir` with TCP `flags` and `payload` bytes (for
    /// the TCP states; UDP counts packets and directions).
    pub fn note_packet(&mut self, dir: usize, tcp: Option<(u8, usize)>) {
        self.packets = self.packets.saturating_add(1);
        let data = if dir == 0 { FORWARD_DATA } else { REPLY_DATA };
        let done = if dir == 0 { FORWARD_DONE } else { REPLY_DONE };
        // TCP states for flows with TCP timeouts; the others (UDPRewriter's flows,
        // TCP ones too) note the directions packets went.
        if self.timeouts.kind != TimeoutKind::Tcp {
            self.state |= data;
            return;
        }
        match (self.proto, tcp) {
            (TCP, Some((flags, payload))) => {
                if payload > 0 {
                    self.state |= data;
                }
                if flags & super::flow::TH_RST != 0 {
                    self.state |= FORWARD_DONE | REPLY_DONE;
                } else if flags & super::flow::TH_FIN != 0 {
                    self.state |= done;
                } else if flags & super::flow::TH_SYN != 0 {
                    self.state &= !done;
                }
            }
            (TCP, None) => {}
            _ => self.state |= data,
        }
    }
}

/// Where a key leads: a flow and the direction of the entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Entry {
    pub flow: u32,
    pub dir: u8,
}

/// Per-input counts of one rewriter: mappings alive that the input made, and
/// mapping failures.
#[derive(Clone, Debug, Default)]
pub(crate) struct InputCounts {
    pub count: Vec<u32>,
    pub failures: Vec<u32>,
}

const BEST_EFFORT: usize = 0;
const GUARANTEED: usize = 1;

/// The flows of one rewriter, or of several sharing a capacity.
pub(crate) struct Table {
    flows: Vec<Option<Flow>>,
    free: Vec<u32>,
    /// Keyed by flows outsiders choose (reply flows come from anywhere): a hash keyed
    /// at random for each table (aHash), so that no one can aim packets at one
    /// bucket; std's SipHash, keyed as well, had cost about 170 instructions a packet.
    map: HashMap<Key, Entry, ahash::RandomState>,
    heaps: [Vec<u32>; 2],
    pub capacity: u32,
    /// Per owner.
    pub counts: Vec<InputCounts>,
}

/// Click's default capacity (no limit to speak of).
pub(crate) const DEFAULT_CAPACITY: u32 = 0x7fff_ffff;
/// Flows a table makes room for up front.
const RESERVE: usize = 1024;

impl Table {
    pub fn new(capacity: u32) -> Table {
        let r = RESERVE.min(capacity as usize);
        Table {
            flows: Vec::with_capacity(r),
            free: Vec::with_capacity(r),
            map: HashMap::with_capacity_and_hasher(2 * r, ahash::RandomState::new()),
            heaps: [Vec::with_capacity(r), Vec::with_capacity(r)],
            capacity,
            counts: Vec::new(),
        }
    }

    /// Registers a rewriter with `ninputs` inputs; returns its owner number.
    pub fn add_owner(&mut self, ninputs: usize) -> u32 {
        self.counts.push(InputCounts {
            count: vec![0; ninputs],
            failures: vec![0; ninputs],
        });
        (self.counts.len() - 1) as u32
    }

    /// Number of flows (Click's `size`).
    pub fn size(&self) -> usize {
        self.heaps[0].len() + self.heaps[1].len()
    }

    pub fn flow(&self, i: u32) -> &Flow {
        self.flows[i as usize].as_ref().expect("live flow")
    }

    pub fn flow_mut(&mut self, i: u32) -> &mut Flow {
        self.flows[i as usize].as_mut().expect("live flow")
    }

    pub fn contains(&self, key: &Key) -> bool {
        self.map.contains_key(key)
    }

    /// The entry for `key`, if its flow is still valid at `now`; a flow found
    /// expired is removed on the way.
    pub fn lookup(&mut self, key: &Key, now: u64) -> Option<Entry> {
        let e = *self.map.get(key)?;
        if now >= self.flow(e.flow).dead_at() {
            self.destroy(e.flow);
            return None;
        }
        Some(e)
    }

    /// The entry for `key` as it stands, expired or not (handlers, ICMP errors).
    pub fn get(&self, key: &Key) -> Option<Entry> {
        self.map.get(key).copied()
    }

    /// Adds `flow`, made by input `flow.input` of its owner, at `now`. Returns its
    /// index, or `None` if the table is full of guaranteed flows or the new flow is
    /// the first to go (a mapping failure, counted).
    pub fn insert(&mut self, mut flow: Flow, now: u64) -> Option<u32> {
        let owner = flow.keys[0].owner as usize;
        let input = usize::from(flow.input);
        Self::set_expiry(&mut flow, now);
        let keys = flow.keys;
        let which = usize::from(flow.guaranteed);
        let i = match self.free.pop() {
            Some(i) => {
                self.flows[i as usize] = Some(flow);
                i
            }
            None => {
                self.flows.push(Some(flow));
                (self.flows.len() - 1) as u32
            }
        };
        self.map.insert(keys[0], Entry { flow: i, dir: 0 });
        if let Some(old) = self.map.insert(keys[1], Entry { flow: i, dir: 1 }) {
            // The reply entry took the key of another flow's entry: that flow goes, as
            // in Click (a flow whose two keys are equal keeps its reply entry).
            if old.flow != i {
                self.destroy(old.flow);
                self.map.insert(keys[1], Entry { flow: i, dir: 1 });
            }
        }
        self.heap_push(which, i);
        if let Some(c) = self.counts[owner].count.get_mut(input) {
            *c += 1;
        }
        if self.size() > self.capacity as usize {
            self.shift_best_effort(now);
            let dead = self.top(BEST_EFFORT).unwrap_or(i);
            self.destroy(dead);
            if dead == i {
                if let Some(f) = self.counts[owner].failures.get_mut(input) {
                    *f += 1;
                }
                return None;
            }
        }
        Some(i)
    }

    /// Counts a mapping failure of `owner`'s `input` (no mapping could be made).
    pub fn count_failure(&mut self, owner: u32, input: usize) {
        if let Some(f) = self.counts[owner as usize].failures.get_mut(input) {
            *f += 1;
        }
    }

    fn set_expiry(flow: &mut Flow, now: u64) {
        if flow.timeouts.guarantee > 0 {
            flow.guaranteed = true;
            flow.expiry = now + flow.timeouts.guarantee;
        } else {
            flow.guaranteed = false;
            flow.expiry = now + flow.timeout();
        }
    }

    /// A packet of flow `i` was processed at `now`: its guarantee or timeout starts
    /// again.
    pub fn refresh(&mut self, i: u32, now: u64) {
        let f = self.flow_mut(i);
        let (was, place) = (usize::from(f.guaranteed), f.place as usize);
        Self::set_expiry(f, now);
        let now_kind = usize::from(f.guaranteed);
        if was != now_kind {
            self.heap_remove(was, place);
            self.heap_push(now_kind, i);
        } else if f.expiry < f.heap_expiry {
            // Sooner than the heap has it (a TCP flow closing): it may have to rise.
            f.heap_expiry = f.expiry;
            self.heap_fix(was, place);
        }
    }

    /// Removes flow `i` and its entries.
    pub fn destroy(&mut self, i: u32) {
        let Some(f) = self.flows[i as usize].take() else {
            return;
        };
        // Put it back for the heap's comparisons while it is removed.
        let (which, place) = (usize::from(f.guaranteed), f.place as usize);
        let keys = f.keys;
        let (owner, input) = (keys[0].owner as usize, usize::from(f.input));
        self.flows[i as usize] = Some(f);
        self.heap_remove(which, place);
        self.flows[i as usize] = None;
        for (d, k) in keys.iter().enumerate() {
            if self.map.get(k)
                == Some(&Entry {
                    flow: i,
                    dir: d as u8,
                })
            {
                self.map.remove(k);
            }
        }
        if let Some(c) = self.counts[owner].count.get_mut(input) {
            *c = c.saturating_sub(1);
        }
        self.free.push(i);
    }

    /// Flows whose guarantee ran out by `now` become best effort, expiring a timeout
    /// after their last packet.
    fn shift_best_effort(&mut self, now: u64) {
        while let Some(top) = self.top(GUARANTEED) {
            let f = self.flow_mut(top);
            if now < f.expiry {
                break;
            }
            f.expiry = f.expiry - f.timeouts.guarantee + f.timeout();
            self.heap_remove(GUARANTEED, 0);
            self.flow_mut(top).guaranteed = false;
            self.heap_push(BEST_EFFORT, top);
        }
    }

    /// Removes the flows expired at `now`, then the best-effort flows that expire
    /// first (then guaranteed ones) until at most `capacity` remain (Click's
    /// `shrink_heap`).
    pub fn shrink(&mut self, now: u64, capacity: usize) {
        self.shift_best_effort(now);
        while let Some(top) = self.top(BEST_EFFORT) {
            if now < self.flow(top).expiry {
                break;
            }
            self.destroy(top);
        }
        while self.size() > capacity {
            let top = match self.top(BEST_EFFORT) {
                Some(t) => t,
                None => self.top(GUARANTEED).expect("flows left"),
            };
            self.destroy(top);
        }
    }

    /// Removes every flow `owner`'s `input` made (its spec was replaced).
    pub fn destroy_input(&mut self, owner: u32, input: usize) {
        let doomed: Vec<u32> = self
            .live(owner)
            .filter(|&(_, f)| usize::from(f.input) == input)
            .map(|(i, _)| i)
            .collect();
        for i in doomed {
            self.destroy(i);
        }
    }

    /// `owner`'s live flows, in table order.
    pub fn live(&self, owner: u32) -> impl Iterator<Item = (u32, &Flow)> {
        self.flows.iter().enumerate().filter_map(move |(i, f)| {
            f.as_ref()
                .filter(|f| f.keys[0].owner == owner)
                .map(|f| (i as u32, f))
        })
    }

    /// Whether the entry `d` of flow `i` is in the map (a self-mapped flow's forward
    /// entry is not).
    pub fn entry_mapped(&self, i: u32, d: usize) -> bool {
        let f = self.flow(i);
        self.map.get(&f.keys[d])
            == Some(&Entry {
                flow: i,
                dir: d as u8,
            })
    }

    // The heaps: `heaps[h]` holds flow indices, ordered by expiry, each flow's `place`
    // its position.

    fn expiry_at(&self, h: usize, pos: usize) -> u64 {
        self.flow(self.heaps[h][pos]).heap_expiry
    }

    /// The flow of heap `h` that expires first, once every top whose expiry moved on
    /// since it was placed has sunk to where its expiry belongs.
    fn top(&mut self, h: usize) -> Option<u32> {
        loop {
            let &top = self.heaps[h].first()?;
            let f = self.flow_mut(top);
            if f.heap_expiry >= f.expiry {
                return Some(top);
            }
            f.heap_expiry = f.expiry;
            self.sift_down(h, 0);
        }
    }

    fn set_place(&mut self, h: usize, pos: usize) {
        let i = self.heaps[h][pos];
        self.flow_mut(i).place = pos as u32;
    }

    fn heap_push(&mut self, h: usize, i: u32) {
        let f = self.flow_mut(i);
        f.heap_expiry = f.expiry;
        self.heaps[h].push(i);
        let pos = self.heaps[h].len() - 1;
        self.set_place(h, pos);
        self.sift_up(h, pos);
    }

    fn heap_remove(&mut self, h: usize, pos: usize) {
        let last = self.heaps[h].len() - 1;
        self.heaps[h].swap(pos, last);
        self.heaps[h].pop();
        if pos < self.heaps[h].len() {
            self.set_place(h, pos);
            self.heap_fix(h, pos);
        }
    }

    fn heap_fix(&mut self, h: usize, pos: usize) {
        let pos = self.sift_up(h, pos);
        self.sift_down(h, pos);
    }

    fn sift_up(&mut self, h: usize, mut pos: usize) -> usize {
        while pos > 0 {
            let parent = (pos - 1) / 2;
            if self.expiry_at(h, parent) <= self.expiry_at(h, pos) {
                break;
            }
            self.heaps[h].swap(parent, pos);
            self.set_place(h, pos);
            self.set_place(h, parent);
            pos = parent;
        }
        pos
    }

    fn sift_down(&mut self, h: usize, mut pos: usize) {
        let n = self.heaps[h].len();
        loop {
            let (l, r) = (2 * pos + 1, 2 * pos + 2);
            let mut least = pos;
            if l < n && self.expiry_at(h, l) < self.expiry_at(h, least) {
                least = l;
            }
            if r < n && self.expiry_at(h, r) < self.expiry_at(h, least) {
                least = r;
            }
            if least == pos {
                return;
            }
            self.heaps[h].swap(least, pos);
            self.set_place(h, pos);
            self.set_place(h, least);
            pos = least;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmo(main: u64, guarantee: u64) -> Timeouts {
        Timeouts {
            kind: TimeoutKind::Plain,
            main,
            done: main,
            other: main,
            guarantee,
        }
    }

    fn flow(owner: u32, n: u32, t: Timeouts) -> Flow {
        let f = FlowId::new(n, 1, 100, 2);
        let r = FlowId::new(200, n as u16, 100, 2);
        Flow::new(owner, 0, f, r, [0, 1], 0, t)
    }

    #[test]
    fn the_heaps_keep_the_earliest_expiry_on_top_through_refreshes_and_removals() {
        let mut t = Table::new(DEFAULT_CAPACITY);
        let o = t.add_owner(1);
        let ids: Vec<u32> = (0..50)
            .map(|n| t.insert(flow(o, n, tmo(1000, 0)), (n as u64 * 37) % 101).unwrap())
            .collect();
        for (k, &i) in ids.iter().enumerate().step_by(3) {
            t.refresh(i, 200 + k as u64);
        }
        for &i in ids.iter().skip(1).step_by(7) {
            t.destroy(i);
        }
        let mut last = 0;
        while let Some(top) = t.top(BEST_EFFORT) {
            let e = t.flow(top).expiry;
            assert!(e >= last);
            last = e;
            t.destroy(top);
        }
        assert_eq!(t.size(), 0);
        assert!(t.map.is_empty());
    }

    proptest::proptest! {
        /// Refreshes leave flows where they were in their heap, later than their key:
        /// the tops still come out in the order of the flows' true expiry, whatever
        /// the inserts, refreshes (later, or sooner as a closing TCP flow's) and
        /// removals before.
        #[test]
        fn tops_come_out_in_true_expiry_order(ops in proptest::collection::vec((0u8..4, 0u32..40, 0u64..500), 1..200)) {
            let mut t = Table::new(DEFAULT_CAPACITY);
            let o = t.add_owner(1);
            let mut live: Vec<u32> = Vec::new();
            let mut n = 0;
            for (op, pick, at) in ops {
                match op {
                    0 | 1 => {
                        n += 1;
                        if let Some(i) = t.insert(flow(o, n, tmo(1000 + at, 0)), at) {
                            live.push(i);
                        }
                    }
                    2 if !live.is_empty() => {
                        let i = live[pick as usize % live.len()];
                        t.refresh(i, at);
                    }
                    3 if !live.is_empty() => {
                        // A timeout cut short, as a TCP flow's when it closes.
                        let i = live[pick as usize % live.len()];
                        t.flow_mut(i).timeouts.main = at % 50;
                        t.refresh(i, at % 100);
                    }
                    _ => {}
                }
            }
            let mut want: Vec<u64> = live.iter().map(|&i| t.flow(i).expiry).collect();
            want.sort_unstable();
            let mut got = Vec::new();
            while let Some(top) = t.top(BEST_EFFORT) {
                got.push(t.flow(top).expiry);
                t.destroy(top);
            }
            proptest::prop_assert_eq!(got, want);
        }
    }

    #[test]
    fn a_full_table_evicts_the_first_best_effort_flow_or_refuses_the_new_one() {
        let mut t = Table::new(2);
        let o = t.add_owner(1);
        let a = t.insert(flow(o, 1, tmo(100, 5)), 0).unwrap();
        let _b = t.insert(flow(o, 2, tmo(100, 5)), 1).unwrap();
        // Both guaranteed: the newcomer is refused.
        assert_eq!(t.insert(flow(o, 3, tmo(100, 5)), 2), None);
        assert_eq!(t.counts[0].failures[0], 1);
        // At 5, a's guarantee is over: it goes.
        let c = t.insert(flow(o, 4, tmo(100, 5)), 5).unwrap();
        assert!(t.flows[a as usize].is_none() || a == c);
        assert_eq!(t.size(), 2);
        assert_eq!(t.counts[0].count[0], 2);
    }

    #[test]
    fn lookups_remove_expired_flows() {
        let mut t = Table::new(DEFAULT_CAPACITY);
        let o = t.add_owner(1);
        let f = flow(o, 1, tmo(100, 5));
        let k = f.keys[1];
        t.insert(f, 0).unwrap();
        assert!(t.lookup(&k, 99).is_some());
        assert!(t.lookup(&k, 100).is_none());
        assert_eq!(t.size(), 0);
        // A timeout shorter than the guarantee: the flow lives out its guarantee.
        let f = flow(o, 2, tmo(1000, 5000));
        let k = f.keys[1];
        t.insert(f, 0).unwrap();
        assert!(t.lookup(&k, 3000).is_some());
        assert!(t.lookup(&k, 4999).is_some());
        assert!(t.lookup(&k, 5000).is_none());
    }
}
