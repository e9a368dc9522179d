"""Training the from-scratch Transformer on a toy task: reversing sequences of digits.

docs/transformer/training.md includes these sections after the model's; the loss
curve on that page is drawn by snippets/figures/transformer_training.py from the same
`train_reversal`, and tests/test_transformer_training.py runs it short.
"""

import torch
import torch.nn.functional as F

from snippets.transformer import Transformer, TransformerConfig, causal_mask, padding_mask

# --8<-- [start:task]
PAD, BOS, EOS = 0, 1, 2  # special tokens; the digits 0 to 9 are the token ids 3 to 12
MIN_DIGITS, MAX_DIGITS = 3, 8


def reversal_batch(n, generator):
    """n random digit sequences and their reversals.

    source: (n, MAX_DIGITS), the digits then padding.
    target: (n, MAX_DIGITS + 2), BOS, the digits reversed, EOS, then padding.
    """
    lengths = torch.randint(MIN_DIGITS, MAX_DIGITS + 1, (n, 1), generator=generator)  # (n, 1)
    position = torch.arange(MAX_DIGITS)  # (S,)
    is_digit = position < lengths  # (n, S)
    digits = torch.randint(10, (n, MAX_DIGITS), generator=generator) + 3  # token ids 3..12
    source = digits.masked_fill(~is_digit, PAD)  # (n, S)
    mirrored = (lengths - 1 - position).clamp(min=0)  # (n, S): position t reads length - 1 - t
    reversed_digits = source.gather(1, mirrored).masked_fill(~is_digit, PAD)  # (n, S)
    target = F.pad(reversed_digits, (1, 1), value=PAD)  # (n, S + 2)
    target[:, 0] = BOS
    target.scatter_(1, lengths + 1, EOS)  # right after the last digit
    return source, target


def sequence_ids(source):
    """One integer per sequence (its tokens as the digits of a base-13 number), to compare sets."""
    return (source * 13 ** torch.arange(source.size(1))).sum(dim=1)  # (n,)


# --8<-- [end:task]


# --8<-- [start:train]
def train(model, steps, held_out, batch_size=128, warmup=200, label_smoothing=0.1, seed=0):
    """Adam, the paper's learning-rate schedule and label smoothing; returns every step's loss.

    Training batches are drawn at random, and any sequence of `held_out` is dropped
    from them: the model is never trained on a sequence it is evaluated on.
    """
    generator = torch.Generator().manual_seed(seed)
    excluded = sequence_ids(held_out)
    # lr=1.0 is a placeholder: the schedule below multiplies it by the paper's formula
    optimizer = torch.optim.Adam(model.parameters(), lr=1.0, betas=(0.9, 0.98), eps=1e-9)
    d_model = model.config.d_model

    def learning_rate(step):  # rises for `warmup` steps, then decays as 1 / √step
        step += 1  # the paper counts steps from 1
        return d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)

    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, learning_rate)
    model.train()
    losses = []
    for _ in range(steps):
        source, target = reversal_batch(batch_size, generator)
        unseen = ~torch.isin(sequence_ids(source), excluded)
        source, target = source[unseen], target[unseen]
        decoder_input, labels = target[:, :-1], target[:, 1:]  # (B, T) each: shifted by one
        logits = model(source, decoder_input)  # (B, T, V)
        loss = F.cross_entropy(
            logits.flatten(0, 1),
            labels.flatten(),
            ignore_index=PAD,
            label_smoothing=label_smoothing,
        )
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        schedule.step()
        losses.append(loss.item())
    return losses


# --8<-- [end:train]


# --8<-- [start:greedy]
@torch.no_grad()
def greedy_decode(model, source, max_new_tokens):
    """Generate the target one token at a time, always taking the most likely token."""
    model.eval()
    src_allowed = padding_mask(source, PAD)  # (B, 1, 1, S)
    memory = model.encode(source, src_allowed)  # (B, S, C): once per source
    out = torch.full((source.size(0), 1), BOS)  # (B, 1): every target starts with BOS
    finished = torch.zeros(source.size(0), dtype=torch.bool)  # (B,)
    for _ in range(max_new_tokens):
        logits = model.decode(out, memory, causal_mask(out.size(1)), src_allowed)  # (B, t, V)
        next_token = logits[:, -1].argmax(dim=-1).masked_fill(finished, PAD)  # (B,)
        out = torch.cat([out, next_token[:, None]], dim=1)  # (B, t + 1)
        finished |= next_token == EOS
        if finished.all():
            break
    return out


def exact_match(model, source, target):
    """The fraction of sequences whose greedy output is the target, token for token."""
    out = greedy_decode(model, source, max_new_tokens=target.size(1) - 1)
    out = F.pad(out, (0, target.size(1) - out.size(1)), value=PAD)  # (B, T) like the target
    return (out == target).all(dim=1).float().mean().item()


# --8<-- [end:greedy]


# --8<-- [start:run]
TOY_CONFIG = TransformerConfig(
    vocab_size=13,  # PAD, BOS, EOS and the ten digits
    d_model=64,  # an eighth of the paper's width
    num_heads=4,  # heads of D = 16
    num_encoder_layers=2,
    num_decoder_layers=2,
    d_ff=256,  # 4 × d_model, as in the paper
    dropout=0.0,  # endless fresh data: nothing to regularise
    norm_first=True,  # pre-norm: trains stably at this learning rate, where post-norm spikes
    max_len=MAX_DIGITS + 2,  # the longest target: BOS, 8 digits, EOS
)
STEPS = 800  # of 128 sequences each


def train_reversal(steps=STEPS, seed=0):
    """The chapter's run: a seeded model, trained; returns it, its losses and the held-out set."""
    held_out = reversal_batch(1000, torch.Generator().manual_seed(seed + 1))  # source, target
    torch.manual_seed(seed)
    model = Transformer(TOY_CONFIG)
    losses = train(model, steps, held_out=held_out[0], seed=seed)
    return model, losses, held_out


# --8<-- [end:run]
