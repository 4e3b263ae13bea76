//! Address types (`u32` for IPv4, `u128` for IPv6), the writers' prefix maps and the
//! rule both structures use for changes of prefixes no longer than their first level.

use std::fmt::Debug;
use std::hash::{BuildHasherDefault, Hash, Hasher};

/// Next hop meaning "no route".
pub const NONE: u32 = u32::MAX;

/// An address: a `BITS`-wide unsigned integer whose most significant bit is the first bit
/// of the address.
pub trait Key: Copy + Ord + Eq + Hash + Debug + Send + Sync + 'static {
    /// Address width in bits.
    const BITS: u32;
    /// Widened to `u128` (the value, not left-aligned).
    fn to_u128(self) -> u128;
    /// Narrowed from `u128` (the low `BITS` bits).
    fn from_u128(v: u128) -> Self;
    /// The address with every bit after the first `len` cleared.
    fn masked(self, len: u8) -> Self {
        if len == 0 {
            return Self::from_u128(0);
        }
        let keep = u128::MAX << (Self::BITS - u32::from(len));
        Self::from_u128(self.to_u128() & keep)
    }
}

impl Key for u32 {
    const BITS: u32 = 32;
    #[inline(always)]
    fn to_u128(self) -> u128 {
        u128::from(self)
    }
    #[inline(always)]
    fn from_u128(v: u128) -> Self {
        v as u32
    }
}

impl Key for u128 {
    const BITS: u32 = 128;
    #[inline(always)]
    fn to_u128(self) -> u128 {
        self
    }
    #[inline(always)]
    fn from_u128(v: u128) -> Self {
        v
    }
}

/// A fast hasher for the writer's prefix maps. Keys are masked prefixes whose low bits
/// are mostly zero, so the high half of the product is folded into the low half (the
/// map picks buckets with the low bits).
#[derive(Default, Clone, Copy)]
pub struct PrefixHasher(u64);

const MUL: u64 = 0x9e37_79b9_7f4a_7c15;

impl Hasher for PrefixHasher {
    #[inline]
    fn finish(&self) -> u64 {
        self.0 ^ (self.0 >> 29) ^ (self.0 >> 47)
    }
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut b = [0u8; 8];
            b[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(b));
        }
    }
    #[inline]
    fn write_u32(&mut self, v: u32) {
        self.write_u64(u64::from(v));
    }
    #[inline]
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(23) ^ v).wrapping_mul(MUL);
    }
    #[inline]
    fn write_u128(&mut self, v: u128) {
        self.write_u64(v as u64);
        self.write_u64((v >> 64) as u64);
    }
}

pub type PrefixMap<K> = std::collections::HashMap<K, u32, BuildHasherDefault<PrefixHasher>>;

/// The routes of per-length maps (map `l` holds the prefixes of length `l`), as
/// `(prefix, length, next hop)`.
pub(crate) fn per_length_routes<K: Copy>(maps: &[PrefixMap<K>]) -> impl Iterator<Item = (K, u8, u32)> + '_ {
    maps.iter()
        .enumerate()
        .flat_map(|(l, m)| m.iter().map(move |(&k, &nh)| (k, l as u8, nh)))
}

/// How a change of a prefix no longer than the first level (`len` >= 1) rewrites the
/// first-level slots it spans. Each slot records the length and value of the longest
/// such prefix covering it; the two structures keep those per slot and apply this rule.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ShortChange {
    /// The length and value a slot takes when it [`ShortChange::owns`] the change.
    pub set_len: u8,
    pub set_val: u32,
    /// `Some(len)` for a removal: only slots whose best is that prefix change.
    only_len: Option<u8>,
    len: u8,
}

impl ShortChange {
    /// `key/len` gets next hop `nh`, or is removed (`None`): its slots then fall back
    /// to the longest shorter prefix covering it in `routes` (one map per length) that
    /// is longer than `floor`, or to no route (`none`).
    pub(crate) fn new<K: Key>(
        routes: &[PrefixMap<K>],
        key: K,
        len: u8,
        nh: Option<u32>,
        none: u32,
        floor: u8,
    ) -> ShortChange {
        match nh {
            // Slots whose best is not longer take the new prefix.
            Some(v) => ShortChange {
                set_len: len,
                set_val: v,
                only_len: None,
                len,
            },
            // Slots this prefix owned fall back to the covering prefix.
            None => {
                let cover = (floor + 1..len)
                    .rev()
                    .find_map(|l| routes[l as usize].get(&key.masked(l)).map(|&v| (l, v)));
                let (set_len, set_val) = cover.unwrap_or((0, none));
                ShortChange {
                    set_len,
                    set_val,
                    only_len: Some(len),
                    len,
                }
            }
        }
    }

    /// Whether a slot whose best short prefix has length `slot_len` takes the change.
    pub(crate) fn owns(&self, slot_len: u8) -> bool {
        match self.only_len {
            Some(l) => slot_len == l,
            None => slot_len <= self.len,
        }
    }
}
