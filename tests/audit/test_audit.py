"""The vocabulary audit's report (``hf_bpe.audit``): corpus usage and compression against direct encoding,
the magikarp score, near duplicates, special tokens, the Markdown/JSON/charts and ``hf-bpe audit``.
Reachability itself is tested in ``test_reachability.py``."""

from __future__ import annotations

import json
import random
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from audit_vocabularies import hand_built_ranks, hand_built_sentencepiece
from suite import require_shared, scaled

import hf_bpe
import hf_bpe.audit
from hf_bpe import BPE
from hf_bpe.audit import _corpus as corpus_module
from hf_bpe.audit import _specials as specials_module
from hf_bpe.audit import _vocabulary
from hf_bpe.cli import main
from hf_bpe.counting import piece_token_counts, token_counts
from hf_bpe.train import count_pieces

CORPUS = [
    "The river had risen overnight, and by seven the ferry was running late.",
    "Die Brücke über den Fluss wurde 1887 gebaut.",
    "Привет! Как дела? Ελπίζω να είστε καλά.",
    "今日は雨が降っていますが、午後には晴れるでしょう。",
]


@pytest.fixture(scope="module")
def trained() -> BPE:
    rng = random.Random(7)
    words = ["river", "ferry", "late", "Brücke", "über", "Fluss", "дела", "καλά", "雨", "午後"]
    texts = [" ".join(rng.choice(words) for _ in range(30)) for _ in range(40)]
    return hf_bpe.train(texts, 256 + 40, pattern="gpt2", special_tokens=["<|endoftext|>"], show_progress=False,
                        name="trained")


def test_hf_bpe_audit_is_callable_and_its_modules_stay_importable(trained: BPE) -> None:
    report = hf_bpe.audit.audit(trained)
    assert report.name == "trained" and report.corpus is None and report.unused == []
    from hf_bpe.audit._reachability import REASONS

    assert "split_apart" in REASONS


def test_usage_counts_are_the_ids_of_encoding_the_corpus(trained: BPE) -> None:
    report = hf_bpe.audit.audit(trained, CORPUS, rare_below=3)
    produced = Counter(id for ids in trained.encode_ordinary_batch(CORPUS) for id in ids)
    assert report.corpus is not None
    assert {id: int(count) for id, count in enumerate(report.corpus.counts) if count} == dict(produced)
    reachable = set(report.reachability.reachable)
    assert report.unused == sorted(id for id in reachable if produced[id] == 0)
    assert report.rare == sorted(id for id in reachable if 0 < produced[id] < 3)
    assert set(report.unused).isdisjoint(report.unreachable)


def test_compression_table_counts_every_tokenizer_on_the_same_texts(trained: BPE) -> None:
    gpt2 = hf_bpe.get_encoding("gpt2")
    groups = {"en": CORPUS[:1], "de": CORPUS[1:2], "mixed": CORPUS[2:]}
    report = hf_bpe.audit.audit(trained, groups, compare=["gpt2"])
    assert report.corpus is not None
    assert [group.name for group in report.corpus.groups] == ["en", "de", "mixed"]
    for group in report.corpus.groups:
        texts = groups[group.name]
        assert group.documents == len(texts)
        assert group.characters == sum(map(len, texts))
        assert group.bytes == sum(len(text.encode()) for text in texts)
        assert group.tokens["model"] == sum(map(len, trained.encode_ordinary_batch(texts)))
        assert group.tokens["gpt2"] == sum(map(len, gpt2.encode_ordinary_batch(texts)))
        assert group.bytes_per_token("gpt2") == group.bytes / group.tokens["gpt2"]


def test_an_iterable_corpus_is_grouped_by_script_and_read_in_batches(trained: BPE) -> None:
    texts = CORPUS * 50
    stats = corpus_module.measure(trained, iter(texts), batch_bytes=256)
    names = {group.name: group for group in stats.groups}
    assert set(names) == {"Latin", "Greek", "Japanese"}  # the third text has more Greek letters than Cyrillic
    assert sum(group.documents for group in stats.groups) == len(texts)
    assert int(stats.counts.sum()) == sum(map(len, trained.encode_ordinary_batch(texts)))


