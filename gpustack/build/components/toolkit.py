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

from gpustack.build import pod, ready_files
from gpustack.build.pod import HostPath
from gpustack.build.workload import (
    CDI_ROOT,
    TOOLKIT_INSTALL_DIR,
    container_path,
    daemonset,
    gpu_pod_spec,
    host_root,
    mounted_driver_root,
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


def _runtime_env(stack: Stack) -> tuple[list[dict[str, Any]], list[HostPath]]:
    """transformForRuntime: the runtime's config, drop-in and socket, mounted from the host, and
    how the runtime is restarted to load them.

    The installer adds the drop-in's folder to the top-level config's `imports` itself, naming it
    by RUNTIME_DROP_IN_CONFIG_HOST_PATH (nvidia-container-toolkit pkg/config/engine/containerd/
    config_drop_in.go ensureImports, v1.20.0), so the config's folder is mounted writable."""
    facts = stack.facts.runtime.toolkit
    assert facts is not None  # toolkit_enabled implies it
    containerd = stack.facts.runtime.engine == "containerd"
    runtime = "containerd" if containerd else "crio"
    env = [pod.env("RUNTIME", runtime)]
    if containerd:
        env.append(pod.env("CONTAINERD_RUNTIME_CLASS", stack.config.runtimeClass.handler))
    paths: list[HostPath] = []
    if facts.configFile:
        target = CONFIG_DIR + posixpath.basename(facts.configFile)
        env += [
            pod.env("RUNTIME_CONFIG", target),
            pod.env("CONTAINERD_CONFIG" if containerd else "CRIO_CONFIG", target),
        ]
        folder = posixpath.dirname(facts.configFile)
        paths.append(HostPath(f"{runtime}-config", folder, CONFIG_DIR, "DirectoryOrCreate"))
    if facts.dropInConfigFile:
        env += [
            pod.env(
                "RUNTIME_DROP_IN_CONFIG", DROP_IN_DIR + posixpath.basename(facts.dropInConfigFile)
            ),
            pod.env("RUNTIME_DROP_IN_CONFIG_HOST_PATH", facts.dropInConfigFile),
        ]
        folder = posixpath.dirname(facts.dropInConfigFile)
        paths.append(
            HostPath(f"{runtime}-drop-in-config", folder, DROP_IN_DIR, "DirectoryOrCreate")
        )
    if facts.socket:
        target = SOCKET_DIR + posixpath.basename(facts.socket)
        env += [pod.env("RUNTIME_SOCKET", target), pod.env("CONTAINERD_SOCKET", target)]
        paths.append(HostPath(f"{runtime}-socket", posixpath.dirname(facts.socket), SOCKET_DIR))
    if facts.restartMode:
        # How the installer makes the runtime load the config it wrote (nvidia-ctk-installer
        # container/container.go Restart: signal sends SIGHUP to the process behind the socket,
        # which needs this pod's host PID namespace; systemd runs `chroot /host systemctl
        # restart`; v1.20.0).
        env.append(pod.env("RUNTIME_RESTART_MODE", facts.restartMode))
    env += [pod.env(name, value) for name, value in sorted(facts.env.items())]
    return env, paths


def _env(stack: Stack) -> list[dict[str, Any]]:
    """What the installer installs, where, and for which runtime."""
    driver_root, dev_root = stack.driver_root, stack.dev_root
    # Without a RuntimeClass on GPU pods, nvidia must be the runtime's default; with one, runc
    # stays the default (transformToolkitCtrForCDI; NVIDIA_RUNTIME_SET_AS_DEFAULT).
    default_runtime = "false" if stack.runtime_class_enabled else "true"
    env = [
        pod.env("ROOT", TOOLKIT_INSTALL_DIR),
        pod.env("NVIDIA_CONTAINER_RUNTIME_MODES_CDI_DEFAULT_KIND", "management.nvidia.com/gpu"),
        pod.env("NVIDIA_VISIBLE_DEVICES", "void"),
        pod.env("TOOLKIT_PID_FILE", "/run/nvidia/toolkit/toolkit.pid"),
        # Where the driver and the device nodes are on the host and in this container (the
        # installer's --driver-root, --driver-root-ctr-path, --dev-root, --dev-root-ctr-path).
        pod.env("NVIDIA_DRIVER_ROOT", driver_root),
        pod.env("DRIVER_ROOT_CTR_PATH", container_path(driver_root)),
        pod.env("NVIDIA_DEV_ROOT", dev_root),
        pod.env("DEV_ROOT_CTR_PATH", container_path(dev_root)),
        pod.env("NVIDIA_RUNTIME_SET_AS_DEFAULT", default_runtime),
    ]
    if stack.uses_cdi:
        env += [
            pod.env("CDI_ENABLED", "true"),
            pod.env("NVIDIA_CONTAINER_RUNTIME_MODE", "cdi"),
            pod.env("CRIO_CONFIG_MODE", "config"),
        ]
    elif "volume-mounts" in stack.device_list_strategy:
        # The runtime reads the device list from the plugin's volume mounts only when told to
        # (k8s-device-plugin README, "deviceListStrategy"; toolkit installer flag of that name).
        env.append(pod.env("ACCEPT_NVIDIA_VISIBLE_DEVICES_AS_VOLUME_MOUNTS", "true"))
    if not stack.uses_cdi and stack.facts.runtime.engine == "cri-o":
        # Without CDI the operator installs CRI-O's OCI prestart hook instead of a handler.
        env.append(pod.env("CRIO_CONFIG_MODE", "hook"))
    return env


def _host_paths(stack: Stack) -> list[HostPath]:
    """Where the installer writes on the host (its binaries, the runtime's config, the CDI
    specs) and what it reads (the host's root, the driver's)."""
    paths = [
        HostPath("toolkit-root", "/run/nvidia/toolkit", "/run/nvidia/toolkit", "DirectoryOrCreate"),
        ready_files.validations(),
        HostPath(
            "toolkit-install-dir", TOOLKIT_INSTALL_DIR, TOOLKIT_INSTALL_DIR, "DirectoryOrCreate"
        ),
        host_root(),
        HostPath("cdi-root", CDI_ROOT, CDI_ROOT, "DirectoryOrCreate"),
        *mounted_driver_root(stack),
    ]
    if stack.facts.runtime.engine == "cri-o":
        paths.append(HostPath("crio-hooks", CRIO_HOOKS, "/usr/share/containers/oci/hooks.d"))
    return paths


def _daemonset(stack: Stack) -> dict[str, Any]:
    runtime_env, runtime_paths = _runtime_env(stack)
    volumes, mounts = pod.host_paths([*_host_paths(stack), *runtime_paths])
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
                    "env": [*_env(stack), *runtime_env],
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
