"""The BPE model: ranks, a split pattern and special tokens, with tiktoken's encode/decode API.

Three kinds of model share this class and its API; they differ in which adjacent pairs merge:

- ``"ranks"`` (:class:`BPE` itself, tiktoken): any pair whose bytes form a token merges, lowest id
  first; a piece that is itself a token is emitted whole.
- ``"merges"`` (:meth:`BPE.from_merges`: GPT-2 files, HF ``tokenizer.json``): only the listed
  merges, in list order; whole pieces only with ``ignore_merges``.
- ``"sentencepiece"`` (:meth:`BPE.from_sentencepiece`): SentencePiece's BPE on characters, merged
  by piece score, with its normalizer and no split pattern.

This module is longer than the others (about 1,150 lines) on purpose: :class:`BPE` is the one class
users meet, its methods are thin calls into the core grouped by task (build, encode, decode, inspect,
save), and splitting one class's API across files would make it harder to read, not easier.
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from pathlib import Path
from typing import Any, Literal

from hf_bpe import _core, _streaming, patterns
from hf_bpe._io import atomic_write, read_json
from hf_bpe._word_affixes import WordAffixes, from_affixed_merges
from hf_bpe.errors import ConversionError, InvalidVocabularyError, TokenizerFileError, UnknownTokenError
from hf_bpe.sentencepiece_bpe import TYPE_NAMES, Piece, SentencePieceSpec

__all__ = [
    "BPE", "MAX_DENSE_IDS", "MODEL_FILE", "MODEL_FORMAT", "MODEL_FORMAT_VERSION", "NEVER_IN_UTF8", "AllowedSpecial",
    "DisallowedSpecial", "IdType", "Nulls", "as_model", "clear_cache", "encode_with_spans", "id_type_for", "n_ordinary",
    "special_token_rules", "with_special_token_rules"
]

AllowedSpecial = Literal["all"] | AbstractSet[str]
DisallowedSpecial = Literal["all"] | Collection[str]
IdType = Literal["uint32", "uint16", "int32", "int64", "auto"]
"""The integer type of ids in Arrow output (:meth:`BPE.encode_arrow`); ``"auto"``: ``uint16`` when every id
of the vocabulary fits it, else ``uint32`` (fixed by the vocabulary, never by the text, so every batch of a
column gets the same type)."""
Nulls = Literal["raise", "empty", "null"]
"""What a null string of an Arrow column becomes (:meth:`BPE.encode_arrow`)."""

_NOTHING: frozenset[str] = frozenset()
# Empty ``disallowed_special`` values of these types ask for no check at all (the ordinary policy).
_EMPTY_COLLECTIONS = (tuple, list, set, frozenset)

MODEL_FORMAT = "hf_bpe"
MODEL_FORMAT_VERSION = 1
_RULES_FORMAT_VERSION = 2
"""The version of model files holding special-token rules (readers of version 1 refuse them)."""
_AFTER_MERGING_FORMAT_VERSION = 3
"""The version of model files dropping missing bytes after merging (readers of versions 1 and 2 refuse
them: they would drop them before)."""
_BYTE_LEVEL_STEP_FORMAT_VERSION = 4
"""The version of model files whose pattern holds a ByteLevel step, or of SentencePiece models with
`tokenizers`' normalizer steps, or whose symbols carry word affixes (readers of versions 1 to 3 refuse them: they do not know the step, or
would normalize as SentencePiece does, or merge bytes)."""
_NORMALIZER_STEPS_FORMAT_VERSION = _BYTE_LEVEL_STEP_FORMAT_VERSION
_FORMAT_VERSIONS = (MODEL_FORMAT_VERSION, _RULES_FORMAT_VERSION, _AFTER_MERGING_FORMAT_VERSION,
                    _BYTE_LEVEL_STEP_FORMAT_VERSION)
_AFFIXES_FORMAT_VERSION = _BYTE_LEVEL_STEP_FORMAT_VERSION
MissingBytes = Literal["before merging", "after merging"]
"""When a merges-list model drops the single bytes its vocabulary lacks from text (see
:meth:`BPE.from_merges`): before merging (`tokenizers`) or after (llama.cpp)."""
MISSING_BYTES_RULES: tuple[MissingBytes, ...] = ("before merging", "after merging")

SPECIAL_TOKEN_RULES = {"lstrip": 1, "rstrip": 2, "single_word": 4, "normalized": 8}
"""`tokenizers`' added-token flags a special token may carry (:func:`with_special_token_rules`),
and the core's bit for each."""
MODEL_FILE = "hf_bpe.json"
"""The model file's name inside a tokenizer folder."""

NEVER_IN_UTF8 = frozenset({0xC0, 0xC1, *range(0xF5, 0x100)})
"""The bytes no UTF-8 text holds: a vocabulary lacking only these encodes every ``str`` exactly."""

MAX_DENSE_IDS = 1 << 24
"""Ids below this (16,777,216) may be kept in a table indexed by id (when they are not much sparser
than the tokens); a model with a larger id keeps its tokens in a hash map instead. What keeps an entry for every id up to the largest takes only models whose ids
are all below it: :class:`~hf_bpe.BPETokenizer` (transformers counts ids as the embedding size)
and ``tokenizer.json`` (``tokenizers`` numbers its vocabulary without holes, so holes are filled)."""


