"""Where schemas come from: kubeconform-style locations, resolved offline, compiled once.

A location is what kubeconform's `-schema-location` takes: `default` (the core Kubernetes kinds,
here the strict schemas the `kubernetes-validate` package ships), a folder laid out like
kubernetes-json-schema, or a Go-template path ending in `.json` with the variables
NormalizedKubernetesVersion, StrictSuffix, ResourceKind, ResourceAPIVersion, Group and KindSuffix.
`gpustack` names the project's own CRD schemas (`schemas/{group}/{kind}_{version}.json`).
Locations are tried in order; the first that has a schema for a kind wins.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import jsonschema_rs

from gpustack.errors import UserError
from gpustack.kubernetes_schemas import definitions, kubernetes_schemas_root

DEFAULT = "default"
PROJECT = "gpustack"
DEFAULT_LOCATIONS = (DEFAULT, PROJECT)
# kubeconform's layout of the project's CRD schemas (and of the CRDs-catalog).
CRD_TEMPLATE = "{{ .Group }}/{{ .ResourceKind }}_{{ .ResourceAPIVersion }}.json"
# kubeconform: a location that does not end in .json is a kubernetes-json-schema style tree.
TREE_TEMPLATE = (
    "/{{ .NormalizedKubernetesVersion }}-standalone{{ .StrictSuffix }}"
    "/{{ .ResourceKind }}{{ .KindSuffix }}.json"
)
TEMPLATE_VARIABLES = (
    "NormalizedKubernetesVersion",
    "StrictSuffix",
    "ResourceKind",
    "ResourceAPIVersion",
    "Group",
    "KindSuffix",
)
# A gpustack cluster config, checked against the config schema `gpustack schema` writes.
CONFIG = ("gpustack.dev/v1alpha1", "GPUStack")
CONFIG_SCHEMA = "gpustack.schema.json"
PROFILE = ("gpustack.dev/v1alpha1", "Profile")
_ACTION = re.compile(r"\{\{-?\s*(.*?)\s*-?\}\}")
_VARIABLE = re.compile(r"^\.([A-Za-z]+)$")


@lru_cache(maxsize=1)
def supported_versions() -> tuple[str, ...]:
    """The Kubernetes minor versions whose schemas are installed, oldest first."""
    found = []
    for folder in kubernetes_schemas_root().glob("v*-local-strict"):
        match = re.match(r"^v(\d+)\.(\d+)\.\d+-local-strict$", folder.name)
        if match:
            found.append((int(match[1]), int(match[2])))
    return tuple(f"{major}.{minor}" for major, minor in sorted(found))


def minor_version(version: str, field: str = "--kubernetes-version") -> str:
    """'1.31', 'v1.31' or '1.31.4' -> '1.31'; anything outside the installed range is refused."""
    match = re.fullmatch(r"v?(\d+)\.(\d+)(?:\.\d+)?", version.strip())
    versions = supported_versions()
    if not match or f"{int(match[1])}.{int(match[2])}" not in versions:
        raise UserError(
            f"Kubernetes version {version!r} is not supported",
            field=field,
            hint=f"schemas are installed for {versions[0]} to {versions[-1]}",
        )
    return f"{int(match[1])}.{int(match[2])}"


def project_template() -> str:
    """The template that finds the project's own CRD schemas, as kubeconform would be given it."""
    return f"{schemas_dir()}/{CRD_TEMPLATE}"


def schemas_dir() -> Path:
    """The project's `schemas/` folder (profiles.data_dir("schemas"), found here without loading
    the config model)."""
    packaged = Path(__file__).resolve().parent.parent / "_data" / "schemas"
    if packaged.is_dir():
        return packaged
    return Path(__file__).resolve().parent.parent.parent / "schemas"


@dataclass(frozen=True)
class Location:
    """One place to look for schemas: the core package, or a local path template."""

    spec: str  # as the user wrote it
    template: str | None  # None for the core schemas

    def path(self, api_version: str, kind: str, version: str, strict: bool = True) -> str:
        assert self.template is not None
        return render_template(self.template, api_version, kind, version, strict)


