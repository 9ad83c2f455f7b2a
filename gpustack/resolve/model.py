"""The typed cluster config (`kind: GPUStack`) and the platform profile (`kind: Profile`).

Field names are a contract (PRODUCT.md): scripts and editors rely on them. Fields a profile decides
are optional here; the profile's `defaults` are merged beneath the user's config before validation,
so a validated GPUStack always carries concrete values. The model knows nothing of files or YAML.
"""

# No `from __future__ import annotations` here, unlike the other modules: pydantic would then
# compile and evaluate each of the ~300 field annotations as a string when it creates the
# classes, about a third of this module's import time, paid by every command that loads a config.
# Python evaluates them as it defines each class instead; a validator returning its own model
# says `Self`.
import posixpath
import re
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Annotated, Any, ClassVar, Literal, Self, TypeVar, get_args, get_origin

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    field_validator,
    model_validator,
)

API_VERSION = "gpustack.dev/v1alpha1"

# RFC 1123 label: what a Namespace, a folder name and most object names must be.
DNS1123_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
# RFC 1123 subdomain: object names such as RuntimeClass handlers.
DNS1123_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
# Kubernetes qualified name with optional DNS prefix: label and taint keys.
QUALIFIED_KEY = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"
)
LABEL_VALUE = r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$"
# A Prometheus duration (units largest first, whole numbers): what ServiceMonitor and
# PodMonitoring accept for `interval` (prometheus/common model.ParseDuration).
DURATION = (
    r"^(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?$"
)

# A Kubernetes resource quantity, unsigned (k8s.io/apimachinery resource.Quantity): a decimal
# number with a binary (Ki..Ei), decimal (m, k, M..E) or exponent suffix.
QUANTITY = r"^([0-9]+(\.[0-9]*)?|\.[0-9]+)([KMGTPE]i|[mkMGTPE]|[eE][+-]?[0-9]+)?$"
# An image registry to pull from instead of each image's own: a host (with a dot or a port, or
# `localhost`, else container runtimes read it as a Docker Hub namespace), an optional port and
# an optional path prefix of repository components (distribution/reference grammar).
_HOST = (
    r"(localhost|[A-Za-z0-9]([-A-Za-z0-9]*[A-Za-z0-9])?(\.[A-Za-z0-9]([-A-Za-z0-9]*[A-Za-z0-9])?)+)"
)
_PATH_COMPONENT = r"[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*"
# A TCP port, 1 to 65535.
_PORT = r"(6553[0-5]|655[0-2][0-9]|65[0-4][0-9]{2}|6[0-4][0-9]{3}|[1-5][0-9]{4}|[1-9][0-9]{0,3})"
REGISTRY = (
    rf"^({_HOST}(:{_PORT})?|[A-Za-z0-9]([-A-Za-z0-9]*[A-Za-z0-9])?:{_PORT})(/{_PATH_COMPONENT})*$"
)
# A container image reference: name, optional tag, optional digest (pinning is lint's business).
IMAGE = (
    r"^[a-z0-9][-a-z0-9._/:]*[a-z0-9](:[A-Za-z0-9_][-A-Za-z0-9_.]{0,127})?(@sha256:[0-9a-f]{64})?$"
)
# The same, pinned by digest: an image that must be exactly one build's.
IMAGE_BY_DIGEST = (
    r"^[a-z0-9][-a-z0-9._/:]*[a-z0-9](:[A-Za-z0-9_][-A-Za-z0-9_.]{0,127})?@sha256:[0-9a-f]{64}$"
)
# An RHCOS build as NFD labels it (system-os_release.OSTREE_VERSION) and as the cluster's
# `openshift/driver-toolkit` ImageStream names its tags: `416.94.202410211619-0` up to
# OpenShift 4.18, `9.6.20250916-0` from 4.19.
RHCOS_BUILD = r"^[0-9]{1,4}\.[0-9]{1,4}\.[0-9]{1,14}-[0-9]{1,4}$"
# A kernel release as `uname -r` prints it on Ubuntu, e.g. 6.8.0-60-generic.
KERNEL_RELEASE = r"^[0-9]+\.[0-9]+\.[0-9]+-[0-9]+-[a-z0-9-]+$"
# An extended resource name with its domain, as a device plugin advertises it.
EXTENDED_RESOURCE = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)+/[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"


@dataclass(frozen=True)
class Doc:
    """How the config reference (docs/config.md, written by gpustack.docs) shows a field where its annotation does not
    say it in words: `type` names the value ("DNS-1123 label"), `default` says what an unset
    field means, `see` names the section of docs/ that explains it. Pydantic ignores it, so it
    goes in `Annotated[...]`, on a field or on a type alias."""

    type: str | None = None
    default: str | None = None
    see: str | None = None


Name = Annotated[str, Field(pattern=DNS1123_LABEL, max_length=63), Doc(type="DNS-1123 label")]
LabelKey = Annotated[str, Field(pattern=QUALIFIED_KEY, max_length=316), Doc(type="label key")]
LabelValue = Annotated[str, Field(pattern=LABEL_VALUE, max_length=63), Doc(type="label value")]
# An image tag that is a release version (the device plugin's, the toolkit's, MIG manager's).
# A few digits a part: no release has more, and the validator's release is compared as numbers.
ReleaseTag = Annotated[
    str, Field(pattern=r"^v[0-9]{1,9}\.[0-9]{1,9}\.[0-9]{1,9}$"), Doc(type="`vX.Y.Z`")
]

_DURATION_UNITS_MS = {
    "y": 365 * 86_400_000,
    "w": 7 * 86_400_000,
    "d": 86_400_000,
    "h": 3_600_000,
    "m": 60_000,
    "s": 1000,
    "ms": 1,
}


def duration_ms(duration: str) -> int:
    """Milliseconds in a Prometheus duration that matches DURATION."""
    return sum(
        int(amount) * _DURATION_UNITS_MS[unit]
        for amount, unit in re.findall(r"([0-9]+)(ms|y|w|d|h|m|s)", duration)
    )


# Prometheus keeps a duration as Go's time.Duration: int64 nanoseconds (prometheus/common model).
MAX_DURATION_MS = (2**63 - 1) // 1_000_000


def _absolute_path(path: str) -> str:
    if not path.startswith("/") or posixpath.normpath(path) != path:
        raise ValueError(f"{path!r} is not an absolute, normalized path (such as /var/lib/kubelet)")
    return path


# A path on the node (hostPath, driver root): absolute, with no '..', '.' or '//'.
HostPath = Annotated[str, AfterValidator(_absolute_path)]
# A Git repository URL as Argo CD takes it: a URL with a scheme, or scp-like git@host:path.
REPO_URL = r"^([a-z][a-z0-9+.-]*://[^\s/]+\S*|[A-Za-z0-9._-]+@[A-Za-z0-9.-]+:\S+)$"


class Strict(BaseModel):
    """Unknown fields are errors: a misspelled field must never be silently ignored."""

    # strict: "true" is not a boolean and "4" not a number (YAML already types values).
    # defer_build: validators are built on first use, not at import: a run validates a few
    # top-level models, whose validators hold their nested models' (start-up time).
    model_config = ConfigDict(
        extra="forbid", frozen=True, populate_by_name=False, strict=True, defer_build=True
    )


_M = TypeVar("_M", bound=BaseModel)


def _section(model: type[_M]) -> Callable[[], _M]:
    """The default of a section left out: its fields' defaults, as `model()` would give them.
    The section's validator is left unbuilt (`model()` builds it, though the validator of the
    model that holds the section holds its schema already): pydantic never validates a default,
    and the sections' model validators only check values; about 35 ms of a command's start-up."""
    return lambda: model.model_construct()


def _no_items() -> list[Any]:
    """The default of a list field. Not `list` itself: pydantic asks each default factory for
    its signature as it builds a validator, and a builtin's is parsed from its text signature,
    about 0.2 ms each time (pydantic v2.14, pydantic/_internal/_fields.py
    `takes_validated_data_argument`)."""
    return []


_QUANTITY_SUFFIXES = {
    "": Decimal(1),
    "m": Decimal("0.001"),
    "k": Decimal(10) ** 3,
    "M": Decimal(10) ** 6,
    "G": Decimal(10) ** 9,
    "T": Decimal(10) ** 12,
    "P": Decimal(10) ** 15,
    "E": Decimal(10) ** 18,
    "Ki": Decimal(2) ** 10,
    "Mi": Decimal(2) ** 20,
    "Gi": Decimal(2) ** 30,
    "Ti": Decimal(2) ** 40,
    "Pi": Decimal(2) ** 50,
    "Ei": Decimal(2) ** 60,
}


def quantity_value(quantity: str) -> Decimal:
    """The amount a quantity matching QUANTITY stands for ('500m' -> 0.5, '1Gi' -> 1073741824)."""
    number, suffix = re.fullmatch(r"([0-9.]+)(.*)", quantity).groups()  # type: ignore[union-attr]
    if re.fullmatch(r"[eE][+-]?[0-9]+", suffix):  # an exponent; "E" and "Ei" are units
        return Decimal(number) * Decimal(10) ** int(suffix[1:])
    return Decimal(number) * _QUANTITY_SUFFIXES[suffix]


def _number_as_text(value: Any) -> Any:
    # YAML reads `cpu: 1` and `cpu: 0.5` as numbers; Kubernetes takes either, gpustack writes text.
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    return value


Quantity = Annotated[
    str,
    BeforeValidator(_number_as_text),
    Field(pattern=QUANTITY, max_length=64),
    Doc(type="quantity"),
]
ResourceName = Annotated[
    str, Field(pattern=QUALIFIED_KEY, max_length=253), Doc(type="resource name")
]


class ResourceRequirements(Strict):
    """A container's `resources`, as in a pod spec."""

    requests: Annotated[dict[ResourceName, Quantity], Doc(default="none")] = Field(
        default_factory=dict,
        description="requests of the container: what the scheduler reserves, e.g. `cpu: 50m`",
    )
    limits: Annotated[dict[ResourceName, Quantity], Doc(default="none")] = Field(
        default_factory=dict,
        description="limits of the container: the most it may use, e.g. `memory: 512Mi`; each "
        "request at most its limit",
    )

    @model_validator(mode="after")
    def _requests_within_limits(self) -> Self:
        # The API server refuses a request above its limit (ValidateResourceRequirements).
        for name, request in self.requests.items():
            limit = self.limits.get(name)
            if limit is not None and quantity_value(request) > quantity_value(limit):
                raise ValueError(f"requests.{name} {request} is more than limits.{name} {limit}")
        return self

    def as_pod_spec(self) -> dict[str, dict[str, str]]:
        return {
            field: dict(values)
            for field, values in (("requests", self.requests), ("limits", self.limits))
            if values
        }


class WithResources(Strict):
    """A component's config section with `resources` for its main container (the first container
    of each of its workloads). `components` names those workloads by their
    `app.kubernetes.io/component` label; decorate applies the requirements, so a new component
    gets the setting by deriving from this class."""

    components: ClassVar[tuple[str, ...]] = ()
    # The config reference: the main container ("the plugin container"), and gpustack's own
    # requirements for it (what the component module sets when `resources` is unset).
    container: ClassVar[str] = ""
    resource_defaults: ClassVar[dict[str, str]] = {}
    resources: Annotated[ResourceRequirements | None, Doc(see="Resources")] = Field(
        default=None,
        description="requests and limits of the container; given, they replace gpustack's own "
        "for it as a whole",
    )


class Metadata(Strict):
    name: Name = Field(
        description=(
            "cluster name; names the output folder. With `gitops.tool` argocd at most 54 "
            "characters, flux at most 43 (it becomes part of object names)"
        )
    )


# The Kubernetes feature gates that change what gpustack renders.
KubernetesFeatureGate = Literal["DRAExtendedResource"]


class Platform(Strict):
    profile: Annotated[
        str,
        Doc(
            type="`openshift` | `gke-cos` | `gke-ubuntu` | `rke2` | `k3s` | `aks` | `kubeadm` | "
            "`eks-al2023` | `eks-bottlerocket` | a user profile"
        ),
    ] = Field(description="the platform profile")
    kubernetesVersion: Annotated[str, Field(pattern=r"^1\.[0-9]{2}$"), Doc(type='`"1.NN"`')] = (
        Field(
            description=(
                "target Kubernetes minor version for schema validation and API deprecations, e.g."
                " `1.31`; on OpenShift it follows `openshiftVersion` when left out (4.18: 1.31), "
                "and one that another OpenShift release ships is refused"
            )
        )
    )
    openshiftVersion: Annotated[
        Annotated[str, Field(pattern=r"^4\.[0-9]{1,2}$")] | None, Doc(type='`"4.N"` or `"4.NN"`')
    ] = Field(
        default=None,
        description=(
            "OpenShift minor version, e.g. `4.20`; names the nodes' RHCOS, and with it the "
            "driver image and the Driver Toolkit; follows `kubernetesVersion` when only that is "
            "written"
        ),
    )
    featureGates: Annotated[
        dict[KubernetesFeatureGate, bool], Doc(default="none (the release's defaults)")
    ] = Field(
        default_factory=dict,
        description=(
            "Kubernetes feature gates the cluster's API server and scheduler run with, where "
            "they differ from the release's defaults and change what gpustack renders: "
            "`DRAExtendedResource` (KEP-5004; alpha and off in 1.34 and 1.35, on from 1.36) "
            "decides whether the `gpu.nvidia.com` DeviceClass carries `extendedResourceName`"
        ),
    )


class Taint(Strict):
    key: LabelKey = Field(description="taint key")
    value: LabelValue | None = Field(default=None, description="taint value")
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] = Field(
        description="taint effect"
    )


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


