//! Python bindings of the hf_bpe core: type conversion, GIL release and error mapping only.

use std::borrow::Cow;
use std::sync::{Arc, Mutex, OnceLock};

mod arrow;
mod guard;
mod ints;
mod padded;
mod parity;
mod tokenizer_json;
mod train;
mod train_sentencepiece;

use hf_bpe_core::hf_normalize::NormalizeStep;
use hf_bpe_core::affix::{Affixed, NO_SYMBOL};
use hf_bpe_core::model::MAX_ID;
use hf_bpe_core::tokenizer_json::SpelledVocab;
use hf_bpe_core::char_merge::{DecodeState, Metaspace, Piece, PieceKind, SentencePieceSpec};
use hf_bpe_core::{
    Behavior, BuildError, ByteLevelSteps, EncodeStream, Kind, Model, Rank, SpecialMatcher, SplitError, SplitRule, SplitStep, StreamError,
};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyInt, PyList, PyString};
use rayon::prelude::*;
use rustc_hash::FxHashMap;

use guard::guarded;
use ints::IntTable;

/// Texts at least this long (bytes) are encoded, and id sequences this long decoded, with the GIL
/// released.
const RELEASE_GIL_FROM: usize = 4096;

fn split_error(error: SplitError) -> PyErr {
    PyValueError::new_err(error.to_string())
}

/// What building a model takes per token, at most (measured: about 335 bytes a token for a rank file
/// of 1,000,000 three-byte tokens, the Rust side alone).
const BUILD_BYTES_PER_TOKEN: usize = 400;

/// Checks, before a model of `tokens` tokens is built, that the memory it takes can be allocated: a
/// vocabulary too large for memory raises MemoryError naming its size (the building itself
/// allocates as it goes, where a failure would abort the process).
fn check_build_memory(tokens: usize) {
    hf_bpe_core::memory::ensure_headroom(
        tokens.saturating_mul(BUILD_BYTES_PER_TOKEN),
        "building a model",
        tokens,
        "tokens (and merges)",
    );
}

/// A split rule from Python: a regex (`str`), or `(pattern, literal, behavior, invert)` per Split
/// step, with at most one `("byte_level", add_prefix_space, use_regex)` among them for `tokenizers`'
/// `ByteLevel` (what `hf_bpe.patterns.to_core` gives).
pub(crate) fn split_rule_of(value: &Bound<'_, PyAny>) -> PyResult<SplitRule> {
    if let Ok(pattern) = value.cast::<PyString>() {
        return Ok(SplitRule::Pattern(pattern.to_str()?.to_owned()));
    }
    let shape = || {
        PyTypeError::new_err(
            "a split rule is a regex str or a list of (pattern, literal, behavior, invert), with at most one \
             (\"byte_level\", add_prefix_space, use_regex) among them",
        )
    };
    let items: Vec<Bound<'_, PyAny>> = value.extract().map_err(|_| shape())?;
    let mut steps = Vec::with_capacity(items.len());
    let mut byte_level = None;
    for item in items {
        if let Ok((kind, add_prefix_space, use_regex)) = item.extract::<(String, bool, bool)>() {
            if kind != "byte_level" || byte_level.is_some() {
                return Err(shape());
            }
            byte_level = Some((steps.len(), add_prefix_space, use_regex));
            continue;
        }
        let (pattern, literal, behavior, invert): (String, bool, String, bool) = item.extract().map_err(|_| shape())?;
        let behavior = Behavior::from_name(&behavior)
            .ok_or_else(|| PyValueError::new_err(format!("unknown Split behavior {behavior:?}")))?;
        steps.push(SplitStep { pattern, literal, behavior, invert });
    }
    Ok(match byte_level {
        None => SplitRule::Steps(steps),
        Some((at, add_prefix_space, use_regex)) => {
            let after = steps.split_off(at);
            SplitRule::ByteLevel(ByteLevelSteps { before: steps, add_prefix_space, use_regex, after })
        }
    })
}

/// The split rule of the hand-written scanner that splits as `rule` does by its meaning (another
/// spelling of a scanner's regex, `hf_bpe_core::recognize`), as [`split_rule_of`] takes it; None
/// when no scanner does. A candidate only: the caller must confirm it on probe texts.
#[pyfunction]
fn recognized_split<'py>(py: Python<'py>, rule: &Bound<'py, PyAny>) -> PyResult<Option<Bound<'py, PyAny>>> {
    let rule = split_rule_of(rule)?;
    hf_bpe_core::recognize::recognize(&rule).map(|(_, canonical)| split_rule_to_py(py, &canonical)).transpose()
}

/// A model's split rule with its normalizer steps from Python: [`split_rule_of`]'s forms, where a
/// list may start with normalizer steps `(kind, pattern, content, literal, left, right)` (what
/// `hf_bpe.patterns.to_core` gives for `hf_bpe.patterns.Normalize`).
fn model_split_of(value: &Bound<'_, PyAny>) -> PyResult<(Vec<NormalizeStep>, SplitRule)> {
    let Ok(list) = value.cast::<PyList>() else {
        return Ok((Vec::new(), split_rule_of(value)?));
    };
    let mut normalizers = Vec::new();
    let mut rest = Vec::new();
    for item in list.iter() {
        if rest.is_empty() {
            if let Ok(step) = item.extract::<(String, String, String, bool, bool, bool)>() {
                normalizers.push(normalize_step_of(step)?);
                continue;
            }
        }
        rest.push(item);
    }
    Ok((normalizers, split_rule_of(PyList::new(value.py(), rest)?.as_any())?))
}

/// A normalizer step from Python: `(kind, pattern, content, literal, left, right)`.
fn normalize_step_of(
    (kind, pattern, content, literal, left, right): (String, String, String, bool, bool, bool),
) -> PyResult<NormalizeStep> {
    Ok(match kind.as_str() {
        "nfc" => NormalizeStep::Nfc,
        "nfd" => NormalizeStep::Nfd,
        "nfkc" => NormalizeStep::Nfkc,
        "nfkd" => NormalizeStep::Nfkd,
        "lowercase" => NormalizeStep::Lowercase,
        "strip" => NormalizeStep::Strip { left, right },
        "replace" => NormalizeStep::Replace { pattern, literal, content },
        "prepend" => NormalizeStep::Prepend(pattern),
        "prefix_space" => NormalizeStep::PrefixSpace,
        "precompiled" => NormalizeStep::Precompiled(pattern),
        _ => return Err(PyValueError::new_err(format!("unknown normalizer {kind:?}"))),
    })
}

/// A normalizer step for Python, as [`model_split_of`] takes it.
fn normalize_step_to_py(step: &NormalizeStep) -> (&'static str, String, String, bool, bool, bool) {
    match step {
        NormalizeStep::Nfc => ("nfc", String::new(), String::new(), false, false, false),
        NormalizeStep::Nfd => ("nfd", String::new(), String::new(), false, false, false),
        NormalizeStep::Nfkc => ("nfkc", String::new(), String::new(), false, false, false),
        NormalizeStep::Nfkd => ("nfkd", String::new(), String::new(), false, false, false),
        NormalizeStep::Lowercase => ("lowercase", String::new(), String::new(), false, false, false),
        NormalizeStep::Strip { left, right } => ("strip", String::new(), String::new(), false, *left, *right),
        NormalizeStep::Replace { pattern, literal, content } => {
            ("replace", pattern.clone(), content.clone(), *literal, false, false)
        }
        NormalizeStep::Prepend(prefix) => ("prepend", prefix.clone(), String::new(), false, false, false),
        NormalizeStep::PrefixSpace => ("prefix_space", String::new(), String::new(), false, false, false),
        NormalizeStep::Precompiled(charsmap) => ("precompiled", charsmap.clone(), String::new(), false, false, false),
    }
}

/// A split rule for Python, as [`split_rule_of`] takes it.
pub(crate) fn split_rule_to_py<'py>(py: Python<'py>, rule: &SplitRule) -> PyResult<Bound<'py, PyAny>> {
    match rule {
        SplitRule::Pattern(pattern) => Ok(PyString::new(py, pattern).into_any()),
        SplitRule::Steps(steps) => Ok(PyList::new(py, steps.iter().map(|step| split_step_to_py(py, step)))?.into_any()),
        SplitRule::ByteLevel(ByteLevelSteps { before, add_prefix_space, use_regex, after }) => {
            let byte_level = ("byte_level", *add_prefix_space, *use_regex).into_pyobject(py)?.into_any();
            let items = before
                .iter()
                .map(|step| split_step_to_py(py, step))
                .chain(std::iter::once(byte_level))
                .chain(after.iter().map(|step| split_step_to_py(py, step)));
            Ok(PyList::new(py, items)?.into_any())
        }
    }
}

/// A Split step for Python, as [`split_rule_of`] takes it.
fn split_step_to_py<'py>(py: Python<'py>, step: &SplitStep) -> Bound<'py, PyAny> {
    (step.pattern.as_str(), step.literal, step.behavior.name(), step.invert)
        .into_pyobject(py)
        .expect("a tuple of str and bool converts")
        .into_any()
}

/// Raises one of the exception classes of `hf_bpe.errors`, made from one argument.
fn hf_bpe_error<'py>(py: Python<'py>, class: &str, argument: impl IntoPyObject<'py>) -> PyErr {
    hf_bpe_error_of(py, class, (argument,))
}

/// Raises one of the exception classes of `hf_bpe.errors`, made from `arguments`.
fn hf_bpe_error_of<'py>(py: Python<'py>, class: &str, arguments: impl pyo3::call::PyCallArgs<'py>) -> PyErr {
    match py
        .import("hf_bpe.errors")
        .and_then(|module| module.getattr(class))
    {
        Ok(class) => match class.call1(arguments) {
            Ok(error) => PyErr::from_value(error),
            Err(error) => error,
        },
        Err(error) => error,
    }
}

/// `UnknownTokenError` for `id` in a vocabulary of `n_vocab` ids.
fn unknown_token<'py>(py: Python<'py>, id: impl IntoPyObject<'py>, n_vocab: usize) -> PyErr {
    hf_bpe_error_of(py, "UnknownTokenError", (id, n_vocab))
}

