"""``train_new_from_iterator``: a new :class:`~hf_bpe.BPETokenizer` like this one, trained on new text."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

from transformers import PreTrainedTokenizer
from transformers.tokenization_utils_base import AddedToken

from hf_bpe.model import BPE
from hf_bpe.train import train
from hf_bpe.transformers._folder import CONFIG_KEY

if TYPE_CHECKING:
    from hf_bpe.transformers._tokenizer import BPETokenizer


class Retraining(PreTrainedTokenizer):
    """Training (a mixin of :class:`~hf_bpe.BPETokenizer`)."""

    _model: BPE
    _add_bos: bool
    _add_eos: bool
    _added_tokens_decoder: dict[int, AddedToken]

    # -------------------------------------------------------------------------------- training

    def train_new_from_iterator(
        self,
        text_iterator: Iterable[str] | Iterable[Sequence[str]],
        vocab_size: int,
        length: int | None = None,
        new_special_tokens: Sequence[str | AddedToken] | None = None,
        special_tokens_map: Mapping[str, str] | None = None,
        **kwargs: Any,
    ) -> BPETokenizer:
        """Train a new tokenizer like this one (same split pattern, special tokens, BOS/EOS policy,
        chat template) on ``text_iterator``, texts or batches of texts, as the fast tokenizers'
        method does. ``vocab_size`` counts every id, special tokens included (they take the last
        ids). ``length`` is accepted for compatibility and unused. ``special_tokens_map``
        renames special tokens; ``new_special_tokens`` adds some. Other keyword arguments go to
        :func:`hf_bpe.train` (e.g. ``show_progress``). A tokenizer of a SentencePiece model is
        refused: train one with :func:`hf_bpe.train_sentencepiece`."""
        if self._model.kind == "sentencepiece":
            raise NotImplementedError(
                f"{self._model!r} is a SentencePiece model; retrain it with hf_bpe.train_sentencepiece and wrap the "
                "result with BPETokenizer.from_model"
            )
        rename = dict(special_tokens_map or {})
        specials = [rename.get(text, text) for text in self._special_tokens_in_id_order()]
        for token in new_special_tokens or []:
            if str(token) not in specials:
                specials.append(str(token))
        texts = _TextStream(text_iterator)
        kwargs.setdefault("show_progress", False)
        model = train(
            texts, vocab_size, pattern=self._model.pattern, special_tokens=specials, **kwargs
        )
        init = {key: value for key, value in self.init_kwargs.items() if key not in _NOT_INHERITED}
        for key in self.SPECIAL_TOKENS_ATTRIBUTES:
            value = self._special_tokens_map.get(key)
            if value is not None:
                init[key] = rename.get(str(value), str(value))
        extra = [rename.get(str(token), str(token)) for token in self._extra_special_tokens]
        init["extra_special_tokens"] = extra + [
            str(token) for token in new_special_tokens or [] if str(token) not in extra
        ]
        init["chat_template"] = self.chat_template
        training = {"texts": texts.count, "bytes": texts.bytes, "vocab_size": vocab_size}
        if texts.sample:
            training["sample_bytes"] = len(texts.sample.encode("utf-8"))
            training["sample_tokens"] = len(model.encode_ordinary(texts.sample))
        return cast("BPETokenizer", type(self)(
            model=model,
            add_bos_token=self._add_bos,
            add_eos_token=self._add_eos,
            **cast(dict[str, Any], {CONFIG_KEY: {"card": {"training": training}}}),
            **init,
        ))

    def _special_tokens_in_id_order(self) -> list[str]:
        return [
            token.content
            for _, token in sorted(self._added_tokens_decoder.items())
            if token.special or token.content in self._model.special_tokens
        ]


_NOT_INHERITED = (
    "name_or_path",
    "vocab_file",
    "added_tokens_decoder",
    "add_bos_token",
    "add_eos_token",
    CONFIG_KEY,
)


class _TextStream:
    """Texts from an iterator of texts or of batches of texts, counted, with a short sample kept."""

    SAMPLE_CHARS = 20_000

    def __init__(self, source: Iterable[str] | Iterable[Sequence[str]]) -> None:
        self._source = source
        self.count = 0
        self.bytes = 0
        self.sample = ""

    def __iter__(self) -> Iterator[str]:
        for item in self._source:
            for text in [item] if isinstance(item, str) else item:
                if not isinstance(text, str):
                    raise TypeError(f"training texts must be str, got {type(text).__name__}")
                self.count += 1
                self.bytes += len(text.encode("utf-8"))
                if len(self.sample) < self.SAMPLE_CHARS:
                    self.sample += text[: self.SAMPLE_CHARS - len(self.sample)] + "\n"
                yield text
