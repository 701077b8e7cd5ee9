import subprocess
import sys

import pytest


@pytest.mark.slow
def test_demo_starts_the_server_sends_load_and_reports():
    """`inferwatch demo` as a newcomer runs it: a real server child process, real HTTP."""
    proc = subprocess.run(
        [sys.executable, "-m", "monitor.cli", "demo", "--num-requests", "8", "--rate", "8"],
        capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert "requests: 8/8 ok" in out
    for metric in ("ttft ms:", "tpot ms:", "itl ms:", "e2e ms:", "output tok/s"):
        assert metric in out
    assert 'gen_ai_server_requests_total{finish_reason="length",model="tiny"} 8.0' in out


def test_reference_server_rejects_a_bad_model_with_a_clear_message():
    proc = subprocess.run(
        [sys.executable, "-m", "monitor.cli", "reference-server", "--model", "/no/such/dir",
         "--port", "0"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert "'/no/such/dir' is neither a built-in model" in proc.stderr
