"""``monitor.client.Client`` against the real API on a port-0 uvicorn server: every frame holds
what the route's JSON says, column for column, with typed columns and UTC times."""

from __future__ import annotations

import math
from typing import Any

import httpx
import pytest

pd = pytest.importorskip("pandas")

from monitor.client import Client, ClientError  # noqa: E402
from tests.monitor.client.conftest import Served  # noqa: E402

UTC_TIME = "datetime64[ns, UTC]"


def get(served: Served, path: str, **params: Any) -> Any:
    return httpx.get(f"{served.api.url}{path}", params=params, timeout=30).json()


def back(column: Any) -> list[Any]:
    """A frame's column as the JSON had it: times as unix seconds, NaN/NaT/NA as None."""
    if str(column.dtype) == UTC_TIME:
        return [None if pd.isna(t) else t.timestamp() for t in column]
    return [None if pd.isna(v) else v for v in column]


def same(column: Any, expected: list[Any]) -> bool:
    got = back(column)
    return len(got) == len(expected) and all(
        g == e if not isinstance(e, float) else math.isclose(g, e, rel_tol=1e-12, abs_tol=1e-6)
        for g, e in zip(got, expected))


@pytest.fixture
def client(served: Served) -> Any:
    with Client(served.api.url) as c:
        yield c


def test_slos_are_one_typed_row_each_as_the_api_says(served: Served, client: Client) -> None:
    items = get(served, "/api/v1/slos")["items"]
    frame = client.slos()
    assert list(frame["name"]) == ["availability", "ttft"]
    for column in ("objective", "sli", "events", "budget_remaining", "budget_at_period_end",
                   "sustained_burn_rate", "period_end", "evaluated_at"):
        assert same(frame[column], [s[column] for s in items]), column
    assert list(frame["state"]) == [s["state"] for s in items]
    assert list(frame["budget_state"]) == ["exhausted", "at_risk"]
    assert {str(frame[c].dtype) for c in ("period_end", "evaluated_at")} == {UTC_TIME}
    assert str(frame["budget_remaining"].dtype) == "float64"
    burns = {b["window"]: b["burn_rate"] for b in items[0]["burn_rates"]}
    assert frame.loc[0, "burn_rate_12m"] == pytest.approx(burns["12m"]) == pytest.approx(50)


def test_lists_are_read_page_by_page(served: Served) -> None:
    with Client(served.api.url, page_limit=1) as one, Client(served.api.url) as all_at_once:
        pd.testing.assert_frame_equal(one.slos(), all_at_once.slos())
    with Client(served.api.url, page_limit=2) as two:
        runs = two.runs("sweep")
    listed = get(served, "/api/v1/sweeps")
    assert listed["total"] == 3 and list(runs["id"]) == [r["id"] for r in listed["items"]]
    assert set(runs["id"]) == set(served.sweep_ids)


def test_slo_history_is_the_reports_steps_and_burn_rates(served: Served,
                                                         client: Client) -> None:
    end = served.api.now // 60 * 60 - 60
    report = get(served, "/api/v1/slos/availability/report", start=end - 1800, end=end,
                 step=300)
    frame = client.slo_history("availability", start=end - 1800, end=end, step=300)
    assert len(frame) == 6 and str(frame["time"].dtype) == UTC_TIME
    assert same(frame["time"], report["series"]["end"])
    for column in ("good", "total", "sli", "budget_remaining"):
        assert same(frame[column], report["series"][column]), column
    for burn in report["burn_rates"]:
        assert same(frame[f"burn_rate_long_{burn['window']}"], burn["long"])
        assert same(frame[f"burn_rate_short_{burn['window']}"], burn["short"])
    assert frame["sli"].tolist() == pytest.approx([0.95] * 6)


