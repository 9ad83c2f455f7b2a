"""Pre-commit benchmark: what the `gpustack-check` hook costs for one changed file, as the
fleet grows. Generates N cluster configs (bench/fleet.py's fleet, in `clusters/`), renders them
into `out/` once, then times `gpustack check clusters -o out FILE` as pre-commit runs it (a new
process, start-up included) for:

    config     one cluster's config changed (checks that cluster)
    output     a file under out/<name>/ changed (checks that cluster)
    unrelated  a YAML file no cluster reads (checks none)

    python bench/precommit.py --clusters 1 1000 [--repeat 5]

The fastest of `--repeat` runs is reported: wall-clock seconds, the CPU seconds the process
used (user and system: what a busy machine's other work does not inflate), and the clusters
checked. Nothing is asserted: a shared machine's timings vary, and tests count renders instead.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fleet import generate

CASES = {
    "config": "clusters/gpu-{last:04}.yaml",
    "output": "out/gpu-{last:04}/kustomization.yaml",
    "unrelated": "ci/workflow.yaml",
}


def gpustack(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpustack", *args], capture_output=True, text=True, check=False
    )


def cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def measure(clusters: int, repeat: int) -> dict[str, tuple[float, float, str]]:
    results = {}
    with tempfile.TemporaryDirectory() as temporary:
        folder = Path(temporary)
        (folder / "clusters").mkdir()
        (folder / "ci").mkdir()
        (folder / "ci" / "workflow.yaml").write_text("on: push\n")
        generate(folder / "clusters", clusters)
        os.chdir(folder)
        rendered = gpustack("render", "clusters", "-o", "out", "-q")
        if rendered.returncode != 0:
            raise SystemExit(rendered.stderr)
        for case, template in CASES.items():
            changed = template.format(last=clusters - 1)
            best, best_cpu, said = float("inf"), 0.0, ""
            for _ in range(repeat):
                start, start_cpu = time.perf_counter(), cpu()
                result = gpustack("check", "clusters", "-o", "out", changed)
                seconds, used = time.perf_counter() - start, cpu() - start_cpu
                if result.returncode != 0:
                    raise SystemExit(f"{case}: {result.stdout}{result.stderr}")
                if seconds < best:
                    found = re.search(r"(\d+) cluster\(s\) checked", result.stderr)
                    best, best_cpu = seconds, used
                    said = found.group(1) if found else "?"
            results[case] = (best, best_cpu, said)
        os.chdir("/")
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clusters", type=int, nargs="+", default=[1, 1000])
    parser.add_argument("--repeat", type=int, default=5, help="repetitions; the fastest counts")
    arguments = parser.parse_args()
    print(f"CPUs: {len(os.sched_getaffinity(0))}")
    print(f"load average: {os.getloadavg()[0]:.1f}")
    print(f"{'fleet':>7} {'changed':>10} {'seconds':>8} {'CPU s':>8} {'checked':>8}")
    for clusters in arguments.clusters:
        for case, (seconds, used, checked) in measure(clusters, arguments.repeat).items():
            print(f"{clusters:>7} {case:>10} {seconds:>8.3f} {used:>8.3f} {checked:>8}")


if __name__ == "__main__":
    main()
