"""Which clusters a set of changed files affects: what `gpustack check FILE...` (the pre-commit
hook) re-renders.

    read_fleet(folders) -> the bytes of every YAML file in the folders, or None (a link among them)
    scan(texts, folders, changed, out, profiles_dir) -> the YAML files of `folders` that can read
                       a changed file, or None when every config can (check them all)
    affected(configs, read, changed, out, profiles_dir) -> the configs whose output they change
    names_given(texts) -> every value a `name:` of the fleet's YAML files gives (cluster names)

A cluster depends on its config, every base its `extends:` chain names, the PEM, MIG config
and patch files its layers name, its profile's files (a user profile and the profiles it
extends) and its folder `out/<name>/`. Each of those is named in the text of a file that reads
it, so the scan looks for names in bytes, without parsing: a changed file's name, a changed
user profile's name, the cluster folder a changed output file lies in, then (until nothing is
added) the names of the files that matched. Only the files it picks are parsed (config.inputs,
from the layers alone, never a render), and only the clusters whose inputs really hold a changed
file are checked: a fleet's unaffected clusters cost a substring search each. A file under
`out/_gitops/` (the fleet's ApplicationSet, made from every cluster) affects every cluster; a
file nothing reads affects none.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path

from gpustack import inventory
from gpustack import profiles as profile_store
from gpustack.config import Inputs, inputs
from gpustack.errors import real_path
from gpustack.image_lock import LOCK_FILE
from gpustack.layout import APPLICATION_SET_DIR
from gpustack.reading import read_bounded


def read_fleet(folders: Sequence[Path]) -> dict[Path, bytes] | None:
    """The bytes of each YAML file under `folders`, as discovery walks them, in order; None when
    one is a link (whose target's name the text need not hold: names cannot be looked for)."""
    files = [path for folder in folders for path in inventory.yaml_files(folder)]
    if any(os.path.islink(path) for path in files):
        return None
    return {path: read_bounded(path) for path in files}


def scan(
    fleet_texts: dict[Path, bytes],
    folders: Sequence[Path],
    changed: Sequence[Path],
    out: Path,
    profiles_dir: Path | None,
) -> list[Path] | None:
    """The YAML files of the fleet (`fleet_texts`, read_fleet) that are changed or name a changed
    file, directly or through files that do; None when every config may be affected (a file
    under `out/_gitops/`, a path that may lead out of the folders, or every config picked)."""
    files = list(fleet_texts)
    texts = dict(fleet_texts)
    # A file outside the folders (a base there, and what it names) is not scanned: a config
    # that may name one (`../`, an absolute path) has every config parsed instead.
    if any(_OUTSIDE.search(text) for text in texts.values()):
        return None
    profiles = _profile_files(profiles_dir)
    texts |= {path: read_bounded(path) for path in profiles if path not in texts}
    output = real_path(out)
    spelled = {os.path.normpath(path): path for path in texts}
    resolved: dict[Path, Path] = {}  # by real path: made only for a file spelled otherwise
    tokens: set[bytes] = set()
    picked: set[Path] = set()
    for path in changed:
        where = real_path(path)
        if where.is_relative_to(output) and where != output:
            top = where.relative_to(output).parts[0]
            if top == APPLICATION_SET_DIR:
                return None
            tokens.add(top.encode())
            continue
        if path.name == LOCK_FILE:
            # An image lock names no file: it pins the images of every config beside it.
            picked.update(each for each in files if real_path(each.parent) == where.parent)
            continue
        tokens.add(path.name.encode())
        same = spelled.get(os.path.normpath(path))
        roots = [*folders, *([profiles_dir] if profiles_dir else [])]
        if same is None and any(where.is_relative_to(real_path(root)) for root in roots):
            resolved = resolved or {real_path(each): each for each in texts}
            same = resolved.get(where)
        if same is not None:
            picked.add(same)
    for path in picked & set(profiles):
        tokens.add(path.stem.encode())
    found = set(picked)
    while True:
        new = [
            path
            for path, text in texts.items()
            if path not in found and any(token in text for token in tokens)
        ]
        if not new:
            break
        found.update(new)
        tokens.update(path.name.encode() for path in new)
        tokens.update(path.stem.encode() for path in new if path in profiles)
    chosen = [path for path in files if path in found]
    # Every config picked (a shared base changed): the whole fleet, ApplicationSet included.
    others = [path for path in files if path not in found]
    if not any(inventory.LOOKS_LIKE_CONFIG.search(texts[path]) for path in others):
        return None
    return chosen


def names_given(fleet_texts: dict[Path, bytes]) -> set[str]:
    """Every value a `name:` key of the fleet's YAML files gives: a superset of its clusters'
    names (a cluster's name is its `metadata.name`, in a config or a base), so an output folder
    named by none of them is nobody's cluster; one named may still be, only a whole check knows."""
    return {name.decode() for name in _NAME.findall(b"\n".join(fleet_texts.values()))}


# A `name:` key's plain or quoted value, in block or flow style.
_NAME = re.compile(rb"\bname[\"']?[ \t]*:[ \t]*[\"']?([A-Za-z0-9][A-Za-z0-9._-]*)")


# `../`, or a value that starts with `/` (after `: `, `- `, `[` or `,`; not a URL's `://`).
_OUTSIDE = re.compile(rb"\.\./|[:-][ \t]+['\"]?/|[\[,][ \t]*['\"]?/")


def _profile_files(profiles_dir: Path | None) -> list[Path]:
    if profiles_dir is None or not profiles_dir.is_dir():
        return []
    return sorted(path for path in profiles_dir.iterdir() if path.suffix == ".yaml")


def index(configs: Sequence[Path]) -> list[Inputs]:
    """What each config reads (config.inputs), in order."""
    return [inputs(config) for config in configs]


def affected(
    configs: Sequence[Path],
    read: Sequence[Inputs],
    changed: Sequence[Path],
    out: Path,
    profiles_dir: Path | None = None,
) -> list[Path]:
    """The configs (in their order) whose rendering or committed output a changed file can
    change; `read` is index(configs). A config whose layers give no name is kept (its render
    says what is missing)."""
    by_file: dict[Path, set[int]] = {}
    by_name: dict[str, set[int]] = {}
    by_profile: dict[str, set[int]] = {}
    for number, each in enumerate(read):
        for file in each.files:
            by_file.setdefault(file, set()).add(number)
        if each.name is not None:
            by_name.setdefault(each.name, set()).add(number)
        if each.profile is not None:
            by_profile.setdefault(each.profile, set()).add(number)
    # A fleet names a few profiles: each one's files (a user profile and those it extends).
    for name, numbers in by_profile.items():
        for file in profile_store.files(name, profiles_dir):
            by_file.setdefault(file, set()).update(numbers)
    folder = real_path(out)
    chosen = {number for number, each in enumerate(read) if each.name is None}
    for path in changed:
        resolved = real_path(path)
        if resolved.is_relative_to(folder) and resolved != folder:
            top = resolved.relative_to(folder).parts[0]
            if top == APPLICATION_SET_DIR:
                return list(configs)
            chosen |= by_name.get(top, set())
        chosen |= by_file.get(resolved, set())
    return [config for number, config in enumerate(configs) if number in chosen]
