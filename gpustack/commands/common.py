"""What every command shares: its common options (each a parameter type: `Annotated` with its
`typer.Option`), printing, and grouping a fleet's messages."""

from __future__ import annotations

import codecs
import json
import os
import re
import sys
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from gpustack.errors import one_line

if TYPE_CHECKING:
    from gpustack.feedback import Messages, StartProgress


def profile_names(incomplete: str) -> list[str]:
    """Shell completion of a profile name: the built-in ones and $GPUSTACK_PROFILES_DIR's."""
    from gpustack.resolve import platform_profiles as profiles

    folder = os.environ.get("GPUSTACK_PROFILES_DIR")
    names = profiles.available(Path(folder) if folder else None)
    return [name for name in names if name.startswith(incomplete)]


# Fields `--set` cannot change (extends: bases are files) or that only one value fits.
_NOT_SET = {"extends", "apiVersion", "kind"}
PROFILE_FIELD = "platform.profile"


def set_fields(incomplete: str) -> list[str]:
    """Shell completion of `--set FIELD=VALUE` from the config schema (`gpustack schema`): the
    dotted paths of the fields that start with `incomplete`, each ending in `=`
    (`devicePlugin.sharing.replicas=`); after the `=`, a field's choices (an enum, a boolean,
    the profile names)."""
    from gpustack.validation.schemas import CONFIG_SCHEMA, schemas_dir

    schema = json.loads((schemas_dir() / CONFIG_SCHEMA).read_text(encoding="utf-8"))
    fields = dict(_field_paths(schema, schema, ()))
    path, equals, _ = incomplete.partition("=")
    if equals:
        choices = profile_names("") if path == PROFILE_FIELD else fields.get(path, [])
        return [
            f"{path}={choice}" for choice in choices if f"{path}={choice}".startswith(incomplete)
        ]
    return [f"{path}=" for path in fields if path.startswith(incomplete)]


def _field_paths(
    node: dict[str, Any], schema: dict[str, Any], prefix: tuple[str, ...]
) -> list[tuple[str, list[str]]]:
    """(dotted path, choices) of every field below `node` that holds a value (not a section)."""
    node = _resolved(node, schema)
    properties = node.get("properties")
    if not isinstance(properties, dict):
        path = ".".join(part.replace(".", "\\.") for part in prefix)
        return [(path, _choices(node))]
    found = []
    for name, child in sorted(properties.items()):
        if not prefix and name in _NOT_SET:
            continue
        found += _field_paths(child, schema, (*prefix, name))
    return found


