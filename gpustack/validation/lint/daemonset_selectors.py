"""daemonset-selector-overlap: two DaemonSets in one namespace whose selectors match each other's
pods fight over them (each adopts or deletes the other's pods); Argo CD shows endless drift
(k8s-device-plugin #982)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from gpustack.findings import Finding
from gpustack.objects import describe, identity, kind_of, namespace_of
from gpustack.validation.lint._objects import Budget, Labelled, Objects, Pod, Rule, finding, mapping


def check(objects: Objects) -> Iterator[Finding]:
    """Each DaemonSet whose selector and an earlier one's select each other's pods is reported
    once, naming the first such and counting the others. The pods a selector matches are looked up in a label index
    (Labelled), one per namespace, so the work grows with the DaemonSets, not with their pairs."""
    # A DaemonSet without a selector is invalid; schema validation reports it. The same object
    # listed twice (two files, two renders) is still one DaemonSet.
    by_namespace: dict[str, dict[object, tuple[Pod, dict[str, Any]]]] = {}
    for pod in objects.pods():
        selector = mapping(mapping(pod.owner.get("spec")).get("selector"))
        if kind_of(pod.owner) == "DaemonSet" and selector:
            same = by_namespace.setdefault(namespace_of(pod.owner), {})
            same.setdefault(identity(pod.owner), (pod, selector))
    budget = Budget("DaemonSets' selectors and pod labels")
    # By the pod's place among the object set's pods: the pod and those before it it overlaps.
    found: dict[int, tuple[Pod, list[Pod]]] = {}
    place = {id(pod.owner): number for number, pod in enumerate(objects.pods())}
    for daemonsets in by_namespace.values():
        listed = list(daemonsets.values())
        index = Labelled([pod.labels for pod, _ in listed], budget)
        earlier: dict[int, set[int]] = {}
        for number, (_, selector) in enumerate(listed):
            for matched in index.matching(selector):
                if matched != number:
                    earlier.setdefault(max(number, matched), set()).add(min(number, matched))
        for later, numbers in earlier.items():
            pod = listed[later][0]
            found[place[id(pod.owner)]] = (pod, [listed[other][0] for other in sorted(numbers)])
    for number in sorted(found):
        pod, others = found[number]
        more = f" (and {len(others) - 1} more)" if len(others) > 1 else ""
        yield finding(
            RULE,
            pod.owner,
            f"{describe(pod.owner)} and {describe(others[0].owner)}{more} select each other's "
            "pods; give each DaemonSet a selector label of its own "
            "(e.g. app.kubernetes.io/name: <daemonset name>)",
            "spec.selector",
        )


RULE = Rule(
    "daemonset-selector-overlap",
    "error",
    "Two DaemonSets in one namespace have selectors that match each other's pod templates.",
    "Give each DaemonSet a unique selector label, such as `app.kubernetes.io/name: <name>`.",
    check,
)
