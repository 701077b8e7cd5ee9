"""Paged KV-cache bookkeeping: a fixed pool of blocks, ref counts, and prefix caching.

Blocks with ref count 0 sit in ``_free`` in least-recently-freed order. A freed block keeps
its content hash, so a later request with the same prefix can take it back (a prefix-cache
hit) until the block is handed out for something else.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence as SeqOf
from dataclasses import dataclass, field

from reference_server.sequence import Sequence


@dataclass(slots=True)
class Block:
    block_id: int
    ref_count: int = 0
    content_hash: int | None = None
    token_ids: tuple[int, ...] = field(default=())


def _chain_hash(parent_hash: int | None, token_ids: tuple[int, ...]) -> int:
    return hash((parent_hash, token_ids))


class BlockManager:
    def __init__(self, num_blocks: int, block_size: int, enable_prefix_caching: bool = True):
        if num_blocks < 1 or block_size < 1:
            raise ValueError(f"need num_blocks >= 1 and block_size >= 1, got {num_blocks}, "
                             f"{block_size}")
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.enable_prefix_caching = enable_prefix_caching
        self.blocks = [Block(i) for i in range(num_blocks)]
        self._free: OrderedDict[int, None] = OrderedDict((i, None) for i in range(num_blocks))
        self._hash_to_block: dict[int, int] = {}
        # Blocks withheld from allocation (the KV-cache squeeze fault).
        self.num_withheld_blocks = 0

    # --- capacity ---------------------------------------------------------------------------
    @property
    def num_free_blocks(self) -> int:
        return max(0, len(self._free) - self.num_withheld_blocks)

    @property
    def num_used_blocks(self) -> int:
        """Blocks holding KV, and those the squeeze fault withholds: a squeezed cache reads as
        a fuller one, as a smaller cache would."""
        return self.num_blocks - self.num_free_blocks

    @property
    def usage(self) -> float:
        return self.num_used_blocks / self.num_blocks

    def num_blocks_for(self, num_tokens: int) -> int:
        return -(-num_tokens // self.block_size)

    def num_new_blocks_needed(self, seq: Sequence, num_new_tokens: int) -> int:
        total = self.num_blocks_for(seq.num_computed_tokens + num_new_tokens)
        return max(0, total - len(seq.block_table))

    def can_allocate(self, num_blocks: int, watermark: int = 0) -> bool:
        return self.num_free_blocks - num_blocks >= watermark

    # --- prefix cache -----------------------------------------------------------------------
    def match_prefix(self, token_ids: SeqOf[int]) -> list[int]:
        """Block ids caching the longest full-block prefix of ``token_ids``.

        At least one token is always left uncached so the model produces logits for it.
        """
        if not self.enable_prefix_caching:
            return []
        hits: list[int] = []
        parent: int | None = None
        max_full = (len(token_ids) - 1) // self.block_size
        for i in range(max_full):
            chunk = tuple(token_ids[i * self.block_size:(i + 1) * self.block_size])
            parent = _chain_hash(parent, chunk)
            block_id = self._hash_to_block.get(parent)
            if block_id is None or self.blocks[block_id].token_ids != chunk:
                break
            hits.append(block_id)
        return hits

    def num_free_among(self, block_ids: SeqOf[int]) -> int:
        return sum(1 for b in block_ids if self.blocks[b].ref_count == 0)

    def take_prefix(self, seq: Sequence, block_ids: SeqOf[int]) -> None:
        """Give an empty sequence the cached blocks found by ``match_prefix``."""
        if seq.block_table:
            raise ValueError(f"{seq.request_id}: prefix taken on a non-empty block table")
        for block_id in block_ids:
            block = self.blocks[block_id]
            if block.ref_count == 0:
                del self._free[block_id]
            block.ref_count += 1
            seq.block_table.append(block_id)
        seq.num_computed_tokens = len(block_ids) * self.block_size
        seq.num_cached_tokens = seq.num_computed_tokens
        seq.num_hashed_blocks = len(block_ids)

    # --- allocation -------------------------------------------------------------------------
    def allocate(self, seq: Sequence, num_new_tokens: int) -> None:
        """Grow the block table to hold ``num_new_tokens`` more tokens (caller checked room)."""
        needed = self.num_blocks_for(seq.num_computed_tokens + num_new_tokens)
        while len(seq.block_table) < needed:
            seq.block_table.append(self._pop_free())

    def _pop_free(self) -> int:
        if not self._free:
            raise RuntimeError("KV cache out of blocks: scheduler admitted past capacity")
        block_id, _ = self._free.popitem(last=False)
        block = self.blocks[block_id]
        if block.content_hash is not None:
            if self._hash_to_block.get(block.content_hash) == block_id:
                del self._hash_to_block[block.content_hash]
            block.content_hash = None
            block.token_ids = ()
        block.ref_count = 1
        return block_id

    def commit_full_blocks(self, seq: Sequence) -> None:
        """Register the sequence's computed full blocks in the prefix cache."""
        if not self.enable_prefix_caching:
            return
        num_full = min(seq.num_computed_tokens // self.block_size, len(seq.block_table))
        start = seq.num_hashed_blocks
        parent = self.blocks[seq.block_table[start - 1]].content_hash if start else None
        for i in range(start, num_full):
            block = self.blocks[seq.block_table[i]]
            if block.content_hash is None:
                chunk = tuple(seq.token_ids[i * self.block_size:(i + 1) * self.block_size])
                block.content_hash = _chain_hash(parent, chunk)
                block.token_ids = chunk
                self._hash_to_block.setdefault(block.content_hash, block.block_id)
            parent = block.content_hash
        seq.num_hashed_blocks = max(start, num_full)

    def free(self, seq: Sequence) -> None:
        """Release a sequence's blocks (finish, abort, preemption); tail blocks go back first
        so that shared prefix blocks are the last to be reused."""
        for block_id in reversed(seq.block_table):
            block = self.blocks[block_id]
            block.ref_count -= 1
            if block.ref_count == 0:
                self._free[block_id] = None
            elif block.ref_count < 0:
                raise RuntimeError(f"block {block_id} freed twice")
        seq.block_table.clear()
        seq.num_computed_tokens = 0
        seq.num_hashed_blocks = 0
