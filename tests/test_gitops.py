"""Argo CD and Flux: the walk-through of docs/gitops.md run as written, GitOps objects checked
against the upstream CRD schemas, and every rendered folder built with real kustomize."""

from __future__ import annotations

import fnmatch
import functools
import json
import os
import shlex
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from conftest import EXAMPLES, example_base, invoke, read_manifests, run_gpustack
from gitops_helpers import (
    Key,
    by_identity,
    identity,
    kustomize,
    kustomize_apart,
    kustomize_together,
    listed_objects,
    load,
    readme_files,
    schema_errors,
    walkthrough,
)

GIT_IDENTITY = {
    "GIT_AUTHOR_NAME": "Fleet Owner",
    "GIT_AUTHOR_EMAIL": "owner@example.com",
    "GIT_COMMITTER_NAME": "Fleet Owner",
    "GIT_COMMITTER_EMAIL": "owner@example.com",
}


def test_readme_walkthrough_runs_as_written(cli, tmp_path, monkeypatch, fleets):
    """Every file and command of docs/gitops.md, "Fleets and GitOps", in order (`fleets` is the
    same fleet: what kustomize built of it is not built again)."""
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    monkeypatch.setenv("HOME", str(tmp_path))  # no user git config leaks in
    for key, value in GIT_IDENTITY.items():
        monkeypatch.setenv(key, value)
    monkeypatch.chdir(tmp_path)
    ran = []
    for kind, body in walkthrough():
        if kind == "file":
            path, _, content = body.partition("\n")
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            Path(path).write_text(content)
            continue
        block_cwd = Path.cwd()
        for line in filter(None, (line.strip() for line in body.splitlines())):
            for command in line.split(" && "):
                ran.append(command)
                _run(cli, command)
        os.chdir(block_cwd)
    assert any(c.startswith("gpustack render clusters/") for c in ran)
    assert any(c.startswith("gpustack gitops plugin") for c in ran)
    # The walk-through ends committed for Flux, after a commit for Argo CD.
    log = subprocess.run(["git", "log", "--format=%s"], capture_output=True, text=True, check=True)
    assert len(log.stdout.splitlines()) == 2
    committed = subprocess.run(
        ["git", "ls-files", "out"], capture_output=True, text=True, check=True
    ).stdout.split()
    assert "out/gpu-west/gitops/kustomization-gpustack-gpu-west-workloads.yaml" in committed
    assert "out/gpu-east/foundation/namespace-nvidia-gpu.yaml" in committed
    # Switching to Flux removed what gpustack had written for Argo CD, and git recorded it.
    assert "out/gpu-east/gitops/application-gpustack-gpu-east.yaml" not in committed
    assert "out/gpu-east/namespace-nvidia-gpu.yaml" not in committed
    assert not Path("out/base").exists(), "the base config must not be rendered as a cluster"
    plugin = load(Path("plugin.yaml"))
    assert plugin["kind"] == "ConfigManagementPlugin"


def _run(cli, command: str) -> None:
    words = shlex.split(command)
    if words[0] == "cd":
        os.chdir(words[1])
    elif words[0] == "gpustack":
        redirect = words.index(">") if ">" in words else None
        arguments = words[1:redirect] if redirect else words[1:]
        result = cli(*arguments)
        assert result.exit_code == 0, f"{command}: {result.output}"
        # The walk-through's output folder is where its Applications and Kustomizations read.
        assert ".path is" not in result.stderr, f"{command}: {result.stderr}"
        if redirect:
            Path(words[redirect + 1]).write_text(result.stdout)
    elif words[:2] == ["kubectl", "kustomize"]:
        assert kustomize(Path(words[2])), f"{command} built nothing"
    elif words[0] == "git":
        subprocess.run(words, check=True, capture_output=True)
    else:
        pytest.fail(f"the walk-through has a command this test cannot run: {command}")


def _flux_stages(cluster: Path) -> list[Path]:
    """The folders the cluster's Flux Kustomizations read."""
    return [
        cluster.parent.parent / kustomization["spec"]["path"]
        for kustomization in listed_objects(cluster / "gitops")
        if kustomization["kind"] == "Kustomization"
    ]


def _build_fleet(out: Path, tool: str) -> None:
    """Have kustomize build each cluster's folder and its gitops/ folder (each as on its own, one
    run a cluster) and, for Flux, the stage folders (one run a cluster), for `kustomize` and
    `kustomize_apart` to find."""
    for cluster in sorted(out.iterdir()):
        where = out.parent / "built" / cluster.name
        kustomize_apart([cluster, cluster / "gitops"], where)
        if tool == "flux":
            kustomize_apart(_flux_stages(cluster), where.with_name(f"{cluster.name}-stages"))


