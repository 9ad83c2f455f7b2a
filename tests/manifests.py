"""Reading rendered objects the way the cluster would: pod templates, placement, tolerations.

Written over whatever objects a render produces, so that checks stay meaningful as components are
added: "every GPU workload" is every workload that runs on GPU nodes, whichever component made it.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

from gpustack.resolve.stack import Stack

WORKLOAD_KINDS = {"DaemonSet", "Deployment", "StatefulSet", "Job"}
# Images of NVIDIA's GPU components: a workload running one needs a GPU node, however it is placed.
NVIDIA_IMAGES = "nvcr.io/nvidia/"
CONTROL_PLANE_TAINT = {
    "key": "node-role.kubernetes.io/control-plane",
    "value": None,
    "effect": "NoSchedule",
}


def workloads(objects: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    return (obj for obj in objects if obj.get("kind") in WORKLOAD_KINDS)


def pod_spec(workload: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = workload["spec"]["template"]["spec"]
    return spec


def containers(spec: dict[str, Any]) -> list[dict[str, Any]]:
    return [*spec.get("initContainers", []), *spec.get("containers", [])]


def required_node_labels(spec: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """Label key -> the requirements on it that every node the pod lands on must meet
    (nodeSelector as `In [value]`; with several nodeSelectorTerms, those common to all)."""
    requirements: dict[str, list[dict[str, Any]]] = {}
    for key, value in (spec.get("nodeSelector") or {}).items():
        requirements.setdefault(key, []).append({"operator": "In", "values": [value]})
    required = (
        spec.get("affinity", {})
        .get("nodeAffinity", {})
        .get("requiredDuringSchedulingIgnoredDuringExecution", {})
    )
    terms = required.get("nodeSelectorTerms", [])
    if terms:
        keys = set.intersection(*({e["key"] for e in t.get("matchExpressions", [])} for t in terms))
        for term in terms:
            for expression in term.get("matchExpressions", []):
                if expression["key"] in keys:
                    requirements.setdefault(expression["key"], []).append(expression)
    return requirements


def runs_on_gpu_nodes_only(spec: dict[str, Any], stack: Stack) -> bool:
    keys = {requirement.key for requirement in stack.facts.gpuNodeSelector}
    return bool(keys & set(required_node_labels(spec)))


def is_gpu_workload(workload: dict[str, Any], stack: Stack) -> bool:
    spec = pod_spec(workload)
    return runs_on_gpu_nodes_only(spec, stack) or any(
        container["image"].startswith(NVIDIA_IMAGES) for container in containers(spec)
    )


def gpu_workloads(objects: list[dict[str, Any]], stack: Stack) -> list[dict[str, Any]]:
    return [workload for workload in workloads(objects) if is_gpu_workload(workload, stack)]


# The driver container and the Container Toolkit provide the nvidia runtime, so they run under
# the default one (neither of the GPU Operator's DaemonSets sets runtimeClassName).
RUNTIME_PROVIDERS = ("nvcr.io/nvidia/driver:", "nvcr.io/nvidia/k8s/container-toolkit:")


def runtime_users(objects: list[dict[str, Any]], stack: Stack) -> list[dict[str, Any]]:
    """GPU workloads that run under the nvidia runtime (all but its providers)."""
    return [
        workload
        for workload in gpu_workloads(objects, stack)
        if not any(
            container["image"].startswith(RUNTIME_PROVIDERS)
            for container in containers(pod_spec(workload))
        )
    ]


def configured_taints(stack: Stack) -> list[dict[str, Any]]:
    taints = [taint.model_dump() for taint in stack.config.nodes.taints]
    if stack.config.nodes.controlPlane:
        taints.append(CONTROL_PLANE_TAINT)
    return taints


def covering_tolerations(taint: dict[str, Any]) -> list[dict[str, Any]]:
    """The tolerations that cover `taint` whatever its value may be on a node, by Kubernetes' rule
    (core/v1 Toleration.ToleratesTaint; an empty key with `Exists` matches every taint, an empty
    effect every effect): `Equal` to its value, or `Exists` on its key. A taint declared without
    a value stands for any value, which only `Exists` covers (as the lint rule taint-not-tolerated
    reads it)."""
    key, effect = taint["key"], taint["effect"]
    covering = [
        {"key": key, "operator": "Exists", "effect": effect},
        {"key": key, "operator": "Exists"},
        {"operator": "Exists"},
    ]
    if taint.get("value") is not None:
        covering.append(
            {"key": key, "operator": "Equal", "value": taint["value"], "effect": effect}
        )
    return covering


def shared_affinity(spec: dict[str, Any]) -> Any:
    """A pod's affinity without the expressions on its own nvidia.com/gpu.deploy.<component>
    label (each GPU DaemonSet answers to its own where the platform re-applies node labels):
    what every GPU workload's placement has in common."""
    affinity = copy.deepcopy(spec.get("affinity"))
    required = (
        (affinity or {})
        .get("nodeAffinity", {})
        .get("requiredDuringSchedulingIgnoredDuringExecution", {})
    )
    for term in required.get("nodeSelectorTerms", []):
        term["matchExpressions"] = [
            e for e in term["matchExpressions"] if not e["key"].startswith("nvidia.com/gpu.deploy.")
        ]
    return affinity


def env(container: dict[str, Any]) -> dict[str, str]:
    """A container's literal env values by name (`""` for one taken from elsewhere)."""
    return {item["name"]: item.get("value", "") for item in container.get("env", [])}


def host_path(spec: dict[str, Any], container_path: str) -> str | None:
    """The host path a path in the pod's one container is on (its deepest mount), if any."""
    (main,) = spec["containers"]
    volumes = {v["name"]: v["hostPath"]["path"] for v in spec["volumes"] if "hostPath" in v}
    for mount in sorted(main["volumeMounts"], key=lambda m: -len(m["mountPath"])):
        prefix = mount["mountPath"].rstrip("/")
        if container_path == prefix or container_path.startswith(prefix + "/"):
            return volumes[mount["name"]] + container_path[len(prefix) :]
    return None


def schedulable(workload: dict[str, Any], labels: dict[str, str]) -> bool:
    """Whether a node with `labels` satisfies the pod's nodeSelector and required node affinity
    (In, NotIn, Exists, DoesNotExist as the scheduler reads them)."""
    spec = pod_spec(workload)
    if any(labels.get(key) != value for key, value in spec.get("nodeSelector", {}).items()):
        return False
    required = (
        spec.get("affinity", {})
        .get("nodeAffinity", {})
        .get("requiredDuringSchedulingIgnoredDuringExecution")
    )
    if not required:
        return True

    def holds(expression: dict[str, Any]) -> bool:
        value = labels.get(expression["key"])
        operator = expression["operator"]
        if operator == "In":
            return value in expression["values"]
        if operator == "NotIn":
            return value not in expression["values"]
        return (value is not None) == (operator == "Exists")

    return any(
        all(holds(e) for e in term["matchExpressions"]) for term in required["nodeSelectorTerms"]
    )
