"""``BPETokenizer``: an ``hf_bpe.BPE`` model as a transformers tokenizer (``PreTrainedTokenizer``):
construction, the vocabulary, added tokens, tokens and decoding. Encoding lives in
:mod:`~hf_bpe.transformers._pipeline` and :mod:`~hf_bpe.transformers._encode`, saving in
:mod:`~hf_bpe.transformers._folder`, retraining in :mod:`~hf_bpe.transformers._training`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from transformers.tokenization_utils_base import AddedToken

from conversion.hf import special_added_tokens
from hf_bpe._added_tokens import ordinary_token_id
from hf_bpe._byte_level import token_to_str, try_str_to_token
from hf_bpe._io import check_file, read_json
from hf_bpe._rwlock import ReadWriteLock, reading
from hf_bpe.errors import InvalidVocabularyError
from hf_bpe.model import BPE, MAX_DENSE_IDS, MODEL_FILE, IdType, Nulls, as_model
from hf_bpe.sentencepiece_bpe import CONTROL, NORMAL, SentencePieceSpec
from hf_bpe.transformers._added_tokens import AddedTokens
from hf_bpe.transformers._encode import Tables
from hf_bpe.transformers._folder import (
    CONFIG_KEY,
    FolderFormat,
    check_fingerprint,
    check_settings,
    config_path,
    load_model,
)
from hf_bpe.transformers._pipeline import EncodingPipeline, PostProcessing
from hf_bpe.transformers._training import Retraining

if TYPE_CHECKING:
    from hf_bpe._token_view import TokenView

__all__ = ["BPETokenizer", "save_tokenizer_folder"]

FOLDER_FILES = (MODEL_FILE, "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json",
                "tokenizer.json", "chat_template.jinja", "chat_template.json", "config.json")
"""The files of a folder that loading it may read."""


class BPETokenizer(EncodingPipeline, Retraining, FolderFormat):
    """A transformers tokenizer backed by an :class:`hf_bpe.BPE` model.

    Build one with :meth:`from_model`, or load a saved folder with ``from_pretrained`` /
    ``AutoTokenizer.from_pretrained``. The model's special tokens are added tokens (matched in text,
    skipped by ``decode(..., skip_special_tokens=True)``). ``add_bos_token`` / ``add_eos_token``
    put ``bos_token`` / ``eos_token`` around each sequence and survive ``save_pretrained``.
    Token strings (``tokenize``, ``get_vocab``) use GPT-2's byte-to-unicode alphabet, like
    ``tokenizer.json``. ``return_offsets_mapping=True`` gives character offsets.

    A SentencePiece model (``train_sentencepiece``, ``conversion.sentencepiece.load``, a
    SentencePiece-style ``tokenizer.json``) is held too: its tokens are its pieces, its special
    pieces are added tokens, its policy is SentencePiece's (see :meth:`from_model`), and it encodes
    each stretch of text between added tokens as the model does (``split_special_tokens=True``:
    ``SentencePieceProcessor.encode``). It decodes as SentencePiece (control pieces vanish).
    """

    vocab_files_names = {"vocab_file": MODEL_FILE}  # noqa: RUF012 - transformers' class attributes
    model_input_names = ["input_ids", "attention_mask"]  # noqa: RUF012
    add_prefix_space = False
    """Text is encoded as given (GPT-2 style): no space is put before it, nor before pre-split words."""

    def __init__(
        self,
        vocab_file: str | os.PathLike[str] | None = None,
        *,
        add_bos_token: bool | None = None,
        add_eos_token: bool | None = None,
        **kwargs: Any,
    ) -> None:
        """Load the model from ``vocab_file`` (``hf_bpe.json``), or take ``model=`` (an
        :class:`hf_bpe.BPE`, as :meth:`from_model` does); ``pair_template``, ``trim_offsets`` and
        ``trim_keeps_prefix_space`` as :meth:`from_model` (kept in our section of
        ``tokenizer_config.json``, as the BOS/EOS policy); other arguments are transformers'."""
        model = kwargs.pop("model", None)
        if kwargs.pop("add_prefix_space", False):
            raise ValueError("BPETokenizer encodes text as given; add_prefix_space=True is not supported")
        kwargs.pop("tokenizer_file", None)  # tokenizer.json is derived from the model on save
        settings = dict(kwargs.pop(CONFIG_KEY, None) or {})
        if model is None:
            model = load_model(vocab_file, kwargs.get("name_or_path"))
        else:
            model = as_model(model)
        if model.n_vocab > MAX_DENSE_IDS:
            raise InvalidVocabularyError(
                f"{model!r} has id {model.n_vocab - 1}; a transformers tokenizer keeps an entry for every id up to "
                f"the largest (its length is the embedding size), so BPETokenizer takes ids below {MAX_DENSE_IDS:,}: "
                "renumber the tokens (hf_bpe.BPE takes any id below 2**31)"
            )
        self._model = model
        self._add_bos = bool(settings.get("add_bos_token", False) if add_bos_token is None else add_bos_token)
        self._add_eos = bool(settings.get("add_eos_token", False) if add_eos_token is None else add_eos_token)
        self._post = PostProcessing.of(*(
            settings.get(name, default) if kwargs.get(name) is None else kwargs[name]
            for name, default in (("pair_template", "bos_eos"), ("trim_offsets", False),
                                  ("trim_keeps_prefix_space", False))
        ))
        for name in ("pair_template", "trim_offsets", "trim_keeps_prefix_space"):
            kwargs.pop(name, None)
        self._card = dict(settings.get("card", {}))
        if "training" not in self._card and model._training:  # trained by hf_bpe.train: the card says how
            self._card["training"] = dict(model._training)
        self._tables: Tables | None = None
        self._added: AddedTokens | None = None
        self._lock = ReadWriteLock()
        # The model's special tokens are added tokens, with its rules (tokenizers' added-token flags:
        # RoBERTa's <mask> strips the whitespace before it); saved ones (added_tokens_decoder) come on top.
        decoder = special_added_tokens(model)
        saved = kwargs.pop("added_tokens_decoder", None) or {}
        where = config_path(kwargs.get("name_or_path"))
        for token_id, token in saved.items():
            decoder[int(token_id)] = self._checked_added_token(int(token_id), token, where)
        self._added_tokens_decoder = decoder
        super().__init__(add_bos_token=self._add_bos, add_eos_token=self._add_eos, **kwargs)
        self._update_trie()
        if (self._add_bos and self.bos_token is None) or (self._add_eos and self.eos_token is None):
            role = "bos" if self._add_bos and self.bos_token is None else "eos"
            raise ValueError(f"add_{role}_token=True needs a {role}_token; pass {role}_token=...")
        if self._post.pair_template != "bos_eos" and not (self._add_bos and self._add_eos):
            raise ValueError(f"pair_template={self._post.pair_template!r} puts bos_token (CLS) and eos_token (SEP) around "
                             "the sequences: pass add_bos_token=True and add_eos_token=True")

    # ---------------------------------------------------------------------------- construction

    @classmethod
    def from_pretrained(  # type: ignore[override]
        cls, pretrained_model_name_or_path: str | os.PathLike[str], *init_inputs: Any, **kwargs: Any
    ) -> BPETokenizer:
        """transformers' ``from_pretrained``; a local folder's ``tokenizer_config.json`` and
        ``special_tokens_map.json`` are read and their settings' types checked first (bounded, see
        :mod:`hf_bpe._io`), so that a corrupt one raises :class:`~hf_bpe.errors.TokenizerFileError`
        naming it rather than whatever transformers trips over later (a string as
        ``model_max_length`` fails at the first encode), and a folder whose files come from different
        saves (they disagree with the SHA-256 that ``tokenizer_config.json`` recorded) is refused
        naming them. Nothing in the folder is executed (no
        ``auto_map`` code runs without ``trust_remote_code=True``)."""
        folder = Path(os.fspath(pretrained_model_name_or_path))
        if folder.is_dir():
            for name in FOLDER_FILES:  # transformers opens these with a plain open(), which a FIFO blocks
                if os.path.lexists(folder / name):
                    check_file(folder / name)
            settings = {}
            for name in ("tokenizer_config.json", "special_tokens_map.json"):
                if (folder / name).is_file():
                    settings[name] = read_json(folder / name)
                    check_settings(folder / name, settings[name])
            if "tokenizer_config.json" in settings:  # after the checks, which name a damaged file better
                check_fingerprint(folder, settings["tokenizer_config.json"])
        return cast(BPETokenizer, super().from_pretrained(pretrained_model_name_or_path, *init_inputs, **kwargs))

    @classmethod
    def from_model(
        cls,
        model: BPE,
        *,
        bos_token: str | int | AddedToken | None = None,
        eos_token: str | int | AddedToken | None = None,
        unk_token: str | int | AddedToken | None = None,
        pad_token: str | int | AddedToken | None = None,
        add_bos_token: bool | None = None,
        add_eos_token: bool = False,
        **kwargs: Any,
    ) -> BPETokenizer:
        """Wrap ``model``. Each special token is the text of one of the model's special tokens, its id,
        or a new text (added as a special token with the next free id).

        A SentencePiece model (``"sentencepiece"`` kind) keeps SentencePiece's policy by default: its
        control pieces ``<s>`` and ``</s>`` are ``bos_token`` and ``eos_token``, its unknown piece
        ``unk_token``, and ``<s>`` starts every sequence (``add_bos_token`` defaults to true when there
        is a ``bos_token``, as in transformers' ``LlamaTokenizer``; false otherwise). Its tokens are
        its pieces (``▁hello``, ``<0x0A>``), and its ``tokenizer.json`` is the one
        :func:`conversion.hf.save` writes (exact, or the save is refused naming why).

        ``pair_template`` says how a pair of sequences is framed (with ``add_bos_token`` and
        ``add_eos_token``): ``"bos_eos"`` (the default: ``bos A eos bos B eos``, the second half of type
        id 1, as transformers' ``TokenizersBackend`` writes it), ``"roberta"`` (``bos A eos eos B eos``,
        all of type id 0: `tokenizers`' ``RobertaProcessing`` with ``bos_token`` as CLS and
        ``eos_token`` as SEP) or ``"bert"`` (``bos A eos B eos``, the second half of type id 1:
        ``BertProcessing``); the last two need both tokens added. ``trim_offsets=True`` takes the
        spaces at either end of a token out of its ``offset_mapping`` span, as `tokenizers`'
        ``ByteLevel`` post-processor does, keeping the one space before a sequence's first token with
        ``trim_keeps_prefix_space=True`` (that post-processor's ``add_prefix_space``).
        :func:`conversion.hf.special_token_settings` reads all these from a ``tokenizer.json``.

        Any other transformers tokenizer argument (``chat_template``, ``model_max_length``,
        ``padding_side``, ``extra_special_tokens``, ...) is passed on and saved.

        >>> import hf_bpe
        >>> enc = hf_bpe.get_encoding("cl100k_base")
        >>> tokenizer = BPETokenizer.from_model(enc, bos_token=100257, pad_token="<|pad|>")
        >>> tokenizer.bos_token, tokenizer.pad_token_id
        ('<|endoftext|>', 100277)
        """
        model = as_model(model)
        spec = model.sentencepiece
        if spec is not None:
            controls = {piece.text for piece in spec.pieces if piece.type == CONTROL}
            bos_token = bos_token if bos_token is not None else "<s>" if "<s>" in controls else None
            eos_token = eos_token if eos_token is not None else "</s>" if "</s>" in controls else None
            if unk_token is None and spec.unk_id is not None:
                unk_token = spec.pieces[spec.unk_id].text
        if add_bos_token is None:
            add_bos_token = spec is not None and bos_token is not None
        named = {
            "bos_token": bos_token,
            "eos_token": eos_token,
            "unk_token": unk_token,
            "pad_token": pad_token,
        }
        for key in ("sep_token", "cls_token", "mask_token"):
            if key in kwargs:
                named[key] = kwargs.pop(key)
        for key, value in named.items():
            if isinstance(value, int) and not isinstance(value, bool):
                named[key] = _special_text(model, key, value)
        tokens: dict[str, Any] = {key: value for key, value in named.items() if value is not None}
        # The model's special tokens that get no name (bos, eos, ...) are extra special tokens.
        extra = list(kwargs.pop("extra_special_tokens", None) or [])
        taken = {str(token) for token in [*tokens.values(), *extra]}
        extra += [text for text in model.special_tokens if text not in taken]
        return cls(
            model=model,
            add_bos_token=add_bos_token,
            add_eos_token=add_eos_token,
            extra_special_tokens=extra,
            **tokens,
            **kwargs,
        )

    @property
    def model(self) -> BPE:
        """The wrapped :class:`hf_bpe.BPE` (without tokens added to this tokenizer)."""
        return self._model

    def view(self, text: str) -> TokenView:
        """How this tokenizer cuts ``text``, added tokens included: a
        :class:`~hf_bpe.view.TokenView` (ids as ``encode(text, add_special_tokens=False)``).

        >>> import hf_bpe
        >>> BPETokenizer.from_model(hf_bpe.get_encoding("gpt2")).view("Hello world").ids
        [15496, 995]
        """
        from hf_bpe._token_view import view_tokenizer

        return view_tokenizer(self, text)

    @property
    def add_bos_token(self) -> bool:
        """Whether ``bos_token`` starts every sequence (kept by ``save_pretrained``)."""
        return self._add_bos

    @add_bos_token.setter
    def add_bos_token(self, value: bool) -> None:
        if value and self.bos_token is None:
            raise ValueError("add_bos_token=True needs a bos_token")
        if not value and self._post.pair_template != "bos_eos":
            raise ValueError(f"pair_template={self._post.pair_template!r} always adds bos_token")
        self._add_bos = bool(value)

    @property
    def add_eos_token(self) -> bool:
        """Whether ``eos_token`` ends every sequence (kept by ``save_pretrained``)."""
        return self._add_eos

    @add_eos_token.setter
    def add_eos_token(self, value: bool) -> None:
        if value and self.eos_token is None:
            raise ValueError("add_eos_token=True needs an eos_token")
        if not value and self._post.pair_template != "bos_eos":
            raise ValueError(f"pair_template={self._post.pair_template!r} always adds eos_token")
        self._add_eos = bool(value)

    @classmethod
    def register_for_auto_class(cls, auto_class: str | type = "AutoTokenizer") -> None:
        """Does nothing: ``import hf_bpe`` registers this class, and ``save_pretrained(...,
        remote_code=True)`` writes ``auto_map``. (transformers' version would make every later
        ``save_pretrained`` copy this module's source into the folder.)"""

    # ------------------------------------------------------------------------------ vocabulary

    @property
    def vocab_size(self) -> int:
        """One more than the model's largest id (its special tokens included)."""
        return self._model.n_vocab

    def __len__(self) -> int:
        """One more than the largest id, added tokens included: the embedding size a model needs."""
        return max(self._model.n_vocab, max(self._added_tokens_decoder, default=-1) + 1)

    def _update_total_vocab_size(self) -> None:
        self.total_vocab_size = len(self)

    def get_vocab(self) -> dict[str, int]:
        vocab = dict(self._get_tables().vocab)
        vocab.update(self._added_tokens_encoder)
        return vocab

    def _convert_token_to_id(self, token: str) -> int | None:
        token_id = self._vocab_id(token)
        if token_id is None:
            token_id = self._model.special_tokens.get(token)
        if token_id is None:
            return self._added_tokens_encoder.get(str(self.unk_token)) if self.unk_token is not None else None
        return token_id

    def _convert_id_to_token(self, index: int) -> str | None:  # type: ignore[override]  # None: unused id
        spelled = self._get_tables().spelled
        if 0 <= index < len(spelled):
            return spelled[index]
        return None

    def convert_tokens_to_string(self, tokens: list[str]) -> str:
        added = self._added_tokens_encoder
        if self._model.kind == "sentencepiece":  # pieces decode as SentencePiece joins them
            vocab = self._get_tables().vocab
            ids = [vocab[token] for token in tokens if token in vocab and token not in added]
            if len(ids) == len(tokens):
                return self._model.decode(ids)
        parts = []
        for token in tokens:
            token_bytes = None if token in added else try_str_to_token(token)
            parts.append(token.encode("utf-8") if token_bytes is None else token_bytes)
        return b"".join(parts).decode("utf-8", errors="replace")

    def _add_tokens(self, new_tokens: Sequence[str | AddedToken], special_tokens: bool = False) -> int:
        """Add tokens as transformers does, numbering new ones after the largest id (like
        `tokenizers`, so ids are the same in ``tokenizer.json``); the core's matcher follows.

        The tables are copied, changed and put in place whole, so a thread reading them meanwhile
        sees them before or after, never half changed (:meth:`add_tokens` also waits for calls in
        progress)."""
        if not new_tokens:
            return 0
        decoder = dict(self._added_tokens_decoder)
        encoder = dict(self._added_tokens_encoder)
        extra = list(self._extra_special_tokens)
        special_texts = set(self.all_special_tokens)
        next_id = len(self)
        added = 0
        for token in new_tokens:
            if not isinstance(token, (str, AddedToken)):
                raise TypeError(f"Token {token} is not a string but a {type(token)}.")
            if str(token) == "":
                continue
            if isinstance(token, str):
                if token in encoder:
                    continue
                is_special = token in special_texts or special_tokens
                token = AddedToken(
                    token, rstrip=False, lstrip=False, normalized=not is_special, special=is_special
                )
            elif special_tokens:
                token.__setstate__({"special": True, "normalized": token.normalized})
            token_id = encoder.get(token.content)
            if token_id is None:
                token_id = self._vocab_id(token.content)
            if token_id is None:
                token_id = next_id
                next_id += 1
                added += 1
            if token.special and str(token) not in special_texts:
                extra.append(token)
                special_texts.add(str(token))
            decoder[token_id] = token
            encoder[token.content] = token_id
        added_tokens = AddedTokens(self._model, decoder)
        self._extra_special_tokens = extra
        self._added_tokens_decoder = decoder
        self._added_tokens_encoder = encoder
        self._added = added_tokens
        self._update_trie()
        self._update_total_vocab_size()
        return added

    def add_tokens(
        self, new_tokens: str | AddedToken | Sequence[str | AddedToken], special_tokens: bool = False
    ) -> int:
        """transformers' ``add_tokens``, safe while other threads use the tokenizer: it waits for
        the calls in progress, and calls made meanwhile wait for it, so each sees the tokenizer
        wholly before or wholly after."""
        with self._lock.writing():
            return super().add_tokens(new_tokens, special_tokens=special_tokens)

    def add_special_tokens(
        self,
        special_tokens_dict: dict[str, str | AddedToken | Sequence[str | AddedToken]],
        replace_extra_special_tokens: bool = True,
    ) -> int:
        """transformers' ``add_special_tokens``, safe while other threads use the tokenizer (see
        :meth:`add_tokens`). Setting an attribute such as ``tokenizer.pad_token = ...`` directly is
        not guarded: do it before sharing the tokenizer, or use this method."""
        with self._lock.writing():
            return super().add_special_tokens(special_tokens_dict, replace_extra_special_tokens)

    def _vocab_id(self, text: str) -> int | None:
        """The id of ``text`` as an ordinary token spelled in the byte-level alphabet (a
        SentencePiece model: a piece), or a special."""
        if self._model.kind == "sentencepiece":
            return self._get_tables().vocab.get(text)
        token_bytes = try_str_to_token(text)
        if token_bytes is not None and (token_id := ordinary_token_id(self._model, token_bytes)) is not None:
            return token_id
        return self._model.special_tokens.get(text)

    def _checked_added_token(
        self, token_id: int, token: AddedToken | str | dict[str, Any], where: str
    ) -> AddedToken:
        """A saved added token, rejected when its id belongs to a different token of the model."""
        if isinstance(token, dict):
            token = AddedToken(**{key: value for key, value in token.items() if key != "__type"})
        elif isinstance(token, str):
            token = AddedToken(token, special=False, normalized=True)
        for text, special_id in self._model.special_tokens.items():
            if special_id == token_id and text != token.content:
                raise InvalidVocabularyError(
                    f"{where}: added token {token.content!r} has id {token_id}, which is the id of the "
                    f"model's special token {text!r}"
                )
        spec = self._model.sentencepiece
        if spec is not None:
            if token_id < len(spec.pieces) and spec.pieces[token_id].text != token.content:
                raise InvalidVocabularyError(
                    f"{where}: added token {token.content!r} has id {token_id}, which is the id of the piece "
                    f"{spec.pieces[token_id].text!r}; an added token needs an id of its own"
                )
            return token
        try:
            ordinary = self._model.decode_single_token_bytes(token_id)
        except KeyError:
            return token
        if token_id not in self._model.special_tokens.values() and token_to_str(ordinary) != token.content:
            raise InvalidVocabularyError(
                f"{where}: added token {token.content!r} has id {token_id}, which is the id of the ordinary "
                f"token {ordinary!r}; an added token needs an id of its own"
            )
        return token

    # -------------------------------------------------------------------------------- encoding

    @reading
    def tokenize(
        self, text: str, pair: str | None = None, add_special_tokens: bool = False, **kwargs: Any
    ) -> list[str]:
        """Token strings of ``text`` (byte-level alphabet), consistent with ``encode``.

        >>> import hf_bpe
        >>> BPETokenizer.from_model(hf_bpe.get_encoding("gpt2")).tokenize("hello world")
        ['hello', 'Ġworld']
        """
        self._added_tokens().check_in_core()
        if pair is None and not add_special_tokens:
            ids = self._encode_texts([text], kwargs.get("split_special_tokens", self.split_special_tokens))[0]
        else:
            ids = self.encode(text, pair, add_special_tokens=add_special_tokens, **kwargs)
        return self.convert_ids_to_tokens(ids)

    @reading
    def encode_arrow(
        self,
        texts: Any,
        *,
        add_special_tokens: bool = True,
        split_special_tokens: bool | None = None,
        num_threads: int | None = None,
        dtype: IdType = "uint32",
        nulls: Nulls = "raise",
    ) -> Any:
        """``self(texts)["input_ids"]`` as an Arrow list array, Arrow in and Arrow out as
        :meth:`hf_bpe.BPE.encode_arrow` (``texts``, ``num_threads``, ``dtype``, ``nulls``), in the
        core (with added tokens matched in two passes: ``self`` on a list).

        >>> import hf_bpe, pyarrow as pa
        >>> BPETokenizer.from_model(hf_bpe.get_encoding("gpt2")).encode_arrow(pa.array(["hello world"])).to_pylist()
        [[31373, 995]]
        """
        split = self.split_special_tokens if split_special_tokens is None else split_special_tokens
        return self._encode_arrow(texts, add_special_tokens=add_special_tokens, split_special_tokens=split,
                                  num_threads=num_threads, dtype=dtype, nulls=nulls)

    def _tokenize(self, text: str, **kwargs: Any) -> list[str]:
        spelled = self._get_tables().spelled  # ordinary ids are never holes
        return [cast(str, spelled[token_id]) for token_id in self._encode_without_added_tokens(text)]

    def _encode_without_added_tokens(self, text: str) -> list[int]:
        spec = self._model.sentencepiece
        if spec is not None and spec.metaspace == "first":
            # transformers' own loop hands over each stretch between added tokens alone; which one
            # starts the text (the only one Metaspace 'first' puts a \u2581 before) is lost here.
            raise NotImplementedError(
                f"{self._model!r} puts \u2581 only before the start of the text (Metaspace 'first'); with "
                "sanitize_control_tokens its stretches of text cannot be told apart"
            )
        return self._model.encode_ordinary(text)

    # -------------------------------------------------------------------------------- decoding

    @reading
    def _decode(
        self,
        token_ids: int | list[int],
        skip_special_tokens: bool = False,
        clean_up_tokenization_spaces: bool | None = None,
        **kwargs: Any,
    ) -> str:
        """Join the tokens' bytes in the core and decode them as UTF-8 (invalid bytes become U+FFFD)."""
        ids = [token_ids] if isinstance(token_ids, int) else list(token_ids)
        added = self._added_tokens()
        if skip_special_tokens:
            skip = added.special_ids
            ids = [token_id for token_id in ids if token_id not in skip]
        decode_bytes = self._model.decode_bytes
        outside = added.outside_model
        if not outside or not any(token_id in outside for token_id in ids):
            text_bytes = decode_bytes(ids)
        else:
            spec = self._model.sentencepiece
            parts: list[bytes] = []
            run: list[int] = []
            started = False  # whether the pieces so far spell more than the ▁ a text's decoder drops
            for token_id in [*ids, None]:
                if token_id is None or token_id in outside:
                    if spec is None:
                        parts.append(decode_bytes(run))
                    else:
                        parts.append(self._decode_run(run, first=not started))
                        started = started or _spells_text(spec, run)
                    if token_id is not None:
                        literal = outside[token_id]
                        if spec is not None:  # its tokenizer.json's decoder: ▁ is a space, a text's first goes
                            spelled = literal.strip("\u2581".encode()) if spec.remove_extra_whitespaces else literal
                            literal = _sentencepiece_literal(spec, literal, first=not started)
                            started = started or bool(spelled)
                        parts.append(literal)
                    run = []
                else:
                    run.append(token_id)
            text_bytes = b"".join(parts)
        text = text_bytes.decode("utf-8", errors="replace")
        if clean_up_tokenization_spaces is None:
            clean_up_tokenization_spaces = self.clean_up_tokenization_spaces
        # As TokenizersBackend: the WordPiece clean-up would delete real spaces of a BPE text.
        if (
            clean_up_tokenization_spaces
            and self.clean_up_tokenization_spaces_for_bpe_even_though_it_will_corrupt_output
        ):
            text = self.clean_up_tokenization(text)
        return text

    def _decode_run(self, ids: list[int], first: bool) -> bytes:
        """The bytes of a run of a SentencePiece model's pieces between added tokens: as the model
        decodes them where nothing comes before (``first``), else without dropping a leading ``▁``
        (the decoder of its ``tokenizer.json`` drops only the text's first). A piece without ``▁``
        put in front keeps the model's decoder from seeing the start of a text."""
        if first or not ids:
            return self._model.decode_bytes(ids)
        lead = self._get_tables().sentencepiece_lead
        return self._model.decode_bytes([lead, *ids])[len(self._model.decode_bytes([lead])):]

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_tables"] = None
        state["_added"] = None  # the core's matchers are rebuilt, not pickled
        state.pop("_lock", None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = ReadWriteLock()


# Pickles and reprs name the class where users import it (hf_bpe.transformers), not by this private
# module, so that a pickled tokenizer does not depend on how the package is laid out. doctest then
# takes the class for another module's, so its examples are listed here to keep them run.
BPETokenizer.__module__ = "hf_bpe.transformers"
__test__ = {"BPETokenizer": BPETokenizer}


def _sentencepiece_literal(spec: SentencePieceSpec, text: bytes, *, first: bool) -> bytes:
    """An added token's text as the decoder of a SentencePiece model's ``tokenizer.json`` gives it:
    ``▁`` as a space, the text's first ``▁`` dropped (every leading one with
    ``remove_extra_whitespaces``) where nothing comes before it."""
    space = "\u2581".encode()
    if first and (spec.add_dummy_prefix or spec.remove_extra_whitespaces):
        if spec.remove_extra_whitespaces:
            while text.startswith(space):
                text = text[len(space):]
        elif text.startswith(space):
            text = text[len(space):]
    return text.replace(space, b" ")


def _spells_text(spec: SentencePieceSpec, ids: list[int]) -> bool:
    """Whether the pieces ``ids`` spell more than the ``▁`` that the decoder of the model's
    ``tokenizer.json`` drops at the start of a text (control pieces spell nothing)."""
    space_only = spec.remove_extra_whitespaces
    for token_id in ids:
        piece = spec.pieces[token_id]
        if piece.type != CONTROL and (not space_only or piece.type != NORMAL or piece.text.strip("\u2581")):
            return True
    return False


def _special_text(model: BPE, key: str, token_id: int) -> str:
    """The text of the special token with id ``token_id``, for ``key`` given as an id."""
    for text, special_id in model.special_tokens.items():
        if special_id == token_id:
            return text
    try:
        ordinary = model.decode_single_token_bytes(token_id)
    except KeyError:
        raise InvalidVocabularyError(
            f"{key}={token_id} is not an id of this model (its special tokens are {model.special_tokens}); "
            f"pass the text of a special token, or a new text to add one"
        ) from None
    raise InvalidVocabularyError(
        f"{key}={token_id} is the id of the ordinary token {ordinary!r}, not of a special token; a special "
        f"token needs an id of its own: pass the text of one of {sorted(model.special_tokens)} or a new text "
        f"(it is added with id {model.n_vocab} or later)"
    )


def save_tokenizer_folder(
    model: BPE,
    directory: str | os.PathLike[str],
    *,
    card: Mapping[str, Any] | None = None,
    **policy: Any,
) -> tuple[str, ...]:
    """Write ``model`` as a transformers tokenizer folder: ``BPETokenizer.from_model(model,
    **policy).save_pretrained(directory)`` (what ``hf-bpe train --out DIR`` should write).

    ``card`` adds what the model card cannot see in the model, kept in ``tokenizer_config.json``:
    ``title``, ``provenance`` (a sentence, e.g. where a converted model came from) and ``training``,
    a dict with any of ``corpus`` (a description), ``texts``, ``bytes``, ``vocab_size``, and
    ``sample_bytes`` / ``sample_tokens`` (the compression measured on the training data).

    >>> import hf_bpe, tempfile
    >>> files = save_tokenizer_folder(hf_bpe.get_encoding("gpt2"), tempfile.mkdtemp(), eos_token="<|endoftext|>",
    ...                               card={"training": {"corpus": "WebText", "vocab_size": 50257}})
    >>> sorted(os.path.basename(file) for file in files)[:3]
    ['README.md', 'hf_bpe.json', 'special_tokens_map.json']
    """
    tokenizer = BPETokenizer.from_model(model, **policy)
    tokenizer._card.update(card or {})
    return tokenizer.save_pretrained(directory)
