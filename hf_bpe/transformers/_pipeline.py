"""transformers' encoding pipeline for :class:`~hf_bpe.BPETokenizer`, mirrored from ``PythonBackend``
(``_encode_plus``, ``prepare_for_model``, padding): the texts of a call are encoded in one core batch,
then assembled exactly as transformers assembles them (truncation, BOS/EOS, masks, offsets, padding).

Why an override of a private method: ``PreTrainedTokenizerBase.__call__`` hands every call to
``_encode_plus``, the method each backend implements (``PythonBackend`` and ``TokenizersBackend`` both
do). ``PythonBackend``'s own version encodes a batch one text at a time, each through ``tokenize`` (a
Python string per token) and ``convert_tokens_to_ids``; its public hooks (``tokenize``, ``_tokenize``,
``_convert_token_to_id``, ``prepare_for_model``) are all per text or per token. transformers has no
public hook that receives a whole batch of texts, which is what encoding them in one core call needs.
So this module implements ``_encode_plus`` and keeps what it calls identical to ``PythonBackend``'s;
it is checked against :data:`TRANSFORMERS_CHECKED` (pyproject.toml pins the same range), and
transformers' own ``TokenizerTesterMixin`` runs against the class (tests/transformers/test_transformers_suite.py),
which fails, naming this module, on a transformers major outside the range.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

from transformers.tokenization_utils_base import BatchEncoding, PaddingStrategy, TruncationStrategy

from hf_bpe._rwlock import reading
from hf_bpe.transformers._encode import BatchRequest, CoreEncoding, Encoded

TRANSFORMERS_CHECKED = ">=5.0,<6"
"""The transformers releases this override was checked against (``transformers>=5.0,<6`` in pyproject.toml)."""

TRANSFORMERS_MAJORS = (5,)
"""The majors of :data:`TRANSFORMERS_CHECKED`."""


PAIR_TEMPLATES = ("bos_eos", "roberta", "bert")
"""How :class:`~hf_bpe.BPETokenizer` frames a pair of sequences (see ``BPETokenizer.from_model``)."""

_WHITESPACE = frozenset("\t\n\x0b\x0c\r \x85\xa0\u1680\u2028\u2029\u202f\u205f\u3000\u0120"
                        + "".join(map(chr, range(0x2000, 0x200B))))
"""What `tokenizers`' offset trimming takes for a space in a token's string: Rust's
``char::is_whitespace``, and ``Ġ`` (a space byte in the byte-level alphabet)."""


@dataclass(frozen=True)
class PostProcessing:
    """What a ``tokenizer.json``'s post-processor does besides adding BOS/EOS tokens: the frame of a
    pair (``pair_template``, one of :data:`PAIR_TEMPLATES`) and the trimming of offsets
    (``trim_offsets``, keeping a sequence's first single leading space with
    ``trim_keeps_prefix_space``)."""

    pair_template: str = "bos_eos"
    trim_offsets: bool = False
    trim_keeps_prefix_space: bool = False

    @classmethod
    def of(cls, pair_template: Any, trim_offsets: Any, trim_keeps_prefix_space: Any) -> PostProcessing:
        """The settings, checked (``ValueError`` / ``TypeError`` naming the wrong one)."""
        if pair_template not in PAIR_TEMPLATES:
            raise ValueError(f"pair_template is {pair_template!r:.40}; expected one of {', '.join(PAIR_TEMPLATES)}")
        for name, value in (("trim_offsets", trim_offsets), ("trim_keeps_prefix_space", trim_keeps_prefix_space)):
            if not isinstance(value, bool):
                raise TypeError(f"{name} is {value!r:.40}; expected True or False")
        return cls(pair_template, trim_offsets, trim_keeps_prefix_space)

    def settings(self) -> dict[str, Any]:
        """The settings that differ from the defaults, as ``BPETokenizer`` takes them."""
        default = PostProcessing()
        return {name: getattr(self, name) for name in ("pair_template", "trim_offsets", "trim_keeps_prefix_space")
                if getattr(self, name) != getattr(default, name)}


class EncodingPipeline(CoreEncoding):
    """``_encode_plus`` and what it calls (a mixin of :class:`~hf_bpe.BPETokenizer`)."""

    _post: PostProcessing

    @reading
    def _encode_plus(  # type: ignore[override]
        self,
        text: Any,
        text_pair: Any = None,
        add_special_tokens: bool = True,
        padding_strategy: PaddingStrategy = PaddingStrategy.DO_NOT_PAD,
        truncation_strategy: TruncationStrategy = TruncationStrategy.DO_NOT_TRUNCATE,
        max_length: int | None = None,
        stride: int = 0,
        is_split_into_words: bool = False,
        pad_to_multiple_of: int | None = None,
        padding_side: str | None = None,
        return_tensors: Any = None,
        return_token_type_ids: bool | None = None,
        return_attention_mask: bool | None = None,
        return_overflowing_tokens: bool = False,
        return_special_tokens_mask: bool = False,
        return_offsets_mapping: bool = False,
        return_length: bool = False,
        verbose: bool = True,
        split_special_tokens: bool | None = None,
        **kwargs: Any,
    ) -> BatchEncoding:
        """Encode in the core, then assemble exactly as ``PythonBackend`` does (truncation, special
        tokens, masks, padding), plus character offsets on request. Calls run in parallel, but not
        while :meth:`add_tokens` changes the tokenizer."""
        if split_special_tokens is None:
            split_special_tokens = self.split_special_tokens
        _check_types(text, text_pair, is_split_into_words)
        self._added_tokens().check_in_core()
        if kwargs.get("sanitize_control_tokens"):
            if return_offsets_mapping:
                raise NotImplementedError("return_offsets_mapping=True is not available with sanitize_control_tokens")
            return super()._encode_plus(
                text=text,
                text_pair=text_pair,
                add_special_tokens=add_special_tokens,
                padding_strategy=padding_strategy,
                truncation_strategy=truncation_strategy,
                max_length=max_length,
                stride=stride,
                is_split_into_words=is_split_into_words,
                pad_to_multiple_of=pad_to_multiple_of,
                padding_side=padding_side,
                return_tensors=return_tensors,
                return_token_type_ids=return_token_type_ids,
                return_attention_mask=return_attention_mask,
                return_overflowing_tokens=return_overflowing_tokens,
                return_special_tokens_mask=return_special_tokens_mask,
                return_length=return_length,
                verbose=verbose,
                split_special_tokens=split_special_tokens,
                **kwargs,
            )
        if (
            return_overflowing_tokens
            and truncation_strategy == TruncationStrategy.LONGEST_FIRST
            and text_pair is not None
            and not _is_batch(text, is_split_into_words)
        ):
            raise ValueError(
                "Not possible to return overflowing tokens for pair of sequences with the `longest_first`. "
                "Please select another truncation strategy than `longest_first`, for instance `only_second` or "
                "`only_first`."
            )
        batched = _is_batch(text, is_split_into_words)
        if return_attention_mask is None:
            return_attention_mask = "attention_mask" in self.model_input_names
        if return_token_type_ids is None:
            return_token_type_ids = "token_type_ids" in self.model_input_names
        if (
            batched
            and text_pair is None
            and truncation_strategy == TruncationStrategy.DO_NOT_TRUNCATE
            and not (is_split_into_words or return_offsets_mapping or return_token_type_ids)
            and not (return_overflowing_tokens or return_special_tokens_mask or return_length)
            and padding_strategy
            in (PaddingStrategy.DO_NOT_PAD, PaddingStrategy.LONGEST, PaddingStrategy.MAX_LENGTH)
            and all(isinstance(item, str) for item in text)
        ):
            request = BatchRequest(
                add_special_tokens=add_special_tokens,
                padding_strategy=padding_strategy,
                max_length=max_length,
                pad_to_multiple_of=pad_to_multiple_of,
                padding_side=padding_side,
                return_tensors=return_tensors,
                return_attention_mask=return_attention_mask,
                split_special_tokens=split_special_tokens,
                verbose=verbose,
            )
            return self._encode_texts_batch(list(text), request)
        items = _items(text, text_pair, batched, is_split_into_words)
        encoder = _SequenceEncoder(self, split_special_tokens, return_offsets_mapping, is_split_into_words)
        for first, second in items:
            encoder.request(first)
            if second is not None:
                encoder.request(second)
        encoder.run()
        options: dict[str, Any] = {
            "add_special_tokens": add_special_tokens,
            "truncation_strategy": truncation_strategy,
            "max_length": max_length,
            "stride": stride,
            "return_token_type_ids": return_token_type_ids,
            "return_overflowing_tokens": return_overflowing_tokens,
            "return_special_tokens_mask": return_special_tokens_mask,
            "verbose": verbose,
        }
        if not batched:
            first, second = items[0]
            encoded = self._assemble(
                encoder.result(first), None if second is None else encoder.result(second), **options
            )
            if return_overflowing_tokens and return_tensors:
                encoded.pop("overflowing_tokens", None)
                encoded.pop("num_truncated_tokens", None)
            if padding_strategy != PaddingStrategy.DO_NOT_PAD or return_attention_mask:
                encoded = self.pad(  # type: ignore[assignment]
                    encoded,
                    max_length=max_length,
                    padding=padding_strategy.value,
                    pad_to_multiple_of=pad_to_multiple_of,
                    padding_side=padding_side,
                    return_attention_mask=return_attention_mask,
                )
            if return_length:
                encoded["length"] = len(encoded["input_ids"])
            return BatchEncoding(encoded, tensor_type=return_tensors, prepend_batch_axis=True)
        outputs: dict[str, list[Any]] = {}
        for first, second in items:
            encoded = self._assemble(
                encoder.result(first), None if second is None else encoder.result(second), **options
            )
            if return_length:
                encoded["length"] = len(encoded["input_ids"])
            for key, value in encoded.items():
                outputs.setdefault(key, []).append(value)
        if return_tensors and return_overflowing_tokens:
            outputs.pop("overflowing_tokens", None)
            outputs.pop("num_truncated_tokens", None)
        padded = self.pad(
            outputs,
            padding=padding_strategy.value,
            max_length=max_length,
            pad_to_multiple_of=pad_to_multiple_of,
            padding_side=padding_side,
            return_attention_mask=return_attention_mask,
        )
        return BatchEncoding(padded.data, tensor_type=return_tensors)

    def _assemble(
        self,
        first: Encoded,
        second: Encoded | None,
        *,
        add_special_tokens: bool,
        truncation_strategy: TruncationStrategy,
        max_length: int | None,
        stride: int,
        return_token_type_ids: bool,
        return_overflowing_tokens: bool,
        return_special_tokens_mask: bool,
        verbose: bool,
    ) -> dict[str, Any]:
        """One sequence (or pair) as ``PythonBackend.prepare_for_model`` builds it, before padding."""
        ids, spans, texts = first
        pair_ids, pair_spans, pair_texts = second if second is not None else (None, None, None)
        if spans is not None:
            texts = texts or [None] * len(spans)
            pair_texts = None if pair_spans is None else pair_texts or [None] * len(pair_spans)
        if (
            return_overflowing_tokens
            and truncation_strategy == TruncationStrategy.LONGEST_FIRST
            and pair_ids is not None
        ):
            raise ValueError(
                "Not possible to return overflowing tokens for pair of sequences with the `longest_first`. "
                "Please select another truncation strategy than `longest_first`, for instance `only_second` or "
                "`only_first`."
            )
        n_special = self.num_special_tokens_to_add(pair_ids is not None)
        total = len(ids) + len(pair_ids or ()) + (n_special if add_special_tokens else 0)
        overflowing: list[int] = []
        if truncation_strategy != TruncationStrategy.DO_NOT_TRUNCATE and max_length and total > max_length:
            remove = total - max_length
            kept_ids, kept_pair, overflowing = self.truncate_sequences(
                ids, pair_ids=pair_ids, num_tokens_to_remove=remove, truncation_strategy=truncation_strategy,
                stride=stride,
            )  # fmt: skip
            if spans is not None:  # truncate_sequences only slices: the spans and texts are cut like the ids
                spans, pair_spans, _ = self.truncate_sequences(  # type: ignore[assignment]
                    spans, pair_ids=pair_spans, num_tokens_to_remove=remove,  # type: ignore[arg-type]
                    truncation_strategy=truncation_strategy, stride=stride,
                )  # fmt: skip
                texts, pair_texts, _ = self.truncate_sequences(  # type: ignore[assignment]
                    texts, pair_ids=pair_texts, num_tokens_to_remove=remove,  # type: ignore[arg-type]
                    truncation_strategy=truncation_strategy, stride=stride,
                )  # fmt: skip
            ids, pair_ids = kept_ids, kept_pair
        if spans is not None and self._post.trim_offsets:
            spans = self._trimmed(ids, spans, texts)
            pair_spans = None if pair_spans is None or pair_ids is None else \
                self._trimmed(pair_ids, pair_spans, pair_texts)
        if add_special_tokens:
            sequence = self.build_inputs_with_special_tokens(ids, pair_ids)
            type_ids = self.create_token_type_ids_from_sequences(ids, pair_ids)
        else:  # the second sequence keeps its type id, as in tokenizers' encodings (RoBERTa's: 0)
            sequence = ids + (pair_ids if pair_ids else [])
            pair_type = 0 if self._post.pair_template == "roberta" else 1
            type_ids = [0] * len(ids) + [pair_type] * len(pair_ids or ())
        encoded: dict[str, Any] = {"input_ids": sequence}
        if return_token_type_ids:
            encoded["token_type_ids"] = type_ids
        if return_special_tokens_mask:
            encoded["special_tokens_mask"] = (
                self.get_special_tokens_mask(ids, pair_ids) if add_special_tokens else [0] * len(sequence)
            )
        if spans is not None:
            encoded["offset_mapping"] = self._with_special_spans(spans, pair_spans, add_special_tokens)
        if return_overflowing_tokens and overflowing:
            encoded["overflowing_tokens"] = overflowing
            encoded["num_truncated_tokens"] = total - max_length if max_length else 0
        self._eventual_warn_about_too_long_sequence(sequence, max_length, verbose)
        return encoded

    def _with_special_spans(
        self, spans: list[tuple[int, int]], pair_spans: list[tuple[int, int]] | None, add_special_tokens: bool
    ) -> list[tuple[int, int]]:
        """Offsets with ``(0, 0)`` where the special tokens are inserted (as `tokenizers` does)."""
        if not add_special_tokens:
            return spans + (pair_spans or [])
        return self._framed(spans, pair_spans, (0, 0), (0, 0))

    def _trimmed(
        self, ids: list[int], spans: list[tuple[int, int]], texts: list[str | None] | None
    ) -> list[tuple[int, int]]:
        """The spans of one sequence's tokens with the spaces at either end of each token's string left
        out, as `tokenizers`' ``process_offsets`` does (a start moves right by the leading spaces, at
        most to the end; an end left by the trailing ones, at most to the start); with
        ``trim_keeps_prefix_space`` a single leading space of the first token, or of one starting the
        text, stays. A token's string is its text where ``texts`` gives one (an added token with the
        whitespace it strips, as `tokenizers` holds it)."""
        trimmed = []
        for index, (token, (start, end)) in enumerate(zip(self.convert_ids_to_tokens(ids), spans)):
            spelled = (texts[index] if texts is not None else None) or token or ""
            leading = len(spelled) - len(spelled.lstrip("".join(_WHITESPACE)))
            trailing = len(spelled) - len(spelled.rstrip("".join(_WHITESPACE)))
            if leading and not (self._post.trim_keeps_prefix_space and leading == 1 and (index == 0 or start == 0)):
                start = min(start + leading, end)
            if trailing and end >= trailing:
                end = max(end - trailing, start)
            trimmed.append((start, end))
        return trimmed

    def _framed(self, first: list[Any], second: list[Any] | None, bos: Any, eos: Any) -> list[Any]:
        """``first`` (and ``second``) framed with ``bos`` and ``eos`` as the pair template puts the
        special tokens: ``bos A eos`` and then ``bos B eos`` (``"bos_eos"``), ``eos B eos``
        (``"roberta"``) or ``B eos`` (``"bert"``)."""
        before = [bos] if self._add_bos else []
        after = [eos] if self._add_eos else []
        framed = before + first + after
        if second is not None:
            lead = {"bos_eos": before, "roberta": after, "bert": []}[self._post.pair_template]
            framed += lead + second + after
        return framed

    def _pad(  # type: ignore[override]
        self,
        encoded_inputs: dict[str, Any],
        max_length: int | None = None,
        padding_strategy: PaddingStrategy = PaddingStrategy.DO_NOT_PAD,
        pad_to_multiple_of: int | None = None,
        padding_side: str | None = None,
        return_attention_mask: bool | None = None,
    ) -> dict[str, Any]:
        """transformers' padding, also padding ``offset_mapping`` with ``(0, 0)``."""
        spans = encoded_inputs.pop("offset_mapping", None)
        before = len(encoded_inputs[self.model_input_names[0]])
        padded = super()._pad(
            encoded_inputs,
            max_length,
            padding_strategy,
            pad_to_multiple_of,
            padding_side,
            return_attention_mask,
        )
        if spans is not None:
            extra = [(0, 0)] * (len(padded[self.model_input_names[0]]) - before)
            side = padding_side if padding_side is not None else self.padding_side
            padded["offset_mapping"] = extra + list(spans) if side == "left" else list(spans) + extra
        return padded

    def build_inputs_with_special_tokens(
        self, token_ids_0: list[int], token_ids_1: list[int] | None = None
    ) -> list[int]:
        return self._framed(token_ids_0, token_ids_1, self.bos_token_id, self.eos_token_id)

    def create_token_type_ids_from_sequences(
        self, token_ids_0: list[int], token_ids_1: list[int] | None = None
    ) -> list[int]:
        """0 for the first sequence and its special tokens, 1 for the second's (0 for all with the
        ``"roberta"`` pair template), as `tokenizers`' post-processors give them."""
        first = len(self._framed(token_ids_0, None, 0, 0))
        total = len(self._framed(token_ids_0, token_ids_1, 0, 0))
        second = 0 if self._post.pair_template == "roberta" else 1
        return [0] * first + [second] * (total - first)

    def get_special_tokens_mask(
        self,
        token_ids_0: list[int],
        token_ids_1: list[int] | None = None,
        already_has_special_tokens: bool = False,
    ) -> list[int]:
        if already_has_special_tokens:
            return super().get_special_tokens_mask(token_ids_0, token_ids_1, already_has_special_tokens=True)
        return self._framed([0] * len(token_ids_0), None if token_ids_1 is None else [0] * len(token_ids_1), 1, 1)

    def num_special_tokens_to_add(self, pair: bool = False) -> int:
        return len(self._framed([], [] if pair else None, 0, 0))


