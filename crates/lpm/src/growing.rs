//! The IPv4 table as [`crate::Ipv4Lpm`] holds it: a [`Dir16`] behind one atomic
//! pointer, rebuilt at a wider value width when updates bring it more next hops than its
//! width indexes.
//!
//! A [`Dir16`]'s value width is fixed when it is made (so the batch path picks its loop
//! once per call): 8-bit dictionary indices in a table built with at most 254 next hops
//! or made empty, 16-bit ones up to 65,533, else the 32-bit next hops themselves. A next
//! hop that arrives by an update without an index that fits is still answered right, but
//! through chunks with wider values behind a front, which send their keys down the slow
//! path. So when an insert leaves such a hop ([`Dir16::outgrown`]), the writer builds
//! the whole table again from its routes with the next width up and publishes it with
//! one `Release` store of the pointer. That insert takes as long as a bulk build of the
//! table (about 0.1 s for 1M routes), once per width: 8 to 16 bits, 16 to 32. Tables
//! never narrow again.
//!
//! Readers load the pointer once per call under their epoch pin; the replaced table is
//! dropped through the epoch collector once every reader pinned before the swap has
//! unpinned or repinned. Both tables hold the inserted route (the old one through its
//! fronted chunks), so every address flips from its old answer to its new one exactly
//! once, as for any other update.

use crate::dir16::{Dir16, Dir16View};
use crate::key::Key;
use crossbeam_epoch::{self as epoch, Atomic, Guard, Owned};
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Mutex, MutexGuard};

/// Whether `changes` changes to a table of `routes` routes are applied as a bulk build:
/// at least 1,024 of them and a sixteenth of the table. A build of 1M routes takes
/// about 0.1 s (0.1 us a route), an update a few microseconds, so a build pays for
/// itself from about a thirtieth of the table; a sixteenth leaves a margin for the
/// copy of the routes it makes.
fn bulk(changes: usize, routes: usize) -> bool {
    changes >= 1024 && changes * 16 >= routes
}

pub struct GrowingDir16 {
    table: Atomic<Dir16>,
    /// Serialises the writers, so a table is never changed while it is being replaced
    /// (readers never take it).
    writer: Mutex<()>,
}

impl Drop for GrowingDir16 {
    fn drop(&mut self) {
        // SAFETY: `&mut self`: no reader or writer holds the table any more, so it can be
        // taken without a pin and dropped now.
        drop(unsafe {
            self.table
                .load(Ordering::Relaxed, epoch::unprotected())
                .into_owned()
        });
    }
}

impl GrowingDir16 {
    pub fn new() -> Self {
        Self::from_table(Dir16::new())
    }

    pub fn build(routes: &[(u32, u8, u32)]) -> Self {
        Self::from_table(Dir16::build(routes))
    }

    fn from_table(t: Dir16) -> Self {
        GrowingDir16 {
            table: Atomic::new(t),
            writer: Mutex::new(()),
        }
    }

    /// The current table, borrowed for as long as both `self` and `guard` (dropping `self`
    /// drops the current table at once, so the borrow of `self` is what keeps it).
    #[inline(always)]
    fn current<'g>(&'g self, guard: &'g Guard) -> &'g Dir16 {
        // SAFETY: the pointer is never null; the current table is dropped only with `self`,
        // borrowed for 'g, and a replaced one only through `defer_destroy`, after every
        // thread pinned before the swap (the caller's pin, held for 'g, included) has
        // unpinned or repinned.
        unsafe { self.table.load(Ordering::Acquire, guard).deref() }
    }

