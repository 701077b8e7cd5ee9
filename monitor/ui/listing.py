"""The SLO list's filter and sort, from the query string: ``?service=S&label=k=v&q=words&
sort=COLUMN&order=asc|desc``. The server applies them when it renders (a shared link, or a
client without JavaScript, gets the right rows in the right order) and static/ui.js applies
the same rules in the browser, from the same ``data-sort`` values written here, and keeps the
state in the URL. Rows a filter leaves out are rendered ``hidden``, so widening the filter in
the browser needs no reload. Ties, and rows without a value (always last), keep the config's
order, in the browser too (``data-index``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, Final, Literal
from urllib.parse import urlencode

from fastapi import Depends, Query

from monitor.api.schemas import SloOut
from monitor.api.state import ServiceState
from monitor.slo.spec import Slo
from monitor.ui import views

SortValue = float | str | None
Order = Literal["asc", "desc"]


def _burn(out: SloOut) -> float | None:
    """The fastest burn over the SLO's windows: the one an operator sorts for."""
    rates = [b.burn_rate for b in out.burn_rates if b.burn_rate is not None]
    return max(rates) if rates else None


# column key -> (numeric?, value of a row). Numbers sort as numbers, text case-insensitively.
COLUMNS: Final[dict[str, tuple[bool, Callable[[SloOut, Slo], SortValue]]]] = {
    "name": (False, lambda o, s: o.name),
    "service": (False, lambda o, s: o.service),
    "objective": (True, lambda o, s: o.objective),
    "period": (True, lambda o, s: s.window.nominal_seconds),
    "sli": (True, lambda o, s: o.sli),
    "budget": (True, lambda o, s: o.budget_remaining),
    "budget_state": (False, lambda o, s: o.budget_state),
    "burn": (True, lambda o, s: _burn(o)),
    "state": (False, lambda o, s: o.state),
}


@dataclass(frozen=True)
class ListQuery:
    service: str = ""
    labels: tuple[str, ...] = ()       # "key=value", or "key": the label is set
    q: str = ""                        # words that must all appear (name, service, labels)
    sort: str = ""                     # a key of COLUMNS, or "" for the config's order
    order: Order = "asc"

    @classmethod
    def parse(cls, service: str | None, labels: Sequence[str], q: str | None,
              sort: str | None, order: str | None) -> ListQuery:
        """Unknown columns and orders are ignored, not an error: a stale link still opens."""
        return cls((service or "").strip(), tuple(x.strip() for x in labels if x.strip()),
                   (q or "").strip(), sort if sort in COLUMNS else "",
                   "desc" if order == "desc" else "asc")

    def query_string(self) -> str:
        pairs = [("service", self.service), *(("label", x) for x in self.labels),
                 ("q", self.q), ("sort", self.sort),
                 ("order", self.order if self.sort else "")]
        return urlencode([(k, v) for k, v in pairs if v])


@dataclass
class SloRow:
    out: SloOut
    labels: dict[str, str]
    index: int                                  # position in the config
    values: dict[str, SortValue] = field(default_factory=dict)
    shown: bool = True

    @property
    def filter_text(self) -> str:
        return " ".join([self.out.name, self.out.service,
                         *(f"{k}={v}" for k, v in self.labels.items())])

    @property
    def label_lines(self) -> str:
        return "\n".join(f"{k}={v}" for k, v in self.labels.items())

    def sort_attr(self, key: str) -> str:
        """The cell's ``data-sort``: empty for no value."""
        value = self.values[key]
        return "" if value is None else value if isinstance(value, str) else repr(value)


def has_label(labels: Mapping[str, str], wanted: str) -> bool:
    key, equals, value = wanted.partition("=")
    return key in labels and (not equals or labels[key] == value)


def matches(row: SloRow, query: ListQuery) -> bool:
    text = row.filter_text.lower()
    return (all(word in text for word in query.q.lower().split())
            and (not query.service or row.out.service == query.service)
            and all(has_label(row.labels, wanted) for wanted in query.labels))


def ordered(rows: list[SloRow], query: ListQuery) -> list[SloRow]:
    """Sorted by the query's column, rows without a value last in either order."""
    if not query.sort:
        return rows
    numeric = COLUMNS[query.sort][0]

    def key(row: SloRow) -> float | str:
        value = row.values[query.sort]
        assert value is not None
        return float(value) if numeric else str(value).lower()

    valued = [r for r in rows if r.values[query.sort] is not None]
    empty = [r for r in rows if r.values[query.sort] is None]
    # sorted() is stable even reversed: ties keep the config's order, as in ui.js.
    return sorted(valued, key=key, reverse=query.order == "desc") + empty


def slo_rows(outs: Sequence[SloOut], slos: Sequence[Slo], query: ListQuery) -> list[SloRow]:
    """The list's rows (``outs`` and ``slos`` in the same, config, order), sorted, with
    ``shown`` False where the filter leaves a row out."""
    rows = []
    for index, (out, slo) in enumerate(zip(outs, slos)):
        row = SloRow(out, dict(slo.labels), index,
                     {k: value(out, slo) for k, (_, value) in COLUMNS.items()})
        row.shown = matches(row, query)
        rows.append(row)
    return ordered(rows, query)


def choices(slos: Sequence[Slo], query: ListQuery) -> tuple[list[str], list[str]]:
    """The service and label options of the list's selects (the query's own included)."""
    services = sorted({s.service for s in slos} | ({query.service} - {""}))
    labels = sorted({f"{k}={v}" for s in slos for k, v in s.labels.items()}
                    | set(query.labels))
    return services, labels


def list_query(service: str | None = None,
               label: Annotated[list[str] | None, Query()] = None, q: str | None = None,
               sort: str | None = None, order: str | None = None) -> ListQuery:
    return ListQuery.parse(service, label or [], q, sort, order)


QueryDep = Annotated[ListQuery, Depends(list_query)]


def context(state: ServiceState, query: ListQuery) -> dict[str, Any]:
    """What slos.html needs besides the sparklines."""
    rows = slo_rows(views.slos(state), state.slos, query)
    services, labels = choices(state.slos, query)
    return {"rows": rows, "query": query, "services": services, "label_choices": labels,
            "columns": COLUMNS, "shown": sum(r.shown for r in rows)}
