"""Ids from the core for :class:`~hf_bpe.BPETokenizer`: single texts, batches (on threads), character
offsets, padded NumPy arrays laid out by the core, and Arrow list columns (built by the
core, or from the tokenizer's own call where the core cannot match the added tokens alone); the lookups
they need (added-token matchers, token strings)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

from transformers import PreTrainedTokenizer
from transformers.tokenization_utils_base import AddedToken, BatchEncoding, PaddingStrategy, TensorType

from hf_bpe._added_tokens import AddedTokensEncoder
from hf_bpe._byte_level import token_to_str
from hf_bpe.model import BPE, IdType, Nulls, _arrow_strings, id_type_for
from hf_bpe.sentencepiece_bpe import NORMAL
from hf_bpe.transformers._added_tokens import AddedTokens


class Encoded(NamedTuple):
    """A sequence's ids; with offsets, the character span of each, and the text of each token whose
    span takes in whitespace around it (an added token with ``lstrip`` or ``rstrip``; None for the
    others): `tokenizers` trims offsets by that text, not by the token's own."""

    ids: list[int]
    spans: list[tuple[int, int]] | None = None
    texts: list[str | None] | None = None


class CoreEncoding(PreTrainedTokenizer):
    """The part of :class:`~hf_bpe.BPETokenizer` that asks the core for ids (a mixin: the state is
    the tokenizer's)."""

    _model: BPE
    _add_bos: bool
    _add_eos: bool
    _tables: Tables | None
    _added: AddedTokens | None
    _added_tokens_decoder: dict[int, AddedToken]

    def _get_tables(self) -> Tables:
        if self._tables is None:
            self._tables = Tables(self._model)
        return self._tables

    def _added_tokens(self) -> AddedTokens:
        """The core's added-token matchers, rebuilt when the added tokens change (a new table, or
        one changed in place by transformers' own code)."""
        added, decoder = self._added, self._added_tokens_decoder
        if added is None or added.decoder is not decoder or added.size != len(decoder):
            added = self._added = AddedTokens(self._model, decoder)
        return added

    def _core_encoder(self, split_special_tokens: bool) -> AddedTokensEncoder | None:
        """The model's encoder that cuts out the added tokens, or None where they must be cut out
        in Python first (``AddedTokens.two_phase``)."""
        added = self._added_tokens()
        if added.in_python(split_special_tokens):
            return None
        return added.encoder_without_specials if split_special_tokens else added.encoder

    def _encode_texts(self, texts: list[str], split_special_tokens: bool) -> list[list[int]]:
        """Ids of each text, added tokens cut out first, all in the core (threads for batches)."""
        encoder = self._core_encoder(split_special_tokens)
        if encoder is None:
            added = self._added_tokens()
            return [added.two_phase(text, split_special_tokens)[0] for text in texts]
        if len(texts) == 1:
            return [encoder.encode(texts[0])]
        return encoder.encode_batch(texts)

    def _encode_arrow(
        self,
        texts: Any,
        *,
        add_special_tokens: bool,
        split_special_tokens: bool,
        num_threads: int | None,
        dtype: IdType,
        nulls: Nulls,
    ) -> Any:
        """``self(texts)["input_ids"]`` as an Arrow list column: built by the core when it matches the
        added tokens alone (with their rules, or without Python's two-phase matching), otherwise from
        ``self`` called on the rows (:func:`encode_by_calling`, which refuses what ``self`` refuses)."""
        texts = _arrow_strings(texts)
        if dtype == "auto":  # every id the tokenizer can give: the vocabulary's and the added tokens'
            dtype = id_type_for(dtype, max([self._model.n_vocab - 1, *self._added_tokens_decoder]))  # type: ignore[assignment]
        encoder = self._core_encoder(split_special_tokens) if self._added_tokens().in_core else None
        if encoder is None:
            def call(rows: list[str]) -> Any:
                return self(rows, add_special_tokens=add_special_tokens, split_special_tokens=split_special_tokens)

            return encode_by_calling(call, texts, dtype=dtype, nulls=nulls)
        prefix = [self.bos_token_id] if add_special_tokens and self._add_bos else []
        suffix = [self.eos_token_id] if add_special_tokens and self._add_eos else []
        return encoder.encode_arrow(texts, num_threads=num_threads, dtype=dtype, nulls=nulls,
                                    prefix=prefix, suffix=suffix)

    def _ids_and_starts(self, text: str) -> tuple[list[int], list[int]]:
        """``encode(text, add_special_tokens=False)`` and where each token starts (what
        :meth:`view` draws)."""
        if self._added_tokens().in_core:
            return self._encode_with_starts(text, self.split_special_tokens)
        encoded = self(text, add_special_tokens=False, return_offsets_mapping=True)  # type: ignore[operator]
        return list(encoded["input_ids"]), [start for start, _ in encoded["offset_mapping"]]

    def _encode_with_starts(self, text: str, split_special_tokens: bool) -> tuple[list[int], list[int]]:
        """Ids of ``text`` and the character where each starts, as `tokenizers` gives them."""
        added = self._added_tokens()
        if added.in_python(split_special_tokens):
            return added.two_phase(text, split_special_tokens)
        encoder = added.encoder_without_specials if split_special_tokens else added.encoder
        return encoder.encode_with_offsets(text)  # type: ignore[no-any-return]

    def _encode_with_offsets(self, text: str, split_special_tokens: bool) -> Encoded:
        """Ids of ``text`` and the characters each covers, ``(start, end)``, as `tokenizers` gives
        them (and the texts of :class:`Encoded`), from the core (:func:`~hf_bpe.model.encode_with_spans`):
        a token holding part of a character covers all of it, a token of normalized text the
        characters of the original it comes from (the space `ByteLevel`'s ``add_prefix_space`` puts
        before a stretch of text, or before a piece, covers its first character), an added token its
        match with the whitespace it strips."""
        if self._model.kind == "sentencepiece":  # the alignment of its tokenizer.json's normalizer
            ids, spans = self._added_tokens().sentencepiece_spans(text, split_special_tokens)
            return Encoded(ids, spans)
        added = self._added_tokens()
        if added.first_phase is not None and not split_special_tokens:
            ids, spans = added.two_phase_spans(text)
        else:
            encoder = added.encoder_without_specials if split_special_tokens else added.encoder
            ids, spans = encoder.encode_with_spans(text)
        stripping = frozenset(token_id for token_id, token in self._added_tokens_decoder.items()
                              if token.lstrip or token.rstrip)
        if not stripping:
            return Encoded(ids, spans)
        texts = [text[start:end] if token_id in stripping else None for token_id, (start, end) in zip(ids, spans)]
        return Encoded(ids, spans, texts)

    def _encode_texts_batch(self, texts: list[str], request: BatchRequest) -> BatchEncoding:
        """The common case, a batch of texts with at most padding, without the per-text Python of
        the general path; the result is the same (the tests hold the two side by side)."""
        if (
            request.return_tensors == TensorType.NUMPY
            and request.padding_strategy != PaddingStrategy.DO_NOT_PAD
            and texts
        ):
            arrays = self._padded_arrays(texts, request)
            if arrays is not None:
                return BatchEncoding(arrays, tensor_type=request.return_tensors)
        rows = self._encode_texts(texts, request.split_special_tokens)
        if request.add_special_tokens and (self._add_bos or self._add_eos):
            bos = [self.bos_token_id] if self._add_bos else []
            eos = [self.eos_token_id] if self._add_eos else []
            rows = [bos + row + eos for row in rows]
        lengths = [len(row) for row in rows]
        if request.max_length is None and request.verbose and lengths and max(lengths) > self.model_max_length:
            self._eventual_warn_about_too_long_sequence(
                rows[lengths.index(max(lengths))], request.max_length, request.verbose
            )
        target = request.padded_length(max(lengths, default=None))
        outputs: dict[str, Any] = {}
        if target is None:
            outputs["input_ids"] = rows
            if request.return_attention_mask:
                outputs["attention_mask"] = [[1] * length for length in lengths]
        else:
            pad = self.pad_token_id
            left = request.pads_left(self.padding_side)
            missing = [max(0, target - length) for length in lengths]
            if left:
                outputs["input_ids"] = [[pad] * gap + row for gap, row in zip(missing, rows)]
            else:
                outputs["input_ids"] = [row + [pad] * gap for gap, row in zip(missing, rows)]
            if request.return_attention_mask:
                outputs["attention_mask"] = [
                    [0] * gap + [1] * length if left else [1] * length + [0] * gap
                    for gap, length in zip(missing, lengths)
                ]
        return BatchEncoding(outputs, tensor_type=request.return_tensors)

    def _padded_arrays(self, texts: list[str], request: BatchRequest) -> dict[str, Any] | None:
        """``_encode_texts_batch`` for padded NumPy output: arrays laid out by the core from the ids it
        keeps (where added tokens are cut out in Python first, from their lists), without lists of
        Python ints; None where the rows would not all fit the padded length (then the list
        path gives transformers' own result or error)."""
        from hf_bpe._core import EncodedRows

        encoder = self._core_encoder(request.split_special_tokens)
        if encoder is not None:
            rows = encoder.encode_rows(texts)
        else:
            rows = EncodedRows(self._encode_texts(texts, request.split_special_tokens))
        lengths = rows.lengths()
        bos = int(request.add_special_tokens and self._add_bos)
        eos = int(request.add_special_tokens and self._add_eos)
        totals = lengths + (bos + eos)
        longest = int(totals.max())
        if request.max_length is None and request.verbose and longest > self.model_max_length:
            row = int(totals.argmax())
            ids_of_row = rows.row(row)
            sequence = [self.bos_token_id] * bos + ids_of_row + [self.eos_token_id] * eos
            self._eventual_warn_about_too_long_sequence(sequence, request.max_length, request.verbose)
        target = request.padded_length(longest)
        if target is None or longest > target:
            return None
        left = request.pads_left(self.padding_side)
        input_ids, attention = rows.padded(target, self.pad_token_id, left,
                                           self.bos_token_id if bos else None, self.eos_token_id if eos else None,
                                           request.return_attention_mask)
        arrays: dict[str, Any] = {"input_ids": input_ids}
        if request.return_attention_mask:
            arrays["attention_mask"] = attention
        return arrays


