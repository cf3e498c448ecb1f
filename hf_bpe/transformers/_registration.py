"""``AutoTokenizer`` finds :class:`~hf_bpe.BPETokenizer` by the name in ``tokenizer_config.json``.

:func:`register` does it; it is idempotent. It runs when :mod:`hf_bpe.transformers` is imported, and
``import hf_bpe`` arranges for that to happen when transformers' auto-tokenizer module loads
(:mod:`hf_bpe._autotokenizer`: ``import hf_bpe`` alone does not import transformers). Code that wants
the registration explicit calls ``hf_bpe.transformers.register()``.
"""

from __future__ import annotations

from transformers import AutoTokenizer, PreTrainedConfig

from hf_bpe.transformers._tokenizer import BPETokenizer


def register() -> None:
    """Make ``AutoTokenizer`` find ``BPETokenizer`` by the name in ``tokenizer_config.json``
    (idempotent: registering again changes nothing).

    transformers registers a tokenizer against a config class; registered against its own
    ``PreTrainedConfig`` it records the class by name and maps no model type to it.
    """
    AutoTokenizer.register(PreTrainedConfig, tokenizer_class=BPETokenizer)
