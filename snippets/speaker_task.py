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
    with the stage directions in brackets taken out."""
    found = []
    for speaker, speech in SPEECH.findall(play):
        speech = re.sub(r"\[[^\]]*\]", "", speech)  # "[Aside]", "[Exit]", over lines too
        text = [" ".join(line.split()) for line in speech.splitlines()]
        text = [line for line in text if line]
        if text:
            found.append((speaker, "\n".join(text[:lines])))
    return found


def speaker_examples(seed: int = 0, held_out_every: int = 4):
    """(train, held_out, speakers): prompt-completion dicts; of each kept speaker's speeches,
    every `held_out_every`-th is held out, so both splits have the same mix of speakers;
    then each split is shuffled with `seed`."""
    with open(hf_hub_download(MODEL, "tempest_gut.txt"), encoding="utf-8") as file:
        play = file.read()
    found = speeches(play)
    counts = {}
    for speaker, _ in found:
        counts[speaker] = counts.get(speaker, 0) + 1
    speakers = sorted(s for s, n in counts.items() if n >= MIN_SPEECHES)
    train, held_out, place = [], [], {}
    for speaker, text in found:
        if speaker in speakers:
            place[speaker] = place.get(speaker, -1) + 1  # among this speaker's speeches
            split = train if place[speaker] % held_out_every else held_out
            split.append({"prompt": f"Line: {text}\nSpeaker:", "completion": f" {speaker}"})
    random.Random(seed).shuffle(train)
    random.Random(seed).shuffle(held_out)
    return train, held_out, speakers


# --8<-- [end:examples]


# --8<-- [start:exact_match]
@torch.no_grad()
def answers(model, tokenizer, prompts: list[str], max_new_tokens: int = 8) -> list[str]:
    """Each prompt's greedy continuation up to the end-of-text token or the end of the
    line, stripped: the name the model gives."""
    side, pad = tokenizer.padding_side, tokenizer.pad_token
    tokenizer.padding_side = "left"  # a batch generates from its last column
    tokenizer.pad_token = tokenizer.eos_token  # any token: the attention mask skips it
    batch = tokenizer(prompts, return_tensors="pt", padding=True)
    tokenizer.padding_side, tokenizer.pad_token = side, pad  # the caller's tokenizer, as it was
    out = model.generate(
        **batch,
        max_new_tokens=max_new_tokens,
        do_sample=False,
        pad_token_id=tokenizer.eos_token_id,
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


# The SFT chapter's run, shipped: `python -m snippets.speaker_task` fine-tunes the book's
# GPT-2 on the training split with the chapter's own loss and loop, and writes the model,
# its tokenizer and what the run measured to checkpoints/gpt2-shakespeare-speaker/, which
# set-up places in the cache as `tensor-by-tensor/gpt2-shakespeare-speaker`.
SFT_SETTINGS = {"epochs": 3, "batch_size": 16, "lr": 3e-4, "seed": 0}


def answer_counts(model, tokenizer, examples: list[dict]) -> dict[str, int]:
    """How often the model gives each answer, greedy, most frequent first."""
    counts = {}
    for given in answers(model, tokenizer, [e["prompt"] for e in examples]):
        counts[given] = counts.get(given, 0) + 1
    return dict(sorted(counts.items(), key=lambda item: (-item[1], item[0])))


def train_speaker_model(output):
    """Fine-tune MODEL on the training split; save it with metrics.json in `output`."""
    import json
    import shutil
    from pathlib import Path

    from transformers import AutoModelForCausalLM, AutoTokenizer

    from snippets.sft import fine_tune

    train, held_out, speakers = speaker_examples(SFT_SETTINGS["seed"])
    model = AutoModelForCausalLM.from_pretrained(MODEL).eval()
    tokenizer = AutoTokenizer.from_pretrained(MODEL)
    before = {"held_out": exact_match(model, tokenizer, held_out)}
    before["train"] = exact_match(model, tokenizer, train)
    losses = fine_tune(model, tokenizer, train, **SFT_SETTINGS)
    after = {"held_out": exact_match(model, tokenizer, held_out)}
    after["train"] = exact_match(model, tokenizer, train)
    output = Path(output)
    model.save_pretrained(output)
    for name in ("tokenizer.json", "tokenizer_config.json"):  # the base model's, unchanged
        shutil.copyfile(hf_hub_download(MODEL, name), output / name)
    metrics = {
        "settings": {"base": MODEL, **SFT_SETTINGS},
        "speakers": speakers,
        "train_size": len(train),
        "held_out_size": len(held_out),
        "losses": losses,
        "exact_match_before": before,
        "exact_match_after": after,
        "held_out_answers_after": answer_counts(model, tokenizer, held_out),
    }
    (output / "metrics.json").write_text(json.dumps(metrics, indent=1) + "\n")
    return metrics


if __name__ == "__main__":
    from snippets.hub import GPT2_SPEAKER

    result = train_speaker_model(GPT2_SPEAKER.trained_here)
    print(result["exact_match_before"], result["exact_match_after"])
