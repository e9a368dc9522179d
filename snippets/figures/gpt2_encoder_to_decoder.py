"""Figures of docs/gpt2/encoder-to-decoder.md: Part II's decoder layer and GPT-2's block.

Side by side, as tensor-flow diagrams. As in Part I (snippets/figures/_flow.py), the
boxes are not drawn by hand: `record_calls` hooks every submodule of the live layer, runs
it, and each box is labelled with the module's name and the shapes its hook saw.
Arithmetic that is no module (the residual sum, an activation that is a plain function)
is drawn dashed.
"""

import itertools
from functools import cache

import torch

from snippets.figures import figure
from snippets.figures._flow import Node, draw_flow, module_node, record_calls
from snippets.hub import GPT2_SHAKESPEARE

TRANSFORMER = "snippets/transformer.py"  # Part II's layer, drawn from its code
WEIGHTS = GPT2_SHAKESPEARE.trained_here / "model.safetensors"
B, T, S = 2, 9, 7  # a batch of 2 targets of 9 tokens, each reading a source of 7
STEP = 0.95  # inches between the rows of a column
COLUMN = 4.6  # inches between columns


def shape_label(sizes):
    """A function that labels a shape with the letters of `sizes`, then its numbers."""
    assert len(set(sizes.values())) == len(sizes) and 1 not in sizes.values(), sizes
    letters = {size: letter for letter, size in sizes.items()}

    def label(shape):
        return "(" + ", ".join(letters.get(n, str(n)) for n in shape) + f")\n{tuple(shape)}"

    return label


@cache
def book_gpt2():
    from transformers import GPT2LMHeadModel

    return GPT2LMHeadModel.from_pretrained(GPT2_SHAKESPEARE.repo_id).eval()


@cache
def recorded_decoder_layer():
    """What the hooks saw on Part II's DecoderLayer, post-norm as in the paper, at the sizes
    of the book's GPT-2 (C = 256, 4 heads, d_ff = 4C); random weights, since only shapes
    are drawn."""
    from snippets.transformer import DecoderLayer, causal_mask

    config = book_gpt2().config
    C, H = config.n_embd, config.n_head
    torch.manual_seed(0)
    layer = DecoderLayer(C, H, 4 * C).eval()
    batch = {
        "x": torch.randn(B, T, C),  # the embedded target
        "memory": torch.randn(B, S, C),  # the encoder's output
        "self_mask": causal_mask(T),
    }
    sizes = {"B": B, "T": T, "S": S, "C": C, "H": H, "D": C // H, "4C": 4 * C}
    return record_calls(layer, batch), sizes, shape_label(sizes)


@cache
def recorded_gpt2():
    """What the hooks saw on the book's GPT-2 for a batch of B sequences of T tokens."""
    model = book_gpt2()
    config = model.config
    ids = torch.randint(config.vocab_size, (B, T), generator=torch.Generator().manual_seed(0))
    C, H = config.n_embd, config.n_head
    sizes = {"B": B, "T": T, "C": C, "H": H, "D": C // H, "3C": 3 * C, "4C": 4 * C}
    return record_calls(model, {"input_ids": ids}), sizes, shape_label(sizes)


def columns_flow(calls, shape, root, columns):
    """Nodes and edges for columns of rows: (x, input tensor, rows, output tensor).

    A row is a module's name under `root` (a box with its recorded shapes), "+" (the
    residual sum, fed by the column's input) or any other text (arithmetic, dashed).
    """
    nodes, edges = {}, []
    top = STEP * (max(len(rows) for _, _, rows, _ in columns) + 1)  # the columns start level
    for x, first, rows, last in columns:
        keys = [f"{x} in"]
        nodes[keys[0]] = Node(x, top, first, "tensor")
        for row, name in enumerate(rows, start=1):
            y = top - STEP * row
            recorded = root + name in calls
            nodes[f"{x} {name}"] = (
                module_node(x, y, calls, root + name, root) if recorded else Node(x, y, name, "op")
            )
            keys.append(f"{x} {name}")
        keys.append(f"{x} out")
        nodes[keys[-1]] = Node(x, top - STEP * (len(rows) + 1), last, "tensor")
        for a, b in itertools.pairwise(keys):
            name_a, name_b = a.split(" ", 1)[1], b.split(" ", 1)[1]
            if root + name_a in calls:
                label = shape(calls[root + name_a].outputs[0])
            elif root + name_b in calls:
                label = shape(calls[root + name_b].inputs[0])
            else:
                label = ""
            edges.append((a, b, label))
        edges.append((keys[0], f"{x} +", "residual"))
    return nodes, edges


@figure("decoder-layer-flow.svg", inputs=(TRANSFORMER,))
def decoder_layer_flow():
    calls, sizes, shape = recorded_decoder_layer()
    columns = [
        (0.0, "x: the target", ["self_attn", "dropout", "+", "norm1"], "x"),
        (COLUMN, "x", ["cross_attn", "dropout", "+", "norm2"], "x"),
        (
            2 * COLUMN,
            "x",
            ["feed_forward.linear1", "F.relu", "feed_forward.linear2", "dropout", "+", "norm3"],
            "output",
        ),
    ]
    nodes, edges = columns_flow(calls, shape, "", columns)
    nodes["memory"] = Node(COLUMN + 2.2, nodes[f"{COLUMN} in"].y, "memory: the source", "tensor")
    # the memory's arrow would cross the label of x, shown where the column before ends
    edges = [(a, b, "" if b == f"{COLUMN} cross_attn" else label) for a, b, label in edges]
    edges.append(("memory", f"{COLUMN} cross_attn", shape(calls["cross_attn"].inputs[1])))
    for x, name in [(0.0, "self_attn"), (COLUMN, "cross_attn")]:
        key = f"{x} {name}"
        nodes[f"{name} weights"] = Node(x + 2.5, nodes[key].y, "weights", "tensor")
        edges.append((key, f"{name} weights", shape(calls[name].outputs[1]).split("\n")[0]))
    title = (
        "Part II's DecoderLayer, post-norm as in the paper: self-attention, "
        "cross-attention, feed-forward"
    )
    return draw_flow(nodes, edges, title, sizes)


@figure("gpt2-block-flow.svg", inputs=(WEIGHTS,))
def gpt2_block_flow():
    calls, sizes, shape = recorded_gpt2()
    root = "transformer.h.0."
    columns = [
        (
            0.0,
            "hidden_states[0]",
            [
                "ln_1",
                "attn.c_attn",
                "causal attention\nof H heads",
                "attn.c_proj",
                "attn.resid_dropout",
                "+",
            ],
            "x",
        ),
        (
            COLUMN,
            "x",
            ["ln_2", "mlp.c_fc", "mlp.act", "mlp.c_proj", "mlp.dropout", "+"],
            "hidden_states[1]",
        ),
    ]
    nodes, edges = columns_flow(calls, shape, root, columns)
    title = "GPT-2's block, model.transformer.h[0]: LayerNorm first, no cross-attention, GELU"
    return draw_flow(nodes, edges, title, sizes)
