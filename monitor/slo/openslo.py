"""OpenSLO v1 objects (SLO, SLI, AlertPolicy, AlertCondition) translated into ``Slo`` drafts.

An SLO gives one ``Slo`` per objective (named ``<name>``, or ``<name>-<displayName or
index>`` when it has several). Its SLI, inline or by ``indicatorRef``, is read from:

- ``ratioMetric`` good or bad, and total, each ``type: Prometheus`` with ``spec.query`` in
  the restricted PromQL of ``monitor.slo.promql_forms``;
- ``thresholdMetric`` (``type: Prometheus``) naming a latency histogram, the objective's
  ``op: lte`` and ``value`` being the threshold in seconds;
- the ``inferwatch`` metric source, which states the SLI in inferwatch's own terms, as the
  only source of ``ratioMetric`` (good and total follow from its kind)::

      ratioMetric:
        counter: true
        good:
          metricSource:
            type: inferwatch
            spec: {kind: latency, metric: ttft, threshold_seconds: 200ms,
                   selector: {labels: {model: llama}}}     # selector optional

Alert conditions (``kind: burnrate``) become explicit windows: long = ``lookbackWindow``,
short = long / 12 (the SRE workbook's ratio), factor = ``threshold`` (at least 1), for =
``alertAfter``; a page for "page"/"critical", a ticket otherwise. The alerts keep what the
author set: the AlertPolicy's name is the alert name, its metadata labels and annotations (and
description) go on the alert, and the condition's severity word is its ``severity`` label.
Calendar windows are ``1M`` or ``1w`` in UTC; a ``startTime`` must be where our periods begin
(00:00 on the 1st / on a Monday).
Service, DataSource and AlertNotificationTarget objects are accepted and otherwise unused.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Final

from pydantic import ValidationError

from monitor.slo.documents import (
    At,
    Doc,
    Draft,
    Loc,
    Origin,
    did_you_mean,
    duration,
    label_values,
    mapping,
    number,
    percent,
    sequence,
    string,
)
from monitor.slo.promql_forms import FormError, SliForm, ratio_sli, threshold_sli
from monitor.slo.spec import AlertTemplate, Budgeting, ExplicitWindow

API_VERSION: Final = "openslo/v1"
_KINDS: Final = ("SLO", "SLI", "AlertPolicy", "AlertCondition",
                 "Service", "DataSource", "AlertNotificationTarget")
_OBJECT_KEYS: Final = ("apiVersion", "kind", "metadata", "spec")
_UTC: Final = ("UTC", "Etc/UTC", "GMT", "Etc/GMT", "Z")
_SHORT_WINDOW_RATIO: Final = 12  # 1h/5m, 6h/30m, 1d/2h, 3d/6h


class Registry:
    """The OpenSLO objects of all loaded files by kind and name, for the ``*Ref`` fields."""

    def __init__(self) -> None:
        self._objects: dict[tuple[str, str], Doc] = {}

    def add(self, doc: Doc) -> Doc:
        """Check an object's header and keep it; the document returned carries its title."""
        root = At(doc)
        data = mapping(doc.data, root, _OBJECT_KEYS, ("apiVersion", "kind", "metadata"))
        if data["apiVersion"] != API_VERSION:
            raise (root / "apiVersion").error(f"unsupported apiVersion {data['apiVersion']!r}; "
                                              f"expected {API_VERSION}")
        kind = data["kind"]
        if kind not in _KINDS:
            raise (root / "kind").error(f"unknown OpenSLO kind {kind!r}; expected one of "
                                        f"{', '.join(_KINDS)}")
        metadata = mapping(data["metadata"], root / "metadata",
                           ("name", "displayName", "labels", "annotations"), ("name",))
        name = string(metadata["name"], root / "metadata" / "name")
        doc = replace(doc, title=f"{kind} {name}")
        first = self._objects.setdefault((kind, name), doc)
        if first is not doc:
            raise (At(doc) / "metadata" / "name").error(
                f"another {kind} is named {name!r}: {first.source}"
                + (f", {first.where}" if first.where else ""))
        return doc

    def get(self, kind: str, name: object, at: At) -> tuple[At, dict[str, Any]]:
        """The object a ``*Ref`` field at ``at`` names: its place and its mapping."""
        name = string(name, at)
        doc = self._objects.get((kind, name))
        if doc is None:
            known = [n for k, n in self._objects if k == kind]
            raise at.error(f"no {kind} named {name!r} in the loaded files"
                           + did_you_mean(name, known))
        return At(doc), doc.data


