//! Panics stay inside the extension.
//!
//! PyO3 turns a Rust panic that reaches Python into `pyo3_runtime.PanicException`, which derives
//! from `BaseException`: `except Exception` in a server or a data pipeline does not catch it. Every
//! binding runs its work through [`guarded`], which raises `hf_bpe.errors.InternalError` (a
//! `RuntimeError`) with the panic's message instead. Panics on other threads reach it too: rayon
//! re-raises a worker's panic in the thread that called `install`, and [`crate::train`]'s watched
//! helper thread hands its panic back to the caller.

use std::any::Any;
use std::panic::{catch_unwind, AssertUnwindSafe};

use pyo3::exceptions::{PyMemoryError, PyRuntimeError, PyValueError};
use pyo3::prelude::*;

/// Runs `work`, turning a panic into `hf_bpe.errors.InternalError`, and the core's stop for memory
/// sized by the input that could not be allocated ([`hf_bpe_core::memory`]) into `MemoryError`.
pub(crate) fn guarded<T>(py: Python<'_>, work: impl FnOnce() -> PyResult<T>) -> PyResult<T> {
    catch_unwind(AssertUnwindSafe(work)).unwrap_or_else(|payload| {
        Err(match hf_bpe_core::memory::out_of_memory(&*payload) {
            Some(error) => PyMemoryError::new_err(error.to_string()),
            None => internal_error(py, &*payload),
        })
    })
}

/// The message a panic was raised with.
pub(crate) fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(message) = payload.downcast_ref::<&str>() {
        (*message).to_owned()
    } else if let Some(message) = payload.downcast_ref::<String>() {
        message.clone()
    } else {
        "a panic without a message".to_owned()
    }
}

fn internal_error(py: Python<'_>, payload: &(dyn Any + Send)) -> PyErr {
    let message = format!(
        "internal error in hf_bpe core: {}; please report it, with the input that caused it",
        panic_message(payload)
    );
    match py.import("hf_bpe.errors").and_then(|module| module.getattr("InternalError")) {
        Ok(class) => match class.call1((message,)) {
            Ok(error) => PyErr::from_value(error),
            Err(error) => error,
        },
        Err(_) => PyRuntimeError::new_err(message),
    }
}

/// Testing only (not public API): panics on purpose at `site`, so tests can check that every path
/// a panic can take reaches Python as `InternalError`: `"call"` (the calling thread), `"detached"`
/// (with the GIL released), `"pool"` (a worker of the thread pool that `encode_batch` uses, through
/// the same helper), `"lists"` (a worker filling a batch's Python lists: the half-filled lists must
/// be released without releasing ints they do not own yet) and `"watched"` (the helper thread that
/// training and file counting run on).
#[pyfunction]
#[pyo3(name = "_panic_for_tests")]
pub(crate) fn panic_for_tests(py: Python<'_>, site: &str) -> PyResult<()> {
    guarded(py, || {
        let fail = || panic!("deliberate panic for tests ({site})");
        match site {
            "call" => fail(),
            "detached" => py.detach(fail),
            "pool" => {
                let pool = crate::thread_pool(Some(2))?;
                let items: Vec<u32> = (0..64).collect();
                let done = py.detach(|| {
                    crate::parallel_map(&pool, &items, |&item| {
                        if item == 37 {
                            fail();
                        }
                        item
                    })
                });
                debug_assert_eq!(done.len(), items.len());
            }
            "lists" => {
                // The worker filling row 37 panics halfway through it.
                let table = crate::ints::IntTable::new(256);
                let rows = vec![vec![7; 1000]; 100];
                let pool = crate::thread_pool(Some(2))?;
                table.lists_panicking_at(py, &rows, &pool, Some((37, 500)))?;
            }
            "watched" => crate::train::watched(py, None, |_| fail())?,
            _ => {
                return Err(PyValueError::new_err(format!(
                    "unknown site {site:?}: expected call, detached, pool, lists or watched"
                )))
            }
        }
        Ok(())
    })
}
