"""Host-side artifacts kubectl does not apply: they go to `node/` beside the manifests.

Each profile's taint mechanism picks the writer (`node_join_files` for nodes that join with a
file of their own, `node_pool_files` for a cloud's node pool; docs/profiles.md, the profile
table); each node pool's files are the cluster's, written from the pool's view (`pool_view`),
and the README there says where each file goes. Taints and labels come from the same `nodes.taints` and
`nodes.selector` the workloads tolerate and select on, so nodes and manifests cannot disagree.
"""

from __future__ import annotations

import json
from dataclasses import replace

from gpustack.build import device_plugin_config, node_join_files, node_pool_files
from gpustack.build.node_registration import Files, Notes, Where, node_labels
from gpustack.build.workload import deploy_label_keys, deploy_labels_used, deploy_node_labels
from gpustack.config.node_pools import NodePool
from gpustack.layout import GENERATED
from gpustack.resolve import mig
from gpustack.resolve.stack import Stack


def build(stack: Stack) -> Files:
    writer = _WRITERS[stack.facts.taintMechanism]
    files, where, notes = writer(stack)
    for pool in stack.pools:
        pool_files, pool_where, _ = writer(pool_view(stack, pool))
        renamed = {_pool_file(name, pool.name): text for name, text in pool_files.items()}
        files.update(renamed)
        where += [
            (_pool_file(name, pool.name), f"pool {pool.name}, as `{name}` for the pool's nodes")
            for name, _ in pool_where
            if name in pool_files
        ]
    if stack.pools:
        notes.append(_pools_note(stack))
    if stack.mig_manager_enabled:
        notes.append(_mig_note(stack))
    if deploy_labels_used(stack):
        notes.append(_deploy_note(stack))
    files["README.md"] = _readme(stack, where, notes)
    return files


def pool_view(stack: Stack, pool: NodePool) -> Stack:
    """The stack as one pool's nodes see it: the cluster's config with the pool's effective
    settings (`GPUStack.pool_settings`: its labels and taints added to the cluster's, its GKE
    machine, allocation, sharing, MIG strategy and layout and driver version over the
    cluster's) in place of the cluster's. The node files of a pool are the cluster's, written
    from this view."""
    config = stack.config
    settings = config.pool_settings(pool)
    nodes = config.nodes.model_copy(
        update={
            "selector": settings.selector,
            "taints": settings.taints,
            "gke": settings.gke,
            "pools": [],
        }
    )
    plugin = config.devicePlugin.model_copy(
        update={"migStrategy": settings.mig_strategy, "sharing": settings.sharing}
    )
    # The MIG manager runs as the cluster says, on every pool's MIG-capable nodes.
    mig_manager = config.migManager.model_copy(
        update={"enabled": stack.mig_manager_enabled, "defaultConfig": settings.mig_config}
    )
    driver = config.driver.model_copy(update={"version": settings.driver_version})
    view = config.model_copy(
        update={
            "gpuAllocation": settings.gpu_allocation,
            "nodes": nodes,
            "devicePlugin": plugin,
            "migManager": mig_manager,
            "driver": driver,
        }
    )
    return replace(stack, config=view, pool=pool)


def _pool_file(name: str, pool: str) -> str:
    stem, dot, suffix = name.partition(".")
    return f"{stem}-{pool}{dot}{suffix}"


def _pools_note(stack: Stack) -> str:
    """How the nodes that exist already join their pools: the files above label new nodes."""
    lines = [
        "Node pools: each pool's files above give new nodes the pool's labels and taints when "
        "they register. Nodes that exist already keep theirs: label (and taint) each pool's "
        "nodes once, after giving them the pool's own label by hand where they lack it "
        "(`kubectl label node NODE <selector>`):",
        "",
    ]
    for pool in stack.pools:
        view = pool_view(stack, pool)
        selector = ",".join(f"{key}={value}" for key, value in pool.selector.items())
        labels = {
            key: value
            for key, value in node_labels(view).items()
            if key in (mig.CONFIG_LABEL, device_plugin_config.CONFIG_LABEL)
        }
        command = f"kubectl label nodes -l {selector} --overwrite " + " ".join(
            f"{key}={value}" for key, value in labels.items()
        )
        lines.append(f"- pool `{pool.name}`: `{command}`" if labels else f"- pool `{pool.name}`")
        for taint in pool.taints:
            value = f"={taint.value}" if taint.value is not None else ""
            lines.append(
                f"  and `kubectl taint nodes -l {selector} {taint.key}{value}:{taint.effect}`"
            )
    lines += [
        "",
        f"The device plugin and GFD read the config a node's `{device_plugin_config.CONFIG_LABEL}` "
        "label names (a node without it: `default`, the cluster's) and restart with the new "
        "one when the label changes; a name the ConfigMap `nvidia-device-plugin-config` does "
        "not hold keeps them from starting on that node.",
    ]
    return "\n".join(lines)


