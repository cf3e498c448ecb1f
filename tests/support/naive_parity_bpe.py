"""Parity-aware BPE, naive and readable, for the tests: the rule of ``tokenizers.trainers.ParityBpeTrainer``
(``tokenizers`` 0.23.3; Foroutan, Meister et al., arXiv 2508.04796), written from its Rust source
(``tokenizers/src/models/bpe/parity_trainer.rs``) and independent of hf_bpe and of ``tokenizers``.
``tests/test_naive_parity_bpe.py`` proves it equal to the trainer itself.

Pre-tokenization (:func:`parity_pieces`)
    Each training or dev text (one item of a language's iterator) is cut by a split pattern with the
    ``regex`` module into pieces (what a match leaves between matches is a piece too, as ``Split(...,
    "isolated")``; empty pieces are dropped), and each piece becomes its UTF-8 bytes. Special tokens in
    the text are ordinary text: the trainer does not cut them out. On ``tokenizers``' side this is
    ``ByteLevel(add_prefix_space=False)`` (its built-in GPT-2 regex) or ``Sequence([Split(Regex(pattern),
    "isolated"), ByteLevel(add_prefix_space=False, use_regex=False)])``, no normalizer. The trainer works
    on ByteLevel strings, one character per byte, so every length below is in bytes.

The merge loop (:func:`naive_parity_train`), given per-language piece counts (and dev piece counts)
    1. **Vocabulary start.** Ids: the special tokens first, in the order given (repeats dropped); then the
       alphabet, every byte that occurs in any training *or dev* piece, plus ``initial_alphabet``, ordered
       by its ByteLevel character (:data:`BYTE_LEVEL`; not by byte value); a byte whose character equals a
       special token's content keeps the special token's id. Then each merge's new token takes the next id,
       unless its ByteLevel string is already in the vocabulary (the same bytes reached twice, or a special
       token's content), when the merge reuses that id.
    2. **Number of merges.** ``num_merges`` merges, or with ``total_symbols`` ``num_merges`` minus the size
       of the starting vocabulary (special tokens + alphabet), at least 0. A merge whose token already
       exists still counts as a merge. Fewer when every language is exhausted (or the global phase runs
       out, step 5).
    3. **Pair counts.** Each language counts the adjacent pairs of its own training pieces, weighted by
       the piece counts. A merge is applied to the pieces of *every* language (and to every dev piece):
       left to right, non-overlapping. ``max_token_length = m`` makes a pair count only when its merged
       length is below ``m`` (``len(left) + len(right) < m``, strictly, so no token of exactly ``m``
       bytes is ever learned), except that pairs of two single bytes always count.
    4. **Best pair.** The selected counts' pair with the greatest ``(count, key(left), key(right))``
       where ``key(token)`` is its ByteLevel string (:func:`byte_level_key`): ties go to the
       lexicographically greatest pair compared by ByteLevel characters, a *permuted* byte order
       (``" "`` is ``"Ġ"``, U+0120, above ``"z"``), not hf_bpe's raw byte order (DESIGN.md §3).
    5. **Global phase.** The first ``global_merges`` merges take the best pair of the counts summed over
       all languages; when no pair is left, or the best count is below ``min_frequency``, training stops
       (all of it, even before ``global_merges``).
    6. **Parity phase.** Every later merge first selects a language, then takes that language's best
       pair. When the language has no pair, or its best count is below ``min_frequency``, it is marked
       *exhausted*, no merge is made, and the next iteration selects again; training stops when every
       language is exhausted. The selection reads one number per language:

       - ``dev`` given (even empty corpora; it takes precedence over ``ratio``): the *dev length*, the
         number of tokens of the language's dev pieces (each piece's token count times its count) after
         the merges so far. Higher is worse.
       - ``ratio`` given and no dev: the *adjusted compression* ``(L0 / L) / ratio[lang]``, with ``L0``
         and ``L`` the token counts of the language's *training* pieces before any merge and now, in
         floating point. Lower is worse.
       - neither: the training token count ``L``. Higher is worse.

       ``variant="base"`` selects the worst non-exhausted language, ties to the lowest index (in ratio
       mode a NaN, from a language with no training pieces, is never worst; when no language qualifies
       the selection is language 0, even when exhausted). ``variant="window"`` keeps a window of the last
       ``window_size`` selections (of the parity phase only, including selections of a language that
       then turns out exhausted) and a threshold ``alpha / number of languages``: exhausted languages
       rank last (-inf); from the worst language down (ties to the lowest index), the first whose share
       of the window, ``count / window_size``, is at most the threshold is selected; when every language
       is over it, the last one tried is; then the selection joins the window (the oldest leaves it).
       The window's scan starts from language 0 when no remaining language ranks above -inf.

The oracle's own loop never ends in two corners, where this reference raises :class:`OracleLoopsForever`
instead: ``variant="base"`` with ratios when every non-exhausted language has no training pieces (its
NaN is never selected and the exhausted language 0 is selected again and again), and
``variant="window"`` when language 0 is over the threshold and every language not yet tried ranks -inf
(exhausted or NaN: the scan finds language 0 again and again).

Not covered (the oracle's result depends on hash order there): ``limit_alphabet`` with tied character
counts, ``continuing_subword_prefix`` and ``end_of_word_suffix`` (ids of the affixed characters follow
the order of a hash map), normalizers.

``tokenizers`` stores the merges in a map from pair to rank, so a pair merged twice (possible only when
a merge reuses an existing token, which can form the pair again) keeps its last rank in the saved
``tokenizer.json``: :func:`saved_merges`.

>>> english = parity_pieces(["the new lower newest"])
>>> hindi = parity_pieces(["कम कम कम"])
>>> result = naive_parity_train([english, hindi], 5, dev=[english, hindi])
>>> [left + right for left, right in result.merges], result.languages
([b' n', b'\\xe0\\xa4', b' ne', b' new', b' newe'], [0, 1, 0, 0, 0])
"""

