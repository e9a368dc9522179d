"""tools/publish.py, the book's checkpoints and data set on the Hub: the plan holds exactly
the ids the pages load, with the provisioning table's files and checksums, which are the
local files'; publishing uploads each changed repository once, tagged by its content,
leaves a tagged one alone and refuses a file that is not the one pinned; and without a
token it says so and succeeds, touching no network. The Hub is replaced by a fake that
records calls and checks each against HfApi's real signature."""

import dataclasses
import hashlib
import inspect
import os
import re
import shutil
import subprocess
import sys
from collections import defaultdict

import pytest
from huggingface_hub import HfApi
from huggingface_hub.hf_api import CommitInfo, GitRefInfo, GitRefs

from snippets.book import DOCS, REPO_ROOT
from snippets.hub import (
    BERT_SHAKESPEARE,
    GPT2_SHAKESPEARE,
    GPT2_SPEAKER,
    MOVIE_REVIEWS_FILE,
    MOVIE_REVIEWS_ID,
    MOVIE_REVIEWS_SHA256,
    ChecksumError,
    movie_reviews_dir,
    sha256_of,
)
from tools.publish import NOTICE_WITHOUT_TOKEN, content_tag, main, publish, upload_plan

# an id as code on a page types it: in quotes, so prose mentioning an id does not count
HUB_ID_IN_CODE = re.compile(r"""["'](tensor-by-tensor/[\w.-]+)["']""")


class RecordingHub:
    """Stands in for HfApi: records each call, after binding it to the real method's
    signature, and keeps the tags it is given, as the Hub would."""

    def __init__(self, tags_on_hub: dict[tuple[str, str], set[str]] | None = None):
        self.calls: list[tuple[str, dict]] = []  # (method, its arguments by name)
        self.tags = defaultdict(set, tags_on_hub or {})  # (repo type, repo id) -> tag names

    def _record(self, method: str, args: tuple, kwargs: dict) -> dict:
        bound = inspect.signature(getattr(HfApi, method)).bind(self, *args, **kwargs)
        arguments = {name: value for name, value in bound.arguments.items() if name != "self"}
        self.calls.append((method, arguments))
        return arguments

    def _key(self, arguments: dict) -> tuple[str, str]:
        return (arguments.get("repo_type") or "model", arguments["repo_id"])

    def create_repo(self, *args, **kwargs):
        self._record("create_repo", args, kwargs)

    def list_repo_refs(self, *args, **kwargs):
        arguments = self._record("list_repo_refs", args, kwargs)
        tags = [
            GitRefInfo(name=tag, ref=f"refs/tags/{tag}", target_commit="0" * 40)
            for tag in sorted(self.tags[self._key(arguments)])
        ]
        return GitRefs(branches=[], converts=[], tags=tags)

    def create_commit(self, *args, **kwargs):
        arguments = self._record("create_commit", args, kwargs)
        oid = hashlib.sha1(str(len(self.calls)).encode()).hexdigest()
        return CommitInfo(
            commit_url=f"https://huggingface.co/{arguments['repo_id']}/commit/{oid}",
            commit_message=arguments["commit_message"],
            commit_description=arguments.get("commit_description") or "",
            oid=oid,
        )

    def create_tag(self, *args, **kwargs):
        arguments = self._record("create_tag", args, kwargs)
        self.tags[self._key(arguments)].add(arguments["tag"])

    def called(self, method: str) -> list[dict]:
        return [arguments for name, arguments in self.calls if name == method]


def ids_the_pages_load() -> set[str]:
    sources = [*DOCS.rglob("*.md"), *DOCS.glob("labs/*.py")]
    return {match for path in sources for match in HUB_ID_IN_CODE.findall(path.read_text())}


def test_the_plan_publishes_exactly_the_ids_the_pages_load():
    plan_ids = [repo.repo_id for repo in upload_plan()]
    assert len(plan_ids) == len(set(plan_ids)) == 4
    assert set(plan_ids) == ids_the_pages_load()


def test_the_plan_holds_the_provisioning_tables_files_which_are_the_local_files():
    by_id = {repo.repo_id: repo for repo in upload_plan()}
    expected = {
        GPT2_SHAKESPEARE.repo_id: ("model", GPT2_SHAKESPEARE.trained_here, GPT2_SHAKESPEARE.sha256),
        BERT_SHAKESPEARE.repo_id: ("model", BERT_SHAKESPEARE.trained_here, BERT_SHAKESPEARE.sha256),
        GPT2_SPEAKER.repo_id: ("model", GPT2_SPEAKER.trained_here, GPT2_SPEAKER.sha256),
        MOVIE_REVIEWS_ID: (
            "dataset",
            movie_reviews_dir(),
            {MOVIE_REVIEWS_FILE: MOVIE_REVIEWS_SHA256},
        ),
    }
    assert by_id.keys() == expected.keys()
    for repo_id, (repo_type, folder, table) in expected.items():
        repo = by_id[repo_id]
        assert repo.repo_type == repo_type
        assert repo.files.keys() == table.keys()
        for name, (local, sha256) in repo.files.items():
            assert local == folder / name
            assert sha256 == table[name] == sha256_of(local), f"{repo_id}: {name}"
    assert by_id[GPT2_SHAKESPEARE.repo_id].files["model.safetensors"][0] == (
        REPO_ROOT / "checkpoints" / "gpt2-shakespeare" / "model.safetensors"
    )


