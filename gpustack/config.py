"""From config files on disk to a resolved `Stack`: read, follow `extends:`, merge the profile's
defaults beneath, validate, and map every validation error back to the file, line and column.

This is the only module that reads config files; everything after it works on plain data.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from gpustack import profiles as profile_store
from gpustack.errors import Location, UserError, closest, describe, did_you_mean, display_path
from gpustack.model import DURATION, REPO_URL, ConflictError, GPUStack, Profile, ProfileFacts
from gpustack.reading import read_bounded
from gpustack.yamlio import Document, SourceMap, load_file, load_file_fast

_MAX_EXTENDS_DEPTH = 16


@dataclass(frozen=True)
class Layer:
    """One source of settings: a config file, a base it extends, or a profile's `defaults`."""

    data: dict[str, Any]
    source: SourceMap
    prefix: tuple[str | int, ...] = ()
    directory: Path | None = None


@dataclass(frozen=True)
class Stack:
    """A validated config with its profile: everything the components need, and nothing on disk."""

    config: GPUStack
    profile: Profile
    source: str
    entitlement_pem: bytes | None = None
    entitlement_mode: int | None = None  # the PEM file's permission bits

    @property
    def name(self) -> str:
        return self.config.metadata.name

    @property
    def namespace(self) -> str:
        return self.config.namespace

    @property
    def facts(self) -> ProfileFacts:
        return self.profile.facts

    @property
    def driver_mode(self) -> str:
        mode = self.config.driver.mode
        if mode != "auto":
            return mode
        if _replaces_gke_device_plugin(self.config, self.profile):
            return "gke-installer"
        return self.profile.facts.driver.default

    @property
    def monitor(self) -> str:
        monitor = self.config.dcgmExporter.monitor
        return self.profile.facts.monitoring if monitor == "auto" else monitor

    @property
    def runtime_class_enabled(self) -> bool:
        enabled = self.config.runtimeClass.enabled
        if enabled == "auto":
            return self.profile.facts.runtime.runtimeClass in ("required", "optional")
        return bool(enabled)

    @property
    def runtime_class_name(self) -> str | None:
        """The runtimeClassName every GPU pod sets, or None when the default runtime serves."""
        return self.config.runtimeClass.name if self.runtime_class_enabled else None


def merge(base: Any, override: Any) -> Any:
    """Deep-merge mappings; lists and scalars in `override` replace those in `base`."""
    if isinstance(base, dict) and isinstance(override, dict):
        merged = dict(base)
        for key, value in override.items():
            merged[key] = merge(base[key], value) if key in base else value
        return merged
    return override


def load_stack(
    path: Path | None,
    profile_name: str | None = None,
    profiles_dir: Path | None = None,
) -> Stack:
    """Load one cluster config (or the embedded example when `path` is None)."""
    if path is None:
        path = profile_store.data_dir("examples") / "kubeadm.yaml"
    layers = _config_layers(path)
    combined = merge_layers(layers)
    platform = combined.get("platform")
    name = profile_name or (platform.get("profile") if isinstance(platform, dict) else None)
    if not isinstance(name, str):
        top = layers[-1]
        raise UserError(
            "required field missing",
            _locate(layers, ("platform", "profile")) or top.source.nearest(()),
            field="platform.profile",
            hint=f"one of: {', '.join(profile_store.available(profiles_dir))}",
        )
    # Where the profile was named is looked up only when it is unknown (positions cost a parse).
    known = profile_store.exists(name, profiles_dir)
    profile, profile_layer = profile_store.load(
        name, profiles_dir, None if known else _locate(layers, ("platform", "profile"))
    )
    if profile_name:
        combined = merge(combined, {"platform": {"profile": profile_name}})
    all_layers = [profile_layer, *layers]
    merged = merge(profile_layer.data, combined)
    config = validate(GPUStack, merged, all_layers)
    _check_against_profile(config, profile, all_layers)
    pem, mode = _read_pem(config, all_layers) if config.entitlement.enabled else (None, None)
    return Stack(config, profile, display_path(path), pem, mode)