@pytest.fixture(scope="module")
def fleets(tmp_path_factory):
    """tool -> the walk-through's fleet rendered for it, once for the module's tests (they only
    read it), and built by kustomize (a test's `kustomize` of one of its folders, or of a folder
    with the same bytes, is that build)."""
    rendered = {}
    for tool in ("argocd", "flux"):
        root = tmp_path_factory.mktemp(tool)
        readme_files(root, tool)
        result = run_gpustack("render", "clusters", "-o", "out", cwd=root)
        assert result.returncode == 0, result.stdout + result.stderr
        rendered[tool] = root / "out"
        _build_fleet(rendered[tool], tool)
    return rendered


@pytest.fixture(params=["argocd", "flux"])
def fleet(request, fleets):
    return request.param, fleets[request.param]


@pytest.fixture
def argocd_out(fleets):
    return fleets["argocd"]


@pytest.fixture
def flux_out(fleets):
    return fleets["flux"]


def test_fleet_renders_one_folder_per_cluster(fleet):
    _, out = fleet
    assert sorted(p.name for p in out.iterdir()) == ["gpu-east", "gpu-west"]


def test_every_rendered_folder_builds_into_exactly_the_rendered_objects(fleet, tmp_path):
    tool, out = fleet
    for cluster in out.iterdir():
        rendered = listed_objects(cluster)
        gitops = cluster / "gitops"
        # The folder and its gitops/ folder, each built as on its own (one kustomize run).
        built, built_gitops = kustomize_apart([cluster, gitops], tmp_path / cluster.name)
        assert by_identity(built) == by_identity(rendered)
        assert by_identity(built_gitops) == by_identity(listed_objects(gitops))
        # Every object file is listed: only node/ and gitops/ stay outside the kustomization.
        on_disk = {
            str(path.relative_to(cluster))
            for path in cluster.rglob("*.yaml")
            if path.name != "kustomization.yaml"
            and path.relative_to(cluster).parts[0] not in ("node", "gitops")
        }
        assert on_disk == set(load(cluster / "kustomization.yaml")["resources"])
        if tool == "flux":
            # The stages together are exactly the whole folder, each object in one stage.
            stages = kustomize_apart(_flux_stages(cluster), tmp_path / f"{cluster.name}-stages")
            assert by_identity([obj for stage in stages for obj in stage]) == by_identity(rendered)


def test_the_rendered_fleet_validates_on_its_own(cli, fleet):
    # Flux splits a cluster into stage folders: lint still sees the cluster as a whole (the
    # DaemonSets in workloads/ find the RuntimeClass in foundation/).
    _, out = fleet
    result = cli("validate", "--summary", out)
    assert result.exit_code == 0, result.output
    assert ", Invalid: 0, Errors: 0" in result.stdout


@pytest.mark.shared
def test_gitops_objects_match_the_upstream_schemas(fleet):
    tool, out = fleet
    kinds = set()
    for cluster in out.iterdir():
        for obj in listed_objects(cluster / "gitops"):
            kinds.add(obj["kind"])
            assert schema_errors(obj) == [], obj["metadata"]["name"]
    expected = {"argocd": {"Application"}, "flux": {"Kustomization", "GitRepository"}}[tool]
    assert kinds == expected


def test_argocd_application_points_at_the_rendered_folder(argocd_out):
    out = argocd_out
    application = load(out / "gpu-west" / "gitops" / "application-gpustack-gpu-west.yaml")
    assert application["spec"]["source"] == {
        "repoURL": "https://git.example.com/platform/gpu-fleet.git",
        "targetRevision": "HEAD",
        "path": "out/gpu-west",
    }
    assert application["spec"]["destination"] == {"name": "gpu-west", "namespace": "gpu-system"}
    assert (out.parent / application["spec"]["source"]["path"] / "kustomization.yaml").is_file()


def test_sync_waves_follow_apply_order(argocd_out):
    out = argocd_out
    for cluster in out.iterdir():
        objects = listed_objects(cluster)
        waves = [int(o["metadata"]["annotations"]["argocd.argoproj.io/sync-wave"]) for o in objects]
        assert waves == sorted(waves), f"{cluster.name}: sync waves contradict kustomization order"
        by_kind = {obj["kind"]: wave for obj, wave in zip(objects, waves)}
        assert by_kind["Namespace"] < by_kind["DaemonSet"]
        if "RuntimeClass" in by_kind:
            assert by_kind["RuntimeClass"] < by_kind["DaemonSet"]


