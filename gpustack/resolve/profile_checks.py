"""The checks of a config against its profile: what the platform cannot run, what would be
dropped silently, what would never start on its nodes, is refused with the file, line and column
that set it, before anything renders. `check` runs them all, in order, for the loader
(gpustack.resolve.load), and reads the two files whose content it checks: the entitlement PEM and the
MIG configs of `migManager.config.file`.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpustack.errors import Location, UserError, did_you_mean, display_path
from gpustack.read.bounded import decode, read_bounded
from gpustack.read.named_files import inside_repository
from gpustack.read.yamlio import load_text
from gpustack.resolve import bottlerocket, gke_accelerators, mig
from gpustack.resolve.layered_settings import Layer, following, merge, nearest, set_by_user
from gpustack.resolve.model import GPUStack
from gpustack.resolve.node_pools import GKENodePool, NodePool
from gpustack.resolve.profile_model import Profile
from gpustack.resolve.stack import (
    DEFAULT_CONFIG,
    DRIVER_CONTAINER_ROOT,
    Stack,
    dra_gate_enabled,
    driver_os_tag,
    kubernetes_minor,
    validator_finds_driver,
)

# NVIDIA's DRA driver for GPUs (kubernetes-sigs/dra-driver-nvidia-gpu v0.4.1,
# docs/prerequisites.md): Kubernetes v1.34.2 or later, where DRA is GA and on by default; driver
# 565 or later for GPU allocation, 570.158.01 or later for ComputeDomains.
DRA_MINIMUM_KUBERNETES = (1, 34)
DRA_MINIMUM_DRIVER = {"gpus": "565", "computeDomains": "570.158.01"}


@dataclass(frozen=True)
class Checked:
    """A config that passed its profile's checks, and what they read and left out."""

    config: GPUStack
    # Settings left out because they do not apply to the profile: (field path, why).
    left_out: tuple[tuple[str, str], ...] = ()
    entitlement_pem: bytes | None = None
    entitlement_mode: int | None = None  # the PEM file's permission bits
    user_mig_configs: mig.Configs | None = None  # migManager.config.file, parsed


def check(
    config: GPUStack,
    profile: Profile,
    layers: list[Layer],
    leave_out: Callable[[str], GPUStack] | None = None,
) -> Checked:
    """Check `config` (merged from `layers`, the profile's defaults first) against `profile`;
    the first problem is a `UserError` at the layer that set it.

    `leave_out` (comparing one config on several profiles): given the field of a setting the
    profile refuses, the config without it, which is checked again; each field left out is named
    in `Checked.left_out` with the reason. The files the config names are read, and the MIG
    manager and node pools checked, only once the settings fit the profile.
    """
    left_out: list[tuple[str, str]] = []
    while True:
        try:
            _check_against_profile(config, profile, layers)
            _check_gke_node_pool(config, profile, layers)
            _check_aks_node_pool(config, profile, layers)
            _check_eks_node_group(config, profile, layers)
            _check_no_effect(config, profile, layers, {field for field, _ in left_out})
            break
        except UserError as problem:
            done = {field for field, _ in left_out}
            if leave_out is None or problem.field is None or problem.field in done:
                raise
            config = leave_out(problem.field)
            left_out.append((problem.field, problem.message))
    pem, mode = _read_pem(config, layers) if config.entitlement.enabled else (None, None)
    user_mig_configs = _read_mig_configs(config, layers) if config.migManager.config.file else None
    _check_mig_manager(config, profile, layers, user_mig_configs)
    _check_pools(config, profile, layers)
    return Checked(config, tuple(left_out), pem, mode, user_mig_configs)


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
    known = sorted(shipped, key=_version_tuple)
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


def _check_against_profile(config: GPUStack, profile: Profile, layers: list[Layer]) -> None:
    facts = profile.facts
    name = profile.metadata.name
    if config.driver.mode != "auto" and config.driver.mode not in facts.driver.modes:
        shipped = (
            f": {facts.driver.nodeImage} ships the driver, and a second one cannot load beside it"
            if facts.driver.nodeImage
            else ""
        )
        raise UserError(
            f"driver mode {config.driver.mode!r} is not available on profile {name!r}{shipped}",
            nearest(layers, ("driver", "mode")),
            field="driver.mode",
            hint=f"allowed: auto, {', '.join(facts.driver.modes)}",
        )
    if config.entitlement.enabled and not facts.machineConfigOperator:
        raise UserError(
            f"entitlement MachineConfigs exist only on OpenShift, not on profile {name!r}",
            nearest(layers, ("entitlement", "enabled")),
            field="entitlement.enabled",
            hint="remove the entitlement section or use profile 'openshift'",
        )
    if not facts.machineConfigOperator and set_by_user(layers, ("nodes", "machineConfigPool")):
        raise UserError(
            f"MachineConfigPools exist only on OpenShift, not on profile {name!r}",
            nearest(layers, ("nodes", "machineConfigPool")),
            field="nodes.machineConfigPool",
            hint="remove nodes.machineConfigPool or use profile 'openshift'",
        )
    if config.platform.openshiftVersion and not facts.machineConfigOperator:
        raise UserError(
            f"platform.openshiftVersion applies only to OpenShift, not to profile {name!r}",
            nearest(layers, ("platform", "openshiftVersion")),
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
            nearest(layers, ("devicePlugin", "enabled")),
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
            nearest(layers, ("devicePlugin", "enabled")),
            field="devicePlugin.enabled",
            hint="set devicePlugin.enabled: false; the plugin's settings (sharing, MIG, device "
            "list strategy) go to the Bottlerocket settings gpustack writes in node/",
        )
    if not Stack(config, profile, "").gpu_node_selector and not config.nodes.selector:
        nfd_labels = ", ".join(item.key for item in facts.gpuNodeSelector)
        raise UserError(
            f"with nfd.mode disabled nothing sets {nfd_labels}, the label profile {name!r} "
            "finds GPU nodes by, so GPU workloads would have no way to find GPU nodes",
            nearest(layers, ("nfd", "mode")),
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
            nearest(layers, ("runtimeClass", "handler")),
            field="runtimeClass.handler",
            hint=f"set runtimeClass.handler to one of {', '.join(handlers)}; a runtime of your "
            f"own (a containerd template on the nodes) needs a profile that extends {name!r} "
            "and lists it in facts.runtime.providedHandlers",
        )
    _check_toolkit(config, profile, layers)
    _check_dra(config, profile, layers)
    _check_kubernetes_gates(config, profile, layers)
    _check_validator(config, profile, layers)
    _check_node_status_exporter(config, profile, layers)
    _check_platform_os(config, profile, layers)
    _check_os_sku(config, profile, layers)


@dataclass(frozen=True)
class _Applies:
    """When the settings of a config section reach the output: `fields` of `section` (None:
    every field but `switches`, which decide whether the section applies) take effect only where
    `applies` holds for the stack; set elsewhere by the user, they are refused with `why`."""

    section: tuple[str, ...]
    applies: Callable[[Stack], bool]
    why: Callable[[Stack], str]
    hint: str
    switches: frozenset[str] = frozenset()
    fields: frozenset[str] | None = None


def _cluster_sharing_used(stack: Stack) -> bool:
    """Some GPU node takes the cluster's `devicePlugin.sharing`: nodes outside pools, or a pool
    without sharing of its own, that get their GPUs from the device plugin."""
    config = stack.config

    def plugin_hands_out(allocation: str) -> bool:
        return allocation == "device-plugin" or not config.dra.gpus.enabled

    return plugin_hands_out(config.gpuAllocation) or any(
        plugin_hands_out(config.pool_settings(pool).gpu_allocation)
        and not (pool.devicePlugin and pool.devicePlugin.sharing)
        for pool in config.nodes.pools
    )


