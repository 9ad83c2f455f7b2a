"""What applying a changed workload does to running nodes: which pods restart, on which nodes,
how many nodes at a time, and whether the GPU driver is reloaded there (the node cordoned, its
GPU pods evicted, maybe drained). Pure, over a workload as rendered on each side of a diff.

    rollout(before, after) -> Rollout | None   (None: no pod restarts)

A pod restarts when its workload's pod template changes (apps/v1: a DaemonSet's or a
Deployment's controller replaces pods whose template hash differs; other fields, a label or the
update strategy itself, restart nothing). How fast: a DaemonSet's `updateStrategy` (RollingUpdate
`maxUnavailable` nodes at a time, 1 when unset; OnDelete only as pods are deleted) and
`minReadySeconds` (apps/v1 DaemonSetSpec).

A driver DaemonSet is known by its driver manager, the init container that carries
`DRIVER_CONFIG_DIGEST` (NVIDIA/k8s-driver-manager v0.12.0, cmd/driver-manager/main.go
`uninstallDriver`): each of its new pods first takes the GPU DaemonSets' pods off the node; then,
when the digest differs from the running driver's, it cordons the node, evicts the pods using
GPUs (`ENABLE_GPU_POD_EVICTION`), drains it when that fails (`ENABLE_AUTO_DRAIN`, `DRAIN_*`),
and unloads the old driver; with the same digest it keeps the loaded driver and the GPU pods.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from gpustack.decorate import POOL_LABEL, is_canary

Action = Literal["starts", "restarts", "removes"]
# How much a change disturbs running work, most first: the driver reloaded (GPU pods evicted),
# pods restarted on GPU nodes (a DaemonSet), other pods restarted, nothing restarted.
RELOADS_DRIVER, RESTARTS_NODE_PODS, RESTARTS_PODS, NO_RESTART = 3, 2, 1, 0
_WORKLOADS = ("DaemonSet", "Deployment", "StatefulSet")
DIGEST = "DRIVER_CONFIG_DIGEST"


@dataclass(frozen=True)
class Rollout:
    """A workload's pods restarting (or starting, or going) on running nodes."""

    kind: str
    name: str
    action: Action
    nodes: str  # where: `pool a100`, `nodes matching k=v, k2 notin (a)`, `every node it selects`; '' off nodes
    pace: str  # how many at a time, or '' when all at once (a new or removed DaemonSet)
    driver: str  # for a driver DaemonSet, what its driver manager does on each node; else ''
    impact: int

    def sentence(self) -> str:
        """`DaemonSet gpu-system/x restarts its pods on pool a100, 1 node at a time; ...`"""
        what = {
            "starts": "starts pods",
            "restarts": "restarts its pods",
            "removes": "removes its pods",
        }[self.action]
        text = f"{self.kind} {self.name} {what}"
        text += f" on {self.nodes}" if self.nodes else ""
        text += f", {self.pace}" if self.pace else ""
        return text + (f"; {self.driver}" if self.driver else "")


def rollout(before: dict[str, Any] | None, after: dict[str, Any] | None) -> Rollout | None:
    """What replacing `before` by `after` (None: absent on that side) does to running pods."""
    obj = after if after is not None else before
    if obj is None or obj.get("kind") not in _WORKLOADS:
        return None
    kind = str(obj["kind"])
    metadata = _mapping(obj.get("metadata"))
    name = f"{metadata.get('namespace', '')}/{metadata.get('name', '')}".lstrip("/")
    if before is None or after is None:
        action: Action = "starts" if before is None else "removes"
    elif _template(before) != _template(after):
        action = "restarts"
    else:
        return None
    if kind != "DaemonSet":
        return Rollout(kind, name, action, "", "", "", RESTARTS_PODS)
    manager = _driver_manager(obj)
    driver, impact = "", RESTARTS_NODE_PODS
    if manager is not None:
        reloads = before is None or after is None or _digest(before) != _digest(after)
        driver = _driver_steps(manager, reloads, action)
        impact = RELOADS_DRIVER if reloads else RESTARTS_NODE_PODS
    pace = _pace(obj) if action == "restarts" else ""
    return Rollout(kind, name, action, _nodes(obj), pace, driver, impact)


def _mapping(value: Any) -> dict[str, Any]:
    """`value` when it is a mapping, else empty: committed files may hold anything."""
    return value if isinstance(value, dict) else {}


def _template(obj: dict[str, Any]) -> Any:
    return _mapping(obj.get("spec")).get("template")


def _pod_spec(obj: dict[str, Any]) -> dict[str, Any]:
    return _mapping(_mapping(_template(obj)).get("spec"))


# The deploy labels gpustack's DaemonSets select on: every GPU DaemonSet has them, and they say
# when a node is paused, not which nodes (workload.select_on_deploy_labels).
_DEPLOY_LABELS = "nvidia.com/gpu.deploy."


