"""int8, Q8_0, Q4_1, Q4_K and Q6_K by hand (snippets/quantization.py) against PyTorch and
the gguf package, on inputs no page shows: every quantized tensor of the SmolLM2 file,
every matrix of the book's GPT-2, GPT-2 124M's sizes, blocks of zeros, constant blocks,
exact halves, random bytes. All equalities are exact: the formats are defined to the bit.
gguf cannot write K-quants, so the page's K-quant writers are checked by what they
promise: the nearest level to each weight, given the super-block's rounded scales.
"""

import re

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
    dequantize_q4_k,
    dequantize_q6_k,
    dequantize_q8_0,
    quantize_int8,
    quantize_q4_1,
    quantize_q4_k,
    quantize_q6_k,
    quantize_q8_0,
    round_half_away,
    unpack_six_bits,
)
from tools.pages import DOCS

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
        fmt = tensor.tensor_type.name
        if fmt == "F32":
            continue
        shape = tuple(reversed(tensor.shape.tolist()))
        raw = torch.from_numpy(np.array(tensor.data)).flatten()
        ours = BY_HAND[fmt][1](raw, shape)
        theirs = torch.from_numpy(dequantize(np.array(tensor.data), tensor.tensor_type))
        assert torch.equal(ours, theirs), tensor.name
        read[fmt] += 1
    assert read == {"Q8_0": 1, "Q4_1": 210}


def edge_cases(generator):
    """(name, (out, 64) float32): blocks a format must get right."""
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
    return [
        ("random", random),
        ("zeros", zeros),
        ("constant", constant),
        ("halves", halves),
        ("halves_q4_1", halves_q4_1),
        ("mixed", mixed),
        ("tiny", tiny),
        ("large", large),
    ]


@pytest.mark.parametrize("fmt", ["Q8_0", "Q4_1"])
def test_written_bytes_equal_ggufs(fmt):
    write, read = BY_HAND[fmt]
    qtype = GGMLQuantizationType[fmt]
    for name, weights in edge_cases(torch.Generator().manual_seed(0)):
        ours = write(weights)
        theirs = quantize(weights.numpy(), qtype).flatten()
        assert np.array_equal(ours.numpy(), theirs), (fmt, name)
        restored = torch.from_numpy(dequantize(quantize(weights.numpy(), qtype), qtype))
        assert torch.equal(read(ours, weights.shape), restored), (fmt, name)


@pytest.mark.parametrize("fmt", ["Q8_0", "Q4_1"])
def test_written_bytes_equal_ggufs_on_every_matrix_of_the_books_gpt2(fmt):
    model = GPT2LMHeadModel.from_pretrained(GPT2_SHAKESPEARE.repo_id)
    write, _ = BY_HAND[fmt]
    for weight in gpt2_matrices(model):
        theirs = quantize(weight.detach().numpy(), GGMLQuantizationType[fmt]).flatten()
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
    d = halves.abs().amax() / 127  # Q8_0's scale
    ours = torch.round(halves * (1 / d))
    ggml = round_half_away(halves * (1 / d))
    assert not torch.equal(ours, ggml)
    assert np.array_equal(
        quantize_q8_0(halves).numpy(), quantize(halves.numpy(), GGMLQuantizationType.Q8_0)[0]
    )


def test_q4_1_low_nibbles_hold_the_first_half_of_a_block():
    """The page: byte i of a Q4_1 block holds weight i in its low 4 bits and 16 + i high."""
    weights = torch.cat([torch.zeros(16), torch.ones(16)])[None, :]  # levels 0, then 15
    packed = quantize_q4_1(weights)[4:]  # after d and m
    assert packed.tolist() == [0xF0] * 16  # low 4 bits 0, high 4 bits 15


K_QUANTS = {
    # write, read, bytes a super-block of 256 weights, where its float16 steps are
    "Q4_K": (quantize_q4_k, dequantize_q4_k, 144, [0, 2]),
    "Q6_K": (quantize_q6_k, dequantize_q6_k, 210, [208]),
}


def ggufs_reading(raw, fmt, shape):
    by_row = raw.view(shape[0], -1).numpy()  # gguf reads (out, bytes per row)
    return torch.from_numpy(dequantize(by_row, GGMLQuantizationType[fmt]))


