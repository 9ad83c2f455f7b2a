"""NVIDIA's validator: proves each GPU node, step by step, and leaves a ready file per step in
/run/nvidia/validations, where the other GPU DaemonSets wait for them.

Facts from NVIDIA/gpu-operator v26.7.0: assets/state-operator-validation/ (the DaemonSet, its
RBAC and SCC), cmd/nvidia-validator/main.go (what each validation does, its env and the ready
files), validator/manifests/ (the CUDA and plugin workload pods it creates) and
controllers/object_controls.go (TransformValidator, TransformValidatorComponent: the env the
operator adds, the plugin validation dropped without a device plugin, uid 0).

The init containers run in order, each a step of the node's bring-up:
- `driver-validation` waits until nvidia-smi runs, from the host's root or the driver
  container's /run/nvidia/driver, creates the /dev/char symlinks of the NVIDIA device nodes
  (without them a `systemctl daemon-reload` takes running pods' GPUs away under the systemd
  cgroup driver: NVIDIA/nvidia-container-toolkit#48) and writes `driver-ready`;
- `toolkit-validation` runs nvidia-smi in a container the nvidia runtime hands every GPU to:
  `toolkit-ready`, which the device plugin, GFD, the DCGM exporter and the MIG manager wait for
  (after a reboot: the driver rebuilt and the runtime's CDI spec regenerated in tmpfs);
- `cuda-validation` runs NVIDIA's vectorAdd pod on the node: `cuda-ready`;
- `plugin-validation` (with NVIDIA's device plugin) waits until the node advertises GPUs:
  `plugin-ready`.
/run is a tmpfs, so a reboot clears the files and every step runs again. The main container
only keeps the pod running and removes the files when the pod goes.
"""

from __future__ import annotations

from typing import Any

from gpustack.components import driver
from gpustack.config import DRIVER_CONTAINER_ROOT, Stack
from gpustack.decorate import mirrored
from gpustack.workload import (
    cluster_role_with_binding,
    daemonset,
    gpu_pod_spec,
    host_path_volume,
    place_by_allocation,
    role_with_binding,
    scc_rules,
    service_account,
)

# The operator DaemonSet's name, which the validator reads back to give its workload pods the
# DaemonSet's tolerations (main.go runWorkload: "nvidia-operator-validator").
NAME = "nvidia-operator-validator"
# With pools on the DRA driver beside pools on the device plugin: the validator of the DRA
# pools' nodes, without the plugin step (no nvidia.com/gpu to find there). Its CUDA workload reads
# the tolerations of DaemonSet nvidia-operator-validator, which every mixed cluster has, by that
# name (gpu-operator cmd/nvidia-validator/main.go runWorkload, v26.7.0): the same as its own.
DRA_NAME = f"{NAME}-dra"
COMPONENT = "operator-validator"
# deployments/gpu-operator/values.yaml `validator.repository`/`validator.image` (v26.7.0): one
# image for the operator and the validator since v25.10 (gpu-operator a4782da, "Consolidate
# operator and validator into one image"; docker/Dockerfile copies nvidia-validator, vectorAdd
# and validator/manifests into it).
IMAGE = "nvcr.io/nvidia/gpu-operator"
VALIDATIONS = driver.VALIDATIONS
TOOLKIT_READY = f"{VALIDATIONS}/toolkit-ready"
# main.go hostDevCharPath: where the host's /dev/char is mounted for the symlinks.
HOST_DEV_CHAR = "/host-dev-char"
VALIDATIONS_VOLUME = "run-nvidia-validations"
# values.yaml `validator.imagePullPolicy`, which the operator hands the workload pods.
PULL_POLICY = "IfNotPresent"


def image(stack: Stack) -> str:
    return f"{IMAGE}:{stack.config.validator.version}"


def _host_folder_selinux(stack: Stack) -> dict[str, Any]:
    """On OpenShift, spc_t lets an unprivileged container use the host's /run/nvidia/validations,
    which SELinux denies container_t; SCC privileged admits it."""
    if not stack.facts.securityContextConstraints:
        return {}
    return {"seLinuxOptions": {"type": "spc_t"}}


def _runs_as_root(stack: Stack) -> dict[str, Any]:
    """Validation steps that only call the API server or run nvidia-smi, and write their ready
    file: root (the folder is the kubelet's, root-owned 0755; the operator runs every validator
    container as uid 0, transformValidatorSecurityContext) and nothing more."""
    return {
        "runAsUser": 0,
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        **_host_folder_selinux(stack),
    }


