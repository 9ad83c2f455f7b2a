"""The config's `nodes` section: what the GPU nodes carry (labels, taints, the platform's node
pool, node group or VM size) and the node pools, each with settings of its own over the
cluster's (`GPUStack.pool_settings` gives a pool's effective ones)."""

# No `from __future__ import annotations` in the config model's modules: pydantic would then
# have to evaluate every field annotation from its text as it creates each class. Python
# evaluates them as it defines the class instead; a validator returning its own model says `Self`.
from dataclasses import dataclass
from typing import Annotated, Literal, Self

from pydantic import Field, field_validator, model_validator

from gpustack.config.component_settings import GPUAllocation, MigConfigName, MigStrategy, Sharing
from gpustack.config.field_types import ConflictError, Doc, LabelKey, LabelValue, Name, Strict


class Taint(Strict):
    key: LabelKey = Field(description="taint key")
    value: LabelValue | None = Field(default=None, description="taint value")
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] = Field(
        description="taint effect"
    )


def _each_taint_once(taints: list[Taint]) -> list[Taint]:
    """A node carries one taint of a key and effect: the API server refuses a second
    (core/v1 validation, validateNodeTaints)."""
    seen = set()
    for taint in taints:
        if (taint.key, taint.effect) in seen:
            raise ValueError(f"taint {taint.key}:{taint.effect} is listed twice")
        seen.add((taint.key, taint.effect))
    return taints


class GKEAccelerator(Strict):
    type: Annotated[
        str, Field(pattern=r"^nvidia-[a-z0-9-]+$"), Doc(type="GKE accelerator type")
    ] = Field(
        description=(
            "e.g. `nvidia-l4`, `nvidia-tesla-a100`, `nvidia-a100-80gb`, `nvidia-h100-80gb`, "
            "`nvidia-h200-141gb`, `nvidia-b200`, `nvidia-tesla-t4`"
        )
    )
    count: int = Field(
        ge=1,
        le=16,
        description="GPUs per node (fixed by A, G4 and G2 machine types; 1, 2, 4 or 8 on N1)",
    )
    gpuPartitionSize: Annotated[
        Annotated[str, Field(pattern=r"^[0-9]+g\.[0-9]+gb$")] | None,
        Doc(type="MIG size such as `1g.5gb`"),
    ] = Field(
        default=None,
        description=(
            "the MIG partition GKE cuts every GPU into (`gpu-partition-size`; A100, H100, "
            "H200 only, GKE's sizes); needs `devicePlugin.migStrategy: single` with GKE's "
            "plugin"
        ),
    )


class GKENodePool(Strict):
    machineType: Annotated[
        str,
        Field(pattern=r"^[a-z][a-z0-9]*(-[a-z0-9]+)+$"),
        Doc(type="Compute Engine machine type"),
    ] = Field(
        description=(
            "GKE profiles: the GPU pool's machine type; it must take the accelerator (A100 "
            "40GB `a2-highgpu`/`a2-megagpu`, A100 80GB `a2-ultragpu`, H100 "
            "`a3-highgpu`/`a3-edgegpu`, H100 Mega `a3-megagpu`, H200 `a3-ultragpu`, B200 "
            "`a4-highgpu`, GB200 `a4x-highgpu`, L4 `g2-standard`, RTX PRO 6000 `g4-standard`,"
            " T4/V100/P100/P4 `n1`) and come with `count` GPUs"
        )
    )
    accelerator: GKEAccelerator


class AKSNodePool(Strict):
    vmSize: Annotated[
        str,
        Field(pattern=r"^Standard_[A-Za-z0-9_]+$", max_length=64),
        Doc(type="Azure VM size"),
    ] = Field(
        description=(
            "AKS profile: the GPU pool's VM size, an NVIDIA GPU size such as "
            "`Standard_NC4as_T4_v3` (T4), `Standard_NC24ads_A100_v4` (A100), "
            "`Standard_NC40ads_H100_v5` (H100 NVL) or `Standard_ND96isr_H100_v5` (8 H100)"
        )
    )


# Bottlerocket's names for a GPU model and a MIG profile in `settings.kubelet-device-plugins.
# nvidia.mig.profile` (bottlerocket-settings-sdk bottlerocket-settings-models/modeled-types/src/
# kubernetes.rs NVIDIAGPU_NAME, MIGPROFILE_NAME and the slice counts MigProfile accepts, 25e4241).
BottlerocketGPUModel = Annotated[
    str, Field(pattern=r"^[a-z][0-9]+\.[0-9]+gb$"), Doc(type="GPU model such as `a100.40gb`")
]
BottlerocketMIGProfile = Annotated[
    str,
    Field(pattern=r"^([12347]|[0-9]g\.[0-9]+gb)$"),
    Doc(type="MIG profile such as `1g.5gb`, or a slice count `1`, `2`, `3`, `4`, `7`"),
]