class _Encoder:
    """tiktoken's ``Encoding`` verbs over the Rust core: what :class:`BPE` and
    :class:`hf_bpe.tiktoken.Encoding` share (the latter holds a :class:`BPE` and shares its core; it is
    not a :class:`BPE`). Subclasses call :meth:`_use_core` to set the fields these methods read."""

    _core: Any
    _aliases: dict[str, int] = {}  # noqa: RUF012 - second names of a special token's id (tiktoken's Encoding)
    _rules: dict[str, int] = {}  # noqa: RUF012 - special token -> its added-token rules, as the core's bits
    _word_affixes: WordAffixes | None = None  # the settings of a model whose symbols carry word affixes
    name: str | None

    def _use_core(self, core: Any, specials: dict[str, int], name: str | None) -> None:
        """Encode with ``core``, these special tokens (each name once per id) and this name."""
        self._core = core
        self._special_tokens = specials
        self._special_tokens_set = frozenset(specials)
        self.name = name
        self._default_policy = self._core.special_policy([], list(specials))
        self._ordinary_policy = self._core.special_policy([], [])
        self._policies: dict[tuple[frozenset[str], frozenset[str]], Any] = {}

    def encode_ordinary(self, text: str) -> list[int]:
        """Encode ``text`` treating special tokens as ordinary text.

        >>> import hf_bpe
        >>> enc = hf_bpe.get_encoding("gpt2")
        >>> enc.encode_ordinary("hello world")
        [31373, 995]
        """
        return self._core.encode_ordinary(text)

    def encode(
        self,
        text: str,
        *,
        allowed_special: AllowedSpecial = _NOTHING,
        disallowed_special: DisallowedSpecial = "all",
    ) -> list[int]:
        """Encode ``text``; special tokens in ``allowed_special`` become their ids.

        Text matching a special token in ``disallowed_special`` (by default every special token not
        allowed) raises :class:`~hf_bpe.errors.DisallowedSpecialTokenError`, as tiktoken does: pass
        ``disallowed_special=()`` to encode such text as ordinary text.

        >>> import hf_bpe
        >>> enc = hf_bpe.get_encoding("gpt2")
        >>> enc.encode("hello <|endoftext|>", allowed_special="all")
        [31373, 220, 50256]
        >>> enc.encode("hello <|endoftext|>", disallowed_special=())
        [31373, 1279, 91, 437, 1659, 5239, 91, 29]
        """
        return self._core.encode(text, self._policy(allowed_special, disallowed_special))

    def encode_batch(
        self,
        texts: Iterable[str],
        *,
        num_threads: int | None = None,
        allowed_special: AllowedSpecial = _NOTHING,
        disallowed_special: DisallowedSpecial = "all",
    ) -> list[list[int]]:
        """Encode many texts in parallel (GIL released); ``num_threads=None`` uses every core.

        >>> import hf_bpe
        >>> enc = hf_bpe.get_encoding("gpt2")
        >>> enc.encode_batch(["hello", "world"])
        [[31373], [6894]]
        """
        policy = self._policy(allowed_special, disallowed_special)
        return self._core.encode_batch(texts, policy, num_threads)

    def encode_ordinary_batch(self, texts: Iterable[str], *, num_threads: int | None = None) -> list[list[int]]:
        """Encode many texts in parallel, treating special tokens as ordinary text.

        >>> import hf_bpe
        >>> hf_bpe.get_encoding("gpt2").encode_ordinary_batch(["hello", "<|endoftext|>"])[0]
        [31373]
        """
        return self._core.encode_batch(texts, None, num_threads)

    def encode_single_token(self, token: bytes | str) -> int:
        """The id of one token given as bytes or text (special tokens by their text).

        >>> import hf_bpe
        >>> hf_bpe.get_encoding("gpt2").encode_single_token(" world")
        995
        """
        if isinstance(token, str):
            if token in self._special_tokens:
                return self._special_tokens[token]
            token_bytes = token.encode("utf-8")
        elif isinstance(token, (bytes, bytearray, memoryview)):
            token_bytes = bytes(token)
        else:
            raise TypeError(f"encode_single_token expects bytes or str, got {type(token).__name__}")
        rank = self._core.token_id(token_bytes)
        if rank is not None:
            return rank
        special = self._special_tokens.get(token_bytes.decode("utf-8", errors="replace"))
        if special is None:
            raise UnknownTokenError(token)
        return special

    def decode_bytes(self, tokens: Sequence[int]) -> bytes:
        """The bytes of a token sequence.

        >>> import hf_bpe
        >>> hf_bpe.get_encoding("gpt2").decode_bytes([31373, 995])
        b'hello world'
        """
        return self._core.decode_bytes(tokens)

    def decode(self, tokens: Sequence[int], errors: str = "replace") -> str:
        """Decode ids to text; bytes that are not valid UTF-8 follow ``errors`` (as ``bytes.decode``).

        >>> import hf_bpe
        >>> hf_bpe.get_encoding("gpt2").decode([31373, 995])
        'hello world'
        """
        if errors == "replace":
            return self._core.decode(tokens)
        return self._core.decode_bytes(tokens).decode("utf-8", errors=errors)

    def decode_single_token_bytes(self, token: int) -> bytes:
        """The bytes of one token (special tokens give their UTF-8 text).

        >>> import hf_bpe
        >>> hf_bpe.get_encoding("gpt2").decode_single_token_bytes(995)
        b' world'
        """
        return self._core.decode_single_token_bytes(token)

    def decode_tokens_bytes(self, tokens: Sequence[int]) -> list[bytes]:
        """The bytes of each token.

        >>> import hf_bpe
        >>> hf_bpe.get_encoding("gpt2").decode_tokens_bytes([31373, 995])
        [b'hello', b' world']
        """
        return [self._core.decode_single_token_bytes(token) for token in tokens]

    def decode_batch(self, batch: Iterable[Sequence[int]], *, errors: str = "replace") -> list[str]:
        """Decode many id sequences.

        >>> import hf_bpe
        >>> hf_bpe.get_encoding("gpt2").decode_batch([[31373], [995]])
        ['hello', ' world']
        """
        return [self.decode(tokens, errors=errors) for tokens in batch]

    def token_byte_values(self) -> list[bytes]:
        """Every mergeable token's bytes, sorted.

        >>> import hf_bpe
        >>> len(hf_bpe.get_encoding("gpt2").token_byte_values())
        50256
        """
        return self._core.token_byte_values()

    @property
    def n_vocab(self) -> int:
        """One more than the largest id, special tokens included (ids may have holes)."""
        return self._core.n_vocab

    @property
    def max_token_value(self) -> int:
        return self._core.n_vocab - 1

    @property
    def special_tokens_set(self) -> set[str]:
        return set(self._special_tokens)

    @property
    def eot_token(self) -> int:
        """The id of ``<|endoftext|>``."""
        try:
            return self._special_tokens["<|endoftext|>"]
        except KeyError:
            raise UnknownTokenError("<|endoftext|>") from None

    def _policy(self, allowed_special: AllowedSpecial, disallowed_special: DisallowedSpecial) -> Any:
        """The core's special-token policy for these arguments (cached)."""
        if allowed_special is _NOTHING:
            if disallowed_special == "all":
                return self._default_policy
            if type(disallowed_special) in _EMPTY_COLLECTIONS and not disallowed_special:
                return self._ordinary_policy
        if allowed_special == "all":
            allowed = self._special_tokens_set
        elif isinstance(allowed_special, (str, bytes)) or not isinstance(allowed_special, Collection):
            raise TypeError(f'allowed_special must be "all" or a set of str, got {allowed_special!r}')
        else:
            allowed = self._allowed_specials(frozenset(allowed_special))
        if disallowed_special == "all":
            disallowed = self._special_tokens_set - allowed
        elif isinstance(disallowed_special, (str, bytes)) or not isinstance(disallowed_special, Collection):
            raise TypeError(f'disallowed_special must be "all" or a collection of str, got {disallowed_special!r}')
        else:
            disallowed = frozenset(disallowed_special)
        key = (allowed, disallowed)
        policy = self._policies.get(key)
        if policy is None:
            if len(self._policies) >= 64:
                self._policies.clear()
            policy = self._policies[key] = self._new_policy(allowed, disallowed)
        return policy

    def _allowed_specials(self, allowed: frozenset[str]) -> frozenset[str]:
        """The special tokens a set given as ``allowed_special`` allows: every name must be one."""
        unknown = allowed - self._special_tokens_set
        if unknown:
            raise ValueError(
                f"allowed_special names {sorted(unknown)!r}, which are not special tokens of this "
                f"encoding; its special tokens are {sorted(self._special_tokens_set)!r}"
            )
        return allowed

    def _new_policy(self, allowed: frozenset[str], disallowed: frozenset[str]) -> Any:
        """The core's policy that cuts out the ``allowed`` special tokens and refuses ``disallowed`` texts
        (with second names of an id, any text may be disallowed and every name is matched)."""
        if self._aliases:
            tokens = [(text, self._special_tokens[text]) for text in allowed]
            return self._core.added_tokens_policy(tokens, list(disallowed))
        rules = [(text, self._rules[text]) for text in allowed if text in self._rules]
        return self._core.special_policy(list(allowed), list(disallowed), rules)

    def _use_aliases(self, special_tokens: dict[str, int], aliases: dict[str, int]) -> None:
        """Take ``special_tokens`` with second names of an id (``aliases``, a part of it), as tiktoken allows."""
        self._special_tokens = special_tokens
        self._special_tokens_set = frozenset(special_tokens)
        self._aliases = aliases
        self._policies = {}
        if aliases:
            self._default_policy = self._core.special_policy([], list(special_tokens))

    def _encode_piece(self, piece: bytes) -> list[int]:
        """``piece`` merged as one piece: no split pattern, no special tokens."""
        return list(self._core.encode_single_piece(piece, True))

    def _ordinary_id(self, token: bytes) -> int | None:
        """The id of the ordinary token ``token``, or ``None``."""
        return self._core.token_id(token)  # type: ignore[no-any-return]

    def _split(self, text: str) -> list[str] | None:
        """The pieces the split pattern cuts ``text`` into (``None``: no split pattern)."""
        return self._core.pieces(text)  # type: ignore[no-any-return]

    def _encode_flat(self, texts: Iterable[str], policy: Any, num_threads: int | None) -> tuple[bytes, bytes]:
        """The ids of ``texts`` as two buffers (``uint32`` ids one text after the other, ``uint64`` lengths)."""
        return self._core.encode_batch_flat(texts, policy, num_threads)  # type: ignore[no-any-return]


