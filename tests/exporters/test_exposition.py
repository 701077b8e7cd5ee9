"""parse_page reads real engine pages, and never raises on a broken one."""

from __future__ import annotations

import math
import statistics
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from exporters.exposition import MAX_PROBLEMS_KEPT, ParsedPage, parse_page

from .engine_fixtures import PAGES, parse_fixture, read_fixture


def samples(page: ParsedPage, family: str) -> dict[str, float]:
    """A family's samples as {'name{k=v,...}': value}, labels sorted."""
    return {
        s.name + "{" + ",".join(f"{k}={v}" for k, v in sorted(s.labels.items())) + "}": s.value
        for s in page.families[family].samples
    }


# --- the recorded pages ------------------------------------------------------------------------

# (family, type, number of samples) of every family on each page, worked out from the files.
FAMILIES = {
    "vllm.prom": [
        ("vllm:num_requests_running", "gauge", 1),
        ("vllm:generation_tokens_total", "counter", 1),
        ("vllm:request_success_total", "counter", 3),
        ("vllm:time_to_first_token_seconds", "histogram", 9),  # 8 buckets + _count
    ],
    "vllm-usage-doc.prom": [("vllm:iteration_tokens_total", "histogram", 9)],  # _sum + 8
    "sglang.prom": [
        ("sglang:prompt_tokens_total", "counter", 1),
        ("sglang:generation_tokens_total", "counter", 1),
        ("sglang:token_usage", "gauge", 1),
        ("sglang:cache_hit_rate", "gauge", 1),
        ("sglang:time_to_first_token_seconds", "histogram", 23),  # _sum + 21 buckets + _count
        ("sglang:e2e_request_latency_seconds", "histogram", 18),
        ("sglang:time_per_output_token_seconds", "histogram", 21),
        ("sglang:func_latency_seconds", "histogram", 21),
        ("sglang:num_running_reqs", "gauge", 1),
        ("sglang:num_used_tokens", "gauge", 1),
        ("sglang:gen_throughput", "gauge", 1),
        ("sglang:num_queue_reqs", "gauge", 1),
    ],
    "triton.prom": [
        (name, "counter", 1) for name in (
            "nv_inference_request_success", "nv_inference_request_failure", "nv_inference_count",
            "nv_inference_exec_count", "nv_inference_request_duration_us",
            "nv_inference_queue_duration_us", "nv_inference_compute_input_duration_us",
            "nv_inference_compute_infer_duration_us", "nv_inference_compute_output_duration_us",
        )
    ] + [("nv_inference_pending_request_count", "gauge", 1)],
    "trtllm.prom": [
        ("nv_trt_llm_request_metrics", "gauge", 5),
        ("nv_trt_llm_runtime_memory_metrics", "gauge", 3),
        ("nv_trt_llm_kv_cache_block_metrics", "gauge", 5),
        ("nv_trt_llm_inflight_batcher_metrics", "gauge", 3),
        ("nv_trt_llm_general_metrics", "gauge", 2),
        ("nv_trt_llm_disaggregated_serving_metrics", "counter", 2),
    ],
    "trtllm-v1-model.prom": [("nv_trt_llm_v1_metrics", "gauge", 3)],
    "triton-summary-doc.prom": [("nv_inference_queue_summary_us", "summary", 7)],
    # No HELP/TYPE and no _total: each sample is an untyped family of its own name.
    "triton-counters-doc.prom": [
        ("nv_inference_request_success", "untyped", 1),
        ("nv_inference_queue_duration_us", "untyped", 1),
    ],
    # HELP/TYPE name a family that has no samples; the samples, without _bucket, are untyped.
    "triton-first-response-histogram-doc.prom": [
        ("nv_first_response_histogram_ms", "histogram", 0),
        ("nv_inference_first_response_histogram_ms_count", "untyped", 1),
        ("nv_inference_first_response_histogram_ms_sum", "untyped", 1),
        ("nv_inference_first_response_histogram_ms", "untyped", 5),
    ],
    # MEMORY_TEMP's only sample is DCGM's sentinel, so the family has none.
    "dcgm-exporter.prom": [
        ("DCGM_FI_DEV_SM_CLOCK", "gauge", 1),
        ("DCGM_FI_DEV_MEM_CLOCK", "gauge", 1),
        ("DCGM_FI_DEV_MEMORY_TEMP", "gauge", 0),
    ],
}

