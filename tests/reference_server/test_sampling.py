import pytest
import torch

from reference_server.model_runner import _top_p_probs, sample
from reference_server.sampling import SamplingParams
from reference_server.sequence import Sequence


def seq(temperature: float, top_p: float = 1.0, seed: int | None = None) -> Sequence:
    s = Sequence("r", [1], SamplingParams(temperature=temperature, top_p=top_p, seed=seed), 0.0)
    if seed is not None:
        s.generator = torch.Generator().manual_seed(seed)
    return s


def test_top_p_keeps_the_smallest_set_reaching_p():
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.2]]))
    probs = _top_p_probs(logits, torch.tensor([0.6]))
    # 0.5 alone is below 0.6, so 0.3 is kept too; the mass before 0.2 is 0.8 >= 0.6.
    assert probs[0].tolist() == pytest.approx([0.5, 0.3, 0.0])


def test_greedy_rows_take_the_argmax_in_a_mixed_batch():
    logits = torch.tensor([[0.0, 5.0, 1.0], [3.0, 0.0, 0.0]])
    tokens = sample(logits, [seq(0.0), seq(1.0, top_p=1e-6)])
    assert tokens == [1, 0]   # a tiny top_p leaves only the most likely token


def test_sampling_follows_the_temperature_scaled_distribution():
    logits = torch.log(torch.tensor([0.7, 0.2, 0.1])).repeat(4000, 1)
    torch.manual_seed(0)
    tokens = sample(logits, [seq(1.0) for _ in range(4000)])
    freq = [tokens.count(t) / 4000 for t in range(3)]
    assert freq == pytest.approx([0.7, 0.2, 0.1], abs=0.03)
    hot = sample(logits * 1.0, [seq(100.0) for _ in range(4000)])
    assert max(hot.count(t) for t in range(3)) / 4000 < 0.4   # nearly uniform


def test_seeded_rows_do_not_depend_on_their_neighbours():
    logits = torch.randn(3, 50, generator=torch.Generator().manual_seed(1))
    alone = sample(logits[1:2], [seq(1.0, seed=42)])
    batched = sample(logits, [seq(1.0), seq(1.0, seed=42), seq(0.7)])
    assert batched[1] == alone[0]
