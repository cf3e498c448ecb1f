//! Ids returned as Python lists of ints, cheaply.
//!
//! Every id of a model gets one shared Python int, made on first use: a returned list then holds
//! shared ints instead of allocating an int object per element, which is most of the cost of
//! returning ids and most of their memory (ints are immutable, so sharing is invisible).
//!
//! On CPython with a GIL the shared ints of ids above 256 live in blocks of huge-page memory of our
//! own, in id order, one 32-byte int per id ([`blocks`]): the int of an id sits at an address
//! computed from the id, so filling a list reads no table of pointers. Ids up to 256 are CPython's
//! own small ints, so `ids[0] is 5` holds as for any int CPython makes. Other builds (free-threaded,
//! PyPy, GraalPy) keep a table of ints made by the interpreter.
//!
//! The blocks' ints are immortal, as CPython's small ints are from 3.12 on (their count is the one
//! CPython gives its own immortal objects; on 3.11, which has none, a count of 2**62, which no
//! process lives to release down to zero): a list takes no reference to them, so filling one
//! writes to no int, only to the list's own slots. `sys.getrefcount` of such an id reports that
//! count.
//!
//! A large batch's lists are filled on the thread pool, with the GIL released: the workers only
//! store pointers to shared ints (they never touch a reference count, which other Python threads may
//! be changing meanwhile) and count how often each id that takes references (with immortal ints, each
//! id up to 256) was stored; the calling thread then takes the references those slots need, id by
//! id. So the serial part of returning a batch is one allocation per list and at most one
//! reference-count increment per element (a cheap loop over each counted id's count), instead of
//! making and storing every element under the GIL.
//!
//! That path writes CPython's list internals directly (a list's item array, its size) and relies on
//! the GIL's reference counting, so it exists only on builds with a GIL (`not(Py_GIL_DISABLED)`);
//! the free-threaded build fills each list with `PyList_SET_ITEM` on the calling thread.

#[cfg(not(Py_GIL_DISABLED))]
use std::sync::Mutex;
use std::sync::OnceLock;

use hf_bpe_core::Rank;
#[cfg(not(Py_GIL_DISABLED))]
use pyo3::exceptions::PyMemoryError;
use pyo3::exceptions::PyValueError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyList;
#[cfg(not(Py_GIL_DISABLED))]
use rayon::prelude::*;

/// Ids at most this large get a shared Python int.
const SHARED_INTS: usize = 1 << 21;

/// A batch with at least this many ids in all is turned into lists on the pool's threads.
#[cfg(not(Py_GIL_DISABLED))]
const PARALLEL_FROM: usize = 1 << 16;

/// The shared ints of CPython with a GIL, in blocks of our own memory (see the module).
#[cfg(not(any(Py_GIL_DISABLED, PyPy, GraalPy)))]
mod blocks {
    use std::sync::Mutex;

    use pyo3::exceptions::PyMemoryError;
    use pyo3::ffi;
    use pyo3::prelude::*;

    /// Ids per block: a block is one huge page (2 MB) of ints.
    pub(super) const BLOCK_IDS: usize = 1 << 16;
    /// Bytes per int: CPython's int of a value below 2**60 takes at most 32 on 64-bit builds
    /// (checked for every int copied).
    const INT_BYTES: usize = 32;
    const BLOCKS: usize = super::SHARED_INTS / BLOCK_IDS;
    /// Ids up to this one are CPython's own small ints.
    const SMALL: usize = 256;

    /// Every block made so far (its address, 0 for none yet) and CPython's small ints: made under
    /// the GIL, shared by every model of the process and never freed, since a list anywhere may
    /// still hold any of them.
    struct Made {
        blocks: [usize; BLOCKS],
        small: Option<&'static [usize; SMALL + 1]>,
        /// The count that makes the blocks' ints immortal, if this interpreter has one (decided
        /// before the first block is made, by [`immortal_refcount`]).
        immortal: Option<Option<ffi::Py_ssize_t>>,
    }

    static MADE: Mutex<Made> = Mutex::new(Made { blocks: [0; BLOCKS], small: None, immortal: None });

