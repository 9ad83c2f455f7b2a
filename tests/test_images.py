"""`gpustack images`: every image a cluster runs, in the formats the registry tools read, and the
image lock that pins them by digest.

Each format is checked by what consumes it: skopeo reads the sync file, CycloneDX's own library
and JSON schema validate the SBOM, and a schema written from oc-mirror's Go types checks the
ImageSetConfiguration. What the lists hold is checked against the rendered output, walked here
without gpustack's code: every `image` of every object and every environment value that is an
image reference, no image missed and none invented.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from conftest import ROOT, SKOPEO, read_manifests, run_gpustack

EXAMPLES = ROOT / "examples"
OUT = ROOT / "out"
MIRROR = "registry.example.com:5000/gpu-mirror"
# An image reference with its registry host (distribution/reference grammar), written here
# independently of gpustack's own patterns.
REFERENCE = re.compile(
    r"(?P<host>[a-z0-9-]+(\.[a-z0-9-]+)+(:[0-9]+)?|localhost(:[0-9]+)?)"
    r"/(?P<path>[a-z0-9]+([._-]+[a-z0-9]+)*(/[a-z0-9]+([._-]+[a-z0-9]+)*)*)"
    r"(:(?P<tag>[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}))?(@(?P<digest>sha256:[0-9a-f]{64}))?"
)


def images(*args: object, cwd: Path = ROOT) -> str:
    result = run_gpustack("images", *args, cwd=cwd)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    return result.stdout


def walk(node: Any) -> list[tuple[str, str | None]]:
    """(image, pull policy) of every container-like mapping, and (image, None) for every
    environment value that is an image reference with a registry host and a tag or digest."""
    found: list[tuple[str, str | None]] = []
    if isinstance(node, dict):
        if isinstance(node.get("image"), str):
            found.append((node["image"], node.get("imagePullPolicy")))
        if isinstance(node.get("name"), str) and isinstance(node.get("value"), str):
            match = REFERENCE.fullmatch(node["value"])
            if match and (match["tag"] or match["digest"]):  # not a label key
                found.append((node["value"], None))
        for value in node.values():
            found += walk(value)
    elif isinstance(node, list):
        for value in node:
            found += walk(value)
    return found


def rendered_images(folder: Path) -> set[tuple[str, str | None]]:
    """The images in a rendered folder's YAML files (node/ holds no Kubernetes object)."""
    found: set[tuple[str, str | None]] = set()
    for path in sorted(folder.rglob("*.yaml")):
        if "node" in path.relative_to(folder).parts:
            continue
        for document in read_manifests(path.read_text()):
            found.update(walk(document))
    return found


def copied(image: str) -> str:
    """What a copy reads: by digest when there is one, else by tag."""
    match = REFERENCE.fullmatch(image)
    assert match, image
    name = f"{match['host']}/{match['path']}"
    return f"{name}@{match['digest']}" if match["digest"] else f"{name}:{match['tag']}"


@pytest.fixture(scope="module")
def fleet_json() -> dict[str, Any]:
    result: dict[str, Any] = json.loads(images(EXAMPLES, "--output", "json"))
    return result


@pytest.fixture(scope="module")
def unmirrored_sources() -> set[str]:
    """What the examples pull with no mirror: the references a mirror copies from."""
    return set(images(EXAMPLES, "--set", "images.registry=null").split())


# --- what the lists hold ----------------------------------------------------------------------


def test_every_image_of_the_committed_output_is_listed_and_none_invented(fleet_json):
    in_output = set()
    for folder in sorted(path for path in OUT.iterdir() if path.is_dir()):
        in_output |= rendered_images(folder)
    listed = {entry["image"] for entry in fleet_json["images"]}
    assert listed == {image for image, _ in in_output}
    pulled = {
        image
        for image, policy in in_output
        if policy != "Never" and REFERENCE.fullmatch(image) is not None
    }
    assert images(EXAMPLES).splitlines() == sorted(pulled)
    # Anything in the output's text shaped like an image (a ConfigMap's file, an annotation, an
    # argument) is one of the listed images.
    named = set()
    for path in OUT.glob("*/**/*.yaml"):
        if "node" not in path.relative_to(OUT).parts[1:]:
            for match in REFERENCE.finditer(path.read_text()):
                if match["tag"] and match["tag"] not in TAINT_EFFECTS:
                    named.add(match.group())
    assert named
    assert named <= listed | {image.split("@")[0] for image in listed}, named - listed


def test_images_the_components_start_at_run_time_are_listed(fleet_json):
    ways = {
        (entry["image"], use["cluster"], use["as"])
        for entry in fleet_json["images"]
        for use in entry["usedBy"]
    }
    assert (
        "nvcr.io/nvidia/gpu-operator:v26.7.0",
        "kubeadm-lab",
        "env VALIDATOR_IMAGE",
    ) in ways
    assert (
        "registry.k8s.io/dra-driver-nvidia/dra-driver-nvidia-gpu:v0.4.1",
        "kubeadm-dra",
        "env IMAGE_NAME",
    ) in ways
    mirrored = f"{MIRROR}/nvidia/gpu-operator:v26.7.0"
    assert (mirrored, "rke2-mig", "env VALIDATOR_IMAGE") in ways


def test_preloaded_images_are_in_the_json_but_not_in_the_lists_to_copy(fleet_json):
    preloaded = {entry["image"] for entry in fleet_json["images"] if not entry["pulled"]}
    # GKE's Ubuntu installer, preloaded on the node under a short name.
    assert "gke-nvidia-installer:fixed" in preloaded
    assert not preloaded & set(images(EXAMPLES).split())


TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


def test_node_files_name_no_container_image():
    """node/ holds host settings (kubeadm, containerd, RKE2, k3s, GKE, EKS, Bottlerocket): none
    names an image to pull, so `gpustack images` has nothing to take from there."""
    for path in sorted(OUT.glob("*/node/*")):
        named = [
            match.group()
            for match in REFERENCE.finditer(path.read_text())
            # A taint written `key:Effect` has an image reference's shape.
            if (match["tag"] or match["digest"]) and match["tag"] not in TAINT_EFFECTS
        ]
        assert named == [], path


def test_the_same_fleet_gives_the_same_bytes_sorted_and_once():
    for output in ("text", "pairs", "skopeo-sync", "oc-mirror", "json", "cyclonedx"):
        first = images(EXAMPLES, "--output", output)
        assert images(EXAMPLES, "--output", output) == first, output
    lines = images(EXAMPLES).splitlines()
    assert lines == sorted(set(lines))


def test_a_fleet_lists_what_its_clusters_list_together():
    one = set(images(EXAMPLES / "kubeadm.yaml").split())
    other = set(images(EXAMPLES / "openshift.yaml").split())
    both = images(EXAMPLES / "kubeadm.yaml", EXAMPLES / "openshift.yaml").split()
    assert both == sorted(one | other)


def test_pairs_map_each_mirrored_image_to_where_it_is_copied_from(unmirrored_sources):
    pairs = [line.split(" ") for line in images(EXAMPLES, "--output", "pairs").splitlines()]
    rke2 = set(images(EXAMPLES / "rke2.yaml").split())
    assert {mirror for _, mirror in pairs} == rke2
    upstream = set(images(EXAMPLES / "rke2.yaml", "--set", "images.registry=null").split())
    assert {source for source, _ in pairs} == upstream
    for source, mirror in pairs:
        assert mirror == f"{MIRROR}/{source.split('/', 1)[1]}"


def test_pairs_without_a_mirror_is_refused():
    result = run_gpustack("images", EXAMPLES / "kubeadm.yaml", "--output", "pairs")
    assert result.returncode == 2
    assert result.stderr.startswith("error: --output: ")
    assert "images.registry" in result.stderr
    assert result.stdout == ""


# --- each format, read by what consumes it -------------------------------------------------


@pytest.mark.skopeo
def test_skopeo_reads_the_sync_file_offline(tmp_path, unmirrored_sources):
    sync = tmp_path / "images.yaml"
    sync.write_text(images(EXAMPLES, "--output", "skopeo-sync"))
    target = tmp_path / "dir"
    result = subprocess.run(
        [SKOPEO, "sync", "--dry-run", "--all", "--preserve-digests", "--scoped"]
        + ["--src", "yaml", "--dest", "dir", str(sync), str(target)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    planned = re.findall(
        r'Would have copied image ref \d+/\d+" from="docker://([^"]+)" to="dir:([^"]+)"',
        result.stderr,
    )
    expected = {copied(image) for image in unmirrored_sources}
    assert {source for source, _ in planned} == expected
    assert len(planned) == len(expected)
    # --scoped: each image under its registry and path, so that a sync from DIR/REGISTRY into
    # the mirror gives the names images.registry makes.
    assert {destination for _, destination in planned} == {
        f"{target}/{image}" for image in expected
    }


@pytest.mark.skopeo
def test_skopeo_fails_only_where_it_reaches_a_registry(tmp_path):
    sync = tmp_path / "images.yaml"
    sync.write_text(images(EXAMPLES / "kubeadm.yaml", "--output", "skopeo-sync"))
    # A proxy on a closed local port: every registry request fails at once, and nothing is
    # fetched even on a machine with network.
    environment = {
        **{key: value for key, value in os.environ.items() if key.lower() != "no_proxy"},
        "HTTPS_PROXY": "http://127.0.0.1:9",
        "HTTP_PROXY": "http://127.0.0.1:9",
    }
    result = subprocess.run(
        [SKOPEO, "sync", "--keep-going", "--all", "--preserve-digests", "--scoped"]
        + ["--src", "yaml", "--dest", "dir", str(sync), str(tmp_path / "dir")],
        capture_output=True,
        text=True,
        timeout=120,
        env=environment,
    )
    assert result.returncode != 0
    tried = re.findall(r'msg="Copying image ref \d+/\d+" from="docker://([^"]+)"', result.stderr)
    assert sorted(tried) == sorted(images(EXAMPLES / "kubeadm.yaml").split())
    errors = [line for line in result.stderr.splitlines() if "level=error" in line]
    assert len(errors) == len(tried)
    assert all(
        "pinging container registry" in line and "proxyconnect" in line for line in errors
    ), errors


def test_skopeo_sync_file_is_what_skopeo_documents(unmirrored_sources):
    """skopeo docs/skopeo-sync.1.md "YAML file content": registry -> images -> repository ->
    tags or digests; nothing else."""
    document = yaml.safe_load(images(EXAMPLES, "--output", "skopeo-sync"))
    listed = set()
    for registry, settings in document.items():
        assert set(settings) == {"images"}
        for repository, wanted in settings["images"].items():
            assert wanted == sorted(set(wanted)) and wanted
            for each in wanted:
                separator = "@" if each.startswith("sha256:") else ":"
                listed.add(f"{registry}/{repository}{separator}{each}")
    assert listed == {copied(image) for image in unmirrored_sources}


# oc-mirror v2's ImageSetConfiguration as its Go types declare it (openshift/oc-mirror
# v2/internal/pkg/api/v2alpha1/type_config.go: ImageSetConfigurationSpec, Mirror, Image) and as
# its loader reads it (v2/internal/pkg/config/load.go: unknown fields refused, `kind` and `mirror`
# required); an image needs a tag or a digest (v2/internal/pkg/image/image.go ParseRef).
OC_MIRROR_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "required": ["apiVersion", "kind", "mirror"],
    "properties": {
        "apiVersion": {"const": "mirror.openshift.io/v2alpha1"},
        "kind": {"const": "ImageSetConfiguration"},
        "archiveSize": {"type": "integer"},
        "mirror": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "platform": {"type": "object"},
                "operators": {"type": "array"},
                "helm": {"type": "object"},
                "samples": {"type": "array"},
                "blockedImages": {"type": "array"},
                "additionalImages": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "additionalProperties": False,
                        "required": ["name"],
                        "properties": {
                            "name": {
                                "type": "string",
                                "pattern": r"^[^@:]+(:[^/@]+)?(@sha256:[0-9a-f]{64})?$",
                            }
                        },
                    },
                },
            },
        },
    },
}