def test_the_magikarp_score_ranks_early_merges_that_the_corpus_never_uses_first() -> None:
    # Three merged tokens at merge positions 0, 1, 2 produced 0, 5 and 9 times: by frequency they rank
    # 2, 1, 0, so the scores are (2 - 0) / 2, (1 - 1) / 2 and (0 - 2) / 2.
    counts = np.array([0, 5, 9, 100])
    found = corpus_module.magikarps(counts, {0: 0, 1: 1, 2: 2}, [0, 1, 2, 3], top=5)
    assert [(item.id, item.score, item.count) for item in found] == [(0, 1.0, 0), (1, 0.0, 5), (2, -1.0, 9)]
    # Tokens never produced share their average frequency rank: no order among them is invented.
    tied = corpus_module.magikarps(np.array([0, 0, 3]), {0: 0, 1: 1, 2: 2}, [0, 1, 2], top=5)
    assert [item.score for item in tied] == [0.75, 0.25, -1.0]


def test_near_duplicates_group_case_space_and_punctuation_variants() -> None:
    ranks = {bytes([byte]): byte for byte in range(256)}
    for token in [b"hello", b" hello", b"Hello", b"hello!", b" world", b"HELLO", b"ab", b" Ab"]:
        ranks[token] = len(ranks)
    table = _vocabulary.tokens_of(BPE(ranks, "gpt2"))
    groups = {group.key: group for group in _vocabulary.near_duplicates(table)}
    assert set(groups) == {"hello", "ab"}
    assert groups["hello"].kinds == ["case", "punctuation", "space"] and groups["hello"].extra_ids == 4
    assert groups["ab"].kinds == ["case", "space"]


def test_sentencepiece_spaces_count_as_leading_spaces() -> None:
    model, _ = hand_built_sentencepiece()
    table = _vocabulary.tokens_of(model)
    groups = _vocabulary.near_duplicates(table)
    assert [(group.key, group.kinds) for group in groups] == []  # "▁b" is one character after the space
    assert table.text(model.sentencepiece.pieces.index(next(p for p in model.sentencepiece.pieces  # type: ignore[union-attr]
                                                             if p.text == "▁b"))) == " b"


def test_special_tokens_that_are_ordinary_text_or_overlap_are_reported() -> None:
    ranks = {bytes([byte]): byte for byte in range(256)} | {b"eos": 256}
    model = BPE(ranks, "gpt2", special_tokens={"eos": 257, "<s>": 258, "<s><s>": 259, "s>x": 260})
    found = {special.text: special for special in specials_module.special_tokens(model)}
    assert found["eos"].also_ordinary_token and found["eos"].ordinary_ids == [256]
    assert not found["<s>"].also_ordinary_token
    assert set(specials_module.overlaps(model)) == {
        ("<s>", "<s><s>", "inside"), ("<s>", "s>x", "end-start"), ("<s><s>", "s>x", "end-start"),
        ("eos", "s>x", "end-start"),  # in "eos>x" the leftmost match, eos, hides s>x
    }



def overlaps_by_definition(texts: list[str]) -> list[tuple[str, str, str]]:
    """Every ordered pair of distinct tokens, compared as the audit documents it."""
    found = []
    for first in sorted(texts):
        for second in sorted(texts):
            if first == second:
                continue
            if first in second:
                found.append((first, second, "inside"))
            elif second not in first and any(first.endswith(second[:size]) for size in range(1, len(second))):
                found.append((first, second, "end-start"))
    return found


