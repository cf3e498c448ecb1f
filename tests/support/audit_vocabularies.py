"""Vocabularies for the audit's tests: hand-built ones whose unreachable tokens are known (each with
its reason), and random ones over characters that share bytes, so that tokens start and end inside
characters."""

from __future__ import annotations

import random

from hf_bpe import BPE
from hf_bpe.sentencepiece_bpe import BYTE, CONTROL, UNKNOWN, USER_DEFINED, Piece, SentencePieceSpec

BYTES = {bytes([byte]): byte for byte in range(256)}

NEVER_UTF8 = [bytes([byte]) for byte in (0xC0, 0xC1, *range(0xF5, 0x100))]
"""The 13 bytes no UTF-8 text contains."""


def hand_built_ranks() -> tuple[dict[bytes, int], dict[bytes, str]]:
    """A gpt2-pattern rank vocabulary and its unreachable tokens with their reasons."""
    ranks = dict(BYTES)

    def add(token: bytes) -> None:
        ranks.setdefault(token, len(ranks))

    for second in range(0x80, 0xC0):  # Cyrillic letters U+0400-U+043F, except U+0430 (d0 b0), merge first
        if second != 0xB0:
            add(b"\xd0" + bytes([second]))
    for lead in range(0xF0, 0xF4):  # every 4-byte lead that 0x90 may follow, joined to it early
        add(bytes([lead, 0x90]))
    add(b"ab")
    add(b" b")
    add(b"a b")  # a + " b": valid, but gpt2 never has a space after a letter inside a piece, whatever
    # stands around it (the search without that check concludes split_apart)
    add(b"x\ny")  # no two tokens make it (not valid), and no piece is "x\ny"
    add(b"abcd")  # not valid either (no "cd", "abc", "bcd"), but the piece "abcd" is emitted whole
    add(b" \xd0")  # a space and a Cyrillic lead byte: the next byte always joins the lead first (the
    # d0 xx tokens above) or joins this token into " \xd0\xb0"; formed on the way to that token
    add(b" \xd0\xb0")  # " а"
    add(b"\x90\x80")  # reachable: U+4400 (e4 90 80) has no token for e4 90
    add(b"\x90\x80\x80")  # three continuation bytes: only a 4-byte lead F0-F3 can precede, and each
    # joins 0x90 first (the f? 90 tokens above)
    add(b"\xb1!")  # reachable: U+2031 (e2 80 b1) is punctuation, so "‱!" is one piece
    add(b"\xa9\xd0")  # reachable: "éа" (c3 a9 d0 b0) is one word
    add(b"\xed\xa0")  # 0xED 0xA0 starts only surrogates, which UTF-8 excludes
    unreachable = {token: "invalid_utf8" for token in NEVER_UTF8} | {
        b"\xed\xa0": "invalid_utf8",
        b"a b": "never_one_piece",
        b"x\ny": "merges_apart",
        b" \xd0": "no_right_neighbour",
        b"\x90\x80\x80": "no_left_neighbour",
    }
    return ranks, unreachable


def hand_built_sentencepiece() -> tuple[BPE, dict[str, str]]:
    """A SentencePiece model with byte fallback and its unreachable pieces with their reasons."""
    pieces = [Piece("<unk>", 0, UNKNOWN), Piece("<s>", 0, CONTROL), Piece("</s>", 0, CONTROL)]
    pieces += [Piece(f"<0x{byte:02X}>", 0, BYTE) for byte in range(256)]
    pieces += [Piece("▁", -1), Piece("a", -2), Piece("b", -3), Piece("c", -4), Piece("d", -5)]
    pieces += [
        Piece("ab", -6),
        Piece("abcd", -7),  # a b c d -> ab c d, and neither "abc" nor "cd" is a piece: never formed
        Piece("▁b", -8),
        Piece("<x>", 0, USER_DEFINED),  # matched in text as it is
    ]
    model = BPE.from_sentencepiece(SentencePieceSpec(tuple(pieces), byte_fallback=True))
    unreachable = {"abcd": "merges_apart"}
    # Byte fallback never needs the bytes of characters that are pieces (a-d), of the space (always
    # escaped to "▁", a piece), or bytes no UTF-8 text contains.
    for byte in [*b"abcd ", *(token[0] for token in NEVER_UTF8)]:
        unreachable[f"<0x{byte:02X}>"] = "byte_never_needed"
    return model, unreachable

