//! Arrow in, Arrow out: a column of strings encoded to a column of id lists, without Python objects.
//!
//! The strings are read in place through the Arrow C data interface (any object with
//! `__arrow_c_array__` or `__arrow_c_stream__`: pyarrow arrays and chunked arrays, a `datasets`
//! table's columns, polars series), encoded on the thread pool with the GIL released, and the ids
//! written straight into the values and offsets buffers of an Arrow list array that pyarrow takes
//! over without copying.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::{ArrowPrimitiveType, Int32Type, Int64Type, UInt16Type, UInt32Type};
use arrow_array::{Array, ArrayRef, GenericListArray, OffsetSizeTrait, PrimitiveArray};
use arrow_buffer::{NullBuffer, OffsetBuffer, ScalarBuffer};
use arrow_schema::{DataType, Field};
use hf_bpe_core::Rank;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3_arrow::input::AnyArray;
use pyo3_arrow::{PyArray, PyChunkedArray};

/// The rows of one work unit: enough text that the pool's threads share the batch evenly, and
/// few enough units that each one's ids are one allocation.
const UNIT_BYTES: usize = 1 << 16;

/// What a null string becomes.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Nulls {
    /// A `ValueError` naming the row.
    Raise,
    /// The ids of the empty string (only the prefix and suffix, if any).
    Empty,
    /// A null list.
    Null,
}

impl Nulls {
    pub(crate) fn from_name(name: &str) -> PyResult<Self> {
        match name {
            "raise" => Ok(Nulls::Raise),
            "empty" => Ok(Nulls::Empty),
            "null" => Ok(Nulls::Null),
            _ => Err(PyValueError::new_err(format!(
                "nulls='{name}' is not one of 'raise' (the default), 'empty' (a null row encodes as \"\") \
                 or 'null' (a null row stays null)"
            ))),
        }
    }
}

/// The integer type of the ids in the output lists.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum IdType {
    UInt16,
    UInt32,
    Int32,
    Int64,
}

impl IdType {
    /// The type called `name`, checked to hold every id below `n_vocab`.
    pub(crate) fn from_name(name: &str, n_vocab: usize) -> PyResult<Self> {
        let id_type = match name {
            "uint16" => IdType::UInt16,
            "uint32" => IdType::UInt32,
            "int32" => IdType::Int32,
            "int64" => IdType::Int64,
            _ => return Err(PyValueError::new_err(format!(
                "dtype='{name}' is not one of 'uint32' (the default), 'uint16', 'int32' or 'int64'"
            ))),
        };
        if id_type == IdType::UInt16 && n_vocab > 1 << 16 {
            return Err(PyValueError::new_err(format!(
                "dtype='uint16' cannot hold this vocabulary's ids (they run up to {}); use 'uint32'",
                n_vocab - 1
            )));
        }
        Ok(id_type)
    }
}

/// The texts of an Arrow string array, row by row (None for a null row).
fn texts_of(array: &ArrayRef) -> PyResult<Vec<Option<&str>>> {
    Ok(match array.data_type() {
        DataType::Utf8 => array.as_string::<i32>().iter().collect(),
        DataType::LargeUtf8 => array.as_string::<i64>().iter().collect(),
        DataType::Utf8View => array.as_string_view().iter().collect(),
        DataType::Null => vec![None; array.len()],
        DataType::Dictionary(_, value) if matches!(**value, DataType::Utf8 | DataType::LargeUtf8) => {
            return Err(PyTypeError::new_err(format!(
                "encode_arrow expects an Arrow array of strings, got {}; decode the dictionary first \
                 (pyarrow: `array.dictionary_decode()`)",
                array.data_type()
            )))
        }
        other => {
            return Err(PyTypeError::new_err(format!(
                "encode_arrow expects an Arrow array of strings (string, large_string or string_view), got {other}"
            )))
        }
    })
}

/// A contiguous run of rows, encoded by one worker into one buffer.
struct Unit {
    rows: std::ops::Range<usize>,
}

