"""docs/transformer/layers.md, "What pre-norm changes": on stacks and inputs the page does not
show, pre-norm's gradient falls with depth while its stream grows; with the paths through the
sublayers cut, the stream grows exactly as before and the gradient is flat, so the fall comes
from those paths, not from the stream's size; and post-norm's gradient does not rise steadily
towards the output, which is why the page does not claim to reproduce Xiong et al.'s result."""

import copy
import itertools

import pytest
import torch
from torch import nn

from snippets.transformer import (
    EncoderLayer,
    ReadsADetachedStream,
    per_layer_statistics,
    spread,
)


@pytest.mark.parametrize(("seed", "width", "depth"), [(1, 128, 12), (2, 64, 16), (3, 256, 8)])
def test_pre_norm_gradients_fall_by_the_paths_through_the_sublayers_above(seed, width, depth):
    torch.manual_seed(seed)
    post_norm = nn.ModuleList(EncoderLayer(width, 4, 4 * width, dropout=0.0) for _ in range(depth))
    pre_norm = copy.deepcopy(post_norm)
    for layer in pre_norm:
        layer.norm_first = True
    cut = nn.ModuleList(
        ReadsADetachedStream(width, 4, 4 * width, dropout=0.0, norm_first=True)
        for _ in range(depth)
    )
    cut.load_state_dict(pre_norm.state_dict())
    x = torch.randn(4, 24, width)
    post_rms, post_grads = per_layer_statistics(post_norm, x)
    pre_rms, pre_grads = per_layer_statistics(pre_norm, x)
    cut_rms, cut_grads = per_layer_statistics(cut, x)

    assert post_rms == pytest.approx([1.0] * depth, abs=1e-3)
    assert cut_rms == pre_rms  # the same forward pass, bit for bit
    assert all(b > a for a, b in itertools.pairwise(pre_rms))  # the stream grows
    assert pre_grads[0] / pre_grads[-1] > 1.15  # and the gradient falls with depth...
    assert spread(cut_grads) < 0.1  # ...but not once the paths above are cut
    assert spread(pre_grads) > 2 * spread(cut_grads)
    # post-norm: no layer more than 25% from the mean, and no steady rise towards the output
    assert spread(post_grads) < 0.25 and post_grads[-1] < 1.25 * post_grads[0]
