//! Bindings for training: the `PieceCounts` table, the counter that fills it, and the merge loop.
//! Type conversion, GIL release, progress callbacks and error mapping only.

use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::Arc;
use std::time::Duration;

use hf_bpe_core::train::{self, CountError, Counter, PieceCounts};
use pyo3::exceptions::{
    PyFileNotFoundError, PyKeyboardInterrupt, PyOSError, PyTypeError, PyValueError,
};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyString, PyTuple};

use crate::guard::guarded;
use crate::{split_rule_of, split_rule_to_py};
use hf_bpe_core::SplitRule;

fn count_error(error: CountError) -> PyErr {
    let message = error.to_string();
    match error {
        CountError::Io { error, .. } if error.kind() == std::io::ErrorKind::NotFound => {
            PyFileNotFoundError::new_err(message)
        }
        CountError::Io { .. } => PyOSError::new_err(message),
        CountError::Interrupted => PyKeyboardInterrupt::new_err(()),
        _ => PyValueError::new_err(message),
    }
}

/// Shared between a worker and the thread watching it: how much is done, and whether to stop.
#[derive(Default)]
pub(crate) struct Watch {
    pub(crate) done: AtomicU64,
    stop: AtomicBool,
}

impl Watch {
    pub(crate) fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }
}

/// Runs `work` on a helper thread with the GIL released, while the calling thread stays the one
/// that talks to Python: every 0.1 s it passes the progress made (`progress(increment)`) and checks
/// for Ctrl-C (signals reach only the main thread), asking the work to stop on either failing.
/// A panic in the work is re-raised in the calling thread, with its own message.
pub(crate) fn watched<T: Send>(
    py: Python<'_>,
    progress: Option<&Py<PyAny>>,
    work: impl FnOnce(&Watch) -> T + Send,
) -> PyResult<T> {
    let watch = Watch::default();
    let (result, failure) = py.detach(|| {
        std::thread::scope(|scope| {
            let (sender, receiver) = mpsc::channel();
            let watch = &watch;
            scope.spawn(move || {
                let _ = sender.send(catch_unwind(AssertUnwindSafe(|| work(watch))));
            });
            let (mut reported, mut failure) = (0u64, None::<PyErr>);
            loop {
                let finished = receiver.recv_timeout(Duration::from_millis(100));
                let done = watch.done.load(Ordering::Relaxed);
                if failure.is_none() && (done > reported || finished.is_err()) {
                    let status = Python::attach(|py| -> PyResult<()> {
                        if let (Some(progress), true) = (progress, done > reported) {
                            progress.call1(py, (done - reported,))?;
                        }
                        py.check_signals()
                    });
                    reported = done;
                    if let Err(error) = status {
                        watch.stop.store(true, Ordering::Relaxed);
                        failure = Some(error);
                    }
                }
                match finished {
                    Ok(result) => return (result, failure),
                    Err(RecvTimeoutError::Timeout) => continue,
                    Err(RecvTimeoutError::Disconnected) => {
                        unreachable!("the worker catches its panics and always sends")
                    }
                }
            }
        })
    });
    match (failure, result) {
        (_, Err(panic)) => resume_unwind(panic),
        (Some(error), Ok(_)) => Err(error),
        (None, Ok(result)) => Ok(result),
    }
}

fn run<T: Send>(pool: &rayon::ThreadPool, work: impl FnOnce() -> T + Send) -> T {
    pool.install(work)
}

/// A piece as bytes: `str` pieces are taken as UTF-8.
fn piece_of(piece: &Bound<'_, PyAny>) -> PyResult<Vec<u8>> {
    if let Ok(text) = piece.cast::<PyString>() {
        return Ok(text.to_str()?.as_bytes().to_vec());
    }
    if let Ok(bytes) = piece.cast::<PyBytes>() {
        return Ok(bytes.as_bytes().to_vec());
    }
    let type_name = crate::type_name(piece);
    Err(PyTypeError::new_err(format!(
        "a piece is str or bytes, got {type_name}"
    )))
}

/// What pickling stores: the split rule (as `split_rule_to_py` gives it), special tokens and the
/// serialized table.
type State<'py> = (Bound<'py, PyAny>, Vec<String>, Bound<'py, PyBytes>);

