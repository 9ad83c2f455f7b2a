"""`gpustack diff --against` reads back exactly the layout `gpustack render` writes, for every
GitOps setting and for fleets: right after a render there is nothing to report.

Also: one config on two profiles where some settings apply to one platform only.
"""

from __future__ import annotations

import contextlib
import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import EXAMPLES, git, invoke
from markdown_page import ELEMENTS, Page, to_html

from gpustack.compare import revision

BASE = """\
apiVersion: gpustack.dev/v1alpha1
kind: GPUStack
metadata: {name: lab}
platform: {profile: kubeadm}
"""
ARGOCD = "gitops:\n  tool: argocd\n  argocd:\n    repoURL: https://git.example.com/fleet.git\n"
FLUX = "gitops:\n  tool: flux\n  flux:\n    sourceRef: {kind: GitRepository, name: fleet}\n"

LAYOUTS = {
    "no-gitops": "",
    "argocd-application": ARGOCD,
    "argocd-application-set": ARGOCD + "    applicationSet: true\n",
    "argocd-plugin": ARGOCD + "    path: clusters/{name}\n    plugin: {name: gpustack}\n",
    "flux-stages": FLUX,
    "flux-with-git-repository": FLUX
    + "    gitRepository: {url: https://git.example.com/fleet.git, ref: {branch: main}}\n",
}


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_render_then_diff_against_the_output_is_no_difference(cli, tmp_path, layout):
    config = tmp_path / "lab.yaml"
    config.write_text(BASE + LAYOUTS[layout])
    out = tmp_path / "out"
    assert cli("render", config, "-o", out).exit_code == 0
    assert cli("check", config, "-o", out).exit_code == 0
    result = cli("diff", config, "--against", out)
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("no differences"), result.stdout


def test_a_hand_edit_in_a_flux_stage_is_reported_once(cli, tmp_path):
    config = tmp_path / "lab.yaml"
    config.write_text(BASE + FLUX)
    out = tmp_path / "out"
    assert cli("render", config, "-o", out).exit_code == 0
    plugin = out / "lab" / "workloads" / "daemonset-nvidia-device-plugin.yaml"
    plugin.write_text(
        plugin.read_text().replace(
            "priorityClassName: system-node-critical", "priorityClassName: system-cluster-critical"
        )
    )
    result = cli("diff", config, "--against", out, "--output", "json")
    assert result.exit_code == 1, result.output
    document = json.loads(result.stdout)
    assert document["counts"] == {"changed": 1, "added": 0, "removed": 0}
    (change,) = document["changes"]
    assert (change["kind"], change["name"]) == ("DaemonSet", "nvidia-device-plugin")
    assert change["paths"] == ["spec.template.spec.priorityClassName"]
    # Named by the file it is in, stage folder included, in the JSON and the diff's headers.
    assert change["file"] == "workloads/daemonset-nvidia-device-plugin.yaml"
    header = f"--- {out / 'lab' / 'workloads' / 'daemonset-nvidia-device-plugin.yaml'}\n"
    assert header in change["diff"]


def test_a_flux_config_change_counts_each_object_once(cli, tmp_path):
    old = tmp_path / "old.yaml"
    old.write_text(BASE + FLUX)
    new = tmp_path / "new.yaml"
    new.write_text(BASE + FLUX + "devicePlugin: {migStrategy: single}\n")
    result = cli("diff", old, new, "--output", "json")
    assert result.exit_code == 1, result.output
    document = json.loads(result.stdout)
    files = [change["file"] for change in document["changes"]]
    assert len(files) == len(set(files)), files
    # Object files are compared as objects, never a second time as text: what is compared as
    # text is the kustomizations that list them and the host-side node/ files.
    text = [change["file"] for change in document["changes"] if not change["kind"]]
    assert all(file.endswith("kustomization.yaml") or file.startswith("node/") for file in text), (
        text
    )


