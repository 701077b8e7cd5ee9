"""The Prometheus configuration generator, row kind by row kind (no binaries: what each row
becomes; tests/exporters/test_promconfig_prometheus.py runs it in a real Prometheus)."""

from __future__ import annotations

import re
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest

from exporters.adapters.table import EngineTable, Row
from exporters.promconfig import metric_relabel_configs, plan, target_rules
from exporters.promconfig.cli import generated_files
from exporters.promconfig.plan import PromConfigError
from exporters.schema import SCHEMA
from monitor.cli import main

REPO = Path(__file__).resolve().parents[2]


def row(target: str, source: str | tuple[str, ...], position: str = "test.yaml rows[0]",
        **fields: Any) -> Row:
    spec = next(spec for spec in SCHEMA if spec.name == target)
    sources = (source,) if isinstance(source, str) else source
    return Row(spec, sources, MappingProxyType(fields.get("match", {})), fields.get("scale", 1.0),
               MappingProxyType(fields.get("labels", {})),
               MappingProxyType(fields.get("values", {})), fields.get("value_from_label"),
               fields.get("keep_labels"), position)


def table(*rows: Row) -> EngineTable:
    return EngineTable("test", "inference", ("x_",), rows, (), {})


def test_a_plain_counter_is_renamed_by_relabeling_keeping_total() -> None:
    configs = metric_relabel_configs(plan(table(row("gen_ai_server_generation_tokens",
                                                    "x_gen_total"))))
    assert configs[1] == {"source_labels": ["__name__"], "regex": "x_gen_total",
                          "target_label": "__name__",
                          "replacement": "gen_ai_server_generation_tokens_total"}
    assert configs[-1] == {"action": "keep", "source_labels": ["__name__"],
                           "regex": "gen_ai_server_generation_tokens_total|inferwatch_raw:.*"}


def test_a_histogram_is_renamed_suffix_by_suffix() -> None:
    configs = metric_relabel_configs(plan(table(row("gen_ai_server_request_duration_seconds",
                                                    "x_e2e"))))
    assert configs[1]["regex"] == "x_e2e_(bucket|sum|count)"
    assert configs[1]["replacement"] == "gen_ai_server_request_duration_seconds_${1}"


def test_match_selects_by_label_and_drops_it_from_the_output() -> None:
    configs = metric_relabel_configs(plan(table(
        row("gen_ai_server_requests_running", "x_req", match={"kind": "active"}))))
    assert configs[1]["source_labels"] == ["__name__", "kind"]
    assert configs[1]["regex"] == "x_req;active"
    assert configs[2] == {"source_labels": ["__name__"], "regex": "gen_ai_server_requests_running",
                          "target_label": "kind", "replacement": ""}


def test_the_first_rule_keeps_only_the_families_some_row_reads() -> None:
    configs = metric_relabel_configs(plan(table(
        row("gen_ai_server_generation_tokens", "x_gen_total"),
        row("gen_ai_server_request_duration_seconds", "x_e2e"),
        row("gen_ai_server_kv_cache_usage_ratio", "x_pct", scale=0.01))))
    assert configs[0] == {"action": "keep", "source_labels": ["__name__"],
                          "regex": "x_e2e_(bucket|sum|count)|x_gen_total|x_pct"}


def test_a_value_map_drops_unlisted_values_and_renames_the_label() -> None:
    configs = metric_relabel_configs(plan(table(row(
        "gen_ai_server_requests", "x_done_total", labels={"why": "finish_reason"},
        values={"why": {"eos": "stop", "max.len": "length"}}))))
    regexes = [c.get("regex") for c in configs]
    assert "gen_ai_server_requests_total;max\\.len" in regexes  # escaped, not "any char"
    assert {"action": "drop", "source_labels": ["__name__", "__tmp_inferwatch_value"],
            "regex": "gen_ai_server_requests_total;"} in configs
    assert any(c.get("target_label") == "finish_reason" for c in configs)


