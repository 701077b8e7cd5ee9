import random

import pytest
from prometheus_client import CollectorRegistry, Histogram, generate_latest

from exporters.fast_histogram import SingleWriterHistogram

BOUNDS = (0.001, 0.0025, 0.005, 0.01, 0.1, 1.0)


def samples(registry: CollectorRegistry) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in registry.collect() for s in family.samples
            if not s.name.endswith("_created")}


def test_exports_exactly_what_prometheus_client_would():
    values = [0.001, 0.0025, 0.0049, 0.5, 1.0, 1.5, 0.0] + \
        [random.Random(1).lognormvariate(-4, 1.5) for _ in range(2000)]
    ours, theirs = CollectorRegistry(), CollectorRegistry()
    fast = SingleWriterHistogram("x_seconds", "help", ["model"], BOUNDS, ours)
    slow = Histogram("x_seconds", "help", ["model"], buckets=BOUNDS, registry=theirs)
    for v in values:
        fast.labels("m").observe(v)
        slow.labels("m").observe(v)
    assert samples(ours) == pytest.approx(samples(theirs))
    # A value equal to a bound counts in that bound's bucket (le semantics).
    assert ours.get_sample_value("x_seconds_bucket", {"model": "m", "le": "0.001"}) == \
        sum(1 for v in values if v <= 0.001)
    assert b'x_seconds_bucket{le="+Inf",model="m"} 2007.0' in generate_latest(ours)


def test_label_arity_and_empty_bounds_are_refused():
    registry = CollectorRegistry()
    h = SingleWriterHistogram("y", "help", ["model", "stage"], BOUNDS, registry)
    with pytest.raises(ValueError, match="expected labels"):
        h.labels("only-one")
    with pytest.raises(ValueError, match="at least one finite"):
        SingleWriterHistogram("z", "help", [], [float("inf")], CollectorRegistry())
