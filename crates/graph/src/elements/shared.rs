//! Settings an element's workers share and a handler write replaces.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

/// Locks `m`, going on past a poisoned lock: a worker that panicked while holding it
/// left the data consistent (every change under these locks is a plain store or a
/// whole replacement), and a router must not stop for it.
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Settings shared by the spec and every worker: handler writes replace them under the
/// lock and bump the generation, and a worker copies them again only when the generation
/// it holds is stale (one load per batch).
pub struct SharedSettings<S: Clone> {
    settings: Mutex<S>,
    generation: AtomicU64,
}

impl<S: Clone> SharedSettings<S> {
    pub fn new(settings: S) -> SharedSettings<S> {
        SharedSettings {
            settings: Mutex::new(settings),
            generation: AtomicU64::new(0),
        }
    }

    /// The settings and the generation they are at least as new as.
    pub fn snapshot(&self) -> (u64, S) {
        let g = self.generation.load(Ordering::Acquire);
        (g, self.read())
    }

    pub fn read(&self) -> S {
        lock(&self.settings).clone()
    }

    pub fn write(&self, f: impl FnOnce(&mut S)) {
        f(&mut self.settings.lock().unwrap_or_else(|e| e.into_inner()));
        self.generation.fetch_add(1, Ordering::Release);
    }

    #[inline]
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }
}