# Every section whose settings some configs render nothing of (tests/test_no_effect.py renders
# each field with and without a value to find them). Each is refused only where the user (a
# config, a base, --set) wrote it: a profile's defaults give way silently.
_APPLIES = (
    _Applies(
        ("driver",),
        lambda stack: stack.driver_container,
        lambda stack: (
            f"the driver is not a container here (driver mode {stack.driver_mode}): "
            "the nodes or the platform install it, and gpustack renders no driver"
        ),
        "remove it, and install that driver on the nodes; or set driver.mode to container or "
        "driver-toolkit where the profile offers them",
        switches=frozenset({"mode"}),
    ),
    _Applies(
        ("driver",),
        lambda stack: not stack.facts.driver.nodeOS,
        lambda stack: (
            "the nodes' OS follows platform.openshiftVersion on profile "
            f"{stack.profile.metadata.name!r} (RHCOS of that release)"
        ),
        "remove driver.nodeOS; set platform.openshiftVersion",
        fields=frozenset({"nodeOS"}),
    ),
    _Applies(
        ("dra",),
        lambda stack: stack.dra_enabled,
        lambda stack: (
            "NVIDIA's DRA driver is not deployed: no node takes its GPUs from it "
            "(gpuAllocation: device-plugin)"
        ),
        "remove it, or set gpuAllocation: dra",
    ),
    _Applies(
        ("devicePlugin", "sharing"),
        _cluster_sharing_used,
        lambda stack: (
            "no GPU node takes its GPUs from the device plugin with the cluster's "
            "sharing settings (gpuAllocation: dra; pools have their own)"
        ),
        "remove devicePlugin.sharing; with the DRA driver, GPUs are shared by its feature gates "
        "TimeSlicingSettings and MPSSupport",
    ),
    _Applies(
        ("devicePlugin", "sharing"),
        lambda stack: stack.config.devicePlugin.sharing.strategy != "none",
        lambda stack: "the cluster's GPUs are not shared (devicePlugin.sharing.strategy: none)",
        "set devicePlugin.sharing.strategy to time-slicing or mps, or remove the setting",
        switches=frozenset({"strategy"}),
    ),
    _Applies(
        ("devicePlugin",),
        lambda stack: stack.nvidia_plugin_serves,
        lambda stack: (
            f"the platform's own device plugin serves the GPUs on profile "
            f"{stack.profile.metadata.name!r}, and reads no device list strategy"
        ),
        "remove devicePlugin.deviceListStrategy",
        fields=frozenset({"deviceListStrategy"}),
    ),
    _Applies(
        ("smokeTest",),
        lambda stack: stack.smoke_test_enabled,
        lambda stack: (
            "the smoke test is not rendered (smokeTest.enabled auto renders it only "
            "with gitops.tool argocd or flux)"
        ),
        "set smokeTest.enabled: true, or remove the setting",
        switches=frozenset({"enabled"}),
    ),
    _Applies(
        ("entitlement",),
        lambda stack: stack.config.entitlement.enabled,
        lambda stack: "entitlement is not enabled",
        "set entitlement.enabled: true, or remove the setting",
        switches=frozenset({"enabled"}),
    ),
    _Applies(
        ("validator",),
        lambda stack: stack.validator_enabled,
        lambda stack: (
            "NVIDIA's validator is not deployed"
            + (
                ""
                if stack.config.validator.enabled is False
                else f" (it cannot find the driver on profile {stack.profile.metadata.name!r})"
            )
        ),
        "remove the setting",
        switches=frozenset({"enabled"}),
    ),
    _Applies(
        ("toolkit",),
        lambda stack: stack.toolkit_enabled,
        lambda stack: "the NVIDIA Container Toolkit DaemonSet is not deployed",
        "remove the setting, or set toolkit.enabled: true where the profile offers it",
        switches=frozenset({"enabled"}),
    ),
    _Applies(
        ("dcgmExporter",),
        lambda stack: stack.config.dcgmExporter.enabled,
        lambda stack: "the DCGM exporter is not deployed (dcgmExporter.enabled: false)",
        "remove the setting, or set dcgmExporter.enabled: true",
        switches=frozenset({"enabled"}),
    ),
    _Applies(
        ("alerts",),
        lambda stack: stack.alerts_enabled,
        lambda stack: (
            "no GPU alert rules are rendered ("
            + (
                "alerts.enabled: false"
                if stack.config.alerts.enabled is False
                else f"the DCGM exporter is off, or monitor {stack.monitor} loads no rule objects"
            )
            + ")"
        ),
        "remove the setting, or set alerts.enabled: true where a Prometheus loads the rules",
        switches=frozenset({"enabled"}),
    ),
    _Applies(
        ("dashboard",),
        lambda stack: stack.dashboard_enabled,
        lambda stack: (
            "no dashboard is rendered (dashboard.enabled false, or no metrics: the "
            "DCGM exporter is off or monitor is none)"
        ),
        "remove the setting, or set dashboard.enabled: true",
        switches=frozenset({"enabled"}),
    ),
    _Applies(
        ("gfd",),
        lambda stack: stack.config.gfd.enabled,
        lambda stack: "GPU Feature Discovery is not deployed (gfd.enabled: false)",
        "remove the setting, or set gfd.enabled: true",
        switches=frozenset({"enabled"}),
    ),
    _Applies(
        ("nodeStatusExporter",),
        lambda stack: stack.config.nodeStatusExporter.enabled,
        lambda stack: (
            "the node status exporter is not deployed (nodeStatusExporter.enabled: false)"
        ),
        "remove the setting, or set nodeStatusExporter.enabled: true",
        switches=frozenset({"enabled"}),
    ),
    _Applies(
        ("nfd",),
        lambda stack: stack.config.nfd.mode == "deploy",
        lambda stack: f"gpustack deploys no NFD (nfd.mode: {stack.config.nfd.mode})",
        "remove the setting, or set nfd.mode: deploy",
        switches=frozenset({"mode"}),
    ),
    _Applies(
        ("runtimeClass",),
        lambda stack: stack.facts.runtime.runtimeClass != "none" or stack.runtime_class_enabled,
        lambda stack: (
            f"profile {stack.profile.metadata.name!r} runs GPU pods with no nvidia "
            "runtime (the platform mounts the driver): no RuntimeClass or runtime handler is "
            "rendered"
        ),
        "remove the setting",
        fields=frozenset({"name", "handler"}),
    ),
    _Applies(
        ("nodes",),
        lambda stack: stack.facts.taintMechanism == "kubeadm-join" and not stack.toolkit_enabled,
        lambda stack: (
            "only the containerd drop-in gpustack writes for kubeadm nodes without "
            "the toolkit DaemonSet reads it (the toolkit, or the platform, configures the runtime "
            "here)"
        ),
        "remove nodes.cgroupDriver",
        fields=frozenset({"cgroupDriver"}),
    ),
    _Applies(
        ("gitops", "argocd"),
        lambda stack: stack.config.gitops.tool == "argocd",
        lambda stack: f"gitops.tool is {stack.config.gitops.tool}, not argocd",
        "set gitops.tool: argocd, or remove gitops.argocd",
    ),
    _Applies(
        ("gitops", "flux"),
        lambda stack: stack.config.gitops.tool == "flux",
        lambda stack: f"gitops.tool is {stack.config.gitops.tool}, not flux",
        "set gitops.tool: flux, or remove gitops.flux",
    ),
)


def _check_no_effect(
    config: GPUStack, profile: Profile, layers: list[Layer], left_out: set[str]
) -> None:
    """A setting the cluster's own config or `--set` writes that renders nothing on this cluster
    is refused, with why: it would look in force and do nothing (a driver version on a platform
    that installs its own driver, sharing settings for GPUs that the DRA driver hands out).
    A base's settings are a fleet's defaults, which apply to the clusters where they take effect
    (a driver version for those that run the driver container, resources for a component some
    platforms do not run): `config show` marks those that do nothing here. `left_out`: fields
    the loader already took out of the config (comparing profiles), no longer in force."""
    for path, why, hint in _without_effect(config, profile, own_layers(layers), left_out):
        raise UserError(
            f"has no effect: {why}",
            nearest(layers[1:], path, key=True),
            field=".".join(path),
            hint=hint,
        )
    _check_pool_sharing(config, layers)


def without_effect(stack: Stack, layers: list[Layer]) -> dict[tuple[str, ...], str]:
    """Every setting a layer above the profile's defaults writes (a base, the config, `--set`)
    that renders nothing on this cluster, with why: what a base holds for other clusters of a
    fleet (`gpustack config show` marks them)."""
    return {
        path: why
        for path, why, _ in _without_effect(stack.config, stack.profile, layers[1:], set())
    }


def own_layers(layers: list[Layer]) -> list[Layer]:
    """The layers a cluster writes itself: its config file and what is above it (`--set`),
    not the bases it extends nor the profile's defaults (the first layer)."""
    files = [index for index, layer in enumerate(layers) if index and layer.path is not None]
    return layers[files[-1] :] if files else layers[1:]


def _without_effect(
    config: GPUStack, profile: Profile, written_in: list[Layer], left_out: set[str]
) -> Iterator[tuple[tuple[str, ...], str, str]]:
    """The settings `written_in` writes that render nothing on this cluster: (path, why, hint),
    in the order of `_APPLIES`."""
    stack = Stack(config, profile, "")
    for rule in _APPLIES:
        dotted = ".".join(rule.section)
        written = [
            name
            for name in _written_fields(written_in, rule.section)
            if (rule.fields is None or name in rule.fields)
            and name not in rule.switches
            and f"{dotted}.{name}" not in left_out
            and dotted not in left_out
        ]
        if written and not rule.applies(stack):
            for name in written:
                yield (*rule.section, name), rule.why(stack), rule.hint


def _check_pool_sharing(config: GPUStack, layers: list[Layer]) -> None:
    """A pool's own sharing settings, other than its strategy, do nothing while it is `none`.
    The pools are a list, which a later layer replaces whole: the last layer that writes them
    says what was written."""
    owner = next(
        (
            layer
            for layer in reversed(layers[1:])
            if isinstance(layer.data.get("nodes"), dict) and "pools" in layer.data["nodes"]
        ),
        None,
    )
    written = owner.data["nodes"]["pools"] if owner is not None else None
    if not isinstance(written, list):
        return
    for index, pool in enumerate(config.nodes.pools):
        sharing = pool.devicePlugin.sharing if pool.devicePlugin else None
        if sharing is None or sharing.strategy != "none" or index >= len(written):
            continue
        data: Any = written[index]
        for key in ("devicePlugin", "sharing"):
            data = data.get(key) if isinstance(data, dict) else None
        settings = (
            [key for key in data or {} if key != "strategy"] if isinstance(data, dict) else []
        )
        if settings:
            path = ("nodes", "pools", index, "devicePlugin", "sharing", settings[0])
            raise UserError(
                f"pool {pool.name}: has no effect: the pool's GPUs are not shared (its "
                "devicePlugin.sharing.strategy is none)",
                nearest(layers, path, key=True),
                field=".".join(str(part) for part in path),
                hint="set the pool's sharing strategy to time-slicing or mps, or remove the "
                "setting",
            )


