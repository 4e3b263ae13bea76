//! The writer's record: every route by length, each node's routes, child slots and
//! inherited value, and the steps that rebuild a node from it.

use super::*;

/// Buffers the writer reuses from node to node (an update of a prefix with many nodes
/// under it can rebuild hundreds of them).
#[derive(Default)]
pub(super) struct Scratch {
    pub(super) runs: Vec<(u32, u64)>,
    pub(super) stack: Vec<(u32, u64)>,
    pub(super) words: Vec<u64>,
    /// Positions in `words` of the values that are links.
    pub(super) links: Vec<usize>,
}

/// A route ending in a node's stride, as the node's record keeps it: `key` is the
/// route's bits in the stride (the slot of its first address) shifted left by 8, ORed
/// with its length, so that ordering by `key` is ordering by address then length
/// within the node.
///
/// (8 bytes, where the route as `(u128, u8, u32)` took 32: inserting into or removing
/// from the sorted list of a /32 holding thousands of /48s moves a quarter of the
/// bytes, and the binary searches compare one `u32`.)
#[derive(Clone, Copy)]
pub(super) struct Own {
    pub(super) key: u32,
    pub(super) nh: u32,
}

impl Own {
    /// The key of the route `a/len` (masked) in the node of level `level`.
    #[inline]
    pub(super) fn key(a: u128, len: u8, level: usize) -> u32 {
        (slot_of(a, DEPTHS[level], STRIDES[level]) << 8) | u32::from(len)
    }

    /// The route's first slot in its node's stride.
    #[inline]
    pub(super) fn slot(self) -> u32 {
        self.key >> 8
    }

    /// The route's (slot, length, next hop), as [`runs_of`] takes them.
    #[inline]
    pub(super) fn parts(self) -> (u32, u32, u32) {
        (self.slot(), self.key & 0xff, self.nh)
    }
}

/// The writer's record of one node.
pub(super) struct NodeRec {
    /// Routes ending in this node's stride, sorted by address then length.
    pub(super) own: Vec<Own>,
    /// Slots holding a child node, ascending, each with the child's current link (0
    /// until the child is first encoded), so that encoding this node looks no child up.
    pub(super) kids: Vec<(u32, u64)>,
    /// Routes longer than this node's depth inside its range (own and below); the node
    /// exists while this is positive.
    pub(super) deep: usize,
    /// Length and next hop of the longest prefix longer than /16 and of at most the
    /// node's depth covering its range (0 and NONE if none; prefixes of at most 16 bits
    /// and the default route are applied separately).
    pub(super) cover_len: u8,
    pub(super) cover: u32,
    /// The published node (0 before the first build).
    pub(super) link: u64,
    /// Sub-nodes of a split node placed on their own by [`Runs6::patch_sub`] (the others
    /// live in the node's block), freed with the node or when replaced in turn.
    pub(super) subs: Vec<u64>,
}

impl NodeRec {
    pub(super) fn new() -> NodeRec {
        NodeRec {
            own: Vec::new(),
            kids: Vec::new(),
            deep: 0,
            cover_len: 0,
            cover: NONE,
            link: 0,
            subs: Vec::new(),
        }
    }
}

/// The longest route of `own` (a node's routes at level `level`) covering `key`.
pub(super) fn own_cover(own: &[Own], level: usize, key: u128) -> Option<(u8, u32)> {
    let (d, s) = (DEPTHS[level], STRIDES[level]);
    (d + 1..=d + s).rev().find_map(|l| {
        let k = Own::key(key.masked(l as u8), l as u8, level);
        own.binary_search_by_key(&k, |r| r.key)
            .ok()
            .map(|i| (l as u8, own[i].nh))
    })
}