@pytest.mark.parametrize("alphabet", ["ab", "ab<|>", "xyz\u00e9\u2581"])
def test_overlaps_of_random_special_tokens_follow_the_definition(alphabet: str) -> None:
    """Tokens over a small alphabet (so most pairs overlap, at every length), several sets."""
    rng = random.Random(alphabet)
    ranks = {bytes([byte]): byte for byte in range(256)}
    for _ in range(scaled(40, 10)):
        texts = {"".join(rng.choices(alphabet, k=rng.randint(1, 9))) for _ in range(rng.randint(1, 60))}
        model = BPE(ranks, "gpt2", special_tokens={text: 256 + index for index, text in enumerate(sorted(texts))})
        assert specials_module.overlaps(model) == overlaps_by_definition(sorted(texts))

def test_sentencepiece_unknown_piece_is_produced_by_text_only_without_byte_fallback() -> None:
    from hf_bpe.sentencepiece_bpe import CONTROL, UNKNOWN, Piece, SentencePieceSpec

    pieces = (Piece("<unk>", 0, UNKNOWN), Piece("<s>", 0, CONTROL), Piece("▁", -1), Piece("a", -2))
    model = BPE.from_sentencepiece(SentencePieceSpec(pieces))
    found = {special.text: special for special in specials_module.special_tokens(model)}
    assert found["<unk>"].produced_by_text and not found["<s>"].produced_by_text
    with_bytes, _ = hand_built_sentencepiece()
    assert not any(special.produced_by_text for special in specials_module.special_tokens(with_bytes))


@pytest.mark.parametrize("kind", ["ranks", "merges", "sentencepiece"])
def test_every_model_kind_gives_a_report_with_every_section(kind: str) -> None:
    ranks, _ = hand_built_ranks()
    if kind == "sentencepiece":
        model, _ = hand_built_sentencepiece()
    elif kind == "merges":
        model = BPE.from_merges(ranks, BPE(ranks, "gpt2").merges, "gpt2")
    else:
        model = BPE(ranks, "gpt2", special_tokens={"<|endoftext|>": len(ranks)})
    report = hf_bpe.audit.audit(model, {"en": CORPUS[:2], "other": CORPUS[2:]}, compare=["gpt2"], corpus_name="samples")
    document = json.loads(report.to_json())
    summary = document["summary"]
    assert summary["kind"] == kind
    assert summary["unreachable"] == len(report.unreachable) == len(document["unreachable"])
    assert summary["partial_utf8"] == len(report.partial_utf8)
    assert [entry["id"] for entry in document["corpus"]["unused"]] == report.unused
    markdown = report.to_markdown()
    for heading in ["## Summary", "## Unreachable tokens", "## Partial UTF-8 tokens", "## Usage on samples",
                    "## Compression", "## Near duplicates", "## Special tokens", "## Token lengths"]:
        assert heading in markdown


def test_charts_are_png_files(tmp_path: Path, trained: BPE) -> None:
    pytest.importorskip("matplotlib", reason="charts need matplotlib: pip install 'hf_bpe[plots]'")
    report = hf_bpe.audit.audit(trained, {"en": CORPUS[:2], "other": CORPUS[2:]}, compare=["gpt2"])
    paths = report.plots(tmp_path / "charts")
    assert set(paths) == {"findings", "lengths", "compression", "usage"}
    for path in paths.values():
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert sorted(path.name for path in (tmp_path / "charts").iterdir()) == sorted(path.name for path in paths.values())


