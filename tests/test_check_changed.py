"""`gpustack check FILE...`: the named (changed) files select the clusters to re-render.

Counted, never timed: each test records which configs the check loads (one load per render)
and compares with the clusters a user would expect the file to affect. The pre-commit hook
itself, passing the changed files, is in tests/test_precommit.py.
"""

from __future__ import annotations

import base64
import textwrap
from pathlib import Path

import pytest
from conftest import run_gpustack

from gpustack.fleet import clusters as fleet

HEAD = "apiVersion: gpustack.dev/v1alpha1\nkind: GPUStack\n"


def _pem() -> str:
    body = base64.encodebytes(b"dummy entitlement certificate " * 8).decode()
    return f"-----BEGIN CERTIFICATE-----\n{body}-----END CERTIFICATE-----\n"


# A fleet where each kind of input is read by some clusters only:
#   common.yaml <- gpu.yaml <- a (MIG config file), b (patch file)
#   common.yaml <- c (user profile `lab`, which extends kubeadm)
#   common.yaml <- d (OpenShift, entitlement PEM)
#   shared/root.yaml <- shared/mid.yaml <- e (bases outside the fleet folder)
FILES = {
    "clusters/common.yaml": HEAD + "dcgmExporter: {monitorLabels: {release: prom}}\n",
    "clusters/gpu.yaml": HEAD + "extends: common.yaml\nplatform: {profile: kubeadm}\n",
    "clusters/a.yaml": HEAD
    + "extends: gpu.yaml\nmetadata: {name: a}\n"
    + "devicePlugin: {migStrategy: mixed}\n"
    + "migManager: {defaultConfig: inference, config: {file: ../mig/a.yaml}}\n",
    "clusters/b.yaml": HEAD
    + "extends: gpu.yaml\nmetadata: {name: b}\npatches:\n- path: ../patches/b.yaml\n",
    "clusters/c.yaml": HEAD + "extends: common.yaml\nmetadata: {name: c}\n"
    "platform: {profile: lab}\n",
    "clusters/d.yaml": HEAD + "extends: common.yaml\nmetadata: {name: d}\n"
    "platform: {profile: openshift}\nentitlement: {enabled: true, pemFile: ../certs/d.pem}\n",
    "clusters/e.yaml": HEAD + "extends: ../shared/mid.yaml\nmetadata: {name: e}\n",
    "shared/mid.yaml": HEAD + "extends: root.yaml\n",
    "shared/root.yaml": HEAD + "platform: {profile: kubeadm}\n",
    "mig/a.yaml": textwrap.dedent("""\
        version: v1
        mig-configs:
          inference:
          - devices: all
            mig-enabled: true
            mig-devices: {"1g.10gb": 7}
        """),
    "patches/b.yaml": "apiVersion: apps/v1\nkind: DaemonSet\n"
    "metadata: {name: nvidia-device-plugin, namespace: gpu-system, "
    "annotations: {policy.example.com/owner: team-b}}\n",
    "profiles/lab.yaml": "apiVersion: gpustack.dev/v1alpha1\nkind: Profile\nextends: kubeadm\n"
    "metadata: {name: lab, description: the lab's kubeadm clusters}\n",
    "certs/d.pem": _pem(),
    ".github/workflows/ci.yaml": "on: push\njobs: {}\n",
}
ALL = ["a", "b", "c", "d", "e"]
OPTIONS = ("-o", "out", "--profiles-dir", "profiles")


@pytest.fixture(scope="module")
def fleet_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("fleet")
    for relative, text in FILES.items():
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_text(text)
    rendered = run_gpustack("render", "clusters", *OPTIONS, cwd=root)
    assert rendered.returncode == 0, rendered.stderr
    return root