    /// The shared ints of the ids below `len` (a whole number of blocks).
    pub(super) struct Shared {
        blocks: Box<[usize]>,
        small: &'static [usize; SMALL + 1],
        /// Whether the ints in blocks are immortal (see [`immortal_refcount`]): then a list takes
        /// no reference to them.
        immortal: bool,
    }

    impl Shared {
        /// The shared ints of ids below `n_ids` (and the rest of their last block), made where
        /// they are not yet; `None` when an int of this interpreter does not fit [`INT_BYTES`].
        pub(super) fn new(py: Python<'_>, n_ids: usize) -> PyResult<Option<Self>> {
            let mut made = MADE.lock().unwrap_or_else(|poison| poison.into_inner());
            let small = match made.small {
                Some(small) => small,
                None => {
                    let mut small = Box::new([0usize; SMALL + 1]);
                    for (id, int) in small.iter_mut().enumerate() {
                        // A new reference to CPython's cached small int, kept for good.
                        *int = id.into_pyobject(py)?.into_ptr() as usize;
                    }
                    *made.small.insert(Box::leak(small))
                }
            };
            let n_blocks = n_ids.min(super::SHARED_INTS).div_ceil(BLOCK_IDS);
            for index in 0..n_blocks {
                if made.blocks[index] == 0 {
                    let immortal = match made.immortal {
                        Some(immortal) => immortal,
                        None => *made.immortal.insert(immortal_refcount(py, small[0])?),
                    };
                    match make_block(py, index, immortal)? {
                        Some(block) => made.blocks[index] = block,
                        None => return Ok(None),
                    }
                }
            }
            let immortal = made.immortal.flatten().is_some();
            Ok(Some(Self { blocks: made.blocks[..n_blocks].into(), small, immortal }))
        }

        /// A list holding the shared int of an id below this takes a reference to it: with
        /// immortal ints in the blocks, only CPython's own small ints take one.
        pub(super) fn referenced_below(&self) -> usize {
            if self.immortal { SMALL + 1 } else { self.len() }
        }

        /// How many ids have a shared int: every id below this.
        pub(super) fn len(&self) -> usize {
            self.blocks.len() * BLOCK_IDS
        }

        /// The shared int of `id` (below [`Shared::len`]), borrowed.
        #[inline(always)]
        pub(super) fn get(&self, id: usize) -> *mut ffi::PyObject {
            let computed = self.blocks[id / BLOCK_IDS] + (id % BLOCK_IDS) * INT_BYTES;
            (if id <= SMALL { self.small[id] } else { computed }) as *mut ffi::PyObject
        }
    }

    /// Block `index`: the ints of its ids above [`SMALL`], each a copy of the int CPython makes for
    /// it (the object header made by `PyObject_Init`, which gives it the one reference the block
    /// keeps for good, or the `immortal` count; the value copied after it). `None` when an int is
    /// larger than [`INT_BYTES`].
    fn make_block(py: Python<'_>, index: usize, immortal: Option<ffi::Py_ssize_t>) -> PyResult<Option<usize>> {
        let header = std::mem::size_of::<ffi::PyObject>();
        let block = hf_bpe_core::huge::leaked_block(BLOCK_IDS * INT_BYTES)
            .ok_or_else(|| PyMemoryError::new_err("no memory for a block of shared ints"))?;
        for slot in 0..BLOCK_IDS {
            let id = index * BLOCK_IDS + slot;
            if id <= SMALL {
                continue;
            }
            let int = id.into_pyobject(py)?;
            let size: usize = int.call_method0("__sizeof__")?.extract()?;
            if !(header..=INT_BYTES).contains(&size) {
                // Not freed: the block is leaked by design; at most one per process gets here.
                return Ok(None);
            }
            // SAFETY: the slot is INT_BYTES of our own zeroed memory that nothing else uses; the
            // header is made by CPython's own initializer and the value's bytes (no pointers) come
            // from a live int of the same type and value, `size` bytes long.
            unsafe {
                let copy = block.as_ptr().add(slot * INT_BYTES).cast::<ffi::PyObject>();
                ffi::PyObject_Init(copy, ffi::Py_TYPE(int.as_ptr()));
                std::ptr::copy_nonoverlapping(
                    int.as_ptr().cast::<u8>().add(header),
                    copy.cast::<u8>().add(header),
                    size - header,
                );
                // Immortal, as CPython's own small ints are from 3.12 on: a list holding it takes
                // no reference, so filling one writes no count. The blocks are never freed, so
                // an int of theirs is never released wrongly.
                if let Some(count) = immortal {
                    set_refcount(copy, count);
                }
            }
        }
        Ok(Some(block.as_ptr() as usize))
    }

