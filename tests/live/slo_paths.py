"""Both evaluation paths of one SLO file on a live vLLM, for the tests that compare their pages
(test_vllm_slo_paths, test_vllm_engine_fault): the embedded one (`inferwatch serve` scraping
the engine into its store, its evaluator and alert book) and the generated one (a real
Prometheus scraping the engine through the generated vLLM job and recording rules, running the
SLO rules that `inferwatch rules generate --engine vllm` writes), both scraping and evaluating
every second; and what each one has firing.

The SLO files these tests write have a 1-day period, so they burn within seconds (`inferwatch
rules windows --period 1d`: the fastest page is 12m/2m at 6x; the workbook's 1h/5m row,
scaled to 2m/2m, is dropped). The page times are the alert book's ``fired_at`` and
Prometheus' ``activeAt`` (the generated burn alerts have no ``for:``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx

from monitor.cli import main
from monitor.stack.prometheus import host_port, prometheus_binary
from tests.exporters.promconfig_stack import running_prometheus, wait_evaluated
from tests.integration import unavailable
from tests.live.test_vllm_promconfig import generated_config
from tests.live.test_vllm_serve import get, monitor, scraped_since
from tests.live.vllm_server import RunningVllm
from tests.monitor.api.test_serve import eventually

BURN_ALERT = "InferwatchSLOBurnRate"
PAGE_WINDOW = "12m/2m"  # the fastest page row of a 1-day period
SLO_RULES = "inferwatch-slo.rules.yml"  # what `inferwatch rules generate` names its SLO rules
# A firing burn alert: (slo, severity, window).
AlertKey = tuple[str, str, str]


def write_monitor_config(tmp: Path, metrics_url: str, slos: str, target: str) -> Path:
    """inferwatch.yaml with the SLO file ``slos``: the target declares engine vllm, which binds
    the latency SLOs to vLLM's edges (as --engine vllm binds the rules); scraped and evaluated
    every second."""
    (tmp / "slos.yaml").write_text(slos)
    config = tmp / "inferwatch.yaml"
    config.write_text(
        f'store: {{url: "sqlite:///{tmp / "store.db"}"}}\nslos: [slos.yaml]\n'
        "alerting: {evaluation_interval_seconds: 1, settle_seconds: 1}\n"
        "anomaly: {enabled: false}\n"
        f"targets:\n  - {{name: {target}, url: '{metrics_url}', engine: vllm,"
        " scrape_interval_seconds: 1, scrape_timeout_seconds: 0.9}\n")
    return config


def generated_slo_rules(tmp: Path, slos: str) -> Path:
    """`inferwatch rules generate --engine vllm` of the SLO file ``slos``, groups every
    second, into the new folder ``tmp``: the SLO rule file's path."""
    tmp.mkdir()
    (tmp / "slos.yaml").write_text(slos)
    status = main(["rules", "generate", "--slos", str(tmp / "slos.yaml"), "--out", str(tmp),
                   "--engine", "vllm", "--interval", "1s"])
    assert status == 0
    return tmp / SLO_RULES


@contextmanager
def generated_prometheus(vllm: RunningVllm, workdir: Path, slo_rules: Path) -> Iterator[str]:
    """A real Prometheus in the new folder ``workdir`` with the generated vLLM scrape job and
    recording rules, and ``slo_rules``; its URL once it scraped ``vllm`` (the baseline) and
    evaluated every group."""
    binary = prometheus_binary()
    if binary is None:
        unavailable("prometheus is not installed (apt-get install prometheus)")
    workdir.mkdir()
    config = generated_config(workdir, host_port(vllm.url))
    config["rule_files"].append(str(slo_rules))
    with running_prometheus(binary, workdir, config) as url:
        wait_evaluated(url, 1)
        yield url


@contextmanager
def embedded_monitor(vllm: RunningVllm, workdir: Path, slos: str, target: str) -> Iterator[str]:
    """`inferwatch serve` in the new folder ``workdir``, watching ``vllm`` as ``target`` with
    the SLO file ``slos``; its URL once it scraped the engine (the baseline)."""
    workdir.mkdir()
    began = time.time()
    with monitor(write_monitor_config(workdir, vllm.metrics_url, slos, target)) as url:
        eventually(lambda: scraped_since(url, target, began), timeout=60)
        yield url


def embedded_firing(url: str) -> dict[AlertKey, float]:
    """The alert book's firing burn alerts, with when each fired (Unix seconds)."""
    body = get(url, "/api/v1/alerts", state="firing", alertname=BURN_ALERT)
    return {(a["labels"]["slo"], a["labels"]["severity"], a["labels"]["window"]): a["fired_at"]
            for a in body["items"]}


def prometheus_firing(url: str) -> dict[AlertKey, float]:
    """ALERTS{alertstate="firing"} of the burn alerts, with each one's activeAt."""
    query = f'ALERTS{{alertstate="firing", alertname="{BURN_ALERT}"}}'
    firing = {(s["metric"]["slo"], s["metric"]["severity"], s["metric"]["window"])
              for s in prometheus_query(url, query)}
    alerts = httpx.get(f"{url}/api/v1/alerts", timeout=5).json()["data"]["alerts"]
    active_at = {(a["labels"]["slo"], a["labels"]["severity"], a["labels"]["window"]):
                 datetime.fromisoformat(a["activeAt"]).timestamp()
                 for a in alerts if a["labels"].get("alertname") == BURN_ALERT}
    return {key: active_at[key] for key in firing if key in active_at}


def prometheus_query(url: str, query: str) -> list[dict[str, Any]]:
    result: list[dict[str, Any]] = httpx.get(f"{url}/api/v1/query", params={"query": query},
                                             timeout=5).json()["data"]["result"]
    return result


def both_paged(embedded: str, prometheus: str, slos: Sequence[str]
               ) -> dict[str, dict[str, float]]:
    """{path: {slo: page time}} once both paths page every one of ``slos`` ({} until then)."""
    pages = {"embedded": embedded_firing(embedded), "Prometheus": prometheus_firing(prometheus)}
    keys = [(slo, "page", PAGE_WINDOW) for slo in slos]
    if not all(key in firing for firing in pages.values() for key in keys):
        return {}
    return {path: {key[0]: firing[key] for key in keys} for path, firing in pages.items()}


def counted(url: str, name: str, num_events: float) -> Callable[[], dict[str, Any]]:
    """A probe: the embedded SLO's state once it counted ``num_events`` events."""
    def probe() -> dict[str, Any]:
        state: dict[str, Any] = get(url, f"/api/v1/slos/{name}")
        assert state["events"] == num_events, (name, num_events, state)
        return state
    return probe