class _SequenceEncoder:
    """Collects every text of a call, encodes them in one core batch, hands back ids (and spans)."""

    def __init__(
        self, tokenizer: EncodingPipeline, split_special_tokens: bool, offsets: bool, words: bool
    ) -> None:
        self._tokenizer = tokenizer
        self._split = split_special_tokens
        self._offsets = offsets
        self._words = words
        self._texts: list[str] = []
        self._results: list[Encoded] = []

    def request(self, sequence: Any) -> None:
        if isinstance(sequence, str):
            self._texts.append(sequence)
        elif (
            self._words and isinstance(sequence, (list, tuple)) and sequence and isinstance(sequence[0], str)
        ):
            self._texts.extend(sequence)

    def run(self) -> None:
        tokenizer = self._tokenizer
        if self._offsets:
            self._results = [tokenizer._encode_with_offsets(text, self._split) for text in self._texts]
        else:
            self._results = [Encoded(ids) for ids in tokenizer._encode_texts(self._texts, self._split)]
        self._next = iter(self._results)

    def result(self, sequence: Any) -> Encoded:
        """The encoding of ``sequence``, taken in the order the sequences were requested."""
        if isinstance(sequence, str):
            return next(self._next)
        if isinstance(sequence, (list, tuple)):
            if not sequence:
                return Encoded([], [] if self._offsets else None)
            if isinstance(sequence[0], int):
                if self._offsets:
                    raise ValueError("return_offsets_mapping=True needs text, not token ids")
                return Encoded(list(sequence))
            if isinstance(sequence[0], str):
                if not self._words:  # a list of token strings, as PythonBackend reads it
                    if self._offsets:
                        raise ValueError("return_offsets_mapping=True needs text, not token strings")
                    return Encoded(cast(list[int], self._tokenizer.convert_tokens_to_ids(list(sequence))))
                ids: list[int] = []
                spans: list[tuple[int, int]] | None = [] if self._offsets else None
                texts: list[str | None] = []
                for _ in sequence:
                    word_ids, word_spans, word_texts = next(self._next)
                    ids += word_ids
                    texts += word_texts or [None] * len(word_ids)
                    if spans is not None and word_spans is not None:
                        spans += word_spans
                return Encoded(ids, spans, texts if spans is not None else None)
        raise ValueError(f"Input must be a string, list of strings, or list of ints, got: {type(sequence)}")


