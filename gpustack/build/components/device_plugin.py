"""NVIDIA's device plugin: advertises `nvidia.com/gpu` to the kubelet on every GPU node.

Facts from NVIDIA/k8s-device-plugin v0.20.0: deployments/static/nvidia-device-plugin.yml and the
helm chart (deployments/helm/nvidia-device-plugin). The plugin's own settings go into a config file
in its `version: v1` format, mounted from a ConfigMap; a content hash on the pod template (added
in `decorate`) rolls the pods when it changes.
"""

from __future__ import annotations

from typing import Any

from gpustack import emit
from gpustack.build import pod, ready_files
from gpustack.build.decorate import ignore
from gpustack.build.device_plugin_config import (
    CONFIG_DIR,
    CONFIG_MANAGER_RULES,
    CONFIG_MAP,
    DRIVER_ROOT_MOUNT,
    NAME,
    image,
    mig_strategies,
    named_configs,
    plugin_config,
    pool_config_name,
    pools_annotation,
    sharing_strategies,
    with_config_manager,
)
from gpustack.build.pod import HostPath, host_path_volume
from gpustack.build.workload import (
    cluster_role_with_binding,
    config_map,
    daemonset,
    gpu_pod_spec,
    host_driver,
    host_driver_env,
    kubelet_socket_selinux,
    place_by_allocation,
    role_with_binding,
    scc_rules,
    service_account,
)
from gpustack.resolve.stack import Stack

MPS_DAEMON = "nvidia-device-plugin-mps-control-daemon"
# helm values.yaml `mps.root`; the plugin and the MPS control daemon share it through the host.
MPS_ROOT = "/run/nvidia/mps"
# Where both binaries expect that folder inside their containers: the daemon creates its pipes,
# logs and `.ready` there and the plugin health-checks it there (cmd/mps-control-daemon/mps/root.go
# `ContainerRoot`); MPS_ROOT only tells the plugin the host path to mount into GPU pods.
MPS_MOUNT = "/mps"


def build(stack: Stack) -> list[dict[str, Any]]:
    plugin = stack.config.devicePlugin
    if not plugin.enabled:
        return []
    mps = "mps" in sharing_strategies(stack)
    if stack.pools:
        configs = named_configs(stack)
        config = config_map(
            stack, CONFIG_MAP, {name: emit.dump(each) for name, each in configs.items()}
        )
        config["metadata"]["annotations"] = pools_annotation(
            stack, {pool.name: pool_config_name(pool) for pool in stack.pools}
        )
    else:
        config = config_map(stack, CONFIG_MAP, {"config.yaml": emit.dump(plugin_config(stack))})
    objects: list[dict[str, Any]] = [
        # The plugin and the MPS daemon talk only to the kubelet, never to the API server: the
        # static manifest runs them with no RBAC at all, and the helm chart's ClusterRole (nodes
        # get/list/watch, templates/role.yml) exists only for its config-manager sidecar, which
        # reads the node's config label, and for GFD. So the account carries no token and, on
        # OpenShift, only the right to use SCC privileged; with node pools the config manager
        # alone gets a token (config_manager_access).
        service_account(stack, NAME, calls_api=False),
        config,
        _plugin_daemonset(stack, mps),
    ]
    rules = scc_rules(stack)
    if rules:
        objects += role_with_binding(stack, NAME, rules)
    if stack.pools:
        objects += cluster_role_with_binding(stack, NAME, CONFIG_MANAGER_RULES)
    if mps:
        objects.append(_mps_control_daemonset(stack))
    return objects


def _plugin_security(stack: Stack) -> dict[str, Any]:
    if stack.facts.driver.hostMount is not None:
        # No nvidia runtime injects /dev/nvidia* here (GKE), so NVML cannot open the GPUs from an
        # unprivileged container and the plugin exits at start (failOnInitError); GKE's own
        # plugin runs privileged for the same reason (container-engine-accelerators
        # device-plugin.yaml).
        return {"privileged": True}
    security: dict[str, Any] = {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        # The plugin serves its socket in device-plugins/ and registers at kubelet.sock there.
        **kubelet_socket_selinux(stack),
    }
    if mig_strategies(stack) != {"none"}:
        # Watching MIG devices needs SYS_ADMIN (helm _helpers.tpl, securityContext logic).
        security["capabilities"]["add"] = ["SYS_ADMIN"]
    return security


