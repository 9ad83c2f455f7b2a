"""OpenShift, one driver DaemonSet per RHCOS build: `driver.rhcosBuilds` and the command that
fills it from the cluster's `openshift/driver-toolkit` ImageStream.

Expectations come from upstream, not from gpustack's code:
- the GPU Operator renders one driver DaemonSet per RHCOS build, named `<name>-<build>`,
  labelled `openshift.driver-toolkit: "true"` (pod template too) and
  `openshift.driver-toolkit.rhcos: <build>`, placed by NFD's
  `feature.node.kubernetes.io/system-os_release.OSTREE_VERSION` and with `RHCOS_VERSION` and the
  build's Driver Toolkit image on the `openshift-driver-toolkit-ctr` sidecar (NVIDIA/gpu-operator
  controllers/object_controls.go transformOpenShiftDriverToolkitContainer, controllers/
  state_manager.go, v26.7.0; its golden render internal/state/testdata/golden/
  driver-openshift-drivertoolkit.yaml);
- it takes each build's image from the ImageStream's `spec.tags` (tag name: the build,
  `from.name`: the image), skipping `latest` (ocpHasDriverToolkitImageStream).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, SHARED, read_manifests, stack_for, validate_upstream
from ruamel.yaml import YAML

from gpustack.build import gitops_objects
from gpustack.build.pipeline import render
from gpustack.errors import UserError
from gpustack.validation import lint

FIXTURE = ROOT / "tests" / "data" / "driver-toolkit" / "imagestream-upgrade.yaml"
OSTREE = "feature.node.kubernetes.io/system-os_release.OSTREE_VERSION"
DTK_CONTAINER = "openshift-driver-toolkit-ctr"
ART = "quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:"
# Two builds of OpenShift 4.19 (RHCOS on RHEL 9.6), as mid-way through a z-stream upgrade.
OLD, NEW = "9.6.20250826-1", "9.6.20250916-0"
BUILDS = [
    {"rhcosVersion": OLD, "driverToolkitImage": ART + "1" * 64},
    {"rhcosVersion": NEW, "driverToolkitImage": ART + "2" * 64},
]
OPENSHIFT_4_19 = {"profile": "openshift", "openshiftVersion": "4.19", "kubernetesVersion": "1.32"}


def config_text(driver: dict[str, Any], **sections: Any) -> str:
    config = {
        "apiVersion": "gpustack.dev/v1alpha1",
        "kind": "GPUStack",
        "metadata": {"name": "ocp"},
        "platform": OPENSHIFT_4_19,
        "nfd": {"mode": "external"},  # OpenShift's NFD operator labels the nodes
        "driver": driver,
        **sections,
    }
    return json.dumps(config, indent=2)


def drivers(objects: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {
        o["metadata"]["name"]: o
        for o in objects
        if o["kind"] == "DaemonSet"
        and o["spec"]["template"]["metadata"]["labels"].get("app.kubernetes.io/component")
        == "nvidia-driver"
    }


def pod(workload: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = workload["spec"]["template"]["spec"]
    return spec


def container(workload: dict[str, Any], name: str) -> dict[str, Any]:
    (found,) = [c for c in pod(workload)["containers"] if c["name"] == name]
    return found


def env(found: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e["value"] for e in found["env"] if "value" in e}


def ostree(workload: dict[str, Any]) -> list[str]:
    """The RHCOS builds the DaemonSet's required node affinity admits."""
    (term,) = pod(workload)["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]["nodeSelectorTerms"]
    return [v for e in term["matchExpressions"] if e["key"] == OSTREE for v in e["values"]]


def placement(objects: list[dict[str, Any]]) -> dict[str, str]:
    """RHCOS build -> Driver Toolkit image, as the rendered driver DaemonSets place them."""
    found = {}
    for workload in drivers(objects).values():
        (build,) = ostree(workload)
        found[build] = container(workload, DTK_CONTAINER)["image"]
    return found


def imagestream_tags(path: Path) -> dict[str, str]:
    """The ImageStream's builds read as the GPU Operator reads them: spec.tags but `latest`."""
    stream = YAML(typ="safe").load(path.read_text())
    return {
        tag["name"]: tag["from"]["name"]
        for tag in stream["spec"]["tags"]
        if tag["name"] != "latest"
    }


# --- driver.rhcosBuilds ----------------------------------------------------------------------


def test_two_builds_render_two_driver_daemonsets_each_on_its_builds_nodes(tmp_path, cli):
    config = tmp_path / "ocp.yaml"
    config.write_text(config_text({"rhcosBuilds": BUILDS}))
    out = tmp_path / "out"
    result = cli("render", config, "-o", out)
    assert result.exit_code == 0, result.output
    assert not [w for w in result.stderr.splitlines() if "z-stream" in w]
    objects = [
        doc
        for path in sorted((out / "ocp").glob("*.yaml"))
        for doc in read_manifests(path.read_text())
        if doc
    ]
    found = drivers(objects)
    assert set(found) == {f"nvidia-driver-daemonset-{OLD}", f"nvidia-driver-daemonset-{NEW}"}
    assert placement(objects) == {b["rhcosVersion"]: b["driverToolkitImage"] for b in BUILDS}
    selectors = []
    for name, workload in found.items():
        build = name.removeprefix("nvidia-driver-daemonset-")
        dtk = container(workload, DTK_CONTAINER)
        assert env(dtk)["RHCOS_VERSION"] == build
        assert "@sha256:" in dtk["image"]
        labels = workload["metadata"]["labels"]
        assert labels["openshift.driver-toolkit.rhcos"] == build
        assert workload["spec"]["template"]["metadata"]["labels"]["openshift.driver-toolkit"] == (
            "true"
        )
        # The driver image is the release's, the same on every build (only the DTK differs).
        assert container(workload, "nvidia-driver-ctr")["image"] == (
            "nvcr.io/nvidia/driver:595.91.07-rhel9"
        )
        selectors.append(workload["spec"]["selector"]["matchLabels"])
        validate_upstream(workload, "1.32")
    # Each DaemonSet selects its own pods only (else the two would adopt each other's).
    templates = [w["spec"]["template"]["metadata"]["labels"] for w in found.values()]
    for index, selector in enumerate(selectors):
        for other, labels in enumerate(templates):
            assert (selector.items() <= labels.items()) == (index == other)
    # The same folder passes strict validation and every lint rule (one driver per node
    # included: the builds' selectors are disjoint).
    validated = cli("validate", out / "ocp", "--kubernetes-version", "1.32")
    assert validated.exit_code == 0, validated.output


def test_builds_pass_the_one_driver_per_node_rule_only_while_their_builds_differ(tmp_path):
    rendering = render(
        stack_for(
            tmp_path,
            "openshift",
            platform=OPENSHIFT_4_19,
            nfd={"mode": "external"},
            driver={"rhcosBuilds": BUILDS},
        )
    )
    assert not [f for f in lint.run(rendering.objects) if f.rule == "driver-container-conflict"]
    # Two DaemonSets on the same build's nodes would be two drivers on one node: the rule sees it.
    clashing = json.loads(json.dumps(rendering.objects))
    (term,) = pod(drivers(clashing)[f"nvidia-driver-daemonset-{OLD}"])["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]["nodeSelectorTerms"]
    for expression in term["matchExpressions"]:
        if expression["key"] == OSTREE:
            expression["values"] = [NEW]
    assert [f for f in lint.run(clashing) if f.rule == "driver-container-conflict"]


def test_the_one_build_form_is_a_list_of_one(tmp_path):
    shorthand = render(stack_for(tmp_path, "openshift", platform=OPENSHIFT_4_19, driver=BUILDS[1]))
    listed = render(
        stack_for(
            tmp_path, "openshift", platform=OPENSHIFT_4_19, driver={"rhcosBuilds": BUILDS[1:]}
        )
    )
    # Same DaemonSet, same name: moving from one form to the other changes nothing on the nodes.
    assert drivers(shorthand.objects) == drivers(listed.objects)


def test_flux_waits_for_one_driver_build_not_their_sum(tmp_path):
    flux = {"tool": "flux", "flux": {"sourceRef": {"name": "flux-system"}}}

    def workloads_timeout(builds: list[dict[str, str]]) -> str:
        stack = stack_for(
            tmp_path,
            "openshift",
            platform=OPENSHIFT_4_19,
            gitops=flux,
            driver={"rhcosBuilds": builds},
        )
        rendering = render(stack)
        timeouts = {
            o["metadata"]["name"]: o["spec"]["timeout"]
            for o in gitops_objects.flux_objects(stack, rendering.objects)
            if o["kind"] == "Kustomization"
        }
        (timeout,) = [t for name, t in timeouts.items() if name.endswith("-workloads")]
        return timeout

    # The driver DaemonSets of several builds start side by side, on different nodes.
    one = workloads_timeout(BUILDS[:1])
    assert workloads_timeout(BUILDS) == one
    # 60 s + 120 x 10 s: the driver container's startup budget (GPU Operator golden render).
    assert int(one.removesuffix("s")) >= 60 + 120 * 10


@pytest.mark.parametrize(
    ("driver", "sections", "field"),
    [
        # Both forms: which image goes with which build would be a guess.
        ({"rhcosBuilds": BUILDS, "rhcosVersion": OLD}, {}, "driver.rhcosVersion"),
        (
            {"rhcosBuilds": BUILDS, "driverToolkitImage": ART + "3" * 64},
            {},
            "driver.driverToolkitImage",
        ),
        ({"rhcosBuilds": [BUILDS[0], BUILDS[0]]}, {}, "driver.rhcosBuilds.1.rhcosVersion"),
        # A tag may move to another build's image: only a digest is that build's.
        (
            {"rhcosBuilds": [{"rhcosVersion": OLD, "driverToolkitImage": "quay.io/dtk:v4.19"}]},
            {},
            "driver.rhcosBuilds.0.driverToolkitImage",
        ),
        (
            {"rhcosBuilds": [{"rhcosVersion": "4.19", **BUILDS[0]} | {"rhcosVersion": "4.19"}]},
            {},
            "driver.rhcosBuilds.0.rhcosVersion",
        ),
        # Nothing labels OSTREE_VERSION without NFD: no build's DaemonSet would ever schedule.
        (
            {"rhcosBuilds": BUILDS},
            {"nfd": {"mode": "disabled"}, "nodes": {"selector": {"example.com/gpu": "true"}}},
            "driver.rhcosBuilds",
        ),
        # Another driver mode would ignore the list.
        ({"rhcosBuilds": BUILDS, "mode": "preinstalled"}, {}, "driver.rhcosBuilds"),
    ],
)
def test_bad_build_lists_are_refused_at_their_line(tmp_path, cli, driver, sections, field):
    config = tmp_path / "ocp.yaml"
    config.write_text(config_text(driver, **sections))
    result = cli("render", config, "-o", tmp_path / "out")
    assert result.exit_code == 2
    assert re.search(rf"ocp\.yaml:\d+:\d+: {re.escape(field)}: ", result.stderr), result.stderr
    assert "Traceback" not in result.output
    assert not (tmp_path / "out").exists()


def test_the_rhcos_builds_outside_openshift_are_refused(tmp_path):
    with pytest.raises(UserError) as raised:
        stack_for(tmp_path, "kubeadm", driver={"mode": "container", "rhcosBuilds": BUILDS})
    assert raised.value.field == "driver.rhcosBuilds"


def test_node_readme_says_which_builds_get_a_driver(tmp_path, cli):
    config = tmp_path / "ocp.yaml"
    config.write_text(config_text({"rhcosBuilds": BUILDS}))
    assert cli("render", config, "-o", tmp_path / "out").exit_code == 0
    readme = (tmp_path / "out" / "ocp" / "node" / "README.md").read_text()
    assert f"`{OLD}`, `{NEW}`" in readme
    assert f"oc get nodes -L {OSTREE}" in readme
    assert "gpustack driver-toolkit-builds" in readme


@pytest.mark.shared
def test_a_builds_daemonset_carries_the_gpu_operators_per_build_facts(tmp_path):
    text = (SHARED / "refs/gpu-operator/golden__driver-openshift-drivertoolkit.yaml").read_text()
    golden = next(d for d in YAML(typ="safe").load_all(text) if d and d["kind"] == "DaemonSet")
    build = golden["spec"]["template"]["spec"]["nodeSelector"][OSTREE]
    their_dtk = container(golden, DTK_CONTAINER)
    assert env(their_dtk)["RHCOS_VERSION"] == build  # the golden render's own consistency
    rendering = render(
        stack_for(
            tmp_path,
            "openshift",
            platform={"profile": "openshift", "openshiftVersion": "4.18"},
            driver={
                "rhcosBuilds": [{"rhcosVersion": build, "driverToolkitImage": their_dtk["image"]}]
            },
        )
    )
    ((name, ours),) = drivers(rendering.objects).items()
    assert name.endswith(f"-{build}")  # the ClusterPolicy path's `<name>-<build>`
    assert ostree(ours) == [build]
    our_dtk = container(ours, DTK_CONTAINER)
    assert our_dtk["image"] == their_dtk["image"]
    assert env(our_dtk)["RHCOS_VERSION"] == env(their_dtk)["RHCOS_VERSION"]
    for key in ("openshift.driver-toolkit", "openshift.driver-toolkit.rhcos"):
        assert ours["metadata"]["labels"][key] == golden["metadata"]["labels"][key], key
    template = golden["spec"]["template"]["metadata"]["labels"]
    assert (
        ours["spec"]["template"]["metadata"]["labels"]["openshift.driver-toolkit"]
        == (template["openshift.driver-toolkit"])
    )
    component = "app.kubernetes.io/component"
    assert ours["spec"]["template"]["metadata"]["labels"][component] == template[component]


# --- gpustack driver-toolkit-builds ------------------------------------------------------------


def test_a_saved_imagestream_round_trips_into_the_driver_daemonsets(tmp_path, cli):
    result = cli("driver-toolkit-builds", FIXTURE)
    assert result.exit_code == 0, result.output
    assert "2 RHCOS build(s)" in result.stderr
    printed = YAML(typ="safe").load(result.stdout)
    config = tmp_path / "ocp.yaml"
    config.write_text(config_text(printed["driver"]))
    assert cli("render", config, "-o", tmp_path / "out").exit_code == 0
    objects = [
        doc
        for path in sorted((tmp_path / "out" / "ocp").glob("daemonset-*.yaml"))
        for doc in read_manifests(path.read_text())
    ]
    expected = imagestream_tags(FIXTURE)
    assert len(expected) == 2  # the old build and the new one; `latest` is not a build
    assert placement(objects) == expected


def test_writing_into_a_config_keeps_its_comments_and_replaces_the_one_build_form(tmp_path, cli):
    config = tmp_path / "ocp.yaml"
    config.write_text(
        "# Our production cluster.\n"
        "apiVersion: gpustack.dev/v1alpha1\n"
        "kind: GPUStack\n"
        "metadata:\n"
        "  name: ocp   # the Argo CD application's name too\n"
        "platform:\n"
        "  profile: openshift\n"
        '  openshiftVersion: "4.19"\n'
        '  kubernetesVersion: "1.32"\n'
        "nfd:\n"
        "  mode: external\n"
        "driver:\n"
        f"  rhcosVersion: {OLD}\n"
        f"  driverToolkitImage: {BUILDS[0]['driverToolkitImage']}\n"
        "  version: 580.178.04   # pinned until the next maintenance window\n"
    )
    config.chmod(0o640)
    result = cli("driver-toolkit-builds", FIXTURE, "--config", config)
    assert result.exit_code == 0, result.output
    assert "driver.rhcosVersion and driver.driverToolkitImage" in result.stderr
    text = config.read_text()
    for comment in (
        "# Our production cluster.",
        "# the Argo CD application's name too",
        "# pinned until the next maintenance window",
    ):
        assert comment in text
    assert '"4.19"' in text  # quoting kept: 4.19 unquoted is a number
    assert os.stat(config).st_mode & 0o777 == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ocp.yaml"]  # no staging file left
    written = YAML(typ="safe").load(text)["driver"]
    assert "rhcosVersion" not in written and "driverToolkitImage" not in written
    assert written["version"] == "580.178.04"
    assert {b["rhcosVersion"]: b["driverToolkitImage"] for b in written["rhcosBuilds"]} == (
        imagestream_tags(FIXTURE)
    )
    # Again: the same file (a re-run after nothing changed is no change to review).
    assert cli("driver-toolkit-builds", FIXTURE, "--config", config).exit_code == 0
    assert config.read_text() == text
    assert cli("render", config, "-o", tmp_path.parent / f"{tmp_path.name}-out").exit_code == 0


def test_an_image_only_imported_in_status_is_taken_from_there(tmp_path, cli):
    stream = YAML(typ="safe").load(FIXTURE.read_text())
    # The tag points at another tag; the registry resolved it to a digest when it imported it.
    stream["spec"]["tags"][0]["from"] = {"kind": "ImageStreamTag", "name": "driver-toolkit:latest"}
    saved = tmp_path / "imagestream.json"
    saved.write_text(json.dumps(stream))
    result = cli("driver-toolkit-builds", saved)
    assert result.exit_code == 0, result.output
    builds = YAML(typ="safe").load(result.stdout)["driver"]["rhcosBuilds"]
    (status,) = [t for t in stream["status"]["tags"] if t["tag"] == OLD]
    assert builds[0] == {
        "rhcosVersion": OLD,
        "driverToolkitImage": status["items"][0]["dockerImageReference"],
    }


SECRET = "s3cr3t-t0ken-value"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("not: [valid", "YAML"),
        (f"kind: ImageStream\n---\nkind: {SECRET}\n", "expected the one ImageStream"),
        ("# nothing but a comment\n", "expected the one ImageStream"),
        (f"- {SECRET}\n", "is not an ImageStream"),
        (
            "apiVersion: image.openshift.io/v1\nkind: ImageStream\n"
            f"metadata: {{name: {SECRET}}}\nspec: {{tags: []}}\n",
            "is not the driver-toolkit ImageStream",
        ),
        (
            "apiVersion: image.openshift.io/v1\nkind: ImageStream\n"
            f"metadata: {{name: driver-toolkit}}\nspec: {{tags: {SECRET}}}\n",
            "has no spec.tags list",
        ),
        (
            "apiVersion: image.openshift.io/v1\nkind: ImageStream\n"
            "metadata: {name: driver-toolkit}\nspec:\n  tags:\n"
            f"  - {{name: {NEW}, from: {{kind: DockerImage, name: {ART}{'1' * 64}}}}}\n"
            f"  - {{name: {NEW}, from: {{kind: DockerImage, name: {ART}{'2' * 64}}}}}\n",
            "earlier tag",
        ),
        (
            "apiVersion: image.openshift.io/v1\nkind: ImageStream\n"
            "metadata: {name: driver-toolkit}\nspec:\n  tags:\n"
            f"  - {{name: {NEW}, from: {{kind: DockerImage, name: 'quay.io/{SECRET}:v1'}}}}\n",
            "no image by digest",
        ),
    ],
)
def test_a_bad_imagestream_is_refused_at_its_line_without_quoting_it(tmp_path, cli, text, message):
    saved = tmp_path / "imagestream.yaml"
    saved.write_text(text)
    config = tmp_path / "ocp.yaml"
    config.write_text(config_text({}))
    before = config.read_bytes()
    result = cli("driver-toolkit-builds", saved, "--config", config)
    assert result.exit_code == 2
    assert "imagestream.yaml:" in result.stderr and message in result.stderr, result.stderr
    assert SECRET not in result.output
    assert "Traceback" not in result.output
    assert config.read_bytes() == before


