"""``BPETokenizer``: an ``hf_bpe.BPE`` model as a transformers tokenizer (``PreTrainedTokenizer``).

Encoding goes straight from text to ids in the Rust core, added tokens included (the core cuts them
out before BPE), so no per-token Python strings are made on the way. ``save_pretrained`` writes a
folder that loads everywhere: with ``import hf_bpe`` ``AutoTokenizer`` returns this class; without
it, transformers falls back to ``TokenizersBackend`` on the equivalent ``tokenizer.json``, which gives
the same ids.

>>> import hf_bpe
>>> tokenizer = hf_bpe.BPETokenizer.from_model(hf_bpe.get_encoding("gpt2"), eos_token="<|endoftext|>",
...                                            add_eos_token=True)
>>> tokenizer("hello world")["input_ids"]
[31373, 995, 50256]
>>> tokenizer.decode([31373, 995, 50256], skip_special_tokens=True)
'hello world'
"""

from __future__ import annotations

import functools
import json
import os
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar, cast

from transformers import AutoTokenizer, PreTrainedConfig, PreTrainedTokenizer
from transformers.tokenization_utils_base import (
    AddedToken,
    BatchEncoding,
    PaddingStrategy,
    TensorType,
    TruncationStrategy,
)

from hf_bpe._io import atomic_write, read_json
from hf_bpe._rwlock import ReadWriteLock
from hf_bpe.byte_level import BYTE_TO_UNICODE, UNICODE_TO_BYTE
from hf_bpe.datasets import encode_by_calling
from hf_bpe.errors import ConversionError, InvalidVocabularyError, TokenizerFileError
from hf_bpe.model import BPE, MAX_DENSE_IDS, MODEL_FILE, IdType, Nulls, _arrow_strings

__all__ = ["MODEL_FILE", "REMOTE_CODE_FILE", "BPETokenizer", "save_tokenizer_folder"]

REMOTE_CODE_FILE = "tokenization_hf_bpe.py"
"""The one-line module that ``save_pretrained(..., remote_code=True)`` writes for ``auto_map``."""

CONFIG_KEY = "hf_bpe"
"""Our section of ``tokenizer_config.json``: the BOS/EOS policy and what the model card knows."""

_SPELL = {byte: char for byte, char in BYTE_TO_UNICODE.items()}
# Characters outside the byte-level alphabet map to U+FFFF, which then fails to encode as Latin-1.
_UNSPELL = {ord(char): chr(byte) for char, byte in UNICODE_TO_BYTE.items()} | {
    byte: "\uffff" for byte in range(256) if chr(byte) not in UNICODE_TO_BYTE
}


_Method = TypeVar("_Method", bound=Callable[..., Any])


def _reading(method: _Method) -> _Method:
    """Run ``method`` as a reader of the tokenizer: alongside other readers, never while
    ``add_tokens`` or ``add_special_tokens`` changes it (see :mod:`hf_bpe._rwlock`)."""

    @functools.wraps(method)
    def read(self: BPETokenizer, *args: Any, **kwargs: Any) -> Any:
        self._lock.acquire_read()
        try:
            return method(self, *args, **kwargs)
        finally:
            self._lock.release_read()

    return cast(_Method, read)


def _spell(token: bytes) -> str:
    """Token bytes in GPT-2's byte-to-unicode alphabet (as ``tokenizer.json`` spells them)."""
    return token.decode("latin-1").translate(_SPELL)


def _unspell(spelled: str) -> bytes | None:
    """The bytes of a token spelled in the byte-to-unicode alphabet, or None if it is not so spelled."""
    try:
        return spelled.translate(_UNSPELL).encode("latin-1")
    except UnicodeEncodeError:
        return None


