//! The core's tuning constants, in one place: each changes speed or memory only, never an id (the
//! tests compare every path with a plain loop). Each says what it trades and how it was chosen.
//! The couplings between them and the code that relies on them are `const` asserts below, so a
//! change that breaks one fails to compile.

/// Pieces (and segments, and symbol runs) longer than this use the linked-list merge (the merge
/// module's `LongMerge`); up to it, the flat loop on the stack. Trades the flat loop's scans, which
/// grow with the square of the length, against the list's setup: at 48 rather than 128, o200k spent
/// 3% fewer estimated cycles on held-out multilingual text (callgrind), mostly on runs of Japanese
/// letters.
pub(crate) const HEAP_THRESHOLD: usize = 48;

/// Long pieces of at least this many symbols try the level loop (a bucket of pairs per priority,
/// merged in whole passes) before the heap; shorter ones, whose buckets would hold a few pairs each,
/// go to the heap at once. Trades a bucket's upkeep against a heap operation per pair.
pub(crate) const LEVELS_FROM: usize = 4096;
/// How many times the level loop may go back to an earlier priority (a merge made a pair that the
/// rule merges before pairs already queued) before handing over to the heap: bounds the passes a
/// vocabulary whose priorities ignore the order tokens were built in can cost.
pub(crate) const LEVEL_RESTARTS: usize = 64;
/// A level whose bucket holds fewer pairs than this is small: one heap operation per pair would cost
/// no more than the bucket's own upkeep.
pub(crate) const SMALL_LEVEL: usize = 16;
/// How many small levels the level loop takes before handing over to the heap (varied text: many
/// priorities with a few pairs each).
pub(crate) const SMALL_LEVELS: usize = 64;

/// The longest piece (in bytes) the piece cache holds. With [`CACHED_IDS`] it sizes a cache slot
/// (2 + 30 + 4 x 8 = 64 bytes, one cache line); longer pieces are rare and merge anyway.
pub const CACHED_PIECE_BYTES: usize = 30;
/// The most ids a cached piece may merge to (see [`CACHED_PIECE_BYTES`]); twice as many when every
/// one is below 65,536 (kept in sixteen bits).
pub const CACHED_IDS: usize = 8;
/// The most bytes of keys and ids each thread's cache keeps of pieces longer than
/// [`CACHED_PIECE_BYTES`] or merging to more ids than a slot holds (`crate::long_pieces`): it
/// starts at [`LONG_PIECES_FIRST`], doubles when full within the growth budget the caches share, and
/// starts over when full at this size; pieces longer than [`LONG_PIECE_MOST`] bytes are merged every
/// time. On the shared corpora 4.5% of o200k's bytes are in pieces of more than 30 bytes (CJK runs,
/// long words), merged at some 3 µs each: a fifth of a seen document's time; and words of 16-30
/// bytes of scripts with few tokens (more than 8 ids with cl100k) an eighth of cl100k's. 4 MB did
/// not hold 4 MB of Japanese Wikipedia's long pieces with cl100k: read again, it started over every
/// pass and merged them all (76 MB/s, `encode_bench`, one text); at 16 MB it holds them (216 MB/s;
/// all the shared corpora, 27 MB: 170 -> 241 MB/s).
pub const LONG_PIECES_BYTES: usize = 16 << 20;
/// The bound a thread's store of long pieces starts with (see [`LONG_PIECES_BYTES`]).
pub const LONG_PIECES_FIRST: usize = 256 << 10;
/// The longest piece (in bytes) kept by `crate::long_pieces`.
pub const LONG_PIECE_MOST: usize = 4096;
/// Slots per piece cache (a power of two): 4.2 MB each, and 128 KB of tags. Trades memory for
/// hits: each doubling saved some 5% of the encoding time on held-out multilingual text with o200k
/// (callgrind, warmed on 6 MB, measured on the next 3 MB).
pub(crate) const CACHE_SLOTS: usize = 1 << 16;
/// The most slots a piece cache grows to (a power of two): 33.6 MB, and 1 MB of tags. It grows only
/// while pieces it dropped come back (see the cache module); on text seen before that does not fit
/// its first size, the largest size encoded the shared corpora with o200k 1.33x faster than the
/// first (`compare_builds.py --seen`, 7.6 MB: 121,000 pieces of up to 30 bytes that are no token).
pub(crate) const CACHE_MAX_SLOTS: usize = 1 << 19;
/// Bytes a thread encodes through the per-piece path before it makes its table of short pieces
/// (`crate::fused`): making one (the model's seed, then the thread's copy: 32 MB for o200k) costs
/// some 0.1-0.2 s (most of it the system finding huge pages), which a one-off short text would pay
/// on top of encoding in microseconds.
pub const FUSED_AFTER: usize = 1 << 18;
/// A piece cache weighs its growth over this many lookups.
pub(crate) const CACHE_WINDOW: usize = 1 << 16;
/// A piece cache grows when more than one lookup in this many missed a piece it had dropped: each
/// such miss is a merge a larger cache would have saved. At one in 8, the two-way sets' conflicts
/// on 10 MB of the shared corpora read again (3.9% of the lookups of pieces of 16-30 bytes) never
/// grew it, and their merges were a tenth of Llama 3's encoding time; at one in 32 it grows until
/// they are rare (with the sets' tags prefetched: Llama 3, one thread, 1.16x; `encode_arrow` of
/// 8 MB seen, o200k 1.21x). Text that fits an eighth of the cache still never grows it, nor does
/// new text (the filter of dropped pieces errs less often than one lookup in 64).
pub(crate) const CACHE_GROW_WHEN: usize = 32;
/// Bytes the piece caches of a process may grow by in total, beyond their first size: a few caches
/// at their largest size, however many threads encode.
pub(crate) const CACHE_GROWTH_BUDGET: usize = 128 << 20;
/// Piece caches per model: more than the threads that usually encode at once (each is allocated on
/// first use, so unused ones cost nothing).
pub(crate) const CACHE_SHARDS: usize = 16;

