"""A fleet's change as a pull-request review (`diff --output markdown`), an object renamed by its
content hash shown as one change, and the counts render, check and diff give of a fleet.

The Markdown is read back with markdown-it (CommonMark with GitHub's tables) and the HTML it
makes with html.parser: what a reader of the comment would see, not the text gpustack wrote.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
from conftest import git
from markdown_page import ELEMENTS, Page, to_html

from gpustack.commands import check as check_command
from gpustack.commands import common
from gpustack.compare import diff_report, review
from gpustack.compare.diff_markdown import MARKDOWN_MAX_SIZE, as_markdown
from gpustack.compare.object_diff import Change, Diff, Unreached, diff_objects
from gpustack.compare.output_check import OutputCheck

# --- a 30-cluster fleet with one base change ------------------------------------------------------

BASE = """\
apiVersion: gpustack.dev/v1alpha1
kind: GPUStack
platform: {profile: kubeadm}
nodes:
  taints:
  - {key: nvidia.com/gpu, value: present, effect: NoSchedule}
devicePlugin:
  sharing: {strategy: time-slicing, replicas: 4}
smokeTest:
  enabled: true
"""
NAMES = [f"gpu-{number:02}" for number in range(1, 31)]
RKE2 = {"gpu-29", "gpu-30"}  # two clusters on another platform: a second group of changes


def fleet_repository(top: Path, names: list[str], rke2: set[str]) -> Path:
    """A repository (`top`) of cluster configs extending one base, whose last commit raised the
    base's time-slicing replicas from 4 to 8; the clusters `rke2` names on rke2."""
    clusters = top / "clusters"
    clusters.mkdir()
    (clusters / "base.yaml").write_text(BASE)
    for name in names:
        profile = "rke2" if name in rke2 else "kubeadm"
        (clusters / f"{name}.yaml").write_text(
            f"extends: base.yaml\nmetadata: {{name: {name}}}\nplatform: {{profile: {profile}}}\n"
        )
    git(top, "init", "-q", "-b", "main")
    git(top, "add", "-A")
    git(top, "commit", "-qm", "thirty clusters")
    (clusters / "base.yaml").write_text(BASE.replace("replicas: 4", "replicas: 8"))
    git(top, "commit", "-qam", "eight pods per GPU")
    return top


@pytest.fixture(scope="module")
def thirty(tmp_path_factory) -> Path:
    """30 clusters in a repository (fleet_repository), two of them on rke2."""
    return fleet_repository(tmp_path_factory.mktemp("fleet"), NAMES, RKE2)


@pytest.fixture(scope="module")
def three(tmp_path_factory) -> Path:
    """3 clusters in a repository (fleet_repository), the last on rke2: two groups of identical
    changes, whose review (about 10,000 characters) is larger than 6,000."""
    return fleet_repository(tmp_path_factory.mktemp("fleet"), NAMES[:3], {NAMES[2]})


def test_a_base_change_in_30_clusters_is_a_review_github_accepts_naming_every_cluster(
    cli, thirty, monkeypatch
):
    monkeypatch.chdir(thirty)
    result = cli("diff", "--git-ref", "HEAD~1", "clusters", "--output", "markdown")
    assert result.exit_code == 1, result.output
    text = result.stdout
    assert len(text) < MARKDOWN_MAX_SIZE, len(text)
    page = Page(to_html(text))
    assert set(page.opened) <= ELEMENTS, set(page.opened) - ELEMENTS
    shown = " ".join(page.text)
    assert "30 of 30 clusters differ, in 2 groups of identical changes" in shown
    assert "Left out" not in shown  # everything fits
    for name in NAMES:
        assert name in page.codes, name
    # The summary table comes first: one row per group, the larger first, before any details.
    assert page.opened.index("table") < page.opened.index("details")
    header, *rows = page.rows[: 1 + 2]
    assert header == ["clusters", "changed", "added", "removed", "what changes"]
    assert [row[0].split(":")[0] for row in rows] == ["28", "2"]
    # The smoke-test Job's new name is its new hash: one changed Job, nothing added or removed.
    # The sharing replicas also scale the GPUsNotAdvertised alert's expected GPU count.
    assert [row[1:4] for row in rows] == [["6", "0", "0"], ["6", "0", "0"]]
    assert any(code.startswith("PrometheusRule.monitoring.coreos.com ") for code in page.codes)
    assert 'data["config.yaml"].sharing.timeSlicing.resources[0].replicas' in page.codes
    assert " 4 → 8" in shown
    assert any(
        code.startswith("Job.batch gpu-system/gpu-smoke-test-") and "(was " in code
        for code in page.codes
    )
    # Each group collapsed, its diff (one cluster's) in a code block of its own.
    assert page.opened.count("details") == page.closed.count("details") == 2
    assert page.opened.count("pre") == 2
    assert "+            replicas: 8" in shown


