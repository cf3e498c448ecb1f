"""``hf_bpe.patch_transformers()``: transformers' fast tokenizers (``TokenizersBackend``) encode with hf_bpe.

While patched, ``TokenizersBackend.from_pretrained`` (so ``AutoTokenizer.from_pretrained`` for a folder
or repository with a ``tokenizer.json``) puts a :class:`Backend` in place of the tokenizer's
``tokenizers.Tokenizer`` (``tokenizer._tokenizer``, ``backend_tokenizer``) when hf_bpe loads that
tokenizer exactly: :func:`conversion.hf.load` reads the live ``tokenizers.Tokenizer`` (its file with
what transformers changed: tokens, post-processor) and its load-time checks decide, and
:func:`conversion.hf.special_token_settings` reads the post-processor. A refusal leaves the tokenizer
on `tokenizers`, with one line on the ``hf_bpe`` logger naming the file and why.

A :class:`Backend` answers the calls transformers makes most from hf_bpe: ``encode_batch`` and
``encode`` of texts (ids, attention and special-token masks, type ids, offsets where hf_bpe gives
them, truncation and padding as `tokenizers` applies them) and ``decode`` / ``decode_batch``. Anything
else goes to the original ``tokenizers.Tokenizer`` it holds: pairs, pre-tokenized input, truncation it
does not reproduce (``only_second``, a stride as long as the room left), offsets trimmed by the
post-processor (``trim_offsets``), the other attributes of an encoding (``tokens``, ``word_ids``, ``overflowing``...:
the original encodes the same call again when one is first read), vocabulary look-ups, saving.

Thread safety: transformers sets truncation and padding on the backend before every call, so threads
calling one tokenizer at once race on that state (`tokenizers` before 0.23 raises "Already borrowed";
0.23 can give a call another thread's padding or truncation). Each thread works on its own copy of
the state in a :class:`Backend` (taken from the tokenizer's when the thread first uses it; what a
thread sets also becomes the tokenizer's, for threads that come later and for the original), and
every call into the original that changes it or releases the GIL holds the backend's lock.

:func:`unpatch_transformers` restores the class, ``tokenizers.decoders.DecodeStream`` (replaced by
:class:`hf_bpe.DecodeStream`, which decodes on a :class:`Backend`) and the backend of every tokenizer
the patch swapped; a :class:`Backend` left elsewhere (a copy) passes every call through from then on.
"""

from __future__ import annotations

import copy
import logging
import threading
import weakref
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import tokenizers.decoders
from tokenizers import Tokenizer
from transformers.tokenization_utils_tokenizers import TokenizersBackend

import conversion.hf
from hf_bpe._decode_stream import DecodeStream
from hf_bpe.errors import TokenizerFileError
from hf_bpe.model import BPE, encode_with_spans

__all__ = ["Backend", "patch_transformers", "unpatch_transformers"]

logger = logging.getLogger("hf_bpe")

State = tuple[dict[str, Any] | None, dict[str, Any] | None, bool]
"""A thread's truncation, padding (as `tokenizers` reports them) and ``encode_special_tokens``."""

_MISSING = object()
_module_lock = threading.Lock()
_count_lock = threading.Lock()
_saved: dict[str, Any] = {}  # what patching replaced; empty when not patched
_swapped: weakref.WeakKeyDictionary[Any, Backend] = weakref.WeakKeyDictionary()  # tokenizer -> its Backend
_backends: weakref.WeakSet[Backend] = weakref.WeakSet()


def patch_transformers() -> None:
    """Make transformers' fast tokenizers loaded from now on encode and decode with hf_bpe where it
    loads their ``tokenizer.json`` exactly (see the module's documentation); patching again changes
    nothing. :func:`unpatch_transformers` undoes it.

    >>> import hf_bpe
    >>> hf_bpe.patch_transformers()
    >>> hf_bpe.unpatch_transformers()
    """
    with _module_lock:
        if _saved:
            return
        _saved["from_pretrained"] = TokenizersBackend.__dict__.get("from_pretrained", _MISSING)
        _saved["DecodeStream"] = tokenizers.decoders.DecodeStream
        TokenizersBackend.from_pretrained = classmethod(_from_pretrained)  # type: ignore[assignment]
        tokenizers.decoders.DecodeStream = DecodeStream  # type: ignore[misc, assignment]