/// Ids up to this bound are stored densely (a table indexed by id); a sparser vocabulary uses a hash
/// map. Trades up to 16 M entries of memory for a lookup without hashing.
pub(crate) const DENSE_ID_LIMIT: usize = 1 << 24;

/// Tokens longer than this (in bytes) find their splits into two tokens by rolling hash (`Halves`):
/// looking every prefix up is quadratic in the token's length, but faster for short tokens (real
/// tokens are at most 128 bytes).
pub(crate) const LONG_TOKEN: usize = 64;

/// Training merges a pair on several threads (the current rayon pool's) when it occurs in at least
/// this many words; fewer are merged on the calling thread. Trades the threads' start and the
/// summing of their changes against the words each thread merges: on the shared corpora (27 MB,
/// cl100k, vocab 65,536, 2 threads, `train_bench`) the calling thread's CPU time fell from 1.30-1.44 s
/// at 4,096 to 1.07-1.24 s at 1,024, while at 256 the threads' summed CPU time grew by 0.2 s.
/// `tests/test_train_rule.py` builds corpora above it.
pub(crate) const PARALLEL_MERGE_WORDS: usize = 1024;

/// One text of at least this many bytes is cut into parts encoded on several threads
/// (`crate::parallel`); shorter ones are encoded on the calling thread. Trades the hand-off to the
/// pool and the join of the parts' ids against the time saved. Measured with o200k on the shared
/// corpora (release build, 2 threads, interleaved rounds, process CPU time): the parallel path costs
/// some 0.1 ms more CPU per text than the calling thread alone (64 KiB: 0.78-0.81 ms against
/// 0.68 ms), 3% of the 3.4 ms that 256 KiB takes on one thread, which two threads can halve.
pub const PARALLEL_FROM: usize = 1 << 18;
/// Each part of a text cut for several threads holds at least about this many bytes.
pub(crate) const PARALLEL_PART: usize = 1 << 17;
/// Parts proposed per thread of the pool (at most): more parts than threads even out parts that
/// encode at different speeds (CJK text merges slower per byte than English), at the cost of one
/// id list per part to join.
pub(crate) const PARTS_PER_THREAD: usize = 4;

// The flat merge of pieces starting from characters marks, in one `u64`, which of its first
// `HEAP_THRESHOLD` symbols come from a character (bit `i` for symbol `i`).
const _: () = assert!(HEAP_THRESHOLD <= u64::BITS as usize, "HEAP_THRESHOLD must fit the u64 bitmask of merge_from_chars");
// The flat loops need room for at least one pair.
const _: () = assert!(HEAP_THRESHOLD >= 2);
// The level loop is for pieces the flat loop does not take.
const _: () = assert!(LEVELS_FROM > HEAP_THRESHOLD);
// A cache slot's lengths are single bytes.
const _: () = assert!(CACHED_PIECE_BYTES <= u8::MAX as usize);
// Piece caches double from their first size to their largest.
const _: () = assert!(CACHE_SLOTS.is_power_of_two() && CACHE_MAX_SLOTS.is_power_of_two() && CACHE_MAX_SLOTS >= CACHE_SLOTS);
const _: () = assert!(CACHED_IDS <= u8::MAX as usize);
// The cache indexes sets of two slots by masking a hash.
const _: () = assert!(CACHE_SLOTS.is_power_of_two() && CACHE_SLOTS >= 128);
// A text cut for threads has room for two parts.
const _: () = assert!(PARALLEL_FROM >= 2 * PARALLEL_PART);
