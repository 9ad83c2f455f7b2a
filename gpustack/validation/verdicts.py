"""Verdicts per resource, in kubeconform's four kinds: valid, invalid, error, skipped.

`invalid` means the object was checked and is wrong (schema or lint errors); `error` means it could
not be checked (unreadable, not YAML, not an object, no apiVersion or kind, no schema for its kind,
a rejected kind). Schema problems are findings with rule "schema"; problems that stop a check are
findings with rule "manifest".
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from gpustack.errors import Location, UserError, did_you_mean, display_path
from gpustack.findings import Finding
from gpustack.objects import Identity, display, identity, kind_of, namespace_of, text
from gpustack.objects import metadata as metadata_of
from gpustack.read.yamlio import load_all_text
from gpustack.validation import crds
from gpustack.validation.manifests import Resource, cluster_folder, files, read, shown
from gpustack.validation.schemas import CONFIG, PROFILE, SchemaError, SchemaStore

Status = Literal["valid", "invalid", "error", "skipped"]
SCHEMA = "schema"
MANIFEST = "manifest"
# kustomize's own files (kustomization.yaml) are read by kustomize, never stored by a cluster:
# they have no name to require.
_UNNAMED = ("kustomize.config.k8s.io/",)
# The API server refuses a CRD whose schema has a $ref (see crds.py).
REFERENCE_REFUSED = (
    "$ref is not supported in a CustomResourceDefinition's schema (the API server refuses it); "
    "gpustack follows none"
)


@dataclass
class Result:
    resource: Resource
    status: Status
    findings: list[Finding] = field(default_factory=list)
    # A JSON pointer to each schema finding's field, in order (kubeconform's validationErrors).
    pointers: list[str] = field(default_factory=list)

    @property
    def message(self) -> str:
        """kubeconform's `msg`: the error findings, each with its position, joined by ' - '."""
        return " - ".join(
            located(finding) for finding in self.findings if finding.severity == "error"
        )

    @property
    def kind(self) -> str:
        return kind_of(self.resource.data)

    @property
    def api_version(self) -> str:
        return text(self.resource.data, "apiVersion")

    @property
    def name(self) -> str:
        metadata = metadata_of(self.resource.data)
        name, generate_name = text(metadata, "name"), text(metadata, "generateName")
        return f"{generate_name}{{{{ generateName }}}}" if generate_name and not name else name

    @property
    def namespace(self) -> str:
        return namespace_of(self.resource.data)


class UnexpectedKey(str):
    """The last step of a finding's path: a key the schema does not allow, to point at."""


def header(data: dict[str, Any] | None) -> dict[str, Any] | None:
    """What a report needs of an object once it is checked: apiVersion, kind and its names."""
    if data is None:
        return None
    metadata = data.get("metadata")
    kept: dict[str, Any] = {key: data[key] for key in ("apiVersion", "kind") if key in data}
    if isinstance(metadata, dict):
        kept["metadata"] = {
            key: metadata[key] for key in ("name", "generateName", "namespace") if key in metadata
        }
    return kept


def describe(finding: Finding) -> str:
    """`[rule] field: message`; schema and manifest findings go without the rule."""
    prefix = f"[{finding.rule}] " if finding.rule not in (SCHEMA, MANIFEST) else ""
    where = f"{finding.field}: " if finding.field else ""
    return f"{prefix}{where}{finding.message}"


def located(finding: Finding) -> str:
    """describe() and where: `field: message (line 12, column 7)`."""
    shown = describe(finding)
    if finding.line and "(line " not in finding.message:
        shown += f" (line {finding.line}, column {finding.column or 1})"
    return shown


def explain(finding: Finding) -> str:
    """describe() with the object it is about: `DaemonSet ns/name: field: message`."""
    if not finding.object or not finding.object[1]:
        return describe(finding)
    return f"{display(finding.object)}: {describe(finding)}"


def check_object(
    data: dict[str, Any],
    schemas: SchemaStore,
    ignore_missing_schemas: bool = False,
    require_name: bool = True,
) -> tuple[Status, list[Finding]]:
    """The verdict on one object and its findings (without file or line: the caller knows those)."""
    status, findings, _ = _check(data, schemas, ignore_missing_schemas, require_name)
    return status, findings


