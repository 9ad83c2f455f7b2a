"""The `gpustack` command: the root's own options and every command, each a function of its
module (`gpustack/commands/<name>.py`) whose signature declares its arguments and options,
parsed by typer."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from gpustack.commands import (
    check,
    common,
    config,
    diff,
    driver_toolkit,
    gitops,
    images,
    import_,
    init,
    profiles,
    render,
    schema,
    validate,
)


def _version(value: bool) -> None:
    if value:
        from gpustack import __version__

        common.echo(f"gpustack {__version__}")
        raise typer.Exit()


def _exit(code: int | None, **_: Any) -> None:
    """A command returns its exit code (0, or 1 for findings); the process ends with it."""
    raise typer.Exit(code or 0)


app = typer.Typer(
    help="Render, validate and diff the NVIDIA GPU stack for Kubernetes, per platform profile.",
    # click's own help and messages, as plain text: no rich boxes, no pretty tracebacks (a user
    # error is a message, and a traceback only with --debug).
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
    no_args_is_help=True,
    result_callback=_exit,
    context_settings={"help_option_names": ["-h", "--help"]},
)


@app.callback()
def root(
    debug: Annotated[
        bool,
        typer.Option("--debug", help=common.DEBUG_HELP, callback=common.debug_callback),
    ] = False,
    version: Annotated[
        bool,
        typer.Option(
            "--version", help="Print the version and exit.", is_eager=True, callback=_version
        ),
    ] = False,
    # A command's own --profiles-dir (or $GPUSTACK_PROFILES_DIR) still wins.
    profiles_dir: common.ProfilesDir = None,
) -> None:
    """Render, validate and diff the NVIDIA GPU stack for Kubernetes, per platform profile."""


app.command("render")(render.run)
app.command("init")(init.run)
app.add_typer(config.app, name="config")
app.add_typer(profiles.app, name="profiles")
app.command("schema")(schema.run)
app.command("validate", cls=validate.KubeconformFlags)(validate.run)
app.command("check")(check.run)
app.command("driver-toolkit-builds")(driver_toolkit.run)
app.command("diff")(diff.run)
app.command("images")(images.run)
app.command("import")(import_.run)
app.add_typer(gitops.app, name="gitops")


def command() -> Any:
    """The click command typer builds from `app`, which `cli.run` runs."""
    return typer.main.get_command(app)