class Sharing(Strict):
    strategy: Literal["none", "time-slicing", "mps"] = Field(
        default="none",
        description="GPU sharing; `mps` not with MIG, `time-slicing` not with MIG `mixed`",
    )
    replicas: int = Field(default=4, ge=2, le=48, description="pods that may share one GPU")
    renameByDefault: bool = Field(
        default=False, description="advertise shared GPUs as `nvidia.com/gpu.shared`"
    )
    failRequestsGreaterThanOne: bool = Field(
        default=True, description="refuse pods that request more than one shared GPU"
    )


# A mig-parted config name (a node label value: nvidia.com/mig.config=<name>).
MigConfigName = Annotated[
    str, Field(pattern=LABEL_VALUE, min_length=1, max_length=63), Doc(type="MIG config name")
]


# A driver version as the driver image tags name it (`driver.version`).
DriverVersion = Annotated[
    str, Field(pattern=r"^[0-9]+\.[0-9]+(\.[0-9]+)?$"), Doc(type="driver version")
]


class PoolDevicePlugin(Strict):
    """A pool's device plugin settings over the cluster's `devicePlugin`."""

    migStrategy: Annotated[
        Literal["none", "single", "mixed"] | None, Doc(default="the cluster's")
    ] = Field(default=None, description="MIG strategy of the plugin and GFD on the pool's nodes")
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
        default_factory=_no_items,
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
        Literal["device-plugin", "dra"] | None,
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
        seen = set()
        for taint in taints:
            if (taint.key, taint.effect) in seen:
                raise ValueError(f"taint {taint.key}:{taint.effect} is listed twice")
            seen.add((taint.key, taint.effect))
        return taints


