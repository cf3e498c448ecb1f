"""Train a SentencePiece BPE model (Llama 2, Mistral style): the vocabulary ``spm_train`` learns.

:func:`train_sentencepiece` takes ``SentencePieceTrainer``'s option names and defaults and returns
an :class:`hf_bpe.BPE` of kind ``"sentencepiece"``, with the same pieces, in the same order, with the
same scores and types as ``sentencepiece.SentencePieceTrainer.train(model_type="bpe", ...)`` gives
on the same sentences (when there are no more of them than ``input_sentence_size``: SentencePiece
samples larger corpora at random). ``conversion.sentencepiece.save`` writes its ``.model`` file.

The corpus is read as ``spm_train`` reads its input files: every line (text between ``\\n``) is a
sentence, from ``files=`` or from each document of ``corpus``. Unlike SentencePiece, which keeps
every sentence in memory, the words are counted as the corpus streams: memory grows with the
number of distinct words, not with the corpus.

>>> import hf_bpe
>>> model = hf_bpe.train_sentencepiece(["low lower lowest", "newer newest"], 30,
...                                    normalization_rule_name="identity", show_progress=False)
>>> model.sentencepiece.pieces[3:6]
(Piece(text='we', score=-0.0, type=1), Piece(text='lo', score=-1.0, type=1), Piece(text='▁lo', score=-2.0, type=1))
>>> model.encode_ordinary("lowest")
[14]
"""

from __future__ import annotations

import functools
import io
import os
import struct
import warnings
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, nullcontext
from typing import Any

from hf_bpe import _core
from hf_bpe._corpus import Corpus, Files, Paths, open_source
from hf_bpe.model import BPE
from hf_bpe.sentencepiece_bpe import BYTE, CONTROL, NORMAL, UNKNOWN, USER_DEFINED, Piece, SentencePieceSpec

__all__ = ["LLAMA2_OPTIONS", "train_sentencepiece"]

#: SentencePieceTrainer's options this trainer follows, with their defaults (``sentencepiece_model.proto``).
OPTIONS: dict[str, Any] = {
    "model_type": "bpe",
    "character_coverage": 0.9995,
    "input_sentence_size": 0,
    "shuffle_input_sentence": True,
    "max_sentence_length": 4192,
    "max_sentencepiece_length": 16,
    "split_by_unicode_script": True,
    "split_by_number": True,
    "split_by_whitespace": True,
    "split_digits": False,
    "allow_whitespace_only_pieces": False,
    "control_symbols": (),
    "user_defined_symbols": (),
    "byte_fallback": False,
    "unk_id": 0,
    "bos_id": 1,
    "eos_id": 2,
    "pad_id": -1,
    "unk_piece": "<unk>",
    "bos_piece": "<s>",
    "eos_piece": "</s>",
    "pad_piece": "<pad>",
    "unk_surface": " \u2047 ",
    "normalization_rule_name": "nmt_nfkc",
    "add_dummy_prefix": True,
    "remove_extra_whitespaces": True,
    "num_threads": 16,
}

#: Options that shape only unigram training or only SentencePiece's own files and logs: accepted,
#: without effect (as SentencePiece ignores them for BPE).
NO_EFFECT: dict[str, Any] = {
    "seed_sentencepiece_size": 1000000,
    "shrinking_factor": 0.75,
    "num_sub_iterations": 2,
    "mining_sentence_size": 0,
    "training_sentence_size": 0,
    "train_extremely_large_corpus": False,
    "vocabulary_output_piece_score": True,
    "minloglevel": 0,
}

