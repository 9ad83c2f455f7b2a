"""Which clusters a set of changed files affects: what `gpustack check FILE...` (the pre-commit
hook) re-renders.

    read_fleet(folders) -> the bytes of every YAML file in the folders, or None (a link among them)
    scan(texts, folders, changed, out, profiles_dir) -> the YAML files of `folders` that can read
                       a changed file, or None when every config can (check them all)
    affected(configs, read, changed, out, profiles_dir) -> the configs whose output they change
    clusters_named(texts, folders) -> those output folder names some config surely has as its
                       cluster's name (the others may be strays: only a whole check can tell)
    configs_to_check(folders, changed, out, ...) -> the configs `check FILE...` checks, whether
                       they are the whole fleet, and the fleet's YAML bytes

A cluster depends on its config, every base its `extends:` chain names, the PEM, MIG config
and patch files its layers name, its profile's files (a user profile and the profiles it
extends) and its folder `out/<name>/`. Each of those is named in the text of a file that reads
it, so the scan looks for names in bytes, without parsing: a changed file's name, a changed
user profile's name, the cluster folder a changed output file lies in, then (until nothing is
added) the names of the files that matched. Only the files it picks are parsed (load.inputs,
from the layers alone, never a render), and only the clusters whose inputs really hold a changed
file are checked: a fleet's unaffected clusters cost a substring search each. A file under
`out/_gitops/` (the fleet's ApplicationSet, made from every cluster) affects every cluster; a
file nothing reads affects none.

Narrowing is conservative: it may check clusters a change does not reach, never leave out one it
does. Where a name could be written in bytes that do not hold it (a YAML or JSON escape, which
needs a backslash; UTF-16), every config is parsed instead; names are compared without case and
with a single quote doubled; a changed profile counts as every profile whose chain reaches it.
tests/test_check_narrowing.py compares the narrowed verdict with the whole check's on random
fleets and changes.
"""

from __future__ import annotations

import os
import re
from collections.abc import Collection, Sequence
from pathlib import Path

from gpustack.errors import Location, UserError, display_path, real_path
from gpustack.feedback import Say
from gpustack.layout import APPLICATION_SET_DIR
from gpustack.objects import name_of
from gpustack.read.bounded import decode, read_bounded
from gpustack.read.yamlio import load_text
from gpustack.resolve import inventory
from gpustack.resolve import platform_profiles as profile_store
from gpustack.resolve.image_lock import LOCK_FILE
from gpustack.resolve.load import Inputs, bases, inputs


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
    # A name is looked for as the bytes of a path: a text that may spell a path otherwise (a
    # YAML or JSON escape, `\x62ase.yaml`; UTF-16, whose NUL bytes part a name's letters) has
    # every config parsed instead. Letters are compared without case, as a file system that
    # ignores it (macOS, Windows) would open them.
    if any(b"\\" in text or b"\0" in text for text in texts.values()):
        return None
    texts = {path: text.lower() for path, text in texts.items()}
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
            tokens |= _spellings(top)
            continue
        if path.name == LOCK_FILE:
            # An image lock names no file: it pins the images of every config beside it.
            picked.update(each for each in files if real_path(each.parent) == where.parent)
            continue
        tokens |= _spellings(path.name)
        same = spelled.get(os.path.normpath(path))
        roots = [*folders, *([profiles_dir] if profiles_dir else [])]
        if same is None and any(where.is_relative_to(real_path(root)) for root in roots):
            resolved = resolved or {real_path(each): each for each in texts}
            same = resolved.get(where)
        if same is not None:
            picked.add(same)
    # A changed profile file is read by every profile whose `extends:` chain reaches it: a user
    # profile that shadows a built-in's parent (gke-cos under gke-ubuntu) changes the clusters
    # of the built-in child, whose name their configs write.
    changed_profiles = {real_path(path) for path in picked & set(profiles)}
    for name in _profile_names(profiles, profiles_dir) if changed_profiles else ():
        if changed_profiles & set(profile_store.files(name, profiles_dir)):
            tokens |= _spellings(name)
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
        for path in new:
            tokens |= _spellings(path.name)
            if path in profiles:
                tokens |= _spellings(path.stem)
    chosen = [path for path in files if path in found]
    # Every config picked (a shared base changed): the whole fleet, ApplicationSet included.
    others = [path for path in files if path not in found]
    if not any(inventory.LOOKS_LIKE_CONFIG.search(fleet_texts[path]) for path in others):
        return None
    return chosen


def _named_elsewhere(
    path: Path, fleet_texts: dict[Path, bytes], named_in: dict[bytes, set[Path]]
) -> bool:
    """Whether a text other than its own names the file `path` (its name after the start of
    a value or a path's `/`, in any case)."""
    name = path.name.lower().encode()
    if _PLAIN_FILE.fullmatch(name):
        return bool(named_in.get(name, set()) - {path})
    mention = re.compile(rb"(?:^|[\s/\"'\[,{:])" + re.escape(name), re.IGNORECASE)
    return any(mention.search(text) for other, text in fleet_texts.items() if other != path)


