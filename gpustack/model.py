"""The typed cluster config (`kind: GPUStack`) and the platform profile (`kind: Profile`).

Field names are a contract (PRODUCT.md): scripts and editors rely on them. Fields a profile decides
are optional here; the profile's `defaults` are merged beneath the user's config before validation,
so a validated GPUStack always carries concrete values. The model knows nothing of files or YAML.
"""

from __future__ import annotations

import posixpath
import re
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator, model_validator

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

Name = Annotated[str, Field(pattern=DNS1123_LABEL, max_length=63)]
LabelKey = Annotated[str, Field(pattern=QUALIFIED_KEY, max_length=316)]
LabelValue = Annotated[str, Field(pattern=LABEL_VALUE, max_length=63)]

_DURATION_UNITS_MS = {"y": 365 * 86_400_000, "w": 7 * 86_400_000, "d": 86_400_000,
                      "h": 3_600_000, "m": 60_000, "s": 1000, "ms": 1}


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
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=False, strict=True)


class Metadata(Strict):
    name: Name = Field(description="Cluster name (DNS-1123 label); names the output folder.")


class Platform(Strict):
    profile: str = Field(
        description="openshift | gke-cos | gke-ubuntu | rke2 | kubeadm, or a user profile."
    )
    kubernetesVersion: Annotated[str, Field(pattern=r"^1\.[0-9]{2}$")] = Field(
        description="Target Kubernetes minor version for schemas and API deprecations, e.g. '1.31'."
    )
    openshiftVersion: Annotated[str, Field(pattern=r"^4\.[0-9]{1,2}$")] | None = Field(
        default=None, description="OpenShift minor version (openshift profile only), e.g. '4.16'."
    )


class Taint(Strict):
    key: LabelKey
    value: LabelValue | None = None
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]


