"""Prometheus (or vmagent) configuration from the adapter tables: a scrape job whose
metric_relabel_configs and a recording-rule file that together give the inferwatch schema
without a bridge (see plan.py for what goes where, and what cannot be reproduced)."""

from exporters.promconfig.plan import RAW_PREFIX, Gap, Plan, PromConfigError, plan
from exporters.promconfig.recording import rule_group, target_rules
from exporters.promconfig.relabel import metric_relabel_configs
from exporters.promconfig.render import (
    engine_plan,
    rules_text,
    scrape_config_text,
    scrape_job,
)

__all__ = [
    "RAW_PREFIX",
    "Gap",
    "Plan",
    "PromConfigError",
    "engine_plan",
    "metric_relabel_configs",
    "plan",
    "rule_group",
    "rules_text",
    "scrape_config_text",
    "scrape_job",
    "target_rules",
]