# Lines each page has that are not exposition (see the fixtures' README), plus the sentinel.
PROBLEM_LINES = {
    "vllm.prom": [1, 5, 9, 15],
    "vllm-usage-doc.prom": [1, 14],
    "sglang.prom": [1],
    "dcgm-exporter.prom": [1, 2, 9, 12, 13],
}


@pytest.mark.parametrize("name", PAGES, ids=PAGES)
def test_every_family_of_a_recorded_page_is_found_with_its_type(name: str) -> None:
    page = parse_fixture(name)
    found = [(f.name, f.type, len(f.samples)) for f in page.families.values()]
    assert found == FAMILIES[name]


@pytest.mark.parametrize("name", PAGES, ids=PAGES)
def test_only_the_non_exposition_lines_of_a_recorded_page_are_problems(name: str) -> None:
    page = parse_fixture(name)
    assert [p.line for p in page.problems] == PROBLEM_LINES.get(name, [])
    assert page.num_problems == len(page.problems)


def test_vllm_ttft_buckets_are_read_with_their_le_labels() -> None:
    page = parse_fixture("vllm.prom")
    model = "model_name=meta-llama/Llama-3.1-8B-Instruct"
    expected = {"0.001": 0, "0.005": 0, "0.01": 0, "0.02": 13, "0.04": 97, "0.06": 123,
                "0.08": 138, "0.1": 140}
    assert samples(page, "vllm:time_to_first_token_seconds") == {
        **{f"vllm:time_to_first_token_seconds_bucket{{le={le},{model}}}": float(count)
           for le, count in expected.items()},
        f"vllm:time_to_first_token_seconds_count{{{model}}}": 140.0,
    }
    assert [s.line for s in page.families["vllm:time_to_first_token_seconds"].samples] == list(
        range(18, 27))


def test_a_sum_printed_before_the_buckets_still_belongs_to_the_histogram() -> None:
    page = parse_fixture("vllm-usage-doc.prom")
    family = page.families["vllm:iteration_tokens_total"]
    assert family.samples[0].name == "vllm:iteration_tokens_total_sum"
    assert family.samples[0].value == 0.0
    assert [s.labels["le"] for s in family.samples[1:]] == [
        "1.0", "8.0", "16.0", "32.0", "64.0", "128.0", "256.0", "512.0"]


def test_sglang_values_in_exponent_notation_are_read() -> None:
    page = parse_fixture("sglang.prom")
    model = "model_name=meta-llama/Llama-3.1-8B-Instruct"
    assert samples(page, "sglang:prompt_tokens_total") == {
        f"sglang:prompt_tokens_total{{{model}}}": 8128902.0}
    assert samples(page, "sglang:cache_hit_rate") == {
        f"sglang:cache_hit_rate{{{model}}}": 0.007507552643049313}
    tpot = samples(page, "sglang:time_per_output_token_seconds")
    assert tpot[f"sglang:time_per_output_token_seconds_bucket{{le=0.1,{model}}}"] == 4950195.0


def test_dcgm_not_supported_sentinel_is_missing_not_a_reading() -> None:
    page = parse_fixture("dcgm-exporter.prom")
    assert page.families["DCGM_FI_DEV_MEMORY_TEMP"].samples == []
    problem = next(p for p in page.problems if p.line == 12)
    assert "9223372036854775794" in problem.message and "sentinel" in problem.message
    uuid = "GPU-604ac76c-d9cf-fef3-62e9-d92044ab6e52"
    assert samples(page, "DCGM_FI_DEV_SM_CLOCK") == {
        f"DCGM_FI_DEV_SM_CLOCK{{UUID={uuid},gpu=0}}": 139.0}


def test_triton_counters_without_total_keep_their_names() -> None:
    page = parse_fixture("triton-counters-doc.prom")
    assert samples(page, "nv_inference_request_success") == {
        "nv_inference_request_success{model=my_model,version=1}": 161.0}


def test_summary_quantiles_are_samples_of_the_summary() -> None:
    page = parse_fixture("triton-summary-doc.prom")
    family = page.families["nv_inference_queue_summary_us"]
    quantiles = {s.labels["quantile"]: s.value for s in family.samples if "quantile" in s.labels}
    assert quantiles == {"0.5": 55, "0.9": 97, "0.95": 98, "0.99": 101, "0.999": 101}