from __future__ import annotations

import itertools
from collections import Counter, deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import regex
from naive_bpe import merge_word

BYTE_LEVEL: list[str] = []
"""GPT-2's byte-to-character map (``tokenizers``' ByteLevel alphabet): printable bytes stand for
themselves, the 68 others take U+0100 and up in byte order."""
_next = 0x100
for _byte in range(256):
    if 0x21 <= _byte <= 0x7E or 0xA1 <= _byte <= 0xAC or 0xAE <= _byte <= 0xFF:
        BYTE_LEVEL.append(chr(_byte))
    else:
        BYTE_LEVEL.append(chr(_next))
        _next += 1
BYTES_OF_CHAR = {char: byte for byte, char in enumerate(BYTE_LEVEL)}

GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
"""The regex of ``tokenizers``' ``ByteLevel(use_regex=True)``."""

CL100K_STYLE_PATTERN = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"""
                        r"""| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+""")
"""cl100k's pattern as Hugging Face ``tokenizer.json`` files write it (no possessive quantifiers), read
alike by Oniguruma and the ``regex`` module."""


class OracleLoopsForever(RuntimeError):
    """``ParityBpeTrainer`` would never return on these inputs (see the module's docstring)."""


def byte_level_key(token: bytes) -> str:
    """A token's ByteLevel string: the order of the oracle's ties."""
    return "".join(BYTE_LEVEL[byte] for byte in token)


def from_byte_level(text: str) -> bytes:
    """The bytes of a ByteLevel string (a merge side or vocabulary entry of the trained tokenizer)."""
    return bytes(BYTES_OF_CHAR[char] for char in text)


def parity_pieces(texts: Iterable[str], pattern: str = GPT2_PATTERN) -> Counter[bytes]:
    """How often each piece occurs: each text split by ``pattern`` (isolated: gaps between matches are
    pieces too), empty pieces dropped, pieces as UTF-8 bytes. Special tokens are not cut out."""
    compiled = regex.compile(pattern)
    pieces: Counter[bytes] = Counter()
    for text in texts:
        start = 0
        for match in compiled.finditer(text):
            for piece in (text[start:match.start()], match.group()):
                if piece:
                    pieces[piece.encode("utf-8")] += 1
            start = match.end()
        if text[start:]:
            pieces[text[start:].encode("utf-8")] += 1
    return pieces


@dataclass
class ParityResult:
    """What :func:`naive_parity_train` learned."""

    merges: list[tuple[bytes, bytes]]
    """Every merge in order, as (left bytes, right bytes); a pair may recur (see :func:`saved_merges`)."""
    vocab: dict[str, int]
    """The trained tokenizer's vocabulary: ByteLevel strings and special tokens' contents -> ids."""
    languages: list[int | None]
    """Which language selected each merge (None: the global phase)."""


Word = tuple[bytes, ...]


def _merge_word(word: Word, pair: tuple[bytes, bytes]) -> Word:
    return word if pair[0] not in word else merge_word(word, pair)


def _merge_all(words: dict[Word, int], pair: tuple[bytes, bytes]) -> dict[Word, int]:
    merged: Counter[Word] = Counter()
    for word, count in words.items():
        merged[_merge_word(word, pair)] += count
    return dict(merged)


def _pair_counts(words: dict[Word, int], max_token_length: int | None) -> Counter[tuple[bytes, bytes]]:
    counts: Counter[tuple[bytes, bytes]] = Counter()
    for word, count in words.items():
        for left, right in itertools.pairwise(word):
            length = len(left) + len(right)
            if max_token_length is None or length < max_token_length or length == 2:
                counts[left, right] += count
    return counts


def _best(counts: Counter[tuple[bytes, bytes]]) -> tuple[tuple[bytes, bytes], int] | None:
    top = max(counts.values(), default=0)
    if top <= 0:
        return None
    tied = [pair for pair, count in counts.items() if count == top]
    return max(tied, key=lambda pair: (byte_level_key(pair[0]), byte_level_key(pair[1]))), top


def _length(words: dict[Word, int]) -> int:
    return sum(len(word) * count for word, count in words.items())


def _worst(values: list[float]) -> int:
    """The first language of the highest value (exhausted at -inf, NaN never), language 0 when none."""
    best, best_value = 0, float("-inf")
    for index, value in enumerate(values):
        if value > best_value:
            best, best_value = index, value
    return best


def _window_select(values: list[float], window: deque[int], window_size: int, threshold: float) -> int:
    """The moving-window choice: from the highest value down, the first language whose share of the
    window is at most ``threshold`` (``values``: higher is worse, exhausted languages at -inf)."""
    tried = [False] * len(values)
    while True:
        best = _worst([float("-inf") if tried[i] else value for i, value in enumerate(values)])
        if window.count(best) / window_size <= threshold:
            return best
        if tried[best]:
            raise OracleLoopsForever("window variant: language 0 is over the threshold and every language "
                                     "not yet tried ranks -inf (exhausted, or no training pieces with ratios)")
        tried[best] = True
        if all(tried):
            return best


def naive_parity_train(
    languages: Sequence[Counter[bytes]],
    num_merges: int,
    *,
    dev: Sequence[Counter[bytes]] | None = None,
    ratio: Sequence[float] | None = None,
    variant: str = "base",
    global_merges: int = 0,
    window_size: int = 100,
    alpha: float = 2.0,
    min_frequency: int = 0,
    max_token_length: int | None = None,
    total_symbols: bool = False,
    special_tokens: Sequence[str] = (),
    initial_alphabet: Iterable[int] = (),
) -> ParityResult:
    """``ParityBpeTrainer``'s merges and vocabulary on these piece counts (see the module's docstring)."""
    if variant not in ("base", "window"):
        raise ValueError(f"variant must be 'base' or 'window', got {variant!r}")
    n = len(languages)
    if dev is not None:
        ratio = None  # a dev set takes precedence
    words = [{tuple(bytes([b]) for b in piece): count for piece, count in pieces.items()} for pieces in languages]
    dev_words = [{tuple(bytes([b]) for b in piece): count for piece, count in pieces.items()}
                 for pieces in (dev or [])]

    vocab: dict[str, int] = {}
    for token in special_tokens:
        vocab.setdefault(token, len(vocab))
    alphabet = {byte for pieces in [*languages, *(dev or [])] for piece in pieces for byte in piece}
    for char in sorted(BYTE_LEVEL[byte] for byte in alphabet | set(initial_alphabet)):
        vocab.setdefault(char, len(vocab))
    target = max(0, num_merges - len(vocab)) if total_symbols else num_merges

    initial_lengths = [_length(w) for w in words]
    threshold = alpha / n
    window: deque[int] = deque(maxlen=window_size)
    exhausted: set[int] = set()
    merges: list[tuple[bytes, bytes]] = []
    chosen_by: list[int | None] = []
    idle = 0  # parity-phase selections in a row that made no merge
    while len(merges) < target and len(exhausted) < n:
        if len(merges) < global_merges:
            language: int | None = None
            counts = sum((_pair_counts(w, max_token_length) for w in words), Counter())
        else:
            if dev is not None:
                values = [float(_length(w)) for w in dev_words]
            elif ratio is not None:
                values = [-((initial / current if current else float("nan")) / r)
                          for initial, current, r in zip(initial_lengths, map(_length, words), ratio)]
            else:
                values = [float(_length(w)) for w in words]
            values = [float("-inf") if i in exhausted else value for i, value in enumerate(values)]
            if variant == "base":
                language = _worst(values)
            else:
                language = _window_select(values, window, window_size, threshold)
                window.append(language)
            counts = _pair_counts(words[language], max_token_length)
        found = _best(counts)
        if found is None or found[1] < min_frequency:
            if language is None:
                break
            if variant == "base" and language in exhausted:
                raise OracleLoopsForever("base variant with ratios: every language not exhausted has no "
                                         "training pieces, so the exhausted language 0 is selected forever")
            exhausted.add(language)
            idle += 1
            if idle > window_size + n + 1:
                raise OracleLoopsForever("window variant: only exhausted languages are selected")
            continue
        idle = 0
        pair = found[0]
        merges.append(pair)
        chosen_by.append(language)
        vocab.setdefault(byte_level_key(pair[0] + pair[1]), len(vocab))
        words = [_merge_all(w, pair) for w in words]
        dev_words = [_merge_all(w, pair) for w in dev_words]
    return ParityResult(merges, vocab, chosen_by)


def saved_merges(merges: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """The merges as the trained ``tokenizer.json`` lists them: a pair merged more than once appears
    once, at its last rank."""
    last = {pair: rank for rank, pair in enumerate(merges)}
    return [pair for rank, pair in enumerate(merges) if last[pair] == rank]


def tokenizers_pre_tokenizer(pattern: str) -> Any:
    """`tokenizers`' side of :func:`parity_pieces` with ``pattern``."""
    from tokenizers import Regex, pre_tokenizers

    if pattern == GPT2_PATTERN:
        return pre_tokenizers.ByteLevel(add_prefix_space=False)
    return pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(pattern), "isolated"),
                                    pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])


def oracle_parity_train(languages: Sequence[Sequence[str]], num_merges: int, pattern: str, *,
                        dev: Sequence[Sequence[str]] | None = None, ratio: Sequence[float] | None = None,
                        initial_alphabet: Sequence[int] = (), **options: Any) -> tuple[Any, dict[str, Any]]:
    """`tokenizers.trainers.ParityBpeTrainer` on the same texts and options: the trained tokenizer and its
    saved model (``vocab`` and ``merges`` spelled in the byte-level alphabet)."""
    import json

    from tokenizers import Tokenizer, models, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = tokenizers_pre_tokenizer(pattern)
    trainer = trainers.ParityBpeTrainer(num_merges=num_merges, show_progress=False,
                                        initial_alphabet=[BYTE_LEVEL[byte] for byte in initial_alphabet], **options)
    trainer.train_from_iterator(tokenizer, [iter(texts) for texts in languages],
                                dev_iterators=None if dev is None else [iter(texts) for texts in dev],
                                ratio=None if ratio is None else list(ratio))
    return tokenizer, json.loads(tokenizer.to_str())["model"]
