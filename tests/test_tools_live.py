"""tools/live.py: the live pages' model files are written whole, checked by sha256, left
alone when in place, and written again when one is missing or altered."""

import json

from safetensors.torch import load_file

from snippets.hub import GPT2_SHAKESPEARE, MINILM
from tools import live


def test_every_file_is_in_place_and_under_the_limit():
    assert live.build() == live.LIVE_MODELS and live.is_built()
    manifest = json.loads((live.LIVE_MODELS / "manifest.json").read_text())
    for folder, files in manifest.items():
        for file in files:
            assert (live.LIVE_MODELS / folder / file["name"]).stat().st_size == file["bytes"]
            assert file["bytes"] <= live.LIMIT, f"{folder}/{file['name']}"
    assert {f["name"] for f in manifest["gpt2-shakespeare"]} <= set(GPT2_SHAKESPEARE.sha256)


def test_minilms_two_files_hold_every_weight_unchanged():
    original = load_file(MINILM.snapshot_dir() / "model.safetensors")
    parts = {}
    for name in live.MINILM_PARTS:
        parts |= load_file(live.LIVE_MODELS / "minilm" / name)
    assert set(parts) == set(original) - {"embeddings.position_ids"}
    assert all(parts[name].equal(original[name]) for name in parts)


def test_a_second_build_rewrites_nothing():
    live.build()
    before = {p: p.stat().st_mtime_ns for p in live.LIVE_MODELS.rglob("*")}
    live.build()
    assert {p: p.stat().st_mtime_ns for p in live.LIVE_MODELS.rglob("*")} == before


def test_an_altered_file_is_written_again(tmp_path, monkeypatch):
    monkeypatch.setattr(live, "LIVE_MODELS", tmp_path / "models")
    live.build()
    config = tmp_path / "models" / "minilm" / "config.json"
    config.write_text("{}")
    assert not live.is_built()
    live.build()
    assert live.is_built() and config.read_text() != "{}"
