"""A rendered fleet without a GitOps tool: `kubectl apply -k` on an empty cluster, as
docs/render.md says to run it, and `validate out/` checking each cluster against the Kubernetes
version it was rendered for.

No API server runs in the tests: `kubectl apply` is played against a model of one. kubectl maps
every object's kind to a resource before it applies the first one (k8s.io/cli-runtime
resource.Builder; a kind the server does not serve is "resource mapping not found ... ensure
CRDs are installed first"), so one apply of a folder holding a CRD and resources of that CRD
fails on an empty cluster. The model serves the kinds of the Kubernetes release the folder was
rendered for (kubernetes-validate's schemas) plus those of the documented prerequisites, and
each step's objects are what real kustomize builds from the folder it names.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT
from gitops_helpers import kustomize, load

from gpustack.layout import KUBERNETES_VERSION
from gpustack.validation import manifests
from gpustack.validation.kubernetes_schemas import definitions

OUT = ROOT / "out"
RENDER_DOC = ROOT / "docs" / "render.md"
# What an "empty" cluster of a platform serves beyond Kubernetes' own kinds, and what the docs
# name as prerequisites: the monitoring stack's CRDs, and the platforms' own APIs.
PREREQUISITE_GROUPS = (
    "monitoring.coreos.com",  # the Prometheus Operator (docs/components.md, monitors)
    "azmonitoring.coreos.com",  # AKS: Azure Monitor managed Prometheus
    "monitoring.googleapis.com",  # GKE: Google Cloud Managed Service for Prometheus
    "machineconfiguration.openshift.io",  # OpenShift's own
    "nfd.openshift.io",  # OpenShift: Red Hat's NFD Operator
)


def served(version: str) -> set[tuple[str, str]]:
    """(group, kind) of every kind Kubernetes `version` serves built in."""
    found = definitions(f"v{version}.0-local")["$defs"]
    return {
        (gvk["group"], gvk["kind"])
        for schema in found.values()
        for gvk in schema.get("x-kubernetes-group-version-kind", [])
    }


def built(folder: Path) -> list[dict[str, Any]]:
    """What `kubectl apply -k folder` sends: real kustomize's build of it (gitops_helpers'
    `kustomize`, which builds a folder of the same bytes once a process)."""
    return kustomize(folder)


def group_kind(obj: dict[str, Any]) -> tuple[str, str]:
    return obj["apiVersion"].rpartition("/")[0], obj["kind"]


def documented_steps(marker: str = "<!-- first apply -->") -> list[str]:
    """The kubectl commands of docs/render.md's block after `marker`, in order."""
    text = RENDER_DOC.read_text()
    block = text.split(marker, 1)[1].split("```sh\n", 1)[1].split("```", 1)[0]
    return [line for line in block.splitlines() if line.strip() not in ("", "done")]


def test_the_docs_give_the_two_steps_and_the_wait_between_them():
    assert documented_steps() == [
        "kubectl apply --server-side -k out/<name>/crds",
        "kubectl wait --for condition=Established --timeout 2m crd "
        "-l app.kubernetes.io/managed-by=gpustack",
        "kubectl apply --server-side -k out/<name>",
    ]
    assert documented_steps("<!-- first apply with flux stages -->") == [
        "for crd in out/<name>/foundation/customresourcedefinition-*.yaml; do",
        '  kubectl apply --server-side -f "$crd"',
        "kubectl wait --for condition=Established --timeout 2m crd "
        "-l app.kubernetes.io/managed-by=gpustack",
        "kubectl apply --server-side -k out/<name>",
    ]


def sent(folder: Path, step: str) -> list[dict[str, Any]] | None:
    """What one documented kubectl step sends for `folder`: kustomize's build of a folder
    (`-k`), or each file a `for` loop's pattern matches (`-f`); None for a step that applies
    nothing (`kubectl wait`) or a `-k` folder the rendering does not have."""
    if " -k " in step:
        target = Path(step.split(" -k ", 1)[1].replace("out/<name>", str(folder)))
        if not (target / "kustomization.yaml").is_file():
            assert not target.exists(), target
            return None  # a folder without CRDs has no crds/
        return built(target)
    if step.startswith("for "):
        pattern = step.split(" in ", 1)[1].split(";", 1)[0].replace("out/<name>/", "")
        return [load(path) for path in sorted(folder.glob(pattern))]
    return None


def first_apply(folder: Path, steps: list[str]) -> list[str]:
    """Play the documented kubectl steps against an empty cluster of the folder's Kubernetes
    version: what each step could not map (kubectl refuses those objects), none when it works."""
    version = load(folder / "kustomization.yaml")["metadata"]["annotations"][KUBERNETES_VERSION]
    known = served(version)
    refused = []
    for step in steps:
        objects = sent(folder, step)
        if objects is None:
            continue
        for obj in objects:
            if group_kind(obj) not in known and not group_kind(obj)[0].endswith(
                PREREQUISITE_GROUPS
            ):
                refused.append(f"{folder.name}: {obj['kind']}")
        # Created once the step is through (and, after the wait, served).
        known |= {
            (obj["spec"]["group"], obj["spec"]["names"]["kind"])
            for obj in objects
            if obj["kind"] == "CustomResourceDefinition"
        }
    return refused


