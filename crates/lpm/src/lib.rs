//! Longest-prefix match for IPv4 ([`Ipv4Lpm`]) and IPv6 ([`Ipv6Lpm`]).
//!
//! # Structure
//!
//! (See `docs/LPM.md` for the measurements behind both.)
//!
//! **IPv4** (`dir16/`): a directly indexed first level of `2^16` links (one per /16,
//! 512 KiB, an L2 or L3 hit), each to a *chunk*: the 256 /24 slots of
//! that /16, leaf-pushed (each slot holds the next hop of the longest prefix of at most
//! 24 bits covering it) and stored as runs of equal values: a 256-bit bitmap marks where
//! runs end, four rank bytes give the runs after each bitmap word, and one index per
//! run (8-bit in tables of at most 254 next hops, else 16-bit; the last run first)
//! points into a next-hop dictionary. A lookup is one first-level load, one POPCNT
//! over the chunk's header, one value load and, for an index, one dictionary load; in a
//! batch, no branch depends on the data but a rare test for a kid's mark. A /24 with
//! longer prefixes under it gets a *kid* (its 256 /32 slots in the same format), flagged
//! in the link; /16s without longer prefixes link a shared one-run chunk per value. A
//! 1M-prefix BGP table takes 4.75 MiB.
//!
//! **IPv6** (`runs6/`): a first level of `2^16` 64-bit entries (one per /16) over a
//! leaf-pushed multibit trie whose node levels start at bits 16, 24, 32, 48, 64, 80, 96
//! and 112 (strides 8, 8, then 16, so a /48 query reads the first level, two small
//! nodes that stay cached and one node for bits 32..48). A node stores its slots as runs
//! of equal values: the sorted slots where runs start (16-bit keys in one 64-byte line,
//! for up to 33 runs, compared sixteen at a time with AVX2 or eight with SSE2) and one
//! 64-bit value per run, either a next hop or a link to the child node of one slot.
//! Stride-8 nodes of more than 33 runs store one value per slot instead; stride-16 ones
//! are *split*: one value per high byte of the slot, linking a stride-8 sub-node where
//! that byte's 256 slots hold more than one run. Keys are full `u128`, so prefixes
//! longer than /64 and host routes take the same path.
//!
//! The default route (`/0`) has a slot of its own in both.
//!
//! # Updates and concurrency
//!
//! Tables are shared as `Arc<Ipv4Lpm>` / `Arc<Ipv6Lpm>`. Any number of readers look up
//! without locks while one writer at a time (serialised by an internal `Mutex` that
//! readers never touch) changes routes.
//!
//! IPv4: the writer keeps each /16's longer routes in a sorted list; a change to a
//! prefix longer than /16 rebuilds that /16's chunk from the list and publishes it with
//! **one** `Release` store into the first level. A change to a prefix of at most 16 bits
//! rebuilds the chunk of each /16 it is the longest cover of: one such /16 gets it with
//! one store, more get theirs in a copy of the first level that one store publishes. The
//! default route is entry 0 of the next-hop dictionary, which belongs to the first level:
//! a change of it publishes a copy of both, so that a reader takes its chunks and its
//! default from one first level and never mixes a chunk from before one change with a
//! default from after a later one. A next hop gets a dictionary index when its first route arrives (the dictionary entry
//! is stored before any chunk using it is published); past the indices a table holds
//! (254 in one built with at most 254 next hops or made empty, else 65,533), chunks
//! holding a next hop without an index store wider values instead, behind a front that
//! sends their keys down a slower path. A table built with more than 65,533 next hops
//! stores the next hops themselves. The table sits behind one atomic pointer: an insert
//! that leaves a live next hop without an index of the table's width builds the whole
//! table again from its routes at the next width up (as long as a bulk build, at most
//! twice in a table's life) and publishes it with one store, so such chunks last only
//! for that insert.
//!
//! IPv6: the writer keeps per node the routes ending in its stride and its child
//! slots. A change rebuilds the node whose stride holds the prefix length (and, since
//! leaves are pushed, each node below it in the prefix's span whose inherited value
//! changes) and publishes each with **one** `Release` store: into the parent node's value
//! word for that slot (or a split node's top), or into the first level. Prefixes of at
//! most 16 bits are not pushed into nodes: a per-/16 array holds their next hop (read by
//! lookups that end at no route inside a node), so such a change rebuilds no node: it
//! stores into that array (and the first-level leaf of a /16 without nodes) for each /16
//! it is the longest cover of, in a copy of the first level that one store publishes.
//! The default route lives in the first level too, and changes the same way: a lookup
//! that ends at no route in a node takes its fallback from the first level it loaded.
//!
//! Nodes, though, are shared by successive first levels, so a reader whose call (or
//! view) began before a change of such a fallback could read a node changed after it
//! and pair it with the old fallback. So the writer counts its changes (a sequence
//! lock), and an IPv6 lookup that ended at no route in a node and took a fallback is
//! looked up again if a change began since its first level was loaded. (IPv4's chunks
//! hold their /16's covers, and its first levels share nothing that changes.)
//!
//! In both, every address flips from its old to its new answer exactly once, and no
//! address outside the changed prefix sees any change.
//!
//! # Memory reclamation
//!
//! Replaced chunks and nodes are freed through `crossbeam-epoch`: the writer unlinks
//! first and then defers the free, and the collector frees only after every thread that
//! was pinned at the unlink has unpinned or *repinned* (moved its pin to a later epoch).
//! A next hop's dictionary index is handed out again only after such a grace period
//! too. Readers never wait; the writer never waits either. Chunks and nodes made by a
//! bulk build ([`Ipv4Lpm::build`], [`Ipv6Lpm::build`]) are packed into one arena and are
//! freed with the table. An IPv4 table replaced by a wider one is dropped the same way,
//! after a grace period.
//!
//! Deferred frees run on whichever thread pins when they are due, usually a reader.
//! After a large change (a route installation), a control thread can run the ones
//! already due itself with [`reclaim`], so that readers do not pay for them
//! (`bench pipeline` does so after installing its routes).
//!
//! Readers pin in one of two ways:
//!
//! * `lookup` and `lookup_batch` pin for the call (a thread-local counter and one
//!   locked instruction, 5-6 % of a batch of 32 IPv4 lookups).
//! * A reader that loops over batches holds a [`ReadGuard`] ([`pin`]) and passes it to
//!   `lookup_in` / `lookup_batch_in`, calling [`ReadGuard::repin`] every so often (a
//!   load and at most one plain store). The contract: **while a guard is held, no chunk
//!   or node replaced after its last (re)pin is freed** — by any table, of either
//!   family — so a reader must repin (or drop the guard) regularly, or the writer's
//!   replaced memory piles up. `brickroute fib bench` repins every 2,048 lookups (64
//!   batches of 32, well under a millisecond). Answers never depend on the pin: every
//!   such lookup loads the current first-level entry, so a reader holding a guard
//!   across an update sees the new routes as soon as they are published (a view,
//!   below, loads it once for many lookups).
//!
//! # Views
//!
//! Each `lookup_batch_in` call first loads the table's pointers (IPv4: the table, then
//! its first level; IPv6: its first level). A reader that loops over batches under one
//! guard loads them once: [`Ipv4Lpm::view`] / [`Ipv6Lpm::view`] borrow the guard (so it
//! cannot be repinned while the view lives), and the view's `lookup_batch` answers as
//! `lookup_batch_in` would have when the view was made, or with some of the changes
//! published since. A change that replaces the first level (a prefix of at most 16 bits
//! that is the longest over more than one /16) or the whole table (an IPv4 table growing
//! wider values, or many changes applied at once) shows only in views made after it;
//! other changes may show at once, as they are stored into structures the view shares.
//! Each address's answer still takes each change whole or not at all (a batch may
//! answer some addresses from before a change and others from after it), and an
//! address no change touched answers as before. So a reader takes a new view whenever
//! it repins: what a view can miss is what changed since its reader last repinned.
//! (`brickroute fib bench` does so every 2,048 lookups. In its loop over batches of 32
//! IPv4 table queries, a call per batch that loads the pointers anew ran 2-9 % slower
//! than a view, see `docs/LPM.md`.)
//!
//! # Data indexed by next hop
//!
//! Publication is a `Release` store and lookups load with `Acquire`, so anything the
//! writer stored before calling `insert` (typically the slot of a next-hop table that the
//! new next-hop index names) is visible to a reader once a lookup returned that next hop.

