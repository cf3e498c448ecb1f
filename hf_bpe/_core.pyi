# The Rust extension (crates/python/src): every class, method and function it exports, typed as the
# bindings convert their arguments. Its classes are used through hf_bpe's Python modules, which
# document the public API. tests/test_core_stub.py checks that these names are the extension's.
from collections.abc import Callable, Iterable, Sequence
from typing import Any, ClassVar, Literal, Self, TypeAlias, final

from _typeshed import StrPath, SupportsItems

from hf_bpe.patterns import ByteLevel, Split

__all__ = [
    "CoreBPE",
    "EncodedRows",
    "IdStream",
    "PieceCounter",
    "PieceCounts",
    "SentencePieceWordCounter",
    "SpecialPolicy",
    "TextStream",
    "TokenizerJsonModel",
    "_panic_for_tests",
    "_parallel_counts",
    "_set_parallel_for_tests",
    "can_chunk",
    "check_utf8_files",
    "learn_parity_merges",
    "learn_superword_merges",
    "read_tokenizer_json",
    "recognized_split",
]

# A split rule as `hf_bpe.patterns.to_core` gives it and the core gives it back: a regex, or
# `(pattern, literal, behavior, invert)` per Split step, with at most one
# `("byte_level", add_prefix_space, use_regex)` among them (`hf_bpe.patterns.ByteLevel`).
_SplitRule: TypeAlias = str | list[tuple[str, bool, str, bool] | tuple[str, bool, bool]]
# What the core accepts as one: the regex, or any sequence of such steps.
_SplitRuleArgument: TypeAlias = str | Sequence[tuple[str, bool, str, bool] | tuple[str, bool, bool]]
# A normalizer step as `hf_bpe.patterns.to_core` gives `hf_bpe.patterns.Normalize`:
# `(kind, pattern, content, literal, left, right)`.
_NormalizeStep: TypeAlias = tuple[str, str, str, bool, bool, bool]
# What a model's split accepts: a split rule, or a list of normalizer steps then split steps.
_ModelSplitArgument: TypeAlias = str | Sequence[tuple[str, bool, str, bool] | tuple[str, bool, bool] | _NormalizeStep]
# A split pattern without normalizer steps, as piece counts hold it.
_CountPattern: TypeAlias = str | Split | tuple[Split | ByteLevel, ...]
# Called now and then, from the calling thread, with the work done since the last call.
_Progress: TypeAlias = Callable[[int], object]

@final
class SpecialPolicy:
    """Which special tokens ``encode`` turns into their ids, and which make it raise."""

@final
class EncodedRows:
    """The ids of each text of a batch, kept in the core until they are laid out as padded arrays."""

    def __new__(cls, rows: list[list[int]]) -> EncodedRows: ...
    def __len__(self) -> int: ...
    def lengths(self) -> Any: ...
    def row(self, index: int) -> list[int]: ...
    def padded(
        self,
        target: int,
        pad: int,
        left: bool,
        bos: int | None = None,
        eos: int | None = None,
        attention_mask: bool = True,
        num_threads: int | None = None,
    ) -> tuple[Any, Any | None]: ...