/// The text of a `str`, with lone surrogates handled as tiktoken does: round-trip through UTF-16
/// with `surrogatepass`, which joins valid surrogate pairs and replaces lone ones with U+FFFD.
fn text_of<'a, 'py>(value: &'a Bound<'py, PyAny>, what: &str) -> PyResult<Cow<'a, str>> {
    let text = value.cast::<PyString>().map_err(|_| {
        let type_name = type_name(value);
        PyTypeError::new_err(format!("{what} expects str, got {type_name}"))
    })?;
    match text.to_str() {
        Ok(text) => Ok(Cow::Borrowed(text)),
        Err(_) => {
            let repaired = text
                .call_method1("encode", ("utf-16", "surrogatepass"))?
                .call_method1("decode", ("utf-16", "replace"))?;
            Ok(Cow::Owned(
                repaired.cast::<PyString>()?.to_str()?.to_owned(),
            ))
        }
    }
}

/// The name of `value`'s type, for error messages ("" if it has none).
pub(crate) fn type_name(value: &Bound<'_, PyAny>) -> String {
    value.get_type().name().map(|name| name.to_string()).unwrap_or_default()
}

/// A part to count: a `str`'s text, or bytes still to be checked as UTF-8.
enum Part<'a> {
    Text(Cow<'a, str>),
    Utf8(&'a [u8]),
}

/// Ids from a Python sequence of ints, each checked against the vocabulary's id range.
fn ids_of(py: Python<'_>, value: &Bound<'_, PyAny>, n_vocab: usize) -> PyResult<Vec<Rank>> {
    if value.is_instance_of::<PyString>() || value.is_instance_of::<PyBytes>() {
        return Err(PyTypeError::new_err(
            "expected a sequence of int token ids, got a string",
        ));
    }
    // Extracting allocates by the sequence's length (unchecked: an abort if it fails).
    if let Ok(len) = value.len() {
        hf_bpe_core::memory::ensure_headroom(len.saturating_mul(12), "reading the ids", len, "ids");
    }
    let ids: Vec<i64> = match value.extract() {
        Ok(ids) => ids,
        Err(_) => {
            // An int too large for i64 is an unknown token, not a type error.
            if let Ok(items) = value.try_iter() {
                for item in items.flatten() {
                    if item.is_instance_of::<PyInt>() && item.extract::<i64>().is_err() {
                        return Err(unknown_token(py, item, n_vocab));
                    }
                }
            }
            let type_name = type_name(value);
            return Err(PyTypeError::new_err(format!(
                "expected a sequence of int token ids, got {type_name}"
            )));
        }
    };
    ids.into_iter()
        .map(|id| Rank::try_from(id).map_err(|_| unknown_token(py, id, n_vocab)))
        .collect()
}

/// The threads a pool has when no `num_threads` is given: `RAYON_NUM_THREADS` when it is set to a
/// positive number (as rayon reads it), else every core.
fn default_threads() -> usize {
    std::env::var("RAYON_NUM_THREADS")
        .ok()
        .and_then(|threads| threads.trim().parse::<usize>().ok())
        .filter(|&threads| threads > 0)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// The thread pool for `num_threads` (None: [`default_threads`]), one per process and size.
///
/// Never rayon's global pool: its threads live only in the process that started them, so a
/// process forked after that (a `datasets.map(num_proc=...)` worker, a `multiprocessing` fork)
/// would wait for them forever. Pools are keyed by process id, so a forked child builds its own.
pub(crate) fn thread_pool(num_threads: Option<usize>) -> PyResult<Arc<rayon::ThreadPool>> {
    type PoolsByProcessAndSize = FxHashMap<(u32, usize), Arc<rayon::ThreadPool>>;
    static POOLS: OnceLock<Mutex<PoolsByProcessAndSize>> = OnceLock::new();
    let threads = match num_threads {
        Some(0) => {
            return Err(PyValueError::new_err(
                "num_threads must be at least 1 (or None for all cores)",
            ))
        }
        Some(threads) => threads,
        None => default_threads(),
    };
    let mut pools = POOLS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|poison| poison.into_inner());
    if let Some(pool) = pools.get(&(std::process::id(), threads)) {
        return Ok(pool.clone());
    }
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .map_err(|error| {
            PyValueError::new_err(format!("cannot start {threads} threads: {error}"))
        })?;
    let pool = Arc::new(pool);
    pools.insert((std::process::id(), threads), pool.clone());
    Ok(pool)
}

/// numpy, imported on first use (once): without it, an `ImportError` rather than a panic of the
/// array API's first use.
pub(crate) fn numpy_imported(py: Python<'_>) -> PyResult<()> {
    static NUMPY: pyo3::sync::PyOnceLock<()> = pyo3::sync::PyOnceLock::new();
    NUMPY.get_or_try_init(py, || py.import("numpy").map(drop)).map(|_| ())
}

/// Cuts `items` to its length when its buffer has much more room (over a quarter more, and 64
/// items): for a buffer handed to Python as it is (an array), which may be kept long after.
pub(crate) fn trim_room<T>(items: &mut Vec<T>) {
    if items.capacity() - items.len() > items.len() / 4 + 64 {
        items.shrink_to_fit();
    }
}

/// An empty buffer with room for exactly `len` items, to be written once from end to end (an
/// output array), its whole huge pages advised before anything touches them; a `MemoryError` with
/// `message()` when the system has no memory for it.
pub(crate) fn output_buffer<T>(len: usize, message: impl FnOnce() -> String) -> PyResult<Vec<T>> {
    let mut items = Vec::new();
    items
        .try_reserve_exact(len)
        .map_err(|_| pyo3::exceptions::PyMemoryError::new_err(message()))?;
    hf_bpe_core::huge::advise_within(items.spare_capacity_mut());
    Ok(items)
}

/// The ids of `parts`, one after another, as a NumPy `uint32` array that owns them: one part's
/// buffer is handed over as it is (cut to its length when it has much more room); several (the
/// parts of a long text) are copied into one buffer on the pool's threads, each part by one
/// thread, on huge pages where it spans some.
fn numpy_u32<'py>(py: Python<'py>, mut parts: Vec<Vec<Rank>>) -> PyResult<Bound<'py, PyAny>> {
    numpy_imported(py)?;
    let ids = if parts.len() == 1 {
        let mut ids = parts.pop().unwrap_or_default();
        trim_room(&mut ids);
        ids
    } else {
        let pool = thread_pool(None)?;
        let total: usize = parts.iter().map(Vec::len).sum();
        let mut ids: Vec<Rank> = output_buffer(total, || {
            format!("out of memory: could not allocate the array of {total} ids; encode the text in smaller parts")
        })?;
        py.detach(|| {
            let mut slices = Vec::with_capacity(parts.len());
            let mut rest = &mut ids.spare_capacity_mut()[..total];
            for part in &parts {
                let (slice, after) = rest.split_at_mut(part.len());
                slices.push(slice);
                rest = after;
            }
            pool.install(|| {
                slices.into_par_iter().zip(&parts).for_each(|(slice, part)| {
                    // SAFETY: `slice` is `part.len()` cells of the buffer's spare room, apart from
                    // every other part's.
                    unsafe { std::ptr::copy_nonoverlapping(part.as_ptr(), slice.as_mut_ptr().cast::<Rank>(), part.len()) }
                });
            });
        });
        // SAFETY: the parts' lengths add up to `total`, and each part was copied into its own
        // cells, one after another from the start.
        unsafe { ids.set_len(total) };
        ids
    };
    Ok(numpy::PyArray1::from_vec(py, ids).into_any())
}

/// The ids of `rows`, one row after another, as bytes of native `uint32`s.
fn u32_bytes<'py>(py: Python<'py>, rows: &[Vec<Rank>]) -> PyResult<Bound<'py, PyBytes>> {
    let total: usize = rows.iter().map(Vec::len).sum();
    PyBytes::new_with(py, total * 4, |buffer| {
        for (chunk, &id) in buffer.chunks_exact_mut(4).zip(rows.iter().flatten()) {
            chunk.copy_from_slice(&id.to_ne_bytes());
        }
        Ok(())
    })
}

/// `work` applied to each item on `pool`'s threads, results in order. A panic in a worker is
/// re-raised in the calling thread (rayon's `install`), where [`guarded`] reports it.
pub(crate) fn parallel_map<I: Sync, O: Send>(
    pool: &rayon::ThreadPool,
    items: &[I],
    work: impl Fn(&I) -> O + Sync + Send,
) -> Vec<O> {
    pool.install(|| items.par_iter().map(work).collect())
}

/// `value` as an id, if it is one a model may hold (0 to 2**31 - 1).
fn id_below_limit(value: i64) -> Option<Rank> {
    Rank::try_from(value).ok().filter(|&id| id <= MAX_ID)
}

/// Token bytes -> id pairs from a dict, ids checked to be in range.
fn token_ids_of(tokens: &Bound<'_, PyDict>, what: &str) -> PyResult<Vec<(Vec<u8>, Rank)>> {
    let py = tokens.py();
    let mut list = Vec::with_capacity(tokens.len());
    for (token, rank) in tokens.iter() {
        let token = token.cast::<PyBytes>().map_err(|_| {
            PyTypeError::new_err(format!(
                "{what} keys must be bytes, got {}",
                token.repr().map(|r| r.to_string()).unwrap_or_default()
            ))
        })?;
        let out_of_range = |rank: &dyn std::fmt::Display| {
            hf_bpe_error(
                py,
                "InvalidVocabularyError",
                format!(
                    "rank {rank} of {} is out of range (0 to 2**31 - 1)",
                    token.repr().map(|r| r.to_string()).unwrap_or_default()
                ),
            )
        };
        let rank: i64 = match rank.extract() {
            Ok(rank) => rank,
            Err(_) if rank.is_instance_of::<PyInt>() => return Err(out_of_range(&rank)),
            Err(_) => {
                return Err(PyTypeError::new_err(format!(
                    "the rank of {} must be an int, got {}",
                    token.repr().map(|r| r.to_string()).unwrap_or_default(),
                    rank.repr().map(|r| r.to_string()).unwrap_or_default()
                )))
            }
        };
        let rank = id_below_limit(rank).ok_or_else(|| out_of_range(&rank))?;
        list.push((token.as_bytes().to_vec(), rank));
    }
    Ok(list)
}

