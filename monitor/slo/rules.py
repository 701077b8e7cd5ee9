"""Prometheus recording and alerting rules from SLO specs (`inferwatch rules generate`).

The rules compute what the monitor's evaluator computes (``monitor.slo.evaluator``), so an
alert fires in Prometheus when it fires in the monitor:

- events over a window are counter increases summed over every selected series,
  ``sum(increase(x[w]))``; error ratio = bad / total, burn rate = error ratio / (1 - objective),
  never a mean of ratios;
- Timeslices record one value per slice in a group of their own (``interval`` = the slice):
  0/1 (good or not) for Timeslices, good/total for RatioTimeslices; a window's error ratio is
  then 1 - mean of its slices, and its events the number of slices;
- a burn alert per burn window: events(long) >= min_events, burn(long) > factor and
  burn(short) > factor; a no-data alert when the SLI's total series had no sample for
  ``no_data_after``.

The PromQL per SLI kind lives in one place, ``sli_queries``; ``events_promql`` and
``slice_promql`` render it for a window, for the rule file and for anyone who needs the same
query (the monitor, dashboards). Recording rules follow ``level:metric:operations``:
``inferwatch_slo:sli_errors:increase5m``, ``inferwatch_slo:error_ratio:ratio_rate1h``, ...,
each labelled ``slo="<name>"`` (and nothing else: the sums drop every other label).

An SLO split by labels (``grouping: [tenant]``) sums ``by (tenant)`` instead: every recorded
series and every alert then carries its tenant beside ``slo``, the min_events gate counts one
tenant's events, and an optional term missing for a tenant is 0 for it (``or 0 * sum by
(tenant) (total)``, where an SLO as a whole has ``or vector(0)``). The annotations' queries
select the alert's own tenant (``printf`` of its ``$labels``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal

import yaml
from prometheus_client.utils import floatToGoString

from exporters import schema
from monitor.slo.durations import format_duration
from monitor.slo.spec import (
    PRE_ENGINE_ERRORS,
    AvailabilitySli,
    Budgeting,
    CounterQuery,
    GoodputSli,
    LatencySli,
    RatioSli,
    Slo,
    ThroughputSli,
    prometheus_slos,
)
from monitor.slo.windows import (
    NO_DATA_ALERT,
    BurnWindow,
    Severity,
    alert_labels,
    burn_alert,
    burn_windows,
    no_data_labels,
)

if TYPE_CHECKING:
    from monitor.slo.target_down_rules import TargetDownRule

LEVEL: Final = "inferwatch_slo"
GENERATED_BY: Final = "inferwatch rules generate"
_PLAIN_VALUE: Final = re.compile(r"^[A-Za-z0-9_]+$")


# --- numbers and names -----------------------------------------------------------------------

def promql_number(value: float) -> str:
    """A constant as written into the rules: 12 significant digits, so 1 - 0.999 reads 0.001
    (the float noise of the subtraction is not part of the objective)."""
    return f"{value:.12g}"


def as_written(value: float) -> float:
    """The float Prometheus parses from ``promql_number(value)``: compare with this, not with
    ``value``, to reproduce a rule's arithmetic bit for bit."""
    return float(promql_number(value))


def record_name(metric: str, operation: str, seconds: float | None = None) -> str:
    """``inferwatch_slo:<metric>:<operation><window>``, e.g. error_ratio, ratio_rate, 1h."""
    window = format_duration(seconds) if seconds is not None else ""
    return f"{LEVEL}:{metric}:{operation}{window}"


def slo_matcher(slo: Slo) -> str:
    return f'{{slo="{escape_label_value(slo.name)}"}}'


def group_name(slo: Slo) -> str:
    return f"inferwatch-slo-{slo.name}"


def slice_group_name(slo: Slo) -> str:
    return f"inferwatch-slo-{slo.name}-slices"


