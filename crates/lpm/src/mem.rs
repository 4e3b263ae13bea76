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
///
/// On Linux a slice of at least 2 MiB is its own anonymous mapping, advised with
/// `MADV_HUGEPAGE` before anything touches it, so its first writes fault in 2 MiB pages
/// (THP set to `madvise` or `always`). Advice given after the memory is touched (and
/// `alloc_zeroed` of an over-aligned layout writes its zeroes itself) leaves it on
/// 4 KiB pages until `khugepaged` collapses them, seconds to minutes later.
pub struct HugeSlice<T> {
    ptr: *mut T,
    len: usize,
    layout: Layout,
}

/// Whether a slice of `layout` is a mapping of its own (see [`map_huge`]) rather than a
/// heap block.
fn is_mapped(layout: Layout) -> bool {
    cfg!(target_os = "linux") && layout.align() == HUGE_PAGE
}

// SAFETY: `HugeSlice` owns its elements like a `Box<[T]>` does.
unsafe impl<T: Send> Send for HugeSlice<T> {}
// SAFETY: shared access only hands out `&[T]`.
unsafe impl<T: Sync> Sync for HugeSlice<T> {}

/// A fresh anonymous mapping of `size` bytes (a multiple of [`HUGE_PAGE`]) starting on a
/// 2 MiB boundary and advised as huge-page memory, or null if the kernel refuses.
#[cfg(target_os = "linux")]
fn map_huge(size: usize) -> *mut u8 {
    let span = size + HUGE_PAGE;
    // SAFETY: an anonymous private mapping at an address of the kernel's choosing
    // touches no existing memory.
    let raw = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            span,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if raw == libc::MAP_FAILED {
        return std::ptr::null_mut();
    }
    let raw = raw as usize;
    let start = raw.next_multiple_of(HUGE_PAGE);
    // SAFETY: both ranges lie inside the mapping just made and outside
    // `start..start + size` (page-aligned: the mapping and HUGE_PAGE are); unmapping
    // them leaves exactly that range. MADV_HUGEPAGE only changes how the kernel backs
    // the range; its failure (no THP) is harmless.
    unsafe {
        if start > raw {
            libc::munmap(raw as *mut libc::c_void, start - raw);
        }
        let tail = raw + span - (start + size);
        if tail > 0 {
            libc::munmap((start + size) as *mut libc::c_void, tail);
        }
        libc::madvise(start as *mut libc::c_void, size, libc::MADV_HUGEPAGE);
    }
    start as *mut u8
}

/// Elsewhere slices are heap blocks (see [`HugeSlice::new`]): never called.
#[cfg(not(target_os = "linux"))]
fn map_huge(_size: usize) -> *mut u8 {
    std::ptr::null_mut()
}

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
        let ptr = if is_mapped(layout) {
            map_huge(layout.size()) as *mut T
        } else {
            // SAFETY: the layout has a non-zero size.
            unsafe { alloc_zeroed(layout) as *mut T }
        };
        if ptr.is_null() {
            handle_alloc_error(layout);
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
        if is_mapped(self.layout) {
            // SAFETY: `new` mapped exactly `layout.size()` bytes at `ptr`; elements need
            // no drop.
            #[cfg(target_os = "linux")]
            unsafe {
                libc::munmap(self.ptr as *mut libc::c_void, self.layout.size());
            }
            return;
        }
        // SAFETY: allocated in `new` with exactly this layout; elements need no drop.
        unsafe { dealloc(self.ptr as *mut u8, self.layout) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slice_of_2_mib_or_more_is_on_2_mib_boundaries_and_holds_its_values() {
        let len = HUGE_PAGE / 8 + 3;
        let s = HugeSlice::new(len, |i| i as u64 * 3);
        assert_eq!(s.as_ptr() as usize % HUGE_PAGE, 0);
        assert_eq!(s.bytes(), 2 * HUGE_PAGE);
        assert_eq!(s.len(), len);
        assert!(s.iter().enumerate().all(|(i, &v)| v == i as u64 * 3));
        let small = HugeSlice::new(100, |i| i as u32);
        assert_eq!(small.as_ptr() as usize % 64, 0);
        assert_eq!(small[99], 99);
    }

    /// `thp_fault_fallback` of /proc/vmstat: huge-page faults the kernel could not serve.
    #[cfg(target_os = "linux")]
    fn thp_fallbacks() -> u64 {
        let vmstat = std::fs::read_to_string("/proc/vmstat").unwrap_or_default();
        vmstat
            .lines()
            .find_map(|l| l.strip_prefix("thp_fault_fallback "))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0)
    }

    /// A large slice is written through huge pages: the advice comes before the first
    /// touch (advised after `alloc_zeroed` had written its zeroes, the slice stayed on
    /// 4 KiB pages until `khugepaged` came by). Checked where THP is on for advised
    /// memory, unless the kernel had no huge page to give at the time.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_large_slice_is_backed_by_huge_pages_where_the_kernel_has_them() {
        let thp = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled").unwrap_or_default();
        if !thp.contains("[madvise]") && !thp.contains("[always]") {
            eprintln!("THP is off here ({thp:?}): nothing to check");
            return;
        }
        let fallbacks = thp_fallbacks();
        let s = HugeSlice::new(HUGE_PAGE / 8, |i| i as u64);
        let at = s.as_ptr() as usize;
        let smaps = std::fs::read_to_string("/proc/self/smaps").expect("smaps");
        let mut inside = false;
        let mut huge_kb = None;
        for line in smaps.lines() {
            let range = line.split_once(' ').and_then(|(r, _)| r.split_once('-'));
            if let Some((Ok(lo), Ok(hi))) =
                range.map(|(lo, hi)| (usize::from_str_radix(lo, 16), usize::from_str_radix(hi, 16)))
            {
                inside = (lo..hi).contains(&at);
                continue;
            }
            if inside {
                if let Some(v) = line.strip_prefix("AnonHugePages:") {
                    huge_kb = v.trim().trim_end_matches("kB").trim().parse::<u64>().ok();
                }
            }
        }
        let huge_kb = huge_kb.expect("the slice's mapping in /proc/self/smaps");
        if huge_kb == 0 && thp_fallbacks() > fallbacks {
            eprintln!("the kernel had no huge page to give: nothing to check");
            return;
        }
        assert!(
            huge_kb >= 2048,
            "the slice is on 4 KiB pages ({huge_kb} kB in huge pages)"
        );
    }
}