def test_targets_series_and_alerts(served: Served, client: Client) -> None:
    targets = client.targets()
    assert list(targets["name"]) == ["ref-0", "ref-1"]
    assert list(targets["label_model"]) == ["tiny", "tiny"]
    end = served.api.now // 60 * 60 - 60
    body = get(served, "/api/v1/targets/ref-0/series", metric="error_ratio", start=end - 600,
               end=end, step=60)
    series = client.series("ref-0", "error_ratio", start=end - 600, end=end, step=60)
    assert same(series["time"], [t for t, _ in body["points"]])
    assert same(series["error_ratio"], [v for _, v in body["points"]])
    assert series.attrs["unit"] == body["unit"]
    alerts = get(served, "/api/v1/alerts")["items"]
    frame = client.alerts()
    assert list(frame["fingerprint"]) == [a["fingerprint"] for a in alerts]
    assert same(frame["active_at"], [a["active_at"] for a in alerts])
    assert list(frame["slo"]) == [a["labels"].get("slo") for a in alerts]
    assert client.alerts(state="resolved").empty


def test_alert_history_is_the_history_routes_events_newest_first(served: Served) -> None:
    events = get(served, "/api/v1/alerts/history")["items"]
    assert len(events) == 7
    with Client(served.api.url, page_limit=2) as client:  # four pages
        frame = client.alert_history()
        assert len(client.alert_history(slo="availability", start=served.api.now - 1500,
                                        end=served.api.now)) == 3
        assert client.alert_history(alertname="nope").empty
    assert list(frame["id"]) == [e["id"] for e in events]
    assert str(frame["at"].dtype) == UTC_TIME and str(frame["id"].dtype) == "Int64"
    for column in ("at", "fired_at", "value"):
        assert same(frame[column], [e[column] for e in events]), column
    for column in ("state", "previous_state", "alertname", "fingerprint"):
        assert back(frame[column]) == [e[column] for e in events], column
    assert back(frame["window"]) == [e["labels"]["window"] for e in events]
    assert back(frame["dashboard_url"]) == [e["annotations"].get("dashboard_url")
                                            for e in events]
    assert back(frame["label_service"]) == ["inference"] * 7


def test_a_sweeps_steps_and_a_canarys_verdicts(served: Served, client: Client) -> None:
    document = get(served, f"/api/v1/sweeps/{served.sweep_ids[0]}")["result"]
    steps = client.sweep(served.sweep_ids[0])
    assert same(steps["rate"], [p["rate"] for p in document["points"]])
    assert list(steps["saturated"]) == [p["saturated"] for p in document["points"]]
    assert same(steps["ttft_p99_seconds"],
                [p["summary"]["latency"]["ttft"]["percentiles"]["p99"]
                 for p in document["points"]])
    assert steps.attrs["max_rate_under_slo"] == document["max_rate_under_slo"]
    runs = client.runs("sweep").set_index("id")
    assert runs.loc[served.sweep_ids[0], "max_rate_under_slo"] == 6.0
    assert runs.loc[served.sweep_ids[2], "status"] == "failed"

    judgement = get(served, f"/api/v1/canaries/{served.canary_id}")["result"]["judgement"]
    verdicts = client.canary(served.canary_id)
    assert list(verdicts["name"]) == [r["name"] for r in judgement["results"]]
    assert list(verdicts["verdict"]) == [r["verdict"] for r in judgement["results"]]
    assert same(verdicts["p_value"], [r["p_value"] for r in judgement["results"]])
    assert str(verdicts["n_canary"].dtype) == "Int64"
    assert verdicts.attrs["outcome"] == judgement["outcome"] == "fail"
    assert client.runs("canary").loc[0, "outcome"] == "fail"


def test_an_api_error_is_a_client_error_naming_route_status_and_message(
        client: Client, served: Served) -> None:
    with pytest.raises(ClientError) as caught:
        client.slo_history("nope")
    assert caught.value.status == 404 and caught.value.code == "not_found"
    assert str(caught.value) == "/api/v1/slos/nope/report: 404: SLO 'nope' not found"
    with pytest.raises(ClientError, match="has no result .failed: refused"):
        client.sweep(served.sweep_ids[2])
    with pytest.raises(ClientError, match="422"):
        client.series("ref-0", "no_such_metric")


def test_no_server_is_a_client_error_too() -> None:
    with Client("http://127.0.0.1:9", timeout=2) as client, \
            pytest.raises(ClientError, match="no answer from http://127.0.0.1:9") as caught:
        client.targets()
    assert caught.value.status is None and caught.value.route == "/api/v1/targets"
