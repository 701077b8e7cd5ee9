"""Series per target: each recorded engine page (tests/fixtures/engines/*.prom) as the engine
exposes it, after the generated scrape job's first keep (the families some mapping row reads),
after all its metric_relabel_configs (what Prometheus or vmagent stores: schema series and
the ``inferwatch_raw:`` series the recording rules read), and in the normalized schema (what
the bridge, exporters.adapters.normalize, serves; the schema series the rules record are the
difference between it and the relabeled schema series). No binaries: relabeling is simulated
(bench.relabel_sim); tests/exporters/test_promconfig_prometheus.py checks the real thing.

    python -m bench.cardinality                  # a Markdown table on stdout
    python -m bench.cardinality --json out.json
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from bench.relabel_sim import relabel
from exporters.adapters import detect_engines, normalize_engines
from exporters.exposition import parse_page
from exporters.promconfig import RAW_PREFIX, engine_plan, metric_relabel_configs

PAGES_DIR = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "engines"

Series = tuple[str, tuple[tuple[str, str], ...]]


@dataclass(frozen=True, slots=True)
class PageCardinality:
    page: str
    engine: str
    raw: int            # distinct series on the page
    first_keep: int     # left after the job's first keep
    stored_schema: int  # after every relabel config: schema series
    stored_raw: int     # after every relabel config: inferwatch_raw: series for the rules
    normalized: int     # the bridge's schema series


def _series(name: str, labels: dict[str, str]) -> Series:
    return name, tuple(sorted(labels.items()))


def measure(path: Path) -> PageCardinality | None:
    """The page's counts, or None when no mapping table reads it."""
    parsed = parse_page(path.read_text(encoding="utf-8"), path.name)
    engines = tuple(detect_engines(parsed))
    if not engines:
        return None
    raw = {_series(s.name, s.labels) for f in parsed.families.values() for s in f.samples}
    configs = metric_relabel_configs(engine_plan(engines[0]))  # the job scrape-config writes
    first = [c for c in raw if relabel({**dict(c[1]), "__name__": c[0]}, configs[:1])]
    stored = {_series(out.pop("__name__"), out) for c in raw
              if (out := relabel({**dict(c[1]), "__name__": c[0]}, configs)) is not None}
    num_raw = sum(1 for name, _ in stored if name.startswith(RAW_PREFIX))
    normalized = normalize_engines(parsed, engines)
    schema = {_series(s.name, s.labels) for f in normalized.families for s in f.samples}
    return PageCardinality(path.name, "+".join(engines), len(raw), len(first),
                           len(stored) - num_raw, num_raw, len(schema))


def table(rows: Sequence[PageCardinality]) -> str:
    lines = ["| page | engine | on the page | after the first keep | stored: schema | "
             "stored: raw for rules | normalized (bridge) | normalized / page |",
             "|---|---|--:|--:|--:|--:|--:|--:|"]
    lines += [f"| `{r.page}` | {r.engine} | {r.raw} | {r.first_keep} | {r.stored_schema} | "
              f"{r.stored_raw} | {r.normalized} | {r.normalized / r.raw:.0%} |" for r in rows]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=Path, default=PAGES_DIR)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    rows = [r for path in sorted(args.pages.glob("*.prom")) if (r := measure(path))]
    print(table(rows))
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in rows], indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
