"""The monitor service's HTTP API."""

from monitor.api.app import create_app
from monitor.api.state import ServiceState

__all__ = ["ServiceState", "create_app"]
