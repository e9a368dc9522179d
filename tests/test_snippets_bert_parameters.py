"""snippets/bert_parameters.py, which docs/bert/model.md includes: BERT's parameter
count per module, by formula from the config, against the count of the parameters of
transformers' BertModel itself, for bert-base and for odd sizes."""

import pytest
import torch
from transformers import BertConfig, BertModel

from snippets.bert_parameters import parameters_by_formula, parameters_by_module


@pytest.mark.parametrize(
    "config",
    [
        BertConfig(),
        BertConfig(
            hidden_size=96,
            num_hidden_layers=3,
            num_attention_heads=6,
            intermediate_size=200,
            vocab_size=777,
            type_vocab_size=4,
        ),
    ],
    ids=["bert-base", "odd sizes"],
)
def test_parameter_counts_follow_from_the_config(config):
    with torch.device("meta"):  # shapes only
        model = BertModel(config)
    by_module = parameters_by_module(model)
    assert parameters_by_formula(config) == by_module
    assert sum(by_module.values()) == sum(p.numel() for p in model.parameters())
