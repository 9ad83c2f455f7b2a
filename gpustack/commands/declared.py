"""The command line, declared once and parsed by argparse (standard library): every command's
arguments and options are data here (`Option`, `Arguments`, `Command`, `Group`), and the same
declarations give the parser, its help, its error messages (exit 2) and shell completion.

A command module is imported only when its command runs (or when help or completion lists
every command): a run pays for its own command's parser and nothing else (start-up time).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable, Iterator
from enum import Enum
from pathlib import Path
from typing import Any, NamedTuple, Union

from gpustack.commands import COMPLETE_VARIABLE


class Option(NamedTuple):
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
    # Run as soon as the option is read, before anything else on the command line (--version).
    eager: Callable[[], None] | None = None

    @property
    def spellings(self) -> list[tuple[str, bool]]:
        """Each spelling and the value a switch spelled so sets (False for its negative form)."""
        found = []
        for name in self.names:
            positive, _, negative = name.partition("/")
            found += [(positive, True)] + ([(negative, False)] if negative else [])
        return found

    def completions(self, incomplete: str) -> list[str]:
        if self.complete is not None:
            return self.complete(incomplete)
        if isinstance(self.value, type) and issubclass(self.value, Enum):
            return [m.value for m in self.value if str(m.value).startswith(incomplete)]
        return []


class Arguments(NamedTuple):
    """Positional arguments: `number` "*" (any number, the parameter a list or None), "+" (one or
    more) or 1 (exactly one; with a `default`, optional); each a `value` (str, Path or an Enum)."""

    parameter: str
    metavar: str
    help: str
    value: Any = str
    number: int | str = "*"
    default: Any = None
    complete: Callable[[str], list[str]] | None = None

    def completions(self, incomplete: str) -> list[str]:
        return Option(self.parameter, (), "", self.value, complete=self.complete).completions(
            incomplete
        )


class Command(NamedTuple):
    """A command: `run` takes every argument and option as a keyword and returns the exit code
    (a UserError is printed and exits 2)."""

    help: str
    run: Callable[..., int]
    options: tuple[Option, ...]
    arguments: Arguments | tuple[Arguments, ...] | None = None
    # Rewrites the words after the command before they are parsed (validate: kubeconform's flags).
    translate: Callable[[list[str]], list[str]] | None = None

    @property
    def positionals(self) -> tuple[Arguments, ...]:
        if self.arguments is None:
            return ()
        if isinstance(self.arguments, Arguments):
            return (self.arguments,)
        return self.arguments


Entry = Union[Command, "Group", str]


class Group(NamedTuple):
    """Commands under one word (the program itself, `profiles`): each a Command, a Group, or the
    name of the module whose COMMAND it is (imported when used). `options` are the group's own,
    given before the command; a parameter they share with a command is that command's default."""

    help: str
    commands: dict[str, Entry]
    options: tuple[Option, ...] = ()

    def command(self, name: str) -> Command | Group:
        entry = self.commands[name]
        if isinstance(entry, str):
            loaded: Command | Group = importlib.import_module(entry).COMMAND
            return loaded
        return entry

    def each(self) -> Iterator[tuple[str, Command | Group]]:
        """Every command, by name (each module imported)."""
        for name in self.commands:
            yield name, self.command(name)


# Options of every command, also after the command's name (`gpustack render --debug`).
DEBUG = Option("debug", ("--debug",), "Show tracebacks for errors.", default=False)


def summary(help: str) -> str:
    """A command's first sentence, as a list of commands shows it."""
    return help.split("\n\n")[0].split(". ")[0].strip().rstrip(".")


# --- parsing ---------------------------------------------------------------------------------


class _Formatter(argparse.RawDescriptionHelpFormatter):
    """Help as written (paragraphs kept), wrapped to the terminal ($COLUMNS, else its width)."""

    def __init__(self, prog: str) -> None:
        super().__init__(prog, max_help_position=30, width=_columns() - 2)


def _columns() -> int:
    # As shutil.get_terminal_size, without importing shutil (and the compression modules it
    # loads) on every run: argparse makes a formatter for each option it is given.
    try:
        return int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        pass
    try:
        return os.get_terminal_size(sys.__stdout__.fileno()).columns or 80  # type: ignore[union-attr]
    except (AttributeError, ValueError, OSError):
        return 80


