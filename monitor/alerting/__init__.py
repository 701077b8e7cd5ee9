"""Alerting: the Alertmanager v2 client, reliable alert delivery and silences (maintenance)."""