    /// The reference count that makes an int immortal on this interpreter, if it has one. From 3.12
    /// on, the one CPython gives its own small ints (their count's low 32 bits: the high ones hold
    /// flags from 3.14 on, which a heap object of ours must not copy); on 3.11, which has no immortal
    /// objects, a count that only falls by one for each reference released that was never taken,
    /// so no process lives to release it down to zero (2**62: at a billion a second, 146 years).
    /// Checked on a new int of CPython's with its own `Py_IncRef` and `Py_DecRef`, which must leave
    /// an immortal count unchanged (3.12 on) or give it back (3.11).
    fn immortal_refcount(py: Python<'_>, small_zero: usize) -> PyResult<Option<ffi::Py_ssize_t>> {
        #[cfg(Py_3_12)]
        // SAFETY: the small int 0 is alive for good (we keep a reference to it); only its count is read.
        let count = unsafe { ffi::Py_REFCNT(small_zero as *mut ffi::PyObject) & 0xFFFF_FFFF };
        #[cfg(not(Py_3_12))]
        let count = {
            let _ = small_zero;
            1 << 62
        };
        let probe = (1u64 << 40).into_pyobject(py)?.into_ptr();
        // SAFETY: `probe` is a new int only this function references (its count is 1); its count is
        // set back to 1 before the one reference is released, so it is freed as usual.
        unsafe {
            set_refcount(probe, count);
            ffi::Py_IncRef(probe);
            let held = ffi::Py_REFCNT(probe);
            ffi::Py_DecRef(probe);
            let released = ffi::Py_REFCNT(probe);
            set_refcount(probe, 1);
            ffi::Py_DECREF(probe);
            let immortal = if cfg!(Py_3_12) { held == count } else { held == count + 1 };
            Ok((immortal && released == count).then_some(count))
        }
    }

    /// Sets the count of `object`, which the caller alone references.
    unsafe fn set_refcount(object: *mut ffi::PyObject, count: ffi::Py_ssize_t) {
        #[cfg(Py_3_12)]
        {
            (*object).ob_refcnt.ob_refcnt = count;
        }
        #[cfg(not(Py_3_12))]
        {
            (*object).ob_refcnt = count;
        }
    }
}

/// The shared ints of a model's ids: `get` gives a borrowed pointer, valid as long as the table.
enum Shared {
    #[cfg(not(any(Py_GIL_DISABLED, PyPy, GraalPy)))]
    Blocks(blocks::Shared),
    /// Ints made by the interpreter, found through a table.
    Made(Box<[Py<PyAny>]>),
}

impl Shared {
    fn new(py: Python<'_>, n_vocab: usize) -> PyResult<Self> {
        #[cfg(not(any(Py_GIL_DISABLED, PyPy, GraalPy)))]
        if let Some(blocks) = blocks::Shared::new(py, n_vocab)? {
            return Ok(Shared::Blocks(blocks));
        }
        let made = (0..n_vocab.min(SHARED_INTS))
            .map(|id| {
                let Ok(int) = id.into_pyobject(py);
                int.into_any().unbind()
            })
            .collect();
        Ok(Shared::Made(made))
    }

    /// How many ids have a shared int: every id below this.
    #[inline]
    fn len(&self) -> usize {
        match self {
            #[cfg(not(any(Py_GIL_DISABLED, PyPy, GraalPy)))]
            Shared::Blocks(blocks) => blocks.len(),
            Shared::Made(made) => made.len(),
        }
    }

