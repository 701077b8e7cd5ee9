"""SPOT thresholds (monitor.anomaly.evt) and the calibrated series detector built on them."""

from __future__ import annotations

import numpy as np
import pytest

from monitor.anomaly.calibrated import CalibratedDetector, CalibratedParams
from monitor.anomaly.evt import Spot, fit_gpd
from monitor.anomaly.params import AnomalyParams


@pytest.mark.parametrize(("xi", "sigma"), [(0.0, 1.0), (0.3, 2.0), (0.6, 1.0)])
def test_the_gpd_fit_recovers_its_parameters(xi: float, sigma: float) -> None:
    rng = np.random.default_rng(1)
    u = rng.random(20_000)
    sample = sigma * np.log(1 / u) if xi == 0 else sigma / xi * (u ** -xi - 1)
    fitted = fit_gpd(sample)
    assert fitted.xi == pytest.approx(xi, abs=0.05)
    assert fitted.sigma == pytest.approx(sigma, rel=0.08)


def test_a_bounded_tail_is_fitted_as_an_exponential_one() -> None:
    """Peaks that look bounded (xi -0.3) get xi 0: a threshold beyond the largest seen."""
    u = np.random.default_rng(1).random(20_000)
    sample = 1.0 / -0.3 * (u ** 0.3 - 1)
    assert fit_gpd(sample).xi == 0.0
    assert fit_gpd(sample).sigma == pytest.approx(sample.mean(), rel=1e-9)


@pytest.mark.parametrize("noise", ["normal", "student3"])
def test_the_alarm_rate_is_near_the_risk_asked(noise: str) -> None:
    """On noise with no anomaly, a threshold set for 1e-3 alarms about once in 1,000 points,
    light or heavy tailed: the point of EVT over a fixed z."""
    rng = np.random.default_rng(2)
    x = np.abs(rng.standard_normal(200_000) if noise == "normal"
               else rng.standard_t(3, 200_000))
    spot = Spot(1e-3, init_points=2000)
    alarms = sum(spot.update(v)[1] for v in x.tolist())
    rate = alarms / (len(x) - 2000)
    assert 0.4e-3 < rate < 2.5e-3


def test_the_threshold_never_goes_under_its_minimum() -> None:
    spot = Spot(1e-3, init_points=100, minimum=3.0)
    for v in [0.0] * 100:  # a quantized stream: no peak at all
        spot.update(v)
    assert spot.z == 3.0
    assert spot.update(1.0) == (0.499, False) and spot.update(4.0)[1]


def test_a_level_shift_alerts_once_and_the_score_marks_its_start() -> None:
    rng = np.random.default_rng(3)
    x = 100 + rng.standard_normal(3000)
    x[2500:] += 20  # a lasting shift of 20 sigmas (20%: a spread is at least 5% of the level)
    params = AnomalyParams(step_seconds=300.0)
    detector = CalibratedDetector(params, calibration=CalibratedParams(alerts_per_week=1.0),
                                  expected_points=len(x))
    out = detector.replay(x)
    starts = np.flatnonzero(out.active & ~np.concatenate(([False], out.active[:-1])))
    assert [s for s in starts if s >= 2500] and 2500 <= starts[-1] <= 2510
    assert list(np.flatnonzero(out.score >= 0.5)) == list(starts)


def test_quiet_noise_alerts_about_as_often_as_asked() -> None:
    """Four weeks of 5-minute noise, one false alert per week asked: a handful, not dozens."""
    rng = np.random.default_rng(4)
    weeks = 4
    x = 50 + 3 * rng.standard_normal(weeks * 2016)
    out = CalibratedDetector(AnomalyParams(step_seconds=300.0), expected_points=len(x)
                             ).replay(x)
    starts = int(np.count_nonzero(out.active & ~np.concatenate(([False], out.active[:-1]))))
    assert starts <= 2 * weeks


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="alerts_per_week must be positive"):
        CalibratedParams(alerts_per_week=0)
    with pytest.raises(ValueError, match="need 0 < risk"):
        Spot(0.5)


def test_a_holiday_dip_in_a_daily_cycle_alerts_and_ordinary_days_do_not() -> None:
    """Taxi-like demand: a daily cycle (5-minute steps, four weeks, noise 5%), then one day at
    half its usual level. The dip alerts within hours; the days before it do not."""
    rng = np.random.default_rng(5)
    day = 288
    t = np.arange(28 * day)
    x = 1000 + 600 * np.sin(2 * np.pi * t / day) + 50 * rng.standard_normal(len(t))
    holiday = slice(24 * day, 25 * day)
    x[holiday] *= 0.5
    out = CalibratedDetector(AnomalyParams(step_seconds=300.0), expected_points=len(x)
                             ).replay(x)
    starts = np.flatnonzero(out.active & ~np.concatenate(([False], out.active[:-1])))
    assert any(24 * day <= s < 24 * day + 36 for s in starts), starts  # within 3 hours
    learned = int(len(x) * 0.15)
    assert len([s for s in starts if learned <= s < 24 * day]) <= 2  # three weeks: <= 2 false
