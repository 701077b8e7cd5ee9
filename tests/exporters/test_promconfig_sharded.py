"""`inferwatch scrape-config --shards`: the vmagent job and the commands of each shard and of
vmalert (tests/exporters/test_sharded_victoriametrics.py runs them)."""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

import pytest
import yaml

from exporters.promconfig import PromConfigError, engine_plan
from exporters.promconfig.cli import DEFAULT_SLO_RULES
from exporters.promconfig.sharded import (
    ShardedSetup,
    shard_vmalert_argv,
    vmagent_argv,
    vmagent_config_text,
    vmalert_argv,
)
from monitor.cli import main
from monitor.stack.processes import find_binary
from tests.integration import unavailable

REPO = Path(__file__).resolve().parents[2]
SETUP = ShardedSetup(2, "http://vm:8428", "http://am:9093")
PER_SHARD = ShardedSetup(2, "http://vm:8428", "http://am:9093", vmalert_per_shard=True)


def test_each_shard_scrapes_its_member_number_of_the_same_job() -> None:
    assert vmagent_argv(SETUP, "vmagent.yml", 1) == [
        "vmagent", "-promscrape.config=vmagent.yml",
        "-remoteWrite.url=http://vm:8428/api/v1/write",
        "-promscrape.cluster.membersCount=2", "-promscrape.cluster.memberNum=1"]


def test_one_shard_needs_no_cluster_flags() -> None:
    argv = vmagent_argv(ShardedSetup(1, "http://vm:8428/", "http://am:9093"), "c.yml", 0)
    assert argv == ["vmagent", "-promscrape.config=c.yml",
                    "-remoteWrite.url=http://vm:8428/api/v1/write"]


def test_vmalert_reads_and_writes_victoria_metrics_and_alerts_to_alertmanager() -> None:
    assert vmalert_argv(SETUP, ["a.yml", "b.yml"], "15s") == [
        "vmalert", "-rule=a.yml", "-rule=b.yml", "-datasource.url=http://vm:8428",
        "-remoteWrite.url=http://vm:8428", "-remoteRead.url=http://vm:8428",
        "-remoteWrite.flushInterval=1s", "-notifier.url=http://am:9093",
        "-evaluationInterval=15s"]


def test_with_a_vmalert_per_shard_each_vmagent_labels_its_shard() -> None:
    assert "-remoteWrite.label=shard=1" in vmagent_argv(PER_SHARD, "c.yml", 1)
    assert not any("remoteWrite.label" in arg for arg in vmagent_argv(SETUP, "c.yml", 1))


def test_a_shards_vmalert_queries_its_shard_only_and_labels_what_it_writes() -> None:
    assert shard_vmalert_argv(PER_SHARD, ["a.yml"], 1, "15s") == [
        "vmalert", "-rule=a.yml", "-datasource.url=http://vm:8428?extra_label=shard%3D1",
        "-remoteWrite.url=http://vm:8428", "-remoteRead.url=http://vm:8428?extra_label=shard%3D1",
        "-remoteWrite.flushInterval=1s", "-notifier.url=http://am:9093",
        "-evaluationInterval=15s", "-external.label=shard=1"]


@pytest.mark.parametrize(("setup", "shard"), [(SETUP, 0), (PER_SHARD, 2)],
                         ids=["vmagents without the shard label", "a shard out of range"])
def test_a_shards_vmalert_is_refused_where_it_cannot_filter(setup: ShardedSetup,
                                                             shard: int) -> None:
    with pytest.raises(PromConfigError):
        shard_vmalert_argv(setup, ["a.yml"], shard)


