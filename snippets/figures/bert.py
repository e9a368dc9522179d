"""Figures of Part I, BERT tensor by tensor (docs/bert/), drawn from MiniLM's real weights.

The tensor-flow diagrams are not drawn by hand: `record_calls` puts a forward hook
on every submodule of the live model, runs the batch of the tokenizer chapter
through it, and the boxes are labelled with the module names and the shapes the
hooks saw. Arithmetic that is no module (a sum, a reshape, softmax) is drawn
dashed, with the shape of the tensor it hands on taken from the recorded ones.
"""

import itertools
from dataclasses import dataclass
from functools import cache

import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.colors import PowerNorm
from matplotlib.patches import FancyBboxPatch, Patch

from snippets.figures import figure
from snippets.hub import MINILM

# the padded batch of sentence pairs the tokenizer chapter draws: B = 3, T = 13
QUESTIONS = ["Where is the cat?", "Who wrote Hamlet?", "Why?"]
ANSWERS = ["On the mat.", "Shakespeare wrote it around 1600.", "Because."]
# the sentence whose attention the self-attention chapter looks at
ATTENTION_SENTENCE = "The animal didn't cross the street because it was too tired."
# the encoder chapter's measurement: "bank" at the same position in every sentence
RIVER_BANK = [
    "we sat on the bank of the river and watched the water.",
    "they walked along the bank of the stream at dawn.",
    "ducks rested on the bank near the muddy lake.",
]
MONEY_BANK = [
    "she paid into the bank account every month.",
    "he borrowed from the bank to buy a house.",
    "we waited inside the bank to cash a cheque.",
]

MODULE_COLOUR, OP_COLOUR, TEXT_GREY = "#c5cae9", "#ffffff", "#555555"


@cache
def minilm():
    from transformers import AutoModel

    return AutoModel.from_pretrained(MINILM.repo_id, attn_implementation="eager")


@cache
def tokenizer():
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(MINILM.repo_id)


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


def shape_namer(model, batch):
    """The sizes behind a batch's shapes, and a function that labels a shape with them."""
    config = model.config
    B, T = batch["input_ids"].shape
    H = config.num_attention_heads
    sizes = {
        "B": B,
        "T": T,
        "C": config.hidden_size,
        "H": H,
        "D": config.hidden_size // H,
        "I": config.intermediate_size,
    }
    # a size that meant two things would make a label ambiguous
    assert len(set(sizes.values())) == len(sizes) and 1 not in sizes.values(), sizes
    letters = {size: letter for letter, size in sizes.items()}

    def label(shape):
        return "(" + ", ".join(letters.get(n, str(n)) for n in shape) + f")\n{tuple(shape)}"

    return sizes, label


def pairs_batch():
    return tokenizer()(QUESTIONS, ANSWERS, padding=True, return_tensors="pt")


@cache
def recorded_minilm():
    """What the hooks saw on MiniLM for the tokenizer chapter's batch; the sizes; the labeller."""
    model, batch = minilm(), pairs_batch()
    return record_calls(model, batch), *shape_namer(model, batch)


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


@figure("embeddings-flow.svg")
def embeddings_flow():
    calls, sizes, shape = recorded_minilm()
    nodes = {
        "ids": Node(0, 5.2, "input_ids", "tensor"),
        "types": Node(2.9, 5.2, "token_type_ids", "tensor"),
        "positions": Node(5.8, 5.2, "position_ids", "tensor"),
        "word": module_node(0, 4.1, calls, "embeddings.word_embeddings"),
        "type": module_node(2.9, 4.1, calls, "embeddings.token_type_embeddings"),
        "position": module_node(5.8, 4.1, calls, "embeddings.position_embeddings"),
        "sum": Node(2.9, 2.75, "word + token type + position", "op"),
        "norm": module_node(2.9, 1.85, calls, "embeddings.LayerNorm"),
        "dropout": module_node(2.9, 0.85, calls, "embeddings.dropout"),
        "out": Node(2.9, 0, "hidden_states[0]", "tensor"),
    }
    word, token_type, position = (
        calls[f"embeddings.{n}_embeddings"] for n in ("word", "token_type", "position")
    )
    edges = [
        ("ids", "word", shape(word.inputs[0])),
        ("types", "type", shape(token_type.inputs[0])),
        ("positions", "position", shape(position.inputs[0])),
        ("word", "sum", shape(word.outputs[0])),
        ("type", "sum", shape(token_type.outputs[0])),
        ("position", "sum", shape(position.outputs[0])),
        ("sum", "norm", shape(calls["embeddings.LayerNorm"].inputs[0])),
        ("norm", "dropout", shape(calls["embeddings.LayerNorm"].outputs[0])),
        ("dropout", "out", shape(calls["embeddings.dropout"].outputs[0])),
    ]
    return draw_flow(
        nodes, edges, "model.embeddings, on the tokenizer chapter's batch of pairs", sizes
    )


