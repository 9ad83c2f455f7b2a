"""Settings in layers (a profile's defaults, bases, the config, `--set`), merged and validated
against a model, with every validation error mapped back to the file, line and column that wrote
the value. Used for configs (gpustack.resolve.load) and profiles (gpustack.resolve.platform_profiles) alike.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from gpustack.config.field_types import (
    DNS1123_SUBDOMAIN,
    DURATION,
    EXTENDED_RESOURCE,
    IMAGE,
    IMAGE_BY_DIGEST,
    QUANTITY,
    REGISTRY,
    REPO_URL,
    RHCOS_BUILD,
    ConflictError,
)
from gpustack.config.gitops_settings import GO_DURATION
from gpustack.errors import Location, UserError, closest, describe, did_you_mean
from gpustack.read.yamlio import SourceMap


@dataclass(frozen=True)
class Layer:
    """One source of settings: a config file, a base it extends, or a profile's `defaults`."""

    data: dict[str, Any]
    source: SourceMap
    prefix: tuple[str | int, ...] = ()
    directory: Path | None = None
    path: Path | None = None  # the file, as read (its source names it as shown to the user)


class _FollowedSource(SourceMap):
    """Where a value that follows from another setting was written: where that setting is."""

    def __init__(self, path: tuple[str, ...], follows: tuple[str, ...], layers: list[Layer]):
        super().__init__("")
        self.path, self.follows, self._layers = path, follows, layers

    def value(self, path: tuple[str | int, ...]) -> Location | None:
        if tuple(path) != self.path[: len(path)] or not path:
            return None
        return locate(self._layers, self.follows)

    def key(self, path: tuple[str | int, ...]) -> Location | None:
        return self.value(path)

    def nearest(self, path: tuple[str | int, ...]) -> Location:
        return nearest(self._layers, self.follows)


def following(
    path: tuple[str, ...], value: Any, follows: tuple[str, ...], layers: list[Layer]
) -> Layer:
    """A layer holding `value` at `path`, which follows from the setting at `follows` (where the
    value is written, as far as an error or `--show-origin` is concerned)."""
    data: Any = value
    for key in reversed(path):
        data = {key: data}
    return Layer(data, _FollowedSource(path, follows, list(layers)))


def origin(layers: list[Layer], path: tuple[str, ...]) -> str:
    """Where the value in force at `path` was written, as `config show --show-origin` says it:
    `file:line:column` of the last layer that sets it (the profile's defaults are the first
    layer), `--set`, or the setting it follows."""
    for index, layer in reversed(list(enumerate(layers))):
        data: Any = layer.data
        for key in path:
            if not isinstance(data, dict) or key not in data:
                break
            data = data[key]
        else:
            source = layer.source
            if isinstance(source, _FollowedSource):
                follows = ".".join(source.follows)
                return f"{nearest(layers[:index], source.follows)} (follows {follows})"
            where = str(source.value((*layer.prefix, *path)) or source.nearest(path))
            if data is None and index > 0:
                # A null takes the bases' value away (without_taken_away): the profile's
                # default, if it has one, is in force again.
                below = origin(layers[:1], path)
                if below != "default":
                    return f"{below}; {where} takes the bases' value away"
            return f"{where} (profile default)" if index == 0 else where
    return "default"


def merge(base: Any, override: Any) -> Any:
    """Deep-merge mappings; lists and scalars in `override` replace those in `base`."""
    if isinstance(base, dict) and isinstance(override, dict):
        merged = dict(base)
        for key, value in override.items():
            merged[key] = merge(base[key], value) if key in base else value
        return merged
    return override


def merge_layers(layers: list[Layer]) -> dict[str, Any]:
    merged: dict[str, Any] = {}
    for layer in layers:
        merged = merge(merged, layer.data)
    merged.pop("extends", None)
    return merged


