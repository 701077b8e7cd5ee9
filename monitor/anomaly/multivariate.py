"""A multivariate detector: a robust Mahalanobis distance over a target's vector of metrics.

It catches combinations that are normal one by one and abnormal together (KV cache nearly
full at a load that usually leaves it half empty). Streaming: the model is fitted on the
trailing ``multivariate_training_points`` vectors that no other detector flagged, refitted
every ``multivariate_refit_points``, and scores each new vector before it joins the training
set. Features are scaled robustly (10-90% range), missing values imputed with the training
median, constant features dropped; the location and covariance are the Minimum Covariance
Determinant estimate (scikit-learn's MinCovDet), so past outliers do not inflate the spread.
The distance is judged against the training distances: z = d / q99.5(d), an alert when
z >= ``multivariate_z_alert`` for ``for_points``.

Why not an IsolationForest: its splits are axis-parallel, and a point off the usual relation
of two correlated metrics (7 sigma off, central on the main axis) scored no higher than the
training set's own 99.5% quantile in our test; whitening first did not change that. The
covariance distance separates it by an order of magnitude.
"""

from __future__ import annotations

import math
import warnings
from collections import deque
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
from sklearn.covariance import MinCovDet
from sklearn.impute import SimpleImputer
from sklearn.pipeline import Pipeline, make_pipeline
from sklearn.preprocessing import RobustScaler

from monitor.anomaly.detectors import Hysteresis, Level, Reading, squash
from monitor.anomaly.params import AnomalyParams


IDLE = Reading(math.nan, math.nan, math.nan, 0.0, False, False)


class MultivariateDetector:
    def __init__(self, params: AnomalyParams, features: Sequence[str]) -> None:
        self.params = params
        self.features = tuple(features)
        self.hysteresis = Hysteresis(params.for_points, params.clear_points)
        self._training: deque[npt.NDArray[np.float64]] = deque(
            maxlen=params.multivariate_training_points)
        self._scaling: Pipeline | None = None
        self._columns: npt.NDArray[np.bool_] = np.ones(len(self.features), dtype=bool)
        self._covariance: MinCovDet | None = None
        self._q995 = 1.0
        self._since_fit = 0

    def update(self, vector: Sequence[float], flagged_elsewhere: bool = False,
               score: bool = True) -> Reading:
        """Score one vector (in ``features`` order); it joins the training set unless another
        detector flagged this point or this one is alerting. ``score=False`` only collects
        (replaying history: no scoring, no refit)."""
        x = np.asarray(vector, dtype=np.float64)
        if len(x) != len(self.features):
            raise ValueError(f"expected {len(self.features)} values ({self.features}), "
                             f"got {len(x)}")
        reading = self._score(x) if score else IDLE
        if not (flagged_elsewhere or reading.active) and not np.isnan(x).all():
            self._training.append(x)
            self._since_fit += 1
        if score and self._due():
            self._fit()
        return reading

    def collect(self, vectors: npt.NDArray[np.float64], flagged: npt.NDArray[np.bool_]
                ) -> None:
        """``update(vector, flagged, score=False)`` for each row of ``vectors``, at once."""
        if vectors.shape[1:] != (len(self.features),):
            raise ValueError(f"expected rows of {len(self.features)} values ({self.features}), "
                             f"got shape {vectors.shape}")
        keep = ~flagged & ~np.isnan(vectors).all(axis=1)
        kept = vectors[keep]
        self._training.extend(kept[-self.params.multivariate_training_points:])
        self._since_fit += len(kept)

    def _score(self, x: npt.NDArray[np.float64]) -> Reading:
        if self._covariance is None or np.isnan(x).all():
            return Reading(math.nan, math.nan, math.nan, 0.0, self.hysteresis.active, False)
        distance = float(np.sqrt(self._distances(x.reshape(1, -1))[0]))
        z = distance / self._q995
        threshold = self.params.multivariate_z_alert
        started = self.hysteresis.update(z >= threshold, z < 1.0)
        return Reading(distance, self._q995, z, squash(z, threshold), self.hysteresis.active,
                       started, Level.WARNING if self.hysteresis.active else None)

    def _distances(self, data: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        assert self._scaling is not None and self._covariance is not None
        scaled = self._scaling.transform(data)[:, self._columns]
        return np.asarray(self._covariance.mahalanobis(scaled), dtype=np.float64)

    def _due(self) -> bool:
        p = self.params
        if len(self._training) < p.multivariate_min_points:
            return False
        return self._covariance is None or self._since_fit >= p.multivariate_refit_points

    def _fit(self) -> None:
        data = np.vstack(self._training)
        scaling = make_pipeline(SimpleImputer(strategy="median", keep_empty_features=True),
                                RobustScaler(quantile_range=(10.0, 90.0)))
        scaled = scaling.fit_transform(data)
        columns = scaled.std(axis=0) > 1e-9  # a constant feature has no covariance
        if not columns.any():
            return
        with warnings.catch_warnings():  # "not full rank" on tied data: still usable
            warnings.simplefilter("ignore")
            covariance = MinCovDet(random_state=self.params.seed).fit(scaled[:, columns])
        self._scaling, self._columns, self._covariance = scaling, columns, covariance
        distances = np.sqrt(self._distances(data))
        self._q995 = max(float(np.quantile(distances, 0.995)), 1e-6)
        self._since_fit = 0
