"""The headroom in the targets API and on /metrics, over a real store and a real uvicorn."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from monitor.api import ServiceState, create_app
from monitor.api.health import MonitorMetrics, ScrapeObserver
from monitor.api.runs import RunManager
from monitor.service.evaluation import evaluation_loop
from monitor.headroom.metrics import HeadroomCollector
from monitor.store import open_store
from tests.asgi_thread import serving
from tests.monitor.headroom.test_headroom import T0, config, registered, scrape


def test_the_target_shows_its_headroom_and_its_series(tmp_path: Path) -> None:
    cfg = config("{requests_per_second: 4, prompt_tokens_per_second: 320}",
                 "anomaly: {enabled: false}")
    store = open_store(f"sqlite:///{tmp_path / 'store.db'}")
    store.migrate()
    registered(store)
    # a quiet minute, then a prompt-heavy one: 30 requests of 100 prompt tokens a scrape
    store.write([scrape(T0 + 15 * k, requests=15, prompt=750, output=240, running=1,
                        waiting=0) for k in range(1, 5)]
                + [scrape(T0 + 60 + 15 * k, requests=30, prompt=3000, output=480, running=2,
                          waiting=0) for k in range(1, 5)])
    loop = evaluation_loop(cfg, store, [])
    metrics = MonitorMetrics()
    assert loop.headroom is not None
    metrics.registry.register(HeadroomCollector(loop.headroom))
    state = ServiceState(store, lambda: cfg, [], metrics, ScrapeObserver(lambda _s: None,
                         metrics), RunManager(store.engine), loop, None)
    loop.evaluate(T0 + 120)
    try:
        with serving(create_app(state)) as url:
            target = httpx.get(f"{url}/api/v1/targets/ref", timeout=10).json()
            series = httpx.get(f"{url}/api/v1/targets/ref/series", timeout=10, params={
                "metric": "headroom_ratio", "start": T0, "end": T0 + 120, "step": 60}).json()
            text = httpx.get(f"{url}/metrics", timeout=10).text
            alerts = httpx.get(f"{url}/api/v1/alerts", timeout=10).json()
    finally:
        store.close()
    headroom = target["headroom"]
    # 2 of 4 req/s (half left), but 200 of 320 prompt tokens/s: 37.5% left, prefill binding
    assert headroom["headroom_ratio"] == pytest.approx(0.375)
    assert headroom["binding_dimension"] == "prompt_tokens_per_second"
    assert headroom["state"] == "ok" and headroom["capacity_source"] == "configured"
    assert {d["dimension"]: round(d["headroom_ratio"], 3) for d in headroom["dimensions"]} == {
        "requests_per_second": 0.5, "prompt_tokens_per_second": 0.375}
    # the quiet minute: 1 of 4 req/s (75% left), 50 of 320 prompt tokens/s (84% left)
    assert series["unit"] == "ratio"
    assert [round(v, 3) for _, v in series["points"]] == [0.75, 0.375]
    assert ('inferwatch_target_capacity_headroom_ratio{dimension="prompt_tokens_per_second",'
            'target="ref"} 0.375') in text
    assert alerts["total"] == 0   # not below the default 0.2
