import pytest

from reference_server.block_manager import BlockManager
from reference_server.sampling import SamplingParams
from reference_server.sequence import Sequence


def make_seq(tokens: list[int], rid: str = "r") -> Sequence:
    return Sequence(rid, tokens, SamplingParams(max_tokens=4), 0.0)


def test_allocate_grows_block_table_by_whole_blocks():
    bm = BlockManager(num_blocks=8, block_size=4)
    seq = make_seq(list(range(10)))
    bm.allocate(seq, 10)
    assert len(seq.block_table) == 3
    assert bm.num_used_blocks == 3 and bm.num_free_blocks == 5
    seq.num_computed_tokens = 10
    assert bm.num_new_blocks_needed(seq, 2) == 0   # 12 tokens still fit in 3 blocks
    assert bm.num_new_blocks_needed(seq, 3) == 1


def test_free_returns_every_block():
    bm = BlockManager(num_blocks=4, block_size=4)
    seq = make_seq(list(range(16)))
    bm.allocate(seq, 16)
    assert bm.num_free_blocks == 0
    bm.free(seq)
    assert bm.num_free_blocks == 4 and seq.block_table == [] and seq.num_computed_tokens == 0


def test_prefix_cache_shares_full_blocks_and_keeps_one_token_to_compute():
    bm = BlockManager(num_blocks=8, block_size=4)
    first = make_seq(list(range(12)), "a")
    bm.allocate(first, 12)
    first.num_computed_tokens = 12
    bm.commit_full_blocks(first)
    # Same 12 tokens: only 2 blocks are hits, the last token must be computed again.
    second = make_seq(list(range(12)), "b")
    hits = bm.match_prefix(second.token_ids)
    assert hits == first.block_table[:2]
    bm.take_prefix(second, hits)
    assert second.num_computed_tokens == 8 and second.num_cached_tokens == 8
    assert bm.blocks[hits[0]].ref_count == 2
    # A different second block stops the match after the first.
    third = make_seq([0, 1, 2, 3, 9, 9, 9, 9, 9], "c")
    assert bm.match_prefix(third.token_ids) == first.block_table[:1]


def test_freed_blocks_stay_cached_until_reused():
    bm = BlockManager(num_blocks=3, block_size=2)
    seq = make_seq([1, 2, 3, 4, 5])
    bm.allocate(seq, 5)
    seq.num_computed_tokens = 5
    bm.commit_full_blocks(seq)
    full_blocks = seq.block_table[:2]
    bm.free(seq)
    assert bm.num_free_blocks == 3
    assert bm.match_prefix([1, 2, 3, 4, 5]) == full_blocks
    # Taking the cached blocks back removes them from the free pool.
    again = make_seq([1, 2, 3, 4, 5], "again")
    bm.take_prefix(again, bm.match_prefix(again.token_ids))
    assert bm.num_free_blocks == 1
    # Reusing a cached block for other content evicts its hash.
    other = make_seq([7] * 6, "other")
    bm.free(again)
    bm.allocate(other, 6)
    assert bm.match_prefix([1, 2, 3, 4, 5]) == []


def test_withheld_blocks_reduce_capacity_and_read_as_used():
    """The squeeze fault makes a smaller cache, which reads as a fuller one (vLLM's usage is
    1 - free / total), so KV-pressure detection can see it."""
    bm = BlockManager(num_blocks=10, block_size=4)
    bm.num_withheld_blocks = 7
    assert bm.num_free_blocks == 3 and bm.num_used_blocks == 7 and bm.usage == 0.7
    assert bm.can_allocate(3) and not bm.can_allocate(4)


def test_double_free_is_detected():
    bm = BlockManager(num_blocks=2, block_size=2)
    seq = make_seq([1, 2])
    bm.allocate(seq, 2)
    table = list(seq.block_table)
    bm.free(seq)
    seq.block_table = table
    with pytest.raises(RuntimeError, match="freed twice"):
        bm.free(seq)
