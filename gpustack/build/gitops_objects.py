"""The objects that tell Argo CD or Flux to apply a rendered folder.

They never go into the folder they point at (an Application inside its own source would manage
itself on the wrong cluster): a cluster's Application or Flux Kustomizations are written to
`out/<name>/gitops/`, which `out/<name>/kustomization.yaml` does not list, and a fleet's
ApplicationSet to `out/_gitops/` (an underscore cannot start a cluster name, so no cluster's folder
can clash with it). Pure: Stack in, plain dicts out.
"""

from __future__ import annotations

from typing import Any

from gpustack.build.decorate import is_discovery, stage, stage_dependency
from gpustack.config.field_types import duration_ms
from gpustack.config.gitops_settings import IN_CLUSTER, ArgoCD
from gpustack.layout import APPLICATION_SET_DIR, CANARY_STAGE, SMOKE_TEST_STAGE
from gpustack.objects import kind_of, name_of, namespace_of
from gpustack.resolve.stack import Stack

APPLICATION_SET_NAME = "gpustack"
ARGOCD_API = "argoproj.io/v1alpha1"
# Deleting an Application that carries this finalizer deletes the objects it deployed (argo-cd
# docs/user-guide/app_deletion.md, "About The Deletion Finalizer").
RESOURCES_FINALIZER = "resources-finalizer.argocd.argoproj.io"


def application_name(cluster: str) -> str:
    return f"gpustack-{cluster}"


