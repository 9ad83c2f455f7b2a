"""`diff --git-ref` on a fleet whose configs live in a git submodule reads the submodule at the
commit the revision records for it, from the submodule's checkout, or refuses clearly: an
unchanged fleet is never shown as all added."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import git

CONFIG = (
    "apiVersion: gpustack.dev/v1alpha1\nkind: GPUStack\nmetadata: {{name: {name}}}\n"
    'platform: {{profile: kubeadm, kubernetesVersion: "1.31"}}\n'
)


@pytest.fixture
def superproject(tmp_path: Path) -> Path:
    """A repository whose fleet (`fleet/clusters/`, two clusters) is a submodule, nested one
    level deeper for cluster `c` (`fleet/more/`, a submodule of the submodule)."""
    inner = tmp_path / "inner"
    (inner / "clusters").mkdir(parents=True)
    (inner / "clusters" / "c.yaml").write_text(CONFIG.format(name="c"))
    git(inner, "init", "-q", "-b", "main")
    git(inner, "add", "-A")
    git(inner, "commit", "-qm", "c")
    fleet = tmp_path / "fleet"
    (fleet / "clusters").mkdir(parents=True)
    for name in ("a", "b"):
        (fleet / "clusters" / f"{name}.yaml").write_text(CONFIG.format(name=name))
    git(fleet, "init", "-q", "-b", "main")
    git(fleet, "submodule", "add", "-q", str(inner), "more")
    git(fleet, "add", "-A")
    git(fleet, "commit", "-qm", "a and b")
    top = tmp_path / "top"
    top.mkdir()
    git(top, "init", "-q", "-b", "main")
    git(top, "submodule", "add", "-q", str(fleet), "fleet")
    git(top, "submodule", "update", "-q", "--init", "--recursive")
    git(top, "commit", "-qm", "the fleet")
    return top


@pytest.mark.parametrize("folder", ["fleet", "fleet/clusters", "."])
def test_an_unchanged_fleet_in_a_submodule_has_no_differences(
    cli, superproject: Path, monkeypatch: pytest.MonkeyPatch, folder: str
) -> None:
    monkeypatch.chdir(superproject)
    result = cli("diff", "--git-ref", "HEAD", folder)
    clusters = 2 if folder == "fleet/clusters" else 3  # fleet/more/ holds c
    assert result.stdout == f"no differences in {clusters} cluster(s)\n", result.output
    assert result.exit_code == 0


def test_a_change_recorded_in_the_submodule_shows_as_changed(
    cli, superproject: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    checkout = superproject / "fleet"
    config = checkout / "clusters" / "a.yaml"
    config.write_text(
        config.read_text() + "devicePlugin: {sharing: {strategy: time-slicing, replicas: 2}}\n"
    )
    git(checkout, "commit", "-qam", "share a's GPUs")
    git(superproject, "commit", "-qam", "the fleet, a's GPUs shared")
    monkeypatch.chdir(superproject)
    result = cli("diff", "--git-ref", "HEAD~1", "fleet")
    assert result.exit_code == 1, result.output
    assert result.stdout.startswith("1 of 3 cluster(s) differ: a (4 changed)\n"), result.stdout
    # At HEAD the submodule's recorded commit is the one checked out: nothing differs.
    assert cli("diff", "--git-ref", "HEAD", "fleet").exit_code == 0


def test_a_submodule_commit_its_checkout_lacks_is_refused(
    cli, superproject: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The revision records a commit the submodule's checkout has never fetched.
    missing = "1234567890" * 4
    git(superproject, "update-index", "--cacheinfo", f"160000,{missing},fleet")
    git(superproject, "commit", "-qm", "a commit nobody has")
    git(superproject, "reset", "-q", "--", "fleet")  # the working tree stays as it was
    monkeypatch.chdir(superproject)
    for folder in ("fleet", "fleet/clusters/a.yaml"):
        result = cli("diff", "--git-ref", "HEAD", folder)
        assert result.exit_code == 2, result.output
        assert result.stderr == (
            "error: HEAD:fleet: is a git submodule whose checkout does not hold the commit HEAD "
            "records for it (123456789012): --git-ref reads a submodule at that commit, from its "
            "checkout (check the submodules out first: git submodule update --init --recursive)\n"
        )


def test_a_submodule_not_checked_out_is_left_out_on_both_sides(
    cli, superproject: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A config of the repository's own beside a submodule nobody checked out: the working tree
    # has none of the submodule's files, and the revision is read without them too.
    (superproject / "top.yaml").write_text(CONFIG.format(name="top"))
    git(superproject, "add", "top.yaml")
    git(superproject, "commit", "-qm", "a config of its own")
    git(superproject, "submodule", "deinit", "-q", "-f", "fleet")
    monkeypatch.chdir(superproject)
    result = cli("diff", "--git-ref", "HEAD", ".")
    assert result.stdout == "no differences in 1 cluster(s)\n", result.output
    assert result.exit_code == 0