def unpatch_transformers() -> None:
    """Undo :func:`patch_transformers`: ``TokenizersBackend`` and ``tokenizers.decoders`` as they were,
    and every tokenizer it swapped back on its own ``tokenizers.Tokenizer`` (with the truncation and
    padding last set). Harmless when not patched."""
    with _module_lock:
        if not _saved:
            return
        original = _saved.pop("from_pretrained")
        if original is _MISSING:
            del TokenizersBackend.from_pretrained
        else:
            TokenizersBackend.from_pretrained = original  # type: ignore[method-assign]
        tokenizers.decoders.DecodeStream = _saved.pop("DecodeStream")  # type: ignore[misc]
        for tokenizer, backend in list(_swapped.items()):
            if tokenizer.__dict__.get("_tokenizer") is backend:
                tokenizer._tokenizer = backend._original
        _swapped.clear()
        for backend in list(_backends):
            backend._retire()


def _from_pretrained(cls: type, *args: Any, **kwargs: Any) -> Any:
    tokenizer = super(TokenizersBackend, cls).from_pretrained(*args, **kwargs)  # type: ignore[misc]
    _swap_backend(tokenizer)
    return tokenizer


def _swap_backend(tokenizer: Any) -> bool:
    """Put a :class:`Backend` in place of ``tokenizer``'s ``tokenizers.Tokenizer`` if hf_bpe loads it
    exactly; otherwise log why on the ``hf_bpe`` logger and leave it. True when swapped."""
    original = tokenizer.__dict__.get("_tokenizer")
    if isinstance(original, Backend):
        return True
    if not isinstance(original, Tokenizer):
        return False
    source = _source(tokenizer)
    try:
        answer = Answer.build(original, source)
    except (ValueError, NotImplementedError) as error:
        problem = error.problem if isinstance(error, TokenizerFileError) else str(error)
        logger.warning("hf_bpe leaves %s on tokenizers: %s", source, problem)
        return False
    backend = Backend(original, source, answer)
    tokenizer._tokenizer = backend
    with _module_lock:
        _swapped[tokenizer] = backend
    return True


def _source(tokenizer: Any) -> str:
    """The ``tokenizer.json`` a tokenizer was loaded from, as messages name it."""
    name = str(getattr(tokenizer, "name_or_path", "") or "")
    path = Path(name) / "tokenizer.json"
    if name and path.is_file():
        return str(path)
    return f"the tokenizer.json of {name!r}" if name else "a tokenizers.Tokenizer"