@dataclass(frozen=True)
class _Indicator:
    sli: dict[str, Any]
    selector: object
    origins: dict[Loc, Origin]
    threshold: bool  # a thresholdMetric: each objective gives the threshold (op, value)


def slo_drafts(doc: Doc, registry: Registry) -> list[Draft]:
    """One draft per objective of the SLO object in ``doc`` (registered already)."""
    root = At(doc)
    metadata = doc.data["metadata"]
    spec_at = root / "spec"
    spec = mapping(doc.data.get("spec"), spec_at,
                   ("description", "service", "indicator", "indicatorRef", "timeWindow",
                    "budgetingMethod", "objectives", "alertPolicies"),
                   ("budgetingMethod", "objectives"))
    indicator = _indicator(spec, spec_at, registry)
    budgeting = spec["budgetingMethod"]
    if budgeting not in list(Budgeting):
        raise (spec_at / "budgetingMethod").error(
            f"unknown budgeting method {budgeting!r}; expected one of "
            f"{', '.join(b.value for b in Budgeting)}")
    objectives = sequence(spec["objectives"], spec_at / "objectives")
    if not objectives:
        raise (spec_at / "objectives").error("give at least one objective")
    common: dict[str, Any] = {
        "service": spec.get("service", "inference"),
        "description": spec.get("description", ""),
        "budgeting": budgeting,
        "selector": indicator.selector,
        "labels": label_values(metadata.get("labels"), root / "metadata" / "labels"),
        "alerting": {"windows": _alert_windows(spec.get("alertPolicies"),
                                               spec_at / "alertPolicies", registry)},
    }
    origins = {**indicator.origins,
               ("service",): Origin(spec_at / "service"),
               ("description",): Origin(spec_at / "description"),
               ("budgeting",): Origin(spec_at / "budgetingMethod"),
               ("labels",): Origin(root / "metadata" / "labels", nested=True),
               ("alerting",): Origin(spec_at / "alertPolicies")}
    window = _window(spec.get("timeWindow"), spec_at / "timeWindow")
    if window is not None:
        common["window"] = window[0]
        origins[("window",)] = Origin(window[1])
    return [_objective(value, spec_at / "objectives" / i, i, len(objectives),
                       metadata["name"], indicator, common, origins)
            for i, value in enumerate(objectives)]


