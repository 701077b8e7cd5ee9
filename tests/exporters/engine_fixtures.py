"""The recorded engine /metrics pages and metric catalogs in tests/fixtures/engines (where
each came from is in its README.md), inside the repository so a clone needs nothing beside it.
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass
from pathlib import Path


from tests.integration import unavailable

from exporters.exposition import ParsedPage, parse_page

FIXTURES_DIR = Path(__file__).resolve().parents[1] / "fixtures" / "engines"

# Every verbatim page, by file name.
PAGES = (
    "vllm.prom", "vllm-usage-doc.prom", "sglang.prom", "triton.prom", "trtllm.prom",
    "trtllm-v1-model.prom", "triton-summary-doc.prom", "triton-first-response-histogram-doc.prom",
    "triton-counters-doc.prom", "dcgm-exporter.prom",
)
# Catalog file of each engine table.
CATALOGS = {
    "vllm": "vllm-catalog.csv", "sglang": "sglang-catalog.csv", "tgi": "tgi-catalog.csv",
    "llamacpp": "llamacpp-catalog.csv", "triton": "triton-catalog.csv",
    "dcgm": "dcgm-exporter-catalog.csv",
}
_LABEL_RE = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*(?:\(([^)]*)\))?\s*$")


def engines_dir() -> Path:
    if FIXTURES_DIR.is_dir():
        return FIXTURES_DIR
    unavailable(f"engine fixtures not found at {FIXTURES_DIR}")


def read_fixture(name: str) -> str:
    return (engines_dir() / name).read_text(encoding="utf-8")


def parse_fixture(name: str) -> ParsedPage:
    return parse_page(read_fixture(name), name)


@dataclass(frozen=True)
class CatalogRow:
    name: str
    type: str
    labels: tuple[tuple[str, tuple[str, ...]], ...]  # always-present labels and listed values
    buckets: str


def catalog(engine: str) -> list[CatalogRow]:
    with (engines_dir() / CATALOGS[engine]).open(encoding="utf-8", newline="") as file:
        return [
            CatalogRow(row["name"], row["type"], _labels(row["labels"]), row["buckets"])
            for row in csv.DictReader(file)
        ]


def _labels(text: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """'model;version;request_type (active|max)' -> ((model, ()), ..., (request_type, (...))).
    Optional labels ('[...]') and notes ('(+ optional ...)') are left out."""
    labels = []
    for part in re.sub(r"\[[^\]]*\]", "", text).split(";"):
        match = _LABEL_RE.match(part)
        if match is None:
            continue
        values = tuple(match[2].split("|")) if match[2] and "|" in match[2] else ()
        if match[2] and not values and " " not in match[2]:
            values = (match[2],)  # one listed value, e.g. "method (decode)"
        labels.append((match[1], values))
    return tuple(labels)
