"""A stack in a namespace that Kubernetes or the platform owns: gpustack deploys into it but never
writes its Namespace object, which a pruning GitOps tool would otherwise delete with the stack."""

from __future__ import annotations

import pytest
from conftest import stack_for

from gpustack.build.pipeline import files, render
from gpustack.resolve import platform_profiles as profiles

# Kubernetes' initial namespaces (kubernetes.io, concepts/overview/working-with-objects/namespaces).
KUBERNETES_OWN = ["default", "kube-node-lease", "kube-public", "kube-system"]
FLUX = {"tool": "flux", "flux": {"sourceRef": {"name": "flux-system"}}}


def rendering_in(tmp_path, profile: str, namespace: str, **sections: object):
    return render(stack_for(tmp_path, profile, namespace=namespace, **sections))


def kinds(rendering) -> set[str]:
    return {obj["kind"] for obj in rendering.objects}


def namespace_warnings(rendering, namespace: str) -> list[str]:
    """The platform-namespace warnings about `namespace` among the rendering's findings."""
    return [
        finding.message
        for finding in rendering.findings
        if finding.rule == "platform-namespace"
        and finding.severity == "warning"
        and f"namespace {namespace} " in finding.message
    ]


@pytest.mark.parametrize("profile", sorted(profiles.BUILTIN))
@pytest.mark.parametrize("namespace", KUBERNETES_OWN)
def test_kubernetes_own_namespaces_are_used_but_never_written(tmp_path, profile, namespace):
    rendering = rendering_in(tmp_path, profile, namespace, gitops=FLUX)
    assert "Namespace" not in kinds(rendering)
    assert not [name for name in files(rendering) if "namespace-" in name]
    namespaced = [obj for obj in rendering.objects if "namespace" in obj["metadata"]]
    assert namespaced
    assert {obj["metadata"]["namespace"] for obj in namespaced} == {namespace}
    (warning,) = namespace_warnings(rendering, namespace)
    assert "privileged" in warning and "pod-security.kubernetes.io" in warning


@pytest.mark.parametrize("namespace", ["openshift-operators", "openshift"])
def test_openshift_namespaces_belong_to_openshift_only(tmp_path, namespace):
    on_openshift = rendering_in(tmp_path, "openshift", namespace)
    assert "Namespace" not in kinds(on_openshift)
    # The ServiceMonitor is scraped only from namespaces with the monitoring label: said, not set.
    (warning,) = namespace_warnings(on_openshift, namespace)
    assert "openshift.io/cluster-monitoring=true" in warning
    elsewhere = rendering_in(tmp_path, "kubeadm", namespace)
    (created,) = [obj for obj in elsewhere.objects if obj["kind"] == "Namespace"]
    assert created["metadata"]["name"] == namespace
    assert not namespace_warnings(elsewhere, namespace)


def test_a_namespace_of_the_stack_is_still_written_and_labelled(tmp_path):
    rendering = rendering_in(tmp_path, "kubeadm", "gpu-system")
    (namespace,) = [obj for obj in rendering.objects if obj["kind"] == "Namespace"]
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "privileged"
    assert not [f for f in rendering.findings if f.rule == "platform-namespace"]


@pytest.mark.parametrize("profile", ["gke-cos", "gke-ubuntu"])
def test_gke_caps_no_critical_pods_of_kube_system(tmp_path, profile):
    # kube-system admits system-node-critical pods without a quota; a quota there would count
    # (and cap) the platform's own critical pods too.
    assert "ResourceQuota" in kinds(rendering_in(tmp_path, profile, "gpu-system"))
    assert "ResourceQuota" not in kinds(rendering_in(tmp_path, profile, "kube-system"))