def _resolved(node: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    """The schema of a field: its `$ref` followed, an optional (`anyOf` with null) unwrapped."""
    options = [each for each in node.get("anyOf", []) if each.get("type") != "null"]
    if len(options) == 1:
        node = {**node, **options[0]}
    reference = node.get("$ref")
    if isinstance(reference, str) and reference.startswith("#/$defs/"):
        node = {**schema["$defs"][reference.removeprefix("#/$defs/")], **node}
        node.pop("$ref")
    return node


def _choices(node: dict[str, Any]) -> list[str]:
    if isinstance(node.get("enum"), list):
        return [str(value) for value in node["enum"] if value is not None]
    if node.get("type") == "boolean":
        return ["true", "false"]
    return []


def application(help: str | None = None) -> typer.Typer:
    """A command's (or a group's) typer application: click's own help and messages, as plain
    text (no rich boxes), and no pretty tracebacks (a user error is a message, a traceback only
    with --debug)."""
    return typer.Typer(
        help=help, rich_markup_mode=None, pretty_exceptions_enable=False, add_completion=False
    )


# Options several commands share, declared once: each a type a command's parameter takes
# (`profiles_dir: ProfilesDir = None`), so the signature is the declaration.
def _root_profiles_dir(ctx: typer.Context, value: Path | None) -> Path | None:
    """A command's --profiles-dir: given, else $GPUSTACK_PROFILES_DIR, else the one given before
    the command (`gpustack --profiles-dir DIR render`)."""
    if value is not None:
        return value
    given = ctx.find_root().params.get("profiles_dir")
    return given if isinstance(given, Path) else None


ProfilesDir = Annotated[
    Path | None,
    typer.Option(
        "--profiles-dir",
        help="Folder of user profiles, searched before the built-in ones "
        "(default: $GPUSTACK_PROFILES_DIR).",
        metavar="DIR",
        envvar="GPUSTACK_PROFILES_DIR",
        show_envvar=True,
        callback=_root_profiles_dir,
    ),
]
Assignments = Annotated[
    list[str] | None,
    typer.Option(
        "--set",
        help="Override a config field, read as YAML and checked like the file "
        "(e.g. devicePlugin.sharing.replicas=8); repeatable, the last one wins.",
        metavar="FIELD=VALUE",
        autocompletion=set_fields,
        show_default=False,
    ),
]
Out = Annotated[
    Path,
    typer.Option("-o", "--out", help="Folder holding <name>/ per cluster.", metavar="DIR"),
]
Profile = Annotated[
    str | None,
    typer.Option(
        "--profile",
        help="Override platform.profile.",
        metavar="NAME",
        autocompletion=profile_names,
    ),
]


class Session:
    """What one command line sets for the whole run: whether --debug was given (before or after
    the command), so that a user error is raised with its traceback."""

    def __init__(self) -> None:
        self.debug = False


def debug_callback(ctx: typer.Context, value: bool) -> None:
    if value and isinstance(ctx.obj, Session):
        ctx.obj.debug = True


# The root and every command take it: `gpustack --debug render` and `gpustack render --debug`.
Debug = Annotated[
    bool,
    typer.Option(
        "--debug",
        help="Show tracebacks for errors.",
        callback=debug_callback,
        expose_value=False,
    ),
]


class TextOrJson(str, Enum):
    """`--output` of the commands that print text or JSON."""

    text = "text"
    json = "json"


_ANSI = re.compile(r"\033\[[;?0-9]*[a-zA-Z]")


def echo(message: str = "", nl: bool = True, err: bool = False, color: bool | None = None) -> None:
    """Print a line (or `message` as it is, without `nl`): colour codes are left out unless the
    stream is a terminal or `color` is true, a stream that says it is ASCII gets UTF-8 (with
    replacement characters), and the stream is flushed."""
    stream = sys.stderr if err else sys.stdout
    if stream is None:
        return
    text = message + "\n" if nl else message
    if not _isatty(stream) if color is None else not color:
        text = _ANSI.sub("", text)
    binary = getattr(stream, "buffer", None)
    if binary is not None and _ascii(getattr(stream, "encoding", None) or "ascii"):
        stream.flush()
        binary.write(text.encode("utf-8", "replace"))
        binary.flush()
        return
    stream.write(text)
    stream.flush()


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except Exception:
        return False


def _ascii(encoding: str) -> bool:
    try:
        return codecs.lookup(encoding).name == "ascii"
    except LookupError:
        return False


def error(message: str) -> None:
    echo(f"error: {one_line(message)}", err=True)


def warning(message: str) -> None:
    # One line, whatever names a pull request put in it (gpustack.errors.one_line).
    echo(f"warning: {one_line(message)}", err=True)


class ColorMode(str, Enum):
    auto = "auto"
    always = "always"
    never = "never"


Color = Annotated[
    ColorMode,
    typer.Option(
        "--color",
        help="Colour the text output: auto (on a terminal, unless NO_COLOR is set), always, never.",
        metavar="WHEN",
    ),
]
Quiet = Annotated[
    bool, typer.Option("-q", "--quiet", help="Print nothing but warnings and errors.")
]
Verbose = Annotated[
    bool,
    typer.Option(
        "--verbose",
        help="Name every cluster a repeated warning or finding is about (by default the first "
        "few).",
    ),
]


def use_color(mode: ColorMode) -> bool:
    if mode is ColorMode.auto:
        # https://no-color.org: a non-empty NO_COLOR turns colour off unless explicitly asked for.
        return sys.stdout.isatty() and not os.environ.get("NO_COLOR")
    return mode is ColorMode.always


class Progress:
    """`label done/total` on one stderr line that rewrites itself, only on a terminal and only
    for runs long enough to need it; `finish` clears it before the summary."""

    SHOWN_FROM = 20  # clusters or folders: fewer finish before a reader would look

    def __init__(self, total: int, label: str, enabled: bool = True) -> None:
        self.total, self.label, self.done, self.shown = total, label, 0, False
        self.enabled = enabled and total >= self.SHOWN_FROM and sys.stderr.isatty()

    def advance(self, count: int = 1) -> None:
        self.done += count
        if self.enabled:
            sys.stderr.write(f"\r{self.label} {self.done}/{self.total}")
            sys.stderr.flush()
            self.shown = True

    def finish(self) -> None:
        if self.shown:
            sys.stderr.write("\r\x1b[K")
            sys.stderr.flush()
            self.shown = False


def note(message: str) -> None:
    echo(f"note: {message}", err=True)


def messages(quiet: bool = False) -> Messages:
    """Where a library step's messages are printed, on stderr: its notes (none with `-q`), its
    warnings and its errors."""
    from gpustack.feedback import Messages, silent

    return Messages(silent if quiet else note, warning, error)


def progress(enabled: bool) -> StartProgress:
    """A library step's progress, shown (`Progress`) when `enabled`."""
    return lambda total, label: Progress(total, label, enabled)


def configs(paths: list[Path] | None, quiet: bool = False) -> list[Path | None]:
    """The configs a command reads (inventory.discover), saying so when it is the embedded example
    (unless `quiet`: `-q` prints only warnings and errors)."""
    from gpustack.resolve import inventory

    return inventory.discover_noted(paths or [], messages(quiet).note)
