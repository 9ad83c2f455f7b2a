"""Comparing committed output with a rendering: what a render would change in `out/`, or what a
change to the configs (since a git revision) does to every cluster.

    check_output(renderings, findings, out) -> per output folder, the files a render would add,
        remove or change there (byte for byte) and the rendering's findings: `gpustack check`
    snapshot(rendering) -> a cluster's objects and its other files, split as committed.read does
    rendered(renderings) -> every cluster's snapshot, and the fleet's `_gitops/` when it has one
    against(folder, objects, files, label) -> what a render writing `files` would change there
    against_output(renderings, out, fleet_folder) -> the same for every folder a render writes
    compare(old, new, old_label, new_label) -> one Diff per cluster, in name order: `gpustack diff`
    between(old, new, old_label, new_label) -> the Diff of two snapshots
    tree_at(ref, top, into, folders) -> the repository's files at a git revision, read as needed

For `diff`, objects are compared as objects, everything else (each kustomization.yaml, node/) as
text, so a cluster reads the same whether it was rendered a moment ago or read back from disk.
Both compare the folders a render writes (fleet.output_folders, as `render` writes them) and read
committed output through gpustack.committed, which never follows a link.
"""

from __future__ import annotations

import difflib
import os
import stat
import subprocess
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from gpustack import committed, errors, fleet, output, profiles, reading, render
from gpustack.diff import Change, Diff, Status, diff_files, diff_objects
from gpustack.errors import Location, UserError, display_path
from gpustack.findings import Finding
from gpustack.layout import FLEET_DIR, KUSTOMIZATION, NODE_DIR, is_ours
from gpustack.objects import Identity, file_name, identity
from gpustack.render import Rendering
from gpustack.secrets import mask_text


class Snapshot(NamedTuple):
    """A cluster folder as diff compares it: its objects, its other files (every
    kustomization.yaml, node/) as bytes, and the file each object is in, relative to the folder."""

    objects: list[dict[str, Any]]
    files: dict[str, bytes]
    paths: dict[Identity, str]


# --- check: committed files against the files a render would write ------------------------------


@dataclass
class OutputCheck:
    """What `check` found in one output folder (`name` is the folder's): the files a render would
    add, remove or change, and the findings on the rendering."""

    name: str
    missing: list[str] = field(default_factory=list)
    extra: list[str] = field(default_factory=list)
    diffs: dict[str, str] = field(default_factory=dict)
    # Changed files whose first line lost gpustack's marker: only `render --force` replaces them.
    unmarked: list[str] = field(default_factory=list)
    findings: list[str] = field(default_factory=list)
    # Each finding as (the file of its object, relative to the folder; the finding): how `check`
    # groups the same finding in many clusters.
    placed: list[tuple[str, str]] = field(default_factory=list)
    errors: int = 0

    @property
    def stale(self) -> bool:
        return bool(self.missing or self.extra or self.diffs)


def check_output(
    renderings: Sequence[Rendering],
    findings: Sequence[list[Finding]],
    out: Path,
    fleet_folder: bool = True,
) -> list[OutputCheck]:
    """Each folder a render writes under `out` (fleet.output_folders) compared with what is
    there, with the findings of each rendering (`findings`, in the renderings' order) placed at
    the file of their object."""
    by_name = dict(zip((rendering.name for rendering in renderings), findings))
    objects = {rendering.name: rendering.objects for rendering in renderings}
    reports = []
    for target, files in fleet.output_folders(renderings, out, fleet_folder):
        report = compare_folder(target, files)
        _place(report, target, objects.get(target.name, []), by_name.get(target.name, []))
        reports.append(report)
    return reports


def compare_folder(target: Path, expected: dict[str, bytes]) -> OutputCheck:
    """What differs between the folder `target` and the files a render would write there."""
    report = OutputCheck(target.name)
    committed.refuse_link(target)
    for relative, content in expected.items():
        current = committed.read_file(target, relative)
        if current is None:
            report.missing.append(relative)
        elif current != content:
            path = target / relative
            report.diffs[relative] = _file_diff(
                current, content, f"{path} (committed)", f"{path} (rendered)"
            )
            if not is_ours(target / relative, relative):
                report.unmarked.append(relative)
    if target.is_dir():
        report.extra = sorted(
            relative
            for relative, mode in output.entries(target).items()
            if stat.S_ISREG(mode)
            and is_ours(target / relative, relative)
            and relative not in expected
        )
    return report


