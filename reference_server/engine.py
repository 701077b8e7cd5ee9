"""The engine loop body: ``step()`` = schedule -> run -> postprocess, measured at each seam."""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Sequence as SeqOf

import torch

from exporters.instrumentation import EngineMetrics, RequestStats, StepStats
from reference_server.block_manager import BlockManager
from reference_server.config import EngineConfig
from reference_server.errors import InvalidRequest
from reference_server.faults import FaultInjector, FaultKind
from reference_server.model import LlamaForCausalLM, kv_cache_bytes_per_block
from reference_server.model_runner import ModelRunner
from reference_server.outputs import RequestOutput
from reference_server.sampling import SamplingParams
from reference_server.scheduler import SchedulerLimits, SchedulerOutput, make_scheduler
from reference_server.sequence import FinishReason, Sequence, SequenceStatus
from reference_server.stop import append_text, finish_reason_for_token
from reference_server.tokenizer import IncrementalDetokenizer, Tokenizer

logger = logging.getLogger(__name__)

TIMEOUT_CHECK_INTERVAL_SECONDS = 0.1


def num_kv_blocks_for(config: EngineConfig, model: LlamaForCausalLM) -> int:
    if config.num_kv_blocks is not None:
        return config.num_kv_blocks
    dtype = next(model.parameters()).dtype
    per_block = kv_cache_bytes_per_block(model.config, config.block_size, dtype)
    num = config.kv_cache_bytes // per_block
    if num < 1:
        raise ValueError(f"kv_cache_bytes={config.kv_cache_bytes} holds no block of "
                         f"{per_block} bytes")
    return num


