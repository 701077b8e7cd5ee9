"""Goodput SLIs read from the gateway's stored request events (``spec.GoodputSli``): per step,
the requests that arrived in it and how many were good, exact (no buckets).

Every step has data: the events table is the source, and a step without requests is zero
events, not a gap (the gateway's own liveness is its /metrics target's).
"""

from __future__ import annotations

import numpy as np

from monitor.slo.spec import GoodputSli
from monitor.slo.steps import Floats, Step
from monitor.store.db import Store
from monitor.store.request_events import RequestFilter, read_request_events
from monitor.store.request_sli import GoodputCriteria


def goodput_steps(store: Store, sli: GoodputSli, ends: Floats, start: float) -> list[Step]:
    """(good, total) of the requests arriving in each step (previous end, end]."""
    rows = read_request_events(store.engine, RequestFilter(
        start, float(ends[-1]) if len(ends) else start, model=sli.model, tenant=sli.tenant,
        slo_class=sli.slo_class))
    criteria = None if sli.judged_at_the_gateway else GoodputCriteria(
        sli.ttft_seconds, sli.tpot_seconds, sli.e2e_seconds)
    at = np.asarray([row.at for row in rows], dtype=np.float64)
    good = np.asarray([criteria.met(row) if criteria is not None else row.good
                       for row in rows], dtype=np.float64)
    index = np.searchsorted(ends, at, side="left")  # at <= ends[index]
    totals = np.bincount(index, minlength=len(ends))[:len(ends)]
    goods = np.bincount(index, weights=good, minlength=len(ends))[:len(ends)]
    return [Step(float(t), float(g), float(n), True)
            for t, g, n in zip(ends, goods, totals, strict=True)]
