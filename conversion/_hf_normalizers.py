"""The normalizer of a ``tokenizer.json`` (`tokenizers`' normalizers), read as
:class:`hf_bpe.patterns.Normalize` steps, and the probe that proves they normalize as `tokenizers`.

`tokenizers` normalizes each stretch of text between added tokens before pre-tokenizing it. Our
core runs the same steps on the same Unicode tables (``hf_bpe_core::hf_normalize``); at load time
:func:`normalizer_difference` normalizes the probe texts with both and refuses the file on any
difference, as the pre-tokenizer probe does for splits.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterable
from typing import Any

from tokenizers import Regex, Tokenizer, normalizers

from hf_bpe import patterns
from hf_bpe.model import BPE, normalized_text

__all__ = ["normalizer_difference", "normalizer_steps", "written_normalizer"]

_FORMS = {"NFC": "nfc", "NFD": "nfd", "NFKC": "nfkc", "NFKD": "nfkd", "Lowercase": "lowercase"}


def normalizer_steps(normalizer: Any, refuse: Any) -> tuple[patterns.Normalize, ...]:
    """Our steps for a file's ``normalizer`` (its JSON; ``None``: none). A ``Sequence`` is flattened
    (an empty one is no normalizer); what is not supported is refused by its name.

    >>> normalizer_steps({"type": "Sequence", "normalizers": [{"type": "NFC"}, {"type": "Prepend",
    ...                   "prepend": "_"}]}, ValueError)
    (Normalize('nfc'), Normalize('prepend', pattern='_'))
    """
    if normalizer is None:
        return ()
    kind = normalizer.get("type") if isinstance(normalizer, dict) else None
    if kind == "Sequence":
        parts = normalizer.get("normalizers")
        if not isinstance(parts, list):
            raise refuse(f"a Sequence normalizer has normalizers = {parts!r:.60}; expected a list")
        return tuple(step for part in parts for step in normalizer_steps(part, refuse))
    if kind in _FORMS:
        return (patterns.Normalize(_FORMS[kind]),)
    if kind == "Strip":
        left, right = normalizer.get("strip_left"), normalizer.get("strip_right")
        if not isinstance(left, bool) or not isinstance(right, bool):
            raise refuse(f"a Strip normalizer has strip_left = {left!r:.20}, strip_right = {right!r:.20}; expected "
                         "true or false")
        return (patterns.Normalize("strip", left=left, right=right),) if left or right else ()
    if kind == "Replace":
        pattern, content = normalizer.get("pattern"), normalizer.get("content")
        if not isinstance(pattern, dict) or len(pattern) != 1 or next(iter(pattern)) not in ("Regex", "String") \
                or not isinstance(next(iter(pattern.values())), str) or not isinstance(content, str):
            raise refuse(f"a Replace normalizer has pattern {pattern!r:.80} and content {content!r:.40}; expected "
                         '{"Regex": ...} or {"String": ...} and a string')
        spelled_kind, text = next(iter(pattern.items()))
        return (patterns.Normalize("replace", text, content, literal=spelled_kind == "String"),)
    if kind == "Precompiled":
        charsmap = normalizer.get("precompiled_charsmap")
        try:
            valid = isinstance(charsmap, str) and len(base64.b64decode(charsmap, validate=True)) > 4
        except (binascii.Error, ValueError):
            valid = False
        if not valid:
            raise refuse(f"a Precompiled normalizer has precompiled_charsmap = {charsmap!r:.60}; expected a "
                         "SentencePiece charsmap in base64")
        return (patterns.Normalize("precompiled", charsmap),)
    if kind == "Prepend":
        prepend = normalizer.get("prepend")
        if not isinstance(prepend, str):
            raise refuse(f"a Prepend normalizer has prepend = {prepend!r:.40}; expected a string")
        return (patterns.Normalize("prepend", prepend),) if prepend else ()
    raise refuse(
        f"the normalizer {kind!r} is not supported (hf_bpe runs NFC, NFD, NFKC, NFKD, Lowercase, Strip, Replace, "
        "Prepend, Precompiled and Sequences of them exactly as tokenizers does)"
    )


def written_normalizer(steps: tuple[patterns.Normalize, ...]) -> normalizers.Normalizer | None:
    """`tokenizers`' normalizer for our steps (``None`` for none): each as itself, and
    ``"prefix_space"`` as a ``Prepend`` of a space and a ``Replace`` of two spaces at the start of the
    text by one (a Replace of the empty match at the start makes `tokenizers`' ``ByteLevel`` panic).

    >>> written_normalizer((patterns.Normalize("nfc"), patterns.Normalize("prefix_space"))).normalize_str("ab")
    ' ab'
    """
    if not steps:
        return None
    written: list[normalizers.Normalizer] = []
    for step in steps:
        if step.kind == "strip":
            written.append(normalizers.Strip(left=step.left, right=step.right))
        elif step.kind == "replace":
            written.append(normalizers.Replace(step.pattern if step.literal else Regex(step.pattern), step.content))
        elif step.kind == "prepend":
            written.append(normalizers.Prepend(step.pattern))
        elif step.kind == "precompiled":
            written.append(normalizers.Precompiled(base64.b64decode(step.pattern)))
        elif step.kind == "prefix_space":
            written += [normalizers.Prepend(" "), normalizers.Replace(Regex(r"\A  "), " ")]
        else:
            written.append({"nfc": normalizers.NFC, "nfd": normalizers.NFD, "nfkc": normalizers.NFKC,
                            "nfkd": normalizers.NFKD, "lowercase": normalizers.Lowercase}[step.kind]())
    return normalizers.Sequence(written)


def their_normalizer(normalizer: Any) -> Any:
    """`tokenizers`' own normalizer built from a file's JSON, as ``Tokenizer.from_file`` builds it."""
    document = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": [],
                "normalizer": normalizer, "pre_tokenizer": None, "post_processor": None, "decoder": None,
                "model": {"type": "BPE", "vocab": {}, "merges": []}}
    return Tokenizer.from_str(json.dumps(document)).normalizer


def normalizer_difference(model: BPE, normalizer: Any, texts: Iterable[str], *, prefix_space: bool = False) -> str | None:
    """How ``model``'s normalizer rewrites some text differently from `tokenizers` running the
    ``normalizer`` of a ``tokenizer.json`` (its JSON), or ``None`` when they agree on every text.
    Failing on a text counts as a result: it must fail in both. With ``prefix_space`` the model's
    last step is ``ByteLevel``'s ``add_prefix_space`` (:class:`hf_bpe.patterns.Normalize`
    ``"prefix_space"``), applied to `tokenizers`' result here.

    >>> import hf_bpe
    >>> from hf_bpe.patterns import Normalize, Split
    >>> model = hf_bpe.BPE({bytes([b]): b for b in range(256)}, (Normalize("nfkc"), Split(" ", "removed")))
    >>> normalizer_difference(model, {"type": "NFKC"}, ["ﬁ①", "e\\u0301"]) is None
    True
    >>> normalizer_difference(model, {"type": "NFC"}, ["ﬁ"])
    "'ﬁ' normalizes to 'fi' here but to 'ﬁ' in tokenizers; hf_bpe refuses rather than encode such text differently"
    """
    theirs = their_normalizer(normalizer)
    for text in texts:
        try:
            ours: str | None = normalized_text(model, text)
        except ValueError:
            ours = None
        try:
            expected: str | None = theirs.normalize_str(text) if theirs is not None else text
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException:  # noqa: BLE001 - Oniguruma giving up is a Rust panic there
            expected = None
        if prefix_space and expected and not expected.startswith(" "):
            expected = " " + expected
        if ours != expected:
            return (f"{text!r:.120} normalizes to {ours!r:.120} here but to {expected!r:.120} in tokenizers; hf_bpe "
                    "refuses rather than encode such text differently")
    return None