def test_a_review_over_its_size_says_what_it_left_out_and_how_to_see_it(cli, three, monkeypatch):
    # The review's size is the point, not the fleet's: three clusters in two groups are enough.
    monkeypatch.chdir(three)
    result = cli(
        "diff", "--git-ref", "HEAD~1", "clusters", "--output", "markdown", "--max-size", "6000"
    )
    assert result.exit_code == 1, result.output
    assert len(result.stdout) <= 6000, len(result.stdout)
    page = Page(to_html(result.stdout))
    shown = "".join(page.text)
    assert "Left out to stay under 6,000 characters: " in shown
    # The summary table stays whole.
    assert [row[0].split(":")[0] for row in page.rows[1:3]] == ["2", "1"]
    # The commands it names run: every change, and one cluster's.
    every = next(code for code in page.codes if code.startswith("gpustack diff"))
    assert shlex.split(every)[1:] == ["diff", "--git-ref", "HEAD~1", "clusters"]
    one = [code for code in page.codes if code.startswith("gpustack diff")][1]
    config = shlex.split(one)[-1]
    name = Path(config).stem
    assert shlex.split(one)[1:] == ["diff", "--git-ref", "HEAD~1", f"clusters/{name}.yaml"]
    assert f"{name}" in shown.split("Left out", 1)[1]  # one of those left out
    again = cli(*shlex.split(one)[1:])
    assert again.exit_code == 1, again.output
    assert again.stdout.startswith(f"1 of 1 cluster(s) differ: {name} (6 changed)"), again.stdout
    # Too small to hold a review: a usage error.
    small = cli(
        "diff", "--git-ref", "HEAD~1", "clusters", "--output", "markdown", "--max-size", "500"
    )
    assert small.exit_code == 2
    assert "--max-size 500 leaves no room for a review" in small.stderr
    # No limit: everything, as markdown.
    whole = cli(
        "diff", "--git-ref", "HEAD~1", "clusters", "--output", "markdown", "--max-size", "0"
    )
    assert "Left out" not in whole.stdout
    assert len(whole.stdout) > 6000  # the fleet's review is larger than the size asked for


# --- what matters first: hashes set aside, impact ranked, nodes named ------------------------------


def selectors_repository(top: Path, before: str = BASE, after: str | None = None) -> Path:
    """30 clusters that differ only in their node selector, and one base change (`before` to
    `after`, by default replicas 4 to 8): each cluster's smoke-test Job hashes its own pod
    template, so its name differs."""
    clusters = top / "clusters"
    clusters.mkdir()
    (clusters / "base.yaml").write_text(before)
    for name in NAMES:
        (clusters / f"{name}.yaml").write_text(
            f"extends: base.yaml\nmetadata: {{name: {name}}}\n"
            f"nodes:\n  selector: {{example.com/pool: {name}}}\n"
        )
    git(top, "init", "-q", "-b", "main")
    git(top, "add", "-A")
    git(top, "commit", "-qm", "thirty clusters")
    (clusters / "base.yaml").write_text(after or before.replace("replicas: 4", "replicas: 8"))
    git(top, "commit", "-qam", "the change")
    return top


def test_clusters_that_differ_only_in_content_hashes_make_one_group(cli, tmp_path, monkeypatch):
    monkeypatch.chdir(selectors_repository(tmp_path))
    result = cli("diff", "--git-ref", "HEAD~1", "clusters", "--output", "markdown")
    assert result.exit_code == 1, result.output
    page = Page(to_html(result.stdout))
    shown = "".join(page.text)
    assert "30 of 30 clusters differ." in shown  # one group: no "in N groups"
    assert [row[0].split(":")[0] for row in page.rows[1:2]] == ["30"]
    assert page.opened.count("details") == 1
    # One diff, not thirty: a comment per cluster would take 60,000 characters.
    assert len(result.stdout) < 10_000, len(result.stdout)
    # What differs between them is said, and whose values are shown.
    assert "differ from cluster to cluster; shown are gpu-01's." in shown
    assert "nodes matching example.com/pool=gpu-01" in shown
    # The smoke test's name is still its own in each cluster's text output.
    text = cli("diff", "--git-ref", "HEAD~1", "clusters").stdout
    assert len(set(re.findall(r"gpu-smoke-test-[0-9a-f]{8} \(was", text))) == 30


