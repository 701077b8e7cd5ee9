"""A real vLLM (the CPU build, `make live-engines`) serving the tiny model, for the live-engine
tests: started on a free port, ready once /health answers, stopped by its process group.

Where the venv or the model is missing, or vLLM does not start, the test skips saying why (or
fails under INFERWATCH_REQUIRE_INTEGRATION=1, as CI runs: see ``tests.integration``).
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path


from tests.integration import unavailable
from tests.live.engine_process import stop_group, wait_healthy
from tests.processes import free_port

REPO = Path(__file__).resolve().parents[2]
SERVED_NAME = "tiny"
# Measured here: about 60 s on an idle 2-core machine, 4 minutes with other jobs on it.
START_TIMEOUT_SECONDS = 600.0
MAX_MODEL_LEN = 1024


def vllm_venv() -> Path:
    return Path(os.environ.get("INFERWATCH_VLLM_VENV", REPO / ".venv-vllm"))


def tiny_model() -> Path:
    return Path(os.environ.get("INFERWATCH_TINY_MODEL", REPO / "build" / "tiny-llama"))


@dataclass(frozen=True)
class RunningVllm:
    url: str           # http://127.0.0.1:PORT, the OpenAI API under /v1
    pid: int
    model: str         # the served model name
    log: Path

    @property
    def metrics_url(self) -> str:
        return f"{self.url}/metrics"


def _environment(home: str) -> dict[str, str]:
    return {**os.environ, "VLLM_TARGET_DEVICE": "cpu", "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1", "VLLM_CPU_KVCACHE_SPACE": "1",
            "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1", "HOME": home,
            # vLLM's "auto" binding pins every engine's threads to core 0 (core 1 reserved):
            # several engines on this 2-core machine (a canary's pair, other jobs' tests) then
            # take turns on one core, stalling each other for seconds. One unbound thread
            # each lets the kernel spread them.
            "VLLM_CPU_OMP_THREADS_BIND": "nobind", "OMP_NUM_THREADS": "1",
            # The model runs inside the EngineCore process, not in a Worker process of its own:
            # vLLM's CPU build forces that Worker, and it busy-polls its shared-memory queue
            # (sched_yield) for 1 s after each step, so a loaded engine burns a core waiting.
            # Two such engines on 2 cores starved each other at random: an A/A canary's side
            # came out 2-6x slower than its identical twin (TPOT 4.5-5.3 vs 2.4 ms alone).
            # Without it the pair agree (docs/benchmarks.md, "Live canary").
            "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
            # A compile cache of its own per start: vLLM 0.32 cannot load a shared one ("'function'
            # object has no attribute 'finalize_loading'"), and engines started together raced
            # on it, one coming up several times slower than its twin (a CI A/A canary failed).
            "VLLM_CACHE_ROOT": str(Path(home) / "vllm-cache")}


@contextmanager
def running_vllm(*extra_args: str, timeout: float = START_TIMEOUT_SECONDS,
                 compiled: bool = False, port: int | None = None,
                 env: Mapping[str, str] | None = None) -> Iterator[RunningVllm]:
    """`vllm serve` of the tiny model with ``extra_args`` on ``port`` (default: a free one;
    give the port of a stopped server to start it again where its monitor looks); stopped
    (SIGTERM, then SIGKILL of its process group) when the block ends.

    Not ``compiled``, it runs eager (``--enforce-eager``): torch.compile's warm-up takes ~40 s
    of a 2-core machine per new configuration and changes nothing the tests read. Benchmarks
    of the engine's speed pass ``compiled=True``. ``env`` overrides the engine's environment
    (a benchmark puts vLLM's Worker process back with VLLM_ENABLE_V1_MULTIPROCESSING=1)."""
    executable, model = vllm_venv() / "bin" / "vllm", tiny_model()
    if not executable.is_file():
        unavailable(f"live-engine tests need vLLM's CPU build in {vllm_venv()} "
                    "(make live-engines)")
    if not (model / "config.json").is_file():
        unavailable(f"live-engine tests need the tiny model in {model} (make live-engines)")
    port = free_port() if port is None else port
    with tempfile.TemporaryDirectory(prefix="inferwatch-vllm-") as home:
        log = Path(home) / "vllm.log"
        command: Sequence[str] = [
            str(executable), "serve", str(model), "--served-model-name", SERVED_NAME,
            "--host", "127.0.0.1", "--port", str(port), "--max-model-len", str(MAX_MODEL_LEN),
            "--dtype", "float32", *(() if compiled else ("--enforce-eager",)), *extra_args]
        with log.open("wb") as out:
            process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT,
                                       env={**_environment(home), **(env or {})},
                                       start_new_session=True)
        url = f"http://127.0.0.1:{port}"
        try:
            wait_healthy("vllm serve", url, process, log, timeout)
            yield RunningVllm(url, process.pid, SERVED_NAME, log)
        finally:
            stop_group(process)