fn specials_of(special_tokens: &Bound<'_, PyDict>) -> PyResult<Vec<(String, Rank)>> {
    let py = special_tokens.py();
    let mut specials = Vec::with_capacity(special_tokens.len());
    for (token, id) in special_tokens.iter() {
        let token: String = match token.cast::<PyString>() {
            Ok(text) => text.to_str().map(str::to_owned).map_err(|_| {
                hf_bpe_error(
                    py,
                    "InvalidVocabularyError",
                    format!(
                        "special token {} is not valid text (it holds a lone surrogate)",
                        text.repr().map(|r| r.to_string()).unwrap_or_default()
                    ),
                )
            })?,
            Err(_) => {
                return Err(PyTypeError::new_err(format!(
                    "special token names must be str, got {}",
                    token.repr().map(|r| r.to_string()).unwrap_or_default()
                )))
            }
        };
        let out_of_range = |id: &dyn std::fmt::Display| {
            hf_bpe_error(
                py,
                "InvalidVocabularyError",
                format!("special token {token:?} has id {id}, out of range (0 to 2**31 - 1)"),
            )
        };
        let id: i64 = match id.extract() {
            Ok(id) => id,
            Err(_) if id.is_instance_of::<PyInt>() => return Err(out_of_range(&id)),
            Err(_) => {
                return Err(PyTypeError::new_err(format!(
                    "the id of special token {token:?} must be an int, got {}",
                    id.repr().map(|r| r.to_string()).unwrap_or_default()
                )))
            }
        };
        let id = id_below_limit(id).ok_or_else(|| out_of_range(&id))?;
        specials.push((token, id));
    }
    Ok(specials)
}

/// Merges as pairs of ids, each in range.
fn merge_ids_of(merges: &Bound<'_, PyAny>) -> PyResult<Vec<(Rank, Rank)>> {
    let py = merges.py();
    let mut list = Vec::new();
    let items = merges
        .try_iter()
        .map_err(|_| PyTypeError::new_err("merges must be an iterable of (int, int) pairs"))?;
    for (line, item) in items.enumerate() {
        let item = item?;
        let (left, right): (Bound<'_, PyAny>, Bound<'_, PyAny>) = item.extract().map_err(|_| {
            PyTypeError::new_err(format!(
                "merge {line} must be a pair of ids, got {}",
                item.repr().map(|r| r.to_string()).unwrap_or_default()
            ))
        })?;
        let id_of = |id: &Bound<'_, PyAny>| -> PyResult<Rank> {
            let out_of_range = || {
                hf_bpe_error(
                    py,
                    "InvalidVocabularyError",
                    format!("merge {line} names id {id}, out of range (0 to 2**31 - 1)"),
                )
            };
            match id.extract::<i64>() {
                Ok(value) => id_below_limit(value).ok_or_else(out_of_range),
                Err(_) if id.is_instance_of::<PyInt>() => Err(out_of_range()),
                Err(_) => Err(PyTypeError::new_err(format!("merge {line} names {id}, not an int id"))),
            }
        };
        list.push((id_of(&left)?, id_of(&right)?));
    }
    Ok(list)
}

/// `tokenizer.json`'s vocabulary (bytes, id) and merges (pairs of ids) as
/// [`CoreBPE::from_spelled_merges`] reads them; `Ok(None)` for anything irregular. Tokens are
/// looked up as the `&str` of the dictionary's own keys: no copies.
#[allow(clippy::type_complexity)]
fn spelled_vocab_and_merges(
    vocab: &Bound<'_, PyDict>,
    merges: &Bound<'_, PyList>,
    specials: &[(String, Rank)],
) -> PyResult<Option<(Vec<(Vec<u8>, Rank)>, Vec<(Rank, Rank)>)>> {
    // The keys, kept alive while their text is borrowed below.
    let mut entries: Vec<(Bound<'_, PyString>, Rank)> = Vec::with_capacity(vocab.len());
    for (spelled, id) in vocab.iter() {
        let (Ok(spelled), Ok(id)) = (spelled.cast_into::<PyString>(), id.cast::<PyInt>()) else {
            return Ok(None);
        };
        let Some(id) = id.extract::<i64>().ok().and_then(id_below_limit) else { return Ok(None) };
        entries.push((spelled, id));
    }
    let mut texts = Vec::with_capacity(entries.len());
    for (spelled, id) in &entries {
        let Ok(spelled) = spelled.to_str() else { return Ok(None) };
        texts.push((spelled, *id));
    }
    let Some((spelled_vocab, tokens)) = SpelledVocab::new(texts.into_iter(), specials) else {
        return Ok(None);
    };
    let mut merge_ids = Vec::with_capacity(merges.len());
    let mut joined = String::new();
    let mut pair_parts: [Option<Bound<'_, PyString>>; 2] = [None, None];
    for merge in merges.iter() {
        let line;
        let (left, right): (&str, &str) = if let Ok(text) = merge.cast::<PyString>() {
            line = text.clone();
            let Ok(text) = line.to_str() else { return Ok(None) };
            let Some(pair) = text.split_once(' ') else { return Ok(None) };
            pair
        } else if let Ok(pair) = merge.cast::<PyList>() {
            if pair.len() != 2 {
                return Ok(None);
            }
            for (slot, part) in pair_parts.iter_mut().zip(pair.iter()) {
                let Ok(part) = part.cast_into::<PyString>() else { return Ok(None) };
                *slot = Some(part);
            }
            let [Some(left), Some(right)] = &pair_parts else { return Ok(None) };
            let (Ok(left), Ok(right)) = (left.to_str(), right.to_str()) else { return Ok(None) };
            (left, right)
        } else {
            return Ok(None);
        };
        match spelled_vocab.merge(&mut joined, left, right) {
            Some(Some(pair)) => merge_ids.push(pair),
            Some(None) => {}
            None => return Ok(None),
        }
    }
    Ok(Some((tokens, merge_ids)))
}

fn build_error(py: Python<'_>, error: BuildError) -> PyErr {
    match error {
        BuildError::Pattern(error) => PyValueError::new_err(error.to_string()),
        other => hf_bpe_error(py, "InvalidVocabularyError", other.to_string()),
    }
}

/// Which special tokens `encode` turns into their ids, and which make it raise.
#[pyclass(frozen, module = "hf_bpe._core")]
struct SpecialPolicy {
    allowed: SpecialMatcher,
    disallowed: SpecialMatcher,
}

/// The Rust model behind `hf_bpe.BPE`.
#[pyclass(frozen, module = "hf_bpe._core")]
struct CoreBPE {
    model: Model,
    /// Encodes everything as ordinary text.
    ordinary: SpecialPolicy,
    ints: IntTable,
}

impl CoreBPE {
    /// Raw bytes holding a byte the vocabulary lacks cannot be encoded (`tokenizers` drops such a
    /// byte from text; these bytes are not text).
    fn refuse_missing_bytes(&self, bytes: &[u8]) -> PyResult<()> {
        match self.model.missing_byte_in(bytes) {
            Some(byte) => Err(PyValueError::new_err(format!(
                "these bytes hold the byte 0x{byte:02X}, which the vocabulary lacks (it has no token b'\\x{byte:02x}'); \
                 {} drops such bytes from text, but raw bytes that need it cannot be encoded",
                if self.model.dropped_after_merging() { "llama.cpp" } else { "tokenizers" }
            ))),
            None => Ok(()),
        }
    }

    fn with_model(model: Model) -> Self {
        let ordinary = SpecialPolicy {
            allowed: SpecialMatcher::new([]),
            disallowed: SpecialMatcher::new([]),
        };
        let ints = IntTable::new(model.n_vocab());
        Self { model, ordinary, ints }
    }

    fn encode_policy(
        &self,
        text: &str,
        policy: &SpecialPolicy,
    ) -> Result<Vec<Rank>, EncodeFailure> {
        refuse_disallowed(text, policy)?;
        let mut ids = hf_bpe_core::memory::with_capacity(text.len() / 3, "the ids", text.len(), "bytes of text");
        self.model.encode(text, &policy.allowed, &mut ids).map_err(EncodeFailure::Split)?;
        Ok(ids)
    }

    /// The ids of one text, in parts that follow one another: a long one (see
    /// [`Model::parallel_parts`]) cut into parts encoded on this process's pool, without the GIL
    /// ([`Model::encode_parallel_parts`]); others whole, on the calling thread.
    fn encode_one(
        &self,
        py: Python<'_>,
        text: &str,
        policy: &SpecialPolicy,
    ) -> PyResult<Result<Vec<Vec<Rank>>, EncodeFailure>> {
        if self.model.parallel_parts(text.len(), default_threads) < 2 {
            return Ok(self.run(py, text.len(), || self.encode_policy(text, policy)).map(|ids| vec![ids]));
        }
        let pool = thread_pool(None)?;
        Ok(py.detach(|| {
            pool.install(|| {
                refuse_disallowed(text, policy)?;
                self.model.encode_parallel_parts(text, &policy.allowed).map_err(EncodeFailure::Split)
            })
        }))
    }

    /// A Python list of the ids of `parts` (from [`CoreBPE::encode_one`]): several parts are
    /// copied into it on the pool's threads.
    fn list_of_parts<'py>(&self, py: Python<'py>, parts: &[Vec<Rank>]) -> PyResult<Bound<'py, PyList>> {
        match parts {
            [ids] => self.ints.list(py, ids),
            _ => self.ints.list_of_parts(py, parts, &*thread_pool(None)?),
        }
    }

    /// The ids of every text of `texts` (an iterable of str), encoded in parallel without the GIL.
    fn batch(
        &self,
        py: Python<'_>,
        texts: &Bound<'_, PyAny>,
        policy: Option<&SpecialPolicy>,
        pool: &rayon::ThreadPool,
        what: &str,
    ) -> PyResult<Vec<Vec<Rank>>> {
        if texts.is_instance_of::<PyString>() {
            return Err(PyTypeError::new_err(format!("{what} expects a list of str, got a single str")));
        }
        let items: Vec<Bound<'_, PyAny>> = texts
            .try_iter()
            .map_err(|_| PyTypeError::new_err(format!("{what} expects an iterable of str")))?
            .collect::<PyResult<_>>()?;
        let texts: Vec<Cow<'_, str>> = items.iter().map(|item| text_of(item, what)).collect::<PyResult<_>>()?;
        let policy = policy.unwrap_or(&self.ordinary);
        py.detach(|| parallel_map(pool, &texts, |text| self.encode_policy(text, policy)))
            .into_iter()
            .map(|result| result.map_err(|f| f.into_py(py)))
            .collect()
    }

    fn run<T: Send>(&self, py: Python<'_>, size: usize, work: impl FnOnce() -> T + Send) -> T {
        if size >= RELEASE_GIL_FROM {
            py.detach(work)
        } else {
            work()
        }
    }
}

