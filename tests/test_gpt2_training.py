"""docs/gpt2/training.md's script (snippets/gpt2_training.py), run on a tiny config: an
interrupted run resumes to the same weights and metrics as a straight one, the output is
a checkpoint transformers loads, a state refuses other settings, and the held-out play
is never trained on; the shipped GPT-2 was trained by this very script with its default
settings and meets the page's bar; and the page's warning box holds against
GPT2LMHeadModel (labels=input_ids, shifted inside the model)."""

import dataclasses
import functools
import json

import pytest
import torch
from safetensors.torch import load_file
from transformers import AutoTokenizer, GPT2LMHeadModel

from snippets import gpt2_training, training_runs
from snippets.hub import GPT2_SHAKESPEARE
from tests.training import run_training, without_timing

TINY = {
    "--vocab-size": "300",
    "--n-positions": "32",
    "--n-embd": "32",
    "--n-layer": "2",
    "--n-head": "2",
    "--batch-size": "4",
    "--steps": "6",
    "--warmup-steps": "2",
    "--eval-every": "3",
    "--save-every": "2",
}


run = functools.partial(run_training, gpt2_training.main, TINY)


def test_an_interrupted_run_resumes_to_the_same_weights(tiny_corpus, tmp_path):
    straight = run(tiny_corpus, tmp_path / "straight")
    interrupted = run(tiny_corpus, tmp_path / "interrupted", "--stop-after", "3")
    assert not interrupted.exists()  # stopped: nothing exported yet, the state is saved
    assert (tmp_path / "interrupted" / "work" / training_runs.STATE).is_file()
    resumed = run(tiny_corpus, tmp_path / "interrupted")
    first = load_file(straight / "model.safetensors")
    second = load_file(resumed / "model.safetensors")
    assert first.keys() == second.keys()
    assert all(torch.equal(first[name], second[name]) for name in first)
    metrics = [json.loads((out / "metrics.json").read_text()) for out in (straight, resumed)]
    assert without_timing(metrics[0]) == without_timing(metrics[1])
    assert len(metrics[0]["train_loss"]) == 6
    assert [e["step"] for e in metrics[0]["held_out"]] == [0, 3, 6]
    assert metrics[0]["train_loss"][-1] < metrics[0]["train_loss"][0]


def test_the_output_is_a_checkpoint_transformers_loads(tiny_corpus, tmp_path):
    out = run(tiny_corpus, tmp_path)
    names = {p.name for p in out.iterdir()}
    assert names == set(GPT2_SHAKESPEARE.sha256)
    model = GPT2LMHeadModel.from_pretrained(out)
    tokenizer = AutoTokenizer.from_pretrained(out)
    assert model.lm_head.weight is model.transformer.wte.weight
    assert len(tokenizer) == model.config.vocab_size == 300
    assert model.generation_config.eos_token_id == tokenizer.eos_token_id == 0


def test_warning_on_a_cpu_without_bfloat16_arithmetic_keep_bfloat16_out_of_training(
    tiny_corpus, tmp_path
):
    """docs/gpt2/training.md, warning "On a CPU without bfloat16 arithmetic, keep bfloat16
    out of training": float32 is the default, and the two options the box names run and are
    recorded in the checkpoint. (The speeds it is about are measured, not asserted: a timing
    depends on the machine.)"""
    assert gpt2_training.Settings().autocast == gpt2_training.Settings().muon_dtype == "float32"
    out = run(tiny_corpus, tmp_path, "--autocast", "bfloat16", "--muon-dtype", "bfloat16")
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["settings"]["autocast"] == metrics["settings"]["muon_dtype"] == "bfloat16"
    assert metrics["train_loss"][-1] < metrics["train_loss"][0]


def test_other_settings_refuse_to_resume_a_state(tiny_corpus, tmp_path):
    run(tiny_corpus, tmp_path, "--stop-after", "2")
    with pytest.raises(ValueError, match="other settings"):
        run(tiny_corpus, tmp_path, "--adamw-lr", "0.01")


def test_the_held_out_play_is_never_trained_on(tiny_corpus):
    training, held_out = training_runs.read_corpus(gpt2_training.Settings(corpus=str(tiny_corpus)))
    assert len(training) == 3 and held_out not in training
    real, _ = training_runs.read_corpus(gpt2_training.Settings())
    assert len(real) == 41
    assert not any("PROSPERO" in text for text in real)  # The Tempest's duke is in no other play


