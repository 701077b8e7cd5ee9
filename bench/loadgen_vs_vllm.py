"""Our load generator against vLLM's own client (`vllm bench serve`) on the same vLLM server
(issue 21): the same prompts, arrival times, lengths and request count, side by side.

    python -m bench.loadgen_vs_vllm --num-requests 60 --repetitions 2      # starts a vLLM
    python -m bench.loadgen_vs_vllm --url http://127.0.0.1:8000 --served-model tiny

Both clients run as subprocesses, in alternating order (vLLM first on even repetitions), and
are measured the same way:

* the workload: vLLM's random dataset (``--random-input-len``/``--random-output-len``,
  ``--ignore-eos``), sampled here with vLLM's own ``RandomDataset`` and seed, so our client
  sends the very prompts vLLM's does; the arrivals replicate ``vllm bench serve``'s schedule
  (``np.random.seed(seed)``, gamma gaps of shape 1 = Poisson, rescaled to end at N/rate);
* the figures: TTFT, ITL, E2E p50/p99, TPOT p50, output tokens/s over vLLM's span (run start
  to the last answer), each from the client's own records;
* CPU: utime + stime of the client's process (``/proc/<pid>/stat``) between its start-of-load
  and end-of-load lines on stdout (vLLM's "Maximum request concurrency" and "Serving
  Benchmark Result" lines, ours "LOAD START"/"LOAD END"), divided by the requests; the
  process's whole CPU (imports included) comes from ``getrusage(RUSAGE_CHILDREN)``.

Writes bench/out/loadgen_vs_vllm.json (or --out) and prints the table with ratios ours/vLLM.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
CLIENTS = ("vllm", "inferwatch")
START_MARK, END_MARK = "LOAD START", "LOAD END"
VLLM_START_MARK, VLLM_END_MARK = "Maximum request concurrency", "Serving Benchmark Result"
# (row name, key in both figure dicts); times in ms, throughput in tokens/s.
ROWS: tuple[tuple[str, str], ...] = (
    ("TTFT p50 ms", "ttft_p50"), ("TTFT p99 ms", "ttft_p99"),
    ("ITL p50 ms", "itl_p50"), ("ITL p99 ms", "itl_p99"),
    ("E2E p50 ms", "e2e_p50"), ("E2E p99 ms", "e2e_p99"),
    ("TPOT p50 ms", "tpot_p50"), ("output tok/s", "output_throughput"),
)
TARGET = 0.05   # the goal: every figure within 5% of vLLM's client


def vllm_venv() -> Path:
    return Path(os.environ.get("INFERWATCH_VLLM_VENV", REPO / ".venv-vllm"))


def tiny_model() -> Path:
    return Path(os.environ.get("INFERWATCH_TINY_MODEL", REPO / "build" / "tiny-llama"))


# --- the figures each client reports ---------------------------------------------------------

def vllm_figures(doc: dict[str, Any]) -> dict[str, float]:
    """The figures of a `vllm bench serve --save-result` JSON (milliseconds, tokens/s)."""
    figures = {f"{name}_{q}": float(doc[f"{'median' if q == 'p50' else q}_{key}_ms"])
               for name, key in (("ttft", "ttft"), ("itl", "itl"), ("e2e", "e2el"),
                                 ("tpot", "tpot"))
               for q in ("p50", "p99") if f"{'median' if q == 'p50' else q}_{key}_ms" in doc}
    figures["output_throughput"] = float(doc["output_throughput"])
    figures["completed"] = float(doc["completed"])
    figures["output_tokens"] = float(doc["total_output_tokens"])
    figures["duration_s"] = float(doc["duration"])
    return figures


def vllm_arrivals(num_requests: int, rate: float, seed: int) -> list[float]:
    """The send offsets of `vllm bench serve` at ``rate`` (burstiness 1, no ramp-up): its
    main seeds numpy's global generator, ``get_request`` draws one gamma gap per request
    (the first included), sums them and rescales the sum to N/rate."""
    state = np.random.RandomState(seed)
    gaps = [state.gamma(shape=1.0, scale=1.0 / rate) for _ in range(num_requests)]
    offsets = np.cumsum(gaps)
    return [float(x) for x in offsets * (num_requests / rate / offsets[-1])]


def write_prompts(path: Path, num_requests: int, input_len: int, output_len: int, seed: int,
                  model_dir: Path) -> None:
    """vLLM's random-dataset prompts (what `vllm bench serve --dataset-name random --seed`
    sends), one JSON line each, sampled in the vLLM venv."""
    script = (
        "import json, sys\n"
        "from transformers import AutoTokenizer\n"
        "from vllm.benchmarks.datasets.datasets import RandomDataset\n"
        f"tok = AutoTokenizer.from_pretrained({str(model_dir)!r})\n"
        f"reqs = RandomDataset(random_seed={seed}).sample(tokenizer=tok, "
        f"num_requests={num_requests}, input_len={input_len}, output_len={output_len}, "
        "range_ratio=0.0)\n"
        f"with open({str(path)!r}, 'w') as f:\n"
        "    for r in reqs:\n"
        "        f.write(json.dumps({'prompt': r.prompt, 'max_tokens': r.expected_output_len,"
        " 'prompt_len': r.prompt_len}) + '\\n')\n")
    subprocess.run([str(vllm_venv() / "bin" / "python"), "-c", script], check=True,
                   env=_offline_env())


def _offline_env() -> dict[str, str]:
    return {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
            "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1", "PYTHONUNBUFFERED": "1"}


# --- our client, as a subprocess -------------------------------------------------------------

def client_main(args: argparse.Namespace) -> int:
    """`python -m bench.loadgen_vs_vllm client ...`: our runner on vLLM's schedule; prints
    the load markers and writes the figures (same keys as ``vllm_figures``) as JSON."""
    from monitor.loadgen.metrics import summarize
    from monitor.loadgen.runner import Endpoint, Limits, check_endpoint, run_load
    from monitor.loadgen.workload import RequestSpec

    prompts = [json.loads(line) for line in Path(args.prompts).read_text().splitlines()]
    arrivals = vllm_arrivals(len(prompts), args.rate, args.seed)
    specs = [RequestSpec(at, p["prompt"], int(p["max_tokens"]), None, p.get("prompt_len"))
             for at, p in zip(arrivals, prompts)]
    endpoint = Endpoint(args.url, args.served_model, ignore_eos=True)
    asyncio.run(check_endpoint(endpoint))
    print(START_MARK, flush=True)
    result = asyncio.run(run_load(endpoint, specs, Limits(num_requests=len(specs)),
                                  rate=args.rate))
    print(END_MARK, flush=True)
    summary = summarize(result, (50.0, 99.0))
    ok = [r for r in result.records if r.ok]
    figures = {f"{name}_{q}": summary.latency[name].percentiles[q] * 1000
               for name in ("ttft", "itl", "e2e", "tpot") if name in summary.latency
               for q in ("p50", "p99")}
    # vLLM's E2E ends at the last token chunk, ours at the last byte: both, for the table.
    last_token = [r.chunk_times[-1] - r.sent_at for r in ok if r.chunk_times]
    figures["e2e_last_token_p50"] = float(np.percentile(last_token, 50)) * 1000
    figures["e2e_last_token_p99"] = float(np.percentile(last_token, 99)) * 1000
    # Where the engine timed each request too (vLLM --enable-per-request-metrics): the split.
    for name, dist in (summary.server_view or {}).items():
        for q in ("p50", "p99"):
            figures[f"split_{name}_{q}"] = dist.percentiles[q] * 1000
    # Throughput over vLLM's span: from the run's start (offset 0, before the first gap) to
    # the last answer; summarize's own span starts at the first send.
    span = max((r.finished_at for r in result.records), default=0.0)
    output_tokens = sum(r.num_output_tokens for r in ok)
    figures |= {"output_throughput": output_tokens / span if span else 0.0,
                "output_throughput_own_span": summary.output_throughput,
                "completed": float(len(ok)), "output_tokens": float(output_tokens),
                "duration_s": span}
    Path(args.result).write_text(json.dumps(figures, indent=2) + "\n")
    return 0 if len(ok) == len(specs) else 1


# --- our client's own cost, against a local server -------------------------------------------

_TOKEN = (b'data: {"id":"cmpl-1","object":"text_completion","created":1,"model":"tiny","choices":'
          b'[{"index":0,"text":" ab","logprobs":null,"finish_reason":null,"stop_reason":null}],'
          b'"usage":null}\n\n')
_USAGE = (b'data: {"id":"cmpl-1","object":"text_completion","created":1,"model":"tiny","choices"'
          b':[],"usage":{"prompt_tokens":64,"total_tokens":96,"completion_tokens":32}}\n\n')


class _ChunkedSse(asyncio.Protocol):
    """vLLM's answer, as uvicorn writes it: chunked encoding, one write per SSE event, the
    first token ``ttft`` s after the request, the others ``itl`` s apart (each a network
    read of its own). A mock engine of known latencies: what each client should read."""

    tokens, ttft, itl = 32, 0.002, 0.002

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport: asyncio.Transport = transport  # type: ignore[assignment]
        self.buffer = b""

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while (end := self.buffer.find(b"\r\n\r\n")) >= 0:
            head = self.buffer[:end].lower()
            at = head.find(b"content-length:")
            length = int(head[at + 15:].split(b"\r\n", 1)[0]) if at >= 0 else 0
            if len(self.buffer) < end + 4 + length:
                return
            self.buffer = self.buffer[end + 4 + length:]
            asyncio.ensure_future(self.answer())

    async def answer(self) -> None:
        def chunk(data: bytes) -> bytes:
            return b"%x\r\n%s\r\n" % (len(data), data)
        self.transport.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; "
                             b"charset=utf-8\r\ntransfer-encoding: chunked\r\n\r\n")
        for k in range(self.tokens):
            await asyncio.sleep(self.itl if k else self.ttft)
            self.transport.write(chunk(_TOKEN))
        self.transport.write(chunk(_USAGE) + chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n")


def _serve_chunked(sock: socket.socket, ttft: float = 0.002, itl: float = 0.002) -> None:
    _ChunkedSse.ttft, _ChunkedSse.itl = ttft, itl

    async def serve() -> None:
        server = await asyncio.get_running_loop().create_server(_ChunkedSse, sock=sock)
        await server.serve_forever()
    asyncio.run(serve())


def client_cost(num_requests: int, rate: float) -> float:
    """Our runner's CPU milliseconds per request (32 token chunks each) against a local
    chunked-SSE server in another process: the client's own cost, apart from any engine."""
    import multiprocessing

    from monitor.loadgen.runner import Endpoint, Limits, run_load
    from monitor.loadgen.workload import RequestSpec

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(256)
    server = multiprocessing.Process(target=_serve_chunked, args=(sock,), daemon=True)
    server.start()
    try:
        endpoint = Endpoint(f"http://127.0.0.1:{sock.getsockname()[1]}", "tiny")
        specs = [RequestSpec(k / rate, "x" * 256, 32) for k in range(num_requests)]
        asyncio.run(run_load(endpoint, specs[:5], Limits(num_requests=5)))   # warm
        cpu = time.process_time()
        result = asyncio.run(run_load(endpoint, specs, Limits(num_requests=num_requests),
                                      rate=rate))
        cpu = time.process_time() - cpu
    finally:
        server.terminate()
        server.join()
    if not all(r.ok and len(r.chunk_times) == 32 for r in result.records):
        raise RuntimeError("the local server's answers were not all read whole")
    return cpu / num_requests * 1000