def cluster_objects(stack: Stack, objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The cluster's Application, or its Flux Kustomizations (one per non-empty stage of the
    rendered `objects`)."""
    gitops = stack.config.gitops
    if gitops.tool == "argocd" and gitops.argocd and not gitops.argocd.applicationSet:
        return [application(stack)]
    if gitops.tool == "flux":
        return flux_objects(stack, objects)
    return []


def application(stack: Stack) -> dict[str, Any]:
    argocd = stack.config.gitops.argocd
    assert argocd is not None  # the model refuses tool argocd without these settings
    destination = _destination(argocd, stack.name)
    destination.setdefault("namespace", stack.namespace)
    path = argocd.path.replace("{name}", stack.name)
    metadata: dict[str, Any] = {"name": application_name(stack.name), "namespace": argocd.namespace}
    if argocd.finalizer:  # off unless asked for: deleting the Application keeps the stack
        metadata["finalizers"] = [RESOURCES_FINALIZER]
    return {
        "apiVersion": ARGOCD_API,
        "kind": "Application",
        "metadata": metadata,
        "spec": _application_spec(argocd, path, destination),
    }


def application_set(stack: Stack) -> dict[str, Any] | None:
    """The fleet's ApplicationSet: one Application per rendered folder, found by a Git directory
    generator, so adding a cluster is committing its folder. None unless the config asks for it.

    Every cluster of a fleet yields the same object; the caller refuses fleets where they differ.
    """
    argocd = stack.config.gitops.argocd
    if stack.config.gitops.tool != "argocd" or argocd is None or not argocd.applicationSet:
        return None
    # ApplicationSet's Git directory generator: {{path}} is the folder, {{path.basename}} its name.
    cluster = "{{path.basename}}"
    folders = argocd.path.replace("{name}", "*")
    fleet_dir = argocd.path.replace("{name}", APPLICATION_SET_DIR)
    destination = _destination(argocd, cluster)
    template_spec = _application_spec(argocd, "{{path}}", destination)
    template_metadata: dict[str, Any] = {"name": application_name(cluster)}
    spec: dict[str, Any] = {}
    # The ApplicationSet controller puts the resources finalizer on every Application it makes
    # unless syncPolicy.preserveResourcesOnDeletion is true (argo-cd
    # docs/operator-manual/applicationset/Application-Deletion.md): on (the default), the
    # template says so; off, the ApplicationSet asks the controller to preserve them.
    if argocd.finalizer is False:
        spec["syncPolicy"] = {"preserveResourcesOnDeletion": True}
    else:
        template_metadata["finalizers"] = [RESOURCES_FINALIZER]
    return {
        "apiVersion": ARGOCD_API,
        "kind": "ApplicationSet",
        "metadata": {"name": APPLICATION_SET_NAME, "namespace": argocd.namespace},
        "spec": {
            "generators": [
                {
                    "git": {
                        "repoURL": argocd.repoURL,
                        "revision": argocd.targetRevision,
                        "directories": [{"path": folders}, {"path": fleet_dir, "exclude": True}],
                    }
                }
            ],
            "template": {"metadata": template_metadata, "spec": template_spec},
            **spec,
        },
    }


def with_namespace(application_set: dict[str, Any], namespace: str) -> dict[str, Any]:
    """The ApplicationSet with `namespace` as its Applications' default destination namespace
    (when `gitops.argocd.destination.namespace` does not name one), as a per-cluster
    Application has its stack's: the fleet's clusters all share it (applicationset.for_fleet)."""
    destination = application_set["spec"]["template"]["spec"]["destination"]
    if "namespace" in destination:
        return application_set
    template = application_set["spec"]["template"]
    spec = {**template["spec"], "destination": {**destination, "namespace": namespace}}
    return {
        **application_set,
        "spec": {**application_set["spec"], "template": {**template, "spec": spec}},
    }


def _destination(argocd: ArgoCD, cluster: str) -> dict[str, str]:
    destination = argocd.destination
    result = (
        {"name": destination.name.replace("{name}", cluster)}
        if destination.name
        else {"server": destination.server or IN_CLUSTER}
    )
    if destination.namespace:
        result["namespace"] = destination.namespace
    return result


def _application_spec(argocd: ArgoCD, path: str, destination: dict[str, str]) -> dict[str, Any]:
    source: dict[str, Any] = {
        "repoURL": argocd.repoURL,
        "targetRevision": argocd.targetRevision,
        "path": path,
    }
    if argocd.plugin:
        source["plugin"] = {"name": argocd.plugin.name}
    spec: dict[str, Any] = {
        "project": argocd.project,
        "source": source,
        "destination": destination,
    }
    sync_policy: dict[str, Any] = {}
    if argocd.automated:
        sync_policy["automated"] = {"prune": argocd.prune, "selfHeal": argocd.selfHeal}
    # Automated sync never tries a commit again once its sync failed (argo-cd v3.5.1,
    # docs/user-guide/auto_sync.md; without this policy controller/appcontroller.go retries an
    # automated sync five times within about three minutes, a manual one never). The PostSync smoke test of a
    # first sync made before any GPU node joined fails at its deadline; a retry, which runs the
    # hooks again, passes once one has.
    backoff = argocd.retry.backoff
    sync_policy["retry"] = {
        "limit": argocd.retry.limit,
        "backoff": {
            "duration": backoff.duration,
            "factor": backoff.factor,
            "maxDuration": backoff.maxDuration,
        },
    }
    spec["syncPolicy"] = sync_policy
    return spec


def flux_objects(stack: Stack, rendered: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A Kustomization per stage, each depending on the stage layout.STAGE_DEPENDENCIES names
    (or the nearest one rendered), and the GitRepository when the config describes it.

    The smoke-test stage depends on the workloads and is Ready only when its Job passed: `wait`
    health-checks every object, a Job by its completion (fluxcd/pkg runtime/statusreaders/job.go,
    which kustomize-controller uses for Jobs), and without `wait` the Job is named in
    `healthChecks`. Its timeout covers the Job's deadline, so a failure reports the Job's reason
    rather than a timeout (Flux docs, use-cases/running-jobs)."""
    stages = list(dict.fromkeys(stage(obj) for obj in rendered))
    flux = stack.config.gitops.flux
    assert flux is not None and flux.sourceRef is not None  # the model refuses incomplete settings
    source_ref: dict[str, str] = {"kind": flux.sourceRef.kind, "name": flux.sourceRef.name}
    if flux.sourceRef.namespace:
        source_ref["namespace"] = flux.sourceRef.namespace
    path = flux.path.replace("{name}", stack.name)
    objects: list[dict[str, Any]] = []
    for folder in stages:
        name = f"{application_name(stack.name)}-{folder}"
        spec: dict[str, Any] = {"interval": flux.interval}
        dependency = stage_dependency(folder, stages)
        if dependency:
            # dependsOn waits until that stage is Ready (with wait: all its objects).
            spec["dependsOn"] = [{"name": f"{application_name(stack.name)}-{dependency}"}]
        spec.update(
            {
                "sourceRef": source_ref,
                "path": f"{path}/{folder}",
                "prune": flux.prune,
                # The canary stage always waits: the rest of the stack depends on its driver
                # pods being Ready, not on its objects being applied. So does the foundation
                # when it holds NFD (a canary pool): the canary's driver selects its nodes by
                # the labels NFD's pods set.
                "wait": flux.wait
                or folder == CANARY_STAGE
                or any(is_discovery(obj) for obj in rendered if stage(obj) == folder),
                "timeout": _stage_timeout(stack, folder, rendered),
            }
        )
        if folder == SMOKE_TEST_STAGE and not flux.wait:
            spec["healthChecks"] = [
                {
                    "apiVersion": obj["apiVersion"],
                    "kind": kind_of(obj),
                    "name": name_of(obj),
                    "namespace": namespace_of(obj),
                }
                for obj in rendered
                if stage(obj) == SMOKE_TEST_STAGE
            ]
        objects.append(
            {
                "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
                "kind": "Kustomization",
                "metadata": {"name": name, "namespace": flux.namespace},
                "spec": spec,
            }
        )
    if flux.gitRepository:
        objects.append(_git_repository(stack))
    return objects