/// `Err` naming the first text of `policy`'s disallowed ones that `text` holds.
fn refuse_disallowed(text: &str, policy: &SpecialPolicy) -> Result<(), EncodeFailure> {
    match policy.disallowed.find(text) {
        Some((token, _)) => Err(EncodeFailure::Disallowed(token.to_owned())),
        None => Ok(()),
    }
}

enum EncodeFailure {
    Disallowed(String),
    Split(SplitError),
}

impl EncodeFailure {
    fn into_py(self, py: Python<'_>) -> PyErr {
        match self {
            EncodeFailure::Disallowed(token) => {
                hf_bpe_error(py, "DisallowedSpecialTokenError", token)
            }
            EncodeFailure::Split(error) => split_error(error),
        }
    }
}

#[pymethods]
impl CoreBPE {
    #[new]
    fn new(
        ranks: &Bound<'_, PyDict>,
        split: &Bound<'_, PyAny>,
        special_tokens: &Bound<'_, PyDict>,
    ) -> PyResult<Self> {
        let py = ranks.py();
        guarded(py, || {
            check_build_memory(ranks.len() + special_tokens.len());
            let rank_list = token_ids_of(ranks, "ranks")?;
            let specials = specials_of(special_tokens)?;
            let (normalizers, split) = model_split_of(split)?;
            // On this process's pool (rayon's global pool does not survive a fork: a child that
            // used it would wait forever for threads that were not forked with it).
            let pool = thread_pool(None)?;
            let mut model = py
                .detach(|| pool.install(|| Model::from_ranks(rank_list, split, specials)))
                .map_err(|error| build_error(py, error))?;
            model.set_normalizer(normalizers).map_err(|error| build_error(py, error))?;
            Ok(Self::with_model(model))
        })
    }

    /// A merges-list model (GPT-2 files, HF `tokenizer.json`): `vocab` maps token bytes to ids,
    /// `merges` lists pairs of ids in priority order. Single bytes the vocabulary lacks are dropped
    /// from text before merging (`tokenizers`), or after merging with `dropped_after_merging`
    /// (llama.cpp: each is a symbol no merge joins).
    #[staticmethod]
    #[pyo3(signature = (vocab, merges, split, special_tokens, ignore_merges, dropped_after_merging=false))]
    fn from_merges(
        vocab: &Bound<'_, PyDict>,
        merges: &Bound<'_, PyAny>,
        split: &Bound<'_, PyAny>,
        special_tokens: &Bound<'_, PyDict>,
        ignore_merges: bool,
        dropped_after_merging: bool,
    ) -> PyResult<Self> {
        let py = vocab.py();
        guarded(py, || {
            check_build_memory(vocab.len() + special_tokens.len() + merges.len().unwrap_or(0));
            let vocab = token_ids_of(vocab, "vocab")?;
            let specials = specials_of(special_tokens)?;
            let merges = merge_ids_of(merges)?;
            let (normalizers, split) = model_split_of(split)?;
            let pool = thread_pool(None)?;
            let mut model = py
                .detach(|| pool.install(|| Model::from_merges(vocab, merges, split, specials, ignore_merges)))
                .map_err(|error| build_error(py, error))?;
            model.set_normalizer(normalizers).map_err(|error| build_error(py, error))?;
            model.set_dropped_after_merging(dropped_after_merging);
            Ok(Self::with_model(model))
        })
    }

    /// A merges-list model read straight from a byte-level `tokenizer.json`'s `model.vocab` (token
    /// spelled in GPT-2's byte-to-unicode alphabet -> id) and `model.merges` (`"left right"` or
    /// `[left, right]`), with the added tokens `special_tokens`; the reading of
    /// `conversion.hf.load`, done here because a 256,000-token file takes seconds in Python. Tokens
    /// spelled outside the alphabet are left out (byte-level input never forms them), and so are
    /// merges naming them or an added token. `None` when anything needs that reading's checks
    /// and messages: an id that is not an int in range, an added token's id or text elsewhere in
    /// the vocabulary, a merge that is not a pair of vocabulary tokens or forms none. With
    /// `rank_rule`, the model becomes the rank model it equals (tiktoken's rule) when the core proves
    /// they encode every text alike and the vocabulary has every byte (`kind` tells).
    #[staticmethod]
    fn from_spelled_merges(
        vocab: &Bound<'_, PyDict>,
        merges: &Bound<'_, PyList>,
        split: &Bound<'_, PyAny>,
        special_tokens: &Bound<'_, PyDict>,
        ignore_merges: bool,
        rank_rule: bool,
    ) -> PyResult<Option<Self>> {
        let py = vocab.py();
        guarded(py, || {
            check_build_memory(vocab.len() + special_tokens.len() + merges.len());
            let specials = specials_of(special_tokens)?;
            let Some((tokens, merge_ids)) = spelled_vocab_and_merges(vocab, merges, &specials)? else {
                return Ok(None);
            };
            let (normalizers, split) = model_split_of(split)?;
            let build = if rank_rule { Model::from_merges_as_ranks } else { Model::from_merges };
            // On this process's pool, where the core builds independent tables side by side.
            let pool = thread_pool(None)?;
            let mut model = py
                .detach(|| pool.install(|| build(tokens, merge_ids, split, specials, ignore_merges)))
                .map_err(|error| build_error(py, error))?;
            model.set_normalizer(normalizers).map_err(|error| build_error(py, error))?;
            Ok(Some(Self::with_model(model)))
        })
    }

    /// A merges-list model of a byte-level `tokenizer.json` whose vocabulary and merges the core
    /// read (`read_tokenizer_json`), as [`CoreBPE::from_spelled_merges`] builds one from Python's
    /// dict and list (same `None` for anything irregular, same `rank_rule`), all without the GIL.
    #[staticmethod]
    fn from_tokenizer_json(
        model: &Bound<'_, tokenizer_json::TokenizerJsonModel>,
        split: &Bound<'_, PyAny>,
        special_tokens: &Bound<'_, PyDict>,
        ignore_merges: bool,
        rank_rule: bool,
    ) -> PyResult<Option<Self>> {
        let py = model.py();
        let file = &model.get().file;
        guarded(py, || {
            check_build_memory(file.vocab.len() + special_tokens.len() + file.merges.len());
            let specials = specials_of(special_tokens)?;
            let (normalizers, split) = model_split_of(split)?;
            let build = if rank_rule { Model::from_merges_as_ranks } else { Model::from_merges };
            let pool = thread_pool(None)?;
            let built = py.detach(|| {
                pool.install(|| {
                    let (tokens, merge_ids) = file.tokens_and_merges(&specials)?;
                    Some(build(tokens, merge_ids, split, specials, ignore_merges))
                })
            });
            let Some(built) = built else { return Ok(None) };
            let mut model = built.map_err(|error| build_error(py, error))?;
            model.set_normalizer(normalizers).map_err(|error| build_error(py, error))?;
            Ok(Some(Self::with_model(model)))
        })
    }

    /// A merges-list model whose symbols carry word affixes (`tokenizers`' `continuing_subword_prefix`
    /// and `end_of_word_suffix`): `symbols` gives for each place of a byte in its piece (alone,
    /// first, inside, last) the id of each byte's symbol there (None: the vocabulary lacks it);
    /// `merges` lists `(left, right, merged)` ids in priority order; `unknown` is the id unknown
    /// symbols become (None: they are left out), fused into one per run with `fuse_unknown`;
    /// `whole` maps the pieces that are tokens to their ids (`ignore_merges`), or is None;
    /// `byte_fallback` gives for each place and byte the ids of the `<0xXX>` tokens of the symbol's
    /// UTF-8 bytes (empty: the vocabulary lacks one), or is None without `byte_fallback`.
    #[staticmethod]
    #[allow(clippy::too_many_arguments)]
    fn from_affixed(
        vocab: &Bound<'_, PyDict>,
        symbols: Vec<Vec<Option<Rank>>>,
        merges: Vec<(Rank, Rank, Rank)>,
        unknown: Option<Rank>,
        fuse_unknown: bool,
        whole: Option<&Bound<'_, PyDict>>,
        byte_fallback: Option<Vec<Vec<Vec<Rank>>>>,
        split: &Bound<'_, PyAny>,
        special_tokens: &Bound<'_, PyDict>,
    ) -> PyResult<Self> {
        let py = vocab.py();
        guarded(py, || {
            check_build_memory(vocab.len() + special_tokens.len() + merges.len());
            let vocab = token_ids_of(vocab, "vocab")?;
            let specials = specials_of(special_tokens)?;
            let whole = match whole {
                Some(whole) => Some(token_ids_of(whole, "whole")?.into_iter().map(|(token, id)| (token.into_boxed_slice(), id)).collect()),
                None => None,
            };
            if symbols.len() != 4 || symbols.iter().any(|place| place.len() != 256) {
                return Err(PyValueError::new_err("symbols must be 4 lists of 256 ids or None"));
            }
            let mut table = [[NO_SYMBOL; 256]; 4];
            for (row, place) in table.iter_mut().zip(&symbols) {
                for (slot, id) in row.iter_mut().zip(place) {
                    *slot = id.unwrap_or(NO_SYMBOL);
                }
            }
            if byte_fallback.as_ref().is_some_and(|places| places.len() != 4 || places.iter().any(|place| place.len() != 256)) {
                return Err(PyValueError::new_err("byte_fallback must be 4 lists of 256 lists of ids, or None"));
            }
            let (normalizers, split) = model_split_of(split)?;
            let mut affixed = Affixed::new(table, &merges, unknown, fuse_unknown, whole);
            if let Some(byte_fallback) = byte_fallback {
                affixed = affixed.with_byte_fallback(byte_fallback);
            }
            let mut model = py
                .detach(|| Model::from_affixed(vocab, affixed, split, specials))
                .map_err(|error| build_error(py, error))?;
            model.set_normalizer(normalizers).map_err(|error| build_error(py, error))?;
            Ok(Self::with_model(model))
        })
    }

