"""Every panel query of the checked-in dashboards returns data from a real Prometheus.

The stack: the reference server (tiny model) under load, half its requests failed by fault
injection for a while (errors by type, burn rates, a firing alert); `inferwatch bridge` in
front of a DCGM page (GPU panels) and of vLLM's recorded page (a second engine and model);
the load sent through `inferwatch gateway` (its good/total counters feed the per-tenant SLO);
Prometheus scraping all four every second with alerts/inferwatch-slo.rules.yml loaded. Each
target is then run as Grafana would run it (variables substituted, range or instant) and
must give at least one series with a finite value.
"""

from __future__ import annotations

import asyncio
import math
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client import CollectorRegistry

from monitor.demo import reference_server
from monitor.gateway import Gateway, GatewayConfig
from monitor.loadgen import LengthDist, WorkloadSpec, send_requests
from monitor.slo.loaders import load_slos
from monitor.slo.windows import BURN_ALERT
from tests.asgi_thread import serving
from tests.exporters.engine_fixtures import read_fixture
from tests.monitor.prometheus_fixture import RunningPrometheus, prometheus_binary

from .dashboard_queries import (
    ROOT,
    SLOS_DIR,
    label_values_query,
    load_dashboards,
    substitute,
    targets,
    variables,
)
from .live_stack import dcgm_page, fast_rules, headroom_page, prometheus_with_rules, \
    running_bridge, static_pages

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(240)]

ADMIN_TOKEN = "dashboards-test-token"
VLLM_MODEL = "meta-llama/Llama-3.1-8B-Instruct"  # the model of vllm.prom
NUM_REQUESTS, RATE = 48, 4.0  # about 12 s of load
FAULT = {"kind": "error_rate", "value": 0.5, "duration_seconds": 8}


def _load(url: str) -> None:
    spec = WorkloadSpec(input_len=LengthDist("uniform", 16, 96),
                        output_len=LengthDist("uniform", 8, 40), chars_per_token=1.0, seed=3)
    asyncio.run(send_requests(url, "tiny", spec.requests(NUM_REQUESTS, RATE),
                              timeout_seconds=30))