def without_taken_away(model: type[BaseModel], data: Any) -> Any:
    """`data` (layers merged) without the nulls that take a base's setting away: where the
    field cannot hold null, a null leaves it unset, so the profile's default or the field's
    own applies again (as Helm's `--set key=null` and a values file's `key: null` drop a key).
    A null the field takes as a value (`images.registry: null`, no mirror) stays."""
    if not isinstance(data, dict):
        return data
    fields = {
        **{name: info for name, info in model.model_fields.items()},
        **{info.alias: info for info in model.model_fields.values() if info.alias},
    }
    kept: dict[str, Any] = {}
    for key, value in data.items():
        info = fields.get(key)
        if info is None:
            kept[key] = value  # an unknown field: validation names it
        elif value is None:
            if _takes_null(info.annotation):
                kept[key] = value
        elif (inner := _model_in(info.annotation)) is not None and isinstance(value, dict):
            # A section left empty by the nulls is no setting (an empty one written is kept).
            section = without_taken_away(inner, value)
            if section or not value:
                kept[key] = section
        else:
            kept[key] = value
    return kept


def _takes_null(annotation: Any) -> bool:
    return annotation is None or type(None) in getattr(annotation, "__args__", ())


def locate(layers: list[Layer], path: tuple[str | int, ...], key: bool = False) -> Location | None:
    """Where the winning value at `path` was written (the last layer that sets it)."""
    for layer in reversed(layers):
        full = (*layer.prefix, *path)
        found = layer.source.key(full) if key else layer.source.value(full)
        if found is None and key:
            found = layer.source.value(full)
        if found is not None:
            return found
    return None


def nearest(layers: list[Layer], path: tuple[str | int, ...], key: bool = False) -> Location:
    path = tuple(path)
    while path:
        found = locate(layers, path, key)
        if found:
            return found
        path = path[:-1]
    top = layers[-1]
    return top.source.nearest(())


def set_by_user(layers: list[Layer], path: tuple[str, ...]) -> bool:
    """Whether a layer above the profile's defaults (the first) sets `path`, read from the
    layers' data: positions are worked out only for an error."""
    for layer in layers[1:]:
        data: Any = layer.data
        for key in path:
            data = data.get(key) if isinstance(data, dict) else None
        if data is not None:
            return True
    return False


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
        return UserError(
            conflict.message,
            nearest(layers, path),
            field=".".join(str(part) for part in path),
        )
    if kind == "extra_forbidden":
        word = meant.get(path)
        return UserError(
            f"unknown field '{path[-1]}'",
            nearest(layers, path, key=True),
            field=field,
            hint=f"did you mean '{word}'?" if word else _allowed(_field_names(model, path[:-1])),
        )
    if kind == "missing":
        return UserError("required field missing", nearest(layers, path[:-1]), field=field)
    location = nearest(layers, path)
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
            hint=_quoting_hint(written, _field_pattern(model, path)),
        )
    if kind == "string_too_long":
        limit = (error.get("ctx") or {}).get("max_length")
        shown = got if not isinstance(got, str) or len(got) <= 40 else f"{got[:40]}…"
        return UserError(f"{shown!r} is longer than {limit} characters", location, _short(field))
    if kind in _EXPECTED:
        # A quoted "true" or "4": YAML made it a string; strict fields take no strings.
        quoted = isinstance(got, str) and (
            (kind == "bool_type" and got in ("true", "false"))
            or (
                kind in ("int_type", "float_type") and got.lstrip("-").replace(".", "", 1).isdigit()
            )
        )
        return UserError(
            f"expected {_EXPECTED[kind]}, got {describe(got)}",
            location,
            field,
            hint="remove the quotes" if quoted else None,
        )
    if kind in _LIMITS:
        return UserError(_LIMITS[kind](got, error.get("ctx") or {}), location, field)
    message = error["msg"].removeprefix("Value error, ")
    return UserError(message, location, field)


