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
//! [`HugePages`] is an allocator: on Linux, allocations of at least [`HUGE_PAGE`] bytes are fresh
//! mappings of their own, aligned to it, rounded up to whole huge pages and advised
//! (`madvise(MADV_HUGEPAGE)`, which works when transparent huge pages are `always` or `madvise`,
//! the usual defaults) before anything touches them, so that their first touch faults in huge
//! pages. (From `malloc`, such a block can be memory the heap had already touched on 4 KB pages,
//! where the advice only lets the kernel's background thread collapse it, slowly: a 16 MB table
//! was seen with 2 MB of it on huge pages.) Smaller ones, and every allocation elsewhere, are
//! plain. The advice is only a hint: the contents are the same either way.
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

/// Advises the `len` bytes at `start` (whole pages) onto huge pages, unless `HF_BPE_HUGE_PAGES=0`
/// (read at each call). The advice changes no contents; a failure (e.g. huge pages disabled) leaves
/// ordinary pages.
#[cfg(target_os = "linux")]
fn advise(start: usize, len: usize) {
    if std::env::var_os("HF_BPE_HUGE_PAGES").is_some_and(|value| value == "0") {
        return;
    }
    // SAFETY: the caller gives whole pages of memory of its own; advice reads and writes nothing.
    unsafe {
        libc::madvise(start as *mut libc::c_void, len, libc::MADV_HUGEPAGE);
    }
}

/// A fresh anonymous mapping of `huge` (a layout from [`huge_layout`]), aligned to it, advised;
/// zeroed, as every fresh mapping is.
#[cfg(target_os = "linux")]
fn map(huge: Layout) -> Result<NonNull<[u8]>, AllocError> {
    let (size, align) = (huge.size(), huge.align());
    let span = size.checked_add(align).ok_or(AllocError)?;
    // SAFETY: a new private anonymous mapping at an address of the kernel's choosing touches no
    // existing memory.
    let base = unsafe {
        libc::mmap(std::ptr::null_mut(), span, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1, 0)
    };
    if base == libc::MAP_FAILED {
        return Err(AllocError);
    }
    // The aligned block starts within `align` bytes of the mapping's start (the span's slack); what
    // lies outside the block (whole pages: the mapping and `align` are page-aligned) is unmapped.
    let start = (base as usize).next_multiple_of(align);
    let (head, tail) = (start - base as usize, span - (start - base as usize) - size);
    // SAFETY: both ranges are parts of the mapping just made, outside the block kept.
    unsafe {
        if head > 0 {
            libc::munmap(base, head);
        }
        if tail > 0 {
            libc::munmap((start + size) as *mut libc::c_void, tail);
        }
    }
    advise(start, size);
    let block = NonNull::new(start as *mut u8).ok_or(AllocError)?;
    Ok(NonNull::slice_from_raw_parts(block, size))
}

/// A block for `layout`: on Linux a mapping of its own ([`map`], zeroed) when `layout` is large
/// enough, else one from `allocate` (one of the global allocator's methods), of the huge layout
/// when there is one.
fn allocate_with(
    layout: Layout,
    allocate: impl Fn(Layout) -> Result<NonNull<[u8]>, AllocError>,
) -> Result<NonNull<[u8]>, AllocError> {
    match huge_layout(layout) {
        #[cfg(target_os = "linux")]
        Some(huge) => map(huge),
        #[cfg(not(target_os = "linux"))]
        Some(huge) => allocate(huge),
        None => allocate(layout),
    }
}

// SAFETY: on Linux, large blocks are mappings made for the layout `huge_layout` gives, which is a
// pure function of the requested layout (and gives itself back for any size between the requested
// one and the block's), so `deallocate` unmaps each with the size it was mapped with; the others
// come from the global allocator, and go back to it with the layout they were made with.
unsafe impl Allocator for HugePages {
    fn allocate(&self, layout: Layout) -> Result<NonNull<[u8]>, AllocError> {
        allocate_with(layout, |layout| Global.allocate(layout))
    }

    fn allocate_zeroed(&self, layout: Layout) -> Result<NonNull<[u8]>, AllocError> {
        allocate_with(layout, |layout| Global.allocate_zeroed(layout))
    }

    unsafe fn deallocate(&self, ptr: NonNull<u8>, layout: Layout) {
        match huge_layout(layout) {
            #[cfg(target_os = "linux")]
            // SAFETY: `ptr` is a block `map` made of `huge.size()` bytes.
            Some(huge) => unsafe {
                libc::munmap(ptr.as_ptr().cast(), huge.size());
            },
            #[cfg(not(target_os = "linux"))]
            // SAFETY: `ptr` was allocated by the global allocator with `huge`.
            Some(huge) => unsafe { Global.deallocate(ptr, huge) },
            // SAFETY: `ptr` was allocated by the global allocator with `layout`.
            None => unsafe { Global.deallocate(ptr, layout) },
        }
    }
}

/// Advises the whole huge pages inside `items` (Linux), for a large buffer of the global allocator
/// about to be written once from end to end (an output array): pages not yet touched then fault in
/// as huge pages, a few hundred faults instead of one per 4 KB. Contents are unchanged.
pub fn advise_within<T>(items: &[T]) {
    #[cfg(target_os = "linux")]
    {
        let start = items.as_ptr() as usize;
        let end = start + std::mem::size_of_val(items);
        let (first, last) = (start.next_multiple_of(HUGE_PAGE), end / HUGE_PAGE * HUGE_PAGE);
        if last > first {
            advise(first, last - first);
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = items;
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

    /// The mappings of this process whose range holds `address`, from `/proc/self/maps`.
    #[cfg(target_os = "linux")]
    fn mappings_holding(address: usize) -> Vec<(usize, usize)> {
        std::fs::read_to_string("/proc/self/maps")
            .expect("/proc/self/maps")
            .lines()
            .filter_map(|line| {
                let (start, end) = line.split_whitespace().next()?.split_once('-')?;
                Some((usize::from_str_radix(start, 16).ok()?, usize::from_str_radix(end, 16).ok()?))
            })
            .filter(|&(start, end)| (start..end).contains(&address))
            .collect()
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_large_block_is_a_fresh_mapping_of_its_own_and_is_unmapped_when_freed() {
        // A block the heap had touched before could sit on 4 KB pages whatever the advice.
        let size = 3 * HUGE_PAGE + 100;
        let block = filled(1u8, size);
        let start = block.as_ptr() as usize;
        let mappings = mappings_holding(start);
        assert_eq!(mappings.len(), 1);
        let (first, end) = mappings[0];
        assert!(first <= start && end >= start + 4 * HUGE_PAGE, "{first:#x}-{end:#x} holds the block");
        assert!(block.iter().all(|&byte| byte == 1));
        drop(block);
        assert!(mappings_holding(start).is_empty() || mappings_holding(start)[0] != (first, end));
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
