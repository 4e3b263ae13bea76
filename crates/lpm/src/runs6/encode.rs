//! Nodes from runs: the keyed, direct and split encodings, and placing and freeing
//! nodes on the heap.

use super::*;

/// The words of a node over `stride` bits holding `runs` (`(first slot, value)`, first
/// slot 0, ascending), into `words`, and the positions of its values that are links
/// into `links` (both cleared first). [`SUB`] links in a split node hold the sub-node's
/// byte offset from the node's start: whoever places the node adds its address.
/// Returns the number its link carries (its runs, or for a split node its lines) and
/// its link flags ([`DIRECT`], [`DIRECT`] | [`SPLIT`], or 0).
pub(super) fn encode(
    runs: &[(u32, u64)],
    stride: u32,
    words: &mut Vec<u64>,
    links: &mut Vec<usize>,
) -> (usize, u64) {
    words.clear();
    links.clear();
    if stride == 8 || runs.len() <= FLAT {
        let flags = encode_plain(runs, stride, words, links);
        return (runs.len(), flags);
    }
    words.resize(DIRECT_SLOTS, 0);
    let mut sub: Vec<(u32, u64)> = Vec::with_capacity(DIRECT_SLOTS);
    // `r`: the run holding the high byte's first slot.
    let mut r = 0;
    for h in 0..DIRECT_SLOTS as u32 {
        let lo = h << 8;
        while runs.get(r + 1).is_some_and(|x| x.0 <= lo) {
            r += 1;
        }
        sub.clear();
        sub.push((0, runs[r].1));
        sub.extend(
            runs[r + 1..]
                .iter()
                .take_while(|x| x.0 < lo + 256)
                .map(|x| (x.0 - lo, x.1)),
        );
        let v = if let [(_, v)] = sub[..] {
            v
        } else {
            let at = words.len();
            let flags = encode_plain(&sub, 8, words, links);
            tag(at as u64 * 8, sub.len(), flags) | SUB
        };
        words[h as usize] = v;
        if v & LEAF == 0 {
            links.push(h as usize);
        }
    }
    (words.len() / 8, DIRECT | SPLIT)
}

/// Appends to `words` (a whole number of lines long) a direct node, or a keyed node of
/// at most [`FLAT`] runs, holding `runs`; notes the positions of its link values in
/// `links`; returns its link flags.
pub(super) fn encode_plain(
    runs: &[(u32, u64)],
    stride: u32,
    words: &mut Vec<u64>,
    links: &mut Vec<usize>,
) -> u64 {
    let at = words.len();
    let n = runs.len();
    let mut note = |words: &[u64], from: usize, count: usize| {
        links.extend((from..from + count).filter(|&i| words[i] & LEAF == 0));
    };
    if is_direct(n, stride) {
        words.resize(at + DIRECT_SLOTS, 0);
        for (i, r) in runs.iter().enumerate() {
            let end = runs.get(i + 1).map_or(DIRECT_SLOTS, |x| x.0 as usize);
            words[at + r.0 as usize..at + end].fill(r.1);
        }
        note(words, at, DIRECT_SLOTS);
        return DIRECT;
    }
    debug_assert!(n <= FLAT);
    words.resize(at + node_bytes(n) / 8, 0);
    // Keys are little-endian 16-bit lanes at even byte offsets, so a key never
    // straddles two words.
    let node = &mut words[at..];
    for i in 0..(n - 1).div_ceil(8) * 8 {
        let key = if i + 1 < n { stored_key(runs[i + 1].0) } else { PAD };
        node[i / 4] |= u64::from(key) << (16 * (i % 4));
    }
    let v = values_at(n) / 8;
    for (w, r) in node[v..v + n].iter_mut().zip(runs) {
        *w = r.1;
    }
    note(words, at + v, n);
    0
}

/// A link to a node of `n` runs at byte address `addr`, with flags `flags`.
pub(super) fn tag(addr: u64, n: usize, flags: u64) -> u64 {
    debug_assert!(addr & !PTR == 0, "node address not line-aligned or above 2^48");
    let two = if flags & DIRECT == 0 && node_bytes(n) > 64 {
        TWO_LINES
    } else {
        0
    };
    addr | (((n - 1) as u64) << RUNS_SHIFT) | flags | two
}