DRIVER_BASE = """\
apiVersion: gpustack.dev/v1alpha1
kind: GPUStack
platform: {profile: kubeadm}
driver:
  mode: container
  nodeOS: ubuntu22.04
  version: "570.172.08"
smokeTest:
  enabled: true
"""


@pytest.fixture(scope="module")
def driver_fleet(tmp_path_factory) -> Path:
    """30 clusters, of which 28 pin the driver version the base has; the last commit gives the
    base a new driver and a new smoke-test image: 28 clusters only rename their smoke test, two
    reload their driver."""
    top = tmp_path_factory.mktemp("fleet")
    clusters = top / "clusters"
    clusters.mkdir()
    (clusters / "base.yaml").write_text(DRIVER_BASE)
    for number, name in enumerate(NAMES, 1):
        pinned = 'driver:\n  version: "570.172.08"\n' if number <= 28 else ""
        (clusters / f"{name}.yaml").write_text(
            f"extends: base.yaml\nmetadata: {{name: {name}}}\n{pinned}"
        )
    git(top, "init", "-q", "-b", "main")
    git(top, "add", "-A")
    git(top, "commit", "-qm", "thirty clusters")
    (clusters / "base.yaml").write_text(
        DRIVER_BASE.replace("570.172.08", "580.95.05")
        + "  image: nvcr.io/nvidia/k8s/cuda-sample:nbody-cuda12.5.0\n"
    )
    git(top, "commit", "-qam", "a new driver")
    return top


def test_a_driver_change_outranks_a_larger_group_of_smoke_test_renames(
    cli, driver_fleet, monkeypatch
):
    monkeypatch.chdir(driver_fleet)
    result = cli(
        "diff", "--git-ref", "HEAD~1", "clusters", "--output", "markdown", "--max-size", "4000"
    )
    assert result.exit_code == 1, result.output
    assert len(result.stdout) <= 4000
    page = Page(to_html(result.stdout))
    shown = "".join(page.text)
    # The two clusters whose nodes the change drains come first, and keep their details; the
    # 28 smoke-test renames are what the size leaves out.
    first = page.rows[1]
    assert first[0] == "2: gpu-29, gpu-30"
    assert first[4].startswith(
        "reloads the GPU driver (gpu-system/nvidia-driver-daemonset, 1 node at a time, each "
        "new pod Ready 30 s before the next): ~ DaemonSet.apps gpu-system/nvidia-driver-daemonset"
    )
    assert page.opened.count("details") == 1
    assert "Clusters: gpu-29, gpu-30" in shown
    assert "the details of 28 clusters" in shown
    # Its section says what happens on each node.
    assert (
        "DaemonSet gpu-system/nvidia-driver-daemonset restarts its pods on nodes matching "
        "feature.node.kubernetes.io/pci-10de.present=true" in shown
    )
    assert (
        "on each node the driver is reloaded: the GPU DaemonSets' pods leave it, it is cordoned, "
        "the pods using its GPUs are evicted (ENABLE_GPU_POD_EVICTION), then the new driver is "
        "loaded" in shown
    )
    # Without a size limit, the renames follow, saying that nothing restarts.
    whole = Page(
        to_html(
            cli(
                "diff", "--git-ref", "HEAD~1", "clusters", "--output", "markdown", "--max-size", "0"
            ).stdout
        )
    )
    assert [row[0].split(":")[0] for row in whole.rows[1:3]] == ["2", "28"]
    assert "On running nodes: no pod restarts." in "".join(whole.text)


def test_a_review_names_the_clusters_a_base_change_does_not_reach(cli, driver_fleet, monkeypatch):
    monkeypatch.chdir(driver_fleet)
    markdown = cli("diff", "--git-ref", "HEAD~1", "clusters", "--output", "markdown")
    shown = "".join(Page(to_html(markdown.stdout)).text)
    assert (
        "Not reached: the change to driver.version in clusters/base.yaml does not reach 28 "
        "clusters, which set it themselves: gpu-01 (clusters/gpu-01.yaml:4:12), gpu-02 "
        "(clusters/gpu-02.yaml:4:12)" in shown
    )
    assert "and 23 more" in shown
    # The smoke-test image, which no cluster sets, is not named.
    assert "smokeTest.image" not in shown
    text = cli("diff", "--git-ref", "HEAD~1", "clusters").stdout
    (note,) = [line for line in text.splitlines() if line.startswith("note: ")]
    assert note.endswith("gpu-28 (clusters/gpu-28.yaml:4:12)")
    document = json.loads(cli("diff", "--git-ref", "HEAD~1", "clusters", "--output", "json").stdout)
    (unreached,) = document["unreached"]
    assert (unreached["base"], unreached["setting"]) == ("clusters/base.yaml", "driver.version")
    assert [c["name"] for c in unreached["clusters"]] == NAMES[:28]


