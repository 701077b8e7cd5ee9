"""Sloth ``prometheus/v1`` specs translated into ``Slo`` drafts.

Sloth states an SLI as PromQL ``events`` (``error_query`` over ``total_query``, with the
``{{.window}}`` range); they are read by ``monitor.slo.promql_forms``: a histogram's
``_count - _bucket{le=...}`` over its ``_count`` is a latency SLI, counters a ratio SLI.
``raw`` and ``plugin`` SLIs cannot be read into our SLI kinds and are refused.

Sloth takes the SLO period from its command line (30 days by default); here an SLO may set
its own with ``time_window`` (an inferwatch extension, e.g. ``28d``). The alerts keep what the
author set: ``alerting.name`` is the alert name, ``alerting.labels``/``annotations`` go on both
alerts and ``page_alert``/``ticket_alert`` add their own (their ``severity`` label wins over
ours) or ``disable`` them.
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
    """Sloth's alerting block as the author wrote it: the alert name, labels and annotations
    for both alerts, then each of page_alert and ticket_alert (its labels, annotations and
    ``disable``); a ``runbook``/``runbook_url`` annotation is also the SLO's runbook link."""
    if value is None:
        return {}
    a = mapping(value, at, ("name", "labels", "annotations", "page_alert", "ticket_alert"))
    alerting: dict[str, Any] = {"alert": _template(a, at, name=True)}
    annotations = alerting["alert"]["annotations"]
    for key in _RUNBOOK_KEYS:
        if key in annotations:
            alerting["runbook_url"] = annotations[key]
            break
    for severity in ("page", "ticket"):
        key = f"{severity}_alert"
        alert = mapping(a.get(key, {}), at / key, ("disable", "labels", "annotations"))
        disable = alert.get("disable", False)
        if not isinstance(disable, bool):
            raise (at / key / "disable").error(f"expected true or false, got {disable!r}")
        alerting[severity] = not disable
        alerting[key] = _template(alert, at / key, name=False)
    return alerting


def _template(block: dict[str, Any], at: At, *, name: bool) -> dict[str, Any]:
    template: dict[str, Any] = {
        "labels": label_values(block.get("labels"), at / "labels"),
        "annotations": {str(k): string(v, at / "annotations" / str(k)) for k, v in
                        mapping(block.get("annotations", {}), at / "annotations").items()},
    }
    if name and "name" in block:
        template["name"] = string(block["name"], at / "name")
    return template
