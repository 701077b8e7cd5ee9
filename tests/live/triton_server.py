"""A real Triton Inference Server (the one nvidia-pytriton bundles, `make live-engines`) serving
the models of tests/live/triton_model.py, for the live-engine tests: started as a subprocess on
free ports in Triton's own layout (HTTP on the metrics port - 2, gRPC on - 1, as 8000/8001/8002),
ready once /v2/health/ready and every model's ready endpoint answer, stopped by its process
group.

Where the venv is missing, or Triton does not start, the test skips saying why (or fails under
INFERWATCH_REQUIRE_INTEGRATION=1, as CI runs: see ``tests.integration``).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path


from tests.integration import unavailable
from tests.live.engine_process import wait_healthy
from tests.processes import free_port

REPO = Path(__file__).resolve().parents[2]
MODEL_SCRIPT = REPO / "tests" / "live" / "triton_model.py"
MODELS = ("tiny_llm", "tiny_classifier")
# Measured here: 6 to 20 s on a 2-core machine with other jobs on it.
START_TIMEOUT_SECONDS = 180.0


def triton_venv() -> Path:
    return Path(os.environ.get("INFERWATCH_TRITON_VENV", REPO / ".venv-triton"))


@dataclass(frozen=True)
class RunningTriton:
    url: str           # http://127.0.0.1:PORT, Triton's HTTP/REST API (KServe v2)
    metrics_port: int
    pid: int
    log: Path

    @property
    def metrics_url(self) -> str:
        return f"http://127.0.0.1:{self.metrics_port}/metrics"


def _ports() -> tuple[int, int, int]:
    """Three free ports in Triton's layout: HTTP, gRPC, metrics = m - 2, m - 1, m."""
    for _ in range(50):
        metrics = free_port()
        ports = (metrics - 2, metrics - 1, metrics)
        if ports[0] > 1024 and all(_is_free(port) for port in ports[:2]):
            return ports
    raise RuntimeError("no three consecutive free ports found")


def _is_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _libdir(python: Path) -> str:
    """The venv interpreter's LIBDIR, where its own libpython lies (see install_triton.sh)."""
    return subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_config_var('LIBDIR'))"],
        check=True, capture_output=True, text=True, timeout=60).stdout.strip()


@contextmanager
def running_triton(timeout: float = START_TIMEOUT_SECONDS) -> Iterator[RunningTriton]:
    """pytriton's Triton with the two tiny models; stopped (SIGTERM, then SIGKILL of its process
    group) when the block ends."""
    python = triton_venv() / "bin" / "python"
    if not (triton_venv() / ".installed-stamp").is_file() or not python.is_file():
        unavailable(f"live Triton tests need nvidia-pytriton in {triton_venv()} "
                    "(make live-engines)")
    http, grpc, metrics = _ports()
    with tempfile.TemporaryDirectory(prefix="inferwatch-triton-") as home:
        log = Path(home) / "triton.log"
        libdir = _libdir(python)
        env = {**os.environ, "HOME": home, "PYTHONNOUSERSITE": "1",
               "LD_LIBRARY_PATH": os.pathsep.join(
                   p for p in (libdir, os.environ.get("LD_LIBRARY_PATH", "")) if p)}
        command = [str(python), str(MODEL_SCRIPT), str(http), str(grpc), str(metrics),
                   str(Path(home) / "workspace")]
        with log.open("wb") as out:
            process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env,
                                       start_new_session=True, cwd=home)
        url = f"http://127.0.0.1:{http}"
        try:
            paths = ["/v2/health/ready", *(f"/v2/models/{model}/ready" for model in MODELS)]
            wait_healthy("pytriton", url, process, log, timeout, paths=paths)
            yield RunningTriton(url, metrics, process.pid, log)
        finally:
            stop(process)


def stop(process: subprocess.Popen[bytes], timeout: float = 60.0) -> None:
    """SIGTERM to pytriton (the group's leader), which stops tritonserver and the Python-backend
    stubs and frees its shared memory; SIGKILL of the whole group after ``timeout`` or for
    anything left in it, and then its shared-memory regions are removed here. Reaped either
    way."""
    if process.poll() is None:
        try:
            process.send_signal(signal.SIGTERM)
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout)
    try:  # a tritonserver or stub left behind in the group
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        return
    time.sleep(0.5)
    for region in Path("/dev/shm").glob(f"pytrtion{process.pid}-*"):
        region.unlink(missing_ok=True)

