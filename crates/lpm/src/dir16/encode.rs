//! Chunks from slot values: the run encoding, the kid front, placing a chunk on the
//! heap or in the bulk build's staging area, and freeing it.

use super::*;

/// The values of one chunk's slots, and its kids (slot, values of the /32s of that /24).
pub(super) struct Image {
    pub(super) vals: [u32; SLOTS],
    pub(super) kids: Vec<(usize, Box<[u32; SLOTS]>)>,
}

impl Image {
    /// The slots with a kid, as a bitmap.
    pub(super) fn kid_slots(&self) -> [u64; 4] {
        let mut kbm = [0u64; 4];
        for &(j, _) in &self.kids {
            kbm[j >> 6] |= 1 << (j & 63);
        }
        kbm
    }
}

/// The slot values of the chunk for routes `routes` (all longer than /16, in one /16,
/// sorted by address then length) over `cover` (the longest prefix of at most 16 bits
/// covering the /16, or NONE).
pub(super) fn image(cover: u32, routes: &[Sub]) -> Image {
    let mut vals = [cover; SLOTS];
    // In address order a prefix comes after every prefix containing it, so later
    // writes are the more specific ones.
    for &Sub { low: a, len: l, nh } in routes.iter().filter(|r| r.len <= 24) {
        let s = usize::from(a >> 8);
        vals[s..s + (1usize << (24 - l))].fill(nh);
    }
    let mut kids: Vec<(usize, Box<[u32; SLOTS]>)> = Vec::new();
    for &Sub { low: a, len: l, nh } in routes.iter().filter(|r| r.len > 24) {
        let j = usize::from(a >> 8);
        if kids.last().map(|k| k.0) != Some(j) {
            kids.push((j, Box::new([vals[j]; SLOTS])));
        }
        if let Some((_, kv)) = kids.last_mut() {
            let s = (a & 0xff) as usize;
            kv[s..s + (1usize << (32 - l))].fill(nh);
        }
    }
    Image { vals, kids }
}

/// An encoded chunk (or kid): its words from its header on (from its front on, if it
/// has one), whether it has a [`FRONT`], and log2 of the bytes of a value.
pub(super) struct Encoded {
    pub(super) words: Vec<u64>,
    pub(super) fronted: bool,
    pub(super) width: u32,
}

