"""Live capacity headroom: each target's load against the capacity a sweep measured for it,
per load dimension, on /metrics, in the API and as a warning before the SLO breaches."""

from __future__ import annotations

from monitor.headroom.config import CapacityConfig, HeadroomConfig

__all__ = ["CapacityConfig", "HeadroomConfig"]
