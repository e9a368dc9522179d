"""snippets/exercises.py: the checker fails a wrong dtype, an answer that changes its
arguments and a tuple that differs past its first item, each with a hint that says so;
compares masked scores, NaN, complex numbers and floats as a reader expects; and never
raises, whatever the reader's function or the reference does."""

import torch

from snippets.exercises import check


def causal(T):  # the reference: True where a query may read a key
    return torch.ones(T, T).tril().bool()


def test_a_mask_of_ones_and_zeros_fails_where_a_bool_mask_is_asked_for(capsys):
    assert not check(lambda T: torch.ones(T, T).tril().long(), causal, [(3,)], against="tril")
    verdict = capsys.readouterr().out
    assert verdict.startswith("✗") and "Expected dtype torch.bool; got torch.int64" in verdict


def test_an_answer_that_changes_its_argument_fails_with_the_mutation_hint(capsys):
    def scaled(x):  # right values, but x is scaled in place
        return x.mul_(2)

    x = torch.arange(4.0)
    assert not check(scaled, lambda x: 2 * x, [(x,)], against="2 * x")
    verdict = capsys.readouterr().out
    assert "✗ scaled changed its argument 1 on input 1 of 1" in verdict and "a copy" in verdict
    assert torch.equal(x, torch.arange(4.0))  # the caller's tensor, as it was


def test_each_side_gets_its_own_copy(capsys):
    seen = []

    def reference(x):
        seen.append(x)
        return 2 * x

    x = torch.arange(4.0)
    assert check(lambda x: x + x, reference, [(x,)], against="2 * x")
    assert seen[0] is not x and capsys.readouterr().out.startswith("✓")


def test_a_tuple_verdict_names_the_first_item_that_differs(capsys):
    def both(x):
        return x.max(dim=-1)

    x = torch.tensor([[1.0, 3.0, 2.0]])
    assert not check(
        lambda x: (x.max(dim=-1).values, x.argmax(dim=-1) + 1), both, [(x,)], against="max"
    )
    assert "Item 1 of the max: The largest difference is 1" in capsys.readouterr().out


def test_check_never_raises(capsys):
    class Odd:
        def __eq__(self, other):
            raise ValueError("no comparison")

    def broken_reference(x):
        raise RuntimeError("the reference broke")

    assert not check(lambda x: x, broken_reference, [(torch.ones(2),)], against="it")
    assert "✗ the check stopped on input 1 of 1, after <lambda> ran: RuntimeError" in (
        capsys.readouterr().out
    )
    assert not check(lambda x: Odd(), lambda x: 1, [(0,)], against="one")
    assert "✗ the check stopped" in capsys.readouterr().out
    assert not check(lambda x: 1 / 0, lambda x: x, [(0,)], against="it")
    assert "raised ZeroDivisionError" in capsys.readouterr().out


def test_an_argument_autograd_made_is_copied_and_its_change_named(capsys):
    """deepcopy refuses a tensor an autograd computation made, as a page's model outputs
    are: the checker clones it off the graph, so the change is still seen."""

    def shifted(x):  # right values, but x is changed in place
        with torch.no_grad():
            x.add_(1)
        return 2 * x - 2

    x = torch.arange(4.0, requires_grad=True) * 1.0  # not a leaf: deepcopy raises
    assert not check(shifted, lambda x: 2 * x, [(x,)], against="2 * x")
    assert "✗ shifted changed its argument 1" in capsys.readouterr().out
    assert torch.equal(x.detach(), torch.arange(4.0))  # the caller's tensor, as it was


def test_masked_scores_and_nan_compare_where_they_are_equal(capsys):
    scores = torch.tensor([[0.5, -torch.inf], [torch.nan, 1.0]])
    assert check(lambda x: x.clone(), lambda x: x.clone(), [(scores,)], against="itself")
    shifted = scores + torch.tensor([[0.25, 0.0], [0.0, 0.0]])  # -inf stays -inf
    assert not check(lambda x: shifted, lambda x: x.clone(), [(scores,)], against="itself")
    assert "The largest difference is 0.25;" in capsys.readouterr().out  # not nan
    assert not check(lambda x: x.nan_to_num(), lambda x: x.clone(), [(scores,)], against="it")
    assert "The largest difference is inf;" in capsys.readouterr().out


def test_complex_results_compare_their_imaginary_parts_too(capsys):
    z = torch.tensor([1 + 1j, 2 - 1j])
    assert not check(torch.conj_physical, lambda z: z.clone(), [(z,)], against="z")
    assert "The largest difference is 2;" in capsys.readouterr().out


def test_a_float_result_compares_within_the_tolerance(capsys):
    assert check(lambda x: 0.1 + 0.2, lambda x: 0.3, [(0,)], against="0.3")
    assert not check(lambda x: 0.3 + 1e-3, lambda x: 0.3, [(0,)], against="0.3")
    capsys.readouterr()


def test_a_verdict_says_how_long_a_tuple_was_and_what_a_scalar_tensor_holds(capsys):
    assert not check(lambda x: (x, x, x), lambda x: (x, x), [(1,)], against="a pair")
    assert "Expected a tuple of 2; got 3 items." in capsys.readouterr().out
    assert not check(lambda x: x.sum(), lambda x: x.mean(), [(torch.ones(2),)], against="mean")
    assert "on input 1 of 1: (2,)" in capsys.readouterr().out
    assert not check(lambda x: x, lambda x: 2 * x, [(torch.tensor(2.5),)], against="2 * x")
    assert "on input 1 of 1: tensor(2.5)" in capsys.readouterr().out
