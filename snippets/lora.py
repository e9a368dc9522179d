"""LoRA by hand: low-rank adapters on MiniLM's attention projections.

docs/efficient/lora.md includes the sections marked below and runs them;
tests/test_efficient_lora.py proves them equal to peft's LoRA.
"""

# --8<-- [start:lora_linear]
import math

import torch
import torch.nn.functional as F
from torch import nn


class LoRALinear(nn.Module):
    """A frozen linear layer plus a trainable update of rank at most r:
    y = base(x) + (dropout(x) Aᵀ Bᵀ) · alpha / r, with A (r, C_in) and B (C_out, r)."""

    def __init__(self, base: nn.Linear, r: int, alpha: float, dropout: float = 0.0):
        super().__init__()
        self.base = base.requires_grad_(False)
        self.A = nn.Parameter(torch.empty(r, base.in_features))
        self.B = nn.Parameter(torch.zeros(base.out_features, r))  # B A = 0: nothing changes yet
        nn.init.kaiming_uniform_(self.A, a=math.sqrt(5))  # as nn.Linear draws its weights
        self.scaling = alpha / r
        # on the adapter's input only, as peft's lora_dropout; at 0, nn.Identity, as peft
        # (nn.Dropout(0) would compute the same and draw nothing, but show as a layer)
        self.dropout = nn.Dropout(dropout) if dropout > 0 else nn.Identity()

    def extra_repr(self):
        return f"r={self.A.shape[0]}, scaling={self.scaling}"

    def forward(self, x):  # x: (..., C_in)
        y = self.base(x)  # first, as peft: the backward pass then sums x's gradient in its order
        low_rank = F.linear(F.linear(self.dropout(x), self.A), self.B)  # (..., r), (..., C_out)
        return y + low_rank * self.scaling


# --8<-- [end:lora_linear]


# --8<-- [start:add_lora]
def add_lora(model, r=8, alpha=16, targets=("query", "value"), dropout=0.0):
    """Freeze every weight of `model`, then put a LoRALinear around each linear layer
    whose name ends in one of `targets`; the classification head stays trainable."""
    model.requires_grad_(False)
    for name, module in list(model.named_modules()):
        parent, _, attribute = name.rpartition(".")
        if attribute in targets and isinstance(module, nn.Linear):
            adapted = LoRALinear(module, r, alpha, dropout)
            setattr(model.get_submodule(parent), attribute, adapted)
    model.classifier.requires_grad_(True)  # new, random: it has to be learned in full
    return model


# --8<-- [end:add_lora]


# --8<-- [start:merge]
@torch.no_grad()
def merge(model):
    """Replace each LoRALinear by its base layer, with W + (alpha / r) B A as weight:
    one matrix product per layer, as before LoRA. In place: `model` is changed, its
    adapters are gone, and it is returned. It gives what the adapted model gives in eval
    mode, where the adapters' dropout is off, up to rounding."""
    for name, module in list(model.named_modules()):
        if isinstance(module, LoRALinear):
            module.base.weight += (module.B @ module.A) * module.scaling  # (C_out, C_in)
            parent, _, attribute = name.rpartition(".")
            setattr(model.get_submodule(parent), attribute, module.base)
    return model


# --8<-- [end:merge]
