"""The anomaly evaluation of the monitor: every target's features from the store, step by step,
through its detectors, into alert conditions for the alert book (the same Alertmanager path
as SLO alerts). Pages come from SLO burn rates: every anomaly is a ticket, and an anomaly pages
only on the metrics an operator names (``anomaly.page_on``; for tokens/s, at the critical level,
under 50% of its load-adjusted baseline).

Steps are aligned to multiples of ``step_seconds`` and read once closed (``settle_seconds``
after their end, so late scrapes are in). On its first tick for a target the monitor replays
the stored history (up to ``history_seconds``: three weeks and a day by default, enough for the
seasonal baseline) through the detectors, so a restart resumes the same baselines and the
same alert states rather than learning from scratch.
"""

from __future__ import annotations

import math
from typing import Final

from monitor.anomaly.detectors import Level, Reading
from monitor.anomaly.features import SCORED, THROUGHPUT, read_features
from monitor.anomaly.params import AnomalyParams
from monitor.anomaly.target import TargetDetector, TargetState
from monitor.slo.evaluator import AlertCondition
from monitor.store import Store
from sqlalchemy import Connection, func, select

from monitor.store.aggregates import read_connection
from monitor.store.models import RAW_RESOLUTION, Interval
from monitor.store.reads import all_targets

ANOMALY_ALERT: Final = "InferwatchAnomaly"
SEVERITY: Final = {Level.WARNING: "ticket", Level.CRITICAL: "page"}
PAGEABLE: Final = frozenset({THROUGHPUT, *(f.name for f in SCORED)})
_UNITS: Final = {f.name: f.unit for f in SCORED}


class AnomalyMonitor:
    def __init__(self, store: Store, params: AnomalyParams | None = None, *,
                 settle_seconds: float = 30.0,
                 history_seconds: float = 22 * 86400.0,
                 page_on: frozenset[str] = frozenset()) -> None:
        unknown = sorted(page_on - PAGEABLE)
        if unknown:
            raise ValueError(f"anomaly.page_on: unknown metric(s) {', '.join(unknown)}; "
                             f"known: {', '.join(sorted(PAGEABLE))}")
        self.page_on = page_on
        self.store = store
        self.params = params or AnomalyParams()
        self.settle_seconds = settle_seconds
        self.history_seconds = history_seconds
        self.detectors: dict[str, TargetDetector] = {}
        self.states: dict[str, TargetState] = {}

    def tick(self, now: float) -> list[AlertCondition]:
        """Feed every closed step since the last tick; the conditions of every target."""
        step = self.params.step_seconds
        closed = math.floor((now - self.settle_seconds) / step) * step
        with read_connection(self.store.engine) as conn:
            targets = {name: target_id for target_id, name in all_targets(conn).items()}
            firsts = {name: _first_data(conn, target_id) for name, target_id in targets.items()
                      if name not in self.detectors}
        for target in sorted(targets):
            detector = self.detectors.get(target)
            if detector is None:
                first = firsts.get(target)
                if first is None:
                    continue  # nothing stored yet
                detector = self.detectors[target] = TargetDetector(target, self.params)
                # From the target's first data (not weeks of empty steps), within the history.
                start = math.floor(max(now - self.history_seconds, first - step) / step) * step
                replay = True
            else:
                start, replay = detector.last_time, False
            if closed <= start:
                continue
            rows = read_features(self.store, target, start, closed, step)
            if replay:  # from the target's first data, not from the start of the range
                first = next((k for k, (_, row) in enumerate(rows)
                              if any(not math.isnan(v) for v in row.values())), len(rows))
                rows = rows[first:]
            if replay:  # compiled; only the last state is built
                state = detector.catch_up(rows)
                if state is not None:
                    self.states[target] = state
            else:
                for t, row in rows:
                    self.states[target] = detector.update(t, row)
            detector.last_time = closed
        return [c for state in self.states.values()
                for c in conditions(state, self.page_on)]


def _first_data(conn: Connection, target_id: int) -> float | None:
    """When the target's earliest stored interval ends, at any resolution (one index seek
    each); None when nothing is stored."""
    ends = [conn.scalar(select(func.min(Interval.end_time)).where(
        Interval.target_id == target_id, Interval.resolution == resolution))
        for resolution in (RAW_RESOLUTION, 60, 3600)]
    found = [float(end) for end in ends if end is not None]
    return min(found) if found else None


def conditions(state: TargetState, page_on: frozenset[str] = frozenset()
               ) -> list[AlertCondition]:
    """A ticket while any anomaly holds on the target; a page only while one holds on a metric
    of ``page_on`` (tokens/s: at the critical level)."""
    out = []
    for level, severity in SEVERITY.items():
        labels = {"alertname": ANOMALY_ALERT, "target": state.target, "severity": severity}
        active = state.level is not None and (level is Level.WARNING
                                              or _pages(state, page_on))
        annotations = annotate(state, level) if active else {}
        out.append(AlertCondition(labels, annotations, active, 0.0, state.score))
    return out


def _pages(state: TargetState, page_on: frozenset[str]) -> bool:
    return any(name in page_on and (name != THROUGHPUT or r.level is Level.CRITICAL)
               for name, r in state.active.items())


def annotate(state: TargetState, level: Level) -> dict[str, str]:
    active = state.active
    diagnosis = state.diagnosis
    limit = diagnosis.limit if diagnosis else "unclassified"
    evidence = "; ".join(_evidence(name, r) for name, r in sorted(
        active.items(), key=lambda item: -item[1].score))
    strongest = max(active.items(), key=lambda item: item[1].score)
    name, reading = strongest
    return {
        "summary": f"{state.target}: {level} anomaly, likely {limit.replace('_', ' ')}",
        "description": diagnosis.summary if diagnosis else "",
        "limit": limit,
        "evidence": evidence,
        "metric": name,
        "current": _fmt(reading.value, _UNITS.get(name, "")),
        "baseline": _fmt(reading.expected, _UNITS.get(name, "")),
        "score": f"{reading.score:.2f}",
    }


def _evidence(name: str, r: Reading) -> str:
    unit = _UNITS.get(name, "")
    detail = f"ratio {r.ratio:.2f}" if not math.isnan(r.ratio) else f"z {r.z:+.1f}"
    baseline = "at this load" if r.load_aware else "baseline"
    return (f"{name} {_fmt(r.value, unit)} vs {baseline} {_fmt(r.expected, unit)} "
            f"({detail}, score {r.score:.2f})")


def _fmt(value: float, unit: str) -> str:
    if math.isnan(value):
        return "n/a"
    return f"{value:.4g} {unit}".strip()