class Nodes(Strict):
    selector: dict[LabelKey, LabelValue] = Field(
        default_factory=dict,
        description="labels GPU nodes carry, ANDed into every GPU workload's placement",
    )
    taints: Annotated[list[Taint], Doc(type="list of taints")] = Field(
        default_factory=_no_items,
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
        default_factory=_no_items,
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
        seen = set()
        for taint in taints:
            if (taint.key, taint.effect) in seen:
                raise ValueError(f"taint {taint.key}:{taint.effect} is listed twice")
            seen.add((taint.key, taint.effect))
        return taints

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


class DevicePlugin(WithResources):
    components = ("device-plugin",)
    container = "the plugin container"
    resource_defaults = {"requests": "cpu `10m`, memory `64Mi`"}
    enabled: bool = Field(
        description="deploy NVIDIA's device plugin (GKE ships its own: `false` there)"
    )
    version: ReleaseTag = Field(default="v0.20.0", description="device plugin (and GFD) image tag")
    migStrategy: Literal["none", "single", "mixed"] = Field(
        default="none", description="MIG strategy of the plugin and GFD"
    )
    sharing: Sharing = Field(default_factory=_section(Sharing))
    deviceListStrategy: Annotated[
        Literal["auto", "envvar", "cdi-annotations", "cdi-cri", "volume-mounts"],
        Doc(see="Driver and container runtime"),
    ] = Field(
        default="auto",
        description=(
            "how the plugin hands allocated GPUs to the runtime; `auto`: `cdi-annotations` and "
            "`cdi-cri` where gpustack renders the Container Toolkit (it turns CDI on), as the "
            "GPU Operator does, else `envvar`"
        ),
    )


class GFD(WithResources):
    components = ("gpu-feature-discovery",)
    container = "the GFD container"
    enabled: bool = Field(default=True, description="deploy GPU Feature Discovery")


# mig-parted's built-in config that turns MIG mode off on every GPU (gpustack.resolve.mig).
MIG_DISABLED = "all-disabled"


class MigManagerConfig(Strict):
    file: Annotated[str | None, Doc(type="path")] = Field(
        default=None,
        description=(
            "a mig-parted config file (`version: v1`, `mig-configs`), relative to the config "
            "file and inside its repository, whose configs are added to the built-in ones "
            "(same name: replaces it, but "
            "`all-disabled`, which gpustack gives pools that keep their GPUs whole, cannot turn "
            "MIG on); checked as mig-parted checks it"
        ),
    )


class MigManager(WithResources):
    components = ("mig-manager",)
    container = "the MIG manager container"
    enabled: bool | Literal["auto"] = Field(
        default="auto",
        description=(
            "deploy NVIDIA's MIG manager; `auto`: with `devicePlugin.migStrategy` `single` or"
            " `mixed`, on profiles whose node pools do not partition GPUs themselves (not "
            "GKE)"
        ),
    )
    # NVIDIA/gpu-operator deployments/gpu-operator/values.yaml (v26.7.0) `migManager.version`.
    version: ReleaseTag = Field(
        default="v0.15.0",
        description="MIG manager image tag (`nvcr.io/nvidia/cloud-native/k8s-mig-manager`)",
    )
    defaultConfig: MigConfigName = Field(
        default=MIG_DISABLED,
        description=(
            "the MIG config the `node/` files label GPU nodes with (`nvidia.com/mig.config`);"
            " a built-in config or one of `config.file`"
        ),
    )
    withReboot: bool = Field(
        default=False,
        description="reboot the node when a MIG mode change does not take effect otherwise",
    )
    config: MigManagerConfig = Field(default_factory=_section(MigManagerConfig))


class NFD(WithResources):
    # The worker runs on every node, the part to size per node; master and gc keep upstream's.
    components = ("nfd-worker",)
    container = "the `nfd-worker` container (the NFD pod on every node)"
    resource_defaults = {"requests": "upstream's"}
    mode: Literal["deploy", "external", "disabled"] = Field(
        description=(
            "`deploy`: emit NFD; `external`: NFD is installed elsewhere; `disabled`: no NFD, "
            "so GPU workloads drop NFD's `pci-10de` label and select on `nodes.selector` "
            "(required then, unless the profile finds GPU nodes by a platform label, as GKE "
            "does)"
        )
    )
    version: ReleaseTag = Field(default="v0.19.0", description="NFD image tag (with `deploy`)")


class DCGMExporter(WithResources):
    components = ("dcgm-exporter",)
    container = "the exporter container"
    resource_defaults = {
        "requests": "cpu `100m`, memory `128Mi`",
        "limits": "memory `512Mi`",
    }
    enabled: bool = Field(
        default=True,
        description=(
            "deploy the DCGM exporter (`false` on GKE clusters whose managed DCGM metrics are on)"
        ),
    )
    # <DCGM version>-<exporter version>; gpu-operator deployments/gpu-operator/values.yaml
    # (a22dbf6) `dcgmExporter.version`, newer than dcgm-exporter's own chart (4.5.3-4.8.2).
    version: Annotated[
        str,
        Field(pattern=r"^[0-9]+\.[0-9]+\.[0-9]+-[0-9]+\.[0-9]+\.[0-9]+$"),
        Doc(type="`X.Y.Z-X.Y.Z` (DCGM-exporter)"),
    ] = Field(default="4.6.0-4.8.3", description="image tag, without the `-distroless` suffix")
    monitor: Annotated[
        Literal["auto", "servicemonitor", "podmonitoring", "azure-servicemonitor", "none"],
        Doc(see="DCGM exporter and monitoring"),
    ] = Field(
        default="auto",
        description="how Prometheus finds the exporter; `auto`: the profile's choice",
    )
    # min_length 2: the pattern alone would accept an empty string.
    interval: Annotated[
        str, Field(pattern=DURATION, min_length=2), Doc(type="Prometheus duration")
    ] = Field(
        default="15s",
        description=(
            "scrape interval and the exporter's collection interval, e.g. `1m30s`; longer than zero"
        ),
    )
    monitorLabels: dict[LabelKey, LabelValue] = Field(
        default_factory=dict,
        description=(
            "extra labels on the ServiceMonitor/PodMonitoring, e.g. `release: "
            "kube-prometheus-stack`"
        ),
    )

    @field_validator("interval")
    @classmethod
    def _positive_interval(cls, interval: str) -> str:
        if duration_ms(interval) == 0:
            raise ValueError("the interval must be longer than zero")
        if duration_ms(interval) > MAX_DURATION_MS:
            raise ValueError("the interval is longer than Prometheus can represent (292 years)")
        return interval


# The alerts gpustack renders (gpustack.build.components.alerts; docs/components.md, "Alert runbooks").
AlertName = Literal[
    "GPUXidError",
    "GPUFallenOffBus",
    "GPUsMissing",
    "GPUDoubleBitECCError",
    "GPURowRemapFailure",
    "GPUsNotAdvertised",
    "GPUThermalThrottling",
    "GPUPowerThrottling",
    "GPUNodeDaemonSetNotRunning",
    "GPUsIdleWhilePodsWait",
    "GPUNodeDriverValidationFailed",
    "GPUNodeToolkitNotReady",
    "GPUNodeCUDANotReady",
    "GPUNodeNoDevicesAdvertised",
]
Severity = Annotated[
    str, Field(pattern=LABEL_VALUE, min_length=1, max_length=63), Doc(type="label value")
]
# A Prometheus duration for a threshold or an alert's `for` (`0s`: at once).
RuleDuration = Annotated[
    str, Field(pattern=DURATION, min_length=2, max_length=32), Doc(type="Prometheus duration")
]


def _positive_duration(field: str, duration: str) -> None:
    if duration_ms(duration) == 0:
        raise ValueError(f"{field} must be longer than zero")
    if duration_ms(duration) > MAX_DURATION_MS:
        raise ValueError(f"{field} is longer than Prometheus can represent (292 years)")


class AlertThresholds(Strict):
    """When each alert fires: levels and how long a condition must last (the alert's `for`)."""

    errorWindow: RuleDuration = Field(
        default="15m",
        description=(
            "GPUXidError, GPUDoubleBitECCError: how long after a new error the alert keeps firing"
        ),
    )
    gpuCountLookback: RuleDuration = Field(
        default="1d",
        description=(
            "GPUsMissing: a node whose exporter reports fewer GPUs than it did within this time "
            "has lost one"
        ),
    )
    notAdvertisedFor: RuleDuration = Field(
        default="10m",
        description="GPUsNotAdvertised: how long a node may advertise fewer GPUs than it has",
    )
    throttledRatio: Annotated[float, Doc(type="number, 0 to 1")] = Field(
        default=0.1,
        gt=0,
        le=1,
        description=(
            "GPUThermalThrottling, GPUPowerThrottling: share of time (0 to 1) a GPU's clocks "
            "are held down that counts as throttled"
        ),
    )
    throttledFor: RuleDuration = Field(
        default="15m", description="GPUThermalThrottling, GPUPowerThrottling: for how long"
    )
    daemonSetFor: RuleDuration = Field(
        default="15m",
        description="GPUNodeDaemonSetNotRunning: how long a GPU node may lack a pod",
    )
    idleUtilization: int = Field(
        default=0,
        ge=0,
        le=100,
        description="GPUsIdleWhilePodsWait: utilisation in percent at or below which a GPU is idle",
    )
    idleFor: RuleDuration = Field(
        default="30m",
        description="GPUsIdleWhilePodsWait: how long GPUs are idle while GPU pods cannot schedule",
    )
    # NVIDIA/gpu-operator v26.7.0 assets/state-node-status-exporter/
    # 0800_prometheus_rule_openshift.yaml: `for: 30m` on each node deployment alert.
    nodeValidationFor: RuleDuration = Field(
        default="30m",
        description=(
            "GPUNodeDriverValidationFailed, GPUNodeToolkitNotReady, GPUNodeCUDANotReady, "
            "GPUNodeNoDevicesAdvertised: how long a node's validation step may fail"
        ),
    )

    @model_validator(mode="after")
    def _positive_durations(self) -> Self:
        for name in ("errorWindow", "gpuCountLookback"):
            _positive_duration(name, getattr(self, name))
        for name in (
            "notAdvertisedFor",
            "throttledFor",
            "daemonSetFor",
            "idleFor",
            "nodeValidationFor",
        ):
            if duration_ms(getattr(self, name)) > MAX_DURATION_MS:
                raise ValueError(f"{name} is longer than Prometheus can represent (292 years)")
        return self


class Alerts(Strict):
    enabled: Annotated[bool | Literal["auto"], Doc(see="GPU alerts")] = Field(
        default="auto",
        description=(
            "render the GPU alerting and recording rules (a PrometheusRule; a ClusterRules with "
            "Google Managed Prometheus); `auto`: with the DCGM exporter and a monitor, but not "
            "with Azure Monitor's (`azure-servicemonitor`), which reads no rule objects"
        ),
    )
    thresholds: AlertThresholds = Field(default_factory=_section(AlertThresholds))
    severity: dict[AlertName, Severity] = Field(
        default_factory=dict,
        description=(
            "`severity` label per alert over gpustack's own (`critical` or `warning`, see the "
            "runbooks), e.g. `{GPUXidError: critical}`"
        ),
    )
    disabled: list[AlertName] = Field(
        default_factory=_no_items, description="alerts left out, e.g. `[GPUsIdleWhilePodsWait]`"
    )
    labels: dict[LabelKey, LabelValue] = Field(
        default_factory=dict,
        description="extra labels on every alert, for Alertmanager routing, e.g. `team: gpu`",
    )
    ruleLabels: dict[LabelKey, LabelValue] = Field(
        default_factory=dict,
        description=(
            "extra labels on the rule object, e.g. `release: kube-prometheus-stack` for a "
            "Prometheus `ruleSelector`"
        ),
    )
    runbookURL: Annotated[
        Annotated[str, Field(pattern=r"^https?://[^\s#]+$", max_length=1024)] | None,
        Doc(type="URL", default="none (no `runbook_url` annotation)"),
    ] = Field(
        default=None,
        description=(
            "where the alert runbooks (docs/components.md, Alert runbooks) are published; "
            "each alert links `<runbookURL>#<alert name in lower case>`"
        ),
    )


class Dashboard(Strict):
    enabled: Annotated[bool | Literal["auto"], Doc(see="GPU dashboard")] = Field(
        default="auto",
        description=(
            "render the DCGM Grafana dashboard as a ConfigMap for Grafana's sidecar; `auto`: "
            "with the DCGM exporter and a monitor"
        ),
    )
    labels: Annotated[dict[LabelKey, LabelValue], Doc(default='`grafana_dashboard: "1"`')] = Field(
        default_factory=lambda: {"grafana_dashboard": "1"},
        description=(
            "labels the Grafana sidecar finds dashboards by (kube-prometheus-stack's default "
            '`grafana_dashboard: "1"`); given, they replace the default'
        ),
    )
    namespace: Annotated[Name | None, Doc(default="none (the stack's namespace)")] = Field(
        default=None,
        description=(
            "namespace of the ConfigMap, e.g. Grafana's own (a sidecar watches only its "
            "namespace unless told to search all)"
        ),
    )
    folder: Annotated[str | None, Doc(default="none (the sidecar's default folder)")] = Field(
        default=None,
        max_length=253,
        description="Grafana folder (the sidecar's `grafana_folder` annotation)",
    )
    poolLabel: LabelKey = Field(
        default="nvidia.com/gpu.product",
        description=(
            "node label of the dashboard's pool variable, e.g. `cloud.google.com/gke-nodepool`; "
            "kube-state-metrics must export it (its metric labels allowlist for nodes)"
        ),
    )


class RuntimeClass(Strict):
    enabled: bool | Literal["auto"] = Field(
        default="auto",
        description=(
            "emit the RuntimeClass and set `runtimeClassName` on GPU pods; `auto`: when the "
            "profile's runtime needs it"
        ),
    )
    name: Annotated[
        str, Field(pattern=DNS1123_SUBDOMAIN, max_length=253), Doc(type="DNS-1123 subdomain")
    ] = Field(default="nvidia", description="RuntimeClass name")
    handler: Annotated[
        str, Field(pattern=DNS1123_LABEL, max_length=63), Doc(type="DNS-1123 label")
    ] = Field(default="nvidia", description="the runtime name in the container runtime's config")


class RhcosBuild(Strict):
    """One RHCOS build of an OpenShift cluster and the Driver Toolkit image made for it."""

    rhcosVersion: Annotated[str, Field(pattern=RHCOS_BUILD), Doc(type="RHCOS build")] = Field(
        description="the build, as NFD's `system-os_release.OSTREE_VERSION` label names it",
    )
    driverToolkitImage: Annotated[
        str, Field(pattern=IMAGE_BY_DIGEST), Doc(type="image by digest")
    ] = Field(
        description="that build's Driver Toolkit image, by digest (the ImageStream tag's image)",
    )


DriverMode = Literal["preinstalled", "container", "driver-toolkit", "gke-managed", "gke-installer"]

# A DaemonSet's rollingUpdate.maxUnavailable: a number of nodes or a percentage of them, never 0
# (apps/v1 DaemonSetSpec: it may not be 0 while maxSurge is 0, and the driver cannot surge).
MaxUnavailable = Annotated[
    Annotated[int, Field(ge=1)] | Annotated[str, Field(pattern=r"^([1-9][0-9]?|100)%$")],
    Doc(type="nodes (≥ 1) or percentage (`1%`..`100%`)"),
]


class DriverDrain(Strict):
    """k8s-driver-manager's node drain (NVIDIA/k8s-driver-manager v0.12.0 cmd/driver-manager
    ENABLE_AUTO_DRAIN, DRAIN_*): kubectl's drain of the node's pods when evicting the GPU pods is
    not enough to unload the old driver. It drains without setting DaemonSet pods aside
    (internal/kubernetes/client.go DrainNode: no IgnoreAllDaemonSets), so a drain of every pod
    meets a DaemonSet's pod (the driver pod itself) and fails: `podSelector` names the pods."""

    enabled: bool = Field(
        default=False,
        description=(
            "drain the node's pods that `podSelector` matches when the GPU pods' eviction fails "
            "or the old driver stays in use (`ENABLE_AUTO_DRAIN`); without `podSelector` the "
            "drain meets the driver's own DaemonSet pod and fails (k8s-driver-manager does not "
            "set DaemonSet pods aside)"
        ),
    )
    # gpu-operator deployments/gpu-operator/values.yaml (v26.7.0) driver.upgradePolicy.drain:
    # "It's recommended to set a timeout to avoid infinite drain".
    timeoutSeconds: Annotated[int, Field(ge=0), Doc(type="seconds")] = Field(
        default=300,
        description=(
            "how long eviction and the drain may take, 0: no limit (`DRAIN_TIMEOUT_SECONDS`); "
            "a stopping driver pod's eviction: an hour"
        ),
    )
    podSelector: Annotated[
        str,
        Field(pattern=r"^[A-Za-z0-9_./=!,() -]*$", max_length=1024),
        Doc(type="label selector", default="none (every pod)"),
    ] = Field(
        default="",
        description=(
            "drain only the pods this label selector matches, none of a DaemonSet's "
            "(`DRAIN_POD_SELECTOR_LABEL`)"
        ),
    )
    deleteEmptyDir: bool = Field(
        default=False,
        description="evict pods with `emptyDir` volumes, losing their data (`DRAIN_DELETE_EMPTYDIR_DATA`)",
    )
    force: bool = Field(
        default=False,
        description="also delete pods no controller manages (`DRAIN_USE_FORCE`)",
    )


class DriverUpgrade(Strict):
    maxUnavailable: MaxUnavailable = Field(
        default=1,
        description=(
            "how many GPU nodes at a time the driver DaemonSet's rolling update takes down; "
            "the next node waits until this one's new driver pod is Ready"
        ),
    )
    gpuPodEviction: bool = Field(
        default=True,
        description=(
            "evict the pods that use GPUs on the node before the old driver's daemons stop "
            "(as its driver pod stops) and before it is unloaded (`ENABLE_GPU_POD_EVICTION`)"
        ),
    )
    drain: DriverDrain = Field(default_factory=_section(DriverDrain))


class DriverManager(Strict):
    # NVIDIA/gpu-operator deployments/gpu-operator/values.yaml (v26.7.0) `driver.manager.version`.
    version: ReleaseTag = Field(
        default="v0.12.0",
        description=(
            "k8s-driver-manager image tag (`nvcr.io/nvidia/cloud-native/k8s-driver-manager`), "
            "the driver pod's init container"
        ),
    )


class Driver(WithResources):
    components = ("nvidia-driver",)
    container = "the driver container"
    mode: Annotated[Literal["auto"] | DriverMode, Doc(see="Driver and container runtime")] = Field(
        default="auto",
        description=(
            "who installs the driver; `auto`: the profile's default; must be one of the "
            "profile's modes"
        ),
    )
    # gpu-operator deployments/gpu-operator/values.yaml `driver.version` (v26.7.0).
    version: Annotated[
        str, Field(pattern=r"^[0-9]+\.[0-9]+(\.[0-9]+)?$"), Doc(type="driver version")
    ] = Field(
        default="595.91.07",
        description="NVIDIA driver of the driver container (GPU Operator v26.7.0's default)",
    )
    nodeOS: Annotated[
        str,
        Field(pattern=r"^(ubuntu[0-9]{2}\.[0-9]{2}|rhel[0-9]+\.[0-9]+)$"),
        Doc(type="`ubuntuNN.NN` | `rhelN.N`"),
    ] = Field(
        default="ubuntu22.04",
        description=(
            "the GPU nodes' OS, mode `container`: the image tag suffix (e.g. `ubuntu22.04`, "
            "`ubuntu24.04`, `rhel9.6`), and the driver selects only nodes whose NFD "
            "`system-os_release` labels match; OpenShift's is RHCOS, from "
            "`platform.openshiftVersion`"
        ),
    )
    precompiled: bool = Field(
        default=False,
        description=(
            "mode `container` on Ubuntu: NVIDIA's precompiled image for `kernelVersion` "
            "instead of building the driver on the node"
        ),
    )
    kernelVersion: Annotated[
        Annotated[str, Field(pattern=KERNEL_RELEASE)] | None,
        Doc(type="kernel release", default="none (with `precompiled`, this or `kernelVersions`)"),
    ] = Field(
        default=None,
        description=(
            "the GPU nodes' `uname -r`, e.g. `6.8.0-60-generic`; the driver selects only "
            "nodes with that kernel"
        ),
    )
    kernelVersions: Annotated[
        # `nvidia-driver-daemonset-<kernel>` names a DaemonSet and a label value: 63 at most.
        list[Annotated[str, Field(pattern=KERNEL_RELEASE, max_length=39)]],
        Doc(type="list of kernel releases", see="Driver and container runtime"),
    ] = Field(
        default_factory=_no_items,
        description=(
            "with `precompiled`: one driver DaemonSet per kernel, each with NVIDIA's "
            "precompiled image for it and on the nodes NFD labels with that kernel "
            "(`kernel-version.full`), so nodes keep a driver through a rolling kernel upgrade "
            "(list the old and the new kernel); the many-kernel form of `kernelVersion`"
        ),
    )
    driverToolkitImage: Annotated[
        str | None, Doc(type="image", default="profile (`facts.driver.driverToolkitImage`)")
    ] = Field(
        default=None,
        description=(
            "OpenShift: the Driver Toolkit image whose kernel matches the nodes' RHCOS (the "
            "`driver-toolkit` image that `oc adm release info` lists for the cluster's "
            "release)"
        ),
    )
    rhcosVersion: Annotated[
        Annotated[str, Field(pattern=RHCOS_BUILD)] | None,
        Doc(type="RHCOS build"),
    ] = Field(
        default=None,
        description=(
            "OpenShift: run the driver only on nodes of this RHCOS build (NFD "
            "`system-os_release.OSTREE_VERSION`, e.g. `416.94.202410211619-0`); needs "
            "`driverToolkitImage`; the one-build form of `rhcosBuilds`"
        ),
    )
    rhcosBuilds: Annotated[
        list[RhcosBuild],
        Doc(
            type="list of `{rhcosVersion, driverToolkitImage}`", see="Driver and container runtime"
        ),
    ] = Field(
        default_factory=_no_items,
        description=(
            "OpenShift: one driver DaemonSet per RHCOS build, each on the nodes of its build "
            "with that build's Driver Toolkit image (by digest), as the GPU Operator runs "
            "them; `gpustack driver-toolkit-builds` fills it from the cluster's "
            "`openshift/driver-toolkit` ImageStream"
        ),
    )

    upgrade: Annotated[DriverUpgrade, Doc(see="Driver upgrades")] = Field(
        default_factory=_section(DriverUpgrade),
        description="how a driver change rolls over the GPU nodes (driver container modes)",
    )
    manager: DriverManager = Field(default_factory=_section(DriverManager))

    @model_validator(mode="after")
    def _complete(self) -> Self:
        if self.precompiled and not self.kernelVersion and not self.kernelVersions:
            raise ConflictError(
                ("driver", "kernelVersion"),
                "driver.precompiled needs driver.kernelVersion (the GPU nodes' `uname -r`), or "
                "driver.kernelVersions for several: NVIDIA publishes one precompiled image per "
                "kernel",
            )
        if self.kernelVersions and self.kernelVersion:
            raise ConflictError(
                ("driver", "kernelVersion"),
                "driver.kernelVersions lists every kernel that gets a driver DaemonSet: drop "
                "driver.kernelVersion (the one-kernel form)",
            )
        if self.kernelVersions and not self.precompiled:
            raise ConflictError(
                ("driver", "kernelVersions"),
                "driver.kernelVersions picks the precompiled image of each kernel, and the "
                "driver is built on each node for its own kernel: it would change nothing; set "
                "driver.precompiled: true, or drop driver.kernelVersions",
            )
        for index, kernel in enumerate(self.kernelVersions):
            if kernel in self.kernelVersions[:index]:
                raise ConflictError(
                    ("driver", "kernelVersions", index),
                    f"kernel {kernel} is listed twice in driver.kernelVersions: one driver "
                    "DaemonSet per kernel",
                )
        if self.precompiled and not self.nodeOS.startswith("ubuntu"):
            raise ConflictError(
                ("driver", "precompiled"),
                "NVIDIA publishes precompiled driver images for Ubuntu only; set "
                "driver.precompiled: false",
            )
        if self.rhcosBuilds and (self.rhcosVersion or self.driverToolkitImage):
            raise ConflictError(
                ("driver", "rhcosVersion" if self.rhcosVersion else "driverToolkitImage"),
                "driver.rhcosBuilds names each RHCOS build's Driver Toolkit image: drop "
                "driver.rhcosVersion and driver.driverToolkitImage (the one-build form)",
            )
        seen: set[str] = set()
        for index, build in enumerate(self.rhcosBuilds):
            if build.rhcosVersion in seen:
                raise ConflictError(
                    ("driver", "rhcosBuilds", index, "rhcosVersion"),
                    f"RHCOS build {build.rhcosVersion} is listed twice in driver.rhcosBuilds: "
                    "one driver DaemonSet per build",
                )
            seen.add(build.rhcosVersion)
        if self.rhcosVersion and not self.driverToolkitImage:
            raise ConflictError(
                ("driver", "driverToolkitImage"),
                "driver.rhcosVersion needs driver.driverToolkitImage, the Driver Toolkit image of "
                "that RHCOS build (`oc adm release info --image-for=driver-toolkit`)",
            )
        return self


class Toolkit(WithResources):
    components = ("container-toolkit",)
    container = "the Container Toolkit container"
    enabled: bool | Literal["auto"] = Field(
        default="auto",
        description=(
            "deploy the NVIDIA Container Toolkit DaemonSet; `auto`: where the driver is a "
            "container or the profile needs it (`facts.runtime.toolkit.required`)"
        ),
    )
    # gpu-operator deployments/gpu-operator/values.yaml `toolkit.version` (v26.7.0).
    version: ReleaseTag = Field(
        default="v1.20.0",
        description="Container Toolkit image tag (GPU Operator v26.7.0's default)",
    )


# The first GPU Operator release whose own image (nvcr.io/nvidia/gpu-operator) carries
# `nvidia-validator`: NVIDIA/gpu-operator a4782da, "Consolidate operator and validator into one
# image", released in v25.10.0. Before it the validator was an image of its own
# (nvcr.io/nvidia/cloud-native/gpu-operator-validator, values.yaml v25.3.4), and the operator's
# image of those releases has no validator to run.
VALIDATOR_IN_OPERATOR_IMAGE = (25, 10, 0)


def _release(tag: str) -> tuple[int, ...]:
    return tuple(int(part) for part in tag.removeprefix("v").split("."))


def _carries_validator(component: str, tag: str, consequence: str) -> str:
    if _release(tag) < VALIDATOR_IN_OPERATOR_IMAGE:
        raise ValueError(
            f"the {component} runs `nvidia-validator` from the GPU Operator's image "
            "(nvcr.io/nvidia/gpu-operator), which carries it from v25.10.0 on: an older "
            f"release's image has none, {consequence}; give v25.10.0 or later, or leave it out"
        )
    return tag


class Validator(WithResources):
    components = ("operator-validator",)
    container = "the validator's main container"
    resource_defaults = {"requests": "cpu `10m`, memory `16Mi`"}
    enabled: Annotated[bool | Literal["auto"], Doc(see="Per-node validation")] = Field(
        default="auto",
        description=(
            "deploy NVIDIA's validator DaemonSet, which proves each GPU node (driver, "
            "/dev/char symlinks, runtime, CUDA, device plugin) and writes the ready files the "
            "other GPU DaemonSets wait for; `auto`: where its driver validation finds the "
            "driver (a driver container, or a host driver at `/`): not on GKE; `false` is "
            "refused where it would run"
        ),
    )
    # NVIDIA/gpu-operator deployments/gpu-operator/values.yaml (v26.7.0) `validator`: the
    # operator's own image (repository nvcr.io/nvidia, image gpu-operator, the chart's version).
    version: ReleaseTag = Field(
        default="v26.7.0",
        description="validator image tag (`nvcr.io/nvidia/gpu-operator`, which carries "
        "`nvidia-validator` from v25.10.0 on: no older release); also the Container Toolkit's "
        "driver validation",
    )
    cudaWorkload: bool = Field(
        default=True,
        description="the CUDA validation runs NVIDIA's vectorAdd pod on each node (`false`: "
        "it only writes `cuda-ready`)",
    )
    pluginWorkload: bool = Field(
        default=False,
        description="the device plugin validation also runs a pod that takes one GPU from the "
        "plugin (upstream's default: it checks the node advertises GPUs)",
    )

    @field_validator("version")
    @classmethod
    def _validator_image(cls, version: str) -> str:
        return _carries_validator(
            "validator",
            version,
            "the pod cannot start and every GPU DaemonSet waits for its ready files",
        )


class NodeStatusExporter(WithResources):
    components = ("node-status-exporter",)
    container = "the exporter container"
    resource_defaults = {"requests": "cpu `10m`, memory `32Mi`"}
    # NVIDIA/gpu-operator v26.7.0: deployments/gpu-operator/values.yaml `nodeStatusExporter.enabled`
    # false; the OpenShift bundle's ClusterPolicy (alm-examples) sets it true. The profiles carry
    # the same defaults.
    enabled: Annotated[bool, Doc(see="Node status exporter", default="the profile's")] = Field(
        default=False,
        description=(
            "deploy NVIDIA's node status exporter, which serves each GPU node's validation state "
            "(driver, toolkit, CUDA, device plugin) as metrics, with its monitor and alerts; "
            "needs the validator, whose ready files it reads"
        ),
    )
    # values.yaml `nodeStatusExporter`: the operator's own image, at the chart's version.
    version: ReleaseTag = Field(
        default="v26.7.0",
        description="exporter image tag (`nvcr.io/nvidia/gpu-operator`, run as "
        "`nvidia-validator` with COMPONENT=metrics; v25.10.0 or later)",
    )

    @field_validator("version")
    @classmethod
    def _validator_image(cls, version: str) -> str:
        return _carries_validator("node status exporter", version, "the pod cannot start")


class Entitlement(Strict):
    enabled: bool = Field(
        default=False, description="OpenShift, legacy clusters: emit the entitlement MachineConfigs"
    )
    pemFile: Annotated[str | None, Doc(type="path")] = Field(
        default=None,
        description="entitlement certificate, relative to the config file and inside its "
        "repository (one kept elsewhere: `--set entitlement.pemFile=PATH`); required with "
        "`enabled`",
    )


class Images(Strict):
    registry: Annotated[
        Annotated[str, Field(pattern=REGISTRY, max_length=255)] | None,
        Doc(type="`host[:port][/path]`", see="Air-gapped clusters"),
    ] = Field(
        default=None,
        description=(
            "pull every image from this registry (air-gapped clusters): each image's registry"
            " host is replaced, its repository path, tag and digest kept, e.g. "
            "`registry.example.com` or `registry.example.com:5000/mirror`"
        ),
    )
    pullSecrets: Annotated[
        list[Annotated[str, Field(pattern=DNS1123_SUBDOMAIN, max_length=253)]],
        Doc(type="list of Secret names"),
    ] = Field(
        default_factory=_no_items,
        description=(
            "`imagePullSecrets` of every pod gpustack emits; each Secret must exist in the "
            "pod's namespace"
        ),
    )

    requireDigests: Annotated[bool, Doc(see="Air-gapped clusters")] = Field(
        default=False,
        description=(
            "every image the cluster pulls must be pinned by digest: by the lock file beside the "
            "config (`gpustack.lock`, filled by `gpustack images --lock-from`) or in its own "
            "reference; `render` and `check` fail on an image without one"
        ),
    )

    @field_validator("pullSecrets")
    @classmethod
    def _unique_secrets(cls, secrets: list[str]) -> list[str]:
        for secret in secrets:
            if secrets.count(secret) > 1:
                raise ValueError(f"pull secret {secret} is listed twice")
        return secrets


# NVIDIA's CUDA vectorAdd sample, the GPU pod of k8s-device-plugin's README ("Running GPU Jobs").
SMOKE_TEST_IMAGE = "nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0"


class SmokeTest(Strict):
    enabled: Annotated[bool | Literal["auto"], Doc(see="The GPU smoke test")] = Field(
        default="auto",
        description="run the GPU smoke test Job; `auto`: with `gitops.tool` `argocd` or `flux`",
    )
    image: Annotated[str, Field(pattern=IMAGE, max_length=512), Doc(type="image reference")] = (
        Field(
            default=SMOKE_TEST_IMAGE,
            description="image of the GPU pod; its entrypoint must exit 0 only when the GPU works",
        )
    )
    command: Annotated[list[str] | None, Doc(default="none (the image's entrypoint)")] = Field(
        default=None,
        description="command to run instead, e.g. `[nvidia-smi]` with a CUDA base image",
    )
    resource: Annotated[
        Annotated[str, Field(pattern=EXTENDED_RESOURCE, max_length=253)] | None,
        Doc(
            type="extended resource name",
            default="none (`nvidia.com/gpu`, or `nvidia.com/gpu.shared` with `sharing.renameByDefault`)",
        ),
    ] = Field(
        default=None,
        description=(
            "the resource the pod takes one of, e.g. `nvidia.com/mig-1g.10gb` with MIG "
            "strategy `mixed`"
        ),
    )
    # The clock runs from the Job's start, Pending included; on a first install the GPU comes only
    # after NFD labels the node, the driver container builds (upstream's startup probe allows it
    # 60 s + 120 x 10 s) and MIG is partitioned (mig-parted waits up to 5 min for GPU clients).
    activeDeadlineSeconds: int = Field(
        default=1800, ge=30, le=86400, description="the Job fails when it has not passed by then"
    )


# The DRA driver's own feature gates at v0.4.1 (kubernetes-sigs/dra-driver-nvidia-gpu
# pkg/featuregates/featuregates.go) and the Kubernetes logging gates it registers too
# (k8s.io/component-base logs/api/v1, named in the chart's values.yaml `featureGates`).
DRAFeatureGate = Literal[
    "TimeSlicingSettings",
    "MPSSupport",
    "IMEXDaemonsWithDNSNames",
    "PassthroughSupport",
    "NVMLDeviceHealthCheck",
    "DynamicMIG",
    "ComputeDomainCliques",
    "CrashOnNVLinkFabricErrors",
    "DeviceMetadata",
    "ContextualLogging",
    "LoggingAlphaOptions",
    "LoggingBetaOptions",
]
# Kubernetes feature gates, off by default on some supported version, that a DRA driver feature
# needs on the control plane (dra-driver-nvidia-gpu site/content/docs/reference/feature-gates.md:
# DynamicMIG needs DRAPartitionableDevices on Kubernetes 1.34 and 1.35).
ClusterFeatureGate = Literal["DRAPartitionableDevices"]


class DRAGPUs(Strict):
    enabled: bool = Field(
        default=True,
        description=(
            "allocate whole GPUs, MIG devices and VFIO GPUs through ResourceClaims (DeviceClasses "
            "`gpu.nvidia.com`, `mig.nvidia.com`, `vfio.gpu.nvidia.com`; the kubelet plugin's "
            "`gpus` container; the chart's `resources.gpus.enabled`)"
        ),
    )
    resources: Annotated[ResourceRequirements | None, Doc(default="none (the chart's)")] = Field(
        default=None, description="requests and limits of the kubelet plugin's `gpus` container"
    )


class DRAComputeDomains(Strict):
    enabled: bool = Field(
        default=False,
        description=(
            "multi-node NVLink ComputeDomains (IMEX channels; GB200 NVL72 and the like): the "
            "ComputeDomain controller, the kubelet plugin's `compute-domains` container and "
            "their DeviceClasses (the chart's `resources.computeDomains.enabled`, on there); "
            "needs driver 570.158.01 or later and GFD's `nvidia.com/gpu.clique` labels"
        ),
    )
    resources: Annotated[ResourceRequirements | None, Doc(default="none (the chart's)")] = Field(
        default=None,
        description="requests and limits of the kubelet plugin's `compute-domains` container",
    )
    controllerResources: Annotated[
        ResourceRequirements | None, Doc(default="none (the chart's)")
    ] = Field(
        default=None, description="requests and limits of the ComputeDomain controller container"
    )


class DRA(Strict):
    # The chart's appVersion (deployments/helm/dra-driver-nvidia-gpu/Chart.yaml, v0.4.1).
    version: ReleaseTag = Field(
        default="v0.4.1",
        description=(
            "DRA driver image tag (`registry.k8s.io/dra-driver-nvidia/dra-driver-nvidia-gpu`); "
            "the manifests follow the chart of v0.4.1"
        ),
    )
    featureGates: Annotated[dict[DRAFeatureGate, bool], Doc(default="none (the driver's)")] = Field(
        default_factory=dict,
        description=(
            "the driver's feature gates (the chart's `featureGates`), e.g. "
            "`{DynamicMIG: true}`; combinations the driver refuses at start are refused"
        ),
    )
    gpus: DRAGPUs = Field(default_factory=_section(DRAGPUs))
    computeDomains: DRAComputeDomains = Field(default_factory=_section(DRAComputeDomains))
    logVerbosity: int = Field(
        default=4, ge=0, le=7, description="log verbosity of every driver component (0 to 7)"
    )
    clusterFeatureGates: Annotated[list[ClusterFeatureGate], Doc(default="none")] = Field(
        default_factory=_no_items,
        description=(
            "Kubernetes feature gates the cluster's control plane turns on beyond the defaults "
            "of `platform.kubernetesVersion`, e.g. `[DRAPartitionableDevices]`, which "
            "`DynamicMIG` needs before 1.36"
        ),
    )


# Where the rendered folder sits in the Git repository; `{name}` is the cluster's metadata.name.
PathTemplate = Annotated[
    str, Field(pattern=r"\{name\}", max_length=1024), Doc(type="path with `{name}`")
]
# Argo CD's in-cluster destination (argo-cd docs, declarative setup: "in-cluster").
IN_CLUSTER = "https://kubernetes.default.svc"


class ArgoCDDestination(Strict):
    server: Annotated[str | None, Doc(type="URL", default=f"none (in-cluster `{IN_CLUSTER}`)")] = (
        Field(default=None, description="API server of the target cluster; not with `name`")
    )
    name: str | None = Field(
        default=None,
        description="cluster name registered in Argo CD, may use `{name}`; not with `server`",
    )
    namespace: Annotated[Name | None, Doc(default="none (the stack's `namespace`)")] = Field(
        default=None, description="default namespace of the Application"
    )


class ArgoCDPlugin(Strict):
    name: Name = Field(
        default="gpustack",
        description=(
            "the plugin's name; the plugin runs `gpustack render --stdout` (`gpustack gitops "
            "plugin` prints it)"
        ),
    )


# A duration as Argo CD's sync retry reads it: seconds, or a Go duration (argo-cd v3.5.1,
# pkg/apis/application/v1alpha1/types.go, parseStringToDuration).
GO_DURATION = r"^([0-9]+|([0-9]+(ns|us|ms|s|m|h))+)$"


class ArgoCDBackoff(Strict):
    duration: Annotated[str, Field(pattern=GO_DURATION), Doc(type="duration")] = Field(
        default="1m", description="wait before the first retry"
    )
    factor: int = Field(default=2, ge=1, description="the wait is multiplied by this after each")
    maxDuration: Annotated[str, Field(pattern=GO_DURATION), Doc(type="duration")] = Field(
        default="10m", description="the longest wait between two attempts"
    )


class ArgoCDRetry(Strict):
    # Each attempt waits up to smokeTest.activeDeadlineSeconds (30 min) for a GPU before its
    # PostSync smoke test fails; with these defaults a first sync made before the GPU nodes
    # join keeps trying for about five and a half hours (9 attempts, 55 minutes of waits).
    limit: int = Field(
        default=8, ge=-1, description="retries of a failed sync (`-1`: no limit, `0`: none)"
    )
    backoff: ArgoCDBackoff = Field(default_factory=_section(ArgoCDBackoff))


class ArgoCD(Strict):
    repoURL: Annotated[
        Annotated[str, Field(pattern=REPO_URL)] | None,
        Doc(type="URL", default="none (required with argocd)"),
    ] = Field(default=None, description="Git repository Argo CD reads")
    targetRevision: str = Field(default="HEAD", description="branch, tag or commit to follow")
    path: PathTemplate = Field(
        default="out/{name}",
        description=(
            "rendered folder in the repository (with `plugin`: the config folder); `{name}` "
            "is `metadata.name`"
        ),
    )
    project: str = Field(default="default", description="Argo CD AppProject")
    namespace: Name = Field(
        default="argocd", description="namespace of the Application/ApplicationSet"
    )
    destination: ArgoCDDestination = Field(default_factory=_section(ArgoCDDestination))
    applicationSet: bool = Field(
        default=False,
        description=(
            "one ApplicationSet for the fleet (in `out/_gitops/`) instead of an Application "
            "per cluster"
        ),
    )
    plugin: ArgoCDPlugin | None = Field(
        default=None, description="let Argo CD run gpustack itself (ConfigManagementPlugin)"
    )
    automated: bool = Field(default=True, description="sync automatically on every commit")
    prune: bool = Field(default=True, description="delete objects removed from the output")
    selfHeal: bool = Field(default=True, description="revert changes made in the cluster")
    finalizer: Annotated[bool | None, Doc(default="on with `applicationSet`, else off")] = Field(
        default=None,
        description=(
            "the `resources-finalizer.argocd.argoproj.io` finalizer: deleting the Application "
            "deletes the objects it deployed"
        ),
    )
    retry: ArgoCDRetry = Field(
        default_factory=_section(ArgoCDRetry),
        description=(
            "`syncPolicy.retry`: a failed sync (e.g. the smoke test before any GPU node joined) "
            "is tried again"
        ),
    )

    @model_validator(mode="after")
    def _one_destination(self) -> Self:
        if self.destination.server and self.destination.name:
            raise ConflictError(
                ("gitops", "argocd", "destination"),
                "set gitops.argocd.destination.server or destination.name, not both",
            )
        return self


class FluxSourceRef(Strict):
    kind: Literal["GitRepository", "OCIRepository", "Bucket"] = Field(
        default="GitRepository", description="source kind"
    )
    name: Name = Field(description="source name, e.g. `flux-system`")
    namespace: Annotated[Name | None, Doc(default="none (`gitops.flux.namespace`)")] = Field(
        default=None, description="source namespace"
    )


class FluxGitReference(Strict):
    branch: Annotated[str | None, Doc(default="`main` when no ref is given")] = Field(
        default=None, description="branch to follow"
    )
    tag: str | None = Field(default=None, description="tag to follow")
    commit: str | None = Field(default=None, description="commit to follow")


class FluxGitRepository(Strict):
    url: Annotated[str, Doc(type="URL")] = Field(description="repository Flux clones")
    ref: FluxGitReference = Field(
        default_factory=lambda: FluxGitReference.model_construct(branch="main")
    )
    interval: Annotated[str, Field(pattern=DURATION), Doc(type="Prometheus-style duration")] = (
        Field(default="5m", description="how often Flux fetches")
    )


class Flux(Strict):
    sourceRef: Annotated[FluxSourceRef | None, Doc(default="none (required with flux)")] = Field(
        default=None, description="the Flux source the Kustomizations read"
    )
    gitRepository: FluxGitRepository | None = Field(
        default=None,
        description=(
            "also emit the GitRepository `sourceRef` names (needs kind `GitRepository`); "
            "leave out when `flux bootstrap` made it"
        ),
    )
    namespace: Name = Field(default="flux-system", description="namespace of the Kustomizations")
    path: PathTemplate = Field(default="./out/{name}", description="rendered folder in the source")
    interval: Annotated[str, Field(pattern=DURATION), Doc(type="duration")] = Field(
        default="10m", description="reconcile interval"
    )
    prune: bool = Field(default=True, description="delete removed objects")
    wait: bool = Field(
        default=True, description="wait for every object to become ready before dependents start"
    )
    timeout: Annotated[str, Field(pattern=DURATION), Doc(type="duration")] = Field(
        default="5m", description="apply and health-check timeout"
    )

    @model_validator(mode="after")
    def _repository_matches_source(self) -> Self:
        if self.gitRepository and self.sourceRef and self.sourceRef.kind != "GitRepository":
            raise ConflictError(
                ("gitops", "flux", "gitRepository"),
                f"gitops.flux.gitRepository needs sourceRef.kind GitRepository, "
                f"not {self.sourceRef.kind}",
            )
        return self


class PatchTarget(Strict):
    """kustomize's patch target (a Selector): every field given must match."""

    group: str | None = Field(
        default=None, description="API group, a regular expression matched whole (`apps`)"
    )
    version: str | None = Field(
        default=None, description="API version, a regular expression matched whole (`v1`)"
    )
    kind: str | None = Field(
        default=None, description="kind, a regular expression matched whole (`DaemonSet`)"
    )
    name: str | None = Field(
        default=None,
        description="object name, a regular expression matched whole (`nvidia-.*`)",
    )
    namespace: str | None = Field(
        default=None, description="namespace, a regular expression matched whole"
    )
    labelSelector: str | None = Field(
        default=None,
        description="Kubernetes label selector (`app.kubernetes.io/component=device-plugin`)",
    )
    annotationSelector: str | None = Field(
        default=None, description="the same syntax, over the objects' annotations"
    )


class PatchEntry(Strict):
    patch: Annotated[str | None, Doc(type="YAML text")] = Field(
        default=None,
        description=(
            "the patch itself: a strategic-merge patch (a mapping) or a JSON 6902 patch (a list "
            "of operations); not with `path`"
        ),
    )
    path: str | None = Field(
        default=None,
        description="a file holding the patch, relative to the config that names it and inside "
        "its repository; not with `patch`",
    )
    target: PatchTarget | None = Field(
        default=None,
        description=(
            "the objects the patch applies to; without it a strategic-merge patch applies to "
            "the object its own apiVersion, kind, name and namespace name"
        ),
    )

    @model_validator(mode="after")
    def _patch_or_path(self) -> Self:
        if (self.patch is None) == (self.path is None):
            raise ValueError("give either patch (the patch itself) or path (a file holding it)")
        return self


class GitOps(Strict):
    tool: Literal["none", "argocd", "flux"] = Field(
        default="none", description="emit GitOps objects into `gitops/`"
    )
    argocd: ArgoCD | None = Field(default=None, description="settings for tool argocd")
    flux: Flux | None = Field(default=None, description="settings for tool flux")


class GPUStack(Strict):
    """One cluster's GPU stack."""

    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        title="GPUStack",
    )

    apiVersion: Literal["gpustack.dev/v1alpha1"]
    kind: Literal["GPUStack"]
    extends: Annotated[str | list[str] | None, Doc(type="path, or list of paths")] = Field(
        default=None,
        description=(
            "a base config (path relative to this file, inside its repository) to inherit from, "
            "or several applied "
            "in order (later ones override earlier ones); in a folder render, a file that "
            "others extend is a base, not a cluster"
        ),
    )
    metadata: Metadata
    platform: Platform
    namespace: Name = Field(
        description="namespace of the GPU stack; gpustack writes its Namespace unless Kubernetes "
        "or the platform owns it (`default`, `kube-*`, the profile's `platformNamespaces`)"
    )
    nodes: Nodes = Field(default_factory=_section(Nodes))
    gpuAllocation: Annotated[
        Literal["device-plugin", "dra"], Doc(see="Dynamic Resource Allocation (DRA)")
    ] = Field(
        default="device-plugin",
        description=(
            "how pods get GPUs: `device-plugin`: the `nvidia.com/gpu` extended resource; "
            "`dra`: ResourceClaims served by NVIDIA's DRA driver (Kubernetes 1.34 or later), "
            "with no device plugin on the GPU nodes"
        ),
    )
    devicePlugin: DevicePlugin
    gfd: GFD = Field(default_factory=_section(GFD))
    migManager: MigManager = Field(default_factory=_section(MigManager))
    nfd: NFD
    dcgmExporter: DCGMExporter = Field(default_factory=_section(DCGMExporter))
    alerts: Alerts = Field(default_factory=_section(Alerts))
    dashboard: Dashboard = Field(default_factory=_section(Dashboard))
    runtimeClass: RuntimeClass = Field(default_factory=_section(RuntimeClass))
    driver: Driver = Field(default_factory=_section(Driver))
    toolkit: Toolkit = Field(default_factory=_section(Toolkit))
    validator: Validator = Field(default_factory=_section(Validator))
    nodeStatusExporter: NodeStatusExporter = Field(default_factory=_section(NodeStatusExporter))
    entitlement: Entitlement = Field(default_factory=_section(Entitlement))
    images: Images = Field(default_factory=_section(Images))
    dra: DRA = Field(
        default_factory=_section(DRA), description="NVIDIA's DRA driver, with `gpuAllocation: dra`"
    )
    smokeTest: SmokeTest = Field(default_factory=_section(SmokeTest))
    gitops: GitOps = Field(default_factory=_section(GitOps))
    patches: Annotated[list[PatchEntry], Doc(see="Patches")] = Field(
        default_factory=_no_items,
        description=(
            "kustomize-style patches applied to the rendered objects before they are checked; "
            "a base's come first"
        ),
    )

    def pool_mig_strategy(self, pool: NodePool | None) -> str:
        """The device plugin's MIG strategy on a pool's nodes (None: nodes in no pool)."""
        own = pool.devicePlugin.migStrategy if pool and pool.devicePlugin else None
        return own or self.devicePlugin.migStrategy

    def pool_sharing(self, pool: NodePool | None) -> Sharing:
        """The device plugin's GPU sharing on a pool's nodes (None: nodes in no pool)."""
        own = pool.devicePlugin.sharing if pool and pool.devicePlugin else None
        return own or self.devicePlugin.sharing

    def pool_mig_config(self, pool: NodePool | None) -> str:
        """The MIG layout a pool's nodes register with (None: nodes in no pool): its own, else
        the cluster's, except that a pool whose plugin uses no MIG while the cluster's does
        keeps its GPUs whole (`all-disabled`, mig-parted's built-in config)."""
        own = pool.migManager.defaultConfig if pool and pool.migManager else None
        if own:
            return own
        if self.pool_mig_strategy(pool) == "none" and self.devicePlugin.migStrategy != "none":
            return MIG_DISABLED
        return self.migManager.defaultConfig

    def pool_gpu_allocation(self, pool: NodePool | None) -> str:
        """How pods get a pool's GPUs (None: nodes in no pool): `device-plugin` or `dra`."""
        own = pool.gpuAllocation if pool else None
        return own or self.gpuAllocation

    def pool_driver_version(self, pool: NodePool | None) -> str:
        """The driver version of a pool's driver DaemonSet (None: nodes in no pool)."""
        own = pool.driver.version if pool and pool.driver else None
        return own or self.driver.version

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        for index, pool in [(None, None), *enumerate(self.nodes.pools)]:
            self._sharing_fits_mig(index, pool)
        self._gitops_complete()
        for section in ("alerts", "dashboard"):
            if getattr(self, section).enabled is True and not self.dcgmExporter.enabled:
                raise ConflictError(
                    (section, "enabled"),
                    f"{section}.enabled needs the DCGM exporter gpustack renders (its metrics "
                    "and counters); set dcgmExporter.enabled: true or "
                    f"{section}.enabled: auto",
                )
        if self.entitlement.enabled and not self.entitlement.pemFile:
            raise ConflictError(
                ("entitlement", "pemFile"),
                "entitlement.enabled needs entitlement.pemFile (the entitlement certificate)",
            )
        return self

    def _sharing_fits_mig(self, index: int | None, pool: NodePool | None) -> None:
        sharing, strategy = self.pool_sharing(pool), self.pool_mig_strategy(pool)
        where: tuple[str | int, ...] = ("devicePlugin",)
        name = "devicePlugin"
        if pool is not None and index is not None:
            if pool.devicePlugin is None:
                return  # the cluster's settings, checked as such
            where = ("nodes", "pools", index, "devicePlugin")
            name = f"pool {pool.name}'s devicePlugin"
        field = (
            "sharing"
            if pool is None or (pool.devicePlugin and pool.devicePlugin.sharing)
            else "migStrategy"
        )
        path = (*where, "sharing", "strategy") if field == "sharing" else (*where, "migStrategy")
        if sharing.strategy == "mps" and strategy != "none":
            raise ConflictError(
                path,
                "MPS sharing cannot be combined with MIG (the plugin shares only full GPUs "
                f"with MPS); set {name}.migStrategy: none or sharing.strategy: none",
            )
        if sharing.strategy == "time-slicing" and strategy == "mixed":
            raise ConflictError(
                path,
                "time-slicing with MIG strategy 'mixed' is not supported by this renderer "
                "(each MIG profile is its own resource); use "
                + ("" if pool is None else f"{name}.")
                + "migStrategy: single or none",
            )

    def _gitops_complete(self) -> None:
        gitops = self.gitops
        if gitops.tool == "argocd" and not (gitops.argocd and gitops.argocd.repoURL):
            raise ConflictError(
                ("gitops", "argocd", "repoURL"),
                "gitops.tool argocd needs gitops.argocd.repoURL (the Git repository Argo CD "
                "reads the rendered output from)",
            )
        if gitops.tool == "flux" and not (gitops.flux and gitops.flux.sourceRef):
            raise ConflictError(
                ("gitops", "flux", "sourceRef"),
                "gitops.tool flux needs gitops.flux.sourceRef (the GitRepository Flux reads "
                "this repository from, e.g. {kind: GitRepository, name: flux-system})",
            )
        # Argo CD and Flux label every object they apply with the Application or Kustomization
        # name, and label values are at most 63 characters.
        longest = {"argocd": "gpustack-", "flux": "gpustack--foundation"}.get(gitops.tool, "")
        if len(self.metadata.name) + len(longest) > 63:
            raise ConflictError(
                ("metadata", "name"),
                f"with gitops.tool {gitops.tool} the cluster name may have at most "
                f"{63 - len(longest)} characters (it becomes part of object names)",
            )


