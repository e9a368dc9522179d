"""Every figure of the book is a function here, drawn by the build.

A module per chapter, named like its test file (docs/bert/self-attention.md:
bert_self_attention.py), registers the figures its page shows with
`@figure("name.svg")`; code that figures of several chapters use lives in private
modules (`_*.py`, not imported by `all_figures()`). `build()` writes the figures to
docs/figures/ (git-ignored), redrawing only those whose fingerprint changed: the
source of the module that draws it, of every private module, of this file and of
snippets/hub.py (which pins the weights figures are drawn from), any extra `inputs`,
and the matplotlib version. The same code gives the same bytes.

    python -m snippets.figures          # redraw what changed
    python -m snippets.figures --all    # redraw everything
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import io
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import matplotlib
import matplotlib.pyplot as plt

from snippets import hub
from snippets.book import DOCS, REPO_ROOT, read_json, write_json

OUT_DIR = DOCS / "figures"
MANIFEST = ".fingerprints.json"  # a dotfile: MkDocs does not publish it

STYLE = {
    "svg.hashsalt": "tensor-by-tensor",  # stable element ids: same code, same bytes
    "svg.fonttype": "path",  # glyphs as paths: identical in every browser
    "font.size": 10,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "figure.facecolor": "white",
    "savefig.facecolor": "white",
}


@dataclass(frozen=True)
class Figure:
    name: str  # file name under docs/figures/
    draw: Callable[[], plt.Figure]
    inputs: tuple[Path, ...]  # files besides code whose content the figure depends on

    def fingerprint(self) -> str:
        digest = hashlib.sha256(matplotlib.__version__.encode())
        code = (Path(inspect.getfile(self.draw)), *private_modules(), Path(__file__))
        for path in (*code, Path(hub.__file__), *self.inputs):
            digest.update(path.read_bytes())
        return digest.hexdigest()


def private_modules() -> list[Path]:
    """The package's private modules, `_*.py`: helpers that figures of several chapters use."""
    here = Path(__file__).parent
    return sorted(p for p in here.glob("_*.py") if not p.name.startswith("__"))


REGISTRY: dict[str, Figure] = {}


def figure(name: str, inputs: tuple[Path | str, ...] = ()):
    """Register a function that returns a matplotlib figure as docs/figures/<name>.

    `inputs`: the files besides its code that it reads, as paths or as paths
    relative to the repository.
    """

    def register(draw):
        if name in REGISTRY:
            raise ValueError(f"two figures are named {name}")
        REGISTRY[name] = Figure(name, draw, tuple(REPO_ROOT / p for p in inputs))
        return draw

    return register


def all_figures() -> dict[str, Figure]:
    for module in pkgutil.iter_modules(__path__):
        if not module.name.startswith("_"):
            importlib.import_module(f"{__name__}.{module.name}")
    return REGISTRY


def render(fig: Figure) -> bytes:
    with plt.rc_context(STYLE):
        drawn = fig.draw()
        buffer = io.BytesIO()
        drawn.savefig(buffer, format="svg", metadata={"Date": None}, bbox_inches="tight")
        plt.close(drawn)
    return buffer.getvalue()


def build(out_dir: Path = OUT_DIR, force: bool = False) -> list[str]:
    """Draw the figures whose fingerprint changed (all with force); return their names."""
    out_dir.mkdir(parents=True, exist_ok=True)
    manifest_path = out_dir / MANIFEST
    manifest = read_json(manifest_path)
    drawn = []
    for name, fig in sorted(all_figures().items()):
        fingerprint = fig.fingerprint()
        target = out_dir / name
        if not force and target.exists() and manifest.get(name) == fingerprint:
            continue
        data = render(fig)
        if not target.exists() or target.read_bytes() != data:
            target.write_bytes(data)  # unchanged bytes are not rewritten: no serve reload loop
        manifest[name] = fingerprint
        drawn.append(name)
    for stale in set(manifest) - set(REGISTRY):
        (out_dir / stale).unlink(missing_ok=True)
        del manifest[stale]
    write_json(manifest_path, manifest)
    return drawn
