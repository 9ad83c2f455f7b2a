"""Shared fixtures: the repository's folders and a CLI runner that calls gpustack in-process."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
SHARED = ROOT.parent / "shared"


@pytest.fixture
def cli():
    """Run `gpustack ARGS...` in-process; returns the click Result (exit_code, stdout, stderr)."""
    from gpustack.cli import app

    runner = CliRunner()

    def run(*args: str, input: str | None = None):
        return runner.invoke(app, [str(arg) for arg in args], input=input)

    return run


CRD_SCHEMAS = SHARED / "crd-schemas"


def is_core(api_version: str) -> bool:
    """Kinds the Kubernetes API server itself serves (schemas in kubernetes-validate)."""
    group = api_version.rpartition("/")[0]
    return "." not in group or group.endswith(".k8s.io")


def validate_upstream(obj: dict, kubernetes_version: str = "1.31") -> None:
    """Strict validation against an independent oracle: kubernetes-validate's strict schemas for
    core kinds, the upstream CRD schemas in shared/crd-schemas for custom resources."""
    import json

    import jsonschema
    import kubernetes_validate

    if is_core(obj["apiVersion"]):
        kubernetes_validate.validate(obj, kubernetes_version, strict=True)
        return
    group, _, version = obj["apiVersion"].rpartition("/")
    schema = CRD_SCHEMAS / group / f"{obj['kind'].lower()}_{version}.json"
    jsonschema.validate(obj, json.loads(schema.read_text()))


def stack_for(tmp_path: Path, profile: str, **sections: object):  # -> gpustack.config.Stack
    """A Stack for a minimal config on `profile` with the given top-level sections."""
    import json

    from gpustack.config import load_stack

    config = {
        "apiVersion": "gpustack.dev/v1alpha1",
        "kind": "GPUStack",
        "metadata": {"name": "lab"},
        "platform": {"profile": profile},
        **sections,
    }
    path = tmp_path / f"{profile}.yaml"
    path.write_text(json.dumps(config))  # JSON is YAML
    return load_stack(path)