class BPE(_Encoder):
    """A byte-level BPE model with tiktoken's semantics.

    ``ranks`` maps each mergeable token's bytes to its id, which is also its merge rank (lower
    merges first); all 256 single bytes must be tokens. ``pattern`` is the split regex or a name from
    :mod:`hf_bpe.patterns`, or `tokenizers`' Split pre-tokenizer(s) (:class:`hf_bpe.patterns.Split`).
    ``special_tokens`` maps special-token text to ids outside the ranks. Ids may have holes.

    >>> import hf_bpe
    >>> enc = hf_bpe.BPE({bytes([b]): b for b in range(256)} | {b"ab": 256}, "gpt2",
    ...                  special_tokens={"<|end|>": 257})
    >>> enc.encode("abc<|end|>", allowed_special="all")
    [256, 99, 257]
    """

    _training: dict[str, Any] | None = None
    """What :func:`hf_bpe.train` knows of how it learned this model (the corpus's description, its
    texts or files and bytes, the pattern, the vocabulary size asked for, the special tokens), or None;
    in memory only (a saved model card keeps it: :class:`hf_bpe.transformers.BPETokenizer`)."""

    def __init__(
        self,
        ranks: Mapping[bytes, int],
        pattern: str | patterns.Split | Sequence[patterns.Step],
        special_tokens: Mapping[str, int] | None = None,
        name: str | None = None,
    ) -> None:
        if not isinstance(ranks, Mapping):
            raise TypeError(f"ranks must be a mapping of bytes to int, got {type(ranks).__name__}")
        if special_tokens is None:
            special_tokens = {}
        if not isinstance(special_tokens, Mapping):
            raise TypeError(
                f"special_tokens must be a mapping of str to int, got {type(special_tokens).__name__}"
            )
        if name is not None and not isinstance(name, str):
            raise TypeError(f"name must be a str, got {type(name).__name__}")
        split = patterns.to_core(patterns.resolve(pattern))
        specials = dict(special_tokens)
        self._setup(_core.CoreBPE(ranks if isinstance(ranks, dict) else dict(ranks), split, specials), specials, name)

    def _setup(self, core: Any, specials: dict[str, int], name: str | None, spec: SentencePieceSpec | None = None) -> None:
        self._use_core(core, specials, name)
        self._sentencepiece = spec
        split = self._core.split_rule
        self._pattern = None if split is None else patterns.from_core(split)

    @classmethod
    def from_merges(
        cls,
        vocab: Mapping[bytes, int],
        merges: Iterable[tuple[bytes, bytes]],
        pattern: str | patterns.Split | Sequence[patterns.Step],
        special_tokens: Mapping[str, int] | None = None,
        *,
        ignore_merges: bool = False,
        drop_missing_bytes: bool | MissingBytes = False,
        name: str | None = None,
    ) -> BPE:
        """A model that merges only the listed pairs, in list order (GPT-2's files, HF's BPE).

        ``vocab`` maps each mergeable token's bytes to its id; ``merges`` lists pairs of tokens, and
        a pair merges into the token its bytes spell. With ``ignore_merges`` a piece that is itself
        a token is emitted whole (HF's ``ignore_merges``). A pair listed twice takes its last line.

        ``vocab`` needs every single byte that UTF-8 text uses as a token (those no UTF-8 text holds,
        0xC0, 0xC1 and 0xF5-0xFF, may be absent: every ``str`` still encodes exactly, and raw bytes
        needing one are refused); lacking others raises
        :class:`~hf_bpe.errors.InvalidVocabularyError`, unless ``drop_missing_bytes``, which drops a
        missing byte from the text: ``True`` or ``"before merging"`` as `tokenizers` does (the piece
        merges as if the byte were not there), ``"after merging"`` as llama.cpp does (the byte stays a
        symbol no merge joins, so merges never cross it, and then gives no id: a piece encodes as its
        runs of present bytes, each merged alone). Offsets (:meth:`encode_with_offsets`) after merging:
        each id starts at the first byte of its own bytes in the text.

        >>> import hf_bpe
        >>> vocab = {bytes([b]): b for b in range(256) if b != ord("q")} | {b"ab": 256}
        >>> before = hf_bpe.BPE.from_merges(vocab, [(b"a", b"b")], "gpt2", drop_missing_bytes=True)
        >>> after = hf_bpe.BPE.from_merges(vocab, [(b"a", b"b")], "gpt2", drop_missing_bytes="after merging")
        >>> before.encode("aqb"), after.encode("aqb")
        ([256], [97, 98])

        >>> vocab = {bytes([b]): b for b in range(256)} | {b"ab": 256, b"bc": 257}
        >>> enc = hf_bpe.BPE.from_merges(vocab, [(b"a", b"b")], "gpt2")
        >>> enc.encode("abc bc"), enc.kind
        ([256, 99, 32, 98, 99], 'merges')
        """
        if not isinstance(vocab, Mapping):
            raise TypeError(f"vocab must be a mapping of bytes to int, got {type(vocab).__name__}")
        vocab = dict(vocab)
        merge_ids = []
        for number, pair in enumerate(merges):
            try:
                left, right = pair
                merge_ids.append((vocab[left], vocab[right]))
            except (KeyError, TypeError, ValueError):
                raise InvalidVocabularyError(
                    f"merge {number} ({pair!r}) must be a pair of tokens of the vocabulary"
                ) from None
        if drop_missing_bytes not in (False, True, *MISSING_BYTES_RULES):
            raise ValueError(f"drop_missing_bytes must be a bool or one of {MISSING_BYTES_RULES}, got "
                             f"{drop_missing_bytes!r:.80}")
        lacking = bytes(byte for byte in range(256) if bytes([byte]) not in vocab and byte not in NEVER_IN_UTF8)
        if lacking and not drop_missing_bytes:
            raise InvalidVocabularyError(
                f"the vocabulary's tokens lack the single byte {lacking[:1]!r}"
                + (f" and {len(lacking) - 1} more" if len(lacking) > 1 else "")
                + ", which UTF-8 text uses: text holding it cannot be encoded; a byte-level BPE needs every such "
                "byte as a token (tokenizer.json files lacking bytes load through conversion.hf.load, which drops "
                "them from the text as tokenizers does)"
            )
        specials = dict(special_tokens or {})
        model = cls.__new__(cls)
        split = patterns.to_core(patterns.resolve(pattern))
        core = _core.CoreBPE.from_merges(vocab, merge_ids, split, specials, bool(ignore_merges),
                                         drop_missing_bytes == "after merging")
        model._setup(core, specials, name)
        return model

    @classmethod
    def _from_affixed_rule(
        cls,
        vocab: dict[bytes, int],
        symbols: list[list[int | None]],
        merges: list[tuple[int, int, int]],
        unknown: int | None,
        byte_fallback: list[list[list[int]]] | None,
        affixes: WordAffixes,
        pattern: str | patterns.Split | Sequence[patterns.Step],
        special_tokens: Mapping[str, int],
        *,
        ignore_merges: bool,
        name: str | None,
    ) -> BPE:
        """The core of :func:`hf_bpe._word_affixes.from_affixed_merges`, which finds the symbols and merges."""
        specials = dict(special_tokens)
        split = patterns.to_core(patterns.resolve(pattern))
        core = _core.CoreBPE.from_affixed(vocab, symbols, merges, unknown, affixes.fuse_unk,
                                          vocab if ignore_merges else None, byte_fallback, split, specials)
        model = cls.__new__(cls)
        model._setup(core, specials, name)
        model._word_affixes = affixes
        return model

    @classmethod
    def _from_spelled_merges(
        cls,
        vocab: Mapping[str, Any],
        merges: Sequence[Any],
        pattern: str | patterns.Split | Sequence[patterns.Step],
        special_tokens: Mapping[str, int],
        *,
        ignore_merges: bool,
        name: str | None,
    ) -> BPE | None:
        """See :func:`hf_bpe._rules.from_spelled_merges`."""
        vocab = dict(vocab) if not isinstance(vocab, dict) else vocab
        merges = merges if isinstance(merges, list) else list(merges)
        return cls._from_spelled(lambda split, specials: _core.CoreBPE.from_spelled_merges(
            vocab, merges, split, specials, bool(ignore_merges), True), pattern, special_tokens, name)

    @staticmethod
    def _read_tokenizer_json(data: bytes) -> tuple[str, Any] | None:
        """See :func:`hf_bpe._rules.read_tokenizer_json`."""
        return _core.read_tokenizer_json(data)  # type: ignore[no-any-return]

    @classmethod
    def _from_tokenizer_json(
        cls,
        spelled: Any,
        pattern: str | patterns.Split | Sequence[patterns.Step],
        special_tokens: Mapping[str, int],
        *,
        ignore_merges: bool,
        name: str | None,
    ) -> BPE | None:
        """See :func:`hf_bpe._rules.from_tokenizer_json`."""
        return cls._from_spelled(lambda split, specials: _core.CoreBPE.from_tokenizer_json(
            spelled, split, specials, bool(ignore_merges), True), pattern, special_tokens, name)

    @classmethod
    def _from_spelled(
        cls,
        build: Callable[[Any, dict[str, int]], Any],
        pattern: str | patterns.Split | Sequence[patterns.Step],
        special_tokens: Mapping[str, int],
        name: str | None,
    ) -> BPE | None:
        """The model the core's ``build(split, specials)`` makes of a vocabulary spelled in GPT-2's
        alphabet, or ``None`` when it gives none (an irregular file)."""
        specials = dict(special_tokens)
        core = build(patterns.to_core(patterns.resolve(pattern)), specials)
        if core is None:
            return None
        model = cls.__new__(cls)
        model._setup(core, specials, name)
        return model

    @classmethod
    def from_vocab(
        cls,
        vocab: Mapping[int, bytes],
        merges: Iterable[tuple[bytes, bytes]],
        special_tokens: Iterable[str] | None = None,
        pattern: str | patterns.Split | Sequence[patterns.Step] = "gpt2",
        *,
        name: str | None = None,
    ) -> BPE:
        """A model from the shapes minbpe and CS336 hold: ``vocab`` (id -> token bytes) and
        ``merges`` (pairs of token bytes, in the order they were learned), as CS336's
        ``Tokenizer(vocab, merges, special_tokens)``. The listed merges apply in list order.

        ``special_tokens`` already in ``vocab`` (as their UTF-8 bytes) keep their id; the others
        are added after the largest id. Inconsistent input raises
        :class:`~hf_bpe.errors.InvalidVocabularyError` saying which entry.

        >>> import hf_bpe
        >>> vocab = {i: bytes([i]) for i in range(256)} | {256: b"ab", 257: b"<|end|>"}
        >>> model = hf_bpe.BPE.from_vocab(vocab, [(b"a", b"b")], ["<|end|>", "<|pad|>"])
        >>> model.encode("abc<|end|><|pad|>", allowed_special="all")
        [256, 99, 257, 258]
        >>> model.vocab == vocab | {258: b"<|pad|>"}, model.merges
        (True, [(b'a', b'b')])
        """
        if not isinstance(vocab, Mapping):
            raise TypeError(f"vocab must be a dict of int ids to bytes, got {type(vocab).__name__}")
        ids: dict[bytes, int] = {}
        for token_id, token in vocab.items():
            if isinstance(token_id, bool) or not isinstance(token_id, int) or token_id < 0:
                raise InvalidVocabularyError(f"vocab id {token_id!r:.40} is not a non-negative int")
            if not isinstance(token, (bytes, bytearray)):
                raise InvalidVocabularyError(f"vocab[{token_id}] is {type(token).__name__}, not bytes")
            if bytes(token) in ids:
                raise InvalidVocabularyError(
                    f"ids {ids[bytes(token)]} and {token_id} are both {bytes(token)!r:.80}: each token needs one id"
                )
            ids[bytes(token)] = token_id
        if isinstance(special_tokens, str):
            special_tokens = [special_tokens]
        specials: dict[str, int] = {}
        next_id = max(vocab, default=-1) + 1
        for text in special_tokens or ():
            if not isinstance(text, str) or not text:
                raise InvalidVocabularyError(f"special token {text!r:.80} is not a non-empty str")
            if text in specials:
                raise InvalidVocabularyError(f"special token {text!r:.80} is given twice")
            known = ids.pop(text.encode("utf-8"), None)
            specials[text] = next_id if known is None else known
            next_id += known is None
        pairs = []
        for number, pair in enumerate(merges):
            if not isinstance(pair, (tuple, list)) or len(pair) != 2 or \
                    not all(isinstance(part, (bytes, bytearray)) for part in pair):
                raise InvalidVocabularyError(f"merge {number} ({pair!r:.80}) is not a pair of bytes")
            left, right = bytes(pair[0]), bytes(pair[1])
            for part in (left, right, left + right):
                if part not in ids:
                    what = "its result" if part == left + right else "its token"
                    raise InvalidVocabularyError(
                        f"merge {number} ({left!r:.40}, {right!r:.40}): {what} {part!r:.80} is not in vocab "
                        f"(or is a special token); every merge joins two tokens of vocab into a token of vocab"
                    )
            pairs.append((left, right))
        return cls.from_merges(ids, pairs, pattern, specials, name=name)

    @classmethod
    def from_sentencepiece(cls, spec: SentencePieceSpec, *, name: str | None = None) -> BPE:
        """A SentencePiece BPE model (see :mod:`hf_bpe.sentencepiece_bpe`); ``encode_ordinary(text)``
        equals ``SentencePieceProcessor.encode(text)``.

        Control pieces and the unknown piece become special tokens (never matched in text unless
        allowed, as SentencePiece never matches them); user-defined pieces are matched in text
        always, as SentencePiece does.

        >>> from hf_bpe.sentencepiece_bpe import Piece, SentencePieceSpec, NORMAL, UNKNOWN
        >>> spec = SentencePieceSpec((Piece("<unk>", 0, UNKNOWN), Piece("▁", -1), Piece("a", -2),
        ...                           Piece("b", -3), Piece("▁a", -4), Piece("▁ab", -5)))
        >>> enc = BPE.from_sentencepiece(spec)
        >>> enc.encode_ordinary("ab a"), enc.decode([5, 4])
        ([5, 4], 'ab a')
        """
        if not isinstance(spec, SentencePieceSpec):
            raise TypeError(f"from_sentencepiece expects a SentencePieceSpec, got {type(spec).__name__}")
        for index, piece in enumerate(spec.pieces):
            if piece.type not in TYPE_NAMES:
                raise InvalidVocabularyError(f"piece {index} ({piece.text!r:.80}) has unknown type {piece.type!r:.40}")
        steps = tuple(spec.tokenizers_normalizer)
        if not all(isinstance(step, patterns.Normalize) for step in steps):
            raise TypeError("SentencePieceSpec.tokenizers_normalizer must hold hf_bpe.patterns.Normalize steps")
        metaspace = None
        if spec.metaspace is not None:
            if spec.metaspace not in ("always", "first", "never") or (
                    not steps and spec.add_dummy_prefix != (spec.metaspace != "never")):
                raise InvalidVocabularyError(
                    f"metaspace = {spec.metaspace!r:.40} with add_dummy_prefix = {spec.add_dummy_prefix}: expected "
                    "'always' or 'first' with add_dummy_prefix true, or 'never' with it false")
            metaspace = (spec.metaspace != "never", spec.metaspace == "first", True, bool(spec.metaspace_split))
        elif spec.metaspace_split:
            # Words after a prefix: the dummy prefix's before every text, or the normalizer steps' own.
            metaspace = (not steps, False, False, True)
        core = _core.CoreBPE.sentencepiece(
            [(piece.text, float(piece.score), int(piece.type)) for piece in spec.pieces],
            spec.byte_fallback,
            spec.unk_surface,
            spec.charsmap,
            spec.add_dummy_prefix,
            spec.remove_extra_whitespaces,
            spec.escape_whitespaces,
            metaspace,
            [(step.kind, step.pattern, step.content, step.literal, step.left, step.right) for step in steps],
        )
        specials = {piece.text: index for index, piece in enumerate(spec.pieces) if piece.type in (2, 3)}
        model = cls.__new__(cls)
        model._setup(core, specials, name, spec)
        return model

    # ----------------------------------------------------------------------------------- encoding

    def encode_with_offsets(
        self,
        text: str,
        *,
        allowed_special: AllowedSpecial = _NOTHING,
        disallowed_special: DisallowedSpecial = "all",
    ) -> tuple[list[int], list[int]]:
        """Like :meth:`encode`, also returning the character offset where each token starts.

        A token that starts inside a multi-byte character is given that character's offset.

        >>> import hf_bpe
        >>> enc = hf_bpe.get_encoding("gpt2")
        >>> enc.encode_with_offsets("hello world")
        ([31373, 995], [0, 5])
        """
        return self._core.encode_with_offsets(text, self._policy(allowed_special, disallowed_special))

    def encode_arrow(
        self,
        texts: Any,
        *,
        num_threads: int | None = None,
        dtype: IdType = "uint32",
        nulls: Nulls = "raise",
        allowed_special: AllowedSpecial = _NOTHING,
        disallowed_special: DisallowedSpecial = "all",
    ) -> Any:
        """Encode a column of strings to a column of id lists, Arrow in and Arrow out.

        ``texts`` is a pyarrow ``string``, ``large_string`` or ``string_view`` array (sliced or not),
        a ``ChunkedArray`` of them (the result is chunked the same way: a ``ChunkedArray``), anything
        else with ``__arrow_c_array__`` or ``__arrow_c_stream__`` (read in place, without a copy), or a
        list of str (converted with ``pyarrow.array`` first). The result is a ``pyarrow.ListArray``
        whose offsets and values were built by the core on ``num_threads`` threads with the GIL
        released; row ``i`` holds ``encode(texts[i])``'s ids, as ``dtype`` (``"uint16"`` halves the
        memory of a vocabulary of at most 65,536 ids and is refused for a larger one; ``"auto"`` takes
        it exactly then, else ``"uint32"``).
        ``nulls``: a null row raises ``ValueError`` (``"raise"``), encodes as ``""`` (``"empty"``) or
        stays null (``"null"``). Lengths are ``pyarrow.compute.list_value_length(ids)``.

        >>> import pyarrow as pa, hf_bpe
        >>> enc = hf_bpe.get_encoding("gpt2")
        >>> ids = enc.encode_arrow(pa.array(["hello world", "", None]), nulls="null")
        >>> ids.to_pylist()
        [[31373, 995], [], None]
        >>> ids.type
        ListType(list<item: uint32 not null>)
        >>> enc.encode_arrow(["hello <|endoftext|>"], allowed_special="all", dtype="uint16").to_pylist()
        [[31373, 220, 50256]]
        >>> enc.encode_arrow(["hi"], dtype="auto").type, hf_bpe.get_encoding("o200k_base").encode_arrow(["hi"], dtype="auto").type
        (ListType(list<item: uint16 not null>), ListType(list<item: uint32 not null>))

        With ``disallowed_special=()`` (and nothing allowed) special tokens are ordinary text, as
        :meth:`encode_ordinary`:

        >>> enc.encode_arrow(pa.chunked_array([["hello"], ["<|endoftext|>", "world"]]), disallowed_special=())[1:].to_pylist()
        [[27, 91, 437, 1659, 5239, 91, 29], [6894]]
        """
        if not allowed_special and not disallowed_special:  # encode_ordinary's path: no policy at all
            policy = None
        else:
            policy = self._policy(allowed_special, disallowed_special)
        id_type = id_type_for(dtype, self.n_vocab - 1)
        return self._core.encode_arrow(_arrow_strings(texts), policy, num_threads, id_type, nulls)

    def encode_iterable(
        self,
        texts: Iterable[str],
        *,
        allowed_special: AllowedSpecial = _NOTHING,
        disallowed_special: DisallowedSpecial = "all",
        max_piece_bytes: int | None = _streaming.DEFAULT_MAX_PIECE_BYTES,
    ) -> Iterator[int]:
        """Encode text that arrives in parts (a file's lines, any iterable of str), yielding the ids
        of ``"".join(texts)`` one by one as they settle, in memory that does not grow with the input.

        The ids are exactly ``encode("".join(texts), ...)``'s, wherever the parts are cut (inside a
        word, a special token, a pair of surrogates). Only text whose pieces later text could still
        change is held back: the last two pieces and the last bytes that could start an allowed
        special token. A disallowed special token raises
        :class:`~hf_bpe.errors.DisallowedSpecialTokenError` when the stream reaches it, after the ids
        before it. Text with no settled piece boundary for ``max_piece_bytes`` bytes (a run of letters
        without spaces, say: BPE needs a piece whole) raises ``ValueError``; ``None`` lifts the limit.

        Needs one of the named split patterns (gpt2, cl100k, o200k), which provably never look
        further ahead; a custom regex may (``a+b|a``), so such models raise ``ValueError``.

        >>> import hf_bpe
        >>> enc = hf_bpe.get_encoding("gpt2")
        >>> list(enc.encode_iterable(["hello wo", "rld<|endoftext|>"], allowed_special="all"))
        [31373, 995, 50256]
        """
        if max_piece_bytes is not None and (
            not isinstance(max_piece_bytes, int) or isinstance(max_piece_bytes, bool) or max_piece_bytes < 1
        ):
            raise ValueError(f"max_piece_bytes must be a positive int or None, got {max_piece_bytes!r}")
        policy = self._policy(allowed_special, disallowed_special)
        if not self._core.can_stream:
            has = "no split pattern" if self._sentencepiece is not None else f"the custom split pattern {self.pattern!r}"
            raise ValueError(
                f"encode_iterable cannot encode a stream of {self!r} exactly: it has {has}, and only the named "
                "patterns (gpt2, cl100k, o200k) are proven to cut text without looking far ahead; encode each "
                "document whole with encode or encode_batch"
            )
        stream = self._core.encode_stream(policy, max_piece_bytes, _streaming.BLOCK_BYTES)
        return _streaming.encode_parts(stream, iter((texts,) if isinstance(texts, str) else texts))

    # ----------------------------------------------------------------------------------- decoding

    def stream_decoder(self, errors: str = "replace") -> _streaming.StreamDecoder:
        """A decoder for ids that arrive one at a time (or in groups), as a model generates them: its
        ``feed(ids)`` returns the text they complete, never part of a character, and ``finish()``
        the rest; joined, exactly ``decode(all ids, errors=errors)``.

        >>> import hf_bpe
        >>> enc = hf_bpe.get_encoding("gpt2")
        >>> decoder = enc.stream_decoder()
        >>> [decoder.feed(token) for token in enc.encode("🦀 crab")], decoder.finish()
        (['', '', '🦀', ' crab'], '')
        """
        return _streaming.StreamDecoder(self._core, errors, each_byte=self._sentencepiece is not None)

    # ------------------------------------------------------------------------------- vocabulary

    @property
    def mergeable_ranks(self) -> dict[bytes, int]:
        """A copy of the ranks: each mergeable token's bytes and id, ordered by id.

        For a merges-list model these are the vocabulary's ids, which are merge ranks only when
        :func:`hf_bpe._rules.rank_rule_difference` is ``None``. SentencePiece models have no ranks (their merges
        follow piece scores over characters) and raise :class:`~hf_bpe.errors.ConversionError`.
        """
        if self._sentencepiece is not None:
            raise ConversionError(
                f"{self!r} is a SentencePiece model: its merges follow piece scores over characters, "
                "not byte ranks; use .sentencepiece for its pieces"
            )
        return self._core.mergeable_ranks()

    @property
    def vocab(self) -> dict[int, bytes]:
        """Every token's bytes by id, special tokens included (their UTF-8 text), ordered by id:
        the ``vocab`` of minbpe and CS336 (see :meth:`from_vocab`).

        >>> import hf_bpe
        >>> vocab = hf_bpe.get_encoding("gpt2").vocab
        >>> len(vocab), vocab[31373], vocab[50256]
        (50257, b'hello', b'<|endoftext|>')
        """
        tokens = {token_id: token for token, token_id in self.mergeable_ranks.items()}
        tokens.update((token_id, text.encode("utf-8")) for text, token_id in self._special_tokens.items())
        return dict(sorted(tokens.items()))

    @property
    def kind(self) -> str:
        """``"ranks"`` (tiktoken), ``"merges"`` (a merges list) or ``"sentencepiece"``."""
        return self._core.kind

    @property
    def merges(self) -> list[tuple[bytes, bytes]]:
        """The merges list in priority order: a merges-list model's own; for a rank model, each
        token's last merge when BPE runs on its bytes with lower ranks only (minbpe's recovery).

        >>> import hf_bpe
        >>> hf_bpe.get_encoding("gpt2").merges[:2]
        [(b' ', b't'), (b' ', b'a')]
        """
        if self._sentencepiece is not None:
            raise ConversionError(f"{self!r} is a SentencePiece model; it merges by piece score, not a list")
        return self._core.merge_list()

    @property
    def sentencepiece(self) -> SentencePieceSpec | None:
        """The pieces and settings of a SentencePiece model, else ``None``."""
        return self._sentencepiece

    @property
    def special_tokens(self) -> dict[str, int]:
        """A copy of the special tokens and their ids."""
        return dict(self._special_tokens)

    @property
    def pattern(self) -> patterns.Pattern:
        """The split regex; a :class:`hf_bpe.patterns.Split` (or a tuple of them) for `tokenizers`'
        Split pre-tokenizers; ``None`` for SentencePiece models, which split nothing."""
        return self._pattern  # type: ignore[return-value]

    # ------------------------------------------------------------------------------ persistence

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the model to one self-describing JSON file (our own format), atomically.

        The file holds ``format``, ``version``, ``name``, ``special_tokens`` and, by kind: for rank
        models ``pattern`` (the regex, or for Split pre-tokenizers a list of ``{"split": regex,
        "behavior": ..., "invert": ..., "literal": ...}`` objects) and ``ranks`` as ``[base64 token bytes, id]`` pairs ordered
        by id; for merges lists also ``"kind": "merges"``, ``merges`` as ``[base64 left, base64
        right]`` pairs in order and ``ignore_merges``; for SentencePiece models ``"kind":
        "sentencepiece"`` and ``sentencepiece`` (pieces as ``[text, score, type]``, the normalizer's
        settings and base64 character map, and `tokenizers`' normalizer steps where the model keeps
        them: such files are version 4).
        """
        return atomic_write(path, json.dumps(self._document(), ensure_ascii=False, indent=0))

    def _document(self) -> dict[str, Any]:
        """The model as a JSON-ready dict (what :meth:`save` writes)."""
        document: dict[str, Any] = {
            "format": MODEL_FORMAT,
            "version": MODEL_FORMAT_VERSION,
            "name": self.name,
            "special_tokens": self._special_tokens,
        }
        spec = self._sentencepiece
        if spec is not None:
            document["kind"] = "sentencepiece"
            document["sentencepiece"] = {
                "pieces": [[piece.text, piece.score, piece.type] for piece in spec.pieces],
                "byte_fallback": spec.byte_fallback,
                "unk_surface": spec.unk_surface,
                "normalizer_name": spec.normalizer_name,
                "charsmap": _b64(spec.charsmap),
                "add_dummy_prefix": spec.add_dummy_prefix,
                "remove_extra_whitespaces": spec.remove_extra_whitespaces,
                "escape_whitespaces": spec.escape_whitespaces,
                "trainer_spec": _b64(spec.trainer_spec),
            }
            if spec.metaspace is not None or spec.metaspace_split:
                document["sentencepiece"] |= {"metaspace": spec.metaspace, "metaspace_split": spec.metaspace_split}
            if spec.tokenizers_normalizer:
                document["version"] = _NORMALIZER_STEPS_FORMAT_VERSION
                document["sentencepiece"]["tokenizers_normalizer"] = [_normalize_document(step)
                                                                      for step in spec.tokenizers_normalizer]
            return document
        if self.kind == "merges":
            document["kind"] = "merges"
        document["pattern"] = _pattern_document(self.pattern)
        document["ranks"] = [[_b64(token), rank] for token, rank in self.mergeable_ranks.items()]
        if self.kind == "merges":
            document["merges"] = [[_b64(left), _b64(right)] for left, right in self.merges]
            document["ignore_merges"] = self._core.ignore_merges
            if any(byte not in NEVER_IN_UTF8 for byte in self._core.missing_bytes):
                document["drop_missing_bytes"] = missing_bytes_rule(self)
        if self._rules:
            document["version"] = _RULES_FORMAT_VERSION
            document["special_token_rules"] = {text: sorted(names) for text, names in special_token_rules(self).items()}
        if document.get("drop_missing_bytes") == "after merging":  # readers of versions 1 and 2 would drop before
            document["version"] = _AFTER_MERGING_FORMAT_VERSION
        if patterns.byte_level_of(self.pattern) is not None:  # readers of versions 1 to 3 do not know the step
            document["version"] = _BYTE_LEVEL_STEP_FORMAT_VERSION
        if self._word_affixes is not None:  # readers of versions 1 to 3 would merge bytes
            document["word_affixes"] = self._word_affixes.document()
            document.pop("drop_missing_bytes", None)
            document["version"] = _AFFIXES_FORMAT_VERSION
        return document

    @classmethod
    def _from_document(cls, document: dict[str, Any]) -> BPE:
        """The inverse of :meth:`_document`; malformed input raises ``KeyError``, ``TypeError`` or
        ``ValueError`` saying what is wrong."""
        kind = document.get("kind", "ranks")
        name = document.get("name")
        if name is not None and not isinstance(name, str):
            raise TypeError(f"name must be a string, got {name!r:.80}")
        if kind == "sentencepiece":
            fields = document["sentencepiece"]
            if not isinstance(fields, dict):
                raise TypeError("sentencepiece must be an object")
            fields = dict(fields)
            pieces = tuple(_piece(index, entry) for index, entry in enumerate(_entries(fields.pop("pieces"), "pieces", 3)))
            fields["charsmap"] = _unb64(fields["charsmap"])
            fields["trainer_spec"] = _unb64(fields["trainer_spec"])
            if "tokenizers_normalizer" in fields:
                steps = fields["tokenizers_normalizer"]
                if not isinstance(steps, list) or not all(isinstance(step, dict) and _is_normalize(step) for step in steps):
                    raise ValueError("sentencepiece.tokenizers_normalizer must be a list of normalizer steps "
                                     "{normalize, pattern, content, literal, left, right}")
                fields["tokenizers_normalizer"] = tuple(_normalize_of(step) for step in steps)
            return cls.from_sentencepiece(SentencePieceSpec(pieces=pieces, **fields), name=name)
        entries = _entries(document["ranks"], "ranks", 2)
        ranks = {_unb64(token): rank for token, rank in entries}
        if len(ranks) != len(entries):
            raise ValueError("a token appears twice in ranks")
        rules = document.get("special_token_rules", {})
        if not isinstance(rules, dict):
            raise TypeError("special_token_rules must be an object")
        if kind == "merges" and "word_affixes" in document:
            merges = [(_unb64(left), _unb64(right)) for left, right in _entries(document["merges"], "merges", 2)]
            model = from_affixed_merges(cls, ranks, merges, _pattern_of(document["pattern"]), document["special_tokens"],
                                        WordAffixes.from_document(document["word_affixes"]),
                                        ignore_merges=bool(document["ignore_merges"]), name=name)
        elif kind == "merges":
            merges = [(_unb64(left), _unb64(right)) for left, right in _entries(document["merges"], "merges", 2)]
            model = cls.from_merges(
                ranks, merges, _pattern_of(document["pattern"]), document["special_tokens"],
                ignore_merges=bool(document["ignore_merges"]),
                drop_missing_bytes=_missing_bytes_setting(document.get("drop_missing_bytes", False)), name=name,
            )
        elif kind == "ranks":
            model = cls(ranks, _pattern_of(document["pattern"]), document["special_tokens"], name=name)
        else:
            raise ValueError(f"unknown model kind {kind!r:.80}")
        return with_special_token_rules(model, rules) if rules else model

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> BPE:
        """Read a model written by :meth:`save`; a malformed file raises
        :class:`~hf_bpe.errors.TokenizerFileError` naming it."""
        document = read_json(path)
        if not isinstance(document, dict) or document.get("format") != MODEL_FORMAT:
            raise TokenizerFileError(path, f"not an hf_bpe model file (no \"format\": \"{MODEL_FORMAT}\")")
        if document.get("version") not in _FORMAT_VERSIONS:
            raise TokenizerFileError(
                path, f"model file version {document.get('version')!r} is not supported (expected 1 to 4)"
            )
        try:
            return cls._from_document(document)
        except (KeyError, TypeError, ValueError, AttributeError, OverflowError) as error:
            raise TokenizerFileError(path, f"invalid model file: {_describe_error(error)}") from None

    def __reduce__(self) -> tuple[Any, ...]:
        if self.kind == "ranks" and not self._rules:
            return (type(self), (self.mergeable_ranks, self.pattern, self._special_tokens, self.name))
        return (_restore, (type(self), self._document()))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, BPE):
            return NotImplemented
        if self.kind != other.kind or self._special_tokens != other._special_tokens or self._rules != other._rules \
                or self._word_affixes != other._word_affixes:
            return False
        if self._sentencepiece is not None:
            return self._sentencepiece == other._sentencepiece
        return (
            self.pattern == other.pattern
            and self.mergeable_ranks == other.mergeable_ranks
            and (self.kind == "ranks" or (self._core.ignore_merges == other._core.ignore_merges
                                          and self._core.dropped_after_merging == other._core.dropped_after_merging
                                          and self.merges == other.merges))
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        name = f"{self.name!r}" if self.name else "unnamed"
        kind = "" if self.kind == "ranks" else f" ({self.kind})"
        return f"<BPE {name}{kind}: {n_ordinary(self)} ordinary tokens, {len(self._special_tokens)} special>"


def as_model(value: object) -> BPE:
    """``value`` as a :class:`BPE`: a model as it is, an :class:`hf_bpe.tiktoken.Encoding` as the model
    it holds (its ``.model``); anything else raises ``TypeError``. Every function that takes a model
    (the converters' ``save``, :meth:`~hf_bpe.BPETokenizer.from_model`, the audit) takes it through this.

    >>> import hf_bpe
    >>> from hf_bpe import tiktoken
    >>> as_model(tiktoken.get_encoding("gpt2")) is hf_bpe.get_encoding("gpt2")
    True
    """
    if isinstance(value, BPE):
        return value
    if isinstance(value, _Encoder):
        return value.model  # type: ignore[attr-defined,no-any-return]
    raise TypeError(f"expected an hf_bpe.BPE model (an hf_bpe.tiktoken.Encoding gives its model as .model), "
                    f"got {type(value).__name__}")


def n_ordinary(model: BPE) -> int:
    """The ids of ``model`` that are neither special tokens nor unassigned (ids between ranks): what
    ``repr`` and ``hf-bpe inspect`` call ordinary tokens. A SentencePiece model's byte, control and
    user-defined pieces count, except those that are its special tokens.

    >>> import hf_bpe
    >>> enc = hf_bpe.get_encoding("gpt2")
    >>> n_ordinary(enc), len(enc.special_tokens), enc.n_vocab
    (50256, 1, 50257)
    """
    if model._sentencepiece is not None:
        return model.n_vocab - len(model._special_tokens)
    return int(model._core.n_mergeable)


def clear_cache(model: BPE) -> None:
    """Empty ``model``'s caches of merged pieces (one per encoding thread, a few MB each), freeing their
    memory. Encoding fills them again as it goes; no result ever depends on them (benchmarks call this
    to time a cold cache).

    >>> import hf_bpe
    >>> enc = hf_bpe.get_encoding("gpt2")
    >>> enc.encode("hello world"); clear_cache(enc); enc.encode("hello world")
    [31373, 995]
    [31373, 995]
    """
    model._core.clear_cache()


def encode_with_spans(
    model: BPE,
    text: str,
    *,
    allowed_special: AllowedSpecial = _NOTHING,
    disallowed_special: DisallowedSpecial = "all",
) -> tuple[list[int], list[tuple[int, int]]]:
    """Like :meth:`BPE.encode_with_offsets`, with the characters each token covers, ``(start, end)``, as
    `tokenizers` gives an encoding's ``offsets`` for the same ``tokenizer.json`` (before a post-processor
    trims them): a token holding part of a character covers all of it; under a normalizer, a token
    covers the characters of the original text its normalized bytes come from (the ``f`` of an NFKC
    ``ﬁ`` covers the ``ﬁ``); a special token covers its match, with the whitespace its ``lstrip`` or
    ``rstrip`` rule takes in. For a model whose symbols carry word affixes, a token covers the characters
    of the symbols merged into it; byte fallback tokens spelling affixes run past their piece, and
    `tokenizers` gives those its own positions in the spelling as they are (read as offsets into the
    whole text). Not for SentencePiece models, whose offsets `tokenizers` computes from its own pieces.

    >>> import hf_bpe
    >>> encode_with_spans(hf_bpe.get_encoding("gpt2"), "héllo world")
    ([71, 2634, 18798, 995], [(0, 1), (1, 2), (2, 5), (5, 11)])
    """
    if model.kind == "sentencepiece":
        raise NotImplementedError(
            f"encode_with_spans is not available for SentencePiece models ({model!r}): the offsets of byte "
            "pieces and of the dummy prefix's \u2581 would differ from tokenizers'; use encode_with_offsets"
        )
    return model._core.encode_with_spans(  # type: ignore[no-any-return]
        text, model._policy(allowed_special, disallowed_special))


def normalized_text(model: BPE, text: str) -> str:
    """``text`` as ``model``'s normalizer steps (:class:`hf_bpe.patterns.Normalize`) leave it before
    splitting; ``text`` itself for a model without them.

    >>> import hf_bpe
    >>> from hf_bpe.patterns import Normalize, Split
    >>> normalized_text(hf_bpe.BPE({bytes([b]): b for b in range(256)}, (Normalize("lowercase"), Split(" "))), "Ab")
    'ab'
    """
    return str(model._core.normalize(text))


def special_token_rules(model: BPE) -> dict[str, frozenset[str]]:
    """The special tokens with `tokenizers`' added-token rules, and their rules (see
    :func:`with_special_token_rules`); empty when none has any."""
    return {text: frozenset(name for name, bit in SPECIAL_TOKEN_RULES.items() if bits & bit)
            for text, bits in model._rules.items()}


def with_special_token_rules(model: BPE, rules: Mapping[str, Iterable[str]]) -> BPE:
    """``model`` with special tokens matched as `tokenizers` matches added tokens with these
    flags (its ``AddedToken`` options; the model's core is shared, not copied):

    - ``"lstrip"`` / ``"rstrip"``: the token's match takes in the whitespace before / after it
      (its id covers that text; lstrip reaches back no further than the previous token);
    - ``"single_word"``: the token matches only with no word character (Unicode ``\\w``) just
      before and after it;
    - ``"normalized"``: the token is looked for only in the text between the other special
      tokens' matches, and as `tokenizers` does, where the model's normalizer changes text (beyond
      ByteLevel's prefix space), spelled as normalized in that text normalized (its span the
      characters its match stands for).

    Rules apply where the token is allowed (``allowed_special``); text given in parts
    (:meth:`BPE.encode_iterable`) cannot be encoded with them. Tokens not named keep none.

    >>> import hf_bpe
    >>> enc = hf_bpe.BPE({bytes([b]): b for b in range(256)}, "gpt2", special_tokens={"<m>": 256})
    >>> stripping = with_special_token_rules(enc, {"<m>": ["lstrip", "rstrip"]})
    >>> stripping.encode_with_offsets("a  <m> b", allowed_special="all"), sorted(special_token_rules(stripping)["<m>"])
    (([97, 256, 98], [0, 1, 7]), ['lstrip', 'rstrip'])
    """
    if model._sentencepiece is not None:
        raise ValueError(f"{model!r} is a SentencePiece model; special-token rules are for byte-level models")
    if not isinstance(rules, Mapping):
        raise TypeError(f"rules must be a mapping of special token to rule names, got {type(rules).__name__}")
    bits: dict[str, int] = {}
    for text, names in rules.items():
        if text not in model._special_tokens:
            raise ValueError(f"{text!r} is not a special token of {model!r}")
        if isinstance(names, str):
            raise TypeError(f"the rules of {text!r} must be a collection of rule names, got the str {names!r}")
        names = set(names)
        unknown = names - SPECIAL_TOKEN_RULES.keys()
        if unknown:
            raise ValueError(f"unknown rules {sorted(unknown)} for {text!r}; the rules are "
                             f"{', '.join(SPECIAL_TOKEN_RULES)}")
        if names:
            bits[text] = sum(SPECIAL_TOKEN_RULES[name] for name in names)
    changed = object.__new__(type(model))  # sharing the core (copy.copy would rebuild it through __reduce__)
    changed.__dict__.update(model.__dict__)
    changed._policies = {}
    changed._rules = bits
    return changed


def missing_bytes(model: BPE) -> bytes:
    """The single bytes ``model``'s vocabulary lacks (only merges-list models, such as those read from
    a ``tokenizer.json`` or a GGUF file, may lack some: see :func:`missing_bytes_rule`).

    >>> import hf_bpe
    >>> missing_bytes(hf_bpe.get_encoding("gpt2"))
    b''
    """
    return bytes(model._core.missing_bytes)


def missing_bytes_rule(model: BPE) -> MissingBytes:
    """When ``model`` drops the single bytes its vocabulary lacks (:func:`missing_bytes`) from text:
    ``"before merging"`` (`tokenizers`, the rule of every model that lacks none) or ``"after merging"``
    (llama.cpp; see :meth:`BPE.from_merges`).

    >>> import hf_bpe
    >>> missing_bytes_rule(hf_bpe.get_encoding("gpt2"))
    'before merging'
    """
    return "after merging" if model._core.dropped_after_merging else "before merging"


def _missing_bytes_setting(value: Any) -> bool | MissingBytes:
    """A model file's ``drop_missing_bytes``: a bool or one of :data:`MISSING_BYTES_RULES`."""
    if isinstance(value, bool) or value in MISSING_BYTES_RULES:
        return value  # type: ignore[no-any-return]
    raise ValueError(f"drop_missing_bytes must be a bool or one of {MISSING_BYTES_RULES}, got {value!r:.80}")


