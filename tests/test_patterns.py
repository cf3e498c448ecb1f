"""Split patterns (``hf_bpe.patterns``): `tokenizers`' Split pre-tokenizer, run with Oniguruma, against
`tokenizers` itself (``pre_tokenize_str``) on generated regexes, every behavior and ``invert``,
generated text and every code point; the named patterns' scanners against Oniguruma on every code
point; and the ``Split`` value in models (persisted, pickled, trained with)."""

from __future__ import annotations

import pickle
import random
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import oniguruma_patterns
import pytest
from suite import scaled

import conversion.hf
import hf_bpe
from hf_bpe import BPE, patterns
from hf_bpe.patterns import Split

tokenizers = pytest.importorskip("tokenizers", reason="tokenizers is the oracle; pip install -e '.[test]'")
from tokenizers import Regex, pre_tokenizers

from hf_bpe.train import count_pieces, train_from_counts

BYTES = {bytes([byte]): byte for byte in range(256)}




def their_pieces(splitter: Any, text: str) -> list[str] | str:
    try:
        return [piece for piece, _ in splitter.pre_tokenize_str(text)]
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException:  # noqa: BLE001 - PanicException: Oniguruma gave up on the text
        return "error"


TOO_SLOW = "too slow"


def our_pieces(model: BPE, text: str) -> list[str] | str:
    """The pieces, ``"error"`` where Oniguruma gives up (as in tokenizers), or :data:`TOO_SLOW` where
    splitting would overrun the time budget (a clear refusal, allowed whatever tokenizers does)."""
    try:
        return patterns.pieces(model, text)
    except ValueError as error:
        if "is too slow on this text" in str(error):
            return TOO_SLOW
        assert "Oniguruma gave up" in str(error), error
        return "error"


def their_splitter(split: Split) -> Any:
    return pre_tokenizers.Split(split.pattern if split.literal else Regex(split.pattern), split.behavior,
                                split.invert)


def generated_splits(seed: int, count: int) -> Iterator[tuple[oniguruma_patterns.Pattern, Split]]:
    """``count`` random patterns, each with a random behavior and invert."""
    rng = random.Random(seed)
    for pattern in oniguruma_patterns.patterns(rng, count):
        yield pattern, Split(pattern.regex, rng.choice(patterns.BEHAVIORS), rng.random() < 0.5)


def assert_same_pieces(model: BPE, splitter: Any, texts: list[str], what: str) -> int:
    """Every text is cut as tokenizers cuts it, or refused as too slow; returns how many were."""
    too_slow = 0
    with oniguruma_patterns.quiet_stderr():
        for text in texts:
            ours = our_pieces(model, text)
            if ours == TOO_SLOW:
                too_slow += 1
                continue
            theirs = their_pieces(splitter, text)
            assert ours == theirs, f"{what} on {text!r:.300}: ours {ours!r:.500}, tokenizers {theirs!r:.500}"
    return too_slow


