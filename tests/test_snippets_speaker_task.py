"""snippets/speaker_task.py: Part V's data set, its split, and the shipped SFT checkpoint
`tensor-by-tensor/gpt2-shakespeare-speaker` that `python -m snippets.speaker_task` wrote."""

import json

import pytest
from transformers import AutoModelForCausalLM, AutoTokenizer

from snippets import speaker_task
from snippets.hub import GPT2_SPEAKER
from snippets.speaker_task import SFT_SETTINGS, exact_match, speaker_examples, speeches

PLAY = """ACT 1

MIRANDA.
If by your art, my dearest father, you have
Put the wild waters in this    roar,

[Enter ARIEL]

PROSPERO.
[Aside]  Be collected:
No more amazement.

"""


def test_a_speech_is_its_speakers_first_lines_without_stage_directions():
    assert speeches(PLAY) == [
        (
            "MIRANDA",
            "If by your art, my dearest father, you have\nPut the wild waters in this roar,",
        ),
        ("PROSPERO", "Be collected:\nNo more amazement."),
    ]
    assert speeches(PLAY, lines=1)[0] == ("MIRANDA", "If by your art, my dearest father, you have")


def test_the_split_keeps_every_speech_of_the_kept_speakers_once():
    train, held_out, speakers = speaker_examples()
    assert (len(train), len(held_out), len(speakers)) == (447, 156, 11)
    assert {e["completion"].strip() for e in train + held_out} == set(speakers)
    prompts = [e["prompt"] for e in train + held_out]
    assert all(p.startswith("Line: ") and p.endswith("\nSpeaker:") for p in prompts)
    # a line said twice ("I'll ... ") may repeat, but no example is in both splits
    assert not {tuple(e.items()) for e in train} & {tuple(e.items()) for e in held_out}
    # each speaker's every fourth speech is held out: the two splits share one mix of speakers
    for speaker in speakers:
        n_train, n_held_out = (
            sum(e["completion"] == f" {speaker}" for e in split) for split in (train, held_out)
        )
        assert n_held_out == -(-(n_train + n_held_out) // 4)
    assert speaker_examples(seed=1)[0] != train
    assert sorted(map(str, speaker_examples(seed=1)[0])) == sorted(map(str, train))


@pytest.fixture(scope="module")
def shipped():
    model = AutoModelForCausalLM.from_pretrained(GPT2_SPEAKER.repo_id).eval()
    return model, AutoTokenizer.from_pretrained(GPT2_SPEAKER.repo_id)


def test_the_shipped_checkpoint_was_trained_by_this_script_and_scores_what_it_recorded(shipped):
    metrics = json.loads((GPT2_SPEAKER.snapshot_dir() / "metrics.json").read_text())
    assert metrics["settings"] == {"base": speaker_task.MODEL, **SFT_SETTINGS}
    train, held_out, speakers = speaker_examples(SFT_SETTINGS["seed"])
    assert metrics["speakers"] == speakers
    batches = -(-len(train) // SFT_SETTINGS["batch_size"])
    assert len(metrics["losses"]) == SFT_SETTINGS["epochs"] * batches
    # greedy answers: a near-tie may fall the other way on another CPU, one or two of 156
    measured = exact_match(*shipped, held_out)
    assert abs(measured - metrics["exact_match_after"]["held_out"]) <= 2 / len(held_out)
    assert metrics["exact_match_before"] == {"held_out": 0.0, "train": 0.0}
    assert sum(metrics["held_out_answers_after"].values()) == len(held_out)


def test_answers_leave_the_callers_tokenizer_as_it_was(shipped):
    model, tokenizer = shipped
    side, pad = tokenizer.padding_side, tokenizer.pad_token
    speaker_task.answers(model, tokenizer, ["Line: Hark!\nSpeaker:", "Line: No.\nSpeaker:"])
    assert (tokenizer.padding_side, tokenizer.pad_token) == (side, pad)