ALPHABET = ["a", "b", " ", "é", "©", "ã", "あ", "ぃ", "\n", "1", "."]
"""Characters sharing bytes (é c3 a9, © c2 a9, ã c3 a3; あ e3 81 82, ぃ e3 81 83), so random tokens cut
from text over them start and end inside characters."""


def random_tokens(rng: random.Random, count: int) -> list[bytes]:
    """``count`` byte strings of 2 to 4 bytes cut at random offsets from random text over ALPHABET."""
    text = "".join(rng.choice(ALPHABET) for _ in range(400)).encode()
    tokens: list[bytes] = []
    while len(tokens) < count:
        start = rng.randrange(len(text) - 4)
        token = text[start : start + rng.randint(2, 4)]
        if token not in tokens:
            tokens.append(token)
    return tokens


def random_rank_model(rng: random.Random, pattern: str) -> BPE:
    """Tokens in random rank order: many are not valid, many start or end inside characters."""
    ranks = dict(BYTES)
    for token in random_tokens(rng, 40):
        ranks[token] = len(ranks)
    return BPE(ranks, pattern)


# ------------------------------------------------------------------------------------ Qwen's shape

QWEN_SIZE = 151_643
"""Ordinary tokens in Qwen's ``qwen.tiktoken``."""

_MARKED_SCRIPTS = [  # (letters, combining marks) of scripts that write vowels and tones as marks
    ([chr(code) for code in range(0x0E01, 0x0E2F)], [chr(0x0E31), *map(chr, range(0x0E34, 0x0E3B)),
                                                     *map(chr, range(0x0E47, 0x0E4F))]),  # Thai
    ([chr(code) for code in range(0x0628, 0x064B) if chr(code).isalpha()], [chr(code) for code in range(0x064B, 0x0653)]),
    ([chr(code) for code in range(0x0915, 0x0939)], [*map(chr, range(0x0941, 0x0949)), chr(0x094D)]),  # Devanagari
]


def qwen_shaped_ranks(rng: random.Random) -> tuple[dict[bytes, int], list[bytes]]:
    """A rank vocabulary of Qwen's size and the shape that made the neighbour search explode: the
    bytes; letters of Thai, Arabic and Devanagari with the byte tokens that build them; about 1,800
    valid tokens of a letter followed by one or two combining marks (Qwen's added words), which the
    ``qwen2`` pattern always cuts apart (marks are no letters), so no text encodes to them; and, to
    fill the size, words with a leading space as a trie (every prefix a token: all valid, each its
    own witness). Returns the ranks and the letter-and-mark tokens."""
    ranks = dict(BYTES)

    def add(token: bytes) -> None:
        ranks.setdefault(token, len(ranks))

    for letters, marks in _MARKED_SCRIPTS:
        for char in [*letters, *marks]:
            data = char.encode()
            for end in range(2, len(data) + 1):
                add(data[:end])
    marked = []
    for letters, marks in _MARKED_SCRIPTS:
        for letter in letters:
            for mark in rng.sample(marks, min(len(marks), 14)):
                marked.append((letter + mark).encode())
    for token in marked[:]:
        if rng.random() < 0.2:  # a second mark: valid when the pair of marks is no token
            mark = rng.choice([mark for letters, marks in _MARKED_SCRIPTS for mark in marks
                               if token.decode()[0] in letters])
            marked.append(token + mark.encode())
    for token in marked:
        add(token)
    letters = "abcdefghijklmnopqrstuvwxyz"
    while len(ranks) < QWEN_SIZE:
        word = " " + "".join(rng.choice(letters) for _ in range(rng.randint(2, 9)))
        for end in range(2, len(word) + 1):
            if len(ranks) < QWEN_SIZE:
                add(word[:end].encode())
    return ranks, marked
