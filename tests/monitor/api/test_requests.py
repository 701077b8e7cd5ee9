"""GET /api/v1/requests/summary over stored request events: exact percentiles and goodput by
the gateway's verdict or any thresholds, filtered and grouped; 400/422 on bad input."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from monitor.store.request_events import RequestEventRow, write_request_events
from tests.monitor.api.conftest import Api, served_api

ROUTE = "/api/v1/requests/summary"


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Api]:
    with served_api(Path(tmp_path_factory.mktemp("requests"))) as served:
        # Ten requests in the last ten minutes: TTFT 0.1 .. 1.0 s, tenant a the first six,
        # good when TTFT <= 0.5 s; the tenth failed. One more two hours ago.
        now = served.now
        rows = [RequestEventRow(at=now - 600 + i, model="tiny", tenant="a" if i < 6 else "b",
                                slo_class="interactive", outcome="ok" if i < 9 else "error",
                                status=200 if i < 9 else 502, good=i < 5,
                                ttft_seconds=(i + 1) / 10, tpot_seconds=0.01 * (i + 1),
                                e2e_seconds=(i + 1) / 10 + 1)
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
