"""The checks of the GPU nodes' settings of the managed platforms whose `node/` files take them:
a GKE node pool (its machine type, accelerators and partitions, and the sharing and MIG settings
GKE's own device plugin takes from the pool), an AKS node pool's VM size, and an EKS node group
(on Bottlerocket, the device plugin settings its host service reads)."""

from __future__ import annotations

from typing import Any

from gpustack.config.node_pools import GKENodePool, NodePool
from gpustack.errors import UserError, did_you_mean
from gpustack.resolve import bottlerocket, gke_accelerators
from gpustack.resolve.checks.context import CheckContext, version_tuple
from gpustack.resolve.layered_settings import nearest, set_by_user


def _platform_nodes(
    context: CheckContext,
    section: str,
    mechanism: str,
    what: str,
    needs: str,
    hint: str,
) -> Any:
    """`nodes.<section>`, the GPU nodes' settings of the platform whose `node/` files take them
    (its taint mechanism): refused on other profiles, required on its own. None elsewhere."""
    settings = getattr(context.config.nodes, section)
    name = context.name
    if context.facts.taintMechanism != mechanism:
        if settings is not None:
            raise UserError(
                f"{what} settings do not apply to profile {name!r}",
                context.at(("nodes", section), key=True),
                field=f"nodes.{section}",
            )
        return None
    if settings is None:
        raise UserError(
            f"profile {name!r} needs {needs}",
            context.at(("nodes",)),
            field=f"nodes.{section}",
            hint=hint,
        )
    return settings


def check_gke_node_pool(context: CheckContext) -> None:
    """The pool's machine type must take its GPUs, and what the config says about sharing and
    MIG must become pool settings, or be refused: GKE's device plugin reads nothing else."""
    pool = _platform_nodes(
        context,
        "gke",
        "gke-node-pool",
        "GKE node pool",
        "the GPU node pool's machine type and accelerator",
        "e.g. nodes: {gke: {machineType: g2-standard-8, accelerator: {type: nvidia-l4, count: 1}}}",
    )
    if pool is None:
        return
    check_gke_accelerator(context, pool, ("nodes", "gke"))
    check_gke_translation(context)


def check_gke_accelerator(
    context: CheckContext, pool: GKENodePool, where: tuple[str | int, ...]
) -> None:
    """The pool's machine type takes its GPUs, in a count and partition size GKE offers."""
    dotted = ".".join(str(part) for part in where)
    accelerator = pool.accelerator
    here = (*where, "accelerator")
    if accelerator.type not in gke_accelerators.accelerator_types():
        raise UserError(
            f"unknown GKE accelerator type {accelerator.type!r}",
            context.at((*here, "type")),
            field=f"{dotted}.accelerator.type",
            hint=did_you_mean(accelerator.type, gke_accelerators.accelerator_types())
            or f"one of: {', '.join(gke_accelerators.accelerator_types())}",
        )
    problem = gke_accelerators.machine_type_problem(accelerator.type, pool.machineType)
    if problem:
        raise UserError(problem, context.at((*where, "machineType")), f"{dotted}.machineType")
    problem = gke_accelerators.count_problem(accelerator.type, pool.machineType, accelerator.count)
    if problem:
        raise UserError(problem, context.at((*here, "count")), f"{dotted}.accelerator.count")
    size = accelerator.gpuPartitionSize
    sizes = gke_accelerators.partition_sizes(accelerator.type)
    if size is not None and size not in sizes:
        raise UserError(
            f"GKE does not partition {accelerator.type} into {size}"
            if sizes
            else f"GKE does not partition {accelerator.type} GPUs (no MIG)",
            context.at((*here, "gpuPartitionSize")),
            field=f"{dotted}.accelerator.gpuPartitionSize",
            hint=f"one of: {', '.join(sizes)}" if sizes else None,
        )


def check_aks_node_pool(context: CheckContext) -> None:
    """The AKS pool command in node/ needs the pool's VM size; other platforms take none."""
    _platform_nodes(
        context,
        "aks",
        "aks-node-pool",
        "AKS node pool",
        "the GPU node pool's VM size",
        "e.g. nodes: {aks: {vmSize: Standard_NC4as_T4_v3}}",
    )


