"""Progress bars for the long commands (bench, canary live, anomaly score), drawn with tqdm.

A bar is drawn on stderr only where a person watches it: the stream is a terminal, and neither
``--json``, ``--no-progress`` (or bench's ``--quiet``) nor ``--log-level debug`` is given.
Elsewhere (logs, pipes, CI, JSON output) every method is a no-op, so stdout and the logs carry
exactly what they would without it.
"""

from __future__ import annotations

import argparse
import io
import os
import sys
from types import TracebackType
from typing import Final, TextIO

from tqdm import tqdm

__all__ = ["ProgressBar", "add_progress_argument", "bar_for", "progress_enabled"]

# A bar over seconds of load: "12/60 s", not tqdm's "12.0/60 [00:12<00:48, 1.00s/s]".
SECONDS_FORMAT: Final = "{l_bar}{bar}| {n:.0f}/{total:.0f} s{postfix}"


def add_progress_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--no-progress", action="store_true",
                        help="no progress bar (it is shown only when stderr is a terminal)")


def progress_enabled(stream: TextIO, *, json_output: bool = False, disabled: bool = False,
                     log_oriented: bool = False) -> bool:
    """Whether a bar belongs on ``stream``: a terminal, and no option that asks for quiet."""
    if disabled or json_output or log_oriented:
        return False
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


def _screen(stream: TextIO) -> tuple[int, int]:
    """The terminal's columns and lines; 80x24 where it reports none (a fresh
    pseudo-terminal says 0x0, which would hide the bar)."""
    try:
        size = os.get_terminal_size(stream.fileno())
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        return 80, 24
    return size.columns or 80, size.lines or 24


class ProgressBar:
    """A bar on ``stream`` counting to ``total`` (None: a counter), or nothing when disabled."""

    def __init__(self, total: float | None, description: str, *, enabled: bool,
                 unit: str = "it", stream: TextIO | None = None) -> None:
        self._bar: tqdm[None] | None = None
        if enabled:
            stream = stream if stream is not None else sys.stderr
            columns, lines = _screen(stream)
            self._bar = tqdm(total=total, desc=description, unit=unit, leave=True,
                             file=stream, ncols=columns, nrows=lines, mininterval=0.1,
                             bar_format=SECONDS_FORMAT if unit == "s" and total else None)

    @property
    def enabled(self) -> bool:
        return self._bar is not None

    def advance(self, amount: float = 1) -> None:
        if self._bar is not None:
            self._bar.update(amount)

    def update_to(self, position: float, detail: str = "") -> None:
        """Move to ``position`` (seconds elapsed, say) with ``detail`` after the bar."""
        if self._bar is None:
            return
        if detail:
            self._bar.set_postfix_str(detail, refresh=False)
        if self._bar.total is not None:
            position = min(position, self._bar.total)
        self._bar.update(position - self._bar.n)

    def write(self, line: str) -> None:
        """A line above the bar (only while the bar is shown)."""
        if self._bar is not None:
            self._bar.write(line, file=self._bar.fp)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()  # the final state, then a newline
            self._bar = None

    def __enter__(self) -> ProgressBar:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.close()


def bar_for(args: argparse.Namespace, total: float | None, description: str,
            unit: str = "it", stream: TextIO | None = None) -> ProgressBar:
    """A bar for a command run with ``args``: off under --json, --no-progress, --quiet,
    --log-level debug, or when the stream (stderr) is not a terminal."""
    stream = stream if stream is not None else sys.stderr
    enabled = progress_enabled(
        stream, json_output=bool(getattr(args, "json", False)),
        disabled=bool(getattr(args, "no_progress", False) or getattr(args, "quiet", False)),
        log_oriented=str(getattr(args, "log_level", "INFO")).upper() == "DEBUG")
    return ProgressBar(total, description, enabled=enabled, unit=unit, stream=stream)
