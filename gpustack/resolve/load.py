"""From config files on disk to a resolved `Stack`: read, follow `extends:`, merge the profile's
defaults beneath, validate (every validation error mapped back to the file, line and column by
gpustack.resolve.layered_settings), check against the profile, and read the `patches:` files.

This is the only module that parses config files (the fleet's inventory asks it); the files a
config names beside its patches are read by gpustack.resolve.checks.files (the PEM and MIG
configs the profile checks check) and gpustack.resolve.image_lock (the image lock). Everything
after it works on plain data.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from gpustack.config.field_types import Strict
from gpustack.config.model import GPUStack, PatchEntry
from gpustack.config.profile_model import Profile
from gpustack.errors import (
    Location,
    UserError,
    closest,
    describe,
    display_path,
    real_path,
)
from gpustack.read.bounded import MAX_FILE_BYTES, UnreadableFile, decode, read_bounded
from gpustack.read.named_files import inside_repository
from gpustack.read.patterns import linear_regex
from gpustack.read.yamlio import (
    Document,
    SourceMap,
    load_all_text,
    load_file,
    load_text,
)
from gpustack.resolve import image_lock, profile_checks
from gpustack.resolve import platform_profiles as profile_store
from gpustack.resolve.checks import platforms as platform_checks
from gpustack.resolve.layered_settings import (
    Layer,
    following,
    locate,
    merge,
    merge_layers,
    set_by_user,
    validate,
    without_taken_away,
)
from gpustack.resolve.patches import Patch, Target, parse_selector
from gpustack.resolve.stack import Stack

_MAX_EXTENDS_DEPTH = 16
# Bases in all, counted as they are applied (one named twice, or by two files, counts twice): each
# costs a merge, so files that name each other's bases many times over would cost minutes and
# gigabytes (a base-repetition bomb). A real fleet's chain is a handful.
MAX_LAYERS = 64
# Patch documents in all, counted as they are read (a file named twice, or holding several
# documents, counts each time): each is matched against every object. A real config has a few
# dozen; the work each does is counted as it is applied (gpustack.build.patching.MAX_WORK).
MAX_PATCHES = 1000


def _dra_serves_gpus(data: dict[str, Any]) -> bool:
    """Whether the merged config data asks the DRA driver for every GPU node's GPUs (before
    validation): the cluster's `gpuAllocation` is `dra` and no pool chooses the device plugin."""
    dra = data.get("dra")
    gpus = dra.get("gpus") if isinstance(dra, dict) else None
    enabled = gpus.get("enabled", True) if isinstance(gpus, dict) else True
    nodes = data.get("nodes")
    pools = nodes.get("pools") if isinstance(nodes, dict) else None
    plugin_pools = [
        pool
        for pool in (pools if isinstance(pools, list) else [])
        if isinstance(pool, dict) and pool.get("gpuAllocation") == "device-plugin"
    ]
    return data.get("gpuAllocation") == "dra" and enabled is not False and not plugin_pools


class _OverrideSource(SourceMap):
    """Where `--set` values come from: the option itself, each value as the user typed it."""

    def __init__(
        self, written: dict[tuple[str | int, ...], str], assignments: tuple[str, ...]
    ) -> None:
        where = Location("--set")
        paths = {path[:end] for path in written for end in range(1, len(path) + 1)}
        super().__init__("--set", dict.fromkeys(paths, where), dict.fromkeys(paths, where))
        self.typed = written
        self.assignments = assignments  # as given, in order: the rendering records them

    def written(self, path: tuple[str | int, ...]) -> str | None:
        return self.typed.get(tuple(path))

    def nearest(self, path: tuple[str | int, ...]) -> Location:
        return Location("--set")