class ConflictError(ValueError):
    """Two settings contradict each other; `path` names the field to point the user at."""

    def __init__(self, path: tuple[str | int, ...], message: str) -> None:
        super().__init__(message)
        self.path = path
        self.message = message


# ---------------------------------------------------------------------------------------------
# Profiles: platform facts as data (profiles/*.yaml).


class NodeSelectorRequirement(Strict):
    key: LabelKey
    operator: Literal["In", "Exists"]
    values: list[str] = Field(default_factory=_no_items)


class ProfileMetadata(Strict):
    name: Name
    description: str


class ToolkitFacts(Strict):
    required: bool = Field(
        default=False,
        description="The runtime reaches the GPUs only through the toolkit, even with a host "
        "driver (toolkit.enabled auto turns it on).",
    )
    configFile: HostPath | None = Field(
        default=None, description="The runtime's top-level config file on the host."
    )
    dropInConfigFile: HostPath | None = Field(
        default=None, description="The drop-in file the toolkit writes the nvidia runtime to."
    )
    socket: HostPath | None = Field(default=None, description="The runtime's socket on the host.")
    restartMode: Literal["signal", "systemd", "none"] | None = Field(
        default=None,
        description="How the toolkit makes the runtime load what it configured (the installer's "
        "RUNTIME_RESTART_MODE): signal: SIGHUP to the process behind the socket, which exits and "
        "its supervisor starts it again; systemd: `systemctl restart` of the runtime's unit on "
        "the host; none: nothing, someone restarts it by hand. Unset: the installer's default "
        "(containerd: signal, CRI-O: systemd).",
    )
    env: dict[str, str] = Field(
        default_factory=dict, description="Extra environment of the toolkit container."
    )


