"""GPU Feature Discovery: labels GPU nodes with `nvidia.com/gpu.*` (product, memory, MIG, sharing).

Facts from NVIDIA/k8s-device-plugin v0.20.0 (static gpu-feature-discovery-daemonset.yaml, helm
templates/daemonset-gfd.yml, cmd/gpu-feature-discovery/main.go) and the GPU Operator's
assets/gpu-feature-discovery. GFD only computes labels; NFD's master puts them on the Node. It hands
them over in one of two ways, chosen here from where NFD comes from:
- a `NodeFeature` object (nfd.k8s-sigs.io) in GFD's namespace: needs NODE_NAME, NAMESPACE and RBAC;
- the file `features.d/gfd` on the host, which every nfd-worker reads: needs a hostPath.
"""

from __future__ import annotations

from typing import Any

from gpustack import emit
from gpustack.build import device_plugin_config, pod, ready_files
from gpustack.build.decorate import ignore
from gpustack.build.pod import host_path_volume
from gpustack.build.workload import (
    FEATURES_D,
    cluster_role_with_binding,
    config_map,
    daemonset,
    gpu_pod_spec,
    host_driver,
    host_driver_env,
    role_with_binding,
    scc_rules,
    service_account,
)
from gpustack.resolve.stack import Stack

NAME = "gpu-feature-discovery"
COMMAND = "/usr/bin/gpu-feature-discovery"
# GFD's own config where the device plugin is the node OS's (Bottlerocket) and shares GPUs.
CONFIG_MAP = "gpu-feature-discovery-config"


def publishes_node_features(stack: Stack) -> bool:
    """True when GFD writes NodeFeature objects, False when it writes the features.d file.

    The NFD gpustack deploys (v0.19) reads NodeFeature objects; an external NFD does so where the
    profile says it does. With no NFD at all the file is the choice that works with any NFD added
    later, and needs no API access meanwhile.
    """
    mode = stack.config.nfd.mode
    return mode == "deploy" or (mode == "external" and stack.facts.nodeFeatureAPI)


def build(stack: Stack) -> list[dict[str, Any]]:
    if not stack.config.gfd.enabled:
        return []
    rules: list[dict[str, Any]] = []
    if publishes_node_features(stack):
        # internal/lm/output.go: GFD gets, creates and updates `nvidia-features-for-<node>` in
        # its own namespace, and reads its own pod (POD_NAME) to make that object owned by the
        # pod and its DaemonSet, so the labels go when GFD goes (helm templates/role.yml).
        rules += [
            {
                "apiGroups": ["nfd.k8s-sigs.io"],
                "resources": ["nodefeatures"],
                "verbs": ["get", "create", "update"],
            },
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]},
        ]
    rules += scc_rules(stack)
    # Writing the features.d file, GFD never calls the API server (it builds its clients only
    # with the NodeFeature API, cmd/gpu-feature-discovery/main.go): then it gets no token.
    objects = [service_account(stack, NAME, calls_api=publishes_node_features(stack))]
    if rules:
        objects += role_with_binding(stack, NAME, rules)
    if stack.pools and stack.config.devicePlugin.enabled:
        # Its config manager watches the node's config label.
        objects += cluster_role_with_binding(stack, NAME, device_plugin_config.CONFIG_MANAGER_RULES)
    if _shares_on_the_host(stack):
        # The sharing Bottlerocket's plugin applies (node/), for GFD's nvidia.com/gpu.replicas
        # and gpu.sharing-strategy labels; GFD reads only the config file's `sharing`.
        sharing = device_plugin_config.plugin_config(stack)["sharing"]
        document = {"version": "v1", "sharing": sharing}
        objects.append(config_map(stack, CONFIG_MAP, {"config.yaml": emit.dump(document)}))
    objects.append(_daemonset(stack))
    return objects


def _shares_on_the_host(stack: Stack) -> bool:
    plugin = stack.config.devicePlugin
    return (
        not plugin.enabled
        and stack.facts.devicePluginProvider == "bottlerocket"
        and plugin.sharing.strategy != "none"
    )


def _config_map(stack: Stack) -> str | None:
    """The ConfigMap of the config file GFD reads its sharing labels from (nvidia.com/gpu.replicas,
    gpu.sharing-strategy): the device plugin's, as the helm chart shares one config between the
    two, or GFD's own where the node OS's plugin shares the GPUs; none otherwise."""
    if stack.config.devicePlugin.enabled:
        return device_plugin_config.CONFIG_MAP
    return CONFIG_MAP if _shares_on_the_host(stack) else None


