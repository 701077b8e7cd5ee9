"""Synthetic labelled series: deterministic, labels in range, anomalies visible in the
values, clean series clean."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest

from bench.anomaly_synthetic import (
    KINDS,
    START,
    LabelledAnomaly,
    LabelledSeries,
    clean_corpus,
    corpus,
    generate,
    nab_windows,
    write_csv,
    write_labels,
)
from monitor.anomaly.nab import Window


@pytest.fixture(scope="module")
def series() -> list[LabelledSeries]:
    return corpus(seed=0, days=14)


def around(values: np.ndarray, a: LabelledAnomaly, rows: int = 120) -> float:
    """Median of the values in the ``rows`` before the anomaly and after its end."""
    before = values[a.start_index - rows:a.start_index]
    after = values[a.end_index + 1:a.end_index + 1 + rows]
    return float(np.median(np.concatenate((before, after))))


def test_deterministic_by_seed(series: list[LabelledSeries]) -> None:
    again = corpus(seed=0, days=14)
    other = corpus(seed=1, days=14)
    for a, b, c in zip(series, again, other):
        assert a.name == b.name and a.anomalies == b.anomalies
        assert np.array_equal(a.values, b.values) and a.load is not None and b.load is not None
        assert np.array_equal(a.load, b.load)
        assert not np.array_equal(a.values, c.values)


def test_shape_and_labels(series: list[LabelledSeries]) -> None:
    n = 14 * 1440
    assert len(series) == 4 * len(KINDS) + 4
    assert len({s.name for s in series}) == len(series)
    for s in series:
        assert len(s.values) == len(s.timestamps) == n and np.all(s.values > 0)
        assert s.timestamps[0] == START and np.all(np.diff(s.timestamps) == 60.0)
        kind = s.name.rsplit("_", 1)[0]
        if kind == "clean":
            assert s.anomalies == [] and nab_windows(s) == []
            continue
        assert len(s.anomalies) == 2
        for a in s.anomalies:
            assert a.kind == kind and 3 * 1440 <= a.start_index <= a.end_index < n
        for w, a in zip(nab_windows(s), s.anomalies):
            assert w.start <= a.start_index and min(a.end_index, n - 1) <= w.end < n


def test_seasonality() -> None:
    s = generate("clean", days=14, seed=5)
    assert s.load is not None
    hours = (s.timestamps - START) / 3600 % 24
    weekday = (s.timestamps - START) // 86400 % 7
    day = s.values[(hours >= 12) & (hours < 18) & (weekday < 5)].mean()
    night = s.values[(hours < 6) & (weekday < 5)].mean()
    weekend = s.values[(hours >= 12) & (hours < 18) & (weekday >= 5)].mean()
    assert night < 0.8 * day and weekend < 0.9 * day
    ratio = s.values / s.load  # throughput follows the load
    assert np.std(np.log(ratio)) < 0.1


def test_anomalies_change_the_values(series: list[LabelledSeries]) -> None:
    for s in series:
        assert s.load is not None
        per_load = s.values / s.load  # throughput per request: free of the seasonality
        for a in s.anomalies:
            inside = s.values[a.start_index:a.end_index + 1]
            if a.kind == "level_shift":
                assert 10 <= len(inside) <= 60
                assert np.mean(inside) < 0.7 * around(s.values, a)
                assert np.mean(per_load[a.start_index:a.end_index + 1]) < 0.7 * around(
                    per_load, a)
            elif a.kind == "spike":
                assert np.max(inside) > 2.5 * around(s.values, a) and len(inside) <= 3
            elif a.kind == "slow_drift":  # down 40-60% at the end
                assert 120 <= len(inside) <= 360
                assert np.mean(per_load[a.end_index - 9:a.end_index + 1]) < 0.7 * around(
                    per_load, a)
            else:
                base = np.concatenate((s.values[a.start_index - 120:a.start_index],
                                       s.values[a.end_index + 1:a.end_index + 121]))
                assert np.std(np.log(inside)) > 2.5 * np.std(np.diff(np.log(base))) / 2**0.5


def test_latency_series_rise() -> None:
    s = generate("lat", "level_shift", seed=2, metric="latency", with_load=False)
    assert s.load is None and s.metric == "latency"
    for a in s.anomalies:
        assert np.mean(s.values[a.start_index:a.end_index + 1]) > 1.4 * around(s.values, a)


def test_clean_corpus() -> None:
    clean = clean_corpus(seed=0, days=3, size=3)
    assert [s.name for s in clean] == ["clean_00", "clean_01", "clean_02"]
    assert all(s.anomalies == [] and len(s.values) == 3 * 1440 for s in clean)


def test_nab_windows_cover_the_interval() -> None:
    n = 1000
    s = LabelledSeries("x", START + 60.0 * np.arange(n, dtype=np.float64), np.ones(n), None,
                       [LabelledAnomaly("slow_drift", 500, 700),
                        LabelledAnomaly("spike", 100, 100)])
    # width int(0.1 * 1000 / 2) = 50: [475, 525] around 500, extended to min(700, 550)
    assert nab_windows(s) == [Window(75, 125, 100), Window(475, 550, 500)]
    with pytest.raises(ValueError, match="unknown anomaly kind"):
        generate("x", "dip")


def test_writers(tmp_path: Path) -> None:
    s = generate("spike_x", "spike", seed=1, days=4, count=1, lead_in_days=1)
    write_csv(s, tmp_path / "s.csv")
    write_labels([s], tmp_path / "labels.json")
    with (tmp_path / "s.csv").open() as f:
        rows = list(csv.reader(f))
    assert rows[0] == ["timestamp", "value"] and len(rows) == 4 * 1440 + 1
    assert float(rows[1][0]) == START and float(rows[1][1]) == pytest.approx(s.values[0],
                                                                             rel=1e-5)
    labels = json.loads((tmp_path / "labels.json").read_text())["spike_x"]
    (a,) = s.anomalies
    assert labels["anomalies"][0]["start_index"] == a.start_index
    assert labels["anomalies"][0]["start_timestamp"] == START + 60.0 * a.start_index
    assert labels["windows"] == [[w.start, w.end] for w in nab_windows(s)]