def heads_shape(calls, name):
    """(B, H, T, D): a (B, T, C) tensor once split into heads; H from the recorded probabilities."""
    B, T, C = calls[f"{name}.query"].outputs[0]
    H = calls[name].outputs[1][1]
    return (B, H, T, C // H)


@figure("self-attention-flow.svg")
def self_attention_flow():
    calls, sizes, shape = recorded_minilm()
    root = "encoder.layer.0.attention.self"
    attention = calls[root]
    split = shape(heads_shape(calls, root))
    nodes = {
        "x": Node(2.9, 7.6, "hidden_states[0]", "tensor"),
        "q": module_node(0, 6.6, calls, f"{root}.query", "encoder.layer.0.attention."),
        "k": module_node(2.9, 6.6, calls, f"{root}.key", "encoder.layer.0.attention."),
        "v": module_node(5.8, 6.6, calls, f"{root}.value", "encoder.layer.0.attention."),
        "q_heads": Node(0, 5.3, "split heads\nview, transpose", "op"),
        "k_heads": Node(2.9, 5.3, "split heads\nview, transpose", "op"),
        "v_heads": Node(5.8, 5.3, "split heads\nview, transpose", "op"),
        "scores": Node(1.45, 4.0, "Q Kᵀ / √D", "op"),
        "mask": Node(1.45, 2.9, "+ padding mask", "op"),
        "attention_mask": Node(-1.6, 2.9, "mask, from\nattention_mask", "tensor"),
        "softmax": Node(1.45, 1.8, "softmax over keys", "op"),
        "mix": Node(4.2, 1.1, "probabilities @ V", "op"),
        "merge": Node(4.2, 0.0, "merge heads\ntranspose, reshape", "op"),
        "out": Node(4.2, -1.0, "context → attention.output", "tensor"),
    }
    probabilities = shape(attention.outputs[1])
    edges = [
        ("x", "q", shape(calls[f"{root}.query"].inputs[0])),
        ("x", "k", ""),
        ("x", "v", ""),
        ("q", "q_heads", shape(calls[f"{root}.query"].outputs[0])),
        ("k", "k_heads", shape(calls[f"{root}.key"].outputs[0])),
        ("v", "v_heads", shape(calls[f"{root}.value"].outputs[0])),
        ("q_heads", "scores", split),
        ("k_heads", "scores", split),
        ("scores", "mask", probabilities),
        ("attention_mask", "mask", shape(attention.inputs[1])),
        ("mask", "softmax", probabilities),
        ("softmax", "mix", probabilities + "\n= attentions[0]"),
        ("v_heads", "mix", split),
        ("mix", "merge", split),
        ("merge", "out", shape(attention.outputs[0])),
    ]
    return draw_flow(nodes, edges, f"model.{root}", sizes)


@figure("encoder-layer-flow.svg")
def layer_flow():
    calls, sizes, shape = recorded_minilm()
    root = "encoder.layer.0."
    columns = [
        (
            0.0,
            "hidden_states[0]",
            [
                "attention.self",
                "attention.output.dense",
                "attention.output.dropout",
                "+",
                "attention.output.LayerNorm",
            ],
            "attention output",
        ),
        (
            4.4,
            "attention output",
            [
                "intermediate.dense",
                "intermediate.intermediate_act_fn",
                "output.dense",
                "output.dropout",
                "+",
                "output.LayerNorm",
            ],
            "hidden_states[1]",
        ),
    ]
    nodes, edges = {}, []
    for x, first, names, last in columns:
        keys = [f"{x} in"]
        nodes[keys[0]] = Node(x, 0.95 * 7, first, "tensor")
        for row, name in enumerate(names, start=1):
            key = f"{x} {name}"
            y = 0.95 * (7 - row)
            nodes[key] = (
                Node(x, y, "+", "op")
                if name == "+"
                else module_node(x, y, calls, root + name, root)
            )
            keys.append(key)
        keys.append(f"{x} out")
        nodes[keys[-1]] = Node(x, 0.95 * (6 - len(names)), last, "tensor")
        for a, b in itertools.pairwise(keys):
            module_a, module_b = a.split(" ", 1)[1], b.split(" ", 1)[1]
            if module_a in names and module_a != "+":
                label = shape(calls[root + module_a].outputs[0])
            elif module_b in names and module_b != "+":
                label = shape(calls[root + module_b].inputs[0])
            else:
                label = ""
            edges.append((a, b, label))
        edges.append((keys[0], f"{x} +", "residual"))
    attention = calls[root + "attention.self"]
    nodes["attentions"] = Node(2.6, nodes["0.0 attention.self"].y, "attentions[0]", "tensor")
    edges.append(("0.0 attention.self", "attentions", shape(attention.outputs[1])))
    return draw_flow(nodes, edges, f"model.{root.rstrip('.')}: attention, then feed-forward", sizes)


@figure("encoder-flow.svg")
def encoder_flow():
    calls, sizes, shape = recorded_minilm()
    layers = [f"encoder.layer.{i}" for i in range(minilm().config.num_hidden_layers)]
    chain = ["embeddings", *layers, "pooler"]
    step = 1.2  # room for three lines of label between boxes
    nodes = {"ids": Node(0, step * (len(chain) + 1), "input_ids", "tensor")}
    for row, name in enumerate(chain, start=1):
        nodes[name] = module_node(0, step * (len(chain) + 1 - row), calls, name)
    nodes["out"] = Node(0, 0, "pooler_output", "tensor")
    keys = list(nodes)
    edges = [("ids", "embeddings", shape(calls["embeddings"].inputs[0]))]
    for i, (a, b) in enumerate(itertools.pairwise(keys[1:])):
        # what comes out of the embeddings, then of each layer: hidden_states[0 ... L]
        if b == "out":
            edges.append((a, b, shape(calls[a].outputs[0])))
            continue
        named = f"hidden_states[{i}]" + (" = last_hidden_state" if b == "pooler" else "")
        edges.append((a, b, f"{named}\n{shape(calls[a].outputs[0])}"))
    for i, name in enumerate(layers):
        nodes[f"attentions {i}"] = Node(3.1, nodes[name].y, f"attentions[{i}]", "tensor")
        probabilities = calls[f"{name}.attention.self"].outputs[1]
        edges.append((name, f"attentions {i}", shape(probabilities).split("\n")[0]))
    title = "model: the output of encoder.layer.i is hidden_states[i + 1]"
    return draw_flow(nodes, edges, title, sizes)


@cache
def classifier_model():
    from transformers import AutoModelForSequenceClassification

    torch.manual_seed(0)  # the classifier is initialized at random: only its shapes are drawn
    return AutoModelForSequenceClassification.from_pretrained(
        MINILM.repo_id, num_labels=2, attn_implementation="eager"
    )


@figure("task-heads-flow.svg")
def pooler_flow():
    model, batch = classifier_model(), pairs_batch()
    calls = record_calls(model, batch)
    sizes, shape = shape_namer(model, batch)
    names = ["bert.pooler.dense", "bert.pooler.activation", "dropout", "classifier"]
    nodes = {
        "last": Node(0, 5.7, "last_hidden_state", "tensor"),
        "cls": Node(0, 4.75, "[:, 0]: the [CLS] row", "op"),
    }
    for row, name in enumerate(names):
        nodes[name] = module_node(0, 3.8 - 0.95 * row, calls, name)
    nodes["logits"] = Node(0, 0, "logits", "tensor")
    nodes["pooled"] = Node(3.1, nodes["bert.pooler.activation"].y, "pooler_output", "tensor")
    edges = [
        ("last", "cls", shape(calls["bert.encoder.layer.5"].outputs[0])),
        ("cls", names[0], shape(calls[names[0]].inputs[0])),
        *[(a, b, shape(calls[a].outputs[0])) for a, b in itertools.pairwise(names)],
        (names[-1], "logits", shape(calls[names[-1]].outputs[0])),
        (names[1], "pooled", ""),
    ]
    title = "BertForSequenceClassification: the pooler, then the classifier"
    return draw_flow(nodes, edges, title, sizes)


# ------------------------------------------------------------ what the model computes


@figure("model-parameters.svg", inputs=("snippets/bert_parameters.py",))
def parameters_per_block():
    from transformers import BertConfig, BertModel

    from snippets.bert_parameters import parameters_by_module

    with torch.device("meta"):  # shapes only: no memory, no random numbers
        base = BertModel(BertConfig())
    counts = {"MiniLM": parameters_by_module(minilm()), "bert-base": parameters_by_module(base)}
    colours = ["#3f51b5", "#9fa8da", "#bdbdbd", "#00897b", "#80cbc4", "#ff8a65", "#6d4c41"]
    fig, ax = plt.subplots(figsize=(9.2, 2.9))
    for row, blocks in enumerate(counts.values()):
        total = sum(blocks.values())
        left = 0.0
        for (block, count), colour in zip(blocks.items(), colours, strict=True):
            millions = count / 1e6
            ax.barh(
                row,
                millions,
                left=left,
                color=colour,
                edgecolor="white",
                height=0.6,
                label=block if row == 0 else None,
            )
            if count / total > 0.07:
                ax.text(
                    left + millions / 2,
                    row,
                    f"{count / total:.0%}",
                    ha="center",
                    va="center",
                    fontsize=8,
                    color="white",
                )
            left += millions
        ax.text(left + 1.2, row, f"{total / 1e6:.1f} M", va="center", fontsize=9)
    ax.set_yticks(range(len(counts)), list(counts))
    ax.invert_yaxis()
    ax.set_xlabel("parameters (millions)")
    ax.set_xlim(0, 122)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.28), ncols=4, fontsize=8, frameon=False)
    ax.spines["left"].set_visible(False)
    ax.tick_params(axis="y", length=0)
    return fig


