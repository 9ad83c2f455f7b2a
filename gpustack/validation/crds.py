"""JSON Schemas for custom resources, from CustomResourceDefinitions found among the inputs.

Converted as kubeconform's scripts/openapi2jsonschema.py converts a CRD (yannh/kubeconform):
one schema per served version from its `openAPIV3Schema`; when strict, every object schema that
lists `properties` and says nothing of `additionalProperties` gets `additionalProperties: false`;
`x-kubernetes-int-or-string` becomes "a string or an integer". Beyond that script: an object
marked `x-kubernetes-preserve-unknown-fields` keeps unknown fields (as the API server does),
`nullable` allows null, and `apiVersion`, `kind` and `metadata` are added where the CRD leaves
them out, with `apiVersion` and `kind` pinned to the custom resource's.

A CRD is input, so its schema is never let reach outside itself: the API server refuses a `$ref`
in it (kubernetes/kubernetes, staging/src/k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/
validation/validation.go, specStandardValidatorV3.validate: "$ref is not supported", v1.31), so a
CRD with one is invalid (`references`) and its custom resources cannot be checked against it.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

from gpustack.objects import kind_of
from gpustack.validation.schemas import SchemaError

GROUP = "apiextensions.k8s.io"
REFERENCE = "$ref"
# Where a JSON Schema holds schemas: one, a list of them, or a map of names to them.
_ONE = ("additionalProperties", "additionalItems", "not", "items")
_LIST = ("allOf", "anyOf", "oneOf", "items")
_MAP = ("properties", "patternProperties", "definitions", "dependencies")


def is_crd(data: dict[str, Any] | None) -> bool:
    api_version = (data or {}).get("apiVersion")
    return (
        isinstance(data, dict)
        and kind_of(data) == "CustomResourceDefinition"
        and isinstance(api_version, str)
        and api_version.startswith(GROUP + "/")
    )


def references(crd: dict[str, Any]) -> Iterator[tuple[str | int, ...]]:
    """The path, in the CRD, of each schema in its openAPIV3Schemas that has a `$ref`."""
    spec = crd.get("spec")
    if not isinstance(spec, dict):
        return
    roots: list[tuple[Any, tuple[str | int, ...]]] = [
        (spec.get("validation"), ("spec", "validation"))
    ]
    if isinstance(spec.get("versions"), list):
        roots += [
            (version.get("schema"), ("spec", "versions", number, "schema"))
            for number, version in enumerate(spec["versions"])
            if isinstance(version, dict)
        ]
    for validation, path in roots:
        if isinstance(validation, dict):
            yield from _references(validation.get("openAPIV3Schema"), (*path, "openAPIV3Schema"))


def _references(schema: Any, path: tuple[str | int, ...]) -> Iterator[tuple[str | int, ...]]:
    # No recursion: a CRD's schema is as deep as its document, whatever that is. Each schema's
    # place is kept as (its parent's place, keys...), and spelt out only for a `$ref`: a CRD's
    # schema has thousands of places, and almost never a `$ref`.
    stack: list[tuple[dict[str, Any], Any]] = [(schema, None)] if isinstance(schema, dict) else []
    while stack:
        node, where = stack.pop()
        if REFERENCE in node:
            yield (*path, *_spelt(where))
        for keyword in _ONE:
            child = node.get(keyword)
            if isinstance(child, dict):
                stack.append((child, (where, keyword)))
        for keyword in _LIST:
            items = node.get(keyword)
            if isinstance(items, list):
                stack.extend(
                    (item, (where, keyword, number))
                    for number, item in enumerate(items)
                    if isinstance(item, dict)
                )
        for keyword in _MAP:
            named = node.get(keyword)
            if isinstance(named, dict):
                stack.extend(
                    (item, (where, keyword, name))
                    for name, item in named.items()
                    if isinstance(item, dict)
                )


def _spelt(where: Any) -> list[str | int]:
    """The keys of a place kept as (the parent's place, keys...), from the root down."""
    parts: list[str | int] = []
    while where is not None:
        parts[:0] = where[1:]
        where = where[0]
    return parts


def schemas(
    crd: dict[str, Any], strict: bool
) -> dict[tuple[str, str], dict[str, Any] | SchemaError]:
    """{(apiVersion, kind): JSON Schema} for each served version of the CRD that has a schema;
    a SchemaError for one with a `$ref`, which is never followed."""
    spec = crd.get("spec")
    if not isinstance(spec, dict):
        return {}
    group, names = spec.get("group"), spec.get("names")
    kind = names.get("kind") if isinstance(names, dict) else None
    if not isinstance(group, str) or not isinstance(kind, str):
        return {}
    shared = spec.get("validation")  # apiextensions.k8s.io/v1beta1: one schema for all versions
    found: dict[tuple[str, str], dict[str, Any] | SchemaError] = {}
    versions = spec.get("versions")
    if not isinstance(versions, list):
        versions = [{"name": spec.get("version"), "served": True}]
    for version in versions:
        if not isinstance(version, dict) or version.get("served") is False:
            continue
        name = version.get("name")
        validation = version.get("schema") or shared
        if not isinstance(name, str) or not isinstance(validation, dict):
            continue
        openapi = validation.get("openAPIV3Schema")
        if isinstance(openapi, dict):
            api_version = f"{group}/{name}"
            found[(api_version, kind)] = convert(openapi, api_version, kind, strict)
            referring = next(_references(openapi, ("openAPIV3Schema",)), None)
            if referring is not None:
                where = ".".join(str(part) for part in referring)
                found[(api_version, kind)] = SchemaError(
                    f"the schema from the CustomResourceDefinition of {kind} has a $ref (at "
                    f"{where}), which the API server does not support: gpustack follows none"
                )
    return found


def convert(openapi: dict[str, Any], api_version: str, kind: str, strict: bool) -> dict[str, Any]:
    schema: dict[str, Any] = _converted(copy.deepcopy(openapi), strict)
    properties = schema.setdefault("properties", {})
    if isinstance(properties, dict):
        properties["apiVersion"] = {"type": "string", "enum": [api_version]}
        properties["kind"] = {"type": "string", "enum": [kind]}
        properties.setdefault("metadata", {"type": "object"})
        if strict and not schema.get("x-kubernetes-preserve-unknown-fields"):
            schema.setdefault("additionalProperties", False)
    schema.setdefault("type", "object")
    return schema


def _converted(node: Any, strict: bool) -> Any:
    if isinstance(node, list):
        return [_converted(item, strict) for item in node]
    if not isinstance(node, dict):
        return node
    result = {key: _converted(value, strict) for key, value in node.items()}
    if result.pop("x-kubernetes-int-or-string", False) or result.get("format") == "int-or-string":
        result = {"anyOf": [{"type": "string"}, {"type": "integer"}]}
    if result.get("nullable") is True and isinstance(result.get("type"), str):
        result["type"] = [result["type"], "null"]
    preserve = result.get("x-kubernetes-preserve-unknown-fields") is True
    if strict and "properties" in result and "additionalProperties" not in result and not preserve:
        result["additionalProperties"] = False
    return result