pub mod baseline;
mod compressed;
mod dir16;
mod first;
mod growing;
mod key;
mod mem;
pub mod mrt;
pub mod reference;
mod runs6;
pub mod synth;
pub mod table;

use crossbeam_epoch as epoch;
use dir16::Dir16View;
use growing::GrowingDir16;
pub use key::Key;
use runs6::{Runs6, Runs6View};

/// A reader's pin of the tables' memory reclamation: while it is held, no chunk or node
/// that any [`Ipv4Lpm`] or [`Ipv6Lpm`] replaces from then on is freed, so lookups made
/// through it ([`Ipv4Lpm::lookup_batch_in`], ...) need no pin of their own. Made by
/// [`pin`]; call [`Self::repin`] regularly (see the [crate documentation](crate#memory-reclamation)).
/// It belongs to the thread that made it.
pub struct ReadGuard(epoch::Guard);

/// Pins the current thread for lookups through `lookup_in` / `lookup_batch_in`.
pub fn pin() -> ReadGuard {
    ReadGuard(epoch::pin())
}

impl ReadGuard {
    /// Moves the pin to the current epoch (a load and at most one store), letting the
    /// writers' frees of memory replaced before now go ahead. Only this thread's
    /// outermost pin moves: while another guard (or a `lookup` call) of the same thread
    /// is alive, it does nothing.
    #[inline]
    pub fn repin(&mut self) {
        self.0.repin()
    }
}

