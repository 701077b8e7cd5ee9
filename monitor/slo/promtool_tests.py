"""promtool unit tests for the generated SLO rules, with their expectations computed here.

``promtool test rules`` compares every firing alert of a name, labels and rendered annotations,
exactly. So the expectations are not written by hand: each scenario (synthetic counters as
promtool input series) is replayed in Python with the rules' own arithmetic, as Prometheus
2.x evaluates it (ranges closed at both ends, ``increase`` extrapolation, every rule group
evaluated at each ``evaluation_interval`` as promtool does, slice groups first). promtool
passing then proves the PromQL computes what ``monitor.slo.rules`` says it computes, and the
scenarios' eval times, chosen from the SRE-workbook detection times
(``BurnWindow.detection_seconds``) one interval or more away from each edge, prove the alerts
fire and resolve when designed.

Scenarios: ``clean`` (steady good traffic: nothing fires), one ``fault`` per SLO with a
detectable page (good traffic, then every event bad, then good again), and ``no-data`` (all
series stop).

An SLO split by labels (``grouping``) gets three groups in every scenario, each grouping label
set to the group's name: ``busy`` (steady traffic; the one a fault makes bad), ``steady``
(steady good traffic throughout) and ``quiet`` (a request every 20 minutes, every third one
bad: a burn far above any factor, on too few events to pass the min_events gate). The fault's
edges then say that ``busy`` pages with its label while ``steady`` and ``quiet`` do not.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final


from prometheus_client.utils import floatToGoString

from exporters import schema
from monitor.slo import rules
from monitor.slo.durations import format_duration
from monitor.slo.spec import (
    PRE_ENGINE_ERRORS,
    AvailabilitySli,
    Budgeting,
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

SeriesKey = tuple[str, tuple[tuple[str, str], ...]]
Group = tuple[tuple[str, str], ...]  # a split SLO's grouping labels and their values

_STEADY: Final = 100.0          # events per sample interval
_THROUGHPUT_MARGIN: Final = 10  # tokens at 10x min_per_second: even a 1-sample slice passes
_LONGEST_HISTORY: Final = 6 * 3600.0  # good traffic before a fault: the longest page window
_NO_DATA_AFTER_START: Final = 30 * 60.0
_LONGEST_RESOLVE: Final = 3600.0  # resolving is shown for short windows up to an hour
# A split SLO's groups (the value of each of its grouping labels) in every scenario.
BUSY: Final = "busy"        # steady traffic; a fault makes all of it bad
STEADY: Final = "steady"    # steady good traffic, never faulted
QUIET: Final = "quiet"      # one request every _QUIET_EVERY seconds, every _QUIET_BAD-th bad
_QUIET_EVERY: Final = 20 * 60.0
_QUIET_BAD: Final = 3


@dataclass(frozen=True, slots=True)
class ExpectedAlert:
    """A firing alert as promtool lists it; ``annotations`` None for an alert without any."""

    labels: Mapping[str, str]
    annotations: Mapping[str, str] | None = None


# (eval time in seconds, alertname, every alert of that name firing then)
AlertRuleTest = tuple[float, str, Sequence[ExpectedAlert]]


@dataclass(frozen=True, slots=True)
class PromtoolTest:
    """One promtool test group: input series sampled every ``interval`` seconds."""

    interval: float
    input_series: Sequence[tuple[str, str]]  # (series selector, expanding notation)
    alert_rule_tests: Sequence[AlertRuleTest]
    name: str = ""


@dataclass(frozen=True, slots=True)
class Edge:
    """A workbook prediction a scenario is built around: at ``seconds`` the alert of ``slo``
    and ``window`` (its label) is firing or not."""

    seconds: float
    slo: str
    alertname: str
    window: str
    firing: bool
    labels: Group = ()  # a split SLO's group: the alert's labels include these


@dataclass(frozen=True, slots=True)
class Scenario:
    test: PromtoolTest
    edges: tuple[Edge, ...] = ()


# --- the file ----------------------------------------------------------------------------

def _eval_time(seconds: float) -> str:
    return format_duration(seconds) if seconds > 0 else "0s"


def _number(value: float) -> str:
    return str(int(value)) if value == int(value) else repr(value)


def expand_values(values: Sequence[float]) -> str:
    """promtool's expanding notation, runs of equal steps: [0, 10, 20, 25] -> "0+10x2 25"."""
    parts, i = [], 0
    while i < len(values):
        j = i
        if i + 1 < len(values):
            step = values[i + 1] - values[i]
            j = i + 1
            while j + 1 < len(values) and values[j + 1] - values[j] == step:
                j += 1
            sign = "+" if step >= 0 else "-"
            parts.append(f"{_number(values[i])}{sign}{_number(abs(step))}x{j - i}")
        else:
            parts.append(_number(values[i]))
        i = j + 1
    return " ".join(parts)


