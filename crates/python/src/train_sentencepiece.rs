//! Bindings for SentencePiece BPE training: the word counter and the merge loop.
//! Type conversion, GIL release, progress callbacks and error mapping only.

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use hf_bpe_core::normalize::SentencePieceNormalizer;
use hf_bpe_core::train::sentencepiece::{
    extend_pieces, learn_pieces, FileError, PieceRules, SentenceOptions, WordCounter,
};
use pyo3::exceptions::{
    PyFileNotFoundError, PyKeyboardInterrupt, PyOSError, PyTypeError, PyValueError,
};
use pyo3::prelude::*;
use pyo3::types::PyString;

use crate::guard::guarded;
use crate::train::watched;

fn file_error(error: FileError) -> PyErr {
    let message = error.to_string();
    match error {
        FileError::Io { error, .. } if error.kind() == std::io::ErrorKind::NotFound => {
            PyFileNotFoundError::new_err(message)
        }
        FileError::Io { .. } => PyOSError::new_err(message),
        FileError::NotUtf8 { .. } => PyValueError::new_err(message),
        FileError::Interrupted => PyKeyboardInterrupt::new_err(()),
    }
}

/// Counts the words of sentences as SentencePiece's trainer sees them, then learns the pieces.
#[pyclass(module = "hf_bpe._core", name = "SentencePieceWordCounter")]
pub struct PyWordCounter {
    counter: Option<WordCounter>,
    pool: Arc<rayon::ThreadPool>,
}

impl PyWordCounter {
    fn counter(&mut self) -> PyResult<&mut WordCounter> {
        self.counter
            .as_mut()
            .ok_or_else(|| PyValueError::new_err("this word counter has already trained"))
    }
}

