import pytest

from reference_server.faults import FaultKind
from reference_server.sampling import SamplingParams

from .conftest import drain

PROMPTS = [[256] + list(range(10 + 7 * i, 10 + 7 * i + n)) for i, n in
           enumerate([5, 40, 17, 90, 3, 61])]


def greedy(max_tokens=12, **kw) -> SamplingParams:
    return SamplingParams(max_tokens=max_tokens, temperature=0.0, ignore_eos=True, **kw)


def run_all(engine, prompts, params_for=lambda i: greedy()):
    for i, p in enumerate(prompts):
        engine.add_request(f"r{i}", p, params_for(i))
    return drain(engine)


def alone(make_engine, prompt, params):
    engine, _ = make_engine()
    engine.add_request("solo", prompt, params)
    return drain(engine)["solo"]


def test_batched_greedy_output_equals_each_request_run_alone(make_engine):
    engine, _ = make_engine()
    batched = run_all(engine, PROMPTS)
    for i, p in enumerate(PROMPTS):
        assert batched[f"r{i}"].token_ids == alone(make_engine, p, greedy()).token_ids
        assert batched[f"r{i}"].finish_reason == "length"
        assert len(batched[f"r{i}"].token_ids) == 12


def test_seeded_sampling_does_not_depend_on_the_batch(make_engine):
    def params(i: int) -> SamplingParams:
        return SamplingParams(max_tokens=10, temperature=1.0, top_p=0.9, seed=100 + i,
                              ignore_eos=True)

    engine, _ = make_engine()
    batched = run_all(engine, PROMPTS, params)
    for i, p in enumerate(PROMPTS):
        assert batched[f"r{i}"].token_ids == alone(make_engine, p, params(i)).token_ids


SHORT_PROMPTS = [[256] + list(range(30 + i, 36 + i)) for i in range(8)]


@pytest.mark.parametrize(("overrides", "prompts", "max_tokens"), [
    ({"num_kv_blocks": 24, "block_size": 4}, SHORT_PROMPTS, 40),   # outputs outgrow the pool
    ({"max_num_batched_tokens": 16}, PROMPTS, 12),
    ({"batching": "static", "max_num_seqs": 4, "static_batch_timeout_seconds": 0.0},
     PROMPTS, 12),
    ({"enable_prefix_caching": False, "max_num_seqs": 2}, PROMPTS, 12),
], ids=["preemption-by-recompute", "chunked-prefill", "static-batching", "small-batches"])
def test_scheduling_policy_does_not_change_greedy_output(make_engine, overrides, prompts,
                                                         max_tokens):
    def params(i: int) -> SamplingParams:
        return greedy(max_tokens)

    reference, _ = make_engine()
    expected = run_all(reference, prompts, params)
    engine, registry = make_engine(**overrides)
    got = run_all(engine, prompts, params)
    for rid, r in expected.items():
        assert got[rid].token_ids == r.token_ids, rid
        assert len(r.token_ids) == max_tokens
    assert engine.block_manager.num_used_blocks == 0
    if "num_kv_blocks" in overrides:
        assert registry.get_sample_value("gen_ai_server_preemptions_total",
                                         {"model": "tiny"}) > 0


def test_prefix_cache_hit_gives_the_same_output(make_engine):
    engine, registry = make_engine()
    prompt = PROMPTS[3]
    engine.add_request("first", prompt, greedy())
    first = drain(engine)["first"]
    engine.add_request("second", prompt, greedy())
    second = drain(engine)["second"]
    assert second.num_cached_tokens == (len(prompt) - 1) // 16 * 16 > 0
    assert second.token_ids == first.token_ids
    assert registry.get_sample_value("gen_ai_server_prompt_tokens_cached_total",
                                     {"model": "tiny"}) == second.num_cached_tokens


def test_stop_token_id_ends_generation_without_its_text(make_engine):
    engine, _ = make_engine()
    full = run_all(engine, [PROMPTS[0]])["r0"].token_ids
    stop_at = full[4]
    engine.add_request("s", PROMPTS[0], greedy(stop_token_ids=(stop_at,)))
    r = drain(engine)["s"]
    assert r.finish_reason == "stop"
    assert r.token_ids == full[: full.index(stop_at) + 1]


def test_eos_stops_unless_ignore_eos(make_engine):
    engine, _ = make_engine()
    full = run_all(engine, [PROMPTS[1]])["r0"].token_ids
    engine.tokenizer.eos_token_ids = (full[2],)
    engine.add_request("eos", PROMPTS[1], SamplingParams(max_tokens=12, temperature=0.0))
    assert drain(engine)["eos"].finish_reason == "stop"


