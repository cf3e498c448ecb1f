"""Example texts one click away on the token page: what a tokenizer lesson shows first.

Code with indentation (GPT-2 spends a token per space, cl100k groups them), numbers and arithmetic
(digits split arbitrarily), several languages (Korean and Japanese cost several times the tokens
of English), emoji with zero-width joiners (characters cut into byte tokens), a special token, and
"egg" in its spellings (``egg``, `` egg``, ``Egg``, `` EGG`` are different tokens).
"""

from __future__ import annotations

CODE = '''def fizzbuzz(n):
    for i in range(1, n + 1):
        if i % 15 == 0:
            print("FizzBuzz")
        elif i % 3 == 0:
            print("Fizz")
        else:
            print(i)
'''

NUMBERS = """127 + 677 = 804
1275 + 6773 = 8048
12345 * 9 = 111105
3.14159265358979, 2024-11-24, 1,000,000 and 1000000
"""

LANGUAGES = """Tokenization is at the heart of much weirdness in language models.
토큰화는 언어 모델의 많은 이상한 현상의 핵심에 있습니다.
トークン化は言語モデルの多くの奇妙な振る舞いの中心にある。
Tokenisierung steht im Zentrum vieler Merkwürdigkeiten.
Токенизация лежит в основе многих странностей.
التقطيع هو أصل الكثير من الغرائب.
"""

EMOJI = "Hello 👋 🦙 🦀 👨‍👩‍👧‍👦 🏳️‍🌈 🇯🇵 ❤️ naïve café\n"

SPECIAL = "The end of one document.<|endoftext|>The start of the next.\n"

EGG = """egg
I ate an egg.
Egg
My Egg is big.
EGG
I SEE AN EGG!
"""

EXAMPLES: tuple[tuple[str, str], ...] = (
    ("code", CODE),
    ("numbers", NUMBERS),
    ("languages", LANGUAGES),
    ("emoji", EMOJI),
    ("special token", SPECIAL),
    ("egg", EGG),
)
"""``(label, text)`` pairs, in the order the page shows them."""

DEFAULT_TEXT = (
    "Tokenization is at the heart of much weirdness in LLMs. 127 + 677 = 804, 1275 + 6773 = 8048.\n"
    "    for i in range(1, 101):\n"
    "        if i % 15 == 0:\n"
    '            print("FizzBuzz")\n'
    "egg, Egg, EGG: I ate an egg. My Egg is big. I SEE AN EGG!\n"
    "토큰화는 언어 모델의 핵심입니다. こんにちは 🦙 👨‍👩‍👧<|endoftext|>\n"
)
"""The text the page opens with: a little of each example."""
