"""The config's `gitops` section: the Argo CD or Flux objects that deploy the rendered folder."""

# No `from __future__ import annotations` in the config model's modules: pydantic would then
# have to evaluate every field annotation from its text as it creates each class. Python
# evaluates them as it defines the class instead; a validator returning its own model says `Self`.
from typing import Annotated, Literal, Self

from pydantic import Field, model_validator

from gpustack.config.field_types import DURATION, REPO_URL, ConflictError, Doc, Name, Strict

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
    backoff: ArgoCDBackoff = Field(default_factory=ArgoCDBackoff)


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
    destination: ArgoCDDestination = Field(default_factory=ArgoCDDestination)
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
        default_factory=ArgoCDRetry,
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
    ref: FluxGitReference = Field(default_factory=lambda: FluxGitReference(branch="main"))
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


class GitOps(Strict):
    tool: Literal["none", "argocd", "flux"] = Field(
        default="none", description="emit GitOps objects into `gitops/`"
    )
    argocd: ArgoCD | None = Field(default=None, description="settings for tool argocd")
    flux: Flux | None = Field(default=None, description="settings for tool flux")
