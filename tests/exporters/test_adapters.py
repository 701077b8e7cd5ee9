"""Engine pages mapped onto the schema: every mapped value checked against the page by hand."""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from exporters.adapters import (
    MappingTableError,
    NormalizedPage,
    UnknownEngine,
    detect_engine,
    detect_engines,
    get_table,
    load_table,
    load_tables,
    normalize,
    normalize_engines,
)
from exporters.adapters.coverage import family_name
from exporters.exposition import parse_page
from exporters.instrumentation import PrometheusEngineMetrics, RequestStats, StepStats
from exporters.schema import ENGINE_SPECS, GPU_SPECS

from .engine_fixtures import CATALOGS, PAGES, CatalogRow, catalog, parse_fixture, read_fixture

LLAMA = "meta-llama/Llama-3.1-8B-Instruct"
SYNTHETIC_MODEL = "synthetic"


def flat(page: NormalizedPage) -> dict[str, float]:
    """Every normalized sample as {'name{k=v,...}': value}, labels sorted."""
    return {
        _series(sample.name, sample.labels): sample.value
        for family in page.families for sample in family.samples
    }


def _series(name: str, labels: Mapping[str, str]) -> str:
    return name + "{" + ",".join(f"{k}={v}" for k, v in sorted(labels.items())) + "}"


def histogram(name: str, labels: str, buckets: Mapping[str, float], count: float,
              total: float | None = None) -> dict[str, float]:
    """Expected samples of one schema histogram; ``labels`` as 'k=v,...' without le."""
    rows = {f"{name}_bucket{{{_with_le(labels, le)}}}": float(v) for le, v in buckets.items()}
    rows[f"{name}_count{{{labels}}}"] = float(count)
    if total is not None:
        rows[f"{name}_sum{{{labels}}}"] = total
    return rows


def _with_le(labels: str, le: str) -> str:
    return ",".join(sorted([*labels.split(","), f"le={le}"]))


# --- the tables --------------------------------------------------------------------------------

def test_every_table_loads_and_covers_the_schema() -> None:
    assert sorted(load_tables()) == ["dcgm", "inferwatch", "llamacpp", "sglang", "tgi",
                                     "triton", "vllm"]


@pytest.mark.parametrize("engine", CATALOGS, ids=CATALOGS)
def test_every_catalog_metric_is_mapped_or_listed_as_not_mapped(engine: str) -> None:
    table = get_table(engine)
    named = {source for row in table.rows for source in row.sources} | set(table.not_mapped)
    assert [row.name for row in catalog(engine) if row.name not in named] == []


# Pages recorded from a running engine: their names are known as surely as the catalog's.
LIVE_PAGES = {"vllm": ("vllm-0.32-cpu-live.prom",), "triton": ("triton-2.51-cpu-live.prom",),
              "llamacpp": ("llamacpp-b11434-cpu-live.prom",)}


@pytest.mark.parametrize("engine", CATALOGS, ids=CATALOGS)
def test_no_table_invents_a_metric_name(engine: str) -> None:
    table = get_table(engine)
    known = {row.name for row in catalog(engine)} | {
        family_name(family) for name in LIVE_PAGES.get(engine, ())
        for family in parse_fixture(name).families.values()}
    named = {source for row in table.rows for source in row.sources} | set(table.not_mapped)
    assert sorted(named - known) == []


BAD_TABLES = {
    "unknown target": "rows: [{target: gen_ai_server_nope, source: x}]",
    "target with _total": "rows: [{target: gpu_power_watts_total, source: x}]",
    "source and sum_of": "rows: [{target: gpu_power_watts, source: x, sum_of: [a, b]}]",
    "no source": "rows: [{target: gpu_power_watts}]",
    "misspelt key": "rows: [{target: gpu_power_watts, source: x, scael: 2}]",
    "negative scale": "rows: [{target: gpu_power_watts, source: x, scale: -1}]",
    "histogram as a sum": "rows: [{target: gen_ai_server_batch_size, sum_of: [a, b]}]",
    "value outside the closed set": (
        "rows: [{target: gen_ai_server_requests, source: x, labels: {r: finish_reason},"
        " values: {r: {done: finished}}}]"),
    "schema metric neither mapped nor missing": "rows: []",
    "missing name not in the schema": "rows: []\nmissing: [gpu_fan_speed]",
    "legacy not a boolean": "rows: [{target: gpu_power_watts, source: x, legacy: 'V0'}]",
    "requires without a condition": "rows: [{target: gpu_power_watts, source: x, requires: ''}]",
    "requires not text": "rows: [{target: gpu_power_watts, source: x, requires: true}]",
    "constant label outside the closed set": (
        "rows: [{target: gen_ai_server_requests, source: x, set_labels: {finish_reason: ok}}]"),
}