# --- running a client and measuring its CPU --------------------------------------------------

def proc_cpu_seconds(pid: int) -> float | None:
    """utime + stime of a process (all its threads) from /proc/<pid>/stat, else None."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return parse_proc_stat(text)


def parse_proc_stat(text: str) -> float:
    fields = text[text.rindex(")") + 2:].split()   # the name in () may hold spaces
    ticks = int(fields[11]) + int(fields[12])     # utime, stime: fields 14 and 15 of stat
    return ticks / os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True, slots=True)
class ClientRun:
    client: str
    figures: dict[str, float]
    load_cpu_seconds: float            # between the markers
    total_cpu_seconds: float           # the whole process, imports included
    load_wall_seconds: float
    cpu_ms_per_request: float


def run_client(command: Sequence[str], start_mark: str, end_mark: str,
               env: dict[str, str] | None = None, echo: bool = False
               ) -> tuple[str, float, float, float]:
    """Run ``command``; its stdout, CPU seconds and wall seconds between the lines holding
    ``start_mark`` and ``end_mark``, and the whole process's CPU seconds."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True, env=env, cwd=REPO)
    assert process.stdout is not None
    lines: list[str] = []
    marks: dict[str, tuple[float, float]] = {}
    for line in process.stdout:
        for mark in (start_mark, end_mark):
            if mark in line and mark not in marks:
                marks[mark] = (proc_cpu_seconds(process.pid) or math.nan, time.perf_counter())
        lines.append(line)
        if echo:
            sys.stderr.write(line)
    code = process.wait()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    output = "".join(lines)
    if code != 0 or len(marks) != 2:
        raise RuntimeError(f"{command[0]} exited with {code} (load markers seen: "
                           f"{sorted(marks)}); its output ends:\n{output[-3000:]}")
    total = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    (cpu0, t0), (cpu1, t1) = marks[start_mark], marks[end_mark]
    return output, cpu1 - cpu0, total, t1 - t0