def overrides(assignments: list[str] | tuple[str, ...]) -> Layer | None:
    """`--set path=value` options as one config layer above the files (last one wins).

    A value is read as YAML, as if written in the file at that path (`replicas=8` a number,
    `enabled=false` a boolean, `kubernetesVersion="1.30"` a string), so it is typed and checked
    like the file, with the same messages. A key holding dots is written with `\\.`.
    """
    if not assignments:
        return None
    data: dict[str, Any] = {}
    written: dict[tuple[str | int, ...], str] = {}
    for assignment in assignments:
        path_text, equals, value = assignment.partition("=")
        path = tuple(part.replace("\0", ".") for part in path_text.replace("\\.", "\0").split("."))
        if path[0] == "extends":
            raise UserError(
                "extends cannot be set with --set: bases are files the config names",
                Location("--set"),
                "extends",
                hint="name the base in the config's extends:, or give another --set per field",
            )
        if not equals or not all(path):
            raise UserError(
                f"expected FIELD=VALUE, got {assignment!r}",
                Location("--set"),
                hint="e.g. --set devicePlugin.sharing.replicas=8",
            )
        try:
            parsed = load_text(value, "--set").data if value.strip() else None
        except UserError as problem:
            raise UserError(
                f"{value!r} is not a YAML value: {problem.message}",
                Location("--set"),
                ".".join(path),
            ) from None
        node = data
        for part in path[:-1]:
            child = node.get(part)
            if not isinstance(child, dict):
                child = node[part] = {}
            node = child
        node[path[-1]] = parsed
        written[path] = value
    return Layer(data, _OverrideSource(written, tuple(assignments)))


def load_stack(
    path: Path | None,
    profile_name: str | None = None,
    profiles_dir: Path | None = None,
    leave_out_inapplicable: bool = False,
    override: Layer | None = None,
    document: Document | None = None,
) -> Stack:
    """Load one cluster config (or the embedded example when `path` is None); a mistake met in
    another file than the config (a base, a profile) or in `--set` names the config too."""
    return load_with_layers(
        path, profile_name, profiles_dir, leave_out_inapplicable, override, document
    )[0]


def load_with_layers(
    path: Path | None,
    profile_name: str | None = None,
    profiles_dir: Path | None = None,
    leave_out_inapplicable: bool = False,
    override: Layer | None = None,
    document: Document | None = None,
) -> tuple[Stack, list[Layer]]:
    """`load_stack`, and the layers the config was merged from, bottom first: the profile's
    defaults, the bases, the config, `--set`, and the values that follow from others (where
    each value came from: `gpustack config show --show-origin`)."""
    try:
        return _load_stack(
            path, profile_name, profiles_dir, leave_out_inapplicable, override, document
        )
    except UserError as problem:
        if path is None or str(path) == STDIN:
            raise
        shown = display_path(path)
        for each in problem.every():
            if each.location is not None and each.location.file != shown:
                each.cluster_config = each.cluster_config or shown
        raise