class EKSNodeGroup(Strict):
    instanceType: Annotated[
        str,
        Field(pattern=r"^[a-z][a-z0-9-]*\.[a-z0-9]+$"),
        Doc(type="EC2 instance type"),
    ] = Field(
        description=(
            "EKS profiles: the GPU node group's EC2 instance type, e.g. `g6.xlarge` (one L4), "
            "`p4d.24xlarge` (eight A100), written into the node group in `node/`"
        )
    )
    bottlerocketVersion: Annotated[
        str | None,
        Field(pattern=r"^[0-9]+\.[0-9]+\.[0-9]+$"),
        Doc(type="`X.Y.Z` (Bottlerocket release)", default="unknown"),
    ] = Field(
        default=None,
        description=(
            "eks-bottlerocket: the oldest Bottlerocket release the node group runs, e.g. "
            "`1.63.0`; `gpuAllocation: dra` needs 1.63.0 or later, whose "
            "`settings.kubelet-device-plugins.nvidia.enabled` turns the OS's device plugin off"
        ),
    )
    migProfile: dict[BottlerocketGPUModel, BottlerocketMIGProfile] = Field(
        default_factory=dict,
        description=(
            "eks-bottlerocket with `devicePlugin.migStrategy: single`: the MIG profile "
            "Bottlerocket cuts each GPU model into (`settings.kubelet-device-plugins.nvidia.mig."
            'profile`), e.g. `{a100.40gb: 1g.5gb, h100.80gb: "7"}`'
        ),
    )


# A driver version as the driver image tags name it (`driver.version`).
DriverVersion = Annotated[
    str, Field(pattern=r"^[0-9]+\.[0-9]+(\.[0-9]+)?$"), Doc(type="driver version")
]


class PoolDevicePlugin(Strict):
    """A pool's device plugin settings over the cluster's `devicePlugin`."""

    migStrategy: Annotated[MigStrategy | None, Doc(default="the cluster's")] = Field(
        default=None, description="MIG strategy of the plugin and GFD on the pool's nodes"
    )
    sharing: Annotated[Sharing | None, Doc(default="the cluster's")] = Field(
        default=None,
        description="GPU sharing on the pool's nodes; given, it replaces the cluster's as a whole",
    )


class PoolMigManager(Strict):
    defaultConfig: Annotated[
        MigConfigName | None,
        Doc(
            default="the cluster's; `all-disabled` where the pool's plugin uses no MIG and "
            "the cluster's does"
        ),
    ] = Field(
        default=None,
        description=(
            "the MIG layout the pool's nodes register with (`nvidia.com/mig.config`); a "
            "built-in config or one of `migManager.config.file`"
        ),
    )


class PoolDriver(Strict):
    version: Annotated[DriverVersion | None, Doc(default="the cluster's")] = Field(
        default=None,
        description=(
            "NVIDIA driver of the pool's driver DaemonSet (driver modes `container` and "
            "`driver-toolkit` only)"
        ),
    )


# The most node pools a cluster config may list.
MAX_POOLS = 256


class NodePool(Strict):
    name: Name = Field(
        description=(
            "the pool's name, unique among the pools; not `default`, the device plugin config of "
            "the nodes in no pool"
        )
    )
    selector: Annotated[dict[LabelKey, LabelValue], Doc(type="node labels")] = Field(
        min_length=1,
        description=(
            "labels that pick the pool's nodes, all of them (matchLabels); e.g. GKE "
            "`cloud.google.com/gke-nodepool: <pool>`, on OpenShift a label of the pool's "
            "MachineSet template, elsewhere any label the node files give its nodes"
        ),
    )
    taints: Annotated[list[Taint], Doc(type="list of taints")] = Field(
        default_factory=list,
        description=(
            "taints the pool's nodes carry besides `nodes.taints`; GPU workloads tolerate them "
            "and the pool's `node/` files apply them"
        ),
    )
    canary: Annotated[bool, Doc(see="Rollout order")] = Field(
        default=False,
        description=(
            "the pool gets a driver DaemonSet of its own, applied first (Argo CD sync wave, "
            "Flux stage), and the rest of the stack only once it is healthy; the smoke test "
            "runs on the pool"
        ),
    )
    devicePlugin: PoolDevicePlugin | None = Field(
        default=None, description="device plugin settings of the pool over `devicePlugin`"
    )
    migManager: PoolMigManager | None = Field(
        default=None, description="MIG layout of the pool over `migManager.defaultConfig`"
    )
    driver: PoolDriver | None = Field(
        default=None, description="driver of the pool over `driver.version`"
    )
    gke: GKENodePool | None = Field(
        default=None,
        description="GKE profiles: the pool's machine type and accelerator over `nodes.gke`",
    )
    gpuAllocation: Annotated[
        GPUAllocation | None,
        Doc(default="the cluster's", see="Node pools"),
    ] = Field(
        default=None,
        description=(
            "how pods get the pool's GPUs over the cluster's `gpuAllocation`: the device "
            "plugin's `nvidia.com/gpu`, or ResourceClaims of NVIDIA's DRA driver; each node is "
            "served by one of them"
        ),
    )

    @field_validator("taints")
    @classmethod
    def _unique_taints(cls, taints: list[Taint]) -> list[Taint]:
        return _each_taint_once(taints)