def _deploy_note(stack: Stack) -> str:
    labels = deploy_node_labels(stack) or dict.fromkeys(deploy_label_keys(stack), "true")
    both = stack.driver_container and stack.mig_manager_enabled
    managers = " and ".join(
        name
        for name, used in (
            (
                "k8s-driver-manager (the driver pod's init container, before it unloads a driver: "
                "`paused-for-driver-upgrade`)",
                stack.driver_container,
            ),
            (
                "the MIG manager (while it repartitions the GPUs: `paused-for-mig-change`)",
                stack.mig_manager_enabled,
            ),
        )
        if used
    )
    patch = f"`kubectl patch node NODE -p '{json.dumps({'metadata': {'labels': labels}})}'`"
    starter = (
        "The driver pod's `deploy-labels` init container"
        if stack.driver_container
        else "The MIG manager pod's `deploy-labels` init container"
    )
    started = (
        f"{starter} sets them all to `true` on its node while every one is absent or empty, as "
        "the GPU Operator's controller does; a node whose labels are partly set (one `false` by "
        "hand, the others absent) is left as it is: label it, " + patch + "."
    )
    if stack.facts.nodeLabelsReapplied:
        return (
            "Deploy labels: the Machine API copies a MachineSet's labels onto its nodes again "
            "whenever a node changes, which would undo every pause, so the MachineSet does not "
            f"carry the `nvidia.com/gpu.deploy.*` labels. They are taken off a node by {managers}, "
            "setting them to a paused value, which needs them `true` first. " + started
        )
    return (
        "Deploy labels: GPU nodes register with "
        + ", ".join(f"`{key}={value}`" for key, value in labels.items())
        + f". {managers[0].upper() + managers[1:]} {'set' if both else 'sets'} them to a paused value on the "
        f"node, {'wait' if both else 'waits'} until the GPU DaemonSets' pods are gone and "
        f"{'set' if both else 'sets'} them back. A GPU DaemonSet leaves a node only while its "
        "label is paused or `false`, so a node that joined without the labels still runs the "
        "stack. " + started
    )


def _mig_note(stack: Stack) -> str:
    default = stack.config.migManager.defaultConfig
    return (
        f"MIG: GPU nodes register with the label `{mig.CONFIG_LABEL}={default}`. The "
        "nvidia-mig-manager DaemonSet applies the MIG config a node's label names (from its "
        "ConfigMap `nvidia-mig-manager-config`) and reports progress in "
        f"`{mig.STATE_LABEL}` (`pending`, then `success` or `failed`). To repartition a node, "
        f"change the label: `kubectl label node NODE {mig.CONFIG_LABEL}=all-1g.10gb --overwrite`; "
        "the device plugin, GFD and the DCGM exporter leave the node while it changes and "
        "come back when it is done."
    )


# Each profile's taint mechanism: the writer of its node files.
_WRITERS = {
    "eks-node-group": node_pool_files.eks,
    "kubeadm-join": node_join_files.kubeadm,
    "rke2-agent-config": node_join_files.rancher,
    "k3s-agent-config": node_join_files.rancher,
    "gke-node-pool": node_pool_files.gke,
    "aks-node-pool": node_pool_files.aks,
    "openshift-machineset": node_join_files.openshift,
}


def _readme(stack: Stack, where: Where, notes: Notes) -> str:
    lines = [
        f"<!-- {GENERATED} -->",
        f"# Node-side settings for {stack.name} ({stack.profile.metadata.name})",
        "",
        "kubectl does not apply these files and `kustomization.yaml` does not list them: they",
        "configure the GPU nodes themselves, so that the taints the manifests tolerate and the",
        "labels they select on exist.",
        "",
    ]
    lines += [f"- `{name}`: {text}." for name, text in where]
    for note in notes:
        lines += ["", note]
    return "\n".join(lines) + "\n"
