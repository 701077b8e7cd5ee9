"""What a reload reads and reports: SLO files parsed again only when they changed, target and
section changes named; `inferwatch collect` reloads on SIGHUP (monitor/service/reload.py; the
service end to end is in tests/monitor/api/test_reload.py)."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from monitor.collect.config import parse_config
from monitor.service.reload import Changes, SloFiles, restart_required, target_changes
from monitor.slo.loaders import SloFileError
from tests.monitor.collect.test_cli import wait_for_line


def native(*names: str, objective: float = 0.99) -> str:
    return "slos:\n" + "".join(
        f"  - {{name: {n}, objective: {objective}, window: 30d, sli: {{kind: availability}}}}\n"
        for n in names)


def test_slo_files_parse_again_only_what_changed(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(native("a1", "a2"))
    (tmp_path / "dir").mkdir()
    (tmp_path / "dir" / "b.yaml").write_text(native("b1"))
    config = parse_config("slos: [a.yaml, dir]", "inferwatch.yaml")
    files = SloFiles()
    first = files.load(config, tmp_path)
    assert [s.name for s in first] == ["a1", "a2", "b1"]

    (tmp_path / "dir" / "b.yaml").write_text(native("b1", objective=0.9))
    second = files.load(config, tmp_path)
    assert second[0] is first[0] and second[1] is first[1]  # a.yaml unchanged: not parsed
    assert second[2].objective == 0.9

    (tmp_path / "dir" / "c.yml").write_text(native("c1"))  # a new file in the directory
    assert [s.name for s in files.load(config, tmp_path)] == ["a1", "a2", "b1", "c1"]


def test_slo_files_report_a_bad_file_and_names_used_twice(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(native("a1"))
    (tmp_path / "b.yaml").write_text(native("a1"))
    files = SloFiles()
    with pytest.raises(SloFileError, match=r"SLO names used twice: \['a1'\]"):
        files.load(parse_config("slos: [a.yaml, b.yaml]", "x"), tmp_path)
    (tmp_path / "b.yaml").write_text(native("b1", objective=1.5))
    with pytest.raises(SloFileError) as caught:
        files.load(parse_config("slos: [a.yaml, b.yaml]", "x"), tmp_path)
    assert caught.value.source == str(tmp_path / "b.yaml")
    assert caught.value.problems[0].startswith("slos[0].objective:")


def test_target_and_section_changes_are_named() -> None:
    old = parse_config("""
targets:
  - {name: kept, url: "http://127.0.0.1:1/metrics"}
  - {name: edited, url: "http://127.0.0.1:2/metrics"}
  - {name: gone, url: "http://127.0.0.1:3/metrics"}
""", "old")
    new = parse_config("""
store: {url: "sqlite:///other.db"}
alerting: {evaluation_interval_seconds: 5}
targets:
  - {name: new, url: "http://127.0.0.1:4/metrics"}
  - {name: kept, url: "http://127.0.0.1:1/metrics"}
  - {name: edited, url: "http://127.0.0.1:2/metrics", labels: {model: tiny}}
""", "new")
    assert target_changes(old, new) == (("new",), ("edited",), ("gone",))
    assert restart_required(old, new) == ("store",)  # the evaluation interval applies live
    changes = Changes(slos_changed=("x",), targets_added=("new",))
    assert changes.brief() == "SLOs changed ['x']; targets added ['new']"
    assert Changes().brief() == "nothing changed"


@pytest.mark.integration
def test_inferwatch_collect_reloads_its_slo_files_on_sighup(tmp_path: Path) -> None:
    (tmp_path / "slos.yaml").write_text(native("a"))
    config = tmp_path / "inferwatch.yaml"
    config.write_text(f"store: {{url: 'sqlite:///{tmp_path / 'store.db'}'}}\nslos: [slos.yaml]\n"
                      "anomaly: {enabled: false}\n")
    proc = subprocess.Popen([sys.executable, "-m", "monitor.cli", "--log-level", "INFO",
                             "collect", "--config", str(config)], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        wait_for_line(proc, "collecting 0 targets")
        (tmp_path / "slos.yaml").write_text(native("a", "b"))
        proc.send_signal(signal.SIGHUP)
        wait_for_line(proc, "configuration reloaded (SIGHUP) in")
        (tmp_path / "slos.yaml").write_text(native("a", objective=2))
        proc.send_signal(signal.SIGHUP)
        wait_for_line(proc, "configuration reload (SIGHUP) failed; keeping the running "
                            f"configuration: {tmp_path / 'slos.yaml'}: invalid SLO spec")
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, out