class RuntimeFacts(Strict):
    engine: Literal["containerd", "cri-o"]
    runtimeClass: Literal["required", "optional", "default", "cdi-only", "none"] = Field(
        description="required: the default runtime is runc, GPU pods need runtimeClassName; "
        "optional: only when nvidia is not the default runtime; default: the platform makes "
        "the nvidia runtime the default (a toolkit gpustack deploys does the same), GPU pods "
        "name none; cdi-only: only with CDI; none: the platform mounts the driver itself."
    )
    unprivilegedEnvvar: bool = Field(
        default=True,
        description="The nvidia runtime hands GPUs to an unprivileged container that asks for "
        "them with NVIDIA_VISIBLE_DEVICES (the toolkit's accept-nvidia-visible-devices-envvar-"
        "when-unprivileged); false: only privileged containers get GPUs that way, so the "
        "stack's own GPU pods that request none run privileged.",
    )
    providedRuntimeClasses: list[str] = Field(
        default_factory=_no_items,
        description="RuntimeClasses the platform creates itself: GPU pods may name them, and "
        "gpustack does not emit one of the same name (it would fight the platform's copy).",
    )
    providedHandlers: list[str] = Field(
        default_factory=_no_items,
        description="The nvidia runtime handlers the platform adds to its runtime itself (RKE2 "
        "when it finds the toolkit): runtimeClass.handler must name one of them, since nothing "
        "else configures that runtime. Empty: whichever handler the toolkit or node/ names.",
    )
    containerdConfig: HostPath | None = None
    containerdSocket: HostPath | None = None
    toolkit: ToolkitFacts | None = Field(
        default=None,
        description="How the NVIDIA Container Toolkit DaemonSet configures this runtime; none: "
        "gpustack cannot deploy the toolkit on this platform.",
    )