class Answer:
    """What hf_bpe answers for one state of a tokenizer: its model, the ids its post-processor puts
    around a sequence, which added tokens are special. Immutable; shared between threads."""

    def __init__(self, model: BPE, prefix: list[int], suffix: list[int], special_ids: frozenset[int],
                 all_special: bool, trims_offsets: bool = False) -> None:
        self.model = model
        self.prefix = prefix
        self.suffix = suffix
        self.special_ids = special_ids
        self.all_special = all_special
        self.byte_level = model.kind != "sentencepiece"
        # offsets trimmed by the post-processor (ByteLevel's or RobertaProcessing's trim_offsets) are left
        # to tokenizers
        self.offsets = self.byte_level and not trims_offsets

    @classmethod
    def build(cls, original: Tokenizer, source: str) -> Answer:
        """Load ``original`` (a refusal raises, naming ``source`` and the component)."""
        model = conversion.hf.load(original, source=source)
        settings = conversion.hf.special_token_settings(original, source=source)
        truncation, padding = original.truncation, original.padding
        original.no_truncation()
        original.no_padding()
        try:
            framing = original.encode("", add_special_tokens=True).ids
        finally:
            _set_state(original, (truncation, padding, original.encode_special_tokens))
        before = int(settings["add_bos_token"])
        if len(framing) != before + int(settings["add_eos_token"]):
            raise TokenizerFileError(source, f"the post-processor puts {framing} around an empty text, not the "
                                     "BOS/EOS tokens its template names")
        added = original.get_added_tokens_decoder()
        special_ids = frozenset(token_id for token_id, token in added.items() if token.special)
        return cls(model, framing[:before], framing[before:], special_ids, len(special_ids) == len(added),
                   bool(settings.get("trim_offsets")))

    def takes(self, state: State, add_special_tokens: bool) -> bool:
        """Whether hf_bpe answers an encode under ``state`` exactly."""
        truncation, _, split = state
        if split and not (self.all_special and self.byte_level):
            return False  # non-special added tokens are matched, special ones not: tokenizers' own
        if truncation is not None:
            room = truncation["max_length"] - (len(self.prefix) + len(self.suffix) if add_special_tokens else 0)
            if truncation["strategy"] not in ("longest_first", "only_first") or room <= 0 \
                    or truncation["stride"] >= room:
                return False
        return True

    def encode(self, backend: Backend, texts: list[str], add_special_tokens: bool, state: State) -> list[Encoding]:
        """``encode_batch(texts)`` as `tokenizers` gives it under ``state`` (which :meth:`takes`): the ids in
        the core, then truncation, the post-processor's ids and padding, in `tokenizers`' order."""
        model = self.model
        truncation, padding, split = state
        if split:
            rows = model.encode_ordinary_batch(texts) if len(texts) > 1 else [model.encode_ordinary(texts[0])]
        else:
            rows = model.encode_batch(texts, allowed_special="all") if len(texts) > 1 else \
                [model.encode(texts[0], allowed_special="all")]
        prefix, suffix = (self.prefix, self.suffix) if add_special_tokens else ([], [])
        room = truncation["max_length"] - len(prefix) - len(suffix) if truncation is not None else None
        left_cut = truncation is not None and truncation["direction"] == "left"
        kept: list[tuple[int, int]] = []  # the part of each row's own ids that truncation keeps
        sequences = []
        for row in rows:
            start, end = 0, len(row)
            if room is not None and end > room:
                start, end = (end - room, end) if left_cut else (0, room)
                row = row[start:end]
            kept.append((start, end))
            sequences.append(prefix + row + suffix if prefix or suffix else row)
        target = None
        if padding is not None:
            target = padding["length"] if padding["length"] is not None else max(map(len, sequences), default=0)
            multiple = padding["pad_to_multiple_of"]
            if multiple and target % multiple:
                target += multiple - target % multiple
        batch = Batch(backend, self, texts, add_special_tokens, state, len(prefix), len(suffix))
        encodings = []
        for index, (ids, (start, end)) in enumerate(zip(sequences, kept)):
            pad = target - len(ids) if target is not None and target > len(ids) else 0
            if pad:
                filler = [padding["pad_id"]] * pad  # type: ignore[index]
                ids = filler + ids if padding["direction"] == "left" else ids + filler  # type: ignore[index]
            encodings.append(Encoding(batch, index, ids, start, end, len(rows[index]), pad))
        return encodings

    def spans(self, text: str) -> list[tuple[int, int]]:
        """The characters each token of ``text`` covers (``offsets`` before truncation and framing)."""
        return encode_with_spans(self.model, text, allowed_special="all")[1]

    def decode(self, ids: Sequence[int], skip_special_tokens: bool) -> str | None:
        """The text of ``ids`` as `tokenizers` decodes it, or None where hf_bpe does not answer."""
        if not self.byte_level:
            return None
        try:
            if skip_special_tokens:
                ids = [token for token in ids if token not in self.special_ids]
            return self.model.decode(ids)
        except (KeyError, ValueError, TypeError, OverflowError):  # ids the model lacks: tokenizers decides
            return None


class Batch:
    """One answered ``encode_batch`` call, kept to answer its encodings' other attributes."""

    def __init__(self, backend: Backend, answer: Answer, texts: list[str], add_special_tokens: bool, state: State,
                 n_prefix: int, n_suffix: int) -> None:
        self.backend = backend
        self.answer = answer
        self.texts = texts
        self.add_special_tokens = add_special_tokens
        self.state = state
        self.n_prefix = n_prefix
        self.n_suffix = n_suffix
        self._real: list[Any] | None = None

    def real(self, index: int) -> Any:
        """The ``tokenizers.Encoding`` the original gives for text ``index`` of the same call."""
        if self._real is None:
            self._real = self.backend._encode_as(self.state, self.texts, self.add_special_tokens)
        return self._real[index]


