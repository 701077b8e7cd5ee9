"""The inferwatch monitor: command line, load generation, and (to come) collection, SLOs,
alerting and the report API."""

__all__: list[str] = []
