"""docs/transformer/training.md's task, loop and decoding (snippets/digit_reversal.py),
run short: the batches are what the page says, no held-out sequence is ever trained on,
the loop is reproducible bit for bit and its loss falls, and greedy decoding agrees with
the model's full forward pass. The page itself runs the full training (and asserts
≥ 99 % held-out exact match) in tests/test_docs.py."""

import pytest
import torch

from snippets.digit_reversal import (
    BOS,
    EOS,
    MAX_DIGITS,
    MIN_DIGITS,
    PAD,
    TOY_CONFIG,
    exact_match,
    greedy_decode,
    reversal_batch,
    sequence_ids,
    train,
)
from snippets.transformer import Transformer


@pytest.fixture(autouse=True)
def one_thread():
    """The toy model's matrices are tiny: one thread is as fast, and immune to a busy CPU."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_reversal_batch_is_bos_reversed_digits_eos_then_padding():
    source, target = reversal_batch(500, torch.Generator().manual_seed(0))
    assert source.shape == (500, MAX_DIGITS) and target.shape == (500, MAX_DIGITS + 2)
    for src, tgt in zip(source.tolist(), target.tolist(), strict=True):
        digits = [token for token in src if token != PAD]
        assert MIN_DIGITS <= len(digits) <= MAX_DIGITS
        assert all(3 <= token <= 12 for token in digits)
        assert src == digits + [PAD] * (MAX_DIGITS - len(digits))  # padding only at the end
        expected = [BOS, *digits[::-1], EOS]
        assert tgt == expected + [PAD] * (MAX_DIGITS + 2 - len(expected))


def test_sequence_ids_tell_sequences_apart():
    source, _ = reversal_batch(4000, torch.Generator().manual_seed(1))
    ids = sequence_ids(source)
    same_id = ids[:, None] == ids[None, :]
    same_row = (source[:, None, :] == source[None, :, :]).all(dim=-1)
    assert torch.equal(same_id, same_row)


def test_training_never_sees_a_held_out_sequence(monkeypatch):
    from snippets import digit_reversal

    held_source, held_target = reversal_batch(300, torch.Generator().manual_seed(2))
    original = digit_reversal.reversal_batch

    def half_held_out(n, generator):  # before filtering, half of every batch is held out
        source, target = original(n, generator)
        source[: n // 2], target[: n // 2] = held_source[: n // 2], held_target[: n // 2]
        return source, target

    torch.manual_seed(0)
    model = Transformer(TOY_CONFIG)
    forward, seen = model.forward, []

    def recording_forward(src, tgt):
        seen.append(src)
        return forward(src, tgt)

    monkeypatch.setattr(digit_reversal, "reversal_batch", half_held_out)
    monkeypatch.setattr(model, "forward", recording_forward)
    train(model, steps=3, held_out=held_source, batch_size=64)
    trained_on = torch.cat(seen)
    assert 0 < len(trained_on) <= 3 * 32
    assert not torch.isin(sequence_ids(trained_on), sequence_ids(held_source)).any()


def test_training_is_reproducible_and_the_loss_falls():
    """The loop trains, and from a seed, exactly: two runs give the same losses, bit for bit."""
    held_out, _ = reversal_batch(100, torch.Generator().manual_seed(3))
    runs = []
    for _ in range(2):
        torch.manual_seed(0)
        model = Transformer(TOY_CONFIG)
        runs.append(train(model, steps=40, held_out=held_out, batch_size=32))
    assert runs[0] == runs[1]  # bit for bit
    first, last = runs[0][0], sum(runs[0][-5:]) / 5
    assert first > 2.0 and last < 0.75 * first


def test_greedy_decoding_agrees_with_the_full_forward_pass():
    torch.manual_seed(4)
    model = Transformer(TOY_CONFIG).eval()
    source, target = reversal_batch(16, torch.Generator().manual_seed(5))
    out = greedy_decode(model, source, max_new_tokens=MAX_DIGITS + 1)
    assert (out[:, 0] == BOS).all()
    with torch.no_grad():
        logits = model(source, out[:, :-1])  # teacher forcing on its own output
    predicted = logits.argmax(dim=-1)
    for row, generated in zip(predicted, out[:, 1:], strict=True):
        ended = (generated == EOS).nonzero()
        stop = ended[0, 0].item() + 1 if len(ended) else len(generated)
        assert torch.equal(row[:stop], generated[:stop])
        assert (generated[stop:] == PAD).all()  # nothing after EOS
    assert 0.0 <= exact_match(model, source, target) <= 1.0


def test_warning_build_the_target_mask_from_the_decoders_input():
    """docs/transformer/training.md, warning "Build the target mask from the decoder's input,
    not from the target": a mask built from the whole target (T + 1 tokens) fails against
    the decoder's T; one built from the decoder's input gives the model's own logits."""
    from snippets.transformer import causal_mask, padding_mask

    torch.manual_seed(0)
    model = Transformer(TOY_CONFIG).eval()
    source, target = reversal_batch(4, torch.Generator().manual_seed(9))
    decoder_input = target[:, :-1]  # (B, T)
    src_allowed = padding_mask(source, PAD)
    memory = model.encode(source, src_allowed)
    too_long = padding_mask(target, PAD) & causal_mask(target.size(1))
    with pytest.raises(RuntimeError, match="must match the size"):
        model.decode(decoder_input, memory, too_long, src_allowed)
    right = padding_mask(decoder_input, PAD) & causal_mask(decoder_input.size(1))
    logits = model.decode(decoder_input, memory, right, src_allowed)
    assert torch.equal(logits, model(source, decoder_input))