/// Runs `f` once every thread pinned now (a [`ReadGuard`], or a lookup under way) has
/// unpinned or repinned. For what a table's users hand out through its answers, such as
/// the next-hop indices the lookup elements store as next hops: a reader that holds a
/// `ReadGuard` from its lookup until it is done with the answer never sees such an index
/// reused for something else, if the index is freed through this.
pub fn defer(f: impl FnOnce() + Send + 'static) {
    let guard = epoch::pin();
    guard.defer(f);
    // (Into the collector's queue now: the thread's own deferred work otherwise waits
    // for 64 more items.)
    guard.flush();
}

/// Frees, on this thread, the replaced memory (and runs the [`defer`]red work) whose
/// grace period is over, as far as the pins held now allow: with no reader pinned,
/// everything replaced before the call. Otherwise that work is done by whichever thread
/// pins next, typically a forwarding worker in the middle of its batches, which then
/// pays for the frees of, say, a route installation. A control thread calls it after a
/// large change, when the work is better done there.
pub fn reclaim() {
    // Each flush hands this thread's deferred work to the collector, moves the global
    // epoch on if every pinned thread allows, and runs a few of the batches that are
    // due (a batch needs two epoch steps after it was queued). A batch holds up to 64
    // deferred frees (most changes defer one or two), and a drained queue makes a round
    // a few hundred nanoseconds, so a bounded number of rounds empties the queue of any
    // route installation.
    for _ in 0..RECLAIM_ROUNDS {
        epoch::pin().flush();
    }
}

/// Rounds of [`reclaim`]: each runs up to eight due batches of up to 64 deferred
/// frees (crossbeam-epoch's collection step).
const RECLAIM_ROUNDS: usize = 4096;