/// Runs of rows of about [`UNIT_BYTES`] of text each (a longer text is a unit of its own); with
/// one thread, all the rows in one unit, whose ids then become the array's values as they are.
fn units_of(texts: &[Option<&str>], threads: usize) -> Vec<Unit> {
    if threads <= 1 {
        return vec![Unit { rows: 0..texts.len() }];
    }
    let mut units = Vec::new();
    let (mut start, mut bytes) = (0, 0);
    for (row, text) in texts.iter().enumerate() {
        bytes += text.map_or(0, str::len);
        if bytes >= UNIT_BYTES {
            units.push(Unit {
                rows: start..row + 1,
            });
            (start, bytes) = (row + 1, 0);
        }
    }
    if start < texts.len() {
        units.push(Unit {
            rows: start..texts.len(),
        });
    }
    units
}

/// The most ids a unit's buffer starts with room for (64 MB); a larger unit's buffer grows.
const MOST_ROOM: usize = 1 << 24;

/// Ids per byte of text seen so far in one call, to size each unit's buffer so that it rarely
/// grows (a grown buffer is copied): a model's ids per byte range from under a quarter to one.
struct IdsPerByte {
    ids: AtomicUsize,
    bytes: AtomicUsize,
}

impl IdsPerByte {
    /// Room for the ids of `bytes` of text: the rate so far and an eighth more, or half an id per
    /// byte before any unit is done.
    fn room(&self, bytes: usize) -> usize {
        let (ids, seen) = (self.ids.load(Ordering::Relaxed), self.bytes.load(Ordering::Relaxed));
        let estimate = if seen == 0 { bytes / 2 } else { (bytes as u128 * ids as u128 * 9 / 8 / seen as u128) as usize };
        estimate.min(bytes).min(MOST_ROOM) + 16
    }

    fn add(&self, ids: usize, bytes: usize) {
        self.ids.fetch_add(ids, Ordering::Relaxed);
        self.bytes.fetch_add(bytes, Ordering::Relaxed);
    }
}

/// The ids of one unit, one row after another, and the number of ids of each row.
pub(crate) struct Encoded {
    ids: Vec<Rank>,
    lengths: Vec<usize>,
}

/// A row that could not be encoded: its index in the array, and why.
pub(crate) struct RowFailure<F> {
    pub(crate) row: usize,
    pub(crate) failure: F,
}

/// How each row's ids are framed: ids before and after every row (a tokenizer's BOS and EOS), and
/// what a null row becomes.
pub(crate) struct Framing<'a> {
    pub(crate) prefix: &'a [Rank],
    pub(crate) suffix: &'a [Rank],
    pub(crate) nulls: Nulls,
}

impl Framing<'_> {
    /// How many ids the rows of `encoded` hold with their framing: the array's value count.
    fn total_ids(&self, encoded: &[Encoded]) -> usize {
        let framed = self.prefix.len() + self.suffix.len();
        encoded
            .iter()
            .map(|unit| unit.ids.len() + framed * unit.lengths.len())
            .sum()
    }
}

/// The list array of `encoded` (the units of `texts`, in order), ids as `T`.
fn list_array<T: ArrowPrimitiveType, O: OffsetSizeTrait>(
    texts: &[Option<&str>],
    encoded: &[Encoded],
    framing: &Framing<'_>,
    convert: impl Fn(Rank) -> T::Native,
) -> PyResult<ArrayRef> {
    let total = framing.total_ids(encoded);
    let mut values: Vec<T::Native> = Vec::with_capacity(total);
    let mut offsets: Vec<O> = Vec::with_capacity(texts.len() + 1);
    offsets.push(O::usize_as(0));
    let mut row = 0;
    for unit in encoded {
        let mut start = 0;
        for &length in &unit.lengths {
            if !(texts[row].is_none() && framing.nulls == Nulls::Null) {
                values.extend(framing.prefix.iter().map(|&id| convert(id)));
                values.extend(
                    unit.ids[start..start + length]
                        .iter()
                        .map(|&id| convert(id)),
                );
                values.extend(framing.suffix.iter().map(|&id| convert(id)));
            }
            offsets.push(O::usize_as(values.len()));
            start += length;
            row += 1;
        }
    }
    let nulls = (framing.nulls == Nulls::Null && texts.iter().any(Option::is_none))
        .then(|| NullBuffer::from_iter(texts.iter().map(Option::is_some)));
    finish::<T, O>(values, offsets, nulls)
}