def _field(path: str) -> dict[str, Any]:
    return {"valueFrom": {"fieldRef": {"fieldPath": path}}}


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
    container = {
        "name": "driver-validation",
        "image": image(stack),
        "command": ["sh", "-c"],
        "args": ["nvidia-validator"],
        "env": [
            # Wait for the driver instead of failing (a driver container builds for minutes).
            {"name": "WITH_WAIT", "value": "true"},
            {"name": "COMPONENT", "value": "driver"},
            {"name": "OPERATOR_NAMESPACE", **_field("metadata.namespace")},
        ],
        # Privileged: it chroots into the host to run its nvidia-smi, loads the kernel modules
        # and creates device nodes and the /dev/char symlinks on the host (createDevCharSymlinks:
        # WithLoadKernelModules, WithCreateDeviceNodes).
        "securityContext": security,
        "volumeMounts": [
            {
                "name": "host-root",
                "mountPath": "/host",
                "readOnly": True,
                "mountPropagation": "HostToContainer",
            },
            # HostToContainer: the driver container mounts its root there after this pod starts.
            {
                "name": "driver-install-dir",
                "mountPath": DRIVER_CONTAINER_ROOT,
                "mountPropagation": "HostToContainer",
            },
            {"name": VALIDATIONS_VOLUME, "mountPath": VALIDATIONS},
            {"name": "host-dev-char", "mountPath": HOST_DEV_CHAR},
        ],
    }
    volumes = [
        host_path_volume("host-root", "/"),
        host_path_volume("driver-install-dir", DRIVER_CONTAINER_ROOT, "DirectoryOrCreate"),
        host_path_volume(VALIDATIONS_VOLUME, VALIDATIONS, "DirectoryOrCreate"),
        host_path_volume("host-dev-char", "/dev/char"),
    ]
    return container, volumes


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
            **_host_folder_selinux(stack),
        },
        "volumeMounts": [{"name": VALIDATIONS_VOLUME, "mountPath": VALIDATIONS, "readOnly": True}],
    }
    volumes = list(pod_spec.get("volumes", []))
    if all(volume["name"] != VALIDATIONS_VOLUME for volume in volumes):
        volumes.append(host_path_volume(VALIDATIONS_VOLUME, VALIDATIONS, "DirectoryOrCreate"))
    return {
        **pod_spec,
        "initContainers": [wait, *pod_spec.get("initContainers", [])],
        "volumes": volumes,
    }


def build(stack: Stack) -> list[dict[str, Any]]:
    if not stack.validator_enabled:
        return []
    settings = stack.config.validator
    plugin = stack.config.devicePlugin.enabled
    workloads = settings.cudaWorkload or (plugin and settings.pluginWorkload)
    rules: list[dict[str, Any]] = [
        # Driver validation lists the driver DaemonSets (isDriverManagedByOperator); the CUDA and
        # plugin workloads read this DaemonSet for its tolerations (runWorkload).
        {
            "apiGroups": ["apps"],
            "resources": ["daemonsets"],
            "verbs": ["get", "list"] if workloads else ["list"],
        },
    ]
    if workloads:
        # runWorkload lists the node's previous workload pod, deletes it, creates the new one
        # and polls it (waitForPod) until it has succeeded; upstream's Role also grants watch,
        # update and patch, which the validator never uses.
        rules.append(
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["create", "get", "list", "delete"]}
        )
    # The workload pods run under this account: privileged (cuda-workload-validation.yaml), so
    # on OpenShift they need the SCC too.
    rules += scc_rules(stack)
    objects = [service_account(stack, NAME), *role_with_binding(stack, NAME, rules)]
    if plugin:
        # Plugin validation reads its node's GPU capacity (getNode); upstream's ClusterRole adds
        # list and watch on nodes and the operator's CRDs' finalizers (for owner references to
        # a ClusterPolicy, which does not exist here).
        objects += cluster_role_with_binding(
            stack, NAME, [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]}]
        )
    if plugin and stack.gpu_allocations == {"device-plugin", "dra"}:
        # The plugin step waits for nvidia.com/gpu, which DRA nodes never advertise: it runs
        # only where the device plugin does, and the DRA nodes get a validator without it.
        objects.append(_daemonset(stack, "device-plugin"))
        objects.append(_daemonset(stack, "dra"))
    else:
        objects.append(_daemonset(stack, None))
    return objects


