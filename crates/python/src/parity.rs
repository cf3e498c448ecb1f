//! Bindings for parity-aware BPE and SuperBPE's second stage (`hf_bpe_core::train::parity`,
//! `hf_bpe_core::train::superbpe`): type conversion, GIL release, progress and errors only.

use std::sync::atomic::Ordering;

use hf_bpe_core::train::parity::{learn_parity, Learned, ParityOptions, Variant};
use hf_bpe_core::train::superbpe::learn_superwords;
use hf_bpe_core::Rank;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::guard::guarded;
use crate::train::{watched, PyPieceCounts};

/// Merges (pairs of ids), the language that chose each (None: global), new tokens' bytes.
type Merges<'py> = (Vec<(Rank, Rank)>, Vec<Option<u32>>, Vec<Bound<'py, PyBytes>>);

fn to_python<'py>(py: Python<'py>, learned: Learned) -> Merges<'py> {
    let tokens = learned.tokens.iter().map(|token| PyBytes::new(py, token)).collect();
    (learned.merges, learned.chosen_by, tokens)
}

fn take(tables: &[Bound<'_, PyPieceCounts>]) -> Vec<hf_bpe_core::train::PieceCounts> {
    tables.iter().map(|table| table.borrow_mut().take_counts()).collect()
}

/// Parity-aware BPE (``ParityBpeTrainer``'s rule) on one table per language and, optionally, one
/// dev table per language; the tables are emptied (their memory freed once copied). Returns the
/// merges as pairs of ids (0-255 the bytes, then the new tokens), the language that chose each
/// (None in the global phase) and the new tokens' bytes. ``progress(n)`` gets the merges done since
/// its last call. Inputs on which ``ParityBpeTrainer`` never returns raise ``ValueError``.
#[pyfunction]
#[pyo3(signature = (languages, dev, num_merges, *, global_merges=0, variant="base", window_size=100, alpha=2.0,
                    ratio=None, min_frequency=0, max_token_length=None, progress=None, num_threads=None))]
#[allow(clippy::too_many_arguments)]
fn learn_parity_merges<'py>(
    py: Python<'py>,
    languages: Vec<Bound<'py, PyPieceCounts>>,
    dev: Option<Vec<Bound<'py, PyPieceCounts>>>,
    num_merges: usize,
    global_merges: usize,
    variant: &str,
    window_size: usize,
    alpha: f64,
    ratio: Option<Vec<f64>>,
    min_frequency: u64,
    max_token_length: Option<usize>,
    progress: Option<Py<PyAny>>,
    num_threads: Option<usize>,
) -> PyResult<Merges<'py>> {
    guarded(py, || {
        let variant = match variant {
            "base" => Variant::Base,
            "window" if window_size > 0 && alpha.is_finite() && alpha > 0.0 => Variant::Window { size: window_size, alpha },
            "window" => return Err(PyValueError::new_err("the window variant needs window_size > 0 and a positive alpha")),
            other => return Err(PyValueError::new_err(format!("variant must be 'base' or 'window', got {other:?}"))),
        };
        if languages.is_empty() {
            return Err(PyValueError::new_err("parity-aware training needs one language at least"));
        }
        if dev.as_ref().is_some_and(|dev| dev.len() != languages.len()) {
            return Err(PyValueError::new_err("give one dev table per language"));
        }
        if let Some(ratio) = &ratio {
            if ratio.len() != languages.len() || ratio.iter().any(|&r| !r.is_finite() || r <= 0.0) {
                return Err(PyValueError::new_err("give one positive, finite ratio per language"));
            }
        }
        let options = ParityOptions { num_merges, global_merges, variant, ratio, min_frequency, max_token_length };
        let (languages, dev) = (take(&languages), dev.as_deref().map(take));
        let pool = crate::thread_pool(num_threads)?;
        let learned = watched(py, progress.as_ref(), |watch| {
            pool.install(|| {
                learn_parity(languages, dev, &options, |done| {
                    watch.done.store(done as u64, Ordering::Relaxed);
                    !watch.stopped()
                })
            })
        })?
        .map_err(|endless| PyValueError::new_err(endless.to_string()))?;
        Ok(to_python(py, learned))
    })
}

/// SuperBPE's second stage on ``counts`` (the stage-two pieces; emptied), from the first stage's
/// learned ``tokens`` (ids 256 on) and ``merges`` (pairs of ids in priority order): up to
/// ``num_new_tokens`` new tokens. Returns the stage-two merges (ids: bytes, first-stage tokens,
/// new tokens), the language of each (always 0) and the new tokens' bytes. ``progress(n)`` gets the
/// new tokens made since its last call.
#[pyfunction]
#[pyo3(signature = (counts, tokens, merges, num_new_tokens, *, progress=None, num_threads=None))]
fn learn_superword_merges<'py>(
    py: Python<'py>,
    counts: Bound<'py, PyPieceCounts>,
    tokens: Vec<Vec<u8>>,
    merges: Vec<(Rank, Rank)>,
    num_new_tokens: usize,
    progress: Option<Py<PyAny>>,
    num_threads: Option<usize>,
) -> PyResult<Merges<'py>> {
    guarded(py, || {
        let counts = counts.borrow_mut().take_counts();
        let pool = crate::thread_pool(num_threads)?;
        let learned = watched(py, progress.as_ref(), |watch| {
            pool.install(|| {
                learn_superwords(counts, &tokens, &merges, num_new_tokens, |done| {
                    watch.done.store(done as u64, Ordering::Relaxed);
                    !watch.stopped()
                })
            })
        })?
        .map_err(|error| PyValueError::new_err(format!("the first stage's model cannot start SuperBPE's second: {error}")))?;
        Ok(to_python(py, learned))
    })
}

pub fn register(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add_function(wrap_pyfunction!(learn_parity_merges, module)?)?;
    module.add_function(wrap_pyfunction!(learn_superword_merges, module)?)?;
    Ok(())
}