def id_type_for(dtype: str, largest_id: int) -> str:
    """``dtype`` with ``"auto"`` resolved for ids up to ``largest_id``: ``"uint16"`` when they all fit
    it, else ``"uint32"``; any other name as it is.

    >>> id_type_for("auto", 50_256), id_type_for("auto", 100_276), id_type_for("int64", 5)
    ('uint16', 'uint32', 'int64')
    """
    if dtype != "auto":
        return dtype
    return "uint16" if largest_id < 1 << 16 else "uint32"


def _arrow_strings(texts: Any) -> Any:
    """``texts`` as the core's Arrow reader takes it: Arrow objects as they are, a list of str as a
    pyarrow ``large_string`` array (which holds more than 2 GB)."""
    if hasattr(texts, "__arrow_c_array__") or hasattr(texts, "__arrow_c_stream__"):
        return texts
    if isinstance(texts, (str, bytes)):
        raise TypeError("encode_arrow expects a column of strings (an Arrow array or a list of str), got a single "
                        f"{type(texts).__name__}; wrap it in a list")
    import pyarrow as pa  # type: ignore[import-untyped]

    try:
        return pa.array(texts if isinstance(texts, (list, tuple)) else list(texts), type=pa.large_string())
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError) as error:
        raise TypeError(f"encode_arrow expects an Arrow array of strings or a list of str: {error}") from None


