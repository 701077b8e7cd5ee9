"""Five SLOs over the API fixture's store (tests/monitor/api/conftest.py), for the SLO list's
sort and filter: three services, a ``team`` label, and one SLO with no data (its SLI, budget
and burn rates are null: last in either order)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.monitor.api.conftest import Api, served_api

# ref-0 fails 1 request in 10 and ref-1 none: the SLIs are 0.95 (both), 0.9 and 1.
MANY_SLOS = """
slos:
  - name: availability
    sli: {kind: availability, errors: [timeout]}
    objective: 0.999
    window: 1d
    alerting: {min_events: 10}
  - name: chat-ref0
    service: chat
    labels: {team: blue}
    sli: {kind: availability, errors: [timeout]}
    selector: {target: ref-0}
    objective: 0.8
    window: 7d
  - name: chat-ref1
    service: chat
    labels: {team: red}
    sli: {kind: availability, errors: [timeout]}
    selector: {target: ref-1}
    objective: 0.99
    window: 30d
  - name: batch-none
    service: batch
    labels: {team: blue}
    sli: {kind: availability, errors: [timeout]}
    selector: {target: nobody}
    objective: 0.9
    window: 1d
  - name: ttft
    sli: {kind: latency, metric: ttft, threshold_seconds: 250ms}
    objective: 0.5
    window: 30d
"""


@contextmanager
def served_many(tmp_path: Path) -> Iterator[Api]:
    with served_api(tmp_path, MANY_SLOS) as served:
        yield served
