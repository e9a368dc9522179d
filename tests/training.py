"""What the tests of the training scripts and their data share: a short run, and the
documents that hold a stretch of token ids."""


def run_training(main, tiny_settings, corpus, folder, *extra):
    """Run a training script's `main` on a tiny config (option -> value) and corpus; return
    its output folder."""
    out, work = folder / "out", folder / "work"
    settings = [arg for option_and_value in tiny_settings.items() for arg in option_and_value]
    paths = ["--corpus", str(corpus), "--output", str(out), "--work", str(work)]
    main([*settings, *paths, *extra])
    return out


def documents_holding(documents):
    """A function from token ids to the indices of the documents whose token stream
    contains them, contiguous."""
    streams = [" ".join(str(i) for line in document for i in line) for document in documents]

    def holding(ids):
        return {i for i, stream in enumerate(streams) if " ".join(map(str, ids)) in stream}

    return holding


def without_timing(metrics):
    """A run's metrics less its clock, which no two runs share."""
    return {key: value for key, value in metrics.items() if key not in {"seconds", "cpu_seconds"}}