def check_gke_translation(
    context: CheckContext, pool: NodePool | None = None, index: int = 0
) -> None:
    """The cluster's (or one pool's) sharing and MIG settings as a GKE node pool takes them."""
    config = context.config
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
            context.at(strategy),
            field=dotted,
            hint=f"set {partition}, e.g. 1g.10gb",
        )
    if plugin.enabled:
        return  # NVIDIA's plugin reads its own sharing and MIG settings (its ConfigMap).
    if mig_strategy == "mixed":
        raise UserError(
            "GKE's device plugin advertises every MIG partition as nvidia.com/gpu, which is "
            "strategy 'single'; 'mixed' cannot be set on a GKE node pool",
            context.at(strategy),
            field=dotted,
            hint="use migStrategy: single",
        )
    if size is not None and mig_strategy == "none":
        raise UserError(
            "the node pool partitions its GPUs "
            f"({partition}) and "
            "GKE's device plugin advertises each partition as one nvidia.com/gpu: that is MIG "
            "strategy 'single'",
            context.at(strategy),
            field=dotted,
            hint=f"set {dotted}: single",
        )
    if sharing.strategy != "none" and sharing.renameByDefault:
        raise UserError(
            "GKE's device plugin always advertises shared GPUs as nvidia.com/gpu",
            context.at((*shared, "renameByDefault")),
            field=f"{shared_dotted}.renameByDefault",
            hint="remove renameByDefault, or run NVIDIA's device plugin on the pool",
        )
    if sharing.strategy == "time-slicing" and not sharing.failRequestsGreaterThanOne:
        raise UserError(
            "GKE refuses containers that request more than one time-shared GPU",
            context.at((*shared, "failRequestsGreaterThanOne")),
            field=f"{shared_dotted}.failRequestsGreaterThanOne",
            hint="remove failRequestsGreaterThanOne, or run NVIDIA's device plugin on the pool",
        )


def check_eks_node_group(context: CheckContext) -> None:
    """The node group's settings, and on Bottlerocket what the config says about the device
    plugin, must become node settings Bottlerocket honours, or be refused: its plugin reads
    nothing else."""
    group = _platform_nodes(
        context,
        "eks",
        "eks-node-group",
        "EKS node group",
        "the GPU node group's instance type",
        "e.g. nodes: {eks: {instanceType: g6.xlarge}}",
    )
    if group is None:
        return
    name, facts = context.name, context.facts
    if group.migProfile and facts.migPartitioning != "node-settings":
        raise UserError(
            f"MIG profiles are Bottlerocket settings; on profile {name!r} NVIDIA's MIG manager "
            "partitions the GPUs from the node label nvidia.com/mig.config",
            context.at(("nodes", "eks", "migProfile"), key=True),
            field="nodes.eks.migProfile",
            hint="remove nodes.eks.migProfile and set migManager.defaultConfig",
        )
    if facts.devicePluginProvider == "bottlerocket":
        _check_bottlerocket_translation(context)


def _check_bottlerocket_translation(context: CheckContext) -> None:
    """Bottlerocket's device plugin takes its settings from the node settings gpustack writes:
    what they cannot say is refused."""
    config, layers = context.config, context.layers
    plugin = config.devicePlugin
    profiles = config.nodes.eks.migProfile if config.nodes.eks else {}
    strategy = ("devicePlugin", "migStrategy")
    if plugin.migStrategy != "none" and plugin.migStrategy not in bottlerocket.PARTITIONING:
        raise UserError(
            f"Bottlerocket's device plugin knows MIG strategy 'single' only (its "
            f"device-partitioning-strategy 'mig'), not {plugin.migStrategy!r}",
            context.at(strategy),
            field="devicePlugin.migStrategy",
            hint="use migStrategy: single",
        )
    if plugin.migStrategy == "single" and not profiles:
        raise UserError(
            "MIG on Bottlerocket needs the MIG profile of each GPU model, which Bottlerocket's "
            "MIG manager applies at boot (settings.kubelet-device-plugins.nvidia.mig.profile)",
            context.at(strategy),
            field="devicePlugin.migStrategy",
            hint='set nodes.eks.migProfile, e.g. {a100.40gb: 1g.5gb, h100.80gb: "7"}',
        )
    if profiles and plugin.migStrategy == "none":
        raise UserError(
            "has no effect without MIG: Bottlerocket partitions GPUs only with "
            "devicePlugin.migStrategy single",
            context.at(("nodes", "eks", "migProfile"), key=True),
            field="nodes.eks.migProfile",
            hint="set devicePlugin.migStrategy: single, or remove nodes.eks.migProfile",
        )
    listed = plugin.deviceListStrategy
    if listed != "auto" and listed not in bottlerocket.DEVICE_LIST_STRATEGIES:
        raise UserError(
            f"Bottlerocket's device plugin has no device list strategy {listed!r}",
            context.at(("devicePlugin", "deviceListStrategy")),
            field="devicePlugin.deviceListStrategy",
            hint=f"one of: auto (Bottlerocket's default, volume-mounts), "
            f"{', '.join(bottlerocket.DEVICE_LIST_STRATEGIES)}",
        )
    version = version_tuple(config.platform.kubernetesVersion)
    if listed == "cdi-cri" and version < bottlerocket.CDI_CRI_FROM:
        raise UserError(
            f"with device list strategy 'cdi-cri' GPUs reach pods only through the CRI's CDI "
            f"field, which the kubelet of Kubernetes {config.platform.kubernetesVersion} drops "
            "(it passes it from 1.29): GPU pods would start without their GPUs",
            context.at(("devicePlugin", "deviceListStrategy")),
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
        if set_by_user([layers[0], *context.own_layers], ("devicePlugin", field)):
            raise UserError(
                f"has no effect: {why}",
                nearest(layers[1:], ("devicePlugin", field), key=True),
                field=f"devicePlugin.{field}",
                hint=hint,
            )
