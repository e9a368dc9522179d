"""What the book's two training scripts share (snippets/gpt2_training.py and
snippets/pretraining.py): the corpus split, the resumable state, the shipped
checkpoint and the command line.

A run saves its whole state to a `work` folder every so often and, started again
with the same settings, carries on from there. `settings.stop_after` stops a run
early, as an interruption would; it is not part of what the run computes, so the
recorded settings leave it out.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
from dataclasses import asdict, fields
from pathlib import Path

import torch

from snippets.models import shakespeare_dir

STATE = "state.pt"  # in `work`: everything needed to resume
METRICS = "metrics.json"  # in the checkpoint: what the run measured


def read_corpus(settings):
    """(training texts, held-out text): every *_gut.txt but one, and that one."""
    corpus = corpus_dir(settings)
    paths = sorted(corpus.glob("*_gut.txt"))
    if settings.held_out not in {p.name for p in paths}:
        raise FileNotFoundError(f"the held-out play {settings.held_out} is not in {corpus}")
    training = [p.read_text(encoding="utf-8") for p in paths if p.name != settings.held_out]
    return training, (corpus / settings.held_out).read_text(encoding="utf-8")


def corpus_dir(settings) -> Path:
    return Path(settings.corpus) if settings.corpus else shakespeare_dir()


def recorded(settings) -> dict:
    """The settings as the state and the metrics record them: without `stop_after`."""
    return asdict(settings) | {"stop_after": 0}


def saved_state(settings, work: Path) -> dict | None:
    """The state an earlier run with the same settings saved in `work`, or None."""
    work.mkdir(parents=True, exist_ok=True)
    if not (work / STATE).is_file():
        return None
    state = torch.load(work / STATE, weights_only=False)
    if state["settings"] != recorded(settings):
        raise ValueError(f"{work / STATE} was saved with other settings: remove it to start over")
    return state


def save_state(state: dict, work: Path) -> None:
    """Write the state whole or not at all: an interruption mid-write leaves the last one."""
    with tempfile.NamedTemporaryFile(dir=work, delete=False) as tmp:
        torch.save(state, tmp)
    os.replace(tmp.name, work / STATE)


def export(output: Path, settings, metrics: dict, *parts) -> None:
    """Write the shipped checkpoint: each part's save_pretrained (model, tokenizer, ...),
    the metrics and a copy of the held-out play; replace any earlier one only once complete.
    """
    output.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".partial-", dir=output.parent))
    staging.chmod(0o755)  # mkdtemp makes it private; the checkpoint is for everyone to read
    try:
        for part in parts:
            part.save_pretrained(staging)
        (staging / METRICS).write_text(json.dumps(metrics, indent=1) + "\n")
        shutil.copyfile(corpus_dir(settings) / settings.held_out, staging / settings.held_out)
        for path in staging.iterdir():
            path.chmod(0o644)  # some writers make their files private
        if output.exists():
            shutil.rmtree(output)
        os.rename(staging, output)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def command_line(prog: str, description: str, settings_class, output: Path, work: Path, argv):
    """(settings, output, work) from the command line: one option per settings field."""
    parser = argparse.ArgumentParser(
        prog=prog, description=description, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--output", type=Path, default=output, help="the shipped checkpoint")
    parser.add_argument("--work", type=Path, default=work, help="the resumable state")
    parser.add_argument("--threads", type=int, default=0,
                        help="CPU threads for torch; 0: torch's default")  # fmt: skip
    for option in fields(settings_class):
        parser.add_argument(f"--{option.name.replace('_', '-')}", type=type(option.default),
                            default=option.default)  # fmt: skip
    args = vars(parser.parse_args(argv))
    output, work, threads = args.pop("output"), args.pop("work"), args.pop("threads")
    if threads:
        torch.set_num_threads(threads)
    return settings_class(**args), output, work