def _wait_for(prometheus: RunningPrometheus, promql: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not prometheus.query(promql):
        if time.monotonic() > deadline:
            raise AssertionError(f"{promql}: still no series after {timeout:g} s")
        time.sleep(0.5)


def _series(prometheus: RunningPrometheus, expr: str, instant: bool, start: float,
            end: float) -> list[tuple[dict[str, str], list[float]]]:
    """Each series' labels and values, from an instant query at ``end`` or a range query
    over [start, end] at a 1 s step."""
    if instant:
        params = {"query": expr, "time": f"{end:.3f}"}
        body = httpx.get(f"{prometheus.url}/api/v1/query", params=params, timeout=10).json()
    else:
        params = {"query": expr, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": "1"}
        body = httpx.get(f"{prometheus.url}/api/v1/query_range", params=params,
                         timeout=10).json()
    if body["status"] != "success":
        raise AssertionError(f"{expr}: {body.get('error')}")
    result: list[dict[str, Any]] = body["data"]["result"]
    return [(s["metric"], [float(v) for _, v in ([s["value"]] if instant else s["values"])])
            for s in result]


def _grafana_values(start: float, end: float) -> dict[str, str]:
    """The variables as Grafana sets them for this range at a 1 s scrape interval: "All"
    (allValue .*) for every query variable, the cost defaults."""
    return {"job": ".*", "model": ".*", "instance": ".*", "slo": ".*",
            "gpu_hour_price": "2.5", "gpus_per_replica": "1",
            "__rate_interval": "4s", "__interval": "1s", "__range": f"{math.ceil(end - start)}s"}


Results = dict[str, list[tuple[dict[str, str], list[float]]]]


def _run_targets(prometheus: RunningPrometheus, start: float, end: float
                 ) -> tuple[Results, list[str]]:
    """Every target's series by its name, and what is wrong: no finite value, or an error."""
    results: Results = {}
    problems = []
    values = _grafana_values(start, end)
    for target in targets(load_dashboards()):
        expr = substitute(target.expr, values)
        try:
            series = _series(prometheus, expr, bool(target.target["instant"]), start, end)
        except AssertionError as exc:
            problems.append(f"{target.name}: {exc}")
            continue
        results[target.name] = series
        if not any(math.isfinite(v) for _, values_ in series for v in values_):
            problems.append(f"{target.name}: no finite value ({len(series)} series): {expr}")
    return results, problems


def _variable_values(prometheus: RunningPrometheus, end: float) -> dict[str, set[str]]:
    found = {}
    for dashboard in load_dashboards().values():
        for name, var in variables(dashboard).items():
            if var["type"] != "query":
                continue
            query, label = label_values_query(substitute(var["definition"], {"job": ".*"}))
            found[name] = {s["metric"].get(label, "") for s in prometheus.query(query, end)}
    return found


def test_every_panel_query_returns_data_from_a_real_prometheus(tmp_path: Path) -> None:
    prometheus_binary()  # skip (or fail, where required) before starting anything
    pages = {"/dcgm": dcgm_page(), "/vllm": read_fixture("vllm.prom"),
             "/metrics": headroom_page()}  # the monitor's own /metrics: its headroom
    rules = fast_rules(ROOT / "alerts" / "inferwatch-slo.rules.yml", tmp_path / "rules.yml")
    server_args = ["--model", "tiny", "--enable-fault-injection", "--admin-token", ADMIN_TOKEN]
    with reference_server(server_args, startup_timeout=90) as url, \
            static_pages(pages) as static, \
            running_bridge(f"{static}/dcgm", "dcgm") as dcgm, \
            running_bridge(f"{static}/vllm", "vllm") as vllm, \
            serving(Gateway(GatewayConfig(url, b"dashboards-test-salt"),
                            CollectorRegistry())) as gateway:
        jobs = {"reference": url.removeprefix("http://"), "dcgm": dcgm, "vllm": vllm,
                "monitor": static.removeprefix("http://"),
                "gateway": gateway.removeprefix("http://")}
        with prometheus_with_rules(tmp_path, jobs, rules) as prometheus:
            start = time.time()
            httpx.post(f"{url}/admin/faults", json=FAULT, timeout=10,
                       headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}).raise_for_status()
            load = threading.Thread(target=_load, args=(gateway,))
            load.start()
            load.join(120)
            assert not load.is_alive(), "the load did not finish in 120 s"
            _wait_for(prometheus, f'ALERTS{{alertname="{BURN_ALERT}",alertstate="firing",'
                                  'slo="chat-availability"}', timeout=20)
            time.sleep(2)  # a last scrape of the final counters
            end = time.time()
            results, problems = _run_targets(prometheus, start, end)
            found = _variable_values(prometheus, end)
    assert not problems, "panels without data:\n" + "\n".join(problems)
    _assert_known_values(results)
    assert found["job"] == {"reference", "dcgm", "vllm"}
    assert found["model"] == {"tiny", VLLM_MODEL}
    assert len(found["instance"]) == 3
    assert found["slo"] == {slo.name for slo in load_slos(SLOS_DIR)}


def _last(results: Results, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    """The last value of each series of a target, by its labels."""
    return {tuple(sorted(labels.items())): values[-1] for labels, values in results[name]}


def _assert_known_values(results: Results) -> None:
    """Values the inputs fix, worked out by hand."""
    inference = "inferwatch-inference.json / "
    # DCGM: GPU_UTIL 87 %, MEM_COPY_UTIL 42 %, framebuffer 61440 + 18944 + 640 MiB per GPU.
    utilization = _last(results, inference + "GPU compute utilization / A")
    assert sorted(utilization.values()) == pytest.approx([0.87, 0.87])
    total = _last(results, inference + "GPU memory and KV cache / B")
    assert sorted(total.values()) == [81024 * 2**20] * 2
    # One replica of each model: the reference server's tiny and vLLM's recorded page.
    replicas = _last(results, inference + "Replicas / A")
    assert replicas == {(("model", "tiny"),): 1.0, (("model", VLLM_MODEL),): 1.0}
    # The injected errors are model errors; the other types stay at 0 but are shown.
    errors = {dict(labels)["error_type"]: max(values) for labels, values in
              results[inference + "Errors by type (req/s) / A"]}
    assert errors["model_error"] > 0 and set(errors) == {
        "oom", "timeout", "model_error", "rejected", "bad_request", "server_error"}
    alerts = results["inferwatch-slo.json / Firing and pending alerts / A"]
    assert any(labels["slo"] == "chat-availability" and labels["alertstate"] == "firing"
               for labels, _ in alerts)
    state = _last(results, "inferwatch-slo.json / SLO alert state / A")
    assert state[(("slo", "chat-availability"),)] == 2.0  # firing