def _written_fields(layers: list[Layer], section: tuple[str, ...]) -> list[str]:
    """The fields of `section` that `layers` write with a value, merged as the loader merges
    them (a later layer's null takes a base's setting away)."""
    merged: Any = {}
    for layer in layers:
        data: Any = layer.data
        for key in section:
            if not isinstance(data, dict) or key not in data:
                break
            data = data[key]
        else:
            merged = merge(merged, data)
    if not isinstance(merged, dict):
        return []
    return [key for key, value in merged.items() if value is not None]


def _check_os_sku(config: GPUStack, profile: Profile, layers: list[Layer]) -> None:
    """A driver container on a platform whose pools are made from OS SKUs (AKS): the image is
    built for driver.nodeOS, so some pool OS must run it."""
    skus = profile.facts.driver.osSkus
    if not skus or not Stack(config, profile, "").driver_container:
        return
    if config.driver.nodeOS not in skus:
        raise UserError(
            f"profile {profile.metadata.name!r} has no node pool OS that runs "
            f"{config.driver.nodeOS}, which the driver container is built for",
            nearest(layers, ("driver", "nodeOS")),
            field="driver.nodeOS",
            hint=f"one of {', '.join(skus)}",
        )
    offered = profile.facts.driver.osSkuKubernetesVersions.get(config.driver.nodeOS)
    version = kubernetes_minor(config.platform.kubernetesVersion)
    if offered and not (
        kubernetes_minor(offered.first) <= version <= kubernetes_minor(offered.last)
    ):
        others = [
            node_os
            for node_os, span in profile.facts.driver.osSkuKubernetesVersions.items()
            if node_os in skus
            and kubernetes_minor(span.first) <= version <= kubernetes_minor(span.last)
        ]
        raise UserError(
            f"profile {profile.metadata.name!r} offers the node pool OS SKU "
            f"{skus[config.driver.nodeOS]} of {config.driver.nodeOS} for Kubernetes "
            f"{offered.first} to {offered.last}, not {config.platform.kubernetesVersion}: "
            "the pool command would be refused",
            nearest(layers, ("driver", "nodeOS")),
            field="driver.nodeOS",
            hint=f"driver.nodeOS: {' or '.join(others)}"
            if others
            else "a platform.kubernetesVersion the OS SKU is offered for",
        )


def _check_platform_os(config: GPUStack, profile: Profile, layers: list[Layer]) -> None:
    """A driver container on a platform whose node OS follows its version (OpenShift): the
    version must be one the profile knows, and NVIDIA must publish the driver for that OS."""
    facts = profile.facts.driver
    stack = Stack(config, profile, "")
    if not facts.nodeOS or not stack.driver_container:
        return
    name = profile.metadata.name
    version = config.platform.openshiftVersion
    known = sorted(facts.nodeOS, key=lambda v: tuple(int(part) for part in v.split(".")))
    if version not in facts.nodeOS:
        raise UserError(
            f"profile {name!r} does not know the node OS of OpenShift {version}, which picks the "
            "driver image"
            if version
            else f"the driver image on profile {name!r} follows platform.openshiftVersion",
            nearest(layers, ("platform", "openshiftVersion")),
            field="platform.openshiftVersion",
            hint=f"one of {known[0]} to {known[-1]}; for another release, a profile of your own "
            f"that extends {name!r} with its facts.driver.nodeOS (`cat /etc/os-release` on a "
            "node: ID and VERSION_ID)",
        )
    published = facts.publishedImages
    tag = driver_os_tag(stack.node_os)
    driver = config.driver.version
    if published and driver in published.drivers and tag not in published.osTags:
        served = [v for v in known if driver_os_tag(facts.nodeOS[v]) in published.osTags]
        upgrade = f"upgrade to OpenShift {served[0]} or later, " if served else ""
        raise UserError(
            f"NVIDIA publishes no driver {driver} image for OpenShift {version} "
            f"(nvcr.io/nvidia/driver:{driver}-{tag}): its tags for this platform are "
            f"{', '.join(published.osTags)}"
            + (f" (OpenShift {served[0]} to {served[-1]})" if served else ""),
            nearest(layers, ("platform", "openshiftVersion")),
            field="platform.openshiftVersion",
            hint=f"{upgrade}set driver.version to a driver whose NGC nvidia/driver tags include "
            f"-{tag}, or install the driver on the nodes (driver.mode: preinstalled)",
        )


def _check_toolkit(config: GPUStack, profile: Profile, layers: list[Layer]) -> None:
    facts = profile.facts
    name = profile.metadata.name
    if config.toolkit.enabled is True and facts.runtime.toolkit is None:
        shipped = (
            f": {facts.driver.nodeImage} ships it and configures the runtime"
            if facts.driver.nodeImage
            else ""
        )
        raise UserError(
            f"gpustack does not deploy the NVIDIA Container Toolkit on profile {name!r}{shipped}",
            nearest(layers, ("toolkit", "enabled")),
            field="toolkit.enabled",
            hint="set toolkit.enabled: auto",
        )
    stack = Stack(config, profile, "")
    if stack.driver_container and not stack.toolkit_enabled:
        raise UserError(
            "a driver container needs the NVIDIA Container Toolkit DaemonSet: only it points the "
            f"container runtime at the driver in {DRIVER_CONTAINER_ROOT}",
            nearest(layers, ("toolkit", "enabled")),
            field="toolkit.enabled",
            hint="set toolkit.enabled to auto or true",
        )
    if (
        facts.runtime.providedHandlers
        and facts.runtime.toolkit is not None
        and stack.toolkit_enabled
        and not stack.runtime_class_enabled
    ):
        # k3s (and RKE2, which runs k3s' agent) adds the nvidia runtimes it finds when it
        # starts, and refuses to start at all while its `default-runtime` names one it did not
        # find (k3s-io/k3s pkg/agent/containerd/config_linux.go SetupContainerdConfig: "default
        # runtime %s was not found"). The toolkit DaemonSet installs the runtime only once the
        # node runs pods: with `default-runtime: nvidia` in its agent config the node would
        # never start, and without it GPU pods naming no RuntimeClass run under runc.
        raise UserError(
            f"on profile {name!r} the toolkit DaemonSet's nvidia runtime can't be containerd's "
            "default: the node's agent refuses to start while its `default-runtime` names a "
            "runtime it has not found, and that runtime exists only once the toolkit's pod has "
            "run on the node, so GPU pods need the RuntimeClass",
            nearest(layers, ("runtimeClass", "enabled")),
            field="runtimeClass.enabled",
            hint="set runtimeClass.enabled: auto; or install the NVIDIA Container Toolkit on "
            "the hosts before the agent starts (driver.mode: preinstalled), and node/ makes "
            "nvidia the default runtime",
        )
    if config.driver.rhcosBuilds and stack.driver_mode != "driver-toolkit":
        raise UserError(
            f"driver.rhcosBuilds is for driver.mode driver-toolkit (OpenShift); the driver mode "
            f"here is {stack.driver_mode}, which would ignore it",
            nearest(layers, ("driver", "rhcosBuilds")),
            field="driver.rhcosBuilds",
            hint="remove driver.rhcosBuilds, or set driver.mode: driver-toolkit",
        )
    if (config.driver.rhcosBuilds or config.driver.rhcosVersion) and config.nfd.mode == "disabled":
        field = "rhcosBuilds" if config.driver.rhcosBuilds else "rhcosVersion"
        raise UserError(
            "a driver DaemonSet per RHCOS build selects its nodes by NFD's "
            "system-os_release.OSTREE_VERSION label, which nothing sets with nfd.mode disabled",
            nearest(layers, ("driver", field)),
            field=f"driver.{field}",
            hint="set nfd.mode to deploy or external (OpenShift: the NFD operator)",
        )
    pinned = config.driver.driverToolkitImage or config.driver.rhcosBuilds
    if stack.driver_mode == "driver-toolkit" and not pinned:
        if not facts.driver.driverToolkitImage:
            raise UserError(
                f"profile {name!r} names no default Driver Toolkit image",
                nearest(layers, ("driver", "mode")),
                field="driver.driverToolkitImage",
                hint="set driver.rhcosBuilds (or driver.driverToolkitImage)",
            )
        version = config.platform.openshiftVersion or ""
        if version and tuple(int(part) for part in version.split(".")) < (4, 13):
            raise UserError(
                f"OpenShift {version}: the default Driver Toolkit image is RHEL 9 based (4.13 and "
                "later); earlier releases need the cluster's own",
                nearest(layers, ("driver", "mode")),
                field="driver.driverToolkitImage",
                hint="set driver.driverToolkitImage to `oc adm release info "
                "--image-for=driver-toolkit`",
            )


