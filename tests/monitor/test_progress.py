"""The progress bar: drawn on a terminal, silent in pipes, logs and with --json."""

from __future__ import annotations

import argparse
import io
import os
import pty
import select
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from monitor.progress import ProgressBar, bar_for, progress_enabled
from tests.monitor.anomaly.test_cli import write_series


class Terminal(io.StringIO):
    """A stream that says it is a terminal."""

    def isatty(self) -> bool:
        return True


@pytest.fixture
def pty_pair() -> Iterator[tuple[int, int]]:
    leader, follower = pty.openpty()
    yield leader, follower
    for fd in (leader, follower):
        os.close(fd)


def read_all(fd: int) -> bytes:
    chunks = []
    while select.select([fd], [], [], 0.5)[0]:
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # the follower side closed
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks)


def count_to_ten(stream: io.TextIOBase | io.StringIO, **flags: object) -> None:
    args = argparse.Namespace(**flags)
    with bar_for(args, 10, "counting", stream=stream) as bar:  # type: ignore[arg-type]
        for _ in range(10):
            bar.advance()


def test_nothing_is_written_where_the_stream_is_not_a_terminal() -> None:
    stream = io.StringIO()
    count_to_ten(stream)
    assert stream.getvalue() == ""


@pytest.mark.parametrize("flags", [{"json": True}, {"no_progress": True}, {"quiet": True},
                                   {"log_level": "DEBUG"}],
                         ids=["--json", "--no-progress", "--quiet", "--log-level debug"])
def test_nothing_is_written_on_a_terminal_when_an_option_asks_for_quiet(
        flags: dict[str, object]) -> None:
    stream = Terminal()
    count_to_ten(stream, **flags)
    assert stream.getvalue() == ""


def test_a_terminal_gets_a_bar_rewritten_in_place_and_a_final_newline() -> None:
    stream = Terminal()
    count_to_ten(stream)
    text = stream.getvalue()
    assert text.startswith("\r") and text.endswith("\n")
    assert "counting" in text and "10/10" in text.rsplit("\r", 1)[-1]


def test_a_pseudo_terminal_is_a_terminal(pty_pair: tuple[int, int]) -> None:
    leader, follower = pty_pair
    with open(follower, "w", closefd=False) as stream:
        assert progress_enabled(stream)
        assert not progress_enabled(stream, json_output=True)
        with ProgressBar(4, "steps", enabled=progress_enabled(stream), stream=stream) as bar:
            bar.update_to(2.5, "sent 3")
            bar.update_to(9)  # held at the total
        stream.flush()
    shown = read_all(leader)
    assert b"\r" in shown and b"sent 3" in shown and b"100%" in shown and shown.endswith(b"\n")


def test_a_disabled_bar_ignores_every_call() -> None:
    bar = ProgressBar(None, "nothing", enabled=False)
    bar.advance()
    bar.update_to(3, "x")
    bar.write("line")
    bar.close()
    assert not bar.enabled


def score(tmp_path: Path, name: str, stderr: int | None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "monitor.cli", "anomaly", "score",
         "--input", str(tmp_path / "in.csv"), "--output", str(tmp_path / name)],
        stdout=subprocess.PIPE, stderr=stderr, timeout=120, check=True,
        env=os.environ | {"PYTHONPATH": str(Path(__file__).parents[2])})


def test_anomaly_score_shows_a_bar_under_a_terminal_and_writes_the_same_scores(
        tmp_path: Path, pty_pair: tuple[int, int]) -> None:
    values = 100 * (1 + 0.03 * np.random.default_rng(0).standard_normal(300))
    write_series(tmp_path / "in.csv", values)
    leader, follower = pty_pair
    on_terminal = score(tmp_path, "tty.csv", follower)
    shown = read_all(leader).decode(errors="replace")
    piped = score(tmp_path, "pipe.csv", subprocess.PIPE)

    assert "scoring" in shown and "300/300" in shown and "\r" in shown
    assert "scoring" not in piped.stderr.decode() and "\r" not in piped.stderr.decode()
    assert on_terminal.stdout == piped.stdout
    assert (tmp_path / "tty.csv").read_bytes() == (tmp_path / "pipe.csv").read_bytes()


def test_a_sweep_shows_a_bar_per_step_and_a_line_when_each_ends(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from monitor.loadgen.cli import SweepBars
    from monitor.loadgen.runner import Progress

    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    with SweepBars(argparse.Namespace(quiet=False, no_progress=False), 10.0) as steps:
        for rate in (1.0, 2.0):
            steps.show(rate, 4.0, Progress(sent=3, done=2))
            steps.show(rate, 10.0, Progress(sent=5, done=5))
            steps.line(f"rate {rate:g} req/s: done")
    text = terminal.getvalue()
    assert "step 1 at 1 req/s" in text and "step 2 at 2 req/s" in text
    assert "10/10 s, sent 5 done 5 in flight 0 failed 0" in text
    assert text.count("100%") == 2 and "rate 2 req/s: done\n" in text
