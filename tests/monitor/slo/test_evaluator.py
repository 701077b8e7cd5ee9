"""The monitor's SLO evaluator on per-minute series with known answers."""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pytest

from monitor.slo.evaluator import SloEvaluator, SloState, SloStatus
from monitor.slo.source import MinuteArraySource, Step
from monitor.slo.spec import Slo
from monitor.slo.windows import BURN_ALERT, NO_DATA_ALERT, burn_windows

T0 = 1_767_225_600  # 2026-01-01T00:00:00Z
DAY = 1440


def slo(name: str = "avail", **fields: Any) -> Slo:
    spec: dict[str, Any] = {"name": name, "objective": 0.999, "sli": {"kind": "availability"}}
    spec.update(fields)
    return Slo.model_validate(spec)


def series(days: float, per_minute: float = 100.0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    n = round(days * DAY)
    total = np.full(n, per_minute)
    return total.copy(), total, np.ones(n, dtype=bool)


def active(status: SloStatus, alertname: str = BURN_ALERT) -> list[str]:
    return [c.labels["window"] for c in status.conditions
            if c.active and c.labels["alertname"] == alertname]


def test_full_errors_page_at_the_workbooks_detection_time() -> None:
    good, total, has = series(33)
    injected = 32 * DAY
    good[injected:] = 0.0
    spec = slo()
    evaluator = SloEvaluator([spec], MinuteArraySource(T0, {"avail": (good, total, has)}),
                             settle_seconds=0)
    page = burn_windows(spec)[0]
    expected = page.detection_seconds(1.0, spec.error_budget)  # 51.84 s
    assert expected == pytest.approx(51.84)
    fired = None
    for dt in range(-300, 600, 10):
        status = evaluator.tick(T0 + injected * 60 + dt)[0]
        if "1h/5m" in active(status) and fired is None:
            fired = dt
        if dt < 0:
            assert status.state is SloState.OK and active(status) == []
    assert fired is not None
    # Minute data: detection lands on the first minute boundary past the predicted time.
    assert expected <= fired <= expected + 60


def test_ratios_are_sums_over_sums_never_means_of_ratios() -> None:
    good, total, has = series(1)
    total[-2], good[-2] = 1000.0, 990.0  # 1% bad
    total[-1], good[-1] = 10.0, 0.0      # 100% bad
    evaluator = SloEvaluator([slo()], MinuteArraySource(T0, {"avail": (good, total, has)}),
                             settle_seconds=0)
    status = evaluator.tick(T0 + DAY * 60)[0]
    five = next(b for b in status.burn_rates if b.window == "5m")
    assert five.error_ratio == pytest.approx(20 / (1000 + 10 + 3 * 100))
    assert five.burn_rate == pytest.approx(five.error_ratio / 0.001)


def test_low_traffic_below_min_events_does_not_page() -> None:
    good, total, has = series(2, per_minute=1.0)
    good[-30:] = 0.0
    quiet = slo(alerting={"min_events": 5000})  # more than 2 days bring
    loud = slo("loud")
    source = MinuteArraySource(T0, {"avail": (good, total, has), "loud": (good, total, has)})
    statuses = SloEvaluator([quiet, loud], source, settle_seconds=0).tick(T0 + 2 * DAY * 60)
    assert active(statuses[0]) == [] and statuses[0].state is SloState.OK
    assert "1h/5m" in active(statuses[1])
    assert statuses[0].burn_rates == statuses[1].burn_rates  # the numbers are still shown


def test_no_data_is_its_own_state_never_met() -> None:
    good, total, has = series(1)
    good[-20:] = total[-20:] = 0.0
    has[-20:] = False
    status = SloEvaluator([slo()], MinuteArraySource(T0, {"avail": (good, total, has)}),
                          settle_seconds=0).tick(T0 + DAY * 60)[0]
    assert status.state is SloState.NO_DATA
    assert active(status, NO_DATA_ALERT) == ["15m"]
    assert active(status) == []
    assert math.isnan(next(b for b in status.burn_rates if b.window == "5m").burn_rate)


def test_a_fresh_monitor_over_an_empty_store_raises_no_data_only_after_watching_for_it(
        ) -> None:
    good, total, has = series(1)
    good[:] = total[:] = 0.0
    has[:] = False                     # nothing stored, ever: the monitor has just started
    evaluator = SloEvaluator([slo()], MinuteArraySource(T0, {"avail": (good, total, has)}),
                             settle_seconds=0)
    start = T0 + DAY * 60 - 3600
    first = evaluator.tick(start)[0]
    assert first.state is SloState.NO_DATA and active(first, NO_DATA_ALERT) == []
    assert active(evaluator.tick(start + 14 * 60)[0], NO_DATA_ALERT) == []
    assert active(evaluator.tick(start + 15 * 60)[0], NO_DATA_ALERT) == ["15m"]


def test_incremental_ticks_equal_a_fresh_evaluation() -> None:
    rng = np.random.default_rng(7)
    n = 4 * DAY
    total = rng.poisson(50, n).astype(float)
    good = total - rng.binomial(total.astype(int), 0.002)
    good[3 * DAY:3 * DAY + 90] = 0.0
    has = rng.random(n) > 0.01
    total[~has] = good[~has] = 0.0
    spec = slo(window="7d")
    source = MinuteArraySource(T0, {"avail": (good, total, has)})
    ticking = SloEvaluator([spec], source, settle_seconds=0)
    for minute in range(2 * DAY, n, 7):
        ticking.tick(T0 + minute * 60 + 13)
    now = T0 + (n - 1) * 60 + 13
    a, b = ticking.tick(now)[0], SloEvaluator([spec], source, settle_seconds=0).tick(now)[0]
    assert a.burn_rates == b.burn_rates and a.events == b.events
    assert [c.active for c in a.conditions] == [c.active for c in b.conditions]


def test_budget_remaining_and_time_to_exhaustion() -> None:
    good, total, has = series(30)
    good[-60:] = 99.0  # 1% errors for the last hour: burn rate 10
    spec = slo()
    status = SloEvaluator([spec], MinuteArraySource(T0, {"avail": (good, total, has)}),
                          settle_seconds=0).tick(T0 + 30 * DAY * 60)[0]
    bad, events = 60.0, 30 * DAY * 100.0
    assert status.events == events
    assert status.budget_remaining == pytest.approx(1 - (bad / events) / 0.001)
    burn = next(b for b in status.burn_rates if b.window == "1h").burn_rate
    assert burn == pytest.approx(10.0)
    assert status.time_to_exhaustion_seconds == pytest.approx(
        status.budget_remaining * 30 * 86400 / burn)


def test_throughput_timeslices_count_slow_slices_as_bad() -> None:
    tokens = np.full(DAY, 60 * 100.0)          # 100 tokens/s
    tokens[-120:] = 60 * 40.0                   # 40 tokens/s for two hours
    has = np.ones(DAY, dtype=bool)
    spec = Slo.model_validate({
        "name": "tput", "objective": 0.95, "window": "7d", "budgeting": "Timeslices",
        "timeslice_seconds": "5m",
        "sli": {"kind": "throughput", "metric": "generation_tokens", "min_per_second": 50}})
    # Throughput reads as (tokens, seconds with data) per minute.
    source = MinuteArraySource(T0, {"tput": (tokens, np.full(DAY, 60.0), has)})
    status = SloEvaluator([spec], source, settle_seconds=0).tick(T0 + DAY * 60)[0]
    assert status.events == DAY / 5
    assert status.sli == pytest.approx(1 - 24 / (DAY / 5))
    # A 7-day SLO's fast page is the 30-day 1h/5m scaled by 7/30, in whole 5-minute slices.
    fast = next(b for b in status.burn_rates if b.window == "15m")
    assert fast.error_ratio == 1.0 and fast.events == 3
    assert "15m/5m" in active(status)


def test_a_calendar_month_counts_from_the_first_of_the_month() -> None:
    good, total, has = series(40)
    start = MinuteArraySource(T0, {"m": (good, total, has)})
    spec = slo("m", window={"calendar": "month"})
    now = T0 + 40 * DAY * 60  # 2026-02-10
    status = SloEvaluator([spec], start, settle_seconds=0).tick(now)[0]
    first = datetime(2026, 2, 1, tzinfo=UTC).timestamp()
    assert status.events == (now - first) / 60 * 100


def test_one_unreadable_slo_does_not_stop_the_others() -> None:
    class Flaky(MinuteArraySource):
        def read(self, slo: Slo, start: float, end: float, step: float) -> Sequence[Step]:
            if slo.name == "broken":
                raise ValueError("no bucket bound at 0.2s")
            return super().read(slo, start, end, step)

    good, total, has = series(1)
    source = Flaky(T0, {"avail": (good, total, has)})
    statuses = SloEvaluator([slo("broken"), slo()], source, settle_seconds=0).tick(T0 + 3600)
    assert statuses[0].state is SloState.ERROR and "bucket bound" in (statuses[0].error or "")
    assert statuses[1].state is SloState.OK


def test_explicit_windows_replace_the_table() -> None:
    spec = slo(alerting={"windows": [{"severity": "page", "long_seconds": "2h",
                                      "short_seconds": "10m", "factor": 10}]})
    (window,) = burn_windows(spec)
    assert (window.name, window.factor) == ("2h/10m", 10)
    assert window.budget_consumed == pytest.approx(10 * 7200 / (30 * 86400))


def test_a_window_spans_exactly_its_length_with_the_open_minute_read_apart() -> None:
    """At 30 s into a minute, a 2-minute window is those 30 s (read afresh), the last closed
    minute and half of the one before, as Prometheus' increase()[2m] would count: not two
    whole minutes plus the open part (which resolved alerts a minute after Prometheus)."""
    good, total, has = series(1)
    good[-2] = 90.0  # the minute before the last: 10 bad of 100
    spec = slo(window="1d")  # its windows are 12m/2m, 48m/4m, 2h24m/12m
    evaluator = SloEvaluator([spec], MinuteArraySource(T0, {"avail": (good, total, has)}),
                             settle_seconds=0)
    status = evaluator.tick(T0 + DAY * 60 + 30)[0]  # the source has nothing for the open 30 s
    two = next(b for b in status.burn_rates if b.window == "2m")
    assert two.events == pytest.approx(150)
    assert two.error_ratio == pytest.approx(5 / 150)
    twelve = next(b for b in status.burn_rates if b.window == "12m")
    assert twelve.events == pytest.approx(1150) and twelve.error_ratio == pytest.approx(10 / 1150)