class LLMEngine:
    def __init__(
        self, config: EngineConfig, model: LlamaForCausalLM, tokenizer: Tokenizer,
        metrics: EngineMetrics, faults: FaultInjector | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.config = config
        self.tokenizer = tokenizer
        self.metrics = metrics
        self.faults = faults or FaultInjector(clock)
        self.clock = clock
        self.num_kv_blocks = num_kv_blocks_for(config, model)
        self.block_manager = BlockManager(self.num_kv_blocks, config.block_size,
                                          config.enable_prefix_caching)
        limits = SchedulerLimits(config.max_num_seqs, config.max_num_batched_tokens,
                                 config.enable_chunked_prefill,
                                 config.static_batch_timeout_seconds)
        self.scheduler = make_scheduler(config.batching, limits, self.block_manager)
        self.runner = ModelRunner(model, self.num_kv_blocks, config.block_size)
        model_limit = config.max_model_len or model.config.max_position_embeddings
        # A request must fit in the KV pool on its own, whatever the model allows.
        self.max_model_len = min(model_limit, self.num_kv_blocks * config.block_size)
        self.sequences: dict[str, Sequence] = {}
        self._next_timeout_check = 0.0
        self._rng = random.Random(config.seed)

    # --- admission ----------------------------------------------------------------------------
    def validate(self, prompt_token_ids: SeqOf[int], sampling: SamplingParams) -> None:
        num_prompt = len(prompt_token_ids)
        if num_prompt == 0:
            raise InvalidRequest("the prompt is empty", param="prompt")
        if num_prompt >= self.max_model_len:
            raise InvalidRequest(
                f"the prompt has {num_prompt} tokens; this model's context is "
                f"{self.max_model_len} tokens and at least one must be left to generate",
                param="prompt")
        if num_prompt + sampling.max_tokens > self.max_model_len:
            raise InvalidRequest(
                f"max_tokens={sampling.max_tokens} plus the prompt's {num_prompt} tokens "
                f"exceeds the context of {self.max_model_len} tokens", param="max_tokens")
        vocab = self.runner.model.config.vocab_size
        if any(not 0 <= t < vocab for t in prompt_token_ids):
            raise InvalidRequest(f"prompt token ids must be in [0, {vocab})", param="prompt")

    def add_request(
        self, request_id: str, prompt_token_ids: SeqOf[int], sampling: SamplingParams,
        arrival_time: float | None = None,
    ) -> Sequence:
        if request_id in self.sequences:
            raise InvalidRequest(f"request id {request_id!r} is already in the engine")
        self.validate(prompt_token_ids, sampling)
        if not sampling.eos_token_ids:
            sampling.eos_token_ids = tuple(self.tokenizer.eos_token_ids)
        now = self.clock() if arrival_time is None else arrival_time
        seq = Sequence(request_id, list(prompt_token_ids), sampling, now)
        if sampling.seed is not None:
            seq.generator = torch.Generator(device=self.runner.device).manual_seed(sampling.seed)
        seq.detokenizer = IncrementalDetokenizer(self.tokenizer, prompt_token_ids)
        error_rate = self.faults.value(FaultKind.ERROR_RATE)
        seq.fail_on_first_step = error_rate is not None and self._rng.random() < error_rate
        self.sequences[request_id] = seq
        self.scheduler.add(seq)
        return seq

    def abort_request(self, request_id: str) -> RequestOutput | None:
        seq = self.sequences.get(request_id)
        if seq is None:
            return None
        return self._finish(seq, FinishReason.ABORT, self.clock())

    def has_unfinished_requests(self) -> bool:
        return self.scheduler.has_unfinished()

    # --- the step -----------------------------------------------------------------------------
    def step(self) -> list[RequestOutput]:
        t_start = self.clock()
        stalled = self.faults.stalled_until()
        if stalled is not None:
            time.sleep(min(0.05, max(0.0, stalled - t_start)))
            return []
        outputs = self._expire_timeouts(t_start)
        self._apply_kv_squeeze()
        outputs += self._fail_injected(t_start)
        sched = self.scheduler.schedule(t_start)
        t_scheduled = self.clock()
        if sched.is_empty:
            return outputs
        num_decode = sum(1 for item in sched.scheduled if item.is_decode)
        stats = self._step_stats(sched, num_decode)
        try:
            tokens = self._run(sched)
        except Exception as exc:  # noqa: BLE001 - one bad step fails only its own requests
            outputs += self._fail_step(sched, exc)
            self._record_step(stats, [t_start, t_scheduled, self.clock(), self.clock()])
            return outputs
        t_ran = self.clock()
        outputs += self._postprocess(sched, tokens, t_ran, stats.inter_token_latencies)
        stats.num_generation_tokens = sum(1 for t in tokens if t is not None)
        self._record_step(stats, [t_start, t_scheduled, t_ran, self.clock()])
        return outputs

    def _run(self, sched: SchedulerOutput) -> list[int | None]:
        started = time.perf_counter()
        tokens = self.runner.execute(sched.scheduled)
        slowdown = self.faults.value(FaultKind.SLOWDOWN)
        if slowdown is not None:
            time.sleep((slowdown - 1.0) * (time.perf_counter() - started))
        latency = self.faults.value(FaultKind.LATENCY)
        if latency:
            time.sleep(latency)
        return tokens

    def _postprocess(
        self, sched: SchedulerOutput, tokens: list[int | None], now: float, itls: list[float],
    ) -> list[RequestOutput]:
        outputs: list[RequestOutput] = []
        for item, token in zip(sched.scheduled, tokens, strict=True):
            seq = item.seq
            seq.num_computed_tokens += item.num_new_tokens
            self.block_manager.commit_full_blocks(seq)
            if token is None:
                continue  # a prefill chunk that is not the prompt's last
            outputs.append(self._append_token(seq, token, now, itls))
        return outputs

    def _append_token(self, seq: Sequence, token: int, now: float,
                      itls: list[float]) -> RequestOutput:
        seq.token_ids.append(token)
        if seq.first_token_time is None:
            seq.first_token_time = now
        elif seq.last_token_time is not None:
            itls.append(now - seq.last_token_time)
        seq.last_token_time = now
        reason = finish_reason_for_token(seq, token, self.max_model_len)
        detokenizer = seq.detokenizer
        assert detokenizer is not None, "set in add_request"
        # A stop token (EOS or a stop_token_id) ends the text; it is not part of it.
        text = detokenizer.push(token) if reason is not FinishReason.STOP else ""
        if reason is not None:
            text += detokenizer.flush()
        delta, hit_stop = append_text(seq, text, finishing=reason is not None)
        if hit_stop:
            reason = FinishReason.STOP
        if reason is None:
            return self._output(seq, delta, [token])
        out = self._finish(seq, reason, now)
        out.text, out.token_ids = delta + out.text, [token]
        return out

    # --- finishing ----------------------------------------------------------------------------
    def _finish(self, seq: Sequence, reason: FinishReason, now: float,
                error_type: str | None = None, message: str | None = None) -> RequestOutput:
        self.scheduler.remove(seq)
        seq.status = SequenceStatus.FINISHED
        seq.finish_reason, seq.finish_time = reason, now
        seq.error_type, seq.error_message = error_type, message
        self.sequences.pop(seq.request_id, None)
        self.metrics.record_request(_request_stats(seq))
        remainder = seq.output_text[seq.num_emitted_chars:] if error_type is None else ""
        return self._output(seq, remainder, [], finished=True)

    def _output(self, seq: Sequence, text: str, token_ids: list[int],
                finished: bool = False) -> RequestOutput:
        return RequestOutput(
            seq.request_id, text, token_ids, finished,
            seq.finish_reason.value if finished and seq.finish_reason else None,
            seq.error_type, seq.error_message, seq.num_prompt_tokens, seq.num_output_tokens,
            seq.num_cached_tokens)

    def _fail_step(self, sched: SchedulerOutput, exc: Exception) -> list[RequestOutput]:
        oom = isinstance(exc, torch.OutOfMemoryError) or "out of memory" in str(exc).lower()
        error_type = "oom" if oom else "model_error"
        logger.exception("engine step failed for %d request(s); failing them with %s",
                         len(sched.scheduled), error_type)
        now = self.clock()
        message = f"{error_type}: {type(exc).__name__}: {exc}"
        return [self._finish(item.seq, FinishReason.ERROR, now, error_type, message)
                for item in sched.scheduled if not item.seq.is_finished]

    def fail_all(self, message: str) -> list[RequestOutput]:
        """Fail every request in the engine (used when a step crashed outside the run)."""
        now = self.clock()
        return [self._finish(seq, FinishReason.ERROR, now, "model_error", message)
                for seq in list(self.sequences.values())]

    def _fail_injected(self, now: float) -> list[RequestOutput]:
        if not self.scheduler.waiting or not self.scheduler.waiting[0].fail_on_first_step:
            return []
        outputs = []
        while self.scheduler.waiting and self.scheduler.waiting[0].fail_on_first_step:
            seq = self.scheduler.waiting[0]
            outputs.append(self._finish(seq, FinishReason.ERROR, now, "model_error",
                                        "model_error: injected fault (error_rate)"))
        return outputs

    def _expire_timeouts(self, now: float) -> list[RequestOutput]:
        if now < self._next_timeout_check:
            return []
        self._next_timeout_check = now + TIMEOUT_CHECK_INTERVAL_SECONDS
        limit = self.config.request_timeout_seconds
        expired = [s for s in self.sequences.values() if now - s.arrival_time > limit]
        return [self._finish(s, FinishReason.TIMEOUT, now, "timeout",
                             f"timeout: the request ran past {limit:g} s") for s in expired]

    def _apply_kv_squeeze(self) -> None:
        fraction = self.faults.value(FaultKind.KV_SQUEEZE)
        self.block_manager.num_withheld_blocks = int((fraction or 0.0) * self.num_kv_blocks)

    # --- metrics ------------------------------------------------------------------------------
    def _step_stats(self, sched: SchedulerOutput, num_decode: int) -> StepStats:
        num_tokens = sum(item.num_new_tokens for item in sched.scheduled)
        return StepStats(
            num_running=0, num_waiting=0, num_swapped=0, batch_size=len(sched.scheduled),
            num_prefill_tokens=num_tokens - num_decode, num_decode_tokens=num_decode,
            num_cached_prompt_tokens=sched.num_cached_tokens,
            num_preemptions=len(sched.preempted), kv_blocks_used=0,
            kv_blocks_total=self.block_manager.num_blocks, schedule_seconds=0.0,
            run_seconds=0.0, postprocess_seconds=0.0, inter_token_latencies=[],
            num_generation_tokens=0)

    def _record_step(self, stats: StepStats, times: list[float]) -> None:
        """Fill in the state after the step and the seam timings, then publish."""
        stats.num_running = self.scheduler.num_running
        stats.num_waiting = self.scheduler.num_waiting
        stats.kv_blocks_used = self.block_manager.num_used_blocks
        stats.schedule_seconds = times[1] - times[0]
        stats.run_seconds = times[2] - times[1]
        stats.postprocess_seconds = times[3] - times[2]
        self.metrics.record_step(stats)

    def record_idle(self) -> None:
        """Publish gauges once when the engine goes idle, so they do not stay stale."""
        bm = self.block_manager
        self.metrics.record_step(StepStats(
            num_running=self.scheduler.num_running, num_waiting=self.scheduler.num_waiting,
            num_swapped=0, batch_size=0, num_prefill_tokens=0, num_decode_tokens=0,
            num_cached_prompt_tokens=0, num_preemptions=0, kv_blocks_used=bm.num_used_blocks,
            kv_blocks_total=bm.num_blocks, schedule_seconds=0.0, run_seconds=0.0,
            postprocess_seconds=0.0, inter_token_latencies=[], num_generation_tokens=0))


def _request_stats(seq: Sequence) -> RequestStats:
    first_token, last_token = seq.first_token_time, seq.last_token_time
    scheduled = seq.first_scheduled_time
    assert seq.finish_time is not None and seq.finish_reason is not None
    return RequestStats(
        finish_reason=seq.finish_reason.value, error_type=seq.error_type,
        num_prompt_tokens=seq.num_prompt_tokens, num_generation_tokens=seq.num_output_tokens,
        queue_seconds=None if scheduled is None else scheduled - seq.arrival_time,
        ttft_seconds=None if first_token is None else first_token - seq.arrival_time,
        prefill_seconds=None if first_token is None or scheduled is None
        else first_token - scheduled,
        decode_seconds=None if first_token is None or last_token is None
        else last_token - first_token,
        e2e_seconds=seq.finish_time - seq.arrival_time,
    )