/// How often each distinct piece occurs in a corpus, with the split pattern and special tokens
/// that cut it. Tables add with ``+`` (so ``sum(tables)`` works), pickle, and compare equal when
/// their counts, pattern and special tokens are equal.
///
/// >>> from hf_bpe.train import count_pieces
/// >>> counts = count_pieces(["the cat", "the hat"], show_progress=False)
/// >>> counts[b" the"], counts["the"], len(counts), counts.total
/// (0, 2, 3, 4)
#[pyclass(module = "hf_bpe._core", name = "PieceCounts")]
#[derive(Clone)]
pub struct PyPieceCounts {
    counts: PieceCounts,
    split: SplitRule,
    special_tokens: Vec<String>,
}

/// A split rule for messages: the named pattern's name, the regex, or the Split steps.
fn describe_rule(rule: &SplitRule) -> String {
    match rule {
        SplitRule::Pattern(pattern) => match pattern.as_str() {
            p if p.starts_with("'(?:[sdmt]") => "gpt2".to_owned(),
            p if p.starts_with("'(?i:[sdmt]") => "cl100k".to_owned(),
            p if p.starts_with("[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}") => "o200k".to_owned(),
            p => format!("{p:?}"),
        },
        SplitRule::Steps(steps) => steps.iter().map(describe_step).collect::<Vec<_>>().join(" then "),
        SplitRule::ByteLevel(steps) => {
            let byte_level =
                format!("ByteLevel(add_prefix_space={}, use_regex={})", steps.add_prefix_space, steps.use_regex);
            let before = steps.before.iter().map(describe_step);
            let after = steps.after.iter().map(describe_step);
            before.chain(std::iter::once(byte_level)).chain(after).collect::<Vec<_>>().join(" then ")
        }
    }
}

fn describe_step(step: &hf_bpe_core::SplitStep) -> String {
    format!("Split({:?}, {:?}, invert={})", step.pattern, step.behavior.name(), step.invert)
}

/// The split rule for a pattern as Python gives it: a name, a regex or Splits.
fn resolved_rule(py: Python<'_>, pattern: &Bound<'_, PyAny>) -> PyResult<SplitRule> {
    let patterns = py.import("hf_bpe.patterns")?;
    let core = patterns.call_method1("to_core", (patterns.call_method1("resolve", (pattern,))?,))?;
    split_rule_of(&core)
}

impl PyPieceCounts {
    fn check_compatible(&self, other: &PyPieceCounts) -> PyResult<()> {
        if self.split != other.split {
            return Err(PyValueError::new_err(format!(
                "cannot add piece counts made with different split patterns ({} and {}): \
                 count every shard with the same pattern",
                describe_rule(&self.split),
                describe_rule(&other.split)
            )));
        }
        if self.special_tokens != other.special_tokens {
            return Err(PyValueError::new_err(format!(
                "cannot add piece counts made with different special tokens ({:?} and {:?}): \
                 count every shard with the same special tokens",
                self.special_tokens, other.special_tokens
            )));
        }
        Ok(())
    }
}

impl PyPieceCounts {
    /// The table itself, for the model's methods that read it.
    pub(crate) fn counts(&self) -> &PieceCounts {
        &self.counts
    }

    /// The table, leaving this one empty (for a merge loop that frees it once copied).
    pub(crate) fn take_counts(&mut self) -> PieceCounts {
        std::mem::take(&mut self.counts)
    }
}