def series_text(key: SeriesKey) -> str:
    metric, labels = key
    inner = ",".join(f'{k}="{rules.escape_label_value(v)}"' for k, v in labels)
    return f"{metric}{{{inner}}}" if labels else metric


def _test_dict(test: PromtoolTest) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if test.name:
        out["name"] = test.name
    out["interval"] = format_duration(test.interval)
    out["input_series"] = [{"series": s, "values": v} for s, v in test.input_series]
    out["alert_rule_test"] = [
        {"eval_time": _eval_time(seconds), "alertname": alertname,
         "exp_alerts": [_alert_dict(a) for a in expected]}
        for seconds, alertname, expected in test.alert_rule_tests]
    return out


def _alert_dict(alert: ExpectedAlert) -> dict[str, Any]:
    out: dict[str, Any] = {"exp_labels": dict(alert.labels)}
    if alert.annotations is not None:
        out["exp_annotations"] = dict(alert.annotations)
    return out


def promtool_test_file(rule_files: Sequence[str], tests: Sequence[PromtoolTest], *,
                       evaluation_interval: float = 60.0,
                       group_eval_order: Sequence[str] = (),
                       comments: Sequence[str] = ()) -> str:
    """A promtool unit-test file. ``rule_files`` are relative to the test file's directory
    (promtool resolves them so). ``group_eval_order``: promtool evaluates every group at every
    ``evaluation_interval`` in this order (in an arbitrary one otherwise)."""
    document: dict[str, Any] = {"rule_files": list(rule_files),
                                "evaluation_interval": format_duration(evaluation_interval)}
    if group_eval_order:
        document["group_eval_order"] = list(group_eval_order)
    document["tests"] = [_test_dict(t) for t in tests]
    header = "".join(f"# {line}\n" for line in comments)
    return header + rules.dump_yaml(document)


# --- synthetic traffic -------------------------------------------------------------------

def _key(metric: str, labels: Mapping[str, str]) -> SeriesKey:
    return metric, tuple(sorted(labels.items()))


@dataclass
class _Plan:
    """Counter increments per sample of one SLO's series: ``rates`` in the given state; in a
    fault, series matching ``zero`` stop first."""

    rates: dict[SeriesKey, float] = field(default_factory=dict)
    zero: tuple[rules.SeriesSelector, ...] = ()


def _base(slo: Slo, target_label: str, group: str = BUSY) -> dict[str, str]:
    """The labels of the SLO's series: its selector's, and a split SLO's group."""
    return {**dict(rules.base_matchers(slo, target_label)), **dict(group_labels(slo, group))}


def group_labels(slo: Slo, group: str) -> Group:
    """Each grouping label of ``slo`` set to ``group`` (none for an SLO as a whole)."""
    return tuple((label, group) for label in slo.grouping)


def _good(slo: Slo, target_label: str, interval: float, group: str = BUSY) -> _Plan:
    base, sli = _base(slo, target_label, group), slo.sli
    if isinstance(sli, LatencySli):
        plan = {_key(f"{sli.histogram}_count", base): _STEADY}
        plan.update({_key(f"{sli.histogram}_bucket", {**base, "le": le}): _STEADY
                     for le in _bucket_les(sli)})
        return _Plan(plan)
    if isinstance(sli, AvailabilitySli):
        requests, errors = _availability_names()
        plan = {_key(requests, {**base, schema.FINISH_REASON: "stop"}): _STEADY,
                _key(requests, {**base, schema.FINISH_REASON: "error"}): 0.0}
        plan.update({_key(errors, {**base, schema.ERROR_TYPE: e}): 0.0
                     for e in schema.ERROR_TYPES})
        return _Plan(plan)
    if isinstance(sli, ThroughputSli):
        tokens = float(math.ceil(_THROUGHPUT_MARGIN * sli.min_per_second * interval))
        return _Plan({_key(schema.get_spec(c).exposed_name, base): tokens
                      for c in sli.counters})
    if isinstance(sli, GoodputSli):
        raise ValueError(f"SLO {slo.name}: read from request events, no Prometheus test")
    return _ratio_good(slo, sli, target_label, group)


def _bucket_les(sli: LatencySli) -> list[str]:
    """The ``le`` labels a test page has: the engine's edges around the threshold (the one
    the rules count at, its neighbours) and +Inf, as the engine's page has them, so a rule
    reading a bucket the engine lacks would find nothing."""
    where = sli.counted_at
    edges = {e for e in (where.edge, where.lower, where.upper) if e is not None}
    if where.edge is not None:
        below = [e for e in sli.layout_edges if e < where.edge]
        edges.update(below[-1:])
    return [str(floatToGoString(e)) for e in sorted(edges)] + ["+Inf"]  # type: ignore[no-untyped-call]


