"""Merge residue in the audit (``hf_bpe/audit/_residue.py``): on models built so that the answer is known by
construction (rank, merges-list and SentencePiece models), and on gpt2 with a corpus against an independent
computation (tiktoken's counts, merges recovered by running BPE on each token with lower ranks only)."""

from __future__ import annotations

import itertools
import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from suite import require_shared, scaled

import hf_bpe
import hf_bpe.audit
from hf_bpe.audit._residue import merge_parents, merge_residue
from hf_bpe.cli import main
from hf_bpe.sentencepiece_bpe import CONTROL, UNKNOWN, Piece, SentencePieceSpec

BYTES = {bytes([byte]): byte for byte in range(256)}
EXTRA = [b"ab", b"abc", b"abd", b"xy", b"pq", b"pqr", b"cd", b"cde", b"gh", b"ghi"]
RANKS = BYTES | {token: 256 + i for i, token in enumerate(EXTRA)}
ID = {token: RANKS[token] for token in EXTRA}

CORPUS = ["abc abd " * 60_000 + "ab xy", "cd cde cde " * 40 + "gh ghi"]
"""By construction, with the split ``\\w+| `` (about 240,000 tokens, so 1e-5 of them is 2.4):

- ``ab``: emitted once, its parents ``abc`` and ``abd`` 120,000 times: residue;
- ``xy``: emitted once, but no token is made from it: not residue;
- ``pq``: a step of ``pqr``, neither occurs: unused, not residue;
- ``cd``: a step of ``cde``, emitted 40 times (above the share), ``cde`` 80 times: not residue, but it is
  with a share above 40 tokens in 240,000;
- ``gh``: emitted once, as often as its parent ``ghi``: not residue (its bytes do not mostly end up in
  ``ghi``)."""


def assert_known_residue(model: hf_bpe.BPE, ab: int) -> None:
    report = hf_bpe.audit.audit(model, {"text": CORPUS}, corpus_name="the constructed corpus")
    assert report.merge_residue == [ab]
    [found] = report.residue
    assert (found.count, found.parents_count) == (1, 120_000)
    summary = report.summary()
    assert summary["merge_residue"] == 1 and summary["residue_below"] == 1e-5
    document = json.loads(report.to_json())
    assert [entry["id"] for entry in document["corpus"]["merge_residue"]] == [ab]
    markdown = report.to_markdown()
    assert "## Merge residue" in markdown and "1 merged tokens" in markdown
    # A share above every rare token's: ``gh`` is still out (condition 3), ``cd`` comes in.
    wider = hf_bpe.audit.audit(model, {"text": CORPUS}, residue_below=1e-3)
    assert sorted(wider.merge_residue) == sorted([ab, model.encode_single_token("cd")])


def test_a_rank_model_built_to_have_one_residue_token_has_exactly_it() -> None:
    model = hf_bpe.BPE(RANKS, r"\w+| ")
    assert merge_parents(model)[ID[b"ab"]] == (ID[b"abc"], ID[b"abd"])
    assert ID[b"xy"] not in merge_parents(model)
    assert_known_residue(model, ID[b"ab"])


def test_a_merges_list_model_built_to_have_one_residue_token_has_exactly_it() -> None:
    """The same vocabulary with shuffled ids and its merges listed explicitly."""
    order = [token for token in RANKS]
    order.reverse()
    vocab = {token: i for i, token in enumerate(order)}
    merges = [(token[:-1], token[-1:]) if token[:-1] in vocab else (token[:1], token[1:]) for token in EXTRA]
    model = hf_bpe.BPE.from_merges(vocab, merges, r"\w+| ")
    assert_known_residue(model, vocab[b"ab"])


