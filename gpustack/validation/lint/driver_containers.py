"""driver-container-conflict: a driver container on nodes that already have a driver. Two driver
DaemonSets on one node (two NVIDIA driver containers, or one beside Google's installer) fight
over the kernel modules; a driver container beside components that look for a host driver (a
driver root of `/`) means either the host already has one, which the container cannot replace
while it is loaded, or those components look in the wrong place and find no libraries.

Facts from NVIDIA/gpu-operator v26.7.0 (the driver container installs into /run/nvidia/driver,
controllers/object_controls.go DefaultDriverInstallDir; one driver pod per node, assets/
state-driver anti-affinity on app.kubernetes.io/component nvidia-driver) and
GoogleCloudPlatform/container-engine-accelerators nvidia-driver-installer.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from gpustack.findings import Finding
from gpustack.objects import describe, identity
from gpustack.validation.lint._objects import (
    Budget,
    Objects,
    Pod,
    Rule,
    containers_running,
    finding,
    mapping,
)
from gpustack.validation.lint._pods import (
    TOOLKIT_IMAGE,
    Placements,
    mounted_configs,
    parse,
    requirements,
)

# NVIDIA's driver image (nvcr.io/nvidia/driver) and Google's installers.
_DRIVER_IMAGE = re.compile(r"(^|/)nvidia/driver[:@]|(cos|gke)-nvidia-installer[:@]")
HOST_ROOT = "/"


def is_driver(pod: Pod) -> bool:
    return any(_DRIVER_IMAGE.search(image) for image in pod.images)


def _host_driver_users(objects: Objects) -> Iterator[tuple[Pod, str]]:
    """Pods configured for a driver on the host (driver root `/`), with the setting that says so."""
    for pod in objects.pods():
        for container in containers_running(pod, "nvidia-device-plugin"):
            for _, key, text in mounted_configs(objects, pod, container):
                config, _ = parse(text)
                root = mapping(mapping(config).get("flags")).get("nvidiaDriverRoot")
                if root == HOST_ROOT:
                    yield pod, f"its config {key!r} sets nvidiaDriverRoot '/'"
        for container in pod.containers:
            toolkit = TOOLKIT_IMAGE in str(container.get("image", ""))
            if toolkit and pod.env(container).get("NVIDIA_DRIVER_ROOT") == HOST_ROOT:
                yield pod, "NVIDIA_DRIVER_ROOT is '/'"


def check(objects: Objects) -> Iterator[Finding]:
    """Each driver that may share a node with an earlier one is reported once, naming the first
    such, and once for the first pod on its nodes that expects a host driver: placements are
    looked up in an index (Placements), so thousands of drivers (many canary pools times many
    RHCOS builds) cost about as many lookups, not their pairs."""
    # The same object listed twice (two files, two renders) is still one driver.
    drivers = list({identity(pod.owner): pod for pod in objects.pods() if is_driver(pod)}.values())
    placements = [requirements(pod) for pod in drivers]
    budget = Budget("driver pods' node placements")
    index = Placements(placements, budget)
    for number, pod in enumerate(drivers):
        earlier = next(index.sharing(placements[number], below=number), None)
        if earlier is not None:
            yield finding(
                RULE,
                pod.owner,
                f"{describe(pod.owner)} and {describe(drivers[earlier].owner)} both install the "
                "NVIDIA driver and may run on the same nodes; keep one driver per node",
                f"{pod.path}.affinity",
            )
    users = list(
        {
            (identity(user.owner), reason): (user, reason)
            for user, reason in _host_driver_users(objects)
        }.values()
    )
    if not users:
        return
    host = Placements([requirements(user) for user, _ in users], budget)
    for number, pod in enumerate(drivers):
        found = next(host.sharing(placements[number]), None)
        if found is not None:
            user, reason = users[found]
            yield finding(
                RULE,
                pod.owner,
                f"{describe(pod.owner)} installs the driver into /run/nvidia/driver, but "
                f"{describe(user.owner)} looks for a driver on the host ({reason}); if the "
                "nodes have a driver, drop the driver container (gpustack: driver.mode "
                "preinstalled), else point it at /run/nvidia/driver",
                f"{pod.path}.containers",
            )


RULE = Rule(
    "driver-container-conflict",
    "error",
    "A driver container (NVIDIA's driver image, or Google's installer) may run on nodes that "
    "another driver DaemonSet also targets, or where the device plugin or Container Toolkit "
    "expects a host driver (driver root `/`).",
    "Keep one driver per node: drop the driver container where the host has a driver "
    "(`driver.mode: preinstalled`), give driver DaemonSets disjoint placement, or point the "
    "components at `/run/nvidia/driver`.",
    check,
)
