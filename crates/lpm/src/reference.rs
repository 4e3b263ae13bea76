//! A trivially correct longest-prefix match by linear scan, for tests.

use crate::Key;

/// Routes in a vector; lookups scan all of them.
#[derive(Clone, Debug)]
pub struct Naive<K: Key> {
    routes: Vec<(K, u8, u32)>,
}

/// The IPv4 reference.
pub type NaiveLpm = Naive<u32>;
/// The IPv6 reference.
pub type NaiveLpm6 = Naive<u128>;

impl<K: Key> Default for Naive<K> {
    fn default() -> Self {
        Naive { routes: Vec::new() }
    }
}

impl<K: Key> Naive<K> {
    pub fn new() -> Self {
        Self::default()
    }

    /// Installs `addr/len -> nh`; returns the previous next hop of that prefix.
    pub fn insert(&mut self, addr: K, len: u8, nh: u32) -> Option<u32> {
        let addr = addr.masked(len);
        for r in self.routes.iter_mut() {
            if r.0 == addr && r.1 == len {
                return Some(std::mem::replace(&mut r.2, nh));
            }
        }
        self.routes.push((addr, len, nh));
        None
    }

    /// Removes `addr/len`; returns its next hop.
    pub fn remove(&mut self, addr: K, len: u8) -> Option<u32> {
        let addr = addr.masked(len);
        let i = self.routes.iter().position(|r| r.0 == addr && r.1 == len)?;
        Some(self.routes.swap_remove(i).2)
    }

    /// The next hop of the longest prefix containing `addr`.
    pub fn lookup(&self, addr: K) -> Option<u32> {
        self.routes
            .iter()
            .filter(|r| addr.masked(r.1) == r.0)
            .max_by_key(|r| r.1)
            .map(|r| r.2)
    }

    /// Every route, sorted by address then length.
    pub fn routes(&self) -> Vec<(K, u8, u32)> {
        let mut v = self.routes.clone();
        v.sort_unstable();
        v
    }

    pub fn len(&self) -> usize {
        self.routes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.routes.is_empty()
    }
}