impl std::fmt::Debug for ReadGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ReadGuard")
    }
}

/// What [`Ipv4Lpm`] and [`Ipv6Lpm`] share, for code that serves both families (the
/// benchmark, tests). Each method is the type's own, of the same name.
pub trait Lpm: Send + Sync + Sized + 'static {
    type Key: Key;
    fn new() -> Self;
    fn build(routes: &[(Self::Key, u8, u32)]) -> Self;
    fn lookup_batch(&self, addrs: &[Self::Key], out: &mut [u32]);
    fn lookup_in(&self, guard: &ReadGuard, addr: Self::Key) -> Option<u32>;
    fn lookup_batch_in(&self, guard: &ReadGuard, addrs: &[Self::Key], out: &mut [u32]);
    /// The type's view ([`Ipv4View`], [`Ipv6View`]).
    type View<'g>: LpmView<Self::Key>
    where
        Self: 'g;
    fn view<'g>(&'g self, guard: &'g ReadGuard) -> Self::View<'g>;
    fn insert(&self, addr: Self::Key, len: u8, nh: u32) -> Option<u32>;
    fn remove(&self, addr: Self::Key, len: u8) -> Option<u32>;
    fn get(&self, addr: Self::Key, len: u8) -> Option<u32>;
    fn routes(&self) -> Vec<(Self::Key, u8, u32)>;
    fn clear(&self);
    fn len(&self) -> usize;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    fn memory_bytes(&self) -> usize;
    fn control_bytes(&self) -> usize;
}

/// What [`Ipv4View`] and [`Ipv6View`] share.
pub trait LpmView<K> {
    fn lookup_batch(&self, addrs: &[K], out: &mut [u32]);
}

