"""How Flux and Argo CD judge an object's health: ports of their rules, for the GitOps health tests.

Ported line by line from the upstream code, with its messages, so that a test reads what a user
would see in `flux get kustomizations` or Argo CD's UI:

- kstatus: fluxcd/cli-utils v1.2.1 (967855f), `pkg/kstatus/status/status.go` (Compute),
  `generic.go` (checkGenericProperties, checkGeneration), `core.go` (the built-in kinds), the
  fork kustomize-controller v1.9 builds on.
- kustomize-controller (v1.9.4, `internal/controller/kustomization_controller.go`,
  getClientAndPoller) reads Jobs with fluxcd/pkg `runtime/statusreaders/job.go` (e2cfd1a) instead
  of core.go's jobConditions: a running Job is InProgress, Current only once it completed.
- Argo CD: argo-cd v3.5.1, `gitops-engine/pkg/health/` (health.go, health_daemonset.go,
  health_deployment.go, health_job.go, health_service.go); kinds without a rule have no health.

Only the kinds gpustack renders with a rule are ported; every other kind falls through to the
generic rules, as upstream.
"""

from __future__ import annotations

from typing import Any

CURRENT, IN_PROGRESS, FAILED, TERMINATING = "Current", "InProgress", "Failed", "Terminating"
HEALTHY, PROGRESSING, DEGRADED, SUSPENDED = "Healthy", "Progressing", "Degraded", "Suspended"
# gitops-engine health.go healthOrder: most healthy first.
HEALTH_ORDER = [HEALTHY, SUSPENDED, PROGRESSING, "Missing", DEGRADED, "Unknown"]


def _field(obj: dict[str, Any], path: str, default: Any) -> Any:
    """kstatus GetIntField/GetStringField: the value at a dotted path, or `default`."""
    value: Any = obj
    for key in path.strip(".").split("."):
        if not isinstance(value, dict) or key not in value:
            return default
        value = value[key]
    return value


def _conditions(obj: dict[str, Any]) -> list[dict[str, Any]]:
    return list(obj.get("status", {}).get("conditions", []))


def _group(obj: dict[str, Any]) -> str:
    return obj["apiVersion"].rpartition("/")[0]


# --- kstatus ------------------------------------------------------------------------------------


def kstatus(obj: dict[str, Any]) -> tuple[str, str]:
    """(status, message) as kustomize-controller's status poller computes it (status.go Compute,
    with the Flux Job reader)."""
    key = obj["kind"] if not _group(obj) else f"{_group(obj)}/{obj['kind']}"
    if key == "batch/Job":
        # A custom reader: its function alone, without the generic checks (cli-utils
        # pkg/kstatus/polling/statusreaders/generic.go).
        return _flux_job(obj)
    generic = _generic_properties(obj)
    if generic is not None:
        return generic
    rule = _LEGACY_TYPES.get(key)
    if rule is not None:
        return rule(obj)
    for condition in _conditions(obj):  # checkReadyCondition
        if condition.get("type") == "Ready":
            if condition.get("status") == "True":
                return CURRENT, "Resource is Ready"
            if condition.get("status") in ("False", "Unknown"):
                return IN_PROGRESS, condition.get("message", "")
    return CURRENT, "Resource is current"


def _generic_properties(obj: dict[str, Any]) -> tuple[str, str] | None:
    """generic.go checkGenericProperties."""
    if obj["metadata"].get("deletionTimestamp"):
        return TERMINATING, "Resource scheduled for deletion"
    generation = obj["metadata"].get("generation")
    observed = obj.get("status", {}).get("observedGeneration")
    if generation is not None and observed is not None and observed != generation:
        return IN_PROGRESS, (
            f"{obj['kind']} generation is {generation}, but latest observed generation is "
            f"{observed}"
        )
    for condition in _conditions(obj):
        if condition.get("type") == "Reconciling" and condition.get("status") == "True":
            return IN_PROGRESS, condition.get("message", "")
        if condition.get("type") == "Stalled" and condition.get("status") == "True":
            return FAILED, condition.get("message", "")
    return None


def _always_ready(_: dict[str, Any]) -> tuple[str, str]:
    return CURRENT, "Resource is always ready"


