"""The chat format

The code docs/assistant/chat-format.md includes, which its tests import.
"""

import torch


# --8<-- [start:layer_norm]
def layer_norm(x, eps=1e-5):
    """x: (..., C) -> (..., C), each vector normalized over its C features."""
    centred = x - x.mean(-1, keepdim=True)
    return centred / torch.sqrt(centred.pow(2).mean(-1, keepdim=True) + eps)


# --8<-- [end:layer_norm]