    /// The shared int of `id`, borrowed, when it has one.
    #[inline(always)]
    fn get(&self, id: usize) -> Option<*mut ffi::PyObject> {
        match self {
            #[cfg(not(any(Py_GIL_DISABLED, PyPy, GraalPy)))]
            Shared::Blocks(blocks) => (id < blocks.len()).then(|| blocks.get(id)),
            Shared::Made(made) => made.get(id).map(Py::as_ptr),
        }
    }

    /// Only the shared ints of ids below this take references from the lists that hold them (the
    /// others are immortal).
    fn referenced_below(&self) -> usize {
        match self {
            #[cfg(not(any(Py_GIL_DISABLED, PyPy, GraalPy)))]
            Shared::Blocks(blocks) => blocks.referenced_below(),
            Shared::Made(made) => made.len(),
        }
    }
}

pub(crate) struct IntTable {
    ints: OnceLock<Shared>,
    n_vocab: usize,
}

/// A pointer handed to the pool's threads. Only the lists made by [`IntTable::lists`] are sent
/// this way, while no Python code can reach them.
#[cfg(not(Py_GIL_DISABLED))]
#[derive(Clone, Copy)]
struct Unshared(*mut ffi::PyObject);
// SAFETY: see the type's comment: each list is written by one worker, and read by no one else until
// the workers are done.
#[cfg(not(Py_GIL_DISABLED))]
unsafe impl Send for Unshared {}
#[cfg(not(Py_GIL_DISABLED))]
unsafe impl Sync for Unshared {}

/// New lists whose items may still be garbage or borrowed (their reference counts not yet taken).
/// Dropped while it still holds them (an error or a panic before they are whole; once whole,
/// [`IntTable::lists`] takes them out), it empties them before releasing them, so a borrowed item
/// is never released.
#[cfg(not(Py_GIL_DISABLED))]
struct Unfilled(Vec<Unshared>);

#[cfg(not(Py_GIL_DISABLED))]
impl Unfilled {
    /// The lists, every slot of which has been filled and referenced ([`IntTable::fill_in_parallel`]),
    /// tracked again and owned as usual.
    fn into_whole<'py>(mut self, py: Python<'py>) -> Vec<Bound<'py, PyAny>> {
        // SAFETY: with the GIL held; the lists are whole, and this thread owns a reference to each.
        unsafe {
            std::mem::take(&mut self.0)
                .into_iter()
                .map(|Unshared(list)| {
                    ffi::PyObject_GC_Track(list.cast());
                    Bound::from_owned_ptr(py, list)
                })
                .collect()
        }
    }
}

#[cfg(not(Py_GIL_DISABLED))]
impl Drop for Unfilled {
    fn drop(&mut self) {
        // SAFETY: runs with the GIL held (the lists are only ever dropped in the thread that made
        // them, outside `detach`); every pointer is a list this thread owns a reference to.
        unsafe {
            for &Unshared(list) in &self.0 {
                let length = ffi::PyList_GET_SIZE(list);
                for index in 0..length {
                    ffi::PyList_SET_ITEM(list, index, std::ptr::null_mut());
                }
                ffi::Py_DECREF(list);
            }
        }
    }
}

/// `values` as a list of Python ints: MemoryError when CPython cannot allocate it (pyo3's own
/// conversion of a `Vec` panics then).
pub(crate) fn usize_list<'py>(py: Python<'py>, values: &[usize]) -> PyResult<Bound<'py, PyList>> {
    // SAFETY: the GIL is held (`py`); every slot of the new list is filled exactly once with a new
    // reference before the list is handed to Python, and on failure the list, its unfilled slots
    // still null (which `list_dealloc` skips), is released.
    unsafe {
        let list = new_list(py, values.len())?;
        for (index, &value) in values.iter().enumerate() {
            let int = ffi::PyLong_FromSize_t(value);
            if int.is_null() {
                ffi::Py_DECREF(list);
                return Err(PyErr::fetch(py));
            }
            ffi::PyList_SET_ITEM(list, index as ffi::Py_ssize_t, int);
        }
        Ok(Bound::from_owned_ptr(py, list).cast_into_unchecked())
    }
}

