"""`inferwatch serve` in front of a live vLLM (0.32, CPU build, the tiny model), read through its
HTTP API only, against what inferwatch's own load generator (the code `inferwatch bench` runs)
saw on the same requests; and the availability SLO of an engine that is stopped and started
again on the same port.

What the API must match, and how closely:

- counts (prompt tokens computed + cached, generated tokens, requests, histogram counts) are
  exact, and each rate times the seconds it covers gives its count back;
- a percentile is vLLM's bucket that holds the observation of that rank on the engine's own
  page (read here before and after the load), with ``kind`` saying whether a number, an
  interval (a bucket over 2x wide) or only a bound may be claimed;
- against the client: vLLM times TTFT and E2E from the request's arrival in its frontend
  (after HTTP parsing and tokenization) to the moment its frontend handles the token, an
  interval inside the client's send-to-receive. Each engine value is at most the client's, so
  the client's value of the same rank lies above the reported bucket's lower edge; how far
  above is the API server's own time, which the engine does not measure (the client's mean
  TTFT was 35 to 260 ms above the engine's exact mean in runs on a shared 2-core machine,
  against buckets 5-20 ms wide there), so the client's value is not asserted to lie under
  the upper edge; the engine's exact mean is asserted under the client's. ITL and TPOT
  have no such order: vLLM times tokens as its engine core emits them, the client times SSE
  chunks, and a starved API server sends several tokens in one chunk. The table the test
  prints shows both sides.
"""

from __future__ import annotations

import asyncio
import math
import re
import signal
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from exporters.exposition import parse_page
from monitor.loadgen import LengthDist, RequestRecord, WorkloadSpec, send_requests
from monitor.loadgen.workload import PromptRecord
from monitor.stack.monitor_service import listening_url
from tests.live.vllm_server import START_TIMEOUT_SECONDS, RunningVllm, running_vllm
from tests.monitor.api.test_serve import eventually, serve
from tests.processes import restartable_port

# The first live test may start the package's vLLM: its limit is above START_TIMEOUT_SECONDS.
pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.live_engine,
              pytest.mark.timeout(START_TIMEOUT_SECONDS + 300)]

NUM_REQUESTS, RATE = 32, 6.0
# vLLM's histogram family behind each latency of the API's summary.
FAMILIES: Mapping[str, str] = {
    "ttft": "vllm:time_to_first_token_seconds",
    "itl": "vllm:inter_token_latency_seconds",
    "tpot": "vllm:request_time_per_output_token_seconds",
    "e2e": "vllm:e2e_request_latency_seconds",
}
QUANTILES: Mapping[str, float] = {"p50": 0.5, "p90": 0.9, "p99": 0.99}
# Timed by the engine inside the client's own interval (see the module docstring).
INSIDE_THE_CLIENTS = ("ttft", "e2e")
SLOS = """
slos:
  - name: availability
    sli: {kind: availability}
    objective: 0.99
    window: 1d
    alerting: {no_data_after_seconds: 1m}
  - name: ttft-200ms            # vLLM's TTFT edges are 0.1 and 0.25 s: the SLI is a bound
    sli: {kind: latency, metric: ttft, threshold_seconds: 200ms}
    objective: 0.9
    window: 1d
"""


def write_config(tmp: Path, target: str, metrics_url: str) -> Path:
    """One target, no engine named (auto), scraped and evaluated every second."""
    (tmp / "slos.yaml").write_text(SLOS)
    config = tmp / "inferwatch.yaml"
    config.write_text(
        f'store: {{url: "sqlite:///{tmp / "store.db"}"}}\nslos: [slos.yaml]\n'
        "alerting: {evaluation_interval_seconds: 1, settle_seconds: 1}\n"
        "anomaly: {enabled: false}\n"
        f"targets:\n  - {{name: {target}, url: '{metrics_url}', scrape_interval_seconds: 1,"
        " scrape_timeout_seconds: 0.9}\n")
    return config


@contextmanager
def monitor(config: Path) -> Iterator[str]:
    """`inferwatch serve` as a user runs it; its API's URL; stopped by SIGTERM, cleanly."""
    proc = serve("--config", str(config), "--port", "0")
    try:
        yield listening_url(proc)
    finally:
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, out


def get(url: str, path: str, **params: Any) -> Any:
    response = httpx.get(f"{url}{path}", params=params, timeout=30)
    assert response.status_code == 200, response.text
    return response.json()


