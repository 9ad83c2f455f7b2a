"""api-version-not-served: an object whose apiVersion the target Kubernetes version does not serve
is refused by the API server (e.g. policy/v1beta1 PodSecurityPolicy after 1.25).

Built-in API groups are those kubernetes-validate has schemas for in any version it ships; a
(group, version, kind) missing from the target version's schemas is not served there. Kinds
defined by a CustomResourceDefinition among the objects are checked against its served versions.
Other custom kinds are left to schema validation.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator

from gpustack.findings import Finding
from gpustack.kubernetes_schemas import kubernetes_schemas_root
from gpustack.lint._objects import Objects, Rule, finding, mapping, sequence
from gpustack.objects import describe

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
    folder = _schema_versions()[version]
    path = kubernetes_schemas_root() / folder / "_definitions.json"
    definitions = json.loads(path.read_text(encoding="utf-8"))
    found = set()
    for schema in definitions.get("definitions", definitions.get("$defs", {})).values():
        for gvk in schema.get("x-kubernetes-group-version-kind", []):
            found.add((gvk["group"], gvk["version"], gvk["kind"]))
    return frozenset(found)


@functools.cache
def built_in_groups() -> frozenset[str]:
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