class HostMount(Strict):
    path: HostPath
    mountPath: HostPath


# An OpenShift minor version, as platform.openshiftVersion takes it.
OpenShiftMinor = Annotated[str, Field(pattern=r"^4\.[0-9]{1,2}$")]
# A node OS as the driver image tags and NFD's labels name it: os-release ID then VERSION_ID.
NodeOS = Annotated[str, Field(pattern=r"^[a-z]+[0-9]+(\.[0-9]+)?$")]


class PublishedDriverImages(Strict):
    drivers: list[Annotated[str, Field(pattern=r"^[0-9]+\.[0-9]+(\.[0-9]+)?$")]] = Field(
        min_length=1
    )
    osTags: list[Annotated[str, Field(pattern=r"^[a-z]+[0-9]+(\.[0-9]+)?$")]] = Field(min_length=1)


class KubernetesVersionRange(Strict):
    """Kubernetes minor versions from `first` to `last`, both included."""

    first: Annotated[str, Field(pattern=r"^1\.[0-9]{2}$")] = Field(
        description='The first Kubernetes version, "1.NN".'
    )
    last: Annotated[str, Field(pattern=r"^1\.[0-9]{2}$")] = Field(
        description='The last Kubernetes version, "1.NN".'
    )


class DriverFacts(Strict):
    modes: list[DriverMode]
    default: DriverMode
    root: HostPath = Field(
        description="Driver root on the host when the driver is not a container (the device "
        "plugin's nvidiaDriverRoot); a driver container's is always /run/nvidia/driver."
    )
    devRoot: HostPath | None = Field(
        default=None,
        description="Where /dev with the GPU device nodes is, when not under the driver root.",
    )
    nodeOS: dict[OpenShiftMinor, NodeOS] = Field(
        default_factory=dict,
        description="OpenShift: the nodes' OS per OpenShift minor, `<os-release ID><VERSION_ID>` "
        "as NFD labels it (system-os_release.ID, .VERSION_ID); it replaces driver.nodeOS.",
    )
    publishedImages: PublishedDriverImages | None = Field(
        default=None,
        description="The OS tags under which NVIDIA publishes these drivers' images for the "
        "platform's nodes; a driver named here has no image under any other tag.",
    )
    driverToolkitImage: str | None = Field(
        default=None,
        description="Default Driver Toolkit image; {openshiftVersion} is replaced.",
    )
    hostMount: HostMount | None = Field(
        default=None,
        description="Where the platform keeps the driver and where GPU containers must see it "
        "(GKE: no nvidia runtime, the directory is mounted).",
    )
    installerOS: Literal["cos", "ubuntu"] | None = None
    nodeImage: str | None = Field(
        default=None,
        description="The node image that ships the driver and the runtime's NVIDIA setup, named "
        "when a setting that would install them again is refused.",
    )
    osSkus: dict[NodeOS, Annotated[str, Field(pattern=r"^[A-Za-z0-9]+$")]] = Field(
        default_factory=dict,
        description="AKS: the node pool OS SKU whose nodes run each driver.nodeOS; with a "
        "driver container the pool command asks for it, and a driver.nodeOS not listed is "
        "refused (no pool would run it).",
    )
    osSkuKubernetesVersions: dict[NodeOS, KubernetesVersionRange] = Field(
        default_factory=dict,
        description="AKS: the Kubernetes versions whose pools the OS SKU of each driver.nodeOS "
        "is offered for; a driver container for a platform.kubernetesVersion outside them is "
        "refused (AKS would refuse to create the pool).",
    )

    @model_validator(mode="after")
    def _default_allowed(self) -> Self:
        if self.default not in self.modes:
            raise ValueError(f"driver.default {self.default!r} is not one of driver.modes")
        return self