def scraped_since(url: str, target: str, since: float) -> dict[str, Any]:
    """The target once a scrape started after ``since`` answered ({} until then)."""
    body: dict[str, Any] = get(url, f"/api/v1/targets/{target}")
    return body if body["state"] == "up" and body["last_scrape_at"] > since else {}


def workload() -> WorkloadSpec:
    """Six prompts drawn at random: three preambles of ~600 tokens (vLLM's CPU blocks are 128
    tokens, so they are shared whole blocks) with two questions each; 32 draws repeat some."""
    preamble = "the shared context of this conversation " * 60
    prompts = [PromptRecord(f"preamble {k % 3}: {preamble} question {k}", None, None)
               for k in range(6)]
    return WorkloadSpec(prompts=prompts, output_len=LengthDist("uniform", 16, 48), seed=21)


def load(vllm: RunningVllm, num_requests: int, rate: float) -> list[RequestRecord]:
    records = asyncio.run(send_requests(vllm.url, vllm.model,
                                        workload().requests(num_requests, rate),
                                        timeout_seconds=120))
    assert [r.error for r in records if not r.ok] == []
    assert all(r.usage_reported and r.prompt_tokens for r in records)
    return records


def cumulative_buckets(page: str, family: str) -> dict[float, float]:
    """le -> cumulative count of one histogram family, summed over its series."""
    buckets: dict[float, float] = {}
    for sample in parse_page(page, "vllm").families[family].samples:
        if sample.name == f"{family}_bucket":
            le = float(sample.labels["le"])
            buckets[le] = buckets.get(le, 0.0) + sample.value
    return buckets


def observed(before: str, after: str, family: str) -> dict[float, float]:
    """The family's cumulative counts between two pages: what the load added."""
    start, end = cumulative_buckets(before, family), cumulative_buckets(after, family)
    return {le: end[le] - start.get(le, 0.0) for le in end}


def expected_kind(lower: float, upper: float, rank: float, at_upper: float) -> str:
    """What ``kind`` a bucket allows (exporters.buckets.estimate_quantile's rule)."""
    if math.isinf(upper):
        return "lower_bound"
    if lower <= 0:
        return "upper_bound"
    if math.isclose(rank, at_upper, rel_tol=1e-9):
        return "exact_edge"
    return "interval" if upper / lower > 2 else "interpolated"


def client_values(records: Sequence[RequestRecord], name: str) -> list[float]:
    if name == "itl":
        return sorted(gap for r in records for gap in r.itls)
    values = [r.ttft if name == "ttft" else r.tpot if name == "tpot" else r.e2e
              for r in records]
    return sorted(v for v in values if v is not None)


def check_percentiles(name: str, latency: Mapping[str, Any], buckets: Mapping[float, float],
                      client: Sequence[float]) -> list[str]:
    """Each percentile's bucket and kind against the engine's page, and against the client
    where the engine's interval lies inside the client's; the lines of the printed table."""
    total = buckets[math.inf]
    lines = []
    for q_name, q in QUANTILES.items():
        got = latency["percentiles"][q_name]
        lower, upper = got["lower"], math.inf if got["upper"] is None else got["upper"]
        rank = q * total
        at_lower = 0.0 if lower == 0 else buckets[lower]
        assert at_lower < rank <= buckets[upper] * (1 + 1e-9), (name, q_name, got)
        assert got["kind"] == expected_kind(lower, upper, rank, buckets[upper]), (name, got)
        same_rank = math.ceil(q * len(client) - 1e-9) - 1  # the client's value of that rank
        lines.append(f"{name:>4} {q_name}: API {got['kind']:>12} ({lower:g}, {upper:g}]  "
                     f"client {client[same_rank] * 1000:8.1f} ms")
        if name in INSIDE_THE_CLIENTS:
            assert client[same_rank] > lower, (name, q_name, got, client[same_rank])
    return lines