/// The chunk (or kid) holding `vals`. Its values are of the table's narrow width (8- or
/// 16-bit dictionary indices, or in a table of next hops 32-bit next hops) if they fit,
/// else 16-bit indices or 32-bit next hops behind a [`FRONT`]. Slots set in the bitmap
/// `kids` have a kid: they hold the width's mark ([`BYTE_MARK`], [`KID_MARK`], in a
/// table of next hops [`WORD_MARK`]; a run of their own, adjacent kid slots share one),
/// or, as 32-bit values behind a front, their pushed value.
pub(super) fn encode_runs(vals: &[u32; SLOTS], kids: &[u64; 4], dict: &Dict) -> Encoded {
    let is_kid = |s: usize| kids[s >> 6] >> (s & 63) & 1 != 0;
    let mut bm = [0u64; 4];
    let mut runs = [0u32; SLOTS];
    let mut run_kid = [false; SLOTS];
    let mut n = 0;
    // The run starts as a bitmap first, with no branch on the values, then one step per
    // run: a branch per slot on values as good as random was mispredicted at most of the
    // run starts. A slot starts a run where its value, or whether it has a kid, differs
    // from the slot before (slot 0 compares with itself, and starts one anyway).
    for (w, word) in bm.iter_mut().enumerate() {
        let mut m = 0u64;
        for i in 0..64 {
            let s = 64 * w + i;
            m |= u64::from(vals[s] != vals[s.saturating_sub(1)]) << i;
        }
        let kids_before = kids[w] << 1 | if w == 0 { kids[0] & 1 } else { kids[w - 1] >> 63 };
        *word = m | (kids[w] ^ kids_before);
    }
    bm[0] |= 1;
    for (w, &word) in bm.iter().enumerate() {
        let mut m = word;
        while m != 0 {
            let s = 64 * w + m.trailing_zeros() as usize;
            runs[n] = vals[s];
            run_kid[n] = is_kid(s);
            n += 1;
            m &= m - 1;
        }
    }
    // (Chunks behind a front need no kid runs: every key under them takes the slow path.
    // Splitting the runs anyway keeps the encodings of one image alike.)
    let runs = &runs[..n];
    let mut index = [0u16; SLOTS];
    let mut largest = 0;
    let mut hops = false;
    for (r, (&v, &kid)) in runs.iter().zip(&run_kid).enumerate() {
        if kid {
            continue;
        }
        match dict.index(v) {
            Some(i) => {
                index[r] = i;
                largest = largest.max(i);
            }
            None => {
                hops = true;
                break;
            }
        }
    }
    let narrow = dict.narrow;
    let width = match (hops, largest) {
        _ if narrow == 2 => 2,
        (true, _) => 2,
        (false, 0..=254) => narrow,
        _ => 1,
    };
    // Slot s ends a run where s + 1 starts one, and slot 255 ends the last.
    let ends = [
        bm[0] >> 1 | bm[1] << 63,
        bm[1] >> 1 | bm[2] << 63,
        bm[2] >> 1 | bm[3] << 63,
        bm[3] >> 1 | 1 << 63,
    ];
    // Header and values as bytes on the stack, then packed into words.
    // (Rounded up to whole words: the packing below reads whole words.)
    let mut bytes = [0u8; (VALS_AT + 4 * SLOTS).next_multiple_of(8)];
    for (w, b) in ends.iter().zip(bytes.chunks_exact_mut(8)) {
        b.copy_from_slice(&w.to_le_bytes());
    }
    bytes[32..36].copy_from_slice(&end_rank_bytes(&ends).to_le_bytes());
    let size = 1 << width;
    for (r, (&v, &kid)) in runs.iter().zip(&run_kid).enumerate() {
        // The last run first.
        let at = VALS_AT + (n - 1 - r) * size;
        match (width, kid) {
            (0, true) => bytes[at] = BYTE_MARK,
            (0, false) => bytes[at] = index[r] as u8,
            (1, true) => bytes[at..at + 2].copy_from_slice(&KID_MARK.to_le_bytes()),
            (1, false) => bytes[at..at + 2].copy_from_slice(&index[r].to_le_bytes()),
            (_, true) if narrow == 2 => bytes[at..at + 4].copy_from_slice(&WORD_MARK.to_le_bytes()),
            _ => bytes[at..at + 4].copy_from_slice(&v.to_le_bytes()),
        }
    }
    let end = VALS_AT + n * size;
    let fronted = width != narrow;
    let mut words = if fronted { FRONT.to_vec() } else { Vec::new() };
    words.extend(
        bytes[..end.next_multiple_of(8)]
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]])),
    );
    Encoded {
        words,
        fronted,
        width,
    }
}

/// Byte w: the bits set in the bitmap words after w (at most 192, so a byte holds it).
pub(super) fn end_rank_bytes(bm: &[u64; 4]) -> u32 {
    let c2 = bm[3].count_ones();
    let c1 = c2 + bm[2].count_ones();
    let c0 = c1 + bm[1].count_ones();
    c0 | (c1 << 8) | (c2 << 16)
}

/// Byte w: the bits set in the bitmap words before w (at most 192, so a byte holds it).
pub(super) fn rank_bytes(bm: &[u64; 4]) -> u32 {
    let c1 = bm[0].count_ones();
    let c2 = c1 + bm[1].count_ones();
    let c3 = c2 + bm[2].count_ones();
    (c1 << 8) | (c2 << 16) | (c3 << 24)
}

