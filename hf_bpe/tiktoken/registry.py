"""tiktoken's ``tiktoken.registry``: :func:`get_encoding` and :func:`list_encoding_names` (the
encodings are hf_bpe's, not plugins: tiktoken_ext modules are not read).

>>> from hf_bpe.tiktoken import registry
>>> registry.get_encoding("gpt2").name
'gpt2'
"""

from hf_bpe.tiktoken import get_encoding, list_encoding_names

__all__ = ["get_encoding", "list_encoding_names"]