    /// For a model whose symbols carry word affixes: `(symbols, merges, unknown, fuse_unknown,
    /// ignore_merges, byte_fallback)` as [`CoreBPE::from_affixed`] takes them (merges as `(left,
    /// right)`); else None.
    #[getter]
    fn affixed(&self) -> Option<AffixedParts> {
        let affixed = self.model.affixed()?;
        let symbols = affixed
            .symbols()
            .iter()
            .map(|row| row.iter().map(|&id| (id != NO_SYMBOL).then_some(id)).collect())
            .collect();
        let (unknown, fuse_unknown, ignore_merges) = (affixed.unknown(), affixed.fuse_unknown(), affixed.ignore_merges());
        Some((symbols, affixed.merge_list().to_vec(), unknown, fuse_unknown, ignore_merges, affixed.byte_fallback()))
    }

    /// A SentencePiece BPE model: `pieces` are `(text, score, type)` with the protobuf's type
    /// numbers, ids by position; `charsmap` is the normalizer's precompiled map (empty: identity);
    /// `metaspace` is `(prepend, first_only, unless_space, split)`; `normalizer` holds `tokenizers`'
    /// normalizer steps as [`model_split_of`] takes them.
    #[staticmethod]
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (pieces, byte_fallback, unk_surface, charsmap, add_dummy_prefix, remove_extra_whitespaces,
                        escape_whitespaces, metaspace=None, normalizer=Vec::new()))]
    fn sentencepiece(
        py: Python<'_>,
        pieces: &Bound<'_, PyAny>,
        byte_fallback: bool,
        unk_surface: String,
        charsmap: Vec<u8>,
        add_dummy_prefix: bool,
        remove_extra_whitespaces: bool,
        escape_whitespaces: bool,
        metaspace: Option<(bool, bool, bool, bool)>,
        normalizer: Vec<(String, String, String, bool, bool, bool)>,
    ) -> PyResult<Self> {
        guarded(py, || {
            check_build_memory(pieces.len().unwrap_or(0));
            let pieces: Vec<(String, f32, i32)> = pieces.extract()?;
            let pieces = pieces
                .into_iter()
                .enumerate()
                .map(|(id, (text, score, kind))| {
                    let kind = PieceKind::from_proto(kind).ok_or_else(|| {
                        hf_bpe_error(py, "InvalidVocabularyError", format!("piece {id} ({text:?}) has unknown type {kind}"))
                    })?;
                    Ok(Piece { text, score, kind })
                })
                .collect::<PyResult<Vec<_>>>()?;
            let spec = SentencePieceSpec {
                pieces,
                byte_fallback,
                unk_surface,
                charsmap,
                add_dummy_prefix,
                remove_extra_whitespaces,
                escape_whitespaces,
                metaspace: metaspace
                    .map(|(prepend, first_only, unless_space, split)| Metaspace { prepend, first_only, unless_space, split }),
                normalizer: normalizer.into_iter().map(normalize_step_of).collect::<PyResult<_>>()?,
            };
            let model = py.detach(|| Model::from_sentencepiece(spec)).map_err(|error| build_error(py, error))?;
            Ok(Self::with_model(model))
        })
    }

    /// A policy: `allowed` special tokens are encoded as their ids, `disallowed` ones raise.
    /// `rules` gives special tokens `tokenizers`' added-token rules (`special::LSTRIP` and the
    /// others, or-ed).
    #[pyo3(signature = (allowed, disallowed, rules=Vec::new()))]
    fn special_policy(
        &self,
        py: Python<'_>,
        allowed: Vec<String>,
        disallowed: Vec<String>,
        rules: Vec<(String, u8)>,
    ) -> PyResult<SpecialPolicy> {
        guarded(py, || {
            let rules: std::collections::HashMap<String, u8> = rules.into_iter().collect();
            Ok(SpecialPolicy {
                allowed: self
                    .model
                    .special_matcher_with_rules(allowed.iter().map(String::as_str), |token| rules.get(token).copied().unwrap_or(0))
                    .map_err(split_error)?,
                // Like tiktoken, any text may be disallowed, not only special tokens.
                disallowed: SpecialMatcher::new(disallowed.iter().map(|text| (text.as_str(), 0))),
            })
        })
    }

    /// A policy that cuts out arbitrary `(text, id)` tokens (e.g. tokens added by a tokenizer at
    /// run time, or a second name of a special token) and encodes them as those ids; the texts in
    /// `disallowed` raise (none by default). Longest match wins. `rules`, when given, holds each
    /// token's `tokenizers` rules (`special::LSTRIP`, ...), in the order of `tokens`.
    #[pyo3(signature = (tokens, disallowed=Vec::new(), rules=None))]
    fn added_tokens_policy(
        &self,
        py: Python<'_>,
        tokens: Vec<(String, Rank)>,
        disallowed: Vec<String>,
        rules: Option<Vec<u8>>,
    ) -> PyResult<SpecialPolicy> {
        guarded(py, || {
            if rules.as_ref().is_some_and(|rules| rules.len() != tokens.len()) {
                return Err(PyValueError::new_err("rules must hold one entry per token"));
            }
            let rule = |index: usize| rules.as_ref().map_or(0, |rules| rules[index]);
            Ok(SpecialPolicy {
                allowed: self
                    .model
                    .added_token_matcher(tokens.iter().enumerate().map(|(index, (text, id))| (text.as_str(), *id, rule(index))))
                    .map_err(split_error)?,
                disallowed: SpecialMatcher::new(disallowed.iter().map(|text| (text.as_str(), 0))),
            })
        })
    }

    fn encode_ordinary<'py>(&self, py: Python<'py>, text: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyList>> {
        guarded(py, || {
            let text = text_of(text, "encode_ordinary")?;
            let parts = self.encode_one(py, &text, &self.ordinary)?.map_err(|f| f.into_py(py))?;
            self.list_of_parts(py, &parts)
        })
    }

    fn encode<'py>(
        &self,
        py: Python<'py>,
        text: &Bound<'py, PyAny>,
        policy: &SpecialPolicy,
    ) -> PyResult<Bound<'py, PyList>> {
        guarded(py, || {
            let text = text_of(text, "encode")?;
            let parts = self.encode_one(py, &text, policy)?.map_err(|f| f.into_py(py))?;
            self.list_of_parts(py, &parts)
        })
    }

    /// Ids and the character offset where each token starts.
    fn encode_with_offsets<'py>(
        &self,
        py: Python<'py>,
        text: &Bound<'py, PyAny>,
        policy: &SpecialPolicy,
    ) -> PyResult<(Bound<'py, PyList>, Bound<'py, PyList>)> {
        guarded(py, || {
            let text = text_of(text, "encode")?;
            let work = || -> Result<(Vec<Rank>, Vec<usize>), EncodeFailure> {
                refuse_disallowed(&text, policy)?;
                let (mut ids, mut starts) = (Vec::new(), Vec::new());
                self.model
                    .encode_with_offsets(&text, &policy.allowed, &mut ids, Some(&mut starts))
                    .map_err(EncodeFailure::Split)?;
                Ok((ids, byte_to_char_offsets(&text, starts)))
            };
            let (ids, offsets) = self.run(py, text.len(), work).map_err(|f| f.into_py(py))?;
            Ok((self.ints.list(py, &ids)?, ints::usize_list(py, &offsets)?))
        })
    }

    /// Ids and the characters each token covers, `(start, end)`, as `tokenizers` reports an
    /// encoding's offsets (see `Model::encode_with_spans`); with `within`, a range of characters,
    /// of that part of `text` only, the spans in all of it (`Model::encode_with_spans_within`).
    #[pyo3(signature = (text, policy, within=None))]
    fn encode_with_spans<'py>(
        &self,
        py: Python<'py>,
        text: &Bound<'py, PyAny>,
        policy: &SpecialPolicy,
        within: Option<(usize, usize)>,
    ) -> PyResult<(Bound<'py, PyList>, Bound<'py, PyList>)> {
        guarded(py, || {
            let text = text_of(text, "encode")?;
            let within = match within {
                None => 0..text.len(),
                Some((start, end)) => char_range_bytes(&text, start, end).ok_or_else(|| {
                    PyValueError::new_err(format!(
                        "within = ({start}, {end}) is not a range of the text's {} characters",
                        text.chars().count()
                    ))
                })?,
            };
            let work = || -> Result<(Vec<Rank>, Vec<(usize, usize)>), EncodeFailure> {
                refuse_disallowed(&text[within.clone()], policy)?;
                let (mut ids, mut spans) = (Vec::new(), Vec::new());
                self.model
                    .encode_with_spans_within(&text, within.clone(), &policy.allowed, &mut ids, &mut spans)
                    .map_err(EncodeFailure::Split)?;
                Ok((ids, byte_to_char_spans(&text, spans)))
            };
            let (ids, spans) = self.run(py, text.len(), work).map_err(|f| f.into_py(py))?;
            Ok((self.ints.list(py, &ids)?, PyList::new(py, spans)?))
        })
    }

    #[pyo3(signature = (texts, policy=None, num_threads=None))]
    fn encode_batch<'py>(
        &self,
        py: Python<'py>,
        texts: &Bound<'py, PyAny>,
        policy: Option<&SpecialPolicy>,
        num_threads: Option<usize>,
    ) -> PyResult<Bound<'py, PyList>> {
        guarded(py, || {
            let pool = thread_pool(num_threads)?;
            let rows = self.batch(py, texts, policy, &pool, "encode_batch")?;
            self.ints.lists(py, &rows, &pool)
        })
    }

    /// Like `encode`, as a NumPy `uint32` array: no Python int per id, and on the calling thread
    /// as `encode` (a batch call hands the text to the pool, which costs more than a short text's
    /// encoding).
    #[pyo3(signature = (text, policy=None))]
    fn encode_numpy<'py>(
        &self,
        py: Python<'py>,
        text: &Bound<'py, PyAny>,
        policy: Option<&SpecialPolicy>,
    ) -> PyResult<Bound<'py, PyAny>> {
        guarded(py, || {
            let text = text_of(text, "encode_to_numpy")?;
            let policy = policy.unwrap_or(&self.ordinary);
            let parts = self.encode_one(py, &text, policy)?.map_err(|f| f.into_py(py))?;
            numpy_u32(py, parts)
        })
    }

    /// Like `encode_batch`, the ids kept in Rust (`EncodedRows`) until they are laid out as padded
    /// NumPy arrays.
    #[pyo3(signature = (texts, policy=None, num_threads=None))]
    fn encode_rows(
        &self,
        py: Python<'_>,
        texts: &Bound<'_, PyAny>,
        policy: Option<&SpecialPolicy>,
        num_threads: Option<usize>,
    ) -> PyResult<padded::EncodedRows> {
        guarded(py, || {
            let pool = thread_pool(num_threads)?;
            Ok(padded::EncodedRows { rows: self.batch(py, texts, policy, &pool, "encode_batch")? })
        })
    }

    /// Like `encode_batch`, as two buffers for NumPy: every text's ids one after another (native
    /// `uint32`), and the number of ids of each text (native `uint64`).
    #[pyo3(signature = (texts, policy=None, num_threads=None))]
    fn encode_batch_flat<'py>(
        &self,
        py: Python<'py>,
        texts: &Bound<'py, PyAny>,
        policy: Option<&SpecialPolicy>,
        num_threads: Option<usize>,
    ) -> PyResult<(Bound<'py, PyBytes>, Bound<'py, PyBytes>)> {
        guarded(py, || {
            let pool = thread_pool(num_threads)?;
            let rows = self.batch(py, texts, policy, &pool, "encode_batch")?;
            let ids = u32_bytes(py, &rows)?;
            let lengths = PyBytes::new_with(py, rows.len() * 8, |buffer| {
                for (chunk, row) in buffer.chunks_exact_mut(8).zip(&rows) {
                    chunk.copy_from_slice(&(row.len() as u64).to_ne_bytes());
                }
                Ok(())
            })?;
            Ok((ids, lengths))
        })
    }

    /// The number of ids of each of `parts` (`str`, or UTF-8 bytes checked on the worker threads),
    /// without making the ids: counting texts, or a file read as bytes, needs no list of ints (and
    /// bytes no `str`).
    #[pyo3(signature = (parts, policy=None, num_threads=None))]
    fn count_utf8_batch(
        &self,
        py: Python<'_>,
        parts: Vec<Bound<'_, PyAny>>,
        policy: Option<&SpecialPolicy>,
        num_threads: Option<usize>,
    ) -> PyResult<Vec<usize>> {
        guarded(py, || {
            let pool = thread_pool(num_threads)?;
            let parts: Vec<Part<'_>> = parts
                .iter()
                .enumerate()
                .map(|(index, part)| match part.cast::<PyBytes>() {
                    Ok(bytes) => Ok(Part::Utf8(bytes.as_bytes())),
                    Err(_) if part.is_instance_of::<PyString>() => text_of(part, "count_utf8_batch").map(Part::Text),
                    Err(_) => Err(PyTypeError::new_err(format!(
                        "count_utf8_batch: part {index} is {}, not bytes or str",
                        type_name(part)
                    ))),
                })
                .collect::<PyResult<_>>()?;
            let policy = policy.unwrap_or(&self.ordinary);
            let counted = py.detach(|| {
                parallel_map(&pool, &parts, |part| {
                    let text = match part {
                        Part::Text(text) => text,
                        Part::Utf8(bytes) => match std::str::from_utf8(bytes) {
                            Ok(text) => text,
                            Err(error) => return Ok(Err(error.valid_up_to())),
                        },
                    };
                    self.encode_policy(text, policy).map(|ids| Ok(ids.len()))
                })
            });
            counted
                .into_iter()
                .enumerate()
                .map(|(index, result)| match result.map_err(|f| f.into_py(py))? {
                    Ok(count) => Ok(count),
                    Err(offset) => Err(PyValueError::new_err(format!(
                        "part {index} is not UTF-8: byte {offset} starts no valid UTF-8 sequence"
                    ))),
                })
                .collect()
        })
    }

    /// Ids of every string of an Arrow array as an Arrow list array (a chunked array or stream
    /// gives a chunked array, chunk for chunk): `prefix` and `suffix` ids frame every row, `nulls`
    /// says what a null row becomes, `dtype` is the ids' type. Encoded on the pool, GIL released.
    #[pyo3(signature = (texts, policy=None, num_threads=None, dtype="uint32", nulls="raise", prefix=Vec::new(), suffix=Vec::new()))]
    #[allow(clippy::too_many_arguments)]
    fn encode_arrow<'py>(
        &self,
        py: Python<'py>,
        texts: &Bound<'py, PyAny>,
        policy: Option<&SpecialPolicy>,
        num_threads: Option<usize>,
        dtype: &str,
        nulls: &str,
        prefix: Vec<Rank>,
        suffix: Vec<Rank>,
    ) -> PyResult<Bound<'py, PyAny>> {
        guarded(py, || {
            let id_type = arrow::IdType::from_name(dtype, self.model.n_vocab())?;
            let nulls = arrow::Nulls::from_name(nulls)?;
            let pool = thread_pool(num_threads)?;
            let (chunks, single) = arrow::string_chunks(texts)?;
            let (rows, starts) = arrow::rows_of(&chunks)?;
            if nulls == arrow::Nulls::Raise {
                if let Some(row) = rows.iter().position(Option::is_none) {
                    return Err(PyValueError::new_err(format!(
                        "encode_arrow: row {row} of the array is null (None), not a string; pass nulls='empty' \
                         to encode null rows as \"\", nulls='null' to keep them null, or drop them first \
                         (datasets: `dataset.filter(lambda row: row[column] is not None)`)"
                    )));
                }
            }
            let policy = policy.unwrap_or(&self.ordinary);
            let encode = |text: &str, out: &mut Vec<Rank>| -> Result<(), EncodeFailure> {
                refuse_disallowed(text, policy)?;
                self.model.encode(text, &policy.allowed, out).map_err(EncodeFailure::Split)
            };
            let framing = arrow::Framing { prefix: &prefix, suffix: &suffix, nulls };
            let arrays = py.detach(|| {
                let encoded = arrow::encode_chunks(&pool, &rows, &starts, encode)?;
                Ok(pool.install(|| {
                    encoded
                        .into_par_iter()
                        .zip(starts.par_windows(2))
                        .map(|(units, bounds)| arrow::ids_array(&rows[bounds[0]..bounds[1]], units, &framing, id_type))
                        .collect::<Vec<PyResult<_>>>()
                }))
            });
            let arrays = match arrays {
                Ok(arrays) => arrays.into_iter().collect::<PyResult<Vec<_>>>()?,
                Err(arrow::RowFailure { row, failure }) => {
                    let error = failure.into_py(py);
                    error.add_note(py, format!("in row {row} of the array"))?;
                    return Err(error);
                }
            };
            arrow::to_pyarrow(py, arrays, single)
        })
    }

    fn clear_cache(&self) {
        self.model.clear_cache();
    }

    fn decode_bytes<'py>(
        &self,
        py: Python<'py>,
        ids: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        guarded(py, || {
            let ids = ids_of(py, ids, self.model.n_vocab())?;
            let out = self
                .run(py, ids.len(), || {
                    let mut out = hf_bpe_core::memory::with_capacity(
                        ids.len().saturating_mul(4),
                        "the decoded bytes",
                        ids.len(),
                        "ids",
                    );
                    self.model.decode_bytes(&ids, &mut out).map(|()| out)
                })
                .map_err(|id| unknown_token(py, id, self.model.n_vocab()))?;
            bytes_of(py, &out)
        })
    }

    fn decode_single_token_bytes<'py>(
        &self,
        py: Python<'py>,
        id: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        guarded(py, || {
            let value: i64 = id.extract().map_err(|_| {
                if id.is_instance_of::<PyInt>() {
                    unknown_token(py, id.clone(), self.model.n_vocab())
                } else {
                    PyTypeError::new_err("a token id must be an int")
                }
            })?;
            Rank::try_from(value)
                .ok()
                .and_then(|id| self.model.token_bytes(id))
                .map(|bytes| PyBytes::new(py, bytes))
                .ok_or_else(|| unknown_token(py, value, self.model.n_vocab()))
        })
    }

    /// The ids of `piece` (bytes) merged as one piece (see `Model::encode_single_piece`); None for
    /// SentencePiece models.
    #[pyo3(signature = (piece, whole=true))]
    fn encode_single_piece(&self, py: Python<'_>, piece: &[u8], whole: bool) -> PyResult<Option<Vec<Rank>>> {
        guarded(py, || {
            self.refuse_missing_bytes(piece)?;
            Ok(self.run(py, piece.len(), || self.model.encode_single_piece(piece, whole)))
        })
    }

    /// The id of a mergeable token given its bytes, or None.
    fn token_id(&self, token: &[u8]) -> Option<Rank> {
        self.model.token_id(token)
    }

    fn token_byte_values<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        guarded(py, || {
            PyList::new(
                py,
                self.model
                    .sorted_token_bytes()
                    .into_iter()
                    .map(|bytes| PyBytes::new(py, bytes)),
            )
        })
    }

    /// Every mergeable token and its id, as a dict ordered by id.
    fn mergeable_ranks<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        guarded(py, || {
            let ranks = PyDict::new(py);
            for (token, rank) in self.model.ranks() {
                ranks.set_item(PyBytes::new(py, token), rank)?;
            }
            Ok(ranks)
        })
    }

    #[getter]
    fn n_vocab(&self) -> usize {
        self.model.n_vocab()
    }

    #[getter]
    fn n_mergeable(&self) -> usize {
        self.model.n_mergeable()
    }

    /// The split rule (a regex, or `(pattern, literal, behavior, invert)` per Split step), or None
    /// for SentencePiece models.
    #[getter]
    fn split_rule<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        let Some(rule) = self.model.split_rule() else { return Ok(None) };
        let split = split_rule_to_py(py, rule)?;
        let normalizers = self.model.normalizer_steps();
        if normalizers.is_empty() {
            return Ok(Some(split));
        }
        let list = PyList::new(py, normalizers.iter().map(normalize_step_to_py))?;
        for step in split.try_iter()? {
            list.append(step?)?;
        }
        Ok(Some(list.into_any()))
    }

    /// `text` as the model's normalizer leaves it (unchanged without one).
    fn normalize(&self, py: Python<'_>, text: &Bound<'_, PyAny>) -> PyResult<String> {
        guarded(py, || {
            let text = text_of(text, "text")?;
            Ok(self.model.normalize(&text).map_err(split_error)?.into_owned())
        })
    }

    /// `text` as `tokenizers` spells an added token with `normalized = true` for this model (see
    /// `Model::normalize_added_token`).
    fn normalize_added_token(&self, py: Python<'_>, text: &Bound<'_, PyAny>) -> PyResult<String> {
        guarded(py, || {
            let text = text_of(text, "text")?;
            Ok(self.model.normalize_added_token(&text).map_err(split_error)?.into_owned())
        })
    }

    /// The single bytes the vocabulary lacks (merges-list models from `tokenizer.json` and GGUF files).
    #[getter]
    fn missing_bytes(&self) -> Vec<u8> {
        self.model.missing_bytes()
    }

    /// Whether the bytes the vocabulary lacks are dropped after merging (llama.cpp) rather than
    /// before (`tokenizers`).
    #[getter]
    fn dropped_after_merging(&self) -> bool {
        self.model.dropped_after_merging()
    }

    /// What splits text: `"scanner llama3 (Oniguruma)"` (a hand-written scanner, proven identical
    /// to that engine), `"fancy-regex"` or `"Oniguruma"`; None for SentencePiece models.
    #[getter]
    fn split_engine(&self) -> Option<String> {
        self.model.split_engine()
    }

    /// The pieces the split rule cuts `text` into; None for SentencePiece models. A piece that is
    /// not whole characters (a Split step after `ByteLevel` may cut one) is decoded with
    /// `surrogateescape`, so that `piece.encode("utf-8", "surrogateescape")` gives its bytes.
    fn pieces<'py>(&self, py: Python<'py>, text: &Bound<'py, PyAny>) -> PyResult<Option<Vec<Bound<'py, PyAny>>>> {
        guarded(py, || {
            let text = text_of(text, "text")?;
            let text = self.model.normalize(&text).map_err(split_error)?;
            let Some(pieces) = self.model.pieces(&text) else {
                return Ok(None);
            };
            let piece_to_py = |piece: Vec<u8>| match String::from_utf8(piece) {
                Ok(piece) => Ok(PyString::new(py, &piece).into_any()),
                Err(error) => PyBytes::new(py, error.as_bytes()).call_method1("decode", ("utf-8", "surrogateescape")),
            };
            Ok(Some(pieces.map_err(split_error)?.into_iter().map(piece_to_py).collect::<PyResult<_>>()?))
        })
    }

    /// "ranks", "merges" or "sentencepiece".
    #[getter]
    fn kind(&self) -> &'static str {
        match self.model.kind() {
            Kind::Ranks => "ranks",
            Kind::Merges { .. } => "merges",
            Kind::SentencePiece => "sentencepiece",
        }
    }

    /// Whether a piece that is a token is emitted whole (rank models always; merges lists with
    /// `ignore_merges`); None for SentencePiece models.
    #[getter]
    fn ignore_merges(&self) -> Option<bool> {
        match self.model.kind() {
            Kind::Ranks => Some(true),
            Kind::Merges { ignore_merges } => Some(ignore_merges),
            Kind::SentencePiece => None,
        }
    }

    /// The merges list as pairs of token bytes in priority order (recovered for rank models).
    fn merge_list<'py>(&self, py: Python<'py>) -> PyResult<Vec<(Bound<'py, PyBytes>, Bound<'py, PyBytes>)>> {
        guarded(py, || {
            let merges = py.detach(|| self.model.merge_list());
            Ok(merges
                .into_iter()
                .map(|(left, right)| {
                    let bytes = |id| PyBytes::new(py, self.model.token_bytes(id).unwrap_or_default());
                    (bytes(left), bytes(right))
                })
                .collect())
        })
    }

    /// What the merge loop alone makes of each piece (bytes; for a SentencePiece model normalized
    /// UTF-8 text), in parallel without the GIL: its ids, or None for a SentencePiece model given
    /// bytes that are not UTF-8.
    #[pyo3(signature = (pieces, num_threads=None))]
    fn merge_pieces<'py>(
        &self,
        py: Python<'py>,
        pieces: Vec<Vec<u8>>,
        num_threads: Option<usize>,
    ) -> PyResult<Bound<'py, PyList>> {
        guarded(py, || {
            let pool = thread_pool(num_threads)?;
            let merged = py.detach(|| {
                parallel_map(&pool, &pieces, |piece| {
                    let mut out = Vec::new();
                    self.model.merge_piece(piece, &mut out).map(|()| out)
                })
            });
            let list = PyList::empty(py);
            for ids in merged {
                match ids {
                    Some(ids) => list.append(self.ints.list(py, &ids)?)?,
                    None => list.append(py.None())?,
                }
            }
            Ok(list)
        })
    }

    /// How often encoding the counted corpus produces each id: each distinct piece of ``counts``
    /// encoded once (as a split that gives it makes it), its ids counted as often as the piece
    /// occurred. A list of ``n_vocab`` ints; pieces a SentencePiece model cannot read (not UTF-8)
    /// count nothing.
    fn piece_token_counts(&self, py: Python<'_>, counts: PyRef<'_, train::PyPieceCounts>) -> PyResult<Vec<u64>> {
        guarded(py, || {
            let mut produced = vec![0u64; self.model.n_vocab()];
            let mut ids = Vec::new();
            for (piece, count) in counts.counts().iter() {
                ids.clear();
                if self.model.encode_lone_piece(piece, &mut ids).is_some() {
                    for &id in &ids {
                        produced[id as usize] += count;
                    }
                }
            }
            Ok(produced)
        })
    }

    /// The merge loop continued from this model's encoding of each piece of ``counts`` (see
    /// ``hf_bpe.extend``), for up to ``num_tokens`` new tokens: ``(tokens, merges)``, the new tokens'
    /// bytes in the order learned and every merge of the loop as a pair of token bytes. The pieces
    /// are encoded and the merges run on ``num_threads`` threads (every core when None);
    /// ``progress(n)`` is called now and then with the number of new tokens since the last call.
    /// ``ValueError`` for a SentencePiece model, or a corpus holding a byte the vocabulary lacks.
    #[pyo3(signature = (counts, num_tokens, progress=None, num_threads=None))]
    #[allow(clippy::type_complexity)]
    fn extend_merges<'py>(
        &self,
        py: Python<'py>,
        counts: PyRef<'_, train::PyPieceCounts>,
        num_tokens: usize,
        progress: Option<Py<PyAny>>,
        num_threads: Option<usize>,
    ) -> PyResult<(Vec<Bound<'py, PyBytes>>, Vec<(Bound<'py, PyBytes>, Bound<'py, PyBytes>)>)> {
        guarded(py, || {
            let pool = thread_pool(num_threads)?;
            let (model, table) = (&self.model, counts.counts());
            let extension = train::watched(py, progress.as_ref(), |watch| {
                pool.install(|| {
                    hf_bpe_core::train::extend::extend_merges(model, table, num_tokens, |done| {
                        watch.done.store(done as u64, std::sync::atomic::Ordering::Relaxed);
                        !watch.stopped()
                    })
                })
            })?
            .map_err(|error| PyValueError::new_err(error.to_string()))?;
            let tokens = extension.tokens.iter().map(|token| PyBytes::new(py, token)).collect();
            let merges = extension
                .merges
                .iter()
                .map(|(left, right)| (PyBytes::new(py, left), PyBytes::new(py, right)))
                .collect();
            Ok((tokens, merges))
        })
    }

    /// Why tiktoken's rank rule would encode differently from this merges-list model, or None.
    fn rank_rule_difference(&self, py: Python<'_>) -> PyResult<Option<String>> {
        guarded(py, || {
            Ok(py.detach(|| self.model.rank_rule_difference().map(|difference| difference.to_string())))
        })
    }

    /// Why this model's merges list, with or without `ignore_merges`, would encode differently
    /// from the model, or None.
    fn merge_rule_difference(&self, py: Python<'_>, ignore_merges: bool) -> PyResult<Option<String>> {
        guarded(py, || {
            Ok(py.detach(|| self.model.merge_rule_difference(ignore_merges).map(|difference| difference.to_string())))
        })
    }

    /// Whether `encode_stream` can encode this model's text in parts exactly.
    #[getter]
    fn can_stream(&self) -> bool {
        self.model.unsettled_pieces().is_some()
    }

    /// A stream that encodes text given in parts like `encode(whole text, policy)` (the ordinary
    /// policy when None), encoding every `block` bytes and holding at most `limit` bytes without
    /// a settled piece boundary (no limit when None).
    #[pyo3(signature = (policy=None, limit=None, block=EncodeStream::BLOCK))]
    fn encode_stream(
        slf: Py<Self>,
        py: Python<'_>,
        policy: Option<Py<SpecialPolicy>>,
        limit: Option<usize>,
        block: usize,
    ) -> PyResult<TextStream> {
        guarded(py, || {
            if policy.as_ref().is_some_and(|policy| policy.get().allowed.has_rules()) {
                return Err(PyValueError::new_err(
                    "text given in parts cannot be encoded with special tokens that strip whitespace, match single \
                     words or are matched after the others (lstrip, rstrip, single_word, normalized): where they \
                     match depends on text yet to come; encode the text whole",
                ));
            }
            let stream = EncodeStream::new(&slf.get().model, limit.unwrap_or(usize::MAX), block)
                .map_err(|error| stream_error(py, error))?;
            Ok(TextStream { core: slf, policy, stream })
        })
    }

    /// A stream that decodes ids given in parts to the bytes of decoding them at once.
    fn decode_stream(slf: Py<Self>) -> IdStream {
        IdStream { core: slf, state: DecodeState::default() }
    }

    /// Decodes to text (U+FFFD for invalid UTF-8; per byte for SentencePiece models, as it does).
    fn decode<'py>(&self, py: Python<'py>, ids: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyString>> {
        guarded(py, || {
            let ids = ids_of(py, ids, self.model.n_vocab())?;
            let text = self
                .run(py, ids.len(), || self.model.decode_text(&ids))
                .map_err(|id| unknown_token(py, id, self.model.n_vocab()))?;
            // SAFETY: `text` is valid UTF-8 of this length; a null result (MemoryError) is an error.
            unsafe {
                let length = pyo3::ffi::Py_ssize_t::try_from(text.len())
                    .map_err(|_| PyValueError::new_err("the decoded text is too long for a Python str"))?;
                Bound::from_owned_ptr_or_err(py, pyo3::ffi::PyUnicode_FromStringAndSize(text.as_ptr().cast(), length))
                    .map(|string| string.cast_into_unchecked())
            }
        })
    }
}