def vllm_command(url: str, served_model: str, model_dir: Path, rate: float, input_len: int,
                 output_len: int, num_requests: int, seed: int, result: Path) -> list[str]:
    return [str(vllm_venv() / "bin" / "vllm"), "bench", "serve", "--backend", "openai",
            "--base-url", url, "--endpoint", "/v1/completions", "--model", served_model,
            "--tokenizer", str(model_dir), "--dataset-name", "random",
            "--random-input-len", str(input_len), "--random-output-len", str(output_len),
            "--random-range-ratio", "0", "--request-rate", f"{rate:g}",
            "--num-prompts", str(num_requests), "--ignore-eos", "--seed", str(seed),
            "--percentile-metrics", "ttft,tpot,itl,e2el", "--metric-percentiles", "50,99",
            "--disable-tqdm", "--save-result", "--result-dir", str(result.parent),
            "--result-filename", result.name]


def our_command(url: str, served_model: str, rate: float, seed: int, prompts: Path,
                result: Path) -> list[str]:
    return [sys.executable, "-m", "bench.loadgen_vs_vllm", "client", "--url", url,
            "--served-model", served_model, "--rate", f"{rate:g}", "--seed", str(seed),
            "--prompts", str(prompts), "--result", str(result)]


def measure(client: str, args: argparse.Namespace, url: str, prompts: Path,
            workdir: Path, repetition: int) -> ClientRun:
    result = workdir / f"{client}-{repetition}.json"
    env = _offline_env() | {"PYTHONPATH": str(REPO)}
    if client == "vllm":
        command = vllm_command(url, args.served_model, args.model_dir, args.rate,
                               args.input_len, args.output_len, args.num_requests, args.seed,
                               result)
        marks = (VLLM_START_MARK, VLLM_END_MARK)
    else:
        command = our_command(url, args.served_model, args.rate, args.seed, prompts, result)
        marks = (START_MARK, END_MARK)
    _, load_cpu, total_cpu, wall = run_client(command, *marks, env=env, echo=args.verbose)
    doc = json.loads(result.read_text())
    figures = vllm_figures(doc) if client == "vllm" else doc
    return ClientRun(client, figures, load_cpu, total_cpu, wall,
                     load_cpu / args.num_requests * 1000)


