"""Checked-in generated files (Prometheus rules, Grafana dashboards): write them, or check
that what is checked in equals a fresh generation (``--check``, for CI)."""

from __future__ import annotations

import difflib
import sys
from collections.abc import Mapping
from pathlib import Path


def write_output(out: str, text: str) -> None:
    """A command's document to the file ``out``, or to stdout for "-" (the note on stderr,
    so a pipe gets only the document)."""
    if out == "-":
        sys.stdout.write(text)
        return
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    Path(out).write_text(text, encoding="utf-8")
    print(f"wrote {out}", file=sys.stderr)


def write_generated(out: Path, files: Mapping[str, str]) -> None:
    for name, text in files.items():
        path = out / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        print(f"wrote {path}")


def check_generated(out: Path, files: Mapping[str, str], command: str) -> int:
    """0 when every file under ``out`` equals its generation; else 1, with a diff of each."""
    stale = 0
    for name, text in files.items():
        path = out / name
        current = path.read_text() if path.exists() else ""
        if current == text:
            continue
        stale += 1
        sys.stdout.writelines(difflib.unified_diff(
            current.splitlines(keepends=True), text.splitlines(keepends=True),
            fromfile=str(path), tofile=f"{path} (generated)"))
    if stale:
        print(f"{command} --check: {stale} file(s) out of date; run `{command}` and commit "
              "the result", file=sys.stderr)
        return 1
    print(f"{', '.join(str(out / n) for n in files)}: current")
    return 0