def escape_label_value(value: str) -> str:
    """A label value inside PromQL double quotes."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


# --- what each SLI counts --------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class SeriesSelector:
    """A PromQL series selector: equality matchers, plus label-in-set matchers (``=~"a|b"``)."""

    metric: str  # as exposed: counters with _total, histogram series with _count / _bucket
    equal: tuple[tuple[str, str], ...] = ()
    one_of: tuple[tuple[str, tuple[str, ...]], ...] = ()

    def promql(self) -> str:
        matchers = [f'{k}="{escape_label_value(v)}"' for k, v in self.equal]
        matchers += [f'{k}=~"{"|".join(_regex_literal(v) for v in values)}"'
                     for k, values in self.one_of]
        return f"{self.metric}{{{','.join(matchers)}}}" if matchers else self.metric

    def matches(self, metric: str, labels: Mapping[str, str]) -> bool:
        """Whether the series ``metric{labels}`` is selected (absent labels match "" only)."""
        return (metric == self.metric
                and all(labels.get(k, "") == v for k, v in self.equal)
                and all(labels.get(k, "") in values for k, values in self.one_of))


def _regex_literal(value: str) -> str:
    return value if _PLAIN_VALUE.match(value) else escape_label_value(re.escape(value))


@dataclass(frozen=True, slots=True)
class Term:
    """``sum(fn(selector[w]))``, added or subtracted. An optional term counts as 0 when no
    series matches (``or vector(0)``): error counters are often created by the first error."""

    selector: SeriesSelector
    sign: Literal[1, -1] = 1
    optional: bool = False


@dataclass(frozen=True, slots=True)
class SliQueries:
    """An SLI's counters: bad and total events (or, for throughput, the counters whose summed
    rate is compared with min_per_second), and the series whose absence is no data."""

    bad: tuple[Term, ...]
    total: tuple[Term, ...]
    rate: tuple[Term, ...]
    no_data: tuple[SeriesSelector, ...]


def sli_queries(slo: Slo, target_label: str = "job") -> SliQueries:
    """The one definition of what each SLI kind counts, in PromQL terms."""
    base = base_matchers(slo, target_label)
    sli = slo.sli
    if isinstance(sli, LatencySli):
        count = SeriesSelector(f"{sli.histogram}_count", base)
        le = latency_le(sli)
        if le is None:  # lower_edge below the first edge: every request is bad
            return SliQueries((Term(count),), (Term(count),), (), (count,))
        bucket = SeriesSelector(f"{sli.histogram}_bucket", base + (("le", le),))
        return SliQueries((Term(count), Term(bucket, -1)), (Term(count),), (), (count,))
    if isinstance(sli, AvailabilitySli):
        return _availability(sli, base)
    if isinstance(sli, ThroughputSli):
        counters = tuple(SeriesSelector(schema.get_spec(c).exposed_name, base)
                         for c in sli.counters)
        return SliQueries((), (), tuple(Term(c) for c in counters), counters)
    if isinstance(sli, GoodputSli):
        raise ValueError(f"SLO {slo.name}: a goodput SLI is read from stored request events, "
                         "which Prometheus does not have; the monitor evaluates it")
    return _ratio(sli, base)


def base_matchers(slo: Slo, target_label: str) -> tuple[tuple[str, str], ...]:
    """The selector's equality matchers, on every metric of the SLI: target first."""
    equal = dict(sorted(slo.selector.labels.items()))
    if slo.selector.target is not None:
        equal = {target_label: slo.selector.target, **equal}
    return tuple(equal.items())


def latency_le(sli: LatencySli) -> str | None:
    """The ``le`` label good events are counted at, as prometheus_client writes it ("0.5",
    "1.0"): the edge of the engine's buckets equal to the threshold, or with
    ``off_edge: lower_edge`` the edge below it (``monitor.slo.edges``); None where no edge is
    at or below it (no request is good). Never an edge the engine does not have."""
    edge = sli.counted_at.edge
    return None if edge is None else str(floatToGoString(edge))  # type: ignore[no-untyped-call]