class Tables:
    """Per-model lookups built on first use: token strings and the vocabulary."""

    def __init__(self, model: BPE) -> None:
        spelled: list[str | None] = [None] * model.n_vocab
        spec = model.sentencepiece
        self.sentencepiece_lead = 0
        """A normal piece without ``▁`` (a SentencePiece model's; else 0)."""
        if spec is not None:  # a SentencePiece model's tokens are its pieces, as in its tokenizer.json
            spelled[: len(spec.pieces)] = [piece.text for piece in spec.pieces]
            self.sentencepiece_lead = next((index for index, piece in enumerate(spec.pieces)
                                            if piece.type == NORMAL and piece.text and "\u2581" not in piece.text), 0)
        else:
            for token, rank in model.mergeable_ranks.items():
                spelled[rank] = token_to_str(token)
        for text, token_id in model.special_tokens.items():
            spelled[token_id] = text
        self.spelled = spelled
        self.vocab = {token: token_id for token_id, token in enumerate(spelled) if token is not None}


@dataclass(frozen=True)
class BatchRequest:
    """What a caller of ``tokenizer(texts, ...)`` asked for, as the batch path needs it (transformers'
    argument names)."""

    add_special_tokens: bool
    padding_strategy: PaddingStrategy
    max_length: int | None
    pad_to_multiple_of: int | None
    padding_side: str | None
    return_tensors: Any
    return_attention_mask: bool
    split_special_tokens: bool
    verbose: bool

    def padded_length(self, longest: int | None) -> int | None:
        """The length a batch's rows are padded to (the longest row, or ``max_length``), rounded up
        to a multiple of ``pad_to_multiple_of``; None when nothing is padded."""
        target = {PaddingStrategy.LONGEST: longest, PaddingStrategy.MAX_LENGTH: self.max_length}.get(
            self.padding_strategy
        )
        multiple = self.pad_to_multiple_of
        if target is not None and multiple is not None and target % multiple:
            target = (target // multiple + 1) * multiple
        return target

    def pads_left(self, tokenizer_side: str) -> bool:
        """Whether padding goes before the tokens: the call's ``padding_side``, else the tokenizer's."""
        return (self.padding_side if self.padding_side is not None else tokenizer_side) == "left"


def encode_by_calling(tokenizer: Any, texts: Any, *, dtype: IdType = "uint32", nulls: Nulls = "raise") -> Any:
    """``tokenizer(rows)["input_ids"]`` of the rows of an Arrow string column, as an Arrow list column
    like :meth:`~hf_bpe.BPE.encode_arrow`'s (a chunked array for a chunked array): the slow path, for
    tokenizers the core cannot run alone.

    >>> import pyarrow as pa, hf_bpe
    >>> enc = hf_bpe.get_encoding("gpt2")
    >>> encode_by_calling(lambda rows: {"input_ids": enc.encode_batch(rows)}, pa.array(["hi", None]),
    ...                   nulls="null").to_pylist()
    [[5303], None]
    """
    import numpy as np
    import pyarrow as pa  # type: ignore[import-untyped]

    if dtype == "auto":  # a transformers tokenizer: its ids lie below len(tokenizer)
        dtype = id_type_for(dtype, len(tokenizer) - 1) if hasattr(tokenizer, "__len__") else "uint32"  # type: ignore[assignment]
    rows = texts.to_pylist()
    missing = [index for index, text in enumerate(rows) if text is None]
    if missing and nulls == "raise":
        raise ValueError(f"row {missing[0]} of the array is null (None), not a string; pass nulls='empty' to "
                         "encode null rows as \"\", nulls='null' to keep them null, or drop them first")
    # transformers refuses an empty batch; an empty column has no ids to ask for
    ids = tokenizer([text if text is not None else "" for text in rows])["input_ids"] if rows else []
    mask = np.array([text is None for text in rows]) if missing and nulls == "null" else None
    array = pa.array(ids, type=pa.list_(pa.from_numpy_dtype(np.dtype(dtype))), mask=mask)
    return pa.chunked_array([array]) if isinstance(texts, pa.ChunkedArray) else array