def _env(stack: Stack, api: bool, pools: bool) -> list[dict[str, Any]]:
    """Env names as GFD reads them: MIG_STRATEGY, USE_NODE_FEATURE_API and CONFIG_FILE are the
    aliases of its GFD_* flags (cmd/gpu-feature-discovery/main.go), NODE_NAME and NAMESPACE
    name the NodeFeature's node and namespace (internal/flags/node.go; NAMESPACE defaults to
    "default", and without NODE_NAME the API output fails "required flag node-name not set").
    POD_NAME gives the NodeFeature its owners, the pod and its DaemonSet (internal/lm/output.go
    getOwnerReferences, v0.20.0): without it the object, and the nvidia.com/gpu.* labels NFD
    keeps from it, outlive GFD."""
    env = [
        # The same strategy as the device plugin, so the labels describe the resources it offers.
        # With node pools it comes from the config file the node's label picks: the env would
        # override the file's (api/config/v1 NewConfig: command line, then env, then file).
        *([] if pools else [pod.env("MIG_STRATEGY", stack.config.devicePlugin.migStrategy)]),
        pod.env("USE_NODE_FEATURE_API", pod.flag(api)),
    ]
    if api:
        env += [
            pod.field_env("NODE_NAME", "spec.nodeName"),
            pod.field_env("NAMESPACE", "metadata.namespace"),
            pod.field_env("POD_NAME", "metadata.name"),
        ]
    if device_plugin_config.mig_strategies(stack) != {"none"}:
        # MIG devices are visible to NVML only with the monitor capability (helm _helpers.tpl).
        env.append(pod.env("NVIDIA_MIG_MONITOR_DEVICES", "all"))
    if _config_map(stack):
        env.append(pod.env("CONFIG_FILE", f"{device_plugin_config.CONFIG_DIR}/config.yaml"))
    return [*env, *host_driver_env(stack)]


def _volumes_and_mounts(
    stack: Stack, api: bool
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    driver_volumes, driver_mounts = pod.host_paths(host_driver(stack))
    volumes = [host_path_volume("host-sys", "/sys", "Directory"), *driver_volumes]
    mounts = [pod.mount("host-sys", "/sys", read_only=True), *driver_mounts]
    if not api:
        # GFD's --output-file default is `features.d/gfd`.
        volumes.append(host_path_volume("features-d", FEATURES_D, "DirectoryOrCreate"))
        mounts.append(pod.mount("features-d", FEATURES_D))
    config = _config_map(stack)
    if config:
        volumes.append(pod.config_map_volume("config", config))
        mounts.append(pod.mount("config", device_plugin_config.CONFIG_DIR, read_only=True))
    return volumes, mounts


def _daemonset(stack: Stack) -> dict[str, Any]:
    plugin = stack.config.devicePlugin
    api = publishes_node_features(stack)
    pools = bool(stack.pools) and plugin.enabled
    volumes, mounts = _volumes_and_mounts(stack, api)
    env = _env(stack, api, pools)
    pod_spec = gpu_pod_spec(stack)
    pod_spec.update(
        {
            "serviceAccountName": NAME,
            "containers": [
                {
                    "name": NAME,
                    "image": device_plugin_config.image(stack),
                    "command": [COMMAND],
                    "env": env,
                    # Privileged, as upstream (static manifest, helm values `gfd.securityContext`,
                    # GPU Operator): vGPU detection reads each GPU's PCI config space beyond the
                    # first 64 bytes, which the kernel allows only with CAP_SYS_ADMIN; the
                    # features.d folder on the host is root-owned; and where no nvidia runtime
                    # injects /dev/nvidia* (GKE) only a privileged container reaches the devices.
                    "securityContext": {"privileged": True},
                    "volumeMounts": mounts,
                }
            ],
            "volumes": volumes,
        }
    )
    if pools:
        # GFD reads the plugin's config, so it needs the same config per node (helm
        # templates/daemonset-gfd.yml). The config manager signals argv[0], which is this
        # container's command as written.
        pod_spec = device_plugin_config.with_config_manager(
            stack,
            pod_spec,
            NAME,
            COMMAND,
            {"privileged": True},
            token=not api,
        )
    workload = daemonset(
        stack,
        NAME,
        ready_files.after_toolkit_ready(stack, pod_spec),
        component="gpu-feature-discovery",
    )
    if plugin.migStrategy != "none" and stack.facts.migPartitioning == "node-settings":
        # The node OS partitions the GPUs from the settings in node/ (Bottlerocket's MIG
        # manager), which no manifest shows.
        ignore(workload, "mig-strategy-without-partitions")
    return workload
