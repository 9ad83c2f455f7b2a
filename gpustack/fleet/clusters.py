"""Rendering a fleet: many cluster configs rendered, validated and checked together.

    render_all(configs, profile, profiles_dir, jobs, override, progress) -> one Rendering per
                       config, in order (`override`: the `--set` layer above every config)
    validate_all(renderings, jobs) -> schema findings per rendering (each distinct object once)
    check_all(renderings, jobs) -> schema and lint findings per rendering, and each image
                       without a digest where the config asks for digests

The configs come from the fleet's inventory (inventory.discover). Everything is loaded and
checked before a caller writes anything: names unique (inventory.check_unique_names), and one
ApplicationSet for the fleet (applicationset.for_fleet).

Work is shared rather than repeated: a base and a profile are read once for the whole fleet; an
object many clusters have in common is one object in memory (render_all), emitted once
(build/pipeline.py) and validated once (validate_all); clusters with the same objects and GPU-node
settings are linted once (check_all). Everything runs in this process unless `jobs` asks for
workers. A render worker sends back an object the clusters of its chunk share once, so rendering
a large fleet in workers pays when the CPUs are free; validating in workers does not (sending an
object to a worker costs about as much as validating it). Results come back in input order, so
the output is the same bytes as a serial run, and so is the first error reported.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpustack import validation
from gpustack.build.applicationset import for_fleet
from gpustack.build.pipeline import PICKLE, Rendering, render
from gpustack.errors import Location, UserError
from gpustack.findings import Finding
from gpustack.fleet import cluster_images
from gpustack.resolve.inventory import check_unique_names
from gpustack.resolve.layered_settings import Layer
from gpustack.resolve.load import load_stack
from gpustack.validation import lint

if TYPE_CHECKING:
    from concurrent.futures import Executor


def render_all(
    configs: Sequence[Path | None],
    profile: str | None = None,
    profiles_dir: Path | None = None,
    jobs: int | None = None,
    override: Layer | None = None,
    progress: Callable[[int], None] | None = None,
) -> list[Rendering]:
    """Load and render every config, in `jobs` worker processes (default: in this process);
    `override` (`--set`) goes above every config; `progress` hears how many are done."""
    workers = max(1, min(jobs or 1, len(configs)))
    if workers <= 1:
        renderings = []
        shared: Shared = {}
        for path in configs:
            stack = load_stack(path, profile, profiles_dir, override=override)
            renderings.append(_share(render(stack), shared))
            if progress:
                progress(1)
    else:
        size = max(1, -(-len(configs) // (workers * 4)))  # a few chunks per worker balance load
        chunks = [list(configs[start : start + size]) for start in range(0, len(configs), size)]
        with _pool(workers) as pool:
            results = pool.map(
                _render_chunk, [(chunk, profile, profiles_dir, override) for chunk in chunks]
            )
            renderings = []
            for chunk in results:
                renderings += chunk
                if progress:
                    progress(len(chunk))
    check_unique_names([(rendering.name, rendering.source) for rendering in renderings])
    for_fleet(renderings)
    return renderings


def _render_chunk(
    arguments: tuple[list[Path | None], str | None, Path | None, Layer | None],
) -> list[Rendering]:
    configs, profile, profiles_dir, override = arguments
    shared: Shared = {}
    return [
        _share(render(load_stack(path, profile, profiles_dir, override=override)), shared)
        for path in configs
    ]


# Each distinct object met so far, by content key (pipeline.Rendering.content_keys).
Shared = dict[bytes, tuple[bytes, dict[str, Any]]]


def _share(rendering: Rendering, shared: Shared) -> Rendering:
    """`rendering` with each of its objects (and content key) replaced by an equal one met
    before. A fleet's clusters mostly render the same objects: shared, they take memory once,
    and a worker's result (pickled: pickle sends an object referred to many times once) carries
    them once. Safe because nothing changes an object once it is rendered."""
    pairs = [
        shared.setdefault(key, (key, obj))
        for key, obj in zip(rendering.content_keys, rendering.objects)
    ]
    rendering.content_keys = [key for key, _ in pairs]
    rendering.objects = [obj for _, obj in pairs]
    return rendering


def validate_all(renderings: Sequence[Rendering], jobs: int | None = None) -> list[list[Finding]]:
    """Schema findings for each rendering's objects, in `jobs` worker processes (default: here).

    Clusters of a fleet share most objects byte for byte (same profile, same settings), so each
    distinct object is validated once per Kubernetes version and its findings shared.
    """
    keys: list[list[tuple[str, bytes]]] = []
    unique: dict[tuple[str, bytes], dict[str, Any]] = {}
    for rendering in renderings:
        rendering_keys = []
        for obj, content in zip(rendering.objects, rendering.content_keys):
            key = (rendering.kubernetes_version, content)
            unique.setdefault(key, obj)
            rendering_keys.append(key)
        keys.append(rendering_keys)
    items = [(version, obj) for (version, _), obj in unique.items()]
    workers = max(1, min(jobs or 1, len(items)))
    if workers <= 1:
        results = _validate_chunk(items)
    else:
        size = -(-len(items) // (workers * 4))
        chunks = [items[start : start + size] for start in range(0, len(items), size)]
        with _pool(workers) as pool:
            results = [found for chunk in pool.map(_validate_chunk, chunks) for found in chunk]
    findings = dict(zip(unique, results))
    return [[finding for key in each for finding in findings[key]] for each in keys]


def check_all(renderings: Sequence[Rendering], jobs: int | None = None) -> list[list[Finding]]:
    """Schema findings (validate_all) then lint findings for each rendering: what `render`
    refuses to write and `check` reports. Lint looks across one cluster's objects at a time.

    Clusters of a fleet often render exactly the same objects from the same node settings
    (they differ in name and GitOps paths only): such clusters are linted once.
    """
    # Lint findings by what lint.run reads: the objects (in order) and the GPU nodes' settings.
    linted: dict[tuple[tuple[bytes, ...], bytes], list[Finding]] = {}
    results = []
    for rendering, schema in zip(renderings, validate_all(renderings, jobs)):
        nodes = (rendering.kubernetes_version, rendering.taints, rendering.node_labels)
        key = (tuple(rendering.content_keys), pickle.dumps(nodes, PICKLE))
        if key not in linted:
            try:
                linted[key] = lint.run(
                    rendering.objects,
                    rendering.kubernetes_version,
                    taints=rendering.taints,
                    node_labels=rendering.node_labels,
                )
            except UserError as error:
                # Lint's own bound (lint._objects.MAX_COMPARISONS), named at the config.
                where = Location(rendering.source or rendering.name)
                raise UserError(error.message, where, hint=error.hint) from None
        found = schema + linted[key] + cluster_images.unlocked(rendering) + rendering.findings
        results.append(_at_patches(rendering, found))
    return results


def _at_patches(rendering: Rendering, findings: list[Finding]) -> list[Finding]:
    """Findings on an object the config's patches changed name those patches' places."""
    if not rendering.patched:
        return findings
    return [
        replace(
            finding,
            message=f"{finding.message} (the object is patched at "
            f"{', '.join(rendering.patched[finding.object])})",
        )
        if finding.object in rendering.patched
        else finding
        for finding in findings
    ]


def _validate_chunk(items: list[tuple[str, dict[str, Any]]]) -> list[list[Finding]]:
    return [validation.validate_objects([obj], version) for version, obj in items]


def _pool(workers: int) -> Executor:
    # The process pool loads only when --jobs asks for workers.
    from concurrent.futures import ProcessPoolExecutor

    return ProcessPoolExecutor(workers)