def _daemonset(obj: dict[str, Any]) -> tuple[str, str]:
    """core.go daemonsetConditions: no case for OnDelete, so a DaemonSet whose pods the
    controller does not replace stays InProgress (LessUpdated) after a template change."""
    if obj["metadata"].get("generation") is None:
        return IN_PROGRESS, "DaemonSet metadata.generation not found"
    if obj.get("status", {}).get("observedGeneration") is None:
        return IN_PROGRESS, "DaemonSet status.observedGeneration not found"
    desired = _field(obj, ".status.desiredNumberScheduled", -1)
    current = _field(obj, ".status.currentNumberScheduled", 0)
    updated = _field(obj, ".status.updatedNumberScheduled", 0)
    available = _field(obj, ".status.numberAvailable", 0)
    ready = _field(obj, ".status.numberReady", 0)
    if desired == -1:
        return IN_PROGRESS, "Missing .status.desiredNumberScheduled"
    if desired > current:
        return IN_PROGRESS, f"Current: {current}/{desired}"
    if desired > updated:
        return IN_PROGRESS, f"Updated: {updated}/{desired}"
    if desired > available:
        return IN_PROGRESS, f"Available: {available}/{desired}"
    if desired > ready:
        return IN_PROGRESS, f"Ready: {ready}/{desired}"
    return CURRENT, f"All replicas scheduled as expected. Replicas: {desired}"


def _deployment(obj: dict[str, Any]) -> tuple[str, str]:
    """core.go deploymentConditions."""
    progressing = _field(obj, ".spec.progressDeadlineSeconds", None) is None
    available = False
    for condition in _conditions(obj):
        if condition.get("type") == "Progressing":
            if condition.get("reason") == "ProgressDeadlineExceeded":
                return FAILED, "Progress deadline exceeded"
            if condition.get("status") == "True" and condition.get("reason") == (
                "NewReplicaSetAvailable"
            ):
                progressing = True
        elif condition.get("type") == "Available" and condition.get("status") == "True":
            available = True
    spec = _field(obj, ".spec.replicas", 1)
    replicas = _field(obj, ".status.replicas", 0)
    updated = _field(obj, ".status.updatedReplicas", 0)
    ready = _field(obj, ".status.readyReplicas", 0)
    available_replicas = _field(obj, ".status.availableReplicas", 0)
    if spec > replicas:
        return IN_PROGRESS, f"Replicas: {replicas}/{spec}"
    if spec > updated:
        return IN_PROGRESS, f"Updated: {updated}/{spec}"
    if replicas > spec:
        return IN_PROGRESS, f"Pending termination: {replicas - spec}"
    if updated > available_replicas:
        return IN_PROGRESS, f"Available: {available_replicas}/{updated}"
    if spec > ready:
        return IN_PROGRESS, f"Ready: {ready}/{spec}"
    if not progressing:
        return IN_PROGRESS, "ReplicaSet not Available"
    if not available:
        return IN_PROGRESS, "Deployment not Available"
    return CURRENT, f"Deployment is available. Replicas: {replicas}"


def _service(obj: dict[str, Any]) -> tuple[str, str]:
    """core.go serviceConditions."""
    if _field(obj, ".spec.type", "ClusterIP") == "LoadBalancer" and not _field(
        obj, ".spec.clusterIP", ""
    ):
        return IN_PROGRESS, "ClusterIP not set. Service type: LoadBalancer"
    return CURRENT, "Service is ready"


def _crd(obj: dict[str, Any]) -> tuple[str, str]:
    """core.go crdConditions."""
    for condition in _conditions(obj):
        if condition.get("type") == "NamesAccepted" and condition.get("status") == "False":
            return FAILED, condition.get("message", "")
        if condition.get("type") == "Established":
            if condition.get("status") == "False" and condition.get("reason") != "Installing":
                return FAILED, condition.get("message", "")
            if condition.get("status") == "True":
                return CURRENT, "CRD is established"
    return IN_PROGRESS, "Install in progress"


def _flux_job(obj: dict[str, Any]) -> tuple[str, str]:
    """fluxcd/pkg runtime/statusreaders/job.go jobConditions: Current only once complete."""
    if _field(obj, ".spec.suspend", False) is True:
        return CURRENT, "Job is suspended"
    parallelism = _field(obj, ".spec.parallelism", 1)
    completions = _field(obj, ".spec.completions", parallelism)
    succeeded = _field(obj, ".status.succeeded", 0)
    failed = _field(obj, ".status.failed", 0)
    active = _field(obj, ".status.active", 0)
    for condition in _conditions(obj):
        if condition.get("type") == "Complete" and condition.get("status") == "True":
            return CURRENT, f"Job Completed. succeeded: {succeeded}/{completions}"
        if condition.get("type") == "Failed" and condition.get("status") == "True":
            return FAILED, f"Job Failed. failed: {failed}/{completions}"
    if not _field(obj, ".status.startTime", ""):
        return IN_PROGRESS, f"Job not started. active: 0/{parallelism}"
    return IN_PROGRESS, (
        f"Job in progress. success:{succeeded}, active: {active}, failed: {failed}"
    )


_LEGACY_TYPES = {
    "Service": _service,
    "Secret": _always_ready,
    "ConfigMap": _always_ready,
    "apps/DaemonSet": _daemonset,
    "apps/Deployment": _deployment,
    "apiextensions.k8s.io/CustomResourceDefinition": _crd,
}


