"""What an SLI source answers: steps (one object each, or columns), and reading many SLOs
ahead in one go.

``SliSource.read`` is the contract. A source may also answer in columns (``read_arrays``: a
month of hours and days of minutes per SLO without an object per step) and for many SLOs at
once (``read_many``: a store reads each metric once for all targets instead of once per
SLO). ``Prefetched`` is how the evaluator uses the last: before a tick it asks for every
read the tick will make, grouped by range, and then each SLO's read is served from that.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from monitor.slo.spec import Slo

@dataclass(frozen=True, slots=True)
class Step:
    """One step's SLI reading; ``end`` is the step's end (Unix seconds)."""

    end: float
    good: float
    total: float
    has_data: bool


class SliSource(Protocol):
    def read(self, slo: Slo, start: float, end: float, step: float) -> Sequence[Step]:
        """Readings of steps (start + (k-1) step, start + k step] up to ``end``."""
        ...


@runtime_checkable
class WarningSource(Protocol):
    """A source that can say why an SLO's SLI is only a bound (``StoreSliSource``: a latency
    threshold between a target's stored bucket edges, ``monitor.slo.thresholds``)."""

    def threshold_warnings(self, slo: Slo, start: float, end: float) -> list[str]: ...


Floats = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class StepArrays:
    """Steps as columns: what a first tick loads (a month of hours and days of minutes per
    SLO) without a Python object per step."""

    end: Floats
    good: Floats
    total: Floats
    has_data: npt.NDArray[np.bool_]

    @classmethod
    def of(cls, steps: Sequence[Step]) -> StepArrays:
        return cls(np.array([s.end for s in steps], dtype=np.float64),
                   np.array([s.good for s in steps], dtype=np.float64),
                   np.array([s.total for s in steps], dtype=np.float64),
                   np.array([s.has_data for s in steps], dtype=np.bool_))

    def __len__(self) -> int:
        return len(self.end)

    def steps(self) -> list[Step]:
        return [Step(*row) for row in zip(self.end.tolist(), self.good.tolist(),
                                          self.total.tolist(), self.has_data.tolist(),
                                          strict=True)]


@runtime_checkable
class ArraySliSource(SliSource, Protocol):
    """A source that can also answer in columns, the same steps as ``read``."""

    def read_arrays(self, slo: Slo, start: float, end: float, step: float) -> StepArrays:
        ...


def read_arrays(source: SliSource, slo: Slo, start: float, end: float,
                step: float) -> StepArrays:
    """``source.read`` as columns, in the source's own columns when it has them (and has not
    overridden ``read`` below them: a subclass changing ``read`` alone is read through it)."""
    if isinstance(source, ArraySliSource) and _columns_follow_read(type(source)):
        return source.read_arrays(slo, start, end, step)
    return StepArrays.of(source.read(slo, start, end, step))


@functools.cache
def _columns_follow_read(cls: type) -> bool:
    def owner(name: str) -> type:
        return next(k for k in cls.__mro__ if name in vars(k))
    return issubclass(owner("read_arrays"), owner("read"))


@runtime_checkable
class BulkSliSource(SliSource, Protocol):
    """A source that reads many SLOs over one range at once: each SLO's columns (the same as
    ``read`` would give), or the exception its own read would raise."""

    def read_many(self, slos: Sequence[Slo], start: float, end: float,
                  step: float) -> dict[str, StepArrays | Exception]:
        ...


Read = tuple[Slo, float, float, float]  # slo, start, end, step


class Prefetched:
    """A source whose answers to known reads were fetched ahead in bulk (``prefetch``); every
    other read goes to the source itself. Each answer is served once."""

    def __init__(self, source: SliSource) -> None:
        self.source = source
        self._answers: dict[tuple[str, float, float, float], StepArrays | Exception] = {}

    def prefetch(self, reads: Iterable[Read]) -> None:
        """Fetch these reads grouped by range (a no-op for a source without ``read_many``)."""
        self._answers.clear()
        if not isinstance(self.source, BulkSliSource):
            return
        by_range: dict[tuple[float, float, float], list[Slo]] = {}
        for slo, start, end, step in reads:
            by_range.setdefault((start, end, step), []).append(slo)
        for (start, end, step), slos in by_range.items():
            answers = self.source.read_many(slos, start, end, step)
            for name, answer in answers.items():
                self._answers[name, start, end, step] = answer

    def clear(self) -> None:
        self._answers.clear()

    def read(self, slo: Slo, start: float, end: float, step: float) -> Sequence[Step]:
        answer = self._answers.pop((slo.name, start, end, step), None)
        if answer is None:
            return self.source.read(slo, start, end, step)
        if isinstance(answer, Exception):
            raise answer
        return answer.steps()

    def read_arrays(self, slo: Slo, start: float, end: float, step: float) -> StepArrays:
        answer = self._answers.pop((slo.name, start, end, step), None)
        if answer is None:
            return read_arrays(self.source, slo, start, end, step)
        if isinstance(answer, Exception):
            raise answer
        return answer