def _describe_error(error: Exception) -> str:
    """An error's message, with what it is when the message alone says too little (a ``KeyError``
    is just the missing key)."""
    if isinstance(error, KeyError):
        return f"missing {error}"
    return str(error)


def _entries(value: Any, key: str, size: int) -> list[list[Any]]:
    """``value`` checked to be a list of ``size``-element lists (as :meth:`BPE.save` writes them)."""
    if not isinstance(value, list):
        raise TypeError(f"{key} must be a list, got {type(value).__name__}")
    for index, entry in enumerate(value):
        if not isinstance(entry, list) or len(entry) != size:
            raise ValueError(f"{key}[{index}] must be a list of {size} items, got {entry!r:.80}")
    return value


def _piece(index: int, entry: list[Any]) -> Piece:
    """A SentencePiece piece from ``[text, score, type]``."""
    text, score, kind = entry
    if (not isinstance(text, str) or isinstance(score, bool) or not isinstance(score, (int, float))
            or isinstance(kind, bool) or not isinstance(kind, int)):
        raise TypeError(f"pieces[{index}] must be [text, score, type], got {entry!r:.80}")
    return Piece(text, float(score), kind)


def _pattern_document(pattern: patterns.Pattern) -> str | list[dict[str, Any]]:
    """A pattern as the model file holds it: the regex, or one object per Split (and Normalize and
    ByteLevel) step."""
    if isinstance(pattern, str):
        return pattern
    steps = (pattern,) if isinstance(pattern, patterns.Split) else pattern
    return [_step_document(step) for step in steps]


