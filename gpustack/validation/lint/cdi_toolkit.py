"""cdi-without-toolkit: a device plugin that hands out GPUs as CDI devices needs a container
runtime with CDI turned on and specs for the nvidia runtime's own devices; without them GPU pods
fail to start ("unresolvable CDI devices"). The NVIDIA Container Toolkit DaemonSet does both
(gpu-operator controllers/object_controls.go transformToolkitCtrForCDI: CDI_ENABLED=true).

Facts from NVIDIA/k8s-device-plugin v0.20.0 docs/cdi.md (prerequisites: a CDI-enabled runtime
and the nvidia runtime installed) and api/config/v1/flags.go (deviceListStrategy, a string or a
list; env DEVICE_LIST_STRATEGY).
"""

from __future__ import annotations

from collections.abc import Iterator

from gpustack.findings import Finding
from gpustack.objects import describe
from gpustack.validation.lint._objects import (
    Objects,
    Rule,
    finding,
)
from gpustack.validation.lint._pods import TOOLKIT_IMAGE, cdi_strategies


def toolkit_enables_cdi(objects: Objects) -> bool:
    return any(
        TOOLKIT_IMAGE in str(container.get("image", ""))
        and pod.env(container).get("CDI_ENABLED") == "true"
        for pod in objects.pods()
        for container in pod.containers
    )


def check(objects: Objects) -> Iterator[Finding]:
    if toolkit_enables_cdi(objects):
        return
    for pod in objects.pods():
        cdi = sorted(s for s in cdi_strategies(objects, pod) if s.startswith("cdi"))
        if cdi:
            yield finding(
                RULE,
                pod.owner,
                f"{describe(pod.owner)} hands out GPUs as CDI devices (deviceListStrategy "
                f"{', '.join(cdi)}) but no NVIDIA Container Toolkit DaemonSet among these "
                "manifests turns CDI on in the container runtime; deploy it (gpustack: "
                "toolkit.enabled), or make sure the nodes' runtime has CDI enabled and the "
                "toolkit installed, or use deviceListStrategy envvar",
                f"{pod.path}.containers",
            )


RULE = Rule(
    "cdi-without-toolkit",
    "error",
    "The device plugin's `deviceListStrategy` is a CDI one (`cdi-cri`, `cdi-annotations`) but no "
    "NVIDIA Container Toolkit DaemonSet with `CDI_ENABLED=true` is among the manifests.",
    "Deploy the toolkit (`toolkit.enabled`), or enable CDI in the nodes' runtime yourself, or use "
    "`deviceListStrategy: envvar`.",
    check,
)
