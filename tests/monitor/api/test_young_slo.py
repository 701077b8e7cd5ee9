"""A young SLO through the API (issue 30): ten minutes of data on a 30-day SLO give the budget
of the events seen, say that it is a partial period and how long, and a report from the first
event has a point per minute (tests/monitor/api/young_slo.py works the numbers out)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.monitor.api.conftest import Api
from tests.monitor.api.young_slo import BUDGET_REMAINING, EVENTS, SLI, served_young


@pytest.fixture(scope="module")
def young(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Api, float]]:
    with served_young(tmp_path_factory.mktemp("young")) as served:
        yield served


def get(api: Api, path: str, **params: Any) -> Any:
    response = httpx.get(f"{api.url}{path}", params=params, timeout=30)
    assert response.status_code == 200, response.text
    return response.json()


def test_the_budget_is_that_of_the_events_seen_over_the_history_seen(
        young: tuple[Api, float]) -> None:
    api, first_minute = young
    slo = get(api, "/api/v1/slos/young-ttft")
    assert slo["events"] == pytest.approx(EVENTS) and slo["sli"] == pytest.approx(SLI)
    # 1 - 0.4 / 0.01 = -39: the 800 events' budget spent 40 times over, whatever the period.
    assert slo["budget_remaining"] == pytest.approx(BUDGET_REMAINING)
    assert slo["budget_basis"] == "partial"
    assert slo["observed_seconds"] == pytest.approx(slo["evaluated_at"] - first_minute)
    assert 11 * 60 <= slo["observed_seconds"] < 12 * 60


def test_an_slo_without_events_has_no_budget_and_no_basis(young: tuple[Api, float]) -> None:
    idle = get(young[0], "/api/v1/slos/idle")
    assert (idle["budget_remaining"], idle["budget_basis"], idle["observed_seconds"]) == \
        (None, "none", None)


def test_a_window_longer_than_the_history_is_the_ratio_of_the_events_it_holds(
        young: tuple[Api, float]) -> None:
    """Each window, 3 days as 5 minutes, holds the events there are; none is read as if full
    (events summed over events summed: 0.4 / 0.01 = 40x in every one that holds them all)."""
    slo = get(young[0], "/api/v1/slos/young-ttft")
    for burn in slo["burn_rates"]:
        if burn["seconds"] >= 15 * 60:
            assert burn["events"] == pytest.approx(EVENTS), burn["window"]
        assert burn["burn_rate"] == pytest.approx(40), burn["window"]


def test_the_report_from_the_first_event_has_a_point_per_minute(
        young: tuple[Api, float]) -> None:
    api, first_minute = young
    report = get(api, "/api/v1/slos/young-ttft/report", start=first_minute)
    assert report["start"] == first_minute and report["step_seconds"] == 60
    series = report["series"]
    drawn = [v for v in series["budget_remaining"] if v is not None]
    assert len(drawn) >= 10
    assert drawn[-1] == pytest.approx(BUDGET_REMAINING)
    assert all(v == pytest.approx(SLI) for v in series["sli"] if v is not None)
    assert report["totals"]["events"] == pytest.approx(EVENTS)
