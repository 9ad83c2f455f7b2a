"""NVIDIA's MIG manager: partitions each GPU node's GPUs as its `nvidia.com/mig.config` label says.

Facts from NVIDIA/gpu-operator assets/state-mig-manager (v26.7.0: DaemonSet, RBAC, the
default-gpu-clients ConfigMap, TransformMIGManager in controllers/object_controls.go) and
NVIDIA/mig-parted v0.15.0 (cmd/nvidia-mig-manager/main.go, pkg/mig/reconfigure/reconfigure.go).

The manager watches its node's `nvidia.com/mig.config` label, applies that config from the
mig-parted file mounted here, and reports progress in `nvidia.com/mig.config.state` (pending,
rebooting, success, failed). Before it touches the GPUs it stops their Kubernetes clients by
setting `nvidia.com/gpu.deploy.<component>=paused-for-mig-change` on the node, waits until no
pod labelled `app=<component>` is left on the node in its namespace, and sets the labels back to
`true` afterwards. With the GPU Operator the operand DaemonSets select on those labels; here
`workload.select_on_deploy_labels` gives gpustack's own GPU DaemonSets the same selectors and
`app` labels.
"""

from __future__ import annotations

from typing import Any

from gpustack import emit
from gpustack.build import device_plugin_config, pod, ready_files, workload
from gpustack.build.pod import HostPath
from gpustack.build.workload import (
    cluster_role_with_binding,
    config_map,
    daemonset,
    deploy_labeller,
    gpu_node_affinity,
    gpu_pod_spec,
    role_with_binding,
    scc_rules,
    service_account,
)
from gpustack.resolve.stack import Stack

NAME = "nvidia-mig-manager"
CONFIG_MAP = "nvidia-mig-manager-config"
GPU_CLIENTS_CONFIG_MAP = "nvidia-mig-manager-gpu-clients"
CONFIG_DIR = "/mig-parted-config"
GPU_CLIENTS_DIR = "/gpu-clients"
# GFD labels GPUs that can be partitioned (the GPU Operator runs the manager only there).
MIG_CAPABLE_LABEL = "nvidia.com/mig.capable"

# Host services that hold the GPUs and must stop across a MIG change on nodes whose driver is on
# the host (gpu-operator assets/state-mig-manager/0410_configmap.yaml): NVSM, the peer-memory
# module's service, and host DCGM and its exporter.
HOST_GPU_CLIENTS = (
    "nvsm.service",
    "nvsm-mqtt.service",
    "nvsm-core.service",
    "nvsm-api-gateway.service",
    "nvsm-notifier.service",
    "nv_peer_mem.service",
    "nvidia-dcgm.service",
    "dcgm.service",
    "dcgm-exporter.service",
)


def image(stack: Stack) -> str:
    # gpu-operator values.yaml migManager.repository and .image.
    return f"nvcr.io/nvidia/cloud-native/k8s-mig-manager:{stack.config.migManager.version}"


def mig_parted_config(stack: Stack) -> dict[str, Any]:
    return {"version": "v1", "mig-configs": stack.mig_configs}


def build(stack: Stack) -> list[dict[str, Any]]:
    if not stack.mig_manager_enabled:
        return []
    layouts = config_map(stack, CONFIG_MAP, {"config.yaml": emit.dump(mig_parted_config(stack))})
    if stack.pools:
        # Which layout each pool's nodes register with, for lint (gpustack.validation.lint.pool_configs):
        # every one must be a config of this file.
        layouts["metadata"]["annotations"] = device_plugin_config.pools_annotation(
            stack, {pool.name: stack.config.pool_settings(pool).mig_config for pool in stack.pools}
        )
    objects = [
        service_account(stack, NAME),
        layouts,
        config_map(
            stack,
            GPU_CLIENTS_CONFIG_MAP,
            {
                "clients.yaml": emit.dump(
                    {"version": "v1", "systemd-services": list(HOST_GPU_CLIENTS)}
                )
            },
        ),
        # It watches and labels its own node, and lists the pods on it in every namespace
        # (waitForPodsWithNodeSelector); the operator's extra rights serve its own features.
        *cluster_role_with_binding(
            stack,
            NAME,
            [
                {
                    "apiGroups": [""],
                    "resources": ["nodes"],
                    "verbs": ["get", "list", "watch", "patch"],
                },
                {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]},
            ],
        ),
    ]
    rules = scc_rules(stack)
    if rules:
        objects += role_with_binding(stack, NAME, rules)
    objects.append(_daemonset(stack))
    return objects


