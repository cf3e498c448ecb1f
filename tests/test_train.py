"""Training: exact semantics (CS336's reference, a naive trainer), counting (chunks, shards, corpus
forms), progress, and bad input."""

from __future__ import annotations

import doctest
import pickle
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import cost
import pytest
import regex
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from naive_bpe import naive_train
from suite import PEAK_RSS_KB
from terminal import on_a_terminal

import hf_bpe
from hf_bpe import _core, patterns
from hf_bpe._byte_level import str_to_token
from hf_bpe.train import PieceCounts, count_pieces, train_from_counts

CS336 = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "cs336"
needs_cs336 = pytest.mark.skipif(not CS336.is_dir(), reason="../shared/data/cs336 is absent (a fresh clone)")

NAMED = ["gpt2", "cl100k", "o200k"]


def learned_tokens(model: hf_bpe.BPE, special_tokens: int = 0) -> list[bytes]:
    return [model.decode_single_token_bytes(i) for i in range(256, model.n_vocab - special_tokens)]


# ------------------------------------------------------------------------------ exact semantics


@needs_cs336
def test_cs336_reference_merges_are_reproduced_in_order() -> None:
    model = hf_bpe.train(CS336 / "corpus.en", 500, special_tokens=["<|endoftext|>"], show_progress=False)
    reference = []
    for line in (CS336 / "train-bpe-reference-merges.txt").read_text(encoding="utf-8").splitlines():
        left, right = line.split(" ")
        reference.append(str_to_token(left) + str_to_token(right))
    assert len(reference) == 243
    assert learned_tokens(model, special_tokens=1) == reference
    assert model.n_vocab == 500
    assert model.encode("<|endoftext|>", allowed_special="all") == [499]


@needs_cs336
def test_cs336_reference_vocabulary_is_the_same_set_of_tokens() -> None:
    import json

    model = hf_bpe.train(CS336 / "corpus.en", 500, special_tokens=["<|endoftext|>"], show_progress=False)
    reference = json.loads((CS336 / "train-bpe-reference-vocab.json").read_text(encoding="utf-8"))
    expected = {str_to_token(token) for token in reference if token != "<|endoftext|>"}
    assert set(model.token_byte_values()) == expected


def fragments(pieces: list[str], max_size: int) -> st.SearchStrategy[str]:
    """Texts made of the given fragments (multi-character ones make special tokens and repeats likely)."""
    return st.lists(st.sampled_from(pieces), max_size=max_size).map("".join)


documents_strategy = st.lists(
    fragments(list("aab  \n\t.,'s0é日\u00a0") + ["<|x|>", "ll", "ab"], 40), min_size=1, max_size=6
)


@pytest.mark.filterwarnings("ignore:the corpus allows only")
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    documents=documents_strategy,
    merges=st.integers(0, 40),
    pattern=st.sampled_from(NAMED + [r"\w+|\s+|[^\w\s]+"]),
    special_tokens=st.sampled_from([[], ["<|x|>"], ["<|x|>", "ll"]]),
)
def test_agrees_with_the_naive_trainer(
    documents: list[str], merges: int, pattern: str, special_tokens: list[str]
) -> None:
    vocab_size = 256 + len(special_tokens) + merges
    expected = naive_train(documents, vocab_size, patterns.resolve(pattern), special_tokens)
    try:
        model = hf_bpe.train(
            documents, vocab_size, pattern=pattern, special_tokens=special_tokens, show_progress=False
        )
    except ValueError as error:  # nothing but special tokens: the naive loop saw no piece either
        assert "empty" in str(error)
        assert expected == []
        return
    assert learned_tokens(model, len(special_tokens)) == expected
    assert [model.encode_single_token(token) for token in special_tokens] == list(
        range(256 + len(expected), 256 + len(expected) + len(special_tokens))
    )


@pytest.fixture(scope="module")
def pydoc_model() -> hf_bpe.BPE:
    from pydoc_data.topics import topics

    text = "\n".join(topics[name] for name in sorted(topics))[:150_000]
    return hf_bpe.train([text], 1000, special_tokens=["<|endoftext|>"], show_progress=False)