EXAMPLES = sorted(path.name for path in OUT.iterdir() if (path / "kustomization.yaml").is_file())


@pytest.mark.parametrize("example", EXAMPLES)
def test_the_documented_first_apply_works_on_an_empty_cluster(example):
    folder = OUT / example
    flux = (folder / "foundation").is_dir()  # Flux's stages: the CRDs are in the first
    steps = documented_steps(
        "<!-- first apply with flux stages -->" if flux else "<!-- first apply -->"
    )
    assert first_apply(folder, steps) == []


def test_one_apply_of_a_folder_with_crds_and_their_resources_is_what_fails():
    # Why the steps: NFD's NodeFeatureRule beside the CRD that defines it; with Flux's stages,
    # in the foundation stage too.
    assert first_apply(OUT / "kubeadm-lab", ["kubectl apply -k out/<name>"]) == [
        "kubeadm-lab: NodeFeatureRule"
    ]
    assert first_apply(OUT / "multi-pool", ["kubectl apply -k out/<name>/foundation"]) == [
        "multi-pool: NodeFeatureRule"
    ]


def test_crds_have_a_folder_of_their_own_holding_only_them():
    for example in EXAMPLES:
        folder = OUT / example
        top = load(folder / "kustomization.yaml")["resources"]
        crds = [name for name in top if name.rpartition("/")[2].startswith("customresource")]
        if (folder / "foundation").is_dir():  # Flux: the first stage holds them
            assert all(name.startswith("foundation/") for name in crds), example
            continue
        if not crds:
            assert not (folder / "crds").exists(), example
            continue
        apart = [
            f"crds/{name}" for name in load(folder / "crds" / "kustomization.yaml")["resources"]
        ]
        assert apart == crds, example
        kinds = {obj["kind"] for obj in built(folder / "crds")}
        assert kinds == {"CustomResourceDefinition"}, example


# --- validate out/: each cluster against its own Kubernetes version --------------------------------


def test_validate_checks_each_rendered_cluster_against_its_own_kubernetes_version(
    cli, tmp_path, monkeypatch
):
    # A fleet of two: DRA on Kubernetes 1.34 (resource.k8s.io/v1, which 1.31 does not serve),
    # and a cluster on 1.31; the working folder's gpustack.yaml says 1.31, which was what every
    # cluster was checked against.
    out = tmp_path / "out"
    # Versions interleaved: the files are checked a version at a time, reported in their order.
    for example, folder in (("kubeadm-dra", "a"), ("kubeadm-lab", "b"), ("kubeadm-dra", "c")):
        shutil.copytree(OUT / example, out / folder)
    (tmp_path / "gpustack.yaml").write_text((ROOT / "examples" / "kubeadm.yaml").read_text())
    monkeypatch.chdir(tmp_path)
    result = cli("validate", "out", "--summary")
    assert result.exit_code == 0, result.output
    assert "Invalid: 0, Errors: 0" in result.stdout
    listed = cli("validate", "out", "--verbose").stdout.splitlines()
    files = list(
        dict.fromkeys(line.split(" - ", 1)[0] for line in listed if line.startswith("out/"))
    )
    walked = [manifests.shown(path) for path in manifests.files(["out"])]
    assert files == [file for file in walked if file in files], "reported out of input order"
    assert {file.split("/")[1] for file in files} == {"a", "b", "c"}
    assert cli("validate", "out", "--exit-on-error").exit_code == 0
    # A version asked for applies to every file: 1.31 has no resource.k8s.io/v1.
    asked = cli("validate", "out", "--kubernetes-version", "1.31")
    assert asked.exit_code == 1
    assert re.search(
        r"out/a/deviceclass-gpu\.nvidia\.com\.yaml.*resource\.k8s\.io/v1", asked.stdout
    )
    # Lint too is per cluster: a 1.34 folder's DRA objects are not "not served" at 1.31.
    assert "api-version" not in result.stdout


def test_validate_of_a_cluster_rendered_before_the_annotation_uses_the_default(
    cli, tmp_path, monkeypatch
):
    out = tmp_path / "out"
    shutil.copytree(OUT / "kubeadm-dra", out / "kubeadm-dra")
    kustomization = out / "kubeadm-dra" / "kustomization.yaml"
    text = kustomization.read_text()
    kustomization.write_text(re.sub(r"metadata:\n  annotations:\n    .*\n", "", text))
    (tmp_path / "gpustack.yaml").write_text((ROOT / "examples" / "kubeadm.yaml").read_text())
    monkeypatch.chdir(tmp_path)
    assert cli("validate", "out").exit_code == 1  # checked against ./gpustack.yaml's 1.31
