"""Fleet benchmark: generate N cluster configs in a temporary folder, then time discovery,
rendering (into files, as `gpustack render` writes them) and validation (schema and lint).

    python bench/fleet.py --clusters 1000 [--jobs N] [--repeat 3]

The configs share a base and vary profile, taints, sharing and GitOps tool, as a real fleet does.
Each stage runs in a fresh process state per repetition; the fastest repetition is reported
(seconds per stage and resources per second). Nothing is asserted.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import resource
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gpustack import tune_gc
from gpustack.build import pipeline
from gpustack.fleet import clusters as fleet
from gpustack.resolve import inventory

BASE = """\
apiVersion: gpustack.dev/v1alpha1
kind: GPUStack
dcgmExporter:
  monitorLabels: {release: kube-prometheus-stack}
"""
PROFILES = [("rke2", "1.31"), ("kubeadm", "1.31"), ("openshift", "1.33")]
GITOPS = [
    "",
    "gitops:\n  tool: argocd\n  argocd: {repoURL: https://git.example.com/fleet.git}\n",
    "gitops:\n  tool: flux\n  flux: {sourceRef: {name: flux-system}}\n",
]
SHARING = ["none", "time-slicing"]


def generate(folder: Path, clusters: int) -> None:
    (folder / "base.yaml").write_text(BASE)
    for index in range(clusters):
        profile, version = PROFILES[index % len(PROFILES)]
        (folder / f"gpu-{index:04}.yaml").write_text(
            "apiVersion: gpustack.dev/v1alpha1\nkind: GPUStack\nextends: base.yaml\n"
            f"metadata:\n  name: gpu-{index:04}\n"
            f'platform:\n  profile: {profile}\n  kubernetesVersion: "{version}"\n'
            f"nodes:\n  taints:\n  - {{key: nvidia.com/gpu, value: present, effect: NoSchedule}}\n"
            f"  - {{key: pool, value: pool-{index % 7}, effect: NoSchedule}}\n"
            f"devicePlugin:\n  sharing: {{strategy: {SHARING[index % 2]}}}\n"
            + GITOPS[(index // len(PROFILES)) % len(GITOPS)]
        )


def run(jobs: int | None) -> tuple[dict[str, float], int, int, int, float]:
    """One repetition: seconds per stage, clusters, resources, findings and peak memory (MiB)."""
    tune_gc()  # as the gpustack command does
    timings: dict[str, float] = {}
    start = time.perf_counter()
    configs = inventory.discover([Path(".")])
    timings["discover"] = time.perf_counter() - start
    start = time.perf_counter()
    renderings = fleet.render_all(configs, jobs=jobs)
    for rendering in renderings:
        pipeline.files(rendering)
    timings["render"] = time.perf_counter() - start
    start = time.perf_counter()
    findings = fleet.check_all(renderings, jobs=jobs)
    timings["validate"] = time.perf_counter() - start
    resources = sum(len(rendering.objects) for rendering in renderings)
    # Peak resident memory of this process (Linux reports kilobytes); workers are not counted.
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return timings, len(renderings), resources, sum(len(found) for found in findings), peak


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clusters", type=int, default=1000)
    parser.add_argument("--jobs", type=int, default=None, help="worker processes (default: none)")
    parser.add_argument("--repeat", type=int, default=3, help="repetitions; the fastest counts")
    arguments = parser.parse_args()
    with tempfile.TemporaryDirectory() as temporary:
        folder = Path(temporary)
        generate(folder, arguments.clusters)
        os.chdir(folder)
        runs = []
        for _ in range(arguments.repeat):
            # A fresh process per repetition, so no cache is warm from the one before.
            with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("fork")) as pool:
                runs.append(pool.submit(run, arguments.jobs).result())
    timings, clusters, resources, findings, peak = min(
        runs, key=lambda result: sum(result[0].values())
    )
    total = sum(timings.values())
    print(f"clusters: {clusters}, resources: {resources}, CPUs: {len(os.sched_getaffinity(0))}")
    for stage, seconds in timings.items():
        print(f"{stage:>9}: {seconds:7.3f} s")
    print(f"    total: {total:7.3f} s  ({resources / total:,.0f} resources/second)")
    print(f" findings: {findings}")
    print(f"   memory: {peak:7.0f} MiB peak (the rendering process)")


if __name__ == "__main__":
    main()
