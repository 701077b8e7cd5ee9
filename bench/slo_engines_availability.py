"""Availability SLOs on each engine's own failure signals, judged by both evaluation paths
(issue 30): the README's ``chat-availability`` and one that also lists client errors.

Per engine, a page in the engine's own names is written every minute (100 requests a minute,
5 hours): vLLM's ``request_success_total`` by finished reason and its API server's
``http_requests_total`` by status class, TGI's ``tgi_request_success`` / ``tgi_request_failure``,
Triton's ``nv_inference_request_success`` / ``_failure``, the reference server's own counters.
The engine's mapping table turns each page into the schema (``exporters.adapters.normalize``,
the bridge; ``tests/exporters/test_promconfig_prometheus.py`` shows a real Prometheus with the
generated scrape configuration records the same series). Then, as in ``bench.slo_engines``,
the evaluator over a real store and promtool over the same series must fire the same alerts.

Scenarios: ``healthy``; ``engine`` (an hour with 30% of the requests failing inside the
engine; on vLLM half of them streamed, finishing with an error after a 200, half not, answered
500); ``client`` (an hour with 30 more requests a minute refused as the client's error, 400).
``error ratio`` is what the evaluator counted over the fault hour; the true one is 0.3 for
``engine`` and, for an SLO that lists client errors, 30/130 = 0.23 for ``client``.

    python -m bench.slo_engines_availability
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from bench.slo_engines import MINUTES, SLOW, T0, TARGET, cli, judged, promtool_agrees
from exporters.adapters.normalize import normalize
from exporters.exposition import parse_page
from monitor.collect.snapshot import Snapshot, TargetState, series_key
from monitor.slo.loaders import load_slos
from monitor.slo.promtool_tests import expand_values
from monitor.slo.source import StoreSliSource
from monitor.slo.spec import Slo
from monitor.store import TargetInfo, open_store

REPO: Final = Path(__file__).resolve().parents[1]
SCENARIOS: Final = ("healthy", "engine", "client")
PER_MINUTE: Final = 100
FAILING: Final = 30
ENGINES: Final = ("inferwatch", "vllm", "tgi", "triton", "sglang", "llamacpp")


@dataclass(frozen=True, slots=True)
class Minute:
    """Requests of one minute: served, failed in the engine (streamed / answered 5xx), and
    refused as the client's error (4xx)."""

    served: int
    failed_streamed: int = 0
    failed_5xx: int = 0
    refused: int = 0


def minute(engine: str, scenario: str, m: int) -> Minute:
    if m not in SLOW or scenario == "healthy":
        return Minute(PER_MINUTE)
    if scenario == "client":
        return Minute(PER_MINUTE, refused=FAILING)
    streamed = FAILING // 2 if engine == "vllm" else 0
    return Minute(PER_MINUTE - FAILING, streamed, FAILING - streamed)


def _counter(name: str, labels: str, value: float) -> str:
    return f"{name}{{{labels}}} {value}" if labels else f"{name} {value}"


def _page(lines: Sequence[str], counters: Sequence[str]) -> str:
    head = [f"# TYPE {name} counter" for name in counters]
    return "\n".join(head + list(lines)) + "\n"


def vllm_page(total: Minute) -> str:
    failed = total.failed_streamed + total.failed_5xx
    chat = 'handler="/v1/chat/completions",method="POST"'
    return _page([
        _counter("vllm:request_success_total",
                 'engine="0",finished_reason="stop",model_name="m"', total.served),
        _counter("vllm:request_success_total",
                 'engine="0",finished_reason="error",model_name="m"', failed),
        _counter("http_requests_total", f'{chat},status="2xx"',
                 total.served + total.failed_streamed),
        _counter("http_requests_total", f'{chat},status="5xx"', total.failed_5xx),
        _counter("http_requests_total", f'{chat},status="4xx"', total.refused),
    ], ["vllm:request_success_total", "http_requests_total"])


def tgi_page(total: Minute) -> str:
    return _page([
        _counter("tgi_request_success", "", total.served),
        _counter("tgi_request_failure", 'err="generation"',
                 total.failed_streamed + total.failed_5xx),
        _counter("tgi_request_failure", 'err="validation"', total.refused),
    ], ["tgi_request_success", "tgi_request_failure"])


def triton_page(total: Minute) -> str:
    model = 'model="m",version="1"'
    return _page([
        _counter("nv_inference_request_success", model, total.served),
        _counter("nv_inference_request_failure", f'{model},reason="BACKEND"',
                 total.failed_streamed + total.failed_5xx),
        _counter("nv_inference_request_failure", f'{model},reason="REJECTED"', 0),
    ], ["nv_inference_request_success", "nv_inference_request_failure"])


def inferwatch_page(total: Minute) -> str:
    failed = total.failed_streamed + total.failed_5xx
    return _page([
        _counter("gen_ai_server_requests_total", 'finish_reason="stop",model="m"', total.served),
        _counter("gen_ai_server_requests_total", 'finish_reason="error",model="m"', failed),
        _counter("gen_ai_server_request_errors_total", 'error_type="model_error",model="m"',
                 failed),
        _counter("gen_ai_server_request_errors_total", 'error_type="bad_request",model="m"',
                 total.refused),
    ], ["gen_ai_server_requests_total", "gen_ai_server_request_errors_total"])


