"""Which engine wrote a page, from the metric name prefixes its table declares."""

from __future__ import annotations

from exporters.adapters.table import UnknownEngine, load_tables
from exporters.exposition import ParsedPage

_EXAMPLES_SHOWN = 8


def detect_engines(page: ParsedPage) -> list[str]:
    """Every engine with metrics on the page: inference engines first (most families first),
    then GPU exporters, so a Triton page that also carries DCGM series lists triton, dcgm."""
    counts: dict[str, int] = {}
    for family in page.families.values():
        if not family.samples:
            continue
        for engine, table in load_tables().items():
            if family.name.startswith(table.detect):
                counts[engine] = counts.get(engine, 0) + 1
    tables = load_tables()
    return sorted(counts, key=lambda e: (tables[e].kind != "inference", -counts[e], e))


def detect_engine(page: ParsedPage) -> str:
    """The page's inference engine (or GPU exporter, if that is all there is); UnknownEngine,
    listing what was seen, if no known engine's metrics are on it."""
    engines = detect_engines(page)
    if engines:
        return engines[0]
    seen = [name for name, family in page.families.items() if family.samples]
    examples = ", ".join(seen[:_EXAMPLES_SHOWN]) + (", ..." if len(seen) > _EXAMPLES_SHOWN else "")
    known = "; ".join(f"{engine}: {' '.join(table.detect)}"
                      for engine, table in load_tables().items())
    raise UnknownEngine(
        f"{page.source}: no metrics of a known engine among {len(seen)} metric families "
        f"({examples or 'none'}); known name prefixes: {known}"
    )
