"""``hf-bpe train --sentencepiece``: learn a SentencePiece BPE model (Llama 2, Mistral style) as
``spm_train`` would, from the same inputs as ``hf-bpe train``::

    hf-bpe train --sentencepiece --llama2 data/*.txt --vocab-size 32000 --out my-llama-tokenizer
    hf-bpe train --sentencepiece --sp-option character_coverage=0.9999 --sp-option byte_fallback=true \\
        --dataset wikitext --dataset-config wikitext-2-raw-v1 --vocab-size 8000 --out my-tokenizer

``--llama2`` takes the option set used to reproduce Llama 2's tokenizer
(:data:`hf_bpe.train_sentencepiece.LLAMA2_OPTIONS`); each ``--sp-option NAME=VALUE`` sets one of
``SentencePieceTrainer``'s options (after ``--llama2``). The folder ``--out`` receives
``tokenizer.model`` (``SentencePieceProcessor`` and transformers' ``LlamaTokenizer`` read it),
``hf_bpe.json`` (``hf_bpe.BPE.load``), and, when ``tokenizers`` can encode as the model does, a
``tokenizer.json`` with a ``tokenizer_config.json`` (``AutoTokenizer.from_pretrained(DIR)``).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from hf_bpe.cli._common import UsageError, duration, plural
from hf_bpe.sentencepiece_bpe import CONTROL, UNKNOWN
from hf_bpe.train_sentencepiece import FIXED, LLAMA2_OPTIONS, NO_EFFECT, OPTIONS, train_sentencepiece

TRUE = {"true", "1", "yes", "on"}
FALSE = {"false", "0", "no", "off"}


def add_arguments(train: argparse.ArgumentParser) -> None:
    """The ``--sentencepiece`` options of ``hf-bpe train``."""
    group = train.add_argument_group(
        "SentencePiece BPE (Llama 2, Mistral style)",
        "With --sentencepiece, learn the vocabulary spm_train (SentencePieceTrainer, model_type=bpe) "
        "learns, and write tokenizer.model. Example: hf-bpe train --sentencepiece --llama2 data/*.txt "
        "--vocab-size 32000 --out my-tokenizer",
    )
    group.add_argument("--sentencepiece", action="store_true",
                       help="train a SentencePiece BPE model instead of a byte-level one")
    group.add_argument("--llama2", action="store_true",
                       help="Llama 2's option set: identity normalization, byte fallback, split digits, "
                       "character_coverage=0.99995, whitespace-only pieces, ...")
    group.add_argument("--sp-option", action="append", default=[], metavar="NAME=VALUE", dest="sp_options",
                       help="a SentencePieceTrainer option, e.g. character_coverage=0.9999, byte_fallback=true, "
                       "user_defined_symbols=<sep>,<cls> (repeat for more; applied after --llama2)")


def options_of(arguments: argparse.Namespace) -> dict[str, Any]:
    """The SentencePiece options the command line asks for."""

    options: dict[str, Any] = dict(LLAMA2_OPTIONS) if arguments.llama2 else {}
    defaults = {**OPTIONS, **NO_EFFECT, **{name: value for name, (value, _) in FIXED.items()}}
    for item in arguments.sp_options:
        name, equals, text = item.partition("=")
        name = name.strip().replace("-", "_")
        if not equals or not name:
            raise UsageError(f"--sp-option {item!r}: write NAME=VALUE, e.g. --sp-option character_coverage=0.9999")
        default = defaults.get(name)
        try:
            options[name] = _value(text, default)
        except ValueError:
            raise UsageError(f"--sp-option {item!r}: {name} takes {type(default).__name__} values "
                             f"(its default is {default!r})") from None
    if arguments.num_threads is not None:
        options["num_threads"] = arguments.num_threads
    else:
        import os

        options.setdefault("num_threads", os.cpu_count() or 1)
    return options


def _value(text: str, default: Any) -> Any:
    """``text`` as the type of the option's ``default`` (text when the option is unknown)."""
    if isinstance(default, bool):
        if text.strip().lower() in TRUE:
            return True
        if text.strip().lower() in FALSE:
            return False
        raise ValueError(text)
    if isinstance(default, int):
        return int(text)
    if isinstance(default, float):
        return float(text)
    if isinstance(default, (tuple, list)):
        return [symbol for symbol in text.split(",") if symbol]
    return text