@pytest.mark.parametrize("groups", [1, 2, 4])
@pytest.mark.parametrize("compare", [[], ["gpt2"], ["gpt2", "o200k_base"]])
def test_the_compression_charts_legend_covers_no_bar_or_label(
    tmp_path: Path, trained: BPE, groups: int, compare: list[str]
) -> None:
    """Drawn as saved (tight layout, 100 dpi): the legend's box meets no bar and no value label, and
    stays inside the figure (inside the plot, "best" put it over a bar or the last bar's label)."""
    pytest.importorskip("matplotlib", reason="charts need matplotlib: pip install 'hf_bpe[plots]'")
    from hf_bpe.audit import _plots

    corpus = {f"group {index}": CORPUS[index::groups] for index in range(groups)}
    report = hf_bpe.audit.audit(trained, corpus, compare=compare)
    plt = _plots.pyplot()
    figure = _plots._compression(plt, report)
    try:
        figure.set_dpi(100)
        figure.tight_layout()
        figure.canvas.draw()
        renderer = figure.canvas.get_renderer()
        axes = figure.axes[0]
        legend = axes.get_legend().get_window_extent(renderer)
        labels = [text.get_window_extent(renderer) for text in axes.texts]
        bars = [patch.get_window_extent(renderer) for patch in axes.patches]
        assert len(labels) == len(bars) == (1 + len(compare)) * groups
        for box in labels + bars:
            assert not legend.overlaps(box), (legend, box)
        whole = figure.bbox
        assert whole.x0 <= legend.x0 and legend.x1 <= whole.x1 and whole.y0 <= legend.y0 and legend.y1 <= whole.y1
    finally:
        plt.close(figure)
    assert report.plots(tmp_path, ["compression"])["compression"].read_bytes()[:4] == b"\x89PNG"


def test_charts_without_matplotlib_say_how_to_get_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                    trained: BPE) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    report = hf_bpe.audit.audit(trained)
    with pytest.raises(ImportError, match=r"pip install 'hf_bpe\[plots\]'"):
        report.plots(tmp_path)
    assert "## Summary" in report.to_markdown()


def test_compare_must_name_tokenizers_once(trained: BPE) -> None:
    with pytest.raises(ValueError, match="more than one tokenizer labelled"):
        hf_bpe.audit.audit(trained, CORPUS, compare={"model": trained})
    with pytest.raises(TypeError, match="single one"):
        hf_bpe.audit.audit(trained, CORPUS, compare="gpt2")  # type: ignore[arg-type]


# --------------------------------------------------------------------------------------------- CLI


