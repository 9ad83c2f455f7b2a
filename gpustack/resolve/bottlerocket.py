"""Bottlerocket's NVIDIA device plugin settings (`settings.kubelet-device-plugins.nvidia`).

Bottlerocket's NVIDIA variants run NVIDIA's device plugin as a host service and write its config
file from these settings (bottlerocket-core-kit packages/nvidia-k8s-device-plugin/
nvidia-k8s-device-plugin-conf.in). The names and values below are the settings model's
(bottlerocket-settings-sdk bottlerocket-settings-models/modeled-types/src/kubernetes.rs,
NvidiaDevicePluginSettings, 25e4241) and the bottlerocket.dev settings reference (1.54.x, which
adds `mps`). gpustack's `devicePlugin` section is translated into them; what they cannot express
is refused when the config loads.
"""

from __future__ import annotations

from typing import Any

from gpustack.config.model import GPUStack

SETTINGS = ("settings", "kubelet-device-plugins", "nvidia")
# NvidiaDeviceListStrategy: `cdi-cri` turns the default runtime to CDI mode (bottlerocket.dev
# "Supported NVIDIA Container Runtime modes"); there is no `cdi-annotations`.
DEVICE_LIST_STRATEGIES = ("envvar", "volume-mounts", "cdi-cri")
# `cdi-cri` hands GPUs over only in the CRI's CDIDevices field, which the kubelet passes from
# Kubernetes 1.29 (KEP-4009, DevicePluginCDIDevices beta and on); before, pods get no GPU.
CDI_CRI_FROM = (1, 29)
# NvidiaDeviceSharingStrategy (`mps` from the 1.54.x reference on).
SHARING_STRATEGIES = {"time-slicing": "time-slicing", "mps": "mps"}
# NvidiaDevicePartitioningStrategy: with `mig` Bottlerocket's template sets the plugin's
# migStrategy to `single`, else `none`: there is no `mixed`.
PARTITIONING = {"single": "mig"}


# The release whose settings can turn the OS's device plugin off (`enabled`, default true), as
# the NVIDIA DRA driver needs on its nodes (amazon-eks-user-guide
# device-management-nvidia-time-slicing.adoc, "NVIDIA DRA driver": "setting
# `settings.kubelet-device-plugins.nvidia.enabled = false` in the node user data, which requires
# Bottlerocket version 1.63.0 or later"; bottlerocket-core-kit PR #914). A release without the
# setting refuses user data that names it.
PLUGIN_OFF_FROM = (1, 63, 0)


def device_plugin_settings(config: GPUStack) -> dict[str, Any]:
    """`settings.kubelet-device-plugins.nvidia` for the config's `devicePlugin` section, or the
    OS's plugin turned off where the DRA driver hands out the nodes' GPUs."""
    if config.gpuAllocation == "dra" and config.dra.gpus.enabled:
        return {"enabled": False}
    plugin = config.devicePlugin
    settings: dict[str, Any] = {
        # Bottlerocket's default: the plugin hands the kubelet each GPU's device nodes.
        "pass-device-specs": True,
        # UUIDs, as gpustack's own plugin hands them out: the DCGM exporter maps GPUs to pods by
        # the IDs the kubelet's pod-resources API reports (Bottlerocket's default is `index`).
        "device-id-strategy": "uuid",
    }
    if plugin.deviceListStrategy != "auto":
        settings["device-list-strategy"] = plugin.deviceListStrategy
    sharing = plugin.sharing
    # Sharing and partitioning are written only when used: Bottlerocket's default for both is
    # `none`, and a release older than a setting refuses user data that names it.
    if sharing.strategy != "none":
        settings["device-sharing-strategy"] = SHARING_STRATEGIES[sharing.strategy]
    if sharing.strategy == "time-slicing":
        settings["time-slicing"] = {
            "replicas": sharing.replicas,
            "rename-by-default": sharing.renameByDefault,
            "fail-requests-greater-than-one": sharing.failRequestsGreaterThanOne,
        }
    elif sharing.strategy == "mps":
        # Bottlerocket's template defaults rename-by-default to true here: written explicitly.
        settings["mps"] = {
            "replicas": sharing.replicas,
            "rename-by-default": sharing.renameByDefault,
        }
    profiles = config.nodes.eks.migProfile if config.nodes.eks else {}
    if plugin.migStrategy == "single":
        settings["device-partitioning-strategy"] = PARTITIONING["single"]
        settings["mig"] = {"profile": dict(sorted(profiles.items()))}
    return settings
