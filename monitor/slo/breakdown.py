"""A goodput SLO judged per tenant, per SLO class or per model (a LoRA adapter's name):
one copy of the SLO per value found in the stored request events, each evaluated by the
monitor's own evaluator over the events of that value alone.

Each copy keeps the SLO's objective, period, burn windows and ``min_events`` gate, and carries
the value as a label (``tenant: ...``) on its alerts, so a tenant with fewer events than the
gate in a long window never pages, and a tenant burning its budget pages on its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from monitor.slo.evaluator import SloEvaluator, SloStatus
from monitor.slo.source import StoreSliSource
from monitor.slo.spec import GoodputSli, Slo
from monitor.slo.windows import Severity
from monitor.store.db import Store
from monitor.store.request_events import RequestFilter, read_request_events
from monitor.store.request_sli import GROUPS

_BY_LABEL: Final = {"tenant": "tenant", "slo_class": "slo_class", "model": "model"}


@dataclass(frozen=True, slots=True)
class GroupSlo:
    value: str                  # the tenant (hash or header value), class or model
    status: SloStatus
    judged: bool                # events in the period >= the SLO's min_events
    paging: bool                # a page-severity burn condition holds now


def split_slo(slo: Slo, by: str, values: list[str]) -> list[Slo]:
    """One copy of the goodput ``slo`` per value of ``by``, named ``NAME/by=value``."""
    if not isinstance(slo.sli, GoodputSli):
        raise ValueError(f"SLO {slo.name}: only a goodput SLI (stored request events) splits "
                         f"per {by}, not a {slo.sli.kind} SLI")
    if by not in GROUPS:
        raise ValueError(f"split by one of {', '.join(GROUPS)}, not {by!r}")
    if getattr(slo.sli, by) is not None:
        raise ValueError(f"SLO {slo.name} already selects one {by}")
    return [slo.model_copy(update={
        "name": f"{slo.name}/{by}={value}",
        "sli": slo.sli.model_copy(update={by: value}),
        "labels": {**slo.labels, _BY_LABEL[by]: value}}) for value in values]


def values_in_period(store: Store, slo: Slo, by: str, now: float) -> list[str]:
    """The values of ``by`` among the SLO's events in its period (the longest lookback)."""
    sli = slo.sli
    if not isinstance(sli, GoodputSli):
        raise ValueError(f"SLO {slo.name}: not a goodput SLI")
    rows = read_request_events(store.engine, RequestFilter(
        now - _lookback(slo, now), now, model=sli.model, tenant=sli.tenant,
        slo_class=sli.slo_class))
    return sorted({getattr(row, by) for row in rows})


def slo_by_group(store: Store, slo: Slo, by: str, now: float,
                 settle_seconds: float = 0.0) -> list[GroupSlo]:
    """Each value's status now: attainment, budget left, burn per window, alert conditions."""
    split_slo(slo, by, [])  # refuse what cannot split before reading
    values = values_in_period(store, slo, by, now)
    copies = split_slo(slo, by, values)
    evaluator = SloEvaluator(copies, StoreSliSource(store), settle_seconds=settle_seconds)
    statuses = evaluator.tick(now)
    return [GroupSlo(value, status, status.events >= slo.alerting.min_events,
                     any(c.active and c.labels.get("severity") == Severity.PAGE.value
                         for c in status.conditions))
            for value, status in zip(values, statuses, strict=True)]


def _lookback(slo: Slo, now: float) -> float:
    if slo.window.duration_seconds is not None:
        return slo.window.duration_seconds
    return 31 * 86400.0 if slo.window.calendar == "month" else 7 * 86400.0