def _check(
    data: dict[str, Any], schemas: SchemaStore, ignore_missing_schemas: bool, require_name: bool
) -> tuple[Status, list[Finding], list[tuple[str | int, ...]]]:
    """check_object, with the path of each finding's field (for its position)."""
    kind, api_version = data.get("kind"), data.get("apiVersion")
    if not isinstance(kind, str) or not kind:
        return "error", [_error(MANIFEST, "missing 'kind' key", data)], [()]
    if not isinstance(api_version, str) or not api_version:
        return "error", [_error(MANIFEST, "missing 'apiVersion' key", data)], [()]
    try:
        validator = schemas.validator(api_version, kind)
    except SchemaError as error:
        return "error", [_error(MANIFEST, str(error), data)], [()]
    if validator is None:
        if ignore_missing_schemas:
            return "skipped", [], []
        message = f"could not find schema for {kind} (apiVersion {api_version})"
        return "error", [_error(MANIFEST, message, data)], [()]
    findings: list[Finding] = []
    paths: list[tuple[str | int, ...]] = []
    try:
        problems = list(validator.iter_errors(data))
    except ValueError as error:  # the schema engine's own limits ("Recursion limit reached")
        message = f"cannot be checked against its schema: {error}"
        return "error", [_error(MANIFEST, message, data)], [()]
    for problem in problems:
        path = tuple(problem.instance_path)
        # An unknown field is pointed at by its own key, not by the object holding it.
        unexpected = getattr(problem.kind, "unexpected", None)
        message = problem.message
        if unexpected:
            # A typo gets the field it most likely meant, as a config's unknown field does.
            allowed = schemas.allowed_fields(api_version, kind, tuple(problem.schema_path)[:-1])
            meant = did_you_mean(str(unexpected[0]), allowed)
            message += f"; {meant}" if meant else ""
        findings.append(_error(SCHEMA, message, data, ".".join(str(part) for part in path)))
        paths.append((*path, UnexpectedKey(unexpected[0])) if unexpected else path)
    if crds.is_crd(data):
        for path in crds.references(data):
            field = ".".join(map(str, (*path, crds.REFERENCE)))
            findings.append(_error(SCHEMA, REFERENCE_REFUSED, data, field))
            paths.append((*path, UnexpectedKey(crds.REFERENCE)))
    metadata = data.get("metadata")
    named = isinstance(metadata, dict) and (metadata.get("name") or metadata.get("generateName"))
    if require_name and not named and not api_version.startswith(_UNNAMED):
        findings.append(_error(SCHEMA, "missing: every object needs a name", data, "metadata.name"))
        paths.append(("metadata",))
    return ("invalid" if findings else "valid"), findings, paths


def _error(rule: str, message: str, data: dict[str, Any], field: str | None = None) -> Finding:
    return Finding(rule, "error", message, object=identity(data), field=field or None)


def validate_resources(
    resources: Iterable[Resource],
    schemas: SchemaStore,
    skip: frozenset[str] = frozenset(),
    reject: frozenset[str] = frozenset(),
    ignore_missing_schemas: bool = False,
    strict: bool = True,
    require_name: bool = True,
) -> list[Result]:
    """A Result per resource. `skip` and `reject` hold kinds or apiVersion/kind pairs.

    Not strict (kubeconform without -strict): duplicate keys are allowed, the last one wins."""
    results = []
    for resource in resources:
        if resource.data is None:
            finding = Finding(
                MANIFEST,
                "error",
                resource.error or "unreadable",
                file=resource.file,
                line=resource.line or None,
                column=resource.column or None,
            )
            results.append(Result(resource, "error", [finding]))
            continue
        data = resource.data
        signature = {text(data, "kind"), f"{text(data, 'apiVersion')}/{text(data, 'kind')}"}
        if signature & skip:
            results.append(Result(resource, "skipped"))
            continue
        if signature & reject:
            finding = Finding(
                MANIFEST,
                "error",
                f"prohibited resource kind {text(data, 'kind')}",
                object=identity(data),
            )
            results.append(Result(resource, "error", [_placed(finding, resource, ())]))
            continue
        if strict and resource.duplicates:
            # kubeconform -strict (sigs.k8s.io/yaml UnmarshalStrict) refuses duplicate keys.
            message, line, column = resource.duplicates[0]
            finding = Finding(
                MANIFEST,
                "error",
                f"{message} (line {line}, column {column})",
                resource.file,
                line,
                identity(data),
                column=column,
            )
            results.append(Result(resource, "error", [finding]))
            continue
        if (text(data, "apiVersion"), text(data, "kind")) in (CONFIG, PROFILE):
            # gpustack reads its configs and profiles as YAML 1.2; a base config has no name.
            data = _as_config(resource)
            status, findings, paths = _check(data, schemas, ignore_missing_schemas, False)
        else:
            status, findings, paths = _check(data, schemas, ignore_missing_schemas, require_name)
        result = Result(
            resource,
            status,
            [_placed(finding, resource, path) for finding, path in zip(findings, paths)],
        )
        result.pointers = [
            _json_pointer(path) for finding, path in zip(findings, paths) if finding.rule == SCHEMA
        ]
        results.append(result)
    return results


def _as_config(resource: Resource) -> dict[str, Any]:
    """A gpustack config's data as gpustack reads it (YAML 1.2), not as Kubernetes would."""
    assert resource.data is not None
    if not resource.text or resource.path:
        return resource.data
    try:
        documents = list(load_all_text(resource.text, resource.file))
    except UserError:
        return resource.data
    if resource.index < len(documents) and isinstance(documents[resource.index].data, dict):
        data: dict[str, Any] = documents[resource.index].data
        return data
    return resource.data


