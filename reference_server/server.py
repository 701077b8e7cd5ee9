"""Builds the whole reference server from one EngineConfig: model, tokenizer, engine,
metrics registry and the FastAPI app."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import torch
from fastapi import FastAPI
from prometheus_client import CollectorRegistry

from exporters.gpu import GpuCollector
from exporters.instrumentation import EngineMetrics, NullEngineMetrics, PrometheusEngineMetrics
from reference_server.api import create_app
from reference_server.async_engine import AsyncEngine
from reference_server.config import EngineConfig
from reference_server.engine import LLMEngine, num_kv_blocks_for
from reference_server.model import (
    BUILTIN_MODELS, LlamaForCausalLM, init_random_weights, kv_cache_bytes_per_block,
)
from reference_server.tokenizer import ByteTokenizer, Tokenizer, load_tokenizer
from reference_server.weights import load_hf_checkpoint

logger = logging.getLogger(__name__)

_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def resolve_device(name: str) -> torch.device:
    device = torch.device(name)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"--device {name}: CUDA is not available on this machine")
    return device


def load_model(config: EngineConfig) -> tuple[LlamaForCausalLM, Tokenizer]:
    """A built-in model with seeded random weights, or a HF Llama checkpoint directory."""
    device, dtype = resolve_device(config.device), _DTYPES[config.dtype]
    if config.model in BUILTIN_MODELS:
        model = LlamaForCausalLM(BUILTIN_MODELS[config.model])
        init_random_weights(model, config.seed)
        tokenizer: Tokenizer = ByteTokenizer()
    elif Path(config.model).is_dir():
        model = load_hf_checkpoint(config.model, dtype=dtype, device=device)
        tokenizer = load_tokenizer(config.model)
    else:
        raise ValueError(f"--model {config.model!r} is neither a built-in model "
                         f"({', '.join(BUILTIN_MODELS)}) nor a checkpoint directory")
    return model.to(device=device, dtype=dtype).eval(), tokenizer


def kv_cache_bytes(config: EngineConfig, model: LlamaForCausalLM, num_kv_blocks: int) -> int:
    dtype = next(model.parameters()).dtype
    return num_kv_blocks * kv_cache_bytes_per_block(model.config, config.block_size, dtype)


def make_metrics(config: EngineConfig, kv_bytes: int,
                 registry: CollectorRegistry) -> EngineMetrics:
    if not config.enable_metrics:
        return NullEngineMetrics()
    return PrometheusEngineMetrics(
        registry, model=config.model_name, max_num_seqs=config.max_num_seqs,
        max_num_batched_tokens=config.max_num_batched_tokens,
        kv_block_size=config.block_size, kv_cache_bytes=kv_bytes)


def make_gpu_collector(config: EngineConfig, kv_bytes: int) -> GpuCollector:
    """GPU series for /metrics: the host's GPUs through NVML (gpu_up 0 where there are none),
    with the KV pool's share of the serving device's memory."""
    device = resolve_device(config.device)
    if device.type != "cuda":
        return GpuCollector()
    index = device.index if device.index is not None else torch.cuda.current_device()
    return GpuCollector(kv_cache_bytes=lambda: {index: kv_bytes})


@dataclass(slots=True)
class ReferenceServer:
    app: FastAPI
    engine: AsyncEngine
    registry: CollectorRegistry


def build_engine(config: EngineConfig, registry: CollectorRegistry | None = None,
                 ) -> tuple[LLMEngine, CollectorRegistry]:
    if config.num_threads:
        torch.set_num_threads(config.num_threads)
    model, tokenizer = load_model(config)
    registry = registry or CollectorRegistry()
    kv_bytes = kv_cache_bytes(config, model, num_kv_blocks_for(config, model))
    metrics = make_metrics(config, kv_bytes, registry)
    if config.enable_metrics:
        registry.register(make_gpu_collector(config, kv_bytes))
    return LLMEngine(config, model, tokenizer, metrics), registry


def build_server(config: EngineConfig) -> ReferenceServer:
    engine, registry = build_engine(config)
    async_engine = AsyncEngine(engine)
    return ReferenceServer(create_app(async_engine, engine.metrics, registry), async_engine,
                           registry)