def test_flux_stages_depend_on_what_they_need(flux_out):
    out = flux_out
    cluster = out / "gpu-west"
    kustomizations = [
        obj for obj in listed_objects(cluster / "gitops") if obj["kind"] == "Kustomization"
    ]
    by_name = {k["metadata"]["name"]: k for k in kustomizations}
    foundation = by_name["gpustack-gpu-west-foundation"]
    workloads = by_name["gpustack-gpu-west-workloads"]
    assert "dependsOn" not in foundation["spec"]
    assert workloads["spec"]["dependsOn"] == [{"name": "gpustack-gpu-west-foundation"}]
    # The monitors need only their namespace: a driver rollout in the workloads holds them not.
    monitors = by_name["gpustack-gpu-west-monitors"]
    assert monitors["spec"]["dependsOn"] == [{"name": "gpustack-gpu-west-foundation"}]
    for kustomization in kustomizations:
        assert kustomization["spec"]["prune"] is True and kustomization["spec"]["wait"] is True
        assert kustomization["spec"]["sourceRef"] == {"kind": "GitRepository", "name": "gpu-fleet"}
    kinds = {
        stage: {obj["kind"] for obj in kustomize(cluster / stage)}
        for stage in ("foundation", "workloads")
    }
    assert {"Namespace", "CustomResourceDefinition"} <= kinds["foundation"]
    assert "DaemonSet" in kinds["workloads"] and "Namespace" not in kinds["workloads"]
    # The top-level kustomization still lists every object, stage by stage in apply order.
    top = [path.split("/")[0] for path in load(cluster / "kustomization.yaml")["resources"]]
    order = ["foundation", "workloads", "monitors", "smoke-test"]
    assert [order.index(stage) for stage in top] == sorted(order.index(stage) for stage in top)
    assert top[0] == "foundation"


def _ask_for_application_set(base: Path) -> None:
    text = base.read_text()
    base.write_text(text.replace("    destination:", "    applicationSet: true\n    destination:"))


