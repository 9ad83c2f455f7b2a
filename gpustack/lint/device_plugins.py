"""duplicate-device-plugin: two device plugins advertising `nvidia.com/gpu` on one node make
allocation nondeterministic (GKE's own plugin next to NVIDIA's: NVIDIA/k8s-device-plugin PR #1998)."""

from __future__ import annotations

from collections.abc import Iterator

from gpustack.findings import Finding
from gpustack.lint._objects import Objects, Pod, Rule, containers_running, finding
from gpustack.objects import describe, identity

# GKE's plugin image (container-engine-accelerators cmd/nvidia_gpu/device-plugin.yaml).
GKE_PLUGIN_IMAGE = "nvidia-gpu-device-plugin"


def is_device_plugin(pod: Pod) -> bool:
    """A device plugin advertising `nvidia.com/gpu`: NVIDIA's or GKE's."""
    return bool(containers_running(pod, "nvidia-device-plugin")) or any(
        GKE_PLUGIN_IMAGE in image for image in pod.images
    )


def _requirements(pod: Pod) -> list[dict[str, tuple[str, frozenset[str]]]]:
    """The pod's placement as alternatives (ORed), each {label key: (operator, values)} ANDed."""
    base = {key: ("In", frozenset([value])) for key, value in pod.node_selector().items()}
    terms = pod.node_selector_terms() or [[]]
    alternatives = []
    for term in terms:
        alternative = dict(base)
        for expression in term:
            key = str(expression.get("key"))
            values = frozenset(str(v) for v in expression.get("values") or [])
            alternative[key] = _narrow(
                alternative.get(key), (str(expression.get("operator")), values)
            )
        alternatives.append(alternative)
    return alternatives


def _narrow(
    old: tuple[str, frozenset[str]] | None, new: tuple[str, frozenset[str]]
) -> tuple[str, frozenset[str]]:
    """Two requirements on one key, both to be met (Kubernetes ANDs a term's expressions): the
    values both allow, where both are value lists (`NotIn [a]` and `NotIn [b]`, as a DaemonSet
    excluding two pools of one label has, allow neither a nor b)."""
    if old is None:
        return new
    if _disjoint(old, new):
        return ("In", frozenset())
    (op_old, values_old), (op_new, values_new) = old, new
    if (op_old, op_new) == ("In", "In"):
        return ("In", values_old & values_new)
    if (op_old, op_new) == ("NotIn", "NotIn"):
        return ("NotIn", values_old | values_new)
    if (op_old, op_new) == ("In", "NotIn"):
        return ("In", values_old - values_new)
    if (op_old, op_new) == ("NotIn", "In"):
        return ("In", values_new - values_old)
    return new


def _disjoint(a: tuple[str, frozenset[str]], b: tuple[str, frozenset[str]]) -> bool:
    """Whether no node label value satisfies both requirements on one key."""
    (op_a, values_a), (op_b, values_b) = a, b
    if (op_a == "In" and not values_a) or (op_b == "In" and not values_b):
        return True
    pairs = {(op_a, op_b), (op_b, op_a)}
    if ("DoesNotExist", "In") in pairs or ("DoesNotExist", "Exists") in pairs:
        return True
    if (op_a, op_b) == ("In", "In"):
        return not values_a & values_b
    if (op_a, op_b) == ("In", "NotIn"):
        return values_a <= values_b
    if (op_a, op_b) == ("NotIn", "In"):
        return values_b <= values_a
    return False


def may_share_a_node(a: Pod, b: Pod) -> bool:
    for left in _requirements(a):
        for right in _requirements(b):
            shared = set(left) & set(right)
            if not any(_disjoint(left[key], right[key]) for key in shared) and not any(
                _disjoint(req, req) for req in [*left.values(), *right.values()]
            ):
                return True
    return False


Placement = tuple[tuple[tuple[str, str, tuple[str, ...]], ...], ...]


def _placement(pod: Pod) -> Placement:
    """The pod's node placement in a canonical form: equal forms place pods alike."""
    return tuple(
        tuple(sorted((key, op, tuple(sorted(values))) for key, (op, values) in alternative.items()))
        for alternative in _requirements(pod)
    )


def check(objects: Objects) -> Iterator[Finding]:
    """Each plugin that may share a node with an earlier one is reported once, naming the first
    such. Plugins are compared by distinct placement (a fleet's many copies of one DaemonSet
    place alike), so the work grows with the plugins, not with their pairs."""
    seen: set[tuple[str, str, str, str]] = set()
    representatives: dict[Placement, Pod] = {}
    shares: dict[tuple[Placement, Placement], bool] = {}
    for pod in (pod for pod in objects.pods() if is_device_plugin(pod)):
        if identity(pod.owner) in seen:
            continue  # the same object listed twice (two files, two renders) is one plugin
        seen.add(identity(pod.owner))
        placement = _placement(pod)
        for other, earlier in representatives.items():
            pair = (other, placement)
            if pair not in shares:
                shares[pair] = may_share_a_node(earlier, pod)
            if shares[pair]:
                yield finding(
                    RULE,
                    pod.owner,
                    f"{describe(pod.owner)} and {describe(earlier.owner)} both advertise "
                    "nvidia.com/gpu and may run on the same nodes; keep one plugin per node "
                    "(disjoint node selectors, or on GKE label the pool "
                    "gke-no-default-nvidia-gpu-device-plugin=true for NVIDIA's plugin)",
                    f"{pod.path}.affinity",
                )
                break
        representatives.setdefault(placement, pod)


RULE = Rule(
    "duplicate-device-plugin",
    "error",
    "Two device plugins that advertise `nvidia.com/gpu` (NVIDIA's, GKE's) can land on the same "
    "node: their node selectors and required affinities do not exclude each other.",
    "Deploy one plugin, or give them disjoint node placement (e.g. `In [a]` against `NotIn [a]`).",
    check,
)