# The driver's checks of its own gates at start (pkg/featuregates/featuregates.go
# ValidateFeatureGates, v0.4.1): a gate that needs another, and gates that exclude each other.
DRA_GATE_NEEDS = {
    "ComputeDomainCliques": "IMEXDaemonsWithDNSNames",
    "DeviceMetadata": "PassthroughSupport",
}
DRA_GATES_EXCLUSIVE = (
    ("DynamicMIG", "PassthroughSupport"),
    ("DynamicMIG", "NVMLDeviceHealthCheck"),
    ("DynamicMIG", "MPSSupport"),
    ("PassthroughSupport", "NVMLDeviceHealthCheck"),
)
# Kubernetes feature gates a driver gate needs, and the first Kubernetes version that turns them
# on by default: DynamicMIG publishes partitionable devices (SharedCounters, ConsumesCounters),
# which kube-apiserver and kube-scheduler drop without DRAPartitionableDevices, on by default
# from 1.36 (site/content/docs/reference/feature-gates.md; hack/ci/lambda/e2e-test.sh, v0.4.1).
DRA_GATE_NEEDS_CLUSTER = {"DynamicMIG": ("DRAPartitionableDevices", (1, 36))}


# The first dcgm-exporter release (the part after the DCGM version in its tag) whose DRA mode
# reads resource.k8s.io/v1 ResourceSlices.
DCGM_EXPORTER_DRA_V1 = (4, 8, 3)


def _version_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def _dra_choice(config: GPUStack) -> tuple[str | int, ...]:
    """Where the config chooses the DRA driver: the cluster's `gpuAllocation`, else the first
    pool that does."""
    if config.gpuAllocation == "dra":
        return ("gpuAllocation",)
    index = next(
        index
        for index, pool in enumerate(config.nodes.pools)
        if config.pool_settings(pool).gpu_allocation == "dra"
    )
    return ("nodes", "pools", index, "gpuAllocation")


def _check_dra(config: GPUStack, profile: Profile, layers: list[Layer]) -> None:
    """What NVIDIA's DRA driver cannot do on this cluster is refused before anything renders."""
    stack = Stack(config, profile, "")
    if not stack.dra_enabled:
        return
    name = profile.metadata.name
    dra = config.dra
    version = config.platform.kubernetesVersion
    choice = _dra_choice(config)
    chosen = ".".join(str(part) for part in choice)
    mixed = stack.gpu_allocations == {"device-plugin", "dra"}
    if profile.facts.devicePluginProvider == "bottlerocket":
        _check_bottlerocket_dra(config, layers, choice)
    elif profile.facts.devicePluginProvider != "nvidia":
        raise UserError(
            f"the platform's own device plugin serves nvidia.com/gpu on every GPU node of profile "
            f"{name!r}: with the DRA driver beside it the GPUs would be handed out twice",
            nearest(layers, choice),
            field=chosen,
            hint=f"set {chosen}: device-plugin; DRA needs nodes without the platform's device "
            "plugin",
        )
    if kubernetes_minor(version) < DRA_MINIMUM_KUBERNETES:
        first_version = ".".join(map(str, DRA_MINIMUM_KUBERNETES))
        raise UserError(
            f"NVIDIA's DRA driver {dra.version} needs Kubernetes {first_version}.2 or later (DRA is "
            f"GA and on by default from {first_version}, resource.k8s.io/v1); the target is "
            f"{version}" + (f" and {chosen} is dra" if choice != ("gpuAllocation",) else ""),
            nearest(layers, ("platform", "kubernetesVersion")),
            field="platform.kubernetesVersion",
            hint=f'upgrade to Kubernetes {first_version} (platform.kubernetesVersion: "{first_version}"), '
            f"or set {chosen}: device-plugin",
        )
    exporter = config.dcgmExporter
    if (
        stack.dra_gpus
        and exporter.enabled
        and _version_tuple(exporter.version.split("-")[1]) < DCGM_EXPORTER_DRA_V1
    ):
        # In DRA mode (KUBERNETES_ENABLE_DRA, which gpustack sets on DRA nodes) the exporter
        # starts a ResourceSlice informer and waits for it before it serves anything
        # (NVIDIA/dcgm-exporter internal/pkg/transformation/dra.go, WaitForCacheSync without a
        # timeout). Before 4.8.3 that informer reads resource.k8s.io/v1beta1, a beta API that
        # Kubernetes 1.34 and later do not serve unless asked (KEP-3136); 4.6.0-4.8.3 reads
        # resource.k8s.io/v1 (NVIDIA/dcgm-exporter #590).
        first = ".".join(map(str, DCGM_EXPORTER_DRA_V1))
        raise UserError(
            f"dcgm-exporter {exporter.version} ties DRA-allocated GPUs to pods through "
            "resource.k8s.io/v1beta1 ResourceSlices, which Kubernetes 1.34 and later do not "
            "serve by default: in DRA mode it waits for them before serving anything, so it "
            "would never serve metrics",
            nearest(layers, ("dcgmExporter", "version")),
            field="dcgmExporter.version",
            hint=f"use the default, 4.6.0-4.8.3, or a later release: from exporter {first} "
            "it reads resource.k8s.io/v1",
        )
    if dra.gpus.enabled and config.devicePlugin.enabled and not mixed:
        raise UserError(
            "the device plugin and the DRA driver would both hand out the GPUs of the same "
            "nodes: each counts them free, so pods would be admitted to GPUs the other has "
            "already given away (the chart refuses it until KEP-5004 is GA)",
            nearest(layers, ("devicePlugin", "enabled")),
            field="devicePlugin.enabled",
            hint="remove devicePlugin.enabled (gpuAllocation: dra turns the plugin off), or set "
            "dra.gpus.enabled: false to run the DRA driver for ComputeDomains only",
        )
    if not dra.gpus.enabled and not stack.nvidia_plugin_serves:
        raise UserError(
            "with dra.gpus.enabled false and no device plugin, nothing hands GPUs to pods",
            nearest(layers, ("dra", "gpus", "enabled")),
            field="dra.gpus.enabled",
            hint="set dra.gpus.enabled: true, or devicePlugin.enabled: true for GPUs with "
            "the DRA driver serving ComputeDomains only",
        )
    if not dra.gpus.enabled and not dra.computeDomains.enabled:
        raise UserError(
            "gpuAllocation dra with neither dra.gpus nor dra.computeDomains enabled renders "
            "nothing of the DRA driver",
            nearest(layers, ("dra", "gpus", "enabled")),
            field="dra.gpus.enabled",
            hint="enable one of them, or set gpuAllocation: device-plugin",
        )
    _check_pool_allocation(config, layers, mixed=mixed, plugin_serves=stack.nvidia_plugin_serves)
    _check_dra_gates(config, layers)
    if stack.driver_container:
        known_driver = _version_tuple(config.driver.version)
        for feature, minimum in DRA_MINIMUM_DRIVER.items():
            if getattr(dra, feature).enabled and known_driver < _version_tuple(minimum):
                raise UserError(
                    f"dra.{feature} needs NVIDIA driver {minimum} or later; driver.version is "
                    f"{config.driver.version}",
                    nearest(layers, ("driver", "version")),
                    field="driver.version",
                    hint=f"set driver.version to {minimum} or later, or "
                    f"dra.{feature}.enabled: false",
                )
    if stack.smoke_test_allocation == "dra" and dra.gpus.enabled and config.smokeTest.resource:
        raise UserError(
            "with the DRA driver the smoke test claims a GPU of DeviceClass gpu.nvidia.com; "
            "nothing advertises an extended resource to request",
            nearest(layers, ("smokeTest", "resource")),
            field="smokeTest.resource",
            hint="remove smokeTest.resource",
        )


def _check_bottlerocket_dra(
    config: GPUStack, layers: list[Layer], choice: tuple[str | int, ...]
) -> None:
    """Bottlerocket's NVIDIA variants run NVIDIA's device plugin as a host service on every node;
    only a release that can turn it off (`enabled = false` in the node settings, which gpustack
    writes for the DRA nodes) may run the DRA driver."""
    chosen = ".".join(str(part) for part in choice)
    group = config.nodes.eks
    version = group.bottlerocketVersion if group else None
    first = ".".join(map(str, bottlerocket.PLUGIN_OFF_FROM))
    if version is None or _version_tuple(version) < bottlerocket.PLUGIN_OFF_FROM:
        raise UserError(
            "Bottlerocket runs NVIDIA's device plugin on every GPU node as a host service; with "
            "the DRA driver beside it the GPUs would be handed out twice, and only Bottlerocket "
            f"{first} or later can turn it off (settings.kubelet-device-plugins.nvidia.enabled)"
            + (f": nodes.eks.bottlerocketVersion is {version}" if version else ""),
            nearest(layers, ("nodes", "eks", "bottlerocketVersion") if version else choice),
            field="nodes.eks.bottlerocketVersion" if version else chosen,
            hint=f'run Bottlerocket {first} or later and say so (nodes.eks.bottlerocketVersion: "{first}"), '
            f"or set {chosen}: device-plugin",
        )