class CriticalPodsQuota(Strict):
    priorityClasses: list[str] = Field(min_length=1)
    pods: int = Field(
        ge=1, description="The quota's pod limit: one pod per GPU node per DaemonSet."
    )


class ProfileFacts(Strict):
    runtime: RuntimeFacts
    driver: DriverFacts
    devicePluginProvider: Literal["nvidia", "gke", "bottlerocket"] = Field(
        description="Whose device plugin serves nvidia.com/gpu: NVIDIA's (gpustack renders it), "
        "GKE's (a GKE add-on), Bottlerocket's (a host service configured by node settings)."
    )
    gpuNodeSelector: list[NodeSelectorRequirement] = Field(
        description="How GPU nodes are recognised (NFD's PCI label, or a platform label)."
    )
    monitoring: Literal["servicemonitor", "podmonitoring", "azure-servicemonitor", "none"]
    namespaceLabels: dict[LabelKey, LabelValue] = Field(default_factory=dict)
    platformNamespaces: list[Annotated[str, Field(pattern=r"^[a-z0-9][-a-z0-9]*\*?$")]] = Field(
        default_factory=_no_items,
        description="Namespaces the platform owns besides Kubernetes' own (`default`, `kube-*`), "
        "a trailing `*` matching any rest: gpustack deploys into them but never writes their "
        "Namespace object.",
    )
    securityContextConstraints: bool = Field(
        default=False, description="OpenShift: privileged pods need SCC `use` RBAC."
    )
    machineConfigOperator: bool = Field(
        default=False, description="OpenShift: node files are shipped as MachineConfigs."
    )
    taintMechanism: Literal[
        "openshift-machineset",
        "gke-node-pool",
        "aks-node-pool",
        "rke2-agent-config",
        "k3s-agent-config",
        "kubeadm-join",
        "eks-node-group",
    ]
    amiFamily: Literal["AmazonLinux2023", "Bottlerocket"] | None = Field(
        default=None,
        description="EKS: the node group's AMI family, as eksctl names it (`amiFamily`).",
    )
    nodeLabelsReapplied: bool = Field(
        default=False,
        description="The platform copies the labels the node files give GPU nodes onto them "
        "again whenever the node changes (OpenShift's Machine API), so labels that NVIDIA's "
        "managers flip cannot start there: the node files leave them out and each GPU node is "
        "labelled once by hand.",
    )
    kubeletRoot: HostPath = "/var/lib/kubelet"
    managedDCGMExporterFrom: Annotated[str, Field(pattern=r"^1\.[0-9]{2}$")] | None = Field(
        default=None,
        description="Kubernetes version from which the platform runs its own DCGM exporter on new "
        "clusters (render warns when gpustack's would run beside it).",
    )
    nodeFeatureAPI: bool = Field(
        default=True,
        description="The platform's own NFD (nfd.mode external) reads NodeFeature objects "
        "(nfd.k8s-sigs.io/v1alpha1), so GFD publishes its labels through the API; false: that NFD "
        "reads only the features.d files on each node, where GFD then writes them.",
    )
    nodeFeatureRuleGroup: str = Field(
        default="nfd.k8s-sigs.io",
        description="API group of the NodeFeatureRule that the platform's own NFD serves "
        "(nfd.mode external); gpustack's own NFD (deploy) serves upstream's nfd.k8s-sigs.io.",
    )
    nodeOSLabel: NodeSelectorRequirement | None = None
    openshiftKubernetesVersions: dict[
        OpenShiftMinor, Annotated[str, Field(pattern=r"^1\.[0-9]{2}$")]
    ] = Field(
        default_factory=dict,
        description="OpenShift: the Kubernetes minor each OpenShift minor ships. "
        "platform.kubernetesVersion follows platform.openshiftVersion (and the other way round "
        "when only it is written); a pair that disagrees is refused.",
    )
    migPartitioning: Literal["mig-manager", "node-pool", "node-settings"] = Field(
        default="mig-manager",
        description="Who creates MIG partitions: NVIDIA's MIG manager from the node label "
        "nvidia.com/mig.config, the platform's node pool (GKE's gpu-partition-size), or the node "
        "OS from its settings (Bottlerocket's MIG manager, settings.kubelet-device-plugins).",
    )
    kubeletSystemdService: str | None = Field(
        default="kubelet.service",
        description="The kubelet's systemd unit, which the MIG manager stops across a MIG mode "
        "change on nodes with a host driver; null when the kubelet has no unit of its own.",
    )
    criticalPodsQuota: CriticalPodsQuota | None = Field(
        default=None,
        description="GKE: pods with these PriorityClasses are admitted outside kube-system only "
        "in a namespace with a ResourceQuota scoped to them.",
    )