def parse_location(spec: str) -> Location:
    """A --schema-location value; a bad template or a remote URL is a usage error (exit 2)."""
    if spec == DEFAULT:
        return Location(spec, None)
    template = project_template() if spec == PROJECT else spec
    if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*://", template):
        raise UserError(
            f"remote schema location {spec!r}: gpustack validates offline",
            field="--schema-location",
            hint="download the schemas and pass a local path template, or use --engine kubeconform",
        )
    if not template.endswith("json"):
        template = template.rstrip("/") + TREE_TEMPLATE
    render_template(template, "apps/v1", "Deployment", "1.31")  # refuse bad templates up front
    return Location(spec, template)


def render_template(
    template: str, api_version: str, kind: str, version: str, strict: bool = True
) -> str:
    """Fill in a kubeconform schema-location template (its Go-template variables only) for a
    Kubernetes minor version such as '1.31'."""
    group, _, resource_version = api_version.rpartition("/")
    first_label = (group or resource_version).split(".")[0].lower()
    values = {
        "NormalizedKubernetesVersion": f"v{version}.0",
        "StrictSuffix": "-strict" if strict else "",
        "ResourceKind": kind.lower(),
        "ResourceAPIVersion": resource_version,
        "Group": group,
        "KindSuffix": f"-{first_label}" + (f"-{resource_version.lower()}" if group else ""),
    }

    def fill(match: re.Match[str]) -> str:
        variable = _VARIABLE.match(match[1])
        if not variable or variable[1] not in values:
            raise UserError(
                f"schema location template {template!r}: cannot evaluate {{{{{match[1]}}}}}",
                field="--schema-location",
                hint="variables: " + ", ".join(f".{name}" for name in TEMPLATE_VARIABLES),
            )
        return values[variable[1]]

    result = _ACTION.sub(fill, template)
    if "{{" in result or "}}" in result:
        raise UserError(
            f"schema location template {template!r} has an unclosed {{{{ action",
            field="--schema-location",
        )
    return result


class SchemaError(Exception):
    """A schema file was found but cannot be used (not JSON, not a valid JSON Schema)."""


@dataclass
class SchemaStore:
    """Compiled validators per (apiVersion, kind) for one Kubernetes version and location list.

    Each schema is read and compiled once; a kind with no schema is remembered as such.
    """

    version: str  # minor, e.g. "1.31"
    locations: tuple[Location, ...]
    strict: bool = True  # kubeconform's -strict: unknown fields are errors
    _validators: dict[tuple[str, str], Any] = field(default_factory=dict)

    def with_schemas(self, schemas: dict[tuple[str, str], dict[str, Any]]) -> SchemaStore:
        """This store, plus JSON Schemas for (apiVersion, kind)s that no location has (those
        of custom resources whose CustomResourceDefinition is among the inputs)."""
        extended = SchemaStore(self.version, self.locations, self.strict)
        for (api_version, kind), schema in schemas.items():
            if self.validator(api_version, kind) is None:
                try:
                    extended._validators[(api_version, kind)] = jsonschema_rs.validator_for(schema)
                except (ValueError, jsonschema_rs.ReferencingError) as error:
                    first_line = str(error).splitlines()[0] if str(error) else "invalid"
                    extended._validators[(api_version, kind)] = SchemaError(
                        f"invalid schema from the CustomResourceDefinition of {kind}: {first_line}"
                    )
        return extended

    def validator(self, api_version: str, kind: str) -> Any:
        """A jsonschema_rs validator, or None when no location has a schema for the kind.

        Raises SchemaError when a schema exists but is broken."""
        key = (api_version, kind)
        if key not in self._validators:
            self._validators[key] = self._find(api_version, kind)
        found = self._validators[key]
        if isinstance(found, SchemaError):
            raise found
        return found

    def _find(self, api_version: str, kind: str) -> Any:
        if (api_version, kind) == CONFIG:
            # gpustack's own config files: one validate hook can cover a whole repository.
            return _file_validator(str(schemas_dir() / CONFIG_SCHEMA))
        if (api_version, kind) == PROFILE:
            return _profile_validator()
        for location in self.locations:
            try:
                if location.template is None:
                    found = _core_validator(self.version, api_version, kind, self.strict)
                else:
                    found = _file_validator(
                        location.path(api_version, kind, self.version, self.strict)
                    )
            except SchemaError as error:
                return error
            if found is not None:
                return found
        return None


