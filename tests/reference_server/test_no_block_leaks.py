"""1,000 mixed requests over HTTP, including client disconnects, leave no KV block behind."""

import asyncio
import random

import httpx
import pytest

from .server_fixture import running_server

NUM_REQUESTS = 1000
KINDS = ["stream", "complete", "chat_stream", "disconnect_stream", "disconnect_complete",
         "invalid", "stop"]


async def one(client: httpx.AsyncClient, kind: str, rng: random.Random) -> str:
    prompt = "".join(rng.choice("abcdefgh ") for _ in range(rng.randint(1, 120)))
    body = {"model": "tiny", "prompt": prompt, "max_tokens": rng.randint(1, 24),
            "temperature": rng.choice([0.0, 1.0]), "ignore_eos": rng.random() < 0.8}
    if kind == "invalid":
        resp = await client.post("/v1/completions", json={**body, "max_tokens": 10**6})
        return f"http-{resp.status_code}"
    if kind == "stop":
        body["stop"] = [rng.choice("abc")]
    if kind == "chat_stream":
        chat = {**body, "messages": [{"role": "user", "content": prompt}], "stream": True}
        del chat["prompt"]
        async with client.stream("POST", "/v1/chat/completions", json=chat) as resp:
            async for _ in resp.aiter_lines():
                pass
        return f"http-{resp.status_code}"
    if kind in ("stream", "disconnect_stream"):
        body.update(stream=True, max_tokens=rng.randint(30, 200) if kind != "stream"
                    else body["max_tokens"])
        async with client.stream("POST", "/v1/completions", json=body) as resp:
            async for line in resp.aiter_lines():
                if kind == "disconnect_stream" and line.startswith("data: "):
                    return "disconnected"     # leaving the block closes the connection
        return f"http-{resp.status_code}"
    if kind == "disconnect_complete":
        task = asyncio.create_task(client.post("/v1/completions",
                                               json={**body, "max_tokens": 200}))
        await asyncio.sleep(rng.uniform(0.0, 0.3))
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            return "disconnected"
        return f"http-{task.result().status_code}"
    resp = await client.post("/v1/completions", json=body)
    return f"http-{resp.status_code}"


async def drive(url: str) -> dict[str, int]:
    rng = random.Random(1234)
    plan = [rng.choice(KINDS) for _ in range(NUM_REQUESTS)]
    gate = asyncio.Semaphore(48)
    counts: dict[str, int] = {}

    async def guarded(kind: str) -> None:
        async with gate:
            # A fresh client per disconnecting request so a cancelled read cannot poison a
            # pooled connection shared with others.
            async with httpx.AsyncClient(base_url=url, timeout=60) as client:
                outcome = await one(client, kind, rng)
        counts[outcome] = counts.get(outcome, 0) + 1

    await asyncio.gather(*(guarded(k) for k in plan))
    return counts


@pytest.mark.slow
def test_thousand_mixed_requests_leak_no_kv_blocks():
    # A small pool so that preemption happens along the way too.
    with running_server(num_kv_blocks=96, block_size=8, max_num_seqs=32, max_queue=2000) as s:
        counts = asyncio.run(drive(s.url))
        s.wait_idle(timeout=60)
        bm = s.engine.block_manager
        assert bm.num_used_blocks == 0
        assert all(block.ref_count == 0 for block in bm.blocks)
        assert counts.get("disconnected", 0) > 100
        assert counts.get("http-400", 0) > 50
        assert counts.get("http-200", 0) > 400
        assert set(counts) <= {"disconnected", "http-200", "http-400"}, counts
        reg = s.server.registry
        aborted = reg.get_sample_value("gen_ai_server_requests_total",
                                       {"model": "tiny", "finish_reason": "abort"})
        assert aborted > 50
        assert reg.get_sample_value("gen_ai_server_preemptions_total", {"model": "tiny"}) > 0
