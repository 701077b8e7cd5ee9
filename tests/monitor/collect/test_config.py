"""inferwatch.yaml: the example loads, bad files name the file and the field, edits reload."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from monitor.collect.config import (
    DEFAULT_STORE_URL,
    ConfigError,
    ConfigWatcher,
    MonitorConfig,
    load_config,
    parse_config,
)

REPO_ROOT = Path(__file__).resolve().parents[3]

GOOD = """\
defaults: {scrape_interval_seconds: 10, scrape_timeout_seconds: 2, labels: {deployment: dev}}
targets:
  - {name: a, url: "http://127.0.0.1:9000/metrics", labels: {model: tiny, role: baseline}}
  - {name: b, url: "http://127.0.0.1:9001/metrics", engine: vllm, scrape_interval_seconds: 30,
     labels: {deployment: prod}}
"""


def write(tmp_path: Path, text: str, name: str = "inferwatch.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_the_example_at_the_repo_root_loads() -> None:
    config = load_config(REPO_ROOT / "inferwatch.yaml")
    [target] = config.targets
    assert (target.name, target.engine) == ("reference-0", "auto")
    assert target.labels == {"deployment": "local", "model": "tiny", "role": "baseline"}
    assert (target.scrape_interval_seconds, target.scrape_timeout_seconds) == (15, 5)
    assert config.store.url == DEFAULT_STORE_URL


def test_targets_inherit_the_defaults_and_override_them() -> None:
    config = parse_config(GOOD, "inline.yaml")
    a, b = config.targets
    assert (a.scrape_interval_seconds, a.scrape_timeout_seconds) == (10, 2)
    assert a.labels == {"deployment": "dev", "model": "tiny", "role": "baseline"}
    assert (b.scrape_interval_seconds, b.scrape_timeout_seconds, b.engine) == (30, 2, "vllm")
    assert b.labels == {"deployment": "prod"}


def test_an_empty_file_is_a_config_without_targets() -> None:
    config = parse_config("", "empty.yaml")
    assert config == MonitorConfig()
    assert config.max_concurrent_scrapes == 64 and config.targets == ()


TARGET = '{name: t0, url: "http://127.0.0.1:9000/metrics"}'

BAD = [
    ("timeout_not_below_interval",
     f"targets:\n  - {TARGET}\n  - {{name: t1, url: 'http://h/m', scrape_interval_seconds: 5,"
     " scrape_timeout_seconds: 5}\n",
     "targets[1].scrape_timeout_seconds", "must be less than scrape_interval_seconds"),
    ("timeout_inherited_is_checked_too",
     f"defaults: {{scrape_timeout_seconds: 4}}\ntargets:\n  - {TARGET}\n"
     "  - {name: t1, url: 'http://h/m', scrape_interval_seconds: 3}\n",
     "targets[1].scrape_timeout_seconds", "must be less than"),
    ("duplicate_names",
     f"targets:\n  - {TARGET}\n  - {TARGET}\n", "targets[1].name", "duplicate target name 't0'"),
    ("url_without_scheme",
     "targets:\n  - {name: t0, url: '127.0.0.1:9000/metrics'}\n", "targets[0].url",
     "http:// or https://"),
    ("url_with_other_scheme",
     "targets:\n  - {name: t0, url: 'ftp://host/metrics'}\n", "targets[0].url", "http://"),
    ("unknown_engine",
     f"targets:\n  - {TARGET}\n  - {{name: t1, url: 'http://h/m', engine: vllmm}}\n",
     "targets[1].engine", "unknown engine 'vllmm'"),
    ("unknown_key_in_a_target",
     "targets:\n  - {name: t0, url: 'http://h/m', scrape_intervall_seconds: 5}\n",
     "targets[0].scrape_intervall_seconds", "did you mean 'scrape_interval_seconds'"),
    ("unknown_top_level_key",
     "target:\n  - {name: t0, url: 'http://h/m'}\n", "target", "unknown key"),
    ("bad_label_name",
     "targets:\n  - {name: t0, url: 'http://h/m', labels: {le: x}}\n", "targets[0].labels",
     "'le'"),
    ("label_value_not_a_string",
     "targets:\n  - {name: t0, url: 'http://h/m', labels: {replica: 3}}\n",
     "targets[0].labels.replica", "valid string"),
    ("missing_url", "targets:\n  - {name: t0}\n", "targets[0].url", "Field required"),
    ("bad_target_name", "targets:\n  - {name: 'a b', url: 'http://h/m'}\n", "targets[0].name",
     "letters, digits"),
    ("negative_interval",
     "defaults: {scrape_interval_seconds: -1}\n", "defaults.scrape_interval_seconds",
     "greater than 0"),
    ("zero_concurrency", "max_concurrent_scrapes: 0\n", "max_concurrent_scrapes",
     "greater than or equal to 1"),
    ("store_url_not_a_url", "store: {url: inferwatch.db}\n", "store.url", "database URL"),
    ("not_a_mapping", "- a\n- b\n", "", "expected a mapping at the top"),
    ("not_yaml", "targets: [\n", "", "not valid YAML"),
]


@pytest.mark.parametrize(("text", "field", "message"), [case[1:] for case in BAD],
                         ids=[case[0] for case in BAD])
def test_a_bad_file_names_the_file_the_field_and_the_problem(
        tmp_path: Path, text: str, field: str, message: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert str(caught.value).startswith(f"{path}: invalid inferwatch config")
    matching = [p for p in caught.value.problems if p.startswith(field) and message in p]
    assert matching, caught.value.problems


def test_every_problem_of_a_file_is_reported_at_once(tmp_path: Path) -> None:
    path = write(tmp_path, "targets:\n  - {name: t0, url: 'x'}\n  - {name: t1, url: 'http://h/m',"
                           " engine: nope}\n")
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert [p.split(":")[0] for p in caught.value.problems] == ["targets[0].url",
                                                                "targets[1].engine"]


def test_a_missing_file_is_a_config_error_naming_it(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="missing.yaml: invalid inferwatch config"):
        load_config(tmp_path / "missing.yaml")


def edit(path: Path, text: str) -> None:
    """Rewrite the file and move its mtime on, so the edit is seen however coarse the clock."""
    before = path.stat().st_mtime_ns
    path.write_text(text, encoding="utf-8")
    os.utime(path, ns=(before + 10**9, before + 10**9))


def test_the_watcher_picks_up_an_edit_and_keeps_the_old_config_on_a_bad_one(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = write(tmp_path, GOOD)
    watcher = ConfigWatcher(path)
    assert [t.name for t in watcher.config.targets] == ["a", "b"]
    assert watcher.poll() is None  # nothing changed

    edit(path, GOOD.replace("name: b", "name: c"))
    reloaded = watcher.poll()
    assert reloaded is not None and [t.name for t in reloaded.targets] == ["a", "c"]

    with caplog.at_level(logging.ERROR, logger="monitor.collect.config"):
        edit(path, GOOD + "  - {name: a, url: 'http://h/m'}\n")  # a duplicate name
        assert watcher.poll() is None
        assert watcher.poll() is None  # reported once, not on every poll
    assert watcher.config is reloaded
    [record] = caplog.records
    assert "targets[2].name: duplicate target name 'a'" in record.getMessage()
    assert "keeping the config in force" in record.getMessage()

    edit(path, GOOD)
    assert [t.name for t in watcher.poll().targets] == ["a", "b"]  # type: ignore[union-attr]


def test_the_watcher_ignores_a_touch_and_survives_the_file_going_away(tmp_path: Path) -> None:
    path = write(tmp_path, GOOD)
    watcher = ConfigWatcher(path)
    edit(path, GOOD)  # same content, new mtime
    assert watcher.poll() is None
    path.unlink()
    assert watcher.poll() is None
    assert [t.name for t in watcher.config.targets] == ["a", "b"]
    write(tmp_path, GOOD.replace("name: a", "name: z"))
    assert [t.name for t in watcher.poll().targets] == ["z", "b"]  # type: ignore[union-attr]


def test_a_watcher_on_a_bad_file_fails_at_the_start(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="targets\\[0\\].url"):
        ConfigWatcher(write(tmp_path, "targets:\n  - {name: t0, url: nope}\n"))


def test_targets_are_selected_by_labels() -> None:
    config = parse_config(GOOD, "inline.yaml")
    assert [t.name for t in config.select({"deployment": "dev"})] == ["a"]
    assert [t.name for t in config.select({})] == ["a", "b"]
    assert config.target("b").engine == "vllm"
