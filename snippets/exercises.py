"""The checker every chapter's exercises call.

Each chapter's "Exercises" section includes the section below, so a reader has it in
the page, the notebook and Colab alike. tools/exercises.py reads the exercises of a
page; tests/test_docs.py proves, for each, that its solution passes its check and that
its starter and its classic mistakes fail it, each mistake with its own hint.
"""

# --8<-- [start:check]
import torch


def same(got, want, atol):
    """Equal within `atol` for tensors (of one shape and dtype kind), item by item for
    tuples and lists, else with ==."""
    if isinstance(want, torch.Tensor):
        return (
            isinstance(got, torch.Tensor)
            and got.shape == want.shape
            and got.is_floating_point() == want.is_floating_point()
            # equal infinities count as equal, as in masked scores
            and bool(((got.double() - want.double()).abs().le(atol) | (got == want)).all())
        )
    if isinstance(want, (tuple, list)):
        return (
            isinstance(got, (tuple, list))
            and len(got) == len(want)
            and all(same(g, w, atol) for g, w in zip(got, want, strict=True))
        )
    return not isinstance(got, torch.Tensor) and got == want


def shown(value):
    """A short description of an argument or a result, for a verdict."""
    if isinstance(value, torch.Tensor):  # its shape, and its dtype unless float32
        dtype = "" if value.dtype == torch.float32 else f" {value.dtype}".replace("torch.", "")
        return f"{tuple(value.shape)}{dtype}"
    if isinstance(value, torch.nn.Module):
        return type(value).__name__
    if isinstance(value, (tuple, list)) and len(value) > 3:
        return f"{type(value).__name__} of {len(value)}"
    text = " ".join(repr(value).split())  # on one line
    return text if len(text) < 60 else text[:56] + " ..."


def recognised(mistake, args, got, atol):
    """Whether `got` is what `mistake` gives on `args` (a mistake that cannot run on them
    is not the reader's)."""
    try:
        return same(got, mistake(*args), atol)
    except Exception:
        return False


def check(yours, reference, inputs, against, mistakes=None, atol=1e-5):
    """Call `yours(*args)` and `reference(*args)` for each `args` in `inputs` and compare.

    Prints ✓ and what was compared (`against` names the reference), or ✗, the first
    input where they differ and a hint: the classic mistake whose function, in `mistakes`
    ({hint: function}), gives what yours gave. Never raises, so that a notebook's
    "Run all" gets to the end.
    """
    name = getattr(yours, "__name__", "your function")
    for number, args in enumerate(inputs, 1):
        try:
            got = yours(*args)
        except NotImplementedError:
            print(f"✗ {name} is not written yet: it raises NotImplementedError")
            return False
        except Exception as error:  # a reader's bug: reported, not raised
            print(f"✗ {name}({', '.join(map(shown, args))}) raised {type(error).__name__}: {error}")
            return False
        want = reference(*args)
        if same(got, want, atol):
            continue
        print(f"✗ {name} differs from {against} on input {number} of {len(inputs)}: "
              f"{', '.join(map(shown, args))}")  # fmt: skip
        for hint, mistake in (mistakes or {}).items():
            if recognised(mistake, args, got, atol):
                print(f"  You computed {hint}.")
                break
        else:
            tensors = isinstance(got, torch.Tensor) and isinstance(want, torch.Tensor)
            if tensors and got.shape == want.shape:
                gap = (got.double() - want.double()).abs().max().item()
                print(f"  The largest difference is {gap:.3g}; the check allows {atol}.")
            else:
                print(f"  Expected {shown(want)}; got {shown(got)}.")
        return False
    print(f"✓ {name} equals {against} on {len(inputs)} inputs")
    return True


# --8<-- [end:check]
