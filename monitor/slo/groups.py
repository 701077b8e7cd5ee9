"""A split SLO (``grouping: [tenant]``) as the embedded evaluator judges it: one copy of the SLO
per group of label values found in the source, each with the SLO's objective, burn windows and
``min_events`` gate, over that group's events alone, as the generated rules' ``sum by
(tenant)`` judges it.

A group's copy is named ``NAME/tenant=busy`` (``NAME/model=a,tenant=b`` for two labels), the
key its reads go by; its alerts carry ``slo="NAME"`` and the group's labels, as the generated
rules' do. A ratio SLI narrows its counter queries to the group's labels, a goodput SLI its
event filter; other SLI kinds are judged as a whole (``splits``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol, runtime_checkable

from monitor.slo.spec import GoodputSli, RatioSli, Slo

Group = tuple[tuple[str, str], ...]  # (label, value) in the SLO's grouping order


def splits(slo: Slo) -> bool:
    """Whether the evaluator judges ``slo`` per group: split, over a ratio or goodput SLI."""
    return bool(slo.grouping) and isinstance(slo.sli, RatioSli | GoodputSli)


def group_of(slo: Slo, values: Mapping[str, str]) -> Group:
    """The group of ``values`` (a dict of the grouping labels' values), in grouping order."""
    return tuple((label, values[label]) for label in slo.grouping)


def group_name(slo_name: str, group: Group) -> str:
    return f"{slo_name}/" + ",".join(f"{k}={v}" for k, v in group)


def group_text(group: Group) -> str:
    """' for tenant=busy': what the generated rules' summary says of the group."""
    return " for " + ", ".join(f"{k}={v}" for k, v in group) if group else ""


def group_slo(slo: Slo, group: Group) -> Slo:
    """The copy of split ``slo`` that reads ``group``'s events alone (not split itself)."""
    if not splits(slo):
        raise ValueError(f"SLO {slo.name}: only a split ratio or goodput SLI is judged per "
                         f"group, not a {slo.sli.kind} SLI")
    values = dict(group)
    sli = slo.sli
    if isinstance(sli, GoodputSli):
        narrowed: GoodputSli | RatioSli = sli.model_copy(update=values)
    else:
        assert isinstance(sli, RatioSli)
        narrowed = sli.model_copy(update={
            part: query.model_copy(update={"labels": {**query.labels, **values}})
            for part in ("good", "bad", "total") if (query := getattr(sli, part)) is not None})
    return slo.model_copy(update={"name": group_name(slo.name, group), "sli": narrowed,
                                  "labels": {**slo.labels, **values}, "grouping": ()})


@runtime_checkable
class GroupSource(Protocol):
    """A source that can list the groups of a split SLO's series (``StoreSliSource``: the
    label values of the stored series of its total counter, or of its request events)."""

    def group_values(self, slo: Slo, start: float, end: float) -> list[dict[str, str]]: ...
