"""Platform profiles: YAML files in `profiles/` (and in a user's `--profiles-dir`).

A profile may `extends:` another (by name); user profiles are looked up first, so a user can
shadow a built-in one. Found in the package after installation, or beside it in a checkout.
"""

from __future__ import annotations

import os
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

from gpustack.config.profile_model import Profile
from gpustack.errors import Location, UserError, describe, did_you_mean, display_path
from gpustack.read.yamlio import SourceMap, load_file
from gpustack.resolve.layered_settings import Layer, merge, merge_layers, validate

# The built-in profiles, in the order the documents' tables give them: the plain Kubernetes
# distributions first, then the managed ones.
BUILTIN = (
    "kubeadm",
    "rke2",
    "k3s",
    "openshift",
    "gke-cos",
    "gke-ubuntu",
    "aks",
    "eks-al2023",
    "eks-bottlerocket",
)


@lru_cache(maxsize=8)
def data_dir(name: str) -> Path:
    """A data folder shipped with gpustack: `profiles`, `schemas` or `examples`."""
    package = Path(__file__).resolve().parent.parent
    packaged = package / "_data" / name
    if packaged.is_dir():
        return packaged
    return package.parent / name


def _search_path(profiles_dir: Path | None) -> list[Path]:
    return ([profiles_dir] if profiles_dir else []) + [data_dir("profiles")]


def available(profiles_dir: Path | None = None) -> list[str]:
    """Every profile name: the built-in ones, and each `<name>.yaml` entry in `profiles_dir`
    (a broken one too: loading it says what is wrong, rather than the built-in taking its place)."""
    names: set[str] = set()
    for folder in _search_path(profiles_dir):
        if folder.is_dir():
            names.update(path.stem for path in folder.glob("*.yaml") if _NAME.fullmatch(path.stem))
    return sorted(names)


def exists(name: str, profiles_dir: Path | None = None) -> bool:
    return _find(name, profiles_dir) is not None


# Profile names are names, never paths: a DNS-1123 label, as the files in profiles/ are named.
_NAME = re.compile(r"[a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?")


def _find(name: str, profiles_dir: Path | None) -> Path | None:
    if not _NAME.fullmatch(name):
        return None
    for folder in _search_path(profiles_dir):
        candidate = folder / f"{name}.yaml"
        # A user's entry shadows the built-in profile even when it cannot be read (a broken link,
        # a folder, a FIFO): reading it then says so, instead of the built-in silently serving.
        if os.path.lexists(candidate):
            return candidate
    return None


def files(name: str, profiles_dir: Path | None = None) -> list[Path]:
    """The files of profile `name` and the profiles it extends, resolved, read no further than
    their `extends:`; a chain that does not resolve stops there (loading it says why)."""
    found: list[Path] = []
    current: Any = name
    while isinstance(current, str) and len(found) < 64:
        path = _find(current, profiles_dir)
        if path is None or path.resolve() in found:
            break
        found.append(path.resolve())
        try:
            data = load_file(path).data
        except UserError:
            break
        current = data.get("extends") if isinstance(data, dict) else None
    return found


def load(
    name: str, profiles_dir: Path | None = None, referenced_at: Location | None = None
) -> tuple[Profile, Layer]:
    """The profile `name` with its `extends:` chain merged, and its defaults as a config layer."""
    if profiles_dir is not None and not profiles_dir.is_dir():
        raise UserError(f"profiles directory {display_path(profiles_dir)} does not exist")
    profiles_dir = profiles_dir.resolve() if profiles_dir else None
    if _find(name, profiles_dir) is None:
        _load(name, profiles_dir, referenced_at)  # raises: unknown profile, named where referenced
    # Cached without `referenced_at`: every config of a fleet that uses a profile shares one load.
    return _load(name, profiles_dir, None)


