"""Good or bad at the edge, per SLO class; classes from YAML and from headers."""

from __future__ import annotations

from pathlib import Path

import pytest

from monitor.gateway.judge import (
    SloClass,
    SloClasses,
    SloConfigError,
    load_slo_classes,
    parse_slo_classes,
)
from monitor.gateway.measure import RequestTiming

INTERACTIVE = SloClass("interactive", ttft_seconds=0.5, itl_seconds=0.05)


def timing(ttft: float, e2e: float, tokens: int) -> RequestTiming:
    return RequestTiming(arrived_at=0.0, first_token_at=ttft, finished_at=e2e,
                         num_token_chunks=tokens, completion_tokens=tokens)


@pytest.mark.parametrize(("ok", "ttft", "e2e", "tokens", "good"), [
    (True, 0.4, 0.4 + 0.04 * 10, 11, True),     # TPOT 40 ms
    (True, 0.5, 0.5 + 0.05 * 10, 11, True),     # exactly on both targets
    (True, 0.6, 0.7, 11, False),                 # TTFT over
    (True, 0.4, 0.4 + 0.06 * 10, 11, False),    # TPOT 60 ms over
    (True, 0.4, 5.0, 1, True),                   # one token: no TPOT to judge
    (False, 0.1, 0.2, 11, False),                # failed
], ids=["inside", "on-the-targets", "ttft-over", "tpot-over", "one-token", "failed"])
def test_a_request_is_good_when_it_succeeds_within_both_targets(
        ok: bool, ttft: float, e2e: float, tokens: int, good: bool):
    assert INTERACTIVE.is_good(ok, timing(ttft, e2e, tokens)) is good


CLASSES = SloClasses({"interactive": INTERACTIVE, "batch": SloClass("batch", 30.0, 0.5)},
                     default="interactive")


@pytest.mark.parametrize(("headers", "expected"), [
    ({}, INTERACTIVE),
    ({"x-slo-class": "batch"}, SloClass("batch", 30.0, 0.5)),
    ({"x-slo-class": "nope"}, INTERACTIVE),
    ({"x-slo-ttft-ms": "200"}, SloClass("custom", 0.2, 0.05)),
    ({"x-slo-class": "batch", "x-slo-itl-ms": "20"}, SloClass("custom", 30.0, 0.02)),
    ({"x-slo-ttft-ms": "fast"}, INTERACTIVE),
], ids=["default", "named", "unknown-name", "ttft-header", "class-and-itl-header",
        "bad-header-ignored"])
def test_the_class_of_a_request_comes_from_its_headers(headers: dict[str, str],
                                                       expected: SloClass):
    assert CLASSES.for_request(headers) == expected


def test_the_packaged_classes_load():
    classes = load_slo_classes()
    assert classes.default == "interactive"
    assert classes.classes["interactive"] == SloClass("interactive", 1.0, 0.1)


@pytest.mark.parametrize("data", [
    {"classes": {}},
    {"classes": {"a": {"ttft_ms": -1}}},
    {"classes": {"a": {"p99_ms": 1}}},
    {"classes": {"a": {"ttft_ms": 1}}, "default": "b"},
    {"classes": {"custom": {"ttft_ms": 1}}},
], ids=["no-classes", "negative-target", "unknown-key", "unknown-default", "reserved-name"])
def test_bad_class_files_are_refused_with_where(data: object):
    with pytest.raises(SloConfigError, match="classes.yaml|custom|default"):
        parse_slo_classes(data, "classes.yaml")


def test_a_missing_file_says_which(tmp_path: Path):
    with pytest.raises(SloConfigError, match="nothere.yaml"):
        load_slo_classes(tmp_path / "nothere.yaml")