class _Eager(argparse.Action):
    """An option that runs `eager` and ends the run (exit 0) as soon as it is read."""

    def __init__(
        self, option_strings: list[str], dest: str, eager: Callable[[], None], help: str
    ) -> None:
        super().__init__(option_strings, dest, nargs=0, help=help)
        self.eager = eager

    def __call__(self, parser: Any, namespace: Any, values: Any, option: Any = None) -> None:
        self.eager()
        parser.exit(0)


def _converter(kind: Any, minimum: int | None = None) -> Callable[[str], Any]:
    """`text` as a value of `kind`, or argparse's "invalid value" message."""

    def convert(text: str) -> Any:
        if kind is int:
            try:
                number = int(text)
            except ValueError:
                raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
            if minimum is not None and number < minimum:
                raise argparse.ArgumentTypeError(f"{text} is less than {minimum}")
            return number
        if kind is Path:
            return Path(text)
        if isinstance(kind, type) and issubclass(kind, Enum):
            for member in kind:
                if member.value == text:
                    return member
            choices = ", ".join(repr(member.value) for member in kind)
            raise argparse.ArgumentTypeError(f"{text!r} is not one of {choices}")
        return text

    convert.__name__ = getattr(kind, "__name__", "value")
    return convert


def _dedented(help: str) -> str:
    """A docstring's text with the indentation of its lines after the first taken away."""
    first, *rest = help.strip().splitlines() or [""]
    indent = min((len(line) - len(line.lstrip()) for line in rest if line.strip()), default=0)
    return "\n".join([first, *(line[indent:] for line in rest)])


def _escaped(text: str) -> str:
    return text.replace("%", "%%")


def _option_help(option: Option) -> str:
    if option.hidden:
        return argparse.SUPPRESS
    text = option.help
    if option.value is not None and option.default is not None and not option.repeatable:
        default = option.default.value if isinstance(option.default, Enum) else option.default
        text += f" [default: {default}]"
    if option.envvar:
        text += f" [env var: {option.envvar}]"
    return _escaped(text)


def _metavar(option: Option) -> str:
    if option.metavar:
        return option.metavar
    if isinstance(option.value, type) and issubclass(option.value, Enum):
        return "|".join(member.value for member in option.value)
    return option.names[-1].lstrip("-").upper()


def _add_option(parser: argparse.ArgumentParser, option: Option, dest: str) -> None:
    if option.eager is not None:
        parser.add_argument(
            *option.names, action=_Eager, eager=option.eager, help=_option_help(option)
        )
        return
    if option.value is None:
        for switch in (True, False):
            spellings = [each for each, sets in option.spellings if sets is switch]
            if spellings:
                parser.add_argument(
                    *spellings,
                    dest=dest,
                    action="store_const",
                    const=switch,
                    default=None,
                    help=_option_help(option) if switch else argparse.SUPPRESS,
                )
        return
    parser.add_argument(
        *option.names,
        dest=dest,
        type=_converter(option.value, option.minimum),
        action="append" if option.repeatable else "store",
        default=None,
        metavar=_metavar(option),
        help=_option_help(option),
    )


def _add_arguments(parser: argparse.ArgumentParser, arguments: Arguments) -> None:
    nargs: Any = arguments.number
    if arguments.number == 1:
        nargs = "?" if arguments.default is not None else None
    parser.add_argument(
        arguments.parameter,
        type=_converter(arguments.value),
        nargs=nargs,
        default=arguments.default,
        metavar=arguments.metavar,
        help=_escaped(arguments.help),
    )


# Parsers built for a command line, kept for the next one in the same process (a program that
# runs several, like dev/generate.py, builds each once: about 1.5 ms a command line). argparse
# leaves a parser as it found it after parsing, so one serves any number of command lines.
_BUILT: dict[tuple[str, int, bool], tuple[Command | Group, argparse.ArgumentParser]] = {}


