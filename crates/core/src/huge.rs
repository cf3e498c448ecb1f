//! Memory for the tables encoding reads at random, on huge pages where the system allows.
//!
//! Encoding a piece reads the short-token map, the piece cache and the pair map at places no
//! prefetcher can guess: megabytes each (o200k: about 6, 4 and 8 MB). On 4 KB pages nearly every
//! such read also misses the TLB (the core keeps a few thousand page translations, and these
//! tables span several thousand pages), and the page walk itself reads memory. On 2 MB pages the
//! whole working set needs a dozen translations. On held-out o200k text (`encode.py`'s shuffled
//! documents of the shared corpora, the two page sizes timed in turn in one process) this made
//! encoding 19% faster at best (8-20% in medians); cl100k's tables, half the size, gained within the
//! noise. See BENCHMARKS.md, "o200k: where its time goes".
//!
//! [`HugePages`] is an allocator: allocations of at least [`HUGE_PAGE`] bytes are aligned to it,
//! rounded up to whole huge pages and advised (Linux `madvise(MADV_HUGEPAGE)`, which works when
//! transparent huge pages are `always` or `madvise`, the usual defaults); smaller ones, and every
//! allocation elsewhere, are plain. The advice is only a hint: the contents are the same either way.
//! `HF_BPE_HUGE_PAGES=0` in the environment (read at each such allocation) leaves them on ordinary
//! pages: for memory-tight systems (a table rounds up to whole 2 MB pages), and for measuring.

use std::alloc::Layout;
use std::ptr::NonNull;

use allocator_api2::alloc::{AllocError, Allocator, Global};

/// The huge page size of x86-64 and of most arm64 kernels.
pub const HUGE_PAGE: usize = 2 << 20;

/// Allocates large blocks on huge pages (see the module).
#[derive(Clone, Copy, Debug, Default)]
pub struct HugePages;

/// The layout actually allocated for `layout`, when it is large enough for huge pages.
fn huge_layout(layout: Layout) -> Option<Layout> {
    if layout.size() < HUGE_PAGE {
        return None;
    }
    let size = layout.size().checked_next_multiple_of(HUGE_PAGE)?;
    Layout::from_size_align(size, layout.align().max(HUGE_PAGE)).ok()
}

#[cfg(target_os = "linux")]
fn advise(block: NonNull<u8>, size: usize) {
    if std::env::var_os("HF_BPE_HUGE_PAGES").is_some_and(|value| value == "0") {
        return;
    }
    // SAFETY: the range is one whole allocation of ours; the advice changes no contents and a
    // failure (e.g. huge pages disabled) leaves ordinary pages.
    unsafe {
        libc::madvise(block.as_ptr().cast(), size, libc::MADV_HUGEPAGE);
    }
}

#[cfg(not(target_os = "linux"))]
fn advise(_block: NonNull<u8>, _size: usize) {}

/// A block for `layout` from `allocate` (one of the global allocator's methods): a huge-page one,
/// advised, when `layout` is large enough.
fn allocate_with(
    layout: Layout,
    allocate: impl Fn(Layout) -> Result<NonNull<[u8]>, AllocError>,
) -> Result<NonNull<[u8]>, AllocError> {
    let Some(huge) = huge_layout(layout) else {
        return allocate(layout);
    };
    let block = allocate(huge)?;
    advise(block.cast(), huge.size());
    Ok(block)
}

// SAFETY: blocks come from the global allocator with the layout `huge_layout` gives, which is a
// pure function of the requested layout (and gives itself back for any size between the requested
// one and the block's), so `deallocate` frees each with the layout it was made with.
unsafe impl Allocator for HugePages {
    fn allocate(&self, layout: Layout) -> Result<NonNull<[u8]>, AllocError> {
        allocate_with(layout, |layout| Global.allocate(layout))
    }

    fn allocate_zeroed(&self, layout: Layout) -> Result<NonNull<[u8]>, AllocError> {
        allocate_with(layout, |layout| Global.allocate_zeroed(layout))
    }