/// A new list of `length` empty (null) slots, owned by the caller, who must fill every slot before
/// Python sees it.
///
/// # Safety
/// The GIL must be held.
unsafe fn new_list(py: Python<'_>, length: usize) -> PyResult<*mut ffi::PyObject> {
    let length = ffi::Py_ssize_t::try_from(length)
        .map_err(|_| PyValueError::new_err("too many ids for one Python list"))?;
    let list = ffi::PyList_New(length);
    if list.is_null() {
        return Err(PyErr::fetch(py));
    }
    Ok(list)
}

/// A new list of `length` slots whose contents are garbage until filled: unlike `PyList_New`, which
/// zeroes them (one serial pass over all a batch's slots, its largest serial cost after releasing
/// them), so the pool's threads are the first to touch the memory. CPython builds lists the same way
/// inside (an empty list given an array from `PyMem_Malloc`, which the list frees).
///
/// # Safety
/// The GIL must be held; the caller must fill every slot, or empty them all (see [`Unfilled`]), before
/// the list is released or seen by Python.
#[cfg(not(Py_GIL_DISABLED))]
unsafe fn new_unfilled_list(py: Python<'_>, length: usize) -> PyResult<*mut ffi::PyObject> {
    let list = new_list(py, 0)?;
    if length == 0 {
        return Ok(list);
    }
    let size = length.checked_mul(std::mem::size_of::<*mut ffi::PyObject>());
    let items = size.map_or(std::ptr::null_mut(), |size| ffi::PyMem_Malloc(size));
    if items.is_null() {
        ffi::Py_DECREF(list);
        return Err(PyMemoryError::new_err(format!("no memory for a list of {length} ids")));
    }
    let raw = list.cast::<ffi::PyListObject>();
    (*raw).ob_item = items.cast();
    (*raw).allocated = length as ffi::Py_ssize_t;
    (*raw).ob_base.ob_size = length as ffi::Py_ssize_t;
    Ok(list)
}

impl IntTable {
    pub(crate) fn new(n_vocab: usize) -> Self {
        Self { ints: OnceLock::new(), n_vocab }
    }

    fn table(&self, py: Python<'_>) -> PyResult<&Shared> {
        if let Some(shared) = self.ints.get() {
            return Ok(shared);
        }
        // Made with the GIL held and nothing in between that could release it, so no other thread
        // makes them meanwhile.
        let shared = Shared::new(py, self.n_vocab)?;
        Ok(self.ints.get_or_init(|| shared))
    }

