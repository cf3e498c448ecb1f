"""SuperBPE, naive and readable, for the tests: the rule ``hf_bpe.train(..., superword_transition=T)`` must
follow (Liu et al., "SuperBPE: Space Travel for Language Models", arXiv 2503.13423), written from the paper
and the authors' code (their ``tokenizers`` fork, ``alisawuffles/tokenizers-superbpe``: ``BpeTrainer::
do_train_extend``; their ``superbpe`` scripts), with DESIGN.md §3's tie rule. Independent of hf_bpe.

Stage one: ordinary BPE to the transition vocabulary
    :func:`naive_bpe.naive_train`'s rule on the corpus cut by the model's pattern (special tokens first),
    until the vocabulary (256 bytes + learned tokens + special tokens) holds ``transition`` tokens.

Stage two: the same loop on pieces that cross whitespace
    - **Pieces** (:func:`stage_two_pieces`): each document split on the special tokens; each part cut only
      around numbers: every run of ``\\p{N}`` characters is a piece of its own, and a run is cut again
      before every position followed by a multiple of three ``\\d`` digits up to its end (``1234567`` ->
      ``1``, ``234``, ``567``). Everything else, spaces, newlines and punctuation included, stays in one
      piece, so a piece is often a whole document. In ``tokenizers``' terms: ``Digits(individual_digits=
      False)``, then ``Split(Regex(r"(?=(\\d{3})+(?!\\d))"), "isolated")``, then ``ByteLevel(
      add_prefix_space=False, use_regex=False)``: the authors' stage-two pre-tokenizer (their stage one
      adds GPT-2's alternatives without contractions and numbers to that regex). llama.cpp's ``superbpe``
      pre-tokenizer is the same two regexes (``\\p{N}+``, then ``(?=(\\d{3})+(?!\\d))``).
    - **Starting state**: each piece encoded with stage one's merges in order (the merges-list rule,
      ``naive_extend_bpe.encode_with_merges``): the authors replay the stage-one merges over the stage-two
      words, which is that encoding.
    - **Loop**: DESIGN.md §3's (``naive_extend_bpe.continue_merges``), except that a pair is never merged
      when its token would hold more than ``max_words`` words (runs of bytes other than the space byte
      0x20; 4 in the authors' code) or the bytes ``": "`` (the authors' colon rule), until the vocabulary
      holds ``vocab_size`` tokens (special tokens included) or no pair is left.
    - **Merges**: stage one's, then stage two's, a pair that recurs (possible once a merge has repeated a
      token's bytes) listed once, at its first merge. Ids: bytes, then the learned tokens in order, then
      the special tokens.

Encoding (:func:`superbpe_encode`): special tokens first, then :func:`stage_two_pieces`' cut, then the
merges-list rule with the whole merges list. Stage one's pattern is not used to encode: a text is encoded
as stage two saw it. So the model is a merges-list model (not a rank table: the rank rule's whole-piece
and any-split shortcuts would encode differently) and saves as a ``tokenizer.json`` with that
pre-tokenizer and ``ignore_merges: false``.

Where this differs from the authors' code (on purpose: DESIGN.md's rules)
    - Ties go to the greatest (left bytes, right bytes); theirs go to the smallest pair of ids (``tokenizers``'
      ``BpeTrainer``), so the merges differ wherever counts tie.
    - ``T`` is a vocabulary size; their scripts keep the first ``head -n T`` lines of stage one's
      ``merges.txt``, whose first line is the ``#version`` header, so they inherit ``T - 1`` merges.
    - Their replay drops (from the merges list and the vocabulary) every stage-one merge whose pair does
      not occur in the stage-two words; here stage one's model is kept whole.
    - Their trainer reads files line by line, so their stage-two pieces never cross a newline; here a
      document is one sequence, as in ``hf_bpe.train``.

>>> result = naive_superbpe_train(["the cat sat. the cat ran. the cat sat."], 262, 259, r" ?\\w+| ?[^\\w ]+")
>>> result.stage_one, result.stage_two
([b'at', b'th', b'the'], [b'the ', b'the c', b'the cat'])
>>> superbpe_encode("the cat sat.", result.merges, [])
[b'the cat', b' ', b's', b'at', b'.']
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

import regex
from naive_bpe import naive_pieces
from naive_extend_bpe import Pair, continue_merges, encode_with_merges

NUMBERS = regex.compile(r"\p{N}+")
DIGIT_GROUPS = regex.compile(r"(?=(\d{3})+(?!\d))")
BYTES = [bytes([byte]) for byte in range(256)]


def _isolated(text: str, pattern: regex.Pattern[str]) -> Iterator[str]:
    """``Split(pattern, "isolated")``: the matches and the text between them, empty pieces dropped."""
    start = 0
    for match in pattern.finditer(text):
        yield from (piece for piece in (text[start:match.start()], match.group()) if piece)
        start = match.end()
    if text[start:]:
        yield text[start:]


def _parts(document: str, special_tokens: Sequence[str]) -> list[str]:
    if not special_tokens:
        return [document]
    return re.split("|".join(map(re.escape, sorted(special_tokens, key=len, reverse=True))), document)


def stage_two_cut(text: str) -> list[str]:
    """One special-token-free text cut as stage two cuts it."""
    return [piece for run in _isolated(text, NUMBERS) for piece in _isolated(run, DIGIT_GROUPS)]


def stage_two_pieces(documents: Iterable[str], special_tokens: Sequence[str]) -> Counter[bytes]:
    """How often each stage-two piece occurs (documents split on the special tokens first)."""
    return Counter(piece.encode("utf-8") for document in documents for part in _parts(document, special_tokens)
                   for piece in stage_two_cut(part))


def within_limits(token: bytes, max_words: int | None = 4, forbidden: Sequence[bytes] = (b": ",)) -> bool:
    """May stage two learn ``token``? At most ``max_words`` runs of non-space bytes, none of ``forbidden``."""
    words = len([word for word in token.split(b" ") if word])
    return (max_words is None or words <= max_words) and not any(part in token for part in forbidden)


@dataclass
class SuperBPE:
    stage_one: list[bytes]
    """Stage one's tokens, in order."""
    stage_two: list[bytes]
    """Stage two's tokens, in order."""
    merges: list[Pair]
    """The whole merges list, in order."""
    special_tokens: dict[str, int]


