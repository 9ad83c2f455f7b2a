"""Writing a rendered folder: atomically per file, inside the folder, pruning only our own files.

A file is gpustack's when its first line carries the generated-by marker; a user's own files in
the folder are never overwritten or removed.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from gpustack import decorate
from gpustack.errors import Location, UserError, display_path

MARKER = decorate.MARKER.encode()


def is_ours(path: Path) -> bool:
    try:
        with path.open("rb") as handle:
            return MARKER in handle.readline(512)
    except OSError:
        return False


def plan(
    target: Path, files: dict[str, bytes], force: bool = False
) -> tuple[dict[str, bytes], list[Path]]:
    """What writing `files` into `target` would change: files to write and stale files to delete.

    Raises UserError, before anything is written, when a path would leave `target` or would
    overwrite a file gpustack did not write (unless `force`: a generated file whose marker line
    was lost is then overwritten; nothing unmarked is ever removed).
    """
    root = target.resolve()
    changed: dict[str, bytes] = {}
    for relative, content in files.items():
        destination = (target / relative).resolve()
        if relative.startswith(("/", "\\")) or ".." in Path(relative).parts or not (
            destination == root or root in destination.parents
        ):
            raise UserError(f"refusing to write {relative!r} outside {display_path(target)}")
        path = target / relative
        if path.exists() or path.is_symlink():
            if path.is_symlink() or not path.is_file():
                raise UserError(
                    "is not a regular file; gpustack will not replace it",
                    Location(display_path(path)),
                )
            if not is_ours(path) and not force:
                raise UserError(
                    "exists and was not written by gpustack (no marker on its first line); move "
                    "it away, render elsewhere, or pass --force to overwrite it",
                    Location(display_path(path)),
                )
            if path.read_bytes() == content:
                continue
        changed[relative] = content
    stale = []
    if target.is_dir():
        wanted = {(target / relative) for relative in files}
        for path in sorted(target.rglob("*")):
            if path.is_file() and not path.is_symlink() and path not in wanted and is_ours(path):
                stale.append(path)
    return changed, stale


def write_tree(target: Path, files: dict[str, bytes], force: bool = False) -> tuple[int, int]:
    """Make `target` hold `files`; returns (files written, stale files removed)."""
    changed, stale = plan(target, files, force)
    if not changed and not stale:
        return 0, 0
    target.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".gpustack-", dir=target))
    try:
        # Stage every file first: a failure here leaves the old output untouched.
        for relative, content in changed.items():
            staged = staging / relative
            staged.parent.mkdir(parents=True, exist_ok=True)
            staged.write_bytes(content)
        for relative in changed:
            destination = target / relative
            destination.parent.mkdir(parents=True, exist_ok=True)
            os.replace(staging / relative, destination)
        for path in stale:
            path.unlink()
            parent = path.parent
            while parent != target and parent.is_dir() and not any(parent.iterdir()):
                parent.rmdir()
                parent = parent.parent
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return len(changed), len(stale)
