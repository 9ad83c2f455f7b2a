"""Schema validation of Kubernetes objects, offline and strict.

Contract used by render, check and validate:
    validate_objects(objects, kubernetes_version) -> list[Finding]
Core kinds are checked against the strict schemas that the `kubernetes-validate` package ships for
each Kubernetes minor version; CRD kinds against the project's own `schemas/` folder
(kubeconform layout: `{group}/{kind}_{version}.json`).
"""

from __future__ import annotations

from typing import Any

from gpustack.findings import Finding


def validate_objects(objects: list[dict[str, Any]], kubernetes_version: str) -> list[Finding]:
    """Findings (rule "schema") for every object that does not match its schema."""
    import kubernetes_validate
    from kubernetes_validate.utils import SchemaNotFoundError, ValidationError

    from gpustack.decorate import identity

    findings = []
    for obj in objects:
        try:
            kubernetes_validate.validate(obj, kubernetes_version, strict=True)
        except ValidationError as error:
            path = ".".join(str(part) for part in error.absolute_path)
            findings.append(Finding("schema", "error", error.message, object=identity(obj), field=path or None))
        except SchemaNotFoundError:
            pass  # CRD kinds: the project's schemas/ take over here
    return findings
