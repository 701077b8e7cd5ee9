"""The one parameter set of every detector.

Durations are counted in steps (points of the series); at the default 60 s step "5 steps" is
the 5 minutes of "tokens/s below 70% of its baseline for 5 minutes". The seasonal period is a
week in seconds, turned into points by the step.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class AnomalyParams:
    step_seconds: float = 60.0
    # Baselines
    trailing_points: int = 120          # trailing robust baseline (median/MAD) while history
    min_points: int = 30                # is short; nothing is scored before this many points
    season_lags: int = 3                # the same time 1, 2 and 3 weeks ago
    season_halfwidth_points: int = 15   # median of +-15 points around each of those times
    trend_points: int = 1440            # trend correction and residual spread: the last day
    min_seasonal_points: int = 120      # seasonal predictions judged before they are used
    relative_scale_floor: float = 0.05  # spread at least 5% of the level
    absolute_scale_floor: float = 1e-9
    # Robust scores: z = (value - expected) / spread, in the bad direction
    z_alert: float = 6.0                # score 0.5; alert when held for ``for_points``
    z_extreme: float = 18.0             # alert at once (a spike)
    z_clear: float = 3.0                # the alert clears below this for ``clear_points``
    # The three scaled up for a heavy-tailed series: by its 99% deviation over two weeks
    # against a normal's (``detectors.TailCalibration``), refreshed every hour of points.
    tail_quantile: float = 0.99
    tail_days: float = 14.0
    tail_refresh_points: int = 60
    # Spread: the MAD of the last 10 points around their median, in baseline sigmas; 0.62 on
    # average for normal noise, past 1.8 (normal noise: under once in 10^4 windows; 4x the
    # noise: half the windows) the variance jumped. Held like the level, cleared under 1.1.
    spread_points: int = 10
    spread_alert: float = 1.8
    spread_clear: float = 1.1
    for_points: int = 5
    for_breaches: int = 4               # robust scores: 4 breaching of the last 5 points
    clear_points: int = 5
    # Baselines skip the points of an anomaly (while an alert is active, or a point past
    # ``z_extreme``) so a long incident is still measured against the level before it; after
    # this many skipped points in a row the change is taken as the new normal and learned.
    relearn_points: int = 360
    # Baseline ratio of throughput (tokens/s over its load-adjusted baseline)
    ratio_warning: float = 0.7
    ratio_critical: float = 0.5
    ratio_clear_margin: float = 0.1     # clears above threshold + margin for ``clear_points``
    # With the offered load known, the baseline is tokens per offered request, which does not
    # follow the daily cycle, so it can look back further (and see slow drifts); the capacity
    # cap is this quantile of the throughput over the same points.
    efficiency_trailing_points: int = 720
    capacity_quantile: float = 0.95
    # Load-dependent metrics (latency, queue, KV usage) judged against the values seen at a
    # similar offered load (within +-25%), over the last 12 hours' accepted points, once at
    # least 20 such points exist (``monitor.anomaly.load_curve``).
    load_curve_points: int = 720
    load_band: float = 0.25
    load_min_neighbours: int = 20
    # Multivariate (robust Mahalanobis distance over a target's metric vector)
    multivariate_training_points: int = 1440
    multivariate_min_points: int = 120
    multivariate_refit_points: int = 60
    multivariate_z_alert: float = 2.0   # distance over the training distances' q99.5
    seed: int = 0

    def __post_init__(self) -> None:
        if self.step_seconds <= 0:
            raise ValueError(f"step_seconds must be positive, got {self.step_seconds}")
        if not 0 < self.ratio_critical < self.ratio_warning < 1:
            raise ValueError("need 0 < ratio_critical < ratio_warning < 1, got "
                             f"{self.ratio_critical} and {self.ratio_warning}")
        if not 1 <= self.for_breaches <= self.for_points:
            raise ValueError(f"need 1 <= for_breaches <= for_points, got {self.for_breaches} "
                             f"and {self.for_points}")
        if self.z_clear >= self.z_alert or self.z_alert >= self.z_extreme:
            raise ValueError("need z_clear < z_alert < z_extreme")