def test_a_removed_gitops_file_is_reported(cli, tmp_path):
    config = tmp_path / "lab.yaml"
    config.write_text(BASE + ARGOCD)
    out = tmp_path / "out"
    assert cli("render", config, "-o", out).exit_code == 0
    (out / "lab" / "gitops" / "application-gpustack-lab.yaml").unlink()
    result = cli("diff", config, "--against", out, "--output", "json")
    assert result.exit_code == 1
    changes = json.loads(result.stdout)["changes"]
    assert [(c["change"], c["kind"]) for c in changes] == [("added", "Application")]


# --- one config on two profiles ----------------------------------------------------------------


def test_the_openshift_example_on_another_profile_leaves_out_what_does_not_apply(cli):
    result = cli("diff", "--profile", "openshift", "--profile", "rke2", EXAMPLES / "openshift.yaml")
    assert result.exit_code == 1, result.output
    lines = result.stdout.splitlines()
    assert lines[0].startswith("openshift -> rke2: ")
    left_out = [line for line in lines if line.startswith("note: left out for rke2:")]
    assert any("platform.openshiftVersion" in line for line in left_out), lines[:8]
    assert any("entitlement" in line for line in left_out), lines[:8]
    assert "- removed  MachineConfig.machineconfiguration.openshift.io 50-entitlement-pem" in lines
    document = json.loads(
        cli(
            "diff",
            "--profile",
            "openshift",
            "--profile",
            "rke2",
            EXAMPLES / "openshift.yaml",
            "--output",
            "json",
        ).stdout
    )
    fields = {(item["profile"], item["field"]) for item in document["leftOut"]}
    assert ("rke2", "platform.openshiftVersion") in fields
    assert ("rke2", "entitlement.enabled") in fields
    assert not any(profile == "openshift" for profile, _ in fields)


def test_a_setting_one_profile_refuses_is_left_out_on_that_side_only(cli, tmp_path):
    config = tmp_path / "lab.yaml"
    config.write_text(BASE + "driver: {mode: driver-toolkit}\n")
    result = cli("diff", "--profile", "openshift", "--profile", "kubeadm", config)
    assert result.exit_code == 1, result.output
    assert "note: left out for kubeadm: driver.mode" in result.stdout
    # Rendering the config on kubeadm itself is still an error.
    assert cli("render", config, "--stdout").exit_code == 2


# --- fleets ------------------------------------------------------------------------------------

FLEET_BASE = """\
apiVersion: gpustack.dev/v1alpha1
kind: GPUStack
nodes:
  taints:
  - {key: nvidia.com/gpu, value: present, effect: NoSchedule}
"""


def fleet(folder: Path, gitops: str = "") -> Path:
    clusters = folder / "clusters"
    clusters.mkdir(parents=True)
    (clusters / "base.yaml").write_text(FLEET_BASE + gitops)
    for name, profile in (("gpu-east", "openshift"), ("gpu-west", "rke2"), ("gpu-lab", "kubeadm")):
        (clusters / f"{name}.yaml").write_text(
            f"extends: base.yaml\nmetadata: {{name: {name}}}\nplatform: {{profile: {profile}}}\n"
        )
    return clusters


@pytest.fixture(scope="module")
def fleet_renders(tmp_path_factory) -> Callable[[str], Path]:
    """A folder holding a layout's fleet (clusters/) and its output (out/), rendered once a
    module by `gpustack render clusters -o out`. Read only: a test that changes them takes a
    copy (rendered_fleet)."""
    made: dict[str, Path] = {}

    def rendered(layout: str) -> Path:
        if layout not in made:
            folder = tmp_path_factory.mktemp(layout)
            result = invoke(
                ["render", str(fleet(folder, LAYOUTS[layout])), "-o", str(folder / "out")]
            )
            assert result.exit_code == 0, result.output
            made[layout] = folder
        return made[layout]

    return rendered


