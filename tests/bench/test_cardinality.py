"""The relabeling simulation does what Prometheus does with each action the generated jobs use,
and the cardinality bench counts a recorded page consistently."""

from __future__ import annotations

from bench.cardinality import PAGES_DIR, measure
from bench.relabel_sim import relabel


def test_replace_expands_groups_and_an_empty_result_deletes_the_label() -> None:
    configs = [{"source_labels": ["__name__"], "regex": "vllm:(.*)", "target_label": "__name__",
                "replacement": "raw_${1}"},
               {"source_labels": ["x"], "regex": ".*", "target_label": "model",
                "replacement": "$1"}]
    assert relabel({"__name__": "vllm:a", "model": "m"}, configs) == {"__name__": "raw_a"}


def test_keep_and_drop_match_the_whole_value() -> None:
    keep = [{"action": "keep", "source_labels": ["__name__"], "regex": "a|b"}]
    assert relabel({"__name__": "ab"}, keep) is None
    assert relabel({"__name__": "b"}, keep) == {"__name__": "b"}
    drop = [{"action": "drop", "source_labels": ["__name__", "le"], "regex": "h;1"}]
    assert relabel({"__name__": "h", "le": "1"}, drop) is None
    assert relabel({"__name__": "h", "le": "10"}, drop) == {"__name__": "h", "le": "10"}


def test_labeldrop_removes_the_labels_whose_name_matches() -> None:
    configs = [{"action": "labeldrop", "regex": "engine|pid"}]
    assert relabel({"__name__": "x", "engine": "0", "pid": "1", "model": "m"}, configs) == {
        "__name__": "x", "model": "m"}


def test_the_live_vllm_page_shrinks_at_each_stage() -> None:
    counts = measure(PAGES_DIR / "vllm-0.32-cpu-live.prom")
    assert counts is not None and counts.engine == "vllm"
    assert counts.raw > counts.first_keep >= counts.stored_schema + counts.stored_raw
    # The schema series relabeling cannot make are recorded by rules from the raw ones.
    assert counts.stored_schema < counts.normalized <= counts.stored_schema + counts.stored_raw