def store(
    kubernetes_version: str,
    locations: tuple[str, ...] = DEFAULT_LOCATIONS,
    field: str = "--kubernetes-version",
    strict: bool = True,
) -> SchemaStore:
    """The (cached) schema store for a version and a list of --schema-location values;
    `field` names where the version came from, for the error when it is not supported."""
    return _store(minor_version(kubernetes_version, field), tuple(locations), strict)


@lru_cache(maxsize=32)
def _store(version: str, locations: tuple[str, ...], strict: bool) -> SchemaStore:
    return SchemaStore(version, tuple(parse_location(spec) for spec in locations), strict)


@lru_cache(maxsize=8)
def _core_registry(version: str, strict: bool = True) -> tuple[Path, Any]:
    name = f"v{version}.0-local{'-strict' if strict else ''}"
    found = definitions(name)
    return kubernetes_schemas_root() / name, jsonschema_rs.Registry([(found["$id"], found)])


def _core_validator(version: str, api_version: str, kind: str, strict: bool = True) -> Any:
    # kubernetes-validate names files like kubeconform's default registry:
    # <kind>-<first label of the group>-<version>.json, <kind>-<version>.json for the core group.
    group, _, resource_version = api_version.rpartition("/")
    suffix = f"{group.split('.')[0]}-{resource_version}" if group else resource_version
    folder, registry = _core_registry(version, strict)
    path = folder / f"{kind.lower()}-{suffix.lower()}.json"
    if not path.is_file():
        return None
    schema = json.loads(path.read_text(encoding="utf-8"))
    # Two groups can share a first label (apps and apps.example.com): the schema's own apiVersion
    # enum tells whether this file is really the kind asked for.
    served = schema.get("properties", {}).get("apiVersion", {}).get("enum", [api_version])
    if api_version not in served:
        return None
    return jsonschema_rs.validator_for(
        schema, registry=registry, base_uri="https://kubernetes.io/api/schema.json"
    )


def _profile_validator() -> Any:
    """A platform profile file, as `gpustack.profiles` reads it: the Profile model's schema; a
    profile that extends another may leave out what that one supplies (as `gpustack schema`
    relaxes the config schema, nested fields are required only of the merged profile)."""
    from gpustack.model import Profile  # here, not on top: validate must not load pydantic models

    schema = Profile.model_json_schema()
    for name, definition in schema.get("$defs", {}).items():
        if name not in ("Taint", "Metadata"):  # whole in any file, as in `gpustack schema`
            definition.pop("required", None)
    schema["if"] = {"not": {"required": ["extends"]}}
    schema["then"] = {"required": schema.pop("required", [])}
    return jsonschema_rs.validator_for(schema)


def _file_validator(path: str) -> Any:
    file = Path(path)
    if not file.is_file():
        return None
    try:
        schema = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as error:
        raise SchemaError(f"cannot read schema {path}: {error}") from None
    try:
        return jsonschema_rs.validator_for(
            schema, base_uri=file.resolve().as_uri(), retriever=_local_schema
        )
    except (ValueError, jsonschema_rs.ReferencingError) as error:
        first_line = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise SchemaError(f"invalid schema {path}: {first_line}") from None


def _local_schema(uri: str) -> Any:
    """$refs between local schema files (kubernetes-json-schema's non-standalone trees)."""
    if not uri.startswith("file://"):
        raise ValueError(f"{uri}: only local schema references can be followed offline")
    return json.loads(Path(unquote(urlparse(uri).path)).read_text(encoding="utf-8"))