class Nodes(Strict):
    selector: dict[LabelKey, LabelValue] = Field(
        default_factory=dict,
        description="Labels GPU nodes carry, ANDed into every GPU workload's placement.",
    )
    taints: list[Taint] = Field(
        default_factory=list,
        description="Taints GPU nodes carry; every GPU workload tolerates them and the node-side "
        "artifacts apply them.",
    )
    controlPlane: bool = Field(
        default=False,
        description="GPU nodes are also control-plane nodes (single-node clusters): GPU workloads "
        "tolerate the control-plane taint.",
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


class Sharing(Strict):
    strategy: Literal["none", "time-slicing", "mps"] = "none"
    replicas: int = Field(default=4, ge=2, le=48, description="Pods that may share one GPU.")
    renameByDefault: bool = Field(
        default=False, description="Advertise shared GPUs as nvidia.com/gpu.shared."
    )
    failRequestsGreaterThanOne: bool = Field(
        default=True, description="Refuse pods that request more than one shared GPU."
    )


class DevicePlugin(Strict):
    enabled: bool = Field(description="Deploy NVIDIA's device plugin (GKE ships its own: false).")
    version: Annotated[str, Field(pattern=r"^v[0-9]+\.[0-9]+\.[0-9]+$")] = "v0.20.0"
    migStrategy: Literal["none", "single", "mixed"] = "none"
    sharing: Sharing = Field(default_factory=Sharing)


class GFD(Strict):
    enabled: bool = True


class NFD(Strict):
    mode: Literal["deploy", "external", "disabled"] = Field(
        description="deploy: emit NFD; external: NFD is installed elsewhere; disabled: no NFD."
    )
    version: Annotated[str, Field(pattern=r"^v[0-9]+\.[0-9]+\.[0-9]+$")] = "v0.19.0"


class DCGMExporter(Strict):
    enabled: bool = True
    # <DCGM version>-<exporter version>; gpu-operator deployments/gpu-operator/values.yaml
    # (a22dbf6) `dcgmExporter.version`, newer than dcgm-exporter's own chart (4.5.3-4.8.2).
    version: Annotated[str, Field(pattern=r"^[0-9]+\.[0-9]+\.[0-9]+-[0-9]+\.[0-9]+\.[0-9]+$")] = (
        "4.6.0-4.8.3"
    )
    monitor: Literal["auto", "servicemonitor", "podmonitoring", "none"] = "auto"
    # min_length 2: the pattern alone would accept an empty string.
    interval: Annotated[str, Field(pattern=DURATION, min_length=2)] = Field(
        default="15s",
        description="Scrape interval and the exporter's collection interval, as a Prometheus "
        "duration ('15s', '1m30s').",
    )
    monitorLabels: dict[LabelKey, LabelValue] = Field(
        default_factory=dict,
        description="Extra labels on the ServiceMonitor/PodMonitoring, e.g. `release: "
        "kube-prometheus-stack` so an existing Prometheus picks it up.",
    )

    @field_validator("interval")
    @classmethod
    def _positive_interval(cls, interval: str) -> str:
        if duration_ms(interval) == 0:
            raise ValueError("the interval must be longer than zero")
        if duration_ms(interval) > MAX_DURATION_MS:
            raise ValueError("the interval is longer than Prometheus can represent (292 years)")
        return interval


class RuntimeClass(Strict):
    enabled: bool | Literal["auto"] = Field(
        default="auto", description="auto: the profile decides whether GPU pods need it."
    )
    name: Annotated[str, Field(pattern=DNS1123_SUBDOMAIN, max_length=253)] = "nvidia"
    handler: Annotated[str, Field(pattern=DNS1123_LABEL, max_length=63)] = "nvidia"


class Driver(Strict):
    mode: Literal["auto", "preinstalled", "driver-toolkit", "gke-managed", "gke-installer"] = Field(
        default="auto", description="auto: the profile's default driver mode."
    )


class Entitlement(Strict):
    enabled: bool = False
    pemFile: str | None = Field(
        default=None, description="Entitlement PEM, relative to the config file."
    )


# Where the rendered folder sits in the Git repository; `{name}` is the cluster's metadata.name.
PathTemplate = Annotated[str, Field(pattern=r"\{name\}", max_length=1024)]
# Argo CD's in-cluster destination (argo-cd docs, declarative setup: "in-cluster").
IN_CLUSTER = "https://kubernetes.default.svc"


class ArgoCDDestination(Strict):
    server: str | None = Field(
        default=None,
        description=f"API server URL of the target cluster (default {IN_CLUSTER}); "
        "not with `name`.",
    )
    name: str | None = Field(
        default=None,
        description="Cluster name registered in Argo CD; may use `{name}` (the cluster's "
        "metadata.name); not with `server`.",
    )
    namespace: Name | None = Field(
        default=None, description="Default namespace of the Application (default: `namespace`)."
    )


class ArgoCDPlugin(Strict):
    name: Name = Field(
        default="gpustack",
        description="ConfigManagementPlugin that runs `gpustack render --stdout` in Argo CD "
        "(see `gpustack gitops plugin`).",
    )


class ArgoCD(Strict):
    repoURL: Annotated[str, Field(pattern=REPO_URL)] | None = Field(
        default=None, description="Git repository Argo CD reads (required with tool argocd)."
    )
    targetRevision: str = Field(default="HEAD", description="Branch, tag or commit to follow.")
    path: PathTemplate = Field(
        default="out/{name}",
        description="Folder of the rendered output in the repository (with `plugin`: of the "
        "config); `{name}` is the cluster's metadata.name.",
    )
    project: str = Field(default="default", description="Argo CD AppProject.")
    namespace: Name = Field(
        default="argocd", description="Namespace Argo CD watches for Applications."
    )
    destination: ArgoCDDestination = Field(default_factory=ArgoCDDestination)
    applicationSet: bool = Field(
        default=False,
        description="One ApplicationSet for the fleet (a Git directory generator over the "
        "rendered folders) instead of an Application per cluster.",
    )
    plugin: ArgoCDPlugin | None = Field(
        default=None,
        description="Let Argo CD run gpustack itself (ConfigManagementPlugin) instead of "
        "reading committed output.",
    )
    automated: bool = Field(default=True, description="Sync automatically on every commit.")
    prune: bool = Field(default=True, description="Delete objects removed from the output.")
    selfHeal: bool = Field(default=True, description="Revert changes made in the cluster.")

    @model_validator(mode="after")
    def _one_destination(self) -> ArgoCD:
        if self.destination.server and self.destination.name:
            raise ConflictError(
                ("gitops", "argocd", "destination"),
                "set gitops.argocd.destination.server or destination.name, not both",
            )
        return self


class FluxSourceRef(Strict):
    kind: Literal["GitRepository", "OCIRepository", "Bucket"] = "GitRepository"
    name: Name = Field(description="The Flux source holding this repository (e.g. flux-system).")
    namespace: Name | None = Field(default=None, description="Default: gitops.flux.namespace.")


class FluxGitReference(Strict):
    branch: str | None = None
    tag: str | None = None
    commit: str | None = None


class FluxGitRepository(Strict):
    url: str = Field(description="Repository URL Flux clones.")
    ref: FluxGitReference = Field(default_factory=lambda: FluxGitReference(branch="main"))
    interval: Annotated[str, Field(pattern=DURATION)] = "5m"


class Flux(Strict):
    sourceRef: FluxSourceRef | None = Field(
        default=None, description="Source the Kustomizations read (required with tool flux)."
    )
    gitRepository: FluxGitRepository | None = Field(
        default=None,
        description="Also emit the GitRepository named by sourceRef (omit when Flux bootstrap "
        "already created it).",
    )
    namespace: Name = Field(default="flux-system", description="Namespace of the Kustomizations.")
    path: PathTemplate = Field(
        default="./out/{name}", description="Folder of the rendered output in the source."
    )
    interval: Annotated[str, Field(pattern=DURATION)] = "10m"
    prune: bool = True
    wait: bool = Field(default=True, description="Wait for every object to become ready.")
    timeout: Annotated[str, Field(pattern=DURATION)] = "5m"

    @model_validator(mode="after")
    def _repository_matches_source(self) -> Flux:
        if self.gitRepository and self.sourceRef and self.sourceRef.kind != "GitRepository":
            raise ConflictError(
                ("gitops", "flux", "gitRepository"),
                f"gitops.flux.gitRepository needs sourceRef.kind GitRepository, "
                f"not {self.sourceRef.kind}",
            )
        return self


class GitOps(Strict):
    tool: Literal["none", "argocd", "flux"] = "none"
    argocd: ArgoCD | None = Field(default=None, description="Settings for tool argocd.")
    flux: Flux | None = Field(default=None, description="Settings for tool flux.")


class GPUStack(Strict):
    """One cluster's GPU stack."""

    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        title="GPUStack",
    )

    apiVersion: Literal["gpustack.dev/v1alpha1"]
    kind: Literal["GPUStack"]
    extends: str | None = Field(
        default=None, description="A base config (path relative to this file) to inherit from."
    )
    metadata: Metadata
    platform: Platform
    namespace: Name
    nodes: Nodes = Field(default_factory=Nodes)
    devicePlugin: DevicePlugin
    gfd: GFD = Field(default_factory=GFD)
    nfd: NFD
    dcgmExporter: DCGMExporter = Field(default_factory=DCGMExporter)
    runtimeClass: RuntimeClass = Field(default_factory=RuntimeClass)
    driver: Driver = Field(default_factory=Driver)
    entitlement: Entitlement = Field(default_factory=Entitlement)
    gitops: GitOps = Field(default_factory=GitOps)

    @model_validator(mode="after")
    def _consistent(self) -> GPUStack:
        sharing = self.devicePlugin.sharing
        if sharing.strategy == "mps" and self.devicePlugin.migStrategy != "none":
            raise ConflictError(
                ("devicePlugin", "sharing", "strategy"),
                "MPS sharing cannot be combined with MIG (the plugin shares only full GPUs "
                "with MPS); set devicePlugin.migStrategy: none or sharing.strategy: none",
            )
        if sharing.strategy == "time-slicing" and self.devicePlugin.migStrategy == "mixed":
            raise ConflictError(
                ("devicePlugin", "sharing", "strategy"),
                "time-slicing with MIG strategy 'mixed' is not supported by this renderer "
                "(each MIG profile is its own resource); use migStrategy: single or none",
            )
        self._gitops_complete()
        if self.entitlement.enabled and not self.entitlement.pemFile:
            raise ConflictError(
                ("entitlement", "pemFile"),
                "entitlement.enabled needs entitlement.pemFile (the entitlement certificate)",
            )
        return self

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

    def __init__(self, path: tuple[str, ...], message: str) -> None:
        super().__init__(message)
        self.path = path
        self.message = message