def _plugin_volumes_and_mounts(
    stack: Stack, mps: bool
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    kubelet_plugins = f"{stack.facts.kubeletRoot}/device-plugins"
    driver_volumes, driver_mounts = pod.host_paths(host_driver(stack))
    plugins = HostPath("device-plugins", kubelet_plugins, kubelet_plugins, "Directory")
    cdi = HostPath("cdi-root", "/var/run/cdi", "/var/run/cdi", "DirectoryOrCreate")
    volumes = [
        plugins.volume(),
        pod.config_map_volume("config", CONFIG_MAP),
        cdi.volume(),
        *driver_volumes,
    ]
    mounts = [
        plugins.mount(),
        pod.mount("config", CONFIG_DIR, read_only=True),
        cdi.mount(),
        *driver_mounts,
    ]
    paths = []
    if stack.uses_cdi:
        paths.append(
            HostPath(
                "driver-root",
                stack.driver_root,
                DRIVER_ROOT_MOUNT,
                "Directory",
                read_only=True,
                propagation="HostToContainer",
            )
        )
    if mps:
        paths += [
            HostPath("mps-root", MPS_ROOT, MPS_MOUNT, "DirectoryOrCreate"),
            HostPath("mps-shm", f"{MPS_ROOT}/shm", "/dev/shm", "DirectoryOrCreate"),
        ]
    more_volumes, more_mounts = pod.host_paths(paths)
    return [*volumes, *more_volumes], [*mounts, *more_mounts]


def _plugin_daemonset(stack: Stack, mps: bool) -> dict[str, Any]:
    env = [
        # The plugin's `--config-file` flag (cmd/nvidia-device-plugin/main.go, env CONFIG_FILE).
        pod.env("CONFIG_FILE", f"{CONFIG_DIR}/config.yaml"),
        # helm templates/daemonset-device-plugin.yml sets these for the plugin container.
        pod.env("MPS_ROOT", MPS_ROOT),
        pod.env("NVIDIA_VISIBLE_DEVICES", "all"),
        pod.env("NVIDIA_DRIVER_CAPABILITIES", "compute,utility"),
        *host_driver_env(stack),
    ]
    if mig_strategies(stack) != {"none"}:
        env.append(pod.env("NVIDIA_MIG_MONITOR_DEVICES", "all"))
    security = _plugin_security(stack)
    volumes, mounts = _plugin_volumes_and_mounts(stack, mps)
    # Never where the DRA driver hands out the GPUs (pools with the other gpuAllocation).
    pod_spec = place_by_allocation(stack, gpu_pod_spec(stack), "device-plugin")
    pod_spec.update(
        {
            "serviceAccountName": NAME,
            "containers": [
                {
                    "name": NAME,
                    "image": image(stack),
                    "command": ["nvidia-device-plugin"],
                    "env": env,
                    "securityContext": security,
                    "resources": {"requests": {"cpu": "10m", "memory": "64Mi"}},
                    "volumeMounts": mounts,
                }
            ],
            "volumes": volumes,
        }
    )
    if stack.pools:
        pod_spec = with_config_manager(stack, pod_spec, NAME, NAME, security)
    workload = daemonset(
        stack, NAME, ready_files.after_toolkit_ready(stack, pod_spec), component="device-plugin"
    )
    if stack.uses_cdi and not stack.toolkit_enabled:
        # CDI chosen with the host's own toolkit: the nodes' runtime turns CDI on (kubeadm's
        # node/99-nvidia.toml does), which no manifest here shows.
        ignore(workload, "cdi-without-toolkit")
    return workload


def _mps_control_daemonset(stack: Stack) -> dict[str, Any]:
    """The MPS control daemon the plugin talks to when sharing with MPS (helm
    templates/daemonset-mps-control-daemon.yml): privileged and in the host PID namespace, since it
    starts nvidia-cuda-mps-control for every process on the GPU."""
    pod_spec = place_by_allocation(stack, gpu_pod_spec(stack), "device-plugin")
    # GFD labels nodes whose GPUs support MPS (helm chart nodeSelector).
    pod_spec["nodeSelector"] = {"nvidia.com/mps.capable": "true"}
    pod_spec.update(
        {
            "serviceAccountName": NAME,
            "hostPID": True,
            "initContainers": [
                {
                    # Mounts a tmpfs at <mps root>/shm on the host, the /dev/shm that the daemon
                    # and its clients share (cmd/mps-control-daemon/mount/mount-shm.go).
                    # Privileged: mounting, and propagating the mount back to the host
                    # (Bidirectional), needs it.
                    "name": "mps-control-daemon-mounts",
                    "image": image(stack),
                    "command": ["mps-control-daemon", "mount-shm"],
                    "securityContext": {"privileged": True},
                    "volumeMounts": [
                        pod.mount("mps-root", MPS_MOUNT, propagation="Bidirectional"),
                    ],
                }
            ],
            "containers": [
                {
                    "name": "mps-control-daemon",
                    "image": image(stack),
                    "command": ["mps-control-daemon"],
                    "env": [
                        {"name": "CONFIG_FILE", "value": f"{CONFIG_DIR}/config.yaml"},
                        pod.field_env("NODE_NAME", "spec.nodeName"),
                        pod.env("NVIDIA_VISIBLE_DEVICES", "all"),
                        pod.env("NVIDIA_DRIVER_CAPABILITIES", "compute,utility"),
                    ],
                    # Privileged: it must start the MPS server for all GPUs on the node.
                    "securityContext": {"privileged": True},
                    "volumeMounts": [
                        pod.mount("config", CONFIG_DIR, read_only=True),
                        pod.mount("mps-root", MPS_MOUNT),
                        pod.mount("mps-shm", "/dev/shm"),
                    ],
                }
            ],
            "volumes": [
                {"name": "config", "configMap": {"name": CONFIG_MAP}},
                host_path_volume("mps-root", MPS_ROOT, "DirectoryOrCreate"),
                host_path_volume("mps-shm", f"{MPS_ROOT}/shm", "DirectoryOrCreate"),
            ],
        }
    )
    if stack.pools:
        # The daemon runs on nodes whose config shares GPUs with MPS (GFD's mps.capable label)
        # and restarts on SIGHUP with the config the node's label names
        # (cmd/mps-control-daemon/main.go).
        pod_spec = with_config_manager(
            stack, pod_spec, "mps-control-daemon", "mps-control-daemon", {"privileged": True}
        )
    return daemonset(
        stack,
        MPS_DAEMON,
        ready_files.after_toolkit_ready(stack, pod_spec),
        component="mps-control-daemon",
    )
