"""Coverage-guided fuzzing of hf_bpe, bounded in time, from pytest.

``test_fuzzing_finds_no_crash`` (``slow``) runs atheris (libFuzzer for Python, from PyPI) on
``tests/support/fuzz_targets.py``'s ``all`` target, each input picking one target (a model built from fuzzed
ranks and merges, a SentencePiece model, a split pattern, a tokenizer file of any format, a count
table), for 45 s times ``HF_BPE_TEST_SCALE``, seeded with valid inputs and the committed corpus.

- At the default scale (what CI runs) it fuzzes the core ``pip install`` built: libFuzzer's guidance
  comes from hf_bpe's and conversion's Python code (about 1,000 inputs a second on 2 cores); the Rust
  core runs on every input, without coverage of its own.
- At ``HF_BPE_TEST_SCALE >= 5`` it first builds the core with coverage instrumentation (cargo, stable
  Rust, ``-Cpasses=sancov-module``; 2-3 minutes) and preloads atheris' libFuzzer runtime, so the Rust
  code's own branches and comparisons guide the fuzzer (about 140 inputs a second, ten times the
  coverage). ``HF_BPE_FUZZ_ROOT=DIR`` uses an instrumented build already made (a folder with
  ``hf_bpe/`` and the instrumented ``_core``), at any scale.

An input that crashes (an assertion of a target, an ``InternalError``, any undocumented exception, a
hang over 20 s, over 2 GB of memory) fails the test with the input; it then belongs in
``fuzz_corpus/<target>/``, which ``test_fuzz_corpus_replays`` (not slow) runs on every test run, with
the seeds, without atheris.
"""

from __future__ import annotations

import base64
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Any

import fuzz_targets
import pytest
from suite import scale_factor, scaled

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
CORPUS = HERE / "fuzz_corpus"
FUZZ_SECONDS = scaled(25, 10)  # 25 s in CI (the suite's ~12 minute budget); HF_BPE_TEST_SCALE=N fuzzes 25 N s
NATIVE_FROM_SCALE = 5

SANCOV_FLAGS = (
    "-Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=3 "
    "-Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table "
    "-Cllvm-args=-sanitizer-coverage-trace-compares"
)
"""What cargo-fuzz passes to rustc for libFuzzer's coverage (without a sanitizer: stable Rust)."""


def corpus_inputs() -> list[tuple[str, Path]]:
    """The committed corpus: ``(target, file)`` for every file in ``fuzz_corpus/<target>/``."""
    return sorted((folder.name, path) for folder in CORPUS.iterdir() if folder.is_dir()
                  for path in sorted(folder.iterdir()) if path.is_file())


@pytest.mark.parametrize(("target", "path"), corpus_inputs(), ids=lambda value: getattr(value, "name", value))
def test_fuzz_corpus_replays(target: str, path: Path) -> None:
    """Inputs the fuzzer found (and hand-made regressions) pass their target."""
    fuzz_targets.TARGETS[target](path.read_bytes())


def test_fuzz_seeds_pass_every_target() -> None:
    for name, data in fuzz_targets.seeds("all").items():
        try:
            fuzz_targets.target_all(data)
        except Exception as error:
            raise AssertionError(f"seed {name} fails its target") from error


def _host_triple() -> str:
    info = subprocess.run(["rustc", "-vV"], capture_output=True, text=True, check=True).stdout
    return re.search(r"^host: (\S+)", info, re.MULTILINE).group(1)  # type: ignore[union-attr]


