"""The `gpustack` command as a typer application: the root command and every subcommand
(`gpustack/commands/<name>.py`). `gpustack.cli.main` runs it for what a plain run of a declared
command (render, validate, check, diff, schema; `declared.main`) does not cover: help,
completion, every mistake on the command line, and the other commands.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import typer
from typer import core

from gpustack import __version__
from gpustack.commands import (
    GLOBAL_FLAGS,
    check,
    common,
    completion,
    declared,
    diff,
    driver_toolkit,
    gitops,
    import_,
    init,
    profiles,
    render,
    schema,
    validate,
)


class Group(core.TyperGroup):
    """The root command: a global flag given after the command moves in front of it, and
    `validate` also takes kubeconform's single-dash flags."""

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        windows_expand_args: bool = True,
        **extra: Any,
    ) -> Any:
        # A plain run of a declared command goes by its own parser, as `gpustack` does.
        completing = (complete_var or completion.COMPLETE_VARIABLE) in os.environ
        arguments = list(sys.argv[1:] if args is None else args)
        code = None if completing else declared.main(arguments)
        if code is None:
            return super().main(
                args, prog_name, complete_var, standalone_mode, windows_expand_args, **extra
            )
        if standalone_mode:
            sys.exit(code)
        return code

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        if "--" in args:
            head, tail = args[: args.index("--")], args[args.index("--") :]
        else:
            head, tail = args, []
        flags = [arg for arg in head if arg in GLOBAL_FLAGS]
        rest = [arg for arg in head if arg not in GLOBAL_FLAGS]
        # The command is the first word that is neither an option nor an option's value.
        valued = {
            opt
            for param in self.params
            if not getattr(param, "is_flag", True)
            for opt in param.opts
        }
        command, index = None, 0
        while index < len(rest) and command is None:
            if not rest[index].startswith("-"):
                command = index
            index += 2 if rest[index] in valued else 1
        if command is not None and rest[command] == "validate":
            rest = [*rest[: command + 1], *validate.translate(rest[command + 1 :])]
        return list(super().parse_args(ctx, [*flags, *rest, *tail]))


_typer_display_type = core._TyperParameter.display_type


def _plain_display_type(self: Any, ctx: Any) -> str:
    """Help names a value by its metavar (or the option's name), never by a Python type such as
    `<list[Path]>`: an argument by its name alone, a choice by its values."""
    if isinstance(self, core.TyperArgument):
        return ""
    if self.type_descriptor.is_choice:
        return str(_typer_display_type(self, ctx)).strip("<>")
    return str(self.metavar or (self.name or "value").upper())


core._TyperParameter.display_type = _plain_display_type  # type: ignore[method-assign]


app = typer.Typer(
    cls=Group,
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
    context: typer.Context,
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks for errors."),
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
    profiles_dir: Path | None = common.PROFILES_DIR.typer(),
) -> None:
    common.DEBUG = debug
    if profiles_dir is not None:
        # The commands' own --profiles-dir (on their command line) still wins.
        context.default_map = _defaults(context.command, {"profiles_dir": str(profiles_dir)})


def _defaults(command: Any, values: dict[str, str]) -> dict[str, Any]:
    """A click default_map giving `values` to every subcommand that has such parameters."""
    result: dict[str, Any] = {}
    for name, sub in getattr(command, "commands", {}).items():
        if hasattr(sub, "commands"):
            result[name] = _defaults(sub, values)
        else:
            known = {parameter.name for parameter in sub.params}
            result[name] = {key: value for key, value in values.items() if key in known}
    return result


app.command("render")(declared.typer_command(render.COMMAND))
app.command("init")(init.command)
app.add_typer(profiles.app, name="profiles")
app.command("schema")(declared.typer_command(schema.COMMAND))
app.command("validate")(declared.typer_command(validate.COMMAND))
app.command("check")(declared.typer_command(check.COMMAND))
app.command("driver-toolkit-builds")(driver_toolkit.command)
app.command("diff")(declared.typer_command(diff.COMMAND))
app.command("import")(import_.command)
app.add_typer(gitops.app, name="gitops")
app.command("completion")(completion.command)
