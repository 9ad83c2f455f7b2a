"""Reading a rendered folder back from disk (`out/<name>/`), to compare it with a fresh render.

It reads the layout `gpustack render` writes: the cluster folder, Flux's layer folders and
`gitops/` (and a fleet's `_gitops/` when given that folder). The objects are those of the YAML
files a `kustomization.yaml` there lists plus any other `*.yaml` that gpustack wrote (its marker
on the first line); every `kustomization.yaml` and gpustack's files under `node/` come back as
bytes, keyed by their path in the folder. A user's own unlisted files are left out.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpustack.decorate import identity
from gpustack.diff import subject
from gpustack.errors import UserError, display_path
from gpustack.output import is_ours
from gpustack.render import KUSTOMIZATION, NODE_DIR
from gpustack.yamlio import load_all_text, load_file, read_text


@dataclass
class Committed:
    """What a folder holds: objects, and the other files keyed by path relative to the folder."""

    objects: list[dict[str, Any]] = field(default_factory=list)
    files: dict[str, bytes] = field(default_factory=dict)


def read(folder: Path) -> Committed:
    """The rendered output in `folder`; an empty Committed when the folder does not exist."""
    committed = Committed()
    if not folder.is_dir():
        return committed
    folders = _object_folders(folder)
    listed = [path for each in folders for path in _listed(each, folder, committed)]
    ours = [path for each in folders for path in sorted(each.glob("*.yaml"))
            if path.name != KUSTOMIZATION and path.is_file() and is_ours(path)]
    seen: dict[tuple[str, str, str, str], str] = {}
    for path in sorted({each.resolve(): each for each in [*listed, *ours]}.values()):
        shown = display_path(path)
        for document in load_all_text(read_text(path), shown):
            if document.data is None:
                continue
            obj = document.data
            if not isinstance(obj, dict) or not obj.get("kind") or not isinstance(
                obj.get("metadata"), dict
            ) or not obj["metadata"].get("name"):
                raise UserError(
                    "expected a Kubernetes object with kind and metadata.name",
                    document.source.nearest(()),
                )
            key = identity(obj)
            if key in seen:
                raise UserError(
                    f"{subject(key)} is also defined in {seen[key]}", document.source.nearest(())
                )
            seen[key] = shown
            committed.objects.append(obj)
    node = folder / NODE_DIR
    for path in sorted(node.rglob("*")) if node.is_dir() else []:
        if path.is_file() and not path.is_symlink() and is_ours(path):
            committed.files[path.relative_to(folder).as_posix()] = path.read_bytes()
    return committed


def _object_folders(folder: Path) -> list[Path]:
    """`folder` and the sub-folders render writes objects to (Flux layers, `gitops/`): every
    sub-folder but `node/` and hidden ones (a render's staging folder)."""
    found = [folder]
    for path in sorted(folder.rglob("*")):
        relative = path.relative_to(folder).parts
        if path.is_dir() and not path.is_symlink() and relative[0] != NODE_DIR and not any(
            part.startswith(".") for part in relative
        ):
            found.append(path)
    return found


def _listed(folder: Path, root_folder: Path, committed: Committed) -> list[Path]:
    """The files inside `root_folder` that `folder/kustomization.yaml` lists (its bytes go into
    `committed.files`)."""
    path = folder / KUSTOMIZATION
    # Below the cluster folder, only gpustack's own kustomizations (a user's folder is theirs).
    if not path.is_file() or (folder != root_folder and not is_ours(path)):
        return []
    committed.files[path.relative_to(root_folder).as_posix()] = path.read_bytes()
    document = load_file(path)
    resources = document.data.get("resources", []) if isinstance(document.data, dict) else []
    if not isinstance(resources, list):
        raise UserError(
            "must be a list of files", document.source.nearest(("resources",)), "resources"
        )
    root = root_folder.resolve()
    listed = []
    for index, entry in enumerate(resources):
        if not isinstance(entry, str):
            raise UserError(
                "must be a file name",
                document.source.nearest(("resources", index)),
                f"resources[{index}]",
            )
        candidate = (folder / entry).resolve()
        # Remote bases and folders outside are kustomize's business, not gpustack output.
        if root in candidate.parents and candidate.is_file():
            listed.append(candidate)
    return listed
