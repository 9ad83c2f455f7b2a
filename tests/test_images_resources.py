"""Air-gapped clusters (`images.registry`, `images.pullSecrets`) and per-component `resources`:
each reaches every pod gpustack emits, whatever the profile and the features turned on."""

from __future__ import annotations

import pytest
from conftest import stack_for

from gpustack.build import decorate
from gpustack.build.pipeline import render
from gpustack.resolve import platform_profiles as profiles

MIRROR = "registry.example.com:5000/gpu-mirror"
# Settings that between them turn every component and every workload on.
FEATURES: dict[str, dict[str, object]] = {
    "defaults": {},
    "everything": {
        "devicePlugin": {"enabled": True, "sharing": {"strategy": "mps"}},
        "gitops": {"tool": "argocd", "argocd": {"repoURL": "https://git.example.com/x.git"}},
    },
}
# GKE runs its own device plugin (NVIDIA's is refused there): Google's installer and the DCGM
# exporter are the workloads gpustack emits, with the smoke test.
GKE_EVERYTHING = {
    "driver": {"mode": "gke-installer"},
    "smokeTest": {"enabled": True},
}
# Bottlerocket's device plugin is a host service (NVIDIA's DaemonSet is refused there): its
# sharing reaches GFD's config, and the smoke test and MIG (Bottlerocket partitions) the rest.
BOTTLEROCKET_EVERYTHING = {
    "devicePlugin": {"sharing": {"strategy": "mps"}},
    "smokeTest": {"enabled": True},
}
WORKLOADS = {"DaemonSet", "Deployment", "Job"}


def renders(tmp_path, profile: str, **extra: object):
    """The renders of `profile` with each set of features, with `extra` settings."""
    variants = dict(FEATURES)
    provider = profiles.load(profile)[0].facts.devicePluginProvider
    if provider == "gke":
        variants["everything"] = GKE_EVERYTHING
    elif provider == "bottlerocket":
        variants["everything"] = BOTTLEROCKET_EVERYTHING
    return {
        name: render(stack_for(tmp_path, profile, **{**features, **extra}))
        for name, features in variants.items()
    }


def pods(objects: list[dict]) -> list[tuple[str, dict]]:
    return [
        (obj["metadata"]["name"], obj["spec"]["template"]["spec"])
        for obj in objects
        if obj["kind"] in WORKLOADS
    ]


def containers(objects: list[dict]) -> list[tuple[str, str, dict]]:
    """(workload, container name, container) of every container and init container."""
    return [
        (workload, container["name"], container)
        for workload, pod in pods(objects)
        for key in ("initContainers", "containers")
        for container in pod.get(key, [])
    ]


# The registries the shipped components pull from, each a registry host by Docker's reference
# grammar (distribution/reference normalize.go splitDockerDomain: a first component holding "."
# or ":", or "localhost"), so that the mirror takes its place and keeps the path, tag and digest.
REGISTRIES = {"nvcr.io", "registry.k8s.io", "gcr.io", "gke.gcr.io", "registry.redhat.io"}
# Images a node resolves by a short name: GKE preloads its driver installer on the node.
SHORT_NAMES = {"gke-nvidia-installer"}


def expected_image(image: str, pull_policy: str | None) -> str:
    """Where an air-gapped node pulls `image` from: the mirror, under the same repository path,
    tag and digest; a short name, or an image never pulled, stays as it is."""
    host, _, path = image.partition("/")
    if pull_policy == "Never":
        return image
    if not path:
        assert image.partition(":")[0] in SHORT_NAMES, f"{image}: a short name this test expects"
        return image
    assert host in REGISTRIES, f"{image}: a registry this test does not list"
    return f"{MIRROR}/{path}"


@pytest.mark.parametrize(
    ("image", "expected"),
    [
        ("nvcr.io/nvidia/driver:580.95.05", "mirror.local/nvidia/driver:580.95.05"),
        (
            "registry.k8s.io/pause:3.8@sha256:" + "0" * 64,
            "mirror.local/pause:3.8@sha256:" + "0" * 64,
        ),
        ("localhost:5000/team/tool:1", "mirror.local/team/tool:1"),
        ("localhost/tool:1", "mirror.local/tool:1"),
        # No registry host: the node's runtime resolves the name (Docker Hub or preloaded).
        ("gke-nvidia-installer:fixed", "gke-nvidia-installer:fixed"),
        ("nvidia/cuda:12.4.1-base-ubuntu22.04", "nvidia/cuda:12.4.1-base-ubuntu22.04"),
    ],
)
def test_the_mirror_takes_the_place_of_the_registry_host_only(image, expected):
    assert decorate.mirrored(image, "mirror.local") == expected


def workload_key(workload: str) -> str:
    # The smoke test Job's name carries a hash of the stack, which the mirror changes.
    return "gpu-smoke-test" if workload.startswith("gpu-smoke-test-") else workload


