"""Coverage-guided fuzz targets (atheris, libFuzzer) for hf_bpe, driving the Rust core through its
Python bindings, as users reach it.

    python tests/support/fuzz_targets.py TARGET [libFuzzer flags] [CORPUS_DIR ...]
    python tests/support/fuzz_targets.py TARGET --seeds DIR   # write seed inputs, then exit

Targets (``TARGETS``):

- ``model``: a model built from fuzzed ranks (byte ids permuted or not, extra tokens, ids anywhere
  below 2**31), a merges list or both, special tokens and a pattern; then fuzzed text is encoded
  and decoded: bytes come back exactly, batches equal single calls, offsets are in order.
- ``sentencepiece``: a SentencePiece model from fuzzed pieces (texts, scores, types), byte
  fallback, normalizer switches and character map (a hand-made rule or raw bytes); then encode,
  decode and offsets of fuzzed text.
- ``pattern``: a split pattern built from regex fragments (look-arounds, possessive and lazy
  quantifiers, classes) or taken raw; the pieces are the text's bytes in order with some dropped.
- ``loader``: a file of one of the formats (the first byte picks it; the seeds are valid files)
  loaded as users load it; the property of ``reliability_support.check_load``.
- ``counts``: the serialized count table that pickling stores.
- ``all``: every target in one process, the first byte picking one (what
  ``tests/reliability/test_fuzz.py`` runs).

Each input either passes the target's checks or raises a documented error (``ValueError``,
``TypeError``, ``hf_bpe.errors``); anything else, including ``InternalError`` (a Rust panic), is a
crash: libFuzzer writes the input to ``crash-*`` and exits non-zero. Coverage comes from hf_bpe's and
conversion's Python code (atheris instruments it), and from the Rust core when it is built with coverage
instrumentation (``tests/reliability/test_fuzz.py`` does that at HF_BPE_TEST_SCALE >= 5, see there, and
runs with atheris' libFuzzer preloaded); the core that ``pip install`` builds runs on every input but
reports no coverage of its own.

Found inputs that crashed go to ``tests/reliability/fuzz_corpus/<target>/`` and are replayed by
``tests/reliability/test_fuzz.py``.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

_HERE = Path(__file__).resolve().parent
# HF_BPE_FUZZ_ROOT: a folder holding hf_bpe (e.g. with a coverage-instrumented core) to fuzz instead.
sys.path[:0] = [str(_HERE), os.environ.get("HF_BPE_FUZZ_ROOT") or str(_HERE.parents[1])]

try:
    import atheris
except ImportError:  # replaying a corpus needs only the targets
    atheris = None

if atheris is not None and __name__ == "__main__":
    with atheris.instrument_imports(include=["hf_bpe", "conversion", "reliability_support"]):
        import reliability_support as support

        import hf_bpe
        from hf_bpe.errors import InternalError
else:
    import reliability_support as support

    import hf_bpe
    from hf_bpe.errors import InternalError

from hf_bpe import _rules
from hf_bpe.sentencepiece_bpe import BYTE, CONTROL, NORMAL, UNKNOWN, USER_DEFINED, Piece, SentencePieceSpec
from hf_bpe.train import PieceCounts, count_pieces

DOCUMENTED = (ValueError, TypeError)  # hf_bpe's errors are ValueErrors (and KeyError for ids)


class Provider:
    """Consumes fuzz bytes into values (atheris' FuzzedDataProvider, or a plain one to replay)."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.at = 0

    def byte(self) -> int:
        if self.at >= len(self.data):
            return 0
        self.at += 1
        return self.data[self.at - 1]

    def int(self, low: int, high: int) -> int:
        span = high - low + 1
        value = 0
        for _ in range(max(1, (span.bit_length() + 7) // 8)):
            value = (value << 8) | self.byte()
        return low + value % span

    def bool(self) -> bool:
        return bool(self.byte() & 1)

    def pick(self, values: list | tuple):  # type: ignore[no-untyped-def, type-arg]
        return values[self.int(0, len(values) - 1)]

    def bytes(self, count: int) -> bytes:
        chunk = self.data[self.at : self.at + count]
        self.at += len(chunk)
        return chunk

    def text(self, limit: int, alphabet: str | None = None) -> str:
        size = self.int(0, limit)
        if alphabet is not None:
            return "".join(alphabet[self.byte() % len(alphabet)] for _ in range(size))
        return self.bytes(size).decode("utf-8", "replace")

    def rest(self) -> bytes:
        chunk = self.data[self.at :]
        self.at = len(self.data)
        return chunk


ALPHABET = "aabbc \n1!é日👍\u2581<>|"
PATTERNS = ["gpt2", "cl100k", "o200k", r"\S+|\s+", r"\w+|[^\w\s]+|\s+", r"(?s:.)", r"\p{L}+|\p{N}{1,3}|\s+(?!\S)|(?s:.)"]
"""Patterns that match every character (so encoding loses nothing)."""


# ------------------------------------------------------------------------------------------ model


def target_model(data: bytes) -> None:
    source = Provider(data)
    byte_ids = list(range(256))
    if source.bool():  # byte ids need not be byte values (GPT-2's are not)
        for index in range(255, 0, -1):
            other = source.int(0, index)
            byte_ids[index], byte_ids[other] = byte_ids[other], byte_ids[index]
    ranks = {bytes([byte]): byte_ids[byte] for byte in range(256)}
    next_id = 256
    for _ in range(source.int(0, 40)):
        token = source.text(4, ALPHABET).encode()
        if len(token) > 1 and token not in ranks:
            next_id = source.pick([next_id + 1, next_id + 1, next_id + 7, source.int(256, 2**31 - 1)])
            ranks[token] = next_id
    specials = {}
    for name in ("<|end|>", "<s>", "a|"):
        if source.bool():
            specials[name] = source.pick([max(ranks.values()) + 1 + len(specials), source.int(0, 2**31 - 1)])
    pattern = source.pick(PATTERNS)
    text = source.text(300, ALPHABET + "<|end|> ")
    cuts = sorted({source.int(0, len(text)) for _ in range(source.int(0, 6))})
    try:
        if source.bool():
            model = hf_bpe.BPE(ranks, pattern, specials)
        else:
            tokens = sorted((token for token in ranks if len(token) > 1), key=ranks.__getitem__)
            merges = [(token[: source.int(1, len(token) - 1)],) for token in tokens]
            pairs = [(left[0], token[len(left[0]) :]) for left, token in zip(merges, tokens)]
            pairs = [pair for pair in pairs if pair[0] in ranks and pair[1] in ranks]
            model = hf_bpe.BPE.from_merges(ranks, pairs, pattern, specials, ignore_merges=source.bool())
    except DOCUMENTED as error:
        check_message(error)
        return
    check_encoding(model, text, cuts)


def check_message(error: BaseException) -> None:
    if isinstance(error, InternalError) or not str(error).strip():
        raise error


def check_encoding(model: hf_bpe.BPE, text: str, cuts: list[int]) -> None:
    """Round trips, batches, offsets, merges; and for named patterns, streams: the text in parts
    (cut at ``cuts``) encodes to the whole text's ids, and ids decoded one at a time give its text."""
    ids = model.encode_ordinary(text)
    assert model.decode_bytes(ids) == text.encode(), (text, ids)
    assert model.decode(ids) == text
    with_specials = model.encode(text, allowed_special="all")
    assert model.decode(with_specials) == text
    assert model.encode_ordinary_batch([text, text[::-1]], num_threads=2) == [ids, model.encode_ordinary(text[::-1])]
    offset_ids, offsets = model.encode_with_offsets(text, disallowed_special=())
    assert offset_ids == model.encode(text, disallowed_special=()) and offsets == sorted(offsets)
    if model.pattern in (hf_bpe.patterns.GPT2, hf_bpe.patterns.CL100K, hf_bpe.patterns.O200K):
        parts = [text[start:end] for start, end in zip([0, *cuts], [*cuts, len(text)])]
        assert list(model.encode_iterable(parts, disallowed_special=())) == model.encode(text, disallowed_special=())
        decoder = model.stream_decoder()
        assert "".join(decoder.feed([token]) for token in ids) + decoder.finish() == text
    for left, right in model.merges:
        assert left + right in model.mergeable_ranks
    if model.kind == "merges":
        _rules.rank_rule_difference(model)
    _rules.merge_rule_difference(model, True)


# ---------------------------------------------------------------------------------- sentencepiece


def target_sentencepiece(data: bytes) -> None:
    source = Provider(data)
    pieces = [Piece("<unk>", 0.0, UNKNOWN)]
    byte_fallback = source.bool()
    if byte_fallback:
        pieces += [Piece(f"<0x{b:02X}>", 0.0, BYTE) for b in range(256)]
    for _ in range(source.int(0, 40)):
        text = source.text(4, ALPHABET)
        kind = source.pick([NORMAL, NORMAL, NORMAL, USER_DEFINED, CONTROL, UNKNOWN, 5, BYTE, 0, 99])
        pieces.append(Piece(text, source.pick([0.0, -1.0, -float(len(pieces)), float("inf"), float("nan")]), kind))
    charsmap = source.pick([b"", b"", b"rule", b"raw"])
    if charsmap == b"rule":
        charsmap = support.one_rule_charsmap(source.byte(), source.text(3, ALPHABET).encode() + source.bytes(source.int(0, 2)))
    elif charsmap == b"raw":
        charsmap = source.bytes(source.int(0, 64))
    spec = SentencePieceSpec(tuple(pieces), byte_fallback=byte_fallback, charsmap=charsmap,
                             add_dummy_prefix=source.bool(), remove_extra_whitespaces=source.bool(),
                             escape_whitespaces=source.bool(), unk_surface=source.text(3, ALPHABET))
    text = source.text(200, ALPHABET + " ")
    try:
        model = hf_bpe.BPE.from_sentencepiece(spec)
    except DOCUMENTED as error:
        check_message(error)
        return
    ids = model.encode_ordinary(text)
    assert all(0 <= token < model.n_vocab for token in ids)
    assert isinstance(model.decode(ids), str)
    offset_ids, offsets = model.encode_with_offsets(text, disallowed_special=())
    assert offset_ids == model.encode(text, disallowed_special=()), text
    assert offsets == sorted(offsets) and all(0 <= offset <= len(text) for offset in offsets)
    assert model.encode_ordinary_batch([text, text], num_threads=2) == [ids, ids]
    if byte_fallback:
        assert spec.unk_id not in ids, (text, ids)  # every character falls back to byte pieces
    space_is_a_piece = any(piece.text == "\u2581" and piece.type in (NORMAL, USER_DEFINED) for piece in pieces)
    if byte_fallback and space_is_a_piece and not charsmap and spec.escape_whitespaces and not spec.remove_extra_whitespaces:
        # No normalizer rule, no unknown, spaces escaped as a piece: decoding gives the text back
        # (U+2581 in the text decodes to a space, as SentencePiece decodes it).
        assert model.decode(ids) == text.replace("\u2581", " "), (text, ids)


# ---------------------------------------------------------------------------------------- pattern

FRAGMENTS = ["a", "b", ".", r"\w", r"\s", r"\S", r"\p{L}", r"\p{N}", "[ab]", "[^a]", r"\d", "é", "$", "^", r"\b"]
QUANTIFIERS = ["", "", "*", "+", "?", "{1,3}", "++", "*+", "*?", "+?", "{2}", "{0,2}+"]
OPENERS = ["(?:", "(", "(?=", "(?!", "(?<=", "(?<!", "(?>", "(?i:", "(?s:"]


def build_pattern(source: Provider, depth: int = 0) -> str:
    parts = []
    for _ in range(source.int(1, 4)):
        if depth < 3 and source.int(0, 3) == 0:
            part = source.pick(OPENERS) + build_pattern(source, depth + 1) + ")"
        else:
            part = source.pick(FRAGMENTS)
        parts.append(part + source.pick(QUANTIFIERS))
    return ("|" if source.bool() else "").join(parts)


def target_pattern(data: bytes) -> None:
    source = Provider(data)
    pattern = source.text(40) if source.int(0, 7) == 0 else build_pattern(source)
    text = source.text(400, ALPHABET)
    try:
        model = hf_bpe.BPE({bytes([b]): b for b in range(256)}, pattern)
        ids = model.encode_ordinary(text)
        # (The split budget is time: near it, one call may pass and the next one raise.)
        batch = model.encode_ordinary_batch([text])
    except DOCUMENTED as error:
        check_message(error)
        return
    # The pieces are parts of the text in order (unmatched text is dropped): a subsequence.
    pieces, remaining = model.decode_bytes(ids), iter(text.encode())
    assert all(byte in remaining for byte in pieces), (pattern, text)
    assert batch == [ids]


# ----------------------------------------------------------------------------------------- loader

_SCRATCH = Path(tempfile.mkdtemp(prefix="hf_bpe_fuzz_"))
LOADER_FORMATS = sorted(support.FORMATS)


def loader_input(form: str, file_name: str, content: bytes) -> bytes:
    """The fuzz input that loads ``content`` as ``file_name`` of ``form`` (the other files valid)."""
    names = sorted(support.valid_files(form))
    return bytes([LOADER_FORMATS.index(form), names.index(file_name)]) + content


def target_loader(data: bytes) -> None:
    if len(data) < 2:
        return
    form = support.FORMATS[LOADER_FORMATS[data[0] % len(LOADER_FORMATS)]]
    valid = support.valid_files(form.name)
    names = sorted(valid)
    name = names[data[1] % len(names)]
    folder = support.materialize({**valid, name: data[2:]}, _SCRATCH / "case")
    support.check_load(form, folder, name)


# ----------------------------------------------------------------------------------------- counts


def target_counts(data: bytes) -> None:
    try:
        table = PieceCounts._from_state("gpt2", ["<|end|>"], data)
    except ValueError as error:
        check_message(error)
        return
    assert len(table.most_common()) == len(table) and sum(count for _, count in table.most_common()) == table.total
    assert PieceCounts._from_state("gpt2", ["<|end|>"], table.__reduce__()[1][2]) == table


TARGETS: dict[str, Callable[[bytes], None]] = {
    "model": target_model,
    "sentencepiece": target_sentencepiece,
    "pattern": target_pattern,
    "loader": target_loader,
    "counts": target_counts,
}
ALL = sorted(TARGETS)


def target_all(data: bytes) -> None:
    """Every target in one process: the first byte picks it (one start-up, one corpus)."""
    if data:
        TARGETS[ALL[data[0] % len(ALL)]](data[1:])


def seeds(target: str) -> dict[str, bytes]:
    """Seed inputs for ``target``: valid files for the loader, a few structured inputs otherwise."""
    if target == "all":
        return {f"{name}-{seed}": bytes([ALL.index(name)]) + data for name in ALL for seed, data in seeds(name).items()}
    if target == "loader":
        return {f"{form}-{name}": loader_input(form, name, content)
                for form in LOADER_FORMATS for name, content in support.valid_files(form).items()}
    if target == "counts":
        counts = count_pieces(["the cat sat on the mat", "hello world"], show_progress=False)
        return {"table": counts.__reduce__()[1][2]}
    return {"zeros": bytes(64), "ramp": bytes(range(256)), "text": ("ab" * 40 + " é日👍 1!").encode() * 3}


def main() -> None:
    target = sys.argv[1]
    if len(sys.argv) > 3 and sys.argv[2] == "--seeds":
        folder = Path(sys.argv[3])
        folder.mkdir(parents=True, exist_ok=True)
        for name, content in seeds(target).items():
            (folder / name).write_bytes(content)
        return
    if atheris is None:
        sys.exit("atheris is not installed: pip install atheris")
    test_one_input = target_all if target == "all" else TARGETS[target]
    atheris.Setup([sys.argv[0], *sys.argv[2:]], test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    os.environ.setdefault("RUST_BACKTRACE", "0")
    main()
