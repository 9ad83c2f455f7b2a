"""Writing rendered folders: each folder is replaced as a whole, so it is always entirely old or
entirely new, even when the process is killed; a user's own files in it are kept.

How: under an exclusive lock on the output folder (fcntl.flock), every folder to change is first
checked (nothing written yet: a problem found here changes nothing), then staged as a hidden
sibling (`.<name>.gpustack-<random>`) holding the new files plus hard links to the user's own
files, then swapped with the live folder in one atomic step (Linux renameat2 RENAME_EXCHANGE;
elsewhere two renames, which the next render repairs if it was interrupted between them). Only
when every folder is staged does the first swap happen, and a failed swap swaps back those done.
The old folders, now at the staging names, are removed last; leftovers of an interrupted render
are removed (or, for a half-done two-rename swap, put back) by the next one.

Nothing is removed across a file system boundary: a mount inside a cluster's folder is refused
before anything is written, and `remove_tree`, the one way this module removes a folder, never
descends into a mount and never follows a link. A render locks its output folder exclusively and
every folder above it shared, so a render into a folder nested inside another render's output
stops instead of being swapped away. Run as root, every folder and file it creates is owned like
the folder it replaces, or like its parent when new: a user's checkout stays the user's.

A file is gpustack's when its name is one gpustack writes and its first line is exactly the
generated-file header; nothing else is overwritten or pruned.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import os
import re
import shutil
import stat
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path

from gpustack.errors import Location, UserError, display_path
from gpustack.layout import is_ours
from gpustack.read.bounded import MAX_FILE_BYTES, kind_of, read_bounded
from gpustack.redaction import carries_secret

# A staged folder (`new`), or an old one set aside by a two-rename swap (`old`, non-Linux).
_STAGING = re.compile(r"\.(?P<name>.+)\.gpustack-(?P<role>new|old)-[0-9a-f]{12}")
# renameat2(2): exchange two paths atomically; AT_FDCWD: paths relative to the working folder.
_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


@dataclass
class Plan:
    """What writing one folder does: the files to write, its user's entries to carry over."""

    target: Path
    files: dict[str, bytes]
    modes: dict[str, int] = field(default_factory=dict)
    written: int = 0
    removed: int = 0
    keep: list[str] = field(default_factory=list)  # the user's entries (relative), parents first

    @property
    def changes(self) -> bool:
        return bool(self.written or self.removed)


def plan(
    target: Path,
    files: dict[str, bytes],
    modes: dict[str, int] | None = None,
    force: bool = False,
) -> Plan:
    """Check everything writing `files` into `target` needs, before anything is written.

    Raises UserError when a path would leave `target`, when something that is not gpustack's
    stands where gpustack writes (a user's file, a file where a folder goes, a link), or when
    the folder cannot be read. With `force`, a regular file where gpustack writes one is
    overwritten even without gpustack's marker line (a generated file whose marker was lost);
    nothing unmarked is ever removed.
    """
    modes = modes or {}
    result = Plan(target, files, modes)
    shown = display_path(target)
    for relative in files:
        parts = relative.split("/")
        if relative.startswith(("/", "\\")) or any(p in ("", ".", "..") for p in parts):
            raise UserError(f"refusing to write {relative!r} outside {shown}")
    try:
        status = os.lstat(target)
    except FileNotFoundError:
        result.written = len(files)
        return result
    except OSError as error:
        raise UserError(f"cannot read the folder: {error.strerror}", Location(shown)) from None
    if not stat.S_ISDIR(status.st_mode):
        raise UserError(
            f"is {kind_of(status.st_mode)}, where gpustack writes a cluster's folder",
            Location(shown),
            hint="move it away or render into another folder with -o",
        )
    folders = {"/".join(r.split("/")[:i]) for r in files for i in range(1, r.count("/") + 1)}
    existing = entries(target)
    mounted = mounts_below(target, status.st_dev)
    if mounted:
        raise UserError(
            "is a mount point (another file system, or a bind mount) inside the output folder; "
            "gpustack replaces a cluster's folder whole and will not move or remove what is "
            "mounted there",
            Location(display_path(mounted[0])),
            hint="unmount it, or mount it outside the output folder",
        )
    for relative, mode in existing.items():
        path = target / relative
        if relative in folders:
            if not stat.S_ISDIR(mode):
                raise UserError(
                    f"is {kind_of(mode)} where gpustack writes the folder {relative}/",
                    Location(display_path(path)),
                    hint="move it away or render elsewhere",
                )
            continue
        if stat.S_ISDIR(mode):
            if relative in files:
                raise UserError(
                    "is a folder where gpustack writes a file",
                    Location(display_path(path)),
                    hint="move it away or render elsewhere",
                )
            if not any(other.startswith(f"{relative}/") for other in existing):
                result.keep.append(relative)  # an empty folder of the user's
            continue
        ours = stat.S_ISREG(mode) and is_ours(path, relative)
        if relative in files:
            if not stat.S_ISREG(mode):
                raise UserError(
                    f"is {kind_of(mode)}; gpustack will not replace it",
                    Location(display_path(path)),
                )
            if not ours and not force:
                raise UserError(
                    "exists and was not written by gpustack (no marker on its first line); move "
                    "it away, render elsewhere, or pass --force to overwrite it",
                    Location(display_path(path)),
                )
            current = read_bounded(path, max(MAX_FILE_BYTES, len(files[relative])), follow=False)
            wanted_mode = modes.get(relative)
            loose = wanted_mode is not None and stat.S_IMODE(mode) != wanted_mode & ~_umask()
            if current != files[relative] or loose:
                result.written += 1
        elif ours:
            result.removed += 1
        else:
            result.keep.append(relative)
    result.written += sum(1 for relative in files if relative not in existing)
    return result