fn stream_error(py: Python<'_>, error: StreamError) -> PyErr {
    match error {
        StreamError::Disallowed(token) => hf_bpe_error(py, "DisallowedSpecialTokenError", token),
        StreamError::TooLong { .. } => PyValueError::new_err(format!(
            "{error}; pass a larger max_piece_bytes (None: no limit), or encode such text whole with encode"
        )),
        other => PyValueError::new_err(other.to_string()),
    }
}

/// Text given in parts, encoded as it settles (`BPE.encode_iterable`).
#[pyclass(module = "hf_bpe._core")]
struct TextStream {
    core: Py<CoreBPE>,
    policy: Option<Py<SpecialPolicy>>,
    stream: EncodeStream,
}

impl TextStream {
    fn run(
        &mut self,
        py: Python<'_>,
        work: impl FnOnce(&mut EncodeStream, &Model, &SpecialPolicy, &mut Vec<Rank>) -> Result<(), StreamError> + Send,
        release_gil: bool,
    ) -> PyResult<Vec<Rank>> {
        let core = self.core.get();
        let policy = self.policy.as_ref().map_or(&core.ordinary, |policy| policy.get());
        let stream = &mut self.stream;
        let mut ids = Vec::new();
        let encode = || work(stream, &core.model, policy, &mut ids);
        let result = if release_gil { py.detach(encode) } else { encode() };
        result.map_err(|error| stream_error(py, error))?;
        Ok(ids)
    }
}

