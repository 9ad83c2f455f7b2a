"""daemonset-selector-overlap: two DaemonSets in one namespace whose selectors match each other's
pods fight over them (each adopts or deletes the other's pods); Argo CD shows endless drift
(k8s-device-plugin #982)."""

from __future__ import annotations

from collections.abc import Iterator

from gpustack.findings import Finding
from gpustack.lint._objects import Objects, Rule, finding, labels_match, mapping
from gpustack.objects import describe, identity, namespace_of


def check(objects: Objects) -> Iterator[Finding]:
    # A DaemonSet without a selector is invalid; schema validation reports it.
    daemonsets = [
        (pod, selector)
        for pod in objects.pods()
        if pod.owner.get("kind") == "DaemonSet"
        and (selector := mapping(mapping(pod.owner.get("spec")).get("selector")))
    ]
    for index, (pod, selector) in enumerate(daemonsets):
        for other, other_selector in daemonsets[:index]:
            # The same object listed twice (two files, two renders) is still one DaemonSet.
            if namespace_of(other.owner) != namespace_of(pod.owner) or identity(
                other.owner
            ) == identity(pod.owner):
                continue
            if labels_match(selector, other.labels) or labels_match(other_selector, pod.labels):
                yield finding(
                    RULE,
                    pod.owner,
                    f"{describe(pod.owner)} and {describe(other.owner)} select each other's pods; "
                    "give each DaemonSet a selector label of its own "
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