#[pymethods]
impl PyPieceCounts {
    /// ``PieceCounts(counts={}, *, pattern="gpt2", special_tokens=())``: a table from a mapping
    /// of pieces (``str`` or ``bytes``) to counts, e.g. one gathered by another engine.
    #[new]
    #[pyo3(signature = (counts=None, *, pattern=None, special_tokens=Vec::new()))]
    fn new(
        py: Python<'_>,
        counts: Option<&Bound<'_, PyAny>>,
        pattern: Option<&Bound<'_, PyAny>>,
        special_tokens: Vec<String>,
    ) -> PyResult<Self> {
        guarded(py, || {
            let split = match pattern {
                Some(pattern) => resolved_rule(py, pattern)?,
                None => resolved_rule(py, PyString::new(py, "gpt2").as_any())?,
            };
            let mut table = PieceCounts::new();
            if let Some(counts) = counts {
                let items = counts.call_method0("items").map_err(|_| {
                    PyTypeError::new_err("counts must be a mapping of pieces (str or bytes) to int")
                })?;
                for item in items.try_iter()? {
                    let (piece, count): (Bound<'_, PyAny>, u64) = item?.extract().map_err(|_| {
                        PyValueError::new_err("counts must map pieces to non-negative int counts")
                    })?;
                    table.add(&piece_of(&piece)?, count);
                }
            }
            Ok(Self {
                counts: table,
                split,
                special_tokens,
            })
        })
    }

    /// The split pattern the pieces were cut with (a regex, a ``patterns.Split`` or a tuple of them).
    #[getter]
    fn pattern<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let core = split_rule_to_py(py, &self.split)?;
        py.import("hf_bpe.patterns")?.call_method1("from_core", (core,))
    }

    /// The special tokens documents were split on (they are not counted).
    #[getter]
    fn special_tokens<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, &self.special_tokens)
    }

    /// The number of pieces counted, with repetition.
    #[getter]
    fn total(&self) -> u64 {
        self.counts.total()
    }

    /// Occurrences of rare pieces dropped to keep the table within ``max_pieces`` (0: the counts
    /// are exact).
    #[getter]
    fn pruned(&self) -> u64 {
        self.counts.pruned()
    }

    /// The number of distinct pieces.
    fn __len__(&self) -> usize {
        self.counts.len()
    }

    /// How often ``piece`` (str or bytes) occurred; 0 when never.
    fn __getitem__(&self, piece: &Bound<'_, PyAny>) -> PyResult<u64> {
        Ok(self.counts.get(&piece_of(piece)?))
    }

    fn __contains__(&self, piece: &Bound<'_, PyAny>) -> PyResult<bool> {
        Ok(self.counts.get(&piece_of(piece)?) > 0)
    }

    /// The ``n`` most frequent pieces as ``(bytes, count)``, most frequent first (all when
    /// ``n`` is None).
    #[pyo3(signature = (n=None))]
    fn most_common<'py>(
        &self,
        py: Python<'py>,
        n: Option<usize>,
    ) -> PyResult<Vec<(Bound<'py, PyBytes>, u64)>> {
        guarded(py, || {
            Ok(self
                .counts
                .most_common(n.unwrap_or(usize::MAX))
                .into_iter()
                .map(|(piece, count)| (PyBytes::new(py, piece), count))
                .collect())
        })
    }

    /// Every piece with its count, as a ``dict[bytes, int]``.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, pyo3::types::PyDict>> {
        guarded(py, || {
            let dict = pyo3::types::PyDict::new(py);
            for (piece, count) in self.counts.iter() {
                dict.set_item(PyBytes::new(py, piece), count)?;
            }
            Ok(dict)
        })
    }

    fn __add__<'py>(&self, other: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        let py = other.py();
        guarded(py, || {
            let Ok(other) = other.cast::<PyPieceCounts>() else {
                return Ok(py.NotImplemented().into_bound(py));
            };
            let other = other.borrow();
            self.check_compatible(&other)?;
            // Copy the larger table and add the smaller one into the copy.
            let (larger, smaller) = if other.counts.len() > self.counts.len() {
                (&*other, self)
            } else {
                (self, &*other)
            };
            let mut sum = larger.clone();
            sum.counts.add_all(&smaller.counts);
            Ok(Bound::new(py, sum)?.into_any())
        })
    }

    /// ``0 + counts`` is ``counts``, so ``sum(tables)`` works without a start value.
    fn __radd__<'py>(&self, other: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        let py = other.py();
        match other.extract::<i64>() {
            Ok(0) => Ok(Bound::new(py, self.clone())?.into_any()),
            _ => Ok(py.NotImplemented().into_bound(py)),
        }
    }

    fn __iadd__(&mut self, other: &Bound<'_, PyAny>) -> PyResult<()> {
        let py = other.py();
        guarded(py, || {
            let other = other.cast::<PyPieceCounts>().map_err(|_| {
                PyTypeError::new_err("only another PieceCounts can be added to a PieceCounts")
            })?;
            let other = other.borrow();
            self.check_compatible(&other)?;
            self.counts.add_all(&other.counts);
            Ok(())
        })
    }

    fn __eq__(&self, other: &Bound<'_, PyAny>) -> bool {
        match other.cast::<PyPieceCounts>() {
            Ok(other) => {
                let other = other.borrow();
                self.split == other.split
                    && self.special_tokens == other.special_tokens
                    && self.counts == other.counts
            }
            Err(_) => false,
        }
    }

    fn __repr__(&self) -> String {
        let pattern = describe_rule(&self.split);
        format!(
            "PieceCounts({} distinct pieces, {} in all, pattern={pattern}, special_tokens={:?})",
            self.counts.len(),
            self.counts.total(),
            self.special_tokens
        )
    }

    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<(Bound<'py, PyAny>, State<'py>)> {
        let py = slf.py();
        guarded(py, || {
            let this = slf.borrow();
            let counts = &this.counts;
            let bytes = py.detach(|| counts.to_bytes());
            Ok((
                slf.get_type().getattr("_from_state")?,
                (
                    split_rule_to_py(py, &this.split)?,
                    this.special_tokens.clone(),
                    PyBytes::new(py, &bytes),
                ),
            ))
        })
    }

    #[staticmethod]
    fn _from_state(
        py: Python<'_>,
        split: &Bound<'_, PyAny>,
        special_tokens: Vec<String>,
        counts: &[u8],
    ) -> PyResult<Self> {
        guarded(py, || {
            let split = split_rule_of(split)?;
            let counts = PieceCounts::from_bytes(counts)
                .map_err(|error| PyValueError::new_err(error.to_string()))?;
            Ok(Self {
                counts,
                split,
                special_tokens,
            })
        })
    }

    /// Learns up to ``num_merges`` merges; returns the new tokens' bytes in id order (ids 256 on).
    /// ``progress(n)`` is called now and then with the number of merges done since the last call.
    /// With ``consume=True`` the table is emptied (its memory freed) once the merge loop has its
    /// own copy of the pieces. Merges of pairs found in many words run on ``num_threads`` threads
    /// (every core when None); the merges are the same for every number of threads.
    #[pyo3(signature = (num_merges, progress=None, consume=false, num_threads=None))]
    fn _learn_merges<'py>(
        &mut self,
        py: Python<'py>,
        num_merges: usize,
        progress: Option<Py<PyAny>>,
        consume: bool,
        num_threads: Option<usize>,
    ) -> PyResult<Vec<Bound<'py, PyBytes>>> {
        guarded(py, || {
            let pool = crate::thread_pool(num_threads)?;
            let counts = if consume {
                std::mem::take(&mut self.counts)
            } else {
                self.counts.clone()
            };
            let tokens = watched(py, progress.as_ref(), |watch| {
                run(&pool, || {
                    train::learn_merges_consuming(counts, num_merges, |done| {
                        watch.done.store(done as u64, Ordering::Relaxed);
                        !watch.stopped()
                    })
                })
            })?;
            Ok(tokens.iter().map(|token| PyBytes::new(py, token)).collect())
        })
    }
}