#[pymethods]
impl TextStream {
    /// Takes the next part of the text; returns the ids of what is settled (often none yet).
    fn feed(&mut self, py: Python<'_>, text: &Bound<'_, PyAny>) -> PyResult<Vec<Rank>> {
        guarded(py, || {
            let text = text_of(text, "encode_iterable")?;
            let release_gil = self.stream.is_due(text.len()) || text.len() >= RELEASE_GIL_FROM;
            self.run(
                py,
                |stream, model, policy, ids| stream.push(model, &policy.allowed, &policy.disallowed, &text, ids),
                release_gil,
            )
        })
    }

    /// Ends the text: returns the ids of everything not returned yet.
    fn finish(&mut self, py: Python<'_>) -> PyResult<Vec<Rank>> {
        guarded(py, || {
            let release_gil = self.stream.held() >= RELEASE_GIL_FROM;
            self.run(py, |stream, model, policy, ids| stream.finish(model, &policy.allowed, &policy.disallowed, ids), release_gil)
        })
    }

    /// Bytes received and not encoded yet.
    #[getter]
    fn held(&self) -> usize {
        self.stream.held()
    }
}

/// Ids given in parts, decoded to bytes (`BPE.stream_decoder`).
#[pyclass(module = "hf_bpe._core")]
struct IdStream {
    core: Py<CoreBPE>,
    state: DecodeState,
}

