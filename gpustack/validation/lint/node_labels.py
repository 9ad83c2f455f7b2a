"""node-label-unsourced: a workload placed on a node label that nothing in the stack sets shows
0 desired pods (k8s-device-plugin #1213: NFD labels `pci-0302_10de`, not `pci-10de`).

Only labels whose publisher belongs to the GPU stack are checked: NFD's
(`feature.node.kubernetes.io/`) and NVIDIA's (`nvidia.com/`). Platform labels (kubernetes.io,
cloud providers) and a user's own labels are assumed to be set by the platform or the user.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from gpustack.findings import Finding
from gpustack.objects import describe
from gpustack.validation.lint._objects import (
    NFD_LABEL_PREFIX,
    NVIDIA_LABEL_PREFIX,
    Objects,
    Pod,
    Rule,
    containers_running,
    finding,
    is_nfd_worker,
    mapping,
    parse_yaml,
    sequence,
)

# NFD's PCI label is `pci-<fields>.present`, the fields joined by '_' (NFD docs, pci source).
_PCI_LABEL = re.compile(r"^pci-([0-9a-f]{4}(?:_[0-9a-f]{4})*)\.present$")
# NFD's default `sources.pci.deviceLabelFields` (NFD customization guide).
_DEFAULT_PCI_FIELDS = 2  # class, vendor
# Labels under nvidia.com/ that GFD never sets: the GPU Operator writes these itself
# (NVIDIA/gpu-operator's controller, v26.7.0: its asset DaemonSets select on them), and
# gpu.present is a manual override.
_NOT_GFD = re.compile(r"^nvidia\.com/(gpu\.deploy\.|gpu\.present$)")
_DEPLOY_LABEL = re.compile(r"^nvidia\.com/gpu\.deploy\.")
# The managers that take GPU DaemonSets off a node through those deploy labels when no operator
# runs: k8s-driver-manager (`driver-manager`, the driver pod's init container) and the MIG manager.
# A stack that runs one registers its GPU nodes with the labels set to "true" (gpustack's node/
# files), which no manifest shows.
_DEPLOY_LABEL_MANAGERS = frozenset({"driver-manager", "nvidia-mig-manager"})


def _rule_labels(objects: Objects) -> tuple[set[str], bool]:
    """Labels NodeFeatureRules set, and whether any rule templates its labels (then any NFD
    label may come out of it)."""
    labels: set[str] = set()
    templated = False
    for rule_object in objects.of_kind("NodeFeatureRule"):
        for rule in sequence(mapping(rule_object.get("spec")).get("rules")):
            rule = mapping(rule)
            templated = templated or bool(rule.get("labelsTemplate"))
            for key in mapping(rule.get("labels")):
                key = str(key)
                # NFD puts unprefixed rule labels into its own namespace.
                labels.add(key if "/" in key else NFD_LABEL_PREFIX + key)
    return labels, templated


def _worker_pci_fields(objects: Objects, pod: Pod) -> int:
    """How many fields the NFD worker's PCI labels carry, from its mounted nfd-worker.conf."""
    for volume in sequence(pod.spec.get("volumes")):
        name = mapping(mapping(volume).get("configMap")).get("name")
        config_map = objects.config_map(pod.namespace, str(name)) if name else None
        text = mapping(config_map.get("data")).get("nfd-worker.conf") if config_map else None
        if not isinstance(text, str):
            continue
        config = mapping(parse_yaml(text)[0])
        fields = mapping(mapping(mapping(config.get("sources")).get("pci"))).get(
            "deviceLabelFields"
        )
        if isinstance(fields, list) and fields:
            return len(fields)
    return _DEFAULT_PCI_FIELDS


class _Sources:
    def __init__(self, objects: Objects) -> None:
        self.rule_labels, self.templated = _rule_labels(objects)
        workers = [pod for pod in objects.pods() if is_nfd_worker(pod)]
        self.pci_fields = {_worker_pci_fields(objects, pod) for pod in workers}
        self.nfd_deployed = bool(workers)
        self.gfd_deployed = any(
            containers_running(pod, "gpu-feature-discovery") for pod in objects.pods()
        )
        self.user_labels = objects.node_labels
        self.deploy_labels_registered = any(
            words[0] in _DEPLOY_LABEL_MANAGERS
            for pod in objects.pods()
            for container in pod.containers
            if (words := pod.command_words(container))
        )

    def sets(self, key: str) -> bool:
        if key in self.rule_labels or key in self.user_labels:
            return True
        if key.startswith(NFD_LABEL_PREFIX):
            if self.templated:
                return True
            if not self.nfd_deployed:
                return False
            pci = _PCI_LABEL.match(key.removeprefix(NFD_LABEL_PREFIX))
            return pci is None or len(pci.group(1).split("_")) in self.pci_fields
        if _DEPLOY_LABEL.match(key):
            return self.deploy_labels_registered
        if key.startswith(NVIDIA_LABEL_PREFIX):
            return self.gfd_deployed and not _NOT_GFD.match(key)
        return True


def _term_satisfiable(term: list[dict[str, Any]], sources: _Sources) -> bool:
    # DoesNotExist and NotIn hold on nodes that lack the label: they need no source.
    return all(
        sources.sets(str(e.get("key")))
        for e in term
        if e.get("operator") in ("In", "Exists", "Gt", "Lt")
    )


def check(objects: Objects) -> Iterator[Finding]:
    sources = _Sources(objects)
    for pod in objects.pods():
        unsourced = [key for key in pod.node_selector() if not sources.sets(key)]
        field = f"{pod.path}.nodeSelector"
        terms = pod.node_selector_terms()
        if not unsourced and terms and not any(_term_satisfiable(t, sources) for t in terms):
            unsourced = sorted(
                {str(e.get("key")) for t in terms for e in t if not sources.sets(str(e.get("key")))}
            )
            field = f"{pod.path}.affinity.nodeAffinity"
        if not unsourced:
            continue
        yield finding(
            RULE,
            pod.owner,
            f"{describe(pod.owner)} is placed on node label(s) {', '.join(unsourced)} that nothing "
            "here sets, so it shows 0 desired pods; add the source (a NodeFeatureRule for "
            f"{NFD_LABEL_PREFIX}* labels, GPU Feature Discovery for {NVIDIA_LABEL_PREFIX}* labels) "
            "or select on a label that is set (gpustack uses "
            f"{NFD_LABEL_PREFIX}pci-10de.present with a NodeFeatureRule)",
            field,
        )


RULE = Rule(
    "node-label-unsourced",
    "error",
    "A nodeSelector or required node affinity uses an NFD (`feature.node.kubernetes.io/`) or "
    "NVIDIA (`nvidia.com/`) label that no NodeFeatureRule, NFD worker config, GPU Feature "
    "Discovery or config `nodes.selector` sets (e.g. `pci-10de.present` with NFD's default "
    "`pci-<class>_<vendor>` labels).",
    "Add the source (a NodeFeatureRule, GFD, or the label in `nodes.selector` when your node "
    "pools set it) or select on a label that is set.",
    check,
)