def _check_pool_allocation(
    config: GPUStack, layers: list[Layer], *, mixed: bool, plugin_serves: bool
) -> None:
    """Each pool's GPUs are handed out by what it chooses, which reads the pool's settings; with
    pools on the device plugin beside pools on the DRA driver (`mixed`), both must run."""
    for index, pool in enumerate(config.nodes.pools):
        here: tuple[str | int, ...] = ("nodes", "pools", index)
        allocation = config.pool_settings(pool).gpu_allocation
        if mixed and allocation == "dra" and not config.dra.gpus.enabled:
            raise UserError(
                f"pool {pool.name} takes its GPUs from the DRA driver, but dra.gpus.enabled is "
                "false: nothing would hand out the pool's GPUs",
                nearest(layers, (*here, "gpuAllocation")),
                field=f"nodes.pools.{index}.gpuAllocation",
                hint="set dra.gpus.enabled: true, or the pool's gpuAllocation: device-plugin",
            )
        if mixed and allocation == "device-plugin" and not plugin_serves:
            raise UserError(
                f"pool {pool.name} takes its GPUs from the device plugin, but "
                "devicePlugin.enabled is false: nothing would hand out the pool's GPUs",
                nearest(layers, (*here, "gpuAllocation")),
                field=f"nodes.pools.{index}.gpuAllocation",
                hint="remove devicePlugin.enabled: false, or the pool's gpuAllocation",
            )
        plugin = pool.devicePlugin
        if allocation == "dra" and config.dra.gpus.enabled and plugin is not None:
            setting = "migStrategy" if plugin.migStrategy is not None else "sharing"
            raise UserError(
                f"pool {pool.name} takes its GPUs from the DRA driver, which reads no device "
                f"plugin settings: devicePlugin.{setting} would change nothing on its nodes",
                nearest(layers, (*here, "devicePlugin", setting)),
                field=f"nodes.pools.{index}.devicePlugin.{setting}",
                hint="remove the pool's devicePlugin (a DRA claim picks MIG devices by "
                "DeviceClass mig.nvidia.com; the DRA driver's sharing is its feature gates "
                "TimeSlicingSettings and MPSSupport), or set its gpuAllocation: device-plugin",
            )


# Kubernetes locks DRAExtendedResource on from 1.37 (GA): an API server told otherwise refuses
# to start (kubernetes pkg/features DRAExtendedResource LockToDefault, KEP-5004).
EXTENDED_RESOURCE_LOCKED_FROM = (1, 37)


def _check_kubernetes_gates(config: GPUStack, profile: Profile, layers: list[Layer]) -> None:
    """`platform.featureGates` names what the cluster runs with; a gate that changes nothing
    gpustack renders, or that the release does not let be set, is refused."""
    gates = config.platform.featureGates
    if "DRAExtendedResource" not in gates:
        return
    field = "platform.featureGates.DRAExtendedResource"
    location = nearest(layers, ("platform", "featureGates", "DRAExtendedResource"))
    version = config.platform.kubernetesVersion
    if not Stack(config, profile, "").dra_gpus:
        raise UserError(
            "DRAExtendedResource decides only whether the gpu.nvidia.com DeviceClass names "
            "nvidia.com/gpu, and no such DeviceClass is rendered (no GPU is handed out through "
            "NVIDIA's DRA driver): the setting would change nothing",
            location,
            field=field,
            hint="remove it, or hand GPUs out through DRA (gpuAllocation: dra, the cluster's or "
            "a pool's, with dra.gpus.enabled)",
        )
    if not gates["DRAExtendedResource"] and kubernetes_minor(version) >= (
        EXTENDED_RESOURCE_LOCKED_FROM
    ):
        first = ".".join(map(str, EXTENDED_RESOURCE_LOCKED_FROM))
        raise UserError(
            f"DRAExtendedResource is GA and locked on from Kubernetes {first} (the target is "
            f"{version}): an API server told to turn it off does not start",
            location,
            field=field,
            hint="remove it: the release keeps it on",
        )


def _check_dra_gates(config: GPUStack, layers: list[Layer]) -> None:
    gates = config.dra.featureGates

    def at(gate: str) -> Location | None:
        return nearest(layers, ("dra", "featureGates", gate))

    for gate, needed in DRA_GATE_NEEDS.items():
        if dra_gate_enabled(config, gate) and not dra_gate_enabled(config, needed):
            culprit = needed if needed in gates else gate
            raise UserError(
                f"the DRA driver's feature gate {gate} needs {needed}; the driver refuses to "
                "start without it",
                at(culprit),
                field=f"dra.featureGates.{culprit}",
                hint=f"set dra.featureGates.{needed}: true, or {gate}: false",
            )
    for first, second in DRA_GATES_EXCLUSIVE:
        if dra_gate_enabled(config, first) and dra_gate_enabled(config, second):
            raise UserError(
                f"the DRA driver's feature gates {first} and {second} exclude each other; the "
                "driver refuses to start with both",
                at(second),
                field=f"dra.featureGates.{second}",
                hint=f"turn one of {first} and {second} off",
            )
    version = config.platform.kubernetesVersion
    for gate, (cluster_gate, default_from) in DRA_GATE_NEEDS_CLUSTER.items():
        if (
            dra_gate_enabled(config, gate)
            and kubernetes_minor(version) < default_from
            and cluster_gate not in config.dra.clusterFeatureGates
        ):
            since = ".".join(map(str, default_from))
            raise UserError(
                f"the DRA driver's {gate} needs the Kubernetes feature gate {cluster_gate} on "
                f"kube-apiserver and kube-scheduler, off by default before {since}; "
                f"Kubernetes {version} drops the devices {gate} publishes",
                at(gate),
                field=f"dra.featureGates.{gate}",
                hint=f"turn {cluster_gate} on in the control plane and list it in "
                f"dra.clusterFeatureGates, target Kubernetes {since}, or set {gate}: false",
            )


def _check_validator(config: GPUStack, profile: Profile, layers: list[Layer]) -> None:
    path = ("validator", "enabled")
    defaults = profile.defaults.get("validator")
    # A profile whose nodes the validator cannot serve says so (eks-bottlerocket: the OS runs
    # the driver and device plugin as host services).
    profile_off = isinstance(defaults, dict) and defaults.get("enabled") is False
    if (
        config.validator.enabled is False
        and set_by_user(layers, path)
        and not profile_off
        and validator_finds_driver(config, profile)
    ):
        # The GPU Operator has no switch for its validator (api/nvidia/v1/clusterpolicy_types.go
        # ValidatorSpec, v26.7.0): it is what every GPU DaemonSet waits on, and its driver
        # validation is what creates the /dev/char symlinks where no toolkit DaemonSet does.
        stack = Stack(config, profile, "")
        lost = []
        if not stack.toolkit_enabled and config.nodes.cgroupDriver == "systemd":
            lost.append(
                "the /dev/char symlinks of NVIDIA's device nodes, which nothing else here "
                "creates (with the systemd cgroup driver running GPU pods lose their GPUs at the "
                "next systemctl daemon-reload)"
            )
        lost.append(
            "the wait of the device plugin, GFD, the DCGM exporter and the MIG manager for the "
            "driver and the runtime (after every reboot and driver upgrade they would start "
            "first and crash-loop into minutes of back-off, advertising nothing meanwhile)"
        )
        raise UserError(
            "turning the validator off would remove " + " and ".join(lost) + "; NVIDIA's GPU "
            "Operator has no switch for its validator",
            nearest(layers[1:], path),
            field="validator.enabled",
            hint="remove it (auto deploys the validator here); validator.cudaWorkload: false "
            "skips its CUDA pod",
        )
    if config.validator.enabled is True and not validator_finds_driver(config, profile):
        raise UserError(
            f"NVIDIA's validator cannot validate the driver on profile "
            f"{profile.metadata.name!r}: it finds a driver on the host's root or in a driver "
            f"container ({DRIVER_CONTAINER_ROOT}) only, and its runtime validation needs an "
            "nvidia runtime",
            nearest(layers, ("validator", "enabled")),
            field="validator.enabled",
            hint="set validator.enabled: auto",
        )


def _check_node_status_exporter(config: GPUStack, profile: Profile, layers: list[Layer]) -> None:
    """The exporter reports the validator's ready files: without the validator every node would
    read as failing. A profile's default (the first layer) gives way silently; the user's own
    setting is refused."""
    path = ("nodeStatusExporter", "enabled")
    if not config.nodeStatusExporter.enabled or not set_by_user(layers, path):
        return
    if not Stack(config, profile, "").validator_enabled:
        raise UserError(
            "nodeStatusExporter.enabled needs NVIDIA's validator, whose ready files it reports; "
            f"the validator is off here (profile {profile.metadata.name!r})",
            nearest(layers[1:], path),
            field="nodeStatusExporter.enabled",
            hint="set nodeStatusExporter.enabled: false, or validator.enabled: true where the "
            "validator finds the driver",
        )