@pytest.mark.parametrize("fmt", K_QUANTS)
def test_k_quants_read_random_bytes_as_gguf(fmt):
    """Every byte pattern is a valid super-block, but for steps that are not finite:
    random bytes reach every bit of the scales' packing, and steps from subnormal to
    float16's largest, of both signs."""
    _, read, size, steps_at = K_QUANTS[fmt]
    generator = torch.Generator().manual_seed(0)
    raw = torch.randint(0, 256, (64, size), dtype=torch.uint8, generator=generator)
    steps = torch.randn(64, len(steps_at), generator=generator)
    steps[:4] = torch.tensor([65504.0, -65504.0, 6e-8, 0.0])[:, None]
    for column, at in enumerate(steps_at):
        raw[:, at : at + 2] = steps[:, column : column + 1].half().view(torch.uint8)
    for out in (64, 16, 1):  # 1, 4 and 64 super-blocks a row
        shape = (out, 64 * 256 // out)
        assert torch.equal(read(raw.flatten(), shape), ggufs_reading(raw, fmt, shape)), out


def test_six_bit_packing_order():
    """The page: bytes 0-3 hold scales 0-3; bytes 8-11 the low 4 bits of scales 4-7."""
    packed = torch.tensor([[1, 2, 3, 0xC4, 5, 6, 7, 0x48, 0x9A, 0, 0, 0]], dtype=torch.uint8)
    scales, mins = unpack_six_bits(packed)
    assert scales.tolist() == [[1, 2, 3, 4, 10, 0, 0, 48]]
    assert mins.tolist() == [[5, 6, 7, 8, 9, 0, 0, 16]]


def nearest_levels(blocks, levels):
    """For each weight of blocks (n, m, w), the distance to the nearest of its sub-block's
    levels (n, m, L)."""
    return (blocks[..., None] - levels[:, :, None, :]).abs().amin(dim=-1)


def k_quant_levels(raw, fmt, n):
    """Every value a super-block's rounded scales can give: (n, sub-blocks, levels)."""
    blocks = raw.view(n, -1)
    if fmt == "Q4_K":
        d, dmin = (blocks[:, at : at + 2].contiguous().view(torch.float16).float() for at in (0, 2))
        scales, mins = unpack_six_bits(blocks[:, 4:16])
        q = torch.arange(16.0)
        return (d * scales)[..., None] * q - (dmin * mins)[..., None]
    d = blocks[:, 208:210].contiguous().view(torch.float16).float()
    scales = blocks[:, 192:208].contiguous().view(torch.int8).float()
    return (d * scales)[..., None] * torch.arange(-32.0, 32.0)


def k_quant_inputs():
    generator = torch.Generator().manual_seed(0)
    model = GPT2LMHeadModel.from_pretrained(GPT2_SHAKESPEARE.repo_id)
    matrices = [w.detach() for w in gpt2_matrices(model)]
    matrices += [w.repeat(1, 4) for _, w in edge_cases(generator)]  # rows of 256
    matrices.append(torch.rand(8, 512, generator=generator) + 0.5)  # no negative weight
    torch.manual_seed(0)
    big = GPT2LMHeadModel(GPT2Config(n_layer=1))  # GPT-2 124M's sizes, random init
    return matrices + [w.detach()[:64] for w in gpt2_matrices(big)]  # rows of 768 and 3072


@pytest.mark.parametrize("fmt", K_QUANTS)
def test_k_quant_writers_give_the_nearest_level_and_read_as_gguf(fmt):
    write, read, size, _ = K_QUANTS[fmt]
    sub_block = {"Q4_K": 32, "Q6_K": 16}[fmt]
    for weight in k_quant_inputs():
        raw = write(weight)
        restored = read(raw, weight.shape)
        assert len(raw) == weight.numel() // 256 * size
        assert torch.equal(restored, ggufs_reading(raw, fmt, weight.shape))
        n = weight.numel() // 256
        levels = k_quant_levels(raw, fmt, n)  # (n, sub-blocks, levels)
        blocks = weight.reshape(n, -1, sub_block)
        chosen = (blocks - restored.reshape(n, -1, sub_block)).abs()
        nearest = nearest_levels(blocks, levels)
        # rounded once against a step held as its inverse: up to a few float32 ulps off
        assert (chosen - nearest <= 1e-6 * blocks.abs().amax()).all(), weight.shape


def test_the_prose_reads_the_loss_table_as_the_page_prints_it():
    """Every number the prose takes from the table, and each comparison it draws."""
    text = (DOCS / "efficient" / "quantization.md").read_text()
    rows = re.findall(
        r"^(\S+(?: mix)?) +[\d.]+ MiB, +([\d.]+) bits a weight: +([\d.]+)% +"
        r"([\d.]+) nats/char \(([+-][\d.]+)\)$",
        text,
        re.MULTILINE,
    )
    table = {fmt: [float(x) for x in numbers] for fmt, *numbers in rows}
    prose = " ".join(text.split())
    assert len(table) == 8
    assert all(abs(table[f][3]) < 0.0005 for f in ("int8", "Q8_0", "Q6_K"))  # "less than"
    q4_k, q4_1, q4_0 = table["Q4_K"], table["Q4_1"], table["Q4_0"]
    assert f"error of {q4_k[1]:.2f} % against Q4_0's {q4_0[1]:.2f} %" in prose
    assert q4_k[1] - q4_1[1] == pytest.approx(0.02, abs=0.005) and q4_k[2] < q4_1[2]
    assert "its error is higher by 0.02 points and its loss lower by under 0.002" in prose
    assert table["Q4_1 mix"][0] - q4_1[0] == pytest.approx(0.9)
    assert "in Q8_0, which here costs 0.9 bits a weight more" in prose
    ranked = sorted(["Q4_0", "Q4_1", "Q4_1 mix"], key=lambda f: table[f][1], reverse=True)
    assert ranked == sorted(ranked, key=lambda f: table[f][2], reverse=True)  # loss follows
