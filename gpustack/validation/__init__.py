"""Checking Kubernetes objects offline: strict schema validation, the GPU-stack lint rules
(`lint/`), and `gpustack validate`'s reading, verdicts and reports of manifest files.

Contract used by render and check (through gpustack.fleet.clusters):
    validate_objects(objects, kubernetes_version) -> list[Finding]
Core kinds are checked against the strict schemas that the `kubernetes-validate` package ships for
each Kubernetes minor version; CRD kinds against the project's own `schemas/` folder
(kubeconform layout: `{group}/{kind}_{version}.json`). Each schema is compiled once per
(Kubernetes version, apiVersion, kind), with the jsonschema-rs validator.
"""

from __future__ import annotations

from typing import Any

from gpustack.findings import Finding


def validate_objects(objects: list[dict[str, Any]], kubernetes_version: str) -> list[Finding]:
    """Findings for every object that does not match its schema, has no schema, or no name.

    An unsupported kubernetes_version raises UserError."""
    # The package is imported by commands that never validate (diff): jsonschema-rs loads only
    # when objects are validated.
    from gpustack.validation.schemas import store
    from gpustack.validation.verdicts import check_object

    schemas = store(kubernetes_version, field="platform.kubernetesVersion")
    findings: list[Finding] = []
    for obj in objects:
        findings.extend(check_object(obj, schemas)[1])
    return findings