def _json_pointer(path: tuple[str | int, ...]) -> str:
    parts = [part for part in path if not isinstance(part, UnexpectedKey)]
    return "".join("/" + str(part).replace("~", "~0").replace("/", "~1") for part in parts)


def _placed(
    finding: Finding, resource: Resource, path: tuple[str | int, ...] | None = None
) -> Finding:
    """The finding with its file and the line and column of its field."""
    if path is None:
        path = field_path(resource.data, finding.field) if finding.field else ()
    position = None
    if path and isinstance(path[-1], UnexpectedKey):
        position = resource.key_position(path[:-1], str(path[-1]))
        path = path[:-1]
    line, column = position or resource.position(path)
    message = finding.message
    if finding.rule == SCHEMA and "is not of type" in message and '"string"' in message:
        written = resource.plain_scalar(path)
        if written is not None:
            # YAML 1.1 read an unquoted word or number as something else than the string typed.
            message += f'; Kubernetes reads the unquoted `{written}` so: quote it ("{written}")'
    return replace(
        finding, message=message, file=resource.file, line=line or None, column=column or None
    )


def field_path(data: Any, dotted: str) -> tuple[str | int, ...]:
    """'spec.template.metadata.labels.app.kubernetes.io/name' -> the keys it names in `data`
    (keys may hold dots, so the longest key that exists wins); stops where the data ends."""
    parts = re.sub(r"\[(\d+)\]", r".\1", dotted).split(".")
    path: list[str | int] = []
    node, index = data, 0
    while index < len(parts):
        if isinstance(node, list) and parts[index].isdigit() and int(parts[index]) < len(node):
            path.append(int(parts[index]))
            node, index = node[int(parts[index])], index + 1
            continue
        if not isinstance(node, dict):
            break
        for end in range(len(parts), index, -1):
            key = ".".join(parts[index:end])
            if key in node:
                path.append(key)
                node, index = node[key], end
                break
        else:
            break
    return tuple(path)


def attach_lint(results: list[Result], findings: list[Finding]) -> list[Finding]:
    """Hang lint findings on the results of the objects they are about; return the unplaced ones.

    A lint error makes a valid resource invalid; warnings leave the verdict alone."""
    by_identity: dict[Identity, Result] = {}
    for result in results:
        if result.resource.data is not None and result.status != "skipped":
            by_identity.setdefault(identity(result.resource.data), result)
    unplaced: list[Finding] = []
    for finding in findings:
        owner = by_identity.get(finding.object) if finding.object else None
        if owner is None:
            unplaced.append(finding)
            continue
        owner.findings.append(_placed(finding, owner.resource))
        if finding.severity == "error" and owner.status == "valid":
            owner.status = "invalid"
    return unplaced


def lint_results(
    results: list[Result], kubernetes_version: str, versions: dict[str, str] | None = None
) -> list[Finding]:
    """Run the lint rules once per cluster and attach their findings; return the unplaced ones.
    A rendered cluster folder named in `versions` is linted for its Kubernetes version there.

    The rules look across objects, so each rendered cluster folder (a folder whose
    kustomization.yaml gpustack wrote) is linted as a whole: its other manifests are read as
    context even when only some files were named (pre-commit passes just the staged ones), and
    two clusters of a fleet never see each other's objects. Everything else is one cluster.
    """
    from gpustack.validation import lint  # `validate --no-lint` loads no rules

    units: dict[str | None, list[Result]] = {}
    folders: dict[str, str | None] = {}
    for result in results:
        if result.resource.data is not None and result.status != "skipped":
            units.setdefault(cluster_folder(result.resource.file, folders), []).append(result)
    unplaced: list[Finding] = []
    for folder, members in units.items():
        objects = [result.resource.data for result in members if result.resource.data is not None]
        named = {identity(obj) for obj in objects}
        context: set[Identity] = set()
        if folder is not None:
            seen = {result.resource.file for result in members}
            for path in files([folder]):
                if shown(path) in seen:
                    continue
                for resource in read(path):
                    if resource.data is not None and identity(resource.data) not in named:
                        objects.append(resource.data)
                        context.add(identity(resource.data))
        version = (versions or {}).get(folder, kubernetes_version) if folder else kubernetes_version
        try:
            linted = lint.run(objects, version)
        except UserError as error:
            # Lint's own bound (lint._objects.MAX_COMPARISONS): named at what was linted
            # together, the cluster folder or the first file.
            where = display_path(folder) if folder is not None else members[0].resource.file
            raise UserError(error.message, Location(where), hint=error.hint) from None
        leftover = attach_lint(members, linted)
        unplaced += [finding for finding in leftover if finding.object not in context]
    return unplaced
