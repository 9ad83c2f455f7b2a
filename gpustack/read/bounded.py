"""Reading a file the user named, or one found in a folder: regular files only, and bounded.

Every file gpustack reads (configs, bases, profiles, the entitlement PEM, manifests to validate,
committed output) goes through `read_bounded`: a FIFO, a device such as /dev/zero or a folder is
refused before a byte is read (opening never blocks), and a file is never read past its limit,
so no input can hang a command or exhaust memory. Committed output is read without following
symbolic links (`follow=False`): a link there could point anywhere on the machine.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path

from gpustack.errors import Location, UserError, display_path

# A cluster config or profile is a few kilobytes; anything this large is a mistake, not a config.
MAX_FILE_BYTES = 1024 * 1024
# Set while a command reads the repository as a git revision has it (`diff --git-ref`): called
# with each path before it is opened, it brings that file of the revision onto the disk, or
# raises a UserError for a path the revision must not be read through (outside the repository).
revision_guard: Callable[[str], None] | None = None
# Folders that stand for a repository's top without holding `.git`: the tree into which
# `diff --git-ref` brings a revision's files (gpustack.compare.revision.tree_at), each a real path.
revision_tops: list[str] = []
_KINDS = {
    stat.S_IFREG: "a file",
    stat.S_IFDIR: "a folder",
    stat.S_IFIFO: "a named pipe (FIFO)",
    stat.S_IFCHR: "a device",
    stat.S_IFBLK: "a device",
    stat.S_IFSOCK: "a socket",
    stat.S_IFLNK: "a symbolic link",
}


class UnreadableFile(UserError):
    """A file that could not be read as a file (missing, a FIFO, a folder, a device, a broken
    link, too large, denied): raised by `read_bounded` alone, so a caller that parses what it
    read tells this apart from a mistake in the content, and never reports a FIFO, a folder or a
    broken link as a file that does not parse."""


def repository_top(folder: Path) -> Path | None:
    """The top of the repository holding `folder`: the nearest folder at or above it, symbolic
    links resolved, that holds `.git` (a folder, or the file of a worktree or a submodule) or
    stands for a revision's tree; None outside any repository. Found on the disk, without git."""
    real = Path(os.path.realpath(folder))
    for candidate in (real, *real.parents):
        if str(candidate) in revision_tops or os.path.lexists(candidate / ".git"):
            return candidate
    return None


def kind_of(mode: int) -> str:
    return _KINDS.get(stat.S_IFMT(mode), "not a regular file")


def read_bounded(
    path: Path | str,
    limit: int = MAX_FILE_BYTES,
    what: str = "a YAML file",
    follow: bool = True,
    location: Location | None = None,
) -> bytes:
    """The bytes of the regular file `path`, at most `limit` of them, or a UserError that names
    the file (at `location` when given) and never quotes its content."""

    def refused(message: str) -> UnreadableFile:
        # The file's name is worked out only for an error: that takes longer than reading it.
        # A NUL byte cannot be in a file name; shown escaped, since a terminal would hide it.
        shown = str(path).replace("\x00", "\\0") if "\x00" in str(path) else display_path(path)
        if location is None:
            return UnreadableFile(message, Location(shown))
        return UnreadableFile(f"{shown}: {message}", location)

    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    if not follow:
        flags |= os.O_NOFOLLOW
    try:
        if "\x00" in str(path):
            raise refused("a file name cannot contain a NUL byte")
        if not follow and os.path.islink(path):
            raise refused("is a symbolic link; gpustack does not follow links here")
        if revision_guard is not None:
            try:
                revision_guard(os.path.abspath(path))
            except UserError as problem:
                if location is None and problem.location is not None:
                    # Where the revision says what is wrong (a submodule, a link on the way).
                    raise UnreadableFile(
                        problem.message, problem.location, hint=problem.hint
                    ) from None
                refusal = refused(problem.message)
                refusal.hint = problem.hint
                raise refusal from None
        descriptor = os.open(path, flags)
    except FileNotFoundError:
        if os.path.islink(path):
            raise refused("file not found (a symbolic link to a missing file)") from None
        raise refused("file not found") from None
    except PermissionError:
        raise refused("permission denied") from None
    except OSError as error:
        raise refused(f"cannot read file: {error.strerror}") from None
    try:
        mode = os.fstat(descriptor).st_mode
        if not stat.S_ISREG(mode):
            raise refused(f"is {kind_of(mode)}, expected {what}")
        chunks: list[bytes] = []
        size = 0
        while size <= limit:
            chunk = os.read(descriptor, min(1 << 20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as error:
        raise refused(f"cannot read file: {error.strerror}") from None
    finally:
        os.close(descriptor)
    if size > limit:
        raise refused(
            f"file has more than {limit} bytes ({_size(limit)}), the most {what} may have"
        )
    return b"".join(chunks)


def _size(limit: int) -> str:
    return f"{limit // (1024 * 1024)} MiB" if limit % (1024 * 1024) == 0 else f"{limit} bytes"


def decode(raw: bytes, shown: str) -> str:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        before = raw[: error.start]
        line = before.count(b"\n") + 1
        column = error.start - (before.rfind(b"\n") + 1) + 1
        raise UserError(
            f"not valid UTF-8 (byte 0x{raw[error.start]:02x})",
            Location(shown, line, column),
            hint="save the file as UTF-8",
        ) from None
    if "\x00" in text:
        raise UserError("binary file (contains NUL bytes), expected YAML", Location(shown))
    return text.removeprefix("\ufeff")
