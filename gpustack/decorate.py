"""The one place for what all objects share: common labels, config hashes, apply order, file names.

Apply order follows lightkube's sort_objects idea: an explicit rank per kind, so that CRDs and
Namespaces exist before the objects that need them, and monitors come after their targets.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

MANAGED_BY = {"app.kubernetes.io/managed-by": "gpustack"}
CONFIG_HASH = "gpustack.dev/config-hash"

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


def identity(obj: dict[str, Any]) -> tuple[str, str, str, str]:
    """(group, kind, namespace, name): what makes an object itself in a cluster."""
    api_version = obj.get("apiVersion", "")
    group = api_version.rpartition("/")[0]
    metadata = obj.get("metadata") or {}
    return (group, obj.get("kind", ""), metadata.get("namespace", ""), metadata.get("name", ""))


def sort_key(obj: dict[str, Any]) -> tuple[int, str, str, str]:
    group, kind, namespace, name = identity(obj)
    return (RANK.get(kind, _UNRANKED), kind, namespace, name)


def file_name(obj: dict[str, Any]) -> str:
    """`<kind>-<name>.yaml`, lowercase; names are DNS-1123, so never a path."""
    _, kind, _, name = identity(obj)
    return f"{kind.lower()}-{name}.yaml"


def decorate(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Label every object, hash the ConfigMaps each workload mounts, and sort into apply order."""
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
    return sorted(objects, key=sort_key)


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
