"""The config sections of the components on the GPU nodes: the device plugin and its sharing,
GFD, the MIG manager, NFD, the RuntimeClass, the Container Toolkit, the validator, the node
status exporter, the GPU smoke test and NVIDIA's DRA driver. The driver's section is in
`driver_settings`, the exporter's and its alerts' in `monitoring_settings`."""

# No `from __future__ import annotations` in the config model's modules: pydantic would then
# have to evaluate every field annotation from its text as it creates each class. Python
# evaluates them as it defines the class instead; a validator returning its own model says `Self`.
from typing import Annotated, Literal

from pydantic import Field, field_validator

from gpustack.config.field_types import (
    DNS1123_LABEL,
    DNS1123_SUBDOMAIN,
    EXTENDED_RESOURCE,
    IMAGE,
    LABEL_VALUE,
    Doc,
    ReleaseTag,
    ResourceRequirements,
    Strict,
    WithResources,
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


# How the device plugin and GFD advertise MIG devices (k8s-device-plugin's `--mig-strategy`).
MigStrategy = Literal["none", "single", "mixed"]
# How pods get a node's GPUs: the device plugin's extended resource, or NVIDIA's DRA driver.
GPUAllocation = Literal["device-plugin", "dra"]


class DevicePlugin(WithResources):
    components = ("device-plugin",)
    container = "the plugin container"
    resource_defaults = {"requests": "cpu `10m`, memory `64Mi`"}
    enabled: bool = Field(
        description="deploy NVIDIA's device plugin (GKE ships its own: `false` there)"
    )
    version: ReleaseTag = Field(default="v0.20.0", description="device plugin (and GFD) image tag")
    migStrategy: MigStrategy = Field(
        default="none", description="MIG strategy of the plugin and GFD"
    )
    sharing: Sharing = Field(default_factory=Sharing)
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
    config: MigManagerConfig = Field(default_factory=MigManagerConfig)


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
    gpus: DRAGPUs = Field(default_factory=DRAGPUs)
    computeDomains: DRAComputeDomains = Field(default_factory=DRAComputeDomains)
    logVerbosity: int = Field(
        default=4, ge=0, le=7, description="log verbosity of every driver component (0 to 7)"
    )
    clusterFeatureGates: Annotated[list[ClusterFeatureGate], Doc(default="none")] = Field(
        default_factory=list,
        description=(
            "Kubernetes feature gates the cluster's control plane turns on beyond the defaults "
            "of `platform.kubernetesVersion`, e.g. `[DRAPartitionableDevices]`, which "
            "`DynamicMIG` needs before 1.36"
        ),
    )
