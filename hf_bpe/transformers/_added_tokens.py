"""transformers' added tokens as the core matches them: `tokenizers`' rules, leftmost-longest."""

from __future__ import annotations

import re
from collections.abc import Mapping

from transformers.tokenization_utils_base import AddedToken

from hf_bpe._added_tokens import AddedTokensEncoder, added_tokens_encoder
from hf_bpe.model import BPE, SPECIAL_TOKEN_RULES, with_special_token_rules

__all__ = ["AddedTokens"]


class AddedTokens:
    """The added tokens as the core matches them: ``tokenizers``' rules, leftmost-longest match.

    `tokenizers` first cuts out the tokens with ``normalized=False`` (special tokens, by default),
    then the others in the text between. When no token of the second kind can overlap one of the
    first, a single leftmost-longest pass in the core gives the same result; otherwise
    :meth:`two_phase` does the two passes.

    Tokens that strip whitespace or match single words (``lstrip``, ``rstrip``, ``single_word``) are
    matched by the core with these rules, and its own two passes for ``normalized``, when every added
    token is one of the model's special tokens with its id (a ``tokenizer.json``'s added tokens:
    RoBERTa's ``<mask>``). Otherwise :attr:`in_core` is false and the caller refuses, naming
    :attr:`ruled`.
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
        self.special_ids = frozenset(token_id for token_id, token in decoder.items() if token.special)
        self.outside_model = {
            token_id: token.content.encode("utf-8")
            for token_id, token in decoder.items()
            if not _in_model(model, token_id)
        }
        self.first_phase: re.Pattern[str] | None = None
        self._specials = model.special_tokens if model.kind != "sentencepiece" else {}
        if not self.plain:
            ruled = _ruled_encoder(model, decoder)
            self.in_core = ruled is not None
            if ruled is not None:
                without_specials = _ruled_encoder(
                    model, {token_id: token for token_id, token in decoder.items() if not token.special}
                )
                assert without_specials is not None  # a part of the model's special tokens
                self.encoder, self.encoder_without_specials = ruled, without_specials
                return
        self.encoder = added_tokens_encoder(model, tokens)
        self.encoder_without_specials = added_tokens_encoder(
            model,
            [(token.content, token_id) for token_id, token in decoder.items() if not token.special]
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
        """Raise ``NotImplementedError`` naming the tokens unless :attr:`in_core`: transformers' own
        matching of such tokens (``PythonBackend.tokenize``) differs from `tokenizers`' (what
        ``TokenizersBackend`` does with the saved folder), so it is not used."""
        if self.in_core:
            return
        outside = sorted(token.content for token_id, token in self.decoder.items()
                         if self._specials.get(token.content) != token_id)
        raise NotImplementedError(
            f"added tokens {self.ruled[:5]} strip whitespace or match single words (lstrip, rstrip, single_word) and "
            f"added tokens {outside[:5]} are not special tokens of the model: BPETokenizer matches such rules exactly "
            "(in the core, as tokenizers does) only among a byte-level model's own special tokens; add the tokens to "
            "the tokenizer.json with tokenizers and load it with hf_bpe.load, or add them without these flags to a "
            "model whose tokens have none"
        )

    def two_phase(self, text: str) -> tuple[list[int], list[int]]:
        """Ids and character starts: raw tokens first, then normalized ones in the gaps."""
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
                gap_ids, gap_spans = self._second_encoder.encode_with_spans(text[done:end])
                ids += gap_ids
                spans += [(done + start, done + stop) for start, stop in gap_spans]
            if match is not None:
                ids.append(self._raw_ids[match.group()])
                spans.append(match.span())
                done = match.end()
        return ids, spans


def _ruled_encoder(model: BPE, decoder: Mapping[int, AddedToken]) -> AddedTokensEncoder | None:
    """The core's encoder that cuts out the tokens of ``decoder`` with their flags as `tokenizers`'
    rules (:func:`hf_bpe.model.with_special_token_rules`), or None unless each is one of the model's
    special tokens with its id (the core applies rules to those only)."""
    specials = model.special_tokens
    if model.kind == "sentencepiece" or any(specials.get(token.content) != token_id
                                            for token_id, token in decoder.items()):
        return None
    ruled = with_special_token_rules(model, {
        token.content: [rule for rule in SPECIAL_TOKEN_RULES if getattr(token, rule)] for token in decoder.values()
    })
    policy = ruled._new_policy(frozenset(token.content for token in decoder.values()), frozenset())
    return AddedTokensEncoder(model._core, policy, model.n_vocab - 1)


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
