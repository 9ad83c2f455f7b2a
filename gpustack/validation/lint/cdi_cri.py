"""cdi-cri-unsupported: a device plugin that hands out GPUs only through the CRI's CDI field
(`deviceListStrategy: cdi-cri`) on a Kubernetes that does not pass that field to the runtime:
the kubelet drops it, and GPU pods start without their GPUs.

Facts: the device plugin API's `CDIDevices` field came with KEP-4009 (feature gate
DevicePluginCDIDevices): alpha, off by default, in Kubernetes 1.28, beta and on from 1.29, GA in
1.31. `cdi-annotations` works on every version with a CDI-enabled runtime, which is why the GPU
Operator sets both (NVIDIA/gpu-operator controllers/object_controls.go, v26.7.0:
DEVICE_LIST_STRATEGY=cdi-annotations,cdi-cri). k8s-device-plugin v0.20.0 README,
DEVICE_LIST_STRATEGY.
"""

from __future__ import annotations

from collections.abc import Iterator

from gpustack.findings import Finding
from gpustack.objects import describe
from gpustack.validation.lint._objects import Objects, Rule, finding
from gpustack.validation.lint._pods import cdi_strategies

# The first Kubernetes minor whose kubelet passes CDIDevices on by default.
FIRST = (1, 29)


def _minor(version: str) -> tuple[int, ...] | None:
    try:
        return tuple(int(part) for part in version.split(".")[:2])
    except ValueError:
        return None


def check(objects: Objects) -> Iterator[Finding]:
    target = _minor(objects.kubernetes_version or "")
    if target is None or target >= FIRST:
        return
    for pod in objects.pods():
        if cdi_strategies(objects, pod) == {"cdi-cri"}:
            yield finding(
                RULE,
                pod.owner,
                f"{describe(pod.owner)} hands out GPUs only through the CRI's CDI field "
                f"(deviceListStrategy cdi-cri), which Kubernetes {objects.kubernetes_version} "
                "does not pass to the runtime (from 1.29): GPU pods would start without GPUs; "
                "add cdi-annotations to the plugin's deviceListStrategy (gpustack: "
                "devicePlugin.deviceListStrategy auto, which sends both, or cdi-annotations)",
                f"{pod.path}.containers",
            )


RULE = Rule(
    "cdi-cri-unsupported",
    "error",
    "The device plugin's only `deviceListStrategy` is `cdi-cri`, but the target Kubernetes is "
    "older than 1.29, whose kubelet is the first to pass CDI devices to the runtime by default.",
    "Add `cdi-annotations` to the plugin's `deviceListStrategy` (gpustack: "
    "`devicePlugin.deviceListStrategy: auto`, which sends both, or `cdi-annotations`), or target "
    "Kubernetes 1.29 or later; on 1.28 with the `DevicePluginCDIDevices` feature gate on, "
    "suppress the rule.",
    check,
)