def check_json(reports: Sequence[OutputCheck], out: Path) -> dict[str, Any]:
    """`check --output json`: whether the output is current and valid, and each folder's report
    (the fleet's `_gitops/` only when it is stale)."""
    clusters = [
        {
            "name": report.name,
            "folder": str(out / report.name),
            "missing": report.missing,
            "extra": report.extra,
            "changed": list(report.diffs),
            "unmarked": report.unmarked,
            "diffs": report.diffs,
            "findings": report.findings,
        }
        for report in reports
        if report.name != FLEET_DIR or report.stale
    ]
    return {
        "current": not any(report.stale for report in reports),
        "valid": not any(report.errors for report in reports),
        "clusters": clusters,
    }


def _place(
    report: OutputCheck, target: Path, objects: list[dict[str, Any]], findings: list[Finding]
) -> None:
    files = {identity(obj): file_name(obj) for obj in objects}
    for found in findings:
        relative = files.get(found.object, "") if found.object else ""
        where = target / relative
        field_path = f" ({found.field})" if found.field else ""
        what = mask_text(f"{found.severity}: [{found.rule}] {found.message}{field_path}")
        report.findings.append(f"{mask_text(str(where))}: {what}")
        report.placed.append((relative, what))
        report.errors += found.severity == "error"


def _file_diff(current: bytes, wanted: bytes, fromfile: str, tofile: str) -> str:
    """A unified diff of a file's bytes (every line kept as written, so a line ending that alone
    differs shows), with the entitlement certificate (and any PEM) redacted on both sides. A
    file whose only difference is CRLF line endings says so (its lines would look the same)."""
    if current and wanted and current.replace(b"\r\n", b"\n") == wanted.replace(b"\r\n", b"\n"):
        return f"Line endings differ: {fromfile} has CRLF where {tofile} has LF\n"
    lines = difflib.unified_diff(
        mask_text(current.decode("utf-8", errors="replace")).splitlines(keepends=True),
        mask_text(wanted.decode("utf-8", errors="replace")).splitlines(keepends=True),
        fromfile,
        tofile,
    )
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


# --- diff: objects as objects, other files as text -----------------------------------------------


def snapshot(rendering: Rendering) -> Snapshot:
    """The cluster's objects (its own and its GitOps objects) and its other files (every
    kustomization.yaml, node/) as bytes: the same split `committed.read` makes of a folder."""
    objects = [*rendering.objects, *rendering.gitops_objects]
    return _split(objects, render.files(rendering), render.object_paths(rendering))


def _split(
    objects: list[dict[str, Any]], files: dict[str, bytes], paths: dict[Identity, str]
) -> Snapshot:
    others = {
        path: content
        for path, content in files.items()
        if path.rpartition("/")[2] == KUSTOMIZATION or path.startswith(f"{NODE_DIR}/")
    }
    return Snapshot(objects, others, paths)


def rendered(renderings: Sequence[Rendering]) -> dict[str, Snapshot]:
    """Each cluster's snapshot by name, and `_gitops` with the fleet's ApplicationSet when the
    renderings make one (the folders a render writes, fleet.output_folders)."""
    return {
        folder.name: _split(objects, files, paths)
        for folder, objects, files, paths in _output(renderings, Path(), fleet_folder=False)
    }


def against_output(
    renderings: Sequence[Rendering], out: Path, fleet_folder: bool
) -> list[tuple[str, Diff]]:
    """What a render would change under `out`, per folder it writes or prunes there (the folders
    `check` compares), clusters by name and `_gitops` last: see `against`."""
    diffs = [
        (
            folder.name,
            against(folder, _split(objects, files, paths), files, f"rendered/{folder.name}"),
        )
        for folder, objects, files, paths in _output(renderings, out, fleet_folder)
        if files or folder.is_dir()
    ]
    return sorted(diffs, key=lambda pair: (pair[0] == FLEET_DIR, pair[0]))