def _load_stack(
    path: Path | None,
    profile_name: str | None,
    profiles_dir: Path | None,
    leave_out_inapplicable: bool,
    override: Layer | None,
    document: Document | None,
) -> tuple[Stack, list[Layer]]:
    """Load one cluster config (or the embedded example when `path` is None).

    `leave_out_inapplicable` (comparing one config on several profiles): a setting the profile
    refuses (e.g. `platform.openshiftVersion` on rke2) is left out, back to the profile's
    default, and named in `Stack.left_out`, instead of being an error. `override` (`--set`)
    goes above the file. `document`: the config already read (`gpustack import` and `init`
    check the config they write before writing it), standing for the file at `path`; the bases
    it extends are read from beside `path`.
    """
    # The image lock beside the config; the embedded example has none.
    lock_file = None if path is None else image_lock.lock_path(path)
    if path is None:
        path = profile_store.data_dir("examples") / "kubeadm.yaml"
    layers = _config_layers(path, document)
    file_layer = layers[-1]
    if override is not None:
        layers.append(override)
    combined = merge_layers(layers)
    _check_is_config(combined, file_layer)
    combined = without_taken_away(GPUStack, combined)
    profile, profile_layer = _profile_of(combined, layers, profile_name, profiles_dir)
    if profile_name:
        combined = merge(combined, {"platform": {"profile": profile_name}})
    all_layers = [profile_layer, *layers]
    patch_entries = _patch_entries(layers)
    merged = merge(profile_layer.data, combined)
    followed = platform_checks.follow_platform_versions(merged, profile, all_layers)
    if followed is not None:
        all_layers.append(followed)
        merged = merge(merged, followed.data)
    gives_way = _plugin_gives_way(merged, all_layers)
    followed_layers = [gives_way] if gives_way is not None else []
    if gives_way is not None:
        merged = merge(merged, gives_way.data)
    if patch_entries:
        merged["patches"] = [entry for entry, _, _ in patch_entries]

    def leave_out(field: str) -> GPUStack:
        """The config without a setting the profile refuses (leave_out_inapplicable)."""
        nonlocal merged
        merged = _without(merged, tuple(field.split(".")), profile_layer.data)
        config: GPUStack = validate(GPUStack, merged, all_layers)
        return config

    checked = profile_checks.check(
        validate(GPUStack, merged, all_layers),
        profile,
        all_layers,
        leave_out if leave_out_inapplicable else None,
    )
    read_patches = _read_patches(patch_entries)
    stack = Stack(
        checked.config,
        profile,
        display_path(path),
        checked.entitlement_pem,
        user_mig_configs=checked.user_mig_configs,
        left_out=checked.left_out,
        entitlement_mode=checked.entitlement_mode,
        patches=read_patches,
        overrides=override.source.assignments
        if override is not None and isinstance(override.source, _OverrideSource)
        else (),
        image_digests=image_lock.read_lock(lock_file) if lock_file is not None else {},
        lock_file=lock_file,
    )
    return stack, [*all_layers, *followed_layers]


def _profile_of(
    combined: dict[str, Any],
    layers: list[Layer],
    profile_name: str | None,
    profiles_dir: Path | None,
) -> tuple[Profile, Layer]:
    """The profile the config names (or `--profile`, `profile_name`), and the layer of its
    defaults."""
    platform = combined.get("platform")
    name = profile_name or (platform.get("profile") if isinstance(platform, dict) else None)
    if not isinstance(name, str):
        top = layers[-1]
        raise UserError(
            "required field missing",
            locate(layers, ("platform", "profile")) or top.source.nearest(()),
            field="platform.profile",
            hint=f"one of: {', '.join(profile_store.available(profiles_dir))}",
        )
    # Where the profile was named is looked up only when it is unknown (positions cost a parse).
    known = profile_store.exists(name, profiles_dir)
    return profile_store.load(
        name,
        profiles_dir,
        None
        if known
        else Location("--profile")
        if profile_name
        else locate(layers, ("platform", "profile")),
    )


def _plugin_gives_way(merged: dict[str, Any], layers: list[Layer]) -> Layer | None:
    """The layer that turns the profile's device plugin off where the DRA driver takes every GPU
    node's GPUs (both on one node over-admit GPUs); a plugin the user asks for stays, and
    gpustack.resolve.checks.dra refuses it."""
    if (
        _dra_serves_gpus(merged)
        and isinstance(merged.get("devicePlugin"), dict)
        and not set_by_user(layers, ("devicePlugin", "enabled"))
    ):
        return following(("devicePlugin", "enabled"), False, ("gpuAllocation",), layers)
    return None


class _PatchList(Strict):
    """One layer's `patches:`, validated on its own so that errors point into that layer."""

    patches: list[PatchEntry]


def _patch_entries(layers: list[Layer]) -> list[tuple[Any, Layer, int]]:
    """Every layer's `patches:` entries in order (bases first): patches add up, where other
    lists in a config replace the base's."""
    entries: list[tuple[Any, Layer, int]] = []
    for layer in layers:
        value = layer.data.get("patches")
        if value is None:
            continue
        validate(_PatchList, {"patches": value}, [layer])
        entries += [(entry, layer, index) for index, entry in enumerate(value)]
    return entries


