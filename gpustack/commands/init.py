"""`gpustack init`: a commented starter config for a profile."""

from __future__ import annotations

import errno
import json
import os
import shlex
import stat
from pathlib import Path
from typing import Annotated

import typer

from gpustack.commands import common

# Written beside the config, so editors complete and check it offline (yaml-language-server).
SCHEMA_FILE = "gpustack.schema.json"

app = common.application()


@app.command("init")
def run(
    path: Annotated[
        Path,
        typer.Argument(
            help="Where to write the config; a folder (or a path not ending in .yaml) gets "
            "gpustack.yaml in it, named after the folder.",
            metavar="PATH",
        ),
    ] = Path("gpustack.yaml"),
    profile: Annotated[
        str,
        typer.Option(
            "--profile",
            help="Platform profile to start from (default: the base's with --extends, else "
            "kubeadm).",
            metavar="NAME",
            autocompletion=common.profile_names,
            show_default=False,
        ),
    ] = "",
    name: Annotated[
        str,
        typer.Option(
            "--name",
            help="Cluster name (default: from the file name).",
            metavar="NAME",
            show_default=False,
        ),
    ] = "",
    force: Annotated[bool, typer.Option("--force", help="Overwrite an existing file.")] = False,
    profiles_dir: common.ProfilesDir = None,
    schema: Annotated[
        str | None,
        typer.Option(
            "--schema",
            help=f"Where the $schema modeline points (default: {SCHEMA_FILE} beside the config, "
            "written or refreshed there).",
            metavar="PATH|URL",
        ),
    ] = None,
    extends: Annotated[
        Path | None,
        typer.Option(
            "--extends",
            help="Start a fleet member: the config extends this base, whose settings it keeps "
            "(only the cluster's name is written; the rest shows as comments).",
            metavar="BASE",
        ),
    ] = None,
    debug: common.Debug = False,
) -> int:
    """Write a commented starter config (never overwriting without --force)."""
    from gpustack.errors import Location, UserError, display_path
    from gpustack.read.yamlio import load_text
    from gpustack.resolve.config_schema import schema_text
    from gpustack.resolve.field_types import dns_label
    from gpustack.resolve.load import load_stack
    from gpustack.resolve.starter import starter

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
    if path.exists() and not force:
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
    if extends is not None and not extends.is_file():
        raise UserError(f"base config {display_path(extends)} not found", Location("--extends"))
    if extends is not None:
        # Named as the config will name it: relative to the config's folder.
        base = os.path.relpath(os.path.abspath(extends), os.path.abspath(path.parent))
    text = starter(profile, cluster, profiles_dir, str(path), schema or SCHEMA_FILE, base)
    # The starter loads as render will load it (its base included) before anything is written.
    load_stack(path, profiles_dir=profiles_dir, document=load_text(text, display_path(path)))
    schema_path = path.parent / SCHEMA_FILE
    if schema is None and schema_path.is_symlink():
        raise UserError(
            "is a symbolic link; init writes the schema only as a file of its own; pass --schema "
            "to point elsewhere",
            Location(display_path(schema_path)),
        )
    if schema is None and schema_path.exists() and not _is_gpustack_schema(schema_path):
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
    if schema is None:
        _write(schema_path, schema_text())
    following = ["gpustack", "render", str(path)]
    if profiles_dir is not None:
        following += ["--profiles-dir", str(profiles_dir)]
    chosen = load_stack(path, profiles_dir=profiles_dir).profile.metadata.name
    common.echo(
        f"wrote {display_path(path)} (profile {chosen}"
        + (f", extends {base}" if base else "")
        + f"); next: {shlex.join(following)} writes out/{cluster}/",
        err=True,
    )
    return 0


def _write(path: Path, text: str) -> None:
    """Write `text` to the file `path`, never through a symbolic link (one planted between the
    checks and the write included); any failure is one message."""
    import os

    from gpustack.errors import Location, UserError, display_path

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
    from gpustack.errors import UserError
    from gpustack.read.bounded import read_bounded
    from gpustack.resolve.config_schema import SCHEMA_ID

    try:
        # Bounded, and only a regular file: a FIFO or a huge file there is not a schema.
        document = json.loads(read_bounded(path, what="a JSON schema"))
        return bool(document.get("$id") == SCHEMA_ID)
    except (UserError, ValueError, AttributeError):
        return False
