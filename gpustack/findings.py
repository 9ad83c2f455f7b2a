"""A finding: one thing wrong (or worth a warning) in a set of manifests.

Schema validation and the GPU-stack lint rules both produce findings; every output format
(text, json, junit, tap, sarif) and `gpustack check` consume them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from gpustack.objects import Identity


@dataclass(frozen=True)
class Finding:
    rule: str  # "schema" for schema validation, else a lint rule id such as "taints-tolerated"
    severity: Literal["error", "warning"]
    message: str  # says what is wrong and how to fix it
    file: str | None = None
    line: int | None = None
    object: Identity | None = None
    field: str | None = None  # dotted path inside the object, e.g. spec.template.spec.tolerations
    column: int | None = None  # of the field, 1-based, beside `line`

    def as_dict(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "severity": self.severity,
            "message": self.message,
            "file": self.file,
            "line": self.line,
            "column": self.column,
            "object": list(self.object) if self.object else None,
            "field": self.field,
        }
