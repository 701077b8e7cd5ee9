"""A sharded fleet on VictoriaMetrics' binaries: N vmagents split the targets of the generated
scrape job between them (vmagent's cluster flags: each member scrapes the targets whose label
set hashes to its number), remote-write into one VictoriaMetrics, and vmalert evaluates the
generated recording rules and the SLO rules there, writing results back and alerting to an
Alertmanager. Sharding, storage and rule evaluation are theirs; inferwatch only generates the
configuration and the command lines.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from exporters.promconfig.plan import Plan, PromConfigError
from exporters.promconfig.render import scrape_config_text

VMAGENT: Final = "vmagent"
VMALERT: Final = "vmalert"
REMOTE_WRITE_PATH: Final = "/api/v1/write"
FLUSH_INTERVAL: Final = "1s"


@dataclass(frozen=True, slots=True)
class ShardedSetup:
    """Where the shards write and vmalert reads and alerts (base URLs, no path)."""

    num_shards: int
    victoria_metrics_url: str  # e.g. http://victoria-metrics:8428
    alertmanager_url: str  # e.g. http://alertmanager:9093

    def __post_init__(self) -> None:
        if self.num_shards < 1:
            raise PromConfigError(f"--shards {self.num_shards}: give at least one shard")
        for name, url in (("VictoriaMetrics", self.victoria_metrics_url),
                          ("Alertmanager", self.alertmanager_url)):
            if not url.startswith(("http://", "https://")):
                raise PromConfigError(f"{name} URL {url!r}: give http(s)://host:port")

    @property
    def remote_write_url(self) -> str:
        return self.victoria_metrics_url.rstrip("/") + REMOTE_WRITE_PATH


def vmagent_config_text(engine_plan: Plan, job: str, targets: Sequence[str]) -> str:
    """The scrape job for vmagent: the Prometheus one without rule_files (vmagent refuses
    fields it does not know; vmalert evaluates the rules)."""
    return scrape_config_text(engine_plan, job, targets)


def vmagent_argv(setup: ShardedSetup, config_path: str, shard: int) -> list[str]:
    """vmagent scraping its share (``shard`` of ``num_shards``) of the job in ``config_path``.
    Every member reads the same file; with one shard the cluster flags are left out."""
    if not 0 <= shard < setup.num_shards:
        raise PromConfigError(f"shard {shard}: not in 0..{setup.num_shards - 1}")
    argv = [VMAGENT, f"-promscrape.config={config_path}",
            f"-remoteWrite.url={setup.remote_write_url}"]
    if setup.num_shards > 1:
        argv += [f"-promscrape.cluster.membersCount={setup.num_shards}",
                 f"-promscrape.cluster.memberNum={shard}"]
    return argv


def vmalert_argv(setup: ShardedSetup, rule_paths: Sequence[str],
                 evaluation_interval: str = "1m") -> list[str]:
    """vmalert querying VictoriaMetrics, writing recorded series back there (vmalert appends
    the write path itself), and sending alerts to Alertmanager. ``evaluation_interval``
    applies to groups without an interval of their own (the normalization rules)."""
    base = setup.victoria_metrics_url.rstrip("/")
    # The SLO rules read the series the normalization rules recorded: flushed every 5 s by
    # default, the newest seconds of each window would be missing from its errors.
    return [VMALERT, *(f"-rule={path}" for path in rule_paths), f"-datasource.url={base}",
            f"-remoteWrite.url={base}", f"-remoteRead.url={base}",
            f"-remoteWrite.flushInterval={FLUSH_INTERVAL}",
            f"-notifier.url={setup.alertmanager_url}",
            f"-evaluationInterval={evaluation_interval}"]


def commands_text(setup: ShardedSetup, config_path: str, rule_paths: Sequence[str],
                  evaluation_interval: str = "1m") -> str:
    """One shell line per process: each vmagent shard, then vmalert."""
    lines = [f"# vmagent shard {shard} of {setup.num_shards} (one per host or pod)\n"
             + shlex.join(vmagent_argv(setup, config_path, shard))
             for shard in range(setup.num_shards)]
    lines.append("# vmalert: normalization and SLO rules over VictoriaMetrics\n"
                 + shlex.join(vmalert_argv(setup, rule_paths, evaluation_interval)))
    return "\n".join(lines) + "\n"
