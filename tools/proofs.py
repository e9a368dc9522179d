"""The proof table: every equality the book proves, as the last test run measured it.

The parity tests record each proof (tests/conftest.py, `prove`): the component written
by hand, the reference it is held to, the inputs, the tolerance, and the largest
difference measured, under each numeric configuration that ran (tools/numerics.py). The
site build draws the table on docs/proofs.md from that record, with the machine and the
versions that measured it. Nothing in it is typed by hand.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from snippets.book import CACHE, cpu_name, read_json, write_json
from tools.numerics import CONFIGURATIONS, MARGIN, current

PROOFS = CACHE / "proofs.json"
MARKER = "<!-- the proof table -->"  # where docs/proofs.md shows it


def clear(proofs: Path = PROOFS) -> None:
    """Start a new record: the whole test run is about to measure every proof again."""
    proofs.unlink(missing_ok=True)


def record(component: str, reference: str, inputs: str, tolerance: float, difference: float,
           proofs: Path = PROOFS) -> None:  # fmt: skip
    """Add one measurement of a proof, under the configuration this process runs under."""
    import torch
    import transformers

    proofs.parent.mkdir(parents=True, exist_ok=True)
    # the pytest-xdist workers of one run, and the runs under each configuration, write here
    with open(proofs.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        recorded = read_json(proofs)
        recorded.setdefault("machine", {
            "cpu": cpu_name(), "cores": os.cpu_count(),
            "torch": torch.__version__.split("+")[0], "transformers": transformers.__version__,
        })  # fmt: skip
        row = recorded.setdefault("proofs", {}).setdefault(
            f"{component} | {inputs}",
            {"component": component, "reference": reference, "inputs": inputs,
             "tolerance": tolerance, "differences": {}},
        )  # fmt: skip
        row["tolerance"] = tolerance
        configuration = current()
        row["differences"][configuration] = max(
            difference, row["differences"].get(configuration, 0.0)
        )
        write_json(proofs, recorded)


def table(proofs: Path = PROOFS) -> str:
    """The proof table in Markdown, with a line naming the machine that measured it."""
    recorded = read_json(proofs)
    if not recorded.get("proofs"):
        return "*This build of the site came with no test run: the table is empty.*"
    machine = recorded["machine"]
    ran = [name for name in CONFIGURATIONS if any(
        name in row["differences"] for row in recorded["proofs"].values())]  # fmt: skip
    lines = [
        f"Measured on {machine['cpu']} ({machine['cores']} cores), torch {machine['torch']}, "
        f"transformers {machine['transformers']}, under {len(ran)} numeric "
        f"configuration{'s' if len(ran) > 1 else ''}: {', '.join(f'`{n}`' for n in ran)}.",
        "",
        "| component | reference | inputs | tolerance | largest difference | margin |",
        "| --- | --- | --- | ---: | ---: | ---: |",
    ]
    for row in sorted(recorded["proofs"].values(), key=lambda r: (r["component"], r["inputs"])):
        worst = max(row["differences"].values())
        margin = _margin(row["tolerance"], worst)
        lines.append(
            f"| {row['component']} | {row['reference']} | {row['inputs']} | "
            f"{row['tolerance']:.0e} | {worst:.1e} | {margin} |"
        )
    return "\n".join(lines)


def _margin(tolerance: float, worst: float) -> str:
    """The margin column: bold under MARGIN, which only the machine as it is may pass with."""
    if not worst:
        return "exact"
    margin = tolerance / worst
    return f"{margin:,.0f}×" if margin >= MARGIN else f"**{margin:.1f}×, under {MARGIN}×**"
