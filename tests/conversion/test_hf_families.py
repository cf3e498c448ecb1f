"""The split of each model family's ``tokenizer.json`` runs on its hand-written scanner when hf_bpe
has one (recognised by meaning, confirmed by the load-time probe), and every file encodes exactly as
`tokenizers` does, on a vocabulary `tokenizers` trains with that pre-tokenizer.

The pre-tokenizers are ``tests/data/family_pre_tokenizers.json``: each family's, as its files spell
it, with the engine hf_bpe runs it on."""

from __future__ import annotations

import json
import random
from pathlib import Path

import oniguruma_patterns
import pytest
from conversion_support import varied_texts
from suite import scaled

import conversion._hf_pretokenizers as hf_pretokenizers
import conversion.hf as hf_load
from hf_bpe import BPE, patterns
from hf_bpe.model import recognized_split

tokenizers = pytest.importorskip("tokenizers", reason="tokenizers is the oracle; pip install -e '.[test]'")
from tokenizers import Tokenizer, decoders, models, trainers

FAMILIES = {name: family for name, family in json.loads(
    (Path(__file__).parents[1] / "data" / "family_pre_tokenizers.json").read_text(encoding="utf-8")).items()
    if not name.startswith("_")}


def family_file(name: str, tmp_path: Path) -> Path:
    """A tokenizer.json that `tokenizers` trains (600 tokens) with the family's pre-tokenizer."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = Tokenizer.from_str(json.dumps({
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": [], "normalizer": None,
        "pre_tokenizer": FAMILIES[name]["pre_tokenizer"], "post_processor": None, "decoder": None,
        "model": {"type": "BPE", "vocab": {}, "merges": []}})).pre_tokenizer
    tokenizer.decoder = decoders.ByteLevel()
    alphabet = [chr(c) for c in range(0x21, 0x7F)] + [chr(c) for c in range(0xA1, 0x100) if c != 0xAD] + \
        [chr(c) for c in range(0x100, 0x144)]
    trainer = trainers.BpeTrainer(vocab_size=600, special_tokens=["<|endoftext|>"], show_progress=False,
                                  initial_alphabet=alphabet)
    tokenizer.train_from_iterator([*varied_texts(300, seed=3), *oniguruma_patterns.texts(random.Random(4), 300)],
                                  trainer=trainer)
    path = tmp_path / name / "tokenizer.json"
    path.parent.mkdir(parents=True)
    path.write_text(tokenizer.to_str(), encoding="utf-8")
    return path


def tie_heavy_texts(count: int, seed: int) -> list[str]:
    """Texts made of the characters where the split rules differ: contractions with folding
    look-alikes, digit runs of every length and script, white space runs with and without line
    breaks before letters and ends, case changes, marks, CJK and punctuation tails."""
    rng = random.Random(seed)
    parts = ["'s", "'S", "'\u017f", "'ll", "'LL", "'Ve", "'re", "'d", "'m", "'t", "'", "'x", "1", "12", "1234567",
             "\u0663\u0664", "\uff11\uff12\uff13\uff14", "\u00b2", " ", "  ", "\t", "\n", "\r\n", " \n ", "\n\n",
             "\u3000", "\xa0", "\u2028", "a", "Hello", "HTML", "Parser", "\u01c5", "\u02b0", "e\u0301", "\u0301",
             "\u0915\u093c", "\u4e2d\u6587", "\u3042", "!", "?!", "...", "/", "//", "<|", "\U0001f600", "\u212a",
             "\ufeff", "\x00", "\x85"]
    return ["".join(rng.choice(parts) for _ in range(rng.randint(1, 30))) for _ in range(count)]


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_each_family_runs_on_its_engine_and_encodes_as_tokenizers(name: str, tmp_path: Path) -> None:
    path = family_file(name, tmp_path)
    ours, theirs = hf_load.load(path), Tokenizer.from_file(str(path))
    assert ours._core.split_engine == FAMILIES[name]["engine"]
    texts = [*tie_heavy_texts(scaled(1500), seed=len(name)), *varied_texts(scaled(500), seed=5),
             "".join(tie_heavy_texts(200, seed=9))]
    for text in texts:
        expected = theirs.encode(text, add_special_tokens=False).ids
        assert ours.encode(text, allowed_special="all") == expected, f"{name} on {text!r:.200}"


def test_recognition_gives_a_candidate_that_the_probe_still_judges() -> None:
    """A split recognised by its meaning is only a candidate: when the probe finds a difference (here a
    `tokenizers` pre-tokenizer that is not the recognised split), the file is refused as before."""
    llama3 = FAMILIES["llama3"]["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"]
    respelled = llama3.replace("(?i:'s|'t|'re|'ve|'m|'ll|'d)", "'(?i:[sdmt]|ll|ve|re)")
    recognized = recognized_split(patterns.Split(respelled, "isolated"))
    assert recognized == patterns.Split(llama3, "isolated")
    model = BPE({bytes([b]): b for b in range(256)}, recognized)
    assert model._core.split_engine == "scanner llama3 (Oniguruma)"
    qwen2 = FAMILIES["qwen2"]["pre_tokenizer"]
    difference = hf_pretokenizers.pre_tokenizer_difference(model, qwen2)
    assert difference is not None and "by tokenizers" in difference
    assert recognized_split(patterns.Split(r"\w+|\s+", "isolated")) is None
    assert recognized_split(patterns.Split(respelled, "merged_with_next")) is None
