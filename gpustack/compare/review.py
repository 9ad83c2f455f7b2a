"""Reviewing a change as `gpustack diff` shows it: what a render would change in committed
output, or what a change to the configs (two profiles, a git revision) does to every cluster.

    snapshot(rendering) -> a cluster's objects and its other files, split as committed.read does
    rendered(renderings) -> every cluster's snapshot, and the fleet's `_gitops/` when it has one
    against(folder, new, files, new_label) -> what a render writing `files` would change there
    against_output(renderings, out, fleet_folder) -> the same for every folder a render writes
    compare(old, new, old_label, new_label) -> one Diff per cluster, in name order
    between(old, new, old_label, new_label) -> the Diff of two snapshots
    unreached(old, new, effects) -> the settings a change to a base changed that a cluster sets
        itself, or where they do nothing

Objects are compared as objects, everything else (each kustomization.yaml, node/) as text, so a
cluster reads the same whether it was rendered a moment ago or read back from disk. Against
committed output, every other file a render would rewrite is found as `check` finds it
(output_check.compare_folder), so the two agree. Both compare the folders a render writes
(output_tree.output_folders, as `render` writes them) and read committed output through
gpustack.compare.committed, which never follows a link; a git revision's files are read by revision.py.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from gpustack.build import pipeline as render
from gpustack.build.applicationset import for_fleet
from gpustack.build.pipeline import Rendering
from gpustack.compare import committed
from gpustack.compare.object_diff import (
    NO_EFFECT,
    Change,
    Diff,
    Status,
    Unreached,
    diff_files,
    diff_objects,
)
from gpustack.compare.output_check import compare_folder, file_diff
from gpustack.errors import display_path
from gpustack.layout import APPLICATION_SET_DIR, KUSTOMIZATION, NODE_DIR
from gpustack.objects import Identity
from gpustack.resolve import load
from gpustack.resolve.checks.no_effect import without_effect
from gpustack.resolve.layered_settings import Layer, nearest
from gpustack.write import output_tree


class Snapshot(NamedTuple):
    """A cluster folder as diff compares it: its objects, its other files (every
    kustomization.yaml, node/) as bytes, and the file each object is in, relative to the folder."""

    objects: list[dict[str, Any]]
    files: dict[str, bytes]
    paths: dict[Identity, str]


def snapshot(rendering: Rendering) -> Snapshot:
    """The cluster's objects (its own and its GitOps objects) and its other files (every
    kustomization.yaml, node/) as bytes: the same split `committed.read` makes of a folder."""
    objects = [*rendering.objects, *rendering.gitops_objects]
    return _split(objects, render.files(rendering), render.object_paths(rendering))


def _split(
    objects: list[dict[str, Any]], files: dict[str, bytes], paths: dict[Identity, str]
) -> Snapshot:
    others = {
        path: content
        for path, content in files.items()
        if path.rpartition("/")[2] == KUSTOMIZATION or path.startswith(f"{NODE_DIR}/")
    }
    return Snapshot(objects, others, paths)


def rendered(renderings: Sequence[Rendering]) -> dict[str, Snapshot]:
    """Each cluster's snapshot by name, and `_gitops` with the fleet's ApplicationSet when the
    renderings make one (the folders a render writes, output_tree.output_folders)."""
    return {
        folder.name: _split(objects, files, paths)
        for folder, objects, files, paths in _output(renderings, Path(), fleet_folder=False)
    }


def against_output(
    renderings: Sequence[Rendering], out: Path, fleet_folder: bool
) -> list[tuple[str, Diff]]:
    """What a render would change under `out`, per folder it writes or prunes there (the folders
    `check` compares), clusters by name and `_gitops` last: see `against`."""
    diffs = [
        (
            folder.name,
            against(folder, _split(objects, files, paths), files, f"rendered/{folder.name}"),
        )
        for folder, objects, files, paths in _output(renderings, out, fleet_folder)
        if files or folder.is_dir()
    ]
    return sorted(diffs, key=lambda pair: (pair[0] == APPLICATION_SET_DIR, pair[0]))


def against(folder: Path, new: Snapshot, files: dict[str, bytes], new_label: str) -> Diff:
    """What a render writing `files` (split as `new`) would change in `folder`: the objects and
    files that differ (between), then every other file whose bytes it would add, rewrite or
    remove (a comment, a line ending, a renamed file), as `check` finds them (compare_folder)."""
    old_label = display_path(folder)
    old = committed_snapshot(folder)
    difference = between(old, new, old_label, new_label)
    # Files an object or file change already names (an object's file by its path, or by the
    # name gpustack gives it where its path is not known), and the committed file of an object
    # whose name changed by its content hash.
    object_files = {change.file for change in difference.changes if change.identity}
    object_files |= {
        old.paths.get((*change.identity[:3], change.renamed_from), "")
        for change in difference.changes
        if change.identity and change.renamed_from
    }
    covered = {change.file for change in difference.changes if not change.identity}
    report = compare_folder(folder, files)
    changes = []
    for relative in sorted([*report.missing, *report.extra, *report.diffs]):
        name = relative.rpartition("/")[2]
        if relative in covered | object_files or (name != KUSTOMIZATION and name in object_files):
            continue
        before = committed.read_file(folder, relative) if relative not in report.missing else None
        after = files.get(relative)
        status: Status = "added" if before is None else "removed" if after is None else "changed"
        unified = file_diff(
            before or b"",
            after or b"",
            f"{old_label}/{relative}" if before is not None else "/dev/null",
            f"{new_label}/{relative}" if after is not None else "/dev/null",
        )
        changes.append(Change(status, relative, relative, None, (), unified))
    return difference + Diff(old_label, new_label, tuple(changes))


def _output(
    renderings: Sequence[Rendering], out: Path, fleet_folder: bool
) -> list[tuple[Path, list[dict[str, Any]], dict[str, bytes], dict[Identity, str]]]:
    """output_tree.output_folders, each folder with the objects its files hold and where."""
    application = for_fleet(renderings)
    objects = {r.name: [*r.objects, *r.gitops_objects] for r in renderings}
    objects[APPLICATION_SET_DIR] = [application] if application is not None else []
    paths = {r.name: render.object_paths(r) for r in renderings}
    return [
        (folder, objects[folder.name], files, paths.get(folder.name, {}))
        for folder, files in output_tree.output_folders(renderings, out, fleet_folder)
    ]


def committed_snapshot(folder: Path) -> Snapshot:
    """What `folder` holds, split as a snapshot (committed.read; empty when it does not exist)."""
    found = committed.read(folder)
    return Snapshot(found.objects, found.files, found.paths)


def between(old: Snapshot, new: Snapshot, old_label: str, new_label: str) -> Diff:
    """What differs from `old` to `new`: objects matched by identity, other files as text."""
    paths = {**old.paths, **new.paths}
    return diff_objects(old.objects, new.objects, old_label, new_label, paths) + diff_files(
        old.files, new.files, old_label, new_label
    )


def compare(
    old: dict[str, Snapshot],
    new: dict[str, Snapshot],
    old_label: Callable[[str], str],
    new_label: Callable[[str], str],
) -> list[tuple[str, Diff]]:
    """One Diff per cluster found on either side (a cluster on one side only is all added or all
    removed), clusters by name and the fleet's `_gitops` last."""
    empty = Snapshot([], {}, {})
    names = sorted(old.keys() | new.keys(), key=lambda name: (name == APPLICATION_SET_DIR, name))
    return [
        (
            name,
            between(old.get(name, empty), new.get(name, empty), old_label(name), new_label(name)),
        )
        for name in names
    ]


