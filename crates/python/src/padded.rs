//! A batch's ids kept in Rust until they are laid out as padded NumPy arrays: what
//! `BPETokenizer(texts, padding=..., return_tensors="np")` returns, filled on the pool's threads
//! straight into the arrays' buffers (no flat buffer converted to `int64`, no boolean masks).

use std::mem::MaybeUninit;

use hf_bpe_core::Rank;
use numpy::{PyArray1, PyArrayMethods};
use pyo3::exceptions::{PyIndexError, PyMemoryError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyList;
use rayon::prelude::*;

/// The ids of each text of a batch (from `CoreBPE.encode_rows`).
#[pyclass(frozen, module = "hf_bpe._core")]
pub(crate) struct EncodedRows {
    pub(crate) rows: Vec<Vec<Rank>>,
}

/// Where a row's ids go in its padded line of `target`, and what surrounds them.
struct Layout {
    target: usize,
    pad: i64,
    left: bool,
    bos: Option<i64>,
    eos: Option<i64>,
}

impl Layout {
    /// Writes every cell of `line` (and of `mask`, if any): `ids` framed by the BOS and EOS ids,
    /// and padding.
    fn fill(&self, ids: &[Rank], line: &mut [MaybeUninit<i64>], mask: Option<&mut [MaybeUninit<i64>]>) {
        let total = ids.len() + usize::from(self.bos.is_some()) + usize::from(self.eos.is_some());
        let start = if self.left { self.target - total } else { 0 };
        line[..start].fill(MaybeUninit::new(self.pad));
        let mut at = start;
        if let Some(bos) = self.bos {
            line[at].write(bos);
            at += 1;
        }
        for (cell, &id) in line[at..at + ids.len()].iter_mut().zip(ids) {
            cell.write(i64::from(id));
        }
        at += ids.len();
        if let Some(eos) = self.eos {
            line[at].write(eos);
            at += 1;
        }
        line[at..].fill(MaybeUninit::new(self.pad));
        if let Some(mask) = mask {
            mask[..start].fill(MaybeUninit::new(0));
            mask[start..start + total].fill(MaybeUninit::new(1));
            mask[start + total..].fill(MaybeUninit::new(0));
        }
    }
}

/// An empty buffer for the `rows x columns` cells of one array ([`crate::output_buffer`]).
fn buffer(rows: usize, columns: usize) -> PyResult<Vec<i64>> {
    crate::output_buffer(rows * columns, || {
        format!(
            "out of memory: could not allocate {rows} x {columns} int64 ids for the padded batch; pad to a \
             smaller length or encode fewer texts at once"
        )
    })
}

/// A `rows x columns` int64 array owning `cells` (row-major).
fn matrix<'py>(py: Python<'py>, cells: Vec<i64>, rows: usize, columns: usize) -> PyResult<Bound<'py, PyAny>> {
    Ok(PyArray1::from_vec(py, cells).reshape([rows, columns])?.into_any())
}

#[pymethods]
impl EncodedRows {
    /// Rows of ids made in Python (a tokenizer whose added tokens are cut out in Python first).
    #[new]
    fn new(rows: Vec<Vec<Rank>>) -> Self {
        EncodedRows { rows }
    }

    fn __len__(&self) -> usize {
        self.rows.len()
    }

    /// The number of ids of each row, as an int64 array.
    fn lengths<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArray1<i64>>> {
        crate::numpy_imported(py)?;
        Ok(PyArray1::from_vec(py, self.rows.iter().map(|row| row.len() as i64).collect()))
    }

    /// The ids of row `index`, as a list.
    fn row<'py>(&self, py: Python<'py>, index: usize) -> PyResult<Bound<'py, PyList>> {
        let row = self.rows.get(index).ok_or_else(|| {
            PyIndexError::new_err(format!("row {index} of a batch of {} rows", self.rows.len()))
        })?;
        PyList::new(py, row)
    }

    /// `(input_ids, attention_mask)`: int64 arrays of one line of `target` ids per row, each row
    /// framed by `bos` and `eos` (when given) and padded with `pad` on the left or the right;
    /// the mask is 1 where a line holds the row's ids (and its BOS and EOS), 0 where it is padding,
    /// and None unless `attention_mask`. A row longer than `target` once framed is a ValueError.
    #[pyo3(signature = (target, pad, left, bos=None, eos=None, attention_mask=true, num_threads=None))]
    #[allow(clippy::too_many_arguments)]
    fn padded<'py>(
        &self,
        py: Python<'py>,
        target: usize,
        pad: i64,
        left: bool,
        bos: Option<i64>,
        eos: Option<i64>,
        attention_mask: bool,
        num_threads: Option<usize>,
    ) -> PyResult<(Bound<'py, PyAny>, Option<Bound<'py, PyAny>>)> {
        crate::numpy_imported(py)?;
        let layout = Layout { target, pad, left, bos, eos };
        let framing = usize::from(bos.is_some()) + usize::from(eos.is_some());
        if let Some((index, row)) = self.rows.iter().enumerate().find(|(_, row)| row.len() + framing > target) {
            return Err(PyValueError::new_err(format!(
                "row {index} has {} ids with its special tokens, more than the padded length {target}",
                row.len() + framing
            )));
        }
        let cells = self.rows.len().checked_mul(target).ok_or_else(|| {
            PyMemoryError::new_err(format!("{} rows of {target} ids cannot be held in memory", self.rows.len()))
        })?;
        let pool = crate::thread_pool(num_threads)?;
        let mut ids = buffer(self.rows.len(), target)?;
        let mut mask = if attention_mask { buffer(self.rows.len(), target)? } else { Vec::new() };
        py.detach(|| {
            if target > 0 {
                pool.install(|| {
                    let lines = ids.spare_capacity_mut()[..cells].par_chunks_mut(target).zip(&self.rows);
                    if attention_mask {
                        lines
                            .zip(mask.spare_capacity_mut()[..cells].par_chunks_mut(target))
                            .for_each(|((line, row), mask)| layout.fill(row, line, Some(mask)));
                    } else {
                        lines.for_each(|(line, row)| layout.fill(row, line, None));
                    }
                });
            }
        });
        // SAFETY: every cell below `cells` was written: one line of `target` cells per row, each
        // written whole by `Layout::fill` (and there are no cells when `target` is 0).
        unsafe {
            ids.set_len(cells);
            if attention_mask {
                mask.set_len(cells);
            }
        }
        let rows = self.rows.len();
        let mask = if attention_mask { Some(matrix(py, mask, rows, target)?) } else { None };
        Ok((matrix(py, ids, rows, target)?, mask))
    }
}