# --- Argo CD ------------------------------------------------------------------------------------


def argocd_health(obj: dict[str, Any]) -> tuple[str, str] | None:
    """(status, message) as gitops-engine health.go GetResourceHealth assesses it, or None for a
    kind without health (which a sync counts as succeeded once applied)."""
    if obj["metadata"].get("deletionTimestamp"):
        return PROGRESSING, "Pending deletion"
    key = (_group(obj), obj["kind"])
    rule = {
        ("apps", "DaemonSet"): _argocd_daemonset,
        ("apps", "Deployment"): _argocd_deployment,
        ("batch", "Job"): _argocd_job,
        ("", "Service"): _argocd_service,
    }.get(key)
    return rule(obj) if rule else None


def _argocd_daemonset(obj: dict[str, Any]) -> tuple[str, str]:
    """health_daemonset.go getAppsv1DaemonSetHealth: an OnDelete DaemonSet is Healthy as soon as
    its controller observed it, however many pods run the old template."""
    status = obj.get("status", {})
    if obj["metadata"].get("generation", 0) > status.get("observedGeneration", 0):
        return PROGRESSING, (
            "Waiting for rollout to finish: observed daemon set generation less than desired "
            "generation"
        )
    desired = status.get("desiredNumberScheduled", 0)
    updated = status.get("updatedNumberScheduled", 0)
    if _field(obj, ".spec.updateStrategy.type", "RollingUpdate") == "OnDelete":
        return HEALTHY, f"daemon set {updated} out of {desired} new pods have been updated"
    name = obj["metadata"]["name"]
    if updated < desired:
        return PROGRESSING, (
            f'Waiting for daemon set "{name}" rollout to finish: {updated} out of {desired} '
            "new pods have been updated..."
        )
    available = status.get("numberAvailable", 0)
    if available < desired:
        return PROGRESSING, (
            f'Waiting for daemon set "{name}" rollout to finish: {available} of {desired} '
            "updated pods are available..."
        )
    return HEALTHY, ""


def _argocd_deployment(obj: dict[str, Any]) -> tuple[str, str]:
    """health_deployment.go getAppsv1DeploymentHealth."""
    if _field(obj, ".spec.paused", False):
        return SUSPENDED, "Deployment is paused"
    status = obj.get("status", {})
    if obj["metadata"].get("generation", 0) > status.get("observedGeneration", 0):
        return PROGRESSING, (
            "Waiting for rollout to finish: observed deployment generation less than desired "
            "generation"
        )
    progressing = next((c for c in _conditions(obj) if c.get("type") == "Progressing"), None)
    replicas = _field(obj, ".spec.replicas", None)
    updated = status.get("updatedReplicas", 0)
    if progressing is not None and progressing.get("reason") == "ProgressDeadlineExceeded":
        return DEGRADED, f'Deployment "{obj["metadata"]["name"]}" exceeded its progress deadline'
    if replicas is not None and updated < replicas:
        return PROGRESSING, (
            f"Waiting for rollout to finish: {updated} out of {replicas} new replicas have "
            "been updated..."
        )
    if status.get("replicas", 0) > updated:
        return PROGRESSING, (
            f"Waiting for rollout to finish: {status.get('replicas', 0) - updated} old replicas "
            "are pending termination..."
        )
    if status.get("availableReplicas", 0) < updated:
        return PROGRESSING, (
            f"Waiting for rollout to finish: {status.get('availableReplicas', 0)} of {updated} "
            "updated replicas are available..."
        )
    return HEALTHY, ""


def _argocd_job(obj: dict[str, Any]) -> tuple[str, str]:
    """health_job.go getBatchv1JobHealth."""
    failed = complete = suspended = False
    message = fail_message = ""
    for condition in _conditions(obj):
        if condition.get("type") == "Failed":
            failed = complete = True
            fail_message = condition.get("message", "")
        elif condition.get("type") == "Complete":
            complete = True
            message = condition.get("message", "")
        elif condition.get("type") == "Suspended":
            complete = True
            message = condition.get("message", "")
            suspended = condition.get("status") == "True"
    if not complete:
        return PROGRESSING, message
    if failed:
        return DEGRADED, fail_message
    if suspended:
        return SUSPENDED, fail_message
    return HEALTHY, message


def _argocd_service(obj: dict[str, Any]) -> tuple[str, str]:
    """health_service.go getCorev1ServiceHealth: only a LoadBalancer waits for its ingress."""
    if _field(obj, ".spec.type", "ClusterIP") == "LoadBalancer" and not _field(
        obj, ".status.loadBalancer.ingress", []
    ):
        return PROGRESSING, ""
    return HEALTHY, ""


def worse(current: str, new: str) -> bool:
    """gitops-engine health.go IsWorse."""
    return HEALTH_ORDER.index(new) > HEALTH_ORDER.index(current)
