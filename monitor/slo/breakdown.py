"""A goodput SLO judged per tenant, per SLO class or per model (a LoRA adapter's name):
one copy of the SLO per value found in the stored request events, each evaluated by the
monitor's own evaluator over the events of that value alone. A ratio SLO over the gateway's
good/total counters splits the same way, per label value given (``split_slo``).

Each copy keeps the SLO's objective, period, burn windows and ``min_events`` gate, and carries
the value as a label (``tenant: ...``) on its alerts, so a tenant with fewer events than the
gate in a long window never pages, and a tenant burning its budget pages on its own.

``slo_by_group`` (``GET /api/v1/requests/slo``) finds the values itself: those of the stored
request events in the SLO's period for a goodput SLI, those of the stored series of its total
counter for a ratio SLI (e.g. an SLO split with ``grouping: [tenant]`` over the gateway's
counters, which the service's evaluator pages per tenant: ``monitor.slo.groups``), keeping
the values with events in the period.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from exporters import schema
from monitor.slo.evaluator import SloEvaluator, SloStatus, slo_period_start
from monitor.slo.source import StoreSliSource
from monitor.slo.spec import GoodputSli, RatioSli, Slo
from monitor.slo.windows import Severity
from monitor.store.db import Store
from monitor.store.queries import series_label_values
from monitor.store.request_events import RequestFilter, distinct_request_labels
from monitor.store.request_sli import GROUPS

_BY_LABEL: Final = {"tenant": "tenant", "slo_class": "slo_class", "model": "model"}


@dataclass(frozen=True, slots=True)
class GroupSlo:
    value: str                  # the tenant (hash or header value), class or model
    status: SloStatus
    judged: bool                # events in the period >= the SLO's min_events
    paging: bool                # a page-severity burn condition holds now


def split_slo(slo: Slo, by: str, values: list[str]) -> list[Slo]:
    """One copy of ``slo`` per value of ``by``, named ``NAME/by=value``: a goodput SLI
    selects the value's events, a ratio SLI (the gateway's good/total counters, labelled by
    tenant, slo_class and model) adds the label to both its counter queries."""
    if by not in GROUPS:
        raise ValueError(f"split by one of {', '.join(GROUPS)}, not {by!r}")
    if not isinstance(slo.sli, GoodputSli | RatioSli):
        raise ValueError(f"SLO {slo.name}: only a goodput SLI (stored request events) or a "
                         f"ratio SLI (labelled counters) splits per {by}, not a "
                         f"{slo.sli.kind} SLI")
    if _selects(slo.sli, by):
        raise ValueError(f"SLO {slo.name} already selects one {by}")
    return [slo.model_copy(update={
        "name": f"{slo.name}/{by}={value}", "sli": _narrowed(slo.sli, by, value),
        "labels": {**slo.labels, _BY_LABEL[by]: value},
        "grouping": tuple(g for g in slo.grouping if g != by)}) for value in values]


def _selects(sli: GoodputSli | RatioSli, by: str) -> bool:
    if isinstance(sli, GoodputSli):
        return getattr(sli, by) is not None
    return any(by in query.labels for query in (sli.good, sli.bad, sli.total)
               if query is not None)


def _narrowed(sli: GoodputSli | RatioSli, by: str, value: str) -> GoodputSli | RatioSli:
    if isinstance(sli, GoodputSli):
        return sli.model_copy(update={by: value})
    return sli.model_copy(update={
        part: query.model_copy(update={"labels": {**query.labels, by: value}})
        for part in ("good", "bad", "total") if (query := getattr(sli, part)) is not None})


def values_in_period(store: Store, slo: Slo, by: str, now: float) -> list[str]:
    """The values of ``by`` among the SLO's events in its current period (a goodput SLI), or
    among the stored series of its total counter (a ratio SLI; the caller keeps those with
    events in the period)."""
    sli = slo.sli
    if isinstance(sli, RatioSli):
        total = schema.get_spec(sli.total.metric).exposed_name
        return series_label_values(store, total, by, {**slo.selector.labels,
                                                      **sli.total.labels})
    if not isinstance(sli, GoodputSli):
        raise ValueError(f"SLO {slo.name}: not a goodput or ratio SLI")
    return distinct_request_labels(store.engine, by, RequestFilter(
        slo_period_start(slo, now), now, model=sli.model, tenant=sli.tenant,
        slo_class=sli.slo_class))


def slo_by_group(store: Store, slo: Slo, by: str, now: float,
                 settle_seconds: float = 0.0) -> list[GroupSlo]:
    """Each value's status now: attainment, budget left, burn per window, alert conditions."""
    split_slo(slo, by, [])  # refuse what cannot split before reading
    values = values_in_period(store, slo, by, now)
    copies = split_slo(slo, by, values)
    evaluator = SloEvaluator(copies, StoreSliSource(store), settle_seconds=settle_seconds)
    statuses = evaluator.tick(now)
    # a ratio SLI's series may hold values without events in this period: not listed
    return [GroupSlo(value, status, status.events >= slo.alerting.min_events,
                     any(c.active and c.labels.get("severity") == Severity.PAGE.value
                         for c in status.conditions))
            for value, status in zip(values, statuses, strict=True)
            if isinstance(slo.sli, GoodputSli) or status.events > 0]