#: Options with the only value supported, and why another is refused.
FIXED: dict[str, tuple[Any, str]] = {
    "treat_whitespace_as_suffix": (False, "whitespace as a suffix is not supported (hf_bpe reads such models neither)"),
    "escape_whitespaces": (True, "SentencePiece's BPE trainer requires escaped whitespace"),
    "hard_vocab_limit": (True, "a soft vocabulary limit is not supported"),
    "use_all_vocab": (False, "SentencePiece refuses use_all_vocab for BPE"),
    "required_chars": ("", "required_chars is not supported"),
    "auto_character_coverage": (False, "automatic character coverage is not supported; set character_coverage"),
    "self_test_sample_size": (0, "self-test samples are not written"),
    "input_format": ("", "only plain text is read (one sentence per line); the tsv format is not supported"),
    "pretokenization_delimiter": ("", "pretokenization_delimiter is not supported"),
    "seed_sentencepieces_file": ("", "SentencePiece uses seed pieces for unigram models only"),
    "enable_differential_privacy": (False, "differential privacy is not supported"),
    "differential_privacy_noise_level": (0.0, "differential privacy is not supported"),
    "differential_privacy_clipping_threshold": (0, "differential privacy is not supported"),
    "normalization_rule_tsv": ("", "custom normalization rules are not supported; use normalization_rule_name"),
    "denormalization_rule_tsv": ("", "denormalization rules are not supported"),
}

#: What hf_bpe takes in place of SentencePiece's file options.
NOT_HERE = {
    "input": "give the corpus as files=[...] or as an iterable of str",
    "model_prefix": "train_sentencepiece returns the model; write it with conversion.sentencepiece.save(model, "
    "'name.model')",
    "sentence_iterator": "give the iterable of str as the corpus",
    "model_writer": "write the model with conversion.sentencepiece.save",
}

RULE_NAMES = ("nmt_nfkc", "nfkc", "nmt_nfkc_cf", "nfkc_cf", "identity")

#: The options people use to reproduce Llama 2's tokenizer (vocab_size=32000).
LLAMA2_OPTIONS: Mapping[str, Any] = {
    "model_type": "bpe",
    "normalization_rule_name": "identity",
    "remove_extra_whitespaces": False,
    "input_sentence_size": 200000000,
    "max_sentence_length": 4192,
    "seed_sentencepiece_size": 1000000,
    "shuffle_input_sentence": True,
    "character_coverage": 0.99995,
    "byte_fallback": True,
    "split_digits": True,
    "split_by_unicode_script": True,
    "split_by_whitespace": True,
    "split_by_number": True,
    "max_sentencepiece_length": 16,
    "add_dummy_prefix": True,
    "allow_whitespace_only_pieces": True,
    "unk_id": 0,
    "bos_id": 1,
    "eos_id": 2,
    "pad_id": -1,
}