def _availability_names() -> tuple[str, str]:
    return (schema.get_spec(schema.REQUESTS).exposed_name,
            schema.get_spec(schema.REQUEST_ERRORS).exposed_name)


def _ratio_good(slo: Slo, sli: RatioSli, target_label: str, group: str) -> _Plan:
    """Every counted event good: the good series carry the traffic (inside the total when
    they match it), or the bad series stay at 0."""
    total, part, inside = _ratio_series(slo, sli, target_label, group)
    if sli.good is not None:
        return _Plan({part: _STEADY, total: 0.0 if inside else _STEADY})
    return _Plan({part: 0.0, total: _STEADY})


def _ratio_series(slo: Slo, sli: RatioSli, target_label: str,
                  group: str) -> tuple[SeriesKey, SeriesKey, bool]:
    """The total series, the good (or bad) series, and whether the latter counts in the
    former."""
    base = tuple(_base(slo, target_label, group).items())
    total_sel = rules.counter_selector(sli.total, base)
    counted = sli.good if sli.good is not None else sli.bad
    assert counted is not None
    part_sel = rules.counter_selector(counted, base)
    total = _key(total_sel.metric, dict(total_sel.equal))
    part = _key(part_sel.metric, dict(part_sel.equal))
    return total, part, part != total and total_sel.matches(*_unkey(part))


def _unkey(key: SeriesKey) -> tuple[str, dict[str, str]]:
    return key[0], dict(key[1])


def _rate(good: Mapping[SeriesKey, float], selector: rules.SeriesSelector) -> float:
    return sum(r for key, r in good.items() if selector.matches(*_unkey(key)))


def _fault(slo: Slo, target_label: str, good: Mapping[SeriesKey, float],
           group: str = BUSY) -> _Plan:
    """Every event of ``slo`` bad at the same event rate as before (the workbook's step from
    no errors to all errors): errors, requests over every bucket, no tokens. Series matching
    ``zero`` stop; ``rates`` are then set."""
    base, sli = _base(slo, target_label, group), slo.sli
    matched = tuple(base.items())
    if isinstance(sli, LatencySli):
        return _Plan({}, (rules.SeriesSelector(f"{sli.histogram}_bucket", matched),))
    if isinstance(sli, AvailabilitySli):
        requests_name, errors = _availability_names()
        requests = rules.SeriesSelector(requests_name, matched)
        rate = _rate(good, requests)
        in_engine = [e for e in sli.errors if e not in PRE_ENGINE_ERRORS]
        plan = {_key(errors, {**base, schema.ERROR_TYPE: (in_engine or list(sli.errors))[0]}):
                rate}
        if in_engine:  # failed inside the engine: still a finished request
            plan[_key(requests_name, {**base, schema.FINISH_REASON: "error"})] = rate
        return _Plan(plan, (requests,))
    if isinstance(sli, ThroughputSli):
        return _Plan({}, tuple(rules.SeriesSelector(schema.get_spec(c).exposed_name, matched)
                               for c in sli.counters))
    if isinstance(sli, GoodputSli):
        raise ValueError(f"SLO {slo.name}: read from request events, no Prometheus test")
    return _ratio_fault(slo, sli, target_label, good, group)


def _ratio_fault(slo: Slo, sli: RatioSli, target_label: str,
                 good: Mapping[SeriesKey, float], group: str) -> _Plan:
    base = tuple(_base(slo, target_label, group).items())
    total_sel = rules.counter_selector(sli.total, base)
    total, part, inside = _ratio_series(slo, sli, target_label, group)
    if sli.good is not None:  # no event good: the good ones' traffic moves to the others
        good_sel = rules.counter_selector(sli.good, base)
        moved = sum(r for key, r in good.items()
                    if good_sel.matches(*_unkey(key)) and total_sel.matches(*_unkey(key)))
        return _Plan({total: good.get(total, 0.0) + moved}, (good_sel,))
    rate = _rate(good, total_sel)
    return _Plan({part: rate}, (total_sel,) if inside else ())


@dataclass(frozen=True, slots=True)
class _Fault:
    """Every event of ``slo`` bad for the increments in steps (start, stop]."""

    slo: Slo
    start: int
    stop: int


def _good_world(slos: Sequence[Slo], target_label: str,
                interval: float) -> dict[SeriesKey, float]:
    """Increments per sample with every SLO met (a split SLO's busy and steady groups); a
    series shared by SLOs gets the most."""
    good: dict[SeriesKey, float] = {}
    for slo in slos:
        for group in (BUSY, STEADY) if slo.grouping else (BUSY,):
            for key, rate in _good(slo, target_label, interval, group).rates.items():
                good[key] = max(good.get(key, 0.0), rate)
    return good