def _objective(value: object, at: At, index: int, count: int, name: str,
               indicator: _Indicator, common: dict[str, Any],
               origins: dict[Loc, Origin]) -> Draft:
    o = mapping(value, at, ("displayName", "op", "value", "target", "targetPercent",
                            "timeSliceTarget", "timeSliceWindow"))
    fields = {**common, "sli": dict(indicator.sli)}
    origins = {**origins, (): Origin(at), ("name",): Origin(At(at.doc) / "metadata" / "name")}
    if count > 1:
        suffix = _slug(str(o.get("displayName", ""))) or str(index)
        name = f"{name}-{suffix}"
    fields["name"] = name
    if ("target" in o) == ("targetPercent" in o):
        raise at.error("give target (0 to 1) or targetPercent (0 to 100)")
    if "target" in o:
        fields["objective"] = o["target"]
        origins[("objective",)] = Origin(at / "target")
    else:
        fields["objective"] = percent(o["targetPercent"], at / "targetPercent")
        origins[("objective",)] = Origin(at / "targetPercent")
    if indicator.threshold:
        if o.get("op") != "lte" or "value" not in o:
            raise (at / "op").error("a latency threshold metric needs op: lte and value (the "
                                    "threshold in seconds): buckets count requests at or "
                                    "under their bound")
        fields["sli"]["threshold_seconds"] = number(o["value"], at / "value")
        origins[("sli", "threshold_seconds")] = Origin(at / "value")
    elif "op" in o or "value" in o:
        raise (at / ("op" if "op" in o else "value")).error(
            "op and value are for a thresholdMetric; a ratioMetric's threshold is in its SLI")
    if "timeSliceWindow" in o:
        window = o["timeSliceWindow"]  # a bare number is minutes in OpenSLO
        is_minutes = isinstance(window, (int, float)) and not isinstance(window, bool)
        fields["timeslice_seconds"] = window * 60 if is_minutes else window
        origins[("timeslice_seconds",)] = Origin(at / "timeSliceWindow")
    elif fields["budgeting"] != Budgeting.OCCURRENCES:
        raise (at / "timeSliceWindow").error(f"required with budgetingMethod "
                                             f"{fields['budgeting']}")
    if "timeSliceTarget" in o:
        fields["timeslice_target"] = o["timeSliceTarget"]
        origins[("timeslice_target",)] = Origin(at / "timeSliceTarget")
    return Draft(fields, origins)


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def _indicator(spec: dict[str, Any], spec_at: At, registry: Registry) -> _Indicator:
    if ("indicator" in spec) == ("indicatorRef" in spec):
        raise spec_at.error("give indicator (an inline SLI) or indicatorRef (an SLI's name)")
    if "indicatorRef" in spec:
        sli_at, sli = registry.get("SLI", spec["indicatorRef"], spec_at / "indicatorRef")
    else:
        sli_at = spec_at / "indicator"
        sli = mapping(spec["indicator"], sli_at, _OBJECT_KEYS, ("spec",))
    at = sli_at / "spec"
    s = mapping(sli.get("spec"), at, ("description", "thresholdMetric", "ratioMetric"))
    if ("thresholdMetric" in s) == ("ratioMetric" in s):
        raise at.error("give ratioMetric or thresholdMetric")
    if "thresholdMetric" in s:
        source_at = at / "thresholdMetric" / "metricSource"
        metric = mapping(s["thresholdMetric"], at / "thresholdMetric", ("metricSource",),
                         ("metricSource",))
        kind, source = _source(metric["metricSource"], source_at, registry)
        if kind == "inferwatch":
            raise (source_at / "type").error("an inferwatch metric source is the whole SLI: "
                                             "give it as ratioMetric.good")
        query_at = source_at / "spec" / "query"
        form = _form(lambda: threshold_sli(string(source.get("query"), query_at)),
                     {"query": query_at})
        return _prometheus(form, {"query": query_at}, at / "thresholdMetric", threshold=True)
    return _ratio(s["ratioMetric"], at / "ratioMetric", registry)


def _ratio(value: object, at: At, registry: Registry) -> _Indicator:
    r = mapping(value, at, ("counter", "good", "bad", "total", "rawType", "raw"))
    if "raw" in r or "rawType" in r:
        raise (at / ("raw" if "raw" in r else "rawType")).error(
            "a raw (precomputed) ratio is not supported: give good or bad, and total")
    sources: dict[str, tuple[str, dict[str, Any]]] = {}
    for role in ("good", "bad", "total"):
        if role in r:
            metric = mapping(r[role], at / role, ("metricSource",), ("metricSource",))
            sources[role] = _source(metric["metricSource"], at / role / "metricSource",
                                    registry)
    if any(kind == "inferwatch" for kind, _ in sources.values()):
        if set(sources) != {"good"} or sources["good"][0] != "inferwatch":
            raise at.error("an inferwatch metric source is the whole SLI: give it as good "
                           "alone, without bad and total")
        spec_at = at / "good" / "metricSource" / "spec"
        sli = dict(sources["good"][1])
        selector = sli.pop("selector", {})
        return _Indicator(sli, selector, {("sli",): Origin(spec_at, nested=True),
                                          ("selector",): Origin(spec_at / "selector", True)},
                          threshold=False)
    if r.get("counter", True) is not True:
        raise (at / "counter").error("only counters can be read (counter: true)")
    if "total" not in sources or ("good" in sources) == ("bad" in sources):
        raise at.error("give good or bad, and total")
    query_ats: dict[str, At] = {role: at / role / "metricSource" / "spec" / "query"
                                for role in sources}
    queries = {role: string(source.get("query"), query_ats[role])
               for role, (_, source) in sources.items()}
    form = _form(lambda: ratio_sli(queries["total"], good=queries.get("good"),
                                   bad=queries.get("bad")), query_ats)
    return _prometheus(form, query_ats, at, threshold=False)