# --- the format, line by line ------------------------------------------------------------------

CASES = {
    "escaped label values": (
        'm{a="back\\\\slash",b="say \\"hi\\"",c="two\\nlines"} 1',
        {"m": [("m", {"a": "back\\slash", "b": 'say "hi"', "c": "two\nlines"}, 1.0)]}, []),
    "unknown escape kept as written": (
        'm{a="x\\ty"} 1', {"m": [("m", {"a": "x\\ty"}, 1.0)]}, []),
    "spaces around labels and a trailing comma": (
        'm{ a = "1" , b="2", } 3', {"m": [("m", {"a": "1", "b": "2"}, 3.0)]}, []),
    "a closing brace inside a label value": (
        'm{a="}"} 1', {"m": [("m", {"a": "}"}, 1.0)]}, []),
    "TYPE after the samples still types them": (
        "h_bucket{le=\"+Inf\"} 2\nh_count 2\n# TYPE h histogram",
        {"h": [("h_bucket", {"le": "+Inf"}, 2.0), ("h_count", {}, 2.0)]}, []),
    "prometheus_client counter: x_total and x_created": (
        "# TYPE x_total counter\nx_total 3\nx_created 1.7e9",
        {"x_total": [("x_total", {}, 3.0), ("x_created", {}, 1.7e9)]}, []),
    "OpenMetrics counter: TYPE without _total, then # EOF": (
        "# TYPE x counter\nx_total 3\nx_created 1.7e9\n# EOF\n",
        {"x": [("x_total", {}, 3.0), ("x_created", {}, 1.7e9)]}, []),
    "content after # EOF": (
        "x 1\n# EOF\nx 2\ny 3", {"x": [("x", {}, 1.0)]}, [3]),
    "NaN and Inf refused for a gauge": (
        "# TYPE g gauge\ng{a=\"1\"} NaN\ng{a=\"2\"} +Inf\ng{a=\"3\"} -Inf\ng{a=\"4\"} 4",
        {"g": [("g", {"a": "4"}, 4.0)]}, [2, 3, 4]),
    "NaN kept for a summary quantile": (
        '# TYPE s summary\ns{quantile="0.5"} NaN\ns_count 0',
        {"s": [("s", {"quantile": "0.5"}, math.nan), ("s_count", {}, 0.0)]}, []),
    "duplicate series: the first is kept": (
        'm{a="1",b="2"} 1\nm{b="2",a="1"} 2', {"m": [("m", {"a": "1", "b": "2"}, 1.0)]}, [2]),
    "a label given twice": ('m{a="1",a="2"} 1', {}, [1]),
    "a bucket without le": ("# TYPE h histogram\nh_bucket 1\nh_count 1",
                            {"h": [("h_count", {}, 1.0)]}, [2]),
    "unclosed labels": ('m{a="1" 1', {}, [1]),
    "underscores in a number": ("m 1_000", {}, [1]),
    "a value and a timestamp, CRLF line ends": (
        "m 1 1700000000000\r\nn 2\r\n", {"m": [("m", {}, 1.0)], "n": [("n", {}, 2.0)]}, []),
    "an OpenMetrics exemplar after the value": (
        '# TYPE h histogram\nh_bucket{le="1"} 2 # {trace_id="a"} 0.5\nh_bucket{le="+Inf"} 2',
        {"h": [("h_bucket", {"le": "1"}, 2.0), ("h_bucket", {"le": "+Inf"}, 2.0)]}, []),
    "three tokens after the name": ("m 1 2 3", {}, [1]),
    "an unknown TYPE": ("# TYPE m histogramm\nm 1", {"m": [("m", {}, 1.0)]}, [1]),
    "a second TYPE": ("# TYPE m gauge\n# TYPE m counter\nm 1", {"m": [("m", {}, 1.0)]}, [2]),
}


@pytest.mark.parametrize(("text", "expected", "problem_lines"), CASES.values(), ids=CASES.keys())
def test_format_case(
    text: str,
    expected: dict[str, list[tuple[str, dict[str, str], float]]],
    problem_lines: list[int],
) -> None:
    page = parse_page(text, "case")
    found = {
        name: [(s.name, s.labels, s.value) for s in family.samples]
        for name, family in page.families.items() if family.samples
    }
    assert _nan_safe(found) == _nan_safe(expected)
    assert [p.line for p in page.problems] == problem_lines