def test_the_content_tag_changes_with_any_file_and_only_then():
    files = {"config.json": "a" * 64, "model.safetensors": "b" * 64}
    tag = content_tag(files)
    assert re.fullmatch(r"files-[0-9a-f]{16}", tag)
    assert content_tag(dict(reversed(files.items()))) == tag
    assert content_tag({**files, "model.safetensors": "c" * 64}) != tag
    assert content_tag({"config.json": "a" * 64, "weights.safetensors": "b" * 64}) != tag
    assert content_tag({**files, "README.md": "d" * 64}) != tag
    tags = [repo.tag for repo in upload_plan()]
    assert len(set(tags)) == len(tags)


def test_publish_uploads_each_repository_once_with_its_files_and_tags_the_commit(capsys):
    plan = upload_plan()
    hub = RecordingHub()
    outcomes = publish(plan, hub)

    commits, tags = hub.called("create_commit"), hub.called("create_tag")
    assert [c["repo_id"] for c in commits] == [repo.repo_id for repo in plan]
    assert [t["repo_id"] for t in tags] == [repo.repo_id for repo in plan]
    for repo, commit, tag, outcome in zip(plan, commits, tags, outcomes, strict=True):
        assert commit["repo_type"] == tag["repo_type"] == repo.repo_type
        assert repo.tag in commit["commit_message"]
        uploaded = {op.path_in_repo: op for op in commit["operations"]}
        assert uploaded.keys() == repo.files.keys()
        for name, (local, sha256) in repo.files.items():
            assert uploaded[name].path_or_fileobj == str(local)
            # what huggingface_hub would send, hashed by huggingface_hub itself
            assert uploaded[name].upload_info.sha256.hex() == sha256
        assert tag["tag"] == repo.tag
        assert tag["revision"] == outcome.commit == commit_oid(hub, repo.repo_id)
    assert [c["exist_ok"] for c in hub.called("create_repo")] == [True] * len(plan)
    printed = capsys.readouterr().out.splitlines()
    assert printed == [
        f"{r.repo_id}: uploaded as commit {o.commit}, tagged {r.tag}"
        for r, o in zip(plan, outcomes, strict=True)
    ]


def commit_oid(hub: RecordingHub, repo_id: str) -> str:
    """The oid the fake returned for this repository's commit: sha1 of its call's number."""
    (number,) = [
        i + 1
        for i, (name, arguments) in enumerate(hub.calls)
        if name == "create_commit" and arguments["repo_id"] == repo_id
    ]
    return hashlib.sha1(str(number).encode()).hexdigest()


def test_publish_uploads_nothing_when_every_tag_is_on_the_hub():
    plan = upload_plan()
    hub = RecordingHub({(repo.repo_type, repo.repo_id): {repo.tag} for repo in plan})
    outcomes = publish(plan, hub)
    assert hub.called("create_commit") == hub.called("create_tag") == []
    assert [o.commit for o in outcomes] == [None] * len(plan)
    assert [o.tag for o in outcomes] == [repo.tag for repo in plan]


def test_publishing_twice_uploads_only_once():
    plan, hub = upload_plan(), RecordingHub()
    publish(plan, hub)
    publish(plan, hub)
    assert len(hub.called("create_commit")) == len(plan)


def test_an_old_tag_does_not_stop_the_upload_of_changed_files():
    plan = upload_plan()
    hub = RecordingHub(
        {(repo.repo_type, repo.repo_id): {"files-0000000000000000"} for repo in plan}
    )
    publish(plan, hub)
    assert len(hub.called("create_commit")) == len(plan)


def test_publish_refuses_a_file_whose_sha256_differs(tmp_path):
    plan = upload_plan()
    gpt2 = next(repo for repo in plan if repo.repo_id == GPT2_SHAKESPEARE.repo_id)
    copy = tmp_path / "gpt2-shakespeare"
    shutil.copytree(GPT2_SHAKESPEARE.trained_here, copy)
    with open(copy / "config.json", "a") as config:
        config.write(" ")
    altered = dataclasses.replace(
        gpt2, files={name: (copy / name, sha256) for name, (_, sha256) in gpt2.files.items()}
    )
    hub = RecordingHub()
    with pytest.raises(ChecksumError) as error:
        publish([altered], hub)
    assert str(copy / "config.json") in str(error.value)
    assert GPT2_SHAKESPEARE.sha256["config.json"] in str(error.value)
    assert hub.called("create_commit") == hub.called("create_tag") == []


@pytest.mark.parametrize("token", [None, ""], ids=["unset", "empty"])
def test_without_a_token_it_prints_a_notice_and_succeeds(token):
    env = {name: value for name, value in os.environ.items() if name != "HF_TOKEN"}
    if token is not None:
        env["HF_TOKEN"] = token
    env["HF_HUB_OFFLINE"] = "1"  # any request to the Hub would raise, so the exit code shows none
    result = subprocess.run(
        [sys.executable, "-m", "tools.publish"],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [NOTICE_WITHOUT_TOKEN]
    assert NOTICE_WITHOUT_TOKEN.startswith("::notice title=Hub upload skipped::HF_TOKEN is not set")


def test_the_dry_run_prints_each_repository_and_file_with_its_size_and_sha256(capsys):
    main(["--dry-run"])
    printed = capsys.readouterr().out
    for repo in upload_plan():
        assert f"{repo.repo_id} ({repo.repo_type}), tag {repo.tag}, from " in printed
        for name, (local, sha256) in repo.files.items():
            line = rf"^  {re.escape(name)} +{local.stat().st_size:,} bytes  sha256 {sha256}$"
            assert re.search(line, printed, re.MULTILINE), line