def _platform_nodes(
    config: GPUStack,
    profile: Profile,
    layers: list[Layer],
    section: str,
    mechanism: str,
    what: str,
    needs: str,
    hint: str,
) -> Any:
    """`nodes.<section>`, the GPU nodes' settings of the platform whose `node/` files take them
    (its taint mechanism): refused on other profiles, required on its own. None elsewhere."""
    settings = getattr(config.nodes, section)
    name = profile.metadata.name
    if profile.facts.taintMechanism != mechanism:
        if settings is not None:
            raise UserError(
                f"{what} settings do not apply to profile {name!r}",
                nearest(layers, ("nodes", section), key=True),
                field=f"nodes.{section}",
            )
        return None
    if settings is None:
        raise UserError(
            f"profile {name!r} needs {needs}",
            nearest(layers, ("nodes",)),
            field=f"nodes.{section}",
            hint=hint,
        )
    return settings


def _check_gke_node_pool(config: GPUStack, profile: Profile, layers: list[Layer]) -> None:
    """The pool's machine type must take its GPUs, and what the config says about sharing and
    MIG must become pool settings, or be refused: GKE's device plugin reads nothing else."""
    pool = _platform_nodes(
        config,
        profile,
        layers,
        "gke",
        "gke-node-pool",
        "GKE node pool",
        "the GPU node pool's machine type and accelerator",
        "e.g. nodes: {gke: {machineType: g2-standard-8, accelerator: {type: nvidia-l4, count: 1}}}",
    )
    if pool is None:
        return
    _check_gke_accelerator(pool, ("nodes", "gke"), layers)
    _check_gke_translation(config, layers)


def _check_gke_accelerator(
    pool: GKENodePool, where: tuple[str | int, ...], layers: list[Layer]
) -> None:
    """The pool's machine type takes its GPUs, in a count and partition size GKE offers."""
    dotted = ".".join(str(part) for part in where)
    accelerator = pool.accelerator
    here = (*where, "accelerator")
    if accelerator.type not in gke_accelerators.accelerator_types():
        raise UserError(
            f"unknown GKE accelerator type {accelerator.type!r}",
            nearest(layers, (*here, "type")),
            field=f"{dotted}.accelerator.type",
            hint=did_you_mean(accelerator.type, gke_accelerators.accelerator_types())
            or f"one of: {', '.join(gke_accelerators.accelerator_types())}",
        )
    problem = gke_accelerators.machine_type_problem(accelerator.type, pool.machineType)
    if problem:
        raise UserError(problem, nearest(layers, (*where, "machineType")), f"{dotted}.machineType")
    problem = gke_accelerators.count_problem(accelerator.type, pool.machineType, accelerator.count)
    if problem:
        raise UserError(problem, nearest(layers, (*here, "count")), f"{dotted}.accelerator.count")
    size = accelerator.gpuPartitionSize
    sizes = gke_accelerators.partition_sizes(accelerator.type)
    if size is not None and size not in sizes:
        raise UserError(
            f"GKE does not partition {accelerator.type} into {size}"
            if sizes
            else f"GKE does not partition {accelerator.type} GPUs (no MIG)",
            nearest(layers, (*here, "gpuPartitionSize")),
            field=f"{dotted}.accelerator.gpuPartitionSize",
            hint=f"one of: {', '.join(sizes)}" if sizes else None,
        )


def _check_aks_node_pool(config: GPUStack, profile: Profile, layers: list[Layer]) -> None:
    """The AKS pool command in node/ needs the pool's VM size; other platforms take none."""
    _platform_nodes(
        config,
        profile,
        layers,
        "aks",
        "aks-node-pool",
        "AKS node pool",
        "the GPU node pool's VM size",
        "e.g. nodes: {aks: {vmSize: Standard_NC4as_T4_v3}}",
    )


def _check_gke_translation(
    config: GPUStack, layers: list[Layer], pool: NodePool | None = None, index: int = 0
) -> None:
    """The cluster's (or one pool's) sharing and MIG settings as a GKE node pool takes them."""
    plugin = config.devicePlugin
    settings = config.pool_settings(pool)
    gke, mig_strategy, sharing = settings.gke, settings.mig_strategy, settings.sharing
    size = gke.accelerator.gpuPartitionSize if gke else None
    own = pool.devicePlugin if pool else None
    base = ("nodes", "pools", index, "devicePlugin") if own else ("devicePlugin",)
    strategy = (
        (*base, "migStrategy")
        if own is None or own.migStrategy
        else ("devicePlugin", "migStrategy")
    )
    shared = (*base, "sharing") if own is None or own.sharing else ("devicePlugin", "sharing")
    dotted = ".".join(str(part) for part in strategy)
    shared_dotted = ".".join(str(part) for part in shared)
    partition = (
        f"nodes.pools.{index}.gke.accelerator.gpuPartitionSize"
        if pool and pool.gke
        else "nodes.gke.accelerator.gpuPartitionSize"
    )
    if mig_strategy != "none" and size is None:
        raise UserError(
            f"MIG strategy {mig_strategy!r} on GKE needs MIG partitions, which GKE creates "
            "from the node pool's partition size (there is no MIG manager on GKE)",
            nearest(layers, strategy),
            field=dotted,
            hint=f"set {partition}, e.g. 1g.10gb",
        )
    if plugin.enabled:
        return  # NVIDIA's plugin reads its own sharing and MIG settings (its ConfigMap).
    if mig_strategy == "mixed":
        raise UserError(
            "GKE's device plugin advertises every MIG partition as nvidia.com/gpu, which is "
            "strategy 'single'; 'mixed' cannot be set on a GKE node pool",
            nearest(layers, strategy),
            field=dotted,
            hint="use migStrategy: single",
        )
    if size is not None and mig_strategy == "none":
        raise UserError(
            "the node pool partitions its GPUs "
            f"({partition}) and "
            "GKE's device plugin advertises each partition as one nvidia.com/gpu: that is MIG "
            "strategy 'single'",
            nearest(layers, strategy),
            field=dotted,
            hint=f"set {dotted}: single",
        )
    if sharing.strategy != "none" and sharing.renameByDefault:
        raise UserError(
            "GKE's device plugin always advertises shared GPUs as nvidia.com/gpu",
            nearest(layers, (*shared, "renameByDefault")),
            field=f"{shared_dotted}.renameByDefault",
            hint="remove renameByDefault, or run NVIDIA's device plugin on the pool",
        )
    if sharing.strategy == "time-slicing" and not sharing.failRequestsGreaterThanOne:
        raise UserError(
            "GKE refuses containers that request more than one time-shared GPU",
            nearest(layers, (*shared, "failRequestsGreaterThanOne")),
            field=f"{shared_dotted}.failRequestsGreaterThanOne",
            hint="remove failRequestsGreaterThanOne, or run NVIDIA's device plugin on the pool",
        )


def _check_eks_node_group(config: GPUStack, profile: Profile, layers: list[Layer]) -> None:
    """The node group's settings, and on Bottlerocket what the config says about the device
    plugin, must become node settings Bottlerocket honours, or be refused: its plugin reads
    nothing else."""
    group = _platform_nodes(
        config,
        profile,
        layers,
        "eks",
        "eks-node-group",
        "EKS node group",
        "the GPU node group's instance type",
        "e.g. nodes: {eks: {instanceType: g6.xlarge}}",
    )
    if group is None:
        return
    name = profile.metadata.name
    if group.migProfile and profile.facts.migPartitioning != "node-settings":
        raise UserError(
            f"MIG profiles are Bottlerocket settings; on profile {name!r} NVIDIA's MIG manager "
            "partitions the GPUs from the node label nvidia.com/mig.config",
            nearest(layers, ("nodes", "eks", "migProfile"), key=True),
            field="nodes.eks.migProfile",
            hint="remove nodes.eks.migProfile and set migManager.defaultConfig",
        )
    if profile.facts.devicePluginProvider == "bottlerocket":
        _check_bottlerocket_translation(config, layers)


