"""`gpustack init`: a commented starter config for a profile.

The config is made and written by `gpustack.write.new_config`; this module says what it wrote."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Annotated

import typer

from gpustack.commands import common
from gpustack.config import SCHEMA_FILE

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
    from gpustack.errors import display_path
    from gpustack.write.new_config import InitRequest, init

    written = init(InitRequest(path, profile, name, force, profiles_dir, schema, extends))
    config = written.config
    following = ["gpustack", "render", str(config.path)]
    if profiles_dir is not None:
        following += ["--profiles-dir", str(profiles_dir)]
    common.echo(
        f"wrote {display_path(config.path)} (profile {written.profile}"
        + (f", extends {config.base}" if config.base else "")
        + f"); next: {shlex.join(following)} writes out/{config.cluster}/",
        err=True,
    )
    return 0
