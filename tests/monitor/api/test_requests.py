"""GET /api/v1/requests/summary over stored request events: exact percentiles and goodput by
the gateway's verdict or any thresholds, filtered and grouped; 400/422 on bad input."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from monitor.store.request_events import RequestEventRow, write_request_events
from tests.monitor.api.conftest import SLOS, Api, served_api

ROUTE = "/api/v1/requests/summary"
# judged per tenant over the events below (30 days: pages at 14.4x over 1h and 5m)
GOODPUT_SLO = """
  - name: chat-goodput
    sli: {kind: goodput}
    objective: 0.99
    window: 30d
    alerting: {min_events: 5}
"""


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Api]:
    with served_api(Path(tmp_path_factory.mktemp("requests")),
                    slos_yaml=SLOS + GOODPUT_SLO) as served:
        # Ten requests in the last ten minutes: TTFT 0.1 .. 1.0 s, tenant a the first six,
        # good when TTFT <= 0.5 s; the tenth failed. One more two hours ago.
        now = served.now
        rows = [RequestEventRow(at=now - 600 + i, model="tiny", tenant="a" if i < 6 else "b",
                                slo_class="interactive", outcome="ok" if i < 9 else "error",
                                status=200 if i < 9 else 502, good=i < 5,
                                ttft_seconds=(i + 1) / 10, tpot_seconds=0.01 * (i + 1),
                                e2e_seconds=(i + 1) / 10 + 1,
                                prompt_tokens=100 * (i + 1), output_tokens=None if i == 9
                                else 10 * (i + 1))
                for i in range(10)]
        rows.append(RequestEventRow(at=now - 7200, model="tiny", tenant="a",
                                    slo_class="batch", outcome="ok", status=200, good=True,
                                    ttft_seconds=5.0))
        write_request_events(served.state.store.engine, rows)
        yield served


def get(api: Api, **params: Any) -> httpx.Response:
    return httpx.get(f"{api.url}{ROUTE}", params={"end": api.now + 1, **params}, timeout=30)


def test_the_last_hour_by_the_gateways_verdict(api: Api) -> None:
    body = get(api).json()
    total = body["total"]
    assert (total["num_requests"], total["num_good"], total["goodput_ratio"]) == (10, 5, 0.5)
    assert total["outcomes"] == {"ok": 9, "error": 1}
    # nine successful TTFTs 0.1 .. 0.9: the median is the fifth, 0.5 exactly
    assert total["latency"]["ttft"]["p50"] == pytest.approx(0.5)
    assert total["latency"]["ttft"]["p90"] == pytest.approx(0.82)
    assert body["groups"] is None and body["criteria"].startswith("the gateway's verdict")


def test_any_threshold_not_only_a_bucket_edge(api: Api) -> None:
    body = get(api, ttft_ms=333, tpot_ms=25).json()
    assert body["total"]["num_good"] == 2  # TTFT 0.1 and 0.2 (0.3 has TPOT 30 ms)
    assert body["criteria"] == "ttft <= 333 ms and tpot <= 25 ms"


def test_per_tenant_and_filtered(api: Api) -> None:
    groups = get(api, group_by="tenant").json()["groups"]
    assert {k: (g["num_requests"], g["num_good"]) for k, g in groups.items()} == {
        "a": (6, 5), "b": (4, 0)}
    total = get(api, tenant="b").json()["total"]
    assert total["num_requests"] == 4
    older = get(api, start=api.now - 3 * 3600, slo_class="batch").json()["total"]
    assert older["num_requests"] == 1 and older["latency"]["ttft"]["p99"] == 5.0


@pytest.mark.parametrize(("params", "status"), [
    ({"start": "yesterday-ish"}, 400),
    ({"ttft_ms": -1}, 422),
    ({"group_by": "status"}, 422),
], ids=["bad-time", "negative-threshold", "unknown-group"])
def test_bad_queries_are_refused(api: Api, params: dict[str, Any], status: int) -> None:
    assert get(api, **params).status_code == status


def test_a_goodput_slo_per_tenant_with_the_min_events_gate(api: Api) -> None:
    response = httpx.get(f"{api.url}/api/v1/requests/slo",
                         params={"slo": "chat-goodput", "by": "tenant"}, timeout=30)
    body = response.json()
    assert (body["by"], body["min_events"], body["period"]) == ("tenant", 5, "30d")
    groups = {g["value"]: g for g in body["groups"]}
    # a: 6 in the last 10 min + 1 two hours ago, 6 good -> 6/7; b: 4 requests all bad
    a, b = groups["a"], groups["b"]
    assert a["events"] == 7 and a["attainment"] == pytest.approx(6 / 7)
    assert a["judged"] and a["paging"]  # 1 bad of 6 in the last hour: 16.7x > 14.4x
    assert a["burn_rates"]["1h"] == pytest.approx((1 / 6) / 0.01)
    assert a["budget_remaining"] == pytest.approx(1 - (1 / 7) / 0.01)
    assert not b["judged"] and not b["paging"] and b["firing"] == []  # 4 < min_events 5
    assert b["attainment"] == 0 and b["burn_rates"]["5m"] is None  # no events in 5 min


@pytest.mark.parametrize(("params", "status"), [
    ({"slo": "nope"}, 404),
    ({"slo": "availability"}, 400),
    ({"slo": "chat-goodput", "by": "status"}, 422),
], ids=["unknown-slo", "not-goodput", "unknown-group"])
def test_bad_slo_queries_are_refused(api: Api, params: dict[str, Any], status: int) -> None:
    assert httpx.get(f"{api.url}/api/v1/requests/slo", params=params,
                     timeout=30).status_code == status


def test_cost_per_tenant_sums_to_the_total(api: Api) -> None:
    # the last hour on 2 devices at 3.0 per device-hour: 6.0; work = output + 0.1 x prompt:
    # a (i 0..5): 210 + 0.1 x 2100 = 420; b (i 6..9, 9 failed without output): 240 + 0.1 x 3400
    body = httpx.get(f"{api.url}/api/v1/requests/cost", params={
        "end": api.now + 1, "start": api.now - 3599, "devices": 2, "gpu_hour_price": 3.0},
        timeout=30).json()
    a, b = body["groups"]["a"], body["groups"]["b"]
    assert (a["prompt_tokens"], a["output_tokens"], b["prompt_tokens"]) == (2100, 210, 3400)
    assert a["work"] == pytest.approx(420) and b["work"] == pytest.approx(580)
    assert body["total"]["cost"] == pytest.approx(6.0)
    assert a["cost"] == pytest.approx(6.0 * 420 / 1000)
    assert a["cost"] + b["cost"] == pytest.approx(body["total"]["cost"], rel=1e-9)
    assert a["prompt_tokens"] + b["prompt_tokens"] == body["total"]["prompt_tokens"]
    folded = httpx.get(f"{api.url}/api/v1/requests/cost", params={
        "end": api.now + 1, "device_seconds": 100, "max_groups": 1}, timeout=30).json()
    assert set(folded["groups"]) == {"b", "other"} and folded["total"]["cost"] is None
    assert httpx.get(f"{api.url}/api/v1/requests/cost", params={"devices": 0},
                     timeout=30).status_code == 422