@figure("embeddings-contributions.svg")
def embedding_contributions():
    model = minilm()
    batch = tokenizer()(QUESTIONS[0], ANSWERS[0], return_tensors="pt")
    tables = model.embeddings
    T = batch["input_ids"].shape[1]
    parts = {
        "word": tables.word_embeddings.weight[batch["input_ids"][0]],
        "position": tables.position_embeddings.weight[:T],
        "token type": tables.token_type_embeddings.weight[batch["token_type_ids"][0]],
    }
    total = sum(parts.values())
    # each part's projection on the sum, as a share of the sum's squared length: they add to 1
    shares = {
        name: ((part * total).sum(-1) / (total * total).sum(-1)).detach().numpy()
        for name, part in parts.items()
    }
    assert all((share > 0).all() for share in shares.values()), "a negative share would not stack"
    tokens = batch.tokens()
    fig, ax = plt.subplots(figsize=(8.4, 3.0))
    bottom = np.zeros(T)
    for (name, share), colour in zip(
        shares.items(), ["#3f51b5", "#ff8a65", "#00897b"], strict=True
    ):
        ax.bar(range(T), share, bottom=bottom, color=colour, label=name, width=0.75)
        bottom += share
    ax.set_xticks(range(T), tokens, fontsize=8.5)
    ax.set_ylabel("share of the sum")
    ax.set_ylim(0, 1)
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8.5, frameon=False)
    ax.set_title(
        "what each of the three embeddings adds to each token's vector, before LayerNorm",
        loc="left",
        fontsize=9.5,
    )
    return fig


