"""The pipeline: Stack -> component objects -> decorated objects -> files (path -> bytes).

Pure: nothing here reads or writes the disk. `gpustack.write.folders` writes what `files` returns.
"""

from __future__ import annotations

import pickle
import shlex
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Any

from gpustack import emit
from gpustack.build import config_warnings, gitops_objects, node_files, patching
from gpustack.build.components import build_all, driver
from gpustack.build.decorate import decorate, image_sources, pin_patched, placement, rehash, stage
from gpustack.build.workload import deploy_node_labels
from gpustack.errors import Location, UserError
from gpustack.findings import Finding
from gpustack.layout import (
    CLUSTER_DIR,
    CRDS_DIR,
    HEADER,
    KUBERNETES_VERSION,
    KUSTOMIZATION,
    NODE_DIR,
    OVERRIDES_ANNOTATION,
)
from gpustack.objects import Identity, file_name, identity, kind_of
from gpustack.resolve.stack import Stack


@dataclass
class Rendering:
    """One cluster's output: Kubernetes objects in apply order, plus host-side node files.

    With Flux (`staged`), the objects go to one sub-folder per stage (decorate.stage) so that a
    Kustomization per stage can depend on the previous one; `gitops_objects` (the Application or
    the Flux Kustomizations) go to `gitops/`, outside the kustomization they point at.
    """

    name: str
    objects: list[dict[str, Any]]
    node_files: dict[str, str] = field(default_factory=dict)
    # Warnings the config shows rather than the objects (config_warnings), which join the lint
    # findings (gpustack.fleet.clusters.check_all).
    findings: list[Finding] = field(default_factory=list)
    source: str = ""
    kubernetes_version: str = ""
    staged: bool = False
    gitops_objects: list[dict[str, Any]] = field(default_factory=list)
    application_set: dict[str, Any] | None = None
    # What the config says about the GPU nodes, for the lint rules (lint.run).
    taints: list[dict[str, str]] = field(default_factory=list)
    node_labels: dict[str, str] = field(default_factory=dict)
    # The entitlement PEM's permission bits: files carrying the certificate get no more than these.
    secret_file_mode: int | None = None
    # The setting and path template of the rendered folder the GitOps objects point at (in the
    # repository), e.g. ("gitops.argocd.path", "out/{name}"); None without them or with a plugin.
    gitops_path: tuple[str, str] | None = None
    # The objects the config's patches changed, each with where those patches are written: a
    # finding on such an object names them (fleet.check_all).
    patched: dict[Identity, list[str]] = field(default_factory=dict)
    namespace: str = ""  # the stack's
    # The `--set` options it was rendered with (Stack.overrides), recorded in kustomization.yaml.
    overrides: tuple[str, ...] = ()
    # Each image the pods pull that decorate rewrote (pinned by the image lock, mirrored), mapped
    # to the reference the components wrote; the lock file beside the config, and whether the
    # config asks for every image by digest (images.requireDigests): gpustack.fleet.cluster_images reads them.
    image_sources: dict[str, str] = field(default_factory=dict)
    lock_file: Path | None = None
    require_digests: bool = False

    @cached_property
    def content_keys(self) -> list[bytes]:
        """Each object pickled (see PICKLE): equal keys mean equal objects, so what a fleet's
        clusters share is emitted, validated and linted once. Made once per rendering: its
        objects are not changed after render()."""
        return [pickle.dumps(obj, PICKLE) for obj in self.objects]


