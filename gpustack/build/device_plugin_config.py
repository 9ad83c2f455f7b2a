"""NVIDIA's device plugin's configuration, which GFD, the MIG manager and the node files share
with the plugin: its config file (`version: v1`, one per node pool), the config manager that
links a node's file by its `nvidia.com/device-plugin.config` label, and the plugin's name, image
and CDI hook.

Facts from NVIDIA/k8s-device-plugin v0.20.0: deployments/static/nvidia-device-plugin.yml, the
helm chart (deployments/helm/nvidia-device-plugin), api/config/v1 and cmd/config-manager.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from gpustack.build.workload import API_ACCESS, API_ACCESS_MOUNT, CDI_HOOK, HOST_CDI_HOOK
from gpustack.config.node_pools import NodePool
from gpustack.resolve.stack import DEFAULT_CONFIG, Stack

NAME = "nvidia-device-plugin"
CONFIG_MAP = "nvidia-device-plugin-config"
CONFIG_DIR = "/etc/nvidia-device-plugin"
# The plugin's default `containerDriverRoot` (api/config/v1/flags.go, helm chart mount).
DRIVER_ROOT_MOUNT = "/driver-root"


def image(stack: Stack) -> str:
    return f"nvcr.io/nvidia/k8s-device-plugin:{stack.config.devicePlugin.version}"


def plugin_config(stack: Stack, pool: NodePool | None = None) -> dict[str, Any]:
    """The plugin's config file (api/config/v1), the single place its flags are set: the
    cluster's, or the one of a pool's nodes (its MIG strategy and sharing over the cluster's)."""
    strategy = stack.device_list_strategy
    config: dict[str, Any] = {
        "version": "v1",
        "flags": {
            "migStrategy": stack.config.pool_settings(pool).mig_strategy,
            "failOnInitError": True,
            "nvidiaDriverRoot": stack.driver_root,
            # Set explicitly: left out, the plugin takes the driver root (api/config/v1/config.go),
            # which is wrong where the device nodes are elsewhere (GKE).
            "nvidiaDevRoot": stack.dev_root,
            "plugin": {
                # Where no nvidia runtime reads NVIDIA_VISIBLE_DEVICES (GKE), GPU pods get their
                # device nodes only if the plugin hands them to the kubelet, as GKE's plugin does.
                "passDeviceSpecs": stack.facts.driver.hostMount is not None,
                # A string or a list (api/config/v1/flags.go deviceListStrategyFlag).
                "deviceListStrategy": strategy[0] if len(strategy) == 1 else strategy,
                "deviceIDStrategy": "uuid",
            },
        },
    }
    if stack.uses_cdi:
        # The plugin writes CDI specs for the devices it allocates: it reads the driver from the
        # host driver root mounted here, and the specs call the toolkit's nvidia-cdi-hook
        # (gpu-operator transformDevicePluginCtrForCDI, NVIDIA_CDI_HOOK_PATH).
        config["flags"]["plugin"]["containerDriverRoot"] = DRIVER_ROOT_MOUNT
        # Without gpustack's toolkit the hook is the host package's.
        hook = CDI_HOOK if stack.toolkit_enabled else HOST_CDI_HOOK
        config["flags"]["plugin"]["nvidiaCTKPath"] = hook
    sharing = stack.config.pool_settings(pool).sharing
    if sharing.strategy != "none":
        section: dict[str, Any] = {"renameByDefault": sharing.renameByDefault}
        if sharing.strategy == "time-slicing":
            section["failRequestsGreaterThanOne"] = sharing.failRequestsGreaterThanOne
        # Only full GPUs may be shared with MPS (k8s-device-plugin README, "With CUDA MPS").
        section["resources"] = [{"name": "nvidia.com/gpu", "replicas": sharing.replicas}]
        key = "timeSlicing" if sharing.strategy == "time-slicing" else "mps"
        config["sharing"] = {key: section}
    return config


def named_configs(stack: Stack) -> dict[str, dict[str, Any]]:
    """With node pools, the plugin's configs by name: the cluster's as `default`, then one per
    pool named after it, even where two are alike. A node keeps the config name it registered
    with (its label), so the name a pool's nodes select must never change with the pool's
    settings or the other pools': a name shared by alike pools would move when one of them
    changed, and its nodes would silently take another pool's config. Names are ConfigMap keys
    and node label values, which pool names (DNS labels) are."""
    configs = {DEFAULT_CONFIG: plugin_config(stack)}
    for pool in stack.pools:
        configs[pool.name] = plugin_config(stack, pool)
    return configs


def pool_config_name(pool: NodePool) -> str:
    """The config a pool's nodes select with their `nvidia.com/device-plugin.config` label."""
    return pool.name


def mig_strategies(stack: Stack) -> set[str]:
    """The MIG strategies the plugin runs with on some node: the cluster's and its pools'."""
    return {stack.config.pool_settings(pool).mig_strategy for pool in [None, *stack.pools]}


def sharing_strategies(stack: Stack) -> set[str]:
    """The sharing strategies the plugin runs with on some node."""
    return {stack.config.pool_settings(pool).sharing.strategy for pool in [None, *stack.pools]}


def pools_annotation(stack: Stack, config_of: dict[str, str]) -> dict[str, str]:
    """The `gpustack.dev/node-pools` annotation: each pool's name, node selector and the config it
    selects, so that lint can check the rendered objects on their own (the pool rules of gpustack.validation.lint)."""
    pools = [
        {"name": pool.name, "selector": dict(pool.selector), "config": config_of[pool.name]}
        for pool in stack.pools
    ]
    return {POOLS_ANNOTATION: json.dumps(pools, separators=(",", ":"))}


# --- Config manager --------------------------------------------------------------------------
# With node pools each node picks its config by its `nvidia.com/device-plugin.config` label:
# k8s-device-plugin's config-manager (cmd/config-manager/main.go, v0.20.0) watches its node,
# links CONFIG_FILE_DST to the file of CONFIG_FILE_SRCDIR the label names (DEFAULT_CONFIG when
# the node has no label; a name with no file there is an error, so the pod does not start), and
# sends SIGNAL to the process whose argv[0] is PROCESS_TO_SIGNAL, which restarts with the new
# config (SIGHUP: cmd/nvidia-device-plugin/main.go, cmd/gpu-feature-discovery/main.go). The helm
# chart (deployments/helm/nvidia-device-plugin/templates/daemonset-device-plugin.yml,
# daemonset-gfd.yml, daemonset-mps-control-daemon.yml) runs it once as an init container
# (ONESHOT), so the first start has a config, and as a sidecar in a pod that shares its process
# namespace, so the signal reaches the other container.
CONFIG_LABEL = "nvidia.com/device-plugin.config"
AVAILABLE_CONFIGS = "/available-configs"
POOLS_ANNOTATION = "gpustack.dev/node-pools"
# The API token, CA and namespace for the config manager alone, as the driver pod mounts them
# into its driver manager only (gpustack.build.components.driver API_ACCESS).
CONFIG_MANAGER_ACCESS: dict[str, Any] = {**API_ACCESS, "name": "config-manager-api-access"}
# It lists and watches its own Node (a field selector on metadata.name: cache.NewListWatchFromClient
# in continuouslySyncConfigChanges); the chart's ClusterRole also grants get, which it never uses.
CONFIG_MANAGER_RULES: list[dict[str, Any]] = [
    {"apiGroups": [""], "resources": ["nodes"], "verbs": ["list", "watch"]}
]


def config_manager(
    stack: Stack, name: str, *, oneshot: bool, signal: str, security: dict[str, Any]
) -> dict[str, Any]:
    """The config-manager container: `oneshot` the init container, else the sidecar that
    signals the process named `signal` (its argv[0]) after each change."""
    mounts = [
        {"name": "available-configs", "mountPath": AVAILABLE_CONFIGS, "readOnly": True},
        {"name": "config", "mountPath": CONFIG_DIR},
    ]
    return {
        "name": name,
        "image": image(stack),
        "command": ["config-manager"],
        "env": [
            {"name": "ONESHOT", "value": "true" if oneshot else "false"},
            # Empty: the in-cluster config (client-go clientcmd.BuildConfigFromFlags).
            {"name": "KUBECONFIG", "value": ""},
            {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
            {"name": "NODE_LABEL", "value": CONFIG_LABEL},
            {"name": "CONFIG_FILE_SRCDIR", "value": AVAILABLE_CONFIGS},
            {"name": "CONFIG_FILE_DST", "value": f"{CONFIG_DIR}/config.yaml"},
            # A node in no pool has no label and takes the cluster's config (updateConfigName).
            {"name": "DEFAULT_CONFIG", "value": DEFAULT_CONFIG},
            # The plugin chart's fallbacks (deployments/helm/nvidia-device-plugin/values.yaml
            # config.fallbackStrategies, v0.20.0): consulted only where DEFAULT_CONFIG is empty
            # (a patch that empties it, as the GPU Operator leaves it), they pick `default`
            # again (`named`), where the operator's `empty` would run the plugin unconfigured.
            {"name": "FALLBACK_STRATEGIES", "value": "named,single"},
            {"name": "SEND_SIGNAL", "value": "false" if oneshot else "true"},
            {"name": "SIGNAL", "value": "" if oneshot else "1"},  # SIGHUP
            {"name": "PROCESS_TO_SIGNAL", "value": "" if oneshot else signal},
        ],
        "securityContext": copy.deepcopy(security),
        "volumeMounts": mounts,
    }


def with_config_manager(
    stack: Stack,
    pod_spec: dict[str, Any],
    prefix: str,
    signal: str,
    security: dict[str, Any],
    *,
    token: bool = True,
) -> dict[str, Any]:
    """`pod_spec` with the config manager's init container and sidecar, the available configs
    (the ConfigMap) and the folder the chosen one is linked into (an emptyDir at CONFIG_DIR, which
    the pod's own containers mount in place of the ConfigMap). `token`: the pod's account mounts
    no API token, so the config manager gets one of its own."""
    managers = [
        config_manager(stack, f"{prefix}-init", oneshot=True, signal=signal, security=security),
        config_manager(stack, f"{prefix}-sidecar", oneshot=False, signal=signal, security=security),
    ]
    volumes = [v for v in pod_spec["volumes"] if v["name"] != "config"]
    volumes += [
        {"name": "available-configs", "configMap": {"name": CONFIG_MAP}},
        {"name": "config", "emptyDir": {}},
    ]
    if token:
        volumes.append(CONFIG_MANAGER_ACCESS)
        for manager in managers:
            manager["volumeMounts"].append(
                {
                    "name": CONFIG_MANAGER_ACCESS["name"],
                    "mountPath": API_ACCESS_MOUNT,
                    "readOnly": True,
                }
            )
    containers = []
    for container in pod_spec["containers"]:
        container = dict(container)
        mounts = [m for m in container.get("volumeMounts", []) if m["name"] != "config"]
        if len(mounts) != len(container.get("volumeMounts", [])):
            # The link in CONFIG_DIR points into AVAILABLE_CONFIGS, which must resolve here too.
            mounts += [
                {"name": "available-configs", "mountPath": AVAILABLE_CONFIGS, "readOnly": True},
                {"name": "config", "mountPath": CONFIG_DIR, "readOnly": True},
            ]
            container["volumeMounts"] = mounts
        containers.append(container)
    return {
        **pod_spec,
        # The sidecar finds the process to signal in /proc: the pod's containers share one PID
        # namespace (helm chart `shareProcessNamespace: true`).
        "shareProcessNamespace": True,
        "initContainers": [*pod_spec.get("initContainers", []), managers[0]],
        "containers": [*containers, managers[1]],
        "volumes": volumes,
    }
