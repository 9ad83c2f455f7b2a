"""gpu-resource-on-dra: a pod asks for `nvidia.com/gpu` where the GPUs are handed out by NVIDIA's
DRA driver and no device plugin advertises that resource: it stays Pending. With DRA a pod claims
a GPU through a ResourceClaim (a ResourceClaimTemplate of DeviceClass `gpu.nvidia.com`); the
`nvidia.com/gpu` limit is served only from a DeviceClass whose `extendedResourceName` names it,
which the API server keeps where DRAExtendedResource is on (KEP-5004: alpha and off in 1.34 and
1.35, on from 1.36; kubernetes-sigs/dra-driver-nvidia-gpu v0.4.1 demo/specs/extended-resources/
gpu-full.yaml). Such a DeviceClass among the objects answers the pod."""

from __future__ import annotations

from collections.abc import Iterator

from gpustack.findings import Finding
from gpustack.objects import describe
from gpustack.validation.lint._objects import (
    Objects,
    Rule,
    dra_gpu_plugins,
    finding,
    mapping,
    sequence,
)
from gpustack.validation.lint._pods import is_device_plugin

GPU_RESOURCE = "nvidia.com/gpu"


def check(objects: Objects) -> Iterator[Finding]:
    pods = objects.pods()
    if not any(dra_gpu_plugins(pod) for pod in pods) or any(is_device_plugin(p) for p in pods):
        return
    if any(
        mapping(device_class.get("spec")).get("extendedResourceName") == GPU_RESOURCE
        for device_class in objects.of_kind("DeviceClass")
    ):
        return
    for pod in pods:
        for key in ("initContainers", "containers"):
            for index, container in enumerate(map(mapping, sequence(pod.spec.get(key)))):
                resources = mapping(container.get("resources"))
                for section in ("limits", "requests"):
                    if GPU_RESOURCE not in mapping(resources.get(section)):
                        continue
                    yield finding(
                        RULE,
                        pod.owner,
                        f"{describe(pod.owner)} container {container.get('name')!r} requests "
                        f"{GPU_RESOURCE}, which nothing advertises where the DRA driver hands "
                        "out the GPUs: it stays Pending; claim a GPU instead (spec."
                        "resourceClaims naming a ResourceClaimTemplate of deviceClassName "
                        "gpu.nvidia.com, and the claim in the container's resources.claims)",
                        f"{pod.path}.{key}.{index}.resources.{section}",
                    )
                    break


RULE = Rule(
    "gpu-resource-on-dra",
    "error",
    "A pod requests `nvidia.com/gpu` where NVIDIA's DRA driver hands out the GPUs and no device "
    "plugin advertises that resource: the pod is never scheduled.",
    "Claim the GPU through a ResourceClaimTemplate of DeviceClass `gpu.nvidia.com` "
    "(`resourceClaims` and `resources.claims`), or, where the cluster runs DRAExtendedResource "
    "(on from Kubernetes 1.36), render the `gpu.nvidia.com` DeviceClass with "
    "`extendedResourceName: nvidia.com/gpu` (`platform.featureGates`).",
    check,
)
