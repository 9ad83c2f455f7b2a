"""Reading a rendered folder back from disk (`out/<name>/`), to compare it with a fresh render.

It reads the layout `gpustack render` writes: the cluster folder, Flux's stage folders and
`gitops/` (and a fleet's `_gitops/` when given that folder). The objects are those of the YAML
files a `kustomization.yaml` there lists plus any other `*.yaml` that gpustack wrote (its name and
header line); every `kustomization.yaml` and gpustack's files under `node/` come back as bytes,
keyed by their path in the folder. A user's own files and folders are not gpustack's output and
are left out.

Committed output may come from anyone who can open a pull request, so nothing here follows a
symbolic link (one could point at /proc/self/environ or a CI secret): a link where gpustack reads
is an error, and every read is bounded (gpustack.read.bounded).
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpustack.errors import Location, UserError, display_path
from gpustack.layout import KUSTOMIZATION, NODE_DIR, SUBFOLDERS, is_ours, owned_name
from gpustack.objects import Identity, identity, qualified
from gpustack.read.bounded import decode, read_bounded
from gpustack.read.yamlio import load_all_text, load_text
from gpustack.write.folders import entries

# A rendered file is at most a few hundred kilobytes (the largest are CRDs).
MAX_COMMITTED_BYTES = 16 * 1024 * 1024


def refuse_link(path: Path) -> None:
    """A rendered folder that is a symbolic link is an error: gpustack writes none. So is a link
    on its way down from the repository's top (the working folder's, outside a repository): a
    pull request that commits `out -> /home/ci` would otherwise have `check` read, and print,
    the files of that folder which bear the names of gpustack's output. Above the repository,
    a link is the machine's own (`/tmp -> /private/tmp`)."""
    absolute = Path(os.path.abspath(path))
    working = os.path.abspath(os.getcwd())
    on_the_way = [absolute]
    for parent in absolute.parents:
        if os.path.lexists(parent / ".git") or str(parent) == working:
            break
        on_the_way.append(parent)
    else:
        on_the_way = [absolute]  # in no repository, outside the working folder: the user's own
    for each in reversed(on_the_way):
        if each.is_symlink():
            raise UserError(
                "is a symbolic link; gpustack writes none and does not follow links in its output",
                Location(display_path(each)),
                hint="give the output folder itself, inside the repository",
            )


def read_file(folder: Path, relative: str) -> bytes | None:
    """The bytes of `folder/relative`, or None when it does not exist; a symbolic link on the
    way (below `folder`) or anything but a regular file is a UserError."""
    path = folder
    for part in relative.split("/"):
        path = path / part
        try:
            status = path.lstat()
        except FileNotFoundError:
            return None
        except NotADirectoryError:
            return None
        except OSError as error:
            raise UserError(
                f"cannot read: {error.strerror}", Location(display_path(path))
            ) from None
        if stat.S_ISLNK(status.st_mode):
            raise UserError(
                "is a symbolic link; gpustack writes none and does not follow links in its output",
                Location(display_path(path)),
                hint="replace it with the rendered file: run `gpustack render`",
            )
    return read_bounded(path, MAX_COMMITTED_BYTES, "a rendered file", follow=False)


@dataclass
class Committed:
    """What a folder holds: objects (with the file each came from) and the other files, keyed by
    path relative to the folder."""

    objects: list[dict[str, Any]] = field(default_factory=list)
    files: dict[str, bytes] = field(default_factory=dict)
    paths: dict[Identity, str] = field(default_factory=dict)


def read(folder: Path) -> Committed:
    """The rendered output in `folder`; an empty Committed when the folder does not exist."""
    committed = Committed()
    refuse_link(folder)
    if not folder.is_dir():
        return committed
    found = entries(folder)
    for relative, mode in found.items():
        if stat.S_ISLNK(mode) and (owned_name(relative) or relative in SUBFOLDERS):
            read_file(folder, relative)  # reports the link where gpustack's output belongs
    # The cluster folder and the sub-folders render writes objects to (Flux stages, gitops/).
    object_folders = [""] + [
        relative
        for relative, mode in found.items()
        if relative in SUBFOLDERS and relative != NODE_DIR and stat.S_ISDIR(mode)
    ]
    listed = [path for each in object_folders for path in _listed(folder, each, committed)]
    listed_files = set(listed)  # read whatever their header: no need to open them for it
    ours = [
        relative
        for relative, mode in found.items()
        if relative not in listed_files
        and relative.rpartition("/")[0] in object_folders
        and relative.rpartition("/")[2] != KUSTOMIZATION
        and relative.endswith(".yaml")
        and stat.S_ISREG(mode)
        and is_ours(folder / relative, relative)
    ]
    seen: dict[Identity, str] = {}
    for relative in sorted(listed_files | set(ours)):
        path = folder / relative
        shown = display_path(path)
        content = read_file(folder, relative) or b""
        for document in load_all_text(decode(content, shown), shown):
            if document.data is None:
                continue
            obj = document.data
            if (
                not isinstance(obj, dict)
                or not obj.get("kind")
                or not isinstance(obj.get("metadata"), dict)
                or not obj["metadata"].get("name")
            ):
                raise UserError(
                    "expected a Kubernetes object with kind and metadata.name",
                    document.source.nearest(()),
                )
            key = identity(obj)
            if key in seen:
                raise UserError(
                    f"{qualified(key)} is also defined in {seen[key]}", document.source.nearest(())
                )
            seen[key] = shown
            committed.objects.append(obj)
            committed.paths[key] = relative
    for relative, mode in found.items():
        if (
            relative.startswith(f"{NODE_DIR}/")
            and stat.S_ISREG(mode)
            and is_ours(folder / relative, relative)
        ):
            committed.files[relative] = read_file(folder, relative) or b""
    return committed


def _listed(folder: Path, prefix: str, committed: Committed) -> list[str]:
    """The files of `folder/prefix` that its `kustomization.yaml` lists, relative to `folder`
    (the kustomization's bytes go into `committed.files`). Below the cluster folder only
    gpustack's own kustomizations count."""
    relative = f"{prefix}/{KUSTOMIZATION}" if prefix else KUSTOMIZATION
    if prefix and not is_ours(folder / relative, relative):
        return []
    content = read_file(folder, relative)
    if content is None:
        return []
    committed.files[relative] = content
    shown = display_path(folder / relative)
    document = load_text(decode(content, shown), shown)
    resources = document.data.get("resources", []) if isinstance(document.data, dict) else []
    if not isinstance(resources, list):
        raise UserError(
            "must be a list of files", document.source.nearest(("resources",)), "resources"
        )
    listed = []
    for index, entry in enumerate(resources):
        if not isinstance(entry, str):
            raise UserError(
                "must be a file name",
                document.source.nearest(("resources", index)),
                f"resources[{index}]",
            )
        # Remote bases and folders elsewhere are kustomize's business, not gpustack output.
        if "/" in entry or entry in ("", ".", "..") or "\x00" in entry:
            continue
        path = f"{prefix}/{entry}" if prefix else entry
        status = _lstat(folder / path)
        if status is not None and (stat.S_ISREG(status) or stat.S_ISLNK(status)):
            listed.append(path)  # read_file reports a link
    return listed


def _lstat(path: Path) -> int | None:
    try:
        return path.lstat().st_mode
    except OSError:
        return None