def rendered_fleet(fleet_renders, layout: str, folder: Path) -> tuple[Path, Path]:
    """The layout's fleet and its output as a render leaves them, copied into `folder`."""
    shutil.copytree(fleet_renders(layout), folder, symlinks=True, dirs_exist_ok=True)
    return folder / "clusters", folder / "out"


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_render_a_fleet_then_diff_the_folder_is_no_difference(cli, fleet_renders, layout):
    folder = fleet_renders(layout)
    clusters, out = folder / "clusters", folder / "out"
    result = cli("diff", clusters, "--against", out)
    assert result.exit_code == 0, result.output
    # The fleet's out/_gitops/ (its ApplicationSet) is compared too, but is no cluster.
    assert result.stdout == "no differences in 3 cluster(s)\n", result.stdout


def test_a_fleet_diff_names_the_cluster_that_drifted(cli, fleet_renders, tmp_path):
    clusters, out = rendered_fleet(fleet_renders, "argocd-application-set", tmp_path)
    (out / "gpu-west" / "namespace-gpu-system.yaml").unlink()
    (out / "_gitops" / "applicationset-gpustack.yaml").unlink()
    result = cli("diff", clusters, "-o", out)
    assert result.exit_code == 1
    first = result.stdout.splitlines()[0]
    assert first == (
        "1 of 3 cluster(s) differ: gpu-west (1 added); the fleet's _gitops/ differs (1 added)"
    ), first
    document = json.loads(cli("diff", clusters, "-o", out, "--output", "json").stdout)
    # _gitops is not a cluster: it has its own place, and the clusters are the three configs.
    assert [c["name"] for c in document["clusters"]] == ["gpu-east", "gpu-lab", "gpu-west"]
    assert document["clustersDiffering"] == 1
    assert document["fleet"]["name"] == "_gitops"
    assert [(c["change"], c["kind"]) for c in document["fleet"]["changes"]] == [
        ("added", "ApplicationSet")
    ]


# --- pull requests: --git-ref --------------------------------------------------------------------


@pytest.fixture(scope="module")
def committed_repository(tmp_path_factory) -> Path:
    """A GitOps repository whose last commit changed the shared base, made once a module."""
    top = tmp_path_factory.mktemp("repository")
    clusters = fleet(top)
    git(top, "init", "-q", "-b", "main")
    git(top, "add", "-A")
    git(top, "commit", "-qm", "three clusters")
    base = clusters / "base.yaml"
    base.write_text(base.read_text() + "devicePlugin: {version: v0.17.4}\n")
    git(top, "commit", "-qam", "older device plugin everywhere but GKE")
    return top


@pytest.fixture
def repository(committed_repository, tmp_path, monkeypatch):
    """A copy of that repository (its history too) of the test's own, the working directory."""
    shutil.copytree(committed_repository, tmp_path, symlinks=True, dirs_exist_ok=True)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_a_base_change_shows_every_cluster_it_touches(cli, repository):
    result = cli("diff", "--git-ref", "HEAD~1", "clusters/", "--output", "json")
    assert result.exit_code == 1, result.output
    document = json.loads(result.stdout)
    changed = {c["name"]: c for c in document["clusters"] if c["different"]}
    assert sorted(changed) == ["gpu-east", "gpu-lab", "gpu-west"]
    for cluster in changed.values():
        images = [
            c
            for c in cluster["changes"]
            if c["name"] == "nvidia-device-plugin" and c["kind"] == "DaemonSet"
        ]
        added = [
            line.split()[-1]
            for line in images[0]["diff"].splitlines()
            if line.startswith("+") and "image:" in line
        ]
        assert added == ["nvcr.io/nvidia/k8s-device-plugin:v0.17.4"], added
    text = cli("diff", "--git-ref", "HEAD~1", "clusters/").stdout
    assert text.startswith("3 of 3 cluster(s) differ: gpu-east (")
    assert "--- HEAD~1/gpu-west/daemonset-nvidia-device-plugin.yaml" in text


