"""An engine fault on a live vLLM (0.32, CPU build, the tiny model) pages availability on both
evaluation paths (issue 30): the embedded one and the generated one of tests/live/slo_paths.py,
on one SLO file, both scraping and evaluating every second.

The fault is real: vLLM runs with ``VLLM_KEEP_ALIVE_ON_ENGINE_DEATH=1`` (without it the API
server shuts itself down once its engine died: vllm/entrypoints/launchers/launcher.py
``terminate_if_errored``), serves some requests, then its EngineCore process (a child of
`vllm serve`, titled ``VLLM::EngineCore``) is killed with SIGKILL. What vLLM does then
(measured here, and asserted):

- every inference request is answered 500 at once (``EngineDeadError``: "EngineCore encountered
  an issue"), by the API server, without reaching an engine;
- /metrics still answers 200 (the API server's registry), /health answers 503;
- ``http_requests_total{handler="/v1/completions",status="5xx"}`` counts each 500 (the series
  is born with the first one), which the vLLM table maps to ``server_error``;
- ``vllm:request_success_total{finished_reason="error"}`` stays 0: no request finished in an
  engine, so ``model_error`` counts nothing and the page is the 5xx's alone.

The availability SLO counts ``[model_error, server_error]`` over a 1-day period; quiet while
the engine serves, it must page on both paths after the kill, with the same burn alerts. The
page times after the kill (the alert book's ``fired_at``, Prometheus' ``activeAt``) are
printed; docs/benchmarks.md ("Live vLLM engine fault: 5xx page both paths") has the figures.

Not marked ``waits``: it spends its time starting its own vLLM (CPU-bound, as the rest of the
live vLLM tests) and then waits seconds, not minutes, on the paths' clocks. Its engine is its
own, not the package's: killing the package's engine would fail every live test after it.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import httpx
import openai
import pytest

from tests.exporters.promconfig_stack import wait_evaluated
from tests.live.slo_paths import (
    PAGE_WINDOW,
    both_paged,
    counted,
    embedded_firing,
    embedded_monitor,
    generated_prometheus,
    generated_slo_rules,
    prometheus_firing,
    prometheus_query,
)
from tests.live.test_vllm_slo_paths import page_total, raw_counts
from tests.live.vllm_server import START_TIMEOUT_SECONDS, RunningVllm, running_vllm
from tests.monitor.api.test_serve import eventually

# It starts a vLLM of its own: its limit is above START_TIMEOUT_SECONDS.
pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.live_engine,
              pytest.mark.timeout(START_TIMEOUT_SECONDS + 300)]

TARGET = "vllm-fault"
AVAILABILITY = "availability"
MIN_EVENTS = 5
SLOS = f"""
slos:
  - name: {AVAILABILITY}
    sli: {{kind: availability, errors: [model_error, server_error]}}
    objective: 0.99
    window: 1d
    alerting: {{min_events: {MIN_EVENTS}}}
