"""api-version-not-served: an object whose apiVersion the target Kubernetes version does not serve
is refused by the API server (e.g. policy/v1beta1 PodSecurityPolicy after 1.25).

Built-in API groups are those kubernetes-validate has schemas for in any version it ships; a
(group, version, kind) missing from the target version's schemas is not served there. Kinds
defined by a CustomResourceDefinition among the objects are checked against its served versions.
Other custom kinds are left to schema validation.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator

from gpustack.findings import Finding
from gpustack.objects import describe
from gpustack.validation.kubernetes_schemas import definitions, kubernetes_schemas_root
from gpustack.validation.lint._objects import Objects, Rule, finding, mapping, sequence

GroupVersionKind = tuple[str, str, str]


@functools.cache
def _schema_versions() -> dict[str, str]:
    """Kubernetes minor version ('1.31') -> schema folder, for every version the package ships."""
    folders = {}
    root = kubernetes_schemas_root()
    for folder in root.iterdir():
        name = folder.name
        if name.startswith("v") and name.endswith("-local-strict"):
            major, minor = name[1:].split("-")[0].split(".")[:2]
            folders[f"{major}.{minor}"] = name
    return folders


@functools.cache
def served(version: str) -> frozenset[GroupVersionKind]:
    parsed = definitions(_schema_versions()[version])
    found = set()
    for schema in parsed.get("definitions", parsed.get("$defs", {})).values():
        for gvk in schema.get("x-kubernetes-group-version-kind", []):
            found.add((gvk["group"], gvk["version"], gvk["kind"]))
    return frozenset(found)


# built_in_groups() of the kubernetes-validate schemas the project is tested with, and the size of
# each `_definitions.json` it was read from: while the installed files are these, the groups are
# known without parsing all of them (about 20 MB of JSON) on every run. A test compares both with
# the installed files; other files (another kubernetes-validate) are read.
SHIPPED_GROUPS = frozenset(
    {
        "",
        "admission.k8s.io",
        "admissionregistration.k8s.io",
        "apiextensions.k8s.io",
        "apiregistration.k8s.io",
        "apps",
        "authentication.k8s.io",
        "authorization.k8s.io",
        "autoscaling",
        "batch",
        "certificates.k8s.io",
        "coordination.k8s.io",
        "discovery.k8s.io",
        "events.k8s.io",
        "extensions",
        "flowcontrol.apiserver.k8s.io",
        "imagepolicy.k8s.io",
        "internal.apiserver.k8s.io",
        "lifecycle.k8s.io",
        "networking.k8s.io",
        "node.k8s.io",
        "policy",
        "rbac.authorization.k8s.io",
        "resource.k8s.io",
        "scheduling.k8s.io",
        "storage.k8s.io",
        "storagemigration.k8s.io",
    }
)
SHIPPED_SIZES = {
    "v1.25.0-local-strict": 1000395,
    "v1.26.0-local-strict": 1042600,
    "v1.27.0-local-strict": 1078923,
    "v1.28.0-local-strict": 1148824,
    "v1.29.0-local-strict": 1166231,
    "v1.30.0-local-strict": 1267624,
    "v1.31.0-local-strict": 1298098,
    "v1.32.0-local-strict": 1311762,
    "v1.33.0-local-strict": 1455047,
    "v1.34.0-local-strict": 1528732,
    "v1.35.0-local-strict": 1535915,
    "v1.36.0-local-strict": 1629563,
    "v1.37.0-local-strict": 1811586,
}


def definition_sizes() -> dict[str, int]:
    """The size of each installed version's `_definitions.json`, by schema folder."""
    root = kubernetes_schemas_root()
    return {
        folder: (root / folder / "_definitions.json").stat().st_size
        for folder in _schema_versions().values()
    }


@functools.cache
def built_in_groups() -> frozenset[str]:
    if definition_sizes() == SHIPPED_SIZES:
        return SHIPPED_GROUPS
    return read_built_in_groups()


def read_built_in_groups() -> frozenset[str]:
    """The API groups of every installed version's schemas, read from the files."""
    return frozenset(group for version in _schema_versions() for group, _, _ in served(version))


def _crd_versions(objects: Objects) -> dict[tuple[str, str], set[str]]:
    versions: dict[tuple[str, str], set[str]] = {}
    for crd in objects.of_kind("CustomResourceDefinition"):
        spec = mapping(crd.get("spec"))
        key = (str(spec.get("group")), str(mapping(spec.get("names")).get("kind")))
        versions.setdefault(key, set()).update(
            str(v.get("name"))
            for v in map(mapping, sequence(spec.get("versions")))
            if v.get("served") is not False
        )
    return versions


def _key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def check(objects: Objects) -> Iterator[Finding]:
    crds = _crd_versions(objects)
    target = objects.kubernetes_version
    supported = _schema_versions()
    if target and target not in supported:
        # Beyond the newest schemas we know, use the newest; before the oldest, say nothing.
        newer = [v for v in supported if _key(v) <= _key(target)]
        target = max(newer, key=_key) if newer else None
    for obj in objects.objects:
        api_version, kind = str(obj.get("apiVersion", "")), str(obj.get("kind", ""))
        if not api_version or not kind:
            continue  # schema validation reports objects without them
        group, _, version = api_version.rpartition("/")
        if (group, kind) in crds:
            if version not in crds[(group, kind)]:
                served_by_crd = ", ".join(sorted(crds[(group, kind)]))
                yield finding(
                    RULE,
                    obj,
                    f"{describe(obj)} uses {api_version}, but its CustomResourceDefinition serves "
                    f"{group}/{{{served_by_crd}}}; change apiVersion to a served version",
                    "apiVersion",
                )
            continue
        if target is None or group not in built_in_groups():
            continue
        available = served(target)
        if (group, version, kind) in available:
            continue
        instead = sorted(f"{g}/{v}" if g else v for g, v, k in available if k == kind)
        hint = f"use {', '.join(instead)}" if instead else "this kind no longer exists; remove it"
        yield finding(
            RULE,
            obj,
            f"{describe(obj)} uses {api_version}, which Kubernetes {objects.kubernetes_version} "
            f"does not serve; {hint}",
            "apiVersion",
        )


RULE = Rule(
    "api-version-not-served",
    "error",
    "An object's apiVersion/kind is not served by the target Kubernetes version "
    "(the config's `platform.kubernetesVersion`, or the version given to `gpustack validate`), or "
    "by the CustomResourceDefinition among the objects that defines it.",
    "Move to the served apiVersion named in the message.",
    check,
)