def _read_patches(entries: list[tuple[Any, Layer, int]]) -> tuple[Patch, ...]:
    """Every patch document the entries name, in order, at most MAX_PATCHES of them."""
    found: list[Patch] = []
    for entry, layer, index in entries:
        found += _read_patch(entry, layer, index)
        if len(found) > MAX_PATCHES:
            where = (*layer.prefix, "patches", index)
            raise UserError(
                f"the config applies more than {MAX_PATCHES} patches in all (counting each "
                "document of a patch file, each time the file is named, also by bases)",
                layer.source.nearest(where),
                f"patches.{index}",
                hint="name each patch file once; one patch with a target changes many objects",
            )
    return tuple(found)


def _read_patch(entry: Any, layer: Layer, index: int) -> list[Patch]:
    """The patch documents of one `patches:` entry, each with where it was written."""
    model = PatchEntry.model_validate(entry)
    where = (*layer.prefix, "patches", index)
    location = layer.source.value((*where, "path" if model.path else "patch")) or (
        layer.source.nearest(where)
    )
    if model.path is not None:
        base = layer.directory if layer.directory else Path.cwd()
        field = f"patches.{index}.path"
        file = _patch_file(base, model.path, location, field)
        found = list(_patch_documents(file, base / model.path, location, field))
    else:
        try:
            documents = [
                d for d in load_all_text(model.patch or "", str(location)) if d.data is not None
            ]
        except UserError as error:
            raise UserError(
                f"the patch is not valid YAML: {error.message.removeprefix('invalid YAML: ')}",
                location,
                f"patches.{index}.patch",
            ) from None
        found = [(d.data, location) for d in documents]
    if not found:
        raise UserError("the patch is empty", location, f"patches.{index}")
    target = _patch_target(model, layer, where)
    return [_one_patch(body, at, target, model.path is not None, index) for body, at in found]


def _patch_file(base: Path, written: str, location: Location, field: str) -> Path:
    """Where the patch file `written` (relative to `base`, the folder of the config naming it)
    really lies: a YAML file of the repository holding that config (named_files). A pull
    request's config could otherwise merge any file of the machine (a registry's credentials,
    say) into a rendered object, which `check` and `diff` print."""
    if "\x00" not in written and not written.endswith(CONFIG_SUFFIXES):
        raise UserError(
            "must name a YAML file (.yaml or .yml)",
            location,
            field,
            hint="a JSON patch is YAML too: rename it to .yaml",
        )
    return inside_repository(base, written, location, field, "patch file")


def _patch_documents(
    file: Path, named: Path, location: Location, field: str
) -> list[tuple[Any, Location]]:
    """The patch documents of `file` (a real path; `named`: as the config names it), each with
    where it starts: read and parsed once per process however many entries and configs name it
    (a large file named hundreds of times costs one read). The file may be anything: its
    content is never quoted."""
    try:
        try:
            stat = file.stat()
        except OSError:
            return _read_patch_file(file)  # reports the problem, uncached
        return _patch_file_unchanged(file, stat.st_mtime_ns, stat.st_size, os.getcwd())
    except UserError as error:
        if not isinstance(error, UnreadableFile) and error.location and error.location.line:
            # Named with the place, never quoted: not even YAML's own message.
            raise UserError(
                "not valid YAML, expected a patch; its content is not shown",
                error.location,
                field,
            ) from None
        shown = display_path(named)
        if error.message == "file not found":
            link = " (a symbolic link to a missing file)" if os.path.islink(named) else ""
            raise UserError(f"patch file {shown} not found{link}", location, field) from None
        raise UserError(f"{shown}: {error.message}", location, field) from None


@cache  # a bounded cache would evict a fleet's shared patch files before the last cluster
def _patch_file_unchanged(
    file: Path, mtime_ns: int, size: int, cwd: str
) -> list[tuple[Any, Location]]:
    # mtime and size in the key: an edited file is read again; cwd: positions name the file as
    # the user would type it from there. A failed read raises, and is not kept. Callers treat
    # the documents as read-only (gpustack.build.patching.apply copies what it merges).
    return _read_patch_file(file)


