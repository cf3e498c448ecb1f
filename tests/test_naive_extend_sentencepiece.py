"""Continuing SentencePiece's loop (``tests/support/naive_extend_sentencepiece.py``) is training longer, by
``sentencepiece`` 0.2.3 itself: a model ``SentencePieceTrainer`` trains to ``m`` pieces, continued on its own
corpus for ``k`` pieces, learns the pieces (texts and scores) it trains to ``m + k``, and the extended model
(the ``.model`` with the new pieces appended) encodes every text as the longer one does. Corpora: sentences
of words over a few Latin letters, repeated equally often (ties decide many merges), identity normalizer,
full character coverage; and a slice of the shared Shakespeare corpus reduced to such words."""

from __future__ import annotations

import io
import random
import re
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from naive_extend_sentencepiece import (
    SPACE,
    continue_sentencepiece,
    encode_word,
    simple_words,
)
from suite import require_shared, scaled

spm = pytest.importorskip("sentencepiece")
pb2 = pytest.importorskip("sentencepiece.sentencepiece_model_pb2", reason="reading .model files needs protobuf")

NORMAL = 1
OPTIONS = {"model_type": "bpe", "normalization_rule_name": "identity", "character_coverage": 1.0,
           "byte_fallback": False, "num_threads": 1, "minloglevel": 2}


def train(sentences: list[str], vocab_size: int, **options: Any) -> Any:
    """``SentencePieceTrainer``'s model as a ``ModelProto``, or None when the corpus has too few pairs."""
    written = io.BytesIO()
    try:
        spm.SentencePieceTrainer.train(sentence_iterator=iter(sentences), model_writer=written,
                                       vocab_size=vocab_size, **(OPTIONS | options))
    except RuntimeError as error:
        if "Vocabulary size too high" in str(error) or "vocab_size" in str(error):
            return None
        raise
    proto = pb2.ModelProto()
    proto.ParseFromString(written.getvalue())
    return proto


def learned(proto: Any) -> list[tuple[str, float]]:
    return [(piece.piece, piece.score) for piece in proto.pieces if piece.type == NORMAL and len(piece.piece) > 1]


def normal_pieces(proto: Any) -> dict[str, float]:
    return {piece.piece: piece.score for piece in proto.pieces if piece.type == NORMAL}


def tie_sentences(rng: random.Random, words: int) -> list[str]:
    letters = rng.sample("abcdefgh", rng.randint(2, 4))
    vocabulary = sorted({"".join(rng.choices(letters, k=rng.randint(1, 7))) for _ in range(words)})
    occurrences = [word for word in vocabulary for _ in range(rng.choice([1, 2, 3]))]
    rng.shuffle(occurrences)
    sentences, start = [], 0
    while start < len(occurrences):
        size = rng.randint(1, 8)
        sentences.append(" ".join(occurrences[start:start + size]))
        start += size
    return sentences


def assert_continuing_is_training_longer(sentences: list[str], vocab_size: int, more: int,
                                         **options: Any) -> bool:
    """False when the sentences run out of pairs first (SentencePiece then learns pairs whose occurrences
    are gone, at frequency 0, in the order of its own bookkeeping; an extension stops)."""
    shorter, longer = train(sentences, vocab_size, **options), train(sentences, vocab_size + more, **options)
    if shorter is None or longer is None:
        return False
    max_length = options.get("max_sentencepiece_length", 16)
    new = continue_sentencepiece(simple_words(sentences), normal_pieces(shorter), more,
                                 lambda text: len(text) <= max_length and SPACE not in text[1:])
    if len(new) < more:
        return False
    before = len(learned(shorter))
    assert learned(longer)[:before] == learned(shorter)
    assert new == learned(longer)[before:before + more]
    extended = pb2.ModelProto()
    extended.CopyFrom(shorter)
    for text, score in new:
        extended.pieces.add(piece=text, score=score, type=NORMAL)
    ours = spm.SentencePieceProcessor(model_proto=extended.SerializeToString())
    theirs = spm.SentencePieceProcessor(model_proto=longer.SerializeToString())
    texts = [*sentences, *tie_sentences(random.Random(len(sentences)), 30)]
    assert ours.encode(texts, out_type=str) == theirs.encode(texts, out_type=str)
    return True


@settings(max_examples=scaled(25), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32), words=st.integers(3, 60), pieces=st.integers(0, 40), more=st.integers(1, 25),
       max_length=st.sampled_from([16, 16, 3, 5]))
def test_continuing_is_training_longer_on_text_full_of_ties(
    seed: int, words: int, pieces: int, more: int, max_length: int
) -> None:
    rng = random.Random(seed)
    sentences = tie_sentences(rng, words)
    characters = len(set("".join(sentences))) + 1  # and "▁"
    assume(assert_continuing_is_training_longer(sentences, 3 + characters + pieces, more,
                                                max_sentencepiece_length=max_length))


def test_continuing_is_training_longer_on_shakespeare() -> None:
    text = require_shared("corpora", "shakespeare_milton.txt").read_text(encoding="utf-8")[200_000:200_000 +
                                                                                          scaled(6_000)]
    sentences = [" ".join(re.findall("[a-z]+", line.lower())) for line in text.splitlines()]
    sentences = [sentence for sentence in sentences if sentence]
    assert assert_continuing_is_training_longer(sentences, 150, 60)


def test_the_encoder_is_sentencepiece() -> None:
    rng = random.Random(7)
    sentences = tie_sentences(rng, 80)
    proto = train(sentences, 60)
    processor = spm.SentencePieceProcessor(model_proto=proto.SerializeToString())
    known = normal_pieces(proto)
    words = [word for word in simple_words(sentences + tie_sentences(rng, 40)) if set(word) <= set(known)]
    assert len(words) > 50
    for word in words:
        assert encode_word(word, normal_pieces(proto)) == processor.encode(word[1:], out_type=str), word


def test_the_reference_s_examples_run() -> None:
    import doctest

    import naive_extend_sentencepiece

    result = doctest.testmod(naive_extend_sentencepiece)
    assert result.failed == 0 and result.attempted > 0