def _built(prog: str, entry: Command | Group, commands: bool = True) -> argparse.ArgumentParser:
    """The parser of `entry` (without a group's commands unless `commands`), built once."""
    key = (prog, id(entry), commands)
    kept = _BUILT.get(key)
    if kept is not None and kept[0] is entry:  # the id of an entry no longer alive may recur
        return kept[1]
    parser = _new(prog, entry.help)
    if isinstance(entry, Group) and not commands:
        parser.usage = f"{prog} [OPTIONS] COMMAND ..."
    _fill(parser, entry, commands=commands)
    _BUILT[key] = (entry, parser)
    return parser


def _new(prog: str, help: str) -> argparse.ArgumentParser:
    return argparse.ArgumentParser(
        prog=prog,
        description=_escaped(_dedented(help)),
        formatter_class=_Formatter,
        add_help=False,
        allow_abbrev=False,
    )


def _fill(parser: argparse.ArgumentParser, entry: Command | Group, commands: bool = True) -> None:
    """Declare `entry`'s arguments and options, and a group's commands (unless not `commands`)."""
    parser.add_argument("-h", "--help", action="help", help="Show this message and exit.")
    if isinstance(entry, Command):
        for arguments in entry.positionals:
            _add_arguments(parser, arguments)
        for option in (*entry.options, DEBUG):
            _add_option(parser, option, option.parameter)
        return
    for option in entry.options:
        _add_option(parser, option, f"_group_{option.parameter}")
    if not commands:
        return
    listed = parser.add_subparsers(metavar="COMMAND", title="commands")
    listed.required = True
    for name, sub in entry.each():
        child = listed.add_parser(
            name,
            help=_escaped(summary(sub.help)),
            description=_escaped(_dedented(sub.help)),
            formatter_class=_Formatter,
            add_help=False,
            allow_abbrev=False,
        )
        _fill(child, sub)


def _target(group: Group, arguments: list[str]) -> tuple[str | None, int]:
    """The command word a command line names in `group` (None if none, unknown, or after a
    request for help) and where it is, skipping the group's own options and their values."""
    valued = {
        spelling
        for option in group.options
        if option.value is not None
        for spelling, _ in option.spellings
    }
    index = 0
    while index < len(arguments):
        word = arguments[index]
        if word in ("-h", "--help"):
            return None, index
        if word == "--" or not word.startswith("-") or word == "-":
            break
        index += 2 if word in valued else 1
    if index < len(arguments) and arguments[index] in group.commands:
        return arguments[index], index
    return None, index


def parse(
    entry: Command | Group, prog: str, arguments: list[str], namespace: argparse.Namespace
) -> Command:
    """Parse `arguments` into `namespace`; the command they run. argparse's messages and exit
    (SystemExit) for help, --version and mistakes. Only the modules of the commands named are
    loaded (of a group's every command when none is named, for its help or message)."""
    if isinstance(entry, Command):
        at = arguments.index("--") if "--" in arguments else len(arguments)
        head, tail = arguments[:at], arguments[at + 1 :]
        if entry.translate is not None:
            head = entry.translate(head)
        # Words after `--` are arguments, whatever they look like: each stands in the command
        # line as a word no option can take (argparse's intermixed parsing forgets `--`).
        after = {f"\0{index}": word for index, word in enumerate(tail)}
        parser = _built(prog, entry)
        parser.parse_intermixed_args([*head, *after], namespace)
        for arguments_ in entry.positionals:
            value = getattr(namespace, arguments_.parameter)
            given = value if isinstance(value, list) else [value]
            if any(str(each) in after for each in given):
                convert = _converter(arguments_.value)
                try:
                    words = [convert(after[str(w)]) if str(w) in after else w for w in given]
                except argparse.ArgumentTypeError as problem:
                    parser.error(f"argument {arguments_.metavar}: {problem}")
                setattr(
                    namespace, arguments_.parameter, words if isinstance(value, list) else words[0]
                )
        return entry
    name, index = _target(entry, arguments)
    if name is None:  # help, or a mistake: argparse's, with every command listed
        parser = _new(prog, entry.help)
        if "-h" not in arguments and "--help" not in arguments:
            # The group's own options first: --version answers without loading any command.
            parser.usage = f"{prog} [OPTIONS] COMMAND ..."
            _fill(parser, entry, commands=False)
            parser.parse_known_args(arguments, argparse.Namespace())
            parser = _new(prog, entry.help)
        _fill(parser, entry)
        parser.parse_args(arguments, namespace)
        raise SystemExit(2)
    _built(prog, entry, commands=False).parse_args(arguments[:index], namespace)
    return parse(entry.command(name), f"{prog} {name}", arguments[index + 1 :], namespace)


