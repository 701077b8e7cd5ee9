"""The load generator against a scripted server: vLLM's metric definitions, errors by type,
open vs closed loop, concurrency caps, warm-up, drains and paired (canary) sends."""

from __future__ import annotations

import asyncio
import json
import math

import pytest

from monitor.loadgen.metrics import LatencySlo, summarize, write_records
from monitor.loadgen.runner import (
    Endpoint,
    EndpointError,
    Limits,
    check_endpoint,
    run_load,
    run_paired,
)
from monitor.loadgen.workload import RequestSpec
from tests.monitor.loadgen.scripted_server import Script, scripted_server


def _specs(prompts: list[str], gap: float = 0.0, tokens: int = 6) -> list[RequestSpec]:
    return [RequestSpec(i * gap, p, tokens) for i, p in enumerate(prompts)]


def test_metrics_follow_vllm_definitions() -> None:
    with scripted_server(Script(ttft=0.08, itl=0.03)) as (url, _):
        result = asyncio.run(run_load(Endpoint(url, "m"), _specs(["ok"] * 3, 0.05, 6),
                                      Limits(num_requests=3), rate=20))
    for r in result.records:
        assert r.ok and r.usage_reported and r.num_output_tokens == 6
        assert len(r.chunk_times) == 6
        assert 0.08 <= r.ttft < 0.2
        assert all(0.025 <= gap < 0.15 for gap in r.itls)
        assert r.tpot == pytest.approx((r.e2e - r.ttft) / 5)
        # Five gaps, each at least the 25 ms held above (the server sleeps 30; a client busy
        # at the first token stamps it late, shortening e2e - ttft: 149.98 ms seen in CI).
        assert r.e2e >= r.ttft + 5 * 0.025
        assert r.e2e == pytest.approx(r.ttft + sum(r.itls))
    summary = summarize(result, percentiles=(50, 99))
    assert summary.completed == 3 and summary.failed == 0
    assert set(summary.latency) == {"ttft", "tpot", "itl", "e2e"}
    assert summary.latency["itl"].count == 15
    assert set(summary.latency["ttft"].percentiles) == {"p50", "p99"}
    assert summary.output_throughput == pytest.approx(18 / summary.duration_seconds)


def test_chat_api_skips_the_role_preamble_and_counts_content_chunks() -> None:
    with scripted_server(Script(ttft=0.02, itl=0.01)) as (url, script):
        result = asyncio.run(run_load(Endpoint(url, "m", chat=True), _specs(["ok"], 0, 4),
                                      Limits(num_requests=1), rate=10))
    assert result.records[0].ok and len(result.records[0].chunk_times) == 4


def test_errors_are_counted_by_type() -> None:
    prompts = ["ok", "reject", "fail", "cut", "stream-error"]
    with scripted_server(Script(ttft=0.01, itl=0.01)) as (url, _):
        result = asyncio.run(run_load(Endpoint(url, "m"), _specs(prompts),
                                      Limits(num_requests=5), rate=math.nan))
    by_prompt = {r.spec.prompt: r for r in result.records}
    assert by_prompt["ok"].ok
    assert by_prompt["reject"].error_type == "rejected"
    assert by_prompt["fail"].error_type == "server_error"
    assert by_prompt["cut"].error_type == "stream_interrupted"
    assert by_prompt["stream-error"].error_type == "stream_error"
    assert summarize(result).errors == {"rejected": 1, "server_error": 1,
                                        "stream_interrupted": 1, "stream_error": 1}


def test_open_loop_sends_on_time_whatever_the_server_does() -> None:
    # Every answer takes 0.5 s; a closed loop of one would send 1 request per 0.5 s. The open
    # loop sends 20 in 1 s, each within a few ms of its intended time (no coordinated omission).
    with scripted_server(Script(ttft=0.5, itl=0.0)) as (url, script):
        result = asyncio.run(run_load(Endpoint(url, "m"), _specs(["ok"] * 20, 0.05, 1),
                                      Limits(num_requests=20), rate=20))
    lags = [r.sent_at - r.intended_at for r in result.records]
    assert max(lags) < 0.05
    assert script.max_in_flight >= 8
    assert script.arrivals[-1] - script.arrivals[0] < 1.2


