from reference_server.block_manager import BlockManager
from reference_server.sampling import SamplingParams
from reference_server.scheduler import (
    ContinuousScheduler, SchedulerLimits, StaticScheduler,
)
from reference_server.sequence import Sequence, SequenceStatus


def seq(rid: str, num_prompt: int, max_tokens: int = 8, arrival: float = 0.0) -> Sequence:
    return Sequence(rid, list(range(num_prompt)), SamplingParams(max_tokens=max_tokens), arrival)


def run_step(sched_out) -> None:
    """What the engine does after a step: mark computed, append a token when done."""
    for item in sched_out.scheduled:
        item.seq.num_computed_tokens += item.num_new_tokens
        if item.seq.num_computed_tokens == item.seq.num_tokens:
            item.seq.token_ids.append(1)


def continuous(num_blocks=64, block_size=4, max_seqs=8, budget=32, chunked=True):
    bm = BlockManager(num_blocks, block_size, enable_prefix_caching=False)
    return ContinuousScheduler(SchedulerLimits(max_seqs, budget, chunked), bm)


def test_prefill_is_chunked_under_the_token_budget():
    s = continuous(budget=16)
    s.add(seq("a", 40))
    out = s.schedule(0.0)
    assert [(i.seq.request_id, i.num_new_tokens) for i in out.scheduled] == [("a", 16)]
    run_step(out)
    assert s.schedule(0.0).scheduled[0].num_new_tokens == 16
    s.running[0].num_computed_tokens += 16
    last = s.schedule(0.0)
    assert last.scheduled[0].num_new_tokens == 8


def test_running_decodes_come_first_and_waiting_fill_the_rest_fifo():
    s = continuous(budget=10)
    s.add(seq("a", 4))
    run_step(s.schedule(0.0))          # a prefilled, now decoding
    s.add(seq("b", 6))
    s.add(seq("c", 6))
    out = s.schedule(0.0)
    got = [(i.seq.request_id, i.num_new_tokens) for i in out.scheduled]
    assert got == [("a", 1), ("b", 6), ("c", 3)]   # c gets a chunk of what is left


def test_max_num_seqs_caps_the_batch():
    s = continuous(max_seqs=2, budget=100)
    for r in "abc":
        s.add(seq(r, 4))
    out = s.schedule(0.0)
    assert [i.seq.request_id for i in out.scheduled] == ["a", "b"]
    assert s.num_waiting == 1


def test_preemption_by_recompute_when_blocks_run_out():
    # 4 blocks of 4 tokens: a and b take 2 blocks each, decode then needs a 5th block.
    s = continuous(num_blocks=4, block_size=4, budget=100)
    s.watermark_blocks = 0
    s.add(seq("a", 8))
    s.add(seq("b", 7))
    run_step(s.schedule(0.0))
    assert s.block_manager.num_free_blocks == 0
    out = s.schedule(0.0)             # a needs a new block for token 9 -> b is preempted
    assert [p.request_id for p in out.preempted] == ["b"]
    assert [i.seq.request_id for i in out.scheduled] == ["a"]
    b = s.waiting[0]
    assert b.request_id == "b" and b.status is SequenceStatus.WAITING
    assert b.num_computed_tokens == 0 and b.block_table == [] and b.num_preemptions == 1
    assert b.num_tokens == 8          # its generated token is kept and will be recomputed


def test_waiting_head_is_not_overtaken():
    s = continuous(num_blocks=4, block_size=4, budget=100)
    s.watermark_blocks = 0
    s.add(seq("big", 20))             # needs 5 blocks: cannot fit now
    s.add(seq("small", 2))
    out = s.schedule(0.0)
    assert out.scheduled == [] and s.num_waiting == 2


def test_static_waits_for_a_full_batch_or_the_timeout():
    bm = BlockManager(64, 4, enable_prefix_caching=False)
    s = StaticScheduler(SchedulerLimits(3, 100, True, static_batch_timeout_seconds=1.0), bm)
    s.add(seq("a", 4, arrival=0.0))
    s.add(seq("b", 4, arrival=0.1))
    assert s.schedule(0.5).is_empty
    assert s.next_wakeup(0.5) == 1.0
    out = s.schedule(1.0)             # timed out: run what is there
    assert [i.seq.request_id for i in out.scheduled] == ["a", "b"]


def test_static_admits_nothing_until_the_whole_batch_is_done():
    bm = BlockManager(64, 4, enable_prefix_caching=False)
    s = StaticScheduler(SchedulerLimits(2, 100, True, 0.0), bm)
    s.add(seq("a", 4, max_tokens=1))
    s.add(seq("b", 4, max_tokens=5))
    run_step(s.schedule(0.0))
    s.add(seq("c", 4))
    # a is done; it leaves, but c must wait for b.
    a = next(x for x in s.running if x.request_id == "a")
    s.remove(a)
    out = s.schedule(0.0)
    assert [i.seq.request_id for i in out.scheduled] == ["b"]
    b = s.running[0]
    s.remove(b)
    assert [i.seq.request_id for i in s.schedule(0.0).scheduled] == ["c"]


def test_static_reserves_prompt_plus_max_tokens():
    bm = BlockManager(8, 4, enable_prefix_caching=False)
    s = StaticScheduler(SchedulerLimits(4, 100, True, 0.0), bm)
    s.add(seq("a", 4, max_tokens=12))   # 16 tokens -> 4 blocks up front
    s.schedule(0.0)
    assert len(s.running[0].block_table) == 4 and bm.num_free_blocks == 4