def _nan_safe(data: dict[str, list[tuple[str, dict[str, str], float]]]) -> object:
    return {k: [(n, labels, "NaN" if math.isnan(v) else v) for n, labels, v in rows]
            for k, rows in data.items()}


def test_help_is_unescaped_and_kept_whatever_the_order() -> None:
    page = parse_page('m 1\n# TYPE m gauge\n# HELP m first\\nsecond \\\\ end', "case")
    assert (page.families["m"].type, page.families["m"].help) == ("gauge", "first\nsecond \\ end")


def test_timestamp_is_kept_as_written() -> None:
    page = parse_page("m 1 1700000000000", "case")
    assert page.families["m"].samples[0].timestamp == 1.7e12


def test_page_over_the_size_limit_is_cut_at_a_line_boundary() -> None:
    text = "".join(f"m{{i=\"{i}\"}} {i}\n" for i in range(100))  # 'm{i="0"} 0\n' is 11 bytes
    page = parse_page(text, "big", max_bytes=100)
    assert [s.value for s in page.families["m"].samples] == list(range(9))  # 9 * 11 = 99 bytes
    assert page.problems[-1].line == 10
    assert "over the limit of 100" in page.problems[-1].message


def test_a_garbage_page_keeps_the_first_problems_and_counts_all() -> None:
    page = parse_page("garbage line\n" * (MAX_PROBLEMS_KEPT + 5), "junk")
    assert page.num_problems == MAX_PROBLEMS_KEPT + 5
    assert len(page.problems) == MAX_PROBLEMS_KEPT
    assert page.families == {}


def test_a_few_hundred_series_parse_well_under_5_ms() -> None:
    lines = read_fixture("sglang.prom").splitlines()
    page_lines = [line for line in lines if line.startswith("#")]
    for i in range(3):  # the 91 series of the page, for three models
        page_lines += [line.replace("8B-Instruct", f"{i}B").replace("generate_request", f"r{i}")
                       for line in lines if line.startswith("sglang:")]
    page_text = "\n".join(page_lines)
    page = parse_page(page_text, "x")
    assert (page.num_samples, page.num_problems) == (273, 0)
    timings = []
    for _ in range(21):
        started = time.perf_counter()
        parse_page(page_text, "x")
        timings.append(time.perf_counter() - started)
    assert statistics.median(timings) < 0.005


# --- property tests: nothing raises, every problem names a line --------------------------------

def _check_never_raises(text: str) -> None:
    page = parse_page(text, "random", max_bytes=4096)
    num_lines = text.count("\n") + 1
    for problem in page.problems:
        assert 1 <= problem.line <= num_lines, problem
        assert problem.message
    for family in page.families.values():
        for sample in family.samples:
            assert 1 <= sample.line <= num_lines


_EXPOSITION_ALPHABET = st.sampled_from(list('abc_:{}="\\, \t\n#01.+-eINFaTYPEHELP') + ["\r"])


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=_EXPOSITION_ALPHABET, max_size=300))
def test_random_exposition_like_text_never_raises(text: str) -> None:
    _check_never_raises(text)


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=2000))
def test_random_bytes_never_raise(data: bytes) -> None:
    _check_never_raises(data.decode("utf-8", "replace"))


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=st.sampled_from(PAGES), cut=st.floats(0, 1), data=st.data())
def test_a_truncated_real_page_never_raises(name: str, cut: float, data: st.DataObject) -> None:
    text = read_fixture(name)
    end = int(len(text) * cut)
    start = data.draw(st.integers(0, end))
    _check_never_raises(text[:end])
    _check_never_raises(text[start:end])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(max_size=20), min_size=1, max_size=5))
def test_any_label_value_round_trips_through_escaping(values: list[str]) -> None:
    def escape(value: str) -> str:
        return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")

    labels = ",".join(f'l{i}="{escape(v)}"' for i, v in enumerate(values))
    page = parse_page(f"m{{{labels}}} 1\n", "random")
    assert page.problems == []
    assert page.families["m"].samples[0].labels == {f"l{i}": v for i, v in enumerate(values)}