def _env(stack: Stack) -> list[dict[str, Any]]:
    """What the manager applies, to which GPU clients, and where it finds the driver."""
    host_driver = stack.driver_mode == "preinstalled"
    env = [
        pod.field_env("NODE_NAME", "spec.nodeName"),
        pod.field_env("POD_NAME", "metadata.name"),
        pod.field_env("POD_NAMESPACE", "metadata.namespace"),
        # With CONFIG_FILE set the manager applies this file instead of generating one.
        pod.env("CONFIG_FILE", f"{CONFIG_DIR}/config.yaml"),
        pod.env("GPU_CLIENTS_FILE", f"{GPU_CLIENTS_DIR}/clients.yaml"),
        # The GPU clients it stops (device plugin, GFD, DCGM exporter) run in this namespace.
        pod.field_env("DEFAULT_GPU_CLIENTS_NAMESPACE", "metadata.namespace"),
        # As the operator's entrypoint: host services hold the GPUs only when the driver is the
        # host's (IS_HOST_DRIVER); a containerised driver takes its clients down itself.
        pod.env("WITH_SHUTDOWN_HOST_GPU_CLIENTS", pod.flag(host_driver)),
        pod.env("WITH_REBOOT", pod.flag(stack.config.migManager.withReboot)),
        # "" leaves the kubelet running (reconfigure.go skips an empty service name).
        pod.env("HOST_KUBELET_SYSTEMD_SERVICE", stack.facts.kubeletSystemdService or ""),
        # Where the driver and the device nodes are on the host and in this container, as the
        # operator's validator hands them over (driver-ready file, sourced by the entrypoint);
        # k8s-mig-manager v0.15.0 defaults both to /run/nvidia/driver (cmd/nvidia-mig-manager).
        pod.env("NVIDIA_DRIVER_ROOT", stack.driver_root),
        pod.env("DRIVER_ROOT_CTR_PATH", workload.container_path(stack.driver_root)),
        pod.env("NVIDIA_DEV_ROOT", stack.dev_root),
        pod.env("DEV_ROOT_CTR_PATH", workload.container_path(stack.dev_root)),
    ]
    if stack.uses_cdi:
        # With CDI the runtime hands out devices from the specs in /var/run/cdi: after a MIG
        # change the manager runs nvidia-smi in the driver root (it creates the nvidia-cap
        # device nodes) and regenerates the management spec (pkg/mig/reconfigure
        # runNvidiaSMI, handleCDI); without it the spec keeps the old MIG devices.
        env += [
            pod.env("CDI_ENABLED", "true"),
            # Without gpustack's toolkit the hook is the host package's.
            pod.env(
                "NVIDIA_CDI_HOOK_PATH",
                workload.CDI_HOOK if stack.toolkit_enabled else workload.HOST_CDI_HOOK,
            ),
        ]
    return env


def _volumes_and_mounts(stack: Stack) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The host's /sys and root (it stops host services and reboots the node through `chroot
    /host`), its two configs, the driver root and, with CDI, the specs it regenerates."""
    host_volumes, host_mounts = pod.host_paths(
        [
            HostPath("host-sys", "/sys", "/sys", "Directory"),
            workload.host_root(read_only=False, kind="Directory"),
        ]
    )
    cdi = [HostPath("cdi-root", workload.CDI_ROOT, workload.CDI_ROOT, "DirectoryOrCreate")]
    driver_volumes, driver_mounts = pod.host_paths(
        [*workload.mounted_driver_root(stack), *(cdi if stack.uses_cdi else [])]
    )
    volumes = [
        *host_volumes,
        pod.config_map_volume("gpu-clients", GPU_CLIENTS_CONFIG_MAP),
        pod.config_map_volume("mig-parted-config", CONFIG_MAP),
        *driver_volumes,
    ]
    mounts = [
        *host_mounts,
        pod.mount("gpu-clients", GPU_CLIENTS_DIR, read_only=True),
        pod.mount("mig-parted-config", CONFIG_DIR, read_only=True),
        *driver_mounts,
    ]
    return volumes, mounts


def _daemonset(stack: Stack) -> dict[str, Any]:
    volumes, mounts = _volumes_and_mounts(stack)
    pod_spec = gpu_pod_spec(stack)
    if stack.config.gfd.enabled:
        pod_spec["affinity"] = gpu_node_affinity(
            stack, [{"key": MIG_CAPABLE_LABEL, "operator": "In", "values": ["true"]}]
        )
    pod_spec.update(
        {
            "serviceAccountName": NAME,
            # As upstream: host PID and IPC to find and stop the processes using the GPUs.
            "hostPID": True,
            "hostIPC": True,
            "containers": [
                {
                    "name": NAME,
                    "image": image(stack),
                    "command": ["nvidia-mig-manager"],
                    "env": _env(stack),
                    # Privileged: it switches MIG mode and creates GPU and compute instances
                    # through the driver, stops host services and reboots the node through
                    # the host's root filesystem (chroot /host).
                    "securityContext": {"privileged": True},
                    "volumeMounts": mounts,
                }
            ],
            "volumes": volumes,
        }
    )
    if not stack.driver_container:
        # No driver pod starts the node's deploy labels, which the manager pauses only from "true"
        # (its own account's token reaches the API server).
        pod_spec["initContainers"] = [deploy_labeller(stack, [])]
    return daemonset(
        stack, NAME, ready_files.after_toolkit_ready(stack, pod_spec), component="mig-manager"
    )
