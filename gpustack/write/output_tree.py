"""The output folder as Argo CD and Flux read it: the folders a render writes there, the
folders of gpustack's it holds that no cluster writes any more, and GitOps paths that miss it.

    output_folders(renderings, out, fleet_folder) -> each folder a render writes under `out` with
                       its files: `<name>/` per cluster, `_gitops/` with the fleet's ApplicationSet
    strays(renderings, out, known) -> folders of gpustack's output under `out` that no cluster
                       writes (a renamed or removed cluster), which render and check name
    stray_message(folder, configs, deployed) -> what render and check say about one
    misplaced(renderings, out) -> a warning per GitOps path template that does not point at the
                       folder a render writes (overlays: unless at an overlay of it)
"""

from __future__ import annotations

import os
import posixpath
import shlex
from collections.abc import Collection, Sequence
from pathlib import Path

from gpustack.build import pipeline as render
from gpustack.build.applicationset import for_fleet
from gpustack.build.decorate import stage
from gpustack.build.pipeline import Rendering
from gpustack.errors import UserError, display_path
from gpustack.layout import APPLICATION_SET_DIR, KUSTOMIZATION, is_ours
from gpustack.read.bounded import decode, read_bounded
from gpustack.read.yamlio import load_text


def output_folders(
    renderings: Sequence[Rendering], out: Path, fleet_folder: bool = True
) -> list[tuple[Path, dict[str, bytes]]]:
    """Each folder a render writes under `out` with its files: `<name>/` per cluster, and
    `_gitops/` with the fleet's ApplicationSet. When a fleet folder is rendered and its clusters
    no longer ask for one, `_gitops/` is empty (so a render prunes, and check reports, an
    ApplicationSet left from before); a render of single configs leaves it alone."""
    folders = [(out / r.name, render.files(r)) for r in renderings]
    application = for_fleet(renderings)
    fleet = render.application_set_files(application) if application is not None else {}
    if application is not None or fleet_folder:
        folders.append((out / APPLICATION_SET_DIR, fleet))
    return folders


def strays(renderings: Sequence[Rendering], out: Path, known: Collection[str] = ()) -> list[Path]:
    """Folders directly under `out` holding gpustack's output (a kustomization.yaml with its
    marker) that no cluster of `renderings` writes: a cluster renamed or removed from the fleet.
    A render never removes them (another fleet folder may render into `out` too); render and
    check name them. Hidden folders (a render's staging leftovers) and `_gitops/` are not, nor
    are the folders of the `known` names (clusters not rendered here)."""
    names = {rendering.name for rendering in renderings} | {APPLICATION_SET_DIR, *known}
    try:
        children = sorted(os.scandir(out), key=lambda entry: entry.name)
    except OSError:
        return []
    return [
        out / entry.name
        for entry in children
        if entry.name not in names
        and not entry.name.startswith(".")
        and entry.is_dir(follow_symlinks=False)
        and is_ours(out / entry.name / KUSTOMIZATION)
    ]


def stray_message(folder: Path, configs: Sequence[Path], deployed: bool) -> str:
    """What render and check say about a stray folder (strays); `deployed`: the fleet's
    ApplicationSet makes an Application of every folder in the output folder."""
    given = " ".join(str(path) for path in configs)
    out = display_path(folder.parent)
    how = (
        f"the ApplicationSet in {out}/{APPLICATION_SET_DIR} deploys every folder in {out}"
        if deployed
        else "its Application keeps deploying it while it is committed"
    )
    return (
        f"{display_path(folder)}: gpustack's output for a cluster that no config in {given} "
        f"renders (renamed or removed?); {how}. If the cluster is gone, run "
        f"`rm -r {shlex.quote(str(folder))}` and commit; if another fleet folder renders into "
        f"{out}, render and check both in one command"
    )


def misplaced(renderings: Sequence[Rendering], out: Path) -> list[str]:
    """A warning for each GitOps path template (Rendering.gitops_path) that does not point at
    the folder this render writes under `out`, both taken in the repository: from its top (the
    nearest folder above `out` holding `.git`), or from the working folder outside one. Nothing
    when `out` lies outside that folder (where the repository reads it cannot be told), nor
    for a path to a kustomize overlay of the rendered folder (see overlays)."""
    wanted = [(r, r.gitops_path) for r in renderings if r.gitops_path is not None]
    if not wanted:
        return []
    folder = Path(os.path.abspath(out))
    top = next((p for p in (folder, *folder.parents) if (p / ".git").exists()), Path.cwd())
    try:
        relative = folder.relative_to(top).as_posix()
    except ValueError:
        return []
    found: dict[tuple[str, str], tuple[str, str, str]] = {}
    for rendering, (setting, template) in wanted:
        name = rendering.name
        points = posixpath.normpath(template.replace("{name}", name))
        writes = posixpath.normpath(posixpath.join(relative, name))
        # Flux's Kustomizations read one folder per stage: an overlay has one per stage too.
        folders = sorted({stage(obj) for obj in rendering.objects}) if rendering.staged else [""]
        if points != writes and not all(
            overlays(top / points / folder, top / writes / folder) for folder in folders
        ):
            found.setdefault((setting, template), (name, points, writes))
    messages = []
    for (setting, template), (name, points, writes) in found.items():
        suggested = posixpath.join(relative, "{name}") if relative != "." else "{name}"
        if template.startswith("./"):
            suggested = f"./{suggested}"
        reader = "Argo CD" if setting.startswith("gitops.argocd") else "Flux"
        where = "the repository's top" if (top / ".git").exists() else "the working folder"
        messages.append(
            f"{setting} is {template}, so {reader} reads {points} for cluster {name}, "
            f"but this render writes {writes} (from {where}, {top}): set "
            f"{setting} to {suggested}, or render into the folder it names"
        )
    return messages


# kustomize's names for a kustomization file (kustomize api/konfig/general.go).
KUSTOMIZATION_FILES = ("kustomization.yaml", "kustomization.yml", "Kustomization")
_OVERLAY_DEPTH = 4


def overlays(folder: Path, rendered: Path, depth: int = 0) -> bool:
    """Whether the kustomization in `folder` builds on `rendered` (names it, or a folder that
    does, in its `resources`): an overlay of the rendered folder, which Argo CD or Flux may read
    in its place."""
    if depth > _OVERLAY_DEPTH:
        return False
    for name in KUSTOMIZATION_FILES:
        try:
            document = load_text(decode(read_bounded(folder / name, 1024 * 1024), name), name)
        except UserError:
            continue
        data = document.data
        resources = data.get("resources") if isinstance(data, dict) else None
        for entry in resources if isinstance(resources, list) else []:
            if not isinstance(entry, str) or "://" in entry:
                continue
            target = Path(os.path.normpath(folder / entry))
            if target == Path(os.path.normpath(rendered)) or (
                target.is_dir() and overlays(target, rendered, depth + 1)
            ):
                return True
        return False
    return False
