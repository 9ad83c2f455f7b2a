"""CLI benchmark: start-up time and one cluster rendered and validated, as a user runs them.

    python bench/cli.py [--repeat 10]

Each command runs in a fresh process; the fastest of `--repeat` runs is reported. Nothing is
asserted (PRODUCT.md's targets: start well under 0.25 s, one cluster well under a second).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COMMANDS = {
    "start (gpustack --version)": ["--version"],
    "render + validate one cluster": ["render", "-o", "{out}"],
    "check one cluster": ["check", "-o", "{out}"],
}


def fastest(arguments: list[str], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "gpustack", *arguments],
            cwd=ROOT,
            check=True,
            capture_output=True,
        )
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=10)
    repeat = parser.parse_args().repeat
    with tempfile.TemporaryDirectory() as out:
        for label, arguments in COMMANDS.items():
            seconds = fastest([part.format(out=out) for part in arguments], repeat)
            print(f"{label:>32}: {seconds * 1000:6.0f} ms")


if __name__ == "__main__":
    main()
