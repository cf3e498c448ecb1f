"""``hf-bpe count`` against ``encode_ordinary_batch`` on the same text: MB/s of each, and the ratio.

The shared corpora are cut into documents of 1-10 KB (``_common.load_documents``) and written, one
after the other with a newline between, to a temporary file. Timed, best of ``--repeat`` with the
contenders taking turns:

- ``encode_ordinary_batch(documents)`` on ``--threads`` threads (the batch path's MB/s);
- ``hf-bpe count ENCODING --file FILE`` (the whole file: read, cut at safe places, encoded in parallel),
  run in this process through ``hf_bpe.cli.main`` with the encoding already loaded;
- ``hf-bpe count ENCODING --lines --file FILE`` (every line a text, batches of lines).

The whole-file count is checked against ``len(encode_ordinary(contents))`` first. A separate line gives
the command's wall time as a new process (``python -m hf_bpe count``: interpreter start-up and loading
the encoding included), for reference.

    python benchmarks/cli_count.py --repeat 5
"""

from __future__ import annotations

import argparse
import contextlib
import io
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import MB, SHARED_CORPORA, THREADS_DEFAULT, best_seconds_interleaved, load_documents

import hf_bpe
from hf_bpe.cli import main as cli_main


def count_command(arguments: list[str]) -> int:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert cli_main(arguments) == 0
    return int(out.getvalue())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path, nargs="*", default=[SHARED_CORPORA])
    parser.add_argument("--mb", type=float, default=1000, help="at most this many MB of the corpora")
    parser.add_argument("--encodings", nargs="*", default=["cl100k_base", "o200k_base", "gpt2"])
    parser.add_argument("--threads", type=int, default=THREADS_DEFAULT)
    parser.add_argument("--repeat", type=int, default=5)
    options = parser.parse_args()

    described, documents = load_documents(options.corpus, options.mb, seed=0)
    text = "\n".join(documents)
    size = len(text.encode("utf-8"))
    print(f"input: {described}; {len(documents):,} documents, {size / MB:.1f} MB as one file; "
          f"{options.threads} threads; best of {options.repeat}")
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "corpus.txt"
        path.write_text(text, encoding="utf-8", newline="")
        print("| encoding | encode_ordinary_batch MB/s | count (whole file) MB/s | ratio | count --lines MB/s | ratio "
              "| new process, s |")
        print("|---|---:|---:|---:|---:|---:|---:|")
        for name in options.encodings:
            model = hf_bpe.get_encoding(name)
            whole = ["count", name, "--file", str(path), "--num-threads", str(options.threads)]
            lines = whole + ["--lines"]
            assert count_command(whole) == len(model.encode_ordinary(text)), name
            runs = {  # each called in this iteration only
                "batch": lambda: model.encode_ordinary_batch(documents, num_threads=options.threads),  # noqa: B023
                "whole": lambda: count_command(whole),  # noqa: B023
                "lines": lambda: count_command(lines),  # noqa: B023
            }
            best = best_seconds_interleaved(runs, options.repeat)
            started = time.perf_counter()
            subprocess.run([sys.executable, "-m", "hf_bpe", *whole], check=True, capture_output=True)
            process = time.perf_counter() - started
            speed = {key: size / seconds / MB for key, seconds in best.items()}
            print(f"| {name} | {speed['batch']:.1f} | {speed['whole']:.1f} | {speed['whole'] / speed['batch']:.2f}x "
                  f"| {speed['lines']:.1f} | {speed['lines'] / speed['batch']:.2f}x | {process:.2f} |")


if __name__ == "__main__":
    main()