def merge_layers(layers: list[Layer]) -> dict[str, Any]:
    merged: dict[str, Any] = {}
    for layer in layers:
        merged = merge(merged, layer.data)
    merged.pop("extends", None)
    return merged


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
    return load_file_fast(Path(path))


def bases(path: Path) -> set[Path]:
    """The (resolved) files `path` extends, directly or not; a missing or cyclic base raises."""
    return {Path(layer.source.file).resolve() for layer in _config_layers(path)[:-1]}


def _config_layers(path: Path) -> list[Layer]:
    """The chain of files `path` extends, base first."""
    chain: list[Layer] = []
    seen: list[Path] = []
    current: Path | None = path
    referencing: Document | None = None  # the file whose `extends:` named `current`
    while current is not None:
        resolved = current.resolve()
        if resolved in seen:
            cycle = " -> ".join(display_path(p) for p in [*seen, resolved])
            raise UserError(
                f"extends forms a cycle: {cycle}", _extends_at(referencing), field="extends"
            )
        if len(seen) >= _MAX_EXTENDS_DEPTH:
            raise UserError(
                "extends chain is too long", _extends_at(referencing), field="extends"
            )
        seen.append(resolved)
        try:
            document = read_document(current)
        except UserError as error:
            if referencing and error.message == "file not found":
                raise UserError(
                    f"base config {display_path(current)} not found",
                    _extends_at(referencing),
                    field="extends",
                ) from None
            if referencing and (error.location is None or not error.location.line):
                # A problem with the file as a whole (a folder, a FIFO, too large): say so
                # where `extends:` names it.
                raise UserError(
                    f"base config {display_path(current)}: {error.message}",
                    _extends_at(referencing),
                    field="extends",
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
        layer = Layer(document.data, document.source, (), current.parent)
        chain.append(layer)
        extends = document.data.get("extends")
        if extends is None:
            current = None
        elif not isinstance(extends, str) or not extends:
            raise UserError(
                "must be a path to a base config", document.source.value(("extends",)), "extends"
            )
        elif "\x00" in extends:
            raise UserError(
                "a file name cannot contain a NUL byte",
                document.source.value(("extends",)),
                "extends",
            )
        elif not extends.endswith(CONFIG_SUFFIXES):
            raise UserError(
                "must name a YAML config file (.yaml or .yml)",
                document.source.value(("extends",)),
                "extends",
            )
        else:
            referencing = document
            current = current.parent / extends
    chain.reverse()
    return chain


CONFIG_SUFFIXES = (".yaml", ".yml")


def _kind_of_value(value: Any) -> str:
    if isinstance(value, str):
        return "text"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    return describe(value) if isinstance(value, list) or value is None else "a value"


def _extends_at(document: Document | None) -> Location | None:
    # Positions are looked up only for an error: the fast reader finds them on demand.
    return document.source.value(("extends",)) if document else None


def _locate(layers: list[Layer], path: tuple[str | int, ...], key: bool = False) -> Location | None:
    """Where the winning value at `path` was written (the last layer that sets it)."""
    for layer in reversed(layers):
        full = (*layer.prefix, *path)
        found = layer.source.key(full) if key else layer.source.value(full)
        if found is None and key:
            found = layer.source.value(full)
        if found is not None:
            return found
    return None


def _nearest(layers: list[Layer], path: tuple[str | int, ...], key: bool = False) -> Location:
    path = tuple(path)
    while path:
        found = _locate(layers, path, key)
        if found:
            return found
        path = path[:-1]
    top = layers[-1]
    return top.source.nearest(())


def validate(model: type[BaseModel], data: Any, layers: list[Layer]) -> Any:
    """Validate `data` against `model`, turning the first error into a located UserError."""
    try:
        return model.model_validate(data)
    except ValidationError as errors:
        raise located_error(model, data, errors.errors(), layers) from None


def located_error(
    model: type[BaseModel], data: Any, errors: list[Any], layers: list[Layer]
) -> UserError:
    # An unknown field first: a typo also makes the field it meant "missing", and the typo is
    # the one mistake to point at.
    errors = sorted(errors, key=lambda error: error["type"] != "extra_forbidden")
    error = errors[0]
    path = _data_path(data, error["loc"])
    field = ".".join(str(part) for part in path) or None
    kind = error["type"]
    meant = None
    if kind == "extra_forbidden":
        choices = _field_names(model, path[:-1])
        meant = closest(str(path[-1]), choices)
        errors = [
            other for other in errors
            if not (other["type"] == "missing" and _data_path(data, other["loc"]) == (*path[:-1], meant))
        ]
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    conflict = (error.get("ctx") or {}).get("error")
    if isinstance(conflict, ConflictError):
        path = conflict.path
        return UserError(conflict.message, _nearest(layers, path), field=".".join(path))
    if kind == "extra_forbidden":
        return UserError(
            f"unknown field '{path[-1]}'{more}",
            _nearest(layers, path, key=True),
            field=field,
            hint=f"did you mean '{meant}'?" if meant else _allowed(choices),
        )
    if kind == "missing":
        return UserError(f"required field missing{more}", _nearest(layers, path[:-1]), field=field)
    location = _nearest(layers, path)
    got = error.get("input")
    if kind in ("literal_error", "enum"):
        expected = re.findall(r"'([^']*)'", error["ctx"]["expected"])
        hint = did_you_mean(str(got), expected) if isinstance(got, str) else None
        return UserError(
            f"{describe(got)} is not one of {', '.join(expected)}{more}", location, field, hint
        )
    if kind == "string_pattern_mismatch":
        return UserError(
            f"{got!r} {_pattern_text(error['ctx']['pattern'])}{more}", location, field
        )
    if kind == "string_type" and isinstance(got, (int, float)):
        # YAML reads 1.30 as the number 1.3 and true as a boolean: the fix is quoting.
        what = "a boolean" if isinstance(got, bool) else "a number"
        written = _written(layers, path)
        if written is None:
            return UserError(
                f"expected a string, got {what} ({describe(got)}){more}",
                location,
                field,
                hint="quote the value",
            )
        if what == "a number" and str(got) != written:
            what = f"the number {got!r}"
        return UserError(
            f"expected a string, but YAML reads {written} as {what}{more}",
            location,
            field,
            hint=f'quote it: "{written}"',
        )
    if kind == "string_too_long":
        limit = (error.get("ctx") or {}).get("max_length")
        shown = got if not isinstance(got, str) or len(got) <= 40 else f"{got[:40]}…"
        return UserError(
            f"{shown!r} is longer than {limit} characters{more}", location, _short(field)
        )
    if kind in _EXPECTED:
        # A quoted "true" or "4": YAML made it a string; strict fields take no strings.
        quoted = isinstance(got, str) and (
            (kind == "bool_type" and got in ("true", "false"))
            or (kind in ("int_type", "float_type") and got.lstrip("-").replace(".", "", 1).isdigit())
        )
        return UserError(
            f"expected {_EXPECTED[kind]}, got {describe(got)}{more}",
            location,
            field,
            hint="remove the quotes" if quoted else None,
        )
    message = error["msg"].removeprefix("Value error, ")
    return UserError(message + more, location, field)


def _short(field: str | None) -> str | None:
    """A field path shortened when a key in it is very long (a label key of hundreds of bytes)."""
    if field is None or len(field) <= 120:
        return field
    return f"{field[:117]}…"


# pydantic's type errors, in the words of the YAML the user wrote.
_EXPECTED = {
    "string_type": "a string",
    "int_type": "a whole number",
    "int_parsing": "a whole number",
    "int_from_float": "a whole number",
    "float_type": "a number",
    "float_parsing": "a number",
    "bool_type": "true or false",
    "bool_parsing": "true or false",
    "list_type": "a list",
    "dict_type": "a mapping",
    "model_type": "a mapping",
    "model_attributes_type": "a mapping",
}


def _written(layers: list[Layer], path: tuple[str | int, ...]) -> str | None:
    for layer in reversed(layers):
        full = (*layer.prefix, *path)
        if layer.source.value(full) is not None:
            return layer.source.written(full)
    return None


def _data_path(data: Any, loc: tuple[Any, ...]) -> tuple[str | int, ...]:
    """pydantic's error location without its type tags (e.g. 'bool', 'literal[...]')."""
    path: list[str | int] = []
    node = data
    for part in loc:
        if (isinstance(node, dict) and part in node) or (isinstance(node, list) and isinstance(part, int) and part < len(node)):
            path.append(part)
            node = node[part]
        elif isinstance(node, dict) and isinstance(part, str) and not _is_type_tag(part):
            path.append(part)  # a missing or unknown key
            node = None
    return tuple(path)


def _is_type_tag(part: str) -> bool:
    return part in {"bool", "str", "int", "float", "dict", "list"} or part.startswith(
        ("literal[", "constrained-str", "function-")
    )


def _field_names(model: type[BaseModel], path: tuple[str | int, ...]) -> list[str]:
    current: Any = model
    for part in path:
        if isinstance(part, int):
            continue
        if not (isinstance(current, type) and issubclass(current, BaseModel)):
            return []
        info = current.model_fields.get(str(part))
        if info is None:
            return []
        current = _model_in(info.annotation)
    if isinstance(current, type) and issubclass(current, BaseModel):
        return list(current.model_fields)
    return []


def _model_in(annotation: Any) -> Any:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for argument in getattr(annotation, "__args__", ()):
        found = _model_in(argument)
        if found is not None:
            return found
    return None


def _allowed(choices: list[str]) -> str | None:
    return f"allowed: {', '.join(choices)}" if choices else None


_PATTERNS = {
    "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$": "is not a valid DNS-1123 label (lowercase letters, digits "
    "and '-', starting and ending with a letter or digit, at most 63 characters)",
    r"^1\.[0-9]{2}$": "is not a Kubernetes minor version such as '1.31' (quote it in YAML)",
    r"^4\.[0-9]{1,2}$": "is not an OpenShift minor version such as '4.16' (quote it in YAML)",
    r"^v[0-9]+\.[0-9]+\.[0-9]+$": "is not a release tag such as 'v0.20.0'",
    r"\{name\}": "must contain {name} (the cluster's metadata.name), e.g. 'out/{name}'",
}


def _pattern_text(pattern: str) -> str:
    if pattern in _PATTERNS:
        return _PATTERNS[pattern]
    if pattern == REPO_URL:
        return "is not a Git repository URL (https://host/org/repo.git or git@host:org/repo.git)"
    if pattern == DURATION:
        return (
            "is not a Prometheus duration such as '15s' or '1m30s' "
            "(whole numbers, largest unit first)"
        )
    if pattern.startswith("^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.["):
        return "is not a valid label or taint key (e.g. 'nvidia.com/gpu')"
    if pattern.startswith("^(([A-Za-z0-9]"):
        return "is not a valid label value (at most 63 letters, digits, '-', '_' or '.')"
    return f"does not match {pattern}"


def _check_against_profile(config: GPUStack, profile: Profile, layers: list[Layer]) -> None:
    facts = profile.facts
    name = profile.metadata.name
    if config.driver.mode != "auto" and config.driver.mode not in facts.driver.modes:
        raise UserError(
            f"driver mode {config.driver.mode!r} is not available on profile {name!r}",
            _nearest(layers, ("driver", "mode")),
            field="driver.mode",
            hint=f"allowed: auto, {', '.join(facts.driver.modes)}",
        )
    if config.entitlement.enabled and not facts.machineConfigOperator:
        raise UserError(
            f"entitlement MachineConfigs exist only on OpenShift, not on profile {name!r}",
            _nearest(layers, ("entitlement", "enabled")),
            field="entitlement.enabled",
            hint="remove the entitlement section or use profile 'openshift'",
        )
    if config.platform.openshiftVersion and not facts.machineConfigOperator:
        raise UserError(
            f"platform.openshiftVersion applies only to OpenShift, not to profile {name!r}",
            _nearest(layers, ("platform", "openshiftVersion")),
            field="platform.openshiftVersion",
        )
    if (
        config.devicePlugin.enabled
        and facts.devicePluginProvider == "gke"
        and not _label_disables_gke_plugin(config)
    ):
        raise UserError(
            "GKE runs its own device plugin on GPU nodes; two plugins advertising nvidia.com/gpu "
            "on one node make allocation nondeterministic",
            _nearest(layers, ("devicePlugin", "enabled")),
            field="devicePlugin.enabled",
            hint="add 'gke-no-default-nvidia-gpu-device-plugin: \"true\"' to nodes.selector "
            "(and create the pool with that label) or set devicePlugin.enabled: false",
        )
    if _replaces_gke_device_plugin(config, profile) and config.driver.mode == "gke-managed":
        raise UserError(
            "GKE does not install the driver on nodes whose pool opts out of its device plugin, "
            "so NVIDIA's device plugin needs Google's driver installer",
            _nearest(layers, ("driver", "mode")),
            field="driver.mode",
            hint="set driver.mode: gke-installer (or auto) and create the pool with "
            "gpu-driver-version=disabled",
        )


def _replaces_gke_device_plugin(config: GPUStack, profile: Profile) -> bool:
    """NVIDIA's plugin runs instead of GKE's. The pool label that turns GKE's plugin off turns
    its driver install off too (NVIDIA/aicr #2047), and NVIDIA's GKE guide creates such pools with
    gpu-driver-version=disabled plus Google's installer DaemonSet (cloud-native-docs google-gke.rst)."""
    return config.devicePlugin.enabled and profile.facts.devicePluginProvider == "gke"


def _label_disables_gke_plugin(config: GPUStack) -> bool:
    # NVIDIA/cloud-native-docs gpu-operator/google-gke.rst: this node label disables GKE's plugin.
    return config.nodes.selector.get("gke-no-default-nvidia-gpu-device-plugin") == "true"


def _read_pem(config: GPUStack, layers: list[Layer]) -> tuple[bytes, int]:
    """The PEM's bytes and permission bits. Nothing of its content is ever quoted in an error."""
    path = ("entitlement", "pemFile")
    owner = next(
        (layer for layer in reversed(layers) if layer.source.value((*layer.prefix, *path))), None
    )
    base = owner.directory if owner and owner.directory else Path.cwd()
    pem_path = base / str(config.entitlement.pemFile)
    location = _nearest(layers, path)
    try:
        content = read_bounded(pem_path, 1024 * 1024, "an entitlement PEM", location=location)
        mode = stat.S_IMODE(os.stat(pem_path).st_mode)
    except UserError as error:
        if error.message.endswith("file not found"):
            error = UserError(f"entitlement PEM {display_path(pem_path)} not found", location)
        raise UserError(error.message, error.location, "entitlement.pemFile") from None
    except OSError:
        raise UserError(
            f"cannot read entitlement PEM {display_path(pem_path)}", location, "entitlement.pemFile"
        ) from None
    if b"-----BEGIN" not in content:
        raise UserError(
            f"{display_path(pem_path)} is not a PEM file (no '-----BEGIN' line)",
            location,
            "entitlement.pemFile",
        )
    return content, mode
