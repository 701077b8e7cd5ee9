"""inferwatch against a live Triton Inference Server (2.51.0, the CPU build nvidia-pytriton
bundles, serving tests/live/triton_model.py): the page's request counters equal what the client
sent, exactly; the Triton table maps them (the bridge and the collector, engine auto-detected);
`inferwatch doctor` reads the version from Triton's HTTP API and finds every family decided."""

from __future__ import annotations

import asyncio
import json
import time

import httpx
import pytest
from prometheus_client import CollectorRegistry, generate_latest

from exporters.adapters import normalize
from exporters.bridge import Bridge, BridgeConfig
from exporters.exposition import ParsedPage, parse_page
from exporters.schema import REQUEST_ERRORS, REQUESTS_WAITING
from monitor.cli import main
from monitor.collect.collector import Collector
from monitor.collect.config import MonitorConfig
from monitor.collect.snapshot import Snapshot, TargetState, split_key
from tests.live.triton_server import START_TIMEOUT_SECONDS, RunningTriton

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.live_engine,
              pytest.mark.timeout(START_TIMEOUT_SECONDS + 180)]

MAX_TOKENS = 6
LLM, CLASSIFIER = "tiny_llm", "tiny_classifier"
SETTLE_SECONDS = 5.0


def classify(client: httpx.Client, triton: RunningTriton, prompt: str) -> httpx.Response:
    return client.post(f"{triton.url}/v2/models/{CLASSIFIER}/infer", json={"inputs": [
        {"name": "prompt", "shape": [1, 1], "datatype": "BYTES", "data": [prompt]}]})


def stream(client: httpx.Client, triton: RunningTriton, prompt: str) -> list[dict[str, object]]:
    """One streamed generation (Triton's generate extension, server-sent events)."""
    with client.stream("POST", f"{triton.url}/v2/models/{LLM}/generate_stream",
                       json={"prompt": prompt, "max_tokens": MAX_TOKENS}) as response:
        return [json.loads(line.removeprefix("data:")) for line in response.iter_lines()
                if line.startswith("data:")]


def send(triton: RunningTriton, *, infers: int, streams: int, failures: int) -> None:
    """``infers`` classifications, ``streams`` generations of MAX_TOKENS tokens, and
    ``failures`` classifications the model refuses (HTTP 500), each checked as the client saw
    it. Returns once Triton's page counts all of them: Triton updates its statistics when the
    backend releases a request, which can come just after the client has read the response (a
    CI run scraped 3 of 4 failures), so reading the page straight after would race it."""
    before = raw_counters(triton)
    with httpx.Client(timeout=60) as client:
        for k in range(infers):
            response = classify(client, triton, f"prompt {k}")
            assert response.status_code == 200, response.text
            assert response.json()["outputs"][0]["data"][0] in (0, 1)
        for k in range(streams):
            events = stream(client, triton, f"request {k}")
            assert [e.get("model_name") for e in events] == [LLM] * MAX_TOKENS
            assert all(isinstance(e["token_id"], int) for e in events)
        for k in range(failures):
            response = classify(client, triton, f"fail {k}")
            assert response.status_code == 500 and "refuses" in response.text
    expected = {("nv_inference_request_success", CLASSIFIER, ""): infers,
                ("nv_inference_request_success", LLM, ""): streams,
                ("nv_inference_request_failure", CLASSIFIER, "BACKEND"): failures}
    deadline = time.monotonic() + SETTLE_SECONDS
    while True:
        now = raw_counters(triton)
        counted = {key: now.get(key, 0.0) - before.get(key, 0.0) for key in expected}
        if all(counted[key] >= n for key, n in expected.items()):
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"Triton's page counted {counted} of {expected} after "
                                 f"{SETTLE_SECONDS} s")
        time.sleep(0.05)


def raw_counters(triton: RunningTriton) -> dict[tuple[str, str, str], float]:
    """(family, model, reason) -> value, straight off Triton's page."""
    page = parse_page(httpx.get(triton.metrics_url, timeout=10).text, triton.metrics_url)
    return {(s.name, s.labels.get("model", ""), s.labels.get("reason", "")): s.value
            for family in page.families.values() for s in family.samples}


def normalized(triton: RunningTriton) -> dict[tuple[str, str, str], float]:
    """(schema sample, model, error_type) -> value, after the Triton table."""
    page = normalize(parse_page(httpx.get(triton.metrics_url, timeout=10).text,
                                triton.metrics_url), "triton")
    return {(s.name, s.labels.get("model", ""), s.labels.get("error_type", "")): s.value
            for family in page.families for s in family.samples}


def test_the_live_page_counts_every_request_the_client_sent(triton: RunningTriton) -> None:
    before = raw_counters(triton)
    send(triton, infers=5, streams=3, failures=2)
    after = raw_counters(triton)

    def delta(name: str, model: str, reason: str = "") -> float:
        return after.get((name, model, reason), 0.0) - before.get((name, model, reason), 0.0)
    assert delta("nv_inference_request_success", CLASSIFIER) == 5
    assert delta("nv_inference_request_failure", CLASSIFIER, "BACKEND") == 2
    assert delta("nv_inference_count", CLASSIFIER) == 5
    # A streamed request is one request and one inference, whatever its responses.
    assert delta("nv_inference_request_success", LLM) == 3
    assert delta("nv_inference_count", LLM) == 3
    assert sum(delta("nv_inference_request_failure", LLM, r)
               for r in ("BACKEND", "REJECTED", "CANCELED", "OTHER")) == 0
    assert after[("nv_inference_pending_request_count", LLM, "")] == 0


