"""Input files of hf_bpe.distributed: expansion of paths and patterns, and its cost."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import cost
import pytest

from hf_bpe.distributed._inputs import expand

FILES = 20_000


def test_expanding_many_files_costs_linear_time(tmp_path: Path) -> None:
    """Finding repeated inputs is one pass: 20,000 files cost about 10x what 2,000 do (a pairwise check
    of the list costs 100x, minutes at this size)."""
    paths = [tmp_path / f"part-{number:05d}.txt" for number in range(FILES)]
    for path in paths:
        path.touch()

    def prepare(size: int) -> Callable[[], object]:
        return lambda: expand(paths[:size])

    linear, report = cost.cost_grows_linearly_in_steps(prepare, 2_000, (6_000, FILES))
    assert linear, f"expanding inputs: {report}"
    assert expand([str(tmp_path / "*.txt")]) == paths
    with pytest.raises(ValueError, match=r"more than once: \['.*part-00007.txt'\]"):
        expand([*paths, paths[7]])
