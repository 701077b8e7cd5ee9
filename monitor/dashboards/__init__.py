"""Grafana dashboards generated from the metric schema, the panel list and the SLO specs
(`inferwatch dashboards generate`), checked in under dashboards/ and pushed to Grafana's HTTP
API (`inferwatch dashboards push`)."""

from monitor.dashboards.generate import build_dashboard, generate_dashboards, render
from monitor.dashboards.push import PushError, dashboard_files, push_dashboards
from monitor.dashboards.spec import PanelFile, PanelFileError, load_panels

__all__ = [
    "PanelFile",
    "PanelFileError",
    "PushError",
    "build_dashboard",
    "dashboard_files",
    "generate_dashboards",
    "load_panels",
    "push_dashboards",
    "render",
]
