"""What several rules know of the GPU stack's pods: which pods are device plugins and whether two
may land on one node, where the device plugin's config files are mounted and what they hold, the
plugin's MIG strategy and its CDI strategies, the Container Toolkit's image.

Rules import these from here, never from each other (an import-linter contract).
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterator, Sequence
from typing import Any

from gpustack.errors import UserError
from gpustack.validation.lint._objects import (
    Budget,
    Objects,
    Pod,
    containers_running,
    mapping,
    parse_yaml,
    sequence,
)

# GKE's plugin image (container-engine-accelerators cmd/nvidia_gpu/device-plugin.yaml).
GKE_PLUGIN_IMAGE = "nvidia-gpu-device-plugin"


def is_device_plugin(pod: Pod) -> bool:
    """A device plugin advertising `nvidia.com/gpu`: NVIDIA's or GKE's."""
    return bool(containers_running(pod, "nvidia-device-plugin")) or any(
        GKE_PLUGIN_IMAGE in image for image in pod.images
    )


Requirement = tuple[str, frozenset[str]]  # (operator, values) on one label key
# A placement as alternatives (ORed), each {label key: requirement} ANDed.
Placement = list[dict[str, Requirement]]


def requirements(pod: Pod) -> Placement:
    """The pod's placement as alternatives (ORed), each {label key: (operator, values)} ANDed."""
    base = {key: ("In", frozenset([value])) for key, value in pod.node_selector().items()}
    terms = pod.node_selector_terms() or [[]]
    alternatives = []
    for term in terms:
        alternative = dict(base)
        for expression in term:
            key = str(expression.get("key"))
            values = frozenset(str(v) for v in sequence(expression.get("values")))
            alternative[key] = _narrow(
                alternative.get(key), (str(expression.get("operator")), values)
            )
        alternatives.append(alternative)
    return alternatives


def _narrow(old: Requirement | None, new: Requirement) -> Requirement:
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


def _disjoint(a: Requirement, b: Requirement) -> bool:
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


def overlap(a: Placement, b: Placement) -> bool:
    """Whether some node can satisfy both placements."""
    for left in a:
        if any(_disjoint(req, req) for req in left.values()):
            continue
        for right in b:
            shared = left.keys() & right.keys()
            if not any(_disjoint(left[key], right[key]) for key in shared) and not any(
                _disjoint(req, req) for req in right.values()
            ):
                return True
    return False


# The most placements one index holds: the GPU workloads of one kind (drivers, device plugins,
# DRA plugins, validators) or the node pools of one annotation that a rule relates; a cluster
# has a few dozen (a config renders at most 512 driver DaemonSets).
MAX_PLACEMENTS = 5_000
# A label value no node carries: what `DoesNotExist` allows, in the index below.
_ABSENT = "\x00absent"


class Placements:
    """Which of many placements can share a node with another, without comparing every pair.

    Most placements pin a label key to a few values (`In`, a nodeSelector) or to its absence
    (`DoesNotExist`); two placements that pin one key to disjoint values never meet. The index
    keeps, for each such key, the placements that allow each value, so a query compares exactly
    only the placements no pinned key separates, and those sets are intersected as sets of
    numbers. What the index cannot separate (crafted `Exists`/`NotIn` mazes, or thousands of
    workloads on the same nodes) is compared pairwise up to MAX_COMPARISONS, then refused; an
    index holds at most MAX_PLACEMENTS, so that even its set operations stay small: lint work
    stays bounded whatever the manifests hold.
    """

    def __init__(self, placements: Sequence[Placement], budget: Budget) -> None:
        if len(placements) > MAX_PLACEMENTS:
            raise UserError(
                f"{len(placements)} {budget.what} to compare, more than the {MAX_PLACEMENTS} "
                "lint compares at once: these are GPU workloads (drivers, device plugins, GPU "
                "clients) or node pools, which no cluster has thousands of",
                hint="lint fewer manifests at once, or validate with --no-lint",
            )
        self.placements = list(placements)
        everyone = frozenset(range(len(self.placements)))
        allowing: dict[str, dict[str, set[int]]] = {}
        for number, placement in enumerate(self.placements):
            for key, values in _pinned(placement).items():
                by_value = allowing.setdefault(key, {})
                for value in values:
                    by_value.setdefault(value, set()).add(number)
        pinning = {key: frozenset().union(*by_value.values()) for key, by_value in allowing.items()}
        self._allowing = allowing
        self._free = {key: everyone - numbers for key, numbers in pinning.items()}
        self._everyone = everyone
        self._budget = budget

    def sharing(self, placement: Placement, below: int | None = None) -> Iterator[int]:
        """The numbers (ascending, each under `below` when given) of the indexed placements
        that can share a node with `placement`."""
        candidates: frozenset[int] | set[int] = self._everyone
        for key, values in _pinned(placement).items():
            if key not in self._free:
                continue
            by_value = self._allowing[key]
            compatible = self._free[key].union(
                *(by_value[value] for value in values if value in by_value)
            )
            candidates = compatible.intersection(candidates)
            if not candidates:
                return
        for number in sorted(candidates):
            if below is not None and number >= below:
                return
            self._budget.spend()
            if overlap(placement, self.placements[number]):
                yield number


