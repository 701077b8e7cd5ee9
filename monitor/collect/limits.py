"""Batch limits the engine does not export, from the target's config, and which limit a batch
utilization was computed against (issue 21).

Batch utilization is running requests over the engine's sequence limit (max_num_seqs). The
reference server exports that limit (``gen_ai_server_batch_size_max``) and its token budget
(``gen_ai_server_batched_tokens_max``); vLLM and most engines export neither. A target may give
them in the config (``max_num_seqs``, ``max_num_batched_tokens``): ``ConfiguredLimits`` adds
them to the target's snapshots as gauges marked ``limit_source="config"``, one per series of
running requests (one per engine core under data parallelism, as the engine applies the limit),
so that everything downstream of a snapshot (derive, the store's series, replicas merged) reads
them like exported ones, and the mark says where they came from. A limit the engine exports
wins; a configured value that disagrees with it is logged once.

Without a sequence limit, the token budget gives a utilization of its own: the mean tokens
scheduled per engine step (``gen_ai_server_iteration_tokens``: vLLM's
``vllm:iteration_tokens_total``) over the budget. ``BatchSource`` names which one a figure is.
"""

from __future__ import annotations

import enum
import logging
import math
from dataclasses import replace
from typing import Final

from exporters import schema
from monitor.collect.snapshot import GaugeStats, SeriesKey, Snapshot, series_key, split_key

logger = logging.getLogger(__name__)

LIMIT_SOURCE: Final = "limit_source"  # label of a limit series the monitor added
CONFIGURED: Final = "config"          # its value: from the target's config


class BatchSource(enum.StrEnum):
    """What a batch utilization is computed against."""

    ENGINE_LIMIT = "engine_limit"                        # running / the engine's max_num_seqs
    CONFIGURED_MAX_NUM_SEQS = "configured_max_num_seqs"  # running / the config's max_num_seqs
    TOKEN_BUDGET = "token_budget"  # mean tokens per step / max_num_batched_tokens


def choose(seq_utilization: float, configured: bool, token_utilization: float
           ) -> tuple[float, BatchSource | None]:
    """The batch utilization and its source: against the sequence limit where there is one
    (``configured``: it came from the config), else against the token budget, else none
    (NaN, None): unknown is never 0."""
    if math.isfinite(seq_utilization):
        source = (BatchSource.CONFIGURED_MAX_NUM_SEQS if configured
                  else BatchSource.ENGINE_LIMIT)
        return seq_utilization, source
    if math.isfinite(token_utilization):
        return token_utilization, BatchSource.TOKEN_BUDGET
    return math.nan, None


def is_configured(labels: dict[str, str]) -> bool:
    return labels.get(LIMIT_SOURCE) == CONFIGURED


class ConfiguredLimits:
    """One target's configured limits, added to its snapshots where the engine lacks them."""

    def __init__(self, target: str, max_num_seqs: int | None,
                 max_num_batched_tokens: int | None) -> None:
        self.target = target
        self.limits = {name: float(value) for name, value in (
            (schema.BATCH_SIZE_MAX, max_num_seqs),
            (schema.BATCHED_TOKENS_MAX, max_num_batched_tokens)) if value is not None}
        self._warned: set[tuple[str, tuple[float, ...]]] = set()

    def apply(self, snapshot: Snapshot) -> Snapshot:
        """``snapshot`` with the configured limits the engine does not export (itself when
        there are none to add: a DOWN snapshot has no series to add them next to)."""
        if not self.limits or not snapshot.gauges:
            return snapshot
        added: dict[SeriesKey, GaugeStats] = {}
        for name, value in self.limits.items():
            exported = [stats.last for key, stats in snapshot.gauges.items()
                        if key.partition("{")[0] == name]
            if exported:
                self._warn_if_different(name, value, exported)
            else:
                added.update(_limit_series(snapshot, name, value))
        return replace(snapshot, gauges={**snapshot.gauges, **added}) if added else snapshot

    def _warn_if_different(self, name: str, value: float, exported: list[float]) -> None:
        found = tuple(sorted(set(exported)))
        if found == (value,) or (name, found) in self._warned:
            return
        self._warned.add((name, found))  # once per value the engine reports, not per scrape
        config_name = ("max_num_seqs" if name == schema.BATCH_SIZE_MAX
                       else "max_num_batched_tokens")
        logger.warning("target %s: the engine reports %s = %s but the config says %s: %g; "
                       "using the engine's", self.target, name,
                       ", ".join(f"{v:g}" for v in found), config_name, value)


def _limit_series(snapshot: Snapshot, name: str, value: float) -> dict[SeriesKey, GaugeStats]:
    """One limit series per series of running requests (labels and readings alike, so that a
    ratio of pooled means is the ratio of sums); without those, one per series of the
    tokens-per-step histogram."""
    running = {key: stats for key, stats in snapshot.gauges.items()
               if key.partition("{")[0] == schema.REQUESTS_RUNNING}
    readings: dict[SeriesKey, int] = {key: stats.num_readings for key, stats in running.items()}
    if not readings:
        readings = {key: 1 for key in snapshot.histograms
                    if key.partition("{")[0] == schema.ITERATION_TOKENS}
    out: dict[SeriesKey, GaugeStats] = {}
    for key, num_readings in readings.items():
        labels = {**split_key(key)[1], LIMIT_SOURCE: CONFIGURED}
        out[series_key(name, labels)] = GaugeStats(value, value * num_readings, num_readings,
                                                   value, value)
    return out