def assert_rarely_too_slow(too_slow: int, compared: int) -> None:
    """Time-budget refusals are clear errors, not wrong answers, but must stay rare (the generated
    family has some catastrophic patterns, on which tokenizers itself takes a minute per text)."""
    assert too_slow <= max(2, compared // 100), f"{too_slow} of {compared} texts were refused as too slow"


# ------------------------------------------------------------------------------ generated family


def check_generated_family(seed: int, count: int, text_count: int) -> int:
    """Every behavior and invert of ``count`` generated patterns cut ``text_count`` generated texts
    as tokenizers does, and patterns tokenizers cannot compile are refused; returns how many
    patterns compiled."""
    texts = oniguruma_patterns.texts(random.Random(seed + 1), text_count)
    compiled = too_slow = 0
    for pattern in oniguruma_patterns.patterns(random.Random(seed), count):
        try:
            regex = Regex(pattern.regex)
        except Exception as error:  # noqa: BLE001 - tokenizers' error type for a bad regex is Exception
            with pytest.raises(ValueError, match="Oniguruma .* refuses it"):
                BPE(BYTES, Split(pattern.regex))
            assert str(error).startswith("Oniguruma error")
            continue
        compiled += 1
        for behavior in patterns.BEHAVIORS:
            for invert in (False, True):
                model = BPE(BYTES, Split(pattern.regex, behavior, invert))
                splitter = pre_tokenizers.Split(regex, behavior, invert)
                too_slow += assert_same_pieces(model, splitter, texts,
                                               f"Split({pattern.regex!r}, {behavior}, invert={invert})")
    assert_rarely_too_slow(too_slow, compiled * 10 * len(texts))
    return compiled


def test_generated_splits_cut_generated_text_as_tokenizers() -> None:
    compiled = check_generated_family(seed=15, count=scaled(40, 10), text_count=scaled(120, 40))
    assert compiled >= scaled(40, 10) * 0.8  # the family is mostly valid Oniguruma


@pytest.mark.slow
def test_generated_splits_cut_generated_text_as_tokenizers_at_full_size() -> None:
    # 200 patterns and 200 texts at HF_BPE_TEST_SCALE=10; a few seconds at scale 1.
    check_generated_family(seed=150, count=scaled(20, 10), text_count=scaled(20, 60))


# --------------------------------------------------------------------------------- every code point


def every_code_point_texts(contexts: tuple[str, ...], chunk: int = 2048) -> list[str]:
    """All code points but the surrogates, in order, in each context (``plain``, ``spaced``: each
    after a space, ``doubled``), cut into texts of ``chunk`` characters."""
    characters = [chr(code) for code in range(0x110000) if not 0xD800 <= code < 0xE000]
    shaped = {"plain": "".join(characters), "spaced": "".join(" " + char for char in characters),
              "doubled": "".join(char * 2 for char in characters)}
    return [shaped[context][start : start + chunk] for context in contexts
            for start in range(0, len(shaped[context]), chunk)]


def check_every_code_point(draws: int, contexts: tuple[str, ...], seed: int) -> None:
    texts = every_code_point_texts(contexts)
    done = too_slow = 0
    for _, split in generated_splits(seed, draws * 3):
        try:
            splitter = their_splitter(split)
        except Exception:  # noqa: BLE001, S112 - not valid Oniguruma: the family test covers refusals
            continue
        too_slow += assert_same_pieces(BPE(BYTES, split), splitter, texts, repr(split))
        done += 1
        if done == draws:
            break
    assert done == draws
    assert_rarely_too_slow(too_slow, draws * len(texts))


def test_generated_splits_cut_every_code_point_as_tokenizers() -> None:
    check_every_code_point(draws=scaled(2, 1), contexts=("plain",), seed=7)


@pytest.mark.slow
def test_generated_splits_cut_every_code_point_as_tokenizers_at_full_size() -> None:
    # 10 Splits at HF_BPE_TEST_SCALE=10.
    check_every_code_point(draws=scaled(1, 1), contexts=("plain", "spaced", "doubled"), seed=70)


@pytest.mark.parametrize("name", ["gpt2", "cl100k", "o200k"])
def test_named_patterns_cut_every_code_point_as_oniguruma_reads_them(name: str) -> None:
    """The scanners (regex-syntax's Unicode tables) against the named pattern as tokenizer.json
    spells it, run by tokenizers (Oniguruma's tables): the shortcut load takes for such files."""
    regex = patterns.resolve(name)
    splitter = pre_tokenizers.Split(Regex(conversion.hf.translate_pattern(regex)), "removed", invert=True)
    assert assert_same_pieces(BPE(BYTES, regex), splitter, every_code_point_texts(("plain",)), name) == 0


@pytest.mark.slow
@pytest.mark.parametrize("name", ["gpt2", "cl100k", "o200k"])
def test_named_patterns_cut_every_code_point_after_a_space_and_doubled_as_oniguruma_reads_them(name: str) -> None:
    regex = patterns.resolve(name)
    splitter = pre_tokenizers.Split(Regex(conversion.hf.translate_pattern(regex)), "removed", invert=True)
    assert assert_same_pieces(BPE(BYTES, regex), splitter, every_code_point_texts(("spaced", "doubled")), name) == 0


# ---------------------------------------------------------------------------- hand-made edge cases


@pytest.mark.parametrize(
    "split",
    [
        Split("[A-Z]*"),  # matches the empty string: tokenizers keeps the gaps
        Split("[[:alpha:]]+|[[:digit:]]+|[[:punct:]]+"),  # POSIX brackets are Unicode in Oniguruma
        Split(r"\w+|\W"),  # U+00B2 is a word character there
        Split(r"\b"),  # U+200C moves a word boundary
        Split(r"\h+", "merged_with_next"),  # \h is a hexadecimal digit in Oniguruma
        Split(r"$", "merged_with_previous", invert=True),  # $ matches at every line end
        Split(r"\R|\X", "contiguous"),  # line breaks and grapheme clusters
        Split(r"(?<=\p{L})(?=\p{N})", "isolated"),  # look-behind, empty matches only
        Split(r"(?i:straße)", "removed"),  # case folding (ß, ẞ, ss)
        Split(" ", "merged_with_next", literal=True),  # a plain string
        Split(".+*?[](){}|^$\\", "removed", literal=True),  # a plain string of regex syntax
    ],
    ids=repr,
)
def test_edge_constructs_split_as_in_tokenizers(split: Split) -> None:
    texts = [*oniguruma_patterns.EDGE_TEXT, *conversion.hf.SPLIT_PROBE_EDGES, "Straße STRASSE strasse ẞ",
             "a.+*?[](){}|^$\\b", "12ab 3x4 ", "AB cd  EF\n\ngh ", *oniguruma_patterns.texts(random.Random(5), 200)]
    assert assert_same_pieces(BPE(BYTES, split), their_splitter(split), texts, repr(split)) == 0


def test_a_sequence_of_splits_resplits_every_piece() -> None:
    # DeepSeek-V3's pre-tokenizer: three Isolated splits, each on the pieces of the one before.
    steps = (Split(r"\p{N}{1,3}"), Split("[一-龥\u3040-ゟ゠-ヿ]+"),
             Split("[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?"
                   "[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"))
    theirs = pre_tokenizers.Sequence([their_splitter(step) for step in steps])
    texts = [*oniguruma_patterns.texts(random.Random(9), scaled(400, 100)), "日本語のテキスト123456 abc"]
    assert assert_same_pieces(BPE(BYTES, steps), theirs, texts, "DeepSeek-V3's steps") == 0


# ------------------------------------------------------------------------------------ the Split value


def test_split_is_validated() -> None:
    with pytest.raises(ValueError, match="behavior 'merged' is not one of removed, isolated"):
        Split("a", "merged")
    with pytest.raises(TypeError, match="invert must be a bool"):
        Split("a", "isolated", 1)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="pattern must be a str"):
        Split(b"a")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="a patterns.Split or a sequence of them"):
        BPE(BYTES, [Split("a"), "b"])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="a patterns.Split or a sequence of them"):
        BPE(BYTES, [])


