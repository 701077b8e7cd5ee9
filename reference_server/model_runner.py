"""Turns a scheduled batch into model inputs, runs the model, and samples next tokens."""

from __future__ import annotations

from collections.abc import Sequence as SeqOf
from dataclasses import dataclass

import torch

from reference_server.model import AttentionMetadata, LlamaForCausalLM, allocate_kv_cache
from reference_server.scheduler import ScheduledSequence
from reference_server.sequence import Sequence


@dataclass(slots=True)
class ModelInputs:
    input_ids: torch.Tensor
    positions: torch.Tensor
    attn_metadata: AttentionMetadata
    sample_rows: torch.Tensor            # rows of the flat batch whose logits are sampled
    sampled_seq_indices: list[int]       # index into the scheduled list for each sample row


class ModelRunner:
    def __init__(self, model: LlamaForCausalLM, num_kv_blocks: int, block_size: int) -> None:
        self.model = model
        param = next(model.parameters())
        self.device = param.device
        self.dtype = param.dtype
        self.block_size = block_size
        self.kv_caches = allocate_kv_cache(model.config, num_kv_blocks, block_size,
                                           self.dtype, self.device)

    @torch.inference_mode()
    def execute(self, scheduled: SeqOf[ScheduledSequence]) -> list[int | None]:
        """Run one step; return the sampled token for each scheduled sequence whose tokens
        are now all computed (None for a prefill chunk that is not the last)."""
        inputs = self.prepare(scheduled)
        hidden = self.model(inputs.input_ids, inputs.positions, self.kv_caches,
                            inputs.attn_metadata)
        results: list[int | None] = [None] * len(scheduled)
        if not inputs.sampled_seq_indices:
            return results
        logits = self.model.compute_logits(hidden[inputs.sample_rows])
        seqs = [scheduled[i].seq for i in inputs.sampled_seq_indices]
        for i, token in zip(inputs.sampled_seq_indices, sample(logits, seqs), strict=True):
            results[i] = token
        return results

    def prepare(self, scheduled: SeqOf[ScheduledSequence]) -> ModelInputs:
        bs = self.block_size
        input_ids: list[int] = []
        positions: list[int] = []
        slots: list[int] = []
        query_start = [0]
        seq_lens: list[int] = []
        sample_rows: list[int] = []
        sampled: list[int] = []
        for i, item in enumerate(scheduled):
            seq, start = item.seq, item.seq.num_computed_tokens
            end = start + item.num_new_tokens
            input_ids.extend(seq.token_ids[start:end])
            positions.extend(range(start, end))
            table = seq.block_table
            slots.extend(table[p // bs] * bs + p % bs for p in range(start, end))
            query_start.append(query_start[-1] + item.num_new_tokens)
            seq_lens.append(end)
            if end == seq.num_tokens:
                sample_rows.append(query_start[-1] - 1)
                sampled.append(i)
        max_blocks = max(len(item.seq.block_table) for item in scheduled)
        tables = [item.seq.block_table + [0] * (max_blocks - len(item.seq.block_table))
                  for item in scheduled]
        meta = AttentionMetadata(
            query_start_loc=self._tensor(query_start),
            seq_lens=self._tensor(seq_lens),
            slot_mapping=self._tensor(slots),
            block_tables=self._tensor(tables),
            max_query_len=max(item.num_new_tokens for item in scheduled),
            max_seq_len=max(seq_lens),
        )
        return ModelInputs(self._tensor(input_ids), self._tensor(positions), meta,
                           self._tensor(sample_rows), sampled)

    def _tensor(self, data: list[int] | list[list[int]]) -> torch.Tensor:
        return torch.tensor(data, dtype=torch.int64).to(self.device, non_blocking=True)


def sample(logits: torch.Tensor, seqs: SeqOf[Sequence]) -> list[int]:
    """Greedy for temperature 0, else temperature + top-p (nucleus) sampling.

    A request with a seed has its own generator, so its output does not depend on what
    else is in the batch.
    """
    logits = logits.float()
    temps = torch.tensor([s.sampling.temperature for s in seqs], device=logits.device)
    greedy = temps == 0
    if bool(greedy.all()):
        greedy_tokens: list[int] = logits.argmax(dim=-1).tolist()
        return greedy_tokens
    scaled = logits / torch.where(greedy, 1.0, temps).unsqueeze(1)
    top_ps = torch.tensor([s.sampling.top_p for s in seqs], device=logits.device)
    probs = _top_p_probs(scaled, top_ps)
    tokens: list[int] = logits.argmax(dim=-1).tolist()
    # Unseeded rows share one multinomial call; a seeded request draws from its own
    # generator so that its output does not depend on the rest of the batch.
    shared = [i for i, s in enumerate(seqs) if not s.sampling.is_greedy and s.generator is None]
    if shared:
        rows = torch.tensor(shared, device=probs.device)
        drawn = torch.multinomial(probs[rows], 1).squeeze(1).tolist()
        for i, token in zip(shared, drawn, strict=True):
            tokens[i] = token
    for i, seq in enumerate(seqs):
        if seq.generator is not None and not seq.sampling.is_greedy:
            tokens[i] = int(torch.multinomial(probs[i], 1, generator=seq.generator))
    return tokens


def _top_p_probs(logits: torch.Tensor, top_ps: torch.Tensor) -> torch.Tensor:
    probs = torch.softmax(logits, dim=-1)
    if bool((top_ps >= 1.0).all()):
        return probs
    sorted_probs, order = probs.sort(dim=-1, descending=True)
    cumulative = sorted_probs.cumsum(dim=-1)
    # Drop a token when the mass before it already reaches top_p (the first is always kept).
    drop = (cumulative - sorted_probs) >= top_ps.unsqueeze(1)
    sorted_probs = sorted_probs.masked_fill(drop, 0.0)
    return torch.zeros_like(probs).scatter_(-1, order, sorted_probs)