/// Fills a `PieceCounts` from texts and files: pattern and special tokens fixed at creation.
#[pyclass(module = "hf_bpe._core", name = "PieceCounter")]
pub struct PyPieceCounter {
    counter: Counter,
    split: SplitRule,
    special_tokens: Vec<String>,
    counts: PieceCounts,
    pool: Arc<rayon::ThreadPool>,
}

#[pymethods]
impl PyPieceCounter {
    /// ``split`` is a split rule as ``hf_bpe.patterns.to_core`` gives it (a regex, or Split steps).
    #[new]
    /// ``max_pieces`` bounds the table's distinct pieces (see ``Counter::with_max_pieces``).
    #[pyo3(signature = (split, special_tokens, num_threads=None, chunk_bytes=None, max_pieces=None))]
    fn new(
        py: Python<'_>,
        split: &Bound<'_, PyAny>,
        special_tokens: Vec<String>,
        num_threads: Option<usize>,
        chunk_bytes: Option<usize>,
        max_pieces: Option<usize>,
    ) -> PyResult<Self> {
        guarded(py, || {
            let split = split_rule_of(split)?;
            let mut counter = Counter::new(&split, &special_tokens).map_err(count_error)?.with_max_pieces(max_pieces);
            if let Some(chunk_bytes) = chunk_bytes {
                counter = counter.with_chunk_bytes(chunk_bytes);
            }
            Ok(Self {
                counter,
                split,
                special_tokens,
                counts: PieceCounts::new(),
                pool: crate::thread_pool(num_threads)?,
            })
        })
    }

