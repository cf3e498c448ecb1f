//! Allocations sized by the input, checked before they are made.
//!
//! When an allocation fails, Rust aborts the process: a Python interpreter encoding a 100 MB text
//! under an address-space limit died with SIGABRT instead of raising `MemoryError`. So every
//! allocation whose size follows from the input (the ids of a text, the merge loop's state for a
//! long piece, a split's list of matches, decoded bytes) is reserved with `try_reserve` first.
//! When that fails, the work stops by unwinding with an [`OutOfMemory`] payload
//! ([`std::panic::resume_unwind`]: no panic message is printed), which the Python bindings turn
//! into `MemoryError` naming the input's size. Unwinding leaves every structure as a panic would,
//! which the encoder already survives (a cache locked during one is dropped), and keeps the merge
//! paths free of error plumbing in their hot loops.

use std::fmt;

/// Why work on an input stopped: memory sized by it could not be allocated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OutOfMemory {
    /// The bytes the allocation would have held.
    pub bytes: usize,
    /// What they were for.
    pub what: &'static str,
    /// The size of the input they were sized by, in its own units (`unit`).
    pub input: usize,
    pub unit: &'static str,
}

impl fmt::Display for OutOfMemory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "out of memory: could not allocate {} bytes for {} of {} {}; split the input into smaller \
             parts (or raise the process's memory limit)",
            thousands(self.bytes),
            self.what,
            thousands(self.input),
            self.unit
        )
    }
}

fn thousands(value: usize) -> String {
    let digits = value.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (index, digit) in digits.chars().enumerate() {
        if index > 0 && (digits.len() - index).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

/// Stops the work on this input: unwinds with an [`OutOfMemory`] payload.
#[cold]
#[inline(never)]
pub fn fail(bytes: usize, what: &'static str, input: usize, unit: &'static str) -> ! {
    std::panic::resume_unwind(Box::new(OutOfMemory { bytes, what, input, unit }))
}

/// Makes room in `vec` for `additional` more items, or stops the work ([`fail`]) when that memory
/// cannot be allocated. Free when the room is there: one comparison.
#[inline(always)]
pub fn reserve<T>(vec: &mut Vec<T>, additional: usize, what: &'static str, input: usize, unit: &'static str) {
    if vec.capacity() - vec.len() < additional {
        grow(vec, additional, what, input, unit);
    }
}

#[cold]
#[inline(never)]
fn grow<T>(vec: &mut Vec<T>, additional: usize, what: &'static str, input: usize, unit: &'static str) {
    if vec.try_reserve(additional).is_err() {
        let items = vec.len().saturating_add(additional);
        fail(items.saturating_mul(std::mem::size_of::<T>()), what, input, unit);
    }
}

/// An empty vector with room for `capacity` items, or [`fail`].
pub fn with_capacity<T>(capacity: usize, what: &'static str, input: usize, unit: &'static str) -> Vec<T> {
    let mut vec = Vec::new();
    reserve(&mut vec, capacity, what, input, unit);
    vec
}

/// Checks that `bytes` more can be allocated now (allocating and freeing them), or [`fail`]: for
/// memory that a structure allocates as it grows, such as a queue.
pub fn ensure_headroom(bytes: usize, what: &'static str, input: usize, unit: &'static str) {
    drop(with_capacity::<u8>(bytes, what, input, unit));
}

/// The [`OutOfMemory`] a caught panic carries, if it is one.
pub fn out_of_memory(payload: &(dyn std::any::Any + Send)) -> Option<OutOfMemory> {
    payload.downcast_ref::<OutOfMemory>().copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_allocation_that_cannot_be_made_stops_the_work_with_its_size() {
        let caught = std::panic::catch_unwind(|| {
            with_capacity::<u64>(usize::MAX / 16, "the ids", 12_345_678, "bytes of text");
        })
        .unwrap_err();
        let error = out_of_memory(&*caught).expect("an OutOfMemory payload");
        assert_eq!((error.what, error.input), ("the ids", 12_345_678));
        assert!(error.to_string().contains("for the ids of 12,345,678 bytes of text;"), "{error}");
    }

    #[test]
    fn room_already_there_is_not_allocated_again() {
        let mut vec: Vec<u32> = Vec::with_capacity(10);
        let before = vec.as_ptr();
        reserve(&mut vec, 10, "the ids", 10, "bytes");
        assert_eq!(vec.as_ptr(), before);
        reserve(&mut vec, 11, "the ids", 11, "bytes");
        assert!(vec.capacity() >= 11);
    }
}