# --- the table -------------------------------------------------------------------------------

def ratios(ours: dict[str, float], theirs: dict[str, float]) -> dict[str, float]:
    """ours / vLLM's for every figure of ROWS both have."""
    return {key: ours[key] / theirs[key] for _, key in ROWS
            if key in ours and key in theirs and theirs[key]}


def table(repetitions: Sequence[dict[str, ClientRun]]) -> str:
    """Per repetition: vLLM's figure, ours, ours/vLLM; then the ratio of the means over the
    repetitions, the figures off by more than the target, and each client's CPU per request."""
    header = "".join(f" | rep {k + 1}:   vLLM     ours  ratio" for k in range(len(repetitions)))
    lines = [f"{'figure':<14}{header} | means: vLLM     ours  ratio",
             "-" * (14 + 33 * len(repetitions) + 30)]
    missed = []
    for name, key in ROWS:
        cells, theirs_all, ours_all = [], [], []
        for rep in repetitions:
            theirs, ours = rep["vllm"].figures.get(key), rep["inferwatch"].figures.get(key)
            if theirs is None or ours is None:
                cells.append(f" | {'-':>11} {'-':>8} {'-':>6}")
                continue
            theirs_all.append(theirs)
            ours_all.append(ours)
            cells.append(f" | {theirs:11.2f} {ours:8.2f} {_ratio(ours, theirs)}")
        if not theirs_all:
            continue
        theirs_mean, ours_mean = statistics.fmean(theirs_all), statistics.fmean(ours_all)
        ratio = ours_mean / theirs_mean if theirs_mean else math.inf
        if not abs(ratio - 1) <= TARGET:
            missed.append(f"{name} {ratio - 1:+.1%}")
        lines.append(f"{name:<14}{''.join(cells)} | {theirs_mean:11.2f} {ours_mean:8.2f} "
                     f"{_ratio(ours_mean, theirs_mean)}")
    extra = [rep["inferwatch"].figures.get("e2e_last_token_p50") for rep in repetitions]
    if all(x is not None for x in extra):
        lines.append("ours, E2E p50 to the last token chunk (vLLM's E2E), ms: "
                     + ", ".join(f"{x:.2f}" for x in extra if x is not None))
    splits = [rep["inferwatch"].figures for rep in repetitions
              if "split_frontend_overhead_p50" in rep["inferwatch"].figures]
    if splits:
        lines.append("ours, client TTFT split by vLLM's per-request metrics, p50/p99 ms: "
                     + "; ".join(", ".join(
                         f"{label} {f[f'split_{key}_p50']:.2f}/{f[f'split_{key}_p99']:.2f}"
                         for label, key in (("TTFT", "ttft"), ("queue", "server_queue"),
                                            ("prefill", "server_prefill"),
                                            ("frontend+network", "frontend_overhead")))
                         for f in splits))
    for client in CLIENTS:
        cpu = [rep[client].cpu_ms_per_request for rep in repetitions]
        total = [rep[client].total_cpu_seconds for rep in repetitions]
        lines.append(f"CPU per request during the load, {client:<10}: "
                     + ", ".join(f"{x:.2f} ms" for x in cpu)
                     + "  (whole process: " + ", ".join(f"{x:.1f} s" for x in total) + ")")
    verdict = "met" if not missed else "not met: " + ", ".join(missed)
    lines.append(f"goal (every mean within {TARGET:.0%}): {verdict}")
    return "\n".join(lines)