    fn lock(&self) -> MutexGuard<'_, ()> {
        // (The guarded state is the table itself, complete after every store.)
        self.writer.lock().unwrap_or_else(|p| p.into_inner())
    }

    #[inline]
    pub fn lookup(&self, key: u32) -> u32 {
        self.lookup_in(&epoch::pin(), key)
    }

    #[inline]
    pub fn lookup_in(&self, guard: &Guard, key: u32) -> u32 {
        self.current(guard).lookup_in(guard, key)
    }

    pub fn lookup_batch(&self, keys: &[u32], out: &mut [u32]) {
        self.lookup_batch_in(&epoch::pin(), keys, out)
    }

    #[inline]
    pub fn lookup_batch_in(&self, guard: &Guard, keys: &[u32], out: &mut [u32]) {
        self.current(guard).lookup_batch_in(guard, keys, out)
    }

    /// The current table with its first level loaded (see `lpm::Ipv4View`).
    #[inline]
    pub fn view<'g>(&'g self, guard: &'g Guard) -> Dir16View<'g> {
        self.current(guard).view(guard)
    }

    pub fn insert(&self, key: u32, len: u8, nh: u32) -> Option<u32> {
        let _writer = self.lock();
        let guard = epoch::pin();
        let t = self.current(&guard);
        let prev = t.insert(key, len, nh);
        self.grow_if_outgrown(&guard, t);
        prev
    }

    /// Builds `t`, the current table, again at the next width up if a change left it a
    /// next hop whose index does not fit its values, and publishes that in its place.
    fn grow_if_outgrown(&self, guard: &Guard, t: &Dir16) {
        if t.outgrown() {
            self.replace(guard, Dir16::build_at_least(&t.routes(), t.value_log2() + 1));
        }
    }

    /// Publishes `new` in place of the current table with one store.
    fn replace(&self, guard: &Guard, new: Dir16) {
        let old = self.table.swap(Owned::new(new), Ordering::AcqRel, guard);
        // SAFETY: `old` was unlinked by the swap just above, so only readers pinned
        // before it can hold it, and the collector drops it after they all unpinned or
        // repinned; it is retired once (writers are serialised).
        unsafe { guard.defer_destroy(old) };
    }

    /// Applies `changes` in order (`Some`: install, `None`: remove). Many against the
    /// table's size ([`bulk`]) are built into a new table with the routes it holds and
    /// published with one store; fewer go into the current table together
    /// ([`Dir16::apply_all`]), which is then built again wider if they outgrew it.
    pub fn apply(&self, changes: &[(u32, u8, Option<u32>)]) {
        let _writer = self.lock();
        let guard = epoch::pin();
        let t = self.current(&guard);
        if !bulk(changes.len(), t.len()) {
            t.apply_all(changes);
            self.grow_if_outgrown(&guard, t);
            return;
        }
        // Each prefix's last change decides.
        let last: HashMap<(u32, u8), Option<u32>> = changes
            .iter()
            .map(|&(key, len, nh)| ((key.masked(len), len), nh))
            .collect();
        let mut routes: Vec<(u32, u8, u32)> = t
            .routes()
            .into_iter()
            .filter(|r| !last.contains_key(&(r.0, r.1)))
            .collect();
        routes.extend(
            last.into_iter()
                .filter_map(|((key, len), nh)| Some((key, len, nh?))),
        );
        // At least the current width: tables never narrow (see the module docs).
        self.replace(&guard, Dir16::build_at_least(&routes, t.value_log2()));
    }

    pub fn remove(&self, key: u32, len: u8) -> Option<u32> {
        let _writer = self.lock();
        self.current(&epoch::pin()).remove(key, len)
    }

    pub fn clear(&self) {
        let _writer = self.lock();
        self.current(&epoch::pin()).clear()
    }

    pub fn get(&self, key: u32, len: u8) -> Option<u32> {
        self.current(&epoch::pin()).get(key, len)
    }

    pub fn routes(&self) -> Vec<(u32, u8, u32)> {
        self.current(&epoch::pin()).routes()
    }

    pub fn len(&self) -> usize {
        self.current(&epoch::pin()).len()
    }

    pub fn lookup_bytes(&self) -> usize {
        self.current(&epoch::pin()).lookup_bytes()
    }

    pub fn control_bytes(&self) -> usize {
        self.current(&epoch::pin()).control_bytes()
    }

    /// log2 of the bytes of the current table's narrow values.
    #[cfg(test)]
    pub(crate) fn value_log2(&self) -> u32 {
        self.current(&epoch::pin()).value_log2()
    }

    /// How many first-level entries link a chunk behind a front.
    #[cfg(test)]
    pub(crate) fn fronted_chunks(&self) -> usize {
        self.current(&epoch::pin()).fronted_chunks()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::NONE;
    use std::sync::atomic::{AtomicBool, AtomicU64};
    use std::sync::Arc;

    /// The i-th /24 of 40.0.0.0/14, its own next hop 1,000 + i.
    fn slash24(i: u32) -> (u32, u8, u32) {
        (0x2800_0000 + (i << 8), 24, 1_000 + i)
    }

    fn assert_answers(t: &GrowingDir16, probes: &[(u32, u32)]) {
        let keys: Vec<u32> = probes.iter().map(|p| p.0).collect();
        let mut out = vec![0; keys.len()];
        t.lookup_batch(&keys, &mut out);
        for (&(k, want), &got) in probes.iter().zip(&out) {
            assert_eq!(got, want, "batch lookup {:08x}", k);
            assert_eq!(t.lookup(k), want, "lookup {:08x}", k);
        }
    }

    #[test]
    fn an_empty_table_takes_16_bit_values_when_updates_bring_a_255th_next_hop() {
        let t = GrowingDir16::new();
        t.insert(0x0a00_0000, 8, 7);
        t.insert(0x2800_0142, 32, 8);
        t.insert(0, 0, 8);
        // 252 more hops: 254 in all, the most byte values index.
        for i in 0..252 {
            let (a, l, nh) = slash24(i);
            t.insert(a, l, nh);
        }
        assert_eq!((t.value_log2(), t.fronted_chunks()), (0, 0));
        let (a, l, nh) = slash24(252);
        assert_eq!(t.insert(a, l, nh), None);
        assert_eq!((t.value_log2(), t.fronted_chunks()), (1, 0));
        // Later hops take 16-bit indices in the new table.
        for i in 253..300 {
            let (a, l, nh) = slash24(i);
            t.insert(a, l, nh);
        }
        assert_eq!((t.value_log2(), t.fronted_chunks(), t.len()), (1, 0, 303));
        let mut probes: Vec<(u32, u32)> = (0..300).map(|i| (slash24(i).0 | 0x37, slash24(i).2)).collect();
        probes.extend([
            (0x2800_0142, 8),
            (0x2800_0143, 1_001),
            (0x0a01_0203, 7),
            (0x2801_2d00, 8),
        ]);
        assert_answers(&t, &probes);
        // Removals go to the new table; it keeps its width.
        assert_eq!(t.remove(0x2800_0142, 32), Some(8));
        assert_eq!(t.remove(slash24(299).0, 24), Some(1_299));
        assert_eq!((t.lookup(0x2800_0142), t.lookup(slash24(299).0)), (1_001, 8));
        assert_eq!(t.remove(0, 0), Some(8));
        assert_eq!(t.lookup(slash24(299).0), NONE);
        assert_eq!((t.value_log2(), t.len()), (1, 300));
    }

    #[test]
    fn a_16_bit_table_takes_32_bit_next_hops_when_its_indices_run_out() {
        // Built with 255 hops: 16-bit indices, 65,533 of them (1..=65,534 but 255).
        let built: Vec<(u32, u8, u32)> = (0..255).map(slash24).collect();
        let t = GrowingDir16::build(&built);
        assert_eq!(t.value_log2(), 1);
        // Under 60.0.0.0/8, each /24 its own hop: 65,278 more fill the indices.
        let more = |i: u32| (0x3c00_0000 + (i << 8), 24u8, 100_000 + i);
        for i in 0..65_278 {
            let (a, l, nh) = more(i);
            t.insert(a, l, nh);
        }
        assert_eq!((t.value_log2(), t.fronted_chunks()), (1, 0));
        let (a, l, nh) = more(65_278);
        t.insert(a, l, nh);
        assert_eq!((t.value_log2(), t.fronted_chunks(), t.len()), (2, 0, 65_534));
        let mut probes: Vec<(u32, u32)> = (0..=65_278).map(|i| (more(i).0 | 0xfe, more(i).2)).collect();
        probes.extend((0..255).map(|i| (slash24(i).0, slash24(i).2)));
        probes.push((more(65_279).0, NONE));
        assert_answers(&t, &probes);
    }

    #[test]
    fn readers_see_every_answer_right_while_the_table_is_replaced() {
        let t = Arc::new(GrowingDir16::new());
        t.insert(0, 0, 9);
        t.insert(0x0a00_0000, 8, 1);
        t.insert(0x0a01_0280, 25, 3);
        t.insert(0x0a01_0307, 32, 4);
        let probes: Arc<Vec<(u32, u32)>> = Arc::new(vec![
            (0x0a01_02c8, 3),
            (0x0a01_0307, 4),
            (0x0a01_0306, 1),
            (0x0b00_0001, 9),
        ]);
        let done = Arc::new(AtomicBool::new(false));
        let rounds_done = Arc::new(AtomicU64::new(0));
        // Reader 0 pins per call; reader 1 holds its pin across many rounds (and across
        // the swap), repinning now and then.
        let readers: Vec<_> = (0..2)
            .map(|reader| {
                let (t, probes, done) = (t.clone(), probes.clone(), done.clone());
                let rounds_done = rounds_done.clone();
                std::thread::spawn(move || {
                    let keys: Vec<u32> = probes.iter().map(|p| p.0).collect();
                    let mut out = vec![0; keys.len()];
                    let mut guard = epoch::pin();
                    let mut rounds = 0u64;
                    while !done.load(Ordering::Acquire) || rounds < 100 {
                        if reader == 0 {
                            t.lookup_batch(&keys, &mut out);
                        } else {
                            t.lookup_batch_in(&guard, &keys, &mut out);
                        }
                        for (&(k, want), &got) in probes.iter().zip(&out) {
                            assert_eq!(got, want, "batch lookup {:08x}", k);
                            assert_eq!(t.lookup_in(&guard, k), want, "lookup {:08x}", k);
                        }
                        rounds += 1;
                        rounds_done.fetch_add(1, Ordering::Relaxed);
                        if rounds.is_multiple_of(64) {
                            guard.repin();
                        }
                    }
                    rounds
                })
            })
            .collect();
        // Once both readers run: each new /24 its own hop, so the 255th hop replaces the
        // table; then churn in the new one while the readers go on.
        while rounds_done.load(Ordering::Relaxed) < 200 {
            std::thread::yield_now();
        }
        for i in 0..400 {
            let (a, l, nh) = slash24(i);
            t.insert(a, l, nh);
        }
        for i in 0..2_000 {
            let (a, _, nh) = slash24(i % 400);
            t.insert(a | 0x80, 25, nh + 1);
            t.remove(a | 0x80, 25);
        }
        done.store(true, Ordering::Release);
        for r in readers {
            assert!(r.join().expect("reader panicked") >= 100);
        }
        assert_eq!(t.value_log2(), 1);
        assert_eq!(t.lookup(slash24(399).0), 1_399);
    }
}