def render(stack: Stack) -> Rendering:
    tool = stack.config.gitops.tool
    images = stack.config.images
    built = build_all(stack)
    digests = stack.image_digests
    # What the components wrote for each image decorate rewrites (`gpustack images`' sources).
    sources = _image_sources(stack, built) if images.registry or digests else {}
    objects = decorate(
        built,
        sync_waves=tool == "argocd",
        platform_runtime_classes=stack.facts.runtime.providedRuntimeClasses,
        registry=images.registry,
        pull_secrets=images.pullSecrets,
        resources=stack.component_resources,
        digests=digests,
    )
    # Patches apply to the decorated objects, which are what the user reads in the rendered
    # folder and in `diff`: a patch's target and paths are those of the files. The config hashes
    # are then made again, so a patched ConfigMap still rolls the pods that mount it.
    # A patch to what the driver containers install changes their DRIVER_CONFIG_DIGEST too, or
    # the driver pods, finding the old digest, would keep the driver loaded as it was.
    installs = driver.installs(objects) if stack.patches else {}
    patched = patching.apply(objects, stack.patches, placement)
    if patched:
        rehash(objects)
        # An image a patch wrote is pinned too, as the lock names it (before the driver's
        # digest is made again: a driver image pinned anew is a driver to install).
        sources.update(pin_patched(objects, digests))
        driver.redigest(objects, installs)
    application_set = gitops_objects.application_set(stack)
    return Rendering(
        stack.name,
        objects,
        node_files.build(stack),
        config_warnings.findings(stack),
        source=stack.source,
        kubernetes_version=stack.config.platform.kubernetesVersion,
        staged=tool == "flux",
        gitops_objects=decorate(gitops_objects.cluster_objects(stack, objects)),
        application_set=decorate([application_set])[0] if application_set else None,
        taints=[taint.model_dump(exclude_none=True) for taint in stack.config.nodes.taints],
        node_labels={**stack.config.nodes.selector, **deploy_node_labels(stack)},
        secret_file_mode=stack.entitlement_mode,
        gitops_path=_gitops_path(stack),
        patched=patched,
        namespace=stack.namespace,
        overrides=stack.overrides,
        image_sources=sources,
        lock_file=stack.lock_file,
        require_digests=images.requireDigests,
    )


def _image_sources(stack: Stack, built: list[dict[str, Any]]) -> dict[str, str]:
    """Each image the pods pull, mapped to the one the components wrote; a mirror that gives two
    images one name would run one of them in the other's place."""
    registry = stack.config.images.registry
    found = image_sources(built, registry, stack.image_digests)
    for pulled, sources in sorted(found.items()):
        if len(sources) > 1:
            raise UserError(
                f"the mirror gives {' and '.join(sorted(sources))} one name, {pulled}: the "
                "nodes would run one in the other's place",
                Location(stack.source),
                field="images.registry",
                hint="mirror with the nodes' runtime instead, or name one of the images at a "
                "path of its own, e.g. with smokeTest.image or a patch",
            )
    return {pulled: sources.pop() for pulled, sources in found.items()}


def _gitops_path(stack: Stack) -> tuple[str, str] | None:
    """The setting naming the rendered folder Argo CD or Flux read, and its template."""
    gitops = stack.config.gitops
    if gitops.tool == "argocd" and gitops.argocd is not None and gitops.argocd.plugin is None:
        return "gitops.argocd.path", gitops.argocd.path
    if gitops.tool == "flux" and gitops.flux is not None:
        return "gitops.flux.path", gitops.flux.path
    return None


def files(rendering: Rendering) -> dict[str, bytes]:
    """Every file of `out/<name>/`, keyed by its path relative to that folder."""
    result = _folder(
        rendering.objects,
        rendering.staged,
        rendering.content_keys,
        _annotations(rendering),
        crds_apart=True,
    )
    if rendering.gitops_objects:
        for name, emitted in _folder(rendering.gitops_objects).items():
            result[f"{CLUSTER_DIR}/{name}"] = emitted
    for name, text in sorted(rendering.node_files.items()):
        result[f"{NODE_DIR}/{name}"] = text.encode()
    return dict(sorted(result.items()))


def object_paths(rendering: Rendering) -> dict[Identity, str]:
    """Where files() writes each object, relative to `out/<name>/`."""
    paths = {
        identity(obj): f"{_subfolder(obj, rendering.staged)}/{file_name(obj)}"
        if _subfolder(obj, rendering.staged)
        else file_name(obj)
        for obj in rendering.objects
    }
    for obj in rendering.gitops_objects:
        paths[identity(obj)] = f"{CLUSTER_DIR}/{file_name(obj)}"
    return paths