def test_oc_mirror_image_set_configuration_matches_its_api(unmirrored_sources):
    document = yaml.safe_load(images(EXAMPLES, "--output", "oc-mirror"))
    jsonschema.validate(document, OC_MIRROR_SCHEMA)
    names = [entry["name"] for entry in document["mirror"]["additionalImages"]]
    for name in names:
        match = REFERENCE.fullmatch(name)
        assert match and (match["tag"] or match["digest"]), name
        assert not (match["tag"] and match["digest"]), name
    assert names == sorted({copied(image) for image in unmirrored_sources})
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**document, "mirrors": {}}, OC_MIRROR_SCHEMA)


def test_cyclonedx_document_is_valid_by_cyclonedx_own_schema(tmp_path):
    from cyclonedx.schema import SchemaVersion
    from cyclonedx.validation.json import JsonStrictValidator

    validator = JsonStrictValidator(SchemaVersion.V1_6)
    text = images(EXAMPLES, "--output", "cyclonedx")
    assert validator.validate_str(text) is None
    document = json.loads(text)
    # The validator does refuse a broken document (so the check above can fail).
    broken = {**document, "components": [{**document["components"][0], "type": "image"}]}
    assert validator.validate_str(json.dumps(broken)) is not None
    components = {component["bom-ref"]: component for component in document["components"]}
    pause = components[
        "gke.gcr.io/pause:3.8@sha256:880e63f94b145e46f1b1082bb71b85e21f16b99b180b9996407d61240ceb9830"
    ]
    assert pause["name"] == "gke.gcr.io/pause"
    assert pause["version"] == "3.8"
    assert pause["hashes"] == [
        {
            "alg": "SHA-256",
            "content": "880e63f94b145e46f1b1082bb71b85e21f16b99b180b9996407d61240ceb9830",
        }
    ]
    assert pause["purl"].startswith("pkg:oci/pause@sha256%3A880e63f9")
    plugin = components["nvcr.io/nvidia/k8s-device-plugin:v0.20.0"]
    assert plugin["type"] == "container" and plugin["version"] == "v0.20.0"
    assert {"name": "gpustack:component", "value": "device-plugin"} in plugin["properties"]
    assert "hashes" not in plugin  # not locked: no digest is claimed


# --- the image lock ---------------------------------------------------------------------------


def fake_digest(image: str) -> str:
    import hashlib

    return "sha256:" + hashlib.sha256(image.encode()).hexdigest()


@pytest.fixture
def cluster(tmp_path: Path) -> Path:
    """The RKE2 example (a mirror and a pull secret) in a folder of its own."""
    shutil.copy(EXAMPLES / "rke2.yaml", tmp_path / "cluster.yaml")
    return tmp_path / "cluster.yaml"


def test_lock_from_saved_skopeo_and_crane_output_pins_every_image(cluster):
    folder = cluster.parent
    mirrored = images(cluster).split()
    sources = images(cluster, "--set", "images.registry=null").split()
    # skopeo inspect of the mirror, as it prints the repository (no tag) and digest.
    plugin = f"{MIRROR}/nvidia/k8s-device-plugin:v0.20.0"
    (folder / "plugin.json").write_text(
        json.dumps(
            {
                "Name": plugin.rsplit(":", 1)[0],
                "Digest": fake_digest(plugin),
                "RepoTags": ["v0.20.0", "v0.19.0"],
            },
            indent=4,
        )
    )
    # `IMAGE DIGEST` lines (crane digest in a loop) for the others, by their upstream names,
    # and one `crane digest --full-ref` line.
    lines = [
        f"{image} {fake_digest(image)}"
        for image in mirrored
        if "k8s-device-plugin" not in image and "kubectl" not in image
    ]
    kubectl = next(image for image in mirrored if "kubectl" in image)
    lines.append(f"{kubectl.rsplit(':', 1)[0]}@{fake_digest(kubectl)}")
    (folder / "digests.txt").write_text("# saved\n" + "\n".join(lines) + "\n")

    result = run_gpustack(
        "images",
        cluster,
        "--lock-from",
        folder / "plugin.json",
        "--lock-from",
        folder / "digests.txt",
    )
    assert result.returncode == 0, result.stderr
    assert (
        result.stderr
        == f"{display(folder / 'gpustack.lock')}: {len(sources)} digest(s) added, 0 changed\n"
    )
    lock = yaml.safe_load((folder / "gpustack.lock").read_text())
    assert lock["kind"] == "ImageLock"
    assert lock["images"] == {
        source: fake_digest(f"{MIRROR}/{source.split('/', 1)[1]}") for source in sources
    }

    pinned = images(cluster).split()
    assert pinned == sorted(f"{image}@{fake_digest(image)}" for image in mirrored)
    # Once locked, each image is copied by the digest the pods pull, to the mirror's tag.
    pairs = dict(line.split(" ") for line in images(cluster, "--output", "pairs").splitlines())
    assert pairs == {
        f"{source.rsplit(':', 1)[0]}@{fake_digest(f'{MIRROR}/' + source.split('/', 1)[1])}": (
            f"{MIRROR}/{source.split('/', 1)[1]}"
        )
        for source in sources
    }
    sync = yaml.safe_load(images(cluster, "--output", "skopeo-sync"))
    listed = [
        each for registry in sync.values() for tags in registry["images"].values() for each in tags
    ]
    assert sorted(listed) == sorted(digest for digest in lock["images"].values())
    additional = yaml.safe_load(images(cluster, "--output", "oc-mirror"))["mirror"][
        "additionalImages"
    ]
    assert sorted(entry["name"] for entry in additional) == sorted(pairs)
    out = folder / "out"
    assert run_gpustack("render", cluster, "-o", out).returncode == 0
    rendered = {image for image, _ in rendered_images(out / "rke2-mig")}
    assert rendered == set(pinned)
    # The same saved files again: the same bytes, nothing changed.
    before = (folder / "gpustack.lock").read_bytes()
    again = run_gpustack("images", cluster, "--lock-from", folder / "digests.txt")
    assert again.returncode == 0 and "0 digest(s) added, 0 changed" in again.stderr
    assert (folder / "gpustack.lock").read_bytes() == before