@cache
def attention_sentence_outputs():
    batch = tokenizer()(ATTENTION_SENTENCE, return_tensors="pt")
    with torch.no_grad():
        return batch.tokens(), minilm()(**batch, output_attentions=True, output_hidden_states=True)


@figure("self-attention-heads.svg")
def attention_heads():
    tokens, outputs = attention_sentence_outputs()
    probabilities = outputs.attentions[0][0]  # layer 0: (H, T, T)
    H = probabilities.shape[0]
    # three heads a row, at about the width of the page, so that the token labels print at
    # the size of the text around them
    fig, axes = plt.subplots(
        H // 3, 3, figsize=(9.5, 13.5), sharex=True, sharey=True, layout="constrained"
    )
    scale = PowerNorm(gamma=0.5, vmin=0, vmax=1)  # square root: spread-out heads stay visible
    for head, ax in enumerate(axes.flat):
        image = ax.imshow(probabilities[head].numpy(), cmap="Blues", norm=scale)
        ax.set_title(f"head {head}", fontsize=10)
        ax.set_xticks(range(len(tokens)), tokens, rotation=90, fontsize=9)
        ax.set_yticks(range(len(tokens)), tokens, fontsize=9)
        ax.tick_params(length=0)
    fig.supxlabel("key: the token attended to", fontsize=9)
    fig.supylabel("query: the token attending", fontsize=9)
    fig.colorbar(image, ax=axes, shrink=0.4, label="attention probability (square-root scale)")
    return fig


