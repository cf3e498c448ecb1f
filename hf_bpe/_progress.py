"""Progress bars: tqdm's (``tqdm.auto``, a notebook widget in Jupyter), without an estimate of the
time left while it means nothing."""

from __future__ import annotations

from typing import Any

ETA_AFTER = 0.25
"""A bar shows the time left once this fraction of its total is done: the first steps are no guide
(merging's first merges change the most pairs; a file's first blocks wait for the threads to start)."""


def progress_bar(**options: Any) -> Any:
    """A tqdm bar (``tqdm.auto``) with ``options`` that shows elapsed time and rate but no estimate of
    the time left until :data:`ETA_AFTER` of its total is done (tqdm's estimate from the first steps
    was off by a factor of fifty on merging)."""
    from tqdm.auto import tqdm  # type: ignore[import-untyped]

    class Patient(tqdm):  # type: ignore[misc, valid-type]
        @property
        def format_dict(self) -> dict[str, Any]:
            shown: dict[str, Any] = super().format_dict
            total = shown.get("total")
            if total and shown.get("n", 0) < ETA_AFTER * total and shown.get("bar_format") is None:
                shown["bar_format"] = "{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}, {rate_fmt}{postfix}]"
            return shown

    return Patient(**options)
