//! Router-wide counters that workers update without sharing cache lines.

use std::sync::atomic::{AtomicU64, Ordering};

#[repr(align(128))]
#[derive(Default)]
struct Slot(AtomicU64);

/// One counter slot per worker, each on its own cache line (128 bytes: adjacent-line
/// prefetch pairs lines), so workers adding into their own slot never contend. Readers
/// sum the slots.
pub struct WorkerCounters {
    slots: Box<[Slot]>,
}

impl WorkerCounters {
    pub fn new(workers: usize) -> WorkerCounters {
        WorkerCounters {
            slots: (0..workers.max(1)).map(|_| Slot::default()).collect(),
        }
    }

    /// Worker `w`'s slot (workers beyond the count share slots).
    #[inline]
    fn slot(&self, w: usize) -> &AtomicU64 {
        // A compare instead of a division per update for the usual in-range index.
        match self.slots.get(w) {
            Some(s) => &s.0,
            None => &self.slots[w % self.slots.len()].0,
        }
    }

    /// Adds `n` to worker `w`'s slot (one writer per slot: a plain load and store).
    #[inline]
    pub fn add(&self, w: usize, n: u64) {
        let s = self.slot(w);
        s.store(s.load(Ordering::Relaxed).wrapping_add(n), Ordering::Relaxed);
    }

    /// Adds `n` to slot `w` with an atomic read-modify-write, for slots that more than
    /// one thread may update.
    #[inline]
    pub fn add_shared(&self, w: usize, n: u64) {
        self.slot(w).fetch_add(n, Ordering::Relaxed);
    }

    pub fn sum(&self) -> u64 {
        self.slots
            .iter()
            .map(|s| s.0.load(Ordering::Relaxed))
            .fold(0, u64::wrapping_add)
    }

    pub fn reset(&self) {
        self.slots.iter().for_each(|s| s.0.store(0, Ordering::Relaxed));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_sum_and_reset() {
        let c = WorkerCounters::new(3);
        c.add(0, 5);
        c.add(2, 7);
        c.add_shared(1, 1);
        assert_eq!(c.sum(), 13);
        // Worker 4 of 3 slots shares slot 1.
        c.add(4, 100);
        assert_eq!(c.slots[1].0.load(Ordering::Relaxed), 101);
        assert_eq!(c.sum(), 113);
        c.reset();
        assert_eq!(c.sum(), 0);
        assert_eq!(std::mem::size_of::<Slot>(), 128);
    }
}