def test_concurrency_cap_queues_on_the_client_and_reports_it_apart() -> None:
    with scripted_server(Script(ttft=0.2, itl=0.0)) as (url, script):
        result = asyncio.run(run_load(Endpoint(url, "m"), _specs(["ok"] * 6, 0.0, 1),
                                      Limits(num_requests=6, max_concurrency=2), rate=100))
    assert script.max_in_flight == 2
    queued = sorted(r.queue_time for r in result.records)
    assert queued[-1] >= 0.35          # the last pair waited for two rounds of 0.2 s
    assert all(r.ttft is not None and r.ttft < 0.35 for r in result.records)  # not in TTFT
    assert summarize(result).queue_time is not None


def test_closed_loop_keeps_n_users_busy_for_the_duration() -> None:
    with scripted_server(Script(ttft=0.05, itl=0.0)) as (url, script):
        result = asyncio.run(run_load(Endpoint(url, "m"), _specs(["ok"] * 1000, 0.0, 1),
                                      Limits(duration_seconds=1.0, max_concurrency=3),
                                      rate=math.inf))
    assert script.max_in_flight == 3
    assert 30 <= len(result.records) <= 63   # ~3 users x 1 s / 0.05 s
    assert all(abs(r.queue_time) < 0.02 for r in result.records)
    assert summarize(result).offered_rate is None


def test_warmup_requests_are_sent_but_not_measured() -> None:
    with scripted_server(Script(ttft=0.01, itl=0.0)) as (url, script):
        result = asyncio.run(run_load(Endpoint(url, "m"), _specs(["ok"] * 10, 0.02, 1),
                                      Limits(num_requests=5, warmup_requests=3), rate=50))
    assert len(script.prompts) == 8
    assert [r.warmup for r in result.records] == [True] * 3 + [False] * 5
    assert summarize(result).requests == 5


def test_drain_cuts_requests_that_never_answer() -> None:
    with scripted_server(Script(ttft=0.01, itl=0.0)) as (url, _):
        result = asyncio.run(run_load(Endpoint(url, "m"), _specs(["ok", "hang"], 0.0, 1),
                                      Limits(num_requests=2, drain_seconds=0.5), rate=10))
    types = {r.spec.prompt: r.error_type for r in result.records}
    assert types == {"ok": None, "hang": "unfinished"}


def test_goodput_counts_requests_within_every_slo() -> None:
    with scripted_server(Script(ttft=0.05, itl=0.01)) as (url, _):
        result = asyncio.run(run_load(Endpoint(url, "m"), _specs(["ok", "ok", "reject"]),
                                      Limits(num_requests=3), rate=math.nan))
    met = summarize(result, slo=LatencySlo(ttft=1.0, tpot=1.0))
    assert met.slo_attainment == pytest.approx(2 / 3)
    missed = summarize(result, slo=LatencySlo(ttft=0.01))
    assert missed.slo_attainment == 0.0 and missed.goodput == 0.0


def test_paired_runs_send_the_same_requests_in_a_random_order() -> None:
    with scripted_server(Script(ttft=0.01, itl=0.0)) as (a_url, a), \
            scripted_server(Script(ttft=0.01, itl=0.0)) as (b_url, b):
        specs = _specs([f"ok {i}" for i in range(40)], 0.01, 1)
        base, can = asyncio.run(run_paired((Endpoint(a_url, "m"), Endpoint(b_url, "m")),
                                           specs, Limits(num_requests=40), rate=100))
    # Both servers got every request. Their arrival order need not be the send order: a
    # request that opens a connection can arrive after the next one, sent 10 ms later on a
    # kept-alive connection, when the server's thread is slow to accept on a busy machine.
    assert sorted(a.prompts) == sorted(b.prompts) == sorted(s.prompt for s in specs)
    assert [r.spec.prompt for r in base.records] == [s.prompt for s in specs]
    # Neither side is always sent first. Judged by the client's send times (the launch order
    # the shuffle decides), not by arrival at the two servers, whose threads' scheduling on a
    # busy machine reordered them (6 of 40 once in a full CI run).
    first_a = sum(ra.sent_at < rb.sent_at for ra, rb in zip(base.records, can.records))
    assert 8 <= first_a <= 32
    assert [r.intended_at for r in base.records] == [r.intended_at for r in can.records]