def _read_patch_file(file: Path) -> list[tuple[Any, Location]]:
    text = decode(read_bounded(file, what="a patch file"), display_path(file))
    documents = [d for d in load_all_text(text, display_path(file)) if d.data is not None]
    return [(d.data, d.source.nearest(())) for d in documents]


def _patch_target(
    model: PatchEntry, layer: Layer, where: tuple[str | int, ...]
) -> tuple[Target | None, dict[str, Any]]:
    if model.target is None:
        return None, {}
    target = Target(**model.target.model_dump())
    regexes = {}
    for key in ("group", "version", "kind", "name", "namespace"):
        pattern = getattr(target, key)
        if pattern is None:
            continue
        field = f"patches.{where[-1]}.target.{key}"
        try:
            regexes[key] = linear_regex(pattern, field)
        except UserError as error:
            raise UserError(
                error.message, layer.source.nearest((*where, "target", key)), field, error.hint
            ) from None
    for key in ("labelSelector", "annotationSelector"):
        selector = getattr(target, key)
        if selector is None:
            continue
        try:
            parse_selector(selector)
        except ValueError as problem:
            raise UserError(
                f"not a Kubernetes label selector: {problem}",
                layer.source.nearest((*where, "target", key)),
                f"patches.{where[-1]}.target.{key}",
                hint="e.g. `app=nvidia-device-plugin,tier in (gpu)` or `!example.com/skip`",
            ) from None
    return target, regexes


def _one_patch(
    body: Any,
    location: Location,
    target: tuple[Target | None, dict[str, Any]],
    from_file: bool,
    index: int,
) -> Patch:
    selector, regexes = target
    field = f"patches.{index}"
    if isinstance(body, list):
        # kustomize: a list is a JSON 6902 patch, which needs a target.
        if not all(isinstance(op, dict) and isinstance(op.get("op"), str) for op in body):
            raise UserError(
                "a JSON 6902 patch is a list of operations, each a mapping with `op` and `path`",
                location,
                field,
            )
        if selector is None:
            raise UserError(
                "a JSON 6902 patch needs a target (the objects it applies to)",
                location,
                field,
                hint="add target: {kind: DaemonSet, name: nvidia-device-plugin}",
            )
    elif isinstance(body, dict):
        meta = body.get("metadata")
        if selector is None and not (
            isinstance(body.get("apiVersion"), str)
            and isinstance(body.get("kind"), str)
            and isinstance(meta, dict)
            and isinstance(meta.get("name"), str)
        ):
            raise UserError(
                "a strategic-merge patch without a target names its object: apiVersion, kind "
                "and metadata.name (and metadata.namespace)",
                location,
                field,
                hint="or give target: {kind: ..., name: ...}",
            )
    else:
        raise UserError(
            "a patch is a mapping (strategic merge) or a list of operations (JSON 6902)",
            location,
            field,
        )
    if _has_key_not_text(body):
        raise UserError(
            "a key of the patch is not a string (an unquoted number, true, false or null); "
            "every key of a Kubernetes object is one",
            location,
            field,
            hint="quote the key, e.g. '1': or 'true':",
        )
    return Patch(body, location, selector, from_file, regexes)


def _has_key_not_text(body: Any) -> bool:
    """Whether a mapping anywhere in `body` has a key that is not a string (YAML reads `1:` as
    a number): it would reach the rendered object, whose schema check and YAML then disagree
    with the API server, which reads every key as a string."""
    pending = [body]
    while pending:
        value = pending.pop()
        if isinstance(value, dict):
            if not all(isinstance(key, str) for key in value):
                return True
            pending += value.values()
        elif isinstance(value, list):
            pending += value
    return False