def test_muon_in_bfloat16_steps_each_conv1d_matrix_as_torch_muon_steps_its_transpose(prove):
    """Conv1D stores (in, out); torch.optim.Muon reads (out, in). Iterating in bfloat16, as
    torch's does, the book's Muon moves each block matrix, over two steps (the momentum
    included), exactly as torch's moves its transpose. torch orthogonalises a matrix on its
    wide side, so a matrix and its transpose take the same operations, unless it is square:
    then a transpose changes the rounding but not the scale, and it is compared as stored."""
    settings = gpt2_training.Settings()
    torch.manual_seed(0)
    model = GPT2LMHeadModel(
        gpt2_training.GPT2Config(vocab_size=64, n_positions=16, n_embd=32, n_layer=1, n_head=2)
    )
    muon, _ = gpt2_training.make_optimizers(model, settings)
    ours = gpt2_training.Muon(
        muon.param_groups[0]["params"], settings.muon_lr, dtype=torch.bfloat16
    )
    theirs = {}  # our matrix: (torch's matrix, as_stored)
    for p in ours.param_groups[0]["params"]:
        square = p.shape[0] == p.shape[1]
        theirs[p] = (
            torch.nn.Parameter(p.detach().clone() if square else p.detach().T.clone()),
            square,
        )
    reference = torch.optim.Muon(
        [q for q, _ in theirs.values()], lr=settings.muon_lr, weight_decay=0.0
    )
    stepped, references = [], []  # every matrix after each step
    for step in range(2):
        model.zero_grad()
        inputs = torch.randint(64, (2, 16), generator=torch.Generator().manual_seed(step))
        model(inputs, labels=inputs).loss.backward()
        for p, (q, square) in theirs.items():
            q.grad = p.grad.clone() if square else p.grad.T.clone()
        ours.step()
        reference.step()
        for p, (q, square) in theirs.items():
            assert p.dtype == q.dtype
            stepped.append(p.detach().flatten())
            references.append((q.detach() if square else q.detach().T).flatten())
    prove(
        "Muon by hand, in bfloat16, on Conv1D's (in, out) matrices",
        "`torch.optim.Muon` on their transposes",
        "2 steps on random batches, GPT-2 of width 32 and 1 layer (random init)",
        torch.cat(stepped),
        torch.cat(references),
        0,
    )
    shapes = {tuple(p.shape) for p in theirs}
    assert shapes == {(32, 96), (32, 32), (32, 128), (128, 32)}  # c_attn, c_proj, c_fc, mlp.c_proj


def test_muon_in_float32_differs_from_bfloat16_by_rounding_only():
    """The shipped run iterates in float32 (a CPU without bfloat16 arithmetic emulates it,
    slowly). The two orthogonalised updates differ by less than one bfloat16 rounding
    (2 ** -8, relative) per iteration, five in all; measured: 1.1-1.2 %."""
    torch.manual_seed(0)
    for shape in [(256, 768), (256, 256), (1024, 256)]:
        update = torch.randn(shape)
        exact = gpt2_training.orthogonalize(update, torch.float32)
        rounded = gpt2_training.orthogonalize(update, torch.bfloat16).float()
        assert 0 < (exact - rounded).norm() < 5 * 2**-8 * exact.norm()


def test_the_shipped_checkpoint_was_trained_by_this_script():
    metrics = json.loads((GPT2_SHAKESPEARE.snapshot_dir() / "metrics.json").read_text())
    assert metrics["settings"] == {
        field.name: field.default for field in dataclasses.fields(gpt2_training.Settings)
    }
    assert len(metrics["train_loss"]) == gpt2_training.Settings().steps
    assert metrics["held_out"][-1]["nats_per_char"] <= 1.5


def test_labels_are_shifted_inside_the_model(prove):
    """docs/gpt2/training.md, warning "Pass `labels=input_ids`: the model shifts them":
    passing labels=input_ids is right: the model predicts token t + 1 from tokens up to t."""
    model = GPT2LMHeadModel.from_pretrained(GPT2_SHAKESPEARE.repo_id)
    tokenizer = AutoTokenizer.from_pretrained(GPT2_SHAKESPEARE.repo_id)
    line = "We are such stuff as dreams are made on, and our little life is rounded with a sleep."
    ids = tokenizer(line, return_tensors="pt")["input_ids"]  # (1, T)
    with torch.no_grad():
        logits = model(ids).logits  # (1, T, V)
        by_hand = torch.nn.functional.cross_entropy(logits[0, :-1], ids[0, 1:])
        prove(
            "loss by hand: cross-entropy of each position's logits against the next token",
            "`GPT2LMHeadModel` with `labels=input_ids`",
            "one line of The Tempest, book's GPT-2",
            by_hand,
            model(ids, labels=ids).loss,
            1e-5,
        )
        shifted_twice = model(ids[:, :-1], labels=ids[:, 1:]).loss
    assert shifted_twice > by_hand + 1.0  # predicting two tokens ahead is much harder