def _availability(sli: AvailabilitySli, base: tuple[tuple[str, str], ...]) -> SliQueries:
    errors = schema.get_spec(schema.REQUEST_ERRORS).exposed_name
    requests = SeriesSelector(schema.get_spec(schema.REQUESTS).exposed_name, base)
    counted = tuple(sorted(sli.errors))  # the default tuple is not sorted by the model
    bad = SeriesSelector(errors, base, ((schema.ERROR_TYPE, counted),))
    total = [Term(requests)]
    pre_engine = tuple(e for e in counted if e in PRE_ENGINE_ERRORS)
    if pre_engine:  # refused before the engine: not in the requests counter
        total.append(Term(SeriesSelector(errors, base, ((schema.ERROR_TYPE, pre_engine),)),
                          optional=True))
    return SliQueries((Term(bad, optional=True),), tuple(total), (), (requests,))


def _ratio(sli: RatioSli, base: tuple[tuple[str, str], ...]) -> SliQueries:
    total = counter_selector(sli.total, base)
    if sli.good is not None:
        bad: tuple[Term, ...] = (Term(total), Term(counter_selector(sli.good, base), -1))
    else:
        assert sli.bad is not None  # the model requires one of good and bad
        bad = (Term(counter_selector(sli.bad, base), optional=True),)
    return SliQueries(bad, (Term(total),), (), (total,))


def counter_selector(query: CounterQuery, base: tuple[tuple[str, str], ...]) -> SeriesSelector:
    """A ratio SLI's counter: its own label matchers over the selector's."""
    equal = dict(base)
    equal.update(sorted(query.labels.items()))
    return SeriesSelector(schema.get_spec(query.metric).exposed_name, tuple(equal.items()))


# --- PromQL ------------------------------------------------------------------------------------

def _aggregate(by: Sequence[str], function: str, selector: SeriesSelector, window: str) -> str:
    """``sum(fn(x[w]))``, or ``sum by (a, b) (fn(x[w]))`` for a split SLO."""
    if not by:
        return f"sum({function}({selector.promql()}[{window}]))"
    return f"sum by ({', '.join(by)}) ({function}({selector.promql()}[{window}]))"


def _sum_promql(terms: Sequence[Term], function: str, seconds: float,
                by: Sequence[str] = (), fill: SeriesSelector | None = None) -> str:
    """The terms summed (``by`` labels). An optional term without series is 0: ``vector(0)``
    as a whole, or per group 0 times ``fill`` (the SLI's total), so each group has it."""
    window = format_duration(seconds)
    parts = []
    for i, term in enumerate(terms):
        text = _aggregate(by, function, term.selector, window)
        if term.optional:
            zero = "vector(0)" if not by or fill is None else \
                f"0 * {_aggregate(by, function, fill, window)}"
            text = f"({text} or {zero})"
        parts.append(text if i == 0 else f"{'+' if term.sign > 0 else '-'} {text}")
    return " ".join(parts)


def events_promql(slo: Slo, seconds: float, target_label: str = "job") -> tuple[str, str]:
    """(bad events, all events) over a window ending now, as PromQL; per group of the SLO's
    ``grouping`` labels when it has them."""
    queries = sli_queries(slo, target_label)
    if not queries.total:
        raise ValueError(f"SLO {slo.name}: a throughput SLI has no events, only slices")
    fill = queries.total[0].selector
    return (_sum_promql(queries.bad, "increase", seconds, slo.grouping, fill),
            _sum_promql(queries.total, "increase", seconds, slo.grouping, fill))


def throughput_promql(slo: Slo, seconds: float, target_label: str = "job") -> str:
    """Per-second rate of the throughput counters over a window, summed."""
    return _sum_promql(sli_queries(slo, target_label).rate, "rate", seconds)


