"""The one place for what all objects share: common labels, config hashes, Argo CD sync waves and
Flux stages, and what every pod gets (images pinned by the image lock and pulled from the
registry mirror, pull secrets, resources from the config); objects leave here sorted into apply order.

Apply order is gpustack.objects' rank table; sync waves and Flux stages are cut from the same
table, so they follow apply order.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from gpustack.layout import CANARY_STAGE, SMOKE_TEST_STAGE, STAGE_DEPENDENCIES
from gpustack.objects import (
    RANK,
    annotations_of,
    kind_of,
    labels_of,
    name_of,
    namespace_of,
    rank,
    sort_key,
    text,
)

MANAGED_BY = {"app.kubernetes.io/managed-by": "gpustack"}
# Lint rules an object is exempt from (gpustack.validation.lint), comma-separated.
IGNORE_ANNOTATION = "gpustack.dev/ignore"
CONFIG_HASH = "gpustack.dev/config-hash"
SYNC_WAVE = "argocd.argoproj.io/sync-wave"
SYNC_OPTIONS = "argocd.argoproj.io/sync-options"
HOOK = "argocd.argoproj.io/hook"
HOOK_DELETE_POLICY = "argocd.argoproj.io/hook-delete-policy"
COMPONENT_LABEL = "app.kubernetes.io/component"
_WORKLOADS = {"DaemonSet", "Deployment", "StatefulSet", "Job"}

# Which rollout step an object belongs to (only `canary`; unlabelled: the rest), and which node
# pool a per-pool object serves.
ROLLOUT_LABEL = "gpustack.dev/rollout"
CANARY = "canary"
# Node Feature Discovery and its NodeFeatureRule, where a canary pool is rendered: the canary's
# driver DaemonSet selects its nodes by NFD's labels, so on a first install NFD must run, and
# have labelled the nodes, before the canary is applied, or the canary would schedule no pod,
# be healthy at once and gate nothing.
DISCOVERY = "discovery"
POOL_LABEL = "gpustack.dev/pool"
# The first kind of the smoke test: the ResourceClaimTemplate its Job claims a GPU through
# (gpuAllocation dra), then the Job.
FIRST_CHECK = "ResourceClaimTemplate"


def rollout(obj: dict[str, Any], step: str) -> None:
    """Put `obj` in a rollout step (the `gpustack.dev/rollout` label)."""
    obj["metadata"].setdefault("labels", {})[ROLLOUT_LABEL] = step


def is_canary(obj: dict[str, Any]) -> bool:
    return _rollout_step(obj) == CANARY


def is_discovery(obj: dict[str, Any]) -> bool:
    return _rollout_step(obj) == DISCOVERY


def _rollout_step(obj: dict[str, Any]) -> str | None:
    step = labels_of(obj).get(ROLLOUT_LABEL)
    return step if isinstance(step, str) else None


def sync_wave(obj: dict[str, Any], canary: bool = False) -> int:
    """Argo CD sync wave: a step function of the rank, so waves never contradict apply order.

    Argo CD applies a wave only once every object of the waves before it is healthy (argo-cd
    v3.5.1, gitops-engine/pkg/sync/sync_context.go): the monitors share the workloads' wave, so
    that a driver rollout, healthy only once every node runs the new driver pod, holds back
    nothing but the smoke test, and a monitor whose CRD is missing still lets every other object
    of its wave be applied. With a `canary` node pool, NFD (DISCOVERY) takes wave 0, the
    canary's objects (ROLLOUT_LABEL) wave 1 and everything after them two waves more: the
    canary's driver DaemonSet is applied once NFD runs, and the rest waits until it is healthy,
    every canary node's new driver pod Ready."""
    position = rank(obj)
    if position < RANK["Namespace"]:
        return -2  # CRDs, established before any custom resource that needs them
    if position <= RANK["RuntimeClass"]:
        return -1  # Namespaces, SCCs, quotas, priority and runtime classes the workloads use
    if canary and is_discovery(obj):
        return 0  # NFD, which labels the nodes the canary's driver selects
    if canary and is_canary(obj):
        return 1  # the canary pool's driver DaemonSet and what it needs
    later = 2 if canary else 0
    if position < RANK[FIRST_CHECK]:
        return later  # RBAC, configuration, services, the workloads and their monitors
    return later + 1  # Jobs that check the running stack (PostSync hooks) and the claims they take


def stage(obj: dict[str, Any]) -> str:
    """The Flux stage an object is applied in (its sub-folder of the rendered output, whose
    Kustomization depends on the stage before it)."""
    position = rank(obj)
    if position <= RANK["RuntimeClass"] or is_discovery(obj):
        return "foundation"
    if is_canary(obj):
        return CANARY_STAGE
    if position < RANK["ServiceMonitor"]:
        return "workloads"
    if position < RANK[FIRST_CHECK]:
        return "monitors"  # and kinds not in the rank table
    return SMOKE_TEST_STAGE