@final
class CoreBPE:
    """The Rust model behind ``hf_bpe.BPE``."""

    def __new__(
        cls, ranks: dict[bytes, int], split: _ModelSplitArgument, special_tokens: dict[str, int]
    ) -> Self: ...
    @staticmethod
    def from_merges(
        vocab: dict[bytes, int],
        merges: Iterable[tuple[int, int]],
        split: _ModelSplitArgument,
        special_tokens: dict[str, int],
        ignore_merges: bool,
        dropped_after_merging: bool = False,
    ) -> CoreBPE: ...
    @staticmethod
    def from_affixed(
        vocab: dict[bytes, int],
        symbols: list[list[int | None]],
        merges: list[tuple[int, int, int]],
        unknown: int | None,
        fuse_unknown: bool,
        whole: dict[bytes, int] | None,
        byte_fallback: list[list[list[int]]] | None,
        split: _ModelSplitArgument,
        special_tokens: dict[str, int],
    ) -> CoreBPE: ...
    @staticmethod
    def from_spelled_merges(
        vocab: dict[str, Any],
        merges: list[Any],
        split: _ModelSplitArgument,
        special_tokens: dict[str, int],
        ignore_merges: bool,
        rank_rule: bool,
    ) -> CoreBPE | None: ...
    @staticmethod
    def from_tokenizer_json(
        model: TokenizerJsonModel,
        split: _ModelSplitArgument,
        special_tokens: dict[str, int],
        ignore_merges: bool,
        rank_rule: bool,
    ) -> CoreBPE | None: ...
    @staticmethod
    def sentencepiece(
        pieces: Sequence[tuple[str, float, int]],
        byte_fallback: bool,
        unk_surface: str,
        charsmap: bytes,
        add_dummy_prefix: bool,
        remove_extra_whitespaces: bool,
        escape_whitespaces: bool,
        metaspace: tuple[bool, bool, bool, bool] | None = None,
        normalizer: Sequence[tuple[str, str, str, bool, bool, bool]] = ...,
    ) -> CoreBPE: ...
    def special_policy(
        self, allowed: Sequence[str], disallowed: Sequence[str], rules: Sequence[tuple[str, int]] = ...
    ) -> SpecialPolicy: ...
    def added_tokens_policy(
        self, tokens: Sequence[tuple[str, int]], disallowed: Sequence[str] = ..., rules: Sequence[int] | None = ...
    ) -> SpecialPolicy: ...
    def encode_ordinary(self, text: str) -> list[int]: ...
    def encode(self, text: str, policy: SpecialPolicy) -> list[int]: ...
    def encode_with_offsets(self, text: str, policy: SpecialPolicy) -> tuple[list[int], list[int]]: ...
    def encode_with_spans(
        self, text: str, policy: SpecialPolicy, within: tuple[int, int] | None = None
    ) -> tuple[list[int], list[tuple[int, int]]]: ...
    def encode_batch(
        self, texts: Iterable[str], policy: SpecialPolicy | None = None, num_threads: int | None = None
    ) -> list[list[int]]: ...
    def encode_numpy(self, text: str, policy: SpecialPolicy | None = None) -> Any: ...
    def encode_batch_flat(
        self, texts: Iterable[str], policy: SpecialPolicy | None = None, num_threads: int | None = None
    ) -> tuple[bytes, bytes]: ...
    def encode_rows(
        self, texts: Iterable[str], policy: SpecialPolicy | None = None, num_threads: int | None = None
    ) -> EncodedRows: ...
    def count_utf8_batch(
        self, parts: Sequence[bytes | str], policy: SpecialPolicy | None = None, num_threads: int | None = None
    ) -> list[int]: ...
    # `texts`: a pyarrow string array, a ChunkedArray of them, or anything with `__arrow_c_array__`
    # or `__arrow_c_stream__`; the result is a pyarrow ListArray, or a ChunkedArray for chunked input.
    def encode_arrow(
        self,
        texts: Any,
        policy: SpecialPolicy | None = None,
        num_threads: int | None = None,
        dtype: str = "uint32",
        nulls: str = "raise",
        prefix: Sequence[int] = ...,
        suffix: Sequence[int] = ...,
    ) -> Any: ...
    def clear_cache(self) -> None: ...
    def decode_bytes(self, ids: Sequence[int]) -> bytes: ...
    def decode_single_token_bytes(self, id: int) -> bytes: ...
    def encode_single_piece(self, piece: bytes, whole: bool = True) -> list[int] | None: ...
    def token_id(self, token: bytes) -> int | None: ...
    def token_byte_values(self) -> list[bytes]: ...
    def mergeable_ranks(self) -> dict[bytes, int]: ...
    @property
    def n_vocab(self) -> int: ...
    @property
    def n_mergeable(self) -> int: ...
    @property
    def split_rule(self) -> _SplitRule | None: ...
    @property
    def split_engine(self) -> str | None: ...
    @property
    def missing_bytes(self) -> list[int]: ...
    @property
    def dropped_after_merging(self) -> bool: ...
    @property
    def affixed(
        self,
    ) -> tuple[list[list[int | None]], list[tuple[int, int]], int | None, bool, bool, list[list[list[int]]] | None] | None: ...
    def normalize(self, text: str) -> str: ...
    def normalize_added_token(self, text: str) -> str: ...
    def pieces(self, text: str) -> list[str] | None: ...
    @property
    def kind(self) -> Literal["ranks", "merges", "sentencepiece"]: ...
    @property
    def ignore_merges(self) -> bool | None: ...
    def merge_list(self) -> list[tuple[bytes, bytes]]: ...
    def merge_pieces(
        self, pieces: Sequence[bytes], num_threads: int | None = None
    ) -> list[list[int] | None]: ...
    def piece_token_counts(self, counts: PieceCounts) -> list[int]: ...
    def extend_merges(
        self,
        counts: PieceCounts,
        num_tokens: int,
        progress: _Progress | None = None,
        num_threads: int | None = None,
    ) -> tuple[list[bytes], list[tuple[bytes, bytes]]]: ...
    def rank_rule_difference(self) -> str | None: ...
    def merge_rule_difference(self, ignore_merges: bool) -> str | None: ...
    @property
    def can_stream(self) -> bool: ...
    def encode_stream(
        self, policy: SpecialPolicy | None = None, limit: int | None = None, block: int = ...
    ) -> TextStream: ...
    def decode_stream(self) -> IdStream: ...
    def decode(self, ids: Sequence[int]) -> str: ...