def run(arguments: argparse.Namespace, corpus: Any, files: list[Path] | None, described: str) -> int:
    """Train, write the folder, print what was written."""
    if arguments.special_tokens:
        raise UsageError("--special-token is for byte-level models; with --sentencepiece give "
                         "--sp-option user_defined_symbols=A,B or --sp-option control_symbols=A,B")
    if arguments.pattern != "gpt2":
        raise UsageError("--pattern is for byte-level models; SentencePiece splits words at spaces and scripts "
                         "(--sp-option split_by_unicode_script=..., split_digits=...)")
    options = options_of(arguments)
    started = time.perf_counter()
    model = train_sentencepiece(
        corpus,
        arguments.vocab_size,
        files=files,
        show_progress=not arguments.quiet,
        text_column=arguments.text_column,
        name=arguments.name or arguments.out.resolve().name,
        **options,
    )
    elapsed = time.perf_counter() - started
    written, note = save_folder(model, arguments.out, {"corpus": described, "vocab_size": arguments.vocab_size,
                                                      "options": options})
    spec = model.sentencepiece
    assert spec is not None
    kinds: dict[int, int] = {}
    for piece in spec.pieces:
        kinds[piece.type] = kinds.get(piece.type, 0) + 1
    merged = sum(1 for piece in spec.pieces if piece.type == 1 and len(piece.text) > 1)
    print(f"Wrote {arguments.out}: {', '.join(path.name for path in written)}")
    print(f"  {plural(len(spec.pieces), 'piece')}: {merged:,} merged, {plural(kinds.get(1, 0) - merged, 'character')}, "
          f"{len(spec.pieces) - kinds.get(1, 0):,} meta; trained on {described} in {duration(elapsed)}")
    if note:
        print(f"  {note}")
    return 0


def save_folder(model: Any, directory: Path, training: dict[str, Any]) -> tuple[list[Path], str | None]:
    """Writes ``tokenizer.model``, ``hf_bpe.json`` and, when ``tokenizers`` encodes exactly as the model,
    ``tokenizer.json`` and ``tokenizer_config.json``. Returns the files and a note on what was left out."""
    from conversion import hf as conversion_hf
    from conversion import sentencepiece as conversion_sentencepiece
    from hf_bpe._io import atomic_write
    from hf_bpe.model import MODEL_FILE

    directory.mkdir(parents=True, exist_ok=True)
    written = [conversion_sentencepiece.save(model, directory / "tokenizer.model"), model.save(directory / MODEL_FILE)]
    spec = model.sentencepiece
    config: dict[str, Any] = {"tokenizer_class": "PreTrainedTokenizerFast", "clean_up_tokenization_spaces": False,
                              "hf_bpe_training": json.loads(json.dumps(training, default=str))}
    for piece in spec.pieces:
        if piece.type == UNKNOWN:
            config.setdefault("unk_token", piece.text)
    names = {piece.text for piece in spec.pieces if piece.type == CONTROL}
    for key, text in (("bos_token", training["options"].get("bos_piece", "<s>")),
                      ("eos_token", training["options"].get("eos_piece", "</s>")),
                      ("pad_token", training["options"].get("pad_piece", "<pad>"))):
        if text in names:
            config[key] = text
    try:
        written.append(conversion_hf.save(model, directory / "tokenizer.json"))
    except (ValueError, ImportError) as error:
        return written, f"no tokenizer.json: {error}"
    written.append(atomic_write(directory / "tokenizer_config.json", json.dumps(config, ensure_ascii=False,
                                                                                   indent=2)))
    return written, None