def _check_bottlerocket_translation(config: GPUStack, layers: list[Layer]) -> None:
    plugin = config.devicePlugin
    profiles = config.nodes.eks.migProfile if config.nodes.eks else {}
    strategy = ("devicePlugin", "migStrategy")
    if plugin.migStrategy != "none" and plugin.migStrategy not in bottlerocket.PARTITIONING:
        raise UserError(
            f"Bottlerocket's device plugin knows MIG strategy 'single' only (its "
            f"device-partitioning-strategy 'mig'), not {plugin.migStrategy!r}",
            nearest(layers, strategy),
            field="devicePlugin.migStrategy",
            hint="use migStrategy: single",
        )
    if plugin.migStrategy == "single" and not profiles:
        raise UserError(
            "MIG on Bottlerocket needs the MIG profile of each GPU model, which Bottlerocket's "
            "MIG manager applies at boot (settings.kubelet-device-plugins.nvidia.mig.profile)",
            nearest(layers, strategy),
            field="devicePlugin.migStrategy",
            hint='set nodes.eks.migProfile, e.g. {a100.40gb: 1g.5gb, h100.80gb: "7"}',
        )
    if profiles and plugin.migStrategy == "none":
        raise UserError(
            "has no effect without MIG: Bottlerocket partitions GPUs only with "
            "devicePlugin.migStrategy single",
            nearest(layers, ("nodes", "eks", "migProfile"), key=True),
            field="nodes.eks.migProfile",
            hint="set devicePlugin.migStrategy: single, or remove nodes.eks.migProfile",
        )
    listed = plugin.deviceListStrategy
    if listed != "auto" and listed not in bottlerocket.DEVICE_LIST_STRATEGIES:
        raise UserError(
            f"Bottlerocket's device plugin has no device list strategy {listed!r}",
            nearest(layers, ("devicePlugin", "deviceListStrategy")),
            field="devicePlugin.deviceListStrategy",
            hint=f"one of: auto (Bottlerocket's default, volume-mounts), "
            f"{', '.join(bottlerocket.DEVICE_LIST_STRATEGIES)}",
        )
    version = tuple(int(part) for part in config.platform.kubernetesVersion.split("."))
    if listed == "cdi-cri" and version < bottlerocket.CDI_CRI_FROM:
        raise UserError(
            f"with device list strategy 'cdi-cri' GPUs reach pods only through the CRI's CDI "
            f"field, which the kubelet of Kubernetes {config.platform.kubernetesVersion} drops "
            "(it passes it from 1.29): GPU pods would start without their GPUs",
            nearest(layers, ("devicePlugin", "deviceListStrategy")),
            field="devicePlugin.deviceListStrategy",
            hint="use auto (volume-mounts) or envvar, or target Kubernetes 1.29 or later",
        )
    # Settings of a DaemonSet that does not exist would be dropped silently. The version also
    # names GFD's image, so it stands while gpustack renders GFD.
    for field, why, hint in (
        (
            "resources",
            "Bottlerocket's plugin is a host service, not a pod",
            "remove devicePlugin.resources",
        ),
        (
            "version",
            "Bottlerocket's plugin comes with the Bottlerocket release",
            "remove devicePlugin.version; the node group's Bottlerocket release picks the "
            "plugin's (it names GFD's image only while GFD runs)",
        ),
    ):
        if field == "version" and config.gfd.enabled:
            continue
        # What the cluster writes: a base may hold them for the clusters that run a pod.
        if set_by_user([layers[0], *own_layers(layers)], ("devicePlugin", field)):
            raise UserError(
                f"has no effect: {why}",
                nearest(layers[1:], ("devicePlugin", field), key=True),
                field=f"devicePlugin.{field}",
                hint=hint,
            )


def _check_mig_manager(
    config: GPUStack, profile: Profile, layers: list[Layer], user_configs: mig.Configs | None
) -> None:
    settings = config.migManager
    by_settings = profile.facts.migPartitioning == "node-settings"
    if settings.enabled is True and profile.facts.migPartitioning != "mig-manager":
        raise UserError(
            f"on profile {profile.metadata.name!r} the "
            + ("node OS" if by_settings else "node pool")
            + " creates the MIG partitions itself; NVIDIA's MIG manager would fight it",
            nearest(layers, ("migManager", "enabled")),
            field="migManager.enabled",
            hint="remove migManager.enabled and set "
            + (
                "the node group's MIG profiles (nodes.eks.migProfile)"
                if by_settings
                else "the pool's partition size (nodes.gke.accelerator.gpuPartitionSize)"
            ),
        )
    if not Stack(config, profile, "").mig_manager_enabled:
        # A setting of a component that is not deployed would be dropped silently. (Looked up
        # in the data first: positions cost a parse, and only an error needs one.)
        for field in ("defaultConfig", "withReboot", "version", "config"):
            # What the cluster writes: a base may hold them for the clusters that run it.
            if any(
                isinstance(layer.data.get("migManager"), dict)
                and layer.data["migManager"].get(field) is not None
                for layer in own_layers(layers)
            ):
                written = nearest(layers[1:], ("migManager", field), key=True)
                why = (
                    "it runs with a MIG strategy, devicePlugin.migStrategy single or mixed, or "
                    "migManager.enabled: true"
                    if profile.facts.migPartitioning == "mig-manager"
                    else f"on profile {profile.metadata.name!r} the "
                    + ("node OS" if by_settings else "node pool")
                    + " partitions GPUs"
                )
                raise UserError(
                    f"has no effect: the MIG manager is not deployed ({why})",
                    written,
                    field=f"migManager.{field}",
                )
        for index, pool in enumerate(config.nodes.pools):
            if pool.migManager is not None:
                raise UserError(
                    f"pool {pool.name}: has no effect: the MIG manager is not deployed",
                    nearest(layers, ("nodes", "pools", index, "migManager"), key=True),
                    field=f"nodes.pools.{index}.migManager",
                )
        return
    known = {**mig.builtin_configs(), **(user_configs or {})}
    if settings.defaultConfig not in known:
        raise UserError(
            f"no MIG config named {settings.defaultConfig!r} (neither built in nor in "
            "migManager.config.file)",
            nearest(layers, ("migManager", "defaultConfig")),
            field="migManager.defaultConfig",
            hint=did_you_mean(settings.defaultConfig, sorted(known)),
        )
    for index, pool in enumerate(config.nodes.pools):
        layout = pool.migManager.defaultConfig if pool.migManager else None
        if layout is not None and layout not in known:
            raise UserError(
                f"pool {pool.name}: no MIG config named {layout!r} (neither built in nor in "
                "migManager.config.file)",
                nearest(layers, ("nodes", "pools", index, "migManager", "defaultConfig")),
                field=f"nodes.pools.{index}.migManager.defaultConfig",
                hint=did_you_mean(layout, sorted(known)),
            )


def _named_file(
    layers: list[Layer], path: tuple[str, ...], written: str, what: str, hint: str | None = None
) -> tuple[Path, Location]:
    """The file a path setting names, relative to the folder of the layer that wrote it, and
    where it is written; checked before anything is read: a file a config, base or profile
    names lies in its repository (named_files). A path given with `--set` (a layer of no file)
    is the user's own, relative to the working folder."""
    owner = next((layer for layer in reversed(layers) if _writes(layer.data, path)), None)
    location = nearest(layers, path)
    if owner is None or owner.directory is None:
        return Path.cwd() / written, location
    inside_repository(owner.directory, written, location, ".".join(path), what, hint)
    return owner.directory / written, location


def _writes(data: Any, path: tuple[str, ...]) -> bool:
    for key in path:
        if not isinstance(data, dict) or key not in data:
            return False
        data = data[key]
    return True


def _read_mig_configs(config: GPUStack, layers: list[Layer]) -> mig.Configs:
    file, location = _named_file(
        layers,
        ("migManager", "config", "file"),
        str(config.migManager.config.file),
        "MIG config file",
    )
    try:
        raw = read_bounded(file, what="a mig-parted config", location=location)
    except UserError as error:
        # The file as a whole (missing, a folder, a FIFO, a link to nothing): said for what it is.
        if error.message.endswith(": file not found"):
            error = UserError(f"MIG config file {display_path(file)} not found", location)
        raise UserError(
            error.message, error.location, "migManager.config.file", error.hint
        ) from None
    try:
        text = decode(raw, str(file))
        document = load_text(text, display_path(file))
    except UserError as error:
        if error.location is not None and error.location.line:
            # A YAML error may quote what it stumbled on (a key, a tag, an alias): the file
            # is named with the place, never with its content.
            error = UserError(
                "not valid YAML, expected a mig-parted config; its content is not shown",
                error.location,
            )
        raise UserError(
            error.message, error.location, "migManager.config.file", error.hint
        ) from None
    return mig.parse_user_configs(document)


def _read_pem(config: GPUStack, layers: list[Layer]) -> tuple[bytes, int]:
    """The PEM's bytes and permission bits. Nothing of its content is ever quoted in an error."""
    pem_path, location = _named_file(
        layers,
        ("entitlement", "pemFile"),
        str(config.entitlement.pemFile),
        "entitlement PEM",
        hint="a certificate kept outside the repository is named on the command line: "
        "--set entitlement.pemFile=PATH",
    )
    try:
        content = read_bounded(pem_path, 1024 * 1024, "an entitlement PEM", location=location)
        mode = stat.S_IMODE(os.stat(pem_path).st_mode)
    except UserError as error:
        if error.message.endswith(": file not found"):
            error = UserError(f"entitlement PEM {display_path(pem_path)} not found", location)
        raise UserError(error.message, error.location, "entitlement.pemFile") from None
    except OSError:
        raise UserError(
            f"cannot read entitlement PEM {display_path(pem_path)}", location, "entitlement.pemFile"
        ) from None
    if b"-----BEGIN" not in content:
        raise UserError(
            f"{display_path(pem_path)} is not a PEM file (no '-----BEGIN' line)",
            location,
            "entitlement.pemFile",
        )
    return content, mode