macro_rules! family {
    (
        $(#[$doc:meta])* $name:ident, $key:ty, $inner:ty, $bits:expr,
        $(#[$view_doc:meta])* $view:ident, $inner_view:ident
    ) => {
        impl Lpm for $name {
            type Key = $key;
            fn new() -> Self {
                $name::new()
            }
            fn build(routes: &[($key, u8, u32)]) -> Self {
                $name::build(routes)
            }
            fn lookup_batch(&self, addrs: &[$key], out: &mut [u32]) {
                $name::lookup_batch(self, addrs, out)
            }
            fn lookup_in(&self, guard: &ReadGuard, addr: $key) -> Option<u32> {
                $name::lookup_in(self, guard, addr)
            }
            fn lookup_batch_in(&self, guard: &ReadGuard, addrs: &[$key], out: &mut [u32]) {
                $name::lookup_batch_in(self, guard, addrs, out)
            }
            type View<'g> = $view<'g>;
            fn view<'g>(&'g self, guard: &'g ReadGuard) -> $view<'g> {
                $name::view(self, guard)
            }
            fn insert(&self, addr: $key, len: u8, nh: u32) -> Option<u32> {
                $name::insert(self, addr, len, nh)
            }
            fn remove(&self, addr: $key, len: u8) -> Option<u32> {
                $name::remove(self, addr, len)
            }
            fn get(&self, addr: $key, len: u8) -> Option<u32> {
                $name::get(self, addr, len)
            }
            fn routes(&self) -> Vec<($key, u8, u32)> {
                $name::routes(self)
            }
            fn clear(&self) {
                $name::clear(self)
            }
            fn len(&self) -> usize {
                $name::len(self)
            }
            fn memory_bytes(&self) -> usize {
                $name::memory_bytes(self)
            }
            fn control_bytes(&self) -> usize {
                $name::control_bytes(self)
            }
        }

        $(#[$doc])*
        pub struct $name {
            inner: $inner,
        }

        $(#[$view_doc])*
        #[derive(Clone, Copy)]
        pub struct $view<'g>($inner_view<'g>);

        impl $view<'_> {
            /// [`$name::lookup_batch_in`] through this view.
            ///
            /// # Panics
            /// If `out` is shorter than `addrs`.
            #[inline(always)]
            pub fn lookup_batch(&self, addrs: &[$key], out: &mut [u32]) {
                self.0.lookup_batch(addrs, out)
            }
        }

        impl LpmView<$key> for $view<'_> {
            #[inline(always)]
            fn lookup_batch(&self, addrs: &[$key], out: &mut [u32]) {
                $view::lookup_batch(self, addrs, out)
            }
        }

        impl std::fmt::Debug for $view<'_> {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(stringify!($view))
            }
        }

        impl Default for $name {
            fn default() -> Self {
                Self::new()
            }
        }

        impl std::fmt::Debug for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_struct(stringify!($name))
                    .field("len", &self.len())
                    .finish()
            }
        }

        impl $name {
            /// Largest next-hop value the table stores.
            pub const MAX_NEXT_HOP: u32 = u32::MAX - 1;
            /// What [`Self::lookup_batch`] writes for an address without a route.
            pub const NO_ROUTE: u32 = key::NONE;

            /// An empty table.
            pub fn new() -> Self {
                Self { inner: <$inner>::new() }
            }

            /// A table holding `routes` (`(address, length, next hop)`, any order; host
            /// bits are ignored; of equal prefixes the last wins), built in one pass.
            ///
            /// # Panics
            /// If a length or next hop is out of range (as for [`Self::insert`]).
            pub fn build(routes: &[($key, u8, u32)]) -> Self {
                for &(_, len, nh) in routes {
                    Self::check(len, nh);
                }
                Self { inner: <$inner>::build(routes) }
            }

            fn check(len: u8, nh: u32) {
                assert!(u32::from(len) <= $bits, "prefix length {} > {}", len, $bits);
                assert!(nh <= Self::MAX_NEXT_HOP, "next hop {} too large", nh);
            }

            /// The next hop of the longest prefix containing `addr` (pins the thread for
            /// the call).
            #[inline]
            pub fn lookup(&self, addr: $key) -> Option<u32> {
                let r = self.inner.lookup(addr);
                (r != Self::NO_ROUTE).then_some(r)
            }

            /// [`Self::lookup`] under the caller's [`ReadGuard`] (no pin of its own).
            #[inline]
            pub fn lookup_in(&self, guard: &ReadGuard, addr: $key) -> Option<u32> {
                let r = self.inner.lookup_in(&guard.0, addr);
                (r != Self::NO_ROUTE).then_some(r)
            }

            /// Looks up every address of `addrs`, writing the next hop (or
            /// [`Self::NO_ROUTE`]) to the same index of `out`. Runs level by level over
            /// groups of 32 addresses with prefetching, so cache misses overlap.
            ///
            /// # Panics
            /// If `out` is shorter than `addrs`.
            ///
            /// Pins the thread for the call; a reader that loops over batches passes a
            /// held [`ReadGuard`] to [`Self::lookup_batch_in`] instead.
            #[inline]
            pub fn lookup_batch(&self, addrs: &[$key], out: &mut [u32]) {
                self.inner.lookup_batch(addrs, out)
            }

            /// [`Self::lookup_batch`] under the caller's [`ReadGuard`] (no pin of its
            /// own; see the [crate documentation](crate#memory-reclamation)).
            ///
            /// # Panics
            /// If `out` is shorter than `addrs`.
            #[inline]
            pub fn lookup_batch_in(&self, guard: &ReadGuard, addrs: &[$key], out: &mut [u32]) {
                self.inner.lookup_batch_in(&guard.0, addrs, out)
            }

            /// The table as a reader holding `guard` sees it now, for many
            /// [`lookup_batch`]($view::lookup_batch) calls: each of them answers as
            /// [`Self::lookup_batch_in`] would, without loading the table's pointers
            /// again (see [Views](crate#views)).
            #[inline]
            pub fn view<'g>(&'g self, guard: &'g ReadGuard) -> $view<'g> {
                $view(self.inner.view(&guard.0))
            }

            /// Installs `addr/len -> nh` (host bits of `addr` are ignored); returns the
            /// next hop the same prefix had before, if any.
            ///
            /// # Panics
            /// If `len` exceeds the address width or `nh > MAX_NEXT_HOP`.
            pub fn insert(&self, addr: $key, len: u8, nh: u32) -> Option<u32> {
                Self::check(len, nh);
                self.inner.insert(addr, len, nh)
            }

            /// Removes the route for exactly `addr/len`; returns its next hop. Addresses
            /// it covered fall back to the longest remaining prefix that covers them.
            ///
            /// # Panics
            /// If `len` exceeds the address width.
            pub fn remove(&self, addr: $key, len: u8) -> Option<u32> {
                Self::check(len, 0);
                self.inner.remove(addr, len)
            }

            /// The next hop installed for exactly `addr/len`, if any.
            pub fn get(&self, addr: $key, len: u8) -> Option<u32> {
                self.inner.get(addr, len)
            }

            /// Every installed route as `(addr, len, next_hop)`, sorted by address then
            /// length.
            pub fn routes(&self) -> Vec<($key, u8, u32)> {
                self.inner.routes()
            }

            /// Number of installed routes.
            pub fn len(&self) -> usize {
                self.inner.len()
            }

            pub fn is_empty(&self) -> bool {
                self.len() == 0
            }

            /// Removes every route.
            pub fn clear(&self) {
                self.inner.clear()
            }

            /// Bytes of the lookup structure readers use (first level and live nodes).
            pub fn memory_bytes(&self) -> usize {
                self.inner.lookup_bytes()
            }

            /// Estimated bytes of the writer's route record, and of the replaced first
            /// level it keeps for the next change of a prefix shorter than /16 (none of
            /// them touched by lookups).
            pub fn control_bytes(&self) -> usize {
                self.inner.control_bytes()
            }
        }
    };
}

