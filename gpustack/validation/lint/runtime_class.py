"""runtime-class-missing: a pod naming a RuntimeClass that does not exist is rejected at
admission, so its DaemonSet never creates a pod (RKE2 needs RuntimeClass `nvidia`)."""

from __future__ import annotations

from collections.abc import Iterator

from gpustack.findings import Finding
from gpustack.objects import describe
from gpustack.validation.lint._objects import Objects, Rule, finding


def check(objects: Objects) -> Iterator[Finding]:
    defined = sorted(
        str((rc.get("metadata") or {}).get("name")) for rc in objects.of_kind("RuntimeClass")
    )
    for pod in objects.pods():
        name = pod.spec.get("runtimeClassName")
        if not isinstance(name, str) or name in defined:
            continue
        known = f" (defined here: {', '.join(defined)})" if defined else ""
        yield finding(
            RULE,
            pod.owner,
            f"{describe(pod.owner)} uses runtimeClassName {name!r} but no RuntimeClass {name!r} is "
            f"part of these manifests{known}; add it (gpustack renders it with "
            "runtimeClass.enabled) or, if the cluster already provides it, annotate the workload "
            "gpustack.dev/ignore: runtime-class-missing",
            f"{pod.path}.runtimeClassName",
        )


RULE = Rule(
    "runtime-class-missing",
    "error",
    "A pod's `runtimeClassName` names a RuntimeClass that is not among the manifests.",
    "Add the RuntimeClass (handler `nvidia`), fix the name, or suppress the rule on the workload "
    "when the platform provides the class.",
    check,
)