# Label namespaces a kubelet may not put on its own Node (the kubelet refuses such
# `--node-labels` at start and the NodeRestriction admission plugin refuses the update: KEP
# "Bounding Self-Labeling Kubelets"), except the labels and namespaces it allows
# (k8s.io/kubelet pkg/apis well_known_labels.go kubeletLabels, kubeletLabelNamespaces and
# IsKubeletLabel, Kubernetes v1.31).
_RESTRICTED_LABEL_DOMAINS = ("kubernetes.io", "k8s.io")
_KUBELET_LABELS = frozenset(
    {
        "kubernetes.io/hostname",
        "kubernetes.io/arch",
        "kubernetes.io/os",
        "beta.kubernetes.io/arch",
        "beta.kubernetes.io/os",
        "beta.kubernetes.io/instance-type",
        "node.kubernetes.io/instance-type",
        "failure-domain.beta.kubernetes.io/region",
        "failure-domain.beta.kubernetes.io/zone",
        "topology.kubernetes.io/region",
        "topology.kubernetes.io/zone",
    }
)
_KUBELET_LABEL_NAMESPACES = ("kubelet.kubernetes.io", "node.kubernetes.io")
# The profiles whose node files make the kubelet label its own Node (--node-labels).
_SELF_LABELLING = ("kubeadm-join", "rke2-agent-config")


def kubelet_may_set(key: str) -> bool:
    """Whether a kubelet may put this label on its own Node (NodeRestriction)."""
    domain = key.partition("/")[0] if "/" in key else ""

    def within(namespaces: tuple[str, ...]) -> bool:
        return any(domain == each or domain.endswith("." + each) for each in namespaces)

    return (
        not within(_RESTRICTED_LABEL_DOMAINS)
        or key in _KUBELET_LABELS
        or within(_KUBELET_LABEL_NAMESPACES)
    )


def selectors_overlap(first: dict[str, str], second: dict[str, str]) -> bool:
    """Whether one node can carry both matchLabels selectors' labels: unless some key has a
    different value in each, a node with the union of both label sets matches both."""
    return all(second[key] == value for key, value in first.items() if key in second)


# Names a pool cannot take, because gpustack names something else so where pools' names go.
# A pool's name is its device plugin config's name (a key of the plugin's ConfigMap and the
# value of its nodes' nvidia.com/device-plugin.config label); `default` is the config of the nodes
# in no pool, which the config manager falls back to (DEFAULT_CONFIG): a pool of that name would
# replace it, and every GPU node outside the pools would silently take the pool's settings.
RESERVED_POOL_NAMES = {
    DEFAULT_CONFIG: "it names the device plugin config of the GPU nodes in no pool, which a "
    "pool of that name would replace (every node outside the pools would take its settings)",
}


# The most driver DaemonSets a config may render: one per RHCOS build for the cluster and for each
# pool with a driver of its own (gpustack.build.components.driver). A real cluster needs a few dozen;
# the bound keeps a crafted config's output (and its lint) from running into the tens of thousands.
MAX_DRIVER_DAEMONSETS = 512


def _check_driver_daemonsets(config: GPUStack, stack: Stack, layers: list[Layer]) -> None:
    if not stack.driver_container:
        return
    own = sum(
        1 for pool in config.nodes.pools if pool.canary or (pool.driver and pool.driver.version)
    )
    builds = len(config.driver.rhcosBuilds) if stack.driver_mode == "driver-toolkit" else 0
    count = (own + 1) * max(builds, 1)
    if count <= MAX_DRIVER_DAEMONSETS:
        return
    where = ("driver", "rhcosBuilds") if builds > 1 else ("nodes", "pools")
    raise UserError(
        f"would render {count} driver DaemonSets (the cluster's and those of {own} pools with a "
        f"driver of their own, for each of {max(builds, 1)} RHCOS builds), more than the "
        f"{MAX_DRIVER_DAEMONSETS} gpustack renders for one cluster",
        nearest(layers, where),
        field=".".join(where),
        hint="give fewer pools a driver of their own (canary, driver.version), or list only the "
        "RHCOS builds the nodes run",
    )


def _check_pools(config: GPUStack, profile: Profile, layers: list[Layer]) -> None:
    """Each pool's settings apply to the profile, and each GPU node belongs to one pool at most."""
    pools = config.nodes.pools
    name = profile.metadata.name
    stack = Stack(config, profile, "")
    _check_driver_daemonsets(config, stack, layers)
    gpu_nodes = Stack(config, profile, "").gpu_node_selector
    for index, pool in enumerate(pools):
        here: tuple[str | int, ...] = ("nodes", "pools", index)
        dotted = f"nodes.pools.{index}"
        if pool.name in RESERVED_POOL_NAMES:
            raise UserError(
                f"pool name {pool.name!r} is reserved: {RESERVED_POOL_NAMES[pool.name]}",
                nearest(layers, (*here, "name")),
                field=f"{dotted}.name",
                hint=f"name the pool otherwise, e.g. {pool.name}-gpu",
            )
        if pool.driver and pool.driver.version and not stack.driver_container:
            raise UserError(
                f"pool {pool.name}: a driver version applies only where gpustack runs the driver "
                f"as a container (driver.mode container or driver-toolkit); here the driver mode "
                f"is {stack.driver_mode}, whose driver the nodes or the platform install",
                nearest(layers, (*here, "driver", "version")),
                field=f"{dotted}.driver.version",
                hint="remove the pool's driver section, and install that driver on the pool's "
                "nodes",
            )
        own_driver = pool.canary or (pool.driver and pool.driver.version)
        if own_driver and stack.driver_container:
            # The pool's driver DaemonSet is `nvidia-driver-daemonset-<pool>[-<RHCOS build>]`
            # or `...-<pool>-<kernel>` (gpustack.build.components.driver), its name also a label
            # value: at most 63 characters.
            builds = [build.rhcosVersion for build in config.driver.rhcosBuilds] or [
                config.driver.rhcosVersion or ""
            ]
            builds += config.driver.kernelVersions
            longest = max(len(build) + 1 if build else 0 for build in builds)
            if len(f"nvidia-driver-daemonset-{pool.name}") + longest > 63:
                suffix = "-<kernel>" if config.driver.kernelVersions else "-<RHCOS build>"
                raise UserError(
                    f"pool {pool.name} gets a driver DaemonSet of its own, whose name "
                    f"(nvidia-driver-daemonset-{pool.name}"
                    + (suffix if longest else "")
                    + ") would be longer than 63 characters",
                    nearest(layers, (*here, "name")),
                    field=f"{dotted}.name",
                    hint=f"a pool name of at most {63 - 24 - longest} characters"
                    if 63 - 24 - longest > 0
                    else "the longest "
                    + ("kernel release" if config.driver.kernelVersions else "RHCOS build")
                    + " leaves no room for a pool's name: run this pool on the cluster's "
                    "driver, with no canary and no driver.version of its own",
                )
        if pool.gke is not None and profile.facts.taintMechanism != "gke-node-pool":
            raise UserError(
                f"GKE node pool settings do not apply to profile {name!r}",
                nearest(layers, (*here, "gke"), key=True),
                field=f"{dotted}.gke",
            )
        if profile.facts.taintMechanism == "gke-node-pool":
            if pool.gke is not None:
                _check_gke_accelerator(pool.gke, (*here, "gke"), layers)
            _check_gke_translation(config, layers, pool, index)
        if profile.facts.taintMechanism in _SELF_LABELLING:
            for key in pool.selector:
                if not kubelet_may_set(key):
                    raise UserError(
                        f"pool {pool.name}: the kubelet may not label its own Node with {key} "
                        "(the NodeRestriction admission plugin keeps kubernetes.io and k8s.io "
                        "labels for the control plane), so the pool's node files could never "
                        "give its nodes this label",
                        nearest(layers, (*here, "selector", key), key=True),
                        field=f"{dotted}.selector",
                        hint="use a label of your own domain, e.g. example.com/gpu-pool: "
                        f"{pool.name}",
                    )
        for key, value in pool.selector.items():
            wanted = config.nodes.selector.get(key)
            allowed = next(
                (
                    list(each.values)
                    for each in gpu_nodes
                    if each.key == key and each.operator == "In"
                ),
                None,
            )
            if (wanted is not None and wanted != value) or (
                allowed is not None and value not in allowed
            ):
                shown = wanted if wanted is not None else ", ".join(allowed or [])
                raise UserError(
                    f"pool {pool.name} selects {key}={value}, but GPU nodes carry {key}={shown} "
                    "(nodes.selector and the profile's GPU node label): the pool can have no "
                    "GPU node",
                    nearest(layers, (*here, "selector", key)),
                    field=f"{dotted}.selector",
                    hint="select the pool's nodes by a label that GPU nodes may carry",
                )
        for other in pools[:index]:
            if selectors_overlap(other.selector, pool.selector):
                raise UserError(
                    f"pools {other.name} and {pool.name} can both claim a node: their selectors "
                    "differ in no key's value, so a node with both sets of labels is in both, "
                    "and would get two device plugin configs and MIG layouts",
                    nearest(layers, (*here, "selector")),
                    field=f"{dotted}.selector",
                    hint="give both pools the same label key with a different value each, e.g. "
                    f"example.com/gpu-pool: {other.name} and example.com/gpu-pool: {pool.name}",
                )