def _ratio(ours: float, theirs: float) -> str:
    return f"{ours / theirs:6.3f}" if theirs else f"{'inf':>6}"


def runs_of(document: dict[str, Any]) -> list[dict[str, ClientRun]]:
    """The repetitions of a JSON this bench wrote."""
    return [{client: ClientRun(**run) for client, run in rep.items()}
            for rep in document["repetitions"]]


@contextmanager
def server(args: argparse.Namespace) -> Iterator[str]:
    if args.mock:
        import multiprocessing
        ttft_ms, itl_ms = (float(x) for x in args.mock.split(","))
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        sock.listen(256)
        mock = multiprocessing.Process(target=_serve_chunked, daemon=True,
                                       args=(sock, ttft_ms / 1000, itl_ms / 1000))
        mock.start()
        try:
            yield f"http://127.0.0.1:{sock.getsockname()[1]}"
        finally:
            mock.terminate()
            mock.join()
        return
    if args.url:
        yield args.url.rstrip("/")
        return
    sys.path.insert(0, str(REPO))
    from tests.live.vllm_server import running_vllm
    print("starting vllm serve (1-4 minutes on a loaded 2-core machine)...", file=sys.stderr)
    # Per-request metrics: our client's client-vs-server split (engine queue, prefill, the rest).
    with running_vllm("--enable-per-request-metrics", compiled=True) as running:
        args.served_model = running.model
        yield running.url


