"""tiktoken's ``tiktoken.model``: the model-to-encoding tables and their look-ups.

>>> from hf_bpe.tiktoken import model
>>> model.encoding_name_for_model("gpt-4"), model.MODEL_TO_ENCODING["gpt2"]
('cl100k_base', 'gpt2')
"""

from hf_bpe.tiktoken import (
    MODEL_PREFIX_TO_ENCODING,
    MODEL_TO_ENCODING,
    encoding_for_model,
    encoding_name_for_model,
)

__all__ = ["MODEL_PREFIX_TO_ENCODING", "MODEL_TO_ENCODING", "encoding_for_model", "encoding_name_for_model"]
