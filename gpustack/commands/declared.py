"""A command declared once: its arguments and options, from which both typer's command (help,
shell completion, every error message) and a small parser for a plain command line are made.

`main` runs a plain command line (`gpustack render -o out`) by that parser, without building
typer's application: typer's option handling is a good part of a short run's start-up. Whatever
the parser does not read exactly as typer would (help, an unknown option, a value typer refuses
or reads its own way) it leaves to typer, so messages and exit codes are typer's.
"""

from __future__ import annotations

import importlib
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

from gpustack.commands import GLOBAL_FLAGS

# The commands declared here, by name: each module's COMMAND. `gpustack/commands/root.py`
# gives them to typer; `main` loads only the one a command line runs.
COMMANDS = {
    "render": "gpustack.commands.render",
    "validate": "gpustack.commands.validate",
    "check": "gpustack.commands.check",
    "diff": "gpustack.commands.diff",
    "schema": "gpustack.commands.schema",
}


@dataclass(frozen=True)
class Option:
    """One option: the parameter it sets, its spellings (a switch with a negative form:
    "--strict/--no-strict"), and what it takes: str, int, Path or an Enum; None for a switch."""

    parameter: str
    names: tuple[str, ...]
    help: str
    value: Any = None
    default: Any = None
    repeatable: bool = False
    metavar: str | None = None
    minimum: int | None = None
    envvar: str | None = None  # read when the option is not given (a non-empty value)
    complete: Callable[[str], list[str]] | None = None  # the shell's completions of a value
    hidden: bool = False  # left out of help and completion (set by a command's `translate`)

    @property
    def annotation(self) -> Any:
        """The parameter's type, as typer reads it."""
        kind = self.value or bool
        if self.repeatable:
            return list[kind]  # type: ignore[valid-type]
        return kind if self.default is not None else kind | None

    def typer(self) -> Any:
        """The option as typer declares it."""
        import typer

        return typer.Option(
            self.default,
            *self.names,
            help=self.help,
            metavar=self.metavar,
            min=self.minimum,
            envvar=self.envvar,
            autocompletion=self.complete,
            hidden=self.hidden,
        )


@dataclass(frozen=True)
class Arguments:
    """The command's positional arguments, any number of them, each a `value` (str or Path)."""

    parameter: str
    metavar: str
    help: str
    value: type = str

    @property
    def annotation(self) -> Any:
        return list[self.value]  # type: ignore[name-defined]


@dataclass(frozen=True)
class Command:
    """A command: `run` takes every argument and option as a keyword and returns the exit code
    (a UserError is printed and exits 2)."""

    help: str
    run: Callable[..., int]
    options: tuple[Option, ...]
    arguments: Arguments | None = None
    # Rewrites the words after the command before they are parsed (validate: kubeconform's flags).
    translate: Callable[[list[str]], list[str]] | None = None


def invoke(command: Command, values: dict[str, Any]) -> int:
    """Run the command; a UserError is printed as `error: file:line:col: field: message` and is
    exit 2 (with --debug it is raised, for its traceback)."""
    from gpustack.commands import common
    from gpustack.errors import UserError

    try:
        return command.run(**values)
    except UserError as problem:
        if common.DEBUG:
            raise
        for each in problem.every():
            common.error(str(each))
        return 2
    except KeyboardInterrupt:
        return 130


def typer_command(command: Command) -> Callable[..., None]:
    """The command as typer declares it, for help, shell completion and the command lines `main`
    leaves to typer."""
    # Deferred: a plain run needs neither.
    import inspect

    import typer

    keyword = inspect.Parameter.POSITIONAL_OR_KEYWORD
    parameters = []
    if command.arguments is not None:
        arguments = command.arguments
        declared = typer.Argument(None, metavar=arguments.metavar, help=arguments.help)
        parameters.append(
            inspect.Parameter(
                arguments.parameter, keyword, default=declared, annotation=arguments.annotation
            )
        )
    parameters += [
        inspect.Parameter(
            option.parameter, keyword, default=option.typer(), annotation=option.annotation
        )
        for option in command.options
    ]

    def function(**values: Any) -> None:
        raise typer.Exit(invoke(command, values))

    function.__doc__ = command.help
    function.__signature__ = inspect.Signature(parameters, return_annotation=None)  # type: ignore[attr-defined]
    return function


