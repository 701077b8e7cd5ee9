"""`inferwatch gateway` refuses a bad configuration before it listens, and lifts its open-file
limit to hold many streams."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from monitor.cli import main
from monitor.gateway.cli import add_arguments, config_from_args, otlp_metrics_config
from monitor.gateway.config import OtlpMetricsConfig


@pytest.mark.parametrize("args", [
    ["--upstream", "ftp://engine:21"],
    ["--upstream", "http://127.0.0.1:8000", "--timeout", "0"],
    ["--upstream", "http://127.0.0.1:8000", "--slo-classes", "/nonexistent/classes.yaml"],
    ["--upstream", "http://127.0.0.1:8000", "--otlp-metrics-endpoint", "collector:4318"],
    ["--upstream", "http://127.0.0.1:8000", "--otlp-metrics-endpoint", "http://c:4318/v1/metrics",
     "--otlp-metrics-interval", "0"],
], ids=["not-http", "zero-timeout", "missing-classes-file", "otlp-endpoint-not-a-url",
        "otlp-zero-interval"])
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


def _otlp(argv: list[str], env: dict[str, str]) -> OtlpMetricsConfig | None:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return otlp_metrics_config(parser.parse_args(["--upstream", "http://h:1", *argv]), env)


def test_the_otlp_push_is_off_unless_a_flag_or_opentelemetry_s_variable_names_an_endpoint():
    assert _otlp([], {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}) is None
    url = "http://c:4318/v1/metrics"
    assert _otlp([], {"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": url,
                      "OTEL_METRIC_EXPORT_INTERVAL": "15000",
                      "OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE": "LowMemory"}
                 ) == OtlpMetricsConfig(url, interval_seconds=15.0, temporality="delta")
    assert _otlp(["--otlp-metrics-endpoint", "https://other/v1/metrics",
                  "--otlp-metrics-interval", "5", "--otlp-metrics-temporality", "cumulative"],
                 {"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": url,
                  "OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE": "delta"}
                 ) == OtlpMetricsConfig("https://other/v1/metrics", interval_seconds=5.0)


@pytest.mark.parametrize(("name", "value"), [
    ("OTEL_METRIC_EXPORT_INTERVAL", "5s"),
    ("OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE", "sometimes"),
], ids=["interval", "temporality"])
def test_a_bad_opentelemetry_variable_is_named_in_the_error(name: str, value: str):
    with pytest.raises(ValueError, match=name):
        _otlp([], {"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": "http://c:4318/v1/metrics",
                   name: value})


def test_the_open_file_limit_is_raised_to_hold_many_streams():
    # Two sockets a stream: a soft limit of 1024 would cap the gateway near 500 streams.
    import resource

    from monitor.gateway.cli import _raise_fd_limit

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard <= 1024:
        pytest.skip(f"hard open-file limit {hard}: nothing to raise to")
    resource.setrlimit(resource.RLIMIT_NOFILE, (1024, hard))
    try:
        _raise_fd_limit()
        raised = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert raised == (1 << 20 if hard == resource.RLIM_INFINITY else min(hard, 1 << 20))