def test_request_timeout_fails_only_late_requests(make_engine):
    engine, registry = make_engine(request_timeout_seconds=5.0)
    engine.add_request("late", PROMPTS[0], greedy(), arrival_time=engine.clock() - 10.0)
    engine.add_request("fresh", PROMPTS[0], greedy(max_tokens=2))
    results = drain(engine)
    assert (results["late"].finish_reason, results["late"].error_type) == ("timeout", "timeout")
    assert results["fresh"].finish_reason == "length"
    assert registry.get_sample_value("gen_ai_server_request_errors_total",
                                     {"model": "tiny", "error_type": "timeout"}) == 1


def test_injected_error_rate_fails_requests_with_model_error(make_engine):
    engine, registry = make_engine()
    engine.faults.add(FaultKind.ERROR_RATE, 1.0, 60)
    results = run_all(engine, PROMPTS[:3])
    assert {r.error_type for r in results.values()} == {"model_error"}
    engine.faults.clear()
    engine.add_request("after", PROMPTS[0], greedy())
    assert drain(engine)["after"].finish_reason == "length"
    assert registry.get_sample_value("gen_ai_server_request_errors_total",
                                     {"model": "tiny", "error_type": "model_error"}) == 3


def test_an_exception_in_one_step_fails_only_its_requests(make_engine, monkeypatch):
    engine, _ = make_engine()
    real_execute = engine.runner.execute
    calls = {"n": 0}

    def flaky(scheduled):
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("boom")
        return real_execute(scheduled)

    monkeypatch.setattr(engine.runner, "execute", flaky)
    engine.add_request("victim", PROMPTS[0], greedy())
    results = drain(engine)
    assert results["victim"].error_type == "model_error"
    engine.add_request("survivor", PROMPTS[0], greedy())
    assert drain(engine)["survivor"].finish_reason == "length"
    assert engine.block_manager.num_used_blocks == 0


def test_kv_squeeze_causes_preemptions_but_everything_finishes(make_engine):
    engine, registry = make_engine(num_kv_blocks=64, block_size=4)
    engine.faults.add(FaultKind.KV_SQUEEZE, 0.5, 60)  # each request still fits alone
    results = run_all(engine, PROMPTS, lambda i: greedy(max_tokens=24))
    assert all(r.finish_reason == "length" for r in results.values())
    assert registry.get_sample_value("gen_ai_server_preemptions_total", {"model": "tiny"}) > 0


def test_abort_mid_generation_frees_blocks(make_engine):
    engine, registry = make_engine()
    engine.add_request("a", PROMPTS[3], greedy(max_tokens=50))
    for _ in range(3):
        engine.step()
    assert engine.block_manager.num_used_blocks > 0
    out = engine.abort_request("a")
    assert out is not None and out.finish_reason == "abort"
    assert engine.block_manager.num_used_blocks == 0 and not engine.has_unfinished_requests()


@pytest.mark.parametrize(("prompt_len", "max_tokens", "param"), [
    (0, 4, "prompt"), (2048, 1, "prompt"), (2000, 100, "max_tokens"),
], ids=["empty-prompt", "prompt-fills-context", "max-tokens-past-context"])
def test_requests_that_cannot_fit_are_refused_naming_the_field(make_engine, prompt_len,
                                                              max_tokens, param):
    from reference_server.errors import InvalidRequest
    engine, _ = make_engine()
    with pytest.raises(InvalidRequest) as err:
        engine.add_request("x", [1] * prompt_len, greedy(max_tokens=max_tokens))
    assert err.value.param == param


def test_engine_metrics_count_tokens_and_latencies(make_engine):
    engine, registry = make_engine()
    results = run_all(engine, PROMPTS[:4])
    labels = {"model": "tiny"}
    assert registry.get_sample_value("gen_ai_server_generation_tokens_total", labels) == 48
    assert registry.get_sample_value("gen_ai_server_prompt_tokens_total", labels) == \
        sum(len(p) for p in PROMPTS[:4])
    assert registry.get_sample_value("gen_ai_server_time_to_first_token_seconds_count",
                                     labels) == 4
    assert registry.get_sample_value("gen_ai_server_inter_token_latency_seconds_count",
                                     labels) == 4 * 11
    assert registry.get_sample_value("gen_ai_server_requests_total",
                                     {**labels, "finish_reason": "length"}) == len(results)
    assert registry.get_sample_value("gen_ai_server_requests_running", labels) == 0
