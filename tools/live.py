"""The files the live pages (docs/live/) fetch when a reader asks for a model.

Both models' weights, configs and tokenizers, taken from the Hugging Face cache the
set-up filled and written to docs/live/models/ (git-ignored), which the site serves:

- the book's GPT-2 is copied as it is: one float32 file of 16 MiB;
- MiniLM's float32 weights (87 MiB) are cut in two files, each under LIMIT, the most
  the book asks a browser to fetch in one file: the embeddings; the layers and pooler.
  `position_ids`, a buffer of 0..511 and no weight, is left out.

Every file is checked by sha256, copied or written, so a changed checkpoint or a
changed writer fails here, by name. manifest.json lists them with their sizes and
sha256, which the pages read first. With the files in place, nothing is redone.
`python -m tools.live` runs it; `make setup` and the site build call it.
"""

from pathlib import Path

from snippets.book import DOCS, staged_folder, write_json
from snippets.hub import GPT2_SHAKESPEARE, MINILM, ChecksumError, check_sha256

LIVE_MODELS = DOCS / "live" / "models"
COPIED = {
    "minilm": (MINILM, ["config.json", "tokenizer.json"]),
    "gpt2-shakespeare": (GPT2_SHAKESPEARE, ["config.json", "tokenizer.json", "model.safetensors"]),
}
# MiniLM's weights as written here, in two files: their sha256
MINILM_PARTS = {
    "embeddings.safetensors": "304d6cf381512c977f4f2044e892780ca44de0fcfc3f4916a6756e3da63f407d",
    "layers.safetensors": "8c8671d8c6af7a3c9c45779797490741445e10894c3c1f470553e4e2a061b961",
}
LIMIT = 50_000_000  # bytes: the most one model file may weigh


def expected() -> dict[Path, str]:
    """Every file the live pages fetch, and its sha256."""
    files = {
        LIVE_MODELS / folder / name: checkpoint.sha256[name]
        for folder, (checkpoint, names) in COPIED.items()
        for name in names
    }
    files |= {LIVE_MODELS / "minilm" / name: digest for name, digest in MINILM_PARTS.items()}
    return files


def is_built() -> bool:
    try:
        for path, digest in expected().items():
            check_sha256(path, digest)
    except ChecksumError:
        return False
    return (LIVE_MODELS / "manifest.json").is_file()


def manifest(folder: Path) -> dict:
    """What the pages read before fetching a model: each file's name, size and sha256."""
    files = {}
    for path, digest in expected().items():
        written = folder / path.relative_to(LIVE_MODELS)
        files.setdefault(path.parent.name, []).append(
            {"name": path.name, "bytes": written.stat().st_size, "sha256": digest}
        )
    return files


def minilm_parts(weights: Path) -> dict[str, dict]:
    """MiniLM's tensors, by the file each goes to."""
    from safetensors.torch import load_file  # imports torch: only when the files are written

    tensors = load_file(weights)
    del tensors["embeddings.position_ids"]
    embeddings = {k: v for k, v in tensors.items() if k.startswith("embeddings.")}
    layers = {k: v for k, v in tensors.items() if k not in embeddings}
    return {"embeddings.safetensors": embeddings, "layers.safetensors": layers}


def build() -> Path:
    if is_built():
        return LIVE_MODELS
    from safetensors.torch import save_file

    with staged_folder(LIVE_MODELS) as staging:
        for folder, (checkpoint, names) in COPIED.items():
            (staging / folder).mkdir()
            for name in names:
                source = checkpoint.snapshot_dir() / name
                check_sha256(source, checkpoint.sha256[name])
                (staging / folder / name).write_bytes(source.read_bytes())
        for name, tensors in minilm_parts(MINILM.snapshot_dir() / "model.safetensors").items():
            save_file(tensors, staging / "minilm" / name)
            (staging / "minilm" / name).chmod(0o644)  # written private; served to everyone
        for path, digest in expected().items():
            written = staging / path.relative_to(LIVE_MODELS)
            check_sha256(written, digest)
            if written.stat().st_size > LIMIT:
                raise ValueError(f"{written.name} weighs over {LIMIT:,} bytes")
        write_json(staging / "manifest.json", manifest(staging))
    return LIVE_MODELS


if __name__ == "__main__":
    print(build())