def test_a_streaming_model_failure_is_counted_a_success_by_triton(
        triton: RunningTriton) -> None:
    """What the adapter cannot see: a decoupled model that raises after taking the request
    sends the error as a streamed event, and Triton counts a success (noted in triton.yaml)."""
    before = raw_counters(triton)
    with httpx.Client(timeout=60) as client:
        events = stream(client, triton, "fail on purpose")
    assert len(events) == 1 and "refuses" in str(events[0]["error"])
    after = raw_counters(triton)
    key = ("nv_inference_request_success", LLM, "")
    assert after[key] - before.get(key, 0.0) == 1
    failure = ("nv_inference_request_failure", LLM, "BACKEND")
    assert after[failure] == before.get(failure, 0.0)


def test_the_normalized_page_counts_model_errors_and_the_queue(triton: RunningTriton) -> None:
    errors = (f"{REQUEST_ERRORS}_total", CLASSIFIER, "model_error")
    before = normalized(triton)
    send(triton, infers=2, streams=1, failures=3)
    after = normalized(triton)
    assert after[errors] - before.get(errors, 0.0) == 3
    assert after[(REQUESTS_WAITING, CLASSIFIER, "")] == 0
    assert after[(REQUESTS_WAITING, LLM, "")] == 0


def test_the_bridge_serves_the_live_page_normalized(triton: RunningTriton) -> None:
    registry = CollectorRegistry()
    with httpx.Client(trust_env=False) as client:
        bridge = Bridge(BridgeConfig(target=triton.metrics_url), registry, client)
        assert bridge.scrape_once()
        first = parse_page(generate_latest(registry).decode(), "bridge")
        send(triton, infers=1, streams=0, failures=1)
        assert bridge.scrape_once()
        second = parse_page(generate_latest(registry).decode(), "bridge")

    def value(page: ParsedPage, name: str, **labels: str) -> float:
        return sum(s.value for f in page.families.values() for s in f.samples
                   if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()))
    errors = f"{REQUEST_ERRORS}_total"
    assert value(second, "inferwatch_bridge_up") == 1
    assert value(second, "inferwatch_bridge_page_problems_total") == 0
    assert (value(second, errors, model=CLASSIFIER, error_type="model_error")
            - value(first, errors, model=CLASSIFIER, error_type="model_error")) == 1
    # The requests total an availability SLO divides by: a success ("stop", Triton has no
    # finish reason) and the failure, an error finish (issue 30).
    for reason in ("stop", "error"):
        assert (value(second, "gen_ai_server_requests_total", model=CLASSIFIER,
                      finish_reason=reason)
                - value(first, "gen_ai_server_requests_total", model=CLASSIFIER,
                        finish_reason=reason)) == 1, reason
    assert value(second, REQUESTS_WAITING, model=LLM) == 0


def _sum(snapshots: list[Snapshot], name: str) -> float:
    return sum(value for s in snapshots for key, value in s.counters.items()
               if split_key(key)[0] == f"{name}_total")


def test_the_collector_detects_triton_and_stores_exact_increases(triton: RunningTriton) -> None:
    config = MonitorConfig.model_validate({"targets": [
        {"name": "triton-0", "url": triton.metrics_url, "engine": "auto"}]})
    snapshots: list[Snapshot] = []

    async def run() -> None:
        async with Collector(config, snapshots.append) as collector:
            await collector.scrape_once()            # FIRST: the baseline
            await asyncio.to_thread(send, triton, infers=2, streams=1, failures=4)
            collector._targets["triton-0"].next_due = None  # due again now
            await collector.scrape_once()

    asyncio.run(run())
    assert [s.state for s in snapshots] == [TargetState.FIRST, TargetState.UP]
    assert _sum(snapshots[1:], REQUEST_ERRORS) == 4


def test_doctor_reads_the_version_and_finds_every_family_decided(
        triton: RunningTriton, capsys: pytest.CaptureFixture[str]) -> None:
    """On a CPU Triton without TensorRT-LLM: exit 0, the version from the HTTP API beside the
    metrics port, nothing undecided or missing; the TensorRT-LLM, GPU and opt-in metrics absent
    with the reason."""
    status = main(["doctor", triton.metrics_url, "--json"])
    body = json.loads(capsys.readouterr().out)
    assert body["engines"] == ["triton"]
    assert body["version"] == {"value": "2.51.0", "source": f"GET {triton.url}/v2"}
    coverage = body["coverage"]
    assert (coverage["undecided"], coverage["missing"]) == ([], [])
    # request_success: the requests total of an availability SLO (issue 30)
    assert coverage["mapped"] == ["nv_inference_pending_request_count",
                                  "nv_inference_request_failure", "nv_inference_request_success"]
    assert len(coverage["not_mapped"]) == 12
    assert len(coverage["absent"]) == 14
    assert coverage["absent"]["gpu_utilization_ratio"].startswith("a GPU")
    assert status == 0 and body["complete"] is True