def bench_main(args: argparse.Namespace) -> int:
    from bench.cpu_meter import OtherCpuMeter

    args.out.parent.mkdir(parents=True, exist_ok=True)
    repetitions: list[dict[str, ClientRun]] = []
    with tempfile.TemporaryDirectory(prefix="loadgen-vs-vllm-") as tmp, server(args) as url:
        workdir = Path(tmp)
        prompts = workdir / "prompts.jsonl"
        write_prompts(prompts, args.num_requests, args.input_len, args.output_len, args.seed,
                      args.model_dir)
        meter = OtherCpuMeter()
        for repetition in range(args.repetitions):
            order = CLIENTS if repetition % 2 == 0 else CLIENTS[::-1]
            runs = {}
            for client in order:
                runs[client] = measure(client, args, url, prompts, workdir, repetition)
                print(f"rep {repetition + 1} {client}: TTFT p50 "
                      f"{runs[client].figures.get('ttft_p50', math.nan):.2f} ms, CPU "
                      f"{runs[client].cpu_ms_per_request:.2f} ms/request", file=sys.stderr)
            repetitions.append(runs)
        others = meter.cores()
    text = table(repetitions)
    print(text)
    if others is not None:
        print(f"other processes kept {others:.2f} cores busy on average (this bench's "
              "children and the server included)")
    document = {
        "label": args.label, "url": args.url, "mock": args.mock, "rate": args.rate,
        "input_len": args.input_len,
        "output_len": args.output_len, "num_requests": args.num_requests, "seed": args.seed,
        "unix_time": time.time(), "other_cores_busy": others,
        "repetitions": [{client: asdict(run) for client, run in rep.items()}
                        for rep in repetitions],
        "ratios": [ratios(rep["inferwatch"].figures, rep["vllm"].figures)
                   for rep in repetitions],
        "table": text,
    }
    args.out.write_text(json.dumps(document, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command")
    client = sub.add_parser("client", help="(internal) our client, run by the bench")
    client.add_argument("--url", required=True)
    client.add_argument("--served-model", required=True)
    client.add_argument("--rate", type=float, required=True)
    client.add_argument("--seed", type=int, default=0)
    client.add_argument("--prompts", required=True)
    client.add_argument("--result", required=True)
    p.add_argument("--url", help="a running vLLM (default: start one on the tiny model)")
    p.add_argument("--served-model", default="tiny")
    p.add_argument("--model-dir", type=Path, default=tiny_model(),
                   help="the model's directory (vLLM's tokenizer)")
    p.add_argument("--rate", type=float, default=2.0)
    p.add_argument("--input-len", type=int, default=64)
    p.add_argument("--output-len", type=int, default=32)
    p.add_argument("--num-requests", type=int, default=60)
    p.add_argument("--repetitions", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--label", default="", help="recorded in the JSON (e.g. before/after)")
    p.add_argument("--out", type=Path, default=REPO / "bench" / "out" / "loadgen_vs_vllm.json")
    p.add_argument("--verbose", action="store_true", help="echo the clients' output")
    p.add_argument("--mock", metavar="TTFT_MS,ITL_MS",
                   help="instead of vLLM, a mock engine answering 32 tokens with these fixed "
                   "latencies (the truth both clients should read)")
    p.add_argument("--client-cost", type=int, metavar="N",
                   help="only our client's CPU per request: N requests against a local "
                   "chunked-SSE server at --rate x 25 (no vLLM)")
    p.add_argument("--table", type=Path, nargs="+",
                   help="print the table of earlier JSON results (their repetitions pooled)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.client_cost:
        print(f"our client: {client_cost(args.client_cost, args.rate * 25):.3f} ms CPU "
              "per request of 32 streamed chunks")
        return 0
    if args.table:
        print(table([rep for path in args.table for rep in runs_of(json.loads(path.read_text()))]))
        return 0
    run: Callable[[argparse.Namespace], int] = client_main if args.command == "client" \
        else bench_main
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