def _form(read: Callable[[], SliForm], query_ats: dict[str, At]) -> SliForm:
    try:
        return read()
    except FormError as exc:
        raise query_ats[exc.role].error(str(exc)) from None


def _prometheus(form: SliForm, query_ats: dict[str, At], at: At, threshold: bool) -> _Indicator:
    origins: dict[Loc, Origin] = {("sli",): Origin(at), ("selector",): Origin(at)}
    for field, role in form.roles.items():
        origins[("sli", field)] = Origin(query_ats[role])
    return _Indicator(form.sli, {"labels": form.selector}, origins, threshold)


def _source(value: object, at: At, registry: Registry) -> tuple[str, dict[str, Any]]:
    """A metric source's type ("prometheus" or "inferwatch") and its spec."""
    source = mapping(value, at, ("metricSourceRef", "type", "spec"), ("spec",))
    kind = source.get("type")
    if kind is None:
        if "metricSourceRef" not in source:
            raise (at / "type").error("required, unless a metricSourceRef names a DataSource")
        data_at, data = registry.get("DataSource", source["metricSourceRef"],
                                     at / "metricSourceRef")
        kind = mapping(data.get("spec"), data_at / "spec").get("type")
    if not isinstance(kind, str) or kind.lower() not in ("prometheus", "inferwatch"):
        raise (at / "type").error(f"metric source type {kind!r} is not supported: use "
                                  "Prometheus (restricted PromQL) or inferwatch")
    return kind.lower(), mapping(source["spec"], at / "spec")


def _window(value: object, at: At) -> tuple[dict[str, Any], At] | None:
    """The ``window`` of ``Slo`` and where its error would be; None for the default."""
    if value is None:
        return None
    entries = sequence(value, at)
    if len(entries) != 1:
        raise at.error("give exactly one time window")
    at = at / 0
    w = mapping(entries[0], at, ("duration", "isRolling", "calendar"), ("duration",))
    length = w["duration"]
    rolling = w.get("isRolling", "calendar" not in w)
    if not isinstance(rolling, bool):
        raise (at / "isRolling").error(f"expected true or false, got {rolling!r}")
    if rolling:
        if "calendar" in w:
            raise (at / "calendar").error("a calendar is for isRolling: false")
        if isinstance(length, str) and length[-1:] in ("M", "Q", "Y"):
            raise (at / "duration").error(f"a rolling {length} has no fixed length: give days "
                                          "or weeks (30d, 28d, 4w)")
        return {"duration_seconds": length}, at / "duration"
    period = {"1M": "month", "1w": "week"}.get(str(length))
    if period is None:
        raise (at / "duration").error(f"a calendar window is 1M (a month) or 1w (a week), "
                                      f"got {length!r}")
    calendar = mapping(w.get("calendar", {}), at / "calendar", ("startTime", "timeZone"))
    zone = calendar.get("timeZone", "UTC")
    if zone not in _UTC:
        raise (at / "calendar" / "timeZone").error(f"calendar periods are in UTC, got {zone!r}")
    if "startTime" in calendar:
        _check_start(calendar["startTime"], period, at / "calendar" / "startTime")
    return {"calendar": period}, at


def _check_start(value: object, period: str, at: At) -> None:
    """Our calendar periods begin at 00:00 UTC on the 1st (month) or on Monday (ISO week)."""
    try:
        if isinstance(value, dt.datetime):
            start = value
        elif isinstance(value, dt.date):
            start = dt.datetime(value.year, value.month, value.day)
        else:
            start = dt.datetime.fromisoformat(str(value))
    except ValueError:
        raise at.error(f"{value!r} is not a date and time") from None
    midnight = start.time() == dt.time(0)
    if not (midnight and (start.day == 1 if period == "month" else start.weekday() == 0)):
        begins = "the 1st of a month" if period == "month" else "a Monday"
        raise at.error(f"calendar {period}s begin at 00:00 on {begins}, not at {start}")