    unsafe fn deallocate(&self, ptr: NonNull<u8>, layout: Layout) {
        // SAFETY: `ptr` was allocated by `allocate` with this `layout`, so with `huge_layout`'s.
        unsafe { Global.deallocate(ptr, huge_layout(layout).unwrap_or(layout)) }
    }
}

/// A slice of `len` copies of `value` in [`HugePages`] memory.
pub fn filled<T: Clone>(value: T, len: usize) -> allocator_api2::boxed::Box<[T], HugePages> {
    let mut items = allocator_api2::vec::Vec::with_capacity_in(len, HugePages);
    items.resize(len, value);
    items.into_boxed_slice()
}

/// A zeroed block of `size` bytes in [`HugePages`] memory that is never freed, for objects that
/// must outlive anything that could still point at them (the Python bindings' shared ints); `None`
/// when the system has no memory for it.
pub fn leaked_block(size: usize) -> Option<NonNull<u8>> {
    let layout = Layout::from_size_align(size.max(1), 64).ok()?;
    HugePages.allocate_zeroed(layout).ok().map(NonNull::cast)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn large_blocks_are_aligned_to_huge_pages_and_small_ones_are_not_rounded() {
        let large = filled(7u64, HUGE_PAGE / 8 + 1);
        assert_eq!(large.as_ptr() as usize % HUGE_PAGE, 0);
        assert!(large.iter().all(|&value| value == 7));
        let small = filled(1u8, 100);
        assert_eq!(small.len(), 100);
        assert_eq!(huge_layout(Layout::new::<[u8; 100]>()), None);
        let layout = Layout::from_size_align(HUGE_PAGE + 1, 8).unwrap();
        assert_eq!(
            huge_layout(layout),
            Some(Layout::from_size_align(2 * HUGE_PAGE, HUGE_PAGE).unwrap())
        );
    }

    #[test]
    fn a_block_is_freed_with_its_own_layout_whatever_size_within_it_the_caller_gives() {
        for (size, align) in [
            (HUGE_PAGE, 8),
            (HUGE_PAGE + 1, 16),
            (3 * HUGE_PAGE - 5, 64),
            (5 * HUGE_PAGE, 4096),
        ] {
            let requested = Layout::from_size_align(size, align).unwrap();
            let block = huge_layout(requested).unwrap();
            assert_eq!(block.size() % HUGE_PAGE, 0);
            assert!(block.size() >= size && block.align() >= align);
            for within in [size, size + 1, (size + block.size()) / 2, block.size()] {
                let given = Layout::from_size_align(within.min(block.size()), align).unwrap();
                assert_eq!(
                    huge_layout(given),
                    Some(block),
                    "{size} bytes freed as {within}"
                );
            }
        }
    }

    #[test]
    fn a_leaked_block_is_zeroed_and_aligned_to_huge_pages() {
        let block = leaked_block(HUGE_PAGE).expect("memory for one huge page");
        assert_eq!(block.as_ptr() as usize % HUGE_PAGE, 0);
        // SAFETY: the block holds HUGE_PAGE bytes and is never freed.
        let bytes = unsafe { std::slice::from_raw_parts(block.as_ptr(), HUGE_PAGE) };
        assert!(bytes.iter().all(|&byte| byte == 0));
    }

    #[test]
    fn a_map_on_huge_pages_grows_and_finds_everything() {
        let mut map: hashbrown::HashMap<u64, u64, rustc_hash::FxBuildHasher, HugePages> =
            hashbrown::HashMap::with_hasher_in(rustc_hash::FxBuildHasher, HugePages);
        for key in 0..300_000u64 {
            map.insert(key.wrapping_mul(0x9E37_79B9_7F4A_7C15), key);
        }
        assert!((0..300_000u64)
            .all(|key| map.get(&key.wrapping_mul(0x9E37_79B9_7F4A_7C15)) == Some(&key)));
        let copy = map.clone();
        drop(map);
        assert_eq!(copy.len(), 300_000);
    }
}
