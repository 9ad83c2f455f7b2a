"""Shared by the tests/test_validate_*.py files: data folders and JSON verdicts from the CLI."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import ROOT, SHARED

from gpustack.validation.schemas import CRD_TEMPLATE

DATA = ROOT / "tests" / "data" / "validate"
CORPUS = DATA / "corpus"
CRD_OBJECTS = DATA / "crd-objects"
REFS = SHARED / "refs"
UPSTREAM_CRDS = SHARED / "crd-schemas"
# The upstream CRD schemas in kubeconform's layout, as a --schema-location template.
UPSTREAM_TEMPLATE = f"{UPSTREAM_CRDS}/{CRD_TEMPLATE}"


def verdicts(cli, *args: str | Path) -> list[tuple[str, str, str]]:
    """(file, name, status) of every resource, from `gpustack validate -o json --verbose`.

    Schema verdicts only (`--no-lint`): these are the verdicts kubeconform gives too; the lint
    rules' own verdicts are tested in test_lint.py and test_validate_lint.py."""
    result = cli(
        "validate", "-o", "json", "--verbose", "--no-lint", "--kubernetes-version", "1.31", *args
    )
    assert result.exit_code in (0, 1), result.output
    return [
        (entry["filename"], entry["name"], entry["status"].removeprefix("status").lower())
        for entry in json.loads(result.stdout)["resources"]
    ]


def expected_verdicts(path: Path) -> list[str]:
    """The `# verdicts: ...` line a corpus file starts with."""
    first = path.read_text(encoding="utf-8").splitlines()[0]
    assert first.startswith("# verdicts:"), path
    return first.removeprefix("# verdicts:").split()
