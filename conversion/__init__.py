"""Converters between hf_bpe models and the formats the field uses.

One module per format, each a pair of pure functions: ``load(...) -> hf_bpe.BPE`` and
``save(model, ...)``. Converters never call each other: A -> B is ``B.save(A.load(...))``.
"""