def _check_types(text: Any, text_pair: Any, is_split_into_words: bool) -> None:
    """Raise ``TypeError`` naming the first item of ``text`` or ``text_pair`` that is neither a string
    nor a list of strings or of token ids (``PythonBackend`` would read ``[3, "a"]`` as ids and
    return the string among them)."""
    depth = 1 if _is_batch(text, is_split_into_words) else 0
    _check_sequence(text, "text", depth)
    if text_pair is not None:
        _check_sequence(text_pair, "text_pair", depth)


def _check_sequence(sequence: Any, where: str, depth: int) -> None:
    """``sequence`` is a string, or a list or tuple of token ids, or of strings (and, ``depth`` levels
    down, of such lists: a batch, pairs, words)."""
    if isinstance(sequence, str):
        return
    if not isinstance(sequence, (list, tuple)):
        raise TypeError(f"{where} is {_describe(sequence)}; expected a string, a list of strings or a list of token ids")
    if not sequence:
        return
    if _is_id(sequence[0]):
        for index, item in enumerate(sequence):
            if not _is_id(item):
                raise TypeError(f"{where}[{index}] is {_describe(item)} in a list of token ids (ints); "
                                "pass texts as strings and token ids as ints, not mixed")
        return
    for index, item in enumerate(sequence):
        if isinstance(item, str):
            continue
        if depth > 0 and isinstance(item, (list, tuple)):
            _check_sequence(item, f"{where}[{index}]", depth - 1)
            continue
        expected = "a string or a list of strings or token ids" if depth > 0 else "a string"
        raise TypeError(f"{where}[{index}] is {_describe(item)}; expected {expected}")