@pytest.mark.parametrize("body", BAD_TABLES.values(), ids=BAD_TABLES.keys())
def test_a_bad_table_is_refused_naming_the_file(tmp_path: Path, body: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(f"engine: bad\nkind: gpu\ndetect: [bad_]\n{body}\n", encoding="utf-8")
    with pytest.raises(MappingTableError, match=r"bad\.yaml"):
        load_table(path)


def test_a_source_both_mapped_and_listed_not_mapped_is_refused(tmp_path: Path) -> None:
    others = [spec.name for spec in GPU_SPECS if spec.name != "gpu_power_watts"]
    path = tmp_path / "bad.yaml"
    path.write_text("engine: bad\nkind: gpu\ndetect: [bad_]\n"
                    "rows: [{target: gpu_power_watts, source: bad_watts}]\n"
                    f"missing: {others}\nnot_mapped: {{bad_watts: why not}}\n", encoding="utf-8")
    with pytest.raises(MappingTableError, match=r"bad\.yaml: \['bad_watts'\] are both"):
        load_table(path)


# --- which engine wrote a page -----------------------------------------------------------------

DETECTED = {
    "vllm.prom": "vllm", "vllm-usage-doc.prom": "vllm", "sglang.prom": "sglang",
    "triton.prom": "triton", "trtllm.prom": "triton", "trtllm-v1-model.prom": "triton",
    "triton-summary-doc.prom": "triton", "triton-first-response-histogram-doc.prom": "triton",
    "triton-counters-doc.prom": "triton", "dcgm-exporter.prom": "dcgm",
    "triton-2.51-cpu-live.prom": "triton",
}


@pytest.mark.parametrize("name", PAGES, ids=PAGES)
def test_engine_is_detected_from_the_metric_names(name: str) -> None:
    assert detect_engine(parse_fixture(name)) == DETECTED[name]


def test_on_a_page_mixing_triton_and_dcgm_the_inference_engine_wins() -> None:
    page = parse_page(read_fixture("dcgm-exporter.prom") + read_fixture("trtllm.prom"), "mixed")
    assert detect_engine(page) == "triton"
    assert detect_engines(page) == ["triton", "dcgm"]
    both = flat(normalize_engines(page, detect_engines(page)))
    assert both[_series("gen_ai_server_kv_cache_blocks_used",
                        {"model": "tensorrt_llm", "version": "1"})] == 1.0
    assert both[_series("gpu_sm_clock_hertz", {"gpu": "0", "uuid": DCGM_UUID})] == 139e6


def test_an_unknown_page_names_what_was_seen() -> None:
    page = parse_page("node_load1 0.5\nprocess_cpu_seconds_total 12\n", "http://host/metrics")
    with pytest.raises(UnknownEngine) as caught:
        detect_engine(page)
    message = str(caught.value)
    assert "http://host/metrics" in message
    assert "node_load1, process_cpu_seconds_total" in message and "vllm:" in message


def test_an_engine_without_a_table_is_refused() -> None:
    with pytest.raises(UnknownEngine, match="ollama"):
        normalize(parse_page("x 1", "p"), "ollama")


# --- the recorded pages, every mapped value ----------------------------------------------------

VLLM = f"model={LLAMA}"


def test_vllm_page() -> None:
    page = normalize(parse_fixture("vllm.prom"), "vllm")
    assert flat(page) == {
        f"gen_ai_server_requests_running{{{VLLM}}}": 8.0,
        f"gen_ai_server_generation_tokens_total{{{VLLM}}}": 27453.0,
        f"gen_ai_server_requests_total{{finish_reason=stop,{VLLM}}}": 1.0,
        f"gen_ai_server_requests_total{{finish_reason=length,{VLLM}}}": 131.0,
        f"gen_ai_server_requests_total{{finish_reason=abort,{VLLM}}}": 0.0,
        # The doc elides _sum and +Inf; +Inf is the _count by definition.
        **histogram("gen_ai_server_time_to_first_token_seconds", VLLM, {
            "0.001": 0, "0.005": 0, "0.01": 0, "0.02": 13, "0.04": 97, "0.06": 123,
            "0.08": 138, "0.1": 140, "+Inf": 140}, count=140),
    }
    assert [(p.line, "no +Inf bucket, _count used" in p.message) for p in page.problems] == [
        (18, True)]
    assert page.unmapped == []
    assert page.missing == sorted(get_table("vllm").missing)


def test_vllm_usage_doc_histogram_without_count_or_inf_is_refused() -> None:
    page = normalize(parse_fixture("vllm-usage-doc.prom"), "vllm")
    assert flat(page) == {}
    assert [p.line for p in page.problems] == [6]
    assert "no +Inf bucket and no _count" in page.problems[0].message


SGLANG = f"model={LLAMA}"


def test_sglang_page() -> None:
    page = normalize(parse_fixture("sglang.prom"), "sglang")
    assert flat(page) == {
        f"gen_ai_server_prompt_tokens_total{{{SGLANG}}}": 8128902.0,
        f"gen_ai_server_generation_tokens_total{{{SGLANG}}}": 7557572.0,
        f"gen_ai_server_requests_running{{{SGLANG}}}": 162.0,
        f"gen_ai_server_requests_waiting{{{SGLANG}}}": 2826.0,
        f"gen_ai_server_kv_cache_usage_ratio{{{SGLANG}}}": 0.28,
        **histogram("gen_ai_server_time_to_first_token_seconds", SGLANG, {
            "0.001": 0, "0.005": 0, "0.01": 0, "0.02": 0, "0.04": 1, "0.06": 3, "0.08": 6,
            "0.1": 6, "0.25": 6, "0.5": 6, "0.75": 6, "1.0": 27, "2.5": 140, "5.0": 314,
            "7.5": 941, "10.0": 1330, "15.0": 1970, "20.0": 2326, "25.0": 2417, "30.0": 2513,
            "+Inf": 11008}, count=11008, total=2351897.9474117756),
        **histogram("gen_ai_server_request_duration_seconds", SGLANG, {
            "0.3": 0, "0.5": 6, "0.8": 6, "1.0": 6, "1.5": 6, "2.0": 6, "2.5": 6, "5.0": 7,
            "10.0": 10, "15.0": 11, "20.0": 14, "30.0": 247, "40.0": 486, "50.0": 845,
            "60.0": 1513, "+Inf": 11228}, count=11228, total=3116093.850019932),
        # The older release's time_per_output_token_seconds is the per-token histogram.
        **histogram("gen_ai_server_inter_token_latency_seconds", SGLANG, {
            "0.005": 1, "0.01": 73, "0.015": 382, "0.02": 593, "0.025": 855, "0.03": 1035,
            "0.04": 1815, "0.05": 11685, "0.075": 433413, "0.1": 4950195, "0.15": 7039435,
            "0.2": 7171662, "0.3": 7266055, "0.4": 7296752, "0.5": 7312226, "0.75": 7339675,
            "1.0": 7357747, "2.5": 7389414, "+Inf": 7400757}, count=7400757,
            total=866964.5791549598),
    }
    assert page.problems == []
    assert page.unmapped == ["sglang:cache_hit_rate", "sglang:func_latency_seconds",
                             "sglang:gen_throughput", "sglang:num_used_tokens"]


TRT = "model=tensorrt_llm,version=1"


def test_trtllm_page_kv_blocks_and_requests() -> None:
    page = normalize(parse_fixture("trtllm.prom"), "triton")
    assert flat(page) == {
        f"gen_ai_server_engine_steps_total{{{TRT}}}": 0.0,       # iteration_counter
        f"gen_ai_server_requests_running{{{TRT}}}": 0.0,         # request_type=active
        f"gen_ai_server_requests_waiting{{{TRT}}}": 1.0,         # request_type=waiting
        f"gen_ai_server_batch_size_max{{{TRT}}}": 512.0,         # request_type=max
        f"gen_ai_server_kv_cache_usage_ratio{{{TRT}}}": 0.4875,  # kv_cache_block_type=fraction
        f"gen_ai_server_kv_cache_blocks_used{{{TRT}}}": 1.0,
        f"gen_ai_server_kv_cache_blocks_capacity{{{TRT}}}": 6239.0,
        f"gen_ai_server_kv_cache_block_size_tokens{{{TRT}}}": 64.0,
    }
    assert page.unmapped == [
        "nv_trt_llm_disaggregated_serving_metrics",
        'nv_trt_llm_general_metrics{general_type="timestamp"}',
        "nv_trt_llm_inflight_batcher_metrics",
        'nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type="free"}',
        'nv_trt_llm_request_metrics{request_type="context"}',
        'nv_trt_llm_request_metrics{request_type="scheduled"}',
        "nv_trt_llm_runtime_memory_metrics",
    ]


def test_triton_core_page_maps_the_pending_queue_and_the_successes() -> None:
    page = normalize(parse_fixture("triton.prom"), "triton")
    assert flat(page) == {f"gen_ai_server_requests_waiting{{{TRT}}}": 0.0,
                          f"gen_ai_server_requests_total{{finish_reason=stop,{TRT}}}": 0.0}
    # nv_inference_request_failure has no reason label in this release: no error type.
    assert "nv_inference_request_failure" in page.unmapped
    assert len(page.unmapped) == 8


def test_the_live_cpu_triton_page_maps_its_failures_and_queue_per_model() -> None:
    """Triton 2.51 (pytriton's bundle, recorded live): 1 request the classifier failed is a
    model_error and a request finished with an error, its 4 others and the decoupled LLM's 3
    are successes (finish_reason="stop": Triton has no finish reason); nothing waits once it
    is done."""
    page = normalize(parse_fixture("triton-2.51-cpu-live.prom"), "triton")
    errors, waiting = "gen_ai_server_request_errors_total", "gen_ai_server_requests_waiting"
    requests = "gen_ai_server_requests_total"
    assert flat(page) == {
        f'{requests}{{finish_reason=stop,model=tiny_classifier,version=1}}': 4.0,
        f'{requests}{{finish_reason=stop,model=tiny_llm,version=1}}': 3.0,
        f'{requests}{{finish_reason=error,model=tiny_classifier,version=1}}': 1.0,
        f'{requests}{{finish_reason=error,model=tiny_llm,version=1}}': 0.0,
        f'{errors}{{error_type=model_error,model=tiny_classifier,version=1}}': 1.0,
        f'{errors}{{error_type=rejected,model=tiny_classifier,version=1}}': 0.0,
        f'{errors}{{error_type=model_error,model=tiny_llm,version=1}}': 0.0,
        f'{errors}{{error_type=rejected,model=tiny_llm,version=1}}': 0.0,
        f'{waiting}{{model=tiny_classifier,version=1}}': 0.0,
        f'{waiting}{{model=tiny_llm,version=1}}': 0.0,
    }
    assert page.problems == []


def test_trtllm_waiting_wins_over_triton_pending_for_the_same_series() -> None:
    text = read_fixture("triton.prom") + read_fixture("trtllm.prom")
    page = normalize(parse_page(text, "triton+trtllm"), "triton")
    assert flat(page)[f"gen_ai_server_requests_waiting{{{TRT}}}"] == 1.0  # not pending's 0


@pytest.mark.parametrize(("name", "unmapped"), [
    ("trtllm-v1-model.prom", ["nv_trt_llm_v1_metrics"]),
    ("triton-summary-doc.prom", ["nv_inference_queue_summary_us"]),
], ids=["v1 model", "summary"])
def test_triton_pages_with_nothing_to_map(name: str, unmapped: list[str]) -> None:
    page = normalize(parse_fixture(name), "triton")
    assert (flat(page), page.unmapped, page.problems) == ({}, unmapped, [])


def test_triton_bare_counters_give_the_successes() -> None:
    page = normalize(parse_fixture("triton-counters-doc.prom"), "triton")
    assert flat(page) == {
        "gen_ai_server_requests_total{finish_reason=stop,model=my_model,version=1}": 161.0}
    assert (page.unmapped, page.problems) == (["nv_inference_queue_duration_us"], [])


def test_triton_first_response_doc_sample_is_not_a_histogram() -> None:
    page = normalize(parse_fixture("triton-first-response-histogram-doc.prom"), "triton")
    assert flat(page) == {}
    assert [p.line for p in page.problems] == [4]
    assert "no _bucket samples" in page.problems[0].message
    assert page.unmapped == ["nv_inference_first_response_histogram_ms"]


# The same example as the doc, written as Triton really writes it (with _bucket): synthetic.
TRITON_TTFT_MS = """\
# TYPE nv_inference_first_response_histogram_ms histogram
nv_inference_first_response_histogram_ms_count{model="my_model",version="1"} 37
nv_inference_first_response_histogram_ms_sum{model="my_model",version="1"} 10771
nv_inference_first_response_histogram_ms_bucket{model="my_model",version="1",le="100"} 8
nv_inference_first_response_histogram_ms_bucket{model="my_model",version="1",le="500"} 30
nv_inference_first_response_histogram_ms_bucket{model="my_model",version="1",le="2000"} 36
nv_inference_first_response_histogram_ms_bucket{model="my_model",version="1",le="5000"} 37
nv_inference_first_response_histogram_ms_bucket{model="my_model",version="1",le="+Inf"} 37
"""


def test_triton_millisecond_histogram_keeps_its_buckets_in_seconds() -> None:
    page = normalize(parse_page(TRITON_TTFT_MS, "synthetic"), "triton")
    assert flat(page) == pytest.approx(histogram(
        "gen_ai_server_time_to_first_token_seconds", "model=my_model,version=1",
        {"0.1": 8, "0.5": 30, "2.0": 36, "5.0": 37, "+Inf": 37}, count=37, total=10.771))


DCGM_UUID = "GPU-604ac76c-d9cf-fef3-62e9-d92044ab6e52"


def test_dcgm_page_clock_in_hertz_and_the_sentinel_missing() -> None:
    parsed = parse_fixture("dcgm-exporter.prom")
    page = normalize(parsed, "dcgm")
    assert flat(page) == {f"gpu_sm_clock_hertz{{gpu=0,uuid={DCGM_UUID}}}": 139e6}
    assert page.unmapped == ["DCGM_FI_DEV_MEM_CLOCK"]  # MEMORY_TEMP had only the sentinel
    assert 12 in [p.line for p in parsed.problems]
    assert page.missing == ["gpu_memory_kv_cache_bytes", "gpu_up"]


# --- synthetic complete pages built from the catalogs, values stated here ----------------------

def _labels_text(labels: Mapping[str, str]) -> str:
    return "{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}" if labels else ""


def _listed_label_sets(row: CatalogRow) -> list[dict[str, str]]:
    """One label set per combination of the labels whose values the catalog lists."""
    listed = [(name, values) for name, values in row.labels if values and name != "quantile"]
    return [dict(zip([n for n, _ in listed], combo))
            for combo in itertools.product(*[values for _, values in listed])]


def _histogram_lines(row: CatalogRow, labels: dict[str, str], buckets: list[float],
                     observed: float, count: int) -> list[str]:
    """``count`` observations of value ``observed``: buckets below it 0, the others count."""
    lines = [f"{row.name}_bucket{_labels_text({**labels, 'le': repr(le)})} "
             f"{count if le >= observed else 0}" for le in buckets]
    lines.append(f"{row.name}_bucket{_labels_text({**labels, 'le': '+Inf'})} {count}")
    lines.append(f"{row.name}_sum{_labels_text(labels)} {observed * count}")
    lines.append(f"{row.name}_count{_labels_text(labels)} {count}")
    return lines


# TGI (metrics-exporter-prometheus: no _total, no HELP). Stated values: failures by err as
# below, queue 4, batch 6, every other counter or gauge 1; every histogram holds 5
# observations of 0.5 (seconds) or 100 (tokens, batch size); max_input_tokens 1000,
# max_total_tokens 2000.
TGI_FAILURES = {"validation": 1, "overloaded": 2, "generation": 3, "dropped": 4, "incomplete": 5,
                "template": 6}
TGI_VALUES = {"tgi_queue_size": 4.0, "tgi_batch_current_size": 6.0}


def _tgi_buckets(rule: str) -> list[float]:
    if rule.startswith("35 geometric: 0.0001*1.5^k for k=1..35"):
        return [0.0001 * 1.5**k for k in range(1, 36)]
    if rule.startswith("100 linear: max_total_tokens/100*(1..100)"):
        return [2000 / 100 * i for i in range(1, 101)]
    if rule.startswith("100 linear: max_input_tokens/100*(1..100)"):
        return [1000 / 100 * i for i in range(1, 101)]
    if rule.startswith("1..1024 step 1"):
        return [float(i) for i in range(1, 1025)]
    pytest.fail(f"TGI catalog bucket rule not understood: {rule!r}")


def tgi_page() -> str:
    lines = []
    for row in catalog("tgi"):
        lines.append(f"# TYPE {row.name} {row.type}")
        for labels in _listed_label_sets(row):
            if row.type == "histogram":
                observed = 0.5 if row.name.endswith("duration") else 100.0
                lines += _histogram_lines(row, labels, _tgi_buckets(row.buckets), observed, 5)
            elif row.type == "summary":
                lines += [f'{row.name}{{quantile="0.5"}} 0', f"{row.name}_sum 0",
                          f"{row.name}_count 0"]
            else:
                value = TGI_FAILURES[labels["err"]] if "err" in labels else TGI_VALUES.get(
                    row.name, 1.0)
                lines.append(f"{row.name}{_labels_text(labels)} {value}")
    return "\n".join(lines) + "\n"


def _five_at(name: str, buckets: list[float], observed: float) -> dict[str, float]:
    labels = f"model={SYNTHETIC_MODEL}"
    return histogram(name, labels, {**{repr(le): 5 if le >= observed else 0 for le in buckets},
                                    "+Inf": 5}, count=5, total=5 * observed)


def test_tgi_synthetic_page_from_the_catalog() -> None:
    parsed = parse_page(tgi_page(), "synthetic tgi")
    assert (parsed.problems, detect_engine(parsed)) == ([], "tgi")
    page = normalize(parsed, "tgi", {"model": SYNTHETIC_MODEL})
    seconds = [0.0001 * 1.5**k for k in range(1, 36)]
    model = f"model={SYNTHETIC_MODEL}"
    assert flat(page) == {
        # validation 1 + template 6; overloaded 2; generation 3 + incomplete 5
        f"gen_ai_server_request_errors_total{{error_type=bad_request,{model}}}": 7.0,
        f"gen_ai_server_request_errors_total{{error_type=rejected,{model}}}": 2.0,
        f"gen_ai_server_request_errors_total{{error_type=model_error,{model}}}": 8.0,
        # 1 success (a "stop": TGI has no finish reason); the 8 that failed in generation
        f"gen_ai_server_requests_total{{finish_reason=stop,{model}}}": 1.0,
        f"gen_ai_server_requests_total{{finish_reason=error,{model}}}": 8.0,
        f"gen_ai_server_requests_running{{{model}}}": 6.0,
        f"gen_ai_server_requests_waiting{{{model}}}": 4.0,
        **_five_at("gen_ai_server_request_duration_seconds", seconds, 0.5),
        **_five_at("gen_ai_server_request_queue_time_seconds", seconds, 0.5),
        **_five_at("gen_ai_server_request_prompt_tokens",
                   [10.0 * i for i in range(1, 101)], 100.0),
        **_five_at("gen_ai_server_request_generation_tokens",
                   [20.0 * i for i in range(1, 101)], 100.0),
    }
    table = get_table("tgi")
    assert page.unmapped == sorted([*table.not_mapped, 'tgi_request_failure{err="dropped"}'])


# llama.cpp: stated values for the mapped metrics, 1 for the others.
LLAMACPP_VALUES = {
    "llamacpp:prompt_tokens_total": 1200.0, "llamacpp:prompt_tokens_cached_total": 300.0,
    "llamacpp:tokens_predicted_total": 3400.0,
    "llamacpp:n_decode_total": 560.0, "llamacpp:requests_processing": 2.0,
    "llamacpp:requests_deferred": 1.0, "llamacpp:kv_cache_usage_ratio": 0.25,
}


def test_llamacpp_synthetic_page_from_the_catalog() -> None:
    text = "".join(f"# HELP {row.name} synthetic\n# TYPE {row.name} {row.type}\n"
                   f"{row.name} {LLAMACPP_VALUES.get(row.name, 1.0)}\n"
                   for row in catalog("llamacpp"))
    parsed = parse_page(text, "synthetic llama.cpp")
    assert (parsed.problems, detect_engine(parsed)) == ([], "llamacpp")
    page = normalize(parsed, "llamacpp", {"model": SYNTHETIC_MODEL})
    model = f"model={SYNTHETIC_MODEL}"
    assert flat(page) == {
        f"gen_ai_server_prompt_tokens_total{{{model}}}": 1200.0,
        f"gen_ai_server_prompt_tokens_cached_total{{{model}}}": 300.0,
        f"gen_ai_server_generation_tokens_total{{{model}}}": 3400.0,
        f"gen_ai_server_engine_steps_total{{{model}}}": 560.0,
        f"gen_ai_server_requests_running{{{model}}}": 2.0,
        f"gen_ai_server_requests_waiting{{{model}}}": 1.0,
        f"gen_ai_server_kv_cache_usage_ratio{{{model}}}": 0.25,
    }
    assert page.unmapped == sorted(get_table("llamacpp").not_mapped)


# DCGM, two GPUs with the catalog's labels. GPU 0: FB used/free/reserved 1024/80000/512 MiB,
# GPU_UTIL 45 %, MEM_COPY_UTIL 20 %, 250.5 W, 61 C, SM clock 1980 MHz; GPU 1 the same, but its
# FB_USED is DCGM's "not supported" sentinel. Every other field 1.
DCGM_VALUES = {
    "DCGM_FI_DEV_FB_USED": 1024.0, "DCGM_FI_DEV_FB_FREE": 80000.0,
    "DCGM_FI_DEV_FB_RESERVED": 512.0, "DCGM_FI_DEV_GPU_UTIL": 45.0,
    "DCGM_FI_DEV_MEM_COPY_UTIL": 20.0, "DCGM_FI_DEV_POWER_USAGE": 250.5,
    "DCGM_FI_DEV_GPU_TEMP": 61.0, "DCGM_FI_DEV_SM_CLOCK": 1980.0,
}


def _dcgm_labels(gpu: int) -> dict[str, str]:
    return {"gpu": str(gpu), "UUID": f"GPU-{gpu}", "pci_bus_id": f"00000000:0{gpu}:00.0",
            "device": f"nvidia{gpu}", "modelName": "NVIDIA H100 80GB HBM3", "hostname": "node-1"}


def dcgm_page() -> str:
    lines = []
    for row in catalog("dcgm"):
        if row.type not in ("gauge", "counter"):
            continue  # DCGM_FI_DRIVER_VERSION is a label, not a metric
        lines.append(f"# TYPE {row.name} {row.type}")
        for gpu in (0, 1):
            value = "9223372036854775794" if (row.name, gpu) == ("DCGM_FI_DEV_FB_USED", 1) \
                else repr(DCGM_VALUES.get(row.name, 1.0))
            lines.append(f"{row.name}{_labels_text(_dcgm_labels(gpu))} {value}")
    return "\n".join(lines) + "\n"


def test_dcgm_synthetic_page_units_and_total_memory() -> None:
    parsed = parse_page(dcgm_page(), "synthetic dcgm")
    assert [p.line for p in parsed.problems] == [parsed.families["DCGM_FI_DEV_FB_USED"]
                                                 .samples[0].line + 1]
    page = normalize(parsed, "dcgm")
    expected: dict[str, float] = {}
    for gpu in (0, 1):
        labels = {**_dcgm_labels(gpu), "uuid": f"GPU-{gpu}"}
        del labels["UUID"]
        expected |= {
            _series("gpu_utilization_ratio", labels): 0.45,
            _series("gpu_memory_bandwidth_utilization_ratio", labels): 0.2,
            _series("gpu_power_watts", labels): 250.5,
            _series("gpu_temperature_celsius", labels): 61.0,
            _series("gpu_sm_clock_hertz", labels): 1.98e9,
        }
        if gpu == 0:  # GPU 1's used memory is missing, so is its total
            expected[_series("gpu_memory_used_bytes", labels)] = 1024 * 2**20
            expected[_series("gpu_memory_total_bytes", labels)] = (1024 + 80000 + 512) * 2**20
    assert flat(page) == pytest.approx(expected)
    assert page.unmapped == sorted(
        name for name in get_table("dcgm").not_mapped
        if name not in ("DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_FB_RESERVED", "DCGM_FI_DRIVER_VERSION"))


# --- rows, labels and alternatives -------------------------------------------------------------

@pytest.mark.parametrize(("lines", "expected"), [
    (['vllm:kv_cache_usage_perc{model_name="m"} 0.5',
      'vllm:gpu_cache_usage_perc{model_name="m"} 0.7'], 0.5),
    (['vllm:gpu_cache_usage_perc{model_name="m"} 0.7'], 0.7),
], ids=["V1 name wins over its V0 twin", "V0 name alone"])
def test_an_earlier_row_wins_for_the_same_series(lines: list[str], expected: float) -> None:
    page = normalize(parse_page("\n".join(lines), "p"), "vllm")
    assert flat(page) == {"gen_ai_server_kv_cache_usage_ratio{model=m}": expected}
    assert page.unmapped == []


def test_vllm_prompt_tokens_by_source_preferred_and_cached_tokens_mapped() -> None:
    text = """\
vllm:prompt_tokens_total{model_name="m",engine="0"} 1000
vllm:prompt_tokens_by_source_total{model_name="m",engine="0",source="local_compute"} 700
vllm:prompt_tokens_by_source_total{model_name="m",engine="0",source="local_cache_hit"} 300
vllm:prompt_tokens_by_source_total{model_name="m",engine="0",source="external_kv_transfer"} 0
"""
    page = normalize(parse_page(text, "p"), "vllm")
    assert flat(page) == {
        "gen_ai_server_prompt_tokens_total{engine=0,model=m}": 700.0,
        "gen_ai_server_prompt_tokens_cached_total{engine=0,model=m}": 300.0,
    }
    assert page.unmapped == [
        'vllm:prompt_tokens_by_source_total{source="external_kv_transfer"}']


def test_value_from_a_label_of_an_info_gauge() -> None:
    text = ('vllm:cache_config_info{block_size="16",cache_dtype="auto",num_gpu_blocks="2048"} 1\n'
            'vllm:num_requests_running{model_name="m"} 3\n')
    page = normalize(parse_page(text, "p"), "vllm", {"model": "m"})
    assert flat(page) == {
        "gen_ai_server_kv_cache_blocks_capacity{model=m}": 2048.0,
        "gen_ai_server_kv_cache_block_size_tokens{model=m}": 16.0,
        "gen_ai_server_requests_running{model=m}": 3.0,
    }


def test_a_label_that_is_not_a_number_is_a_problem() -> None:
    text = 'vllm:cache_config_info{block_size="16",num_gpu_blocks="None"} 1\n'
    page = normalize(parse_page(text, "p"), "vllm")
    assert flat(page) == {"gen_ai_server_kv_cache_block_size_tokens{}": 16.0}
    assert [p.line for p in page.problems] == [1]
    assert "num_gpu_blocks='None'" in page.problems[0].message


def test_extra_labels_are_added_and_win_over_the_page() -> None:
    page = normalize(parse_fixture("vllm.prom"), "vllm", {"model": "llama", "cluster": "eu"})
    assert page.value("gen_ai_server_requests_running", {"cluster": "eu", "model": "llama"}) == 8
    assert page.value("gen_ai_server_requests_running", {"model": LLAMA}) is None


@pytest.mark.parametrize("label", ["le", "__name__", "1st", "a-b"])
def test_an_extra_label_that_cannot_be_added_is_refused(label: str) -> None:
    with pytest.raises(ValueError, match="extra label"):
        normalize(parse_page("x 1", "p"), "vllm", {label: "v"})


# --- our own reference server ------------------------------------------------------------------

def test_reference_server_page_is_detected_as_inferwatch_and_round_trips() -> None:
    registry = CollectorRegistry()
    metrics = PrometheusEngineMetrics(registry, "tiny", max_num_seqs=8, max_num_batched_tokens=256,
                                      kv_block_size=16, kv_cache_bytes=2**20)
    metrics.record_step(StepStats(
        num_running=2, num_waiting=1, num_swapped=0, batch_size=2, num_prefill_tokens=30,
        num_decode_tokens=1, num_cached_prompt_tokens=16, num_preemptions=1, kv_blocks_used=5,
        kv_blocks_total=64, schedule_seconds=0.001, run_seconds=0.02, postprocess_seconds=0.0005,
        inter_token_latencies=[0.02], num_generation_tokens=2))
    metrics.record_request(RequestStats(
        finish_reason="stop", error_type=None, num_prompt_tokens=30, num_generation_tokens=5,
        queue_seconds=0.01, ttft_seconds=0.2, prefill_seconds=0.19, decode_seconds=0.5,
        e2e_seconds=0.7))
    metrics.record_rejected("rejected")
    parsed = parse_page(generate_latest(registry).decode(), "reference server")
    assert (parsed.problems, detect_engine(parsed)) == ([], "inferwatch")
    page = normalize(parsed, "inferwatch")
    expected = {
        _series(sample.name, sample.labels): sample.value
        for metric in registry.collect() for sample in metric.samples
        if not sample.name.endswith("_created")
    }
    assert flat(page) == expected
    engine_only = sorted(spec.name for spec in ENGINE_SPECS if not spec.in_process)
    assert (page.unmapped, page.missing, page.problems) == ([], engine_only, [])
    assert [family.help for family in page.families] == [
        metric.documentation for metric in registry.collect()]
