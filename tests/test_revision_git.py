"""`diff --git-ref` runs git so that nothing a pull request brings, nor the environment CI runs
it in, makes git write outside gpustack's temporary tree, read another repository, run a
program or use the network: a crafted tree, a folder that looks like a bare repository, a hook's
GIT_DIR, a partial clone, filters and textconv drivers."""

from __future__ import annotations

import binascii
import subprocess
import tempfile
from pathlib import Path

import pytest
from conftest import git

CONFIG = (
    "apiVersion: gpustack.dev/v1alpha1\nkind: GPUStack\nmetadata: {{name: {name}}}\n"
    'platform: {{profile: kubeadm, kubernetesVersion: "1.31"}}\n'
)


@pytest.fixture
def repository(tmp_path: Path) -> Path:
    """A fleet of one cluster, `clusters/a.yaml`, committed."""
    top = tmp_path / "repository"
    (top / "clusters").mkdir(parents=True)
    (top / "clusters" / "a.yaml").write_text(CONFIG.format(name="a"))
    git(top, "init", "-q", "-b", "main")
    git(top, "add", "-A")
    git(top, "commit", "-qm", "a")
    return top


def _tree(top: Path, entries: list[tuple[str, str, str]]) -> str:
    """A tree object of exactly these (mode, name, object) entries, written as git stores one
    and as a push can bring one (`git mktree` takes a `..` too)."""
    data = b"".join(
        f"{mode} {name}".encode() + b"\0" + binascii.unhexlify(obj)
        for mode, name, obj in sorted(entries, key=lambda entry: entry[1])
    )
    return git(top, "hash-object", "-t", "tree", "-w", "--literally", "--stdin", input=data)


def _commit_of(top: Path, clusters_entries: list[tuple[str, str, str]]) -> str:
    config = git(top, "rev-parse", "HEAD:clusters/a.yaml")
    clusters = _tree(top, [("100644", "a.yaml", config), *clusters_entries])
    root = _tree(top, [("40000", "clusters", clusters)])
    return git(top, "commit-tree", root, "-m", "crafted")


@pytest.mark.parametrize("name", ["..", ".GIT", ".git"])
def test_a_tree_entry_no_checkout_writes_is_refused_and_nothing_written(
    cli, repository: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    # clusters/../../../planted.yaml below gpustack's temporary tree is the temporary folder's
    # own parent: a revision could write any file the user can (a shell's start-up file).
    temporary = tmp_path / "temporary"
    temporary.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temporary))
    blob = git(repository, "hash-object", "-w", "--stdin", input=b"planted: true\n")
    inner = _tree(repository, [("100644", "planted.yaml", blob)])
    if name == "..":
        inner = _tree(repository, [("40000", "..", _tree(repository, [("40000", "..", inner)]))])
    crafted = _commit_of(repository, [("40000", name, inner)])
    monkeypatch.chdir(repository)
    result = cli("diff", "--git-ref", crafted, "clusters")
    assert result.exit_code == 2, result.output
    assert "that git refuses to check out" in result.stderr, result.stderr
    assert "Traceback" not in result.output
    assert [path.name for path in tmp_path.rglob("planted.yaml")] == []


def test_a_folder_like_a_bare_repository_is_not_taken_for_the_repository(
    cli, repository: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A pull request commits `HEAD`, `refs/`, `objects/` and a `config` into the fleet's folder;
    # git run there would take the folder for a bare repository and read that config.
    clusters = repository / "clusters"
    marker = tmp_path / "ran"
    (clusters / "HEAD").write_text("ref: refs/heads/main\n")
    for folder in ("refs/heads", "objects/info"):
        (clusters / folder).mkdir(parents=True)
        (clusters / folder / "keep").write_text("")
    (clusters / "config").write_text(
        f"[core]\n\tbare = false\n\tworktree = {tmp_path}\n\tfsmonitor = touch {marker}\n"
    )
    git(repository, "add", "-A")
    git(repository, "commit", "-qm", "a folder like a bare repository")
    monkeypatch.chdir(clusters)
    result = cli("diff", "--git-ref", "HEAD", ".")
    assert result.stdout == "no differences in 1 cluster(s)\n", result.output
    assert result.exit_code == 0
    assert not marker.exists()


def test_a_hook_environment_naming_another_repository_is_not_read(
    cli, repository: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # git hands a hook GIT_DIR (and CI may set GIT_INDEX_FILE or GIT_OBJECT_DIRECTORY): gpustack
    # reads the repository holding the folder, never the one the environment names.
    other = tmp_path / "other"
    (other / "clusters").mkdir(parents=True)
    (other / "clusters" / "a.yaml").write_text(
        CONFIG.format(name="a") + "devicePlugin: {sharing: {strategy: time-slicing, replicas: 2}}\n"
    )
    git(other, "init", "-q", "-b", "main")
    git(other, "add", "-A")
    git(other, "commit", "-qm", "another fleet")
    monkeypatch.setenv("GIT_DIR", str(other / ".git"))
    monkeypatch.setenv("GIT_WORK_TREE", str(other))
    monkeypatch.chdir(repository)
    result = cli("diff", "--git-ref", "HEAD", "clusters")
    assert result.stdout == "no differences in 1 cluster(s)\n", result.output
    assert result.exit_code == 0


def test_a_partial_clone_is_never_fetched_from(
    cli, repository: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A clone without blobs (actions/checkout's `filter: blob:none`) would fetch the revision's
    # files from its remote when git reads them (their sizes too): gpustack says they are
    # missing instead.
    git(repository, "config", "uploadpack.allowFilter", "true")
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", "--filter=blob:none", f"file://{repository}", str(clone))
    config = repository / "clusters" / "a.yaml"
    config.write_text(config.read_text() + "# changed\n")
    git(repository, "commit", "-qam", "changed")
    git(clone, "fetch", "-q", "--filter=blob:none", "origin")
    changed = git(clone, "rev-parse", "origin/main:clusters/a.yaml")
    monkeypatch.chdir(clone)
    result = cli("diff", "--git-ref", "origin/main", "clusters")
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith(
        "error: origin/main:clusters: is not in this clone: origin/main records it, and "
        "its content was never fetched (a partial or shallow clone); gpustack never fetches"
    ), result.stderr
    missing = subprocess.run(
        ["git", "cat-file", "-e", changed],
        cwd=clone,
        env={"GIT_NO_LAZY_FETCH": "1", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        check=False,
    )
    assert missing.returncode != 0  # still not fetched


def test_filters_textconv_drivers_and_fsmonitor_never_run(
    cli, repository: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A `.gitattributes` a pull request commits names drivers; were a checkout's config to
    # define them, git would run them for `git show --textconv` or a checkout, never for
    # `git cat-file blob` or `--batch`, which is all gpustack runs; nor the fsmonitor hook, which
    # git runs when it reads the index.
    marker = tmp_path / "ran"
    (repository / ".gitattributes").write_text("*.yaml filter=x diff=x\n")
    git(repository, "add", "-A")
    git(repository, "commit", "-qm", "attributes")
    for setting in ("filter.x.smudge", "filter.x.clean", "diff.x.textconv", "core.fsmonitor"):
        git(repository, "config", setting, f"sh -c 'touch {marker}; cat'")
    monkeypatch.chdir(repository)
    result = cli("diff", "--git-ref", "HEAD", "clusters")
    assert result.stdout == "no differences in 1 cluster(s)\n", result.output
    assert not marker.exists()