def train_sentencepiece(
    corpus: Corpus | None = None,
    vocab_size: int | None = None,
    *,
    files: Paths | None = None,
    show_progress: bool = True,
    text_column: str = "text",
    name: str | None = None,
    **options: Any,
) -> BPE:
    """Learn a SentencePiece BPE model of ``vocab_size`` pieces, as ``spm_train`` would.

    The corpus is given as for :func:`hf_bpe.train` (``files=``, an iterable of ``str``, a
    ``datasets`` dataset); each line is a sentence. ``options`` are ``SentencePieceTrainer``'s, with
    its names and defaults (``character_coverage=0.9995``, ``byte_fallback=False``,
    ``split_digits=False``, ``normalization_rule_name="nmt_nfkc"``, ``unk_id=0``, ``bos_id=1``,
    ``eos_id=2``, ``pad_id=-1``, ...), so an option dict written for it passes through:
    ``hf_bpe.train_sentencepiece(files=paths, vocab_size=32000, **LLAMA2_OPTIONS)``. Options that
    matter only for unigram models (``seed_sentencepiece_size``, ...) are accepted without effect,
    as in SentencePiece; options this trainer does not support raise ``ValueError`` naming them;
    ``model_type`` other than ``"bpe"`` is refused. Normalization rules other than ``identity``
    take their character map from the installed ``sentencepiece`` package.

    Sentences longer than ``max_sentence_length`` bytes are skipped, as SentencePiece skips them
    (a warning says how many). ``num_threads`` sets the threads that normalize and count.

    >>> import hf_bpe
    >>> model = hf_bpe.train_sentencepiece(["aaab aab", "ab"], 12, normalization_rule_name="identity",
    ...                                    byte_fallback=False, show_progress=False)
    >>> [piece.text for piece in model.sentencepiece.pieces]
    ['<unk>', '<s>', '</s>', 'aa', 'ab', '▁aa', '▁ab', '▁aab', '▁aaab', 'a', 'b', '▁']
    """
    settings = _settings(options)
    if vocab_size is None:
        raise TypeError("vocab_size is required: the number of pieces, meta pieces included (e.g. vocab_size=32000)")
    if isinstance(vocab_size, bool) or not isinstance(vocab_size, int):
        raise TypeError(f"vocab_size must be an int, got {type(vocab_size).__name__}")
    if vocab_size <= 0:
        raise ValueError(f"vocab_size must be positive, got {vocab_size}")
    meta = _meta_pieces(settings, vocab_size)
    charsmap = _charsmap(settings["normalization_rule_name"])
    input_sentence_size = settings["input_sentence_size"]
    counter = _core.SentencePieceWordCounter(
        charsmap=charsmap,
        add_dummy_prefix=settings["add_dummy_prefix"],
        remove_extra_whitespaces=settings["remove_extra_whitespaces"],
        max_sentence_length=settings["max_sentence_length"],
        split_by_whitespace=settings["split_by_whitespace"],
        allow_whitespace_only_pieces=settings["allow_whitespace_only_pieces"],
        first_sentences=0 if settings["shuffle_input_sentence"] else max(input_sentence_size, 0),
        meta_pieces=[piece.text for piece in meta.values()],
        num_threads=settings["num_threads"],
    )
    sentences = read_sentences(counter, corpus, files, text_column, show_progress, settings["max_sentence_length"])
    if settings["shuffle_input_sentence"] and 0 < input_sentence_size < sentences:
        raise ValueError(
            f"the corpus has {sentences} sentences, more than input_sentence_size={input_sentence_size}: "
            "SentencePiece would train on a random sample of them, which hf_bpe does not reproduce. Pass "
            "input_sentence_size=0 (every sentence) or shuffle_input_sentence=False (the first ones)"
        )
    with _progress(show_progress, "Learning pieces", total=vocab_size - len(meta), unit=" pieces") as bar:
        learned = counter.learn(
            vocab_size=vocab_size,
            meta_pieces=len(meta),
            character_coverage=settings["character_coverage"],
            max_sentencepiece_length=settings["max_sentencepiece_length"],
            split_by_whitespace=settings["split_by_whitespace"],
            allow_whitespace_only_pieces=settings["allow_whitespace_only_pieces"],
            split_by_unicode_script=settings["split_by_unicode_script"],
            split_by_number=settings["split_by_number"],
            split_digits=settings["split_digits"],
            progress=bar.update if bar is not None else None,
        )
        if bar is not None:  # the required characters, added after the merges, complete the bar
            bar.update(len(learned) - bar.n)
    # The meta pieces at their ids, the learned ones in order around them.
    normal = [Piece(text, score, NORMAL) for text, score in learned]
    placed: list[Piece] = []
    taken = 0
    for index in sorted(meta):
        gap = index - len(placed)
        placed += normal[taken:taken + gap]
        taken += gap
        placed.append(meta[index])
    pieces = (*placed, *normal[taken:])
    texts = [piece.text for piece in pieces]
    if len(set(texts)) != len(texts):
        clash = next(text for text in texts if texts.count(text) > 1)
        raise ValueError(f"the learned piece {clash!r} is also a meta piece (SentencePiece fails alike: "
                         f"'{clash} is already defined'); change user_defined_symbols or control_symbols")
    spec = SentencePieceSpec(
        pieces=pieces,
        byte_fallback=settings["byte_fallback"],
        unk_surface=settings["unk_surface"],
        normalizer_name=settings["normalization_rule_name"],
        charsmap=charsmap,
        add_dummy_prefix=settings["add_dummy_prefix"],
        remove_extra_whitespaces=settings["remove_extra_whitespaces"],
        trainer_spec=_trainer_spec(settings, vocab_size),
    )
    return BPE.from_sentencepiece(spec, name=name or "sentencepiece")


