"""The checks of what a platform runs itself: the driver, entitlement and MachineConfigs that only
OpenShift has, its versions (an OpenShift release ships one Kubernetes minor), its own device
plugin, the labels it finds GPU nodes by and the runtime handlers it configures."""

from __future__ import annotations

from typing import Any

from gpustack.config.profile_model import Profile
from gpustack.errors import UserError
from gpustack.resolve.checks.context import CheckContext, version_tuple
from gpustack.resolve.layered_settings import Layer, following, nearest, set_by_user


def follow_platform_versions(
    data: dict[str, Any], profile: Profile, layers: list[Layer]
) -> Layer | None:
    """The layer that makes the platform's two versions in the merged config `data` (before
    validation) agree (OpenShift: each minor ships one Kubernetes minor,
    `facts.openshiftKubernetesVersions`): the one the user left out follows the one the user
    wrote; two that disagree are refused where the Kubernetes version is written. None when
    nothing follows. Values of the wrong type are left to validation."""
    shipped = profile.facts.openshiftKubernetesVersions
    platform = data.get("platform")
    if not shipped or not isinstance(platform, dict):
        return None
    openshift, kubernetes = platform.get("openshiftVersion"), platform.get("kubernetesVersion")
    if not isinstance(openshift, str) or not isinstance(kubernetes, str):
        return None
    openshift_path, kubernetes_path = (
        ("platform", "openshiftVersion"),
        ("platform", "kubernetesVersion"),
    )
    openshift_written = set_by_user(layers, openshift_path)
    kubernetes_written = set_by_user(layers, kubernetes_path)
    name = profile.metadata.name
    known = sorted(shipped, key=version_tuple)
    if kubernetes_written and not openshift_written:
        releases = [version for version in known if shipped[version] == kubernetes]
        if not releases:
            raise UserError(
                f"no OpenShift release profile {name!r} knows ships Kubernetes {kubernetes} "
                f"(OpenShift {known[0]} to {known[-1]} ship {shipped[known[0]]} to "
                f"{shipped[known[-1]]})",
                nearest(layers, kubernetes_path),
                field="platform.kubernetesVersion",
                hint="set platform.openshiftVersion, and remove platform.kubernetesVersion: "
                "it follows the OpenShift release",
            )
        return following(openshift_path, releases[-1], kubernetes_path, layers)
    ships = shipped.get(openshift)
    if openshift_written and not kubernetes_written:
        if ships is None:
            raise UserError(
                f"profile {name!r} does not know which Kubernetes OpenShift {openshift} ships, "
                "which schemas and API versions are checked against",
                nearest(layers, openshift_path),
                field="platform.openshiftVersion",
                hint=f"one of {known[0]} to {known[-1]}, or write platform.kubernetesVersion "
                "beside it as `oc version` prints its Kubernetes Version",
            )
        return following(kubernetes_path, ships, openshift_path, layers)
    if ships is not None and ships != kubernetes:
        raise UserError(
            f"OpenShift {openshift} ships Kubernetes {ships}, not {kubernetes}: schemas, API "
            "versions and images would be chosen for another cluster than the one named",
            nearest(layers, kubernetes_path),
            field="platform.kubernetesVersion",
            hint=f'set platform.kubernetesVersion: "{ships}", or remove it: it follows '
            "platform.openshiftVersion",
        )
    return None


