"""`inferwatch gateway` refuses a bad configuration before it listens."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from monitor.cli import main
from monitor.gateway.cli import add_arguments, config_from_args


@pytest.mark.parametrize("args", [
    ["--upstream", "ftp://engine:21"],
    ["--upstream", "http://127.0.0.1:8000", "--timeout", "0"],
    ["--upstream", "http://127.0.0.1:8000", "--slo-classes", "/nonexistent/classes.yaml"],
], ids=["not-http", "zero-timeout", "missing-classes-file"])
def test_a_bad_configuration_exits_2_saying_why(args: list[str],
                                                capsys: pytest.CaptureFixture[str]):
    assert main(["gateway", *args]) == 2
    assert capsys.readouterr().err.startswith("inferwatch gateway: ")


def test_a_classes_file_replaces_the_packaged_one(tmp_path: Path):
    path = tmp_path / "classes.yaml"
    path.write_text("classes:\n  chat: {ttft_ms: 250}\n")
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    config = config_from_args(parser.parse_args(["--upstream", "http://h:1",
                                                 "--slo-classes", str(path)]))
    assert config.slo_classes.default == "chat"
    assert config.slo_classes.classes["chat"].ttft_seconds == 0.25


def test_a_store_it_cannot_open_exits_1_before_listening(capsys: pytest.CaptureFixture[str]):
    assert main(["gateway", "--upstream", "http://127.0.0.1:8000",
                 "--store", "mysql://u@h/db"]) == 1
    assert capsys.readouterr().err.startswith("inferwatch gateway: cannot open the store: ")
