"""``train_new_from_iterator``: a new :class:`~hf_bpe.BPETokenizer` like this one, trained on new text."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

from transformers import PreTrainedTokenizer
from transformers.tokenization_utils_base import AddedToken

from hf_bpe.model import BPE
from hf_bpe.sentencepiece_bpe import CONTROL, USER_DEFINED, SentencePieceSpec
from hf_bpe.train import train
from hf_bpe.train_sentencepiece import train_sentencepiece
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
        :func:`hf_bpe.train` (e.g. ``show_progress``).

        A SentencePiece model is retrained with :func:`hf_bpe.train_sentencepiece` and its own
        settings (:func:`sentencepiece_options`: normalizer, dummy prefix, byte fallback, special
        pieces, and the training options a ``.model`` file recorded); ``new_special_tokens`` become
        control pieces, and other keyword arguments are its options."""
        rename = dict(special_tokens_map or {})
        texts = _TextStream(text_iterator)
        kwargs.setdefault("show_progress", False)
        spec = self._model.sentencepiece
        if spec is not None:
            options = sentencepiece_options(spec, rename)
            controls = list(options.get("control_symbols", ()))
            taken = {*controls, *options.get("user_defined_symbols", ()),
                     *(options.get(f"{role}_piece") for role in ("unk", "bos", "eos", "pad"))}
            controls += [str(token) for token in new_special_tokens or [] if str(token) not in taken]
            options["control_symbols"] = controls
            model = train_sentencepiece(texts, vocab_size, **{**options, **kwargs})
            trained = model.sentencepiece
            if trained is not None and (spec.metaspace is not None or spec.metaspace_split):  # a tokenizer.json's
                model = BPE.from_sentencepiece(dataclasses.replace(
                    trained, metaspace=spec.metaspace, metaspace_split=spec.metaspace_split))
        else:
            specials = [rename.get(text, text) for text in self._special_tokens_in_id_order()]
            for token in new_special_tokens or []:
                if str(token) not in specials:
                    specials.append(str(token))
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


def sentencepiece_options(spec: SentencePieceSpec, rename: Mapping[str, str] | None = None) -> dict[str, Any]:
    """:func:`hf_bpe.train_sentencepiece` options that train a model like ``spec``: its normalizer,
    whitespace handling, byte fallback and unknown piece's surface, its special pieces under their
    ids (``unk``, ``bos``, ``eos``, ``pad``, then the other control and user-defined pieces, each
    renamed by ``rename``), and the options its ``.model`` file recorded for the pieces' shape
    (``character_coverage``, ``split_digits``, ...).

    >>> from hf_bpe.sentencepiece_bpe import Piece, UNKNOWN, CONTROL
    >>> spec = SentencePieceSpec((Piece("<unk>", 0, UNKNOWN), Piece("<s>", 0, CONTROL), Piece("</s>", 0, CONTROL)))
    >>> options = sentencepiece_options(spec)
    >>> options["unk_id"], options["bos_id"], options["eos_id"], options["pad_id"], options["control_symbols"]
    (0, 1, 2, -1, [])
    """
    rename = rename or {}
    options: dict[str, Any] = {
        "byte_fallback": spec.byte_fallback, "normalization_rule_name": spec.normalizer_name,
        "add_dummy_prefix": spec.add_dummy_prefix, "remove_extra_whitespaces": spec.remove_extra_whitespaces,
        "unk_surface": spec.unk_surface,
    }
    if spec.trainer_spec:
        from conversion.sentencepiece import proto_of

        recorded = proto_of(spec).trainer_spec
        options |= {name: getattr(recorded, name) for name in _RECORDED}
    controls = {piece.text: index for index, piece in enumerate(spec.pieces) if piece.type == CONTROL}
    meta = {"unk": spec.unk_id if spec.unk_id is not None else -1, "bos": controls.pop("<s>", -1),
            "eos": controls.pop("</s>", -1), "pad": controls.pop("<pad>", -1)}
    for role, index in meta.items():
        options[f"{role}_id"] = index
        if index >= 0:
            options[f"{role}_piece"] = rename.get(spec.pieces[index].text, spec.pieces[index].text)
    options["control_symbols"] = [rename.get(text, text) for text in controls]
    options["user_defined_symbols"] = [rename.get(piece.text, piece.text) for piece in spec.pieces
                                       if piece.type == USER_DEFINED]
    return options


_RECORDED = ("character_coverage", "max_sentence_length", "max_sentencepiece_length", "split_by_unicode_script",
             "split_by_number", "split_by_whitespace", "split_digits", "allow_whitespace_only_pieces")
"""Training options of a ``.model`` file's ``TrainerSpec`` that shape the pieces learned."""

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
