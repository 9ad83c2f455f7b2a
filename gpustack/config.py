"""From config files on disk to a resolved `Stack`: read, follow `extends:`, merge the profile's
defaults beneath, validate, and map every validation error back to the file, line and column.

This is the only module that reads config files; everything after it works on plain data.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from gpustack import profiles as profile_store
from gpustack.errors import Location, UserError, closest, describe, did_you_mean, display_path
from gpustack.model import DURATION, ConflictError, GPUStack, Profile, ProfileFacts
from gpustack.yamlio import Document, SourceMap, load_file, load_file_fast, load_text

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
    # Settings left out because they do not apply to the profile: (field path, why).
    left_out: tuple[tuple[str, str], ...] = ()

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


class _OverrideSource(SourceMap):
    """Where `--set` values come from: the option itself, each value as the user typed it."""

    def __init__(self, written: dict[tuple[str | int, ...], str]) -> None:
        where = Location("--set")
        paths = {path[:end] for path in written for end in range(1, len(path) + 1)}
        super().__init__("--set", dict.fromkeys(paths, where), dict.fromkeys(paths, where))
        self.typed = written

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
    return Layer(data, _OverrideSource(written))


def load_stack(
    path: Path | None,
    profile_name: str | None = None,
    profiles_dir: Path | None = None,
    leave_out_inapplicable: bool = False,
    override: Layer | None = None,
) -> Stack:
    """Load one cluster config (or the embedded example when `path` is None).

    `leave_out_inapplicable` (comparing one config on several profiles): a setting the profile
    refuses (e.g. `platform.openshiftVersion` on rke2) is left out, back to the profile's
    default, and named in `Stack.left_out`, instead of being an error. `override` (`--set`)
    goes above the file.
    """
    if path is None:
        path = profile_store.data_dir("examples") / "kubeadm.yaml"
    layers = _config_layers(path)
    file_layer = layers[-1]
    if override is not None:
        layers.append(override)
    combined = merge_layers(layers)
    _check_is_config(combined, file_layer)
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
    left_out: list[tuple[str, str]] = []
    while True:
        try:
            _check_against_profile(config, profile, all_layers)
            break
        except UserError as problem:
            done = {field for field, _ in left_out}
            if not leave_out_inapplicable or problem.field is None or problem.field in done:
                raise
            merged = _without(merged, tuple(problem.field.split(".")), profile_layer.data)
            left_out.append((problem.field, problem.message))
            config = validate(GPUStack, merged, all_layers)
    pem = _read_pem(config, all_layers) if config.entitlement.enabled else None
    return Stack(config, profile, display_path(path), pem, tuple(left_out))


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


# A config path of `-` reads the config from standard input (bases relative to the working folder).
STDIN = "-"
_stdin: list[tuple[Any, Document]] = []  # read once per stdin: diff may load a config twice


def _stdin_document() -> Document:
    import sys

    from gpustack.yamlio import MAX_FILE_BYTES

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


def bases(path: Path) -> set[Path]:
    """The (resolved) files `path` extends, directly or not; a missing or cyclic base raises."""
    return {Path(layer.source.file).resolve() for layer in _config_layers(path)[:-1]}


def _config_layers(path: Path) -> list[Layer]:
    """The files `path` extends, bases first, then `path` itself.

    `extends:` is one path or a list of paths, applied in order (a later base overrides an
    earlier one, the file overrides them all); each base may extend others in turn.
    """
    chain: list[Layer] = []
    _add_layers(path, chain, [], None)
    return chain


Reference = tuple[Document, tuple[str | int, ...]]  # the file and the `extends:` entry naming a base


def _add_layers(
    current: Path, chain: list[Layer], seen: list[Path], referencing: Reference | None
) -> None:
    resolved = current.resolve()
    if resolved in seen:
        cycle = " -> ".join(display_path(p) for p in [*seen, resolved])
        raise UserError(
            f"extends forms a cycle: {cycle}", _extends_at(referencing), field="extends"
        )
    if len(seen) >= _MAX_EXTENDS_DEPTH:
        raise UserError("extends chain is too long", _extends_at(referencing), field="extends")
    try:
        document = _stdin_document() if str(current) == STDIN else read_document(current)
    except UserError as error:
        if referencing and error.message == "file not found":
            raise UserError(
                f"base config {display_path(current)} not found",
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
        raise UserError(
            "expected a GPUStack config (a mapping with apiVersion, kind, metadata, ...), "
            f"found {describe(document.data)}",
            document.source.nearest(()),
        )
    extends = document.data.get("extends")
    entries: list[tuple[Any, tuple[str | int, ...]]] = (
        [(item, ("extends", index)) for index, item in enumerate(extends)]
        if isinstance(extends, list)
        else [] if extends is None else [(extends, ("extends",))]
    )
    if isinstance(extends, list) and not extends:
        raise UserError(
            "must name at least one base config", document.source.value(("extends",)), "extends"
        )
    for entry, where in entries:
        if not isinstance(entry, str) or not entry:
            field = ".".join(str(part) for part in where)
            raise UserError(
                "must be a path to a base config, or a list of them",
                document.source.value(where) or document.source.value(("extends",)),
                field,
            )
    for entry, where in entries:
        _add_layers(current.parent / entry, chain, [*seen, resolved], (document, where))
    chain.append(Layer(document.data, document.source, (), current.parent))


def _extends_at(referencing: Reference | None) -> Location | None:
    # Positions are looked up only for an error: the fast reader finds them on demand.
    if referencing is None:
        return None
    document, where = referencing
    return document.source.value(where) or document.source.value(("extends",))


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
    """One UserError for every problem pydantic found, each at its file, line and column: the
    first one raised, the others in its `also`, in the order they appear in the files."""
    # A typo also makes the field it meant "missing": the typo is the one mistake to point at.
    typos = [error for error in errors if error["type"] == "extra_forbidden"]
    meant: dict[tuple[str | int, ...], str | None] = {}
    for error in typos:
        path = _data_path(data, error["loc"])
        meant[path] = closest(str(path[-1]), _field_names(model, path[:-1]))
    hidden = {(*path[:-1], word) for path, word in meant.items() if word}
    problems: list[UserError] = []
    for error in errors:
        if error["type"] == "missing" and _data_path(data, error["loc"]) in hidden:
            continue
        problem = _one_error(model, data, error, layers, meant)
        if str(problem) not in {str(other) for other in problems}:
            problems.append(problem)
    problems.sort(key=_position)
    first, *rest = problems
    first.also = tuple(rest)
    return first


def _position(problem: UserError) -> tuple[str, int, int]:
    where = problem.location
    return (where.file, where.line, where.column) if where else ("", 0, 0)


def _one_error(
    model: type[BaseModel],
    data: Any,
    error: Any,
    layers: list[Layer],
    meant: dict[tuple[str | int, ...], str | None],
) -> UserError:
    path = _data_path(data, error["loc"])
    field = ".".join(str(part) for part in path) or None
    kind = error["type"]
    conflict = (error.get("ctx") or {}).get("error")
    if isinstance(conflict, ConflictError):
        path = conflict.path
        return UserError(conflict.message, _nearest(layers, path), field=".".join(path))
    if kind == "extra_forbidden":
        word = meant.get(path)
        return UserError(
            f"unknown field '{path[-1]}'",
            _nearest(layers, path, key=True),
            field=field,
            hint=f"did you mean '{word}'?" if word else _allowed(_field_names(model, path[:-1])),
        )
    if kind == "missing":
        return UserError("required field missing", _nearest(layers, path[:-1]), field=field)
    location = _nearest(layers, path)
    got = error.get("input")
    if kind in ("literal_error", "enum"):
        expected = re.findall(r"'([^']*)'", error["ctx"]["expected"])
        hint = did_you_mean(str(got), expected) if isinstance(got, str) else None
        return UserError(
            f"{describe(got)} is not one of {', '.join(expected)}", location, field, hint
        )
    if kind == "string_pattern_mismatch":
        return UserError(f"{got!r} {_pattern_text(error['ctx']['pattern'])}", location, field)
    if kind == "string_type" and isinstance(got, (int, float)):
        # YAML reads 1.30 as the number 1.3 and true as a boolean: the fix is quoting.
        what = "a boolean" if isinstance(got, bool) else "a number"
        written = _written(layers, path)
        if written is None:
            return UserError(
                f"expected a string, got {what} ({describe(got)})",
                location,
                field,
                hint="quote the value",
            )
        if what == "a number" and str(got) != written:
            what = f"the number {got!r}"
        return UserError(
            f"expected a string, but YAML reads {written} as {what}",
            location,
            field,
            hint=f'quote it: "{written}"',
        )
    if kind in _EXPECTED:
        return UserError(f"expected {_EXPECTED[kind]}, got {describe(got)}", location, field)
    if kind in _LIMITS:
        return UserError(_LIMITS[kind](got, error.get("ctx") or {}), location, field)
    message = error["msg"].removeprefix("Value error, ")
    return UserError(message, location, field)


def _length(got: Any) -> int:
    return len(got) if hasattr(got, "__len__") else 0


# pydantic's range and length errors, said the way a reviewer would.
_LIMITS: dict[str, Any] = {
    "greater_than_equal": lambda got, ctx: f"{describe(got)} is too small: the least allowed is "
    f"{ctx.get('ge')}",
    "greater_than": lambda got, ctx: f"{describe(got)} is too small: it must be more than "
    f"{ctx.get('gt')}",
    "less_than_equal": lambda got, ctx: f"{describe(got)} is too large: the most allowed is "
    f"{ctx.get('le')}",
    "less_than": lambda got, ctx: f"{describe(got)} is too large: it must be less than "
    f"{ctx.get('lt')}",
    "string_too_long": lambda got, ctx: f"{describe(got)} is {_length(got)} characters long: "
    f"at most {ctx.get('max_length')} are allowed",
    "string_too_short": lambda got, ctx: "must not be empty" if not got else
    f"{describe(got)} is too short: at least {ctx.get('min_length')} characters",
    "too_long": lambda got, ctx: f"has {_length(got)} items: at most {ctx.get('max_length')} "
    "are allowed",
    "too_short": lambda got, ctx: f"has {_length(got)} items: at least {ctx.get('min_length')} "
    "are needed",
}


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


def _read_pem(config: GPUStack, layers: list[Layer]) -> bytes:
    path = ("entitlement", "pemFile")
    owner = next(
        (layer for layer in reversed(layers) if layer.source.value((*layer.prefix, *path))), None
    )
    base = owner.directory if owner and owner.directory else Path.cwd()
    pem_path = base / str(config.entitlement.pemFile)
    location = _nearest(layers, path)
    try:
        if pem_path.stat().st_size > 1024 * 1024:
            raise UserError("entitlement PEM is larger than 1 MiB", location, field="entitlement.pemFile")
        content = pem_path.read_bytes()
    except FileNotFoundError:
        raise UserError(
            f"entitlement PEM {display_path(pem_path)} not found", location, "entitlement.pemFile"
        ) from None
    except (PermissionError, IsADirectoryError, OSError):
        raise UserError(
            f"cannot read entitlement PEM {display_path(pem_path)}",
            location,
            "entitlement.pemFile",
        ) from None
    if b"-----BEGIN" not in content:
        raise UserError(
            f"{display_path(pem_path)} is not a PEM file (no '-----BEGIN' line)",
            location,
            "entitlement.pemFile",
        )
    return content