def display(path: Path) -> str:
    from gpustack.errors import display_path

    return display_path(path)


def test_a_digest_that_is_not_a_digest_is_refused_and_nothing_is_written(cluster):
    folder = cluster.parent
    secret = "sha256:NOT-A-DIGEST-but-a-secret-value"
    (folder / "saved.txt").write_text(
        f"nvcr.io/nvidia/gpu-operator:v26.7.0 {fake_digest('x')}\n"
        f"nvcr.io/nvidia/k8s-device-plugin:v0.20.0   {secret}\n"
    )
    result = run_gpustack("images", cluster, "--lock-from", folder / "saved.txt")
    assert result.returncode == 2
    assert result.stderr.startswith(f"error: {display(folder / 'saved.txt')}:2:44: is not a digest")
    assert secret not in result.stderr and "Traceback" not in result.stderr
    assert not (folder / "gpustack.lock").exists()


def test_a_loop_of_skopeo_inspect_saved_in_one_file_locks_each_image(cluster):
    """`for i in ...; do skopeo inspect docker://$i; done > FILE` writes the objects one after
    another: each is read, and a mistake in a later one is placed at the file's own line."""
    folder = cluster.parent
    names = ["nvcr.io/nvidia/gpu-operator", "nvcr.io/nvidia/k8s-device-plugin"]
    objects = [
        json.dumps({"Name": name, "Digest": fake_digest(name), "RepoTags": []}, indent=4)
        for name in names
    ]
    (folder / "inspected.json").write_text("\n".join(objects) + "\n")
    result = run_gpustack("images", cluster, "--lock-from", folder / "inspected.json")
    assert result.returncode == 0, result.stderr
    locked = yaml.safe_load((folder / "gpustack.lock").read_text())["images"]
    assert {image.rsplit(":", 1)[0]: digest for image, digest in locked.items()} == {
        name: fake_digest(name) for name in names
    }
    broken = objects[0] + '\n  {"Name": "nvcr.io/nvidia/k8s-device-plugin",\n  "Digest": 7}\n'
    (folder / "inspected.json").write_text(broken)
    result = run_gpustack("images", cluster, "--lock-from", folder / "inspected.json")
    assert result.returncode == 2
    line = objects[0].count("\n") + 3
    assert result.stderr.startswith(
        f"error: {display(folder / 'inspected.json')}:{line}:13: Digest: is not a digest"
    )


def test_a_line_of_one_word_is_not_called_a_digest(cluster):
    folder = cluster.parent
    (folder / "saved").write_text("root:x:0:0:root:/root:/bin/sh\n")
    result = run_gpustack("images", cluster, "--lock-from", folder / "saved")
    assert result.returncode == 2
    assert result.stderr == (
        f"error: {display(folder / 'saved')}:1:1: expected IMAGE DIGEST or IMAGE@DIGEST "
        f"(save what `skopeo inspect docker://IMAGE` prints, or one `IMAGE DIGEST` or "
        f"`IMAGE@DIGEST` line per image, as `crane digest` and `crane digest --full-ref` give "
        f"them)\n"
    )


