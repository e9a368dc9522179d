"""The test set-up (tests/conftest.py, tests/plugins/): it runs offline, where no host but
this machine can be reached; `--page` runs a page with the tests that check it; a page's
blocks share a worker."""

import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from pytest_socket import SocketConnectBlockedError

from snippets.book import REPO_ROOT


@pytest.mark.filterwarnings("ignore:A test tried to use socket")
def test_a_connection_to_another_host_fails():
    with pytest.raises(SocketConnectBlockedError, match=r"1\.1\.1\.1"):
        socket.create_connection(("1.1.1.1", 443), timeout=1)


def test_loopback_stays_reachable():
    server = socket.create_server(("127.0.0.1", 0))
    with server, socket.create_connection(server.getsockname(), timeout=1):
        pass


def test_hugging_face_does_not_try_the_hub_for_a_model_it_lacks():
    from transformers import AutoConfig

    with pytest.raises(OSError, match=r"offline|cache|connect"):
        AutoConfig.from_pretrained("google-bert/bert-base-uncased")


def test_one_page_runs_with_its_own_tests_its_aspects_and_its_snippets():
    from tests.plugins.selection import tests_of
    from tools.pages import DOCS

    assert {
        "test_live_attention.py",
        "test_live_attention_tokenizer.py",
        "test_snippets_bert_by_hand.py",
    } <= tests_of(DOCS / "live" / "attention.md")
    assert "test_live_attention_tokenizer.py" not in tests_of(DOCS / "live" / "generation.md")


GROUPED = """
import pytest

@pytest.mark.parametrize("line", [pytest.param(n, id=f"docs/part/page.md:{n}[as-is]",
                                               marks=pytest.mark.xdist_group(GROUP))
                                  for n in range(8)])
def test_block(line):
    pass

@pytest.mark.parametrize("n", range(8))
def test_other(n):
    pass
"""


def test_a_pages_blocks_run_in_one_worker_and_a_files_tests_in_one(tmp_path):
    """tests/test_docs.py runs a page once per worker that gets one of its blocks, and a
    file's module fixtures load once per worker: each group must stay in one worker.
    pytest-xdist's loadgroup has failed silently three times here: with pytest 9.2
    (pytest-xdist#1386), with a group name holding "]", and with groups added after
    pytest-xdist had read them."""
    from tests.test_docs import block_group

    group = block_group(Path("docs/part/page.md"), "as-is")
    (tmp_path / "test_grouped.py").write_text(GROUPED.replace("GROUP", repr(group)))
    (tmp_path / "conftest.py").write_text(
        "from tests.plugins.groups import pytest_collection_modifyitems"
    )
    options = ["-n", "2", "--dist", "loadgroup", "-v", "-p", "no:cacheprovider"]
    result = subprocess.run(
        [sys.executable, "-m", "pytest", *options, "test_grouped.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=os.environ | {"PYTHONPATH": str(REPO_ROOT)},
    )
    assert result.returncode == 0, result.stdout[-2000:]
    for test in ("test_block", "test_other"):
        workers = set(re.findall(rf"\[(gw\d+)\].* PASSED .*::{test}\[", result.stdout))
        assert len(workers) == 1, result.stdout[-2000:]


def test_the_kept_site_is_rebuilt_when_a_file_it_is_built_from_changes(tmp_path, monkeypatch):
    from tests.plugins.site import site_inputs_digest

    (tmp_path / "docs" / "part").mkdir(parents=True)
    (tmp_path / "mkdocs.yml").write_text("site_name: t\n")
    page = tmp_path / "docs" / "part" / "page.md"
    page.write_text("# A page\n")
    before = site_inputs_digest(tmp_path)
    (tmp_path / ".cache").mkdir()
    (tmp_path / ".cache" / "page-timings.json").write_text("{}")  # not read for the digest
    (tmp_path / "docs" / "__pycache__").mkdir()
    (tmp_path / "docs" / "__pycache__" / "x.pyc").write_bytes(b"\0")
    assert site_inputs_digest(tmp_path) == before
    page.write_text("# A page, changed\n")
    changed = site_inputs_digest(tmp_path)
    assert changed != before
    page.rename(page.with_name("renamed.md"))
    monkeypatch.delenv("SITE_URL", raising=False)
    renamed = site_inputs_digest(tmp_path)
    assert renamed not in {before, changed}
    monkeypatch.setenv("SITE_URL", "https://example.org/book/")  # the notebooks link it
    assert site_inputs_digest(tmp_path) != renamed