def test_the_working_tree_against_its_own_commit_is_no_difference(cli, repository):
    result = cli("diff", "--git-ref", "HEAD", "clusters")
    assert result.exit_code == 0, result.output
    assert result.stdout == "no differences in 3 cluster(s)\n"


def test_a_cluster_added_since_the_revision_is_all_added(cli, repository):
    (repository / "clusters" / "gpu-new.yaml").write_text(
        "extends: base.yaml\nmetadata: {name: gpu-new}\nplatform: {profile: kubeadm}\n"
    )
    document = json.loads(cli("diff", "--git-ref", "HEAD", "clusters", "--output", "json").stdout)
    (added,) = [c for c in document["clusters"] if c["different"]]
    assert added["name"] == "gpu-new"
    assert added["counts"]["added"] > 0 and added["counts"]["changed"] == 0


def test_an_unknown_revision_is_exit_2(cli, repository):
    result = cli("diff", "--git-ref", "no-such-branch", "clusters")
    assert result.exit_code == 2
    assert "'no-such-branch' is not a commit of this repository" in result.stderr


def test_git_ref_outside_a_repository_is_exit_2(cli, tmp_path, monkeypatch):
    fleet(tmp_path)
    monkeypatch.chdir(tmp_path)
    result = cli("diff", "--git-ref", "HEAD", "clusters")
    assert result.exit_code == 2
    assert "not in one" in result.stderr


# --- markdown ------------------------------------------------------------------------------------


def test_markdown_is_a_review_comment_with_a_table_and_collapsible_diffs(cli, repository):
    result = cli("diff", "--git-ref", "HEAD~1", "clusters", "--output", "markdown")
    assert result.exit_code == 1, result.output
    text = result.stdout
    assert text.startswith("### gpustack diff: HEAD&#126;1 → working tree\n")
    page = Page(to_html(text))
    assert set(page.opened) <= ELEMENTS
    # One summary row per group of identical changes: each cluster's platform differs here.
    summary = [row for row in page.rows if len(row) == 5]
    assert summary[0][0] == "clusters"
    assert sorted(row[0] for row in summary[1:]) == ["1: gpu-east", "1: gpu-lab", "1: gpu-west"]
    assert page.opened.count("details") == page.closed.count("details") == 3
    assert page.opened.count("pre") == 3
    # Every fence is closed: an even number of fence lines.
    fences = [line for line in text.splitlines() if line.startswith("```")]
    assert len(fences) % 2 == 0
    assert "spec.template.spec.containers[0].image" in page.codes


def test_markdown_masks_the_entitlement_certificate(cli, tmp_path):
    pem = tmp_path / "entitlement.pem"
    secret = "MIIBsecretsecretsecretsecret"
    pem.write_text(f"-----BEGIN CERTIFICATE-----\n{secret}\n-----END CERTIFICATE-----\n")
    config = tmp_path / "lab.yaml"
    config.write_text(
        BASE.replace("kubeadm", "openshift")
        + "entitlement: {enabled: true, pemFile: entitlement.pem}\n"
    )
    result = cli("diff", config, "--against", tmp_path, "--output", "markdown", "--max-size", "0")
    assert result.exit_code == 1
    assert "50-entitlement-pem" in result.stdout
    assert secret not in result.stdout and "BEGIN CERTIFICATE" not in result.stdout
    assert "<redacted sha256:" in result.stdout


def test_markdown_of_two_profiles_names_what_was_left_out(cli):
    result = cli(
        "diff",
        "--profile",
        "openshift",
        "--profile",
        "rke2",
        EXAMPLES / "openshift.yaml",
        "--output",
        "markdown",
    )
    assert result.exit_code == 1
    assert "> left out for rke2: <code>platform.openshiftVersion</code>: " in result.stdout
    page = Page(to_html(result.stdout))
    assert [row[0] for row in page.rows if len(row) == 5][1:] == ["1: openshift-entitled"]


