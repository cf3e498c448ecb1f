"""Every code block of README.md and docs/*.md runs as a reader would run it, and the pages stay short.

A page's fenced blocks run in order in a fresh temporary folder:

- ``python`` blocks in one interpreter per page, fed line by line as the interactive interpreter reads a
  paste (a compound statement ends at a blank line), so later blocks see earlier names; a block that
  starts with ``>>>`` is a doctest whose output must match (``...`` matches anything);
- ``sh`` and ``bash`` blocks with ``bash -euo pipefail``, the Python running the suite first on ``PATH``
  (its ``hf-bpe`` and ``python``);
- ``console`` blocks: each ``$ `` command, its standard output compared with the lines after it.

A block that cannot run in a test (an install, a server, a cluster) carries ``<!-- not run: REASON -->``
on the line before it; each one is listed as a skipped test with its reason. Blocks in another language
(``text``, ``json``...) are shown, not run; a fence without a language fails. Nothing reaches the
internet: rank files come from the test extra's packages (``HF_BPE_ENCODINGS_URL`` is empty) and the
Hugging Face libraries run offline.
"""

from __future__ import annotations

import doctest
import json
import os
import re
import select
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
README_MAX_LINES = 150
DOCS_MAX_LINES = 300

RUN = {"python", "sh", "bash", "console"}
SHOWN = {"text", "json", "toml", "html", "markdown"}
BLOCK_TIMEOUT = 600
"""Seconds one block may take before the page fails (a hang, not a slow machine)."""

FENCE = re.compile(r"^(?P<indent>\s*)```(?P<language>[\w-]*)\s*$")
NOT_RUN = re.compile(r"^\s*<!--\s*not run:\s*(?P<reason>.+?)\s*-->\s*$")


@dataclass(frozen=True)
class Block:
    page: str
    line: int
    language: str
    code: str
    not_run: str | None

    def __str__(self) -> str:
        first = next((line for line in self.code.splitlines() if line.strip()), "")
        return f"{self.page} line {self.line} ({self.language}: {first[:60]!r})"


def blocks(page: Path) -> list[Block]:
    """The fenced blocks of ``page``, each with the reason of a ``not run`` mark on the line before it."""
    name = page.relative_to(ROOT).as_posix()
    lines = page.read_text(encoding="utf-8").splitlines()
    found = []
    index = 0
    while index < len(lines):
        opening = FENCE.match(lines[index])
        if not opening:
            index += 1
            continue
        start = index
        index += 1
        body = []
        while index < len(lines) and lines[index].strip() != "```":
            body.append(lines[index])
            index += 1
        if index == len(lines):
            raise AssertionError(f"{name} line {start + 1}: a code block is never closed")
        index += 1
        previous = next((line for line in reversed(lines[:start]) if line.strip()), "")
        mark = NOT_RUN.match(previous)
        found.append(Block(name, start + 1, opening["language"], textwrap.dedent("\n".join(body)) + "\n",
                           mark["reason"] if mark else None))
    return found


ALL = [block for page in PAGES for block in blocks(page)]
SKIPPED = [block for block in ALL if block.language in RUN and block.not_run]


def test_pages_are_short() -> None:
    readme = len((ROOT / "README.md").read_text(encoding="utf-8").splitlines())
    assert readme <= README_MAX_LINES, f"README.md has {readme} lines, more than {README_MAX_LINES}"
    for page in PAGES[1:]:
        count = len(page.read_text(encoding="utf-8").splitlines())
        assert count <= DOCS_MAX_LINES, f"{page.name} has {count} lines, more than {DOCS_MAX_LINES}"


def test_every_block_says_its_language() -> None:
    unknown = [f"{block} has language {block.language!r}" for block in ALL if block.language not in RUN | SHOWN]
    assert not unknown, ("every fence names one of " + ", ".join(sorted(RUN | SHOWN)) + " (a block that is "
                         "not code: text):\n" + "\n".join(unknown))
    marked = [str(block) for block in ALL if block.not_run and block.language not in RUN]
    assert not marked, "a 'not run' mark on a block that is never run anyway:\n" + "\n".join(marked)


