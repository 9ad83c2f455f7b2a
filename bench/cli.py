"""CLI benchmark: start-up time and one cluster rendered and validated, as a user runs them.

    python bench/cli.py [--repeat 10]

Each command runs in a fresh process; the fastest of `--repeat` runs is reported, in wall-clock
time and in CPU time (user + system, which other work on a shared machine disturbs less). Nothing
is asserted (PRODUCT.md's targets: start well under 0.25 s, one cluster well under a second).
The first entries are start-up as each kind of command line meets it (version, help, a shell's
completion, validate on one file and on a rendered cluster's folder, a small command); the last
two do a cluster's whole work.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COMMANDS = {
    "start (gpustack --version)": ["--version"],
    "help (gpustack render --help)": ["render", "--help"],
    "completion (gpustack ren<TAB>)": [],
    "validate one file, kubeconform's flags": [
        "validate",
        "-strict",
        "-summary",
        "tests/data/validate/corpus/valid.yaml",
    ],
    "validate one cluster's folder": ["validate", "out/kubeadm-lab"],
    "profiles list": ["profiles", "list"],
    "render + validate one cluster": ["render", "-o", "{out}"],
    "check one cluster": ["check", "-o", "{out}"],
}
# What a shell's completion script passes (bash), for the completion entry.
COMPLETION = {
    "_GPUSTACK_COMPLETE": "complete_bash",
    "COMP_WORDS": "gpustack ren",
    "COMP_CWORD": "1",
}


def fastest(arguments: list[str], repeat: int, env: dict[str, str]) -> tuple[float, float]:
    """The fastest run's seconds: wall-clock, and CPU (user + system)."""
    best, best_cpu = float("inf"), float("inf")
    for _ in range(repeat):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "gpustack", *arguments],
            cwd=ROOT,
            env=env,
            check=True,
            capture_output=True,
        )
        best = min(best, time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
        best_cpu = min(best_cpu, cpu)
    return best, best_cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=10)
    repeat = parser.parse_args().repeat
    with tempfile.TemporaryDirectory() as out:
        for label, arguments in COMMANDS.items():
            env = {**os.environ, **(COMPLETION if not arguments else {})}
            seconds, cpu = fastest([part.format(out=out) for part in arguments], repeat, env)
            print(f"{label:>40}: {seconds * 1000:6.0f} ms ({cpu * 1000:.0f} ms CPU)")


if __name__ == "__main__":
    main()
