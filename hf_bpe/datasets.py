"""Tokenizing a Hugging Face ``datasets`` corpus at the core's speed: Arrow in, Arrow out.

``dataset.map(lambda batch: tokenizer(batch["text"]), batched=True)`` spends most of its time turning
strings into Python objects and ids into Python lists and back into Arrow. :func:`tokenize` hands
each batch's Arrow column to the core as it is and gets an Arrow list column of ids back, built in
Rust on the thread pool with the GIL released.

>>> import datasets, hf_bpe
>>> from hf_bpe.datasets import tokenize
>>> corpus = datasets.Dataset.from_dict({"text": ["hello world", "tokenize me"]})
>>> tokenize(corpus, hf_bpe.get_encoding("gpt2"))[1]
{'text': 'tokenize me', 'input_ids': [30001, 1096, 502]}
"""

from __future__ import annotations

import os
import uuid
from typing import TYPE_CHECKING, Any

from hf_bpe.model import BPE, IdType, Nulls

if TYPE_CHECKING:
    import datasets  # type: ignore[import-untyped]
    import pyarrow as pa  # type: ignore[import-untyped]

__all__ = ["tokenize"]


def tokenize(
    dataset: datasets.Dataset | datasets.IterableDataset,
    tokenizer: Any,
    column: str = "text",
    *,
    batch_size: int = 1000,
    num_proc: int | None = None,
    num_threads: int | None = None,
    dtype: IdType = "uint32",
    nulls: Nulls = "raise",
    attention_mask: bool | None = None,
    remove_columns: bool = False,
    **map_kwargs: Any,
) -> Any:
    """``dataset`` with an ``input_ids`` column: the ids of each row's ``column``.

    ``tokenizer`` is a :class:`~hf_bpe.BPE` (ids of :meth:`~hf_bpe.BPE.encode_ordinary`), a
    :class:`~hf_bpe.BPETokenizer` (the ids ``tokenizer(texts)`` gives, BOS/EOS and added tokens
    included) or any other transformers tokenizer (called on each batch, the ordinary ``map`` path).
    Each batch of ``batch_size`` rows is encoded by the core on ``num_threads`` threads (default: the
    cores divided among the ``num_proc`` processes), so memory holds one batch at a time.
    ``attention_mask`` adds a column of ones per row (default: what the tokenizer returns;
    never for a bare ``BPE``); ``remove_columns=True`` keeps only the new columns. ``dtype`` and
    ``nulls`` are as in :meth:`~hf_bpe.BPE.encode_arrow`; other keyword arguments go to
    ``dataset.map`` (any other, such as the tokenizer's ``truncation`` or ``padding``, raises
    ``TypeError`` naming it: rows are encoded whole). The result has the dataset's format.

    >>> import datasets, hf_bpe
    >>> corpus = datasets.Dataset.from_dict({"text": ["hello world", None]})
    >>> ids = tokenize(corpus, hf_bpe.get_encoding("gpt2"), nulls="empty", remove_columns=True)
    >>> ids.features["input_ids"].feature.dtype, ids[:]
    ('uint32', {'input_ids': [[31373, 995], []]})
    """
    _check_map_arguments(dataset, map_kwargs)
    if attention_mask is None:
        attention_mask = not isinstance(tokenizer, BPE) and "attention_mask" in getattr(
            tokenizer, "model_input_names", ()
        )
    if num_threads is None and num_proc is not None and num_proc > 1:
        num_threads = max(1, (os.cpu_count() or 1) // num_proc)
    encode = _arrow_encoder(tokenizer, num_threads=num_threads, dtype=dtype, nulls=nulls)

    def tokenize_batch(batch: pa.Table) -> pa.Table:
        import pyarrow as pa

        if column not in batch.column_names:
            raise KeyError(f"tokenize: the dataset has no column {column!r} (it has {batch.column_names}); "
                           "pass column=... to name the text column")
        ids = encode(batch.column(column))
        columns = {"input_ids": ids}
        if attention_mask:
            columns["attention_mask"] = _ones_like(ids)
        if remove_columns:
            return pa.table(columns)
        for name, values in columns.items():  # a table returned by map is the whole new batch
            if name in batch.column_names:
                batch = batch.drop_columns([name])
            batch = batch.append_column(name, values)
        return batch

    if num_proc is not None:
        map_kwargs["num_proc"] = num_proc
    if hasattr(dataset, "_fingerprint"):
        # datasets would otherwise fingerprint the function by pickling it, vocabulary and all, at
        # every call (a second for cl100k, longer than tokenizing 8 MB); a fresh fingerprint never
        # reuses a cached result, which could come from another tokenizer.
        map_kwargs.setdefault("new_fingerprint", f"hf_bpe-tokenize-{uuid.uuid4().hex}")
    original_format = getattr(dataset, "format", {}).get("type")
    result = dataset.with_format("arrow").map(tokenize_batch, batched=True, batch_size=batch_size, **map_kwargs)
    return result.with_format(original_format)


TOKENIZER_CALL_ARGUMENTS = frozenset({
    "truncation", "max_length", "padding", "pad_to_multiple_of", "padding_side", "stride", "add_special_tokens",
    "return_tensors", "return_attention_mask", "return_token_type_ids", "return_offsets_mapping", "return_length",
    "return_overflowing_tokens", "return_special_tokens_mask", "is_split_into_words", "text_pair", "verbose",
})
"""Arguments of a transformers tokenizer's call, which :func:`tokenize` does not take (rows are encoded whole)."""


def _check_map_arguments(dataset: Any, map_kwargs: dict[str, Any]) -> None:
    """``TypeError`` naming each keyword argument that ``dataset.map`` does not take."""
    if not map_kwargs:
        return
    import inspect

    try:
        parameters = inspect.signature(dataset.map).parameters
    except (TypeError, ValueError, AttributeError):
        return
    if any(parameter.kind is inspect.Parameter.VAR_KEYWORD for parameter in parameters.values()):
        return
    unknown = sorted(set(map_kwargs) - set(parameters))
    if not unknown:
        return
    named = ", ".join(repr(name) for name in unknown)
    if set(unknown) & TOKENIZER_CALL_ARGUMENTS:
        raise TypeError(
            f"tokenize() does not take the tokenizer's call arguments {named}: it encodes each row whole "
            "(tokenizer(text) with no truncation or padding). Cut or pad the ids afterwards, e.g. "
            "tokenized.map(lambda row: {'input_ids': row['input_ids'][:512]}), or call "
            "dataset.map(lambda batch: tokenizer(batch['text'], truncation=True), batched=True)")
    raise TypeError(f"tokenize() got unexpected keyword arguments {named}: neither its own nor "
                    f"{type(dataset).__name__}.map()'s")


def _arrow_encoder(tokenizer: Any, *, num_threads: int | None, dtype: IdType, nulls: Nulls) -> Any:
    """A function from an Arrow string column to its Arrow list column of ids, for ``tokenizer``."""
    if isinstance(tokenizer, BPE):  # special tokens as ordinary text: encode_ordinary's path
        return lambda texts: tokenizer.encode_arrow(texts, num_threads=num_threads, dtype=dtype, nulls=nulls,
                                                    disallowed_special=())
    if hasattr(tokenizer, "encode_arrow"):
        encode = tokenizer.encode_arrow
        return lambda texts: encode(texts, num_threads=num_threads, dtype=dtype, nulls=nulls)
    if not callable(tokenizer):
        raise TypeError(f"tokenize expects an hf_bpe.BPE, a BPETokenizer or a transformers tokenizer, "
                        f"got {type(tokenizer).__name__}")
    # a transformers tokenizer, so transformers is installed
    from hf_bpe.transformers._encode import encode_by_calling

    return lambda texts: encode_by_calling(tokenizer, texts, dtype=dtype, nulls=nulls)


def _ones_like(ids: Any) -> Any:
    """An attention mask for the list column ``ids``: a list of ones (int8) of each row's length."""
    import numpy as np
    import pyarrow as pa

    if isinstance(ids, pa.ChunkedArray):
        return pa.chunked_array([_ones_like(chunk) for chunk in ids.chunks], type=pa.list_(pa.int8()))
    ones = pa.array(np.ones(len(ids.values), dtype=np.int8))
    return type(ids).from_arrays(ids.offsets, ones, mask=ids.is_null() if ids.null_count else None)
