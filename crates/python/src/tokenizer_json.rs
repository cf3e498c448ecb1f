//! A byte-level `tokenizer.json` read in two parts ([`hf_bpe_core::tokenizer_json`]): its model's
//! vocabulary and merges stay here, for `CoreBPE.from_tokenizer_json` to build from; the rest of the
//! document goes back to Python as JSON text.

use hf_bpe_core::tokenizer_json::{self, TokenizerJson};
use hf_bpe_core::Rank;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString};
use rustc_hash::FxHashMap;

use crate::guard::guarded;

/// A `tokenizer.json`'s `model.vocab` and `model.merges`, read by the core.
#[pyclass(frozen, module = "hf_bpe._core")]
pub(crate) struct TokenizerJsonModel {
    pub(crate) file: TokenizerJson,
}

#[pymethods]
impl TokenizerJsonModel {
    /// The number of vocabulary entries.
    fn __len__(&self) -> usize {
        self.file.vocab.len()
    }

    /// The id the vocabulary gives each of `tokens` (spelled as in the file), `None` for those it lacks.
    fn ids_of(&self, tokens: Vec<String>) -> Vec<Option<Rank>> {
        let mut found: FxHashMap<&str, Option<Rank>> = tokens.iter().map(|token| (token.as_str(), None)).collect();
        if !found.is_empty() {
            for (spelled, id) in &self.file.vocab {
                if let Some(slot) = found.get_mut(spelled.as_str()) {
                    *slot = Some(*id); // the last entry wins, as in a parsed JSON object
                }
            }
        }
        tokens.iter().map(|token| found[token.as_str()]).collect()
    }

    /// The vocabulary and merges of the model cut to its first `merges` merges (as the file writes
    /// them), the tokens they use and form, every token of one character and the entries of
    /// `added_ids` (added token -> id), in the order `conversion.hf`'s reduced copy of a file takes
    /// them.
    fn reduced<'py>(
        &self,
        py: Python<'py>,
        added_ids: &Bound<'py, PyDict>,
        merges: usize,
    ) -> PyResult<(Bound<'py, PyDict>, Bound<'py, PyList>)> {
        guarded(py, || {
            let vocab: FxHashMap<&str, Rank> =
                self.file.vocab.iter().map(|(spelled, id)| (spelled.as_str(), *id)).collect();
            let kept = PyDict::new(py);
            for (spelled, id) in &self.file.vocab {
                let mut chars = spelled.chars();
                if chars.next().is_some() && chars.next().is_none() {
                    kept.set_item(spelled, id)?;
                }
            }
            for (token, id) in added_ids.iter() {
                kept.set_item(token, id)?;
            }
            let kept_merges = PyList::empty(py);
            let mut joined = String::new();
            for merge in self.file.merges.iter().take(merges) {
                joined.clear();
                joined.push_str(&merge.left);
                joined.push_str(&merge.right);
                let (Some(left), Some(right), Some(formed)) =
                    (vocab.get(merge.left.as_str()), vocab.get(merge.right.as_str()), vocab.get(joined.as_str()))
                else {
                    continue;
                };
                if merge.as_pair {
                    kept_merges.append(PyList::new(py, [&merge.left, &merge.right])?)?;
                } else {
                    kept_merges.append(PyString::new(py, &format!("{} {}", merge.left, merge.right)))?;
                }
                kept.set_item(&merge.left, left)?;
                kept.set_item(&merge.right, right)?;
                kept.set_item(&joined, formed)?;
            }
            Ok((kept, kept_merges))
        })
    }
}

/// A `tokenizer.json`'s text split in two: the document without `model.vocab` and `model.merges`
/// as JSON text, and those two read; `None` when the file is anything but regular (see
/// [`tokenizer_json::read`]), for the caller's own reading to say what. Read without the GIL.
#[pyfunction]
fn read_tokenizer_json(py: Python<'_>, data: &[u8]) -> PyResult<Option<(String, TokenizerJsonModel)>> {
    guarded(py, || {
        Ok(py.detach(|| {
            let mut file = tokenizer_json::read(std::str::from_utf8(data).ok()?)?;
            let rest = std::mem::take(&mut file.rest);
            Some((rest, TokenizerJsonModel { file }))
        }))
    })
}

pub fn register(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add_class::<TokenizerJsonModel>()?;
    module.add_function(wrap_pyfunction!(read_tokenizer_json, module)?)?;
    Ok(())
}