def _stage_timeout(stack: Stack, folder: str, rendered: list[dict[str, Any]]) -> str:
    """How long a stage's Kustomization waits for its objects to be Ready."""
    flux = stack.config.gitops.flux
    assert flux is not None
    timeout = flux.timeout
    startup = max((_startup_seconds(obj) for obj in rendered if stage(obj) == folder), default=0)
    if startup:
        # A pod is Ready only once its startup probe passed, which may take the probe's whole
        # budget (the driver container's build: 60 s + 120 x 10 s, as the GPU Operator
        # allows); the stage's own timeout is left for the rest once it has.
        timeout = f"{startup + duration_ms(timeout) // 1000}s"
    if folder == SMOKE_TEST_STAGE:
        deadline = stack.config.smokeTest.activeDeadlineSeconds + 60
        if deadline * 1000 > duration_ms(timeout):
            timeout = f"{deadline}s"
    return timeout


def _git_repository(stack: Stack) -> dict[str, Any]:
    """The GitRepository the Kustomizations apply from, where the config describes it."""
    flux = stack.config.gitops.flux
    assert flux is not None and flux.sourceRef is not None and flux.gitRepository is not None
    repository = flux.gitRepository
    return {
        "apiVersion": "source.toolkit.fluxcd.io/v1",
        "kind": "GitRepository",
        "metadata": {
            "name": flux.sourceRef.name,
            "namespace": flux.sourceRef.namespace or flux.namespace,
        },
        "spec": {
            "interval": repository.interval,
            "url": repository.url,
            "ref": repository.ref.model_dump(exclude_none=True),
        },
    }


def _startup_seconds(obj: dict[str, Any]) -> int:
    """The longest a container of a workload's pod may take to start: its startup probe's
    initial delay plus period x failure threshold (Kubernetes' probe defaults: 0, 10 s, 3)."""
    template = obj.get("spec", {}).get("template", {}).get("spec", {})
    probes = [
        container["startupProbe"]
        for container in template.get("containers", [])
        if "startupProbe" in container
    ]
    return max(
        (
            probe.get("initialDelaySeconds", 0)
            + probe.get("periodSeconds", 10) * probe.get("failureThreshold", 3)
            for probe in probes
        ),
        default=0,
    )


def plugin() -> dict[str, Any]:
    """Argo CD's ConfigManagementPlugin that runs gpustack in the repo-server's sidecar.

    Argo CD runs `generate` in the Application's source folder and applies its standard output;
    discovery picks folders holding a `gpustack.yaml` (argo-cd config-management-plugins docs).
    """
    return {
        "apiVersion": ARGOCD_API,
        "kind": "ConfigManagementPlugin",
        "metadata": {"name": "gpustack"},
        "spec": {
            "generate": {"command": ["gpustack", "render", "--stdout"]},
            "discover": {"fileName": "gpustack.yaml"},
        },
    }