def placement(obj: dict[str, Any]) -> tuple[str, str, str, str]:
    """What places an object in the rendered folder and in a sync, beyond its kind and name:
    its Flux stage (a sub-folder), its rollout step (`gpustack.dev/rollout`, which also moves
    every other object's Argo CD wave) and the Argo CD wave and hook it is annotated with. A
    patch must leave all of them as they are (gpustack.build.patching)."""
    labels, annotations = labels_of(obj), annotations_of(obj)
    return (
        stage(obj),
        str(labels.get(ROLLOUT_LABEL)),
        str(annotations.get(SYNC_WAVE)),
        str(annotations.get(HOOK)),
    )


def stage_dependency(folder: str, present: Collection[str]) -> str | None:
    """The stage `folder`'s Kustomization depends on among the `present` (non-empty) ones: its
    own, or the nearest one that one depends on."""
    dependency = STAGE_DEPENDENCIES[folder]
    while dependency is not None and dependency not in present:
        dependency = STAGE_DEPENDENCIES[dependency]
    return dependency


def decorate(
    objects: list[dict[str, Any]],
    sync_waves: bool = False,
    platform_runtime_classes: Collection[str] = (),
    *,
    registry: str | None = None,
    pull_secrets: Sequence[str] = (),
    resources: Mapping[str, Mapping[str, Mapping[str, str]]] | None = None,
    digests: Mapping[str, str] | None = None,
) -> list[dict[str, Any]]:
    """Label every object, hash the ConfigMaps each workload mounts, and sort into apply order;
    with `sync_waves`, annotate the Argo CD sync wave and sync options of each object. A workload
    naming one of `platform_runtime_classes` (which the platform creates, so the rendering holds
    no such object) is marked exempt from the runtime-class-missing lint rule, so that the
    rendered folder validates on its own.

    Every pod the workloads run pulls its images pinned by `digests` (the image lock) from
    `registry` (when given) with `pull_secrets`, and the main container of a workload whose component label is a key of
    `resources` gets those requirements."""
    config_maps = {
        (namespace_of(obj), name_of(obj)): obj for obj in objects if kind_of(obj) == "ConfigMap"
    }
    workloads = [obj for obj in objects if kind_of(obj) in _WORKLOADS]
    for obj in objects:
        metadata = obj.setdefault("metadata", {})
        metadata["labels"] = {**metadata.get("labels", {}), **MANAGED_BY}
    for workload in workloads:
        template = workload["spec"]["template"]
        _pod_settings(template, registry, pull_secrets, resources or {}, digests or {})
        _hash_config(workload, config_maps)
        if template["spec"].get("runtimeClassName") in platform_runtime_classes:
            ignore(workload, "runtime-class-missing")
    if sync_waves:
        canary = any(is_canary(obj) for obj in objects)
        for obj in objects:
            _annotate_sync(obj, canary)
    return sorted(objects, key=sort_key)


def mirrored(image: str, registry: str) -> str:
    """`image` pulled from `registry`: its registry host replaced, repository path, tag and digest
    kept. A short name (no registry host) is left alone: the node's runtime resolves it, and on
    GKE such images are preloaded on the node (the driver installers)."""
    host, slash, rest = image.partition("/")
    if not slash or not ("." in host or ":" in host or host == "localhost"):
        return image
    return f"{registry}/{rest}"


def pulled(image: str, registry: str | None, digests: Mapping[str, str]) -> str:
    """`image` as the nodes pull it: pinned by its digest in the image lock (when the lock
    names it and the reference carries no digest of its own), then from `registry`."""
    if "@" not in image and image in digests:
        image = f"{image}@{digests[image]}"
    return mirrored(image, registry) if registry else image


def image_sources(
    objects: list[dict[str, Any]], registry: str | None, digests: Mapping[str, str]
) -> dict[str, set[str]]:
    """Each image the workloads pull, as decorate() rewrites it, mapped to the references the
    components wrote (what a mirror copies it from; more than one when the mirror gives two
    images one name): call before decorate()."""
    sources: dict[str, set[str]] = {}
    for workload in objects:
        if kind_of(workload) in _WORKLOADS:
            spec = workload["spec"]["template"]["spec"]
            for key in ("initContainers", "containers"):
                for container in spec.get(key, []):
                    if container.get("imagePullPolicy") != "Never":
                        image = container["image"]
                        sources.setdefault(pulled(image, registry, digests), set()).add(image)
    return sources


def pin_patched(objects: list[dict[str, Any]], digests: Mapping[str, str]) -> dict[str, str]:
    """Pin by the image lock the images that patches wrote: decorate() pinned the components'
    before the patches applied, and an image a patch names is in the lock as the patch writes
    it (`gpustack images` lists it so). Returns each pinned reference mapped to the written one
    (`gpustack images`' sources). Tolerant of what a patch left malformed: validation names it."""
    written: dict[str, str] = {}
    for workload in objects:
        spec = workload.get("spec")
        template = spec.get("template") if isinstance(spec, dict) else None
        pod = template.get("spec") if isinstance(template, dict) else None
        if kind_of(workload) not in _WORKLOADS or not isinstance(pod, dict):
            continue
        for key in ("initContainers", "containers"):
            containers = pod.get(key)
            for container in containers if isinstance(containers, list) else []:
                image = container.get("image") if isinstance(container, dict) else None
                if (
                    isinstance(image, str)
                    and container.get("imagePullPolicy") != "Never"
                    and "@" not in image
                    and image in digests
                ):
                    container["image"] = pulled(image, None, digests)
                    written[container["image"]] = image
    return written