@pytest.mark.parametrize("kind", ["folder", "missing", "fifo"])
def test_only_a_regular_file_is_read(tmp_path, cli, kind):
    path = tmp_path / "imagestream.yaml"
    if kind == "folder":
        path.mkdir()
    elif kind == "fifo":
        os.mkfifo(path)
    result = cli("driver-toolkit-builds", path)
    assert result.exit_code == 2
    assert "imagestream.yaml" in result.stderr and "Traceback" not in result.output
    if kind != "missing":
        assert "expected a saved ImageStream" in result.stderr, result.stderr


def test_a_config_that_is_not_a_mapping_is_left_alone(tmp_path, cli):
    config = tmp_path / "ocp.yaml"
    config.write_text("driver:\n- not a mapping\n")
    before = config.read_bytes()
    result = cli("driver-toolkit-builds", FIXTURE, "--config", config)
    assert result.exit_code == 2
    assert "ocp.yaml:2:" in result.stderr and "driver" in result.stderr, result.stderr
    assert config.read_bytes() == before


def test_an_oversized_file_is_refused_before_it_is_parsed(tmp_path, cli):
    saved = tmp_path / "imagestream.yaml"
    text = FIXTURE.read_text()
    # The fixture, padded past 1 MiB with comments: valid YAML, but no ImageStream is that big.
    saved.write_text(text + "#" * (1024 * 1024 + 1 - len(text.encode())) + "\n")
    result = cli("driver-toolkit-builds", saved)
    assert result.exit_code == 2
    assert "the most a saved ImageStream may have" in result.stderr, result.stderr
    assert result.stdout == ""


def test_the_printed_section_is_what_writing_it_into_a_config_gives(tmp_path, cli):
    printed = cli("driver-toolkit-builds", FIXTURE)
    assert printed.exit_code == 0, printed.output
    config = tmp_path / "ocp.yaml"
    config.write_text("metadata:\n  name: ocp\n")
    assert cli("driver-toolkit-builds", FIXTURE, "--config", config).exit_code == 0
    # Pasted at the end of a config, the printed text is what --config writes there.
    assert config.read_text() == "metadata:\n  name: ocp\n" + printed.stdout
