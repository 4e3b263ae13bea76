//! Equal-cost multipath for the route-lookup elements (`iplookup.rs`,
//! `ip6/lookupip6route.rs`): a route whose next hop is a *group* of (gateway, output)
//! members, of which each packet takes one chosen by a hash of its source and
//! destination addresses, so that the packets of a flow keep one path (and their order)
//! while flows spread over the members, as the Linux kernel spreads a multipath route's
//! flows by its default (layer-3) hash policy.
//!
//! A member may have a weight (`weight N` after it, 1-256, as `ip route`'s nexthop
//! `weight`): its share of the flows is its weight over the sum. Routes hold their
//! members as (member, weight) pairs, a plain route as one member of weight 1.
//!
//! A group has a next-hop index of its own, like a (gateway, output) pair
//! (`hopindex.rs`); workers find its members in [`Groups`] under that index.

use std::sync::atomic::{AtomicPtr, Ordering};

/// Members a group may have.
pub const MAX_MEMBERS: usize = 256;

/// The largest weight of a member (the kernel's too).
pub const MAX_WEIGHT: u16 = 256;

/// A member and its weight.
pub(crate) type Weighted<M> = (M, u16);

/// Why a route's text is refused.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum RouteError {
    /// Not a route at all: the caller says what one looks like.
    Syntax,
    /// A route whose members are wrong, and how.
    Members(String),
}