@final
class TextStream:
    """Text given in parts, encoded as it settles (``CoreBPE.encode_stream``)."""

    def feed(self, text: str) -> list[int]: ...
    def finish(self) -> list[int]: ...
    @property
    def held(self) -> int: ...

@final
class IdStream:
    """Ids given in parts, decoded to the bytes of the whole (``CoreBPE.decode_stream``)."""

    def feed(self, ids: Sequence[int]) -> bytes: ...

@final
class PieceCounts:
    """How often each distinct piece occurs in a corpus, with the split pattern and special tokens
    that cut it."""

    def __new__(
        cls,
        counts: SupportsItems[str | bytes, int] | None = None,
        *,
        pattern: str | Split | Sequence[Split | ByteLevel] | None = None,
        special_tokens: Sequence[str] = ...,
    ) -> Self: ...
    @property
    def pattern(self) -> _CountPattern: ...
    @property
    def special_tokens(self) -> tuple[str, ...]: ...
    @property
    def total(self) -> int: ...
    @property
    def pruned(self) -> int: ...
    def __len__(self) -> int: ...
    def __getitem__(self, piece: str | bytes, /) -> int: ...
    def __contains__(self, piece: str | bytes, /) -> bool: ...
    def most_common(self, n: int | None = None) -> list[tuple[bytes, int]]: ...
    def to_dict(self) -> dict[bytes, int]: ...
    def __add__(self, other: PieceCounts, /) -> PieceCounts: ...
    # Only 0 is accepted (`sum(tables)` starts from it); typed `int` as `sum` expects.
    def __radd__(self, other: int, /) -> PieceCounts: ...
    def __iadd__(self, other: PieceCounts, /) -> Self: ...
    def __eq__(self, other: object, /) -> bool: ...
    __hash__: ClassVar[None]  # type: ignore[assignment]
    def __reduce__(
        self,
    ) -> tuple[
        Callable[[_SplitRule, list[str], bytes], PieceCounts], tuple[_SplitRule, list[str], bytes]
    ]: ...
    @staticmethod
    def _from_state(
        split: _SplitRuleArgument, special_tokens: Sequence[str], counts: bytes
    ) -> PieceCounts: ...
    def _learn_merges(
        self,
        num_merges: int,
        progress: _Progress | None = None,
        consume: bool = False,
        num_threads: int | None = None,
    ) -> list[bytes]: ...

