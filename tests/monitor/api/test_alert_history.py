"""GET /api/v1/alerts/history over the fixture's store (see conftest ``past_incident``): every
change of state newest first, filtered by SLO, alert name and time, paged, 400 on bad times."""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.monitor.api.conftest import DASHBOARD_URL, Api, served_api

ROUTE = "/api/v1/alerts/history"


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Api]:
    with served_api(Path(tmp_path_factory.mktemp("history"))) as served:
        yield served


def get(api: Api, path: str = ROUTE, **params: Any) -> httpx.Response:
    return httpx.get(f"{api.url}{path}", params=params, timeout=30)


def items(api: Api, **params: Any) -> list[dict[str, Any]]:
    response = get(api, **params)
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["total"] == len(body["items"]) or "limit" in params
    found: list[dict[str, Any]] = body["items"]
    return found


def iso(unix_seconds: float) -> str:
    return dt.datetime.fromtimestamp(unix_seconds, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def test_every_change_of_state_newest_first(api: Api) -> None:
    events = items(api)
    ago = [round(api.now - e["at"], 6) for e in events]
    assert ago == sorted(ago)
    book = get(api, "/api/v1/alerts").json()["items"]
    firing_now = sorted(a["fingerprint"] for a in book if a["state"] == "firing")
    assert len(firing_now) == 3   # the availability SLO burns 50x: each window fires
    now_events = [e for e in events if e["at"] == api.now]
    assert sorted(e["fingerprint"] for e in now_events) == firing_now
    assert {e["state"] for e in now_events} == {"firing"}
    past = [(round(api.now - e["at"]), e["state"], e["previous_state"],
             None if e["fired_at"] is None else round(api.now - e["fired_at"]))
            for e in events[len(now_events):]]
    assert past == [(1200, "resolved", "firing", 1800), (1440, "inactive", "pending", None),
                    (1500, "pending", None, None), (1800, "firing", None, 1800)]
    refired = next(e for e in now_events if e["fingerprint"] == events[-1]["fingerprint"])
    assert (refired["previous_state"], refired["fired_at"]) == ("resolved", api.now)
    assert all(e["annotations"]["dashboard_url"] == DASHBOARD_URL for e in events[3:])
    assert all(e["labels"]["slo"] == "availability" for e in events)
    assert all(e["alertname"] == e["labels"]["alertname"] for e in events)
    assert len({e["id"] for e in events}) == len(events) == 7


def test_filters_by_slo_alertname_and_time(api: Api) -> None:
    everything = items(api)
    assert items(api, slo="availability") == everything
    assert items(api, slo="ttft") == [] and items(api, slo="nope") == []
    assert items(api, alertname="InferwatchSLOBurnRate") == everything
    assert items(api, alertname="InferwatchSLONoData") == []
    # [start, end): unix seconds or ISO 8601, as the other routes take them
    since = items(api, start=repr(api.now - 1500))
    assert [round(api.now - e["at"]) for e in since] == [0, 0, 0, 1200, 1440, 1500]
    between = items(api, start=iso(math.floor(api.now - 1700)), end=repr(api.now - 1440))
    assert [e["state"] for e in between] == ["pending"]
    assert items(api, end=repr(api.now)) == everything[3:]


def test_pages_of_the_history_add_up_to_all_of_it(api: Api) -> None:
    everything = items(api)
    pages = []
    for offset in range(0, 9, 3):
        body = get(api, limit=3, offset=offset).json()
        assert (body["total"], body["limit"], body["offset"]) == (7, 3, offset)
        pages.extend(body["items"])
    assert pages == everything
    assert get(api, limit=3, offset=100).json()["items"] == []


@pytest.mark.parametrize(("params", "message"), [
    ({"start": "yesterday"}, "start: 'yesterday' is neither"),
    ({"end": "2026-13-45"}, "end:"),
    ({"start": "1e12"}, "not a time"),
    ({"start": "2000", "end": "1000"}, "the range is empty"),
], ids=["start-text", "end-bad-date", "start-too-large", "empty-range"])
def test_bad_times_are_a_json_400(api: Api, params: dict[str, str], message: str) -> None:
    response = get(api, **params)
    assert response.status_code == 400, response.text
    assert message in response.json()["error"]["message"]


def test_paging_limits_are_checked(api: Api) -> None:
    assert get(api, limit=0).status_code == 422
    assert get(api, limit=1001).status_code == 422
    assert get(api, offset=-1).status_code == 422


def test_the_history_route_is_its_own_next_to_the_alert_book(api: Api) -> None:
    spec = get(api, "/openapi.json").json()
    assert "get" in spec["paths"][ROUTE] and "get" in spec["paths"]["/api/v1/alerts"]
    body = get(api).json()  # a page of events, whatever /api/v1/alerts/{...} routes exist
    assert set(body) == {"items", "total", "limit", "offset"} and "at" in body["items"][0]
    book = get(api, "/api/v1/alerts").json()
    assert book["total"] == 3 and {a["state"] for a in book["items"]} == {"firing"}


def test_a_nul_in_a_filter_is_refused_not_sent_to_the_database(api: Api) -> None:
    assert get(api, slo="a\x00b").status_code == 422
    assert get(api, alertname="\x00").status_code == 422