class Encoding:
    """A ``tokenizers.Encoding`` answered by hf_bpe: ``ids``, ``attention_mask``, ``type_ids``,
    ``special_tokens_mask``, ``offsets`` (where hf_bpe gives them), ``overflowing`` (when nothing was
    cut) and ``n_sequences`` are computed here; any other attribute comes from the original
    tokenizer's encoding of the same call, made on first use (from then on everything does)."""

    __slots__ = ("_batch", "_end", "_index", "_length", "_pad", "_real", "_start", "ids")

    def __init__(self, batch: Batch, index: int, ids: list[int], start: int, end: int, length: int, pad: int) -> None:
        self._batch = batch
        self._index = index
        self.ids = ids
        self._start = start
        self._end = end
        self._length = length  # the text's own ids before truncation
        self._pad = pad
        self._real: Any = None

    def _original(self) -> Any:
        if self._real is None:
            self._real = self._batch.real(self._index)
        return self._real

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self._original(), name)

    def _spread(self, pad: Any, framing: Any, own: list[Any]) -> list[Any]:
        """A per-token list: ``framing`` for the post-processor's tokens, ``own`` for the text's, ``pad``
        for the padding on the side padding goes."""
        batch = self._batch
        values = [framing] * batch.n_prefix + own + [framing] * batch.n_suffix
        if self._pad:
            filler = [pad] * self._pad
            padding = batch.state[1]
            values = filler + values if padding is not None and padding["direction"] == "left" else values + filler
        return values

    @property
    def attention_mask(self) -> list[int]:
        if self._real is not None:
            return self._real.attention_mask  # type: ignore[no-any-return]
        return self._spread(0, 1, [1] * (self._end - self._start))

    @property
    def special_tokens_mask(self) -> list[int]:
        if self._real is not None:
            return self._real.special_tokens_mask  # type: ignore[no-any-return]
        return self._spread(1, 1, [0] * (self._end - self._start))

    @property
    def type_ids(self) -> list[int]:
        if self._real is not None:
            return self._real.type_ids  # type: ignore[no-any-return]
        padding = self._batch.state[1]
        return self._spread(padding["pad_type_id"] if padding is not None else 0, 0, [0] * (self._end - self._start))

    @property
    def offsets(self) -> list[tuple[int, int]]:
        batch = self._batch
        if self._real is not None or not batch.answer.offsets:
            return self._original().offsets  # type: ignore[no-any-return]
        spans = batch.answer.spans(batch.texts[self._index])[self._start : self._end]
        return self._spread((0, 0), (0, 0), spans)

    @property
    def overflowing(self) -> list[Any]:
        if self._real is None and self._start == 0 and self._end == self._length:
            return []
        return self._original().overflowing  # type: ignore[no-any-return]

    @property
    def n_sequences(self) -> int:
        return 1 if self._real is None else self._real.n_sequences  # type: ignore[no-any-return]

    def __len__(self) -> int:
        return len(self._original().ids if self._real is not None else self.ids)

    def __repr__(self) -> str:
        return (f"Encoding(num_tokens={len(self)}, attributes=[ids, type_ids, tokens, offsets, attention_mask, "
                "special_tokens_mask, overflowing])")

    def __reduce__(self) -> tuple[Any, ...]:
        return _same, (self._original(),)  # pickled, copied: the original's encoding


def _same(value: Any) -> Any:
    return value


_OWN = frozenset({"_original", "_source", "_answer", "_stale", "_lock", "_local", "answered", "passed", "__weakref__"})
_COMPONENTS = frozenset({"normalizer", "pre_tokenizer", "model", "decoder", "post_processor"})
_CHANGES_TOKENS = frozenset({"add_tokens", "add_special_tokens", "train", "train_from_iterator"})
_READS = frozenset({"id_to_token", "token_to_id", "get_vocab", "get_vocab_size", "get_added_tokens_decoder",
                    "num_special_tokens_to_add"})


