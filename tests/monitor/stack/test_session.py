"""The demo's own lines: what the receiver got, and the summary at the end."""

import io

from monitor.loadgen.runner import Progress
from monitor.stack.display import AlertChange, Console
from monitor.stack.receiver import Notice
from monitor.stack.session import format_notice, print_summary

LABELS = {"alertname": "InferwatchSLOBurnRate", "slo": "demo-availability", "service": "demo",
          "severity": "page", "window": "1h/2m"}


def test_a_notice_says_who_evaluated_the_alert_and_how_it_came():
    by_am = Notice("firing", {**LABELS, "evaluator": "prometheus"}, {}, "alertmanager", 0.0)
    direct = Notice("resolved", LABELS, {}, "monitor", 0.0)
    assert format_notice(71.0, by_am) == (
        "[01:11] NOTIFIED firing InferwatchSLOBurnRate{severity=page, slo=demo-availability, "
        "window=1h/2m} by Alertmanager (evaluated by Prometheus)")
    assert format_notice(245.0, direct) == (
        "[04:05] RECEIVED resolved InferwatchSLOBurnRate{severity=page, "
        "slo=demo-availability, window=1h/2m} from the monitor (built-in receiver)")


def test_the_summary_counts_requests_and_tells_each_alerts_story():
    out = io.StringIO()
    alert = {"fingerprint": "f1", "alertname": "InferwatchSLOBurnRate", "labels": LABELS}
    alerts = {"f1": [(65.0, AlertChange("firing", alert)),
                     (245.0, AlertChange("resolved", alert))]}
    notice = Notice("firing", LABELS, {}, "alertmanager", 0.0)
    print_summary(Console(out, tty=False), Progress(sent=1068, done=1068, failed=78), alerts,
                  [notice, notice], 300.0)
    assert out.getvalue().splitlines() == [
        "summary after 05:00: 1068 requests sent, 990 answered, 78 failed, "
        "0 in flight at the end",
        "  InferwatchSLOBurnRate{severity=page, slo=demo-availability, window=1h/2m}: "
        "fired at 01:05, resolved at 04:05",
        "  2 notifications received (fired and resolved)"]


def test_a_summary_without_alerts_says_so():
    out = io.StringIO()
    print_summary(Console(out, tty=False), Progress(sent=3, done=2), {}, [], 10.0)
    assert out.getvalue().splitlines()[1:] == ["  no alert fired"]