def main(arguments: list[str]) -> int | None:
    """`gpustack ARGUMENTS`, when it is a plain run of a command declared here (global flags
    anywhere, root options before the command): its exit code; `--version`: 0. None for anything
    else, which the typer application then handles, with its messages."""
    from gpustack.commands import common

    at = arguments.index("--") if "--" in arguments else len(arguments)
    head, tail = arguments[:at], arguments[at:]
    debug = "--debug" in head
    rest = [argument for argument in head if argument not in GLOBAL_FLAGS]
    # The root options (`gpustack --profiles-dir DIR --version COMMAND`), as typer reads them.
    defaults: dict[str, str] = {}
    version = False
    index = 0
    while index < len(rest) and rest[index].startswith("-"):
        name, equals, value = rest[index].partition("=")
        if rest[index] == "--version":
            version = True
        elif name == "--profiles-dir":
            if not equals:
                index += 1
                if index == len(rest):
                    return None
                value = rest[index]
            if not value:
                return None
            defaults["profiles_dir"] = value
        else:
            return None
        index += 1
    if version:  # typer's --version is eager: it prints before the command is looked at
        from gpustack import __version__

        common.echo(f"gpustack {__version__}")
        return 0
    if index == len(rest) or rest[index] not in COMMANDS:
        return None
    command: Command = importlib.import_module(COMMANDS[rest[index]]).COMMAND
    words = rest[index + 1 :]
    if command.translate is not None:
        words = command.translate(words)
    values = parse(command, [*words, *tail], defaults)
    if values is None:
        return None
    common.DEBUG = debug
    return invoke(command, values)


class _Refused(Exception):
    """A value typer would refuse, or read otherwise than `_value` does: typer's to handle."""


def _value(kind: Any, text: str, minimum: int | None = None) -> Any:
    """`text` as the value of an option or argument of type `kind`, as typer reads it."""
    if kind is str:
        return text
    if kind is int and re.fullmatch("[0-9]+", text):
        number = int(text)
        if minimum is None or number >= minimum:
            return number
    if kind is Path and text:  # typer reads "" as the current folder
        return Path(text)
    if isinstance(kind, type) and issubclass(kind, Enum):
        for member in kind:
            if member.value == text:
                return member
    raise _Refused(text)


def parse(
    command: Command, arguments: list[str], defaults: dict[str, str] | None = None
) -> dict[str, Any] | None:
    """The words after the command as its parameters, read as typer (click) reads them; None when
    they ask for help or are a mistake, or anything typer might read otherwise. `defaults`: the
    root options' values for the command's parameters of the same name (--profiles-dir)."""
    long: dict[str, tuple[Option, bool]] = {}
    short: dict[str, tuple[Option, bool]] = {}
    for option in command.options:
        for name in option.names:
            positive, _, negative = name.partition("/")
            for spelling, switch in ((positive, True), (negative, False)):
                if spelling:
                    (short if len(spelling) == 2 else long)[spelling] = (option, switch)
    values: dict[str, Any] = {option.parameter: option.default for option in command.options}
    given: set[str] = set()
    positional: list[str] = []
    pending = list(reversed(arguments))
    try:
        while pending:
            argument = pending.pop()
            if argument == "--":
                positional.extend(reversed(pending))
                break
            if not argument.startswith("-") or argument == "-":
                positional.append(argument)
                continue
            name, equals, attached = argument.partition("=")
            if name in long:
                option, switch = long[name]
                if equals:
                    if option.value is None:
                        return None  # click: the option does not take a value
                    pending.append(attached)
            elif argument[:2] in short:
                option, switch = short[argument[:2]]  # click: `-ojson` is `-o json`
                if len(argument) > 2:
                    if option.value is None:
                        return None  # `-qo DIR`: several short options in one word
                    pending.append(argument[2:])
            else:
                return None  # unknown, or -h/--help
            given.add(option.parameter)
            if option.value is None:
                values[option.parameter] = switch
                continue
            if not pending:
                return None  # click: the option requires an argument
            value = _value(option.value, pending.pop(), option.minimum)
            if option.repeatable:
                values[option.parameter] = [*(values[option.parameter] or []), value]
            else:
                values[option.parameter] = value
        for option in command.options:
            if option.parameter in given:
                continue
            # click: the command line, then the environment, then the root's value, then the default
            from_environment = os.environ.get(option.envvar) if option.envvar else None
            if from_environment:
                values[option.parameter] = _value(option.value, from_environment)
            elif defaults and option.parameter in defaults:
                values[option.parameter] = _value(option.value, defaults[option.parameter])
        if command.arguments is None:
            return None if positional else values
        kind = command.arguments.value
        items = [_value(kind, argument) for argument in positional]
    except _Refused:
        return None
    return {command.arguments.parameter: items or None, **values}
