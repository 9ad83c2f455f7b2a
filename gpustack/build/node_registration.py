"""What every platform's node files share: the labels and taints a GPU node registers with, in
each form the files write them (`nodes.selector` and `nodes.taints`, which the workloads select
on and tolerate, so nodes and manifests cannot disagree), how the Container Toolkit makes
containerd load its runtime, and what a platform's writer returns (files, where each goes,
notes for the README)."""

from __future__ import annotations

from typing import Any

from gpustack import emit
from gpustack.build import device_plugin_config
from gpustack.build.workload import deploy_node_labels
from gpustack.layout import HEADER
from gpustack.resolve import mig
from gpustack.resolve.stack import Stack

Files = dict[str, str]
Where = list[tuple[str, str]]  # (file name, where it goes and what it does)
Notes = list[str]  # what the README adds that is not a file


def taint_strings(stack: Stack) -> list[str]:
    """`key=value:Effect` (or `key:Effect`), the kubelet's --register-with-taints syntax."""
    return [
        f"{taint.key}={taint.value}:{taint.effect}"
        if taint.value is not None
        else f"{taint.key}:{taint.effect}"
        for taint in stack.config.nodes.taints
    ]


def taint_objects(stack: Stack) -> list[dict[str, Any]]:
    """Taints as core/v1 Node spec.taints entries (kubeadm and MachineSets use that shape)."""
    return [
        {
            "key": taint.key,
            **({"value": taint.value} if taint.value is not None else {}),
            "effect": taint.effect,
        }
        for taint in stack.config.nodes.taints
    ]


def node_labels(stack: Stack) -> dict[str, str]:
    """The labels GPU nodes register with: nodes.selector; with the MIG manager the MIG config it
    applies (nvidia.com/mig.config); with the driver manager or the MIG manager the
    `nvidia.com/gpu.deploy.*` labels set to "true" (the GPU Operator's controller would set both
    on every GPU node). The kubelet, RKE2 and the Machine API set them when the node registers
    only, so the managers' later changes to them stand."""
    labels = dict(stack.config.nodes.selector)
    if stack.pool is not None and stack.config.devicePlugin.enabled:
        # A pool's nodes pick its device plugin config (the config manager reads the label).
        labels[device_plugin_config.CONFIG_LABEL] = device_plugin_config.pool_config_name(
            stack.pool
        )
    if stack.mig_manager_enabled:
        labels[mig.CONFIG_LABEL] = stack.config.migManager.defaultConfig
    labels.update(deploy_node_labels(stack))
    return labels


def label_strings(stack: Stack) -> list[str]:
    return [f"{key}={value}" for key, value in node_labels(stack).items()]


def as_yaml(*documents: dict[str, Any]) -> str:
    return HEADER + "---\n".join(emit.dump(document) for document in documents)


def containerd_restart(mode: str | None) -> str:
    """How the toolkit gets containerd to load the drop-in (profile fact `restartMode`)."""
    if mode in (None, "signal"):
        # containerd does not handle SIGHUP: it exits, and its unit (containerd's own
        # containerd.service: Restart=always, KillMode=process) starts it again.
        return (
            "restarts containerd (SIGHUP: containerd exits and systemd starts it again, as the "
            "`Restart=always` of containerd's unit does; running containers keep running)"
        )
    if mode == "systemd":
        return "restarts containerd (`systemctl restart containerd` on the host)"
    return "leaves containerd running: restart it once on each GPU node (`restartMode: none`)"