family!(
    /// An IPv4 longest-prefix-match table with lock-free readers.
    /// See the [crate documentation](crate) for the structure and concurrency rules.
    Ipv4Lpm,
    u32,
    GrowingDir16,
    32,
    /// An [`Ipv4Lpm`] as one reader sees it under a [`ReadGuard`] ([`Ipv4Lpm::view`]).
    Ipv4View,
    Dir16View
);

family!(
    /// An IPv6 longest-prefix-match table with lock-free readers (addresses as `u128`,
    /// most significant bit first). See the [crate documentation](crate).
    Ipv6Lpm,
    u128,
    Runs6,
    128,
    /// An [`Ipv6Lpm`] as one reader sees it under a [`ReadGuard`] ([`Ipv6Lpm::view`]).
    Ipv6View,
    Runs6View
);

impl Ipv4Lpm {
    /// Applies `changes` in order: `(addr, len, Some(nh))` installs a route as
    /// [`Self::insert`] does, `(addr, len, None)` removes one as [`Self::remove`] does.
    ///
    /// Many changes against the table's size (at least 1,024 and a sixteenth of its
    /// routes) are built into a new table together with the routes it holds, which
    /// replaces it with one store: readers see every change at once, and a million
    /// routes load in a bulk build's time (about 0.1 s) where inserts take a few
    /// microseconds each. Fewer go into the table in place and are published together,
    /// with one store as well (a copy of the first level when they change more than one
    /// /16): readers see all of them or none, but for a change of the default route,
    /// which is stored on its own just after the others.
    ///
    /// # Panics
    /// If a length or next hop is out of range (as for [`Self::insert`]), before any
    /// change is applied.
    pub fn apply(&self, changes: &[(u32, u8, Option<u32>)]) {
        for &(_, len, nh) in changes {
            Self::check(len, nh.unwrap_or(0));
        }
        self.inner.apply(changes)
    }
}

#[cfg(test)]
mod tests;
