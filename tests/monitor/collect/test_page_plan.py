"""A page read through its plan gives exactly what the full path (parse, normalize, read_page)
gives, on every recorded engine page in tests/fixtures/engines, with new values of the same
shape; and a page the plan cannot take (a new series, a value the parser refuses) falls back
to the full path."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from exporters.exposition import parse_page
from exporters.fetch import ScrapeError
from monitor.collect.config import MonitorConfig, TargetConfig
from monitor.collect.page_plan import PageReader, page_shape
from monitor.collect.scrape import Reading, normalize_text, read_page

ENGINES = Path(__file__).resolve().parents[2] / "fixtures" / "engines"
MAX_BYTES = 10 * 2**20
TABLES = {"dcgm-exporter": "dcgm", "llamacpp": "llamacpp", "sglang": "sglang", "triton": "triton",
          "trtllm": "triton", "vllm": "vllm"}  # TensorRT-LLM is served by Triton
# (file, exposition lines only): a doc excerpt keeps its shell prompt and "..." lines, so it is
# read with a problem and never planned; without them (the lines the parser refuses dropped)
# it is planned like a live page.
CASES = [(path.name, cleaned) for path in sorted(ENGINES.glob("*.prom"))
         for cleaned in (False, True)]


def target_for(name: str) -> TargetConfig:
    engine = next(table for prefix, table in TABLES.items() if name.startswith(prefix))
    config = MonitorConfig.model_validate(
        {"targets": [{"name": "t", "url": "http://127.0.0.1:9/metrics", "engine": engine}]})
    return config.targets[0]


def exposition_lines(text: str) -> str:
    refused = {problem.line for problem in parse_page(text, "page").problems}
    return "\n".join(line for number, line in enumerate(text.split("\n"), start=1)
                     if number not in refused)


def full_path(text: str, target: TargetConfig) -> Reading:
    return read_page(normalize_text(text, target, MAX_BYTES))


def same(planned: Reading, full: Reading) -> None:
    """Equal to the last bit (repr tells -0.0 from 0.0) and in the same order."""
    assert repr(planned) == repr(full)
    assert planned == full


def revalued(text: str, seed: int) -> str:
    """The page with every sample's value replaced, its shape kept."""
    shaped = page_shape(text)
    assert shaped is not None
    rng = random.Random(seed)
    out = []
    for line, (is_sample, prefix) in zip(text.split("\n"), shaped[0]):
        if not is_sample:
            out.append(line)
            continue
        value = rng.choice([rng.uniform(0, 1e6), float(rng.randrange(10**9)), rng.random(),
                            0.0, -0.0, 1e-7])
        out.append(f"{prefix}{value!r}")
    return "\n".join(out)


@pytest.mark.parametrize(("name", "cleaned"), CASES,
                         ids=[f"{n}{' lines kept' if c else ''}" for n, c in CASES])
def test_a_page_read_through_its_plan_is_the_full_paths_reading(name: str, cleaned: bool) -> None:
    text = (ENGINES / name).read_text(encoding="utf-8")
    text = exposition_lines(text) if cleaned else text
    target, reader = target_for(name), PageReader(target_for(name))
    try:
        expected = full_path(text, target)
    except ScrapeError as exc:  # an excerpt with nothing of the table on it: the same error
        with pytest.raises(ScrapeError) as raised:
            reader.read(text, MAX_BYTES)
        assert (raised.value.reason, str(raised.value)) == (exc.reason, str(exc))
        return
    same(reader.read(text, MAX_BYTES), expected)
    same(reader.read(text, MAX_BYTES), expected)  # the second of a shape plans it
    problems = parse_page(text, name).problems
    if page_shape(text) is None:
        assert problems  # a line that does not end in a value is one the parser refuses
        return
    for seed in range(3):
        page = revalued(text, seed)
        same(reader.read(page, MAX_BYTES), full_path(page, target))
    assert reader.num_planned == (0 if problems else 3), reader


LIVE_VLLM = ENGINES / "vllm-0.32-cpu-live.prom"


def planned_reader() -> tuple[PageReader, str]:
    text = LIVE_VLLM.read_text(encoding="utf-8")
    reader = PageReader(target_for("vllm"))
    reader.read(text, MAX_BYTES)
    reader.read(text, MAX_BYTES)
    return reader, text


@pytest.mark.parametrize(("value", "planned"), [
    ("NaN", False), ("+Inf", False), ("1_000", False), ("0x10", False), ("1e300", True),
], ids=["NaN", "Inf", "underscore", "hex", "large but finite"])
def test_a_value_the_plan_cannot_take_is_read_the_full_way(value: str, planned: bool) -> None:
    reader, text = planned_reader()
    lines = text.split("\n")
    line = next(i for i, line in enumerate(lines) if line.startswith("vllm:num_requests_running"))
    lines[line] = lines[line].rsplit(" ", 1)[0] + " " + value
    page = "\n".join(lines)
    same(reader.read(page, MAX_BYTES), full_path(page, target_for("vllm")))
    assert (reader.num_planned, reader.num_full) == ((1, 2) if planned else (0, 3))


def test_a_new_series_is_read_the_full_way_and_the_plan_follows_the_new_shape() -> None:
    reader, text = planned_reader()
    page = text.replace('vllm:num_requests_running{engine="0",model_name="tiny"} 0.0',
                        'vllm:num_requests_running{engine="0",model_name="tiny"} 0.0\n'
                        'vllm:num_requests_running{engine="1",model_name="tiny"} 2.0')
    assert page != text
    for _ in range(3):
        same(reader.read(page, MAX_BYTES), full_path(page, target_for("vllm")))
    assert (reader.num_full, reader.num_planned) == (4, 1)
