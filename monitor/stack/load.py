"""The demo's load: an open-loop Poisson stream whose rate rises and falls.

The rate follows a half sine from ``low_rps`` up to ``peak_rps`` at the middle of the run
and back, like a day's traffic squeezed into minutes. Arrivals are a non-homogeneous Poisson
process drawn by thinning (Lewis and Shedler): candidates at the peak rate, each kept with
probability rate(t) / peak, which is exact for any bounded rate function.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from monitor.loadgen import Endpoint, LengthDist, Limits, RequestSpec, RunResult, run_load
from monitor.loadgen.runner import Progress
from monitor.loadgen.workload import synthetic_prompt

# Short chat-like requests: the tiny model on one CPU core serves ~40 req/s of one-token
# prompts but a few per second of these, so the default peak stays below saturation.
INPUT_LEN = LengthDist("lognormal", 128, 0.5)
OUTPUT_LEN = LengthDist("lognormal", 48, 0.5)
CHARS_PER_TOKEN = 1.0  # the reference server's byte-level tokenizer


@dataclass(frozen=True, slots=True)
class LoadShape:
    """Requests per second over ``duration_seconds``: low at both ends, peak in the middle."""

    low_rps: float
    peak_rps: float
    duration_seconds: float

    def __post_init__(self) -> None:
        if not 0 < self.low_rps <= self.peak_rps:
            raise ValueError(f"need 0 < low rate <= peak rate, got {self.low_rps:g} and "
                             f"{self.peak_rps:g} req/s")
        if not self.duration_seconds > 0:
            raise ValueError(f"the load needs a duration > 0, got {self.duration_seconds:g} s")

    def rate(self, t: float) -> float:
        """The offered rate at ``t`` seconds into the run (the low rate outside it)."""
        if not 0 <= t <= self.duration_seconds:
            return self.low_rps
        rise = math.sin(math.pi * t / self.duration_seconds)
        return self.low_rps + (self.peak_rps - self.low_rps) * rise


def arrival_times(shape: LoadShape, rng: np.random.Generator) -> Iterator[float]:
    """Send offsets (seconds) of a Poisson process with ``shape.rate(t)``, up to its end."""
    t = 0.0
    while True:
        t += float(rng.exponential(1.0 / shape.peak_rps))
        if t >= shape.duration_seconds:
            return
        if rng.random() * shape.peak_rps < shape.rate(t):
            yield t


def demo_requests(shape: LoadShape, seed: int) -> Iterator[RequestSpec]:
    """The demo's requests at their arrival times; the same seed gives the same stream."""
    arrivals_rng = np.random.default_rng([seed, 0])
    lengths_rng = np.random.default_rng([seed, 1])  # apart, so lengths do not shift arrivals
    for t in arrival_times(shape, arrivals_rng):
        tokens = int(INPUT_LEN.sample(lengths_rng, 1)[0])
        prompt = synthetic_prompt(lengths_rng, tokens, CHARS_PER_TOKEN)
        max_tokens = int(OUTPUT_LEN.sample(lengths_rng, 1)[0])
        yield RequestSpec(t, prompt, max_tokens, None, tokens)


@dataclass
class DemoLoad:
    """Sends the demo's stream to one server; ``progress`` is live while it runs."""

    base_url: str
    model: str
    shape: LoadShape
    seed: int = 0
    progress: Progress = field(default_factory=Progress)

    async def run(self) -> RunResult:
        endpoint = Endpoint(self.base_url, self.model, timeout_seconds=60.0)
        limits = Limits(duration_seconds=self.shape.duration_seconds, drain_seconds=10.0)
        return await run_load(endpoint, demo_requests(self.shape, self.seed), limits,
                              rate=math.nan, on_progress=self._follow, progress_every=1.0)

    def _follow(self, progress: Progress, elapsed: float) -> None:
        self.progress = progress  # the runner's own object: it stays current
