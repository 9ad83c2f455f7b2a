"""The typed platform profile (`kind: Profile`, profiles/*.yaml): the platform's facts, which
the checks and the components read, and the defaults merged beneath every config of it."""

# No `from __future__ import annotations` in the config model's modules: pydantic would then
# have to evaluate every field annotation from its text as it creates each class. Python
# evaluates them as it defines the class instead; a validator returning its own model says `Self`.
from typing import Annotated, Literal, Self

from pydantic import Field, field_validator, model_validator

from gpustack.config.driver_settings import DriverMode
from gpustack.config.field_types import HostPath, LabelKey, LabelValue, Name, Strict


class NodeSelectorRequirement(Strict):
    key: LabelKey
    operator: Literal["In", "Exists"]
    values: list[str] = Field(default_factory=list)


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
        default_factory=list,
        description="RuntimeClasses the platform creates itself: GPU pods may name them, and "
        "gpustack does not emit one of the same name (it would fight the platform's copy).",
    )
    providedHandlers: list[str] = Field(
        default_factory=list,
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
        default_factory=list,
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