def test_the_cli_prints_a_vmalert_per_shard_and_one_for_the_fleets_slo(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out, rules = tmp_path / "vmagent.yml", tmp_path / "vllm-rules.yml"
    anomaly = "deploy/prometheus/inferwatch-anomaly-rules.yml"
    assert main(["scrape-config", "--engine", "vllm", "--targets", "a:1", "--out", str(out),
                 "--rules-out", str(rules), "--shards", "2", "--vmalert-per-shard",
                 "--anomaly-rules", anomaly]) == 0
    commands = [shlex.split(line) for line in capsys.readouterr().out.splitlines()
                if not line.startswith("#")]
    assert [argv[0] for argv in commands] == ["vmagent"] * 2 + ["vmalert"] * 3
    for shard, argv in enumerate(commands[2:4]):
        assert argv[1:3] == [f"-rule={rules}", f"-rule={anomaly}"]
        assert argv[-1] == f"-external.label=shard={shard}"
    assert [a for a in commands[4] if a.startswith("-rule=")] == [f"-rule={DEFAULT_SLO_RULES}"]
    assert "-datasource.url=http://localhost:8428" in commands[4]
    assert "# One vmalert per shard" in out.read_text()


@pytest.mark.parametrize(("shards", "vm", "shard"), [(0, "http://vm:8428", 0),
                                                     (2, "vm:8428", 0),
                                                     (2, "http://vm:8428", 2)],
                         ids=["no shards", "a URL without scheme", "a shard out of range"])
def test_unusable_setups_are_refused(shards: int, vm: str, shard: int) -> None:
    with pytest.raises(PromConfigError):
        vmagent_argv(ShardedSetup(shards, vm, "http://am:9093"), "c.yml", shard)


def test_the_vmagent_job_names_no_rule_files() -> None:
    config = yaml.safe_load(vmagent_config_text(engine_plan("vllm"), "vllm", ["e:8000"]))
    assert list(config) == ["scrape_configs"]
    assert config["scrape_configs"][0]["static_configs"] == [{"targets": ["e:8000"]}]


def test_the_cli_writes_both_files_and_prints_every_command(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out, rules = tmp_path / "vmagent.yml", tmp_path / "vllm-rules.yml"
    status = main(["scrape-config", "--engine", "vllm", "--targets", "a:1,b:2", "--out",
                   str(out), "--rules-out", str(rules), "--shards", "3",
                   "--victoria-metrics", "http://vm:8428", "--alertmanager", "http://am:9093"])
    assert status == 0
    commands = [shlex.split(line) for line in capsys.readouterr().out.splitlines()
                if not line.startswith("#")]
    assert [argv[0] for argv in commands] == ["vmagent"] * 3 + ["vmalert"]
    assert [argv[-1] for argv in commands[:3]] == [f"-promscrape.cluster.memberNum={i}"
                                                   for i in range(3)]
    assert f"-rule={rules}" in commands[3] and f"-rule={DEFAULT_SLO_RULES}" in commands[3]
    assert "rule_files" not in yaml.safe_load(out.read_text())
    assert "inferwatch-normalize-vllm" in rules.read_text()


def test_the_cli_refuses_shards_without_files(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["scrape-config", "--engine", "vllm", "--shards", "2"]) == 2
    assert "--shards needs --out and --rules-out" in capsys.readouterr().err


@pytest.mark.integration
def test_vmagent_and_vmalert_accept_the_generated_files(tmp_path: Path) -> None:
    vmagent, vmalert = find_binary(("vmagent",)), find_binary(("vmalert",))
    if vmagent is None or vmalert is None:
        unavailable("vmagent or vmalert is not installed (apt-get install victoria-metrics)")
    config, rules = tmp_path / "vmagent.yml", tmp_path / "vllm-rules.yml"
    assert main(["scrape-config", "--engine", "vllm", "--out", str(config), "--rules-out",
                 str(rules), "--shards", "2"]) == 0
    for argv in ([vmagent, "-dryRun", f"-promscrape.config={config}"],
                 [vmalert, "-dryRun", f"-rule={rules}",
                  f"-rule={REPO / DEFAULT_SLO_RULES}"]):
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stdout + done.stderr