def _is_id(item: Any) -> bool:
    return isinstance(item, int) and not isinstance(item, bool)


def _describe(value: Any) -> str:
    return f"{type(value).__name__} {value!r:.40}"


def _is_batch(text: Any, is_split_into_words: bool) -> bool:
    """``PythonBackend._encode_plus``'s test for batched input."""
    return isinstance(text, (list, tuple)) and (
        (not text and not is_split_into_words)
        or (bool(text) and is_split_into_words and isinstance(text[0], (list, tuple)))
        or (bool(text) and not is_split_into_words and isinstance(text[0], (str, list, tuple)))
    )


def _items(text: Any, text_pair: Any, batched: bool, is_split_into_words: bool) -> list[tuple[Any, Any]]:
    """The (sequence, pair) items of a call, read as ``PythonBackend._encode_plus`` reads them."""
    if not batched:
        return [(text, text_pair)]
    if text_pair is not None and (not isinstance(text_pair, (list, tuple)) or len(text_pair) != len(text)):
        raise ValueError("If `text` is a batch, `text_pair` must also be a batch of the same length.")
    pairs = text_pair if text_pair is not None else [None] * len(text)
    items = []
    for current, pair in zip(text, pairs):
        if (
            isinstance(current, (list, tuple))
            and current
            and not isinstance(current[0], int)
            and pair is None
        ):
            is_pair = (
                len(current) == 2
                and (not is_split_into_words or isinstance(current, tuple))
                and isinstance(current[0], (str, list, tuple))
                and isinstance(current[1], (str, list, tuple))
            )
            if is_pair:
                current, pair = current
            elif len(current) == 1:
                current = current[0]
            elif not is_split_into_words:
                raise ValueError(f"Expected a pair of sequences, got {len(current)} sequences.")
        items.append((current, pair))
    return items
