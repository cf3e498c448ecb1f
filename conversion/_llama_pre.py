r"""llama.cpp's pre-tokenizers (``tokenizer.ggml.pre``) as hf_bpe split patterns.

llama.cpp names the split of a byte-level vocabulary in ``tokenizer.ggml.pre`` and maps each name to
a type (``LLAMA_VOCAB_PRE_TYPE_*`` in ``src/llama-vocab.cpp``), each type to a list of regexes, and
runs the list in turn: every regex cuts each piece of the step before into its matches and the text
between them, all kept (`tokenizers`' ``Split`` with behavior ``isolated``). It runs them with its
own engine: hand-written scanners for GPT-2's, Llama 3's and Qwen's regexes, ``std::regex`` on text
whose non-ASCII characters are replaced by one byte per Unicode category (whitespace by ``\v``) for
the others. The regexes below are llama.cpp's, as `tokenizers`' Oniguruma reads them in the same
sense (the ``std::regex`` ones, whose ``$`` ends the piece, say ``\z``, and classes of non-ASCII
characters leave whitespace out); a type whose single regex matches every character is a tiktoken
pattern, which drops nothing either.

Each type listed here was checked against llama.cpp itself: its ``ggml-vocab-*.gguf`` tests where
it has one, and llama.cpp's tokenizer run on generated text. Types not listed (digit grouping by
hand-written code, empty matches, character-level BPE without byte encoding) are refused by name.

>>> PRE_NAMES["llama-bpe"].steps == LLAMA3
True
>>> PRE_NAMES["llama-bpe"].ignore_merges, PRE_NAMES["gpt-2"].ignore_merges
(True, False)
"""

from __future__ import annotations

from dataclasses import dataclass

from hf_bpe import patterns
from hf_bpe.patterns import Split

__all__ = ["GPT2_STEP", "LLAMA3", "PRE_NAMES", "PRE_TYPES", "QWEN2", "QWEN35", "PreTokenizer"]

GPT2_STEP = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)"
r"""GPT-2's regex as llama.cpp lists it (no final ``\s+``: the whitespace it leaves is kept between
matches)."""

_CONTRACTIONS = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
"""llama.cpp's spelling of ``(?i:'s|'t|'re|'ve|'m|'ll|'d)``: unlike it, ``'ſ`` is no contraction."""

LLAMA3 = _CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
"""Llama 3's split as llama.cpp runs it (``llama-bpe``)."""

QWEN2 = _CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
"""Qwen 2's split as llama.cpp runs it (``qwen2``)."""

QWEN35 = (_CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+"
          r"|\s+(?!\S)|\s+")
"""Qwen 3.5's split as llama.cpp runs it (``qwen35``): letters keep their combining marks."""

_WHITESPACE_ABOVE_ASCII = "\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
"""llama.cpp replaces these by ``\\v`` before running a regex, so no class of non-ASCII characters
matches them."""

_CJK = f"[\u4e00-\u9fa5\u0800-\u4e00\uac00-\ud7ff&&[^{_WHITESPACE_ABOVE_ASCII}]]+"
"""CJK ideographs and Hangul (and the blocks between, whitespace aside), as llama.cpp lists them."""


def _steps(*regexes: str) -> tuple[Split, ...]:
    return tuple(Split(regex, "isolated") for regex in regexes)