def slice_record(slo: Slo) -> str:
    """The recorded per-slice series: 0/1 for Timeslices, a ratio for RatioTimeslices."""
    assert slo.timeslice_seconds is not None
    if slo.budgeting is Budgeting.TIMESLICES:
        return record_name("slice_good", "bool", slo.timeslice_seconds)
    return record_name("slice_good", "ratio", slo.timeslice_seconds)


def slice_promql(slo: Slo, target_label: str = "job") -> str:
    """One slice's value: good (1) or not (0) for Timeslices, the good ratio for
    RatioTimeslices. A slice without events has no value (it is no event)."""
    assert slo.timeslice_seconds is not None
    if isinstance(slo.sli, ThroughputSli):
        rate = throughput_promql(slo, slo.timeslice_seconds, target_label)
        return f"{rate} >= bool {promql_number(slo.sli.min_per_second)}"
    bad, total = events_promql(slo, slo.timeslice_seconds, target_label)
    if len(sli_queries(slo, target_label).bad) > 1:
        bad = f"({bad})"
    ratio = f"1 - {bad} / ({total} > 0)"
    if slo.budgeting is Budgeting.RATIO_TIMESLICES:
        return ratio
    assert slo.timeslice_target is not None
    return f"{ratio} >= bool {promql_number(slo.timeslice_target)}"


def no_data_promql(slo: Slo, target_label: str = "job") -> str:
    """1 (no labels) when no total series had a sample within ``no_data_after``."""
    window = format_duration(slo.alerting.no_data_after_seconds)
    absent = " or ".join(f"absent_over_time({s.promql()}[{window}])"
                         for s in sli_queries(slo, target_label).no_data)
    return f"sum({absent})"


# --- rules ---------------------------------------------------------------------------------

def rule_windows(slo: Slo) -> tuple[float, ...]:
    """Every window a rule needs: the burn windows' long and short ones and the period."""
    seconds = {s for w in burn_windows(slo) for s in (w.long_seconds, w.short_seconds)}
    return tuple(sorted(seconds | {slo.window.nominal_seconds}))


def error_ratio_record(seconds: float) -> str:
    return record_name("error_ratio", "ratio_rate", seconds)


def events_record(slo: Slo, seconds: float) -> str:
    operation = "increase" if slo.budgeting is Budgeting.OCCURRENCES else "count_over_time"
    return record_name("sli_events", operation, seconds)


def budget_remaining_record(slo: Slo) -> str:
    return record_name("error_budget_remaining", "ratio", slo.window.nominal_seconds)


def _record(name: str, expr: str, slo: Slo) -> dict[str, Any]:
    return {"record": name, "expr": expr, "labels": {"slo": slo.name}}


def _occurrence_records(slo: Slo, seconds: float, target_label: str) -> list[dict[str, Any]]:
    bad, total = events_promql(slo, seconds, target_label)
    errors = record_name("sli_errors", "increase", seconds)
    events = events_record(slo, seconds)
    me = slo_matcher(slo)
    return [_record(errors, bad, slo), _record(events, total, slo),
            _record(error_ratio_record(seconds), f"{errors}{me} / ({events}{me} > 0)", slo)]


def _sliced_records(slo: Slo, seconds: float) -> list[dict[str, Any]]:
    assert slo.timeslice_seconds is not None
    # A window shorter than a slice would hold no slice at all at some evaluations.
    span = format_duration(max(seconds, slo.timeslice_seconds))
    slices = f"{slice_record(slo)}{slo_matcher(slo)}[{span}]"
    return [
        _record(events_record(slo, seconds), f"count_over_time({slices})", slo),
        _record(error_ratio_record(seconds),
                f"1 - sum_over_time({slices}) / count_over_time({slices})", slo),
    ]


def _records(slo: Slo, target_label: str) -> list[dict[str, Any]]:
    rules: list[dict[str, Any]] = []
    for seconds in rule_windows(slo):
        if slo.budgeting is Budgeting.OCCURRENCES:
            rules += _occurrence_records(slo, seconds, target_label)
        else:
            rules += _sliced_records(slo, seconds)
    period = error_ratio_record(slo.window.nominal_seconds)
    budget = promql_number(slo.error_budget)
    rules.append(_record(budget_remaining_record(slo),
                         f"1 - {period}{slo_matcher(slo)} / {budget}", slo))
    return rules