def _changes(slo: Slo, good: Mapping[SeriesKey, float], target_label: str,
             group: str = BUSY) -> dict[SeriesKey, float]:
    """The increments a fault of ``slo`` (of its ``group``, when split) changes, by series."""
    plan = _fault(slo, target_label, good, group)
    changed = {key: 0.0 for key in good if any(s.matches(*_unkey(key)) for s in plan.zero)}
    changed.update(plan.rates)
    return {key: rate for key, rate in changed.items() if good.get(key) != rate}


def _world(good: Mapping[SeriesKey, float], samples: int, faults: Sequence[_Fault],
           target_label: str) -> dict[SeriesKey, list[float]]:
    """Counter values at samples 0..samples-1, from 0, with the faults' increments."""
    changes = [(f, _changes(f.slo, good, target_label)) for f in faults]
    world = {}
    for key in sorted(good.keys() | {k for _, c in changes for k in c}):
        values, total = [0.0], 0.0
        for step in range(1, samples):
            rate = good.get(key, 0.0)
            for fault, changed in changes:
                if fault.start < step <= fault.stop and key in changed:
                    rate = changed[key]
            total += rate
            values.append(total)
        world[key] = values
    return world


def _quiet_world(slos: Sequence[Slo], target_label: str, interval: float,
                 samples: int) -> dict[SeriesKey, list[float]]:
    """Each split SLO's quiet group: one request every ``_QUIET_EVERY`` seconds, every
    ``_QUIET_BAD``-th of them bad (one event of the fault's kind), from time 0."""
    every = max(1, round(_QUIET_EVERY / interval))
    world: dict[SeriesKey, list[float]] = {}
    for slo in slos:
        if not slo.grouping:
            continue
        good = _good(slo, target_label, interval, QUIET).rates
        bad = {**good, **_changes(slo, good, target_label, QUIET)}
        for key in sorted(good.keys() | bad.keys()):
            values, total = [0.0], 0.0
            for step in range(1, samples):
                request, offset = divmod(step, every)
                if offset == 0:  # one event: the plans' rates are _STEADY events
                    plan = bad if request % _QUIET_BAD == 0 else good
                    total += plan.get(key, 0.0) / _STEADY
                values.append(total)
            world.setdefault(key, values)
    return world


def _traffic(slos: Sequence[Slo], target_label: str, interval: float, samples: int,
             faults: Sequence[_Fault] = ()) -> dict[SeriesKey, list[float]]:
    """Every series of a scenario: steady traffic with the faults, and the quiet groups."""
    world = _world(_good_world(slos, target_label, interval), samples, faults, target_label)
    for key, values in _quiet_world(slos, target_label, interval, samples).items():
        world.setdefault(key, values)
    return world


# --- the rules, replayed -----------------------------------------------------------------

def _go_div(a: float, b: float) -> float:
    if b == 0:
        return math.nan if a == 0 or math.isnan(a) else math.copysign(math.inf, a) * (
            math.copysign(1.0, b))
    return a / b


