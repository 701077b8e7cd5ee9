"""Cost attribution per tenant (or class, or model) from the stored request events.

The engine's device-seconds over a window (its busy time, or the window's wall time, times the
devices it holds) are split across the requests by their work, the capacity model's measure
(``monitor/loadgen/capacity.py``): output tokens + ``prefill_weight`` x prompt tokens. The
money is those seconds at the capacity model's price per device-hour (``gpu_hour_price``).
A request without token counts (failed before any usage) does no work here. Every share is a
fraction of the same total, so the groups sum to the total (to float rounding); tokens are
integers and sum exactly.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from monitor.loadgen.capacity import DEFAULT_PREFILL_WEIGHT
from monitor.store.request_events import RequestEventRow
from monitor.store.request_sli import GROUPS

OTHER: Final = "other"


@dataclass(frozen=True, slots=True)
class CostModel:
    """What the window's engine time was and what it costs."""

    device_seconds: float                 # engine busy (or wall) seconds x devices
    device_hour_price: float | None = None    # currency per GPU- (or CPU-) hour; None: no money
    prefill_weight: float = DEFAULT_PREFILL_WEIGHT

    def __post_init__(self) -> None:
        if not self.device_seconds >= 0:
            raise ValueError(f"device seconds must be >= 0, got {self.device_seconds}")
        if self.device_hour_price is not None and not self.device_hour_price >= 0:
            raise ValueError(f"the price per device-hour must be >= 0, got "
                             f"{self.device_hour_price}")
        if not self.prefill_weight >= 0:
            raise ValueError(f"the prefill weight must be >= 0, got {self.prefill_weight}")

    @classmethod
    def from_wall_time(cls, start: float, end: float, num_devices: float,
                       device_hour_price: float | None = None,
                       prefill_weight: float = DEFAULT_PREFILL_WEIGHT) -> CostModel:
        """The engine held ``num_devices`` for the whole window, busy or not."""
        if not num_devices > 0 or not end > start:
            raise ValueError(f"need devices > 0 and end > start, got {num_devices} devices "
                             f"over [{start}, {end})")
        return cls((end - start) * num_devices, device_hour_price, prefill_weight)


@dataclass(frozen=True, slots=True)
class CostShare:
    num_requests: int
    prompt_tokens: int
    output_tokens: int
    work: float                 # output + prefill_weight x prompt tokens
    device_seconds: float
    cost: float | None          # None without a price


@dataclass(frozen=True, slots=True)
class CostAttribution:
    total: CostShare
    groups: dict[str, CostShare]
    unattributed_device_seconds: float  # the engine time of a window without any work


def attribute_cost(rows: Iterable[RequestEventRow], by: str, model: CostModel,
                   max_groups: int | None = None) -> CostAttribution:
    """Each value of ``by`` gets the engine time in proportion to its requests' work; beyond
    the ``max_groups`` with the most work the rest are folded into ``other``."""
    if by not in GROUPS:
        raise ValueError(f"attribute cost by one of {', '.join(GROUPS)}, not {by!r}")
    if max_groups is not None and max_groups < 1:
        raise ValueError(f"max_groups must be >= 1, got {max_groups}")
    counts: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    for row in rows:
        tally = counts[getattr(row, by)]
        tally[0] += 1
        tally[1] += row.prompt_tokens or 0
        tally[2] += row.output_tokens or 0
    counts = _fold(counts, model.prefill_weight, max_groups)
    all_work = sum(_work(t, model.prefill_weight) for t in counts.values())
    groups = {key: _share(tally, model, all_work) for key, tally in sorted(counts.items())}
    total = [sum(t[i] for t in counts.values()) for i in range(3)]
    unattributed = 0.0 if all_work > 0 else model.device_seconds
    return CostAttribution(_share(total, model, all_work), groups, unattributed)


def _work(tally: list[int], prefill_weight: float) -> float:
    return tally[2] + prefill_weight * tally[1]


def _fold(counts: dict[str, list[int]], prefill_weight: float,
          max_groups: int | None) -> dict[str, list[int]]:
    if max_groups is None or len(counts) <= max_groups:
        return dict(counts)
    ranked = sorted(counts, key=lambda k: (-_work(counts[k], prefill_weight), k))
    kept = {k: counts[k] for k in ranked[:max_groups] if k != OTHER}
    rest = [counts[k] for k in counts if k not in kept]
    kept[OTHER] = [sum(t[i] for t in rest) for i in range(3)]
    return kept


def _share(tally: list[int], model: CostModel, all_work: float) -> CostShare:
    work = _work(tally, model.prefill_weight)
    seconds = model.device_seconds * work / all_work if all_work > 0 else 0.0
    cost = None if model.device_hour_price is None else seconds / 3600 * model.device_hour_price
    return CostShare(tally[0], tally[1], tally[2], work, seconds, cost)