def test_a_users_own_sub_folder_in_the_output_is_not_read(cli, tmp_path):
    config = tmp_path / "lab.yaml"
    config.write_text(BASE + FLUX)
    out = tmp_path / "out"
    assert cli("render", config, "-o", out).exit_code == 0
    extra = out / "lab" / "overlays"
    extra.mkdir()
    (extra / "kustomization.yaml").write_text("resources: [../workloads]\n")
    result = cli("diff", config, "--against", out)
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize("given", ["folder", "files"])
def test_diff_and_check_agree_on_an_application_set_no_longer_asked_for(
    cli, fleet_renders, tmp_path, given
):
    # A render of the fleet folder prunes `_gitops/`; a render of some configs leaves it alone.
    clusters, out = rendered_fleet(fleet_renders, "argocd-application-set", tmp_path)
    base = clusters / "base.yaml"
    base.write_text(base.read_text().replace("applicationSet: true", "applicationSet: false"))
    configs = [clusters] if given == "folder" else sorted(clusters.glob("gpu-*.yaml"))
    assert cli("render", *configs, "-o", out).exit_code == 0
    pruned = not (out / "_gitops").exists()
    assert pruned == (given == "folder")
    check = cli("check", *configs, "-o", out)
    difference = cli("diff", *configs, "--against", out)
    assert check.exit_code == difference.exit_code == 0, difference.stdout + check.output
    assert difference.stdout == "no differences in 3 cluster(s)\n"


# --- diff --against and check: the same folders, the same files --------------------------------


def _edit(path: Path, old: str, new: str) -> None:
    path.write_bytes(path.read_bytes().replace(old.encode(), new.encode()))


def _rename(folder: Path, old: str, new: str) -> None:
    (folder / old).rename(folder / new)
    _edit(folder / "kustomization.yaml", old, new)


PLUGIN = "daemonset-nvidia-device-plugin.yaml"
MUTATIONS = {
    "none": lambda folder: None,
    "a comment appended": lambda folder: (
        (folder / "runtimeclass-nvidia.yaml").open("a").write("# note\n")
    ),
    "CRLF line endings": lambda folder: _edit(folder / "runtimeclass-nvidia.yaml", "\n", "\r\n"),
    "a field edited": lambda folder: _edit(folder / PLUGIN, "system-node-critical", "other"),
    "a file deleted": lambda folder: (folder / PLUGIN).unlink(),
    "a file renamed in the kustomization too": lambda folder: _rename(
        folder, PLUGIN, "plugin.yaml"
    ),
    "an old rendered file left": lambda folder: (folder / "runtimeclass-old.yaml").write_bytes(
        (folder / "runtimeclass-nvidia.yaml").read_bytes().replace(b"name: nvidia", b"name: old")
    ),
    "a file of the user's": lambda folder: (folder / "notes.yaml").write_text("a: 1\n"),
    "the kustomization reordered": lambda folder: _edit(
        folder / "kustomization.yaml", "resources:\n", "resources:\n  - runtimeclass-nvidia.yaml\n"
    ),
}


@pytest.mark.parametrize("mutation", sorted(MUTATIONS))
def test_diff_against_reports_every_file_check_finds_stale(cli, tmp_path, mutation):
    # `diff --against` is what a render would change: whatever makes `check` fail shows there,
    # named by its file, even when the objects read back the same (a comment, line endings).
    config = tmp_path / "lab.yaml"
    config.write_text(BASE)
    out = tmp_path / "out"
    assert cli("render", config, "-o", out).exit_code == 0
    MUTATIONS[mutation](out / "lab")
    check = json.loads(cli("check", config, "-o", out, "--output", "json").stdout)
    difference = cli("diff", config, "--against", out, "--output", "json")
    assert difference.exit_code in (0, 1), difference.output
    assert (difference.exit_code == 1) == (not check["current"]), difference.stdout
    (cluster,) = check["clusters"]
    stale = {*cluster["missing"], *cluster["extra"], *cluster["changed"]}
    changes = json.loads(difference.stdout)["changes"]
    assert stale <= {change["file"] for change in changes}, (stale, changes)
    if mutation == "CRLF line endings":  # lines that would look the same are explained
        assert [change["diff"] for change in changes] == [
            f"Line endings differ: {out / 'lab' / 'runtimeclass-nvidia.yaml'} has CRLF where "
            "rendered/runtimeclass-nvidia.yaml has LF\n"
        ]
    assert (mutation in ("none", "a file of the user's")) == (not stale)