# --- a base's change that a cluster does not take ------------------------------------------------

# A cluster's layers (config.layer_chain, bases first) with each file's path relative to the
# root of its side (the repository's top, or the folder a revision's files are brought to).
Chain = list[tuple[str, Layer]]


def chain(layers: list[Layer], root: Path) -> Chain:
    """`layers` keyed by their files' paths relative to `root`, so the two sides' match."""
    top = os.path.realpath(root)
    return [
        (os.path.relpath(os.path.realpath(layer.path), top) if layer.path else "", layer)
        for layer in layers
    ]


def chains(paths: Sequence[Path | None], root: Path) -> dict[str, Chain]:
    """Each config's layers (chain), by the name of its cluster (the configs rendered already,
    so each has one; the embedded example, None, has no file to change)."""
    found: dict[str, Chain] = {}
    for path in paths:
        if path is None:
            continue
        layers = load.layer_chain(path)
        name = _name(layers)
        if name is not None:
            found[name] = chain(layers, root)
    return found


def _name(layers: list[Layer]) -> str | None:
    """The cluster's name, as the last layer that writes `metadata.name` gives it."""
    return next(
        (
            layer.data["metadata"]["name"]
            for layer in reversed(layers)
            if isinstance(layer.data.get("metadata"), dict)
            and isinstance(layer.data["metadata"].get("name"), str)
        ),
        None,
    )