#[pymethods]
impl IdStream {
    /// The bytes of the next ids.
    fn feed<'py>(&mut self, py: Python<'py>, ids: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyBytes>> {
        guarded(py, || {
            let model = &self.core.get().model;
            let ids = ids_of(py, ids, model.n_vocab())?;
            let mut out =
                hf_bpe_core::memory::with_capacity(ids.len().saturating_mul(4), "the decoded bytes", ids.len(), "ids");
            model
                .decode_bytes_continuing(&ids, &mut self.state, &mut out)
                .map_err(|id| unknown_token(py, id, model.n_vocab()))?;
            bytes_of(py, &out)
        })
    }
}

/// The bytes of the characters `start..end` of `text`, or None when they are not a range of its
/// characters.
fn char_range_bytes(text: &str, start: usize, end: usize) -> Option<std::ops::Range<usize>> {
    if start > end {
        return None;
    }
    let mut boundaries = text.char_indices().map(|(at, _)| at).chain(std::iter::once(text.len()));
    let from = boundaries.nth(start)?;
    let to = if end == start { from } else { boundaries.nth(end - start - 1)? };
    Some(from..to)
}

/// What [`CoreBPE::affixed`] gives: symbols, merges, unknown, fuse_unknown, ignore_merges,
/// byte_fallback.
type AffixedParts =
    (Vec<Vec<Option<Rank>>>, Vec<(Rank, Rank)>, Option<Rank>, bool, bool, Option<Vec<Vec<Vec<Rank>>>>);

/// `bytes` as a Python bytes object: MemoryError when CPython cannot allocate it (`PyBytes::new`
/// would panic).
fn bytes_of<'py>(py: Python<'py>, bytes: &[u8]) -> PyResult<Bound<'py, PyBytes>> {
    PyBytes::new_with(py, bytes.len(), |buffer| {
        buffer.copy_from_slice(bytes);
        Ok(())
    })
}

/// Converts byte offsets into `text` to the index of the character holding each byte, as
/// `tokenizers` converts an encoding's offsets: an offset past the text's last byte stays as it is.
fn byte_to_char_offsets(text: &str, byte_offsets: Vec<usize>) -> Vec<usize> {
    if !byte_offsets.is_sorted() || byte_offsets.last().is_some_and(|&last| last >= text.len()) {
        // only the positions `tokenizers` gives tokens past their piece (see `PieceSpan::Raw`)
        let char_of = char_of_bytes(text);
        return byte_offsets.into_iter().map(|start| char_of.get(start).copied().unwrap_or(start)).collect();
    }
    let bytes = text.as_bytes();
    let mut chars_started = 0;
    let mut byte = 0;
    byte_offsets
        .into_iter()
        .map(|target| {
            while byte <= target && byte < bytes.len() {
                // A character starts at every byte that is not a UTF-8 continuation byte.
                if bytes[byte] & 0xC0 != 0x80 {
                    chars_started += 1;
                }
                byte += 1;
            }
            chars_started.max(1) - 1
        })
        .collect()
}

/// The index of the character holding each byte of `text`.
fn char_of_bytes(text: &str) -> Vec<usize> {
    let mut char_of = Vec::with_capacity(text.len());
    for (index, char) in text.chars().enumerate() {
        char_of.extend(std::iter::repeat_n(index, char.len_utf8()));
    }
    char_of
}

/// Byte spans in `text` as character spans, as `tokenizers` converts an encoding's offsets
/// (`BytesToCharOffsetConverter`): each end to the character holding that byte, an end past the
/// text's last byte to one past the character holding the byte before it (two past the start's
/// character when that byte too is past the text); a span starting past the text's last byte keeps
/// its byte offsets.
fn byte_to_char_spans(text: &str, spans: Vec<(usize, usize)>) -> Vec<(usize, usize)> {
    if text.is_ascii() && spans.iter().all(|&(_, end)| end <= text.len()) {
        return spans;
    }
    let char_of = char_of_bytes(text);
    spans
        .into_iter()
        .map(|(start, end)| match char_of.get(start) {
            Some(&first) => match char_of.get(end) {
                Some(&last) => (first, last),
                None => (first, end.checked_sub(1).and_then(|before| char_of.get(before)).map_or(first + 1, |&c| c) + 1),
            },
            None => (start, end),
        })
        .collect()
}

/// How many parts one long text was cut into and encoded on several threads, in all, and how
/// often a text was encoded again on one thread because a part did not end at its cut (never, by
/// the cut rule), and how many parts went through their thread's table of short pieces: tests
/// check that the parallel path ran, and ran exactly.
#[pyfunction]
#[pyo3(name = "_parallel_counts")]
fn parallel_counts() -> (usize, usize, usize) {
    use hf_bpe_core::parallel::{fallbacks, parts_encoded, table_parts};
    (parts_encoded(), fallbacks(), table_parts())
}

/// For tests: one text of at least `threshold` bytes is cut into `parts` parts (None: the
/// defaults, by size and threads), even on one thread.
#[pyfunction]
#[pyo3(name = "_set_parallel_for_tests", signature = (threshold=None, parts=None))]
fn set_parallel_for_tests(threshold: Option<usize>, parts: Option<usize>) {
    hf_bpe_core::parallel::set_parallel_for_tests(threshold, parts);
}

#[pymodule]
fn _core(module: &Bound<'_, PyModule>) -> PyResult<()> {
    // Built here, before any thread exists, so that no fork can catch it half built.
    hf_bpe_core::scan::prepare();
    module.add_class::<CoreBPE>()?;
    module.add_class::<SpecialPolicy>()?;
    module.add_class::<padded::EncodedRows>()?;
    module.add_class::<TextStream>()?;
    module.add_class::<IdStream>()?;
    module.add_function(wrap_pyfunction!(guard::panic_for_tests, module)?)?;
    module.add_function(wrap_pyfunction!(recognized_split, module)?)?;
    module.add_function(wrap_pyfunction!(parallel_counts, module)?)?;
    module.add_function(wrap_pyfunction!(set_parallel_for_tests, module)?)?;
    train::register(module)?;
    parity::register(module)?;
    train_sentencepiece::register(module)?;
    tokenizer_json::register(module)?;
    Ok(())
}
