"""The image lock: the digest of each image a cluster pulls, recorded offline.

`gpustack.lock` beside the cluster configs maps each image reference, as the configs name it
(before `images.registry` rewrites its host), to the digest it had when it was locked; render
pins every image the lock names (`name:tag@sha256:...`). gpustack fills it without network from
what the user saved with the registry tools they already use:

- `skopeo inspect docker://IMAGE` (a JSON object: `Name`, the repository as given, and
  `Digest`, the top-level manifest's: a multi-architecture image's list, skopeo-inspect(1)),
  or several, one after another, as a loop of it saves them;
- lines of `IMAGE DIGEST` (`echo "$image $(crane digest "$image")"`, or `skopeo inspect
  --format '{{.Name}}:TAG {{.Digest}}'`), or `IMAGE@DIGEST` (`crane digest --full-ref`).

Both the lock and the saved files are untrusted: each read is bounded and goes through
`reading`/`yamlio`, every value is checked, and no error quotes a file's content.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path

from gpustack import emit
from gpustack.config.field_types import IMAGE
from gpustack.errors import Location, UserError, display_path
from gpustack.objects import kind_of
from gpustack.read import bounded as reading
from gpustack.read.bounded import decode, read_bounded
from gpustack.read.named_files import inside_repository
from gpustack.read.yamlio import load_text

LOCK_FILE = "gpustack.lock"
API_VERSION = "gpustack.dev/v1alpha1"
KIND = "ImageLock"
# A SHA-256 digest as image references carry it (opencontainers/image-spec descriptor.md,
# "Digests": algorithm, colon, lowercase hex; sha256 is the one every registry serves).
DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
# An image reference by distribution/reference's grammar (reference/regexp.go: an optional
# domain and port, lowercase path components, a tag), stricter than the configs' IMAGE: only to
# tell a line that names an image from one that names anything else.
REFERENCE = re.compile(
    r"([A-Za-z0-9-]+(\.[A-Za-z0-9-]+)*(:[0-9]+)?/)?[a-z0-9]+([._-]+[a-z0-9]+)*"
    r"(/[a-z0-9]+([._-]+[a-z0-9]+)*)*(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?"
)
SPACE = re.compile(r"\s*")
# A lock or a saved `skopeo inspect` (whose RepoTags may list thousands of tags) is far below this.
MAX_BYTES = 8 * 1024 * 1024
LOCK_HINT = "fill it with `gpustack images CONFIG --lock-from FILE`"
SAVED_HINT = (
    "save what `skopeo inspect docker://IMAGE` prints, or one `IMAGE DIGEST` or `IMAGE@DIGEST` "
    "line per image, as `crane digest` and `crane digest --full-ref` give them"
)
# Docker's own registry and namespace, which a short name means (distribution/reference
# normalize.go: docker.io, library/).
DOCKER_HUB = "docker.io"
DOCKER_LIBRARY = "library/"


@dataclass(frozen=True)
class Reference:
    """An image reference taken apart (distribution/reference grammar): the registry host
    ('' for a short name, which the node's runtime resolves), repository path, tag, digest."""

    registry: str
    repository: str
    tag: str | None
    digest: str | None

    @property
    def name(self) -> str:
        return f"{self.registry}/{self.repository}" if self.registry else self.repository

    @property
    def tagged(self) -> str:
        """The reference without its digest."""
        return f"{self.name}:{self.tag}" if self.tag else self.name

    @property
    def normalized(self) -> str:
        """The repository as registries name it: a short name is Docker Hub's (`busybox` is
        `docker.io/library/busybox`), as `skopeo inspect` prints it."""
        if self.registry:
            return self.name
        library = "" if "/" in self.repository else DOCKER_LIBRARY
        return f"{DOCKER_HUB}/{library}{self.repository}"


def parse(reference: str) -> Reference | None:
    """`reference` taken apart, or None when it is not an image reference."""
    if not re.fullmatch(IMAGE, reference):
        return None
    name, _, digest = reference.partition("@")
    tag = None
    last = name.rsplit("/", 1)[-1]
    if ":" in last:
        name, _, tag = name.rpartition(":")
    host, slash, rest = name.partition("/")
    if slash and ("." in host or ":" in host or host == "localhost"):
        return Reference(host, rest, tag, digest or None)
    return Reference("", name, tag, digest or None)


def lock_path(config: Path) -> Path:
    """The lock file the cluster config at `config` reads: beside it."""
    return config.parent / LOCK_FILE


def read_lock(path: Path) -> dict[str, str]:
    """The lock at `path` (image -> digest), or nothing when there is no such file. Read once
    per process however many configs of a fleet share it (again when it changes)."""
    if reading.revision_guard is not None:
        # diff --git-ref: the revision's lock comes onto the disk when asked for, and a lock
        # the revision must not be read through (a link out of the repository) is refused
        # here: once refused it is not on the disk, and read as no lock at all it would show
        # every pinned image as changed.
        reading.revision_guard(os.path.abspath(path))
    if os.path.lexists(path):
        # Beside a config of a pull request, the lock may be a link to any file of the machine:
        # it is read only inside the repository holding the config, as a file the config names.
        inside_repository(
            path.parent, path.name, Location(display_path(path)), None, "the image lock"
        )
    try:
        found = os.stat(path)
    except FileNotFoundError:
        if not os.path.islink(path):
            return {}
        found = None  # a link to a missing file: said so, not taken for no lock
    except OSError:
        found = None
    if found is None:
        return _read_lock(str(path))  # reports the problem exactly as a read does
    return _read_unchanged(os.path.abspath(path), found.st_mtime_ns, found.st_size, os.getcwd())


@cache
def _read_unchanged(path: str, mtime_ns: int, size: int, cwd: str) -> dict[str, str]:
    # mtime and size in the key: an edited lock is read again; cwd: errors name the file as
    # the user would type it from there.
    return _read_lock(path)


def _read_lock(path: str) -> dict[str, str]:
    shown = display_path(path)
    text = decode(read_bounded(path, MAX_BYTES, "an image lock"), shown)
    document = load_text(text, shown)
    data, source = document.data, document.source
    if not isinstance(data, dict) or kind_of(data) != KIND:
        raise UserError(
            f"is not an image lock (apiVersion {API_VERSION}, kind {KIND})",
            source.nearest(("kind",)) if isinstance(data, dict) else Location(shown, 1, 1),
            hint=LOCK_HINT,
        )
    if data.get("apiVersion") != API_VERSION:
        raise UserError(
            f"apiVersion must be {API_VERSION}",
            source.nearest(("apiVersion",)),
            field="apiVersion",
        )
    unknown = sorted(str(key) for key in data if key not in ("apiVersion", "kind", "images"))
    if unknown:
        raise UserError(
            "unknown field", source.nearest((unknown[0],)), field=unknown[0], hint=LOCK_HINT
        )
    images = data.get("images")
    if images is None:
        return {}
    if not isinstance(images, dict):
        raise UserError(
            "must map each image to its digest", source.nearest(("images",)), field="images"
        )
    digests: dict[str, str] = {}
    for image, digest in images.items():
        where = ("images", image)
        reference = parse(image) if isinstance(image, str) else None
        if reference is None or reference.digest or not reference.tag:
            raise UserError(
                "a key is not an image reference with a tag and without a digest",
                source.key(where) or source.nearest(where),
                field="images",
                hint="the lock names each image as the config does, e.g. "
                "nvcr.io/nvidia/k8s-device-plugin:v0.20.0",
            )
        if not isinstance(digest, str) or not DIGEST.fullmatch(digest):
            raise UserError(
                "is not a digest: sha256: and 64 lowercase hexadecimal digits",
                source.nearest(where),
                field=f"images.{image}",
                hint=LOCK_HINT,
            )
        digests[image] = digest
    return digests


def lock_text(digests: dict[str, str]) -> str:
    """The lock file holding `digests`, sorted: the same digests give the same bytes."""
    document = {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "images": dict(sorted(digests.items())),
    }
    return (
        "# The digest of each image the cluster configs of this folder pull. `gpustack render`\n"
        "# pins these images by digest. Written by `gpustack images --lock-from`.\n"
        + emit.dump(document)
    )


def write_locks(locks: dict[Path, dict[str, str]]) -> None:
    """Write each lock (path -> digests): every new file is staged beside its lock first, and
    only once all are staged do they replace the locks, so a lock that cannot be written (a
    folder without write access, a full disk) leaves every lock as it was. Each replacement is
    one step: a reader sees the old file or the new one."""
    staged: list[tuple[str, Path]] = []
    try:
        for path, digests in locks.items():
            staged.append((_stage(path, digests), path))
        for each, path in staged:
            try:
                os.replace(each, path)
            except OSError as error:
                raise _unwritable(path, error) from None
    finally:
        for each, _ in staged:
            Path(each).unlink(missing_ok=True)


def _stage(path: Path, digests: dict[str, str]) -> str:
    """The new lock for `path`, written to a file beside it. Never through a symbolic link:
    one that a pull request planted (pointing out of the repository, or to a file not there
    yet) would have gpustack write wherever it points."""
    if os.path.islink(path):
        raise UserError(
            "is a symbolic link; gpustack writes the image lock only as a file of its own, "
            "never through a link",
            Location(display_path(path)),
            hint="replace the link with the file it points to, or remove it",
        )
    target = Path(os.path.abspath(path))
    try:
        found = target.stat()
        mode, owner = found.st_mode & 0o777, found
    except FileNotFoundError:
        mode, owner = 0o644, None
    except OSError as error:
        raise _unwritable(path, error) from None
    staged = ""
    try:
        descriptor, staged = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
        with os.fdopen(descriptor, "w", encoding="utf-8", newline="\n") as handle:
            handle.write(lock_text(digests))
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(staged, mode)
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            # Run as root in a user's checkout, the lock stays the user's: owned as the lock it
            # replaces, or a new one as its folder.
            owner = owner or target.parent.stat()
            os.chown(staged, owner.st_uid, owner.st_gid)
    except OSError as error:
        if staged:
            Path(staged).unlink(missing_ok=True)
        raise _unwritable(path, error) from None
    return staged


def _unwritable(path: Path, error: OSError) -> UserError:
    return UserError(f"cannot write the image lock: {error.strerror}", Location(display_path(path)))


@dataclass(frozen=True)
class Saved:
    """One digest a saved file gives: the image it names (a repository alone when the tool
    printed none), the digest, and where the digest is written."""

    reference: Reference
    digest: str
    location: Location


def read_saved(path: Path) -> list[Saved]:
    """The digests in a saved `skopeo inspect` JSON or `IMAGE DIGEST` / `IMAGE@DIGEST` lines."""
    shown = display_path(path)
    text = decode(read_bounded(path, MAX_BYTES, "a saved skopeo or crane output"), shown)
    if text.lstrip().startswith(("{", "[")):
        return _json_values(text, shown)
    found = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        found.append(_line(line, Location(shown, number, 1)))
    if not found:
        raise UserError("names no image and digest", Location(shown), hint=SAVED_HINT)
    return found


def _json_values(text: str, shown: str) -> list[Saved]:
    """The `skopeo inspect` objects of `text`, one after another as a loop saves them, each
    located at its line and column of the file. A value that is not JSON ends the split: the
    YAML reader then says where it breaks. Linear in the file: each value's line is counted
    from the one before."""
    decoder = json.JSONDecoder()
    found = []
    start = _after_space(text, 0)
    lines, counted = 0, 0
    while start < len(text):
        try:
            _, end = decoder.raw_decode(text, start)
        except (ValueError, RecursionError):
            end = len(text)
        lines += text.count("\n", counted, start)
        counted = start
        columns = start - (text.rfind("\n", 0, start) + 1)
        try:
            saved = _inspected(text[start:end], shown)
        except UserError:
            # Read again where it stands in the file: every position the error names is the
            # file's (padding each value would make a long loop's file quadratic to read).
            _inspected("\n" * lines + " " * columns + text[start:end], shown)
            raise
        found.append(replace(saved, location=_moved(saved.location, lines, columns)))
        start = _after_space(text, end)
    return found


def _after_space(text: str, index: int) -> int:
    """The index of the first character from `index` on that is not white space."""
    match = SPACE.match(text, index)
    return match.end() if match else index


def _moved(location: Location, lines: int, columns: int) -> Location:
    """`location` in a piece of a file that starts `lines` lines and `columns` columns in."""
    if not location.line:
        return location
    column = location.column + columns if location.line == 1 else location.column
    return Location(location.file, location.line + lines, column)


def _inspected(text: str, shown: str) -> Saved:
    """`skopeo inspect`'s JSON (skopeo cmd/skopeo/inspect.go, inspectOutput: Name, Digest)."""
    document = load_text(text, shown)  # JSON is YAML: one reader, and positions for errors
    data, source = document.data, document.source
    if not isinstance(data, dict):
        raise UserError("is not a skopeo inspect object", Location(shown, 1, 1), hint=SAVED_HINT)
    name = data.get("Name")
    reference = parse(name) if isinstance(name, str) else None
    if reference is None or reference.digest:
        raise UserError(
            "is not an image repository",
            source.nearest(("Name",)),
            field="Name",
            hint=SAVED_HINT,
        )
    digest = data.get("Digest")
    if not isinstance(digest, str) or not DIGEST.fullmatch(digest):
        raise UserError(
            "is not a digest: sha256: and 64 lowercase hexadecimal digits",
            source.nearest(("Digest",)),
            field="Digest",
            hint=SAVED_HINT,
        )
    return Saved(reference, digest, source.value(("Digest",)) or source.nearest(()))


def _line(line: str, start: Location) -> Saved:
    """`IMAGE DIGEST` or `IMAGE@DIGEST`, located at the word that is wrong."""
    words = [(match.start() + 1, match.group()) for match in re.finditer(r"\S+", line)]
    if len(words) == 1 and "@" in words[0][1]:
        column, word = words[0]
        image, _, digest = word.rpartition("@")
        words = [(column, image), (column + len(image) + 1, digest)]
    if len(words) != 2:
        only = words[0][1] if len(words) == 1 else ""
        if DIGEST.fullmatch(only):
            why = "; a digest alone names no image"
        elif REFERENCE.fullmatch(only):
            # What a loop of `echo "$image $(skopeo inspect ...)"` writes when the inspection
            # failed: the image, and nothing after it.
            why = "; an image without its digest (did its inspection fail?)"
        else:
            why = ""
        raise UserError(f"expected IMAGE DIGEST or IMAGE@DIGEST{why}", start, hint=SAVED_HINT)
    (image_column, image), (digest_column, digest) = words
    reference = parse(image)
    if reference is None or reference.digest:
        raise UserError(
            "is not an image reference",
            Location(start.file, start.line, image_column),
            hint=SAVED_HINT,
        )
    where = Location(start.file, start.line, digest_column)
    if not DIGEST.fullmatch(digest):
        raise UserError(
            "is not a digest: sha256: and 64 lowercase hexadecimal digits", where, hint=SAVED_HINT
        )
    return Saved(reference, digest, where)