@pytest.fixture
def renders(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The cluster configs a command loads to render, by file stem, in order."""
    loaded: list[str] = []
    original = fleet.load_stack

    def counting(path, *args, **kwargs):  # type: ignore[no-untyped-def]
        loaded.append(Path(path).stem)
        return original(path, *args, **kwargs)

    monkeypatch.setattr(fleet, "load_stack", counting)
    return loaded


@pytest.mark.parametrize(
    ("changed", "checked"),
    [
        ("clusters/a.yaml", ["a"]),  # a cluster config
        ("clusters/gpu.yaml", ["a", "b"]),  # a base: the clusters extending it
        ("clusters/common.yaml", ["a", "b", "c", "d"]),  # a base of bases: transitively
        ("shared/root.yaml", ["e"]),  # a base of a base, both outside the folder
        ("mig/a.yaml", ["a"]),  # a MIG config file
        ("patches/b.yaml", ["b"]),  # a patch file
        ("profiles/lab.yaml", ["c"]),  # a user profile
        ("certs/d.pem", ["d"]),  # an entitlement PEM
        ("out/c/kustomization.yaml", ["c"]),  # the committed output of one cluster
        ("out/d/node/README.md", ["d"]),
        (".github/workflows/ci.yaml", []),  # read by no cluster
    ],
)
def test_a_changed_file_checks_exactly_the_clusters_it_affects(
    fleet_repo: Path, renders: list[str], changed: str, checked: list[str]
) -> None:
    result = run_gpustack("check", "clusters", *OPTIONS, changed, cwd=fleet_repo)
    assert result.returncode == 0, result.stderr
    assert renders == checked
    assert f"{len(checked)} cluster(s) checked" in result.stderr


def test_without_file_names_every_cluster_is_checked(fleet_repo: Path, renders: list[str]):
    result = run_gpustack("check", "clusters", *OPTIONS, cwd=fleet_repo)
    assert result.returncode == 0, result.stderr
    assert renders == ALL
    assert "5 cluster(s) checked: output in out is current and valid" in result.stderr


def test_several_changed_files_check_the_union(fleet_repo: Path, renders: list[str]):
    result = run_gpustack(
        "check", "clusters", *OPTIONS, "certs/d.pem", "out/a/kustomization.yaml", cwd=fleet_repo
    )
    assert result.returncode == 0, result.stderr
    assert renders == ["a", "d"]


def test_a_changed_input_that_makes_output_stale_is_caught(
    fleet_repo: Path, tmp_path: Path, renders: list[str]
):
    patch = fleet_repo / "patches" / "b.yaml"
    original = patch.read_text()
    try:
        patch.write_text(original.replace("team-b", "team-c"))
        result = run_gpustack("check", "clusters", *OPTIONS, "patches/b.yaml", cwd=fleet_repo)
    finally:
        patch.write_text(original)
    assert result.returncode == 1
    assert renders == ["b"]
    assert "out/b/daemonset-nvidia-device-plugin.yaml: changed" in result.stdout
    assert "+    policy.example.com/owner: team-c" in result.stdout
    # The fix names the fleet folder, not the changed file.
    assert "run `gpustack render clusters -o out --profiles-dir profiles`" in result.stderr


def test_a_changed_config_outside_the_folder_joins_the_check(fleet_repo: Path, renders: list[str]):
    """Named configs that are no base of the fleet's are clusters, as with `check CONFIG`."""
    result = run_gpustack("check", *OPTIONS, "clusters/c.yaml", "clusters/d.yaml", cwd=fleet_repo)
    assert result.returncode == 0, result.stderr
    assert renders == ["c", "d"]


def test_a_named_file_that_does_not_exist_is_an_error(fleet_repo: Path, renders: list[str]):
    result = run_gpustack("check", "clusters", *OPTIONS, "clusters/f.yaml", cwd=fleet_repo)
    assert result.returncode == 2
    assert "error: clusters/f.yaml: file not found" in result.stderr
    assert renders == []


ARGOCD_SET = (
    "gitops:\n  tool: argocd\n  argocd:\n    repoURL: https://git.example.com/fleet.git\n"
    "    applicationSet: true\n"
)


def _fleet_with_application_set(root: Path) -> None:
    """Two clusters sharing one ApplicationSet (every folder under out/ is an Application)."""
    base = HEAD + 'platform: {profile: rke2, kubernetesVersion: "1.31"}\n' + ARGOCD_SET
    (root / "clusters").mkdir()
    (root / "clusters/base.yaml").write_text(base)
    for name in ("prod-east", "prod-west"):
        config = HEAD + f"extends: base.yaml\nmetadata:\n  name: {name}\n"
        (root / f"clusters/{name}.yaml").write_text(config)
    rendered = run_gpustack("render", "clusters", "-o", "out", cwd=root)
    assert rendered.returncode == 0, rendered.stderr


def test_a_renamed_cluster_gets_the_whole_checks_verdict(tmp_path: Path, renders: list[str]):
    """The hook is given the renamed config only; its old folder is still deployed by the
    ApplicationSet. No config names that folder any more, so the check widens to the fleet
    and says what the whole check says about it."""
    _fleet_with_application_set(tmp_path)
    config = tmp_path / "clusters/prod-west.yaml"
    config.write_text(config.read_text().replace("prod-west", "prod-west2"))
    run_gpustack("render", "clusters", "-o", "out", cwd=tmp_path)
    renders.clear()
    narrowed = run_gpustack(
        "check", "clusters", "-o", "out", "clusters/prod-west.yaml", cwd=tmp_path
    )
    whole = run_gpustack("check", "clusters", "-o", "out", cwd=tmp_path)
    assert narrowed.returncode == whole.returncode == 1
    assert "error: out/prod-west:" in narrowed.stderr
    assert narrowed.stderr == whole.stderr
    # The narrowed pass checked the renamed cluster, then the whole fleet.
    assert renders[:1] == ["prod-west"] and sorted(renders[1:3]) == ["prod-east", "prod-west"]


def test_an_unrenamed_cluster_is_checked_alone_beside_the_application_set(
    tmp_path: Path, renders: list[str]
):
    _fleet_with_application_set(tmp_path)
    renders.clear()
    result = run_gpustack("check", "clusters", "-o", "out", "clusters/prod-west.yaml", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert renders == ["prod-west"]


def test_a_change_to_the_shared_application_set_is_checked_with_every_cluster(
    tmp_path: Path, renders: list[str]
):
    """One cluster's config changes a setting of the ApplicationSet every cluster shares: alone
    it would look current (its folder does not hold the ApplicationSet), with the fleet it is
    refused, as `check` without file names refuses it."""
    _fleet_with_application_set(tmp_path)
    config = tmp_path / "clusters/prod-west.yaml"
    config.write_text(config.read_text() + ARGOCD_SET + "    finalizer: false\n")
    renders.clear()
    narrowed = run_gpustack(
        "check", "clusters", "-o", "out", "clusters/prod-west.yaml", cwd=tmp_path
    )
    whole = run_gpustack("check", "clusters", "-o", "out", cwd=tmp_path)
    assert narrowed.returncode == whole.returncode == 2
    assert "need the same gitops.argocd settings" in narrowed.stderr
    assert narrowed.stderr == whole.stderr
