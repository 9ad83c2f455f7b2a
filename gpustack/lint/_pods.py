"""What several rules know of the GPU stack's pods: which pods are device plugins and whether two
may land on one node, where the device plugin's config files are mounted and what they hold, the
plugin's MIG strategy and its CDI strategies, the Container Toolkit's image.

Rules import these from here, never from each other (an import-linter contract).
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterator
from typing import Any

from gpustack.lint._objects import Objects, Pod, containers_running, mapping, parse_yaml, sequence

# GKE's plugin image (container-engine-accelerators cmd/nvidia_gpu/device-plugin.yaml).
GKE_PLUGIN_IMAGE = "nvidia-gpu-device-plugin"


def is_device_plugin(pod: Pod) -> bool:
    """A device plugin advertising `nvidia.com/gpu`: NVIDIA's or GKE's."""
    return bool(containers_running(pod, "nvidia-device-plugin")) or any(
        GKE_PLUGIN_IMAGE in image for image in pod.images
    )


def requirements(pod: Pod) -> list[dict[str, tuple[str, frozenset[str]]]]:
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
    for left in requirements(a):
        for right in requirements(b):
            shared = set(left) & set(right)
            if not any(_disjoint(left[key], right[key]) for key in shared) and not any(
                _disjoint(req, req) for req in [*left.values(), *right.values()]
            ):
                return True
    return False


CONFIG_READERS = ("nvidia-device-plugin", "gpu-feature-discovery", "mps-control-daemon")


def mounted_configs(
    objects: Objects, pod: Pod, container: dict[str, Any]
) -> Iterator[tuple[dict[str, Any], str, str]]:
    """(ConfigMap, key, text) of every file in the ConfigMaps `container` mounts."""
    mounted = {str(m.get("name")) for m in map(mapping, sequence(container.get("volumeMounts")))}
    for volume in map(mapping, sequence(pod.spec.get("volumes"))):
        name = mapping(volume.get("configMap")).get("name")
        if str(volume.get("name")) not in mounted or not name:
            continue
        config_map = objects.config_map(pod.namespace, str(name))
        for key, text in mapping(config_map.get("data") if config_map else None).items():
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
