"""duplicate-device-plugin: two device plugins advertising `nvidia.com/gpu` on one node make
allocation nondeterministic (GKE's own plugin next to NVIDIA's: NVIDIA/k8s-device-plugin PR #1998)."""

from __future__ import annotations

from collections.abc import Iterator

from gpustack.findings import Finding
from gpustack.objects import describe, identity
from gpustack.validation.lint._objects import Budget, Objects, Rule, finding
from gpustack.validation.lint._pods import Placements, is_device_plugin, requirements


def check(objects: Objects) -> Iterator[Finding]:
    """Each plugin that may share a node with an earlier one is reported once, naming the first
    such. Placements are looked up in an index (Placements), so the work grows with the plugins,
    not with their pairs."""
    # The same object listed twice (two files, two renders) is one plugin.
    plugins = list(
        {identity(pod.owner): pod for pod in objects.pods() if is_device_plugin(pod)}.values()
    )
    placements = [requirements(pod) for pod in plugins]
    index = Placements(placements, Budget("device plugins' node placements"))
    for number, pod in enumerate(plugins):
        earlier = next(index.sharing(placements[number], below=number), None)
        if earlier is not None:
            yield finding(
                RULE,
                pod.owner,
                f"{describe(pod.owner)} and {describe(plugins[earlier].owner)} both advertise "
                "nvidia.com/gpu and may run on the same nodes; keep one plugin per node "
                "(disjoint node selectors, or on GKE label the pool "
                "gke-no-default-nvidia-gpu-device-plugin=true for NVIDIA's plugin)",
                f"{pod.path}.affinity",
            )


RULE = Rule(
    "duplicate-device-plugin",
    "error",
    "Two device plugins that advertise `nvidia.com/gpu` (NVIDIA's, GKE's) can land on the same "
    "node: their node selectors and required affinities do not exclude each other.",
    "Deploy one plugin, or give them disjoint node placement (e.g. `In [a]` against `NotIn [a]`).",
    check,
)