# --- hostile text --------------------------------------------------------------------------------

HOSTILE = [
    "a`b``c```d",
    "</details><script>alert(1)</script>",
    "pipe | in | cell",
    "line\nbreak\n\nparagraph",
    "**bold** _em_ [link](https://example.com) ~~gone~~ <b>html</b> &amp;",
    "</code></summary></td>",
    "\u2028\u202eevil",
]


def hostile_diffs() -> list[tuple[str, Diff]]:
    """Clusters and changes whose every text is hostile: names, subjects, files, field paths,
    values, left-out notes, and diffs holding fences and closing tags."""
    diffs = []
    for index, text in enumerate(HOSTILE):
        unified = f"--- old/{text}\n+++ new/{text}\n@@ -1 +1 @@\n-{text}\n+````\n+</details>\n"
        change = Change(
            "changed",
            f"ConfigMap ns/{text}",
            f"{text}.yaml",
            ("", "ConfigMap", "ns", text),
            (f'data["{text}"]',),
            unified,
            renamed_from=f"was-{text}",
            values=((f'data["{text}"]', text, f"`{text}`"),),
        )
        added = Change("added", f"file {text}", text, None, (), f"+++ {text}\n+{text}\n")
        left_out = ((text, f"field.{text}", f"because {text}"),)
        diffs.append((f"{index}-{text}", Diff("old", "new", (change, added), left_out)))
    return diffs


@pytest.mark.parametrize("max_size", [MARKDOWN_MAX_SIZE, 2500])
def test_hostile_names_and_keys_stay_in_their_code_spans_and_cells(max_size):
    diffs = hostile_diffs()
    text = as_markdown(diffs, f"title {HOSTILE[1]}", max_size, "gpustack diff x", None)
    page = Page(to_html(text))
    # No element but gpustack's own: no <script>, <b>, link or emphasis made of a name.
    assert set(page.opened) <= ELEMENTS, set(page.opened) - ELEMENTS
    assert page.opened.count("details") == page.closed.count("details")
    # Every row of every table has the cells of its header: no pipe or line break split one.
    widths = {len(row) for row in page.rows}
    assert widths <= {3, 5}, widths
    if max_size == MARKDOWN_MAX_SIZE:
        # Each name is whole inside one code element, exactly as given.
        for index, hostile in enumerate(HOSTILE):
            assert f"{index}-{hostile}" in page.codes, hostile
        # The summary table names each cluster in its first cell.
        summary = [row for row in page.rows if len(row) == 5][1:]
        assert [row[0] for row in summary] == [
            f"1: {index}-{hostile}" for index, hostile in enumerate(HOSTILE)
        ]
        # Each diff is one code block holding the diff exactly, fences and tags included.
        blocks = [code for code in page.codes if code.startswith("--- old/")]
        assert blocks == ["".join(change.unified for change in diff.changes) for _, diff in diffs]
        fields = [row for row in page.rows if len(row) == 3 and row[0] == "~ changed"]
        assert [row[1] for row in fields] == [
            f"ConfigMap ns/{text} (was was-{text})" for text in HOSTILE
        ]
    else:
        assert len(text) <= max_size


# --- an object renamed by its content hash --------------------------------------------------------


def job(name: str, image: str) -> dict:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": "gpu-system"},
        "spec": {"template": {"spec": {"containers": [{"name": "cuda", "image": image}]}}},
    }


def config_map(name: str, value: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "gpu-system"},
        "data": {"key": value},
    }


def test_objects_renamed_by_their_content_hash_are_paired_with_their_field_changes():
    old = [
        job("gpu-smoke-test-2acff342", "cuda:12.4"),
        # kustomize's configMapGenerator suffix
        config_map("settings-7fk8b2m9hd", "a"),
        config_map("other", "x"),
    ]
    new = [
        job("gpu-smoke-test-33d726b0", "cuda:12.8"),
        config_map("settings-g4c2t5h6m8", "b"),
        config_map("other-2", "x"),  # no hash: a removal and an addition
    ]
    result = diff_objects(old, new)
    by_name = {change.identity[3]: change for change in result.changes if change.identity}
    smoke = by_name["gpu-smoke-test-33d726b0"]
    assert (smoke.status, smoke.renamed_from) == ("changed", "gpu-smoke-test-2acff342")
    assert smoke.paths == ("metadata.name", "spec.template.spec.containers[0].image")
    assert ("spec.template.spec.containers[0].image", '"cuda:12.4"', '"cuda:12.8"') in smoke.values
    assert "-  name: gpu-smoke-test-2acff342\n+  name: gpu-smoke-test-33d726b0\n" in smoke.unified
    assert "--- old/job-gpu-smoke-test-2acff342.yaml" in smoke.unified
    assert by_name["settings-g4c2t5h6m8"].renamed_from == "settings-7fk8b2m9hd"
    assert by_name["other-2"].status == "added" and by_name["other"].status == "removed"
    assert result.counts() == {"changed": 2, "added": 1, "removed": 1}


