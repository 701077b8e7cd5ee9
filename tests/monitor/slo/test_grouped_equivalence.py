"""Two paths, one truth for a split SLO: the embedded evaluator and Prometheus running the
generated rules (through promtool) fire the same per-tenant alerts on the same series.

The checked-in per-tenant SLO (``alerts/slos/gateway-tenants.yaml``: the gateway's goodput
counters, ``grouping: [tenant]``, the gate of 100 events) over three tenants for 8 hours:
``busy`` (20 requests a minute, every one bad for 25 minutes), ``steady`` (20 a minute, a
bad one now and then) and ``quiet`` (a request every 20 minutes, every third one bad: 33x
its budget, under the gate). At every minute one evaluation interval or more from any
transition of the evaluator's, promtool must find exactly the alerts (labels, ``tenant``
included) the evaluator found, as ``test_equivalence`` checks for SLOs as a whole.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import numpy.typing as npt

from monitor.slo.evaluator import SloEvaluator
from monitor.slo.groups import group_name
from monitor.slo.loaders import load_slos
from monitor.slo.promtool_tests import ExpectedAlert, PromtoolTest, promtool_test_file
from monitor.slo.source import MinuteArraySource
from monitor.slo.spec import Slo
from monitor.slo.windows import BURN_ALERT, NO_DATA_ALERT
from tests.monitor.slo.test_equivalence import rules_without_annotations
from tests.monitor.slo.test_rules import ROOT, run_promtool

MINUTES = 8 * 60
Alert = tuple[str, str, str, str]  # alertname, tenant, window, severity


def tenants() -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per tenant, per-minute (requests, good requests)."""
    busy = np.full(MINUTES, 20.0)
    busy_good = busy.copy()
    busy_good[5 * 60:5 * 60 + 25] = 0.0  # an outage of this tenant alone
    steady = np.full(MINUTES, 20.0)
    steady_good = steady.copy()
    steady_good[np.random.default_rng(5).integers(0, MINUTES, 10)] -= 1.0  # far below 14.4x
    quiet = np.zeros(MINUTES)
    quiet[19::20] = 1.0
    quiet_good = quiet.copy()
    quiet_good[59::60] = 0.0  # every third request bad
    return {"busy": (busy, busy_good), "steady": (steady, steady_good),
            "quiet": (quiet, quiet_good)}


def evaluator_alerts(slo: Slo, traffic: dict[str, tuple[np.ndarray, np.ndarray]]
                     ) -> list[set[Alert]]:
    """The evaluator's active alerts after each minute (the SLO and each tenant's copy read
    from their own series, as a store gives them)."""
    has = np.ones(MINUTES, dtype=bool)
    series: dict[str, tuple[npt.ArrayLike, npt.ArrayLike, npt.ArrayLike]] = {
        group_name(slo.name, (("tenant", t),)): (good, total, has)
        for t, (total, good) in traffic.items()}
    series[slo.name] = (np.sum([g for _, g in traffic.values()], axis=0),
                        np.sum([n for n, _ in traffic.values()], axis=0), has)
    evaluator = SloEvaluator([slo], MinuteArraySource(0, series), settle_seconds=0)
    out = []
    for minute in range(1, MINUTES + 1):
        (status,) = evaluator.tick(minute * 60.0)
        assert len(status.groups) == 3 and all(c.labels["slo"] == slo.name
                                               for c in status.conditions)
        out.append({(c.labels["alertname"], c.labels.get("tenant", ""), c.labels["window"],
                     c.labels["severity"]) for c in status.conditions if c.active})
    return out


def input_series(traffic: dict[str, tuple[np.ndarray, np.ndarray]]) -> list[tuple[str, str]]:
    """The gateway's counters sampled every minute from 0 (the value at k minutes counts
    minutes 1..k)."""
    def cumulative(values: np.ndarray) -> str:
        return " ".join(f"{v:g}" for v in [0.0, *np.cumsum(values).tolist()])

    out = []
    for tenant, (total, good) in traffic.items():
        labels = f'job="gateway",model="tiny",slo_class="interactive",tenant="{tenant}"'
        out += [(f"inferwatch_gateway_requests_total{{{labels},outcome=\"ok\"}}",
                 cumulative(total)),
                (f"inferwatch_gateway_good_requests_total{{{labels}}}", cumulative(good))]
    return out


def expected(slo: Slo, active: set[Alert], alertname: str) -> list[ExpectedAlert]:
    return [ExpectedAlert({"alertname": name, "slo": slo.name, "service": slo.service,
                           "severity": severity, "window": window,
                           **({"tenant": tenant} if tenant else {})})
            for name, tenant, window, severity in sorted(active) if name == alertname]


def test_the_evaluator_and_prometheus_page_the_same_tenants(tmp_path: Path) -> None:
    (slo,) = load_slos(ROOT / "alerts" / "slos" / "gateway-tenants.yaml")
    traffic = tenants()
    ours = evaluator_alerts(slo, traffic)
    fired = {a for minute in ours for a in minute}
    # busy pages (and opens tickets) with its label; steady and quiet never fire
    assert (BURN_ALERT, "busy", "1h/5m", "page") in fired
    assert {a[1] for a in fired} == {"busy"}

    checks = []
    transitions = 0
    for k in range(2, MINUTES - 1):  # ours[k - 1] is the evaluation at k minutes
        before, now, after = ours[k - 2], ours[k - 1], ours[k]
        transitions += before != now
        if before == now == after:
            for alertname in (BURN_ALERT, NO_DATA_ALERT):
                checks.append((k * 60.0, alertname, expected(slo, now, alertname)))
    assert transitions >= 2 and len(checks) > 800

    (tmp_path / "rules.yml").write_text(rules_without_annotations((slo,)))
    test = PromtoolTest(60.0, input_series(traffic), checks, "grouped-equivalence")
    (tmp_path / "test.yml").write_text(promtool_test_file(
        ["rules.yml"], [test], evaluation_interval=60.0))
    run_promtool("test", "rules", str(tmp_path / "test.yml"))
