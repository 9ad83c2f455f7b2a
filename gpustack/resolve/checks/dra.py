"""The checks of NVIDIA's DRA driver: what it needs of Kubernetes, the NVIDIA driver, the device
plugin beside it (a platform's own, Bottlerocket's) and the DCGM exporter, what each pool hands
its GPUs out with, and the feature gates, the driver's own and the cluster's."""

from __future__ import annotations

from gpustack.config.model import GPUStack
from gpustack.errors import Location, UserError
from gpustack.resolve import bottlerocket
from gpustack.resolve.checks.context import CheckContext, version_tuple
from gpustack.resolve.stack import dra_gate_enabled, kubernetes_minor

# NVIDIA's DRA driver for GPUs (kubernetes-sigs/dra-driver-nvidia-gpu v0.4.1,
# docs/prerequisites.md): Kubernetes v1.34.2 or later, where DRA is GA and on by default; driver
# 565 or later for GPU allocation, 570.158.01 or later for ComputeDomains.
DRA_MINIMUM_KUBERNETES = (1, 34)
DRA_MINIMUM_DRIVER = {"gpus": "565", "computeDomains": "570.158.01"}

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


def check_dra(context: CheckContext) -> None:
    """What NVIDIA's DRA driver cannot do on this cluster is refused before anything renders."""
    if not context.stack.dra_enabled:
        return
    _check_cluster(context)
    _check_allocation(context)
    _check_dra_gates(context)
    _check_driver_and_smoke_test(context)


def _check_cluster(context: CheckContext) -> None:
    """The device plugin the platform runs beside the DRA driver, the Kubernetes release, and
    the DCGM exporter that ties its GPUs to pods."""
    config, stack, at = context.config, context.stack, context.at
    dra = config.dra
    version = config.platform.kubernetesVersion
    choice = _dra_choice(config)
    chosen = ".".join(str(part) for part in choice)
    if context.facts.devicePluginProvider == "bottlerocket":
        _check_bottlerocket_dra(context, choice)
    elif context.facts.devicePluginProvider != "nvidia":
        raise UserError(
            f"the platform's own device plugin serves nvidia.com/gpu on every GPU node of profile "
            f"{context.name!r}: with the DRA driver beside it the GPUs would be handed out twice",
            at(choice),
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
            at(("platform", "kubernetesVersion")),
            field="platform.kubernetesVersion",
            hint=f'upgrade to Kubernetes {first_version} (platform.kubernetesVersion: "{first_version}"), '
            f"or set {chosen}: device-plugin",
        )
    exporter = config.dcgmExporter
    if (
        stack.dra_gpus
        and exporter.enabled
        and version_tuple(exporter.version.split("-")[1]) < DCGM_EXPORTER_DRA_V1
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
            at(("dcgmExporter", "version")),
            field="dcgmExporter.version",
            hint=f"use the default, 4.6.0-4.8.3, or a later release: from exporter {first} "
            "it reads resource.k8s.io/v1",
        )


def _check_allocation(context: CheckContext) -> None:
    """Something hands out every node's GPUs, and only one thing each node's."""
    config, stack, at = context.config, context.stack, context.at
    dra = config.dra
    mixed = stack.gpu_allocations == {"device-plugin", "dra"}
    if dra.gpus.enabled and config.devicePlugin.enabled and not mixed:
        raise UserError(
            "the device plugin and the DRA driver would both hand out the GPUs of the same "
            "nodes: each counts them free, so pods would be admitted to GPUs the other has "
            "already given away (the chart refuses it until KEP-5004 is GA)",
            at(("devicePlugin", "enabled")),
            field="devicePlugin.enabled",
            hint="remove devicePlugin.enabled (gpuAllocation: dra turns the plugin off), or set "
            "dra.gpus.enabled: false to run the DRA driver for ComputeDomains only",
        )
    if not dra.gpus.enabled and not stack.nvidia_plugin_serves:
        raise UserError(
            "with dra.gpus.enabled false and no device plugin, nothing hands GPUs to pods",
            at(("dra", "gpus", "enabled")),
            field="dra.gpus.enabled",
            hint="set dra.gpus.enabled: true, or devicePlugin.enabled: true for GPUs with "
            "the DRA driver serving ComputeDomains only",
        )
    if not dra.gpus.enabled and not dra.computeDomains.enabled:
        raise UserError(
            "gpuAllocation dra with neither dra.gpus nor dra.computeDomains enabled renders "
            "nothing of the DRA driver",
            at(("dra", "gpus", "enabled")),
            field="dra.gpus.enabled",
            hint="enable one of them, or set gpuAllocation: device-plugin",
        )
    _check_pool_allocation(context, mixed=mixed)