@pytest.mark.parametrize("profile", sorted(profiles.BUILTIN))
def test_every_image_comes_from_the_mirror(tmp_path, profile):
    plain = renders(tmp_path, profile)
    mirrored = renders(tmp_path, profile, images={"registry": MIRROR})
    rewritten = 0
    for variant, rendering in plain.items():
        before = {
            (workload_key(workload), name): container
            for workload, name, container in containers(rendering.objects)
        }
        after = {
            (workload_key(workload), name): container["image"]
            for workload, name, container in containers(mirrored[variant].objects)
        }
        assert set(after) == set(before)
        for key, container in before.items():
            image = container["image"]
            assert after[key] == expected_image(image, container.get("imagePullPolicy")), key
            if after[key] != image:
                rewritten += 1
                assert after[key].startswith(f"{MIRROR}/")
                if "@sha256:" in image:
                    assert after[key].endswith(image[image.index("@") :])
    assert rewritten > 0


def test_a_digest_and_a_short_name_survive_the_mirror(tmp_path):
    """GKE's Ubuntu installer is preloaded under a short name; its pause container is pinned."""
    rendering = render(
        stack_for(tmp_path, "gke-ubuntu", images={"registry": "mirror.local"}, **GKE_EVERYTHING)
    )
    images = {name: container["image"] for _, name, container in containers(rendering.objects)}
    assert images["nvidia-driver-installer"] == "gke-nvidia-installer:fixed"
    assert images["pause"].startswith("mirror.local/pause:3.8@sha256:")


@pytest.mark.parametrize("profile", sorted(profiles.BUILTIN))
def test_pull_secrets_go_to_every_pod(tmp_path, profile):
    secrets = ["mirror-pull", "nvcr.io-pull"]
    for rendering in renders(tmp_path, profile, images={"pullSecrets": secrets}).values():
        found = pods(rendering.objects)
        assert found
        for workload, pod in found:
            assert pod["imagePullSecrets"] == [{"name": name} for name in secrets], workload
    for rendering in renders(tmp_path, profile).values():
        assert all("imagePullSecrets" not in pod for _, pod in pods(rendering.objects))


# The main container of each component, by the config section that sets its resources.
MAIN_CONTAINERS = {
    "devicePlugin": ("nvidia-device-plugin", "nvidia-device-plugin"),
    "gfd": ("gpu-feature-discovery", "gpu-feature-discovery"),
    "nfd": ("nfd-worker", "nfd-worker"),
    "dcgmExporter": ("nvidia-dcgm-exporter", "dcgm-exporter"),
}


def test_resources_land_on_each_components_main_container(tmp_path):
    settings = {
        section: {
            "resources": {
                "requests": {"cpu": f"{index + 1}0m"},
                "limits": {"memory": f"{index + 1}Gi"},
            }
        }
        for index, section in enumerate(MAIN_CONTAINERS)
    }
    mps = {"sharing": {"strategy": "mps"}}
    plain = render(stack_for(tmp_path, "kubeadm", devicePlugin=mps))
    sized = render(
        stack_for(
            tmp_path, "kubeadm", **{**settings, "devicePlugin": {**settings["devicePlugin"], **mps}}
        )
    )
    before = {(w, n): c for w, n, c in containers(plain.objects)}
    after = {(w, n): c for w, n, c in containers(sized.objects)}
    targets = {}
    for section, key in MAIN_CONTAINERS.items():
        targets[key] = settings[section]["resources"]
        assert after[key]["resources"] == targets[key], section
    for key, container in after.items():
        if key not in targets:
            # The MPS daemon, NFD's master and gc, init containers: unchanged.
            assert container.get("resources") == before[key].get("resources"), key


def test_quantities_read_as_numbers_are_written_as_text(tmp_path):
    rendering = render(
        stack_for(
            tmp_path,
            "kubeadm",
            dcgmExporter={"resources": {"requests": {"cpu": 0.5, "memory": 1073741824}}},
        )
    )
    (exporter,) = [c for w, n, c in containers(rendering.objects) if n == "dcgm-exporter"]
    assert exporter["resources"] == {"requests": {"cpu": "0.5", "memory": "1073741824"}}


@pytest.mark.parametrize(
    ("request_", "limit", "refused"),
    [
        ({"cpu": "1500m"}, {"cpu": "1"}, True),
        ({"cpu": "1"}, {"cpu": "1000m"}, False),
        ({"memory": "1G"}, {"memory": "1Gi"}, False),  # 10^9 bytes is less than 2^30
        ({"memory": "2e9"}, {"memory": "1Gi"}, True),
        ({"memory": "1E"}, {"memory": "1Ei"}, False),  # a lone E is exa, not an exponent
    ],
)
def test_a_request_above_its_limit_is_refused_across_units(tmp_path, request_, limit, refused):
    from gpustack.errors import UserError

    resources = {"resources": {"requests": request_, "limits": limit}}
    if refused:
        with pytest.raises(UserError, match="is more than limits"):
            stack_for(tmp_path, "kubeadm", gfd=resources)
    else:
        stack_for(tmp_path, "kubeadm", gfd=resources)
