"""GPT-2's byte-to-unicode alphabet: every byte as a printable character.

GPT-2's ``encoder.json``/``vocab.bpe``, HF ``tokenizer.json`` (ByteLevel) and transformers' token
strings spell token bytes this way. This is the one spelling in hf_bpe: both directions are
``str.translate`` tables over Latin-1, so spelling a token costs one C call, not one per byte.

>>> token_to_str(b" hello")
'Ġhello'
>>> str_to_token("Ġhello")
b' hello'
>>> try_str_to_token("hello world") is None  # a space is not in the alphabet
True
"""

from __future__ import annotations

__all__ = ["BYTE_TO_UNICODE", "UNICODE_TO_BYTE", "str_to_token", "token_to_str", "try_str_to_token"]


def _byte_to_unicode() -> dict[int, str]:
    printable = [
        *range(ord("!"), ord("~") + 1),
        *range(ord("¡"), ord("¬") + 1),
        *range(ord("®"), ord("ÿ") + 1),
    ]
    mapping = {byte: chr(byte) for byte in printable}
    shifted = 0
    for byte in range(256):
        if byte not in mapping:
            mapping[byte] = chr(256 + shifted)
            shifted += 1
    return mapping


BYTE_TO_UNICODE: dict[int, str] = _byte_to_unicode()
UNICODE_TO_BYTE: dict[str, int] = {char: byte for byte, char in BYTE_TO_UNICODE.items()}

# Bytes read as Latin-1 characters, then translated; the way back maps every character of the alphabet
# to the Latin-1 character of its byte, and the Latin-1 characters outside the alphabet to U+FFFF,
# which (as every other foreign character) then fails to encode as Latin-1.
_SPELL = dict(BYTE_TO_UNICODE)
_UNSPELL = {ord(char): chr(byte) for char, byte in UNICODE_TO_BYTE.items()} | {
    byte: "\uffff" for byte in range(256) if chr(byte) not in UNICODE_TO_BYTE
}


def token_to_str(token: bytes) -> str:
    """Spell token bytes in the byte-to-unicode alphabet.

    >>> token_to_str(b"\\xe2\\x80\\x99s")
    'âĢĻs'
    """
    return token.decode("latin-1").translate(_SPELL)


def try_str_to_token(spelled: str) -> bytes | None:
    """Bytes of a token spelled in the byte-to-unicode alphabet, or ``None`` when ``spelled`` has a
    character outside it.

    >>> try_str_to_token("âĢĻs"), try_str_to_token("’s")
    (b'\\xe2\\x80\\x99s', None)
    """
    try:
        return spelled.translate(_UNSPELL).encode("latin-1")
    except UnicodeEncodeError:
        return None


def str_to_token(spelled: str) -> bytes:
    """Bytes of a token spelled in the byte-to-unicode alphabet; ``KeyError`` naming the first
    character outside it.

    >>> str_to_token("a b")
    Traceback (most recent call last):
    KeyError: "' ' (U+0020) is not in GPT-2's byte-to-unicode alphabet"
    """
    token = try_str_to_token(spelled)
    if token is None:
        foreign = next(char for char in spelled if char not in UNICODE_TO_BYTE)
        raise KeyError(f"{foreign!r} (U+{ord(foreign):04X}) is not in GPT-2's byte-to-unicode alphabet")
    return token