# --- --git-ref reads the revision as committed, and only what the configs need ----------------


def test_git_ref_is_not_crashed_by_a_link_pointing_outside_the_repository(cli, repository):
    (repository / "passwd").symlink_to("/etc/passwd")
    (repository / "clusters" / "escape.yaml").symlink_to("/etc/passwd")
    git(repository, "add", "-A")
    git(repository, "commit", "-qm", "links out")
    result = cli("diff", "--git-ref", "HEAD", "clusters/gpu-west.yaml")
    assert result.exit_code == 0, result.output
    assert result.stdout == "no differences in 1 cluster(s)\n"
    result = cli("diff", "--git-ref", "HEAD", "clusters")  # the link in the fleet folder
    assert result.exit_code == 0, result.output
    assert result.stdout == "no differences in 3 cluster(s)\n"
    # A config whose base is such a link: refused at the revision, never read through it.
    (repository / "clusters" / "gpu-west.yaml").write_text(
        (repository / "clusters" / "gpu-west.yaml").read_text().replace("base.yaml", "escape.yaml")
    )
    git(repository, "commit", "-qam", "base through a link")
    result = cli("diff", "--git-ref", "HEAD", "clusters/gpu-west.yaml")
    assert result.exit_code == 2
    assert result.stderr.startswith(
        "error: HEAD:clusters/gpu-west.yaml:1:10: extends: base config HEAD:clusters/escape.yaml: "
        "is a symbolic link pointing outside the repository; gpustack does not follow it"
    )
    assert "root:" not in result.output


def test_git_ref_never_reads_a_base_outside_the_repository_from_a_temporary_folder(cli, repository):
    config = repository / "clusters" / "gpu-west.yaml"
    config.write_text(config.read_text().replace("base.yaml", "../../planted.yaml"))
    git(repository, "commit", "-qam", "a base outside the repository")
    result = cli("diff", "--git-ref", "HEAD", "clusters/gpu-west.yaml")
    assert result.exit_code == 2
    assert result.stderr.startswith(
        "error: HEAD:clusters/gpu-west.yaml:1:10: extends: base config HEAD:../planted.yaml is "
        "outside the git repository holding the config (symbolic links followed)"
    )


def test_git_ref_reads_files_as_committed_not_as_git_archive_exports_them(cli, repository):
    """export-ignore and export-subst change what `git archive` gives, not the revision."""
    (repository / ".gitattributes").write_text(
        "clusters/gpu-east.yaml export-ignore\nclusters/base.yaml export-subst\n"
    )
    base = repository / "clusters" / "base.yaml"
    base.write_text(base.read_text() + "# $Format:%H$\n")
    git(repository, "add", "-A")
    git(repository, "commit", "-qm", "attributes")
    result = cli("diff", "--git-ref", "HEAD", "clusters")
    assert result.exit_code == 0, result.output
    assert result.stdout == "no differences in 3 cluster(s)\n"