@settings(max_examples=200, deadline=None)
@given(text=st.text())
def test_trained_model_round_trips_any_text(pydoc_model: hf_bpe.BPE, text: str) -> None:
    # Hypothesis draws strings from this file's constants too, so `text` may hold the special token:
    # `encode` refuses it by default (as tiktoken does), and encodes it as ordinary text when told to.
    if "<|endoftext|>" in text:
        with pytest.raises(hf_bpe.errors.DisallowedSpecialTokenError):
            pydoc_model.encode(text)
    assert pydoc_model.decode(pydoc_model.encode(text, disallowed_special=())) == text
    assert pydoc_model.decode(pydoc_model.encode(text + "<|endoftext|>" + text, allowed_special="all")) == (
        text + "<|endoftext|>" + text
    )


def test_trained_model_compresses_its_own_training_text(pydoc_model: hf_bpe.BPE) -> None:
    from pydoc_data.topics import topics

    sample = topics["if"]
    assert len(pydoc_model.encode(sample)) < len(sample.encode("utf-8")) / 2.5


@pytest.mark.filterwarnings("ignore:the corpus allows only")
def test_special_tokens_are_never_split_nor_merged() -> None:
    documents = ["hello<|end|>hello<|end|>" * 20, "<|end|><|end|>end|><|"]
    model = hf_bpe.train(documents, 300, special_tokens=["<|end|>"], show_progress=False)
    assert not any(b"<|end|>" in token for token in learned_tokens(model, 1))
    assert model.encode("<|end|>", allowed_special="all") == [model.n_vocab - 1]
    # Pieces never cross a special token: "o<" never merges although the text has "hello<|end|>".
    assert b"o<" not in learned_tokens(model, 1)


def test_ids_are_bytes_then_merges_then_special_tokens() -> None:
    model = hf_bpe.train(["abab abab"] * 3, 260, special_tokens=["<a>", "<b>"], show_progress=False)
    assert [model.decode_single_token_bytes(i) for i in range(256)] == [bytes([i]) for i in range(256)]
    assert model.special_tokens_set == {"<a>", "<b>"}
    assert model.encode("<a><b>", allowed_special="all") == [258, 259]
    assert learned_tokens(model, 2) == [b"ab", b"abab"]


def test_one_thread_and_all_threads_learn_the_same_model() -> None:
    documents = [f"document {i}: the quick brown fox jumps over the lazy dog {i * 7919}" for i in range(2000)]
    one = hf_bpe.train(documents, 400, show_progress=False, num_threads=1)
    every = hf_bpe.train(documents, 400, show_progress=False)
    assert learned_tokens(one) == learned_tokens(every)


def test_a_small_corpus_gives_a_smaller_vocabulary_with_a_warning() -> None:
    with pytest.warns(UserWarning, match="allows only 2 merges") as caught:
        model = hf_bpe.train(["ab ab"], 1000, show_progress=False)
    assert model.n_vocab == 258
    assert caught[0].filename == __file__  # the warning points at the caller's line


# ------------------------------------------------------------------------------------- counting

tricky = fragments(
    [
        " ",
        "  ",
        "\n",
        "\r\n",
        "\t",
        "\u00a0",
        "\u3000",
        "a",
        "Bc",
        "z",
        "é",
        "日本",
        "1",
        "23",
        "/",
        "'",
        "'s",
        ".",
        "!?",
        "\u0301",
        "\U0001f600",
        "<|x|>",
        "<|",
        "|>",
        "x",
    ],
    150,
)


@settings(max_examples=120, deadline=None)
@given(
    text=tricky, chunk_bytes=st.integers(1, 24), pattern=st.sampled_from(NAMED), with_special=st.booleans()
)
def test_counting_in_chunks_equals_counting_whole_texts(
    text: str, chunk_bytes: int, pattern: str, with_special: bool
) -> None:
    specials = ["<|x|>", "|>\n"] if with_special else []
    regex_ = patterns.resolve(pattern)
    whole = _core.PieceCounter(regex_, specials, None, 1 << 40)
    chunked = _core.PieceCounter(regex_, specials, None, chunk_bytes)
    whole.add_texts([text])
    chunked.add_texts([text])
    assert chunked.take() == whole.take()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=tricky, chunk_bytes=st.integers(1, 24), pattern=st.sampled_from(NAMED))
