"""The checker every chapter's exercises call.

Each chapter's "Exercises" section includes the section below, folded, so a reader has
it in the page, the notebook and Colab alike. Each exercise's folded block "How this
check works" makes its check with `checker(...)`; the reader calls it with one line.
tools/exercises.py reads the exercises of a page; tests/test_docs.py proves, for each,
that its solution passes its check and that its starter and its classic mistakes fail
it, each mistake with its own hint.
"""

# --8<-- [start:check]
import copy
import functools

import torch


def same(got, want, atol):
    """Equal within `atol`: tensors of one shape and one dtype, tuples and lists item by
    item, floats within `atol`, anything else with ==."""
    if isinstance(want, torch.Tensor):
        return (
            isinstance(got, torch.Tensor)
            and got.shape == want.shape
            and got.dtype == want.dtype
            and bool(gap(got, want).le(atol).all())
        )
    if isinstance(want, (tuple, list)):
        return (
            isinstance(got, (tuple, list))
            and len(got) == len(want)
            and all(same(g, w, atol) for g, w in zip(got, want, strict=True))
        )
    if isinstance(want, float) and isinstance(got, (int, float)):
        return got == want or abs(got - want) <= atol
    return not isinstance(got, torch.Tensor) and bool(got == want)


def gap(got, want):
    """|got - want| item by item, complex included; 0 where both are equal, as infinities
    in masked scores, or both NaN."""
    wide = torch.complex128 if want.is_complex() or got.is_complex() else torch.float64
    apart = (got.to(wide) - want.to(wide)).abs()
    return apart.nan_to_num(nan=torch.inf).masked_fill(
        (got == want) | got.isnan() & want.isnan(), 0
    )


def unchanged(after, before):
    """Whether an argument is as it was: its values, a module's weights and buffers."""
    if isinstance(before, torch.nn.Module):
        before = [*before.state_dict().values()]
        after = [*after.state_dict().values()] if isinstance(after, torch.nn.Module) else None
    if isinstance(before, torch.Tensor):  # NaN where it was NaN counts as unchanged
        return (
            isinstance(after, torch.Tensor)
            and after.shape == before.shape
            and after.dtype == before.dtype
            and bool(((after == before) | (after != after) & (before != before)).all())
        )
    if isinstance(before, (tuple, list)):
        return (
            isinstance(after, (tuple, list))
            and len(after) == len(before)
            and all(unchanged(a, b) for a, b in zip(after, before, strict=True))
        )
    if isinstance(before, dict):
        return (
            isinstance(after, dict)
            and after.keys() == before.keys()
            and all(unchanged(after[key], before[key]) for key in before)
        )
    return True  # nothing else is compared


def copied(args):
    """Each argument deep-copied; where deepcopy refuses, as for a tensor an autograd
    computation made, its tensors cloned off the graph; anything else, itself."""
    result = []
    for arg in args:
        try:
            result.append(copy.deepcopy(arg))
        except Exception:
            result.append(cloned(arg))
    return result


def cloned(arg):
    if isinstance(arg, torch.Tensor):
        return arg.detach().clone().requires_grad_(arg.requires_grad)
    if isinstance(arg, (tuple, list)):
        return type(arg)(cloned(a) for a in arg)
    return arg


def shown(value):
    """A short description of an argument or a result, for a verdict."""
    if isinstance(value, torch.Tensor):  # its shape, and its dtype unless float32
        dtype = "" if value.dtype == torch.float32 else f" {value.dtype}".replace("torch.", "")
        return (
            f"{tuple(value.shape)}{dtype}" if value.dim() else f"tensor({value.item():.4g}){dtype}"
        )
    if isinstance(value, torch.nn.Module):
        return type(value).__name__
    if isinstance(value, (tuple, list)) and len(value) > 3:
        return f"{type(value).__name__} of {len(value)}"
    text = " ".join(repr(value).split())  # on one line
    return text if len(text) < 60 else text[:56] + " ..."


