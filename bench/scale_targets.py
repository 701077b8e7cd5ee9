"""N scrape targets for bench.collector_scale: one realistic vLLM V1 /metrics page, served by a
raw asyncio HTTP server on one port at /t/<i>/metrics for any i, in its own process.

The page is generated from the V1 rows of the vLLM metric catalog (real names, types, label
sets and bucket lists; model_name and engine labels). Every value line is ``coefficient * t``
(counters, histogram buckets, _sum, _count) where t is the seconds since the server started
plus the target's index, so counters keep increasing and cumulative buckets stay monotonic;
gauges get a value that moves with t.
"""

from __future__ import annotations

import asyncio
import csv
import math
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path

CATALOG = Path(__file__).resolve().parents[1] / "tests/fixtures/engines/vllm-catalog.csv"
MODEL = "meta-llama/Llama-3.1-8B-Instruct"
MAX_MODEL_LEN = 8192
SPEC_POSITIONS = 3  # num_speculative_tokens: one series per draft position
_PATH_RE = re.compile(rb"^GET /t/(\d+)/metrics[ ?]")


@dataclass(frozen=True, slots=True)
class Line:
    """One sample line: ``prefix`` is the name with labels and a space; value = coef * t
    (cumulative) or coef * (1.5 + sin(t)) / 2 (gauge)."""

    prefix: str
    coef: float
    cumulative: bool


@dataclass(frozen=True, slots=True)
class Page:
    blocks: tuple[tuple[str, tuple[Line, ...]], ...]  # (HELP+TYPE text, samples) per family

    @property
    def num_samples(self) -> int:
        return sum(len(lines) for _, lines in self.blocks)

    @property
    def num_families(self) -> int:
        return len(self.blocks)

    def render(self, t: float) -> bytes:
        out: list[str] = []
        for head, lines in self.blocks:
            out.append(head)
            for line in lines:
                if line.cumulative:
                    out.append(f"{line.prefix}{line.coef * t:.1f}\n")
                else:
                    out.append(f"{line.prefix}{line.coef * (1.5 + math.sin(t / 7)) / 2:.4g}\n")
        return "".join(out).encode()


def _is_v1(row: dict[str, str]) -> bool:
    return "vllm/v1/" in row["source_path"]


def _label_values(spec: str) -> tuple[str, list[str]]:
    """'reason (capacity|deferred)' -> ('reason', ['capacity', 'deferred'])."""
    name, _, rest = spec.partition(" (")
    if not rest:
        return name.strip(), []
    choices = rest.split(";")[0].rstrip(")")
    return name.strip(), [c.strip() for c in choices.split("|")]


def _label_specs(labels: str) -> list[str]:
    """Split 'a;b (x|y; V0: x)' at the semicolons outside parentheses."""
    specs, depth, current = [], 0, ""
    for char in labels:
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == ";" and depth == 0:
            specs.append(current)
            current = ""
        else:
            current += char
    return [*specs, current]


def _one_two_five(limit: int) -> list[float]:
    out: list[float] = []
    exponent = 0
    while True:
        for mantissa in (1, 2, 5):
            value = mantissa * 10**exponent
            if value > limit:
                return out
            out.append(float(value))
        exponent += 1


def _buckets(spec: str) -> list[float]:
    if spec.startswith("1-2-5 series"):
        return _one_two_five(MAX_MODEL_LEN)
    v1 = spec.split(" | ")[0].removeprefix("V1: ").split(" (")[0]
    return [float(b) for b in v1.split(";")]


def _label_sets(row: dict[str, str]) -> list[dict[str, str]] | None:
    """Every label set of a row's series; None for a row whose labels the catalog elides."""
    if "..." in row["labels"]:
        return None
    sets: list[dict[str, str]] = [{}]
    for spec in _label_specs(row["labels"]):
        name, choices = _label_values(spec)
        if name == "model_name":
            choices = [MODEL]
        elif name == "engine":
            choices = ["0"]
        elif name == "position":
            choices = [str(p) for p in range(SPEC_POSITIONS)]
        elif not choices:
            choices = [""]
        sets = [{**s, name: c} for s in sets for c in choices]
    return sets


def _fmt(name: str, labels: dict[str, str]) -> str:
    inner = ",".join(f'{k}="{v}"' for k, v in labels.items())
    return f"{name}{{{inner}}} "


def _histogram_lines(name: str, labels: dict[str, str], bounds: list[float],
                     seed: int) -> list[Line]:
    rate = 0.5 + seed % 7  # observations per second
    centre = len(bounds) * (0.3 + (seed % 5) / 10)
    lines: list[Line] = []
    for i, bound in enumerate([*bounds, math.inf]):
        share = 1.0 / (1.0 + math.exp(-(i - centre)))  # logistic CDF over bucket index
        share = 1.0 if math.isinf(bound) else share
        le = "+Inf" if math.isinf(bound) else f"{bound:g}"
        lines.append(Line(_fmt(f"{name}_bucket", {**labels, "le": le}), rate * share, True))
    mean = bounds[min(len(bounds) - 1, int(centre))]
    lines.append(Line(_fmt(f"{name}_sum", labels), rate * mean, True))
    lines.append(Line(_fmt(f"{name}_count", labels), rate, True))
    return lines


def _row_lines(row: dict[str, str], seed: int) -> list[Line]:
    label_sets = _label_sets(row) or []
    kind, name = row["type"], row["name"]
    lines: list[Line] = []
    for j, labels in enumerate(label_sets):
        if kind == "histogram":
            lines += _histogram_lines(name, labels, _buckets(row["buckets"]), seed + j)
        else:
            lines.append(Line(_fmt(name, labels), 1.0 + (seed * 31 + j) % 997,
                              kind == "counter"))
    return lines


def build_page(catalog: Path = CATALOG) -> Page:
    """One vLLM V1 page from the catalog's V1 rows (rows with elided labels left out)."""
    with catalog.open(encoding="utf-8") as f:
        rows = [row for row in csv.DictReader(f) if _is_v1(row) and _label_sets(row)]
    blocks = []
    for seed, row in enumerate(rows):
        base = row["name"].removesuffix("_total") if row["type"] == "counter" else row["name"]
        head = (f"# HELP {base} {row['name']} (generated from the vLLM catalog).\n"
                f"# TYPE {base} {row['type']}\n")
        blocks.append((head, tuple(_row_lines(row, seed))))
    return Page(tuple(blocks))


async def _answer(page: Page, started: float, reader: asyncio.StreamReader,
                  writer: asyncio.StreamWriter) -> None:
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            match = _PATH_RE.match(head)
            if match is None:
                writer.write(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
            else:
                t = time.monotonic() - started + int(match.group(1))
                body = page.render(t)
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\n"
                             b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
        pass
    finally:
        writer.close()


async def _serve(port: int) -> None:
    page, started = build_page(), time.monotonic()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _answer(page, started, reader, writer)

    server = await asyncio.start_server(handle, "127.0.0.1", port, backlog=4096)
    async with server:
        await server.serve_forever()


def serve(port: int, core: int | None) -> None:
    """Process entry point: serve the targets on ``port`` forever, pinned to ``core``."""
    if core is not None:
        os.sched_setaffinity(0, {core})
    asyncio.run(_serve(port))