DATE = re.compile(r"\b20\d\d-\d\d-\d\d\b")
COMMIT = re.compile(r"(?<![\w/.#-])(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}(?![\w-])")
ISSUE = re.compile(r"(?<![\w&])#\d+\b")


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.relative_to(ROOT).as_posix())
def test_pages_describe_the_product_not_its_history(page: Path) -> None:
    """Dated results, commits and machines belong to BENCHMARKS.md; the pages link to it."""
    text = page.read_text(encoding="utf-8")
    for pattern, what in ((DATE, "a date"), (COMMIT, "a commit id"), (ISSUE, "an issue number")):
        hits = sorted({match.group() for match in pattern.finditer(text)})
        assert not hits, f"{page.name} holds {what} ({', '.join(hits)}): BENCHMARKS.md keeps dated results"


LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
PATH = re.compile(r"`((?:benchmarks|conversion|crates|docs|hf_bpe|model_cards|tests)/[\w./-]*)`")
"""A path of the repository in backticks (a file or folder the text points at)."""


def anchors(page: Path) -> set[str]:
    """The anchors GitHub gives ``page``'s headings: lower case, punctuation dropped, spaces as hyphens."""
    text = page.read_text(encoding="utf-8")
    text = re.sub(r"^```.*?^```", "", text, flags=re.DOTALL | re.MULTILINE)
    headings = re.findall(r"^#+\s+(.*?)\s*$", text, flags=re.MULTILINE)
    return {re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-") for heading in headings}


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.relative_to(ROOT).as_posix())
def test_links_lead_somewhere(page: Path) -> None:
    """Every relative link names a file of the repository and, after ``#``, one of its headings; every
    repository path in backticks exists."""
    broken = []
    for target in LINK.findall(page.read_text(encoding="utf-8")):
        if re.match(r"[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not linked.exists():
            broken.append(f"{target}: no file {linked.relative_to(ROOT) if linked.is_relative_to(ROOT) else linked}")
        elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
            broken.append(f"{target}: {linked.name} has no heading with the anchor #{anchor}")
    for path in PATH.findall(page.read_text(encoding="utf-8")):
        if not (ROOT / path).exists():
            broken.append(f"`{path}`: no such file or folder in the repository")
    assert not broken, f"{page.name} has broken links:\n" + "\n".join(broken)


@pytest.mark.parametrize("block", SKIPPED, ids=lambda block: f"{block.page}:{block.line}")
def test_blocks_not_run(block: Block) -> None:
    """The blocks marked ``not run``, listed with their reasons (each shows as a skip)."""
    pytest.skip(f"{block}: not run: {block.not_run}")


RUNNER = r'''
import code, contextlib, doctest, io, json, os, sys, traceback
responses = os.fdopen(int(sys.argv[1]), "w")
namespace = {"__name__": "__main__"}

class Paste(code.InteractiveConsole):
    failure = None
    def showtraceback(self):
        kind, error, frames = sys.exc_info()
        self.failure = "".join(traceback.format_exception(kind, error, frames.tb_next))
    def showsyntaxerror(self, filename=None, **kwargs):
        self.failure = "".join(traceback.format_exception_only(*sys.exc_info()[:2]))

def run(block):
    if block["code"].lstrip().startswith(">>>"):
        test = doctest.DocTestParser().get_doctest(block["code"], namespace, block["name"], block["page"],
                                                   block["line"])
        runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
        report = io.StringIO()
        runner.run(test, out=report.write, clear_globs=False)
        namespace.update(test.globs)
        return report.getvalue() if runner.failures else None
    paste = Paste(namespace, filename=block["name"])
    for line in block["code"].splitlines() + [""]:
        paste.push(line)
        if paste.failure:
            return paste.failure
    return None

for request in sys.stdin:
    block = json.loads(request)
    try:
        failure = run(block)
    except SystemExit as stop:
        failure = f"SystemExit: {stop.code}"
    sys.stdout.flush()
    sys.stderr.flush()
    responses.write(json.dumps({"failure": failure}) + "\n")
    responses.flush()
'''


class Python:
    """One interpreter for a page's ``python`` blocks, fed a block at a time."""

    def __init__(self, folder: Path, log: Path, env: dict[str, str]) -> None:
        self.log = log
        read, write = os.pipe()
        with open(log, "w", encoding="utf-8") as output:
            self.process = subprocess.Popen([sys.executable, "-u", "-c", RUNNER, str(write)], cwd=folder, env=env,
                                            stdin=subprocess.PIPE, stdout=output, stderr=subprocess.STDOUT,
                                            text=True, pass_fds=(write,))
        os.close(write)
        self.responses = os.fdopen(read, encoding="utf-8")

    def run(self, block: Block) -> str | None:
        assert self.process.stdin is not None
        request = {"code": block.code, "name": str(block), "page": block.page, "line": block.line}
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        ready, _, _ = select.select([self.responses], [], [], BLOCK_TIMEOUT)
        if not ready:
            return f"no answer within {BLOCK_TIMEOUT} s"
        answer = self.responses.readline()
        if not answer:
            return f"the interpreter exited (status {self.process.wait()})"
        failure: str | None = json.loads(answer)["failure"]
        return failure

    def output(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")[-3000:]

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.responses.close()


def shell(command: str, folder: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-euo", "pipefail", "-c", command], cwd=folder, env=env, capture_output=True,
                          text=True, timeout=BLOCK_TIMEOUT, check=False)


def console_commands(code: str) -> list[tuple[str, str]]:
    """``(command, expected output)`` for each ``$ `` line of a console block (a trailing backslash
    continues a command on the next line)."""
    found: list[tuple[str, list[str]]] = []
    lines = iter(code.splitlines())
    for line in lines:
        if line.startswith("$ "):
            command = line[2:]
            while command.endswith("\\"):
                command = command[:-1] + "\n" + next(lines, "")
            found.append((command, []))
        elif found:
            found[-1][1].append(line)
        elif line.strip():
            raise AssertionError(f"a console block starts with output, not a '$ ' command: {line!r}")
    return [(command, "\n".join(output).strip("\n") + "\n") for command, output in found]


CHECKER = doctest.OutputChecker()
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


def run_shell_block(block: Block, folder: Path, env: dict[str, str]) -> str | None:
    if block.language != "console":
        done = shell(block.code, folder, env)
        if done.returncode:
            return f"exit status {done.returncode}\n{done.stdout[-2000:]}{done.stderr[-3000:]}"
        return None
    for command, expected in console_commands(block.code):
        done = shell(command, folder, env)
        if done.returncode:
            return f"$ {command}\nexit status {done.returncode}\n{done.stdout[-2000:]}{done.stderr[-3000:]}"
        got = "\n".join(line.rstrip() for line in done.stdout.strip("\n").splitlines()) + "\n"
        if not CHECKER.check_output(expected, got, FLAGS):
            return f"$ {command}\nexpected:\n{expected}got:\n{got}{done.stderr[-2000:]}"
    return None


def environment(home: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env.update(HF_BPE_ENCODINGS_URL="", HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", HF_HOME=str(home / "hf"),
               MPLBACKEND="Agg", NO_COLOR="1", PYTHONDONTWRITEBYTECODE="1", TRANSFORMERS_VERBOSITY="error")
    return env


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.relative_to(ROOT).as_posix())
def test_page_runs(page: Path, tmp_path: Path) -> None:
    runnable = [block for block in blocks(page) if block.language in RUN and not block.not_run]
    if not runnable:
        pytest.skip(f"{page.name} has no blocks to run")
    folder = tmp_path / "work"
    folder.mkdir()
    env = environment(tmp_path)
    python: Python | None = None
    try:
        for number, block in enumerate(runnable, 1):
            if block.language == "python":
                python = python or Python(folder, tmp_path / "python.log", env)
                failure = python.run(block)
                if failure:
                    failure += "\nthe page's Python output, last lines:\n" + python.output()
            else:
                failure = run_shell_block(block, folder, env)
            if failure is not None:
                pytest.fail(f"block {number} of {len(runnable)}, {block}, failed:\n{failure}", pytrace=False)
    finally:
        if python is not None:
            python.close()