/// The `uint32` list array of one unit's rows, none framed or null: its ids become the values as
/// they are, without a copy (cut to their length when the buffer has much more room: the array
/// may be kept long after).
fn unit_array<O: OffsetSizeTrait>(mut unit: Encoded) -> PyResult<ArrayRef> {
    crate::trim_room(&mut unit.ids);
    let mut offsets: Vec<O> = Vec::with_capacity(unit.lengths.len() + 1);
    offsets.push(O::usize_as(0));
    let mut end = 0;
    offsets.extend(unit.lengths.iter().map(|&length| {
        end += length;
        O::usize_as(end)
    }));
    finish::<UInt32Type, O>(unit.ids, offsets, None)
}

/// The list array of `values` cut at `offsets`, with `nulls`.
fn finish<T: ArrowPrimitiveType, O: OffsetSizeTrait>(
    values: Vec<T::Native>,
    offsets: Vec<O>,
    nulls: Option<NullBuffer>,
) -> PyResult<ArrayRef> {
    let values = PrimitiveArray::<T>::new(ScalarBuffer::from(values), None);
    let field = Arc::new(Field::new("item", T::DATA_TYPE, false));
    // SAFETY: the offsets start at 0 and never decrease (each is the values' length so far).
    let offsets = unsafe { OffsetBuffer::new_unchecked(ScalarBuffer::from(offsets)) };
    let list = GenericListArray::<O>::try_new(field, offsets, Arc::new(values), nulls)
        .map_err(|error| PyValueError::new_err(error.to_string()))?;
    Ok(Arc::new(list))
}

/// [`list_array`] with `i32` offsets when they fit (a `list` array), `i64` otherwise (`large_list`).
pub(crate) fn ids_array(
    texts: &[Option<&str>],
    mut encoded: Vec<Encoded>,
    framing: &Framing<'_>,
    id_type: IdType,
) -> PyResult<ArrayRef> {
    let total = framing.total_ids(&encoded);
    let framed = !framing.prefix.is_empty() || !framing.suffix.is_empty();
    let null_rows = framing.nulls == Nulls::Null && texts.iter().any(Option::is_none);
    if id_type == IdType::UInt32 && encoded.len() == 1 && !framed && !null_rows {
        let unit = encoded.pop().expect("one unit");
        return if total <= i32::MAX as usize { unit_array::<i32>(unit) } else { unit_array::<i64>(unit) };
    }
    let encoded = &encoded[..];
    if id_type == IdType::UInt16 {
        let every_id = encoded
            .iter()
            .flat_map(|unit| &unit.ids)
            .chain(framing.prefix)
            .chain(framing.suffix);
        if let Some(id) = every_id
            .copied()
            .filter(|&id| id > u32::from(u16::MAX))
            .max()
        {
            return Err(PyValueError::new_err(format!(
                "dtype='uint16' cannot hold id {id} (an added or special token); use 'uint32'"
            )));
        }
    }
    macro_rules! build {
        ($offset:ty) => {
            match id_type {
                IdType::UInt16 => {
                    list_array::<UInt16Type, $offset>(texts, encoded, framing, |id| id as u16)
                }
                IdType::UInt32 => {
                    list_array::<UInt32Type, $offset>(texts, encoded, framing, |id| id)
                }
                IdType::Int32 => {
                    list_array::<Int32Type, $offset>(texts, encoded, framing, |id| id as i32)
                }
                IdType::Int64 => {
                    list_array::<Int64Type, $offset>(texts, encoded, framing, i64::from)
                }
            }
        };
    }
    if total <= i32::MAX as usize {
        build!(i32)
    } else {
        build!(i64)
    }
}

