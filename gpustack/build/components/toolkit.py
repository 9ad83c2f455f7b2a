"""The NVIDIA Container Toolkit DaemonSet: installs the nvidia runtime on each GPU node, points it
at the driver, writes the container runtime's drop-in (`nvidia` handler, CDI) and generates the
CDI specs of the node's GPUs.

Facts from NVIDIA/gpu-operator v26.7.0: assets/state-container-toolkit/0500_daemonset.yaml and
controllers/object_controls.go (TransformToolkit, transformForRuntime, transformToolkitCtrForCDI:
env names, the /runtime/config-dir/, /runtime/config-dir.d/ and /runtime/sock-dir/ mounts). The
operator reads the driver's and device nodes' roots from the `driver-ready` file its driver
validation writes; gpustack sets them from the driver mode (`Stack.driver_root`, `Stack.dev_root`),
which are the roots that file names.
Where the runtime's files are is profile data (`facts.runtime.toolkit`).
"""

from __future__ import annotations

import posixpath
from typing import Any

from gpustack.build import ready_files
from gpustack.build.pod import host_path_volume
from gpustack.build.workload import (
    CDI_ROOT,
    DRIVER_ROOT_MOUNT,
    HOST_ROOT,
    TOOLKIT_INSTALL_DIR,
    container_path,
    daemonset,
    gpu_pod_spec,
    role_with_binding,
    scc_rules,
    service_account,
)
from gpustack.resolve.stack import Stack

NAME = "nvidia-container-toolkit-daemonset"
ACCOUNT = "nvidia-container-toolkit"
CONTAINER = "nvidia-container-toolkit-ctr"
# gpu-operator values.yaml `toolkit.repository`/`toolkit.image`, `toolkit.installDir`.
IMAGE = "nvcr.io/nvidia/k8s/container-toolkit"
# object_controls.go DefaultRuntimeConfigTargetDir, DefaultRuntimeDropInConfigTargetDir,
# DefaultRuntimeSocketTargetDir.
CONFIG_DIR = "/runtime/config-dir/"
DROP_IN_DIR = "/runtime/config-dir.d/"
SOCKET_DIR = "/runtime/sock-dir/"
# gpu-operator's toolkit DaemonSet mounts CRI-O's hook folder on OpenShift at this host path.
CRIO_HOOKS = "/run/containers/oci/hooks.d"


def image(stack: Stack) -> str:
    return f"{IMAGE}:{stack.config.toolkit.version}"


def build(stack: Stack) -> list[dict[str, Any]]:
    if not stack.toolkit_enabled:
        return []
    # The installer never calls the API server; its driver validation lists the driver
    # DaemonSets, so the account gets a token (state-container-toolkit/0200_role.yaml: list).
    objects = [
        service_account(stack, ACCOUNT),
        *role_with_binding(
            stack,
            ACCOUNT,
            [
                {"apiGroups": ["apps"], "resources": ["daemonsets"], "verbs": ["list"]},
                *scc_rules(stack),
            ],
        ),
    ]
    objects.append(_daemonset(stack))
    return objects