class BPETokenizer(PreTrainedTokenizer):
    """A transformers tokenizer backed by an :class:`hf_bpe.BPE` model.

    Build one with :meth:`from_model`, or load a saved folder with ``from_pretrained`` /
    ``AutoTokenizer.from_pretrained``. The model's special tokens are added tokens (matched in text,
    skipped by ``decode(..., skip_special_tokens=True)``). ``add_bos_token`` / ``add_eos_token``
    put ``bos_token`` / ``eos_token`` around each sequence and survive ``save_pretrained``.
    Token strings (``tokenize``, ``get_vocab``) use GPT-2's byte-to-unicode alphabet, like
    ``tokenizer.json``. ``return_offsets_mapping=True`` gives character offsets.
    """

    vocab_files_names = {"vocab_file": MODEL_FILE}  # noqa: RUF012 - transformers' class attributes
    model_input_names = ["input_ids", "attention_mask"]  # noqa: RUF012
    add_prefix_space = False
    """Text is encoded as given (GPT-2 style): no space is put before it, nor before pre-split words."""

    def __init__(
        self,
        vocab_file: str | os.PathLike[str] | None = None,
        *,
        add_bos_token: bool | None = None,
        add_eos_token: bool | None = None,
        **kwargs: Any,
    ) -> None:
        """Load the model from ``vocab_file`` (``hf_bpe.json``), or take ``model=`` (an
        :class:`hf_bpe.BPE`, as :meth:`from_model` does); other arguments are transformers'."""
        model = kwargs.pop("model", None)
        if kwargs.pop("add_prefix_space", False):
            raise ValueError("BPETokenizer encodes text as given; add_prefix_space=True is not supported")
        kwargs.pop("tokenizer_file", None)  # tokenizer.json is derived from the model on save
        settings = dict(kwargs.pop(CONFIG_KEY, None) or {})
        if model is None:
            model = _load_model(vocab_file, kwargs.get("name_or_path"))
        elif not isinstance(model, BPE):
            raise TypeError(f"model must be an hf_bpe.BPE, got {type(model).__name__}")
        if model.kind == "sentencepiece":
            raise ConversionError(
                f"{model!r} is a SentencePiece model; BPETokenizer wraps byte-level BPE models (ranks or "
                "merges). For transformers, use its SentencePiece tokenizers (e.g. LlamaTokenizer) on the .model"
            )
        if model.n_vocab > MAX_DENSE_IDS:
            raise InvalidVocabularyError(
                f"{model!r} has id {model.n_vocab - 1}; a transformers tokenizer keeps an entry for every id up to "
                f"the largest (its length is the embedding size), so BPETokenizer takes ids below {MAX_DENSE_IDS:,}: "
                "renumber the tokens (hf_bpe.BPE takes any id below 2**31)"
            )
        self._model = model
        self._add_bos = bool(settings.get("add_bos_token", False) if add_bos_token is None else add_bos_token)
        self._add_eos = bool(settings.get("add_eos_token", False) if add_eos_token is None else add_eos_token)
        self._card = dict(settings.get("card", {}))
        self._tables: _Tables | None = None
        self._added: _AddedTokens | None = None
        self._lock = ReadWriteLock()
        # The model's special tokens are added tokens; saved ones (added_tokens_decoder) come on top.
        decoder: dict[int, AddedToken] = {
            token_id: AddedToken(
                text, special=True, normalized=False, lstrip=False, rstrip=False, single_word=False
            )
            for text, token_id in model.special_tokens.items()
        }
        saved = kwargs.pop("added_tokens_decoder", None) or {}
        where = _config_path(kwargs.get("name_or_path"))
        for token_id, token in saved.items():
            decoder[int(token_id)] = self._checked_added_token(int(token_id), token, where)
        self._added_tokens_decoder = decoder
        super().__init__(add_bos_token=self._add_bos, add_eos_token=self._add_eos, **kwargs)
        self._update_trie()
        if (self._add_bos and self.bos_token is None) or (self._add_eos and self.eos_token is None):
            role = "bos" if self._add_bos and self.bos_token is None else "eos"
            raise ValueError(f"add_{role}_token=True needs a {role}_token; pass {role}_token=...")

    # ---------------------------------------------------------------------------- construction

    @classmethod
    def from_pretrained(  # type: ignore[override]
        cls, pretrained_model_name_or_path: str | os.PathLike[str], *init_inputs: Any, **kwargs: Any
    ) -> BPETokenizer:
        """transformers' ``from_pretrained``; a local folder's ``tokenizer_config.json`` and
        ``special_tokens_map.json`` are read and their settings' types checked first (bounded, see
        :mod:`hf_bpe._io`), so that a corrupt one raises :class:`~hf_bpe.errors.TokenizerFileError`
        naming it rather than whatever transformers trips over later (a string as
        ``model_max_length`` fails at the first encode). Nothing in the folder is executed (no
        ``auto_map`` code runs without ``trust_remote_code=True``)."""
        folder = Path(os.fspath(pretrained_model_name_or_path))
        if folder.is_dir():
            for name in ("tokenizer_config.json", "special_tokens_map.json"):
                if (folder / name).is_file():
                    _check_settings(folder / name, read_json(folder / name))
        return cast(BPETokenizer, super().from_pretrained(pretrained_model_name_or_path, *init_inputs, **kwargs))

    @classmethod
    def from_model(
        cls,
        model: BPE,
        *,
        bos_token: str | int | AddedToken | None = None,
        eos_token: str | int | AddedToken | None = None,
        unk_token: str | int | AddedToken | None = None,
        pad_token: str | int | AddedToken | None = None,
        add_bos_token: bool = False,
        add_eos_token: bool = False,
        **kwargs: Any,
    ) -> BPETokenizer:
        """Wrap ``model``. Each special token is the text of one of the model's special tokens, its id,
        or a new text (added as a special token with the next free id).

        Any other transformers tokenizer argument (``chat_template``, ``model_max_length``,
        ``padding_side``, ``extra_special_tokens``, ...) is passed on and saved.

        >>> import hf_bpe
        >>> enc = hf_bpe.get_encoding("cl100k_base")
        >>> tokenizer = BPETokenizer.from_model(enc, bos_token=100257, pad_token="<|pad|>")
        >>> tokenizer.bos_token, tokenizer.pad_token_id
        ('<|endoftext|>', 100277)
        """
        if not isinstance(model, BPE):
            raise TypeError(f"from_model expects an hf_bpe.BPE, got {type(model).__name__}")
        named = {
            "bos_token": bos_token,
            "eos_token": eos_token,
            "unk_token": unk_token,
            "pad_token": pad_token,
        }
        for key in ("sep_token", "cls_token", "mask_token"):
            if key in kwargs:
                named[key] = kwargs.pop(key)
        for key, value in named.items():
            if isinstance(value, int) and not isinstance(value, bool):
                named[key] = _special_text(model, key, value)
        tokens: dict[str, Any] = {key: value for key, value in named.items() if value is not None}
        # The model's special tokens that get no name (bos, eos, ...) are extra special tokens.
        extra = list(kwargs.pop("extra_special_tokens", None) or [])
        taken = {str(token) for token in [*tokens.values(), *extra]}
        extra += [text for text in model.special_tokens if text not in taken]
        return cls(
            model=model,
            add_bos_token=add_bos_token,
            add_eos_token=add_eos_token,
            extra_special_tokens=extra,
            **tokens,
            **kwargs,
        )

    @property
    def model(self) -> BPE:
        """The wrapped :class:`hf_bpe.BPE` (without tokens added to this tokenizer)."""
        return self._model

    @property
    def add_bos_token(self) -> bool:
        """Whether ``bos_token`` starts every sequence (kept by ``save_pretrained``)."""
        return self._add_bos

    @add_bos_token.setter
    def add_bos_token(self, value: bool) -> None:
        if value and self.bos_token is None:
            raise ValueError("add_bos_token=True needs a bos_token")
        self._add_bos = bool(value)

    @property
    def add_eos_token(self) -> bool:
        """Whether ``eos_token`` ends every sequence (kept by ``save_pretrained``)."""
        return self._add_eos

    @add_eos_token.setter
    def add_eos_token(self, value: bool) -> None:
        if value and self.eos_token is None:
            raise ValueError("add_eos_token=True needs an eos_token")
        self._add_eos = bool(value)

    @classmethod
    def register_for_auto_class(cls, auto_class: str | type = "AutoTokenizer") -> None:
        """Does nothing: ``import hf_bpe`` registers this class, and ``save_pretrained(...,
        remote_code=True)`` writes ``auto_map``. (transformers' version would make every later
        ``save_pretrained`` copy this module's source into the folder.)"""

    # ------------------------------------------------------------------------------ vocabulary

    @property
    def vocab_size(self) -> int:
        """One more than the model's largest id (its special tokens included)."""
        return self._model.n_vocab

    def __len__(self) -> int:
        """One more than the largest id, added tokens included: the embedding size a model needs."""
        return max(self._model.n_vocab, max(self._added_tokens_decoder, default=-1) + 1)

    def _update_total_vocab_size(self) -> None:
        self.total_vocab_size = len(self)

    def get_vocab(self) -> dict[str, int]:
        vocab = dict(self._get_tables().vocab)
        vocab.update(self._added_tokens_encoder)
        return vocab

    def _convert_token_to_id(self, token: str) -> int | None:
        token_bytes = _unspell(token)
        token_id = None if token_bytes is None else self._model._core.token_id(token_bytes)
        if token_id is None:
            token_id = self._model.special_tokens.get(token)
        if token_id is None:
            return self._added_tokens_encoder.get(str(self.unk_token)) if self.unk_token is not None else None
        return token_id

    def _convert_id_to_token(self, index: int) -> str | None:  # type: ignore[override]  # None: unused id
        spelled = self._get_tables().spelled
        if 0 <= index < len(spelled):
            return spelled[index]
        return None

    def convert_tokens_to_string(self, tokens: list[str]) -> str:
        added = self._added_tokens_encoder
        parts = []
        for token in tokens:
            token_bytes = None if token in added else _unspell(token)
            parts.append(token.encode("utf-8") if token_bytes is None else token_bytes)
        return b"".join(parts).decode("utf-8", errors="replace")

    def _add_tokens(self, new_tokens: Sequence[str | AddedToken], special_tokens: bool = False) -> int:
        """Add tokens as transformers does, numbering new ones after the largest id (like
        `tokenizers`, so ids are the same in ``tokenizer.json``); the core's matcher follows.

        The tables are copied, changed and put in place whole, so a thread reading them meanwhile
        sees them before or after, never half changed (:meth:`add_tokens` also waits for calls in
        progress)."""
        if not new_tokens:
            return 0
        decoder = dict(self._added_tokens_decoder)
        encoder = dict(self._added_tokens_encoder)
        extra = list(self._extra_special_tokens)
        special_texts = set(self.all_special_tokens)
        next_id = len(self)
        added = 0
        for token in new_tokens:
            if not isinstance(token, (str, AddedToken)):
                raise TypeError(f"Token {token} is not a string but a {type(token)}.")
            if str(token) == "":
                continue
            if isinstance(token, str):
                if token in encoder:
                    continue
                is_special = token in special_texts or special_tokens
                token = AddedToken(
                    token, rstrip=False, lstrip=False, normalized=not is_special, special=is_special
                )
            elif special_tokens:
                token.__setstate__({"special": True, "normalized": token.normalized})
            token_id = encoder.get(token.content)
            if token_id is None:
                token_id = self._vocab_id(token.content)
            if token_id is None:
                token_id = next_id
                next_id += 1
                added += 1
            if token.special and str(token) not in special_texts:
                extra.append(token)
                special_texts.add(str(token))
            decoder[token_id] = token
            encoder[token.content] = token_id
        added_tokens = _AddedTokens(self._model, decoder)
        self._extra_special_tokens = extra
        self._added_tokens_decoder = decoder
        self._added_tokens_encoder = encoder
        self._added = added_tokens
        self._update_trie()
        self._update_total_vocab_size()
        return added

    def add_tokens(
        self, new_tokens: str | AddedToken | Sequence[str | AddedToken], special_tokens: bool = False
    ) -> int:
        """transformers' ``add_tokens``, safe while other threads use the tokenizer: it waits for
        the calls in progress, and calls made meanwhile wait for it, so each sees the tokenizer
        wholly before or wholly after."""
        with self._lock.writing():
            return super().add_tokens(new_tokens, special_tokens=special_tokens)

    def add_special_tokens(
        self,
        special_tokens_dict: dict[str, str | AddedToken | Sequence[str | AddedToken]],
        replace_extra_special_tokens: bool = True,
    ) -> int:
        """transformers' ``add_special_tokens``, safe while other threads use the tokenizer (see
        :meth:`add_tokens`). Setting an attribute such as ``tokenizer.pad_token = ...`` directly is
        not guarded: do it before sharing the tokenizer, or use this method."""
        with self._lock.writing():
            return super().add_special_tokens(special_tokens_dict, replace_extra_special_tokens)

    def _vocab_id(self, text: str) -> int | None:
        """The id of ``text`` as an ordinary token spelled in the byte-level alphabet, or a special."""
        token_bytes = _unspell(text)
        if token_bytes is not None and (token_id := self._model._core.token_id(token_bytes)) is not None:
            return token_id
        return self._model.special_tokens.get(text)

    def _checked_added_token(
        self, token_id: int, token: AddedToken | str | dict[str, Any], where: str
    ) -> AddedToken:
        """A saved added token, rejected when its id belongs to a different token of the model."""
        if isinstance(token, dict):
            token = AddedToken(**{key: value for key, value in token.items() if key != "__type"})
        elif isinstance(token, str):
            token = AddedToken(token, special=False, normalized=True)
        for text, special_id in self._model.special_tokens.items():
            if special_id == token_id and text != token.content:
                raise InvalidVocabularyError(
                    f"{where}: added token {token.content!r} has id {token_id}, which is the id of the "
                    f"model's special token {text!r}"
                )
        try:
            ordinary = self._model.decode_single_token_bytes(token_id)
        except KeyError:
            return token
        if token_id not in self._model.special_tokens.values() and _spell(ordinary) != token.content:
            raise InvalidVocabularyError(
                f"{where}: added token {token.content!r} has id {token_id}, which is the id of the ordinary "
                f"token {ordinary!r}; an added token needs an id of its own"
            )
        return token

    # -------------------------------------------------------------------------------- encoding

    @_reading
    def tokenize(
        self, text: str, pair: str | None = None, add_special_tokens: bool = False, **kwargs: Any
    ) -> list[str]:
        """Token strings of ``text`` (byte-level alphabet), consistent with ``encode``.

        >>> import hf_bpe
        >>> BPETokenizer.from_model(hf_bpe.get_encoding("gpt2")).tokenize("hello world")
        ['hello', 'Ġworld']
        """
        added = self._added_tokens()
        if not added.plain:
            return super().tokenize(text, **kwargs)
        if pair is None and not add_special_tokens:
            ids = self._encode_texts([text], kwargs.get("split_special_tokens", self.split_special_tokens))[0]
        else:
            ids = self.encode(text, pair, add_special_tokens=add_special_tokens, **kwargs)
        return self.convert_ids_to_tokens(ids)

    def _tokenize(self, text: str, **kwargs: Any) -> list[str]:
        spelled = self._get_tables().spelled  # ordinary ids are never holes
        return [cast(str, spelled[token_id]) for token_id in self._model.encode_ordinary(text)]

    def _encode_without_added_tokens(self, text: str) -> list[int]:
        return self._model.encode_ordinary(text)

    def _core_policy(self, split_special_tokens: bool) -> Any:
        """The core's special-token policy for encoding texts, or None where added tokens must be
        cut out in Python first (``_AddedTokens.two_phase``)."""
        added = self._added_tokens()
        if split_special_tokens:
            return added.policy_without_specials
        return added.policy if added.first_phase is None else None

    def _encode_texts(self, texts: list[str], split_special_tokens: bool) -> list[list[int]]:
        """Ids of each text, added tokens cut out first, all in the core (threads for batches)."""
        policy = self._core_policy(split_special_tokens)
        if policy is None:
            added = self._added_tokens()
            return [added.two_phase(self._model, text)[0] for text in texts]
        if len(texts) == 1:
            return [self._model._core.encode(texts[0], policy)]
        return self._model._core.encode_batch(texts, policy, None)

    def encode_arrow(
        self,
        texts: Any,
        *,
        add_special_tokens: bool = True,
        split_special_tokens: bool | None = None,
        num_threads: int | None = None,
        dtype: IdType = "uint32",
        nulls: Nulls = "raise",
    ) -> Any:
        """``self(texts)["input_ids"]`` as an Arrow list array, Arrow in and Arrow out as
        :meth:`hf_bpe.BPE.encode_arrow` (``texts``, ``num_threads``, ``dtype``, ``nulls``); added
        tokens that strip spaces or match single words take the slow path (``self`` on a list).

        >>> import hf_bpe, pyarrow as pa
        >>> BPETokenizer.from_model(hf_bpe.get_encoding("gpt2")).encode_arrow(pa.array(["hello world"])).to_pylist()
        [[31373, 995]]
        """
        split = self.split_special_tokens if split_special_tokens is None else split_special_tokens
        texts = _arrow_strings(texts)
        self._lock.acquire_read()
        try:
            policy = self._core_policy(split) if self._added_tokens().plain else None
            if policy is not None:
                prefix = [self.bos_token_id] if add_special_tokens and self._add_bos else []
                suffix = [self.eos_token_id] if add_special_tokens and self._add_eos else []
                return self._model._core.encode_arrow(texts, policy, num_threads, dtype, nulls, prefix, suffix)
        finally:
            self._lock.release_read()

        def call(rows: list[str]) -> Any:
            return self(rows, add_special_tokens=add_special_tokens, split_special_tokens=split)

        return encode_by_calling(call, texts, dtype=dtype, nulls=nulls)

    def _encode_with_offsets(
        self, text: str, split_special_tokens: bool
    ) -> tuple[list[int], list[tuple[int, int]]]:
        """Ids of ``text`` and the characters each covers, ``(start, end)``, as `tokenizers` gives
        them: a token holding part of a character covers all of it."""
        added = self._added_tokens()
        if added.first_phase is not None and not split_special_tokens:
            ids, starts = added.two_phase(self._model, text)
        else:
            policy = added.policy_without_specials if split_special_tokens else added.policy
            ids, starts = self._model._core.encode_with_offsets(text, policy)
        continues = self._get_tables().continues
        spans = []
        for index, start in enumerate(starts):
            if index + 1 < len(starts):
                next_id = ids[index + 1]
                mid_character = next_id < len(continues) and continues[next_id]
                end = starts[index + 1] + (1 if mid_character else 0)
            else:
                end = len(text)
            spans.append((start, end))
        return ids, spans

    @_reading
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
        if kwargs.get("sanitize_control_tokens") or not self._added_tokens().plain:
            if return_offsets_mapping:
                raise NotImplementedError(
                    "return_offsets_mapping=True is not available with added tokens that strip spaces or "
                    "match single words (lstrip, rstrip, single_word)"
                )
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
            return self._encode_texts_batch(
                list(text),
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

    def _encode_texts_batch(
        self,
        texts: list[str],
        *,
        add_special_tokens: bool,
        padding_strategy: PaddingStrategy,
        max_length: int | None,
        pad_to_multiple_of: int | None,
        padding_side: str | None,
        return_tensors: Any,
        return_attention_mask: bool,
        split_special_tokens: bool,
        verbose: bool,
    ) -> BatchEncoding:
        """The common case, a batch of texts with at most padding, without the per-text Python of
        the general path; the result is the same (the tests hold the two side by side)."""
        if (
            return_tensors == TensorType.NUMPY
            and padding_strategy != PaddingStrategy.DO_NOT_PAD
            and texts
        ):
            arrays = self._padded_arrays(
                texts,
                add_special_tokens=add_special_tokens,
                padding_strategy=padding_strategy,
                max_length=max_length,
                pad_to_multiple_of=pad_to_multiple_of,
                padding_side=padding_side,
                return_attention_mask=return_attention_mask,
                split_special_tokens=split_special_tokens,
                verbose=verbose,
            )
            if arrays is not None:
                return BatchEncoding(arrays, tensor_type=return_tensors)
        rows = self._encode_texts(texts, split_special_tokens)
        if add_special_tokens and (self._add_bos or self._add_eos):
            bos = [self.bos_token_id] if self._add_bos else []
            eos = [self.eos_token_id] if self._add_eos else []
            rows = [bos + row + eos for row in rows]
        lengths = [len(row) for row in rows]
        if max_length is None and verbose and lengths and max(lengths) > self.model_max_length:
            self._eventual_warn_about_too_long_sequence(
                rows[lengths.index(max(lengths))], max_length, verbose
            )
        target = _padding_target(padding_strategy, max(lengths, default=None), max_length, pad_to_multiple_of)
        outputs: dict[str, Any] = {}
        if target is None:
            outputs["input_ids"] = rows
            if return_attention_mask:
                outputs["attention_mask"] = [[1] * length for length in lengths]
        else:
            pad = self.pad_token_id
            left = (padding_side if padding_side is not None else self.padding_side) == "left"
            missing = [max(0, target - length) for length in lengths]
            if left:
                outputs["input_ids"] = [[pad] * gap + row for gap, row in zip(missing, rows)]
            else:
                outputs["input_ids"] = [row + [pad] * gap for gap, row in zip(missing, rows)]
            if return_attention_mask:
                outputs["attention_mask"] = [
                    [0] * gap + [1] * length if left else [1] * length + [0] * gap
                    for gap, length in zip(missing, lengths)
                ]
        return BatchEncoding(outputs, tensor_type=return_tensors)

    def _padded_arrays(
        self,
        texts: list[str],
        *,
        add_special_tokens: bool,
        padding_strategy: PaddingStrategy,
        max_length: int | None,
        pad_to_multiple_of: int | None,
        padding_side: str | None,
        return_attention_mask: bool,
        split_special_tokens: bool,
        verbose: bool,
    ) -> dict[str, Any] | None:
        """``_encode_texts_batch`` for padded NumPy output, built as arrays from the core's flat
        buffer instead of as lists of Python ints; None where the rows would not all fit the padded
        length (then the list path gives transformers' own result or error)."""
        import numpy as np

        policy = self._core_policy(split_special_tokens)
        if policy is None:
            rows = self._encode_texts(texts, split_special_tokens)
            flat = np.fromiter((token for row in rows for token in row), dtype=np.int64)
            lengths = np.fromiter((len(row) for row in rows), dtype=np.int64, count=len(rows))
        else:
            ids, counts = self._model._core.encode_batch_flat(texts, policy, None)
            flat = np.frombuffer(ids, dtype=np.uint32).astype(np.int64)
            lengths = np.frombuffer(counts, dtype=np.uint64).astype(np.int64)
        bos = int(add_special_tokens and self._add_bos)
        eos = int(add_special_tokens and self._add_eos)
        totals = lengths + (bos + eos)
        longest = int(totals.max())
        if max_length is None and verbose and longest > self.model_max_length:
            row = int(totals.argmax())
            start = int(lengths[:row].sum())
            ids_of_row = flat[start : start + int(lengths[row])].tolist()
            sequence = [self.bos_token_id] * bos + ids_of_row + [self.eos_token_id] * eos
            self._eventual_warn_about_too_long_sequence(sequence, max_length, verbose)
        target = _padding_target(padding_strategy, longest, max_length, pad_to_multiple_of)
        if target is None or longest > target:
            return None
        left = (padding_side if padding_side is not None else self.padding_side) == "left"
        starts = target - totals if left else np.zeros_like(totals)  # where each row's tokens begin
        columns = np.arange(target)
        content = (columns >= (starts + bos)[:, None]) & (columns < (starts + bos + lengths)[:, None])
        input_ids = np.full((len(texts), target), self.pad_token_id, dtype=np.int64)
        input_ids[content] = flat  # row-major order: each row's ids in turn
        rows_index = np.arange(len(texts))
        if bos:
            input_ids[rows_index, starts] = self.bos_token_id
        if eos:
            input_ids[rows_index, starts + bos + lengths] = self.eos_token_id
        arrays: dict[str, Any] = {"input_ids": input_ids}
        if return_attention_mask:
            attention = (columns >= starts[:, None]) & (columns < (starts + totals)[:, None])
            arrays["attention_mask"] = attention.astype(np.int64)
        return arrays

    def _assemble(
        self,
        first: _Encoded,
        second: _Encoded | None,
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
        ids, spans = first
        pair_ids, pair_spans = second if second is not None else (None, None)
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
        n_special = (int(self._add_bos) + int(self._add_eos)) * (2 if pair_ids is not None else 1)
        total = len(ids) + len(pair_ids or ()) + (n_special if add_special_tokens else 0)
        overflowing: list[int] = []
        if truncation_strategy != TruncationStrategy.DO_NOT_TRUNCATE and max_length and total > max_length:
            remove = total - max_length
            kept_ids, kept_pair, overflowing = self.truncate_sequences(
                ids, pair_ids=pair_ids, num_tokens_to_remove=remove, truncation_strategy=truncation_strategy,
                stride=stride,
            )  # fmt: skip
            if spans is not None:  # truncate_sequences only slices: the spans are cut like the ids
                spans, pair_spans, _ = self.truncate_sequences(  # type: ignore[assignment]
                    spans, pair_ids=pair_spans, num_tokens_to_remove=remove,  # type: ignore[arg-type]
                    truncation_strategy=truncation_strategy, stride=stride,
                )  # fmt: skip
            ids, pair_ids = kept_ids, kept_pair
        if add_special_tokens:
            sequence = self.build_inputs_with_special_tokens(ids, pair_ids)
            type_ids = self.create_token_type_ids_from_sequences(ids, pair_ids)
        else:
            sequence = ids + (pair_ids if pair_ids else [])
            type_ids = [0] * len(sequence)
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
        """Offsets with ``(0, 0)`` where BOS/EOS are inserted (as `tokenizers` does)."""
        if not add_special_tokens:
            return spans + (pair_spans or [])
        bos = [(0, 0)] if self._add_bos else []
        eos = [(0, 0)] if self._add_eos else []
        result = bos + spans + eos
        if pair_spans is not None:
            result += bos + pair_spans + eos
        return result

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
        bos = [self.bos_token_id] if self._add_bos else []
        eos = [self.eos_token_id] if self._add_eos else []
        sequence = bos + token_ids_0 + eos
        if token_ids_1 is not None:
            sequence += bos + token_ids_1 + eos
        return sequence

    def get_special_tokens_mask(
        self,
        token_ids_0: list[int],
        token_ids_1: list[int] | None = None,
        already_has_special_tokens: bool = False,
    ) -> list[int]:
        if already_has_special_tokens:
            return super().get_special_tokens_mask(token_ids_0, token_ids_1, already_has_special_tokens=True)
        bos = [1] if self._add_bos else []
        eos = [1] if self._add_eos else []
        mask = bos + [0] * len(token_ids_0) + eos
        if token_ids_1 is not None:
            mask += bos + [0] * len(token_ids_1) + eos
        return mask

    def num_special_tokens_to_add(self, pair: bool = False) -> int:
        return (int(self._add_bos) + int(self._add_eos)) * (2 if pair else 1)

    # -------------------------------------------------------------------------------- decoding

    @_reading
    def _decode(
        self,
        token_ids: int | list[int],
        skip_special_tokens: bool = False,
        clean_up_tokenization_spaces: bool | None = None,
        **kwargs: Any,
    ) -> str:
        """Join the tokens' bytes in the core and decode them as UTF-8 (invalid bytes become U+FFFD)."""
        ids = [token_ids] if isinstance(token_ids, int) else list(token_ids)
        added = self._added_tokens()
        if skip_special_tokens:
            skip = added.special_ids
            ids = [token_id for token_id in ids if token_id not in skip]
        core = self._model._core
        outside = added.outside_model
        if not outside or not any(token_id in outside for token_id in ids):
            text_bytes = core.decode_bytes(ids)
        else:
            parts: list[bytes] = []
            run: list[int] = []
            for token_id in ids:
                if token_id in outside:
                    parts.append(core.decode_bytes(run))
                    parts.append(outside[token_id])
                    run = []
                else:
                    run.append(token_id)
            parts.append(core.decode_bytes(run))
            text_bytes = b"".join(parts)
        text = text_bytes.decode("utf-8", errors="replace")
        if clean_up_tokenization_spaces is None:
            clean_up_tokenization_spaces = self.clean_up_tokenization_spaces
        # As TokenizersBackend: the WordPiece clean-up would delete real spaces of a BPE text.
        if (
            clean_up_tokenization_spaces
            and self.clean_up_tokenization_spaces_for_bpe_even_though_it_will_corrupt_output
        ):
            text = self.clean_up_tokenization(text)
        return text

    # ---------------------------------------------------------------------------------- saving

    def save_vocabulary(self, save_directory: str, filename_prefix: str | None = None) -> tuple[str, ...]:
        """Write our model file (``hf_bpe.json``)."""
        path = Path(save_directory) / ((f"{filename_prefix}-" if filename_prefix else "") + MODEL_FILE)
        self._model.save(path)
        return (str(path),)

    def save_pretrained(  # type: ignore[override]
        self,
        save_directory: str | os.PathLike[str],
        legacy_format: bool | None = None,
        filename_prefix: str | None = None,
        push_to_hub: bool = False,
        *,
        remote_code: bool | None = None,
        model_card: bool = True,
        **kwargs: Any,
    ) -> tuple[str, ...]:
        """Write a self-sufficient folder: ``tokenizer_config.json`` (class, special tokens, added
        tokens, BOS/EOS policy), ``hf_bpe.json`` (our model), an equivalent ``tokenizer.json``,
        ``special_tokens_map.json``, the chat template, and a model card ``README.md``.

        ``remote_code=True`` also writes ``auto_map`` and a one-line module so that
        ``AutoTokenizer.from_pretrained(folder, trust_remote_code=True)`` returns this class even
        where ``hf_bpe`` was never imported; the default keeps what the tokenizer was loaded with.
        Note that with ``auto_map`` transformers refuses to load the folder without
        ``trust_remote_code=True`` (unless ``hf_bpe`` is imported), so it is opt-in.
        """
        if os.path.isfile(save_directory):
            raise NotADirectoryError(f"{os.fspath(save_directory)} is a file; save_pretrained needs a folder")
        if remote_code is None:
            remote_code = "auto_map" in self.init_kwargs
        if push_to_hub:
            from transformers.utils import hf_api

            commit_message = kwargs.pop("commit_message", None)
            repo_id = kwargs.pop("repo_id", str(save_directory).split(os.path.sep)[-1])
            repo_id = hf_api().create_repo(repo_id, exist_ok=True, **kwargs).repo_id
            timestamps = self._get_files_timestamps(save_directory) if os.path.isdir(save_directory) else {}
        files = super().save_pretrained(
            save_directory, legacy_format, filename_prefix, push_to_hub=False, **kwargs
        )
        directory = Path(save_directory)
        prefix = f"{filename_prefix}-" if filename_prefix else ""
        config_path = directory / f"{prefix}tokenizer_config.json"
        config = json.loads(config_path.read_text(encoding="utf-8"))
        config[CONFIG_KEY] = self._settings()
        # How this tokenizer was loaded is no setting of it; "backend" ("custom") would mislabel
        # the TokenizersBackend that reads the folder without hf_bpe.
        for key in ("backend", "is_local", "local_files_only"):
            config.pop(key, None)
        config.pop("auto_map", None)
        if remote_code:
            config["auto_map"] = {"AutoTokenizer": [f"{REMOTE_CODE_FILE[:-3]}.BPETokenizer", None]}
            atomic_write(
                directory / REMOTE_CODE_FILE,
                "from hf_bpe import BPETokenizer  # noqa: F401  (needs `pip install hf_bpe`)\n",
            )
            files = (*files, str(directory / REMOTE_CODE_FILE))
        atomic_write(config_path, json.dumps(config, indent=2, sort_keys=True, ensure_ascii=False) + "\n")
        if model_card:
            from hf_bpe.model_card import write_model_card

            files = (*files, str(write_model_card(self, directory)))
        if push_to_hub:
            self._upload_modified_files(
                save_directory, repo_id, timestamps, commit_message=commit_message, token=kwargs.get("token")
            )
        return files

    def _save_pretrained(  # type: ignore[override]
        self,
        save_directory: str | os.PathLike[str],
        file_names: tuple[str, ...],
        legacy_format: bool | None = None,
        filename_prefix: str | None = None,
    ) -> tuple[str, ...]:
        import conversion.hf

        directory = Path(save_directory)
        prefix = f"{filename_prefix}-" if filename_prefix else ""
        model_files = self.save_vocabulary(str(directory), filename_prefix)
        tokenizer_json = conversion.hf.save(
            self._model,
            directory / f"{prefix}tokenizer.json",
            added_tokens=self._added_tokens_decoder,
            bos_token=self.bos_token,
            eos_token=self.eos_token,
            add_bos_token=self._add_bos,
            add_eos_token=self._add_eos,
        )
        special_map = {key: _token_json(self._special_tokens_map[key]) for key in self.special_tokens_map}
        if self._extra_special_tokens:
            special_map["extra_special_tokens"] = [_token_json(token) for token in self._extra_special_tokens]
        special_path = atomic_write(
            directory / f"{prefix}special_tokens_map.json",
            json.dumps(special_map, indent=2, sort_keys=True, ensure_ascii=False) + "\n",
        )
        return (*file_names, *model_files, str(tokenizer_json), str(special_path))

    def _settings(self) -> dict[str, Any]:
        """What ``tokenizer_config.json`` keeps under ``"hf_bpe"``."""
        settings: dict[str, Any] = {"add_bos_token": self._add_bos, "add_eos_token": self._add_eos}
        if self._card:
            settings["card"] = self._card
        return settings

    # -------------------------------------------------------------------------------- training

    def train_new_from_iterator(
        self,
        text_iterator: Iterable[str] | Iterable[Sequence[str]],
        vocab_size: int,
        length: int | None = None,
        new_special_tokens: Sequence[str | AddedToken] | None = None,
        special_tokens_map: Mapping[str, str] | None = None,
        **kwargs: Any,
    ) -> BPETokenizer:
        """Train a new tokenizer like this one (same split pattern, special tokens, BOS/EOS policy,
        chat template) on ``text_iterator``, texts or batches of texts, as the fast tokenizers'
        method does. ``vocab_size`` counts every id, special tokens included (they take the last
        ids). ``length`` is accepted for compatibility and unused. ``special_tokens_map``
        renames special tokens; ``new_special_tokens`` adds some. Other keyword arguments go to
        :func:`hf_bpe.train` (e.g. ``show_progress``)."""
        import hf_bpe

        rename = dict(special_tokens_map or {})
        specials = [rename.get(text, text) for text in self._special_tokens_in_id_order()]
        for token in new_special_tokens or []:
            if str(token) not in specials:
                specials.append(str(token))
        texts = _TextStream(text_iterator)
        kwargs.setdefault("show_progress", False)
        model = hf_bpe.train(
            texts, vocab_size, pattern=self._model.pattern, special_tokens=specials, **kwargs
        )
        init = {key: value for key, value in self.init_kwargs.items() if key not in _NOT_INHERITED}
        for key in self.SPECIAL_TOKENS_ATTRIBUTES:
            value = self._special_tokens_map.get(key)
            if value is not None:
                init[key] = rename.get(str(value), str(value))
        extra = [rename.get(str(token), str(token)) for token in self._extra_special_tokens]
        init["extra_special_tokens"] = extra + [
            str(token) for token in new_special_tokens or [] if str(token) not in extra
        ]
        init["chat_template"] = self.chat_template
        training = {"texts": texts.count, "bytes": texts.bytes, "vocab_size": vocab_size}
        if texts.sample:
            training["sample_bytes"] = len(texts.sample.encode("utf-8"))
            training["sample_tokens"] = len(model.encode_ordinary(texts.sample))
        return type(self)(
            model=model,
            add_bos_token=self._add_bos,
            add_eos_token=self._add_eos,
            **cast(dict[str, Any], {CONFIG_KEY: {"card": {"training": training}}}),
            **init,
        )

    def _special_tokens_in_id_order(self) -> list[str]:
        return [
            token.content
            for _, token in sorted(self._added_tokens_decoder.items())
            if token.special or token.content in self._model.special_tokens
        ]

    # ------------------------------------------------------------------------------ internals

    def _get_tables(self) -> _Tables:
        if self._tables is None:
            self._tables = _Tables(self._model)
        return self._tables

    def _added_tokens(self) -> _AddedTokens:
        """The core's added-token matchers, rebuilt when the added tokens change (a new table, or
        one changed in place by transformers' own code)."""
        added, decoder = self._added, self._added_tokens_decoder
        if added is None or added.decoder is not decoder or added.size != len(decoder):
            added = self._added = _AddedTokens(self._model, decoder)
        return added

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_tables"] = None
        state["_added"] = None  # the core's matchers are rebuilt, not pickled
        state.pop("_lock", None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = ReadWriteLock()


# ---------------------------------------------------------------------------------- helpers



_Encoded = tuple[list[int], list[tuple[int, int]] | None]


class _Tables:
    """Per-model lookups built on first use: token strings, the vocabulary, continuation flags."""

    def __init__(self, model: BPE) -> None:
        spelled: list[str | None] = [None] * model.n_vocab
        continues = bytearray(model.n_vocab)
        for token, rank in model.mergeable_ranks.items():
            spelled[rank] = _spell(token)
            continues[rank] = bool(token) and 0x80 <= token[0] < 0xC0  # b"" is the empty token
        for text, token_id in model.special_tokens.items():
            spelled[token_id] = text
        self.spelled = spelled
        self.continues = continues
        self.vocab = {token: token_id for token_id, token in enumerate(spelled) if token is not None}
        self._merges: list[tuple[bytes, bytes]] | None = None

    def merges(self, model: BPE) -> list[tuple[bytes, bytes]]:
        if self._merges is None:
            self._merges = model.merges  # a merges list's own, or recovered from the ranks
        return self._merges


class _AddedTokens:
    """The added tokens as the core matches them: ``tokenizers``' rules, leftmost-longest match.

    `tokenizers` first cuts out the tokens with ``normalized=False`` (special tokens, by default),
    then the others in the text between. When no token of the second kind can overlap one of the
    first, a single leftmost-longest pass in the core gives the same result; otherwise
    :meth:`two_phase` does the two passes.
    """

    def __init__(self, model: BPE, decoder: Mapping[int, AddedToken]) -> None:
        core = model._core
        self.decoder = decoder
        self.size = len(decoder)
        tokens = [(token.content, token_id) for token_id, token in decoder.items()]
        self.plain = all(
            not (token.lstrip or token.rstrip or token.single_word) for token in decoder.values()
        )
        self.policy = core.added_tokens_policy(tokens)
        self.policy_without_specials = core.added_tokens_policy(
            [(token.content, token_id) for token_id, token in decoder.items() if not token.special]
        )
        self.special_ids = frozenset(token_id for token_id, token in decoder.items() if token.special)
        self.outside_model = {
            token_id: token.content.encode("utf-8")
            for token_id, token in decoder.items()
            if not _in_model(model, token_id)
        }
        raw = [token.content for token in decoder.values() if not token.normalized]
        normalized = [token.content for token in decoder.values() if token.normalized]
        self.first_phase: re.Pattern[str] | None = None
        if raw and normalized and _can_overlap(normalized, raw):
            self.first_phase = re.compile(
                "|".join(re.escape(text) for text in sorted(raw, key=len, reverse=True))
            )
            self._raw_ids = {
                token.content: token_id for token_id, token in decoder.items() if not token.normalized
            }
            self._second_policy = core.added_tokens_policy(
                [(token.content, token_id) for token_id, token in decoder.items() if token.normalized]
            )

    def two_phase(self, model: BPE, text: str) -> tuple[list[int], list[int]]:
        """Ids and character starts: raw tokens first, then normalized ones in the gaps."""
        assert self.first_phase is not None
        ids: list[int] = []
        starts: list[int] = []
        done = 0
        for match in [*self.first_phase.finditer(text), None]:
            end = len(text) if match is None else match.start()
            if end > done:
                gap_ids, gap_starts = model._core.encode_with_offsets(text[done:end], self._second_policy)
                ids += gap_ids
                starts += [done + start for start in gap_starts]
            if match is not None:
                ids.append(self._raw_ids[match.group()])
                starts.append(match.start())
                done = match.end()
        return ids, starts


def _in_model(model: BPE, token_id: int) -> bool:
    try:
        model.decode_single_token_bytes(token_id)
    except KeyError:
        return False
    return True


def _can_overlap(normalized: list[str], raw: list[str]) -> bool:
    """Whether a normalized token can start before a raw one and reach into it (or contain it)."""
    for first in normalized:
        for second in raw:
            if second in first and second != first:
                return True
            if any(first.endswith(second[:size]) for size in range(1, min(len(first), len(second)))):
                return True
    return False


class _SequenceEncoder:
    """Collects every text of a call, encodes them in one core batch, hands back ids (and spans)."""

    def __init__(
        self, tokenizer: BPETokenizer, split_special_tokens: bool, offsets: bool, words: bool
    ) -> None:
        self._tokenizer = tokenizer
        self._split = split_special_tokens
        self._offsets = offsets
        self._words = words
        self._texts: list[str] = []
        self._results: list[_Encoded] = []

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
            self._results = [(ids, None) for ids in tokenizer._encode_texts(self._texts, self._split)]
        self._next = iter(self._results)

    def result(self, sequence: Any) -> _Encoded:
        """The encoding of ``sequence``, taken in the order the sequences were requested."""
        if isinstance(sequence, str):
            return next(self._next)
        if isinstance(sequence, (list, tuple)):
            if not sequence:
                return [], ([] if self._offsets else None)
            if isinstance(sequence[0], int):
                if self._offsets:
                    raise ValueError("return_offsets_mapping=True needs text, not token ids")
                return list(sequence), None
            if isinstance(sequence[0], str):
                if not self._words:  # a list of token strings, as PythonBackend reads it
                    if self._offsets:
                        raise ValueError("return_offsets_mapping=True needs text, not token strings")
                    return cast(list[int], self._tokenizer.convert_tokens_to_ids(list(sequence))), None
                ids: list[int] = []
                spans: list[tuple[int, int]] | None = [] if self._offsets else None
                for _ in sequence:
                    word_ids, word_spans = next(self._next)
                    ids += word_ids
                    if spans is not None and word_spans is not None:
                        spans += word_spans
                return ids, spans
        raise ValueError(f"Input must be a string, list of strings, or list of ints, got: {type(sequence)}")


def _padding_target(
    strategy: PaddingStrategy, longest: int | None, max_length: int | None, pad_to_multiple_of: int | None
) -> int | None:
    """The length a batch's rows are padded to (the longest row, or ``max_length``), rounded up to a
    multiple of ``pad_to_multiple_of``; None when nothing is padded."""
    target = {PaddingStrategy.LONGEST: longest, PaddingStrategy.MAX_LENGTH: max_length}.get(strategy)
    if target is not None and pad_to_multiple_of is not None and target % pad_to_multiple_of:
        target = (target // pad_to_multiple_of + 1) * pad_to_multiple_of
    return target


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


_NOT_INHERITED = (
    "name_or_path",
    "vocab_file",
    "added_tokens_decoder",
    "add_bos_token",
    "add_eos_token",
    CONFIG_KEY,
)


class _TextStream:
    """Texts from an iterator of texts or of batches of texts, counted, with a short sample kept."""

    SAMPLE_CHARS = 20_000

    def __init__(self, source: Iterable[str] | Iterable[Sequence[str]]) -> None:
        self._source = source
        self.count = 0
        self.bytes = 0
        self.sample = ""

    def __iter__(self) -> Iterator[str]:
        for item in self._source:
            for text in [item] if isinstance(item, str) else item:
                if not isinstance(text, str):
                    raise TypeError(f"training texts must be str, got {type(text).__name__}")
                self.count += 1
                self.bytes += len(text.encode("utf-8"))
                if len(self.sample) < self.SAMPLE_CHARS:
                    self.sample += text[: self.SAMPLE_CHARS - len(self.sample)] + "\n"
                yield text


def _special_text(model: BPE, key: str, token_id: int) -> str:
    """The text of the special token with id ``token_id``, for ``key`` given as an id."""
    for text, special_id in model.special_tokens.items():
        if special_id == token_id:
            return text
    try:
        ordinary = model.decode_single_token_bytes(token_id)
    except KeyError:
        raise InvalidVocabularyError(
            f"{key}={token_id} is not an id of this model (its special tokens are {model.special_tokens}); "
            f"pass the text of a special token, or a new text to add one"
        ) from None
    raise InvalidVocabularyError(
        f"{key}={token_id} is the id of the ordinary token {ordinary!r}, not of a special token; a special "
        f"token needs an id of its own: pass the text of one of {sorted(model.special_tokens)} or a new text "
        f"(it is added with id {model.n_vocab} or later)"
    )


_SPECIAL_TOKEN_KEYS = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token")


def _check_settings(path: Path, settings: Any) -> None:
    """Check the types of the settings transformers reads from ``tokenizer_config.json`` or
    ``special_tokens_map.json``; raise :class:`~hf_bpe.errors.TokenizerFileError` naming the first
    wrong one. Unknown keys pass (transformers forwards them)."""

    def wrong(key: str, value: Any, expected: str) -> TokenizerFileError:
        return TokenizerFileError(path, f"{key} is {value!r:.80}; expected {expected}")

    def is_token(value: Any) -> bool:
        if isinstance(value, dict):
            value = value.get("content")
        return isinstance(value, str) and value != ""

    if not isinstance(settings, dict):
        raise TokenizerFileError(path, f"expected a JSON object, got {type(settings).__name__}")
    for key in _SPECIAL_TOKEN_KEYS:
        if settings.get(key) is not None and not is_token(settings[key]):
            raise wrong(key, settings[key], 'a token: a non-empty string or {"content": ...}')
    for key in ("additional_special_tokens", "extra_special_tokens"):
        value = settings.get(key)
        tokens = list(value.values()) if isinstance(value, dict) else value
        if value is not None and (not isinstance(tokens, list) or not all(map(is_token, tokens))):
            raise wrong(key, value, "a list of tokens")
    added = settings.get("added_tokens_decoder")
    if added is not None:
        if not isinstance(added, dict):
            raise wrong("added_tokens_decoder", added, "an object of id -> token")
        for token_id, token in added.items():
            if not token_id.isdigit() or not is_token(token) or not isinstance(token, dict):
                raise wrong(f"added_tokens_decoder[{token_id!r:.20}]", token, 'an id of digits -> {"content": ...}')
            flags = {flag: value for flag, value in token.items() if flag != "content" and flag != "__type"}
            if not all(isinstance(value, bool) for value in flags.values()):
                raise wrong(f"added_tokens_decoder[{token_id!r:.20}]", token, "true/false flags")
    length = settings.get("model_max_length")
    if length is not None and (isinstance(length, bool) or not isinstance(length, (int, float)) or not length > 0):
        raise wrong("model_max_length", length, "a positive number")
    for key in ("padding_side", "truncation_side"):
        if key in settings and settings[key] not in ("left", "right"):
            raise wrong(key, settings[key], '"left" or "right"')
    for key, expected in (("tokenizer_class", str), ("name_or_path", str), (CONFIG_KEY, dict),
                          ("clean_up_tokenization_spaces", bool), ("split_special_tokens", bool)):
        if settings.get(key) is not None and not isinstance(settings[key], expected):
            raise wrong(key, settings[key], f"a {expected.__name__}")
    names = settings.get("model_input_names")
    if names is not None and not (isinstance(names, list) and all(isinstance(name, str) for name in names)):
        raise wrong("model_input_names", names, "a list of strings")


def _load_model(model_file: str | os.PathLike[str] | None, name_or_path: str | None) -> BPE:
    """Our model from a saved folder, with errors that name the file."""
    if model_file is None or not os.path.isfile(model_file):
        path = model_file if model_file is not None else os.path.join(name_or_path or ".", MODEL_FILE)
        raise TokenizerFileError(
            path,
            f"missing: a BPETokenizer folder needs the model file {MODEL_FILE} that save_pretrained writes "
            "(the folder can still be loaded without hf_bpe, by transformers' TokenizersBackend, from tokenizer.json)",
        )
    return BPE.load(model_file)


def _config_path(name_or_path: str | None) -> str:
    return os.path.join(name_or_path, "tokenizer_config.json") if name_or_path else "added_tokens_decoder"


def _token_json(token: AddedToken | str) -> Any:
    if isinstance(token, AddedToken):
        state = token.__getstate__()
        state.pop("special", None)
        return state
    return token


def save_tokenizer_folder(
    model: BPE,
    directory: str | os.PathLike[str],
    *,
    card: Mapping[str, Any] | None = None,
    **policy: Any,
) -> tuple[str, ...]:
    """Write ``model`` as a transformers tokenizer folder: ``BPETokenizer.from_model(model,
    **policy).save_pretrained(directory)`` (what ``hf-bpe train --out DIR`` should write).

    ``card`` adds what the model card cannot see in the model, kept in ``tokenizer_config.json``:
    ``title``, ``provenance`` (a sentence, e.g. where a converted model came from) and ``training``,
    a dict with any of ``corpus`` (a description), ``texts``, ``bytes``, ``vocab_size``, and
    ``sample_bytes`` / ``sample_tokens`` (the compression measured on the training data).

    >>> import hf_bpe, tempfile
    >>> files = save_tokenizer_folder(hf_bpe.get_encoding("gpt2"), tempfile.mkdtemp(), eos_token="<|endoftext|>",
    ...                               card={"training": {"corpus": "WebText", "vocab_size": 50257}})
    >>> sorted(os.path.basename(file) for file in files)[:3]
    ['README.md', 'hf_bpe.json', 'special_tokens_map.json']
    """
    tokenizer = BPETokenizer.from_model(model, **policy)
    tokenizer._card.update(card or {})
    return tokenizer.save_pretrained(directory)


def register() -> None:
    """Make ``AutoTokenizer`` find ``BPETokenizer`` by the name in ``tokenizer_config.json``.

    transformers registers a tokenizer against a config class; registered against its own
    ``PreTrainedConfig`` it records the class by name and maps no model type to it.
    """
    AutoTokenizer.register(PreTrainedConfig, tokenizer_class=BPETokenizer)


register()
