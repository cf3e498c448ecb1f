"""Converters between hf_bpe models and the formats the field uses.

One module per format, each a pair of pure functions: ``load(...) -> hf_bpe.BPE`` and
``save(model, ...)``. Converters never call each other: A -> B is ``B.save(A.load(...))``.

- :mod:`conversion.tiktoken`: ``.tiktoken`` rank files, and Mistral's tekken JSON
  (``load_tekken`` / ``save_tekken``);
- :mod:`conversion.gpt2`: GPT-2's ``encoder.json`` + ``vocab.bpe`` (``vocab.json`` + ``merges.txt``);
- :mod:`conversion.sentencepiece`: SentencePiece BPE ``.model`` files;
- :mod:`conversion.gguf`: the tokenizer of llama.cpp's GGUF files (its private helpers
  :mod:`conversion._gguf_file`, the container, and :mod:`conversion._llama_pre`, llama.cpp's splits);
- :mod:`conversion.hf`: HF ``tokenizer.json`` (written from byte-level and SentencePiece models; its
  private helper :mod:`conversion._hf_sentencepiece` builds the latter).

A ``save`` that cannot hold a model exactly raises :class:`hf_bpe.ConversionError` saying what would
change; ``lossy=True`` writes the documented approximation where the format has one.
"""

__all__ = ["gpt2", "hf", "sentencepiece", "tiktoken"]