PAGES: Final[dict[str, Callable[[Minute], str]]] = {
    "inferwatch": inferwatch_page, "vllm": vllm_page, "tgi": tgi_page, "triton": triton_page}

Series = tuple[str, tuple[tuple[str, str], ...]]


def normalized(engine: str, scenario: str) -> list[dict[Series, float]]:
    """The schema's cumulative counters after each minute (index 0: before any request)."""
    out: list[dict[Series, float]] = []
    total = Minute(0)
    for m in range(-1, MINUTES):
        if m >= 0:
            now = minute(engine, scenario, m)
            total = Minute(*(a + b for a, b in zip(
                (total.served, total.failed_streamed, total.failed_5xx, total.refused),
                (now.served, now.failed_streamed, now.failed_5xx, now.refused))))
        page = normalize(parse_page(PAGES[engine](total), engine), engine)
        out.append({(s.name, tuple(sorted(s.labels.items()))): s.value
                    for family in page.families for s in family.samples})
    return out


def snapshots(cumulative: Sequence[dict[Series, float]]) -> list[Snapshot]:
    return [Snapshot(TARGET, T0 + 60 * m, T0 + 60 * (m + 1), TargetState.UP,
                     counters={series_key(name, dict(labels)): after[(name, labels)]
                               - before.get((name, labels), 0.0)
                               for name, labels in after})
            for m, (before, after) in enumerate(zip(cumulative, cumulative[1:]))]


def input_series(cumulative: Sequence[dict[Series, float]]) -> list[tuple[str, str]]:
    keys = sorted({key for values in cumulative for key in values})
    out = []
    for name, labels in keys:
        matchers = ",".join([f'job="{TARGET}"'] + [f'{k}="{v}"' for k, v in labels])
        out.append((f"{name}{{{matchers}}}",
                    expand_values([c.get((name, labels), 0.0) for c in cumulative])))
    return out


def fault_error_ratio(slo: Slo, engine: str, scenario: str, db: Path) -> float:
    """The error ratio the evaluator counts over the fault hour."""
    store = open_store(f"sqlite:///{db}")
    try:
        store.migrate()
        store.register_target(TargetInfo(TARGET, engine=engine))
        store.write(snapshots(normalized(engine, scenario)))
        steps = StoreSliSource(store).read(slo, T0 + 60 * SLOW.start, T0 + 60 * SLOW.stop, 3600)
        good = sum(s.good for s in steps)
        total = sum(s.total for s in steps)
        return 1 - good / total if total else float("nan")
    finally:
        store.close()


@dataclass(frozen=True, slots=True)
class Outcome:
    engine: str
    slo: str
    scenario: str
    pages: bool | None
    agree: bool | None
    error_ratio: float | None
    checks: int = 0
    note: str = ""


def availability_slos() -> list[Slo]:
    readme = next(s for s in load_slos(REPO / "alerts" / "slos")
                  if s.name == "chat-availability")
    strict = Slo.model_validate({**readme.model_dump(), "name": "availability-with-4xx",
                                 "sli": {"kind": "availability", "errors": [
                                     "oom", "timeout", "model_error", "rejected",
                                     "server_error", "bad_request"]}})
    return [readme, strict]


def run(engines: Sequence[str], scenarios: Sequence[str],
        promtool: str = "promtool") -> list[Outcome]:
    outcomes = []
    with tempfile.TemporaryDirectory() as tmp:
        for engine in engines:
            for slo in availability_slos():
                if engine not in PAGES:
                    outcomes.append(Outcome(engine, slo.name, "-", None, None, None,
                                            note="no failure counter"))
                    continue
                for scenario in scenarios:
                    work = Path(tmp) / f"{engine}-{slo.name}-{scenario}"
                    work.mkdir()
                    cumulative = normalized(engine, scenario)
                    ours = judged(slo, snapshots(cumulative), engine, work / "store.db")
                    agree, checks, output = promtool_agrees(
                        slo, scenario, ours, work, promtool, page=input_series(cumulative))
                    pages = any(dict(a)["severity"] == "page" for m in ours for a in m)
                    ratio = fault_error_ratio(slo, engine, scenario, work / "ratio.db")
                    outcomes.append(Outcome(engine, slo.name, scenario, pages, agree, ratio,
                                            checks, "" if agree else output))
    return outcomes


def table(outcomes: Sequence[Outcome]) -> str:
    lines = ["| engine | SLO | scenario | evaluator pages | error ratio over the fault hour "
             "| promtool agrees (minutes checked) |", "|---|---|---|---|---|---|"]
    for o in outcomes:
        pages = "-" if o.pages is None else ("page" if o.pages else "quiet")
        ratio = "-" if o.error_ratio is None else f"{o.error_ratio:.3f}"
        agree = "-" if o.agree is None else f"{'yes' if o.agree else 'NO'} ({o.checks})"
        lines.append(f"| {o.engine} | {o.slo} | {o.scenario} | {pages} | {ratio} | {agree} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    return cli(argv, __doc__.splitlines()[0], ENGINES, SCENARIOS, run, table)


if __name__ == "__main__":
    raise SystemExit(main())
