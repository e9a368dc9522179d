"""Quantization by hand: int8 with one scale per output channel, then GGUF's block formats
Q8_0 and Q4_1, read and written byte by byte, and the K-quants Q4_K and Q6_K, read by hand
and written by simple writers of the page's own.

docs/efficient/quantization.md includes the sections marked below;
tests/test_efficient_quantization.py proves them equal to
torch.fake_quantize_per_channel_affine and to the gguf package's quantize and dequantize
(gguf cannot write K-quants: their writers are checked for the nearest level instead).
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
    values q. Weight = d · q. raw: the tensor's bytes, uint8 (n * 34,) for n blocks."""
    blocks = raw.view(-1, 34)  # (n, 34)
    d = blocks[:, :2].contiguous().view(torch.float16).float()  # (n, 1)
    q = blocks[:, 2:].contiguous().view(torch.int8).float()  # (n, 32)
    return (q * d).view(shape)


# --8<-- [end:q8_0]


# --8<-- [start:quantize_q8_0]
def quantize_q8_0(weight):
    """weight (out, in), with in a multiple of 32 -> the Q8_0 bytes, uint8 (n * 34,)."""
    assert weight.shape[-1] % 32 == 0, "blocks of 32 weights of one row"
    blocks = weight.float().reshape(-1, 32)  # (n, 32): along each row
    d = blocks.abs().amax(dim=1, keepdim=True) / 127  # (n, 1), float32
    inverse = torch.where(d == 0, 0.0, 1 / d)
    q = round_half_away(blocks * inverse).to(torch.int8)  # (n, 32)
    stored = [d.half().view(torch.uint8), q.view(torch.uint8)]  # 2 + 32 bytes
    return torch.cat(stored, dim=1).flatten()


# --8<-- [end:quantize_q8_0]


# --8<-- [start:q4_1]
def dequantize_q4_1(raw, shape):
    """GGUF's Q4_1: blocks of 32 weights, each 20 bytes: a float16 scale d, a float16
    minimum m, then 16 bytes holding 32 values q from 0 to 15, two per byte: the low
    4 bits of byte i are weight i, the high 4 bits weight 16 + i. Weight = d · q + m.
    raw: uint8 (n * 20,) for n blocks."""
    blocks = raw.view(-1, 20)  # (n, 20)
    d = blocks[:, 0:2].contiguous().view(torch.float16).float()  # (n, 1)
    m = blocks[:, 2:4].contiguous().view(torch.float16).float()  # (n, 1)
    packed = blocks[:, 4:]  # (n, 16)
    q = torch.cat([packed & 0x0F, packed >> 4], dim=1).float()  # (n, 32)
    return (q * d + m).view(shape)


# --8<-- [end:q4_1]


# --8<-- [start:quantize_q4_1]
def quantize_q4_1(weight):
    """weight (out, in), with in a multiple of 32 -> the Q4_1 bytes, uint8 (n * 20,)."""
    assert weight.shape[-1] % 32 == 0, "blocks of 32 weights of one row"
    blocks = weight.float().reshape(-1, 32)  # (n, 32)
    m = blocks.amin(dim=1, keepdim=True)  # (n, 1), float32
    d = (blocks.amax(dim=1, keepdim=True) - m) / 15  # 16 levels: 0 to 15
    inverse = torch.where(d == 0, 0.0, 1 / d)
    q = torch.trunc((blocks - m) * inverse + 0.5).clamp(0, 15).to(torch.uint8)  # (n, 32)
    packed = q[:, :16] | (q[:, 16:] << 4)  # (n, 16)
    stored = [d.half().view(torch.uint8), m.half().view(torch.uint8), packed]
    return torch.cat(stored, dim=1).flatten()


# --8<-- [end:quantize_q4_1]


# --8<-- [start:q4_k]
def unpack_six_bits(packed):
    """Q4_K's 12 bytes (n, 12) -> its 8 scales and 8 minimums (n, 8) each, 6 bits each.
    Bytes 0-3 hold scales 0-3 in their low 6 bits, bytes 4-7 minimums 0-3; bytes 8-11
    hold the low 4 bits of scales 4-7 (low half) and of minimums 4-7 (high half), whose
    top 2 bits sit in the top 2 bits of bytes 0-3 and 4-7."""
    scales, mins, low = packed[:, 0:4], packed[:, 4:8], packed[:, 8:12]
    scales_4_7 = (low & 0x0F) | ((scales >> 6) << 4)
    mins_4_7 = (low >> 4) | ((mins >> 6) << 4)
    return torch.cat([scales & 63, scales_4_7], 1), torch.cat([mins & 63, mins_4_7], 1)


def dequantize_q4_k(raw, shape):
    """GGUF's Q4_K: super-blocks of 256 weights, each 144 bytes: a float16 scale d, a
    float16 dmin, 12 bytes of 6-bit scales and minimums (one pair per sub-block of 32
    weights), then 128 bytes of values q from 0 to 15, two per byte: each 32 bytes hold
    two sub-blocks, the first in the low 4 bits. Weight = (d · scale) · q − dmin · min."""
    blocks = raw.view(-1, 144)  # (n, 144)
    d = blocks[:, 0:2].contiguous().view(torch.float16).float()  # (n, 1)
    dmin = blocks[:, 2:4].contiguous().view(torch.float16).float()  # (n, 1)
    scales, mins = unpack_six_bits(blocks[:, 4:16])  # (n, 8) each
    packed = blocks[:, 16:].reshape(-1, 4, 1, 32)  # (n, 4, 1, 32)
    q = torch.cat([packed & 0x0F, packed >> 4], dim=2).reshape(-1, 8, 32)  # (n, 8, 32)
    step, offset = (d * scales)[:, :, None], (dmin * mins)[:, :, None]  # (n, 8, 1) each
    return (step * q - offset).view(shape)