# The settings that do nothing on a cluster, by the cluster's name: (section, field) -> why.
Effects = Callable[[str], dict[tuple[str, ...], str]]


def unreached(
    old: dict[str, Chain], new: dict[str, Chain], without_effect: Effects | None = None
) -> list[Unreached]:
    """Each setting a base file changed from `old` to `new` (cluster name -> its layers) that
    does not reach a cluster extending that base: the cluster sets it itself, in a later layer
    (where), or it has no effect there (`without_effect`, why: a fleet's default for the
    clusters where it takes effect, a driver version on GKE). By base, then setting."""
    found: dict[tuple[str, str], list[tuple[str, str]]] = {}
    shown: dict[str, str] = {}
    for name in sorted(old.keys() & new.keys()):
        before = dict(old[name])
        layers = new[name]
        for index, (key, base) in enumerate(layers[:-1]):
            if key not in before or before[key].data == base.data:
                continue
            later = [layer for _, layer in layers[index + 1 :]]
            for path in _changed_settings(before[key].data, base.data):
                setting = ".".join(str(part) for part in path)
                if any(_sets(layer.data, path) for layer in later):
                    where = str(nearest(later, path))  # the value, or the mapping it replaces
                elif without_effect is not None and (why := _why(without_effect(name), path)):
                    where = f"{NO_EFFECT}{why}"
                else:
                    continue
                shown[key] = display_path(base.path) if base.path else key
                found.setdefault((key, setting), []).append((name, where))
    return [
        Unreached(shown[key], setting, tuple(clusters))
        for (key, setting), clusters in sorted(found.items())
    ]


def _why(effects: dict[tuple[str, ...], str], path: tuple[str, ...]) -> str | None:
    """Why the setting at `path` (or the section holding it: `toolkit.resources` for a change
    to `toolkit.resources.requests.cpu`) has no effect, if it has none."""
    for end in range(len(path), 0, -1):
        if path[:end] in effects:
            return effects[path[:end]]
    return None


def effects_of(
    paths: Sequence[Path | None],
    profile: str | None,
    profiles_dir: Path | None,
    override: Layer | None,
) -> Effects:
    """For unreached: the settings that do nothing on each cluster of `paths` (by its name,
    loaded again only when asked: a change to a base that no cluster sets aside asks none)."""
    by_name: dict[str, Path] = {}
    for path in paths:
        if path is not None:
            name = _name(load.layer_chain(path))
            if name is not None:
                by_name[name] = path
    cache: dict[str, dict[tuple[str, ...], str]] = {}

    def effects(name: str) -> dict[tuple[str, ...], str]:
        if name not in cache:
            stack, layers = load.load_with_layers(
                by_name[name], profile, profiles_dir, override=override
            )
            cache[name] = without_effect(stack, layers)
        return cache[name]

    return effects


_MISSING = object()


def _changed_settings(old: Any, new: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """The paths of the values that differ, down to the values a merge replaces whole (scalars,
    lists): `extends:` and what names the file (`metadata`) left out."""
    if isinstance(old, dict) and isinstance(new, dict):
        for key in sorted({*old, *new}, key=str):
            if not path and key in ("extends", "metadata"):
                continue
            if old.get(key, _MISSING) != new.get(key, _MISSING):
                yield from _changed_settings(
                    old.get(key, _MISSING), new.get(key, _MISSING), (*path, str(key))
                )
    elif path:
        yield path


def _sets(data: Any, path: tuple[str, ...]) -> bool:
    """Whether a layer's `data` decides the value at `path`: it writes it, or replaces a mapping
    above it with a value that is none (layered_settings.merge)."""
    for key in path:
        if not isinstance(data, dict):
            return True
        if key not in data:
            return False
        data = data[key]
    return True
