//! A table's first level behind one atomic pointer.
//!
//! Most changes store into the first level in place, one entry each. A prefix shorter
//! than the first level's stride spans many entries, and storing them one by one would
//! let a reader see the change under one entry and not yet under the next; so the writer
//! copies the first level, changes the copy and publishes it with one pointer store.
//! Readers load the pointer once per call and keep to that copy for the whole call.
//! A replaced copy is kept, once every reader that could hold it has unpinned, for the
//! next change to write over: a fresh one costs its page faults (0.3-1.5 ms in this
//! machine's VMs, against tens of microseconds to copy into one already mapped).

use crossbeam_epoch::{self as epoch, Atomic, Guard, Owned};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

/// What a first level must do to be copied.
pub(crate) trait Level: Send + Sized + 'static {
    /// A new first level holding `self`'s entries.
    fn duplicate(&self) -> Self;
    /// Gives `self` the entries of `from`.
    fn copy_from(&mut self, from: &Self);
    /// Bytes it takes.
    fn bytes(&self) -> usize;
}

pub(crate) struct FirstLevel<T: Level> {
    ptr: Atomic<T>,
    /// A replaced first level no reader holds any more, to be written over.
    spare: Arc<Mutex<Option<Box<T>>>>,
}

impl<T: Level> FirstLevel<T> {
    pub(crate) fn new(first: T) -> Self {
        FirstLevel {
            ptr: Atomic::new(first),
            spare: Arc::new(Mutex::new(None)),
        }
    }

    /// The current first level, valid while `guard` is pinned (and the table lives:
    /// dropping it frees the current first level at once).
    #[inline(always)]
    pub(crate) fn load<'g>(&'g self, guard: &'g Guard) -> &'g T {
        // SAFETY: the pointer is never null (set by `new`, replaced only by `replace`
        // with another allocation), and a replaced value is dropped or reused only
        // after every guard pinned when it was unlinked has unpinned, `guard` among them.
        unsafe { self.ptr.load(Ordering::Acquire, guard).deref() }
    }

    /// The current first level, for the owner of the table.
    pub(crate) fn get_mut(&mut self) -> &mut T {
        // SAFETY: `&mut self`: no reader or writer holds a reference into the table, so
        // no value is replaced or dropped while the reference lives; never null.
        unsafe { self.ptr.load(Ordering::Relaxed, epoch::unprotected()).deref_mut() }
    }

    /// Bytes of the replaced first level kept for the next copy (none until a change
    /// has replaced one).
    pub(crate) fn spare_bytes(&self) -> usize {
        let spare = self.spare.lock().unwrap_or_else(|p| p.into_inner());
        spare.as_ref().map_or(0, |s| s.bytes())
    }

    /// A copy of the current first level, not yet shared, to change and then publish
    /// with [`Self::replace`]. Only the table's one writer calls this.
    pub(crate) fn copy(&self, guard: &Guard) -> Box<T> {
        let current = self.load(guard);
        let spare = self.spare.lock().unwrap_or_else(|p| p.into_inner()).take();
        match spare {
            Some(mut s) => {
                s.copy_from(current);
                s
            }
            None => Box::new(current.duplicate()),
        }
    }

    /// Publishes `first` with one store. The value it replaces is kept for a later
    /// [`Self::copy`] once every reader pinned now has unpinned. Only the table's one
    /// writer calls this.
    pub(crate) fn replace(&self, first: Box<T>, guard: &Guard) {
        let old = self.ptr.swap(Owned::from(first), Ordering::AcqRel, guard);
        // (An address: the value may not be owned until the readers are gone.)
        let old = old.as_raw() as usize;
        let spare = self.spare.clone();
        guard.defer(move || {
            // SAFETY: unlinked by the swap above, so this runs after every reader that
            // could hold it unpinned; it came from an `Owned` (`new` or `replace`) and is
            // taken back once, here.
            let old = unsafe { Owned::from_raw(old as *mut T) }.into_box();
            *spare.lock().unwrap_or_else(|p| p.into_inner()) = Some(old);
        });
        // (Into the global queue now, where the deferred work of the writer's thread
        // would otherwise wait for 64 more items: the spare is back after the grace
        // period, usually by the next change.)
        guard.flush();
    }
}

impl<T: Level> Drop for FirstLevel<T> {
    fn drop(&mut self) {
        // SAFETY: `&mut self`: nothing else refers to the value, which is dropped once.
        unsafe {
            drop(
                self.ptr
                    .load(Ordering::Relaxed, epoch::unprotected())
                    .into_owned(),
            )
        };
    }
}

/// A slice of atomic words is a first level (IPv4's links; IPv6's links and short-prefix
/// values, see `runs6::First`).
macro_rules! atomic_slice_level {
    ($($atomic:ty),*) => {$(
        impl Level for crate::mem::HugeSlice<$atomic> {
            fn duplicate(&self) -> Self {
                crate::mem::HugeSlice::new(self.len(), |i| <$atomic>::new(self[i].load(Ordering::Relaxed)))
            }

            fn copy_from(&mut self, from: &Self) {
                for (to, from) in self.as_mut_slice().iter_mut().zip(from.iter()) {
                    *to.get_mut() = from.load(Ordering::Relaxed);
                }
            }

            fn bytes(&self) -> usize {
                crate::mem::HugeSlice::bytes(self)
            }
        }
    )*};
}

atomic_slice_level!(std::sync::atomic::AtomicU64, std::sync::atomic::AtomicU32);
