"""The old home of the model card writer, now :mod:`hf_bpe.transformers.model_card` (it belongs to the
folder format); kept so that old imports keep working."""

from hf_bpe.transformers.model_card import (
    CARD_FILE,
    HISTOGRAM_FILE,
    TEMPLATE_DIR,
    bytes_per_token,
    render,
    template_path,
    token_length_counts,
    write_model_card,
)

__all__ = [
    "CARD_FILE",
    "HISTOGRAM_FILE",
    "TEMPLATE_DIR",
    "bytes_per_token",
    "render",
    "template_path",
    "token_length_counts",
    "write_model_card",
]
