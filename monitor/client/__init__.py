"""A Python client of the monitor's HTTP API (``inferwatch serve``): pandas DataFrames of the
SLOs, an SLO's history, targets and their series, alerts and their history, and bench runs
(sweeps, canaries).

    with Client("http://127.0.0.1:8080") as client:
        history = client.slo_history("chat-ttft", start="2026-11-20T00:00:00Z", step=3600)
"""

from monitor.client.client import Client
from monitor.client.errors import ClientError

__all__ = ["Client", "ClientError"]