def test_patterns_that_oniguruma_refuses_are_refused_with_its_reason() -> None:
    with pytest.raises(ValueError, match=r'split pattern "\[b-a\]" does not compile: Oniguruma .* refuses it: '
                                         r"empty range in char class"):
        BPE(BYTES, Split("[b-a]"))
    with pytest.raises(ValueError, match="invalid character property name"):
        hf_bpe.train(["abc"], 260, pattern=Split(r"\p{Foo}"), show_progress=False)


def test_models_keep_their_splits_through_save_pickle_and_equality(tmp_path: Path) -> None:
    steps = (Split(r"\d+", "isolated"), Split(" ", "merged_with_next", literal=True),
             Split(r"[[:punct:]]", "removed", invert=True))
    for model in (BPE(BYTES, steps, {"<|end|>": 256}, name="split"),
                  BPE.from_merges(BYTES | {b"ab": 256}, [(b"a", b"b")], steps[0], ignore_merges=True)):
        assert model.pattern in (steps, steps[0])
        assert BPE.load(model.save(tmp_path / "model.json")) == model
        assert pickle.loads(pickle.dumps(model)) == model
        assert model != BPE(BYTES, "gpt2")
        text = "ab 12,3 x!y"
        assert model.encode_ordinary_batch([text] * 3) == [model.encode_ordinary(text)] * 3
    assert BPE(BYTES, [Split("a")]).pattern == Split("a")  # a sequence of one is that Split
    assert isinstance(BPE(BYTES, "gpt2").pattern, str)


def test_encode_batch_on_threads_equals_encode() -> None:
    model = hf_bpe.train(oniguruma_patterns.texts(random.Random(1), 300), 400, show_progress=False,
                         pattern=(Split(r"\p{L}+|\p{N}{1,2}"), Split(r"\s+", "merged_with_next")))
    texts = oniguruma_patterns.texts(random.Random(2), scaled(2000, 200))
    assert model.encode_ordinary_batch(texts, num_threads=2) == [model.encode_ordinary(text) for text in texts]


def test_counting_with_a_split_counts_the_pieces_tokenizers_cuts() -> None:
    split = Split(r"[[:alpha:]]+|\d", "merged_with_previous", invert=True)
    texts = oniguruma_patterns.texts(random.Random(3), 300)
    counts = count_pieces(texts, pattern=split, special_tokens=["<|endoftext|>"], show_progress=False)
    theirs = their_splitter(split)
    expected = Counter(piece.encode() for text in texts for part in text.split("<|endoftext|>")
                       for piece, _ in theirs.pre_tokenize_str(part))
    assert counts.to_dict() == dict(expected)
    assert counts.pattern == split and pickle.loads(pickle.dumps(counts)) == counts
    model = train_from_counts(counts, 300, show_progress=False)
    assert model.pattern == split
    with pytest.raises(ValueError, match="different split patterns"):
        counts + count_pieces(texts, show_progress=False)


