import asyncio
import json
import re

import httpx
import openai
import pytest

from .server_fixture import ADMIN_TOKEN, running_server

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}


@pytest.fixture(scope="module")
def srv():
    with running_server(max_queue=64) as s:
        yield s


@pytest.fixture
def client(srv):
    return openai.OpenAI(base_url=f"{srv.url}/v1", api_key="unused", max_retries=0)


def test_models_and_health(srv):
    assert httpx.get(f"{srv.url}/health").json() == {"status": "ok"}
    models = openai.OpenAI(base_url=f"{srv.url}/v1", api_key="x").models.list()
    assert [m.id for m in models.data] == ["tiny"]


def test_openai_client_completion(client):
    resp = client.completions.create(model="tiny", prompt="Hello there", max_tokens=7,
                                     temperature=0, extra_body={"ignore_eos": True})
    assert resp.choices[0].finish_reason == "length"
    assert resp.usage.completion_tokens == 7
    assert resp.usage.prompt_tokens == len("Hello there") + 1   # bytes + BOS


def test_openai_client_streaming_with_usage(client):
    stream = client.completions.create(
        model="tiny", prompt="Hello there", max_tokens=6, temperature=0, stream=True,
        stream_options={"include_usage": True}, extra_body={"ignore_eos": True})
    chunks = list(stream)
    text_chunks = [c for c in chunks if c.choices]
    assert len(text_chunks) == 6
    assert text_chunks[-1].choices[0].finish_reason == "length"
    assert chunks[-1].usage.completion_tokens == 6 and not chunks[-1].choices
    # Streaming and not give the same greedy text.
    full = client.completions.create(model="tiny", prompt="Hello there", max_tokens=6,
                                     temperature=0, extra_body={"ignore_eos": True})
    assert "".join(c.choices[0].text for c in text_chunks) == full.choices[0].text


def test_openai_client_chat_streaming_and_not(client):
    messages = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]
    resp = client.chat.completions.create(model="tiny", messages=messages, max_tokens=5,
                                          temperature=0, extra_body={"ignore_eos": True})
    assert resp.choices[0].message.role == "assistant"
    assert resp.usage.completion_tokens == 5
    chunks = list(client.chat.completions.create(
        model="tiny", messages=messages, max_tokens=5, temperature=0, stream=True,
        extra_body={"ignore_eos": True}))
    assert chunks[0].choices[0].delta.role == "assistant"
    assert chunks[-1].choices[0].finish_reason == "length"
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == \
        resp.choices[0].message.content


def test_seed_makes_sampling_reproducible(client):
    kw = dict(model="tiny", prompt="abc", max_tokens=8, temperature=1.0, seed=7,
              extra_body={"ignore_eos": True})
    a = client.completions.create(**kw).choices[0].text
    b = client.completions.create(**kw).choices[0].text
    assert a == b


@pytest.mark.parametrize(("body", "param"), [
    ({"prompt": "x" * 3000, "max_tokens": 4}, "prompt"),
    ({"prompt": "hi", "max_tokens": 5000}, "max_tokens"),
    ({"prompt": "hi", "temperature": -1}, "temperature"),
    ({"prompt": "hi", "top_p": 0}, "top_p"),
    ({"prompt": "hi", "n": 2}, "n"),
    ({"max_tokens": 3}, "prompt"),
], ids=["prompt-too-long", "max-tokens-over-context", "bad-temperature", "bad-top-p",
        "n-not-1", "prompt-missing"])
def test_bad_requests_get_400_naming_the_field(srv, body, param):
    resp = httpx.post(f"{srv.url}/v1/completions", json={"model": "tiny", **body})
    assert resp.status_code == 400
    err = resp.json()["error"]
    assert err["param"] == param and err["type"] == "invalid_request_error" and err["message"]


def test_unknown_model_is_404(client):
    with pytest.raises(openai.NotFoundError):
        client.completions.create(model="nope", prompt="hi", max_tokens=2)


def test_fault_admin_requires_the_bearer_token(srv):
    body = {"kind": "latency", "value": 0.01, "duration_seconds": 5}
    assert httpx.post(f"{srv.url}/admin/faults", json=body).status_code == 401
    assert httpx.post(f"{srv.url}/admin/faults", json=body,
                      headers={"Authorization": "Bearer wrong"}).status_code == 401
    bad = httpx.post(f"{srv.url}/admin/faults", json={**body, "kind": "meteor"}, headers=ADMIN)
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "kind"
    added = httpx.post(f"{srv.url}/admin/faults", json=body, headers=ADMIN)
    assert added.status_code == 200 and 0 < added.json()["remaining_seconds"] <= 5
    listed = httpx.get(f"{srv.url}/admin/faults", headers=ADMIN).json()["faults"]
    assert [f["kind"] for f in listed] == ["latency"]
    assert httpx.delete(f"{srv.url}/admin/faults", headers=ADMIN).json() == {"cleared": 1}


