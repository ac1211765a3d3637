//! Memory for the state cache's table in transparent huge pages.
//!
//! A cache of millions of keys is a table of a hundred megabytes or more,
//! read at random: each lookup's bucket is on a page of its own, and with
//! 4 KiB pages the CPU walks the page tables for nearly every one (in a
//! virtual machine, the guest's and the host's). A table in 2 MiB pages
//! needs a few dozen translations, which the TLB holds.
//!
//! The process's allocator asks for no huge pages (the kernel zeroing fresh
//! 2 MiB pages for its short-lived buffers cost more than they saved; see
//! the `weir` binary's `main.rs`), so a large table gets a mapping of its
//! own, advised `MADV_HUGEPAGE` before it is touched and unmapped when
//! freed: zeroed once, read for the table's whole life.

use std::alloc::Layout;
use std::ptr::NonNull;

use allocator_api2::alloc::{AllocError, Allocator, Global};
use rustix::mm::{madvise, mmap_anonymous, munmap, Advice, MapFlags, ProtFlags};

/// A huge page's size on x86_64 and aarch64 (4 KiB base pages).
const HUGE_PAGE: usize = 2 << 20;

/// The smallest table given a mapping of its own: below it, a table
/// spans few pages and is usually in the CPU's caches anyway.
const SMALLEST_MAPPED: usize = 8 << 20;

/// Where Linux says which transparent huge page mode the system is in.
const THP_MODE: &str = "/sys/kernel/mm/transparent_hugepage/enabled";

/// `prctl(PR_SET_THP_DISABLE, 1, PR_THP_DISABLE_EXCEPT_ADVISED)` (Linux
/// 6.18): huge pages only where `MADV_HUGEPAGE` asks for them.
const PR_THP_DISABLE_EXCEPT_ADVISED: libc::c_ulong = 1 << 1;

/// Let memory advised `MADV_HUGEPAGE` (the large tables) have huge pages
/// in a process whose allocator turned them off for all of it, and keep
/// them off for the rest. Where the kernel cannot tell the two apart (before
/// 6.18), they are turned back on only if the system gives them to advised
/// memory alone (mode `madvise`); in mode `always` every allocation would
/// get them, so they stay off and the tables use small pages.
pub fn allow_advised_huge_pages() {
    let disable: libc::c_ulong = 1;
    let unused: libc::c_ulong = 0;
    // SAFETY: this prctl only sets the process's huge page policy.
    #[allow(unsafe_code)]
    let only_advised = unsafe {
        libc::prctl(
            libc::PR_SET_THP_DISABLE,
            disable,
            PR_THP_DISABLE_EXCEPT_ADVISED,
            unused,
            unused,
        )
    } == 0;
    if only_advised {
        return;
    }
    let modes = std::fs::read_to_string(THP_MODE).unwrap_or_default();
    if selected_mode(&modes) == Some("madvise") {
        let _ = rustix::thread::disable_transparent_huge_pages(false);
    }
}

/// The mode selected among `modes` as [`THP_MODE`] lists them (`always
/// [madvise] never`): the one in brackets.
fn selected_mode(modes: &str) -> Option<&str> {
    Some(modes.split_once('[')?.1.split_once(']')?.0)
}

/// The slot table's allocator: mappings advised for huge pages for large
/// tables, the global allocator for the rest.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct TableAllocator;

impl TableAllocator {
    /// Whether `layout` gets a mapping of its own (else the global
    /// allocator's memory).
    fn mapped(layout: Layout) -> bool {
        layout.size() >= SMALLEST_MAPPED && layout.align() <= HUGE_PAGE
    }

    /// The length of the mapping for `layout` (whole huge pages).
    fn mapping_len(layout: Layout) -> usize {
        layout.size().next_multiple_of(HUGE_PAGE)
    }
}

// SAFETY: memory handed out is valid for `layout` until deallocated with
// the same layout: a mapping of at least its size, aligned to a huge page
// (which satisfies any alignment up to it), or the global allocator's.
#[allow(unsafe_code)]
unsafe impl Allocator for TableAllocator {
    fn allocate(&self, layout: Layout) -> Result<NonNull<[u8]>, AllocError> {
        if !Self::mapped(layout) {
            return Global.allocate(layout);
        }
        let len = Self::mapping_len(layout);
        // Over-map by a huge page, then unmap the ends, so the mapping
        // starts on a huge page boundary.
        let padded = len + HUGE_PAGE;
        // SAFETY: a fresh anonymous mapping aliases nothing.
        let base = unsafe {
            mmap_anonymous(
                std::ptr::null_mut(),
                padded,
                ProtFlags::READ | ProtFlags::WRITE,
                MapFlags::PRIVATE,
            )
        }
        .map_err(|_| AllocError)?;
        let start = (base as usize).next_multiple_of(HUGE_PAGE);
        let head = start - base as usize;
        let tail = padded - head - len;
        // SAFETY: the trimmed ends are parts of the mapping just made,
        // outside what is handed out; advice changes no contents.
        unsafe {
            if head > 0 {
                let _ = munmap(base, head);
            }
            if tail > 0 {
                let _ = munmap((start + len) as *mut _, tail);
            }
            // Without huge pages (none free, or disabled) the table works
            // as well in small ones: the advice's failure is no error.
            let _ = madvise(start as *mut _, len, Advice::LinuxHugepage);
        }
        let start = NonNull::new(start as *mut u8).ok_or(AllocError)?;
        Ok(NonNull::slice_from_raw_parts(start, layout.size()))
    }

    unsafe fn deallocate(&self, ptr: NonNull<u8>, layout: Layout) {
        if Self::mapped(layout) {
            // SAFETY: `ptr` is the start of a mapping of this length made
            // by `allocate` for this layout.
            unsafe {
                let _ = munmap(ptr.as_ptr().cast(), Self::mapping_len(layout));
            }
        } else {
            // SAFETY: allocated by the global allocator with this layout.
            unsafe { Global.deallocate(ptr, layout) }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_large_table_gets_a_mapping_on_a_huge_page_boundary() {
        let layout = Layout::from_size_align(SMALLEST_MAPPED + 100, 32).unwrap();
        let memory = TableAllocator.allocate(layout).unwrap();
        assert_eq!(memory.len(), layout.size());
        let start = memory.cast::<u8>();
        assert_eq!(start.as_ptr() as usize % HUGE_PAGE, 0);
        // SAFETY: both ends are inside the allocation, which is freed
        // with its layout and not used after.
        #[allow(unsafe_code)]
        unsafe {
            start.as_ptr().write(1);
            start.as_ptr().add(layout.size() - 1).write(2);
            assert_eq!(
                (start.as_ptr().read(), start.as_ptr().add(layout.size() - 1).read()),
                (1, 2)
            );
            TableAllocator.deallocate(start, layout);
        }
    }

    #[test]
    fn a_small_table_comes_from_the_global_allocator() {
        let layout = Layout::from_size_align(4096, 32).unwrap();
        let memory = TableAllocator.allocate(layout).unwrap();
        assert_eq!(memory.len(), layout.size());
        // SAFETY: allocated just now with this layout.
        #[allow(unsafe_code)]
        unsafe {
            TableAllocator.deallocate(memory.cast(), layout);
        }
    }

    #[test]
    fn reads_the_selected_mode() {
        assert_eq!(selected_mode("always [madvise] never\n"), Some("madvise"));
        assert_eq!(selected_mode("[always] madvise never\n"), Some("always"));
        assert_eq!(selected_mode(""), None);
    }
}