# --8<-- [end:q4_k]


# --8<-- [start:q6_k]
def dequantize_q6_k(raw, shape):
    """GGUF's Q6_K: super-blocks of 256 weights, each 210 bytes: 128 bytes of the values'
    low 4 bits, 64 of their high 2 bits, 16 int8 scales (one per 16 weights), then a
    float16 d. In each half of 128 weights, byte i of the low bits holds weight i and
    64 + i, byte i of the high bits weights i, 32 + i, 64 + i and 96 + i. Values q run
    from −32 to 31 (stored plus 32). Weight = (d · scale) · q."""
    blocks = raw.view(-1, 210)  # (n, 210)
    low = blocks[:, :128].reshape(-1, 2, 1, 64)  # (n, half, 1, 64)
    low = torch.cat([low & 0x0F, low >> 4], dim=2).reshape(-1, 2, 4, 32)  # (n, half, 4, 32)
    high = blocks[:, 128:192].reshape(-1, 2, 1, 32)  # (n, half, 1, 32)
    high = torch.cat([(high >> shift) & 3 for shift in (0, 2, 4, 6)], dim=2)  # (n, half, 4, 32)
    q = ((low | (high << 4)).float() - 32).reshape(-1, 16, 16)  # (n, 16, 16)
    scales = blocks[:, 192:208].contiguous().view(torch.int8).float()  # (n, 16)
    d = blocks[:, 208:210].contiguous().view(torch.float16).float()  # (n, 1)
    return ((d * scales)[:, :, None] * q).view(shape)


# --8<-- [end:q6_k]


# --8<-- [start:quantize_k]
def inverse(x):
    return torch.where(x == 0, 0.0, 1 / x)  # a step of 0: every value 0


def quantize_q4_k(weight):
    """weight (out, in), with in a multiple of 256 -> Q4_K bytes, uint8 (n * 144,) for n
    super-blocks. Each sub-block of 32 as Q4_1's writer does, its range over 16 levels,
    but from a minimum of at most 0 (stored as dmin · min, min ≥ 0); then the 8 scales
    and 8 minimums of a super-block rounded to 6 bits against their largest, and the
    values against the rounded ones."""
    assert weight.shape[-1] % 256 == 0, "super-blocks of 256 weights of one row"
    blocks = weight.float().reshape(-1, 8, 32)  # (n, 8, 32)
    low = blocks.amin(dim=2).clamp(max=0)  # (n, 8)
    scale = (blocks.amax(dim=2) - low) / 15  # (n, 8)
    d = (scale.amax(dim=1, keepdim=True) / 63).half()  # (n, 1)
    dmin = (-low).amax(dim=1, keepdim=True).div(63).half()  # (n, 1)
    scales = round_half_away(scale * inverse(d.float())).clamp(0, 63)  # (n, 8)
    mins = round_half_away(-low * inverse(dmin.float())).clamp(0, 63)  # (n, 8)
    step, offset = d.float() * scales, dmin.float() * mins  # (n, 8) each
    q = round_half_away((blocks + offset[..., None]) * inverse(step)[..., None])
    q = q.clamp(0, 15).to(torch.uint8).reshape(-1, 4, 2, 32)  # (n, 4, 2, 32)
    packed = (q[:, :, 0] | (q[:, :, 1] << 4)).reshape(-1, 128)  # (n, 128)
    scales, mins = scales.to(torch.uint8), mins.to(torch.uint8)  # (n, 8) each
    six_bits = [
        scales[:, :4] | ((scales[:, 4:] >> 4) << 6),
        mins[:, :4] | ((mins[:, 4:] >> 4) << 6),
        (scales[:, 4:] & 0x0F) | ((mins[:, 4:] & 0x0F) << 4),
    ]  # (n, 4) each
    stored = [d.view(torch.uint8), dmin.view(torch.uint8), *six_bits, packed]
    return torch.cat(stored, dim=1).flatten()


def quantize_q6_k(weight):
    """weight (out, in), with in a multiple of 256 -> Q6_K bytes, uint8 (n * 210,) for n
    super-blocks. Each sub-block of 16 with its largest |weight| at ±31, as Q8_0's writer
    does at ±127; then the 16 scales rounded to 0...127 against their largest, and the
    values against those."""
    assert weight.shape[-1] % 256 == 0, "super-blocks of 256 weights of one row"
    blocks = weight.float().reshape(-1, 16, 16)  # (n, 16, 16)
    scale = blocks.abs().amax(dim=2) / 31  # (n, 16)
    d = (scale.amax(dim=1, keepdim=True) / 127).half()  # (n, 1)
    scales = round_half_away(scale * inverse(d.float())).clamp(0, 127)  # (n, 16)
    step = d.float() * scales  # (n, 16)
    q = round_half_away(blocks * inverse(step)[..., None]).clamp(-32, 31) + 32
    q = q.to(torch.uint8).reshape(-1, 2, 4, 32)  # (n, half, 4, 32)
    low, high = q & 0x0F, q >> 4
    low = torch.cat([low[:, :, 0] | (low[:, :, 2] << 4), low[:, :, 1] | (low[:, :, 3] << 4)], 2)
    high = high[:, :, 0] | (high[:, :, 1] << 2) | (high[:, :, 2] << 4) | (high[:, :, 3] << 6)
    stored = [
        low.reshape(-1, 128),
        high.reshape(-1, 64),
        scales.to(torch.int8).view(torch.uint8),
        d.view(torch.uint8),
    ]
    return torch.cat(stored, dim=1).flatten()


# --8<-- [end:quantize_k]
