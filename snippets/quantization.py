"""Quantization by hand: int8 with one scale per output channel, then GGUF's block formats
Q8_0 and Q4_1, read and written byte by byte.

docs/efficient/quantization.md includes the sections marked below;
tests/test_efficient_quantization.py proves them equal to
torch.fake_quantize_per_channel_affine and to the gguf package's quantize and dequantize.
"""

import torch


# --8<-- [start:int8]
def quantize_int8(weight):
    """weight (out, in) -> int8 values (out, in) and one float32 scale per output row:
    each row's largest |weight| becomes ±127."""
    scale = weight.abs().amax(dim=1) / 127  # (out,)
    scale = torch.where(scale == 0, 1.0, scale)  # a row of zeros: any scale will do
    # times the inverse, not divided: the product PyTorch's own int8 kernels round
    values = torch.round(weight * (1 / scale)[:, None]).clamp(-127, 127).to(torch.int8)
    return values, scale


# --8<-- [end:int8]


# --8<-- [start:round_half_away]
def round_half_away(x):
    """Round to the nearest integer, halves away from zero, as C's roundf (and ggml)."""
    magnitude = x.abs()
    whole = magnitude.floor()
    return x.sign() * (whole + (2 * (magnitude - whole)).floor())


# --8<-- [end:round_half_away]


# --8<-- [start:q8_0]
def dequantize_q8_0(raw, shape):
    """GGUF's Q8_0: blocks of 32 weights, each 34 bytes: a float16 scale d, then 32 int8
    values q. Weight = d · q. raw: the tensor's bytes, uint8 (n_blocks * 34,)."""
    blocks = raw.view(-1, 34)  # (n_blocks, 34)
    scale = blocks[:, :2].contiguous().view(torch.float16).float()  # (n_blocks, 1)
    values = blocks[:, 2:].contiguous().view(torch.int8).float()  # (n_blocks, 32)
    return (values * scale).view(shape)


# --8<-- [end:q8_0]


# --8<-- [start:quantize_q8_0]
def quantize_q8_0(weight):
    """weight (rows, cols), cols a multiple of 32 -> the Q8_0 bytes, uint8."""
    assert weight.shape[-1] % 32 == 0, "blocks of 32 weights of one row"
    blocks = weight.float().reshape(-1, 32)  # (n_blocks, 32): along each row
    scale = blocks.abs().amax(dim=1, keepdim=True) / 127  # (n_blocks, 1), float32
    inverse = torch.where(scale == 0, 0.0, 1 / scale)
    values = round_half_away(blocks * inverse).to(torch.int8)  # (n_blocks, 32)
    stored = [scale.half().view(torch.uint8), values.view(torch.uint8)]  # 2 + 32 bytes
    return torch.cat(stored, dim=1).flatten()


# --8<-- [end:quantize_q8_0]


# --8<-- [start:q4_1]
def dequantize_q4_1(raw, shape):
    """GGUF's Q4_1: blocks of 32 weights, each 20 bytes: a float16 scale d, a float16
    minimum m, then 16 bytes holding 32 values q from 0 to 15, two per byte: the low
    4 bits of byte i are weight i, the high 4 bits weight 16 + i. Weight = d · q + m."""
    blocks = raw.view(-1, 20)  # (n_blocks, 20)
    scale = blocks[:, 0:2].contiguous().view(torch.float16).float()  # (n_blocks, 1)
    minimum = blocks[:, 2:4].contiguous().view(torch.float16).float()  # (n_blocks, 1)
    packed = blocks[:, 4:]  # (n_blocks, 16)
    values = torch.cat([packed & 0x0F, packed >> 4], dim=1).float()  # (n_blocks, 32)
    return (values * scale + minimum).view(shape)


# --8<-- [end:q4_1]


# --8<-- [start:quantize_q4_1]
def quantize_q4_1(weight):
    """weight (rows, cols), cols a multiple of 32 -> the Q4_1 bytes, uint8."""
    assert weight.shape[-1] % 32 == 0, "blocks of 32 weights of one row"
    blocks = weight.float().reshape(-1, 32)  # (n_blocks, 32)
    low = blocks.amin(dim=1, keepdim=True)  # (n_blocks, 1)
    scale = (blocks.amax(dim=1, keepdim=True) - low) / 15  # 16 levels: 0 to 15
    inverse = torch.where(scale == 0, 0.0, 1 / scale)
    values = torch.trunc((blocks - low) * inverse + 0.5).clamp(0, 15).to(torch.uint8)
    packed = values[:, :16] | (values[:, 16:] << 4)  # (n_blocks, 16)
    stored = [scale.half().view(torch.uint8), low.half().view(torch.uint8), packed]
    return torch.cat(stored, dim=1).flatten()


# --8<-- [end:quantize_q4_1]
