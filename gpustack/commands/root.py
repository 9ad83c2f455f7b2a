"""The `gpustack` command: the root's own options and every command, each a function of its
module (`gpustack/commands/<name>.py`) whose signature declares its arguments and options,
parsed by typer."""

from __future__ import annotations

import importlib
from collections.abc import Iterator, MutableMapping
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from gpustack import __version__
from gpustack.commands import common

# Each command by its word, and the module whose `app` holds it.
COMMANDS = {
    "render": "gpustack.commands.render",
    "init": "gpustack.commands.init",
    "config": "gpustack.commands.config",
    "profiles": "gpustack.commands.profiles",
    "schema": "gpustack.commands.schema",
    "validate": "gpustack.commands.validate",
    "check": "gpustack.commands.check",
    "driver-toolkit-builds": "gpustack.commands.driver_toolkit",
    "diff": "gpustack.commands.diff",
    "images": "gpustack.commands.images",
    "import": "gpustack.commands.import_",
    "gitops": "gpustack.commands.gitops",
}


class Built(MutableMapping[str, Any]):
    """The root's commands by word (COMMANDS), each built by typer from its module's `app` when
    it is first looked up: a run builds its own command only (help, a word that names no
    command, and completing a command's name look at them all)."""

    def __init__(self) -> None:
        self.built: dict[str, Any] = {}

    def __getitem__(self, name: str) -> Any:
        if name not in self.built:
            module = importlib.import_module(COMMANDS[name])
            self.built[name] = typer.main.get_command(module.app)
        return self.built[name]

    def __setitem__(self, name: str, command: Any) -> None:
        self.built[name] = command

    def __delitem__(self, name: str) -> None:
        del self.built[name]

    def __iter__(self) -> Iterator[str]:
        return iter(COMMANDS)

    def __len__(self) -> int:
        return len(COMMANDS)


class Commands(TyperGroup):
    """The root group, its commands built when looked up (`Built`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.commands = Built()


def _version(value: bool) -> None:
    if value:
        common.echo(f"gpustack {__version__}")
        raise typer.Exit()


def _exit(code: int | None, **_: Any) -> None:
    """A command returns its exit code (0, or 1 for findings); the process ends with it."""
    raise typer.Exit(code or 0)


app = typer.Typer(
    cls=Commands,
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
    debug: common.Debug = False,
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


def command() -> Any:
    """The click command typer builds from `app`, which `cli.run` runs."""
    return typer.main.get_command(app)