/// Reads a route's members from `words` (the words after its prefix): each member's
/// words, which `member` reads from the member's first word on (`first`: no member
/// came before; `Ok(None)`: the route ends there), each optionally followed by
/// `weight N` (1-256); then [`checked`].
pub(crate) fn read_members<'a, T: PartialEq, I: Iterator<Item = &'a str>>(
    words: &mut I,
    mut member: impl FnMut(&'a str, &mut I, bool) -> Result<Option<T>, RouteError>,
) -> Result<Vec<Weighted<T>>, RouteError> {
    let mut members: Vec<Weighted<T>> = Vec::new();
    // Whether the last member has its weight already.
    let mut weighted = false;
    while let Some(w) = words.next() {
        if w == "weight" {
            let n = words
                .next()
                .and_then(|n| n.parse::<u16>().ok())
                .filter(|n| (1..=MAX_WEIGHT).contains(n))
                .ok_or(RouteError::Syntax)?;
            match members.last_mut() {
                Some(last) if !weighted => last.1 = n,
                _ => return Err(RouteError::Syntax),
            }
            weighted = true;
            continue;
        }
        match member(w, words, members.is_empty())? {
            Some(m) => members.push((m, 1)),
            None => break,
        }
        weighted = false;
    }
    checked(members)
}

/// A route's members as it holds them, from those its text gave: refused with more
/// than [`MAX_MEMBERS`], or one given twice; one member (whatever its weight) is a plain
/// route, of weight 1.
fn checked<T: PartialEq>(mut members: Vec<Weighted<T>>) -> Result<Vec<Weighted<T>>, RouteError> {
    if members.len() > MAX_MEMBERS {
        return Err(RouteError::Members(format!(
            "a multipath route has at most {} members",
            MAX_MEMBERS
        )));
    }
    if members
        .iter()
        .enumerate()
        .any(|(i, m)| members[..i].iter().any(|o| o.0 == m.0))
    {
        return Err(RouteError::Members(
            "a multipath route's members must differ (one is given twice)".to_string(),
        ));
    }
    if let [(_, w)] = &mut members[..] {
        *w = 1;
    }
    Ok(members)
}

/// A route's members as the tables write them: each member's words, then `weight N`
/// after one of weight above 1, all joined by `sep`.
pub(crate) fn members_text<T: Copy>(
    members: &[Weighted<T>],
    sep: &str,
    member: impl Fn(T) -> String,
) -> String {
    let words: Vec<String> = members
        .iter()
        .map(|&(m, n)| match n {
            1 => member(m),
            _ => format!("{}{sep}weight{sep}{n}", member(m)),
        })
        .collect();
    words.join(sep)
}

/// The `lookup` handler's answer for a route's members: a line each, `PORT`, or `PORT
/// GATEWAY` for a member with a gateway (not `G::default()`), and ` weight N` after a
/// member of weight above 1.
pub(crate) fn lookup_lines<G: Copy + PartialEq + Default, P: std::fmt::Display + Copy>(
    members: &[Weighted<(G, P)>],
    gateway: impl Fn(G) -> String,
) -> String {
    let lines: Vec<String> = members
        .iter()
        .map(|&((gw, port), n)| {
            let hop = if gw == G::default() {
                port.to_string()
            } else {
                format!("{} {}", port, gateway(gw))
            };
            match n {
                1 => hop,
                _ => format!("{hop} weight {n}"),
            }
        })
        .collect();
    lines.join("\n")
}

/// A flow's hash from its IPv4 source and destination addresses (murmur3's 64-bit
/// finaliser over both: every input bit moves the high bits that [`pick`] uses).
#[inline]
pub(crate) fn flow_hash4(src: u32, dst: u32) -> u32 {
    fmix64((u64::from(src) << 32) | u64::from(dst))
}

/// A flow's hash from its IPv6 source and destination addresses.
#[inline]
pub(crate) fn flow_hash6(src: u128, dst: u128) -> u32 {
    let s = fmix64((src >> 64) as u64 ^ (src as u64).rotate_left(29));
    fmix64(u64::from(s) ^ ((dst >> 64) as u64).rotate_left(17) ^ dst as u64)
}

/// murmur3's 64-bit finaliser, high half: every input bit moves every output bit.
pub fn fmix64(mut x: u64) -> u32 {
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    x ^= x >> 33;
    (x >> 32) as u32
}

/// The member of a group of `n` a flow of hash `hash` takes: `hash * n / 2^32`, so
/// each member gets an equal share of hashes and no division is needed.
#[inline]
pub(crate) fn pick(hash: u32, n: usize) -> usize {
    ((u64::from(hash) * n as u64) >> 32) as usize
}

/// A group's members as workers read them: the members, and for unequal weights the
/// running sums of their weights, so that a flow's hash picks member `i` for the hashes
/// below `bounds[i]` (the kernel's hash-threshold choice) with a search over at most
/// [`MAX_MEMBERS`] sums rather than a copy per unit of weight.
pub(crate) struct Group<M> {
    members: Vec<Weighted<M>>,
    /// Empty when every weight is equal.
    bounds: Vec<u32>,
}

impl<M: Copy> Group<M> {
    pub(crate) fn new(members: Vec<Weighted<M>>) -> Group<M> {
        let equal = members.iter().all(|m| m.1 == members[0].1);
        let bounds = if equal {
            Vec::new()
        } else {
            members
                .iter()
                .scan(0u32, |sum, m| {
                    *sum += u32::from(m.1);
                    Some(*sum)
                })
                .collect()
        };
        Group { members, bounds }
    }

    /// The members with their weights.
    pub(crate) fn members(&self) -> &[Weighted<M>] {
        &self.members
    }

    /// The member a flow of hash `hash` takes.
    #[inline]
    pub(crate) fn pick(&self, hash: u32) -> M {
        match self.bounds.last() {
            None => self.members[pick(hash, self.members.len())].0,
            Some(&total) => {
                let x = pick(hash, total as usize) as u32;
                self.members[self.bounds.partition_point(|&b| b <= x)].0
            }
        }
    }
}

/// The members of each group, by next-hop index, read by workers without locks.
///
/// A group's members are written before any route names its index (the table's
/// `Release` store publishes both), and never change while the index is the group's: a
/// changed group is another group, with another index. An index is given to another
/// group only after every worker that may have read it has finished its batch
/// (`hopindex.rs`), so the members [`Groups::set`] replaces are no longer read, and it
/// frees them.
pub(crate) struct Groups<M> {
    slots: Box<[AtomicPtr<Group<M>>]>,
}

impl<M> Groups<M> {
    /// Room for indices `0..n` (pages are touched only where groups are stored).
    pub(crate) fn new(n: usize) -> Groups<M> {
        Groups {
            slots: (0..n).map(|_| AtomicPtr::new(std::ptr::null_mut())).collect(),
        }
    }

    /// Stores the members of the group that index `h` now names (`None`: the index
    /// names a single pair now), freeing those of the group it named before.
    ///
    /// The caller has the index fresh from `HopIndex::acquire`: no worker can still be
    /// reading the members it replaces.
    pub(crate) fn set(&self, h: u32, group: Option<Group<M>>) {
        let new = group.map_or(std::ptr::null_mut(), |g| Box::into_raw(Box::new(g)));
        let old = self.slots[h as usize].swap(new, Ordering::Release);
        if !old.is_null() {
            // SAFETY: `old` came from `Box::into_raw` in this function and was taken out
            // of the slot by the swap; the index's grace period has passed (above), so no
            // reference from `get` outlives this point.
            drop(unsafe { Box::from_raw(old) });
        }
    }

    /// The group index `h` names.
    ///
    /// The caller holds an `lpm` pin taken before it read `h` from the table (or the
    /// element's control mutex), and `h`'s pair said it names a group; the reference is
    /// used only while that pin is held.
    pub(crate) fn get(&self, h: u32) -> Option<&Group<M>> {
        let p = self.slots.get(h as usize)?.load(Ordering::Acquire);
        // SAFETY: non-null slots hold a `Box` from `set`, which frees it only when the
        // index is reused, after the grace period of every pin held while `h` was read.
        (!p.is_null()).then(|| unsafe { &*p })
    }
}

impl<M> Drop for Groups<M> {
    fn drop(&mut self) {
        for s in self.slots.iter() {
            let p = s.swap(std::ptr::null_mut(), Ordering::Acquire);
            if !p.is_null() {
                // SAFETY: as in `set`; with `&mut self` no reader is left.
                drop(unsafe { Box::from_raw(p) });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn members_share_the_hashes_equally_and_a_flow_keeps_its_member() {
        let n = 3;
        let mut counts = [0u32; 3];
        for i in 0..30_000u32 {
            let src = 0x0a00_0000 | i;
            let k = pick(flow_hash4(src, 0xc0a8_0101), n);
            counts[k] += 1;
            assert_eq!(k, pick(flow_hash4(src, 0xc0a8_0101), n));
        }
        for c in counts {
            assert!((9_000..11_000).contains(&c), "{:?}", counts);
        }
        let mut counts = [0u32; 2];
        for i in 0..20_000u128 {
            counts[pick(flow_hash6(0x2001_0db8 << 96 | i << 64, 0x2001_0db8 << 96 | 1), 2)] += 1;
        }
        assert!(
            counts.iter().all(|&c| (9_000..11_000).contains(&c)),
            "{:?}",
            counts
        );
        // The last member is reachable, and nothing beyond it.
        assert_eq!(pick(u32::MAX, 4), 3);
        assert_eq!(pick(0, 4), 0);
    }

    #[test]
    fn a_slot_holds_its_group_until_replaced() {
        let g = Groups::<(u32, i32)>::new(4);
        assert!(g.get(2).is_none());
        g.set(2, Some(Group::new(vec![((1, 0), 1), ((2, 1), 1)])));
        assert_eq!(
            g.get(2).map(Group::members),
            Some(&[((1, 0), 1), ((2, 1), 1)][..])
        );
        g.set(2, Some(Group::new(vec![((3, 1), 1)])));
        assert_eq!(g.get(2).map(Group::members), Some(&[((3, 1), 1)][..]));
        g.set(2, None);
        assert!(g.get(2).is_none());
        assert!(g.get(9).is_none());
    }

    #[test]
    fn weights_give_shares_by_the_running_sums() {
        // Weights 1, 3, 256: hashes spread evenly over 260 units of weight.
        let g = Group::new(vec![(0u8, 1), (1, 3), (2, 256)]);
        let mut counts = [0u32; 3];
        for i in 0..260_000u32 {
            counts[usize::from(g.pick(i.wrapping_mul(16_519)))] += 1;
        }
        assert!((700..1_300).contains(&counts[0]), "{counts:?}");
        assert!((2_400..3_600).contains(&counts[1]), "{counts:?}");
        assert!((252_000..258_000).contains(&counts[2]), "{counts:?}");
        // The edges: hash 0 takes the first member, the largest the last.
        assert_eq!(g.pick(0), 0);
        assert_eq!(g.pick(u32::MAX), 2);
        // Equal weights need no sums.
        let g = Group::new(vec![(0u8, 5), (1, 5)]);
        assert!(g.bounds.is_empty());
        assert_eq!((g.pick(0), g.pick(u32::MAX)), (0, 1));
    }
}