def burn_alert_promql(slo: Slo, window: BurnWindow) -> str:
    """Both windows burn faster than the factor (the long one first: it is ``$value``), and
    the long window holds at least min_events events."""
    budget, factor = promql_number(slo.error_budget), promql_number(window.factor)
    me = slo_matcher(slo)
    parts = [f"{error_ratio_record(s)}{me} / {budget} > {factor}"
             for s in (window.long_seconds, window.short_seconds)]
    if slo.alerting.min_events > 0:
        parts.append(f"{events_record(slo, window.long_seconds)}{me} >= "
                     f"{slo.alerting.min_events}")
    return " and ".join(parts)


def exhaustion_window(slo: Slo) -> float | None:
    """The window whose burn rate times the budget's exhaustion: the shortest long window, as
    in the evaluator."""
    windows = burn_windows(slo)
    return min(w.long_seconds for w in windows) if windows else None


def _query(expr: str) -> str:
    """``expr`` as a Go template string literal for ``query``."""
    return '"' + expr.replace("\\", "\\\\").replace('"', '\\"') + '"'


_MATCHER: Final = "\x00"  # where a template's query takes the SLO's (and group's) matcher


def _with_query(slo: Slo, expr: str) -> str:
    """``with query "<expr>"``; for a split SLO, the alert's own group selected:
    ``with printf "<expr with %[1]s>" $labels.tenant | query``. ``expr`` has ``_MATCHER``
    where the matcher goes."""
    if not slo.grouping:
        return f"with query {_query(expr.replace(_MATCHER, slo_matcher(slo)))}"
    matchers = [f'slo="{escape_label_value(slo.name)}"'] + [
        f'{label}="%[{i}]s"' for i, label in enumerate(slo.grouping, 1)]
    text = expr.replace("%", "%%").replace(_MATCHER, "{" + ",".join(matchers) + "}")
    args = " ".join(f"$labels.{label}" for label in slo.grouping)
    return f"with printf {_query(text)} {args} | query"


def budget_remaining_template(slo: Slo) -> str:
    expr = f"{budget_remaining_record(slo)}{_MATCHER}"
    return (f"{{{{ {_with_query(slo, expr)} }}}}{{{{ . | first | value | humanizePercentage }}}}"
            "{{ else }}unknown{{ end }}")


def exhaustion_promql(slo: Slo, matcher: str | None = None) -> str | None:
    """Hours until the budget is gone at the burn rate of ``exhaustion_window``."""
    seconds = exhaustion_window(slo)
    if seconds is None:
        return None
    me = slo_matcher(slo) if matcher is None else matcher
    hours = promql_number(slo.window.nominal_seconds / 3600)
    return (f"{budget_remaining_record(slo)}{me} * {hours} / "
            f"({error_ratio_record(seconds)}{me} / {promql_number(slo.error_budget)})")


def exhaustion_template(slo: Slo) -> str:
    expr = exhaustion_promql(slo, _MATCHER)
    if expr is None:
        return "unknown"
    return (f"{{{{ {_with_query(slo, expr)} }}}}{{{{ $hours := . | first | value }}}}"
            '{{ if gt $hours 0.0 }}{{ printf "%.1fh" $hours }}{{ else }}exhausted{{ end }}'
            "{{ else }}unknown{{ end }}")


