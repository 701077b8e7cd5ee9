"""Sloth ``prometheus/v1`` specs translated into ``Slo`` drafts.

Sloth states an SLI as PromQL ``events`` (``error_query`` over ``total_query``, with the
``{{.window}}`` range); they are read by ``monitor.slo.promql_forms``: a histogram's
``_count - _bucket{le=...}`` over its ``_count`` is a latency SLI, counters a ratio SLI.
``raw`` and ``plugin`` SLIs cannot be read into our SLI kinds and are refused.

Sloth takes the SLO period from its command line (30 days by default); here an SLO may set
its own with ``time_window`` (an inferwatch extension, e.g. ``28d``). Alert routing labels and
annotations are Sloth's concern; of them only ``runbook``/``runbook_url`` and the ``disable``
of each alert are used.
"""

from __future__ import annotations

from typing import Any, Final

from monitor.slo.documents import (
    At,
    Doc,
    Draft,
    Loc,
    Origin,
    label_values,
    mapping,
    percent,
    sequence,
    string,
)
from monitor.slo.promql_forms import FormError, ratio_sli

VERSION: Final = "prometheus/v1"
_RUNBOOK_KEYS: Final = ("runbook_url", "runbook")


def slo_drafts(doc: Doc) -> list[Draft]:
    """One draft per entry of a Sloth spec's ``slos``."""
    root = At(doc)
    data = mapping(doc.data, root, ("version", "service", "labels", "slos"),
                   ("version", "service", "slos"))
    if data["version"] != VERSION:
        raise (root / "version").error(f"unsupported Sloth version {data['version']!r}; "
                                       f"expected {VERSION}")
    service = string(data["service"], root / "service")
    labels = label_values(data.get("labels"), root / "labels")
    return [_slo(item, root / "slos" / i, service, labels)
            for i, item in enumerate(sequence(data["slos"], root / "slos"))]


def _slo(value: object, at: At, service: str, labels: dict[str, str]) -> Draft:
    s = mapping(value, at, ("name", "objective", "description", "labels", "sli", "alerting",
                            "time_window"), ("name", "objective", "sli"))
    fields: dict[str, Any] = {
        "name": s["name"],
        "service": service,
        "description": s.get("description", ""),
        "objective": percent(s["objective"], at / "objective"),
        "labels": {**labels, **label_values(s.get("labels"), at / "labels")},
        "alerting": _alerting(s.get("alerting"), at / "alerting"),
    }
    origins: dict[Loc, Origin] = {(): Origin(at), ("name",): Origin(at / "name"),
                                  ("description",): Origin(at / "description"),
                                  ("objective",): Origin(at / "objective"),
                                  ("labels",): Origin(at / "labels", nested=True),
                                  ("alerting",): Origin(at / "alerting")}
    if "time_window" in s:
        fields["window"] = s["time_window"]
        origins[("window",)] = Origin(at / "time_window")
    sli_at = at / "sli"
    sli = mapping(s["sli"], sli_at, ("events", "raw", "plugin"))
    if len(sli) != 1:
        raise sli_at.error("give one of events, raw and plugin")
    if "events" not in sli:
        kind = next(iter(sli))
        raise (sli_at / kind).error(f"a {kind} SLI cannot be read into an inferwatch SLI: "
                                    "give events (error_query and total_query)")
    events_at = sli_at / "events"
    events = mapping(sli["events"], events_at, ("error_query", "total_query"),
                     ("error_query", "total_query"))
    query_ats = {"bad": events_at / "error_query", "total": events_at / "total_query"}
    try:
        form = ratio_sli(string(events["total_query"], query_ats["total"]),
                         bad=string(events["error_query"], query_ats["bad"]))
    except FormError as exc:
        raise query_ats[exc.role].error(str(exc)) from None
    fields["sli"] = form.sli
    fields["selector"] = {"labels": form.selector}
    origins[("sli",)] = Origin(events_at)
    origins[("selector",)] = Origin(events_at)
    for field, role in form.roles.items():
        origins[("sli", field)] = Origin(query_ats[role])
    return Draft(fields, origins)


def _alerting(value: object, at: At) -> dict[str, Any]:
    if value is None:
        return {}
    a = mapping(value, at, ("name", "labels", "annotations", "page_alert", "ticket_alert"))
    annotations = mapping(a.get("annotations", {}), at / "annotations")
    alerting: dict[str, Any] = {}
    for key in _RUNBOOK_KEYS:
        if key in annotations:
            alerting["runbook_url"] = string(annotations[key], at / "annotations" / key)
            break
    for severity in ("page", "ticket"):
        key = f"{severity}_alert"
        alert = mapping(a.get(key, {}), at / key, ("disable", "labels", "annotations"))
        disable = alert.get("disable", False)
        if not isinstance(disable, bool):
            raise (at / key / "disable").error(f"expected true or false, got {disable!r}")
        alerting[severity] = not disable
    return alerting