#[pymethods]
impl PyWordCounter {
    #[new]
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (*, charsmap, add_dummy_prefix, remove_extra_whitespaces, max_sentence_length,
                        split_by_whitespace, allow_whitespace_only_pieces, first_sentences, meta_pieces,
                        num_threads=None))]
    fn new(
        py: Python<'_>,
        charsmap: Vec<u8>,
        add_dummy_prefix: bool,
        remove_extra_whitespaces: bool,
        max_sentence_length: usize,
        split_by_whitespace: bool,
        allow_whitespace_only_pieces: bool,
        first_sentences: u64,
        meta_pieces: Vec<String>,
        num_threads: Option<usize>,
    ) -> PyResult<Self> {
        guarded(py, || {
            let normalizer = SentencePieceNormalizer::new(
                &charsmap,
                add_dummy_prefix,
                remove_extra_whitespaces,
                true,
                &[],
            )
            .map_err(PyValueError::new_err)?;
            let options = SentenceOptions {
                max_sentence_length,
                split_by_whitespace,
                allow_whitespace_only_pieces,
                first_sentences,
            };
            let meta: Vec<&str> = meta_pieces.iter().map(String::as_str).collect();
            let counter =
                WordCounter::new(options, normalizer, &meta).map_err(PyValueError::new_err)?;
            Ok(Self {
                counter: Some(counter),
                pool: crate::thread_pool(num_threads)?,
            })
        })
    }

    /// Adds the lines of each text, in parallel, with the GIL released.
    fn add_texts(&mut self, py: Python<'_>, texts: Vec<Bound<'_, PyAny>>) -> PyResult<()> {
        guarded(py, || {
            let texts: Vec<String> = texts
                .iter()
                .map(|text| match text.cast::<PyString>() {
                    Ok(text) => Ok(text.to_str()?.to_owned()),
                    Err(_) => {
                        let type_name = crate::type_name(text);
                        Err(PyTypeError::new_err(format!(
                            "the corpus must yield str (the text of each document), got {type_name}"
                        )))
                    }
                })
                .collect::<PyResult<_>>()?;
            let pool = self.pool.clone();
            let counter = self.counter()?;
            py.detach(|| {
                pool.install(|| {
                    for text in &texts {
                        counter.add_text(text);
                    }
                })
            });
            Ok(())
        })
    }

    /// Adds the lines of UTF-8 files, streamed. ``progress(n)`` gets the bytes read since the
    /// last call.
    #[pyo3(signature = (paths, progress=None))]
    fn add_files(
        &mut self,
        py: Python<'_>,
        paths: Vec<PathBuf>,
        progress: Option<Py<PyAny>>,
    ) -> PyResult<()> {
        guarded(py, || {
            let pool = self.pool.clone();
            let counter = self.counter()?;
            let result = watched(py, progress.as_ref(), |watch| {
                pool.install(|| {
                    for path in &paths {
                        counter.add_file(path, |bytes| {
                            watch.done.fetch_add(bytes, Ordering::Relaxed);
                            !watch.stopped()
                        })?;
                    }
                    Ok(())
                })
            })?;
            result.map_err(file_error)
        })
    }

    /// Sentences loaded (the ones SentencePiece keeps).
    #[getter]
    fn sentences(&mut self) -> PyResult<u64> {
        Ok(self.counter()?.sentences())
    }

    /// Sentences skipped for being longer than ``max_sentence_length`` bytes.
    #[getter]
    fn too_long(&mut self) -> PyResult<u64> {
        Ok(self.counter()?.too_long())
    }

    /// Distinct words so far (an upper bound: each worker counts its own).
    #[getter]
    fn distinct_words(&mut self) -> PyResult<usize> {
        Ok(self.counter()?.distinct_words())
    }

    /// True once ``first_sentences`` sentences are loaded.
    #[getter]
    fn is_full(&mut self) -> PyResult<bool> {
        Ok(self.counter()?.is_full())
    }

    /// Learns the ``vocab_size - meta_pieces`` normal pieces (merged pieces, then the required
    /// characters) and returns them with their scores. The counter is consumed. ``progress(n)`` gets the pieces learned
    /// since the last call.
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (*, vocab_size, meta_pieces, character_coverage, max_sentencepiece_length, split_by_whitespace,
                        allow_whitespace_only_pieces, split_by_unicode_script, split_by_number, split_digits,
                        progress=None))]
    fn learn(
        &mut self,
        py: Python<'_>,
        vocab_size: usize,
        meta_pieces: usize,
        character_coverage: f32,
        max_sentencepiece_length: usize,
        split_by_whitespace: bool,
        allow_whitespace_only_pieces: bool,
        split_by_unicode_script: bool,
        split_by_number: bool,
        split_digits: bool,
        progress: Option<Py<PyAny>>,
    ) -> PyResult<Vec<(String, f32)>> {
        guarded(py, || {
            let pool = self.pool.clone();
            let counter = self
                .counter
                .take()
                .ok_or_else(|| PyValueError::new_err("this word counter has already trained"))?;
            let rules = PieceRules {
                max_sentencepiece_length,
                split_by_whitespace,
                allow_whitespace_only_pieces,
                split_by_unicode_script,
                split_by_number,
                split_digits,
            };
            let result = watched(py, progress.as_ref(), |watch| {
                let table = pool.install(|| counter.into_table());
                let required = table.required_chars(character_coverage);
                if required.len() + meta_pieces > vocab_size {
                    return Err(Err(required.len()));
                }
                let pieces_wanted = vocab_size - meta_pieces;
                let mut reported = 0;
                pool.install(|| {
                    learn_pieces(
                        table,
                        &required,
                        pieces_wanted - required.len(),
                        &rules,
                        |done| {
                            watch
                                .done
                                .fetch_add((done - reported) as u64, Ordering::Relaxed);
                            reported = done;
                            !watch.stopped()
                        },
                    )
                })
                .map_err(Ok)
            })?;
            match result {
                Ok(pieces) => Ok(pieces),
                Err(Err(required)) => Err(PyValueError::new_err(format!(
                    "vocab_size {vocab_size} is smaller than the {required} required characters (those \
                     character_coverage keeps) plus the {meta_pieces} meta pieces (unk, bos, eos, pad, control, \
                     user-defined and byte pieces): {vocab_size} vs {}. Increase vocab_size or decrease \
                     character_coverage (SentencePiece refuses alike)",
                    required + meta_pieces
                ))),
                Err(Ok(message)) if message == "interrupted" => Err(PyKeyboardInterrupt::new_err(())),
                Err(Ok(message)) => Err(PyValueError::new_err(message)),
            }
        })
    }

    /// Continues SentencePiece's merge loop on the counted words from a model whose normal pieces
    /// and scores are ``pieces`` (its encoding of each word first), for up to ``num_new`` new
    /// pieces: their texts and scores (see ``hf_bpe.extend``). The counter is consumed.
    /// ``progress(n)`` gets the pieces learned since the last call.
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (*, pieces, num_new, max_sentencepiece_length, split_by_whitespace,
                        allow_whitespace_only_pieces, split_by_unicode_script, split_by_number, split_digits,
                        progress=None))]
    fn extend(
        &mut self,
        py: Python<'_>,
        pieces: Vec<(String, f32)>,
        num_new: usize,
        max_sentencepiece_length: usize,
        split_by_whitespace: bool,
        allow_whitespace_only_pieces: bool,
        split_by_unicode_script: bool,
        split_by_number: bool,
        split_digits: bool,
        progress: Option<Py<PyAny>>,
    ) -> PyResult<Vec<(String, f32)>> {
        guarded(py, || {
            let counter = self
                .counter
                .take()
                .ok_or_else(|| PyValueError::new_err("this word counter has already trained"))?;
            let rules = PieceRules {
                max_sentencepiece_length,
                split_by_whitespace,
                allow_whitespace_only_pieces,
                split_by_unicode_script,
                split_by_number,
                split_digits,
            };
            let learned = watched(py, progress.as_ref(), |watch| {
                let words = counter.into_words();
                extend_pieces(
                    words.iter().map(|(word, &count)| (word.as_str(), count)),
                    &pieces,
                    num_new,
                    &rules,
                    |done| {
                        watch.done.store(done as u64, Ordering::Relaxed);
                        !watch.stopped()
                    },
                )
            })?;
            Ok(learned)
        })
    }
}

pub fn register(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add_class::<PyWordCounter>()?;
    Ok(())
}
