"""The validator's ready files: how the GPU DaemonSets wait for each other on a node.

NVIDIA's validator (components/validator.py) proves each GPU node step by step and leaves a ready
file per step in /run/nvidia/validations (a tmpfs: a reboot clears them); the driver's startup
probe writes its own there, and the Container Toolkit, the device plugin, GFD, the DCGM exporter
and the MIG manager wait for theirs in init containers run from the validator's image. Those init
containers, and the folder's names, are here, where every component may use them.

Facts from NVIDIA/gpu-operator v26.7.0: cmd/nvidia-validator/main.go (the ready files, the env
of each validation), assets/state-operator-validation/0500_daemonset.yaml and
assets/state-container-toolkit/0500_daemonset.yaml (the init containers).
"""

from __future__ import annotations

from typing import Any

from gpustack.build import pod
from gpustack.build.pod import HostPath
from gpustack.build.workload import driver_container_root, host_root
from gpustack.resolve.stack import Stack

# Where every step of a node's bring-up leaves its ready file (the host folder the operator's
# GPU DaemonSets mount, e.g. assets/state-device-plugin/0500_daemonset.yaml).
VALIDATIONS = "/run/nvidia/validations"
# The validator DaemonSet's name, which the validator reads back to give its workload pods the
# DaemonSet's tolerations (main.go runWorkload: "nvidia-operator-validator").
VALIDATOR = "nvidia-operator-validator"
# With pools on the DRA driver beside pools on the device plugin: the validator of the DRA
# pools' nodes, without the plugin step (no nvidia.com/gpu to find there). Its CUDA workload reads
# the tolerations of DaemonSet nvidia-operator-validator, which every mixed cluster has, by that
# name (gpu-operator cmd/nvidia-validator/main.go runWorkload, v26.7.0): the same as its own.
VALIDATOR_DRA = f"{VALIDATOR}-dra"

# deployments/gpu-operator/values.yaml `validator.repository`/`validator.image` (v26.7.0): one
# image for the operator and the validator since v25.10 (gpu-operator a4782da, "Consolidate
# operator and validator into one image"; docker/Dockerfile copies nvidia-validator, vectorAdd
# and validator/manifests into it).
IMAGE = "nvcr.io/nvidia/gpu-operator"
TOOLKIT_READY = f"{VALIDATIONS}/toolkit-ready"
# Written by the driver pod's startup probe once its driver is up (its module loaded, its daemons
# Ready, nvidia-smi answering), as gpu-operator's startup probe writes it
# (assets/state-driver/0400_configmap.yaml startup-probe.sh, v26.7.0), and removed as the
# driver pod starts to stop.
DRIVER_READY = f"{VALIDATIONS}/.driver-ctr-ready"
# main.go hostDevCharPath: where the host's /dev/char is mounted for the symlinks.
HOST_DEV_CHAR = "/host-dev-char"
VALIDATIONS_VOLUME = "run-nvidia-validations"


def image(stack: Stack) -> str:
    return f"{IMAGE}:{stack.config.validator.version}"


def host_folder_selinux(stack: Stack) -> dict[str, Any]:
    """On OpenShift, spc_t lets an unprivileged container use the host's /run/nvidia/validations,
    which SELinux denies container_t; SCC privileged admits it."""
    if not stack.facts.securityContextConstraints:
        return {}
    return {"seLinuxOptions": {"type": "spc_t"}}


def validations(*, read_only: bool = False) -> HostPath:
    """The host folder of the ready files, at the same path in the container."""
    return HostPath(
        VALIDATIONS_VOLUME, VALIDATIONS, VALIDATIONS, "DirectoryOrCreate", read_only=read_only
    )