PRE_TYPES: dict[str, patterns.Pattern] = {
    "DEFAULT": _steps(r"[\p{P}\$\+<=>\^~\|]+", GPT2_STEP, r"\p{N}+", "[0-9][0-9][0-9]"),
    "GPT2": patterns.GPT2,
    "LLAMA3": LLAMA3,
    "QWEN2": QWEN2,
    "QWEN35": QWEN35,
    "STARCODER": _steps(r"\p{N}", GPT2_STEP),
    "FALCON": _steps(r"[\p{P}\$\+<=>\^~\|`]+", GPT2_STEP, "[0-9][0-9][0-9]"),
    "DEEPSEEK_LLM": _steps(
        "[\r\n]",
        "\\s?[A-Za-z\u00b5\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u01ba\u01bc-\u01bf\u01c4-\u0293\u0295-\u02af\u0370-\u0373"
        "\u0376\u0377\u037b-\u037d\u037f\u0386\u0388-\u038a\u038c\u038e-\u03a1\u03a3-\u03f5\u03f7-\u0481\u048a-\u052f"
        "\u0531-\u0556\u10a0-\u10c5\u13a0-\u13f5\u13f8-\u13fd\u1c90-\u1cba\u1cbd-\u1cbf\u1d00-\u1d2b\u1d6b-\u1d77"
        "\u1d79-\u1d9a\u1e00-\u1f15\u1f18-\u1f1d\u1f20-\u1f45\u1f48-\u1f4d\u1f50-\u1f57\u1f59\u1f5b\u1f5d\u1f5f-\u1f7d"
        "\u1f80-\u1fb4\u1fb6-\u1fbc\u1fbe\u1fc2-\u1fc4\u1fc6-\u1fcc\u1fd0-\u1fd3\u1fd6-\u1fdb\u1fe0-\u1fec\u1ff2-\u1ff4"
        "\u1ff6-\u1ffc\u2102\u2107\u210a-\u2113\u2115\u2119-\u211d\u2124\u2126\u2128\u212a-\u212d\u212f-\u2134\u2139"
        "\u213c-\u213f\u2145-\u2149\u214e\u2183\u2184\u2c00-\u2c7b\u2c7e-\u2ce4\u2ceb-\u2cee\u2cf2\u2cf3\ua640-\ua66d"
        "\ua680-\ua69b\ua722-\ua76f\ua771-\ua787\ua78b-\ua78e\uab70-\uabbf\ufb00-\ufb06\ufb13-\ufb17\uff21-\uff3a"
        "\uff41-\uff5a\U00010400-\U0001044f\U000104b0-\U000104d3\U000104d8-\U000104fb\U00010c80-\U00010cb2"
        "\U00010cc0-\U00010cf2\U000118a0-\U000118df\U0001e900-\U0001e943]+",
        "\\s?[!-/:-~\uff01-\uff0f\uff1a-\uff5e\u2018-\u201f\u3001-\u3002]+",  # U+3000 is whitespace
        r"\s+\z",
        _CJK,
        r"\p{N}+",
    ),
    "DEEPSEEK_CODER": _steps("[\r\n]", r"\s?\p{L}+", r"\s?\p{P}+", _CJK, r"\p{N}"),
    "DEEPSEEK3_LLM": _steps(
        r"\p{N}{1,3}",
        "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+",
        r"""[!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*"""
        r"|\s*[\r\n]+|\s+(?!\S)|\s+",
    ),
    "SPARK2_5": _steps(
        r"\p{N}{1,3}",
        "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+",
        r"""[!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+"""
        r"|[\r\n]|\s+(?!\S)|\s+",
        r"\p{N}",
    ),
    "JAIS2": _steps(_CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+"
                    r"|\s{512}(?!\S)|\s{256}(?!\S)|\s{128}(?!\S)|\s{64}(?!\S)|\s{32}(?!\S)|\s{16}(?!\S)|\s{8}(?!\S)"
                    r"|\s{4}(?!\S)|\s{1,2}(?!\S)|\s{1}"),
    "PORO": _steps(" ?[^(\\s|.,!?\u2026\u3002\uff0c\u3001\u0964\u06d4\u060c)]+"),
    "VIKING": _steps(" ?[^(\\s|.,!?\u2026\u3002\uff0c\u3001\u0964\u06d4\u060c)]+", r"\p{N}"),
    "TEKKEN": _steps(r"[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+|[^\r\n\p{L}\p{N}]?"
                     r"((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+"
                     r"|\s+(?!\S)|\s+"),
    "CHAMELEON": _steps("<sentinel:[0-9]+>", "(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z", "([\\t\\n]|    |  )", r"\p{N}",
                        r"[\p{P}!-/:-@\[-`{-~]", GPT2_STEP),
    "GPT4O": _steps(r"[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+" + _CONTRACTIONS
                    + r"?|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*" + _CONTRACTIONS
                    + r"?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"),
    "GRANITE_EMB_MULTI": _steps(
        r"[^\r\n\p{L}\p{N}]?((?=[\p{L}\p{M}])([^a-z]))*((?=[\p{L}\p{M}])([^A-Z]))+" + _CONTRACTIONS
        + r"?|[^\r\n\p{L}\p{N}]?((?=[\p{L}\p{M}])([^a-z]))+((?=[\p{L}\p{M}])([^A-Z]))*" + _CONTRACTIONS
        + r"?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"),
    "BAILINGMOE": _steps(r"'(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
                         r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+"),
    "SEED_CODER": _steps(_CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1}| ?[^\s\p{L}\p{N}\r\n]+|\s*[\r\n]+"
                         r"|\s+(?!\S)|\s+"),
    "UFAKZEKA": _steps(r"[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"),
    "LAGUNA": _steps("[^\\n]+|[\\n]+", QWEN2),
    "EXAONE_MOE": _steps(_CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?(?:\p{L}\p{M}*(?: \p{L}\p{M}*)*)+|\p{N}"
                         r"| ?[^\s\p{L}\p{N}]+[\r\n/]?|\s*[\r\n]|\s+(?!\S)|\s+"),
    "MINICPM5": _steps(r"\p{N}{1,3}", _CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}+| ?[^\s\p{L}\p{N}]+[\r\n]*"
                       r"|\s*[\r\n]+|\s+(?!\S)|\s+"),
}
"""Each supported ``LLAMA_VOCAB_PRE_TYPE_*`` (without the prefix) and its split."""