    /// Counts each text as one document, in parallel, with the GIL released.
    fn add_texts(&mut self, py: Python<'_>, texts: Vec<Bound<'_, PyAny>>) -> PyResult<()> {
        guarded(py, || {
            let texts: Vec<String> = texts
                .iter()
                .map(|text| match text.cast::<PyString>() {
                    Ok(text) => Ok(text.to_string_lossy().into_owned()),
                    Err(_) => {
                        let type_name = crate::type_name(text);
                        Err(PyTypeError::new_err(format!(
                            "the corpus must yield str (the text of each document), got {type_name}"
                        )))
                    }
                })
                .collect::<PyResult<_>>()?;
            let (counter, pool, counts) = (&self.counter, &self.pool, &mut self.counts);
            py.detach(|| {
                let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
                let batch = run(pool, || counter.count_texts(&texts))?;
                counts.absorb(batch);
                counter.limit(counts);
                Ok::<_, hf_bpe_core::SplitError>(())
            })
            .map_err(|error| PyValueError::new_err(error.to_string()))
        })
    }

    /// Counts files (each one document), streamed in chunks and in parallel, with the GIL
    /// released, into the counts so far (on one thread without copying them; on failure they are
    /// dropped, leaving the counter empty). ``progress(n)`` is called now and then with the bytes
    /// counted since the last call.
    #[pyo3(signature = (paths, progress=None))]
    fn add_files(
        &mut self,
        py: Python<'_>,
        paths: Vec<PathBuf>,
        progress: Option<Py<PyAny>>,
    ) -> PyResult<()> {
        guarded(py, || {
            let (counter, pool) = (&self.counter, &self.pool);
            let counts = std::mem::take(&mut self.counts);
            let counted = watched(py, progress.as_ref(), |watch| {
                run(pool, || {
                    counter.count_files_into(counts, &paths, |bytes| {
                        watch.done.fetch_add(bytes, Ordering::Relaxed);
                        !watch.stopped()
                    })
                })
            })?;
            self.counts = counted.map_err(count_error)?;
            Ok(())
        })
    }

    /// The counts so far, leaving the counter empty.
    fn take(&mut self) -> PyPieceCounts {
        PyPieceCounts {
            counts: std::mem::take(&mut self.counts),
            split: self.split.clone(),
            special_tokens: self.special_tokens.clone(),
        }
    }
}

/// Checks that files exist and are UTF-8 (in parallel); returns their total size in bytes.
#[pyfunction]
fn check_utf8_files(py: Python<'_>, paths: Vec<PathBuf>) -> PyResult<u64> {
    guarded(py, || {
        let pool = crate::thread_pool(None)?;
        py.detach(|| run(&pool, || train::check_utf8(&paths)))
            .map_err(count_error)
    })
}

/// Whether texts split by this rule (as ``hf_bpe.patterns.to_core`` gives it) are cut into chunks
/// (streamed and counted in parallel); otherwise each file or document is counted whole.
#[pyfunction]
fn can_chunk(split: &Bound<'_, PyAny>) -> PyResult<bool> {
    Ok(train::count::can_chunk(&split_rule_of(split)?))
}

pub fn register(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add_class::<PyPieceCounts>()?;
    module.add_class::<PyPieceCounter>()?;
    module.add_function(wrap_pyfunction!(check_utf8_files, module)?)?;
    module.add_function(wrap_pyfunction!(can_chunk, module)?)?;
    Ok(())
}