"""
NUM_SERVED = 8   # before the kill: more than MIN_EVENTS, so the quiet is judged, not gated
NUM_FAILED = 6   # after it: 6 of 14 fail, 7x the 12m/2m page's 6% on both paths (Prometheus'
                 # increase() skips the 5xx series' first value: 5 of 13 there)
PACE_SECONDS = 0.25
ENGINE_DEAD = "EngineCore encountered an issue"
# Each path pages within a scrape and an evaluation (1 s each) of the first 5xx it counts
# (Prometheus: the second, see NUM_FAILED); the bounds leave room for a shared machine.
PAGE_WITHIN_SECONDS = 20.0
PAGES_APART_SECONDS = 10.0


@pytest.fixture
def engine() -> Iterator[RunningVllm]:
    with running_vllm(env={"VLLM_KEEP_ALIVE_ON_ENGINE_DEATH": "1"}) as server:
        yield server


@pytest.fixture
def prometheus(engine: RunningVllm, tmp_path: Path) -> Iterator[str]:
    rules = generated_slo_rules(tmp_path / "rules", SLOS)
    with generated_prometheus(engine, tmp_path / "prometheus", rules) as url:
        yield url


@pytest.fixture
def embedded(engine: RunningVllm, tmp_path: Path) -> Iterator[str]:
    with embedded_monitor(engine, tmp_path / "monitor", SLOS, TARGET) as url:
        yield url


def engine_core_pid(server_pid: int) -> int:
    """The one child of `vllm serve` titled VLLM::EngineCore (its other child is
    multiprocessing's resource tracker), read from /proc."""
    found: list[int] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            title = (entry / "cmdline").read_bytes().decode(errors="replace")
        except (OSError, IndexError, ValueError):
            continue  # gone meanwhile
        if parent == server_pid and "EngineCore" in title:
            found.append(int(entry.name))
    assert len(found) == 1, f"EngineCore children of {server_pid}: {found}"
    return found[0]


def send(client: openai.OpenAI, model: str, k: int) -> str:
    """One completion; its outcome: "ok", or the error's status code and message."""
    try:
        client.completions.create(model=model, max_tokens=4, extra_body={"ignore_eos": True},
                                  prompt=f"request {k}: a prompt of a few words")
        return "ok"
    except openai.APIStatusError as exc:
        return f"{exc.status_code}: {exc.message}"


def quiet(embedded: str, prometheus: str) -> None:
    """Neither path alerts on the served requests, once each judged them all."""
    state = eventually(counted(embedded, AVAILABILITY, NUM_SERVED), timeout=30)
    assert (state["state"], state["sli"], state["alerts"]) == ("ok", 1.0, []), state
    wait_evaluated(prometheus, 1, scraped_after=datetime.now(UTC))
    [events] = prometheus_query(prometheus,
                                f'inferwatch_slo:sli_events:increase12m{{slo="{AVAILABILITY}"}}')
    assert float(events["value"][1]) >= MIN_EVENTS, events
    assert embedded_firing(embedded) == {} and prometheus_firing(prometheus) == {}


def test_an_engine_killed_under_a_live_vllm_pages_availability_on_both_paths(
        engine: RunningVllm, prometheus: str, embedded: str) -> None:
    client = openai.OpenAI(base_url=f"{engine.url}/v1", api_key="none", timeout=60,
                           max_retries=0)
    before = raw_counts(engine)
    assert [send(client, engine.model, k) for k in range(NUM_SERVED)] == ["ok"] * NUM_SERVED
    quiet(embedded, prometheus)

    core = engine_core_pid(engine.pid)
    os.kill(core, signal.SIGKILL)
    killed = time.time()
    failed: list[str] = []
    for k in range(NUM_FAILED):
        failed.append(send(client, engine.model, NUM_SERVED + k))
        time.sleep(PACE_SECONDS)
    client.close()
    assert len(failed) == NUM_FAILED, failed
    assert all(f.startswith("500: ") and ENGINE_DEAD in f for f in failed), failed
    pages = eventually(lambda: both_paged(embedded, prometheus, [AVAILABILITY]), timeout=60)
    at = {path: pages[path][AVAILABILITY] for path in pages}
    print(f"\nEngineCore (pid {core}) killed; {NUM_FAILED} requests answered 500 in "
          f"{time.time() - killed:.1f} s; {PAGE_WINDOW} page of {AVAILABILITY} fired, seconds "
          "after the kill: " + ", ".join(f"{path} {t - killed:+.1f}" for path, t in at.items())
          + f"; Prometheus - embedded {at['Prometheus'] - at['embedded']:+.1f} s")
    assert all(killed < t <= killed + PAGE_WITHIN_SECONDS for t in at.values()), at
    assert abs(at["Prometheus"] - at["embedded"]) <= PAGES_APART_SECONDS, at

    # vLLM's page after the death: still served; the 500s in the HTTP middleware's 5xx of the
    # inference handlers, no error finish (read until the middleware has the last one).
    assert httpx.get(f"{engine.url}/health", timeout=10).status_code == 503
    expected = {"served": NUM_SERVED, "rejected": 0.0, "http_2xx": NUM_SERVED,
                "http_4xx": 0.0, "http_5xx": NUM_FAILED}

    def settled() -> dict[str, float]:
        after = raw_counts(engine)
        assert {key: after[key] - before[key] for key in after} == expected, (before, after)
        return after
    after = eventually(settled, timeout=10)
    counts = {key: after[key] - before[key] for key in after}
    assert page_total(engine, "vllm:request_success_total", finished_reason="error") == 0.0

    # The embedded path counted every request exactly: each 500 a server_error event.
    available = eventually(counted(embedded, AVAILABILITY, NUM_SERVED + NUM_FAILED), 30)
    assert available["state"] == "burning"
    assert available["sli"] == pytest.approx(NUM_SERVED / (NUM_SERVED + NUM_FAILED))
    # Prometheus' error series, scraped after the last request: the page's 5xx, no model_error.
    wait_evaluated(prometheus, 1, scraped_after=datetime.now(UTC))
    errors = {s["metric"]["error_type"]: float(s["value"][1]) for s in prometheus_query(
        prometheus, "sum by (error_type) (gen_ai_server_request_errors_total)")}
    assert errors.get("server_error") == after["http_5xx"], errors
    assert errors.get("model_error", 0.0) == 0.0, errors

    # The same burn alerts on both paths, all of them availability's.
    both = eventually(lambda: (e := embedded_firing(embedded)).keys()
                      == prometheus_firing(prometheus).keys() and e, timeout=30)
    assert {slo for slo, _, _ in both} == {AVAILABILITY}, both
    print(f"firing on both paths: {sorted(both)}; vLLM's page after the kill: "
          f"{counts}, errors in Prometheus {errors}")
