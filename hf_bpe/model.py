"""The BPE model: ranks, a split pattern and special tokens, with tiktoken's encode/decode API."""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Collection, Iterable, Mapping, Sequence
from pathlib import Path
from typing import AbstractSet, Any, Literal

from hf_bpe import _core, patterns
from hf_bpe._io import atomic_write
from hf_bpe.errors import TokenizerFileError, UnknownTokenError

AllowedSpecial = Literal["all"] | AbstractSet[str]
DisallowedSpecial = Literal["all"] | Collection[str]

_NOTHING: frozenset[str] = frozenset()

MODEL_FORMAT = "hf_bpe"
MODEL_FORMAT_VERSION = 1


class BPE:
    """A byte-level BPE model with tiktoken's semantics.

    ``ranks`` maps each mergeable token's bytes to its id, which is also its merge rank (lower
    merges first); all 256 single bytes must be tokens. ``pattern`` is the split regex or a name from
    :mod:`hf_bpe.patterns`. ``special_tokens`` maps special-token text to ids outside the ranks.
    Ids may have holes.

    >>> import hf_bpe
    >>> enc = hf_bpe.BPE({bytes([b]): b for b in range(256)} | {b"ab": 256}, "gpt2",
    ...                  special_tokens={"<|end|>": 257})
    >>> enc.encode("abc<|end|>", allowed_special="all")
    [256, 99, 257]
    """

    def __init__(
        self,
        ranks: Mapping[bytes, int],
        pattern: str,
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
        regex = patterns.resolve(pattern)
        specials = dict(special_tokens)
        self._core = _core.CoreBPE(ranks if isinstance(ranks, dict) else dict(ranks), regex, specials)
        self._special_tokens = specials
        self._special_tokens_set = frozenset(specials)
        self.name = name
        self._default_policy = self._core.special_policy([], list(specials))
        self._policies: dict[tuple[frozenset[str], frozenset[str]], Any] = {}

    # ----------------------------------------------------------------------------------- encoding

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

    # ----------------------------------------------------------------------------------- decoding

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

    # ------------------------------------------------------------------------------- vocabulary

    def token_byte_values(self) -> list[bytes]:
        """Every mergeable token's bytes, sorted.

        >>> import hf_bpe
        >>> len(hf_bpe.get_encoding("gpt2").token_byte_values())
        50256
        """
        return self._core.token_byte_values()

    @property
    def mergeable_ranks(self) -> dict[bytes, int]:
        """A copy of the ranks: each mergeable token's bytes and id, ordered by id."""
        return self._core.mergeable_ranks()

    @property
    def n_vocab(self) -> int:
        """One more than the largest id, special tokens included (ids may have holes)."""
        return self._core.n_vocab

    @property
    def max_token_value(self) -> int:
        return self._core.n_vocab - 1

    @property
    def special_tokens(self) -> dict[str, int]:
        """A copy of the special tokens and their ids."""
        return dict(self._special_tokens)

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

    @property
    def pattern(self) -> str:
        """The split regex."""
        return self._core.pattern

    # ------------------------------------------------------------------------------ persistence

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the model to one self-describing JSON file (our own format), atomically.

        The file holds ``format``, ``version``, ``name``, ``pattern`` (the regex),
        ``special_tokens`` and ``ranks`` as ``[base64 token bytes, id]`` pairs ordered by id.
        """
        document = {
            "format": MODEL_FORMAT,
            "version": MODEL_FORMAT_VERSION,
            "name": self.name,
            "pattern": self.pattern,
            "special_tokens": self._special_tokens,
            "ranks": [[base64.b64encode(token).decode("ascii"), rank] for token, rank in self.mergeable_ranks.items()],
        }
        return atomic_write(path, json.dumps(document, ensure_ascii=False, indent=0))

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> BPE:
        """Read a model written by :meth:`save`; a malformed file raises
        :class:`~hf_bpe.errors.TokenizerFileError` naming it."""
        try:
            document = json.loads(Path(path).read_text(encoding="utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as error:
            raise TokenizerFileError(path, f"not an hf_bpe model file: {error}") from None
        if not isinstance(document, dict) or document.get("format") != MODEL_FORMAT:
            raise TokenizerFileError(path, f"not an hf_bpe model file (no \"format\": \"{MODEL_FORMAT}\")")
        if document.get("version") != MODEL_FORMAT_VERSION:
            raise TokenizerFileError(
                path, f"model file version {document.get('version')!r} is not supported (expected 1)"
            )
        try:
            ranks = {base64.b64decode(token, validate=True): rank for token, rank in document["ranks"]}
            if len(ranks) != len(document["ranks"]):
                raise ValueError("a token appears twice in ranks")
            return cls(ranks, document["pattern"], document["special_tokens"], name=document.get("name"))
        except (KeyError, TypeError, ValueError) as error:
            raise TokenizerFileError(path, f"invalid model file: {error}") from None

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.mergeable_ranks, self.pattern, self._special_tokens, self.name))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, BPE):
            return NotImplemented
        return (
            self.pattern == other.pattern
            and self._special_tokens == other._special_tokens
            and self.mergeable_ranks == other.mergeable_ranks
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        name = f"{self.name!r}" if self.name else "unnamed"
        return f"<BPE {name}: {self._core.n_mergeable} tokens, {len(self._special_tokens)} special>"

    # ---------------------------------------------------------------------------------- helpers

    def _policy(self, allowed_special: AllowedSpecial, disallowed_special: DisallowedSpecial) -> Any:
        """The core's special-token policy for these arguments (cached)."""
        if allowed_special is _NOTHING and disallowed_special == "all":
            return self._default_policy
        if allowed_special == "all":
            allowed = self._special_tokens_set
        elif isinstance(allowed_special, (str, bytes)) or not isinstance(allowed_special, Collection):
            raise TypeError(f'allowed_special must be "all" or a set of str, got {allowed_special!r}')
        else:
            allowed = frozenset(allowed_special)
            unknown = allowed - self._special_tokens_set
            if unknown:
                raise ValueError(
                    f"allowed_special names {sorted(unknown)!r}, which are not special tokens of this "
                    f"encoding; its special tokens are {sorted(self._special_tokens_set)!r}"
                )
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
            policy = self._policies[key] = self._core.special_policy(list(allowed), list(disallowed))
        return policy