pub(super) fn layout(bytes: usize) -> Layout {
    match Layout::from_size_align(bytes, 64) {
        Ok(l) => l,
        Err(_) => panic!("node of {} bytes is too large", bytes),
    }
}

/// Copies a node's words into a new line-aligned heap block; returns its link.
/// (`links`: the positions of its link values, as [`encode`] gives them; its [`SUB`]
/// links get the block's address added.)
pub(super) fn place_heap(words: &[u64], links: &[usize], n: usize, flags: u64, bytes: &AtomicUsize) -> u64 {
    let l = layout(words.len() * 8);
    // SAFETY: the layout has a non-zero size (a node is at least one line).
    let p = unsafe { alloc(l) } as *mut u64;
    if p.is_null() {
        handle_alloc_error(l);
    }
    // SAFETY: `p` holds `words.len()` words, freshly allocated, not overlapping `words`.
    unsafe { std::ptr::copy_nonoverlapping(words.as_ptr(), p, words.len()) };
    for &i in links {
        if words[i] & SUB != 0 {
            // SAFETY: `i < words.len()`; the block is not shared yet.
            unsafe { *p.add(i) += p as u64 };
        }
    }
    bytes.fetch_add(l.size(), Ordering::Relaxed);
    tag(p as u64, n, flags)
}

/// Heap bytes of the node a link names.
pub(super) fn link_bytes(link: u64) -> usize {
    if link & SPLIT != 0 {
        ((link >> RUNS_SHIFT) as usize + 1) * 64
    } else if link & DIRECT != 0 {
        DIRECT_SLOTS * 8
    } else {
        node_bytes((link >> RUNS_SHIFT) as usize + 1)
    }
}

/// Frees a heap node.
///
/// # Safety
/// `link` names a node made by [`place_heap`], unreachable by readers (unlinked, past
/// its grace period, or never shared), freed once.
pub(super) unsafe fn free_node(link: u64) {
    dealloc((link & PTR) as *mut u8, layout(link_bytes(link)));
}

/// The runs of a node's slots, leaf-pushed, into `runs` (cleared first): `cover`
/// everywhere, painted over by `own` (routes ending in the node's stride, sorted by
/// address then length), with each kid slot (`kids`, ascending) holding its child's
/// link. `stack` is scratch space.
///
/// Within a node a route's address is its base plus its slot, so `own` is sorted by
/// (slot, length) too; merging it with the kids (a kid after every route starting at
/// its slot) visits every interval after each interval containing it, with no sort.
pub(super) fn runs_of(
    depth: u32,
    stride: u32,
    cover: u32,
    own: impl Iterator<Item = (u32, u32, u32)>,
    kids: impl Iterator<Item = (u32, u64)>,
    runs: &mut Vec<(u32, u64)>,
    stack: &mut Vec<(u32, u64)>,
) {
    runs.clear();
    stack.clear();
    let push = |runs: &mut Vec<(u32, u64)>, start: u32, v: u64| {
        if runs.last().map(|r| r.1) != Some(v) {
            runs.push((start, v));
        }
    };
    let end = 1u32 << stride;
    stack.push((end, leaf(cover)));
    let mut cur = 0;
    let mut own = own.map(|(s, l, nh)| (s, s + (1 << (depth + stride - l)), leaf(nh)));
    let mut kids = kids.map(|(s, link)| (s, s + 1, link));
    let (mut next_own, mut next_kid) = (own.next(), kids.next());
    loop {
        let (s, e, v) = match (next_own, next_kid) {
            (Some(o), Some(k)) if o.0 <= k.0 => {
                next_own = own.next();
                o
            }
            (_, Some(k)) => {
                next_kid = kids.next();
                k
            }
            (Some(o), None) => {
                next_own = own.next();
                o
            }
            (None, None) => break,
        };
        while let Some(&(top_end, top_v)) = stack.last() {
            if top_end > s {
                break;
            }
            if cur < top_end {
                push(runs, cur, top_v);
                cur = top_end;
            }
            stack.pop();
        }
        let top_v = stack.last().map_or(leaf(cover), |t| t.1);
        if cur < s {
            push(runs, cur, top_v);
            cur = s;
        }
        stack.push((e, v));
    }
    while let Some((top_end, top_v)) = stack.pop() {
        if cur < top_end {
            push(runs, cur, top_v);
            cur = top_end;
        }
    }
}
