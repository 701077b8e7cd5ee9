"""A sharded fleet on VictoriaMetrics' binaries: N vmagents split the targets of the generated
scrape job between them (vmagent's cluster flags: each member scrapes the targets whose label
set hashes to its number), remote-write into one VictoriaMetrics, and vmalert evaluates the
generated recording rules and the SLO rules there, writing results back and alerting to an
Alertmanager. Sharding, storage and rule evaluation are theirs; inferwatch only generates the
configuration and the command lines.

With one vmalert per shard (``vmalert_per_shard``) rule evaluation scales with the shards too:
vmagent ``N`` labels everything it writes ``shard="N"`` (``-remoteWrite.label``), and vmalert
``N`` evaluates the per-target rule files (normalization, anomaly) over that shard only: every
query it sends carries ``extra_label=shard=N`` (VictoriaMetrics enforces the label filter on
every selector of the query), and what it records or alerts carries ``shard="N"``
(``-external.label``), so the next rule of the chain finds it. Each target is in one shard, so
its alerts come from one vmalert: one page per faulty target. VictoriaMetrics 1.79.5 (Debian)
is the single-node build, which has no tenants (those are the cluster build's ``/insert/<id>``
and ``/select/<id>`` paths); a label and the query-time filter are what it offers. The SLO
rules sum over the whole fleet (``sum(...)`` of every target's errors), so they stay with one
fleet vmalert reading all shards: split by shard they would be N SLOs with N budgets.
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
SHARD_LABEL: Final = "shard"


@dataclass(frozen=True, slots=True)
class ShardedSetup:
    """Where the shards write and vmalert reads and alerts (base URLs, no path)."""

    num_shards: int
    victoria_metrics_url: str  # e.g. http://victoria-metrics:8428
    alertmanager_url: str  # e.g. http://alertmanager:9093
    vmalert_per_shard: bool = False  # one vmalert per shard for the per-target rules

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


def vmagent_config_text(engine_plan: Plan, job: str, targets: Sequence[str], *,
                        vmalert_per_shard: bool = False) -> str:
    """The scrape job for vmagent: the Prometheus one without rule_files (vmagent refuses
    fields it does not know; vmalert evaluates the rules)."""
    text = scrape_config_text(engine_plan, job, targets)
    if not vmalert_per_shard:
        return text
    first, rest = text.split("\n", 1)
    return (f"{first}\n# One vmalert per shard: each vmagent adds {SHARD_LABEL}=\"<N>\" to what "
            "it writes (-remoteWrite.label) and vmalert N evaluates the per-target rules over "
            f"{SHARD_LABEL}=\"<N>\" only (the commands of `inferwatch scrape-config --shards N "
            "--vmalert-per-shard`).\n" + rest)


def vmagent_argv(setup: ShardedSetup, config_path: str, shard: int) -> list[str]:
    """vmagent scraping its share (``shard`` of ``num_shards``) of the job in ``config_path``.
    Every member reads the same file; with one shard the cluster flags are left out."""
    if not 0 <= shard < setup.num_shards:
        raise PromConfigError(f"shard {shard}: not in 0..{setup.num_shards - 1}")
    argv = [VMAGENT, f"-promscrape.config={config_path}",
            f"-remoteWrite.url={setup.remote_write_url}"]
    if setup.vmalert_per_shard:
        argv.append(f"-remoteWrite.label={SHARD_LABEL}={shard}")
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


def shard_vmalert_argv(setup: ShardedSetup, rule_paths: Sequence[str], shard: int,
                       evaluation_interval: str = "1m") -> list[str]:
    """vmalert evaluating per-target rules over one shard: its queries (and the alert-state
    restore) filtered to ``shard="N"`` by VictoriaMetrics' ``extra_label`` parameter, which
    vmalert keeps from the URL; what it writes and sends labelled ``shard="N"``."""
    if not setup.vmalert_per_shard:
        raise PromConfigError("one vmalert per shard needs the shard label on the vmagents "
                              "(ShardedSetup(vmalert_per_shard=True))")
    if not 0 <= shard < setup.num_shards:
        raise PromConfigError(f"shard {shard}: not in 0..{setup.num_shards - 1}")
    filtered = f"{setup.victoria_metrics_url.rstrip('/')}?extra_label={SHARD_LABEL}%3D{shard}"
    argv = vmalert_argv(setup, rule_paths, evaluation_interval)
    return [_shard_flag(arg, filtered) for arg in argv] + [
        f"-external.label={SHARD_LABEL}={shard}"]


def _shard_flag(arg: str, filtered_url: str) -> str:
    name = arg.split("=", 1)[0]
    return f"{name}={filtered_url}" if name in ("-datasource.url", "-remoteRead.url") else arg


def commands_text(setup: ShardedSetup, config_path: str, rule_paths: Sequence[str],
                  evaluation_interval: str = "1m",
                  fleet_rule_paths: Sequence[str] = ()) -> str:
    """One shell line per process: each vmagent shard, then vmalert. ``rule_paths`` are
    per-target rules (normalization, anomaly), ``fleet_rule_paths`` sum over the fleet (SLO
    rules): one vmalert evaluates both, or, per shard, one vmalert per shard the first and
    one fleet vmalert the second."""
    lines = [f"# vmagent shard {shard} of {setup.num_shards} (one per host or pod)\n"
             + shlex.join(vmagent_argv(setup, config_path, shard))
             for shard in range(setup.num_shards)]
    if not setup.vmalert_per_shard:
        lines.append("# vmalert: normalization and SLO rules over VictoriaMetrics\n"
                     + shlex.join(vmalert_argv(setup, [*rule_paths, *fleet_rule_paths],
                                               evaluation_interval)))
        return "\n".join(lines) + "\n"
    lines += [f"# vmalert of shard {shard}: per-target rules over {SHARD_LABEL}=\"{shard}\" "
              "only (beside that shard's vmagent)\n"
              + shlex.join(shard_vmalert_argv(setup, rule_paths, shard, evaluation_interval))
              for shard in range(setup.num_shards)]
    if fleet_rule_paths:
        lines.append("# fleet vmalert: SLO rules, which sum over every shard\n"
                     + shlex.join(vmalert_argv(setup, fleet_rule_paths, evaluation_interval)))
    return "\n".join(lines) + "\n"