class Backend:
    """A ``tokenizers.Tokenizer`` stand-in that answers encodes and decodes from hf_bpe and everything
    else from the original it holds (see the module's documentation). ``answered`` and ``passed``
    count the encode and decode calls each side answered."""

    def __init__(self, original: Tokenizer, source: str, answer: Answer | None) -> None:
        object.__setattr__(self, "_original", original)
        object.__setattr__(self, "_source", source)
        object.__setattr__(self, "_answer", answer)
        object.__setattr__(self, "_stale", False)
        object.__setattr__(self, "_lock", threading.RLock())
        object.__setattr__(self, "_local", threading.local())
        object.__setattr__(self, "answered", 0)
        object.__setattr__(self, "passed", 0)
        _backends.add(self)

    def _count(self, side: str) -> None:
        with _count_lock:  # threads must not lose counts (a read and a write apart)
            object.__setattr__(self, side, getattr(self, side) + 1)

    # ------------------------------------------------------------------------------ state

    def _state(self) -> State:
        """This thread's state: its own copy, taken from the tokenizer's when the thread first uses it (a
        thread that read the state and then encodes gets what it read, whatever others set meanwhile)."""
        local = self._local
        if not hasattr(local, "split"):
            with self._lock:
                original = self._original
                local.truncation, local.padding = original.truncation, original.padding
                local.split = original.encode_special_tokens
        return local.truncation, local.padding, local.split

    @property
    def truncation(self) -> dict[str, Any] | None:
        """This thread's truncation, as ``tokenizers.Tokenizer.truncation`` (a new dict, or None)."""
        value = self._state()[0]
        return dict(value) if value is not None else None

    @property
    def padding(self) -> dict[str, Any] | None:
        """This thread's padding, as ``tokenizers.Tokenizer.padding`` (a new dict, or None)."""
        value = self._state()[1]
        return dict(value) if value is not None else None

    @property
    def encode_special_tokens(self) -> bool:
        return self._state()[2]

    @encode_special_tokens.setter
    def encode_special_tokens(self, value: bool) -> None:
        with self._lock:
            self._state()  # this thread's copy first: the other two stay its own
            self._original.encode_special_tokens = value
            self._local.split = self._original.encode_special_tokens

    def enable_truncation(self, *args: Any, **kwargs: Any) -> None:
        with self._lock:
            self._state()  # this thread's copy first: the other two stay its own
            self._original.enable_truncation(*args, **kwargs)
            self._local.truncation = self._original.truncation

    def no_truncation(self) -> None:
        with self._lock:
            self._state()  # this thread's copy first: the other two stay its own
            self._original.no_truncation()
            self._local.truncation = None

    def enable_padding(self, *args: Any, **kwargs: Any) -> None:
        with self._lock:
            self._state()  # this thread's copy first: the other two stay its own
            self._original.enable_padding(*args, **kwargs)
            self._local.padding = self._original.padding

    def no_padding(self) -> None:
        with self._lock:
            self._state()  # this thread's copy first: the other two stay its own
            self._original.no_padding()
            self._local.padding = None

    # --------------------------------------------------------------------------- encoding

    def _current(self) -> Answer | None:
        """The answer for the tokenizer as it is now (reloaded after its tokens or steps changed)."""
        if self._stale:
            with self._lock:
                if self._stale:
                    answer = None
                    try:
                        answer = Answer.build(self._original, self._source)
                    except (ValueError, NotImplementedError) as error:
                        problem = error.problem if isinstance(error, TokenizerFileError) else str(error)
                        logger.warning("hf_bpe leaves %s on tokenizers after a change: %s", self._source, problem)
                    object.__setattr__(self, "_answer", answer)
                    object.__setattr__(self, "_stale", False)
        return self._answer

    def encode_batch(self, input: Sequence[Any], is_pretokenized: bool = False,
                     add_special_tokens: bool = True) -> list[Any]:
        """``tokenizers.Tokenizer.encode_batch``: texts answered by hf_bpe, anything else by the original."""
        answer = self._current()
        if answer is not None and not is_pretokenized and isinstance(input, (list, tuple)) and input \
                and all(type(text) is str for text in input):
            state = self._state()
            if answer.takes(state, add_special_tokens):
                self._count("answered")
                return answer.encode(self, list(input), add_special_tokens, state)  # type: ignore[arg-type]
        self._count("passed")
        return self._call("encode_batch", input, is_pretokenized=is_pretokenized,
                          add_special_tokens=add_special_tokens)  # type: ignore[no-any-return]

    def encode(self, sequence: Any, pair: Any = None, is_pretokenized: bool = False,
               add_special_tokens: bool = True) -> Any:
        """``tokenizers.Tokenizer.encode``: a text answered by hf_bpe, anything else by the original."""
        if pair is None and not is_pretokenized and type(sequence) is str:
            answer = self._current()
            state = self._state()
            if answer is not None and answer.takes(state, add_special_tokens):
                self._count("answered")
                return answer.encode(self, [sequence], add_special_tokens, state)[0]
        self._count("passed")
        return self._call("encode", sequence, pair, is_pretokenized=is_pretokenized,
                          add_special_tokens=add_special_tokens)

    def _encode_as(self, state: State, texts: list[str], add_special_tokens: bool) -> list[Any]:
        """The original's ``encode_batch`` of ``texts`` under ``state`` (the state it had is kept)."""
        with self._lock:
            original = self._original
            before = (original.truncation, original.padding, original.encode_special_tokens)
            _set_state(original, state)
            try:
                return original.encode_batch(texts, add_special_tokens=add_special_tokens)  # type: ignore[no-any-return]
            finally:
                _set_state(original, before)

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = True) -> str:
        answer = self._current()
        text = answer.decode(ids, skip_special_tokens) if answer is not None else None
        if text is None:
            self._count("passed")
            with self._lock:
                return self._original.decode(ids, skip_special_tokens=skip_special_tokens)  # type: ignore[no-any-return]
        self._count("answered")
        return text

    def decode_batch(self, sequences: Sequence[Sequence[int]], skip_special_tokens: bool = True) -> list[str]:
        return [self.decode(ids, skip_special_tokens) for ids in sequences]

    # ------------------------------------------------------------------------- the rest

    def _call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        """The original's method ``name``, run under the lock with this thread's state."""
        with self._lock:
            _set_state(self._original, self._state())
            result = getattr(self._original, name)(*args, **kwargs)
            if name in _CHANGES_TOKENS:
                object.__setattr__(self, "_stale", self._answer is not None or self._stale)
            return result

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name in _OWN:
            raise AttributeError(name)
        value = getattr(self._original, name)
        if name in _READS or not callable(value):
            return value

        def call(*args: Any, **kwargs: Any) -> Any:
            return self._call(name, *args, **kwargs)

        return call

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _OWN:
            object.__setattr__(self, name, value)
            return
        if name in type(self).__dict__ and isinstance(type(self).__dict__[name], property):
            object.__setattr__(self, name, value)  # the property's setter
            return
        with self._lock:
            setattr(self._original, name, value)
            if name in _COMPONENTS and self._answer is not None:
                object.__setattr__(self, "_stale", True)

    def _retire(self) -> None:
        """Pass every call through from now on (the patch was undone)."""
        with self._lock:
            object.__setattr__(self, "_answer", None)
            object.__setattr__(self, "_stale", False)

    def __deepcopy__(self, memo: dict[int, Any]) -> Any:
        with self._lock:
            _set_state(self._original, self._state())
            original = copy.deepcopy(self._original, memo)
        if not _saved or self._answer is None:
            return original
        copied = Backend(original, self._source, self._answer)
        object.__setattr__(copied, "_stale", self._stale)
        return copied

    def __reduce__(self) -> tuple[Any, ...]:
        with self._lock:
            _set_state(self._original, self._state())
        return _restored, (self._original, self._source)

    def __repr__(self) -> str:
        side = "hf_bpe" if self._answer is not None else "tokenizers"
        return f"<hf_bpe Backend for {self._source}, encoding with {side}>"


def _restored(original: Tokenizer, source: str) -> Any:
    """An unpickled :class:`Backend`: while patched, one that loads the original again on first use;
    otherwise the original itself."""
    if not _saved:
        return original
    backend = Backend(original, source, None)
    object.__setattr__(backend, "_stale", True)
    return backend


def _set_state(original: Tokenizer, state: State) -> None:
    """Give ``original`` the truncation, padding and ``encode_special_tokens`` of ``state``."""
    truncation, padding, split = state
    if original.truncation != truncation:
        if truncation is None:
            original.no_truncation()
        else:
            original.enable_truncation(**truncation)
    if original.padding != padding:
        if padding is None:
            original.no_padding()
        else:
            original.enable_padding(**padding)
    if original.encode_special_tokens != split:
        original.encode_special_tokens = split

