"""The old home of ``BPETokenizer`` (now :mod:`hf_bpe.transformers`), kept so that old import paths and
pickles keep working: ``from hf_bpe.hf import BPETokenizer``, ``save_tokenizer_folder``, and tokenizers
pickled as ``hf_bpe.hf.BPETokenizer``. New code imports from :mod:`hf_bpe` or :mod:`hf_bpe.transformers`.
"""

from hf_bpe.transformers import CONFIG_KEY, MODEL_FILE, REMOTE_CODE_FILE, BPETokenizer, save_tokenizer_folder
from hf_bpe.transformers.registration import register

__all__ = ["CONFIG_KEY", "MODEL_FILE", "REMOTE_CODE_FILE", "BPETokenizer", "register", "save_tokenizer_folder"]
