"""Fleets: many cluster configs, usually one folder sharing defaults through `extends:`.

    discover(paths) -> the configs to render (files as given; in folders, every GPUStack config
                       that no other config there extends)
    load_all(paths, profile, profiles_dir) -> one Stack per config, names checked unique
    render_all(configs, profile, profiles_dir, jobs, override, progress) -> one Rendering per
                       config, in order (`override`: the `--set` layer above every config)
    validate_all(renderings, jobs) -> schema findings per rendering (each distinct object once)
    check_all(renderings, jobs) -> schema and lint findings per rendering

A base is a config another config in the folder extends: it holds shared defaults and is not a
cluster itself. Everything is loaded and checked before a caller writes anything.

Work is shared rather than repeated: a base and a profile are read once for the whole fleet; an
object many clusters have in common is one object in memory (render_all), emitted once
(render.py) and validated once (validate_all); clusters with the same objects and GPU-node
settings are linted once (check_all). Everything runs in this process unless `jobs` asks for
workers. A render worker sends back an object the clusters of its chunk share once, so rendering
a large fleet in workers pays when the CPUs are free; validating in workers does not (sending an
object to a worker costs about as much as validating it). Results come back in input order, so
the output is the same bytes as a serial run, and so is the first error reported.
"""

from __future__ import annotations

import os
import pickle
import posixpath
import re
import shlex
from collections.abc import Callable, Collection, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpustack import lint, validation
from gpustack import render as rendering_files
from gpustack.config import bases, load_stack, read_document
from gpustack.decorate import stage
from gpustack.errors import Location, UserError, display_path, real_path
from gpustack.findings import Finding
from gpustack.gitops import with_namespace
from gpustack.layers import Layer
from gpustack.layout import FLEET_DIR, KUSTOMIZATION, is_ours
from gpustack.reading import MAX_FILE_BYTES, decode, read_bounded
from gpustack.render import PICKLE, Rendering, render
from gpustack.stack import Stack
from gpustack.yamlio import load_text

if TYPE_CHECKING:
    from concurrent.futures import Executor

DEFAULT_CONFIG = Path("gpustack.yaml")
CONFIG_SUFFIXES = (".yaml", ".yml")


def discover(paths: Sequence[Path]) -> list[Path | None]:
    """The cluster configs that `paths` name, each once, in a stable order.

    No paths: `./gpustack.yaml` if present, else None (the embedded example), unless cluster
    configs lie around (a fleet repository): then naming them is required. A folder is searched
    recursively (skipping folders whose name starts with '.' or '_') for YAML files with
    `kind: GPUStack`; bases are left out, and every config's `extends:` chain is checked here, so a
    missing or cyclic base is reported before anything is rendered.
    """
    if not paths:
        if DEFAULT_CONFIG.is_file():
            return [DEFAULT_CONFIG]
        _refuse_configs_nearby()
        return [None]
    found: dict[Path, Path] = {}
    for path in paths:
        chosen = _folder_configs(path) if path.is_dir() else [path]
        for config in chosen:
            found.setdefault(real_path(config), config)
    return list(found.values())


# Where a fleet repository keeps its configs, by the README's convention, and how many files a
# bare command looks at there.
FLEET_FOLDER = Path("clusters")
_NEARBY_FILES = 2000


def _refuse_configs_nearby() -> None:
    """A bare command in a fleet repository (configs in the working folder itself or in
    `clusters/`) must not fall back to the embedded example."""
    found: dict[str, None] = {}
    nearby = sorted(path for path in Path(".").iterdir() if path.name.endswith(CONFIG_SUFFIXES))
    if FLEET_FOLDER.is_dir():
        nearby += yaml_files(FLEET_FOLDER)
    for path in nearby[:_NEARBY_FILES]:
        if not path.is_file():
            continue
        try:
            with path.open("rb") as handle:
                if b"GPUStack" not in handle.read(65536):
                    continue
        except OSError:
            continue
        try:
            looks = is_config(path)
        except UserError:
            looks = True  # a broken config is still a config
        if looks:
            top = path.parts[0]
            found[top if len(path.parts) == 1 else f"{top}/"] = None
    if found:
        shown = ", ".join(list(found)[:5]) + (", ..." if len(found) > 5 else "")
        raise UserError(
            f"no ./gpustack.yaml here, but there are cluster configs: {shown}",
            hint=f"name the configs or their folder, e.g. `{next(iter(found))}`; the embedded "
            "example is used only where no config is around",
        )


def _folder_configs(folder: Path) -> list[Path]:
    configs = [path for path in yaml_files(folder) if is_config(path)]
    if not configs:
        raise UserError(
            "no GPUStack configs in this folder",
            Location(display_path(folder)),
            hint="a config is a YAML file with 'kind: GPUStack'; `gpustack init` writes one",
        )
    extended = {base for config in configs for base in bases(config)}
    return [config for config in configs if real_path(config) not in extended]


