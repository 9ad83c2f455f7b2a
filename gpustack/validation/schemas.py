"""Where schemas come from: kubeconform-style locations, resolved offline, compiled once.

A location is what kubeconform's `-schema-location` takes: `default` (the core Kubernetes kinds,
here the strict schemas the `kubernetes-validate` package ships), a folder laid out like
kubernetes-json-schema, or a Go-template path ending in `.json` with the variables
NormalizedKubernetesVersion, StrictSuffix, ResourceKind, ResourceAPIVersion, Group and KindSuffix.
`gpustack` names the project's own CRD schemas (`schemas/{group}/{kind}_{version}.json`).
Locations are tried in order; the first that has a schema for a kind wins.

Schemas are untrusted input (a pull request can change a schema catalog in its repository, and
a CustomResourceDefinition among the manifests brings its own): every schema is compiled by
`compile_schema`, whose reference resolver never uses the network and reads only regular files
inside the schema's location, each through the bounded reader (gpustack.read.bounded); a schema from
the input may refer to nothing outside itself. A kind or apiVersion that is not a Kubernetes name
never fills a template (`../../etc/passwd` as a kind names no file), and a schema nests at most
MAX_NESTING levels.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urljoin, urlparse

import jsonschema_rs

from gpustack.errors import UserError
from gpustack.read.bounded import decode, read_bounded
from gpustack.validation.kubernetes_schemas import definitions, kubernetes_schemas_root
from gpustack.validation.kubeyaml import MAX_NESTING

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
# The largest schema file Kubernetes ships (kubernetes-validate's v1.37 _definitions.json) has
# 1.8 MB; a schema, or all the files one schema refers to, past this is not a schema catalog's.
MAX_SCHEMA_BYTES = 16 * 1024 * 1024
# Kubernetes' names (k8s.io/apimachinery pkg/util/validation: a group is a DNS-1123 subdomain,
# a version a DNS-1035 label; apiextensions-apiserver validation.go: a kind, lower-cased, is a
# DNS-1035 label), in either case: only these fill a schema-location template or name a file.
_LABEL = r"[A-Za-z0-9](?:[-A-Za-z0-9]{0,61}[A-Za-z0-9])?"
_GROUP = re.compile(rf"(?:{_LABEL}(?:\.{_LABEL})*)?")
_NAME = re.compile(_LABEL)
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
    # A few digits a part: a committed kustomization may hold thousands, which int() refuses.
    match = re.fullmatch(r"v?([0-9]{1,9})\.([0-9]{1,9})(?:\.[0-9]{1,9})?", version.strip())
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
    """The project's `schemas/` folder (platform_profiles.data_dir("schemas"), found here without loading
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
    root: str = ""  # the folder every schema file of the location (and each $ref) must be in

    def path(self, api_version: str, kind: str, version: str, strict: bool = True) -> str:
        assert self.template is not None
        return fill_template(self.template, api_version, kind, version, strict)


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
    fill_template(template, "apps/v1", "Deployment", "1.31")  # refuse bad templates up front
    fixed, action, variable = template.partition("{{")
    if action and ".." in re.split(r"[/\\]", variable):
        raise UserError(
            f"schema location template {spec!r} has '..' after a variable: the schema files "
            "it names could be anywhere",
            field="--schema-location",
            hint="write the folder the schemas are in before the first {{ variable }}",
        )
    return Location(spec, template, os.path.dirname(fixed) or ".")