def continue_learning(spec: SentencePieceSpec, corpus: Corpus | None, *, files: Paths | None, text_column: str,
                      num_new: int, show_progress: bool, num_threads: int | None) -> list[tuple[str, float]]:
    """The next ``num_new`` pieces (text, score) SentencePiece's loop learns on the corpus from the model
    ``spec`` (fewer when no pair is left): the corpus's words cut with the model's normalizer and training
    options (its ``TrainerSpec``; the defaults without one), each encoded by the model, then merged by
    SentencePiece's rule (see :mod:`hf_bpe.extend`)."""
    settings = read_trainer_spec(spec.trainer_spec)
    counter = _core.SentencePieceWordCounter(
        charsmap=spec.charsmap,
        add_dummy_prefix=spec.add_dummy_prefix,
        remove_extra_whitespaces=spec.remove_extra_whitespaces,
        max_sentence_length=settings["max_sentence_length"],
        split_by_whitespace=settings["split_by_whitespace"],
        allow_whitespace_only_pieces=settings["allow_whitespace_only_pieces"],
        first_sentences=0,
        meta_pieces=[piece.text for piece in spec.pieces if piece.type != NORMAL],
        num_threads=num_threads,
    )
    read_sentences(counter, corpus, files, text_column, show_progress, settings["max_sentence_length"],
                   warn_stacklevel=4)
    with _progress(show_progress, "Extending", total=num_new, unit=" pieces") as bar:
        return counter.extend(
            pieces=[(piece.text, piece.score) for piece in spec.pieces if piece.type == NORMAL],
            num_new=num_new,
            max_sentencepiece_length=settings["max_sentencepiece_length"],
            split_by_whitespace=settings["split_by_whitespace"],
            allow_whitespace_only_pieces=settings["allow_whitespace_only_pieces"],
            split_by_unicode_script=settings["split_by_unicode_script"],
            split_by_number=settings["split_by_number"],
            split_digits=settings["split_digits"],
            progress=bar.update if bar is not None else None,
        )


def read_sentences(counter: _core.SentencePieceWordCounter, corpus: Corpus | None, files: Paths | None,
                   text_column: str, show_progress: bool, max_sentence_length: int, *, warn_stacklevel: int = 2) -> int:
    """Feed the corpus (``corpus`` or ``files=``) to a word counter; the number of sentences kept. Skipped long
    sentences give a warning (at ``warn_stacklevel`` above the caller); a corpus without a sentence raises
    ``ValueError``."""
    # The counter checks the files are UTF-8 as it reads them.
    source = open_source(corpus, files, text_column=text_column, check_utf8=False)
    if isinstance(source, Files):
        with _progress(show_progress, "Reading sentences", total=source.size, unit="B", unit_scale=True,
                       unit_divisor=1024) as bar:
            counter.add_files([os.fspath(path) for path in source.paths], bar.update if bar is not None else None)
    else:
        with _progress(show_progress, "Reading sentences", total=source.count, unit=" docs") as bar:
            for batch in source.batches:
                counter.add_texts(batch)
                if bar is not None:
                    bar.update(len(batch))
                if counter.is_full:
                    break
    if counter.too_long:
        warnings.warn(f"{counter.too_long} sentences longer than max_sentence_length={max_sentence_length} bytes "
                      "were skipped, as SentencePiece skips them", stacklevel=warn_stacklevel + 1)
    if counter.sentences == 0:
        raise ValueError(
            "the corpus has no sentence to train on: every line is empty, longer than max_sentence_length "
            f"({max_sentence_length} bytes; {counter.too_long} such lines) or holds U+2585"
        )
    return counter.sentences


