"""The tokenizer folder: what ``save_pretrained`` writes beside transformers' own files (``hf_bpe.json``,
an equivalent ``tokenizer.json``, ``special_tokens_map.json``, our ``tokenizer_config.json`` section,
the ``auto_map`` shim, the model card), and the checks on a folder's settings before loading it."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from transformers import PreTrainedTokenizer
from transformers.tokenization_utils_base import AddedToken

import conversion.hf
from hf_bpe._io import atomic_write, read_file, replacing_folder
from hf_bpe.errors import TokenizerFileError
from hf_bpe.model import BPE, MODEL_FILE

REMOTE_CODE_FILE = "tokenization_hf_bpe.py"
"""The one-line module that ``save_pretrained(..., remote_code=True)`` writes for ``auto_map``."""

if TYPE_CHECKING:
    from hf_bpe.transformers._pipeline import PostProcessing
    from hf_bpe.transformers._tokenizer import BPETokenizer

CONFIG_KEY = "hf_bpe"
"""Our section of ``tokenizer_config.json``: the BOS/EOS policy and what the model card knows."""


FINGERPRINT_KEY = "files"
"""Under :data:`CONFIG_KEY`: the SHA-256 of each file of :data:`FINGERPRINTED` that the save wrote."""

FINGERPRINTED = (MODEL_FILE, "tokenizer.json", "special_tokens_map.json", "added_tokens.json")
"""The files whose content sets the ids, which a folder must hold from one save (the model card and
the chat template, which people edit by hand, are not among them)."""


def fingerprint(directory: Path, prefix: str = "") -> dict[str, str]:
    """The SHA-256 of each file of :data:`FINGERPRINTED` in ``directory``, by name."""
    return {
        name: hashlib.sha256(read_file(directory / name, decompress=False)).hexdigest()
        for name in (prefix + base for base in FINGERPRINTED)
        if (directory / name).is_file()
    }


def check_fingerprint(folder: Path, config: dict[str, Any]) -> None:
    """Raise :class:`~hf_bpe.errors.TokenizerFileError` naming the files of ``folder`` that differ
    from the SHA-256 its ``tokenizer_config.json`` recorded when they were saved together: files from
    two saves (what an interrupted save of an older version, or copying files between folders,
    leaves) would load with wrong ids. A config without a record (older saves) passes."""
    section = config.get(CONFIG_KEY)
    recorded = section.get(FINGERPRINT_KEY) if isinstance(section, dict) else None
    if recorded is None:
        return
    path = folder / "tokenizer_config.json"
    if not isinstance(recorded, dict) or not all(isinstance(value, str) for value in recorded.values()):
        raise TokenizerFileError(path, f"{CONFIG_KEY}.{FINGERPRINT_KEY} is {recorded!r:.80}; expected an object of "
                                 "file name -> SHA-256")
    differing = []
    for name, digest in sorted(recorded.items()):
        if os.path.basename(name) != name:
            raise TokenizerFileError(path, f"{CONFIG_KEY}.{FINGERPRINT_KEY} names {name!r:.80}, not a file of the folder")
        if not (folder / name).is_file():
            differing.append(f"{name} (missing)")
        elif hashlib.sha256(read_file(folder / name, decompress=False)).hexdigest() != digest:
            differing.append(name)
    if differing:
        one = len(differing) == 1 and not differing[0].endswith("(missing)")
        raise TokenizerFileError(
            folder / differing[0] if one else folder,
            f"{'it' if one else ', '.join(differing)} {'differs' if one else 'differ'} from what "
            "tokenizer_config.json recorded when the folder was saved: the folder mixes files of different saves "
            "(an interrupted save, files copied from another folder) or a file was edited or damaged since, and "
            "the ids would be wrong; save the tokenizer again, or copy the whole folder from one save"
        )


class FolderFormat(PreTrainedTokenizer):
    """Saving (a mixin of :class:`~hf_bpe.BPETokenizer`)."""

    _model: BPE
    _add_bos: bool
    _add_eos: bool
    _post: PostProcessing
    _card: dict[str, Any]
    _added_tokens_decoder: dict[int, AddedToken]

    # ---------------------------------------------------------------------------------- saving

    def save_vocabulary(self, save_directory: str, filename_prefix: str | None = None) -> tuple[str, ...]:
        """Write our model file (``hf_bpe.json``)."""
        path = Path(save_directory) / ((f"{filename_prefix}-" if filename_prefix else "") + MODEL_FILE)
        self._model.save(path)
        return (str(path),)

    def save_pretrained(  # type: ignore[override]
        self,
        save_directory: str | os.PathLike[str],
        legacy_format: bool | None = None,
        filename_prefix: str | None = None,
        push_to_hub: bool = False,
        *,
        remote_code: bool | None = None,
        model_card: bool = True,
        **kwargs: Any,
    ) -> tuple[str, ...]:
        """Write a self-sufficient folder: ``tokenizer_config.json`` (class, special tokens, added
        tokens, BOS/EOS policy), ``hf_bpe.json`` (our model), an equivalent ``tokenizer.json``,
        ``special_tokens_map.json``, the chat template, and a model card ``README.md``.

        ``remote_code=True`` also writes ``auto_map`` and a one-line module so that
        ``AutoTokenizer.from_pretrained(folder, trust_remote_code=True)`` returns this class even
        where ``hf_bpe`` was never imported; the default keeps what the tokenizer was loaded with.
        Note that with ``auto_map`` transformers refuses to load the folder without
        ``trust_remote_code=True`` (unless ``hf_bpe`` is imported), so it is opt-in.
        """
        if os.path.isfile(save_directory):
            raise NotADirectoryError(f"{os.fspath(save_directory)} is a file; save_pretrained needs a folder")
        if remote_code is None:
            remote_code = "auto_map" in self.init_kwargs
        if push_to_hub:
            from transformers.utils import hf_api

            commit_message = kwargs.pop("commit_message", None)
            repo_id = kwargs.pop("repo_id", str(save_directory).split(os.path.sep)[-1])
            repo_id = hf_api().create_repo(repo_id, exist_ok=True, **kwargs).repo_id
            timestamps = self._get_files_timestamps(save_directory) if os.path.isdir(save_directory) else {}
        with replacing_folder(save_directory) as staging:
            files = self._save_folder(staging, legacy_format, filename_prefix, remote_code=remote_code,
                                      model_card=model_card, **kwargs)
            files = tuple(os.path.join(save_directory, os.path.relpath(file, staging)) for file in files)
        if push_to_hub:
            self._upload_modified_files(
                save_directory, repo_id, timestamps, commit_message=commit_message, token=kwargs.get("token")
            )
        return files

    def _save_folder(
        self,
        directory: Path,
        legacy_format: bool | None,
        filename_prefix: str | None,
        *,
        remote_code: bool,
        model_card: bool,
        **kwargs: Any,
    ) -> tuple[str, ...]:
        """Write the files of :meth:`save_pretrained` into the empty folder ``directory``."""
        files = super().save_pretrained(
            str(directory), legacy_format, filename_prefix, push_to_hub=False, **kwargs
        )
        prefix = f"{filename_prefix}-" if filename_prefix else ""
        config_path = directory / f"{prefix}tokenizer_config.json"
        config = json.loads(config_path.read_text(encoding="utf-8"))
        config[CONFIG_KEY] = self._settings()
        config[CONFIG_KEY][FINGERPRINT_KEY] = fingerprint(directory, prefix)
        # How this tokenizer was loaded is no setting of it; "backend" ("custom") would mislabel
        # the TokenizersBackend that reads the folder without hf_bpe.
        for key in ("backend", "is_local", "local_files_only"):
            config.pop(key, None)
        config.pop("auto_map", None)
        if remote_code:
            config["auto_map"] = {"AutoTokenizer": [f"{REMOTE_CODE_FILE[:-3]}.BPETokenizer", None]}
            atomic_write(
                directory / REMOTE_CODE_FILE,
                "from hf_bpe import BPETokenizer  # noqa: F401  (needs `pip install hf_bpe`)\n",
            )
            files = (*files, str(directory / REMOTE_CODE_FILE))
        atomic_write(config_path, json.dumps(config, indent=2, sort_keys=True, ensure_ascii=False) + "\n")
        if model_card and self._model.kind != "sentencepiece":  # the card describes byte-level vocabularies
            from hf_bpe.transformers._model_card import write_model_card

            files = (*files, str(write_model_card(cast("BPETokenizer", self), directory)))
        return files

    def _save_pretrained(  # type: ignore[override]
        self,
        save_directory: str | os.PathLike[str],
        file_names: tuple[str, ...],
        legacy_format: bool | None = None,
        filename_prefix: str | None = None,
    ) -> tuple[str, ...]:
        directory = Path(save_directory)
        prefix = f"{filename_prefix}-" if filename_prefix else ""
        model_files = self.save_vocabulary(str(directory), filename_prefix)
        added_tokens = self._added_tokens_decoder
        tokenizer_json = conversion.hf.save(
            self._model,
            directory / f"{prefix}tokenizer.json",
            added_tokens=added_tokens,
            bos_token=self.bos_token,
            eos_token=self.eos_token,
            add_bos_token=self._add_bos,
            add_eos_token=self._add_eos,
            **self._post.settings(),
        )
        special_map = {key: _token_json(self._special_tokens_map[key]) for key in self.special_tokens_map}
        if self._extra_special_tokens:
            special_map["extra_special_tokens"] = [_token_json(token) for token in self._extra_special_tokens]
        special_path = atomic_write(
            directory / f"{prefix}special_tokens_map.json",
            json.dumps(special_map, indent=2, sort_keys=True, ensure_ascii=False) + "\n",
        )
        return (*file_names, *model_files, str(tokenizer_json), str(special_path))

    def _settings(self) -> dict[str, Any]:
        """What ``tokenizer_config.json`` keeps under ``"hf_bpe"``."""
        settings: dict[str, Any] = {"add_bos_token": self._add_bos, "add_eos_token": self._add_eos,
                                    **self._post.settings()}
        if self._card:
            settings["card"] = self._card
        return settings


_SPECIAL_TOKEN_KEYS = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token")


def check_settings(path: Path, settings: Any) -> None:
    """Check the types of the settings transformers reads from ``tokenizer_config.json`` or
    ``special_tokens_map.json``; raise :class:`~hf_bpe.errors.TokenizerFileError` naming the first
    wrong one. Unknown keys pass (transformers forwards them)."""

    def wrong(key: str, value: Any, expected: str) -> TokenizerFileError:
        return TokenizerFileError(path, f"{key} is {value!r:.80}; expected {expected}")

    def is_token(value: Any) -> bool:
        if isinstance(value, dict):
            value = value.get("content")
        return isinstance(value, str) and value != ""

    if not isinstance(settings, dict):
        raise TokenizerFileError(path, f"expected a JSON object, got {type(settings).__name__}")
    for key in _SPECIAL_TOKEN_KEYS:
        if settings.get(key) is not None and not is_token(settings[key]):
            raise wrong(key, settings[key], 'a token: a non-empty string or {"content": ...}')
    for key in ("additional_special_tokens", "extra_special_tokens"):
        value = settings.get(key)
        tokens = list(value.values()) if isinstance(value, dict) else value
        if value is not None and (not isinstance(tokens, list) or not all(map(is_token, tokens))):
            raise wrong(key, value, "a list of tokens")
    added = settings.get("added_tokens_decoder")
    if added is not None:
        if not isinstance(added, dict):
            raise wrong("added_tokens_decoder", added, "an object of id -> token")
        for token_id, token in added.items():
            if not token_id.isdigit() or not is_token(token) or not isinstance(token, dict):
                raise wrong(f"added_tokens_decoder[{token_id!r:.20}]", token, 'an id of digits -> {"content": ...}')
            flags = {flag: value for flag, value in token.items() if flag != "content" and flag != "__type"}
            if not all(isinstance(value, bool) for value in flags.values()):
                raise wrong(f"added_tokens_decoder[{token_id!r:.20}]", token, "true/false flags")
    length = settings.get("model_max_length")
    if length is not None and (isinstance(length, bool) or not isinstance(length, (int, float)) or not length > 0):
        raise wrong("model_max_length", length, "a positive number")
    for key in ("padding_side", "truncation_side"):
        if key in settings and settings[key] not in ("left", "right"):
            raise wrong(key, settings[key], '"left" or "right"')
    for key, expected in (("tokenizer_class", str), ("name_or_path", str), (CONFIG_KEY, dict),
                          ("clean_up_tokenization_spaces", bool), ("split_special_tokens", bool)):
        if settings.get(key) is not None and not isinstance(settings[key], expected):
            raise wrong(key, settings[key], f"a {expected.__name__}")
    names = settings.get("model_input_names")
    if names is not None and not (isinstance(names, list) and all(isinstance(name, str) for name in names)):
        raise wrong("model_input_names", names, "a list of strings")


def load_model(model_file: str | os.PathLike[str] | None, name_or_path: str | None) -> BPE:
    """Our model from a saved folder, with errors that name the file."""
    if model_file is None or not os.path.lexists(model_file):
        path = model_file if model_file is not None else os.path.join(name_or_path or ".", MODEL_FILE)
        raise TokenizerFileError(
            path,
            f"missing: a BPETokenizer folder needs the model file {MODEL_FILE} that save_pretrained writes "
            "(the folder can still be loaded without hf_bpe, by transformers' TokenizersBackend, from tokenizer.json)",
        )
    return BPE.load(model_file)


def config_path(name_or_path: str | None) -> str:
    return os.path.join(name_or_path, "tokenizer_config.json") if name_or_path else "added_tokens_decoder"


def _token_json(token: AddedToken | str) -> Any:
    if isinstance(token, AddedToken):
        state = token.__getstate__()
        state.pop("special", None)
        return state
    return token
