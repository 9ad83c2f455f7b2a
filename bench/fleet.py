"""Fleet benchmark: generate N cluster configs in a temporary folder, then time discovery,
rendering (into files, as `gpustack render` writes them) and schema validation.

    python bench/fleet.py --clusters 1000 [--jobs N]

The configs share a base and vary profile, taints, sharing and GitOps tool, as a real fleet does.
Prints seconds per stage and resources per second; nothing is asserted.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gpustack import fleet, render  # noqa: E402

BASE = """\
apiVersion: gpustack.dev/v1alpha1
kind: GPUStack
dcgmExporter:
  monitorLabels: {release: kube-prometheus-stack}
"""
PROFILES = [("rke2", "1.31"), ("kubeadm", "1.31"), ("openshift", "1.29")]
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
            f"platform:\n  profile: {profile}\n  kubernetesVersion: \"{version}\"\n"
            f"nodes:\n  taints:\n  - {{key: nvidia.com/gpu, value: present, effect: NoSchedule}}\n"
            f"  - {{key: pool, value: pool-{index % 7}, effect: NoSchedule}}\n"
            f"devicePlugin:\n  sharing: {{strategy: {SHARING[index % 2]}}}\n"
            + GITOPS[(index // len(PROFILES)) % len(GITOPS)]
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clusters", type=int, default=1000)
    parser.add_argument("--jobs", type=int, default=None, help="worker processes (default: auto)")
    arguments = parser.parse_args()
    with tempfile.TemporaryDirectory() as temporary:
        folder = Path(temporary)
        generate(folder, arguments.clusters)
        os.chdir(folder)
        timings: dict[str, float] = {}
        start = time.perf_counter()
        configs = fleet.discover([Path(".")])
        timings["discover"] = time.perf_counter() - start
        start = time.perf_counter()
        renderings = fleet.render_all(configs, jobs=arguments.jobs)
        for rendering in renderings:
            render.files(rendering)
        timings["render"] = time.perf_counter() - start
        start = time.perf_counter()
        findings = fleet.validate_all(renderings, jobs=arguments.jobs)
        timings["validate"] = time.perf_counter() - start
    resources = sum(len(rendering.objects) for rendering in renderings)
    total = sum(timings.values())
    print(f"clusters: {len(renderings)}, resources: {resources}, CPUs: {len(os.sched_getaffinity(0))}")
    for stage, seconds in timings.items():
        print(f"{stage:>9}: {seconds:7.3f} s")
    print(f"    total: {total:7.3f} s  ({resources / total:,.0f} resources/second)")
    print(f" findings: {sum(len(f) for f in findings)}")


if __name__ == "__main__":
    main()