def _settings(options: dict[str, Any]) -> dict[str, Any]:
    """The options with defaults filled in, checked as SentencePiece checks them (``VerifySpec``)."""
    for key, why in NOT_HERE.items():
        if key in options:
            raise ValueError(f"the option {key!r} is SentencePiece's, not hf_bpe's: {why}")
    for key, (allowed, why) in FIXED.items():
        if key in options and options[key] != allowed:
            raise ValueError(f"the option {key}={options[key]!r} is not supported: {why}")
    unknown = sorted(set(options) - set(OPTIONS) - set(NO_EFFECT) - set(FIXED))
    if unknown:
        raise ValueError(f"unknown or unsupported SentencePiece option(s) {', '.join(unknown)}: the options taken "
                         f"are {', '.join(sorted(OPTIONS))} (and, without effect, {', '.join(sorted(NO_EFFECT))})")
    settings = {**OPTIONS, **{key: value for key, value in options.items() if key in OPTIONS}}
    model_type = str(settings["model_type"]).lower()
    if model_type != "bpe":
        raise ValueError(f"model_type={settings['model_type']!r} is not supported: hf_bpe trains BPE models only "
                         "(a unigram model does not segment text by merges); pass model_type='bpe'")
    for key in ("control_symbols", "user_defined_symbols"):
        value = settings[key]
        symbols = [symbol for symbol in value.split(",") if symbol] if isinstance(value, str) else list(value)
        if not all(isinstance(symbol, str) and symbol for symbol in symbols):
            raise ValueError(f"{key} must be non-empty str pieces, got {value!r}")
        settings[key] = symbols
    for key, default in OPTIONS.items():
        if isinstance(default, bool) and not isinstance(settings[key], bool):
            raise TypeError(f"the option {key} must be True or False, got {settings[key]!r}")
        if isinstance(default, int) and not isinstance(default, bool) and (
                isinstance(settings[key], bool) or not isinstance(settings[key], int)):
            raise TypeError(f"the option {key} must be an int, got {settings[key]!r}")
    ranges = {"character_coverage": (0.98, 1.0), "max_sentencepiece_length": (1, 512), "num_threads": (1, 1024),
              "max_sentence_length": (10, 1073741824)}
    for key, (low, high) in ranges.items():
        if not low <= settings[key] <= high:
            raise ValueError(f"the option {key}={settings[key]!r} is out of SentencePiece's range [{low}, {high}]")
    if 0 < settings["input_sentence_size"] <= 100:
        raise ValueError("input_sentence_size must be 0 (every sentence) or above 100, as SentencePiece requires")
    if settings["normalization_rule_name"] not in RULE_NAMES:
        raise ValueError(f"normalization_rule_name={settings['normalization_rule_name']!r} is not one of "
                         f"{', '.join(RULE_NAMES)}")
    for key in ("unk_piece", "bos_piece", "eos_piece", "pad_piece"):
        if not isinstance(settings[key], str) or not settings[key]:
            raise ValueError(f"the option {key} must be a non-empty str, got {settings[key]!r}")
    return settings


def _meta_pieces(settings: dict[str, Any], vocab_size: int) -> dict[int, Piece]:
    """The pieces at fixed ids (``InitMetaPieces``): unk, bos, eos, pad where their ids are not -1, then
    control symbols, user-defined symbols and the 256 byte pieces at the lowest free ids."""
    unk = settings["unk_piece"]
    meta: dict[int, Piece] = {}
    for name in ("unk", "bos", "eos", "pad"):
        index, text = settings[f"{name}_id"], settings[f"{name}_piece"]
        if index < 0:
            continue
        if index >= vocab_size or index in meta or (name != "unk" and text == unk and 0 <= settings["unk_id"]):
            raise ValueError(f"{name}_id={index} ({text!r}) clashes: ids must be below vocab_size ({vocab_size}) and "
                             "differ from the other meta pieces' ids")
        meta[index] = Piece(text, 0.0, UNKNOWN if text == unk else CONTROL)
    if not any(piece.type == UNKNOWN for piece in meta.values()):
        raise ValueError(f"{unk} must be defined: unk_id cannot be -1")
    seen: set[str] = set()
    free = 0
    symbols = [(text, CONTROL) for text in settings["control_symbols"]]
    symbols += [(text, USER_DEFINED) for text in settings["user_defined_symbols"]]
    if settings["byte_fallback"]:
        symbols += [(f"<0x{byte:02X}>", BYTE) for byte in range(256)]
    for text, kind in symbols:
        if text in seen:
            raise ValueError(f"{text} is already defined: duplicated symbols are not allowed")
        seen.add(text)
        if text == unk:
            raise ValueError(f"{unk} must not be defined with control_symbols and user_defined_symbols")
        placed = next((index for index in (settings["bos_id"], settings["eos_id"], settings["pad_id"])
                       if index >= 0 and meta.get(index, Piece("", 0)).text == text), None)
        if placed is not None:
            meta[placed] = Piece(text, 0.0, kind)
            continue
        while free in meta:
            free += 1
        meta[free] = Piece(text, 0.0, kind)
    if max(meta) >= vocab_size:
        raise ValueError(f"vocab_size {vocab_size} is too small for the {len(meta)} meta pieces (unk, bos, eos, pad, "
                         "control, user-defined and byte pieces)")
    return meta


