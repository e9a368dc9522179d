"""What the book's two training scripts share (snippets/gpt2_training.py and
snippets/pretraining.py): the corpus split, the run's bookkeeping (its clock,
metrics, saves and resumption), the shipped checkpoint and the command line.

A run saves its whole state to a `work` folder every so often and, started again
with the same settings, carries on from there. `settings.stop_after` stops a run
early, as an interruption would; it is not part of what the run computes, so the
recorded settings leave it out. Each script's `train` keeps only what is its own:
its data, its model and what one step computes.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, fields
from pathlib import Path

import torch

from snippets.book import replaced_whole, staged_folder
from snippets.hub import shakespeare_dir

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
    with replaced_whole(work / STATE) as file:
        torch.save(state, file)


def export(output: Path, settings, metrics: dict, *parts) -> None:
    """Write the shipped checkpoint: each part's save_pretrained (model, tokenizer, ...),
    the metrics and a copy of the held-out play; replace any earlier one only once complete.
    """
    with staged_folder(output) as staging:
        for part in parts:
            part.save_pretrained(staging)
        (staging / METRICS).write_text(json.dumps(metrics, indent=1) + "\n")
        held_out = (corpus_dir(settings) / settings.held_out).read_bytes()
        (staging / settings.held_out).write_bytes(held_out)
        for path in staging.iterdir():
            path.chmod(0o644)  # some writers make their files private


class Run:
    """A run's bookkeeping: its metrics, clock, saved state and place in the schedule.

    `parts` are what the state holds besides the metrics: modules and optimizers
    (their state_dict), random generators (their state), or lists of these; one of
    them is the `model`. Built after the parts, it restores them from `work` when an
    earlier run with the same settings saved a state there. `losses` name the
    per-step lists of the metrics; `steps()` yields the steps still to run.
    """

    def __init__(self, settings, work: Path, losses: tuple[str, ...], **parts):
        self.settings, self.work, self.losses, self.parts = settings, work, losses, parts
        self.metrics = {
            "settings": recorded(settings),
            **{name: [] for name in losses},
            "held_out": [],
            "seconds": 0.0,
            "cpu_seconds": 0.0,
        }
        self.stopped = False
        state = saved_state(settings, work)
        if state is not None:
            for name, part in parts.items():
                _restore(part, state[name])
            torch.set_rng_state(state["torch_rng"])
            self.metrics = state["metrics"]
        self.started = time.perf_counter() - self.metrics["seconds"]
        self.cpu_started = time.process_time() - self.metrics["cpu_seconds"]

    def steps(self, evaluate: Callable[[], dict]) -> Iterator[int]:
        """Each step still to run; between them, evaluate on the held-out text every
        `eval_every` steps and after the last, save every `save_every`, and stop
        (resumably, `self.stopped`) after `stop_after`."""
        settings, model = self.settings, self.parts["model"]
        model.train()
        for step in range(len(self.metrics[self.losses[0]]), settings.steps):
            if step % settings.eval_every == 0:  # resuming restores the metrics saved before it
                self.evaluate(step, evaluate)
            yield step
            done = step + 1
            if done % 10 == 0:
                losses = "  ".join(f"{name} {self.metrics[name][-1]:.4f}" for name in self.losses)
                print(f"step {done:>5}  {losses}  {self.clock():.0f} s", flush=True)
            if done % settings.save_every == 0 or done in (settings.steps, settings.stop_after):
                self.save()
            if done == settings.stop_after:
                self.stopped = True
                return
        self.evaluate(settings.steps, evaluate)
        self.clock()

    def evaluate(self, step: int, evaluate: Callable[[], dict]) -> None:
        model = self.parts["model"]
        model.eval()
        scores = evaluate()
        model.train()
        self.metrics["held_out"].append({"step": step, **scores})
        shown = "  ".join(
            f"{name} {value:.4f}" if isinstance(value, float) else f"{name} {value}"
            for name, value in scores.items()
        )
        print(f"step {step:>5}  held-out {shown}", flush=True)

    def clock(self) -> float:
        """The run's wall-clock and CPU time so far, across resumptions; returns the first."""
        self.metrics["seconds"] = time.perf_counter() - self.started
        self.metrics["cpu_seconds"] = time.process_time() - self.cpu_started
        return self.metrics["seconds"]

    def save(self) -> None:
        self.clock()
        state = {name: _state_of(part) for name, part in self.parts.items()}
        state |= {
            "settings": self.metrics["settings"],
            "torch_rng": torch.get_rng_state(),
            "metrics": self.metrics,
        }
        save_state(state, self.work)


def _state_of(part):
    if isinstance(part, list):
        return [_state_of(p) for p in part]
    return part.get_state() if isinstance(part, torch.Generator) else part.state_dict()


def _restore(part, state) -> None:
    if isinstance(part, list):
        for p, s in zip(part, state, strict=True):
            _restore(p, s)
    elif isinstance(part, torch.Generator):
        part.set_state(state)
    else:
        part.load_state_dict(state)


def main(
    prog: str,
    description: str,
    settings_class,
    train,
    output: Path,
    work: Path,
    summary: Callable[[dict], str],
    argv=None,
) -> None:
    """A training script's command line: parse it, train, and summarise the final scores."""
    settings, output, work = command_line(prog, description, settings_class, output, work, argv)
    metrics = train(settings, output, work)
    if metrics is not None:
        print(
            f"held-out: {summary(metrics['held_out'][-1])}; "
            f"{metrics['seconds'] / 60:.1f} min; written to {output}"
        )


def command_line(prog: str, description: str, settings_class, output: Path, work: Path, argv):
    """(settings, output, work) from the command line: one option per settings field."""
    parser = argparse.ArgumentParser(
        prog=prog, description=description, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--output", type=Path, default=output, help="the shipped checkpoint")
    parser.add_argument("--work", type=Path, default=work, help="the resumable state")
    parser.add_argument(
        "--threads", type=int, default=0, help="CPU threads for torch; 0: torch's default"
    )
    for option in fields(settings_class):
        parser.add_argument(
            f"--{option.name.replace('_', '-')}", type=type(option.default), default=option.default
        )
    args = vars(parser.parse_args(argv))
    output, work, threads = args.pop("output"), args.pop("work"), args.pop("threads")
    if threads:
        torch.set_num_threads(threads)
    return settings_class(**args), output, work
