"""Part V's task: "who speaks this line?" over The Tempest, the one play the book's GPT-2
never saw. Each example is a speech's opening lines as the prompt and its speaker's name as
the completion, in TRL's prompt-completion format. The supervised fine-tuning, DPO and GRPO
chapters all use it, with the same split and the same exact-match score.

docs/assistant/*.md include the sections marked below.
"""

# --8<-- [start:examples]
import random
import re

import torch
from huggingface_hub import hf_hub_download

MODEL = "tensor-by-tensor/gpt2-shakespeare"
MIN_SPEECHES = 30  # speakers with fewer speeches are left out: 11 remain
SPEECH = re.compile(r"\n\n([A-Z][A-Z ]+)\.\n(.+?)(?=\n\n)", re.S)  # "NAME.\nlines\n\n"


def speeches(play: str, lines: int = 2) -> list[tuple[str, str]]:
    """(speaker, the first `lines` lines of the speech) for each speech, in play order,
    stage directions in brackets left out."""
    found = []
    for speaker, speech in SPEECH.findall(play):
        text = [line.strip() for line in speech.splitlines() if not line.startswith("[")]
        text = [line for line in text if line]
        if text:
            found.append((speaker, "\n".join(text[:lines])))
    return found


def speaker_examples(seed: int = 0, held_out_every: int = 4):
    """(train, held_out, speakers): prompt-completion dicts, every `held_out_every`-th
    speech of the kept speakers held out, then each split shuffled with `seed`."""
    with open(hf_hub_download(MODEL, "tempest_gut.txt"), encoding="utf-8") as file:
        play = file.read()
    found = speeches(play)
    counts = {}
    for speaker, _ in found:
        counts[speaker] = counts.get(speaker, 0) + 1
    speakers = sorted(s for s, n in counts.items() if n >= MIN_SPEECHES)
    examples = [
        {"prompt": f"Line: {text}\nSpeaker:", "completion": f" {speaker}"}
        for speaker, text in found
        if speaker in speakers
    ]
    train = [e for i, e in enumerate(examples) if i % held_out_every]
    held_out = [e for i, e in enumerate(examples) if not i % held_out_every]
    random.Random(seed).shuffle(train)
    random.Random(seed).shuffle(held_out)
    return train, held_out, speakers


# --8<-- [end:examples]


# --8<-- [start:exact_match]
@torch.no_grad()
def answers(model, tokenizer, prompts: list[str], max_new_tokens: int = 8) -> list[str]:
    """Each prompt's greedy continuation up to the end-of-text token or the end of the
    line, stripped: the name the model gives."""
    tokenizer.padding_side = "left"  # a batch generates from its last column
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    batch = tokenizer(prompts, return_tensors="pt", padding=True)
    out = model.generate(
        **batch,
        max_new_tokens=max_new_tokens,
        do_sample=False,
        pad_token_id=tokenizer.pad_token_id,
    )
    new = tokenizer.batch_decode(out[:, batch["input_ids"].shape[1] :], skip_special_tokens=True)
    return [text.split("\n")[0].strip() for text in new]


def exact_match(model, tokenizer, examples: list[dict]) -> float:
    """The fraction of examples whose greedy answer is exactly the speaker's name."""
    given = answers(model, tokenizer, [e["prompt"] for e in examples])
    return sum(g == e["completion"].strip() for g, e in zip(given, examples, strict=True)) / len(
        examples
    )


# --8<-- [end:exact_match]