def _step_document(step: patterns.Step) -> dict[str, Any]:
    if isinstance(step, patterns.Split):
        return {"split": step.pattern, "behavior": step.behavior, "invert": step.invert, "literal": step.literal}
    if isinstance(step, patterns.ByteLevel):
        return {"byte_level": True, "add_prefix_space": step.add_prefix_space, "use_regex": step.use_regex}
    return _normalize_document(step)


def _normalize_document(step: patterns.Normalize) -> dict[str, Any]:
    return {"normalize": step.kind, "pattern": step.pattern, "content": step.content, "literal": step.literal,
            "left": step.left, "right": step.right}


def _is_normalize(step: dict[str, Any]) -> bool:
    return set(step) == {"normalize", "pattern", "content", "literal", "left", "right"}


def _normalize_of(step: dict[str, Any]) -> patterns.Normalize:
    """The inverse of :func:`_normalize_document`."""
    return patterns.Normalize(step["normalize"], step["pattern"], step["content"], step["literal"], step["left"],
                              step["right"])


def _pattern_of(value: Any) -> patterns.Pattern:
    """The inverse of :func:`_pattern_document`; a malformed value raises ``TypeError`` or ``ValueError``."""
    if isinstance(value, str):
        return value
    if not isinstance(value, list) or not value:
        raise TypeError(f"pattern must be a regex string or a non-empty list of Split steps, got {value!r:.80}")
    steps: list[patterns.Step] = []
    for index, step in enumerate(value):
        if isinstance(step, dict) and _is_normalize(step):
            steps.append(_normalize_of(step))
            continue
        if isinstance(step, dict) and set(step) == {"byte_level", "add_prefix_space", "use_regex"} \
                and step["byte_level"] is True:
            steps.append(patterns.ByteLevel(step["add_prefix_space"], step["use_regex"]))
            continue
        if not isinstance(step, dict) or set(step) != {"split", "behavior", "invert", "literal"}:
            raise ValueError(f"pattern[{index}] must be {{split, behavior, invert, literal}}, got {step!r:.80}")
        steps.append(patterns.Split(step["split"], step["behavior"], step["invert"], step["literal"]))
    return patterns.resolve(steps)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.b64decode(text, validate=True)


def _restore(cls: type[BPE], document: dict[str, Any]) -> BPE:
    """Unpickle a model of any kind from its :meth:`BPE._document`."""
    return cls._from_document(document)


def recognized_split(pattern: patterns.Pattern) -> patterns.Pattern | None:
    """The rule of the hand-written scanner that splits as ``pattern`` does by its meaning (another
    spelling of a model family's split, e.g. Qwen 2's regex with possessive quantifiers), which then
    runs on that scanner; ``None`` when no scanner does. Only a candidate: the caller must confirm it
    cuts probe texts as the engine of ``pattern`` does.

    >>> recognized_split(r"\\w+|\\s+") is None
    True
    """
    found = _core.recognized_split(patterns.to_core(pattern))
    return None if found is None else patterns.from_core(found)