@pytest.mark.parametrize(
    ("inside", "target_exists", "message"),
    [
        (False, False, "is outside"),
        (False, True, "is outside"),
        (True, False, "file not found (a symbolic link to a missing file)"),
        (True, True, "is a symbolic link; gpustack writes the image lock only as a file"),
    ],
)
def test_the_lock_is_never_read_or_written_through_a_link(
    cluster, tmp_path, inside, target_exists, message
):
    """A pull request's `gpustack.lock` that is a link: out of the repository (here, outside any
    repository, out of the config's folder) it is not followed at all, to a file there or to
    none yet, so nothing is read or written there; inside, a link to nothing is an error, not a
    folder without a lock, and locking never writes through one."""
    folder = cluster.parent / "repo"
    folder.mkdir()
    shutil.move(cluster, folder / "cluster.yaml")
    target = (folder / "real.lock") if inside else (tmp_path / "elsewhere" / "planted")
    target.parent.mkdir(exist_ok=True)
    lock = "apiVersion: gpustack.dev/v1alpha1\nkind: ImageLock\nimages: {}\n"
    if target_exists:
        target.write_text(lock)
    listed = images(folder / "cluster.yaml").split()
    (folder / "digests.txt").write_text("".join(f"{i} {fake_digest(i)}\n" for i in listed))
    (folder / "gpustack.lock").symlink_to(target)
    result = run_gpustack("images", folder / "cluster.yaml", "--lock-from", folder / "digests.txt")
    assert result.returncode == 2, result.stderr
    shown = display(folder / "gpustack.lock")
    said = f"error: {shown}: " + (message if inside else f"the image lock {shown} {message}")
    assert result.stderr.startswith(said)
    assert (target.read_text() == lock) if target_exists else not target.exists()
    if not (inside and target_exists):
        rendered = run_gpustack("render", folder / "cluster.yaml", "-o", folder / "out")
        assert rendered.returncode == 2
        assert rendered.stderr.startswith(said)


@pytest.mark.skipif(os.geteuid() != 0, reason="only root can create files owned by another user")
def test_a_root_lock_stays_the_users(cluster):
    """`sudo gpustack images --lock-from` in a user's checkout: a new lock is owned as its
    folder, a replaced one keeps its owner and mode."""
    folder = cluster.parent
    user = 4242
    os.chown(folder, user, user)
    mirrored = images(cluster).split()
    (folder / "digests.txt").write_text(f"{mirrored[0]} {fake_digest(mirrored[0])}\n")
    assert run_gpustack("images", cluster, "--lock-from", folder / "digests.txt").returncode == 0
    lock = folder / "gpustack.lock"
    assert (lock.stat().st_uid, lock.stat().st_gid) == (user, user)
    os.chown(lock, user + 1, user + 2)
    lock.chmod(0o664)
    (folder / "digests.txt").write_text(f"{mirrored[1]} {fake_digest(mirrored[1])}\n")
    assert run_gpustack("images", cluster, "--lock-from", folder / "digests.txt").returncode == 0
    assert len(yaml.safe_load(lock.read_text())["images"]) == 2
    assert (lock.stat().st_uid, lock.stat().st_gid, lock.stat().st_mode & 0o777) == (
        user + 1,
        user + 2,
        0o664,
    )


def test_an_image_a_patch_writes_is_pinned_once_locked(tmp_path):
    """A patch that swaps the device plugin's image: `images` lists the patched image, the lock
    takes its digest, and render pins it as it pins the components' (else requireDigests would
    fail on it for ever)."""
    patched = "registry.example.com/custom/k8s-device-plugin:v0.20.0-fix"
    config = tmp_path / "cluster.yaml"
    config.write_text(
        (EXAMPLES / "kubeadm.yaml").read_text() + "images:\n  requireDigests: true\npatches:\n"
        "- target: {kind: DaemonSet, name: nvidia-device-plugin}\n  patch: |-\n"
        "    - op: replace\n      path: /spec/template/spec/containers/0/image\n"
        f"      value: {patched}\n"
    )
    listed = images(config).split()
    assert patched in listed
    (tmp_path / "digests.txt").write_text("".join(f"{i} {fake_digest(i)}\n" for i in listed))
    assert run_gpustack("images", config, "--lock-from", tmp_path / "digests.txt").returncode == 0
    assert f"{patched}@{fake_digest(patched)}" in images(config).split()
    out = tmp_path / "out"
    result = run_gpustack("render", config, "-o", out)
    assert result.returncode == 0, result.stderr
    plugin = yaml.safe_load(
        (out / "kubeadm-lab" / "daemonset-nvidia-device-plugin.yaml").read_text()
    )
    assert plugin["spec"]["template"]["spec"]["containers"][0]["image"] == (
        f"{patched}@{fake_digest(patched)}"
    )
    assert run_gpustack("check", config, "-o", out).returncode == 0


def test_a_lock_that_cannot_be_written_leaves_every_lock_as_it_was(tmp_path):
    """A fleet of two folders whose second lock cannot be written: the first is not written
    either (every lock is staged before any replaces its file)."""
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        shutil.copy(EXAMPLES / "kubeadm.yaml", tmp_path / name / f"{name}.yaml")
        text = (tmp_path / name / f"{name}.yaml").read_text()
        (tmp_path / name / f"{name}.yaml").write_text(
            text.replace("name: kubeadm-lab", f"name: lab-{name}")
        )
    beside = tmp_path / "b" / "real.lock"
    beside.write_text("apiVersion: gpustack.dev/v1alpha1\nkind: ImageLock\nimages: {}\n")
    (tmp_path / "b" / "gpustack.lock").symlink_to(beside)
    listed = images(tmp_path / "a").split()
    (tmp_path / "digests.txt").write_text("".join(f"{i} {fake_digest(i)}\n" for i in listed))
    result = run_gpustack(
        "images", tmp_path / "a", tmp_path / "b", "--lock-from", tmp_path / "digests.txt"
    )
    assert result.returncode == 2, result.stderr
    assert "is a symbolic link; gpustack writes the image lock only" in result.stderr
    assert sorted(path.name for path in (tmp_path / "a").iterdir()) == ["a.yaml"]
    assert sorted(path.name for path in (tmp_path / "b").iterdir()) == [
        "b.yaml",
        "gpustack.lock",
        "real.lock",
    ]