def test_cli_prints_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["audit", "gpt2", "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["summary"]["unreachable"] == 13
    assert document["summary"]["partial_utf8_by_kind"] == {"lead": 232, "continuation": 95, "mixed": 4,
                                                           "invalid": 13}


def test_cli_writes_report_and_charts_for_a_corpus(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                   trained: BPE) -> None:
    folder = tmp_path / "tokenizer.json"
    trained.save(folder)
    corpus = tmp_path / "en.txt"
    corpus.write_text("\n".join(CORPUS), encoding="utf-8")
    out = tmp_path / "audit"
    assert main(["audit", str(folder), "--from", "hf_bpe", "--corpus", str(corpus), "--compare", "gpt2",
                 "--out", str(out)]) == 0
    assert "never produced on the corpus" in capsys.readouterr().out
    document = json.loads((out / "audit.json").read_text(encoding="utf-8"))
    assert [group["group"] for group in document["corpus"]["compression"]] == ["en"]
    assert (out / "audit.md").read_text(encoding="utf-8").startswith("# Vocabulary audit: trained")


def test_cli_refuses_unknown_tokenizers_and_non_utf8_corpora(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["audit", "no-such-tokenizer"])
    assert exited.value.code == 2
    assert "neither a named encoding" in capsys.readouterr().err
    latin1 = tmp_path / "latin1.txt"
    latin1.write_bytes("café".encode("latin-1"))
    assert main(["audit", "gpt2", "--corpus", str(latin1)]) == 1
    assert f"--corpus {latin1} is not UTF-8 text" in capsys.readouterr().err


@pytest.mark.slow
def test_shared_corpora_compression_matches_direct_encoding() -> None:
    folder = require_shared("corpora")
    texts = {name: (folder / f"wiki_{name}.txt").read_text(encoding="utf-8")[: scaled(50_000)].split("\n")
             for name in ("el", "ja")}
    cl100k = hf_bpe.get_encoding("cl100k_base")
    stats = corpus_module.measure(hf_bpe.get_encoding("o200k_base"), texts, {"cl100k_base": cl100k})
    for group in stats.groups:
        assert group.tokens["cl100k_base"] == sum(map(len, cl100k.encode_ordinary_batch(texts[group.name])))
        assert group.characters_per_token("model") > group.characters_per_token("cl100k_base")


@pytest.mark.parametrize("pattern", ["gpt2", "o200k", r"\w+|\s+|[^\w\s]+"])
def test_training_usage_counts_what_encoding_the_training_corpus_produces(pattern: str) -> None:
    from hf_bpe.audit import produced_on, training_usage

    rng = random.Random(pattern)
    texts = ["".join(rng.choice(["a", "b", " ", "é", "あ", "\n", "1", ".", "  "]) for _ in range(80)) for _ in range(60)]
    model = hf_bpe.train(texts, 256 + 60, pattern=pattern, show_progress=False)
    counts = count_pieces(texts, pattern=pattern, show_progress=False)
    direct = token_counts(model, texts)
    assert produced_on(model, counts).tolist() == direct.tolist()
    usage = training_usage(model, counts, rare_below=3)
    reachable = hf_bpe.audit.audit(model).reachability.reachable
    assert usage["tokens"] == int(direct.sum())
    assert usage["never"] == sum(1 for id in reachable if direct[id] == 0)
    assert usage["rare"] == sum(1 for id in reachable if 0 < direct[id] < 3)
    assert sum(usage["histogram"].values()) == len(reachable)


@pytest.mark.parametrize("kind", ["ranks", "merges", "merges ignoring merges"])
def test_piece_token_counts_are_the_token_counts_of_the_counted_texts(kind: str) -> None:
    """Random vocabularies (many tokens not valid, so the whole-piece rule matters) under two patterns,
    on random texts over characters that share bytes: counting each distinct piece once must give
    what encoding every text gives."""
    from audit_vocabularies import ALPHABET, random_rank_model, random_tokens

    for pattern in ("gpt2", r"\S+|\s+"):
        rng = random.Random(f"{kind} {pattern}")
        if kind == "ranks":
            model = random_rank_model(rng, pattern)
        else:
            vocab = {bytes([byte]): byte for byte in range(256)}
            merges = []
            for token in random_tokens(rng, 60):
                if token not in vocab and token[:1] in vocab and token[1:] in vocab:
                    vocab[token] = len(vocab)
                    merges.append((token[:1], token[1:]))
            model = BPE.from_merges(vocab, merges, pattern, ignore_merges=kind == "merges ignoring merges")
        texts = ["".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 40))) for _ in range(300)]
        counts = count_pieces(texts, pattern=pattern, show_progress=False)
        assert piece_token_counts(model, counts).tolist() == token_counts(model, texts).tolist()


def test_trained_folder_card_has_the_audit_and_usage_on_the_training_corpus(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(CORPUS * 20), encoding="utf-8")
    out = tmp_path / "tokenizer"
    assert main(["train", str(corpus), "--vocab-size", "300", "--out", str(out), "--quiet"]) == 0
    card = (out / "README.md").read_text(encoding="utf-8")
    section = card[card.index("## Vocabulary audit"):]
    assert "| unreachable: no text encodes to them | 13 (e.g. `b'\\xc0'`" in section
    assert "On the training corpus (" in section
    if "matplotlib" in sys.modules or _has_matplotlib():
        assert "![Audit findings](audit_findings.png)" in section
        assert (out / "audit_findings.png").read_bytes()[:4] == b"\x89PNG"
        assert (out / "audit_training_usage.png").read_bytes()[:4] == b"\x89PNG"


def test_card_without_a_known_corpus_skips_the_corpus_part(tmp_path: Path, trained: BPE) -> None:
    from hf_bpe.transformers import save_tokenizer_folder

    save_tokenizer_folder(trained, tmp_path)
    section = (tmp_path / "README.md").read_text(encoding="utf-8").split("## Vocabulary audit")[1]
    assert "The training corpus is not recorded in this folder" in section
    assert not (tmp_path / "audit_training_usage.png").exists()


def _has_matplotlib() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True