def values(command: Command, parsed: argparse.Namespace) -> dict[str, Any]:
    """The command's keyword arguments: given on the command line, else from the option's
    environment variable, else the root option of the same parameter, else the default."""
    found: dict[str, Any] = {a.parameter: getattr(parsed, a.parameter) for a in command.positionals}
    for arguments in command.positionals:
        if arguments.number == "*" and not found[arguments.parameter]:
            found[arguments.parameter] = None
    for option in command.options:
        value = getattr(parsed, option.parameter)
        if value is None and option.envvar and os.environ.get(option.envvar):
            value = _from_environment(option, os.environ[option.envvar])
            if option.repeatable:
                value = [value]
        if value is None:
            value = getattr(parsed, f"_group_{option.parameter}", None)
        found[option.parameter] = option.default if value is None else value
    return found


def _from_environment(option: Option, text: str) -> Any:
    try:
        return _converter(option.value, option.minimum)(text)
    except argparse.ArgumentTypeError as problem:
        from gpustack.errors import UserError

        raise UserError(f"{option.envvar}: {problem}") from None


def invoke(command: Command, parsed: argparse.Namespace) -> int:
    """Run the command with what the command line gave it; a UserError is printed as
    `error: file:line:col: field: message` and is exit 2 (with --debug it is raised, for its
    traceback)."""
    from gpustack.commands import common
    from gpustack.errors import UserError

    try:
        return command.run(**values(command, parsed))
    except UserError as problem:
        if common.DEBUG:
            raise
        for each in problem.every():
            common.error(str(each))
        return 2
    except KeyboardInterrupt:
        return 130


def files_as_files(arguments: list[str]) -> list[str]:
    """`arguments` with every one that starts with `-` and is the name of a file or folder moved
    after a `--`, where it is read as a path. pre-commit appends the changed files' names to a
    hook's command line with no `--` before them (pre-commit/pre-commit#2896, closed as not its
    concern), so a file a pull request commits as `-ofake/x.yaml` would be read as `-o
    fake/x.yaml` and point `gpustack check` at an output folder the pull request made up; the
    hook would pass where CI fails. An option is never the name of a file that exists."""
    end = arguments.index("--") if "--" in arguments else len(arguments)
    named = [
        index
        for index, argument in enumerate(arguments[:end])
        if argument.startswith("-") and argument != "-" and os.path.lexists(argument)
    ]
    if not named:
        return arguments
    before = [argument for index, argument in enumerate(arguments[:end]) if index not in named]
    return [*before, "--", *(arguments[index] for index in named), *arguments[end + 1 :]]


def main(root: Group, arguments: list[str]) -> int:
    """Run `gpustack ARGUMENTS`: the exit code (2 for a mistake on the command line, after
    argparse's message; 0 after help or --version)."""
    from gpustack.commands import common

    if COMPLETE_VARIABLE in os.environ:
        from gpustack.commands import completion

        return completion.respond(root, os.environ[COMPLETE_VARIABLE])
    if not arguments:
        parser = _new("gpustack", root.help)
        _fill(parser, root)
        parser.print_help(sys.stderr)
        return 2
    parsed = argparse.Namespace()
    try:
        command = parse(root, "gpustack", files_as_files(arguments), parsed)
    except SystemExit as done:  # help, --version, or argparse's message about a mistake
        return done.code if isinstance(done.code, int) else 0 if done.code is None else 1
    common.DEBUG = bool(parsed.debug or getattr(parsed, "_group_debug", None))
    return invoke(command, parsed)


# --- what completion and the documentation checks walk -------------------------------------------


def every_option(entry: Command | Group) -> list[Option]:
    """The options a user writes for `entry` (hidden ones left out), with --debug."""
    shown = [option for option in entry.options if not option.hidden]
    return [*shown, DEBUG] if isinstance(entry, Command) else shown