# A plain file name, and one found in a text (after what may start a path or a component).
_PLAIN_FILE = re.compile(rb"[a-z0-9._-]+")
_FILE_NAME = re.compile(rb"(?<![a-z0-9._-])[a-z0-9._-]+\.(?:ya?ml|json)(?![a-z0-9._-])")


def _spellings(name: str) -> set[bytes]:
    """How a file or cluster name may be written in a YAML text, lower-cased as scan compares:
    as it is, and with a quote doubled (a single-quoted scalar's escape)."""
    plain = name.lower().encode()
    return {plain, plain.replace(b"'", b"''")}


def _profile_names(profiles: Sequence[Path], profiles_dir: Path | None) -> list[str]:
    """Every profile a config may name: the user's (profiles_dir) and the built-in ones."""
    builtin = profile_store.data_dir("profiles")
    names = {path.stem for path in profiles}
    names |= {path.stem for path in builtin.glob("*.yaml")} if builtin.is_dir() else set()
    return sorted(names)


def clusters_named(fleet_texts: dict[Path, bytes], folders: Collection[str]) -> set[str]:
    """Those of `folders` (output folder names) that are surely the name of a cluster of the
    fleet: a config that nothing else names (no base of another) sets it as its own
    `metadata.name`. Only the files that give such a name to a `name:` key are parsed, each on
    its own. A folder named only otherwise (a pool, a container, a base's name that its configs
    may override) is not vouched for: a renamed or removed cluster's folder may be named so, and
    only a whole check can tell it is a stray."""
    by_name: dict[str, list[Path]] = {}
    # Which texts name each plain file name (letters, digits, `.`, `_`, `-`), in one pass.
    named_in: dict[bytes, set[Path]] = {}
    for path, text in fleet_texts.items():
        for name in set(_NAME.findall(text)):
            by_name.setdefault(name.decode(), []).append(path)
        for file in set(_FILE_NAME.findall(text.lower())):
            named_in.setdefault(file, set()).add(path)
    sure: set[str] = set()
    for folder in folders:
        for path in by_name.get(folder, []):
            # Named by another file (a config that extends it): not surely a cluster.
            if _named_elsewhere(path, fleet_texts, named_in):
                continue
            if not inventory.LOOKS_LIKE_CONFIG.search(fleet_texts[path]):
                continue
            try:
                data = load_text(decode(fleet_texts[path], str(path)), str(path)).data
            except UserError:
                continue
            if name_of(data) == folder:
                sure.add(folder)
                break
    return sure


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


def configs_to_check(
    folders: Sequence[Path],
    changed: Sequence[Path],
    out: Path,
    profiles_dir: Path | None,
    assignments: Sequence[str],
    note: Say,
    narrow: bool = True,
) -> tuple[list[Path | None], bool, dict[Path, bytes] | None]:
    """The configs to check when files are named (as pre-commit passes the changed ones),
    whether they are the whole fleet, and the fleet's YAML files (`read_fleet`).

    The fleet is the folders named, or `./gpustack.yaml`; a named file that is a cluster config
    and no base of one of its configs joins it. Each named file then selects the clusters it
    affects: a config itself, a base every config extending it, a PEM, MIG config, patch file or
    user profile the configs that read it, a file under `out/<name>/` that cluster; a file none
    of them reads selects nothing. `narrow=False`: the whole fleet. `note` says when it is the
    embedded example (inventory.discover_noted).
    """
    everything = True
    fleet_configs: list[Path] = []
    texts = None
    if folders:
        # `--set` may name files too: with it, every config is looked at.
        texts = read_fleet(folders) if narrow and not assignments else None
        picked = None if texts is None else scan(texts, folders, changed, out, profiles_dir)
        everything = picked is None
        candidates = inventory.discover(folders) if picked is None else picked
        configs = [path for path in candidates if path is not None]
        if picked is not None:
            configs = [path for path in configs if inventory.is_config(path)]
            extended = {base for path in configs for base in bases(path)}
            configs = [path for path in configs if real_path(path) not in extended]
        fleet_configs = configs
    elif inventory.DEFAULT_CONFIG.is_file():
        fleet_configs = [inventory.DEFAULT_CONFIG]
    read = index(fleet_configs)
    known = {file for each in read for file in each.files}
    for path in changed:
        if real_path(path) in known:
            continue
        if not path.exists():
            raise UserError("file not found", Location(display_path(path)))
        if path.name.endswith(inventory.CONFIG_SUFFIXES) and inventory.is_config(path):
            fleet_configs.append(path)
            read += index([path])
            known |= read[-1].files
    if not fleet_configs and not folders:
        # Nothing to narrow: as a bare `check` (./gpustack.yaml, or refused in a fleet
        # repository, or the embedded example).
        return inventory.discover_noted([], note), True, texts
    if not narrow:
        return list(fleet_configs), True, texts
    chosen: list[Path | None] = list(affected(fleet_configs, read, changed, out, profiles_dir))
    return chosen, everything and len(chosen) == len(fleet_configs), texts
