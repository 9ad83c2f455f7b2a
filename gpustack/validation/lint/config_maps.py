"""config-map-missing: a pod that mounts or reads a ConfigMap that does not exist (or a key it
does not hold) stays in ContainerCreating / CreateContainerConfigError."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from gpustack.findings import Finding
from gpustack.objects import describe
from gpustack.validation.lint._objects import Objects, Pod, Rule, finding, mapping, sequence


def references(pod: Pod) -> Iterator[tuple[str, list[str], str]]:
    """(ConfigMap name, keys it must hold, field path) for every required reference."""
    for index, volume in enumerate(map(mapping, sequence(pod.spec.get("volumes")))):
        sources = [(mapping(volume.get("configMap")), f"{pod.path}.volumes.{index}.configMap")]
        projected = sequence(mapping(volume.get("projected")).get("sources"))
        sources += [
            (mapping(mapping(source).get("configMap")), f"{pod.path}.volumes.{index}.projected")
            for source in projected
        ]
        for source, field in sources:
            if source.get("name") and source.get("optional") is not True:
                keys = [
                    str(item.get("key")) for item in map(mapping, sequence(source.get("items")))
                ]
                yield str(source["name"]), keys, field
    for container in pod.containers:
        for env_from in map(mapping, sequence(container.get("envFrom"))):
            ref = mapping(env_from.get("configMapRef"))
            if ref.get("name") and ref.get("optional") is not True:
                yield str(ref["name"]), [], f"{pod.path}.containers.envFrom"
        for env in map(mapping, sequence(container.get("env"))):
            ref = mapping(mapping(env.get("valueFrom")).get("configMapKeyRef"))
            if ref.get("name") and ref.get("optional") is not True:
                yield str(ref["name"]), [str(ref.get("key"))], f"{pod.path}.containers.env"


# ConfigMaps Kubernetes itself keeps in every namespace: kube-controller-manager's
# root-ca-cert-publisher writes `kube-root-ca.crt` (key `ca.crt`, GA in 1.21), which the kubelet's
# own kube-api-access volumes project (kubernetes.io, "Managing Service Accounts").
PLATFORM_CONFIG_MAPS = {"kube-root-ca.crt": {"ca.crt"}}


def _keys(config_map: dict[str, Any]) -> set[str]:
    return {str(k) for section in ("data", "binaryData") for k in mapping(config_map.get(section))}


def check(objects: Objects) -> Iterator[Finding]:
    for pod in objects.pods():
        for name, keys, field in references(pod):
            config_map = objects.config_map(pod.namespace, name)
            platform_keys = PLATFORM_CONFIG_MAPS.get(name)
            if config_map is None and platform_keys is not None and set(keys) <= platform_keys:
                continue
            if config_map is None:
                yield finding(
                    RULE,
                    pod.owner,
                    f"{describe(pod.owner)} needs ConfigMap {name!r}, which is not among these "
                    f"manifests in namespace {pod.namespace or '(default)'}; add it, fix the name, "
                    "or mark the reference optional: true",
                    field,
                )
                continue
            missing = [key for key in keys if key not in _keys(config_map)]
            if missing:
                yield finding(
                    RULE,
                    pod.owner,
                    f"{describe(pod.owner)} reads key(s) {', '.join(missing)} of ConfigMap "
                    f"{name!r}, which holds {', '.join(sorted(_keys(config_map))) or 'nothing'}; "
                    "fix the key or add it to the ConfigMap",
                    field,
                )


RULE = Rule(
    "config-map-missing",
    "error",
    "A pod mounts or reads a ConfigMap (or a key of one) that is not among the manifests.",
    "Add the ConfigMap, fix the name or key, or mark the reference `optional: true`.",
    check,
)
