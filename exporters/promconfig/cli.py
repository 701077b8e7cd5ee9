"""`inferwatch scrape-config`: Prometheus (or vmagent) configuration that normalizes an engine's
/metrics into the inferwatch schema without a bridge, from the same mapping tables.

    inferwatch scrape-config --engine vllm --targets vllm-0:8000,vllm-1:8000 \\
        --out prometheus.yml --rules-out vllm-rules.yml
    prometheus --config.file=prometheus.yml
    inferwatch scrape-config --all                  # deploy/prometheus/<engine>-{scrape,rules}.yml
    inferwatch scrape-config --all --check          # CI: are the checked-in files current?
    inferwatch scrape-config --engine vllm --targets ... --out vmagent.yml \\
        --rules-out vllm-rules.yml --shards 2 --victoria-metrics http://vm:8428 \\
        --alertmanager http://am:9093      # prints each vmagent shard's and vmalert's command
    ... --shards 2 --vmalert-per-shard        # and one vmalert per shard (per-target rules)

What the configuration cannot reproduce of the bridge is a comment in each file and a list on
stderr. Exit status 2: an unknown engine or unusable options.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Final

from exporters.adapters.table import AdapterError, load_tables
from exporters.promconfig.plan import Plan, PromConfigError
from exporters.promconfig.render import engine_plan, rules_text, scrape_config_text
from exporters.promconfig.sharded import ShardedSetup, commands_text, vmagent_config_text

DEFAULT_DIR: Final = "deploy/prometheus"
DEFAULT_SLO_RULES: Final = "alerts/inferwatch-slo.rules.yml"
# Each engine's usual metrics port, for the checked-in examples (replace with your targets).
DEFAULT_PORTS: Final = {"vllm": 8000, "sglang": 30000, "tgi": 8080, "llamacpp": 8080,
                        "triton": 8002, "dcgm": 9400, "inferwatch": 8000}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--engine", help=f"a mapping table: {', '.join(sorted(load_tables()))}")
    p.add_argument("--all", action="store_true",
                   help="every engine's <engine>-scrape.yml and <engine>-rules.yml in --dir")
    p.add_argument("--targets", default=None,
                   help="comma-separated host:port of the engine's /metrics "
                        "(default: localhost and the engine's usual port)")
    p.add_argument("--job", default=None, help="the scrape job's name (default: the engine)")
    p.add_argument("--out", default="-", help="the prometheus.yml to write ('-': stdout)")
    p.add_argument("--rules-out", default=None,
                   help="write the recording rules here and name the file in rule_files")
    p.add_argument("--dir", default=DEFAULT_DIR, help="with --all: the output directory")
    p.add_argument("--check", action="store_true",
                   help="with --all: write nothing; exit 1 with a diff if files are not current")
    shard = p.add_argument_group("sharded (vmagent cluster + VictoriaMetrics + vmalert)")
    shard.add_argument("--shards", type=int, default=None,
                       help="write the job for vmagent (no rule_files; needs --out and "
                            "--rules-out files) and print the commands of this many vmagent "
                            "shards and of vmalert")
    shard.add_argument("--victoria-metrics", default="http://localhost:8428",
                       help="VictoriaMetrics' URL: the shards write there, vmalert reads there")
    shard.add_argument("--alertmanager", default="http://localhost:9093",
                       help="where vmalert sends alerts")
    shard.add_argument("--slo-rules", action="append", default=None,
                       help=f"more rule files for vmalert (default: {DEFAULT_SLO_RULES})")
    shard.add_argument("--anomaly-rules", action="append", default=None,
                       help="per-target rule files for vmalert beside --rules-out (e.g. "
                            "deploy/prometheus/inferwatch-anomaly-rules.yml)")
    shard.add_argument("--vmalert-per-shard", action="store_true",
                       help="one vmalert per shard for the per-target rules (--rules-out, "
                            "--anomaly-rules), each over its shard's series only (vmagent "
                            "labels them shard=N); the SLO rules in one fleet vmalert")
    shard.add_argument("--evaluation-interval", default="1m",
                       help="vmalert's interval for groups without their own")


def generated_files(engines: list[str] | None = None) -> dict[str, str]:
    """Each engine's scrape config (naming its rule file) and rules, by file name."""
    files: dict[str, str] = {}
    for engine in engines or sorted(load_tables()):
        plan = engine_plan(engine)
        rules = f"{engine}-rules.yml"
        files[f"{engine}-scrape.yml"] = scrape_config_text(plan, engine, _default_targets(engine),
                                                           [rules])
        files[rules] = rules_text(plan)
    return files


def run(args: argparse.Namespace) -> int:
    from monitor.generated import check_generated, write_generated, write_output

    if args.all == bool(args.engine):
        print("inferwatch scrape-config: give --engine NAME or --all", file=sys.stderr)
        return 2
    try:
        if args.all:
            files = generated_files()
            for engine in sorted(load_tables()):
                _report_gaps(engine_plan(engine))
            if args.check:
                return check_generated(Path(args.dir), files, "inferwatch scrape-config --all")
            write_generated(Path(args.dir), files)
            return 0
        plan = engine_plan(args.engine)
    except AdapterError as exc:
        print(f"inferwatch scrape-config: {exc}", file=sys.stderr)
        return 2
    targets = args.targets.split(",") if args.targets else _default_targets(args.engine)
    if args.shards is not None:
        return _run_sharded(args, plan, targets)
    rule_files = [_rule_file_entry(args.rules_out, args.out)] if args.rules_out else []
    if args.rules_out:
        write_output(args.rules_out, rules_text(plan))
    write_output(args.out, scrape_config_text(plan, args.job or args.engine, targets, rule_files))
    _report_gaps(plan)
    return 0


def _run_sharded(args: argparse.Namespace, plan: Plan, targets: list[str]) -> int:
    from monitor.generated import write_output

    if args.out == "-" or not args.rules_out:
        print("inferwatch scrape-config: --shards needs --out and --rules-out files (the "
              "commands name them)", file=sys.stderr)
        return 2
    try:
        setup = ShardedSetup(args.shards, args.victoria_metrics, args.alertmanager,
                             vmalert_per_shard=args.vmalert_per_shard)
    except PromConfigError as exc:
        print(f"inferwatch scrape-config: {exc}", file=sys.stderr)
        return 2
    write_output(args.rules_out, rules_text(plan))
    write_output(args.out, vmagent_config_text(plan, args.job or args.engine, targets,
                                               vmalert_per_shard=args.vmalert_per_shard))
    rule_paths = [args.rules_out, *(args.anomaly_rules or [])]
    sys.stdout.write(commands_text(setup, args.out, rule_paths, args.evaluation_interval,
                                   args.slo_rules or [DEFAULT_SLO_RULES]))
    _report_gaps(plan)
    return 0


def _rule_file_entry(rules_out: str, out: str) -> str:
    """The rule file as prometheus.yml names it: Prometheus resolves it from the directory of
    the config file (on stdout, the path as given)."""
    if out == "-":
        return rules_out
    return os.path.relpath(Path(rules_out).resolve(), Path(out).resolve().parent)


def _default_targets(engine: str) -> list[str]:
    return [f"localhost:{DEFAULT_PORTS.get(engine, 8000)}"]


def _report_gaps(plan: Plan) -> None:
    for gap in plan.gaps:
        print(f"{plan.engine}: not reproduced: {gap.describe()}", file=sys.stderr)
