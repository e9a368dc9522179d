"""Figures of docs/bert/task-heads.md: the pooler, then the classifier, as a flow diagram."""

import itertools
from functools import cache

import torch

from snippets.figures import figure
from snippets.figures._flow import Node, draw_flow, module_node, record_calls
from snippets.figures._minilm import pairs_batch, shape_namer
from snippets.hub import MINILM


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
