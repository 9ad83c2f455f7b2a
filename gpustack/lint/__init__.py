"""GPU-stack lint rules that look across objects (taints tolerated, selectors labelled, ...).

Contract used by render, check and validate:
    run(objects, kubernetes_version=None) -> list[Finding]
Each rule has an id, a severity and a message that says how to fix it; an object annotated
`gpustack.dev/ignore: <rule-id>[,<rule-id>...]` is exempt from those rules.
"""

from __future__ import annotations

from typing import Any

from gpustack.findings import Finding


def run(objects: list[dict[str, Any]], kubernetes_version: str | None = None) -> list[Finding]:
    return []