@figure("self-attention-padding.svg")
def attention_padding():
    model = minilm()
    short, long = "The cat sat.", "Transformers read every word of a sentence at once."
    alone = tokenizer()(short, return_tensors="pt")
    padded = tokenizer()([short, long], padding=True, return_tensors="pt")
    layer, head = 0, 0
    with torch.no_grad():
        p_alone = model(**alone, output_attentions=True).attentions[layer][0, head]
        p_padded = model(**padded, output_attentions=True).attentions[layer][0, head]
    T_real = p_alone.shape[0]
    tokens = padded.tokens(0)
    fig, axes = plt.subplots(
        1, 3, figsize=(11.5, 4.4), width_ratios=[12, 6, 6], layout="constrained"
    )
    panels = [
        (p_padded, tokens, tokens, "in a padded batch: [PAD] keys get 0"),
        (p_alone, tokens[:T_real], tokens[:T_real], "alone: no padding"),
    ]
    for ax, (probabilities, rows, columns, title) in zip(axes, panels, strict=False):
        image = ax.imshow(probabilities.numpy(), cmap="Blues", vmin=0, vmax=1)
        ax.set_xticks(range(len(columns)), columns, rotation=90, fontsize=7.5)
        ax.set_yticks(range(len(rows)), rows, fontsize=7.5)
        ax.set_title(title, fontsize=9.5)
    fig.colorbar(image, ax=axes[:2], shrink=0.8, label="probability")
    difference = (p_padded[:T_real, :T_real] - p_alone).abs()
    shown = axes[2].imshow(difference.numpy(), cmap="Oranges", vmin=0)
    axes[2].set_xticks(range(T_real), tokens[:T_real], rotation=90, fontsize=7.5)
    axes[2].set_yticks(range(T_real), tokens[:T_real], fontsize=7.5)
    axes[2].set_title(
        f"|padded − alone|, real tokens\nlargest: {difference.max():.1e}", fontsize=9.5
    )
    fig.colorbar(shown, ax=axes[2], shrink=0.8, format="%.1e")
    fig.suptitle(f"layer {layer}, head {head}: rows are queries, columns keys", fontsize=10)
    return fig


