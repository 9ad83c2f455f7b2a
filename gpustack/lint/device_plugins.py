"""duplicate-device-plugin: two device plugins advertising `nvidia.com/gpu` on one node make
allocation nondeterministic (GKE's own plugin next to NVIDIA's: NVIDIA/k8s-device-plugin PR #1998)."""

from __future__ import annotations

from collections.abc import Iterator

from gpustack.findings import Finding
from gpustack.lint._objects import Objects, Pod, Rule, finding
from gpustack.lint._pods import is_device_plugin, may_share_a_node, requirements
from gpustack.objects import describe, identity

Placement = tuple[tuple[tuple[str, str, tuple[str, ...]], ...], ...]


def _placement(pod: Pod) -> Placement:
    """The pod's node placement in a canonical form: equal forms place pods alike."""
    return tuple(
        tuple(sorted((key, op, tuple(sorted(values))) for key, (op, values) in alternative.items()))
        for alternative in requirements(pod)
    )


def check(objects: Objects) -> Iterator[Finding]:
    """Each plugin that may share a node with an earlier one is reported once, naming the first
    such. Plugins are compared by distinct placement (a fleet's many copies of one DaemonSet
    place alike), so the work grows with the plugins, not with their pairs."""
    seen: set[tuple[str, str, str, str]] = set()
    representatives: dict[Placement, Pod] = {}
    shares: dict[tuple[Placement, Placement], bool] = {}
    for pod in (pod for pod in objects.pods() if is_device_plugin(pod)):
        if identity(pod.owner) in seen:
            continue  # the same object listed twice (two files, two renders) is one plugin
        seen.add(identity(pod.owner))
        placement = _placement(pod)
        for other, earlier in representatives.items():
            pair = (other, placement)
            if pair not in shares:
                shares[pair] = may_share_a_node(earlier, pod)
            if shares[pair]:
                yield finding(
                    RULE,
                    pod.owner,
                    f"{describe(pod.owner)} and {describe(earlier.owner)} both advertise "
                    "nvidia.com/gpu and may run on the same nodes; keep one plugin per node "
                    "(disjoint node selectors, or on GKE label the pool "
                    "gke-no-default-nvidia-gpu-device-plugin=true for NVIDIA's plugin)",
                    f"{pod.path}.affinity",
                )
                break
        representatives.setdefault(placement, pod)


RULE = Rule(
    "duplicate-device-plugin",
    "error",
    "Two device plugins that advertise `nvidia.com/gpu` (NVIDIA's, GKE's) can land on the same "
    "node: their node selectors and required affinities do not exclude each other.",
    "Deploy one plugin, or give them disjoint node placement (e.g. `In [a]` against `NotIn [a]`).",
    check,
)
