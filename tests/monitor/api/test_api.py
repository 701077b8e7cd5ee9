"""The API over a real store with known data (see conftest): what each route answers,
worked out by hand, and that every error is a JSON body."""

from __future__ import annotations

import re
import time
from typing import Any

import httpx
import pytest

from exporters import schema
from monitor.collect.snapshot import Snapshot, TargetState, series_key
from monitor.store.db import TargetInfo
from tests.monitor.api.conftest import TOKEN, Api, build_state
from tests.monitor.store.builders import SCRAPE_SECONDS
from monitor.api import create_app
from tests.asgi_thread import serving

AUTH = {"Authorization": f"Bearer {TOKEN}"}


def get(api: Api, path: str, **params: Any) -> httpx.Response:
    return httpx.get(f"{api.url}{path}", params=params, timeout=30)


def error_of(response: httpx.Response, status: int) -> str:
    assert response.status_code == status, response.text
    body = response.json()
    assert body["error"]["status"] == status
    message: str = body["error"]["message"]
    return message


def test_slos_give_sli_budget_burn_rates_and_alert_state(api: Api) -> None:
    page = get(api, "/api/v1/slos").json()
    assert page["total"] == 2 and [s["name"] for s in page["items"]] == ["availability", "ttft"]
    availability, ttft = page["items"]
    # 20 requests a scrape over both targets, 1 timeout: error ratio 0.05, burn 0.05 / 0.001
    assert availability["sli"] == pytest.approx(0.95)
    assert availability["events"] == pytest.approx(160 * 20)
    assert availability["budget_remaining"] == pytest.approx(1 - 50)
    assert availability["state"] == "burning"
    assert availability["time_to_exhaustion_seconds"] == 0.0
    burns = {b["window"]: b["burn_rate"] for b in availability["burn_rates"]}
    # A 1-day SLO: the 30-day windows scaled by 1/30 (1h/5m is dropped, 6h/30m is 12m/2m).
    assert burns["2m"] == pytest.approx(50) and burns["12m"] == pytest.approx(50)
    assert {"alertname": "InferwatchSLOBurnRate", "severity": "page", "window": "12m/2m"}.items() \
        <= availability["alerts"][0].items()
    # TTFT: 6 of every 10 observations at or below 250 ms; objective 0.5, so burn 0.4 / 0.5
    assert ttft["sli"] == pytest.approx(0.6)
    assert ttft["budget_remaining"] == pytest.approx(0.2)
    assert ttft["state"] == "ok" and ttft["time_to_exhaustion_seconds"] is not None
    # The outlook a release gate reads: availability has nothing left; TTFT burns 0.8x, so its
    # 20% left is gone in a quarter period (at risk) though a whole period at 0.8x would
    # leave 20% (a rolling window's end is one period on).
    assert availability["budget_state"] == "exhausted"
    assert ttft["budget_state"] == "at_risk"
    assert ttft["sustained_burn_rate"] == pytest.approx(0.8)
    assert ttft["budget_at_period_end"] == pytest.approx(0.2)
    assert ttft["period_end"] == pytest.approx(ttft["evaluated_at"] + 30 * 86400)


def test_one_slo_by_name_and_an_unknown_one_is_a_json_404(api: Api) -> None:
    assert get(api, "/api/v1/slos/ttft").json()["objective"] == 0.5
    assert "'nope' not found" in error_of(get(api, "/api/v1/slos/nope"), 404)
    assert error_of(get(api, "/api/v1/nothing-here"), 404)


def test_lists_are_pages(api: Api) -> None:
    page = get(api, "/api/v1/slos", limit=1, offset=1).json()
    assert [s["name"] for s in page["items"]] == ["ttft"]
    assert (page["total"], page["limit"], page["offset"]) == (2, 1, 1)
    assert "limit" in error_of(get(api, "/api/v1/slos", limit=0), 422)


def test_alerts_are_listed_and_filtered_by_state(api: Api) -> None:
    alerts = get(api, "/api/v1/alerts").json()["items"]
    burning = [a for a in alerts if a["labels"].get("slo") == "availability"]
    assert burning and {a["state"] for a in burning} <= {"pending", "firing"}
    assert burning[0]["annotations"]["summary"].startswith("SLO availability")
    assert get(api, "/api/v1/alerts", state="resolved").json()["total"] == 0


