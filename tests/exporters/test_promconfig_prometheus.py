"""The generated scrape jobs and recording rules, run by a real Prometheus on every recorded
engine page, give the series the bridge gives (name, labels, value), except the documented
cases listed here, and exactly those."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from exporters.promconfig.cli import generated_files
from monitor.stack.prometheus import prometheus_binary
from monitor.stack.processes import find_binary
from tests.exporters import promconfig_pages as synthetic
from tests.exporters.engine_fixtures import FIXTURES_DIR, engines_dir
from tests.exporters.promconfig_stack import (
    VLLM_VALUE_FROM_LABEL,
    Page,
    differences,
    load_page,
    page_of,
    prometheus_series,
    running_prometheus,
    serving,
    wait_evaluated,
    write_config,
)
from tests.integration import unavailable

pytestmark = pytest.mark.integration

_VLLM_DOC_MODEL = 'model="unsloth/Llama-3.2-1B-Instruct"'
# Page -> the differences Prometheus cannot avoid, each for a reason README.md lists
# ("What the generated configuration cannot reproduce").
KNOWN: dict[str, set[str]] = {
    # value_from_label: vLLM's cache_config_info carries the figures as labels.
    "vllm-0.32-cpu-live.prom": set(VLLM_VALUE_FROM_LABEL),
    # An elided doc excerpt: no +Inf bucket, the bridge adds it from _count.
    "vllm.prom": {
        'only bridge: gen_ai_server_time_to_first_token_seconds_bucket{le="+Inf",'
        'model="meta-llama/Llama-3.1-8B-Instruct"}',
    },
    # An elided doc excerpt: no +Inf bucket and no _count, the bridge drops the histogram.
    "vllm-usage-doc.prom": {
        f"only prometheus: gen_ai_server_iteration_tokens_sum{{{_VLLM_DOC_MODEL}}}",
        *(f'only prometheus: gen_ai_server_iteration_tokens_bucket{{le="{le}",{_VLLM_DOC_MODEL}}}'
          for le in ("1.0", "8.0", "16.0", "32.0", "64.0", "128.0", "256.0", "512.0")),
    },
    # Malformed as published (bucket lines without _bucket): a histogram without buckets,
    # which the bridge drops.
    "triton-first-response-histogram-doc.prom": {
        'only prometheus: gen_ai_server_time_to_first_token_seconds_count{model="my_model",'
        'version="1"}',
        'only prometheus: gen_ai_server_time_to_first_token_seconds_sum{model="my_model",'
        'version="1"}',
    },
    # A scaled histogram: its le bounds (ms) would have to be rescaled to seconds.
    "synthetic-triton.prom": {
        f'only bridge: gen_ai_server_time_to_first_token_seconds_bucket{{le="{le}",model="m",'
        'version="1"}' for le in ("0.1", "0.5", "+Inf")
    },
}


def _pages() -> list[Page]:
    # At collection: a missing fixture directory is reported by the first test, not here.
    pages = [load_page(path) for path in sorted(FIXTURES_DIR.glob("*.prom"))]
    pages += [page_of(name, text) for name, text in synthetic.PAGES.items()]
    return [page for page in pages if page is not None]


PAGES = _pages()


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    binary = prometheus_binary()
    if binary is None:
        unavailable("prometheus is not installed (apt-get install prometheus)")
    workdir = tmp_path_factory.mktemp("prometheus")
    with serving({page.name: page.served for page in PAGES}) as address:
        config = write_config(PAGES, address, workdir)
        with running_prometheus(binary, workdir, config) as url:
            wait_evaluated(url, len(PAGES))
            yield url


def test_every_recorded_page_with_an_adapter_is_compared() -> None:
    recorded = {path.name for path in engines_dir().glob("*.prom")}
    assert recorded <= {page.name for page in PAGES}  # every one has an adapter today
    assert {page.name for page in PAGES} >= {"vllm-0.32-cpu-live.prom", "sglang.prom",
                                             "trtllm.prom", "dcgm-exporter.prom"}


@pytest.mark.parametrize("page", PAGES, ids=[page.name for page in PAGES])
def test_prometheus_gives_the_series_the_bridge_gives(prometheus: str, page: Page) -> None:
    found = differences(page.bridge, prometheus_series(prometheus, page.job))
    assert found == KNOWN.get(page.name, set())


def _promtool() -> str:
    path = find_binary(("promtool",))
    if path is None:
        unavailable("promtool is not installed (apt-get install prometheus)")
    return path


@pytest.mark.parametrize("name", sorted(generated_files()), ids=str)
def test_promtool_accepts_the_generated_file(tmp_path: Path, name: str) -> None:
    files = generated_files()
    for file_name, text in files.items():
        (tmp_path / file_name).write_text(text, encoding="utf-8")
    what = "config" if name.endswith("-scrape.yml") else "rules"
    done = subprocess.run([_promtool(), "check", what, str(tmp_path / name)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
