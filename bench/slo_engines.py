"""The README's latency SLOs on each engine's real bucket layout, judged by both evaluation
paths (issue 30): the monitor's evaluator over a real store, and Prometheus (promtool) running
the rules ``inferwatch rules generate --engine E`` writes.

Per engine (its default edges, ``exporters/adapters/latency_edges.yaml``) and SLO:

1. the SLO is bound to the engine (``monitor.slo.bind``): counted exactly, refused (a
   threshold off the engine's edges: the row then shows the same SLO with
   ``off_edge: lower_edge``), or impossible (the engine has no such histogram);
2. a page of that layout is replayed minute by minute: every ``_bucket`` edge the engine
   exports and ``+Inf``, 100 requests a minute; scenarios ``healthy`` (every request at the
   counted edge: good by the threshold and as counted), ``slow`` (an hour with 30% of the
   requests above the threshold) and, for an off-edge threshold, ``between`` (every request
   between the counted edge and the threshold: good, but counted bad, the stated cost);
3. the evaluator (``SloEvaluator`` on ``StoreSliSource``, snapshots with the engine's edges)
   ticks every minute; promtool must find exactly its alerts at every minute that is not next
   to one of its transitions (``agree``); ``pages`` says whether a page-severity alert fired.

    python -m bench.slo_engines                   # every engine: a markdown table on stdout
    python -m bench.slo_engines --engines vllm --scenarios slow
"""

from __future__ import annotations

import argparse
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Protocol

import yaml
from prometheus_client.utils import floatToGoString

from exporters.adapters.edges import known_engines
from monitor.collect.snapshot import HistogramDelta, Snapshot, TargetState, series_key
from monitor.slo import rules
from monitor.slo.bind import EngineBindError, bind_engine
from monitor.slo.evaluator import SloEvaluator
from monitor.slo.loaders import load_slos
from monitor.slo.promtool_tests import ExpectedAlert, PromtoolTest, expand_values, \
    promtool_test_file
from monitor.slo.source import StoreSliSource
from monitor.slo.spec import LatencySli, Slo
from monitor.slo.windows import NO_DATA_ALERT, burn_alert, burn_windows
from monitor.store import TargetInfo, open_store

REPO: Final = Path(__file__).resolve().parents[1]
# The README's latency SLOs: alerts/slos/inference.yaml and the OpenSLO example's chat-tpot.
README_SLOS: Final = ("chat-ttft", "chat-itl", "chat-tpot", "chat-e2e-monthly")
SCENARIOS: Final = ("healthy", "slow", "between")
T0: Final = 1_800_000_000.0      # a minute boundary
MINUTES: Final = 5 * 60
SLOW: Final = range(150, 210)    # the slow hour
PER_MINUTE: Final = 100.0
SLOW_SHARE: Final = 0.3
TARGET: Final = "ref"


@dataclass(frozen=True, slots=True)
class Outcome:
    engine: str
    slo: str
    counted: str        # exact | lower_edge (refused as written) | no histogram
    scenario: str
    pages: bool | None  # a page-severity alert fired in the evaluator; None: not run
    agree: bool | None  # promtool found the evaluator's alerts at every checked minute
    checks: int = 0
    note: str = ""


def readme_slos() -> list[Slo]:
    slos = {s.name: s for s in load_slos(REPO / "alerts" / "slos")}
    return [slos[name] for name in README_SLOS]


def bound(slo: Slo, engine: str) -> tuple[Slo | None, str, str]:
    """(the SLO as the engine counts it, how, why) or (None, ..., why) where it cannot be."""
    try:
        return bind_engine([slo], engine)[0], "exact", ""
    except EngineBindError as exc:
        refused = str(exc)
    assert isinstance(slo.sli, LatencySli)
    if "has no histogram" in refused:
        return None, "no histogram", refused
    lenient = {**slo.model_dump(), "sli": {**slo.sli.model_dump(), "off_edge": "lower_edge"}}
    return bind_engine([Slo.model_validate(lenient)], engine)[0], "lower_edge", refused


def observation(sli: LatencySli, scenario: str, minute: int) -> tuple[float, float]:
    """(latency of the good share, of the rest) in this minute of the scenario."""
    where = sli.counted_at
    edges = sli.layout_edges
    good = where.edge if where.edge is not None else edges[0] / 2
    if scenario == "between" and where.lower is not None and not where.exact:
        good = (where.lower + sli.threshold_seconds) / 2   # good, but counted bad
    above = [e for e in edges if e > sli.threshold_seconds]
    slow = above[0] if above else sli.threshold_seconds * 2
    return good, (slow if scenario == "slow" and minute in SLOW else good)


