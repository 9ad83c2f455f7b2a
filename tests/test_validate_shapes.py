"""Rendered manifests validate the same in the two shapes they come in: one file per resource
(as `gpustack render` writes them) and a few multi-document streams (as `kubectl kustomize` or a
CI job concatenating them gives them), with kubeconform's command line. (gpustack's own flags add
lint, which reads one cluster's objects together: tests/test_validate_own_files.py validates the
committed folders with them.)"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import ROOT

# Two examples of different platforms: what kubeconform is given for rendered output, core kinds
# and the project's CRD schemas (`gpustack` names the schemas/ folder gpustack ships).
EXAMPLES = ("openshift-entitled", "rke2-mig")
KUBECONFORM_FLAGS = (
    *("--no-lint", "-strict", "-summary", "-kubernetes-version", "1.31.0"),
    *("-schema-location", "default", "-schema-location", "gpustack"),
)


def manifests() -> list[Path]:
    """The examples' committed manifests: every YAML file but the host-side ones of node/."""
    return [
        path
        for name in EXAMPLES
        for path in sorted((ROOT / "out" / name).rglob("*.yaml"))
        if "node" not in path.relative_to(ROOT / "out" / name).parts
    ]


def summary(stdout: str) -> tuple[int, int, int]:
    """kubeconform's summary line: resources found, valid, invalid."""
    found = re.search(
        r"Summary: (\d+) resources? found in \d+ files? - Valid: (\d+), Invalid: (\d+)", stdout
    )
    assert found, stdout
    return int(found[1]), int(found[2]), int(found[3])


@pytest.fixture(scope="module")
def shapes(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, int]:
    """The examples' manifests as one file each and as two multi-document streams, and how
    many resources they hold."""
    root = tmp_path_factory.mktemp("shapes")
    files, streams = root / "files", root / "streams"
    documents = [path.read_bytes() for path in manifests()]
    for number, content in enumerate(documents):
        target = files / f"{number:04}.yaml"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content)
    streams.mkdir()
    half = len(documents) // 2
    for number, chunk in enumerate((documents[:half], documents[half:])):
        (streams / f"stream-{number}.yaml").write_bytes(b"---\n".join(chunk))
    resources = sum(
        1 for content in documents for line in content.splitlines() if line.startswith(b"kind: ")
    )
    return files, streams, resources


def test_every_rendered_resource_is_found_and_valid_in_either_shape(cli, shapes):
    files, streams, resources = shapes
    assert resources > 50  # two whole clusters
    for folder in (files, streams):
        result = cli("validate", *KUBECONFORM_FLAGS, folder)
        assert result.exit_code == 0, result.stdout
        assert summary(result.stdout) == (resources, resources, 0)


def test_a_config_map_of_many_keys_validates(cli, tmp_path):
    """A large mapping is read and checked whole (the memory it takes follows the data:
    bench/validate.py --keys measures it)."""
    keys = "".join(f"  key-{number}: value-{number}\n" for number in range(1000))
    path = tmp_path / "configmap.yaml"
    path.write_text(
        f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: many\n  namespace: x\ndata:\n{keys}"
    )
    result = cli("validate", "--summary", "--kubernetes-version", "1.31", path)
    assert result.exit_code == 0, result.stdout
    assert summary(result.stdout) == (1, 1, 0)