@pytest.mark.shared
def test_application_set_generates_an_application_per_rendered_folder(cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    readme_files(tmp_path, "argocd")
    _ask_for_application_set(tmp_path / "clusters" / "base.yaml")
    assert cli("render", "clusters", "-o", "out").exit_code == 0
    application_set = load(tmp_path / "out" / "_gitops" / "applicationset-gpustack.yaml")
    assert schema_errors(application_set) == []
    assert not (tmp_path / "out" / "gpu-east" / "gitops").exists()
    # What Argo CD's Git directory generator would find in the committed repository.
    directories = application_set["spec"]["generators"][0]["git"]["directories"]
    folders = [str(p.relative_to(tmp_path)) for p in (tmp_path / "out").iterdir() if p.is_dir()]

    def matched(exclude: bool) -> set[str]:
        return {
            folder
            for folder in folders
            for directory in directories
            if fnmatch.fnmatch(folder, directory["path"])
            and directory.get("exclude", False) == exclude
        }

    assert matched(exclude=False) - matched(exclude=True) == {"out/gpu-east", "out/gpu-west"}
    template = application_set["spec"]["template"]
    assert template["spec"]["source"]["path"] == "{{path}}"
    # The clusters' stacks live in different namespaces (OpenShift's nvidia-gpu, rke2's
    # gpu-system): the template names none, and each object names its own.
    assert template["spec"]["destination"] == {"name": "{{path.basename}}"}
    # Deleting a cluster's folder deletes its Application and, through the finalizer, the
    # objects it deployed (argo-cd docs/operator-manual/applicationset/Application-Deletion.md).
    assert template["metadata"]["finalizers"] == ["resources-finalizer.argocd.argoproj.io"]
    assert "preserveResourcesOnDeletion" not in str(application_set)
    # Every generated Application retries a failed sync, as a per-cluster Application does.
    assert template["spec"]["syncPolicy"]["retry"]["limit"] > 0
    assert by_identity(kustomize(tmp_path / "out" / "_gitops")) == by_identity([application_set])


@pytest.mark.shared
def test_finalizer_off_preserves_the_stack_when_an_application_goes(cli, tmp_path, monkeypatch):
    """With finalizer false the ApplicationSet asks its controller not to add the finalizer
    (leaving it out of the template would not: the controller adds it by default)."""
    monkeypatch.chdir(tmp_path)
    readme_files(tmp_path, "argocd")
    base = tmp_path / "clusters" / "base.yaml"
    _ask_for_application_set(base)
    base.write_text(
        base.read_text().replace(
            "    applicationSet: true\n", "    applicationSet: true\n    finalizer: false\n"
        )
    )
    assert cli("render", "clusters", "-o", "out").exit_code == 0
    application_set = load(tmp_path / "out" / "_gitops" / "applicationset-gpustack.yaml")
    assert application_set["spec"]["syncPolicy"] == {"preserveResourcesOnDeletion": True}
    assert schema_errors(application_set) == []  # Argo CD's own CRD schema
    # A fleet whose stacks share a namespace gives it to every Application, as a per-cluster
    # Application has it.
    east = tmp_path / "clusters" / "gpu-east" / "gpustack.yaml"
    east.write_text(east.read_text() + "namespace: gpu-system\n")
    assert cli("render", "clusters", "-o", "out").exit_code == 0
    application_set = load(tmp_path / "out" / "_gitops" / "applicationset-gpustack.yaml")
    destination = application_set["spec"]["template"]["spec"]["destination"]
    assert destination["namespace"] == "gpu-system"
    assert "finalizers" not in application_set["spec"]["template"]["metadata"]
    # A per-cluster Application gets the finalizer only when asked.
    base.write_text(
        base.read_text().replace(
            "    applicationSet: true\n    finalizer: false\n", "    finalizer: true\n"
        )
    )
    assert cli("render", "clusters", "-o", "out").exit_code == 0
    application = load(
        tmp_path / "out" / "gpu-east" / "gitops" / "application-gpustack-gpu-east.yaml"
    )
    assert application["metadata"]["finalizers"] == ["resources-finalizer.argocd.argoproj.io"]
    assert schema_errors(application) == []


def test_turning_the_application_set_off_prunes_it_and_check_notices(cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    readme_files(tmp_path, "argocd")
    base = tmp_path / "clusters" / "base.yaml"
    plain = base.read_text()
    _ask_for_application_set(base)
    assert cli("render", "clusters", "-o", "out").exit_code == 0
    fleet_folder = tmp_path / "out" / "_gitops"
    assert (fleet_folder / "applicationset-gpustack.yaml").is_file()
    base.write_text(plain)  # back to an Application per cluster
    stale = cli("check", "clusters", "-o", "out")
    assert stale.exit_code == 1
    assert "out/_gitops/applicationset-gpustack.yaml: extra" in stale.stdout
    assert cli("render", "clusters", "-o", "out").exit_code == 0
    assert not (fleet_folder / "applicationset-gpustack.yaml").exists()
    assert (tmp_path / "out" / "gpu-east" / "gitops").is_dir()
    assert cli("check", "clusters", "-o", "out").exit_code == 0


def test_application_set_needs_one_setting_for_the_whole_fleet(cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    readme_files(tmp_path, "argocd")
    _ask_for_application_set(tmp_path / "clusters" / "base.yaml")
    east = tmp_path / "clusters" / "gpu-east" / "gpustack.yaml"
    east.write_text(east.read_text() + "gitops:\n  argocd:\n    targetRevision: release\n")
    result = cli("render", "clusters", "-o", "out")
    assert result.exit_code == 2
    assert "clusters/gpu-east/gpustack.yaml" in result.stderr
    assert "clusters/gpu-west/gpustack.yaml" in result.stderr
    assert not (tmp_path / "out").exists()


def test_plugin_runs_render_stdout_where_argo_cd_finds_gpustack_yaml(cli, tmp_path, monkeypatch):
    """The plugin Argo CD runs in a config folder prints what kustomize builds from out/<name>."""
    monkeypatch.chdir(tmp_path)
    readme_files(tmp_path, "argocd")
    assert cli("render", "clusters", "-o", "out").exit_code == 0
    plugin = load_text(cli("gitops", "plugin").stdout)
    assert plugin["apiVersion"] == "argoproj.io/v1alpha1"
    assert plugin["kind"] == "ConfigManagementPlugin"
    folder = tmp_path / "clusters" / "gpu-east"
    assert (folder / plugin["spec"]["discover"]["fileName"]).is_file()
    command = plugin["spec"]["generate"]["command"]
    assert command[0] == "gpustack"
    # The command, in the folder, as Argo CD's sidecar runs it (in-process: the installed
    # console script is test_e2e's): in a copy of the repository without `.git`, with the
    # Application's path in the environment, so `extends: ../base.yaml` is the repository's.
    generated = run_gpustack(
        *command[1:], cwd=folder, env={"ARGOCD_APP_SOURCE_PATH": "clusters/gpu-east"}
    )
    assert generated.returncode == 0, generated.stderr

    streamed = [doc for doc in read_manifests(generated.stdout) if doc]
    assert by_identity(streamed) == by_identity(kustomize(tmp_path / "out" / "gpu-east"))
    assert not (folder / "out").exists(), "--stdout must write nothing"


def load_text(text: str):
    from ruamel.yaml import YAML

    return YAML(typ="safe").load(text)


GITOPS_SETTINGS = {
    # Each drops the example's settings of the other tools (null), which would have no effect.
    "none": "gitops: {tool: none, argocd: null, flux: null}\n",
    "argocd": "gitops:\n  tool: argocd\n  argocd: {repoURL: https://git.example.com/x.git}\n"
    "  flux: null\n",
    "flux": "gitops:\n  tool: flux\n  flux: {sourceRef: {name: flux-system}}\n  argocd: null\n",
}
ARGOCD_ANNOTATION = "argocd.argoproj.io/"


@dataclass
class ExampleBuilds:
    """An example rendered with each GitOps tool, and what real kustomize builds of it: one run
    over the Argo CD folder, its gitops/ folder, Flux's gitops/ folder and `own` (they share no
    object; each is built as on its own)."""

    folders: dict[str, Path]  # tool -> the rendered folder
    built: dict[Key, Any]
    # Copies of the files of the folder without GitOps (in none/) and of the Flux folder (in
    # flux/) that the Argo CD folder does not make (the smoke-test Job, which Argo CD runs as a
    # hook): the other files are the Argo CD folder's without Argo CD's annotations.
    own: Path


# The examples' folders are only read: each file is parsed once.
_read = functools.cache(load)


@functools.cache
def _listed(folder: Path) -> list[dict[str, Any]]:
    return [_read(folder / name) for name in _read(folder / "kustomization.yaml")["resources"]]


def _resources(folder: Path) -> list[str]:
    """The files the folder's kustomization lists: a kustomization of resources alone (and the
    kustomization's own annotations, which kustomize leaves off the objects), which changes no
    object."""
    kustomization = _read(folder / "kustomization.yaml")
    assert kustomization.keys() - {"metadata"} == {"apiVersion", "kind", "resources"}
    assert set(kustomization.get("metadata", {})) <= {"annotations"}
    return list(kustomization["resources"])


def _plain(name: str, none: Path, argocd: Path) -> bool:
    """Whether the file `name` of `none` is the Argo CD folder's without Argo CD's annotations."""
    return (argocd / name).is_file() and _read(none / name) == _without_argocd_annotations(
        _read(argocd / name)
    )


@pytest.fixture(scope="module")
def example_builds(tmp_path_factory):
    """example -> its ExampleBuilds, rendered and built once for the module's tests (they only
    read them): one kustomize run an example."""

    @functools.cache
    def build(example: Path) -> ExampleBuilds:
        root = tmp_path_factory.mktemp(example.stem)
        folders = {}
        for tool, settings in GITOPS_SETTINGS.items():
            config = root / f"{tool}.yaml"
            config.write_text(
                f"apiVersion: gpustack.dev/v1alpha1\nkind: GPUStack\nextends: {example_base(root, example)}\n{settings}"
            )
            result = invoke(["render", str(config), "-o", str(root / tool)])
            assert result.exit_code == 0, result.output
            (folders[tool],) = (root / tool).iterdir()
        none, argocd, flux = folders["none"], folders["argocd"], folders["flux"]
        own = root / "own"
        copies = [f"none/{name}" for name in _resources(none) if not _plain(name, none, argocd)]
        in_none = {(none / name).read_bytes() for name in _resources(none)}
        copies += [
            f"flux/{path}" for path in _resources(flux) if (flux / path).read_bytes() not in in_none
        ]
        for copy in copies:
            tool, _, path = copy.partition("/")
            (own / copy).parent.mkdir(parents=True, exist_ok=True)
            (own / copy).write_bytes((folders[tool] / path).read_bytes())
        own.mkdir(exist_ok=True)
        (own / "kustomization.yaml").write_text(json.dumps({"resources": copies}))
        together = [argocd, argocd / "gitops", flux / "gitops", own]
        built = by_identity(kustomize_together(together, root / "together"))
        return ExampleBuilds(folders, built, own)

    return build


def _none_built(builds: ExampleBuilds) -> dict[str, Any]:
    """File of the folder without GitOps -> the object kustomize builds of it: its copy's build,
    or the Argo CD folder's build of the file without Argo CD's annotations (which kustomize
    passes through as it does any annotation)."""
    none, argocd = builds.folders["none"], builds.folders["argocd"]
    built = {}
    for name in _resources(none):
        copy = builds.own / "none" / name
        if copy.is_file():
            assert copy.read_bytes() == (none / name).read_bytes()
            built[name] = builds.built[identity(_read(copy))]
        else:
            assert _plain(name, none, argocd), name
            key = identity(_read(argocd / name))
            built[name] = _without_argocd_annotations(builds.built[key])
    return built


def _flux_built(builds: ExampleBuilds) -> list[dict[str, Any]]:
    """What kustomize builds of the Flux folder: each file (in its stage's folder) is a file of
    the folder without GitOps, byte for byte, or was built from its copy. Reading a file in a
    subfolder is kustomize's as much as one beside the kustomization: test_every_rendered_folder
    builds the walk-through's Flux folders, and test_gitops_health its stage folders."""
    none, flux = builds.folders["none"], builds.folders["flux"]
    none_built = _none_built(builds)
    by_bytes = {(none / name).read_bytes(): obj for name, obj in none_built.items()}
    built = []
    for path in _resources(flux):
        content = (flux / path).read_bytes()
        copy = builds.own / "flux" / path
        if copy.is_file():
            assert copy.read_bytes() == content
            built.append(builds.built[identity(_read(copy))])
        else:
            built.append(by_bytes[content])
    return built


def _without_argocd_annotations(obj: dict[str, Any]) -> dict[str, Any]:
    """`obj` without Argo CD's annotations (a new object; `obj` is left as it is)."""
    metadata = {k: v for k, v in obj["metadata"].items() if k != "annotations"}
    annotations = obj["metadata"].get("annotations", {})
    kept = {k: v for k, v in annotations.items() if not k.startswith(ARGOCD_ANNOTATION)}
    if kept:
        metadata["annotations"] = kept
    return {**obj, "metadata": metadata}


@pytest.mark.parametrize("example", sorted(EXAMPLES.glob("*.yaml")), ids=lambda p: p.stem)
@pytest.mark.parametrize(
    "tool",
    [
        "none",
        pytest.param("argocd", marks=pytest.mark.shared),
        pytest.param("flux", marks=pytest.mark.shared),
    ],
)
def test_every_example_builds_with_kustomize_for_every_tool(example_builds, example, tool):
    """The folder as written (test_golden keeps out/ byte-identical to it) builds into exactly
    its objects; with a GitOps tool, its gitops/ folder builds too, into objects valid under the
    upstream CRD schemas. The three folders of an example make the same objects but for Argo
    CD's annotations and the smoke test: kustomize builds the Argo CD folder and copies of the
    files only the others have, the others' builds are read from it (_none_built, _flux_built)."""
    builds = example_builds(example)
    folder = builds.folders[tool]
    rendered = _listed(folder)
    for obj in rendered:
        annotations = obj["metadata"].get("annotations", {})
        assert ("argocd.argoproj.io/sync-wave" in annotations) == (tool == "argocd")
    # The run built exactly the objects of its folders.
    argocd, flux = builds.folders["argocd"], builds.folders["flux"]
    assert builds.built == by_identity(
        _listed(argocd)
        + _listed(argocd / "gitops")
        + _listed(flux / "gitops")
        + _listed(builds.own)
    )
    if tool == "none":
        assert not (folder / "gitops").exists()
        assert by_identity(list(_none_built(builds).values())) == by_identity(rendered)
        return
    if tool == "flux":
        assert by_identity(_flux_built(builds)) == by_identity(rendered)
    for key in by_identity(_listed(folder / "gitops")):
        assert schema_errors(builds.built[key]) == []


def _objects_of_every_phase() -> list[dict]:
    def obj(api_version: str, kind: str, name: str, namespace: str | None = None) -> dict:
        metadata = {"name": name, **({"namespace": namespace} if namespace else {})}
        return {"apiVersion": api_version, "kind": kind, "metadata": metadata}

    return [
        obj("monitoring.coreos.com/v1", "ServiceMonitor", "dcgm-exporter", "gpu"),
        obj("apps/v1", "DaemonSet", "plugin", "gpu")
        | {"spec": {"template": {"spec": {"containers": []}}}},
        obj("v1", "ServiceAccount", "plugin", "gpu"),
        obj("node.k8s.io/v1", "RuntimeClass", "nvidia") | {"handler": "nvidia"},
        obj("v1", "Namespace", "gpu"),
        obj("apiextensions.k8s.io/v1", "CustomResourceDefinition", "nodefeaturerules.nfd.k8s.io"),
    ]


def test_sync_waves_put_crds_and_namespaces_first_and_monitors_with_the_workloads():
    from gpustack.build.decorate import decorate

    objects = decorate(_objects_of_every_phase(), sync_waves=True)
    annotations = {o["kind"]: o["metadata"]["annotations"] for o in objects}
    waves = {kind: int(a["argocd.argoproj.io/sync-wave"]) for kind, a in annotations.items()}
    # Monitors share the DaemonSets' wave: Argo CD applies a wave only once the ones before it
    # are healthy, and a DaemonSet rolling out a new driver is not, for hours.
    assert waves == {
        "CustomResourceDefinition": -2,
        "Namespace": -1,
        "RuntimeClass": -1,
        "ServiceAccount": 0,
        "DaemonSet": 0,
        "ServiceMonitor": 0,
    }
    assert [waves[o["kind"]] for o in objects] == sorted(waves.values())  # apply order agrees
    crd = annotations["CustomResourceDefinition"]
    assert crd["argocd.argoproj.io/sync-options"] == "ServerSideApply=true"
    assert (
        annotations["ServiceMonitor"]["argocd.argoproj.io/sync-options"]
        == "SkipDryRunOnMissingResource=true"
    )
    assert "argocd.argoproj.io/sync-options" not in annotations["DaemonSet"]
    assert all("annotations" not in o["metadata"] for o in decorate(_objects_of_every_phase()))


def test_flux_stages_build_with_kustomize_including_crds_and_monitors(tmp_path):
    from gpustack.build.decorate import decorate
    from gpustack.build.pipeline import Rendering, files

    rendering = Rendering("lab", decorate(_objects_of_every_phase()), staged=True)
    for relative, content in files(rendering).items():
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / relative).write_bytes(content)
    stages = ("foundation", "workloads", "monitors")
    # The stages share no object: one kustomize run, parted by what each stage lists.
    built = kustomize_apart([tmp_path / stage for stage in stages], tmp_path / "stages")
    kinds = {stage: [o["kind"] for o in objects] for stage, objects in zip(stages, built)}
    assert sorted(kinds["foundation"]) == ["CustomResourceDefinition", "Namespace", "RuntimeClass"]
    assert sorted(kinds["workloads"]) == ["DaemonSet", "ServiceAccount"]
    assert kinds["monitors"] == ["ServiceMonitor"]
    assert by_identity(kustomize(tmp_path)) == by_identity(rendering.objects)


@pytest.mark.parametrize(
    ("tool", "setting", "suggested"),
    [
        ("argocd", "gitops.argocd.path", "rendered/{name}"),
        ("flux", "gitops.flux.path", "./rendered/{name}"),
    ],
)
def test_output_folder_elsewhere_than_the_gitops_path_is_warned_about(
    cli, tmp_path, monkeypatch, tool, setting, suggested
):
    """`-o rendered` while the Applications (or Kustomizations) read out/<name>: they would
    point at a folder that is not there. Render and check say so, naming both and the setting."""
    monkeypatch.chdir(tmp_path)
    readme_files(tmp_path, tool)
    for command in ("render", "check"):
        result = cli(command, "clusters", "-o", "rendered")
        assert result.exit_code == 0, result.output
        warnings = [line for line in result.stderr.splitlines() if setting in line]
        assert len(warnings) == 1, result.stderr  # one per setting, not one per cluster
        assert warnings[0].startswith("warning:") and suggested in warnings[0]
        assert "reads out/gpu-" in warnings[0] and "writes rendered/gpu-" in warnings[0]
    # The path follows the setting: set to where the render writes, nothing is said.
    base = tmp_path / "clusters/base.yaml"
    base.write_text(base.read_text().replace(f"  {tool}:\n", f"  {tool}:\n    path: {suggested}\n"))
    quiet = cli("render", "clusters", "-o", "rendered")
    assert quiet.exit_code == 0 and setting not in quiet.stderr, quiet.stderr


def test_the_gitops_path_is_taken_from_the_repository_top(cli, tmp_path, monkeypatch):
    """In a Git repository the path is the repository's, wherever gpustack runs: rendering from a
    subfolder into the top's out/ is right, into the subfolder's out/ is not."""
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    readme_files(tmp_path, "flux")
    monkeypatch.chdir(tmp_path / "clusters")
    right = cli("render", ".", "-o", "../out")
    assert right.exit_code == 0 and "gitops.flux.path" not in right.stderr, right.stderr
    wrong = cli("render", ".", "-o", "out")
    assert wrong.exit_code == 0, wrong.output
    assert "clusters/out/gpu-" in wrong.stderr and "./clusters/out/{name}" in wrong.stderr
    assert str(tmp_path) in wrong.stderr  # the top it measured from


def test_a_plugin_path_names_the_config_folder_and_is_not_compared(cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    readme_files(tmp_path, "argocd")
    base = tmp_path / "clusters/base.yaml"
    plugin = "    path: clusters/{name}\n    plugin: {name: gpustack}\n"
    base.write_text(base.read_text().replace("  argocd:\n", "  argocd:\n" + plugin))
    result = cli("render", "clusters", "-o", "out")
    assert result.exit_code == 0 and "gitops.argocd.path" not in result.stderr, result.stderr


@pytest.mark.parametrize(
    ("tool", "setting"), [("argocd", "gitops.argocd.path"), ("flux", "gitops.flux.path")]
)
def test_a_path_to_a_kustomize_overlay_of_the_rendered_folder_is_not_warned_about(
    cli, tmp_path, monkeypatch, tool, setting
):
    """Argo CD or Flux may read a kustomize overlay of the rendered folder (a supported layout):
    render and check say nothing of it; a cluster whose overlay is missing is still named. Flux
    reads one folder per stage, so its overlay has one per stage too."""
    monkeypatch.chdir(tmp_path)
    readme_files(tmp_path, tool)
    base = tmp_path / "clusters/base.yaml"
    prefix = "./" if tool == "flux" else ""
    base.write_text(
        base.read_text().replace(
            f"  {tool}:\n", f"  {tool}:\n    path: {prefix}overlays/{{name}}\n"
        )
    )
    assert cli("render", "clusters", "-o", "out").exit_code == 0
    stages = (
        sorted(
            p.name
            for p in (tmp_path / "out/gpu-east").iterdir()
            if (p / "kustomization.yaml").is_file()
        )
        if tool == "flux"
        else [""]
    )
    assert stages != [] and (tool == "argocd" or "workloads" in stages)

    def overlay(name: str, source: str, annotate: bool = True) -> None:
        """overlays/<name>/ building on `source` (relative to the repository), per stage."""
        for folder in stages:
            target = tmp_path / "overlays" / name / folder
            target.mkdir(parents=True, exist_ok=True)
            up = "../" * (3 if folder else 2)
            extra = "commonAnnotations:\n  team: gpu\n" if annotate else ""
            (target / "kustomization.yaml").write_text(
                f"resources:\n  - {up}{source}/{folder}\n".replace("/\n", "\n") + extra
            )

    if tool == "flux":
        # A top-level overlay alone is not enough for Flux, which reads the stages' folders.
        (tmp_path / "overlays/gpu-east").mkdir(parents=True)
        (tmp_path / "overlays/gpu-east/kustomization.yaml").write_text(
            "resources:\n  - ../../out/gpu-east\n"
        )
        result = cli("render", "clusters", "-o", "out")
        assert "gpu-east" in result.stderr and setting in result.stderr, result.stderr
    overlay("gpu-east", "out/gpu-east")
    result = cli("render", "clusters", "-o", "out")
    assert result.exit_code == 0, result.output
    warned = [line for line in result.stderr.splitlines() if setting in line]
    assert len(warned) == 1 and "gpu-west" in warned[0] and "gpu-east" not in warned[0]
    # An overlay of an overlay of the rendered folder is one too.
    overlay("shared-west", "out/gpu-west", annotate=False)
    overlay("gpu-west", "overlays/shared-west")
    for command in ("render", "check"):
        quiet = cli(command, "clusters", "-o", "out")
        assert quiet.exit_code == 0 and setting not in quiet.stderr, quiet.stderr
    # Each stage's overlay (they share no object: one kustomize run) builds the stage's objects,
    # annotated.
    overlays = [tmp_path / "overlays" / "gpu-east" / folder for folder in stages]
    built = by_identity(kustomize_together(overlays, tmp_path / "built"))
    assert all(obj["metadata"]["annotations"]["team"] == "gpu" for obj in built.values())
    listed = [by_identity(listed_objects(tmp_path / "out/gpu-east" / folder)) for folder in stages]
    assert all(listed) and sum(map(len, listed)) == len(built)
    assert all(key in built for objects in listed for key in objects)