def said(error):
    """An exception, on one short line."""
    text = " ".join(f"{type(error).__name__}: {error}".split())
    return text if len(text) < 100 else text[:96] + " ..."


def difference(got, want, atol):
    """Where `got` first differs from `want`, in words."""
    pairs = isinstance(want, (tuple, list)) and isinstance(got, (tuple, list))
    if pairs and len(got) != len(want):
        return f"Expected a {type(want).__name__} of {len(want)}; got {len(got)} items."
    if pairs:  # the first item that differs
        n = next(n for n, (g, w) in enumerate(zip(got, want, strict=True)) if not same(g, w, atol))
        return f"Item {n} of the {type(want).__name__}: {difference(got[n], want[n], atol)}"
    tensors = isinstance(got, torch.Tensor) and isinstance(want, torch.Tensor)
    if tensors and got.shape == want.shape and got.dtype == want.dtype:
        largest = gap(got, want).max().item()  # inf where one is NaN or infinite alone
        return f"The largest difference is {largest:.3g}; the check allows {atol}."
    if tensors and got.shape == want.shape:
        return f"Expected dtype {want.dtype}; got {got.dtype}, with the right shape."
    return f"Expected {shown(want)}; got {shown(got)}."


def recognised(mistake, args, got, atol):
    """Whether `got` is what `mistake` gives on `args` (a mistake that cannot run on them
    is not the reader's)."""
    try:
        return same(got, mistake(*copied(args)), atol)
    except Exception:
        return False


def check(yours, reference, inputs, against, mistakes=None, atol=1e-5):
    """Call `yours` and `reference`, each on its own copy of each `args` in `inputs`, and
    compare.

    Prints ✓ and what was compared (`against` names the reference), or ✗, the first
    input where they differ and a hint: the classic mistake whose function, in `mistakes`
    ({hint: function}), gives what yours gave. Never raises, so that a notebook's
    "Run all" gets to the end.
    """
    name = getattr(yours, "__name__", "your function")
    for number, args in enumerate(inputs, 1):
        try:
            mine = copied(args)
            try:
                got = yours(*mine)
            except NotImplementedError:
                print(f"✗ {name} is not written yet: it raises NotImplementedError")
                return False
            except Exception as error:  # a reader's bug: reported, not raised
                print(f"✗ {name}({', '.join(map(shown, args))}) raised {said(error)}")
                return False
            where = f"on input {number} of {len(inputs)}: {', '.join(map(shown, args))}"
            changed = [n for n, arg in enumerate(args, 1) if not unchanged(mine[n - 1], arg)]
            if changed:
                print(f"✗ {name} changed its argument {', '.join(map(str, changed))} {where}")
                print(
                    "  Compute on a copy (x = x.clone(), or out-of-place operations): "
                    "the caller's tensors must stay as they were."
                )
                return False
            want = reference(*copied(args))
            if same(got, want, atol):
                continue
            print(f"✗ {name} differs from {against} {where}")
            for hint, mistake in (mistakes or {}).items():
                if recognised(mistake, args, got, atol):
                    print(f"  You computed {hint}.")
                    break
            else:
                print(f"  {difference(got, want, atol)}")
        except Exception as error:  # the reference or the comparison: reported, not raised
            print(
                f"✗ the check stopped on input {number} of {len(inputs)}, after {name} "
                f"ran: {said(error)}"
            )
        return False
    print(f"✓ {name} equals {against} on {len(inputs)} input{'s' * (len(inputs) != 1)}")
    return True


def checker(reference, inputs, against, mistakes=None, atol=1e-5):
    """One exercise's check, ready for your function: `checker(...)(yours)` is
    `check(yours, reference, inputs, ...)`, on the inputs as they are now."""
    keywords = dict(against=against, mistakes=mistakes, atol=atol)
    return functools.partial(check, reference=reference, inputs=list(inputs), **keywords)


# --8<-- [end:check]