def test_two_objects_of_one_name_before_the_hash_are_not_guessed_at():
    old = [config_map("settings-aaaaaaaa1", "a"), config_map("settings-aaaaaaaa2", "b")]
    new = [config_map("settings-bbbbbbbb1", "a"), config_map("settings-bbbbbbbb2", "b")]
    assert diff_objects(old, new).counts() == {"changed": 0, "added": 2, "removed": 2}


SMOKE = """\
apiVersion: gpustack.dev/v1alpha1
kind: GPUStack
metadata: {name: lab}
platform: {profile: kubeadm}
smokeTest:
  enabled: true
"""
NEW_IMAGE = "  image: nvcr.io/nvidia/k8s/cuda-sample:nbody-cuda12.5.0\n"


@pytest.mark.parametrize("output", ["text", "json", "markdown"])
def test_a_new_smoke_test_job_is_a_change_not_a_removal_and_an_addition(cli, tmp_path, output):
    old, new = tmp_path / "old.yaml", tmp_path / "new.yaml"
    old.write_text(SMOKE)
    new.write_text(SMOKE + NEW_IMAGE)
    result = cli("diff", old, new, "--output", output)
    assert result.exit_code == 1, result.output
    if output == "json":
        jobs = [c for c in json.loads(result.stdout)["changes"] if c["kind"] == "Job"]
        assert [c["change"] for c in jobs] == ["changed"]
        assert jobs[0]["renamedFrom"].startswith("gpu-smoke-test-")
        assert jobs[0]["renamedFrom"] != jobs[0]["name"]
        assert "metadata.name" in jobs[0]["paths"]
    elif output == "text":
        lines = [line for line in result.stdout.splitlines() if "Job.batch" in line]
        assert len(lines) == 1 and lines[0].startswith("~ changed  Job.batch"), lines
        assert "(was gpu-smoke-test-" in lines[0]
    else:
        page = Page(to_html(result.stdout))
        rows = [row for row in page.rows if len(row) == 3 and "Job.batch" in row[1]]
        assert [row[0] for row in rows] == ["~ changed"], rows


def test_against_committed_output_a_renamed_job_file_is_no_extra_change(cli, tmp_path):
    config = tmp_path / "lab.yaml"
    config.write_text(SMOKE)
    out = tmp_path / "out"
    assert cli("render", config, "-o", out).exit_code == 0
    config.write_text(SMOKE + NEW_IMAGE)
    document = json.loads(cli("diff", config, "--against", out, "--output", "json").stdout)
    kinds = [(c["change"], c["kind"] or c["file"]) for c in document["changes"]]
    assert kinds == [("changed", "Job"), ("changed", "kustomization.yaml")], kinds


# --- counts --------------------------------------------------------------------------------------

APPLICATION_SET = """\
gitops:
  tool: argocd
  argocd:
    repoURL: https://git.example.com/fleet.git
    applicationSet: true
"""


def small_fleet(folder: Path, base: str, names: list[str], extra: str = "") -> Path:
    clusters = folder / "clusters"
    clusters.mkdir()
    (clusters / "base.yaml").write_text(base)
    for name in names:
        (clusters / f"{name}.yaml").write_text(
            f"extends: base.yaml\nmetadata: {{name: {name}}}\n{extra}"
        )
    return clusters


def test_writing_progress_counts_clusters_not_the_gitops_folder(cli, tmp_path, monkeypatch):
    totals: list[tuple[str, int, int]] = []

    class Recorded(common.Progress):
        def finish(self) -> None:
            totals.append((self.label, self.total, self.done))

    monkeypatch.setattr(common, "Progress", Recorded)
    clusters = small_fleet(
        tmp_path, SMOKE.replace("metadata: {name: lab}\n", "") + APPLICATION_SET, ["a", "b", "c"]
    )
    result = cli("render", clusters, "-o", tmp_path / "out")
    assert result.exit_code == 0, result.output
    assert (tmp_path / "out" / "_gitops").is_dir()
    assert totals == [("rendering", 3, 3), ("writing", 3, 3)]
    assert "rendered 3 cluster(s)" in result.stderr


