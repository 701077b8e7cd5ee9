"""The gateway's own /metrics: exact good/total by model, tenant, SLO class and outcome."""

from __future__ import annotations

import httpx

from monitor.gateway.tenants import budget_rule
from tests.monitor.gateway.conftest import Through

CHAT = "/v1/chat/completions"
BODY = {"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "stream": True}


def post(through: Through, key: str, **headers: str) -> httpx.Response:
    return httpx.post(through.url + CHAT, json=BODY, timeout=10,
                      headers={"authorization": f"Bearer {key}", **headers})


def test_good_and_total_count_each_request_once_by_its_labels(through: Through):
    through.upstream.script.num_chunks, through.upstream.script.interval = 3, 0.02
    for _ in range(3):
        post(through, "key-one")
    post(through, "key-two", **{"x-slo-itl-ms": "5"})  # 20 ms gaps: over the target
    through.upstream.script.status = 429
    post(through, "key-one")
    events = through.wait_events(5)
    one, two = events[0].tenant, events[3].tenant
    total = "inferwatch_gateway_requests_total"
    good = "inferwatch_gateway_good_requests_total"
    interactive = {"model": "tiny", "slo_class": "interactive"}
    assert through.sample(total, tenant=one, outcome="ok", **interactive) == 3
    assert through.sample(total, tenant=one, outcome="refused", **interactive) == 1
    assert through.sample(good, tenant=one, **interactive) == 3
    custom = {"model": "tiny", "slo_class": "custom", "tenant": two}
    assert through.sample(total, outcome="ok", **custom) == 1
    assert through.sample(good, **custom) == 0
    assert through.sample("inferwatch_gateway_generation_tokens_total", tenant=one,
                          **interactive) == 9
    assert through.sample("inferwatch_gateway_inter_token_latency_seconds_count",
                          model="tiny", slo_class="interactive") == 6  # 2 gaps x 3 requests


def test_the_page_states_the_tenant_budget_in_its_help(through: Through):
    post(through, "key-one")
    through.wait_events(1)
    page = httpx.get(through.url + "/metrics", timeout=10).text
    assert "# HELP inferwatch_gateway_requests_total Requests that went" in page
    assert budget_rule(20) in page
    assert 'inferwatch_gateway_time_to_first_token_seconds_bucket{le="0.0001"' in page \
        or "inferwatch_gateway_time_to_first_token_seconds_bucket{" in page


def test_a_refused_model_name_never_answered_ok_is_counted_as_unknown(through: Through):
    through.upstream.script.status = 404
    httpx.post(through.url + CHAT, json={**BODY, "model": "typo-1234"}, timeout=10)
    through.wait_events(1)
    assert through.sample("inferwatch_gateway_requests_total", model="unknown",
                          tenant="anonymous", slo_class="interactive", outcome="refused") == 1
    assert "typo-1234" not in httpx.get(through.url + "/metrics", timeout=10).text