def _instrumented_root(tmp_path: Path) -> Path | None:
    """A folder with hf_bpe whose core is coverage-instrumented, or None (see the module doc)."""
    if os.environ.get("HF_BPE_FUZZ_ROOT"):
        return Path(os.environ["HF_BPE_FUZZ_ROOT"])
    if scale_factor() < NATIVE_FROM_SCALE or shutil.which("cargo") is None:
        return None
    triple = _host_triple()  # an explicit target keeps the flags off build scripts and proc macros
    target_dir = ROOT / "target" / "fuzz-coverage"
    subprocess.run(["cargo", "build", "--profile", "fast-build", "-p", "hf_bpe_python", "--features",
                    "pyo3/extension-module", "--target", triple], cwd=ROOT, check=True, timeout=3600,
                   env={**os.environ, "RUSTFLAGS": SANCOV_FLAGS, "CARGO_TARGET_DIR": str(target_dir)})
    overlay = tmp_path / "instrumented"
    shutil.copytree(ROOT / "hf_bpe", overlay / "hf_bpe", ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    for folder in ("conversion", "model_cards"):
        (overlay / folder).symlink_to(ROOT / folder)
    library = target_dir / triple / "fast-build" / "lib_core.so"
    shutil.copy(library, overlay / "hf_bpe" / f"_core{sysconfig.get_config_var('EXT_SUFFIX')}")
    return overlay


def _stats(output: str) -> dict[str, int]:
    return {name: int(value) for name, value in re.findall(r"stat::(\w+):\s+(\d+)", output)}


@pytest.mark.slow
def test_fuzzing_finds_no_crash(tmp_path: Path, record_property: Any) -> None:
    atheris = pytest.importorskip("atheris", reason="atheris (a test extra) runs the fuzzer: pip install atheris")
    seeds = tmp_path / "seeds"
    seeds.mkdir()
    for name, data in fuzz_targets.seeds("all").items():
        (seeds / name).write_bytes(data)
    for target, path in corpus_inputs():
        (seeds / f"corpus-{target}-{path.name}").write_bytes(bytes([fuzz_targets.ALL.index(target)]) + path.read_bytes())
    corpus, artifacts = tmp_path / "corpus", tmp_path / "artifacts"
    corpus.mkdir()
    artifacts.mkdir()
    env = {**os.environ, "RUST_BACKTRACE": "0"}
    instrumented = _instrumented_root(tmp_path)
    if instrumented is not None:
        env["HF_BPE_FUZZ_ROOT"] = str(instrumented)
        env["LD_PRELOAD"] = str(Path(atheris.path()) / "ubsan_with_fuzzer.so")
    # Started by a fresh interpreter rather than from this process: Linux carries a parent's peak resident
    # size into its child's (through fork and exec), and libFuzzer's -rss_limit_mb reads that peak, so the
    # fuzzer of a test process grown past the limit would report out-of-memory before its first input.
    command = [sys.executable, "-c", "import subprocess, sys; sys.exit(subprocess.call(sys.argv[1:]))",
               sys.executable, fuzz_targets.__file__, "all", f"-max_total_time={FUZZ_SECONDS}",
               "-timeout=20", "-rss_limit_mb=2048", "-print_final_stats=1", f"-artifact_prefix={artifacts}/",
               str(corpus), str(seeds)]
    done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=tmp_path,
                          timeout=FUZZ_SECONDS + 300, check=False)
    stats = _stats(done.stderr)
    record_property("fuzzing", {"native coverage": instrumented is not None, **stats})
    print(f"fuzzed {FUZZ_SECONDS} s, Rust coverage {'on' if instrumented else 'off'}: {stats}")
    crashes = sorted(artifacts.iterdir())
    if done.returncode != 0 or crashes:
        found = "\n".join(f"{path.name}: target {fuzz_targets.ALL[path.read_bytes()[0] % len(fuzz_targets.ALL)]}, "
                          f"input (without its first byte) base64 {base64.b64encode(path.read_bytes()[1:])[:400]!r}"
                          for path in crashes if path.read_bytes())
        report = done.stderr[done.stderr.find("=== Uncaught") :][:4000] if "=== Uncaught" in done.stderr else \
            done.stderr[-4000:]
        pytest.fail(f"the fuzzer found a crash (exit {done.returncode}); add the input to fuzz_corpus/<target>/:\n"
                    f"{found}\n{report}")
    assert stats.get("number_of_executed_units", 0) > 100, done.stderr[-2000:]
