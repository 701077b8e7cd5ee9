"""Iteration-level schedulers: continuous batching (default) and classic static batching.

Each engine step asks the scheduler which sequences run and how many of their tokens are
computed. Continuous batching re-decides every step: running sequences first (decode or the
next prefill chunk), then waiting ones FIFO while the token budget, the sequence limit and
the KV pool allow. When blocks run out, the most recently admitted sequence is preempted
by recompute. Static batching waits for a full batch (or a timeout), then runs it until its
longest member finishes, admitting nothing meanwhile.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from reference_server.block_manager import BlockManager
from reference_server.sequence import Sequence, SequenceStatus


@dataclass(slots=True)
class ScheduledSequence:
    seq: Sequence
    num_new_tokens: int

    @property
    def is_decode(self) -> bool:
        return (self.num_new_tokens == 1 and self.seq.num_uncomputed_tokens == 1
                and self.seq.num_output_tokens > 0)


@dataclass(slots=True)
class SchedulerOutput:
    scheduled: list[ScheduledSequence] = field(default_factory=list)
    preempted: list[Sequence] = field(default_factory=list)
    num_cached_tokens: int = 0

    @property
    def is_empty(self) -> bool:
        return not self.scheduled


@dataclass(frozen=True, slots=True)
class SchedulerLimits:
    max_num_seqs: int
    max_num_batched_tokens: int
    enable_chunked_prefill: bool = True
    static_batch_timeout_seconds: float = 0.05


class Scheduler:
    """State shared by both policies: the waiting queue and the running list."""

    def __init__(self, limits: SchedulerLimits, block_manager: BlockManager) -> None:
        self.limits = limits
        self.block_manager = block_manager
        self.waiting: deque[Sequence] = deque()
        self.running: list[Sequence] = []
        # Keep a few blocks free at admission so running sequences can grow without
        # immediately preempting someone (vLLM uses 1% as well).
        self.watermark_blocks = max(1, block_manager.num_blocks // 100)

    @property
    def num_waiting(self) -> int:
        return len(self.waiting)

    @property
    def num_running(self) -> int:
        return len(self.running)

    def has_unfinished(self) -> bool:
        return bool(self.waiting or self.running)

    def add(self, seq: Sequence) -> None:
        self.waiting.append(seq)

    def remove(self, seq: Sequence) -> None:
        """Drop a sequence that finished, failed or was aborted, releasing its blocks."""
        if seq.status is SequenceStatus.RUNNING:
            self.running.remove(seq)
        elif seq in self.waiting:
            self.waiting.remove(seq)
        self.block_manager.free(seq)

    def next_wakeup(self, now: float) -> float | None:
        """When an idle engine should look again even if nothing arrives (static timeout)."""
        return None

    def schedule(self, now: float) -> SchedulerOutput:
        raise NotImplementedError

    def _start(self, seq: Sequence, now: float) -> None:
        seq.status = SequenceStatus.RUNNING
        if seq.first_scheduled_time is None:
            seq.first_scheduled_time = now
        self.running.append(seq)

    def _preempt(self, seq: Sequence) -> None:
        self.running.remove(seq)
        self.block_manager.free(seq)
        seq.status = SequenceStatus.WAITING
        seq.num_preemptions += 1
        self.waiting.appendleft(seq)


class ContinuousScheduler(Scheduler):
    def schedule(self, now: float) -> SchedulerOutput:
        out = SchedulerOutput()
        budget = self._schedule_running(out, self.limits.max_num_batched_tokens)
        if not out.preempted:
            self._admit_waiting(out, budget, now)
        return out

    def _schedule_running(self, out: SchedulerOutput, budget: int) -> int:
        bm = self.block_manager
        i = 0
        while i < len(self.running) and budget > 0:
            seq = self.running[i]
            num_new = min(seq.num_uncomputed_tokens, budget)
            while not bm.can_allocate(bm.num_new_blocks_needed(seq, num_new)):
                victim = self.running[-1]
                self._preempt(victim)
                out.preempted.append(victim)
                if victim is seq:
                    return budget
            bm.allocate(seq, num_new)
            out.scheduled.append(ScheduledSequence(seq, num_new))
            budget -= num_new
            i += 1
        return budget

    def _admit_waiting(self, out: SchedulerOutput, budget: int, now: float) -> None:
        bm = self.block_manager
        while self.waiting and budget > 0 and len(self.running) < self.limits.max_num_seqs:
            seq = self.waiting[0]
            hits = bm.match_prefix(seq.token_ids)
            num_cached = len(hits) * bm.block_size
            remaining = seq.num_tokens - num_cached
            num_new = min(remaining, budget)
            if num_new < remaining and not self.limits.enable_chunked_prefill:
                break
            num_blocks = bm.num_blocks_for(num_cached + num_new) - len(hits)
            if not bm.can_allocate(num_blocks + bm.num_free_among(hits), self.watermark_blocks):
                break  # FIFO: nobody overtakes the head of the queue
            self.waiting.popleft()
            bm.take_prefix(seq, hits)
            bm.allocate(seq, num_new)
            self._start(seq, now)
            out.scheduled.append(ScheduledSequence(seq, num_new))
            out.num_cached_tokens += num_cached
            budget -= num_new


class StaticScheduler(Scheduler):
    """Classic static batching, kept for comparison on the same workload.

    Members that finish early return their result at once and free their KV blocks, but
    their slot stays taken until the whole batch is done; no padding compute is spent on
    them, which makes this the generous form of static batching.
    """

    def next_wakeup(self, now: float) -> float | None:
        if self.running or not self.waiting:
            return None
        return self.waiting[0].arrival_time + self.limits.static_batch_timeout_seconds

    def schedule(self, now: float) -> SchedulerOutput:
        out = SchedulerOutput()
        if not self.running and not self._form_batch(now):
            return out
        budget = self.limits.max_num_batched_tokens
        for seq in self.running:
            if budget == 0:
                break
            num_new = min(seq.num_uncomputed_tokens, budget)
            out.scheduled.append(ScheduledSequence(seq, num_new))
            budget -= num_new
        return out

    def _form_batch(self, now: float) -> bool:
        if not self.waiting:
            return False
        full = len(self.waiting) >= self.limits.max_num_seqs
        timed_out = now >= self.waiting[0].arrival_time + self.limits.static_batch_timeout_seconds
        if not (full or timed_out):
            return False
        bm = self.block_manager
        while self.waiting and len(self.running) < self.limits.max_num_seqs:
            seq = self.waiting[0]
            # Classic static batching reserves the worst case, prompt + max_tokens, up front.
            worst = seq.num_prompt_tokens + seq.sampling.max_tokens - seq.num_computed_tokens
            if not bm.can_allocate(bm.num_new_blocks_needed(seq, worst)):
                break
            self.waiting.popleft()
            bm.allocate(seq, worst)
            self._start(seq, now)
        return bool(self.running)


def make_scheduler(batching: str, limits: SchedulerLimits, bm: BlockManager) -> Scheduler:
    if batching == "continuous":
        return ContinuousScheduler(limits, bm)
    if batching == "static":
        return StaticScheduler(limits, bm)
    raise ValueError(f"unknown batching mode {batching!r}")