/// Words of the chunk or kid `link` names (its front, header and values).
///
/// # Safety
/// `link` names a live chunk.
pub(super) unsafe fn runs_words(link: u64) -> usize {
    let p = chunk_of(link);
    let front = if link & FRONTED != 0 { FRONT_WORDS } else { 0 };
    let runs: u32 = (0..4).map(|w| (*p.add(w)).count_ones()).sum();
    front + (VALS_AT + ((runs as usize) << width_of(link))).div_ceil(8)
}

/// Number of kids of a chunk with kids.
///
/// # Safety
/// `p` is a live chunk whose link carries [`KIDS`].
pub(super) unsafe fn kid_count(p: ChunkPtr) -> usize {
    (*p.sub(1) >> 32) as usize
}

/// Words in front of a heap chunk with `kids` kids (a multiple of a line, so the header
/// starts a line).
pub(super) fn heap_front(kids: usize) -> usize {
    (KID_HDR + kids).next_multiple_of(8)
}

/// The words in front of a chunk's header for its kids (`links` in slot order).
pub(super) fn kid_front(kids: &[(usize, Box<[u32; SLOTS]>)], links: &[u64]) -> Vec<u64> {
    let mut kbm = [0u64; 4];
    for &(j, _) in kids {
        kbm[j >> 6] |= 1 << (j & 63);
    }
    let mut v: Vec<u64> = links.iter().rev().copied().collect();
    v.extend_from_slice(&kbm);
    v.push(u64::from(rank_bytes(&kbm)) | ((kids.len() as u64) << 32));
    v
}

/// A link to the chunk or kid `e` placed at byte address `addr`.
pub(super) fn tag(addr: u64, e: &Encoded, kids: bool) -> u64 {
    debug_assert!(addr >> LINES_SHIFT == 0 && addr & 7 == 0);
    let lines = ((addr as usize % 64) + e.words.len() * 8).div_ceil(64);
    let extra = (lines.min(4) - 1) as u64;
    addr | (extra << LINES_SHIFT)
        | u64::from(e.width) << WIDTH_SHIFT
        | if kids { KIDS } else { 0 }
        | if e.fronted { FRONTED } else { 0 }
}

/// Allocates `words` words aligned to a cache line.
pub(super) fn alloc_words(words: usize, bytes: &AtomicUsize) -> *mut u64 {
    let layout = words_layout(words);
    // SAFETY: the layout has a non-zero size.
    let p = unsafe { alloc(layout) } as *mut u64;
    if p.is_null() {
        handle_alloc_error(layout);
    }
    bytes.fetch_add(layout.size(), Ordering::Relaxed);
    p
}

pub(super) fn words_layout(words: usize) -> Layout {
    match Layout::from_size_align(words.max(1) * 8, 64) {
        Ok(l) => l,
        Err(_) => panic!("chunk of {} words is too large", words),
    }
}

/// Copies `words` into a new line-aligned heap block.
pub(super) fn heap_words(words: &[u64], bytes: &AtomicUsize) -> *mut u64 {
    let p = alloc_words(words.len(), bytes);
    // SAFETY: `p` holds `words.len()` words, freshly allocated, not overlapping `words`.
    unsafe { std::ptr::copy_nonoverlapping(words.as_ptr(), p, words.len()) };
    p
}

/// Places the chunk an image describes on the heap; returns its link.
pub(super) fn place_heap(img: &Image, dict: &Dict, bytes: &AtomicUsize) -> u64 {
    let main = encode_runs(&img.vals, &img.kid_slots(), dict);
    if img.kids.is_empty() {
        let p = heap_words(&main.words, bytes);
        return tag(p as u64, &main, false);
    }
    let links: Vec<u64> = img
        .kids
        .iter()
        .map(|(_, kv)| {
            let e = encode_runs(kv, &[0; 4], dict);
            tag(heap_words(&e.words, bytes) as u64, &e, false)
        })
        .collect();
    let front = kid_front(&img.kids, &links);
    let pad = heap_front(img.kids.len()) - front.len();
    let mut all = vec![0u64; pad];
    all.extend_from_slice(&front);
    all.extend_from_slice(&main.words);
    let base = heap_words(&all, bytes);
    // SAFETY: the chunk starts `pad + front.len()` words into the block just filled.
    let p = unsafe { base.add(pad + front.len()) };
    tag(p as u64, &main, true)
}

