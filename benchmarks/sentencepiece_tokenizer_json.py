"""SentencePiece models as ``tokenizer.json``: how often each file encodes or decodes differently from
``SentencePieceProcessor``, ours against transformers' own converters.

Usage (from the repository root)::

    python benchmarks/sentencepiece_tokenizer_json.py                   # varied 20,000 + every corpus line
    python benchmarks/sentencepiece_tokenizer_json.py --varied 2000 --corpus-lines 1000   # quicker

Models: the SentencePiece BPE models the test dependencies ship (Mistral ``tokenizer.model.v1``,
``v3``, ``v7`` from ``mistral-common``; botchan BPE from ``../shared/data/sentencepiece``) and models
trained here with ``SentencePieceTrainer`` under the option mixes of
``tests/conversion/test_hf_sentencepiece.py``.

Files compared, each loaded with `tokenizers` (``encode_special_tokens = True``: special pieces are
text, as SentencePiece reads them), on the same strings:

- ``LlamaTokenizer``: transformers' ``LlamaTokenizer.from_pretrained`` on a folder holding the model as
  ``tokenizer.model`` (its converter for Llama/Mistral-style models);
- ``spm-proto``: transformers' ``SpmConverter.build_tokenizer_from_spm_proto`` (the generic path that
  follows the model's own settings);
- ``hf_bpe``: ``conversion.hf.save``; ``exact`` when it writes the file, ``lossy`` when it refuses and
  ``lossy=True`` writes it.

Strings: ``varied_texts(--varied)`` of the tests, and the lines of every file of the shared corpora and
botchan.txt (the first ``--corpus-lines`` of each, or all). A string counts when its ids differ from
``SentencePieceProcessor.encode``; decoding counts SentencePiece's ids decoded
(``skip_special_tokens=False``) against ``SentencePieceProcessor.decode``.
"""

from __future__ import annotations

import argparse
import io
import os
import shutil
import tempfile
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from _common import REPO  # first: sets RAYON_NUM_THREADS, puts tests/ on the path


def shipped_models() -> dict[str, Path]:
    import mistral_common

    data = Path(mistral_common.__file__).parent / "data"
    models = {
        "mistral v1": data / "tokenizer.model.v1",
        "mistral v3": data / "mistral_instruct_tokenizer_240323.model.v3",
        "mistral v7": data / "mistral_instruct_tokenizer_241114.model.v7",
        "botchan (nmt_nfkc)": REPO.parent / "shared" / "data" / "sentencepiece" / "botchan_en_bpe_1000.model",
    }
    return {name: path for name, path in models.items() if path.is_file()}


def trained_models(folder: Path) -> dict[str, Path]:
    import sentencepiece
    from conversion_support import TRAINED, training_corpus

    models = {}
    for name, (options, _) in TRAINED.items():
        stream = io.BytesIO()
        sentencepiece.SentencePieceTrainer.train(
            sentence_iterator=iter(training_corpus()), model_writer=stream, model_type="bpe", vocab_size=1_500,
            character_coverage=0.98, hard_vocab_limit=False, minloglevel=2, num_threads=1, **options)
        path = folder / f"{name}.model"
        path.write_bytes(stream.getvalue())
        models[f"trained {name}"] = path
    return models


def transformers_files(path: Path, folder: Path) -> dict[str, Any]:
    """transformers' own conversions of the model at ``path``, as `tokenizers` objects."""
    from transformers import LlamaTokenizer
    from transformers.convert_slow_tokenizer import SpmConverter

    import conversion.sentencepiece

    files: dict[str, Any] = {}
    copy = folder / "llama"
    copy.mkdir(exist_ok=True)
    shutil.copy(path, copy / "tokenizer.model")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        files["LlamaTokenizer"] = LlamaTokenizer.from_pretrained(os.fspath(copy))._tokenizer
        proto = conversion.sentencepiece.read_proto(path)
        files["spm-proto"] = SpmConverter.build_tokenizer_from_spm_proto(
            proto, {piece.piece: index for index, piece in enumerate(proto.pieces)})
    return files


def ours(path: Path, folder: Path) -> tuple[str, Any, str]:
    """(``exact`` or ``lossy``, our tokenizer, the lossy warning or the empty string)."""
    import tokenizers

    import conversion.hf
    import conversion.sentencepiece
    from hf_bpe.errors import ConversionError

    model = conversion.sentencepiece.load(path)
    target = folder / "tokenizer.json"
    try:
        conversion.hf.save(model, target)
        return "exact", tokenizers.Tokenizer.from_file(os.fspath(target)), ""
    except ConversionError:
        pass
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        conversion.hf.save(model, target, lossy=True)
    report = next(str(warning.message) for warning in caught)
    return "lossy", tokenizers.Tokenizer.from_file(os.fspath(target)), report


def differ(tokenizer: Any, processor: Any, texts: Sequence[str], expected: list[list[int]],
           decoded: list[str]) -> tuple[int, int]:
    tokenizer.encode_special_tokens = True
    got = [encoding.ids for encoding in tokenizer.encode_batch(list(texts), add_special_tokens=False)]
    encode = sum(a != b for a, b in zip(got, expected))
    decode = sum(a != b for a, b in zip(tokenizer.decode_batch(expected, skip_special_tokens=False), decoded))
    return encode, decode


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--varied", type=int, default=20_000, help="generated strings (varied_texts)")
    parser.add_argument("--corpus-lines", type=int, default=None, help="lines per corpus file (default: all)")
    parser.add_argument("--no-trained", action="store_true", help="only the shipped models")
    arguments = parser.parse_args(argv)

    import sentencepiece
    from conversion_support import corpus_lines, varied_texts

    texts = {"varied": list(varied_texts(arguments.varied)), "corpora": corpus_lines(arguments.corpus_lines)}
    sizes = ", ".join(f"{name} {len(strings):,} strings ({sum(len(s.encode()) for s in strings) / 1e6:.1f} MB)"
                      for name, strings in texts.items())
    print(f"strings: {sizes}\n")
    print("| model | strings | LlamaTokenizer enc / dec | spm-proto enc / dec | hf_bpe | hf_bpe enc / dec |")
    print("|---|---|---|---|---|---|")
    reports = []
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        models = shipped_models() | ({} if arguments.no_trained else trained_models(folder))
        for name, path in models.items():
            processor = sentencepiece.SentencePieceProcessor(model_file=os.fspath(path))
            theirs = transformers_files(path, folder)
            status, mine, report = ours(path, folder)
            if report:
                reports.append(f"- {name}: {report}")
            for kind, strings in texts.items():
                if not strings:
                    continue
                expected = processor.encode(strings)
                decoded = [processor.decode(ids) for ids in expected]
                cells = [f"{a:,} / {b:,}" for a, b in
                         (differ(theirs[key], processor, strings, expected, decoded) for key in ("LlamaTokenizer",
                                                                                                 "spm-proto"))]
                mine_cell = "{:,} / {:,}".format(*differ(mine, processor, strings, expected, decoded))
                print(f"| {name} | {kind} {len(strings):,} | {cells[0]} | {cells[1]} | {status} | {mine_cell} |",
                      flush=True)
    if reports:
        print("\nlossy files, as save reports them:\n" + "\n".join(reports))


if __name__ == "__main__":
    main()