def fill_template(
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
    _custom: dict[tuple[str, str], Any] = field(default_factory=dict)  # from the inputs' CRDs

    def with_schemas(
        self, schemas: dict[tuple[str, str], dict[str, Any] | SchemaError]
    ) -> SchemaStore:
        """This store, plus JSON Schemas for (apiVersion, kind)s that no location has (those
        of custom resources whose CustomResourceDefinition is among the inputs)."""
        extended = SchemaStore(self.version, self.locations, self.strict)
        for (api_version, kind), schema in schemas.items():
            try:
                if self.validator(api_version, kind) is not None:
                    continue
            except SchemaError:
                continue  # a location's schema for the kind is broken: that is the error shown
            what = f"the schema from the CustomResourceDefinition of {kind}"
            try:
                if isinstance(schema, SchemaError):
                    raise schema
                extended._validators[(api_version, kind)] = compile_schema(schema, what)
                extended._custom[(api_version, kind)] = schema
            except SchemaError as error:
                extended._validators[(api_version, kind)] = error
        return extended

    def validator(self, api_version: str, kind: str) -> Any:
        """A jsonschema_rs validator, or None when no location has a schema for the kind.

        Raises SchemaError when a schema exists but is broken."""
        key = (api_version, kind)
        if key not in self._validators:
            self._validators[key] = _not_a_name(api_version, kind) or self._find(api_version, kind)
        found = self._validators[key]
        if isinstance(found, SchemaError):
            raise found
        return found

    def allowed_fields(
        self, api_version: str, kind: str, schema_path: tuple[str | int, ...]
    ) -> list[str]:
        """The field names the schema of (apiVersion, kind) allows at `schema_path` (a
        validation error's, relative to the schema document its last $ref led to), for a
        "did you mean"; empty when that schema has no `properties` there."""
        for document in self._documents(api_version, kind):
            node: Any = document
            for part in schema_path:
                if isinstance(node, dict) and str(part) in node:
                    node = node[str(part)]
                elif isinstance(node, list) and isinstance(part, int) and part < len(node):
                    node = node[part]
                else:
                    node = None
                    break
            if isinstance(node, dict) and isinstance(node.get("properties"), dict):
                return sorted(node["properties"])
        return []

    def _documents(self, api_version: str, kind: str) -> list[Any]:
        """The schema documents the validator of (apiVersion, kind) was compiled from (read
        again: only an error asks, and each read is bounded as the first one was)."""
        key = (api_version, kind)
        if key in self._custom:
            return [self._custom[key]]
        try:
            if key == CONFIG:
                folder = str(schemas_dir())
                return [_read_schema(os.path.join(folder, CONFIG_SCHEMA), folder)[0]]
            for location in self.locations:
                if location.template is None:
                    name = _core_folder(self.version, self.strict)
                    path = _core_path(name, api_version, kind)
                    if path.is_file():
                        return [_read_schema(str(path), str(path.parent))[0], definitions(name)]
                else:
                    path_text = location.path(api_version, kind, self.version, self.strict)
                    if os.path.isfile(path_text):
                        return [_read_schema(path_text, location.root)[0]]
        except SchemaError:
            pass
        return []

    def _find(self, api_version: str, kind: str) -> Any:
        if (api_version, kind) == CONFIG:
            # gpustack's own config files: one validate hook can cover a whole repository.
            return _file_validator(str(schemas_dir() / CONFIG_SCHEMA), str(schemas_dir()))
        if (api_version, kind) == PROFILE:
            return _profile_validator()
        for location in self.locations:
            try:
                if location.template is None:
                    found = _core_validator(self.version, api_version, kind, self.strict)
                else:
                    found = _file_validator(
                        location.path(api_version, kind, self.version, self.strict),
                        location.root,
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


def _core_folder(version: str, strict: bool) -> str:
    return f"v{version}.0-local{'-strict' if strict else ''}"


def _core_path(folder: str, api_version: str, kind: str) -> Path:
    # kubernetes-validate names files like kubeconform's default registry:
    # <kind>-<first label of the group>-<version>.json, <kind>-<version>.json for the core group.
    group, _, resource_version = api_version.rpartition("/")
    suffix = f"{group.split('.')[0]}-{resource_version}" if group else resource_version
    return kubernetes_schemas_root() / folder / f"{kind.lower()}-{suffix.lower()}.json"


@lru_cache(maxsize=8)
def _core_registry(version: str, strict: bool = True) -> tuple[Path, Any]:
    name = _core_folder(version, strict)
    found = definitions(name)
    return kubernetes_schemas_root() / name, jsonschema_rs.Registry([(found["$id"], found)])


def _core_validator(version: str, api_version: str, kind: str, strict: bool = True) -> Any:
    folder, registry = _core_registry(version, strict)
    path = _core_path(folder.name, api_version, kind)
    if not path.is_file():
        return None
    schema, _ = _read_schema(str(path), str(folder))
    # Two groups can share a first label (apps and apps.example.com): the schema's own apiVersion
    # enum tells whether this file is really the kind asked for.
    served = schema.get("properties", {}).get("apiVersion", {}).get("enum", [api_version])
    if api_version not in served:
        return None
    # Every $ref of a core schema is into the registry's _definitions.json: nothing is retrieved.
    return compile_schema(
        schema, str(path), registry=registry, base_uri="https://kubernetes.io/api/schema.json"
    )


def _profile_validator() -> Any:
    """A platform profile file, as `gpustack.resolve.platform_profiles` reads it: the Profile model's schema; a
    profile that extends another may leave out what that one supplies (as `gpustack schema`
    relaxes the config schema, nested fields are required only of the merged profile)."""
    from gpustack.config.profile_model import Profile  # `validate` loads no config model

    schema = Profile.model_json_schema()
    for name, definition in schema.get("$defs", {}).items():
        if name not in ("Taint", "Metadata"):  # whole in any file, as in `gpustack schema`
            definition.pop("required", None)
    schema["if"] = {"not": {"required": ["extends"]}}
    schema["then"] = {"required": schema.pop("required", [])}
    return compile_schema(schema, "the Profile schema")


def _file_validator(path: str, root: str) -> Any:
    """The validator of the schema file at `path` (None when there is none), whose $refs may
    name other files inside `root`."""
    if not os.path.lexists(path):
        return None
    schema, size = _read_schema(path, root)
    base_uri = Path(os.path.abspath(path)).as_uri()
    return compile_schema(schema, path, root=root, base_uri=base_uri, spent=size)


def compile_schema(
    schema: Any,
    what: str,
    root: str | None = None,
    base_uri: str | None = None,
    registry: Any = None,
    spent: int = 0,
) -> Any:
    """The one place a JSON Schema is compiled: a jsonschema_rs validator, or SchemaError.

    A $ref is resolved only to a regular file inside `root`, read through the bounded reader,
    all of them together at most MAX_SCHEMA_BYTES less the `spent` bytes of the schema itself;
    with no root (a schema from the input, or one whose references are all in `registry`)
    nothing outside the schema is read. Nothing is ever fetched from the network: the
    resolver below is always given, so jsonschema_rs's own (which fetches http URLs) never
    runs."""
    _check_nesting(schema, what)
    references = _References(root, MAX_SCHEMA_BYTES - spent)
    try:
        if registry is None:
            validator = jsonschema_rs.validator_for(schema, base_uri=base_uri, retriever=references)
        else:
            validator = jsonschema_rs.validator_for(
                schema, base_uri=base_uri, registry=registry, retriever=references
            )
        if root is not None:  # a schema from a location's files (the input's refer to none)
            _check_expansion(schema, base_uri or "", references.documents, what)
        return validator
    except (ValueError, jsonschema_rs.ReferencingError) as error:
        if references.refused:
            raise SchemaError(f"{what}: {references.refused}") from None
        first_line = str(error).splitlines()[0] if str(error) else type(error).__name__
        if "Recursion limit" in first_line:
            first_line = "its references nest deeper than the schema engine allows"
        raise SchemaError(f"invalid schema {what}: {first_line}") from None


class _References:
    """jsonschema_rs's retriever: a `file://` URI inside the root, read bounded; else refused.

    A refusal is remembered, so the error names it rather than jsonschema_rs's wrapping."""

    def __init__(self, root: str | None, budget: int) -> None:
        self.root = root
        self.refused: str | None = None
        self.budget = budget
        self.documents: dict[str, Any] = {}  # what was read, by URI

    def __call__(self, uri: str) -> Any:
        try:
            return self._retrieve(uri)
        except SchemaError as error:
            self.refused = self.refused or str(error)
            raise ValueError(str(error)) from None

    def _retrieve(self, uri: str) -> Any:
        parsed = urlparse(uri)
        if parsed.scheme != "file":
            raise SchemaError(
                f"refers to {uri}, which is not a local file: gpustack never fetches a schema "
                "(it validates offline)"
            )
        if self.root is None:
            raise SchemaError(f"refers to {uri}: a schema from the input may refer only to itself")
        schema, size = _read_schema(unquote(parsed.path), self.root)
        self.documents[uri.partition("#")[0]] = schema
        self.budget -= size
        if self.budget < 0:
            raise SchemaError(
                f"refers to files of more than {MAX_SCHEMA_BYTES} bytes in all (16 MiB, the "
                "most one schema may read)"
            )
        return schema


def _read_schema(path: str, root: str) -> tuple[Any, int]:
    """The JSON of the schema file `path` and its size: a regular file inside the folder `root`
    as written and after following links, of at most MAX_SCHEMA_BYTES, MAX_NESTING levels deep."""
    for candidate, folder, how in (
        (os.path.abspath(path), os.path.abspath(root), ""),
        (os.path.realpath(path), os.path.realpath(root), " (through a symbolic link)"),
    ):
        if os.path.commonpath([candidate, folder]) != folder:
            raise SchemaError(f"schema {path} is outside the schema location's folder {root}{how}")
    try:
        raw = read_bounded(path, MAX_SCHEMA_BYTES, "a JSON Schema file")
        text = decode(raw, path)
    except UserError as error:
        raise SchemaError(f"cannot read schema {error}") from None
    try:
        schema = json.loads(text)
    except RecursionError:
        raise SchemaError(f"schema {path} nests more than {MAX_NESTING} levels deep") from None
    except ValueError as error:
        raise SchemaError(f"cannot read schema {path}: {error}") from None
    _check_nesting(schema, path)
    return schema, len(raw)


# Schemas that one value can be checked against at once, through $ref, allOf, anyOf, oneOf,
# not, if, then and else (a Kubernetes schema tree has a handful): past this, references that
# repeat references (each schema referring twice to the next, 30 times over, is a billion checks
# of every value) would hang validation, as an alias bomb would hang a YAML reader.
MAX_EXPANSION = 10_000
_SAME_VALUE = ("allOf", "anyOf", "oneOf")
_SAME_VALUE_ONE = ("not", "if", "then", "else")


def _check_expansion(schema: Any, base_uri: str, documents: dict[str, Any], what: str) -> None:
    """SchemaError when a value could be checked against more than MAX_EXPANSION schemas at
    once, counting each schema as often as references reach it (a reference cycle once)."""
    documents = {base_uri.partition("#")[0]: schema, **documents}
    sizes: dict[int, int] = {}
    in_progress: set[int] = set()

    def target(reference: str, uri: str) -> Any:
        address, _, pointer = urljoin(uri, reference).partition("#")
        node = documents.get(address)
        for part in pointer.split("/")[1:] if pointer else []:
            part = unquote(part).replace("~1", "/").replace("~0", "~")
            if isinstance(node, dict):
                node = node.get(part)
            elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            else:
                return None
        return node

    def size(node: Any, uri: str) -> int:
        if not isinstance(node, dict) or id(node) in in_progress:
            return 0
        if id(node) in sizes:
            return sizes[id(node)]
        in_progress.add(id(node))
        total = 1
        children = [node.get(keyword) for keyword in _SAME_VALUE_ONE]
        for keyword in _SAME_VALUE:
            if isinstance(node.get(keyword), list):
                children += node[keyword]
        if isinstance(node.get("$ref"), str):
            children.append(target(node["$ref"], uri))
        for child in children:
            total += size(child, uri)
            if total > MAX_EXPANSION:
                raise SchemaError(
                    f"schema {what}: its references make a value be checked against more than "
                    f"{MAX_EXPANSION} schemas at once (a reference bomb)"
                )
        in_progress.discard(id(node))
        sizes[id(node)] = total
        return total

    try:
        for uri, document in documents.items():
            stack = [document]
            while stack:
                node = stack.pop()
                if isinstance(node, dict):
                    size(node, uri)
                    stack.extend(node.values())
                elif isinstance(node, list):
                    stack.extend(node)
    except RecursionError:
        raise SchemaError(f"schema {what}: its references chain too deeply") from None


def _check_nesting(schema: Any, what: str) -> None:
    """SchemaError when `schema` nests more than MAX_NESTING levels (iteratively: no recursion
    limit is reached however deep it is)."""
    stack = [(schema, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_NESTING:
            raise SchemaError(f"schema {what} nests more than {MAX_NESTING} levels deep")
        if isinstance(node, dict):
            stack.extend((child, depth + 1) for child in node.values())
        elif isinstance(node, list):
            stack.extend((child, depth + 1) for child in node)


def _not_a_name(api_version: str, kind: str) -> SchemaError | None:
    """Why an apiVersion and kind are not Kubernetes names (so name no schema file), or None."""
    group, _, version = api_version.rpartition("/")
    if not _NAME.fullmatch(version) or not _GROUP.fullmatch(group) or len(group) > 253:
        return SchemaError(
            f"apiVersion {api_version!r} is not a Kubernetes group/version: no schema is "
            "looked up for it"
        )
    if not _NAME.fullmatch(kind):
        return SchemaError(f"kind {kind!r} is not a Kubernetes kind: no schema is looked up for it")
    return None
