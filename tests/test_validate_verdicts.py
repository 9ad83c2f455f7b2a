"""Verdicts on a corpus with known answers (valid, invalid, error) and on the upstream manifests.

A kubeconform-versus-gpustack comparison needs the kubeconform binary, which these tests do not
assume; instead each corpus file states the verdict kubeconform gives it (its `# verdicts:` line,
with a comment where gpustack deliberately differs), and the upstream manifests in shared/refs/
are checked against verdicts established once by hand.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from validate_helpers import CORPUS, REFS, UPSTREAM_TEMPLATE, expected_verdicts, verdicts

CASES = sorted(CORPUS.glob("*.yaml"))


@pytest.mark.parametrize("case", CASES, ids=[case.stem for case in CASES])
def test_corpus_verdicts(cli, case):
    assert [status for _, _, status in verdicts(cli, case)] == expected_verdicts(case)


def test_a_folder_gets_the_same_verdicts_as_its_files_one_by_one(cli):
    together = [status for _, _, status in verdicts(cli, CORPUS)]
    assert together == [status for case in CASES for status in expected_verdicts(case)]


# Upstream manifests and the verdicts they get at Kubernetes 1.31 with the default locations.
REF_VERDICTS = {
    "k8s-device-plugin/nvidia-device-plugin.yml": ["valid"],
    "k8s-device-plugin/nvidia-device-plugin-privileged-with-service-account.yml": ["valid"] * 5,
    "k8s-device-plugin/gpu-feature-discovery-daemonset.yaml": ["valid"],
    "node-feature-discovery/nfd-v0.19.0-overlays-default.rendered.yaml": ["valid"] * 18,
    "node-feature-discovery/nodefeaturerule-pci.sample.yaml": ["valid"],
    "examples/nodefeaturerule-nvidia-gpu.yaml": ["valid"],
    "dcgm-exporter/dcgm-exporter.yaml": ["valid", "valid"],
    "dcgm-exporter/service-monitor.yaml": ["valid"],
    "gke/gmp-podmonitoring-example.yaml": ["valid"],
    "gke/cos-daemonset-preloaded.yaml": ["valid"],
    "gpu-operator/state-dcgm-exporter__0700_scc.openshift.yaml": ["valid"],
    "openshift/mco__IgnitionSupport__extract.yaml": ["valid"],
    # A Helm chart's Chart.yaml is not a Kubernetes object: no kind.
    "k8s-device-plugin/helm-Chart.yaml": ["error"],
    # The default locations have no schema for the GPU Operator's ClusterPolicy or OLM's Subscription.
    "gpu-operator/config__samples__v1_clusterpolicy.yaml": ["error"],
    "openshift/openshift-docs__psap-installing-nfd-operator__extract.yaml": [
        "valid",
        "error",
        "error",
    ],
    # A kustomize JSON6902 patch is a list, not an object.
    "openshift/gitops-catalog__gpu-operator-certified__operator__overlays__stable__patch-channel.yaml": [
        "error"
    ],
    # The operator's asset has the placeholder namespace "FILLED BY THE OPERATOR", which is not a
    # namespace name: the project's schemas check metadata, the upstream CRD schemas do not.
    "gpu-operator/state-dcgm-exporter__0500_service_monitor.yaml": ["invalid"],
}


@pytest.mark.shared
@pytest.mark.parametrize("name", sorted(REF_VERDICTS))
def test_upstream_manifest_verdicts(cli, name):
    assert [status for _, _, status in verdicts(cli, REFS / name)] == REF_VERDICTS[name]


@pytest.mark.shared
def test_project_schemas_agree_with_upstream_schemas_on_the_upstream_custom_resources(cli):
    """Where both the project's schemas and the upstream CRD schemas have a kind, a resource gets
    the same verdict from each, except for the one placeholder namespace the upstream schemas
    cannot see (above)."""
    ours = verdicts(cli, REFS)
    theirs = verdicts(
        cli, "--schema-location", "default", "--schema-location", UPSTREAM_TEMPLATE, REFS
    )
    assert [(file, name) for file, name, _ in ours] == [(file, name) for file, name, _ in theirs]
    compared = [
        (file, name, mine, upstream)
        for (file, name, mine), (_, _, upstream) in zip(ours, theirs)
        if "error" not in (mine, upstream)
    ]
    differences = {file for file, name, mine, upstream in compared if mine != upstream}
    assert differences, "the placeholder namespace is caught by the project's schemas only"
    for file in differences:
        # The placeholder, spelled with spaces or underscores, quoted or bare, upstream.
        text = Path(file).read_text().replace('"', "").replace("_", " ")
        assert "namespace: FILLED BY THE OPERATOR" in text, file
    assert len(compared) > 80  # the comparison covered the core and custom resources