def _pinned(placement: Placement) -> dict[str, frozenset[str]]:
    """The label keys every alternative of a placement pins to a set of values (`In`, or no
    value: `DoesNotExist`), with the values any alternative allows; a key one alternative
    leaves open is not pinned."""
    pinned: dict[str, frozenset[str]] | None = None
    for alternative in placement:
        if any(_disjoint(req, req) for req in alternative.values()):
            continue  # an alternative no node meets allows nothing
        own = {
            key: values if op == "In" else frozenset([_ABSENT])
            for key, (op, values) in alternative.items()
            if op in ("In", "DoesNotExist")
        }
        if pinned is None:
            pinned = own
        else:
            pinned = {key: pinned[key] | own[key] for key in pinned.keys() & own.keys()}
    return pinned or {}


CONFIG_READERS = ("nvidia-device-plugin", "gpu-feature-discovery", "mps-control-daemon")


def mounted_configs(
    objects: Objects, pod: Pod, container: dict[str, Any]
) -> Iterator[tuple[dict[str, Any], str, str]]:
    """(ConfigMap, key, text) of every file in the ConfigMaps `container` mounts. Many pods
    mounting one ConfigMap of many files make pairs of them: counted in the run's Budget
    (Objects.mounted_files), as the rules read each pair."""
    mounted = {str(m.get("name")) for m in map(mapping, sequence(container.get("volumeMounts")))}
    for volume in map(mapping, sequence(pod.spec.get("volumes"))):
        name = mapping(volume.get("configMap")).get("name")
        if str(volume.get("name")) not in mounted or not name:
            continue
        config_map = objects.config_map(pod.namespace, str(name))
        for key, text in mapping(config_map.get("data") if config_map else None).items():
            objects.mounted_files.spend()
            yield config_map, str(key), str(text)  # type: ignore[misc]


def parse(text: str) -> tuple[dict[str, Any] | None, str | None]:
    """The config as data, or the reason it does not parse."""
    data, error = parse_yaml(text)
    if error:
        return None, f"at {error.strip()}"
    if not isinstance(data, dict):
        return None, "expected a mapping with `version: v1`"
    return data, None


# The Container Toolkit's image (gpu-operator values.yaml toolkit.repository/image).
TOOLKIT_IMAGE = "container-toolkit"


def cdi_strategies(objects: Objects, pod: Pod) -> set[str]:
    """The device list strategies the pod's device plugin containers use."""
    found: set[str] = set()
    for container in containers_running(pod, "nvidia-device-plugin"):
        env = pod.env(container).get("DEVICE_LIST_STRATEGY")
        if env:
            found.update(part.strip() for part in env.split(","))
        for _, _, text in mounted_configs(objects, pod, container):
            config, _ = parse(text)
            value = mapping(mapping(mapping(config).get("flags")).get("plugin")).get(
                "deviceListStrategy"
            )
            found.update(str(item) for item in (sequence(value) or ([value] if value else [])))
    return found


DEFAULT_MIG_STRATEGY = "none"  # k8s-device-plugin flag default


def mig_strategy(objects: Objects, pod: Pod, container: dict[str, Any]) -> str | None:
    """The MIG strategy a plugin or GFD container runs with: its flag, else its MIG_STRATEGY
    env, else its config file, else the default. None when the config differs per node (several
    config files, chosen by node label)."""
    words = pod.command_words(container)
    for index, word in enumerate(words):
        if word.startswith("--mig-strategy="):
            return word.partition("=")[2]
        if word == "--mig-strategy" and index + 1 < len(words):
            return words[index + 1]
    env = pod.env(container)
    if "MIG_STRATEGY" in env:
        return env["MIG_STRATEGY"]
    files = {key: text for _, key, text in mounted_configs(objects, pod, container)}
    wanted = posixpath.basename(env.get("CONFIG_FILE", ""))
    if wanted in files:
        files = {wanted: files[wanted]}
    if len(files) > 1:
        return None
    if not files:
        return DEFAULT_MIG_STRATEGY
    config, _ = parse(next(iter(files.values())))
    return str(mapping(mapping(config).get("flags")).get("migStrategy", DEFAULT_MIG_STRATEGY))
