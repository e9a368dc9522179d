"""Parity tests for docs/gpt2/looking-inside.md: its hand-written code against the library."""

import pytest


def test_looking_inside_matches_the_reference_on_inputs_the_page_does_not_show():
    pytest.fail(
        "not written yet: check docs/gpt2/looking-inside.md against its reference on inputs the page "
        "does not show (padding, sentence pairs, long sequences, full-size configs)"
    )
