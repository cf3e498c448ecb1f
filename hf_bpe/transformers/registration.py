"""``AutoTokenizer`` finds :class:`~hf_bpe.BPETokenizer` by the name in ``tokenizer_config.json``.

:mod:`hf_bpe._autotokenizer` runs :func:`register` when transformers' auto module loads (``import
hf_bpe`` alone must not import transformers); importing :mod:`hf_bpe.transformers` runs it too.
"""

from __future__ import annotations

from transformers import AutoTokenizer, PreTrainedConfig

from hf_bpe.transformers.tokenizer import BPETokenizer


def register() -> None:
    """Make ``AutoTokenizer`` find ``BPETokenizer`` by the name in ``tokenizer_config.json``.

    transformers registers a tokenizer against a config class; registered against its own
    ``PreTrainedConfig`` it records the class by name and maps no model type to it.
    """
    AutoTokenizer.register(PreTrainedConfig, tokenizer_class=BPETokenizer)