@functools.cache
def _charsmap(rule_name: str) -> bytes:
    """The precompiled character map of a normalization rule, from the installed sentencepiece."""
    if rule_name == "identity":
        return b""
    try:
        import sentencepiece
        from sentencepiece import sentencepiece_model_pb2
    except ImportError as error:  # pragma: no cover - depends on the environment
        raise ImportError(
            f"normalization_rule_name={rule_name!r} needs the sentencepiece package for its character map "
            f"({error}); pip install sentencepiece protobuf, or use normalization_rule_name='identity'"
        ) from None
    written = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(["a"]), model_writer=written, model_type="char", vocab_size=4,
        hard_vocab_limit=False, normalization_rule_name=rule_name, minloglevel=2, num_threads=1,
    )
    proto = sentencepiece_model_pb2.ModelProto()  # type: ignore[attr-defined]  # generated by protoc
    proto.ParseFromString(written.getvalue())
    return bytes(proto.normalizer_spec.precompiled_charsmap)


#: The ``TrainerSpec`` fields written (``sentencepiece_model.proto``): field number and protobuf type.
TRAINER_FIELDS: dict[str, tuple[int, str]] = {
    "model_type": (3, "enum"), "vocab_size": (4, "int32"), "character_coverage": (10, "float"),
    "input_sentence_size": (11, "uint64"), "num_threads": (16, "int32"), "max_sentence_length": (18, "int32"),
    "shuffle_input_sentence": (19, "bool"), "max_sentencepiece_length": (20, "int32"),
    "split_by_unicode_script": (21, "bool"), "split_by_whitespace": (22, "bool"), "split_by_number": (23, "bool"),
    "split_digits": (25, "bool"), "allow_whitespace_only_pieces": (26, "bool"), "control_symbols": (30, "string"),
    "user_defined_symbols": (31, "string"), "byte_fallback": (35, "bool"), "unk_id": (40, "int32"),
    "bos_id": (41, "int32"), "eos_id": (42, "int32"), "pad_id": (43, "int32"), "unk_surface": (44, "string"),
    "unk_piece": (45, "string"), "bos_piece": (46, "string"), "eos_piece": (47, "string"), "pad_piece": (48, "string"),
}
TRAINER_BPE = 2  # TrainerSpec.ModelType.BPE


def _trainer_spec(settings: dict[str, Any], vocab_size: int) -> bytes:
    """The serialized ``TrainerSpec`` the model file carries: the bytes protobuf's ``SerializeToString``
    gives with every field of :data:`TRAINER_FIELDS` set (fields in number order), written here in
    protobuf's wire format so training does not import protobuf and sentencepiece (40 ms)."""
    values = {**{key: settings[key] for key in TRAINER_FIELDS if key in settings},
              "model_type": TRAINER_BPE, "vocab_size": vocab_size}
    written = bytearray()
    for key, (number, kind) in sorted(TRAINER_FIELDS.items(), key=lambda item: item[1][0]):
        for value in values[key] if kind == "string" and isinstance(values[key], list) else [values[key]]:
            if kind == "string":
                data = value.encode("utf-8")
                written += _varint(number << 3 | 2) + _varint(len(data)) + data
            elif kind == "float":
                written += _varint(number << 3 | 5) + struct.pack("<f", value)
            else:
                low, high = {"uint64": (0, 2**64), "bool": (0, 2), "enum": (0, 2**31)}.get(kind, (-(2**31), 2**31))
                if not low <= int(value) < high:
                    raise ValueError(f"the option {key}={value!r} is out of range for SentencePiece's {kind} field "
                                     f"[{low}, {high - 1}]")
                written += _varint(number << 3) + _varint(int(value) % 2**64)
    return bytes(written)