def test_targets_and_a_series_of_each_targets_error_ratio(api: Api) -> None:
    targets = get(api, "/api/v1/targets").json()["items"]
    assert [(t["name"], t["state"], t["labels"]) for t in targets] == [
        ("ref-0", "unknown", {"model": "tiny"}), ("ref-1", "unknown", {"model": "tiny"})]
    end = api.now // 60 * 60 - 120
    body = get(api, "/api/v1/targets/ref-0/series", metric="error_ratio", start=end - 600,
               end=end, step=60).json()
    assert body["unit"] == "ratio" and len(body["points"]) == 10
    assert all(v == pytest.approx(0.1) for _, v in body["points"])  # 4 timeouts in 40
    quiet = get(api, "/api/v1/targets/ref-1/series", metric="error_ratio", start=end - 600,
                end=end, step=60).json()
    assert all(v == 0.0 for _, v in quiet["points"])
    before = get(api, "/api/v1/targets/ref-0/series", metric="error_ratio",
                 start="2026-01-01T00:00:00Z", end="2026-01-01T00:10:00Z").json()
    assert all(v is None for _, v in before["points"])  # no data is null, never 0


def test_a_series_of_the_prefix_cache_hit_ratio(api: Api) -> None:
    """vLLM's lookups and hits in tokens: 30 of 120 found each scrape; ref-0 counts none."""
    end = api.now // 60 * 60 - 120
    hits = series_key(schema.get_spec(schema.PREFIX_CACHE_HITS).exposed_name, {"model": "m"})
    queries = series_key(schema.get_spec(schema.PREFIX_CACHE_QUERIES).exposed_name,
                         {"model": "m"})
    api.state.store.register_target(TargetInfo("vllm-0", "http://127.0.0.1:9/metrics", "vllm",
                                               {"model": "m"}))
    api.state.store.write([
        Snapshot("vllm-0", t - SCRAPE_SECONDS, t, TargetState.UP,
                 counters={hits: 30.0, queries: 120.0})
        for t in (end - 900 + SCRAPE_SECONDS * k for k in range(1, 61))])
    body = get(api, "/api/v1/targets/vllm-0/series", metric="prefix_cache_hit_ratio",
               start=end - 600, end=end, step=60).json()
    assert body["unit"] == "ratio" and len(body["points"]) == 10
    assert all(v == pytest.approx(0.25) for _, v in body["points"])
    other = get(api, "/api/v1/targets/ref-0/series", metric="prefix_cache_hit_ratio",
                start=end - 600, end=end, step=60).json()
    assert all(v is None for _, v in other["points"])  # no lookups counted: null, not 0


@pytest.mark.parametrize(("params", "status", "needle"), [
    ({"metric": "bogus"}, 422, "metric"),
    ({"metric": "error_ratio", "start": "yesterday"}, 400, "ISO 8601"),
    ({"metric": "error_ratio", "start": "100", "end": "50"}, 400, "range is empty"),
    ({"metric": "error_ratio", "start": "0", "step": "1"}, 400, "at most"),
], ids=["unknown metric", "bad time", "empty range", "too many points"])
def test_bad_series_queries_say_what_is_wrong(api: Api, params: dict[str, str], status: int,
                                              needle: str) -> None:
    assert needle in error_of(get(api, "/api/v1/targets/ref-0/series", **params), status)


def test_changes_need_the_bearer_token(api: Api) -> None:
    body = {"url": "http://127.0.0.1:9", "model": "tiny"}
    no_token = httpx.post(f"{api.url}/api/v1/sweeps", json=body, timeout=10)
    assert "Bearer" in error_of(no_token, 401)
    wrong = httpx.post(f"{api.url}/api/v1/sweeps", json=body, timeout=10,
                       headers={"Authorization": "Bearer wrong-token-0123456789"})
    error_of(wrong, 401)


def test_a_monitor_without_a_token_refuses_every_change(tmp_path: Any) -> None:
    state = build_state(tmp_path, None)
    with serving(create_app(state)) as url:
        r = httpx.post(f"{url}/api/v1/sweeps", headers=AUTH, timeout=10,
                       json={"url": "http://127.0.0.1:9", "model": "tiny"})
        assert "--token" in error_of(r, 403)
    state.store.close()


def wait_for(api: Api, path: str, timeout: float = 60) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        run: dict[str, Any] = get(api, path).json()
        if run["status"] != "running":
            return run
        time.sleep(0.2)
    raise AssertionError(f"{path} still running after {timeout} s")


