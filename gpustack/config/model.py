"""The typed cluster config (`kind: GPUStack`) as a whole: its metadata, platform, images and
patches, the sections of the other modules of the model (`node_pools`, `component_settings`,
`driver_settings`, `monitoring_settings`, `gitops_settings`), the checks across sections, a node
pool's effective settings (`GPUStack.pool_settings`), and the lookups of one field by its dotted
path that `gpustack init` and `gpustack import` use.

Field names are a contract (PRODUCT.md): scripts and editors rely on them. Fields a profile decides
are optional here; the profile's `defaults` (`profile_model`) are merged beneath the user's config
before validation, so a validated GPUStack always carries concrete values. The model knows nothing
of files or YAML.
"""

# No `from __future__ import annotations` in the config model's modules: pydantic would then
# have to evaluate every field annotation from its text as it creates each class. Python
# evaluates them as it defines the class instead; a validator returning its own model says `Self`.
from typing import Annotated, Any, Literal, Self, get_args, get_origin

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    field_validator,
    model_validator,
)

from gpustack.config.component_settings import (
    DRA,
    GFD,
    MIG_DISABLED,
    NFD,
    DevicePlugin,
    GPUAllocation,
    MigManager,
    NodeStatusExporter,
    RuntimeClass,
    SmokeTest,
    Toolkit,
    Validator,
)
from gpustack.config.driver_settings import Driver
from gpustack.config.field_types import (
    DNS1123_SUBDOMAIN,
    REGISTRY,
    ConflictError,
    Doc,
    Name,
    Strict,
)
from gpustack.config.gitops_settings import GitOps
from gpustack.config.monitoring_settings import Alerts, Dashboard, DCGMExporter
from gpustack.config.node_pools import NodePool, Nodes, PoolSettings


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
        default_factory=list,
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
    nodes: Nodes = Field(default_factory=Nodes)
    gpuAllocation: Annotated[GPUAllocation, Doc(see="Dynamic Resource Allocation (DRA)")] = Field(
        default="device-plugin",
        description=(
            "how pods get GPUs: `device-plugin`: the `nvidia.com/gpu` extended resource; "
            "`dra`: ResourceClaims served by NVIDIA's DRA driver (Kubernetes 1.34 or later), "
            "with no device plugin on the GPU nodes"
        ),
    )
    devicePlugin: DevicePlugin
    gfd: GFD = Field(default_factory=GFD)
    migManager: MigManager = Field(default_factory=MigManager)
    nfd: NFD
    dcgmExporter: DCGMExporter = Field(default_factory=DCGMExporter)
    alerts: Alerts = Field(default_factory=Alerts)
    dashboard: Dashboard = Field(default_factory=Dashboard)
    runtimeClass: RuntimeClass = Field(default_factory=RuntimeClass)
    driver: Driver = Field(default_factory=Driver)
    toolkit: Toolkit = Field(default_factory=Toolkit)
    validator: Validator = Field(default_factory=Validator)
    nodeStatusExporter: NodeStatusExporter = Field(default_factory=NodeStatusExporter)
    entitlement: Entitlement = Field(default_factory=Entitlement)
    images: Images = Field(default_factory=Images)
    dra: DRA = Field(
        default_factory=DRA, description="NVIDIA's DRA driver, with `gpuAllocation: dra`"
    )
    smokeTest: SmokeTest = Field(default_factory=SmokeTest)
    gitops: GitOps = Field(default_factory=GitOps)
    patches: Annotated[list[PatchEntry], Doc(see="Patches")] = Field(
        default_factory=list,
        description=(
            "kustomize-style patches applied to the rendered objects before they are checked; "
            "a base's come first"
        ),
    )

    def pool_settings(self, pool: NodePool | None) -> PoolSettings:
        """What the nodes of `pool` run with (None: the GPU nodes in no pool): each setting a
        pool may give over the cluster's, the pool's where it gives one, else the cluster's.
        A pool whose plugin uses no MIG while the cluster's does keeps its GPUs whole: its MIG
        layout is `all-disabled` (mig-parted's built-in config) unless it names its own."""
        nodes = self.nodes
        plugin = pool.devicePlugin if pool else None
        mig_strategy = (plugin.migStrategy if plugin else None) or self.devicePlugin.migStrategy
        mig_config = pool.migManager.defaultConfig if pool and pool.migManager else None
        if not mig_config:
            cluster_uses_mig = self.devicePlugin.migStrategy != "none"
            mig_config = (
                MIG_DISABLED
                if mig_strategy == "none" and cluster_uses_mig
                else self.migManager.defaultConfig
            )
        driver_version = pool.driver.version if pool and pool.driver else None
        return PoolSettings(
            pool=pool,
            selector={**nodes.selector, **(pool.selector if pool else {})},
            taints=[*nodes.taints, *(pool.taints if pool else [])],
            gke=(pool.gke if pool else None) or nodes.gke,
            gpu_allocation=(pool.gpuAllocation if pool else None) or self.gpuAllocation,
            mig_strategy=mig_strategy,
            sharing=(plugin.sharing if plugin else None) or self.devicePlugin.sharing,
            mig_config=mig_config,
            driver_version=driver_version or self.driver.version,
        )

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
        settings = self.pool_settings(pool)
        sharing, strategy = settings.sharing, settings.mig_strategy
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