def driver_validation(stack: Stack) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The `driver-validation` init container (the validator's first step, and the Container
    Toolkit's, assets/state-container-toolkit/0500_daemonset.yaml) with the volumes it mounts.

    Its pod's ServiceAccount needs a token and `list` on DaemonSets in the namespace: with no
    driver on the host it looks for a driver DaemonSet the operator owns before it waits for
    the driver container's root (main.go isDriverManagedByOperator; none here, so it waits for
    nvidia-smi in /run/nvidia/driver to run)."""
    security: dict[str, Any] = {"privileged": True, "runAsUser": 0}
    if stack.facts.securityContextConstraints:
        security["seLinuxOptions"] = {"level": "s0"}  # as upstream's on OpenShift
    volumes, mounts = pod.host_paths(
        [
            host_root(),
            driver_container_root(),
            validations(),
            HostPath("host-dev-char", "/dev/char", HOST_DEV_CHAR),
        ]
    )
    container = {
        "name": "driver-validation",
        "image": image(stack),
        "command": ["sh", "-c"],
        "args": [_after_driver_ready(stack, "nvidia-validator")],
        "env": [
            # Wait for the driver instead of failing (a driver container builds for minutes).
            pod.env("WITH_WAIT", "true"),
            pod.env("COMPONENT", "driver"),
            pod.field_env("OPERATOR_NAMESPACE", "metadata.namespace"),
        ],
        # Privileged: it chroots into the host to run its nvidia-smi, loads the kernel modules
        # and creates device nodes and the /dev/char symlinks on the host (createDevCharSymlinks:
        # WithLoadKernelModules, WithCreateDeviceNodes).
        "securityContext": security,
        "volumeMounts": mounts,
    }
    return container, volumes


def _after_driver_ready(stack: Stack, command: str) -> str:
    """`command`, run once a driver container gpustack deploys has written its ready file.

    NVIDIA's validator waits for that file itself only where the GPU Operator owns the driver
    DaemonSet (cmd/nvidia-validator/main.go validateDriverContainer, assertDriverContainerReady,
    v26.7.0); here it would run nvidia-smi in the driver root as soon as it answers. The file
    is there only between the startup probe of a driver pod whose daemons are Ready (on NVSwitch
    systems the fabric manager, without which CUDA calls fail) and the preStop hook of that pod:
    so no GPU DaemonSet starts on a driver whose daemons are not up yet, nor on one that is
    stopping (a driver pod being replaced puts the GPU DaemonSets back on its node before its
    driver has stopped). A node whose host has a driver of its own gets no driver pod
    (k8s-driver-manager labels it `pre-installed`, finding the host's nvidia-smi as it does,
    cmd/driver-manager/main.go isHostDriver, v0.12.0): there the host's driver is waited for."""
    if not stack.driver_container:
        return command
    return (
        f"until [ -f {DRIVER_READY} ] || chroot /host nvidia-smi > /dev/null 2>&1; "
        "do echo waiting for the driver container to be ready; sleep 5; done; "
        f"exec {command}"
    )


def after_toolkit_ready(stack: Stack, pod_spec: dict[str, Any]) -> dict[str, Any]:
    """`pod_spec` held until the validator has proven the node's driver and runtime
    (`toolkit-ready`) by a first init container, as the operator's device plugin, GFD, DCGM
    exporter and MIG manager DaemonSets are (their `toolkit-validation` init container);
    unchanged where the validator is not deployed."""
    if not stack.validator_enabled:
        return pod_spec
    wait = {
        "name": "toolkit-validation",
        "image": image(stack),
        "command": ["sh", "-c"],
        "args": [
            f"until [ -f {TOOLKIT_READY} ]; do echo waiting for nvidia container stack to be "
            "setup; sleep 5; done"
        ],
        # It only reads the host folder (upstream runs it privileged).
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
            **host_folder_selinux(stack),
        },
        "volumeMounts": [validations(read_only=True).mount()],
    }
    volumes = list(pod_spec.get("volumes", []))
    if all(volume["name"] != VALIDATIONS_VOLUME for volume in volumes):
        volumes.append(validations().volume())
    return {
        **pod_spec,
        "initContainers": [wait, *pod_spec.get("initContainers", [])],
        "volumes": volumes,
    }