def test_scale_is_a_recording_rule_over_the_raw_series() -> None:
    engine = plan(table(row("gen_ai_server_kv_cache_usage_ratio", "x_pct", scale=0.01)))
    assert engine.relabel_rows == ()
    assert engine.raw_sources == (("x_pct", False),)
    [rule] = target_rules(engine.rule_targets["gen_ai_server_kv_cache_usage_ratio"])
    assert rule == {"record": "gen_ai_server_kv_cache_usage_ratio",
                    "expr": "(inferwatch_raw:x_pct) * 0.01"}
    assert metric_relabel_configs(engine)[1]["replacement"] == "inferwatch_raw:${1}"


def test_alternatives_are_or_in_file_order() -> None:
    rows = (row("gen_ai_server_requests_waiting", "x_new"),
            row("gen_ai_server_requests_waiting", "x_old"))
    [rule] = target_rules(plan(table(*rows)).rule_targets["gen_ai_server_requests_waiting"])
    assert rule["expr"] == "inferwatch_raw:x_new or inferwatch_raw:x_old"


def test_histogram_alternatives_take_whole_histograms() -> None:
    rows = (row("gen_ai_server_request_duration_seconds", "x_new"),
            row("gen_ai_server_request_duration_seconds", "x_old"))
    rules = target_rules(rows)
    assert [r["record"] for r in rules] == [
        "gen_ai_server_request_duration_seconds_bucket",
        "gen_ai_server_request_duration_seconds_sum",
        "gen_ai_server_request_duration_seconds_count"]
    assert rules[0]["expr"] == ("inferwatch_raw:x_new_bucket or (inferwatch_raw:x_old_bucket "
                                "unless ignoring(le) (inferwatch_raw:x_new_bucket))")


def test_a_value_map_that_merges_counters_sums_them() -> None:
    [rule] = target_rules([row("gen_ai_server_request_errors", "x_rej_total",
                               labels={"reason": "error_type"},
                               values={"reason": {"a": "rejected", "b": "rejected"}})])
    assert 'sum without (reason) (label_replace(inferwatch_raw:x_rej_total{reason=~"a|b"}' \
        in rule["expr"]


def test_sum_of_adds_the_terms_per_label_set() -> None:
    [rule] = target_rules([row("gen_ai_server_requests_waiting", ("x_a", "x_b"))])
    assert rule["expr"] == "(inferwatch_raw:x_a + inferwatch_raw:x_b)"


def test_keep_labels_keeps_the_target_labels_and_a_buckets_le() -> None:
    rules = target_rules([row("gen_ai_server_request_duration_seconds", "x_e2e",
                              keep_labels=frozenset({"model"}))])
    assert rules[0]["expr"] == "max by (instance, job, le, model) (inferwatch_raw:x_e2e_bucket)"
    assert rules[1]["expr"] == "max by (instance, job, model) (inferwatch_raw:x_e2e_sum)"


def test_dcgm_sources_refuse_the_blank_sentinels() -> None:
    [rule] = target_rules([row("gpu_power_watts", "DCGM_FI_DEV_POWER_USAGE")])
    assert rule["expr"].startswith(
        "(inferwatch_raw:DCGM_FI_DEV_POWER_USAGE < 9.223372036854776e+18 != 140737488355328.0")


@pytest.mark.parametrize(("fields", "series", "why"), [
    ({"value_from_label": "blocks"}, "gen_ai_server_requests_waiting", "label 'blocks'"),
], ids=["value from a label"])
def test_a_value_from_a_label_is_a_gap_naming_the_row(
    fields: dict[str, Any], series: str, why: str
) -> None:
    engine = plan(table(row("gen_ai_server_requests_waiting", "x_info",
                            position="test.yaml rows[7]", **fields)))
    [gap] = engine.gaps
    assert gap.describe().startswith(f"test.yaml rows[7]: {series}: ")
    assert why in gap.why
    assert target_rules(engine.rule_targets[series]) == []