class Profile(Strict):
    apiVersion: Literal["gpustack.dev/v1alpha1"]
    kind: Literal["Profile"]
    extends: str | None = None
    metadata: ProfileMetadata
    facts: ProfileFacts
    defaults: dict[str, object] = Field(
        default_factory=dict,
        description="A partial GPUStack config merged beneath every config using this profile.",
    )

    @field_validator("defaults")
    @classmethod
    def _defaults_shape(cls, value: dict[str, object]) -> dict[str, object]:
        forbidden = {"apiVersion", "kind", "metadata", "extends"} & set(value)
        if forbidden:
            raise ValueError(f"defaults may not set {', '.join(sorted(forbidden))}")
        return value


def dns_label(value: str) -> bool:
    return bool(re.match(DNS1123_LABEL, value)) and len(value) <= 63


def field_default(path: str) -> Any:
    """The model's default for a config field named by its dotted path (`devicePlugin.sharing.
    replicas` -> 4); a KeyError for a field that has none (the profile must set it)."""
    model: type[BaseModel] = GPUStack
    *sections, name = path.split(".")
    for section in sections:
        annotation = model.model_fields[section].annotation
        if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
            raise KeyError(path)
        model = annotation
    field = model.model_fields[name]
    if field.is_required():
        raise KeyError(path)
    return field.get_default(call_default_factory=True)


def field_choices(path: str) -> tuple[str, ...]:
    """The values a config field of a Literal type may take, in the model's order."""
    model: type[BaseModel] = GPUStack
    *sections, name = path.split(".")
    for section in sections:
        annotation = model.model_fields[section].annotation
        assert isinstance(annotation, type) and issubclass(annotation, BaseModel), path
        model = annotation
    annotation = model.model_fields[name].annotation
    assert get_origin(annotation) is Literal, path
    return tuple(str(value) for value in get_args(annotation))


_ACCEPTS: dict[str, TypeAdapter[Any]] = {}


def field_accepts(path: str, value: Any) -> bool:
    """Whether a config field named by its dotted path takes `value` as it stands (its type and
    constraints, its own field validators; not the checks across fields)."""
    adapter = _ACCEPTS.get(path)
    if adapter is None:
        model: type[BaseModel] = GPUStack
        *sections, name = path.split(".")
        for section in sections:
            annotation = model.model_fields[section].annotation
            assert isinstance(annotation, type) and issubclass(annotation, BaseModel), path
            model = annotation
        field = model.model_fields[name]
        extras = [*field.metadata, *_field_validators(model, name)]
        typed: Any = Annotated[(field.annotation, *extras)] if extras else field.annotation
        adapter = TypeAdapter(typed, config=ConfigDict(strict=True))
        _ACCEPTS[path] = adapter
    try:
        adapter.validate_python(value)
    except ValidationError:
        return False
    return True


def _field_validators(model: type[BaseModel], name: str) -> list[AfterValidator]:
    """The model's `field_validator`s of one field, as validators of the field's type alone."""
    found = []
    for decorator in model.__pydantic_decorators__.field_validators.values():
        if name in decorator.info.fields and decorator.info.mode == "after":
            found.append(AfterValidator(getattr(model, decorator.cls_var_name)))
    return found
