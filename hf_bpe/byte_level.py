"""GPT-2's byte-to-unicode alphabet: every byte as a printable character.

GPT-2's ``encoder.json``/``vocab.bpe``, HF ``tokenizer.json`` (ByteLevel) and transformers' token
strings spell token bytes this way.

>>> token_to_str(b" hello")
'Ġhello'
>>> str_to_token("Ġhello")
b' hello'
"""

from __future__ import annotations


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


def token_to_str(token: bytes) -> str:
    """Spell token bytes in the byte-to-unicode alphabet."""
    return "".join(BYTE_TO_UNICODE[byte] for byte in token)


def str_to_token(spelled: str) -> bytes:
    """Bytes of a token spelled in the byte-to-unicode alphabet; ``KeyError`` on a foreign char."""
    return bytes(UNICODE_TO_BYTE[char] for char in spelled)
