"""The sharded deployment, run for real: simulated vLLM engines, two vmagents sharding them
(the commands exporters/promconfig/sharded.py generates), one VictoriaMetrics, vmalert
evaluating the generated normalization rules and an SLO rule file, a real Alertmanager and a
webhook receiver counting its notifications. For tests/exporters/test_sharded_victoriametrics.py.
With ``vmalert_per_shard`` the vmagents label their shard and one vmalert per shard evaluates
the normalization rules and a per-target alert over its shard only; a fleet vmalert the SLO.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import httpx
import yaml

from exporters.promconfig import engine_plan, rules_text
from exporters.promconfig.sharded import (
    ShardedSetup,
    shard_vmalert_argv,
    vmagent_argv,
    vmagent_config_text,
    vmalert_argv,
)
from monitor.slo.rules import generate_rules
from monitor.slo.spec import Slo
from monitor.stack.alertmanager import start_alertmanager, webhook_config
from monitor.stack.processes import Service
from monitor.stack.receiver import AlertReceiver, Notice
from monitor.stack.victoriametrics import start_victoria_metrics, start_vm_tool
from tests.exporters.engine_fleet import EngineFleet, running_fleet

NUM_SHARDS: Final = 2
INTERVAL_SECONDS: Final = 3
JOB: Final = "vllm"
SLO_NAME: Final = "fleet-availability"
LONG_WINDOW_SECONDS: Final = 36
# Every engine finishes 10 requests a second; the faulty one also rejects 50 a second, so the
# fleet's error ratio is 50 / (500 * 10 + 50) ~ 1%: ten times the 0.1% budget, over both
# windows of the one page condition (burn rate above 2). No fault, no errors, no page.
SLO: Final = {
    "name": SLO_NAME, "sli": {"kind": "availability", "errors": ["rejected"]},
    "objective": 0.999, "window": "1d",
    "alerting": {"ticket": False, "windows": [
        {"severity": "page", "long_seconds": LONG_WINDOW_SECONDS, "short_seconds": 12,
         "factor": 2}]},
}
# A per-target alert for the shards' vmalerts, standing in for the anomaly rules (whose
# windows need hours of history): an engine rejecting requests, from the recorded errors.
TARGET_ALERT: Final = "EngineRejectingRequests"
TARGET_RULES: Final = {"groups": [{"name": "per-target", "rules": [{
    "alert": TARGET_ALERT, "for": f"{2 * INTERVAL_SECONDS}s", "labels": {"severity": "page"},
    "expr": 'sum by (job, instance) (rate(gen_ai_server_request_errors_total'
            '{error_type="rejected"}[12s])) > 0'}]}]}


@dataclass(frozen=True)
class ShardedStack:
    fleet: EngineFleet
    victoria_metrics_url: str
    agents: list[Service]
    vmalert: Service
    receiver: AlertReceiver
    shard_vmalerts: list[Service] = field(default_factory=list)  # with vmalert_per_shard

    def pages(self) -> list[Notice]:
        """The receiver's firing notices of the SLO's pages (resends are not counted)."""
        return [n for n in self.receiver.notices if n.status == "firing"
                and n.labels.get("severity") == "page" and n.labels.get("slo") == SLO_NAME]


def write_files(workdir: Path, addresses: list[str]) -> tuple[Path, list[Path]]:
    """The vmagent job (a short scrape interval added) and vmalert's two rule files (and the
    per-target alert, TARGET_RULES, as target-rules.yml beside them)."""
    workdir.mkdir(parents=True, exist_ok=True)
    config = yaml.safe_load(vmagent_config_text(engine_plan(JOB), JOB, addresses))
    interval = f"{INTERVAL_SECONDS}s"
    config["global"] = {"scrape_interval": interval, "scrape_timeout": interval}
    config_path = workdir / "vmagent.yml"
    config_path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    normalize = workdir / f"{JOB}-rules.yml"
    normalize.write_text(rules_text(engine_plan(JOB)), encoding="utf-8")
    slo_rules = workdir / "slo-rules.yml"
    slo_rules.write_text(generate_rules([Slo.model_validate(SLO)],
                                        interval_seconds=INTERVAL_SECONDS), encoding="utf-8")
    (workdir / "target-rules.yml").write_text(yaml.safe_dump(TARGET_RULES), encoding="utf-8")
    return config_path, [normalize, slo_rules]


@contextmanager
def running_sharded_stack(workdir: Path, num_engines: int, binaries: dict[str, str],
                          alertmanager_binary: str, *,
                          vmalert_per_shard: bool = False) -> Iterator[ShardedStack]:
    with ExitStack() as stack:
        fleet = stack.enter_context(running_fleet(num_engines))
        receiver = AlertReceiver().start()
        stack.callback(receiver.stop)
        alertmanager = start_alertmanager(alertmanager_binary, workdir / "alertmanager",
                                          webhook_config(receiver.webhook_url))
        stack.callback(alertmanager.stop)
        vm = start_victoria_metrics(binaries["victoria-metrics"], workdir / "victoria-metrics")
        stack.callback(vm.stop)
        setup = ShardedSetup(NUM_SHARDS, vm.url, alertmanager.url,
                             vmalert_per_shard=vmalert_per_shard)
        config, rules = write_files(workdir, fleet.addresses)
        agents = []
        for shard in range(NUM_SHARDS):
            argv = _with_binary(vmagent_argv(setup, str(config), shard), binaries)
            agents.append(start_vm_tool(f"vmagent-{shard}", argv, workdir / f"vmagent-{shard}"))
            stack.callback(agents[-1].stop)
        shard_vmalerts = []
        if vmalert_per_shard:  # normalization + per-target alert per shard, the SLO in one
            per_target, rules = [str(rules[0]), str(workdir / "target-rules.yml")], rules[1:]
            for shard in range(NUM_SHARDS):
                argv = shard_vmalert_argv(setup, per_target, shard, f"{INTERVAL_SECONDS}s")
                shard_vmalerts.append(start_vm_tool(f"vmalert-{shard}", _with_binary(
                    argv, binaries), workdir / f"vmalert-{shard}"))
                stack.callback(shard_vmalerts[-1].stop)
        argv = vmalert_argv(setup, [str(path) for path in rules], f"{INTERVAL_SECONDS}s")
        vmalert = start_vm_tool("vmalert", _with_binary(argv, binaries), workdir / "vmalert")
        stack.callback(vmalert.stop)
        yield ShardedStack(fleet, vm.url, agents, vmalert, receiver, shard_vmalerts)


def _with_binary(argv: list[str], binaries: dict[str, str]) -> list[str]:
    return [binaries[argv[0]], *argv[1:]]


def active_targets(agent_url: str) -> list[dict[str, Any]]:
    """The targets this vmagent scrapes (its share), from its Prometheus-style API."""
    data = httpx.get(f"{agent_url}/api/v1/targets", timeout=10).json()["data"]
    targets: list[dict[str, Any]] = data["activeTargets"]
    return targets


def query(url: str, promql: str) -> list[dict[str, Any]]:
    """An instant query's result vector."""
    answer = httpx.get(f"{url}/api/v1/query", params={"query": promql}, timeout=30).json()
    if answer.get("status") != "success":
        raise AssertionError(f"{promql}: {answer}")
    result: list[dict[str, Any]] = answer["data"]["result"]
    return result


