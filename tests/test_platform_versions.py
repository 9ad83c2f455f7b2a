"""A platform's versions that go together: OpenShift's minor names the Kubernetes it ships, so one
follows from the other and a pair that disagrees is refused before anything renders."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import write_config

from gpustack.build.pipeline import render
from gpustack.errors import UserError
from gpustack.resolve import platform_profiles as profiles
from gpustack.resolve.load import load_stack
from gpustack.resolve.stack import Stack


def openshift(tmp_path: Path, platform: str) -> Path:
    return write_config(tmp_path, "openshift", platform=platform)


def images(stack: Stack) -> set[str]:
    found: set[str] = set()

    def walk(node: object) -> None:
        if isinstance(node, dict):
            image = node.get("image")
            if isinstance(image, str):
                found.add(image)
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(render(stack).objects)
    return found


def test_kubernetes_follows_the_openshift_release(tmp_path: Path) -> None:
    # OpenShift 4.18 is Kubernetes 1.31 (OpenShift 4.18 release notes), not the profile's 1.33.
    stack = load_stack(openshift(tmp_path, 'openshiftVersion: "4.18"'))
    assert stack.config.platform.kubernetesVersion == "1.31"
    assert render(stack).kubernetes_version == "1.31"
    assert "registry.k8s.io/kubectl:v1.31.0" in images(stack)
    assert not any(image.startswith("registry.k8s.io/kubectl:v1.33") for image in images(stack))


def test_the_openshift_release_follows_kubernetes(tmp_path: Path) -> None:
    stack = load_stack(openshift(tmp_path, 'kubernetesVersion: "1.31"'))
    assert stack.config.platform.openshiftVersion == "4.18"
    # The Driver Toolkit and the driver image's OS follow the release, as they would for 4.18.
    assert "registry.redhat.io/openshift4/driver-toolkit-rhel9:v4.18" in images(stack)


def test_a_pair_that_disagrees_is_refused_at_the_kubernetes_version(tmp_path: Path) -> None:
    config = openshift(tmp_path, 'openshiftVersion: "4.18", kubernetesVersion: "1.33"')
    with pytest.raises(UserError) as caught:
        load_stack(config)
    assert caught.value.field == "platform.kubernetesVersion"
    assert "OpenShift 4.18 ships Kubernetes 1.31, not 1.33" in caught.value.message
    assert caught.value.location is not None and caught.value.location.line == 4


def test_a_pair_that_agrees_is_taken_as_written(tmp_path: Path) -> None:
    stack = load_stack(openshift(tmp_path, 'openshiftVersion: "4.19", kubernetesVersion: "1.32"'))
    assert (stack.config.platform.openshiftVersion, stack.config.platform.kubernetesVersion) == (
        "4.19",
        "1.32",
    )


def test_a_base_and_a_cluster_that_disagree_are_refused(tmp_path: Path) -> None:
    """A fleet's base pins Kubernetes for 4.20; a member on 4.18 would be checked against 1.33."""
    base = tmp_path / "base.yaml"
    base.write_text(
        "apiVersion: gpustack.dev/v1alpha1\nkind: GPUStack\nplatform: {profile: openshift, "
        'kubernetesVersion: "1.33"}\n'
    )
    member = tmp_path / "member.yaml"
    member.write_text(
        "extends: base.yaml\napiVersion: gpustack.dev/v1alpha1\nkind: GPUStack\n"
        'metadata: {name: member}\nplatform: {openshiftVersion: "4.18"}\n'
    )
    with pytest.raises(
        UserError, match=r"OpenShift 4\.18 ships Kubernetes 1\.31, not 1\.33"
    ) as caught:
        load_stack(member)
    assert caught.value.location is not None
    assert caught.value.location.file.endswith("base.yaml")


@pytest.mark.parametrize("name", profiles.BUILTIN)
def test_every_profile_knows_the_kubernetes_of_each_release_it_knows(name: str) -> None:
    profile, layer = profiles.load(name)
    shipped = profile.facts.openshiftKubernetesVersions
    platform = layer.data.get("platform", {})
    if not profile.facts.machineConfigOperator:
        assert not shipped and "openshiftVersion" not in platform
        return
    # Every release whose node OS the profile knows has its Kubernetes, one minor each.
    assert set(profile.facts.driver.nodeOS) <= set(shipped)
    minors = [
        int(shipped[release].split(".")[1])
        for release in sorted(shipped, key=lambda v: int(v.split(".")[1]))
    ]
    assert minors == list(range(minors[0], minors[0] + len(minors)))
    # The profile's own defaults agree with its table.
    assert shipped[platform["openshiftVersion"]] == platform["kubernetesVersion"]