def entries(target: Path) -> dict[str, int]:
    """Every entry below `target` (relative path -> lstat mode), links never followed."""
    entries: dict[str, int] = {}
    pending = [""]
    while pending:
        relative = pending.pop()
        folder = target / relative if relative else target
        try:
            with os.scandir(folder) as listing:
                children = sorted(listing, key=lambda entry: entry.name)
                for entry in children:
                    child = f"{relative}/{entry.name}" if relative else entry.name
                    mode = entry.stat(follow_symlinks=False).st_mode
                    entries[child] = mode
                    if stat.S_ISDIR(mode):
                        pending.append(child)
        except OSError as error:
            raise UserError(
                f"cannot read the folder: {error.strerror}", Location(display_path(folder))
            ) from None
    return dict(sorted(entries.items()))


def mounts_below(target: Path, device: int | None = None) -> list[Path]:
    """The mount points inside the folder `target` (not `target` itself): folders on another
    device, and bind mounts of the same file system as /proc/self/mountinfo lists them."""
    top = os.path.realpath(target)  # the mount table names folders by their real path
    found = {Path(point) for point in _mount_table() if point.startswith(f"{top}/")}
    if device is not None:
        pending = [top]
        while pending:
            folder = pending.pop()
            try:
                with os.scandir(folder) as listing:
                    for entry in listing:
                        if entry.is_dir(follow_symlinks=False):
                            if entry.stat(follow_symlinks=False).st_dev != device:
                                found.add(Path(entry.path))
                            else:
                                pending.append(entry.path)
            except OSError:
                continue
    return sorted(found)


def _mount_table() -> list[str]:
    """Every mount point of this process (Linux); empty where the system does not say."""
    try:
        raw = read_bounded("/proc/self/mountinfo", 16 * MAX_FILE_BYTES, "the mount table")
    except UserError:
        return []
    points = []
    for line in raw.decode("utf-8", errors="replace").splitlines():
        fields = line.split(" ")
        if len(fields) > 4:
            # Spaces, tabs, newlines and backslashes in a mount point are written as octal escapes.
            points.append(re.sub(r"\\([0-7]{3})", lambda m: chr(int(m[1], 8)), fields[4]))
    return points


def remove_tree(path: Path) -> bool:
    """Remove `path` and, when it is a folder, everything in it, without ever following a link
    or crossing into another file system (a folder on another device is left, and so are the
    folders above it). Returns whether everything was removed; errors are not raised."""
    try:
        status = os.lstat(path)
    except OSError:
        return True
    if not stat.S_ISDIR(status.st_mode):
        try:
            os.unlink(path)
        except OSError:
            return False
        return True
    mounted = set(_mount_table())
    # By its real path, as the mount table names folders (`path` itself is no link: lstat).
    return _remove_folder(os.path.realpath(path), status.st_dev, mounted)


