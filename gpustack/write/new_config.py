"""`gpustack init`: a new config file, and the config schema beside it.

    init(request) -> Written

Where the config goes (a folder gets `gpustack.yaml` in it, named after the folder), the
cluster's name and the base it extends are worked out and checked first; the starter config
(`resolve.starter`) is then loaded as `render` would load it, and only then is anything
written: the config, and the schema its `$schema` modeline points at, each never through a
symbolic link and never over a file that is not gpustack's.
"""

from __future__ import annotations

import errno
import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from gpustack.config import SCHEMA_FILE
from gpustack.config.field_types import dns_label
from gpustack.config.schema import SCHEMA_ID, schema_text
from gpustack.errors import Location, UserError, display_path
from gpustack.read.bounded import read_bounded
from gpustack.read.yamlio import load_text
from gpustack.resolve.load import load_stack
from gpustack.resolve.starter import starter


@dataclass(frozen=True)
class InitRequest:
    """What `gpustack init` was asked: where to write the config (a file or a folder), its
    profile and cluster name (empty: the defaults), whether to overwrite a file there, where
    the `$schema` modeline points (None: `SCHEMA_FILE` beside the config, written there), and
    the base a fleet member extends."""

    path: Path
    profile: str = ""
    name: str = ""
    force: bool = False
    profiles_dir: Path | None = None
    schema: str | None = None
    extends: Path | None = None


@dataclass(frozen=True)
class NewConfig:
    """The config to write: its file, its cluster's name, its base as the config names it
    (relative to the config's folder), and where its `$schema` modeline points."""

    path: Path
    cluster: str
    base: str | None
    schema: str


@dataclass(frozen=True)
class Written:
    """The config written, and the profile it renders with."""

    config: NewConfig
    profile: str


def init(request: InitRequest) -> Written:
    """Write a starter config into the file `request` names (and the config schema beside it,
    unless the modeline points elsewhere), once it loads as render loads it."""
    new = _new_config(request)
    path, profiles_dir = new.path, request.profiles_dir
    text = starter(request.profile, new.cluster, profiles_dir, str(path), new.schema, new.base)
    # The config loads as render will load it (its base included) before anything is written.
    load_stack(path, profiles_dir=profiles_dir, document=load_text(text, display_path(path)))
    schema_path = path.parent / SCHEMA_FILE
    if request.schema is None and schema_path.is_symlink():
        raise UserError(
            "is a symbolic link; init writes the schema only as a file of its own; pass --schema "
            "to point elsewhere",
            Location(display_path(schema_path)),
        )
    if request.schema is None and schema_path.exists() and not _is_gpustack_schema(schema_path):
        raise UserError(
            "exists and is not gpustack's config schema; pass --schema to point elsewhere",
            Location(display_path(schema_path)),
        )
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise UserError(
            f"cannot create the folder: {error.strerror}", Location(display_path(path.parent))
        ) from None
    _write(path, text)
    if request.schema is None:
        _write(schema_path, schema_text())
    return Written(new, load_stack(path, profiles_dir=profiles_dir).profile.metadata.name)


def _new_config(request: InitRequest) -> NewConfig:
    """Where the config goes, its cluster's name and its base, each checked."""
    path, name, schema = request.path, request.name, request.schema
    if schema is not None and any(
        ord(character) < 0x20 or ord(character) == 0x7F for character in schema
    ):
        # A newline would end the modeline comment and start keys of the config.
        raise UserError(
            "cannot hold a line break or another control character",
            Location("--schema"),
            hint="give a path or URL on one line",
        )
    folder_name = None
    # A folder, existing or to be made (a path not ending in .yaml or .yml: `init gpu-west/`).
    if path.is_dir() or (not path.exists() and path.suffix not in (".yaml", ".yml")):
        folder_name = path.resolve().name
        path = path / "gpustack.yaml"
    if path.is_symlink():
        raise UserError(
            "is a symbolic link; init writes a new file and never through a link",
            Location(display_path(path)),
        )
    if path.is_dir() or (path.exists() and not path.is_file()):
        raise UserError(
            "is not a regular file; init will not replace it", Location(display_path(path))
        )
    if path.exists() and not request.force:
        raise UserError("already exists (use --force to overwrite)", Location(display_path(path)))
    default_name = folder_name if folder_name and dns_label(folder_name) else "my-cluster"
    cluster = name or (path.stem if path.stem != "gpustack" else default_name)
    if not dns_label(cluster):
        raise UserError(
            f"{cluster!r} is not a valid DNS-1123 label"
            + ("" if name else "; pass --name")
            + " (lowercase letters, digits and '-', at most 63 characters)",
            field="metadata.name",
        )
    base = None
    extends = request.extends
    if extends is not None and not extends.is_file():
        raise UserError(f"base config {display_path(extends)} not found", Location("--extends"))
    if extends is not None:
        # Named as the config will name it: relative to the config's folder.
        base = os.path.relpath(os.path.abspath(extends), os.path.abspath(path.parent))
    return NewConfig(path, cluster, base, schema or SCHEMA_FILE)


def _write(path: Path, text: str) -> None:
    """Write `text` to the file `path`, never through a symbolic link (one planted between the
    checks and the write included); any failure is one message."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    try:
        descriptor = os.open(path, flags | os.O_NONBLOCK, 0o666)
        try:
            if not stat.S_ISREG(os.fstat(descriptor).st_mode):
                raise UserError(
                    "is not a regular file; init will not write to it",
                    Location(display_path(path)),
                )
            data = memoryview(text.encode("utf-8"))
            while data:
                data = data[os.write(descriptor, data) :]
        finally:
            os.close(descriptor)
    except UserError:
        raise
    except OSError as error:
        problem = (
            "is a symbolic link; init writes a new file and never through a link"
            if error.errno == errno.ELOOP
            else f"cannot write: {error.strerror}"
        )
        raise UserError(problem, Location(display_path(path))) from None


def _is_gpustack_schema(path: Path) -> bool:
    """Whether `path` holds a gpustack config schema (of any version), so it may be refreshed."""
    try:
        # Bounded, and only a regular file: a FIFO or a huge file there is not a schema.
        document = json.loads(read_bounded(path, what="a JSON schema"))
        return bool(document.get("$id") == SCHEMA_ID)
    except (UserError, ValueError, AttributeError):
        return False
