"""The numeric configurations every page must print the same output under, and every proof
must hold under: which matrix kernels MKL and ATen pick, and how many threads split each sum.

Readers' CPUs (Intel with AVX-512, AMD with AVX2, Colab's Xeons) each pick other kernels,
and float32 sums rounded in another order differ in their last digits. An output that holds
under these three holds far beyond the machine that wrote it (docs/contributing.md, "What a
page may print").

    python -m tools.numerics compatible-1-thread pytest -m proof

runs a command under one of them. The variables are read once, when torch loads: they
belong to a fresh process, never to one that has imported torch.
"""

from __future__ import annotations

import os
import sys

# A tolerance is set at least MARGIN times the largest difference measured under the
# named configurations, and an inequality holds by MARGIN times its tolerance: under them,
# a comparison with less to spare fails.
MARGIN = 10
# The machine as it is runs kernels that no named configuration reaches from another CPU
# (ATen's AVX-512 kernels with MKL's own dispatch, on a CPU nobody here has), so there a
# comparison fails only under FLOOR; between FLOOR and MARGIN it passes, and the run's
# summary and the proof table list it, so that the next change raises the tolerance.
# Why 3: twice the largest ratio of as-is to named-configuration differences seen on other CPUs
FLOOR = 3

# No fourth configuration reaches those kernels from every CPU: AVX-512 kernels need a CPU
# with AVX-512 (ATEN_CPU_CAPABILITY=avx512, MKL_CBWR=AVX512), and MKL's own dispatch is
# what the machine as it is runs. On a CPU with AVX-512, as-is is that configuration.

CONFIGURATIONS: dict[str, dict[str, str]] = {
    "as-is": {},
    "compatible-1-thread": {
        "MKL_CBWR": "COMPATIBLE",
        "ATEN_CPU_CAPABILITY": "default",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
    },
    "avx2-2-threads": {
        "MKL_CBWR": "AVX2",
        "ATEN_CPU_CAPABILITY": "avx2",
        "OMP_NUM_THREADS": "2",
        "MKL_NUM_THREADS": "2",
    },
}


def required_margin(name: str) -> float:
    """The margin under which a comparison fails, under configuration `name`."""
    return FLOOR if name == "as-is" else MARGIN


def describe(name: str) -> str:
    """A configuration as a contributor reproduces it: its name and its variables."""
    variables = " ".join(f"{key}={value}" for key, value in CONFIGURATIONS[name].items())
    return f"{name} ({variables or 'the machine as it is'})"


def environment(name: str) -> dict[str, str]:
    """This process's environment, under configuration `name`."""
    return os.environ | CONFIGURATIONS[name]


def current() -> str:
    """The configuration this process runs under: the one whose variables are all set."""
    for name, variables in CONFIGURATIONS.items():
        if variables and all(os.environ.get(k) == v for k, v in variables.items()):
            return name
    return "as-is"


if __name__ == "__main__":
    if len(sys.argv) < 3 or sys.argv[1] not in CONFIGURATIONS:
        sys.exit(f"usage: python -m tools.numerics {{{','.join(CONFIGURATIONS)}}} COMMAND...")
    os.execvpe(sys.argv[2], sys.argv[2:], environment(sys.argv[1]))
