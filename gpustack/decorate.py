"""The one place for what all objects share: common labels, config hashes, apply order, file names.

Apply order follows lightkube's sort_objects idea: an explicit rank per kind, so that CRDs and
Namespaces exist before the objects that need them, and monitors come after their targets.
Argo CD sync waves and Flux layers are cut from the same rank table, so they follow apply order.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

MANAGED_BY = {"app.kubernetes.io/managed-by": "gpustack"}
CONFIG_HASH = "gpustack.dev/config-hash"
SYNC_WAVE = "argocd.argoproj.io/sync-wave"
SYNC_OPTIONS = "argocd.argoproj.io/sync-options"

RANK = {
    kind: rank
    for rank, kind in enumerate(
        [
            "CustomResourceDefinition",
            "Namespace",
            "SecurityContextConstraints",
            "ResourceQuota",
            "PriorityClass",
            "RuntimeClass",
            "ServiceAccount",
            "Secret",
            "ConfigMap",
            "ClusterRole",
            "ClusterRoleBinding",
            "Role",
            "RoleBinding",
            "MachineConfig",
            "NodeFeatureRule",
            "Service",
            "DaemonSet",
            "Deployment",
            "Job",
            "ServiceMonitor",
            "PodMonitoring",
            "PrometheusRule",
        ]
    )
}
_UNRANKED = len(RANK)
_WORKLOADS = {"DaemonSet", "Deployment", "StatefulSet", "Job"}

# Flux layer of each sync wave: one Kustomization per layer, each depending on the one before.
LAYERS = {-2: "foundation", -1: "foundation", 0: "workloads", 1: "monitors"}


def identity(obj: dict[str, Any]) -> tuple[str, str, str, str]:
    """(group, kind, namespace, name): what makes an object itself in a cluster."""
    api_version = obj.get("apiVersion", "")
    group = api_version.rpartition("/")[0]
    metadata = obj.get("metadata") or {}
    return (group, obj.get("kind", ""), metadata.get("namespace", ""), metadata.get("name", ""))


def sort_key(obj: dict[str, Any]) -> tuple[int, str, str, str]:
    _group, kind, namespace, name = identity(obj)
    return (RANK.get(kind, _UNRANKED), kind, namespace, name)


def sync_wave(obj: dict[str, Any]) -> int:
    """Argo CD sync wave: a step function of the rank, so waves never contradict apply order."""
    rank = RANK.get(obj.get("kind", ""), _UNRANKED)
    if rank < RANK["Namespace"]:
        return -2  # CRDs, established before any custom resource that needs them
    if rank <= RANK["RuntimeClass"]:
        return -1  # Namespaces, SCCs, quotas, priority and runtime classes the workloads use
    if rank < RANK["ServiceMonitor"]:
        return 0  # RBAC, configuration, services and the workloads themselves
    return 1  # monitors (and kinds not in the table) once their targets exist


def layer(obj: dict[str, Any]) -> str:
    """The Flux layer (sub-folder of the rendered output) an object belongs to."""
    return LAYERS[sync_wave(obj)]


def file_name(obj: dict[str, Any]) -> str:
    """`<kind>-<name>.yaml`, lowercase; names are DNS-1123, so never a path."""
    _, kind, _, name = identity(obj)
    return f"{kind.lower()}-{name}.yaml"


def decorate(objects: list[dict[str, Any]], sync_waves: bool = False) -> list[dict[str, Any]]:
    """Label every object, hash the ConfigMaps each workload mounts, and sort into apply order;
    with `sync_waves`, annotate the Argo CD sync wave and sync options of each object."""
    config_maps = {
        (obj["metadata"].get("namespace", ""), obj["metadata"]["name"]): obj
        for obj in objects
        if obj.get("kind") == "ConfigMap"
    }
    for obj in objects:
        metadata = obj.setdefault("metadata", {})
        metadata["labels"] = {**metadata.get("labels", {}), **MANAGED_BY}
        if obj.get("kind") in _WORKLOADS:
            _hash_config(obj, config_maps)
        if sync_waves:
            _annotate_sync(obj)
    return sorted(objects, key=sort_key)


def _annotate_sync(obj: dict[str, Any]) -> None:
    wave = sync_wave(obj)
    annotations = obj["metadata"].setdefault("annotations", {})
    annotations[SYNC_WAVE] = str(wave)
    if obj.get("kind") == "CustomResourceDefinition":
        # Client-side apply stores the whole object in an annotation limited to 256 KiB, which
        # large CRDs exceed (argo-cd sync-options docs, ServerSideApply).
        annotations[SYNC_OPTIONS] = "ServerSideApply=true"
    elif wave == 1:
        # A monitor's CRD comes from the monitoring stack; if it is not installed yet, the dry run
        # must not block the GPU stack (argo-cd sync-options docs, SkipDryRunOnMissingResource).
        annotations[SYNC_OPTIONS] = "SkipDryRunOnMissingResource=true"


def _hash_config(workload: dict[str, Any], config_maps: dict[tuple[str, str], Any]) -> None:
    """Annotate the pod template with a hash of the ConfigMaps it mounts, so a config change
    rolls the pods (the helm chart's checksum/config, done for every workload)."""
    namespace = workload["metadata"].get("namespace", "")
    template = workload["spec"]["template"]
    names = sorted(
        volume["configMap"]["name"]
        for volume in template["spec"].get("volumes", [])
        if "configMap" in volume
    )
    mounted = [config_maps[(namespace, name)].get("data", {}) for name in names
               if (namespace, name) in config_maps]
    if not mounted:
        return
    digest = hashlib.sha256(
        json.dumps(mounted, sort_keys=True, separators=(",", ":")).encode()
    ).hexdigest()
    annotations = template.setdefault("metadata", {}).setdefault("annotations", {})
    annotations[CONFIG_HASH] = digest[:16]