class Nodes(Strict):
    selector: dict[LabelKey, LabelValue] = Field(
        default_factory=dict,
        description="labels GPU nodes carry, ANDed into every GPU workload's placement",
    )
    taints: Annotated[list[Taint], Doc(type="list of taints")] = Field(
        default_factory=list,
        description=(
            "taints GPU nodes carry; every GPU workload tolerates them and the `node/` files "
            "apply them; a key and effect may appear once"
        ),
    )
    controlPlane: bool = Field(
        default=False,
        description=(
            "GPU nodes are also control-plane nodes (single-node clusters): GPU workloads "
            "tolerate the control-plane taint"
        ),
    )
    gke: GKENodePool | None = Field(
        default=None,
        description="GKE profiles: the GPU node pool's machine type and accelerator, written "
        "into the pool files in `node/`",
    )
    aks: AKSNodePool | None = Field(
        default=None,
        description="AKS profile: the GPU node pool's VM size, written into the pool command in "
        "`node/`",
    )
    eks: EKSNodeGroup | None = Field(
        default=None,
        description="EKS profiles: the GPU node group's instance type (and Bottlerocket's MIG "
        "profiles), written into the node group files in `node/`",
    )
    machineConfigPool: Annotated[
        Literal["worker-gpu", "worker"], Doc(see="GPU-only MachineConfigPool")
    ] = Field(
        default="worker-gpu",
        description=(
            "OpenShift: the MachineConfigPool gpustack's MachineConfigs target; `worker-gpu`: "
            "a pool of the GPU nodes only, inheriting the worker pool's MachineConfigs (gpustack "
            "renders it, and the MachineSet patch gives new GPU machines its role), so a "
            "GPU-side change reboots GPU nodes only; `worker`: the worker pool, so a GPU-side change "
            "reboots every worker"
        ),
    )
    pools: Annotated[list[NodePool], Doc(type="list of pools", see="Node pools")] = Field(
        default_factory=list,
        # A cluster's GPU node pools are a few dozen at most; the bound keeps the work of a
        # crafted config (each pool's config, node files, overlap with every other) bounded.
        max_length=MAX_POOLS,
        description=(
            "GPU node pools of the cluster, each with its own device plugin config, MIG layout, "
            "driver version and taints; a node belongs to at most one pool, the others get the "
            f"cluster's settings; at most {MAX_POOLS}"
        ),
    )
    cgroupDriver: Literal["systemd", "cgroupfs"] = Field(
        default="systemd",
        description=(
            "the nodes' cgroup driver (the kubelet's); the nvidia runtime in kubeadm's "
            "`node/99-nvidia.toml` uses the same one as runc (`SystemdCgroup`)"
        ),
    )

    @field_validator("taints")
    @classmethod
    def _unique_taints(cls, taints: list[Taint]) -> list[Taint]:
        return _each_taint_once(taints)

    @model_validator(mode="after")
    def _unique_pools(self) -> Self:
        seen: set[str] = set()
        for index, pool in enumerate(self.pools):
            if pool.name in seen:
                raise ConflictError(
                    ("nodes", "pools", index, "name"),
                    f"pool {pool.name} is listed twice: pool names are unique",
                )
            seen.add(pool.name)
        return self


@dataclass(frozen=True)
class PoolSettings:
    """The settings the GPU nodes of one pool (or of no pool) run with, each the pool's where it
    gives one, else the cluster's: what `GPUStack.pool_settings` resolves, and the one place a
    component, a check or the node files ask."""

    pool: NodePool | None
    # nodes.selector and nodes.taints with the pool's added: what its nodes carry.
    selector: dict[str, str]
    taints: list[Taint]
    gke: GKENodePool | None
    gpu_allocation: GPUAllocation
    mig_strategy: MigStrategy  # the device plugin's and GFD's
    sharing: Sharing
    mig_config: str  # the MIG layout the nodes register with (nvidia.com/mig.config)
    driver_version: str
