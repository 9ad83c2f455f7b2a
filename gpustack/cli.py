"""The `gpustack` command. Each subcommand lives in `gpustack/commands/<name>.py`.

Exit codes: 0 success, 1 findings (invalid, stale, different), 2 usage or config error.
"""

from __future__ import annotations

from typing import Any

import typer
from typer.core import TyperGroup

from gpustack import __version__, tune_gc
from gpustack.commands import check, diff, gitops, init, profiles, render, schema, validate


class _Commands(TyperGroup):
    """The command group; `validate` also takes kubeconform's single-dash flags."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        position = next((n for n, arg in enumerate(args) if not arg.startswith("-")), None)
        if position is not None and args[position] == "validate":
            args = [*args[: position + 1], *validate.translate(args[position + 1 :])]
        result: list[str] = super().parse_args(ctx, args)
        return result


app = typer.Typer(
    cls=_Commands,
    name="gpustack",
    help="Render, validate and diff the NVIDIA GPU stack for Kubernetes, per platform profile.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"gpustack {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks for errors."),
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    from gpustack.commands import common

    common.DEBUG = debug


app.command("render")(render.command)
app.command("init")(init.command)
app.add_typer(profiles.app, name="profiles")
app.command("schema")(schema.command)
app.command("validate")(validate.command)
app.command("check")(check.command)
app.command("diff")(diff.command)
app.add_typer(gitops.app, name="gitops")


def main() -> None:
    tune_gc()
    app()
