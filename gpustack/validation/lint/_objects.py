"""What the rules share: a view of the object set and of the pods its workloads run.

Rules read objects that anyone may have written (gpustack's output, upstream static manifests, a
user's own files), so every accessor here tolerates missing or oddly typed fields.
"""

from __future__ import annotations

import functools
import json
import re
import shlex
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

from gpustack.errors import UserError
from gpustack.findings import Finding
from gpustack.objects import annotations_of, identity, kind_of, labels_of, name_of, namespace_of
from gpustack.read import yamlio

# Kinds whose `spec.template` is a pod template, and where that template sits.
POD_TEMPLATE_KINDS = {
    "DaemonSet",
    "Deployment",
    "StatefulSet",
    "ReplicaSet",
    "Job",
    "ReplicationController",
}
GPU_RESOURCE = "nvidia.com/gpu"
NFD_LABEL_PREFIX = "feature.node.kubernetes.io/"
NVIDIA_LABEL_PREFIX = "nvidia.com/"


def mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def sequence(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def labels_match(selector: dict[str, Any], labels: dict[str, Any]) -> bool:
    """Whether a LabelSelector (matchLabels + matchExpressions) selects `labels`.

    An empty selector matches everything, as for Services and ServiceMonitors.
    """
    for key, value in mapping(selector.get("matchLabels")).items():
        if labels.get(key) != value:
            return False
    for expression in map(mapping, sequence(selector.get("matchExpressions"))):
        requirement, operator = str(expression.get("key")), expression.get("operator")
        values = [str(v) for v in sequence(expression.get("values"))]
        present = requirement in labels
        if operator == "In" and not (present and str(labels[requirement]) in values):
            return False
        if operator == "NotIn" and present and str(labels[requirement]) in values:
            return False
        if operator == "Exists" and not present:
            return False
        if operator == "DoesNotExist" and present:
            return False
    return True


# Pairs of objects one rule compares at most (an index leaves only the pairs it cannot tell
# apart): about a second of work. gpustack's own output, a fleet's included, needs a few thousand;
# more means crafted manifests, such as thousands of workloads on the same nodes.
MAX_COMPARISONS = 500_000


class Budget:
    """The comparisons of one rule's index, refused past MAX_COMPARISONS."""

    def __init__(self, what: str) -> None:
        self.what = what
        self.spent = 0

    def spend(self) -> None:
        self.spent += 1
        if self.spent > MAX_COMPARISONS:
            raise UserError(
                f"more than {MAX_COMPARISONS} pairs of {self.what} to compare, which lint "
                "does not do: the manifests hold thousands of objects that no label tells apart",
                hint="lint fewer manifests at once, or validate with --no-lint",
            )


class Labelled:
    """Label sets (of Services, pod templates...) indexed by label, so that the ones a selector
    matches are found by intersecting the sets carrying each of its matchLabels, not by testing
    every one; only those are tested in full (matchExpressions), within a Budget."""

    def __init__(self, labels: list[dict[str, Any]], budget: Budget) -> None:
        self.labels = labels
        self._carrying: dict[tuple[str, str], set[int]] = {}
        for number, each in enumerate(labels):
            for key, value in each.items():
                self._carrying.setdefault((str(key), str(value)), set()).add(number)
        self._budget = budget

    def matching(self, selector: dict[str, Any]) -> Iterator[int]:
        """The numbers (ascending) of the label sets `selector` matches (labels_match)."""
        wanted = [(str(k), str(v)) for k, v in mapping(selector.get("matchLabels")).items()]
        candidates: set[int] | range = range(len(self.labels))
        if wanted:
            found = sorted((self._carrying.get(pair, set()) for pair in wanted), key=len)
            candidates = found[0].intersection(*found[1:])
        for number in sorted(candidates):
            self._budget.spend()
            if labels_match(selector, self.labels[number]):
                yield number


@functools.lru_cache(maxsize=4096)
def parse_yaml(text: str) -> tuple[Any, str | None]:
    """A config file held in a ConfigMap, as data, or why it does not parse. Cached: the clusters
    of a fleet mostly carry the same files, and the rules must not parse them once per cluster.
    The data is shared between callers, who only read it."""
    try:
        return yamlio.load_text(text, "file").data, None
    except UserError as error:
        return None, str(error).removeprefix("file:")


@dataclass
class Pod:
    """A pod template inside a workload (or a bare Pod)."""

    owner: dict[str, Any]
    spec: dict[str, Any]
    labels: dict[str, Any]
    path: str  # dotted path of the pod spec inside the owner, for Finding.field

    @property
    def namespace(self) -> str:
        return namespace_of(self.owner)

    @property
    def containers(self) -> list[dict[str, Any]]:
        return [
            mapping(container)
            for key in ("initContainers", "containers")
            for container in sequence(self.spec.get(key))
        ]

    @property
    def images(self) -> list[str]:
        return [str(c["image"]) for c in self.containers if isinstance(c.get("image"), str)]

    def command_words(self, container: dict[str, Any]) -> list[str]:
        words: list[str] = []
        for key in ("command", "args"):
            for part in map(str, sequence(container.get(key))):
                words.extend(_words(part))
        return words

    def env(self, container: dict[str, Any]) -> dict[str, str]:
        return {
            str(item["name"]): str(item["value"])
            for item in map(mapping, sequence(container.get("env")))
            if "name" in item and isinstance(item.get("value"), (str, int, bool))
        }

    def node_selector(self) -> dict[str, str]:
        return {str(k): str(v) for k, v in mapping(self.spec.get("nodeSelector")).items()}

    def node_selector_terms(self) -> list[list[dict[str, Any]]]:
        """The required node affinity terms (ORed), each a list of match expressions (ANDed)."""
        required = mapping(
            mapping(mapping(self.spec.get("affinity")).get("nodeAffinity")).get(
                "requiredDuringSchedulingIgnoredDuringExecution"
            )
        )
        return [
            [mapping(e) for e in sequence(mapping(term).get("matchExpressions"))]
            for term in sequence(required.get("nodeSelectorTerms"))
        ]

    def placement_keys(self) -> set[str]:
        keys = set(self.node_selector())
        for term in self.node_selector_terms():
            keys.update(str(e.get("key")) for e in term)
        return keys

    @functools.cached_property
    def plugin_binaries(self) -> list[tuple[dict[str, Any], str | None]]:
        """Each container with the k8s-device-plugin binary it runs, if any; worked out once
        per pod, as most rules ask."""
        return [
            (container, _plugin_binary(self, container))
            for container in sequence(self.spec.get("containers"))
            if isinstance(container, dict)
        ]

    def requests_gpu(self) -> bool:
        for container in self.containers:
            resources = mapping(container.get("resources"))
            for section in ("limits", "requests"):
                if any(
                    str(name).startswith(NVIDIA_LABEL_PREFIX)
                    for name in mapping(resources.get(section))
                ):
                    return True
        return False


@dataclass
class Objects:
    """The object set under lint, with the lookups the rules need."""

    objects: list[dict[str, Any]]
    kubernetes_version: str | None = None
    # Taints the GPU nodes carry, when a config says so ({key, value?, effect}).
    taints: list[dict[str, Any]] = field(default_factory=list)
    # Labels the config says GPU nodes carry (nodes.selector): the user is their source.
    node_labels: set[str] = field(default_factory=set)

    def of_kind(self, *kinds: str) -> Iterator[dict[str, Any]]:
        return (obj for obj in self.objects if kind_of(obj) in kinds)

    def pods(self) -> list[Pod]:
        return self._pods

    @functools.cached_property
    def _pods(self) -> list[Pod]:
        return list(self._find_pods())

    def _find_pods(self) -> Iterator[Pod]:
        for obj in self.objects:
            kind = kind_of(obj)
            spec = mapping(obj.get("spec"))
            if kind == "Pod":
                yield Pod(obj, spec, labels_of(obj), "spec")
                continue
            if kind in POD_TEMPLATE_KINDS:
                template, path = mapping(spec.get("template")), "spec.template.spec"
            elif kind == "CronJob":
                job = mapping(mapping(spec.get("jobTemplate")).get("spec"))
                template, path = mapping(job.get("template")), "spec.jobTemplate.spec.template.spec"
            else:
                continue
            labels = labels_of(template)
            yield Pod(obj, mapping(template.get("spec")), labels, path)

    @functools.cached_property
    def _config_maps(self) -> dict[tuple[str, str], dict[str, Any]]:
        return {(namespace_of(cm), name_of(cm)): cm for cm in self.of_kind("ConfigMap")}

    def config_map(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self._config_maps.get((namespace, name))

    @functools.cached_property
    def _runtime_classes(self) -> dict[str, dict[str, Any]]:
        return {name_of(rc): rc for rc in self.of_kind("RuntimeClass")}

    def runtime_class(self, name: str) -> dict[str, Any] | None:
        return self._runtime_classes.get(name)

    @functools.cached_property
    def mounted_files(self) -> Budget:
        """The files of mounted ConfigMaps the rules read, pod by pod, in this run."""
        return Budget("pods and the config files they mount")


@dataclass(frozen=True)
class Rule:
    id: str
    severity: Literal["error", "warning"]
    description: str  # what it catches, one sentence
    fix: str  # how to fix it, one sentence
    check: Callable[[Objects], Iterator[Finding]]


def finding(rule: Rule, obj: dict[str, Any], message: str, field: str | None = None) -> Finding:
    return Finding(rule.id, rule.severity, message, object=identity(obj), field=field)


# --- What kind of pod this is -------------------------------------------------------------------
# Images of the NVIDIA GPU stack all carry one of these words (nvcr.io/nvidia/..., GKE's
# gcr.io/gke-release/nvidia-gpu-device-plugin, cos-nvidia-installer, k8s/dcgm-exporter).
_GPU_IMAGE = re.compile(r"nvidia|dcgm|gpu-feature-discovery|k8s-device-plugin")
_GPU_NODE_LABEL = re.compile(
    # NFD's NVIDIA PCI labels (pci-10de and pci-<class>_10de), any NVIDIA label, GKE's accelerator
    # label (container-engine-accelerators).
    r"^(feature\.node\.kubernetes\.io/pci-([0-9a-f]{4}_)?10de|nvidia\.com/|cloud\.google\.com/gke-accelerator|cloud\.google\.com/gke-gpu)"
)


def is_nfd_worker(pod: Pod) -> bool:
    return any(
        "node-feature-discovery" in str(c.get("image", "")) and "nfd-worker" in pod.command_words(c)
        for c in pod.containers
    )


def is_gpu_pod(pod: Pod, objects: Objects) -> bool:
    """A pod that runs on GPU nodes: it requests GPUs, selects GPU nodes, runs under an nvidia
    RuntimeClass or is an NVIDIA GPU-stack image."""
    if pod.requests_gpu():
        return True
    if any(_GPU_IMAGE.search(image) for image in pod.images) and not is_dra_controller(pod):
        return True
    if any(_GPU_NODE_LABEL.match(key) for key in pod.placement_keys()):
        return True
    runtime_class = pod.spec.get("runtimeClassName")
    if isinstance(runtime_class, str):
        known = objects.runtime_class(runtime_class)
        handler = str(known.get("handler", "")) if known else runtime_class
        return "nvidia" in handler
    return False


# The DRA driver's image (registry.k8s.io/dra-driver-nvidia/dra-driver-nvidia-gpu, and NVIDIA's
# earlier nvcr.io/nvidia/k8s-dra-driver-gpu) and its binaries (kubernetes-sigs/
# dra-driver-nvidia-gpu v0.4.1 templates/kubeletplugin.yaml, controller.yaml).
DRA_IMAGE = re.compile(r"(dra-driver-nvidia-gpu|k8s-dra-driver-gpu)([:@]|$)")
DRA_GPU_PLUGIN = "gpu-kubelet-plugin"


def is_dra_controller(pod: Pod) -> bool:
    """The DRA driver's ComputeDomain controller: the driver's image, but no GPU node's pod (it
    only calls the API server, near the control plane)."""
    return bool(pod.containers) and all(
        "compute-domain-controller" in pod.command_words(container) for container in pod.containers
    )


def dra_gpu_plugins(pod: Pod) -> list[dict[str, Any]]:
    """The containers of `pod` that run the DRA driver's GPU kubelet plugin, which publishes the
    node's GPUs as ResourceSlices."""
    return [
        container
        for container in sequence(pod.spec.get("containers"))
        if isinstance(container, dict)
        and DRA_IMAGE.search(str(container.get("image", "")))
        and DRA_GPU_PLUGIN in " ".join(pod.command_words(container))
    ]


def _plugin_binary(pod: Pod, container: dict[str, Any]) -> str | None:
    """Which NVIDIA k8s-device-plugin binary a container runs: the image holds several (the
    plugin is the default entrypoint; GFD and the MPS daemon are chosen by command)."""
    image = str(container.get("image", ""))
    words = " ".join(pod.command_words(container))
    if "gpu-feature-discovery" in image or "gpu-feature-discovery" in words:
        return "gpu-feature-discovery"
    if "k8s-device-plugin" not in image and "nvidia-device-plugin" not in words:
        return None
    if "mps-control-daemon" in words:
        return "mps-control-daemon"
    if "config-manager" in words:
        return "config-manager"
    return "nvidia-device-plugin"


def containers_running(pod: Pod, binary: str) -> list[dict[str, Any]]:
    return [container for container, runs in pod.plugin_binaries if runs == binary]


@functools.lru_cache(maxsize=4096)
def _words(part: str) -> tuple[str, ...]:
    # Shell scripts in `args: [sh, -c, "..."]` hold the binary inside one string. Fleets repeat
    # the same commands thousands of times, hence the cache.
    try:
        return tuple(shlex.split(part))
    except ValueError:  # unbalanced quotes: still worth a look, word by word
        return tuple(part.split())


# Where gpustack records a cluster's node pools on the objects that differ per pool: each pool's
# name, node selector (matchLabels) and the config its nodes select (gpustack.build.components
# device_plugin and mig_manager).
POOLS_ANNOTATION = "gpustack.dev/node-pools"


@dataclass(frozen=True)
class NodePool:
    name: str
    selector: dict[str, str]
    config: str
    owner: dict[str, Any]  # the object whose annotation names it


def node_pools(obj: dict[str, Any]) -> list[NodePool] | None:
    """The pools an object's annotation names; None when it names none or is malformed."""
    text = annotations_of(obj).get(POOLS_ANNOTATION)
    if not isinstance(text, str):
        return None
    try:
        entries = json.loads(text)
    except ValueError:
        return None
    pools = []
    for entry in sequence(entries):
        entry = mapping(entry)
        selector = {str(k): str(v) for k, v in mapping(entry.get("selector")).items()}
        pools.append(
            NodePool(str(entry.get("name", "")), selector, str(entry.get("config", "")), obj)
        )
    return pools
