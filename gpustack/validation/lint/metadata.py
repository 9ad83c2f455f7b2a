"""metadata-invalid: a label or annotation the API server refuses. Their JSON schemas take any
string as a key or value, so a schema check passes what `kubectl apply` then rejects whole: a
label value with a space, a key with two slashes, an annotation past the size limit (a patch, a
hand edit).

The rules are the API server's (k8s.io/apimachinery pkg/util/validation/validation.go
IsQualifiedName and IsValidLabelValue; pkg/api/validation/objectmeta.go ValidateAnnotations,
which reads a key lower-cased, and TotalAnnotationSizeLimitB, 256 KiB of keys and values).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from gpustack.findings import Finding
from gpustack.objects import describe, kind_of
from gpustack.validation.lint._objects import POD_TEMPLATE_KINDS, Objects, Rule, finding, mapping

# Each part is checked for its length first, so these match at most 253 characters.
_NAME = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")
_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_NAME_MAX, _PREFIX_MAX = 63, 253
_ANNOTATIONS_MAX = 256 * 1024


def _qualified_name(key: str) -> bool:
    prefix, slash, name = key.rpartition("/")
    if slash and (not prefix or len(prefix) > _PREFIX_MAX or not _SUBDOMAIN.fullmatch(prefix)):
        return False
    return 0 < len(name) <= _NAME_MAX and _NAME.fullmatch(name) is not None


def _label_value(value: str) -> bool:
    return value == "" or (len(value) <= _NAME_MAX and _NAME.fullmatch(value) is not None)


def _problems(metadata: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """(field, what is wrong) for each label and annotation of `metadata` the API server
    refuses. Keys are named (repr: one line); values never are, only their field."""
    labels = mapping(metadata.get("labels"))
    for key, value in labels.items():
        if not isinstance(key, str) or not _qualified_name(key):
            yield "labels", f"label key {key!r} is not a qualified name"
        elif isinstance(value, str) and not _label_value(value):
            yield "labels", f"the value of label {key!r} is not a label value"
    annotations = mapping(metadata.get("annotations"))
    for key in annotations:
        if not isinstance(key, str) or not _qualified_name(key.lower()):
            yield "annotations", f"annotation key {key!r} is not a qualified name"
    size = sum(len(str(key)) + len(str(value)) for key, value in annotations.items())
    if size > _ANNOTATIONS_MAX:
        yield "annotations", f"the annotations hold {size} bytes, more than 256 KiB"


def check(objects: Objects) -> Iterator[Finding]:
    for obj in objects.objects:
        places = [("metadata", mapping(obj.get("metadata")))]
        if kind_of(obj) in POD_TEMPLATE_KINDS:
            template = mapping(mapping(obj.get("spec")).get("template"))
            places.append(("spec.template.metadata", mapping(template.get("metadata"))))
        for path, metadata in places:
            for field, problem in _problems(metadata):
                yield finding(
                    RULE,
                    obj,
                    f"{describe(obj)}: {problem}, which the API server refuses (a key: an "
                    "optional DNS subdomain prefix and '/', then at most 63 letters, digits, "
                    "'-', '_' or '.', beginning and ending with a letter or digit; a label value "
                    "the same, or empty)",
                    f"{path}.{field}",
                )


RULE = Rule(
    "metadata-invalid",
    "error",
    "A label or annotation key, a label value or the annotations' size that the API server "
    "refuses, though the schema allows it.",
    "Fix the key or value (a qualified name; a label value of at most 63 characters), or move "
    "large data out of annotations.",
    check,
)
