"""taint-not-tolerated: a GPU workload that does not tolerate the GPU nodes' taints never runs
there (dcgm-exporter #731: zero pods scheduled)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from gpustack.findings import Finding
from gpustack.objects import describe
from gpustack.validation.lint._objects import (
    GPU_RESOURCE,
    Objects,
    Pod,
    Rule,
    finding,
    is_gpu_pod,
    is_nfd_worker,
    mapping,
    sequence,
)

# GPU nodes are tainted `nvidia.com/gpu` (GKE taints GPU pools `nvidia.com/gpu=present:NoSchedule`,
# Google Cloud docs, "Run GPUs in GKE Standard node pools"; NVIDIA's manifests tolerate the key
# with Exists). The value varies between
# clusters, so a workload must tolerate the key whatever its value.
GPU_TAINT: dict[str, Any] = {"key": GPU_RESOURCE, "effect": "NoSchedule"}


def tolerates(toleration: dict[str, Any], taint: dict[str, Any]) -> bool:
    """Kubernetes' toleration matching (core/v1 Toleration.ToleratesTaint). A taint without a
    `value` stands for any value, which only an `Exists` toleration covers."""
    effect = toleration.get("effect")
    if effect and effect != taint.get("effect"):
        return False
    key = toleration.get("key")
    operator = toleration.get("operator") or "Equal"
    if not key:
        return operator == "Exists"
    if key != taint.get("key"):
        return False
    if operator == "Exists":
        return True
    return "value" in taint and str(toleration.get("value") or "") == str(taint["value"] or "")


def _tolerations(pod: Pod, objects: Objects) -> list[dict[str, Any]]:
    # A RuntimeClass's scheduling.tolerations are merged into every pod that uses it.
    tolerations = [mapping(t) for t in sequence(pod.spec.get("tolerations"))]
    runtime_class = pod.spec.get("runtimeClassName")
    known = objects.runtime_class(runtime_class) if isinstance(runtime_class, str) else None
    if known:
        tolerations += [
            mapping(t) for t in sequence(mapping(known.get("scheduling")).get("tolerations"))
        ]
    return tolerations


def _spell(taint: dict[str, Any]) -> str:
    value = f"={taint['value']}" if taint.get("value") is not None else ""
    return f"{taint['key']}{value}:{taint['effect']}"


def check(objects: Objects) -> Iterator[Finding]:
    required = [GPU_TAINT, *objects.taints]
    for pod in objects.pods():
        # The NFD worker must run on GPU nodes too: it is what labels them as GPU nodes.
        if not (is_gpu_pod(pod, objects) or is_nfd_worker(pod)):
            continue
        tolerations = _tolerations(pod, objects)
        missing = [t for t in required if not any(tolerates(tol, t) for tol in tolerations)]
        if not missing:
            continue
        needed = ", ".join(_spell(taint) for taint in missing)
        yield finding(
            RULE,
            pod.owner,
            f"{describe(pod.owner)} runs on GPU nodes but does not tolerate their taint(s) "
            f"{needed}, so it is never scheduled there; add tolerations for them "
            f"(for nvidia.com/gpu: key nvidia.com/gpu, operator Exists)",
            f"{pod.path}.tolerations",
        )


RULE = Rule(
    "taint-not-tolerated",
    "error",
    "A GPU workload (or the NFD worker) does not tolerate the GPU nodes' taints: "
    "`nvidia.com/gpu` with any value and every taint in the config's `nodes.taints`.",
    "Add a toleration per taint; for `nvidia.com/gpu` use `operator: Exists` so any value matches.",
    check,
)