def _workload_env(stack: Stack) -> list[dict[str, Any]]:
    """What the validator gives the workload pods it creates (TransformValidatorComponent): the
    image it runs from (mirrored as decorate mirrors the container's), pull policy and secrets,
    and the runtime class of GPU pods."""
    validator_image = image(stack)
    registry = stack.config.images.registry
    if registry:
        validator_image = mirrored(validator_image, registry)
    env = [
        {"name": "VALIDATOR_IMAGE", "value": validator_image},
        {"name": "VALIDATOR_IMAGE_PULL_POLICY", "value": PULL_POLICY},
    ]
    if stack.config.images.pullSecrets:
        env.append(
            {
                "name": "VALIDATOR_IMAGE_PULL_SECRETS",
                "value": ",".join(stack.config.images.pullSecrets),
            }
        )
    if stack.runtime_class_name:
        env.append({"name": "VALIDATOR_RUNTIME_CLASS", "value": stack.runtime_class_name})
    return env


def _validation(
    stack: Stack, component: str, env: list[dict[str, Any]], security: dict[str, Any]
) -> dict[str, Any]:
    return {
        "name": f"{component}-validation",
        "image": image(stack),
        "command": ["sh", "-c"],
        "args": ["nvidia-validator"],
        "env": [{"name": "COMPONENT", "value": component}, *env],
        "securityContext": security,
        "volumeMounts": [{"name": VALIDATIONS_VOLUME, "mountPath": VALIDATIONS}],
    }


def _daemonset(stack: Stack, allocation: str | None) -> dict[str, Any]:
    """The validator DaemonSet: on every GPU node (`allocation` None), or on the nodes whose
    GPUs the device plugin or the DRA driver hands out."""
    settings = stack.config.validator
    driver_container, volumes = driver_validation(stack)
    node_and_namespace = [
        {"name": "NODE_NAME", **_field("spec.nodeName")},
        {"name": "OPERATOR_NAMESPACE", **_field("metadata.namespace")},
    ]
    init_containers = [
        driver_container,
        _validation(
            stack,
            "toolkit",
            [
                # The runtime hands this container every GPU and the driver's nvidia-smi.
                {"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"},
                {"name": "WITH_WAIT", "value": "false"},
            ],
            _runs_as_root(stack),
        ),
        _validation(
            stack,
            "cuda",
            [
                {"name": "WITH_WAIT", "value": "false"},
                {"name": "WITH_WORKLOAD", "value": "true" if settings.cudaWorkload else "false"},
                *node_and_namespace,
                *_workload_env(stack),
            ],
            _runs_as_root(stack),
        ),
    ]
    if stack.config.devicePlugin.enabled and allocation != "dra":
        init_containers.append(
            _validation(
                stack,
                "plugin",
                [
                    {"name": "WITH_WAIT", "value": "false"},
                    {
                        "name": "WITH_WORKLOAD",
                        "value": "true" if settings.pluginWorkload else "false",
                    },
                    {"name": "MIG_STRATEGY", "value": stack.config.devicePlugin.migStrategy},
                    *node_and_namespace,
                    *_workload_env(stack),
                ],
                _runs_as_root(stack),
            )
        )
    pod_spec = gpu_pod_spec(stack)  # the toolkit validation needs the nvidia runtime
    if allocation is not None:
        pod_spec = place_by_allocation(stack, pod_spec, allocation)
    pod_spec.update(
        {
            "serviceAccountName": NAME,
            "initContainers": init_containers,
            "containers": [
                {
                    "name": NAME,
                    "image": image(stack),
                    "command": ["sh", "-c"],
                    "args": [
                        "echo all validations are successful; while true; do sleep 86400; done"
                    ],
                    # A pod that goes (a node drained, the DaemonSet updated) takes its ready
                    # files with it, so nothing starts on the strength of a stale one.
                    "lifecycle": {
                        "preStop": {
                            "exec": {"command": ["sh", "-c", f"rm -f {VALIDATIONS}/*-ready"]}
                        }
                    },
                    "securityContext": _runs_as_root(stack),
                    "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}},
                    "volumeMounts": [{"name": VALIDATIONS_VOLUME, "mountPath": VALIDATIONS}],
                }
            ],
            "volumes": volumes,
        }
    )
    name = DRA_NAME if allocation == "dra" else NAME
    return daemonset(stack, name, pod_spec, component=COMPONENT)