def application_set_files(application_set: dict[str, Any]) -> dict[str, bytes]:
    """The files of `out/_gitops/`: the fleet's ApplicationSet and a kustomization listing it."""
    return _folder([application_set])


def _folder(
    objects: list[dict[str, Any]],
    staged: bool = False,
    keys: list[bytes] | None = None,
    annotations: dict[str, str] | None = None,
    crds_apart: bool = False,
) -> dict[str, bytes]:
    """One file per object and a kustomization.yaml listing them all in apply order; `staged`
    puts each object in its stage's sub-folder, which gets a kustomization.yaml of its own, and
    `crds_apart` (unstaged) the CRDs in `crds/`, likewise. `keys`: the objects' content keys,
    when already made; `annotations`: the top kustomization.yaml's."""
    result: dict[str, bytes] = {}
    resources: list[str] = []
    stages: dict[str, list[str]] = {}
    if keys is None:
        keys = [pickle.dumps(obj, PICKLE) for obj in objects]
    for key in keys:
        name, object_stage, emitted, crd = _written(key)
        folder = object_stage if staged else CRDS_DIR if crds_apart and crd else None
        if folder is not None:
            stages.setdefault(folder, []).append(name)
            name = f"{folder}/{name}"
        if name in result:
            raise ValueError(f"two objects would be written to {name}")
        result[name] = emitted
        resources.append(name)
    result[KUSTOMIZATION] = _kustomization(resources, annotations)
    for folder, names in stages.items():
        result[f"{folder}/{KUSTOMIZATION}"] = _kustomization(names)
    return result


# Clusters of a fleet share most objects byte for byte: each distinct one is emitted once. The
# cache key is the object pickled (in its own key order, which the YAML keeps): five times faster
# to make than JSON, and equal pickles always mean equal objects.
PICKLE = pickle.HIGHEST_PROTOCOL


def _subfolder(obj: dict[str, Any], staged: bool) -> str | None:
    """The sub-folder of the cluster's folder `obj` is written to (None: the folder itself)."""
    if staged:
        return stage(obj)
    return CRDS_DIR if kind_of(obj) == "CustomResourceDefinition" else None


@lru_cache(maxsize=8192)
def _written(content: bytes) -> tuple[str, str, bytes, bool]:
    """The object's file name, Flux stage, file content, and whether it is a CRD."""
    obj = pickle.loads(content)
    crd = kind_of(obj) == "CustomResourceDefinition"
    return file_name(obj), stage(obj), (HEADER + emit.dump(obj)).encode(), crd


def set_options(assignments: tuple[str, ...]) -> str:
    """The `--set` options as a shell would take them again."""
    return shlex.join(part for assignment in assignments for part in ("--set", assignment))


def _annotations(rendering: Rendering) -> dict[str, str] | None:
    """The cluster folder's kustomization.yaml's own annotations: the Kubernetes version it was
    rendered for, and the `--set` options it was rendered with (a render or a check without
    them would not give the same files)."""
    annotations = {}
    if rendering.kubernetes_version:
        annotations[KUBERNETES_VERSION] = rendering.kubernetes_version
    if rendering.overrides:
        annotations[OVERRIDES_ANNOTATION] = set_options(rendering.overrides)
    return annotations or None


def _kustomization(resources: list[str], annotations: dict[str, str] | None = None) -> bytes:
    kustomization: dict[str, Any] = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
    }
    if annotations:
        # The kustomization's own metadata (kustomize api/types Kustomization.MetaData): read by
        # gpustack, never put on the objects (that is commonAnnotations).
        kustomization["metadata"] = {"annotations": dict(annotations)}
    kustomization["resources"] = resources
    return _written(pickle.dumps(kustomization, PICKLE))[2]


def stream(renderings: list[Rendering]) -> str:
    """All objects as one multi-document YAML stream (`render --stdout`)."""
    return emit.dump_all([obj for rendering in renderings for obj in rendering.objects])