def test_check_with_set_prints_a_fix_that_keeps_the_set(cli, tmp_path):
    config = tmp_path / "lab.yaml"
    config.write_text(SMOKE)
    out = tmp_path / "out"
    assert cli("render", config, "-o", out).exit_code == 0
    given = "devicePlugin.sharing={strategy: time-slicing, replicas: 8}"
    result = cli("check", config, "-o", out, "--set", given)
    assert result.exit_code == 1
    fix = result.stderr.split("run `", 1)[1].split("`", 1)[0]
    arguments = shlex.split(fix)
    assert arguments[arguments.index("--set") + 1] == given
    # The fix does what it says: after it, the same check passes.
    assert cli(*arguments[1:]).exit_code == 0
    assert cli("check", config, "-o", out, "--set", given).exit_code == 0


GKE = """\
apiVersion: gpustack.dev/v1alpha1
kind: GPUStack
platform: {profile: gke-cos, kubernetesVersion: "1.32"}
nodes:
  gke:
    machineType: a2-highgpu-1g
    accelerator: {type: nvidia-tesla-a100, count: 1}
driver: {mode: gke-managed}
"""


def test_a_fleets_repeated_warning_is_one_line_with_the_count_and_first_names(cli, tmp_path):
    names = [f"gke-{number}" for number in range(1, 8)]
    clusters = small_fleet(tmp_path, GKE, names)
    result = cli("render", clusters, "--stdout")
    assert result.exit_code == 0, result.output
    managed = [line for line in result.stderr.splitlines() if "managed DCGM exporter" in line]
    assert len(managed) == 1, result.stderr
    assert managed[0].startswith("warning: [managed-dcgm-exporter] Kubernetes 1.32 on gke-cos: ")
    assert managed[0].endswith(
        "[7 clusters: gke-1, gke-2, gke-3 and 4 more; --verbose names them all]"
    )
    verbose = cli("render", clusters, "--stdout", "--verbose").stderr
    (line,) = [line for line in verbose.splitlines() if "managed DCGM exporter" in line]
    assert line.endswith(f"[7 clusters: {', '.join(names)}]")


def test_a_single_clusters_warning_names_it_as_before(cli, tmp_path):
    clusters = small_fleet(tmp_path, GKE, ["only"])
    result = cli("render", clusters, "--stdout")
    assert "warning: only: [managed-dcgm-exporter] Kubernetes 1.32 on gke-cos: " in result.stderr


def test_check_groups_a_finding_repeated_in_many_clusters(tmp_path):
    finding = "error: [image-not-pinned] image nvcr.io/x:latest is tagged latest"
    reports = []
    for name in ("a", "b", "c", "d"):
        report = OutputCheck(name)
        report.placed = [("daemonset-x.yaml", finding)]
        reports.append(report)
    reports[0].placed.append(("job-y.yaml", finding))
    lines = check_command._findings(reports, tmp_path, verbose=False)
    assert lines == [
        f"{tmp_path}/*/daemonset-x.yaml: {finding} [4 clusters: a, b, c and 1 more; "
        "--verbose names them all]",
        f"{tmp_path}/a/job-y.yaml: {finding}",
    ]
    assert check_command._findings(reports, tmp_path, verbose=True)[0].endswith(
        "[4 clusters: a, b, c, d]"
    )


def test_the_gitops_folder_is_no_cluster_in_the_markdown_review():
    application_set = Change(
        "added",
        "ApplicationSet.argoproj.io argocd/gpustack",
        "a.yaml",
        ("argoproj.io", "ApplicationSet", "argocd", "gpustack"),
        (),
        "+x\n",
    )
    plugin = Change(
        "changed",
        "DaemonSet.apps gpu-system/p",
        "p.yaml",
        ("apps", "DaemonSet", "gpu-system", "p"),
        ("spec",),
        "--- a\n+++ b\n-x\n+y\n",
    )
    diffs = [
        ("gpu-east", Diff("old", "new", (plugin,))),
        ("gpu-west", Diff("old", "new")),
        ("_gitops", Diff("old", "new", (application_set,))),
    ]
    page = Page(to_html(as_markdown(diffs, "review")))
    assert "1 of 2 clusters differs; the fleet's _gitops/ differs." in "".join(page.text)
    assert [row[0] for row in page.rows if len(row) == 5][1:] == ["1: gpu-east", "_gitops/"]
    assert page.opened.count("details") == 2


