"""Tensor-flow diagrams drawn from forward hooks: Part I's and docs/gpt2/encoder-to-decoder.md's.

The diagrams are not drawn by hand: `record_calls` puts a forward hook on every
submodule of the live model, runs a batch through it, and the boxes are labelled with
the module names and the shapes the hooks saw. Arithmetic that is no module (a sum, a
reshape, softmax) is drawn dashed, with the shape of the tensor it hands on taken from
the recorded ones.
"""

from dataclasses import dataclass

import matplotlib.pyplot as plt
import torch
from matplotlib.patches import FancyBboxPatch, Patch

MODULE_COLOUR, OP_COLOUR, TEXT_GREY = "#c5cae9", "#ffffff", "#555555"


# ------------------------------------------------------------ shapes from forward hooks


@dataclass(frozen=True)
class Call:
    module: str  # the module's class name
    inputs: tuple[tuple[int, ...], ...]  # shapes of the tensor arguments, positional first
    outputs: tuple[tuple[int, ...], ...]  # shapes of the tensors the module returned


def _shapes(values) -> tuple[tuple[int, ...], ...]:
    values = values if isinstance(values, tuple | list) else (values,)
    return tuple(tuple(v.shape) for v in values if isinstance(v, torch.Tensor))


def record_calls(model, batch) -> dict[str, Call]:
    """Run `model` on `batch` with a forward hook on every submodule.

    Returns, for each module that ran, its qualified name -> the shapes it took and gave.
    """
    calls = {}

    def hook(name):
        def record(module, args, kwargs, output):
            calls[name] = Call(
                type(module).__name__, _shapes((*args, *kwargs.values())), _shapes(output)
            )

        return record

    handles = [
        module.register_forward_hook(hook(name), with_kwargs=True)
        for name, module in model.named_modules()
        if name  # the model itself returns a ModelOutput, not tensors
    ]
    try:
        with torch.no_grad():
            model(**batch)
    finally:
        for handle in handles:
            handle.remove()
    return calls


# ------------------------------------------------------------ boxes and arrows

INK, RESIDUAL = "#3f51b5", "#e65100"
CHAR_W = 0.068  # inches per character of 8-point monospace


@dataclass
class Node:
    x: float  # inches from the left
    y: float  # inches from the bottom
    text: str
    kind: str = "module"  # "module": recorded by a hook; "op": arithmetic; "tensor": a name

    @property
    def half_width(self):
        return CHAR_W * max(len(line) for line in self.text.splitlines()) / 2 + 0.14

    @property
    def half_height(self):
        return 0.09 if self.kind == "tensor" else 0.1 * len(self.text.splitlines()) + 0.1


def module_node(x, y, calls, name, root=""):
    """A box for a recorded module: its name under `root`, and its class."""
    return Node(x, y, f"{name.removeprefix(root)}\n{calls[name].module}")


def draw_flow(nodes, edges, title, sizes):
    """nodes: key -> Node; edges: (from, to, label) drawn as arrows, the label beside them.

    An edge labelled "residual" runs down the left of the boxes it skips.
    """
    left = min(n.x - n.half_width for n in nodes.values()) - 0.6
    right = max(n.x + n.half_width for n in nodes.values()) + 1.3
    bottom = min(n.y for n in nodes.values()) - 0.35
    top = max(n.y for n in nodes.values()) + 0.35
    fig = plt.figure(figsize=(right - left, top - bottom + 0.7))
    ax = fig.add_axes((0, 0.7 / (top - bottom + 0.7), 1, (top - bottom) / (top - bottom + 0.7)))
    ax.set_xlim(left, right)
    ax.set_ylim(bottom, top)
    ax.axis("off")
    for node in nodes.values():
        if node.kind != "tensor":
            ax.add_patch(
                FancyBboxPatch(
                    (node.x - node.half_width, node.y - node.half_height),
                    2 * node.half_width,
                    2 * node.half_height,
                    boxstyle="round,pad=0.02",
                    linewidth=1.0,
                    edgecolor=INK,
                    facecolor=MODULE_COLOUR if node.kind == "module" else OP_COLOUR,
                    linestyle="-" if node.kind == "module" else (0, (3, 2)),
                )
            )
        ax.text(
            node.x,
            node.y,
            node.text,
            ha="center",
            va="center",
            fontsize=8,
            family="monospace",
            linespacing=1.3,
            weight="bold" if node.kind == "tensor" else "normal",
        )
    for start, end, label in edges:
        a, b = nodes[start], nodes[end]
        if label == "residual":
            rail = min(n.x - n.half_width for n in nodes.values() if abs(n.x - a.x) < 1) - 0.25
            start_x = a.x - (0.6 if a.kind == "tensor" else a.half_width)
            ax.plot([start_x, rail, rail], [a.y, a.y, b.y], color=RESIDUAL, lw=1.0)
            ax.annotate(
                "",
                xy=(b.x - b.half_width, b.y),
                xytext=(rail, b.y),
                arrowprops={
                    "arrowstyle": "-|>",
                    "color": RESIDUAL,
                    "lw": 1.0,
                    "shrinkA": 0,
                    "shrinkB": 1,
                },
            )
            ax.text(
                rail - 0.06,
                (a.y + b.y) / 2,
                "residual",
                rotation=90,
                ha="right",
                va="center",
                fontsize=7.5,
                color=RESIDUAL,
            )
            continue
        if a.y == b.y:  # sideways, the label above the arrow
            start_xy, end_xy = (a.x + a.half_width, a.y), (b.x - b.half_width, b.y)
        else:
            start_xy, end_xy = (a.x, a.y - a.half_height), (b.x, b.y + b.half_height)
        ax.annotate(
            "",
            xy=end_xy,
            xytext=start_xy,
            arrowprops={"arrowstyle": "-|>", "color": INK, "lw": 1.0, "shrinkA": 1, "shrinkB": 1},
        )
        if not label:
            continue
        if a.y == b.y:
            x, y, align = (start_xy[0] + end_xy[0]) / 2, a.y + 0.22, "center"
        elif a.x == b.x:  # beside the middle of a vertical arrow
            x, y, align = a.x + 0.12, (start_xy[1] + end_xy[1]) / 2, "left"
        else:  # under the start of a slanted one, on the side it does not go to
            x, y = a.x + (0.12 if b.x < a.x else -0.12), start_xy[1] - 0.22
            align = "left" if b.x < a.x else "right"
        ax.text(
            x,
            y,
            label,
            ha=align,
            va="center",
            fontsize=7,
            color=TEXT_GREY,
            family="monospace",
            linespacing=1.15,
        )
    ax.set_title(title, loc="left", fontsize=9.5)
    height = top - bottom + 0.7
    fig.legend(
        handles=[
            Patch(facecolor=MODULE_COLOUR, edgecolor=INK, label="a module: shapes from its hook"),
            Patch(
                facecolor=OP_COLOUR,
                edgecolor=INK,
                linestyle="--",
                label="arithmetic inside a forward()",
            ),
        ],
        loc="lower left",
        ncols=2,
        fontsize=7.5,
        frameon=False,
        bbox_to_anchor=(0, 0.25 / height),
    )
    fig.text(
        0.01,
        0.1 / height,
        "   ".join(f"{k} = {v}" for k, v in sizes.items()),
        fontsize=7.5,
        color=TEXT_GREY,
    )
    return fig
