"""dra-with-device-plugin: NVIDIA's DRA driver and a device plugin handing out the GPUs of the
same node. Each counts every GPU of the node as its own, so the scheduler admits pods to GPUs the
other has already given away. The DRA driver's chart refuses GPU allocation for this reason until
KEP-5004 (DRAExtendedResource) is GA (kubernetes-sigs/dra-driver-nvidia-gpu v0.4.1,
deployments/helm/dra-driver-nvidia-gpu/templates/validation.yaml)."""

from __future__ import annotations

from collections.abc import Iterator

from gpustack.findings import Finding
from gpustack.objects import describe
from gpustack.validation.lint._objects import Budget, Objects, Rule, dra_gpu_plugins, finding
from gpustack.validation.lint._pods import Placements, is_device_plugin, requirements


def check(objects: Objects) -> Iterator[Finding]:
    pods = objects.pods()
    dra = [pod for pod in pods if dra_gpu_plugins(pod)]
    if not dra:
        return
    index = Placements([requirements(pod) for pod in dra], Budget("GPU plugins' node placements"))
    for plugin in (pod for pod in pods if is_device_plugin(pod)):
        found = next(index.sharing(requirements(plugin)), None)
        if found is not None:
            kubelet_plugin = dra[found]
            yield finding(
                RULE,
                plugin.owner,
                f"{describe(plugin.owner)} advertises nvidia.com/gpu on nodes where "
                f"{describe(kubelet_plugin.owner)} publishes the same GPUs for DRA: both hand "
                "them out, so pods are admitted to GPUs already taken; keep one of them per "
                "node (gpustack: gpuAllocation dra turns the device plugin off; a pool's "
                "gpuAllocation keeps each off the other's pools)",
                f"{plugin.path}.affinity",
            )


RULE = Rule(
    "dra-with-device-plugin",
    "error",
    "A device plugin advertising `nvidia.com/gpu` and the DRA driver's GPU kubelet plugin may "
    "run on the same node: both hand out its GPUs, which over-admits them.",
    "Run one of them per node: remove the device plugin (`gpuAllocation: dra` does), or give "
    "the two disjoint node placement (a node pool's `gpuAllocation` does: `NotIn` the DRA pools' "
    "labels for the plugin, `In` for the kubelet plugin).",
    check,
)