/// Writer-side state.
pub(super) struct Writer {
    /// `routes[len]`: masked prefix to next hop, every length.
    pub(super) routes: Vec<PrefixMap<u128>>,
    /// Per /16: length (1..=16) and next hop of the longest prefix of at most 16 bits
    /// covering it (0 and NONE if none).
    pub(super) top_len: Vec<u8>,
    pub(super) top_val: Vec<u32>,
    /// Nodes by (level, base address).
    pub(super) nodes: FastMap<(u8, u128), NodeRec>,
    pub(super) count: usize,
    pub(super) scratch: Scratch,
}

/// Length and next hop of the longest prefix longer than /16 and of at most the node's
/// depth covering the node `(level, base)`, from its parent's record (the parent's
/// covering route or cover); at level 0, none (0 and NONE).
pub(super) fn cover_for(w: &Writer, level: usize, base: u128) -> (u8, u32) {
    match parent(level, base) {
        // Prefixes of at most 16 bits are not pushed into nodes (see `First::short`).
        None => (0, NONE),
        Some((pl, pb)) => {
            let p = &w.nodes[&(pl as u8, pb)];
            own_cover(&p.own, pl, base).unwrap_or((p.cover_len, p.cover))
        }
    }
}

/// Applies a change of the prefix covering node `(level, base)` to the node's cover
/// when the node's cover is that prefix's (see [`ShortChange::owns`]), marking it dirty,
/// and then to its children.
pub(super) fn push_cover(
    w: &mut Writer,
    level: usize,
    base: u128,
    change: &ShortChange,
    dirty: &mut Vec<Dirty>,
) {
    let Some(rec) = w.nodes.get_mut(&(level as u8, base)) else {
        return;
    };
    if !change.owns(rec.cover_len) {
        return;
    }
    rec.cover_len = change.set_len;
    rec.cover = change.set_val;
    dirty.push((level, base, WHOLE));
    let (d, s) = (DEPTHS[level], STRIDES[level]);
    let kids: Vec<u32> = rec.kids.iter().map(|k| k.0).collect();
    for slot in kids {
        let kb = base | (u128::from(slot) << (128 - d - s));
        // A kid under one of this node's own routes has that route as its cover, which
        // the change never owns (it is longer than the changed prefix).
        push_cover(w, level + 1, kb, change, dirty);
    }
}

/// Records `link` as the current link of node `(level, base)` (level > 0) in its
/// parent's record; returns the parent's link.
pub(super) fn set_kid_link(
    nodes: &mut FastMap<(u8, u128), NodeRec>,
    level: usize,
    base: u128,
    link: u64,
) -> u64 {
    let pl = level - 1;
    let slot = slot_of(base, DEPTHS[pl], STRIDES[pl]);
    let p = nodes
        .get_mut(&(pl as u8, base.masked(DEPTHS[pl] as u8)))
        .expect("parent of a node");
    let at = p
        .kids
        .binary_search_by_key(&slot, |k| k.0)
        .expect("a node is its parent's kid");
    p.kids[at].1 = link;
    p.link
}

/// Encodes node `(level, base)` from its record and its children's current links into
/// `scratch.words` (its link values' positions into `scratch.links`); returns the number
/// its link carries (see [`encode`]) and its link flags.
pub(super) fn encode_node(
    nodes: &FastMap<(u8, u128), NodeRec>,
    level: usize,
    base: u128,
    rec: &NodeRec,
    scratch: &mut Scratch,
) -> (usize, u64) {
    let (d, s) = (DEPTHS[level], STRIDES[level]);
    debug_assert!(rec.kids.iter().all(|&(slot, link)| {
        let kb = base | (u128::from(slot) << (128 - d - s));
        nodes[&(level as u8 + 1, kb)].link == link
    }));
    runs_of(
        d,
        s,
        rec.cover,
        rec.own.iter().map(|o| o.parts()),
        rec.kids.iter().copied(),
        &mut scratch.runs,
        &mut scratch.stack,
    );
    encode(&scratch.runs, s, &mut scratch.words, &mut scratch.links)
}
