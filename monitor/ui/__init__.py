"""The monitor's web UI: server-rendered pages (Jinja2, inline SVG) over the API's objects."""

from monitor.ui.routes import make_router

__all__ = ["make_router"]