def _quoting_hint(written: str, pattern: str | None) -> str:
    """How to write the value as a string the field takes: quoted, where that is enough; else a
    value of the field's form (`interval: 30` quoted is still no duration: "30s" is)."""
    if pattern is None or re.search(pattern, written):
        return f'quote it: "{written}"'
    if pattern == DURATION and written.isdigit():
        return f'give its unit: "{written}s" for seconds, "{written}m" for minutes'
    return f"quoted, {written!r} {_pattern_text(pattern)}"


def _field_pattern(model: type[BaseModel], path: tuple[str | int, ...]) -> str | None:
    """The regular expression a string field at `path` must match, if the model gives one."""
    *sections, name = [part for part in path if isinstance(part, str)] or [""]
    current: Any = model
    for section in sections:
        info = current.model_fields.get(section) if _is_model(current) else None
        current = _model_in(info.annotation) if info is not None else None
    info = current.model_fields.get(name) if _is_model(current) else None
    if info is None:
        return None
    for constraint in info.metadata:
        pattern = getattr(constraint, "pattern", None)
        if isinstance(pattern, str):
            return pattern
    return None


def _is_model(value: Any) -> bool:
    return isinstance(value, type) and issubclass(value, BaseModel)


def _length(got: Any) -> int:
    return len(got) if hasattr(got, "__len__") else 0


# pydantic's range and length errors, said the way a reviewer would.
_LIMITS: dict[str, Any] = {
    "greater_than_equal": lambda got, ctx: (
        f"{describe(got)} is too small: the least allowed is {ctx.get('ge')}"
    ),
    "greater_than": lambda got, ctx: (
        f"{describe(got)} is too small: it must be more than {ctx.get('gt')}"
    ),
    "less_than_equal": lambda got, ctx: (
        f"{describe(got)} is too large: the most allowed is {ctx.get('le')}"
    ),
    "less_than": lambda got, ctx: (
        f"{describe(got)} is too large: it must be less than {ctx.get('lt')}"
    ),
    "string_too_long": lambda got, ctx: (
        f"{describe(got)} is {_length(got)} characters long: "
        f"at most {ctx.get('max_length')} are allowed"
    ),
    "string_too_short": lambda got, ctx: (
        "must not be empty"
        if not got
        else f"{describe(got)} is too short: at least {ctx.get('min_length')} characters"
    ),
    "too_long": lambda got, ctx: (
        f"has {_length(got)} items: at most {ctx.get('max_length')} are allowed"
    ),
    "too_short": lambda got, ctx: (
        f"has {_length(got)} items: at least {ctx.get('min_length')} are needed"
    ),
}


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
        if (isinstance(node, dict) and part in node) or (
            isinstance(node, list) and isinstance(part, int) and part < len(node)
        ):
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
    DNS1123_SUBDOMAIN: "is not a valid DNS-1123 subdomain (lowercase letters, digits, '-' and "
    "'.', starting and ending with a letter or digit)",
    EXTENDED_RESOURCE: "is not an extended resource name with its domain, such as 'nvidia.com/gpu'",
    GO_DURATION: "is not a duration as Argo CD reads it: seconds such as '30', or '90s', '10m', "
    "'1h30m'",
    IMAGE: "is not an image reference such as 'nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0'",
    IMAGE_BY_DIGEST: "is not an image by digest such as "
    "'quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:<64 hex digits>' (a tag alone may "
    "move to another build)",
    RHCOS_BUILD: "is not an RHCOS build such as '418.94.202501221327-0' or '9.6.20250916-0' (NFD's "
    "system-os_release.OSTREE_VERSION)",
    QUANTITY: "is not a Kubernetes quantity such as '100m', '0.5', '512Mi' or '2Gi'",
    REGISTRY: "is not a registry such as 'registry.example.com' or "
    "'registry.example.com:5000/mirror' (no scheme; a host with a dot or a port from 1 to "
    "65535, or localhost, else container runtimes read it as a Docker Hub namespace)",
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
