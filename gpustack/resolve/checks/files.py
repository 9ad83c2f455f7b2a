"""The files a config names whose content the checks read: the entitlement PEM
(`entitlement.pemFile`) and the MIG configs of `migManager.config.file`, each found beside the
layer that names it, inside its repository, and read bounded. Nothing of their content is quoted
in an error."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

from gpustack.errors import Location, UserError, display_path
from gpustack.read.bounded import decode, read_bounded
from gpustack.read.named_files import inside_repository
from gpustack.read.yamlio import load_text
from gpustack.resolve import mig
from gpustack.resolve.checks.context import CheckContext


def _named_file(
    context: CheckContext, path: tuple[str, ...], written: str, what: str, hint: str | None = None
) -> tuple[Path, Location]:
    """The file a path setting names, relative to the folder of the layer that wrote it, and
    where it is written; checked before anything is read: a file a config, base or profile
    names lies in its repository (named_files). A path given with `--set` (a layer of no file)
    is the user's own, relative to the working folder."""
    layers = context.layers
    owner = next((layer for layer in reversed(layers) if _writes(layer.data, path)), None)
    location = context.at(path)
    if owner is None or owner.directory is None:
        return Path.cwd() / written, location
    inside_repository(owner.directory, written, location, ".".join(path), what, hint)
    return owner.directory / written, location


def _writes(data: Any, path: tuple[str, ...]) -> bool:
    for key in path:
        if not isinstance(data, dict) or key not in data:
            return False
        data = data[key]
    return True


def read_mig_configs(context: CheckContext) -> mig.Configs:
    """The MIG configs of `migManager.config.file`, in mig-parted's format, parsed and checked."""
    config = context.config
    file, location = _named_file(
        context,
        ("migManager", "config", "file"),
        str(config.migManager.config.file),
        "MIG config file",
    )
    try:
        raw = read_bounded(file, what="a mig-parted config", location=location)
    except UserError as error:
        # The file as a whole (missing, a folder, a FIFO, a link to nothing): said for what it is.
        if error.message.endswith(": file not found"):
            error = UserError(f"MIG config file {display_path(file)} not found", location)
        raise UserError(
            error.message, error.location, "migManager.config.file", error.hint
        ) from None
    try:
        text = decode(raw, str(file))
        document = load_text(text, display_path(file))
    except UserError as error:
        if error.location is not None and error.location.line:
            # A YAML error may quote what it stumbled on (a key, a tag, an alias): the file
            # is named with the place, never with its content.
            error = UserError(
                "not valid YAML, expected a mig-parted config; its content is not shown",
                error.location,
            )
        raise UserError(
            error.message, error.location, "migManager.config.file", error.hint
        ) from None
    return mig.parse_user_configs(document)


def read_pem(context: CheckContext) -> tuple[bytes, int]:
    """The PEM's bytes and permission bits. Nothing of its content is ever quoted in an error."""
    config = context.config
    pem_path, location = _named_file(
        context,
        ("entitlement", "pemFile"),
        str(config.entitlement.pemFile),
        "entitlement PEM",
        hint="a certificate kept outside the repository is named on the command line: "
        "--set entitlement.pemFile=PATH",
    )
    try:
        content = read_bounded(pem_path, 1024 * 1024, "an entitlement PEM", location=location)
        mode = stat.S_IMODE(os.stat(pem_path).st_mode)
    except UserError as error:
        if error.message.endswith(": file not found"):
            error = UserError(f"entitlement PEM {display_path(pem_path)} not found", location)
        raise UserError(error.message, error.location, "entitlement.pemFile") from None
    except OSError:
        raise UserError(
            f"cannot read entitlement PEM {display_path(pem_path)}", location, "entitlement.pemFile"
        ) from None
    if b"-----BEGIN" not in content:
        raise UserError(
            f"{display_path(pem_path)} is not a PEM file (no '-----BEGIN' line)",
            location,
            "entitlement.pemFile",
        )
    return content, mode