    /// A Python list of `ids`.
    pub(crate) fn list<'py>(&self, py: Python<'py>, ids: &[Rank]) -> PyResult<Bound<'py, PyList>> {
        let ints = self.table(py)?;
        let referenced = ints.referenced_below();
        // SAFETY: every slot of the new list is filled exactly once with a new reference (an
        // incremented shared int, an immortal one or a fresh one) before the list is handed to
        // Python, and on failure the list is released.
        unsafe {
            let list = new_list(py, ids.len())?;
            for (index, &id) in ids.iter().enumerate() {
                let int = match ints.get(id as usize) {
                    Some(int) => {
                        if (id as usize) < referenced {
                            ffi::Py_INCREF(int);
                        }
                        int
                    }
                    None => {
                        let int = ffi::PyLong_FromUnsignedLong(std::os::raw::c_ulong::from(id));
                        if int.is_null() {
                            ffi::Py_DECREF(list);
                            return Err(PyErr::fetch(py));
                        }
                        int
                    }
                };
                ffi::PyList_SET_ITEM(list, index as ffi::Py_ssize_t, int);
            }
            Ok(Bound::from_owned_ptr(py, list).cast_into_unchecked())
        }
    }

    /// A Python list of lists, one per row of ids, filled on `pool`'s threads when the batch is large.
    pub(crate) fn lists<'py>(
        &self,
        py: Python<'py>,
        rows: &[Vec<Rank>],
        pool: &rayon::ThreadPool,
    ) -> PyResult<Bound<'py, PyList>> {
        self.lists_panicking_at(py, rows, pool, None)
    }

    /// [`IntTable::lists`]; for tests (`_panic_for_tests("lists")`), the worker filling row `row`
    /// panics on purpose at its id `index` when `panic_at` is `Some((row, index))` and the lists are
    /// filled on the pool's threads, leaving half-filled lists behind.
    pub(crate) fn lists_panicking_at<'py>(
        &self,
        py: Python<'py>,
        rows: &[Vec<Rank>],
        pool: &rayon::ThreadPool,
        panic_at: Option<(usize, usize)>,
    ) -> PyResult<Bound<'py, PyList>> {
        #[cfg(not(Py_GIL_DISABLED))]
        if self.fills_on_pool(py, rows, pool)?.is_some() {
            return self.lists_in_parallel(py, rows, pool, panic_at);
        }
        #[cfg(Py_GIL_DISABLED)]
        let _ = (pool, panic_at);
        let lists = rows.iter().map(|ids| self.list(py, ids)).collect::<PyResult<Vec<_>>>()?;
        PyList::new(py, lists)
    }

    /// The number of ids in `rows` when they are to be copied into lists on `pool`'s threads: the
    /// pool has two threads or more, they are many (counts are u32), and every id has a shared int
    /// (added tokens can lie past the vocabulary: rows holding one are filled on the calling thread).
    #[cfg(not(Py_GIL_DISABLED))]
    fn fills_on_pool(&self, py: Python<'_>, rows: &[Vec<Rank>], pool: &rayon::ThreadPool) -> PyResult<Option<usize>> {
        let total: usize = rows.iter().map(Vec::len).sum();
        let shared = self.table(py)?.len();
        Ok((pool.current_num_threads() >= 2
            && (PARALLEL_FROM..=u32::MAX as usize).contains(&total)
            && shared >= self.n_vocab
            && rows.iter().flatten().all(|&id| (id as usize) < shared))
        .then_some(total))
    }

    /// [`IntTable::lists`] on `pool`'s threads (see the module's comment): every id has a shared int,
    /// and the batch holds at most `u32::MAX` ids.
    #[cfg(not(Py_GIL_DISABLED))]
    fn lists_in_parallel<'py>(
        &self,
        py: Python<'py>,
        rows: &[Vec<Rank>],
        pool: &rayon::ThreadPool,
        panic_at: Option<(usize, usize)>,
    ) -> PyResult<Bound<'py, PyList>> {
        let mut unfilled = Unfilled(Vec::with_capacity(rows.len()));
        for ids in rows {
            unfilled.0.push(Unshared(unsafe { untracked_unfilled_list(py, ids.len())? }));
        }
        let stretches: Vec<Stretch<'_>> = rows.iter().enumerate().map(|(list, ids)| Stretch { list, at: 0, ids }).collect();
        self.fill_in_parallel(py, &unfilled, &stretches, pool, panic_at)?;
        let lists: Vec<Bound<'py, PyAny>> = unfilled.into_whole(py);
        PyList::new(py, lists)
    }

    /// One Python list of the ids of `parts`, one after another: filled on `pool`'s threads, a part
    /// each, when there are several and they are long (see the module's comment), else on the
    /// calling thread.
    pub(crate) fn list_of_parts<'py>(
        &self,
        py: Python<'py>,
        parts: &[Vec<Rank>],
        pool: &rayon::ThreadPool,
    ) -> PyResult<Bound<'py, PyList>> {
        if let [ids] = parts {
            return self.list(py, ids);
        }
        #[cfg(not(Py_GIL_DISABLED))]
        if let Some(total) = self.fills_on_pool(py, parts, pool)? {
            let unfilled = Unfilled(vec![Unshared(unsafe { untracked_unfilled_list(py, total)? })]);
            let mut at = 0;
            let stretches: Vec<Stretch<'_>> = parts
                .iter()
                .map(|ids| {
                    at += ids.len();
                    Stretch { list: 0, at: at - ids.len(), ids }
                })
                .collect();
            self.fill_in_parallel(py, &unfilled, &stretches, pool, None)?;
            let list = unfilled.into_whole(py).pop().expect("one list");
            return Ok(list.cast_into().expect("a list"));
        }
        #[cfg(Py_GIL_DISABLED)]
        let _ = pool;
        self.list(py, &parts.concat())
    }

    /// Stores every stretch's shared ints into its list on `pool`'s threads, without the GIL, then
    /// (with it) takes the references those slots need: afterwards every slot of the stretches is
    /// whole. For tests, the worker writing stretch `s` panics at its id `i` when `panic_at` is
    /// `Some((s, i))`.
    #[cfg(not(Py_GIL_DISABLED))]
    fn fill_in_parallel(
        &self,
        py: Python<'_>,
        unfilled: &Unfilled,
        stretches: &[Stretch<'_>],
        pool: &rayon::ThreadPool,
        panic_at: Option<(usize, usize)>,
    ) -> PyResult<()> {
        let ints = self.table(py)?;
        let threads = pool.current_num_threads();
        // Only the ints that take references are counted (with immortal ints, CPython's small ones).
        let counted = ints.referenced_below();
        let counts: Vec<Mutex<Vec<u32>>> = (0..threads).map(|_| Mutex::new(Vec::new())).collect();
        py.detach(|| {
            pool.install(|| {
                stretches.par_iter().enumerate().for_each(|(index, stretch)| {
                    let Unshared(list) = unfilled.0[stretch.list];
                    let worker = rayon::current_thread_index().unwrap_or(0) % threads;
                    let mut counts = counts[worker].lock().unwrap_or_else(|poison| poison.into_inner());
                    if counts.is_empty() {
                        counts.resize(counted, 0);
                    }
                    let panic_index = panic_at.filter(|&(panic_stretch, _)| panic_stretch == index).map(|(_, at)| at);
                    for (offset, &id) in stretch.ids.iter().enumerate() {
                        if panic_index == Some(offset) {
                            panic!("deliberate panic for tests (lists)");
                        }
                        // SAFETY: `list` has a slot for every id of every stretch written into it
                        // (the stretches of one list do not overlap) and this worker alone writes
                        // this stretch; `ints` outlives the call (the model owns it). The reference
                        // the slot needs, if any, is taken below, by the count.
                        unsafe {
                            let int = ints.get(id as usize).expect("every id has a shared int (checked above)");
                            ffi::PyList_SET_ITEM(list, (stretch.at + offset) as ffi::Py_ssize_t, int);
                        }
                        if let Some(count) = counts.get_mut(id as usize) {
                            *count += 1;
                        }
                    }
                });
            })
        });
        let counts: Vec<Vec<u32>> = counts
            .into_iter()
            .map(|count| count.into_inner().unwrap_or_else(|poison| poison.into_inner()))
            .filter(|count| !count.is_empty())
            .collect();
        // SAFETY: with the GIL held again: each shared int that takes references gets one per slot
        // that holds it (one increment per element; immortal ints take none).
        unsafe {
            for id in 0..counted {
                let times: u32 = counts.iter().map(|count| count[id]).sum();
                if times == 0 {
                    continue;
                }
                let int = ints.get(id).expect("every id below len has a shared int");
                for _ in 0..times {
                    ffi::Py_INCREF(int);
                }
            }
        }
        Ok(())
    }
}

/// Ids written into slots `at..` of list `list` (an index into an [`Unfilled`]) by one worker.
#[cfg(not(Py_GIL_DISABLED))]
struct Stretch<'a> {
    list: usize,
    at: usize,
    ids: &'a [Rank],
}

/// A new list of `length` garbage slots, untracked: the cycle collector (which another Python
/// thread may run while the GIL is released) never looks at it half-filled; it is tracked again
/// once whole ([`Unfilled::into_whole`]).
///
/// # Safety
/// Every slot must be overwritten before the list is handed to Python or released (by the workers,
/// or by [`Unfilled`]'s drop).
#[cfg(not(Py_GIL_DISABLED))]
unsafe fn untracked_unfilled_list(py: Python<'_>, length: usize) -> PyResult<*mut ffi::PyObject> {
    let list = new_unfilled_list(py, length)?;
    ffi::PyObject_GC_UnTrack(list.cast());
    Ok(list)
}