def test_a_review_names_ten_settings_not_reached_and_counts_the_rest():
    notes = [
        Unreached("clusters/base.yaml", f"setting.number{index:02}", (("a", "a.yaml:3:4"),))
        for index in range(12)
    ]
    change = Change("changed", "ConfigMap ns/x", "x.yaml", ("", "ConfigMap", "ns", "x"), (), "")
    diffs = [("a", Diff("old", "new", (change,)))]
    page = Page(to_html(as_markdown(diffs, "review", 4000, "gpustack diff x", None, notes)))
    shown = "".join(page.text)
    assert shown.count("Not reached: ") == 10
    assert "setting.number09" in shown and "setting.number10" not in shown
    assert "and 2 more settings not reached: gpustack diff x" in shown


def test_unreached_names_only_the_clusters_whose_own_layers_set_the_changed_value(
    tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    base = "devicePlugin:\n  sharing: {strategy: time-slicing, replicas: 4}\n"
    clusters = {
        "keeps": "",  # takes the change
        "other": "devicePlugin:\n  sharing: {strategy: time-slicing}\n",  # a sibling: takes it
        "sets": "devicePlugin:\n  sharing:\n    replicas: 2\n",
    }

    def chains(text: str, folder: str) -> dict[str, review.Chain]:
        root = tmp_path / folder
        root.mkdir()
        (root / "base.yaml").write_text(text)
        for name, own in clusters.items():
            (root / f"{name}.yaml").write_text(
                f"extends: base.yaml\nmetadata: {{name: {name}}}\n{own}"
            )
        return review.chains([root / f"{name}.yaml" for name in clusters], root)

    old, new = chains(base, "old"), chains(base.replace("4", "8"), "new")
    assert review.unreached(old, new) == [
        ("new/base.yaml", "devicePlugin.sharing.replicas", (("sets", "new/sets.yaml:5:15"),))
    ]
    assert review.unreached(old, old) == []


def test_changes_that_differ_only_by_their_config_hash_are_one_group():
    def plugin(old_hash: str, new_hash: str, replicas: str = "8") -> Diff:
        path = 'spec.template.metadata.annotations["gpustack.dev/config-hash"]'
        daemonset = Change(
            "changed",
            "DaemonSet.apps gpu-system/p",
            "p.yaml",
            ("apps", "DaemonSet", "gpu-system", "p"),
            (path,),
            f"--- a\n+++ b\n@@ -1 +1 @@\n-  hash: {old_hash}\n+  hash: {new_hash}\n",
            values=((path, f'"{old_hash}"', f'"{new_hash}"'),),
        )
        config_map = Change(
            "changed",
            "ConfigMap gpu-system/c",
            "c.yaml",
            ("", "ConfigMap", "gpu-system", "c"),
            ("data.replicas",),
            f"--- a\n+++ b\n@@ -1 +1 @@\n-replicas: 4\n+replicas: {replicas}\n",
            values=(("data.replicas", "4", replicas),),
        )
        return Diff("old", "new", (config_map, daemonset))

    diffs = [
        ("a", plugin("1111aaaa2222bbbb", "3333cccc4444dddd")),
        ("b", plugin("5555eeee6666ffff", "7777aaaa8888bbbb")),
        ("c", plugin("1111aaaa2222bbbb", "9999cccc0000dddd", replicas="16")),
    ]
    page = Page(to_html(as_markdown(diffs, "review")))
    assert [row[0] for row in page.rows[1:3]] == ["2: a, b", "1: c"]  # c's change is another
    assert "differ from cluster to cluster; shown are a's." in "".join(page.text)


def test_a_review_names_the_clusters_where_a_base_change_has_no_effect(
    cli, driver_fleet, monkeypatch, tmp_path
):
    """A base's driver version is a default for the clusters that run the driver container; a
    GKE cluster extending the base takes nothing of it, and the review says so, with why,
    rather than leaving it out in silence."""
    top = tmp_path / "fleet"
    clusters = top / "clusters"
    clusters.mkdir(parents=True)
    (clusters / "base.yaml").write_text((driver_fleet / "clusters" / "base.yaml").read_text())
    (clusters / "metal.yaml").write_text("extends: base.yaml\nmetadata: {name: metal}\n")
    (clusters / "cloud.yaml").write_text(
        "extends: base.yaml\nmetadata: {name: cloud}\nplatform: {profile: gke-cos}\n"
        "driver: {mode: null}\n"
    )
    git(top, "init", "-q", "-b", "main")
    git(top, "add", "-A")
    git(top, "commit", "-qm", "two clusters")
    base = clusters / "base.yaml"
    base.write_text(base.read_text().replace("580.95.05", "595.91.07"))
    git(top, "commit", "-qam", "a new driver")
    monkeypatch.chdir(top)
    text = cli("diff", "--git-ref", "HEAD~1", "clusters").stdout
    (note,) = [line for line in text.splitlines() if line.startswith("note: ")]
    assert note == (
        "note: the change to driver.version in clusters/base.yaml does not reach 1 cluster, "
        "where it has no effect: cloud (no effect there: the driver "
        "is not a container here (driver mode gke-managed): the nodes or the platform install "
        "it, and gpustack renders no driver)"
    )
    # The GKE cluster runs no driver: what changes there is the smoke test's name alone (it
    # hashes the config), which restarts no pod.
    assert "2 of 2 cluster(s) differ: cloud (2 changed), metal (3 changed)" in text


def test_a_group_whose_nodes_differ_says_so_in_words_a_reader_can_read():
    """Two clusters whose driver DaemonSets run on other pools: one group, whose section says
    the nodes differ, whose headline counts the other restarts beside the driver's, and whose
    base-change note speaks of one cluster as one."""
    from gpustack.compare.rollouts import RELOADS_DRIVER, RESTARTS_NODE_PODS, Rollout

    def cluster(pool: str) -> Diff:
        driver = Change(
            "changed",
            "DaemonSet.apps gpu-system/nvidia-driver-daemonset",
            "daemonset-nvidia-driver-daemonset.yaml",
            ("apps", "DaemonSet", "gpu-system", "nvidia-driver-daemonset"),
            ("spec.template.spec.containers[0].image",),
            "--- a\n+++ b\n@@ -1 +1 @@\n-image: d:1\n+image: d:2\n",
            values=(("spec.template.spec.containers[0].image", '"d:1"', '"d:2"'),),
            rollout=Rollout(
                "DaemonSet",
                "gpu-system/nvidia-driver-daemonset",
                "restarts",
                f"nodes matching pool={pool}",
                "1 node at a time",
                "on each node the driver is reloaded",
                RELOADS_DRIVER,
            ),
        )
        plugin = Change(
            "changed",
            "DaemonSet.apps gpu-system/nvidia-device-plugin",
            "daemonset-nvidia-device-plugin.yaml",
            ("apps", "DaemonSet", "gpu-system", "nvidia-device-plugin"),
            ("spec.template.spec.containers[0].image",),
            "--- a\n+++ b\n@@ -1 +1 @@\n-image: p:1\n+image: p:2\n",
            values=(("spec.template.spec.containers[0].image", '"p:1"', '"p:2"'),),
            rollout=Rollout(
                "DaemonSet",
                "gpu-system/nvidia-device-plugin",
                "restarts",
                f"nodes matching pool={pool}",
                "1 node at a time",
                "",
                RESTARTS_NODE_PODS,
            ),
        )
        return Diff("old", "new", (driver, plugin))

    notes = [Unreached("clusters/base.yaml", "driver.version", (("c", "clusters/c.yaml:4:12"),))]
    page = Page(
        to_html(
            as_markdown([("a", cluster("p1")), ("b", cluster("p2"))], "review", 0, "x", None, notes)
        )
    )
    shown = "".join(page.text)
    assert (
        "The labels of the nodes each workload runs on differ from cluster to cluster; shown are "
        "a's." in shown
    )
    assert "The the" not in shown
    assert page.rows[1][4].startswith(
        "reloads the GPU driver (gpu-system/nvidia-driver-daemonset, 1 node at a time); restarts "
        "the pods of 1 other workload: "
    )
    assert "does not reach 1 cluster, which sets it itself: c (clusters/c.yaml:4:12)" in shown
    text_note = diff_report.unreached_line(notes[0])
    assert text_note.endswith("1 cluster, which sets it itself: c (clusters/c.yaml:4:12)")


def test_what_a_small_review_leaves_out_is_named_most_disruptive_first(
    cli, driver_fleet, monkeypatch
):
    """Under a size that leaves out both the driver change and the smoke-test renames, the
    ending names the driver's clusters first, and its one-cluster command is one of theirs."""
    monkeypatch.chdir(driver_fleet)
    result = cli(
        "diff", "--git-ref", "HEAD~1", "clusters", "--output", "markdown", "--max-size", "3500"
    )
    assert len(result.stdout) <= 3500, result.stdout
    assert result.exit_code == 1, result.output
    shown = "".join(Page(to_html(result.stdout)).text)
    assert "the details of 30 clusters (gpu-29, gpu-30, gpu-01, " in shown
    assert "One cluster: gpustack diff --git-ref 'HEAD~1' clusters/gpu-29.yaml." in shown
