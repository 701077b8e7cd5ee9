"""A young SLO (issue 30): a 30-day TTFT SLO over a store that holds ten minutes of data, two
targets scraped every 15 s, 10 requests per scrape, 6 of 10 first tokens within 250 ms (the
store builders' histogram); and ``idle``, an SLO of no target, without events. Served as the
API fixture serves its store, evaluated once.

Worked out by hand: 2 targets x 40 scrapes x 10 requests = 800 events, SLI 0.6, error budget
0.01, so 1 - 0.4 / 0.01 = -39 (-3900%) of the budget of the events seen; and the history seen
begins with the minute that holds the first scrape, 10 minutes before the last scrape's end.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from monitor.api import create_app
from tests.asgi_thread import serving
from tests.monitor.api.conftest import CONFIG, TOKEN, Api, build_state
from tests.monitor.store.builders import SCRAPE_SECONDS, up

YOUNG_SLOS = """
slos:
  - name: young-ttft
    sli: {kind: latency, metric: ttft, threshold_seconds: 250ms}
    objective: 0.99
    window: 30d
  - name: idle
    sli: {kind: availability, errors: [timeout]}
    selector: {target: nobody}
    objective: 0.99
    window: 30d
"""
NUM_SCRAPES = 40          # ten minutes
EVENTS = 2 * NUM_SCRAPES * 10
SLI = 0.6
BUDGET_REMAINING = 1 - (1 - SLI) / 0.01


@contextmanager
def served_young(tmp_path: Path) -> Iterator[tuple[Api, float]]:
    """The young SLO's API, and the start of the first minute with data (Unix seconds)."""
    state = build_state(tmp_path, TOKEN, YOUNG_SLOS, CONFIG)
    now = time.time()
    end = math.floor(now / 60) * 60 - 60   # whole minutes, settled
    ends = [end - k * SCRAPE_SECONDS for k in range(NUM_SCRAPES)][::-1]
    state.store.write([up(target, t) for t in ends for target in ("ref-0", "ref-1")])
    assert state.alerting is not None
    state.alerting.evaluate(now)
    with serving(create_app(state)) as url:
        # The first scrape, (end - 600, end - 585], is in the minute beginning at end - 600.
        yield Api(url, state, now), end - 600
    state.store.close()