def describe_sli(slo: Slo) -> str:
    """What counts as good, in words."""
    sli = slo.sli
    if isinstance(sli, LatencySli):
        where = sli.counted_at
        if where.exact:
            return f"requests with {sli.metric} at most {latency_le(sli)}s"
        at = f"{where.edge:g}s" if where.edge is not None else "no edge"
        return (f"requests with {sli.metric} at most {sli.threshold_seconds:g}s, counted at "
                f"{at} (off_edge: lower_edge)")
    if isinstance(sli, AvailabilitySli):
        return f"requests not failing with {', '.join(sorted(sli.errors))}"
    if isinstance(sli, ThroughputSli):
        return f"slices with {sli.metric} at least {sli.min_per_second:g}/s"
    if isinstance(sli, GoodputSli):
        return sli.describe()
    if sli.good is not None:
        return f"{_query_text(sli.good)} among {_query_text(sli.total)}"
    assert sli.bad is not None
    return f"{_query_text(sli.total)} not counted in {_query_text(sli.bad)}"


def _query_text(query: CounterQuery) -> str:
    labels = ",".join(f"{k}={v}" for k, v in sorted(query.labels.items()))
    return f"{query.metric}{{{labels}}}" if labels else query.metric


def _objective_text(slo: Slo) -> str:
    period = (format_duration(slo.window.nominal_seconds) if slo.window.is_rolling
              else f"the calendar {slo.window.calendar}")
    return f"{slo.objective * 100:.4g}% of {describe_sli(slo)} over {period}"


def _links(slo: Slo) -> dict[str, str]:
    links = {}
    if slo.alerting.runbook_url:
        links["runbook_url"] = slo.alerting.runbook_url
    if slo.alerting.dashboard_url:
        links["dashboard_url"] = slo.alerting.dashboard_url
    return links


def burn_annotations(slo: Slo, window: BurnWindow) -> dict[str, str]:
    """Static text, plus the long window's burn rate (``$value``) and queries of recorded
    series; the generated promtool tests spell out what they render to."""
    factor = f"{window.factor:g}"
    long = format_duration(window.long_seconds)
    summary = (f"SLO {slo.name}{group_template(slo)} is burning its error budget "
               '{{ printf "%.1f" $value }}x too fast over ' + f"{long} ({window.severity} "
               f"above {factor}x over {window.name})")
    lead = slo.description.strip().rstrip(".")
    description = (f"{lead + '. ' if lead else ''}"
                   f"Objective: {_objective_text(slo)} ({slo.budgeting}). At this rate "
                   f"{window.budget_consumed:.0%} of the budget is gone within {long}.")
    return {
        "summary": summary,
        "description": description,
        "burn_rate": '{{ printf "%.2f" $value }}',
        "factor": factor,
        "budget_remaining": budget_remaining_template(slo),
        "time_to_exhaustion": exhaustion_template(slo),
        **_edge_note(slo),
        **_links(slo),
    }


def _edge_note(slo: Slo) -> dict[str, str]:
    """``sli_note``: where an off-edge threshold is really counted (``off_edge: lower_edge``)."""
    note = slo.sli.edge_note if isinstance(slo.sli, LatencySli) else None
    return {"sli_note": note} if note else {}


def group_template(slo: Slo) -> str:
    """" for tenant={{ $labels.tenant }}" in a split SLO's summary; "" for a whole one."""
    if not slo.grouping:
        return ""
    return " for " + ", ".join(f"{k}={{{{ $labels.{k} }}}}" for k in slo.grouping)


def no_data_annotations(slo: Slo) -> dict[str, str]:
    after = format_duration(slo.alerting.no_data_after_seconds)
    return {
        "summary": f"SLO {slo.name}: no samples of its SLI for {after}",
        "description": (f"No series of {describe_sli(slo)} had a sample for {after}: the SLO "
                        "cannot be judged (not met, not violated). Are the targets up?"),
        **_links(slo),
    }


