//! The free route slots of the lookup elements' tables (`iplookup.rs`,
//! `ip6/lookupip6route.rs`). A route keeps its slot while it lives, and the `table`
//! handler lists routes in slot order, so which free slot a new route takes shows:
//! Click's RadixIPLookup reuses the newest freed slot, its other tables the lowest.

use std::collections::BTreeSet;

pub(crate) enum FreeSlots {
    NewestFirst(Vec<usize>),
    /// Ordered, so that the lowest is found without a scan of the slots (a scan per
    /// route made loading a large table quadratic).
    LowestFirst(BTreeSet<usize>),
}

impl FreeSlots {
    /// Takes the value out of slot `i` and frees the slot (a slot already empty stays
    /// as it was).
    pub(crate) fn vacate<T>(&mut self, slots: &mut [Option<T>], i: usize) -> Option<T> {
        let v = slots[i].take()?;
        match self {
            FreeSlots::NewestFirst(f) => f.push(i),
            FreeSlots::LowestFirst(f) => {
                f.insert(i);
            }
        }
        Some(v)
    }

    pub(crate) fn clear(&mut self) {
        match self {
            FreeSlots::NewestFirst(v) => v.clear(),
            FreeSlots::LowestFirst(s) => s.clear(),
        }
    }

    /// Puts `v` into the free slot to reuse, or a new one after the others; returns
    /// its index.
    pub(crate) fn place<T>(&mut self, slots: &mut Vec<Option<T>>, v: T) -> usize {
        let reuse = match self {
            FreeSlots::NewestFirst(f) => f.pop(),
            FreeSlots::LowestFirst(f) => f.pop_first(),
        };
        match reuse {
            Some(i) => {
                slots[i] = Some(v);
                i
            }
            None => {
                slots.push(Some(v));
                slots.len() - 1
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_reused_in_each_order() {
        for (mut free, order, table) in [
            (FreeSlots::NewestFirst(Vec::new()), [3, 1, 4], [0, 11, 2, 10, 12]),
            (
                FreeSlots::LowestFirst(BTreeSet::new()),
                [1, 3, 4],
                [0, 10, 2, 11, 12],
            ),
        ] {
            let mut slots: Vec<Option<u8>> = Vec::new();
            for v in 0..4 {
                assert_eq!(free.place(&mut slots, v), usize::from(v));
            }
            // Slots 1 and 3 freed, in that order.
            for i in [1, 3] {
                assert_eq!(free.vacate(&mut slots, i), Some(i as u8));
            }
            // An empty slot is not freed twice.
            assert_eq!(free.vacate(&mut slots, 3), None);
            let placed: Vec<usize> = (10..13).map(|v| free.place(&mut slots, v)).collect();
            assert_eq!(placed, order);
            assert_eq!(slots, table.map(Some));
            // After a clear nothing is reused.
            free.vacate(&mut slots, 0);
            free.clear();
            assert_eq!(free.place(&mut slots, 20), 5);
        }
    }
}