def test_injected_errors_return_500_and_count_as_model_errors(srv, client):
    before = srv.server.registry.get_sample_value(
        "gen_ai_server_request_errors_total", {"model": "tiny", "error_type": "model_error"})
    httpx.post(f"{srv.url}/admin/faults", headers=ADMIN,
               json={"kind": "error_rate", "value": 1.0, "duration_seconds": 30})
    try:
        with pytest.raises(openai.InternalServerError):
            client.completions.create(model="tiny", prompt="hi", max_tokens=3)
        resp = httpx.post(f"{srv.url}/v1/completions", json={
            "model": "tiny", "prompt": "hi", "max_tokens": 3, "stream": True})
        assert resp.status_code == 500 and resp.json()["error"]["code"] == "model_error"
    finally:
        httpx.delete(f"{srv.url}/admin/faults", headers=ADMIN)
    after = srv.server.registry.get_sample_value(
        "gen_ai_server_request_errors_total", {"model": "tiny", "error_type": "model_error"})
    assert after - before == 2
    assert client.completions.create(model="tiny", prompt="hi", max_tokens=2).choices


def test_full_queue_gets_429_with_retry_after():
    with running_server(max_queue=2) as s:
        httpx.post(f"{s.url}/admin/faults", headers=ADMIN,
                   json={"kind": "stall", "duration_seconds": 3})

        async def flood() -> list[httpx.Response]:
            async with httpx.AsyncClient(base_url=s.url, timeout=30) as c:
                body = {"model": "tiny", "prompt": "hi", "max_tokens": 2}
                first = [asyncio.create_task(c.post("/v1/completions", json=body))
                         for _ in range(2)]
                await asyncio.sleep(0.5)          # both are queued behind the stall
                extra = await c.post("/v1/completions", json=body)
                return [extra, *await asyncio.gather(*first)]

        extra, *queued = asyncio.run(flood())
        assert extra.status_code == 429 and extra.headers["Retry-After"] == "1"
        assert extra.json()["error"]["type"] == "rate_limit_error"
        assert [r.status_code for r in queued] == [200, 200]
        assert s.server.registry.get_sample_value(
            "gen_ai_server_request_errors_total", {"model": "tiny", "error_type": "rejected"}) == 1


def test_request_timeout_returns_504():
    with running_server(request_timeout_seconds=0.5) as s:
        httpx.post(f"{s.url}/admin/faults", headers=ADMIN,
                   json={"kind": "latency", "value": 0.2, "duration_seconds": 30})
        resp = httpx.post(f"{s.url}/v1/completions", timeout=30, json={
            "model": "tiny", "prompt": "hi", "max_tokens": 50, "ignore_eos": True})
        assert resp.status_code == 504 and resp.json()["error"]["code"] == "timeout"
        s.wait_idle()


def test_client_disconnect_mid_stream_frees_the_request(srv):
    aborts = {"model": "tiny", "finish_reason": "abort"}
    before = srv.server.registry.get_sample_value("gen_ai_server_requests_total", aborts)
    with httpx.stream("POST", f"{srv.url}/v1/completions", timeout=30, json={
            "model": "tiny", "prompt": "hi", "max_tokens": 500, "ignore_eos": True,
            "stream": True}) as resp:
        for line in resp.iter_lines():
            if line.startswith("data: "):
                assert json.loads(line[6:])["choices"]
                break
    srv.wait_idle()
    after = srv.server.registry.get_sample_value("gen_ai_server_requests_total", aborts)
    assert after - before == 1


def test_metrics_endpoint_serves_the_normalized_schema(srv, client):
    client.completions.create(model="tiny", prompt="hi", max_tokens=3)
    text = httpx.get(f"{srv.url}/metrics").text
    for name in ("gen_ai_server_time_to_first_token_seconds_bucket",
                 "gen_ai_server_generation_tokens_total", "gen_ai_server_kv_cache_usage_ratio",
                 "gen_ai_server_requests_running", "gen_ai_server_batch_size_bucket"):
        assert f'{name}{{' in text, name
    # The GPU collector answers whether or not this machine has a GPU, never failing a scrape.
    assert re.search(r"^gpu_up [01]\.0$", text, re.MULTILINE)
