"""Labs: notebooks to play with, written as jupytext "percent" scripts (docs/labs/*.py).

The site build executes each lab whose source changed into docs/labs/<name>.ipynb,
with its set-up cell first (a cell that raises fails the build); mkdocs-jupyter
renders that notebook as the lab's page (mkdocs.yml).
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

import nbformat

from snippets import hub
from snippets.book import read_json, write_json
from tools import notebooks
from tools.execute import KERNEL_OPTIONS
from tools.notebooks import setup_cell
from tools.pages import LABS, mkdocs_config

FINGERPRINTS = ".fingerprints.json"  # a dotfile: MkDocs does not publish it


def build_labs(labs: Path = LABS, force: bool = False) -> list[str]:
    """Execute the labs whose source changed; return the names of those executed."""
    import jupytext
    from nbclient import NotebookClient

    site_url = mkdocs_config().site_url
    manifest_path = labs / FINGERPRINTS
    manifest = read_json(manifest_path)
    executed = []
    for source in sorted(labs.glob("*.py")):
        digest = hashlib.sha256(source.read_bytes())
        digest.update(Path(hub.__file__).read_bytes())  # the weights a lab loads
        digest.update(Path(notebooks.__file__).read_bytes())  # its set-up cell
        digest.update(Path(__file__).read_bytes())  # how it is executed
        digest.update(site_url.encode())  # where its links point
        target = source.with_suffix(".ipynb")
        if not force and target.exists() and manifest.get(source.name) == digest.hexdigest():
            continue
        notebook = jupytext.read(source)
        for cell in notebook.cells:
            if cell.cell_type == "markdown":
                cell.source = notebooks.absolute_links(cell.source, source, site_url)
        code = [cell.source for cell in notebook.cells if cell.cell_type == "code"]
        notebook.cells.insert(1, nbformat.v4.new_code_cell(setup_cell(code)))
        notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3"}
        with tempfile.TemporaryDirectory() as scratch:
            resources = {"metadata": {"path": scratch}}
            client = NotebookClient(notebook, timeout=600, resources=resources, **KERNEL_OPTIONS)
            # the kernel draws figures inline, whatever backend the build itself was given
            inline = {k: v for k, v in os.environ.items() if k != "MPLBACKEND"}
            client.execute(env=inline)  # raises CellExecutionError, naming the cell, on any error
        for cell in notebook.cells:  # progress bars and library warnings are noise on a page
            if cell.cell_type == "code":
                cell.outputs = [o for o in cell.outputs if o.get("name") != "stderr"]
        nbformat.write(notebook, target)
        manifest[source.name] = digest.hexdigest()
        executed.append(source.name)
    write_json(manifest_path, manifest)
    return executed