# ---------------------------------------------------------------------------------------------
# Profiles: platform facts as data (profiles/*.yaml).


class NodeSelectorRequirement(Strict):
    key: LabelKey
    operator: Literal["In", "Exists"]
    values: list[str] = Field(default_factory=list)


class ProfileMetadata(Strict):
    name: Name
    description: str


class RuntimeFacts(Strict):
    engine: Literal["containerd", "cri-o"]
    runtimeClass: Literal["required", "optional", "cdi-only", "none"] = Field(
        description="required: the default runtime is runc, GPU pods need runtimeClassName; "
        "optional: only when nvidia is not the default runtime; cdi-only: only with CDI; "
        "none: the platform mounts the driver itself."
    )
    providedRuntimeClasses: list[str] = Field(
        default_factory=list,
        description="RuntimeClasses the platform creates itself: GPU pods may name them, and "
        "gpustack does not emit one of the same name (it would fight the platform's copy).",
    )
    containerdConfig: HostPath | None = None
    containerdSocket: HostPath | None = None


class HostMount(Strict):
    path: HostPath
    mountPath: HostPath


class DriverFacts(Strict):
    modes: list[Literal["preinstalled", "driver-toolkit", "gke-managed", "gke-installer"]]
    default: Literal["preinstalled", "driver-toolkit", "gke-managed", "gke-installer"]
    root: HostPath = Field(description="Driver root on the host, as the device plugin's nvidiaDriverRoot.")
    hostMount: HostMount | None = Field(
        default=None,
        description="Where the platform keeps the driver and where GPU containers must see it "
        "(GKE: no nvidia runtime, the directory is mounted).",
    )
    installerOS: Literal["cos", "ubuntu"] | None = None

    @model_validator(mode="after")
    def _default_allowed(self) -> DriverFacts:
        if self.default not in self.modes:
            raise ValueError(f"driver.default {self.default!r} is not one of driver.modes")
        return self


class CriticalPodsQuota(Strict):
    priorityClasses: list[str] = Field(min_length=1)
    pods: int = Field(ge=1, description="The quota's pod limit: one pod per GPU node per DaemonSet.")


class ProfileFacts(Strict):
    runtime: RuntimeFacts
    driver: DriverFacts
    devicePluginProvider: Literal["nvidia", "gke"]
    gpuNodeSelector: list[NodeSelectorRequirement] = Field(
        description="How GPU nodes are recognised (NFD's PCI label, or a platform label)."
    )
    monitoring: Literal["servicemonitor", "podmonitoring", "none"]
    namespaceLabels: dict[LabelKey, LabelValue] = Field(default_factory=dict)
    securityContextConstraints: bool = Field(
        default=False, description="OpenShift: privileged pods need SCC `use` RBAC."
    )
    machineConfigOperator: bool = Field(
        default=False, description="OpenShift: node files are shipped as MachineConfigs."
    )
    taintMechanism: Literal[
        "openshift-machineset", "gke-node-pool", "rke2-agent-config", "kubeadm-join"
    ]
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
    nodeOSLabel: NodeSelectorRequirement | None = None
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