@figure("feed-forward-gelu.svg", inputs=("snippets/bert_by_hand.py",))
def gelu_difference():
    from snippets.bert_by_hand import gelu, gelu_tanh, linear

    tokens, outputs = attention_sentence_outputs()
    layer = minilm().encoder.layer[0]
    with torch.no_grad():
        attention_output = layer.attention(outputs.hidden_states[0])[0]
        widened = linear(attention_output, layer.intermediate.dense).flatten()
    x = torch.linspace(-6, 6, 1201, dtype=torch.float64)
    fig, (left, right) = plt.subplots(1, 2, figsize=(10.5, 3.6))
    left.plot(x, gelu(x), color="#3f51b5", lw=2.2, label="GELU, exact (erf): BERT's")
    left.plot(x, gelu_tanh(x), color="#ff8a65", lw=1.0, ls="--", label="tanh approximation")
    left.plot(x, torch.relu(x), color="#bdbdbd", lw=0.8, label="ReLU, for comparison")
    left.set_xlim(-4, 3)
    left.set_ylim(-0.5, 3)
    left.legend(fontsize=8, frameon=False)
    left.set_title("the two curves, on top of each other", loc="left", fontsize=9.5)
    right.plot(x, gelu(x) - gelu_tanh(x), color="#e65100", lw=1.4)
    right.axhline(0, color="#999999", lw=0.6)
    right.set_ylabel("exact − tanh")
    right.set_xlabel("pre-activation")
    share = right.twinx()
    share.hist(widened.numpy(), bins=np.linspace(-6, 6, 97), color="#3f51b5", alpha=0.25)
    share.set_ylabel("count of layer 0's pre-activations", color="#3f51b5")
    share.spines["right"].set_visible(True)
    right.set_title(
        f"their difference, over where MiniLM's inputs to GELU lie ({len(tokens)} tokens)",
        loc="left",
        fontsize=9.5,
    )
    fig.tight_layout()
    return fig


@cache
def bank_outputs():
    """The encoder chapter's batch: its hidden states, padding, and where "bank" is."""
    batch = tokenizer()(RIVER_BANK + MONEY_BANK, padding=True, return_tensors="pt")
    bank = tokenizer().convert_tokens_to_ids("bank")
    positions = [row.tolist().index(bank) for row in batch["input_ids"]]
    with torch.no_grad():
        hidden_states = minilm()(**batch, output_hidden_states=True).hidden_states
    return torch.stack(hidden_states), batch["attention_mask"].bool(), positions


@figure("encoder-layers.svg")
def what_layers_change():
    hidden, real, positions = bank_outputs()  # (L + 1, B, T, C), (B, T), B positions
    cosine = torch.nn.functional.cosine_similarity
    moved = [cosine(hidden[i], hidden[i + 1], dim=-1)[real] for i in range(len(hidden) - 1)]
    vectors = torch.nn.functional.normalize(
        hidden[:, torch.arange(len(positions)), positions], dim=-1
    )
    similarity = vectors @ vectors.transpose(1, 2)  # (L + 1, 6, 6)
    n = len(RIVER_BANK)
    off_diagonal = ~torch.eye(n, dtype=torch.bool)
    same = torch.cat(
        [similarity[:, :n, :n][:, off_diagonal], similarity[:, n:, n:][:, off_diagonal]], dim=1
    ).mean(1)
    across = similarity[:, :n, n:].mean((1, 2))
    fig, (left, right) = plt.subplots(1, 2, figsize=(10.5, 3.6))
    L = len(moved)
    jitter = np.random.default_rng(0).uniform(-0.15, 0.15, len(moved[0]))
    for layer, similarities in enumerate(moved):
        left.scatter(layer + jitter, similarities, s=8, color="#3f51b5", alpha=0.35, lw=0)
    means = [m.mean() for m in moved]
    left.plot(range(L), means, color="#e65100", marker="o", label="mean over real tokens")
    left.set_xlabel("encoder.layer[i]: hidden_states[i] → hidden_states[i + 1]")
    left.set_ylabel("cosine(before, after)")
    left.set_title("how far each token's vector turns in each layer", loc="left", fontsize=9.5)
    left.legend(fontsize=8, frameon=False, loc="lower left")
    indices = range(L + 1)
    right.plot(
        indices, same, marker="o", color="#3f51b5", label="same sense (river–river, money–money)"
    )
    right.plot(indices, across, marker="o", color="#e65100", label="different senses (river–money)")
    right.set_xlabel("hidden_states[i]")
    right.set_ylabel("mean cosine between the two 'bank's")
    right.set_title("'bank' in six sentences, after each layer", loc="left", fontsize=9.5)
    right.legend(fontsize=8, frameon=False, loc="lower left")
    left.set_xticks(range(L))
    right.set_xticks(range(L + 1))
    fig.tight_layout()
    return fig