def check_platform(context: CheckContext) -> None:
    """What the config asks of the platform that the platform does itself, or has not."""
    config, facts, name, at = context.config, context.facts, context.name, context.at
    if config.driver.mode != "auto" and config.driver.mode not in facts.driver.modes:
        shipped = (
            f": {facts.driver.nodeImage} ships the driver, and a second one cannot load beside it"
            if facts.driver.nodeImage
            else ""
        )
        raise UserError(
            f"driver mode {config.driver.mode!r} is not available on profile {name!r}{shipped}",
            at(("driver", "mode")),
            field="driver.mode",
            hint=f"allowed: auto, {', '.join(facts.driver.modes)}",
        )
    if config.entitlement.enabled and not facts.machineConfigOperator:
        raise UserError(
            f"entitlement MachineConfigs exist only on OpenShift, not on profile {name!r}",
            at(("entitlement", "enabled")),
            field="entitlement.enabled",
            hint="remove the entitlement section or use profile 'openshift'",
        )
    if not facts.machineConfigOperator and context.set_by_user(("nodes", "machineConfigPool")):
        raise UserError(
            f"MachineConfigPools exist only on OpenShift, not on profile {name!r}",
            at(("nodes", "machineConfigPool")),
            field="nodes.machineConfigPool",
            hint="remove nodes.machineConfigPool or use profile 'openshift'",
        )
    if config.platform.openshiftVersion and not facts.machineConfigOperator:
        raise UserError(
            f"platform.openshiftVersion applies only to OpenShift, not to profile {name!r}",
            at(("platform", "openshiftVersion")),
            field="platform.openshiftVersion",
        )
    if config.devicePlugin.enabled and facts.devicePluginProvider == "gke":
        # NVIDIA's plugin on GKE works only as NVIDIA's GKE guide sets it up (cloud-native-docs
        # google-gke.rst): the Container Toolkit installed into /home/kubernetes/bin/nvidia and
        # CDI, driver root /home/kubernetes/bin/nvidia, dev root /. Without the toolkit the plugin
        # defaults its dev root to the driver root (api/config/v1/config.go), hands out device
        # nodes that do not exist, and GPU pods get no driver libraries.
        raise UserError(
            "NVIDIA's device plugin on GKE needs the NVIDIA Container Toolkit with CDI "
            "(NVIDIA's GKE guide), which gpustack does not deploy on GKE; GKE's own device "
            "plugin serves nvidia.com/gpu there",
            at(("devicePlugin", "enabled")),
            field="devicePlugin.enabled",
            hint="set devicePlugin.enabled: false, or install the GPU Operator as NVIDIA's GKE "
            "guide describes",
        )
    if config.devicePlugin.enabled and facts.devicePluginProvider == "bottlerocket":
        # Bottlerocket runs NVIDIA's plugin as a host service on every NVIDIA variant
        # (bottlerocket-core-kit packages/nvidia-k8s-device-plugin): a DaemonSet would register
        # a second plugin for nvidia.com/gpu with the same kubelet.
        raise UserError(
            f"Bottlerocket's NVIDIA variants run NVIDIA's device plugin as a host service; a "
            f"device plugin DaemonSet on profile {name!r} would advertise every GPU a second "
            "time",
            at(("devicePlugin", "enabled")),
            field="devicePlugin.enabled",
            hint="set devicePlugin.enabled: false; the plugin's settings (sharing, MIG, device "
            "list strategy) go to the Bottlerocket settings gpustack writes in node/",
        )
    if not context.stack.gpu_node_selector and not config.nodes.selector:
        nfd_labels = ", ".join(item.key for item in facts.gpuNodeSelector)
        raise UserError(
            f"with nfd.mode disabled nothing sets {nfd_labels}, the label profile {name!r} "
            "finds GPU nodes by, so GPU workloads would have no way to find GPU nodes",
            at(("nfd", "mode")),
            field="nfd.mode",
            hint="put a label your GPU nodes carry in nodes.selector (the node/ files apply "
            "it where gpustack writes them), or set nfd.mode: deploy or external",
        )
    handlers = facts.runtime.providedHandlers
    if handlers and config.runtimeClass.handler not in handlers:
        raise UserError(
            f"profile {name!r} configures its runtime's nvidia handlers itself "
            f"({', '.join(handlers)}): no runtime named {config.runtimeClass.handler!r} "
            "would exist, and every GPU pod would fail to start",
            at(("runtimeClass", "handler")),
            field="runtimeClass.handler",
            hint=f"set runtimeClass.handler to one of {', '.join(handlers)}; a runtime of your "
            f"own (a containerd template on the nodes) needs a profile that extends {name!r} "
            "and lists it in facts.runtime.providedHandlers",
        )
