"""The checks of the node pools (`nodes.pools`): names a pool cannot take, a driver of a pool's
own (how many driver DaemonSets a config renders, and their names' length), GKE's per-pool
settings, the labels a kubelet may put on its own Node, and that each GPU node belongs to one
pool at most and a pool to some GPU node."""

from __future__ import annotations

from gpustack.config.node_pools import NodePool
from gpustack.errors import UserError
from gpustack.resolve.checks.context import CheckContext
from gpustack.resolve.checks.managed_nodes import check_gke_accelerator, check_gke_translation
from gpustack.resolve.stack import DEFAULT_CONFIG

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


def check_pools(context: CheckContext) -> None:
    """Each pool's settings apply to the profile, and each GPU node belongs to one pool at most."""
    _check_driver_daemonsets(context)
    for index, pool in enumerate(context.config.nodes.pools):
        _check_name_and_driver(context, index, pool)
        if pool.gke is not None and context.facts.taintMechanism != "gke-node-pool":
            raise UserError(
                f"GKE node pool settings do not apply to profile {context.name!r}",
                context.at(("nodes", "pools", index, "gke"), key=True),
                field=f"nodes.pools.{index}.gke",
            )
        if context.facts.taintMechanism == "gke-node-pool":
            if pool.gke is not None:
                check_gke_accelerator(context, pool.gke, ("nodes", "pools", index, "gke"))
            check_gke_translation(context, pool, index)
        _check_selector(context, index, pool)


def _check_driver_daemonsets(context: CheckContext) -> None:
    config, stack = context.config, context.stack
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
        context.at(where),
        field=".".join(where),
        hint="give fewer pools a driver of their own (canary, driver.version), or list only the "
        "RHCOS builds the nodes run",
    )


def _check_name_and_driver(context: CheckContext, index: int, pool: NodePool) -> None:
    """The pool's name is its own, and a driver of its own runs, under a name Kubernetes takes."""
    config, stack = context.config, context.stack
    here: tuple[str | int, ...] = ("nodes", "pools", index)
    dotted = f"nodes.pools.{index}"
    if pool.name in RESERVED_POOL_NAMES:
        raise UserError(
            f"pool name {pool.name!r} is reserved: {RESERVED_POOL_NAMES[pool.name]}",
            context.at((*here, "name")),
            field=f"{dotted}.name",
            hint=f"name the pool otherwise, e.g. {pool.name}-gpu",
        )
    if pool.driver and pool.driver.version and not stack.driver_container:
        raise UserError(
            f"pool {pool.name}: a driver version applies only where gpustack runs the driver "
            f"as a container (driver.mode container or driver-toolkit); here the driver mode "
            f"is {stack.driver_mode}, whose driver the nodes or the platform install",
            context.at((*here, "driver", "version")),
            field=f"{dotted}.driver.version",
            hint="remove the pool's driver section, and install that driver on the pool's nodes",
        )
    own_driver = pool.canary or (pool.driver and pool.driver.version)
    if not (own_driver and stack.driver_container):
        return
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
            context.at((*here, "name")),
            field=f"{dotted}.name",
            hint=f"a pool name of at most {63 - 24 - longest} characters"
            if 63 - 24 - longest > 0
            else "the longest "
            + ("kernel release" if config.driver.kernelVersions else "RHCOS build")
            + " leaves no room for a pool's name: run this pool on the cluster's "
            "driver, with no canary and no driver.version of its own",
        )


def _check_selector(context: CheckContext, index: int, pool: NodePool) -> None:
    """The pool's node files can give its nodes its labels, GPU nodes may carry them, and no
    node carries both its labels and an earlier pool's."""
    config = context.config
    pools = config.nodes.pools
    here: tuple[str | int, ...] = ("nodes", "pools", index)
    dotted = f"nodes.pools.{index}"
    if context.facts.taintMechanism in _SELF_LABELLING:
        for key in pool.selector:
            if not kubelet_may_set(key):
                raise UserError(
                    f"pool {pool.name}: the kubelet may not label its own Node with {key} "
                    "(the NodeRestriction admission plugin keeps kubernetes.io and k8s.io "
                    "labels for the control plane), so the pool's node files could never "
                    "give its nodes this label",
                    context.at((*here, "selector", key), key=True),
                    field=f"{dotted}.selector",
                    hint=f"use a label of your own domain, e.g. example.com/gpu-pool: {pool.name}",
                )
    gpu_nodes = context.stack.gpu_node_selector
    for key, value in pool.selector.items():
        wanted = config.nodes.selector.get(key)
        allowed = next(
            (list(each.values) for each in gpu_nodes if each.key == key and each.operator == "In"),
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
                context.at((*here, "selector", key)),
                field=f"{dotted}.selector",
                hint="select the pool's nodes by a label that GPU nodes may carry",
            )
    for other in pools[:index]:
        if selectors_overlap(other.selector, pool.selector):
            raise UserError(
                f"pools {other.name} and {pool.name} can both claim a node: their selectors "
                "differ in no key's value, so a node with both sets of labels is in both, "
                "and would get two device plugin configs and MIG layouts",
                context.at((*here, "selector")),
                field=f"{dotted}.selector",
                hint="give both pools the same label key with a different value each, e.g. "
                f"example.com/gpu-pool: {other.name} and example.com/gpu-pool: {pool.name}",
            )