def test_a_scaled_histogram_records_sum_and_count_but_not_buckets() -> None:
    histogram = row("gen_ai_server_time_to_first_token_seconds", "x_ttft_ms", scale=0.001)
    [gap] = plan(table(histogram)).gaps
    assert gap.series == "gen_ai_server_time_to_first_token_seconds_bucket"
    rules = {r["record"]: r["expr"] for r in target_rules([histogram])}
    assert rules == {
        "gen_ai_server_time_to_first_token_seconds_sum": "(inferwatch_raw:x_ttft_ms_sum) * 0.001",
        "gen_ai_server_time_to_first_token_seconds_count": "inferwatch_raw:x_ttft_ms_count",
    }


def test_a_source_two_rows_read_with_disjoint_matches_stays_with_relabeling() -> None:
    rows = (row("gen_ai_server_requests_running", "x_req", match={"kind": "active"}),
            row("gen_ai_server_requests_waiting", "x_req", match={"kind": "waiting"}),
            row("gen_ai_server_requests_waiting", "x_queue"))
    engine = plan(table(*rows))
    assert engine.relabel_rows == rows[:1]
    assert list(engine.rule_targets) == ["gen_ai_server_requests_waiting"]


@pytest.mark.parametrize("fields", [
    {"source": "x-dash"}, {"labels": {"model-name": "model"}}, {"match": {"__x": "1"}},
], ids=["metric name", "label name", "reserved label"])
def test_a_name_prometheus_cannot_take_is_refused_naming_engine_and_row(
    fields: dict[str, Any],
) -> None:
    bad = row("gen_ai_server_requests_waiting", fields.pop("source", "x_queue"),
              position="test.yaml rows[3]", **fields)
    with pytest.raises(PromConfigError, match=r"^test: test\.yaml rows\[3\]: "):
        plan(table(bad))


def test_the_checked_in_configurations_are_current(capsys: pytest.CaptureFixture[str]) -> None:
    status = main(["scrape-config", "--all", "--check", "--dir",
                   str(REPO / "deploy" / "prometheus")])
    assert status == 0, capsys.readouterr().out


def test_check_reports_a_stale_file_and_all_rewrites_it(tmp_path: Path) -> None:
    assert main(["scrape-config", "--all", "--dir", str(tmp_path)]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(generated_files())
    (tmp_path / "vllm-rules.yml").write_text("groups: []\n")
    assert main(["scrape-config", "--all", "--check", "--dir", str(tmp_path)]) == 1


def test_what_is_not_reproduced_is_in_both_files_and_on_stderr(
    capsys: pytest.CaptureFixture[str],
) -> None:
    files = generated_files(["vllm"])
    line = re.compile(r"vllm\.yaml rows\[\d+\]: gen_ai_server_kv_cache_blocks_capacity: the "
                      r"value is label 'num_gpu_blocks'")
    assert line.search(files["vllm-scrape.yml"]) and line.search(files["vllm-rules.yml"])
    assert main(["scrape-config", "--engine", "vllm"]) == 0
    assert line.search(capsys.readouterr().err)


def test_one_engine_to_files_names_the_rule_file(tmp_path: Path) -> None:
    out, rules = tmp_path / "prometheus.yml", tmp_path / "vllm-rules.yml"
    assert main(["scrape-config", "--engine", "vllm", "--targets", "a:8000,b:8000",
                 "--out", str(out), "--rules-out", str(rules)]) == 0
    text = out.read_text()
    assert "rule_files: [vllm-rules.yml]" in text and "targets: ['a:8000', 'b:8000']" in text
    assert "record: gen_ai_server_prompt_tokens_total" in rules.read_text()


def test_an_unknown_engine_is_refused_naming_it(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["scrape-config", "--engine", "nope"]) == 2
    assert "'nope'" in capsys.readouterr().err
