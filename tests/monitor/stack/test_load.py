"""The demo's load: a rate that rises to its peak mid-run and falls back, drawn as Poisson."""

import math

import numpy as np
import pytest

from monitor.stack.load import LoadShape, arrival_times, demo_requests

SHAPE = LoadShape(low_rps=1.0, peak_rps=5.0, duration_seconds=600.0)


@pytest.mark.parametrize("t, expected", [
    (0.0, 1.0), (150.0, 1.0 + 4.0 * math.sin(math.pi / 4)), (300.0, 5.0),
    (450.0, 1.0 + 4.0 * math.sin(3 * math.pi / 4)), (600.0, 1.0), (-5.0, 1.0), (700.0, 1.0),
], ids=["start", "quarter", "middle", "three-quarters", "end", "before", "after"])
def test_the_rate_rises_to_the_peak_mid_run_and_falls_back(t, expected):
    assert SHAPE.rate(t) == pytest.approx(expected)


def test_the_rate_only_rises_in_the_first_half_and_only_falls_in_the_second():
    rates = [SHAPE.rate(t) for t in range(0, 601, 10)]
    assert rates[:31] == sorted(rates[:31])
    assert rates[30:] == sorted(rates[30:], reverse=True)


def test_arrivals_follow_the_rate_quarter_by_quarter():
    # Expected counts are the integral of the rate: low * T/4, plus (peak - low) * T/pi *
    # (1 - cos(pi/4)) = 0.29 * 764 in an outer quarter, or cos(pi/4) * 764 in an inner one:
    # 150 + 224 = 374 and 150 + 540 = 690.
    times = np.array(list(arrival_times(SHAPE, np.random.default_rng(7))))
    quarters = np.histogram(times, bins=[0, 150, 300, 450, 600])[0]
    outer = 150 + 4 * 600 / math.pi * (1 - math.cos(math.pi / 4))
    inner = 150 + 4 * 600 / math.pi * math.cos(math.pi / 4)
    for count, expected in zip(quarters, [outer, inner, inner, outer]):
        assert abs(count - expected) < 4 * math.sqrt(expected)  # Poisson: 4 sigma
    assert quarters[1] > quarters[0] and quarters[2] > quarters[3]
    assert times.max() < 600 and np.all(np.diff(times) > 0)


def test_the_same_seed_gives_the_same_requests():
    first = [(r.arrival_seconds, r.prompt, r.max_tokens) for r, _ in
             zip(demo_requests(SHAPE, seed=3), range(50))]
    again = [(r.arrival_seconds, r.prompt, r.max_tokens) for r, _ in
             zip(demo_requests(SHAPE, seed=3), range(50))]
    other = [r.arrival_seconds for r, _ in zip(demo_requests(SHAPE, seed=4), range(50))]
    assert first == again
    assert [a for a, _, _ in first] != other


def test_prompts_are_as_many_bytes_as_their_intended_tokens():
    for request, _ in zip(demo_requests(SHAPE, seed=0), range(20)):
        assert len(request.prompt) == request.input_tokens  # byte-level tokenizer
        assert request.max_tokens >= 1 and request.messages is None


@pytest.mark.parametrize("low, peak, duration", [(0, 5, 60), (6, 5, 60), (1, 5, 0)],
                         ids=["no-low-rate", "low-above-peak", "no-duration"])
def test_a_shape_that_cannot_work_is_refused(low, peak, duration):
    with pytest.raises(ValueError):
        LoadShape(low, peak, duration)
