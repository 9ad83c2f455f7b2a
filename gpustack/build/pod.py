"""The pieces of a pod spec that every component writes: volumes and the mounts that go with
them, environment variables, exec probes and lifecycle hooks.

Plain functions of plain values (no Stack): each returns the dict Kubernetes reads, its keys in
the order the rendered manifests show them (`emit` keeps a dict's order), so that a component
says what it mounts, sets or probes and not how a PodSpec spells it. Field names and meanings
are Kubernetes' core/v1 API (PodSpec, Container, Volume, VolumeMount, EnvVar, Probe,
Lifecycle).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any


def host_path_volume(name: str, path: str, kind: str | None = None) -> dict[str, Any]:
    """A hostPath volume; `kind` is its `type` (Directory, DirectoryOrCreate, File...), checked
    by the kubelet before the pod starts, none for no check."""
    source: dict[str, Any] = {"path": path}
    if kind:
        source["type"] = kind
    return {"name": name, "hostPath": source}


def empty_dir(name: str) -> dict[str, Any]:
    """An emptyDir volume: new with each pod, gone with it."""
    return {"name": name, "emptyDir": {}}


def config_map_volume(name: str, config_map: str) -> dict[str, Any]:
    return {"name": name, "configMap": {"name": config_map}}


def mount(
    name: str, path: str, *, read_only: bool = False, propagation: str | None = None
) -> dict[str, Any]:
    """A container's volumeMount of volume `name` at `path`. `propagation`: HostToContainer
    for a host folder something else mounts into later (the driver's root), Bidirectional for
    one this container mounts into for the host."""
    found: dict[str, Any] = {"name": name, "mountPath": path}
    if read_only:
        found["readOnly"] = True
    if propagation:
        found["mountPropagation"] = propagation
    return found


@dataclass(frozen=True)
class HostPath:
    """A host path and where a container sees it: the pod's volume and the container's mount
    built from one value, so their names agree."""

    name: str
    path: str
    mount_path: str
    kind: str | None = None
    read_only: bool = False
    propagation: str | None = None

    def volume(self) -> dict[str, Any]:
        return host_path_volume(self.name, self.path, self.kind)

    def mount(self) -> dict[str, Any]:
        return mount(
            self.name, self.mount_path, read_only=self.read_only, propagation=self.propagation
        )


def host_paths(
    paths: Iterable[HostPath],
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The volumes and the mounts of `paths`, in their order."""
    listed = list(paths)
    return [each.volume() for each in listed], [each.mount() for each in listed]


def env(name: str, value: str) -> dict[str, Any]:
    return {"name": name, "value": value}


def field_env(name: str, path: str) -> dict[str, Any]:
    """An environment variable the kubelet fills from the pod's own fields (the downward API:
    `spec.nodeName`, `metadata.namespace`...)."""
    return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}}


def flag(value: bool) -> str:
    """A boolean as the `true`/`false` string NVIDIA's images read from their environment."""
    return "true" if value else "false"


def shell(script: str) -> dict[str, Any]:
    """An exec action that runs `script` with the image's `sh`."""
    return {"exec": {"command": ["sh", "-c", script]}}


def exec_probe(
    script: str,
    *,
    initial_delay: int | None = None,
    period: int,
    timeout: int | None = None,
    failure_threshold: int | None = None,
) -> dict[str, Any]:
    """A startup, readiness or liveness probe that passes while `script` exits 0. A field
    left None keeps Kubernetes' default (no initial delay, a timeout of 1 s, 3 failures)."""
    probe = shell(script)
    for key, value in (
        ("initialDelaySeconds", initial_delay),
        ("periodSeconds", period),
        ("timeoutSeconds", timeout),
        ("failureThreshold", failure_threshold),
    ):
        if value is not None:
            probe[key] = value
    return probe


def pre_stop(script: str) -> dict[str, Any]:
    """A container's `lifecycle` with a preStop hook: the kubelet runs `script` before it
    signals the container, and signals it only once the script has returned (or the pod's
    grace period is over)."""
    return {"preStop": shell(script)}