def _runtime_env(
    stack: Stack,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """transformForRuntime: the runtime's config, drop-in and socket, mounted from the host, and
    how the runtime is restarted to load them.

    The installer adds the drop-in's folder to the top-level config's `imports` itself, naming it
    by RUNTIME_DROP_IN_CONFIG_HOST_PATH (nvidia-container-toolkit pkg/config/engine/containerd/
    config_drop_in.go ensureImports, v1.20.0), so the config's folder is mounted writable."""
    facts = stack.facts.runtime.toolkit
    assert facts is not None  # toolkit_enabled implies it
    containerd = stack.facts.runtime.engine == "containerd"
    runtime = "containerd" if containerd else "crio"
    env: list[dict[str, Any]] = [{"name": "RUNTIME", "value": runtime}]
    if containerd:
        env.append({"name": "CONTAINERD_RUNTIME_CLASS", "value": stack.config.runtimeClass.handler})
    mounts: list[dict[str, Any]] = []
    volumes: list[dict[str, Any]] = []
    if facts.configFile:
        target = CONFIG_DIR + posixpath.basename(facts.configFile)
        env += [
            {"name": "RUNTIME_CONFIG", "value": target},
            {"name": "CONTAINERD_CONFIG" if containerd else "CRIO_CONFIG", "value": target},
        ]
        mounts.append({"name": f"{runtime}-config", "mountPath": CONFIG_DIR})
        volumes.append(
            host_path_volume(
                f"{runtime}-config", posixpath.dirname(facts.configFile), "DirectoryOrCreate"
            )
        )
    if facts.dropInConfigFile:
        env += [
            {
                "name": "RUNTIME_DROP_IN_CONFIG",
                "value": DROP_IN_DIR + posixpath.basename(facts.dropInConfigFile),
            },
            {"name": "RUNTIME_DROP_IN_CONFIG_HOST_PATH", "value": facts.dropInConfigFile},
        ]
        mounts.append({"name": f"{runtime}-drop-in-config", "mountPath": DROP_IN_DIR})
        volumes.append(
            host_path_volume(
                f"{runtime}-drop-in-config",
                posixpath.dirname(facts.dropInConfigFile),
                "DirectoryOrCreate",
            )
        )
    if facts.socket:
        target = SOCKET_DIR + posixpath.basename(facts.socket)
        env += [
            {"name": "RUNTIME_SOCKET", "value": target},
            {"name": "CONTAINERD_SOCKET", "value": target},
        ]
        mounts.append({"name": f"{runtime}-socket", "mountPath": SOCKET_DIR})
        volumes.append(host_path_volume(f"{runtime}-socket", posixpath.dirname(facts.socket)))
    if facts.restartMode:
        # How the installer makes the runtime load the config it wrote (nvidia-ctk-installer
        # container/container.go Restart: signal sends SIGHUP to the process behind the socket,
        # which needs this pod's host PID namespace; systemd runs `chroot /host systemctl
        # restart`; v1.20.0).
        env.append({"name": "RUNTIME_RESTART_MODE", "value": facts.restartMode})
    env += [{"name": name, "value": value} for name, value in sorted(facts.env.items())]
    return env, mounts, volumes


def _daemonset(stack: Stack) -> dict[str, Any]:
    driver_root, dev_root = stack.driver_root, stack.dev_root
    # Without a RuntimeClass on GPU pods, nvidia must be the runtime's default; with one, runc
    # stays the default (transformToolkitCtrForCDI; NVIDIA_RUNTIME_SET_AS_DEFAULT).
    default_runtime = "false" if stack.runtime_class_enabled else "true"
    env: list[dict[str, Any]] = [
        {"name": "ROOT", "value": TOOLKIT_INSTALL_DIR},
        {
            "name": "NVIDIA_CONTAINER_RUNTIME_MODES_CDI_DEFAULT_KIND",
            "value": "management.nvidia.com/gpu",
        },
        {"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"},
        {"name": "TOOLKIT_PID_FILE", "value": "/run/nvidia/toolkit/toolkit.pid"},
        # Where the driver and the device nodes are on the host and in this container (the
        # installer's --driver-root, --driver-root-ctr-path, --dev-root, --dev-root-ctr-path).
        {"name": "NVIDIA_DRIVER_ROOT", "value": driver_root},
        {"name": "DRIVER_ROOT_CTR_PATH", "value": container_path(driver_root)},
        {"name": "NVIDIA_DEV_ROOT", "value": dev_root},
        {"name": "DEV_ROOT_CTR_PATH", "value": container_path(dev_root)},
        {"name": "NVIDIA_RUNTIME_SET_AS_DEFAULT", "value": default_runtime},
    ]
    if stack.uses_cdi:
        env += [
            {"name": "CDI_ENABLED", "value": "true"},
            {"name": "NVIDIA_CONTAINER_RUNTIME_MODE", "value": "cdi"},
            {"name": "CRIO_CONFIG_MODE", "value": "config"},
        ]
    elif "volume-mounts" in stack.device_list_strategy:
        # The runtime reads the device list from the plugin's volume mounts only when told to
        # (k8s-device-plugin README, "deviceListStrategy"; toolkit installer flag of that name).
        env.append({"name": "ACCEPT_NVIDIA_VISIBLE_DEVICES_AS_VOLUME_MOUNTS", "value": "true"})
    if not stack.uses_cdi and stack.facts.runtime.engine == "cri-o":
        # Without CDI the operator installs CRI-O's OCI prestart hook instead of a handler.
        env.append({"name": "CRIO_CONFIG_MODE", "value": "hook"})
    runtime_env, runtime_mounts, runtime_volumes = _runtime_env(stack)
    env += runtime_env
    mounts: list[dict[str, Any]] = [
        {"name": "toolkit-root", "mountPath": "/run/nvidia/toolkit"},
        {"name": "run-nvidia-validations", "mountPath": ready_files.VALIDATIONS},
        {"name": "toolkit-install-dir", "mountPath": TOOLKIT_INSTALL_DIR},
        {
            "name": "host-root",
            "mountPath": HOST_ROOT,
            "readOnly": True,
            "mountPropagation": "HostToContainer",
        },
        {"name": "cdi-root", "mountPath": CDI_ROOT},
    ]
    volumes: list[dict[str, Any]] = [
        host_path_volume("toolkit-root", "/run/nvidia/toolkit", "DirectoryOrCreate"),
        host_path_volume("run-nvidia-validations", ready_files.VALIDATIONS, "DirectoryOrCreate"),
        host_path_volume("toolkit-install-dir", TOOLKIT_INSTALL_DIR, "DirectoryOrCreate"),
        host_path_volume("host-root", "/"),
        host_path_volume("cdi-root", CDI_ROOT, "DirectoryOrCreate"),
    ]
    if driver_root != "/":
        # HostToContainer: the driver container mounts its root there after this pod starts.
        mounts.append(
            {
                "name": "driver-install-dir",
                "mountPath": DRIVER_ROOT_MOUNT,
                "mountPropagation": "HostToContainer",
            }
        )
        volumes.append(host_path_volume("driver-install-dir", driver_root, "DirectoryOrCreate"))
    if stack.facts.runtime.engine == "cri-o":
        mounts.append({"name": "crio-hooks", "mountPath": "/usr/share/containers/oci/hooks.d"})
        volumes.append(host_path_volume("crio-hooks", CRIO_HOOKS))
    mounts += runtime_mounts
    volumes += runtime_volumes
    pod_spec = gpu_pod_spec(stack, runtime_class=False)  # it creates the nvidia runtime
    pod_spec.update(
        {
            "serviceAccountName": ACCOUNT,
            # It signals the container runtime on the host to reload its config.
            "hostPID": True,
            "containers": [
                {
                    "name": CONTAINER,
                    "image": image(stack),
                    # The image's installer (gpu-operator toolkit entrypoint ConfigMap: `exec
                    # nvidia-toolkit`).
                    "command": ["nvidia-toolkit"],
                    "env": env,
                    # Privileged: it writes the host's runtime config and binaries, generates CDI
                    # specs from the device nodes and signals the runtime (upstream runs it so).
                    "securityContext": {"privileged": True},
                    "volumeMounts": mounts,
                }
            ],
            "volumes": volumes,
        }
    )
    # Configure the runtime only once the driver runs, and leave the /dev/char symlinks and the
    # driver-ready file behind, as upstream's toolkit DaemonSet does with the validator's driver
    # validation as its init container.
    validation, validation_volumes = ready_files.driver_validation(stack)
    pod_spec["initContainers"] = [validation]
    named = {volume["name"] for volume in volumes}
    volumes += [volume for volume in validation_volumes if volume["name"] not in named]
    return daemonset(stack, NAME, pod_spec, component="container-toolkit")