def against(folder: Path, new: Snapshot, files: dict[str, bytes], new_label: str) -> Diff:
    """What a render writing `files` (split as `new`) would change in `folder`: the objects and
    files that differ (between), then every other file whose bytes it would add, rewrite or
    remove (a comment, a line ending, a renamed file), as `check` finds them (compare_folder)."""
    old_label = display_path(folder)
    old = committed_snapshot(folder)
    difference = between(old, new, old_label, new_label)
    # Files an object or file change already names (an object's file by its path, or by the
    # name gpustack gives it where its path is not known), and the committed file of an object
    # whose name changed by its content hash.
    object_files = {change.file for change in difference.changes if change.identity}
    object_files |= {
        old.paths.get((*change.identity[:3], change.renamed_from), "")
        for change in difference.changes
        if change.identity and change.renamed_from
    }
    covered = {change.file for change in difference.changes if not change.identity}
    report = compare_folder(folder, files)
    changes = []
    for relative in sorted([*report.missing, *report.extra, *report.diffs]):
        name = relative.rpartition("/")[2]
        if relative in covered | object_files or (name != KUSTOMIZATION and name in object_files):
            continue
        before = committed.read_file(folder, relative) if relative not in report.missing else None
        after = files.get(relative)
        status: Status = "added" if before is None else "removed" if after is None else "changed"
        unified = _file_diff(
            before or b"",
            after or b"",
            f"{old_label}/{relative}" if before is not None else "/dev/null",
            f"{new_label}/{relative}" if after is not None else "/dev/null",
        )
        changes.append(Change(status, relative, relative, None, (), unified))
    return difference + Diff(old_label, new_label, tuple(changes))


def _output(
    renderings: Sequence[Rendering], out: Path, fleet_folder: bool
) -> list[tuple[Path, list[dict[str, Any]], dict[str, bytes], dict[Identity, str]]]:
    """fleet.output_folders, each folder with the objects its files hold and where."""
    application = fleet.application_set(renderings)
    objects = {r.name: [*r.objects, *r.gitops_objects] for r in renderings}
    objects[FLEET_DIR] = [application] if application is not None else []
    paths = {r.name: render.object_paths(r) for r in renderings}
    return [
        (folder, objects[folder.name], files, paths.get(folder.name, {}))
        for folder, files in fleet.output_folders(renderings, out, fleet_folder)
    ]


def committed_snapshot(folder: Path) -> Snapshot:
    """What `folder` holds, split as a snapshot (committed.read; empty when it does not exist)."""
    found = committed.read(folder)
    return Snapshot(found.objects, found.files, found.paths)


def between(old: Snapshot, new: Snapshot, old_label: str, new_label: str) -> Diff:
    """What differs from `old` to `new`: objects matched by identity, other files as text."""
    paths = {**old.paths, **new.paths}
    return diff_objects(old.objects, new.objects, old_label, new_label, paths) + diff_files(
        old.files, new.files, old_label, new_label
    )


def compare(
    old: dict[str, Snapshot],
    new: dict[str, Snapshot],
    old_label: Callable[[str], str],
    new_label: Callable[[str], str],
) -> list[tuple[str, Diff]]:
    """One Diff per cluster found on either side (a cluster on one side only is all added or all
    removed), clusters by name and the fleet's `_gitops` last."""
    empty = Snapshot([], {}, {})
    names = sorted(old.keys() | new.keys(), key=lambda name: (name == FLEET_DIR, name))
    return [
        (
            name,
            between(old.get(name, empty), new.get(name, empty), old_label(name), new_label(name)),
        )
        for name in names
    ]


# --- git ----------------------------------------------------------------------------------------


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
    try:
        yield
    finally:
        reading.revision_guard = previous
        errors.shown_as.remove((str(revision.into), ref))


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
                submodule = self.top / current
                known = _git("cat-file", "-e", f"{obj}^{{commit}}", cwd=submodule)
                if not (submodule / ".git").exists() or known.returncode != 0:
                    return None  # a submodule that is not checked out: nothing to read
                repository, commit, prefix = submodule, obj, current
                index += 1
                continue
            if index == len(parts) - 1:
                return (repository, obj, size) if mode in ("100644", "100755") else None
            index += 1
        return None

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

    def bring_folder(self, folder: str) -> None:
        """Every YAML file below `folder` at the revision (a fleet folder is listed by name)."""
        folder = folder.strip("/")
        spec = [] if folder in ("", ".") else ["--", f"{folder}/"]
        listed = _git("ls-tree", "-r", "-z", "-l", "--full-tree", self.commit, *spec, cwd=self.top)
        regular: dict[str, str] = {}
        for record in listed.stdout.split(b"\0"):
            meta, _, raw_name = record.partition(b"\t")
            name = raw_name.decode(errors="replace")
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
            cwd=self.top,
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
