"""tiktoken's ``tiktoken.core``: where :class:`Encoding` lives (``tiktoken.core.Encoding`` in type hints).

>>> from hf_bpe.tiktoken import core
>>> core.Encoding.__name__
'Encoding'
"""

from hf_bpe.tiktoken import Encoding

__all__ = ["Encoding"]