def test_a_repository_saved_without_a_tag_must_name_one_image(cluster):
    folder = cluster.parent
    (folder / "saved.txt").write_text(f"nvcr.io/nvidia/gpu-operator@{fake_digest('x')}\n")
    # The validator and the node status exporter pull the operator's image at two tags.
    result = run_gpustack(
        "images",
        cluster,
        "--lock-from",
        folder / "saved.txt",
        "--set",
        "nodeStatusExporter.version=v26.3.0",
        "--set",
        "nodeStatusExporter.enabled=true",
    )
    assert result.returncode == 2, result.stderr
    assert "names a repository without a tag, and these clusters pull 2 tags of it" in result.stderr
    assert not (folder / "gpustack.lock").exists()


def test_a_lock_with_a_broken_digest_is_refused_at_its_line(cluster):
    folder = cluster.parent
    (folder / "gpustack.lock").write_text(
        "apiVersion: gpustack.dev/v1alpha1\nkind: ImageLock\nimages:\n"
        "  nvcr.io/nvidia/gpu-operator:v26.7.0: md5:0123\n"
    )
    result = run_gpustack("render", cluster, "-o", folder / "out")
    assert result.returncode == 2
    assert result.stderr.startswith(f"error: {display(folder / 'gpustack.lock')}:4:40: ")
    assert "md5:0123" not in result.stderr
    assert not (folder / "out").exists()


def test_require_digests_fails_check_until_every_image_is_locked(cluster):
    folder = cluster.parent
    text = cluster.read_text().replace("images:\n", "images:\n  requireDigests: true\n", 1)
    assert "requireDigests" in text
    cluster.write_text(text)
    out = folder / "out"
    refused = run_gpustack("render", cluster, "-o", out)
    assert refused.returncode == 1
    assert "[image-not-locked]" in refused.stderr and not out.exists()
    mirrored = images(cluster).split()
    (folder / "digests.txt").write_text("".join(f"{i} {fake_digest(i)}\n" for i in mirrored))
    assert run_gpustack("images", cluster, "--lock-from", folder / "digests.txt").returncode == 0
    assert run_gpustack("render", cluster, "-o", out).returncode == 0
    assert run_gpustack("check", cluster, "-o", out).returncode == 0
    # One image no longer locked: check fails and names it.
    lock = folder / "gpustack.lock"
    lock.write_text(
        "".join(line for line in lock.read_text().splitlines(True) if "kubectl" not in line)
    )
    stale = run_gpustack("check", cluster, "-o", out)
    assert stale.returncode == 1
    assert "image-not-locked" in stale.stdout + stale.stderr
    assert "kubectl:v1.31.0' (initContainers) has no digest" in stale.stdout + stale.stderr


def test_a_changed_lock_checks_the_configs_beside_it(cluster):
    folder = cluster.parent
    out = folder / "out"
    assert run_gpustack("render", cluster, "-o", out).returncode == 0
    mirrored = images(cluster).split()
    (folder / "digests.txt").write_text("".join(f"{i} {fake_digest(i)}\n" for i in mirrored))
    assert run_gpustack("images", cluster, "--lock-from", folder / "digests.txt").returncode == 0
    # pre-commit passes the changed files: the lock alone makes the cluster beside it stale.
    result = run_gpustack("check", folder, folder / "gpustack.lock", "-o", out)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "committed output is stale" in result.stderr


# --- the walk-through of docs/air-gapped.md, as written ------------------------------------

WALK_THROUGH = ROOT / "docs" / "air-gapped.md"
# Stands in for skopeo where it would reach a registry; runs the real one where it reads files.
# `sync` runs skopeo itself with --dry-run (it reads the sync file or the folder and says what it
# would copy where), and lays out what a copy into a folder would write, so that the step inside
# the gap finds the images; `inspect` prints a digest made from the image's name.
SKOPEO_STAND_IN = """#!{python}
import hashlib, os, re, subprocess, sys
arguments = sys.argv[1:]
with open(os.environ["SKOPEO_CALLS"], "a") as log:
    log.write(" ".join(arguments) + "\\n")
if arguments[0] == "inspect":
    image = arguments[-1].removeprefix("docker://")
    print("sha256:" + hashlib.sha256(image.encode()).hexdigest())
    sys.exit(0)
result = subprocess.run(["{skopeo}", "sync", "--dry-run", *arguments[1:]], capture_output=True, text=True)
sys.stderr.write(result.stderr)
for target in re.findall(r'Would have copied image ref [0-9/]+" from="[^"]+" to="dir:([^"]+)"', result.stderr):
    os.makedirs(target, exist_ok=True)
    open(os.path.join(target, "manifest.json"), "w").write("{{}}")
    open(os.path.join(target, "version"), "w").write("Directory Transport Version: 1.1\\n")
sys.exit(result.returncode)
"""


