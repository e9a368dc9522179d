"""Publish the book's own checkpoints and data set to the Hugging Face Hub.

The pages load `tensor-by-tensor/gpt2-shakespeare`, `tensor-by-tensor/bert-shakespeare`
and the dataset `tensor-by-tensor/movie-review-snippets`. Offline, set-up places them in
the cache; online, `from_pretrained` asks the Hub first, so they must exist there too.

    python -m tools.publish             # upload what changed; needs $HF_TOKEN
    python -m tools.publish --dry-run   # print the plan and exit

The plan comes from the provisioning table in snippets/hub.py. Each repository gets a
content tag, `files-` and 16 hex digits of a hash over its files' names and sha256, so
a repository whose tag is on the Hub already is left alone, and any changed file gives
a new tag and one new commit. The CI workflow runs this on every push to main.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from huggingface_hub import CommitOperationAdd

from snippets.book import REPO_ROOT
from snippets.hub import (
    CHECKPOINTS,
    MOVIE_REVIEWS_FILE,
    MOVIE_REVIEWS_ID,
    MOVIE_REVIEWS_SHA256,
    check_sha256,
    movie_reviews_dir,
)

# a GitHub Actions workflow command: shown on the run's summary page, not only in its log
NOTICE_WITHOUT_TOKEN = (
    "::notice title=Hub upload skipped::HF_TOKEN is not set, so the book's checkpoints and "
    "data set were not uploaded to the Hugging Face Hub; add a write token as the "
    "repository secret HF_TOKEN to publish them"
)


@dataclass(frozen=True)
class HubRepo:
    repo_id: str  # the id the pages load
    repo_type: str  # "model" or "dataset"
    files: dict[str, tuple[Path, str]]  # path in the Hub repo -> (local file, its sha256)

    @property
    def tag(self) -> str:
        return content_tag({name: sha256 for name, (_, sha256) in self.files.items()})


@dataclass(frozen=True)
class Outcome:
    repo_id: str
    tag: str
    commit: str | None  # the commit uploaded, or None when the tag was on the Hub already

    def __str__(self) -> str:
        if self.commit is None:
            return f"{self.repo_id}: unchanged, tag {self.tag} is on the Hub already"
        return f"{self.repo_id}: uploaded as commit {self.commit}, tagged {self.tag}"


def content_tag(sha256_by_name: dict[str, str]) -> str:
    """A tag naming exactly these files: any changed, added or removed file changes it."""
    listing = "".join(f"{name}\0{sha256}\n" for name, sha256 in sorted(sha256_by_name.items()))
    return "files-" + hashlib.sha256(listing.encode()).hexdigest()[:16]


def upload_plan() -> list[HubRepo]:
    """Every repository the book publishes: the checkpoints trained in this repository,
    read from checkpoints/, and the movie-review data set, read from the provisioned
    cache (raises ChecksumError when set-up has not placed it)."""
    trained_here = [checkpoint for checkpoint in CHECKPOINTS if not checkpoint.package]
    models = [
        HubRepo(
            repo_id=checkpoint.repo_id,
            repo_type="model",
            files={
                name: (checkpoint.trained_here / name, sha256)
                for name, sha256 in checkpoint.sha256.items()
            },
        )
        for checkpoint in trained_here
    ]
    movie_reviews = HubRepo(
        repo_id=MOVIE_REVIEWS_ID,
        repo_type="dataset",
        files={
            MOVIE_REVIEWS_FILE: (movie_reviews_dir() / MOVIE_REVIEWS_FILE, MOVIE_REVIEWS_SHA256)
        },
    )
    return [*models, movie_reviews]


def publish(plan: list[HubRepo], api) -> list[Outcome]:
    """Upload each repository of the plan whose content tag is not on the Hub yet, in one
    commit, and tag that commit. `api` is a `huggingface_hub.HfApi`. Raises
    ChecksumError, before uploading that repository, when a local file is not the one
    the plan pins."""
    outcomes = []
    for repo in plan:
        api.create_repo(repo.repo_id, repo_type=repo.repo_type, exist_ok=True)
        refs = api.list_repo_refs(repo.repo_id, repo_type=repo.repo_type)
        if repo.tag in {tag.name for tag in refs.tags}:
            outcome = Outcome(repo.repo_id, repo.tag, commit=None)
        else:
            for local, sha256 in repo.files.values():
                check_sha256(local, sha256)
            commit = api.create_commit(
                repo.repo_id,
                operations=[
                    CommitOperationAdd(path_in_repo=name, path_or_fileobj=local)
                    for name, (local, _) in repo.files.items()
                ],
                commit_message=f"Publish {repo.tag} from the book's repository",
                commit_description="\n".join(
                    f"{name} sha256 {sha256}" for name, (_, sha256) in repo.files.items()
                ),
                repo_type=repo.repo_type,
            )
            api.create_tag(
                repo.repo_id, tag=repo.tag, revision=commit.oid, repo_type=repo.repo_type
            )
            outcome = Outcome(repo.repo_id, repo.tag, commit=commit.oid)
        print(outcome, flush=True)  # one line per repository, as it is done, for the CI log
        outcomes.append(outcome)
    return outcomes


def describe(plan: list[HubRepo]) -> str:
    """The plan as text: each repository, its type and tag, each file's size and sha256."""
    lines = []
    for repo in plan:
        (folder,) = {
            local.parents[len(Path(name).parts) - 1] for name, (local, _) in repo.files.items()
        }
        where = folder.relative_to(REPO_ROOT) if folder.is_relative_to(REPO_ROOT) else folder
        lines.append(f"{repo.repo_id} ({repo.repo_type}), tag {repo.tag}, from {where}")
        width = max(map(len, repo.files))
        for name, (local, sha256) in repo.files.items():
            size = local.stat().st_size
            lines.append(f"  {name:<{width}}  {size:>12,} bytes  sha256 {sha256}")
    return "\n".join(lines)


def main(arguments: list[str]) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m tools.publish",
        description="Upload the book's checkpoints and data set to the Hugging Face Hub, "
        "with the token in $HF_TOKEN.",
    )
    parser.add_argument("--dry-run", action="store_true", help="print the plan and exit")
    if parser.parse_args(arguments).dry_run:
        print(describe(upload_plan()))
        return
    token = os.environ.get("HF_TOKEN", "").strip()
    if not token:
        # forks and pull requests have no secrets: that is not a failure of the build
        print(NOTICE_WITHOUT_TOKEN)
        return
    from huggingface_hub import HfApi

    publish(upload_plan(), HfApi(token=token))


if __name__ == "__main__":
    main(sys.argv[1:])
