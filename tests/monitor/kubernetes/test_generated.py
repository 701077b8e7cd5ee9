"""`inferwatch kubernetes`: the checked-in deploy/kubernetes/ files are what the tables and
alerts/slos generate; --check names a stale file; bad SLO specs exit 2 writing nothing."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
import yaml

from monitor.cli import main
from monitor.kubernetes.generate import (
    ENGINES_DIR,
    MONITOR_SLOS_DIR,
    SLO_RULES_FILE,
    generated_files,
)
from monitor.slo.loaders import load_slos

REPO = Path(__file__).resolve().parents[3]
OUT = REPO / "deploy" / "kubernetes"
SLOS = REPO / "alerts" / "slos"


def test_checked_in_files_are_current(capsys: pytest.CaptureFixture[str]) -> None:
    status = main(["kubernetes", "--check", "--slos", str(SLOS), "--out", str(OUT)])
    assert status == 0, capsys.readouterr().out[-4000:]


def test_no_file_is_left_over_from_an_earlier_generation() -> None:
    # --check compares the files it generates; one it no longer generates (an engine that lost
    # its rules, a removed SLO file) would stay behind unnoticed.
    generated = set(generated_files(load_slos(SLOS), SLOS))
    on_disk = {p.relative_to(OUT).as_posix() for d in (ENGINES_DIR, MONITOR_SLOS_DIR)
               for p in (OUT / d).iterdir()}
    assert on_disk == {name for name in generated
                       if name.startswith((ENGINES_DIR + "/", MONITOR_SLOS_DIR + "/"))}


def test_the_monitor_base_mounts_every_slo_file_it_is_given() -> None:
    kustomization = yaml.safe_load((OUT / "monitor" / "kustomization.yaml").read_text())
    [slos] = [g for g in kustomization["configMapGenerator"] if g["name"] == "inferwatch-slos"]
    copies = sorted(p.name for p in (OUT / "monitor" / "slos").iterdir())
    assert slos["files"] == [f"slos/{name}" for name in copies]
    assert copies == sorted(p.name for p in SLOS.glob("*.y*ml"))


def test_check_names_a_stale_file_then_generation_fixes_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    slos = tmp_path / "slos"
    slos.mkdir()
    shutil.copy(SLOS / "inference.yaml", slos)
    argv = ["kubernetes", "--slos", str(slos), "--out", str(tmp_path / "out"),
            "--release", "prom"]
    assert main(argv) == 0
    rule = yaml.safe_load((tmp_path / "out" / SLO_RULES_FILE).read_text())
    assert rule["metadata"]["labels"]["release"] == "prom"
    assert (tmp_path / "out/monitor/slos/inference.yaml").read_bytes() == \
        (SLOS / "inference.yaml").read_bytes()
    assert main([*argv, "--check"]) == 0
    capsys.readouterr()

    (slos / "inference.yaml").write_text(
        (SLOS / "inference.yaml").read_text().replace("objective: 0.99", "objective: 0.98", 1))
    assert main([*argv, "--check"]) == 1
    captured = capsys.readouterr()
    assert f"--- {tmp_path / 'out' / SLO_RULES_FILE}" in captured.out
    assert "out of date" in captured.err


def test_bad_slo_specs_exit_2_and_write_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    specs = tmp_path / "slos.yaml"
    specs.write_text("slos:\n  - {name: x, objective: 2, sli: {kind: availability}}\n")
    assert main(["kubernetes", "--slos", str(specs), "--out", str(tmp_path / "out")]) == 2
    assert "objective" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_every_path_the_readme_section_names_exists() -> None:
    readme = (REPO / "README.md").read_text()
    section = readme[readme.index("### Kubernetes (kube-prometheus-stack)"):]
    section = re.split(r"\n#{2,3} ", section[1:], maxsplit=1)[0]  # up to the next heading
    paths = set(re.findall(r"deploy/kubernetes/[\w./-]*\w", section))
    assert "deploy/kubernetes/kube-prometheus-stack" in paths
    assert len(paths) >= 4
    # Paths under deploy/kubernetes/ in backticks (`<engine>` stands for any engine).
    relative = re.findall(r"`((?:engines|monitor|kube-prometheus-stack)/[^`]+)`", section)
    paths |= {f"deploy/kubernetes/{p.replace('<engine>', 'vllm')}" for p in relative}
    assert "deploy/kubernetes/monitor/secret.example.yaml" in paths
    for path in paths:
        assert (REPO / path).exists(), path
