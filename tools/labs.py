"""Labs: notebooks to play with, written as jupytext "percent" scripts (docs/labs/*.py).

The site build executes each lab whose source changed into docs/labs/<name>.ipynb
(a cell that raises fails the build) and renders it as a Markdown page, styled
like every chapter, its figures as separate images (`lab_page`).
"""

from __future__ import annotations

import base64
import hashlib
import tempfile
from pathlib import Path

import nbformat

from snippets import hub
from snippets.book import read_json, write_json
from tools import notebooks
from tools.notebooks import colab_url, setup_cell
from tools.pages import LABS

FINGERPRINTS = ".fingerprints.json"  # a dotfile: MkDocs does not publish it


def build_labs(labs: Path = LABS, force: bool = False) -> list[str]:
    """Execute the labs whose source changed; return the names of those executed."""
    import jupytext
    from nbclient import NotebookClient

    manifest_path = labs / FINGERPRINTS
    manifest = read_json(manifest_path)
    executed = []
    for source in sorted(labs.glob("*.py")):
        digest = hashlib.sha256(source.read_bytes())
        digest.update(Path(hub.__file__).read_bytes())  # the weights a lab loads
        digest.update(Path(notebooks.__file__).read_bytes())  # its set-up cell
        target = source.with_suffix(".ipynb")
        if not force and target.exists() and manifest.get(source.name) == digest.hexdigest():
            continue
        notebook = jupytext.read(source)
        code = [cell.source for cell in notebook.cells if cell.cell_type == "code"]
        notebook.cells.insert(1, nbformat.v4.new_code_cell(setup_cell(code)))
        notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3"}
        with tempfile.TemporaryDirectory() as scratch:
            resources = {"metadata": {"path": scratch}}
            client = NotebookClient(notebook, timeout=600, resources=resources)
            client.execute()  # raises CellExecutionError, naming the cell, on any error
        for cell in notebook.cells:  # progress bars and library warnings are noise on a page
            if cell.cell_type == "code":
                cell.outputs = [o for o in cell.outputs if o.get("name") != "stderr"]
        nbformat.write(notebook, target)
        manifest[source.name] = digest.hexdigest()
        executed.append(source.name)
    write_json(manifest_path, manifest)
    return executed


def lab_page(notebook: nbformat.NotebookNode, name: str, repo_url: str) -> tuple[str, dict]:
    """An executed lab as Markdown, and its figures: {file name under labs/<name>/: bytes}.

    Under the title, links to download the executed notebook and open it in Colab.
    """
    colab = colab_url(repo_url, f"labs/{name}.ipynb")
    links = (
        f'<p class="provenance" markdown>:material-download: [notebook]({name}.ipynb){{ download }}'
        f" · :material-rocket-launch-outline: [open in Colab]({colab})</p>"
    )
    parts, images = [], {}
    for number, cell in enumerate(notebook.cells):
        if cell.cell_type == "markdown":
            title, _, rest = cell.source.partition("\n")
            first = number == 0 and title.startswith("# ")
            parts.append(f"{title}\n\n{links}\n{rest}" if first else cell.source)
            continue
        parts.append(f"```python\n{cell.source}\n```")
        for index, output in enumerate(cell.outputs):
            where = f"labs/{name}.py, cell {number}, output {index}"
            if output.output_type == "stream":  # stdout only: marked as chapters mark it
                marker = "<!--pytest-codeblocks:expected-output-->"
                parts.append(f"{marker}\n```text\n{output.text.rstrip()}\n```")
            elif "image/png" in output.get("data", {}):
                image = f"cell-{number}-{index}.png"
                images[image] = base64.b64decode(output.data["image/png"])
                parts.append(f"![the figure drawn by the cell above]({name}/{image})")
            elif "text/plain" in output.get("data", {}):
                parts.append(f"```text\n{output.data['text/plain'].rstrip()}\n```")
            else:
                raise ValueError(f"{where}: no way to show a {output.output_type} output here")
    return "\n\n".join(parts) + "\n", images
