"""Run Python with standard error on a real terminal (a pseudo-terminal), to see what a user would see."""

from __future__ import annotations

import fcntl
import os
import pty
import struct
import subprocess
import sys
import termios


def on_a_terminal(code: str | list[str], delay: str | None = None) -> bytes:
    """What ``python -c code`` (or ``python *code``) writes to standard error when that is an
    80-column terminal; ``delay`` sets HF_BPE_PROGRESS_DELAY."""
    controller, terminal = pty.openpty()
    fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    environment = {key: value for key, value in os.environ.items() if key != "HF_BPE_PROGRESS_DELAY"}
    if delay is not None:
        environment["HF_BPE_PROGRESS_DELAY"] = delay
    command = [sys.executable, "-c", code] if isinstance(code, str) else [sys.executable, *code]
    try:
        process = subprocess.Popen(command, stderr=terminal, stdout=subprocess.DEVNULL, env=environment)
    finally:
        os.close(terminal)
    written = b""
    try:
        while block := os.read(controller, 4096):
            written += block
    except OSError:  # EIO: the terminal's other end is closed
        pass
    finally:
        os.close(controller)
    assert process.wait(timeout=120) == 0, written
    return written