def _remove_folder(folder: str, device: int, mounted: set[str]) -> bool:
    if folder in mounted:
        return False
    emptied = True
    try:
        with os.scandir(folder) as listing:
            children = list(listing)
    except OSError:
        return False
    for entry in children:
        try:
            status = entry.stat(follow_symlinks=False)
            if stat.S_ISDIR(status.st_mode):
                if status.st_dev != device or not _remove_folder(entry.path, device, mounted):
                    emptied = False
            else:
                os.unlink(entry.path)
        except OSError:
            emptied = False
    if emptied:
        try:
            os.rmdir(folder)
        except OSError:
            return False
    return emptied


def write_all(
    out: Path,
    folders: Sequence[tuple[Path, dict[str, bytes]]],
    modes: dict[Path, dict[str, int]] | None = None,
    force: bool = False,
    staged_one: Callable[[Path], None] = lambda target: None,
) -> list[Plan]:
    """Make each folder (a child of `out`) hold its files; returns what was done per folder.

    All or nothing for the set of folders, as far as a running process can see to it; a killed
    one leaves every folder entirely old or entirely new. `staged_one` hears of each folder
    made ready (a progress count).
    """
    modes = modes or {}
    with _locked(out):
        recover(out)
        plans = [plan(target, files, modes.get(target), force) for target, files in folders]
        staged: list[tuple[Plan, Path]] = []
        try:
            for each in plans:
                if each.changes:
                    staged.append((each, _stage(each)))
                staged_one(each.target)
        except OSError as error:
            for _, folder in staged:
                remove_tree(folder)
            raise _write_error(error) from None
        swapped: list[tuple[Path, Path, bool]] = []
        try:
            for each, folder in staged:
                existed = os.path.lexists(each.target)
                _swap(folder, each.target, existed)
                swapped.append((folder, each.target, existed))
        except OSError as error:
            for folder, target, existed in reversed(swapped):
                _swap(folder, target, existed, undo=True)
            for _, folder in staged:
                remove_tree(folder)
            raise _write_error(error) from None
        for each, folder in staged:
            remove_tree(folder)  # the old folders, now at staging names
            if not each.files and not each.keep:
                with suppress(OSError):
                    os.rmdir(each.target)  # nothing of gpustack's or the user's is left
    return plans


def write_tree(target: Path, files: dict[str, bytes]) -> tuple[int, int]:
    """Make the one folder `target` hold `files`; returns (files written, files removed)."""
    done = write_all(target.parent, [(target, files)])[0]
    return done.written, done.removed


def private_modes(files: dict[str, bytes], secret_mode: int) -> dict[str, int]:
    """The mode of each file that carries a secret: the secret's own bits, and at most 0644."""
    return {
        relative: secret_mode & 0o644
        for relative, content in files.items()
        if carries_secret(content.decode("utf-8", errors="replace"))
    }


def _write_error(error: OSError) -> UserError:
    where = Location(display_path(error.filename)) if error.filename else None
    return UserError(f"cannot write: {error.strerror}; the output was left as it was", where)