def yaml_files(folder: Path) -> list[Path]:
    result: list[Path] = []
    for directory, subdirectories, names in os.walk(folder):
        subdirectories[:] = sorted(d for d in subdirectories if not d.startswith((".", "_")))
        result.extend(Path(directory, name) for name in names if name.endswith(CONFIG_SUFFIXES))
    return sorted(result)


# What a cluster config looks like before it parses: its kind, or `extends:` at the top level.
LOOKS_LIKE_CONFIG = re.compile(rb"GPUStack|^extends[ \t]*:", re.MULTILINE)


def is_config(path: Path) -> bool:
    try:
        data = read_document(path).data
    except UserError as error:
        # Other YAML in the folder (manifests, templates) is not ours to judge, but a config
        # that does not parse is reported, not skipped; so is a file that cannot be read at all
        # (a broken link, a FIFO, a folder named *.yaml): no position, nothing parsed.
        if error.location is None or not error.location.line:
            raise
        if LOOKS_LIKE_CONFIG.search(read_bounded(path, MAX_FILE_BYTES)):
            raise
        return False
    # A per-cluster file may leave `kind` (and everything else) to the base it extends.
    if not isinstance(data, dict):
        return False
    kind = data.get("kind")
    ours = str(data.get("apiVersion", "")).startswith("gpustack.dev/")
    # A gpustack apiVersion with a kind that is no name at all is a broken config, not a stranger.
    return (
        kind == "GPUStack"
        or ("kind" not in data and "extends" in data)
        or (ours and not isinstance(kind, str))
    )


def load_all(
    paths: Sequence[Path], profile: str | None = None, profiles_dir: Path | None = None
) -> list[Stack]:
    """Every config `paths` name (see discover), loaded and validated; cluster names unique."""
    stacks = [load_stack(path, profile, profiles_dir) for path in discover(paths)]
    check_unique_names([(stack.name, stack.source) for stack in stacks])
    return stacks


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
    application_set(renderings)
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


# Each distinct object met so far, by content key (render.Rendering.content_keys).
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
            linted[key] = lint.run(
                rendering.objects,
                rendering.kubernetes_version,
                taints=rendering.taints,
                node_labels=rendering.node_labels,
            )
        results.append(_at_patches(rendering, schema + linted[key]))
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
    # Deferred: loading the process pool costs every run ~20 ms, and only --jobs uses it.
    from concurrent.futures import ProcessPoolExecutor

    return ProcessPoolExecutor(workers)


def output_folders(
    renderings: Sequence[Rendering], out: Path, fleet_folder: bool = True
) -> list[tuple[Path, dict[str, bytes]]]:
    """Each folder a render writes under `out` with its files: `<name>/` per cluster, and
    `_gitops/` with the fleet's ApplicationSet. When a fleet folder is rendered and its clusters
    no longer ask for one, `_gitops/` is empty (so a render prunes, and check reports, an
    ApplicationSet left from before); a render of single configs leaves it alone."""
    folders = [(out / r.name, rendering_files.files(r)) for r in renderings]
    application = application_set(renderings)
    fleet = rendering_files.fleet_files(application) if application is not None else {}
    if application is not None or fleet_folder:
        folders.append((out / FLEET_DIR, fleet))
    return folders


def strays(renderings: Sequence[Rendering], out: Path, known: Collection[str] = ()) -> list[Path]:
    """Folders directly under `out` holding gpustack's output (a kustomization.yaml with its
    marker) that no cluster of `renderings` writes: a cluster renamed or removed from the fleet.
    A render never removes them (another fleet folder may render into `out` too); render and
    check name them. Hidden folders (a render's staging leftovers) and `_gitops/` are not, nor
    are the folders of the `known` names (clusters not rendered here)."""
    names = {rendering.name for rendering in renderings} | {FLEET_DIR, *known}
    try:
        children = sorted(os.scandir(out), key=lambda entry: entry.name)
    except OSError:
        return []
    return [
        out / entry.name
        for entry in children
        if entry.name not in names
        and not entry.name.startswith(".")
        and entry.is_dir(follow_symlinks=False)
        and is_ours(out / entry.name / KUSTOMIZATION)
    ]


def stray_message(folder: Path, configs: Sequence[Path], deployed: bool) -> str:
    """What render and check say about a stray folder (strays); `deployed`: the fleet's
    ApplicationSet makes an Application of every folder in the output folder."""
    given = " ".join(str(path) for path in configs)
    out = display_path(folder.parent)
    how = (
        f"the ApplicationSet in {out}/{FLEET_DIR} deploys every folder in {out}"
        if deployed
        else "its Application keeps deploying it while it is committed"
    )
    return (
        f"{display_path(folder)}: gpustack's output for a cluster that no config in {given} "
        f"renders (renamed or removed?); {how}. If the cluster is gone, run "
        f"`rm -r {shlex.quote(str(folder))}` and commit; if another fleet folder renders into "
        f"{out}, render and check both in one command"
    )