@dataclass(frozen=True)
class PreTokenizer:
    """What a ``tokenizer.ggml.pre`` name means to llama.cpp: its type, whose split is
    :attr:`steps`, and the settings llama.cpp gives the name."""

    type: str
    ignore_merges: bool = False
    """A piece that is a token is emitted whole (llama.cpp's ``ignore_merges``)."""
    add_bos: bool = False
    """llama.cpp adds the BOS token unless the file says otherwise (``add_bos_token``)."""
    no_bos: bool = False
    """llama.cpp drops the default BOS id (the file may still name one)."""

    @property
    def steps(self) -> patterns.Pattern:
        return PRE_TYPES[self.type]


_LLAMA3 = PreTokenizer("LLAMA3", ignore_merges=True, add_bos=True)

PRE_NAMES: dict[str, PreTokenizer] = {
    "default": PreTokenizer("DEFAULT"),
    **dict.fromkeys(("llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2",
                     "jina-v5-nano"), _LLAMA3),
    "dbrx": PreTokenizer("LLAMA3"),
    "smaug-bpe": PreTokenizer("LLAMA3"),
    "deepseek-llm": PreTokenizer("DEEPSEEK_LLM"),
    "deepseek-coder": PreTokenizer("DEEPSEEK_CODER"),
    "falcon": PreTokenizer("FALCON"),
    **dict.fromkeys(("gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v2-es", "jina-v2-de", "a.x-4.0",
                     "mellum", "modern-bert", "jina-v1-en", "jina-v2-code", "roberta-bpe", "exaone4", "mpt",
                     "olmo", "jais", "trillion", "granite-docling"), PreTokenizer("GPT2")),
    **dict.fromkeys(("starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b", "mellum2"),
                    PreTokenizer("STARCODER")),
    **dict.fromkeys(("qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2", "megrez", "stablelm2", "hunyuan",
                     "solar-open"), PreTokenizer("QWEN2")),
    "qwen35": PreTokenizer("QWEN35"),
    "chatglm-bpe": PreTokenizer("LLAMA3", no_bos=True),
    **dict.fromkeys(("glm4", "glm5"), PreTokenizer("LLAMA3", ignore_merges=True, no_bos=True)),
    **dict.fromkeys(("deepseek-v3", "hunyuan-dense", "joyai-llm", "hy_v4"), PreTokenizer("DEEPSEEK3_LLM")),
    "spark2_5": PreTokenizer("SPARK2_5"),
    "jais-2": PreTokenizer("JAIS2"),
    **dict.fromkeys(("poro-chat", "bloom", "gpt3-finnish"), PreTokenizer("PORO")),
    "viking": PreTokenizer("VIKING"),
    "tekken": PreTokenizer("TEKKEN", ignore_merges=True, add_bos=True),
    "chameleon": PreTokenizer("CHAMELEON", add_bos=True),
    **dict.fromkeys(("gpt-4o", "llama4", "kanana2", "talkie", "minimax-m2"), PreTokenizer("GPT4O")),
    "granite-embed-multi-97m": PreTokenizer("GRANITE_EMB_MULTI", ignore_merges=True),
    **dict.fromkeys(("bailingmoe", "bailingmoe2", "llada-moe"), PreTokenizer("BAILINGMOE")),
    "seed-coder": PreTokenizer("SEED_CODER"),
    "ufakzeka": PreTokenizer("UFAKZEKA"),
    "grok-2": PreTokenizer("QWEN2"),
    "laguna": PreTokenizer("LAGUNA"),
    "exaone-moe": PreTokenizer("EXAONE_MOE"),
    "minicpm5": PreTokenizer("MINICPM5", ignore_merges=True),
}
"""Every ``tokenizer.ggml.pre`` value hf_bpe reproduces, as llama.cpp's ``llama_vocab::impl::load``
reads it (its ``CHATGLM4`` type runs Llama 3's regex)."""