def fenced(text: str, language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```", text, re.S | re.M)


@pytest.mark.skopeo
def test_the_air_gapped_walk_through_runs_as_written(tmp_path):
    text = WALK_THROUGH.read_text()
    (settings,) = fenced(text, "yaml")
    config = yaml.safe_load((EXAMPLES / "rke2.yaml").read_text())
    config.update(yaml.safe_load(settings))
    assert config["images"]["requireDigests"] is True
    (tmp_path / "clusters").mkdir()
    (tmp_path / "clusters" / "rke2.yaml").write_text(yaml.safe_dump(config))
    tools = tmp_path / "tools"
    tools.mkdir()
    stand_in = tools / "skopeo"
    stand_in.write_text(SKOPEO_STAND_IN.format(python=sys.executable, skopeo=SKOPEO))
    stand_in.chmod(0o755)
    gpustack = Path(sys.executable).parent / "gpustack"
    assert gpustack.exists()
    script = "\n".join(fenced(text, "sh"))
    assert script.count("gpustack ") >= 5 and "skopeo sync" in script and "skopeo inspect" in script
    environment = {
        **os.environ,
        "PATH": f"{tools}{os.pathsep}{gpustack.parent}{os.pathsep}{os.environ['PATH']}",
        "SKOPEO_CALLS": str(tmp_path / "calls"),
    }
    result = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=tmp_path,
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    # Inside the gap, skopeo copies each image to the name the rendered pods pull (digest aside).
    pushed = set(re.findall(r'to="docker://([^"]+)"', result.stderr))
    rendered = {image for image, _ in rendered_images(tmp_path / "out" / "rke2-mig")}
    assert {image.split("@")[0] for image in rendered} == pushed
    # Every image pinned by the digest the mirror served.
    for image in rendered:
        name, _, digest = image.partition("@")
        assert digest == fake_digest(name), image
    lock = yaml.safe_load((tmp_path / "clusters" / "gpustack.lock").read_text())
    assert len(lock["images"]) == len(pushed)


def test_locking_gives_the_smoke_test_a_new_job(cluster):
    """A Job's pod template cannot change: pinned images make a new Job, not an edited one."""
    folder = cluster.parent
    assert run_gpustack("render", cluster, "-o", folder / "before").returncode == 0
    mirrored = images(cluster).split()
    (folder / "digests.txt").write_text("".join(f"{i} {fake_digest(i)}\n" for i in mirrored))
    assert run_gpustack("images", cluster, "--lock-from", folder / "digests.txt").returncode == 0
    assert run_gpustack("render", cluster, "-o", folder / "after").returncode == 0
    before = {path.name for path in (folder / "before" / "rke2-mig").glob("job-*.yaml")}
    after = {path.name for path in (folder / "after" / "rke2-mig").glob("job-*.yaml")}
    assert len(before) == len(after) == 1
    assert before != after


def test_diff_against_a_revision_reads_the_revision_lock(cluster):
    folder = cluster.parent
    mirrored = images(cluster).split()
    (folder / "digests.txt").write_text("".join(f"{i} {fake_digest(i)}\n" for i in mirrored))
    assert run_gpustack("images", cluster, "--lock-from", folder / "digests.txt").returncode == 0
    git = ["git", "-c", "user.email=test@example.com", "-c", "user.name=test"]
    subprocess.run([*git, "init", "-q"], cwd=folder, check=True)
    subprocess.run([*git, "add", "cluster.yaml", "gpustack.lock"], cwd=folder, check=True)
    subprocess.run([*git, "commit", "-qm", "locked"], cwd=folder, check=True)
    (folder / "gpustack.lock").unlink()
    result = run_gpustack("diff", "--git-ref", "HEAD", cluster, "--output", "json", cwd=folder)
    assert result.returncode == 1, result.stderr
    changed = json.loads(result.stdout)
    text = json.dumps(changed)
    # The revision's images are pinned, the working tree's are not.
    for image in mirrored:
        assert f"{image}@{fake_digest(image)}" in text


def test_a_revision_lock_linked_out_of_the_repository_is_refused_not_ignored(cluster, tmp_path):
    """The revision's lock is a link out of the repository: --git-ref does not follow it, and
    says so, rather than diff the revision as if it had no lock (every image unpinned)."""
    folder = cluster.parent / "repo"
    folder.mkdir()
    shutil.move(cluster, folder / "cluster.yaml")
    mirrored = images(folder / "cluster.yaml").split()
    outside = tmp_path / "outside.lock"
    (folder / "digests.txt").write_text("".join(f"{i} {fake_digest(i)}\n" for i in mirrored))
    saved = ("images", folder / "cluster.yaml", "--lock-from", folder / "digests.txt")
    assert run_gpustack(*saved).returncode == 0
    shutil.move(folder / "gpustack.lock", outside)
    (folder / "gpustack.lock").symlink_to(outside)
    git = ["git", "-c", "user.email=test@example.com", "-c", "user.name=test"]
    subprocess.run([*git, "init", "-q"], cwd=folder, check=True)
    subprocess.run([*git, "add", "cluster.yaml", "gpustack.lock"], cwd=folder, check=True)
    subprocess.run([*git, "commit", "-qm", "linked"], cwd=folder, check=True)
    result = run_gpustack("diff", "--git-ref", "HEAD", "cluster.yaml", cwd=folder)
    assert result.returncode == 2, result.stdout
    assert result.stderr == (
        "error: HEAD:gpustack.lock: is a symbolic link pointing outside the repository; "
        "gpustack does not follow it (--git-ref reads only the repository's own files) "
        "[loading HEAD:cluster.yaml]\n"
    )


def test_a_revision_lock_larger_than_a_config_is_read_whole(cluster):
    """A lock may be 8 MiB, a config 1 MiB: --git-ref brings the revision's lock whole, not as
    a file of its size that reads as binary."""
    folder = cluster.parent
    mirrored = images(cluster).split()
    (folder / "digests.txt").write_text("".join(f"{i} {fake_digest(i)}\n" for i in mirrored))
    assert run_gpustack("images", cluster, "--lock-from", folder / "digests.txt").returncode == 0
    lock = folder / "gpustack.lock"
    # Entries of images no config pulls any more, as a lock never drops them by itself.
    others = "".join(
        f"  registry.example.com/retired/image-{n}:v1: {fake_digest(str(n))}\n"
        for n in range(12000)
    )
    lock.write_text(lock.read_text() + others)
    assert lock.stat().st_size > 1024 * 1024
    git = ["git", "-c", "user.email=test@example.com", "-c", "user.name=test"]
    subprocess.run([*git, "init", "-q"], cwd=folder, check=True)
    subprocess.run([*git, "add", "cluster.yaml", "gpustack.lock"], cwd=folder, check=True)
    subprocess.run([*git, "commit", "-qm", "locked"], cwd=folder, check=True)
    result = run_gpustack("diff", "--git-ref", "HEAD", "cluster.yaml", cwd=folder)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "no differences in 1 cluster(s)\n"


def test_two_clusters_may_not_pull_two_images_under_one_mirror_name(tmp_path):
    """The RKE2 example's MIG manager pulls registry.k8s.io/kubectl through the mirror; a second
    cluster's smoke test pulls quay.io/kubectl through the same one: one name, two images."""
    shutil.copy(EXAMPLES / "rke2.yaml", tmp_path / "a.yaml")
    other = (EXAMPLES / "kubeadm.yaml").read_text() + (
        f"images:\n  registry: {MIRROR}\n"
        "smokeTest:\n  enabled: true\n  image: quay.io/kubectl:v1.31.0\n"
    )
    (tmp_path / "b.yaml").write_text(other)
    result = run_gpustack("images", tmp_path)
    assert result.returncode == 2, result.stdout
    assert result.stderr == (
        f"error: {display(tmp_path / 'b.yaml')}: images.registry: the mirror gives two images "
        "of the fleet one name: registry.k8s.io/kubectl:v1.31.0 and quay.io/kubectl:v1.31.0 are "
        f"both pulled as {MIRROR}/kubectl:v1.31.0 (mirror the clashing images under different "
        "paths, e.g. a registry of their own, or a patch that names the mirrored image)\n"
    )


@pytest.mark.parametrize(
    ("saved", "where", "message"),
    [
        (
            "sha256:" + "a" * 64 + "\n",
            "1:1",
            "expected IMAGE DIGEST or IMAGE@DIGEST; a digest alone names no image",
        ),
        (
            "nvcr.io/nvidia/gpu-operator:v26.7.0 \n",
            "1:1",
            "expected IMAGE DIGEST or IMAGE@DIGEST; an image without its digest (did its "
            "inspection fail?)",
        ),
        (
            "nvcr.io/nvidia/gpu-operator:v26.7.0 sha256:" + "a" * 64 + " extra\n",
            "1:1",
            "expected IMAGE DIGEST or IMAGE@DIGEST",
        ),
        (
            "# comment\nNot/An:Image:ref sha256:" + "a" * 64 + "\n",
            "2:1",
            "is not an image reference",
        ),
        (
            "nvcr.io/nvidia/gpu-operator:v26.7.0@sha256:" + "A" * 64 + "\n",
            "1:37",
            "is not a digest",
        ),
        (
            '{"Name": "nvcr.io/nvidia/gpu-operator", "Digest": 7}\n',
            "1:51",
            "Digest: is not a digest",
        ),
        (
            '{"Name": "nvcr.io/x@sha256:' + "a" * 64 + '", "Digest": "x"}\n',
            "1:10",
            "Name: is not an image repository",
        ),
        (
            '[{"Name": "nvcr.io/nvidia/gpu-operator", "Digest": "sha256:' + "a" * 64 + '"}]\n',
            "1:1",
            "is not a skopeo inspect object",
        ),
    ],
)
def test_saved_digest_files_are_refused_at_the_mistake(cluster, saved, where, message):
    folder = cluster.parent
    (folder / "saved").write_text(saved)
    result = run_gpustack("images", cluster, "--lock-from", folder / "saved")
    assert result.returncode == 2
    assert result.stderr.startswith(f"error: {display(folder / 'saved')}:{where}: {message}")
    assert not (folder / "gpustack.lock").exists()


@pytest.mark.parametrize(
    ("lock", "where", "message"),
    [
        ("kind: Lock\n", "1:7", "is not an image lock"),
        (
            "apiVersion: v1\nkind: ImageLock\n",
            "1:13",
            "apiVersion: apiVersion must be gpustack.dev/v1alpha1",
        ),
        (
            "apiVersion: gpustack.dev/v1alpha1\nkind: ImageLock\nimage: {}\n",
            "3:8",
            "image: unknown field",
        ),
        (
            "apiVersion: gpustack.dev/v1alpha1\nkind: ImageLock\nimages: [a]\n",
            "3:9",
            "images: must map each image",
        ),
        (
            "apiVersion: gpustack.dev/v1alpha1\nkind: ImageLock\nimages:\n  nvcr.io/x: sha256:"
            + "a" * 64
            + "\n",
            "4:3",
            "images: a key is not an image reference with a tag",
        ),
    ],
)
def test_a_broken_lock_is_refused_at_its_place(cluster, lock, where, message):
    folder = cluster.parent
    (folder / "gpustack.lock").write_text(lock)
    result = run_gpustack("images", cluster)
    assert result.returncode == 2
    assert result.stderr.startswith(
        f"error: {display(folder / 'gpustack.lock')}:{where}: {message}"
    )
    assert result.stdout == ""


def test_lock_from_needs_named_configs(tmp_path):
    (tmp_path / "saved").write_text("nvcr.io/nvidia/gpu-operator:v26.7.0 sha256:" + "a" * 64 + "\n")
    result = run_gpustack("images", "--lock-from", tmp_path / "saved", cwd=tmp_path)
    assert result.returncode == 2
    assert "\nerror: --lock-from: the embedded example has no folder" in result.stderr