def test_serve_reports_what_the_load_generator_saw_on_a_live_vllm(
        vllm: RunningVllm, tmp_path: Path) -> None:
    began = time.time()
    with monitor(write_config(tmp_path, "vllm-0", vllm.metrics_url)) as url:
        target = eventually(lambda: scraped_since(url, "vllm-0", began), timeout=60)
        assert (target["engine"], target["detected_engines"]) == ("auto", ["vllm"])
        before = httpx.get(vllm.metrics_url, timeout=10).text  # the monitor's baseline
        records = load(vllm, NUM_REQUESTS, RATE)
        prompt = sum(r.prompt_tokens or 0 for r in records)
        generated = sum(r.num_output_tokens for r in records)

        def summary() -> dict[str, Any]:  # once the scrape after the last request is stored
            body: dict[str, Any] = get(url, "/api/v1/targets/vllm-0/summary", start=began,
                                       end=time.time())
            return body if (body["generation_tokens"] or 0) >= generated else {}
        body = eventually(summary, timeout=30)
        assert body["generation_tokens"] == generated
        after = httpx.get(vllm.metrics_url, timeout=10).text

        # Counts exact: the engine computed part of each prompt and found the rest cached.
        assert body["requests_finished"] == NUM_REQUESTS
        # vLLM counts admission rejections and error finishes (model_error) from its start
        assert body["errors"] == {"rejected": 0.0, "model_error": 0.0}
        assert body["prompt_tokens"] + body["prompt_tokens_cached"] == prompt
        assert body["prompt_tokens_cached"] > 0
        assert body["prefix_cache_hit_ratio"] == pytest.approx(
            body["prompt_tokens_cached"] / prompt, rel=1e-9)
        seconds = body["seconds_with_data"]
        assert body["prompt_tokens_per_second"] * seconds == pytest.approx(
            body["prompt_tokens"], rel=1e-9)
        assert body["generation_tokens_per_second"] * seconds == pytest.approx(
            generated, rel=1e-9)
        assert body["preemptions"] == 0.0  # a number: vLLM counts them and none happened
        for gauge in ("requests_running", "requests_waiting"):
            assert 0 <= body[gauge]["mean"] <= body[gauge]["max"] <= NUM_REQUESTS
        assert 0 <= body["kv_cache_usage_ratio"]["mean"] <= body["kv_cache_usage_ratio"]["max"] <= 1

        # The per-step series of one step over the same window say the same.
        end = time.time()
        features = {metric: get(url, "/api/v1/targets/vllm-0/series", metric=metric,
                                start=began, end=end, step=end - began)["points"][-1][1]
                    for metric in ("tokens_per_second", "output_tokens_per_second",
                                   "kv_cache_usage_ratio", "preemptions_per_second",
                                   "prefix_cache_hit_ratio", "queue_depth")}
        assert features["tokens_per_second"] * (end - began) == pytest.approx(
            body["prompt_tokens"] + generated, rel=1e-9)
        assert features["output_tokens_per_second"] * (end - began) == pytest.approx(
            generated, rel=1e-9)
        assert features["preemptions_per_second"] == 0.0
        assert features["prefix_cache_hit_ratio"] == pytest.approx(
            body["prefix_cache_hit_ratio"], rel=1e-9)
        assert 0 <= features["kv_cache_usage_ratio"] <= 1 and features["queue_depth"] >= 0

        # Percentiles: vLLM's bucket of that rank, honest about its width.
        counts = {"ttft": NUM_REQUESTS, "e2e": NUM_REQUESTS, "tpot": NUM_REQUESTS,
                  "itl": generated - NUM_REQUESTS}  # one gap per token after the first
        table = []
        for name, family in FAMILIES.items():
            latency = body["latency"][name]
            buckets = observed(before, after, family)
            assert latency["count"] == buckets[math.inf] == counts[name], name
            client = client_values(records, name)
            table += check_percentiles(name, latency, buckets, client)
            client_mean = sum(client) / len(client)
            table.append(f"{name:>4} mean: API {latency['mean_seconds'] * 1000:.1f} ms (exact)"
                         f"  client {client_mean * 1000:.1f} ms")
            if name in INSIDE_THE_CLIENTS:
                assert latency["mean_seconds"] <= client_mean, name
        print("\n".join(table))

        # The SLOs over the same requests: availability exact; the TTFT threshold between two
        # of vLLM's edges is counted at the edge below and the status says so.
        # (once the evaluator has ticked over the scrape the summary read)
        availability = eventually(
            lambda: (s := slo_state(url))["events"] == NUM_REQUESTS and s, timeout=30)
        assert (availability["events"], availability["sli"]) == (NUM_REQUESTS, 1.0)
        ttft = eventually(lambda: (s := get(url, "/api/v1/slos/ttft-200ms"))["warnings"] and s,
                          timeout=30)
        assert ttft["events"] == NUM_REQUESTS
        (warning,) = ttft["warnings"]
        assert "target vllm-0" in warning and "nearest edges 0.1s and 0.25s" in warning
        within_edge = sum(1 for v in client_values(records, "ttft") if v <= 0.1)
        assert ttft["sli"] * NUM_REQUESTS >= within_edge  # the engine's TTFT <= the client's


def slo_state(url: str) -> dict[str, Any]:
    body: dict[str, Any] = get(url, "/api/v1/slos/availability")
    return body


