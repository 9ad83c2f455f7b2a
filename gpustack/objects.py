"""Manifest objects: what makes one itself, how a user reads its name, its file name and its
place in apply order. Render, validate, lint, diff and check all ask here.

Objects come from anywhere (gpustack's rendering, committed output read back, a user's manifests
given to `validate`), so nothing here raises on a malformed one: a field that is missing or not a
string counts as empty.

Apply order follows lightkube's sort_objects idea: an explicit rank per kind, so that CRDs and
Namespaces exist before the objects that need them, and monitors come after their targets. Jobs
come last: they check the stack once it runs (the GPU smoke test). Argo CD sync waves and Flux
stages are cut from the same table (gpustack.build.decorate).
"""

from __future__ import annotations

from typing import Any

# (group, kind, namespace, name): what makes an object itself in a cluster.
Identity = tuple[str, str, str, str]

# Kinds not in the rank table go after the monitors and before the Jobs.
UNRANKED = "(unranked)"

RANK = {
    kind: rank
    for rank, kind in enumerate(
        [
            "CustomResourceDefinition",
            "Namespace",
            "SecurityContextConstraints",
            "ResourceQuota",
            "PriorityClass",
            "ValidatingAdmissionPolicy",
            "ValidatingAdmissionPolicyBinding",
            "DeviceClass",
            "RuntimeClass",
            "ServiceAccount",
            "Secret",
            "ConfigMap",
            "ClusterRole",
            "ClusterRoleBinding",
            "Role",
            "RoleBinding",
            "MachineConfigPool",
            "MachineConfig",
            "NodeFeatureRule",
            "Service",
            "DaemonSet",
            "Deployment",
            "ServiceMonitor",
            "PodMonitoring",
            "PrometheusRule",
            "ClusterRules",
            UNRANKED,
            "ResourceClaimTemplate",
            "Job",
        ]
    )
}


def text(data: Any, key: str) -> str:
    """`data[key]` when `data` is a mapping and that value a string, else ""."""
    value = data.get(key) if isinstance(data, dict) else None
    return value if isinstance(value, str) else ""


def metadata(obj: Any) -> dict[str, Any]:
    """The object's metadata, or an empty mapping when it has none (or not a mapping)."""
    found = obj.get("metadata") if isinstance(obj, dict) else None
    return found if isinstance(found, dict) else {}


def labels_of(obj: Any) -> dict[str, Any]:
    """The labels of an object, or of a pod template (anything with `metadata`); an empty
    mapping when it has none (or not a mapping)."""
    found = metadata(obj).get("labels")
    return found if isinstance(found, dict) else {}


def annotations_of(obj: Any) -> dict[str, Any]:
    """The annotations of an object or pod template; an empty mapping when it has none."""
    found = metadata(obj).get("annotations")
    return found if isinstance(found, dict) else {}


def kind_of(obj: Any) -> str:
    return text(obj, "kind")


def namespace_of(obj: Any) -> str:
    # An object without a namespace lands in the namespace kubectl applies it to: all such
    # objects share one ("default" in practice).
    return text(metadata(obj), "namespace")


def name_of(obj: Any) -> str:
    return text(metadata(obj), "name")


def identity(obj: Any) -> Identity:
    """(group, kind, namespace, name) of `obj`."""
    if not isinstance(obj, dict):
        return "", "", "", ""
    # The four fields read here at once, not through text(): every command asks this of
    # every object, many times.
    api_version, kind, found = obj.get("apiVersion"), obj.get("kind"), obj.get("metadata")
    if isinstance(found, dict):
        namespace, name = found.get("namespace"), found.get("name")
    else:
        namespace = name = None
    return (
        api_version.rpartition("/")[0] if isinstance(api_version, str) else "",
        kind if isinstance(kind, str) else "",
        namespace if isinstance(namespace, str) else "",
        name if isinstance(name, str) else "",
    )


def namespaced(namespace: str, name: str) -> str:
    """`namespace/name`, or just `name` for a cluster-scoped (or unplaced) object."""
    return f"{namespace}/{name}" if namespace else name


def display(key: Identity) -> str:
    """`DaemonSet gpu-system/nvidia-device-plugin`, as a user names an object."""
    _, kind, namespace, name = key
    return f"{kind} {namespaced(namespace, name)}"


def describe(obj: Any) -> str:
    """display() of the object's identity."""
    return display(identity(obj))


def qualified(key: Identity) -> str:
    """`Kind.group namespace/name`, the way kubectl names a resource."""
    group, kind, namespace, name = key
    kind_group = f"{kind}.{group}" if group else kind
    return f"{kind_group} {namespaced(namespace, name)}"


def file_name(obj: Any) -> str:
    """`<kind>-<name>.yaml`, lowercase; names are DNS-1123, so never a path."""
    return f"{kind_of(obj).lower()}-{name_of(obj)}.yaml"


def rank(obj: Any) -> int:
    """The object's place in the rank table (kinds not in it share UNRANKED's)."""
    return RANK.get(kind_of(obj), RANK[UNRANKED])


def sort_key(obj: Any) -> tuple[int, str, str, str]:
    """Apply order: by rank, then kind, namespace and name."""
    kind, found = kind_of(obj), metadata(obj)  # each field read once: fleets sort many objects
    return (RANK.get(kind, RANK[UNRANKED]), kind, text(found, "namespace"), text(found, "name"))