def test_records_are_written_as_json_lines(tmp_path) -> None:  # type: ignore[no-untyped-def]
    with scripted_server(Script(ttft=0.01, itl=0.01)) as (url, _):
        result = asyncio.run(run_load(Endpoint(url, "m"), _specs(["ok", "reject"], 0, 3),
                                      Limits(num_requests=2), rate=math.nan))
    path = tmp_path / "requests.jsonl"
    write_records(result, path)
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert [r["status"] for r in rows] == [200, 429]
    assert rows[0]["output_tokens"] == 3 and len(rows[0]["itl"]) == 2
    assert rows[0]["sent_at"] > 1.7e9 and rows[1]["error_type"] == "rejected"


def test_an_unreachable_endpoint_is_named() -> None:
    with pytest.raises(EndpointError, match=r"http://127\.0\.0\.1:9/v1/completions: not reach"):
        asyncio.run(check_endpoint(Endpoint("http://127.0.0.1:9", "m", timeout_seconds=2)))
    with scripted_server() as (url, _), pytest.raises(EndpointError, match="answered 404"):
        asyncio.run(check_endpoint(Endpoint(url, "missing")))


def test_objects_from_before_the_load_are_frozen_during_it_and_released_after() -> None:
    """A full GC walking every imported module's objects stalled the loop 100-200 ms a time;
    the runner freezes what exists at the start, and unfreezes at the end (a server process
    running loads must not keep cyclic garbage forever)."""
    import gc

    frozen_during: list[int] = []
    with scripted_server(Script(ttft=0.01, itl=0.01)) as (url, _):
        result = asyncio.run(run_load(
            Endpoint(url, "m"), _specs(["ok"] * 3, 0.05, 4), Limits(num_requests=3), rate=20,
            on_progress=lambda progress, elapsed: frozen_during.append(gc.get_freeze_count()),
            progress_every=0.02))
    assert all(r.ok for r in result.records)
    assert frozen_during and frozen_during[0] > 1000  # the last report comes after the run
    assert gc.get_freeze_count() == 0


def test_the_engines_own_timing_splits_client_ttft_into_queue_prefill_and_the_rest() -> None:
    """vLLM's per-request metrics (queue, scheduled -> first token) beside the client's TTFT:
    what is left is the frontend, the network and the client."""
    script = Script(ttft=0.06, itl=0.01, capacity=1, per_request_metrics=True)
    with scripted_server(script) as (url, _):
        result = asyncio.run(run_load(Endpoint(url, "m"), _specs(["ok"] * 3, 0.0, 3),
                                      Limits(num_requests=3), rate=100))
    records = sorted(result.records, key=lambda r: r.server_queue or 0.0)
    assert all(r.ok for r in records)
    # one slot: the second and third requests waited for the ones before them
    assert records[0].server_queue is not None and records[0].server_queue < 0.05
    assert records[2].server_queue is not None and records[2].server_queue > 0.1
    for r in records:
        assert r.server_prefill is not None and 0.055 < r.server_prefill < 0.3
        assert r.frontend_overhead is not None and 0 <= r.frontend_overhead < 0.1
        assert r.to_json(0.0)["frontend_overhead"] == r.frontend_overhead
    view = summarize(result, (50.0, 99.0)).server_view
    assert view is not None and view["ttft"].count == 3
    assert set(view) == {"ttft", "server_queue", "server_prefill", "frontend_overhead"}
    assert "engine queue" in summarize(result, (50.0,)).format()


def test_without_the_engines_timing_there_is_no_server_view() -> None:
    with scripted_server(Script(ttft=0.01, itl=0.01)) as (url, _):
        result = asyncio.run(run_load(Endpoint(url, "m"), _specs(["ok"], 0.0, 2),
                                      Limits(num_requests=1), rate=10))
    assert result.records[0].frontend_overhead is None
    assert summarize(result).server_view is None
