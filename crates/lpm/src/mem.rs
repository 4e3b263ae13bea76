//! Large, fixed-size arrays backed by transparent huge pages where the kernel allows it:
//! the first level and the node arena are read at random, and with 4 KiB pages nearly
//! every lookup would also miss the TLB.

use std::alloc::{alloc_zeroed, dealloc, handle_alloc_error, Layout};
use std::ops::Deref;

const HUGE_PAGE: usize = 2 << 20;

/// Starts fetching the cache line holding address `p` into L1 (a hint: any address will
/// do, none faults).
#[inline(always)]
pub(crate) fn prefetch(p: usize) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint; it never faults, whatever the address.
    unsafe {
        std::arch::x86_64::_mm_prefetch(p as *const i8, std::arch::x86_64::_MM_HINT_T0);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// A boxed slice of `T` aligned to 2 MiB (when at least that large) and advised to the
/// kernel as huge-page memory.
pub struct HugeSlice<T> {
    ptr: *mut T,
    len: usize,
    layout: Layout,
}

// SAFETY: `HugeSlice` owns its elements like a `Box<[T]>` does.
unsafe impl<T: Send> Send for HugeSlice<T> {}
// SAFETY: shared access only hands out `&[T]`.
unsafe impl<T: Sync> Sync for HugeSlice<T> {}

impl<T> HugeSlice<T> {
    /// `len` elements, each `init(i)`. `T` must not need dropping (atomics, integers).
    pub fn new(len: usize, mut init: impl FnMut(usize) -> T) -> HugeSlice<T> {
        const { assert!(!std::mem::needs_drop::<T>()) };
        let bytes = (len * std::mem::size_of::<T>()).max(1);
        let align = if bytes >= HUGE_PAGE {
            HUGE_PAGE
        } else {
            64.max(std::mem::align_of::<T>())
        };
        let layout = match Layout::from_size_align(bytes.next_multiple_of(align), align) {
            Ok(l) => l,
            Err(_) => panic!("HugeSlice: {} bytes is too large", bytes),
        };
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { alloc_zeroed(layout) } as *mut T;
        if ptr.is_null() {
            handle_alloc_error(layout);
        }
        #[cfg(target_os = "linux")]
        if align == HUGE_PAGE {
            // SAFETY: the range is exactly the allocation just made; MADV_HUGEPAGE only
            // changes how the kernel backs it. Failure (no THP) is harmless.
            unsafe {
                libc::madvise(ptr as *mut libc::c_void, layout.size(), libc::MADV_HUGEPAGE);
            }
        }
        for i in 0..len {
            // SAFETY: `i < len` is inside the allocation, which is suitably aligned.
            unsafe { ptr.add(i).write(init(i)) };
        }
        HugeSlice { ptr, len, layout }
    }

    pub fn bytes(&self) -> usize {
        self.layout.size()
    }

    /// Whether `p` points into this slice.
    pub fn contains(&self, p: *const T) -> bool {
        let start = self.ptr as usize;
        (start..start + self.len * std::mem::size_of::<T>()).contains(&(p as usize))
    }

    /// Mutable access to the elements.
    pub fn as_mut_slice(&mut self) -> &mut [T] {
        // SAFETY: `ptr` holds `len` initialised elements and `&mut self` is exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

impl<T> Deref for HugeSlice<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        // SAFETY: `ptr` holds `len` initialised elements for the life of `self`.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

impl<T> Drop for HugeSlice<T> {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with exactly this layout; elements need no drop.
        unsafe { dealloc(self.ptr as *mut u8, self.layout) };
    }
}
