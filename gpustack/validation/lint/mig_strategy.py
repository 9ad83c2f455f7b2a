"""mig-strategy-mismatch: GFD labels nodes for the MIG strategy it is told, the device plugin
advertises resources for its own; when they differ, pods select labels for resources the node
does not offer (k8s-device-plugin static gpu-feature-discovery-daemonset-with-mig-*.yaml)."""

from __future__ import annotations

from collections.abc import Iterator

from gpustack.findings import Finding
from gpustack.objects import describe
from gpustack.validation.lint._objects import Objects, Rule, containers_running, finding
from gpustack.validation.lint._pods import mig_strategy


def check(objects: Objects) -> Iterator[Finding]:
    plugins: dict[str, str] = {}
    for pod in objects.pods():
        for container in containers_running(pod, "nvidia-device-plugin"):
            found = mig_strategy(objects, pod, container)
            if found is not None:
                plugins.setdefault(found, describe(pod.owner))
    if not plugins:
        return
    for pod in objects.pods():
        for container in containers_running(pod, "gpu-feature-discovery"):
            found = mig_strategy(objects, pod, container)
            if found is None or found in plugins:
                continue
            others = "; ".join(
                f"{owner} uses {value!r}" for value, owner in sorted(plugins.items())
            )
            yield finding(
                RULE,
                pod.owner,
                f"{describe(pod.owner)} labels nodes for MIG strategy {found!r} but {others}; "
                "set the same strategy on both (gpustack: devicePlugin.migStrategy sets both)",
                f"{pod.path}.containers",
            )


RULE = Rule(
    "mig-strategy-mismatch",
    "error",
    "GPU Feature Discovery runs with a MIG strategy (flag, `MIG_STRATEGY` or config file) other "
    "than the device plugin's.",
    "Give both the same strategy: none, single or mixed.",
    check,
)
