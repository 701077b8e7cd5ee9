"""The UI over the API fixture's store (tests/monitor/api/conftest.py) with a real
Alertmanager in its config, and three silences there: one active over the availability SLO's
alerts (firing in the book), one pending, one expired."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from tests.monitor.alertmanager_fixture import RunningAlertmanager, running_alertmanager
from tests.monitor.api.conftest import CONFIG, Api, served_api


@dataclass
class SilencedUi:
    ui: Api
    am: RunningAlertmanager
    active: str
    pending: str
    expired: str


def config_with(*urls: str) -> str:
    """The API fixture's config sending alerts to ``urls``."""
    return CONFIG + f"alerting: {{alertmanager_urls: [{', '.join(urls)}]}}\n"


@contextmanager
def silenced_ui(tmp_path: Path) -> Iterator[SilencedUi]:
    (tmp_path / "ui").mkdir(exist_ok=True)
    with running_alertmanager(tmp_path / "am") as am, am.client() as client, \
            served_api(tmp_path / "ui", config_yaml=config_with(am.url)) as ui:
        now = datetime.now(UTC)
        active = client.create_silence(["slo=availability", 'alertname=~"InferwatchSLO.*"'],
                                       None, now + timedelta(hours=2), "ops",
                                       "GPU swap on ref-0 <b>tonight</b>")
        pending = client.create_silence(["slo!=availability"], now + timedelta(hours=1),
                                        now + timedelta(hours=3), "alice", "planned upgrade")
        expired = client.create_silence(["slo=ttft"], None, now + timedelta(hours=1), "bob",
                                        "done early")
        client.expire_silence(expired)
        yield SilencedUi(ui, am, active, pending, expired)
