"""The transformers layer: ``BPETokenizer``, an ``hf_bpe.BPE`` model as a transformers tokenizer.

Encoding goes straight from text to ids in the Rust core, added tokens included (the core cuts them
out before BPE), so no per-token Python strings are made on the way. ``save_pretrained`` writes a
folder that loads everywhere: with ``import hf_bpe`` ``AutoTokenizer`` returns this class; without
it, transformers falls back to ``TokenizersBackend`` on the equivalent ``tokenizer.json``, which gives
the same ids.

One file per concern: :mod:`~hf_bpe.transformers._tokenizer` (the class, construction, vocabulary,
decoding), :mod:`~hf_bpe.transformers._pipeline` (transformers' encoding pipeline),
:mod:`~hf_bpe.transformers._encode` (ids from the core, padded arrays),
:mod:`~hf_bpe.transformers._added_tokens`, :mod:`~hf_bpe.transformers._folder` (saving, settings
checks), :mod:`~hf_bpe.transformers._training`, :mod:`~hf_bpe.transformers._model_card` and
:mod:`~hf_bpe.transformers._registration` (``AutoTokenizer``: :func:`register`, run on import; ``import
hf_bpe`` runs it when transformers loads, without importing transformers itself) and
:mod:`~hf_bpe.transformers._patch` (``hf_bpe.patch_transformers()``: transformers' own fast tokenizers
encode with hf_bpe).

>>> import hf_bpe
>>> tokenizer = hf_bpe.BPETokenizer.from_model(hf_bpe.get_encoding("gpt2"), eos_token="<|endoftext|>",
...                                            add_eos_token=True)
>>> tokenizer("hello world")["input_ids"]
[31373, 995, 50256]
>>> tokenizer.decode([31373, 995, 50256], skip_special_tokens=True)
'hello world'
"""

from hf_bpe.model import MODEL_FILE
from hf_bpe.transformers._folder import CONFIG_KEY, REMOTE_CODE_FILE
from hf_bpe.transformers._registration import register
from hf_bpe.transformers._tokenizer import BPETokenizer, save_tokenizer_folder

__all__ = ["CONFIG_KEY", "MODEL_FILE", "REMOTE_CODE_FILE", "BPETokenizer", "register", "save_tokenizer_folder"]

register()  # AutoTokenizer finds BPETokenizer once this package is imported (see registration)