def test_pieces_of_a_sentencepiece_model_are_refused() -> None:
    from hf_bpe.sentencepiece_bpe import NORMAL, UNKNOWN, Piece, SentencePieceSpec

    spec = SentencePieceSpec((Piece("<unk>", 0, UNKNOWN), Piece("▁", -1, NORMAL)))
    with pytest.raises(ValueError, match="SentencePiece model: it has no split pattern"):
        patterns.pieces(BPE.from_sentencepiece(spec), "a b")


# ------------------------------------------------------------------------------ the ByteLevel step

def their_byte_level_sequence(steps: tuple[Any, ...]) -> Any:
    return pre_tokenizers.Sequence([
        pre_tokenizers.ByteLevel(add_prefix_space=step.add_prefix_space, use_regex=step.use_regex,
                                 trim_offsets=False) if isinstance(step, patterns.ByteLevel) else their_splitter(step)
        for step in steps])


BYTE_LEVEL_SEQUENCES = [
    (patterns.ByteLevel(use_regex=False), Split(r"\p{N}")),
    (Split(r"[[:punct:]]+", "contiguous"), patterns.ByteLevel(), Split(r"\p{N}+", "contiguous"),
     Split("[0-9][0-9][0-9]")),
    (Split(r"\d"), patterns.ByteLevel(add_prefix_space=True)),
    (Split(r"\s+", "removed"), patterns.ByteLevel(add_prefix_space=True, use_regex=False), Split("\u0120")),
    (patterns.ByteLevel(add_prefix_space=True), Split(r"[\x{100}-\x{143}]+", "removed"), Split(".{1,2}")),
    (Split(r"\w+", "merged_with_next"), patterns.ByteLevel(), Split(r"[\x{80}-\x{FF}]", "merged_with_previous")),
]


@pytest.mark.parametrize("steps", BYTE_LEVEL_SEQUENCES, ids=repr)
def test_byte_level_steps_cut_as_tokenizers_on_every_code_point_class(steps: tuple[Any, ...]) -> None:
    """Pieces in the byte-level alphabet, a space before each piece where ByteLevel adds one, pieces
    ending inside characters where steps after ByteLevel cut its spelling; counting counts them."""
    from hf_bpe._byte_level import str_to_token, token_to_str

    model = BPE(BYTES, steps)
    theirs = their_byte_level_sequence(steps)
    texts = [*oniguruma_patterns.EDGE_TEXT, *conversion.hf.SPLIT_PROBE_EDGES, "a\u00f2\u00b2 1234 \u00e9",
             *oniguruma_patterns.texts(random.Random(6), scaled(300, 60))]
    for text in texts:
        ours = [token_to_str(piece.encode("utf-8", "surrogateescape")) for piece in patterns.pieces(model, text)]
        assert ours == their_pieces(theirs, text), (steps, text)
    counts = count_pieces(texts, pattern=steps, show_progress=False)
    expected = Counter(str_to_token(piece) for text in texts for piece, _ in theirs.pre_tokenize_str(text))
    assert counts.to_dict() == dict(expected)


def test_models_keep_their_byte_level_step_through_save_pickle_and_equality(tmp_path: Path) -> None:
    import json

    steps = (Split(r"\d"), patterns.ByteLevel(add_prefix_space=True, use_regex=False), Split(r"\p{N}"))
    model = BPE(BYTES | {b" a": 256}, steps, {"<|end|>": 257})
    assert model.pattern == steps
    path = model.save(tmp_path / "model.json")
    # readers of versions 1 to 3 refuse the file rather than misread it
    assert json.loads(path.read_text(encoding="utf-8"))["version"] == 4
    assert BPE.load(path) == model and pickle.loads(pickle.dumps(model)) == model
    text = "a1\u00f2<|end|>"
    assert BPE.load(path).encode(text, allowed_special="all") == model.encode(text, allowed_special="all")
    assert json.loads(BPE(BYTES, steps[0]).save(tmp_path / "plain.json").read_text(encoding="utf-8"))["version"] == 1


def test_byte_level_step_is_validated() -> None:
    with pytest.raises(TypeError, match="ByteLevel use_regex must be a bool"):
        patterns.ByteLevel(use_regex=1)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="at most one patterns.ByteLevel among the Splits"):
        BPE(BYTES, [patterns.ByteLevel(), Split("a"), patterns.ByteLevel()])
    with pytest.raises(ValueError, match="holds a ByteLevel step"):
        patterns.split_steps_of((patterns.ByteLevel(), Split("a")))