def test_git_ref_reads_configs_in_a_checked_out_submodule(cli, repository, tmp_path_factory):
    upstream = tmp_path_factory.mktemp("shared-configs")
    (upstream / "gpu-sub.yaml").write_text(
        "apiVersion: gpustack.dev/v1alpha1\nkind: GPUStack\nmetadata: {name: gpu-sub}\n"
        "platform: {profile: kubeadm}\n"
    )
    git(upstream, "init", "-q", "-b", "main")
    git(upstream, "add", "-A")
    git(upstream, "commit", "-qm", "one config")
    git(
        repository,
        "-c",
        "protocol.file.allow=always",
        "submodule",
        "add",
        "-q",
        str(upstream),
        "shared",
    )
    git(repository, "commit", "-qm", "the shared configs")
    result = cli("diff", "--git-ref", "HEAD", "shared/gpu-sub.yaml")
    assert result.exit_code == 0, result.output
    assert result.stdout == "no differences in 1 cluster(s)\n"


def test_git_ref_with_a_config_from_standard_input_is_refused(cli, repository):
    result = cli("diff", "--git-ref", "HEAD", "-", input="kind: GPUStack\n")
    assert result.exit_code == 2
    assert "a config from standard input has no committed version" in result.stderr


def test_git_ref_brings_no_unrelated_file_onto_the_disk(cli, repository, monkeypatch):
    (repository / "large.bin").write_bytes(b"\0" * (4 * 1024 * 1024))
    (repository / "notes").mkdir()
    (repository / "notes" / "other.yaml").write_text("a: 1\n")
    git(repository, "add", "-A")
    git(repository, "commit", "-qm", "unrelated files")
    seen: list[set[str]] = []
    original = revision.tree_at

    @contextlib.contextmanager
    def watched(ref, top, into, folders=(), outside=()):
        with original(ref, top, into, folders, outside):
            yield
            seen.append({str(p.relative_to(into)) for p in into.rglob("*") if p.is_file()})

    monkeypatch.setattr(revision, "tree_at", watched)
    result = cli("diff", "--git-ref", "HEAD", "clusters/gpu-west.yaml")
    assert result.exit_code == 0, result.output
    assert seen == [{"clusters/gpu-west.yaml", "clusters/base.yaml"}]


def test_git_ref_reads_a_profiles_dir_outside_the_repository_on_both_sides(
    cli, repository, tmp_path_factory
):
    """A --profiles-dir the command line names outside the repository is not the revision's:
    both sides read it (only what the configs name is confined to the repository)."""
    profiles_dir = tmp_path_factory.mktemp("my-profiles")
    (profiles_dir / "mine.yaml").write_text(
        "apiVersion: gpustack.dev/v1alpha1\nkind: Profile\nmetadata: {name: mine}\n"
        "extends: kubeadm\ndefaults: {namespace: gpu-mine}\n"
    )
    (repository / "clusters" / "gpu-mine.yaml").write_text(
        "apiVersion: gpustack.dev/v1alpha1\nkind: GPUStack\nmetadata: {name: gpu-mine}\n"
        "platform: {profile: mine}\n"
    )
    git(repository, "add", "-A")
    git(repository, "commit", "-qm", "a cluster on a profile of my own")
    result = cli(
        "diff", "--git-ref", "HEAD", "clusters/gpu-mine.yaml", "--profiles-dir", str(profiles_dir)
    )
    assert result.exit_code == 0, result.output
    assert result.stdout == "no differences in 1 cluster(s)\n"


def test_git_ref_refuses_a_loop_of_links_in_the_repository(cli, repository):
    clusters = repository / "clusters"
    (clusters / "loop-a.yaml").symlink_to("loop-b.yaml")
    (clusters / "loop-b.yaml").symlink_to("loop-a.yaml")
    config = clusters / "gpu-west.yaml"
    config.write_text(config.read_text().replace("base.yaml", "loop-a.yaml"))
    git(repository, "add", "-A")
    git(repository, "commit", "-qm", "a loop of links")
    result = cli("diff", "--git-ref", "HEAD", "clusters/gpu-west.yaml")
    assert result.exit_code == 2
    assert result.stderr.startswith(
        "error: HEAD:clusters/gpu-west.yaml:1:10: extends: base config HEAD:clusters/loop-a.yaml: "
        "too many symbolic links"
    )
