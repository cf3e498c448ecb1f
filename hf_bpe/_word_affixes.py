"""Merges-list models whose symbols carry word affixes: `tokenizers`' BPE with
``continuing_subword_prefix`` and/or ``end_of_word_suffix`` (CLIP's ``</w>``, WordPiece-style ``##``).

Each byte of a piece is a symbol: its character of the byte-level alphabet, with the prefix unless it
is the first, with the suffix if it is the last, looked up in the vocabulary. A symbol the vocabulary
lacks becomes, with ``byte_fallback``, the ``<0xXX>`` tokens of its UTF-8 bytes (affixes included) when
the vocabulary has them all; else ``unk_token`` (a run of them one, with ``fuse_unk``, which a byte
fallback between them does not end, placing the unknown token after it, as `tokenizers` does), or it is
left out when there is none.
A merge ``(a, b)`` makes ``a + b`` without the prefix's length in bytes (as `tokenizers` cuts it,
whatever ``b`` starts with); the merge of lowest line applies first, leftmost on ties; with
``ignore_merges`` a piece that is a token is emitted whole, undecorated. Token bytes are their
spelling in the alphabet, affixes included, which is what `tokenizers`' ``ByteLevel`` decoder gives.
The core runs these models on a path of their own (``hf_bpe_core::affix``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from hf_bpe import patterns
from hf_bpe._byte_level import token_to_str, try_str_to_token
from hf_bpe.errors import InvalidVocabularyError

if TYPE_CHECKING:
    from hf_bpe.model import BPE

__all__ = ["WordAffixes", "from_affixed_merges", "word_affixes"]


@dataclass(frozen=True)
class WordAffixes:
    """The settings of a ``tokenizer.json`` BPE model that decorate its symbols, as the file spells
    them (``None`` and ``""`` stay apart, so a model writes back the file it came from)."""

    continuing_subword_prefix: str | None = None
    end_of_word_suffix: str | None = None
    unk_token: str | None = None
    fuse_unk: bool = False
    byte_fallback: bool = False

    def document(self) -> dict[str, Any]:
        """The settings as a JSON object (the model file's ``word_affixes``; ``byte_fallback`` only when set)."""
        document = {"continuing_subword_prefix": self.continuing_subword_prefix,
                    "end_of_word_suffix": self.end_of_word_suffix, "unk_token": self.unk_token, "fuse_unk": self.fuse_unk}
        return document | ({"byte_fallback": True} if self.byte_fallback else {})

    @classmethod
    def from_document(cls, value: Any) -> WordAffixes:
        """The inverse of :meth:`document`; ``TypeError`` naming a field of the wrong type."""
        if not isinstance(value, dict):
            raise TypeError("word_affixes must be an object")
        for key in ("continuing_subword_prefix", "end_of_word_suffix", "unk_token"):
            if not isinstance(value.get(key), str | None):
                raise TypeError(f"word_affixes.{key} must be a string or null")
        for key in ("fuse_unk", "byte_fallback"):
            if not isinstance(value.get(key, False), bool):
                raise TypeError(f"word_affixes.{key} must be true or false")
        return cls(value.get("continuing_subword_prefix"), value.get("end_of_word_suffix"), value.get("unk_token"),
                   value.get("fuse_unk", False), value.get("byte_fallback", False))


def word_affixes(model: object) -> WordAffixes | None:
    """The word affixes of a model, or ``None`` for a model without them."""
    return getattr(model, "_word_affixes", None)


def _affix_bytes(value: str | None, name: str) -> bytes:
    if value is None:
        return b""
    spelled = try_str_to_token(value)
    if spelled is None:
        raise InvalidVocabularyError(
            f"{name} = {value!r} has characters outside the byte-level alphabet; hf_bpe reads affixes spelled in it"
        )
    return spelled


def from_affixed_merges(cls: type[BPE], vocab: Mapping[bytes, int], merges: Iterable[tuple[bytes, bytes]],
                        pattern: str | patterns.Split | Sequence[patterns.Step], special_tokens: Mapping[str, int],
                        affixes: WordAffixes, *, ignore_merges: bool, name: str | None) -> BPE:
    """A model of ``cls`` (:class:`hf_bpe.BPE`) whose symbols carry ``affixes``: ``vocab`` maps token bytes
    (spelled in the byte-level alphabet, affixes included) to ids; ``merges`` lists pairs of tokens.
    Raises :class:`~hf_bpe.errors.InvalidVocabularyError` naming a merge that makes no token, an unknown
    token the vocabulary lacks, or an affix outside the alphabet.

    >>> import hf_bpe
    >>> vocab = {bytes([b]): b for b in range(256)} | {b"a</w>": 256, b"b</w>": 257, b"ab</w>": 258}
    >>> affixes = WordAffixes(end_of_word_suffix="</w>")
    >>> model = from_affixed_merges(hf_bpe.BPE, vocab, [(b"a", b"b</w>")], "gpt2", {}, affixes,
    ...                             ignore_merges=False, name=None)
    >>> model.encode("ab a ba"), model.decode(model.encode("ab a"))
    ([258, 32, 256, 32, 98, 256], 'ab</w> a</w>')
    """
    vocab = dict(vocab)
    prefix = _affix_bytes(affixes.continuing_subword_prefix, "continuing_subword_prefix")
    suffix = _affix_bytes(affixes.end_of_word_suffix, "end_of_word_suffix")
    # alone, first, inside, last (the core's places)
    decorations = ((b"", suffix), (b"", b""), (prefix, b""), (prefix, suffix))
    symbols = [[vocab.get(before + bytes([byte]) + after) for byte in range(256)] for before, after in decorations]
    cut = len((affixes.continuing_subword_prefix or "").encode())
    spelled = {token_to_str(token).encode(): token_id for token, token_id in vocab.items()}
    triples = []
    for line, pair in enumerate(merges):
        try:
            left, right = pair
            left_id, right_id = vocab[left], vocab[right]
        except (KeyError, TypeError, ValueError):
            raise InvalidVocabularyError(f"merge {line} ({pair!r:.80}) must be a pair of tokens of the vocabulary") from None
        right_spelled = token_to_str(right).encode()
        merged = spelled.get(token_to_str(left).encode() + right_spelled[cut:]) if len(right_spelled) >= cut else None
        if merged is None:
            raise InvalidVocabularyError(
                f"merge {line} ({token_to_str(left)!r} + {token_to_str(right)!r}) makes no token of the vocabulary: "
                f"tokenizers joins them into the left token and the right one without the first {cut} bytes of "
                "continuing_subword_prefix"
            )
        triples.append((left_id, right_id, merged))
    unknown = None
    if affixes.unk_token is not None:
        unknown = spelled.get(affixes.unk_token.encode())
        if unknown is None:
            raise InvalidVocabularyError(
                f"unk_token {affixes.unk_token!r} is not a token of the vocabulary (spelled in the byte-level "
                "alphabet): tokenizers fails on text with unknown symbols"
            )
    fallback = _byte_fallback(vocab, affixes) if affixes.byte_fallback else None
    return cls._from_affixed_rule(vocab, symbols, triples, unknown, fallback, affixes, pattern, special_tokens,
                                  ignore_merges=ignore_merges, name=name)


def _byte_fallback(vocab: Mapping[bytes, int], affixes: WordAffixes) -> list[list[list[int]]]:
    """For each place of a byte in its piece (alone, first, inside, last) and each byte, the ids of the
    ``<0xXX>`` tokens of the UTF-8 bytes of its symbol as `tokenizers` spells it (its character with the
    affixes), or an empty list when the vocabulary lacks one of them."""
    prefix, suffix = affixes.continuing_subword_prefix or "", affixes.end_of_word_suffix or ""
    byte_tokens = [vocab.get(f"<0x{byte:02X}>".encode()) for byte in range(256)]

    def spelled(symbol: str) -> list[int]:
        ids = [byte_tokens[byte] for byte in symbol.encode()]
        return [token_id for token_id in ids if token_id is not None] if None not in ids else []

    return [[spelled(before + token_to_str(bytes([byte])) + after) for byte in range(256)]
            for before, after in (("", suffix), ("", ""), (prefix, ""), (prefix, suffix))]