def target_up_metric(url: str, target: str) -> float:
    text = httpx.get(f"{url}/metrics", timeout=10).text
    match = re.search(rf'^inferwatch_target_up\{{target="{target}"\}} (\S+)$', text, re.M)
    assert match is not None, text
    return float(match.group(1))


@pytest.mark.waits
@pytest.mark.timeout(2 * START_TIMEOUT_SECONDS + 600)  # two starts of vLLM, minutes of waits
def test_availability_goes_to_no_data_when_vllm_stops_and_recovers_when_it_returns(
        tmp_path: Path) -> None:
    # Started again on the same port after minutes away: a port outside the ephemeral range.
    port, first_requests, second_requests = restartable_port(), 6, 4
    config = write_config(tmp_path, "vllm-1", f"http://127.0.0.1:{port}/metrics")
    with ExitStack() as first_engine:
        started = time.monotonic()
        engine = first_engine.enter_context(running_vllm(port=port))
        first_start = time.monotonic() - started
        with monitor(config) as url:
            watching = time.time()
            eventually(lambda: scraped_since(url, "vllm-1", watching), timeout=60)
            load(engine, first_requests, 4.0)
            eventually(lambda: slo_state(url)["events"] == first_requests, timeout=30)
            assert slo_state(url)["state"] == "ok"

            stopped = time.time()
            first_engine.close()  # SIGTERM, as an operator stops it; the monitor goes on
            down = eventually(lambda: (t := get(url, "/api/v1/targets/vllm-1"))["state"]
                              == "down" and t, timeout=30)
            assert down["last_error"].startswith("connect: "), down
            assert down["detected_engines"] == ["vllm"]  # what it was, while it is away
            assert target_up_metric(url, "vllm-1") == 0.0
            # Not judged while nothing answers: no data once a whole minute had none (the
            # SLO's no_data_after_seconds), with its ticket; the period's SLI stays what the
            # requests served made it, and windows without events have no ratio (not 0 or 1).
            seen: list[dict[str, Any]] = []  # the last state read, for the failure message

            def went_no_data() -> dict[str, Any] | None:
                seen[:] = [slo_state(url)]
                return seen[0] if seen[0]["state"] == "no_data" else None
            try:
                gone = eventually(went_no_data, timeout=240)
            except AssertionError:
                target = get(url, "/api/v1/targets/vllm-1")
                raise AssertionError(f"no no_data 240 s after the stop: SLO {seen}, target "
                                     f"{target}") from None
            no_data_after = time.time() - stopped
            assert (gone["events"], gone["sli"]) == (first_requests, 1.0)
            assert all(b["error_ratio"] is None for b in gone["burn_rates"] if b["events"] == 0)
            assert [(a["alertname"], a["state"]) for a in gone["alerts"]] == [
                ("InferwatchSLONoData", "firing")]

            restarted = time.monotonic()
            with running_vllm(port=port) as engine:
                second_start = time.monotonic() - restarted
                back = time.time()
                # Its first scrape after the outage is a new baseline (the engine restarted):
                # requests are counted from there.
                eventually(lambda: scraped_since(url, "vllm-1", back), timeout=60)
                assert target_up_metric(url, "vllm-1") == 1.0
                load(engine, second_requests, 4.0)
                total = first_requests + second_requests
                # Counted, judged and the ticket resolved: three steps of the evaluator, read
                # together once all hold (the first read with every event may precede them).
                def recovered_state() -> dict[str, Any] | None:
                    s = slo_state(url)
                    alerts = [(a["alertname"], a["state"]) for a in s["alerts"]]
                    done = s["events"] == total and s["state"] == "ok" and alerts == [
                        ("InferwatchSLONoData", "resolved")]
                    return s if done else None
                recovered = eventually(recovered_state, timeout=60)
                assert recovered["sli"] == 1.0, recovered
                report = get(url, "/api/v1/slos/availability/report", start=watching,
                             end=time.time(), step=60)
    # The period report over the outage. Its no-data intervals are not asserted: read seconds
    # after the restart, a CI run's report had none, while the same store read later shows the
    # outage's whole minute (the minute rollups lag); an open question, not settled here.
    intervals = report["no_data_intervals"]
    assert all(stopped - 60 <= i["start"] and i["end"] <= back + 60 for i in intervals), (
        intervals, stopped, back)
    assert report["totals"]["sli"] == 1.0
    assert first_requests <= report["totals"]["events"] <= total
    print(f"vLLM start {first_start:.0f} s, restart on the same port {second_start:.0f} s; "
          f"no_data {no_data_after:.0f} s after the stop")
