//! The writer's record: each /16's sorted routes, the short prefixes, the next-hop
//! dictionary and the shared one-run chunks.

use super::*;

/// A route longer than /16 in its /16's list: the address bits below the /16, the
/// length and the next hop, in 8 bytes (12 as a full `(u32, u8, u32)`). Each update of a
/// /16 searches its list and reads all of it to paint the chunk again, and with readers
/// streaming their queries those lines are cold.
#[derive(Clone, Copy, Debug)]
pub(super) struct Sub {
    pub(super) low: u16,
    pub(super) len: u8,
    pub(super) nh: u32,
}

const _: () = assert!(std::mem::size_of::<Sub>() == 8);

impl Sub {
    /// The entry of route `key/len -> nh` (`key` a full address in the list's /16).
    pub(super) fn new(key: u32, len: u8, nh: u32) -> Sub {
        Sub {
            low: key as u16,
            len,
            nh,
        }
    }

    pub(super) fn key(&self) -> (u16, u8) {
        (self.low, self.len)
    }
}

/// The position of the route `low`/`len` in a /16's list sorted by [`Sub::key`] (`Err`:
/// where it would go). The routes of a /16 spread over its addresses roughly evenly, so
/// the search starts where `low` would sit in an even spread and widens from there by
/// doubling steps: a couple of lines read where a binary search reads about log2(n),
/// each a cache miss when the list is cold. An uneven list costs at most about twice
/// the probes of a binary search.
pub(super) fn find(list: &[Sub], low: u16, len: u8) -> Result<usize, usize> {
    let key = (low, len);
    let below = |s: &Sub| s.key() < key;
    let n = list.len();
    let guess = (usize::from(low) * n) >> 16;
    // `lo <= p <= hi` for `p`, the first route not below `key`.
    let (mut lo, mut hi) = (0, n);
    if guess < n {
        let mut step = 1;
        if below(&list[guess]) {
            lo = guess + 1;
            let mut i = guess + step;
            while i < n && below(&list[i]) {
                lo = i + 1;
                step *= 2;
                i = guess + step;
            }
            hi = i.min(n);
        } else {
            hi = guess;
            while step <= guess && !below(&list[guess - step]) {
                hi = guess - step;
                step *= 2;
            }
            lo = guess.saturating_sub(step);
        }
    }
    let p = lo + list[lo..hi].partition_point(below);
    match list.get(p) {
        Some(s) if s.key() == key => Ok(p),
        _ => Err(p),
    }
}

/// Writer-side state.
pub(super) struct Writer {
    /// `short[len]` for len 0..=16: masked prefix to next hop.
    pub(super) short: Vec<PrefixMap<u32>>,
    /// Per /16: the routes longer than /16 under it, sorted by address then length.
    pub(super) chunks: Vec<Vec<Sub>>,
    /// Per /16: length (1..=16) of the longest prefix of at most 16 bits covering it, 0
    /// if none.
    pub(super) top_len: Vec<u8>,
    /// Per /16: that prefix's next hop, NONE if none.
    pub(super) top_val: Vec<u32>,
    pub(super) count: usize,
    /// The shared one-run chunk of each value that some /16 without longer prefixes
    /// links (so every first-level entry is a chunk and a lookup never branches on the
    /// entry's kind).
    pub(super) uniform: FastMap<u32, u64>,
    /// Uniform chunk link to (value, first-level entries linking it).
    pub(super) uniform_refs: FastMap<u64, (u32, usize)>,
    pub(super) dict: Dict,
    /// Live next hops whose dictionary index does not fit the table's narrow values (see
    /// [`Dir16::outgrown`]).
    pub(super) misfits: usize,
}

/// The writer's side of the next-hop dictionary: chunks store 16-bit (or 8-bit) indices
/// into `Dir16::dict` instead of 32-bit next hops, which nearly halves the lines a chunk
/// spans (or more). An index is handed out when a next hop gets its first route and
/// taken back, after an epoch grace period, when it loses its last one.
pub(super) struct Dict {
    /// Next hop to (its index, if it got one; routes using it).
    pub(super) map: FastMap<u32, (Option<u16>, usize)>,
    /// The indices of next hops below [`SMALL_HOPS`] again, 0 for none (index 0 is
    /// NONE's, never a hop's): the encoder asks for an index once a run, and this is
    /// one load where the map took a hash probe. The lookup elements' next hops are
    /// small numbers (ports and gateway slots), as are most tables' in practice.
    pub(super) small: Box<[u16; SMALL_HOPS]>,
    /// Indices from here on were never handed out.
    pub(super) next: usize,
    /// Indices free for reuse: readers that might still read the old next hop through
    /// them have unpinned.
    pub(super) free: Arc<Mutex<Vec<u16>>>,
    /// log2 of the bytes of the table's narrow values (fixed when the table is made):
    /// see [`Dir16::narrow`].
    pub(super) narrow: u32,
}