def minute_counts(sli: LatencySli, scenario: str, minute: int) -> tuple[float, ...]:
    """Non-cumulative bucket counts (the engine's edges, +Inf last) of one minute."""
    edges = sli.layout_edges
    counts = [0.0] * (len(edges) + 1)
    fast, slow = observation(sli, scenario, minute)
    share = SLOW_SHARE if fast != slow else 0.0
    for value, n in ((fast, PER_MINUTE * (1 - share)), (slow, PER_MINUTE * share)):
        index = next((i for i, e in enumerate(edges) if value <= e), len(edges))
        counts[index] += n
    return tuple(counts)


Alerts = frozenset[tuple[str, str]]  # one active alert's labels


def evaluator_alerts(slo: Slo, scenario: str, db: Path) -> list[set[Alerts]]:
    """The evaluator's firing burn alerts after each minute of the latency scenario, over a
    real store holding the engine's buckets."""
    assert isinstance(slo.sli, LatencySli)
    series = series_key(slo.sli.histogram, {})
    edges = slo.sli.layout_edges
    snapshots = [Snapshot(TARGET, T0 + 60 * m, T0 + 60 * (m + 1), TargetState.UP,
                          histograms={series: HistogramDelta(
                              edges, minute_counts(slo.sli, scenario, m), 0.0, PER_MINUTE)})
                 for m in range(MINUTES)]
    return judged(slo, snapshots, slo.sli.engine or "inferwatch", db)


def judged(slo: Slo, snapshots: Sequence[Snapshot], engine: str,
           db: Path) -> list[set[Alerts]]:
    """The evaluator's firing burn alerts (their labels) after each minute of ``snapshots``
    (one a minute from T0), over a real SQLite store."""
    store = open_store(f"sqlite:///{db}")
    try:
        store.migrate()
        store.register_target(TargetInfo(TARGET, engine=engine))
        store.write(list(snapshots))
        evaluator = SloEvaluator([slo], StoreSliSource(store), settle_seconds=0)
        out: list[set[Alerts]] = []
        since: dict[Alerts, float] = {}  # when each active condition became active
        for minute in range(1, len(snapshots) + 1):
            now = T0 + 60.0 * minute
            (status,) = evaluator.tick(now)
            firing = set()
            for c in status.conditions:
                key = frozenset(c.labels.items())
                if not c.active or c.labels["alertname"] == NO_DATA_ALERT:
                    since.pop(key, None)
                    continue
                # Held for the rule's `for`, as Prometheus (and the alert book) hold it.
                if now - since.setdefault(key, now) >= c.for_seconds:
                    firing.add(key)
            out.append(firing)
        return out
    finally:
        store.close()


def input_series(slo: Slo, scenario: str) -> list[tuple[str, str]]:
    """The engine's page as promtool input: every edge's cumulative bucket, +Inf, _count."""
    assert isinstance(slo.sli, LatencySli)
    edges = slo.sli.layout_edges
    les = [str(floatToGoString(e)) for e in edges] + ["+Inf"]  # type: ignore[no-untyped-call]
    totals = [0.0] * len(les)
    values: list[list[float]] = [[0.0] for _ in les]
    for minute in range(MINUTES):
        counts = minute_counts(slo.sli, scenario, minute)
        running = 0.0
        for i, c in enumerate(counts):
            running += c
            totals[i] += running
            values[i].append(totals[i])
    name = slo.sli.histogram
    series = [(f'{name}_bucket{{job="{TARGET}",le="{le}"}}', expand_values(v))
              for le, v in zip(les, values)]
    series.append((f'{name}_count{{job="{TARGET}"}}', expand_values(values[-1])))
    return series