def by_instance(url: str, promql: str) -> dict[str, float]:
    return {item["metric"]["instance"]: float(item["value"][1]) for item in query(url, promql)}


def storage_lag(stack: ShardedStack, tick: int) -> str | None:
    """None once VictoriaMetrics holds every engine's page at ``tick``: its requests
    (relabeled by vmagent) and its rejections (recorded by vmalert); else what differs."""
    traffic, addresses, url = stack.fleet.traffic, stack.fleet.addresses, stack.victoria_metrics_url
    requests = by_instance(url, 'gen_ai_server_requests_total{finish_reason="length"}')
    errors = by_instance(url, 'gen_ai_server_request_errors_total{error_type="rejected"}')
    wrong = [a for i, a in enumerate(addresses)
             if requests.get(a) != traffic.requests(i, tick)
             or errors.get(a) != traffic.rejections(i, tick)]
    return f"{len(wrong)} engines differ, e.g. {wrong[:3]}" if wrong else None


def wait_until(check: Callable[[], str | None], timeout: float) -> None:
    """Until ``check()`` returns None (no problem left); AssertionError with its last
    complaint after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while (problem := check()) is not None:
        if time.monotonic() > deadline:
            raise AssertionError(f"after {timeout:g} s: {problem}")
        time.sleep(0.5)
