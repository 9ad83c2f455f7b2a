"""A base a fleet shares, changed: which clusters the change does not reach because they set
the changed fields themselves (`diff --git-ref` says so)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from gpustack.config import changed_fields, shadowed

BASE = """\
apiVersion: gpustack.dev/v1alpha1
kind: GPUStack
platform: {profile: kubeadm}
devicePlugin:
  sharing: {strategy: time-slicing, replicas: 4}
"""


def git(folder: Path, *arguments: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *arguments],
        cwd=folder,
        check=True,
        capture_output=True,
    )


def member(folder: Path, name: str, own: str = "") -> Path:
    path = folder / f"{name}.yaml"
    path.write_text(f"extends: base.yaml\nmetadata: {{name: {name}}}\n{own}")
    return path


def test_changed_fields_are_the_leaves_that_differ() -> None:
    old = {"devicePlugin": {"sharing": {"strategy": "time-slicing", "replicas": 4}}}
    new = {
        "devicePlugin": {"sharing": {"strategy": "time-slicing", "replicas": 8}},
        "dcgmExporter": {"interval": "30s"},
        "nodes": {"taints": []},
    }
    assert changed_fields(old, new) == [
        ("devicePlugin", "sharing", "replicas"),
        ("dcgmExporter", "interval"),
        ("nodes", "taints"),
    ]


def test_a_field_the_cluster_sets_is_shadowed(tmp_path: Path) -> None:
    (tmp_path / "base.yaml").write_text(BASE)
    plain = member(tmp_path, "a")
    own = member(tmp_path, "b", "devicePlugin: {sharing: {replicas: 2}}\n")
    whole = member(tmp_path, "c", "devicePlugin: {sharing: null}\n")
    changed = [("devicePlugin", "sharing", "replicas"), ("devicePlugin", "sharing", "strategy")]
    base = tmp_path / "base.yaml"
    assert shadowed(plain, base, changed) == []
    assert shadowed(own, base, changed) == [("devicePlugin", "sharing", "replicas")]
    assert shadowed(whole, base, changed) == changed  # the whole section taken away
    assert shadowed(own, tmp_path / "other.yaml", changed) == []  # a file it does not extend


def test_diff_git_ref_names_the_clusters_a_base_change_does_not_reach(
    cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clusters = tmp_path / "clusters"
    clusters.mkdir()
    (clusters / "base.yaml").write_text(BASE)
    member(clusters, "east")
    member(clusters, "west", "devicePlugin: {sharing: {replicas: 2}}\n")
    git(tmp_path, "init", "-q", "-b", "main")
    git(tmp_path, "add", "-A")
    git(tmp_path, "commit", "-qm", "two clusters")
    (clusters / "base.yaml").write_text(BASE.replace("replicas: 4", "replicas: 8"))
    git(tmp_path, "commit", "-qam", "eight pods per GPU")
    monkeypatch.chdir(tmp_path)
    result = cli("diff", "--git-ref", "HEAD~1", "clusters")
    assert result.exit_code == 1, result.output
    assert (
        "note: clusters/base.yaml changed devicePlugin.sharing.replicas, which "
        "clusters/west.yaml sets itself: the change does not reach that cluster"
    ) in result.stderr
    assert "clusters/east.yaml sets" not in result.stderr