def _without(data: dict[str, Any], path: tuple[str, ...], defaults: Any) -> dict[str, Any]:
    """`data` with the value at `path` back to the one in `defaults`, or removed."""
    head, *rest = path
    result = dict(data)
    default = defaults.get(head) if isinstance(defaults, dict) else None
    if rest and isinstance(result.get(head), dict):
        result[head] = _without(result[head], tuple(rest), default)
    elif default is not None:
        result[head] = default
    else:
        result.pop(head, None)
    return result


def _check_is_config(data: dict[str, Any], top: Layer) -> None:
    """Refuse a file that is not a gpustack config at all (a Kubernetes manifest, some other
    tool's YAML) before its fields are judged as a config's."""
    kind, api_version = data.get("kind"), data.get("apiVersion")
    if kind == "GPUStack" or (isinstance(api_version, str) and api_version.startswith("gpustack.")):
        return
    if isinstance(kind, str) and closest(kind, ["GPUStack"]):
        return  # a typo of GPUStack: the field error suggests the fix
    found = f"its kind is {describe(kind)}" if kind is not None else "it has no kind"
    hint = "a config has apiVersion: gpustack.dev/v1alpha1 and kind: GPUStack; `gpustack init` writes one"
    if kind is not None and api_version is not None:
        hint += "; `gpustack validate` checks Kubernetes manifests"
    raise UserError(
        f"not a gpustack config: {found}, not GPUStack",
        top.source.value(("kind",)) or top.source.nearest(()),
        hint=hint,
    )


def read_document(path: Path) -> Document:
    """A config file, parsed once per process however many configs of a fleet extend it.

    Callers treat the result as read-only (merge() copies what it changes).
    """
    try:
        stat = path.stat()
    except OSError:
        return load_file(path)  # reports the problem exactly as an uncached read does
    return _read_unchanged(os.path.abspath(path), stat.st_mtime_ns, stat.st_size, os.getcwd())


@cache  # a bounded cache would evict a large fleet's files before rendering
def _read_unchanged(path: str, mtime_ns: int, size: int, cwd: str) -> Document:
    # mtime and size in the key: an edited file is read again; cwd: positions name the file as
    # the user would type it from there.
    return load_file(Path(path))


# A config path of `-` reads the config from standard input (bases relative to the working folder).
STDIN = "-"
_stdin: list[tuple[Any, Document]] = []  # read once per stdin: diff may load a config twice


def _stdin_document() -> Document:
    for stream, document in _stdin:
        if stream is sys.stdin:
            return document
    text = sys.stdin.read(MAX_FILE_BYTES + 1)
    if len(text.encode("utf-8", errors="replace")) > MAX_FILE_BYTES:
        raise UserError(
            f"standard input holds more than {MAX_FILE_BYTES} bytes; a config may have at most "
            "1 MiB",
            Location("<stdin>"),
        )
    document = load_text(text, "<stdin>")
    _stdin[:] = [(sys.stdin, document)]
    return document


def settings_of(path: Path) -> dict[str, Any]:
    """What the config file `path` and its bases set, merged (no profile, not validated):
    `gpustack init --extends` shows a base's values in the starter it writes."""
    return merge_layers(_config_layers(path))


def layer_chain(path: Path) -> list[Layer]:
    """The layers of the config at `path` as rendering merges them: the files it extends, bases
    first, then the file itself (read, not validated)."""
    return _config_layers(path)


def bases(path: Path) -> set[Path]:
    """The (resolved) files `path` extends, directly or not; a missing or cyclic base raises."""
    return {real_path(layer.path) for layer in _config_layers(path)[:-1] if layer.path}


@dataclass(frozen=True)
class Inputs:
    """What a cluster config reads, found from its `extends:` chain without validating or
    rendering it (gpustack.compare.changes maps changed files to the clusters they affect)."""

    name: str | None  # metadata.name, when the layers give one
    profile: str | None  # platform.profile, when the layers give one
    files: frozenset[Path]  # resolved: the config, its bases, PEMs, MIG configs, patch files