def _pod_settings(
    template: dict[str, Any],
    registry: str | None,
    pull_secrets: Sequence[str],
    resources: Mapping[str, Mapping[str, Mapping[str, str]]],
    digests: Mapping[str, str],
) -> None:
    spec = template["spec"]
    if registry or digests:
        for key in ("initContainers", "containers"):
            for container in spec.get(key, []):
                # Never: the image is on the node already, under its own name.
                if container.get("imagePullPolicy") != "Never":
                    container["image"] = pulled(container["image"], registry, digests)
    if pull_secrets:
        spec["imagePullSecrets"] = [{"name": name} for name in pull_secrets]
    component = text(labels_of(template), COMPONENT_LABEL)
    if component in resources and spec.get("containers"):
        spec["containers"][0]["resources"] = {
            field: dict(values) for field, values in resources[component].items()
        }


def ignore(obj: dict[str, Any], rule: str) -> None:
    """Exempt `obj` from a lint rule (the `gpustack.dev/ignore` annotation)."""
    annotations = obj["metadata"].setdefault("annotations", {})
    rules = [r for r in annotations.get(IGNORE_ANNOTATION, "").split(",") if r]
    annotations[IGNORE_ANNOTATION] = ",".join(dict.fromkeys([*rules, rule]))


def _annotate_sync(obj: dict[str, Any], canary: bool) -> None:
    wave = sync_wave(obj, canary)
    annotations = obj["metadata"].setdefault("annotations", {})
    annotations[SYNC_WAVE] = str(wave)
    if kind_of(obj) == "Job":
        # A PostSync hook runs once every object of the sync is healthy, and a failed hook fails
        # the sync. BeforeHookCreation deletes the previous run so that every sync runs it again;
        # HookSucceeded deletes a passed one, a failed one stays to be read (argo-cd
        # user-guide/resource_hooks).
        annotations[HOOK] = "PostSync"
        annotations[HOOK_DELETE_POLICY] = "BeforeHookCreation,HookSucceeded"
    elif kind_of(obj) == "CustomResourceDefinition":
        # Client-side apply stores the whole object in an annotation limited to 256 KiB, which
        # large CRDs exceed (argo-cd sync-options docs, ServerSideApply).
        annotations[SYNC_OPTIONS] = "ServerSideApply=true"
    elif stage(obj) == "monitors":
        # A monitor's CRD comes from the monitoring stack; if it is not installed yet, the dry run
        # must not block the GPU stack (argo-cd sync-options docs, SkipDryRunOnMissingResource).
        annotations[SYNC_OPTIONS] = "SkipDryRunOnMissingResource=true"


def rehash(objects: list[dict[str, Any]]) -> None:
    """Hash again the ConfigMaps each workload mounts, after a patch changed objects: a patched
    ConfigMap rolls the pods that mount it, as any config change does."""
    config_maps = {
        (namespace_of(obj), name_of(obj)): obj for obj in objects if kind_of(obj) == "ConfigMap"
    }
    for workload in objects:
        if kind_of(workload) in _WORKLOADS:
            # A patched object is read with care: gpustack.build.patching refuses a workload without
            # its pod template, and this step must not fail on what a patch left.
            template = _mapping(_mapping(workload.get("spec")).get("template"))
            annotations_of(template).pop(CONFIG_HASH, None)
            _hash_config(workload, config_maps)


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _hash_config(workload: dict[str, Any], config_maps: dict[tuple[str, str], Any]) -> None:
    """Annotate the pod template with a hash of the ConfigMaps it mounts, so a config change
    rolls the pods (the helm chart's checksum/config, done for every workload)."""
    namespace = namespace_of(workload)
    template = _mapping(_mapping(workload.get("spec")).get("template"))
    volumes = _mapping(template.get("spec")).get("volumes")
    names = sorted(
        str(_mapping(volume["configMap"]).get("name"))
        for volume in (volumes if isinstance(volumes, list) else [])
        if isinstance(volume, dict) and "configMap" in volume
    )
    mounted = [
        config_maps[(namespace, name)].get("data", {})
        for name in names
        if (namespace, name) in config_maps
    ]
    if not mounted:
        return
    digest = hashlib.sha256(
        json.dumps(mounted, sort_keys=True, separators=(",", ":")).encode()
    ).hexdigest()
    metadata = template.setdefault("metadata", {})
    if not isinstance(metadata, dict) or not isinstance(
        metadata.setdefault("annotations", {}), dict
    ):
        return  # a patch's own mistake, which validation reports at the patch
    metadata["annotations"][CONFIG_HASH] = digest[:16]
