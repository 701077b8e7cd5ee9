"""`inferwatch reference-server`: command-line flags -> EngineConfig -> uvicorn."""

from __future__ import annotations

import argparse
import logging
import sys

import uvicorn
from prometheus_client import disable_created_metrics

from reference_server.config import EngineConfig
from exporters.sockets import bind_socket
from reference_server.server import build_server

logger = logging.getLogger(__name__)


def add_arguments(p: argparse.ArgumentParser) -> None:
    d = EngineConfig()
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000, help="0 picks a free port")
    p.add_argument("--model", default=d.model, help="tiny | small | a HF Llama checkpoint dir")
    p.add_argument("--served-model-name", default=None)
    p.add_argument("--device", default=d.device, help="cpu | cuda | cuda:N")
    p.add_argument("--dtype", default=d.dtype, choices=["float32", "bfloat16", "float16"])
    p.add_argument("--seed", type=int, default=d.seed, help="seed of built-in random weights")
    p.add_argument("--block-size", type=int, default=d.block_size)
    p.add_argument("--num-kv-blocks", type=int, default=None)
    p.add_argument("--kv-cache-bytes", type=int, default=d.kv_cache_bytes)
    p.add_argument("--max-model-len", type=int, default=None)
    p.add_argument("--max-num-seqs", type=int, default=d.max_num_seqs)
    p.add_argument("--max-num-batched-tokens", type=int, default=d.max_num_batched_tokens)
    p.add_argument("--no-chunked-prefill", action="store_true")
    p.add_argument("--no-prefix-caching", action="store_true")
    p.add_argument("--batching", default=d.batching, choices=["continuous", "static"])
    p.add_argument("--static-batch-timeout", type=float, default=d.static_batch_timeout_seconds)
    p.add_argument("--max-queue", type=int, default=d.max_queue)
    p.add_argument("--request-timeout", type=float, default=d.request_timeout_seconds)
    p.add_argument("--enable-fault-injection", action="store_true")
    p.add_argument("--admin-token", default=None,
                   help="bearer token of /admin/faults (default: random, printed at start)")
    p.add_argument("--disable-metrics", action="store_true")
    p.add_argument("--num-threads", type=int, default=None)


def config_from_args(args: argparse.Namespace) -> EngineConfig:
    extra = {"admin_token": args.admin_token} if args.admin_token else {}
    return EngineConfig(
        model=args.model, served_model_name=args.served_model_name, device=args.device,
        dtype=args.dtype, seed=args.seed, block_size=args.block_size,
        num_kv_blocks=args.num_kv_blocks, kv_cache_bytes=args.kv_cache_bytes,
        max_model_len=args.max_model_len, max_num_seqs=args.max_num_seqs,
        max_num_batched_tokens=args.max_num_batched_tokens,
        enable_chunked_prefill=not args.no_chunked_prefill,
        enable_prefix_caching=not args.no_prefix_caching, batching=args.batching,
        static_batch_timeout_seconds=args.static_batch_timeout, max_queue=args.max_queue,
        request_timeout_seconds=args.request_timeout,
        enable_fault_injection=args.enable_fault_injection,
        enable_metrics=not args.disable_metrics, num_threads=args.num_threads, **extra)


def run(args: argparse.Namespace) -> int:
    try:
        config = config_from_args(args)
        server = build_server(config)
    except ValueError as exc:
        print(f"inferwatch reference-server: {exc}", file=sys.stderr)
        return 2
    # No *_created series. Process-wide, so it is set here at the entry point.
    disable_created_metrics()  # type: ignore[no-untyped-call]
    sock = bind_socket(args.host, args.port)
    host, port = sock.getsockname()[:2]
    engine = server.engine.engine
    print(f"reference server: model={config.model_name} batching={config.batching} "
          f"kv_blocks={engine.num_kv_blocks}x{config.block_size} "
          f"max_model_len={engine.max_model_len}", flush=True)
    if config.enable_fault_injection:
        print(f"fault injection on: POST /admin/faults with 'Authorization: Bearer "
              f"{config.admin_token}'", flush=True)
    print(f"listening on http://{host}:{port}", flush=True)
    uv = uvicorn.Server(uvicorn.Config(server.app, log_level="warning", access_log=False))
    uv.run(sockets=[sock])
    return 0
