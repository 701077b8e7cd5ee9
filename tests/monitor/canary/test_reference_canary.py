"""The canary judge on the testbed: two real reference servers under identical load, the
canary slowed by fault injection, judged by ``inferwatch canary live``."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from monitor.cli import main
from tests.reference_server.server_fixture import ADMIN_TOKEN, running_server

pytestmark = pytest.mark.slow


def test_canary_live_fails_a_slowed_reference_server(tmp_path: Path) -> None:
    with running_server() as baseline, running_server() as canary:
        httpx.post(f"{canary.url}/admin/faults", json={
            "kind": "slowdown", "value": 2.0, "duration_seconds": 600},
            headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}).raise_for_status()
        code = main(["canary", "live", "--baseline-url", baseline.url, "--canary-url",
                     canary.url, "--model", "tiny", "--rate", "6", "--duration", "12",
                     "--interval", "1", "--warmup", "1", "--input-len", "uniform:20-60",
                     "--output-len", "fixed:16", "--chars-per-token", "1", "--quiet",
                     "--output-dir", str(tmp_path)])
    assert code == 1
    judgement = json.loads((tmp_path / "judgement.json").read_text())
    verdicts = {m["name"]: m["verdict"] for m in judgement["judgement"]["results"]}
    assert judgement["judgement"]["outcome"] == "fail"
    assert verdicts["itl"] == verdicts["tpot"] == "high"
    base = (tmp_path / "baseline.jsonl").read_text().splitlines()
    assert len(base) == len((tmp_path / "canary.jsonl").read_text().splitlines()) > 50
    first = json.loads(base[0])
    assert first["status"] == 200 and first["output_tokens"] == 16 and first["usage_reported"]