def _go_float(value: float, precision: int, verb: str = "f") -> str:
    """Go's fmt for %.<p>f / %.<p>g: as Python's, but Inf and NaN spelled as Go does."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return f"{value:.{precision}{verb}}"


class _Replay:
    """The rules' values at a sample time, computed as Prometheus 2.x computes them."""

    def __init__(self, slos: Sequence[Slo], world: Mapping[SeriesKey, list[float]],
                 interval: float, target_label: str) -> None:
        self.slos = list(slos)
        self.world = world
        self.iv = round(interval * 1000)
        self.queries = {s.name: rules.sli_queries(s, target_label) for s in slos}
        self.slices: dict[str, list[float | None]] = {s.name: [] for s in slos}

    # raw series
    def _matching(self, selector: rules.SeriesSelector) -> list[list[float]]:
        return [values for (metric, labels), values in sorted(self.world.items())
                if selector.matches(metric, dict(labels))]

    def _indices(self, values: list[float], t: int, window: int) -> tuple[int, int]:
        first = max(0, -(-(t - window) // self.iv))
        return first, min(len(values) - 1, t // self.iv)

    def _increase(self, values: list[float], t: int, window: int, rate: bool) -> float | None:
        lo, hi = self._indices(values, t, window)
        if hi - lo < 1:
            return None
        first, result = values[lo], values[hi] - values[lo]  # monotonic: no resets
        to_start = (lo * self.iv - (t - window)) / 1000
        to_end = (t - hi * self.iv) / 1000
        sampled = (hi - lo) * self.iv / 1000
        average = sampled / (hi - lo)
        if result > 0 and first >= 0:
            to_start = min(to_start, sampled * (first / result))
        extrapolated = sampled
        extrapolated += to_start if to_start < average * 1.1 else average / 2
        extrapolated += to_end if to_end < average * 1.1 else average / 2
        result = result * (extrapolated / sampled)
        return result / (window / 1000) if rate else result

    def _term(self, selector: rules.SeriesSelector, t: int, window: int, rate: bool,
              by: Sequence[str]) -> dict[Group, float]:
        """``sum by (by) (fn(selector[w]))``: by group, only groups with a value."""
        sums: dict[Group, float] = {}
        for (metric, labels), values in sorted(self.world.items()):
            if not selector.matches(metric, dict(labels)):
                continue
            value = self._increase(values, t, window, rate)
            if value is not None:
                found = dict(labels)
                group = tuple((label, found.get(label, "")) for label in by)
                sums[group] = sums.get(group, 0.0) + value
        return sums

    def _sum(self, terms: Sequence[rules.Term], t: int, window: int, rate: bool = False,
             by: Sequence[str] = (), fill: rules.SeriesSelector | None = None
             ) -> dict[Group, float]:
        """The terms added up group by group (PromQL's one-to-one matching: a group missing
        from one term is missing); an optional term is 0 where absent: for the one group of
        an SLO as a whole (``vector(0)``), or for each group of ``fill`` (the total)."""
        total: dict[Group, float] | None = None
        for term in terms:
            value = self._term(term.selector, t, window, rate, by)
            if term.optional and (not by or fill is None):
                value = value or {(): 0.0}
            elif term.optional and fill is not None:
                for group in self._term(fill, t, window, rate, by):
                    value.setdefault(group, 0.0)
            total = value if total is None else {
                g: v + term.sign * value[g] for g, v in total.items() if g in value}
        return total or {}

    def _events_sum(self, slo: Slo, terms: Sequence[rules.Term], t: int,
                    window: int) -> dict[Group, float]:
        queries = self.queries[slo.name]
        fill = queries.total[0].selector if queries.total else None
        return self._sum(terms, t, window, by=slo.grouping, fill=fill)

    def absent(self, selector: rules.SeriesSelector, t: int, window: int) -> bool:
        for values in self._matching(selector):
            lo, hi = self._indices(values, t, window)
            if hi >= lo:
                return False
        return True

    # recorded series
    def _slice(self, slo: Slo, step: int) -> float | None:
        assert slo.timeslice_seconds is not None
        t, window = step * self.iv, round(slo.timeslice_seconds * 1000)
        queries = self.queries[slo.name]
        if isinstance(slo.sli, ThroughputSli):
            rate = self._sum(queries.rate, t, window, rate=True).get(())
            return None if rate is None else float(
                rate >= rules.as_written(slo.sli.min_per_second))
        # a sliced SLO is never split (spec.check_grouping): one group, ()
        bad, total = (self._sum(queries.bad, t, window).get(()),
                      self._sum(queries.total, t, window).get(()))
        if bad is None or total is None or not total > 0:
            return None
        ratio = 1 - bad / total
        if slo.budgeting is Budgeting.RATIO_TIMESLICES:
            return ratio
        assert slo.timeslice_target is not None
        return float(ratio >= rules.as_written(slo.timeslice_target))

    def _slices_in(self, slo: Slo, step: int, seconds: float) -> list[float]:
        assert slo.timeslice_seconds is not None
        span = round(max(seconds, slo.timeslice_seconds) * 1000)
        first = max(0, -(-(step * self.iv - span) // self.iv))
        recorded = self.slices[slo.name]
        while len(recorded) <= step:  # every evaluation records a slice, from time 0
            recorded.append(self._slice(slo, len(recorded)))
        return [v for v in recorded[first:step + 1] if v is not None]

    def events(self, slo: Slo, step: int, seconds: float) -> dict[Group, float]:
        """Events in the window by group (one group, (), for an SLO as a whole)."""
        if slo.budgeting is not Budgeting.OCCURRENCES:
            count = float(len(self._slices_in(slo, step, seconds)))
            return {(): count} if count else {}
        return self._events_sum(slo, self.queries[slo.name].total, step * self.iv,
                                round(seconds * 1000))

    def error_ratio(self, slo: Slo, step: int, seconds: float) -> dict[Group, float]:
        if slo.budgeting is not Budgeting.OCCURRENCES:
            values = self._slices_in(slo, step, seconds)
            total = 0.0
            for v in values:
                total += v
            return {(): 1 - total / len(values)} if values else {}
        queries, t, window = self.queries[slo.name], step * self.iv, round(seconds * 1000)
        bad = self._events_sum(slo, queries.bad, t, window)
        events = self._events_sum(slo, queries.total, t, window)
        return {g: b / events[g] for g, b in bad.items() if g in events and events[g] > 0}

    def budget_remaining(self, slo: Slo, step: int) -> dict[Group, float]:
        ratios = self.error_ratio(slo, step, slo.window.nominal_seconds)
        budget = rules.as_written(slo.error_budget)
        return {g: 1 - ratio / budget for g, ratio in ratios.items()}

    # alerts
    def _burn(self, slo: Slo, step: int, seconds: float) -> dict[Group, float]:
        budget = rules.as_written(slo.error_budget)
        return {g: r / budget for g, r in self.error_ratio(slo, step, seconds).items()}

    def _holds(self, slo: Slo, window: BurnWindow, step: int) -> dict[Group, float]:
        """The groups where the alert expression holds, with its value (the long burn)."""
        factor = rules.as_written(window.factor)
        long = self._burn(slo, step, window.long_seconds)
        short = self._burn(slo, step, window.short_seconds)
        held = {g: v for g, v in long.items() if v > factor and short.get(g, -1.0) > factor}
        if slo.alerting.min_events > 0 and held:
            events = self.events(slo, step, window.long_seconds)
            held = {g: v for g, v in held.items()
                    if events.get(g, -1.0) >= slo.alerting.min_events}
        return held

    def burn_alert_names(self) -> list[str]:
        return sorted({burn_alert(slo, w).name for slo in self.slos
                       for w in burn_windows(slo)})

    def burn_alerts(self, step: int, name: str) -> list[ExpectedAlert]:
        alerts = []
        for slo in self.slos:
            for window in burn_windows(slo):
                author = burn_alert(slo, window)
                if author.name != name:
                    continue
                for group, value in sorted(self._holds(slo, window, step).items()):
                    if not self._held_for(slo, window, step, group):
                        continue
                    labels = {**alert_labels(slo, window.severity.value, window.name,
                                             author.labels),
                              **{k: v for k, v in group if v}}  # the series' own labels
                    alerts.append(ExpectedAlert(
                        dict(sorted(labels.items())),
                        {**self._annotations(slo, window, step, value, group),
                         **author.annotations}))
        return alerts

    def _held_for(self, slo: Slo, window: BurnWindow, step: int, group: Group) -> bool:
        """Pending long enough: the condition held at every evaluation since ``for`` ago."""
        if window.for_seconds <= 0:
            return True
        since = (step * self.iv - round(window.for_seconds * 1000)) // self.iv
        return since >= 0 and all(group in self._holds(slo, window, s)
                                  for s in range(since, step))

    def _annotations(self, slo: Slo, window: BurnWindow, step: int, value: float,
                     group: Group) -> dict[str, str]:
        rendered = dict(rules.burn_annotations(slo, window))
        summary = rendered["summary"].replace('{{ printf "%.1f" $value }}', _go_float(value, 1))
        for label, label_value in group:
            summary = summary.replace(f"{{{{ $labels.{label} }}}}", label_value)
        rendered["summary"] = summary
        rendered["burn_rate"] = _go_float(value, 2)
        remaining = self.budget_remaining(slo, step).get(group)
        rendered["budget_remaining"] = ("unknown" if remaining is None
                                        else _go_float(remaining * 100, 4, "g") + "%")
        rendered["time_to_exhaustion"] = self._exhaustion(slo, step, remaining, group)
        return rendered

    def _exhaustion(self, slo: Slo, step: int, remaining: float | None, group: Group) -> str:
        seconds = rules.exhaustion_window(slo)
        ratio = None if seconds is None else self.error_ratio(slo, step, seconds).get(group)
        if remaining is None or ratio is None:
            return "unknown"
        hours = _go_div(remaining * rules.as_written(slo.window.nominal_seconds / 3600),
                        _go_div(ratio, rules.as_written(slo.error_budget)))
        return _go_float(hours, 1) + "h" if hours > 0 else "exhausted"

    def no_data_alerts(self, step: int) -> list[ExpectedAlert]:
        alerts = []
        for slo in self.slos:
            window = round(slo.alerting.no_data_after_seconds * 1000)
            if any(self.absent(s, step * self.iv, window)
                   for s in self.queries[slo.name].no_data):
                alerts.append(ExpectedAlert(
                    alert_labels(slo, Severity.TICKET.value,
                                 format_duration(slo.alerting.no_data_after_seconds),
                                 no_data_labels(slo)),
                    rules.no_data_annotations(slo)))
        return alerts


# --- scenarios -----------------------------------------------------------------------------

def _steps(seconds: float, interval: float) -> int:
    return math.ceil(seconds / interval - 1e-9)


def _test(name: str, replay: _Replay, world: Mapping[SeriesKey, list[float]],
          interval: float, eval_steps: Iterable[int]) -> PromtoolTest:
    tests: list[AlertRuleTest] = []
    for step in sorted(set(eval_steps)):
        for alertname in replay.burn_alert_names():
            tests.append((step * interval, alertname, replay.burn_alerts(step, alertname)))
        tests.append((step * interval, NO_DATA_ALERT, replay.no_data_alerts(step)))
    series = [(series_text(key), expand_values(values)) for key, values in world.items()]
    return PromtoolTest(interval, series, tests, name)


def clean_scenario(slos: Sequence[Slo], interval: float, target_label: str) -> Scenario:
    """Steady good traffic for 3 hours: no alert at any time."""
    end = _steps(3 * 3600, interval)
    world = _traffic(slos, target_label, interval, end + 1)
    replay = _Replay(slos, world, interval, target_label)
    steps = [_steps(s, interval) for s in (1800, 3600, 7200, 3 * 3600)]
    steps += _quiet_bad_steps(slos, interval, 0, end)
    name = "clean: steady good traffic"
    if any(slo.grouping for slo in slos):
        name += f" (and each split SLO's {QUIET} group: every {_QUIET_BAD}rd request bad)"
    return Scenario(_test(name, replay, world, interval, steps))


def no_data_scenario(slos: Sequence[Slo], interval: float, target_label: str) -> Scenario:
    """Good traffic, then every series stops: each SLO's no-data alert fires once its
    no_data_after has passed without a sample, not before."""
    last = _steps(_NO_DATA_AFTER_START, interval)
    world = _traffic(slos, target_label, interval, last + 1)
    replay = _Replay(slos, world, interval, target_label)
    edges = []
    for slo in slos:
        after = slo.alerting.no_data_after_seconds
        label = format_duration(after)
        before_step = last + math.floor(after / interval + 1e-9) - 1
        after_step = last + _steps(after, interval) + 2
        edges += [Edge(before_step * interval, slo.name, NO_DATA_ALERT, label, False),
                  Edge(after_step * interval, slo.name, NO_DATA_ALERT, label, True)]
    steps = [round(e.seconds / interval) for e in edges]
    test = _test("no-data: every series stops", replay, world, interval, steps)
    return Scenario(test, tuple(edges))


def _asserted_windows(slo: Slo) -> list[BurnWindow]:
    """The windows a fault scenario times: the pages (tickets when there are none) that a
    100% error ratio can trigger."""
    windows = burn_windows(slo)
    pages = [w for w in windows if w.severity is Severity.PAGE] or list(windows)
    return [w for w in pages if math.isfinite(w.detection_seconds(1.0, slo.error_budget))]


@dataclass(frozen=True, slots=True)
class _Timing:
    """When one SLO's fault starts and stops, and what the workbook predicts around it."""

    fault: _Fault
    edges: tuple[Edge, ...]
    end: int


def _timing(slo: Slo, start: int, interval: float) -> _Timing:
    """From ``start``: every event bad until all asserted windows fire (detection time plus a
    slice, plus an interval), then good until their short windows (and a slice) are clean.
    Edges sit one interval or more away from the predicted firing and resolving times."""
    windows = _asserted_windows(slo)
    lag = slo.timeslice_seconds or 0.0  # a slice is judged once it is over
    detection = {w: w.detection_seconds(1.0, slo.error_budget) for w in windows}
    quiet = {w: max(0, math.floor(d / interval - 1)) for w, d in detection.items()}
    fires = {w: math.ceil((d + lag) / interval + 1) for w, d in detection.items()}
    stop = start + max(fires.values()) + 1
    resolves = {w: _steps(max(w.short_seconds, lag) + lag, interval) + 1 for w in windows
                if w.short_seconds <= _LONGEST_RESOLVE}
    edges = []
    busy = group_labels(slo, BUSY)
    for w in windows:
        name = burn_alert(slo, w).name
        edges += [Edge((start + quiet[w]) * interval, slo.name, name, w.name, False, busy),
                  Edge((start + fires[w]) * interval, slo.name, name, w.name, True, busy)]
        if slo.grouping:  # the steady group, healthy while the busy one pages, does not
            edges.append(Edge((start + fires[w]) * interval, slo.name, name, w.name, False,
                              group_labels(slo, STEADY)))
        if w in resolves:
            edges.append(Edge((stop + resolves[w]) * interval, slo.name, name, w.name,
                              False, busy))
    end = stop + max(resolves.values(), default=1)
    return _Timing(_Fault(slo, start, stop), tuple(edges + _quiet_edges(slo, interval, end)),
                   end)


def _quiet_bad_steps(slos: Sequence[Slo], interval: float, first: int, last: int) -> list[int]:
    """The evaluations just after a quiet group's bad request, in [first, last]: its short
    windows hold it, its long ones a third of bad events."""
    if not any(slo.grouping for slo in slos):
        return []
    every = max(1, round(_QUIET_EVERY / interval))
    return [step for step in range(every * _QUIET_BAD + 1, last + 1, every * _QUIET_BAD)
            if step >= first]


def _quiet_edges(slo: Slo, interval: float, end: int) -> list[Edge]:
    """The quiet group stays quiet after each bad request, on every window whose long window
    holds fewer of its events than the min_events gate (the rest are not predicted here)."""
    if not slo.grouping:
        return []
    per_second = 1 / _QUIET_EVERY
    gated = [w for w in _asserted_windows(slo)
             if math.ceil(w.long_seconds * per_second) + 1 < slo.alerting.min_events]
    return [Edge(step * interval, slo.name, burn_alert(slo, w).name, w.name, False,
                 group_labels(slo, QUIET))
            for step in _quiet_bad_steps([slo], interval, 0, end) for w in gated]


def _history(slos: Sequence[Slo], interval: float) -> int:
    """Good traffic before a fault: the longest asserted window (6h at most), so the long
    windows hold steady traffic only, as the workbook's detection times assume."""
    longest = max(w.long_seconds for slo in slos for w in _asserted_windows(slo))
    return _steps(min(longest, _LONGEST_HISTORY), interval)


def fault_scenario(slos: Sequence[Slo], faulted: Sequence[Slo], interval: float,
                   target_label: str) -> Scenario:
    """Good traffic, then every event of each of ``faulted`` (SLOs that read none of each
    other's series) bad until their alerts fire, then good again until they resolve."""
    start = _history(faulted, interval)
    timings = [_timing(slo, start, interval) for slo in faulted]
    world = _traffic(slos, target_label, interval, max(t.end for t in timings) + 1,
                     [t.fault for t in timings])
    replay = _Replay(slos, world, interval, target_label)
    edges = tuple(e for t in timings for e in t.edges)
    steps = [start // 2, start] + [round(e.seconds / interval) for e in edges]
    name = (f"fault: every event bad from {_eval_time(start * interval)} for "
            f"{', '.join(s.name for s in faulted)}")
    return Scenario(_test(name, replay, world, interval, steps), edges)


def _reads(slo: Slo, key: SeriesKey, target_label: str) -> bool:
    queries = rules.sli_queries(slo, target_label)
    selectors = [t.selector for t in (*queries.bad, *queries.total, *queries.rate)]
    return any(s.matches(*_unkey(key)) for s in (*selectors, *queries.no_data))


def _fault_groups(slos: Sequence[Slo], target_label: str,
                  interval: float) -> list[list[Slo]]:
    """SLOs whose faults can run at once: none reads a series another's fault changes.
    (Each fault scenario replays every rule at every step: fewer scenarios, faster tests.)"""
    good = _good_world(slos, target_label, interval)
    changes = {s.name: _changes(s, good, target_label) for s in slos}

    def apart(a: Slo, b: Slo) -> bool:
        return not any(_reads(b, k, target_label) for k in changes[a.name]) and not any(
            _reads(a, k, target_label) for k in changes[b.name])

    groups: list[list[Slo]] = []
    for slo in slos:
        if not _asserted_windows(slo):
            continue
        group = next((g for g in groups if all(apart(slo, other) for other in g)), None)
        if group is None:
            groups.append([slo])
        else:
            group.append(slo)
    return groups


def alert_scenarios(slos: Sequence[Slo], *, interval_seconds: float = 60.0,
                    target_label: str = "job") -> list[Scenario]:
    """Clean traffic, the faults (grouped), and no data, for ``slos`` together."""
    ordered = sorted(slos, key=lambda s: s.name)
    scenarios = [clean_scenario(ordered, interval_seconds, target_label)]
    scenarios += [fault_scenario(ordered, group, interval_seconds, target_label)
                  for group in _fault_groups(ordered, target_label, interval_seconds)]
    scenarios.append(no_data_scenario(ordered, interval_seconds, target_label))
    return scenarios


def group_eval_order(slos: Sequence[Slo]) -> list[str]:
    """Slice groups before the groups that average their slices, as in steady state."""
    ordered = sorted(slos, key=lambda s: s.name)
    return ([rules.slice_group_name(s) for s in ordered if s.timeslice_seconds is not None]
            + [rules.group_name(s) for s in ordered])


def generate_alert_tests(slos: Sequence[Slo], *,
                         rule_file: str = "../inferwatch-slo.rules.yml",
                         interval_seconds: float = 60.0, target_label: str = "job") -> str:
    """The promtool test file for ``generate_rules(slos)`` with the same options."""
    slos = prometheus_slos(slos)  # as generate_rules: none for SLIs read from events
    scenarios = alert_scenarios(slos, interval_seconds=interval_seconds,
                                target_label=target_label)
    comments = [f"Generated by `{rules.GENERATED_BY}`: do not edit, regenerate.",
                "Expectations are the rules replayed by monitor/slo/promtool_tests.py with "
                "Prometheus 2.x semantics; run: promtool test rules <this file>.",
                "promtool evaluates every group, slice groups too, at each evaluation_interval "
                "(it ignores a group's interval), in group_eval_order."]
    return promtool_test_file([rule_file], [s.test for s in scenarios],
                              evaluation_interval=interval_seconds,
                              group_eval_order=group_eval_order(slos), comments=comments)