def promtool_agrees(slo: Slo, scenario: str, ours: Sequence[set[Alerts]],
                    directory: Path, promtool: str = "promtool",
                    page: Sequence[tuple[str, str]] | None = None) -> tuple[bool, int, str]:
    """Whether promtool, on the engine's page, fires exactly the evaluator's burn alerts at
    every minute one evaluation or more from the evaluator's transitions (``page``: other
    input series than the SLO's engine layout)."""
    alertnames = sorted({burn_alert(slo, w).name for w in burn_windows(slo)})
    checks = []
    for k in range(2, MINUTES - 1):  # ours[k - 1] is the evaluation at k minutes
        before, now, after = ours[k - 2], ours[k - 1], ours[k]
        if before == now == after:
            for name in alertnames:
                checks.append((k * 60.0, name, [ExpectedAlert(dict(a))
                                                for a in sorted(now, key=sorted)
                                                if dict(a)["alertname"] == name]))
    document = yaml.safe_load(rules.generate_rules([slo]))
    for group in document["groups"]:
        for rule in group["rules"]:
            rule.pop("annotations", None)
    (directory / "rules.yml").write_text(yaml.safe_dump(document, sort_keys=False))
    series = input_series(slo, scenario) if page is None else page
    test = PromtoolTest(60.0, series, checks, f"{slo.name}-{scenario}")
    (directory / "test.yml").write_text(promtool_test_file(["rules.yml"], [test]))
    done = subprocess.run([promtool, "test", "rules", str(directory / "test.yml")],
                          capture_output=True, text=True, timeout=600)
    return done.returncode == 0, len(checks), (done.stdout + done.stderr)[-2000:]


def run(engines: Sequence[str], scenarios: Sequence[str], promtool: str = "promtool",
        slos: Sequence[Slo] | None = None) -> list[Outcome]:
    outcomes = []
    with tempfile.TemporaryDirectory() as tmp:
        for engine in engines:
            for slo in (readme_slos() if slos is None else slos):
                counted_slo, counted, why = bound(slo, engine)
                if counted_slo is None:
                    outcomes.append(Outcome(engine, slo.name, counted, "-", None, None,
                                            note=why))
                    continue
                for scenario in scenarios:
                    if scenario == "between" and counted == "exact":
                        continue
                    work = Path(tmp) / f"{engine}-{slo.name}-{scenario}"
                    work.mkdir()
                    ours = evaluator_alerts(counted_slo, scenario, work / "store.db")
                    agree, checks, output = promtool_agrees(counted_slo, scenario, ours, work,
                                                            promtool)
                    pages = any(dict(a)["severity"] == "page" for m in ours for a in m)
                    outcomes.append(Outcome(engine, slo.name, counted, scenario, pages, agree,
                                            checks, "" if agree else output))
    return outcomes


def table(outcomes: Sequence[Outcome]) -> str:
    lines = ["| engine | SLO | counted | scenario | evaluator pages | promtool agrees "
             "(minutes checked) |", "|---|---|---|---|---|---|"]
    for o in outcomes:
        pages = "-" if o.pages is None else ("page" if o.pages else "quiet")
        agree = "-" if o.agree is None else f"{'yes' if o.agree else 'NO'} ({o.checks})"
        lines.append(f"| {o.engine} | {o.slo} | {o.counted} | {o.scenario} | {pages} | "
                     f"{agree} |")
    return "\n".join(lines)


class _Row(Protocol):
    @property
    def engine(self) -> str: ...
    @property
    def slo(self) -> str: ...
    @property
    def scenario(self) -> str: ...
    @property
    def agree(self) -> bool | None: ...
    @property
    def note(self) -> str: ...


def cli(argv: Sequence[str] | None, description: str, engines: Sequence[str],
        scenarios: Sequence[str], run: Callable[[Sequence[str], Sequence[str]], Sequence[_Row]],
        table: Callable[[Sequence[Any]], str]) -> int:
    """``--engines``/``--scenarios``, the run, its table and what promtool said where the two
    paths disagreed; exit 1 then."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--engines", nargs="+", default=list(engines))
    p.add_argument("--scenarios", nargs="+", default=list(scenarios), choices=scenarios)
    args = p.parse_args(argv)
    started = time.perf_counter()
    outcomes = run(args.engines, args.scenarios)
    print(table(outcomes))
    print(f"\n{len(outcomes)} rows in {time.perf_counter() - started:.0f} s")
    for o in outcomes:
        if o.agree is False:
            print(f"\n{o.engine} {o.slo} {o.scenario}:\n{o.note}")
    return 0 if all(o.agree is not False for o in outcomes) else 1


def main(argv: Sequence[str] | None = None) -> int:
    return cli(argv, __doc__.splitlines()[0], known_engines(), SCENARIOS, run, table)


if __name__ == "__main__":
    raise SystemExit(main())