def _check_driver_and_smoke_test(context: CheckContext) -> None:
    """The NVIDIA driver a driver container installs is new enough for the DRA driver's
    features, and the smoke test asks for its GPU as the DRA driver hands it out."""
    config, stack, at = context.config, context.stack, context.at
    dra = config.dra
    if stack.driver_container:
        known_driver = version_tuple(config.driver.version)
        for feature, minimum in DRA_MINIMUM_DRIVER.items():
            if getattr(dra, feature).enabled and known_driver < version_tuple(minimum):
                raise UserError(
                    f"dra.{feature} needs NVIDIA driver {minimum} or later; driver.version is "
                    f"{config.driver.version}",
                    at(("driver", "version")),
                    field="driver.version",
                    hint=f"set driver.version to {minimum} or later, or "
                    f"dra.{feature}.enabled: false",
                )
    if stack.smoke_test_allocation == "dra" and dra.gpus.enabled and config.smokeTest.resource:
        raise UserError(
            "with the DRA driver the smoke test claims a GPU of DeviceClass gpu.nvidia.com; "
            "nothing advertises an extended resource to request",
            at(("smokeTest", "resource")),
            field="smokeTest.resource",
            hint="remove smokeTest.resource",
        )


def _check_bottlerocket_dra(context: CheckContext, choice: tuple[str | int, ...]) -> None:
    """Bottlerocket's NVIDIA variants run NVIDIA's device plugin as a host service on every node;
    only a release that can turn it off (`enabled = false` in the node settings, which gpustack
    writes for the DRA nodes) may run the DRA driver."""
    chosen = ".".join(str(part) for part in choice)
    group = context.config.nodes.eks
    version = group.bottlerocketVersion if group else None
    first = ".".join(map(str, bottlerocket.PLUGIN_OFF_FROM))
    if version is None or version_tuple(version) < bottlerocket.PLUGIN_OFF_FROM:
        raise UserError(
            "Bottlerocket runs NVIDIA's device plugin on every GPU node as a host service; with "
            "the DRA driver beside it the GPUs would be handed out twice, and only Bottlerocket "
            f"{first} or later can turn it off (settings.kubelet-device-plugins.nvidia.enabled)"
            + (f": nodes.eks.bottlerocketVersion is {version}" if version else ""),
            context.at(("nodes", "eks", "bottlerocketVersion") if version else choice),
            field="nodes.eks.bottlerocketVersion" if version else chosen,
            hint=f'run Bottlerocket {first} or later and say so (nodes.eks.bottlerocketVersion: "{first}"), '
            f"or set {chosen}: device-plugin",
        )


def _check_pool_allocation(context: CheckContext, *, mixed: bool) -> None:
    """Each pool's GPUs are handed out by what it chooses, which reads the pool's settings; with
    pools on the device plugin beside pools on the DRA driver (`mixed`), both must run."""
    config, at = context.config, context.at
    plugin_serves = context.stack.nvidia_plugin_serves
    for index, pool in enumerate(config.nodes.pools):
        here: tuple[str | int, ...] = ("nodes", "pools", index)
        allocation = config.pool_settings(pool).gpu_allocation
        if mixed and allocation == "dra" and not config.dra.gpus.enabled:
            raise UserError(
                f"pool {pool.name} takes its GPUs from the DRA driver, but dra.gpus.enabled is "
                "false: nothing would hand out the pool's GPUs",
                at((*here, "gpuAllocation")),
                field=f"nodes.pools.{index}.gpuAllocation",
                hint="set dra.gpus.enabled: true, or the pool's gpuAllocation: device-plugin",
            )
        if mixed and allocation == "device-plugin" and not plugin_serves:
            raise UserError(
                f"pool {pool.name} takes its GPUs from the device plugin, but "
                "devicePlugin.enabled is false: nothing would hand out the pool's GPUs",
                at((*here, "gpuAllocation")),
                field=f"nodes.pools.{index}.gpuAllocation",
                hint="remove devicePlugin.enabled: false, or the pool's gpuAllocation",
            )
        plugin = pool.devicePlugin
        if allocation == "dra" and config.dra.gpus.enabled and plugin is not None:
            setting = "migStrategy" if plugin.migStrategy is not None else "sharing"
            raise UserError(
                f"pool {pool.name} takes its GPUs from the DRA driver, which reads no device "
                f"plugin settings: devicePlugin.{setting} would change nothing on its nodes",
                at((*here, "devicePlugin", setting)),
                field=f"nodes.pools.{index}.devicePlugin.{setting}",
                hint="remove the pool's devicePlugin (a DRA claim picks MIG devices by "
                "DeviceClass mig.nvidia.com; the DRA driver's sharing is its feature gates "
                "TimeSlicingSettings and MPSSupport), or set its gpuAllocation: device-plugin",
            )


# Kubernetes locks DRAExtendedResource on from 1.37 (GA): an API server told otherwise refuses
# to start (kubernetes pkg/features DRAExtendedResource LockToDefault, KEP-5004).
EXTENDED_RESOURCE_LOCKED_FROM = (1, 37)


def check_kubernetes_gates(context: CheckContext) -> None:
    """`platform.featureGates` names what the cluster runs with; a gate that changes nothing
    gpustack renders, or that the release does not let be set, is refused."""
    config = context.config
    gates = config.platform.featureGates
    if "DRAExtendedResource" not in gates:
        return
    field = "platform.featureGates.DRAExtendedResource"
    location = context.at(("platform", "featureGates", "DRAExtendedResource"))
    version = config.platform.kubernetesVersion
    if not context.stack.dra_gpus:
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


def _check_dra_gates(context: CheckContext) -> None:
    """The DRA driver's gates as the driver checks them when it starts, and the Kubernetes gates
    they need."""
    config = context.config
    gates = config.dra.featureGates

    def at(gate: str) -> Location:
        return context.at(("dra", "featureGates", gate))

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
