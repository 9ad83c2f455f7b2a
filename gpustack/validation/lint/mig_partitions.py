"""mig-strategy-without-partitions: a device plugin (or GFD) told to advertise MIG devices while
nothing creates them. The GPUs stay whole: with `single` the node offers no MIG device at all,
with `mixed` no `nvidia.com/mig-*` resource ever appears, and the workloads asking for them stay
Pending. MIG devices come from NVIDIA's MIG manager (GPU Operator assets/state-mig-manager),
from GKE's partitioning of a pool (`gpu-partition-size`, applied by the COS driver installer's
`partition-gpus` step), or from a node labelled with a MIG config for a MIG manager deployed
elsewhere.
"""

from __future__ import annotations

from collections.abc import Iterator

from gpustack.findings import Finding
from gpustack.objects import describe
from gpustack.validation.lint._objects import Objects, Pod, Rule, containers_running, finding
from gpustack.validation.lint._pods import mig_strategy

# The node label NVIDIA's MIG manager applies, and the one GKE gives partitioned pools.
MIG_CONFIG_LABEL = "nvidia.com/mig.config"
GKE_PARTITION_LABEL = "cloud.google.com/gke-gpu-partition-size"
# gpu-operator values.yaml migManager.image; the manager's binary (mig-parted).
MIG_MANAGER_IMAGE = "k8s-mig-manager"
MIG_MANAGER_BINARY = "nvidia-mig-manager"
# GKE's COS driver installer partitions GPUs in this init container.
GKE_PARTITION_STEP = "partition-gpus"


def _partitions_in(pod: Pod) -> bool:
    if MIG_CONFIG_LABEL in pod.placement_keys() or GKE_PARTITION_LABEL in pod.placement_keys():
        return True
    for container in pod.containers:
        words = pod.command_words(container)
        if (
            MIG_MANAGER_IMAGE in str(container.get("image", ""))
            or MIG_MANAGER_BINARY in words
            or container.get("name") == GKE_PARTITION_STEP
        ):
            return True
    return False


def check(objects: Objects) -> Iterator[Finding]:
    if {MIG_CONFIG_LABEL, GKE_PARTITION_LABEL} & objects.node_labels:
        return  # the config says the GPU nodes carry a MIG config or a GKE partition size
    partitioned: bool | None = None
    for pod in objects.pods():
        for binary in ("nvidia-device-plugin", "gpu-feature-discovery"):
            for container in containers_running(pod, binary):
                found = mig_strategy(objects, pod, container)
                if found in (None, "none"):
                    continue
                if partitioned is None:
                    partitioned = any(_partitions_in(other) for other in objects.pods())
                if partitioned:
                    return
                yield finding(
                    RULE,
                    pod.owner,
                    f"{describe(pod.owner)} runs with MIG strategy {found!r}, but nothing creates "
                    "MIG devices: no MIG manager, no GKE partition size, no node labelled "
                    f"{MIG_CONFIG_LABEL}; deploy NVIDIA's MIG manager (gpustack deploys it with "
                    "the MIG strategy outside GKE; on GKE set nodes.gke.accelerator."
                    "gpuPartitionSize) or set the MIG strategy to none",
                    f"{pod.path}.containers",
                )


RULE = Rule(
    "mig-strategy-without-partitions",
    "error",
    "The device plugin or GFD runs with MIG strategy `single` or `mixed`, but nothing creates MIG "
    "devices: no MIG manager among the objects, no GKE partitioned pool (`partition-gpus` step or "
    "`cloud.google.com/gke-gpu-partition-size` placement) and no `nvidia.com/mig.config` node "
    "label.",
    "Deploy NVIDIA's MIG manager and label the GPU nodes `nvidia.com/mig.config=<config>` "
    "(gpustack does both with a MIG strategy), create the GKE pool with a partition size, or "
    "set the MIG strategy to none.",
    check,
)
