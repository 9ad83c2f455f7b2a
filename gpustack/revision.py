"""A git revision's files, for `diff --git-ref`: the repository as that revision has it, each
file brought onto the disk as gpustack reads it (`git cat-file`, offline, bounded).

    repository_top(folder) -> the work tree of the git repository holding `folder`
    tree_at(ref, top, into, folders, outside) -> a context in which `into` stands for the
        repository at revision `ref`
    at_revision(path, top, tree) -> where a path of the working tree lies in that tree
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path

from gpustack import errors, profiles, reading
from gpustack.errors import Location, UserError, display_path


def _git(
    *arguments: str, cwd: Path, input: bytes | None = None
) -> subprocess.CompletedProcess[bytes]:
    try:
        return subprocess.run(
            ["git", *arguments], cwd=cwd, capture_output=True, check=False, input=input
        )
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


# Symbolic links followed inside the repository at a revision, at most, for one path.
_MAX_LINKS = 16
_MAX_LINK_TARGET = 4096  # PATH_MAX: a longer link target is no path
_SYMLINK, _GITLINK = "120000", "160000"
_MAX_SUBMODULES = 16  # submodules inside submodules, at most


@contextmanager
def tree_at(
    ref: str, top: Path, into: Path, folders: Sequence[Path] = (), outside: Sequence[Path] = ()
) -> Iterator[None]:
    """While in this context, `into` stands for the repository at revision `ref`: the YAML files
    below `folders` (the fleet folders and the profiles folder the command names) are there, and
    any other file of the revision is brought there, as the revision has it, when gpustack reads
    it (`git cat-file`, offline, bounded: nothing else of the tree is read). A symbolic link is
    followed only inside the repository; a path outside the repository is refused, except in
    gpustack's own data and the folders `outside` names (a --profiles-dir elsewhere: the same
    for both sides)."""
    if ref.startswith("-"):
        raise UserError(f"--git-ref {ref!r} is not a revision")
    commit = _git("rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}", cwd=top)
    if commit.returncode != 0:
        raise UserError(
            f"--git-ref {ref!r} is not a commit of this repository",
            hint="give a branch, tag or commit, e.g. origin/main or HEAD~1",
        )
    revision = _Revision(ref, commit.stdout.decode().strip(), top, Path(os.path.abspath(into)))
    for folder in folders:
        revision.bring_folder(at_revision(folder, top, Path("")).as_posix())
    allowed = [os.path.abspath(profiles.data_dir(name)) for name in ("profiles", "examples")]
    allowed += [os.path.abspath(folder) for folder in outside]

    def guard(path: str) -> None:
        if path == str(revision.into) or path.startswith(f"{revision.into}/"):
            revision.bring(Path(path).relative_to(revision.into).as_posix())
        elif not any(path.startswith(f"{folder}/") for folder in allowed):
            raise UserError(
                f"is outside the git repository: --git-ref reads only the repository's files as "
                f"{ref} has them",
                Location(display_path(path)),
                hint="keep bases, PEM and MIG files in the repository",
            )

    previous, reading.revision_guard = reading.revision_guard, guard
    errors.shown_as.append((str(revision.into), ref))
    # The tree holds no `.git`: it is the repository's top for the paths its configs name.
    reading.revision_tops.append(os.path.realpath(revision.into))
    try:
        yield
    finally:
        reading.revision_guard = previous
        errors.shown_as.remove((str(revision.into), ref))
        reading.revision_tops.remove(os.path.realpath(revision.into))


class _Revision:
    """The files of one commit, brought into a folder as they are asked for."""

    def __init__(self, ref: str, commit: str, top: Path, into: Path) -> None:
        self.ref, self.commit, self.top, self.into = ref, commit, top, into
        self.done: set[str] = set()

    def _entry(self, repository: Path, commit: str, path: str) -> tuple[str, str, int] | None:
        """(mode, object, size) of `path` at `commit`, or None when the tree has no such entry."""
        listed = _git("ls-tree", "-z", "-l", "--full-tree", commit, "--", path, cwd=repository)
        for record in listed.stdout.split(b"\0"):
            meta, _, name = record.partition(b"\t")
            if name.decode(errors="replace") == path:
                mode, _kind, obj, size = meta.decode().split()
                return mode, obj, int(size) if size.isdigit() else 0
        return None

    def _blob(self, repository: Path, obj: str, limit: int) -> bytes:
        shown = _git("cat-file", "blob", obj, cwd=repository)
        return shown.stdout[: limit + 1]

    def _find(self, path: str) -> tuple[Path, str, int] | None:
        """Where the regular file `path` of the revision is: (repository, object, size), following
        links inside the repository and into checked-out submodules; None when there is none."""
        repository, commit, prefix = self.top, self.commit, ""
        direct = self._entry(repository, commit, path)
        if direct is not None and direct[0] in ("100644", "100755"):
            return repository, direct[1], direct[2]  # the usual case: one look-up
        parts = [part for part in path.split("/") if part not in ("", ".")]
        links = 0
        index = 0
        while index < len(parts):
            current = "/".join(parts[: index + 1])
            entry = self._entry(repository, commit, current[len(prefix) :].lstrip("/"))
            if entry is None:
                return None
            mode, obj, size = entry
            if mode == _SYMLINK:
                links += 1
                if size > _MAX_LINK_TARGET:
                    raise UserError(
                        "is not a symbolic link git makes", Location(f"{self.ref}:{path}")
                    )
                target = self._blob(repository, obj, _MAX_LINK_TARGET).decode(errors="replace")
                joined = os.path.normpath(os.path.join(os.path.dirname(current), target))
                if target.startswith("/") or joined == ".." or joined.startswith("../"):
                    raise UserError(
                        "is a symbolic link pointing outside the repository; gpustack does not "
                        "follow it",
                        Location(f"{self.ref}:{path}"),
                        hint="--git-ref reads only the repository's own files",
                    )
                if links > _MAX_LINKS:
                    raise UserError("too many symbolic links", Location(f"{self.ref}:{path}"))
                parts = [p for p in joined.split("/") if p not in ("", ".")] + parts[index + 1 :]
                repository, commit, prefix, index = self.top, self.commit, "", 0
                continue
            if mode == _GITLINK:
                checkout = self._submodule(current, obj)
                if checkout is None:
                    return None  # a submodule not checked out: nothing to read, as in the tree
                repository, commit, prefix = checkout, obj, current
                index += 1
                continue
            if index == len(parts) - 1:
                return (repository, obj, size) if mode in ("100644", "100755") else None
            index += 1
        return None

    def _submodule(self, path: str, commit: str) -> Path | None:
        """The checkout of the submodule at `path`, which must hold the `commit` the revision
        records for it: a submodule is read at that commit, from its own checkout inside the
        repository, or refused (never read at another commit, which would show an unchanged
        fleet as changed). None for a submodule not checked out at all: the working tree has
        none of its files either, so the revision is read without them too."""
        where = Location(f"{self.ref}:{path}")
        checkout = self.top / path
        top = os.path.realpath(self.top)
        real = os.path.realpath(checkout)
        if os.path.islink(checkout) or not real.startswith(f"{top}/"):
            raise UserError(
                "is a git submodule whose checkout is not a folder of the repository; gpustack "
                "does not read it",
                where,
                hint="--git-ref reads only the repository's own files",
            )
        if not os.path.lexists(checkout / ".git"):
            return None
        known = _git("cat-file", "-e", f"{commit}^{{commit}}", cwd=checkout).returncode == 0
        if not known:
            raise UserError(
                f"is a git submodule whose checkout does not hold the commit {self.ref} records "
                f"for it ({commit[:12]}): --git-ref reads a submodule at that commit, from its "
                "checkout",
                where,
                hint="check the submodules out first: git submodule update --init --recursive",
            )
        return checkout

    def _located(self, folder: str) -> tuple[Path, str, str] | None:
        """(repository, commit, path in that repository's tree) of the revision's `folder`,
        through the submodules on its way; None inside a submodule not checked out."""
        repository, commit, prefix = self.top, self.commit, ""
        parts = [part for part in folder.split("/") if part not in ("", ".")]
        for index in range(len(parts)):
            current = "/".join(parts[: index + 1])
            entry = self._entry(repository, commit, current[len(prefix) :].lstrip("/"))
            if entry is None or entry[0] != _GITLINK:
                continue
            checkout = self._submodule(current, entry[1])
            if checkout is None:
                return None
            repository, commit, prefix = checkout, entry[1], current
        return repository, commit, folder[len(prefix) :].strip("/")

    def bring(self, path: str) -> None:
        """Write the revision's file `path` under `into`, once; nothing when it has none."""
        if path in self.done or path in ("", "."):
            return
        self.done.add(path)
        found = self._find(path)
        if found is None:
            return
        repository, obj, size = found
        destination = self.into / path
        if os.path.lexists(destination):
            return
        content = (
            self._blob(repository, obj, reading.MAX_FILE_BYTES)
            if size <= reading.MAX_FILE_BYTES
            else b""
        )
        destination.parent.mkdir(parents=True, exist_ok=True)
        if size > reading.MAX_FILE_BYTES:
            # As large as the revision has it without reading it: the reader refuses it by size.
            with open(destination, "wb") as file:
                file.truncate(size)
            return
        destination.write_bytes(content)

    def bring_folder(self, folder: str, depth: int = 0) -> None:
        """Every YAML file below `folder` at the revision (a fleet folder is listed by name),
        those of the submodules in it or on its way included, each at the commit the revision
        records for it."""
        if depth > _MAX_SUBMODULES:
            raise UserError(
                f"submodules nest more than {_MAX_SUBMODULES} deep",
                Location(f"{self.ref}:{folder}"),
            )
        located = self._located(folder.strip("/"))
        if located is None:
            return
        repository, commit, inner = located
        prefix = folder.strip("/")[: len(folder.strip("/")) - len(inner)].strip("/")
        spec = [] if inner in ("", ".") else ["--", f"{inner}/"]
        listed = _git("ls-tree", "-r", "-z", "-l", "--full-tree", commit, *spec, cwd=repository)
        regular: dict[str, str] = {}
        for record in listed.stdout.split(b"\0"):
            meta, _, raw_name = record.partition(b"\t")
            if not meta:
                continue
            name = "/".join(filter(None, [prefix, raw_name.decode(errors="replace")]))
            if meta.split()[0] == _GITLINK.encode():
                self.bring_folder(name, depth + 1)
                continue
            if not name.endswith((".yaml", ".yml")) or name in self.done:
                continue
            mode, _kind, obj, listed_size = meta.decode().split()
            small = listed_size.isdigit() and int(listed_size) <= reading.MAX_FILE_BYTES
            if mode in ("100644", "100755") and small:
                regular[name] = obj
                continue
            # A link, a submodule or a file too large: one at a time. A link out of the repository
            # is left out, as the working tree's discovery leaves out what is not a config.
            with suppress(UserError):
                self.bring(name)
        # The folder's YAML files in one `git cat-file --batch`, each at most the reader's limit.
        batch = _git(
            "cat-file",
            "--batch",
            cwd=repository,
            input="".join(f"{obj}\n" for obj in regular.values()).encode(),
        )
        data, position = batch.stdout, 0
        for name, obj in regular.items():
            header_end = data.index(b"\n", position)
            header = data[position:header_end].split()
            length = int(header[2]) if len(header) == 3 and header[0].decode() == obj else -1
            if length < 0:
                break
            content = data[header_end + 1 : header_end + 1 + length]
            position = header_end + 1 + length + 1
            self.done.add(name)
            destination = self.into / name
            destination.parent.mkdir(parents=True, exist_ok=True)
            destination.write_bytes(content)


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