@final
class PieceCounter:
    """Fills a ``PieceCounts`` from texts and files: pattern and special tokens fixed at creation."""

    def __new__(
        cls,
        split: _SplitRuleArgument,
        special_tokens: Sequence[str],
        num_threads: int | None = None,
        chunk_bytes: int | None = None,
        max_pieces: int | None = None,
    ) -> Self: ...
    def add_texts(self, texts: Sequence[str]) -> None: ...
    def add_files(self, paths: Sequence[StrPath], progress: _Progress | None = None) -> None: ...
    def take(self) -> PieceCounts: ...

@final
class SentencePieceWordCounter:
    """Counts the words of sentences as SentencePiece's trainer sees them, then learns the pieces."""

    def __new__(
        cls,
        *,
        charsmap: bytes,
        add_dummy_prefix: bool,
        remove_extra_whitespaces: bool,
        max_sentence_length: int,
        split_by_whitespace: bool,
        allow_whitespace_only_pieces: bool,
        first_sentences: int,
        meta_pieces: Sequence[str],
        num_threads: int | None = None,
    ) -> Self: ...
    def add_texts(self, texts: Sequence[str]) -> None: ...
    def add_files(self, paths: Sequence[StrPath], progress: _Progress | None = None) -> None: ...
    @property
    def sentences(self) -> int: ...
    @property
    def too_long(self) -> int: ...
    @property
    def distinct_words(self) -> int: ...
    @property
    def is_full(self) -> bool: ...
    def learn(
        self,
        *,
        vocab_size: int,
        meta_pieces: int,
        character_coverage: float,
        max_sentencepiece_length: int,
        split_by_whitespace: bool,
        allow_whitespace_only_pieces: bool,
        split_by_unicode_script: bool,
        split_by_number: bool,
        split_digits: bool,
        progress: _Progress | None = None,
    ) -> list[tuple[str, float]]: ...
    def extend(
        self,
        *,
        pieces: Sequence[tuple[str, float]],
        num_new: int,
        max_sentencepiece_length: int,
        split_by_whitespace: bool,
        allow_whitespace_only_pieces: bool,
        split_by_unicode_script: bool,
        split_by_number: bool,
        split_digits: bool,
        progress: _Progress | None = None,
    ) -> list[tuple[str, float]]: ...

@final
class TokenizerJsonModel:
    def __len__(self) -> int: ...
    def ids_of(self, tokens: list[str]) -> list[int | None]: ...
    def reduced(self, added_ids: dict[str, int], merges: int) -> tuple[dict[str, int], list[str | list[str]]]: ...

def read_tokenizer_json(data: bytes) -> tuple[str, TokenizerJsonModel] | None: ...
def check_utf8_files(paths: Sequence[StrPath]) -> int: ...
def can_chunk(split: _SplitRuleArgument) -> bool: ...
def _panic_for_tests(site: str) -> None: ...
def _parallel_counts() -> tuple[int, int, int]: ...
def _set_parallel_for_tests(threshold: int | None = None, parts: int | None = None) -> None: ...

# Merges as pairs of ids (0-255 the bytes, then the new tokens), the language that chose each (None:
# the global phase), the new tokens' bytes.
_Learned: TypeAlias = tuple[list[tuple[int, int]], list[int | None], list[bytes]]

def learn_parity_merges(
    languages: Sequence[PieceCounts],
    dev: Sequence[PieceCounts] | None,
    num_merges: int,
    *,
    global_merges: int = 0,
    variant: str = "base",
    window_size: int = 100,
    alpha: float = 2.0,
    ratio: Sequence[float] | None = None,
    min_frequency: int = 0,
    max_token_length: int | None = None,
    progress: _Progress | None = None,
    num_threads: int | None = None,
) -> _Learned: ...
def learn_superword_merges(
    counts: PieceCounts,
    tokens: Sequence[bytes],
    merges: Sequence[tuple[int, int]],
    num_new_tokens: int,
    *,
    progress: _Progress | None = None,
    num_threads: int | None = None,
) -> _Learned: ...
def recognized_split(rule: _SplitRuleArgument) -> _SplitRule | None: ...