def _alert_windows(value: object, at: At, registry: Registry) -> tuple[ExplicitWindow, ...]:
    if value is None:
        return ()
    windows = []
    for i, item in enumerate(sequence(value, at)):
        policy_at, policy = _object(item, at / i, "AlertPolicy", "alertPolicyRef", registry)
        spec_at = policy_at / "spec"
        spec = mapping(policy.get("spec"), spec_at,
                       ("description", "alertWhenNoData", "alertWhenResolved",
                        "alertWhenBreaching", "conditions", "notificationTargets"),
                       ("conditions",))
        if spec.get("alertWhenBreaching", True) is False:
            continue  # it alerts on resolution or missing data only: no burn-rate condition
        template = _policy_template(policy, policy_at, spec)
        for j, entry in enumerate(sequence(spec["conditions"], spec_at / "conditions")):
            windows.append(_burn_window(*_object(entry, spec_at / "conditions" / j,
                                                 "AlertCondition", "conditionRef", registry),
                                        template))
    return tuple(windows)


def _policy_template(policy: dict[str, Any], at: At, spec: dict[str, Any]) -> dict[str, Any]:
    """The alert as the policy's author named and labelled it: its name is the alert name,
    its metadata labels and annotations (and description) go on the alert."""
    metadata = mapping(policy.get("metadata", {}), at / "metadata")
    annotations = {str(k): string(v, at / "metadata" / "annotations" / str(k)) for k, v in
                   mapping(metadata.get("annotations", {}), at / "metadata" /
                           "annotations").items()}
    if "description" in spec:
        annotations.setdefault("description", string(spec["description"],
                                                     at / "spec" / "description"))
    template: dict[str, Any] = {
        "labels": label_values(metadata.get("labels"), at / "metadata" / "labels"),
        "annotations": annotations}
    if "name" in metadata:
        template["name"] = string(metadata["name"], at / "metadata" / "name")
    return template


def _object(value: object, at: At, kind: str, ref: str,
            registry: Registry) -> tuple[At, dict[str, Any]]:
    """An object given inline at ``at`` or by name in its ``ref`` field."""
    item = mapping(value, at)
    if ref in item:
        mapping(item, at, (ref,))
        return registry.get(kind, item[ref], at / ref)
    item = mapping(item, at, _OBJECT_KEYS, ("spec",))
    if item.get("kind", kind) != kind:
        raise (at / "kind").error(f"expected {kind} here, got {item['kind']!r}")
    return at, item


def _burn_window(at: At, condition: dict[str, Any], template: dict[str, Any]) -> ExplicitWindow:
    spec = mapping(condition.get("spec"), at / "spec", ("description", "severity", "condition"),
                   ("severity", "condition"))
    c_at = at / "spec" / "condition"
    c = mapping(spec["condition"], c_at, ("kind", "op", "threshold", "lookbackWindow",
                                          "alertAfter"), ("threshold", "lookbackWindow"))
    if c.get("kind", "burnrate") != "burnrate":
        raise (c_at / "kind").error(f"only burnrate conditions are supported, got {c['kind']!r}")
    if c.get("op", "gt") not in ("gt", "gte"):
        raise (c_at / "op").error("a burn-rate alert fires above its threshold: op gt or gte")
    factor = number(c["threshold"], c_at / "threshold")
    if factor <= 0:
        raise (c_at / "threshold").error(f"a burn rate threshold is positive, got {factor:g}")
    long = duration(c["lookbackWindow"], c_at / "lookbackWindow")
    after = c.get("alertAfter", 0)
    written = str(spec["severity"])
    severity = written.lower()
    # The author's severity word stays the alert's severity label (their routing reads it).
    alert = {**template, "labels": {**template["labels"], "severity": written}}
    try:
        return ExplicitWindow(
            alert=AlertTemplate.model_validate(alert),
            severity="page" if severity in ("page", "critical") else "ticket",
            long_seconds=long, short_seconds=long / _SHORT_WINDOW_RATIO, factor=factor,
            for_seconds=0.0 if after in (0, "0", "0s", "0m") else duration(after,
                                                                           c_at / "alertAfter"))
    except ValidationError as exc:
        raise c_at.error("; ".join(e["msg"] for e in exc.errors())) from None
