"""The test set-up (tests/conftest.py): it runs offline, where no host but this machine can be
reached; and `--page` runs a page with the tests that check it."""

import socket

import pytest
from pytest_socket import SocketConnectBlockedError


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
    from tests.conftest import tests_of
    from tools.pages import DOCS

    assert {
        "test_live_attention.py",
        "test_live_attention_tokenizer.py",
        "test_snippets_bert_by_hand.py",
    } <= tests_of(DOCS / "live" / "attention.md")
    assert "test_live_attention_tokenizer.py" not in tests_of(DOCS / "live" / "generation.md")
