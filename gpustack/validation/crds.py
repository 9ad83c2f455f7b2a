"""JSON Schemas for custom resources, from CustomResourceDefinitions found among the inputs.

Converted as kubeconform's scripts/openapi2jsonschema.py converts a CRD (yannh/kubeconform):
one schema per served version from its `openAPIV3Schema`; when strict, every object schema that
lists `properties` and says nothing of `additionalProperties` gets `additionalProperties: false`;
`x-kubernetes-int-or-string` becomes "a string or an integer". Beyond that script: an object
marked `x-kubernetes-preserve-unknown-fields` keeps unknown fields (as the API server does),
`nullable` allows null, and `apiVersion`, `kind` and `metadata` are added where the CRD leaves
them out, with `apiVersion` and `kind` pinned to the custom resource's.
"""

from __future__ import annotations

import copy
from typing import Any

GROUP = "apiextensions.k8s.io"


def is_crd(data: dict[str, Any] | None) -> bool:
    api_version = (data or {}).get("apiVersion")
    return (
        isinstance(data, dict)
        and data.get("kind") == "CustomResourceDefinition"
        and isinstance(api_version, str)
        and api_version.startswith(GROUP + "/")
    )


def schemas(crd: dict[str, Any], strict: bool) -> dict[tuple[str, str], dict[str, Any]]:
    """{(apiVersion, kind): JSON Schema} for each served version of the CRD that has a schema."""
    spec = crd.get("spec")
    if not isinstance(spec, dict):
        return {}
    group, names = spec.get("group"), spec.get("names")
    kind = names.get("kind") if isinstance(names, dict) else None
    if not isinstance(group, str) or not isinstance(kind, str):
        return {}
    shared = spec.get("validation")  # apiextensions.k8s.io/v1beta1: one schema for all versions
    found = {}
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