def misplaced(renderings: Sequence[Rendering], out: Path) -> list[str]:
    """A warning for each GitOps path template (Rendering.gitops_path) that does not point at
    the folder this render writes under `out`, both taken in the repository: from its top (the
    nearest folder above `out` holding `.git`), or from the working folder outside one. Nothing
    when `out` lies outside that folder (where the repository reads it cannot be told), nor
    for a path to a kustomize overlay of the rendered folder (see overlays)."""
    wanted = [(r, r.gitops_path) for r in renderings if r.gitops_path is not None]
    if not wanted:
        return []
    folder = Path(os.path.abspath(out))
    top = next((p for p in (folder, *folder.parents) if (p / ".git").exists()), Path.cwd())
    try:
        relative = folder.relative_to(top).as_posix()
    except ValueError:
        return []
    found: dict[tuple[str, str], tuple[str, str, str]] = {}
    for rendering, (setting, template) in wanted:
        name = rendering.name
        points = posixpath.normpath(template.replace("{name}", name))
        writes = posixpath.normpath(posixpath.join(relative, name))
        # Flux's Kustomizations read one folder per stage: an overlay has one per stage too.
        folders = sorted({stage(obj) for obj in rendering.objects}) if rendering.staged else [""]
        if points != writes and not all(
            overlays(top / points / folder, top / writes / folder) for folder in folders
        ):
            found.setdefault((setting, template), (name, points, writes))
    messages = []
    for (setting, template), (name, points, writes) in found.items():
        suggested = posixpath.join(relative, "{name}") if relative != "." else "{name}"
        if template.startswith("./"):
            suggested = f"./{suggested}"
        reader = "Argo CD" if setting.startswith("gitops.argocd") else "Flux"
        where = "the repository's top" if (top / ".git").exists() else "the working folder"
        messages.append(
            f"{setting} is {template}, so {reader} reads {points} for cluster {name}, "
            f"but this render writes {writes} (from {where}, {top}): set "
            f"{setting} to {suggested}, or render into the folder it names"
        )
    return messages


# kustomize's names for a kustomization file (kustomize api/konfig/general.go).
KUSTOMIZATION_FILES = ("kustomization.yaml", "kustomization.yml", "Kustomization")
_OVERLAY_DEPTH = 4


def overlays(folder: Path, rendered: Path, depth: int = 0) -> bool:
    """Whether the kustomization in `folder` builds on `rendered` (names it, or a folder that
    does, in its `resources`): an overlay of the rendered folder, which Argo CD or Flux may read
    in its place."""
    if depth > _OVERLAY_DEPTH:
        return False
    for name in KUSTOMIZATION_FILES:
        try:
            document = load_text(decode(read_bounded(folder / name, 1024 * 1024), name), name)
        except UserError:
            continue
        data = document.data
        resources = data.get("resources") if isinstance(data, dict) else None
        for entry in resources if isinstance(resources, list) else []:
            if not isinstance(entry, str) or "://" in entry:
                continue
            target = Path(os.path.normpath(folder / entry))
            if target == Path(os.path.normpath(rendered)) or (
                target.is_dir() and overlays(target, rendered, depth + 1)
            ):
                return True
        return False
    return False


def check_unique_names(clusters: Sequence[tuple[str, str]]) -> None:
    """Refuse two configs (name, config file) that would render into the same folder."""
    first: dict[str, str] = {}
    for name, source in clusters:
        if name in first:
            raise UserError(
                f"cluster name {name!r} is used by both {first[name]} and {source}",
                _location(source, ("metadata", "name")),
                field="metadata.name",
                hint="each cluster needs its own metadata.name, which names its output folder",
            )
        first[name] = source


def application_set(renderings: Sequence[Rendering]) -> dict[str, Any] | None:
    """The fleet's one ApplicationSet, or None; refuses a fleet whose configs disagree on it (the
    Git directory generator makes an Application of every rendered folder, so it is all or none).
    """
    wanted = [rendering for rendering in renderings if rendering.application_set is not None]
    if not wanted:
        return None
    reference = wanted[0]
    for rendering in renderings:
        if rendering.application_set != reference.application_set:
            raise UserError(
                f"{reference.source} and {rendering.source} need the same gitops.argocd "
                "settings: their clusters share one ApplicationSet",
                _location(rendering.source, ("gitops", "argocd")),
                field="gitops.argocd",
                hint="move the gitops section into the base config both extend",
            )
    # Each object names its namespace; the Applications' default is the stack's when the
    # fleet's clusters share one (profiles differ: OpenShift's is nvidia-gpu).
    namespaces = {rendering.namespace for rendering in wanted}
    application = reference.application_set
    if len(namespaces) == 1 and application is not None:
        return with_namespace(application, namespaces.pop())
    return application


def _location(source: str, path: tuple[str, ...]) -> Location | None:
    try:
        return read_document(Path(source)).source.nearest(path)
    except UserError:
        return Location(source)