def test_a_sweep_against_an_unreachable_endpoint_fails_naming_it(api: Api) -> None:
    r = httpx.post(f"{api.url}/api/v1/sweeps", headers=AUTH, timeout=10,
                   json={"url": "http://127.0.0.1:9", "model": "tiny", "step_seconds": 2})
    assert r.status_code == 202 and r.json()["status"] == "running"
    run = wait_for(api, f"/api/v1/sweeps/{r.json()['id']}")
    assert run["status"] == "failed" and "127.0.0.1:9" in run["error"]
    assert get(api, "/api/v1/sweeps").json()["total"] == 1
    error_of(get(api, f"/api/v1/canaries/{r.json()['id']}"), 404)  # a sweep, not a canary


def test_a_stored_canary_fails_the_target_with_errors(api: Api) -> None:
    end = api.now // 60 * 60 - 120
    r = httpx.post(f"{api.url}/api/v1/canaries", headers=AUTH, timeout=10, json={
        "mode": "stored", "baseline_target": "ref-1", "canary_target": "ref-0",
        "start": end - 1800, "end": end, "step_seconds": 60})
    assert r.status_code == 202, r.text
    run = wait_for(api, f"/api/v1/canaries/{r.json()['id']}")
    assert run["status"] == "done", run
    judgement = run["result"]["judgement"]
    assert judgement["outcome"] == "fail" and "error_rate" in judgement["critical_failures"]


def test_a_stored_canary_of_an_unknown_target_is_refused(api: Api) -> None:
    r = httpx.post(f"{api.url}/api/v1/canaries", headers=AUTH, timeout=10, json={
        "mode": "stored", "baseline_target": "ref-1", "canary_target": "nope",
        "start": 1, "end": 2})
    assert "'nope'" in error_of(r, 404)


def test_health_readiness_and_own_metrics(api: Api) -> None:
    assert get(api, "/healthz").json() == {"status": "ok"}
    assert get(api, "/readyz").json()["checks"] == {"store": "ok", "evaluation": "ok"}
    get(api, "/api/v1/slos/ttft")
    text = get(api, "/metrics").text
    budget = re.search(r'inferwatch_slo_budget_remaining_ratio\{slo="ttft"\} (\S+)', text)
    assert budget is not None and float(budget.group(1)) == pytest.approx(0.2)
    assert 'inferwatch_slo_budget_state{slo="availability",state="exhausted"} 1.0' in text
    assert 'inferwatch_slo_budget_state{slo="availability",state="healthy"} 0.0' in text
    at_end = re.search(r'inferwatch_slo_budget_forecast_ratio\{slo="ttft"\} (\S+)', text)
    assert at_end is not None and float(at_end.group(1)) == pytest.approx(0.2)
    assert 'inferwatch_api_requests_total{method="GET",route="/api/v1/slos/{name}",' \
           'status="200"} 1.0' in text
    assert "inferwatch_evaluation_duration_seconds" in text


def test_not_ready_before_the_first_evaluation(tmp_path: Any) -> None:
    state = build_state(tmp_path, None)
    with serving(create_app(state)) as url:
        r = httpx.get(f"{url}/readyz", timeout=10)
        assert "evaluation: not yet run" in error_of(r, 503)
    state.store.close()


def test_the_report_as_json_over_a_range(api: Api) -> None:
    end = api.now // 60 * 60 - 60
    body = get(api, "/api/v1/slos/availability/report", start=end - 1800, end=end,
               step=300).json()
    assert body["slo"]["name"] == "availability" and body["step_seconds"] == 300
    totals = body["totals"]
    assert totals["events"] == pytest.approx(120 * 20)  # 30 minutes of 4 scrapes of 20
    assert totals["sli"] == pytest.approx(0.95) and totals["objective_met"] is False
    assert totals["budget_consumed"] == pytest.approx(50)
    assert len(body["series"]["sli"]) == 6


def test_a_report_of_a_bad_range_is_a_json_400(api: Api) -> None:
    message = error_of(get(api, "/api/v1/slos/ttft/report", start="10", end="5"), 400)
    assert "range is empty" in message


@pytest.mark.integration
def test_the_html_report_renders_its_plots_in_headless_chromium(api: Api) -> None:
    from tests.browser import dump_dom
    end = int(api.now // 60 * 60 - 60)
    url = (f"{api.url}/api/v1/slos/availability/report?format=html&start={end - 1800}"
           f"&end={end}")
    page = httpx.get(url, timeout=30)
    assert page.headers["content-type"].startswith("text/html")
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page.text  # the description, escaped
    dom = dump_dom(url)
    assert 'data-plots-rendered="3"' in dom
