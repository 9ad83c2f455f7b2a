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
when the digest differs from the running driver's (or `FORCE_REINSTALL` is set), it cordons the
node and evicts the pods using GPUs (`ENABLE_GPU_POD_EVICTION`), drains it when that fails or the
old driver stays in use (`ENABLE_AUTO_DRAIN`, `DRAIN_*`), and unloads the old driver; with the
same digest it keeps the loaded driver and the GPU pods. Its settings are read as its command
line reads them (main.go's flags, urfave/cli v2 BoolFlag): unset, a setting is the manager's own
default (eviction and drain on); empty, false; otherwise Go's strconv.ParseBool.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from gpustack.build.decorate import POOL_LABEL, is_canary
from gpustack.objects import kind_of, labels_of

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
    if obj is None or kind_of(obj) not in _WORKLOADS:
        return None
    kind = kind_of(obj)
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
        forced = _flag(manager, "FORCE_REINSTALL", False) is not False
        reloads = before is None or after is None or _digest(before) != _digest(after) or forced
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
    pool = labels_of(daemonset).get(POOL_LABEL)
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


def _driver_manager(daemonset: dict[str, Any]) -> dict[str, str | None] | None:
    """The environment of the DaemonSet's driver manager (the init container that carries the
    driver's config digest), a variable set at run time (`valueFrom`) as None; or None for any
    other DaemonSet."""
    containers = _pod_spec(daemonset).get("initContainers")
    for container in containers if isinstance(containers, list) else []:
        items = _mapping(container).get("env")
        env = {
            str(item.get("name")): None if "valueFrom" in item else str(item.get("value", ""))
            for item in (items if isinstance(items, list) else [])
            if isinstance(item, dict)
        }
        if DIGEST in env:
            return env
    return None


def _digest(daemonset: dict[str, Any]) -> str | None:
    manager = _driver_manager(daemonset)
    return manager.get(DIGEST) if manager is not None else None


# What Go's strconv.ParseBool reads, as the driver manager's flags do.
_TRUE = ("1", "t", "T", "TRUE", "true", "True")
_FALSE = ("0", "f", "F", "FALSE", "false", "False")
_UNPARSED = "unparsed"


def _flag(manager: dict[str, str | None], name: str, default: bool) -> bool | str | None:
    """A boolean setting of the driver manager as it reads it: unset, its default; empty, false
    (urfave/cli v2 BoolFlag.Apply); None when set at run time; `_UNPARSED` when it is no boolean
    (the manager then stops before it does anything)."""
    if name not in manager:
        return default
    value = manager[name]
    if value is None:
        return None
    if value == "" or value in _FALSE:
        return False
    return True if value in _TRUE else _UNPARSED


def _driver_steps(manager: dict[str, str | None], reloads: bool, action: Action) -> str:
    """What the driver manager of each new pod does on its node (k8s-driver-manager v0.12.0
    `uninstallDriver`)."""
    if action == "removes":
        return ""  # what the driver container does as it stops is the image's, not said here
    names = (
        "ENABLE_GPU_POD_EVICTION",
        "ENABLE_AUTO_DRAIN",
        "DRAIN_USE_FORCE",
        "DRAIN_DELETE_EMPTYDIR_DATA",
        "FORCE_REINSTALL",
    )
    broken = [name for name in names if _flag(manager, name, False) == _UNPARSED]
    if broken:
        # main.go's flags fail to parse: the manager exits before uninstallDriver, and so does
        # each new driver pod's init container, again and again.
        return (
            f"its driver manager stops at once ({', '.join(broken)}: not a boolean), so no new "
            "driver pod starts"
        )
    if not reloads:
        return (
            f"the loaded driver is kept (same {DIGEST}): on each node the GPU DaemonSets' pods "
            "leave and come back, GPU pods keep running"
        )
    steps = ["the GPU DaemonSets' pods leave it"]
    evict = _flag(manager, "ENABLE_GPU_POD_EVICTION", True)
    drain = _flag(manager, "ENABLE_AUTO_DRAIN", True)
    if evict is None or drain is None:
        steps.append(
            "whether the pods using its GPUs are evicted or it is drained is set at run time "
            "(ENABLE_GPU_POD_EVICTION, ENABLE_AUTO_DRAIN)"
        )
    if evict is True:
        # Cordoned before the eviction; a drain without it cordons nothing (kubectl's drain
        # package, RunNodeDrain, as k8s-driver-manager calls it).
        steps.append("it is cordoned")
        steps.append("the pods using its GPUs are evicted (ENABLE_GPU_POD_EVICTION)")
    if drain is True:
        steps.append(
            _drain(manager, "when that fails" if evict else "when the old driver is in use")
        )
    if evict is False and drain is False:
        steps.append(
            "GPU pods are not evicted: the old driver is unloaded only once none uses it, the "
            "new driver pod retrying until then"
        )
    steps.append("then the new driver is loaded")
    if action == "starts":
        # A node with no driver loaded (a new one) skips all but the install (uninstallDriver).
        return "on each node that runs a driver already, it is replaced: " + ", ".join(steps)
    return "on each node the driver is reloaded: " + ", ".join(steps)


def _drain(manager: dict[str, str | None], when: str) -> str:
    """The drain the driver manager falls back on (internal/kubernetes DrainNode, v0.12.0): kubectl's
    drain of the node's pods, which does not set DaemonSets' pods aside (no
    IgnoreAllDaemonSets): without a pod selector it meets the driver pod itself and fails."""
    timeout = manager.get("DRAIN_TIMEOUT_SECONDS") or ""
    selector = manager.get("DRAIN_POD_SELECTOR_LABEL", "")
    within = f" within {timeout}" if timeout not in ("", "0s") else ""
    if selector is None:
        selector = "the selector set at run time"  # valueFrom: whether it works is not known
    if not selector:
        return (
            f"{when}, a drain is tried and fails (k8s-driver-manager drains without setting "
            "DaemonSet pods aside, and its own pod is one: DRAIN_POD_SELECTOR_LABEL narrows it), "
            "the new driver pod retrying (ENABLE_AUTO_DRAIN)"
        )
    extras = []
    if _flag(manager, "DRAIN_DELETE_EMPTYDIR_DATA", False) is True:
        extras.append("emptyDir data lost")
    if _flag(manager, "DRAIN_USE_FORCE", False) is True:
        extras.append("pods no controller manages deleted")
    more = f" ({', '.join(extras)})" if extras else ""
    return f"{when}, it is drained{within}: the pods matching {selector}{more} (ENABLE_AUTO_DRAIN)"