/// Next hops with their index in [`Dict::small`].
pub(super) const SMALL_HOPS: usize = 4096;

impl Dict {
    pub(super) fn new(narrow: u32) -> Dict {
        Dict {
            map: fast_map(),
            small: Box::new([0; SMALL_HOPS]),
            next: 1,
            free: Arc::new(Mutex::new(Vec::new())),
            narrow,
        }
    }

    /// The index of next hop `v` (NONE is always 0).
    pub(super) fn index(&self, v: u32) -> Option<u16> {
        if v == NONE {
            return Some(0);
        }
        if let Some(&i) = self.small.get(v as usize) {
            return (i != 0).then_some(i);
        }
        self.map.get(&v).and_then(|e| e.0)
    }

    /// Records next hop `nh` with `index` and one route.
    pub(super) fn add(&mut self, nh: u32, index: Option<u16>) {
        if let Some(slot) = self.small.get_mut(nh as usize) {
            *slot = index.unwrap_or(0);
        }
        self.map.insert(nh, (index, 1));
    }

    /// Forgets next hop `nh`; returns its index, if it had one.
    pub(super) fn forget(&mut self, nh: u32) -> Option<Option<u16>> {
        if let Some(slot) = self.small.get_mut(nh as usize) {
            *slot = 0;
        }
        self.map.remove(&nh).map(|e| e.0)
    }

    /// Whether chunks holding a next hop with dictionary index `index` store it in the
    /// table's narrow values (else they are wider, behind a front).
    pub(super) fn fits(&self, index: Option<u16>) -> bool {
        match (self.narrow, index) {
            (2, _) => true,
            (_, None) => false,
            (0, Some(i)) => i < u16::from(BYTE_MARK),
            _ => true,
        }
    }
}

impl Writer {
    /// A link to the uniform chunk of `v` (made if missing), counted as one more user.
    pub(super) fn uniform_link(&mut self, v: u32, bytes: &AtomicUsize) -> u64 {
        if let Some(&link) = self.uniform.get(&v) {
            if let Some(r) = self.uniform_refs.get_mut(&link) {
                r.1 += 1;
            }
            return link;
        }
        let link = uniform_chunk(v, &self.dict, bytes);
        self.uniform.insert(v, link);
        self.uniform_refs.insert(link, (v, 1));
        link
    }

    /// Drops one first-level entry's use of the chunk `link`: a replaced chunk is
    /// retired, a uniform chunk once its last user goes.
    pub(super) fn release(&mut self, link: u64, retired: &mut Vec<u64>) {
        match self.uniform_refs.get_mut(&link) {
            Some(r) => {
                r.1 -= 1;
                if r.1 == 0 {
                    let v = r.0;
                    self.uniform_refs.remove(&link);
                    self.uniform.remove(&v);
                    retired.push(link);
                }
            }
            None => retired.push(link),
        }
    }

    /// Counts one more route using next hop `nh`, giving it a dictionary index (stored
    /// before any chunk that uses it is published) if it has none and one is free.
    pub(super) fn acquire_hop(&mut self, nh: u32, dict: &[AtomicU32]) {
        if let Some(e) = self.dict.map.get_mut(&nh) {
            e.1 += 1;
            return;
        }
        let recycled = self.dict.free.lock().unwrap_or_else(|p| p.into_inner()).pop();
        if self.dict.next == usize::from(BYTE_MARK) {
            // (Never handed out: it is the 8-bit kid mark.)
            self.dict.next += 1;
        }
        let index = recycled.or_else(|| {
            (self.dict.next < INDICES).then(|| {
                self.dict.next += 1;
                (self.dict.next - 1) as u16
            })
        });
        if let Some(i) = index {
            dict[usize::from(i)].store(nh, Ordering::Release);
        }
        if !self.dict.fits(index) {
            self.misfits += 1;
        }
        self.dict.add(nh, index);
    }

    /// Counts one route less using next hop `nh`; the last one's index is freed for
    /// reuse once every reader that could still read it through a replaced chunk has
    /// unpinned. (By then no published chunk holds it: the chunks that did were those
    /// the route covered, rebuilt before this call.)
    pub(super) fn release_hop(&mut self, nh: u32) {
        let Some(e) = self.dict.map.get_mut(&nh) else {
            return;
        };
        e.1 -= 1;
        if e.1 > 0 {
            return;
        }
        let Some(index) = self.dict.forget(nh) else {
            return;
        };
        if !self.dict.fits(index) {
            self.misfits -= 1;
        }
        if let Some(i) = index {
            let free = self.dict.free.clone();
            epoch::pin().defer(move || free.lock().unwrap_or_else(|p| p.into_inner()).push(i));
        }
    }
}