def _alerts(slo: Slo, target_label: str) -> list[dict[str, Any]]:
    rules: list[dict[str, Any]] = []
    for window in burn_windows(slo):
        author = burn_alert(slo, window)
        rule: dict[str, Any] = {"alert": author.name, "expr": burn_alert_promql(slo, window)}
        if window.for_seconds > 0:
            rule["for"] = format_duration(window.for_seconds)
        rule["labels"] = alert_labels(slo, window.severity.value, window.name, author.labels)
        rule["annotations"] = {**burn_annotations(slo, window), **author.annotations}
        rules.append(rule)
    rules.append({
        "alert": NO_DATA_ALERT,
        "expr": no_data_promql(slo, target_label),
        "labels": alert_labels(slo, Severity.TICKET.value,
                               format_duration(slo.alerting.no_data_after_seconds),
                               no_data_labels(slo)),
        "annotations": no_data_annotations(slo),
    })
    return rules


def rule_groups(slo: Slo, *, interval_seconds: float = 60,
                target_label: str = "job") -> list[dict[str, Any]]:
    """The SLO's rule groups: its slices first (when sliced), then windows and alerts."""
    groups = []
    if slo.timeslice_seconds is not None:
        groups.append({
            "name": slice_group_name(slo),
            "interval": format_duration(slo.timeslice_seconds),
            "rules": [_record(slice_record(slo), slice_promql(slo, target_label), slo)],
        })
    groups.append({
        "name": group_name(slo),
        "interval": format_duration(interval_seconds),
        "rules": _records(slo, target_label) + _alerts(slo, target_label),
    })
    return groups


def _comment(slo: Slo) -> list[str]:
    lines = [f"SLO {slo.name} ({slo.service}): {_objective_text(slo)}, {slo.budgeting}."]
    if slo.grouping:
        lines.append(f"Split by {', '.join(slo.grouping)}: each value has its own error ratio, "
                     f"budget and alerts; one pages with at least {slo.alerting.min_events} "
                     "events in the long window (alerting.min_events).")
    if not slo.window.is_rolling:
        lines.append(f"Calendar {slo.window.calendar}: Prometheus cannot align a range to "
                     f"the start of a {slo.window.calendar}, so the period is recorded over "
                     f"the nominal {format_duration(slo.window.nominal_seconds)} "
                     "(the monitor's own evaluator aligns it).")
    return lines


def _header(interval_seconds: float, target_label: str) -> list[str]:
    return [
        f"Generated by `{GENERATED_BY}` from the SLO specs: do not edit, regenerate.",
        f"Rule groups evaluate every {format_duration(interval_seconds)}; selector.target "
        f'matches the "{target_label}" label.',
        "Events over a window are sum(increase(...)) over every selected series; error ratio "
        "= bad / total; burn rate = error ratio / (1 - objective).",
    ]


def dump_yaml(value: Any) -> str:
    """Block-style YAML, keys in the order given, no line folding (PromQL stays on a line)."""
    text: str = yaml.safe_dump(value, sort_keys=False, default_flow_style=False,
                               allow_unicode=True, width=1_000_000)
    return text


def generate_rules(slos: Sequence[Slo], *, interval_seconds: float = 60,
                   target_label: str = "job", target_down: TargetDownRule | None = None) -> str:
    """One Prometheus rule file for ``slos`` (ordered by name), deterministic to the byte;
    the target-down group last (its default rule unless ``target_down`` is given)."""
    from monitor.slo.target_down_rules import TargetDownRule, target_down_lines

    if not interval_seconds > 0 or math.isinf(interval_seconds):
        raise ValueError(f"interval must be a positive duration, got {interval_seconds}")
    slos = prometheus_slos(slos)  # goodput SLIs: from request events, not in Prometheus
    lines = [f"# {line}" for line in _header(interval_seconds, target_label)]
    lines.append("groups:")
    for slo in sorted(slos, key=lambda s: s.name):
        lines += [f"# {line}" for line in _comment(slo)]
        groups = rule_groups(slo, interval_seconds=interval_seconds, target_label=target_label)
        lines.append(dump_yaml(groups).rstrip("\n"))
    lines += target_down_lines(target_down or TargetDownRule(), target_label)
    if lines[-1] == "groups:":
        lines[-1] = "groups: []"
    return "\n".join(lines) + "\n"