def naive_superbpe_train(documents: list[str], vocab_size: int, transition: int, pattern: str,
                         special_tokens: Sequence[str] = (), *, max_words: int | None = 4,
                         forbidden: Sequence[bytes] = (b": ",)) -> SuperBPE:
    """Stage one to ``transition`` tokens, stage two to ``vocab_size`` (both count bytes, learned tokens and
    special tokens)."""
    if not 256 + len(special_tokens) <= transition <= vocab_size:
        raise ValueError(f"need 256 + special tokens <= transition ({transition}) <= vocab_size ({vocab_size})")
    stage_one = continue_merges(naive_pieces(documents, pattern, list(special_tokens)),
                                lambda piece: [bytes([byte]) for byte in piece], BYTES,
                                transition - 256 - len(special_tokens))
    stage_two = continue_merges(stage_two_pieces(documents, special_tokens),
                                lambda piece: encode_with_merges(piece, stage_one.merges), [*BYTES, *stage_one.tokens],
                                vocab_size - transition, lambda token: within_limits(token, max_words, forbidden))
    merges: list[Pair] = []
    for pair in [*stage_one.merges, *stage_two.merges]:
        if pair not in merges:
            merges.append(pair)
    learned = len(stage_one.tokens) + len(stage_two.tokens)
    specials = {token: 256 + learned + i for i, token in enumerate(special_tokens)}
    return SuperBPE(stage_one.tokens, stage_two.tokens, merges, specials)


def superbpe_encode(text: str, merges: Sequence[Pair], special_tokens: Sequence[str]) -> list[bytes]:
    """The tokens of ``text``: special tokens (as their UTF-8 bytes) first, then stage two's cut, then the
    merges-list rule."""
    tokens: list[bytes] = []
    if special_tokens:
        splitter = re.compile("(" + "|".join(map(re.escape, sorted(special_tokens, key=len, reverse=True))) + ")")
        parts = splitter.split(text)
    else:
        parts = [text]
    for index, part in enumerate(parts):
        if index % 2:
            tokens.append(part.encode("utf-8"))
            continue
        for piece in stage_two_cut(part):
            tokens += encode_with_merges(piece.encode("utf-8"), merges)
    return tokens