/// The string arrays of an Arrow object from Python, and whether it was one array (rather than a
/// stream, such as a chunked array).
pub(crate) fn string_chunks(value: &Bound<'_, PyAny>) -> PyResult<(Vec<ArrayRef>, bool)> {
    let any: AnyArray = value.extract().map_err(|_| {
        let type_name = crate::type_name(value);
        PyTypeError::new_err(format!(
            "encode_arrow expects an Arrow array of strings (pyarrow.Array, pyarrow.ChunkedArray or any \
             object with __arrow_c_array__ or __arrow_c_stream__), got {type_name}"
        ))
    })?;
    match any {
        AnyArray::Array(array) => Ok((vec![array.into_inner().0], true)),
        AnyArray::Stream(stream) => {
            let chunked = AnyArray::Stream(stream).into_chunked_array()?;
            Ok((chunked.into_inner().0, false))
        }
    }
}

/// The rows of every chunk, one after another, and where each chunk's rows start.
pub(crate) fn rows_of(chunks: &[ArrayRef]) -> PyResult<(Vec<Option<&str>>, Vec<usize>)> {
    let mut texts = Vec::with_capacity(chunks.iter().map(|chunk| chunk.len()).sum());
    let mut starts = Vec::with_capacity(chunks.len() + 1);
    for chunk in chunks {
        starts.push(texts.len());
        texts.extend(texts_of(chunk)?);
    }
    starts.push(texts.len());
    Ok((texts, starts))
}

/// The arrays for Python: one pyarrow array, or a pyarrow chunked array with one chunk per input chunk.
pub(crate) fn to_pyarrow(
    py: Python<'_>,
    arrays: Vec<ArrayRef>,
    single: bool,
) -> PyResult<Bound<'_, PyAny>> {
    if single {
        let array = arrays
            .into_iter()
            .next()
            .expect("one array for one input array");
        let exported = PyArray::from_array_ref(array).into_pyobject(py)?;
        py.import("pyarrow")?.getattr("array")?.call1((exported,))
    } else {
        let field = Arc::new(Field::new(
            "item",
            arrays
                .first()
                .map_or(DataType::Null, |a| a.data_type().clone()),
            true,
        ));
        PyChunkedArray::try_new(arrays, field)?.into_pyarrow(py)
    }
}

/// Encodes every row of `texts` (the chunks' rows one after another, chunk `i` from `starts[i]`)
/// on `pool`: `encode` appends a text's ids to a buffer; a null row encodes as "". The units of
/// each chunk, in order; the error is the first failing row in row order.
pub(crate) fn encode_chunks<F: Send>(
    pool: &rayon::ThreadPool,
    texts: &[Option<&str>],
    starts: &[usize],
    encode: impl Fn(&str, &mut Vec<Rank>) -> Result<(), F> + Sync + Send,
) -> Result<Vec<Vec<Encoded>>, RowFailure<F>> {
    let units: Vec<(usize, Unit)> = starts
        .windows(2)
        .enumerate()
        .flat_map(|(chunk, bounds)| {
            units_of(&texts[bounds[0]..bounds[1]], pool.current_num_threads())
                .into_iter()
                .map(move |unit| {
                    (
                        chunk,
                        Unit {
                            rows: unit.rows.start + bounds[0]..unit.rows.end + bounds[0],
                        },
                    )
                })
        })
        .collect();
    let rate = IdsPerByte { ids: AtomicUsize::new(0), bytes: AtomicUsize::new(0) };
    let results = crate::parallel_map(
        pool,
        &units,
        |(_, unit)| -> Result<Encoded, RowFailure<F>> {
            let text_bytes: usize = texts[unit.rows.clone()]
                .iter()
                .map(|text| text.map_or(0, str::len))
                .sum();
            let mut encoded = Encoded {
                ids: Vec::with_capacity(rate.room(text_bytes)),
                lengths: Vec::with_capacity(unit.rows.len()),
            };
            for row in unit.rows.clone() {
                let before = encoded.ids.len();
                encode(texts[row].unwrap_or(""), &mut encoded.ids)
                    .map_err(|failure| RowFailure { row, failure })?;
                encoded.lengths.push(encoded.ids.len() - before);
            }
            rate.add(encoded.ids.len(), text_bytes);
            Ok(encoded)
        },
    );
    let mut by_chunk: Vec<Vec<Encoded>> = (0..starts.len() - 1).map(|_| Vec::new()).collect();
    for ((chunk, _), result) in units.iter().zip(results) {
        by_chunk[*chunk].push(result?);
    }
    Ok(by_chunk)
}
