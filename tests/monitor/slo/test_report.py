"""The SLO report over a range: totals, per-step series and burn rates worked out by hand."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from monitor.slo.evaluator import SloEvaluator
from monitor.slo.report import SloReport, build_report
from monitor.slo.source import MinuteArraySource, StoreSliSource
from monitor.slo.spec import Slo
from monitor.store import Store
from tests.monitor.slo.test_store_source import T0 as STORE_T0
from tests.monitor.slo.test_store_source import scrape

T0 = 1_767_225_600  # 2026-01-01T00:00:00Z
DAY = 1440
LEAD_MINUTES = 3 * DAY  # the longest default alert window, 3d: the report's lead-in

Minutes = tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], npt.NDArray[np.bool_]]


def make(name: str = "avail", **fields: Any) -> Slo:
    spec: dict[str, Any] = {"name": name, "objective": 0.99, "sli": {"kind": "availability"}}
    spec.update(fields)
    return Slo.model_validate(spec)


def steady(num_minutes: int, per_minute: float) -> Minutes:
    """``num_minutes`` minutes from T0 of ``per_minute`` events, all good, all with data."""
    total = np.full(num_minutes, per_minute)
    return total.copy(), total, np.ones(num_minutes, dtype=np.bool_)


def report(slo: Slo, minutes: Minutes, start_minute: int, end_minute: int,
           step: float | None = None) -> SloReport:
    source = MinuteArraySource(T0, {slo.name: minutes})
    end = T0 + end_minute * 60
    return build_report(slo, source, T0 + start_minute * 60, end, step, now=end)


def at(minute: int) -> float:
    return T0 + minute * 60.0


def window(result: SloReport, name: str) -> Any:
    return next(w for w in result.burn_rates if w.window == name)


def test_twenty_bad_requests_in_an_hour_spend_a_thirtieth_of_its_budget() -> None:
    good, total, has = steady(LEAD_MINUTES + 60, 1000.0)
    bad_minute = LEAD_MINUTES + 30  # the range's 31st minute
    good[bad_minute] -= 20
    result = report(make(), (good, total, has), LEAD_MINUTES, LEAD_MINUTES + 60)
    totals = result.totals
    # 60 minutes x 1000 = 60,000 requests; the budget allows 1% of them: 600 bad.
    assert (totals.events, totals.bad) == (60_000, 20)
    assert totals.sli == pytest.approx(59_980 / 60_000)          # 99.967%
    assert totals.allowed_bad == pytest.approx(600)
    assert totals.budget_consumed == pytest.approx(20 / 600)     # 3.33%
    assert totals.budget_remaining == pytest.approx(1 - 20 / 600)
    assert totals.objective_met is True
    # Default step for an hour: one minute, 60 points; the bad minute's SLI is 980 / 1000.
    assert result.step_seconds == 60 and len(result.series.end) == 60
    assert result.series.end[30] == at(bad_minute + 1)
    assert result.series.sli[30] == pytest.approx(0.98)
    assert {v for k, v in enumerate(result.series.sli) if k != 30} == {1.0}
    # Burn-down: untouched before, then 1 - 20 / (1% of the 31,000 requests so far).
    assert result.series.budget_remaining[29] == 1.0
    assert result.series.budget_remaining[30] == pytest.approx(1 - 20 / 310)
    assert result.series.budget_remaining[-1] == pytest.approx(1 - 20 / 600)
    # Burn rates: 5m window 20 / 5,000 = 0.4% errors = 0.4x; the 1h one 20 / 60,000 = 0.033x.
    page = window(result, "1h/5m")
    assert page.short[30] == pytest.approx(0.4) and page.short[35] == 0.0
    assert page.long[29] == 0.0 and page.long[30] == pytest.approx(1 / 30)
    assert page.long[-1] == pytest.approx(1 / 30)
    assert result.burn_intervals == ()


OUTAGE_START = LEAD_MINUTES + 120  # a 10-minute full outage, 2 h into a 1-day range
OUTAGE_END = OUTAGE_START + 10


@pytest.fixture(scope="module")
def outage() -> SloReport:
    good, total, has = steady(LEAD_MINUTES + DAY, 100.0)
    good[OUTAGE_START:OUTAGE_END] = 0.0
    return report(make(objective=0.999), (good, total, has), LEAD_MINUTES, LEAD_MINUTES + DAY)


# At 100 requests a minute with a 0.1% budget (100% errors burn at 1000x), each condition holds
# once the long window's bad events pass factor x 0.1% of its events, and until the short
# window no longer holds any outage minute:
# 1h/5m (14.4): 14.4 x 0.1% x 6,000 = 86.4 bad: after 1 minute; until 5m after the end.
# 6h/30m (6): 6 x 0.1% x 36,000 = 216: after 3 minutes; until 30m after.
# 1d/2h (3): 3 x 0.1% x 144,000 = 432: after 5 minutes; until 2h after.
# 3d/6h (1): 1 x 0.1% x 432,000 = 432: after 5 minutes; until 6h after.
@pytest.mark.parametrize(("name", "minutes_to_hold", "short_minutes"), [
    ("1h/5m", 1, 5), ("6h/30m", 3, 30), ("1d/2h", 5, 120), ("3d/6h", 5, 360),
], ids=["1h-page-after-a-minute", "6h-page-after-3-minutes", "1d-ticket-after-5-minutes",
        "3d-ticket-after-5-minutes"])
def test_a_full_outage_holds_each_condition_as_worked_out_by_hand(
        outage: SloReport, name: str, minutes_to_hold: int, short_minutes: int) -> None:
    intervals = [(i.start, i.end) for i in outage.burn_intervals if i.window == name]
    assert intervals == [(at(OUTAGE_START + minutes_to_hold), at(OUTAGE_END + short_minutes))]


def test_burn_rates_at_the_outages_end_match_a_hand_calculation(outage: SloReport) -> None:
    # Default step for a day: 5 minutes (288 points); the outage ends on a step end.
    assert outage.step_seconds == 300 and len(outage.series.end) == 288
    k = outage.series.end.index(at(OUTAGE_END))
    page = window(outage, "1h/5m")
    assert page.factor == pytest.approx(14.4)
    assert page.short[k] == pytest.approx(1000)                # 500 bad of 500
    assert page.long[k] == pytest.approx(1000 / 6000 / 0.001)  # 166.7x
    ticket = window(outage, "3d/6h")
    assert ticket.long[k] == pytest.approx(1000 / 432_000 / 0.001)  # 2.3x
    # 1,000 bad of 144,000 requests against 144 allowed: the day overspent ~6.9 times.
    assert outage.totals.budget_consumed == pytest.approx(1000 / 144)
    assert outage.totals.objective_met is False


def test_the_lead_in_gives_the_first_points_their_full_windows() -> None:
    good, total, has = steady(LEAD_MINUTES + 60, 100.0)
    good[LEAD_MINUTES - 30:LEAD_MINUTES] = 0.0  # 30 bad minutes just before the range
    result = report(make(objective=0.999), (good, total, has), LEAD_MINUTES, LEAD_MINUTES + 60)
    page = window(result, "1h/5m")
    # First step (start, start + 1m]: its 1h window holds the 30 bad minutes: 3,000 of 6,000.
    assert page.long[0] == pytest.approx(0.5 / 0.001)
    assert page.short[0] == pytest.approx(400 / 500 / 0.001)
    # The range itself had no bad request, but the condition held at its start until the
    # short window cleared, 5 minutes in.
    assert result.totals.bad == 0 and result.totals.budget_remaining == 1.0
    assert [(i.start, i.end) for i in result.burn_intervals if i.window == "1h/5m"] == [
        (at(LEAD_MINUTES), at(LEAD_MINUTES + 5))]


def test_no_data_and_no_events_are_null_never_zero() -> None:
    good, total, has = steady(LEAD_MINUTES + 60, 100.0)
    quiet = slice(LEAD_MINUTES + 10, LEAD_MINUTES + 15)    # targets up, no requests
    down = slice(LEAD_MINUTES + 20, LEAD_MINUTES + 30)     # no target answered
    good[quiet] = total[quiet] = 0.0
    good[down] = total[down] = 0.0
    has[down] = False
    result = report(make(), (good, total, has), LEAD_MINUTES, LEAD_MINUTES + 60)
    sli = result.series.sli
    assert all(math.isnan(v) for v in sli[10:15] + sli[20:30])
    assert sli[9] == 1.0 and sli[15] == 1.0
    assert [(i.start, i.end) for i in result.no_data_intervals] == [
        (at(LEAD_MINUTES + 20), at(LEAD_MINUTES + 30))]
    body = result.to_dict()
    assert body["series"]["sli"][20] is None and body["series"]["sli"][9] == 1.0


def test_a_range_without_events_has_no_verdict() -> None:
    result = report(make(), (np.zeros(120), np.zeros(120), np.zeros(120, dtype=np.bool_)),
                    0, 120)
    totals = result.totals
    assert totals.events == 0 and math.isnan(totals.sli) and totals.objective_met is None
    assert math.isnan(totals.budget_remaining)
    assert all(math.isnan(v) for v in result.series.budget_remaining)
    assert all(math.isnan(v) for w in result.burn_rates for v in w.long)
    assert [(i.start, i.end) for i in result.no_data_intervals] == [(at(0), at(120))]
    body = json.loads(json.dumps(result.to_dict(), allow_nan=False))
    assert body["totals"]["sli"] is None and body["totals"]["objective_met"] is None


def test_throughput_timeslices_count_slices_judged_by_their_rate() -> None:
    spec = make("decode", objective=0.95, budgeting="Timeslices", timeslice_seconds="1m",
                sli={"kind": "throughput", "min_per_second": 50})
    seconds = np.full(LEAD_MINUTES + 60, 60.0)  # throughput reads (tokens, seconds with data)
    tokens = seconds * 60.0                     # 60 tokens/s: every slice good
    tokens[LEAD_MINUTES + 10:LEAD_MINUTES + 13] = 30.0 * 60  # 3 slow minutes at 30 tokens/s
    result = report(spec, (tokens, seconds, np.ones(len(seconds), dtype=np.bool_)),
                    LEAD_MINUTES, LEAD_MINUTES + 60)
    totals = result.totals
    # 60 slices, 3 bad: SLI 57/60 = 95%, exactly the 5% x 60 = 3 bad slices allowed.
    assert (totals.events, totals.bad) == (60, 3)
    assert totals.sli == pytest.approx(0.95)
    assert totals.budget_consumed == pytest.approx(1.0) and totals.objective_met is True
    assert result.slo.event_unit == "timeslices"
    assert result.series.sli[10:13] == (0.0, 0.0, 0.0) and result.series.sli[13] == 1.0


def test_ratio_timeslices_are_judged_against_the_slice_target() -> None:
    spec = make(objective=0.9, budgeting="Timeslices", timeslice_seconds="5m",
                timeslice_target=0.99)
    good, total, has = steady(LEAD_MINUTES + 60, 100.0)
    good[LEAD_MINUTES + 5] -= 6    # slice 2: 494 / 500 = 98.8% < 99%: a bad slice
    good[LEAD_MINUTES + 10] -= 5   # slice 3: 495 / 500 = 99% reaches the target: good
    result = report(spec, (good, total, has), LEAD_MINUTES, LEAD_MINUTES + 60)
    # A 5-minute slice SLO steps by whole slices: 12 points, one event each.
    assert result.step_seconds == 300 and result.series.total == (1.0,) * 12
    assert result.series.good[1:3] == (0.0, 1.0)
    assert result.totals.sli == pytest.approx(11 / 12)
    assert "5m slice is good when 0.99" in result.slo.sli


@pytest.mark.parametrize("spec", [
    {}, {"objective": 0.999, "window": "7d"},
    {"budgeting": "Timeslices", "timeslice_seconds": "1m", "timeslice_target": 0.95},
], ids=["occurrences", "7-day-period", "timeslices"])
def test_last_burn_rates_equal_the_evaluators(spec: dict[str, Any]) -> None:
    rng = np.random.default_rng(11)
    num_minutes = LEAD_MINUTES + DAY
    total = rng.poisson(40, num_minutes).astype(float)
    good = total - rng.binomial(total.astype(int), 0.01)
    good[-300:-200] = total[-300:-200] * 0.5
    has = rng.random(num_minutes) > 0.02
    total[~has] = good[~has] = 0.0
    slo = make(**spec)
    source = MinuteArraySource(T0, {slo.name: (good, total, has)})
    end = at(num_minutes)
    result = build_report(slo, source, end - 86400, end, now=end)
    status = SloEvaluator([slo], source, settle_seconds=0,
                          include_open_minute=False).tick(end)[0]
    expected = {b.seconds: b.burn_rate for b in status.burn_rates}
    for burn in result.burn_rates:
        assert burn.long[-1] == pytest.approx(expected[burn.long_seconds], nan_ok=True)
        assert burn.short[-1] == pytest.approx(expected[burn.short_seconds], nan_ok=True)


@pytest.mark.parametrize(("start", "end", "step", "message"), [
    (at(60), at(60), None, "end after start"),
    (at(60), at(0), None, "end after start"),
    (math.nan, at(60), None, "end after start"),
    (at(0), at(60), 30, "at least 60 seconds"),
    (at(0), at(60), 0, "at least 60 seconds"),
    (at(0), at(60), 90, "whole minutes"),
    (at(0), at(2001), 60, "more than 2000"),
    (at(0), at(0) + 59, None, "no whole 1m"),
], ids=["empty-range", "end-before-start", "nan-start", "step-below-a-minute", "zero-step",
        "step-not-whole-minutes", "too-many-points", "shorter-than-a-minute"])
def test_ranges_and_steps_the_report_cannot_honour_raise(
        start: float, end: float, step: float | None, message: str) -> None:
    source = MinuteArraySource(T0, {"avail": steady(3000, 1.0)})
    with pytest.raises(ValueError, match=message):
        build_report(make(), source, start, end, step, now=at(3000))


def test_a_slice_slo_steps_by_whole_slices_and_stops_at_now() -> None:
    spec = make(objective=0.9, budgeting="Timeslices", timeslice_seconds="5m",
                timeslice_target=0.99)
    source = MinuteArraySource(T0, {"avail": steady(120, 10.0)})
    with pytest.raises(ValueError, match="multiple of the 5m timeslice"):
        build_report(spec, source, at(0), at(60), 60, now=at(120))
    with pytest.raises(ValueError, match="closed before now"):
        build_report(spec, source, at(100), at(200), now=at(103))
    # Start rounds down to a slice, the end is clipped to now and rounds down to a slice.
    result = build_report(spec, source, at(0) + 17, at(500), now=at(61) + 30)
    assert (result.start, result.end) == (at(0), at(60))


@pytest.mark.parametrize(("minutes", "step_minutes"), [
    (60, 1), (DAY, 5), (7 * DAY, 60), (30 * DAY, 180), (400 * DAY, 2 * DAY),
], ids=["hour-by-minutes", "day-by-5m", "week-by-hours", "month-by-3h", "400d-by-2d"])
def test_the_default_step_is_a_round_one_under_300_points(minutes: int,
                                                          step_minutes: int) -> None:
    source = MinuteArraySource(T0, {"avail": steady(1, 1.0)})
    result = build_report(make(), source, at(0), at(minutes), now=at(minutes))
    assert result.step_seconds == step_minutes * 60
    assert len(result.series.end) <= 300


def test_ranges_past_the_minute_budget_read_bins_that_divide_every_window() -> None:
    # 100 days and the 3-day lead-in are 148,320 minutes, over the 100,000 read per minute;
    # the windows (5m, 30m, 1h, 2h, 6h, 1d, 3d), 15m no-data, 12h step: 5-minute bins.
    source = MinuteArraySource(T0, {"avail": steady(1, 1.0)})
    result = build_report(make(), source, at(0), at(100 * DAY), now=at(100 * DAY))
    assert (result.step_seconds, result.resolution_seconds) == (12 * 3600, 300)


def test_to_dict_is_strict_json_with_stable_keys(outage: SloReport) -> None:
    body = json.loads(json.dumps(outage.to_dict(), allow_nan=False))
    assert list(body) == ["slo", "start", "end", "step_seconds", "resolution_seconds",
                          "totals", "series", "burn_rates", "burn_intervals",
                          "no_data_intervals", "forecast", "warnings"]
    assert list(body["forecast"]) == ["state", "time_to_exhaustion_seconds",
                                      "budget_at_period_end", "period_end",
                                      "sustained_burn_rate"]
    assert list(body["slo"]) == ["name", "service", "description", "objective", "period",
                                 "budgeting", "timeslice_seconds", "sli", "event_unit"]
    assert list(body["totals"]) == ["events", "good", "bad", "sli", "objective_met",
                                    "allowed_bad", "budget_consumed", "budget_remaining"]
    assert list(body["series"]) == ["end", "good", "total", "sli", "budget_remaining"]
    assert list(body["burn_rates"][0]) == ["window", "severity", "long_seconds",
                                           "short_seconds", "factor", "long", "short"]
    assert body["burn_intervals"][0] == {"window": "1h/5m", "severity": "page",
                                         "start": at(OUTAGE_START + 1),
                                         "end": at(OUTAGE_END + 5)}
    assert body["slo"]["sli"] == ("requests not failing with oom, timeout, model_error, "
                                  "rejected, server_error")


def test_a_report_from_the_store_counts_what_the_collector_stored(store: Store) -> None:
    # Two replicas scraped every 15 s for two minutes; each minute 80 requests, 64 of them
    # with a first token within 200 ms (see test_store_source).
    start = STORE_T0
    store.write([scrape(target, start + 15 * k, stop=10, errors={}, ttft_fast=8, ttft_slow=2)
                 for k in range(1, 9) for target in ("a", "b")])
    slo = make(sli={"kind": "latency", "metric": "ttft", "threshold_seconds": 0.2})
    result = build_report(slo, StoreSliSource(store), start, start + 120, now=start + 120)
    assert result.series.total == (80.0, 80.0) and result.series.sli == (0.8, 0.8)
    # 160 requests, 32 slow; 1% of 160 = 1.6 allowed: the budget is spent 20 times over.
    assert (result.totals.events, result.totals.bad) == (160, 32)
    assert result.totals.budget_consumed == pytest.approx(32 / 1.6)
    assert result.no_data_intervals == ()