def read_trainer_spec(data: bytes) -> dict[str, Any]:
    """The settings a serialized ``TrainerSpec`` holds (the fields of :data:`TRAINER_FIELDS`; the others are
    skipped), over the defaults of :data:`OPTIONS` (an empty spec gives the defaults).

    >>> spec = _trainer_spec(_settings({"split_digits": True, "control_symbols": ["<a>", "<b>"]}), 100)
    >>> settings = read_trainer_spec(spec)
    >>> settings["split_digits"], settings["control_symbols"], settings["vocab_size"]
    (True, ['<a>', '<b>'], 100)
    >>> read_trainer_spec(with_vocab_size(spec, 120))["vocab_size"], read_trainer_spec(b"")["max_sentencepiece_length"]
    (120, 16)
    """
    by_number = {number: (key, kind) for key, (number, kind) in TRAINER_FIELDS.items()}
    settings: dict[str, Any] = dict(OPTIONS)
    settings["control_symbols"], settings["user_defined_symbols"] = [], []
    for number, value, _ in _fields(data):
        if number not in by_number:
            continue
        key, kind = by_number[number]
        if kind == "string":
            assert isinstance(value, bytes)
            text = value.decode("utf-8")
            if key in ("control_symbols", "user_defined_symbols"):
                settings[key].append(text)
            else:
                settings[key] = text
        elif kind == "float":
            assert isinstance(value, bytes)
            settings[key] = struct.unpack("<f", value)[0]
        elif kind == "bool":
            settings[key] = bool(value)
        elif kind == "int32":
            assert isinstance(value, int)
            settings[key] = value - 2**64 if value >= 2**63 else value
        else:
            settings[key] = value
    return settings


def with_vocab_size(data: bytes, vocab_size: int) -> bytes:
    """A serialized ``TrainerSpec`` with its ``vocab_size`` set (every other field kept as it is)."""
    number = TRAINER_FIELDS["vocab_size"][0]
    field = _varint(number << 3) + _varint(vocab_size)
    written = bytearray()
    for field_number, _, span in _fields(data):
        if field_number == number:
            written += field
            field = b""
        else:
            written += data[span]
    return bytes(written + field)


def _fields(data: bytes) -> Iterator[tuple[int, int | bytes, slice]]:
    """The fields of a serialized protobuf message: ``(number, value, span)``, the value an int for varints,
    bytes for length-delimited and fixed-size fields, the span the field's bytes in ``data``."""
    position = 0
    while position < len(data):
        start = position
        key, position = _read_varint(data, position)
        number, wire = key >> 3, key & 7
        value: int | bytes
        if wire == 0:
            value, position = _read_varint(data, position)
        elif wire == 2:
            length, position = _read_varint(data, position)
            value, position = data[position:position + length], position + length
        elif wire in (1, 5):
            size = 8 if wire == 1 else 4
            value, position = data[position:position + size], position + size
        else:
            raise ValueError(f"the model's TrainerSpec is not a protobuf message (wire type {wire} at byte {start})")
        if position > len(data):
            raise ValueError("the model's TrainerSpec is cut short")
        yield number, value, slice(start, position)


def _read_varint(data: bytes, position: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if position >= len(data):
            raise ValueError("the model's TrainerSpec is cut short")
        byte = data[position]
        position += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, position


def _varint(value: int) -> bytes:
    """``value`` (below 2**64; negative int32 values are written as their 64-bit two's complement) as a
    protobuf varint."""
    written = bytearray()
    while value > 0x7F:
        written.append(value & 0x7F | 0x80)
        value >>= 7
    written.append(value)
    return bytes(written)


def _progress(show: bool, desc: str, **options: Any) -> AbstractContextManager[Any]:
    """A tqdm bar, or ``None`` when progress is off."""
    if not show:
        return nullcontext(None)
    from hf_bpe._progress import progress_bar

    return progress_bar(desc=desc, **options)  # type: ignore[no-any-return]