def test_streaming_files_in_chunks_equals_counting_whole_texts(
    tmp_path: Path, text: str, chunk_bytes: int, pattern: str
) -> None:
    path = tmp_path / "corpus.txt"
    path.write_bytes(text.encode("utf-8"))
    regex_ = patterns.resolve(pattern)
    whole = _core.PieceCounter(regex_, ["<|x|>"], None, 1 << 40)
    streamed = _core.PieceCounter(regex_, ["<|x|>"], None, chunk_bytes)
    whole.add_texts([text])
    streamed.add_files([str(path)])
    assert streamed.take() == whole.take()


def test_only_patterns_worked_out_for_cutting_are_cut() -> None:
    assert all(_core.can_chunk(patterns.resolve(name)) for name in NAMED)
    assert not _core.can_chunk(r"\w+|\s+")
    # A custom pattern is counted one whole file at a time, whatever the chunk size.
    text = "one line\n" * 50
    whole = _core.PieceCounter(r"(?s).+", [], None, 8)
    whole.add_texts([text])
    assert whole.take().most_common() == [(text.encode(), 1)]


def test_files_lists_of_text_and_datasets_count_the_same(tmp_path: Path) -> None:
    import datasets

    documents = ["First document.\nWith two lines.", "Second one, café ☕ 42", "  third\n\n"]
    paths = []
    for i, document in enumerate(documents):
        paths.append(tmp_path / f"doc{i}.txt")
        paths[-1].write_text(document, encoding="utf-8", newline="")
    from_files = count_pieces(paths, show_progress=False)
    from_texts = count_pieces(iter(documents), show_progress=False)
    dataset = datasets.Dataset.from_dict({"id": [0, 1, 2], "body": documents})
    from_dataset = count_pieces(dataset, text_column="body", show_progress=False)
    from_iterable = count_pieces(
        dataset.to_iterable_dataset(), text_column="body", show_progress=False
    )
    assert from_files == from_texts == from_dataset == from_iterable
    one_path = count_pieces(str(paths[0]), show_progress=False)
    assert one_path == count_pieces([documents[0]], show_progress=False)


# ----------------------------------------------------------------- files, and names that look like them


TWO_FILES = {"a.txt": "The first file, with some words.\nAnd a second line.", "b.txt": "Zweite Datei: café ☕ 42 words"}


@pytest.fixture
def two_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """``a.txt`` and ``b.txt`` in the working folder; their names, as a user would type them."""
    for name, text in TWO_FILES.items():
        (tmp_path / name).write_text(text, encoding="utf-8", newline="")
    monkeypatch.chdir(tmp_path)
    return list(TWO_FILES)


def test_a_list_of_file_names_is_refused_instead_of_trained_on_as_text(two_files: list[str]) -> None:
    """What a user of ``tokenizers`` writes: ``train(["a.txt", "b.txt"], ...)``. Training on the two
    names would be a silent mistake; the error says how to pass files, and how to train on the names if
    that was meant."""
    for call in (lambda names: hf_bpe.train(names, 300, show_progress=False),
                 lambda names: count_pieces(names, show_progress=False)):
        for names in (two_files, tuple(two_files), [str(Path(name).resolve()) for name in two_files]):
            with pytest.raises(ValueError, match="look like file names") as raised:
                call(names)
            message = str(raised.value)
            assert "'a.txt'" in message or "a.txt'" in message
            assert "files=[...]" in message and "pathlib.Path" in message and "iter(corpus)" in message


def test_a_mistyped_name_among_file_names_is_refused_naming_it(two_files: list[str]) -> None:
    with pytest.raises(ValueError, match=r"'a\.txt' is a file; 'b\.tx' is not"):
        hf_bpe.train(["a.txt", "b.tx"], 300, show_progress=False)
    with pytest.raises(ValueError, match=r"'a\.txt', 'b\.txt' are files; 'data/c' is not"):
        hf_bpe.train(["a.txt", "b.txt", "data/c"], 300, show_progress=False)