@lru_cache(maxsize=64)
def _load(
    name: str, profiles_dir: Path | None, referenced_at: Location | None
) -> tuple[Profile, Layer]:
    layers: list[Layer] = []
    seen: list[str] = []
    current: str | None = name
    # Where `current` is named, for an error: looked up only then (positions cost a full parse).
    referrer: SourceMap | None = None

    def named_at() -> Location | None:
        return referenced_at if referrer is None else referrer.value(("extends",))

    while current is not None:
        if current in seen:
            raise UserError(
                f"profile extends forms a cycle: {' -> '.join([*seen, current])}",
                named_at(),
                "extends",
            )
        seen.append(current)
        path = _find(current, profiles_dir)
        if path is None and not _NAME.fullmatch(current):
            where = named_at()
            shown = current if len(current) <= 40 else f"{current[:40]}…"
            raise UserError(
                f"{shown!r} is not a profile name (lowercase letters, digits and '-', at most "
                "63 characters; a name, not a path)",
                where,
                field=None
                if where is None
                else "platform.profile"
                if len(seen) == 1
                else "extends",
                hint="a user profile is found by name in --profiles-dir",
            )
        if path is None:
            where = named_at()
            choices = available(profiles_dir)
            raise UserError(
                f"unknown profile {current!r}",
                where,
                # Named on the command line (profiles show, --profile), there is no field.
                field=None
                if where is None
                else "platform.profile"
                if len(seen) == 1
                else "extends",
                hint=did_you_mean(current, choices) or f"available: {', '.join(choices)}",
            )
        document = load_file(path)
        if not isinstance(document.data, dict):
            raise UserError("expected a Profile mapping", document.source.nearest(()))
        _check_is_profile(document.data, path)
        layers.append(Layer(document.data, document.source, (), path.parent))
        parent = document.data.get("extends")
        if parent is not None and not isinstance(parent, str):
            raise UserError(
                f"a profile extends one profile, by name, not {describe(parent)}",
                document.source.value(("extends",)) or document.source.nearest(()),
                "extends",
                hint="e.g. extends: kubeadm; a config's extends: takes a list, a profile's does not",
            )
        referrer = document.source
        current = parent
    layers.reverse()
    data = merge_layers(layers)
    profile = validate(Profile, data, layers)
    defaults_layers = [
        Layer(layer.data.get("defaults") or {}, layer.source, ("defaults",), layer.directory)
        for layer in layers
    ]
    return profile, _merged_layer(defaults_layers)


_PROFILE_FIELDS = frozenset(field.alias or name for name, field in Profile.model_fields.items())


def _check_is_profile(data: dict[str, Any], path: Path) -> None:
    """A file in a profiles folder must look like a profile before any of it is judged as one:
    it may be a link to any YAML file on the machine, and a field error would quote it."""
    kind, api_version = data.get("kind"), data.get("apiVersion")
    if (
        (kind is not None and kind != "Profile")
        or (api_version is not None and not str(api_version).startswith("gpustack."))
        or not (set(data) & _PROFILE_FIELDS)
    ):
        raise UserError(
            "not a gpustack profile (apiVersion gpustack.dev/v1alpha1, kind Profile); its "
            "content is not shown",
            Location(display_path(path)),
        )


def _merged_layer(layers: list[Layer]) -> Layer:
    """Fold several profiles' defaults into one layer whose positions point at the right file."""
    data: dict[str, Any] = {}
    for layer in layers:
        data = merge(data, layer.data)
    return Layer(data, _MergedSourceMap(layers), (), layers[-1].directory)


class _MergedSourceMap(SourceMap):
    """The positions of several profiles' defaults, each in its own file, put together only when
    something asks for one (in practice an error message): the profiles are read by the fast
    path, whose positions cost a full parse."""

    def __init__(self, layers: list[Layer]) -> None:
        self.file = layers[-1].source.file
        self._layers = layers
        self._full: SourceMap | None = None

    def _positions(self) -> SourceMap:
        if self._full is None:
            combined = SourceMap(self.file)
            for layer in self._layers:
                for path, location in layer.source.values.items():
                    if path[: len(layer.prefix)] == layer.prefix:
                        combined.values[path[len(layer.prefix) :]] = location
                for path, location in layer.source.keys.items():
                    if path[: len(layer.prefix)] == layer.prefix:
                        combined.keys[path[len(layer.prefix) :]] = location
            self._full = combined
        return self._full

    # Read-only properties where SourceMap has fields, as yamlio.LazySourceMap.
    @property
    def values(self) -> dict[tuple[str | int, ...], Location]:  # type: ignore[override]
        return self._positions().values

    @property
    def keys(self) -> dict[tuple[str | int, ...], Location]:  # type: ignore[override]
        return self._positions().keys

    @property
    def text(self) -> str:  # type: ignore[override]
        return ""
