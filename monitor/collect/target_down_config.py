"""The ``alerting.target_down`` section of inferwatch.yaml: the alert for a target whose
scrapes all fail, in the monitor (monitor/alerting/target_down.py) and in the generated
Prometheus rules (monitor/slo/target_down_rules.py), which share these settings.

    alerting:
      target_down:
        for_seconds: 300        # every scrape failed this long before it fires (0: at once)
        severity: ticket        # or page
        runbook_url: https://runbooks.example.com/inference/target-down
        dashboard_url: https://grafana.example.com/d/inferwatch?var-target={target}
      # target_down: {enabled: false}   # no target-down alert

The default ``for`` is the five minutes of the ``InstanceDown`` (``up == 0``) rule in
Prometheus' own alerting documentation: twenty failed scrapes at the default 15 s, more than
an engine's ordinary restart with a model load takes, and far less than the fifteen minutes
after which an SLO's no-data ticket fires. ``{target}`` in a URL is the target's name.
"""

from __future__ import annotations

from typing import Final, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

TARGET_DOWN_ALERT: Final = "InferwatchTargetDown"
DEFAULT_TARGET_DOWN_FOR_SECONDS: Final = 300.0
TARGET_PLACEHOLDER: Final = "{target}"  # in runbook_url and dashboard_url


class TargetDownConfig(BaseModel):
    """When a target that answers no scrape alerts, and how the alert is labelled."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = True
    for_seconds: float = Field(default=DEFAULT_TARGET_DOWN_FOR_SECONDS, ge=0,
                               allow_inf_nan=False)
    severity: Literal["ticket", "page"] = "ticket"
    runbook_url: str | None = None
    dashboard_url: str | None = None

    @field_validator("for_seconds")
    @classmethod
    def _whole_milliseconds(cls, seconds: float) -> float:
        # Prometheus' `for:` is a duration in milliseconds at best; the rule must say the same.
        if round(seconds * 1000) != seconds * 1000:
            raise ValueError(f"{seconds!r} s: give whole milliseconds (a Prometheus `for:`)")
        return seconds

    @field_validator("runbook_url", "dashboard_url")
    @classmethod
    def _http_url(cls, url: str | None) -> str | None:
        if url is not None and not url.startswith(("http://", "https://")):
            raise ValueError(f"{url!r} is not an http(s) URL")
        return url

    def links(self, target: str) -> dict[str, str]:
        """The runbook and dashboard annotations that are set, ``{target}`` in them replaced
        by ``target`` (a name, or a template that renders one)."""
        found = {"runbook_url": self.runbook_url, "dashboard_url": self.dashboard_url}
        return {name: url.replace(TARGET_PLACEHOLDER, target)
                for name, url in found.items() if url is not None}