def _nodes(daemonset: dict[str, Any]) -> str:
    """The nodes a DaemonSet runs on, as a reader knows them: its node pool, else the label
    selector its pods require (nodeSelector, and the `In` and `NotIn` terms of a required node
    affinity), in Kubernetes' selector syntax."""
    pool = _mapping(_mapping(daemonset.get("metadata")).get("labels")).get(POOL_LABEL)
    if isinstance(pool, str):
        return f"pool {pool}" + (" (the canary)" if is_canary(daemonset) else "")
    spec = _pod_spec(daemonset)
    terms = [f"{key}={value}" for key, value in _mapping(spec.get("nodeSelector")).items()]
    required = _mapping(
        _mapping(_mapping(spec.get("affinity")).get("nodeAffinity")).get(
            "requiredDuringSchedulingIgnoredDuringExecution"
        )
    )
    choices = required.get("nodeSelectorTerms")
    if isinstance(choices, list) and len(choices) == 1:  # several terms: any one, not all
        expressions = _mapping(choices[0]).get("matchExpressions")
        for expression in expressions if isinstance(expressions, list) else []:
            expression = _mapping(expression)
            key, values = str(expression.get("key")), expression.get("values")
            if key.startswith(_DEPLOY_LABELS) or not isinstance(values, list) or not values:
                continue
            if expression.get("operator") == "In":
                listed = ",".join(map(str, values))
                terms.append(f"{key}={listed}" if len(values) == 1 else f"{key} in ({listed})")
            elif expression.get("operator") == "NotIn":
                terms.append(f"{key} notin ({','.join(map(str, values))})")
    if terms:
        return "nodes matching " + ", ".join(sorted(terms))
    return "every node it selects"


def _pace(daemonset: dict[str, Any]) -> str:
    """How many nodes at a time a DaemonSet's update takes (apps/v1 DaemonSetUpdateStrategy:
    RollingUpdate by default, maxUnavailable 1 by default)."""
    spec = _mapping(daemonset.get("spec"))
    strategy = _mapping(spec.get("updateStrategy"))
    if strategy.get("type") == "OnDelete":
        return "only as each pod is deleted (updateStrategy OnDelete)"
    rolling = _mapping(strategy.get("rollingUpdate"))
    unavailable = rolling.get("maxUnavailable", 1)
    if isinstance(unavailable, str) and unavailable.endswith("%"):
        pace = f"{unavailable} of its nodes at a time"
    else:
        pace = f"{unavailable} {'node' if unavailable == 1 else 'nodes'} at a time"
    ready = spec.get("minReadySeconds")
    if isinstance(ready, int) and ready > 0:
        pace += f", each new pod Ready {ready} s before the next"
    return pace


def _driver_manager(daemonset: dict[str, Any]) -> dict[str, str] | None:
    """The environment of the DaemonSet's driver manager (the init container that carries the
    driver's config digest), or None for any other DaemonSet."""
    containers = _pod_spec(daemonset).get("initContainers")
    for container in containers if isinstance(containers, list) else []:
        items = _mapping(container).get("env")
        env = {
            item.get("name"): item.get("value", "")
            for item in (items if isinstance(items, list) else [])
            if isinstance(item, dict)
        }
        if DIGEST in env:
            return {str(key): str(value) for key, value in env.items()}
    return None


def _digest(daemonset: dict[str, Any]) -> str | None:
    manager = _driver_manager(daemonset)
    return manager.get(DIGEST) if manager is not None else None


def _driver_steps(manager: dict[str, str], reloads: bool, action: Action) -> str:
    """What the driver manager of each new pod does on its node (k8s-driver-manager v0.12.0
    `uninstallDriver`)."""
    if action == "removes":
        return ""  # what the driver container does as it stops is the image's, not said here
    if not reloads:
        return (
            f"the loaded driver is kept (same {DIGEST}): on each node the GPU DaemonSets' pods "
            "leave and come back, GPU pods keep running"
        )
    steps = ["the GPU DaemonSets' pods leave it"]
    evict = manager.get("ENABLE_GPU_POD_EVICTION") == "true"
    drain = manager.get("ENABLE_AUTO_DRAIN") == "true"
    if evict or drain:
        steps.append("it is cordoned")
    if evict:
        steps.append("the pods using its GPUs are evicted (ENABLE_GPU_POD_EVICTION)")
    if drain:
        timeout = manager.get("DRAIN_TIMEOUT_SECONDS", "")
        selector = manager.get("DRAIN_POD_SELECTOR_LABEL", "")
        whom = f"the pods matching {selector}" if selector else "every pod but DaemonSets'"
        extras = []
        if manager.get("DRAIN_DELETE_EMPTYDIR_DATA") == "true":
            extras.append("emptyDir data lost")
        if manager.get("DRAIN_USE_FORCE") == "true":
            extras.append("pods no controller manages deleted")
        more = f" ({', '.join(extras)})" if extras else ""
        within = f" within {timeout}" if timeout not in ("", "0s") else ""
        when = "when that fails" if evict else "when the old driver is in use"
        steps.append(f"{when}, it is drained{within}: {whom}{more} (ENABLE_AUTO_DRAIN)")
    if not evict and not drain:
        steps.append(
            "GPU pods are not evicted: the old driver is unloaded only once none uses it, the "
            "new driver pod retrying until then"
        )
    steps.append("then the new driver is loaded")
    if action == "starts":
        # A node with no driver loaded (a new one) skips all but the install (uninstallDriver).
        return "on each node that runs a driver already, it is replaced: " + ", ".join(steps)
    return "on each node the driver is reloaded: " + ", ".join(steps)
