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

from gpustack import errors
from gpustack.errors import Location, UserError, display_path
from gpustack.read import bounded
from gpustack.resolve import image_lock
from gpustack.resolve import platform_profiles as profiles

# What git reads and does for gpustack: the repository's own object store, no more. The
# variables that point git at another repository, index or object store (the list
# `git rev-parse --local-env-vars` prints, set in a hook's environment, say) are dropped, and the
# repository is named outright (GIT_DIR, GIT_WORK_TREE) instead of discovered from a folder, so a
# folder a pull request commits that looks like a bare repository (`HEAD`, `refs/`, `objects/`,
# a `config` of its own) is never taken for one. No object is fetched: a partial clone's lazy
# fetch would use the network and could wait for a password (git's `protocol.allow=never` blocks
# every transport; GIT_NO_LAZY_FETCH, git 2.44, says so outright), replacement refs do not swap
# a commit's content, and paths are literal, never pathspec magic (`:(glob)`, `:!`).
_LOCAL_ENVIRONMENT = (
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_COMMON_DIR",
    "GIT_CONFIG",
    "GIT_CONFIG_COUNT",
    "GIT_CONFIG_PARAMETERS",
    "GIT_DIR",
    "GIT_GRAFT_FILE",
    "GIT_IMPLICIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_INTERNAL_SUPER_PREFIX",
    "GIT_NAMESPACE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_PREFIX",
    "GIT_REPLACE_REF_BASE",
    "GIT_SHALLOW_FILE",
    "GIT_WORK_TREE",
)
_SETTINGS = ("protocol.allow=never", "core.fsmonitor=false", "safe.bareRepository=explicit")

# The most of a file a revision brings whole: the largest limit of what gpustack reads through
# it (a config's 1 MiB, the image lock's 8 MiB); a larger file comes as its size alone, which
# its reader refuses by size.
BROUGHT_BYTES = max(bounded.MAX_FILE_BYTES, image_lock.MAX_BYTES)


def _git(
    *arguments: str, cwd: Path, input: bytes | None = None
) -> subprocess.CompletedProcess[bytes]:
    """git `arguments` in the repository whose top (work tree) is `cwd`."""
    environment = {
        name: value for name, value in os.environ.items() if name not in _LOCAL_ENVIRONMENT
    }
    environment.update(
        GIT_DIR=str(cwd / ".git"),
        GIT_WORK_TREE=str(cwd),
        GIT_NO_LAZY_FETCH="1",
        GIT_NO_REPLACE_OBJECTS="1",
        GIT_LITERAL_PATHSPECS="1",
        GIT_TERMINAL_PROMPT="0",
        GIT_OPTIONAL_LOCKS="0",
    )
    settings = [part for setting in _SETTINGS for part in ("-c", setting)]
    try:
        return subprocess.run(
            ["git", *settings, *arguments],
            cwd=cwd,
            env=environment,
            capture_output=True,
            check=False,
            input=input,
            stdin=None if input is not None else subprocess.DEVNULL,
        )
    except FileNotFoundError:
        raise UserError("--git-ref needs git, which is not installed") from None


def repository_top(folder: Path) -> Path:
    """The work tree of the git repository holding `folder`: the nearest folder at or above it
    that holds `.git`, found on the disk, as every path a config names is confined."""
    top = bounded.repository_top(folder)
    if top is None or _git("rev-parse", "--git-dir", cwd=top).returncode != 0:
        raise UserError(
            "--git-ref works inside a git repository, and this folder is not in one",
            hint="run it from your GitOps repository's checkout",
        )
    return top


# Symbolic links followed inside the repository at a revision, at most, for one path.
_MAX_LINKS = 16
_MAX_LINK_TARGET = 4096  # PATH_MAX: a longer link target is no path
_SYMLINK, _GITLINK = "120000", "160000"
_MAX_SUBMODULES = 16  # submodules inside submodules, at most


