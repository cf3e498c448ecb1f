"""GGUF files (llama.cpp): the tokenizer in their ``tokenizer.ggml.*`` metadata, read and written.

:func:`read` gives a :class:`GGUFVocab`: the model (:class:`hf_bpe.BPE`) and what llama.cpp adds around
it (special ids, the BOS/EOS policy, which special tokens it cuts out of text). Its
:meth:`GGUFVocab.encode` is ``llama_tokenize`` (``common_tokenize``): the ids of llama.cpp's own
vocabulary tests (``ggml-vocab-*.gguf`` with their ``.inp``/``.out``). :func:`load` is ``read(path).model``.

- ``tokenizer.ggml.model = "gpt2"``: byte-level BPE. ``tokens`` are spelled in GPT-2's byte-to-unicode
  alphabet, ``merges`` (``"left right"``) apply in list order (the first of a repeated pair counts),
  and ``tokenizer.ggml.pre`` names the split (:mod:`conversion._llama_pre`; a missing one is
  llama.cpp's ``default``). Control, user-defined and unknown tokens (as llama.cpp types them,
  including the types it gives by name: ``<|endoftext|>``, ``<|im_end|>``... are control) become
  special tokens, except those merging can make: llama.cpp maps every merged symbol to the token of
  that text, whatever its type, so they stay ordinary tokens. Other tokens not spelled in the
  alphabet never result from merging and are left out (ids without a token). A byte without a
  token stays a symbol that no merge joins and is then dropped by llama.cpp: a user-defined token
  spelled as that byte becomes its token (DeepSeek's ``õ``...); when the others are only bytes UTF-8
  never uses (``C0``, ``C1``, ``F5``-``FF``) they get placeholder ids after the last one (no text
  reaches them); a vocabulary lacking bytes UTF-8 text uses (Falcon lacks control bytes and ``F2``,
  StarCoder and Refact ``F1``) loads with a :class:`~hf_bpe.errors.MissingBytesWarning` naming them
  and drops them as llama.cpp does, after merging (``BPE.from_merges(..., drop_missing_bytes="after
  merging")``: a piece encodes as its runs of present bytes, each merged alone), where
  `tokenizers` would drop them before merging.
- ``tokenizer.ggml.model = "llama"``: SentencePiece BPE (the ``"sentencepiece"`` kind): pieces with
  ``scores`` and ``token_type``, ``<0xXX>`` byte fallback, ``add_space_prefix`` as the dummy prefix,
  no normalizer, as llama.cpp's SPM tokenizer runs them.
- Other models (``bert``, ``t5``, ``rwkv``, ``gemma4``, ...) and ``pre`` names hf_bpe does not
  reproduce are refused with :class:`~hf_bpe.errors.ConversionError` naming them; a file that is not
  GGUF, is truncated or holds malformed metadata with :class:`~hf_bpe.errors.TokenizerFileError`.

Where llama.cpp's rule would differ from the model's (a merge whose result is no token or that joins
a byte without one, a control or byte piece llama.cpp's SentencePiece merging forms, missing byte
pieces...), :func:`read` refuses naming the merge, piece or bytes. llama.cpp cuts user-defined tokens out of the text before
tokenizing and, for a SentencePiece vocabulary, puts a dummy prefix (``▁``) after each, which
SentencePiece does not: the model's own ``encode_ordinary`` equals llama.cpp wherever no user-defined
token occurs, :meth:`GGUFVocab.encode` everywhere. When two special tokens of equal length overlap in
a text, llama.cpp cuts the one its unstable sort puts first; here the lower id.

:func:`save` writes a vocabulary-only GGUF that llama.cpp loads (``general.architecture = "llama"``).

>>> import os, tempfile, hf_bpe
>>> path = save(hf_bpe.get_encoding("gpt2"), os.path.join(tempfile.mkdtemp(), "gpt2.gguf"))
>>> vocab = read(path)
>>> vocab.pre, vocab.encode("hello world"), vocab.model.encode("hello world")
('gpt-2', [31373, 995], [31373, 995])
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from conversion import _gguf_file
from conversion._gguf_file import ARRAY, BOOL, FLOAT32, INT32, STRING, UINT32, Value
from conversion._llama_pre import PRE_NAMES, PreTokenizer
from hf_bpe import _rules, patterns
from hf_bpe._byte_level import BYTE_TO_UNICODE, token_to_str, try_str_to_token
from hf_bpe.errors import (
    ConversionError,
    InvalidVocabularyError,
    LossyConversionWarning,
    MissingBytesWarning,
    TokenizerFileError,
)
from hf_bpe.model import BPE
from hf_bpe.sentencepiece_bpe import (
    BYTE,
    CONTROL,
    NORMAL,
    UNKNOWN,
    UNUSED,
    USER_DEFINED,
    Piece,
    SentencePieceSpec,
)

__all__ = ["MODELS", "REFUSED_MODELS", "GGUFVocab", "load", "read", "save"]

MODELS = ("gpt2", "llama")
"""The ``tokenizer.ggml.model`` values hf_bpe reads: byte-level BPE and SentencePiece BPE."""

REFUSED_MODELS = {
    "bert": "WordPiece (BERT): it does not merge pairs, it matches the longest vocabulary entry",
    "t5": "a unigram model (T5, XLM-R): it segments by piece probabilities, not by merges",
    "rwkv": "RWKV's greedy trie tokenizer, not BPE",
    "plamo2": "PLaMo 2's Aho-Corasick tokenizer, not BPE",
    "gemma4": "character-level BPE with a merges list and <0xXX> byte fallback (Gemma 4), a rule hf_bpe has "
              "no kind for (its SentencePiece kind merges by score)",
    "hybriddna": "a DNA k-mer tokenizer",
    "whitespace": "a whitespace word tokenizer",
    "no_vocab": "no vocabulary at all",
    "none": "no vocabulary at all",
    "test": "llama.cpp's test tokenizer",
}
"""The other ``tokenizer.ggml.model`` values llama.cpp knows, and why hf_bpe cannot run them."""

# llama.cpp's token attributes (llama_token_attr) and types (llama_token_type, numbered as SentencePiece's).
_UNKNOWN, _UNUSED, _NORMAL, _CONTROL, _USER_DEFINED, _BYTE = 1, 2, 4, 8, 16, 32
_LSTRIP, _RSTRIP = 128, 256
_ATTRIBUTE_OF_TYPE = {UNKNOWN: _UNKNOWN, UNUSED: _UNUSED, NORMAL: _NORMAL, CONTROL: _CONTROL,
                      USER_DEFINED: _USER_DEFINED, BYTE: _BYTE}
_CUT = _CONTROL | _USER_DEFINED | _UNKNOWN
"""Tokens llama.cpp cuts out of text before tokenizing (user-defined ones always, the others only
when parsing special tokens)."""

_END_OF_GENERATION = frozenset({
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>", "<end_of_turn>",
    "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]", "<|end_of_text|>",
    "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>", "<｜end▁of▁sentence｜>", "[e~[",
})
"""Texts llama.cpp makes control tokens whatever their type (its end-of-generation list)."""

_FILL_IN_THE_MIDDLE = {
    "fim_pre": ("<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<｜fim▁begin｜>", "<PRE>", "▁<PRE>",
                "<|code_prefix|>", "<|prefix|>"),
    "fim_suf": ("<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<｜fim▁hole｜>", "<SUF>", "▁<SUF>",
                "<|code_suffix|>", "<|suffix|>"),
    "fim_mid": ("<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<｜fim▁end｜>", "<MID>", "▁<MID>",
                "<|code_middle|>", "<|middle|>"),
    "fim_pad": ("<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"),
    "fim_rep": ("<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"),
    "fim_sep": ("<|file_sep|>",),
}
"""The texts llama.cpp takes for each fill-in-the-middle token when the file names none (it makes
the one it finds a control token)."""
_OLD_FIM_KEYS = {"fim_pre": "prefix", "fim_suf": "suffix", "fim_mid": "middle"}

_NOT_UTF8 = frozenset([0xC0, 0xC1, *range(0xF5, 0x100)])
"""Bytes UTF-8 never contains."""
_C_SPACE = " \t\n\v\f\r"
"""What C's ``isspace`` matches, which llama.cpp's strip attributes remove."""


@dataclass(frozen=True)
class GGUFVocab:
    """A GGUF file's tokenizer as llama.cpp loads it: the :attr:`model` and llama.cpp's settings."""

    model: BPE
    tokenizer_model: str
    """``tokenizer.ggml.model``: ``"gpt2"`` or ``"llama"``."""
    pre: str | None
    """``tokenizer.ggml.pre`` as the file names it (``None`` when missing)."""
    bos_id: int | None
    eos_id: int | None
    unknown_id: int | None
    padding_id: int | None
    add_bos: bool
    """llama.cpp adds :attr:`bos_id` when asked to add special tokens (``tokenizer.ggml.add_bos_token``,
    or llama.cpp's default for the model and ``pre``)."""
    add_eos: bool
    user_defined: frozenset[str]
    """Special tokens llama.cpp cuts out of any text (user-defined tokens); the others only when
    parsing special tokens."""
    cuts: tuple[tuple[str, int, int], ...] = field(repr=False)
    """Every token llama.cpp cuts out of text: ``(text, id, attributes)`` in the order it cuts them
    (longest first)."""
    token_count: int = 0
    """The number of tokens in the file (ids from there on are placeholders for bytes it lacks)."""
    architecture: str | None = None
    name: str | None = None

    def encode(self, text: str, *, add_special: bool = False, parse_special: bool = False) -> list[int]:
        """The ids ``llama_tokenize(vocab, text, add_special, parse_special)`` gives.

        User-defined tokens are cut out of the text first (all special tokens when ``parse_special``),
        longest first; each piece between them is encoded by :attr:`model` (with the dummy prefix, for
        a SentencePiece model, as llama.cpp adds it after every cut token); ``add_special`` adds BOS
        and EOS as :attr:`add_bos` and :attr:`add_eos` say.
        """
        output: list[int] = []
        if add_special and self.add_bos:
            if self.bos_id is None:
                raise ValueError(f"{self.name or 'this vocabulary'} adds a BOS token but names none")
            output.append(self.bos_id)
        for fragment in self._partition(text, parse_special):
            if isinstance(fragment, int):
                output.append(fragment)
            else:
                output.extend(self.model.encode_ordinary(fragment))
        if add_special and self.add_eos:
            if self.eos_id is None:
                raise ValueError(f"{self.name or 'this vocabulary'} adds an EOS token but names none")
            output.append(self.eos_id)
        return output

    def _partition(self, text: str, parse_special: bool) -> list[str | int]:
        """llama.cpp's ``tokenizer_st_partition``: the text cut at special tokens (ids) into pieces."""
        fragments: list[str | int] = [text] if text else []
        for token, token_id, attributes in self.cuts:
            if not parse_special and attributes & (_CONTROL | _UNKNOWN):
                continue
            cut: list[str | int] = []
            for fragment in fragments:
                if isinstance(fragment, int) or token not in fragment:
                    cut.append(fragment)
                    continue
                start = 0
                while (found := fragment.find(token, start)) >= 0:
                    left = fragment[start:found]
                    if attributes & _LSTRIP:
                        left = left.rstrip(_C_SPACE)
                    if left:
                        cut.append(left)
                    cut.append(token_id)
                    start = found + len(token)
                    if attributes & _RSTRIP:
                        while start < len(fragment) and fragment[start] in _C_SPACE:
                            start += 1
                if start < len(fragment):
                    cut.append(fragment[start:])
            fragments = cut
        return fragments


def load(path: str | os.PathLike[str], *, name: str | None = None) -> BPE:
    """The model of the GGUF file ``path`` (:func:`read`'s :attr:`GGUFVocab.model`).

    >>> import os, tempfile, hf_bpe
    >>> ranks = {bytes([byte]): byte for byte in range(256)} | {b" w": 256, b" wo": 257}
    >>> path = save(hf_bpe.BPE(ranks, "gpt2"), os.path.join(tempfile.mkdtemp(), "tiny.gguf"))
    >>> load(path).encode("hello world"), load(path).kind
    ([104, 101, 108, 108, 111, 257, 114, 108, 100], 'merges')
    """
    return read(path, name=name).model


def read(path: str | os.PathLike[str], *, name: str | None = None) -> GGUFVocab:
    """The tokenizer of the GGUF file ``path`` (see the module's description)."""
    metadata = _gguf_file.read_metadata(path)
    return _Reading(path, metadata, name).vocab()


class _Reading:
    """One file's metadata turned into a :class:`GGUFVocab`, step by step as llama.cpp loads it."""

    def __init__(self, path: str | os.PathLike[str], metadata: dict[str, Value], name: str | None):
        self.path = path
        self.metadata = metadata
        self.name = name or self.text("general.name") or Path(path).name.split(".")[0]

    def fail(self, problem: str) -> TokenizerFileError:
        return TokenizerFileError(self.path, problem)

    def refuse(self, problem: str) -> ConversionError:
        return ConversionError(f"{os.fspath(self.path)}: {problem}")

    # ----------------------------------------------------------------------- reading typed values

    def text(self, key: str) -> str | None:
        value = self.metadata.get(key)
        if value is None:
            return None
        if value.type != STRING:
            raise self.fail(f"{key} is a {_gguf_file.TYPE_NAMES.get(value.type)}, not a string")
        try:
            decoded: str = value.value.decode("utf-8")
        except UnicodeDecodeError:
            raise self.fail(f"{key} is not UTF-8: {value.value[:60]!r}") from None
        return decoded

    def integer(self, key: str) -> int | None:
        value = self.metadata.get(key)
        if value is None:
            return None
        if value.type in (ARRAY, STRING, BOOL, FLOAT32, _gguf_file.FLOAT64):
            raise self.fail(f"{key} is a {_gguf_file.TYPE_NAMES.get(value.type)}, not an integer")
        number: int = value.value
        return number

    def flag(self, key: str) -> bool | None:
        value = self.metadata.get(key)
        if value is None:
            return None
        if value.type != BOOL:
            raise self.fail(f"{key} is a {_gguf_file.TYPE_NAMES.get(value.type)}, not a boolean")
        return bool(value.value)

    def array(self, key: str, item_types: tuple[int, ...], minimum: int = 0) -> list[Any] | None:
        value = self.metadata.get(key)
        if value is None:
            return None
        if value.type != ARRAY or value.item_type not in item_types:
            kinds = " or ".join(_gguf_file.TYPE_NAMES[kind] for kind in item_types)
            raise self.fail(f"{key} must be an array of {kinds}")
        if len(value.value) < minimum:
            raise self.fail(f"{key} has {len(value.value):,} entries for {minimum:,} tokens")
        items: list[Any] = value.value
        return items

    # ------------------------------------------------------------------------------------ the vocab

    def vocab(self) -> GGUFVocab:
        model_type = self.text("tokenizer.ggml.model")
        if model_type is None:
            raise self.fail("it holds no tokenizer (no tokenizer.ggml.model)")
        if model_type not in MODELS:
            what = REFUSED_MODELS.get(model_type, "a tokenizer llama.cpp does not know")
            raise self.refuse(f"tokenizer.ggml.model is {model_type!r}, {what}; hf_bpe reads the BPE models "
                              f"{' and '.join(map(repr, MODELS))}")
        pre_name = self.text("tokenizer.ggml.pre")
        pre = None
        if model_type == "gpt2":
            pre = PRE_NAMES.get(pre_name or "default")
            if pre is None:
                raise self.refuse(
                    f"tokenizer.ggml.pre is {pre_name!r}, a split hf_bpe does not reproduce exactly (it reads "
                    f"{', '.join(sorted(PRE_NAMES))})")
        tokens = self.tokens()
        count = len(tokens)
        types = self.array("tokenizer.ggml.token_type", (INT32,), count)
        attributes = [_ATTRIBUTE_OF_TYPE.get(kind, 0) for kind in (types or [NORMAL] * count)[:count]]
        ids = self.special_ids(model_type, pre, count)
        add_bos = pre.add_bos if pre is not None else model_type == "llama"
        add_bos = _first(self.flag("tokenizer.ggml.add_bos_token"), add_bos)
        add_eos = _first(self.flag("tokenizer.ggml.add_eos_token"), False)
        self.llama_attributes(tokens, attributes, ids, pre_name)
        order = sorted((index for index in range(count) if attributes[index] & _CUT),
                       key=lambda index: (-len(tokens[index].encode("utf-8")), index))
        cuts = tuple((tokens[index], index, attributes[index]) for index in order)
        if model_type == "gpt2":
            assert pre is not None
            model = self.byte_level(tokens, attributes, pre)
        else:
            model = self.sentencepiece(tokens, attributes, ids["unknown"])
        return GGUFVocab(
            model=model, tokenizer_model=model_type, pre=pre_name, bos_id=ids["bos"], eos_id=ids["eos"],
            unknown_id=ids["unknown"], padding_id=ids["padding"], add_bos=add_bos, add_eos=add_eos,
            user_defined=frozenset(text for text, _, attributes_ in cuts if not attributes_ & (_CONTROL | _UNKNOWN)),
            cuts=cuts, token_count=count, architecture=self.text("general.architecture"), name=self.name,
        )

    def tokens(self) -> list[str]:
        raw = self.array("tokenizer.ggml.tokens", (STRING,))
        if not raw:
            raise self.fail("it holds no tokens (tokenizer.ggml.tokens is missing or empty)")
        tokens: list[str] = []
        seen: dict[str, int] = {}
        for index, data in enumerate(raw):
            try:
                token = data.decode("utf-8") if data else f"[EMPTY_{index}]"
            except UnicodeDecodeError:
                raise self.fail(f"token {index} is not UTF-8: {data[:60]!r}") from None
            if token in seen:
                raise self.fail(f"tokens {seen[token]} and {index} are both {token!r:.60}; llama.cpp refuses a "
                                "vocabulary whose tokens are not unique")
            seen[token] = index
            tokens.append(token)
        return tokens

    def special_ids(self, model_type: str, pre: PreTokenizer | None, count: int) -> dict[str, int | None]:
        """bos, eos, unknown, padding and the fill-in-the-middle ids as llama.cpp resolves them: its
        default for the model, replaced by the file's key when that is in range."""
        defaults: dict[str, int | None] = (
            {"bos": 1, "eos": 2, "unknown": 0} if model_type == "llama" else {"bos": 11, "eos": 11, "unknown": None})
        if pre is not None and pre.no_bos:
            defaults["bos"] = None
        ids: dict[str, int | None] = {}
        for what in ("bos", "eos", "unknown", "padding", "eot", "eom", *_FILL_IN_THE_MIDDLE):
            default = defaults.get(what)
            resolved = default if default is not None and default < count else None
            keys = [what] + ([_OLD_FIM_KEYS[what]] if what in _OLD_FIM_KEYS else [])  # llama.cpp reads both
            for key in keys:
                value = self.integer(f"tokenizer.ggml.{key}_token_id")
                if value is not None and 0 <= value < count:
                    resolved = value
            ids[what] = resolved
        return ids

    def llama_attributes(self, tokens: list[str], attributes: list[int], ids: dict[str, int | None],
                         pre_name: str | None) -> None:
        """Apply the attributes llama.cpp gives tokens by their text and the model's name (in place)."""
        index_of = {token: index for index, token in enumerate(tokens)}
        for what, candidates in _FILL_IN_THE_MIDDLE.items():
            if ids[what] is not None:
                continue
            present = [index_of[text] for text in candidates if text in index_of]
            if len([index for index in present if not attributes[index] & _CONTROL]) and len(present) > 1:
                raise self.refuse(
                    f"the tokens {[tokens[index] for index in present]} are all {what} candidates and the file names "
                    f"none (tokenizer.ggml.{what}_token_id); llama.cpp makes whichever its hash table lists first a "
                    "control token, which cannot be reproduced")
            for index in present:
                attributes[index] |= _CONTROL
        for text in _END_OF_GENERATION & index_of.keys():
            attributes[index_of[text]] |= _CONTROL
        for text in ("<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"):  # gpt-oss
            if text in index_of:
                attributes[index_of[text]] = _USER_DEFINED
        if "<|end|>" in index_of and ({"<|return|>", "<|call|>"} <= index_of.keys()
                                      or {"<|calls|>", "<|flush|>"} <= index_of.keys()):
            attributes[index_of["<|end|>"]] = _USER_DEFINED
        generation_ends = {ids[what] for what in ("eos", "eot", "eom", "fim_pad", "fim_rep", "fim_sep")}
        markers = {"<|tool_response>"} & index_of.keys() or {
            tokens[index] for index in generation_ends if index is not None and tokens[index] == "<|plamo:eos|>"}
        if markers and "</s>" in index_of:
            attributes[index_of["</s>"]] = _NORMAL
        name = (self.text("general.name") or "").lower()
        architecture = self.text("general.architecture") or ""
        if any(part in (pre_name or "") for part in ("jina-v2-de", "jina-v2-es", "jina-v2-code")) or any(
                part in architecture for part in ("nomic-bert-moe", "jina-bert-v3")):
            if "<mask>" in index_of:
                attributes[index_of["<mask>"]] |= _LSTRIP
        elif "phi-3" in name or "phi3" in name:
            for index, attribute in enumerate(attributes):
                if attribute & _CUT:
                    attributes[index] |= _RSTRIP
            for text, strip in (("</s>", True), ("<unk>", False), ("<s>", False), ("<|endoftext|>", False)):
                if text not in index_of:
                    raise self.refuse(f"llama.cpp does not load a Phi-3 vocabulary without the token {text!r}")
                attributes[index_of[text]] = attributes[index_of[text]] | _RSTRIP if strip else \
                    attributes[index_of[text]] & ~_RSTRIP
        elif "modern-bert" in name and "[MASK]" in index_of:
            attributes[index_of["[MASK]"]] |= _LSTRIP

    # --------------------------------------------------------------------------- byte-level BPE

    def byte_level(self, tokens: list[str], attributes: list[int], pre: PreTokenizer) -> BPE:
        """The byte-level model. llama.cpp maps every symbol merging makes to the token of that text,
        whatever its type; so a special token (one llama.cpp cuts out of text) whose byte-level
        spelling merging can make, or that ``ignore_merges`` emits as a whole piece, stays an ordinary
        token of the model, and :meth:`GGUFVocab.encode` cuts it where llama.cpp does."""
        listed = self.listed_merges()
        formed = _formed_symbols(listed)
        splitter = BPE({bytes([byte]): byte for byte in range(256)}, pre.steps)
        vocab: dict[bytes, int] = {}
        spelled_ids: dict[str, int] = {}
        specials: dict[str, int] = {}
        for index, token in enumerate(tokens):
            spelled = try_str_to_token(token)
            if attributes[index] & _CUT and (spelled is None or not _made_by_merging(token, spelled, formed, splitter, pre)):
                specials[token] = index
            elif spelled is not None:
                vocab[spelled] = index
                spelled_ids[token] = index
        for token, index in list(specials.items()):
            spelled = try_str_to_token(token)
            if spelled is not None and len(spelled) == 1 and spelled not in vocab:
                # A byte the vocabulary lacks, added as a user-defined token (DeepSeek's õ, ÷, ...): for
                # llama.cpp it is both, which a model cannot be; GGUFVocab.encode still cuts it out of text.
                del specials[token]
                vocab[spelled] = index
        missing = [byte for byte in range(256) if bytes([byte]) not in vocab]
        lost = [byte for byte in missing if byte not in _NOT_UTF8]
        if lost:
            warnings.warn(
                f"{os.fspath(self.path)}: the vocabulary lacks the byte symbols {_hex(lost)}, which UTF-8 text uses; "
                "as llama.cpp does, hf_bpe keeps such a byte as a symbol no merge joins and drops it after merging "
                "(so those ids decode to different text), and refuses raw bytes that need one",
                MissingBytesWarning, stacklevel=4)
        else:
            next_id = len(tokens)
            for byte in missing:  # bytes UTF-8 never uses: placeholders no text reaches
                vocab[bytes([byte])] = next_id
                spelled_ids[BYTE_TO_UNICODE[byte]] = next_id
                next_id += 1
        absent = {BYTE_TO_UNICODE[byte]: byte for byte in lost}
        merges = []
        for number, (left, right) in enumerate(listed):
            if left not in formed or right not in formed:
                continue  # no text forms its parts: it never applies
            joined = [absent[part] for part in (left, right) if part in absent]
            if joined:
                raise self.refuse(
                    f"merge {number} ({left!r} {right!r}) joins the byte 0x{joined[0]:02X}, which the vocabulary has no "
                    "token for; llama.cpp merges such a byte's symbol, hf_bpe's models cannot")
            if left + right not in spelled_ids:
                raise self.refuse(
                    f"merge {number} ({left!r} {right!r}) makes {left + right!r}, which is no token; llama.cpp would "
                    "then emit its bytes one by one, dropping those that are no token either, which hf_bpe does not")
            merges.append((left, right))
        by_id = {index: token for token, index in vocab.items()}
        pairs = [(by_id[spelled_ids[left]], by_id[spelled_ids[right]]) for left, right in merges]
        try:
            return BPE.from_merges(vocab, pairs, pre.steps, specials, ignore_merges=pre.ignore_merges,
                                   drop_missing_bytes="after merging" if lost else False, name=self.name)
        except InvalidVocabularyError as error:
            raise self.fail(str(error)) from None

    def listed_merges(self) -> list[tuple[str, str]]:
        """``tokenizer.ggml.merges`` as llama.cpp reads it: ``"left right"`` split at the first space
        after the first character, a repeated pair's first line counting; lines whose parts are not
        spelled in the byte-level alphabet (no symbol ever is) are left out."""
        raw = self.array("tokenizer.ggml.merges", (STRING,))
        if raw is None:
            raise self.fail("a gpt2 tokenizer needs tokenizer.ggml.merges")
        listed: list[tuple[str, str]] = []
        seen: set[tuple[str, str]] = set()
        for number, data in enumerate(raw):
            try:
                line = data.decode("utf-8")
            except UnicodeDecodeError:
                raise self.fail(f"merge {number} is not UTF-8: {data[:60]!r}") from None
            split = line.find(" ", 1)
            pair = (line[:split], line[split + 1 :])
            if split > 0 and pair[1] and pair not in seen:
                seen.add(pair)
                listed.append(pair)
        return listed

    # ------------------------------------------------------------------------- SentencePiece BPE

    def sentencepiece(self, tokens: list[str], attributes: list[int], unknown_id: int | None) -> BPE:
        scores = self.array("tokenizer.ggml.scores", (FLOAT32, INT32), len(tokens)) or [0.0] * len(tokens)
        types = []
        for index, attribute in enumerate(attributes):
            if index == unknown_id:
                types.append(UNKNOWN)
            elif attribute & (_CONTROL | _UNKNOWN):
                types.append(CONTROL)  # llama.cpp treats both alike; SentencePiece has one unknown piece
            elif attribute & _USER_DEFINED:
                types.append(USER_DEFINED)
            elif attribute & _BYTE:
                types.append(BYTE)
            elif attribute & _UNUSED:
                types.append(UNUSED)
            else:
                types.append(NORMAL)
        if unknown_id is None:
            raise self.refuse("the vocabulary names no unknown token (tokenizer.ggml.unknown_token_id), which a "
                              "SentencePiece model needs")
        index_of = {token: index for index, token in enumerate(tokens)}
        byte_pieces = [index_of.get(f"<0x{byte:02X}>") for byte in range(256)]
        absent = [byte for byte, index in enumerate(byte_pieces) if index is None or types[index] != BYTE]
        if absent:
            raise self.refuse(
                f"the byte pieces {', '.join(f'<0x{byte:02X}>' for byte in absent[:8])} are missing or not of type "
                "BYTE; llama.cpp's SentencePiece tokenizer falls back to them for characters that are no piece")
        formed = _formed_pieces(tokens, types)
        if formed:
            shown = ", ".join(f"{tokens[index]!r} ({_TYPE_NAMES[types[index]]})" for index in formed[:5])
            raise self.refuse(
                f"llama.cpp merges text into the pieces {shown}, which SentencePiece (and hf_bpe) never forms: "
                "llama.cpp merges into any token, SentencePiece into normal and user-defined pieces only")
        add_prefix = _first(self.flag("tokenizer.ggml.add_space_prefix"), True)
        spec = SentencePieceSpec(
            pieces=tuple(Piece(token, float(score), kind) for token, score, kind in zip(tokens, scores, types)),
            byte_fallback=True, normalizer_name="identity", add_dummy_prefix=add_prefix,
            remove_extra_whitespaces=False, escape_whitespaces=True,
        )
        try:
            return BPE.from_sentencepiece(spec, name=self.name)
        except InvalidVocabularyError as error:
            raise self.fail(str(error)) from None


_TYPE_NAMES = {NORMAL: "NORMAL", UNKNOWN: "UNKNOWN", CONTROL: "CONTROL", USER_DEFINED: "USER_DEFINED",
               UNUSED: "UNUSED", BYTE: "BYTE"}


def _formed_pieces(tokens: Sequence[str], types: Sequence[int]) -> list[int]:
    """Ids of pieces other than normal and user-defined ones that llama.cpp's SentencePiece tokenizer
    can make of text: it starts from characters and joins two symbols whenever their text is any
    token, so a piece is formed when it is one character, or two formed parts that are tokens (or
    characters)."""
    vocabulary = set(tokens)
    known: dict[str, bool] = {}

    def formed(text: str) -> bool:
        if len(text) == 1:
            return True
        if text not in known:
            known[text] = False  # no piece is formed from itself
            known[text] = any(
                (text[:cut] in vocabulary or cut == 1) and (text[cut:] in vocabulary or cut == len(text) - 1)
                and formed(text[:cut]) and formed(text[cut:])
                for cut in range(1, len(text)))
        return known[text]

    return [index for index, (token, kind) in enumerate(zip(tokens, types))
            if kind not in (NORMAL, USER_DEFINED) and formed(token)]


def _formed_symbols(merges: Sequence[tuple[str, str]]) -> set[str]:
    """The symbols (byte-level spellings) llama.cpp's merging can make of some text, ignoring the
    split (so a superset): the single bytes UTF-8 uses, and whatever a merge makes of two of them."""
    formed = {BYTE_TO_UNICODE[byte] for byte in range(256) if byte not in _NOT_UTF8}
    grew = True
    while grew:
        grew = False
        for left, right in merges:
            if left in formed and right in formed and left + right not in formed:
                formed.add(left + right)
                grew = True
    return formed


def _made_by_merging(token: str, spelled: bytes, formed: set[str], splitter: BPE, pre: PreTokenizer) -> bool:
    """Whether llama.cpp may turn ordinary text into this token: merging can make it, or
    ``ignore_merges`` takes it whole as a piece of the split."""
    if token in formed:
        return True
    try:
        text = spelled.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return pre.ignore_merges and patterns.pieces(splitter, text) == [text]


def _first(value: bool | None, default: bool) -> bool:
    return default if value is None else value


def _hex(values: Iterable[int]) -> str:
    listed = [f"0x{value:02X}" for value in values]
    return ", ".join(listed[:12]) + (f" and {len(listed) - 12} more" if len(listed) > 12 else "")


# ------------------------------------------------------------------------------------------- saving

_CANONICAL_PRE = {"GPT2": "gpt-2", "LLAMA3": "llama-bpe", "QWEN2": "qwen2", "QWEN35": "qwen35",
                  "DEFAULT": "default", "STARCODER": "starcoder", "FALCON": "falcon",
                  "DEEPSEEK_LLM": "deepseek-llm", "DEEPSEEK_CODER": "deepseek-coder"}
"""The ``pre`` name :func:`save` writes for each split (one that keeps llama.cpp's default settings)."""

_EDGE_PROBES = ("x'ſt", "don'ſt 'Ll 'S", "A\u212a'Kt", "ab\r\n\r\n  cd \n ", "1234567 x", "\u00a0\u3000 a")
"""Texts where spellings of the same split in different regex dialects tend to part."""


def save(
    model: BPE | GGUFVocab,
    path: str | os.PathLike[str],
    *,
    pre: str | None = None,
    bos_token: str | None = None,
    eos_token: str | None = None,
    add_bos: bool | None = None,
    add_eos: bool | None = None,
    user_defined: Iterable[str] | None = None,
    architecture: str = "llama",
    lossy: bool = False,
) -> Path:
    """Write ``model`` as a vocabulary-only GGUF file (atomically) that llama.cpp loads
    (``llama_model_load_from_file`` with ``vocab_only``) and that tokenizes as ``model`` encodes:
    ``read(path).encode(text)`` equals ``model.encode_ordinary(text)``.

    A byte-level model is written as ``gpt2`` with its merges (a rank model's are recovered) and the
    ``pre`` whose split is the model's pattern (given, or found among llama.cpp's); its special tokens
    become control tokens (``user_defined`` ones user-defined: llama.cpp then cuts them out of all
    text). A SentencePiece model is written as ``llama``. ``bos_token``/``eos_token`` name special
    tokens for llama.cpp's BOS/EOS ids; ``add_bos``/``add_eos`` (default false) whether llama.cpp adds
    them. A :class:`GGUFVocab` keeps its own settings unless others are given.

    What llama.cpp would tokenize differently is refused with
    :class:`~hf_bpe.errors.ConversionError` naming the reason: a pattern no ``pre`` of llama.cpp runs (or
    that differs from the named ``pre`` on some probe text), a merges list that would not encode as the
    model does, missing bytes the model drops before merging (`tokenizers`' rule; llama.cpp drops them
    after) where a listed merge could cross one, a SentencePiece normalizer, byte fallback missing,
    `tokenizers`' Metaspace pre-tokenizer (a SentencePiece-style ``tokenizer.json``: it adds no ``▁``
    before a text starting with a space, llama.cpp does). ``lossy=True`` writes the file anyway for a
    pattern, merges list or missing bytes that differ, with a
    :class:`~hf_bpe.errors.LossyConversionWarning` saying how.
    """
    settings: dict[str, Any] = {}
    if isinstance(model, GGUFVocab):
        vocab = model
        model = vocab.model
        settings = {"pre": vocab.pre, "bos": vocab.bos_id, "eos": vocab.eos_id, "unknown": vocab.unknown_id,
                    "padding": vocab.padding_id, "add_bos": vocab.add_bos, "add_eos": vocab.add_eos,
                    "user_defined": vocab.user_defined, "architecture": vocab.architecture or architecture}
    if not isinstance(model, BPE):
        raise TypeError(f"save expects an hf_bpe.BPE or a GGUFVocab, got {type(model).__name__}")
    _rules.check_no_word_affixes(model, "a GGUF file")
    _rules.check_no_special_token_rules(model, "a GGUF file", lossy=lossy)
    specials = model.special_tokens
    for what, token in (("bos_token", bos_token), ("eos_token", eos_token)):
        if token is not None and token not in specials:
            raise ValueError(f"{what} {token!r} is not a special token of the model")
    ids = {
        "bos": specials[bos_token] if bos_token is not None else settings.get("bos"),
        "eos": specials[eos_token] if eos_token is not None else settings.get("eos"),
        "unknown": settings.get("unknown"), "padding": settings.get("padding"),
    }
    entries: list[tuple[str, Value]] = [
        ("general.architecture", Value(STRING, (settings.get("architecture") or architecture).encode("utf-8"))),
    ]
    if model.name:
        entries.append(("general.name", Value(STRING, model.name.encode("utf-8"))))
    if model.kind == "sentencepiece":
        entries += _sentencepiece_entries(model, ids, lossy=lossy)
    else:
        chosen = _pre_for(model, pre or settings.get("pre"), lossy=lossy)
        user = set(settings.get("user_defined", ())) if user_defined is None else set(user_defined)
        entries += _byte_level_entries(model, chosen, user, lossy=lossy)
    for what, value in ids.items():
        if value is not None:
            entries.append((f"tokenizer.ggml.{what}_token_id", Value(UINT32, value)))
    for what, value in (("add_bos_token", add_bos if add_bos is not None else settings.get("add_bos", False)),
                        ("add_eos_token", add_eos if add_eos is not None else settings.get("add_eos", False))):
        entries.append((f"tokenizer.ggml.{what}", Value(BOOL, bool(value))))
    return _gguf_file.write(path, entries)


def _pre_for(model: BPE, pre: str | None, *, lossy: bool) -> str:
    """The ``pre`` name whose split is ``model``'s pattern: ``pre`` itself when it is, else one of
    llama.cpp's whose split cuts every probe text as the pattern does."""
    pattern = model.pattern
    if pattern is None:
        raise ConversionError(f"{model!r} has no split pattern; a gpt2 GGUF vocabulary needs one")
    candidates = [pre] if pre is not None else list(_CANONICAL_PRE.values())
    if pre is not None and pre not in PRE_NAMES:
        raise ConversionError(f"pre {pre!r} is not a llama.cpp pre-tokenizer hf_bpe reproduces; "
                              f"choose one of {', '.join(sorted(PRE_NAMES))}")
    best: tuple[int, str, str] | None = None
    probes = _probe_texts()
    ours: list[list[str]] | None = None  # the model's own pieces, cut once for every candidate
    for name in candidates:
        steps = PRE_NAMES[name].steps
        if steps == pattern:
            return name
        if ours is None:
            ours = _pieces(pattern, probes)
        differing = _split_differences(probes, ours, _pieces(steps, probes))
        if not differing:
            return name
        if best is None or len(differing) < best[0]:
            best = (len(differing), name, differing[0])
    assert best is not None
    count, name, example = best
    message = (f"no llama.cpp pre-tokenizer splits as the pattern {patterns.describe(pattern)[:200]} does: the "
               f"closest, {name!r}, cuts {count} probe text(s) differently, {example}")
    if patterns.byte_level_of(pattern) is not None:
        message += (" (the pattern's ByteLevel step splits the byte-level spelling of pieces, or puts a space before "
                    "each; llama.cpp's pre-tokenizers split the text)")
    _refuse_unless_lossy(message, lossy=lossy, how="pass lossy=True (pre=NAME to choose another)", mismatches=count,
                         probes=len(probes))
    return name


def _refuse_unless_lossy(message: str, *, lossy: bool, how: str = "pass lossy=True", mismatches: int = 1,
                         probes: int = 1) -> None:
    """Refuses what llama.cpp would encode differently, naming ``how`` to write it anyway; with
    ``lossy``, warns instead (at the caller of :func:`save`)."""
    if not lossy:
        raise ConversionError(f"{message}; {how} to write it anyway")
    warnings.warn(LossyConversionWarning(message, mismatches=mismatches, probes=probes), stacklevel=4)


def _probe_texts() -> tuple[str, ...]:
    from conversion._hf_pretokenizers import probe_texts, split_probe_texts

    return (*_EDGE_PROBES, *split_probe_texts(), *probe_texts(500))


def _pieces(pattern: patterns.Pattern, texts: Sequence[str]) -> list[list[str]]:
    """How ``pattern`` cuts each of ``texts``."""
    splitter = BPE({bytes([byte]): byte for byte in range(256)}, pattern)
    return [patterns.pieces(splitter, text) for text in texts]


def _split_differences(texts: Sequence[str], ours: Sequence[list[str]], theirs: Sequence[list[str]]) -> list[str]:
    """The texts cut differently (``ours`` and ``theirs`` are the pieces of each), described."""
    return [_difference(text, mine, other) for text, mine, other in zip(texts, ours, theirs) if mine != other]


def _difference(text: str, mine: list[str], other: list[str]) -> str:
    """Where two cuts of ``text`` part: the text from two pieces before the first piece they differ
    in, and the next pieces of each (a long text's first pieces are often the same in both)."""
    at = next((index for index, (a, b) in enumerate(zip(mine, other)) if a != b), min(len(mine), len(other)))
    start = max(0, at - 2)
    offset = sum(len(piece) for piece in mine[:start])  # the pieces before `start` are the same in both
    where = f" (from character {offset})" if offset else ""
    lead = "..., " if start else ""

    def shown(cut: list[str]) -> str:
        tail = ", ...]" if len(cut) > start + 6 else "]"
        return "[" + lead + ", ".join(repr(piece) for piece in cut[start:start + 6]) + tail
    return f"{text[offset:offset + 40]!r}{where} into {shown(mine)} rather than {shown(other)}"


def _byte_level_entries(model: BPE, pre: str, user_defined: set[str], *, lossy: bool) -> list[tuple[str, Value]]:
    dropped = _rules.missing_bytes_difference(model, "after merging")
    if dropped is not None:
        _refuse_unless_lossy(f"llama.cpp drops a byte the vocabulary lacks after merging (a symbol no merge joins), "
                             f"which encodes differently from {model!r}: {dropped}", lossy=lossy)
    ignore_merges = PRE_NAMES[pre].ignore_merges
    difference = _rules.merge_rule_difference(model, ignore_merges)
    if difference is not None:
        _refuse_unless_lossy(f"llama.cpp applies the merges list{' with ignore_merges' if ignore_merges else ''} "
                             f"(pre {pre!r}), which encodes differently from {model!r}: {difference}", lossy=lossy)
    by_id: dict[int, tuple[str, int]] = {}
    for token, token_id in model.mergeable_ranks.items():
        spelled = token_to_str(token)
        by_id[token_id] = (spelled, USER_DEFINED if spelled in user_defined else NORMAL)
    for text, token_id in model.special_tokens.items():
        by_id[token_id] = (text, USER_DEFINED if text in user_defined else CONTROL)
    unknown = user_defined - {text for text, _ in by_id.values()}
    if unknown:
        raise ValueError(f"user_defined names {sorted(unknown)[:5]}, which are no tokens of the model")
    size = max(by_id) + 1
    tokens: list[bytes] = []
    types: list[int] = []
    seen: dict[str, int] = {}
    for token_id in range(size):
        text, kind = by_id.get(token_id, (f"<unused id {token_id}>", UNUSED))
        if text in seen or not text:
            raise ConversionError(
                f"ids {seen.get(text)} and {token_id} would both be the GGUF token {text!r} (a special token spelled "
                "like a byte-level token, or an empty one); llama.cpp needs distinct, non-empty tokens")
        seen[text] = token_id
        tokens.append(text.encode("utf-8"))
        types.append(kind)
    merges = [f"{token_to_str(left)} {token_to_str(right)}".encode() for left, right in model.merges]
    return [
        ("tokenizer.ggml.model", Value(STRING, b"gpt2")),
        ("tokenizer.ggml.pre", Value(STRING, pre.encode("utf-8"))),
        ("tokenizer.ggml.tokens", Value(ARRAY, tokens, STRING)),
        ("tokenizer.ggml.token_type", Value(ARRAY, types, INT32)),
        ("tokenizer.ggml.merges", Value(ARRAY, merges, STRING)),
    ]


def _sentencepiece_entries(model: BPE, ids: dict[str, int | None], *, lossy: bool) -> list[tuple[str, Value]]:
    spec = model.sentencepiece
    assert spec is not None
    problems = []
    if spec.charsmap or spec.normalizer_name not in ("identity", ""):
        problems.append(f"the normalizer {spec.normalizer_name!r} (llama.cpp's SentencePiece tokenizer normalizes nothing)")
    if spec.tokenizers_normalizer:
        problems.append(f"tokenizers' normalizer ({', '.join(step.kind for step in spec.tokenizers_normalizer)}; "
                        "llama.cpp's SentencePiece tokenizer normalizes nothing)")
    if spec.remove_extra_whitespaces:
        problems.append("remove_extra_whitespaces (llama.cpp keeps every space)")
    if not spec.escape_whitespaces:
        problems.append("unescaped spaces (llama.cpp always writes them as ▁)")
    if spec.metaspace is not None or spec.metaspace_split:
        problems.append(f"tokenizers' Metaspace pre-tokenizer (prepend_scheme {spec.metaspace or 'always'!r}"
                        f"{', split' if spec.metaspace_split else ''}), which a GGUF file cannot say (llama.cpp puts "
                        "its dummy prefix before every text, one starting with a space too, and never splits at ▁)")
    texts = [piece.text for piece in spec.pieces]
    types = [piece.type for piece in spec.pieces]
    index_of = {text: index for index, text in enumerate(texts)}
    if not spec.byte_fallback or any(f"<0x{byte:02X}>" not in index_of for byte in range(256)):
        problems.append("byte fallback with all 256 <0xXX> pieces (llama.cpp falls back to them for any "
                        "character that is no piece, where SentencePiece gives <unk>)")
    formed = _formed_pieces(texts, types)
    if formed:
        problems.append(f"the pieces {[texts[index] for index in formed[:5]]}, which llama.cpp forms by merging "
                        "and SentencePiece does not")
    user_defined = [piece.text for piece in spec.pieces if piece.type == USER_DEFINED]
    if user_defined and not lossy:
        problems.append(f"the user-defined pieces {user_defined[:5]} (llama.cpp puts a ▁ before the text after them, "
                        "SentencePiece does not; pass lossy=True to write them anyway)")
    if len(set(texts)) != len(texts) or "" in texts:
        problems.append("repeated or empty pieces (llama.cpp needs distinct, non-empty tokens)")
    if problems:
        raise ConversionError(f"llama.cpp cannot run {model!r} as SentencePiece does: it has " + "; ".join(problems))
    for what, text in (("bos", "<s>"), ("eos", "</s>")):
        if ids[what] is None and text in index_of and types[index_of[text]] == CONTROL:
            ids[what] = index_of[text]
    if ids["unknown"] is None:
        ids["unknown"] = spec.unk_id
    return [
        ("tokenizer.ggml.model", Value(STRING, b"llama")),
        ("tokenizer.ggml.pre", Value(STRING, b"default")),
        ("tokenizer.ggml.tokens", Value(ARRAY, [text.encode("utf-8") for text in texts], STRING)),
        ("tokenizer.ggml.scores", Value(ARRAY, [float(piece.score) for piece in spec.pieces], FLOAT32)),
        ("tokenizer.ggml.token_type", Value(ARRAY, types, INT32)),
        ("tokenizer.ggml.add_space_prefix", Value(BOOL, spec.add_dummy_prefix)),
    ]

