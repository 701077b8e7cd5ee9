"""Workloads: arrival processes, length distributions, prompts files, reproducibility."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import numpy as np
import pytest

from monitor.loadgen.workload import (
    Arrival,
    LengthDist,
    WorkloadError,
    WorkloadSpec,
    arrival_offsets,
    load_prompts,
)


@pytest.mark.parametrize("text, kind, mean", [
    ("fixed:128", "fixed", 128), ("128", "fixed", 128), ("uniform:10-30", "uniform", 20),
    ("lognormal:256", "lognormal", 256), ("lognormal:64,0.3", "lognormal", 64)])
def test_length_distributions_sample_their_mean(text: str, kind: str, mean: float) -> None:
    dist = LengthDist.parse(text)
    values = dist.sample(np.random.default_rng(1), 20000)
    assert dist.kind == kind and values.min() >= 1
    assert values.mean() == pytest.approx(mean, rel=0.03)
    if kind == "uniform":
        assert values.min() == 10 and values.max() == 30


@pytest.mark.parametrize("text, message", [
    ("normal:5", "is not fixed:N"), ("uniform:30-10", "LO <= HI"), ("fixed:0", ">= 1 token"),
    ("lognormal:5,-1", "SIGMA must be >= 0"), ("uniform:a-b", "cannot read numbers")])
def test_bad_lengths_are_named(text: str, message: str) -> None:
    with pytest.raises(WorkloadError, match=f"--input-len: .*{message}"):
        LengthDist.parse(text, "--input-len")


@pytest.mark.parametrize("kind, burstiness, cv", [
    (Arrival.POISSON, 1.0, 1.0), (Arrival.GAMMA, 0.25, 2.0), (Arrival.GAMMA, 4.0, 0.5),
    (Arrival.CONSTANT, 1.0, 0.0)])
def test_arrivals_have_the_rate_and_burstiness(kind: Arrival, burstiness: float,
                                               cv: float) -> None:
    offsets = arrival_offsets(kind, 5.0, 20001, np.random.default_rng(2), burstiness)
    gaps = np.diff(offsets)
    assert offsets[0] == 0 and gaps.mean() == pytest.approx(0.2, rel=0.03)
    assert gaps.std() / gaps.mean() == pytest.approx(cv, abs=0.05)


def test_infinite_rate_sends_everything_at_once_and_bad_rates_are_refused() -> None:
    assert not arrival_offsets("poisson", math.inf, 5, np.random.default_rng(0)).any()
    with pytest.raises(WorkloadError, match="rate must be > 0"):
        arrival_offsets("poisson", 0.0, 5, np.random.default_rng(0))


def test_a_seed_reproduces_the_stream_and_any_prefix() -> None:
    spec = WorkloadSpec(seed=7)
    long = spec.requests(1500, 10.0)            # crosses a chunk boundary
    assert spec.requests(1500, 10.0) == long
    assert list(itertools.islice(spec.stream(10.0), 1100)) == long[:1100]
    assert WorkloadSpec(seed=8).requests(10, 10.0) != long[:10]
    offsets = [s.arrival_seconds for s in long]
    assert offsets == sorted(offsets)
    assert len(long) / offsets[-1] == pytest.approx(10.0, rel=0.1)


def test_synthetic_prompts_have_about_the_asked_length() -> None:
    bytes_spec = WorkloadSpec(input_len=LengthDist("fixed", 100), chars_per_token=1.0)
    assert all(len(s.prompt) == 100 for s in bytes_spec.requests(20, 1.0))
    bpe = WorkloadSpec(input_len=LengthDist("fixed", 100), chars_per_token=4.0)
    assert all(90 <= len(s.prompt.split()) <= 110 for s in bpe.requests(20, 1.0))
    chat = WorkloadSpec(chat=True).requests(3, 1.0)
    assert all(s.messages and s.messages[0]["role"] == "user" for s in chat)


def test_prompts_file(tmp_path: Path) -> None:
    path = tmp_path / "prompts.jsonl"
    path.write_text('# comment\n{"prompt": "hello", "max_tokens": 5}\n\n'
                    '{"messages": [{"role": "user", "content": "hi"}]}\n')
    prompts = load_prompts(path)
    assert len(prompts) == 2 and prompts[0].max_tokens == 5
    specs = WorkloadSpec(prompts=prompts, output_len=LengthDist("fixed", 9)).requests(50, 5.0)
    assert {s.prompt for s in specs} == {"hello", ""}
    assert all(s.max_tokens == 5 for s in specs if s.prompt == "hello")
    assert all(s.max_tokens == 9 and s.messages for s in specs if s.prompt == "")


@pytest.mark.parametrize("line, message", [
    ("not json", "not JSON"), ("[1, 2]", "expected an object"), ('{"x": 1}', "needs a non-empty"),
    ('{"prompt": "a", "max_tokens": 0}', "max_tokens must be a positive integer"),
    ('{"messages": ["hi"]}', "messages must be")])
def test_a_bad_prompts_line_is_named(tmp_path: Path, line: str, message: str) -> None:
    path = tmp_path / "p.jsonl"
    path.write_text('{"prompt": "fine"}\n' + line + "\n")
    with pytest.raises(WorkloadError, match=f"p.jsonl:2: {message}"):
        load_prompts(path)


def test_missing_or_empty_prompts_file(tmp_path: Path) -> None:
    with pytest.raises(WorkloadError, match="cannot read prompts"):
        load_prompts(tmp_path / "nope.jsonl")
    (tmp_path / "empty.jsonl").write_text("\n")
    with pytest.raises(WorkloadError, match="no prompts"):
        load_prompts(tmp_path / "empty.jsonl")