/// Frees a heap chunk (and its kids) that no reader can reach any more. (The byte count
/// is taken off when the chunk is retired, see [`heap_bytes`].)
///
/// # Safety
/// `link` names a chunk placed by [`place_heap`], unlinked, past its grace period (or
/// never shared), and freed once.
pub(super) unsafe fn free_heap(link: u64) {
    let p = ptr_of(link);
    let words = runs_words(link);
    if link & KIDS == 0 {
        dealloc(p as *mut u8, words_layout(words));
        return;
    }
    let k = kid_count(p);
    for r in 0..k {
        let kid = *p.sub(KID_HDR + 1 + r);
        dealloc(ptr_of(kid) as *mut u8, words_layout(runs_words(kid)));
    }
    let front = heap_front(k);
    dealloc(p.sub(front) as *mut u8, words_layout(front + words));
}

/// Bytes a heap chunk occupies (as [`free_heap`] will release them).
///
/// # Safety
/// As for [`free_heap`]'s `link`, but the chunk may still be linked.
pub(super) unsafe fn heap_bytes(link: u64) -> usize {
    let p = ptr_of(link);
    let size = |w: usize| words_layout(w).size();
    let words = runs_words(link);
    if link & KIDS == 0 {
        return size(words);
    }
    let k = kid_count(p);
    (0..k)
        .map(|r| size(runs_words(*p.sub(KID_HDR + 1 + r))))
        .sum::<usize>()
        + size(heap_front(k) + words)
}

/// Bulk-build staging: chunks packed one after another as the arena will hold them,
/// with links as offsets from the arena's start (fixed up once it is allocated).
///
/// No padding between chunks: a header may straddle two lines. Padding every header into
/// one line (chunks starting in the first 24 bytes of a line) took 0.6 MiB more of the
/// 1M table's 5.8 MiB arena and ran 8-14 % slower: on this machine the arena's size
/// decides lookup speed more than lines per lookup (see `docs/LPM.md`).
pub(super) struct Staging {
    pub(super) words: Vec<u64>,
    /// Word indices holding kid links (offsets to rebase).
    pub(super) fixups: Vec<usize>,
}

impl Staging {
    pub(super) fn runs(&mut self, vals: &[u32; SLOTS], dict: &Dict) -> u64 {
        let e = encode_runs(vals, &[0; 4], dict);
        let at = self.words.len();
        self.words.extend_from_slice(&e.words);
        tag(at as u64 * 8, &e, false)
    }

    /// Places a chunk; returns its link relative to the arena's start.
    pub(super) fn place(&mut self, img: &Image, dict: &Dict) -> u64 {
        if img.kids.is_empty() {
            return self.runs(&img.vals, dict);
        }
        let links: Vec<u64> = img.kids.iter().map(|(_, kv)| self.runs(kv, dict)).collect();
        let front = kid_front(&img.kids, &links);
        let at = self.words.len();
        self.fixups.extend(at..at + links.len());
        self.words.extend_from_slice(&front);
        let main = encode_runs(&img.vals, &img.kid_slots(), dict);
        let p = self.words.len();
        self.words.extend_from_slice(&main.words);
        tag(p as u64 * 8, &main, true)
    }
}

/// A new heap chunk whose every slot is `v`.
pub(super) fn uniform_chunk(v: u32, dict: &Dict, bytes: &AtomicUsize) -> u64 {
    let e = encode_runs(&[v; SLOTS], &[0; 4], dict);
    tag(heap_words(&e.words, bytes) as u64, &e, false)
}