def test_files_keyword_and_path_objects_train_on_the_files(two_files: list[str]) -> None:
    texts = list(TWO_FILES.values())
    expected = count_pieces(iter(texts), show_progress=False)
    paths = [Path(name) for name in two_files]
    for counted in (
        count_pieces(files=two_files, show_progress=False),
        count_pieces(files=paths, show_progress=False),
        count_pieces(files=iter(two_files), show_progress=False),
        count_pieces(paths, show_progress=False),
    ):
        assert counted == expected
    assert count_pieces(files="a.txt", show_progress=False) == count_pieces(
        files=paths[0], show_progress=False) == count_pieces(paths[0], show_progress=False)
    assert count_pieces(files="a.txt", show_progress=False) == count_pieces(texts[:1], show_progress=False)
    model = hf_bpe.train(files=two_files, vocab_size=280, show_progress=False)
    assert model == hf_bpe.train(iter(texts), 280, show_progress=False)
    assert model == hf_bpe.train(paths, 280, show_progress=False)


def test_an_iterator_of_names_trains_on_the_names_as_text(two_files: list[str]) -> None:
    """The way out the error names: a one-shot iterator is never looked into, so it is documents."""
    counted = count_pieces(iter(two_files), show_progress=False)
    pieces = Counter(piece.encode() for name in two_files for piece in regex.findall(patterns.GPT2, name))
    assert dict(counted.most_common()) == pieces


def test_files_missing_or_not_paths_are_refused_naming_them(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="nowhere.txt: no such corpus file"):
        hf_bpe.train(files=[tmp_path / "nowhere.txt"], vocab_size=300, show_progress=False)
    with pytest.raises(ValueError, match="files is empty"):
        hf_bpe.train(files=[], vocab_size=300, show_progress=False)
    for files in (b"a.txt", 3, {"a.txt": 1}, [3]):
        with pytest.raises(TypeError, match="path"):
            hf_bpe.train(files=files, vocab_size=300, show_progress=False)  # type: ignore[arg-type]


def test_corpus_and_files_together_or_neither_are_refused_before_reading(two_files: list[str]) -> None:
    corpus, consumed = untouched_corpus()
    with pytest.raises(TypeError, match="either corpus .* or files=.*not both"):
        hf_bpe.train(corpus, 300, files=two_files, show_progress=False)
    with pytest.raises(TypeError, match="either corpus .* or files=.*not both"):
        count_pieces(corpus, files=two_files, show_progress=False)
    assert consumed == []
    with pytest.raises(TypeError, match="nothing to train on: pass documents as corpus .* or text files as files="):
        hf_bpe.train(vocab_size=300, show_progress=False)
    with pytest.raises(TypeError, match="nothing to train on"):
        count_pieces(show_progress=False)
    with pytest.raises(TypeError, match="vocab_size is required"):
        hf_bpe.train(files=two_files, show_progress=False)