def _check_name(ref: str, name: str) -> str:
    """`name`, a path of the revision's tree, when it is one a checkout writes; else an error.
    A tree is whatever bytes its commit holds: `git mktree` takes an entry named `..`, and
    `git ls-tree -r` then lists `clusters/../../x.yaml`, which written below the temporary tree
    would land anywhere on the machine. git refuses to check such an entry out (`..`, `.`, an
    empty name or `.git` in any case, as `git fsck` reports them: read-cache.c verify_path), so
    gpustack refuses to read a revision that has one."""
    parts = name.split("/")
    if any(part in ("", ".", "..") or part.lower().rstrip(". ") == ".git" for part in parts):
        raise UserError(
            "is a path of the revision's tree that git refuses to check out (an entry named "
            "'..', '.' or '.git'); gpustack does not read a revision that has one",
            Location(f"{ref}:{name}"),
            hint="--git-ref reads a commit a checkout could hold; `git fsck` names the entry",
        )
    return name


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

    previous, bounded.revision_guard = bounded.revision_guard, guard
    errors.shown_as.append((str(revision.into), ref))
    # The tree holds no `.git`: it is the repository's top for the paths its configs name.
    bounded.revision_tops.append(os.path.realpath(revision.into))
    try:
        yield
    finally:
        bounded.revision_guard = previous
        errors.shown_as.remove((str(revision.into), ref))
        bounded.revision_tops.remove(os.path.realpath(revision.into))


class _Revision:
    """The files of one commit, brought into a folder as they are asked for."""

    def __init__(self, ref: str, commit: str, top: Path, into: Path) -> None:
        self.ref, self.commit, self.top, self.into = ref, commit, top, into
        self.done: set[str] = set()

    def _missing(self, path: str) -> UserError:
        return UserError(
            f"is not in this clone: {self.ref} records it, and its content was never fetched "
            "(a partial or shallow clone); gpustack never fetches",
            Location(f"{self.ref}:{path}"),
            hint=f"fetch {self.ref} in full first, e.g. git fetch --unshallow --refetch origin",
        )

    def _entry(self, repository: Path, commit: str, path: str) -> tuple[str, str, int] | None:
        """(mode, object, size) of `path` at `commit`, or None when the tree has no such entry."""
        listed = _git("ls-tree", "-z", "-l", "--full-tree", commit, "--", path, cwd=repository)
        if listed.returncode != 0:
            raise self._missing(path)
        for record in listed.stdout.split(b"\0"):
            meta, _, name = record.partition(b"\t")
            if name.decode(errors="replace") == path:
                mode, _kind, obj, size = meta.decode().split()
                return mode, obj, int(size) if size.isdigit() else 0
        return None

    def _blob(self, repository: Path, obj: str, limit: int, path: str) -> bytes:
        shown = _git("cat-file", "blob", obj, cwd=repository)
        if shown.returncode != 0:
            raise self._missing(path)
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
                target = self._blob(repository, obj, _MAX_LINK_TARGET, current).decode(
                    errors="replace"
                )
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
                _check_name(self.ref, "/".join(parts))
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
        self.done.add(_check_name(self.ref, path))
        found = self._find(path)
        if found is None:
            return
        repository, obj, size = found
        destination = self.into / path
        if os.path.lexists(destination):
            return
        content = self._blob(repository, obj, BROUGHT_BYTES, path) if size <= BROUGHT_BYTES else b""
        destination.parent.mkdir(parents=True, exist_ok=True)
        if size > BROUGHT_BYTES:
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
        if listed.returncode != 0:
            raise self._missing(folder)
        regular: dict[str, str] = {}
        for record in listed.stdout.split(b"\0"):
            meta, _, raw_name = record.partition(b"\t")
            if not meta:
                continue
            name = "/".join(filter(None, [prefix, raw_name.decode(errors="replace")]))
            _check_name(self.ref, name)
            if meta.split()[0] == _GITLINK.encode():
                self.bring_folder(name, depth + 1)
                continue
            if not name.endswith((".yaml", ".yml")) or name in self.done:
                continue
            mode, _kind, obj, listed_size = meta.decode().split()
            small = listed_size.isdigit() and int(listed_size) <= bounded.MAX_FILE_BYTES
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
            header_end = data.find(b"\n", position)
            header = data[position:header_end].split() if header_end >= 0 else []
            found = len(header) == 3 and header[0].decode() == obj and header[2].isdigit()
            length = int(header[2]) if found else -1
            if length < 0:
                raise self._missing(name)
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
