"""int8, Q8_0 and Q4_1 by hand (snippets/quantization.py) against PyTorch and the gguf
package, on inputs no page shows: every quantized tensor of the SmolLM2 file, every
matrix of the book's GPT-2, GPT-2 124M's sizes, blocks of zeros, constant blocks,
exact halves. All equalities are exact: the formats are defined to the bit.
"""

import numpy as np
import pytest
import torch
from gguf import GGMLQuantizationType, GGUFReader
from gguf.quants import dequantize, np_roundf, quantize
from transformers import GPT2Config, GPT2LMHeadModel
from transformers.pytorch_utils import Conv1D

from snippets.hub import GPT2_SHAKESPEARE, SMOLLM2_GGUF
from snippets.quantization import (
    dequantize_q4_1,
    dequantize_q8_0,
    quantize_int8,
    quantize_q4_1,
    quantize_q8_0,
    round_half_away,
)

pytestmark = pytest.mark.usefixtures("no_grad")

BY_HAND = {
    "Q8_0": (quantize_q8_0, dequantize_q8_0),
    "Q4_1": (quantize_q4_1, dequantize_q4_1),
}


@pytest.fixture(scope="module")
def smollm2_tensors():
    from huggingface_hub import hf_hub_download

    (gguf_file,) = SMOLLM2_GGUF.sha256
    path = hf_hub_download(SMOLLM2_GGUF.repo_id, gguf_file, revision=SMOLLM2_GGUF.revision)
    return GGUFReader(path).tensors


def gpt2_matrices(model):
    """Every matrix the page quantizes, each (out, in)."""
    matrices = [m.weight.T for m in model.modules() if isinstance(m, Conv1D)]
    return [*matrices, model.transformer.wte.weight]


def test_every_quantized_tensor_of_the_smollm2_file_reads_as_ggufs(smollm2_tensors):
    read = {"Q8_0": 0, "Q4_1": 0}
    for tensor in smollm2_tensors:
        kind = tensor.tensor_type.name
        if kind == "F32":
            continue
        shape = tuple(reversed(tensor.shape.tolist()))
        raw = torch.from_numpy(np.array(tensor.data)).flatten()
        ours = BY_HAND[kind][1](raw, shape)
        theirs = torch.from_numpy(dequantize(np.array(tensor.data), tensor.tensor_type))
        assert torch.equal(ours, theirs), tensor.name
        read[kind] += 1
    assert read == {"Q8_0": 1, "Q4_1": 210}


def edge_cases(generator):
    """(name, (rows, 64) float32): blocks a format must get right."""
    random = torch.randn(8, 64, generator=generator)
    zeros = torch.zeros(8, 64)
    constant = torch.full((8, 64), -0.3)
    # a block whose largest |weight| is 127 has scale 1: the others fall on exact halves
    block = torch.cat([torch.tensor([127.0]), torch.arange(-15, 16) + 0.5])  # (32,)
    halves = block.repeat(8, 2)  # (8, 64)
    # Q4_1: minimum 0 and maximum 15 give d = 1; then exact halves, and a value just
    # under one half, which trunc(x + 0.5) takes up to 1 and round-half-away down to 0
    q4_1 = torch.cat(
        [torch.tensor([0.0, 15.0]), torch.arange(14) + 0.5, torch.full((16,), 0.49999997)]
    )
    halves_q4_1 = q4_1.repeat(8, 2)  # (8, 64)
    mixed = torch.cat([random[:4], zeros[:2], constant[:2]])
    tiny = random * 1e-6
    large = random * 1e4
    return [("random", random), ("zeros", zeros), ("constant", constant),
            ("halves", halves), ("halves_q4_1", halves_q4_1), ("mixed", mixed),
            ("tiny", tiny), ("large", large)]  # fmt: skip


@pytest.mark.parametrize("kind", ["Q8_0", "Q4_1"])
def test_written_bytes_equal_ggufs(kind):
    write, read = BY_HAND[kind]
    qtype = GGMLQuantizationType[kind]
    for name, weights in edge_cases(torch.Generator().manual_seed(0)):
        ours = write(weights)
        theirs = quantize(weights.numpy(), qtype).flatten()
        assert np.array_equal(ours.numpy(), theirs), (kind, name)
        restored = torch.from_numpy(dequantize(quantize(weights.numpy(), qtype), qtype))
        assert torch.equal(read(ours, weights.shape), restored), (kind, name)


@pytest.mark.parametrize("kind", ["Q8_0", "Q4_1"])
def test_written_bytes_equal_ggufs_on_every_matrix_of_the_books_gpt2(kind):
    model = GPT2LMHeadModel.from_pretrained(GPT2_SHAKESPEARE.repo_id)
    write, _ = BY_HAND[kind]
    for weight in gpt2_matrices(model):
        theirs = quantize(weight.detach().numpy(), GGMLQuantizationType[kind]).flatten()
        assert np.array_equal(write(weight.detach()).numpy(), theirs)


def test_int8_equals_pytorchs_per_channel_fake_quantization():
    """The book's GPT-2's matrices, and GPT-2 124M's at their real sizes (random init)."""
    torch.manual_seed(0)
    big = GPT2LMHeadModel(GPT2Config(n_layer=1))
    small = GPT2LMHeadModel.from_pretrained(GPT2_SHAKESPEARE.repo_id)
    matrices = gpt2_matrices(small) + gpt2_matrices(big)
    matrices.append(torch.cat([torch.zeros(2, 64), torch.randn(3, 64)]))  # rows of zeros
    for weight in matrices:
        weight = weight.detach()
        values, scale = quantize_int8(weight)
        zero_points = torch.zeros(len(scale), dtype=torch.int32)
        theirs = torch.fake_quantize_per_channel_affine(weight, scale, zero_points, 0, -127, 127)
        assert torch.equal(values.float() * scale[:, None], theirs)
        assert values.abs().max() <= 127


def test_round_half_away_is_ggmls_roundf():
    values = torch.tensor([0.5, 1.5, 2.5, -0.5, -2.5, 0.49999997, 126.5, -126.5, 3.0, 0.0])
    values = torch.cat([values, torch.randn(10_000, generator=torch.Generator().manual_seed(1))])
    assert torch.equal(round_half_away(values), torch.from_numpy(np_roundf(values.numpy())))


def test_warning_torch_round_is_not_cs_roundf():
    """The page's warning: on a block whose values fall on exact halves of its step,
    torch.round writes other Q8_0 bytes than ggml."""
    halves = dict(edge_cases(torch.Generator().manual_seed(0)))["halves"][:1, :32]
    scale = halves.abs().amax() / 127
    ours = torch.round(halves * (1 / scale))
    ggml = round_half_away(halves * (1 / scale))
    assert not torch.equal(ours, ggml)
    assert np.array_equal(
        quantize_q8_0(halves).numpy(), quantize(halves.numpy(), GGMLQuantizationType.Q8_0)[0]
    )


def test_q4_1_low_nibbles_hold_the_first_half_of_a_block():
    """The page: byte i of a Q4_1 block holds weight i in its low 4 bits and 16 + i high."""
    weights = torch.cat([torch.zeros(16), torch.ones(16)])[None, :]  # levels 0, then 15
    packed = quantize_q4_1(weights)[4:]  # after d and m
    assert packed.tolist() == [0xF0] * 16  # low 4 bits 0, high 4 bits 15