@contextmanager
def _locked(out: Path) -> Iterator[None]:
    """An exclusive lock on `out` for the whole write, and a shared one on every folder above it:
    a second render into the same folder, into one above it or into one inside it waits for
    none, it stops. (Renders into sibling folders share the locks above them and run.)"""
    shown = display_path(out)
    try:
        _make_folders(out)
        descriptor = os.open(out, os.O_RDONLY | os.O_DIRECTORY)
    except (FileExistsError, NotADirectoryError):
        raise UserError(
            "is not a folder; -o names the folder that gets one folder per cluster", Location(shown)
        ) from None
    except OSError as error:
        raise UserError(
            f"cannot create the output folder: {error.strerror}", Location(shown)
        ) from None
    held = [descriptor]
    busy = UserError(
        "another gpustack render is writing to this folder, or to a folder above or inside it; "
        "run again once it is done",
        Location(shown),
    )
    try:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise busy from None
        for above in Path(os.path.abspath(out)).parents:
            try:
                folder = os.open(above, os.O_RDONLY | os.O_DIRECTORY)
            except OSError:
                continue  # a folder this user cannot read cannot be another render's output
            held.append(folder)
            try:
                fcntl.flock(folder, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                raise busy from None
            except OSError:
                continue
        yield
    finally:
        for each in held:
            os.close(each)  # releases the locks


def _make_folders(folder: Path) -> None:
    """`mkdir -p`, each new folder owned like its parent (see _own_like)."""
    missing: list[Path] = []
    current = Path(os.path.abspath(folder))
    while not os.path.lexists(current):
        missing.append(current)
        current = current.parent
    for each in reversed(missing):
        try:
            os.mkdir(each)
        except FileExistsError:
            continue
        _own_like(each, each.parent)


def _own_like(path: Path, model: Path) -> None:
    """Run as root, give `path` the owner and group of `model`: a folder or file that root
    creates in a user's checkout stays the user's. A no-op for anyone else."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return
    try:
        status = os.stat(model, follow_symlinks=False)
        os.chown(path, status.st_uid, status.st_gid, follow_symlinks=False)
    except OSError:
        pass


def recover(out: Path) -> None:
    """Remove what an interrupted render left in `out` (the caller holds the lock)."""
    try:
        names = sorted(os.listdir(out))
    except OSError:
        return
    for name in names:
        match = _STAGING.fullmatch(name)
        if not match:
            continue
        leftover = out / name
        target = out / match["name"]
        if match["role"] == "old" and not os.path.lexists(target):
            os.rename(leftover, target)  # died between the two renames of a swap: put it back
        else:
            remove_tree(leftover)


def _stage(each: Plan) -> Path:
    """A hidden sibling of the target holding the new files and links to the user's own."""
    target = each.target
    staged = target.parent / f".{target.name}.gpustack-new-{uuid.uuid4().hex[:12]}"
    umask = _umask()
    os.mkdir(staged)
    try:
        source_mode = os.stat(target).st_mode if os.path.lexists(target) else None
        os.chmod(staged, stat.S_IMODE(source_mode) if source_mode else 0o777 & ~umask)
        _own_like(staged, target if source_mode else target.parent)
        for relative in each.keep:
            source, copy = target / relative, staged / relative
            _parents(target, staged, relative)
            if os.path.isdir(source) and not os.path.islink(source):
                os.mkdir(copy)
                shutil.copymode(source, copy)
                _own_like(copy, source)
            else:
                try:
                    os.link(source, copy, follow_symlinks=False)
                except OSError:
                    if os.path.islink(source):
                        os.symlink(os.readlink(source), copy)
                    else:
                        shutil.copy2(source, copy)
                    _own_like(copy, source)
        for relative, content in each.files.items():
            path = staged / relative
            _parents(target, staged, relative)
            mode = each.modes.get(relative, 0o666) & ~umask
            descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
            try:
                os.fchmod(descriptor, mode)  # exactly, whatever the umask
                view = memoryview(content)
                while view:
                    view = view[os.write(descriptor, view) :]
            finally:
                os.close(descriptor)
            _own_like(path, path.parent)
    except BaseException:
        remove_tree(staged)
        raise
    return staged


def _parents(target: Path, staged: Path, relative: str) -> None:
    """Create the folders above `relative` in `staged`, with the modes they have in `target`."""
    parts = relative.split("/")[:-1]
    for depth in range(1, len(parts) + 1):
        folder = "/".join(parts[:depth])
        copy = staged / folder
        if not os.path.isdir(copy):
            os.mkdir(copy)
            existing = target / folder
            if os.path.isdir(existing):
                shutil.copymode(existing, copy)
            _own_like(copy, existing if os.path.isdir(existing) else copy.parent)


def _swap(staged: Path, target: Path, existed: bool, undo: bool = False) -> None:
    """Put `staged` in place of `target` in one step (and `target` at `staged`'s name)."""
    if not existed:
        if undo:
            os.rename(target, staged)
        else:
            os.rename(staged, target)
        return
    if _exchange(staged, target):
        return
    old = staged.with_name(staged.name.replace("-new-", "-old-"))
    if undo:
        os.rename(target, staged)
        os.rename(old, target)
    else:
        os.rename(target, old)
        os.rename(staged, target)
        os.rename(old, staged)


_LIBC: ctypes.CDLL | None = None


def _exchange(first: Path, second: Path) -> bool:
    """Exchange two folders atomically (Linux renameat2); False where the system cannot."""
    global _LIBC
    if not hasattr(os, "uname") or os.uname().sysname != "Linux":
        return False
    if _LIBC is None:
        _LIBC = ctypes.CDLL(None, use_errno=True)
    function = getattr(_LIBC, "renameat2", None)
    if function is None:
        return False
    result = function(
        _AT_FDCWD, os.fsencode(first), _AT_FDCWD, os.fsencode(second), _RENAME_EXCHANGE
    )
    if result == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP):
        return False
    raise OSError(code, os.strerror(code), str(second))


def _umask() -> int:
    current = os.umask(0o022)
    os.umask(current)
    return current
