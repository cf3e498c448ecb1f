"""transformers' added tokens as the core matches them: `tokenizers`' rules, leftmost-longest."""

from __future__ import annotations

import re
from collections.abc import Mapping

from transformers.tokenization_utils_base import AddedToken

from hf_bpe._added_tokens import AddedTokensEncoder, added_tokens_encoder
from hf_bpe._byte_level import try_str_to_token
from hf_bpe.model import BPE
from hf_bpe.patterns import normalizers_of
from hf_bpe.sentencepiece_bpe import CONTROL, UNKNOWN, USER_DEFINED
from hf_bpe.transformers._sentencepiece import (
    Pieces,
    SentencePieceTwoPhase,
    normalize,
    relabeled,
    ruled_policy,
    spans_in_text,
    without_normalizer,
)

__all__ = ["AddedTokens"]


class AddedTokens:
    """The added tokens as the core matches them: ``tokenizers``' rules, leftmost-longest match.

    `tokenizers` first cuts out the tokens with ``normalized=False`` (special tokens, by default),
    then the others in the text between. When no token of the second kind can overlap one of the
    first, a single leftmost-longest pass in the core gives the same result; otherwise
    :meth:`two_phase` does the two passes.

    Tokens that strip whitespace or match single words (``lstrip``, ``rstrip``, ``single_word``), and
    every token of a byte-level model whose normalizer changes text (``normalized`` tokens are looked
    for in the normalized text, spelled as normalized), are matched by the core with these rules, and
    its own two passes for ``normalized``. A SentencePiece
    model whose ``tokenizer.json`` normalizes text (the dummy prefix, spaces as ``▁``) has its tokens
    with ``normalized=True`` looked for in the normalized text, as normalized
    (:class:`~hf_bpe.transformers._sentencepiece.SentencePieceTwoPhase`). What the core cannot match
    as `tokenizers` does leaves :attr:`in_core` false, and the caller refuses (:meth:`check_in_core`).
    """

    def __init__(self, model: BPE, decoder: Mapping[int, AddedToken]) -> None:
        self.decoder = decoder
        self.size = len(decoder)
        tokens = [(token.content, token_id) for token_id, token in decoder.items()]
        self.ruled = sorted(token.content for token in decoder.values()
                            if token.lstrip or token.rstrip or token.single_word)
        """The tokens that strip whitespace or match single words."""
        self.plain = not self.ruled
        self.in_core = True
        """Whether the core matches the added tokens as `tokenizers` does (always when :attr:`plain`)."""
        self.refusal = ""
        self.special_ids = frozenset(token_id for token_id, token in decoder.items() if token.special)
        self.outside_model = {
            token_id: token.content.encode("utf-8")
            for token_id, token in decoder.items()
            if not _in_model(model, token_id)
        }
        """The added tokens that decode to their text rather than as the model's: those beyond its
        tokens; for a SentencePiece model, every token not spelled as the piece of its id, as its
        ``tokenizer.json`` spells it (a token with ``normalized=True``: normalized); for a byte-level
        model whose normalizer changes text, also each token with ``normalized=True`` it respells, as
        `tokenizers` decodes that spelling."""
        spec = model.sentencepiece
        if spec is not None:
            own = {index for index, piece in enumerate(spec.pieces) if piece.type in (CONTROL, UNKNOWN, USER_DEFINED)}
            self.outside_model = {
                token_id: (normalize(spec, token.content)[0] if token.normalized and spec.metaspace is None
                           else token.content).encode("utf-8")
                for token_id, token in decoder.items()
                if not (token_id in own and spec.pieces[token_id].text == token.content)
            }
        if _normalizes(model):
            # tokenizers decodes a normalized token as its normalizer spells it (through the ByteLevel
            # decoder), and then no longer knows it for special when skipping special tokens.
            respelled = {token_id: spelling for token_id, token in decoder.items() if token.normalized
                         and (spelling := model._core.normalize_added_token(token.content)) != token.content}
            self.outside_model = {**self.outside_model, **{
                token_id: try_str_to_token(spelling) or spelling.encode() for token_id, spelling in respelled.items()}}
            self.special_ids = self.special_ids - respelled.keys()
        self.first_phase: re.Pattern[str] | None = None
        self._model = model
        self._relabeled: list[tuple[AddedTokensEncoder, dict[int, tuple[int, AddedToken]]] | None] = [None, None]
        self.pieces = Pieces(spec) if spec is not None else None
        self.sentencepiece: tuple[SentencePieceTwoPhase, SentencePieceTwoPhase] | None = None
        """With and without the special tokens, where the tokens with ``normalized=True`` are looked
        for in normalized text."""
        without_specials = {token_id: token for token_id, token in decoder.items() if not token.special}
        if self.pieces is not None and spec is not None and spec.metaspace is None and any(
            token.normalized for token in decoder.values()
        ):
            if spec.metaspace_split or spec.charsmap:
                self.in_core = False
                self.refusal = (
                    f"added tokens {sorted(token.content for token in decoder.values() if token.normalized)[:5]} have "
                    f"normalized=True, which tokenizers matches in the normalized text; {model!r} normalizes "
                    f"{'with a character map' if spec.charsmap else 'and splits words at the ▁ (Metaspace split)'}, "
                    "which hf_bpe does not reproduce for them: add them with normalized=False"
                )
            else:
                plain = without_normalizer(spec)
                self.sentencepiece = (SentencePieceTwoPhase(model, plain, self.pieces, decoder),
                                      SentencePieceTwoPhase(model, plain, self.pieces, without_specials))
            return
        if not self.plain or spec is not None or (_normalizes(model) and any(token.normalized for token in decoder.values())):
            self.encoder, self.encoder_without_specials = _ruled_encoder(model, decoder), _ruled_encoder(model, without_specials)
            return
        self.encoder = added_tokens_encoder(model, tokens)
        self.encoder_without_specials = added_tokens_encoder(
            model, [(token.content, token_id) for token_id, token in without_specials.items()]
        )
        raw = [token.content for token in decoder.values() if not token.normalized]
        normalized = [token.content for token in decoder.values() if token.normalized]
        if raw and normalized and _can_overlap(normalized, raw):
            self.first_phase = re.compile(
                "|".join(re.escape(text) for text in sorted(raw, key=len, reverse=True))
            )
            self._raw_ids = {
                token.content: token_id for token_id, token in decoder.items() if not token.normalized
            }
            self._second_encoder = added_tokens_encoder(
                model,
                [(token.content, token_id) for token_id, token in decoder.items() if token.normalized]
            )

    def check_in_core(self) -> None:
        """Raise ``NotImplementedError`` saying why unless :attr:`in_core`: transformers' own
        matching of such tokens (``PythonBackend.tokenize``) differs from `tokenizers`' (what
        ``TokenizersBackend`` does with the saved folder), so it is not used."""
        if not self.in_core:
            raise NotImplementedError(self.refusal)

    def in_python(self, split_special_tokens: bool) -> bool:
        """Whether :meth:`two_phase` finds the tokens (Python drives the core) rather than one of the
        core's encoders alone."""
        return self.sentencepiece is not None or (self.first_phase is not None and not split_special_tokens)

    def sentencepiece_spans(self, text: str, split_special_tokens: bool) -> tuple[list[int], list[tuple[int, int]]]:
        """A SentencePiece model's ids of ``text`` and the characters each covers, as `tokenizers`
        gives them (see :mod:`hf_bpe.transformers._sentencepiece`)."""
        pieces = self.pieces
        assert pieces is not None
        if pieces.spec.charsmap:
            raise NotImplementedError(
                f"return_offsets_mapping=True is not available for {self._model!r}: its normalizer "
                f"{pieces.spec.normalizer_name!r} (a precompiled character map) has no exact tokenizer.json to "
                "take the offsets from"
            )
        self.check_in_core()
        if self.sentencepiece is not None:
            return self.sentencepiece[split_special_tokens].encode(text)
        found = self._relabeled[split_special_tokens]
        if found is None:  # the added tokens under ids no piece has
            cut = relabeled(self._model, {token_id: token for token_id, token in self.decoder.items()
                                          if not (split_special_tokens and token.special)})
            found = self._relabeled[split_special_tokens] = (
                AddedTokensEncoder(self._model._core, ruled_policy(self._model, cut), 0), cut)
        encoder, cut = found
        ids, starts = encoder.encode_with_offsets(text)
        return spans_in_text(pieces, text, ids, starts, cut)

    def two_phase(self, text: str, split_special_tokens: bool = False) -> tuple[list[int], list[int]]:
        """Ids and character starts: raw tokens first, then normalized ones in the gaps."""
        if self.sentencepiece is not None:
            found, found_spans = self.sentencepiece[split_special_tokens].encode(text)
            return found, [start for start, _ in found_spans]
        ids, spans = self.two_phase_spans(text)
        return ids, [start for start, _ in spans]

    def two_phase_spans(self, text: str) -> tuple[list[int], list[tuple[int, int]]]:
        """Ids and the characters each covers (see :func:`~hf_bpe.model.encode_with_spans`): raw tokens
        first, then normalized ones in the gaps."""
        assert self.first_phase is not None
        ids: list[int] = []
        spans: list[tuple[int, int]] = []
        done = 0
        for match in [*self.first_phase.finditer(text), None]:
            end = len(text) if match is None else match.start()
            if end > done:
                gap_ids, gap_spans = self._second_encoder.encode_with_spans(text, (done, end))
                ids += gap_ids
                spans += gap_spans
            if match is not None:
                ids.append(self._raw_ids[match.group()])
                spans.append(match.span())
                done = match.end()
        return ids, spans