def test_a_sentencepiece_model_built_to_have_one_residue_token_has_exactly_it() -> None:
    """``▁a`` is made into ``▁ab``: a word ``a`` alone once, ``ab`` 1,000 times."""
    pieces = [Piece("<unk>", 0, UNKNOWN), Piece("<s>", 0, CONTROL), Piece("▁a", -1), Piece("▁ab", -2),
              Piece("▁x", -3), Piece("▁", -4), Piece("a", -5), Piece("b", -6), Piece("x", -7)]
    model = hf_bpe.BPE.from_sentencepiece(SentencePieceSpec(tuple(pieces)))
    assert merge_parents(model) == {2: (3,), 5: (2, 4), 6: (2,), 7: (3,), 8: (4,)}
    report = hf_bpe.audit.audit(model, {"text": ["ab " * 100_000 + "a x"]})
    assert report.merge_residue == [2]
    assert (report.residue[0].count, report.residue[0].parents_count) == (1, 100_000)


def test_without_a_corpus_there_is_no_residue_and_a_bad_share_is_refused() -> None:
    model = hf_bpe.BPE(RANKS, r"\w+| ")
    report = hf_bpe.audit.audit(model)
    assert report.merge_residue == [] and "merge_residue" not in report.summary()
    for bad in (0, 1.5, -1e-5, True):
        with pytest.raises(ValueError, match="residue_below must be a share"):
            hf_bpe.audit.audit(model, CORPUS, residue_below=bad)


# ---------------------------------------------------------------------------------- gpt2, independently


def recovered_merges(ranks: dict[bytes, int]) -> dict[bytes, tuple[bytes, bytes]]:
    """minbpe's recovery: each token's last merge when BPE runs on its bytes with lower ranks only."""
    found = {}
    for token, rank in ranks.items():
        parts = [bytes([byte]) for byte in token]
        while True:
            candidates = [(ranks[a + b], i) for i, (a, b) in enumerate(itertools.pairwise(parts))
                          if ranks.get(a + b, rank) < rank]
            if not candidates:
                break
            _, i = min(candidates)
            parts[i:i + 2] = [parts[i] + parts[i + 1]]
        if len(parts) == 2:
            found[token] = (parts[0], parts[1])
    return found


def test_gpt2_residue_on_a_corpus_is_the_definition_from_tiktoken_s_counts(
    tiktoken_encoding: Callable[[str], Any],
) -> None:
    theirs = tiktoken_encoding("gpt2")
    folder = require_shared("corpora")
    texts = [(folder / name).read_text(encoding="utf-8")[: scaled(400_000)]
             for name in ("taylorswift.txt", "shakespeare_milton.txt")]
    counts = Counter(token for text in texts for token in theirs.encode_ordinary(text))
    total = sum(counts.values())
    ranks = theirs._mergeable_ranks
    parents: dict[int, set[int]] = {}
    for token, (left, right) in recovered_merges(ranks).items():
        for part in (left, right):
            parents.setdefault(ranks[part], set()).add(ranks[token])
    share = 1e-4
    expected = sorted(
        (counts[id], id) for id, made in parents.items()
        if len(theirs.decode_single_token_bytes(id)) > 1 and counts[id] < share * total
        and counts[id] < sum(counts[parent] for parent in made)
    )
    report = hf_bpe.audit.audit(hf_bpe.get_encoding("gpt2"), texts, residue_below=share)
    assert [(found.count, found.id) for found in report.residue] == expected
    assert len(expected) > 500
    produced = np.bincount(np.array(list(counts.elements())), minlength=50257)
    assert [found.id for found in merge_residue(hf_bpe.get_encoding("gpt2"), produced, residue_below=share)] == [
        id for _, id in expected]


def test_cli_audit_with_a_corpus_shows_the_residue(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    corpus = tmp_path / "constructed.txt"
    corpus.write_text("\n".join(CORPUS), encoding="utf-8")
    model = tmp_path / "model.json"
    hf_bpe.BPE(RANKS, r"\w+| ").save(model)
    assert main(["audit", str(model), "--from", "hf_bpe", "--corpus", str(corpus)]) == 0
    out = capsys.readouterr().out
    assert "## Merge residue" in out and "`'ab'`" in out
    assert main(["audit", str(model), "--from", "hf_bpe", "--corpus", str(corpus), "--out", str(tmp_path / "a"),
                 "--residue-below", "0.001"]) == 0
    assert "2 merge residue" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["audit", "gpt2", "--corpus", str(corpus), "--residue-below", "2"])
