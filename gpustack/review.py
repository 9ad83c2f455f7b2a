"""Reviewing a change to a fleet: what a render would change in committed output, or what a
change to the configs (since a git revision) does to every cluster.

    snapshot(rendering) -> a cluster's objects and its other files, split as committed.read does
    rendered(renderings) -> every cluster's snapshot, and the fleet's `_gitops/` when it has one
    committed_output(names, out) -> the snapshots `render -o out` left on disk for those clusters
    compare(old, new, old_label, new_label) -> one Diff per cluster, in name order
    tree_at(ref, into) -> the repository's files at a git revision, extracted offline

Objects are compared as objects, everything else (each kustomization.yaml, node/) as text, so a
cluster reads the same whether it was rendered a moment ago or read back from disk.
"""

from __future__ import annotations

import io
import subprocess
import tarfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from gpustack import committed, render
from gpustack.diff import Diff, diff_files, diff_objects
from gpustack.errors import UserError
from gpustack.gitops import FLEET_DIR
from gpustack.render import Rendering

Snapshot = tuple[list[dict[str, Any]], dict[str, bytes]]


def snapshot(rendering: Rendering) -> Snapshot:
    """The cluster's objects (its own and its GitOps objects) and its other files (every
    kustomization.yaml, node/) as bytes: the same split `committed.read` makes of a folder."""
    objects = [*rendering.objects, *rendering.gitops_objects]
    files = {
        path: content
        for path, content in render.files(rendering).items()
        if path.rpartition("/")[2] == render.KUSTOMIZATION or path.startswith(f"{render.NODE_DIR}/")
    }
    return objects, files


def rendered(renderings: Sequence[Rendering]) -> dict[str, Snapshot]:
    """Each cluster's snapshot by name, plus `_gitops` with the fleet's ApplicationSet."""
    from gpustack.fleet import application_set

    result = {rendering.name: snapshot(rendering) for rendering in renderings}
    fleet_object = application_set(renderings)
    if fleet_object is not None:
        files = render.fleet_files(fleet_object)
        result[FLEET_DIR] = ([fleet_object], {render.KUSTOMIZATION: files[render.KUSTOMIZATION]})
    return result


def committed_output(names: Sequence[str], out: Path) -> dict[str, Snapshot]:
    """What `out/<name>/` holds for each cluster (nothing when the folder is missing), and
    `out/_gitops/` when there is one."""
    result = {}
    for name in [*names, FLEET_DIR]:
        if name == FLEET_DIR and not (out / FLEET_DIR).is_dir():
            continue
        found = committed.read(out / name)
        result[name] = (found.objects, found.files)
    return result


def compare(
    old: dict[str, Snapshot],
    new: dict[str, Snapshot],
    old_label: Callable[[str], str],
    new_label: Callable[[str], str],
) -> list[tuple[str, Diff]]:
    """One Diff per cluster found on either side (a cluster on one side only is all added or all
    removed), clusters by name and the fleet's `_gitops` last."""
    empty: Snapshot = ([], {})
    names = sorted(old.keys() | new.keys(), key=lambda name: (name == FLEET_DIR, name))
    result = []
    for name in names:
        (old_objects, old_files), (new_objects, new_files) = (
            old.get(name, empty),
            new.get(name, empty),
        )
        before, after = old_label(name), new_label(name)
        result.append(
            (
                name,
                diff_objects(old_objects, new_objects, before, after)
                + diff_files(old_files, new_files, before, after),
            )
        )
    return result


# --- git ----------------------------------------------------------------------------------------


def _git(*arguments: str, cwd: Path) -> subprocess.CompletedProcess[bytes]:
    try:
        return subprocess.run(["git", *arguments], cwd=cwd, capture_output=True, check=False)
    except FileNotFoundError:
        raise UserError("--git-ref needs git, which is not installed") from None


def repository_top(folder: Path) -> Path:
    """The work tree of the git repository holding `folder`."""
    found = _git("rev-parse", "--show-toplevel", cwd=folder)
    if found.returncode != 0:
        raise UserError(
            "--git-ref works inside a git repository, and this folder is not in one",
            hint="run it from your GitOps repository's checkout",
        )
    return Path(found.stdout.decode().strip())


def tree_at(ref: str, top: Path, into: Path) -> None:
    """Extract the repository's files at revision `ref` into `into` (`git archive`, offline):
    configs, the bases they extend, PEM files and user profiles as they were then."""
    if ref.startswith("-"):
        raise UserError(f"--git-ref {ref!r} is not a revision")
    commit = _git("rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}", cwd=top)
    if commit.returncode != 0:
        raise UserError(
            f"--git-ref {ref!r} is not a commit of this repository",
            hint="give a branch, tag or commit, e.g. origin/main or HEAD~1",
        )
    archive = _git("archive", "--format=tar", commit.stdout.decode().strip(), cwd=top)
    if archive.returncode != 0:
        message = archive.stderr.decode(errors="replace").strip()
        raise UserError(f"git archive {ref} failed: {message}")
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(into, filter="data")


def at_revision(path: Path, top: Path, tree: Path) -> Path:
    """Where `path` (of the working tree) lies in the extracted `tree`."""
    try:
        relative = path.resolve().relative_to(top.resolve())
    except ValueError:
        raise UserError(
            f"{path} is outside the git repository {top}",
            hint="--git-ref compares files of the repository",
        ) from None
    return tree / relative