def _ruled_encoder(model: BPE, decoder: Mapping[int, AddedToken]) -> AddedTokensEncoder:
    """The core's encoder that cuts out the tokens of ``decoder`` with their flags as `tokenizers`'
    rules (see :func:`hf_bpe.model.with_special_token_rules`; ``normalized`` as a second pass, in
    normalized text where a byte-level model's normalizer changes text)."""
    return AddedTokensEncoder(model._core, ruled_policy(model, decoder), max([model.n_vocab - 1, *decoder]))


def _normalizes(model: BPE) -> bool:
    """Whether ``model`` is byte-level and its normalizer changes text beyond ByteLevel's prefix space
    (`tokenizers` then looks for tokens with ``normalized=True`` in the normalized text)."""
    return model.kind != "sentencepiece" and any(step.kind != "prefix_space" for step in normalizers_of(model.pattern))


def _in_model(model: BPE, token_id: int) -> bool:
    try:
        model.decode_single_token_bytes(token_id)
    except KeyError:
        return False
    return True


def _can_overlap(normalized: list[str], raw: list[str]) -> bool:
    """Whether a normalized token can start before a raw one and reach into it (or contain it): a raw
    token inside a longer normalized one, or a normalized token ending with a raw one's beginning.

    One pass over the normalized tokens, each looked up by the raw tokens' lengths and beginnings
    (not pairwise: thousands of each are common after ``add_special_tokens``).

    >>> _can_overlap(["ab"], ["bc"]), _can_overlap(["xay"], ["a"]), _can_overlap(["ab"], ["ab", "cb"])
    (True, True, False)
    """
    raw_texts = set(raw)
    raw_lengths = sorted({len(second) for second in raw})
    longest_normalized = max(map(len, normalized), default=0)
    beginnings = {  # a raw token's proper beginnings, as long as a normalized token could end with
        second[:size] for second in raw for size in range(1, min(len(second), longest_normalized))
    }
    for first in normalized:
        for size in raw_lengths:
            if size >= len(first):
                break
            if any(first[start:start + size] in raw_texts for start in range(len(first) - size + 1)):
                return True
        if any(first[-size:] in beginnings for size in range(1, len(first))):
            return True
    return False
