"""validation-not-awaited: a GPU DaemonSet that starts without waiting for NVIDIA's validator on
nodes where the validator runs. After a reboot the runtime's config is already on disk while the
driver is not back yet and the CDI spec (in tmpfs) not regenerated: such a pod starts too early,
fails ("could not load NVML", unresolvable CDI devices) and crash-loops into minutes of backoff.

Facts from NVIDIA/gpu-operator v26.7.0: the validator's toolkit validation writes
/run/nvidia/validations/toolkit-ready (cmd/nvidia-validator/main.go toolkitStatusFile), and the
device plugin, GFD, DCGM exporter and MIG manager DaemonSets (assets/state-device-plugin,
gpu-feature-discovery, state-dcgm-exporter, state-mig-manager) wait for it in their
`toolkit-validation` init container.
"""

from __future__ import annotations

from collections.abc import Iterator

from gpustack.findings import Finding
from gpustack.objects import describe
from gpustack.validation.lint._objects import (
    DRA_IMAGE,
    Budget,
    Objects,
    Pod,
    Rule,
    dra_gpu_plugins,
    finding,
    is_dra_controller,
    sequence,
)
from gpustack.validation.lint._pods import Placements, requirements

TOOLKIT_READY = "/run/nvidia/validations/toolkit-ready"
# The images of the GPU clients that wait upstream: the device plugin's (also GFD and the MPS
# daemon), the DCGM exporter's and the MIG manager's.
_CLIENT_IMAGES = ("k8s-device-plugin", "dcgm-exporter", "k8s-mig-manager")


def _writes_toolkit_ready(pod: Pod) -> bool:
    return any(
        "nvidia-validator" in pod.command_words(container)
        and pod.env(container).get("COMPONENT") == "toolkit"
        for container in pod.containers
    )


def _is_client(pod: Pod) -> bool:
    if dra_gpu_plugins(pod) or (
        DRA_IMAGE.search(" ".join(pod.images)) and not is_dra_controller(pod)
    ):
        return True  # the DRA driver's kubelet plugin, which gpustack holds back the same way
    return any(
        image in str(container.get("image", ""))
        for container in sequence(pod.spec.get("containers"))
        if isinstance(container, dict)
        for image in _CLIENT_IMAGES
    )


def _waits(pod: Pod) -> bool:
    return any(
        any(TOOLKIT_READY in word for word in pod.command_words(container))
        for container in sequence(pod.spec.get("initContainers"))
        if isinstance(container, dict)
    )


def check(objects: Objects) -> Iterator[Finding]:
    validators = [pod for pod in objects.pods() if _writes_toolkit_ready(pod)]
    if not validators:
        return
    index = Placements(
        [requirements(pod) for pod in validators], Budget("GPU workloads' node placements")
    )
    for pod in objects.pods():
        if not _is_client(pod) or _waits(pod):
            continue
        found = next(index.sharing(requirements(pod)), None)
        if found is not None:
            validator = validators[found]
            yield finding(
                RULE,
                pod.owner,
                f"{describe(pod.owner)} runs on nodes that {describe(validator.owner)} "
                f"validates but does not wait for its {TOOLKIT_READY}: after a reboot it "
                "starts before the driver and the runtime are back",
                f"{pod.path}.initContainers",
            )


RULE = Rule(
    "validation-not-awaited",
    "error",
    "A GPU DaemonSet (device plugin, GFD, DCGM exporter, MIG manager, DRA kubelet plugin) runs "
    "on nodes NVIDIA's "
    "validator validates, without an init container that waits for the validator's "
    "`toolkit-ready` file.",
    "Give it the GPU Operator's `toolkit-validation` init container (gpustack renders it "
    "while `validator.enabled`): `until [ -f /run/nvidia/validations/toolkit-ready ]; do sleep "
    "5; done`, with the host's /run/nvidia/validations mounted.",
    check,
)