def inputs(path: Path) -> Inputs:
    """The files `path` reads and its cluster's name and profile, as far as its layers say. A
    path setting is taken from every layer that writes it (only the last counts in a render):
    more files than needed, never fewer."""
    layers = _config_layers(path)
    files = {real_path(layer.path) for layer in layers if layer.path}
    name = profile = None
    for layer in layers:
        data, directory = layer.data, layer.directory or Path.cwd()
        named = _at(data, ("metadata", "name"))
        name = named if isinstance(named, str) else name
        chosen = _at(data, ("platform", "profile"))
        profile = chosen if isinstance(chosen, str) else profile
        read = [_at(data, ("entitlement", "pemFile")), _at(data, ("migManager", "config", "file"))]
        patches = data.get("patches")
        if isinstance(patches, list):
            read += [entry.get("path") for entry in patches if isinstance(entry, dict)]
        files |= {
            real_path(directory / each)
            for each in read
            if isinstance(each, str) and each and "\x00" not in each
        }
    # The image lock beside the config pins its images, whether or not it exists yet.
    files.add(real_path(image_lock.lock_path(path)))
    return Inputs(name, profile, frozenset(files))


def _at(data: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        data = data.get(key) if isinstance(data, dict) else None
    return data


def _config_layers(path: Path, document: Document | None = None) -> list[Layer]:
    """The files `path` extends, bases first, then `path` itself (`document`: its content,
    already read).

    `extends:` is one path or a list of paths, applied in order (a later base overrides an
    earlier one, the file overrides them all); each base may extend others in turn.
    """
    chain: list[Layer] = []
    _add_layers(path, chain, [], None, document)
    return chain


Reference = tuple[
    Document, tuple[str | int, ...]
]  # the file and the `extends:` entry naming a base


def _add_layers(
    current: Path,
    chain: list[Layer],
    seen: list[Path],
    referencing: Reference | None,
    given: Document | None = None,
) -> None:
    """Append the layers of `current` to `chain`: its bases first, depth first, then the file
    (`seen`: the files whose `extends:` led here; `referencing`: the entry that names it)."""
    resolved = real_path(current)
    if resolved in seen:
        cycle = " -> ".join(display_path(p) for p in [*seen, resolved])
        raise UserError(
            f"extends forms a cycle: {cycle}",
            _extends_at(referencing),
            field=_extends_field(referencing),
        )
    if len(seen) >= _MAX_EXTENDS_DEPTH:
        raise UserError(
            "extends chain is too long", _extends_at(referencing), field=_extends_field(referencing)
        )
    if len(chain) >= MAX_LAYERS:
        raise UserError(
            f"extends applies more than {MAX_LAYERS} bases in all (counting each time a base is "
            "named, also through other bases)",
            _extends_at(referencing),
            field=_extends_field(referencing),
            hint="name each base once; a base that several bases share needs naming only once",
        )
    document = _layer_document(current, referencing, given)
    entries = _base_entries(document, current)
    for entry, where in entries:
        _add_layers(current.parent / entry, chain, [*seen, resolved], (document, where))
    chain.append(Layer(document.data, document.source, (), current.parent, current))


def _layer_document(
    current: Path, referencing: Reference | None, given: Document | None
) -> Document:
    """The config or base at `current` (`given`: its content, already read), read and checked
    to be a config; a base that cannot be read is said where `extends:` names it."""
    try:
        document = (
            given
            if given is not None
            else _stdin_document()
            if str(current) == STDIN
            else read_document(current)
        )
    except UserError as error:
        if referencing and error.message == "file not found":
            raise UserError(
                f"base config {display_path(current)} not found",
                _extends_at(referencing),
                field=_extends_field(referencing),
            ) from None
        if referencing and (error.location is None or not error.location.line):
            # A problem with the file as a whole (a folder, a FIFO, too large): say so where
            # `extends:` names it.
            raise UserError(
                f"base config {display_path(current)}: {error.message}",
                _extends_at(referencing),
                field=_extends_field(referencing),
            ) from None
        raise
    if document.data is None:
        raise UserError(
            "file is empty, expected a GPUStack config",
            document.source.nearest(()),
            hint="`gpustack init` writes a commented starter config",
        )
    if not isinstance(document.data, dict):
        # Named, never quoted: the file may be anything (a PEM named by mistake).
        raise UserError(
            "expected a GPUStack config (a mapping with apiVersion, kind, metadata, ...), "
            f"found {_kind_of_value(document.data)}",
            document.source.nearest(()),
        )
    if referencing is not None:
        _check_is_base(document, current, referencing)
    return document


def _base_entries(document: Document, current: Path) -> list[tuple[Any, tuple[str | int, ...]]]:
    """The bases the document's `extends:` names, each with where it is named: paths to YAML
    files inside the repository, each named once."""
    extends = document.data.get("extends")
    entries: list[tuple[Any, tuple[str | int, ...]]] = (
        [(item, ("extends", index)) for index, item in enumerate(extends)]
        if isinstance(extends, list)
        else []
        if extends is None
        else [(extends, ("extends",))]
    )
    if isinstance(extends, list) and not extends:
        raise UserError(
            "must name at least one base config", document.source.value(("extends",)), "extends"
        )
    for entry, where in entries:
        field = ".".join(str(part) for part in where)
        if not isinstance(entry, str) or not entry:
            problem = "must be a path to a base config, or a list of them"
        elif "\x00" in entry:
            problem = "a file name cannot contain a NUL byte"
        elif not entry.endswith(CONFIG_SUFFIXES):
            problem = "must name a YAML config file (.yaml or .yml)"
        else:
            # Before the base is read: a pull request's `extends: /etc/...` is refused unread.
            try:
                inside_repository(current.parent, entry, None, field, "base config")
            except UserError as error:
                raise UserError(
                    error.message, _extends_at((document, where)), field, error.hint
                ) from None
            continue
        raise UserError(problem, _extends_at((document, where)), field)
    named = [real_path(current.parent / entry) for entry, _ in entries]
    for index, (entry, where) in enumerate(entries):
        if named[index] in named[:index]:
            raise UserError(
                f"names the base {entry} a second time; each base is applied once",
                document.source.value(where) or document.source.value(("extends",)),
                ".".join(str(part) for part in where),
            )
    return entries


CONFIG_SUFFIXES = (".yaml", ".yml")
_CONFIG_FIELDS = frozenset(field.alias or name for name, field in GPUStack.model_fields.items()) | {
    "extends"
}


def _check_is_base(document: Document, path: Path, referencing: Reference) -> None:
    """A file `extends:` names must look like a gpustack config before any of it is judged as
    one: an `extends:` may name any YAML file on the machine (a kubeconfig, an agent config with
    a token), and a field error would quote its keys and values."""
    data = document.data
    kind, api_version = data.get("kind"), data.get("apiVersion")
    foreign = (
        (kind is not None and kind != "GPUStack")
        or (api_version is not None and not str(api_version).startswith("gpustack."))
        or not (set(data) & _CONFIG_FIELDS)
    )
    if foreign:
        raise UserError(
            f"base config {display_path(path)} is not a gpustack config (its kind, apiVersion or "
            "fields are another file's); its content is not shown",
            _extends_at(referencing),
            field=_extends_field(referencing),
        )


def _kind_of_value(value: Any) -> str:
    if isinstance(value, str):
        return "text"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    return describe(value) if isinstance(value, list) or value is None else "a value"


def _extends_field(referencing: Reference | None) -> str:
    """The `extends:` entry naming a base, as a field: `extends`, or `extends.1` in a list."""
    return ".".join(str(part) for part in referencing[1]) if referencing else "extends"


def _extends_at(referencing: Reference | None) -> Location | None:
    # Positions are looked up only for an error: the fast reader finds them on demand.
    if referencing is None:
        return None
    document, where = referencing
    return document.source.value(where) or document.source.value(("extends",))
