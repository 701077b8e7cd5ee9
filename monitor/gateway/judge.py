"""SLO classes and the verdict on each finished request: good or not, judged at the edge.

A request is good when it succeeded AND its TTFT <= the class's TTFT target AND its TPOT
(the request's mean inter-token latency, (e2e - ttft) / (output tokens - 1)) <= the class's
ITL target. Mean, not max or a percentile of the gaps: that is what ``vllm bench serve
--goodput tpot:...`` (and DistServe's goodput) checks, so the gateway's goodput and a
benchmark's agree. A request with fewer than two tokens has no TPOT and passes that check.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Final

import yaml

from monitor.gateway.measure import RequestTiming

log = logging.getLogger(__name__)

HEADER_CLASS: Final = "x-slo-class"
HEADER_TTFT_MS: Final = "x-slo-ttft-ms"
HEADER_ITL_MS: Final = "x-slo-itl-ms"
# The label of targets given in a request's headers: their values are open, the label is not.
CUSTOM_CLASS: Final = "custom"


class SloConfigError(ValueError):
    """A bad SLO classes file."""


@dataclass(frozen=True, slots=True)
class SloClass:
    name: str
    ttft_seconds: float | None = None  # None: no TTFT target
    itl_seconds: float | None = None  # None: no ITL target; compared with the request's TPOT

    def __post_init__(self) -> None:
        for target in (self.ttft_seconds, self.itl_seconds):
            if target is not None and not (target > 0 and math.isfinite(target)):
                raise SloConfigError(f"SLO class {self.name!r}: targets must be > 0, "
                                     f"got {target}")

    def is_good(self, ok: bool, timing: RequestTiming) -> bool:
        if not ok:
            return False
        ttft = timing.ttft
        if self.ttft_seconds is not None and (ttft is None or ttft > self.ttft_seconds):
            return False
        tpot = timing.tpot
        return self.itl_seconds is None or tpot is None or tpot <= self.itl_seconds


@dataclass(frozen=True, slots=True)
class SloClasses:
    """The configured classes and the one a request gets when it names none."""

    classes: Mapping[str, SloClass]
    default: str
    _by_name: dict[str, SloClass] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.default not in self.classes:
            raise SloConfigError(f"default SLO class {self.default!r} is not one of "
                                 f"{sorted(self.classes)}")
        if CUSTOM_CLASS in self.classes:
            raise SloConfigError(f"{CUSTOM_CLASS!r} is reserved for targets given in headers")
        object.__setattr__(self, "_by_name", dict(self.classes))

    def for_request(self, headers: Mapping[str, str]) -> SloClass:
        """``x-slo-class`` names a configured class (unknown: the default);
        ``x-slo-ttft-ms``/``x-slo-itl-ms`` override its targets, labelled "custom"."""
        chosen = self._by_name.get(headers.get(HEADER_CLASS, ""), self._by_name[self.default])
        ttft = _header_seconds(headers, HEADER_TTFT_MS)
        itl = _header_seconds(headers, HEADER_ITL_MS)
        if ttft is None and itl is None:
            return chosen
        return SloClass(CUSTOM_CLASS, ttft if ttft is not None else chosen.ttft_seconds,
                        itl if itl is not None else chosen.itl_seconds)

    @property
    def label_values(self) -> tuple[str, ...]:
        return (*self.classes, CUSTOM_CLASS)


def _header_seconds(headers: Mapping[str, str], name: str) -> float | None:
    raw = headers.get(name)
    if raw is None:
        return None
    try:
        value = float(raw) / 1000
    except ValueError:
        value = math.nan
    if not (value > 0 and math.isfinite(value)):
        log.warning("ignoring %s: %r is not a positive number of milliseconds", name, raw)
        return None
    return value


def parse_slo_classes(data: Any, where: str) -> SloClasses:
    """``{default: NAME, classes: {NAME: {ttft_ms: N, itl_ms: N}}}`` into SloClasses."""
    if not isinstance(data, dict) or not isinstance(data.get("classes"), dict) \
            or not data["classes"]:
        raise SloConfigError(f"{where}: expected a mapping with a non-empty 'classes' mapping")
    classes: dict[str, SloClass] = {}
    for name, targets in data["classes"].items():
        if not isinstance(targets, dict) or set(targets) - {"ttft_ms", "itl_ms"}:
            raise SloConfigError(f"{where}: class {name!r} takes ttft_ms and itl_ms only")
        try:
            classes[str(name)] = SloClass(str(name), *(
                None if targets.get(key) is None else float(targets[key]) / 1000
                for key in ("ttft_ms", "itl_ms")))
        except (TypeError, ValueError) as exc:
            raise SloConfigError(f"{where}: class {name!r}: {exc}") from None
    default = str(data.get("default", next(iter(classes))))
    return SloClasses(classes, default)


def load_slo_classes(path: str | Path | None = None) -> SloClasses:
    """The classes of a YAML file, or the packaged defaults (slo_classes.yaml)."""
    if path is None:
        text = resources.files("monitor.gateway").joinpath("slo_classes.yaml").read_text()
        where = "monitor/gateway/slo_classes.yaml"
    else:
        try:
            text = Path(path).read_text()
        except OSError as exc:
            raise SloConfigError(f"cannot read SLO classes {path}: {exc}") from None
        where = str(path)
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise SloConfigError(f"{where}: not YAML: {exc}") from None
    return parse_slo_classes(data, where)
