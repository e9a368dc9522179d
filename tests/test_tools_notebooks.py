"""tools/notebooks.py: a notebook's set-up cell installs exactly what its code needs, pinned,
and does nothing in the book's environment."""

import importlib.metadata
import subprocess

from tools.notebooks import requirements, setup_cell


def pinned(*names):
    return {name: importlib.metadata.version(name) for name in names}


def test_each_imported_distribution_is_pinned_and_nothing_else():
    code = [
        "import json\nimport torch\nimport torch.nn.functional as F\n",
        "from transformers import AutoModel\nimport matplotlib.pyplot as plt\nimport yaml\n",
        "try:\n    from snippets.hub import MINILM\nexcept ImportError:\n    pass\n",
    ]
    # the standard library, torch and the book's own packages are not installed by the cell;
    # a module is pinned under its distribution's name (yaml comes from PyYAML)
    assert requirements(code) == pinned("PyYAML", "matplotlib", "transformers")


def test_what_the_code_needs_without_importing_it():
    assert requirements(["print(torch.ones(2).numpy())"]) == pinned("numpy")
    loads = 'AutoModel.from_pretrained("a/b", gguf_file="m.Q4_1.gguf")'
    assert requirements([loads]) == pinned("accelerate", "gguf")
    assert requirements(['options = {"gguf_file": name}']) == pinned("accelerate", "gguf")


def test_the_set_up_cell_does_nothing_in_the_books_environment(monkeypatch):
    def no_install(*args, **kwargs):
        raise AssertionError(f"the set-up cell ran {args}")

    monkeypatch.setattr(subprocess, "run", no_install)
    namespace = {}
    exec(setup_cell(["import transformers\nimport matplotlib\n"]), namespace)
    assert namespace["missing"] == []
    assert namespace["tested"] == pinned("matplotlib", "transformers")


def test_a_notebook_that_needs_only_torch_says_so():
    assert setup_cell(["import math\nimport torch\n"]).startswith("# Set-up: nothing to install")
