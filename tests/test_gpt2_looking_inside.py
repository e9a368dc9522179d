"""docs/gpt2/looking-inside.md's claims about the book's GPT-2, measured again the page's way
(the same 12 windows of 128 tokens of The Tempest): which heads cost most when silenced, which
differences the windows' noise settles, and the finding that silencing a whole layer's heads
costs more than the sum of silencing each alone. The logit lens and the ablation themselves
are checked against the library in tests/test_snippets_looking_inside.py."""

import math
from itertools import pairwise

import pytest
import torch

from snippets.looking_inside import logit_lens, loss_per_window

pytestmark = pytest.mark.usefixtures("no_grad")

N, T = 12, 128  # the page's windows


@pytest.fixture(scope="module")
def windows(tempest_ids):
    stream = tempest_ids[0]
    starts = torch.linspace(0, len(stream) - T - 1, N).long()
    return torch.stack([stream[s : s + T + 1] for s in starts])  # (N, T + 1)


@pytest.fixture(scope="module")
def costs(gpt2_shakespeare, windows):
    """(L, H, N) single-head loss changes, and (L, N) whole-layer ones."""
    with torch.no_grad():
        baseline = loss_per_window(gpt2_shakespeare, windows)

        def cost(heads):  # (N,): each window's loss change with `heads` ablated
            return loss_per_window(gpt2_shakespeare, windows, heads) - baseline

        single = torch.stack(
            [torch.stack([cost({(layer, head)}) for head in range(4)]) for layer in range(4)]
        )
        whole = torch.stack([cost({(layer, h) for h in range(4)}) for layer in range(4)])
    return single, whole


def test_layer_0_head_1_costs_most_beyond_the_noise(costs):
    single, _ = costs
    mean = single.mean(-1)
    ranked = [divmod(i, 4) for i in mean.flatten().argsort(descending=True).tolist()]
    assert ranked[:5] == [(0, 1), (0, 2), (1, 2), (1, 0), (0, 3)]
    # each of the first five against the next, paired on the same windows
    differences = [single[a] - single[b] for a, b in pairwise(ranked[:5])]  # (N,) each
    ratios = [(d.mean() / (d.std() / math.sqrt(N))).item() for d in differences]
    assert ratios[0] > 5, "the first is more than five paired errors ahead of the second"
    assert all(abs(r) < 1 for r in ratios[1:]), "the next four are within one paired error"


def test_layer_0_head_0_is_within_noise_of_nothing(costs):
    single, _ = costs
    assert single[0, 0].mean().abs() < 2 * single[0, 0].std() / math.sqrt(N)


def test_three_heads_of_layer_3_are_within_noise_of_nothing(costs):
    single, _ = costs
    mean, error = single[3].mean(-1), single[3].std(-1) / math.sqrt(N)
    assert (mean.abs() < 2 * error).tolist() == [True, True, True, False]


def test_finding_a_whole_layer_costs_more_than_the_sum_of_its_heads(costs):
    single, whole = costs
    for layer in range(4):
        sum_alone = single[layer].mean(-1).sum()
        whole_mean, whole_error = whole[layer].mean(), whole[layer].std() / math.sqrt(N)
        assert whole_mean - 2 * whole_error > sum_alone, layer  # beyond the windows' noise
    assert whole[0].mean() > 2 * single[0].mean(-1).sum()  # layer 0: more than twice


def test_the_lens_loss_falls_at_every_block(gpt2_shakespeare, gpt2_tokenizer):
    """The page's line: each row of the lens predicts the next tokens better than the one
    before."""
    line = "We are such stuff\nAs dreams are made on; and our little life\nIs rounded with a sleep."
    ids = gpt2_tokenizer(line, return_tensors="pt")["input_ids"]
    lens = logit_lens(gpt2_shakespeare, ids)
    losses = [torch.nn.functional.cross_entropy(row[:-1], ids[0, 1:]).item() for row in lens]
    assert losses == sorted(losses, reverse=True)