@pytest.mark.filterwarnings("ignore:the corpus allows only")
def test_documents_that_only_resemble_file_names_are_documents(two_files: list[str], tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    for documents in (
        ["hello world", "a.txt"],  # the first is not a name
        ["the", "of", "data"],  # "data" exists, but as a folder, and "the" and "of" are words
        [".", "..", "/"],  # folders, and text
        ["a.txt", "."],  # "." is text, not a file name
        ["a.txt", "b.txt", "a.txt\nand a second line"],  # a line break: text
        ["a.txt"] * 8 + ["a document, not a path\n"],  # the first eight exist, the ninth is text
        ["a.txt", "b" * 5000],  # longer than any path
    ):
        counted = count_pieces(documents, show_progress=False)
        assert counted == count_pieces(iter(documents), show_progress=False)


def test_long_lists_of_names_are_refused_after_a_few_look_ups(
    two_files: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A million documents must not cost a million look-ups on disk: the first few decide."""
    import os

    looked_up: list[str] = []
    isfile = os.path.isfile

    def counting_isfile(path: str) -> bool:
        looked_up.append(path)
        return isfile(path)

    monkeypatch.setattr(os.path, "isfile", counting_isfile)
    names = [f"shard-{index:05}.txt" for index in range(100_000)]
    names[:2] = two_files
    with pytest.raises(ValueError, match=r"'a\.txt', 'b\.txt' are files; .* are not; checked the first 8 of 100,000"):
        count_pieces(names, show_progress=False)
    assert len(looked_up) == 8
    looked_up.clear()
    count_pieces([f"document {index}" for index in range(100_000)], show_progress=False)
    assert looked_up == ["document 0"]


def test_shards_counted_apart_and_summed_train_the_same_model() -> None:
    from pydoc_data.topics import topics

    documents = [topics[name] for name in sorted(topics)]
    shards = [documents[i::3] for i in range(3)]
    # Each shard's table travels as a pickle, as it would from a worker process or another machine.
    tables = [pickle.loads(pickle.dumps(count_pieces(shard, show_progress=False))) for shard in shards]
    total = sum(tables)
    assert total == count_pieces(documents, show_progress=False)
    summed = train_from_counts(total, 600, show_progress=False)
    direct = hf_bpe.train(documents, 600, show_progress=False)
    assert summed.mergeable_ranks == direct.mergeable_ranks


def test_a_consumed_table_trains_the_same_model_and_is_left_empty() -> None:
    from pydoc_data.topics import topics

    documents = [topics[name] for name in sorted(topics)[:40]]
    counts = count_pieces(documents, show_progress=False)
    kept = pickle.dumps(counts)
    consumed = train_from_counts(counts, 500, show_progress=False, consume=True)
    assert len(counts) == 0
    assert consumed.mergeable_ranks == hf_bpe.train(documents, 500, show_progress=False).mergeable_ranks
    assert pickle.loads(kept) == count_pieces(documents, show_progress=False)


def test_counting_in_dataset_map_worker_processes_and_summing_gives_the_same_model() -> None:
    from pydoc_data.topics import topics

    import datasets

    dataset = datasets.Dataset.from_dict({"text": [topics[name] for name in sorted(topics)]})

    def count_batch(batch: dict[str, list[str]]) -> dict[str, list[bytes]]:
        table = count_pieces(batch["text"], special_tokens=["<|endoftext|>"], show_progress=False)
        return {"counts": [pickle.dumps(table)]}

    shards = dataset.map(count_batch, batched=True, batch_size=20, num_proc=2, remove_columns=["text"])
    total = sum(pickle.loads(table) for table in shards["counts"])
    model = train_from_counts(total, 500, show_progress=False)
    direct = hf_bpe.train(dataset, 500, special_tokens=["<|endoftext|>"], show_progress=False)
    assert model.mergeable_ranks == direct.mergeable_ranks
    assert model.special_tokens_set == {"<|endoftext|>"}


def test_piece_counts_is_a_value() -> None:
    counts = PieceCounts({"the": 3, b" cat": 1})
    assert counts["the"] == counts[b"the"] == 3 and counts["dog"] == 0
    assert "the" in counts and "dog" not in counts
    assert len(counts) == 2 and counts.total == 4
    assert counts.pattern == patterns.GPT2 and counts.special_tokens == ()
    assert (counts + counts)["the"] == 6
    assert sum([counts, counts, counts]).total == 12
    assert pickle.loads(pickle.dumps(counts)) == counts
    assert counts.to_dict() == {b"the": 3, b" cat": 1}
    assert counts.most_common(1) == [(b"the", 3)]
    assert "2 distinct pieces" in repr(counts) and "pattern=gpt2" in repr(counts)
    accumulated = PieceCounts()
    accumulated += counts
    assert accumulated == counts


def test_piece_counts_of_different_patterns_or_special_tokens_do_not_add() -> None:
    gpt2 = PieceCounts({"a": 1})
    with pytest.raises(ValueError, match="different split patterns"):
        gpt2 + PieceCounts({"a": 1}, pattern="cl100k")
    with pytest.raises(ValueError, match="different special tokens"):
        gpt2 + PieceCounts({"a": 1}, special_tokens=["<s>"])
    with pytest.raises(TypeError):
        gpt2 + 1


def test_piece_counts_docstring_example_runs() -> None:
    finder = doctest.DocTestFinder()
    runner = doctest.DocTestRunner()
    # The docstring lives in the Rust extension (crates/python/src/train.rs) and still calls
    # hf_bpe.count_pieces, which is now hf_bpe.train's only: until it says so, the call is read as that.
    for test in finder.find(PieceCounts, "PieceCounts", globs={"count_pieces": count_pieces}):
        for example in test.examples:
            example.source = example.source.replace("hf_bpe.count_pieces(", "count_pieces(")
        runner.run(test)
    assert runner.failures == 0 and runner.tries > 0


# ------------------------------------------------------------------------------------- progress


@pytest.mark.filterwarnings("ignore:the corpus allows only")
def test_progress_bars_show_counting_and_merging(tmp_path: Path) -> None:
    """On a terminal, with HF_BPE_PROGRESS_DELAY=0 (by default a bar waits a second of work)."""
    path = tmp_path / "corpus.txt"
    path.write_text("some text to count and merge\n" * 100, encoding="utf-8")
    shown = on_a_terminal(f"import hf_bpe; hf_bpe.train({str(path)!r}, 300)", delay="0").decode()
    assert "Counting pieces" in shown and "B/s" in shown or "B " in shown
    assert "Merging" in shown and "merges" in shown
    shown = on_a_terminal("import hf_bpe; hf_bpe.train(['some text'] * 10, 260)", delay="0").decode()
    assert "docs" in shown
    no_length = "import hf_bpe; hf_bpe.train((text for text in ['some text'] * 10), 260)"
    assert "10 docs" in on_a_terminal(no_length, delay="0").decode()


@pytest.mark.filterwarnings("ignore:the corpus allows only")
def test_no_progress_output_when_off(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "corpus.txt"
    path.write_text("some text to count and merge\n" * 100, encoding="utf-8")
    hf_bpe.train(path, 300, show_progress=False)
    hf_bpe.train(["some text"] * 10, 260, show_progress=False)
    captured = capsys.readouterr()
    assert captured.err == "" and captured.out == ""


# ------------------------------------------------------------------------------------ bad input


def untouched_corpus() -> tuple[Iterator[str], list[str]]:
    consumed: list[str] = []

    def documents() -> Iterator[str]:
        for document in ["some", "text"]:
            consumed.append(document)
            yield document

    return documents(), consumed


def test_vocab_size_below_bytes_and_special_tokens_fails_before_reading() -> None:
    corpus, consumed = untouched_corpus()
    with pytest.raises(ValueError, match=r"vocab_size 257 is too small: .* 2 special tokens alone take 258"):
        hf_bpe.train(corpus, 257, special_tokens=["<a>", "<b>"], show_progress=False)
    with pytest.raises(ValueError, match="vocab_size 100 is too small"):
        hf_bpe.train(corpus, 100, show_progress=False)
    with pytest.raises(TypeError, match="vocab_size must be an int"):
        hf_bpe.train(corpus, "1000", show_progress=False)  # type: ignore[arg-type]
    assert consumed == []
    with pytest.raises(ValueError, match="vocab_size 256 is too small"):
        train_from_counts(PieceCounts({"ab": 1}, special_tokens=["<s>"]), 256)


def test_bad_special_tokens_and_patterns_fail_before_reading() -> None:
    corpus, consumed = untouched_corpus()
    with pytest.raises(ValueError, match="given more than once"):
        hf_bpe.train(corpus, 300, special_tokens=["<a>", "<a>"], show_progress=False)
    with pytest.raises(ValueError, match="empty string"):
        hf_bpe.train(corpus, 300, special_tokens=[""], show_progress=False)
    with pytest.raises(ValueError, match="does not compile"):
        hf_bpe.train(corpus, 300, pattern="(unclosed", show_progress=False)
    assert consumed == []


def test_empty_corpora_are_refused(tmp_path: Path) -> None:
    import datasets

    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"")
    for corpus in ([], iter([]), empty, [empty, empty], datasets.Dataset.from_dict({"text": []})):
        with pytest.raises(ValueError, match="empty"):
            hf_bpe.train(corpus, 300, show_progress=False)
    with pytest.raises(ValueError, match="empty"):
        hf_bpe.train(["", "<s>"], 300, special_tokens=["<s>"], show_progress=False)


def test_a_file_that_is_not_utf8_is_named_with_the_byte_offset(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = tmp_path / "good.txt"
    good.write_text("plenty of good text\n" * 1000, encoding="utf-8")
    bad = tmp_path / "latin1.txt"
    bad.write_bytes("caf\u00e9 au lait".encode("utf-8") + b"\nna\xefve")
    with pytest.raises(ValueError, match=r"latin1\.txt: not UTF-8 text: invalid byte 0xef at byte offset 16"):
        hf_bpe.train([good, bad], 300, show_progress=True)
    assert "Counting" not in capsys.readouterr().err  # refused before counting began


def test_missing_files_and_folders_are_refused(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="nowhere.txt"):
        hf_bpe.train(tmp_path / "nowhere.txt", 300, show_progress=False)
    with pytest.raises(FileNotFoundError, match=r"pass \[text\]"):
        hf_bpe.train("a text, not a path\nwith lines", 300, show_progress=False)
    with pytest.raises(IsADirectoryError, match="is a folder"):
        hf_bpe.train(tmp_path, 300, show_progress=False)


def test_a_dataset_without_the_text_column_lists_its_columns() -> None:
    import datasets

    dataset = datasets.Dataset.from_dict({"id": [1], "content": ["text"]})
    with pytest.raises(ValueError, match=r"no column 'text'; its columns are \['id', 'content'\]"):
        hf_bpe.train(dataset, 300, show_progress=False)
    with pytest.raises(ValueError, match=r"no column 'body'.*\['id', 'content'\]"):
        hf_bpe.train(dataset.to_iterable_dataset(), 300, text_column="body", show_progress=False)
    with pytest.raises(TypeError, match="pick one"):
        hf_bpe.train(datasets.DatasetDict({"train": dataset}), 300, show_progress=False)


def test_documents_that_are_not_text_are_refused() -> None:
    with pytest.raises(TypeError, match="must yield str"):
        hf_bpe.train([b"bytes"], 300, show_progress=False)
    with pytest.raises(TypeError, match="got int"):
        hf_bpe.train(["text", 3], 300, show_progress=False)
    with pytest.raises(TypeError, match="corpus is bytes"):
        hf_bpe.train(b"raw bytes", 300, show_progress=False)
    with pytest.raises(ValueError, match="num_threads"):
        hf_bpe.train(["text"], 300, num_threads=0, show_progress=False)


def _cpu_seconds_of(pid: int) -> float:
    """The CPU time a running process has used so far (user + system, from ``/proc``)."""
    import os

    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads a process's CPU time from /proc (Linux)")
def test_ctrl_c_stops_training_promptly(tmp_path: Path) -> None:
    """Ctrl-C during training raises KeyboardInterrupt after little more work: the CPU time the
    child spends between the signal and its exit is a small part of what the whole job would cost
    (CPU time, not the clock: a busy machine slows the child but does not make it work more)."""
    import signal
    import subprocess
    import sys
    import time

    script = tmp_path / "long_training.py"
    script.write_text(
        "import random, signal, time, warnings, hf_bpe\n"
        # A shell starts background jobs with SIGINT ignored, and Python keeps an inherited SIG_IGN.
        "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
        "warnings.simplefilter('ignore')\n"
        "random.seed(0)\n"
        "words = [''.join(random.choices('abcdefghijklmnopqrstuvwxyz', k=random.randint(3, 12))) for _ in range(400_000)]\n"
        "print('ready', flush=True)\n"
        "try:\n"
        "    hf_bpe.train([' '.join(words)] * 2, 10_000_000, show_progress=False)\n"
        "    print('finished', time.process_time(), flush=True)\n"
        "except KeyboardInterrupt:\n"
        "    print('interrupted', time.process_time(), flush=True)\n",
        encoding="utf-8",
    )
    # Uninterrupted, the job costs some 8 CPU seconds after 'ready', so the signal lands while it trains.
    child = subprocess.Popen(
        [sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert child.stdout is not None
    assert child.stdout.readline().strip() == "ready"
    ready = _cpu_seconds_of(child.pid)
    while _cpu_seconds_of(child.pid) < ready + 0.5:  # half a CPU second into training
        time.sleep(0.01)
    at_signal = _cpu_seconds_of(child.pid)
    child.send_signal(signal.SIGINT)
    out, err = child.communicate(timeout=600)  # a guard against a hang only
    outcome, _, at_exit = out.strip().partition(" ")
    assert outcome == "interrupted", f"stdout {out!r}, stderr {err[-2000:]!r}"
    after_signal = float(at_exit) - at_signal
    assert after_signal < 2.0, f"the child used {after_signal:.2f} CPU s after Ctrl-C"


def test_counting_a_file_streams_it(tmp_path: Path) -> None:
    """Memory grows with the distinct pieces, not with the file: counting 40 MB of repeated text
    raises the peak resident size by far less than the file's size."""
    import subprocess
    import sys
    from pydoc_data.topics import topics

    text = "\n".join(topics[name] for name in sorted(topics))
    path = tmp_path / "big.txt"
    with path.open("w", encoding="utf-8") as file:
        for _ in range(40_000_000 // len(text) + 1):
            file.write(text)
    script = (
        "import sys\nfrom hf_bpe.train import count_pieces\n"
        f"before = {PEAK_RSS_KB}\n"
        "counts = count_pieces(sys.argv[1], show_progress=False)\n"
        f"after = {PEAK_RSS_KB}\n"
        "print(len(counts), (after - before) // 1024)\n"
    )
    done = subprocess.run([sys.executable, "-c", script, str(path)], capture_output=True, text=True, check=True)
    distinct, grown_mib = map(int, done.stdout.split())
    assert distinct < 60_000
    assert grown_mib < 20, f"counting a {path.stat().st_size >> 20} MiB file grew the peak by {grown_mib} MiB"


def test_many_special_tokens_cost_grows_linearly() -> None:
    """Checking special tokens for repeats is one pass: 10x the tokens costs about 10x the CPU time
    (a pairwise check costs 100x; 100,000 tokens took minutes)."""
    def prepare(size: int) -> Callable[[], object]:
        specials = [f"<|s{i}|>" for i in range(size)]
        return lambda: hf_bpe.train(["aaabdaaabac hello"] * 4, 256 + size + 4, special_tokens=specials,
                                    show_progress=False)

    linear, report = cost.cost_grows_linearly(prepare, 2_000, 20_000)
    assert linear, f"special tokens: {report}"
    with pytest.raises(ValueError, match=r"given more than once: \['<\|s7\|>'\]"):
        hf_bpe.train(["abc"], 300, special_tokens=[f"<|s{i}|>" for i in [*range(20_000), 7]])


# ------------------------------------------------------------------------------ memory budget


def unique_words(count: int) -> list[str]:
    """Documents of words never seen before (a table of distinct pieces grows with them), with a
    few common words repeated between them."""
    return [f"id{index:x} the cat sat " for index in range(count)]


def test_max_pieces_bounds_the_table_and_says_what_it_dropped() -> None:
    corpus = unique_words(20_000)
    exact = count_pieces(corpus, show_progress=False)
    counts = count_pieces(corpus, max_pieces=1000, show_progress=False)
    assert exact.pruned == 0 and len(exact) > 5000
    assert 0 < len(counts) <= 1000
    assert counts.pruned > 0 and counts.total + counts.pruned == exact.total
    assert counts[" cat"] > 0.95 * exact[" cat"]  # the common pieces survive, nearly whole
    restored = pickle.loads(pickle.dumps(counts))
    assert restored == counts and restored.pruned == counts.pruned
    assert (counts + count_pieces(["a b"], show_progress=False)).pruned == counts.pruned


def test_training_within_max_pieces_is_exact_and_pruned_training_warns() -> None:
    corpus = unique_words(3000)
    exact = hf_bpe.train(corpus, 300, show_progress=False)
    assert hf_bpe.train(corpus, 300, max_pieces=100_000, show_progress=False).merges == exact.merges
    with pytest.warns(hf_bpe.errors.PrunedCountsWarning, match="occurrences of rare pieces"):
        pruned = hf_bpe.train(corpus, 300, max_pieces=200, show_progress=False)
    assert pruned.n_vocab == 300
    with pytest.raises(ValueError, match="max_pieces must be an int of at least 2"):
        hf_bpe.train(corpus, 300, max_pieces=0, show_progress=False)
    with pytest.raises(ValueError, match="max_pieces is not taken"):
        hf_bpe.train(corpus, 300, max_pieces=100, tie_break="minbpe", show_progress=False)
