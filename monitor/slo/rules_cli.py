"""`inferwatch rules generate`: Prometheus rules and their promtool tests from the SLO specs.

    inferwatch rules generate                  # alerts/slos -> alerts/inferwatch-slo.rules.yml
                                               #   and alerts/tests/inferwatch-slo.test.yml
    inferwatch rules generate --check          # CI: are the checked-in files current?
    inferwatch rules generate --config inferwatch.yaml --target-down-targets vllm,sglang
                                               # the target-down rule as its alerting section
                                               #   says, on the jobs vllm and sglang only
    inferwatch rules generate --engine vllm --out vllm-rules
                                               # latency SLOs counted at vLLM's bucket edges
    inferwatch rules generate --page http://vllm:8000/metrics --out vllm-rules
                                               # ... at the edges the live engine has
    inferwatch rules windows --period 7d       # the burn-rate windows a 7-day SLO gets
    promtool check rules alerts/inferwatch-slo.rules.yml
    promtool test rules alerts/tests/inferwatch-slo.test.yml
    inferwatch rules anomaly                   # deploy/prometheus/inferwatch-anomaly-rules.yml
    inferwatch rules anomaly --check           # (the anomaly detectors PromQL can express)
                                               #   and, opt-in to load, the seasonal variant
                                               #   inferwatch-anomaly-seasonal-rules.yml
    inferwatch rules anomaly --seasonal daily  # its season: weekly (default), daily, none

The files are generated, checked in, and reviewed like code; `--check` exits 1 with a diff
when they differ from what the specs generate. Exit status 2: specs or options unusable.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from monitor.generated import check_generated, write_generated
from typing import Final

from monitor.slo import target_down_rules
from monitor.slo.durations import parse_duration
from monitor.slo.spec import Slo

RULES_FILE: Final = "inferwatch-slo.rules.yml"
ANOMALY_RULES_FILE: Final = "inferwatch-anomaly-rules.yml"
SEASONAL_RULES_FILE: Final = "inferwatch-anomaly-seasonal-rules.yml"
TEST_FILE: Final = "tests/inferwatch-slo.test.yml"
TARGET_DOWN_TEST_FILE: Final = "tests/inferwatch-target-down.test.yml"


def add_arguments(p: argparse.ArgumentParser) -> None:
    actions = p.add_subparsers(dest="rules_action", required=True)
    gen = actions.add_parser("generate", help="write the rule file and its promtool tests")
    gen.add_argument("--slos", default="alerts/slos",
                     help="an SLO spec file or a directory of them (native, OpenSLO, Sloth)")
    gen.add_argument("--out", default="alerts",
                     help=f"directory for {RULES_FILE} and {TEST_FILE}")
    gen.add_argument("--interval", default="1m", help="rule group evaluation interval")
    gen.add_argument("--target-label", default="job",
                     help="the label an SLO's selector.target matches")
    gen.add_argument("--engine", default=None,
                     help="the engine the SLOs read (vllm, sglang, tgi, triton, llamacpp, "
                          "inferwatch): latency SLOs are counted at its bucket edges, and a "
                          "threshold off them is refused (or counted at the edge below with "
                          "off_edge: lower_edge); default: the inferwatch schema's buckets")
    gen.add_argument("--page", default=None,
                     help="a /metrics page of the engine (a file, or an http(s) URL): the "
                          "edges it really has (custom bucket flags included) and, without "
                          "--engine, the engine itself")
    gen.add_argument("--check", action="store_true",
                     help="write nothing; exit 1 with a diff if the files are not current")
    target_down_rules.add_arguments(gen)
    anomaly = actions.add_parser("anomaly", help="recording and alerting rules for the anomaly "
                                                 "detectors PromQL can express (stderr: those "
                                                 "it cannot)")
    anomaly.add_argument("--out", default="deploy/prometheus",
                         help=f"directory for {ANOMALY_RULES_FILE}")
    anomaly.add_argument("--seasonal", choices=["weekly", "daily", "none"], default="weekly",
                         help=f"also write {SEASONAL_RULES_FILE}: each signal against the same "
                              "time 1, 2 and 3 weeks (or days) ago (needs that retention; "
                              "'none': not written)")
    anomaly.add_argument("--page-on", default="", metavar="METRIC,...",
                         help="metrics whose anomalies page (severity critical; tokens/s at "
                              "its critical level); default none: anomalies are tickets")
    anomaly.add_argument("--check", action="store_true",
                         help="write nothing; exit 1 with a diff if the files are not current")
    win = actions.add_parser("windows", help="print the burn-rate windows of a period, with "
                                             "detection and reset times")
    win.add_argument("--period", required=True, help="the SLO period: 1d, 7d, 28d, 30d, 90d")
    win.add_argument("--objective", type=float, default=0.999,
                     help="the objective the detection and reset times assume")
    win.add_argument("--windows-file", default=None,
                     help="a burn-window file instead of the default (monitor/slo/"
                          "burn_windows.yaml)")
    win.add_argument("--slice", default=None,
                     help="a timeslice SLO's slice length (windows are whole slices)")


def generated_files(slos: Sequence[Slo], *, interval_seconds: float = 60.0,
                    target_label: str = "job",
                    target_down: target_down_rules.TargetDownRule | None = None
                    ) -> dict[str, str]:
    """The generated files by their path under the output directory."""
    from monitor.slo.promtool_tests import generate_alert_tests
    from monitor.slo.rules import generate_rules
    from monitor.slo.target_down_promtool import generate_target_down_tests

    target_down = target_down or target_down_rules.TargetDownRule()

    rule_file = Path(RULES_FILE)
    relative = Path(*[".."] * (len(Path(TEST_FILE).parts) - 1)) / rule_file
    return {
        RULES_FILE: generate_rules(slos, interval_seconds=interval_seconds,
                                   target_label=target_label, target_down=target_down),
        TEST_FILE: generate_alert_tests(slos, rule_file=relative.as_posix(),
                                        interval_seconds=interval_seconds,
                                        target_label=target_label),
        TARGET_DOWN_TEST_FILE: generate_target_down_tests(
            target_down, rule_file=relative.as_posix(), target_label=target_label),
    }


def run(args: argparse.Namespace) -> int:
    if args.rules_action == "windows":
        return _print_windows(args)
    if args.rules_action == "anomaly":
        return _anomaly(args)
    return _generate(args)


def _print_windows(args: argparse.Namespace) -> int:
    from monitor.slo.windows_table import format_window_table

    try:
        if not 0 < args.objective < 1:
            raise ValueError(f"--objective {args.objective:g} must be between 0 and 1")
        print(format_window_table(parse_duration(args.period), args.objective,
                                  path=args.windows_file,
                                  slice_seconds=parse_duration(args.slice) if args.slice
                                  else None))
    except (OSError, ValueError) as exc:
        print(f"inferwatch rules windows: {exc}", file=sys.stderr)
        return 2
    return 0


def _generate(args: argparse.Namespace) -> int:
    from monitor.collect.config import ConfigError
    from monitor.slo.bind import bind_for
    from monitor.slo.loaders import SloFileError, load_slos
    from monitor.slo.windows import check_short_windows

    try:
        interval = parse_duration(args.interval)
        slos = bind_for(load_slos(args.slos), args.engine, args.page)
        if args.config is not None:
            slos = _bound_to_config(slos, args.config)
        check_short_windows(slos, interval, "rule evaluation interval (--interval)")
        files = generated_files(slos, interval_seconds=interval, target_label=args.target_label,
                                target_down=target_down_rules.from_arguments(args))
    except (SloFileError, ConfigError, OSError, ValueError, KeyError) as exc:
        print(f"inferwatch rules generate: {exc}", file=sys.stderr)
        return 2
    out = Path(args.out)
    if args.check:
        return check_generated(out, files, "inferwatch rules generate")
    write_generated(out, files)
    print(f"{len(slos)} SLOs from {args.slos}")
    return 0


def _bound_to_config(slos: list[Slo], path: str) -> list[Slo]:
    from monitor.collect.config import ConfigError, load_config
    from monitor.slo.bind import bind_to_targets

    try:
        config = load_config(path)
    except ConfigError as exc:
        raise ValueError(str(exc)) from None
    return bind_to_targets(slos, [(t.name, t.labels, t.engine) for t in config.targets])


def _anomaly(args: argparse.Namespace) -> int:
    from monitor.anomaly.promql_rules import NOT_EXPRESSED, generate_anomaly_rules

    from monitor.anomaly.monitor import PAGEABLE

    page_on = frozenset(m.strip() for m in args.page_on.split(",") if m.strip())
    if unknown := sorted(page_on - PAGEABLE):
        print(f"inferwatch rules anomaly: --page-on: unknown metric(s) {', '.join(unknown)}; "
              f"known: {', '.join(sorted(PAGEABLE))}", file=sys.stderr)
        return 2
    for what, why in NOT_EXPRESSED:
        print(f"inferwatch rules anomaly: not expressed: {what}: {why}", file=sys.stderr)
    files = {ANOMALY_RULES_FILE: generate_anomaly_rules(page_on=page_on)}
    if args.seasonal != "none":
        from monitor.anomaly.promql_seasonal import generate_seasonal_rules

        files[SEASONAL_RULES_FILE] = generate_seasonal_rules(args.seasonal)
    if args.check:
        return check_generated(Path(args.out), files, "inferwatch rules anomaly")
    write_generated(Path(args.out), files)
    return 0
