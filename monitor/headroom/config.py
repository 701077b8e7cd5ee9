"""The ``capacity:`` block of a target and the ``headroom:`` section of inferwatch.yaml.

    headroom: {warn_below_ratio: 0.2, for_seconds: 300, window_seconds: 60}
    targets:
      - name: chat-0
        url: http://10.0.0.7:8000/metrics
        capacity: {sweep: nightly}            # a stored sweep: its id, or its --name
      - name: chat-1
        url: http://10.0.0.8:8000/metrics
        capacity: {requests_per_second: 6, prompt_tokens_per_second: 720}   # or the numbers

``sweep`` names a sweep recorded in the store (``inferwatch bench sweep --store/--config
--name NAME``): its id, or its name, meaning the latest finished sweep of that name, so a
nightly sweep under one name moves every target's capacity with it. The numbers are those
``inferwatch slo propose`` prints; any subset of the four dimensions may be given.
"""

from __future__ import annotations

from typing import Final

from pydantic import BaseModel, ConfigDict, Field, model_validator

from monitor.loadgen.dimensions import Dimension

HEADROOM_ALERT: Final = "InferwatchCapacityHeadroomLow"


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class CapacityConfig(_Section):
    """A target's capacity: a stored sweep, or numbers per dimension."""

    sweep: str | None = Field(default=None, min_length=1)
    requests_per_second: float | None = Field(default=None, gt=0)
    prompt_tokens_per_second: float | None = Field(default=None, gt=0)
    output_tokens_per_second: float | None = Field(default=None, gt=0)
    requests_in_flight: float | None = Field(default=None, gt=0)

    @model_validator(mode="after")
    def _one_source(self) -> CapacityConfig:
        if (self.sweep is None) == (not self.numbers()):
            raise ValueError("give either sweep (a stored sweep's id or name) or capacities "
                             "per dimension (" + ", ".join(d.value for d in Dimension) + ")")
        return self

    def numbers(self) -> dict[Dimension, float]:
        """The capacities given directly, by dimension."""
        return {d: value for d in Dimension if (value := getattr(self, d.value)) is not None}


class HeadroomConfig(_Section):
    """When a target's headroom warns: below ``warn_below_ratio`` for ``for_seconds``,
    its load read over the last ``window_seconds``."""

    warn_below_ratio: float = Field(default=0.2, ge=0, lt=1)
    for_seconds: float = Field(default=300.0, ge=0)
    window_seconds: float = Field(default=60.0, gt=0)
